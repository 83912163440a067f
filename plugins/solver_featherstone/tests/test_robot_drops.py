"""Legged robots of the shared corpus dropped on the ground at their own MJCF time steps.

SolverFeatherstone + CollisionPipeline with the models as imported (default contact materials):
the root body never rises more than 1 cm above its start (no energy gain through the contacts),
the robots settle with little penetration, and the ant and the cheetah rest within 2 cm of the
root height MuJoCo reaches from the same state (MuJoCo run live, 3 s). The ant starts from the
joint angles of its own ``init_qpos`` (``<numeric>`` in the MJCF) at its body position 0.75 m:
its ``qpos0`` puts the ankles 30 degrees outside their limits, a state whose limit springs hold
5.5 kJ (the ankles snap into range and the torso rises in free flight, in MuJoCo too).
"""

from __future__ import annotations

import functools
import os
import warnings
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import warp as wp

pytest.importorskip("armillary_importer_mjcf")

import armillary  # noqa: E402
from armillary.solvers import SolverFeatherstone  # noqa: E402
from armillary.testing.assets import shared_assets_dir  # noqa: E402

wp.config.log_level = wp.LOG_WARNING

ASSETS = shared_assets_dir()
pytestmark = pytest.mark.skipif(ASSETS is None, reason="shared asset corpus (../shared/assets) not available")

SECONDS = 3.0
ROBOTS = {"ant": "ant/ant.xml", "humanoid": "humanoid/humanoid.xml", "cheetah": "cheetah/cheetah.xml",
          "ant_qpos0": "ant/ant.xml"}


def _xml(name):
    return os.path.join(str(ASSETS), "mjcf", ROBOTS[name])


def _initial_angles(name):
    """The ant's joint angles from its MJCF ``init_qpos`` (None for the others and for
    ``"ant_qpos0"``, the ant from its default pose)."""
    if name != "ant":
        return None
    node = ET.parse(_xml(name)).getroot().find(".//numeric[@name='init_qpos']")
    return np.array([float(v) for v in node.get("data").split()])[7:]


def _penetration(model, state, contacts):
    """Deepest penetration [m] among the contacts (surface distance below the margins)."""
    n = int(contacts.rigid_contact_count.numpy()[0])
    if n == 0:
        return 0.0
    body_q = state.body_q.numpy().astype(np.float64)
    shape_body = model.shape_body.numpy()

    def world(shape, p):
        b = shape_body[shape]
        if b < 0:
            return p
        x, y, z, w = body_q[b, 3:]
        u = np.array([x, y, z])
        return body_q[b, :3] + p + 2.0 * w * np.cross(u, p) + 2.0 * np.cross(u, np.cross(u, p))

    c = contacts
    normal = c.rigid_contact_normal.numpy()[:n]
    s0, s1 = c.rigid_contact_shape0.numpy()[:n], c.rigid_contact_shape1.numpy()[:n]
    p0, p1 = c.rigid_contact_point0.numpy()[:n], c.rigid_contact_point1.numpy()[:n]
    m0, m1 = c.rigid_contact_margin0.numpy()[:n], c.rigid_contact_margin1.numpy()[:n]
    depth = [
        -np.dot(normal[k], (world(s1[k], p1[k]) - normal[k] * m1[k]) - (world(s0[k], p0[k]) + normal[k] * m0[k]))
        for k in range(n)
    ]
    return max(0.0, float(max(depth)))


def _drop(name):
    """Root height every step over SECONDS, final penetration and joint speeds, MJCF time step."""
    b = armillary.ModelBuilder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b.add_mjcf(_xml(name))
    dt = float(b.timestep)
    model = b.finalize(device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # the defaults: the contact-stiffness floor and the joint-limit floor (the ant from its default
        # pose needs the latter)
        solver = SolverFeatherstone(model)
    pipeline = armillary.CollisionPipeline(model)
    contacts = pipeline.contacts()
    s0, s1 = model.state(), model.state()
    angles = _initial_angles(name)
    if angles is not None:
        q = s0.joint_q.numpy()
        q[7:] = angles
        s0.joint_q.assign(q)
    armillary.eval_fk(model, s0.joint_q, s0.joint_qd, s0)
    root = list(model.body_label).index("torso")
    control = model.control()
    z = [float(s0.body_q.numpy()[root, 2])]
    for _ in range(int(round(SECONDS / dt))):
        s0.clear_forces()
        pipeline.collide(s0, contacts)
        solver.step(s0, s1, control, contacts, dt)
        s0, s1 = s1, s0
        z.append(float(s0.body_q.numpy()[root, 2]))
    pipeline.collide(s0, contacts)
    return dt, np.array(z), _penetration(model, s0, contacts), np.abs(s0.joint_qd.numpy()).max()


def _mujoco_rest(name):
    mujoco = pytest.importorskip("mujoco")
    m = mujoco.MjModel.from_xml_path(_xml(name))
    d = mujoco.MjData(m)
    angles = _initial_angles(name)
    if angles is not None:
        d.qpos[7:] = angles
    for _ in range(int(round(SECONDS / m.opt.timestep))):
        mujoco.mj_step(m, d)
    return float(d.xpos[m.body("torso").id, 2])


@functools.lru_cache(maxsize=None)
def _dropped(name):
    return _drop(name)


@pytest.mark.parametrize("name", ["ant", "cheetah", "humanoid"])
def test_dropped_robot_never_rises_above_its_start_and_settles(name):
    """At the MJCF time step (ant and cheetah 10 ms, humanoid 5 ms): the root never goes more than
    1 cm above its start, and after 3 s the robot is still (joint speeds < 0.05) with a deepest
    contact penetration below 5 mm (before the contact-stiffness floor: humanoid 20 mm, cheetah 29 mm)."""
    dt, z, depth, speed = _dropped(name)
    assert np.isfinite(z).all()
    assert z.max() <= z[0] + 0.01, (name, z[0], z.max())
    assert depth < 5.0e-3, (name, depth)
    assert speed < 0.05, (name, speed)


@pytest.mark.parametrize("name", ["ant", "cheetah"])
def test_dropped_robot_rests_at_mujocos_root_height(name):
    """The root rests within 2 cm of MuJoCo's root height after 3 s from the same state (measured:
    ant 0.573 vs 0.563 m, cheetah 0.594 vs 0.591 m; the cheetah was 0.556 m before the
    contact-stiffness floor)."""
    _, z, _, _ = _dropped(name)
    expected = _mujoco_rest(name)
    assert abs(z[-1] - expected) < 0.02, (name, z[-1], expected)


def test_ant_from_its_default_pose_lands_like_mujoco():
    """The ant's ``qpos0`` starts its ankles 30 degrees outside their limits. The default joint-limit
    floor (``limit_time_constant=0.02``, a critically damped 0.02 s spring on the DOF's mass-matrix
    diagonal, MuJoCo's default soft limit) undoes that without the flailing of the bare ``limit_ke`` 1e4 /
    ``limit_kd`` 10 springs: the root rises at most 1 cm more than MuJoCo's (measured 3.2 vs
    2.4 cm) and rests within 2 cm of MuJoCo's height (measured 0.557 vs 0.556 m; 0.382 m
    without the floor)."""
    mujoco = pytest.importorskip("mujoco")
    _, z, _, speed = _dropped("ant_qpos0")
    m = mujoco.MjModel.from_xml_path(_xml("ant_qpos0"))
    d = mujoco.MjData(m)
    torso = m.body("torso").id
    mj_z = []
    for _ in range(int(round(SECONDS / m.opt.timestep))):
        mujoco.mj_step(m, d)
        mj_z.append(float(d.xpos[torso, 2]))
    assert np.isfinite(z).all()
    assert z.max() - z[0] <= max(mj_z) - z[0] + 0.01, (z.max(), max(mj_z), z[0])
    assert abs(z[-1] - mj_z[-1]) < 0.02, (z[-1], mj_z[-1])
    assert speed < 0.05, speed

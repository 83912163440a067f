"""MuJoCo Warp backend (on Warp's CPU device here) against the C engine: armillary contacts
(``use_mujoco_contacts=False``) written into MuJoCo Warp's contact arrays, and worlds with
different parameters (batched model arrays, also after ``notify_model_changed``)."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

mujoco = pytest.importorskip("mujoco")
pytest.importorskip("mujoco_warp")

import armillary as newton  # noqa: E402
from armillary import ModelBuilder  # noqa: E402
from armillary.flags import ModelFlags  # noqa: E402
from armillary_solver_mujoco.solver import SolverMuJoCo  # noqa: E402

wp.config.log_level = wp.LOG_WARNING


def _scene():
    """Two worlds: a tilted box and a sphere dropped on the ground plane (global)."""
    t = ModelBuilder(gravity=(0.0, 0.0, -9.81))
    box = t.add_body(xform=wp.transform((0.0, 0.0, 0.3), wp.quat_from_axis_angle(wp.vec3(1.0, 0.2, 0.0), 0.4)))
    t.add_shape_box(box, hx=0.1, hy=0.08, hz=0.05)
    ball = t.add_body(xform=wp.transform((0.4, 0.0, 0.2), wp.quat_identity()))
    t.add_shape_sphere(ball, radius=0.06)
    b = ModelBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_ground_plane()
    b.replicate(t, 2)
    return b.finalize()


def test_injected_contacts_match_the_c_engine():
    out = []
    for cpu in (True, False):
        model = _scene()
        solver = SolverMuJoCo(model, use_mujoco_cpu=cpu, use_mujoco_contacts=False, integrator="implicitfast")
        pipeline = newton.CollisionPipeline(model)
        contacts = pipeline.contacts()
        s0, s1 = model.state(), model.state()
        newton.eval_fk(model, s0.joint_q, s0.joint_qd, s0)
        for _ in range(250):
            pipeline.collide(s0, contacts)
            solver.step(s0, s1, None, contacts, 2e-3)
            s0, s1 = s1, s0
        if not cpu:
            assert int(solver._warp.d.nacon.numpy()[0]) > 0
        out.append(s0.body_q.numpy().copy())
    c_engine, warp_backend = out
    assert np.all(np.isfinite(warp_backend))
    # both worlds come to rest on the ground: box half-height 0.05 (resting on a face), sphere 0.06
    z = warp_backend[:, 2]
    assert np.all(z > 0.035) and np.all(z < 0.075)
    np.testing.assert_allclose(warp_backend[:, :3], c_engine[:, :3], atol=5e-3)


def _pendulums():
    """Three worlds of a pendulum whose mass, COM and joint damping differ per world."""
    t = ModelBuilder(gravity=(0.0, 0.0, -9.81))
    link = t.add_link(mass=1.0, com=(0.3, 0.0, 0.0), inertia=wp.mat33(np.eye(3, dtype=np.float32) * 0.01))
    t.add_articulation([t.add_joint_revolute(-1, link, axis=(0.0, 1.0, 0.0), damping=0.0)])
    b = ModelBuilder(gravity=(0.0, 0.0, -9.81))
    b.replicate(t, 3)
    model = b.finalize()
    model.body_mass.assign(np.array([1.0, 2.0, 0.5], np.float32))
    model.body_inv_mass.assign(np.array([1.0, 0.5, 2.0], np.float32))
    model.body_com.assign(np.array([[0.3, 0, 0], [0.2, 0, 0], [0.4, 0, 0]], np.float32))
    model.joint_damping.assign(np.array([0.0, 0.05, 0.2], np.float32))
    return model


def test_worlds_with_different_parameters_match_the_c_engine():
    out = []
    for cpu in (True, False):
        model = _pendulums()
        if cpu:
            solver = SolverMuJoCo(model, use_mujoco_cpu=True, integrator="implicitfast")
        else:  # dof_length (a derived length scale, unused without sleeping) is one value in MuJoCo Warp
            with pytest.warns(UserWarning, match="dof_length"):
                solver = SolverMuJoCo(model, use_mujoco_cpu=False, integrator="implicitfast")
        s0, s1 = model.state(), model.state()
        s0.joint_q.assign(np.full(3, 0.8, np.float32))
        newton.eval_fk(model, s0.joint_q, s0.joint_qd, s0)
        for i in range(300):
            if i == 150:  # world 0 gets damping: pushed into the (batched) device model
                model.joint_damping.assign(np.array([0.3, 0.05, 0.2], np.float32))
                solver.notify_model_changed(ModelFlags.JOINT_DOF_PROPERTIES)
            solver.step(s0, s1, None, None, 2e-3)
            s0, s1 = s1, s0
        out.append(s0.joint_q.numpy().copy())
    c_engine, warp_backend = out
    assert len(set(np.round(c_engine, 4))) == 3  # the worlds really differ
    np.testing.assert_allclose(warp_backend, c_engine, atol=2e-4)

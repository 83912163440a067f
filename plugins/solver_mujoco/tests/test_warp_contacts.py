"""MuJoCo Warp backend with armillary contacts (``use_mujoco_contacts=False``): the contacts
written into MuJoCo Warp's arrays give the C engine's injected-contact trajectory."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

mujoco = pytest.importorskip("mujoco")
pytest.importorskip("mujoco_warp")

import armillary as newton  # noqa: E402
from armillary import ModelBuilder  # noqa: E402
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

"""Graph-capture readiness of the MuJoCo Warp backend, which the conformance kit's host-sync check
does not cover (the kit runs SolverMuJoCo's C backend, which steps on the host by design). After
warm-up, ``step`` (with ``collide`` before it) must not read an array back to the host or
synchronise: every ``wp.array`` host read and ``wp.synchronize*`` is trapped."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import armillary as newton
from armillary.testing import forbid_host_sync


def _run_then_trap(monkeypatch, model, solver, *, collide=True, dt=2e-3):
    pipeline = newton.CollisionPipeline(model) if collide else None
    contacts = pipeline.contacts() if collide else None
    s0, s1, control = model.state(), model.state(), model.control()
    newton.eval_fk(model, model.joint_q, model.joint_qd, s0)

    def step():
        nonlocal s0, s1
        if collide:
            pipeline.collide(s0, contacts)
        solver.step(s0, s1, control, contacts, dt)
        s0, s1 = s1, s0

    for _ in range(4):  # warm-up: kernels compiled, caches and recorded launches in place
        step()
    with monkeypatch.context() as m:
        forbid_host_sync(m, "step()")
        for _ in range(4):
            step()
    q = s0.body_q.numpy()
    assert np.all(np.isfinite(q))
    return q


def _boxes_on_ground(worlds=2):
    t = newton.ModelBuilder()
    box = t.add_body(xform=wp.transform((0.0, 0.0, 0.3), wp.quat_from_axis_angle(wp.vec3(1.0, 0.2, 0.0), 0.4)))
    t.add_shape_box(box, hx=0.1, hy=0.08, hz=0.05)
    ball = t.add_body(xform=wp.transform((0.4, 0.0, 0.2), wp.quat_identity()))
    t.add_shape_sphere(ball, radius=0.06)
    b = newton.ModelBuilder()
    b.add_ground_plane()
    b.replicate(t, worlds)
    return b.finalize(device="cpu")


@pytest.mark.parametrize("use_mujoco_contacts", [False, True])
def test_mujoco_warp_backend_step_does_not_synchronise(monkeypatch, use_mujoco_contacts):
    pytest.importorskip("mujoco")
    pytest.importorskip("mujoco_warp")
    model = _boxes_on_ground()
    solver = newton.solvers.SolverMuJoCo(model, use_mujoco_cpu=False, use_mujoco_contacts=use_mujoco_contacts)
    _run_then_trap(monkeypatch, model, solver, collide=not use_mujoco_contacts)

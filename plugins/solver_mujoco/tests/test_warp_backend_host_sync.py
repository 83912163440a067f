"""Graph-capture readiness of the MuJoCo Warp backend, which the conformance kit's host-sync check
does not cover (the kit runs SolverMuJoCo's C backend, which steps on the host by design). After
warm-up, ``step`` (with ``collide`` before it) must not read an array back to the host or
synchronise: every ``wp.array`` host read and ``wp.synchronize*`` is trapped."""

from __future__ import annotations

import pytest
import warp as wp

import armillary as newton
from armillary.testing import check_step_host_sync


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
    check_step_host_sync(monkeypatch, model, solver, collide=not use_mujoco_contacts)

"""Solver-specific tests of SolverSymplecticEuler (beyond the conformance kit)."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import armillary
from armillary import ModelBuilder, ModelFlags
from armillary_example_symplectic.solver import SolverSymplecticEuler


def _run(model, solver, steps, dt=1.0e-3, qd=None):
    s0, s1 = model.state(), model.state()
    if qd is not None:
        s0.body_qd.assign(np.asarray(qd, np.float32))
    for _ in range(steps):
        s0.clear_forces()
        solver.step(s0, s1, None, None, dt)
        s0, s1 = s1, s0
    return s0


def _sphere(b, pos, r=0.1, mass=1.0, **cfg):
    body = b.add_body(xform=wp.transform(pos, wp.quat_identity()), mass=mass,
                      inertia=wp.mat33(np.eye(3) * 0.4 * mass * r * r))
    b.add_shape_sphere(body, radius=r, cfg=ModelBuilder.ShapeConfig(density=0.0, **cfg))
    return body


def test_registered_through_the_entry_point():
    assert armillary.solvers.SolverSymplecticEuler is SolverSymplecticEuler


def test_in_place_step_matches_out_of_place():
    b = ModelBuilder()
    for i in range(4):
        _sphere(b, (0.15 * i, 0.0, 0.1 + 0.05 * i))
    b.add_ground_plane()
    model = b.finalize(device="cpu")
    solver = SolverSymplecticEuler(model)
    a = _run(model, solver, 200)
    s = model.state()
    for _ in range(200):
        s.clear_forces()
        solver.step(s, s, None, None, 1.0e-3)
    np.testing.assert_array_equal(a.body_q.numpy(), s.body_q.numpy())


def test_sphere_sphere_collision_conserves_momentum():
    b = ModelBuilder(gravity=(0.0, 0.0, 0.0))
    _sphere(b, (0.0, 0.0, 0.0), mass=1.0, mu=0.3)
    _sphere(b, (0.25, 0.05, 0.0), mass=2.0, mu=0.3)
    model = b.finalize(device="cpu")
    solver = SolverSymplecticEuler(model)
    qd = np.zeros((2, 6))
    qd[0, 0] = 1.0
    state = _run(model, solver, 600, qd=qd)
    v = state.body_qd.numpy().astype(np.float64)
    p = 1.0 * v[0, :3] + 2.0 * v[1, :3]
    np.testing.assert_allclose(p, [1.0, 0.0, 0.0], atol=1e-4)
    assert v[1, 0] > 0.3 and v[1, 1] > 0.0, "the struck sphere did not move away"
    d = np.linalg.norm(state.body_q.numpy()[0, :3] - state.body_q.numpy()[1, :3])
    assert d > 0.2, "spheres still overlap"


def test_per_world_gravity():
    template = ModelBuilder()
    _sphere(template, (0.0, 0.0, 10.0))
    b = ModelBuilder()
    b.replicate(template, 2)
    model = b.finalize(device="cpu")
    g = model.gravity.numpy()
    g[1] = (0.0, 0.0, -1.0)
    model.gravity.assign(g)
    solver = SolverSymplecticEuler(model)
    solver.notify_model_changed(ModelFlags.MODEL_PROPERTIES)
    state = _run(model, solver, 1000)
    vz = state.body_qd.numpy()[:, 2]
    np.testing.assert_allclose(vz, [-9.81, -1.0], rtol=1e-3)


def test_free_rotation_conserves_angular_momentum():
    b = ModelBuilder(gravity=(0.0, 0.0, 0.0))
    inertia = np.diag([0.1, 0.2, 0.3])
    b.add_body(xform=wp.transform((0.0, 0.0, 0.0), wp.quat_identity()), mass=1.0, inertia=wp.mat33(inertia))
    model = b.finalize(device="cpu")
    solver = SolverSymplecticEuler(model)
    w0 = np.array([0.3, 5.0, 0.2])  # near the unstable intermediate axis
    state = _run(model, solver, 1000, qd=[[0.0, 0.0, 0.0, *w0]])
    q = state.body_q.numpy()[0, 3:].astype(np.float64)
    x, y, z, w = q
    R = np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )
    L0 = inertia @ w0
    L = R @ inertia @ R.T @ state.body_qd.numpy()[0, 3:].astype(np.float64)
    assert np.linalg.norm(L - L0) <= 0.02 * np.linalg.norm(L0)
    assert abs(np.linalg.norm(q) - 1.0) < 1e-5


def test_capsule_and_tilted_box_come_to_rest():
    b = ModelBuilder()
    body = b.add_body(xform=wp.transform((0.0, 0.0, 0.3), wp.quat_from_axis_angle(wp.vec3(1.0, 0.0, 0.0), 1.2)),
                      mass=1.0, inertia=wp.mat33(np.eye(3) * 0.01))
    b.add_shape_capsule(body, radius=0.05, half_height=0.2, cfg=ModelBuilder.ShapeConfig(density=0.0))
    box = b.add_body(xform=wp.transform((1.0, 0.0, 0.3), wp.quat_from_axis_angle(wp.vec3(1.0, 1.0, 0.0), 0.5)),
                     mass=1.0, inertia=wp.mat33(np.eye(3) * 0.01))
    b.add_shape_box(box, hx=0.1, hy=0.1, hz=0.1, cfg=ModelBuilder.ShapeConfig(density=0.0))
    b.add_ground_plane()
    model = b.finalize(device="cpu")
    state = _run(model, SolverSymplecticEuler(model, angular_damping=0.5), 3000)
    v = np.linalg.norm(state.body_qd.numpy()[:, :3], axis=1)
    assert (v < 0.02).all(), v
    z = state.body_q.numpy()[:, 2]
    assert 0.03 < z[0] < 0.07 and 0.08 < z[1] < 0.12, z


def test_step_is_two_launches_without_host_reads(monkeypatch):
    b = ModelBuilder()
    _sphere(b, (0.0, 0.0, 0.1))
    b.add_particle((0.0, 0.0, 1.0), (0.0, 0.0, 0.0), 1.0, 0.05)
    b.add_ground_plane()
    model = b.finalize(device="cpu")
    solver = SolverSymplecticEuler(model)
    solver.finite_guard = False  # the core's non-finite guard launch is not the solver's
    s0, s1 = model.state(), model.state()
    launches = []
    real_launch = wp.launch

    def forbidden(*args, **kwargs):
        raise AssertionError("step() read a device array back to the host")

    monkeypatch.setattr(wp.array, "numpy", forbidden)
    monkeypatch.setattr(wp, "launch", lambda *a, **k: (launches.append(a[0]), real_launch(*a, **k)))
    solver.step(s0, s1, None, None, 1.0e-3)
    assert len(launches) == 2  # shape poses, then the fused integration kernel


@pytest.mark.parametrize(
    "kwargs", [{"contact_ke": -1.0}, {"friction_smoothing": 0.0}, {"angular_damping": -0.1}], ids=str
)
def test_invalid_options_are_rejected(kwargs):
    b = ModelBuilder()
    _sphere(b, (0.0, 0.0, 1.0))
    model = b.finalize(device="cpu")
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        SolverSymplecticEuler(model, **kwargs)


def test_contact_overrides_change_the_rest_depth():
    b = ModelBuilder()
    _sphere(b, (0.0, 0.0, 0.1))
    b.add_ground_plane()
    model = b.finalize(device="cpu")
    soft = _run(model, SolverSymplecticEuler(model), 1500).body_q.numpy()[0, 2]
    stiff = _run(model, SolverSymplecticEuler(model, contact_ke=2.5e4, contact_kd=300.0), 1500).body_q.numpy()[0, 2]
    np.testing.assert_allclose(0.1 - soft, 9.81 / 2500.0, rtol=0.05)
    np.testing.assert_allclose(0.1 - stiff, 9.81 / 2.5e4, rtol=0.05)

"""SolverSemiImplicit: rigid-body integration, external wrenches, kinematic bodies, worlds, inputs.

Reference figures quoted below were measured on the reference engine's SolverSemiImplicit (newton
1.8, CPU) run as a black box on the same scenes.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import warp as wp

import armillary
from armillary.flags import ModelFlags, StateFlags

EPS32 = float(np.finfo(np.float32).eps)
CFG = armillary.ModelBuilder.ShapeConfig(density=0.0)  # shapes add no mass: the bodies' masses are as given


def _diag(a, b=None, c=None):
    b = a if b is None else b
    c = a if c is None else c
    return wp.mat33(a, 0.0, 0.0, 0.0, b, 0.0, 0.0, 0.0, c)


def _body(b, pos=(0.0, 0.0, 0.0), mass=1.0, inertia=(0.004, 0.004, 0.004), com=None, kinematic=False, quat=None):
    kw = {} if com is None else {"com": com}
    return b.add_body(xform=wp.transform(pos, quat if quat is not None else wp.quat_identity()), mass=mass,
                      inertia=_diag(*inertia), is_kinematic=kinematic, **kw)  # fmt: skip


def _run(model, steps, dt, qd=None, body_f=None, control=None, contacts=False, in_place=False, **kw):
    solver = armillary.solvers.SolverSemiImplicit(model, **kw)
    s0, s1 = model.state(), model.state()
    if qd is not None:
        s0.body_qd.assign(np.asarray(qd, dtype=np.float32))
    c = model.contacts() if contacts else None
    for _ in range(steps):
        s0.clear_forces()
        if body_f is not None:
            s0.body_f.assign(np.asarray(body_f, dtype=np.float32))
        if c is not None:
            model.collide(s0, c)
        if in_place:
            solver.step(s0, s0, control, c, dt)
        else:
            solver.step(s0, s1, control, c, dt)
            s0, s1 = s1, s0
    return solver, s0


# ------------------------------------------------------------------ integration
def test_projectile_is_the_exact_symplectic_euler_recurrence():
    """v_n = v0 + n g dt, x_n = x0 + n dt v0 + g dt^2 n (n + 1) / 2 (velocity first, then position),
    to float32 round-off; explicit Euler would be off by n g dt^2 (~1e-3 m here)."""
    b = armillary.ModelBuilder()
    _body(b, (0.0, 0.0, 10.0))
    _body(b, (1.0, 2.0, 3.0), com=(0.1, -0.2, 0.05))  # the COM, not the origin, follows the parabola
    model = b.finalize(device="cpu")
    v0 = np.array([[1.0, -0.5, 2.0, 0.0, 0.0, 0.0], [-2.0, 0.3, 4.0, 0.0, 0.0, 0.0]])
    n, dt = 100, 1.0e-3
    _, s = _run(model, n, dt, qd=v0, angular_damping=0.0)
    g = np.array([0.0, 0.0, -9.81])
    com0 = np.array([[0.0, 0.0, 10.0], [1.1, 1.8, 3.05]])
    x = com0 + n * dt * v0[:, :3] + g * dt * dt * n * (n + 1) / 2.0
    v = v0[:, :3] + n * g * dt
    q = s.body_q.numpy().astype(np.float64)
    com = q[:, :3] + np.array([[0.0, 0.0, 0.0], [0.1, -0.2, 0.05]])  # identity orientation kept
    np.testing.assert_allclose(q[:, 3:], [[0, 0, 0, 1]] * 2, atol=0)
    assert np.abs(com - x).max() <= 4 * n * EPS32 * 10.0, np.abs(com - x).max()
    assert np.abs(s.body_qd.numpy()[:, :3] - v).max() <= 4 * n * EPS32 * 10.0
    assert np.abs(s.body_qd.numpy()[:, 3:]).max() == 0.0


def test_per_world_gravity_and_global_bodies():
    """Each body falls with its world's Model.gravity; a global body (world -1) takes the last (global) row."""
    t = armillary.ModelBuilder()
    _body(t, (0.0, 0.0, 1.0))
    b = armillary.ModelBuilder()
    b.replicate(t, 2)
    _body(b, (5.0, 0.0, 1.0))  # added after the worlds: global (world -1)
    model = b.finalize(device="cpu")
    model.set_gravity((0.0, 0.0, -9.81), world=0)
    model.set_gravity((1.0, 0.0, -3.0), world=1)
    model.set_gravity((0.0, 2.0, -5.0), world=-1)
    worlds = model.body_world.numpy()
    assert sorted(worlds.tolist()) == [-1, 0, 1]
    n, dt = 50, 1.0e-3
    _, s = _run(model, n, dt, angular_damping=0.0)
    v = s.body_qd.numpy()[:, :3]
    g = {0: [0.0, 0.0, -9.81], 1: [1.0, 0.0, -3.0], -1: [0.0, 2.0, -5.0]}
    for i, w in enumerate(worlds):
        np.testing.assert_allclose(v[i], np.array(g[int(w)]) * n * dt, rtol=1e-5, atol=1e-7)


def test_torque_free_rotation_matches_the_reference():
    """Asymmetric body I = diag(0.1, 0.2, 0.3) kg m^2 spun at w0 = (1, 2, 3) rad/s, no gravity.

    One step (dt 0.01): w1 = w0 + dt I^-1 (-(w0 x I w0)) exactly (explicit gyroscopic term) and
    q1 = normalize(q0 + dt/2 (w1, 0) q0): the reference gives w1 = (0.94, 2.03, 2.993333) and
    q1 = (0.00469918, 0.010148229, 0.014964055, 0.999825537). After 1000 steps of 1 ms the
    reference gives w = (0.848603189, 2.181866646, 2.941874504), q = (0.059982963, -0.011400371,
    0.986287415, -0.153327361) and, with angular_damping 0.05, w = (0.959854782, 2.029402494,
    2.80190134), q = (0.03505734, 0.001764165, 0.99249351, -0.117151774); the two float32
    implementations drift apart by about 5e-7 per step (round-off), 6e-4 after 1000 steps.
    """
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    _body(b, inertia=(0.1, 0.2, 0.3))
    model = b.finalize(device="cpu")
    qd = [[0.0, 0.0, 0.0, 1.0, 2.0, 3.0]]
    _, s = _run(model, 1, 0.01, qd=qd, angular_damping=0.0)
    np.testing.assert_allclose(s.body_qd.numpy()[0, 3:], [0.94, 2.03, 2.9933333], rtol=2e-7)
    np.testing.assert_allclose(s.body_q.numpy()[0, 3:], [0.00469918, 0.010148229, 0.014964055, 0.999825537],
                               atol=2e-7)  # fmt: skip
    for damping, w_ref, q_ref in (
        (0.0, [0.848603189, 2.181866646, 2.941874504], [0.059982963, -0.011400371, 0.986287415, -0.153327361]),
        (0.05, [0.959854782, 2.029402494, 2.80190134], [0.03505734, 0.001764165, 0.99249351, -0.117151774]),
    ):
        _, s = _run(model, 1000, 1.0e-3, qd=qd, angular_damping=damping)
        np.testing.assert_allclose(s.body_qd.numpy()[0, 3:], w_ref, atol=1e-3)
        np.testing.assert_allclose(s.body_q.numpy()[0, 3:], q_ref, atol=1e-3)
    # without damping the kinetic energy of explicit gyroscopic Euler grows slowly (first order)
    _, s = _run(model, 1000, 1.0e-3, qd=qd, angular_damping=0.0)
    q, w = s.body_q.numpy()[0].astype(np.float64), s.body_qd.numpy()[0, 3:].astype(np.float64)
    R = np.array(wp.quat_to_matrix(wp.quat(*q[3:]))).reshape(3, 3)
    I_w = R @ np.diag([0.1, 0.2, 0.3]) @ R.T
    e0 = 0.5 * np.array([1.0, 2.0, 3.0]) @ np.diag([0.1, 0.2, 0.3]) @ np.array([1.0, 2.0, 3.0])
    assert abs(0.5 * w @ I_w @ w - e0) <= 0.01 * e0


def test_angular_damping_scales_the_new_angular_velocity():
    """Reference (measured): one step of dt = 0.1 from w = 2 rad/s gives 1.99 (damping 0.05) and 1.8
    (damping 1.0), i.e. w (1 - damping dt); the orientation used the undamped 2 rad/s in both:
    q = normalize((0, 0, 0.1, 1)) = (0, 0, 0.09950372, 0.99503714)."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    _body(b)
    model = b.finalize(device="cpu")
    for damping, w_ref in ((0.05, 1.99), (1.0, 1.8)):
        _, s = _run(model, 1, 0.1, qd=[[0, 0, 0, 0, 0, 2.0]], angular_damping=damping)
        np.testing.assert_allclose(s.body_qd.numpy()[0], [0, 0, 0, 0, 0, w_ref], rtol=1e-6)
        np.testing.assert_allclose(s.body_q.numpy()[0, 3:], [0, 0, 0.09950372, 0.99503714], atol=1e-7)


def test_body_f_is_a_world_wrench_at_the_com():
    """Mass 2 kg, I = 0.004 kg m^2, COM offset (0.05, 0, 0), body_f = (1, 2, 3, 0.1, 0.2, 0.3), one step
    of 0.1 s under gravity. Reference: body_q = (0.02166666, -0.02333333, 0.93356663, 0.1132277,
    0.2264554, 0.33968312, 0.9058217), body_qd = (0.05, 0.1, -0.831, 2.5, 5.0, 7.5)."""
    b = armillary.ModelBuilder()
    _body(b, (0.0, 0.0, 1.0), mass=2.0, com=(0.05, 0.0, 0.0))
    model = b.finalize(device="cpu")
    _, s = _run(model, 1, 0.1, body_f=[[1, 2, 3, 0.1, 0.2, 0.3]], angular_damping=0.0)
    np.testing.assert_allclose(s.body_qd.numpy()[0], [0.05, 0.1, -0.831, 2.5, 5.0, 7.5], rtol=1e-6)
    np.testing.assert_allclose(s.body_q.numpy()[0],
                               [0.02166666, -0.02333333, 0.93356663, 0.1132277, 0.2264554, 0.33968312, 0.9058217],
                               atol=1e-7)  # fmt: skip


@pytest.mark.parametrize("kind", ["free", "distance"])
def test_joint_f_on_free_and_distance_joints(kind):
    """Control.joint_f of a FREE (or DISTANCE, here inside its range) joint is a world wrench at the child COM;
    the parent body gets nothing. Reference (FREE child of a free parent, 2 kg, I = 0.01, COM offset
    (0.1, 0, 0), joint_f = (1, 2, 3, 0.1, 0.2, 0.3), dt 0.1, no gravity): child twist (0.05, 0.1,
    0.15, 1, 2, 3), parent at rest."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    p = b.add_link(xform=wp.transform((0.0, 0.0, 0.0), wp.quat_identity()), mass=1.0, inertia=_diag(0.01))
    j0 = b.add_joint_free(p)
    c = b.add_link(xform=wp.transform((1.0, 0.0, 0.0), wp.quat_identity()), mass=2.0, inertia=_diag(0.01),
                   com=(0.1, 0.0, 0.0))  # fmt: skip
    j1 = (b.add_joint_free if kind == "free" else b.add_joint_distance)(parent=p, child=c)
    b.add_articulation([j0, j1])
    model = b.finalize(device="cpu")
    control = model.control()
    jf = np.zeros(model.joint_dof_count, np.float32)
    k = int(model.joint_qd_start.numpy()[j1])
    jf[k:k + 6] = [1, 2, 3, 0.1, 0.2, 0.3]
    control.joint_f.assign(jf)
    _, s = _run(model, 1, 0.1, control=control, angular_damping=0.0)
    np.testing.assert_allclose(s.body_qd.numpy(), [[0.0] * 6, [0.05, 0.1, 0.15, 1.0, 2.0, 3.0]], rtol=1e-6, atol=0)


def test_kinematic_bodies_keep_their_state_and_massless_bodies_get_no_gravity():
    """Kinematic: input pose and twist copied (body_f, gravity and contacts ignored). Zero-mass body
    (reference, dt 0.1, v = (0.5, 0, 0), w = (0, 0, 1), damping 0.05): no gravity, origin (0.05, 0, 1),
    w = 0.995, q from the undamped w."""
    b = armillary.ModelBuilder()
    _body(b, (0.0, 0.0, 1.0), kinematic=True, quat=wp.quat_rpy(0.1, 0.2, 0.3))
    b.add_shape_box(0, hx=0.5, hy=0.5, hz=0.1, cfg=CFG)
    box = _body(b, (0.0, 0.0, 1.15), mass=1.0)
    b.add_shape_box(box, hx=0.05, hy=0.05, hz=0.05, cfg=CFG)
    b.add_body(xform=wp.transform((3.0, 0.0, 1.0), wp.quat_identity()), mass=0.0, inertia=_diag(0.0))
    model = b.finalize(device="cpu")
    qd = [[0.3, 0.2, 0.1, 0.5, 0.4, 0.3], [0.0] * 6, [0.5, 0, 0, 0, 0, 1.0]]
    q_in = model.body_q.numpy()[0].copy()
    _, s = _run(model, 1, 0.1, qd=qd, body_f=[[10, 10, 10, 1, 1, 1]] + [[0] * 6] * 2, contacts=True)
    np.testing.assert_array_equal(s.body_q.numpy()[0], q_in)
    np.testing.assert_array_equal(s.body_qd.numpy()[0], np.float32(qd[0]))
    np.testing.assert_allclose(s.body_q.numpy()[2], [3.05, 0, 1.0, 0, 0, 0.04993762, 0.99875236], atol=1e-7)
    np.testing.assert_allclose(s.body_qd.numpy()[2], [0.5, 0, 0, 0, 0, 0.995], rtol=1e-6)


def test_state_in_is_state_out_gives_the_same_result():
    """Stepping in place (state_in is state_out) equals ping-pong stepping, contacts included."""
    b = armillary.ModelBuilder()
    box = _body(b, (0.0, 0.0, 0.12), quat=wp.quat_rpy(0.2, 0.1, 0.0))
    b.add_shape_box(box, hx=0.1, hy=0.1, hz=0.1, cfg=CFG)
    b.add_ground_plane()
    model = b.finalize(device="cpu")
    qd = [[0.5, 0.0, 0.0, 0.0, 0.0, 1.0]]
    _, a = _run(model, 50, 1e-3, qd=qd, contacts=True)
    _, c = _run(model, 50, 1e-3, qd=qd, contacts=True, in_place=True)
    np.testing.assert_array_equal(a.body_q.numpy(), c.body_q.numpy())
    np.testing.assert_array_equal(a.body_qd.numpy(), c.body_qd.numpy())


def test_multiple_worlds_match_a_single_world_bit_for_bit():
    """Three overlapping replicated worlds with contacts evolve exactly like one world."""
    t = armillary.ModelBuilder()
    box = _body(t, (0.0, 0.0, 0.15), quat=wp.quat_rpy(0.3, 0.0, 0.1))
    t.add_shape_box(box, hx=0.1, hy=0.1, hz=0.1, cfg=CFG)
    t.add_ground_plane()
    results = []
    for worlds in (1, 3):
        b = armillary.ModelBuilder()
        b.replicate(t, worlds)
        model = b.finalize(device="cpu")
        _, s = _run(model, 200, 1e-3, qd=[[0.4, 0.0, 0.0, 0.0, 0.0, 2.0]] * worlds, contacts=True)
        results.append(s.body_q.numpy())
    for w in range(3):
        np.testing.assert_array_equal(results[1][w], results[0][0])
    assert results[0][0][2] < 0.15  # it fell onto the ground


def test_deterministic_runs_are_bit_identical():
    b = armillary.ModelBuilder()
    for i in range(4):
        box = _body(b, (0.05 * i, 0.0, 0.12 + 0.21 * i), quat=wp.quat_rpy(0.1 * i, 0.05, 0.0))
        b.add_shape_box(box, hx=0.1, hy=0.1, hz=0.1, cfg=CFG)
    b.add_ground_plane()
    model = b.finalize(device="cpu")
    runs = [_run(model, 150, 1e-3, contacts=True, deterministic=True)[1].body_q.numpy() for _ in range(2)]
    assert runs[0].tobytes() == runs[1].tobytes()
    if hasattr(wp, "DeterministicMode"):
        armillary.solvers.SolverSemiImplicit(model, deterministic=wp.DeterministicMode.RUN_TO_RUN)


def test_notify_model_changed_refreshes_live_arrays_and_joint_tables():
    """Masses and gravity are read at every step; disabling a FREE joint (JOINT_PROPERTIES) stops its joint_f."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    _body(b)
    model = b.finalize(device="cpu")
    solver = armillary.solvers.SolverSemiImplicit(model, angular_damping=0.0)
    control = model.control()
    control.joint_f.assign(np.array([1, 0, 0, 0, 0, 0], np.float32))
    s0, s1 = model.state(), model.state()
    solver.step(s0, s1, control, None, 0.1)
    assert s1.body_qd.numpy()[0, 0] == pytest.approx(0.1)
    model.body_inv_mass.assign(np.array([0.5], np.float32))
    solver.notify_model_changed(ModelFlags.BODY_INERTIAL_PROPERTIES)
    solver.step(s0, s1, control, None, 0.1)
    assert s1.body_qd.numpy()[0, 0] == pytest.approx(0.05)
    model.joint_enabled.assign(np.array([False]))
    solver.notify_model_changed(ModelFlags.JOINT_PROPERTIES)
    solver.step(s0, s1, control, None, 0.1)
    assert s1.body_qd.numpy()[0, 0] == 0.0
    solver.notify_model_changed(1 << 20)  # custom bits are accepted


def test_reset_restores_the_initial_state():
    b = armillary.ModelBuilder()
    _body(b, (0.0, 0.0, 1.0))
    model = b.finalize(device="cpu")
    solver, s = _run(model, 20, 1e-3)
    assert s.body_q.numpy()[0, 2] < 1.0
    solver.reset(s, flags=StateFlags.ALL)
    np.testing.assert_array_equal(s.body_q.numpy(), model.body_q.numpy())


# ------------------------------------------------------------------ bad input
def _bad_input_scene():
    b = armillary.ModelBuilder()
    body = _body(b, (0.0, 0.0, 1.0))
    b.add_shape_sphere(body, radius=0.1, cfg=CFG)
    model = b.finalize(device="cpu")
    return model, armillary.solvers.SolverSemiImplicit(model)


@pytest.mark.parametrize(
    "case, match",
    [
        ("dt_zero", "dt must be finite and > 0"),
        ("dt_nan", "dt must be finite and > 0"),
        ("state_none", "state_out is None"),
        ("body_q_none", r"state_in.body_q is None"),
        ("body_q_shape", r"state_out.body_q has shape \(2,\)"),
        ("body_qd_dtype", r"state_in.body_qd has shape \(1,\) and dtype transform"),
        ("body_f_list", r"state_in.body_f is builtins.list, not a Warp array"),
        ("joint_f_len", r"control.joint_f has shape \(3,\)"),
        ("contacts_missing", r"contacts.rigid_contact_normal is None"),
        ("contacts_dtype", r"contacts.rigid_contact_margin0 has shape"),
    ],
)
def test_bad_step_input_raises_a_clear_error_before_any_write(case, match):
    model, solver = _bad_input_scene()
    s0, s1 = model.state(), model.state()
    control, contacts = model.control(), model.contacts()
    dt = 1e-3
    if case == "dt_zero":
        dt = 0.0
    elif case == "dt_nan":
        dt = float("nan")
    elif case == "state_none":
        s1 = None
    elif case == "body_q_none":
        s0.body_q = None
    elif case == "body_q_shape":
        s1.body_q = wp.zeros(2, dtype=wp.transform)
    elif case == "body_qd_dtype":
        s0.body_qd = wp.zeros(1, dtype=wp.transform)
    elif case == "body_f_list":
        s0.body_f = [0.0] * 6
    elif case == "joint_f_len":
        control.joint_f = wp.zeros(3, dtype=float)
    elif case == "contacts_missing":
        contacts.rigid_contact_normal = None
    elif case == "contacts_dtype":
        contacts.rigid_contact_margin0 = wp.zeros(contacts.rigid_contact_margin0.shape[0], dtype=wp.vec3)
    before = None if s1 is None or s1.body_q is None else s1.body_q.numpy().copy()
    with pytest.raises(ValueError, match=match):
        solver.step(s0, s1, control, contacts, dt)
    if before is not None and s1.body_q.shape[0] == 1:
        np.testing.assert_array_equal(s1.body_q.numpy(), before)


def test_bad_soft_contact_arrays_raise():
    b = armillary.ModelBuilder()
    b.add_particle((0.0, 0.0, 1.0), (0.0, 0.0, 0.0), 1.0, 0.05)
    b.add_ground_plane()
    model = b.finalize(device="cpu")
    solver = armillary.solvers.SolverSemiImplicit(model)
    contacts = model.contacts()
    contacts.soft_contact_normal = wp.zeros(contacts.soft_contact_normal.shape[0] + 1, dtype=wp.vec3)
    with pytest.raises(ValueError, match="contacts.soft_contact_normal has shape"):
        solver.step(model.state(), model.state(), None, contacts, 1e-3)


def test_validated_arrays_are_cached_but_replaced_arrays_are_checked_again():
    model, solver = _bad_input_scene()
    s0, s1 = model.state(), model.state()
    solver.step(s0, s1, None, None, 1e-3)
    solver.step(s0, s1, None, None, 1e-3)  # cached: same objects and arrays
    s1.body_qd = wp.zeros(3, dtype=wp.spatial_vector)
    with pytest.raises(ValueError, match=r"state_out.body_qd has shape \(3,\)"):
        solver.step(s0, s1, None, None, 1e-3)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"angular_damping": -1.0}, "angular_damping must be finite and >= 0"),
        ({"joint_attach_ke": float("inf")}, "joint_attach_ke must be finite"),
        ({"friction_smoothing": 0.0}, "friction_smoothing must be > 0"),
        ({"deterministic": "yes"}, "deterministic must be"),
    ],
)
def test_bad_options_raise(kwargs, match):
    b = armillary.ModelBuilder()
    _body(b)
    model = b.finalize(device="cpu")
    with pytest.raises(ValueError, match=match):
        armillary.solvers.SolverSemiImplicit(model, **kwargs)


def test_unsupported_joint_type_is_rejected():
    from armillary.sim.enums import JointType

    caps = armillary.solvers.SolverSemiImplicit.capabilities
    assert JointType.ROD not in caps.joint_types
    assert {JointType.FREE, JointType.DISTANCE, JointType.REVOLUTE, JointType.PRISMATIC, JointType.BALL,
            JointType.FIXED, JointType.D6} <= caps.joint_types  # fmt: skip


# ------------------------------------------------------------------ coupling hooks
def test_coupling_harvest_reports_the_interaction_wrench():
    """After an input update, the harvest adds the mean contact wrench of the steps since (here the
    resting box's support, m g up); bodies without a proxy row are skipped."""
    b = armillary.ModelBuilder()
    box = _body(b, (0.0, 0.0, 0.1 - 9.81 / (4 * 2.5e3)))
    b.add_shape_box(box, hx=0.1, hy=0.1, hz=0.1, cfg=CFG)
    b.add_ground_plane()
    model = b.finalize(device="cpu")
    solver = armillary.solvers.SolverSemiImplicit(model, angular_damping=0.0)
    assert solver.coupling_supports_inertial_property_refresh()
    solver.coupling_notify_iteration_restarts(False)
    s0, s1 = model.state(), model.state()
    contacts = model.contacts()
    solver.coupling_notify_input_state_update(s0, StateFlags.BODY_Q | StateFlags.BODY_QD, dt=1e-3)
    for _ in range(2):
        model.collide(s0, contacts)
        solver.step(s0, s1, None, contacts, 1e-3)
        s0, s1 = s1, s0
    out = wp.zeros(2, dtype=wp.spatial_vector)
    solver.coupling_harvest_proxy_wrenches(wp.array([1], dtype=wp.int32), out, body_qd_before=s0.body_qd,
                                           state=s0, state_out=s1, contacts=contacts, dt=1e-3)  # fmt: skip
    f = out.numpy()
    assert not f[0].any()
    np.testing.assert_allclose(f[1, :3], [0.0, 0.0, 9.81], rtol=2e-3)
    assert np.abs(f[1, 3:]).max() < 1e-4
    out.zero_()
    solver.coupling_harvest_proxy_wrenches(wp.array([-1], dtype=wp.int32), out, body_qd_before=s0.body_qd,
                                           state=s0, state_out=s1, contacts=contacts, dt=1e-3)  # fmt: skip
    assert not out.numpy().any()
    assert math.isclose(float(solver.body_f_int.numpy()[0, 2]), 9.81, rel_tol=2e-3)

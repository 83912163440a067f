"""SolverXPBD under ``wp.Tape``: autodiff gradients against central finite differences.

Every check runs the reference usage (``finalize(requires_grad=True)``, one state per step, the
steps recorded on a ``wp.Tape``, ``tape.backward(loss)``) and compares ``d loss / d input`` with
``(L(x + eps) - L(x - eps)) / (2 eps)`` from untaped float32 runs, within the stated relative
tolerance ``|g_ad - g_fd| / |g_fd|``. Contacts are filled by the core ``CollisionPipeline``
(``model.collide``) before each step, outside the tape (a fresh ``Contacts`` per step), so they enter
as data; the scenes keep every contact in one regime (sliding stays sliding) over the difference
interval.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import warp as wp

from armillary import ModelBuilder
from armillary_solver_xpbd.solver import SolverXPBD


@wp.kernel
def _body_point_loss(q: wp.array(dtype=wp.transform), b: int, p: wp.vec3, w: wp.vec3, loss: wp.array(dtype=float)):
    loss[0] = wp.dot(wp.transform_point(q[b], p), w)


@wp.kernel
def _particle_loss(q: wp.array(dtype=wp.vec3), i: int, w: wp.vec3, loss: wp.array(dtype=float)):
    loss[0] = wp.dot(q[i], w)


def _body_loss(body, point=(0.0, 0.0, 0.0), weights=(1.0, 0.0, 0.0)):
    """``loss = weights . (final pose of body applied to point)``."""
    return lambda s, out: wp.launch(_body_point_loss, dim=1, inputs=[s.body_q, body, wp.vec3(*point),
                                                                    wp.vec3(*weights)], outputs=[out])


def _rollout(model, solver, steps, dt, init, loss_fn, taped, control=None):
    """``steps`` steps from ``init(state_0)``, each into its own state; returns (loss, states). With
    ``taped`` the steps (not the collision detection) are recorded and back-propagated."""
    states = [model.state(requires_grad=taped) for _ in range(steps + 1)]
    init(states[0])
    loss = wp.zeros(1, dtype=float, requires_grad=taped)
    tape = wp.Tape()
    for i in range(steps):
        states[i].clear_forces()
        contacts = None
        if model.shape_count:
            contacts = model.contacts()
            model.collide(states[i], contacts)
        if taped:
            with tape:
                solver.step(states[i], states[i + 1], control, contacts, dt)
        else:
            solver.step(states[i], states[i + 1], control, contacts, dt)
    if taped:
        with tape:
            loss_fn(states[-1], loss)
        tape.backward(loss)
    else:
        loss_fn(states[-1], loss)
    return float(loss.numpy()[0]), states


def _check(model, solver, steps, dt, init, loss_fn, params, eps, rtol, control=None):
    """``params``: ``{name: (gradient(states) -> float, perturb(delta))}``; each autodiff gradient must
    match its central difference within ``rtol``. Returns ``{name: (autodiff, difference)}``."""
    _, states = _rollout(model, solver, steps, dt, init, loss_fn, True, control)
    out = {}
    for name, (grad, perturb) in params.items():
        g = grad(states)
        values = []
        for sign in (1.0, -1.0):
            perturb(sign * eps)
            values.append(_rollout(model, solver, steps, dt, init, loss_fn, False, control)[0])
            perturb(-sign * eps)
        fd = (values[0] - values[1]) / (2.0 * eps)
        assert np.isfinite(g), f"{name}: autodiff gradient {g}"
        assert abs(fd) > 1e-6, f"{name}: the loss does not depend on it (central difference {fd})"
        assert abs(g - fd) <= rtol * abs(fd), f"{name}: autodiff {g:.6g}, central difference {fd:.6g} (eps {eps})"
        out[name] = (g, fd)
    return out


def _shift(values: np.ndarray, *index):
    def perturb(d):
        values[index] += d

    return perturb


def _assign_twist(state, qd):
    state.body_qd.assign(np.asarray(qd, dtype=np.float32).reshape(-1, 6))


# ----------------------------------------------------------------------------- free body
@pytest.mark.parametrize("steps", [10, 100])
def test_free_body_gradients(steps):
    """d (a point of the body at T) / d body_qd0 and body_q0 of a spinning free body (no contacts,
    gravity, gyroscopic torque), 0.01 s steps; d x(T) / d vx0 is T (the issue's 0.1 at 10 steps).
    Measured: every component within 0.5 % of the difference at eps 1e-2 (1e-3 for the quaternion),
    positions and linear velocities within 0.007 %."""
    b = ModelBuilder()
    body = b.add_body(xform=wp.transform(wp.vec3(0.0, 0.0, 1.0), wp.quat_identity()))
    b.add_shape_box(body, hx=0.1, hy=0.2, hz=0.3)
    model = b.finalize(device="cpu", requires_grad=True)
    solver = SolverXPBD(model, iterations=2)
    qd0 = np.array([0.3, 0.0, 0.1, 0.5, 1.0, -0.2], np.float32)
    q0 = np.array([0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0], np.float32)

    def init(s):
        _assign_twist(s, qd0)
        s.body_q.assign(q0[None])

    loss = _body_loss(0, point=(0.1, 0.2, 0.05), weights=(1.0, 0.5, 0.3))
    params = {f"body_qd0[{k}]": ((lambda k: lambda st: float(st[0].body_qd.grad.numpy()[0, k]))(k), _shift(qd0, k))
              for k in range(6)}  # fmt: skip
    params.update({f"body_q0[{k}]": ((lambda k: lambda st: float(st[0].body_q.grad.numpy()[0, k]))(k), _shift(q0, k))
                   for k in range(3)})  # fmt: skip
    _check(model, solver, steps, 0.01, init, loss, params, eps=1e-2, rtol=0.01)
    rotation = {f"body_q0[{k}]": ((lambda k: lambda st: float(st[0].body_q.grad.numpy()[0, k]))(k), _shift(q0, k))
                for k in range(3, 7)}  # fmt: skip
    _check(model, solver, steps, 0.01, init, loss, rotation, eps=1e-3, rtol=0.01)
    # the number: d x(T) / d vx0 = T
    _, states = _rollout(model, solver, steps, 0.01, init, _body_loss(0), True)
    assert states[0].body_qd.grad.numpy()[0, 0] == pytest.approx(steps * 0.01, rel=1e-4)


# ----------------------------------------------------------------------------- sliding box
def test_box_sliding_with_friction_gradients():
    """A box (mu 0.4 against the ground) thrown at (2, 0.5) m/s slides the whole 0.3 s (it still
    moves at 0.88 m/s): d x(T) / d v0 and d x(T) / d mu (both shapes) against the difference
    (measured 0.03 %, 0.5 %, 0.01 %), and against the analytic sliding block, d x / d vx0 = T and
    d x / d mu = -g T^2 / 2 * vx / |v| (measured 1.7 % and 0.8 %: XPBD's contact settling)."""
    b = ModelBuilder()
    body = b.add_body(xform=wp.transform(wp.vec3(0.0, 0.0, 0.1), wp.quat_identity()))
    b.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1, cfg=ModelBuilder.ShapeConfig(density=1000.0, mu=0.4))
    b.add_ground_plane(cfg=ModelBuilder.ShapeConfig(mu=0.4))
    model = b.finalize(device="cpu", requires_grad=True)
    solver = SolverXPBD(model, iterations=4)
    v0 = np.array([2.0, 0.5, 0.0, 0.0, 0.0, 0.0], np.float32)
    steps, dt = 120, 1.0 / 400.0

    def init(s):
        _assign_twist(s, v0)

    loss = _body_loss(0)
    mu = model.shape_material_mu

    def shift_mu(d):
        mu.assign(mu.numpy() + d)

    params = {
        "vx0": (lambda st: float(st[0].body_qd.grad.numpy()[0, 0]), _shift(v0, 0)),
        "vy0": (lambda st: float(st[0].body_qd.grad.numpy()[0, 1]), _shift(v0, 1)),
        "mu": (lambda st: float(model.shape_material_mu.grad.numpy().sum()), shift_mu),
    }
    res = _check(model, solver, steps, dt, init, loss, params, eps=1e-2, rtol=0.02)
    _, states = _rollout(model, solver, steps, dt, init, loss, False)
    assert np.linalg.norm(states[-1].body_qd.numpy()[0, :2]) > 0.5  # still sliding
    T = steps * dt
    assert res["vx0"][0] == pytest.approx(T, rel=0.03)
    assert res["mu"][0] == pytest.approx(-0.5 * 9.81 * T * T * 2.0 / np.hypot(2.0, 0.5), rel=0.03)


def test_reusing_one_contacts_buffer_gives_the_same_gradients():
    """Colliding every step into the same ``Contacts`` (the usual untaped loop) is safe under a tape:
    each taped step keeps its own copy of the active contacts for its adjoint."""
    b = ModelBuilder()
    body = b.add_body(xform=wp.transform(wp.vec3(0.0, 0.0, 0.1), wp.quat_identity()))
    b.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1, cfg=ModelBuilder.ShapeConfig(density=1000.0, mu=0.4))
    b.add_ground_plane(cfg=ModelBuilder.ShapeConfig(mu=0.4))
    model = b.finalize(device="cpu", requires_grad=True)
    grads = []
    for shared in (False, True):
        solver = SolverXPBD(model, iterations=4)
        states = [model.state(requires_grad=True) for _ in range(41)]
        _assign_twist(states[0], [2.0, 0.5, 0.0, 0.0, 0.0, 0.0])
        contacts = model.contacts()
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        tape = wp.Tape()
        for i in range(40):
            if not shared:
                contacts = model.contacts()
            model.collide(states[i], contacts)
            with tape:
                solver.step(states[i], states[i + 1], None, contacts, 1.0 / 400.0)
        with tape:
            _body_loss(0, weights=(1.0, 0.3, 0.0))(states[-1], loss)
        tape.backward(loss)
        grads.append(states[0].body_qd.grad.numpy().copy())
    np.testing.assert_array_equal(grads[0], grads[1])
    assert abs(grads[0][0, 0]) > 0.05


# ----------------------------------------------------------------------------- particles
def test_particle_spring_gradients():
    """Two particles on a spring (ke 50, kd 0.1), 0.5 s under gravity: d (final position) / d initial
    velocities and / d spring stiffness (measured within 0.34 %)."""
    b = ModelBuilder()
    p0 = b.add_particle(wp.vec3(0.0, 0.0, 1.0), wp.vec3(0.0, 0.0, 0.0), 1.0, radius=0.01)
    p1 = b.add_particle(wp.vec3(0.3, 0.0, 1.0), wp.vec3(0.0, 0.0, 0.0), 1.0, radius=0.01)
    b.add_spring(p0, p1, 50.0, 0.1, 0)
    model = b.finalize(device="cpu", requires_grad=True)
    solver = SolverXPBD(model, iterations=4)
    v0 = np.array([[0.0, 0.5, 0.0], [1.0, 0.0, 0.2]], np.float32)

    def init(s):
        s.particle_qd.assign(v0)

    def loss(s, out):
        wp.launch(_particle_loss, dim=1, inputs=[s.particle_q, 1, wp.vec3(1.0, 0.3, 0.0)], outputs=[out])

    ke = model.spring_stiffness

    def shift_ke(d):
        ke.assign(ke.numpy() + 50.0 * d)

    params = {f"v0[{i},{k}]": ((lambda i, k: lambda st: float(st[0].particle_qd.grad.numpy()[i, k]))(i, k),
                               _shift(v0, i, k)) for i in range(2) for k in range(2)}  # fmt: skip
    params["spring_stiffness (x50)"] = (lambda st: 50.0 * float(model.spring_stiffness.grad.numpy()[0]), shift_ke)
    _check(model, solver, 100, 0.005, init, loss, params, eps=1e-2, rtol=0.02)


def test_particle_sliding_on_ground_gradients():
    """A particle sliding on the ground (particle-shape contact with friction) for 0.3 s, still
    moving: d x(T) / d v0 and d x(T) / d ground mu (measured within 0.02 %)."""
    b = ModelBuilder()
    b.add_particle(wp.vec3(0.0, 0.0, 0.05), wp.vec3(0.0, 0.0, 0.0), 0.1, radius=0.05)
    b.add_ground_plane(cfg=ModelBuilder.ShapeConfig(mu=0.4))
    model = b.finalize(device="cpu", requires_grad=True)
    solver = SolverXPBD(model, iterations=4)
    v0 = np.array([[1.5, 0.3, 0.0]], np.float32)

    def init(s):
        s.particle_qd.assign(v0)

    def loss(s, out):
        wp.launch(_particle_loss, dim=1, inputs=[s.particle_q, 0, wp.vec3(1.0, 0.0, 0.0)], outputs=[out])

    mu = model.shape_material_mu

    def shift_mu(d):
        mu.assign(mu.numpy() + d)

    params = {"vx0": (lambda st: float(st[0].particle_qd.grad.numpy()[0, 0]), _shift(v0, 0, 0)),
              "vy0": (lambda st: float(st[0].particle_qd.grad.numpy()[0, 1]), _shift(v0, 0, 1)),
              "mu": (lambda st: float(model.shape_material_mu.grad.numpy().sum()), shift_mu)}  # fmt: skip
    _check(model, solver, 60, 0.005, init, loss, params, eps=1e-2, rtol=0.02)
    _, states = _rollout(model, solver, 60, 0.005, init, loss, False)
    assert np.linalg.norm(states[-1].particle_qd.numpy()[0, :2]) > 0.1  # still sliding


def test_particle_particle_contact_gradients():
    """Two particles colliding head-on without gravity (hash-grid particle contacts): d (final
    position of the second) / d initial velocities (measured within 0.05 %)."""
    b = ModelBuilder()
    b.add_particle(wp.vec3(0.0, 0.0, 1.0), wp.vec3(0.0, 0.0, 0.0), 1.0, radius=0.05)
    b.add_particle(wp.vec3(0.3, 0.02, 1.0), wp.vec3(0.0, 0.0, 0.0), 1.0, radius=0.05)
    b.add_particle(wp.vec3(5.0, 0.0, 1.0), wp.vec3(0.0, 0.0, 0.0), 1.0, radius=0.05)
    model = b.finalize(device="cpu", requires_grad=True)
    model.set_gravity((0.0, 0.0, 0.0))
    solver = SolverXPBD(model, iterations=4)
    assert solver._use_grid
    v0 = np.array([[1.5, 0.0, 0.0], [-0.5, 0.0, 0.0], [0.0, 0.0, 0.0]], np.float32)

    def init(s):
        s.particle_qd.assign(v0)

    def loss(s, out):
        wp.launch(_particle_loss, dim=1, inputs=[s.particle_q, 1, wp.vec3(1.0, 0.5, 0.0)], outputs=[out])

    params = {f"v0[{i},{k}]": ((lambda i, k: lambda st: float(st[0].particle_qd.grad.numpy()[i, k]))(i, k),
                               _shift(v0, i, k)) for i in range(2) for k in range(2)}  # fmt: skip
    _check(model, solver, 60, 0.005, init, loss, params, eps=1e-2, rtol=0.02)


# ----------------------------------------------------------------------------- joints
def _pendulum(bob_radius=0.05, drive=False):
    """A 0.5 m revolute pendulum (axis x), the bob a 5 cm sphere (its own inertia small against m L^2)."""
    b = ModelBuilder()
    L = 0.5
    link = b.add_link(xform=wp.transform(wp.vec3(0.0, L, 1.0), wp.quat_identity()))
    b.add_shape_sphere(link, radius=bob_radius, cfg=ModelBuilder.ShapeConfig(density=1000.0, collision_group=-1))
    j = b.add_joint_revolute(-1, link, parent_xform=wp.transform(wp.vec3(0.0, 0.0, 1.0), wp.quat_identity()),
                             child_xform=wp.transform(wp.vec3(0.0, -L, 0.0), wp.quat_identity()),
                             axis=wp.vec3(1.0, 0.0, 0.0), target_ke=20.0 if drive else 0.0,
                             target_kd=0.5 if drive else 0.0)  # fmt: skip
    b.add_articulation([j])
    return b


@pytest.mark.parametrize("steps,dt", [(20, 0.01), (200, 0.002)])
def test_revolute_pendulum_gradients(steps, dt):
    """d (bob position) / d initial angular velocity of a pendulum released horizontally, the
    initial twist (w, w x r) consistent with the hinge (measured within 0.03 %). A point-like bob is
    the hard case for maximal coordinates: its rotation is cheap against its translation (a
    correction along the error's own direction overshot in the other directions, and the gradient
    grew without bound; the block solve of the locked directions does not)."""
    model = _pendulum().finalize(device="cpu", requires_grad=True)
    solver = SolverXPBD(model, iterations=4)
    w0 = np.array([1.0], np.float32)

    def init(s):
        _assign_twist(s, [0.0, 0.0, 0.5 * w0[0], w0[0], 0.0, 0.0])

    def grad(st):
        g = st[0].body_qd.grad.numpy()[0]
        return float(g[3] + 0.5 * g[2])

    for weights in ((0.0, 1.0, 0.0), (0.0, 0.0, 1.0)):
        _check(model, solver, steps, dt, init, _body_loss(0, weights=weights), {"omega0": (grad, _shift(w0, 0))},
               eps=1e-2, rtol=0.01)  # fmt: skip


def test_hinge_with_a_rotation_locked_child_falls_back_and_stays_finite():
    """A child without rotational freedom (zero inertia, so zero inverse inertia) hinged to the
    world: the angular block is singular and the hinge falls back to one row (which has nothing to
    move); the anchor lock still holds the link up, and the taped step's gradients are finite."""
    b = ModelBuilder()
    link = b.add_link(xform=wp.transform(wp.vec3(0.5, 0.0, 1.0), wp.quat_identity()), mass=1.0,
                      inertia=wp.mat33(0.0))  # fmt: skip
    j = b.add_joint_revolute(-1, link, parent_xform=wp.transform(wp.vec3(0.0, 0.0, 1.0), wp.quat_identity()),
                             child_xform=wp.transform(wp.vec3(-0.5, 0.0, 0.0), wp.quat_identity()),
                             axis=wp.vec3(0.0, 1.0, 0.0))  # fmt: skip
    b.add_articulation([j])
    model = b.finalize(device="cpu", requires_grad=True)
    assert not model.body_inv_inertia.numpy().any()
    solver = SolverXPBD(model)
    loss, states = _rollout(model, solver, 50, 0.01, lambda s: None, _body_loss(0, weights=(0.0, 0.0, 1.0)), True)
    assert abs(loss - 1.0) < 1e-3  # held at the anchor height
    assert np.isfinite(states[0].body_q.grad.numpy()).all() and np.isfinite(states[0].body_qd.grad.numpy()).all()


def test_pd_drive_target_gradients():
    """A revolute PD drive (ke 20, kd 0.5) towards 0.3 rad: d (bob position after 0.5 s) /
    d Control.joint_target_q and d Model.joint_target_ke (measured within 0.04 %)."""
    model = _pendulum(drive=True).finalize(device="cpu", requires_grad=True)
    solver = SolverXPBD(model, iterations=4)
    control = model.control(requires_grad=True)
    control.joint_target_q.assign(np.array([0.3], np.float32))

    def init(s):
        _assign_twist(s, [0.0, 0.0, 0.5, 1.0, 0.0, 0.0])

    def shift(arr, scale):
        def perturb(d):
            arr.assign(arr.numpy() + scale * d)

        return perturb

    params = {
        "joint_target_q": (lambda st: float(control.joint_target_q.grad.numpy()[0]),
                           shift(control.joint_target_q, 1.0)),
        "joint_target_ke (x20)": (lambda st: 20.0 * float(model.joint_target_ke.grad.numpy()[0]),
                                  shift(model.joint_target_ke, 20.0)),
    }  # fmt: skip
    _check(model, solver, 100, 0.005, init, _body_loss(0, weights=(0.0, 0.3, 1.0)), params, eps=1e-2, rtol=0.02,
           control=control)  # fmt: skip


def test_mimic_pair_gradients():
    """A revolute follower mimicking a revolute pendulum (q_f = 0.1 + 0.5 q_r), both 0.5 m box links:
    d (follower tip) / d reference angular velocity and / d the mimic offset (measured within
    0.02 % and 0.001 %)."""
    L = 0.5
    b = ModelBuilder()
    links = []
    for x in (0.0, 0.3):
        link = b.add_link(xform=wp.transform(wp.vec3(x, L / 2, 1.0), wp.quat_identity()))
        b.add_shape_box(link, hx=0.02, hy=L / 2, hz=0.02, cfg=ModelBuilder.ShapeConfig(density=1000.0,
                                                                                      collision_group=-1))
        links.append(b.add_joint_revolute(-1, link, parent_xform=wp.transform(wp.vec3(x, 0.0, 1.0), wp.quat_identity()),
                                          child_xform=wp.transform(wp.vec3(0.0, -L / 2, 0.0), wp.quat_identity()),
                                          axis=wp.vec3(1.0, 0.0, 0.0)))  # fmt: skip
    b.set_joint_mimic(links[1], links[0], coeffs=(0.1, 0.5))
    model = b.finalize(device="cpu", requires_grad=True)
    solver = SolverXPBD(model, iterations=4)
    w0 = np.array([1.0], np.float32)

    def init(s):
        qd = s.body_qd.numpy()
        qd[0] = [0.0, 0.0, 0.25 * w0[0], w0[0], 0.0, 0.0]
        s.body_qd.assign(qd)

    coeffs = model.joint_mimic_coeffs

    def shift_offset(d):
        c = coeffs.numpy()
        c[1, 0] += d
        coeffs.assign(c)

    def grad_w(st):
        g = st[0].body_qd.grad.numpy()[0]
        return float(g[3] + 0.25 * g[2])

    params = {"omega0 (reference)": (grad_w, _shift(w0, 0)),
              "mimic offset": (lambda st: float(model.joint_mimic_coeffs.grad.numpy()[1, 0]), shift_offset)}
    _check(model, solver, 100, 0.005, init, _body_loss(1, point=(0.0, L / 2, 0.0), weights=(0.0, 0.3, 1.0)), params,
           eps=1e-2, rtol=0.02)  # fmt: skip


def test_restitution_gradient_is_the_local_derivative():
    """A sphere (restitution 0.5) bouncing off the ground with restitution enabled: d (final pose) /
    d restitution and / d vx0 match the difference at eps 1e-3 (measured 0.65 %, 0.04 %). A larger
    eps changes on which steps the contact is active: the loss is only piecewise smooth in it."""
    b = ModelBuilder()
    body = b.add_body(xform=wp.transform(wp.vec3(0.0, 0.0, 0.3), wp.quat_identity()))
    b.add_shape_sphere(body, radius=0.1, cfg=ModelBuilder.ShapeConfig(density=1000.0, mu=0.5, restitution=0.5))
    b.add_ground_plane(cfg=ModelBuilder.ShapeConfig(mu=0.5, restitution=0.5))
    model = b.finalize(device="cpu", requires_grad=True)
    solver = SolverXPBD(model, iterations=4, enable_restitution=True)
    v0 = np.array([0.5, 0.0, -1.0, 0.0, 0.0, 0.0], np.float32)

    def init(s):
        _assign_twist(s, v0)

    e = model.shape_material_restitution

    def shift_e(d):
        e.assign(e.numpy() + d)

    params = {"restitution": (lambda st: float(model.shape_material_restitution.grad.numpy().sum()), shift_e),
              "vx0": (lambda st: float(st[0].body_qd.grad.numpy()[0, 0]), _shift(v0, 0))}
    _check(model, solver, 150, 1.0 / 400.0, init, _body_loss(0, weights=(0.3, 0.0, 1.0)), params, eps=1e-3,
           rtol=0.02)  # fmt: skip


# ----------------------------------------------------------------------------- the taped path itself
def _bit_scene():
    """Boxes (one sliding), a bouncing box, a rolling sphere with torsional/rolling friction, a spring
    pair and touching loose particles: every contact and particle path, no joint."""
    b = ModelBuilder()
    for i in range(3):
        body = b.add_body(xform=wp.transform(wp.vec3(0.5 * i, 0.0, 0.1 + 0.001 * i),
                                             wp.quat_from_axis_angle(wp.vec3(0.0, 0.0, 1.0), 0.1 * i)))
        b.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1, cfg=ModelBuilder.ShapeConfig(density=1000.0, mu=0.5))
    d = b.add_body(xform=wp.transform(wp.vec3(-1.2, 0.0, 0.3), wp.quat_from_axis_angle(wp.vec3(1.0, 0.0, 0.0), 0.2)))
    b.add_shape_box(d, hx=0.1, hy=0.1, hz=0.1, cfg=ModelBuilder.ShapeConfig(density=1000.0, mu=0.5, restitution=0.6))
    s = b.add_body(xform=wp.transform(wp.vec3(-0.6, 0.0, 0.1), wp.quat_identity()))
    b.add_shape_sphere(s, radius=0.1, cfg=ModelBuilder.ShapeConfig(density=500.0, mu=0.6, mu_rolling=0.001,
                                                                    mu_torsional=0.01))  # fmt: skip
    p0 = b.add_particle(wp.vec3(1.5, 0.0, 0.5), wp.vec3(0.3, 0.0, 0.0), 0.1, radius=0.03)
    p1 = b.add_particle(wp.vec3(1.5, 0.2, 0.5), wp.vec3(0.0, 0.0, 0.0), 0.1, radius=0.03)
    b.add_spring(p0, p1, 100.0, 0.5, 0)
    for i in range(4):
        b.add_particle(wp.vec3(2.0 + 0.05 * i, 0.0, 0.2 + 0.07 * i), wp.vec3(0.0, 0.0, 0.0), 0.05, radius=0.03)
    b.add_ground_plane()
    return b


# sha256 of the final body_q, body_qd, particle_q, particle_qd bytes after 120 steps of _bit_scene,
# computed with the solver as it was before it became differentiable (commit 0b4a047, Warp 1.19 CPU)
_BIT_HASHES = {
    False: "155b3ebfc5f0c75a4c4f3b344b48fd36ae1e9d965ab9efc359273ccf8e263470",
    True: "25fd728881653fb0eb347c109f9c231e5f29f54f2b2f897c7c05b2ee7c4aa3cb",
}


@pytest.mark.parametrize("restitution", [False, True])
def test_untaped_results_are_bit_identical_to_before(restitution):
    """The untaped step computes exactly what it computed before the solver became differentiable
    (every contact, friction, restitution and particle path; joints excepted: their locked
    directions are now one block solve, see the README). Body 0's final x was 0.14078959822654724."""
    if not wp.__version__.startswith("1.19."):
        pytest.skip(f"the stored results are Warp 1.19's CPU code; this is Warp {wp.__version__}")
    model = _bit_scene().finalize(device="cpu")
    solver = SolverXPBD(model, iterations=3, enable_restitution=restitution)
    s0, s1 = model.state(), model.state()
    qd = s0.body_qd.numpy()
    qd[0, 0] = 1.5
    qd[4, 0] = 1.0
    s0.body_qd.assign(qd)
    control, contacts = model.control(), model.contacts()
    for _ in range(120):
        s0.clear_forces()
        model.collide(s0, contacts)
        solver.step(s0, s1, control, contacts, 1.0 / 600.0)
        s0, s1 = s1, s0
    arrays = [getattr(s0, k).numpy() for k in ("body_q", "body_qd", "particle_q", "particle_qd")]
    assert float(arrays[0][0, 0]) == 0.14078959822654724
    digest = hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)).hexdigest()
    assert digest == _BIT_HASHES[restitution]


def test_taped_step_computes_the_untaped_values():
    """Under a tape the step writes fresh intermediate arrays but the same numbers: a scene with
    joints (a driven chain with limits), contacts, restitution and particles, 30 steps both ways."""
    b = _bit_scene()
    parent, joints = -1, []
    for k in range(3):
        link = b.add_link(xform=wp.transform(wp.vec3(0.0, 2.0, 2.0 - 0.3 * (k + 1)), wp.quat_identity()))
        b.add_shape_capsule(link, radius=0.03, half_height=0.12, cfg=ModelBuilder.ShapeConfig(collision_group=-1))
        px = wp.transform(wp.vec3(0.0, 2.0, 2.0) if parent < 0 else wp.vec3(0.0, 0.0, -0.15), wp.quat_identity())
        joints.append(b.add_joint_revolute(
            parent, link, parent_xform=px, child_xform=wp.transform(wp.vec3(0.0, 0.0, 0.15), wp.quat_identity()),
            axis=wp.vec3(1.0, 0.0, 0.0), target_ke=50.0 if k == 0 else 0.0, target_kd=2.0 if k == 0 else 0.0,
            limit_lower=-1.0, limit_upper=1.0))  # fmt: skip
        parent = link
    b.add_articulation(joints)
    model = b.finalize(device="cpu", requires_grad=True)
    results = []
    for taped in (False, True):
        solver = SolverXPBD(model, iterations=3, enable_restitution=True)
        states = [model.state(requires_grad=taped) for _ in range(31)]
        qd = states[0].body_qd.numpy()
        qd[0, 0] = 1.5
        qd[5:8, 1] = [0.8, 1.6, 2.4]
        states[0].body_qd.assign(qd)
        tape = wp.Tape()
        for i in range(30):
            contacts = model.contacts()
            model.collide(states[i], contacts)
            if taped:
                with tape:
                    solver.step(states[i], states[i + 1], None, contacts, 1.0 / 600.0)
            else:
                solver.step(states[i], states[i + 1], None, contacts, 1.0 / 600.0)
        results.append([getattr(states[-1], k).numpy() for k in ("body_q", "body_qd", "particle_q", "particle_qd")])
        if taped:
            assert solver.tape_bytes_per_step > 0
    for a, b_ in zip(*results):
        np.testing.assert_array_equal(a, b_)


def test_taped_step_refuses_to_overwrite_what_the_tape_reads():
    """In-place steps and ping-pong states would overwrite values an earlier launch's adjoint reads
    back: under a tape both raise (naming the array), instead of giving wrong gradients."""
    b = ModelBuilder()
    b.add_body(xform=wp.transform(wp.vec3(0.0, 0.0, 1.0), wp.quat_identity()))
    b.add_shape_sphere(0, radius=0.1)
    model = b.finalize(device="cpu", requires_grad=True)
    solver = SolverXPBD(model)
    s0, s1 = model.state(requires_grad=True), model.state(requires_grad=True)
    with wp.Tape():
        with pytest.raises(ValueError, match="state_out.body_q is an array that state_in reads"):
            solver.step(s0, s0, None, None, 0.01)
    with wp.Tape():
        solver.step(s0, s1, None, None, 0.01)
        with pytest.raises(ValueError, match="an earlier step of this tape reads"):
            solver.step(s1, s0, None, None, 0.01)
    tape = wp.Tape()
    with tape:
        solver.step(s0, s1, None, None, 0.01)
    tape.reset()  # a new recording: the earlier reads no longer matter
    with tape:
        solver.step(s1, s0, None, None, 0.01)
    # untaped, in-place and ping-pong stepping stay allowed
    solver.step(s0, s0, None, None, 0.01)
    assert np.isfinite(s0.body_q.numpy()).all()


def test_memory_per_taped_step_is_reported_and_constant():
    """``tape_bytes_per_step``: what one taped step allocates (kept alive by the tape), the same for
    every step of a scene; 0 before any taped step. The free body of the issue: 308 bytes."""
    b = ModelBuilder()
    body = b.add_body(xform=wp.transform(wp.vec3(0.0, 0.0, 1.0), wp.quat_identity()))
    b.add_shape_box(body, hx=0.1, hy=0.2, hz=0.3)
    model = b.finalize(device="cpu", requires_grad=True)
    solver = SolverXPBD(model)
    assert solver.tape_bytes_per_step == 0
    states = [model.state(requires_grad=True) for _ in range(4)]
    sizes = []
    with wp.Tape():
        for i in range(3):
            solver.step(states[i], states[i + 1], None, None, 0.01)
            sizes.append(solver.tape_bytes_per_step)
    assert sizes == [308, 308, 308]


def test_contact_forces_of_a_taped_step():
    """The ``contact_f`` observable of a taped step equals the untaped one."""
    b = ModelBuilder()
    body = b.add_body(xform=wp.transform(wp.vec3(0.0, 0.0, 0.099), wp.quat_identity()))
    b.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1, cfg=ModelBuilder.ShapeConfig(density=1000.0))
    b.add_ground_plane()
    model = b.finalize(device="cpu", requires_grad=True)
    forces = []
    for taped in (False, True):
        solver = SolverXPBD(model)
        s0, s1 = model.state(requires_grad=taped), model.state(requires_grad=taped)
        contacts = model.collide(s0)
        obs = solver.observables({solver.ObservableKind.CONTACT_F}, contacts=contacts)
        if taped:
            with wp.Tape():
                solver.step(s0, s1, None, contacts, 0.01, observables=obs)
        else:
            solver.step(s0, s1, None, contacts, 0.01, observables=obs)
        forces.append(obs.contact_f.numpy().copy())
    np.testing.assert_array_equal(forces[0], forces[1])
    assert np.abs(forces[0]).sum() > 0.0

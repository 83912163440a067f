"""SolverFeatherstone against analytic solutions and conservation laws (CPU device)."""

from __future__ import annotations

import math
import os
import warnings

import numpy as np
import pytest
import warp as wp

import armillary
from armillary.solvers import SolverFeatherstone

wp.config.log_level = wp.LOG_WARNING

G = 9.81


def pendulum(length=1.0, mass=1.0, q0=0.1, joint="revolute"):
    """A point-like bob at ``length`` from a pivot at the origin, swinging about world y."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, -G))
    r = 0.01
    link = b.add_link(mass=mass, inertia=wp.mat33(np.eye(3, dtype=np.float32) * (0.4 * mass * r * r)))
    child = wp.transform((0.0, 0.0, length), wp.quat_identity())  # bob hangs at z = -length
    if joint == "revolute":
        j = b.add_joint_revolute(-1, link, axis=(0.0, 1.0, 0.0), child_xform=child)
    else:
        j = b.add_joint_ball(-1, link, child_xform=child)
    b.add_articulation([j])
    model = b.finalize(device="cpu")
    state = model.state()
    q = state.joint_q.numpy()
    if joint == "revolute":
        q[0] = q0
    else:
        q[:4] = [0.0, math.sin(q0 / 2), 0.0, math.cos(q0 / 2)]
    state.joint_q.assign(q)
    armillary.eval_fk(model, state.joint_q, state.joint_qd, state)
    return model, state


def run(model, state, steps, dt, record=None, control=None, **kw):
    solver = SolverFeatherstone(model, **{"angular_damping": 0.0, **kw})
    s0, s1 = state, model.state()
    for i in range(steps):
        solver.step(s0, s1, control, None, dt)
        s0, s1 = s1, s0
        if record is not None:
            record(i, s0)
    return s0


def energy(model, state):
    """Kinetic + potential energy [J] from body_q / body_qd (COM twists)."""
    q, qd = state.body_q.numpy().astype(np.float64), state.body_qd.numpy().astype(np.float64)
    m, com, inertia = model.body_mass.numpy(), model.body_com.numpy(), model.body_inertia.numpy()
    e = 0.0
    for i in range(model.body_count):
        x, quat = q[i, :3], q[i, 3:]
        R = _rot(quat)
        c = x + R @ com[i]
        w = qd[i, 3:]
        e += 0.5 * m[i] * qd[i, :3] @ qd[i, :3] + 0.5 * w @ (R @ inertia[i] @ R.T) @ w + m[i] * G * c[2]
    return e


def _rot(q):
    x, y, z, w = q
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])  # fmt: skip


def test_small_amplitude_pendulum_period():
    """T = 2 pi sqrt(l/g) for small amplitude (0.05 rad: finite-amplitude correction 1.6e-4)."""
    model, state = pendulum(q0=0.05)
    dt = 2.0e-4
    crossings = []
    prev = [0.05]

    def record(i, s):
        q = float(s.joint_q.numpy()[0])
        if (prev[0] > 0.0) != (q > 0.0):  # zero crossing, either direction: half a period apart
            crossings.append((i + 1) * dt - dt * q / (q - prev[0]))
        prev[0] = q

    run(model, state, 25000, dt, record)
    assert len(crossings) >= 4
    period = 2.0 * float(np.mean(np.diff(crossings)))
    expected = 2.0 * math.pi * math.sqrt(1.0 / G) * (1.0 + 0.05**2 / 16.0)
    assert abs(period - expected) / expected < 2.0e-3, (period, expected)


@pytest.mark.parametrize("joint", ["revolute", "ball"])
def test_pendulum_energy_is_conserved(joint):
    """Semi-implicit Euler is symplectic: the energy error of a 1 rad swing stays bounded
    (|dE| / (m g l) < 2e-3 over 3 s at dt = 1 ms), with no drift."""
    model, state = pendulum(q0=1.0, joint=joint)
    e0 = energy(model, state)
    errors = []
    run(model, state, 3000, 1.0e-3, lambda i, s: errors.append(energy(model, s) - e0) if i % 50 == 0 else None)
    errors = np.abs(errors) / (1.0 * G * 1.0)
    assert errors.max() < 2.0e-3, errors.max()
    assert np.mean(errors[-10:]) < 2.0 * np.mean(errors[:10]) + 1.0e-4  # bounded, not drifting


def test_free_fall_and_spin():
    """A FREE body: COM follows z0 - g t^2/2 exactly (semi-implicit Euler error g t dt / 2);
    its spin about a principal axis is preserved."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, -G))
    body = b.add_body(xform=wp.transform((0.0, 0.0, 10.0), wp.quat_identity()), mass=2.0,
                      inertia=wp.mat33(np.diag([0.1, 0.2, 0.3]).astype(np.float32)))  # fmt: skip
    b.add_shape_sphere(body, radius=0.1, cfg=armillary.ModelBuilder.ShapeConfig(density=0.0))
    model = b.finalize(device="cpu")
    state = model.state()
    qd = np.zeros(6, np.float32)
    qd[5] = 3.0
    state.joint_qd.assign(qd)
    armillary.eval_fk(model, state.joint_q, state.joint_qd, state)
    dt, steps = 1.0e-3, 1000
    out = run(model, state, steps, dt)
    t = steps * dt
    z = float(out.body_q.numpy()[0, 2])
    assert abs(z - (10.0 - 0.5 * G * t * t)) <= 0.5 * G * t * dt + 1e-4
    np.testing.assert_allclose(out.body_qd.numpy()[0], [0, 0, -G * t, 0, 0, 3.0], atol=1e-3)


def test_passive_spring_frequency():
    """A revolute joint with stiffness k about rest_q oscillates at sqrt(k / I) around rest_q (no gravity)."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    inertia = 0.02
    link = b.add_link(mass=1.0, inertia=wp.mat33(np.diag([inertia, inertia, inertia]).astype(np.float32)))
    j = b.add_joint_revolute(-1, link, axis=(0.0, 0.0, 1.0), stiffness=2.0, rest_q=0.3)
    b.add_articulation([j])
    model = b.finalize(device="cpu")
    state = model.state()
    qs = []
    run(model, state, 4000, 5.0e-4, lambda i, s: qs.append(float(s.joint_q.numpy()[0])))
    qs = np.array(qs)
    assert abs(0.5 * (qs.max() + qs.min()) - 0.3) < 2e-3
    spectrum = np.abs(np.fft.rfft(qs - qs.mean(), n=1 << 16))
    freq = np.fft.rfftfreq(1 << 16, 5.0e-4)[np.argmax(spectrum)] * 2.0 * math.pi
    assert abs(freq - math.sqrt(2.0 / inertia)) / math.sqrt(2.0 / inertia) < 0.02


CARTPOLE_MJCF = """<mujoco><option timestep="0.001" integrator="Euler" gravity="0 0 -9.81"/><worldbody>
<body><joint type="slide" axis="1 0 0"/><inertial pos="0 0 0" mass="1" diaginertia="0.01 0.01 0.01"/>
<body pos="0 0 0.1"><joint type="hinge" axis="0 1 0"/><inertial pos="0 0 0.5" mass="0.1" diaginertia="0.01 0.01 1e-4"/>
</body></body></worldbody></mujoco>"""


def test_cartpole_released_from_rest_matches_mujoco(tmp_path):
    """A cartpole released from rest with the pole tilted 0.2 rad: cart and pole coordinates
    agree with MuJoCo (Euler, same dt) within 1e-4 over 2 s, while the pole falls."""
    mujoco = pytest.importorskip("mujoco")
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, -G))
    cart = b.add_link(mass=1.0, inertia=wp.mat33(np.eye(3, dtype=np.float32) * 0.01))
    pole = b.add_link(mass=0.1, com=(0.0, 0.0, 0.5), inertia=wp.mat33(np.diag([0.01, 0.01, 1e-4]).astype(np.float32)))
    j0 = b.add_joint_prismatic(-1, cart, axis=(1.0, 0.0, 0.0))
    j1 = b.add_joint_revolute(cart, pole, axis=(0.0, 1.0, 0.0), parent_xform=wp.transform((0, 0, 0.1), wp.quat_identity()))
    b.add_articulation([j0, j1])
    model = b.finalize(device="cpu")
    state = model.state()
    state.joint_q.assign(np.array([0.0, 0.2], np.float32))
    armillary.eval_fk(model, state.joint_q, state.joint_qd, state)

    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        m = mujoco.MjModel.from_xml_string(CARTPOLE_MJCF)
    finally:
        os.chdir(cwd)
    d = mujoco.MjData(m)
    d.qpos[:] = [0.0, 0.2]
    worst = [0.0]

    def record(i, s):
        mujoco.mj_step(m, d)
        worst[0] = max(worst[0], float(np.abs(s.joint_q.numpy() - d.qpos).max()))

    out = run(model, state, 2000, 1.0e-3, record)
    assert abs(float(out.joint_q.numpy()[1])) > 1.0  # the pole fell
    assert worst[0] < 1.0e-4, worst[0]  # float32 coordinates: round-off grows to ~2e-5 over 2000 steps


# ------------------------------------------------------------- free bodies keep their angular momentum
def _free_body(inertia_diag, w, gravity=(0.0, 0.0, 0.0)):
    b = armillary.ModelBuilder(gravity=gravity)
    link = b.add_link(mass=1.0, inertia=wp.mat33(np.diag(inertia_diag).astype(np.float32)))
    b.add_articulation([b.add_joint_free(link)])
    model = b.finalize(device="cpu")
    state = model.state()
    qd = np.zeros(6, np.float32)
    qd[3:] = w
    state.joint_qd.assign(qd)
    armillary.eval_fk(model, state.joint_q, state.joint_qd, state)
    return model, state


def test_torque_free_body_follows_eulers_equations_with_the_default_solver():
    """Default constructor (``angular_damping=0.05`` kept for signature compatibility, not applied,
    as in the reference engine): a torque-free body with inertia diag(21.3, 53.3, 53.3) spinning at
    w = (0.3, -0.1, 0.2) gets Euler's acceleration -I^-1 (w x I w) = (0, 0.036, 0.018) rad/s^2
    (with the hidden damping it was (-0.0149, 0.0410, 0.0080)); over 10 s its world angular
    momentum and kinetic energy stay constant (the rotation update is an explicit exponential
    map: |dL|/|L| < 2e-3 at dt = 1 ms)."""
    inertia_diag, w = np.array([21.3, 53.3, 53.3]), np.array([0.3, -0.1, 0.2])
    model, state = _free_body(inertia_diag, w)
    solver = SolverFeatherstone(model)
    assert solver.angular_damping == 0.05
    dt = 1.0e-3
    out = model.state()
    solver.step(state, out, None, None, dt)
    qdd = (out.joint_qd.numpy()[3:].astype(np.float64) - w) / dt
    euler = -np.cross(w, inertia_diag * w) / inertia_diag
    np.testing.assert_allclose(qdd, euler, atol=2e-4)
    np.testing.assert_allclose(euler, [0.0, 0.036023, 0.018015], atol=1e-5)

    def momentum(s):
        R = _rot(s.body_q.numpy()[0, 3:].astype(np.float64))
        wv = s.body_qd.numpy()[0, 3:].astype(np.float64)
        L = R @ np.diag(inertia_diag) @ R.T @ wv
        return L, 0.5 * wv @ L

    L0, e0 = momentum(state)
    s = run(model, state, 10000, dt)
    L1, e1 = momentum(s)
    assert np.linalg.norm(L1 - L0) / np.linalg.norm(L0) < 2e-3, (L0, L1)
    assert abs(e1 - e0) / e0 < 2e-3, (e0, e1)


def test_angular_damping_argument_is_accepted_and_changes_nothing():
    """``angular_damping`` is validated and stored but not applied (as in the reference engine 1.8):
    two solvers built with 0 and 5 give bit-identical steps."""
    outs = []
    for damping in (0.0, 5.0):
        model, state = _free_body([1.0, 2.0, 3.0], [0.5, -1.0, 2.0])
        out = run(model, state, 100, 1.0e-3, angular_damping=damping)
        outs.append(out.joint_qd.numpy())
    np.testing.assert_array_equal(outs[0], outs[1])


def test_inverse_dynamics_force_through_joint_f_gives_back_joint_qdd_for_a_floating_base():
    """eval_inverse_dynamics_force -> Control.joint_f -> one default SolverFeatherstone step gives
    back the requested joint_qdd (dt = 1 ms) for a free-floating base tumbling with two revolute
    links: before the angular damping was dropped the FREE rows were off by up to 7 %."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, -G))
    base = b.add_link(mass=4.0, inertia=wp.mat33(np.diag([21.3, 53.3, 53.3]).astype(np.float32) * 0.01))
    l1 = b.add_link(mass=1.0, com=(0.0, 0.0, 0.2), inertia=wp.mat33(np.diag([0.02, 0.02, 0.005]).astype(np.float32)))
    l2 = b.add_link(mass=0.5, com=(0.0, 0.0, 0.15), inertia=wp.mat33(np.diag([0.01, 0.01, 0.002]).astype(np.float32)))
    at = lambda x, y, z: wp.transform((x, y, z), wp.quat_identity())  # noqa: E731
    joints = [
        b.add_joint_free(base),
        b.add_joint_revolute(base, l1, axis=(0.0, 1.0, 0.0), parent_xform=at(0.2, 0.0, 0.1)),
        b.add_joint_revolute(l1, l2, axis=(1.0, 0.0, 0.0), parent_xform=at(0.0, 0.0, 0.4)),
    ]
    b.add_articulation(joints)
    model = b.finalize(device="cpu")
    state = model.state()
    rng = np.random.default_rng(7)
    q = state.joint_q.numpy()
    quat = rng.normal(size=4)
    q[:7] = [0.1, -0.2, 1.0, *(quat / np.linalg.norm(quat))]
    q[7:] = [0.4, -0.7]
    state.joint_q.assign(q)
    state.joint_qd.assign(np.array([0.3, -0.2, 0.1, 0.3, -0.1, 0.2, 1.5, -2.0], np.float32))
    armillary.eval_fk(model, state.joint_q, state.joint_qd, state)
    n = int(model.max_dofs_per_articulation)
    M = wp.zeros((1, n, n), dtype=float, device="cpu")
    g = wp.zeros(model.joint_dof_count, dtype=float, device="cpu")
    c = wp.zeros(model.joint_dof_count, dtype=float, device="cpu")
    armillary.eval_inverse_dynamics_passive(model, state, mass_matrix=M, gravity_force=g, coriolis_force=c)
    qdd = np.array([0.5, -1.0, 2.0, 1.5, -0.5, 1.0, -3.0, 2.5], np.float32)
    control = model.control()
    armillary.eval_inverse_dynamics_force(model, state, mass_matrix=M, joint_qdd=wp.array(qdd, device="cpu"),
                                          coriolis_force=c, gravity_force=g, joint_f=control.joint_f)  # fmt: skip
    dt = 1.0e-3
    out = model.state()
    SolverFeatherstone(model).step(state, out, control, None, dt)
    got = (out.joint_qd.numpy().astype(np.float64) - state.joint_qd.numpy()) / dt
    np.testing.assert_allclose(got, qdd, rtol=2e-3, atol=5e-3)

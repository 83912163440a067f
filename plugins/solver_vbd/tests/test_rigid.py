"""Rigid half of SolverVBD (AVBD): bodies, joints, drives, limits, loops, contacts, friction."""

from __future__ import annotations

import math

import numpy as np
import pytest
import warp as wp

import armillary as newton

try:  # the particle half may land later; the rigid tests do not use it
    import armillary_solver_vbd.particles as _particles

    if not hasattr(_particles, "ParticleVBD"):
        _particles.ParticleVBD = None
except ImportError:  # pragma: no cover
    pass

DEV = "cpu"


def _run(model, solver, steps, dt, control=None, state=None, record=None, apply=None, collide=True):
    s0 = state if state is not None else model.state()
    s1 = model.state()
    contacts = model.contacts() if (collide and model.shape_count) else None
    for _ in range(steps):
        s0.clear_forces()
        if apply is not None:
            apply(s0)
        if contacts is not None:
            model.collide(s0, contacts)
        solver.step(s0, s1, control, contacts, dt)
        s0, s1 = s1, s0
        if record is not None:
            record(s0)
    return s0


def _com_z(state, model, b=0):
    q = state.body_q.numpy()[b]
    com = model.body_com.numpy()[b]
    import warp as _wp

    return np.array(_wp.transform_point(_wp.transform(q[:3], q[3:]), _wp.vec3(*com)))


def test_free_fall_exact():
    b = newton.ModelBuilder()
    body = b.add_body(xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()))
    b.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1)
    b.color()
    m = b.finalize(device=DEV)
    s = newton.solvers.SolverVBD(m, iterations=3)
    dt, n = 0.01, 40
    st = _run(m, s, n, dt, collide=False)
    z = st.body_q.numpy()[0, 2]
    expected = 1.0 - 9.81 * dt * dt * n * (n + 1) / 2  # implicit Euler: v_k = -g k dt
    assert abs(z - expected) < 1e-4
    assert abs(st.body_qd.numpy()[0, 2] + 9.81 * n * dt) < 1e-3
    np.testing.assert_allclose(st.body_q.numpy()[0, 3:], [0, 0, 0, 1], atol=1e-6)


def _box_on_ground(z0=0.1, mu=0.5, up_slope=None):
    b = newton.ModelBuilder()
    cfg = newton.ModelBuilder.ShapeConfig(mu=mu, ke=1.0e5, kd=1.0e2)
    b.add_ground_plane(cfg=cfg)
    body = b.add_body(xform=wp.transform((0.0, 0.0, z0), wp.quat_identity()))
    b.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1, cfg=cfg)
    b.color()
    return b


def test_box_rests_on_ground():
    b = _box_on_ground(0.1)
    m = b.finalize(device=DEV)
    s = newton.solvers.SolverVBD(m, iterations=10)
    st = _run(m, s, 60, 1.0 / 60.0)
    q = st.body_q.numpy()[0]
    mass = float(m.body_mass.numpy()[0])
    bound = 2.0 * mass * 9.81 / 1.0e5 + 2e-3  # compliant contact: ~ m g / (sum of contact ke) penetration
    assert 0.1 - bound < q[2] < 0.1 + 1e-3, q
    assert np.abs(st.body_qd.numpy()[0]).max() < 0.05
    assert abs(q[0]) < 1e-3 and abs(q[1]) < 1e-3


def _slope_run(angle_deg, mu):
    b = newton.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    cfg = newton.ModelBuilder.ShapeConfig(mu=mu, ke=1.0e5, kd=1.0e2)
    b.add_ground_plane(cfg=cfg)
    body = b.add_body(xform=wp.transform((0.0, 0.0, 0.1), wp.quat_identity()))
    b.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1, cfg=cfg)
    b.color()
    m = b.finalize(device=DEV)
    # tilted gravity == a slope of `angle` about y
    a = math.radians(angle_deg)
    m.gravity.assign(np.array([[9.81 * math.sin(a), 0.0, -9.81 * math.cos(a)]], dtype=np.float32))
    s = newton.solvers.SolverVBD(m, iterations=10, friction_epsilon=1e-3)
    st = _run(m, s, 60, 1.0 / 60.0)
    return st.body_q.numpy()[0, 0]


def test_friction_sticks_on_shallow_slope():
    assert abs(_slope_run(15.0, 0.5)) < 5e-3  # friction angle 26.6 deg


def test_friction_on_slope():
    mu = 0.5
    x_slide = _slope_run(40.0, mu)
    # sliding: a = g (sin - mu cos) over 1 s -> 0.5 a t^2
    a = 9.81 * (math.sin(math.radians(40)) - mu * math.cos(math.radians(40)))
    assert abs(x_slide - 0.5 * a) < 0.05 * 0.5 * a, (x_slide, 0.5 * a)


def test_revolute_pendulum_period():
    L = 1.0
    b = newton.ModelBuilder()
    th0 = 0.1
    # pendulum bob at distance L below a world pivot at z=2, rotating about x
    pos = (0.0, L * math.sin(th0), 2.0 - L * math.cos(th0))
    body = b.add_body(xform=wp.transform(pos, wp.quat_from_axis_angle(wp.vec3(1.0, 0.0, 0.0), th0)),
                      mass=1.0, inertia=wp.mat33(np.eye(3) * 1e-4))  # fmt: skip
    b.add_joint_revolute(-1, body, axis=(1.0, 0.0, 0.0), parent_xform=wp.transform((0.0, 0.0, 2.0), wp.quat_identity()),
                         child_xform=wp.transform((0.0, 0.0, L), wp.quat_identity()))  # fmt: skip
    b.color()
    m = b.finalize(device=DEV)
    s = newton.solvers.SolverVBD(m, iterations=10)
    ys = []
    dt = 1.0 / 240.0
    _run(m, s, 720, dt, record=lambda st: ys.append(st.body_q.numpy()[0, 1]), collide=False)
    ys = np.array(ys)
    # zero crossings from + to -
    idx = np.nonzero((ys[:-1] > 0) & (ys[1:] <= 0))[0]
    t = (idx + ys[idx] / (ys[idx] - ys[idx + 1])) * dt
    period = np.diff(t).mean()
    T0 = 2 * math.pi * math.sqrt(L / 9.81) * (1 + th0 * th0 / 16)
    err = abs(period - T0) / T0
    print(f"pendulum period {period:.4f} s vs {T0:.4f} s: error {err * 100:.2f} %")
    assert err < 0.02
    # the joint holds
    q = m.body_q.numpy()[0]
    st_q = ys  # noqa: F841


def test_prismatic_and_d6_drives_reach_targets():
    b = newton.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    b0 = b.add_body(xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()), mass=1.0)
    b.add_shape_box(b0, hx=0.05, hy=0.05, hz=0.05)
    b.add_joint_prismatic(-1, b0, axis=(1.0, 0.0, 0.0), parent_xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()),
                          target_q=0.3, target_ke=200.0, target_kd=40.0)  # fmt: skip
    b1 = b.add_body(xform=wp.transform((2.0, 0.0, 1.0), wp.quat_identity()), mass=1.0)
    b.add_shape_box(b1, hx=0.05, hy=0.05, hz=0.05)
    JC = newton.ModelBuilder.JointDofConfig
    b.add_joint_d6(-1, b1, linear_axes=[JC(axis=(0, 1, 0), target_q=-0.2, target_ke=200.0, target_kd=40.0)],
                   angular_axes=[JC(axis=(0, 0, 1), target_q=0.5, target_ke=5.0, target_kd=1.0)],
                   parent_xform=wp.transform((2.0, 0.0, 1.0), wp.quat_identity()))  # fmt: skip
    b.color()
    m = b.finalize(device=DEV)
    s = newton.solvers.SolverVBD(m, iterations=10)
    st = _run(m, s, 240, 1.0 / 60.0, control=m.control(), collide=False)
    q = st.body_q.numpy()
    assert abs(q[0, 0] - 0.3) < 5e-3 and abs(q[0, 1]) < 1e-3 and abs(q[0, 2] - 1.0) < 1e-3
    assert abs(q[1, 1] + 0.2) < 5e-3 and abs(q[1, 0] - 2.0) < 1e-3
    ang = 2 * math.atan2(q[1, 5], q[1, 6])
    assert abs(ang - 0.5) < 1e-2, ang


def test_revolute_limit_holds():
    b = newton.ModelBuilder()
    body = b.add_body(xform=wp.transform((0.0, 0.5, 2.0), wp.quat_identity()), mass=1.0)
    b.add_shape_box(body, hx=0.05, hy=0.5, hz=0.05)
    b.add_joint_revolute(-1, body, axis=(1.0, 0.0, 0.0), parent_xform=wp.transform((0.0, 0.0, 2.0), wp.quat_identity()),
                         child_xform=wp.transform((0.0, -0.5, 0.0), wp.quat_identity()), limit_lower=-0.3,
                         limit_upper=0.3, limit_ke=1.0e5, limit_kd=10.0)  # fmt: skip
    b.color()
    m = b.finalize(device=DEV)
    s = newton.solvers.SolverVBD(m, iterations=10)
    st = _run(m, s, 120, 1.0 / 60.0, collide=False)
    q = st.body_q.numpy()[0]
    ang = 2 * math.atan2(q[3], q[6])
    assert -0.3 - 0.03 < ang < -0.25, ang  # falls onto the lower limit (rotation about +x lowers +y)


def test_four_bar_loop_stays_closed():
    b = newton.ModelBuilder()
    L = 0.5
    rot = wp.quat_identity()
    # crank (world pivot at origin), coupler, rocker (world pivot at (0, 1, 0)): a parallelogram in the y-z plane
    crank = b.add_body(xform=wp.transform((0.0, 0.0, L / 2), rot), mass=1.0)
    coupler = b.add_body(xform=wp.transform((0.0, 0.5, L), rot), mass=1.0)
    rocker = b.add_body(xform=wp.transform((0.0, 1.0, L / 2), rot), mass=1.0)
    for bb in (crank, rocker):
        b.add_shape_box(bb, hx=0.02, hy=0.02, hz=L / 2)
    b.add_shape_box(coupler, hx=0.02, hy=0.5, hz=0.02)
    X = lambda *p: wp.transform(p, rot)  # noqa: E731
    ax = (1.0, 0.0, 0.0)
    b.add_joint_revolute(-1, crank, axis=ax, parent_xform=X(0, 0, 0), child_xform=X(0, 0, -L / 2))
    b.add_joint_revolute(crank, coupler, axis=ax, parent_xform=X(0, 0, L / 2), child_xform=X(0, -0.5, 0))
    b.add_joint_revolute(coupler, rocker, axis=ax, parent_xform=X(0, 0.5, 0), child_xform=X(0, 0, L / 2))
    b.add_joint_revolute(-1, rocker, axis=ax, parent_xform=X(0, 1.0, 0), child_xform=X(0, 0, -L / 2))  # loop
    b.color()
    m = b.finalize(device=DEV)
    s = newton.solvers.SolverVBD(m, iterations=10)
    st = m.state()
    st.body_qd.assign(np.array([[0, 0.5, 0, 0, 0, 0], [0, 1.0, 0, 0, 0, 0], [0, 0.5, 0, 0, 0, 0]], np.float32))
    st = _run(m, s, 90, 1.0 / 60.0, state=st, collide=False)
    q = st.body_q.numpy()
    T = lambda i: wp.transform(q[i, :3], q[i, 3:])  # noqa: E731
    # the loop-closing joint: rocker bottom anchor at the world pivot
    p = np.array(wp.transform_point(T(rocker), wp.vec3(0, 0, -L / 2)))
    assert np.linalg.norm(p - np.array([0, 1.0, 0])) < 5e-3, p
    p1 = np.array(wp.transform_point(T(coupler), wp.vec3(0, 0.5, 0)))
    p2 = np.array(wp.transform_point(T(rocker), wp.vec3(0, 0, L / 2)))
    assert np.linalg.norm(p1 - p2) < 5e-3
    assert np.isfinite(q).all() and abs(q[crank, 3]) > 0.05  # it moved (fell)


def test_kinematic_body_pushes_dynamic_one():
    b = newton.ModelBuilder()
    cfg = newton.ModelBuilder.ShapeConfig(mu=0.0, ke=1.0e5, kd=0.0)
    b.add_ground_plane(cfg=cfg)
    kin = b.add_body(xform=wp.transform((-0.3, 0.0, 0.1), wp.quat_identity()), mass=1.0)
    b.add_shape_box(kin, hx=0.1, hy=0.1, hz=0.1, cfg=cfg)
    dyn = b.add_body(xform=wp.transform((0.0, 0.0, 0.1), wp.quat_identity()), mass=1.0)
    b.add_shape_box(dyn, hx=0.1, hy=0.1, hz=0.1, cfg=cfg)
    b.body_flags[kin] = int(newton.BodyFlags.KINEMATIC) if hasattr(newton, "BodyFlags") else 2
    b.color()
    m = b.finalize(device=DEV)
    s = newton.solvers.SolverVBD(m, iterations=10)
    st = m.state()
    qd = st.body_qd.numpy()
    qd[kin] = [0.5, 0, 0, 0, 0, 0]
    st.body_qd.assign(qd)
    st = _run(m, s, 60, 1.0 / 60.0, state=st)
    q = st.body_q.numpy()
    assert abs(q[kin, 0] - 0.2) < 1e-4  # prescribed motion
    assert q[dyn, 0] > q[kin, 0] + 0.18  # pushed ahead
    assert q[dyn, 0] > 0.15


def _stack(n, jacobi=False, steps=120):
    b = newton.ModelBuilder()
    cfg = newton.ModelBuilder.ShapeConfig(mu=0.6, ke=1.0e5, kd=1.0e2)
    b.add_ground_plane(cfg=cfg)
    for i in range(n):
        bd = b.add_body(xform=wp.transform((0.0, 0.0, 0.1 + 0.2 * i), wp.quat_identity()))
        b.add_shape_box(bd, hx=0.1, hy=0.1, hz=0.1, cfg=cfg)
    b.color()
    m = b.finalize(device=DEV)
    s = newton.solvers.SolverVBD(m, iterations=10)
    if jacobi:  # the CUDA sweep (same-colour bodies read the previous iterate, relaxed), run on the CPU
        s._rigid._in_place = False
    return m, _run(m, s, steps, 1.0 / 60.0)


@pytest.mark.parametrize("n,jacobi", [(3, False), (5, False), (3, True)])
def test_box_stack(n, jacobi):
    # jointless bodies share one colour: the CPU sweeps it in place (Gauss-Seidel), CUDA as a
    # relaxed Jacobi sweep; either way the stack must rest, 2 s
    m, st = _stack(n, jacobi)
    q = st.body_q.numpy()
    z = q[:, 2]
    pen = np.concatenate([[0.1 - z[0]], 0.2 - np.diff(z)])  # ground, then box-box penetrations
    print(f"stack of {n} (jacobi={jacobi}): penetrations {np.round(pen * 1e3, 3)} mm")
    assert np.all(pen < 5e-3) and np.all(pen > -1e-3), pen
    assert np.abs(q[:, :2]).max() < 5e-3, q
    assert np.abs(st.body_qd.numpy()).max() < 0.05
    # masses in series: penetration ~ load / (4 corner springs)
    mass = float(m.body_mass.numpy()[0])
    load = mass * 9.81 * np.arange(n, 0, -1)
    np.testing.assert_allclose(pen, load / 4.0e5, rtol=0.1, atol=2e-5)


def test_joint_f_revolute_and_prismatic():
    # constant Control.joint_f: I alpha = tau about a revolute axis through the COM, m a = f along
    # a prismatic axis (no gravity); implicit Euler: omega_n = alpha n dt exactly
    b = newton.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    I = np.diag([0.2, 0.3, 0.4]).astype(np.float32)
    r = b.add_body(xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()), mass=2.0, inertia=wp.mat33(I))
    jr = b.add_joint_revolute(-1, r, axis=(1.0, 0.0, 0.0),
                              parent_xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()))
    p = b.add_body(xform=wp.transform((1.0, 0.0, 1.0), wp.quat_identity()), mass=2.0, inertia=wp.mat33(I))
    jp = b.add_joint_prismatic(-1, p, axis=(0.0, 1.0, 0.0),
                               parent_xform=wp.transform((1.0, 0.0, 1.0), wp.quat_identity()))
    b.color()
    m = b.finalize(device=DEV)
    s = newton.solvers.SolverVBD(m, iterations=10)
    ctl = m.control()
    jf = np.zeros(m.joint_dof_count, np.float32)
    jf[m.joint_qd_start.numpy()[jr]] = 0.5  # tau [N m]
    jf[m.joint_qd_start.numpy()[jp]] = 3.0  # f [N]
    ctl.joint_f = wp.array(jf, dtype=float, device=DEV)
    n, dt = 30, 1.0 / 60.0
    st = _run(m, s, n, dt, control=ctl, collide=False)
    qd = st.body_qd.numpy()
    t = n * dt
    assert abs(qd[r, 3] - 0.5 / 0.2 * t) < 0.02 * 0.5 / 0.2 * t, qd[r]
    assert abs(qd[p, 1] - 3.0 / 2.0 * t) < 0.02 * 3.0 / 2.0 * t, qd[p]
    np.testing.assert_allclose(qd[r, [0, 1, 2, 4, 5]], 0.0, atol=1e-3)
    np.testing.assert_allclose(qd[p, [0, 2, 3, 4, 5]], 0.0, atol=1e-3)
    q = st.body_q.numpy()
    ang = 2 * math.atan2(q[r, 3], q[r, 6])
    assert abs(ang - 0.5 / 0.2 * dt * dt * n * (n + 1) / 2) < 0.02 * abs(ang), ang


def test_reset_world_mask():
    # two worlds, one pendulum each: a masked reset clears only the selected world's joint
    # multipliers and velocity history
    b = newton.ModelBuilder()
    for w in range(2):
        b.begin_world()
        body = b.add_body(xform=wp.transform((3.0 * w, 0.5, 2.0), wp.quat_identity()), mass=1.0)
        b.add_shape_box(body, hx=0.05, hy=0.5, hz=0.05)
        b.add_joint_revolute(-1, body, axis=(1.0, 0.0, 0.0),
                             parent_xform=wp.transform((3.0 * w, 0.0, 2.0), wp.quat_identity()),
                             child_xform=wp.transform((0.0, -0.5, 0.0), wp.quat_identity()))  # fmt: skip
        b.end_world()
    b.color()
    m = b.finalize(device=DEV)
    s = newton.solvers.SolverVBD(m, iterations=5)
    st = _run(m, s, 10, 1.0 / 60.0, collide=False)
    r = s._rigid
    jw = m.joint_world.numpy()
    bw = m.body_world.numpy()
    rev = m.joint_type.numpy() == int(newton.JointType.REVOLUTE)
    lam0 = np.linalg.norm(r._lam_lin.numpy(), axis=1)
    assert (lam0[rev] > 1.0).all(), lam0  # the joints carry the weight
    assert (r._v_last_valid.numpy() == 1).all()
    mask = wp.array([True, False], dtype=wp.bool, device=DEV)
    s.reset(st, world_mask=mask)
    lam = np.linalg.norm(r._lam_lin.numpy(), axis=1)
    assert (lam[jw == 0] == 0.0).all() and np.allclose(lam[jw == 1], lam0[jw == 1]) and lam[rev & (jw == 1)].min() > 1.0
    valid = r._v_last_valid.numpy()
    assert (valid[bw == 0] == 0).all() and (valid[bw == 1] == 1).all()
    s.reset(st)  # no mask: everything
    assert np.abs(r._lam_lin.numpy()).max() == 0.0 and (r._v_last_valid.numpy() == 0).all()
    # stepping after a reset stays well-posed
    st2 = _run(m, s, 5, 1.0 / 60.0, collide=False, state=st)
    assert np.isfinite(st2.body_q.numpy()).all()

"""SolverSemiImplicit DISTANCE joints: the range ``[min_distance, max_distance]`` of the anchor
separation is a radial limit spring-damper (``joint_limit_ke/kd`` of the joint's first linear DOF),
active only outside the range, on both bodies at their anchors."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import armillary
from armillary_solver_semi_implicit.joint_kernels import eval_joint_forces

G = 9.81
LIMIT_KE, LIMIT_KD = 1.0e4, 10.0  # the builder's defaults for a distance joint's range


def _diag(a):
    return wp.mat33(a, 0.0, 0.0, 0.0, a, 0.0, 0.0, 0.0, a)


def _tf(p):
    return wp.transform(wp.vec3(*[float(x) for x in p]), wp.quat_identity())


def _run(model, steps, dt, qd=None, record=None):
    solver = armillary.solvers.SolverSemiImplicit(model, angular_damping=0.0)
    s0, s1 = model.state(), model.state()
    if qd is not None:
        s0.body_qd.assign(np.asarray(qd, np.float32))
    control = model.control()
    out = []
    for _ in range(steps):
        solver.step(s0, s1, control, None, dt)
        s0, s1 = s1, s0
        if record is not None:
            out.append(record(s0))
    return s0, out


def _anchor(bq, X):
    """World position of the anchor frame ``X`` (7 floats) of a body at pose ``bq``."""
    q = np.asarray(bq[3:], np.float64)
    u, w = q[:3], q[3]
    v = np.asarray(X[:3], np.float64)
    return bq[:3] + v + 2.0 * np.cross(u, np.cross(u, v) + w * v)


# ------------------------------------------------------------------------------------ forces
PARENT_COM, CHILD_COM = np.array([0.0, 0.0, 0.0]), np.array([0.0, 0.0, 0.0])
XP, XC = (0.1, 0.2, 0.0), (-0.1, 0.0, 0.3)  # anchor offsets from the body origins (= COMs)


def _pair(min_distance, max_distance, child_pos):
    """Two free-floating 1 kg bodies joined by a distance joint with anchors off their COMs."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    p = b.add_link(xform=_tf((0.0, 0.0, 0.0)), mass=1.0, inertia=_diag(0.01))
    c = b.add_link(xform=_tf(child_pos), mass=1.0, inertia=_diag(0.01))
    j0 = b.add_joint_free(p)
    j1 = b.add_joint_distance(p, c, parent_xform=_tf(XP), child_xform=_tf(XC), min_distance=min_distance,
                              max_distance=max_distance)  # fmt: skip
    b.add_articulation([j0, j1])
    return b.finalize(device="cpu")


def _forces(model, qd):
    f = wp.zeros(model.body_count, dtype=wp.spatial_vector, device="cpu")
    eval_joint_forces(model, model.body_q, wp.array(np.asarray(qd, np.float32), dtype=wp.spatial_vector, device="cpu"),
                      None, f, joint_attach_ke=1.0e4, joint_attach_kd=100.0, joint_mimic_ke=100.0,
                      joint_mimic_kd=1.0)  # fmt: skip
    return f.numpy().astype(np.float64)


@pytest.mark.parametrize(
    "child_pos, bound",
    [((1.3, 0.4, -0.2), "max"), ((0.25, 0.3, -0.25), "min"), ((0.6, 0.2, -0.3), None)],
    ids=["stretched", "compressed", "inside"],
)
def test_limit_force_is_radial_on_both_anchors(child_pos, bound):
    """Outside the range: ``(ke (bound - d) - kd dd) n`` on the child at its anchor, the opposite on the
    parent at its anchor, torques ``r x f`` about each COM; inside: nothing."""
    lo, hi = 0.3, 1.0
    model = _pair(lo, hi, child_pos)
    qd = [[0.1, -0.2, 0.3, 0.5, 0.0, -0.4], [-0.3, 0.1, 0.2, 0.0, 0.7, 0.2]]
    w = _forces(model, qd)
    x_p, x_c = np.asarray(XP), np.asarray(child_pos) + np.asarray(XC)
    e = x_c - x_p
    d = np.linalg.norm(e)
    n = e / d
    v_p = np.asarray(qd[0][:3]) + np.cross(qd[0][3:], x_p - PARENT_COM)
    v_c = np.asarray(qd[1][:3]) + np.cross(qd[1][3:], x_c - (np.asarray(child_pos) + CHILD_COM))
    dd = float(np.dot(v_c - v_p, n))
    if bound is None:
        assert lo < d < hi
        np.testing.assert_array_equal(w, 0.0)
        return
    b = hi if bound == "max" else lo
    assert (d > hi) if bound == "max" else (d < lo)
    F = (LIMIT_KE * (b - d) - LIMIT_KD * dd) * n
    r_c = x_c - np.asarray(child_pos)
    np.testing.assert_allclose(w[1], np.r_[F, np.cross(r_c, F)], rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(w[0], -np.r_[F, np.cross(x_p, F)], rtol=1e-5, atol=1e-4)
    # the limit pulls the anchors together (max) or pushes them apart (min)
    assert np.dot(F, n) < 0.0 if bound == "max" else np.dot(F, n) > 0.0


def test_disabled_sides_and_disabled_joint_exert_nothing():
    """A negative bound disables its side (the builder's default ``min_distance=-1``); a disabled joint
    exerts nothing outside its range either."""
    qd = np.zeros((2, 6))
    np.testing.assert_array_equal(_forces(_pair(-1.0, 1.0, (0.22, 0.2, -0.3)), qd), 0.0)  # anchors 0.02 m apart
    np.testing.assert_array_equal(_forces(_pair(0.3, -1.0, (3.0, 0.0, 0.0)), qd), 0.0)
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    c = b.add_link(xform=_tf((2.0, 0.0, 0.0)), mass=1.0, inertia=_diag(0.01))
    j = b.add_joint_distance(-1, c, max_distance=1.0, enabled=False)
    b.add_articulation([j])
    np.testing.assert_array_equal(_forces(b.finalize(device="cpu"), np.zeros((1, 6))), 0.0)


def test_coincident_anchors_push_along_the_joint_axis():
    """Anchors at the same point with ``min_distance > 0``: the push ``ke min_distance`` goes along the
    joint's first linear axis (the parent anchor frame's x, here world x)."""
    w = _forces(_pair(0.3, 1.0, (0.2, 0.2, -0.3)), np.zeros((2, 6)))
    F = np.array([LIMIT_KE * 0.3, 0.0, 0.0])
    np.testing.assert_allclose(w[1, :3], F, rtol=1e-5)
    np.testing.assert_allclose(w[0, :3], -F, rtol=1e-5)


# ------------------------------------------------------------------------------------ dynamics
N, M, L = 5, 0.1, 0.2  # rope: 5 beads of 0.1 kg, 0.2 m links


def _rope(horizontal: bool):
    """``N`` beads on DISTANCE joints (``max_distance = L``, no minimum: a rope) from the world at
    (0, 0, 2), each link at its full length, hanging straight down or laid out along +x."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, -G))
    pivot = np.array([0.0, 0.0, 2.0])
    step = np.array([L, 0.0, 0.0]) if horizontal else np.array([0.0, 0.0, -L])
    joints, parent = [], -1
    for i in range(N):
        body = b.add_link(xform=_tf(pivot + (i + 1) * step), mass=M, inertia=_diag(1.0e-4))
        X_p = _tf(pivot) if parent < 0 else _tf((0.0, 0.0, 0.0))
        joints.append(b.add_joint_distance(parent, body, parent_xform=X_p, max_distance=L))
        parent = body
    b.add_articulation(joints)
    return b.finalize(device="cpu"), pivot


def _link_lengths(bq, pivot):
    x = np.vstack([pivot, bq[:, :3].astype(np.float64)])
    return np.linalg.norm(np.diff(x, axis=0), axis=1)


def test_hanging_rope_stretches_by_its_load_over_limit_ke():
    """At rest each link is longer than ``max_distance`` by the weight it carries over ``limit_ke``:
    ``(N - i) m g / ke`` (0.49 mm at the top, 0.098 mm at the bottom)."""
    model, pivot = _rope(horizontal=False)
    state, _ = _run(model, 1500, 1.0e-3)
    got = _link_lengths(state.body_q.numpy(), pivot) - L
    expected = (N - np.arange(N)) * M * G / LIMIT_KE
    np.testing.assert_allclose(got, expected, rtol=0.01)  # measured: 0.15 %
    np.testing.assert_allclose(state.body_qd.numpy(), 0.0, atol=1e-4)  # the radial damping settled it


def test_swinging_rope_keeps_its_links_within_max_distance():
    """A rope released horizontally falls and swings down on its links: none stretches beyond
    ``max_distance`` by more than 2 % over 1 s (the kit's ``pendulum_length``; measured: 1.06 % on
    the top link, 0.56 % on the last) and the rope's end swings down to below the pivot by most of
    its length."""
    model, pivot = _rope(horizontal=True)
    _, poses = _run(model, 1000, 1.0e-3, record=lambda s: s.body_q.numpy().copy())
    lengths = np.array([_link_lengths(bq, pivot) for bq in poses])
    assert np.isfinite(lengths).all()
    assert lengths.max() <= L * 1.02, lengths.max(axis=0)
    z_end = np.array([bq[-1, 2] for bq in poses])
    assert z_end.min() < pivot[2] - 0.8 * N * L, z_end.min()


def test_compressed_pair_bounces_at_min_distance_conserving_momentum():
    """Two free 1 kg bodies (I = 0.01 kg m^2, no gravity) approaching at 1 m/s on a joint with range
    [0.3, 1.0] m and anchors off their COMs: the separation turns around below ``min_distance`` by at
    most ``v sqrt(m_eff / ke)`` = 2.5 mm (undamped bound; measured 1.8 mm with the default
    ``limit_kd``), ``m_eff`` the effective mass of the anchors along the joint with the rotational
    terms ``(r x n)^2 / I`` (0.0625 kg: without the torques from the anchor offsets it would be the
    reduced mass 0.5 kg and the overshoot 7.1 mm); linear and angular momentum are conserved (a
    central force pair on both bodies) and the off-COM impact sets both bodies spinning."""
    lo, hi = 0.3, 1.0
    child = np.array([0.8, 0.0, -0.3])  # anchors (0.1, 0.2, 0) and (0.7, 0, 0): 0.63 m apart
    model = _pair(lo, hi, child)
    n = (child + XC) - np.asarray(XP)
    n /= np.linalg.norm(n)
    qd = [np.r_[0.5 * n, 0, 0, 0], np.r_[-0.5 * n, 0, 0, 0]]
    Xp, Xc = np.r_[XP, 0, 0, 0, 1.0], np.r_[XC, 0, 0, 0, 1.0]

    def rec(s):
        bq, bv = s.body_q.numpy().astype(np.float64), s.body_qd.numpy().astype(np.float64)
        d = np.linalg.norm(_anchor(bq[1], Xc) - _anchor(bq[0], Xp))
        p = M2 * (bv[0, :3] + bv[1, :3])
        Lm = sum(M2 * np.cross(bq[i, :3], bv[i, :3]) + 0.01 * bv[i, 3:] for i in range(2))
        return d, p, Lm, bv[:, 3:].copy()

    M2 = 1.0
    _, out = _run(model, 1000, 1.0e-3, qd=qd, record=rec)
    d = np.array([o[0] for o in out])
    assert d.min() < lo  # it reached the limit
    r_p, r_c = np.asarray(XP), np.asarray(XC)  # anchor offsets from the COMs (bodies not yet turned)
    m_eff = 1.0 / (2.0 + sum(np.linalg.norm(np.cross(r, n)) ** 2 / 0.01 for r in (r_p, r_c)))
    overshoot = 1.0 * np.sqrt(m_eff / LIMIT_KE)
    assert lo - overshoot <= d.min() <= lo - 0.5 * overshoot, (d.min(), overshoot)
    assert d[-1] > lo + 0.1  # and bounced back
    p = np.array([o[1] for o in out])
    np.testing.assert_allclose(p, 0.0, atol=1e-5)
    Lm = np.array([o[2] for o in out])
    Lm0 = sum(M2 * np.cross(np.r_[0.0, 0.0, 0.0] if i == 0 else child, qd[i][:3]) for i in range(2))
    np.testing.assert_allclose(Lm, np.broadcast_to(Lm0, Lm.shape), atol=1e-5)  # measured drift 1.8e-6
    w_end = out[-1][3]
    assert np.linalg.norm(w_end[0]) > 0.1 and np.linalg.norm(w_end[1]) > 0.1, w_end

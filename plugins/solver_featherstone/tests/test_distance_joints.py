"""SolverFeatherstone DISTANCE joints (issue 22): the range ``[min_distance, max_distance]`` of the
anchor separation is a radial spring-damper limit (``joint_limit_ke/kd`` of the joint's first DOF,
floored by ``limit_time_constant`` like the other limits) on the joint's 6 DOFs, linearly implicit
in the radial direction.

Energies count the bodies' kinetic and potential energy and the energy of the limit springs
(``limit_ke / 2`` times the squared excess over the range; in these scenes the limit floor stays
below ``limit_ke``, so ``limit_ke`` is the spring the step uses). Stretch bounds are the kit's
``pendulum_length`` (2 % of the range).
"""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import armillary
from armillary.solvers import SolverFeatherstone
from armillary.testing import Tolerances

wp.config.log_level = wp.LOG_WARNING
G = 9.81
TOL = Tolerances().pendulum_length
PIVOT = np.array([0.0, 0.0, 2.0])
BEAD_INERTIA = 1.0e-4


def _rotations(body_q):
    """World rotation matrices of ``body_q`` rows (quaternion x, y, z, w)."""
    x, y, z, w = body_q[:, 3], body_q[:, 4], body_q[:, 5], body_q[:, 6]
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], -1),
        np.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], -1),
        np.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], -1),
    ], 1)  # fmt: skip


def _rope(n, link, angle, stretch=1.002):
    """``n`` beads of 0.1 kg (anchors at their centres) on DISTANCE joints of max_distance ``link``
    (no minimum), hung from ``PIVOT`` and laid out straight ``angle`` rad below the horizontal with
    every link ``stretch`` x ``link`` long (taut: every limit acts from the first step)."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, -G))
    u = np.array([np.cos(angle), 0.0, -np.sin(angle)])
    parent, joints = -1, []
    for i in range(n):
        x = PIVOT + (i + 1) * link * stretch * u
        bead = b.add_link(xform=wp.transform(wp.vec3(*x), wp.quat_identity()), mass=0.1,
                          inertia=wp.mat33(np.eye(3, dtype=np.float32) * BEAD_INERTIA))  # fmt: skip
        at = wp.transform(wp.vec3(*PIVOT), wp.quat_identity()) if parent < 0 else wp.transform_identity()
        joints.append(b.add_joint_distance(parent, bead, parent_xform=at, max_distance=link))
        parent = bead
    b.add_articulation(joints)
    return b.finalize(device="cpu")


def _rope_run(model, dt, seconds):
    """Link lengths (steps + 1, n) and total energy (steps + 1) of a rope from :func:`_rope`."""
    solver = SolverFeatherstone(model)
    s0, s1 = model.state(), model.state()
    armillary.eval_fk(model, s0.joint_q, s0.joint_qd, s0)
    mass = model.body_mass.numpy().astype(np.float64)
    link = model.joint_limit_upper.numpy()[::6].astype(np.float64)
    ke = model.joint_limit_ke.numpy()[::6].astype(np.float64)

    def measure(state):
        q = state.body_q.numpy().astype(np.float64)
        qd = state.body_qd.numpy().astype(np.float64)
        d = np.linalg.norm(np.diff(np.vstack([PIVOT, q[:, :3]]), axis=0), axis=1)
        energy = (0.5 * mass * (qd[:, :3] ** 2).sum(1) + 0.5 * BEAD_INERTIA * (qd[:, 3:] ** 2).sum(1)
                  + mass * G * q[:, 2]).sum() + (0.5 * ke * np.maximum(d - link, 0.0) ** 2).sum()  # fmt: skip
        return d, energy

    rows = [measure(s0)]
    for _ in range(int(round(seconds / dt))):
        solver.step(s0, s1, None, None, dt)
        s0, s1 = s1, s0
        rows.append(measure(s0))
    return np.array([r[0] for r in rows]), np.array([r[1] for r in rows])


@pytest.mark.parametrize("dt", [1.0 / 600.0, 1.0 / 60.0], ids=["600Hz", "60Hz"])
def test_rope_of_beads_keeps_its_length(dt):
    """Six 0.1 kg beads on 0.2 m DISTANCE links (default gains: limit_ke 1e4 and the limit floor),
    released taut 1 rad below the horizontal, swing for 3 s: every link stays within 2 % of its
    max_distance and the energy never rises more than 1 % of M g L_rope above its start (measured:
    at 1/600 s 0.38 % and +0.01 %, at 1/60 s 0.85 % and +0.35 %)."""
    n, link = 6, 0.2
    d, energy = _rope_run(_rope(n, link, 1.0), dt, 3.0)
    assert np.isfinite(d).all() and np.isfinite(energy).all()
    assert d.max() <= link * (1.0 + TOL), (dt, d.max() / link)
    scale = n * 0.1 * G * n * link
    assert energy.max() - energy[0] <= 0.01 * scale, (dt, (energy.max() - energy[0]) / scale)


def test_whipping_rope_never_gains_energy():
    """Eight 0.1 kg beads on 0.1 m links released horizontally: the rope whips, its tension reaching
    tens of times its weight. At 1/600 s with the default gains the energy never rises above its
    start over 3 s and the links stretch at most 5 % (measured 4.4 %: the whip's tension over
    limit_ke 1e4; limit_ke 1e5 keeps the first 2 s within 1.1 %). At 1/60 s the whip is not
    resolved (the tip moves more than a link length per step) but stays finite."""
    n, link = 8, 0.1
    d, energy = _rope_run(_rope(n, link, 0.0), 1.0 / 600.0, 3.0)
    assert d.max() <= link * 1.05, d.max() / link
    scale = n * 0.1 * G * n * link
    assert energy.max() - energy[0] <= 1.0e-3 * scale, (energy.max() - energy[0]) / scale
    d, energy = _rope_run(_rope(n, link, 0.0), 1.0 / 60.0, 1.0)
    assert np.isfinite(d).all() and np.isfinite(energy).all()


OFFSET = 0.05  # the second body's anchor, from its COM


def _pair(lo, hi):
    """Zero gravity: a free 1 kg body (anchor at its COM) and a 0.5 kg body on a DISTANCE joint of
    range ``[lo, hi]`` to it, whose anchor is ``OFFSET`` from its COM; anchors 0.4 m apart, the
    second body thrown at the first (about 1 m/s) while spinning."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    body_a = b.add_link(xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()), mass=1.0,
                        inertia=wp.mat33(np.diag([0.004, 0.006, 0.008]).astype(np.float32)))  # fmt: skip
    body_b = b.add_link(xform=wp.transform((0.4 + OFFSET, 0.0, 1.0), wp.quat_identity()), mass=0.5,
                        inertia=wp.mat33(np.diag([0.002, 0.003, 0.001]).astype(np.float32)))  # fmt: skip
    j0 = b.add_joint_free(body_a)
    j1 = b.add_joint_distance(body_a, body_b, child_xform=wp.transform((-OFFSET, 0.0, 0.0), wp.quat_identity()),
                              min_distance=lo, max_distance=hi)  # fmt: skip
    b.add_articulation([j0, j1])
    model = b.finalize(device="cpu")
    state = model.state()
    state.body_qd.assign(np.array([[0.4, 0.15, 0.0, 0.0, 0.0, 0.0], [-0.6, -0.1, 0.2, 3.0, 0.0, -2.0]], np.float32))
    armillary.eval_ik(model, state, model.joint_q, model.joint_qd)
    return model


def _pair_run(model, dt, seconds):
    """Anchor separation, linear and angular momentum (about the origin) and energy per step."""
    solver = SolverFeatherstone(model)
    s0, s1 = model.state(), model.state()
    armillary.eval_fk(model, s0.joint_q, s0.joint_qd, s0)
    mass = model.body_mass.numpy().astype(np.float64)
    inertia = model.body_inertia.numpy().astype(np.float64)
    lo, hi = (float(v) for v in (model.joint_limit_lower.numpy()[6], model.joint_limit_upper.numpy()[6]))
    ke = float(model.joint_limit_ke.numpy()[6])

    def measure(state):
        q = state.body_q.numpy().astype(np.float64)
        qd = state.body_qd.numpy().astype(np.float64)
        R = _rotations(q)
        d = np.linalg.norm(q[1, :3] + R[1] @ [-OFFSET, 0.0, 0.0] - q[0, :3])
        spin = np.einsum("bij,bjk,blk,bl->bi", R, inertia, R, qd[:, 3:])  # R I R^T w
        p = (mass[:, None] * qd[:, :3]).sum(0)
        L = (np.cross(q[:, :3], mass[:, None] * qd[:, :3]) + spin).sum(0)
        energy = 0.5 * (mass * (qd[:, :3] ** 2).sum(1)).sum() + 0.5 * (qd[:, 3:] * spin).sum()
        energy += 0.5 * ke * (max(d - hi, 0.0) ** 2 + max(lo - d, 0.0) ** 2)
        return d, p, L, energy

    rows = [measure(s0)]
    for _ in range(int(round(seconds / dt))):
        solver.step(s0, s1, None, None, dt)
        s0, s1 = s1, s0
        rows.append(measure(s0))
    return tuple(np.array([r[k] for r in rows]) for k in range(4))


@pytest.mark.parametrize("dt", [1.0e-3, 1.0 / 60.0], ids=["1ms", "60Hz"])
def test_pair_bounces_between_min_and_max_distance(dt):
    """Two bodies in free space on a DISTANCE joint of range [0.3, 0.5] m, one anchor 5 cm off its
    body's COM, thrown together at about 1 m/s while spinning: over 2 s they bounce off both
    bounds. The limit forces are internal and central (along the anchor line, through the linear
    and angular DOFs of the joint): linear momentum is kept to float precision (measured 3e-7) and
    angular momentum within 0.1 % at 1 ms (measured 0.03 %), 1 % at 1/60 s (0.35 %, the body's
    spin per step being larger); whenever the anchors are inside the range the energy is at most
    its start (the limit only damps; measured within 5e-5 of it, float32 rounding). At 1 ms the
    separation stays within 2 % of the bounds (measured 1.05 % below 0.3 m, 0.2 % above 0.5 m).
    At 1/60 s a bound engages at the first step that ends beyond it, like the other limits, so the
    anchors overshoot by up to a step's approach (measured 4.5 %)."""
    lo, hi = 0.3, 0.5
    d, p, L, energy = _pair_run(_pair(lo, hi), dt, 2.0)
    assert np.isfinite(d).all()
    assert d.min() < lo and d.max() > hi, (d.min(), d.max())  # both bounds acted
    assert np.abs(p - p[0]).max() <= 1.0e-5, np.abs(p - p[0]).max()
    L_tol = 1.0e-3 if dt <= 1.0e-3 else 1.0e-2
    assert np.abs(L - L[0]).max() <= L_tol * np.linalg.norm(L[0]), np.abs(L - L[0]).max() / np.linalg.norm(L[0])
    inside = (d >= lo) & (d <= hi)
    assert energy[inside].max() <= energy[0] * (1.0 + 1.0e-4), (energy[inside].max(), energy[0])
    if dt <= 1.0e-3:
        assert d.min() >= lo * (1.0 - TOL), d.min()
        assert d.max() <= hi * (1.0 + TOL), d.max()
    else:
        assert d.min() >= lo * (1.0 - 0.1) and d.max() <= hi * (1.0 + 0.1), (d.min(), d.max())


def test_joint_is_free_inside_its_range_and_catches_the_body_at_max_distance():
    """A 1 kg body 0.3 m below the pivot of a DISTANCE joint with range [0.2, 0.5] m falls freely
    (exactly the semi-implicit Euler free fall for 0.1 s: no force inside the range), is caught at
    max_distance and hangs there, 0.5 m + m g / limit_ke below the pivot, after 1 s."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, -G))
    body = b.add_link(xform=wp.transform(wp.vec3(*(PIVOT - [0.0, 0.0, 0.3])), wp.quat_identity()), mass=1.0,
                      inertia=wp.mat33(np.eye(3, dtype=np.float32) * 0.01))  # fmt: skip
    j = b.add_joint_distance(-1, body, parent_xform=wp.transform(wp.vec3(*PIVOT), wp.quat_identity()),
                             min_distance=0.2, max_distance=0.5)  # fmt: skip
    b.add_articulation([j])
    model = b.finalize(device="cpu")
    solver = SolverFeatherstone(model)
    s0, s1 = model.state(), model.state()
    armillary.eval_fk(model, s0.joint_q, s0.joint_qd, s0)
    dt, z = 1.0e-3, []
    for _ in range(1000):
        solver.step(s0, s1, None, None, dt)
        s0, s1 = s1, s0
        z.append(float(s0.body_q.numpy()[0, 2]))
    k = np.arange(1, 101)
    free_fall = PIVOT[2] - 0.3 - G * dt * dt * k * (k + 1) / 2.0
    np.testing.assert_allclose(z[:100], free_fall, atol=2.0e-6)
    ke = float(model.joint_limit_ke.numpy()[0])
    assert abs((PIVOT[2] - z[-1]) - (0.5 + G / ke)) <= 1.0e-4, (PIVOT[2] - z[-1], 0.5 + G / ke)
    assert np.allclose(s0.body_q.numpy()[0, :2], 0.0, atol=1.0e-6)

"""Penalty joints of ``SolverSemiImplicit``: :func:`eval_joint_forces`, :func:`update_joint_state`.

Every enabled joint between a parent body (or the world, ``-1``) and a child body is a set of
spring-dampers between its anchor frames ``X_WP = body_q[parent] * joint_X_p`` and ``X_WC =
body_q[child] * joint_X_c`` (world frame, SI units; ``ke = joint_attach_ke``, ``kd =
joint_attach_kd``). Everything is evaluated from the input body state (explicit forces):

* constrained linear DOFs: the force ``-ke e - kd de`` on the child at its anchor, with ``e = x_C -
  x_P`` and ``de = v_C(x_C) - v_P(x_P)`` (velocities of the two anchor points) restricted to the
  directions no free axis spans (in the parent anchor frame); the parent gets ``-f`` at its own
  anchor. As wrenches at the COMs (``State.body_f`` convention: ``(f, tau)``, world frame, torque
  about the COM) each body also gets ``r x f``, ``r`` from its COM to its anchor.
* constrained angular DOFs: the torque ``-ke theta - 0.01 kd dw`` on the child (the parent gets the
  opposite) with ``dw`` the relative angular velocity outside the free axes' span and ``theta``:
  no free angular axis (FIXED, PRISMATIC, D6 without angular axes): the rotation vector of the
  relative rotation ``R_WP^T R_WC`` (shortest rotation); one free axis ``a`` (REVOLUTE, D6): the
  axis misalignment ``a x R a`` (the sine of the swing angle, not the angle); two free axes (D6):
  the rotation vector of what the two decoded angles leave unexplained; three: none.
* free scalar DOFs (PRISMATIC / REVOLUTE axis, D6 axes) get the generalized force
  ``joint_f + stiffness (rest_q - q) - damping qd`` plus, inside ``[lower, upper]``, the PD drive
  ``target_ke (target_q - q) + target_kd (target_qd - qd)`` or, outside, instead of the drive the
  limit spring-damper ``limit_ke (lower - q) - limit_kd qd`` (``upper`` likewise). A generalized
  force vector ``g`` on a joint's axes becomes the force / torque ``T`` in their span with
  ``T . axis_i = g_i`` (``J (J^T J)^-1 g``: the work-conjugate of the joint rates, ``sum g_i axis_i``
  for orthonormal axes). D6 angular axes: ``b0`` (parent frame), then ``rot(b0, q0) b1`` and the
  child's ``b2`` for three axes, ``b0`` and the child's ``b1`` for two (a universal joint's cross).
* BALL: anchors attached; no drive, limit or spring; ``-damping * w`` per axis and ``joint_f`` as
  a torque in the parent anchor frame. FREE: no penalty force. DISTANCE: free inside its range
  ``[joint_limit_lower, joint_limit_upper]`` of the first linear DOF (the anchor separation ``d =
  |e|``; a negative bound disables its side); outside it the radial limit spring-damper
  ``(limit_ke (bound - d) - limit_kd dd) n`` (``n = e / d``, ``dd = de . n``, that DOF's
  ``joint_limit_ke/kd``) acts on the child at its anchor, ``-f`` on the parent at its anchor (the
  torques about the COMs from the anchor offsets). The solver applies the ``joint_f`` of FREE and
  DISTANCE joints as a world wrench on the child. ROD is not supported.
  ``joint_target_mode``, ``joint_armature``, ``joint_friction``, effort / velocity limits and
  ``Control.joint_act`` are ignored. Disabled joints (``joint_enabled``) exert nothing. Joints
  outside articulations (loop closures) are treated like any other: full drive and limits.
* mimic followers (``joint_mimic_joint >= 0``, PRISMATIC / REVOLUTE / D6): per coordinate
  ``g = joint_mimic_ke (c0 + c1 q_ref - q) + joint_mimic_kd (c1 qd_ref - qd)`` on the follower and
  ``-c1 g`` on the reference joint (the gradient of the coupling energy ``g^2 / (2 mimic_ke)``).
  A second kernel in its own Warp module, launched (and compiled) only for models with mimic joints.

Coordinates are derived from the body state: linear ones are the child anchor's offset in the
parent anchor frame projected on the axes (rates from ``de``); angles are principal values in
``[-pi, pi)`` of the relative rotation (twist about the axis; D6: successive rotations, decoded as
``armillary.eval_ik`` does), independent of the quaternion sign; ``rest_q - q`` and ``target_q -
q`` are not wrapped (rest or target coordinates beyond pi act as preload), by design. One
exception, kept to match the reference: the drive and the limits of a REVOLUTE
or single-angular-axis D6 joint use ``q = 2 atan2(a . v, w)`` of the relative quaternion ``(v, w)``
as it is (range ``(-2 pi, 2 pi]``), which runs on continuously past pi while body quaternions
evolve continuously (the integrator never flips their sign) but depends on the sign of
quaternions written from outside; its passive spring uses the principal angle.

Comparison with the reference (newton 1.8 ``SolverSemiImplicit``, black box): per-body wrenches
on random two-body states of every joint type and feature agree to float32 round-off (< 1e-6 of
the largest force), and trajectories (pendulums of each type, D6 with limits and drives, a
prismatic spring, a mimic pair, a four-bar closed by a driven loop joint, revolute and ball
chains) agree to ~1e-6 m over thousands of steps. Known differences: (1) the reference's
full-rotation error (FIXED, PRISMATIC, D6 without angular axes) takes the relative quaternion as
it is, so a quaternion of the opposite sign (the same orientation) yields a torque of
``ke (2 pi - angle)`` turning the long way round, and it computes the angle with float32 ``acos``,
which leaves ~7e-4 rad of noise near zero error (several N m at ``ke = 1e4``); here the shortest
rotation from ``atan2`` is used (equal forces otherwise). (2) The reference leaves
``state_out.joint_q`` / ``joint_qd`` untouched; the solver here recovers them with
:func:`update_joint_state` after each step.

Accuracy: a penalty joint stretches by about (load) / ``ke``. A 1 m pendulum of 8 kg released
0.6 rad off vertical (peak tension 106 N) keeps its anchors within 10.8 mm (REVOLUTE, BALL; 12.3 mm
FIXED) at dt 1e-3 with the default gains, as on the reference. Explicit damping limits the time
step: ``dt kd r^2 / I`` (attachment damping at lever ``r`` on rotational inertia ``I``) and ``dt
target_kd / I`` must stay below ~2, or the body diverges (on the reference too).

Differentiable: every kernel here has its adjoint (``update_joint_state`` included, for losses on
``joint_q`` / ``joint_qd``), launched with ``wp.launch`` while a ``wp.Tape`` records. The kernels use
fixed-count code only (no runtime-bounded loop carrying a value, no in-place update of a local
vector's component): Warp 1.19 gets the adjoint of both wrong (measured).
"""

from __future__ import annotations

from collections import OrderedDict

import warp as wp

from armillary.launch import replayer, tape_recording
from armillary.sim.kinematics_kernels import (
    JT_BALL,
    JT_D6,
    JT_DISTANCE,
    JT_FREE,
    JT_PRISMATIC,
    JT_REVOLUTE,
    JT_ROD,
    axes_solve,
    d6_decode_angles,
)
from armillary.sim.spatial import ang, lin, quat_to_rotation_vector, spatial

__all__ = ["eval_joint_forces", "update_joint_state"]

ANGULAR_KD_SCALE = wp.constant(0.01)
"""Angular attachment damping is ``0.01 * joint_attach_kd`` (measured on the reference, see the module docs)."""


# ---------------------------------------------------------------------------- device functions
@wp.func
def principal_angle(s: float, c: float) -> float:
    """``2 atan2(s, c)`` of a rotation's half-angle sine/cosine, in ``[-pi, pi)`` whatever the quaternion sign."""
    ss = s
    cc = c
    if cc < 0.0:
        ss = -ss
        cc = -cc
    a = 2.0 * wp.atan2(ss, cc)
    if a >= wp.pi:
        a = a - 2.0 * wp.pi
    return a


@wp.func
def twist_angle(q: wp.quat, axis: wp.vec3) -> float:
    """Principal angle in ``[-pi, pi)`` of the twist of ``q`` about the unit ``axis``."""
    return principal_angle(q[0] * axis[0] + q[1] * axis[1] + q[2] * axis[2], q[3])


@wp.func
def raw_twist_angle(q: wp.quat, axis: wp.vec3) -> float:
    """``2 atan2(s, w)`` of the twist of ``q`` about ``axis``, in ``(-2 pi, 2 pi]``: depends on the
    quaternion's sign, so it runs on continuously past ``pi`` while the quaternion evolves continuously."""
    return 2.0 * wp.atan2(q[0] * axis[0] + q[1] * axis[1] + q[2] * axis[2], q[3])


@wp.func
def _below_pi(a: float) -> float:
    """``a`` in ``(-pi, pi]`` moved to ``[-pi, pi)``."""
    if a >= wp.pi:
        return a - 2.0 * wp.pi
    return a


@wp.func
def d6_angles(n: int, b0: wp.vec3, b1: wp.vec3, b2: wp.vec3, r: wp.quat) -> wp.vec3:
    """D6 angles (successive rotations about ``b0, b1, b2``) wrapped into ``[-pi, pi)``."""
    qa = d6_decode_angles(n, b0, b1, b2, r)
    # a new vector, not ``qa[k] = qa[k] - ...``: Warp 1.19's adjoint of an in-place component update of a
    # local vector is wrong (measured)
    return wp.vec3(_below_pi(qa[0]), _below_pi(qa[1]), _below_pi(qa[2]))


@wp.func
def d6_moving_axes(n: int, b0: wp.vec3, b1: wp.vec3, b2: wp.vec3, qa: wp.vec3, rel: wp.quat):
    """Second and third angular axes of a D6 joint in the parent anchor frame (the first is ``b0``).

    Three axes: ``rot(b0, q0) b1`` and ``rot(b0, q0) rot(b1, q1) b2``; two axes: ``b1`` carried by
    the child frame (``rel * b1``, a universal joint's cross axes, as the reference does)."""
    r0 = wp.quat_from_axis_angle(b0, qa[0])
    m1 = wp.quat_rotate(r0, b1)
    m2 = wp.quat_rotate(r0 * wp.quat_from_axis_angle(b1, qa[1]), b2)
    if n == 2:
        m1 = wp.quat_rotate(rel, b1)
    return m1, m2


@wp.func
def dof_force(
    q: float,
    q_spring: float,
    qd: float,
    target_q: float,
    target_qd: float,
    ke: float,
    kd: float,
    lower: float,
    upper: float,
    limit_ke: float,
    limit_kd: float,
    stiffness: float,
    damping: float,
    rest_q: float,
    f_ext: float,
) -> float:
    """Generalized force on one scalar DOF [N or N*m]: feed-forward, passive spring (at ``q_spring``), and
    the limit spring-damper outside ``[lower, upper]`` or else the PD drive (at ``q``)."""
    f = f_ext + stiffness * (rest_q - q_spring) - damping * qd
    if q < lower:
        f = f + limit_ke * (lower - q) - limit_kd * qd
    elif q > upper:
        f = f + limit_ke * (upper - q) - limit_kd * qd
    else:
        f = f + ke * (target_q - q) + kd * (target_qd - qd)
    return f


@wp.struct
class JointKinematics:
    """Relative kinematics of one joint, world frame unless noted."""

    X_wp: wp.transform  # parent anchor frame
    X_wc: wp.transform  # child anchor frame
    r_p: wp.vec3  # parent anchor minus parent COM
    r_c: wp.vec3  # child anchor minus child COM
    e: wp.vec3  # child anchor minus parent anchor
    de: wp.vec3  # child anchor velocity minus parent anchor velocity
    rel: wp.quat  # child anchor rotation in the parent anchor frame
    w_rel: wp.vec3  # child angular velocity minus parent angular velocity
    w_p: wp.vec3  # parent angular velocity


@wp.func
def joint_kinematics(
    j: int,
    joint_parent: wp.array(dtype=wp.int32),
    joint_child: wp.array(dtype=wp.int32),
    joint_X_p: wp.array(dtype=wp.transform),
    joint_X_c: wp.array(dtype=wp.transform),
    body_com: wp.array(dtype=wp.vec3),
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
) -> JointKinematics:
    p = joint_parent[j]
    c = joint_child[j]
    X_WP = wp.transform_identity()
    com_p = wp.vec3(0.0)
    v_p = wp.vec3(0.0)
    w_p = wp.vec3(0.0)
    if p >= 0:
        X_WP = body_q[p]
        com_p = wp.transform_point(X_WP, body_com[p])
        v_p = lin(body_qd[p])
        w_p = ang(body_qd[p])
    X_WC = body_q[c]
    com_c = wp.transform_point(X_WC, body_com[c])
    v_c = lin(body_qd[c])
    w_c = ang(body_qd[c])

    k = JointKinematics()
    k.X_wp = X_WP * joint_X_p[j]
    k.X_wc = X_WC * joint_X_c[j]
    x_p = wp.transform_get_translation(k.X_wp)
    x_c = wp.transform_get_translation(k.X_wc)
    k.r_p = x_p - com_p
    k.r_c = x_c - com_c
    k.e = x_c - x_p
    k.de = (v_c + wp.cross(w_c, k.r_c)) - (v_p + wp.cross(w_p, k.r_p))
    k.rel = wp.quat_inverse(wp.transform_get_rotation(k.X_wp)) * wp.transform_get_rotation(k.X_wc)
    k.w_rel = w_c - w_p
    k.w_p = w_p
    return k


@wp.func
def axis3(joint_axis: wp.array(dtype=wp.vec3), start: int, n: int):
    """The first ``n`` (up to 3) axes from ``start`` (unused slots repeat the first)."""
    a0 = joint_axis[start]
    a1 = a0
    a2 = a0
    if n > 1:
        a1 = joint_axis[start + 1]
    if n > 2:
        a2 = joint_axis[start + 2]
    return a0, a1, a2


@wp.func
def scalar_coords(
    jtype: int,
    n_lin: int,
    n_ang: int,
    ds: int,
    joint_axis: wp.array(dtype=wp.vec3),
    k: JointKinematics,
):
    """Scalar coordinates ``(lin q, lin qd, ang q, ang qd)`` of a PRISMATIC / REVOLUTE / D6 joint.

    PRISMATIC / REVOLUTE use the first entry of the linear / angular vectors."""
    R_wp = wp.transform_get_rotation(k.X_wp)
    t = wp.quat_rotate_inv(R_wp, k.e)
    v = wp.quat_rotate_inv(R_wp, k.de)
    w = wp.quat_rotate_inv(R_wp, k.w_rel)
    ql = wp.vec3(0.0)
    vl = wp.vec3(0.0)
    qa = wp.vec3(0.0)
    va = wp.vec3(0.0)
    if jtype == JT_PRISMATIC:
        a = joint_axis[ds]
        ql = wp.vec3(wp.dot(t, a), 0.0, 0.0)
        vl = wp.vec3(wp.dot(v, a), 0.0, 0.0)
    elif jtype == JT_REVOLUTE:
        a = joint_axis[ds]
        qa = wp.vec3(twist_angle(k.rel, a), 0.0, 0.0)
        va = wp.vec3(wp.dot(w, a), 0.0, 0.0)
    elif jtype == JT_D6:
        if n_lin > 0:
            l0, l1, l2 = axis3(joint_axis, ds, n_lin)
            ql = axes_solve(n_lin, l0, l1, l2, t)
            vl = axes_solve(n_lin, l0, l1, l2, v)
        if n_ang > 0:
            b0, b1, b2 = axis3(joint_axis, ds + n_lin, n_ang)
            qa = d6_angles(n_ang, b0, b1, b2, k.rel)
            m1, m2 = d6_moving_axes(n_ang, b0, b1, b2, qa, k.rel)
            va = axes_solve(n_ang, b0, m1, m2, w)
    return ql, vl, qa, va


@wp.func
def axes_dual(n: int, a0: wp.vec3, a1: wp.vec3, a2: wp.vec3, f: wp.vec3) -> wp.vec3:
    """Vector ``T`` in the span of the first ``n`` axes with ``dot(T, a_i) = f_i``.

    Maps generalized forces on the axes' coordinates to a force / torque: the dual of
    :func:`axes_solve` (``T = J (J^T J)^-1 f`` with ``J = [a0 a1 a2]``); ``sum f_i a_i`` for
    orthonormal axes."""
    if n == 1:
        return a0 * (f[0] / wp.max(wp.dot(a0, a0), 1.0e-20))
    if n == 2:
        g00 = wp.dot(a0, a0)
        g01 = wp.dot(a0, a1)
        g11 = wp.dot(a1, a1)
        det = g00 * g11 - g01 * g01
        if wp.abs(det) < 1.0e-12:
            return a0 * f[0] + a1 * f[1]
        return a0 * ((g11 * f[0] - g01 * f[1]) / det) + a1 * ((g00 * f[1] - g01 * f[0]) / det)
    if n == 3:
        JT = wp.mat33(a0[0], a0[1], a0[2], a1[0], a1[1], a1[2], a2[0], a2[1], a2[2])
        if wp.abs(wp.determinant(JT)) < 1.0e-9:
            return a0 * f[0] + a1 * f[1] + a2 * f[2]
        return wp.inverse(JT) * f
    return wp.vec3(0.0)


@wp.func
def axes_combine(n: int, a0: wp.vec3, a1: wp.vec3, a2: wp.vec3, c: wp.vec3) -> wp.vec3:
    """``sum_i c_i a_i`` over the first ``n`` axes."""
    r = wp.vec3(0.0)
    if n > 0:
        r = a0 * c[0]
    if n > 1:
        r = r + a1 * c[1]
    if n > 2:
        r = r + a2 * c[2]
    return r


@wp.func
def pick(i: int, n_lin: int, ql: wp.vec3, qa: wp.vec3) -> float:
    """Coordinate ``i`` of a joint whose linear coordinates come first."""
    if i < n_lin:
        return ql[i]
    return qa[i - n_lin]


@wp.func
def joint_dims(jt: int, j: int, joint_dof_dim: wp.array2d(dtype=wp.int32)):
    """``(linear, angular)`` DOF counts of a joint."""
    n_lin = int(0)
    n_ang = int(0)
    if jt == JT_PRISMATIC:
        n_lin = 1
    elif jt == JT_REVOLUTE:
        n_ang = 1
    elif jt == JT_BALL:
        n_ang = 3
    elif jt == JT_D6:
        n_lin = joint_dof_dim[j, 0]
        n_ang = joint_dof_dim[j, 1]
    return n_lin, n_ang


@wp.func
def dof_wrench(n_lin: int, n_ang: int, ds: int, joint_axis: wp.array(dtype=wp.vec3), k: JointKinematics,
               qa: wp.vec3, fl: wp.vec3, fa: wp.vec3):  # fmt: skip
    """World force (at the child anchor) and torque on the child of generalized forces ``fl`` / ``fa``
    on the linear / angular scalar DOFs of a PRISMATIC / REVOLUTE / D6 joint."""
    R_wp = wp.transform_get_rotation(k.X_wp)
    F = wp.vec3(0.0)
    T = wp.vec3(0.0)
    if n_lin > 0:
        l0, l1, l2 = axis3(joint_axis, ds, n_lin)
        F = wp.quat_rotate(R_wp, axes_dual(n_lin, l0, l1, l2, fl))
    if n_ang > 0:
        b0, b1, b2 = axis3(joint_axis, ds + n_lin, n_ang)
        m1, m2 = d6_moving_axes(n_ang, b0, b1, b2, qa, k.rel)
        T = wp.quat_rotate(R_wp, axes_dual(n_ang, b0, m1, m2, fa))
    return F, T


@wp.func
def distance_limit_force(k: JointKinematics, R_wp: wp.quat, axis: wp.vec3, lower: float, upper: float,
                         limit_ke: float, limit_kd: float) -> wp.vec3:  # fmt: skip
    """World force on the child at its anchor from a DISTANCE joint's range ``[lower, upper]`` (a negative
    bound disables its side): ``(limit_ke (bound - d) - limit_kd dd) n`` outside the range, with ``d = |e|``,
    ``n = e / d`` and ``dd = de . n``; zero inside. Anchors closer than 1e-9 m push along ``axis``
    (the joint's first linear axis, parent anchor frame)."""
    d = wp.length(k.e)
    n = wp.quat_rotate(R_wp, axis)
    if d > 1.0e-9:
        n = k.e / d
    f = float(0.0)
    if upper >= 0.0 and d > upper:
        f = limit_ke * (upper - d) - limit_kd * wp.dot(k.de, n)
    elif lower >= 0.0 and d < lower:
        f = limit_ke * (lower - d) - limit_kd * wp.dot(k.de, n)
    return n * f


@wp.func
def free_dof_force(
    i: int,
    end: int,
    n_lin: int,
    n_ang: int,
    qs: int,
    ds: int,
    ql: wp.vec3,
    vl: wp.vec3,
    qa: wp.vec3,
    va: wp.vec3,
    q_raw: float,
    target_q: wp.array(dtype=float),
    target_qd: wp.array(dtype=float),
    joint_target_ke: wp.array(dtype=float),
    joint_target_kd: wp.array(dtype=float),
    joint_limit_lower: wp.array(dtype=float),
    joint_limit_upper: wp.array(dtype=float),
    joint_limit_ke: wp.array(dtype=float),
    joint_limit_kd: wp.array(dtype=float),
    joint_stiffness: wp.array(dtype=float),
    joint_damping: wp.array(dtype=float),
    joint_rest_q: wp.array(dtype=float),
    joint_f: wp.array(dtype=float),
    has_joint_f: int,
) -> float:
    """Generalized force on free scalar DOF ``i`` (linear DOFs first) of a PRISMATIC / REVOLUTE / D6
    joint (:func:`dof_force`; the drive and limits of a single angular DOF see ``q_raw``); zero for
    ``i >= end``."""
    if i >= end:
        return 0.0
    d = ds + i
    f_ext = float(0.0)
    if has_joint_f != 0:
        f_ext = joint_f[d]
    q = pick(i, n_lin, ql, qa)
    q_drive = q
    if n_ang == 1 and i == n_lin:
        q_drive = q_raw
    return dof_force(
        q_drive, q, pick(i, n_lin, vl, va), target_q[qs + i], target_qd[d], joint_target_ke[d], joint_target_kd[d],
        joint_limit_lower[d], joint_limit_upper[d], joint_limit_ke[d], joint_limit_kd[d], joint_stiffness[d],
        joint_damping[d], joint_rest_q[qs + i], f_ext,
    )  # fmt: skip


@wp.func
def apply_joint_wrench(body_f: wp.array(dtype=wp.spatial_vector), p: int, c: int, k: JointKinematics, F: wp.vec3,
                       T: wp.vec3):  # fmt: skip
    """Force ``F`` at the child anchor and torque ``T`` on the child; the opposite on the parent at its anchor."""
    wp.atomic_add(body_f, c, spatial(F, wp.cross(k.r_c, F) + T))
    if p >= 0:
        wp.atomic_sub(body_f, p, spatial(F, wp.cross(k.r_p, F) + T))


# ---------------------------------------------------------------------------- kernels
@wp.kernel
def eval_joint_forces_kernel(
    # Model:
    joint_type: wp.array(dtype=wp.int32),
    joint_enabled: wp.array(dtype=wp.bool),
    joint_parent: wp.array(dtype=wp.int32),
    joint_child: wp.array(dtype=wp.int32),
    joint_X_p: wp.array(dtype=wp.transform),
    joint_X_c: wp.array(dtype=wp.transform),
    joint_q_start: wp.array(dtype=wp.int32),
    joint_qd_start: wp.array(dtype=wp.int32),
    joint_dof_dim: wp.array2d(dtype=wp.int32),
    joint_axis: wp.array(dtype=wp.vec3),
    joint_target_ke: wp.array(dtype=float),
    joint_target_kd: wp.array(dtype=float),
    joint_limit_lower: wp.array(dtype=float),
    joint_limit_upper: wp.array(dtype=float),
    joint_limit_ke: wp.array(dtype=float),
    joint_limit_kd: wp.array(dtype=float),
    joint_stiffness: wp.array(dtype=float),
    joint_damping: wp.array(dtype=float),
    joint_rest_q: wp.array(dtype=float),
    body_com: wp.array(dtype=wp.vec3),
    # State in:
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    # Control:
    target_q: wp.array(dtype=float),
    target_qd: wp.array(dtype=float),
    joint_f: wp.array(dtype=float),
    has_joint_f: int,
    # Solver options:
    attach_ke: float,
    attach_kd: float,
    # Out (accumulated):
    body_f: wp.array(dtype=wp.spatial_vector),
):
    j = wp.tid()
    jt = joint_type[j]
    if not joint_enabled[j]:
        return
    if jt == JT_FREE or jt == JT_ROD:
        return
    p = joint_parent[j]
    c = joint_child[j]
    k = joint_kinematics(j, joint_parent, joint_child, joint_X_p, joint_X_c, body_com, body_q, body_qd)
    R_wp = wp.transform_get_rotation(k.X_wp)
    qs = joint_q_start[j]
    ds = joint_qd_start[j]
    if jt == JT_DISTANCE:
        # range of the anchor separation (limits of the first linear DOF); free inside it
        F = distance_limit_force(k, R_wp, joint_axis[ds], joint_limit_lower[ds], joint_limit_upper[ds],
                                 joint_limit_ke[ds], joint_limit_kd[ds])  # fmt: skip
        apply_joint_wrench(body_f, p, c, k, F, wp.vec3(0.0))
        return
    n_lin, n_ang = joint_dims(jt, j, joint_dof_dim)
    ql, vl, qa, va = scalar_coords(jt, n_lin, n_ang, ds, joint_axis, k)
    # drives and limits of a single angular axis see the raw angle (see the module docs)
    q_raw = float(0.0)
    if n_ang == 1:
        q_raw = raw_twist_angle(k.rel, joint_axis[ds + n_lin])

    # ---- attachment of the constrained DOFs (force at the child anchor, torque; parent anchor frame)
    # (no dynamic loops in this kernel: Warp 1.19's adjoint of a value carried across the iterations of
    # a runtime-bounded loop is wrong, measured; fixed-count code paths only)
    t = wp.quat_rotate_inv(R_wp, k.e)
    v = wp.quat_rotate_inv(R_wp, k.de)
    if n_lin > 0:
        l0, l1, l2 = axis3(joint_axis, ds, n_lin)
        t = t - axes_combine(n_lin, l0, l1, l2, ql)
        v = v - axes_combine(n_lin, l0, l1, l2, vl)
    F = -attach_ke * t - attach_kd * v
    w = wp.quat_rotate_inv(R_wp, k.w_rel)
    T = wp.vec3(0.0)
    if n_ang == 0:
        T = -attach_ke * quat_to_rotation_vector(k.rel) - ANGULAR_KD_SCALE * attach_kd * w
    elif n_ang < 3:
        b0, b1, b2 = axis3(joint_axis, ds + n_lin, n_ang)
        m1, m2 = d6_moving_axes(n_ang, b0, b1, b2, qa, k.rel)
        theta = wp.vec3(0.0)
        if n_ang == 1:
            # one free axis (REVOLUTE, D6): axis alignment error (sine of the swing angle times its axis)
            theta = wp.cross(b0, wp.quat_rotate(k.rel, b0))
            w = w - b0 * va[0]
        else:
            # residual rotation that the two axes cannot explain, as a rotation vector
            r_dec = wp.quat_from_axis_angle(b0, qa[0]) * wp.quat_from_axis_angle(b1, qa[1])
            theta = quat_to_rotation_vector(k.rel * wp.quat_inverse(r_dec))
            w = w - b0 * va[0] - m1 * va[1]
        T = -attach_ke * theta - ANGULAR_KD_SCALE * attach_kd * w
    F = wp.quat_rotate(R_wp, F)
    T = wp.quat_rotate(R_wp, T)

    # ---- generalized forces on the free DOFs
    if jt == JT_BALL:
        # no drive, limit or spring; passive damping per angular DOF (as the reference does)
        fa = wp.vec3(-joint_damping[ds] * w[0], -joint_damping[ds + 1] * w[1], -joint_damping[ds + 2] * w[2])
        if has_joint_f != 0:
            fa = fa + wp.vec3(joint_f[ds], joint_f[ds + 1], joint_f[ds + 2])
        T = T + wp.quat_rotate(R_wp, fa)
    else:
        n = n_lin + n_ang
        fl = wp.vec3(0.0)
        fa = wp.vec3(0.0)
        if n_lin > 0:
            fl = wp.vec3(
                free_dof_force(0, n_lin, n_lin, n_ang, qs, ds, ql, vl, qa, va, q_raw, target_q, target_qd,
                               joint_target_ke, joint_target_kd, joint_limit_lower, joint_limit_upper, joint_limit_ke,
                               joint_limit_kd, joint_stiffness, joint_damping, joint_rest_q, joint_f, has_joint_f),
                free_dof_force(1, n_lin, n_lin, n_ang, qs, ds, ql, vl, qa, va, q_raw, target_q, target_qd,
                               joint_target_ke, joint_target_kd, joint_limit_lower, joint_limit_upper, joint_limit_ke,
                               joint_limit_kd, joint_stiffness, joint_damping, joint_rest_q, joint_f, has_joint_f),
                free_dof_force(2, n_lin, n_lin, n_ang, qs, ds, ql, vl, qa, va, q_raw, target_q, target_qd,
                               joint_target_ke, joint_target_kd, joint_limit_lower, joint_limit_upper, joint_limit_ke,
                               joint_limit_kd, joint_stiffness, joint_damping, joint_rest_q, joint_f, has_joint_f),
            )  # fmt: skip
        if n_ang > 0:
            fa = wp.vec3(
                free_dof_force(n_lin, n, n_lin, n_ang, qs, ds, ql, vl, qa, va, q_raw, target_q, target_qd,
                               joint_target_ke, joint_target_kd, joint_limit_lower, joint_limit_upper, joint_limit_ke,
                               joint_limit_kd, joint_stiffness, joint_damping, joint_rest_q, joint_f, has_joint_f),
                free_dof_force(n_lin + 1, n, n_lin, n_ang, qs, ds, ql, vl, qa, va, q_raw, target_q, target_qd,
                               joint_target_ke, joint_target_kd, joint_limit_lower, joint_limit_upper, joint_limit_ke,
                               joint_limit_kd, joint_stiffness, joint_damping, joint_rest_q, joint_f, has_joint_f),
                free_dof_force(n_lin + 2, n, n_lin, n_ang, qs, ds, ql, vl, qa, va, q_raw, target_q, target_qd,
                               joint_target_ke, joint_target_kd, joint_limit_lower, joint_limit_upper, joint_limit_ke,
                               joint_limit_kd, joint_stiffness, joint_damping, joint_rest_q, joint_f, has_joint_f),
            )  # fmt: skip

        Fd, Td = dof_wrench(n_lin, n_ang, ds, joint_axis, k, qa, fl, fa)
        F = F + Fd
        T = T + Td

    apply_joint_wrench(body_f, p, c, k, F, T)


@wp.func
def mimic_g(i: int, n: int, n_lin: int, r_lin: int, ql: wp.vec3, vl: wp.vec3, qa: wp.vec3, va: wp.vec3, rql: wp.vec3,
            rvl: wp.vec3, rqa: wp.vec3, rva: wp.vec3, cf: wp.vec2, mimic_ke: float, mimic_kd: float) -> float:  # fmt: skip
    """Coupling force ``g`` on follower coordinate ``i`` (zero for ``i >= n``)."""
    if i >= n:
        return 0.0
    return mimic_ke * (cf[0] + cf[1] * pick(i, r_lin, rql, rqa) - pick(i, n_lin, ql, qa)) + mimic_kd * (
        cf[1] * pick(i, r_lin, rvl, rva) - pick(i, n_lin, vl, va)
    )


@wp.kernel(module="unique")
def eval_mimic_forces_kernel(
    # Model:
    joint_type: wp.array(dtype=wp.int32),
    joint_enabled: wp.array(dtype=wp.bool),
    joint_parent: wp.array(dtype=wp.int32),
    joint_child: wp.array(dtype=wp.int32),
    joint_X_p: wp.array(dtype=wp.transform),
    joint_X_c: wp.array(dtype=wp.transform),
    joint_qd_start: wp.array(dtype=wp.int32),
    joint_dof_dim: wp.array2d(dtype=wp.int32),
    joint_axis: wp.array(dtype=wp.vec3),
    joint_mimic_joint: wp.array(dtype=wp.int32),
    joint_mimic_coeffs: wp.array(dtype=wp.vec2),
    body_com: wp.array(dtype=wp.vec3),
    # State in:
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    # Solver options:
    mimic_ke: float,
    mimic_kd: float,
    # Out (accumulated):
    body_f: wp.array(dtype=wp.spatial_vector),
):
    """Mimic couplings (own module: compiled only for models with mimic joints). Per follower
    coordinate ``g = mimic_ke (c0 + c1 q_ref - q) + mimic_kd (c1 qd_ref - qd)`` on the follower and
    ``-c1 g`` on the reference coordinate (the gradient of the coupling energy ``g^2 / (2 ke)``)."""
    j = wp.tid()
    ref = joint_mimic_joint[j]
    if ref < 0 or not joint_enabled[j]:
        return
    jt = joint_type[j]
    rt = joint_type[ref]
    if not (jt == JT_PRISMATIC or jt == JT_REVOLUTE or jt == JT_D6):
        return
    if not (rt == JT_PRISMATIC or rt == JT_REVOLUTE or rt == JT_D6):
        return
    n_lin, n_ang = joint_dims(jt, j, joint_dof_dim)
    r_lin, r_ang = joint_dims(rt, ref, joint_dof_dim)
    ds = joint_qd_start[j]
    r_ds = joint_qd_start[ref]
    k = joint_kinematics(j, joint_parent, joint_child, joint_X_p, joint_X_c, body_com, body_q, body_qd)
    kr = joint_kinematics(ref, joint_parent, joint_child, joint_X_p, joint_X_c, body_com, body_q, body_qd)
    ql, vl, qa, va = scalar_coords(jt, n_lin, n_ang, ds, joint_axis, k)
    rql, rvl, rqa, rva = scalar_coords(rt, r_lin, r_ang, r_ds, joint_axis, kr)
    cf = joint_mimic_coeffs[j]
    n = wp.min(n_lin + n_ang, r_lin + r_ang)
    # per coordinate i < n: g_i on the follower, -c1 g_i on the reference (fixed-count code, no dynamic
    # loop); the slots beyond each joint's own linear / angular counts are never read by dof_wrench
    fl = wp.vec3(mimic_g(0, n, n_lin, r_lin, ql, vl, qa, va, rql, rvl, rqa, rva, cf, mimic_ke, mimic_kd),
                 mimic_g(1, n, n_lin, r_lin, ql, vl, qa, va, rql, rvl, rqa, rva, cf, mimic_ke, mimic_kd),
                 mimic_g(2, n, n_lin, r_lin, ql, vl, qa, va, rql, rvl, rqa, rva, cf, mimic_ke, mimic_kd))  # fmt: skip
    fa = wp.vec3(mimic_g(n_lin, n, n_lin, r_lin, ql, vl, qa, va, rql, rvl, rqa, rva, cf, mimic_ke, mimic_kd),
                 mimic_g(n_lin + 1, n, n_lin, r_lin, ql, vl, qa, va, rql, rvl, rqa, rva, cf, mimic_ke, mimic_kd),
                 mimic_g(n_lin + 2, n, n_lin, r_lin, ql, vl, qa, va, rql, rvl, rqa, rva, cf, mimic_ke, mimic_kd))  # fmt: skip
    gl = -cf[1] * wp.vec3(mimic_g(0, n, n_lin, r_lin, ql, vl, qa, va, rql, rvl, rqa, rva, cf, mimic_ke, mimic_kd),
                          mimic_g(1, n, n_lin, r_lin, ql, vl, qa, va, rql, rvl, rqa, rva, cf, mimic_ke, mimic_kd),
                          mimic_g(2, n, n_lin, r_lin, ql, vl, qa, va, rql, rvl, rqa, rva, cf, mimic_ke, mimic_kd))  # fmt: skip
    ga = -cf[1] * wp.vec3(
        mimic_g(r_lin, n, n_lin, r_lin, ql, vl, qa, va, rql, rvl, rqa, rva, cf, mimic_ke, mimic_kd),
        mimic_g(r_lin + 1, n, n_lin, r_lin, ql, vl, qa, va, rql, rvl, rqa, rva, cf, mimic_ke, mimic_kd),
        mimic_g(r_lin + 2, n, n_lin, r_lin, ql, vl, qa, va, rql, rvl, rqa, rva, cf, mimic_ke, mimic_kd),
    )  # fmt: skip
    F, T = dof_wrench(n_lin, n_ang, ds, joint_axis, k, qa, fl, fa)
    apply_joint_wrench(body_f, joint_parent[j], joint_child[j], k, F, T)
    F, T = dof_wrench(r_lin, r_ang, r_ds, joint_axis, kr, rqa, gl, ga)
    apply_joint_wrench(body_f, joint_parent[ref], joint_child[ref], kr, F, T)


@wp.kernel
def update_joint_state_kernel(
    # Model:
    joint_type: wp.array(dtype=wp.int32),
    joint_parent: wp.array(dtype=wp.int32),
    joint_child: wp.array(dtype=wp.int32),
    joint_X_p: wp.array(dtype=wp.transform),
    joint_X_c: wp.array(dtype=wp.transform),
    joint_q_start: wp.array(dtype=wp.int32),
    joint_qd_start: wp.array(dtype=wp.int32),
    joint_dof_dim: wp.array2d(dtype=wp.int32),
    joint_axis: wp.array(dtype=wp.vec3),
    body_com: wp.array(dtype=wp.vec3),
    # State in:
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    # State out:
    joint_q: wp.array(dtype=float),
    joint_qd: wp.array(dtype=float),
):
    j = wp.tid()
    jt = joint_type[j]
    qs = joint_q_start[j]
    ds = joint_qd_start[j]
    k = joint_kinematics(j, joint_parent, joint_child, joint_X_p, joint_X_c, body_com, body_q, body_qd)
    # time derivative of the parent-frame offset: child anchor velocity relative to the parent body's
    # velocity field at the child anchor (eval_ik's convention; the forces use anchor-point velocities)
    k.de = k.de - wp.cross(k.w_p, k.e)
    R_wp = wp.transform_get_rotation(k.X_wp)
    if jt == JT_FREE or jt == JT_DISTANCE or jt == JT_ROD:
        # child pose in the parent anchor frame; child-COM twist relative to the parent, parent anchor frame
        X_j = wp.transform_inverse(k.X_wp) * k.X_wc
        t = wp.transform_get_translation(X_j)
        r = wp.transform_get_rotation(X_j)
        v_com = k.de - wp.cross(k.w_rel, k.r_c)  # parent-relative velocity of the child COM
        v = wp.quat_rotate_inv(R_wp, v_com)
        w = wp.quat_rotate_inv(R_wp, k.w_rel)
        for i in range(3):
            joint_q[qs + i] = t[i]
            joint_qd[ds + i] = v[i]
            joint_qd[ds + 3 + i] = w[i]
        for i in range(4):
            joint_q[qs + 3 + i] = r[i]
    elif jt == JT_BALL:
        w = wp.quat_rotate_inv(R_wp, k.w_rel)
        for i in range(4):
            joint_q[qs + i] = k.rel[i]
        for i in range(3):
            joint_qd[ds + i] = w[i]
    elif jt == JT_PRISMATIC or jt == JT_REVOLUTE or jt == JT_D6:
        n_lin, n_ang = joint_dims(jt, j, joint_dof_dim)
        ql, vl, qa, va = scalar_coords(jt, n_lin, n_ang, ds, joint_axis, k)
        for i in range(n_lin + n_ang):
            joint_q[qs + i] = pick(i, n_lin, ql, qa)
            joint_qd[ds + i] = pick(i, n_lin, vl, va)


# ---------------------------------------------------------------------------- host API
class _Replays:
    """Recorded launches keyed by the identity of their arrays and the values of their scalars (a leaner
    :class:`~armillary.launch.LaunchCache`: the argument kinds are known, so the key is cheap)."""

    def __init__(self, max_entries: int = 16):
        self.max_entries = max_entries
        self.entries: OrderedDict = OrderedDict()

    def launch(self, kernel, dim: int, arrays: list, scalars: tuple, n_in: int, device) -> None:
        """Launch ``kernel`` with inputs ``arrays[:n_in] + scalars`` and outputs ``arrays[n_in:]``."""
        key = (id(kernel), dim, tuple(map(id, arrays)), scalars)
        run = self.entries.get(key)
        if run is None:
            cmd = wp.launch(kernel, dim=dim, inputs=list(arrays[:n_in]) + list(scalars), outputs=list(arrays[n_in:]),
                            device=device, record_cmd=True)  # fmt: skip
            run = replayer(cmd, relaunch=lambda: wp.launch(kernel, dim=dim, inputs=list(arrays[:n_in]) + list(scalars),
                                                           outputs=list(arrays[n_in:]), device=device))  # fmt: skip
            # (the replay keeps cmd, and so every array of the key, alive)
            self.entries[key] = run
            if len(self.entries) > self.max_entries:
                self.entries.popitem(last=False)
        else:
            self.entries.move_to_end(key)
        run()


def _launch(model, kernel, dim: int, arrays: list, scalars: tuple, n_in: int) -> None:
    """Launch through the model's :class:`_Replays` (created on first use; direct launch if the model
    takes no attributes, or while a ``wp.Tape`` records, so that the tape records the launch). Array
    arguments come first in the kernels' signatures, scalars last."""
    if tape_recording():
        wp.launch(kernel, dim=dim, inputs=list(arrays[:n_in]) + list(scalars), outputs=list(arrays[n_in:]),
                  device=model.device)  # fmt: skip
        return
    cache = getattr(model, "_si_joint_replays", None)
    if cache is None:
        cache = _Replays()
        try:
            model._si_joint_replays = cache
        except AttributeError:
            wp.launch(kernel, dim=dim, inputs=list(arrays[:n_in]) + list(scalars), outputs=list(arrays[n_in:]),
                      device=model.device)  # fmt: skip
            return
    cache.launch(kernel, dim, arrays, scalars, n_in, model.device)


def _has_mimic(model) -> bool:
    """Whether any joint is a mimic follower: read on the host once per ``joint_mimic_joint`` array (the
    first call, before any graph capture), then cached on the model; replace the array (not its values)
    to change mimic relationships after the first step."""
    arr = getattr(model, "joint_mimic_joint", None)
    if arr is None:
        return False
    cached = getattr(model, "_si_has_mimic", None)
    if cached is not None and cached[0] is arr:
        return cached[1]
    flag = bool((arr.numpy() >= 0).any())
    try:
        model._si_has_mimic = (arr, flag)
    except AttributeError:
        pass
    return flag


def _control_arrays(model, control):
    target_q = getattr(control, "joint_target_q", None) if control is not None else None
    target_qd = getattr(control, "joint_target_qd", None) if control is not None else None
    joint_f = getattr(control, "joint_f", None) if control is not None else None
    if target_q is None:
        target_q = model.joint_target_q
    if target_qd is None:
        target_qd = model.joint_target_qd
    for name, arr, n in (
        ("control.joint_target_q", target_q, model.joint_coord_count),
        ("control.joint_target_qd", target_qd, model.joint_dof_count),
        ("control.joint_f", joint_f, model.joint_dof_count),
    ):
        if arr is not None and arr.shape[0] != n:
            raise ValueError(f"eval_joint_forces: {name} has {arr.shape[0]} entries, expected {n}")
    has_f = 1 if joint_f is not None else 0
    if joint_f is None:
        joint_f = target_qd  # never read (has_joint_f == 0); any float array of the right device
    return target_q, target_qd, joint_f, has_f


def eval_joint_forces(model, body_q, body_qd, control, body_f, *, joint_attach_ke, joint_attach_kd, joint_mimic_ke,
                      joint_mimic_kd) -> None:  # fmt: skip
    """Accumulate the penalty forces of every enabled joint into ``body_f``.

    Args:
        model: the finalized :class:`~armillary.Model`.
        body_q: body poses, ``wp.transform`` ``(body_count,)`` (world).
        body_qd: COM twists ``(v, w)``, ``wp.spatial_vector`` ``(body_count,)`` (world).
        control: a :class:`~armillary.Control` or ``None`` (model drive targets, no ``joint_f``).
        body_f: wrenches ``(f, tau)`` at the COM, world frame, ``(body_count,)``; added to.
        joint_attach_ke, joint_attach_kd: attachment stiffness [N/m, N*m/rad] and damping
            [N*s/m] of the constrained DOFs (angular damping: ``0.01 * joint_attach_kd`` N*m*s/rad).
        joint_mimic_ke, joint_mimic_kd: gains of the mimic couplings (per follower coordinate).

    One kernel launch over all joints, a second one only for models with mimic joints; nothing
    when the model has no joints. No host synchronisation after the first call (graph-capturable
    once warmed up).

    Raises:
        ValueError: a control array with the wrong number of entries (named).
    """
    if not model.joint_count:
        return
    target_q, target_qd, joint_f, has_f = _control_arrays(model, control)
    arrays = [
        model.joint_type, model.joint_enabled, model.joint_parent, model.joint_child, model.joint_X_p,
        model.joint_X_c, model.joint_q_start, model.joint_qd_start, model.joint_dof_dim, model.joint_axis,
        model.joint_target_ke, model.joint_target_kd, model.joint_limit_lower, model.joint_limit_upper,
        model.joint_limit_ke, model.joint_limit_kd, model.joint_stiffness, model.joint_damping, model.joint_rest_q,
        model.body_com, body_q, body_qd, target_q, target_qd, joint_f, body_f,
    ]  # fmt: skip
    scalars = (has_f, float(joint_attach_ke), float(joint_attach_kd))
    _launch(model, eval_joint_forces_kernel, model.joint_count, arrays, scalars, len(arrays) - 1)
    if _has_mimic(model):
        arrays = [
            model.joint_type, model.joint_enabled, model.joint_parent, model.joint_child, model.joint_X_p,
            model.joint_X_c, model.joint_qd_start, model.joint_dof_dim, model.joint_axis, model.joint_mimic_joint,
            model.joint_mimic_coeffs, model.body_com, body_q, body_qd, body_f,
        ]  # fmt: skip
        scalars = (float(joint_mimic_ke), float(joint_mimic_kd))
        _launch(model, eval_mimic_forces_kernel, model.joint_count, arrays, scalars, len(arrays) - 1)


def update_joint_state(model, body_q, body_qd, joint_q, joint_qd) -> None:
    """Write ``joint_q`` / ``joint_qd`` of every joint (articulated or not) from the body state.

    Layouts and meanings as :func:`armillary.eval_ik` documents them (FREE / DISTANCE: child pose
    and child-COM twist relative to the parent, parent anchor frame; BALL: relative quaternion
    and angular velocity in the parent anchor frame), except that angles are principal values in
    ``[-pi, pi)`` (no winding) and joints outside articulations (loop closures) are written too.
    One kernel launch; nothing when the model has no joints.
    """
    if not model.joint_count:
        return
    arrays = [
        model.joint_type, model.joint_parent, model.joint_child, model.joint_X_p, model.joint_X_c,
        model.joint_q_start, model.joint_qd_start, model.joint_dof_dim, model.joint_axis, model.body_com,
        body_q, body_qd, joint_q, joint_qd,
    ]  # fmt: skip
    _launch(model, update_joint_state_kernel, model.joint_count, arrays, (), len(arrays) - 2)

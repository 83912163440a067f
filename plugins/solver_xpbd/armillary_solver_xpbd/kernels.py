"""Warp kernels of ``SolverXPBD`` (eXtended Position-Based Dynamics in maximal coordinates).

One step (see :class:`armillary_solver_xpbd.solver.SolverXPBD`) is:

1. :func:`integrate_kernel`: predict body and particle poses from velocities, gravity
   (per world) and external forces; remember the start-of-step poses and velocities;
   zero the correction accumulators.
2. ``iterations`` times:

   * :func:`solve_joints_kernel` (one thread per joint, every sub-constraint of a joint
     solved Gauss-Seidel inside the thread, the result accumulated per body), then
     :func:`apply_deltas_kernel`;
   * :func:`solve_contacts_kernel`: one fused launch over every rigid contact, every
     particle-shape contact, every particle (particle-particle contacts through a
     ``wp.HashGrid``), every spring, every cloth triangle and every bending edge
     (Jacobi: corrections are accumulated with atomics together with a per-entity
     constraint count), then :func:`apply_deltas_kernel`.
3. :func:`update_velocities_kernel`: velocities from the pose change over the step.
4. with restitution: :func:`restitution_kernel` + :func:`apply_velocity_deltas_kernel`.

Conventions: ``body_q`` is the body-frame pose, the centre of mass sits at ``body_com``
in that frame; ``body_qd = (v_com, w)`` both in world frame. All corrections are
expressed as a COM translation and a world-frame rotation vector.

Differentiability (``wp.Tape``): this module compiles without adjoints (fast to build, used by
untaped steps); :mod:`.kernels_grad` compiles the same kernels with them for taped steps.
Grid-stride loops are ``for`` loops over ``range`` (Warp reverses them in the adjoint; a ``while``
loop's counter is already spent when the adjoint replays it) and the items of one launch never read
what another item of the same launch wrote. A value summed over a run-time number of items (a
patch's contacts, a particle's neighbours) is the result of a ``wp.func`` of its own: Warp's
adjoint does not re-run a dynamic loop before the code that follows it, but replays a call whole.
Values carried from one launch to the next (poses, Lagrange multipliers, impulses, velocity
corrections) have separate ``*_in`` and ``*_out`` arguments: the untaped solver passes the same
array twice (in-place updates, as before), the taped one a fresh array per launch, so no launch
overwrites a value an earlier launch's adjoint re-reads (see ``SolverXPBD`` for the bookkeeping).
Multipliers and impulses are added with ``wp.atomic_add`` into an ``*_out`` that starts as a copy
of ``*_in`` (``wp.copy`` is on the tape).

Rigid-body inverse masses are zero for static shapes (body -1), kinematic bodies,
bodies with zero inverse mass, and bodies excluded by the optional ownership mask
(``body_mask``: empty = every body is owned; ``body_mask[b] == 0`` = body ``b`` is
treated as an infinite-mass collider, its state left to someone else). Particles have
the same optional ``particle_mask``.
"""

from __future__ import annotations

import warp as wp

from armillary.sim.gravity import gravity_of_world

wp.set_module_options({"enable_backward": False})  # see kernels_grad

BODY_KINEMATIC = wp.constant(2)
PARTICLE_ACTIVE = wp.constant(1)

J_PRISMATIC = wp.constant(0)
J_REVOLUTE = wp.constant(1)
J_BALL = wp.constant(2)
J_FIXED = wp.constant(3)
J_FREE = wp.constant(4)
J_DISTANCE = wp.constant(5)
J_D6 = wp.constant(6)

LIMIT_INF = wp.constant(1.0e9)


# --------------------------------------------------------------------------- helpers
@wp.func
def body_inv_mass_of(
    b: int,
    body_inv_mass: wp.array(dtype=float),
    body_flags: wp.array(dtype=wp.int32),
    body_mask: wp.array(dtype=wp.int32),
):
    """Inverse mass used by the constraint solver (0: static, kinematic or not owned)."""
    if b < 0:
        return 0.0
    if (body_flags[b] & BODY_KINEMATIC) != 0:
        return 0.0
    if body_mask.shape[0] > 0:
        if body_mask[b] == 0:
            return 0.0
    return body_inv_mass[b]


@wp.func
def body_inv_inertia_of(b: int, inv_m: float, body_inv_inertia: wp.array(dtype=wp.mat33)):
    if b < 0 or inv_m == 0.0:
        return wp.mat33(0.0)
    return body_inv_inertia[b]


@wp.func
def body_com_pose(b: int, body_q: wp.array(dtype=wp.transform), body_com: wp.array(dtype=wp.vec3)):
    """(COM position, orientation) of body ``b`` (origin / identity for the world)."""
    if b < 0:
        return wp.vec3(0.0), wp.quat_identity()
    X = body_q[b]
    return wp.transform_point(X, body_com[b]), wp.transform_get_rotation(X)


@wp.func
def frame_of(x_com: wp.vec3, q: wp.quat, com: wp.vec3):
    """Body-frame transform from a COM position and orientation."""
    return wp.transform(x_com - wp.quat_rotate(q, com), q)


@wp.func
def w_lin(inv_m: float, q: wp.quat, I_inv: wp.mat33, r: wp.vec3, n: wp.vec3):
    """Generalized inverse mass of a body for a positional correction along ``n`` at lever ``r``."""
    rn = wp.quat_rotate_inv(q, wp.cross(r, n))
    return inv_m + wp.dot(rn, I_inv * rn)


@wp.func
def w_ang(q: wp.quat, I_inv: wp.mat33, a: wp.vec3):
    """Generalized inverse mass of a body for a rotation about world axis ``a``."""
    ab = wp.quat_rotate_inv(q, a)
    return wp.dot(ab, I_inv * ab)


@wp.func
def rotate_by(q: wp.quat, dth: wp.vec3):
    """Apply the world-frame rotation vector ``dth`` to ``q`` (first order, renormalised)."""
    return wp.normalize(q + wp.quat(dth, 0.0) * q * 0.5)


@wp.func
def lin_step(inv_m: float, q: wp.quat, I_inv: wp.mat33, r: wp.vec3, P: wp.vec3):
    """(COM displacement, world rotation vector) produced by positional impulse ``P`` at lever ``r``."""
    dth = wp.quat_rotate(q, I_inv * wp.quat_rotate_inv(q, wp.cross(r, P)))
    return P * inv_m, dth


@wp.func
def ang_step(q: wp.quat, I_inv: wp.mat33, L: wp.vec3):
    """World rotation vector produced by angular positional impulse ``L``."""
    return wp.quat_rotate(q, I_inv * wp.quat_rotate_inv(q, L))


@wp.func
def rotation_vector(q_new: wp.quat, q_old: wp.quat):
    """Rotation vector (world) taking ``q_old`` to ``q_new`` (small-angle form 2 vec(dq))."""
    dq = q_new * wp.quat_inverse(q_old)
    v = wp.vec3(dq[0], dq[1], dq[2]) * 2.0
    if dq[3] < 0.0:
        v = -v
    return v


@wp.func
def wrap_angle(a: float):
    pi = 3.14159265358979
    r = a
    if r > pi:
        r = r - 2.0 * pi
    if r < -pi:
        r = r + 2.0 * pi
    return r


@wp.func
def angle_near_limits(a: float, lo: float, hi: float):
    """The angle ``a`` (known modulo 2 pi) as the representative a limit range ``[lo, hi]`` sees.

    A hinge angle measured from the body poses only lies in ``[-pi, pi]``, while MJCF/URDF ranges
    may span any interval (e.g. ``[0.82, 5.46]``). With both bounds finite, ``a`` is shifted by a
    multiple of 2 pi into ``[mid - pi, mid + pi]`` (``mid`` the range centre), so an angle inside the
    range is never taken for a violation and a violated one is measured from its nearer bound.
    A range of 2 pi or more constrains nothing measurable and maps ``a`` inside it.
    """
    if lo <= -LIMIT_INF or hi >= LIMIT_INF:
        return a
    two_pi = 6.28318530717959
    if hi - lo >= two_pi:
        return 0.5 * (lo + hi)
    mid = 0.5 * (lo + hi)
    d = a - mid
    d = d - two_pi * wp.floor((d + 3.14159265358979) / two_pi)
    return mid + d


@wp.func
def twist_angle(q_rel: wp.quat, axis: wp.vec3):
    """Angle of the twist of ``q_rel`` about the unit ``axis`` (in [-pi, pi])."""
    s = wp.dot(wp.vec3(q_rel[0], q_rel[1], q_rel[2]), axis)
    return wrap_angle(2.0 * wp.atan2(s, q_rel[3]))


@wp.func
def add_body_delta(
    b: int,
    dx: wp.vec3,
    dth: wp.vec3,
    body_dx: wp.array(dtype=wp.vec3),
    body_dth: wp.array(dtype=wp.vec3),
):
    if b >= 0:
        wp.atomic_add(body_dx, b, dx)
        wp.atomic_add(body_dth, b, dth)


# --------------------------------------------------------------------------- integration
@wp.kernel
def integrate_kernel(
    body_count: int,
    particle_count: int,
    dt: float,
    gravity: wp.array(dtype=wp.vec3),
    angular_damping: float,
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    body_f: wp.array(dtype=wp.spatial_vector),
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_inertia: wp.array(dtype=wp.mat33),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    body_flags: wp.array(dtype=wp.int32),
    body_world: wp.array(dtype=wp.int32),
    particle_q: wp.array(dtype=wp.vec3),
    particle_qd: wp.array(dtype=wp.vec3),
    particle_f: wp.array(dtype=wp.vec3),
    particle_inv_mass: wp.array(dtype=float),
    particle_flags: wp.array(dtype=wp.int32),
    particle_world: wp.array(dtype=wp.int32),
    body_mask: wp.array(dtype=wp.int32),
    particle_mask: wp.array(dtype=wp.int32),
    item_count: int,
    stride: int,
    # scratch (out)
    body_q_prev: wp.array(dtype=wp.transform),
    body_qd_prev: wp.array(dtype=wp.spatial_vector),
    particle_q_prev: wp.array(dtype=wp.vec3),
    particle_qd_prev: wp.array(dtype=wp.vec3),
    body_dx: wp.array(dtype=wp.vec3),
    body_dth: wp.array(dtype=wp.vec3),
    body_cnt: wp.array(dtype=float),
    particle_dx: wp.array(dtype=wp.vec3),
    particle_cnt: wp.array(dtype=float),
    contact_lambda: wp.array(dtype=float),
    contact_impulse: wp.array(dtype=wp.vec3),
    dof_lambda: wp.array(dtype=float),
    body_corr_x: wp.array(dtype=wp.vec3),
    body_corr_th: wp.array(dtype=wp.vec3),
    particle_corr: wp.array(dtype=wp.vec3),
    soft_lambda: wp.array(dtype=float),
    # state out
    body_q_out: wp.array(dtype=wp.transform),
    body_qd_out: wp.array(dtype=wp.spatial_vector),
    particle_q_out: wp.array(dtype=wp.vec3),
    particle_qd_out: wp.array(dtype=wp.vec3),
):
    # grid-stride over max(bodies, particles, contact slots, dofs, soft constraints): on the CPU one
    # thread loops over the items instead of paying Warp's per-thread argument setup for each
    for tid in range(wp.tid(), item_count, stride):
        if tid < contact_lambda.shape[0]:
            contact_lambda[tid] = 0.0
            contact_impulse[tid] = wp.vec3(0.0)
        if tid < dof_lambda.shape[0]:
            dof_lambda[tid] = 0.0
        if tid < soft_lambda.shape[0]:
            soft_lambda[tid] = 0.0

        if tid < body_count:
            X = body_q[tid]
            qd = body_qd[tid]
            body_q_prev[tid] = X
            body_qd_prev[tid] = qd
            body_dx[tid] = wp.vec3(0.0)
            body_dth[tid] = wp.vec3(0.0)
            body_cnt[tid] = 0.0
            body_corr_x[tid] = wp.vec3(0.0)
            body_corr_th[tid] = wp.vec3(0.0)
            q = wp.transform_get_rotation(X)
            com = body_com[tid]
            x_com = wp.transform_point(X, com)
            v = wp.spatial_top(qd)
            w = wp.spatial_bottom(qd)
            inv_m = body_inv_mass[tid]
            kinematic = (body_flags[tid] & BODY_KINEMATIC) != 0
            owned = True
            if body_mask.shape[0] > 0:
                owned = body_mask[tid] != 0
            if not owned:
                v = wp.vec3(0.0)
                w = wp.vec3(0.0)  # left untouched: its owner moves it
            elif (not kinematic) and inv_m > 0.0:
                g = gravity_of_world(gravity, body_world[tid])
                f = wp.vec3(0.0)
                tau = wp.vec3(0.0)
                if body_f.shape[0] > tid:
                    f = wp.spatial_top(body_f[tid])
                    tau = wp.spatial_bottom(body_f[tid])
                v = v + (g + f * inv_m) * dt
                wb = wp.quat_rotate_inv(q, w)
                I = body_inertia[tid]
                tb = wp.quat_rotate_inv(q, tau) - wp.cross(wb, I * wb)
                wb = wb + (body_inv_inertia[tid] * tb) * dt
                w = wp.quat_rotate(q, wb) * wp.max(1.0 - angular_damping * dt, 0.0)
            if owned:
                x_com = x_com + v * dt
                q = rotate_by(q, w * dt)
                body_q_out[tid] = frame_of(x_com, q, com)
                body_qd_out[tid] = wp.spatial_vector(v, w)
            else:
                body_q_out[tid] = X
                body_qd_out[tid] = qd

        if tid < particle_count:
            x = particle_q[tid]
            pv = particle_qd[tid]
            particle_q_prev[tid] = x
            particle_qd_prev[tid] = pv
            particle_dx[tid] = wp.vec3(0.0)
            particle_cnt[tid] = 0.0
            particle_corr[tid] = wp.vec3(0.0)
            active = (particle_flags[tid] & PARTICLE_ACTIVE) != 0
            if particle_mask.shape[0] > 0:
                if particle_mask[tid] == 0:
                    active = False  # left untouched: its owner moves it
            inv_mp = particle_inv_mass[tid]
            if active and inv_mp > 0.0:
                g = gravity_of_world(gravity, particle_world[tid])
                pf = wp.vec3(0.0)
                if particle_f.shape[0] > tid:
                    pf = particle_f[tid]
                pv = pv + (g + pf * inv_mp) * dt
                x = x + pv * dt
            elif active:
                x = x + pv * dt
            particle_q_out[tid] = x
            particle_qd_out[tid] = pv


@wp.kernel
def joint_force_kernel(
    joint_type: wp.array(dtype=wp.int32),
    joint_enabled: wp.array(dtype=wp.bool),
    joint_parent: wp.array(dtype=wp.int32),
    joint_child: wp.array(dtype=wp.int32),
    joint_X_p: wp.array(dtype=wp.transform),
    joint_X_c: wp.array(dtype=wp.transform),
    joint_qd_start: wp.array(dtype=wp.int32),
    joint_dof_dim: wp.array2d(dtype=wp.int32),
    joint_axis: wp.array(dtype=wp.vec3),
    joint_f: wp.array(dtype=float),
    body_q: wp.array(dtype=wp.transform),
    body_com: wp.array(dtype=wp.vec3),
    body_f_out: wp.array(dtype=wp.spatial_vector),
):
    """Turn ``Control.joint_f`` into body wrenches (world, about each COM), accumulated atomically."""
    j = wp.tid()
    if not joint_enabled[j]:
        return
    jt = joint_type[j]
    p = joint_parent[j]
    c = joint_child[j]
    if c < 0:
        return
    start = joint_qd_start[j]
    Xc = body_q[c]
    xc_com = wp.transform_point(Xc, body_com[c])
    xp_com = wp.vec3(0.0)
    Xp = wp.transform_identity()
    if p >= 0:
        Xp = body_q[p]
        xp_com = wp.transform_point(Xp, body_com[p])
    Xwp = Xp * joint_X_p[j]
    Xwc = Xc * joint_X_c[j]
    anchor = wp.transform_get_translation(Xwc)
    F = wp.vec3(0.0)
    T = wp.vec3(0.0)
    if jt == J_FREE or jt == J_DISTANCE:
        F = wp.vec3(joint_f[start + 0], joint_f[start + 1], joint_f[start + 2])
        T = wp.vec3(joint_f[start + 3], joint_f[start + 4], joint_f[start + 5])
        anchor = xc_com
    else:
        nl = joint_dof_dim[j, 0]
        na = joint_dof_dim[j, 1]
        qp = wp.transform_get_rotation(Xwp)
        for k in range(3):  # unrolled: Warp's adjoint does not re-run a dynamic loop before what follows
            if k < nl:
                F = F + wp.quat_rotate(qp, joint_axis[start + k]) * joint_f[start + k]
        for k in range(3):
            if k < na:
                T = T + wp.quat_rotate(qp, joint_axis[start + nl + k]) * joint_f[start + nl + k]
    # the force acts at the joint anchor; torques about the COMs follow
    wp.atomic_add(body_f_out, c, wp.spatial_vector(F, T + wp.cross(anchor - xc_com, F)))
    if p >= 0:
        wp.atomic_add(body_f_out, p, wp.spatial_vector(-F, -T - wp.cross(anchor - xp_com, F)))


# --------------------------------------------------------------------------- joints
@wp.func
def joint_scalar_coord(
    jt: int,
    k: int,
    nl: int,
    axis: wp.vec3,
    Xwp: wp.transform,
    Xwc: wp.transform,
):
    """Scalar coordinate of DOF ``k`` (linear if ``k < nl``) of a PRISMATIC/REVOLUTE/D6 joint."""
    if k < nl:
        e = wp.transform_get_translation(Xwc) - wp.transform_get_translation(Xwp)
        return wp.dot(wp.quat_rotate_inv(wp.transform_get_rotation(Xwp), e), axis)
    q_rel = wp.quat_inverse(wp.transform_get_rotation(Xwp)) * wp.transform_get_rotation(Xwc)
    return twist_angle(q_rel, axis)


@wp.func
def orthonormal_complement(a: wp.vec3):
    """Two unit vectors completing ``a`` to an orthonormal basis."""
    t = wp.vec3(1.0, 0.0, 0.0)
    if wp.abs(a[0]) > 0.8:
        t = wp.vec3(0.0, 1.0, 0.0)
    b1 = wp.normalize(wp.cross(a, t))
    b2 = wp.cross(a, b1)
    return b1, b2


@wp.struct
class JointBodies:
    xp: wp.vec3
    qp: wp.quat
    xc: wp.vec3
    qc: wp.quat
    mp: float
    mc: float
    Ip: wp.mat33
    Ic: wp.mat33
    comp: wp.vec3
    comc: wp.vec3
    # largest share of a correction this joint gave each body so far (see ``note_shares``)
    sp: float
    sc: float
    # the corrections applied to the local copies so far (summed as they are made: recovering them as
    # the difference of the final and initial poses would cost their float32 precision)
    dxp: wp.vec3
    dthp: wp.vec3
    dxc: wp.vec3
    dthc: wp.vec3


@wp.func
def note_shares(jb: JointBodies, w_p: float, w_c: float):
    """Record the fractions ``w_p / w`` and ``w_c / w`` of one constraint row's correction.

    Joints are projected in parallel and their corrections summed per body (Jacobi). A body that
    takes (nearly) all of the correction of several joints at once (e.g. a light link carrying
    massless or rotation-locked child frames, which act as anchors) would then overshoot by the
    number of such joints and the iteration diverges. The per-body sum of these shares is the
    divisor that makes the summed correction a weighted mean of what the joints ask for.
    """
    out = jb
    w = w_p + w_c
    if w > 0.0:
        out.sp = wp.max(jb.sp, w_p / w)
        out.sc = wp.max(jb.sc, w_c / w)
    return out


@wp.func
def jb_frames(jb: JointBodies, Xp_local: wp.transform, Xc_local: wp.transform):
    Xwp = frame_of(jb.xp, jb.qp, jb.comp) * Xp_local
    Xwc = frame_of(jb.xc, jb.qc, jb.comc) * Xc_local
    return Xwp, Xwc


@wp.func
def jb_moved(jb: JointBodies, dxc: wp.vec3, dthc: wp.vec3, dxp: wp.vec3, dthp: wp.vec3):
    """``jb`` with the child moved by ``(dxc, dthc)`` and the parent by ``(dxp, dthp)`` (COM
    translation, world rotation vector), as a new value (a struct updated in place would be seen at
    its final value by the adjoint); the corrections are added to ``jb.dx*`` / ``jb.dth*``."""
    out = jb
    out.xc = jb.xc + dxc
    out.qc = rotate_by(jb.qc, dthc)
    out.xp = jb.xp + dxp
    out.qp = rotate_by(jb.qp, dthp)
    out.dxc = jb.dxc + dxc
    out.dthc = jb.dthc + dthc
    out.dxp = jb.dxp + dxp
    out.dthp = jb.dthp + dthp
    return out


@wp.func
def jb_rotated(jb: JointBodies, dthc: wp.vec3, dthp: wp.vec3):
    """``jb`` with the child rotated by ``dthc`` and the parent by ``dthp`` (see :func:`jb_moved`)."""
    out = jb
    out.qc = rotate_by(jb.qc, dthc)
    out.qp = rotate_by(jb.qp, dthp)
    out.dthc = jb.dthc + dthc
    out.dthp = jb.dthp + dthp
    return out


@wp.func
def jb_linear(jb: JointBodies, Xwp: wp.transform, Xwc: wp.transform, n: wp.vec3, C: float, alpha: float,
              lam: float, relax: float):
    """Solve ``C(x) = 0`` along world direction ``n`` between the joint anchors; returns (bodies, dlambda)."""
    ap = wp.transform_get_translation(Xwp)
    ac = wp.transform_get_translation(Xwc)
    rp = ap - jb.xp
    rc = ac - jb.xc
    w_p = w_lin(jb.mp, jb.qp, jb.Ip, rp, n)
    w_c = w_lin(jb.mc, jb.qc, jb.Ic, rc, n)
    w = w_p + w_c
    out = note_shares(jb, w_p, w_c)
    if w + alpha <= 0.0:
        return out, 0.0
    dl = (-C - alpha * lam) / (w + alpha) * relax
    P = n * dl
    dxc, dthc = lin_step(jb.mc, jb.qc, jb.Ic, rc, P)
    dxp, dthp = lin_step(jb.mp, jb.qp, jb.Ip, rp, -P)
    return jb_moved(out, dxc, dthc, dxp, dthp), dl


@wp.func
def jb_angular(jb: JointBodies, n: wp.vec3, C: float, alpha: float, lam: float, relax: float):
    """Solve the angular constraint ``C = 0`` about world axis ``n`` (child rotates by +dlambda)."""
    w_p = w_ang(jb.qp, jb.Ip, n)
    w_c = w_ang(jb.qc, jb.Ic, n)
    w = w_p + w_c
    out = note_shares(jb, w_p, w_c)
    if w + alpha <= 0.0:
        return out, 0.0
    dl = (-C - alpha * lam) / (w + alpha) * relax
    L = n * dl
    return jb_rotated(out, ang_step(jb.qc, jb.Ic, L), ang_step(jb.qp, jb.Ip, -L)), dl


@wp.func
def world_inv_inertia(q: wp.quat, I_inv: wp.mat33):
    """A body's inverse inertia in world axes, ``R I^-1 R^T``."""
    R = wp.quat_to_matrix(q)
    return R * I_inv * wp.transpose(R)


@wp.func
def point_inv_mass(inv_m: float, q: wp.quat, I_inv: wp.mat33, r: wp.vec3):
    """3x3 generalized inverse mass of a body at lever ``r`` (world): the displacement of that point
    per unit positional impulse there, ``inv_m 1 - [r]x R I^-1 R^T [r]x``."""
    S = wp.skew(r)
    return wp.identity(n=3, dtype=float) * inv_m - S * world_inv_inertia(q, I_inv) * S


@wp.func
def block_impulse(K: wp.mat33, P: wp.mat33, rank: int, err: wp.vec3, alpha: float, relax: float):
    """(impulse, ok): the relaxed XPBD impulse ``-(P K P + alpha P + (1 - P))^-1 P err * relax`` of a
    vector constraint ``P err = 0`` on the ``rank``-dimensional subspace the projector ``P`` keeps
    (``K``: summed generalized inverse masses). The system is solved scaled to unit mean eigenvalue
    (inverse masses span 1e-9 .. 1e12 between links); ``ok`` is False when it is (nearly) singular
    there (an immovable direction), where the caller falls back to one scalar row along ``err``."""
    eye = wp.identity(n=3, dtype=float)
    s = wp.trace(P * K * P) / float(rank) + alpha
    if s <= 0.0:
        return wp.vec3(0.0), False
    inv_s = 1.0 / s
    M = P * (K * inv_s) * P + P * (alpha * inv_s) + (eye - P)
    if wp.determinant(M) <= 1.0e-6:
        return wp.vec3(0.0), False
    return (wp.inverse(M) * (P * err)) * (-relax * inv_s), True


@wp.func
def jb_lock_linear(jb: JointBodies, Xp_local: wp.transform, Xc_local: wp.transform, P: wp.mat33, rank: int,
                   alpha: float, relax: float):
    """Lock the anchor separation (child minus parent anchor) on the subspace ``P`` keeps: one block
    solve of the 3x3 (projected) system, so that the correction is linear in the separation (smooth
    at zero, and its derivative never overshoots the way a row along the error's own direction does
    for a body light in rotation). The separation is summed from the COM difference and the lever
    arms (magnitudes of the link, not of world coordinates: float32 keeps its precision). Returns
    the updated copy of ``jb``."""
    rp = wp.quat_rotate(jb.qp, wp.transform_get_translation(Xp_local) - jb.comp)
    rc = wp.quat_rotate(jb.qc, wp.transform_get_translation(Xc_local) - jb.comc)
    e = ((jb.xc - jb.xp) - rp) + rc
    Wp = point_inv_mass(jb.mp, jb.qp, jb.Ip, rp)
    Wc = point_inv_mass(jb.mc, jb.qc, jb.Ic, rc)
    locked = P * e
    lam, ok = block_impulse(Wp + Wc, P, rank, e, alpha, relax)
    out = jb
    if ok:
        out = note_shares(jb, wp.trace(P * Wp * P) / float(rank), wp.trace(P * Wc * P) / float(rank))
        dxc, dthc = lin_step(jb.mc, jb.qc, jb.Ic, rc, lam)
        dxp, dthp = lin_step(jb.mp, jb.qp, jb.Ip, rp, -lam)
        out = jb_moved(out, dxc, dthc, dxp, dthp)
    else:
        err = wp.length(locked)
        if err > 1.0e-9:
            Xwp, Xwc = jb_frames(jb, Xp_local, Xc_local)
            out, dl = jb_linear(jb, Xwp, Xwc, locked / err, err, alpha, 0.0, relax)
    return out


@wp.func
def jb_lock_angular(jb: JointBodies, P: wp.mat33, rank: int, theta: wp.vec3, alpha: float, relax: float):
    """Rotate the child by the world rotation vector ``theta`` relative to the parent on the subspace
    ``P`` keeps (one block solve, see :func:`jb_lock_linear`). Returns the updated copy of ``jb``."""
    Ap = world_inv_inertia(jb.qp, jb.Ip)
    Ac = world_inv_inertia(jb.qc, jb.Ic)
    lam, ok = block_impulse(Ap + Ac, P, rank, -theta, alpha, relax)
    out = jb
    if ok:
        out = note_shares(jb, wp.trace(P * Ap * P) / float(rank), wp.trace(P * Ac * P) / float(rank))
        out = jb_rotated(out, ang_step(jb.qc, jb.Ic, lam), ang_step(jb.qp, jb.Ip, -lam))
    else:
        ang = wp.length(P * theta)
        if ang > 1.0e-9:
            out, dl = jb_angular(jb, (P * theta) / ang, -ang, alpha, 0.0, relax)
    return out


@wp.func
def drive_target(
    q_prev: float,
    target_q: float,
    target_qd: float,
    rest_q: float,
    ke: float,
    kd: float,
    ks: float,
    damping: float,
    dt: float,
):
    """Implicit PD (drive + passive spring/damper) as one compliant constraint: (target, compliance).

    Force ``ke (q_t - q) + ks (q_r - q) + kd (qd_t - qd) - damping qd`` with ``qd = (q - q_prev) / dt``
    equals ``k_eff (q* - q)``; returns ``(q*, 1 / k_eff)`` or a negative compliance when inactive.
    """
    kv = (kd + damping) / dt
    k_eff = ke + ks + kv
    if k_eff <= 0.0:
        return 0.0, -1.0
    num = ke * target_q + ks * rest_q + (kd / dt) * (q_prev + target_qd * dt) + (damping / dt) * q_prev
    return num / k_eff, 1.0 / k_eff


@wp.func
def joint_angular_row(
    jb: JointBodies,
    jt: int,
    k: int,
    nl: int,
    start: int,
    qstart: int,
    Xp_local: wp.transform,
    Xc_local: wp.transform,
    Xwp_prev: wp.transform,
    Xwc_prev: wp.transform,
    joint_axis: wp.array(dtype=wp.vec3),
    joint_limit_lower: wp.array(dtype=float),
    joint_limit_upper: wp.array(dtype=float),
    joint_target_ke: wp.array(dtype=float),
    joint_target_kd: wp.array(dtype=float),
    joint_stiffness: wp.array(dtype=float),
    joint_damping: wp.array(dtype=float),
    joint_rest_q: wp.array(dtype=float),
    joint_target_q: wp.array(dtype=float),
    joint_target_qd: wp.array(dtype=float),
    dof_lambda: wp.array(dtype=float),
    dof_lambda_out: wp.array(dtype=float),
    dt: float,
    angular_relaxation: float,
):
    """Limit, or else drive, of angular axis ``k`` of a joint: one Gauss-Seidel row on ``jb``
    (returns the updated copy; the drive's multiplier increment goes to ``dof_lambda_out``)."""
    inv_dt2 = 1.0 / (dt * dt)
    d = start + nl + k
    a_local = joint_axis[d]
    Xwp, Xwc = jb_frames(jb, Xp_local, Xc_local)
    a_w = wp.quat_rotate(wp.transform_get_rotation(Xwp), a_local)
    ang = joint_scalar_coord(jt, nl + k, nl, a_local, Xwp, Xwc)
    lo = joint_limit_lower[d]
    hi = joint_limit_upper[d]
    ang_lim = angle_near_limits(ang, lo, hi)
    out = jb
    if ang_lim < lo and lo > -LIMIT_INF:
        out, dl = jb_angular(jb, a_w, ang_lim - lo, 0.0, 0.0, angular_relaxation)
    elif ang_lim > hi and hi < LIMIT_INF:
        out, dl = jb_angular(jb, a_w, ang_lim - hi, 0.0, 0.0, angular_relaxation)
    else:
        tq = joint_target_q[qstart + nl + k]
        tqd = joint_target_qd[d]
        q_prev = joint_scalar_coord(jt, nl + k, nl, a_local, Xwp_prev, Xwc_prev)
        qs, comp = drive_target(q_prev, tq, tqd, joint_rest_q[qstart + nl + k], joint_target_ke[d],
                                joint_target_kd[d], joint_stiffness[d], joint_damping[d], dt)
        if comp >= 0.0:
            lam = dof_lambda[d]
            out, dl = jb_angular(jb, a_w, wrap_angle(ang - qs), comp * inv_dt2, lam, 1.0)
            wp.atomic_add(dof_lambda_out, d, dl)
    return out


@wp.func
def joint_linear_row(
    jb: JointBodies,
    jt: int,
    k: int,
    nl: int,
    start: int,
    qstart: int,
    Xp_local: wp.transform,
    Xc_local: wp.transform,
    Xwp_prev: wp.transform,
    Xwc_prev: wp.transform,
    joint_axis: wp.array(dtype=wp.vec3),
    joint_limit_lower: wp.array(dtype=float),
    joint_limit_upper: wp.array(dtype=float),
    joint_target_ke: wp.array(dtype=float),
    joint_target_kd: wp.array(dtype=float),
    joint_stiffness: wp.array(dtype=float),
    joint_damping: wp.array(dtype=float),
    joint_rest_q: wp.array(dtype=float),
    joint_target_q: wp.array(dtype=float),
    joint_target_qd: wp.array(dtype=float),
    dof_lambda: wp.array(dtype=float),
    dof_lambda_out: wp.array(dtype=float),
    dt: float,
    linear_relaxation: float,
):
    """Limit, or else drive, of linear axis ``k`` of a joint (see :func:`joint_angular_row`)."""
    inv_dt2 = 1.0 / (dt * dt)
    d = start + k
    a_local = joint_axis[d]
    Xwp, Xwc = jb_frames(jb, Xp_local, Xc_local)
    a_w = wp.quat_rotate(wp.transform_get_rotation(Xwp), a_local)
    x = joint_scalar_coord(jt, k, nl, a_local, Xwp, Xwc)
    lo = joint_limit_lower[d]
    hi = joint_limit_upper[d]
    out = jb
    if x < lo and lo > -LIMIT_INF:
        out, dl = jb_linear(jb, Xwp, Xwc, a_w, x - lo, 0.0, 0.0, linear_relaxation)
    elif x > hi and hi < LIMIT_INF:
        out, dl = jb_linear(jb, Xwp, Xwc, a_w, x - hi, 0.0, 0.0, linear_relaxation)
    else:
        tq = joint_target_q[qstart + k]
        tqd = joint_target_qd[d]
        q_prev = joint_scalar_coord(jt, k, nl, a_local, Xwp_prev, Xwc_prev)
        qs, comp = drive_target(q_prev, tq, tqd, joint_rest_q[qstart + k], joint_target_ke[d],
                                joint_target_kd[d], joint_stiffness[d], joint_damping[d], dt)
        if comp >= 0.0:
            lam = dof_lambda[d]
            out, dl = jb_linear(jb, Xwp, Xwc, a_w, x - qs, comp * inv_dt2, lam, 1.0)
            wp.atomic_add(dof_lambda_out, d, dl)
    return out


@wp.func
def joint_mimic_row(
    jb: JointBodies,
    rb: JointBodies,
    jt: int,
    k: int,
    nl: int,
    start: int,
    Xp_local: wp.transform,
    Xc_local: wp.transform,
    rtype: int,
    rnl: int,
    rs: int,
    rp: int,
    rc: int,
    rXwp: wp.transform,
    rXwc: wp.transform,
    coeffs: wp.vec2,
    joint_axis: wp.array(dtype=wp.vec3),
    linear_relaxation: float,
    angular_relaxation: float,
    body_dx: wp.array(dtype=wp.vec3),
    body_dth: wp.array(dtype=wp.vec3),
):
    """Mimic coupling of axis ``k``: ``q_follower = c0 + c1 q_reference`` corrected on the
    follower's local copies (``jb``, returned updated) and, scaled by ``-c1``, directly on the
    reference joint's bodies (``rb``: their poses at the start of the pass, accumulated)."""
    out = jb
    Xwp, Xwc = jb_frames(jb, Xp_local, Xc_local)
    a_local = joint_axis[start + k]
    qf = joint_scalar_coord(jt, k, nl, a_local, Xwp, Xwc)
    ra_local = joint_axis[rs + k]
    qr = joint_scalar_coord(rtype, k, rnl, ra_local, rXwp, rXwc)
    C = qf - (coeffs[0] + coeffs[1] * qr)
    if k >= nl:
        C = wrap_angle(C)
    m = coeffs[1]
    a_w = wp.quat_rotate(wp.transform_get_rotation(Xwp), a_local)
    ra_w = wp.quat_rotate(wp.transform_get_rotation(rXwp), ra_local)
    # generalized inverse masses of the follower and (scaled) reference coordinates
    wf = float(0.0)
    wr = float(0.0)
    rap = wp.transform_get_translation(rXwp)
    rac = wp.transform_get_translation(rXwc)
    if k < nl:
        wf = w_lin(jb.mp, jb.qp, jb.Ip, wp.transform_get_translation(Xwp) - jb.xp, a_w) + w_lin(
            jb.mc, jb.qc, jb.Ic, wp.transform_get_translation(Xwc) - jb.xc, a_w)
    else:
        wf = w_ang(jb.qp, jb.Ip, a_w) + w_ang(jb.qc, jb.Ic, a_w)
    if k < rnl:
        wr = w_lin(rb.mp, rb.qp, rb.Ip, rap - rb.xp, ra_w) + w_lin(rb.mc, rb.qc, rb.Ic, rac - rb.xc, ra_w)
    else:
        wr = w_ang(rb.qp, rb.Ip, ra_w) + w_ang(rb.qc, rb.Ic, ra_w)
    wsum = wf + m * m * wr
    if wsum > 0.0:
        dl = -C / wsum * angular_relaxation
        if k < nl:
            dl = -C / wsum * linear_relaxation
        # follower: + dl along its axis (local copies)
        if k < nl:
            P = a_w * dl
            dxc, dthc = lin_step(jb.mc, jb.qc, jb.Ic, wp.transform_get_translation(Xwc) - jb.xc, P)
            dxp, dthp = lin_step(jb.mp, jb.qp, jb.Ip, wp.transform_get_translation(Xwp) - jb.xp, -P)
            out = jb_moved(jb, dxc, dthc, dxp, dthp)
        else:
            L = a_w * dl
            out = jb_rotated(jb, ang_step(jb.qc, jb.Ic, L), ang_step(jb.qp, jb.Ip, -L))
        # reference: - m dl along its axis (accumulated directly)
        rdl = -m * dl
        if k < rnl:
            P = ra_w * rdl
            if rb.mc > 0.0:
                dxc, dthc = lin_step(rb.mc, rb.qc, rb.Ic, rac - rb.xc, P)
                add_body_delta(rc, dxc, dthc, body_dx, body_dth)
            if rb.mp > 0.0:
                dxp, dthp = lin_step(rb.mp, rb.qp, rb.Ip, rap - rb.xp, -P)
                add_body_delta(rp, dxp, dthp, body_dx, body_dth)
        else:
            L = ra_w * rdl
            if rb.mc > 0.0:
                add_body_delta(rc, wp.vec3(0.0), ang_step(rb.qc, rb.Ic, L), body_dx, body_dth)
            if rb.mp > 0.0:
                add_body_delta(rp, wp.vec3(0.0), ang_step(rb.qp, rb.Ip, -L), body_dx, body_dth)
    return out


@wp.kernel
def solve_joints_kernel(
    dt: float,
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
    joint_limit_lower: wp.array(dtype=float),
    joint_limit_upper: wp.array(dtype=float),
    joint_target_ke: wp.array(dtype=float),
    joint_target_kd: wp.array(dtype=float),
    joint_stiffness: wp.array(dtype=float),
    joint_damping: wp.array(dtype=float),
    joint_rest_q: wp.array(dtype=float),
    joint_target_q: wp.array(dtype=float),
    joint_target_qd: wp.array(dtype=float),
    joint_mimic_joint: wp.array(dtype=wp.int32),
    joint_mimic_coeffs: wp.array(dtype=wp.vec2),
    body_q: wp.array(dtype=wp.transform),
    body_q_prev: wp.array(dtype=wp.transform),
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    body_flags: wp.array(dtype=wp.int32),
    body_mask: wp.array(dtype=wp.int32),
    linear_relaxation: float,
    angular_relaxation: float,
    linear_compliance: float,
    angular_compliance: float,
    dof_lambda: wp.array(dtype=float),
    dof_lambda_out: wp.array(dtype=float),
    body_dx: wp.array(dtype=wp.vec3),
    body_dth: wp.array(dtype=wp.vec3),
    body_share: wp.array(dtype=float),
):
    """One thread per joint: its sub-constraints Gauss-Seidel on local copies of the two bodies, the
    net corrections accumulated per body. ``dof_lambda_out[d] += dlambda`` (``dof_lambda_out`` is
    ``dof_lambda`` or a copy of it). The per-axis loops are unrolled (at most 3 axes each) and
    every row returns a new ``JointBodies`` value, so that the adjoint replays each row from the
    body state it saw."""
    j = wp.tid()
    jt = joint_type[j]
    if (not joint_enabled[j]) or jt == J_FREE:
        return
    p = joint_parent[j]
    c = joint_child[j]
    if c < 0:
        return
    inv_dt2 = 1.0 / (dt * dt)
    jb = JointBodies()
    xp_init, qp_init = body_com_pose(p, body_q, body_com)
    xc_init, qc_init = body_com_pose(c, body_q, body_com)
    jb.xp = xp_init
    jb.qp = qp_init
    jb.xc = xc_init
    jb.qc = qc_init
    jb.mp = body_inv_mass_of(p, body_inv_mass, body_flags, body_mask)
    jb.mc = body_inv_mass_of(c, body_inv_mass, body_flags, body_mask)
    jb.Ip = body_inv_inertia_of(p, jb.mp, body_inv_inertia)
    jb.Ic = body_inv_inertia_of(c, jb.mc, body_inv_inertia)
    jb.comp = wp.vec3(0.0)
    if p >= 0:
        jb.comp = body_com[p]
    jb.comc = body_com[c]
    jb.sp = 0.0
    jb.sc = 0.0
    jb.dxp = wp.vec3(0.0)
    jb.dthp = wp.vec3(0.0)
    jb.dxc = wp.vec3(0.0)
    jb.dthc = wp.vec3(0.0)
    if jb.mp == 0.0 and jb.mc == 0.0:
        return
    Xp_local = joint_X_p[j]
    Xc_local = joint_X_c[j]
    start = joint_qd_start[j]
    qstart = joint_q_start[j]
    nl = joint_dof_dim[j, 0]
    na = joint_dof_dim[j, 1]
    if jt == J_BALL or jt == J_DISTANCE:
        nl = 0
        na = 3
    alpha_lin = linear_compliance * inv_dt2
    alpha_ang = angular_compliance * inv_dt2

    # start-of-step joint frames (for the damping part of drives)
    Xp_prev = wp.transform_identity()
    if p >= 0:
        Xp_prev = body_q_prev[p]
    Xwp_prev = Xp_prev * Xp_local
    Xwc_prev = body_q_prev[c] * Xc_local

    # ---------------------------------------------------------------- angular part
    Xwp, Xwc = jb_frames(jb, Xp_local, Xc_local)
    if jt != J_BALL and jt != J_DISTANCE:
        eye = wp.identity(n=3, dtype=float)
        if na == 0:
            # lock the whole relative rotation
            qwp = wp.transform_get_rotation(Xwp)
            qwc = wp.transform_get_rotation(Xwc)
            jb = jb_lock_angular(jb, eye, 3, rotation_vector(qwp, qwc), alpha_ang, angular_relaxation)
        elif na == 1:
            # align the hinge axes: the rotation vector taking the child's axis onto the parent's
            # (``cr * angle / sin(angle)``, its small-angle limit ``cr / cos`` below 1e-6)
            a_local = joint_axis[start + nl]
            ap = wp.quat_rotate(wp.transform_get_rotation(Xwp), a_local)
            ac = wp.quat_rotate(wp.transform_get_rotation(Xwc), a_local)
            cr = wp.cross(ac, ap)
            cos_a = wp.dot(ac, ap)
            sin_a = wp.length(cr)
            scale = float(1.0)
            if sin_a > 1.0e-6:
                scale = wp.atan2(sin_a, cos_a) / sin_a
            elif cos_a > 0.0:
                scale = 1.0 / cos_a
            jb = jb_lock_angular(jb, eye - wp.outer(ap, ap), 2, cr * scale, alpha_ang, angular_relaxation)
        elif na == 2:
            # lock the twist about the direction orthogonal to both axes
            a0 = joint_axis[start + nl]
            a1 = joint_axis[start + nl + 1]
            lk = wp.cross(a0, a1)
            if wp.length(lk) > 1.0e-6:
                lk = wp.normalize(lk)
                Xwp, Xwc = jb_frames(jb, Xp_local, Xc_local)
                qwp = wp.transform_get_rotation(Xwp)
                q_rel = wp.quat_inverse(qwp) * wp.transform_get_rotation(Xwc)
                ang = twist_angle(q_rel, lk)
                jb, dl = jb_angular(jb, wp.quat_rotate(qwp, lk), ang, alpha_ang, 0.0, angular_relaxation)
        # per-axis limits and drives
        for k in range(3):
            if k < na:
                jb = joint_angular_row(
                    jb, jt, k, nl, start, qstart, Xp_local, Xc_local, Xwp_prev, Xwc_prev, joint_axis,
                    joint_limit_lower, joint_limit_upper, joint_target_ke, joint_target_kd, joint_stiffness,
                    joint_damping, joint_rest_q, joint_target_q, joint_target_qd, dof_lambda, dof_lambda_out, dt,
                    angular_relaxation,
                )

    # ---------------------------------------------------------------- linear part
    Xwp, Xwc = jb_frames(jb, Xp_local, Xc_local)
    e = wp.transform_get_translation(Xwc) - wp.transform_get_translation(Xwp)
    qwp = wp.transform_get_rotation(Xwp)
    if jt == J_DISTANCE:
        dist = wp.length(e)
        lo = joint_limit_lower[start]
        hi = joint_limit_upper[start]
        if dist > 1.0e-9:
            n = e / dist
            if lo >= 0.0 and dist < lo:
                jb, dl = jb_linear(jb, Xwp, Xwc, n, dist - lo, alpha_lin, 0.0, linear_relaxation)
            elif hi >= 0.0 and dist > hi:
                jb, dl = jb_linear(jb, Xwp, Xwc, n, dist - hi, alpha_lin, 0.0, linear_relaxation)
    else:
        # the locked part of the anchor separation (projector and dimension of the locked subspace)
        eye = wp.identity(n=3, dtype=float)
        P = eye
        rank = int(3)
        if nl == 1:
            a = wp.quat_rotate(qwp, joint_axis[start])
            P = eye - wp.outer(a, a)
            rank = 2
        elif nl == 2:
            lk = wp.cross(joint_axis[start], joint_axis[start + 1])
            rank = 0
            if wp.length(lk) > 1.0e-6:
                a = wp.quat_rotate(qwp, wp.normalize(lk))
                P = wp.outer(a, a)
                rank = 1
        elif nl >= 3:
            rank = 0
        if rank > 0:
            jb = jb_lock_linear(jb, Xp_local, Xc_local, P, rank, alpha_lin, linear_relaxation)
        for k in range(3):
            if k < nl:
                jb = joint_linear_row(
                    jb, jt, k, nl, start, qstart, Xp_local, Xc_local, Xwp_prev, Xwc_prev, joint_axis,
                    joint_limit_lower, joint_limit_upper, joint_target_ke, joint_target_kd, joint_stiffness,
                    joint_damping, joint_rest_q, joint_target_q, joint_target_qd, dof_lambda, dof_lambda_out, dt,
                    linear_relaxation,
                )

    # ---------------------------------------------------------------- mimic (coupled correction)
    r = joint_mimic_joint[j]
    if r >= 0 and (jt == J_REVOLUTE or jt == J_PRISMATIC or jt == J_D6):
        coeffs = joint_mimic_coeffs[j]
        rp = joint_parent[r]
        rc = joint_child[r]
        rs = joint_qd_start[r]
        rnl = joint_dof_dim[r, 0]
        rb = JointBodies()
        rxp, rqp = body_com_pose(rp, body_q, body_com)
        rxc, rqc = body_com_pose(rc, body_q, body_com)
        rb.xp = rxp
        rb.qp = rqp
        rb.xc = rxc
        rb.qc = rqc
        rb.mp = body_inv_mass_of(rp, body_inv_mass, body_flags, body_mask)
        rb.mc = body_inv_mass_of(rc, body_inv_mass, body_flags, body_mask)
        rb.Ip = body_inv_inertia_of(rp, rb.mp, body_inv_inertia)
        rb.Ic = body_inv_inertia_of(rc, rb.mc, body_inv_inertia)
        rcomp = wp.vec3(0.0)
        if rp >= 0:
            rcomp = body_com[rp]
        rXwp = frame_of(rxp, rqp, rcomp) * joint_X_p[r]
        rXwc = frame_of(rxc, rqc, body_com[rc]) * joint_X_c[r]
        rtype = joint_type[r]
        for k in range(6):
            if k < nl + na:
                jb = joint_mimic_row(
                    jb, rb, jt, k, nl, start, Xp_local, Xc_local, rtype, rnl, rs, rp, rc, rXwp, rXwc, coeffs,
                    joint_axis, linear_relaxation, angular_relaxation, body_dx, body_dth,
                )

    # accumulate this joint's corrections (and shares: the joint pass divides by their sum when > 1)
    if jb.mc > 0.0:
        add_body_delta(c, jb.dxc, jb.dthc, body_dx, body_dth)
        if jb.sc > 0.0:
            wp.atomic_add(body_share, c, jb.sc)
    if jb.mp > 0.0 and p >= 0:
        add_body_delta(p, jb.dxp, jb.dthp, body_dx, body_dth)
        if jb.sp > 0.0:
            wp.atomic_add(body_share, p, jb.sp)


# --------------------------------------------------------------------------- contacts
@wp.func
def contact_body(
    s: int,
    shape_body: wp.array(dtype=wp.int32),
    body_q: wp.array(dtype=wp.transform),
    body_com: wp.array(dtype=wp.vec3),
):
    b = int(-1)
    if s >= 0:
        b = shape_body[s]
    X = wp.transform_identity()
    com = wp.vec3(0.0)
    if b >= 0:
        X = body_q[b]
        com = body_com[b]
    return b, X, com


@wp.func
def same_patch(
    a: int,
    b: int,
    shape0: wp.array(dtype=wp.int32),
    shape1: wp.array(dtype=wp.int32),
    normal: wp.array(dtype=wp.vec3),
):
    """Whether contacts ``a`` and ``b`` belong to one friction patch (same shape pair, same normal)."""
    return shape0[a] == shape0[b] and shape1[a] == shape1[b] and wp.dot(normal[a], normal[b]) > 0.99


@wp.func
def patch_end(
    start: int,
    count: int,
    shape0: wp.array(dtype=wp.int32),
    shape1: wp.array(dtype=wp.int32),
    normal: wp.array(dtype=wp.vec3),
):
    """End (exclusive) of the patch starting at ``start``, or -1 when ``start`` does not start one.

    A patch is a maximal run of consecutive contacts of one shape pair with one normal (the
    pipeline writes a pair's contacts contiguously on the CPU and with ``deterministic=True``;
    elsewhere a pair may split into several patches, each still obeying Coulomb's law)."""
    if start > 0:
        if same_patch(start - 1, start, shape0, shape1, normal):
            return -1
    e = start + 1
    while e < count:
        if not same_patch(e - 1, e, shape0, shape1, normal):
            break
        e += 1
    return e


@wp.func
def patch_spans_area(
    start: int,
    end: int,
    shape0: wp.array(dtype=wp.int32),
    shape1: wp.array(dtype=wp.int32),
    point0: wp.array(dtype=wp.vec3),
    point1: wp.array(dtype=wp.vec3),
    normal: wp.array(dtype=wp.vec3),
    margin0: wp.array(dtype=float),
    margin1: wp.array(dtype=float),
    contact_lambda: wp.array(dtype=float),
    use_lambda: int,
    shape_body: wp.array(dtype=wp.int32),
    body_q: wp.array(dtype=wp.transform),
):
    """1 when the active contacts of ``[start, end)`` (penetrating now, or with ``use_lambda``:
    with a normal impulse this step) span an area, not a point or a line: the in-plane
    covariance of their points has a smaller eigenvalue above 1e-4 of the larger one. A box
    rocking on an edge keeps its lifted contacts in the patch but not among the active ones."""
    if end - start < 3:
        return 0
    n = normal[start]
    e1, e2 = orthonormal_complement(n)
    b0 = shape_body[shape0[start]]
    b1 = shape_body[shape1[start]]
    X0 = wp.transform_identity()
    X1 = wp.transform_identity()
    if b0 >= 0:
        X0 = body_q[b0]
    if b1 >= 0:
        X1 = body_q[b1]
    k = float(0.0)
    su = float(0.0)
    sv = float(0.0)
    suu = float(0.0)
    svv = float(0.0)
    suv = float(0.0)
    o = wp.vec3(0.0)
    for c in range(start, end):
        x1 = wp.transform_point(X1, point1[c])
        active = False
        if use_lambda != 0:
            active = contact_lambda[c] > 0.0
        else:
            x0 = wp.transform_point(X0, point0[c])
            active = wp.dot(normal[c], x1 - x0) - margin0[c] - margin1[c] < 0.0
        if active:
            if k == 0.0:
                o = x1
            x = x1 - o
            u = wp.dot(x, e1)
            v = wp.dot(x, e2)
            k += 1.0
            su += u
            sv += v
            suu += u * u
            svv += v * v
            suv += u * v
    if k < 3.0:
        return 0
    cuu = suu / k - (su / k) * (su / k)
    cvv = svv / k - (sv / k) * (sv / k)
    cuv = suv / k - (su / k) * (sv / k)
    tr = cuu + cvv
    det = cuu * cvv - cuv * cuv
    disc = wp.sqrt(wp.max(0.25 * tr * tr - det, 0.0))
    lmax = 0.5 * tr + disc
    lmin = 0.5 * tr - disc
    if lmax > 0.0 and lmin > 1.0e-4 * lmax:
        return 1
    return 0


@wp.func_grad(patch_end)
def adj_patch_end(
    start: int,
    count: int,
    shape0: wp.array(dtype=wp.int32),
    shape1: wp.array(dtype=wp.int32),
    normal: wp.array(dtype=wp.vec3),
    adj_ret: int,
):
    """Integer-valued: nothing to differentiate."""
    pass


@wp.func_grad(patch_spans_area)
def adj_patch_spans_area(
    start: int,
    end: int,
    shape0: wp.array(dtype=wp.int32),
    shape1: wp.array(dtype=wp.int32),
    point0: wp.array(dtype=wp.vec3),
    point1: wp.array(dtype=wp.vec3),
    normal: wp.array(dtype=wp.vec3),
    margin0: wp.array(dtype=float),
    margin1: wp.array(dtype=float),
    contact_lambda: wp.array(dtype=float),
    use_lambda: int,
    shape_body: wp.array(dtype=wp.int32),
    body_q: wp.array(dtype=wp.transform),
    adj_ret: int,
):
    """Integer-valued (a classification): nothing to differentiate."""
    pass


@wp.func
def rigid_contact_frame(
    c: int,
    shape0: wp.array(dtype=wp.int32),
    shape1: wp.array(dtype=wp.int32),
    point0: wp.array(dtype=wp.vec3),
    point1: wp.array(dtype=wp.vec3),
    normal: wp.array(dtype=wp.vec3),
    margin0: wp.array(dtype=float),
    margin1: wp.array(dtype=float),
    shape_body: wp.array(dtype=wp.int32),
    body_q: wp.array(dtype=wp.transform),
    body_q_prev: wp.array(dtype=wp.transform),
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    body_flags: wp.array(dtype=wp.int32),
    body_mask: wp.array(dtype=wp.int32),
    relaxation: float,
    area: int,
):
    """Normal correction and tangential slip of rigid contact ``c`` (as if it were alone).

    Returns ``(dl, slip, wt, x)``: the relaxed normal positional impulse (0 when the contact is
    separated or both bodies are immovable), the relative tangential motion of the contact
    points over the step, the generalized inverse mass along it (``|slip| / wt`` is the impulse
    that removes it; 0 when there is no slip) and the world contact point (on shape 1).

    With ``area`` (the patch's contacts span an area and hold the bodies against tilting about
    any in-plane axis) the slip is taken at the contact point moved along the normal into the
    plane of each body's centre of mass, where tilting does not move it tangentially."""
    dl = float(0.0)
    wt = float(0.0)
    slip = wp.vec3(0.0)
    xw = wp.vec3(0.0)
    s0 = shape0[c]
    s1 = shape1[c]
    if s0 < 0 or s1 < 0:
        return dl, slip, wt, xw
    b0, X0, com0 = contact_body(s0, shape_body, body_q, body_com)
    b1, X1, com1 = contact_body(s1, shape_body, body_q, body_com)
    m0 = body_inv_mass_of(b0, body_inv_mass, body_flags, body_mask)
    m1 = body_inv_mass_of(b1, body_inv_mass, body_flags, body_mask)
    if m0 == 0.0 and m1 == 0.0:
        return dl, slip, wt, xw
    I0 = body_inv_inertia_of(b0, m0, body_inv_inertia)
    I1 = body_inv_inertia_of(b1, m1, body_inv_inertia)
    n = normal[c]
    th0 = margin0[c]
    th1 = margin1[c]
    s0w = wp.transform_point(X0, point0[c]) + n * th0
    s1w = wp.transform_point(X1, point1[c]) - n * th1
    xw = s1w
    d = wp.dot(n, s1w - s0w)
    if d >= 0.0:
        return dl, slip, wt, xw
    q0 = wp.transform_get_rotation(X0)
    q1 = wp.transform_get_rotation(X1)
    x0 = wp.transform_point(X0, com0)
    x1 = wp.transform_point(X1, com1)
    r0 = s0w - x0
    r1 = s1w - x1
    w = w_lin(m0, q0, I0, r0, n) + w_lin(m1, q1, I1, r1, n)
    if w <= 0.0:
        return dl, slip, wt, xw
    dl = -d / w * relaxation
    # relative tangential motion of the (possibly projected) contact points over the step
    X0p = X0
    X1p = X1
    if b0 >= 0:
        X0p = body_q_prev[b0]
    if b1 >= 0:
        X1p = body_q_prev[b1]
    if area != 0:
        r0 = r0 - n * wp.dot(n, r0)
        r1 = r1 - n * wp.dot(n, r1)
    p0 = wp.transform_point(wp.transform_inverse(X0), x0 + r0)
    p1 = wp.transform_point(wp.transform_inverse(X1), x1 + r1)
    dp = (x1 + r1 - wp.transform_point(X1p, p1)) - (x0 + r0 - wp.transform_point(X0p, p0))
    dpt = dp - n * wp.dot(n, dp)
    l = wp.length(dpt)
    if l > 1.0e-12:
        t = dpt / l
        wt = w_lin(m0, q0, I0, r0, t) + w_lin(m1, q1, I1, r1, t)
        if wt > 0.0:
            slip = dpt
        else:
            wt = 0.0
    return dl, slip, wt, xw


@wp.func
def rigid_patch_sums(
    start: int,
    end: int,
    shape0: wp.array(dtype=wp.int32),
    shape1: wp.array(dtype=wp.int32),
    point0: wp.array(dtype=wp.vec3),
    point1: wp.array(dtype=wp.vec3),
    normal: wp.array(dtype=wp.vec3),
    margin0: wp.array(dtype=float),
    margin1: wp.array(dtype=float),
    shape_body: wp.array(dtype=wp.int32),
    body_q: wp.array(dtype=wp.transform),
    body_q_prev: wp.array(dtype=wp.transform),
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    body_flags: wp.array(dtype=wp.int32),
    body_mask: wp.array(dtype=wp.int32),
    relaxation: float,
    area: int,
    mu: float,
    contact_lambda: wp.array(dtype=float),
    contact_impulse: wp.array(dtype=wp.vec3),
):
    """Pass 1 of :func:`solve_rigid_patch` over its active contacts: (count, slip removal asked
    for, friction budget, sum of slips, sum of contact points).

    Every sum over a variable number of items is a function of its own that returns it: Warp's
    adjoint does not re-run a dynamic loop before the code that follows it, so a value carried
    out of such a loop is only right in the adjoint as a call's result."""
    k = float(0.0)
    want = float(0.0)
    budget = float(0.0)
    slip_sum = wp.vec3(0.0)
    x_sum = wp.vec3(0.0)
    for c in range(start, end):
        dl, slip, wt, xw = rigid_contact_frame(
            c, shape0, shape1, point0, point1, normal, margin0, margin1, shape_body, body_q, body_q_prev,
            body_com, body_inv_mass, body_inv_inertia, body_flags, body_mask, relaxation, area,
        )
        if dl > 0.0:
            nc = normal[c]
            P = contact_impulse[c]
            budget += mu * (contact_lambda[c] + dl) - wp.length(P - nc * wp.dot(nc, P))
            k += 1.0
            slip_sum += slip
            x_sum += xw
            if wt > 0.0:
                want += wp.length(slip) / wt
    return k, want, budget, slip_sum, x_sum


@wp.func
def patch_radius_sum(start: int, end: int, point1: wp.array(dtype=wp.vec3), X1: wp.transform, xc: wp.vec3):
    """Sum of the distances of the patch's points (on shape 1) from ``xc`` (see :func:`rigid_patch_sums`)."""
    rad = float(0.0)
    for c in range(start, end):
        rad += wp.length(wp.transform_point(X1, point1[c]) - xc)
    return rad


@wp.func
def solve_rigid_patch(
    start: int,
    end: int,
    shape0: wp.array(dtype=wp.int32),
    shape1: wp.array(dtype=wp.int32),
    point0: wp.array(dtype=wp.vec3),
    point1: wp.array(dtype=wp.vec3),
    normal: wp.array(dtype=wp.vec3),
    margin0: wp.array(dtype=float),
    margin1: wp.array(dtype=float),
    shape_body: wp.array(dtype=wp.int32),
    shape_mu: wp.array(dtype=float),
    shape_mu_torsional: wp.array(dtype=float),
    shape_mu_rolling: wp.array(dtype=float),
    body_q: wp.array(dtype=wp.transform),
    body_q_prev: wp.array(dtype=wp.transform),
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    body_flags: wp.array(dtype=wp.int32),
    body_mask: wp.array(dtype=wp.int32),
    relaxation: float,
    contact_lambda: wp.array(dtype=float),
    contact_impulse: wp.array(dtype=wp.vec3),
    contact_lambda_out: wp.array(dtype=float),
    contact_impulse_out: wp.array(dtype=wp.vec3),
    body_dx: wp.array(dtype=wp.vec3),
    body_dth: wp.array(dtype=wp.vec3),
    body_cnt: wp.array(dtype=float),
):
    """Non-penetration and Coulomb friction of the contacts ``[start, end)`` of one patch.

    Reads the step's accumulated ``contact_lambda`` / ``contact_impulse`` and adds this iteration's
    to ``contact_lambda_out`` / ``contact_impulse_out`` (the same arrays, or copies of them).

    Each contact's normal correction is solved on its own (Jacobi, as if it were alone; the
    apply kernel averages). Friction is bounded per patch over the whole step: the tangential
    impulses of the patch's active contacts, accumulated over the iterations, may reach ``mu``
    times their accumulated normal impulses (static friction removes the whole slip, Müller et
    al. 2020, 3.5; sliding friction is scaled to the bound).

    A patch spanning an area (a box face) gets one friction impulse at the centroid of its
    contacts, computed from the mean slip with the translational (tilt-free) effective mass, and
    one twist impulse; every active contact carries a copy (so the average is the patch impulse).
    Per-contact friction of such a patch leaves a slip every step, which becomes a constant creep
    below the friction angle: each contact's correction is mostly a rotation that the other
    contacts cancel, and the lightly loaded (uphill) contacts saturate first. Point and line
    patches (spheres, capsules, cylinders, which must roll) keep per-contact friction under the
    pooled bound."""
    s0 = shape0[start]
    s1 = shape1[start]
    if s0 < 0 or s1 < 0:
        return
    mu = 0.5 * (shape_mu[s0] + shape_mu[s1])
    area = patch_spans_area(start, end, shape0, shape1, point0, point1, normal, margin0, margin1, contact_lambda, 0,
                            shape_body, body_q)
    b0, X0, com0 = contact_body(s0, shape_body, body_q, body_com)
    b1, X1, com1 = contact_body(s1, shape_body, body_q, body_com)
    m0 = body_inv_mass_of(b0, body_inv_mass, body_flags, body_mask)
    m1 = body_inv_mass_of(b1, body_inv_mass, body_flags, body_mask)
    I0 = body_inv_inertia_of(b0, m0, body_inv_inertia)
    I1 = body_inv_inertia_of(b1, m1, body_inv_inertia)
    q0 = wp.transform_get_rotation(X0)
    q1 = wp.transform_get_rotation(X1)
    x0 = wp.transform_point(X0, com0)
    x1 = wp.transform_point(X1, com1)
    n = normal[start]
    # pass 1: the patch's friction budget, the slip removal it asks for, its centroid and mean slip
    k, want, budget, slip_sum, x_sum = rigid_patch_sums(
        start, end, shape0, shape1, point0, point1, normal, margin0, margin1, shape_body, body_q, body_q_prev,
        body_com, body_inv_mass, body_inv_inertia, body_flags, body_mask, relaxation, area, mu, contact_lambda,
        contact_impulse,
    )
    if k == 0.0:
        return
    # area patches: one friction impulse at the centroid, one twist impulse (as-if-alone units)
    Pf = wp.vec3(0.0)
    Lf = wp.vec3(0.0)
    xc = x_sum / k
    tw_left = float(-1.0)
    if area != 0:
        B = budget / k
        S = slip_sum / k
        ls = wp.length(S)
        if ls > 1.0e-12 and B > 0.0:
            t = S / ls
            rc0 = xc - x0
            rc1 = xc - x1
            rc0 = rc0 - n * wp.dot(n, rc0)
            rc1 = rc1 - n * wp.dot(n, rc1)
            wl = w_lin(m0, q0, I0, rc0, t) + w_lin(m1, q1, I1, rc1, t)
            if wl > 0.0:
                Pf = t * (-wp.min(ls / wl, B))
        # twist about the normal: bounded by what the linear part left, times the patch radius
        q0p = q0
        q1p = q1
        if b0 >= 0:
            q0p = wp.transform_get_rotation(body_q_prev[b0])
        if b1 >= 0:
            q1p = wp.transform_get_rotation(body_q_prev[b1])
        tw = wp.dot(rotation_vector(q1, q1p) - rotation_vector(q0, q0p), n)
        wa = w_ang(q0, I0, n) + w_ang(q1, I1, n)
        tw_left = float(0.0)
        if wa > 0.0 and wp.abs(tw) > 1.0e-12:
            rad = patch_radius_sum(start, end, point1, X1, xc) / float(end - start)
            Lmax = wp.max(B - wp.length(Pf), 0.0) * rad
            lmag = wp.min(wp.abs(tw) / wa, Lmax)
            Lf = n * (-wp.sign(tw) * lmag)
            tw_left = wp.abs(tw) / wa - lmag
    scale = float(0.0)
    if want > 0.0 and budget > 0.0:
        scale = wp.min(budget / want, 1.0)
    dxf1 = wp.vec3(0.0)
    dthf1 = wp.vec3(0.0)
    dxf0 = wp.vec3(0.0)
    dthf0 = wp.vec3(0.0)
    if area != 0:
        dxf1, dthf1 = lin_step(m1, q1, I1, xc - x1, Pf)
        dxf0, dthf0 = lin_step(m0, q0, I0, xc - x0, -Pf)
        dthf1 = dthf1 + ang_step(q1, I1, Lf)
        dthf0 = dthf0 - ang_step(q0, I0, Lf)
    mu_t = float(0.0)
    mu_r = float(0.0)
    if shape_mu_torsional.shape[0] > 0:
        mu_t = 0.5 * (shape_mu_torsional[s0] + shape_mu_torsional[s1])
    if shape_mu_rolling.shape[0] > 0:
        mu_r = 0.5 * (shape_mu_rolling[s0] + shape_mu_rolling[s1])
    # pass 2: apply (poses are unchanged until apply_deltas_kernel)
    for c in range(start, end):
        dl, slip, wt, xw = rigid_contact_frame(
            c, shape0, shape1, point0, point1, normal, margin0, margin1, shape_body, body_q, body_q_prev,
            body_com, body_inv_mass, body_inv_inertia, body_flags, body_mask, relaxation, area,
        )
        if dl > 0.0:
            nc = normal[c]
            r0 = wp.transform_point(X0, point0[c]) + nc * margin0[c] - x0
            r1 = xw - x1
            P = nc * dl
            Pc = P
            if area == 0 and wt > 0.0:
                Pc = P - slip * (scale / wt)
            dx1, dth1 = lin_step(m1, q1, I1, r1, Pc)
            dx0, dth0 = lin_step(m0, q0, I0, r0, -Pc)
            if area != 0:
                Pc = P + Pf
                dx1 = dx1 + dxf1
                dth1 = dth1 + dthf1
                dx0 = dx0 + dxf0
                dth0 = dth0 + dthf0
            # torsional and rolling friction (material): relative rotation over the step
            if mu_t > 0.0 or mu_r > 0.0:
                q0p = q0
                q1p = q1
                if b0 >= 0:
                    q0p = wp.transform_get_rotation(body_q_prev[b0])
                if b1 >= 0:
                    q1p = wp.transform_get_rotation(body_q_prev[b1])
                rel = rotation_vector(q1, q1p) - rotation_vector(q0, q0p)
                tw = wp.dot(rel, nc)
                L = wp.vec3(0.0)
                if mu_t > 0.0 and wp.abs(tw) > 1.0e-12:
                    wa = w_ang(q0, I0, nc) + w_ang(q1, I1, nc)
                    if wa > 0.0:
                        lim = wp.abs(tw) / wa
                        if tw_left >= 0.0:
                            lim = tw_left  # what the patch twist friction left
                        L = L - nc * (wp.sign(tw) * wp.min(lim, mu_t * dl))
                roll = rel - nc * tw
                lr = wp.length(roll)
                if mu_r > 0.0 and lr > 1.0e-12:
                    a = roll / lr
                    wa = w_ang(q0, I0, a) + w_ang(q1, I1, a)
                    if wa > 0.0:
                        L = L - a * wp.min(lr / wa, mu_r * dl)
                dth1 = dth1 + ang_step(q1, I1, L)
                dth0 = dth0 - ang_step(q0, I0, L)
            wp.atomic_add(contact_lambda_out, c, dl)
            wp.atomic_add(contact_impulse_out, c, Pc)
            if m1 > 0.0:
                add_body_delta(b1, dx1, dth1, body_dx, body_dth)
                wp.atomic_add(body_cnt, b1, 1.0)
            if m0 > 0.0:
                add_body_delta(b0, dx0, dth0, body_dx, body_dth)
                wp.atomic_add(body_cnt, b0, 1.0)


@wp.func
def particle_inv_mass_of(
    i: int,
    particle_inv_mass: wp.array(dtype=float),
    particle_flags: wp.array(dtype=wp.int32),
    particle_mask: wp.array(dtype=wp.int32),
):
    if (particle_flags[i] & PARTICLE_ACTIVE) == 0:
        return 0.0
    if particle_mask.shape[0] > 0:
        if particle_mask[i] == 0:
            return 0.0
    return particle_inv_mass[i]


@wp.func
def add_particle_delta(i: int, dx: wp.vec3, particle_dx: wp.array(dtype=wp.vec3),
                       particle_cnt: wp.array(dtype=float)):
    wp.atomic_add(particle_dx, i, dx)
    wp.atomic_add(particle_cnt, i, 1.0)


@wp.func
def solve_distance(
    i: int,
    j: int,
    rest: float,
    ke: float,
    kd: float,
    dt: float,
    relax: float,
    particle_q: wp.array(dtype=wp.vec3),
    particle_q_prev: wp.array(dtype=wp.vec3),
    particle_inv_mass: wp.array(dtype=float),
    particle_flags: wp.array(dtype=wp.int32),
    particle_mask: wp.array(dtype=wp.int32),
    particle_dx: wp.array(dtype=wp.vec3),
    particle_cnt: wp.array(dtype=float),
    lam: wp.array(dtype=float),
    lam_out: wp.array(dtype=float),
    li: int,
):
    """Compliant distance constraint (compliance ``1/ke``, rigid when ke <= 0; damping ``kd``);
    ``lam[li]`` accumulates its Lagrange multiplier over the step's iterations (XPBD), this
    iteration's increment added to ``lam_out[li]`` (``lam`` or a copy of it)."""
    if i < 0 or j < 0:
        return
    wi = particle_inv_mass_of(i, particle_inv_mass, particle_flags, particle_mask)
    wj = particle_inv_mass_of(j, particle_inv_mass, particle_flags, particle_mask)
    w = wi + wj
    if w == 0.0:
        return
    d = particle_q[i] - particle_q[j]
    L = wp.length(d)
    if L < 1.0e-9:
        return
    n = d / L
    C = L - rest
    alpha = float(0.0)
    gamma = float(0.0)
    if ke > 0.0:
        alpha = 1.0 / (ke * dt * dt)
        gamma = alpha * kd * dt
    vrel = wp.dot(n, (particle_q[i] - particle_q_prev[i]) - (particle_q[j] - particle_q_prev[j]))
    lm = lam[li]
    dl = (-C - alpha * lm - gamma * vrel) / ((1.0 + gamma) * w + alpha) * relax
    wp.atomic_add(lam_out, li, dl)
    add_particle_delta(i, n * (dl * wi), particle_dx, particle_cnt)
    add_particle_delta(j, n * (-dl * wj), particle_dx, particle_cnt)


@wp.func
def particle_pair_sums(
    i: int,
    xi: wp.vec3,
    ri: float,
    wi: float,
    wi_world: int,
    dxi: wp.vec3,
    grid: wp.uint64,
    max_radius: float,
    soft_relaxation: float,
    particle_mu: float,
    particle_q: wp.array(dtype=wp.vec3),
    particle_q_prev: wp.array(dtype=wp.vec3),
    particle_radius: wp.array(dtype=float),
    particle_inv_mass: wp.array(dtype=float),
    particle_flags: wp.array(dtype=wp.int32),
    particle_world: wp.array(dtype=wp.int32),
    particle_mask: wp.array(dtype=wp.int32),
    particle_self: wp.array(dtype=wp.int32),
):
    """Summed contact corrections of particle ``i`` against its hash-grid neighbours, and their
    count (a function of its own for the adjoint, see :func:`rigid_patch_sums`)."""
    acc = wp.vec3(0.0)
    cnt = float(0.0)
    # a ``for`` over the query (not ``while hash_grid_query_next``): the adjoint replays it
    for j in wp.hash_grid_query(grid, xi, ri + max_radius):
        if j != i and particle_self[j] != 0:
            wj_world = particle_world[j]
            if wi_world == wj_world or wi_world < 0 or wj_world < 0:
                if (particle_flags[j] & PARTICLE_ACTIVE) != 0:
                    dvec = xi - particle_q[j]
                    dist = wp.length(dvec)
                    pen = dist - ri - particle_radius[j]
                    if pen < 0.0 and dist > 1.0e-9:
                        n = dvec / dist
                        wj = particle_inv_mass_of(j, particle_inv_mass, particle_flags, particle_mask)
                        w = wi + wj
                        dl = -pen / w * soft_relaxation
                        P = n * dl
                        dp = dxi - (particle_q[j] - particle_q_prev[j])
                        dpt = dp - n * wp.dot(n, dp)
                        lt = wp.length(dpt)
                        if lt > 1.0e-12 and particle_mu > 0.0:
                            P = P - (dpt / lt) * wp.min(lt / w, particle_mu * dl)
                        acc = acc + P * wi
                        cnt = cnt + 1.0
    return acc, cnt


@wp.func
def solve_aux_item(
    k: int,
    dt: float,
    soft_max: int,
    particle_count: int,
    spring_count: int,
    tri_count: int,
    edge_count: int,
    # soft contacts
    soft_count: wp.array(dtype=wp.int32),
    sc_particle: wp.array(dtype=wp.int32),
    sc_shape: wp.array(dtype=wp.int32),
    sc_body_pos: wp.array(dtype=wp.vec3),
    sc_normal: wp.array(dtype=wp.vec3),
    soft_relaxation: float,
    soft_mu: float,
    # shapes and bodies
    shape_body: wp.array(dtype=wp.int32),
    shape_mu: wp.array(dtype=float),
    body_q: wp.array(dtype=wp.transform),
    body_q_prev: wp.array(dtype=wp.transform),
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    body_flags: wp.array(dtype=wp.int32),
    body_mask: wp.array(dtype=wp.int32),
    # particles
    grid: wp.uint64,
    use_grid: int,
    particle_q: wp.array(dtype=wp.vec3),
    particle_q_prev: wp.array(dtype=wp.vec3),
    particle_radius: wp.array(dtype=float),
    particle_inv_mass: wp.array(dtype=float),
    particle_flags: wp.array(dtype=wp.int32),
    particle_world: wp.array(dtype=wp.int32),
    particle_mask: wp.array(dtype=wp.int32),
    particle_mu: float,
    max_radius: float,
    particle_self: wp.array(dtype=wp.int32),
    # springs, triangles (as edge distances), bending edges
    spring_indices: wp.array(dtype=wp.int32),
    spring_rest: wp.array(dtype=float),
    spring_ke: wp.array(dtype=float),
    spring_kd: wp.array(dtype=float),
    tri_indices: wp.array2d(dtype=wp.int32),
    tri_rest: wp.array(dtype=wp.vec3),
    tri_ke: wp.array(dtype=wp.vec3),
    edge_indices: wp.array2d(dtype=wp.int32),
    edge_rest: wp.array(dtype=float),
    edge_ke: wp.array(dtype=float),
    soft_body_relaxation: float,
    soft_lambda: wp.array(dtype=float),
    soft_lambda_out: wp.array(dtype=float),
    # accumulators
    body_dx: wp.array(dtype=wp.vec3),
    body_dth: wp.array(dtype=wp.vec3),
    body_cnt: wp.array(dtype=float),
    particle_dx: wp.array(dtype=wp.vec3),
    particle_cnt: wp.array(dtype=float),
):
    """Item ``k`` of the non-rigid part of :func:`solve_contacts_kernel` (particle-shape and
    particle-particle contacts, springs, cloth triangles, bending edges)."""
    # ---------------------------------------------------------------- particle-shape contacts
    if k < soft_max:
        if k >= soft_count[0]:
            return
        i = sc_particle[k]
        s = sc_shape[k]
        if i < 0 or s < 0:
            return
        wi = particle_inv_mass_of(i, particle_inv_mass, particle_flags, particle_mask)
        b, X, com = contact_body(s, shape_body, body_q, body_com)
        mb = body_inv_mass_of(b, body_inv_mass, body_flags, body_mask)
        if wi == 0.0 and mb == 0.0:
            return
        Ib = body_inv_inertia_of(b, mb, body_inv_inertia)
        n = sc_normal[k]
        if b >= 0:
            n = wp.quat_rotate(wp.transform_get_rotation(X), wp.quat_rotate_inv(
                wp.transform_get_rotation(body_q_prev[b]), n))
        surf = wp.transform_point(X, sc_body_pos[k])
        x = particle_q[i]
        d = wp.dot(n, x - surf) - particle_radius[i]
        if d >= 0.0:
            return
        qb = wp.transform_get_rotation(X)
        xb = wp.transform_point(X, com)
        rb = surf - xb
        w = wi + w_lin(mb, qb, Ib, rb, n)
        if w <= 0.0:
            return
        dl = -d / w * soft_relaxation
        P = n * dl
        Xp = X
        if b >= 0:
            Xp = body_q_prev[b]
        dp = (x - particle_q_prev[i]) - (surf - wp.transform_point(Xp, sc_body_pos[k]))
        dpt = dp - n * wp.dot(n, dp)
        lt = wp.length(dpt)
        mu = 0.5 * (soft_mu + shape_mu[s])
        if lt > 1.0e-12 and mu > 0.0:
            t = dpt / lt
            wt = wi + w_lin(mb, qb, Ib, rb, t)
            P = P - t * wp.min(lt / wt, mu * dl)
        if wi > 0.0:
            add_particle_delta(i, P * wi, particle_dx, particle_cnt)
        if mb > 0.0:
            dxb, dthb = lin_step(mb, qb, Ib, rb, -P)
            add_body_delta(b, dxb, dthb, body_dx, body_dth)
            wp.atomic_add(body_cnt, b, 1.0)
        return
    k = k - soft_max
    # ---------------------------------------------------------------- particle-particle contacts
    if k < particle_count:
        if use_grid == 0:
            return
        i = k
        if particle_self[i] == 0:
            return
        wi = particle_inv_mass_of(i, particle_inv_mass, particle_flags, particle_mask)
        if wi == 0.0:
            return
        xi = particle_q[i]
        ri = particle_radius[i]
        wi_world = particle_world[i]
        dxi = xi - particle_q_prev[i]
        acc, cnt = particle_pair_sums(
            i, xi, ri, wi, wi_world, dxi, grid, max_radius, soft_relaxation, particle_mu, particle_q,
            particle_q_prev, particle_radius, particle_inv_mass, particle_flags, particle_world, particle_mask,
            particle_self,
        )
        if cnt > 0.0:
            wp.atomic_add(particle_dx, i, acc)
            wp.atomic_add(particle_cnt, i, cnt)
        return
    k = k - particle_count
    # ---------------------------------------------------------------- springs
    if k < spring_count:
        solve_distance(spring_indices[2 * k], spring_indices[2 * k + 1], spring_rest[k], spring_ke[k],
                       spring_kd[k], dt, soft_body_relaxation, particle_q, particle_q_prev, particle_inv_mass,
                       particle_flags, particle_mask, particle_dx, particle_cnt, soft_lambda, soft_lambda_out, k)
        return
    k = k - spring_count
    # ---------------------------------------------------------------- cloth triangles (edge distances)
    if k < tri_count:
        a = tri_indices[k, 0]
        b2 = tri_indices[k, 1]
        c2 = tri_indices[k, 2]
        trest = tri_rest[k]
        tke = tri_ke[k]
        base = spring_count + 3 * k
        solve_distance(a, b2, trest[0], tke[0], 0.0, dt, soft_body_relaxation, particle_q, particle_q_prev,
                       particle_inv_mass, particle_flags, particle_mask, particle_dx, particle_cnt, soft_lambda,
                       soft_lambda_out, base)
        solve_distance(b2, c2, trest[1], tke[1], 0.0, dt, soft_body_relaxation, particle_q, particle_q_prev,
                       particle_inv_mass, particle_flags, particle_mask, particle_dx, particle_cnt, soft_lambda,
                       soft_lambda_out, base + 1)
        solve_distance(c2, a, trest[2], tke[2], 0.0, dt, soft_body_relaxation, particle_q, particle_q_prev,
                       particle_inv_mass, particle_flags, particle_mask, particle_dx, particle_cnt, soft_lambda,
                       soft_lambda_out, base + 2)
        return
    k = k - tri_count
    # ---------------------------------------------------------------- bending (opposite-vertex distance)
    if k < edge_count:
        eke = edge_ke[k]
        if eke > 0.0:
            solve_distance(edge_indices[k, 0], edge_indices[k, 1], edge_rest[k], eke, 0.0, dt,
                           soft_body_relaxation, particle_q, particle_q_prev, particle_inv_mass, particle_flags,
                           particle_mask, particle_dx, particle_cnt, soft_lambda, soft_lambda_out,
                           spring_count + 3 * tri_count + k)



@wp.struct
class ContactArrays:
    """The array arguments of :func:`solve_contacts_kernel` (one struct argument packs much faster
    than dozens of array arguments on the CPU; the solver caches one per argument set)."""

    rigid_count: wp.array(dtype=wp.int32)
    rc_shape0: wp.array(dtype=wp.int32)
    rc_shape1: wp.array(dtype=wp.int32)
    rc_point0: wp.array(dtype=wp.vec3)
    rc_point1: wp.array(dtype=wp.vec3)
    rc_normal: wp.array(dtype=wp.vec3)
    rc_margin0: wp.array(dtype=float)
    rc_margin1: wp.array(dtype=float)
    contact_lambda: wp.array(dtype=float)
    contact_impulse: wp.array(dtype=wp.vec3)
    contact_lambda_out: wp.array(dtype=float)
    contact_impulse_out: wp.array(dtype=wp.vec3)
    soft_count: wp.array(dtype=wp.int32)
    sc_particle: wp.array(dtype=wp.int32)
    sc_shape: wp.array(dtype=wp.int32)
    sc_body_pos: wp.array(dtype=wp.vec3)
    sc_normal: wp.array(dtype=wp.vec3)
    shape_body: wp.array(dtype=wp.int32)
    shape_mu: wp.array(dtype=float)
    shape_mu_torsional: wp.array(dtype=float)
    shape_mu_rolling: wp.array(dtype=float)
    body_q: wp.array(dtype=wp.transform)
    body_q_prev: wp.array(dtype=wp.transform)
    body_com: wp.array(dtype=wp.vec3)
    body_inv_mass: wp.array(dtype=float)
    body_inv_inertia: wp.array(dtype=wp.mat33)
    body_flags: wp.array(dtype=wp.int32)
    body_mask: wp.array(dtype=wp.int32)
    particle_q: wp.array(dtype=wp.vec3)
    particle_q_prev: wp.array(dtype=wp.vec3)
    particle_radius: wp.array(dtype=float)
    particle_inv_mass: wp.array(dtype=float)
    particle_flags: wp.array(dtype=wp.int32)
    particle_world: wp.array(dtype=wp.int32)
    particle_mask: wp.array(dtype=wp.int32)
    particle_self: wp.array(dtype=wp.int32)
    spring_indices: wp.array(dtype=wp.int32)
    spring_rest: wp.array(dtype=float)
    spring_ke: wp.array(dtype=float)
    spring_kd: wp.array(dtype=float)
    tri_indices: wp.array2d(dtype=wp.int32)
    tri_rest: wp.array(dtype=wp.vec3)
    tri_ke: wp.array(dtype=wp.vec3)
    edge_indices: wp.array2d(dtype=wp.int32)
    edge_rest: wp.array(dtype=float)
    edge_ke: wp.array(dtype=float)
    soft_lambda: wp.array(dtype=float)
    soft_lambda_out: wp.array(dtype=float)
    body_dx: wp.array(dtype=wp.vec3)
    body_dth: wp.array(dtype=wp.vec3)
    body_cnt: wp.array(dtype=float)
    particle_dx: wp.array(dtype=wp.vec3)
    particle_cnt: wp.array(dtype=float)


@wp.kernel
def solve_contacts_kernel(
    dt: float,
    rigid_max: int,
    soft_max: int,
    particle_count: int,
    spring_count: int,
    tri_count: int,
    edge_count: int,
    rigid_relaxation: float,
    soft_relaxation: float,
    soft_mu: float,
    grid: wp.uint64,
    use_grid: int,
    particle_mu: float,
    max_radius: float,
    soft_body_relaxation: float,
    stride: int,
    A: ContactArrays,
):
    rigid_count = A.rigid_count
    rc_shape0 = A.rc_shape0
    rc_shape1 = A.rc_shape1
    rc_point0 = A.rc_point0
    rc_point1 = A.rc_point1
    rc_normal = A.rc_normal
    rc_margin0 = A.rc_margin0
    rc_margin1 = A.rc_margin1
    contact_lambda = A.contact_lambda
    contact_impulse = A.contact_impulse
    contact_lambda_out = A.contact_lambda_out
    contact_impulse_out = A.contact_impulse_out
    soft_count = A.soft_count
    sc_particle = A.sc_particle
    sc_shape = A.sc_shape
    sc_body_pos = A.sc_body_pos
    sc_normal = A.sc_normal
    shape_body = A.shape_body
    shape_mu = A.shape_mu
    shape_mu_torsional = A.shape_mu_torsional
    shape_mu_rolling = A.shape_mu_rolling
    body_q = A.body_q
    body_q_prev = A.body_q_prev
    body_com = A.body_com
    body_inv_mass = A.body_inv_mass
    body_inv_inertia = A.body_inv_inertia
    body_flags = A.body_flags
    body_mask = A.body_mask
    particle_q = A.particle_q
    particle_q_prev = A.particle_q_prev
    particle_radius = A.particle_radius
    particle_inv_mass = A.particle_inv_mass
    particle_flags = A.particle_flags
    particle_world = A.particle_world
    particle_mask = A.particle_mask
    particle_self = A.particle_self
    spring_indices = A.spring_indices
    spring_rest = A.spring_rest
    spring_ke = A.spring_ke
    spring_kd = A.spring_kd
    tri_indices = A.tri_indices
    tri_rest = A.tri_rest
    tri_ke = A.tri_ke
    edge_indices = A.edge_indices
    edge_rest = A.edge_rest
    edge_ke = A.edge_ke
    soft_lambda = A.soft_lambda
    soft_lambda_out = A.soft_lambda_out
    body_dx = A.body_dx
    body_dth = A.body_dth
    body_cnt = A.body_cnt
    particle_dx = A.particle_dx
    particle_cnt = A.particle_cnt
    # grid-stride loops (on the CPU one thread walks every item): the active rigid contacts, then
    # the items past the rigid slots (the unused slots are skipped)
    tid = wp.tid()
    total = rigid_max + soft_max + particle_count + spring_count + tri_count + edge_count
    rc = wp.min(rigid_count[0], rigid_max)
    for item in range(tid, rc, stride):
        # the thread meeting a patch's first contact solves the whole patch
        end = patch_end(item, rc, rc_shape0, rc_shape1, rc_normal)
        if end > item:
            solve_rigid_patch(
                item, end, rc_shape0, rc_shape1, rc_point0, rc_point1, rc_normal, rc_margin0, rc_margin1,
                shape_body, shape_mu, shape_mu_torsional, shape_mu_rolling, body_q, body_q_prev, body_com,
                body_inv_mass, body_inv_inertia, body_flags, body_mask, rigid_relaxation, contact_lambda,
                contact_impulse, contact_lambda_out, contact_impulse_out, body_dx, body_dth, body_cnt,
            )
    for item in range(rigid_max + ((tid - rigid_max) % stride + stride) % stride, total, stride):
        solve_aux_item(
            item - rigid_max, dt, soft_max, particle_count, spring_count, tri_count, edge_count, soft_count,
            sc_particle, sc_shape, sc_body_pos, sc_normal, soft_relaxation, soft_mu, shape_body, shape_mu, body_q,
            body_q_prev, body_com, body_inv_mass, body_inv_inertia, body_flags, body_mask, grid, use_grid,
            particle_q, particle_q_prev, particle_radius, particle_inv_mass, particle_flags, particle_world,
            particle_mask, particle_mu, max_radius, particle_self, spring_indices, spring_rest, spring_ke,
            spring_kd, tri_indices, tri_rest, tri_ke, edge_indices, edge_rest, edge_ke, soft_body_relaxation,
            soft_lambda, soft_lambda_out, body_dx, body_dth, body_cnt, particle_dx, particle_cnt,
        )


# --------------------------------------------------------------------------- untaped contact solve
# :func:`solve_contacts_fast_kernel` computes what :func:`solve_contacts_kernel` computes, bit for
# bit, with less work per contact: the bodies of a patch (pose, inverse, COM, masses, inertias,
# previous pose) are read once per patch instead of once per contact and pass, and each contact's
# frame (normal correction, slip, effective mass, contact point) is computed once per iteration
# and kept in scratch arrays (``ContactScratch``) for the apply pass instead of being recomputed.
# Every value is the same expression of the same inputs as in the general kernel. It has no adjoint
# (a loop's values carried into a later loop would be wrong in Warp's adjoint, see the module
# docstring): taped steps launch :func:`solve_contacts_kernel` from :mod:`.kernels_grad`.


@wp.struct
class PatchBody:
    """One side of a patch: what :func:`rigid_contact_frame` reads of a body, read once."""

    b: int
    X: wp.transform
    X_inv: wp.transform
    X_prev: wp.transform
    com_w: wp.vec3
    q: wp.quat
    m: float
    I: wp.mat33


@wp.func
def patch_body(
    s: int,
    shape_body: wp.array(dtype=wp.int32),
    body_q: wp.array(dtype=wp.transform),
    body_q_prev: wp.array(dtype=wp.transform),
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    body_flags: wp.array(dtype=wp.int32),
    body_mask: wp.array(dtype=wp.int32),
):
    pb = PatchBody()
    b, X, com = contact_body(s, shape_body, body_q, body_com)
    pb.b = b
    pb.X = X
    pb.X_inv = wp.transform_inverse(X)
    pb.X_prev = X
    if b >= 0:
        pb.X_prev = body_q_prev[b]
    pb.com_w = wp.transform_point(X, com)
    pb.q = wp.transform_get_rotation(X)
    pb.m = body_inv_mass_of(b, body_inv_mass, body_flags, body_mask)
    pb.I = body_inv_inertia_of(b, pb.m, body_inv_inertia)
    return pb


@wp.func
def rigid_contact_frame_fast(
    c: int,
    point0: wp.array(dtype=wp.vec3),
    point1: wp.array(dtype=wp.vec3),
    normal: wp.array(dtype=wp.vec3),
    margin0: wp.array(dtype=float),
    margin1: wp.array(dtype=float),
    B0: PatchBody,
    B1: PatchBody,
    relaxation: float,
    area: int,
):
    """:func:`rigid_contact_frame` of contact ``c`` of a patch whose bodies are ``B0``, ``B1`` (both
    shapes valid, at least one body movable: checked per patch)."""
    dl = float(0.0)
    wt = float(0.0)
    slip = wp.vec3(0.0)
    n = normal[c]
    th0 = margin0[c]
    th1 = margin1[c]
    s0w = wp.transform_point(B0.X, point0[c]) + n * th0
    s1w = wp.transform_point(B1.X, point1[c]) - n * th1
    xw = s1w
    d = wp.dot(n, s1w - s0w)
    if d >= 0.0:
        return dl, slip, wt, xw
    x0 = B0.com_w
    x1 = B1.com_w
    r0 = s0w - x0
    r1 = s1w - x1
    w = w_lin(B0.m, B0.q, B0.I, r0, n) + w_lin(B1.m, B1.q, B1.I, r1, n)
    if w <= 0.0:
        return dl, slip, wt, xw
    dl = -d / w * relaxation
    if area != 0:
        r0 = r0 - n * wp.dot(n, r0)
        r1 = r1 - n * wp.dot(n, r1)
    p0 = wp.transform_point(B0.X_inv, x0 + r0)
    p1 = wp.transform_point(B1.X_inv, x1 + r1)
    dp = (x1 + r1 - wp.transform_point(B1.X_prev, p1)) - (x0 + r0 - wp.transform_point(B0.X_prev, p0))
    dpt = dp - n * wp.dot(n, dp)
    l = wp.length(dpt)
    if l > 1.0e-12:
        t = dpt / l
        wt = w_lin(B0.m, B0.q, B0.I, r0, t) + w_lin(B1.m, B1.q, B1.I, r1, t)
        if wt > 0.0:
            slip = dpt
        else:
            wt = 0.0
    return dl, slip, wt, xw


@wp.func
def patch_touches(
    start: int,
    end: int,
    shape0: wp.array(dtype=wp.int32),
    shape1: wp.array(dtype=wp.int32),
    point0: wp.array(dtype=wp.vec3),
    point1: wp.array(dtype=wp.vec3),
    normal: wp.array(dtype=wp.vec3),
    margin0: wp.array(dtype=float),
    margin1: wp.array(dtype=float),
    shape_body: wp.array(dtype=wp.int32),
    body_q: wp.array(dtype=wp.transform),
    body_com: wp.array(dtype=wp.vec3),
):
    """Whether some contact of the patch penetrates now (the separation test of
    :func:`rigid_contact_frame`, the same expression): a patch without one changes nothing, so the
    fast solve skips it (most contacts of a pile are speculative ones, within the gap)."""
    s0 = shape0[start]
    s1 = shape1[start]
    if s0 < 0 or s1 < 0:
        return False
    b0, X0, com0 = contact_body(s0, shape_body, body_q, body_com)
    b1, X1, com1 = contact_body(s1, shape_body, body_q, body_com)
    for c in range(start, end):
        n = normal[c]
        s0w = wp.transform_point(X0, point0[c]) + n * margin0[c]
        s1w = wp.transform_point(X1, point1[c]) - n * margin1[c]
        if wp.dot(n, s1w - s0w) < 0.0:
            return True
    return False


@wp.struct
class ContactScratch:
    """Per-contact values of one iteration of :func:`solve_contacts_fast_kernel` (rigid_max each)."""

    dl: wp.array(dtype=float)
    slip: wp.array(dtype=wp.vec3)
    wt: wp.array(dtype=float)
    xw: wp.array(dtype=wp.vec3)


@wp.func
def solve_rigid_patch_fast(
    start: int,
    end: int,
    shape0: wp.array(dtype=wp.int32),
    shape1: wp.array(dtype=wp.int32),
    point0: wp.array(dtype=wp.vec3),
    point1: wp.array(dtype=wp.vec3),
    normal: wp.array(dtype=wp.vec3),
    margin0: wp.array(dtype=float),
    margin1: wp.array(dtype=float),
    shape_body: wp.array(dtype=wp.int32),
    shape_mu: wp.array(dtype=float),
    shape_mu_torsional: wp.array(dtype=float),
    shape_mu_rolling: wp.array(dtype=float),
    body_q: wp.array(dtype=wp.transform),
    body_q_prev: wp.array(dtype=wp.transform),
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    body_flags: wp.array(dtype=wp.int32),
    body_mask: wp.array(dtype=wp.int32),
    relaxation: float,
    contact_lambda: wp.array(dtype=float),
    contact_impulse: wp.array(dtype=wp.vec3),
    body_dx: wp.array(dtype=wp.vec3),
    body_dth: wp.array(dtype=wp.vec3),
    body_cnt: wp.array(dtype=float),
    S: ContactScratch,
):
    """:func:`solve_rigid_patch` (same values; in place: the multipliers and impulses are updated in
    ``contact_lambda`` / ``contact_impulse``)."""
    s0 = shape0[start]
    s1 = shape1[start]
    if s0 < 0 or s1 < 0:
        return
    mu = 0.5 * (shape_mu[s0] + shape_mu[s1])
    area = patch_spans_area(start, end, shape0, shape1, point0, point1, normal, margin0, margin1, contact_lambda, 0,
                            shape_body, body_q)
    B0 = patch_body(s0, shape_body, body_q, body_q_prev, body_com, body_inv_mass, body_inv_inertia, body_flags,
                    body_mask)
    B1 = patch_body(s1, shape_body, body_q, body_q_prev, body_com, body_inv_mass, body_inv_inertia, body_flags,
                    body_mask)
    if B0.m == 0.0 and B1.m == 0.0:
        return  # rigid_contact_frame: no correction for any contact of the patch
    b0 = B0.b
    b1 = B1.b
    m0 = B0.m
    m1 = B1.m
    I0 = B0.I
    I1 = B1.I
    q0 = B0.q
    q1 = B1.q
    x0 = B0.com_w
    x1 = B1.com_w
    X0 = B0.X
    X1 = B1.X
    n = normal[start]
    # pass 1 (rigid_patch_sums), keeping each contact's frame for pass 2
    k = float(0.0)
    want = float(0.0)
    budget = float(0.0)
    slip_sum = wp.vec3(0.0)
    x_sum = wp.vec3(0.0)
    for c in range(start, end):
        dl, slip, wt, xw = rigid_contact_frame_fast(c, point0, point1, normal, margin0, margin1, B0, B1, relaxation,
                                                    area)
        S.dl[c] = dl
        S.slip[c] = slip
        S.wt[c] = wt
        S.xw[c] = xw
        if dl > 0.0:
            nc = normal[c]
            P = contact_impulse[c]
            budget += mu * (contact_lambda[c] + dl) - wp.length(P - nc * wp.dot(nc, P))
            k += 1.0
            slip_sum += slip
            x_sum += xw
            if wt > 0.0:
                want += wp.length(slip) / wt
    if k == 0.0:
        return
    Pf = wp.vec3(0.0)
    Lf = wp.vec3(0.0)
    xc = x_sum / k
    tw_left = float(-1.0)
    if area != 0:
        B = budget / k
        Sm = slip_sum / k
        ls = wp.length(Sm)
        if ls > 1.0e-12 and B > 0.0:
            t = Sm / ls
            rc0 = xc - x0
            rc1 = xc - x1
            rc0 = rc0 - n * wp.dot(n, rc0)
            rc1 = rc1 - n * wp.dot(n, rc1)
            wl = w_lin(m0, q0, I0, rc0, t) + w_lin(m1, q1, I1, rc1, t)
            if wl > 0.0:
                Pf = t * (-wp.min(ls / wl, B))
        q0p = q0
        q1p = q1
        if b0 >= 0:
            q0p = wp.transform_get_rotation(B0.X_prev)
        if b1 >= 0:
            q1p = wp.transform_get_rotation(B1.X_prev)
        tw = wp.dot(rotation_vector(q1, q1p) - rotation_vector(q0, q0p), n)
        wa = w_ang(q0, I0, n) + w_ang(q1, I1, n)
        tw_left = float(0.0)
        if wa > 0.0 and wp.abs(tw) > 1.0e-12:
            rad = patch_radius_sum(start, end, point1, X1, xc) / float(end - start)
            Lmax = wp.max(B - wp.length(Pf), 0.0) * rad
            lmag = wp.min(wp.abs(tw) / wa, Lmax)
            Lf = n * (-wp.sign(tw) * lmag)
            tw_left = wp.abs(tw) / wa - lmag
    scale = float(0.0)
    if want > 0.0 and budget > 0.0:
        scale = wp.min(budget / want, 1.0)
    dxf1 = wp.vec3(0.0)
    dthf1 = wp.vec3(0.0)
    dxf0 = wp.vec3(0.0)
    dthf0 = wp.vec3(0.0)
    if area != 0:
        dxf1, dthf1 = lin_step(m1, q1, I1, xc - x1, Pf)
        dxf0, dthf0 = lin_step(m0, q0, I0, xc - x0, -Pf)
        dthf1 = dthf1 + ang_step(q1, I1, Lf)
        dthf0 = dthf0 - ang_step(q0, I0, Lf)
    mu_t = float(0.0)
    mu_r = float(0.0)
    if shape_mu_torsional.shape[0] > 0:
        mu_t = 0.5 * (shape_mu_torsional[s0] + shape_mu_torsional[s1])
    if shape_mu_rolling.shape[0] > 0:
        mu_r = 0.5 * (shape_mu_rolling[s0] + shape_mu_rolling[s1])
    # pass 2: apply (poses are unchanged until apply_deltas_kernel)
    for c in range(start, end):
        dl = S.dl[c]
        if dl > 0.0:
            slip = S.slip[c]
            wt = S.wt[c]
            xw = S.xw[c]
            nc = normal[c]
            r0 = wp.transform_point(X0, point0[c]) + nc * margin0[c] - x0
            r1 = xw - x1
            P = nc * dl
            Pc = P
            if area == 0 and wt > 0.0:
                Pc = P - slip * (scale / wt)
            dx1, dth1 = lin_step(m1, q1, I1, r1, Pc)
            dx0, dth0 = lin_step(m0, q0, I0, r0, -Pc)
            if area != 0:
                Pc = P + Pf
                dx1 = dx1 + dxf1
                dth1 = dth1 + dthf1
                dx0 = dx0 + dxf0
                dth0 = dth0 + dthf0
            if mu_t > 0.0 or mu_r > 0.0:
                q0p = q0
                q1p = q1
                if b0 >= 0:
                    q0p = wp.transform_get_rotation(B0.X_prev)
                if b1 >= 0:
                    q1p = wp.transform_get_rotation(B1.X_prev)
                rel = rotation_vector(q1, q1p) - rotation_vector(q0, q0p)
                tw = wp.dot(rel, nc)
                L = wp.vec3(0.0)
                if mu_t > 0.0 and wp.abs(tw) > 1.0e-12:
                    wa = w_ang(q0, I0, nc) + w_ang(q1, I1, nc)
                    if wa > 0.0:
                        lim = wp.abs(tw) / wa
                        if tw_left >= 0.0:
                            lim = tw_left
                        L = L - nc * (wp.sign(tw) * wp.min(lim, mu_t * dl))
                roll = rel - nc * tw
                lr = wp.length(roll)
                if mu_r > 0.0 and lr > 1.0e-12:
                    a = roll / lr
                    wa = w_ang(q0, I0, a) + w_ang(q1, I1, a)
                    if wa > 0.0:
                        L = L - a * wp.min(lr / wa, mu_r * dl)
                dth1 = dth1 + ang_step(q1, I1, L)
                dth0 = dth0 - ang_step(q0, I0, L)
            contact_lambda[c] = contact_lambda[c] + dl
            contact_impulse[c] = contact_impulse[c] + Pc
            if m1 > 0.0:
                add_body_delta(b1, dx1, dth1, body_dx, body_dth)
                wp.atomic_add(body_cnt, b1, 1.0)
            if m0 > 0.0:
                add_body_delta(b0, dx0, dth0, body_dx, body_dth)
                wp.atomic_add(body_cnt, b0, 1.0)


@wp.kernel
def solve_contacts_fast_kernel(
    dt: float,
    rigid_max: int,
    soft_max: int,
    particle_count: int,
    spring_count: int,
    tri_count: int,
    edge_count: int,
    rigid_relaxation: float,
    soft_relaxation: float,
    soft_mu: float,
    grid: wp.uint64,
    use_grid: int,
    particle_mu: float,
    max_radius: float,
    soft_body_relaxation: float,
    stride: int,
    A: ContactArrays,
    S: ContactScratch,
):
    """:func:`solve_contacts_kernel` for untaped steps (the same values; see above). Requires
    ``contact_lambda_out is contact_lambda`` and ``contact_impulse_out is contact_impulse``."""
    tid = wp.tid()
    total = rigid_max + soft_max + particle_count + spring_count + tri_count + edge_count
    rc = wp.min(A.rigid_count[0], rigid_max)
    for item in range(tid, rc, stride):
        end = patch_end(item, rc, A.rc_shape0, A.rc_shape1, A.rc_normal)
        if end > item and patch_touches(item, end, A.rc_shape0, A.rc_shape1, A.rc_point0, A.rc_point1, A.rc_normal,
                                        A.rc_margin0, A.rc_margin1, A.shape_body, A.body_q, A.body_com):
            solve_rigid_patch_fast(
                item, end, A.rc_shape0, A.rc_shape1, A.rc_point0, A.rc_point1, A.rc_normal, A.rc_margin0,
                A.rc_margin1, A.shape_body, A.shape_mu, A.shape_mu_torsional, A.shape_mu_rolling, A.body_q,
                A.body_q_prev, A.body_com, A.body_inv_mass, A.body_inv_inertia, A.body_flags, A.body_mask,
                rigid_relaxation, A.contact_lambda, A.contact_impulse, A.body_dx, A.body_dth, A.body_cnt, S,
            )
    for item in range(rigid_max + ((tid - rigid_max) % stride + stride) % stride, total, stride):
        solve_aux_item(
            item - rigid_max, dt, soft_max, particle_count, spring_count, tri_count, edge_count, A.soft_count,
            A.sc_particle, A.sc_shape, A.sc_body_pos, A.sc_normal, soft_relaxation, soft_mu, A.shape_body,
            A.shape_mu, A.body_q, A.body_q_prev, A.body_com, A.body_inv_mass, A.body_inv_inertia, A.body_flags,
            A.body_mask, grid, use_grid, A.particle_q, A.particle_q_prev, A.particle_radius, A.particle_inv_mass,
            A.particle_flags, A.particle_world, A.particle_mask, particle_mu, max_radius, A.particle_self,
            A.spring_indices, A.spring_rest, A.spring_ke, A.spring_kd, A.tri_indices, A.tri_rest, A.tri_ke,
            A.edge_indices, A.edge_rest, A.edge_ke, soft_body_relaxation, A.soft_lambda, A.soft_lambda_out,
            A.body_dx, A.body_dth, A.body_cnt, A.particle_dx, A.particle_cnt,
        )


#: every argument of the pre-struct :func:`solve_contacts_kernel` signature, in order (the solver
#: builds its values in this order and moves the arrays into a :class:`ContactArrays`)
SOLVE_CONTACTS_ARG_NAMES = (
    "dt", "rigid_max", "soft_max", "particle_count", "spring_count", "tri_count", "edge_count", "rigid_count",
    "rc_shape0", "rc_shape1", "rc_point0", "rc_point1", "rc_normal", "rc_margin0", "rc_margin1",
    "rigid_relaxation", "contact_lambda", "contact_impulse", "contact_lambda_out", "contact_impulse_out",
    "soft_count", "sc_particle", "sc_shape", "sc_body_pos", "sc_normal", "soft_relaxation", "soft_mu", "shape_body",
    "shape_mu", "shape_mu_torsional",
    "shape_mu_rolling", "body_q", "body_q_prev", "body_com", "body_inv_mass", "body_inv_inertia", "body_flags",
    "body_mask", "grid", "use_grid", "particle_q", "particle_q_prev", "particle_radius", "particle_inv_mass",
    "particle_flags", "particle_world", "particle_mask", "particle_mu", "max_radius", "particle_self",
    "spring_indices", "spring_rest", "spring_ke", "spring_kd", "tri_indices", "tri_rest", "tri_ke", "edge_indices",
    "edge_rest", "edge_ke", "soft_body_relaxation", "soft_lambda", "soft_lambda_out", "stride", "body_dx",
    "body_dth", "body_cnt", "particle_dx", "particle_cnt",
)
CONTACT_ARRAY_FIELDS = frozenset(ContactArrays.vars.keys())


@wp.struct
class DeltaArrays:
    """The array arguments of :func:`apply_deltas_kernel` (see :class:`ContactArrays`)."""

    body_com: wp.array(dtype=wp.vec3)
    body_dx: wp.array(dtype=wp.vec3)
    body_dth: wp.array(dtype=wp.vec3)
    body_cnt: wp.array(dtype=float)
    particle_dx: wp.array(dtype=wp.vec3)
    particle_cnt: wp.array(dtype=float)
    body_q: wp.array(dtype=wp.transform)
    particle_q: wp.array(dtype=wp.vec3)
    body_corr_x: wp.array(dtype=wp.vec3)
    body_corr_th: wp.array(dtype=wp.vec3)
    particle_corr: wp.array(dtype=wp.vec3)
    count_out: wp.array(dtype=float)
    body_q_out: wp.array(dtype=wp.transform)
    particle_q_out: wp.array(dtype=wp.vec3)
    body_corr_x_out: wp.array(dtype=wp.vec3)
    body_corr_th_out: wp.array(dtype=wp.vec3)
    particle_corr_out: wp.array(dtype=wp.vec3)


@wp.kernel
def apply_deltas_kernel(
    body_count: int,
    particle_count: int,
    con_weighting: int,
    separate: int,
    A: DeltaArrays,
):
    """Apply the accumulated corrections (divided by the constraint count when weighting).

    ``separate == 0``: the ``*_out`` arrays are the inputs (updated in place) and the accumulators
    are zeroed for the next launch. ``separate != 0`` (taped): every entry of the ``*_out`` arrays is
    written (unchanged ones copied) and the accumulators, fresh per launch, are left as they are
    (the adjoint replays this launch from them)."""
    body_com = A.body_com
    body_dx = A.body_dx
    body_dth = A.body_dth
    body_cnt = A.body_cnt
    particle_dx = A.particle_dx
    particle_cnt = A.particle_cnt
    body_q = A.body_q
    particle_q = A.particle_q
    body_corr_x = A.body_corr_x
    body_corr_th = A.body_corr_th
    particle_corr = A.particle_corr
    count_out = A.count_out
    body_q_out = A.body_q_out
    particle_q_out = A.particle_q_out
    body_corr_x_out = A.body_corr_x_out
    body_corr_th_out = A.body_corr_th_out
    particle_corr_out = A.particle_corr_out
    tid = wp.tid()
    if tid < body_count:
        dx = body_dx[tid]
        dth = body_dth[tid]
        cnt = body_cnt[tid]
        if count_out.shape[0] > 0:
            count_out[tid] = cnt
        if con_weighting != 0 and cnt > 1.0:
            dx = dx / cnt
            dth = dth / cnt
        if wp.length_sq(dx) + wp.length_sq(dth) > 0.0:
            X = body_q[tid]
            com = body_com[tid]
            q = wp.transform_get_rotation(X)
            x_com = wp.transform_point(X, com) + dx
            q = rotate_by(q, dth)
            body_q_out[tid] = frame_of(x_com, q, com)
            body_corr_x_out[tid] = body_corr_x[tid] + dx
            body_corr_th_out[tid] = body_corr_th[tid] + dth
        elif separate != 0:
            body_q_out[tid] = body_q[tid]
            body_corr_x_out[tid] = body_corr_x[tid]
            body_corr_th_out[tid] = body_corr_th[tid]
        if separate == 0:
            body_dx[tid] = wp.vec3(0.0)
            body_dth[tid] = wp.vec3(0.0)
            body_cnt[tid] = 0.0
    if tid < particle_count:
        cnt = particle_cnt[tid]
        if cnt > 0.0:
            pdx = particle_dx[tid] / cnt
            particle_q_out[tid] = particle_q[tid] + pdx
            particle_corr_out[tid] = particle_corr[tid] + pdx
        elif separate != 0:
            particle_q_out[tid] = particle_q[tid]
            particle_corr_out[tid] = particle_corr[tid]
        if separate == 0:
            particle_dx[tid] = wp.vec3(0.0)
            particle_cnt[tid] = 0.0


#: the pre-struct :func:`apply_deltas_kernel` arguments, in order
APPLY_DELTAS_ARG_NAMES = (
    "body_count", "particle_count", "con_weighting", "separate", "body_com", "body_dx", "body_dth", "body_cnt",
    "particle_dx", "particle_cnt", "body_q", "particle_q", "body_corr_x", "body_corr_th", "particle_corr", "count_out",
    "body_q_out", "particle_q_out", "body_corr_x_out", "body_corr_th_out", "particle_corr_out",
)
DELTA_ARRAY_FIELDS = frozenset(DeltaArrays.vars.keys())


@wp.kernel
def update_velocities_kernel(
    body_count: int,
    particle_count: int,
    dt: float,
    body_inv_mass: wp.array(dtype=float),
    body_flags: wp.array(dtype=wp.int32),
    body_qd_prev: wp.array(dtype=wp.spatial_vector),
    body_corr_x: wp.array(dtype=wp.vec3),
    body_corr_th: wp.array(dtype=wp.vec3),
    particle_corr: wp.array(dtype=wp.vec3),
    particle_inv_mass: wp.array(dtype=float),
    particle_flags: wp.array(dtype=wp.int32),
    body_mask: wp.array(dtype=wp.int32),
    particle_mask: wp.array(dtype=wp.int32),
    body_qd: wp.array(dtype=wp.spatial_vector),
    particle_qd: wp.array(dtype=wp.vec3),
    body_qd_out: wp.array(dtype=wp.spatial_vector),
    particle_qd_out: wp.array(dtype=wp.vec3),
):
    """Velocities from the pose change over the step: predicted velocity (``body_qd``,
    ``particle_qd``) + total correction / dt, into ``*_out`` (the same arrays, or fresh ones).

    Equal to ``(x_end - x_start) / dt`` but without the cancellation error of subtracting two
    large float32 positions (free motion stays exact).
    """
    tid = wp.tid()
    if tid < body_count:
        if body_inv_mass_of(tid, body_inv_mass, body_flags, body_mask) == 0.0:
            body_qd_out[tid] = body_qd_prev[tid]
        else:
            qd = body_qd[tid]
            body_qd_out[tid] = wp.spatial_vector(wp.spatial_top(qd) + body_corr_x[tid] / dt,
                                                 wp.spatial_bottom(qd) + body_corr_th[tid] / dt)
    if tid < particle_count:
        if particle_inv_mass_of(tid, particle_inv_mass, particle_flags, particle_mask) > 0.0:
            particle_qd_out[tid] = particle_qd[tid] + particle_corr[tid] / dt
        else:
            particle_qd_out[tid] = particle_qd[tid]


@wp.func
def restitution_item(
    c: int,
    gravity_dt: float,
    rigid_count: wp.array(dtype=wp.int32),
    rc_shape0: wp.array(dtype=wp.int32),
    rc_shape1: wp.array(dtype=wp.int32),
    rc_point0: wp.array(dtype=wp.vec3),
    rc_point1: wp.array(dtype=wp.vec3),
    rc_normal: wp.array(dtype=wp.vec3),
    rc_margin0: wp.array(dtype=float),
    rc_margin1: wp.array(dtype=float),
    contact_lambda: wp.array(dtype=float),
    shape_body: wp.array(dtype=wp.int32),
    shape_restitution: wp.array(dtype=float),
    body_q: wp.array(dtype=wp.transform),
    body_q_prev: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    body_qd_prev: wp.array(dtype=wp.spatial_vector),
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    body_flags: wp.array(dtype=wp.int32),
    body_mask: wp.array(dtype=wp.int32),
    body_dv: wp.array(dtype=wp.vec3),
    body_dw: wp.array(dtype=wp.vec3),
    body_cnt: wp.array(dtype=float),
):
    if c >= rigid_count[0] or contact_lambda[c] <= 0.0:
        return
    s0 = rc_shape0[c]
    s1 = rc_shape1[c]
    e = 0.5 * (shape_restitution[s0] + shape_restitution[s1])
    if e <= 0.0:
        return
    b0, X0, com0 = contact_body(s0, shape_body, body_q, body_com)
    b1, X1, com1 = contact_body(s1, shape_body, body_q, body_com)
    m0 = body_inv_mass_of(b0, body_inv_mass, body_flags, body_mask)
    m1 = body_inv_mass_of(b1, body_inv_mass, body_flags, body_mask)
    I0 = body_inv_inertia_of(b0, m0, body_inv_inertia)
    I1 = body_inv_inertia_of(b1, m1, body_inv_inertia)
    n = rc_normal[c]
    s0w = wp.transform_point(X0, rc_point0[c]) + n * rc_margin0[c]
    s1w = wp.transform_point(X1, rc_point1[c]) - n * rc_margin1[c]
    x0 = wp.transform_point(X0, com0)
    x1 = wp.transform_point(X1, com1)
    r0 = s0w - x0
    r1 = s1w - x1
    v0 = wp.vec3(0.0)
    v1 = wp.vec3(0.0)
    v0p = wp.vec3(0.0)
    v1p = wp.vec3(0.0)
    if b0 >= 0:
        v0 = wp.spatial_top(body_qd[b0]) + wp.cross(wp.spatial_bottom(body_qd[b0]), r0)
        X0p = body_q_prev[b0]
        r0p = wp.transform_point(X0p, rc_point0[c]) - wp.transform_point(X0p, com0)
        v0p = wp.spatial_top(body_qd_prev[b0]) + wp.cross(wp.spatial_bottom(body_qd_prev[b0]), r0p)
    if b1 >= 0:
        v1 = wp.spatial_top(body_qd[b1]) + wp.cross(wp.spatial_bottom(body_qd[b1]), r1)
        X1p = body_q_prev[b1]
        r1p = wp.transform_point(X1p, rc_point1[c]) - wp.transform_point(X1p, com1)
        v1p = wp.spatial_top(body_qd_prev[b1]) + wp.cross(wp.spatial_bottom(body_qd_prev[b1]), r1p)
    vn_prev = wp.dot(n, v1p - v0p)
    if vn_prev > -2.0 * gravity_dt:
        return
    vn = wp.dot(n, v1 - v0)
    target = -e * vn_prev
    dv = target - vn
    if dv <= 0.0:
        return
    q0 = wp.transform_get_rotation(X0)
    q1 = wp.transform_get_rotation(X1)
    w = w_lin(m0, q0, I0, r0, n) + w_lin(m1, q1, I1, r1, n)
    if w <= 0.0:
        return
    p = n * (dv / w)
    if m1 > 0.0:
        a, b = lin_step(m1, q1, I1, r1, p)
        add_body_delta(b1, a, b, body_dv, body_dw)
        wp.atomic_add(body_cnt, b1, 1.0)
    if m0 > 0.0:
        a, b = lin_step(m0, q0, I0, r0, -p)
        add_body_delta(b0, a, b, body_dv, body_dw)
        wp.atomic_add(body_cnt, b0, 1.0)


@wp.kernel
def restitution_kernel(
    gravity_dt: float,
    rigid_count: wp.array(dtype=wp.int32),
    rc_shape0: wp.array(dtype=wp.int32),
    rc_shape1: wp.array(dtype=wp.int32),
    rc_point0: wp.array(dtype=wp.vec3),
    rc_point1: wp.array(dtype=wp.vec3),
    rc_normal: wp.array(dtype=wp.vec3),
    rc_margin0: wp.array(dtype=float),
    rc_margin1: wp.array(dtype=float),
    contact_lambda: wp.array(dtype=float),
    shape_body: wp.array(dtype=wp.int32),
    shape_restitution: wp.array(dtype=float),
    body_q: wp.array(dtype=wp.transform),
    body_q_prev: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    body_qd_prev: wp.array(dtype=wp.spatial_vector),
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    body_flags: wp.array(dtype=wp.int32),
    body_mask: wp.array(dtype=wp.int32),
    stride: int,
    body_dv: wp.array(dtype=wp.vec3),
    body_dw: wp.array(dtype=wp.vec3),
    body_cnt: wp.array(dtype=float),
):
    """Velocity-level restitution: the normal relative velocity of each contact that was active this
    step becomes ``-e`` times its value at the start of the step (approach faster than ``2 |g| dt``)."""
    # grid-stride over the active contacts (on the CPU one thread walks them all)
    n = wp.min(rigid_count[0], rc_shape0.shape[0])
    for c in range(wp.tid(), n, stride):
        restitution_item(
            c, gravity_dt, rigid_count, rc_shape0, rc_shape1, rc_point0, rc_point1, rc_normal, rc_margin0,
            rc_margin1, contact_lambda, shape_body, shape_restitution, body_q, body_q_prev, body_qd, body_qd_prev,
            body_com, body_inv_mass, body_inv_inertia, body_flags, body_mask, body_dv, body_dw, body_cnt,
        )


@wp.kernel
def apply_velocity_deltas_kernel(
    con_weighting: int,
    separate: int,
    body_dv: wp.array(dtype=wp.vec3),
    body_dw: wp.array(dtype=wp.vec3),
    body_cnt: wp.array(dtype=float),
    body_qd: wp.array(dtype=wp.spatial_vector),
    body_qd_out: wp.array(dtype=wp.spatial_vector),
):
    """Add the accumulated velocity corrections to ``body_qd`` into ``body_qd_out`` (see
    :func:`apply_deltas_kernel` for ``separate``)."""
    b = wp.tid()
    cnt = body_cnt[b]
    if cnt > 0.0:
        dv = body_dv[b]
        dw = body_dw[b]
        if con_weighting != 0 and cnt > 1.0:
            dv = dv / cnt
            dw = dw / cnt
        qd = body_qd[b]
        body_qd_out[b] = wp.spatial_vector(wp.spatial_top(qd) + dv, wp.spatial_bottom(qd) + dw)
    elif separate != 0:
        body_qd_out[b] = body_qd[b]
    if separate == 0:
        body_dv[b] = wp.vec3(0.0)
        body_dw[b] = wp.vec3(0.0)
        body_cnt[b] = 0.0


@wp.kernel
def contact_force_kernel(
    inv_dt2: float,
    con_weighting: int,
    rigid_count: wp.array(dtype=wp.int32),
    rc_shape0: wp.array(dtype=wp.int32),
    rc_shape1: wp.array(dtype=wp.int32),
    shape_body: wp.array(dtype=wp.int32),
    body_inv_mass: wp.array(dtype=float),
    body_flags: wp.array(dtype=wp.int32),
    body_mask: wp.array(dtype=wp.int32),
    body_contact_count: wp.array(dtype=float),
    contact_impulse: wp.array(dtype=wp.vec3),
    force: wp.array(dtype=wp.spatial_vector),
):
    """``force[c]`` = force exerted by shape 0 on shape 1 (accumulated positional impulse / dt^2,
    scaled like the contact-count weighting: 1/N for one dynamic body, 2/(N0+N1) for two).
    Soft-contact slots and torques are zero."""
    c = wp.tid()
    f = wp.vec3(0.0)
    if c < contact_impulse.shape[0] and c < rigid_count[0]:
        f = contact_impulse[c] * inv_dt2
        if con_weighting != 0:
            b0 = shape_body[rc_shape0[c]]
            b1 = shape_body[rc_shape1[c]]
            n = float(0.0)
            k = float(0.0)
            if body_inv_mass_of(b0, body_inv_mass, body_flags, body_mask) > 0.0:
                n = n + wp.max(body_contact_count[b0], 1.0)
                k = k + 1.0
            if body_inv_mass_of(b1, body_inv_mass, body_flags, body_mask) > 0.0:
                n = n + wp.max(body_contact_count[b1], 1.0)
                k = k + 1.0
            if n > 0.0:
                f = f * (k / n)
    force[c] = wp.spatial_vector(f, wp.vec3(0.0))


@wp.func
def friction_velocity_sums(
    start: int,
    end: int,
    mu: float,
    area: int,
    rc_point0: wp.array(dtype=wp.vec3),
    rc_point1: wp.array(dtype=wp.vec3),
    rc_normal: wp.array(dtype=wp.vec3),
    rc_margin0: wp.array(dtype=float),
    rc_margin1: wp.array(dtype=float),
    contact_lambda: wp.array(dtype=float),
    contact_impulse: wp.array(dtype=wp.vec3),
    X0: wp.transform,
    X1: wp.transform,
    x0: wp.vec3,
    x1: wp.vec3,
    q0: wp.quat,
    q1: wp.quat,
    m0: float,
    m1: float,
    I0: wp.mat33,
    I1: wp.mat33,
    v0c: wp.vec3,
    w0c: wp.vec3,
    v1c: wp.vec3,
    w1c: wp.vec3,
):
    """Pass 1 of :func:`friction_velocity_patch` over the patch's active contacts: (count, unused
    budget, removal asked for, sum of tangential velocities, sum of contact points); a function of
    its own for the adjoint (see :func:`rigid_patch_sums`)."""
    k = float(0.0)
    budget = float(0.0)
    want = float(0.0)
    v_sum = wp.vec3(0.0)
    x_sum = wp.vec3(0.0)
    for c in range(start, end):
        ln = contact_lambda[c]
        if ln > 0.0:
            n = rc_normal[c]
            P = contact_impulse[c]
            budget += mu * ln - wp.length(P - n * wp.dot(n, P))
            k += 1.0
            r0 = wp.transform_point(X0, rc_point0[c]) + n * rc_margin0[c] - x0
            r1 = wp.transform_point(X1, rc_point1[c]) - n * rc_margin1[c] - x1
            x_sum += x1 + r1
            if area != 0:
                r0 = r0 - n * wp.dot(n, r0)
                r1 = r1 - n * wp.dot(n, r1)
            dv = (v1c + wp.cross(w1c, r1)) - (v0c + wp.cross(w0c, r0))
            vt = dv - n * wp.dot(n, dv)
            v_sum += vt
            lt = wp.length(vt)
            if area == 0 and lt > 1.0e-9:
                t = vt / lt
                w = w_lin(m0, q0, I0, r0, t) + w_lin(m1, q1, I1, r1, t)
                if w > 0.0:
                    want += lt / w
    return k, budget, want, v_sum, x_sum


@wp.func
def friction_velocity_patch(
    start: int,
    end: int,
    dt: float,
    rc_shape0: wp.array(dtype=wp.int32),
    rc_shape1: wp.array(dtype=wp.int32),
    rc_point0: wp.array(dtype=wp.vec3),
    rc_point1: wp.array(dtype=wp.vec3),
    rc_normal: wp.array(dtype=wp.vec3),
    rc_margin0: wp.array(dtype=float),
    rc_margin1: wp.array(dtype=float),
    contact_lambda: wp.array(dtype=float),
    contact_impulse: wp.array(dtype=wp.vec3),
    contact_impulse_out: wp.array(dtype=wp.vec3),
    shape_body: wp.array(dtype=wp.int32),
    shape_mu: wp.array(dtype=float),
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    body_flags: wp.array(dtype=wp.int32),
    body_mask: wp.array(dtype=wp.int32),
    body_dv: wp.array(dtype=wp.vec3),
    body_dw: wp.array(dtype=wp.vec3),
    body_cnt: wp.array(dtype=float),
):
    s0 = rc_shape0[start]
    s1 = rc_shape1[start]
    if s0 < 0 or s1 < 0:
        return
    mu = 0.5 * (shape_mu[s0] + shape_mu[s1])
    if mu <= 0.0:
        return
    b0, X0, com0 = contact_body(s0, shape_body, body_q, body_com)
    b1, X1, com1 = contact_body(s1, shape_body, body_q, body_com)
    m0 = body_inv_mass_of(b0, body_inv_mass, body_flags, body_mask)
    m1 = body_inv_mass_of(b1, body_inv_mass, body_flags, body_mask)
    if m0 == 0.0 and m1 == 0.0:
        return
    I0 = body_inv_inertia_of(b0, m0, body_inv_inertia)
    I1 = body_inv_inertia_of(b1, m1, body_inv_inertia)
    q0 = wp.transform_get_rotation(X0)
    q1 = wp.transform_get_rotation(X1)
    x0 = wp.transform_point(X0, com0)
    x1 = wp.transform_point(X1, com1)
    v0c = wp.vec3(0.0)
    w0c = wp.vec3(0.0)
    v1c = wp.vec3(0.0)
    w1c = wp.vec3(0.0)
    if b0 >= 0:
        v0c = wp.spatial_top(body_qd[b0])
        w0c = wp.spatial_bottom(body_qd[b0])
    if b1 >= 0:
        v1c = wp.spatial_top(body_qd[b1])
        w1c = wp.spatial_bottom(body_qd[b1])
    area = patch_spans_area(start, end, rc_shape0, rc_shape1, rc_point0, rc_point1, rc_normal, rc_margin0,
                            rc_margin1, contact_lambda, 1, shape_body, body_q)
    # pass 1: unused budget of the step, tangential velocities (projected points for area patches)
    k, budget, want, v_sum, x_sum = friction_velocity_sums(
        start, end, mu, area, rc_point0, rc_point1, rc_normal, rc_margin0, rc_margin1, contact_lambda,
        contact_impulse, X0, X1, x0, x1, q0, q1, m0, m1, I0, I1, v0c, w0c, v1c, w1c,
    )
    if k == 0.0 or budget <= 0.0:
        return
    budget = budget / dt
    if area != 0:
        # one impulse at the centroid with the tilt-free effective mass, a copy per active contact
        n = rc_normal[start]
        vt = v_sum / k
        lt = wp.length(vt)
        if lt < 1.0e-9:
            return
        t = vt / lt
        xc = x_sum / k
        rc0 = xc - x0
        rc1 = xc - x1
        w = w_lin(m0, q0, I0, rc0 - n * wp.dot(n, rc0), t) + w_lin(m1, q1, I1, rc1 - n * wp.dot(n, rc1), t)
        if w <= 0.0:
            return
        p = t * (-wp.min(lt / w, budget / k))
        a1, c1 = lin_step(m1, q1, I1, rc1, p)
        a0, c0 = lin_step(m0, q0, I0, rc0, -p)
        for c in range(start, end):
            if contact_lambda[c] > 0.0:
                wp.atomic_add(contact_impulse_out, c, p * dt)
                if m1 > 0.0:
                    add_body_delta(b1, a1, c1, body_dv, body_dw)
                    wp.atomic_add(body_cnt, b1, 1.0)
                if m0 > 0.0:
                    add_body_delta(b0, a0, c0, body_dv, body_dw)
                    wp.atomic_add(body_cnt, b0, 1.0)
        return
    if want <= 0.0:
        return
    scale = wp.min(budget / want, 1.0)
    # pass 2 (point and line patches): per-contact removal, scaled to the pooled budget
    for c in range(start, end):
        if contact_lambda[c] > 0.0:
            n = rc_normal[c]
            r0 = wp.transform_point(X0, rc_point0[c]) + n * rc_margin0[c] - x0
            r1 = wp.transform_point(X1, rc_point1[c]) - n * rc_margin1[c] - x1
            dv = (v1c + wp.cross(w1c, r1)) - (v0c + wp.cross(w0c, r0))
            vt = dv - n * wp.dot(n, dv)
            lt = wp.length(vt)
            if lt > 1.0e-9:
                t = vt / lt
                w = w_lin(m0, q0, I0, r0, t) + w_lin(m1, q1, I1, r1, t)
                if w > 0.0:
                    p = t * (-scale * lt / w)
                    wp.atomic_add(contact_impulse_out, c, p * dt)
                    if m1 > 0.0:
                        a, b = lin_step(m1, q1, I1, r1, p)
                        add_body_delta(b1, a, b, body_dv, body_dw)
                        wp.atomic_add(body_cnt, b1, 1.0)
                    if m0 > 0.0:
                        a, b = lin_step(m0, q0, I0, r0, -p)
                        add_body_delta(b0, a, b, body_dv, body_dw)
                        wp.atomic_add(body_cnt, b0, 1.0)


@wp.kernel
def friction_velocity_kernel(
    dt: float,
    rigid_count: wp.array(dtype=wp.int32),
    rc_shape0: wp.array(dtype=wp.int32),
    rc_shape1: wp.array(dtype=wp.int32),
    rc_point0: wp.array(dtype=wp.vec3),
    rc_point1: wp.array(dtype=wp.vec3),
    rc_normal: wp.array(dtype=wp.vec3),
    rc_margin0: wp.array(dtype=float),
    rc_margin1: wp.array(dtype=float),
    contact_lambda: wp.array(dtype=float),
    contact_impulse: wp.array(dtype=wp.vec3),
    contact_impulse_out: wp.array(dtype=wp.vec3),
    shape_body: wp.array(dtype=wp.int32),
    shape_mu: wp.array(dtype=float),
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    body_flags: wp.array(dtype=wp.int32),
    body_mask: wp.array(dtype=wp.int32),
    stride: int,
    body_dv: wp.array(dtype=wp.vec3),
    body_dw: wp.array(dtype=wp.vec3),
    body_cnt: wp.array(dtype=float),
):
    """Velocity-level Coulomb friction of the contacts active this step (Müller et al. 2020, 3.6),
    per patch (see :func:`solve_rigid_patch`): the tangential relative velocity left by the
    position solve is removed within the friction budget the position-level friction has not
    used (``mu * sum(lambda_n) - sum(|lambda_t|)`` over the patch, over dt)."""
    # grid-stride over the active contacts (on the CPU one thread walks them all); the thread
    # meeting a patch's first contact handles the patch
    n = wp.min(rigid_count[0], rc_shape0.shape[0])
    for c in range(wp.tid(), n, stride):
        end = patch_end(c, n, rc_shape0, rc_shape1, rc_normal)
        if end > c:
            friction_velocity_patch(
                c, end, dt, rc_shape0, rc_shape1, rc_point0, rc_point1, rc_normal, rc_margin0, rc_margin1,
                contact_lambda, contact_impulse, contact_impulse_out, shape_body, shape_mu, body_q, body_qd,
                body_com, body_inv_mass, body_inv_inertia, body_flags, body_mask, body_dv, body_dw, body_cnt,
            )


@wp.func
def patch_loaded(start: int, end: int, contact_lambda: wp.array(dtype=float)):
    """Whether some contact of ``[start, end)`` has a normal impulse this step."""
    for c in range(start, end):
        if contact_lambda[c] > 0.0:
            return True
    return False


@wp.kernel
def friction_velocity_fast_kernel(
    dt: float,
    rigid_count: wp.array(dtype=wp.int32),
    rc_shape0: wp.array(dtype=wp.int32),
    rc_shape1: wp.array(dtype=wp.int32),
    rc_point0: wp.array(dtype=wp.vec3),
    rc_point1: wp.array(dtype=wp.vec3),
    rc_normal: wp.array(dtype=wp.vec3),
    rc_margin0: wp.array(dtype=float),
    rc_margin1: wp.array(dtype=float),
    contact_lambda: wp.array(dtype=float),
    contact_impulse: wp.array(dtype=wp.vec3),
    contact_impulse_out: wp.array(dtype=wp.vec3),
    shape_body: wp.array(dtype=wp.int32),
    shape_mu: wp.array(dtype=float),
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    body_flags: wp.array(dtype=wp.int32),
    body_mask: wp.array(dtype=wp.int32),
    stride: int,
    body_dv: wp.array(dtype=wp.vec3),
    body_dw: wp.array(dtype=wp.vec3),
    body_cnt: wp.array(dtype=float),
):
    """:func:`friction_velocity_kernel` for untaped steps: the same values, skipping the patches
    none of whose contacts has a normal impulse this step (they change nothing)."""
    n = wp.min(rigid_count[0], rc_shape0.shape[0])
    for c in range(wp.tid(), n, stride):
        end = patch_end(c, n, rc_shape0, rc_shape1, rc_normal)
        if end > c and patch_loaded(c, end, contact_lambda):
                friction_velocity_patch(
                    c, end, dt, rc_shape0, rc_shape1, rc_point0, rc_point1, rc_normal, rc_margin0, rc_margin1,
                    contact_lambda, contact_impulse, contact_impulse_out, shape_body, shape_mu, body_q, body_qd,
                    body_com, body_inv_mass, body_inv_inertia, body_flags, body_mask, body_dv, body_dw, body_cnt,
                )

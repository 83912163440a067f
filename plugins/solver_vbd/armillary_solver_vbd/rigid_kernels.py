"""Warp kernels of the rigid half of SolverVBD (AVBD: augmented vertex block descent).

Conventions: every body has 6 block DOFs ``(dx, dtheta)``: the world displacement of its centre
of mass and a world rotation vector applied on the left (``q <- exp(dtheta) q``). A point ``p``
of a body (lever ``r = p - x_com``) moves by ``dp = dx - [r]x dtheta``, so a point potential
with gradient ``G`` and Hessian ``K`` at ``p`` adds ``(G, r x G)`` to the body gradient and
``H_ll = K``, ``H_la = -K [r]x``, ``H_aa = [r]x^T K [r]x`` to its 6x6 block. The accumulators
hold energy GRADIENTS (minus forces); the solve adds the inertia term and the external
reactions (forces) and takes one regularised Newton step per body (Schur complement of the
linear block).

Row formulation (structural joint rows, drives excluded):

* compliant ALM: material stiffness ``k`` and an internal metric ``rho``:
  ``k_eff = k rho / (k + rho)``, row force ``F = lam + k_eff (C - lam / k)``, dual update
  ``lam <- F`` (fixed point ``F = k C``); ``k = inf`` (hard rows, contacts) gives
  ``F = lam + rho C``.
* legacy: ``F = lam + pen (C - alpha C0)``, ``lam <- F``, ``pen += beta |C|``.
"""

from __future__ import annotations

import warp as wp

wp.set_module_options({"enable_backward": False})

BODY_KINEMATIC = wp.constant(2)

from armillary.sim.gravity import gravity_of_world  # noqa: E402  (world -1: the last, global row)
from armillary.sim.kinematics_kernels import JT_BALL as J_BALL  # noqa: E402  (the core's joint-type codes)
from armillary.sim.kinematics_kernels import JT_D6 as J_D6  # noqa: E402
from armillary.sim.kinematics_kernels import JT_DISTANCE as J_DISTANCE  # noqa: E402
from armillary.sim.kinematics_kernels import JT_FIXED as J_FIXED  # noqa: E402
from armillary.sim.kinematics_kernels import JT_FREE as J_FREE  # noqa: E402
from armillary.sim.kinematics_kernels import JT_PRISMATIC as J_PRISMATIC  # noqa: E402
from armillary.sim.kinematics_kernels import JT_REVOLUTE as J_REVOLUTE  # noqa: E402
from armillary.sim.kinematics_kernels import JT_ROD as J_ROD  # noqa: E402
from armillary.sim.spatial import quat_to_rotation_vector as quat_log  # noqa: E402  (rotation vector, shortest arc)

RHO_SCALE = wp.constant(100.0)  # internal ALM metric: rho = RHO_SCALE * (mass or inertia) / dt^2
PEN_MAX = wp.constant(1.0e10)
ROD_RHO_SCALE = wp.constant(100.0)
ROD_K_CAP = wp.constant(10.0)


# --------------------------------------------------------------------------- helpers
@wp.func
def quat_exp(v: wp.vec3):
    a = wp.length(v)
    if a < 1.0e-12:
        return wp.normalize(wp.quat(0.5 * v[0], 0.5 * v[1], 0.5 * v[2], 1.0))
    return wp.quat_from_axis_angle(v / a, a)


@wp.func
def wrap_angle(a: float):
    pi = 3.14159265358979
    while a > pi:
        a = a - 2.0 * pi
    while a < -pi:
        a = a + 2.0 * pi
    return a


@wp.func
def twist_angle(q: wp.quat, axis: wp.vec3):
    """Angle of the twist of ``q`` about the unit ``axis`` (same frame), in (-pi, pi]."""
    s = q[0] * axis[0] + q[1] * axis[1] + q[2] * axis[2]
    return wrap_angle(2.0 * wp.atan2(s, q[3]))


@wp.func
def is_dynamic(b: int, body_inv_mass: wp.array(dtype=float), body_flags: wp.array(dtype=wp.int32)):
    if b < 0:
        return False
    if (body_flags[b] & BODY_KINEMATIC) != 0:
        return False
    return body_inv_mass[b] > 0.0


@wp.func
def body_X(b: int, body_q: wp.array(dtype=wp.transform)):
    if b < 0:
        return wp.transform_identity()
    return body_q[b]


@wp.func
def body_com_world(b: int, body_q: wp.array(dtype=wp.transform), body_com: wp.array(dtype=wp.vec3)):
    if b < 0:
        return wp.vec3(0.0)
    return wp.transform_point(body_q[b], body_com[b])


@wp.func
def add_point(
    b: int,
    G: wp.vec3,
    K: wp.mat33,
    r: wp.vec3,
    acc_f: wp.array(dtype=wp.spatial_vector),
    acc_ll: wp.array(dtype=wp.mat33),
    acc_la: wp.array(dtype=wp.mat33),
    acc_aa: wp.array(dtype=wp.mat33),
):
    S = wp.skew(r)
    wp.atomic_add(acc_f, b, wp.spatial_vector(G, wp.cross(r, G)))
    wp.atomic_add(acc_ll, b, K)
    wp.atomic_add(acc_la, b, -(K * S))
    wp.atomic_add(acc_aa, b, wp.transpose(S) * K * S)


@wp.func
def add_angular(
    b: int,
    G: wp.vec3,
    K: wp.mat33,
    acc_f: wp.array(dtype=wp.spatial_vector),
    acc_aa: wp.array(dtype=wp.mat33),
):
    wp.atomic_add(acc_f, b, wp.spatial_vector(wp.vec3(0.0), G))
    wp.atomic_add(acc_aa, b, K)


@wp.func
def mass_of(b: int, body_inv_mass: wp.array(dtype=float), body_flags: wp.array(dtype=wp.int32)):
    if is_dynamic(b, body_inv_mass, body_flags):
        return 1.0 / body_inv_mass[b]
    return 1.0e30


@wp.func
def inertia_of(b: int, body_inv_mass: wp.array(dtype=float), body_flags: wp.array(dtype=wp.int32),
               body_inertia: wp.array(dtype=wp.mat33)):  # fmt: skip
    if is_dynamic(b, body_inv_mass, body_flags):
        I = body_inertia[b]
        return wp.max((I[0, 0] + I[1, 1] + I[2, 2]) / 3.0, 1.0e-12)
    return 1.0e30


# --------------------------------------------------------------------------- step begin / end
@wp.kernel
def begin_step_kernel(
    dt: float,
    gravity: wp.array(dtype=wp.vec3),
    body_world: wp.array(dtype=wp.int32),
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    body_f: wp.array(dtype=wp.spatial_vector),
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_inertia: wp.array(dtype=wp.mat33),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    body_flags: wp.array(dtype=wp.int32),
    v_last: wp.array(dtype=wp.vec3),
    v_last_valid: wp.array(dtype=wp.int32),
    # out
    body_q_prev: wp.array(dtype=wp.transform),
    x_pred: wp.array(dtype=wp.vec3),
    q_pred: wp.array(dtype=wp.quat),
    v_pred: wp.array(dtype=wp.vec3),
    body_q_out: wp.array(dtype=wp.transform),
):
    b = wp.tid()
    X = body_q[b]
    body_q_prev[b] = X
    q = wp.transform_get_rotation(X)
    com = body_com[b]
    xc = wp.transform_point(X, com)
    v = wp.spatial_top(body_qd[b])
    w = wp.spatial_bottom(body_qd[b])
    x0 = xc + v * dt  # initial iterate (below)
    if is_dynamic(b, body_inv_mass, body_flags):
        g = gravity_of_world(gravity, body_world[b])  # world -1: the last (global) row
        # adaptive initial iterate (VBD): the momentum prediction plus the last step's
        # acceleration along gravity, clamped to [0, |g|]: a body at rest starts at its previous
        # (equilibrium) pose, so an unconverged solve does not sag by g dt^2 per step, and a
        # falling one starts on its free-fall prediction
        gl = wp.length(g)
        if gl > 0.0:
            gh = g / gl
            a_g = gl  # no history (first step, reset): the free-fall prediction
            if v_last_valid[b] != 0:
                a_g = wp.clamp(wp.dot(v - v_last[b], gh) / dt, 0.0, gl)
            x0 = x0 + gh * (a_g * dt * dt)
        v_last[b] = v
        v_last_valid[b] = 1
        f = wp.vec3(0.0)
        tau = wp.vec3(0.0)
        if body_f.shape[0] > b:
            f = wp.spatial_top(body_f[b])
            tau = wp.spatial_bottom(body_f[b])
        v = v + (g + f * body_inv_mass[b]) * dt
        wb = wp.quat_rotate_inv(q, w)
        tb = wp.quat_rotate_inv(q, tau) - wp.cross(wb, body_inertia[b] * wb)
        wb = wb + (body_inv_inertia[b] * tb) * dt
        w = wp.quat_rotate(q, wb)
    xc = xc + v * dt
    q = wp.normalize(quat_exp(w * dt) * q)
    x_pred[b] = xc
    q_pred[b] = q
    v_pred[b] = v
    if is_dynamic(b, body_inv_mass, body_flags):
        xc = x0
    body_q_out[b] = wp.transform(xc - wp.quat_rotate(q, com), q)


@wp.kernel
def end_step_kernel(
    dt: float,
    body_q: wp.array(dtype=wp.transform),
    body_q_prev: wp.array(dtype=wp.transform),
    body_qd_in: wp.array(dtype=wp.spatial_vector),
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_flags: wp.array(dtype=wp.int32),
    x_pred: wp.array(dtype=wp.vec3),
    v_pred: wp.array(dtype=wp.vec3),
    body_qd_out: wp.array(dtype=wp.spatial_vector),
):
    b = wp.tid()
    if not is_dynamic(b, body_inv_mass, body_flags):
        body_qd_out[b] = body_qd_in[b]
        return
    X = body_q[b]
    Xp = body_q_prev[b]
    com = body_com[b]
    # (x - x_begin)/dt written as the predicted velocity plus the solver's correction: the same
    # value, without float32 cancellation of two large coordinates (free fall stays exact)
    v = v_pred[b] + (wp.transform_point(X, com) - x_pred[b]) / dt
    q = wp.transform_get_rotation(X)
    qp = wp.transform_get_rotation(Xp)
    w = quat_log(q * wp.quat_inverse(qp)) / dt
    body_qd_out[b] = wp.spatial_vector(v, w)


@wp.kernel
def scale_joint_duals_kernel(
    gamma: float,
    k_start_lin: float,
    k_start_ang: float,
    lam_lin: wp.array(dtype=wp.vec3),
    lam_ang: wp.array(dtype=wp.vec3),
    pen: wp.array(dtype=wp.vec2),
):
    j = wp.tid()
    lam_lin[j] = lam_lin[j] * gamma
    lam_ang[j] = lam_ang[j] * gamma
    p = pen[j]
    pen[j] = wp.vec2(wp.max(p[0] * gamma, k_start_lin), wp.max(p[1] * gamma, k_start_ang))


# --------------------------------------------------------------------------- joints
@wp.func
def joint_lin_proj(jt: int, nl: int, qs: int, joint_axis: wp.array(dtype=wp.vec3), R: wp.mat33):
    """Projector onto the constrained linear directions (world)."""
    P = wp.identity(3, dtype=float)
    if jt == J_PRISMATIC or jt == J_D6:
        for i in range(nl):
            a = wp.normalize(R * joint_axis[qs + i])
            P = P - wp.outer(a, a)
    if jt == J_FREE or jt == J_DISTANCE:
        P = wp.mat33(0.0)
    return P


@wp.func
def joint_ang_proj(jt: int, nl: int, na: int, qs: int, joint_axis: wp.array(dtype=wp.vec3), R: wp.mat33):
    """Projector onto the constrained angular directions (world)."""
    P = wp.identity(3, dtype=float)
    if jt == J_BALL or jt == J_FREE or jt == J_DISTANCE:
        P = wp.mat33(0.0)
    if jt == J_REVOLUTE or jt == J_D6:
        for i in range(na):
            a = wp.normalize(R * joint_axis[qs + nl + i])
            P = P - wp.outer(a, a)
    if na >= 3:
        P = wp.mat33(0.0)
    return P


@wp.func
def row_force(C: wp.vec3, lam: wp.vec3, k: float, rho: float, pen: float, C0: wp.vec3, alpha: float,
              compliant: int):  # fmt: skip
    """Structural row force (before projection) and its stiffness."""
    if compliant != 0:
        if k <= 0.0:
            return wp.vec3(0.0), 0.0
        keff = k * rho / (k + rho)
        return lam + keff * (C - lam / k), keff
    return lam + pen * (C - alpha * C0), pen


@wp.func
def alm_rows(C: wp.vec3, lam: wp.vec3, k: wp.vec3, rho: float, compliant: int):
    """Per-component ROD rows: compliant ALM ``F = lam + k_eff (C - lam / k)`` (``k_eff = k rho /
    (k + rho)``) or, on the legacy path, plain springs ``F = k C``. Returns ``(F, k_eff)``."""
    F = wp.vec3(0.0)
    ke = wp.vec3(0.0)
    for i in range(3):
        ki = k[i]
        if ki > 0.0:
            if compliant != 0:
                # cap the material stiffness at ROD_K_CAP * rho: with a much stiffer row the
                # per-sweep multiplier update winds up against the slow global modes of long
                # chains (diverges); the capped row still stretches only ~g dt^2 / ROD_K_CAP
                ki = wp.min(ki, ROD_K_CAP * rho)
                kf = ki * rho / (ki + rho)
                F[i] = lam[i] + kf * (C[i] - lam[i] / ki)
                ke[i] = kf
            else:
                F[i] = ki * C[i]
                ke[i] = ki
    return F, ke


@wp.func
def rod_rho(p: int, c: int, dt: float, body_inv_mass: wp.array(dtype=float), body_flags: wp.array(dtype=wp.int32),
            body_inertia: wp.array(dtype=wp.mat33)):  # fmt: skip
    ml = wp.min(mass_of(p, body_inv_mass, body_flags), mass_of(c, body_inv_mass, body_flags))
    ia = wp.min(inertia_of(p, body_inv_mass, body_flags, body_inertia),
                inertia_of(c, body_inv_mass, body_flags, body_inertia))  # fmt: skip
    return ROD_RHO_SCALE * ml / (dt * dt), ROD_RHO_SCALE * ia / (dt * dt)


@wp.kernel
def joint_accumulate_kernel(
    color: int,  # -1: every body (report mode is not used for joints)
    dt: float,
    compliant: int,
    alpha: float,
    lin_ke: float,
    ang_ke: float,
    lin_kd: float,
    ang_kd: float,
    body_color: wp.array(dtype=wp.int32),
    joint_type: wp.array(dtype=wp.int32),
    joint_enabled: wp.array(dtype=wp.bool),
    joint_parent: wp.array(dtype=wp.int32),
    joint_child: wp.array(dtype=wp.int32),
    joint_X_p: wp.array(dtype=wp.transform),
    joint_X_c: wp.array(dtype=wp.transform),
    joint_q_start: wp.array(dtype=wp.int32),
    joint_qd_start: wp.array(dtype=wp.int32),
    j_nlin: wp.array(dtype=wp.int32),
    j_nang: wp.array(dtype=wp.int32),
    joint_axis: wp.array(dtype=wp.vec3),
    target_q: wp.array(dtype=float),
    target_qd: wp.array(dtype=float),
    target_ke: wp.array(dtype=float),
    target_kd: wp.array(dtype=float),
    limit_lower: wp.array(dtype=float),
    limit_upper: wp.array(dtype=float),
    limit_ke: wp.array(dtype=float),
    limit_kd: wp.array(dtype=float),
    rod_ke: wp.array(dtype=wp.spatial_vector),
    rod_kd: wp.array(dtype=wp.spatial_vector),
    rod_rest: wp.array(dtype=wp.quat),
    lam_lin: wp.array(dtype=wp.vec3),
    lam_ang: wp.array(dtype=wp.vec3),
    pen: wp.array(dtype=wp.vec2),
    C0_lin: wp.array(dtype=wp.vec3),
    C0_ang: wp.array(dtype=wp.vec3),
    body_q: wp.array(dtype=wp.transform),
    body_q_prev: wp.array(dtype=wp.transform),
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_inertia: wp.array(dtype=wp.mat33),
    body_flags: wp.array(dtype=wp.int32),
    # out
    acc_f: wp.array(dtype=wp.spatial_vector),
    acc_ll: wp.array(dtype=wp.mat33),
    acc_la: wp.array(dtype=wp.mat33),
    acc_aa: wp.array(dtype=wp.mat33),
):
    j = wp.tid()
    if not joint_enabled[j]:
        return
    jt = joint_type[j]
    if jt == J_FREE or jt == J_DISTANCE:
        return
    p = joint_parent[j]
    c = joint_child[j]
    pa = False
    if p >= 0:
        pa = is_dynamic(p, body_inv_mass, body_flags) and (color < 0 or body_color[p] == color)
    ca = is_dynamic(c, body_inv_mass, body_flags) and (color < 0 or body_color[c] == color)
    if not pa and not ca:
        return
    Xwp = body_X(p, body_q) * joint_X_p[j]
    Xwc = body_X(c, body_q) * joint_X_c[j]
    Xwp0 = body_X(p, body_q_prev) * joint_X_p[j]
    Xwc0 = body_X(c, body_q_prev) * joint_X_c[j]
    pp = wp.transform_get_translation(Xwp)
    pc = wp.transform_get_translation(Xwc)
    qp = wp.transform_get_rotation(Xwp)
    qc = wp.transform_get_rotation(Xwc)
    R = wp.quat_to_matrix(qp)
    d = pc - pp
    d0 = wp.transform_get_translation(Xwc0) - wp.transform_get_translation(Xwp0)
    qs = joint_qd_start[j]
    cs = joint_q_start[j]
    nl = j_nlin[j]
    na = j_nang[j]
    rp = pp - body_com_world(p, body_q, body_com)
    rc = pc - body_com_world(c, body_q, body_com)

    Gl = wp.vec3(0.0)  # gradient at the child anchor point (parent: -Gl)
    Kl = wp.mat33(0.0)
    Ga = wp.vec3(0.0)  # angular gradient on the child (parent: -Ga)
    Ka = wp.mat33(0.0)
    if jt == J_ROD:
        ke = rod_ke[j]
        kd = rod_kd[j]
        dl = wp.transpose(R) * d
        dl0 = wp.quat_rotate_inv(wp.transform_get_rotation(Xwp0), d0)
        kel = wp.vec3(ke[0], ke[1], ke[2])
        kdl = wp.vec3(kd[0], kd[1], kd[2])
        rho_l, rho_a = rod_rho(p, c, dt, body_inv_mass, body_flags, body_inertia)
        Fel, kfl = alm_rows(dl, wp.transpose(R) * lam_lin[j], kel, rho_l, compliant)
        Fl = Fel + wp.cw_mul(kdl, dl - dl0) / dt
        Gl = R * Fl
        Kl = R * wp.diag(kfl + kdl / dt) * wp.transpose(R)
        q0 = rod_rest[j]
        qrel = wp.quat_inverse(qp) * qc
        kap = quat_log(wp.quat_inverse(q0) * qrel)
        qrel0 = wp.quat_inverse(wp.transform_get_rotation(Xwp0)) * wp.transform_get_rotation(Xwc0)
        kap0 = quat_log(wp.quat_inverse(q0) * qrel0)
        kea = wp.vec3(ke[3], ke[4], ke[5])
        kda = wp.vec3(kd[3], kd[4], kd[5])
        RB = wp.quat_to_matrix(qp * q0)
        # bend / twist: material springs (their multipliers with the small angular metric
        # destabilise long chains; these rows are soft next to the stretch/shear rows)
        Fea, kfa = alm_rows(kap, lam_ang[j], kea, rho_a, 0)
        Fa = Fea + wp.cw_mul(kda, kap - kap0) / dt
        Ga = RB * Fa
        Ka = RB * wp.diag(kfa + kda / dt) * wp.transpose(RB)
    else:
        ml = wp.min(mass_of(p, body_inv_mass, body_flags), mass_of(c, body_inv_mass, body_flags))
        ia = wp.min(inertia_of(p, body_inv_mass, body_flags, body_inertia),
                    inertia_of(c, body_inv_mass, body_flags, body_inertia))  # fmt: skip
        rho_l = RHO_SCALE * ml / (dt * dt)
        rho_a = RHO_SCALE * ia / (dt * dt)
        pj = pen[j]
        # structural linear rows
        Pl = joint_lin_proj(jt, nl, qs, joint_axis, R)
        Cl = Pl * d
        Fl, kl = row_force(Cl, Pl * lam_lin[j], lin_ke, rho_l, pj[0], Pl * C0_lin[j], alpha, compliant)
        Gl = Pl * Fl + lin_kd * (Pl * (d - d0)) / dt
        Kl = (kl + lin_kd / dt) * Pl
        # structural angular rows
        phi = quat_log(qc * wp.quat_inverse(qp))
        qp0 = wp.transform_get_rotation(Xwp0)
        phi0 = quat_log(wp.transform_get_rotation(Xwc0) * wp.quat_inverse(qp0))
        Pa = joint_ang_proj(jt, nl, na, qs, joint_axis, R)
        Ca = Pa * phi
        Fa, ka = row_force(Ca, Pa * lam_ang[j], ang_ke, rho_a, pj[1], Pa * C0_ang[j], alpha, compliant)
        Ga = Pa * Fa + ang_kd * (Pa * (phi - phi0)) / dt
        Ka = (ka + ang_kd / dt) * Pa
        # drives and limits
        if jt == J_PRISMATIC or jt == J_REVOLUTE or jt == J_D6:
            qrel = wp.quat_inverse(qp) * qc
            qrel0 = wp.quat_inverse(qp0) * wp.transform_get_rotation(Xwc0)
            for i in range(nl + na):
                dof = qs + i
                axl = wp.normalize(joint_axis[dof])
                a = R * axl
                x = float(0.0)
                v = float(0.0)
                if i < nl:
                    x = wp.dot(a, d)
                    v = (x - wp.dot(a, d0)) / dt
                else:
                    x = twist_angle(qrel, axl)
                    v = wrap_angle(x - twist_angle(qrel0, axl)) / dt
                F = float(0.0)
                k = float(0.0)
                tke = target_ke[dof]
                tkd = target_kd[dof]
                if tke > 0.0 or tkd > 0.0:
                    tq = float(0.0)
                    tv = float(0.0)
                    if target_q.shape[0] > cs + i:
                        tq = target_q[cs + i]
                    if target_qd.shape[0] > dof:
                        tv = target_qd[dof]
                    err = x - tq
                    if i >= nl:
                        err = wrap_angle(err)
                    F = F + tke * err + tkd * (v - tv)
                    k = k + tke + tkd / dt
                lo = limit_lower[dof]
                hi = limit_upper[dof]
                if x < lo:
                    F = F + limit_ke[dof] * (x - lo) + limit_kd[dof] * wp.min(v, 0.0)
                    k = k + limit_ke[dof] + limit_kd[dof] / dt
                elif x > hi:
                    F = F + limit_ke[dof] * (x - hi) + limit_kd[dof] * wp.max(v, 0.0)
                    k = k + limit_ke[dof] + limit_kd[dof] / dt
                if k > 0.0 or F != 0.0:
                    if i < nl:
                        Gl = Gl + F * a
                        Kl = Kl + k * wp.outer(a, a)
                    else:
                        Ga = Ga + F * a
                        Ka = Ka + k * wp.outer(a, a)
    if ca:
        add_point(c, Gl, Kl, rc, acc_f, acc_ll, acc_la, acc_aa)
        add_angular(c, Ga, Ka, acc_f, acc_aa)
    if pa:
        add_point(p, -Gl, Kl, rp, acc_f, acc_ll, acc_la, acc_aa)
        add_angular(p, -Ga, Ka, acc_f, acc_aa)


@wp.kernel
def joint_dual_kernel(
    init: int,  # 1: store C0 (legacy stabilisation) instead of a dual update
    rod_pass: int,  # 0: update the non-ROD joints (per iteration); 1: the ROD rows (once per step)
    dt: float,
    compliant: int,
    alpha: float,
    lin_ke: float,
    ang_ke: float,
    lin_beta: float,
    ang_beta: float,
    joint_type: wp.array(dtype=wp.int32),
    joint_enabled: wp.array(dtype=wp.bool),
    joint_parent: wp.array(dtype=wp.int32),
    joint_child: wp.array(dtype=wp.int32),
    joint_X_p: wp.array(dtype=wp.transform),
    joint_X_c: wp.array(dtype=wp.transform),
    joint_qd_start: wp.array(dtype=wp.int32),
    j_nlin: wp.array(dtype=wp.int32),
    j_nang: wp.array(dtype=wp.int32),
    joint_axis: wp.array(dtype=wp.vec3),
    rod_ke: wp.array(dtype=wp.spatial_vector),
    rod_rest: wp.array(dtype=wp.quat),
    body_q: wp.array(dtype=wp.transform),
    body_inv_mass: wp.array(dtype=float),
    body_inertia: wp.array(dtype=wp.mat33),
    body_flags: wp.array(dtype=wp.int32),
    lam_lin: wp.array(dtype=wp.vec3),
    lam_ang: wp.array(dtype=wp.vec3),
    pen: wp.array(dtype=wp.vec2),
    C0_lin: wp.array(dtype=wp.vec3),
    C0_ang: wp.array(dtype=wp.vec3),
):
    j = wp.tid()
    jt = joint_type[j]
    if (jt == J_ROD) != (rod_pass != 0):
        return
    if jt == J_FREE or jt == J_DISTANCE or not joint_enabled[j] or (jt == J_ROD and compliant == 0):
        lam_lin[j] = wp.vec3(0.0)
        lam_ang[j] = wp.vec3(0.0)
        return
    p = joint_parent[j]
    c = joint_child[j]
    if not is_dynamic(p, body_inv_mass, body_flags) and not is_dynamic(c, body_inv_mass, body_flags):
        return
    Xwp = body_X(p, body_q) * joint_X_p[j]
    Xwc = body_X(c, body_q) * joint_X_c[j]
    qp = wp.transform_get_rotation(Xwp)
    if jt == J_ROD:
        # ROD stretch/shear multipliers (elastic part only) are stored in world axes, like the
        # other joints' (a multiplier frozen in the parent frame is a follower force during
        # the sweep); bend/twist rows are plain springs
        if init != 0:
            return
        ke = rod_ke[j]
        dlr = wp.quat_rotate_inv(qp, wp.transform_get_translation(Xwc) - wp.transform_get_translation(Xwp))
        rl, ra = rod_rho(p, c, dt, body_inv_mass, body_flags, body_inertia)
        Flr, kl_ = alm_rows(dlr, wp.quat_rotate_inv(qp, lam_lin[j]), wp.vec3(ke[0], ke[1], ke[2]), rl, compliant)
        lam_lin[j] = wp.quat_rotate(qp, Flr)
        lam_ang[j] = wp.vec3(0.0)
        return
    R = wp.quat_to_matrix(qp)
    d = wp.transform_get_translation(Xwc) - wp.transform_get_translation(Xwp)
    phi = quat_log(wp.transform_get_rotation(Xwc) * wp.quat_inverse(qp))
    qs = joint_qd_start[j]
    Pl = joint_lin_proj(jt, j_nlin[j], qs, joint_axis, R)
    Pa = joint_ang_proj(jt, j_nlin[j], j_nang[j], qs, joint_axis, R)
    Cl = Pl * d
    Ca = Pa * phi
    if init != 0:
        C0_lin[j] = Cl
        C0_ang[j] = Ca
        return
    ml = wp.min(mass_of(p, body_inv_mass, body_flags), mass_of(c, body_inv_mass, body_flags))
    ia = wp.min(inertia_of(p, body_inv_mass, body_flags, body_inertia),
                inertia_of(c, body_inv_mass, body_flags, body_inertia))  # fmt: skip
    pj = pen[j]
    Fl, kl = row_force(Cl, Pl * lam_lin[j], lin_ke, RHO_SCALE * ml / (dt * dt), pj[0], Pl * C0_lin[j], alpha,
                       compliant)  # fmt: skip
    Fa, ka = row_force(Ca, Pa * lam_ang[j], ang_ke, RHO_SCALE * ia / (dt * dt), pj[1], Pa * C0_ang[j], alpha,
                       compliant)  # fmt: skip
    lam_lin[j] = Pl * Fl
    lam_ang[j] = Pa * Fa
    if compliant == 0:
        pen[j] = wp.vec2(wp.min(pj[0] + lin_beta * wp.length(Cl), PEN_MAX),
                         wp.min(pj[1] + ang_beta * wp.length(Ca), PEN_MAX))  # fmt: skip


# --------------------------------------------------------------------------- contacts
@wp.func
def contact_material(
    ci: int,
    s0: int,
    s1: int,
    c_stiffness: wp.array(dtype=float),
    c_damping: wp.array(dtype=float),
    c_friction: wp.array(dtype=float),
    shape_ke: wp.array(dtype=float),
    shape_kd: wp.array(dtype=float),
    shape_mu: wp.array(dtype=float),
):
    ke = 0.5 * (shape_ke[s0] + shape_ke[s1])
    kd = 0.5 * (shape_kd[s0] + shape_kd[s1])
    mu = 0.5 * (shape_mu[s0] + shape_mu[s1])
    if c_stiffness.shape[0] > ci:
        if c_stiffness[ci] > 0.0:
            ke = c_stiffness[ci]
    if c_damping.shape[0] > ci:
        if c_damping[ci] > 0.0:
            kd = c_damping[ci]
    if c_friction.shape[0] > ci:
        if c_friction[ci] > 0.0:
            mu = c_friction[ci]
    return ke, kd, mu


@wp.func
def contact_eval(
    ci: int,
    dt: float,
    compliant: int,
    hard: int,
    friction_eps: float,
    shape0: wp.array(dtype=wp.int32),
    shape1: wp.array(dtype=wp.int32),
    point0: wp.array(dtype=wp.vec3),
    point1: wp.array(dtype=wp.vec3),
    normal: wp.array(dtype=wp.vec3),
    margin0: wp.array(dtype=float),
    margin1: wp.array(dtype=float),
    c_stiffness: wp.array(dtype=float),
    c_damping: wp.array(dtype=float),
    c_friction: wp.array(dtype=float),
    shape_body: wp.array(dtype=wp.int32),
    shape_ke: wp.array(dtype=float),
    shape_kd: wp.array(dtype=float),
    shape_mu: wp.array(dtype=float),
    body_q: wp.array(dtype=wp.transform),
    body_q_prev: wp.array(dtype=wp.transform),
    body_inv_mass: wp.array(dtype=float),
    body_flags: wp.array(dtype=wp.int32),
    lam: wp.array(dtype=float),
    pen: wp.array(dtype=float),
):
    """One contact row at the current iterate. Returns ``(state, p0, p1, G1, K, F, gap)``:
    ``state`` 0: no dynamic body, 1: separated (``F >= 0``; only the dual update uses it), 2:
    compressive; ``G1`` is the energy gradient at ``p1`` (``-G1`` at ``p0``), ``K`` its
    (non-symmetric) Jacobian, ``F`` the undamped row force and ``gap`` the normal gap."""
    s0 = shape0[ci]
    s1 = shape1[ci]
    z3 = wp.vec3(0.0)
    zK = wp.mat33(0.0)
    if s0 < 0 or s1 < 0:
        return 0, z3, z3, z3, zK, 0.0, 0.0
    b0 = shape_body[s0]
    b1 = shape_body[s1]
    if not is_dynamic(b0, body_inv_mass, body_flags) and not is_dynamic(b1, body_inv_mass, body_flags):
        return 0, z3, z3, z3, zK, 0.0, 0.0
    n = normal[ci]
    X0 = body_X(b0, body_q)
    X1 = body_X(b1, body_q)
    P0 = body_X(b0, body_q_prev)
    P1 = body_X(b1, body_q_prev)
    p0 = wp.transform_point(X0, point0[ci]) + n * margin0[ci]
    p1 = wp.transform_point(X1, point1[ci]) - n * margin1[ci]
    p0o = wp.transform_point(P0, point0[ci]) + n * margin0[ci]
    p1o = wp.transform_point(P1, point1[ci]) - n * margin1[ci]
    gap = wp.dot(n, p1 - p0)
    gap_o = wp.dot(n, p1o - p0o)
    ke, kd, mu = contact_material(ci, s0, s1, c_stiffness, c_damping, c_friction, shape_ke, shape_kd, shape_mu)
    # row: F <= 0 is compressive (the gradient at p1 is F n)
    F = float(0.0)
    kn = float(0.0)
    l = lam[ci]
    if compliant != 0:
        m = wp.min(mass_of(b0, body_inv_mass, body_flags), mass_of(b1, body_inv_mass, body_flags))
        rho = RHO_SCALE * m / (dt * dt)
        if ke > 0.0:
            kn = ke * rho / (ke + rho)
            F = l + kn * (gap - l / ke)
        else:
            kn = rho
            F = l + rho * gap
    else:
        kn = pen[ci]
        if hard == 0:
            kn = wp.min(kn, ke)
            l = 0.0
        F = l + kn * gap
    if F >= 0.0:
        return 1, p0, p1, z3, zK, F, gap
    F_row = F
    # damping (only while compressive)
    vn = (gap - gap_o) / dt
    Fd = F + kd * vn
    k_n = kn
    if Fd < 0.0:
        F = Fd
        k_n = kn + kd / dt
    fn = -F
    G1 = F * n
    K = k_n * wp.outer(n, n)
    # friction (smoothed Coulomb, IPC-style secant stiffness)
    if mu > 0.0:
        u = (p1 - p1o) - (p0 - p0o)
        ut = u - n * wp.dot(n, u)
        lu = wp.length(ut)
        eps = friction_eps * dt
        sf = mu * fn / wp.max(lu, eps)
        G1 = G1 + sf * ut
        # tangential stiffness (IPC secant) plus the exact coupling of the friction force to the
        # normal force it is proportional to: d(s ut)/d(gap) = -mu k_n ut / max(|ut|, eps). Without
        # this (non-symmetric) term the per-body Newton step of a sliding body mispredicts the
        # friction torque whenever its normal load moves, and a box sliding on a slope rocks
        # between its leading and trailing contacts (a 2-cycle of the contact active set)
        K = K + sf * (wp.identity(3, dtype=float) - wp.outer(n, n)) - (mu * k_n / wp.max(lu, eps)) * wp.outer(ut, n)
    return 2, p0, p1, G1, K, F_row, gap


@wp.kernel
def contact_kernel(
    mode: int,  # 1: dual update; 2: report wrench (into acc_f)
    dt: float,
    compliant: int,
    hard: int,
    friction_eps: float,
    count: wp.array(dtype=wp.int32),
    shape0: wp.array(dtype=wp.int32),
    shape1: wp.array(dtype=wp.int32),
    point0: wp.array(dtype=wp.vec3),
    point1: wp.array(dtype=wp.vec3),
    normal: wp.array(dtype=wp.vec3),
    margin0: wp.array(dtype=float),
    margin1: wp.array(dtype=float),
    c_stiffness: wp.array(dtype=float),
    c_damping: wp.array(dtype=float),
    c_friction: wp.array(dtype=float),
    shape_body: wp.array(dtype=wp.int32),
    shape_ke: wp.array(dtype=float),
    shape_kd: wp.array(dtype=float),
    shape_mu: wp.array(dtype=float),
    body_q: wp.array(dtype=wp.transform),
    body_q_prev: wp.array(dtype=wp.transform),
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_flags: wp.array(dtype=wp.int32),
    lam: wp.array(dtype=float),
    pen: wp.array(dtype=float),
    beta: float,
    # out
    acc_f: wp.array(dtype=wp.spatial_vector),
):
    ci = wp.tid()
    if ci >= count[0]:
        return
    st, p0, p1, G1, K, F, gap = contact_eval(ci, dt, compliant, hard, friction_eps, shape0, shape1, point0,
                                             point1, normal, margin0, margin1, c_stiffness, c_damping, c_friction,
                                             shape_body, shape_ke, shape_kd, shape_mu, body_q, body_q_prev,
                                             body_inv_mass, body_flags, lam, pen)  # fmt: skip
    if st == 0:
        return
    if mode == 1:
        lam[ci] = wp.min(F, 0.0)
        if compliant == 0 and hard == 0:
            lam[ci] = 0.0
        if compliant == 0:
            pen[ci] = wp.min(pen[ci] + beta * wp.abs(wp.min(gap, 0.0)), PEN_MAX)
        return
    if st != 2:
        return
    b0 = shape_body[shape0[ci]]
    b1 = shape_body[shape1[ci]]
    if is_dynamic(b1, body_inv_mass, body_flags):
        f = -G1
        r1 = p1 - body_com_world(b1, body_q, body_com)
        wp.atomic_add(acc_f, b1, wp.spatial_vector(f, wp.cross(r1, f)))
    if is_dynamic(b0, body_inv_mass, body_flags):
        f = G1
        r0 = p0 - body_com_world(b0, body_q, body_com)
        wp.atomic_add(acc_f, b0, wp.spatial_vector(f, wp.cross(r0, f)))


# per-body contact lists (CSR, rebuilt every step on the device; no capacity to overflow)
@wp.kernel
def contact_count_kernel(
    count: wp.array(dtype=wp.int32),
    shape0: wp.array(dtype=wp.int32),
    shape1: wp.array(dtype=wp.int32),
    shape_body: wp.array(dtype=wp.int32),
    body_inv_mass: wp.array(dtype=float),
    body_flags: wp.array(dtype=wp.int32),
    body_n: wp.array(dtype=wp.int32),
):
    ci = wp.tid()
    if ci >= count[0]:
        return
    s0 = shape0[ci]
    s1 = shape1[ci]
    if s0 < 0 or s1 < 0:
        return
    b0 = shape_body[s0]
    b1 = shape_body[s1]
    if is_dynamic(b0, body_inv_mass, body_flags):
        wp.atomic_add(body_n, b0, 1)
    if is_dynamic(b1, body_inv_mass, body_flags) and b1 != b0:
        wp.atomic_add(body_n, b1, 1)


@wp.kernel
def contact_scan_kernel(nb: int, body_n: wp.array(dtype=wp.int32), offs: wp.array(dtype=wp.int32),
                        cursor: wp.array(dtype=wp.int32)):  # fmt: skip
    # one thread: exclusive scan of the per-body counts (bodies are few next to contacts)
    acc = int(0)
    for b in range(nb):
        offs[b] = acc
        cursor[b] = acc
        acc = acc + body_n[b]
        body_n[b] = 0
    offs[nb] = acc


@wp.kernel
def contact_fill_kernel(
    count: wp.array(dtype=wp.int32),
    shape0: wp.array(dtype=wp.int32),
    shape1: wp.array(dtype=wp.int32),
    shape_body: wp.array(dtype=wp.int32),
    body_inv_mass: wp.array(dtype=float),
    body_flags: wp.array(dtype=wp.int32),
    cursor: wp.array(dtype=wp.int32),
    lst: wp.array(dtype=wp.int32),
):
    ci = wp.tid()
    if ci >= count[0]:
        return
    s0 = shape0[ci]
    s1 = shape1[ci]
    if s0 < 0 or s1 < 0:
        return
    b0 = shape_body[s0]
    b1 = shape_body[s1]
    if is_dynamic(b0, body_inv_mass, body_flags):
        lst[wp.atomic_add(cursor, b0, 1)] = ci
    if is_dynamic(b1, body_inv_mass, body_flags) and b1 != b0:
        lst[wp.atomic_add(cursor, b1, 1)] = ci


@wp.kernel
def contact_sort_kernel(offs: wp.array(dtype=wp.int32), lst: wp.array(dtype=wp.int32)):
    # insertion sort of each body's list: a deterministic summation order on every device
    b = wp.tid()
    lo = offs[b]
    hi = offs[b + 1]
    for i in range(lo + 1, hi):
        v = lst[i]
        k = i - 1
        while k >= lo and lst[k] > v:
            lst[k + 1] = lst[k]
            k = k - 1
        lst[k + 1] = v


@wp.kernel
def contact_reset_kernel(k_start: float, lam: wp.array(dtype=float), pen: wp.array(dtype=float)):
    i = wp.tid()
    lam[i] = 0.0
    pen[i] = k_start


# --------------------------------------------------------------------------- block solve
@wp.func
def spd_inverse(A: wp.mat33):
    tr = wp.abs(A[0, 0]) + wp.abs(A[1, 1]) + wp.abs(A[2, 2])
    A = A + wp.identity(3, dtype=float) * (1.0e-9 * tr + 1.0e-20)
    det = wp.determinant(A)
    if wp.abs(det) < 1.0e-30:
        A = A + wp.identity(3, dtype=float) * (1.0e-6 * tr + 1.0e-12)
    return wp.inverse(A)


@wp.kernel
def solve_bodies_kernel(
    dt: float,
    group: wp.array(dtype=wp.int32),
    x_pred: wp.array(dtype=wp.vec3),
    q_pred: wp.array(dtype=wp.quat),
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_inertia: wp.array(dtype=wp.mat33),
    body_flags: wp.array(dtype=wp.int32),
    ext_f: wp.array(dtype=wp.spatial_vector),
    ext_ll: wp.array(dtype=wp.mat33),
    ext_la: wp.array(dtype=wp.mat33),
    ext_aa: wp.array(dtype=wp.mat33),
    acc_f: wp.array(dtype=wp.spatial_vector),
    acc_ll: wp.array(dtype=wp.mat33),
    acc_la: wp.array(dtype=wp.mat33),
    acc_aa: wp.array(dtype=wp.mat33),
    acc_al: wp.array(dtype=wp.mat33),
    # contacts (gathered per body: same-colour bodies in contact see each other's latest pose on
    # the CPU, where the launch runs in list order; on CUDA they read the previous iterate)
    c_offs: wp.array(dtype=wp.int32),
    c_list: wp.array(dtype=wp.int32),
    compliant: int,
    hard: int,
    friction_eps: float,
    shape0: wp.array(dtype=wp.int32),
    shape1: wp.array(dtype=wp.int32),
    point0: wp.array(dtype=wp.vec3),
    point1: wp.array(dtype=wp.vec3),
    normal: wp.array(dtype=wp.vec3),
    margin0: wp.array(dtype=float),
    margin1: wp.array(dtype=float),
    c_stiffness: wp.array(dtype=float),
    c_damping: wp.array(dtype=float),
    c_friction: wp.array(dtype=float),
    shape_body: wp.array(dtype=wp.int32),
    shape_ke: wp.array(dtype=float),
    shape_kd: wp.array(dtype=float),
    shape_mu: wp.array(dtype=float),
    body_q_prev: wp.array(dtype=wp.transform),
    lam: wp.array(dtype=float),
    pen: wp.array(dtype=float),
    body_color: wp.array(dtype=wp.int32),
    jacobi_relax: float,  # step scale of a body in contact with a same-colour dynamic body (Jacobi sweeps)
    body_q: wp.array(dtype=wp.transform),
    # out (== body_q on the CPU: Gauss-Seidel in place)
    body_q_out: wp.array(dtype=wp.transform),
):
    b = group[wp.tid()]
    af = acc_f[b]
    all_ = acc_ll[b]
    ala = acc_la[b]
    aaa = acc_aa[b]
    aal = acc_al[b]
    acc_f[b] = wp.spatial_vector()
    acc_ll[b] = wp.mat33(0.0)
    acc_la[b] = wp.mat33(0.0)
    acc_aa[b] = wp.mat33(0.0)
    acc_al[b] = wp.mat33(0.0)
    if not is_dynamic(b, body_inv_mass, body_flags):
        return
    X = body_q[b]
    q = wp.transform_get_rotation(X)
    com = body_com[b]
    xc = wp.transform_point(X, com)
    # rigid contacts of this body
    coupled = int(0)  # touches a dynamic body of its own colour
    if c_offs.shape[0] > b + 1:
        for k in range(c_offs[b], c_offs[b + 1]):
            ci = c_list[k]
            st, p0, p1, G1, Kc, Fr, gap = contact_eval(ci, dt, compliant, hard, friction_eps, shape0, shape1,
                                                       point0, point1, normal, margin0, margin1, c_stiffness,
                                                       c_damping, c_friction, shape_body, shape_ke, shape_kd,
                                                       shape_mu, body_q, body_q_prev, body_inv_mass, body_flags,
                                                       lam, pen)  # fmt: skip
            if st == 2:
                for side in range(2):
                    bs = shape_body[shape0[ci]]
                    G = -G1
                    pp = p0
                    if side == 1:
                        bs = shape_body[shape1[ci]]
                        G = G1
                        pp = p1
                    if bs != b:
                        if is_dynamic(bs, body_inv_mass, body_flags):
                            if body_color[bs] == body_color[b]:
                                coupled = 1
                    else:
                        r = pp - xc
                        Sk = wp.skew(r)
                        af = af + wp.spatial_vector(G, wp.cross(r, G))
                        all_ = all_ + Kc
                        ala = ala - Kc * Sk
                        aaa = aaa + wp.transpose(Sk) * Kc * Sk
                        aal = aal + Sk * (Kc - wp.transpose(Kc))
    m = 1.0 / body_inv_mass[b]
    R = wp.quat_to_matrix(q)
    Iw = R * body_inertia[b] * wp.transpose(R)
    idt2 = 1.0 / (dt * dt)
    th = quat_log(q * wp.quat_inverse(q_pred[b]))
    ef = ext_f[b]
    gx = m * idt2 * (xc - x_pred[b]) + wp.spatial_top(af) - wp.spatial_top(ef)
    ga = idt2 * (Iw * th) + wp.spatial_bottom(af) - wp.spatial_bottom(ef)
    A = m * idt2 * wp.identity(3, dtype=float) + all_ + ext_ll[b]
    B = ala + ext_la[b]
    C = wp.transpose(B) + aal  # H_al (H_la^T plus the non-symmetric friction coupling)
    D = idt2 * Iw + aaa + ext_aa[b]
    Ai = spd_inverse(A)
    S = D - C * Ai * B
    if aal == wp.mat33(0.0):
        # symmetric block (no rigid-contact friction on this body): drop round-off asymmetry
        S = 0.5 * (S + wp.transpose(S))
    Si = spd_inverse(S)
    dth = Si * (-ga + C * (Ai * gx))
    dx = Ai * (-gx - B * dth)
    if coupled != 0:
        # Jacobi between same-colour bodies in contact (CUDA): both sides correct the same
        # penetration from the other's previous iterate, which overshoots by 2x (a 2-cycle of the
        # contact active set); the halved step removes that mode
        dx = dx * jacobi_relax
        dth = dth * jacobi_relax
    xc = xc + dx
    q = wp.normalize(quat_exp(dth) * q)
    body_q_out[b] = wp.transform(xc - wp.quat_rotate(q, com), q)


@wp.kernel
def copy_group_kernel(group: wp.array(dtype=wp.int32), src: wp.array(dtype=wp.transform),
                      dst: wp.array(dtype=wp.transform)):  # fmt: skip
    b = group[wp.tid()]
    dst[b] = src[b]


# --------------------------------------------------------------------------- joint forces, reset
@wp.kernel
def joint_force_kernel(
    joint_type: wp.array(dtype=wp.int32),
    joint_enabled: wp.array(dtype=wp.bool),
    joint_parent: wp.array(dtype=wp.int32),
    joint_child: wp.array(dtype=wp.int32),
    joint_X_p: wp.array(dtype=wp.transform),
    joint_X_c: wp.array(dtype=wp.transform),
    joint_qd_start: wp.array(dtype=wp.int32),
    j_nlin: wp.array(dtype=wp.int32),
    j_nang: wp.array(dtype=wp.int32),
    joint_axis: wp.array(dtype=wp.vec3),
    joint_f: wp.array(dtype=float),
    body_q: wp.array(dtype=wp.transform),
    body_com: wp.array(dtype=wp.vec3),
    body_f_out: wp.array(dtype=wp.spatial_vector),
):
    """``Control.joint_f`` as body wrenches (world, about each COM): REVOLUTE / PRISMATIC / D6
    generalized forces along their (parent-frame) axes, ROD a six-component world wrench
    ``(f, tau)`` at the child's joint anchor, FREE / DISTANCE ``(f, tau)`` at the child's COM;
    the reaction acts on the parent. BALL / FIXED have no force DOFs here."""
    j = wp.tid()
    if not joint_enabled[j]:
        return
    jt = joint_type[j]
    if jt == J_BALL or jt == J_FIXED:
        return
    p = joint_parent[j]
    c = joint_child[j]
    if c < 0:
        return
    s = joint_qd_start[j]
    if joint_f.shape[0] < s + j_nlin[j] + j_nang[j]:
        return
    Xwp = body_X(p, body_q) * joint_X_p[j]
    anchor = wp.transform_get_translation(body_q[c] * joint_X_c[j])
    F = wp.vec3(0.0)
    T = wp.vec3(0.0)
    if jt == J_ROD or jt == J_FREE or jt == J_DISTANCE:
        F = wp.vec3(joint_f[s + 0], joint_f[s + 1], joint_f[s + 2])
        T = wp.vec3(joint_f[s + 3], joint_f[s + 4], joint_f[s + 5])
        if jt != J_ROD:  # FREE / DISTANCE: a world wrench at the child's COM (as SolverXPBD)
            anchor = wp.transform_point(body_q[c], body_com[c])
    else:
        nl = j_nlin[j]
        qp = wp.transform_get_rotation(Xwp)
        for k in range(nl):
            F = F + wp.quat_rotate(qp, wp.normalize(joint_axis[s + k])) * joint_f[s + k]
        for k in range(j_nang[j]):
            T = T + wp.quat_rotate(qp, wp.normalize(joint_axis[s + nl + k])) * joint_f[s + nl + k]
    xc = wp.transform_point(body_q[c], body_com[c])
    wp.atomic_add(body_f_out, c, wp.spatial_vector(F, T + wp.cross(anchor - xc, F)))
    if p >= 0:
        xp = wp.transform_point(body_q[p], body_com[p])
        wp.atomic_add(body_f_out, p, wp.spatial_vector(-F, -T - wp.cross(anchor - xp, F)))


@wp.func
def world_selected(world: int, mask: wp.array(dtype=wp.bool), mode: int, world_count: int):
    """``SolverBase.reset`` mask semantics (mode 0: all; 1: ``world_count`` entries, globals
    when any world is selected; 2: ``world_count + 1`` entries, the last one the globals)."""
    if mode == 0:
        return True
    if world >= 0:
        if world < world_count:
            return mask[world]
        return False
    if mode == 2:
        return mask[world_count]
    for w in range(world_count):
        if mask[w]:
            return True
    return False


@wp.func
def entity_world(worlds: wp.array(dtype=wp.int32), i: int):
    if i < 0:
        return -1
    if worlds.shape[0] > i:
        return worlds[i]
    return 0


@wp.kernel
def reset_bodies_kernel(mask: wp.array(dtype=wp.bool), mode: int, world_count: int,
                        body_world: wp.array(dtype=wp.int32), v_last: wp.array(dtype=wp.vec3),
                        v_last_valid: wp.array(dtype=wp.int32)):  # fmt: skip
    b = wp.tid()
    if world_selected(entity_world(body_world, b), mask, mode, world_count):
        v_last[b] = wp.vec3(0.0)
        v_last_valid[b] = 0


@wp.kernel
def reset_joints_kernel(mask: wp.array(dtype=wp.bool), mode: int, world_count: int,
                        joint_world: wp.array(dtype=wp.int32), k_start_lin: float, k_start_ang: float,
                        lam_lin: wp.array(dtype=wp.vec3), lam_ang: wp.array(dtype=wp.vec3),
                        pen: wp.array(dtype=wp.vec2), C0_lin: wp.array(dtype=wp.vec3),
                        C0_ang: wp.array(dtype=wp.vec3)):  # fmt: skip
    j = wp.tid()
    if world_selected(entity_world(joint_world, j), mask, mode, world_count):
        lam_lin[j] = wp.vec3(0.0)
        lam_ang[j] = wp.vec3(0.0)
        pen[j] = wp.vec2(k_start_lin, k_start_ang)
        C0_lin[j] = wp.vec3(0.0)
        C0_ang[j] = wp.vec3(0.0)


@wp.kernel
def reset_contacts_kernel(mask: wp.array(dtype=wp.bool), mode: int, world_count: int,
                          shape0: wp.array(dtype=wp.int32), shape1: wp.array(dtype=wp.int32),
                          shape_body: wp.array(dtype=wp.int32), body_world: wp.array(dtype=wp.int32),
                          k_start: float, lam: wp.array(dtype=float), pen: wp.array(dtype=float)):  # fmt: skip
    ci = wp.tid()
    if ci >= shape0.shape[0]:
        return
    s0 = shape0[ci]
    s1 = shape1[ci]
    sel = False
    if s0 >= 0:
        b0 = shape_body[s0]
        if b0 >= 0:
            sel = sel or world_selected(entity_world(body_world, b0), mask, mode, world_count)
    if s1 >= 0:
        b1 = shape_body[s1]
        if b1 >= 0:
            sel = sel or world_selected(entity_world(body_world, b1), mask, mode, world_count)
    if sel:
        lam[ci] = 0.0
        pen[ci] = k_start


# --------------------------------------------------------------------------- mimic joints
# One coupled maximal-coordinate correction per iteration (after the colour sweeps): for a
# follower ``j`` of reference ``r`` and each coordinate ``k``, ``C = q_j,k - (off + m q_r,k)`` is
# driven to zero by one Gauss-Newton (XPBD-like, zero compliance) step on the poses of the up to
# four bodies involved (follower parent / child, reference parent / child), each weighted by its
# inverse mass and world inverse inertia. ``dC/d(dx, dtheta)`` is taken per body with the
# contributions of a body that plays several roles summed (e.g. a reference child that is the
# follower's parent), so shared bodies are handled exactly to first order. Coordinates are those
# of the joint rows: linear ``a . (p_c - p_p)`` with ``a`` the parent-frame axis, angular the
# twist of ``q_p^-1 q_c`` about the axis. Corrections are accumulated per body, with the body's
# share of each, and applied by ``mimic_apply_kernel``.
@wp.func
def mimic_dynamic(b: int, body_inv_mass: wp.array(dtype=float), body_flags: wp.array(dtype=wp.int32)):
    if is_dynamic(b, body_inv_mass, body_flags):
        return 1
    return 0


@wp.func
def mimic_pose(b: int, body_q: wp.array(dtype=wp.transform), body_com: wp.array(dtype=wp.vec3)):
    """(COM position, orientation) of ``b`` (origin / identity for the world)."""
    if b < 0:
        return wp.vec3(0.0), wp.quat_identity()
    X = body_q[b]
    return wp.transform_point(X, body_com[b]), wp.transform_get_rotation(X)


@wp.func
def mimic_frame(b: int, x: wp.vec3, q: wp.quat, body_com: wp.array(dtype=wp.vec3), X_local: wp.transform):
    """World joint frame of body ``b`` at COM pose ``(x, q)``."""
    if b < 0:
        return X_local
    return wp.transform(x - wp.quat_rotate(q, body_com[b]), q) * X_local


@wp.func
def mimic_coord(k: int, nl: int, axis: wp.vec3, Xwp: wp.transform, Xwc: wp.transform):
    a = wp.normalize(axis)
    if k < nl:
        e = wp.transform_get_translation(Xwc) - wp.transform_get_translation(Xwp)
        return wp.dot(wp.quat_rotate(wp.transform_get_rotation(Xwp), a), e)
    qrel = wp.quat_inverse(wp.transform_get_rotation(Xwp)) * wp.transform_get_rotation(Xwc)
    return twist_angle(qrel, a)


@wp.func
def mimic_jac(k: int, nl: int, axis: wp.vec3, Xwp: wp.transform, Xwc: wp.transform, xp: wp.vec3, xc: wp.vec3):
    """dq_k / d(dx, dtheta) of the parent (jpl, jpa) and the child (jcl, jca) at their COMs."""
    a = wp.quat_rotate(wp.transform_get_rotation(Xwp), wp.normalize(axis))
    z = wp.vec3(0.0)
    if k < nl:
        pc = wp.transform_get_translation(Xwc)
        # the parent also turns the axis: d(a . e)/dtheta_p = -(p_c - x_p) x a
        return -a, -wp.cross(pc - xp, a), a, wp.cross(pc - xc, a)
    return z, -a, z, a


@wp.func
def mimic_same(bi: int, bk: int, l: wp.vec3):
    if bi >= 0 and bi == bk:
        return l
    return wp.vec3(0.0)


@wp.func
def mimic_w(b: int, dyn: int, q: wp.quat, jl: wp.vec3, ja: wp.vec3, body_inv_mass: wp.array(dtype=float),
            body_inv_inertia: wp.array(dtype=wp.mat33)):  # fmt: skip
    if b < 0 or dyn == 0:
        return 0.0
    ab = wp.quat_rotate_inv(q, ja)
    return body_inv_mass[b] * wp.dot(jl, jl) + wp.dot(ab, body_inv_inertia[b] * ab)


@wp.func
def mimic_move(b: int, dyn: int, x: wp.vec3, q: wp.quat, jl: wp.vec3, ja: wp.vec3, dl: float,
               body_inv_mass: wp.array(dtype=float), body_inv_inertia: wp.array(dtype=wp.mat33)):  # fmt: skip
    if b < 0 or dyn == 0:
        return x, q
    dth = wp.quat_rotate(q, body_inv_inertia[b] * wp.quat_rotate_inv(q, ja)) * dl
    return x + jl * (body_inv_mass[b] * dl), wp.normalize(quat_exp(dth) * q)


@wp.func
def mimic_emit(b: int, dyn: int, first: int, touched: float, x: wp.vec3, q: wp.quat, x0: wp.vec3, q0: wp.quat,
               body_dx: wp.array(dtype=wp.vec3), body_dth: wp.array(dtype=wp.vec3),
               body_cnt: wp.array(dtype=float)):  # fmt: skip
    # ``touched``: the body's share of the correction; the apply pass divides a body's summed
    # corrections by its summed shares when they exceed 1 (a body the relationship hardly moves,
    # e.g. a reference child that is also the follower's parent with multiplier -1, does not
    # dilute the corrections of the other relationships)
    if b >= 0 and dyn != 0 and first != 0 and touched > 0.0:
        wp.atomic_add(body_dx, b, x - x0)
        wp.atomic_add(body_dth, b, quat_log(q * wp.quat_inverse(q0)))
        wp.atomic_add(body_cnt, b, touched)


@wp.kernel
def mimic_correct_kernel(
    joint_type: wp.array(dtype=wp.int32),
    joint_enabled: wp.array(dtype=wp.bool),
    joint_mimic_joint: wp.array(dtype=wp.int32),
    joint_mimic_coeffs: wp.array(dtype=wp.vec2),
    joint_parent: wp.array(dtype=wp.int32),
    joint_child: wp.array(dtype=wp.int32),
    joint_X_p: wp.array(dtype=wp.transform),
    joint_X_c: wp.array(dtype=wp.transform),
    joint_qd_start: wp.array(dtype=wp.int32),
    j_nlin: wp.array(dtype=wp.int32),
    j_nang: wp.array(dtype=wp.int32),
    joint_axis: wp.array(dtype=wp.vec3),
    body_q: wp.array(dtype=wp.transform),
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    body_flags: wp.array(dtype=wp.int32),
    # out
    body_dx: wp.array(dtype=wp.vec3),
    body_dth: wp.array(dtype=wp.vec3),
    body_cnt: wp.array(dtype=float),
):
    j = wp.tid()
    r = joint_mimic_joint[j]
    if r < 0 or r == j:
        return
    if not joint_enabled[j] or not joint_enabled[r]:
        return
    jt = joint_type[j]
    rt = joint_type[r]
    if not (jt == J_REVOLUTE or jt == J_PRISMATIC or jt == J_D6):
        return
    if not (rt == J_REVOLUTE or rt == J_PRISMATIC or rt == J_D6):
        return
    nl = j_nlin[j]
    n = nl + j_nang[j]
    rnl = j_nlin[r]
    if rnl + j_nang[r] != n:
        return
    # the four bodies (follower parent / child, reference parent / child)
    b0 = joint_parent[j]
    b1 = joint_child[j]
    b2 = joint_parent[r]
    b3 = joint_child[r]
    d0 = mimic_dynamic(b0, body_inv_mass, body_flags)
    d1 = mimic_dynamic(b1, body_inv_mass, body_flags)
    d2 = mimic_dynamic(b2, body_inv_mass, body_flags)
    d3 = mimic_dynamic(b3, body_inv_mass, body_flags)
    if d0 + d1 + d2 + d3 == 0:
        return
    # first occurrence of each body among the slots (a shared body is moved and emitted once)
    f0 = 1
    f1 = 1
    if b1 == b0:
        f1 = 0
    f2 = 1
    if b2 == b0 or b2 == b1:
        f2 = 0
    f3 = 1
    if b3 == b0 or b3 == b1 or b3 == b2:
        f3 = 0
    x0, q0 = mimic_pose(b0, body_q, body_com)
    x1, q1 = mimic_pose(b1, body_q, body_com)
    x2, q2 = mimic_pose(b2, body_q, body_com)
    x3, q3 = mimic_pose(b3, body_q, body_com)
    xs0 = x0
    qs0 = q0
    xs1 = x1
    qs1 = q1
    xs2 = x2
    qs2 = q2
    xs3 = x3
    qs3 = q3
    t0 = float(0.0)
    t1 = float(0.0)
    t2 = float(0.0)
    t3 = float(0.0)
    cf = joint_mimic_coeffs[j]
    m = cf[1]
    fs = joint_qd_start[j]
    rs = joint_qd_start[r]
    for k in range(n):
        Fp = mimic_frame(b0, x0, q0, body_com, joint_X_p[j])
        Fc = mimic_frame(b1, x1, q1, body_com, joint_X_c[j])
        Rp = mimic_frame(b2, x2, q2, body_com, joint_X_p[r])
        Rc = mimic_frame(b3, x3, q3, body_com, joint_X_c[r])
        fa = joint_axis[fs + k]
        ra = joint_axis[rs + k]
        qf = mimic_coord(k, nl, fa, Fp, Fc)
        qr = mimic_coord(k, rnl, ra, Rp, Rc)
        C = qf - (cf[0] + m * qr)
        if k >= nl:
            C = wrap_angle(C)
        l0, a0, l1, a1 = mimic_jac(k, nl, fa, Fp, Fc, x0, x1)
        l2, a2, l3, a3 = mimic_jac(k, rnl, ra, Rp, Rc, x2, x3)
        l2 = -m * l2
        a2 = -m * a2
        l3 = -m * l3
        a3 = -m * a3
        # per-body derivatives (roles of one body summed)
        L0 = l0 + mimic_same(b0, b1, l1) + mimic_same(b0, b2, l2) + mimic_same(b0, b3, l3)
        A0 = a0 + mimic_same(b0, b1, a1) + mimic_same(b0, b2, a2) + mimic_same(b0, b3, a3)
        L1 = l1 + mimic_same(b1, b0, l0) + mimic_same(b1, b2, l2) + mimic_same(b1, b3, l3)
        A1 = a1 + mimic_same(b1, b0, a0) + mimic_same(b1, b2, a2) + mimic_same(b1, b3, a3)
        L2 = l2 + mimic_same(b2, b0, l0) + mimic_same(b2, b1, l1) + mimic_same(b2, b3, l3)
        A2 = a2 + mimic_same(b2, b0, a0) + mimic_same(b2, b1, a1) + mimic_same(b2, b3, a3)
        L3 = l3 + mimic_same(b3, b0, l0) + mimic_same(b3, b1, l1) + mimic_same(b3, b2, l2)
        A3 = a3 + mimic_same(b3, b0, a0) + mimic_same(b3, b1, a1) + mimic_same(b3, b2, a2)
        w0 = float(0.0)
        w1 = float(0.0)
        w2 = float(0.0)
        w3 = float(0.0)
        if f0 != 0:
            w0 = mimic_w(b0, d0, q0, L0, A0, body_inv_mass, body_inv_inertia)
        if f1 != 0:
            w1 = mimic_w(b1, d1, q1, L1, A1, body_inv_mass, body_inv_inertia)
        if f2 != 0:
            w2 = mimic_w(b2, d2, q2, L2, A2, body_inv_mass, body_inv_inertia)
        if f3 != 0:
            w3 = mimic_w(b3, d3, q3, L3, A3, body_inv_mass, body_inv_inertia)
        w = w0 + w1 + w2 + w3
        if w > 1.0e-20:
            # each body's share of the correction (largest over the coordinates)
            t0 = wp.max(t0, w0 / w)
            t1 = wp.max(t1, w1 / w)
            t2 = wp.max(t2, w2 / w)
            t3 = wp.max(t3, w3 / w)
            dl = -C / w
            # duplicates of a body get the same (merged) update, so their copies stay equal
            x0, q0 = mimic_move(b0, d0, x0, q0, L0, A0, dl, body_inv_mass, body_inv_inertia)
            x1, q1 = mimic_move(b1, d1, x1, q1, L1, A1, dl, body_inv_mass, body_inv_inertia)
            x2, q2 = mimic_move(b2, d2, x2, q2, L2, A2, dl, body_inv_mass, body_inv_inertia)
            x3, q3 = mimic_move(b3, d3, x3, q3, L3, A3, dl, body_inv_mass, body_inv_inertia)
    mimic_emit(b0, d0, f0, t0, x0, q0, xs0, qs0, body_dx, body_dth, body_cnt)
    mimic_emit(b1, d1, f1, t1, x1, q1, xs1, qs1, body_dx, body_dth, body_cnt)
    mimic_emit(b2, d2, f2, t2, x2, q2, xs2, qs2, body_dx, body_dth, body_cnt)
    mimic_emit(b3, d3, f3, t3, x3, q3, xs3, qs3, body_dx, body_dth, body_cnt)


@wp.kernel
def mimic_apply_kernel(
    body_com: wp.array(dtype=wp.vec3),
    body_dx: wp.array(dtype=wp.vec3),
    body_dth: wp.array(dtype=wp.vec3),
    body_cnt: wp.array(dtype=float),
    body_q: wp.array(dtype=wp.transform),
):
    """Apply the accumulated mimic corrections (divided by the summed shares when above 1) to
    the pose iterate and clear the accumulators."""
    b = wp.tid()
    n = body_cnt[b]
    if n > 0.0:
        n = wp.max(n, 1.0)
        X = body_q[b]
        com = body_com[b]
        x = wp.transform_point(X, com) + body_dx[b] / n
        q = wp.normalize(quat_exp(body_dth[b] / n) * wp.transform_get_rotation(X))
        body_q[b] = wp.transform(x - wp.quat_rotate(q, com), q)
        body_dx[b] = wp.vec3(0.0)
        body_dth[b] = wp.vec3(0.0)
        body_cnt[b] = 0.0

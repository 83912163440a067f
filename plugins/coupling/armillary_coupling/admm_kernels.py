"""Warp kernels of :class:`~armillary_coupling.solver_coupled_admm.SolverCoupledADMM`.

All kernels are device work only (no host synchronisation, no allocation), so an ADMM step with
a fixed iteration count is graph-capturable.

Conventions: ``body_q`` is the body frame, ``body_com`` the COM in the body frame, ``body_qd`` is
``(v_com, w)`` and ``body_f`` is ``(f, tau_com)``, all in the world frame. A joint row's dual
variable ``lam`` is a world-frame wrench ``(F, T)`` applied to the child body at its anchor and
``(-F, -T)`` to the parent body at its anchor. An attachment's dual variable is a world force
applied to the particle and, opposite, to the body point.
"""

from __future__ import annotations

import warp as wp

JOINT_BALL = wp.constant(0)
JOINT_FIXED = wp.constant(1)
JOINT_REVOLUTE = wp.constant(2)


@wp.func
def skew(r: wp.vec3):
    return wp.mat33(0.0, -r[2], r[1], r[2], 0.0, -r[0], -r[1], r[0], 0.0)


@wp.func
def world_inv_inertia(q: wp.quat, inv_inertia_body: wp.mat33):
    R = wp.quat_to_matrix(q)
    return R * inv_inertia_body * wp.transpose(R)


@wp.func
def point_mobility(inv_m: float, Iinv: wp.mat33, r: wp.vec3):
    """Linear velocity response of the point at lever arm ``r`` (from the COM) to a unit force
    applied at that point (3x3, symmetric PSD)."""
    rx = skew(r)
    return wp.identity(3, dtype=float) * inv_m - rx * Iinv * rx


@wp.kernel
def add_forces_body_kernel(active: wp.array(dtype=wp.int32), base: wp.array(dtype=wp.spatial_vector),
                           extra: wp.array(dtype=wp.spatial_vector),
                           out: wp.array(dtype=wp.spatial_vector)):  # fmt: skip
    """Entry force input: caller's force plus coupling force on the entry's own bodies, zero on the
    others (a reduced-coordinate solver would pass a force on a kinematic child to its parent)."""
    i = wp.tid()
    if active[i] != 0:
        out[i] = base[i] + extra[i]
    else:
        out[i] = wp.spatial_vector()


@wp.kernel
def add_forces_particle_kernel(active: wp.array(dtype=wp.int32), base: wp.array(dtype=wp.vec3),
                               extra: wp.array(dtype=wp.vec3), out: wp.array(dtype=wp.vec3)):  # fmt: skip
    i = wp.tid()
    if active[i] != 0:
        out[i] = base[i] + extra[i]
    else:
        out[i] = wp.vec3(0.0)


@wp.kernel
def scale_rows_body_kernel(rows: wp.array(dtype=wp.int32), gravity: wp.array(dtype=wp.vec3),
                           mass: wp.array(dtype=float), gamma: float,
                           f: wp.array(dtype=wp.spatial_vector)):  # fmt: skip
    """Proximal gravity compensation: remove ``gamma m g`` that the (1+gamma)-scaled mass adds."""
    i = wp.tid()
    b = rows[i]
    f[b] = f[b] - wp.spatial_vector(gravity[b] * (gamma * mass[b]), wp.vec3(0.0))


@wp.kernel
def scale_rows_particle_kernel(rows: wp.array(dtype=wp.int32), gravity: wp.array(dtype=wp.vec3),
                               mass: wp.array(dtype=float), gamma: float, f: wp.array(dtype=wp.vec3)):  # fmt: skip
    i = wp.tid()
    p = rows[i]
    f[p] = f[p] - gravity[p] * (gamma * mass[p])


@wp.kernel
def proximal_shift_body_kernel(rows: wp.array(dtype=wp.int32), prev: wp.array(dtype=wp.spatial_vector),
                               gamma: float, qd: wp.array(dtype=wp.spatial_vector)):  # fmt: skip
    """Shift input velocities toward the previous iterate: ``(v_in + gamma v_prev) / (1 + gamma)``."""
    i = wp.tid()
    b = rows[i]
    qd[b] = (qd[b] + prev[b] * gamma) / (1.0 + gamma)


@wp.kernel
def proximal_shift_particle_kernel(rows: wp.array(dtype=wp.int32), prev: wp.array(dtype=wp.vec3), gamma: float,
                                   qd: wp.array(dtype=wp.vec3)):  # fmt: skip
    i = wp.tid()
    p = rows[i]
    qd[p] = (qd[p] + prev[p] * gamma) / (1.0 + gamma)


@wp.func
def ang_projector(jtype: int, axis: wp.vec3):
    if jtype == JOINT_FIXED:
        return wp.identity(3, dtype=float)
    if jtype == JOINT_REVOLUTE:
        return wp.identity(3, dtype=float) - wp.outer(axis, axis)
    return wp.mat33(0.0)


@wp.func
def relaxation(rho: float, baumgarte: float, k: float, d: float, dt: float, w: float):
    """Proximal-point relaxation ``p / (1 + p)`` of a dual step for the dimensionless penalty
    ``p = rho + baumgarte + (k dt^2 + d dt) w`` (w: the row's endpoint mobility)."""
    p = rho + baumgarte + (k * dt * dt + d * dt) * w
    return p / (1.0 + p)


@wp.kernel
def joint_update_kernel(
    jtype: wp.array(dtype=wp.int32),
    jparent: wp.array(dtype=wp.int32),
    jchild: wp.array(dtype=wp.int32),
    X_p: wp.array(dtype=wp.transform),
    X_c: wp.array(dtype=wp.transform),
    axis_local: wp.array(dtype=wp.vec3),
    friction: wp.array(dtype=float),
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    body_com: wp.array(dtype=wp.vec3),
    eff_inv_mass: wp.array(dtype=float),
    eff_inv_inertia: wp.array(dtype=wp.mat33),
    rho: float,
    k_lin: float,
    d_lin: float,
    k_ang: float,
    d_ang: float,
    baumgarte: float,
    dt: float,
    predict: int,
    iteration: int,
    apply: int,
    lam: wp.array(dtype=wp.spatial_vector),
    pred: wp.array(dtype=wp.spatial_vector),
    acc: wp.array(dtype=wp.spatial_vector),
    primal: wp.array(dtype=float),
    dual: wp.array(dtype=float),
    joint_gap: wp.array(dtype=float),
):
    """One ADMM dual update of a cross-solver joint (anchor coincidence + angular alignment rows).

    ``predict != 0`` (before the first iteration of a step): ``body_q``/``body_qd`` are the step's
    input state and the end-of-step gap is predicted as ``g + dt c + dt^2 a``, ``a`` being the
    relative acceleration the last step produced under the current wrench (``acc``, measured
    against the prediction ``pred`` by the last iteration); the predictor takes the full step.
    Otherwise they are the entries' outputs of iteration ``iteration``; ``apply == 0`` (the last
    iteration) only measures, since its correction would be counted twice by the next step's
    predictor. The dual variable ``lam`` (the coupling wrench) takes the Newton step that closes
    the gap for the linearised endpoint response ``dg = dt^2 W dlam`` (W: endpoint mobility at
    the anchors; a 3x3 Schur complement), relaxed per block by :func:`relaxation`. A revolute
    joint's axis row is a dry-friction row, ``|tau| <= friction``.
    """
    j = wp.tid()
    a = jparent[j]
    b = jchild[j]
    t = jtype[j]
    Xa = body_q[a]
    Xb = body_q[b]
    xa = wp.transform_point(Xa, wp.transform_get_translation(X_p[j]))
    xb = wp.transform_point(Xb, wp.transform_get_translation(X_c[j]))
    ra = xa - wp.transform_point(Xa, body_com[a])
    rb = xb - wp.transform_point(Xb, body_com[b])
    va = wp.spatial_top(body_qd[a])
    wa = wp.spatial_bottom(body_qd[a])
    vb = wp.spatial_top(body_qd[b])
    wb = wp.spatial_bottom(body_qd[b])
    g_lin = xb - xa
    c_lin = (vb + wp.cross(wb, rb)) - (va + wp.cross(wa, ra))
    qa = wp.transform_get_rotation(Xa) * wp.transform_get_rotation(X_p[j])
    qb = wp.transform_get_rotation(Xb) * wp.transform_get_rotation(X_c[j])
    axis = wp.normalize(wp.quat_rotate(qa, axis_local[j]))
    g_ang = wp.vec3(0.0)
    if t == JOINT_FIXED:
        qr = qb * wp.quat_inverse(qa)
        s = 2.0
        if qr[3] < 0.0:
            s = -2.0
        g_ang = wp.vec3(qr[0], qr[1], qr[2]) * s
    elif t == JOINT_REVOLUTE:
        g_ang = wp.cross(axis, wp.quat_rotate(qb, axis_local[j]))
    P = ang_projector(t, axis)
    c_ang = wb - wa
    g_ang = P * g_ang
    h2 = dt * dt
    if predict != 0:
        # end-of-step gap with the last wrench: drift + the relative acceleration seen last step
        g_lin = g_lin + c_lin * dt
        g_ang = g_ang + (P * c_ang) * dt
        pred[j] = wp.spatial_vector(g_lin, g_ang)
        g_lin = g_lin + wp.spatial_top(acc[j]) * h2
        g_ang = g_ang + P * wp.spatial_bottom(acc[j]) * h2
    elif apply == 0:
        acc[j] = (wp.spatial_vector(g_lin, g_ang) - pred[j]) / h2

    # endpoint mobilities (world frame, at the anchors)
    Ia = world_inv_inertia(wp.transform_get_rotation(Xa), eff_inv_inertia[a])
    Ib = world_inv_inertia(wp.transform_get_rotation(Xb), eff_inv_inertia[b])
    W11 = point_mobility(eff_inv_mass[a], Ia, ra) + point_mobility(eff_inv_mass[b], Ib, rb)
    W12 = -(skew(ra) * Ia) - skew(rb) * Ib  # linear velocity response to a torque
    W21 = Ia * skew(ra) + Ib * skew(rb)  # angular velocity response to a force
    W22 = Ia + Ib

    # Newton direction: dt^2 [W11 W12 P; P W21 P W22 P + (I - P)/dt^2] d = -[g_lin; g_ang]
    I3 = wp.identity(3, dtype=float)
    A11 = W11 * h2
    A12 = W12 * P * h2
    A21 = P * W21 * h2
    A22 = P * W22 * P * h2 + (I3 - P)
    A11i = wp.inverse(A11)
    S = A22 - A21 * A11i * A12
    d2 = -(wp.inverse(S) * (g_ang - A21 * (A11i * g_lin)))
    d1 = -(A11i * (g_lin + A12 * d2))
    w_lin = (W11[0, 0] + W11[1, 1] + W11[2, 2]) / 3.0
    w_ang = (W22[0, 0] + W22[1, 1] + W22[2, 2]) / 3.0
    om_l = relaxation(rho, baumgarte, k_lin, d_lin, dt, w_lin)
    om_a = relaxation(rho, baumgarte, k_ang, d_ang, dt, w_ang)
    if predict != 0:
        # the predictor takes the full step: an under-relaxed predictor feeds an integrating
        # warm start and destabilises single-iteration coupling
        om_l = 1.0
        om_a = 1.0

    F = wp.spatial_top(lam[j])
    T = wp.spatial_bottom(lam[j])
    tau_ax = wp.dot(T, axis)
    F_new = F + d1 * om_l
    T_new = P * T + (P * d2) * om_a

    if t == JOINT_REVOLUTE:
        # dry friction about the hinge axis: drive the axial relative rate to 0, |tau| <= friction
        w_ax = wp.dot(axis, W22 * axis)
        tau_new = float(0.0)
        fmax = friction[j]
        if fmax > 0.0 and w_ax > 0.0:
            c_ax = wp.dot(c_ang, axis)
            if predict != 0:
                c_ax = float(0.0)
            tau_new = wp.clamp(tau_ax - om_a * c_ax / (dt * w_ax), -fmax, fmax)
        T_new = T_new + axis * tau_new

    new = wp.spatial_vector(F_new, T_new)
    if apply != 0:
        lam[j] = new
    if predict == 0:
        gl = wp.length(g_lin)
        wp.atomic_max(primal, iteration, wp.max(gl, wp.length(g_ang)))
        wp.atomic_max(joint_gap, iteration, gl)
        wp.atomic_max(dual, iteration, wp.length(new - wp.spatial_vector(F, T)))


@wp.kernel
def attachment_update_kernel(
    body: wp.array(dtype=wp.int32),
    particle: wp.array(dtype=wp.int32),
    body_point: wp.array(dtype=wp.vec3),
    stiffness: wp.array(dtype=float),
    damping: wp.array(dtype=float),
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    body_com: wp.array(dtype=wp.vec3),
    particle_q: wp.array(dtype=wp.vec3),
    particle_qd: wp.array(dtype=wp.vec3),
    eff_inv_mass: wp.array(dtype=float),
    eff_inv_inertia: wp.array(dtype=wp.mat33),
    particle_eff_inv_mass: wp.array(dtype=float),
    rho: float,
    baumgarte: float,
    dt: float,
    predict: int,
    iteration: int,
    apply: int,
    lam: wp.array(dtype=wp.vec3),
    pred: wp.array(dtype=wp.vec3),
    acc: wp.array(dtype=wp.vec3),
    primal: wp.array(dtype=float),
    dual: wp.array(dtype=float),
    attachment_gap: wp.array(dtype=float),
):
    """One ADMM dual update of a body-particle attachment (3 translational rows; see
    :func:`joint_update_kernel`). ``lam`` is the force on the particle (opposite on the body)."""
    i = wp.tid()
    b = body[i]
    p = particle[i]
    X = body_q[b]
    xb = wp.transform_point(X, body_point[i])
    r = xb - wp.transform_point(X, body_com[b])
    vb = wp.spatial_top(body_qd[b]) + wp.cross(wp.spatial_bottom(body_qd[b]), r)
    g = particle_q[p] - xb
    c = particle_qd[p] - vb
    h2 = dt * dt
    if predict != 0:
        g = g + c * dt
        pred[i] = g
        g = g + acc[i] * h2
    elif apply == 0:
        acc[i] = (g - pred[i]) / h2
    Ib = world_inv_inertia(wp.transform_get_rotation(X), eff_inv_inertia[b])
    W = point_mobility(eff_inv_mass[b], Ib, r) + wp.identity(3, dtype=float) * particle_eff_inv_mass[p]
    w = (W[0, 0] + W[1, 1] + W[2, 2]) / 3.0
    om = relaxation(rho, baumgarte, stiffness[i], damping[i], dt, w)
    if predict != 0:
        om = 1.0
    f = lam[i]
    f_new = f - (wp.inverse(W * (dt * dt)) * g) * om
    if apply != 0:
        lam[i] = f_new
    if predict == 0:
        gl = wp.length(g)
        wp.atomic_max(primal, iteration, gl)
        wp.atomic_max(attachment_gap, iteration, gl)
        wp.atomic_max(dual, iteration, wp.length(f_new - f))


@wp.kernel
def joint_splat_kernel(
    jparent: wp.array(dtype=wp.int32),
    jchild: wp.array(dtype=wp.int32),
    X_p: wp.array(dtype=wp.transform),
    X_c: wp.array(dtype=wp.transform),
    body_q: wp.array(dtype=wp.transform),
    body_com: wp.array(dtype=wp.vec3),
    lam: wp.array(dtype=wp.spatial_vector),
    body_f: wp.array(dtype=wp.spatial_vector),
):
    """Equal and opposite joint wrenches into the coupling body forces (at the COMs)."""
    j = wp.tid()
    a = jparent[j]
    b = jchild[j]
    F = wp.spatial_top(lam[j])
    T = wp.spatial_bottom(lam[j])
    Xa = body_q[a]
    Xb = body_q[b]
    ra = wp.transform_point(Xa, wp.transform_get_translation(X_p[j])) - wp.transform_point(Xa, body_com[a])
    rb = wp.transform_point(Xb, wp.transform_get_translation(X_c[j])) - wp.transform_point(Xb, body_com[b])
    wp.atomic_add(body_f, b, wp.spatial_vector(F, T + wp.cross(rb, F)))
    wp.atomic_add(body_f, a, wp.spatial_vector(-F, -T - wp.cross(ra, F)))


@wp.kernel
def attachment_splat_kernel(
    body: wp.array(dtype=wp.int32),
    particle: wp.array(dtype=wp.int32),
    body_point: wp.array(dtype=wp.vec3),
    body_q: wp.array(dtype=wp.transform),
    body_com: wp.array(dtype=wp.vec3),
    lam: wp.array(dtype=wp.vec3),
    body_f: wp.array(dtype=wp.spatial_vector),
    particle_f: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    b = body[i]
    X = body_q[b]
    r = wp.transform_point(X, body_point[i]) - wp.transform_point(X, body_com[b])
    f = lam[i]
    wp.atomic_add(particle_f, particle[i], f)
    wp.atomic_add(body_f, b, wp.spatial_vector(-f, -wp.cross(r, f)))

"""Warp kernels and per-joint functions of forward / inverse kinematics and mimic joints.

Joint kinematics (all in the joint *parent anchor* frame ``X_WP * joint_X_p``): the joint
transform ``X_j = (t, R)`` maps the child anchor frame into the parent anchor frame, so
``X_WC = X_WP * joint_X_p * X_j * inverse(joint_X_c)``.

======================  =======================================  ==========================================
type                    ``X_j`` from ``joint_q``                 ``joint_qd``
======================  =======================================  ==========================================
PRISMATIC               ``t = a q``                              ``q'`` along ``a``
REVOLUTE                ``R = rot(a, q)``                        ``q'`` about ``a``
BALL                    ``R = quat(q)`` (xyzw)                   angular velocity, parent anchor frame
FIXED                   identity                                 none
FREE, DISTANCE, ROD     ``t = q[0:3]``, ``R = quat(q[3:7])``     child-COM velocity, angular velocity,
                                                                 relative to the parent, parent anchor frame
D6                      ``t = sum a_i q_i`` (linear axes),       linear rates along ``a_i``; angular rates
                        ``R = rot(b_0, q_0) rot(b_1, q_1) ...``  about the moving axes ``R_0..R_{k-1} b_k``
======================  =======================================  ==========================================
"""

from __future__ import annotations

import warp as wp

from .spatial import ang, lin, quat_twist_angle, rotate_into_plane_angle, spatial

JT_PRISMATIC = wp.constant(0)
JT_REVOLUTE = wp.constant(1)
JT_BALL = wp.constant(2)
JT_FIXED = wp.constant(3)
JT_FREE = wp.constant(4)
JT_DISTANCE = wp.constant(5)
JT_D6 = wp.constant(6)
JT_ROD = wp.constant(7)

SEL_ALL = wp.constant(0)
SEL_MASK = wp.constant(1)
SEL_INDICES = wp.constant(2)


@wp.func
def selected_articulation(tid: int, mode: int, mask: wp.array(dtype=wp.bool), indices: wp.array(dtype=wp.int32),
                          count: int) -> int:  # fmt: skip
    """Articulation handled by thread ``tid`` (``-1``: nothing to do)."""
    a = tid
    if mode == SEL_INDICES:
        a = indices[tid]
        if a < 0 or a >= count:
            return -1
    elif mode == SEL_MASK:
        if not mask[a]:
            return -1
    return a


@wp.func
def axes_solve(n: int, a0: wp.vec3, a1: wp.vec3, a2: wp.vec3, x: wp.vec3) -> wp.vec3:
    """Coefficients ``c`` (first ``n``) minimizing ``|sum c_i a_i - x|`` (exact for orthonormal axes)."""
    if n == 1:
        return wp.vec3(wp.dot(a0, x) / wp.max(wp.dot(a0, a0), 1.0e-20), 0.0, 0.0)
    if n == 2:
        g00 = wp.dot(a0, a0)
        g01 = wp.dot(a0, a1)
        g11 = wp.dot(a1, a1)
        r0 = wp.dot(a0, x)
        r1 = wp.dot(a1, x)
        det = g00 * g11 - g01 * g01
        if wp.abs(det) < 1.0e-12:
            return wp.vec3(r0 / wp.max(g00, 1.0e-20), 0.0, 0.0)
        return wp.vec3((g11 * r0 - g01 * r1) / det, (g00 * r1 - g01 * r0) / det, 0.0)
    if n == 3:
        A = wp.mat33(a0[0], a1[0], a2[0], a0[1], a1[1], a2[1], a0[2], a1[2], a2[2])
        d = wp.determinant(A)
        if wp.abs(d) < 1.0e-9:
            return wp.vec3(wp.dot(a0, x), wp.dot(a1, x), wp.dot(a2, x))
        return wp.inverse(A) * x
    return wp.vec3(0.0)


@wp.func
def wrap_angle(x: float) -> float:
    y = x
    while y > wp.pi:
        y = y - 2.0 * wp.pi
    while y <= -wp.pi:
        y = y + 2.0 * wp.pi
    return y


@wp.func
def d6_decode_angles(n: int, a0: wp.vec3, a1: wp.vec3, a2: wp.vec3, r: wp.quat) -> wp.vec3:
    """Angles ``q`` with ``rot(a0, q0) rot(a1, q1) rot(a2, q2) ~= r`` (first ``n`` axes)."""
    if n == 1:
        return wp.vec3(quat_twist_angle(r, a0), 0.0, 0.0)
    if n == 2:
        u = wp.quat_rotate(r, a1)
        q0 = rotate_into_plane_angle(a1, u, a0)
        rem = wp.quat_inverse(wp.quat_from_axis_angle(a0, q0)) * r
        return wp.vec3(q0, quat_twist_angle(rem, a1), 0.0)
    if n == 3:
        u = wp.quat_rotate(r, a2)
        a01 = wp.dot(a0, a1)
        a12 = wp.dot(a1, a2)
        A = wp.dot(a0, a2) - a12 * a01
        B = wp.dot(a0, wp.cross(a1, a2))
        C = a01 * a12
        rr = wp.sqrt(A * A + B * B)
        q1 = float(0.0)
        if rr > 1.0e-9:
            phi = wp.atan2(B, A)
            x = wp.clamp((wp.dot(a0, u) - C) / rr, -1.0, 1.0)
            d = wp.acos(x)
            c1 = wrap_angle(phi + d)
            c2 = wrap_angle(phi - d)
            q1 = c1
            if wp.abs(c2) < wp.abs(c1):
                q1 = c2
        w = wp.quat_rotate(wp.quat_from_axis_angle(a1, q1), a2)
        q0 = rotate_into_plane_angle(w, u, a0)
        r01 = wp.quat_from_axis_angle(a0, q0) * wp.quat_from_axis_angle(a1, q1)
        rem = wp.quat_inverse(r01) * r
        return wp.vec3(q0, q1, quat_twist_angle(rem, a2))
    return wp.vec3(0.0)


@wp.func
def joint_relative(jtype: int, q_start: int, qd_start: int, n_lin: int, n_ang: int,
                   joint_q: wp.array(dtype=float), joint_qd: wp.array(dtype=float),
                   joint_axis: wp.array(dtype=wp.vec3)):  # fmt: skip
    """Joint transform ``X_j`` and relative twist ``(v, w)`` in the parent anchor frame.

    ``v`` is the velocity of the child anchor origin, except for FREE-like joints where it
    is the velocity of the child COM (the returned flag is ``True`` then).
    """
    t = wp.vec3(0.0)
    r = wp.quat_identity()
    v = wp.vec3(0.0)
    w = wp.vec3(0.0)
    at_com = False
    if jtype == JT_PRISMATIC:
        a = joint_axis[qd_start]
        t = a * joint_q[q_start]
        v = a * joint_qd[qd_start]
    elif jtype == JT_REVOLUTE:
        a = joint_axis[qd_start]
        r = wp.quat_from_axis_angle(a, joint_q[q_start])
        w = a * joint_qd[qd_start]
    elif jtype == JT_BALL:
        r = wp.normalize(wp.quat(joint_q[q_start], joint_q[q_start + 1], joint_q[q_start + 2], joint_q[q_start + 3]))
        w = wp.vec3(joint_qd[qd_start], joint_qd[qd_start + 1], joint_qd[qd_start + 2])
    elif jtype == JT_FREE or jtype == JT_DISTANCE or jtype == JT_ROD:
        t = wp.vec3(joint_q[q_start], joint_q[q_start + 1], joint_q[q_start + 2])
        r = wp.normalize(wp.quat(joint_q[q_start + 3], joint_q[q_start + 4], joint_q[q_start + 5], joint_q[q_start + 6]))
        v = wp.vec3(joint_qd[qd_start], joint_qd[qd_start + 1], joint_qd[qd_start + 2])
        w = wp.vec3(joint_qd[qd_start + 3], joint_qd[qd_start + 4], joint_qd[qd_start + 5])
        at_com = True
    elif jtype == JT_D6:
        # constant trip counts (unrolled): Warp's adjoint of a value carried across the
        # iterations of a dynamic loop would be wrong
        for i in range(3):
            if i < n_lin:
                a = joint_axis[qd_start + i]
                t = t + a * joint_q[q_start + i]
                v = v + a * joint_qd[qd_start + i]
        for k in range(3):
            if k < n_ang:
                a = joint_axis[qd_start + n_lin + k]
                w = w + wp.quat_rotate(r, a) * joint_qd[qd_start + n_lin + k]
                r = r * wp.quat_from_axis_angle(a, joint_q[q_start + n_lin + k])
    return wp.transform(t, r), v, w, at_com


@wp.func
def fk_joint(
    j: int,
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
    joint_q: wp.array(dtype=float),
    joint_qd: wp.array(dtype=float),
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
):
    """Forward kinematics of one joint: write the child's ``body_q`` (world pose) and ``body_qd``
    (COM twist, world frame) from the parent's (already computed) and the joint coordinates."""
    c = joint_child[j]
    p = joint_parent[j]
    X_WP = wp.transform_identity()
    v_P = wp.vec3(0.0)
    w_P = wp.vec3(0.0)
    com_P = wp.vec3(0.0)
    if p >= 0:
        X_WP = body_q[p]
        v_P = lin(body_qd[p])
        w_P = ang(body_qd[p])
        com_P = wp.transform_point(X_WP, body_com[p])
    jt = joint_type[j]
    X_j, v_j, w_j, at_com = joint_relative(
        jt, joint_q_start[j], joint_qd_start[j], joint_dof_dim[j, 0], joint_dof_dim[j, 1], joint_q, joint_qd,
        joint_axis,
    )
    X_WPJ = X_WP * joint_X_p[j]
    X_WCJ = X_WPJ * X_j
    X_WC = X_WCJ * wp.transform_inverse(joint_X_c[j])
    com_C = wp.transform_point(X_WC, body_com[c])
    w_rel = wp.transform_vector(X_WPJ, w_j)
    v_rel = wp.transform_vector(X_WPJ, v_j)
    if not at_com:
        v_rel = v_rel + wp.cross(w_rel, com_C - wp.transform_get_translation(X_WCJ))
    body_q[c] = X_WC
    body_qd[c] = spatial(v_P + wp.cross(w_P, com_C - com_P) + v_rel, w_P + w_rel)


@wp.kernel
def eval_fk_kernel(
    art_start: wp.array(dtype=wp.int32),
    art_end: wp.array(dtype=wp.int32),
    art_count: int,
    joint_order: wp.array(dtype=wp.int32),
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
    body_flags: wp.array(dtype=wp.int32),
    joint_q: wp.array(dtype=float),
    joint_qd: wp.array(dtype=float),
    sel_mode: int,
    mask: wp.array(dtype=wp.bool),
    indices: wp.array(dtype=wp.int32),
    use_joint_mask: int,
    joint_mask: wp.array(dtype=wp.bool),
    flag_filter: int,
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
):
    a = selected_articulation(wp.tid(), sel_mode, mask, indices, art_count)
    if a < 0:
        return
    for jj in range(art_start[a], art_end[a]):
        j = joint_order[jj]
        if use_joint_mask != 0:
            if not joint_mask[j]:
                continue
        c = joint_child[j]
        if (body_flags[c] & flag_filter) == 0:
            continue
        fk_joint(j, joint_type, joint_parent, joint_child, joint_X_p, joint_X_c, joint_q_start, joint_qd_start,
                 joint_dof_dim, joint_axis, body_com, joint_q, joint_qd, body_q, body_qd)  # fmt: skip


@wp.kernel
def eval_ik_kernel(
    art_start: wp.array(dtype=wp.int32),
    art_end: wp.array(dtype=wp.int32),
    art_count: int,
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
    body_flags: wp.array(dtype=wp.int32),
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    sel_mode: int,
    mask: wp.array(dtype=wp.bool),
    indices: wp.array(dtype=wp.int32),
    flag_filter: int,
    joint_q: wp.array(dtype=float),
    joint_qd: wp.array(dtype=float),
):
    a = selected_articulation(wp.tid(), sel_mode, mask, indices, art_count)
    if a < 0:
        return
    for j in range(art_start[a], art_end[a]):
        c = joint_child[j]
        if (body_flags[c] & flag_filter) == 0:
            continue
        p = joint_parent[j]
        X_WP = wp.transform_identity()
        v_P = wp.vec3(0.0)
        w_P = wp.vec3(0.0)
        com_P = wp.vec3(0.0)
        if p >= 0:
            X_WP = body_q[p]
            v_P = lin(body_qd[p])
            w_P = ang(body_qd[p])
            com_P = wp.transform_point(X_WP, body_com[p])
        X_WC = body_q[c]
        X_WPJ = X_WP * joint_X_p[j]
        X_WCJ = X_WC * joint_X_c[j]
        X_j = wp.transform_inverse(X_WPJ) * X_WCJ
        com_C = wp.transform_point(X_WC, body_com[c])
        w_rel_W = ang(body_qd[c]) - w_P
        v_com_W = lin(body_qd[c]) - v_P - wp.cross(w_P, com_C - com_P)  # child COM, relative to the parent
        v_anchor_W = v_com_W - wp.cross(w_rel_W, com_C - wp.transform_get_translation(X_WCJ))
        w_rel = wp.transform_vector(wp.transform_inverse(X_WPJ), w_rel_W)
        v_com = wp.transform_vector(wp.transform_inverse(X_WPJ), v_com_W)
        v_anchor = wp.transform_vector(wp.transform_inverse(X_WPJ), v_anchor_W)
        t = wp.transform_get_translation(X_j)
        r = wp.transform_get_rotation(X_j)

        jt = joint_type[j]
        qs = joint_q_start[j]
        ds = joint_qd_start[j]
        if jt == JT_PRISMATIC:
            ax = joint_axis[ds]
            joint_q[qs] = wp.dot(t, ax)
            joint_qd[ds] = wp.dot(v_anchor, ax)
        elif jt == JT_REVOLUTE:
            ax = joint_axis[ds]
            joint_q[qs] = quat_twist_angle(r, ax)
            joint_qd[ds] = wp.dot(w_rel, ax)
        elif jt == JT_BALL:
            for k in range(4):
                joint_q[qs + k] = r[k]
            for k in range(3):
                joint_qd[ds + k] = w_rel[k]
        elif jt == JT_FREE or jt == JT_DISTANCE or jt == JT_ROD:
            for k in range(3):
                joint_q[qs + k] = t[k]
                joint_qd[ds + k] = v_com[k]
                joint_qd[ds + 3 + k] = w_rel[k]
            for k in range(4):
                joint_q[qs + 3 + k] = r[k]
        elif jt == JT_D6:
            n_lin = joint_dof_dim[j, 0]
            n_ang = joint_dof_dim[j, 1]
            if n_lin > 0:
                l0 = joint_axis[ds]
                l1 = l0
                l2 = l0
                if n_lin > 1:
                    l1 = joint_axis[ds + 1]
                if n_lin > 2:
                    l2 = joint_axis[ds + 2]
                ql = axes_solve(n_lin, l0, l1, l2, t)
                vl = axes_solve(n_lin, l0, l1, l2, v_anchor)
                for i in range(n_lin):
                    joint_q[qs + i] = ql[i]
                    joint_qd[ds + i] = vl[i]
            if n_ang > 0:
                b0 = joint_axis[ds + n_lin]
                b1 = b0
                b2 = b0
                if n_ang > 1:
                    b1 = joint_axis[ds + n_lin + 1]
                if n_ang > 2:
                    b2 = joint_axis[ds + n_lin + 2]
                qa = d6_decode_angles(n_ang, b0, b1, b2, r)
                # moving axes at the decoded angles
                r0 = wp.quat_from_axis_angle(b0, qa[0])
                m1 = wp.quat_rotate(r0, b1)
                m2 = wp.quat_rotate(r0 * wp.quat_from_axis_angle(b1, qa[1]), b2)
                va = axes_solve(n_ang, b0, m1, m2, w_rel)
                for k in range(n_ang):
                    joint_q[qs + n_lin + k] = qa[k]
                    joint_qd[ds + n_lin + k] = va[k]


@wp.func
def mimic_joint(
    j: int,
    joint_mimic_joint: wp.array(dtype=wp.int32),
    joint_mimic_coeffs: wp.array(dtype=wp.vec2),
    joint_q_start: wp.array(dtype=wp.int32),
    joint_qd_start: wp.array(dtype=wp.int32),
    copy: int,
    q_in: wp.array(dtype=float),
    qd_in: wp.array(dtype=float),
    q_out: wp.array(dtype=float),
    qd_out: wp.array(dtype=float),
):
    qs = joint_q_start[j]
    qe = joint_q_start[j + 1]
    ds = joint_qd_start[j]
    de = joint_qd_start[j + 1]
    ref = joint_mimic_joint[j]
    if ref < 0:
        if copy != 0:
            for i in range(qs, qe):
                q_out[i] = q_in[i]
            for i in range(ds, de):
                qd_out[i] = qd_in[i]
        return
    cf = joint_mimic_coeffs[j]
    rq = joint_q_start[ref]
    rd = joint_qd_start[ref]
    for i in range(qe - qs):
        q_out[qs + i] = cf[0] + cf[1] * q_in[rq + i]
    for i in range(de - ds):
        qd_out[ds + i] = cf[1] * qd_in[rd + i]


@wp.kernel
def eval_mimic_joints_kernel(
    joint_mimic_joint: wp.array(dtype=wp.int32),
    joint_mimic_coeffs: wp.array(dtype=wp.vec2),
    joint_q_start: wp.array(dtype=wp.int32),
    joint_qd_start: wp.array(dtype=wp.int32),
    copy: int,
    q_in: wp.array(dtype=float),
    qd_in: wp.array(dtype=float),
    q_out: wp.array(dtype=float),
    qd_out: wp.array(dtype=float),
):
    j = wp.tid()
    mimic_joint(j, joint_mimic_joint, joint_mimic_coeffs, joint_q_start, joint_qd_start, copy, q_in, qd_in, q_out,
                qd_out)  # fmt: skip


@wp.kernel
def eval_mimic_articulations_kernel(
    art_start: wp.array(dtype=wp.int32),
    art_end: wp.array(dtype=wp.int32),
    art_count: int,
    sel_mode: int,
    mask: wp.array(dtype=wp.bool),
    indices: wp.array(dtype=wp.int32),
    joint_mimic_joint: wp.array(dtype=wp.int32),
    joint_mimic_coeffs: wp.array(dtype=wp.vec2),
    joint_q_start: wp.array(dtype=wp.int32),
    joint_qd_start: wp.array(dtype=wp.int32),
    copy: int,
    q_in: wp.array(dtype=float),
    qd_in: wp.array(dtype=float),
    q_out: wp.array(dtype=float),
    qd_out: wp.array(dtype=float),
):
    a = selected_articulation(wp.tid(), sel_mode, mask, indices, art_count)
    if a < 0:
        return
    for j in range(art_start[a], art_end[a]):
        mimic_joint(j, joint_mimic_joint, joint_mimic_coeffs, joint_q_start, joint_qd_start, copy, q_in, qd_in,
                    q_out, qd_out)  # fmt: skip

"""Warp kernels of the joint-space dynamics: motion subspaces, composite-rigid-body mass
matrix, recursive Newton-Euler bias forces, Jacobians (one thread per articulation).

All spatial quantities are world-frame twists / wrenches / inertias (:mod:`.spatial`) about
a per-articulation reference point ``O``: the origin of the first body of the articulation.

Motion subspace columns ``S`` (``body_qd`` of the child changes by ``S qd_j`` relative to
its parent), for a joint with parent anchor rotation ``R = R_W(PJ)``:

* PRISMATIC / D6 linear: ``(R a, 0)``;
* REVOLUTE / BALL / D6 angular: rotation about the child anchor origin with axis ``R a``
  (BALL: the parent anchor axes; D6: the axes moved by the earlier angular DOFs);
* FREE / DISTANCE: translations along the parent anchor axes, then rotations about the
  child COM (so ``qd`` is the child-COM twist in the parent anchor frame).

The velocity-product acceleration of a joint is ``V_child x (S qd) + kappa`` where ``kappa``
is the derivative of ``S`` seen from the parent frame times ``qd`` (non-zero for FREE-like
and D6 joints only).
"""

from __future__ import annotations

import warp as wp

from .gravity import gravity_of_world
from .kinematics_kernels import JT_BALL, JT_D6, JT_DISTANCE, JT_FREE, JT_PRISMATIC, JT_REVOLUTE, JT_ROD, SEL_MASK
from .spatial import (
    ang, body_spatial_inertia, lin, point_twist, spatial, twist_at, twist_cross, world_inertia, wrench_cross,
)  # fmt: skip


@wp.func
def in_articulation(joint: int, a: int, joint_articulation: wp.array(dtype=wp.int32)) -> bool:
    if joint < 0:
        return False
    return joint_articulation[joint] == a


@wp.func
def free_like(jt: int) -> bool:
    return jt == JT_FREE or jt == JT_DISTANCE or jt == JT_ROD


@wp.func
def articulation_origin(a: int, art_start: wp.array(dtype=wp.int32), joint_order: wp.array(dtype=wp.int32),
                        joint_child: wp.array(dtype=wp.int32), body_q: wp.array(dtype=wp.transform)) -> wp.vec3:  # fmt: skip
    return wp.transform_get_translation(body_q[joint_child[joint_order[art_start[a]]]])


@wp.func
def joint_subspace(
    j: int,
    origin: wp.vec3,
    joint_type: wp.array(dtype=wp.int32),
    joint_parent: wp.array(dtype=wp.int32),
    joint_child: wp.array(dtype=wp.int32),
    joint_X_p: wp.array(dtype=wp.transform),
    joint_X_c: wp.array(dtype=wp.transform),
    joint_q_start: wp.array(dtype=wp.int32),
    joint_qd_start: wp.array(dtype=wp.int32),
    joint_dof_dim: wp.array2d(dtype=wp.int32),
    joint_axis: wp.array(dtype=wp.vec3),
    body_q: wp.array(dtype=wp.transform),
    body_com: wp.array(dtype=wp.vec3),
    joint_q: wp.array(dtype=float),
    joint_qd: wp.array(dtype=float),
    with_bias: int,
    S: wp.array(dtype=wp.spatial_vector),
):
    """Write the motion subspace columns of joint ``j`` into ``S``; return ``(S qd, kappa)``
    (only computed when ``with_bias``)."""
    p = joint_parent[j]
    c = joint_child[j]
    X_WP = wp.transform_identity()
    if p >= 0:
        X_WP = body_q[p]
    X_WPJ = X_WP * joint_X_p[j]
    X_WC = body_q[c]
    p_anchor = wp.transform_get_translation(X_WC * joint_X_c[j]) - origin
    com_c = wp.transform_point(X_WC, body_com[c]) - origin
    jt = joint_type[j]
    ds = joint_qd_start[j]
    qs = joint_q_start[j]
    n_lin = joint_dof_dim[j, 0]
    n_ang = joint_dof_dim[j, 1]
    vJ = wp.spatial_vector()
    kappa = wp.spatial_vector()
    if jt == JT_PRISMATIC:
        s = spatial(wp.transform_vector(X_WPJ, joint_axis[ds]), wp.vec3(0.0))
        S[ds] = s
        if with_bias != 0:
            vJ = s * joint_qd[ds]
    elif jt == JT_REVOLUTE:
        s = point_twist(p_anchor, wp.transform_vector(X_WPJ, joint_axis[ds]))
        S[ds] = s
        if with_bias != 0:
            vJ = s * joint_qd[ds]
    elif jt == JT_BALL:
        for k in range(3):
            e = wp.vec3(0.0)
            e[k] = 1.0
            s = point_twist(p_anchor, wp.transform_vector(X_WPJ, e))
            S[ds + k] = s
            if with_bias != 0:
                vJ = vJ + s * joint_qd[ds + k]
    elif jt == JT_FREE or jt == JT_DISTANCE or jt == JT_ROD:
        v_rel = wp.vec3(0.0)
        w_rel = wp.vec3(0.0)
        for k in range(3):
            e = wp.vec3(0.0)
            e[k] = 1.0
            axis = wp.transform_vector(X_WPJ, e)
            sl = spatial(axis, wp.vec3(0.0))
            sa = point_twist(com_c, axis)
            S[ds + k] = sl
            S[ds + 3 + k] = sa
            if with_bias != 0:
                v_rel = v_rel + axis * joint_qd[ds + k]
                w_rel = w_rel + axis * joint_qd[ds + 3 + k]
                vJ = vJ + sl * joint_qd[ds + k] + sa * joint_qd[ds + 3 + k]
        if with_bias != 0:
            kappa = spatial(wp.cross(v_rel, w_rel), wp.vec3(0.0))
    elif jt == JT_D6:
        # constant trip counts (unrolled): Warp's adjoint of a value carried across the
        # iterations of a dynamic loop would be wrong
        p_dot = wp.vec3(0.0)
        for i in range(3):
            if i < n_lin:
                axis = wp.transform_vector(X_WPJ, joint_axis[ds + i])
                s = spatial(axis, wp.vec3(0.0))
                S[ds + i] = s
                if with_bias != 0:
                    p_dot = p_dot + axis * joint_qd[ds + i]
                    vJ = vJ + s * joint_qd[ds + i]
        r = wp.quat_identity()
        w_before = wp.vec3(0.0)
        for k in range(3):
            if k < n_ang:
                a = joint_axis[ds + n_lin + k]
                b = wp.transform_vector(X_WPJ, wp.quat_rotate(r, a))
                r = r * wp.quat_from_axis_angle(a, joint_q[qs + n_lin + k])
                s = point_twist(p_anchor, b)
                S[ds + n_lin + k] = s
                if with_bias != 0:
                    qd = joint_qd[ds + n_lin + k]
                    vJ = vJ + s * qd
                    b_dot = wp.cross(w_before, b)
                    kappa = kappa + spatial(wp.cross(p_dot, b) + wp.cross(p_anchor, b_dot), b_dot) * qd
                    w_before = w_before + b * qd
    return vJ, kappa


@wp.func
def assemble_mass_matrix(
    a: int,
    js: int,
    je: int,
    d0: int,
    joint_order: wp.array(dtype=wp.int32),
    joint_child: wp.array(dtype=wp.int32),
    joint_ancestor: wp.array(dtype=wp.int32),
    joint_articulation: wp.array(dtype=wp.int32),
    joint_qd_start: wp.array(dtype=wp.int32),
    joint_armature: wp.array(dtype=float),
    armature_scale: float,
    S: wp.array(dtype=wp.spatial_vector),
    Ic: wp.array(dtype=wp.spatial_matrix),
    H: wp.array3d(dtype=float),
):
    """Composite-rigid-body mass matrix of articulation ``a`` (joints ``joint_order[js:je]``, DOFs
    from ``d0``) into ``H[a]``: ``H_il = S_l . (Ic_child(i) S_i)`` along each joint's ancestor
    chain, plus ``armature_scale * joint_armature`` on the diagonal. Entries between DOFs of
    different branches are not written (the caller zeroes ``H[a]`` first). Not differentiable
    (the ancestor walk is a ``while`` loop): :func:`assemble_mass_matrix_tree` is."""
    for jj in range(js, je):
        j = joint_order[jj]
        Icc = Ic[joint_child[j]]
        for i in range(joint_qd_start[j], joint_qd_start[j + 1]):
            Fi = Icc * S[i]
            li = i - d0
            k = j
            while in_articulation(k, a, joint_articulation):
                for l in range(joint_qd_start[k], joint_qd_start[k + 1]):
                    val = wp.dot(S[l], Fi)
                    H[a, li, l - d0] = val
                    H[a, l - d0, li] = val
                k = joint_ancestor[k]
            H[a, li, li] = H[a, li, li] + armature_scale * joint_armature[i]


@wp.func
def assemble_mass_matrix_tree(
    a: int,
    js: int,
    je: int,
    d0: int,
    joint_child: wp.array(dtype=wp.int32),
    joint_qd_start: wp.array(dtype=wp.int32),
    anc_start: wp.array(dtype=wp.int32),
    anc_joints: wp.array(dtype=wp.int32),
    joint_armature: wp.array(dtype=float),
    armature_scale: float,
    S: wp.array(dtype=wp.spatial_vector),
    Ic: wp.array(dtype=wp.spatial_matrix),
    H: wp.array3d(dtype=float),
):
    """:func:`assemble_mass_matrix` in a differentiable form: the ancestors of each joint come from
    the topology cache's lists (``anc_joints[anc_start[j]:anc_start[j + 1]]``: ``j``, then its
    ancestors) instead of a ``while`` walk (Warp's adjoint does not replay a ``while`` loop, so the
    entries written inside one get no gradient), nothing is carried across loop iterations, and
    every entry of ``H[a]`` is written once (after the caller zeroed it)."""
    for j in range(js, je):
        Icc = Ic[joint_child[j]]
        for i in range(joint_qd_start[j], joint_qd_start[j + 1]):
            Fi = Icc * S[i]
            li = i - d0
            for t in range(anc_start[j], anc_start[j + 1]):
                k = anc_joints[t]
                for l in range(joint_qd_start[k], joint_qd_start[k + 1]):
                    val = wp.dot(S[l], Fi) + wp.where(l == i, armature_scale * joint_armature[i], 0.0)
                    H[a, li, l - d0] = val
                    if k != j:
                        H[a, l - d0, li] = val


@wp.kernel
def dynamics_kernel(
    art_start: wp.array(dtype=wp.int32),
    art_end: wp.array(dtype=wp.int32),
    art_count: int,
    sel_mode: int,
    mask: wp.array(dtype=wp.bool),
    joint_order: wp.array(dtype=wp.int32),
    joint_type: wp.array(dtype=wp.int32),
    joint_parent: wp.array(dtype=wp.int32),
    joint_child: wp.array(dtype=wp.int32),
    joint_ancestor: wp.array(dtype=wp.int32),
    joint_articulation: wp.array(dtype=wp.int32),
    joint_world: wp.array(dtype=wp.int32),
    joint_X_p: wp.array(dtype=wp.transform),
    joint_X_c: wp.array(dtype=wp.transform),
    joint_q_start: wp.array(dtype=wp.int32),
    joint_qd_start: wp.array(dtype=wp.int32),
    joint_dof_dim: wp.array2d(dtype=wp.int32),
    joint_axis: wp.array(dtype=wp.vec3),
    joint_armature: wp.array(dtype=float),
    anc_start: wp.array(dtype=wp.int32),
    anc_joints: wp.array(dtype=wp.int32),
    body_q: wp.array(dtype=wp.transform),
    body_com: wp.array(dtype=wp.vec3),
    body_mass: wp.array(dtype=float),
    body_inertia: wp.array(dtype=wp.mat33),
    gravity: wp.array(dtype=wp.vec3),
    joint_q: wp.array(dtype=float),
    joint_qd: wp.array(dtype=float),
    want_M: int,
    want_g: int,
    want_c: int,
    armature_scale: float,
    S: wp.array(dtype=wp.spatial_vector),
    Ic: wp.array(dtype=wp.spatial_matrix),
    V: wp.array(dtype=wp.spatial_vector),
    A: wp.array(dtype=wp.spatial_vector),
    F: wp.array(dtype=wp.spatial_vector),
    Fg: wp.array(dtype=wp.spatial_vector),
    H: wp.array3d(dtype=float),
    g_out: wp.array(dtype=float),
    c_out: wp.array(dtype=float),
):
    a = wp.tid()
    js = art_start[a]
    je = art_end[a]
    d0 = joint_qd_start[js]
    d1 = joint_qd_start[je]
    selected = True
    if sel_mode == SEL_MASK:
        selected = mask[a]
    if want_M != 0:
        n = H.shape[1]
        for r in range(n):
            for k in range(n):
                H[a, r, k] = 0.0
    if not selected:
        for i in range(d0, d1):
            if want_g != 0:
                g_out[i] = 0.0
            if want_c != 0:
                c_out[i] = 0.0
        return

    origin = articulation_origin(a, art_start, joint_order, joint_child, body_q)
    grav = gravity_of_world(gravity, joint_world[js])
    with_bias = want_c

    # forward pass: subspaces, body inertias, velocities and accelerations
    for jj in range(js, je):
        j = joint_order[jj]
        c = joint_child[j]
        vJ, kappa = joint_subspace(j, origin, joint_type, joint_parent, joint_child, joint_X_p, joint_X_c,
                                   joint_q_start, joint_qd_start, joint_dof_dim, joint_axis, body_q, body_com,
                                   joint_q, joint_qd, with_bias, S)  # fmt: skip
        X_WC = body_q[c]
        m = body_mass[c]
        com_c = wp.transform_point(X_WC, body_com[c]) - origin
        Ib = body_spatial_inertia(m, com_c, world_inertia(X_WC, body_inertia[c]))
        if want_M != 0:
            Ic[c] = Ib
        if want_g != 0:
            Fg[c] = spatial(-m * grav, -m * wp.cross(com_c, grav))
        if want_c != 0:
            Vp = wp.spatial_vector()
            Ap = wp.spatial_vector()
            if in_articulation(joint_ancestor[j], a, joint_articulation):
                Vp = V[joint_parent[j]]
                Ap = A[joint_parent[j]]
            Vc = Vp + vJ
            Ac = Ap + twist_cross(Vc, vJ) + kappa
            V[c] = Vc
            A[c] = Ac
            F[c] = Ib * Ac + wrench_cross(Vc, Ib * Vc)

    # backward pass: composite inertias and subtree wrenches, projected on the joint axes
    for jr in range(je - js):
        j = joint_order[je - 1 - jr]
        c = joint_child[j]
        ds = joint_qd_start[j]
        de = joint_qd_start[j + 1]
        fl = free_like(joint_type[j])
        com_c = wp.transform_point(body_q[c], body_com[c]) - origin
        if want_g != 0:
            fg = Fg[c]
            if fl:
                f = lin(fg)
                t = ang(fg) - wp.cross(com_c, f)
                for k in range(3):
                    g_out[ds + k] = f[k]
                    g_out[ds + 3 + k] = t[k]
            else:
                for i in range(ds, de):
                    g_out[i] = wp.dot(S[i], fg)
        if want_c != 0:
            fc = F[c]
            if fl:
                f = lin(fc)
                t = ang(fc) - wp.cross(com_c, f)
                for k in range(3):
                    c_out[ds + k] = f[k]
                    c_out[ds + 3 + k] = t[k]
            else:
                for i in range(ds, de):
                    c_out[i] = wp.dot(S[i], fc)
        if in_articulation(joint_ancestor[j], a, joint_articulation):
            p = joint_parent[j]
            if want_M != 0:
                Ic[p] = Ic[p] + Ic[c]
            if want_g != 0:
                Fg[p] = Fg[p] + Fg[c]
            if want_c != 0:
                F[p] = F[p] + F[c]

    # composite-rigid-body mass matrix
    if want_M != 0:
        assemble_mass_matrix_tree(a, js, je, d0, joint_child, joint_qd_start, anc_start, anc_joints, joint_armature,
                                  armature_scale, S, Ic, H)  # fmt: skip


@wp.kernel
def jacobian_kernel(
    art_start: wp.array(dtype=wp.int32),
    art_end: wp.array(dtype=wp.int32),
    sel_mode: int,
    mask: wp.array(dtype=wp.bool),
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
    anc_start: wp.array(dtype=wp.int32),
    anc_joints: wp.array(dtype=wp.int32),
    body_q: wp.array(dtype=wp.transform),
    body_com: wp.array(dtype=wp.vec3),
    joint_q: wp.array(dtype=float),
    joint_qd: wp.array(dtype=float),
    S: wp.array(dtype=wp.spatial_vector),
    J: wp.array3d(dtype=float),
):
    a = wp.tid()
    for r in range(J.shape[1]):
        for k in range(J.shape[2]):
            J[a, r, k] = 0.0
    if sel_mode == SEL_MASK:
        if not mask[a]:
            return
    js = art_start[a]
    je = art_end[a]
    d0 = joint_qd_start[js]
    origin = articulation_origin(a, art_start, joint_order, joint_child, body_q)
    for jj in range(js, je):
        j = joint_order[jj]
        joint_subspace(j, origin, joint_type, joint_parent, joint_child, joint_X_p, joint_X_c, joint_q_start,
                       joint_qd_start, joint_dof_dim, joint_axis, body_q, body_com, joint_q, joint_qd, 0, S)  # fmt: skip
    for j in range(js, je):
        c = joint_child[j]
        com_c = wp.transform_point(body_q[c], body_com[c]) - origin
        row = 6 * (j - js)
        for t in range(anc_start[j], anc_start[j + 1]):  # j and its ancestors: see assemble_mass_matrix_tree
            k = anc_joints[t]
            for i in range(joint_qd_start[k], joint_qd_start[k + 1]):
                s = twist_at(S[i], com_c)
                for r in range(6):
                    J[a, row + r, i - d0] = s[r]


@wp.kernel
def mass_matrix_from_jacobian_kernel(
    art_start: wp.array(dtype=wp.int32),
    art_end: wp.array(dtype=wp.int32),
    sel_mode: int,
    mask: wp.array(dtype=wp.bool),
    joint_child: wp.array(dtype=wp.int32),
    joint_qd_start: wp.array(dtype=wp.int32),
    joint_armature: wp.array(dtype=float),
    armature_scale: float,
    body_q: wp.array(dtype=wp.transform),
    body_mass: wp.array(dtype=float),
    body_inertia: wp.array(dtype=wp.mat33),
    J: wp.array3d(dtype=float),
    H: wp.array3d(dtype=float),
):
    a = wp.tid()
    n = H.shape[1]
    for r in range(n):
        for k in range(n):
            H[a, r, k] = 0.0
    if sel_mode == SEL_MASK:
        if not mask[a]:
            return
    js = art_start[a]
    je = art_end[a]
    d0 = joint_qd_start[js]
    nd = joint_qd_start[je] - d0
    for j in range(js, je):
        c = joint_child[j]
        m = body_mass[c]
        I_W = world_inertia(body_q[c], body_inertia[c])
        row = 6 * (j - js)
        for k in range(nd):
            vk = wp.vec3(J[a, row, k], J[a, row + 1, k], J[a, row + 2, k])
            wk = wp.vec3(J[a, row + 3, k], J[a, row + 4, k], J[a, row + 5, k])
            fk = m * vk
            tk = I_W * wk
            for l in range(k, nd):
                vl = wp.vec3(J[a, row, l], J[a, row + 1, l], J[a, row + 2, l])
                wl = wp.vec3(J[a, row + 3, l], J[a, row + 4, l], J[a, row + 5, l])
                val = wp.dot(vl, fk) + wp.dot(wl, tk)
                H[a, k, l] = H[a, k, l] + val
                if l != k:
                    H[a, l, k] = H[a, l, k] + val
    for i in range(nd):
        H[a, i, i] = H[a, i, i] + armature_scale * joint_armature[d0 + i]


@wp.kernel
def inverse_dynamics_force_kernel(
    art_start: wp.array(dtype=wp.int32),
    art_end: wp.array(dtype=wp.int32),
    sel_mode: int,
    mask: wp.array(dtype=wp.bool),
    joint_type: wp.array(dtype=wp.int32),
    joint_parent: wp.array(dtype=wp.int32),
    joint_X_p: wp.array(dtype=wp.transform),
    joint_qd_start: wp.array(dtype=wp.int32),
    body_q: wp.array(dtype=wp.transform),
    H: wp.array3d(dtype=float),
    qdd: wp.array(dtype=float),
    coriolis: wp.array(dtype=float),
    grav: wp.array(dtype=float),
    joint_f: wp.array(dtype=float),
):
    a = wp.tid()
    js = art_start[a]
    je = art_end[a]
    d0 = joint_qd_start[js]
    d1 = joint_qd_start[je]
    if sel_mode == SEL_MASK:
        if not mask[a]:
            for i in range(d0, d1):
                joint_f[i] = 0.0
            return
    # sums accumulate in joint_f (linear read-modify-writes), not in a local carried across the
    # iterations of a dynamic loop, whose adjoint Warp would get wrong
    n = d1 - d0
    for j in range(js, je):
        ds = joint_qd_start[j]
        de = joint_qd_start[j + 1]
        for i in range(ds, de):
            joint_f[i] = 0.0
        if free_like(joint_type[j]):
            X_WPJ = joint_X_p[j]
            p = joint_parent[j]
            if p >= 0:
                X_WPJ = body_q[p] * X_WPJ
            r = ds - d0
            for k in range(n):
                qk = qdd[d0 + k]
                f = wp.transform_vector(X_WPJ, wp.vec3(H[a, r, k], H[a, r + 1, k], H[a, r + 2, k])) * qk
                t = wp.transform_vector(X_WPJ, wp.vec3(H[a, r + 3, k], H[a, r + 4, k], H[a, r + 5, k])) * qk
                for e in range(3):
                    joint_f[ds + e] = joint_f[ds + e] + f[e]
                    joint_f[ds + 3 + e] = joint_f[ds + 3 + e] + t[e]
        else:
            for i in range(ds, de):
                for k in range(n):
                    joint_f[i] = joint_f[i] + H[a, i - d0, k] * qdd[d0 + k]
        for i in range(ds, de):
            joint_f[i] = joint_f[i] + coriolis[i] + grav[i]

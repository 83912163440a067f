"""Warp kernels of the particle half of SolverVBD (vertex block descent, Chen et al. 2024).

Every vertex solve gathers, from per-vertex adjacency lists built on the host (triangles, bending
edges, tetrahedra, springs, attachments) and per-step contact lists (body contacts,
particle-particle candidates, self-contact pairs), the force and 3x3 Hessian of the incremental
potential on its own position, then takes one guarded Newton step. No atomics in the solve: a
vertex writes only its own position.
"""

from __future__ import annotations

import warp as wp

from armillary.geometry.primitives import closest_point_triangle
from armillary.sim.gravity import gravity_of_world
from armillary.sim.spatial import skew

PARTICLE_ACTIVE = wp.constant(1)
MEMBRANE_STVK = wp.constant(0)
MEMBRANE_NEO_HOOKEAN = wp.constant(1)


@wp.func
def is_free(v: int, inv_mass: wp.array(dtype=float), flags: wp.array(dtype=wp.int32)):
    return inv_mass[v] > 0.0 and (flags[v] & PARTICLE_ACTIVE) != 0


# --------------------------------------------------------------------------- step begin / end
@wp.kernel
def predict_kernel(
    dt: float,
    gravity: wp.array(dtype=wp.vec3),
    particle_world: wp.array(dtype=wp.int32),
    q_in: wp.array(dtype=wp.vec3),
    qd_in: wp.array(dtype=wp.vec3),
    f_ext: wp.array(dtype=wp.vec3),
    inv_mass: wp.array(dtype=float),
    flags: wp.array(dtype=wp.int32),
    x_prev: wp.array(dtype=wp.vec3),
    y: wp.array(dtype=wp.vec3),
    x: wp.array(dtype=wp.vec3),
    v_pred: wp.array(dtype=wp.vec3),
    contact_count: wp.array(dtype=wp.int32),
):
    v = wp.tid()
    xp = q_in[v]
    x_prev[v] = xp
    contact_count[v] = 0
    if is_free(v, inv_mass, flags):
        g = gravity_of_world(gravity, particle_world[v])
        a = g
        if f_ext.shape[0] > v:
            a = a + f_ext[v] * inv_mass[v]
        vp = qd_in[v] + a * dt
        yy = xp + vp * dt
        y[v] = yy
        x[v] = yy
        v_pred[v] = vp
    else:
        y[v] = xp
        x[v] = xp
        v_pred[v] = wp.vec3(0.0)


@wp.kernel
def truncate_initial_kernel(
    x: wp.array(dtype=wp.vec3),
    x_ref: wp.array(dtype=wp.vec3),
    bound: float,
):
    v = wp.tid()
    d = x[v] - x_ref[v]
    l = wp.length(d)
    if l > bound:
        x[v] = x_ref[v] + d * (bound / l)


@wp.kernel
def finish_kernel(
    dt: float,
    x: wp.array(dtype=wp.vec3),
    y: wp.array(dtype=wp.vec3),
    v_pred: wp.array(dtype=wp.vec3),
    q_out: wp.array(dtype=wp.vec3),
    qd_out: wp.array(dtype=wp.vec3),
):
    v = wp.tid()
    xv = x[v]
    q_out[v] = xv
    # = (x - x_begin) / dt, written as prediction + correction so that float32 rounding of large
    # coordinates does not bias the velocity
    qd_out[v] = v_pred[v] + (xv - y[v]) / dt


@wp.kernel
def bucket_contacts_kernel(
    soft_contact_count: wp.array(dtype=wp.int32),
    soft_contact_particle: wp.array(dtype=wp.int32),
    capacity: int,
    contact_count: wp.array(dtype=wp.int32),
    contact_list: wp.array(dtype=wp.int32),
):
    c = wp.tid()
    if c >= soft_contact_count[0]:
        return
    p = soft_contact_particle[c]
    if p < 0 or p >= contact_count.shape[0]:
        return
    slot = wp.atomic_add(contact_count, p, 1)
    if slot < capacity:
        contact_list[p * capacity + slot] = c


# --------------------------------------------------------------------------- element terms
@wp.func
def outer3(a: wp.vec3, b: wp.vec3):
    return wp.outer(a, b)


@wp.func
def tri_membrane(
    t: int,
    o: int,
    x: wp.array(dtype=wp.vec3),
    x_prev: wp.array(dtype=wp.vec3),
    tri_indices: wp.array2d(dtype=wp.int32),
    tri_poses: wp.array(dtype=wp.mat22),
    tri_materials: wp.array2d(dtype=float),
    tri_areas: wp.array(dtype=float),
    membrane_model: int,
    dt: float,
    f: wp.vec3,
    H: wp.mat33,
):
    i0 = tri_indices[t, 0]
    i1 = tri_indices[t, 1]
    i2 = tri_indices[t, 2]
    x0 = x[i0]
    e1 = x[i1] - x0
    e2 = x[i2] - x0
    Dinv = tri_poses[t]
    f0 = e1 * Dinv[0, 0] + e2 * Dinv[1, 0]
    f1 = e1 * Dinv[0, 1] + e2 * Dinv[1, 1]
    da = float(0.0)
    db = float(0.0)
    if o == 0:
        da = -(Dinv[0, 0] + Dinv[1, 0])
        db = -(Dinv[0, 1] + Dinv[1, 1])
    elif o == 1:
        da = Dinv[0, 0]
        db = Dinv[0, 1]
    else:
        da = Dinv[1, 0]
        db = Dinv[1, 1]
    mu = tri_materials[t, 0]
    lam = tri_materials[t, 1]
    kd = tri_materials[t, 2]
    area = tri_areas[t]
    g = f0 * da + f1 * db
    dd = da * da + db * db
    I3 = wp.identity(n=3, dtype=float)
    fe = wp.vec3(0.0)
    He = wp.mat33(0.0)
    if membrane_model == MEMBRANE_STVK:
        G00 = 0.5 * (wp.dot(f0, f0) - 1.0)
        G11 = 0.5 * (wp.dot(f1, f1) - 1.0)
        G01 = 0.5 * wp.dot(f0, f1)
        trG = G00 + G11
        S00 = 2.0 * mu * G00 + lam * trG
        S11 = 2.0 * mu * G11 + lam * trG
        S01 = 2.0 * mu * G01
        P0 = f0 * S00 + f1 * S01
        P1 = f0 * S01 + f1 * S11
        fe = -area * (P0 * da + P1 * db)
        s = da * da * S00 + 2.0 * da * db * S01 + db * db * S11
        He = area * (wp.max(s, 0.0) * I3 + (mu + lam) * outer3(g, g) + (mu * dd) * (outer3(f0, f0) + outer3(f1, f1)))
    else:
        n = wp.cross(f0, f1)
        J = wp.length(n)
        if J > 1.0e-12:
            nh = n / J
            h = wp.cross(f1, nh) * da + wp.cross(nh, f0) * db
            c = lam * (J - 1.0) - mu
            fe = -area * (mu * g + c * h)
            He = area * (mu * dd * I3 + lam * outer3(h, h))
        else:
            fe = -area * mu * g
            He = area * mu * dd * I3
    if kd > 0.0:
        # viscous membrane damping: stress kd * dE/dt on the Green strain rate [kd: Pa s m], so
        # rigid motions (translation, rotation: draping) are not damped
        u0 = x_prev[i0]
        de1 = e1 - (x_prev[i1] - u0)
        de2 = e2 - (x_prev[i2] - u0)
        g0 = de1 * Dinv[0, 0] + de2 * Dinv[1, 0]
        g1 = de1 * Dinv[0, 1] + de2 * Dinv[1, 1]
        c = kd / dt
        D00 = c * wp.dot(f0, g0)
        D11 = c * wp.dot(f1, g1)
        D01 = c * 0.5 * (wp.dot(f0, g1) + wp.dot(f1, g0))
        Q0 = f0 * D00 + f1 * D01
        Q1 = f0 * D01 + f1 * D11
        fe = fe - area * (Q0 * da + Q1 * db)
        He = He + (c * area) * (0.5 * outer3(g, g) + (0.5 * dd) * (outer3(f0, f0) + outer3(f1, f1)))
    return f + fe, H + He


@wp.func
def bending_term(
    e: int,
    o: int,
    x: wp.array(dtype=wp.vec3),
    x_prev: wp.array(dtype=wp.vec3),
    edge_indices: wp.array2d(dtype=wp.int32),
    edge_rest_angle: wp.array(dtype=float),
    edge_rest_length: wp.array(dtype=float),
    edge_props: wp.array2d(dtype=float),
    dt: float,
    f: wp.vec3,
    H: wp.mat33,
):
    o0 = edge_indices[e, 0]
    o1 = edge_indices[e, 1]
    if o0 < 0 or o1 < 0:
        return f, H
    ke = edge_props[e, 0]
    kd = edge_props[e, 1]
    if ke <= 0.0 and kd <= 0.0:
        return f, H
    x1 = x[o0]
    x2 = x[o1]
    x3 = x[edge_indices[e, 2]]
    x4 = x[edge_indices[e, 3]]
    ev = x4 - x3
    le = wp.length(ev)
    n1 = wp.cross(x3 - x1, x4 - x1)
    n2 = wp.cross(x4 - x2, x3 - x2)
    l1 = wp.dot(n1, n1)
    l2 = wp.dot(n2, n2)
    if le < 1.0e-12 or l1 < 1.0e-24 or l2 < 1.0e-24:
        return f, H
    eh = ev / le
    n1h = n1 / wp.sqrt(l1)
    n2h = n2 / wp.sqrt(l2)
    theta = wp.atan2(wp.dot(wp.cross(n1h, n2h), eh), wp.dot(n1h, n2h))
    a = n1 / l1
    b = n2 / l2
    # d theta / d x_o = -(Bridson's bending mode u_o)
    grad = wp.vec3(0.0)
    if o == 0:
        grad = -le * a
    elif o == 1:
        grad = -le * b
    elif o == 2:
        grad = -(wp.dot(x1 - x4, eh) * a + wp.dot(x2 - x4, eh) * b)
    else:
        grad = wp.dot(x1 - x3, eh) * a + wp.dot(x2 - x3, eh) * b
    k = ke * edge_rest_length[e]
    fe = -k * (theta - edge_rest_angle[e]) * grad
    He = k * outer3(grad, grad)
    if kd > 0.0:
        # damping of the dihedral angle rate, force kd * L0 * dtheta/dt (the reference's scale,
        # measured on a flapping hinge): d theta over the step ~ sum_j grad_j . dx_j
        g1 = -le * a
        g2 = -le * b
        g3 = -(wp.dot(x1 - x4, eh) * a + wp.dot(x2 - x4, eh) * b)
        g4 = -(g1 + g2 + g3)
        dth = wp.dot(g1, x1 - x_prev[o0]) + wp.dot(g2, x2 - x_prev[o1]) + wp.dot(g3, x3 - x_prev[edge_indices[e, 2]])
        dth = dth + wp.dot(g4, x4 - x_prev[edge_indices[e, 3]])
        c = kd * edge_rest_length[e] / dt
        fe = fe - c * dth * grad
        He = He + c * outer3(grad, grad)
    return f + fe, H + He


@wp.func
def tet_term(
    t: int,
    o: int,
    x: wp.array(dtype=wp.vec3),
    x_prev: wp.array(dtype=wp.vec3),
    tet_indices: wp.array2d(dtype=wp.int32),
    tet_poses: wp.array(dtype=wp.mat33),
    tet_materials: wp.array2d(dtype=float),
    dt: float,
    f: wp.vec3,
    H: wp.mat33,
):
    x0 = x[tet_indices[t, 0]]
    e1 = x[tet_indices[t, 1]] - x0
    e2 = x[tet_indices[t, 2]] - x0
    e3 = x[tet_indices[t, 3]] - x0
    Dinv = tet_poses[t]
    f0 = e1 * Dinv[0, 0] + e2 * Dinv[1, 0] + e3 * Dinv[2, 0]
    f1 = e1 * Dinv[0, 1] + e2 * Dinv[1, 1] + e3 * Dinv[2, 1]
    f2 = e1 * Dinv[0, 2] + e2 * Dinv[1, 2] + e3 * Dinv[2, 2]
    d = wp.vec3(0.0)
    if o == 0:
        d = -wp.vec3(Dinv[0, 0] + Dinv[1, 0] + Dinv[2, 0], Dinv[0, 1] + Dinv[1, 1] + Dinv[2, 1],
                     Dinv[0, 2] + Dinv[1, 2] + Dinv[2, 2])  # fmt: skip
    else:
        r = o - 1
        d = wp.vec3(Dinv[r, 0], Dinv[r, 1], Dinv[r, 2])
    mu = tet_materials[t, 0]
    lam = tet_materials[t, 1]
    kd = tet_materials[t, 2]
    vol = 1.0 / (6.0 * wp.determinant(Dinv))
    c0 = wp.cross(f1, f2)
    c1 = wp.cross(f2, f0)
    c2 = wp.cross(f0, f1)
    J = wp.dot(f0, c0)
    g = f0 * d[0] + f1 * d[1] + f2 * d[2]
    h = c0 * d[0] + c1 * d[1] + c2 * d[2]
    fe = -vol * (mu * g + (lam * (J - 1.0) - mu) * h)
    He = vol * (mu * wp.dot(d, d) * wp.identity(n=3, dtype=float) + lam * outer3(h, h))
    if kd > 0.0:
        u0 = x_prev[tet_indices[t, 0]]
        d1 = e1 - (x_prev[tet_indices[t, 1]] - u0)
        d2 = e2 - (x_prev[tet_indices[t, 2]] - u0)
        d3 = e3 - (x_prev[tet_indices[t, 3]] - u0)
        g0 = d1 * Dinv[0, 0] + d2 * Dinv[1, 0] + d3 * Dinv[2, 0]
        g1 = d1 * Dinv[0, 1] + d2 * Dinv[1, 1] + d3 * Dinv[2, 1]
        g2 = d1 * Dinv[0, 2] + d2 * Dinv[1, 2] + d3 * Dinv[2, 2]
        Fm = wp.matrix_from_cols(f0, f1, f2)
        dFm = wp.matrix_from_cols(g0, g1, g2)
        Er = wp.transpose(Fm) * dFm
        # viscous damping, independent of the Lame parameters: second Piola stress 4 kd dE/dt on
        # the Green strain rate (= 2 kd (F^T dF/dt + dF/dt^T F)) [kd: Pa s], the reference engine's
        # scale (measured on a cantilever at two stiffnesses, see tests/test_reference_parity.py);
        # rigid motion is not damped
        Er = 0.5 * (Er + wp.transpose(Er))
        c = 4.0 * kd / dt
        fe = fe - (c * vol) * (Fm * Er * d)
        He = He + (c * vol) * (0.5 * outer3(g, g) + (0.5 * wp.dot(d, d)) * (Fm * wp.transpose(Fm)))
    return f + fe, H + He


@wp.func
def spring_term(
    s: int,
    o: int,
    x: wp.array(dtype=wp.vec3),
    x_prev: wp.array(dtype=wp.vec3),
    spring_indices: wp.array(dtype=wp.int32),
    rest: wp.array(dtype=float),
    stiffness: wp.array(dtype=float),
    damping: wp.array(dtype=float),
    dt: float,
    f: wp.vec3,
    H: wp.mat33,
):
    v = spring_indices[2 * s + o]
    w = spring_indices[2 * s + 1 - o]
    d = x[v] - x[w]
    l = wp.length(d)
    if l < 1.0e-12:
        return f, H
    n = d / l
    k = stiffness[s]
    L = rest[s]
    nn = outer3(n, n)
    fe = -k * (l - L) * n
    He = k * (nn + wp.max(1.0 - L / l, 0.0) * (wp.identity(n=3, dtype=float) - nn))
    kd = damping[s]
    if kd > 0.0:
        # kd [N s/m]: force kd * dl/dt along the spring (the reference's scale, measured)
        dv = (x[v] - x_prev[v]) - (x[w] - x_prev[w])
        fe = fe - (kd / dt) * wp.dot(n, dv) * n
        He = He + (kd / dt) * nn
    return f + fe, H + He


@wp.func
def friction_term(mu_fn: float, ut: wp.vec3, n: wp.vec3, eps_u: float, f: wp.vec3, H: wp.mat33):
    """IPC-smoothed Coulomb friction on a tangential relative displacement ``ut`` (lagged normal force)."""
    if mu_fn <= 0.0:
        return f, H
    u = wp.length(ut)
    f1u = float(0.0)
    if u > eps_u:
        f1u = 1.0 / u
    else:
        f1u = (2.0 - u / eps_u) / eps_u
    T = wp.identity(n=3, dtype=float) - outer3(n, n)
    return f - (mu_fn * f1u) * ut, H + (mu_fn * f1u) * T


@wp.func
def body_contact_fh(
    c: int,
    xv: wp.vec3,
    dxv: wp.vec3,
    radius: float,
    dt: float,
    contact_shape: wp.array(dtype=wp.int32),
    contact_body_pos: wp.array(dtype=wp.vec3),
    contact_body_vel: wp.array(dtype=wp.vec3),
    contact_normal: wp.array(dtype=wp.vec3),
    shape_body: wp.array(dtype=wp.int32),
    shape_ke: wp.array(dtype=float),
    shape_kd: wp.array(dtype=float),
    shape_mu: wp.array(dtype=float),
    body_q: wp.array(dtype=wp.transform),
    body_q_prev: wp.array(dtype=wp.transform),
    ke: float,
    kd: float,
    mu: float,
    eps_u: float,
):
    """Force and Hessian on the particle of soft contact ``c`` (penalty, damping, friction).

    Material of the pair, as the reference engine combines it (measured, see
    ``tests/test_reference_parity.py``): stiffness ``(soft_contact_ke + shape_material_ke) / 2``
    [N/m], damping ``(soft_contact_kd + shape_material_kd) / 2`` [N s/m] on the approach speed,
    friction ``sqrt(soft_contact_mu * shape_material_mu)``."""
    shape = contact_shape[c]
    if shape >= 0 and shape_mu.shape[0] > shape:
        ke = 0.5 * (ke + shape_ke[shape])
        kd = 0.5 * (kd + shape_kd[shape])
        mu = wp.sqrt(wp.max(mu * shape_mu[shape], 0.0))
    b = int(-1)
    if shape >= 0:
        b = shape_body[shape]
    X = wp.transform_identity()
    Xp = wp.transform_identity()
    if b >= 0 and body_q.shape[0] > b:
        X = body_q[b]
        Xp = body_q_prev[b]
    bp = contact_body_pos[c]
    p = wp.transform_point(X, bp)
    n = contact_normal[c]
    pen = radius - wp.dot(n, xv - p)
    f = wp.vec3(0.0)
    H = wp.mat33(0.0)
    if pen <= 0.0:
        return f, H
    nn = outer3(n, n)
    f = ke * pen * n
    H = ke * nn
    dxb = p - wp.transform_point(Xp, bp) + wp.transform_vector(X, contact_body_vel[c]) * dt
    dx = dxv - dxb
    vn = wp.dot(n, dx)
    if kd > 0.0 and vn < 0.0:
        f = f - (kd / dt) * vn * n
        H = H + (kd / dt) * nn
    f, H = friction_term(mu * ke * pen, dx - vn * n, n, eps_u, f, H)
    return f, H


# --------------------------------------------------------------------------- self-contact geometry
@wp.func
def closest_params_segments(p1: wp.vec3, q1: wp.vec3, p2: wp.vec3, q2: wp.vec3, eps: float):
    """Parameters (s, t) of the closest points p1 + s (q1 - p1), p2 + t (q2 - p2) (Ericson)."""
    d1 = q1 - p1
    d2 = q2 - p2
    r = p1 - p2
    a = wp.dot(d1, d1)
    e = wp.dot(d2, d2)
    f = wp.dot(d2, r)
    s = float(0.0)
    t = float(0.0)
    if a <= 1.0e-20 and e <= 1.0e-20:
        return wp.vec2(0.0, 0.0)
    if a <= 1.0e-20:
        t = wp.clamp(f / e, 0.0, 1.0)
        return wp.vec2(0.0, t)
    c = wp.dot(d1, r)
    if e <= 1.0e-20:
        s = wp.clamp(-c / a, 0.0, 1.0)
        return wp.vec2(s, 0.0)
    b = wp.dot(d1, d2)
    denom = a * e - b * b
    if denom > eps * a * e:
        s = wp.clamp((b * f - c * e) / denom, 0.0, 1.0)
    else:
        s = 0.0
    t = (b * s + f) / e
    if t < 0.0:
        t = 0.0
        s = wp.clamp(-c / a, 0.0, 1.0)
    elif t > 1.0:
        t = 1.0
        s = wp.clamp((b - c) / a, 0.0, 1.0)
    return wp.vec2(s, t)


@wp.func
def self_contact_add(
    diff: wp.vec3,
    w: float,
    dx_rel: wp.vec3,
    margin: float,
    k: float,
    kd: float,
    mu: float,
    eps_u: float,
    dt: float,
    f: wp.vec3,
    H: wp.mat33,
):
    """Offset-geometry repulsion E = k/2 (margin - d)^2 of a pair at distance |diff|; ``w`` is the
    vertex's weight in the pair's separation (d(diff)/dx_v = w I), ``dx_rel`` the pair's relative
    displacement over the step."""
    dist = wp.length(diff)
    if dist >= margin or dist < 1.0e-12:
        return f, H
    n = diff / dist
    pen = margin - dist
    nn = outer3(n, n)
    fn = k * pen
    f = f + (w * fn) * n
    H = H + (w * w * k) * nn
    vn = wp.dot(n, dx_rel)
    if kd > 0.0 and vn < 0.0:
        f = f - (w * kd / dt) * vn * n
        H = H + (w * w * kd / dt) * nn
    ff = wp.vec3(0.0)
    Hf = wp.mat33(0.0)
    ff, Hf = friction_term(mu * fn, dx_rel - vn * n, n, eps_u, ff, Hf)
    return f + w * ff, H + (w * w) * Hf


# --------------------------------------------------------------------------- particle-particle contacts
@wp.func
def particle_pair_add(
    diff: wp.vec3,
    diff_prev: wp.vec3,
    rsum: float,
    dx_rel: wp.vec3,
    ke: float,
    kd: float,
    mu: float,
    cohesion: float,
    eps_u: float,
    dt: float,
    f: wp.vec3,
    H: wp.mat33,
):
    """Contact of the vertex with another particle at ``diff = x_v - x_u`` (``diff_prev`` at the start
    of the step; radii sum ``rsum``), ``dx_rel`` their relative displacement over the step. Gap
    ``c = |diff| - rsum``, penetration ``p = max(-c, 0)``; within ``c <= max(cohesion, 0)``: the
    force ``-ke c`` along ``n = diff / |diff|`` (repulsive overlap, attractive in the cohesion band),
    damping ``kd / dt`` times the penetration gained over the step (``kd`` [N s/m] on the approach
    speed once in contact; continuous as contact begins, so the two particles' Gauss-Seidel
    updates agree and momentum is conserved), IPC-smoothed friction with the normal force
    ``mu ke p``. Hessian: ``ke n n^T`` (the PSD part) plus the damping and friction terms."""
    dist = wp.length(diff)
    c = dist - rsum
    if c > wp.max(cohesion, 0.0) or dist < 1.0e-12:
        return f, H
    n = diff / dist
    nn = outer3(n, n)
    f = f - (ke * c) * n
    H = H + ke * nn
    pen = wp.max(-c, 0.0)
    gained = pen - wp.max(rsum - wp.length(diff_prev), 0.0)
    if kd > 0.0 and pen > 0.0 and gained > 0.0:
        f = f + (kd / dt * gained) * n
        H = H + (kd / dt) * nn
    vn = wp.dot(n, dx_rel)
    f, H = friction_term(mu * ke * pen, dx_rel - vn * n, n, eps_u, f, H)
    return f, H


@wp.kernel
def pp_motion_bound_kernel(
    x_prev: wp.array(dtype=wp.vec3),
    y: wp.array(dtype=wp.vec3),
    bound: wp.array(dtype=float),
):
    """``bound[0] = max |y - x_prev|``: the largest predicted displacement of the step (zero it first)."""
    v = wp.tid()
    wp.atomic_max(bound, 0, wp.length(y[v] - x_prev[v]))


@wp.kernel
def pp_detect_kernel(
    grid: wp.uint64,
    x_prev: wp.array(dtype=wp.vec3),
    y: wp.array(dtype=wp.vec3),
    radius: wp.array(dtype=float),
    inv_mass: wp.array(dtype=float),
    flags: wp.array(dtype=wp.int32),
    world: wp.array(dtype=wp.int32),
    in_element: wp.array(dtype=wp.int32),
    max_radius: float,
    cohesion: float,
    bound: wp.array(dtype=float),
    capacity: int,
    pp_count: wp.array(dtype=wp.int32),
    pp_list: wp.array(dtype=wp.int32),
    pp_gap: wp.array(dtype=float),
):
    """Particle-particle candidates of each free particle at the start of the step: ACTIVE particles
    of the same world (or world -1), not both used by elements (springs, triangles, bending edges,
    tetrahedra: those pairs are self-contact's), whose gap ``|x_v - x_u| - r_v - r_u`` is at most
    ``max(cohesion, 0) + 2 (d_v + d_u)`` (``d``: predicted displacement of the step). Keeps the
    ``capacity`` nearest."""
    v = wp.tid()
    pp_count[v] = 0
    if not is_free(v, inv_mass, flags):
        return
    xv = x_prev[v]
    rv = radius[v]
    dv = wp.length(y[v] - xv)
    wv = world[v]
    coh = wp.max(cohesion, 0.0)
    query = wp.hash_grid_query(grid, xv, rv + max_radius + coh + 2.0 * (dv + bound[0]))
    u = int(0)
    n = int(0)
    while wp.hash_grid_query_next(query, u):
        if u == v or (flags[u] & PARTICLE_ACTIVE) == 0:
            continue
        if in_element[v] != 0 and in_element[u] != 0:
            continue
        wu = world[u]
        if not (wv < 0 or wu < 0 or wv == wu):
            continue
        xu = x_prev[u]
        gap = wp.length(xv - xu) - rv - radius[u]
        if gap > coh + 2.0 * (dv + wp.length(y[u] - xu)):
            continue
        if n < capacity:
            pp_list[v * capacity + n] = u
            pp_gap[v * capacity + n] = gap
            n = n + 1
        else:
            # full: replace the farthest candidate if this one is nearer
            far = int(0)
            for k in range(1, capacity):
                if pp_gap[v * capacity + k] > pp_gap[v * capacity + far]:
                    far = k
            if gap < pp_gap[v * capacity + far]:
                pp_list[v * capacity + far] = u
                pp_gap[v * capacity + far] = gap
    pp_count[v] = n


# --------------------------------------------------------------------------- the vertex solve
@wp.kernel
def solve_kernel(
    dt: float,
    order: wp.array(dtype=wp.int32),
    offset: int,
    x: wp.array(dtype=wp.vec3),
    x_prev: wp.array(dtype=wp.vec3),
    y: wp.array(dtype=wp.vec3),
    mass: wp.array(dtype=float),
    inv_mass: wp.array(dtype=float),
    flags: wp.array(dtype=wp.int32),
    radius: wp.array(dtype=float),
    # triangles
    tri_indices: wp.array2d(dtype=wp.int32),
    tri_poses: wp.array(dtype=wp.mat22),
    tri_materials: wp.array2d(dtype=float),
    tri_areas: wp.array(dtype=float),
    membrane_model: int,
    # bending edges
    edge_indices: wp.array2d(dtype=wp.int32),
    edge_rest_angle: wp.array(dtype=float),
    edge_rest_length: wp.array(dtype=float),
    edge_props: wp.array2d(dtype=float),
    # tetrahedra
    tet_indices: wp.array2d(dtype=wp.int32),
    tet_poses: wp.array(dtype=wp.mat33),
    tet_materials: wp.array2d(dtype=float),
    # springs
    spring_indices: wp.array(dtype=wp.int32),
    spring_rest: wp.array(dtype=float),
    spring_ke: wp.array(dtype=float),
    spring_kd: wp.array(dtype=float),
    # adjacency (CSR, packed element * stride + local order)
    adj_tri_off: wp.array(dtype=wp.int32),
    adj_tri: wp.array(dtype=wp.int32),
    adj_edge_off: wp.array(dtype=wp.int32),
    adj_edge: wp.array(dtype=wp.int32),
    adj_tet_off: wp.array(dtype=wp.int32),
    adj_tet: wp.array(dtype=wp.int32),
    adj_spr_off: wp.array(dtype=wp.int32),
    adj_spr: wp.array(dtype=wp.int32),
    # body contacts
    contact_capacity: int,
    contact_count: wp.array(dtype=wp.int32),
    contact_list: wp.array(dtype=wp.int32),
    contact_shape: wp.array(dtype=wp.int32),
    contact_body_pos: wp.array(dtype=wp.vec3),
    contact_body_vel: wp.array(dtype=wp.vec3),
    contact_normal: wp.array(dtype=wp.vec3),
    shape_body: wp.array(dtype=wp.int32),
    shape_ke: wp.array(dtype=float),
    shape_kd: wp.array(dtype=float),
    shape_mu: wp.array(dtype=float),
    body_q: wp.array(dtype=wp.transform),
    body_q_prev: wp.array(dtype=wp.transform),
    contact_ke: float,
    contact_kd: float,
    contact_mu: float,
    eps_u: float,
    # particle-body attachments
    adj_att_off: wp.array(dtype=wp.int32),
    adj_att: wp.array(dtype=wp.int32),
    att_body: wp.array(dtype=wp.int32),
    att_point: wp.array(dtype=wp.vec3),
    att_ke: wp.array(dtype=float),
    att_kd: wp.array(dtype=float),
    att_enabled: wp.array(dtype=wp.int32),
    # self-contact
    sc_enabled: int,
    sc_tri_tri: wp.array2d(dtype=wp.int32),  # mesh triangles (T, 3) used for self-contact
    sc_edges: wp.array2d(dtype=wp.int32),  # mesh edges (M, 2)
    sc_adj_tri_off: wp.array(dtype=wp.int32),
    sc_adj_tri: wp.array(dtype=wp.int32),
    sc_adj_edge_off: wp.array(dtype=wp.int32),
    sc_adj_edge: wp.array(dtype=wp.int32),
    vt_cap: int,
    vt_count: wp.array(dtype=wp.int32),
    vt_list: wp.array(dtype=wp.int32),
    tv_cap: int,
    tv_count: wp.array(dtype=wp.int32),
    tv_list: wp.array(dtype=wp.int32),
    ee_cap: int,
    ee_count: wp.array(dtype=wp.int32),
    ee_list: wp.array(dtype=wp.int32),
    sc_margin: float,
    sc_ke: float,
    sc_kd: float,
    sc_mu: float,
    sc_eps: float,
    x_detect: wp.array(dtype=wp.vec3),
    sc_bound: float,
    # particle-particle contacts
    pp_capacity: int,
    pp_count: wp.array(dtype=wp.int32),
    pp_list: wp.array(dtype=wp.int32),
    pp_ke: float,
    pp_kd: float,
    pp_mu: float,
    pp_cohesion: float,
):
    v = order[offset + wp.tid()]
    if not is_free(v, inv_mass, flags):
        return
    xv = x[v]
    dxv = xv - x_prev[v]
    w_in = mass[v] / (dt * dt)
    f = w_in * (y[v] - xv)
    H = w_in * wp.identity(n=3, dtype=float)

    for k in range(adj_tri_off[v], adj_tri_off[v + 1]):
        pk = adj_tri[k]
        t = pk // 3
        f, H = tri_membrane(t, pk - 3 * t, x, x_prev, tri_indices, tri_poses, tri_materials, tri_areas,
                            membrane_model, dt, f, H)  # fmt: skip
    for k in range(adj_edge_off[v], adj_edge_off[v + 1]):
        pk = adj_edge[k]
        e = pk // 4
        f, H = bending_term(e, pk - 4 * e, x, x_prev, edge_indices, edge_rest_angle, edge_rest_length, edge_props,
                            dt, f, H)  # fmt: skip
    for k in range(adj_tet_off[v], adj_tet_off[v + 1]):
        pk = adj_tet[k]
        t = pk // 4
        f, H = tet_term(t, pk - 4 * t, x, x_prev, tet_indices, tet_poses, tet_materials, dt, f, H)
    for k in range(adj_spr_off[v], adj_spr_off[v + 1]):
        pk = adj_spr[k]
        si = pk // 2
        f, H = spring_term(si, pk - 2 * si, x, x_prev, spring_indices, spring_rest, spring_ke, spring_kd, dt, f, H)

    # body contacts
    nc = wp.min(contact_count[v], contact_capacity)
    for k in range(nc):
        c = contact_list[v * contact_capacity + k]
        fc, Hc = body_contact_fh(c, xv, dxv, radius[v], dt, contact_shape, contact_body_pos, contact_body_vel,
                                 contact_normal, shape_body, shape_ke, shape_kd, shape_mu, body_q, body_q_prev,
                                 contact_ke, contact_kd, contact_mu, eps_u)  # fmt: skip
        f = f + fc
        H = H + Hc

    # particle-particle contacts
    if pp_capacity > 0:  # 0: none this step (the arrays are placeholders)
        npp = wp.min(pp_count[v], pp_capacity)
        for k in range(npp):
            u = pp_list[v * pp_capacity + k]
            f, H = particle_pair_add(xv - x[u], x_prev[v] - x_prev[u], radius[v] + radius[u],
                                     dxv - (x[u] - x_prev[u]), pp_ke, pp_kd, pp_mu, pp_cohesion, eps_u, dt, f,
                                     H)  # fmt: skip

    # attachments
    for k in range(adj_att_off[v], adj_att_off[v + 1]):
        a = adj_att[k]
        if att_enabled[a] != 0:
            b = att_body[a]
            X = wp.transform_identity()
            Xp = wp.transform_identity()
            if b >= 0 and body_q.shape[0] > b:
                X = body_q[b]
                Xp = body_q_prev[b]
            p = wp.transform_point(X, att_point[a])
            ka = att_ke[a]
            f = f - ka * (xv - p)
            H = H + ka * wp.identity(n=3, dtype=float)
            kda = att_kd[a]
            if kda > 0.0:
                dr = dxv - (p - wp.transform_point(Xp, att_point[a]))
                f = f - (kda / dt) * dr
                H = H + (kda / dt) * wp.identity(n=3, dtype=float)

    # self-contact
    if sc_enabled != 0:
        # as the vertex of vertex-triangle pairs
        nvt = wp.min(vt_count[v], vt_cap)
        for k in range(nvt):
            t = vt_list[v * vt_cap + k]
            a = sc_tri_tri[t, 0]
            b = sc_tri_tri[t, 1]
            cc = sc_tri_tri[t, 2]
            bc = closest_point_triangle(xv, x[a], x[b], x[cc])
            cp = bc[0] * x[a] + bc[1] * x[b] + bc[2] * x[cc]
            dcp = bc[0] * (x[a] - x_prev[a]) + bc[1] * (x[b] - x_prev[b]) + bc[2] * (x[cc] - x_prev[cc])
            f, H = self_contact_add(xv - cp, 1.0, dxv - dcp, sc_margin, sc_ke, sc_kd, sc_mu, eps_u, dt, f, H)
        # as a triangle corner
        for kt in range(sc_adj_tri_off[v], sc_adj_tri_off[v + 1]):
            pk = sc_adj_tri[kt]
            t = pk // 3
            o = pk - 3 * t
            a = sc_tri_tri[t, 0]
            b = sc_tri_tri[t, 1]
            cc = sc_tri_tri[t, 2]
            ntv = wp.min(tv_count[t], tv_cap)
            for k in range(ntv):
                u = tv_list[t * tv_cap + k]
                xu = x[u]
                bc = closest_point_triangle(xu, x[a], x[b], x[cc])
                cp = bc[0] * x[a] + bc[1] * x[b] + bc[2] * x[cc]
                dcp = bc[0] * (x[a] - x_prev[a]) + bc[1] * (x[b] - x_prev[b]) + bc[2] * (x[cc] - x_prev[cc])
                f, H = self_contact_add(cp - xu, bc[o], dcp - (xu - x_prev[u]), sc_margin, sc_ke, sc_kd, sc_mu,
                                        eps_u, dt, f, H)  # fmt: skip
        # edge-edge
        for ke_ in range(sc_adj_edge_off[v], sc_adj_edge_off[v + 1]):
            pk = sc_adj_edge[ke_]
            e = pk // 2
            o = pk - 2 * e
            p1 = sc_edges[e, 0]
            q1 = sc_edges[e, 1]
            nee = wp.min(ee_count[e], ee_cap)
            for k in range(nee):
                e2 = ee_list[e * ee_cap + k]
                p2 = sc_edges[e2, 0]
                q2 = sc_edges[e2, 1]
                st = closest_params_segments(x[p1], x[q1], x[p2], x[q2], sc_eps)
                sa = st[0]
                tt = st[1]
                ca = (1.0 - sa) * x[p1] + sa * x[q1]
                cb = (1.0 - tt) * x[p2] + tt * x[q2]
                da = (1.0 - sa) * (x[p1] - x_prev[p1]) + sa * (x[q1] - x_prev[q1])
                db = (1.0 - tt) * (x[p2] - x_prev[p2]) + tt * (x[q2] - x_prev[q2])
                w = 1.0 - sa
                if o == 1:
                    w = sa
                f, H = self_contact_add(ca - cb, w, da - db, sc_margin, sc_ke, sc_kd, sc_mu, eps_u, dt, f, H)

    # guarded 3x3 Newton step
    det = wp.determinant(H)
    tr = H[0, 0] + H[1, 1] + H[2, 2]
    if wp.abs(det) > 1.0e-9 * tr * tr * tr and tr > 0.0:
        xn = xv + wp.inverse(H) * f
        if sc_enabled != 0:
            d = xn - x_detect[v]
            l = wp.length(d)
            if l > sc_bound:
                xn = x_detect[v] + d * (sc_bound / l)
        x[v] = xn


# --------------------------------------------------------------------------- reactions on bodies
@wp.func
def add_reaction(
    b: int,
    fp: wp.vec3,
    Hp: wp.mat33,
    p: wp.vec3,
    body_q: wp.array(dtype=wp.transform),
    body_com: wp.array(dtype=wp.vec3),
    out_f: wp.array(dtype=wp.spatial_vector),
    out_h_ll: wp.array(dtype=wp.mat33),
    out_h_la: wp.array(dtype=wp.mat33),
    out_h_aa: wp.array(dtype=wp.mat33),
):
    com = wp.transform_point(body_q[b], body_com[b])
    r = p - com
    fb = -fp
    wp.atomic_add(out_f, b, wp.spatial_vector(fb, wp.cross(r, fb)))
    R = skew(r)
    wp.atomic_add(out_h_ll, b, Hp)
    wp.atomic_add(out_h_la, b, -(Hp * R))
    wp.atomic_add(out_h_aa, b, -(R * Hp * R))


@wp.func
def H_is_zero(H: wp.mat33):
    return H[0, 0] == 0.0 and H[1, 1] == 0.0 and H[2, 2] == 0.0


@wp.kernel
def contact_reaction_kernel(
    dt: float,
    x: wp.array(dtype=wp.vec3),
    x_prev: wp.array(dtype=wp.vec3),
    radius: wp.array(dtype=float),
    inv_mass: wp.array(dtype=float),
    flags: wp.array(dtype=wp.int32),
    soft_contact_count: wp.array(dtype=wp.int32),
    contact_particle: wp.array(dtype=wp.int32),
    contact_shape: wp.array(dtype=wp.int32),
    contact_body_pos: wp.array(dtype=wp.vec3),
    contact_body_vel: wp.array(dtype=wp.vec3),
    contact_normal: wp.array(dtype=wp.vec3),
    shape_body: wp.array(dtype=wp.int32),
    shape_ke: wp.array(dtype=float),
    shape_kd: wp.array(dtype=float),
    shape_mu: wp.array(dtype=float),
    body_q: wp.array(dtype=wp.transform),
    body_q_prev: wp.array(dtype=wp.transform),
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    ke: float,
    kd: float,
    mu: float,
    eps_u: float,
    out_f: wp.array(dtype=wp.spatial_vector),
    out_h_ll: wp.array(dtype=wp.mat33),
    out_h_la: wp.array(dtype=wp.mat33),
    out_h_aa: wp.array(dtype=wp.mat33),
):
    c = wp.tid()
    if c >= soft_contact_count[0]:
        return
    v = contact_particle[c]
    shape = contact_shape[c]
    if v < 0 or shape < 0:
        return
    b = shape_body[shape]
    if b < 0 or body_inv_mass[b] <= 0.0:
        return
    if (flags[v] & PARTICLE_ACTIVE) == 0:
        return
    xv = x[v]
    fp, Hp = body_contact_fh(c, xv, xv - x_prev[v], radius[v], dt, contact_shape, contact_body_pos,
                             contact_body_vel, contact_normal, shape_body, shape_ke, shape_kd, shape_mu, body_q,
                             body_q_prev, ke, kd, mu, eps_u)  # fmt: skip
    if wp.length_sq(fp) == 0.0 and H_is_zero(Hp):
        return
    p = wp.transform_point(body_q[b], contact_body_pos[c])
    add_reaction(b, fp, Hp, p, body_q, body_com, out_f, out_h_ll, out_h_la, out_h_aa)


@wp.kernel
def attachment_reaction_kernel(
    dt: float,
    x: wp.array(dtype=wp.vec3),
    x_prev: wp.array(dtype=wp.vec3),
    att_particle: wp.array(dtype=wp.int32),
    att_body: wp.array(dtype=wp.int32),
    att_point: wp.array(dtype=wp.vec3),
    att_ke: wp.array(dtype=float),
    att_kd: wp.array(dtype=float),
    att_enabled: wp.array(dtype=wp.int32),
    body_q: wp.array(dtype=wp.transform),
    body_q_prev: wp.array(dtype=wp.transform),
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    out_f: wp.array(dtype=wp.spatial_vector),
    out_h_ll: wp.array(dtype=wp.mat33),
    out_h_la: wp.array(dtype=wp.mat33),
    out_h_aa: wp.array(dtype=wp.mat33),
):
    a = wp.tid()
    if att_enabled[a] == 0:
        return
    b = att_body[a]
    if b < 0 or body_inv_mass[b] <= 0.0:
        return
    v = att_particle[a]
    xv = x[v]
    p = wp.transform_point(body_q[b], att_point[a])
    ka = att_ke[a]
    fp = -ka * (xv - p)
    Hp = ka * wp.identity(n=3, dtype=float)
    kda = att_kd[a]
    if kda > 0.0:
        dr = (xv - x_prev[v]) - (p - wp.transform_point(body_q_prev[b], att_point[a]))
        fp = fp - (kda / dt) * dr
        Hp = Hp + (kda / dt) * wp.identity(n=3, dtype=float)
    add_reaction(b, fp, Hp, p, body_q, body_com, out_f, out_h_ll, out_h_la, out_h_aa)

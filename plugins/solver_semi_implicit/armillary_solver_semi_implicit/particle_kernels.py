"""Warp kernels of the particle half of :class:`~armillary_solver_semi_implicit.solver.SolverSemiImplicit`.

Two launches per step (plus the neighbour structures' own builds, see ``particles.py``):

* :func:`eval_particle_forces_kernel`: one fused launch whose work-item ranges are, in order,
  springs, triangles, bending edges, tetrahedra, soft (particle-shape) contacts and particles
  (particle-particle and particle-triangle contacts). Every force is accumulated with atomics
  into ``particle_f`` [N] and, for particle-shape contacts on bodies, the reaction wrench into
  ``body_f`` (world frame, ``(force, torque)`` about the body COM).
* :func:`integrate_particles_kernel`: semi-implicit Euler with per-world gravity.

Both loop over their items with a grid stride: on a GPU one thread per item, on the CPU one
thread for all (Warp runs CPU threads one after another, and each thread would otherwise copy
the ~60 kernel arguments).

Force laws (SI units; the coefficients mean what they mean in the reference engine's
``SolverSemiImplicit``, each checked against it as a black box, see ``tests/test_particles.py``):

* spring ``(i, j)``: ``f_i = -(ke (l - L) + kd dl/dt) d``, ``d = (x_i - x_j) / l``.
* triangle (membrane, per rest area ``A``, deformation ``F = Ds Dm^-1`` (3x2)):
  first Piola stress ``P = mu F + kd dF/dt + (lambda (J - alpha + a) + kd dJ/dt) dJ/dF`` with
  ``mu = tri_ke``, ``lambda = tri_ka``, ``kd = tri_kd`` [Pa m, Pa m, Pa m s], ``J = |F0 x F1|``
  (area ratio), ``alpha = 1 + mu / lambda``, ``a`` the activation (the whole ``dJ/dF`` term is
  dropped when ``lambda == 0``, as in the reference); vertex forces ``-A P Dm^-T``. Aerodynamics
  on the current area ``A'`` and unit normal ``n`` with the mean vertex velocity ``v``, added to
  each of the three vertices:
  drag ``-tri_drag A' |n . v| v`` and lift ``-tri_lift A' (pi/2 - acos(n . v/|v|)) |v|^2 n``.
* bending edge ``(o0, o1, v1, v2)``: dihedral angle ``theta`` (``armillary.sim.bending_angle``),
  unit normals ``n1, n2``, current edge length ``L``; direction vectors ``u_o0 = L n1``,
  ``u_o1 = L n2``, ``u_v1 = ((o0 - v2).e) n1 + ((o1 - v2).e) n2``,
  ``u_v2 = -((o0 - v1).e) n1 - ((o1 - v1).e) n2`` (``e`` the unit edge); force
  ``f_k = L (ke (theta - theta0) - kd sum_m u_m . v_m) u_k``. Boundary edges (``o1 < 0``) are inert.
* tetrahedron (rest volume ``V``, ``F = Ds Dm^-1``): stable neo-Hookean (Smith et al. 2018)
  ``P = mu (1 - 1/(I_C + 1)) F + lambda (J - alpha + a) cof(F)``, ``alpha = 1 + 3 mu / (4 lambda)``
  (volume term dropped when ``lambda == 0``; the reference returns NaN there), plus viscosity
  ``k_damp (dF/dt + (dJ/dt) cof(F))`` [Pa s]; forces ``-V P Dm^-T``. Deliberate difference: the
  reference's ``dJ/dt`` leaves out vertex 0's velocity, so it damps (pushes) a rigidly translating
  tetrahedron; here ``dJ/dt = cof(F) : dF/dt`` and a translation feels no damping (with vertex 0
  at rest both agree).
* particle-shape contact (penetration ``c = n.(x - p) - r < 0``): stiffness, damping, friction
  stiffness and coefficient are the means of ``Model.soft_contact_*`` and the shape's material
  ``(ke, kd, kf, mu)``; ``f = -c ke n - kd min(v_n, 0) n - min(kf |v_t|, mu (-c ke)) v_t/|v_t|``
  with ``v`` the particle velocity relative to the shape's surface point; the opposite force acts on
  the body at the contact point.
* particle-particle (``c = |x_i - x_j| - r_i - r_j <= particle_cohesion``): the same law with
  ``Model.particle_ke/kd/kf/mu``, except that the Coulomb limit is ``mu`` times the elastic plus
  damping normal force; cohesion makes ``c`` in ``(0, cohesion]`` attractive.
* particle-triangle (``enable_tri_contact``; triangles not containing the particle): closest point
  ``q`` on the triangle, ``c = |x - q| - r < 0``, ``f = -soft_contact_ke c n`` on the particle and its
  opposite spread over the triangle's vertices by barycentric weight (no damping, no friction).
"""

from __future__ import annotations

import math

import warp as wp

from armillary.geometry.primitives import closest_point_triangle
from armillary.sim.gravity import gravity_of_world

PARTICLE_ACTIVE = wp.constant(1)  # armillary.ParticleFlags.ACTIVE
HALF_PI = wp.constant(0.5 * math.pi)


@wp.func
def _active(flags: wp.array(dtype=wp.int32), i: int):
    return (flags[i] & PARTICLE_ACTIVE) != 0


@wp.func
def _same_world(a: int, b: int):
    return a < 0 or b < 0 or a == b


@wp.func
def contact_force(n: wp.vec3, c: float, vrel: wp.vec3, ke: float, kd: float, kf: float, mu: float,
                  damped_limit: int):  # fmt: skip
    """Penalty force [N] on a point at signed gap ``c`` [m] along unit ``n`` moving at ``vrel``;
    the Coulomb limit is ``mu`` times the elastic normal force, plus the damping force when
    ``damped_limit`` is set (particle-particle contacts)."""
    fn = -c * ke
    vn = wp.dot(n, vrel)
    vt = vrel - vn * n
    fd = -kd * wp.min(vn, 0.0)
    f = n * (fn + fd)
    limit = fn
    if damped_limit != 0:
        limit = fn + fd
    vt_len = wp.length(vt)
    if vt_len > 0.0:
        f = f - vt * (wp.min(kf * vt_len, mu * wp.abs(limit)) / vt_len)
    return f


@wp.func
def spring_force(
    s: int,
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    indices: wp.array(dtype=wp.int32),
    rest: wp.array(dtype=float),
    ke: wp.array(dtype=float),
    kd: wp.array(dtype=float),
    f: wp.array(dtype=wp.vec3),
):
    i = indices[2 * s]
    j = indices[2 * s + 1]
    if i < 0 or j < 0:
        return
    d = x[i] - x[j]
    l = wp.length(d)
    if l <= 0.0:
        return
    d = d / l
    fs = d * (ke[s] * (l - rest[s]) + kd[s] * wp.dot(d, v[i] - v[j]))
    wp.atomic_sub(f, i, fs)
    wp.atomic_add(f, j, fs)


@wp.func
def triangle_force(
    t: int,
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    indices: wp.array2d(dtype=wp.int32),
    poses: wp.array(dtype=wp.mat22),
    materials: wp.array2d(dtype=float),
    activation: wp.array(dtype=float),
    f: wp.array(dtype=wp.vec3),
):
    i = indices[t, 0]
    j = indices[t, 1]
    k = indices[t, 2]
    Dinv = poses[t]
    det = wp.determinant(Dinv)
    if det <= 0.0:
        return
    rest_area = 0.5 / det
    mu = materials[t, 0]
    lam = materials[t, 1]
    kd = materials[t, 2]
    drag = materials[t, 3]
    lift = materials[t, 4]
    x0 = x[i]
    e1 = x[j] - x0
    e2 = x[k] - x0
    v0 = v[i]
    w1 = v[j] - v0
    w2 = v[k] - v0
    # F = Ds Dm^-1 (two columns), dF/dt likewise
    F0 = e1 * Dinv[0, 0] + e2 * Dinv[1, 0]
    F1 = e1 * Dinv[0, 1] + e2 * Dinv[1, 1]
    dF0 = w1 * Dinv[0, 0] + w2 * Dinv[1, 0]
    dF1 = w1 * Dinv[0, 1] + w2 * Dinv[1, 1]
    P0 = mu * F0 + kd * dF0
    P1 = mu * F1 + kd * dF1
    cr = wp.cross(F0, F1)
    J = wp.length(cr)
    if lam != 0.0 and J > 0.0:
        n = cr / J
        g0 = wp.cross(F1, n)  # dJ/dF, column 0
        g1 = wp.cross(n, F0)  # dJ/dF, column 1
        a = float(0.0)
        if activation.shape[0] > t:
            a = activation[t]
        s = lam * (J - 1.0 - mu / lam + a) + kd * (wp.dot(g0, dF0) + wp.dot(g1, dF1))
        P0 = P0 + s * g0
        P1 = P1 + s * g1
    h1 = -rest_area * (P0 * Dinv[0, 0] + P1 * Dinv[0, 1])
    h2 = -rest_area * (P0 * Dinv[1, 0] + P1 * Dinv[1, 1])
    fi = -(h1 + h2)
    fj = h1
    fk = h2
    if drag != 0.0 or lift != 0.0:
        vm = (v0 + v[j] + v[k]) / 3.0
        c2 = wp.cross(e1, e2)
        c2_len = wp.length(c2)
        speed = wp.length(vm)
        if c2_len > 0.0 and speed > 0.0:
            n = c2 / c2_len
            area = 0.5 * c2_len
            cos_a = wp.dot(n, vm) / speed
            fa = -drag * area * wp.abs(cos_a * speed) * vm
            fa = fa - lift * area * (HALF_PI - wp.acos(wp.clamp(cos_a, -1.0, 1.0))) * speed * speed * n
            fi = fi + fa
            fj = fj + fa
            fk = fk + fa
    wp.atomic_add(f, i, fi)
    wp.atomic_add(f, j, fj)
    wp.atomic_add(f, k, fk)


@wp.func
def edge_force(
    e: int,
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    indices: wp.array2d(dtype=wp.int32),
    rest_angle: wp.array(dtype=float),
    props: wp.array2d(dtype=float),
    f: wp.array(dtype=wp.vec3),
):
    a = indices[e, 0]
    b = indices[e, 1]
    c = indices[e, 2]
    d = indices[e, 3]
    if a < 0 or b < 0 or c < 0 or d < 0:
        return
    ke = props[e, 0]
    kd = props[e, 1]
    if ke == 0.0 and kd == 0.0:
        return
    xo0 = x[a]
    xo1 = x[b]
    xv1 = x[c]
    xv2 = x[d]
    n1 = wp.cross(xv1 - xo0, xv2 - xo0)
    n2 = wp.cross(xv2 - xo1, xv1 - xo1)
    l1 = wp.length(n1)
    l2 = wp.length(n2)
    ev = xv2 - xv1
    L = wp.length(ev)
    if l1 <= 0.0 or l2 <= 0.0 or L <= 0.0:
        return
    n1 = n1 / l1
    n2 = n2 / l2
    eh = ev / L
    theta = wp.atan2(wp.dot(wp.cross(n1, n2), eh), wp.dot(n1, n2))
    u0 = L * n1
    u1 = L * n2
    u2 = wp.dot(xo0 - xv2, eh) * n1 + wp.dot(xo1 - xv2, eh) * n2
    u3 = -wp.dot(xo0 - xv1, eh) * n1 - wp.dot(xo1 - xv1, eh) * n2
    rate = wp.dot(u0, v[a]) + wp.dot(u1, v[b]) + wp.dot(u2, v[c]) + wp.dot(u3, v[d])
    s = L * (ke * (theta - rest_angle[e]) - kd * rate)
    wp.atomic_add(f, a, s * u0)
    wp.atomic_add(f, b, s * u1)
    wp.atomic_add(f, c, s * u2)
    wp.atomic_add(f, d, s * u3)


@wp.func
def tet_force(
    t: int,
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    indices: wp.array2d(dtype=wp.int32),
    poses: wp.array(dtype=wp.mat33),
    materials: wp.array2d(dtype=float),
    activation: wp.array(dtype=float),
    f: wp.array(dtype=wp.vec3),
):
    i = indices[t, 0]
    j = indices[t, 1]
    k = indices[t, 2]
    l = indices[t, 3]
    Dinv = poses[t]
    det = wp.determinant(Dinv)
    if det <= 0.0:
        return
    rest_volume = 1.0 / (6.0 * det)
    mu = materials[t, 0]
    lam = materials[t, 1]
    damp = materials[t, 2]
    x0 = x[i]
    v0 = v[i]
    Ds = wp.matrix_from_cols(x[j] - x0, x[k] - x0, x[l] - x0)
    Vs = wp.matrix_from_cols(v[j] - v0, v[k] - v0, v[l] - v0)
    F = Ds * Dinv
    dF = Vs * Dinv
    c0 = wp.vec3(F[0, 0], F[1, 0], F[2, 0])
    c1 = wp.vec3(F[0, 1], F[1, 1], F[2, 1])
    c2 = wp.vec3(F[0, 2], F[1, 2], F[2, 2])
    cof = wp.matrix_from_cols(wp.cross(c1, c2), wp.cross(c2, c0), wp.cross(c0, c1))
    Ic = wp.ddot(F, F)
    P = mu * (1.0 - 1.0 / (Ic + 1.0)) * F
    if damp != 0.0:
        P = P + damp * (dF + wp.ddot(cof, dF) * cof)
    if lam != 0.0:
        a = float(0.0)
        if activation.shape[0] > t:
            a = activation[t]
        J = wp.determinant(F)
        P = P + lam * (J - 1.0 - 0.75 * mu / lam + a) * cof
    H = -rest_volume * (P * wp.transpose(Dinv))
    f1 = wp.vec3(H[0, 0], H[1, 0], H[2, 0])
    f2 = wp.vec3(H[0, 1], H[1, 1], H[2, 1])
    f3 = wp.vec3(H[0, 2], H[1, 2], H[2, 2])
    wp.atomic_sub(f, i, f1 + f2 + f3)
    wp.atomic_add(f, j, f1)
    wp.atomic_add(f, k, f2)
    wp.atomic_add(f, l, f3)


@wp.func
def soft_contact_force(
    c: int,
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    radius: wp.array(dtype=float),
    flags: wp.array(dtype=wp.int32),
    contact_count: wp.array(dtype=wp.int32),
    contact_particle: wp.array(dtype=wp.int32),
    contact_shape: wp.array(dtype=wp.int32),
    contact_body_pos: wp.array(dtype=wp.vec3),
    contact_body_vel: wp.array(dtype=wp.vec3),
    contact_normal: wp.array(dtype=wp.vec3),
    shape_body: wp.array(dtype=wp.int32),
    shape_ke: wp.array(dtype=float),
    shape_kd: wp.array(dtype=float),
    shape_kf: wp.array(dtype=float),
    shape_mu: wp.array(dtype=float),
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    body_com: wp.array(dtype=wp.vec3),
    soft_ke: float,
    soft_kd: float,
    soft_kf: float,
    soft_mu: float,
    f: wp.array(dtype=wp.vec3),
    body_f: wp.array(dtype=wp.spatial_vector),
):
    if c >= contact_count[0]:
        return
    p = contact_particle[c]
    shape = contact_shape[c]
    if p < 0 or shape < 0:
        return
    if not _active(flags, p):
        return
    ke = 0.5 * (soft_ke + shape_ke[shape])
    kd = 0.5 * (soft_kd + shape_kd[shape])
    kf = 0.5 * (soft_kf + shape_kf[shape])
    mu = 0.5 * (soft_mu + shape_mu[shape])
    b = shape_body[shape]
    X = wp.transform_identity()
    if b >= 0 and b < body_q.shape[0]:
        X = body_q[b]
    bx = wp.transform_point(X, contact_body_pos[c])
    n = contact_normal[c]
    gap = wp.dot(n, x[p] - bx) - radius[p]
    if gap > 0.0:
        return
    bv = wp.transform_vector(X, contact_body_vel[c])
    com = wp.vec3(0.0)
    has_body = b >= 0 and b < body_q.shape[0]
    if has_body:
        com = wp.transform_point(X, body_com[b])
        tw = body_qd[b]
        bv = bv + wp.spatial_top(tw) + wp.cross(wp.spatial_bottom(tw), bx - com)
    fc = contact_force(n, gap, v[p] - bv, ke, kd, kf, mu, 0)
    wp.atomic_add(f, p, fc)
    if has_body and body_f.shape[0] > b:
        wp.atomic_sub(body_f, b, wp.spatial_vector(fc, wp.cross(bx - com, fc)))


@wp.func
def _pair_force(
    i: int,
    j: int,
    xi: wp.vec3,
    vi: wp.vec3,
    ri: float,
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    radius: wp.array(dtype=float),
    p_ke: float,
    p_kd: float,
    p_kf: float,
    p_mu: float,
    cohesion: float,
) -> wp.vec3:
    """Contact force of particle ``j`` on particle ``i`` (zero outside the contact band)."""
    d = xi - x[j]
    dist = wp.length(d)
    gap = dist - ri - radius[j]
    if gap <= cohesion and dist > 0.0:
        return contact_force(d / dist, gap, vi - v[j], p_ke, p_kd, p_kf, p_mu, 1)
    return wp.vec3(0.0)


@wp.func
def _triangle_contact_force(
    xi: wp.vec3,
    ri: float,
    a: int,
    b: int,
    c: int,
    x: wp.array(dtype=wp.vec3),
    tri_ke: float,
    f: wp.array(dtype=wp.vec3),
) -> wp.vec3:
    """Force of triangle ``(a, b, c)`` on a particle at ``xi``; its opposite is spread over the vertices."""
    bary = closest_point_triangle(xi, x[a], x[b], x[c])
    q = bary[0] * x[a] + bary[1] * x[b] + bary[2] * x[c]
    d = xi - q
    dist = wp.length(d)
    gap = dist - ri
    if gap < 0.0 and dist > 0.0:
        fc = (d / dist) * (-gap * tri_ke)
        wp.atomic_sub(f, a, bary[0] * fc)
        wp.atomic_sub(f, b, bary[1] * fc)
        wp.atomic_sub(f, c, bary[2] * fc)
        return fc
    return wp.vec3(0.0)


@wp.func
def particle_contacts(
    i: int,
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    radius: wp.array(dtype=float),
    flags: wp.array(dtype=wp.int32),
    world: wp.array(dtype=wp.int32),
    grid: wp.uint64,
    use_grid: int,
    max_radius: float,
    p_ke: float,
    p_kd: float,
    p_kf: float,
    p_mu: float,
    cohesion: float,
    mesh: wp.uint64,
    tri_contact: int,
    tri_indices: wp.array2d(dtype=wp.int32),
    tri_ke: float,
    f: wp.array(dtype=wp.vec3),
):
    # (the query loops only accumulate into ``fi``: their per-candidate work lives in functions, so
    # no variable is redefined inside a dynamic loop and the adjoint stays exact)
    if not _active(flags, i):
        return
    xi = x[i]
    vi = v[i]
    ri = radius[i]
    wi = world[i]
    fi = wp.vec3(0.0)
    if use_grid != 0:
        query = wp.hash_grid_query(grid, xi, ri + max_radius + cohesion)
        j = int(0)
        while wp.hash_grid_query_next(query, j):
            if j != i and _active(flags, j) and _same_world(wi, world[j]):
                fi = fi + _pair_force(i, j, xi, vi, ri, x, v, radius, p_ke, p_kd, p_kf, p_mu, cohesion)
    if tri_contact != 0:
        tq = wp.mesh_query_aabb(mesh, xi - wp.vec3(ri), xi + wp.vec3(ri))
        t = int(0)
        while wp.mesh_query_next(tq, t):
            a = tri_indices[t, 0]
            b = tri_indices[t, 1]
            c = tri_indices[t, 2]
            if a != i and b != i and c != i and _same_world(wi, world[a]):
                fi = fi + _triangle_contact_force(xi, ri, a, b, c, x, tri_ke, f)
    wp.atomic_add(f, i, fi)


@wp.kernel
def eval_particle_forces_kernel(
    # Work items ``[0, work)`` visited with a grid stride (``stride`` = launch size):
    work: int,
    stride: int,
    # Counts (item ranges, in this order):
    spring_count: int,
    tri_count: int,
    edge_count: int,
    tet_count: int,
    soft_count: int,
    particle_count: int,
    # State in:
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    # Model: particles
    radius: wp.array(dtype=float),
    flags: wp.array(dtype=wp.int32),
    world: wp.array(dtype=wp.int32),
    # Model: springs
    spring_indices: wp.array(dtype=wp.int32),
    spring_rest: wp.array(dtype=float),
    spring_ke: wp.array(dtype=float),
    spring_kd: wp.array(dtype=float),
    # Model: triangles
    tri_indices: wp.array2d(dtype=wp.int32),
    tri_poses: wp.array(dtype=wp.mat22),
    tri_materials: wp.array2d(dtype=float),
    tri_activation: wp.array(dtype=float),
    # Model: edges
    edge_indices: wp.array2d(dtype=wp.int32),
    edge_rest_angle: wp.array(dtype=float),
    edge_props: wp.array2d(dtype=float),
    # Model: tetrahedra
    tet_indices: wp.array2d(dtype=wp.int32),
    tet_poses: wp.array(dtype=wp.mat33),
    tet_materials: wp.array2d(dtype=float),
    tet_activation: wp.array(dtype=float),
    # Contacts (particle-shape):
    contact_count: wp.array(dtype=wp.int32),
    contact_particle: wp.array(dtype=wp.int32),
    contact_shape: wp.array(dtype=wp.int32),
    contact_body_pos: wp.array(dtype=wp.vec3),
    contact_body_vel: wp.array(dtype=wp.vec3),
    contact_normal: wp.array(dtype=wp.vec3),
    shape_body: wp.array(dtype=wp.int32),
    shape_ke: wp.array(dtype=float),
    shape_kd: wp.array(dtype=float),
    shape_kf: wp.array(dtype=float),
    shape_mu: wp.array(dtype=float),
    body_com: wp.array(dtype=wp.vec3),
    soft_ke: float,
    soft_kd: float,
    soft_kf: float,
    soft_mu: float,
    # Particle-particle and particle-triangle contacts:
    grid: wp.uint64,
    use_grid: int,
    max_radius: float,
    p_ke: float,
    p_kd: float,
    p_kf: float,
    p_mu: float,
    cohesion: float,
    mesh: wp.uint64,
    tri_contact: int,
    # Out (accumulated):
    particle_f: wp.array(dtype=wp.vec3),
    body_f: wp.array(dtype=wp.spatial_vector),
):
    # An if / elif chain, not ``continue``: Warp 1.19 drops the adjoint of a dynamic-loop iteration
    # that ends with ``continue`` (NVIDIA/warp#1552).
    for item in range(wp.tid(), work, stride):
        t_tri = item - spring_count
        t_edge = t_tri - tri_count
        t_tet = t_edge - edge_count
        t_soft = t_tet - tet_count
        t_part = t_soft - soft_count
        if item < spring_count:
            spring_force(item, x, v, spring_indices, spring_rest, spring_ke, spring_kd, particle_f)
        elif t_tri < tri_count:
            triangle_force(t_tri, x, v, tri_indices, tri_poses, tri_materials, tri_activation, particle_f)
        elif t_edge < edge_count:
            edge_force(t_edge, x, v, edge_indices, edge_rest_angle, edge_props, particle_f)
        elif t_tet < tet_count:
            tet_force(t_tet, x, v, tet_indices, tet_poses, tet_materials, tet_activation, particle_f)
        elif t_soft < soft_count:
            soft_contact_force(t_soft, x, v, radius, flags, contact_count, contact_particle, contact_shape,
                               contact_body_pos, contact_body_vel, contact_normal, shape_body, shape_ke, shape_kd,
                               shape_kf, shape_mu, body_q, body_qd, body_com, soft_ke, soft_kd, soft_kf, soft_mu,
                               particle_f, body_f)  # fmt: skip
        elif t_part < particle_count:
            particle_contacts(t_part, x, v, radius, flags, world, grid, use_grid, max_radius, p_ke, p_kd, p_kf, p_mu,
                              cohesion, mesh, tri_contact, tri_indices, soft_ke, particle_f)  # fmt: skip


@wp.func
def integrate_one(
    i: int,
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    f: wp.array(dtype=wp.vec3),
    f_ext: wp.array(dtype=wp.vec3),
    inv_mass: wp.array(dtype=float),
    flags: wp.array(dtype=wp.int32),
    world: wp.array(dtype=wp.int32),
    gravity: wp.array(dtype=wp.vec3),
    max_velocity: float,
    dt: float,
    x_out: wp.array(dtype=wp.vec3),
    v_out: wp.array(dtype=wp.vec3),
):
    x0 = x[i]
    v0 = v[i]
    if not _active(flags, i):
        x_out[i] = x0
        v_out[i] = v0
        return
    w = inv_mass[i]
    a = f[i]
    if f_ext.shape[0] > i:
        a = a + f_ext[i]
    a = a * w
    if w > 0.0:
        a = a + gravity_of_world(gravity, world[i])  # world -1: the last (global) row
    v1 = v0 + a * dt
    speed = wp.length(v1)
    if speed > max_velocity:
        v1 = v1 * (max_velocity / speed)
    x_out[i] = x0 + v1 * dt
    v_out[i] = v1


@wp.kernel
def integrate_particles_kernel(
    n: int,
    stride: int,
    # State in:
    x: wp.array(dtype=wp.vec3),
    v: wp.array(dtype=wp.vec3),
    f: wp.array(dtype=wp.vec3),
    f_ext: wp.array(dtype=wp.vec3),
    # Model:
    inv_mass: wp.array(dtype=float),
    flags: wp.array(dtype=wp.int32),
    world: wp.array(dtype=wp.int32),
    gravity: wp.array(dtype=wp.vec3),
    max_velocity: float,
    dt: float,
    # State out:
    x_out: wp.array(dtype=wp.vec3),
    v_out: wp.array(dtype=wp.vec3),
):
    """``v' = v + dt (w (f + f_ext) + g [w > 0])``, ``|v'|`` clamped to ``max_velocity``,
    ``x' = x + dt v'``; particles without ``ACTIVE`` keep their position and velocity."""
    for i in range(wp.tid(), n, stride):
        integrate_one(i, x, v, f, f_ext, inv_mass, flags, world, gravity, max_velocity, dt, x_out, v_out)

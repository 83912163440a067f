"""GJK distance between two convex shapes (Gilbert-Johnson-Keerthi, with the closest-point
sub-simplex search done by Voronoi-region tests on points, segments, triangles and
tetrahedra).

Works on the Minkowski difference ``D = A - (B + offB)`` given by the support functions of
:mod:`.support`; returns the distance, the witness points on A and on ``B + offB`` and an
overlap flag (origin inside D up to the tolerance).
"""

from __future__ import annotations

import warp as wp

wp.set_module_options({"enable_backward": False, "max_unroll": 1})

from .support import ConvexGeo, shape_center, support_world

mat43g = wp.types.matrix(shape=(4, 3), dtype=wp.float32)
vec4g = wp.types.vector(length=4, dtype=wp.float32)

GJK_MAX_ITER = wp.constant(64)
#: relative duality-gap tolerance ``|v|^2 - v.w <= eps |v|^2``
GJK_REL_TOL = wp.constant(1.0e-6)
#: squared distance under which the shapes count as touching / overlapping [m^2]
GJK_OVERLAP_SQ = wp.constant(1.0e-14)


@wp.func
def tri_closest_bary(a: wp.vec3, b: wp.vec3, c: wp.vec3):
    """Barycentric coordinates of the point of triangle abc closest to the origin."""
    ab = b - a
    ac = c - a
    d1 = -wp.dot(ab, a)
    d2 = -wp.dot(ac, a)
    if d1 <= 0.0 and d2 <= 0.0:
        return wp.vec3(1.0, 0.0, 0.0)
    d3 = -wp.dot(ab, b)
    d4 = -wp.dot(ac, b)
    if d3 >= 0.0 and d4 <= d3:
        return wp.vec3(0.0, 1.0, 0.0)
    vc = d1 * d4 - d3 * d2
    if vc <= 0.0 and d1 >= 0.0 and d3 <= 0.0:
        v = d1 / (d1 - d3)
        return wp.vec3(1.0 - v, v, 0.0)
    d5 = -wp.dot(ab, c)
    d6 = -wp.dot(ac, c)
    if d6 >= 0.0 and d5 <= d6:
        return wp.vec3(0.0, 0.0, 1.0)
    vb = d5 * d2 - d1 * d6
    if vb <= 0.0 and d2 >= 0.0 and d6 <= 0.0:
        w = d2 / (d2 - d6)
        return wp.vec3(1.0 - w, 0.0, w)
    va = d3 * d6 - d5 * d4
    if va <= 0.0 and (d4 - d3) >= 0.0 and (d5 - d6) >= 0.0:
        w = (d4 - d3) / ((d4 - d3) + (d5 - d6))
        return wp.vec3(0.0, 1.0 - w, w)
    den = va + vb + vc
    if wp.abs(den) < 1.0e-30:
        return wp.vec3(1.0, 0.0, 0.0)
    v = vb / den
    w = vc / den
    return wp.vec3(1.0 - v - w, v, w)


@wp.func(inline=False)
def simplex_closest(W: mat43g, n: int):
    """Barycentric weights (vec4) of the simplex point closest to the origin; inside flag for tetrahedra."""
    lam = vec4g(0.0, 0.0, 0.0, 0.0)
    inside = int(0)
    if n == 1:
        lam[0] = 1.0
    elif n == 2:
        a = W[0]
        b = W[1]
        ab = b - a
        dd = wp.dot(ab, ab)
        t = float(0.0)
        if dd > 1.0e-30:
            t = wp.clamp(-wp.dot(a, ab) / dd, 0.0, 1.0)
        lam[0] = 1.0 - t
        lam[1] = t
    elif n == 3:
        bc = tri_closest_bary(W[0], W[1], W[2])
        lam[0] = bc[0]
        lam[1] = bc[1]
        lam[2] = bc[2]
    else:
        e1 = W[1] - W[0]
        e2 = W[2] - W[0]
        e3 = W[3] - W[0]
        vol = wp.dot(wp.cross(e1, e2), e3)
        el = wp.max(wp.max(wp.length(e1), wp.length(e2)), wp.length(e3))
        best = float(1.0e30)
        any_out = int(0)
        for f in range(4):
            # face f omits vertex f
            i0 = (f + 1) % 4
            i1 = (f + 2) % 4
            i2 = (f + 3) % 4
            a = W[i0]
            b = W[i1]
            c = W[i2]
            m = wp.cross(b - a, c - a)
            so = -wp.dot(m, a)
            sl = wp.dot(m, W[f] - a)
            degenerate = wp.abs(vol) < 1.0e-5 * el * el * el
            if so * sl < 0.0 or degenerate:
                any_out = 1
                bc = tri_closest_bary(a, b, c)
                p = bc[0] * a + bc[1] * b + bc[2] * c
                dp = wp.dot(p, p)
                if dp < best:
                    best = dp
                    lam = vec4g(0.0, 0.0, 0.0, 0.0)
                    lam[i0] = bc[0]
                    lam[i1] = bc[1]
                    lam[i2] = bc[2]
        if any_out == 0:
            inside = 1
            lam = vec4g(0.25, 0.25, 0.25, 0.25)
    return lam, inside


@wp.func
def compact_simplex(W: mat43g, PA: mat43g, PB: mat43g, n: int, lam: vec4g):
    """The supporting sub-simplex of ``W`` (Minkowski points) and its witnesses ``PA``, ``PB``: the
    vertices with barycentric weight ``lam > 0``, their count, and the weighted closest point and
    witness points."""
    W2 = mat43g()
    A2 = mat43g()
    B2 = mat43g()
    m = int(0)
    nv = wp.vec3(0.0)
    na = wp.vec3(0.0)
    nb = wp.vec3(0.0)
    for i in range(n):
        if lam[i] > 0.0:
            W2[m] = W[i]
            A2[m] = PA[i]
            B2[m] = PB[i]
            nv += lam[i] * W[i]
            na += lam[i] * PA[i]
            nb += lam[i] * PB[i]
            m += 1
    return W2, A2, B2, m, nv, na, nb


@wp.func(inline=False)
def gjk(gA: ConvexGeo, gB: ConvexGeo, verts: wp.array(dtype=wp.vec3), core: int, offB: wp.vec3):
    """Distance between A and B + offB: (distance, point on A, point on B + offB, overlap flag)."""
    W = mat43g()
    PA = mat43g()
    PB = mat43g()
    d0 = shape_center(gA, verts) - shape_center(gB, verts) - offB
    if wp.dot(d0, d0) < 1.0e-20:
        d0 = wp.vec3(1.0, 0.0, 0.0)
    a0 = support_world(gA, verts, -d0, core)
    b0 = support_world(gB, verts, d0, core) + offB
    W[0] = a0 - b0
    PA[0] = a0
    PB[0] = b0
    n = int(1)
    v = W[0]
    pa = a0
    pb = b0
    overlap = int(0)
    for _it in range(GJK_MAX_ITER):
        vv = wp.dot(v, v)
        if vv < GJK_OVERLAP_SQ:
            overlap = 1
            break
        a = support_world(gA, verts, -v, core)
        b = support_world(gB, verts, v, core) + offB
        w = a - b
        if vv - wp.dot(v, w) <= GJK_REL_TOL * vv:
            break
        W[n] = w
        PA[n] = a
        PB[n] = b
        n += 1
        lam, inside = simplex_closest(W, n)
        if inside != 0:
            overlap = 1
            break
        # compact to the supporting sub-simplex
        W2, A2, B2, m, nv, na, nb = compact_simplex(W, PA, PB, n, lam)
        if wp.dot(nv, nv) >= vv:
            # no progress (numerical floor): keep the previous estimate
            break
        W = W2
        PA = A2
        PB = B2
        n = m
        v = nv
        pa = na
        pb = nb
        if n == 1:
            pa = PA[0]
            pb = PB[0]
    return wp.length(v), pa, pb, overlap

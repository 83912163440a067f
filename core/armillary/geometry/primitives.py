"""Analytic primitive collision routines (Warp device functions).

All routines work in world space and describe each contact by two *core* points
``pa`` (on shape 0) and ``pb`` (on shape 1), a unit normal ``n`` pointing from
shape 0 toward shape 1 and the effective radii ``ra``/``rb`` of the cores (sphere
and capsule contacts are stored at the sphere center / capsule axis with the
radius as effective radius; boxes and planes store surface points with radius 0).
The surface separation of a contact is ``dot(n, pb - pa) - ra - rb``.

The public ``collide_*`` functions (exported by :mod:`armillary.geometry`, for per-pair
queries inside user kernels) take the reference engine's signatures: positions, ``wp.mat33``
rotations (columns = local axes), half sizes and unit axes with half lengths. They return the
signed surface distance, the world contact position (midpoint of the two surface points) and
the normal (first shape -> second); multi-contact variants return fixed-size vectors and
matrices with unused slots set to :data:`MAXVAL` (distances) and zeros. The ``*_xf`` variants
take ``wp.transform`` poses (capsules along local z). The narrow phase calls neither: it uses
the helpers (``point_box``, ``capsule_box_param``, ``box_box_sat``, ...) directly.
"""

from __future__ import annotations

import warp as wp

wp.set_module_options({"enable_backward": False, "max_unroll": 1})

MAXVAL = 1.0e10

mat83 = wp.types.matrix(shape=(8, 3), dtype=wp.float32)
vec4f = wp.types.vector(length=4, dtype=wp.float32)
mat43 = wp.types.matrix(shape=(4, 3), dtype=wp.float32)
vec2f = wp.types.vector(length=2, dtype=wp.float32)
mat23 = wp.types.matrix(shape=(2, 3), dtype=wp.float32)
vec9i = wp.types.vector(length=9, dtype=wp.int32)


# --------------------------------------------------------------------------- helpers
@wp.func
def safe_normalize(v: wp.vec3, fallback: wp.vec3):
    n = wp.length(v)
    if n > 1.0e-12:
        return v / n
    return fallback


@wp.func
def any_perpendicular(v: wp.vec3):
    if wp.abs(v[0]) < 0.57:
        return wp.normalize(wp.cross(v, wp.vec3(1.0, 0.0, 0.0)))
    return wp.normalize(wp.cross(v, wp.vec3(0.0, 1.0, 0.0)))


@wp.func
def closest_point_segment(p: wp.vec3, a: wp.vec3, b: wp.vec3):
    """Parameter t in [0, 1] of the point of segment ab closest to p."""
    ab = b - a
    d = wp.dot(ab, ab)
    if d < 1.0e-20:
        return 0.0
    return wp.clamp(wp.dot(p - a, ab) / d, 0.0, 1.0)


@wp.func
def closest_point_triangle(p: wp.vec3, a: wp.vec3, b: wp.vec3, c: wp.vec3):
    """Barycentric weights ``(wa, wb, wc)`` of the point of triangle abc closest to ``p`` (Voronoi regions)."""
    ab = b - a
    ac = c - a
    ap = p - a
    d1 = wp.dot(ab, ap)
    d2 = wp.dot(ac, ap)
    if d1 <= 0.0 and d2 <= 0.0:
        return wp.vec3(1.0, 0.0, 0.0)
    bp = p - b
    d3 = wp.dot(ab, bp)
    d4 = wp.dot(ac, bp)
    if d3 >= 0.0 and d4 <= d3:
        return wp.vec3(0.0, 1.0, 0.0)
    vc = d1 * d4 - d3 * d2
    if vc <= 0.0 and d1 >= 0.0 and d3 <= 0.0:
        t = d1 / (d1 - d3)
        return wp.vec3(1.0 - t, t, 0.0)
    cp = p - c
    d5 = wp.dot(ab, cp)
    d6 = wp.dot(ac, cp)
    if d6 >= 0.0 and d5 <= d6:
        return wp.vec3(0.0, 0.0, 1.0)
    vb = d5 * d2 - d1 * d6
    if vb <= 0.0 and d2 >= 0.0 and d6 <= 0.0:
        t = d2 / (d2 - d6)
        return wp.vec3(1.0 - t, 0.0, t)
    va = d3 * d6 - d5 * d4
    if va <= 0.0 and (d4 - d3) >= 0.0 and (d5 - d6) >= 0.0:
        t = (d4 - d3) / ((d4 - d3) + (d5 - d6))
        return wp.vec3(0.0, 1.0 - t, t)
    denom = 1.0 / (va + vb + vc)
    v = vb * denom
    w = vc * denom
    return wp.vec3(1.0 - v - w, v, w)


@wp.func
def closest_segment_segment(p1: wp.vec3, q1: wp.vec3, p2: wp.vec3, q2: wp.vec3):
    """Parameters (s, t) of the closest points p1 + s (q1 - p1) and p2 + t (q2 - p2)."""
    d1 = q1 - p1
    d2 = q2 - p2
    r = p1 - p2
    a = wp.dot(d1, d1)
    e = wp.dot(d2, d2)
    f = wp.dot(d2, r)
    s = float(0.0)
    t = float(0.0)
    eps = 1.0e-20
    if a <= eps and e <= eps:
        return s, t
    if a <= eps:
        t = wp.clamp(f / e, 0.0, 1.0)
        return s, t
    c = wp.dot(d1, r)
    if e <= eps:
        s = wp.clamp(-c / a, 0.0, 1.0)
        return s, t
    b = wp.dot(d1, d2)
    denom = a * e - b * b
    if denom > 1.0e-12 * a * e:
        s = wp.clamp((b * f - c * e) / denom, 0.0, 1.0)
    t = (b * s + f) / e
    if t < 0.0:
        t = 0.0
        s = wp.clamp(-c / a, 0.0, 1.0)
    elif t > 1.0:
        t = 1.0
        s = wp.clamp((b - c) / a, 0.0, 1.0)
    return s, t


@wp.func
def box_sdf_local(p: wp.vec3, h: wp.vec3):
    q = wp.vec3(wp.abs(p[0]) - h[0], wp.abs(p[1]) - h[1], wp.abs(p[2]) - h[2])
    outside = wp.length(wp.vec3(wp.max(q[0], 0.0), wp.max(q[1], 0.0), wp.max(q[2], 0.0)))
    inside = wp.min(wp.max(q[0], wp.max(q[1], q[2])), 0.0)
    return outside + inside


@wp.func
def point_box(c: wp.vec3, X: wp.transform, h: wp.vec3):
    """Closest surface point of a box to the world point ``c`` and the outward-from-c direction.

    Returns (surface point, unit normal from ``c`` toward the box surface contact, signed distance).
    For ``c`` inside the box, the normal points from ``c`` deeper into the box (away from
    the nearest face) so that moving ``c`` along ``-n`` exits the box.
    """
    q = wp.transform_get_rotation(X)
    pl = wp.quat_rotate_inv(q, c - wp.transform_get_translation(X))
    cl = wp.vec3(wp.clamp(pl[0], -h[0], h[0]), wp.clamp(pl[1], -h[1], h[1]), wp.clamp(pl[2], -h[2], h[2]))
    diff = cl - pl
    dist = wp.length(diff)
    if dist > 1.0e-9:
        n = wp.quat_rotate(q, diff / dist)
        return wp.transform_point(X, cl), n, dist
    # inside: nearest face
    best = int(0)
    bd = h[0] - wp.abs(pl[0])
    for i in range(1, 3):
        di = h[i] - wp.abs(pl[i])
        if di < bd:
            bd = di
            best = i
    sp = pl
    o = wp.vec3(0.0)
    if pl[best] >= 0.0:
        sp[best] = h[best]
        o[best] = 1.0
    else:
        sp[best] = -h[best]
        o[best] = -1.0
    return wp.transform_point(X, sp), -wp.quat_rotate(q, o), -bd


@wp.func
def capsule_ends(X: wp.transform, hh: float):
    c = wp.transform_get_translation(X)
    ax = wp.quat_rotate(wp.transform_get_rotation(X), wp.vec3(0.0, 0.0, hh))
    return c - ax, c + ax


@wp.func
def box_vertex(X: wp.transform, h: wp.vec3, i: int):
    sx = float(1.0)
    sy = float(1.0)
    sz = float(1.0)
    if (i & 1) == 0:
        sx = -1.0
    if (i & 2) == 0:
        sy = -1.0
    if (i & 4) == 0:
        sz = -1.0
    return wp.transform_point(X, wp.vec3(sx * h[0], sy * h[1], sz * h[2]))


@wp.func
def box_edge(X: wp.transform, h: wp.vec3, e: int):
    """Endpoints of edge ``e`` (0..11) of a box: axis e // 4, sign combination e % 4."""
    axis = e // 4
    combo = e % 4
    k = (axis + 1) % 3
    l = (axis + 2) % 3
    a = wp.vec3(0.0)
    if (combo & 1) == 0:
        a[k] = -h[k]
    else:
        a[k] = h[k]
    if (combo & 2) == 0:
        a[l] = -h[l]
    else:
        a[l] = h[l]
    b = a
    a[axis] = -h[axis]
    b[axis] = h[axis]
    return wp.transform_point(X, a), wp.transform_point(X, b)


# --------------------------------------------------------------------------- box-box helpers
@wp.func
def clip_poly(poly: mat83, n: int, axis: int, sign: float, limit: float):
    """Keep the part of a planar polygon (points (u, v, w)) with ``sign * p[axis] <= limit``."""
    out = mat83()
    m = int(0)
    if n == 0:
        return out, m
    prev = poly[n - 1]
    dprev = sign * prev[axis] - limit
    for i in range(n):
        cur = poly[i]
        dcur = sign * cur[axis] - limit
        if dprev <= 0.0:
            if dcur <= 0.0:
                if m < 8:
                    out[m] = cur
                    m += 1
            else:
                t = dprev / (dprev - dcur)
                if m < 8:
                    out[m] = prev + t * (cur - prev)
                    m += 1
        else:
            if dcur <= 0.0:
                t = dprev / (dprev - dcur)
                if m < 8:
                    out[m] = prev + t * (cur - prev)
                    m += 1
                if m < 8:
                    out[m] = cur
                    m += 1
        prev = cur
        dprev = dcur
    return out, m


@wp.func
def box_local_axis(q: wp.quat, i: int):
    """World direction of local axis ``i`` of a frame with rotation ``q``."""
    e = wp.vec3(0.0)
    e[i] = 1.0
    return wp.quat_rotate(q, e)


@wp.func
def box_rotation(q: wp.quat):
    """The three world axes of a box frame as the rows of a matrix (row i = ``box_axis(X, i)``)."""
    a0 = box_local_axis(q, 0)
    a1 = box_local_axis(q, 1)
    a2 = box_local_axis(q, 2)
    return wp.mat33(a0[0], a0[1], a0[2], a1[0], a1[1], a1[2], a2[0], a2[1], a2[2])


@wp.func
def edge_in_cone(dl: wp.vec3, axis: int, combo: int, eps: float):
    """Whether edge ``combo`` of the box edges parallel to ``axis`` (see :func:`box_edge`) can hold
    a closest point with outward direction ``dl`` (box-local): the direction must lie in the
    edge's normal cone, spanned by the outward normals of its two faces (``eps`` slack)."""
    k = (axis + 1) % 3
    l = (axis + 2) % 3
    sk = float(1.0)
    if (combo & 1) == 0:
        sk = -1.0
    sl = float(1.0)
    if (combo & 2) == 0:
        sl = -1.0
    return sk * dl[k] >= -eps and sl * dl[l] >= -eps


@wp.func
def cone_combos(dl: wp.vec3, axis: int, eps: float):
    """4-bit set of the sign combinations ``combo`` (see :func:`box_edge`) of the box edges
    parallel to ``axis`` for which :func:`edge_in_cone` holds with direction ``dl``."""
    k = (axis + 1) % 3
    l = (axis + 2) % 3
    # bit 0 of combo: sign of the k offset, bit 1: sign of the l offset
    sk = int(0)
    if dl[k] <= eps:  # -dl[k] >= -eps
        sk = sk | 1
    if dl[k] >= -eps:
        sk = sk | 2
    sl = int(0)
    if dl[l] <= eps:
        sl = sl | 1
    if dl[l] >= -eps:
        sl = sl | 2
    m = int(0)
    for combo in range(4):
        if (sk & (int(1) << (combo & 1))) != 0 and (sl & (int(1) << ((combo >> 1) & 1))) != 0:
            m = m | (int(1) << combo)
    return m


@wp.func
def spread_pairs(ma: int, mb: int):
    """Pair mask (bit ``4 ca + cb``) of every combo ``ca`` in ``ma`` with every ``cb`` in ``mb``."""
    m = int(0)
    for ca in range(4):
        if (ma & (int(1) << ca)) != 0:
            m = m | (mb << (4 * ca))
    return m


@wp.func
def vertex_box_dist(v: wp.vec3, q: wp.quat, t: wp.vec3, h: wp.vec3):
    """Distance from the world point ``v`` to a box (rotation ``q``, center ``t``) as
    :func:`point_box` computes it for a point outside the box; a value ``<= 1e-9`` means the
    point touches or is inside (call :func:`point_box` for the exact answer)."""
    pl = wp.quat_rotate_inv(q, v - t)
    cl = wp.vec3(wp.clamp(pl[0], -h[0], h[0]), wp.clamp(pl[1], -h[1], h[1]), wp.clamp(pl[2], -h[2], h[2]))
    return wp.length(cl - pl)


@wp.func
def box_box_distance(XA: wp.transform, hA: wp.vec3, XB: wp.transform, hB: wp.vec3):
    """Exact distance between two separated boxes by feature enumeration.

    Vertex-box queries first, then the edge pairs that can hold the closest points: a pair whose
    closest points include an edge endpoint is never closer than that vertex's box query, and a
    pair with interior closest points is the minimum only if their direction (along the cross
    product of the edge directions, pointing from A to B) lies in both edges' normal cones, so
    the other pairs (and parallel pairs, whose minimum is attained at an endpoint) are skipped.
    The visit order and strict-improvement rule are those of the full enumeration; the
    closest points of a vertex query are formed only for the winner.

    Returns (distance, point on A, point on B).
    """
    qa = wp.transform_get_rotation(XA)
    qb = wp.transform_get_rotation(XB)
    ta = wp.transform_get_translation(XA)
    tb = wp.transform_get_translation(XB)
    best = float(MAXVAL)
    # winner of the vertex queries: 2 i (vertex i of A against B) or 2 i + 1 (vertex i of B against A)
    win = int(-1)
    for i in range(8):
        v = box_vertex(XA, hA, i)
        d = vertex_box_dist(v, qb, tb, hB)
        if d <= 1.0e-9:
            sp, n, d = point_box(v, XB, hB)
        if d < best:
            best = d
            win = 2 * i
        w = box_vertex(XB, hB, i)
        d2 = vertex_box_dist(w, qa, ta, hA)
        if d2 <= 1.0e-9:
            sp2, n2, d2 = point_box(w, XA, hA)
        if d2 < best:
            best = d2
            win = 2 * i + 1
    pa = wp.vec3(0.0)
    pb = wp.vec3(0.0)
    if win >= 0:
        if (win & 1) == 0:
            pa = box_vertex(XA, hA, win >> 1)
            pb, n3, d3 = point_box(pa, XB, hB)
        else:
            pb = box_vertex(XB, hB, win >> 1)
            pa, n4, d4 = point_box(pb, XA, hA)
    RA = box_rotation(qa)
    RB = box_rotation(qb)
    dc = tb - ta
    scale = wp.max(wp.max(hA[0], wp.max(hA[1], hA[2])), wp.max(hB[0], wp.max(hB[1], hB[2])))
    # per axis pair (ia, jb): bit 4 ca + cb set when edge pair (4 ia + ca, 4 jb + cb) is a candidate
    masks = vec9i()
    for ia in range(3):
        for jb in range(3):
            c = wp.cross(RA[ia], RB[jb])
            cl = wp.length(c)
            mask = int(0)
            if cl > 1.0e-6:
                u = c / cl
                sd = wp.dot(u, dc)
                eps = 1.0e-3 + 1.0e-5 / cl  # slack grows as the direction gets ill-conditioned
                tol = 1.0e-3 * scale + eps * wp.length(dc)
                ua = RA * u
                ub = RB * u
                # the direction A -> B is +u or -u (its projection on dc is at least the distance)
                if sd >= -tol:
                    mask = mask | spread_pairs(cone_combos(ua, ia, eps), cone_combos(-ub, jb, eps))
                if sd <= tol:
                    mask = mask | spread_pairs(cone_combos(-ua, ia, eps), cone_combos(ub, jb, eps))
            masks[3 * ia + jb] = mask
    for ea in range(12):
        ia = ea // 4
        ca = ea % 4
        a0 = wp.vec3(0.0)
        a1 = wp.vec3(0.0)
        have_a = int(0)
        for jb in range(3):
            row = (masks[3 * ia + jb] >> (4 * ca)) & 15
            if row != 0:
                for cb in range(4):
                    if (row & (int(1) << cb)) != 0:
                        if have_a == 0:
                            a0, a1 = box_edge(XA, hA, ea)
                            have_a = 1
                        b0, b1 = box_edge(XB, hB, 4 * jb + cb)
                        s, t = closest_segment_segment(a0, a1, b0, b1)
                        x = a0 + s * (a1 - a0)
                        y = b0 + t * (b1 - b0)
                        d = wp.length(y - x)
                        if d < best:
                            best = d
                            pa = x
                            pb = y
    return best, pa, pb


@wp.func
def box_axis(X: wp.transform, i: int):
    return box_local_axis(wp.transform_get_rotation(X), i)


@wp.func
def box_projected_radius(X: wp.transform, h: wp.vec3, u: wp.vec3):
    r = float(0.0)
    for i in range(3):
        r += h[i] * wp.abs(wp.dot(box_axis(X, i), u))
    return r


@wp.func
def box_projected_radius_r(R: wp.mat33, h: wp.vec3, u: wp.vec3):
    """:func:`box_projected_radius` with the box axes given as the rows of ``R``."""
    r = float(0.0)
    for i in range(3):
        r += h[i] * wp.abs(wp.dot(R[i], u))
    return r


@wp.func
def box_box_sat(XA: wp.transform, hA: wp.vec3, XB: wp.transform, hB: wp.vec3):
    """Separating-axis test. Returns (max separation, axis code, normal A->B).

    Axis code: 0..2 face of A, 3..5 face of B, 6 + 3 i + j edge a_i x b_j.
    Face axes are preferred over edge axes within a small tolerance.
    """
    d = wp.transform_get_translation(XB) - wp.transform_get_translation(XA)
    RA = box_rotation(wp.transform_get_rotation(XA))
    RB = box_rotation(wp.transform_get_rotation(XB))
    best = float(-MAXVAL)
    code = int(0)
    nbest = wp.vec3(0.0, 0.0, 1.0)
    for i in range(3):
        u = RA[i]
        s = wp.abs(wp.dot(d, u)) - hA[i] - box_projected_radius_r(RB, hB, u)
        if s > best + 1.0e-6:
            best = s
            code = i
            if wp.dot(d, u) >= 0.0:
                nbest = u
            else:
                nbest = -u
    for i in range(3):
        u = RB[i]
        s = wp.abs(wp.dot(d, u)) - hB[i] - box_projected_radius_r(RA, hA, u)
        if s > best + 1.0e-6:
            best = s
            code = 3 + i
            if wp.dot(d, u) >= 0.0:
                nbest = u
            else:
                nbest = -u
    scale = wp.max(wp.max(hA[0], wp.max(hA[1], hA[2])), wp.max(hB[0], wp.max(hB[1], hB[2])))
    tol = 1.0e-4 * scale
    face_best = best
    for i in range(3):
        a = RA[i]
        for j in range(3):
            b = RB[j]
            c = wp.cross(a, b)
            cl = wp.length(c)
            if cl > 1.0e-4:
                u = c / cl
                s = wp.abs(wp.dot(d, u)) - box_projected_radius_r(RA, hA, u) - box_projected_radius_r(RB, hB, u)
                if s > face_best + tol and s > best:
                    best = s
                    code = 6 + 3 * i + j
                    if wp.dot(d, u) >= 0.0:
                        nbest = u
                    else:
                        nbest = -u
    return best, code, nbest


@wp.func
def box_support_edge(X: wp.transform, h: wp.vec3, axis: int, dirn: wp.vec3):
    """The edge of a box parallel to its local ``axis`` that is extreme along ``dirn``."""
    q = wp.transform_get_rotation(X)
    dl = wp.quat_rotate_inv(q, dirn)
    c = wp.vec3(0.0)
    for k in range(3):
        if k != axis:
            if dl[k] >= 0.0:
                c[k] = h[k]
            else:
                c[k] = -h[k]
    a = c
    b = c
    a[axis] = -h[axis]
    b[axis] = h[axis]
    return wp.transform_point(X, a), wp.transform_point(X, b)


@wp.func
def box_reference_face(code: int, n: wp.vec3, XA: wp.transform, hA: wp.vec3, XB: wp.transform, hB: wp.vec3):
    """Reference and incident boxes of a face axis ``code`` (0..5) of :func:`box_box_sat` with
    normal ``n`` (A -> B): ``(X_R, h_R, X_I, h_I, n_ref, face axis of R, 1 when R is A)``; the
    reference face's outward normal ``n_ref`` points toward the incident box."""
    if code >= 3:
        return XB, hB, XA, hA, -n, code - 3, 0
    return XA, hA, XB, hB, n, code, 1


@wp.func
def box_face_manifold(XR: wp.transform, hR: wp.vec3, ref_axis: int, nref: wp.vec3, XI: wp.transform, hI: wp.vec3):
    """Clip the incident face of box I against the reference face of box R.

    ``nref`` is the outward normal of the reference face (pointing toward I).
    Returns (points (u, v, w) in the reference face frame, count, reference axes k, l)
    where w is the height above the reference box center along nref.
    """
    cR = wp.transform_get_translation(XR)
    k = (ref_axis + 1) % 3
    l = (ref_axis + 2) % 3
    rk = box_axis(XR, k)
    rl = box_axis(XR, l)
    # incident face: most anti-parallel to nref
    inc = int(0)
    bd = float(0.0)
    for j in range(3):
        dj = wp.dot(nref, box_axis(XI, j))
        if wp.abs(dj) > wp.abs(bd):
            bd = dj
            inc = j
    sgn = float(1.0)
    if bd > 0.0:
        sgn = -1.0
    ij = box_axis(XI, inc)
    fc = wp.transform_get_translation(XI) + sgn * hI[inc] * ij
    ik = (inc + 1) % 3
    il = (inc + 2) % 3
    ek = box_axis(XI, ik) * hI[ik]
    el = box_axis(XI, il) * hI[il]
    poly = mat83()
    for c in range(4):
        su = float(1.0)
        sv = float(1.0)
        if c == 1 or c == 2:
            su = -1.0
        if c >= 2:
            sv = -1.0
        p = fc + su * ek + sv * el - cR
        poly[c] = wp.vec3(wp.dot(p, rk), wp.dot(p, rl), wp.dot(p, nref))
    n = int(4)
    poly, n = clip_poly(poly, n, 0, 1.0, hR[k])
    poly, n = clip_poly(poly, n, 0, -1.0, hR[k])
    poly, n = clip_poly(poly, n, 1, 1.0, hR[l])
    poly, n = clip_poly(poly, n, 1, -1.0, hR[l])
    return poly, n, rk, rl


#: depth tolerance of :func:`reduce_manifold4`'s first point, per metre of manifold radius (a tilt of
#: about 0.6 degrees): clipped points this close to the deepest count as equally deep
MANIFOLD_TIE_SLOPE = wp.constant(0.01)


@wp.func
def reduce_manifold4(poly: mat83, n: int, href: float, limit: float):
    """Select up to 4 well-spread points among clipped points with depth <= limit.

    The first point is the deepest one, or, among points within ``MANIFOLD_TIE_SLOPE`` x the
    manifold's radius of the deepest depth, the one farthest from the points' centroid; then the
    point farthest from it and the extreme points on either side of that diagonal. A face resting
    flat thus keeps the same (widest) points from step to step.

    Returns (selected indices as vec4 of floats (-1 unused), count).
    """
    sel = vec4f(-1.0, -1.0, -1.0, -1.0)
    # deepest
    i0 = int(-1)
    dmin = float(MAXVAL)
    for i in range(n):
        d = poly[i, 2] - href
        if d <= limit and d < dmin:
            dmin = d
            i0 = i
    if i0 < 0:
        return sel, 0
    # Near-ties in depth (a resting face: every point within ``tie`` of the deepest) take the point
    # farthest from the candidates' centroid instead. Otherwise micro-tilts of a resting box swap
    # the deepest point between steps, and with it the chosen 4 of the 5-8 clipped points: the
    # support flips from step to step and rocks the box (issue 24, stacking).
    cu = float(0.0)
    cv = float(0.0)
    kc = float(0.0)
    for i in range(n):
        if poly[i, 2] - href <= limit:
            cu += poly[i, 0]
            cv += poly[i, 1]
            kc += 1.0
    cu = cu / kc
    cv = cv / kc
    r2max = float(0.0)
    for i in range(n):
        if poly[i, 2] - href <= limit:
            r2max = wp.max(r2max, (poly[i, 0] - cu) * (poly[i, 0] - cu) + (poly[i, 1] - cv) * (poly[i, 1] - cv))
    tie = MANIFOLD_TIE_SLOPE * wp.sqrt(r2max)
    r2best = float(-1.0)
    for i in range(n):
        if poly[i, 2] - href <= wp.min(dmin + tie, limit):
            r2 = (poly[i, 0] - cu) * (poly[i, 0] - cu) + (poly[i, 1] - cv) * (poly[i, 1] - cv)
            if r2 > r2best:
                r2best = r2
                i0 = i
    sel[0] = float(i0)
    cnt = int(1)
    p0 = wp.vec2(poly[i0, 0], poly[i0, 1])
    # farthest from p0
    i1 = int(-1)
    dbest = float(1.0e-12)
    for i in range(n):
        if poly[i, 2] - href <= limit:
            q = wp.vec2(poly[i, 0], poly[i, 1]) - p0
            dd = wp.dot(q, q)
            if dd > dbest:
                dbest = dd
                i1 = i
    if i1 < 0:
        return sel, cnt
    sel[1] = float(i1)
    cnt = 2
    p1 = wp.vec2(poly[i1, 0], poly[i1, 1])
    e = p1 - p0
    i2 = int(-1)
    i3 = int(-1)
    amax = float(1.0e-9) * dbest
    amin = float(-1.0e-9) * dbest
    for i in range(n):
        if poly[i, 2] - href <= limit:
            q = wp.vec2(poly[i, 0], poly[i, 1]) - p0
            a = e[0] * q[1] - e[1] * q[0]
            if a > amax:
                amax = a
                i2 = i
            if a < amin:
                amin = a
                i3 = i
    if i2 >= 0:
        sel[cnt] = float(i2)
        cnt += 1
    if i3 >= 0:
        sel[cnt] = float(i3)
        cnt += 1
    return sel, cnt


# --------------------------------------------------------------------------- transform-based pair queries
# Single-pair routines on ``wp.transform`` poses (capsules along their local z, boxes by half
# extents). The narrow phase uses the helpers above directly; the public ``collide_*``
# functions with the reference engine's signatures are further below.
@wp.func
def collide_sphere_sphere_xf(c0: wp.vec3, r0: float, c1: wp.vec3, r1: float):
    """Signed distance, contact position (midpoint of surface points) and normal (0 -> 1)."""
    n = safe_normalize(c1 - c0, wp.vec3(0.0, 0.0, 1.0))
    d = wp.dot(n, c1 - c0) - r0 - r1
    pos = 0.5 * ((c0 + r0 * n) + (c1 - r1 * n))
    return d, pos, n


@wp.func
def collide_plane_sphere_xf(plane_n: wp.vec3, plane_p: wp.vec3, c: wp.vec3, r: float):
    d = wp.dot(c - plane_p, plane_n) - r
    pos = c - (r + 0.5 * d) * plane_n
    return d, pos, plane_n


@wp.func
def collide_sphere_capsule_xf(c: wp.vec3, r: float, X: wp.transform, cr: float, hh: float):
    a, b = capsule_ends(X, hh)
    t = closest_point_segment(c, a, b)
    return collide_sphere_sphere_xf(c, r, a + t * (b - a), cr)


@wp.func
def collide_sphere_box_xf(c: wp.vec3, r: float, X: wp.transform, h: wp.vec3):
    sp, n, s = point_box(c, X, h)
    d = s - r
    pos = 0.5 * ((c + r * n) + sp)
    return d, pos, n


@wp.func
def collide_capsule_capsule_xf(XA: wp.transform, ra: float, hha: float, XB: wp.transform, rb: float, hhb: float):
    a0, a1 = capsule_ends(XA, hha)
    b0, b1 = capsule_ends(XB, hhb)
    s, t = closest_segment_segment(a0, a1, b0, b1)
    return collide_sphere_sphere_xf(a0 + s * (a1 - a0), ra, b0 + t * (b1 - b0), rb)


@wp.func
def capsule_box_param(a: wp.vec3, b: wp.vec3, X: wp.transform, h: wp.vec3):
    """Parameter t in [0, 1] minimizing the box signed distance along segment ab (golden section)."""
    q = wp.transform_get_rotation(X)
    c = wp.transform_get_translation(X)
    la = wp.quat_rotate_inv(q, a - c)
    lb = wp.quat_rotate_inv(q, b - c)
    lo = float(0.0)
    hi = float(1.0)
    g = float(0.6180339887)
    x1 = hi - g * (hi - lo)
    x2 = lo + g * (hi - lo)
    f1 = box_sdf_local(la + x1 * (lb - la), h)
    f2 = box_sdf_local(la + x2 * (lb - la), h)
    for _it in range(36):
        if f1 <= f2:
            hi = x2
            x2 = x1
            f2 = f1
            x1 = hi - g * (hi - lo)
            f1 = box_sdf_local(la + x1 * (lb - la), h)
        else:
            lo = x1
            x1 = x2
            f1 = f2
            x2 = lo + g * (hi - lo)
            f2 = box_sdf_local(la + x2 * (lb - la), h)
    t = 0.5 * (lo + hi)
    # endpoints may be the exact minimum (plateaus / monotone)
    ft = box_sdf_local(la + t * (lb - la), h)
    f0 = box_sdf_local(la, h)
    fb = box_sdf_local(lb, h)
    if f0 <= ft and f0 <= fb:
        t = 0.0
    elif fb <= ft:
        t = 1.0
    return t


@wp.func
def collide_capsule_box_xf(X: wp.transform, r: float, hh: float, XB: wp.transform, h: wp.vec3):
    """Deepest contact of a capsule against a box: (signed distance, position, normal capsule -> box)."""
    a, b = capsule_ends(X, hh)
    t = capsule_box_param(a, b, XB, h)
    return collide_sphere_box_xf(a + t * (b - a), r, XB, h)


@wp.func
def collide_plane_capsule_xf(plane_n: wp.vec3, plane_p: wp.vec3, X: wp.transform, r: float, hh: float):
    """Both end-sphere contacts: (distances vec2, positions mat23, normal)."""
    a, b = capsule_ends(X, hh)
    d0, p0, n = collide_plane_sphere_xf(plane_n, plane_p, a, r)
    d1, p1, n1 = collide_plane_sphere_xf(plane_n, plane_p, b, r)
    pos = mat23()
    pos[0] = p0
    pos[1] = p1
    return vec2f(d0, d1), pos, n


@wp.func
def collide_plane_box_xf(plane_n: wp.vec3, plane_p: wp.vec3, X: wp.transform, h: wp.vec3, gap: float):
    """Up to 4 deepest vertex contacts within ``gap`` (unused slots: distance MAXVAL)."""
    dist = vec4f(MAXVAL, MAXVAL, MAXVAL, MAXVAL)
    pos = mat43()
    for i in range(8):
        v = box_vertex(X, h, i)
        d = wp.dot(v - plane_p, plane_n)
        if d <= gap:
            # insert into the sorted 4-slot list
            if d < dist[3]:
                j = int(3)
                while j > 0 and dist[j - 1] > d:
                    dist[j] = dist[j - 1]
                    pos[j] = pos[j - 1]
                    j -= 1
                dist[j] = d
                pos[j] = v - 0.5 * d * plane_n
    return dist, pos, plane_n


@wp.func
def collide_box_box_xf(XA: wp.transform, hA: wp.vec3, XB: wp.transform, hB: wp.vec3, gap: float):
    """Box-box manifold: up to 4 contacts (distances vec4 with MAXVAL padding, positions, normal A -> B)."""
    dist = vec4f(MAXVAL, MAXVAL, MAXVAL, MAXVAL)
    pos = mat43()
    sep, code, n = box_box_sat(XA, hA, XB, hB)
    if sep > gap:
        return dist, pos, n
    if code < 6:
        XR, hR, XI, hI, nref, ax, ref_a = box_reference_face(code, n, XA, hA, XB, hB)
        poly, m, rk, rl = box_face_manifold(XR, hR, ax, nref, XI, hI)
        sel, cnt = reduce_manifold4(poly, m, hR[ax], gap)
        cR = wp.transform_get_translation(XR)
        for s in range(cnt):
            i = int(sel[s])
            u = poly[i, 0]
            v = poly[i, 1]
            w = poly[i, 2]
            dist[s] = w - hR[ax]
            pos[s] = cR + u * rk + v * rl + 0.5 * (w + hR[ax]) * nref
        return dist, pos, n
    i = (code - 6) // 3
    j = (code - 6) % 3
    a0, a1 = box_support_edge(XA, hA, i, n)
    b0, b1 = box_support_edge(XB, hB, j, -n)
    s, t = closest_segment_segment(a0, a1, b0, b1)
    pa = a0 + s * (a1 - a0)
    pb = b0 + t * (b1 - b0)
    dist[0] = wp.dot(n, pb - pa)
    pos[0] = 0.5 * (pa + pb)
    return dist, pos, n


# --------------------------------------------------------------------------- cylinder / ellipsoid queries
@wp.func
def point_cylinder(p: wp.vec3, c: wp.vec3, a: wp.vec3, R: float, hh: float):
    """Closest surface point of a solid cylinder (center ``c``, unit axis ``a``) to ``p``.

    Returns (surface point, unit outward normal of the cylinder at that point pointing toward
    ``p`` when ``p`` is outside, signed distance of ``p`` to the surface).
    """
    rel = p - c
    h = wp.dot(rel, a)
    radial = rel - h * a
    rho = wp.length(radial)
    rhat = any_perpendicular(a)
    if rho > 1.0e-12:
        rhat = radial / rho
    if wp.abs(h) <= hh and rho <= R:
        # inside: nearest of the side and the two caps
        ds = R - rho
        dc = hh - wp.abs(h)
        if ds < dc:
            return c + h * a + R * rhat, rhat, -ds
        sa = float(1.0)
        if h < 0.0:
            sa = -1.0
        return c + sa * hh * a + rho * rhat, sa * a, -dc
    q = c + wp.clamp(h, -hh, hh) * a + wp.min(rho, R) * rhat
    diff = p - q
    dist = wp.length(diff)
    n = rhat
    if dist > 1.0e-12:
        n = diff / dist
    return q, n, dist


@wp.func
def collide_sphere_cylinder(sphere_pos: wp.vec3, sphere_radius: float, cylinder_pos: wp.vec3, cylinder_axis: wp.vec3,
                            cylinder_radius: float, cylinder_half_height: float):  # fmt: skip
    """Sphere against a solid cylinder: (signed distance, contact position, normal sphere -> cylinder)."""
    a = safe_normalize(cylinder_axis, wp.vec3(0.0, 0.0, 1.0))
    q, no, s = point_cylinder(sphere_pos, cylinder_pos, a, cylinder_radius, cylinder_half_height)
    n = -no
    d = s - sphere_radius
    pos = 0.5 * ((sphere_pos + sphere_radius * n) + q)
    return d, pos, n


@wp.func
def collide_plane_cylinder(plane_normal: wp.vec3, plane_pos: wp.vec3, cylinder_pos: wp.vec3, cylinder_axis: wp.vec3,
                           cylinder_radius: float, cylinder_half_height: float):  # fmt: skip
    """Plane against a cylinder (unit ``cylinder_axis``): up to 4 contacts (distances vec4 padded with
    MAXVAL, positions mat43 padded with zeros, the plane normal).

    Slot 0 is the deepest rim point of the cap nearer the plane. Near upright (axis within 22.5
    degrees of the normal) a fixed-orientation tripod on that cap follows: rim points at 0, 120 and
    240 degrees from world x projected on the cap plane (world y when the axis is within ~25.8
    degrees of x), skipping one that lies within ``0.01 max(radius, half_height)`` of slot 0.
    Otherwise (rolling) the far end of the lowest side line and the near-cap rim point 90 degrees
    from the deepest one follow. Each distance is the point's height above the plane and each
    position the point moved half that distance toward the plane (the reference engine 1.8's rule).
    """
    n = plane_normal
    a = cylinder_axis
    R = cylinder_radius
    hh = cylinder_half_height
    dist = vec4f(MAXVAL, MAXVAL, MAXVAL, MAXVAL)
    pos = mat43()
    an = wp.dot(a, n)
    up = a  # from the cap nearer the plane toward the other one
    if an < 0.0:
        up = -a
    near = cylinder_pos - hh * up
    far = cylinder_pos + hh * up
    ref = wp.vec3(1.0, 0.0, 0.0)
    if wp.abs(a[0]) > 0.9:
        ref = wp.vec3(0.0, 1.0, 0.0)
    e0 = wp.normalize(ref - wp.dot(ref, up) * up)
    u = -n + wp.dot(n, up) * up  # -n in the cap plane: toward the deepest rim point
    ul = wp.length(u)
    if ul > 1.0e-5:
        u = u / ul
    else:
        u = e0
    deep = near + R * u
    d = wp.dot(deep - plane_pos, n)
    dist[0] = d
    pos[0] = deep - 0.5 * d * n
    cnt = int(1)
    tol = 0.01 * wp.max(R, hh)
    if wp.abs(an) >= 0.9238795325112867:  # cos(22.5 deg): stands on its cap
        w = wp.cross(e0, up)
        for k in range(3):
            ang = float(k) * 2.0943951023931953
            p = near + R * (wp.cos(ang) * e0 + wp.sin(ang) * w)
            if wp.length(p - deep) >= tol:
                d = wp.dot(p - plane_pos, n)
                dist[cnt] = d
                pos[cnt] = p - 0.5 * d * n
                cnt += 1
    else:
        for k in range(2):
            p = far + R * u
            if k == 1:
                p = near + R * wp.cross(u, up)
            if wp.length(p - deep) >= tol:
                d = wp.dot(p - plane_pos, n)
                dist[cnt] = d
                pos[cnt] = p - 0.5 * d * n
                cnt += 1
    return dist, pos, n


@wp.func
def collide_plane_ellipsoid(plane_normal: wp.vec3, plane_pos: wp.vec3, ellipsoid_pos: wp.vec3,
                            ellipsoid_rot: wp.mat33, ellipsoid_size: wp.vec3):  # fmt: skip
    """Plane against an ellipsoid (semi-axes ``ellipsoid_size``): (signed distance, position, plane normal)."""
    n = plane_normal
    dl = wp.transpose(ellipsoid_rot) * (-n)
    s = ellipsoid_size
    q = wp.vec3(s[0] * s[0] * dl[0], s[1] * s[1] * dl[1], s[2] * s[2] * dl[2])
    den = wp.sqrt(wp.dot(q, dl))
    sp = ellipsoid_pos + ellipsoid_rot * (q / wp.max(den, 1.0e-20))
    d = wp.dot(sp - plane_pos, n)
    pos = sp - 0.5 * d * n
    return d, pos, n


# --------------------------------------------------------------------------- public single-pair queries
# The reference engine's signatures and return conventions: positions, ``wp.mat33`` rotations whose
# columns are the shape's local axes (world = rot * local), box half extents, capsule/cylinder unit
# axes with half lengths. ``dist`` is the signed surface distance (negative when overlapping), the
# normal points from the first shape toward the second and ``pos`` is the midpoint of the two
# surface points. Multi-contact results pad unused slots with MAXVAL distances and zero rows.
# (collide_sphere_cylinder, collide_plane_cylinder and collide_plane_ellipsoid are above.)
vec8f = wp.types.vector(length=8, dtype=wp.float32)


@wp.func
def collide_sphere_sphere(pos1: wp.vec3, radius1: float, pos2: wp.vec3, radius2: float):
    """Sphere against sphere: (distance, position, normal 1 -> 2; +x for coincident centers)."""
    diff = pos2 - pos1
    dl = wp.length(diff)
    n = wp.vec3(1.0, 0.0, 0.0)
    if dl > 0.0:
        n = diff / dl
    d = dl - (radius1 + radius2)
    return d, pos1 + (radius1 + 0.5 * d) * n, n


@wp.func
def collide_plane_sphere(plane_normal: wp.vec3, plane_pos: wp.vec3, sphere_pos: wp.vec3, sphere_radius: float):
    """Plane against sphere: (distance, position). The normal is ``plane_normal``."""
    d = wp.dot(sphere_pos - plane_pos, plane_normal) - sphere_radius
    return d, sphere_pos - (sphere_radius + 0.5 * d) * plane_normal


@wp.func
def collide_sphere_capsule(sphere_pos: wp.vec3, sphere_radius: float, capsule_pos: wp.vec3, capsule_axis: wp.vec3,
                           capsule_radius: float, capsule_half_length: float):  # fmt: skip
    """Sphere against capsule (segment ``capsule_pos +- capsule_half_length capsule_axis``):
    (distance, position, normal sphere -> capsule)."""
    seg = capsule_half_length * capsule_axis
    a = capsule_pos - seg
    b = capsule_pos + seg
    t = closest_point_segment(sphere_pos, a, b)
    return collide_sphere_sphere(sphere_pos, sphere_radius, a + t * (b - a), capsule_radius)


@wp.func
def point_box_r(c: wp.vec3, box_pos: wp.vec3, box_rot: wp.mat33, h: wp.vec3):
    """:func:`point_box` for a box given by its center and rotation matrix.

    Returns (closest surface point, unit normal from ``c`` toward the box, signed distance); for
    ``c`` inside, the normal points away from the nearest face (the face on the negative side
    when ``c`` is centered) and the distance is minus the depth.
    """
    pl = wp.transpose(box_rot) * (c - box_pos)
    cl = wp.vec3(wp.clamp(pl[0], -h[0], h[0]), wp.clamp(pl[1], -h[1], h[1]), wp.clamp(pl[2], -h[2], h[2]))
    diff = cl - pl
    dl = wp.length(diff)
    if dl > 1.0e-9:
        return box_pos + box_rot * cl, box_rot * (diff / dl), dl
    best = int(0)
    bd = h[0] - wp.abs(pl[0])
    for i in range(1, 3):
        di = h[i] - wp.abs(pl[i])
        if di < bd:
            bd = di
            best = i
    sp = pl
    o = wp.vec3(0.0)
    if pl[best] > 0.0:
        sp[best] = h[best]
        o[best] = 1.0
    else:
        sp[best] = -h[best]
        o[best] = -1.0
    return box_pos + box_rot * sp, -(box_rot * o), -bd


@wp.func
def collide_sphere_box(sphere_pos: wp.vec3, sphere_radius: float, box_pos: wp.vec3, box_rot: wp.mat33,
                       box_size: wp.vec3):  # fmt: skip
    """Sphere against box (half extents ``box_size``): (distance, position, normal sphere -> box)."""
    sp, n, s = point_box_r(sphere_pos, box_pos, box_rot, box_size)
    d = s - sphere_radius
    return d, sphere_pos + (sphere_radius + 0.5 * d) * n, n


@wp.func
def collide_capsule_capsule(cap1_pos: wp.vec3, cap1_axis: wp.vec3, cap1_radius: float, cap1_half_length: float,
                            cap2_pos: wp.vec3, cap2_axis: wp.vec3, cap2_radius: float,
                            cap2_half_length: float):  # fmt: skip
    """Capsule against capsule: (distances vec2, positions mat23, normal 1 -> 2).

    One contact at the closest points of the two segments; parallel axes give two, one per end
    of capsule 1 against its closest point of capsule 2 (the normal is the first one's). The
    second slot is MAXVAL when unused.
    """
    dist = vec2f(MAXVAL, MAXVAL)
    pos = mat23()
    A = cap1_half_length * cap1_axis
    B = cap2_half_length * cap2_axis
    a0 = cap1_pos - A
    a1 = cap1_pos + A
    b0 = cap2_pos - B
    b1 = cap2_pos + B
    c = wp.cross(cap1_axis, cap2_axis)
    if wp.dot(c, c) <= 1.0e-7 * wp.dot(cap1_axis, cap1_axis) * wp.dot(cap2_axis, cap2_axis):
        t = closest_point_segment(a1, b0, b1)
        d0, p0, n = collide_sphere_sphere(a1, cap1_radius, b0 + t * (b1 - b0), cap2_radius)
        t = closest_point_segment(a0, b0, b1)
        d1, p1, n1 = collide_sphere_sphere(a0, cap1_radius, b0 + t * (b1 - b0), cap2_radius)
        dist[0] = d0
        dist[1] = d1
        pos[0] = p0
        pos[1] = p1
        return dist, pos, n
    s, t = closest_segment_segment(a0, a1, b0, b1)
    d0, p0, n = collide_sphere_sphere(a0 + s * (a1 - a0), cap1_radius, b0 + t * (b1 - b0), cap2_radius)
    dist[0] = d0
    pos[0] = p0
    return dist, pos, n


@wp.func
def collide_capsule_box(capsule_pos: wp.vec3, capsule_axis: wp.vec3, capsule_radius: float,
                        capsule_half_length: float, box_pos: wp.vec3, box_rot: wp.mat33,
                        box_size: wp.vec3):  # fmt: skip
    """Capsule against box: (distances vec2, positions mat23, normals mat23, capsule -> box).

    Slot 0: the deepest point of the capsule segment against the box. Slot 1, only when that
    point is outside the box: the other end of the segment, moved back along the segment until
    it lies over the box face that slot 0 touches (the face most opposed to its normal),
    against that face's plane; absent when no part of the segment lies over the face.
    """
    dist = vec2f(MAXVAL, MAXVAL)
    pos = mat23()
    nrm = mat23()
    h = box_size
    seg = capsule_half_length * capsule_axis
    a = capsule_pos - seg
    b = capsule_pos + seg
    XB = wp.transform(box_pos, wp.quat_from_matrix(box_rot))
    t = capsule_box_param(a, b, XB, h)
    p = a + t * (b - a)
    sp, n0, s0 = point_box_r(p, box_pos, box_rot, h)
    d0 = s0 - capsule_radius
    dist[0] = d0
    pos[0] = p + (capsule_radius + 0.5 * d0) * n0
    nrm[0] = n0
    if s0 <= 0.0:  # the segment reaches into the box: one contact
        return dist, pos, nrm
    # the face slot 0 touches, and the far end of the segment clipped to that face's rectangle
    Rt = wp.transpose(box_rot)
    nl = Rt * n0
    k = int(0)
    for i in range(1, 3):
        if wp.abs(nl[i]) > wp.abs(nl[k]):
            k = i
    sgn = float(1.0)  # outward normal of the face: sgn * local axis k
    if nl[k] > 0.0:
        sgn = -1.0
    e = b
    if t >= 0.5:
        e = a
    el = Rt * (e - box_pos)
    pl = Rt * (p - box_pos)
    lo = float(0.0)  # q(u) = e + u (p - e): smallest u in [0, 1] over the face
    hi = float(1.0)
    for i in range(3):
        if i != k:
            di = pl[i] - el[i]
            if wp.abs(di) > 1.0e-12:
                u1 = (-h[i] - el[i]) / di
                u2 = (h[i] - el[i]) / di
                lo = wp.max(lo, wp.min(u1, u2))
                hi = wp.min(hi, wp.max(u1, u2))
            elif wp.abs(el[i]) > h[i]:
                lo = 2.0
    if lo <= hi and lo < 1.0 - 1.0e-6:
        ql = el + lo * (pl - el)
        d1 = sgn * ql[k] - h[k] - capsule_radius
        o = wp.vec3(0.0)
        o[k] = sgn
        n1 = -(box_rot * o)
        q = box_pos + box_rot * ql
        dist[1] = d1
        pos[1] = q + (capsule_radius + 0.5 * d1) * n1
        nrm[1] = n1
    return dist, pos, nrm


@wp.func
def collide_plane_capsule(plane_normal: wp.vec3, plane_pos: wp.vec3, capsule_pos: wp.vec3, capsule_axis: wp.vec3,
                          capsule_radius: float, capsule_half_length: float):  # fmt: skip
    """Plane against capsule: both end spheres (distances vec2, positions mat23, contact frame mat33).

    Slot 0 is the ``+capsule_axis`` end, slot 1 the other. The frame's rows are the plane normal,
    the capsule axis projected on the plane (world y, or z when the normal's y exceeds 0.5 in
    magnitude, when that projection is shorter than 0.5) and their cross product.
    """
    n = plane_normal
    seg = capsule_half_length * capsule_axis
    d0, p0 = collide_plane_sphere(n, plane_pos, capsule_pos + seg, capsule_radius)
    d1, p1 = collide_plane_sphere(n, plane_pos, capsule_pos - seg, capsule_radius)
    pos = mat23()
    pos[0] = p0
    pos[1] = p1
    b = capsule_axis - wp.dot(n, capsule_axis) * n
    bl = wp.length(b)
    if bl < 0.5:
        if n[1] > -0.5 and n[1] < 0.5:
            b = wp.vec3(0.0, 1.0, 0.0)
        else:
            b = wp.vec3(0.0, 0.0, 1.0)
    else:
        b = b / bl
    c = wp.cross(n, b)
    frame = wp.mat33(n[0], n[1], n[2], b[0], b[1], b[2], c[0], c[1], c[2])
    return vec2f(d0, d1), pos, frame


@wp.func
def collide_plane_box(plane_normal: wp.vec3, plane_pos: wp.vec3, box_pos: wp.vec3, box_rot: wp.mat33,
                      box_size: wp.vec3, margin: float = 0.0):  # fmt: skip
    """Plane against box: (distances vec4, positions mat43, plane normal).

    The 4 deepest corners among those within ``margin`` of the plane. Corners are visited in
    order (local x varying fastest, negative side first) filling the 4 slots; once full, a deeper
    corner replaces the shallowest kept one in its slot (the reference engine 1.8's slot order).
    """
    dist = vec4f(MAXVAL, MAXVAL, MAXVAL, MAXVAL)
    pos = mat43()
    cnt = int(0)
    for i in range(8):
        corner = box_size
        if (i & 1) == 0:
            corner[0] = -corner[0]
        if (i & 2) == 0:
            corner[1] = -corner[1]
        if (i & 4) == 0:
            corner[2] = -corner[2]
        v = box_pos + box_rot * corner
        d = wp.dot(v - plane_pos, plane_normal)
        if d <= margin:
            slot = cnt
            if cnt == 4:  # full: replace the shallowest kept corner when this one is deeper
                slot = int(0)
                for j in range(1, 4):
                    if dist[j] > dist[slot]:
                        slot = j
                if d >= dist[slot]:
                    slot = -1
            else:
                cnt += 1
            if slot >= 0:
                dist[slot] = d
                pos[slot] = v - 0.5 * d * plane_normal
    return dist, pos, plane_normal


@wp.func
def collide_box_box(box1_pos: wp.vec3, box1_rot: wp.mat33, box1_size: wp.vec3, box2_pos: wp.vec3,
                    box2_rot: wp.mat33, box2_size: wp.vec3, margin: float = 0.0):  # fmt: skip
    """Box against box: up to 8 contacts (distances vec8, positions mat83, normals mat83, 1 -> 2).

    Separating-axis test; a face axis gives the incident face clipped against the reference face
    (every clipped corner within ``margin``), an edge axis the closest points of the two edges.
    """
    dist = vec8f(MAXVAL, MAXVAL, MAXVAL, MAXVAL, MAXVAL, MAXVAL, MAXVAL, MAXVAL)
    pos = mat83()
    nrm = mat83()
    XA = wp.transform(box1_pos, wp.quat_from_matrix(box1_rot))
    XB = wp.transform(box2_pos, wp.quat_from_matrix(box2_rot))
    hA = box1_size
    hB = box2_size
    sep, code, n = box_box_sat(XA, hA, XB, hB)
    if sep > margin:
        return dist, pos, nrm
    if code < 6:
        XR, hR, XI, hI, nref, ax, ref_a = box_reference_face(code, n, XA, hA, XB, hB)
        poly, m, rk, rl = box_face_manifold(XR, hR, ax, nref, XI, hI)
        cR = wp.transform_get_translation(XR)
        cnt = int(0)
        for i in range(m):
            w = poly[i, 2]
            d = w - hR[ax]
            if d <= margin:
                dist[cnt] = d
                pos[cnt] = cR + poly[i, 0] * rk + poly[i, 1] * rl + 0.5 * (w + hR[ax]) * nref
                nrm[cnt] = n
                cnt += 1
        return dist, pos, nrm
    i = (code - 6) // 3
    j = (code - 6) % 3
    a0, a1 = box_support_edge(XA, hA, i, n)
    b0, b1 = box_support_edge(XB, hB, j, -n)
    s, t = closest_segment_segment(a0, a1, b0, b1)
    pa = a0 + s * (a1 - a0)
    pb = b0 + t * (b1 - b0)
    dist[0] = wp.dot(n, pb - pa)
    pos[0] = 0.5 * (pa + pb)
    nrm[0] = n
    return dist, pos, nrm

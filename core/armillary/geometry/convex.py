"""Generic convex-convex narrow phase: GJK distance, MPR penetration and contact manifolds.

:func:`convex_distance` returns the signed distance, the normal (A -> B) and the witness
surface points of two convex shapes:

* GJK runs on the shape *cores* (sphere center, capsule segment, the full shape for the
  others); separated cores give the exact signed distance ``|core gap| - rA - rB``.
* overlapping cores: MPR gives a first penetration normal, then :data:`PEN_REFINE` steps
  polish it into the minimum-translation direction: B is translated just out of contact
  along the current normal, GJK gives the closest features of the translated pair and
  their normal, whose support overlap ``h_A(n) + h_B(-n)`` is a depth candidate (every
  candidate is an upper bound of the depth; the smallest is kept).

:func:`convex_manifold` turns the single contact into a multi-point manifold when both
support features (:func:`.support.support_feature`) are edges or faces: the incident
feature is clipped against the reference face (Sutherland-Hodgman in the contact plane) or
the overlapping part of two parallel edges is taken, every clipped point is lifted back
onto both features along the normal; :func:`select4` keeps at most 4 of them, chosen by
geometry so that a face resting flat keeps the same points under micro-tilts, plus the exact
contact when it is deeper than all of them (see its docstring).
"""

from __future__ import annotations

import warp as wp

wp.set_module_options({"enable_backward": False, "max_unroll": 1})

from .gjk import gjk
from .mpr import mpr
from .primitives import MANIFOLD_TIE_SLOPE, any_perpendicular
from .support import CONVEX_MESH, ConvexGeo, core_radius, mat83f, shape_scale_len, support_feature, support_world

mat163 = wp.types.matrix(shape=(16, 3), dtype=wp.float32)
vec4i_f = wp.types.vector(length=4, dtype=wp.float32)
vec16f = wp.types.vector(length=16, dtype=wp.float32)

PEN_REFINE = wp.constant(8)
#: separation used when translating B out of contact during refinement (times shape size)
PEN_CLEARANCE = wp.constant(0.05)
#: cores closer than this (times shape size) are treated as overlapping
CORE_TOUCH = wp.constant(1.0e-6)
#: parallel-edge test for edge-edge manifolds (sine of the angle)
EDGE_PARALLEL_SIN = wp.constant(0.02)


mat33 = wp.types.matrix(shape=(3, 3), dtype=wp.float32)


@wp.func(inline=False)
def convex_distance(gA: ConvexGeo, gB: ConvexGeo, verts: wp.array(dtype=wp.vec3)):
    """Signed distance, unit normal A -> B, surface point on A, surface point on B."""
    zero = wp.vec3(0.0)
    rA = core_radius(gA)
    rB = core_radius(gB)
    scale = wp.max(shape_scale_len(gA), shape_scale_len(gB))
    dist, ca, cb, ov = gjk(gA, gB, verts, 1, zero)
    if ov == 0 and dist > CORE_TOUCH * scale:
        n = (cb - ca) / dist
        return dist - rA - rB, n, ca + rA * n, cb - rB * n
    hit, depth, n, pa, pb = mpr(gA, gB, verts)
    if hit == 0:
        dist2, pa2, pb2, ov2 = gjk(gA, gB, verts, 0, zero)
        if ov2 == 0 and dist2 > 1.0e-9 * scale:
            return dist2, (pb2 - pa2) / dist2, pa2, pb2
        n = wp.normalize(shape_center_diff(gA, gB, verts))
        pa = support_world(gA, verts, n, 0)
        pb = support_world(gB, verts, -n, 0)
        depth = wp.dot(n, pa - pb)
    # seeds: the MPR normal, the local axes of both shapes (face normals of boxes, cylinder /
    # cone axes) and the hull face normals of convex meshes; the refinement starts from the MPR
    # normal and from the seed with the smallest support overlap
    qA = wp.transform_get_rotation(gA.X)
    qB = wp.transform_get_rotation(gB.X)
    seed = n
    hbest = depth
    for k in range(12):
        e = wp.vec3(0.0)
        e[k % 3] = 1.0
        if (k // 3) % 2 == 1:
            e = -e
        dirk = wp.quat_rotate(qA, e)
        if k >= 6:
            dirk = wp.quat_rotate(qB, e)
        hk = wp.dot(dirk, support_world(gA, verts, dirk, 0) - support_world(gB, verts, -dirk, 0))
        if hk < hbest:
            hbest = hk
            seed = dirk
    # convex meshes: their hull face normals (separating-axis candidates of polyhedra); the
    # best face of each mesh seeds one more refinement
    fseed = mat33()
    fh = wp.vec3(1.0e30)
    for side in range(2):
        g = gA
        sgn = float(1.0)
        if side == 1:
            g = gB
            sgn = -1.0  # a face normal of B points from B toward A
        if g.t == CONVEX_MESH:
            q = wp.transform_get_rotation(g.X)
            f0 = g.vstart + g.vcount
            for k in range(g.fcount):
                nl = verts[f0 + k]
                # normals transform with the inverse scale (also for mirrored scales)
                dirk = sgn * wp.quat_rotate(q, wp.normalize(wp.vec3(nl[0] / g.s[0], nl[1] / g.s[1], nl[2] / g.s[2])))
                hk = wp.dot(dirk, support_world(gA, verts, dirk, 0) - support_world(gB, verts, -dirk, 0))
                if hk < fh[side]:
                    fh[side] = hk
                    fseed[side] = dirk
    for run in range(4):
        cur = n
        if run == 1:
            cur = seed
            if hbest >= depth:
                continue
        elif run >= 2:
            if fh[run - 2] >= 1.0e29:
                continue
            cur = fseed[run - 2]
        dr, nr, ar, br = refine_penetration(gA, gB, verts, cur, rA, rB, scale)
        if dr < depth:
            depth = dr
            n = nr
            pa = ar
            pb = br
    return -depth, n, pa, pb


@wp.func(inline=False)
def refine_penetration(gA: ConvexGeo, gB: ConvexGeo, verts: wp.array(dtype=wp.vec3), n0: wp.vec3, rA: float,
                       rB: float, scale: float):  # fmt: skip
    """Polish a penetration normal: (depth, normal, point on A, point on B) of the best step."""
    cur = n0
    depth = float(1.0e30)
    n = n0
    pa = wp.vec3(0.0)
    pb = wp.vec3(0.0)
    for _k in range(PEN_REFINE):
        sa = support_world(gA, verts, cur, 0)
        sb = support_world(gB, verts, -cur, 0)
        h = wp.dot(cur, sa - sb)
        if h < depth:
            depth = h
            n = cur
            pa = sa
            pb = sb
        T = cur * (h + PEN_CLEARANCE * scale)
        dist3, ca3, cb3, ov3 = gjk(gA, gB, verts, 1, T)
        if ov3 != 0 or dist3 <= 1.0e-9 * scale:
            break
        nn = (cb3 - ca3) / dist3
        a = ca3 + rA * nn
        b = cb3 - rB * nn - T
        dk = wp.dot(nn, a - b)
        if dk < depth:
            depth = dk
            n = nn
            pa = a
            pb = b
        if wp.dot(nn, cur) > 1.0 - 1.0e-12:
            break
        cur = nn
    return depth, n, pa, pb


@wp.func
def shape_center_diff(gA: ConvexGeo, gB: ConvexGeo, verts: wp.array(dtype=wp.vec3)):
    d = wp.transform_get_translation(gB.X) - wp.transform_get_translation(gA.X)
    if wp.length(d) < 1.0e-9:
        d = wp.vec3(0.0, 0.0, 1.0)
    return d


@wp.func
def cross2(a: wp.vec3, b: wp.vec3):
    return a[0] * b[1] - a[1] * b[0]


@wp.func
def to2d(p: wp.vec3, c0: wp.vec3, u: wp.vec3, v: wp.vec3):
    r = p - c0
    return wp.vec3(wp.dot(r, u), wp.dot(r, v), 0.0)


@wp.func
def lift(F: mat83f, m: int, x: wp.vec3, c0: wp.vec3, u: wp.vec3, v: wp.vec3, n: wp.vec3):
    """Point of feature F (m >= 2 points, world) on the line through 2D point x along n."""
    X = c0 + x[0] * u + x[1] * v
    if m == 2:
        p0 = to2d(F[0], c0, u, v)
        e = to2d(F[1], c0, u, v) - p0
        ee = wp.dot(e, e)
        t = float(0.0)
        if ee > 1.0e-20:
            t = wp.clamp(wp.dot(x - p0, e) / ee, 0.0, 1.0)
        return F[0] + t * (F[1] - F[0])
    mm = wp.vec3(0.0)
    for i in range(m):
        mm += wp.cross(F[i], F[(i + 1) % m])
    den = wp.dot(mm, n)
    if wp.abs(den) < 1.0e-12 * wp.length(mm):
        return X + n * wp.dot(n, F[0] - X)
    return X + n * (wp.dot(mm, F[0] - X) / den)


@wp.func
def clip_half(P: mat163, cnt: int, a: wp.vec3, b: wp.vec3, orient: float):
    """Keep the part of 2D polygon P left of edge a->b (times orient)."""
    out = mat163()
    m = int(0)
    if cnt == 0:
        return out, m
    e = b - a
    prev = P[cnt - 1]
    dp = orient * cross2(e, prev - a)
    for i in range(cnt):
        cur = P[i]
        dc = orient * cross2(e, cur - a)
        if dp >= 0.0:
            if m < 16:
                out[m] = prev
                m += 1
            if dc < 0.0 and m < 16:
                out[m] = prev + (dp / (dp - dc)) * (cur - prev)
                m += 1
        elif dc >= 0.0 and m < 16:
            out[m] = prev + (dp / (dp - dc)) * (cur - prev)
            m += 1
        prev = cur
        dp = dc
    return out, m


#: depth tolerance of :func:`select4`'s exact-contact check, per metre of manifold radius: when the exact
#: contact (entry 0) is deeper than every chosen manifold point by more than this x the radius, it takes a
#: free slot or replaces the nearest of them, so the deepest emitted contact is never shallower than the
#: exact one by more (1e-5 m on a 0.1 m face); micro-tilts of a resting face (below about 3e-4 rad) stay
#: under it
EXACT_DEPTH_SLOPE = wp.constant(1.0e-4)
#: radii (from the manifold points' centroid) within this fraction of the largest count as equal in
#: :func:`select4`'s choice of the first point; the lowest index among them wins
SELECT_RADIUS_TIE = wp.constant(1.0e-3)


@wp.func
def select4(P2: mat163, D: vec16f, cnt: int, limit: float, tiny: float):
    """Indices (float vec4, -1 unused) of <= 4 spread candidates among ``cnt`` (2D points ``P2`` [m] in
    the contact plane, signed distances ``D`` [m], used where ``D <= limit``); returns (indices, count).

    Entry 0 is the exact contact, entries 1.. the manifold's points (with 1 only: just entry 0). The
    choice is that of the box-box reduction (``primitives.reduce_manifold4``) over the manifold points:
    first, among the points within ``MANIFOLD_TIE_SLOPE`` x the manifold's radius of the deepest depth,
    the one farthest from their centroid (the lowest index among radii within ``SELECT_RADIUS_TIE``);
    then the point farthest from it and the extreme points on either side of that diagonal. A face
    resting flat thus keeps the same (widest) points from step to step, whichever vertex or rim point
    micro-tilts make the exact contact (issue 24, stacking). The exact contact then joins (a free slot)
    or replaces the nearest chosen point when it is deeper than all of them by more than
    ``EXACT_DEPTH_SLOPE`` x the radius: the deepest emitted contact keeps the exact depth within that.
    """
    sel = vec4i_f(0.0, -1.0, -1.0, -1.0)
    # the manifold points' centroid, radius and deepest depth
    cu = float(0.0)
    cv = float(0.0)
    kc = float(0.0)
    dm = float(1.0e30)
    for i in range(1, cnt):
        if D[i] <= limit:
            cu += P2[i][0]
            cv += P2[i][1]
            kc += 1.0
            dm = wp.min(dm, D[i])
    if kc == 0.0:
        return sel, 1
    cu = cu / kc
    cv = cv / kc
    r2max = float(0.0)
    for i in range(1, cnt):
        if D[i] <= limit:
            r2max = wp.max(r2max, (P2[i][0] - cu) * (P2[i][0] - cu) + (P2[i][1] - cv) * (P2[i][1] - cv))
    rad = wp.sqrt(r2max)
    dtop = wp.min(dm + MANIFOLD_TIE_SLOPE * rad, limit)
    r2top = float(-1.0)
    for i in range(1, cnt):
        if D[i] <= dtop:
            r2top = wp.max(r2top, (P2[i][0] - cu) * (P2[i][0] - cu) + (P2[i][1] - cv) * (P2[i][1] - cv))
    thr = r2top * (1.0 - SELECT_RADIUS_TIE) * (1.0 - SELECT_RADIUS_TIE)
    i0 = int(-1)
    for i in range(1, cnt):
        if i0 < 0 and D[i] <= dtop:
            if (P2[i][0] - cu) * (P2[i][0] - cu) + (P2[i][1] - cv) * (P2[i][1] - cv) >= thr:
                i0 = i
    if i0 < 0:
        i0 = int(1)  # unreachable (the deepest point passes both tests); keeps the index valid
        for i in range(1, cnt):
            if D[i] == dm:
                i0 = i
    sel[0] = float(i0)
    k = int(1)
    p0 = P2[i0]
    i1 = int(-1)
    best = tiny * tiny
    for i in range(1, cnt):
        if D[i] <= limit:
            dd = wp.length_sq(P2[i] - p0)
            if dd > best:
                best = dd
                i1 = i
    if i1 >= 0:
        sel[1] = float(i1)
        k = 2
        e = P2[i1] - p0
        amax = tiny * wp.sqrt(best)
        amin = -amax
        i2 = int(-1)
        i3 = int(-1)
        for i in range(1, cnt):
            if D[i] <= limit:
                a = cross2(e, P2[i] - p0)
                if a > amax:
                    amax = a
                    i2 = i
                if a < amin:
                    amin = a
                    i3 = i
        if i2 >= 0:
            sel[k] = float(i2)
            k += 1
        if i3 >= 0:
            sel[k] = float(i3)
            k += 1
    # the exact contact's depth: when it is deeper than every chosen point (beyond the tolerance), it
    # takes a free slot or replaces the chosen point nearest to it
    if D[0] <= limit:
        dsel = float(1.0e30)
        jn = int(0)
        dn = float(1.0e30)
        for j in range(k):
            i = int(sel[j])
            dsel = wp.min(dsel, D[i])
            dj = wp.length_sq(P2[i] - P2[0])
            if dj < dn:
                dn = dj
                jn = j
        if D[0] < dsel - EXACT_DEPTH_SLOPE * rad:
            if k < 4 and dn > tiny * tiny:
                sel[k] = 0.0
                k += 1
            else:
                sel[jn] = 0.0
    return sel, k


@wp.func(inline=False)
def convex_manifold(gA: ConvexGeo, gB: ConvexGeo, verts: wp.array(dtype=wp.vec3), n: wp.vec3, pa: wp.vec3,
                    pb: wp.vec3, limit: float):  # fmt: skip
    """Candidate contacts (points on A, points on B, count; entry 0 is the exact contact)."""
    PA = mat163()
    PB = mat163()
    PA[0] = pa
    PB[0] = pb
    cnt = int(1)
    FA, nA = support_feature(gA, verts, n)
    FB, nB = support_feature(gB, verts, -n)
    if nA < 2 or nB < 2:
        return PA, PB, cnt
    u = any_perpendicular(n)
    v = wp.cross(n, u)
    c0 = pa
    if nA == 2 and nB == 2:
        a0 = to2d(FA[0], c0, u, v)
        dA = to2d(FA[1], c0, u, v) - a0
        b0 = to2d(FB[0], c0, u, v)
        dB = to2d(FB[1], c0, u, v) - b0
        la = wp.length(dA)
        lb = wp.length(dB)
        if la < 1.0e-9 or lb < 1.0e-9 or wp.abs(cross2(dA, dB)) > EDGE_PARALLEL_SIN * la * lb:
            return PA, PB, cnt
        L2 = la * la
        s0 = wp.dot(b0 - a0, dA)
        s1 = wp.dot(b0 + dB - a0, dA)
        lo = wp.max(wp.min(s0, s1), 0.0)
        hi = wp.min(wp.max(s0, s1), L2)
        if hi <= lo or wp.abs(s1 - s0) < 1.0e-20:
            return PA, PB, cnt
        for k in range(2):
            s = lo
            if k == 1:
                s = hi
            PA[cnt] = FA[0] + (s / L2) * (FA[1] - FA[0])
            PB[cnt] = FB[0] + ((s - s0) / (s1 - s0)) * (FB[1] - FB[0])
            cnt += 1
        return drop_misaligned_exact(PA, PB, cnt, n)
    # reference: a polygon (>= 3 points); incident: the other feature (segment or polygon)
    ref_is_a = int(1)
    FR = FA
    nR = nA
    FI = FB
    nI = nB
    if nA < 3:
        ref_is_a = 0
        FR = FB
        nR = nB
        FI = FA
        nI = nA
    R2 = mat163()
    area = float(0.0)
    for i in range(nR):
        R2[i] = to2d(FR[i], c0, u, v)
    for i in range(nR):
        area += cross2(R2[i], R2[(i + 1) % nR])
    orient = float(1.0)
    if area < 0.0:
        orient = -1.0
    P = mat163()
    for i in range(nI):
        P[i] = to2d(FI[i], c0, u, v)
    m = nI
    for i in range(nR):
        P, m = clip_half(P, m, R2[i], R2[(i + 1) % nR], orient)
    for i in range(m):
        if cnt < 16:
            x = P[i]
            pr = lift(FR, nR, x, c0, u, v, n)
            pi = lift(FI, nI, x, c0, u, v, n)
            if ref_is_a != 0:
                PA[cnt] = pr
                PB[cnt] = pi
            else:
                PA[cnt] = pi
                PB[cnt] = pr
            cnt += 1
    return drop_misaligned_exact(PA, PB, cnt, n)


@wp.func
def drop_misaligned_exact(PA: mat163, PB: mat163, cnt: int, n: wp.vec3):
    """With a clipped face manifold present, replace the exact contact (entry 0) by the manifold's
    deepest point when its two witness points are not aligned along ``n`` and the manifold reaches
    the same depth: for face-face contacts
    the penetration witnesses can sit anywhere on the two faces (e.g. a face corner of one shape
    paired with an interior point of the other), which is no contact point of either shape."""
    if cnt < 2:
        return PA, PB, cnt
    w = PB[0] - PA[0]
    lat = w - wp.dot(w, n) * n
    if wp.length(lat) <= 1.0e-6 + 1.0e-4 * wp.length(w):
        return PA, PB, cnt
    best = int(1)
    for i in range(2, cnt):
        if wp.dot(n, PB[i] - PA[i]) < wp.dot(n, PB[best] - PA[best]):
            best = i
    if wp.dot(n, PB[best] - PA[best]) > wp.dot(n, w) + 1.0e-6 + 1.0e-4 * wp.length(w):
        return PA, PB, cnt  # the exact contact is deeper than every manifold point: keep it
    PA[0] = PA[best]
    PB[0] = PB[best]
    # the copied entry stays in the list: entries 1.. remain the whole clipped polygon in its order, so
    # :func:`select4` sees the same manifold whichever point is deepest (it never emits both copies)
    return PA, PB, cnt

"""Narrow phase: analytic primitive pairs, GJK/MPR convex pairs, triangle meshes, heightfields,
and soft particle-shape contacts.

One kernel walks the candidate pairs (grid-stride, so the launch size does not depend on
the device-side pair count), orders each pair by (geometry type, shape index) and routes it:

* PLANE / SPHERE / CAPSULE / BOX among themselves: the analytic routines of :mod:`.primitives`;
* other convex pairs (ELLIPSOID, CYLINDER incl. barrel, CONE, CONVEX_MESH with any convex
  type): GJK distance / MPR penetration and a clipped multi-point manifold (:mod:`.convex`),
  at most :data:`CONVEX_MANIFOLD_MAX` contacts; PLANE against them: support feature along the
  plane normal;
* MESH against convex shapes: BVH query (``wp.mesh_query_aabb``) and the convex route per
  overlapping triangle, with back-face culling (CCW winding) and internal-edge handling
  (:mod:`.mesh_collision`); PLANE-MESH: one contact per mesh vertex in range;
* HFIELD against convex shapes: the two CCW triangles of every grid cell under the shape's box;
* MESH-MESH and HFIELD-MESH pairs (:func:`mm_routed`) are skipped here: :mod:`.mesh_mesh` handles
  them in its own kernels; PLANE-HFIELD and HFIELD-HFIELD pairs are static and skipped.

Contacts are appended through :func:`emit`, which applies the margin/gap admission test
``d <= g`` (``d`` measured between margin-shifted surfaces, ``g = gap_a + gap_b``, or the
speculative ``max(g, min(v dt, e_max))``). For MESH / HFIELD pairs with reduction enabled
(``ContactOut.red_*`` slots present) admitted contacts go to the pair's slot block instead and
:func:`reduce_end` writes the reduced set (deepest + extremal along 6 in-plane directions).

Soft contacts (:func:`soft_contact_kernel`): analytic for PLANE / SPHERE / CAPSULE / BOX, the
particle center as a point through GJK / MPR for the other convex types, and the closest
triangle (BVH / grid query, :func:`.mesh_collision.soft_mesh_closest`) for MESH / HFIELD.
"""

from __future__ import annotations

import warp as wp

wp.set_module_options({"enable_backward": False, "max_unroll": 1})

from ..sim.contacts import OVERFLOW_PAIRS, OVERFLOW_RIGID, OVERFLOW_SOFT
from ..sim.enums import GeoType, ShapeFlags
from .primitives import (
    MAXVAL,
    box_box_distance,
    box_reference_face,
    box_box_sat,
    box_face_manifold,
    box_support_edge,
    box_vertex,
    capsule_box_param,
    capsule_ends,
    closest_point_segment,
    closest_segment_segment,
    mat83,
    point_box,
    reduce_manifold4,
    safe_normalize,
    any_perpendicular,
    vec4f,
)
from .convex import convex_distance, convex_manifold, mat163, select4, to2d, vec16f
from .mesh_collision import (GeoBuffers, build_geo_buffers, hf_point, local_aabb, soft_hfield_closest,
                             soft_mesh_closest, tri_geo, triangle_convex_distance, world_aabb)
from .support import ConvexGeo, core_radius, shape_center, support_feature, support_world

PLANE = wp.constant(int(GeoType.PLANE))
SPHERE = wp.constant(int(GeoType.SPHERE))
CAPSULE = wp.constant(int(GeoType.CAPSULE))
BOX = wp.constant(int(GeoType.BOX))
ELLIPSOID = wp.constant(int(GeoType.ELLIPSOID))
CYLINDER = wp.constant(int(GeoType.CYLINDER))
CONE = wp.constant(int(GeoType.CONE))
CONVEX_MESH = wp.constant(int(GeoType.CONVEX_MESH))
MESH = wp.constant(int(GeoType.MESH))
HFIELD = wp.constant(int(GeoType.HFIELD))
COLLIDE_PARTICLES = wp.constant(int(ShapeFlags.COLLIDE_PARTICLES))

#: geometry types handled by the narrow phase (every pair among them except plane-plane)
SUPPORTED_TYPES = (int(GeoType.PLANE), int(GeoType.SPHERE), int(GeoType.CAPSULE), int(GeoType.BOX))
#: shape types that generate soft (particle) contacts
SOFT_CONTACT_TYPES = SUPPORTED_TYPES + (int(GeoType.ELLIPSOID), int(GeoType.CYLINDER), int(GeoType.CONE),
                                        int(GeoType.CONVEX_MESH), int(GeoType.MESH), int(GeoType.HFIELD))
#: per-pair contact upper bounds of the reference table for the supported pairs
PAIR_MAX_CONTACTS = {
    (int(GeoType.PLANE), int(GeoType.SPHERE)): 1,
    (int(GeoType.PLANE), int(GeoType.CAPSULE)): 2,
    (int(GeoType.PLANE), int(GeoType.BOX)): 4,
    (int(GeoType.SPHERE), int(GeoType.SPHERE)): 1,
    (int(GeoType.SPHERE), int(GeoType.CAPSULE)): 1,
    (int(GeoType.SPHERE), int(GeoType.BOX)): 1,
    (int(GeoType.CAPSULE), int(GeoType.CAPSULE)): 2,
    (int(GeoType.CAPSULE), int(GeoType.BOX)): 5,
    (int(GeoType.BOX), int(GeoType.BOX)): 5,
}
#: convex types handled by GJK/MPR (with PLANE as a half-space)
CONVEX_TYPES = (int(GeoType.SPHERE), int(GeoType.CAPSULE), int(GeoType.ELLIPSOID), int(GeoType.CYLINDER),
                int(GeoType.BOX), int(GeoType.CONE), int(GeoType.CONVEX_MESH))  # fmt: skip


def _table_bound(x: int, y: int) -> int:
    lo, hi = min(x, y), max(x, y)
    if lo == int(GeoType.SPHERE) or lo == int(GeoType.ELLIPSOID) or hi == int(GeoType.ELLIPSOID):
        return 1
    if lo == int(GeoType.PLANE):
        return {int(GeoType.CYLINDER): 4, int(GeoType.BOX): 4, int(GeoType.CAPSULE): 2}.get(hi, 5)
    if lo == int(GeoType.CAPSULE) and hi == int(GeoType.CAPSULE):
        return 2
    return 5


for _x in (int(GeoType.PLANE),) + CONVEX_TYPES:
    for _y in CONVEX_TYPES:
        if _x <= _y and (_x, _y) not in PAIR_MAX_CONTACTS:
            PAIR_MAX_CONTACTS[(_x, _y)] = _table_bound(_x, _y)

#: triangle-mesh and heightfield pairs (per-triangle convex route, unreduced): sizing estimate per pair
MESH_PAIR_ESTIMATE = 40
for _y in CONVEX_TYPES:
    PAIR_MAX_CONTACTS[tuple(sorted((int(GeoType.MESH), _y)))] = MESH_PAIR_ESTIMATE
    PAIR_MAX_CONTACTS[(int(GeoType.HFIELD), _y)] = MESH_PAIR_ESTIMATE
PAIR_MAX_CONTACTS[(int(GeoType.PLANE), int(GeoType.MESH))] = MESH_PAIR_ESTIMATE

#: contacts emitted at most per generic convex pair (exact contact + 3 manifold points)
CONVEX_MANIFOLD_MAX = 4

#: bits of the per-pair sub-key (feature id) in the deterministic sort key
SUB_KEY_BITS = 24
SUB_KEY_BITS_C = wp.constant(SUB_KEY_BITS)
MAX_SUB_KEY = wp.constant((1 << SUB_KEY_BITS) - 1)
#: candidate slots per reduced mesh / heightfield pair (compacted when full)
REDUCE_SLOTS = 16
REDUCE_SLOTS_C = wp.constant(REDUCE_SLOTS)
#: in-plane directions (60 degrees apart) along which extremal contacts are kept
REDUCE_DIRS = wp.constant(6)
#: contacts kept at most per reduced pair: the deepest + one extremal point per direction
REDUCE_KEEP = 1 + 6
REDUCE_KEEP_C = wp.constant(REDUCE_KEEP)
#: two reduced contacts of one pair closer than this (squared, m^2) on both shapes are one contact
REDUCE_MERGE_SQ = wp.constant(1.0e-12)


def convex_mesh_buffers(model):
    """Geometry buffers of the model's convex meshes, triangle meshes and heightfields (a 1-tuple
    holding a :class:`.mesh_collision.GeoBuffers`), built once per model."""
    return build_geo_buffers(model)


@wp.struct
class ContactOut:
    count: wp.array(dtype=int)
    shape0: wp.array(dtype=int)
    shape1: wp.array(dtype=int)
    point0: wp.array(dtype=wp.vec3)
    point1: wp.array(dtype=wp.vec3)
    offset0: wp.array(dtype=wp.vec3)
    offset1: wp.array(dtype=wp.vec3)
    normal: wp.array(dtype=wp.vec3)
    margin0: wp.array(dtype=float)
    margin1: wp.array(dtype=float)
    point_id: wp.array(dtype=int)
    sort_key: wp.array(dtype=wp.int64)
    sort_value: wp.array(dtype=int)
    capacity: int
    key_shift: int
    # contact reduction slots (mesh / heightfield pairs); red_fill.shape[0] == 0: no reduction
    red_pa: wp.array(dtype=wp.vec3)
    red_pb: wp.array(dtype=wp.vec3)
    red_n: wp.array(dtype=wp.vec3)
    red_r: wp.array(dtype=wp.vec3)  # (effective radius a, effective radius b, distance)
    red_sub: wp.array(dtype=int)
    red_fill: wp.array(dtype=int)
    red_blocks: wp.array(dtype=int)
    # per shape, 1: a primitive routed against meshes through its SDF (:mod:`.mesh_mesh`); empty: none
    route: wp.array(dtype=int)
    # overflow counters: [0:4] dropped, [4:8] needed (``Contacts.contact_counters`` /
    # ``contact_capacity_needed``, views of one array); empty: not counted
    overflow: wp.array(dtype=int)


@wp.struct
class PairCtx:
    a: int
    b: int
    XbA: wp.transform
    XbB: wp.transform
    mA: float
    mB: float
    gap: float
    spec: int
    dt: float
    emax: float
    vA: wp.vec3
    wA: wp.vec3
    comA: wp.vec3
    vB: wp.vec3
    wB: wp.vec3
    comB: wp.vec3
    red: int  # reduction block of this pair, -1: contacts are written directly


#: slots of the overflow counters (``Contacts.contact_counters``)
OVERFLOW_RIGID_C = wp.constant(OVERFLOW_RIGID)
OVERFLOW_SOFT_C = wp.constant(OVERFLOW_SOFT)
OVERFLOW_PAIRS_C = wp.constant(OVERFLOW_PAIRS)


@wp.func
def note_dropped(overflow: wp.array(dtype=int), slot: int, n: int, capacity: int):
    """Count ``n`` items dropped from a full buffer of ``capacity`` in ``overflow[slot]`` and raise
    ``overflow[4 + slot]`` (the needed capacity) to ``capacity`` + everything dropped so far
    (no-op for an empty array). Only runs on overflow, so it costs nothing otherwise."""
    if overflow.shape[0] > slot + 4:
        d = wp.atomic_add(overflow, slot, n) + n
        wp.atomic_max(overflow, slot + 4, capacity + d)


@wp.func
def write_contact(ctx: PairCtx, out: ContactOut, pa: wp.vec3, pb: wp.vec3, n: wp.vec3, ra: float, rb: float,
                  sub: int):  # fmt: skip
    """Append one (admitted) contact to ``out``."""
    idx = wp.atomic_add(out.count, 0, 1)
    if idx >= out.capacity:
        wp.atomic_sub(out.count, 0, 1)  # overflow: drop, keeping count <= capacity, and count it
        note_dropped(out.overflow, OVERFLOW_RIGID_C, 1, out.capacity)
        return
    qa = wp.transform_get_rotation(ctx.XbA)
    qb = wp.transform_get_rotation(ctx.XbB)
    m0 = ra + ctx.mA
    m1 = rb + ctx.mB
    out.shape0[idx] = ctx.a
    out.shape1[idx] = ctx.b
    out.point0[idx] = wp.transform_point(wp.transform_inverse(ctx.XbA), pa)
    out.point1[idx] = wp.transform_point(wp.transform_inverse(ctx.XbB), pb)
    out.offset0[idx] = wp.quat_rotate_inv(qa, n) * m0
    out.offset1[idx] = -wp.quat_rotate_inv(qb, n) * m1
    out.normal[idx] = n
    out.margin0[idx] = m0
    out.margin1[idx] = m1
    out.point_id[idx] = sub
    if out.sort_key.shape[0] > 0:
        sk = wp.min(wp.max(sub, 0), MAX_SUB_KEY)
        sb = wp.int64(SUB_KEY_BITS_C)
        key = (wp.int64(ctx.a) << (wp.int64(out.key_shift) + sb)) | (wp.int64(ctx.b) << sb) | wp.int64(sk)
        out.sort_key[idx] = key
        out.sort_value[idx] = idx


@wp.func
def reduce_compact(out: ContactOut, blk: int):
    """Reduce the candidates of reduction block ``blk`` in place to at most REDUCE_KEEP: the
    deepest one plus the one extremal along each of REDUCE_DIRS directions (60 degrees apart) in
    the plane normal to the deepest contact's normal; ties go to the lower sub-key, so the
    result does not depend on the candidate order. Returns the new candidate count."""
    base = blk * REDUCE_SLOTS_C
    m = out.red_fill[blk]
    best = int(0)
    for i in range(1, m):
        di = out.red_r[base + i][2]
        db = out.red_r[base + best][2]
        if di < db or (di == db and out.red_sub[base + i] < out.red_sub[base + best]):
            best = i
    mask = int(1) << best
    n0 = out.red_n[base + best]
    u = any_perpendicular(n0)
    v = wp.cross(n0, u)
    for k in range(REDUCE_DIRS):
        ang = float(k) * (2.0 * wp.pi / float(REDUCE_DIRS))
        dirn = wp.cos(ang) * u + wp.sin(ang) * v
        bi = int(0)
        bs = wp.dot(out.red_pa[base], dirn)
        for i in range(1, m):
            si = wp.dot(out.red_pa[base + i], dirn)
            if si > bs or (si == bs and out.red_sub[base + i] < out.red_sub[base + bi]):
                bs = si
                bi = i
        mask = mask | (int(1) << bi)
    w = int(0)
    for i in range(m):
        if (mask & (int(1) << i)) != 0:
            if i != w:
                out.red_pa[base + w] = out.red_pa[base + i]
                out.red_pb[base + w] = out.red_pb[base + i]
                out.red_n[base + w] = out.red_n[base + i]
                out.red_r[base + w] = out.red_r[base + i]
                out.red_sub[base + w] = out.red_sub[base + i]
            w += 1
    out.red_fill[blk] = w
    return w


@wp.func
def reduce_begin(ctx: PairCtx, out: ContactOut):
    """Claim a reduction block for the current (mesh / heightfield) pair, if reduction is on."""
    ctx.red = -1
    if out.red_fill.shape[0] > 0:
        blk = wp.atomic_add(out.red_blocks, 0, 1)
        if blk < out.red_fill.shape[0]:
            out.red_fill[blk] = 0
            ctx.red = blk
    return ctx


@wp.func
def reduce_end(ctx: PairCtx, out: ContactOut):
    """Write the reduced contacts of the current pair."""
    if ctx.red >= 0:
        blk = ctx.red
        m = out.red_fill[blk]
        if m > 1:
            m = reduce_compact(out, blk)  # also merges duplicates (shared vertices / edges)
        base = blk * REDUCE_SLOTS_C
        for i in range(m):
            # the same contact found through two triangles sharing a vertex or an edge (tiny
            # round-off apart) is written once: a duplicate would double that point's weight
            dup = int(0)
            for j in range(i):
                if wp.length_sq(out.red_pa[base + i] - out.red_pa[base + j]) < REDUCE_MERGE_SQ and wp.length_sq(
                        out.red_pb[base + i] - out.red_pb[base + j]) < REDUCE_MERGE_SQ:  # fmt: skip
                    dup = 1
            if dup == 0:
                r = out.red_r[base + i]
                write_contact(ctx, out, out.red_pa[base + i], out.red_pb[base + i], out.red_n[base + i], r[0], r[1],
                              out.red_sub[base + i])


@wp.func
def admit(ctx: PairCtx, pa: wp.vec3, pb: wp.vec3, n: wp.vec3, ra: float, rb: float):
    """Signed distance between the margin-shifted surfaces of a candidate contact and whether it
    is admitted (``d <= gap_a + gap_b``, or the speculative threshold)."""
    d = wp.dot(n, pb - pa) - ra - rb - ctx.mA - ctx.mB
    thr = ctx.gap
    if ctx.spec != 0:
        sa = pa + ra * n
        sb = pb - rb * n
        va = ctx.vA + wp.cross(ctx.wA, sa - ctx.comA)
        vb = ctx.vB + wp.cross(ctx.wB, sb - ctx.comB)
        v = wp.dot(va - vb, n)
        thr = wp.max(thr, wp.min(v * ctx.dt, ctx.emax))
    return d, d <= thr


@wp.func
def mm_routed(ta: int, tb: int, a: int, b: int, prim: wp.array(dtype=int)):
    """Whether the (type-ordered) pair goes through :mod:`.mesh_mesh` instead of this kernel:
    MESH-MESH, HFIELD-MESH, and a MESH against a primitive flagged in ``prim`` (it carries an SDF)."""
    if tb == MESH and (ta == MESH or ta == HFIELD):
        return True
    if prim.shape[0] > 0:
        if tb == MESH and prim[a] != 0:
            return True
        if ta == MESH and prim[b] != 0:
            return True
    return False


@wp.func
def emit(ctx: PairCtx, out: ContactOut, pa: wp.vec3, pb: wp.vec3, n: wp.vec3, ra: float, rb: float, sub: int):
    """Append one contact (world core points, normal 0 -> 1, effective radii) if admitted
    (into the pair's reduction block when it has one)."""
    d, ok = admit(ctx, pa, pb, n, ra, rb)
    if not ok:
        return
    if ctx.red >= 0:
        blk = ctx.red
        k = out.red_fill[blk]
        if k >= REDUCE_SLOTS_C:
            k = reduce_compact(out, blk)
        j = blk * REDUCE_SLOTS_C + k
        out.red_pa[j] = pa
        out.red_pb[j] = pb
        out.red_n[j] = n
        out.red_r[j] = wp.vec3(ra, rb, d)
        out.red_sub[j] = sub
        out.red_fill[blk] = k + 1
        return
    write_contact(ctx, out, pa, pb, n, ra, rb, sub)


@wp.func
def in_plane_bounds(X: wp.transform, scale: wp.vec3, p: wp.vec3):
    if scale[0] > 0.0 and scale[1] > 0.0:
        lp = wp.transform_point(wp.transform_inverse(X), p)
        return wp.abs(lp[0]) <= 0.5 * scale[0] and wp.abs(lp[1]) <= 0.5 * scale[1]
    return True


@wp.func
def plane_point(X: wp.transform, scale: wp.vec3, x: wp.vec3, r: float, ctx: PairCtx, out: ContactOut, sub: int):
    pn = wp.quat_rotate(wp.transform_get_rotation(X), wp.vec3(0.0, 0.0, 1.0))
    pp = wp.transform_get_translation(X)
    pa = x - pn * wp.dot(x - pp, pn)
    if in_plane_bounds(X, scale, pa):
        emit(ctx, out, pa, x, pn, 0.0, r, sub)


@wp.func
def manifold_emit(ctx: PairCtx, out: ContactOut, XR: wp.transform, hR: wp.vec3, ax: int, nref: wp.vec3,
                  XI: wp.transform, hI: wp.vec3, ref_is_a: int, limit: float, code: int):  # fmt: skip
    poly, m, rk, rl = box_face_manifold(XR, hR, ax, nref, XI, hI)
    manifold_emit_poly(ctx, out, poly, m, rk, rl, XR, hR, ax, nref, XI, hI, ref_is_a, limit, code)


@wp.func
def manifold_emit_poly(ctx: PairCtx, out: ContactOut, poly: mat83, m: int, rk: wp.vec3, rl: wp.vec3,
                       XR: wp.transform, hR: wp.vec3, ax: int, nref: wp.vec3, XI: wp.transform, hI: wp.vec3,
                       ref_is_a: int, limit: float, code: int):  # fmt: skip
    """Emit the reduced face manifold from the clipped incident face ``poly`` (see
    :func:`.primitives.box_face_manifold`)."""
    sel, cnt = reduce_manifold4(poly, m, hR[ax], limit)
    cR = wp.transform_get_translation(XR)
    if cnt == 0:
        # degenerate clipping: deepest incident vertex
        best = float(MAXVAL)
        v = wp.vec3(0.0)
        for i in range(8):
            w = box_vertex(XI, hI, i)
            dv = wp.dot(w - cR, nref)
            if dv < best:
                best = dv
                v = w
        pr = v - nref * (best - hR[ax])
        if ref_is_a != 0:
            emit(ctx, out, pr, v, nref, 0.0, 0.0, code * 8)
        else:
            emit(ctx, out, v, pr, -nref, 0.0, 0.0, code * 8)
        return
    for s in range(cnt):
        i = int(sel[s])
        base = cR + poly[i, 0] * rk + poly[i, 1] * rl
        p_inc = base + poly[i, 2] * nref
        p_ref = base + hR[ax] * nref
        if ref_is_a != 0:
            emit(ctx, out, p_ref, p_inc, nref, 0.0, 0.0, code * 8 + i)
        else:
            emit(ctx, out, p_inc, p_ref, -nref, 0.0, 0.0, code * 8 + i)


@wp.func
def collide_box_box_emit(ctx: PairCtx, out: ContactOut, XA: wp.transform, hA: wp.vec3, XB: wp.transform,
                         hB: wp.vec3, limit: float):  # fmt: skip
    sep, code, n = box_box_sat(XA, hA, XB, hB)
    if sep > limit:
        return
    if sep > 0.0:
        scale = wp.max(wp.max(hA[0], wp.max(hA[1], hA[2])), wp.max(hB[0], wp.max(hB[1], hB[2])))
        if code < 6:
            XR, hR, XI, hI, nref, ax, ref_a = box_reference_face(code, n, XA, hA, XB, hB)
            poly, m, rk, rl = box_face_manifold(XR, hR, ax, nref, XI, hI)
            dmin = float(MAXVAL)
            for i in range(m):
                dmin = wp.min(dmin, poly[i, 2] - hR[ax])
            # the SAT separation is a lower bound of the distance: a clipped point attaining it
            # proves the face manifold exact without the feature enumeration
            if m > 0 and dmin <= sep + 1.0e-5 * scale:
                manifold_emit_poly(ctx, out, poly, m, rk, rl, XR, hR, ax, nref, XI, hI, ref_a, limit, code)
                return
            dist, pa, pb = box_box_distance(XA, hA, XB, hB)
            if dist > limit:
                return
            if m > 0 and dmin <= dist + 1.0e-4 * scale:
                manifold_emit_poly(ctx, out, poly, m, rk, rl, XR, hR, ax, nref, XI, hI, ref_a, limit, code)
                return
            emit(ctx, out, pa, pb, safe_normalize(pb - pa, n), 0.0, 0.0, 63)
            return
        dist, pa, pb = box_box_distance(XA, hA, XB, hB)
        if dist > limit:
            return
        emit(ctx, out, pa, pb, safe_normalize(pb - pa, n), 0.0, 0.0, 63)
        return
    if code < 6:
        if code < 3:
            manifold_emit(ctx, out, XA, hA, code, n, XB, hB, 1, limit, code)
        else:
            manifold_emit(ctx, out, XB, hB, code - 3, -n, XA, hA, 0, limit, code)
        return
    i = (code - 6) // 3
    j = (code - 6) % 3
    # support edges: A extreme along n, B extreme along -n
    wa0, wa1 = box_support_edge(XA, hA, i, n)
    wb0, wb1 = box_support_edge(XB, hB, j, -n)
    s, t = closest_segment_segment(wa0, wa1, wb0, wb1)
    emit(ctx, out, wa0 + s * (wa1 - wa0), wb0 + t * (wb1 - wb0), n, 0.0, 0.0, code * 8)


@wp.func
def make_geo(t: int, X: wp.transform, sc: wp.vec3, s: int, vstart: wp.array(dtype=int), vcount: wp.array(dtype=int),
             fcount: wp.array(dtype=int)):  # fmt: skip
    g = ConvexGeo()
    g.t = t
    g.X = X
    g.s = sc
    g.vstart = vstart[s]
    g.vcount = vcount[s]
    g.fcount = fcount[s]
    return g


@wp.func(inline=False)
def emit_selected(ctx: PairCtx, out: ContactOut, PA: mat163, PB: mat163, cnt: int, n: wp.vec3, limit: float,
                  plane_X: wp.transform, plane_scale: wp.vec3, check_plane: int, swap: int, sub_base: int, rA: float,
                  rB: float):  # fmt: skip
    """Reduce candidates (entry 0 = exact contact) to <= 4 spread points and emit them.

    Surface points of spheres / capsules (core radius ``rA`` / ``rB``) are stored at the core
    (center / axis) with the radius as effective radius, like the analytic routines."""
    u = any_perpendicular(n)
    v = wp.cross(n, u)
    P2 = mat163()
    D = vec16f()
    scale = float(0.0)
    for i in range(cnt):
        P2[i] = to2d(PA[i], PA[0], u, v)
        D[i] = wp.dot(n, PB[i] - PA[i])
        scale = wp.max(scale, wp.length(P2[i]))
    sel, k = select4(P2, D, cnt, limit, 1.0e-4 * scale + 1.0e-7)
    for j in range(k):
        i = int(sel[j])
        if D[i] <= limit:
            if check_plane == 0 or in_plane_bounds(plane_X, plane_scale, PA[i]):
                sub = sub_base + j
                ca = PA[i] - rA * n
                cb = PB[i] + rB * n
                if swap != 0:
                    emit(ctx, out, cb, ca, -n, rB, rA, sub)
                else:
                    emit(ctx, out, ca, cb, n, rA, rB, sub)


@wp.func(inline=False)
def collide_convex_emit(ctx: PairCtx, out: ContactOut, gA: ConvexGeo, gB: ConvexGeo,
                        verts: wp.array(dtype=wp.vec3), limit: float):  # fmt: skip
    d, n, pa, pb = convex_distance(gA, gB, verts)
    if d > limit:
        return
    PA, PB, cnt = convex_manifold(gA, gB, verts, n, pa, pb, limit)
    emit_selected(ctx, out, PA, PB, cnt, n, limit, wp.transform_identity(), wp.vec3(0.0), 0, 0, 0, core_radius(gA),
                  core_radius(gB))


@wp.func(inline=False)
def collide_plane_convex_emit(ctx: PairCtx, out: ContactOut, XP: wp.transform, sP: wp.vec3, gB: ConvexGeo,
                              verts: wp.array(dtype=wp.vec3), limit: float):  # fmt: skip
    pn = wp.quat_rotate(wp.transform_get_rotation(XP), wp.vec3(0.0, 0.0, 1.0))
    pp = wp.transform_get_translation(XP)
    sp = support_world(gB, verts, -pn, 0)
    d0 = wp.dot(sp - pp, pn)
    if d0 > limit:
        return
    PA = mat163()
    PB = mat163()
    PA[0] = sp - d0 * pn
    PB[0] = sp
    cnt = int(1)
    F, m = support_feature(gB, verts, -pn)
    if m >= 2:
        for i in range(m):
            di = wp.dot(F[i] - pp, pn)
            PA[cnt] = F[i] - di * pn
            PB[cnt] = F[i]
            cnt += 1
    emit_selected(ctx, out, PA, PB, cnt, pn, limit, XP, sP, 1, 0, 0, 0.0, core_radius(gB))


@wp.func
def tri_bary(p: wp.vec3, a: wp.vec3, b: wp.vec3, c: wp.vec3):
    e1 = b - a
    e2 = c - a
    r = p - a
    d11 = wp.dot(e1, e1)
    d12 = wp.dot(e1, e2)
    d22 = wp.dot(e2, e2)
    den = d11 * d22 - d12 * d12
    if den <= 0.0:
        return wp.vec3(-1.0)
    l1 = (d22 * wp.dot(r, e1) - d12 * wp.dot(r, e2)) / den
    l2 = (d11 * wp.dot(r, e2) - d12 * wp.dot(r, e1)) / den
    return wp.vec3(1.0 - l1 - l2, l1, l2)


@wp.func(inline=False)
def triangle_emit(ctx: PairCtx, out: ContactOut, gT: ConvexGeo, gO: ConvexGeo, verts: wp.array(dtype=wp.vec3),
                  limit: float, swap: int, sub_base: int, edge_flags: int):  # fmt: skip
    """One triangle (world normal from CCW winding) against a convex shape, with back-face culling.

    A contact whose normal points to the back side, or whose triangle witness lies on an
    internal (flat, ``edge_flags`` bit clear) edge with a normal off the face normal, is
    replaced by the face contact (normal = face normal) when the shape's deepest point
    projects into the triangle, and dropped otherwise.
    """
    w0 = wp.transform_point(gT.X, gT.p0)
    nt = wp.cross(wp.transform_vector(gT.X, gT.p1 - gT.p0), wp.transform_vector(gT.X, gT.p2 - gT.p0))
    if wp.dot(shape_center(gO, verts) - w0, nt) < 0.0:
        return  # back-face culling: the shape's center is behind the face
    d, n, pa, pb = triangle_convex_distance(gT, gO, verts, limit)
    if d > limit:
        return
    ntu = wp.normalize(nt)
    w1 = wp.transform_point(gT.X, gT.p1)
    w2 = wp.transform_point(gT.X, gT.p2)
    face = int(0)
    if wp.dot(n, ntu) < 0.0:
        face = 1
    elif wp.dot(n, ntu) < 1.0 - 1.0e-5 and edge_flags != 7:
        l = tri_bary(pa, w0, w1, w2)
        eps = 1.0e-4
        # edge e joins vertices e and e+1; it is opposite vertex e+2
        on0 = l[2] <= eps
        on1 = l[0] <= eps
        on2 = l[1] <= eps
        real = (on0 and (edge_flags & 1) != 0) or (on1 and (edge_flags & 2) != 0) or (
            on2 and (edge_flags & 4) != 0)
        if (on0 or on1 or on2) and not real:
            face = 1
    if face != 0:
        # the contact would cross the back side or an internal edge: use the face contact when
        # the shape's deepest point along -normal projects into this triangle (else a neighbour has it)
        sp = support_world(gO, verts, -ntu, 0)
        d = wp.dot(sp - w0, ntu)
        if d > limit:
            return
        pa = sp - d * ntu
        l = tri_bary(pa, w0, w1, w2)
        if l[0] < -1.0e-6 or l[1] < -1.0e-6 or l[2] < -1.0e-6:
            return
        n = ntu
        pb = sp
    PA, PB, cnt = convex_manifold(gT, gO, verts, n, pa, pb, limit)
    emit_selected(ctx, out, PA, PB, cnt, n, limit, wp.transform_identity(), wp.vec3(0.0), 0, swap, sub_base, 0.0,
                  core_radius(gO))


@wp.func
def collide_mesh_convex_emit(ctx: PairCtx, out: ContactOut, XM: wp.transform, sM: wp.vec3, shape: int,
                             gO: ConvexGeo, geo: GeoBuffers, limit: float, swap: int):  # fmt: skip
    mesh_id = geo.mesh_id[shape]
    lo, hi = world_aabb(gO, geo.verts, limit)
    llo, lhi = local_aabb(XM, sM, lo, hi)
    mesh = wp.mesh_get(mesh_id)
    q = wp.mesh_query_aabb(mesh_id, llo, lhi)
    f = int(0)
    while wp.mesh_query_aabb_next(q, f):
        p0 = wp.cw_mul(mesh.points[mesh.indices[3 * f]], sM)
        p1 = wp.cw_mul(mesh.points[mesh.indices[3 * f + 1]], sM)
        p2 = wp.cw_mul(mesh.points[mesh.indices[3 * f + 2]], sM)
        if sM[0] * sM[1] * sM[2] < 0.0:
            tmp = p1
            p1 = p2
            p2 = tmp
        fl = geo.tri_flags[geo.tri_start[shape] + f]
        if sM[0] * sM[1] * sM[2] < 0.0:
            # mirrored mesh: the swapped winding exchanges edges 0 (v0 v1) and 2 (v2 v0)
            fl = (fl & 2) | ((fl & 1) << 2) | ((fl & 4) >> 2)
        triangle_emit(ctx, out, tri_geo(XM, p0, p1, p2), gO, geo.verts, limit, swap, 4 * f, fl)


@wp.func
def hf_tri_normal(geo: GeoBuffers, shape: int, s: wp.vec3, i: int, j: int, k: int):
    """Unit normal of triangle k of cell (i, j); zero outside the grid."""
    dims = geo.hf_dims[shape]
    if i < 0 or j < 0 or i > int(dims[0]) - 2 or j > int(dims[1]) - 2:
        return wp.vec3(0.0)
    a = hf_point(geo, shape, s, i, j)
    c = hf_point(geo, shape, s, i + 1, j + 1)
    if k == 0:
        return wp.normalize(wp.cross(hf_point(geo, shape, s, i, j + 1) - a, c - a))
    return wp.normalize(wp.cross(c - a, hf_point(geo, shape, s, i + 1, j) - a))


@wp.func
def feature_bit(n: wp.vec3, m: wp.vec3, bit: int):
    if wp.dot(n, m) < 0.9998:
        return bit
    return 0


@wp.func
def hf_edge_flags(geo: GeoBuffers, shape: int, s: wp.vec3, i: int, j: int, k: int):
    """Feature-edge bits of cell triangle k (edge e joins its vertices e and e+1): an edge is
    internal when the triangle across it (same cell or neighbour cell) is coplanar."""
    n = hf_tri_normal(geo, shape, s, i, j, k)
    if k == 0:
        # (a, b, c): ab borders cell (i-1, j) tri 1, bc borders cell (i, j+1) tri 1, ca the diagonal
        return feature_bit(n, hf_tri_normal(geo, shape, s, i - 1, j, 1), 1) | feature_bit(
            n, hf_tri_normal(geo, shape, s, i, j + 1, 1), 2) | feature_bit(n, hf_tri_normal(geo, shape, s, i, j, 1), 4)
    # (a, c, d): ac the diagonal, cd borders cell (i+1, j) tri 0, da borders cell (i, j-1) tri 0
    return feature_bit(n, hf_tri_normal(geo, shape, s, i, j, 0), 1) | feature_bit(
        n, hf_tri_normal(geo, shape, s, i + 1, j, 0), 2) | feature_bit(n, hf_tri_normal(geo, shape, s, i, j - 1, 0), 4)


@wp.func
def collide_hfield_convex_emit(ctx: PairCtx, out: ContactOut, XH: wp.transform, sH: wp.vec3, shape: int,
                               gO: ConvexGeo, geo: GeoBuffers, limit: float):  # fmt: skip
    lo, hi = world_aabb(gO, geo.verts, limit)
    llo, lhi = local_aabb(XH, sH, lo, hi)
    dims = geo.hf_dims[shape]
    nrow = int(dims[0])
    ncol = int(dims[1])
    dx = 2.0 * dims[2] / float(ncol - 1)
    dy = 2.0 * dims[3] / float(nrow - 1)
    j0 = wp.max(int(wp.floor((llo[0] + dims[2]) / dx)), 0)
    j1 = wp.min(int(wp.floor((lhi[0] + dims[2]) / dx)), ncol - 2)
    i0 = wp.max(int(wp.floor((llo[1] + dims[3]) / dy)), 0)
    i1 = wp.min(int(wp.floor((lhi[1] + dims[3]) / dy)), nrow - 2)
    for i in range(i0, i1 + 1):
        for j in range(j0, j1 + 1):
            a = hf_point(geo, shape, sH, i, j)
            b = hf_point(geo, shape, sH, i, j + 1)
            c = hf_point(geo, shape, sH, i + 1, j + 1)
            d = hf_point(geo, shape, sH, i + 1, j)
            cell = (i * (ncol - 1) + j) * 8
            for k in range(2):
                fl = hf_edge_flags(geo, shape, sH, i, j, k)
                if k == 0:
                    triangle_emit(ctx, out, tri_geo(XH, a, b, c), gO, geo.verts, limit, 0, cell, fl)
                else:
                    triangle_emit(ctx, out, tri_geo(XH, a, c, d), gO, geo.verts, limit, 0, cell + 4, fl)


@wp.func
def collide_plane_mesh_emit(ctx: PairCtx, out: ContactOut, XP: wp.transform, sP: wp.vec3, XM: wp.transform,
                            sM: wp.vec3, mesh_id: wp.uint64, limit: float):  # fmt: skip
    """One contact per mesh vertex within the detection range of the plane."""
    pn = wp.quat_rotate(wp.transform_get_rotation(XP), wp.vec3(0.0, 0.0, 1.0))
    pp = wp.transform_get_translation(XP)
    mesh = wp.mesh_get(mesh_id)
    for k in range(mesh.points.shape[0]):
        v = wp.transform_point(XM, wp.cw_mul(mesh.points[k], sM))
        d = wp.dot(v - pp, pn)
        if d <= limit:
            pa = v - d * pn
            if in_plane_bounds(XP, sP, pa):
                emit(ctx, out, pa, v, pn, 0.0, 0.0, k)


@wp.func
def shape_body_xform(body: int, body_q: wp.array(dtype=wp.transform)):
    if body >= 0:
        return body_q[body]
    return wp.transform_identity()


@wp.func
def ordered_pair(p: wp.vec2i, shape_type: wp.array(dtype=int)):
    """The candidate pair ``p`` ordered by (geometry type, shape index): ``(a, b, type a, type b)``.
    Every route sees its pair in this canonical order (shape 0 = a, normal from a to b)."""
    a = p[0]
    b = p[1]
    ta = shape_type[a]
    tb = shape_type[b]
    if ta > tb or (ta == tb and a > b):
        return b, a, tb, ta
    return a, b, ta, tb


@wp.func
def pair_ctx(a: int, b: int, shape_body: wp.array(dtype=int), shape_margin: wp.array(dtype=float),
             shape_gap: wp.array(dtype=float), body_q: wp.array(dtype=wp.transform),
             body_qd: wp.array(dtype=wp.spatial_vector), body_com: wp.array(dtype=wp.vec3), spec: int, dt: float,
             emax: float):  # fmt: skip
    """The :class:`PairCtx` of the ordered shape pair (a, b) and its detection limit [m] (pair gap,
    or the speculative extension when larger, plus both margins)."""
    ctx = PairCtx()
    ctx.a = a
    ctx.b = b
    ba = shape_body[a]
    bb = shape_body[b]
    ctx.XbA = shape_body_xform(ba, body_q)
    ctx.XbB = shape_body_xform(bb, body_q)
    ctx.mA = shape_margin[a]
    ctx.mB = shape_margin[b]
    ctx.gap = shape_gap[a] + shape_gap[b]
    ctx.spec = spec
    ctx.dt = dt
    ctx.emax = emax
    ctx.vA = wp.vec3(0.0)
    ctx.wA = wp.vec3(0.0)
    ctx.comA = wp.vec3(0.0)
    ctx.vB = wp.vec3(0.0)
    ctx.wB = wp.vec3(0.0)
    ctx.comB = wp.vec3(0.0)
    ctx.red = -1
    ext = float(0.0)
    if spec != 0:
        ext = emax
        if ba >= 0:
            ctx.vA = wp.spatial_top(body_qd[ba])
            ctx.wA = wp.spatial_bottom(body_qd[ba])
            ctx.comA = wp.transform_point(ctx.XbA, body_com[ba])
        if bb >= 0:
            ctx.vB = wp.spatial_top(body_qd[bb])
            ctx.wB = wp.spatial_bottom(body_qd[bb])
            ctx.comB = wp.transform_point(ctx.XbB, body_com[bb])
    limit = wp.max(ctx.gap, ext) + ctx.mA + ctx.mB
    return ctx, limit


@wp.kernel
def narrow_phase_kernel(
    pairs: wp.array(dtype=wp.vec2i),
    pair_count: wp.array(dtype=int),
    shape_type: wp.array(dtype=int),
    shape_body: wp.array(dtype=int),
    shape_X: wp.array(dtype=wp.transform),
    shape_scale: wp.array(dtype=wp.vec3),
    shape_margin: wp.array(dtype=float),
    shape_gap: wp.array(dtype=float),
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    body_com: wp.array(dtype=wp.vec3),
    spec: int,
    dt: float,
    emax: float,
    out: ContactOut,
    stride: int,
    geo: GeoBuffers,
):
    tid = wp.tid()
    n_pairs = wp.min(pair_count[0], pairs.shape[0])
    if tid == 0 and pair_count[0] > pairs.shape[0]:  # the broad phase kept counting past its buffer
        note_dropped(out.overflow, OVERFLOW_PAIRS_C, pair_count[0] - pairs.shape[0], pairs.shape[0])
    i = tid
    while i < n_pairs:
        a, b, ta, tb = ordered_pair(pairs[i], shape_type)
        i += stride
        if mm_routed(ta, tb, a, b, out.route) or (ta == HFIELD and tb == HFIELD) or (ta == PLANE and tb == HFIELD):
            continue  # mesh-mesh routes (:mod:`.mesh_mesh`); static-static pairs never collide
        ctx, limit = pair_ctx(a, b, shape_body, shape_margin, shape_gap, body_q, body_qd, body_com, spec, dt, emax)
        XA = shape_X[a]
        XB = shape_X[b]
        sA = shape_scale[a]
        sB = shape_scale[b]
        cA = wp.transform_get_translation(XA)
        cB = wp.transform_get_translation(XB)
        basic = (ta == PLANE or ta == SPHERE or ta == CAPSULE or ta == BOX) and (
            tb == SPHERE or tb == CAPSULE or tb == BOX)
        if not basic:
            verts = geo.verts
            gB = make_geo(tb, XB, sB, b, geo.vstart, geo.vcount, geo.fcount)
            gA = make_geo(ta, XA, sA, a, geo.vstart, geo.vcount, geo.fcount)
            if tb == MESH or ta == MESH or ta == HFIELD:
                ctx = reduce_begin(ctx, out)
                if tb == MESH:
                    if ta == PLANE:
                        collide_plane_mesh_emit(ctx, out, XA, sA, XB, sB, geo.mesh_id[b], limit)
                    else:
                        collide_mesh_convex_emit(ctx, out, XB, sB, b, gA, geo, limit, 1)
                elif ta == MESH:
                    collide_mesh_convex_emit(ctx, out, XA, sA, a, gB, geo, limit, 0)
                else:
                    collide_hfield_convex_emit(ctx, out, XA, sA, a, gB, geo, limit)
                reduce_end(ctx, out)
            elif ta == PLANE:
                collide_plane_convex_emit(ctx, out, XA, sA, gB, verts, limit)
            else:
                collide_convex_emit(ctx, out, gA, gB, verts, limit)
        elif ta == PLANE:
            if tb == SPHERE:
                plane_point(XA, sA, cB, sB[0], ctx, out, 0)
            elif tb == CAPSULE:
                e0, e1 = capsule_ends(XB, sB[1])
                plane_point(XA, sA, e0, sB[0], ctx, out, 0)
                plane_point(XA, sA, e1, sB[0], ctx, out, 1)
            elif tb == BOX:
                pn = wp.quat_rotate(wp.transform_get_rotation(XA), wp.vec3(0.0, 0.0, 1.0))
                pp = wp.transform_get_translation(XA)
                dist = vec4f(MAXVAL, MAXVAL, MAXVAL, MAXVAL)
                idx = vec4f(-1.0, -1.0, -1.0, -1.0)
                for k in range(8):
                    v = box_vertex(XB, sB, k)
                    d = wp.dot(v - pp, pn)
                    if d <= limit and d < dist[3] and in_plane_bounds(XA, sA, v - d * pn):
                        j = int(3)
                        while j > 0 and dist[j - 1] > d:
                            dist[j] = dist[j - 1]
                            idx[j] = idx[j - 1]
                            j -= 1
                        dist[j] = d
                        idx[j] = float(k)
                for j in range(4):
                    if idx[j] >= 0.0:
                        k = int(idx[j])
                        v = box_vertex(XB, sB, k)
                        emit(ctx, out, v - dist[j] * pn, v, pn, 0.0, 0.0, k)
        elif ta == SPHERE:
            if tb == SPHERE:
                n = safe_normalize(cB - cA, wp.vec3(0.0, 0.0, 1.0))
                emit(ctx, out, cA, cB, n, sA[0], sB[0], 0)
            elif tb == CAPSULE:
                e0, e1 = capsule_ends(XB, sB[1])
                q = e0 + closest_point_segment(cA, e0, e1) * (e1 - e0)
                n = safe_normalize(q - cA, wp.vec3(0.0, 0.0, 1.0))
                emit(ctx, out, cA, q, n, sA[0], sB[0], 0)
            elif tb == BOX:
                sp, n, s = point_box(cA, XB, sB)
                emit(ctx, out, cA, sp, n, sA[0], 0.0, 0)
        elif ta == CAPSULE:
            a0, a1 = capsule_ends(XA, sA[1])
            if tb == CAPSULE:
                b0, b1 = capsule_ends(XB, sB[1])
                s, t = closest_segment_segment(a0, a1, b0, b1)
                pa = a0 + s * (a1 - a0)
                pb = b0 + t * (b1 - b0)
                da = a1 - a0
                db = b1 - b0
                la = wp.length(da)
                lb = wp.length(db)
                n = safe_normalize(pb - pa, any_perpendicular(safe_normalize(da, wp.vec3(0.0, 0.0, 1.0))))
                two = int(0)
                lo = float(0.0)
                hi = float(0.0)
                if la > 1.0e-6 and lb > 1.0e-6:
                    if wp.length(wp.cross(da, db)) < 1.0e-3 * la * lb:
                        u = da / la
                        t0 = wp.clamp(wp.dot(b0 - a0, u) / la, 0.0, 1.0)
                        t1 = wp.clamp(wp.dot(b1 - a0, u) / la, 0.0, 1.0)
                        lo = wp.min(t0, t1)
                        hi = wp.max(t0, t1)
                        if (hi - lo) * la > 1.0e-4 * (la + lb):
                            two = 1
                if two != 0:
                    for k in range(2):
                        tp = lo
                        if k == 1:
                            tp = hi
                        qa = a0 + tp * da
                        qb = b0 + closest_point_segment(qa, b0, b1) * db
                        emit(ctx, out, qa, qb, safe_normalize(qb - qa, n), sA[0], sB[0], k)
                else:
                    emit(ctx, out, pa, pb, n, sA[0], sB[0], 0)
            elif tb == BOX:
                ts = capsule_box_param(a0, a1, XB, sB)
                s0p, n0, d0 = point_box(a0, XB, sB)
                s1p, n1, d1 = point_box(a1, XB, sB)
                emit(ctx, out, a0, s0p, n0, sA[0], 0.0, 0)
                emit(ctx, out, a1, s1p, n1, sA[0], 0.0, 1)
                L = wp.length(a1 - a0)
                if ts * L > 1.0e-4 and (1.0 - ts) * L > 1.0e-4:
                    x = a0 + ts * (a1 - a0)
                    sp, n, ds = point_box(x, XB, sB)
                    if ds < wp.min(d0, d1) - 1.0e-6:
                        emit(ctx, out, x, sp, n, sA[0], 0.0, 2)
        elif ta == BOX:
            if tb == BOX:
                collide_box_box_emit(ctx, out, XA, sA, XB, sB, limit)


@wp.kernel
def soft_contact_kernel(
    particle_q: wp.array(dtype=wp.vec3),
    particle_radius: wp.array(dtype=float),
    particle_flags: wp.array(dtype=wp.int32),
    particle_world: wp.array(dtype=int),
    particle_count: int,
    soft_shapes: wp.array(dtype=int),
    soft_shape_count: int,
    shape_type: wp.array(dtype=int),
    shape_body: wp.array(dtype=int),
    shape_world: wp.array(dtype=int),
    shape_X: wp.array(dtype=wp.transform),
    shape_scale: wp.array(dtype=wp.vec3),
    body_q: wp.array(dtype=wp.transform),
    margin: float,
    geo: GeoBuffers,
    count: wp.array(dtype=int),
    out_particle: wp.array(dtype=int),
    out_shape: wp.array(dtype=int),
    out_indices: wp.array(dtype=wp.vec3i),
    out_bary: wp.array(dtype=wp.vec3),
    out_body_pos: wp.array(dtype=wp.vec3),
    out_body_vel: wp.array(dtype=wp.vec3),
    out_normal: wp.array(dtype=wp.vec3),
    out_tids: wp.array(dtype=int),
    overflow: wp.array(dtype=int),
    stride: int,
):
    tid = wp.tid()
    total = particle_count * soft_shape_count
    item = tid
    while item < total:
        pidx = item // soft_shape_count
        s = soft_shapes[item - pidx * soft_shape_count]
        this_item = item
        item += stride
        if (particle_flags[pidx] & 1) == 0:
            continue
        pw = particle_world[pidx]
        sw = shape_world[s]
        if pw != sw and pw >= 0 and sw >= 0:
            continue
        X = shape_X[s]
        x = particle_q[pidx]
        lp = wp.transform_point(wp.transform_inverse(X), x)
        sc = shape_scale[s]
        t = shape_type[s]
        d = float(MAXVAL)
        cl = wp.vec3(0.0)
        nl = wp.vec3(0.0, 0.0, 1.0)
        if t == SPHERE:
            nl = safe_normalize(lp, wp.vec3(0.0, 0.0, 1.0))
            d = wp.length(lp) - sc[0]
            cl = nl * sc[0]
        elif t == CAPSULE:
            e0 = wp.vec3(0.0, 0.0, -sc[1])
            e1 = wp.vec3(0.0, 0.0, sc[1])
            q = e0 + closest_point_segment(lp, e0, e1) * (e1 - e0)
            nl = safe_normalize(lp - q, any_perpendicular(wp.vec3(0.0, 0.0, 1.0)))
            d = wp.length(lp - q) - sc[0]
            cl = q + nl * sc[0]
        elif t == BOX:
            sp, n, sd = point_box(lp, wp.transform_identity(), sc)
            cl = sp
            d = sd
            if sd > 0.0:
                nl = -n
            else:
                nl = -n
        elif t == ELLIPSOID or t == CYLINDER or t == CONE or t == CONVEX_MESH:
            # the particle center as a point (zero-radius sphere) against the convex shape,
            # both in the shape's local frame
            gS = make_geo(t, wp.transform_identity(), sc, s, geo.vstart, geo.vcount, geo.fcount)
            gP = ConvexGeo()
            gP.vcount = 0
            gP.fcount = 0
            gP.t = SPHERE
            gP.X = wp.transform(lp, wp.quat_identity())
            gP.s = wp.vec3(0.0)
            sd, n, pa, pb = convex_distance(gS, gP, geo.verts)
            d = sd
            cl = pa
            nl = n
        elif t == MESH:
            found, sd, q, n = soft_mesh_closest(geo, s, sc, lp, particle_radius[pidx] + margin)
            if found != 0:
                d = sd
                cl = q
                nl = n
        elif t == HFIELD:
            found, sd, q, n = soft_hfield_closest(geo, s, sc, lp, particle_radius[pidx] + margin)
            if found != 0:
                d = sd
                cl = q
                nl = n
        elif t == PLANE:
            inside = True
            if sc[0] > 0.0 and sc[1] > 0.0:
                inside = wp.abs(lp[0]) <= 0.5 * sc[0] and wp.abs(lp[1]) <= 0.5 * sc[1]
            if inside:
                d = lp[2]
                cl = wp.vec3(lp[0], lp[1], 0.0)
        if d < particle_radius[pidx] + margin:
            idx = wp.atomic_add(count, 0, 1)
            if idx >= out_particle.shape[0]:
                wp.atomic_sub(count, 0, 1)
                note_dropped(overflow, OVERFLOW_SOFT_C, 1, out_particle.shape[0])
            else:
                Xb = shape_body_xform(shape_body[s], body_q)
                out_particle[idx] = pidx
                out_shape[idx] = s
                out_indices[idx] = wp.vec3i(pidx, -1, -1)
                out_bary[idx] = wp.vec3(1.0, 0.0, 0.0)
                out_body_pos[idx] = wp.transform_point(wp.transform_inverse(Xb), wp.transform_point(X, cl))
                out_body_vel[idx] = wp.vec3(0.0)
                out_normal[idx] = wp.transform_vector(X, nl)
                if idx < out_tids.shape[0]:
                    out_tids[idx] = this_item

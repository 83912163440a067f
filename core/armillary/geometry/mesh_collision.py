"""Triangle-mesh and heightfield helpers: per-shape buffers, BVH query boxes and triangle
extraction for the per-triangle convex (GJK/MPR) route of :mod:`.narrow_phase`.

Triangle meshes are queried through a :class:`warp.Mesh` BVH built once per source mesh
(unscaled local coordinates; the shape scale is applied to the query box and to the
triangle vertices). Heightfield cells are enumerated from the query box over the regular
grid, two CCW triangles per cell (normals toward local +z). Back-face culling: a triangle
whose plane has the other shape's center behind it (against the CCW normal) produces no
contact, nor does a contact whose normal points against the triangle normal.
"""

from __future__ import annotations

import numpy as np
import warp as wp

wp.set_module_options({"enable_backward": False, "max_unroll": 1})

from ..sim.enums import GeoType
from .convex import PEN_CLEARANCE, CORE_TOUCH, convex_distance
from .gjk import (GJK_MAX_ITER, GJK_OVERLAP_SQ, GJK_REL_TOL, compact_simplex, mat43g, simplex_closest,
                  tri_closest_bary)
from .support import BOX, TRIANGLE, ConvexGeo, shape_scale_len, support_feature, support_world


@wp.struct
class GeoBuffers:
    verts: wp.array(dtype=wp.vec3)
    vstart: wp.array(dtype=int)
    vcount: wp.array(dtype=int)
    fcount: wp.array(dtype=int)  # hull face normals stored after each convex mesh's vertices
    mesh_id: wp.array(dtype=wp.uint64)
    hf_data: wp.array(dtype=float)
    hf_start: wp.array(dtype=int)
    hf_dims: wp.array(dtype=wp.vec4)
    tri_flags: wp.array(dtype=int)
    tri_start: wp.array(dtype=int)


#: cosine under which two triangles sharing an edge make it a real (feature) edge
FLAT_EDGE_COS = 0.9998


def triangle_edge_flags(vertices, indices) -> np.ndarray:
    """Per triangle, bit e set when edge (v_e, v_e+1) is a feature edge (boundary, or the
    neighbour triangle is not coplanar); internal edges of flat regions stay clear."""
    v = np.asarray(vertices, np.float64).reshape(-1, 3)
    f = np.asarray(indices, np.int64).reshape(-1, 3)
    nt = np.cross(v[f[:, 1]] - v[f[:, 0]], v[f[:, 2]] - v[f[:, 0]])
    nt /= np.maximum(np.linalg.norm(nt, axis=1, keepdims=True), 1e-30)
    owner = {}
    for t, tri in enumerate(f):
        for e in range(3):
            a, b = int(tri[e]), int(tri[(e + 1) % 3])
            owner.setdefault((min(a, b), max(a, b)), []).append(t)
    flags = np.zeros(len(f), np.int32)
    for t, tri in enumerate(f):
        for e in range(3):
            a, b = int(tri[e]), int(tri[(e + 1) % 3])
            others = [o for o in owner[(min(a, b), max(a, b))] if o != t]
            if not others or any(float(nt[t] @ nt[o]) < FLAT_EDGE_COS for o in others):
                flags[t] |= 1 << e
    return flags


#: hull face normals are computed (brute force over vertex triples) for hulls up to this size
HULL_FACE_MAX_VERTICES = 64


def hull_face_normals(vertices) -> np.ndarray:
    """Unit outward normals of the faces of the convex hull of ``vertices`` (deduplicated),
    float32 ``(F, 3)``; empty for hulls above :data:`HULL_FACE_MAX_VERTICES` vertices or
    degenerate (flat) point sets. Used as separating-direction seeds for deep penetration."""
    v = np.asarray(vertices, np.float64).reshape(-1, 3)
    n = len(v)
    if n < 4 or n > HULL_FACE_MAX_VERTICES:
        return np.zeros((0, 3), np.float32)
    size = float(np.ptp(v, axis=0).max())
    if size <= 0.0:
        return np.zeros((0, 3), np.float32)
    i, j, k = np.array([t for t in __import__("itertools").combinations(range(n), 3)]).T
    nrm = np.cross(v[j] - v[i], v[k] - v[i])
    ln = np.linalg.norm(nrm, axis=1)
    ok = ln > 1e-9 * size * size
    nrm = nrm[ok] / ln[ok, None]
    i = i[ok]
    h = (v @ nrm.T) - np.einsum("ij,ij->i", v[i], nrm)[None, :]  # (vertices, planes)
    tol = 1e-6 * size
    pos = (h > tol).any(axis=0)
    neg = (h < -tol).any(axis=0)
    keep = pos ^ neg  # every vertex on one side (and not all on the plane)
    out = np.where(pos[keep, None], -nrm[keep], nrm[keep])
    uniq = []
    for x in out:
        if not any(float(x @ u) > 1.0 - 1e-6 for u in uniq):
            uniq.append(x)
    return np.asarray(uniq, np.float32).reshape(-1, 3)


@wp.func
def world_aabb(g: ConvexGeo, verts: wp.array(dtype=wp.vec3), pad: float):
    lo = wp.vec3(0.0)
    hi = wp.vec3(0.0)
    for k in range(3):
        e = wp.vec3(0.0)
        e[k] = 1.0
        hi[k] = support_world(g, verts, e, 0)[k] + pad
        lo[k] = support_world(g, verts, -e, 0)[k] - pad
    return lo, hi


@wp.func
def local_aabb(X: wp.transform, s: wp.vec3, lo: wp.vec3, hi: wp.vec3):
    """Box of the world AABB [lo, hi] in the unscaled local frame of X with scale s."""
    inv = wp.transform_inverse(X)
    llo = wp.vec3(1.0e30)
    lhi = wp.vec3(-1.0e30)
    for k in range(8):
        c = lo
        if (k & 1) != 0:
            c[0] = hi[0]
        if (k & 2) != 0:
            c[1] = hi[1]
        if (k & 4) != 0:
            c[2] = hi[2]
        p = wp.transform_point(inv, c)
        p = wp.vec3(p[0] / s[0], p[1] / s[1], p[2] / s[2])
        llo = wp.min(llo, p)
        lhi = wp.max(lhi, p)
    # negative scales swap bounds per axis
    return wp.min(llo, lhi), wp.max(llo, lhi)


@wp.func
def tri_geo(X: wp.transform, p0: wp.vec3, p1: wp.vec3, p2: wp.vec3):
    g = ConvexGeo()
    g.t = TRIANGLE
    g.X = X
    g.s = wp.vec3(1.0)
    g.vstart = 0
    g.vcount = 0
    g.fcount = 0
    g.p0 = p0
    g.p1 = p1
    g.p2 = p2
    return g


@wp.func
def sat_axis_depth(L: wp.vec3, t0: wp.vec3, t1: wp.vec3, t2: wp.vec3, h: wp.vec3, best: float, bn: wp.vec3):
    """Update the least overlap (``best``, direction ``bn``) with both senses of the unit axis
    ``L`` (box-local frame, box centered at the origin with half extents ``h``): the depth of
    direction ``+L`` (translate the box along it to separate) is ``max_tri(L) + r_box(L)``."""
    p0 = wp.dot(t0, L)
    p1 = wp.dot(t1, L)
    p2 = wp.dot(t2, L)
    r = h[0] * wp.abs(L[0]) + h[1] * wp.abs(L[1]) + h[2] * wp.abs(L[2])
    dp = wp.max(p0, wp.max(p1, p2)) + r
    dm = r - wp.min(p0, wp.min(p1, p2))
    if dp < best:
        best = dp
        bn = L
    if dm < best:
        best = dm
        bn = -L
    return best, bn


@wp.func
def triangle_in_box_frame(gT: ConvexGeo, gB: ConvexGeo):
    """The triangle's vertices in the (unscaled) local frame of the box ``gB``."""
    q = wp.transform_get_rotation(gB.X)
    c = wp.transform_get_translation(gB.X)
    t0 = wp.quat_rotate_inv(q, wp.transform_point(gT.X, gT.p0) - c)
    t1 = wp.quat_rotate_inv(q, wp.transform_point(gT.X, gT.p1) - c)
    t2 = wp.quat_rotate_inv(q, wp.transform_point(gT.X, gT.p2) - c)
    return t0, t1, t2


@wp.func
def triangle_box_separation(t0: wp.vec3, t1: wp.vec3, t2: wp.vec3, h: wp.vec3):
    """A lower bound of the distance [m] between a triangle (vertices in the box frame) and the
    box of half extents ``h`` centered there: the largest gap along the 3 box axes and the
    triangle normal (separating-axis theorem; <= 0 when these axes do not separate them)."""
    lo = wp.min(t0, wp.min(t1, t2))
    hi = wp.max(t0, wp.max(t1, t2))
    sep = wp.max(lo[0] - h[0], -h[0] - hi[0])
    sep = wp.max(sep, wp.max(lo[1] - h[1], -h[1] - hi[1]))
    sep = wp.max(sep, wp.max(lo[2] - h[2], -h[2] - hi[2]))
    nt = wp.cross(t1 - t0, t2 - t0)
    lt = wp.length(nt)
    if lt > 0.0:
        L = nt / lt
        r = h[0] * wp.abs(L[0]) + h[1] * wp.abs(L[1]) + h[2] * wp.abs(L[2])
        sep = wp.max(sep, wp.abs(wp.dot(t0, L)) - r)
    return sep


@wp.func(inline=False)
def triangle_box_penetration(gT: ConvexGeo, gB: ConvexGeo):
    """Least-overlap direction of an overlapping (triangle, box) pair by the separating-axis
    theorem: (depth [m], unit world normal from the triangle to the box). The candidate
    directions are every face normal of the Minkowski difference of a triangle and a box: both
    senses of the triangle normal, the 3 box axes and the 9 triangle-edge x box-edge crosses."""
    q = wp.transform_get_rotation(gB.X)
    h = gB.s
    t0, t1, t2 = triangle_in_box_frame(gT, gB)
    best = float(1.0e30)
    bn = wp.vec3(0.0, 0.0, 1.0)
    nt = wp.cross(t1 - t0, t2 - t0)
    lt = wp.length(nt)
    if lt > 0.0:
        best, bn = sat_axis_depth(nt / lt, t0, t1, t2, h, best, bn)
    for i in range(3):
        e = wp.vec3(0.0)
        e[i] = 1.0
        best, bn = sat_axis_depth(e, t0, t1, t2, h, best, bn)
    for j in range(3):
        E = t1 - t0
        if j == 1:
            E = t2 - t1
        elif j == 2:
            E = t0 - t2
        le = wp.length(E)
        for i in range(3):
            # e_i x E without building e_i
            L = wp.vec3(0.0)
            if i == 0:
                L = wp.vec3(0.0, -E[2], E[1])
            elif i == 1:
                L = wp.vec3(E[2], 0.0, -E[0])
            else:
                L = wp.vec3(-E[1], E[0], 0.0)
            ll = wp.length(L)
            if ll > 1.0e-6 * le:
                best, bn = sat_axis_depth(L / ll, t0, t1, t2, h, best, bn)
    return best, wp.quat_rotate(q, bn)


@wp.func
def tri_support_local(t0: wp.vec3, t1: wp.vec3, t2: wp.vec3, d: wp.vec3):
    h0 = wp.dot(t0, d)
    h1 = wp.dot(t1, d)
    h2 = wp.dot(t2, d)
    if h0 >= h1 and h0 >= h2:
        return t0
    if h1 >= h2:
        return t1
    return t2


@wp.func
def box_support_local(h: wp.vec3, d: wp.vec3):
    x = h[0]
    y = h[1]
    z = h[2]
    if d[0] < 0.0:
        x = -x
    if d[1] < 0.0:
        y = -y
    if d[2] < 0.0:
        z = -z
    return wp.vec3(x, y, z)


@wp.func(inline=False)
def gjk_triangle_box(t0: wp.vec3, t1: wp.vec3, t2: wp.vec3, h: wp.vec3, off: wp.vec3):
    """:func:`.gjk.gjk` specialised to a triangle (vertices in the box frame) against the box of
    half extents ``h`` centered at ``off`` in that frame: (distance, point on the triangle,
    point on the box, overlap flag), the same iteration, tolerances and sub-simplex search with
    the support functions written out in the box frame."""
    W = mat43g()
    PA = mat43g()
    PB = mat43g()
    d0 = (t0 + t1 + t2) / 3.0 - off
    if wp.dot(d0, d0) < 1.0e-20:
        d0 = wp.vec3(1.0, 0.0, 0.0)
    a0 = tri_support_local(t0, t1, t2, -d0)
    b0 = box_support_local(h, d0) + off
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
        a = tri_support_local(t0, t1, t2, -v)
        b = box_support_local(h, v) + off
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
        W2, A2, B2, m, nv, na, nb = compact_simplex(W, PA, PB, n, lam)
        if wp.dot(nv, nv) >= vv:
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


@wp.func(inline=False)
def triangle_convex_distance(gT: ConvexGeo, gO: ConvexGeo, verts: wp.array(dtype=wp.vec3), limit: float):
    """:func:`.convex.convex_distance` of a triangle (A) and a convex shape (B): signed distance,
    unit normal A -> B, surface points on A and B; a result farther than ``limit`` [m] may be
    any distance above it (a BOX farther than ``limit`` along a box axis or the triangle normal
    returns that lower bound without GJK). Against a BOX the overlapping case takes the
    exact separating-axis least overlap (:func:`triangle_box_penetration`) instead of MPR and
    its refinement, and its witness points the way one refinement step does: the closest points
    of the pair with the box translated just out of contact along that normal (GJK)."""
    if gO.t != BOX:
        return convex_distance(gT, gO, verts)
    zero = wp.vec3(0.0)
    scale = wp.max(shape_scale_len(gT), shape_scale_len(gO))
    t0, t1, t2 = triangle_in_box_frame(gT, gO)
    lb = triangle_box_separation(t0, t1, t2, gO.s)
    if lb > limit + 1.0e-6 * scale:
        return lb, wp.vec3(0.0, 0.0, 1.0), zero, zero  # GJK's distance (>= lb) would exceed limit too
    XB = gO.X
    qB = wp.transform_get_rotation(XB)
    dist, ca, cb, ov = gjk_triangle_box(t0, t1, t2, gO.s, zero)
    if ov == 0 and dist > CORE_TOUCH * scale:
        return dist, wp.quat_rotate(qB, (cb - ca) / dist), wp.transform_point(XB, ca), wp.transform_point(XB, cb)
    depth, n = triangle_box_penetration(gT, gO)
    FA, nA = support_feature(gT, verts, n)
    FB, nB = support_feature(gO, verts, -n)
    if (nA >= 3 and nB >= 2) or (nA >= 2 and nB >= 3):
        # a face manifold follows (:func:`.convex.convex_manifold`): the support points, whose
        # exact entry the manifold's deepest clipped point replaces (as after MPR + refinement)
        return -depth, n, support_world(gT, verts, n, 0), support_world(gO, verts, -n, 0)
    T = wp.quat_rotate_inv(qB, n) * (depth + PEN_CLEARANCE * scale)
    d3, ca3, cb3, ov3 = gjk_triangle_box(t0, t1, t2, gO.s, T)
    if ov3 != 0 or d3 <= 1.0e-9 * scale:
        return convex_distance(gT, gO, verts)  # numerically degenerate: the general route
    return -depth, n, wp.transform_point(XB, ca3), wp.transform_point(XB, cb3 - T)


@wp.func
def hf_point(geo: GeoBuffers, shape: int, s: wp.vec3, i: int, j: int):
    dims = geo.hf_dims[shape]
    ncol = int(dims[1])
    nrow = int(dims[0])
    dx = 2.0 * dims[2] / float(ncol - 1)
    dy = 2.0 * dims[3] / float(nrow - 1)
    z = geo.hf_data[geo.hf_start[shape] + i * ncol + j]
    return wp.vec3((-dims[2] + float(j) * dx) * s[0], (-dims[3] + float(i) * dy) * s[1], z * s[2])


def build_geo_buffers(model):
    """Per-model buffers (cached on the model): convex-mesh vertices, triangle-mesh BVHs,
    heightfield samples."""
    cached = getattr(model, "_armillary_geo_buffers", None)
    if cached is not None:
        return cached
    n = int(model.shape_count)
    dev = model.device
    types = model.shape_type.numpy() if n else np.zeros(0, np.int32)
    m = max(n, 1)
    vstart = np.zeros(m, np.int32)
    vcount = np.zeros(m, np.int32)
    fcount = np.zeros(m, np.int32)
    mesh_ids = np.zeros(m, np.uint64)
    hf_start = np.zeros(m, np.int32)
    hf_dims = np.zeros((m, 4), np.float32)
    chunks, hchunks, fchunks = [], [], []
    total = htotal = ftotal = 0
    tri_start = np.zeros(m, np.int32)
    fl_cache = {}
    hull_cache = {}
    keep = []
    bvh = {}
    for s in range(n):
        t = int(types[s])
        src = model.shape_source[s] if s < len(model.shape_source) else None
        if t == int(GeoType.CONVEX_MESH):
            v = np.asarray(getattr(src, "vertices", np.zeros((0, 3))), dtype=np.float32).reshape(-1, 3)
            if len(v) == 0:
                raise ValueError(f"CollisionPipeline: convex mesh shape {s} has no vertices")
            if id(src) not in hull_cache:  # shared sources (replicated worlds) stored once
                fn = hull_face_normals(v)
                hull_cache[id(src)] = (total, len(v), len(fn))
                chunks += [v, fn]
                total += len(v) + len(fn)
            vstart[s], vcount[s], fcount[s] = hull_cache[id(src)]
        elif t == int(GeoType.MESH):
            key = id(src)
            if key not in bvh:
                pts = wp.array(np.asarray(src.vertices, dtype=np.float32).reshape(-1, 3), dtype=wp.vec3, device=dev)
                idx = wp.array(np.asarray(src.indices, dtype=np.int32).reshape(-1), dtype=wp.int32, device=dev)
                bvh[key] = wp.Mesh(points=pts, indices=idx)
                keep.append(bvh[key])
            mesh_ids[s] = bvh[key].id
            if key not in fl_cache:
                fl_cache[key] = ftotal
                fl = triangle_edge_flags(src.vertices, src.indices)
                fchunks.append(fl)
                ftotal += len(fl)
            tri_start[s] = fl_cache[key]
        elif t == int(GeoType.HFIELD):
            d = np.asarray(src.data, dtype=np.float32).reshape(-1)
            hf_start[s] = htotal
            hf_dims[s] = (src.nrow, src.ncol, src.hx, src.hy)
            hchunks.append(d)
            htotal += len(d)
    g = GeoBuffers()
    g.verts = wp.array(np.concatenate(chunks) if chunks else np.zeros((1, 3), np.float32), dtype=wp.vec3, device=dev)
    g.vstart = wp.array(vstart, dtype=int, device=dev)
    g.vcount = wp.array(vcount, dtype=int, device=dev)
    g.fcount = wp.array(fcount, dtype=int, device=dev)
    g.mesh_id = wp.array(mesh_ids, dtype=wp.uint64, device=dev)
    g.hf_data = wp.array(np.concatenate(hchunks) if hchunks else np.zeros(1, np.float32), dtype=float, device=dev)
    g.hf_start = wp.array(hf_start, dtype=int, device=dev)
    g.hf_dims = wp.array(hf_dims, dtype=wp.vec4, device=dev)
    g.tri_flags = wp.array(np.concatenate(fchunks) if fchunks else np.zeros(1, np.int32), dtype=int, device=dev)
    g.tri_start = wp.array(tri_start, dtype=int, device=dev)
    out = (g,)
    try:
        model._armillary_geo_buffers = out
        model._armillary_geo_bvh = keep
    except AttributeError:
        pass
    return out


# ---------------------------------------------------------------------------------------------
# soft (particle) contacts against triangle meshes and heightfields


@wp.func
def point_triangle_signed(p: wp.vec3, a: wp.vec3, b: wp.vec3, c: wp.vec3):
    """Signed distance, closest point and outward normal of point ``p`` against triangle abc.

    The side comes from the CCW face normal ``(b - a) x (c - a)``: a point behind the face
    (inside the solid) gets a negative distance and the normal still points out of the solid.
    """
    l = tri_closest_bary(a - p, b - p, c - p)
    q = l[0] * a + l[1] * b + l[2] * c
    diff = p - q
    dist = wp.length(diff)
    nt = wp.cross(b - a, c - a)
    ln = wp.length(nt)
    if ln > 0.0:
        nt = nt / ln
    else:
        nt = wp.vec3(0.0, 0.0, 1.0)
    side = wp.dot(diff, nt)
    if (l[0] > 0.0 and l[1] > 0.0 and l[2] > 0.0) or dist < 1.0e-9:
        # face interior: the face normal (exact, no cancellation in p - q)
        if side >= 0.0:
            return wp.abs(side), q, nt
        return -wp.abs(side), q, nt
    if side >= 0.0:
        return dist, q, diff / dist
    return -dist, q, -diff / dist


@wp.func
def keep_closer(d: float, best: float):
    """Whether a candidate at signed distance ``d`` beats ``best``: smaller |d|; on (near) ties,
    the outside candidate (shared edges / vertices of adjacent faces)."""
    if wp.abs(d) < wp.abs(best) - 1.0e-7:
        return True
    return wp.abs(d) <= wp.abs(best) + 1.0e-7 and d > best


@wp.func
def soft_mesh_closest(geo: GeoBuffers, shape: int, sM: wp.vec3, lp: wp.vec3, rng: float):
    """Closest triangle-mesh feature to the point ``lp`` (shape-local, scaled frame) within ``rng``.

    Returns (found, signed distance, closest point, outward normal), all in the scaled local
    frame. The triangles overlapping the query box come from the mesh BVH
    (``wp.mesh_query_aabb`` in unscaled coordinates); distances are exact for any scale."""
    mesh_id = geo.mesh_id[shape]
    mesh = wp.mesh_get(mesh_id)
    a = wp.vec3(
        (lp[0] - rng) / sM[0], (lp[1] - rng) / sM[1], (lp[2] - rng) / sM[2])
    b = wp.vec3(
        (lp[0] + rng) / sM[0], (lp[1] + rng) / sM[1], (lp[2] + rng) / sM[2])
    q = wp.mesh_query_aabb(mesh_id, wp.min(a, b), wp.max(a, b))
    f = int(0)
    found = int(0)
    best = float(1.0e30)
    cl = wp.vec3(0.0)
    nl = wp.vec3(0.0, 0.0, 1.0)
    mirror = sM[0] * sM[1] * sM[2] < 0.0
    while wp.mesh_query_aabb_next(q, f):
        p0 = wp.cw_mul(mesh.points[mesh.indices[3 * f]], sM)
        p1 = wp.cw_mul(mesh.points[mesh.indices[3 * f + 1]], sM)
        p2 = wp.cw_mul(mesh.points[mesh.indices[3 * f + 2]], sM)
        if mirror:
            tmp = p1
            p1 = p2
            p2 = tmp
        d, c, n = point_triangle_signed(lp, p0, p1, p2)
        if wp.abs(d) <= rng and (found == 0 or keep_closer(d, best)):
            found = 1
            best = d
            cl = c
            nl = n
    return found, best, cl, nl


@wp.func
def soft_hfield_closest(geo: GeoBuffers, shape: int, sH: wp.vec3, lp: wp.vec3, rng: float):
    """Closest heightfield surface point to ``lp`` (shape-local, scaled frame) within ``rng``,
    over the two CCW triangles of every grid cell under the query box; solid below."""
    dims = geo.hf_dims[shape]
    nrow = int(dims[0])
    ncol = int(dims[1])
    dx = 2.0 * dims[2] / float(ncol - 1)
    dy = 2.0 * dims[3] / float(nrow - 1)
    j0 = wp.max(int(wp.floor(((lp[0] - rng) / sH[0] + dims[2]) / dx)), 0)
    j1 = wp.min(int(wp.floor(((lp[0] + rng) / sH[0] + dims[2]) / dx)), ncol - 2)
    i0 = wp.max(int(wp.floor(((lp[1] - rng) / sH[1] + dims[3]) / dy)), 0)
    i1 = wp.min(int(wp.floor(((lp[1] + rng) / sH[1] + dims[3]) / dy)), nrow - 2)
    found = int(0)
    best = float(1.0e30)
    cl = wp.vec3(0.0)
    nl = wp.vec3(0.0, 0.0, 1.0)
    for i in range(i0, i1 + 1):
        for j in range(j0, j1 + 1):
            a = hf_point(geo, shape, sH, i, j)
            b = hf_point(geo, shape, sH, i, j + 1)
            c = hf_point(geo, shape, sH, i + 1, j + 1)
            e = hf_point(geo, shape, sH, i + 1, j)
            for k in range(2):
                p1 = b
                p2 = c
                if k == 1:
                    p1 = c
                    p2 = e
                d, q, n = point_triangle_signed(lp, a, p1, p2)
                if wp.abs(d) <= rng and (found == 0 or keep_closer(d, best)):
                    found = 1
                    best = d
                    cl = q
                    nl = n
    return found, best, cl, nl

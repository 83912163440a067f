"""Mesh-vs-mesh, heightfield-vs-mesh and primitive-SDF-vs-mesh narrow-phase routes.

Pairs routed here (:func:`.narrow_phase.mm_routed`, ordered like the narrow phase: the lower
geometry type is shape A):

* ``MM``: MESH-MESH;
* ``HM``: HFIELD-MESH (heightfield = A);
* ``PS``: a primitive carrying an SDF (``ShapeConfig.sdf_max_resolution`` /
  ``sdf_target_voxel_size``) against a MESH: the mesh's features against the primitive's SDF
  (only with :data:`ENABLE_PRIMITIVE_SDF_ROUTE`, off by default: see there).

Features and distances. Each side's *features* are queried against the other side's signed
distance ``d(p)`` (negative inside, outward unit normal):

* features: mesh vertices, mesh edges (``Mesh.sdf_edges`` when the mesh carries them, else the
  feature edges: boundary edges and edges whose adjacent faces are not coplanar), heightfield
  grid points under the mesh's box;
* ``d(p)`` of a MESH: its SDF (:func:`.sdf.sdf_query`) when it carries one, with a BVH fallback
  outside the SDF grid box and below the SDF's narrow band (deep points); else the BVH
  (``wp.mesh_query_point_sign_normal``, unscaled local coordinates; ``max_dist`` is the
  detection range, or the mesh box diagonal for points inside the mesh box, so deep vertices
  find the closest surface for depth and normal); the distance and normal are then measured
  exactly to the closest face in the scaled frame. Of a HFIELD: the plane of the grid triangle
  under ``(x, y)`` (two CCW triangles per cell, solid below). Of a primitive: its SDF.
* a vertex gives a contact at the vertex; an edge (only when ``d`` decreases at its first end and
  increases at its second, or is flat at both: otherwise its minimum is an end vertex, reported by
  that vertex) gives a contact at the minimum of ``d`` along
  it (9 samples, then 12 golden-section steps around the best) when that minimum is interior
  and below both endpoint values (else the vertex contacts cover it), or, when the minimum is a
  plateau (the edge lies on a face), one at each plateau end inside the edge (bisection), with
  the plateau's distance and normal: where the edge crosses the other shape's boundary, the
  corners of the support polygon.

A feature of A at ``p`` with ``d(p)``, normal ``n_B`` gives ``point0 = p``,
``point1 = p - d n_B``, normal ``-n_B`` (A to B); a feature of B the mirror image. Admission is
:func:`.narrow_phase.admit` (the ``emit`` rule: margins, gaps, speculative extension).

Sub-key (unique per contact of a pair, deterministic ordering): ``8 * index + 2 * kind + end``
with kind 0 = vertex / grid point (``i * ncol + j``) of A, 1 = edge of A, 2 = vertex of B, 3 = edge
of B, and ``end`` 1 only for the second end of an edge plateau (unique for up to 2^21 features).

Launches (all with fixed dimensions, no host synchronization): a claim kernel hands every routed
candidate pair a *block* (atomic counter), a feature kernel runs :data:`THREADS_PER_PAIR`
threads per block over the pair's features, and with reduction a finalize kernel (one thread per
block) writes the selected contacts.

Reduction (binned streaming selection): a contact's normal falls in one of :data:`MM_BINS` (20)
bins, the face normals of an icosahedron (largest dot product, lowest index on ties). Each bin
has :data:`MM_SLOTS_PER_BIN` (9) slots: slot 0 keeps the deepest contact, slots 1..8 the contact
extremal along 8 fixed in-plane directions of the bin (45 degrees apart). A slot holds a 64-bit
key ``quantized score << 24 | (2^24 - 1 - sub_key)`` updated with ``atomic_max``, so the
selection is exact, independent of thread order, and ties go to the lower sub-key (scores are
quantized to 1e-7 m). The finalize kernel recomputes each winning contact from its sub-key,
drops contacts winning several slots and writes the rest: at most 20 * 9 = 180 <= 240 contacts
per pair. Slot layout: ``keys[block * 180 + bin * 9 + slot]``.
"""

from __future__ import annotations

import numpy as np
import warp as wp

wp.set_module_options({"enable_backward": False, "max_unroll": 1})

from ..sim.enums import GeoType
from .mesh_collision import FLAT_EDGE_COS, GeoBuffers, hf_point, local_aabb, point_triangle_signed
from .narrow_phase import ContactOut, PairCtx, admit, mm_routed, shape_body_xform, write_contact
from .sdf import SDFBuffers, build_sdf_buffers, sdf_has, sdf_query, shape_sdf

MESH = wp.constant(int(GeoType.MESH))
HFIELD = wp.constant(int(GeoType.HFIELD))

#: normal bins (icosahedron face normals)
MM_BINS = 20
#: slots per bin: the deepest + extremal along 8 in-plane directions
MM_SLOTS_PER_BIN = 9
MM_DIRS = MM_SLOTS_PER_BIN - 1
#: key slots per pair (also the most contacts a reduced pair emits)
MM_SLOTS = MM_BINS * MM_SLOTS_PER_BIN
MM_BINS_C = wp.constant(MM_BINS)
MM_SPB_C = wp.constant(MM_SLOTS_PER_BIN)
MM_SLOTS_C = wp.constant(MM_SLOTS)
#: threads per routed pair in the feature kernel
THREADS_PER_PAIR = 32
#: samples along an edge (intervals) and golden-section steps
EDGE_SAMPLES = wp.constant(8)
GOLDEN_STEPS = wp.constant(12)
#: contacts per routed pair for the default rigid_contact_max estimate
MM_PAIR_ESTIMATE = 40

_BIG = wp.constant(1.0e30)
_SUB_MASK = wp.constant(wp.int64((1 << 24) - 1))
_QOFF = wp.constant(wp.int64(1 << 37))


@wp.struct
class MMBuffers:
    edges: wp.array(dtype=wp.vec2i)
    estart: wp.array(dtype=int)
    ecount: wp.array(dtype=int)
    blo: wp.array(dtype=wp.vec3)  # unscaled local bounds of MESH shapes
    bhi: wp.array(dtype=wp.vec3)
    band_in: wp.array(dtype=float)  # SDF narrow band (inner) per shape: deeper values use the BVH
    prim_sdf: wp.array(dtype=int)  # 1: primitive routed against meshes through its SDF
    bin_n: wp.array(dtype=wp.vec3)
    bin_u: wp.array(dtype=wp.vec3)
    bin_v: wp.array(dtype=wp.vec3)
    pairs: wp.array(dtype=wp.vec2i)  # per block: ordered (a, b)
    count: wp.array(dtype=int)  # blocks claimed this launch
    keys: wp.array(dtype=wp.int64)  # blocks * MM_SLOTS (empty: unreduced)


# ------------------------------------------------------------------------------------ distances


@wp.func
def mesh_dist(geo: GeoBuffers, mm: MMBuffers, o: int, sM: wp.vec3, lp: wp.vec3, rng: float):
    """BVH signed distance of the shape-local (scaled) point ``lp`` to MESH shape ``o`` within
    ``rng`` (any depth for points inside the mesh box). Returns (found, d, local normal)."""
    b0 = wp.cw_mul(mm.blo[o], sM)
    b1 = wp.cw_mul(mm.bhi[o], sM)
    lo = wp.min(b0, b1)
    hi = wp.max(b0, b1)
    c = wp.min(wp.max(lp, lo), hi)
    db = wp.length(lp - c)
    if db > rng:
        return int(0), float(0.0), wp.vec3(0.0)
    maxd = rng
    if db == 0.0:
        maxd = wp.max(rng, wp.length(hi - lo))
    smin = wp.min(wp.abs(sM[0]), wp.min(wp.abs(sM[1]), wp.abs(sM[2])))
    mesh_id = geo.mesh_id[o]
    lpu = wp.cw_div(lp, sM)
    q = wp.mesh_query_point_sign_normal(mesh_id, lpu, maxd / smin * 1.001 + 1.0e-6)
    if not q.result:
        return int(0), float(0.0), wp.vec3(0.0)
    mesh = wp.mesh_get(mesh_id)
    f = q.face
    p0 = wp.cw_mul(mesh.points[mesh.indices[3 * f]], sM)
    p1 = wp.cw_mul(mesh.points[mesh.indices[3 * f + 1]], sM)
    p2 = wp.cw_mul(mesh.points[mesh.indices[3 * f + 2]], sM)
    if sM[0] * sM[1] * sM[2] < 0.0:
        tmp = p1
        p1 = p2
        p2 = tmp
    d, cl, n = point_triangle_signed(lp, p0, p1, p2)
    inside = q.sign < 0.0
    if inside != (d < 0.0):
        d = -d
        n = -n
    if d > rng:
        return int(0), d, n
    return int(1), d, n


@wp.func
def hf_dist(geo: GeoBuffers, o: int, sH: wp.vec3, lp: wp.vec3):
    """Signed distance of ``lp`` (heightfield-local, scaled) to the plane of the grid triangle
    under it (solid below). Returns (found, d, local normal); not found outside the grid."""
    dims = geo.hf_dims[o]
    nrow = int(dims[0])
    ncol = int(dims[1])
    dx = 2.0 * dims[2] / float(ncol - 1)
    dy = 2.0 * dims[3] / float(nrow - 1)
    u = (lp[0] / sH[0] + dims[2]) / dx
    v = (lp[1] / sH[1] + dims[3]) / dy
    if u < 0.0 or v < 0.0 or u > float(ncol - 1) or v > float(nrow - 1):
        return int(0), float(0.0), wp.vec3(0.0)
    j = wp.min(int(wp.floor(u)), ncol - 2)
    i = wp.min(int(wp.floor(v)), nrow - 2)
    fx = u - float(j)
    fy = v - float(i)
    a = hf_point(geo, o, sH, i, j)
    c = hf_point(geo, o, sH, i + 1, j + 1)
    n = wp.vec3(0.0, 0.0, 1.0)
    if fx >= fy:
        n = wp.cross(hf_point(geo, o, sH, i, j + 1) - a, c - a)
    else:
        n = wp.cross(c - a, hf_point(geo, o, sH, i + 1, j) - a)
    n = wp.normalize(n)
    if n[2] < 0.0:
        n = -n
    return int(1), wp.dot(lp - a, n), n


@wp.func
def other_dist(o: int, to: int, Xo: wp.transform, so: wp.vec3, p: wp.vec3, rng: float, geo: GeoBuffers,
               sdf: SDFBuffers, mm: MMBuffers):  # fmt: skip
    """Signed distance of the world point ``p`` to shape ``o`` (SDF, BVH or heightfield).
    Returns (found, d, world outward normal); found = 0 when beyond ``rng`` or unknown."""
    lp = wp.transform_point(wp.transform_inverse(Xo), p)
    found = int(0)
    d = float(0.0)
    nl = wp.vec3(0.0, 0.0, 1.0)
    if sdf_has(sdf, o):
        d, nl = sdf_query(sdf, o, lp)
        found = int(1)
        if to == MESH:
            # BVH fallback below the narrow band (stored values there are clamped); outside the grid
            # box the SDF's extension (value at the clamped point + distance to the box) is an
            # upper bound of the true distance, used as is: every query stays O(1)
            if d < mm.band_in[o]:
                found, d, nl = mesh_dist(geo, mm, o, so, lp, rng)
                d = d - sdf.margin[o]
        if d > rng:
            found = 0
    elif to == MESH:
        found, d, nl = mesh_dist(geo, mm, o, so, lp, rng)
    elif to == HFIELD:
        found, d, nl = hf_dist(geo, o, so, lp)
        if d > rng:
            found = 0
    return found, d, wp.quat_rotate(wp.transform_get_rotation(Xo), nl)


@wp.func
def dist_or_big(o: int, to: int, Xo: wp.transform, so: wp.vec3, p: wp.vec3, rng: float, geo: GeoBuffers,
                sdf: SDFBuffers, mm: MMBuffers):  # fmt: skip
    f, d, n = other_dist(o, to, Xo, so, p, rng, geo, sdf, mm)
    if f == 0:
        return _BIG
    return d


@wp.func
def edge_min(p0: wp.vec3, p1: wp.vec3, o: int, to: int, Xo: wp.transform, so: wp.vec3, rng: float,
             geo: GeoBuffers, sdf: SDFBuffers, mm: MMBuffers):  # fmt: skip
    """Edge contacts from the other shape's distance ``d(t)`` along segment p0 p1 (within ``rng``).

    A single-sample minimum strictly inside the edge and below both endpoint values gives one
    contact at the golden-section minimum. A plateau (several samples within ``tol`` of the
    minimum: an edge lying on a face) gives a contact at each plateau end strictly inside the
    edge (bisection), e.g. where the edge crosses the other shape's boundary edge: the corners of
    the support polygon. Returns (found0, point0, d0, normal0, found1, point1, d1, normal1)."""
    z = wp.vec3(0.0)
    e = p1 - p0
    L = wp.length(e)
    if L < 1.0e-9:
        return int(0), p0, float(0.0), z, int(0), p0, float(0.0), z
    fm, dmid, nm = other_dist(o, to, Xo, so, p0 + 0.5 * e, rng + 0.5 * L, geo, sdf, mm)
    if fm == 0 or dmid < -0.5 * L:
        # beyond range along the whole edge, or the whole edge inside (its vertices carry it)
        return int(0), p0, float(0.0), z, int(0), p0, float(0.0), z
    big_rng = rng + L
    # slope test at the ends: an interior minimum needs d decreasing at p0 and increasing at p1; a
    # plateau (edge lying on a face) has both slopes ~0. Otherwise the minimum is at an end vertex,
    # which its own vertex feature reports: skip the sampling (most edges of a contact patch)
    fe0, de0, ne0 = other_dist(o, to, Xo, so, p0, big_rng, geo, sdf, mm)
    fe1, de1, ne1 = other_dist(o, to, Xo, so, p1, big_rng, geo, sdf, mm)
    if fe0 != 0 and fe1 != 0:
        s0 = wp.dot(ne0, e)
        s1 = wp.dot(ne1, e)
        flat = 1.0e-3 * L
        if s0 > flat or s1 < -flat:
            return int(0), p0, float(0.0), z, int(0), p0, float(0.0), z
    h = 1.0 / float(EDGE_SAMPLES)
    S = wp.vector(dtype=float, length=9)
    best_k = int(0)
    for k in range(EDGE_SAMPLES + 1):
        S[k] = dist_or_big(o, to, Xo, so, p0 + (float(k) * h) * e, big_rng, geo, sdf, mm)
        if S[k] < S[best_k]:
            best_k = k
    best = S[best_k]
    if best >= _BIG or best > rng:
        return int(0), p0, float(0.0), z, int(0), p0, float(0.0), z
    tol = 1.0e-6 + 1.0e-5 * L
    k_lo = best_k
    while k_lo > 0 and S[k_lo - 1] <= best + tol:
        k_lo -= 1
    k_hi = best_k
    while k_hi < EDGE_SAMPLES and S[k_hi + 1] <= best + tol:
        k_hi += 1
    if k_hi > k_lo:
        # plateau: its ends (bisection between the last plateau sample and the next one)
        found0 = int(0)
        found1 = int(0)
        q0 = p0
        q1 = p0
        if k_lo > 0:
            tin = float(k_lo) * h
            tout = float(k_lo - 1) * h
            for it in range(GOLDEN_STEPS):
                tm = 0.5 * (tin + tout)
                if dist_or_big(o, to, Xo, so, p0 + tm * e, big_rng, geo, sdf, mm) <= best + tol:
                    tin = tm
                else:
                    tout = tm
            q0 = p0 + tin * e
            found0 = 1
        if k_hi < EDGE_SAMPLES:
            tin = float(k_hi) * h
            tout = float(k_hi + 1) * h
            for it in range(GOLDEN_STEPS):
                tm = 0.5 * (tin + tout)
                if dist_or_big(o, to, Xo, so, p0 + tm * e, big_rng, geo, sdf, mm) <= best + tol:
                    tin = tm
                else:
                    tout = tm
            q1 = p0 + tin * e
            found1 = 1
        # the plateau's distance and normal (the face the edge lies on), at the plateau ends
        fb, db, nb = other_dist(o, to, Xo, so, p0 + (float(best_k) * h) * e, big_rng, geo, sdf, mm)
        if fb == 0:
            return int(0), p0, float(0.0), z, int(0), p0, float(0.0), z
        return found0, q0, db, nb, found1, q1, db, nb
    if best_k == 0 or best_k == EDGE_SAMPLES:
        return int(0), p0, float(0.0), z, int(0), p0, float(0.0), z
    lo = float(best_k - 1) * h
    hi = float(best_k + 1) * h
    gr = 0.6180339887
    x1 = hi - gr * (hi - lo)
    x2 = lo + gr * (hi - lo)
    f1 = dist_or_big(o, to, Xo, so, p0 + x1 * e, big_rng, geo, sdf, mm)
    f2 = dist_or_big(o, to, Xo, so, p0 + x2 * e, big_rng, geo, sdf, mm)
    for it in range(GOLDEN_STEPS):
        if f1 <= f2:
            hi = x2
            x2 = x1
            f2 = f1
            x1 = hi - gr * (hi - lo)
            f1 = dist_or_big(o, to, Xo, so, p0 + x1 * e, big_rng, geo, sdf, mm)
        else:
            lo = x1
            x1 = x2
            f1 = f2
            x2 = lo + gr * (hi - lo)
            f2 = dist_or_big(o, to, Xo, so, p0 + x2 * e, big_rng, geo, sdf, mm)
    t = x1
    if f2 < f1:
        t = x2
    if best < wp.min(f1, f2):
        t = float(best_k) * h
    p = p0 + t * e
    f, d, n = other_dist(o, to, Xo, so, p, big_rng, geo, sdf, mm)
    if f == 0 or d > rng or d >= wp.min(S[0], S[EDGE_SAMPLES]) - 1.0e-6 - 1.0e-5 * L:
        return int(0), p0, float(0.0), z, int(0), p0, float(0.0), z
    return int(1), p, d, n, int(0), p0, float(0.0), z


# ------------------------------------------------------------------------------------ features


@wp.func
def mesh_vertex_world(geo: GeoBuffers, s: int, X: wp.transform, sc: wp.vec3, k: int):
    mesh = wp.mesh_get(geo.mesh_id[s])
    return wp.transform_point(X, wp.cw_mul(mesh.points[k], sc))


@wp.func
def mesh_vertex_count(geo: GeoBuffers, s: int):
    return wp.mesh_get(geo.mesh_id[s]).points.shape[0]


@wp.func(inline=False)
def mm_feature(kind: int, idx: int, a: int, b: int, ta: int, tb: int, XA: wp.transform, sA: wp.vec3,
               XB: wp.transform, sB: wp.vec3, limit: float, geo: GeoBuffers, sdf: SDFBuffers, mm: MMBuffers):  # fmt: skip
    """Contacts of feature (kind, idx) (see the module docstring): (ok, pa, pb, n) for end 0 and
    for end 1 (edge plateaus only)."""
    side = kind // 2
    s = a
    ts = ta
    Xs = XA
    ss = sA
    o = b
    to = tb
    Xo = XB
    so = sB
    if side == 1:
        s = b
        ts = tb
        Xs = XB
        ss = sB
        o = a
        to = ta
        Xo = XA
        so = sA
    found = int(0)
    d = float(0.0)
    nw = wp.vec3(0.0)
    p = wp.vec3(0.0)
    found1 = int(0)
    d1 = float(0.0)
    nw1 = wp.vec3(0.0)
    p1 = wp.vec3(0.0)
    if (kind & 1) == 0:
        if ts == HFIELD:
            ncol = int(geo.hf_dims[s][1])
            i = idx // ncol
            p = wp.transform_point(Xs, hf_point(geo, s, ss, i, idx - i * ncol))
        else:
            p = mesh_vertex_world(geo, s, Xs, ss, idx)
        found, d, nw = other_dist(o, to, Xo, so, p, limit, geo, sdf, mm)
    else:
        ev = mm.edges[mm.estart[s] + idx]
        e0 = mesh_vertex_world(geo, s, Xs, ss, ev[0])
        e1 = mesh_vertex_world(geo, s, Xs, ss, ev[1])
        found, p, d, nw, found1, p1, d1, nw1 = edge_min(e0, e1, o, to, Xo, so, limit, geo, sdf, mm)
    q = p - d * nw
    q1 = p1 - d1 * nw1
    if side == 0:
        return found, p, q, -nw, found1, p1, q1, -nw1
    return found, q, p, nw, found1, q1, p1, nw1


@wp.func
def pair_ctx(a: int, b: int, shape_body: wp.array(dtype=int), shape_margin: wp.array(dtype=float),
             shape_gap: wp.array(dtype=float), body_q: wp.array(dtype=wp.transform),
             body_qd: wp.array(dtype=wp.spatial_vector), body_com: wp.array(dtype=wp.vec3), spec: int, dt: float,
             emax: float):  # fmt: skip
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


@wp.func
def hf_grid_range(geo: GeoBuffers, mm: MMBuffers, h: int, XH: wp.transform, sH: wp.vec3, m: int, XM: wp.transform,
                  sM: wp.vec3, pad: float):  # fmt: skip
    """Grid points (i0, i1, j0, j1) of heightfield ``h`` under the world box of mesh ``m``."""
    b0 = wp.cw_mul(mm.blo[m], sM)
    b1 = wp.cw_mul(mm.bhi[m], sM)
    lo = wp.vec3(1.0e30)
    hi = wp.vec3(-1.0e30)
    for k in range(8):
        c = wp.min(b0, b1)
        cmax = wp.max(b0, b1)
        if (k & 1) != 0:
            c[0] = cmax[0]
        if (k & 2) != 0:
            c[1] = cmax[1]
        if (k & 4) != 0:
            c[2] = cmax[2]
        w = wp.transform_point(XM, c)
        lo = wp.min(lo, w)
        hi = wp.max(hi, w)
    llo, lhi = local_aabb(XH, sH, lo - wp.vec3(pad), hi + wp.vec3(pad))
    dims = geo.hf_dims[h]
    nrow = int(dims[0])
    ncol = int(dims[1])
    dx = 2.0 * dims[2] / float(ncol - 1)
    dy = 2.0 * dims[3] / float(nrow - 1)
    j0 = wp.max(int(wp.ceil((llo[0] + dims[2]) / dx)), 0)
    j1 = wp.min(int(wp.floor((lhi[0] + dims[2]) / dx)), ncol - 1)
    i0 = wp.max(int(wp.ceil((llo[1] + dims[3]) / dy)), 0)
    i1 = wp.min(int(wp.floor((lhi[1] + dims[3]) / dy)), nrow - 1)
    return i0, i1, j0, j1


@wp.func
def feature_counts(geo: GeoBuffers, mm: MMBuffers, a: int, b: int, ta: int, tb: int, XA: wp.transform,
                   sA: wp.vec3, XB: wp.transform, sB: wp.vec3, limit: float):  # fmt: skip
    """Per kind (vertices of A, edges of A, vertices of B, edges of B) feature counts and the
    heightfield grid window (i0, j0, nj)."""
    c = wp.vec4i(0, 0, 0, 0)
    win = wp.vec3i(0, 0, 1)
    if ta == MESH:
        c[0] = mesh_vertex_count(geo, a)
        c[1] = mm.ecount[a]
    if ta == HFIELD:
        i0, i1, j0, j1 = hf_grid_range(geo, mm, a, XA, sA, b, XB, sB, limit)
        if i1 >= i0 and j1 >= j0:
            c[0] = (i1 - i0 + 1) * (j1 - j0 + 1)
            win = wp.vec3i(i0, j0, j1 - j0 + 1)
    if tb == MESH:
        c[2] = mesh_vertex_count(geo, b)
        c[3] = mm.ecount[b]
    return c, win


@wp.func
def in_box(lp: wp.vec3, lo: wp.vec3, hi: wp.vec3):
    return lp[0] >= lo[0] and lp[1] >= lo[1] and lp[2] >= lo[2] and lp[0] <= hi[0] and lp[1] <= hi[1] and (
        lp[2] <= hi[2])


@wp.func
def feature_near_other(kind: int, idx: int, a: int, b: int, ta: int, tb: int, X_BA: wp.transform, sA: wp.vec3,
                       X_AB: wp.transform, sB: wp.vec3, limit: float, geo: GeoBuffers, mm: MMBuffers):  # fmt: skip
    """Cheap cull before any distance query: a MESH feature (vertex, or edge by its segment box)
    must reach the other MESH's scaled local bounds grown by the detection ``limit``
    (heightfield features and features against heightfields are not culled here). ``X_BA`` maps
    A's local frame into B's, ``X_AB`` the reverse."""
    s = a
    ts = ta
    X_os = X_BA
    ss = sA
    o = b
    to = tb
    so = sB
    if kind >= 2:
        s = b
        ts = tb
        X_os = X_AB
        ss = sB
        o = a
        to = ta
        so = sA
    if ts != MESH or to != MESH:
        return True
    l0 = wp.cw_mul(mm.blo[o], so)
    h0 = wp.cw_mul(mm.bhi[o], so)
    lo = wp.min(l0, h0) - wp.vec3(limit)
    hi = wp.max(l0, h0) + wp.vec3(limit)
    mesh = wp.mesh_get(geo.mesh_id[s])
    if (kind & 1) == 0:
        return in_box(wp.transform_point(X_os, wp.cw_mul(mesh.points[idx], ss)), lo, hi)
    ev = mm.edges[mm.estart[s] + idx]
    q0 = wp.transform_point(X_os, wp.cw_mul(mesh.points[ev[0]], ss))
    q1 = wp.transform_point(X_os, wp.cw_mul(mesh.points[ev[1]], ss))
    return in_box(wp.max(q0, q1), lo, wp.vec3(1.0e30)) and in_box(wp.min(q0, q1), wp.vec3(-1.0e30), hi)


# ------------------------------------------------------------------------------------ reduction


@wp.func
def score_key(score: float, sub: int):
    q = wp.int64(wp.round(wp.clamp(score, -1.0e4, 1.0e4) * 1.0e7)) + _QOFF
    return (q << wp.int64(24)) | (_SUB_MASK - wp.int64(sub))


@wp.func
def reduce_insert(mm: MMBuffers, blk: int, pa: wp.vec3, n: wp.vec3, d: float, sub: int):
    best = int(0)
    bd = wp.dot(n, mm.bin_n[0])
    for k in range(1, MM_BINS_C):
        x = wp.dot(n, mm.bin_n[k])
        if x > bd:
            bd = x
            best = k
    base = blk * MM_SLOTS_C + best * MM_SPB_C
    wp.atomic_max(mm.keys, base, score_key(-d, sub))
    u = mm.bin_u[best]
    v = mm.bin_v[best]
    for j in range(MM_SPB_C - 1):
        ang = float(j) * (2.0 * wp.pi / float(MM_SPB_C - 1))
        dirn = wp.cos(ang) * u + wp.sin(ang) * v
        wp.atomic_max(mm.keys, base + 1 + j, score_key(wp.dot(pa, dirn), sub))


# ------------------------------------------------------------------------------------ kernels


@wp.kernel
def mm_claim_kernel(pairs: wp.array(dtype=wp.vec2i), pair_count: wp.array(dtype=int), shape_type: wp.array(dtype=int),
                    mm: MMBuffers, stride: int):  # fmt: skip
    tid = wp.tid()
    n_pairs = wp.min(pair_count[0], pairs.shape[0])
    i = tid
    while i < n_pairs:
        p = pairs[i]
        i += stride
        a = p[0]
        b = p[1]
        ta = shape_type[a]
        tb = shape_type[b]
        if ta > tb or (ta == tb and a > b):
            tmp = a
            a = b
            b = tmp
            tt = ta
            ta = tb
            tb = tt
        if mm_routed(ta, tb, a, b, mm.prim_sdf):
            blk = wp.atomic_add(mm.count, 0, 1)
            if blk < mm.pairs.shape[0]:
                mm.pairs[blk] = wp.vec2i(a, b)
                if mm.keys.shape[0] > 0:
                    for k in range(MM_SLOTS_C):
                        mm.keys[blk * MM_SLOTS_C + k] = wp.int64(-1)


@wp.kernel
def mm_feature_kernel(shape_type: wp.array(dtype=int), shape_body: wp.array(dtype=int),
                      shape_X: wp.array(dtype=wp.transform), shape_scale: wp.array(dtype=wp.vec3),
                      shape_margin: wp.array(dtype=float), shape_gap: wp.array(dtype=float),
                      body_q: wp.array(dtype=wp.transform), body_qd: wp.array(dtype=wp.spatial_vector),
                      body_com: wp.array(dtype=wp.vec3), spec: int, dt: float, emax: float, out: ContactOut,
                      geo: GeoBuffers, sdf: SDFBuffers, mm: MMBuffers, threads: int):  # fmt: skip
    tid = wp.tid()
    blk = tid / threads
    lane = tid - blk * threads
    if blk >= wp.min(mm.count[0], mm.pairs.shape[0]):
        return
    pr = mm.pairs[blk]
    a = pr[0]
    b = pr[1]
    ta = shape_type[a]
    tb = shape_type[b]
    ctx, limit = pair_ctx(a, b, shape_body, shape_margin, shape_gap, body_q, body_qd, body_com, spec, dt, emax)
    XA = shape_X[a]
    XB = shape_X[b]
    sA = shape_scale[a]
    sB = shape_scale[b]
    cnt, win = feature_counts(geo, mm, a, b, ta, tb, XA, sA, XB, sB, limit)
    total = cnt[0] + cnt[1] + cnt[2] + cnt[3]
    reduce = mm.keys.shape[0] > 0
    X_BA = wp.transform_inverse(XB) * XA
    X_AB = wp.transform_inverse(XA) * XB
    f = lane
    while f < total:
        kind = int(0)
        idx = f
        while kind < 3 and idx >= cnt[kind]:
            idx -= cnt[kind]
            kind += 1
        f += threads
        if kind == 0 and ta == HFIELD:
            r = idx / win[2]
            idx = (win[0] + r) * int(geo.hf_dims[a][1]) + win[1] + idx - r * win[2]
        if not feature_near_other(kind, idx, a, b, ta, tb, X_BA, sA, X_AB, sB, limit, geo, mm):
            continue
        ok0, pa0, pb0, n0, ok1, pa1, pb1, n1 = mm_feature(kind, idx, a, b, ta, tb, XA, sA, XB, sB, limit, geo,
                                                          sdf, mm)  # fmt: skip
        for end in range(2):
            ok = ok0
            pa = pa0
            pb = pb0
            n = n0
            if end == 1:
                ok = ok1
                pa = pa1
                pb = pb1
                n = n1
            if ok != 0:
                d, adm = admit(ctx, pa, pb, n, 0.0, 0.0)
                if adm:
                    sub = 8 * idx + 2 * kind + end
                    if reduce:
                        reduce_insert(mm, blk, pa, n, d, sub)
                    else:
                        write_contact(ctx, out, pa, pb, n, 0.0, 0.0, sub)


@wp.kernel
def mm_finalize_kernel(shape_type: wp.array(dtype=int), shape_body: wp.array(dtype=int),
                       shape_X: wp.array(dtype=wp.transform), shape_scale: wp.array(dtype=wp.vec3),
                       shape_margin: wp.array(dtype=float), shape_gap: wp.array(dtype=float),
                       body_q: wp.array(dtype=wp.transform), body_qd: wp.array(dtype=wp.spatial_vector),
                       body_com: wp.array(dtype=wp.vec3), spec: int, dt: float, emax: float, out: ContactOut,
                       geo: GeoBuffers, sdf: SDFBuffers, mm: MMBuffers):  # fmt: skip
    blk = wp.tid()
    if blk >= wp.min(mm.count[0], mm.pairs.shape[0]):
        return
    pr = mm.pairs[blk]
    a = pr[0]
    b = pr[1]
    ta = shape_type[a]
    tb = shape_type[b]
    ctx, limit = pair_ctx(a, b, shape_body, shape_margin, shape_gap, body_q, body_qd, body_com, spec, dt, emax)
    XA = shape_X[a]
    XB = shape_X[b]
    sA = shape_scale[a]
    sB = shape_scale[b]
    base = blk * MM_SLOTS_C
    for s in range(MM_SLOTS_C):
        key = mm.keys[base + s]
        if key < wp.int64(0):
            continue
        sub = int(_SUB_MASK - (key & _SUB_MASK))
        dup = bool(False)
        for s2 in range(s):
            k2 = mm.keys[base + s2]
            if k2 >= wp.int64(0):
                if int(_SUB_MASK - (k2 & _SUB_MASK)) == sub:
                    dup = True
                    break
        if dup:
            continue
        kind = (sub >> 1) & 3
        idx = sub >> 3
        ok, pa, pb, n, ok1, pa1, pb1, n1 = mm_feature(kind, idx, a, b, ta, tb, XA, sA, XB, sB, limit, geo, sdf, mm)
        if (sub & 1) != 0:
            ok = ok1
            pa = pa1
            pb = pb1
            n = n1
        if ok != 0:
            write_contact(ctx, out, pa, pb, n, 0.0, 0.0, sub)


# ------------------------------------------------------------------------------------ host side


def _icosahedron_face_normals() -> np.ndarray:
    p = (1.0 + 5.0**0.5) / 2.0
    v = np.array([[-1, p, 0], [1, p, 0], [-1, -p, 0], [1, -p, 0], [0, -1, p], [0, 1, p], [0, -1, -p], [0, 1, -p],
                  [p, 0, -1], [p, 0, 1], [-p, 0, -1], [-p, 0, 1]], np.float64)  # fmt: skip
    f = [(0, 11, 5), (0, 5, 1), (0, 1, 7), (0, 7, 10), (0, 10, 11), (1, 5, 9), (5, 11, 4), (11, 10, 2), (10, 7, 6),
         (7, 1, 8), (3, 9, 4), (3, 4, 2), (3, 2, 6), (3, 6, 8), (3, 8, 9), (4, 9, 5), (2, 4, 11), (6, 2, 10),
         (8, 6, 7), (9, 8, 1)]  # fmt: skip
    n = np.array([v[a] + v[b] + v[c] for a, b, c in f])
    return n / np.linalg.norm(n, axis=1, keepdims=True)


def mesh_edges(src) -> np.ndarray:
    """Edges used as features of a mesh: ``src.sdf_edges`` when present, else the feature edges
    (boundary edges and edges between non-coplanar faces), ``(E, 2)`` int32."""
    e = getattr(src, "sdf_edges", None)
    if e is not None:
        return np.asarray(e, np.int32).reshape(-1, 2)
    v = np.asarray(src.vertices, np.float64).reshape(-1, 3)
    f = np.asarray(src.indices, np.int64).reshape(-1, 3)
    if not len(f):
        return np.zeros((0, 2), np.int32)
    nt = np.cross(v[f[:, 1]] - v[f[:, 0]], v[f[:, 2]] - v[f[:, 0]])
    nt /= np.maximum(np.linalg.norm(nt, axis=1, keepdims=True), 1e-30)
    e = np.concatenate([f[:, [0, 1]], f[:, [1, 2]], f[:, [2, 0]]])
    tri = np.tile(np.arange(len(f)), 3)
    key = np.sort(e, axis=1)
    order = np.lexsort((key[:, 1], key[:, 0]))
    key, tri = key[order], tri[order]
    uniq, start, counts = np.unique(key, axis=0, return_index=True, return_counts=True)
    keep = counts != 2
    two = np.nonzero(counts == 2)[0]
    t0, t1 = tri[start[two]], tri[start[two] + 1]
    keep[two] = np.einsum("ij,ij->i", nt[t0], nt[t1]) < FLAT_EDGE_COS
    return uniq[keep].astype(np.int32)


#: route primitives carrying an SDF against meshes through the mesh's vertices / edges vs the SDF.
#: Off by default: with vertex / edge features only, a small primitive resting inside one large
#: mesh face touches no mesh feature and gets no contact (mesh *triangles* vs the SDF would be
#: needed); the per-triangle BVH route of the narrow phase handles these pairs exactly.
ENABLE_PRIMITIVE_SDF_ROUTE = False


def prim_sdf_flags(model, types) -> np.ndarray:
    """Per shape 1 where a primitive carries an SDF (ShapeConfig SDF parameters) and the model has
    MESH shapes (the primitive-vs-SDF route; all 0 unless :data:`ENABLE_PRIMITIVE_SDF_ROUTE`)."""
    n = len(types)
    flags = np.zeros(max(n, 1), np.int32)
    if not ENABLE_PRIMITIVE_SDF_ROUTE or not np.any(types == int(GeoType.MESH)):
        return flags
    res = getattr(model, "shape_sdf_max_resolution", None) or []
    vox = getattr(model, "shape_sdf_target_voxel_size", None) or []
    for s in range(n):
        t = int(types[s])
        if t in (int(GeoType.MESH), int(GeoType.HFIELD), int(GeoType.PLANE)):
            continue
        if (s < len(res) and res[s] is not None) or (s < len(vox) and vox[s] is not None):
            try:
                flags[s] = int(shape_sdf(model, s) is not None)
            except ImportError:  # SDF generation not available: keep the analytic / GJK route
                cache = getattr(model, "_armillary_shape_sdfs", None)
                if cache is not None:
                    cache[s] = None
    return flags


def routed_pair_mask(pairs_np, types, prim) -> np.ndarray:
    """Which host-known pairs go through this module."""
    if not len(pairs_np):
        return np.zeros(0, bool)
    ta, tb = types[pairs_np[:, 0]], types[pairs_np[:, 1]]
    M, H = int(GeoType.MESH), int(GeoType.HFIELD)
    pa, pb = prim[pairs_np[:, 0]] != 0, prim[pairs_np[:, 1]] != 0
    return ((ta == M) & (tb == M)) | ((ta == H) & (tb == M)) | ((ta == M) & (tb == H)) | ((ta == M) & pb) | (
        (tb == M) & pa)  # fmt: skip


class MeshMeshRoute:
    """Buffers and launches of the mesh-mesh / heightfield-mesh / primitive-SDF-mesh routes of a
    :class:`.CollisionPipeline` (built only when the model has such pairs)."""

    def __init__(self, model, types, prim, blocks: int, reduce: bool, device):
        n = int(model.shape_count)
        m = max(n, 1)
        self.blocks = max(int(blocks), 1)
        self.reduce = bool(reduce)
        estart = np.zeros(m, np.int32)
        ecount = np.zeros(m, np.int32)
        blo = np.zeros((m, 3), np.float32)
        bhi = np.zeros((m, 3), np.float32)
        band = np.full(m, -1.0e30, np.float32)
        chunks, total, seen = [], 0, {}
        for s in range(n):
            src = model.shape_source[s] if s < len(model.shape_source) else None
            if int(types[s]) == int(GeoType.MESH):
                key = id(src)
                if key not in seen:
                    e = mesh_edges(src)
                    seen[key] = (total, len(e))
                    chunks.append(e)
                    total += len(e)
                estart[s], ecount[s] = seen[key]
                v = np.asarray(src.vertices, np.float32).reshape(-1, 3)
                if len(v):
                    blo[s], bhi[s] = v.min(0), v.max(0)
            sd = shape_sdf(model, s) if (int(types[s]) == int(GeoType.MESH) or prim[s]) else None
            if sd is not None:
                band[s] = float(sd.narrow_band_range[0]) + 1.0e-6
        self.sdf = build_sdf_buffers(model)
        bn = _icosahedron_face_normals()
        bu = np.zeros_like(bn)
        for k, x in enumerate(bn):
            t = np.array([1.0, 0.0, 0.0]) if abs(x[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
            u = t - x * (t @ x)
            bu[k] = u / np.linalg.norm(u)
        bv = np.cross(bn, bu)
        with wp.ScopedDevice(device):
            b = MMBuffers()
            b.edges = wp.array(np.concatenate(chunks) if chunks else np.zeros((1, 2), np.int32), dtype=wp.vec2i)
            b.estart = wp.array(estart, dtype=int)
            b.ecount = wp.array(ecount, dtype=int)
            b.blo = wp.array(blo, dtype=wp.vec3)
            b.bhi = wp.array(bhi, dtype=wp.vec3)
            b.band_in = wp.array(band, dtype=float)
            b.prim_sdf = wp.array(np.asarray(prim, np.int32).reshape(-1)[:m], dtype=int)
            b.bin_n = wp.array(bn.astype(np.float32), dtype=wp.vec3)
            b.bin_u = wp.array(bu.astype(np.float32), dtype=wp.vec3)
            b.bin_v = wp.array(bv.astype(np.float32), dtype=wp.vec3)
            b.pairs = wp.zeros(self.blocks, dtype=wp.vec2i)
            b.count = wp.zeros(1, dtype=int)
            b.keys = wp.zeros(self.blocks * MM_SLOTS if self.reduce else 0, dtype=wp.int64)
        self.buffers = b
        self.device = device

    def launch(self, candidates, cand_count, model, shape_X, body_q, body_qd, body_com, spec, dt, emax, out,
               geo, claim_dim):  # fmt: skip
        dev = self.device
        b = self.buffers
        b.count.zero_()
        wp.launch(mm_claim_kernel, dim=claim_dim, inputs=[candidates, cand_count, model.shape_type, b, claim_dim],
                  device=dev, record_tape=False)  # fmt: skip
        common = [model.shape_type, model.shape_body, shape_X, model.shape_scale, model.shape_margin, model.shape_gap,
                  body_q, body_qd, body_com, spec, dt, emax, out, geo, self.sdf, b]  # fmt: skip
        wp.launch(mm_feature_kernel, dim=self.blocks * THREADS_PER_PAIR, inputs=common + [THREADS_PER_PAIR],
                  device=dev, record_tape=False)  # fmt: skip
        if self.reduce:
            wp.launch(mm_finalize_kernel, dim=self.blocks, inputs=common, device=dev, record_tape=False)

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
* a vertex gives a contact at the vertex; an edge (skipped when its end values prove it out of
  range, ``(d0 + d1 - L) / 2 > limit``, or wholly inside; sampled only when ``d`` decreases at
  its first end and increases at its second, or is flat at both: otherwise its minimum is an end
  vertex, reported by that vertex) gives a contact at the minimum of ``d`` along
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

Feature enumeration: only the overlap region is visited. Per side, the other shape's scaled
local bounds grown by the detection limit are mapped into the source MESH's unscaled frame and
clipped to its bounds; the box is cut into ``THREADS_PER_PAIR`` slabs along its longest axis and
each lane queries the source's own BVH (``wp.mesh_query_aabb``) with its slab, taking the
triangles whose lowest point along the axis falls in it. A triangle emits the features it *owns*
(precomputed: the vertices and route edges whose lowest-index adjacent triangle it is), so every
feature is visited once; features on no triangle are scanned separately. Heightfield grid points
keep their grid window. Each side's per-shape constants (transforms, bounds, SDF grid
parameters) are set up once per block in a small :class:`Side` struct; distances are evaluated
in the other shape's local frame and converted to world once per contact.

Vertex normal rule (MESH against MESH): a vertex inside or on the other mesh whose distance
normal does not oppose its own outward normal (angle-weighted, precomputed) takes the closest
face of the other mesh that does (BVH, within 0.1 x the other's box diagonal): e.g. the corner
of a box stacked exactly aligned on an equal box lies on the lower box's side faces, and gets the
top face's normal and depth instead of a lateral zero-depth contact.

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
from .mesh_collision import FLAT_EDGE_COS, GeoBuffers, local_aabb, point_triangle_signed
from .narrow_phase import ContactOut, PairCtx, admit, mm_routed, ordered_pair, pair_ctx, shape_body_xform, write_contact
from .sdf import SDFBuffers, build_sdf_buffers, sdf_has, sdf_query, shape_sdf, trilinear_grad

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
    tri_v: wp.array(dtype=wp.vec3i)  # per triangle: the vertices it owns (-1: none)
    tri_e: wp.array(dtype=wp.vec3i)  # per triangle: the route edges it owns (-1: none)
    tstart: wp.array(dtype=int)  # per shape: first entry in tri_v / tri_e
    orph: wp.array(dtype=wp.vec2i)  # features owned by no triangle: (0 vertex / 1 edge, index)
    ostart: wp.array(dtype=int)
    ocount: wp.array(dtype=int)
    vnorm: wp.array(dtype=wp.vec3)  # per vertex: unscaled outward (angle-weighted) normal
    vstart: wp.array(dtype=int)
    bin_n: wp.array(dtype=wp.vec3)
    bin_u: wp.array(dtype=wp.vec3)  # per bin: the 8 in-plane directions (45 degrees apart)
    pairs: wp.array(dtype=wp.vec2i)  # per block: ordered (a, b)
    count: wp.array(dtype=int)  # blocks claimed this launch
    keys: wp.array(dtype=wp.int64)  # blocks * MM_SLOTS (empty: unreduced)


@wp.struct
class Side:
    """One side of a pair, set up once per block: the source shape ``s`` whose features are
    queried against the other shape ``o``. Distances are evaluated in ``o``'s local (scaled) frame;
    the struct holds the few arrays and per-shape constants the hot path needs (no big buffer
    structs are passed down)."""

    side: int  # 0: features of A, 1: of B
    s: int
    ts: int
    o: int
    to: int
    Xo: wp.transform  # other local (scaled) -> world
    Xso: wp.transform  # source local (scaled) -> other local
    ss: wp.vec3
    so: wp.vec3
    smesh: wp.uint64
    omesh: wp.uint64
    olo: wp.vec3  # other's scaled local bounds (MESH)
    ohi: wp.vec3
    odiag: float
    osmin: float
    oflip: int
    # the other shape's SDF
    osdf: int
    sbase: int
    sdims: wp.vec3i
    slo: wp.vec3
    shi: wp.vec3
    sh: float
    sqs: wp.vec3
    sdscale: float
    smargin: float
    sband: float
    svals: wp.array(dtype=float)
    # heightfields (source / other)
    hf: wp.array(dtype=float)
    hs_base: int
    hs_dims: wp.vec4
    ho_base: int
    ho_dims: wp.vec4
    # source edges and vertex normals
    edges: wp.array(dtype=wp.vec2i)
    estart: int
    vnorm: wp.array(dtype=wp.vec3)
    vstart: int


@wp.func
def make_side(side: int, a: int, b: int, ta: int, tb: int, XA: wp.transform, sA: wp.vec3, XB: wp.transform,
              sB: wp.vec3, geo: GeoBuffers, sdf: SDFBuffers, mm: MMBuffers):  # fmt: skip
    sd = Side()
    sd.side = side
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
    sd.s = s
    sd.ts = ts
    sd.o = o
    sd.to = to
    sd.Xo = Xo
    sd.Xso = wp.transform_inverse(Xo) * Xs
    sd.ss = ss
    sd.so = so
    sd.smesh = wp.uint64(0)
    sd.omesh = wp.uint64(0)
    if ts == MESH:
        sd.smesh = geo.mesh_id[s]
    b0 = wp.cw_mul(mm.blo[o], so)
    b1 = wp.cw_mul(mm.bhi[o], so)
    sd.olo = wp.min(b0, b1)
    sd.ohi = wp.max(b0, b1)
    sd.odiag = wp.length(sd.ohi - sd.olo)
    sd.osmin = wp.min(wp.abs(so[0]), wp.min(wp.abs(so[1]), wp.abs(so[2])))
    sd.oflip = int(0)
    if so[0] * so[1] * so[2] < 0.0:
        sd.oflip = 1
    if to == MESH:
        sd.omesh = geo.mesh_id[o]
    sd.osdf = int(0)
    sd.svals = sdf.values
    if sdf_has(sdf, o):
        sd.osdf = 1
        sd.sbase = sdf.start[o]
        dm = sdf.dims[o]
        sd.sdims = dm
        sd.slo = sdf.lower[o]
        sd.sh = sdf.voxel[o]
        sd.shi = sd.slo + sd.sh * wp.vec3(float(dm[0] - 1), float(dm[1] - 1), float(dm[2] - 1))
        sd.sqs = sdf.qscale[o]
        sd.sdscale = sdf.dscale[o]
        sd.smargin = sdf.margin[o]
        sd.sband = mm.band_in[o]
    sd.hf = geo.hf_data
    if ts == HFIELD:
        sd.hs_base = geo.hf_start[s]
        sd.hs_dims = geo.hf_dims[s]
    if to == HFIELD:
        sd.ho_base = geo.hf_start[o]
        sd.ho_dims = geo.hf_dims[o]
    sd.edges = mm.edges
    sd.estart = mm.estart[s]
    sd.vnorm = mm.vnorm
    sd.vstart = mm.vstart[s]
    return sd


# ------------------------------------------------------------------------------------ distances


@wp.func
def hfp(hf: wp.array(dtype=float), base: int, dims: wp.vec4, sc: wp.vec3, i: int, j: int):
    """Heightfield grid point (i, j) in the heightfield's scaled local frame."""
    ncol = int(dims[1])
    nrow = int(dims[0])
    dx = 2.0 * dims[2] / float(ncol - 1)
    dy = 2.0 * dims[3] / float(nrow - 1)
    z = hf[base + i * ncol + j]
    return wp.vec3((-dims[2] + float(j) * dx) * sc[0], (-dims[3] + float(i) * dy) * sc[1], z * sc[2])


@wp.func
def side_sdf(sd: Side, p: wp.vec3):
    """The other shape's SDF at its local (scaled) point ``p``: distance and outward unit normal
    (same rule as :func:`.sdf.sdf_query`: trilinear interpolant and its gradient, extension by the
    distance to the grid box outside it), from the constants cached in ``sd``."""
    g = wp.cw_mul(p, sd.sqs)
    c = wp.min(wp.max(g, sd.slo), sd.shi)
    outside = g - c
    dout = wp.length(outside)
    u = (c - sd.slo) / sd.sh
    nx = sd.sdims[0]
    ny = sd.sdims[1]
    i = wp.min(wp.max(int(wp.floor(u[0])), 0), nx - 2)
    j = wp.min(wp.max(int(wp.floor(u[1])), 0), ny - 2)
    k = wp.min(wp.max(int(wp.floor(u[2])), 0), sd.sdims[2] - 2)
    fx = u[0] - float(i)
    fy = u[1] - float(j)
    fz = u[2] - float(k)
    r0 = sd.sbase + i + nx * (j + ny * k)
    r1 = r0 + nx
    r2 = r0 + nx * ny
    r3 = r2 + nx
    v = sd.svals
    c000 = v[r0]
    c100 = v[r0 + 1]
    c010 = v[r1]
    c110 = v[r1 + 1]
    c001 = v[r2]
    c101 = v[r2 + 1]
    c011 = v[r3]
    c111 = v[r3 + 1]
    d, gcell = trilinear_grad(c000, c100, c010, c110, c001, c101, c011, c111, fx, fy, fz)
    grad = wp.cw_mul(gcell, sd.sqs)
    gl = wp.length(grad)
    if gl > 1.0e-12:
        grad = grad / gl
    else:
        grad = wp.vec3(0.0, 0.0, 1.0)
    if dout > 0.0:
        dirn = wp.cw_div(outside, sd.sqs)
        dl = wp.length(dirn)
        if dl > 0.0:
            dirn = dirn / dl
        w = wp.min(dout / sd.sh, 1.0)
        grad = wp.normalize((1.0 - w) * grad + w * dirn + wp.vec3(1.0e-12))
        d = d + dout
    return d * sd.sdscale - sd.smargin, grad


@wp.func
def oth_tri(sd: Side, pts: wp.array(dtype=wp.vec3), ind: wp.array(dtype=int), f: int):
    """Triangle ``f`` of the other MESH in its scaled frame (CCW outward, mirrored scales fixed)."""
    p0 = wp.cw_mul(pts[ind[3 * f]], sd.so)
    p1 = wp.cw_mul(pts[ind[3 * f + 1]], sd.so)
    p2 = wp.cw_mul(pts[ind[3 * f + 2]], sd.so)
    if sd.oflip != 0:
        tmp = p1
        p1 = p2
        p2 = tmp
    return p0, p1, p2


@wp.func
def mesh_dist(sd: Side, lp: wp.vec3, rng: float):
    """BVH signed distance of the other-local (scaled) point ``lp`` to the other MESH within
    ``rng`` (any depth for points inside the mesh box). Returns (found, d, local normal)."""
    c = wp.min(wp.max(lp, sd.olo), sd.ohi)
    db = wp.length(lp - c)
    if db > rng:
        return int(0), float(0.0), wp.vec3(0.0)
    maxd = rng
    if db == 0.0:
        maxd = wp.max(rng, sd.odiag)
    lpu = wp.cw_div(lp, sd.so)
    q = wp.mesh_query_point_sign_normal(sd.omesh, lpu, maxd / sd.osmin * 1.001 + 1.0e-6)
    if not q.result:
        return int(0), float(0.0), wp.vec3(0.0)
    mesh = wp.mesh_get(sd.omesh)
    p0, p1, p2 = oth_tri(sd, mesh.points, mesh.indices, q.face)
    d, cl, n = point_triangle_signed(lp, p0, p1, p2)
    inside = q.sign < 0.0
    if inside != (d < 0.0) and d != 0.0:
        d = -d
        n = -n
    if d > rng:
        return int(0), d, n
    return int(1), d, n


@wp.func
def mesh_opposed(sd: Side, lp: wp.vec3, nv: wp.vec3, rad: float):
    """Closest face of the other MESH within ``rad`` of ``lp`` among the faces whose outward normal
    opposes ``nv`` (the source vertex's outward normal) and that ``lp`` lies behind or on.
    Returns (found, d, local normal)."""
    r = wp.vec3(rad / sd.osmin)
    lpu = wp.cw_div(lp, sd.so)
    mesh = wp.mesh_get(sd.omesh)
    q = wp.mesh_query_aabb(sd.omesh, lpu - r, lpu + r)
    f = int(0)
    found = int(0)
    bd = float(0.0)
    bn = wp.vec3(0.0)
    while wp.mesh_query_aabb_next(q, f):
        p0, p1, p2 = oth_tri(sd, mesh.points, mesh.indices, f)
        nf = wp.cross(p1 - p0, p2 - p0)
        if wp.dot(nf, nv) >= -1.0e-3 * wp.length(nf):
            continue
        d, cl, n = point_triangle_signed(lp, p0, p1, p2)
        if d > 1.0e-6 or -d > rad:
            continue
        if found == 0 or -d < -bd:
            found = 1
            bd = d
            bn = n
    return found, bd, bn


@wp.func
def hf_dist(sd: Side, lp: wp.vec3):
    """Signed distance of ``lp`` (heightfield-local, scaled) to the plane of the grid triangle
    under it (solid below). Returns (found, d, local normal); not found outside the grid."""
    dims = sd.ho_dims
    sH = sd.so
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
    a = hfp(sd.hf, sd.ho_base, dims, sH, i, j)
    c = hfp(sd.hf, sd.ho_base, dims, sH, i + 1, j + 1)
    n = wp.vec3(0.0, 0.0, 1.0)
    if fx >= fy:
        n = wp.cross(hfp(sd.hf, sd.ho_base, dims, sH, i, j + 1) - a, c - a)
    else:
        n = wp.cross(c - a, hfp(sd.hf, sd.ho_base, dims, sH, i + 1, j) - a)
    n = wp.normalize(n)
    if n[2] < 0.0:
        n = -n
    return int(1), wp.dot(lp - a, n), n


@wp.func
def other_dist(sd: Side, lp: wp.vec3, rng: float):
    """Signed distance of the other-local (scaled) point ``lp`` to the other shape (SDF, BVH or
    heightfield). Returns (found, d, local outward normal); found = 0 when beyond ``rng``."""
    found = int(0)
    d = float(0.0)
    nl = wp.vec3(0.0, 0.0, 1.0)
    if sd.osdf != 0:
        d, nl = side_sdf(sd, lp)
        found = int(1)
        if sd.to == MESH:
            # BVH fallback below the narrow band (stored values there are clamped); outside the grid
            # box the SDF's extension (value at the clamped point + distance to the box) is an
            # upper bound of the true distance, used as is: every query stays O(1)
            if d < sd.sband:
                found, d, nl = mesh_dist(sd, lp, rng)
                d = d - sd.smargin
        if d > rng:
            found = 0
    elif sd.to == MESH:
        found, d, nl = mesh_dist(sd, lp, rng)
    elif sd.to == HFIELD:
        found, d, nl = hf_dist(sd, lp)
        if d > rng:
            found = 0
    return found, d, nl


@wp.func
def dist_or_big(sd: Side, p: wp.vec3, rng: float):
    f, d, n = other_dist(sd, p, rng)
    if f == 0:
        return _BIG
    return d


@wp.func
def edge_min(sd: Side, p0: wp.vec3, p1: wp.vec3, rng: float):
    """Edge contacts from the other shape's distance ``d(t)`` along segment p0 p1 (other-local
    frame, within ``rng``).

    The end values first: ``d`` is 1-Lipschitz, so an end beyond ``rng + L`` or
    ``(d0 + d1 - L) / 2 > rng`` proves the whole edge out of range, and an end deeper than ``L``
    the whole edge inside (its vertices carry it). A single-sample minimum strictly inside the edge
    and below both endpoint values gives one contact at the golden-section minimum. A plateau
    (several samples within ``tol`` of the minimum: an edge lying on a face) gives a contact at
    each plateau end strictly inside the edge (bisection), e.g. where the edge crosses the other
    shape's boundary edge: the corners of the support polygon.
    Returns (found0, point0, d0, normal0, found1, point1, d1, normal1)."""
    z = wp.vec3(0.0)
    e = p1 - p0
    L = wp.length(e)
    if L < 1.0e-9:
        return int(0), p0, float(0.0), z, int(0), p0, float(0.0), z
    big_rng = rng + L
    fe0, de0, ne0 = other_dist(sd, p0, big_rng)
    if fe0 == 0 or de0 < -L:
        return int(0), p0, float(0.0), z, int(0), p0, float(0.0), z
    fe1, de1, ne1 = other_dist(sd, p1, big_rng)
    if fe1 == 0 or de1 < -L or 0.5 * (de0 + de1 - L) > rng:
        return int(0), p0, float(0.0), z, int(0), p0, float(0.0), z
    # slope test at the ends: an interior minimum needs d decreasing at p0 and increasing at p1; a
    # plateau (edge lying on a face) has both slopes ~0. Otherwise the minimum is at an end vertex,
    # which its own vertex feature reports: skip the sampling (most edges of a contact patch)
    s0 = wp.dot(ne0, e)
    s1 = wp.dot(ne1, e)
    flat = 1.0e-3 * L
    if s0 > flat or s1 < -flat:
        return int(0), p0, float(0.0), z, int(0), p0, float(0.0), z
    h = 1.0 / float(EDGE_SAMPLES)
    S = wp.vector(dtype=float, length=9)
    S[0] = de0
    S[EDGE_SAMPLES] = de1
    best_k = int(0)
    for k in range(1, EDGE_SAMPLES):
        S[k] = dist_or_big(sd, p0 + (float(k) * h) * e, big_rng)
        if S[k] < S[best_k]:
            best_k = k
    if S[EDGE_SAMPLES] < S[best_k]:
        best_k = EDGE_SAMPLES
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
                if dist_or_big(sd, p0 + tm * e, big_rng) <= best + tol:
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
                if dist_or_big(sd, p0 + tm * e, big_rng) <= best + tol:
                    tin = tm
                else:
                    tout = tm
            q1 = p0 + tin * e
            found1 = 1
        if found0 == 0 and found1 == 0:
            return int(0), p0, float(0.0), z, int(0), p0, float(0.0), z
        # the plateau's distance and normal (the face the edge lies on), at the plateau ends
        fb, db, nb = other_dist(sd, p0 + (float(best_k) * h) * e, big_rng)
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
    f1 = dist_or_big(sd, p0 + x1 * e, big_rng)
    f2 = dist_or_big(sd, p0 + x2 * e, big_rng)
    for it in range(GOLDEN_STEPS):
        if f1 <= f2:
            hi = x2
            x2 = x1
            f2 = f1
            x1 = hi - gr * (hi - lo)
            f1 = dist_or_big(sd, p0 + x1 * e, big_rng)
        else:
            lo = x1
            x1 = x2
            f1 = f2
            x2 = lo + gr * (hi - lo)
            f2 = dist_or_big(sd, p0 + x2 * e, big_rng)
    t = x1
    if f2 < f1:
        t = x2
    if best < wp.min(f1, f2):
        t = float(best_k) * h
    p = p0 + t * e
    f, d, n = other_dist(sd, p, big_rng)
    if f == 0 or d > rng or d >= wp.min(S[0], S[EDGE_SAMPLES]) - 1.0e-6 - 1.0e-5 * L:
        return int(0), p0, float(0.0), z, int(0), p0, float(0.0), z
    return int(1), p, d, n, int(0), p0, float(0.0), z


# ------------------------------------------------------------------------------------ features


@wp.func
def in_box(lp: wp.vec3, lo: wp.vec3, hi: wp.vec3):
    return lp[0] >= lo[0] and lp[1] >= lo[1] and lp[2] >= lo[2] and lp[0] <= hi[0] and lp[1] <= hi[1] and (
        lp[2] <= hi[2])


@wp.func
def src_vertex(sd: Side, pts: wp.array(dtype=wp.vec3), k: int):
    """Source MESH vertex ``k`` in the other shape's local frame."""
    return wp.transform_point(sd.Xso, wp.cw_mul(pts[k], sd.ss))


@wp.func(inline=False)
def mm_feature(sd: Side, kl: int, idx: int, limit: float):
    """Contacts of the source feature (``kl`` 0: vertex / grid point, 1: edge; see the module
    docstring): (ok, pa, pb, n) in world coordinates for end 0 and for end 1 (edge plateaus only).

    A MESH feature against a MESH is first culled against the other's scaled local bounds grown
    by the detection ``limit`` (a vertex by its point, an edge by its segment box)."""
    found = int(0)
    d = float(0.0)
    nl = wp.vec3(0.0)
    p = wp.vec3(0.0)
    found1 = int(0)
    d1 = float(0.0)
    nl1 = wp.vec3(0.0)
    p1 = wp.vec3(0.0)
    z = wp.vec3(0.0)
    glo = sd.olo - wp.vec3(limit)
    ghi = sd.ohi + wp.vec3(limit)
    cull = sd.ts == MESH and sd.to == MESH
    if kl == 0:
        if sd.ts == HFIELD:
            ncol = int(sd.hs_dims[1])
            i = idx // ncol
            p = wp.transform_point(sd.Xso, hfp(sd.hf, sd.hs_base, sd.hs_dims, sd.ss, i, idx - i * ncol))
        else:
            p = src_vertex(sd, wp.mesh_get(sd.smesh).points, idx)
            if cull and not in_box(p, glo, ghi):
                return int(0), z, z, z, int(0), z, z, z
        found, d, nl = other_dist(sd, p, limit)
        if found != 0 and sd.ts == MESH and sd.to == MESH and d <= 1.0e-6:
            # a vertex inside / on the other mesh whose distance normal does not oppose its own
            # outward normal (e.g. a box corner lying on the other box's side face): take the
            # closest face that does (the top face under a stacked box's corner)
            nv = wp.quat_rotate(wp.transform_get_rotation(sd.Xso), wp.cw_div(sd.vnorm[sd.vstart + idx], sd.ss))
            if wp.dot(nl, nv) > -1.0e-3 * wp.length(nv):
                fo, do, no = mesh_opposed(sd, p, nv, 0.1 * sd.odiag)
                if fo != 0:
                    d = do
                    nl = no
                    if sd.osdf != 0:
                        d = d - sd.smargin
    else:
        mesh = wp.mesh_get(sd.smesh)
        ev = sd.edges[sd.estart + idx]
        e0 = src_vertex(sd, mesh.points, ev[0])
        e1 = src_vertex(sd, mesh.points, ev[1])
        if cull and not (in_box(wp.max(e0, e1), glo, wp.vec3(1.0e30)) and in_box(wp.min(e0, e1), wp.vec3(-1.0e30),
                                                                                  ghi)):  # fmt: skip
            return int(0), z, z, z, int(0), z, z, z
        found, p, d, nl, found1, p1, d1, nl1 = edge_min(sd, e0, e1, limit)
    if found == 0 and found1 == 0:
        return int(0), z, z, z, int(0), z, z, z
    q = wp.transform_point(sd.Xo, p - d * nl)
    q1 = wp.transform_point(sd.Xo, p1 - d1 * nl1)
    pw = wp.transform_point(sd.Xo, p)
    pw1 = wp.transform_point(sd.Xo, p1)
    rot = wp.transform_get_rotation(sd.Xo)
    nw = wp.quat_rotate(rot, nl)
    nw1 = wp.quat_rotate(rot, nl1)
    if sd.side == 0:
        return found, pw, q, -nw, found1, pw1, q1, -nw1
    return found, q, pw, nw, found1, q1, pw1, nw1


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
def src_query_box(sd: Side, limit: float):
    """The other shape's scaled local bounds grown by ``limit``, as a box in the source MESH's
    unscaled local frame (the frame of its BVH); everything when the other shape is no MESH."""
    if sd.to != MESH:
        return wp.vec3(-1.0e30), wp.vec3(1.0e30)
    Xos = wp.transform_inverse(sd.Xso)
    glo = sd.olo - wp.vec3(limit)
    ghi = sd.ohi + wp.vec3(limit)
    lo = wp.vec3(1.0e30)
    hi = wp.vec3(-1.0e30)
    for k in range(8):
        c = glo
        if (k & 1) != 0:
            c[0] = ghi[0]
        if (k & 2) != 0:
            c[1] = ghi[1]
        if (k & 4) != 0:
            c[2] = ghi[2]
        w = wp.cw_div(wp.transform_point(Xos, c), sd.ss)
        lo = wp.min(lo, w)
        hi = wp.max(hi, w)
    pad = wp.vec3(1.0e-6 * wp.length(hi - lo) + 1.0e-9)
    return lo - pad, hi + pad


# ------------------------------------------------------------------------------------ reduction


@wp.func
def score_key(score: float, sub: int):
    q = wp.int64(wp.round(wp.clamp(score, -1.0e4, 1.0e4) * 1.0e7)) + _QOFF
    return (q << wp.int64(24)) | (_SUB_MASK - wp.int64(sub))


@wp.func
def reduce_insert(keys: wp.array(dtype=wp.int64), bin_n: wp.array(dtype=wp.vec3), bin_u: wp.array(dtype=wp.vec3),
                  blk: int, pa: wp.vec3, n: wp.vec3, d: float, sub: int):  # fmt: skip
    best = int(0)
    bd = wp.dot(n, bin_n[0])
    for k in range(1, MM_BINS_C):
        x = wp.dot(n, bin_n[k])
        if x > bd:
            bd = x
            best = k
    base = blk * MM_SLOTS_C + best * MM_SPB_C
    wp.atomic_max(keys, base, score_key(-d, sub))
    for j in range(MM_SPB_C - 1):
        wp.atomic_max(keys, base + 1 + j, score_key(wp.dot(pa, bin_u[best * (MM_SPB_C - 1) + j]), sub))


@wp.func
def emit_feature(ctx: PairCtx, out: ContactOut, mm: MMBuffers, blk: int, sd: Side, kl: int, idx: int, limit: float):
    """Contacts of one source feature: admitted ones go to the pair's reduction slots (or out)."""
    ok0, pa0, pb0, n0, ok1, pa1, pb1, n1 = mm_feature(sd, kl, idx, limit)
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
                sub = 8 * idx + 2 * (2 * sd.side + kl) + end
                if mm.keys.shape[0] > 0:
                    reduce_insert(mm.keys, mm.bin_n, mm.bin_u, blk, pa, n, d, sub)
                else:
                    write_contact(ctx, out, pa, pb, n, 0.0, 0.0, sub)


# ------------------------------------------------------------------------------------ kernels


@wp.func
def block_pair(mm: MMBuffers, blk: int, shape_type: wp.array(dtype=int), shape_X: wp.array(dtype=wp.transform),
               shape_scale: wp.array(dtype=wp.vec3)):  # fmt: skip
    """The ordered pair claimed by block ``blk``: (a, b, their types, world frames and scales)."""
    pr = mm.pairs[blk]
    a = pr[0]
    b = pr[1]
    return a, b, shape_type[a], shape_type[b], shape_X[a], shape_scale[a], shape_X[b], shape_scale[b]


@wp.kernel
def mm_claim_kernel(pairs: wp.array(dtype=wp.vec2i), pair_count: wp.array(dtype=int), shape_type: wp.array(dtype=int),
                    mm: MMBuffers, stride: int):  # fmt: skip
    tid = wp.tid()
    n_pairs = wp.min(pair_count[0], pairs.shape[0])
    i = tid
    while i < n_pairs:
        a, b, ta, tb = ordered_pair(pairs[i], shape_type)
        i += stride
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
    a, b, ta, tb, XA, sA, XB, sB = block_pair(mm, blk, shape_type, shape_X, shape_scale)
    ctx, limit = pair_ctx(a, b, shape_body, shape_margin, shape_gap, body_q, body_qd, body_com, spec, dt, emax)
    for side in range(2):
        sd = make_side(side, a, b, ta, tb, XA, sA, XB, sB, geo, sdf, mm)
        if sd.ts == HFIELD:
            # heightfield grid points under the mesh's box
            i0, i1, j0, j1 = hf_grid_range(geo, mm, a, XA, sA, b, XB, sB, limit)
            if side == 1:
                i0, i1, j0, j1 = hf_grid_range(geo, mm, b, XB, sB, a, XA, sA, limit)
            if i1 >= i0 and j1 >= j0:
                nj = j1 - j0 + 1
                ncol = int(sd.hs_dims[1])
                f = lane
                while f < (i1 - i0 + 1) * nj:
                    r = f / nj
                    emit_feature(ctx, out, mm, blk, sd, 0, (i0 + r) * ncol + j0 + f - r * nj, limit)
                    f += threads
        elif sd.ts == MESH:
            # the source triangles overlapping the other shape's grown box (own BVH, unscaled
            # frame), cut into `threads` slabs along its longest axis: each lane queries its slab
            # and takes the triangles whose lowest point along the axis (clamped to the box) falls
            # in it, so each triangle is taken once; it emits the vertices and edges it owns
            lo, hi = src_query_box(sd, limit)
            lo = wp.max(lo, mm.blo[sd.s])
            hi = wp.min(hi, mm.bhi[sd.s])
            if lo[0] <= hi[0] and lo[1] <= hi[1] and lo[2] <= hi[2]:
                ext = hi - lo
                ax = int(0)
                if ext[1] > ext[ax]:
                    ax = 1
                if ext[2] > ext[ax]:
                    ax = 2
                w = ext[ax] / float(threads)
                slo = lo
                shi = hi
                slo[ax] = lo[ax] + float(lane) * w - 1.0e-3 * w
                if lane < threads - 1:
                    shi[ax] = lo[ax] + float(lane + 1) * w + 1.0e-3 * w
                mesh = wp.mesh_get(sd.smesh)
                q = wp.mesh_query_aabb(sd.smesh, slo, shi)
                t = int(0)
                tb0 = mm.tstart[sd.s]
                while wp.mesh_query_aabb_next(q, t):
                    tmin = wp.min(mesh.points[mesh.indices[3 * t]][ax], wp.min(mesh.points[mesh.indices[3 * t + 1]][ax],
                                                                             mesh.points[mesh.indices[3 * t + 2]][ax]))  # fmt: skip
                    own = threads - 1
                    if w > 0.0:
                        own = wp.min(int((wp.max(tmin, lo[ax]) - lo[ax]) / w), threads - 1)
                    if own != lane:
                        continue
                    ov = mm.tri_v[tb0 + t]
                    oe = mm.tri_e[tb0 + t]
                    for j in range(6):
                        kl = j / 3
                        idx = ov[j % 3]
                        if kl == 1:
                            idx = oe[j - 3]
                        if idx >= 0:
                            emit_feature(ctx, out, mm, blk, sd, kl, idx, limit)
            # features owned by no triangle (isolated vertices, edges not on a triangle)
            o0 = mm.ostart[sd.s]
            f = lane
            while f < mm.ocount[sd.s]:
                ft = mm.orph[o0 + f]
                emit_feature(ctx, out, mm, blk, sd, ft[0], ft[1], limit)
                f += threads


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
    a, b, ta, tb, XA, sA, XB, sB = block_pair(mm, blk, shape_type, shape_X, shape_scale)
    ctx, limit = pair_ctx(a, b, shape_body, shape_margin, shape_gap, body_q, body_qd, body_com, spec, dt, emax)
    base = blk * MM_SLOTS_C
    sd0 = make_side(0, a, b, ta, tb, XA, sA, XB, sB, geo, sdf, mm)
    sd1 = make_side(1, a, b, ta, tb, XA, sA, XB, sB, geo, sdf, mm)
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
        ok = int(0)
        pa = wp.vec3(0.0)
        pb = wp.vec3(0.0)
        n = wp.vec3(0.0)
        ok1 = int(0)
        pa1 = wp.vec3(0.0)
        pb1 = wp.vec3(0.0)
        n1 = wp.vec3(0.0)
        if kind < 2:
            ok, pa, pb, n, ok1, pa1, pb1, n1 = mm_feature(sd0, kind & 1, sub >> 3, limit)
        else:
            ok, pa, pb, n, ok1, pa1, pb1, n1 = mm_feature(sd1, kind & 1, sub >> 3, limit)
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


def feature_ownership(src, edges: np.ndarray):
    """Per triangle, the features it *owns* (its lowest-index adjacent triangle): ``tri_v``
    ``(T, 3)`` vertex indices and ``tri_e`` ``(T, 3)`` indices into ``edges`` (-1: not owned),
    plus the features owned by no triangle, ``(K, 2)`` rows ``(0 vertex / 1 edge, index)``.
    Every feature is owned exactly once, so a triangle query visits each feature once."""
    v = np.asarray(src.vertices, np.float64).reshape(-1, 3)
    f = np.asarray(src.indices, np.int64).reshape(-1, 3)
    nv, nt = len(v), len(f)
    tri_v = np.full((max(nt, 1), 3), -1, np.int32)
    tri_e = np.full((max(nt, 1), 3), -1, np.int32)
    if nt:
        owner = np.full(nv, nt, np.int64)
        np.minimum.at(owner, f.reshape(-1), np.repeat(np.arange(nt), 3))
        for k in range(3):
            own = owner[f[:, k]] == np.arange(nt)
            for j in range(k):  # a vertex repeated in a degenerate triangle: once
                own &= f[:, k] != f[:, j]
            tri_v[:nt, k] = np.where(own, f[:, k], -1)
    orph = [(0, int(i)) for i in np.nonzero(np.bincount(f.reshape(-1), minlength=nv) == 0)[0]] if nv else []
    if len(edges):
        # triangle sides (t, k): side k joins corners k and k + 1; the lowest t per undirected edge
        ks = np.sort(np.stack([f, np.roll(f, -1, axis=1)], -1).reshape(-1, 2), axis=1) if nt else np.zeros((0, 2))
        side_id = np.arange(len(ks))
        key_s = ks[:, 0] * (nv + 1) + ks[:, 1]
        order = np.lexsort((side_id, key_s))
        key_s, side_id = key_s[order], side_id[order]
        first = np.ones(len(key_s), bool)
        first[1:] = key_s[1:] != key_s[:-1]
        key_s, side_id = key_s[first], side_id[first]
        ee = np.sort(np.asarray(edges, np.int64).reshape(-1, 2), axis=1)
        key_e = ee[:, 0] * (nv + 1) + ee[:, 1]
        pos = np.searchsorted(key_s, key_e)
        hit = (pos < len(key_s)) & (key_s[np.minimum(pos, max(len(key_s) - 1, 0))] == key_e) if len(key_s) else (
            np.zeros(len(ee), bool))  # fmt: skip
        for i in range(len(ee)):
            if hit[i]:
                sid = int(side_id[pos[i]])
                t, k = sid // 3, sid % 3
                if tri_e[t, k] < 0:
                    tri_e[t, k] = i
                    continue
            orph.append((1, i))
    return tri_v, tri_e, np.asarray(orph, np.int32).reshape(-1, 2)


def vertex_normals(src) -> np.ndarray:
    """Per vertex outward normal ``(V, 3)``: the angle-weighted sum of the adjacent face normals,
    vertices at the same position welded (a box with split corners still gets the corner
    diagonal)."""
    v = np.asarray(src.vertices, np.float64).reshape(-1, 3)
    f = np.asarray(src.indices, np.int64).reshape(-1, 3)
    out = np.zeros((max(len(v), 1), 3), np.float64)
    if not len(f) or not len(v):
        return out.astype(np.float32)
    nt = np.cross(v[f[:, 1]] - v[f[:, 0]], v[f[:, 2]] - v[f[:, 0]])
    nt /= np.maximum(np.linalg.norm(nt, axis=1, keepdims=True), 1e-30)
    _, weld = np.unique(v, axis=0, return_inverse=True)
    weld = weld.reshape(-1)
    acc = np.zeros((weld.max() + 1, 3))
    for k in range(3):
        e1 = v[f[:, (k + 1) % 3]] - v[f[:, k]]
        e2 = v[f[:, (k + 2) % 3]] - v[f[:, k]]
        c = np.einsum("ij,ij->i", e1, e2) / np.maximum(np.linalg.norm(e1, axis=1) * np.linalg.norm(e2, axis=1), 1e-30)
        np.add.at(acc, weld[f[:, k]], nt * np.arccos(np.clip(c, -1.0, 1.0))[:, None])
    acc /= np.maximum(np.linalg.norm(acc, axis=1, keepdims=True), 1e-30)
    out[: len(v)] = acc[weld]
    return out.astype(np.float32)


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
        tstart = np.zeros(m, np.int32)
        ostart = np.zeros(m, np.int32)
        ocount = np.zeros(m, np.int32)
        vstart = np.zeros(m, np.int32)
        chunks, total, seen = [], 0, {}
        tv_chunks, te_chunks, o_chunks, n_chunks = [], [], [], []
        ttotal = ototal = ntotal = 0
        for s in range(n):
            src = model.shape_source[s] if s < len(model.shape_source) else None
            if int(types[s]) == int(GeoType.MESH):
                key = id(src)
                if key not in seen:
                    e = mesh_edges(src)
                    tv, te, orph = feature_ownership(src, e)
                    vn = vertex_normals(src)
                    seen[key] = (total, len(e), ttotal, ototal, len(orph), ntotal)
                    chunks.append(e)
                    tv_chunks.append(tv)
                    te_chunks.append(te)
                    o_chunks.append(orph)
                    n_chunks.append(vn)
                    total += len(e)
                    ttotal += len(tv)
                    ototal += len(orph)
                    ntotal += len(vn)
                estart[s], ecount[s], tstart[s], ostart[s], ocount[s], vstart[s] = seen[key]
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

            def cat(parts, shape, dt):
                parts = [x for x in parts if len(x)]
                return wp.array(np.concatenate(parts) if parts else np.full(shape, -1, np.int32), dtype=dt)

            b.tri_v = cat(tv_chunks, (1, 3), wp.vec3i)
            b.tri_e = cat(te_chunks, (1, 3), wp.vec3i)
            b.tstart = wp.array(tstart, dtype=int)
            b.orph = cat(o_chunks, (1, 2), wp.vec2i)
            b.ostart = wp.array(ostart, dtype=int)
            b.ocount = wp.array(ocount, dtype=int)
            b.vnorm = wp.array(np.concatenate(n_chunks) if n_chunks else np.zeros((1, 3), np.float32), dtype=wp.vec3)
            b.vstart = wp.array(vstart, dtype=int)
            b.prim_sdf = wp.array(np.asarray(prim, np.int32).reshape(-1)[:m], dtype=int)
            b.bin_n = wp.array(bn.astype(np.float32), dtype=wp.vec3)
            ang = np.arange(MM_DIRS, dtype=np.float32) * np.float32(2.0 * np.pi / MM_DIRS)
            dirs = (np.cos(ang)[None, :, None] * bu.astype(np.float32)[:, None, :]
                    + np.sin(ang)[None, :, None] * bv.astype(np.float32)[:, None, :])  # fmt: skip
            b.bin_u = wp.array(dirs.reshape(-1, 3).astype(np.float32), dtype=wp.vec3)
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

"""SDF-based hydroelastic contacts: :class:`HydroelasticSDF` (see ``docs/hydroelastic.md``).

For every candidate pair of hydroelastic shapes (both flagged ``ShapeFlags.HYDROELASTIC``, both
with an SDF) each :meth:`HydroelasticSDF.launch`:

1. *broad stage* (one thread per pair): the intersection of the two shapes' world AABBs (less
   their gaps, plus the pair's contact band) is covered by an *iso grid* of the finer of the two
   SDF voxel sizes; overlapping pairs take a slot (``slot capacity = pairs * buffer_fraction *
   buffer_mult_broad``). A grid with more cells than the per-slot budget (worst case * fraction *
   ``buffer_mult_iso``) is coarsened until it fits (counted as an iso overflow);
2. *iso stage* (one thread per budget cell): the pressure difference
   ``f = p_A(d_A) - p_B(d_B)`` is evaluated at the cell corners (``d`` from
   :func:`~.sdf.sdf_query` in each shape's frame, less the shape margin; ``p`` the pressure law,
   default ``p = -kh * d``); cells where ``f`` changes sign are triangulated by marching
   tetrahedra (:mod:`.marching`); triangles whose centroid lies within the contact band of both
   shapes (``d_A, d_B < band``, ``band = min(gap_A + gap_B, 2 voxels)``) are kept. One *face*
   per cell aggregates its triangles: area ``A``, area-weighted centroid ``x`` and normal ``n``
   (from A toward B, i.e. along ``-grad f``), mean pressure ``p`` (exact for the linear
   interpolant). Without deterministic mode a cell whose center is farther than the band
   plus 1.5 voxels outside either shape is skipped before the corner evaluation (pre-pruning);
3. *contacts*: unreduced, every face becomes one rigid contact; reduced (default), faces are
   binned by normal direction (the 26 face normals of a rhombicuboctahedron) and every bin yields the
   faces extremal along 4 tangent directions plus the highest-pressure face (plus, with
   ``anchor_contact``, a contact at the bin's center of pressure), sharing the bin's
   aggregated force and area equally (``normal_matching``: every representative takes the
   direction of the bin's total force, so their sum equals it exactly). Bins with only
   non-penetrating faces yield one margin contact (the highest-pressure face) of area
   ``max(area, margin_contact_area)``.

A contact of pressure ``p`` and area ``A`` is written as a rigid contact with
``rigid_contact_stiffness = A * k_eff`` (``k_eff = 2 kh_a kh_b / (kh_a + kh_b)``) and signed
distance ``d = -p / k_eff`` (points on A and B ``d`` apart along the normal, zero margins), so
``stiffness * (-d) = p * A``. Sub-keys (``point_id``): the iso cell index (unreduced) or
``8 * bin + k`` (reduced). Deterministic mode aggregates the bins in int64 fixed point (a first
pass records each bin's largest contribution as a binary exponent; the mantissa width leaves
room for the face capacity) and breaks ties by the cell index. Buffer overflows drop work and
are counted on the device; :meth:`HydroelasticSDF.check_buffers` reads the counters.
"""

import dataclasses
import math
import warnings
from typing import Any

import numpy as np
import warp as wp

wp.set_module_options({"enable_backward": False, "max_unroll": 1})

from ..sim.enums import GeoType, ShapeFlags
from .marching import corner_offset, edge_t, kuhn_mid
from .narrow_phase import (MAX_SUB_KEY, OVERFLOW_PAIRS_C, OVERFLOW_RIGID_C, SUB_KEY_BITS_C, ContactOut, note_dropped,
                           shape_body_xform)
from .primitives import any_perpendicular
from .sdf import SDFBuffers, build_sdf_buffers, sdf_query, shape_sdf

vec8 = wp.types.vector(length=8, dtype=wp.float32)
vec8i = wp.types.vector(length=8, dtype=wp.int32)

#: normal bins of the contact reduction (the 26 face normals of a rhombicuboctahedron: the 6 axes,
#: 12 edge and 8 corner directions of a cube, so axis-aligned contacts fall in a bin's center)
NUM_BINS = 26
#: representative slots per bin: 4 tangent extremes, the highest pressure, the margin contact
NUM_REPS = 6
#: fixed-point quantities per bin: force (3), pressure*area, pressure*area*x (3), area, margin area
_NQ = 9
_NEG_BIG = wp.constant(-3.0e38)
_INT_BIG = wp.constant(2147483647)
_NB = wp.constant(NUM_BINS)
_NR = wp.constant(NUM_REPS)
_NQC = wp.constant(_NQ)
_HYD = wp.constant(int(ShapeFlags.HYDROELASTIC))

# overflow counters (cumulative until read with reset): broad slots, iso coarsening, faces,
# contact output, contact surface triangles
OVF_BROAD, OVF_ISO, OVF_FACE, OVF_CONTACT, OVF_SURFACE = range(5)


def _bin_dirs() -> np.ndarray:
    d = [v for v in np.ndindex(3, 3, 3) if v != (1, 1, 1)]
    d = np.asarray(d, dtype=np.float64) - 1.0
    return (d / np.linalg.norm(d, axis=1, keepdims=True)).astype(np.float32)


@wp.struct
class LinearPressureData:
    """Data of the default pressure law ``p = -kh[shape] * signed_depth``."""

    shape_kh: wp.array(dtype=wp.float32)


@wp.func
def linear_pressure(signed_depth: wp.float32, shape_idx: wp.int32, data: LinearPressureData) -> wp.float32:
    """The default linear pressure law ``p = -kh * signed_depth`` (positive when penetrating)."""
    return -data.shape_kh[shape_idx] * signed_depth


@wp.struct
class HydroState:
    """Device buffers of one :class:`HydroelasticSDF` (passed to every kernel)."""

    pair_a: wp.array(dtype=int)
    pair_b: wp.array(dtype=int)
    pair_h: wp.array(dtype=float)
    pair_keff: wp.array(dtype=float)
    pair_count: int
    counters: wp.array(dtype=int)  # 0: active slots, 1: faces, 2: surface triangles
    overflow: wp.array(dtype=int)
    slot_cap: int
    cells_per_slot: int
    slot_pair: wp.array(dtype=int)
    slot_lo: wp.array(dtype=wp.vec3)
    slot_h: wp.array(dtype=float)
    slot_dims: wp.array(dtype=wp.vec3i)
    slot_band: wp.array(dtype=float)
    face_cap: int
    face_slot: wp.array(dtype=int)
    face_x: wp.array(dtype=wp.vec3)
    face_n: wp.array(dtype=wp.vec3)
    face_area: wp.array(dtype=float)
    face_p: wp.array(dtype=float)
    face_fp: wp.array(dtype=int)
    face_bin: wp.array(dtype=int)
    surf_cap: int
    surf: wp.array(dtype=wp.vec3)
    surf_pair: wp.array(dtype=int)
    dirs: wp.array(dtype=wp.vec3)
    bin_q: wp.array(dtype=float)  # NB * _NQ floats per slot (decoded aggregates)
    bin_fx: wp.array(dtype=wp.int64)  # fixed-point accumulators (deterministic mode)
    bin_exp: wp.array(dtype=int)  # 3 exponent groups per bin (deterministic mode)
    bin_npen: wp.array(dtype=int)
    rep_score: wp.array(dtype=float)
    rep_fp: wp.array(dtype=int)
    rep_face: wp.array(dtype=int)
    mant_bits: int


# ----------------------------------------------------------------------------- helpers
@wp.func
def _emit(out: ContactOut, stiff: wp.array(dtype=float), hs: HydroState, a: int, b: int, XbA: wp.transform,
          XbB: wp.transform, x: wp.vec3, n: wp.vec3, area: float, p: float, keff: float, sub: int):  # fmt: skip
    d = -p / keff
    idx = wp.atomic_add(out.count, 0, 1)
    if idx >= out.capacity:
        wp.atomic_sub(out.count, 0, 1)
        wp.atomic_add(hs.overflow, OVF_CONTACT, 1)
        note_dropped(out.overflow, OVERFLOW_RIGID_C, 1, out.capacity)
        return
    pa = x - (0.5 * d) * n
    pb = x + (0.5 * d) * n
    out.shape0[idx] = a
    out.shape1[idx] = b
    out.point0[idx] = wp.transform_point(wp.transform_inverse(XbA), pa)
    out.point1[idx] = wp.transform_point(wp.transform_inverse(XbB), pb)
    out.offset0[idx] = wp.vec3(0.0)
    out.offset1[idx] = wp.vec3(0.0)
    out.normal[idx] = n
    out.margin0[idx] = 0.0
    out.margin1[idx] = 0.0
    out.point_id[idx] = sub
    stiff[idx] = area * keff
    if out.sort_key.shape[0] > 0:
        sk = wp.min(wp.max(sub, 0), MAX_SUB_KEY)
        sb = wp.int64(SUB_KEY_BITS_C)
        key = (wp.int64(a) << (wp.int64(out.key_shift) + sb)) | (wp.int64(b) << sb) | wp.int64(sk)
        out.sort_key[idx] = key
        out.sort_value[idx] = idx


# ----------------------------------------------------------------------------- kernels
@wp.kernel
def _reset_kernel(hs: HydroState, det: int, stride: int):
    tid = wp.tid()
    if tid == 0:
        hs.counters[0] = 0
        hs.counters[1] = 0
        hs.counters[2] = 0
    i = tid
    while i < hs.bin_q.shape[0]:
        hs.bin_q[i] = 0.0
        if det != 0:
            hs.bin_fx[i] = wp.int64(0)
            if i < hs.bin_exp.shape[0]:
                hs.bin_exp[i] = -100000
        if i < hs.bin_npen.shape[0]:
            hs.bin_npen[i] = 0
        if i < hs.rep_score.shape[0]:
            hs.rep_score[i] = _NEG_BIG
            hs.rep_fp[i] = _INT_BIG
            hs.rep_face[i] = -1
        i += stride


@wp.kernel
def _broad_kernel(hs: HydroState, lower: wp.array(dtype=wp.vec3), upper: wp.array(dtype=wp.vec3),
                  shape_gap: wp.array(dtype=float)):  # fmt: skip
    p = wp.tid()
    if p >= hs.pair_count:
        return
    a = hs.pair_a[p]
    b = hs.pair_b[p]
    h = hs.pair_h[p]
    band = wp.min(shape_gap[a] + shape_gap[b], 2.0 * h)
    ga = wp.vec3(shape_gap[a])
    gb = wp.vec3(shape_gap[b])
    lo = wp.max(lower[a] + ga, lower[b] + gb) - wp.vec3(band)
    hi = wp.min(upper[a] - ga, upper[b] - gb) + wp.vec3(band)
    ext = hi - lo
    if ext[0] < 0.0 or ext[1] < 0.0 or ext[2] < 0.0:
        return
    cap = float(hs.cells_per_slot)
    nx = int(0)
    ny = int(0)
    nz = int(0)
    coarsened = int(0)
    for _it in range(8):
        nx = wp.max(int(wp.ceil(ext[0] / h)), 1)
        ny = wp.max(int(wp.ceil(ext[1] / h)), 1)
        nz = wp.max(int(wp.ceil(ext[2] / h)), 1)
        cells = float(nx) * float(ny) * float(nz)
        if cells <= cap:
            break
        coarsened = 1
        h = h * wp.pow(cells / cap, 1.0 / 3.0) * 1.01
    if float(nx) * float(ny) * float(nz) > cap:
        wp.atomic_add(hs.overflow, OVF_ISO, 1)
        return
    if coarsened != 0:
        wp.atomic_add(hs.overflow, OVF_ISO, 1)
    slot = wp.atomic_add(hs.counters, 0, 1)
    if slot >= hs.slot_cap:
        wp.atomic_add(hs.overflow, OVF_BROAD, 1)
        return
    hs.slot_pair[slot] = p
    hs.slot_lo[slot] = lo
    hs.slot_h[slot] = h
    hs.slot_dims[slot] = wp.vec3i(nx, ny, nz)
    hs.slot_band[slot] = band


@wp.func
def _edge_point(u: int, v: int, lo: wp.vec3, h: float, i: int, j: int, k: int, fv: vec8, pm: vec8, da: vec8,
                db: vec8, clamp_min: float):  # fmt: skip
    t = edge_t(fv[u], fv[v], clamp_min)
    ou = corner_offset(u)
    ov = corner_offset(v)
    xu = lo + h * wp.vec3(float(i + ou[0]), float(j + ou[1]), float(k + ou[2]))
    xv = lo + h * wp.vec3(float(i + ov[0]), float(j + ov[1]), float(k + ov[2]))
    x = xu + t * (xv - xu)
    return x, pm[u] + t * (pm[v] - pm[u]), da[u] + t * (da[v] - da[u]), db[u] + t * (db[v] - db[u])


_CELL_KERNELS: dict = {}


def _cell_kernel(pfunc, dtype):
    """The iso-stage kernel specialised for the pressure law ``pfunc`` with data type ``dtype``."""
    key = (pfunc, dtype)
    k = _CELL_KERNELS.get(key)
    if k is not None:
        return k

    def hydro_cells(hs: HydroState, shape_X: wp.array(dtype=wp.transform), shape_margin: wp.array(dtype=float),
                    sdf: SDFBuffers, pdata: dtype, prune: int, clamp_min: float, stride: int):  # fmt: skip
        tid = wp.tid()
        nslots = wp.min(hs.counters[0], hs.slot_cap)
        total = nslots * hs.cells_per_slot
        t = tid
        while t < total:
            slot = t // hs.cells_per_slot
            c = t - slot * hs.cells_per_slot
            t += stride
            dims = hs.slot_dims[slot]
            nx = dims[0]
            ny = dims[1]
            if c >= nx * ny * dims[2]:
                continue
            i = c % nx
            j = (c // nx) % ny
            k = c // (nx * ny)
            pr = hs.slot_pair[slot]
            a = hs.pair_a[pr]
            b = hs.pair_b[pr]
            lo = hs.slot_lo[slot]
            h = hs.slot_h[slot]
            band = hs.slot_band[slot]
            XiA = wp.transform_inverse(shape_X[a])
            XiB = wp.transform_inverse(shape_X[b])
            ma = shape_margin[a]
            mb = shape_margin[b]
            if prune != 0:
                xc = lo + h * wp.vec3(float(i) + 0.5, float(j) + 0.5, float(k) + 0.5)
                dca, gca = sdf_query(sdf, a, wp.transform_point(XiA, xc))
                if dca - ma > band + 1.5 * h:
                    continue
                dcb, gcb = sdf_query(sdf, b, wp.transform_point(XiB, xc))
                if dcb - mb > band + 1.5 * h:
                    continue
            fv = vec8()
            pm = vec8()
            da = vec8()
            db = vec8()
            npos = int(0)
            for cc in range(8):
                o = corner_offset(cc)
                x = lo + h * wp.vec3(float(i + o[0]), float(j + o[1]), float(k + o[2]))
                d0, g0 = sdf_query(sdf, a, wp.transform_point(XiA, x))
                d1, g1 = sdf_query(sdf, b, wp.transform_point(XiB, x))
                d0 = d0 - ma
                d1 = d1 - mb
                p0 = pfunc(d0, a, pdata)
                p1 = pfunc(d1, b, pdata)
                fv[cc] = p0 - p1
                pm[cc] = 0.5 * (p0 + p1)
                da[cc] = d0
                db[cc] = d1
                if p0 - p1 >= 0.0:
                    npos += 1
            if npos == 0 or npos == 8:
                continue
            a_sum = float(0.0)
            an = wp.vec3(0.0)
            ax = wp.vec3(0.0)
            ap = float(0.0)
            for tt in range(6):
                m1, m2 = kuhn_mid(tt)
                cid = wp.vec4i(0, m1, m2, 7)
                tp = int(0)
                ref = wp.vec3(0.0)
                for q in range(4):
                    if fv[cid[q]] >= 0.0:
                        tp += 1
                        o = corner_offset(cid[q])
                        ref += lo + h * wp.vec3(float(i + o[0]), float(j + o[1]), float(k + o[2]))
                if tp == 0 or tp == 4:
                    continue
                ref = ref / float(tp)
                # edges of the cut, in cyclic order: e0..e2 (one triangle) or e0..e3 (a quad)
                e0 = wp.vec2i(0, 0)
                e1 = wp.vec2i(0, 0)
                e2 = wp.vec2i(0, 0)
                e3 = wp.vec2i(0, 0)
                ntri = int(1)
                if tp == 1 or tp == 3:
                    lone = int(0)
                    for q in range(4):
                        s_q = fv[cid[q]] >= 0.0
                        if (tp == 1 and s_q) or (tp == 3 and not s_q):
                            lone = q
                    r = int(0)
                    for q in range(4):
                        if q != lone:
                            if r == 0:
                                e0 = wp.vec2i(cid[lone], cid[q])
                            elif r == 1:
                                e1 = wp.vec2i(cid[lone], cid[q])
                            else:
                                e2 = wp.vec2i(cid[lone], cid[q])
                            r += 1
                else:
                    ntri = 2
                    pp = wp.vec2i(-1, -1)
                    nn = wp.vec2i(-1, -1)
                    for q in range(4):
                        if fv[cid[q]] >= 0.0:
                            if pp[0] < 0:
                                pp[0] = cid[q]
                            else:
                                pp[1] = cid[q]
                        else:
                            if nn[0] < 0:
                                nn[0] = cid[q]
                            else:
                                nn[1] = cid[q]
                    e0 = wp.vec2i(pp[0], nn[0])
                    e1 = wp.vec2i(pp[0], nn[1])
                    e2 = wp.vec2i(pp[1], nn[1])
                    e3 = wp.vec2i(pp[1], nn[0])
                x0, p0v, a0, b0 = _edge_point(e0[0], e0[1], lo, h, i, j, k, fv, pm, da, db, clamp_min)
                x1, p1v, a1, b1 = _edge_point(e1[0], e1[1], lo, h, i, j, k, fv, pm, da, db, clamp_min)
                x2, p2v, a2, b2 = _edge_point(e2[0], e2[1], lo, h, i, j, k, fv, pm, da, db, clamp_min)
                x3 = x2
                p3v = p2v
                a3 = a2
                b3 = b2
                if ntri == 2:
                    x3, p3v, a3, b3 = _edge_point(e3[0], e3[1], lo, h, i, j, k, fv, pm, da, db, clamp_min)
                for tri in range(ntri):
                    ya = x0
                    yb = x1
                    yc = x2
                    pa_ = p0v + p1v + p2v
                    sa = a0 + a1 + a2
                    sb = b0 + b1 + b2
                    if tri == 1:
                        yb = x2
                        yc = x3
                        pa_ = p0v + p2v + p3v
                        sa = a0 + a2 + a3
                        sb = b0 + b2 + b3
                    if sa / 3.0 >= band or sb / 3.0 >= band:
                        continue
                    cr = wp.cross(yb - ya, yc - ya)
                    ar = 0.5 * wp.length(cr)
                    if ar <= 0.0:
                        continue
                    nrm = cr / (2.0 * ar)
                    cen = (ya + yb + yc) / 3.0
                    if wp.dot(nrm, ref - cen) > 0.0:
                        nrm = -nrm
                        tmp = yb
                        yb = yc
                        yc = tmp
                    a_sum += ar
                    an += ar * nrm
                    ax += ar * cen
                    ap += ar * pa_ / 3.0
                    if hs.surf_cap > 0:
                        si = wp.atomic_add(hs.counters, 2, 1)
                        if si < hs.surf_cap:
                            hs.surf[3 * si] = ya
                            hs.surf[3 * si + 1] = yb
                            hs.surf[3 * si + 2] = yc
                            hs.surf_pair[si] = pr
                        else:
                            wp.atomic_add(hs.overflow, OVF_SURFACE, 1)
            if a_sum <= 0.0:
                continue
            ln = wp.length(an)
            if ln <= 0.0:
                continue
            fi = wp.atomic_add(hs.counters, 1, 1)
            if fi >= hs.face_cap:
                wp.atomic_add(hs.overflow, OVF_FACE, 1)
                continue
            hs.face_slot[fi] = slot
            hs.face_x[fi] = ax / a_sum
            hs.face_n[fi] = an / ln
            hs.face_area[fi] = a_sum
            hs.face_p[fi] = ap / a_sum
            hs.face_fp[fi] = c

    k = wp.kernel(enable_backward=False, module="unique")(hydro_cells)
    _CELL_KERNELS[key] = k
    return k


@wp.kernel
def _emit_all_kernel(hs: HydroState, out: ContactOut, stiff: wp.array(dtype=float),
                     shape_body: wp.array(dtype=int), body_q: wp.array(dtype=wp.transform), stride: int):  # fmt: skip
    tid = wp.tid()
    nf = wp.min(hs.counters[1], hs.face_cap)
    f = tid
    while f < nf:
        slot = hs.face_slot[f]
        pr = hs.slot_pair[slot]
        a = hs.pair_a[pr]
        b = hs.pair_b[pr]
        _emit(out, stiff, hs, a, b, shape_body_xform(shape_body[a], body_q), shape_body_xform(shape_body[b], body_q), hs.face_x[f],
              hs.face_n[f], hs.face_area[f], hs.face_p[f], hs.pair_keff[pr], hs.face_fp[f])  # fmt: skip
        f += stride


@wp.func
def _face_bin(hs: HydroState, n: wp.vec3):
    best = int(0)
    bd = wp.dot(n, hs.dirs[0])
    for q in range(1, NUM_BINS):
        dq = wp.dot(n, hs.dirs[q])
        if dq > bd:
            bd = dq
            best = q
    return best


@wp.func
def _exp2_ceil(v: float):
    """An integer ``e`` with ``|v| < 2^e`` (deterministic; generous by one)."""
    av = wp.abs(v)
    if av <= 0.0:
        return -100000
    return int(wp.floor(wp.log2(av))) + 2


@wp.func
def _face_quantity(hs: HydroState, f: int, q: int):
    p = hs.face_p[f]
    ar = hs.face_area[f]
    n = hs.face_n[f]
    x = hs.face_x[f]
    w = p * ar
    if p > 0.0:
        if q < 3:
            return w * n[q]
        if q == 3:
            return w
        if q < 7:
            return w * x[q - 4]
        if q == 7:
            return ar
        return 0.0
    if q == 8:
        return ar
    return 0.0


@wp.func
def _q_group(q: int):
    if q < 4:
        return 0
    if q < 7:
        return 1
    return 2


@wp.kernel
def _bin_exp_kernel(hs: HydroState, stride: int):
    tid = wp.tid()
    nf = wp.min(hs.counters[1], hs.face_cap)
    f = tid
    while f < nf:
        bn = _face_bin(hs, hs.face_n[f])
        hs.face_bin[f] = bn
        key = hs.face_slot[f] * _NB + bn
        for q in range(_NQ):
            v = _face_quantity(hs, f, q)
            if v != 0.0:
                wp.atomic_max(hs.bin_exp, key * 3 + _q_group(q), _exp2_ceil(v))
        f += stride


@wp.kernel
def _bin_accum_kernel(hs: HydroState, det: int, stride: int):
    tid = wp.tid()
    nf = wp.min(hs.counters[1], hs.face_cap)
    f = tid
    while f < nf:
        bn = _face_bin(hs, hs.face_n[f])
        hs.face_bin[f] = bn
        key = hs.face_slot[f] * _NB + bn
        if hs.face_p[f] > 0.0:
            wp.atomic_add(hs.bin_npen, key, 1)
        for q in range(_NQ):
            v = _face_quantity(hs, f, q)
            if v != 0.0:
                if det != 0:
                    e = hs.bin_exp[key * 3 + _q_group(q)]
                    scale = wp.pow(wp.float64(2.0), wp.float64(hs.mant_bits - e))
                    wp.atomic_add(hs.bin_fx, key * _NQ + q, wp.int64(wp.float64(v) * scale))
                else:
                    wp.atomic_add(hs.bin_q, key * _NQ + q, v)
        f += stride


@wp.kernel
def _bin_decode_kernel(hs: HydroState, stride: int):
    tid = wp.tid()
    n = wp.min(hs.counters[0], hs.slot_cap) * _NB * _NQ
    i = tid
    while i < n:
        key = i // _NQ
        q = i - key * _NQ
        e = hs.bin_exp[key * 3 + _q_group(q)]
        scale = wp.pow(wp.float64(2.0), wp.float64(e - hs.mant_bits))
        hs.bin_q[i] = float(wp.float64(hs.bin_fx[i]) * scale)
        i += stride


@wp.func
def _rep_score(hs: HydroState, f: int, r: int):
    """Score of face ``f`` for representative slot ``r`` of its bin (``-BIG``: not a candidate)."""
    p = hs.face_p[f]
    if r == 5:
        if p > 0.0:
            return _NEG_BIG
        return p
    if p <= 0.0:
        return _NEG_BIG
    if r == 4:
        return p
    d = hs.dirs[hs.face_bin[f]]
    u0 = any_perpendicular(d)
    v0 = wp.cross(d, u0)
    u = u0 + v0  # diagonal directions: the corners of axis-aligned patches are unique extremes
    v = v0 - u0
    x = hs.face_x[f]
    if r == 0:
        return wp.dot(x, u)
    if r == 1:
        return -wp.dot(x, u)
    if r == 2:
        return wp.dot(x, v)
    return -wp.dot(x, v)


@wp.kernel
def _rep_kernel(hs: HydroState, phase: int, stride: int):
    tid = wp.tid()
    nf = wp.min(hs.counters[1], hs.face_cap)
    f = tid
    while f < nf:
        key = hs.face_slot[f] * _NB + hs.face_bin[f]
        for r in range(NUM_REPS):
            s = _rep_score(hs, f, r)
            if s > _NEG_BIG:
                kr = key * _NR + r
                if phase == 0:
                    wp.atomic_max(hs.rep_score, kr, s)
                elif s == hs.rep_score[kr]:
                    if phase == 1:
                        wp.atomic_min(hs.rep_fp, kr, hs.face_fp[f])
                    elif hs.face_fp[f] == hs.rep_fp[kr]:
                        hs.rep_face[kr] = f
        f += stride


@wp.kernel
def _emit_reduced_kernel(hs: HydroState, out: ContactOut, stiff: wp.array(dtype=float),
                         shape_body: wp.array(dtype=int), body_q: wp.array(dtype=wp.transform),
                         normal_matching: int, anchor: int, margin_area: float, stride: int):  # fmt: skip
    tid = wp.tid()
    nk = wp.min(hs.counters[0], hs.slot_cap) * _NB
    key = tid
    while key < nk:
        slot = key // _NB
        bn = key - slot * _NB
        pr = hs.slot_pair[slot]
        a = hs.pair_a[pr]
        b = hs.pair_b[pr]
        keff = hs.pair_keff[pr]
        XbA = shape_body_xform(shape_body[a], body_q)
        XbB = shape_body_xform(shape_body[b], body_q)
        base = key * _NQ
        if hs.bin_npen[key] > 0:
            F = wp.vec3(hs.bin_q[base], hs.bin_q[base + 1], hs.bin_q[base + 2])
            W = hs.bin_q[base + 3]
            X = wp.vec3(hs.bin_q[base + 4], hs.bin_q[base + 5], hs.bin_q[base + 6])
            A = hs.bin_q[base + 7]
            Fm = wp.length(F)
            if W > 0.0 and A > 0.0 and Fm > 0.0:
                nF = F / Fm
                cop = X / W
                # representatives: distinct rep faces (+ the center of pressure with anchor_contact)
                ids = vec8i()
                m = int(0)
                for r in range(5):
                    fr = hs.rep_face[key * _NR + r]
                    dup = int(0)
                    for r2 in range(r):
                        if hs.rep_face[key * _NR + r2] == fr:
                            dup = 1
                    if fr >= 0 and dup == 0:
                        ids[m] = fr
                        m += 1
                if anchor != 0:
                    ids[m] = -2
                    m += 1
                # weights w (sum 1) placing the weighted centroid of the representatives at the
                # center of pressure: minimum-norm correction of the uniform weights
                tu = any_perpendicular(nF)
                tv = wp.cross(nF, tu)
                yu = vec8()
                yv = vec8()
                L = float(0.0)
                for r in range(m):
                    xr = cop
                    if ids[r] >= 0:
                        xr = hs.face_x[ids[r]]
                    yu[r] = wp.dot(xr - cop, tu)
                    yv[r] = wp.dot(xr - cop, tv)
                    L = wp.max(L, wp.max(wp.abs(yu[r]), wp.abs(yv[r])))
                w = vec8()
                su = float(0.0)
                sv = float(0.0)
                suu = float(0.0)
                svv = float(0.0)
                suv = float(0.0)
                for r in range(m):
                    w[r] = 1.0 / float(m)
                    if L > 0.0:
                        yu[r] = yu[r] / L
                        yv[r] = yv[r] / L
                    su += yu[r]
                    sv += yv[r]
                    suu += yu[r] * yu[r]
                    svv += yv[r] * yv[r]
                    suv += yu[r] * yv[r]
                M = wp.mat33(suu, suv, su, suv, svv, sv, su, sv, float(m))
                if L > 0.0 and wp.abs(wp.determinant(M)) > 1.0e-6:
                    lam = wp.inverse(M) * wp.vec3(-su / float(m), -sv / float(m), 0.0)
                    wsum = float(0.0)
                    for r in range(m):
                        w[r] = wp.max(w[r] + lam[0] * yu[r] + lam[1] * yv[r] + lam[2], 0.0)
                        wsum += w[r]
                    for r in range(m):
                        if wsum > 0.0:
                            w[r] = w[r] / wsum
                        else:
                            w[r] = 1.0 / float(m)
                for r in range(m):
                    if w[r] > 0.0:
                        xr = cop
                        n = nF
                        force = w[r] * Fm
                        sub = bn * 8 + 6
                        if ids[r] >= 0:
                            xr = hs.face_x[ids[r]]
                            sub = bn * 8 + r
                            if normal_matching == 0:
                                n = hs.face_n[ids[r]]
                                force = w[r] * W
                        ar = w[r] * A
                        _emit(out, stiff, hs, a, b, XbA, XbB, xr, n, ar, force / ar, keff, sub)
        else:
            fr = hs.rep_face[key * _NR + 5]
            if fr >= 0:
                ar = wp.max(hs.bin_q[base + 8], margin_area)
                _emit(out, stiff, hs, a, b, XbA, XbB, hs.face_x[fr], hs.face_n[fr], ar, hs.face_p[fr], keff,
                      bn * 8 + 7)  # fmt: skip
        key += stride


@wp.kernel
def _gather_stiffness_kernel(count: wp.array(dtype=int), cap: int, order: wp.array(dtype=int),
                             src: wp.array(dtype=float), dst: wp.array(dtype=float), stride: int):  # fmt: skip
    tid = wp.tid()
    n = wp.min(count[0], cap)
    i = tid
    while i < n:
        dst[i] = src[order[i]]
        i += stride


@wp.kernel
def _filter_copy_kernel(cand: wp.array(dtype=wp.vec2i), count: wp.array(dtype=int), tmp: wp.array(dtype=wp.vec2i),
                        tmp_count: wp.array(dtype=int), out: ContactOut, stride: int):  # fmt: skip
    tid = wp.tid()
    n = wp.min(count[0], cand.shape[0])
    if tid == 0:
        tmp_count[0] = n
        if count[0] > n:  # broad-phase overflow: counted here, the filtered count no longer shows it
            note_dropped(out.overflow, OVERFLOW_PAIRS_C, count[0] - n, cand.shape[0])
    i = tid
    while i < n:
        tmp[i] = cand[i]
        i += stride


@wp.kernel
def _zero_count_kernel(count: wp.array(dtype=int)):
    count[0] = 0


@wp.kernel
def _filter_back_kernel(tmp: wp.array(dtype=wp.vec2i), tmp_count: wp.array(dtype=int),
                        shape_flags: wp.array(dtype=int), cand: wp.array(dtype=wp.vec2i), count: wp.array(dtype=int),
                        stride: int):  # fmt: skip
    tid = wp.tid()
    n = tmp_count[0]
    i = tid
    while i < n:
        p = tmp[i]
        hyd = (shape_flags[p[0]] & _HYD) != 0 and (shape_flags[p[1]] & _HYD) != 0
        if not hyd:
            k = wp.atomic_add(count, 0, 1)
            cand[k] = p
        i += stride


def _grid_dim(device, n: int) -> int:
    from .broad_phase import grid_dim

    return grid_dim(device, max(int(n), 1))


def _struct_type(data):
    t = getattr(data, "_cls", None)
    if t is None:
        raise TypeError(f"HydroelasticSDF.Config.pressure_data must be a @wp.struct instance, got {type(data).__name__}")
    return t


_UNSUPPORTED = (int(GeoType.PLANE), int(GeoType.HFIELD))


class HydroelasticSDF:
    """SDF-based hydroelastic contact generation for the hydroelastic shape pairs of a model
    (normally created by :class:`~armillary.geometry.CollisionPipeline`; see the module docstring).

    Args:
        model: the finalized model.
        config: a :class:`HydroelasticSDF.Config` (``None``: defaults).
        pairs: ``(N, 2)`` candidate hydroelastic shape pairs (``None``: the model's contact pairs
            whose shapes are both hydroelastic).
        deterministic: fixed-point bin aggregation and no pre-pruning (see the module docstring).
        device: defaults to the model's device.
    """

    @dataclasses.dataclass
    class Config:
        """Hydroelastic contact options (``newton.geometry.HydroelasticSDF.Config``).

        Attributes:
            reduce_contacts: reduce every pair's faces to representatives per normal bin.
            buffer_fraction: fraction (0, 1] of the worst-case broad (pair slot), iso (cells per
                slot) and face buffers to allocate; overflows drop work and are counted
                (:meth:`HydroelasticSDF.check_buffers` warns).
            buffer_mult_broad / buffer_mult_iso / buffer_mult_contact: extra integer multipliers
                of the broad, iso and face buffers.
            normal_matching: representatives take the direction of their bin's total force.
            anchor_contact: add a contact at each bin's center of pressure.
            margin_contact_area: lower bound [m^2] on the area of a (reduced) contact within the
                margin band that is not penetrating yet.
            output_contact_surface: keep the iso-surface triangles
                (:meth:`HydroelasticSDF.get_contact_surface`).
            mc_edge_clamp_min: clamp of the iso-vertex edge parameter to ``[c, 1 - c]``.
            pressure_func / pressure_data: custom pressure law (a ``@wp.func``
                ``(signed_depth, shape_idx, data) -> float``) and its data struct instance.
        """

        reduce_contacts: bool = True
        buffer_fraction: float = 1.0
        buffer_mult_broad: int = 1
        buffer_mult_iso: int = 1
        buffer_mult_contact: int = 1
        normal_matching: bool = True
        anchor_contact: bool = False
        margin_contact_area: float = 0.01
        output_contact_surface: bool = False
        mc_edge_clamp_min: float = 1.0e-5
        pressure_func: Any = None
        pressure_data: Any = None

        def validate(self) -> None:
            if not (0.0 < float(self.buffer_fraction) <= 1.0):
                raise ValueError(f"HydroelasticSDF.Config: buffer_fraction={self.buffer_fraction} must be in (0, 1]")
            for name in ("buffer_mult_broad", "buffer_mult_iso", "buffer_mult_contact"):
                v = getattr(self, name)
                if int(v) != v or int(v) < 1:
                    raise ValueError(f"HydroelasticSDF.Config: {name}={v} must be an integer >= 1")
            if not float(self.margin_contact_area) >= 0.0:
                raise ValueError(f"HydroelasticSDF.Config: margin_contact_area={self.margin_contact_area} must be >= 0")
            if not (0.0 <= float(self.mc_edge_clamp_min) < 0.5):
                raise ValueError(f"HydroelasticSDF.Config: mc_edge_clamp_min={self.mc_edge_clamp_min} must be in [0, 0.5)")
            if (self.pressure_func is None) != (self.pressure_data is None):
                raise ValueError("HydroelasticSDF.Config: pressure_func and pressure_data must be given together")

    def __init__(self, model, config=None, pairs=None, *, deterministic: bool = False, device=None):
        self.model = model
        self.config = config if config is not None else HydroelasticSDF.Config()
        self.config.validate()
        self.device = wp.get_device(device if device is not None else model.device)
        self.deterministic = bool(deterministic)
        cfg = self.config
        n = int(model.shape_count)
        flags = model.shape_flags.numpy().astype(np.int64) if n else np.zeros(0, np.int64)
        types = model.shape_type.numpy().astype(np.int64) if n else np.zeros(0, np.int64)
        hyd = (flags & int(ShapeFlags.HYDROELASTIC)) != 0
        if pairs is None:
            pairs = np.asarray(model.shape_contact_pairs, dtype=np.int32).reshape(-1, 2)
            pairs = pairs[hyd[pairs[:, 0]] & hyd[pairs[:, 1]]] if len(pairs) else pairs
        pairs = np.asarray(pairs, dtype=np.int32).reshape(-1, 2)
        # validation: volumetric shapes with SDFs
        for s in sorted(set(pairs.reshape(-1).tolist())):
            self.validate_shape(model, s)
        # canonical order (as the narrow phase: lower type first, then lower index)
        ta, tb = types[pairs[:, 0]], types[pairs[:, 1]]
        swap = (ta > tb) | ((ta == tb) & (pairs[:, 0] > pairs[:, 1]))
        pairs = np.where(swap[:, None], pairs[:, ::-1], pairs).astype(np.int32)
        self.pairs = pairs
        P = len(pairs)
        self.pair_count = P
        kh = model.shape_material_kh.numpy().astype(np.float64) if n else np.zeros(0)
        hs_np, keff, wc_cells = [], [], []
        for a, b in pairs:
            sa, sb = shape_sdf(model, int(a)), shape_sdf(model, int(b))
            ha, ra = self._world_voxel(model, int(a), sa)
            hb, rb = self._world_voxel(model, int(b), sb)
            h = min(ha, hb)
            hs_np.append(h)
            ka, kb = kh[a], kh[b]
            keff.append(2.0 * ka * kb / (ka + kb) if ka + kb > 0 else 0.0)
            ext = 2.0 * min(ra, rb) + 4.0 * h + 2.0 * h
            wc_cells.append(int(math.ceil(ext / h) + 1) ** 3)
        self.pair_voxel = np.asarray(hs_np, np.float64)
        self.pair_keff = np.asarray(keff, np.float64)
        if P and not np.all(self.pair_keff > 0):
            k = int(np.nonzero(~(self.pair_keff > 0))[0][0])
            raise ValueError(f"HydroelasticSDF: shapes {pairs[k, 0]} and {pairs[k, 1]} need kh > 0")
        frac = float(cfg.buffer_fraction)
        self.slot_cap = max(1, int(math.ceil(P * frac * int(cfg.buffer_mult_broad)))) if P else 1
        worst = max(wc_cells) if wc_cells else 1
        self.cells_per_slot = int(min(max(1, math.ceil(worst * frac * int(cfg.buffer_mult_iso))), (1 << 24) - 1))
        face_worst = int(3 * round(worst ** (2.0 / 3.0))) * self.slot_cap
        self.face_cap = max(1, int(math.ceil(face_worst * frac * int(cfg.buffer_mult_contact))))
        self.surf_cap = 4 * self.face_cap if cfg.output_contact_surface else 0
        if cfg.reduce_contacts:
            self.contact_estimate = self.slot_cap * NUM_BINS * 6 if P else 0
        else:
            self.contact_estimate = self.face_cap if P else 0
        # mantissa bits of the fixed-point bin sums: face_cap terms of < 2^mant each fit in 62 bits
        self.mant_bits = int(61 - math.ceil(math.log2(self.face_cap + 1)))
        # pressure law
        if cfg.pressure_func is None:
            self._pdata = LinearPressureData()
            self._pdata.shape_kh = model.shape_material_kh
            self._pfunc = linear_pressure
        else:
            self._pfunc, self._pdata = cfg.pressure_func, cfg.pressure_data
        self._cell_kernel = _cell_kernel(self._pfunc, _struct_type(self._pdata)) if P else None
        self._sdf = build_sdf_buffers(model) if P else None
        self._alloc()

    # ------------------------------------------------------------------ construction helpers
    @staticmethod
    def validate_shape(model, s: int) -> None:
        """Raise ``ValueError`` naming shape ``s`` when it cannot take part in hydroelastic contacts."""
        t = int(model.shape_type.numpy()[s])
        label = model.shape_label[s] if s < len(getattr(model, "shape_label", []) or []) else ""
        name = f"shape {s}" + (f" ({label!r})" if label else "") + f" of type {GeoType(t).name}"
        if t in _UNSUPPORTED:
            raise ValueError(f"Hydroelastic contacts: {name} is not volumetric (planes and heightfields cannot "
                             "be hydroelastic)")  # fmt: skip
        if t in (int(GeoType.MESH), int(GeoType.CONVEX_MESH)):
            src = model.shape_source[s] if s < len(model.shape_source) else None
            closed = getattr(src, "is_watertight", None)
            if closed is False or (callable(closed) and not closed()):
                raise ValueError(f"Hydroelastic contacts: {name} is not watertight")
        if shape_sdf(model, s) is None:
            hint = ("call mesh.build_sdf(...)" if t in (int(GeoType.MESH), int(GeoType.CONVEX_MESH)) else
                    "set sdf_max_resolution or sdf_target_voxel_size in its ShapeConfig")  # fmt: skip
            raise ValueError(f"Hydroelastic contacts: {name} has no SDF ({hint})")

    @staticmethod
    def _world_voxel(model, s: int, sdf):
        """(voxel size, bounding radius) of ``sdf`` in the shape's scaled local frame [m]."""
        t = int(model.shape_type.numpy()[s])
        h = float(sdf.voxel_size)
        lo, hi = np.asarray(sdf.lower, np.float64), np.asarray(sdf.upper, np.float64)
        if t in (int(GeoType.MESH), int(GeoType.CONVEX_MESH)):
            sc = np.abs(np.asarray(model.shape_scale.numpy()[s], np.float64))
            baked = np.ones(3) if sdf.baked_scale is None else np.abs(np.asarray(sdf.baked_scale, np.float64))
            ratio = sc / baked  # local scaled = grid * ratio
            h = h * float(np.min(ratio))
            lo, hi = lo * ratio, hi * ratio
        r = 0.5 * float(np.linalg.norm(hi - lo)) + float(np.linalg.norm(0.5 * (hi + lo)))
        return h, r

    def _alloc(self):
        P, S, F = max(self.pair_count, 1), self.slot_cap, self.face_cap
        with wp.ScopedDevice(self.device):
            hs = HydroState()
            pa = self.pairs[:, 0] if self.pair_count else np.zeros(1, np.int32)
            pb = self.pairs[:, 1] if self.pair_count else np.zeros(1, np.int32)
            hs.pair_a = wp.array(pa, dtype=int)
            hs.pair_b = wp.array(pb, dtype=int)
            hs.pair_h = wp.array(self.pair_voxel if self.pair_count else np.ones(1), dtype=float)
            hs.pair_keff = wp.array(self.pair_keff if self.pair_count else np.ones(1), dtype=float)
            hs.pair_count = self.pair_count
            hs.counters = wp.zeros(3, dtype=int)
            hs.overflow = wp.zeros(5, dtype=int)
            hs.slot_cap = S
            hs.cells_per_slot = self.cells_per_slot
            hs.slot_pair = wp.zeros(S, dtype=int)
            hs.slot_lo = wp.zeros(S, dtype=wp.vec3)
            hs.slot_h = wp.zeros(S, dtype=float)
            hs.slot_dims = wp.zeros(S, dtype=wp.vec3i)
            hs.slot_band = wp.zeros(S, dtype=float)
            hs.face_cap = F
            hs.face_slot = wp.zeros(F, dtype=int)
            hs.face_x = wp.zeros(F, dtype=wp.vec3)
            hs.face_n = wp.zeros(F, dtype=wp.vec3)
            hs.face_area = wp.zeros(F, dtype=float)
            hs.face_p = wp.zeros(F, dtype=float)
            hs.face_fp = wp.zeros(F, dtype=int)
            hs.face_bin = wp.zeros(F, dtype=int)
            hs.surf_cap = self.surf_cap
            hs.surf = wp.zeros(max(3 * self.surf_cap, 1), dtype=wp.vec3)
            hs.surf_pair = wp.zeros(max(self.surf_cap, 1), dtype=int)
            hs.dirs = wp.array(_bin_dirs(), dtype=wp.vec3)
            red = self.config.reduce_contacts
            nb = S * NUM_BINS if red else 1
            det = self.deterministic and red
            hs.bin_q = wp.zeros(nb * _NQ, dtype=float)
            hs.bin_fx = wp.zeros(nb * _NQ if det else 1, dtype=wp.int64)
            hs.bin_exp = wp.zeros(nb * 3 if det else 1, dtype=int)
            hs.bin_npen = wp.zeros(nb, dtype=int)
            hs.rep_score = wp.zeros(nb * NUM_REPS, dtype=float)
            hs.rep_fp = wp.zeros(nb * NUM_REPS, dtype=int)
            hs.rep_face = wp.zeros(nb * NUM_REPS, dtype=int)
            hs.mant_bits = self.mant_bits
            self._hs = hs
            self._stiff_scratch = None
            self._filter_tmp = None

    # ------------------------------------------------------------------ pipeline hooks
    def prepare(self, contact_capacity: int, candidate_capacity: int) -> None:
        """Allocate the staging buffers of a pipeline (outside :meth:`launch`, for graph capture)."""
        if self.deterministic:
            self.stiffness_scratch(contact_capacity)
        n = max(int(candidate_capacity), 1)
        if self._filter_tmp is None or self._filter_tmp.shape[0] < n:
            self._filter_tmp = wp.zeros(n, dtype=wp.vec2i, device=self.device)
            self._filter_count = wp.zeros(1, dtype=int, device=self.device)

    def stiffness_scratch(self, capacity: int):
        """A per-contact stiffness staging array of ``capacity`` (deterministic pipelines)."""
        if self._stiff_scratch is None or self._stiff_scratch.shape[0] < capacity:
            self._stiff_scratch = wp.zeros(max(int(capacity), 1), dtype=float, device=self.device)
        return self._stiff_scratch

    def filter_candidates(self, model, candidates, count, out: ContactOut) -> None:
        """Remove hydroelastic pairs from a broad-phase candidate list in place (3 launches);
        candidate pairs the broad phase dropped are counted in ``out``'s overflow counters."""
        dev = self.device
        if self._filter_tmp is None or self._filter_tmp.shape[0] < candidates.shape[0]:
            self._filter_tmp = wp.zeros(candidates.shape[0], dtype=wp.vec2i, device=dev)
            self._filter_count = wp.zeros(1, dtype=int, device=dev)
        g = _grid_dim(dev, candidates.shape[0])
        wp.launch(_filter_copy_kernel, dim=g, inputs=[candidates, count, self._filter_tmp, self._filter_count, out, g],
                  device=dev, record_tape=False)  # fmt: skip
        wp.launch(_zero_count_kernel, dim=1, inputs=[count], device=dev, record_tape=False)
        wp.launch(_filter_back_kernel, dim=g,
                  inputs=[self._filter_tmp, self._filter_count, model.shape_flags, candidates, count, g],
                  device=dev, record_tape=False)  # fmt: skip

    def launch(self, shape_X, lower, upper, out: ContactOut, stiffness, body_q) -> None:
        """Generate the hydroelastic contacts of this step into ``out`` (per-contact stiffness into
        ``stiffness``, indexed like ``out``). ``shape_X``: world shape transforms; ``lower`` /
        ``upper``: world shape AABBs (padded by margin + gap); fixed launch dims, no host sync."""
        if not self.pair_count:
            return
        model, dev, hs, cfg = self.model, self.device, self._hs, self.config
        det = int(self.deterministic and cfg.reduce_contacts)
        red = bool(cfg.reduce_contacts)
        g = _grid_dim(dev, hs.bin_q.shape[0])
        wp.launch(_reset_kernel, dim=g, inputs=[hs, det, g], device=dev, record_tape=False)
        wp.launch(_broad_kernel, dim=self.pair_count, inputs=[hs, lower, upper, model.shape_gap], device=dev,
                  record_tape=False)  # fmt: skip
        total = self.slot_cap * self.cells_per_slot
        g = _grid_dim(dev, total)
        wp.launch(self._cell_kernel, dim=g,
                  inputs=[hs, shape_X, model.shape_margin, self._sdf, self._pdata, int(not self.deterministic),
                          float(cfg.mc_edge_clamp_min), g],
                  device=dev, record_tape=False)  # fmt: skip
        gf = _grid_dim(dev, self.face_cap)
        if not red:
            wp.launch(_emit_all_kernel, dim=gf, inputs=[hs, out, stiffness, model.shape_body, body_q, gf],
                      device=dev, record_tape=False)  # fmt: skip
            return
        if det:
            wp.launch(_bin_exp_kernel, dim=gf, inputs=[hs, gf], device=dev, record_tape=False)
        wp.launch(_bin_accum_kernel, dim=gf, inputs=[hs, det, gf], device=dev, record_tape=False)
        if det:
            gq = _grid_dim(dev, self.slot_cap * NUM_BINS * _NQ)
            wp.launch(_bin_decode_kernel, dim=gq, inputs=[hs, gq], device=dev, record_tape=False)
        for phase in range(3):
            wp.launch(_rep_kernel, dim=gf, inputs=[hs, phase, gf], device=dev, record_tape=False)
        gk = _grid_dim(dev, self.slot_cap * NUM_BINS)
        wp.launch(_emit_reduced_kernel, dim=gk,
                  inputs=[hs, out, stiffness, model.shape_body, body_q, int(cfg.normal_matching),
                          int(cfg.anchor_contact), float(cfg.margin_contact_area), gk],
                  device=dev, record_tape=False)  # fmt: skip

    @staticmethod
    def gather_stiffness(count, capacity: int, order, src, dst, device) -> None:
        """``dst[i] = src[order[i]]`` for the first ``count`` contacts (after a deterministic sort)."""
        g = _grid_dim(device, capacity)
        wp.launch(_gather_stiffness_kernel, dim=g, inputs=[count, int(capacity), order, src, dst, g], device=device,
                  record_tape=False)  # fmt: skip

    # ------------------------------------------------------------------ diagnostics (host sync)
    def overflow_counts(self, reset: bool = False) -> dict:
        """Cumulative buffer overflow counts (reads the device: call outside graph capture)."""
        o = self._hs.overflow.numpy().copy()  # (a view on CPU)
        if reset:
            self._hs.overflow.zero_()
        return {"broad": int(o[OVF_BROAD]), "iso": int(o[OVF_ISO]), "face": int(o[OVF_FACE]),
                "contact": int(o[OVF_CONTACT]), "surface": int(o[OVF_SURFACE])}  # fmt: skip

    def check_buffers(self, reset: bool = True) -> bool:
        """Warn (``RuntimeWarning``) when a buffer overflowed since the last check; returns whether
        everything fit."""
        c = self.overflow_counts(reset=reset)
        bad = {k: v for k, v in c.items() if v}
        if bad:
            warnings.warn(f"Hydroelastic buffer overflow {bad}: contacts were dropped or iso grids coarsened; "
                          "increase HydroelasticSDF.Config.buffer_fraction (or the buffer_mult_* of the stage)",
                          RuntimeWarning, stacklevel=2)  # fmt: skip
        return not bad

    def stats(self) -> dict:
        """Last step's active pair slots, faces and surface triangles (reads the device)."""
        c = self._hs.counters.numpy()
        return {"pairs": int(min(c[0], self.slot_cap)), "faces": int(min(c[1], self.face_cap)),
                "surface_triangles": int(min(c[2], self.surf_cap))}  # fmt: skip

    def get_contact_surface(self):
        """The last step's iso-surface triangles ``(T, 3, 3)`` (world, [m]) and their pair index
        ``(T,)``; requires ``Config.output_contact_surface``."""
        if not self.config.output_contact_surface:
            raise RuntimeError("HydroelasticSDF.get_contact_surface: set Config.output_contact_surface=True")
        t = int(min(self._hs.counters.numpy()[2], self.surf_cap))
        v = self._hs.surf.numpy()[: 3 * t].reshape(t, 3, 3)
        return v, self._hs.surf_pair.numpy()[:t]

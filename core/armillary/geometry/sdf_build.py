"""Construction of :class:`~armillary.geometry.sdf.SDF` grids: triangle meshes
(:func:`build_mesh_sdf`, behind :meth:`armillary.Mesh.build_sdf`), analytic primitives
(:func:`primitive_sdf`), the edge pre-filter used by the SDF-mesh contact route
(:func:`mesh_edges`, :func:`filter_sdf_edges`) and the on-disk cache.

Grid layout (shared by meshes and primitives): the geometry's AABB (in the grid frame) padded
by ``margin`` on every side; uniform voxel size ``h`` = longest padded extent /
``max_resolution`` (or ``target_voxel_size`` when given, which takes precedence); the cell
count along every axis is rounded up to a multiple of 8 (so the grid splits into 8x8x8-cell
bricks) and the grid is centered on the padded box. Samples per axis = cells + 1.

Mesh distances (all Warp kernels, any device):

1. *coarse pass*: the exact signed distance at every 8th sample (the brick corners);
2. *brick classification*: distance is 1-Lipschitz, so a brick whose corner value ``d`` has
   ``d - diag >= band_hi`` (or ``d + diag <= band_lo``), ``diag`` the brick diagonal, lies
   entirely outside the narrow band; every other brick is *active*;
3. *fine pass*: samples of active bricks get the exact signed distance; the others the
   trilinear interpolation of their brick's corner values, clamped to ``>= band_hi`` (outside)
   or ``<= band_lo`` (inside): correct sign, magnitude at least the band limit.

Sign: watertight meshes use ray parity (:func:`warp.mesh_query_point_sign_parity`, 3 rays),
others the fast winding number (:func:`warp.mesh_query_point_sign_winding_number`, inside
where the winding number exceeds 0.5), which degrades gracefully on open meshes.
"""

from __future__ import annotations

import hashlib
import math
import os
import tempfile

import numpy as np
import warp as wp

wp.set_module_options({"enable_backward": False})

from ..sim.enums import GeoType
from .sdf import SDF

#: max_resolution used when neither max_resolution nor target_voxel_size is given
DEFAULT_MAX_RESOLUTION = 64
#: cells per brick edge (the coarse pass samples every BRICK-th grid point)
BRICK = 8
#: on-disk cache format version (part of every cache key)
CACHE_VERSION = 1
#: default relative extents of the edge-absorption box (fractions of the mesh AABB diagonal)
EDGE_BOX_HALF_NORMAL_REL = 0.002
EDGE_BOX_HALF_LATERAL_REL = 0.005
#: rays cast by the parity sign test (odd; majority vote)
PARITY_SAMPLES = 3
_FAR = 1.0e6
_T_SPHERE = wp.constant(int(GeoType.SPHERE))
_T_BOX = wp.constant(int(GeoType.BOX))
_T_CAPSULE = wp.constant(int(GeoType.CAPSULE))
_T_CYLINDER = wp.constant(int(GeoType.CYLINDER))
_T_CONE = wp.constant(int(GeoType.CONE))
_T_ELLIPSOID = wp.constant(int(GeoType.ELLIPSOID))
_WP_FAR = wp.constant(_FAR)
_WP_PARITY = wp.constant(PARITY_SAMPLES)


# ---------------------------------------------------------------------------------------------
# argument validation and grid layout
# ---------------------------------------------------------------------------------------------


def _check_grid_args(max_resolution, target_voxel_size, narrow_band_range, margin, who: str):
    if target_voxel_size is not None:
        try:
            tv = float(target_voxel_size)
        except (TypeError, ValueError):
            raise ValueError(f"{who}: target_voxel_size={target_voxel_size!r} must be a number > 0 [m]") from None
        if not (math.isfinite(tv) and tv > 0.0):
            raise ValueError(f"{who}: target_voxel_size={target_voxel_size!r} must be a finite number > 0 [m]")
    if max_resolution is not None:
        if isinstance(max_resolution, bool) or not isinstance(max_resolution, (int, np.integer)):
            raise ValueError(f"{who}: max_resolution={max_resolution!r} must be a positive integer multiple of 8")
        if int(max_resolution) <= 0 or int(max_resolution) % BRICK != 0:
            raise ValueError(f"{who}: max_resolution={max_resolution} must be a positive multiple of 8 "
                             "(8, 16, ..., 256)")  # fmt: skip
    try:
        lo, hi = (float(x) for x in narrow_band_range)
    except (TypeError, ValueError):
        raise ValueError(f"{who}: narrow_band_range={narrow_band_range!r} must be a pair (inner, outer) [m]") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"{who}: narrow_band_range={narrow_band_range!r} must satisfy inner < outer "
                         "(typically inner < 0 < outer) with finite values")  # fmt: skip
    try:
        mg = float(margin)
    except (TypeError, ValueError):
        raise ValueError(f"{who}: margin={margin!r} must be a number >= 0 [m]") from None
    if not (math.isfinite(mg) and mg >= 0.0):
        raise ValueError(f"{who}: margin={margin!r} must be a finite number >= 0 [m]")
    return lo, hi, mg


def _grid_layout(lo, hi, margin: float, max_resolution, target_voxel_size):
    """``(lower, voxel_size, cells)`` of the grid covering ``[lo, hi]`` padded by ``margin``."""
    lo = np.asarray(lo, np.float64) - margin
    hi = np.asarray(hi, np.float64) + margin
    ext = hi - lo
    if target_voxel_size is not None:
        h = float(target_voxel_size)
    else:
        res = DEFAULT_MAX_RESOLUTION if max_resolution is None else int(max_resolution)
        if not ext.max() > 0.0:
            raise ValueError("SDF grid: the geometry has zero extent and margin is 0; nothing to sample")
        h = float(ext.max()) / res
    cells = np.maximum(np.ceil(ext / h * (1.0 - 1.0e-6)), 1).astype(np.int64)  # float32 vertex slack
    cells = ((cells + BRICK - 1) // BRICK) * BRICK
    if int(np.prod(cells + 1)) > 2**31 - 1:
        raise ValueError(f"SDF grid: {tuple(int(c) + 1 for c in cells)} samples exceed the int32 index range; "
                         "use a larger target_voxel_size or a smaller max_resolution")  # fmt: skip
    center = 0.5 * (lo + hi)
    lower = center - 0.5 * h * cells
    return lower, h, tuple(int(c) for c in cells)


# ---------------------------------------------------------------------------------------------
# mesh kernels
# ---------------------------------------------------------------------------------------------


@wp.func
def _mesh_signed(mesh: wp.uint64, p: wp.vec3, watertight: int):
    d = float(_WP_FAR)
    s = float(1.0)
    if watertight != 0:
        q = wp.mesh_query_point_sign_parity(mesh, p, _WP_FAR, _WP_PARITY, 0.1)
        if q.result:
            d = wp.length(p - wp.mesh_eval_position(mesh, q.face, q.u, q.v))
            s = q.sign
    else:
        q = wp.mesh_query_point_sign_winding_number(mesh, p, _WP_FAR, 2.0, 0.5)
        if q.result:
            d = wp.length(p - wp.mesh_eval_position(mesh, q.face, q.u, q.v))
            s = q.sign
    if s < 0.0:
        return -d
    return d


@wp.func
def _parity_sign(mesh: wp.uint64, p: wp.vec3):
    """-1 inside / +1 outside a watertight mesh: majority of three ray-crossing parities."""
    votes = int(0)
    n = wp.mesh_query_ray_count_intersections(mesh, p, wp.normalize(wp.vec3(0.5773, 0.6151, 0.5371)))
    votes += n % 2
    n = wp.mesh_query_ray_count_intersections(mesh, p, wp.normalize(wp.vec3(-0.6412, 0.3297, -0.6928)))
    votes += n % 2
    n = wp.mesh_query_ray_count_intersections(mesh, p, wp.normalize(wp.vec3(0.2871, -0.7963, 0.5326)))
    votes += n % 2
    if votes >= 2:
        return -1.0
    return 1.0


@wp.func
def _mesh_signed_band(mesh: wp.uint64, p: wp.vec3, band: float, watertight: int):
    """Exact signed distance where |d| < band; elsewhere +-band (watertight) or exact (open)."""
    q = wp.mesh_query_point_no_sign(mesh, p, band)
    if watertight != 0:
        s = _parity_sign(mesh, p)
        if q.result:
            return s * wp.length(p - wp.mesh_eval_position(mesh, q.face, q.u, q.v))
        return s * band
    if q.result:
        d = wp.length(p - wp.mesh_eval_position(mesh, q.face, q.u, q.v))
        w = wp.mesh_query_point_sign_winding_number(mesh, p, d * 1.0001 + 1.0e-9, 2.0, 0.5)
        if w.result:
            if w.sign < 0.0:
                return -d
            return d
    return _mesh_signed(mesh, p, watertight)


@wp.kernel
def _coarse_kernel(mesh: wp.uint64, lower: wp.vec3, step: float, cdims: wp.vec3i, watertight: int,
                   out: wp.array(dtype=float)):  # fmt: skip
    tid = wp.tid()
    i = tid % cdims[0]
    j = (tid // cdims[0]) % cdims[1]
    k = tid // (cdims[0] * cdims[1])
    p = lower + step * wp.vec3(float(i), float(j), float(k))
    out[tid] = _mesh_signed(mesh, p, watertight)


@wp.kernel
def _brick_kernel(coarse: wp.array(dtype=float), cdims: wp.vec3i, bdims: wp.vec3i, diag: float, band_lo: float,
                  band_hi: float, side: wp.array(dtype=int)):  # fmt: skip
    tid = wp.tid()
    bi = tid % bdims[0]
    bj = (tid // bdims[0]) % bdims[1]
    bk = tid // (bdims[0] * bdims[1])
    r = int(0)
    for c in range(8):
        ci = bi + (c & 1)
        cj = bj + ((c >> 1) & 1)
        ck = bk + ((c >> 2) & 1)
        d = coarse[ci + cdims[0] * (cj + cdims[1] * ck)]
        if d - diag >= band_hi:
            r = 1
        if d + diag <= band_lo:
            r = -1
    side[tid] = r


@wp.kernel
def _fine_kernel(mesh: wp.uint64, lower: wp.vec3, h: float, dims: wp.vec3i, coarse: wp.array(dtype=float),
                 cdims: wp.vec3i, bdims: wp.vec3i, side: wp.array(dtype=int), band_lo: float, band_hi: float,
                 band_abs: float, watertight: int, out: wp.array(dtype=float)):  # fmt: skip
    tid = wp.tid()
    i = tid % dims[0]
    j = (tid // dims[0]) % dims[1]
    k = tid // (dims[0] * dims[1])
    bi = wp.min(i // 8, bdims[0] - 1)
    bj = wp.min(j // 8, bdims[1] - 1)
    bk = wp.min(k // 8, bdims[2] - 1)
    # a sample on a brick face belongs to every brick sharing it: exact when any is active
    active = int(0)
    for c in range(8):
        ni = bi - (c & 1)
        nj = bj - ((c >> 1) & 1)
        nk = bk - ((c >> 2) & 1)
        ok = ni >= 0 and nj >= 0 and nk >= 0
        if (c & 1) != 0 and i % 8 != 0:
            ok = False
        if ((c >> 1) & 1) != 0 and j % 8 != 0:
            ok = False
        if ((c >> 2) & 1) != 0 and k % 8 != 0:
            ok = False
        if ok:
            if side[ni + bdims[0] * (nj + bdims[1] * nk)] == 0:
                active = 1
    if active != 0:
        p = lower + h * wp.vec3(float(i), float(j), float(k))
        out[tid] = _mesh_signed_band(mesh, p, band_abs, watertight)
        return
    fx = float(i - 8 * bi) / 8.0
    fy = float(j - 8 * bj) / 8.0
    fz = float(k - 8 * bk) / 8.0
    acc = float(0.0)
    for c in range(8):
        dx = c & 1
        dy = (c >> 1) & 1
        dz = (c >> 2) & 1
        w = wp.where(dx == 1, fx, 1.0 - fx) * wp.where(dy == 1, fy, 1.0 - fy) * wp.where(dz == 1, fz, 1.0 - fz)
        acc += w * coarse[(bi + dx) + cdims[0] * ((bj + dy) + cdims[1] * (bk + dz))]
    sd = side[bi + bdims[0] * (bj + bdims[1] * bk)]
    if sd > 0:
        acc = wp.max(acc, band_hi)
    else:
        acc = wp.min(acc, band_lo)
    out[tid] = acc


# ---------------------------------------------------------------------------------------------
# edges
# ---------------------------------------------------------------------------------------------


def _edge_table(indices):
    """``(edges (E,2) int32 sorted pairs, count (E,), face_a (E,), face_b (E,))``: unique
    undirected edges, the number of triangles using each, and the first two of them (-1)."""
    f = np.asarray(indices, np.int64).reshape(-1, 3)
    if len(f) == 0:
        z = np.zeros(0, np.int64)
        return np.zeros((0, 2), np.int32), z, z, z
    a = f.reshape(-1)
    b = f[:, [1, 2, 0]].reshape(-1)
    lo = np.minimum(a, b)
    hi = np.maximum(a, b)
    face = np.repeat(np.arange(len(f)), 3)
    nv = int(max(a.max(), b.max())) + 1
    key = lo * nv + hi
    order = np.argsort(key, kind="stable")
    ks = key[order]
    first = np.ones(len(ks), bool)
    first[1:] = ks[1:] != ks[:-1]
    starts = np.flatnonzero(first)
    count = np.diff(np.append(starts, len(ks)))
    uk = ks[starts]
    edges = np.stack([uk // nv, uk % nv], axis=1).astype(np.int32)
    fa = face[order][starts]
    fb = np.where(count >= 2, face[order][np.minimum(starts + 1, len(ks) - 1)], -1)
    return edges, count, fa, fb


def mesh_edges(indices) -> np.ndarray:
    """Unique undirected edges ``(E, 2)`` int32 (``e[0] < e[1]``) of a triangle index list."""
    return _edge_table(indices)[0]


def is_watertight(indices) -> bool:
    """Every edge shared by exactly two triangles that traverse it in opposite directions."""
    f = np.asarray(indices, np.int64).reshape(-1, 3)
    if len(f) == 0:
        return False
    a = f.reshape(-1)
    b = f[:, [1, 2, 0]].reshape(-1)
    if np.any(a == b):
        return False
    nv = int(f.max()) + 1
    fwd = np.sort(a * nv + b)
    if np.any(fwd[1:] == fwd[:-1]):  # a directed edge used twice: inconsistent orientation
        return False
    rev = np.sort(b * nv + a)
    return bool(np.array_equal(fwd, rev))


@wp.kernel
def _absorb_kernel(bvh: wp.uint64, p0: wp.array(dtype=wp.vec3), p1: wp.array(dtype=wp.vec3),
                   nrm: wp.array(dtype=wp.vec3), cand: wp.array(dtype=int), half_n: float, half_l: float,
                   eps: float, absorbed: wp.array(dtype=int)):  # fmt: skip
    f = wp.tid()
    if cand[f] == 0:
        return
    a = p0[f]
    b = p1[f]
    lf = wp.length(b - a)
    q = wp.bvh_query_aabb(bvh, wp.min(a, b), wp.max(a, b))
    e = int(0)
    while wp.bvh_query_next(q, e):
        if e == f:
            continue
        ea = p0[e]
        eb = p1[e]
        le = wp.length(eb - ea)
        if le < lf or (le == lf and e > f):
            continue
        if le <= 0.0:
            continue
        t = (eb - ea) / le
        n = nrm[e]
        n = n - wp.dot(n, t) * t
        nl = wp.length(n)
        if nl < 1.0e-12:
            continue
        n = n / nl
        bn = wp.cross(t, n)
        m = 0.5 * (ea + eb)
        inside = int(1)
        for w in range(2):
            x = wp.where(w == 0, a, b) - m
            if wp.abs(wp.dot(x, t)) > 0.5 * le + eps:
                inside = 0
            if wp.abs(wp.dot(x, n)) > half_n + eps:
                inside = 0
            if wp.abs(wp.dot(x, bn)) > half_l + eps:
                inside = 0
        if inside != 0:
            absorbed[f] = 1
            return


def filter_sdf_edges(vertices, indices, angle_threshold_rad: float = math.radians(0.1), box_absorption: bool = False,
                     half_normal=None, half_normal_rel=None, half_lateral=None, half_lateral_rel=None,
                     device=None) -> np.ndarray:  # fmt: skip
    """The edge subset ``(K, 2)`` int32 kept for SDF-mesh contacts.

    * boundary / non-manifold edges (not shared by exactly two triangles) are always kept;
    * a manifold edge is dropped when the dihedral angle between its two faces (angle between
      their normals) is below ``angle_threshold_rad`` (0 keeps them all);
    * ``box_absorption``: a surviving manifold edge is also dropped when both its end points lie
      in the oriented box of a longer surviving edge: along that edge its half length, along its
      (face-averaged) normal ``half_normal``, across it ``half_lateral`` [m]; absolute values win
      over the ``*_rel`` fractions of the mesh AABB diagonal (defaults
      :data:`EDGE_BOX_HALF_NORMAL_REL`, :data:`EDGE_BOX_HALF_LATERAL_REL`). Absorbers are not
      themselves checked for absorption (one level, order independent);
    * a negative ``angle_threshold_rad`` disables the simplification: every edge is kept.
    """
    edges, count, fa, fb = _edge_table(indices)
    if angle_threshold_rad is None or float(angle_threshold_rad) < 0.0 or len(edges) == 0:
        return edges
    v = np.asarray(vertices, np.float64).reshape(-1, 3)
    f = np.asarray(indices, np.int64).reshape(-1, 3)
    fn = np.cross(v[f[:, 1]] - v[f[:, 0]], v[f[:, 2]] - v[f[:, 0]])
    fn /= np.maximum(np.linalg.norm(fn, axis=1, keepdims=True), 1.0e-30)
    manifold = count == 2
    cosang = np.einsum("ij,ij->i", fn[fa], fn[np.maximum(fb, 0)])
    ang = np.arccos(np.clip(cosang, -1.0, 1.0))
    keep = ~manifold | (ang >= float(angle_threshold_rad))
    if box_absorption and np.count_nonzero(keep) > 1:
        diag = float(np.linalg.norm(v.max(axis=0) - v.min(axis=0))) if len(v) else 0.0
        hn = float(half_normal) if half_normal is not None else diag * (
            EDGE_BOX_HALF_NORMAL_REL if half_normal_rel is None else float(half_normal_rel))
        hl = float(half_lateral) if half_lateral is not None else diag * (
            EDGE_BOX_HALF_LATERAL_REL if half_lateral_rel is None else float(half_lateral_rel))
        if hn < 0.0 or hl < 0.0:
            raise ValueError(f"filter_sdf_edges: edge box half extents must be >= 0, got normal={hn}, lateral={hl}")
        ids = np.flatnonzero(keep)
        ke = edges[ids]
        p0 = v[ke[:, 0]]
        p1 = v[ke[:, 1]]
        nrm = fn[fa[ids]] + np.where(fb[ids, None] >= 0, fn[np.maximum(fb[ids], 0)], 0.0)
        tvec = p1 - p0
        tl = np.linalg.norm(tvec, axis=1, keepdims=True)
        t = tvec / np.maximum(tl, 1e-30)
        nn = nrm - np.einsum("ij,ij->i", nrm, t)[:, None] * t
        nn /= np.maximum(np.linalg.norm(nn, axis=1, keepdims=True), 1e-30)
        bn = np.cross(t, nn)
        ext = np.abs(t) * 0.5 * tl + np.abs(nn) * hn + np.abs(bn) * hl + 1e-9 * max(diag, 1e-9)
        mid = 0.5 * (p0 + p1)
        dev = wp.get_device(device)
        lowers = wp.array((mid - ext).astype(np.float32), dtype=wp.vec3, device=dev)
        uppers = wp.array((mid + ext).astype(np.float32), dtype=wp.vec3, device=dev)
        bvh = wp.Bvh(lowers, uppers)
        cand = wp.array(manifold[ids].astype(np.int32), dtype=int, device=dev)
        absorbed = wp.zeros(len(ids), dtype=int, device=dev)
        wp.launch(_absorb_kernel, dim=len(ids), device=dev,
                  inputs=[bvh.id, wp.array(p0.astype(np.float32), dtype=wp.vec3, device=dev),
                          wp.array(p1.astype(np.float32), dtype=wp.vec3, device=dev),
                          wp.array(nrm.astype(np.float32), dtype=wp.vec3, device=dev), cand, hn, hl,
                          1.0e-6 * max(diag, 1e-9), absorbed])  # fmt: skip
        keep[ids[absorbed.numpy() != 0]] = False
    return edges[keep]


# ---------------------------------------------------------------------------------------------
# mesh SDF build + cache
# ---------------------------------------------------------------------------------------------


def _check_scale(scale, who):
    if scale is None:
        return None
    try:
        s = np.asarray(scale, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError(f"{who}: scale={scale!r} must be 3 non-zero finite numbers") from None
    if s.size != 3 or not np.all(np.isfinite(s)) or np.any(s == 0.0):
        raise ValueError(f"{who}: scale={scale!r} must be 3 non-zero finite numbers")
    return tuple(float(x) for x in s)


def cache_key(vertices, indices, params: dict) -> str:
    """Content hash of the mesh data and the build parameters (everything but shape_margin)."""
    h = hashlib.sha256()
    h.update(f"armillary-sdf-v{CACHE_VERSION}".encode())
    h.update(np.ascontiguousarray(vertices, dtype=np.float32).tobytes())
    h.update(b"|")
    h.update(np.ascontiguousarray(indices, dtype=np.int32).tobytes())
    for k in sorted(params):
        h.update(f"|{k}={params[k]!r}".encode())
    return h.hexdigest()[:40]


def _load_cache(path):
    try:
        with np.load(path, allow_pickle=False) as z:
            if int(z["version"]) != CACHE_VERSION:
                return None
            values = np.array(z["values"], np.float32)
            dims = tuple(int(x) for x in z["dims"])
            lower = np.array(z["lower"], np.float64)
            voxel = float(z["voxel"])
            band = tuple(float(x) for x in z["band"])
            baked = None if int(z["has_scale"]) == 0 else tuple(float(x) for x in z["scale"])
            edges = np.array(z["edges"], np.int32).reshape(-1, 2)
        sdf = SDF(values, dims, lower, voxel, baked_scale=baked, narrow_band_range=band)
        return sdf, edges
    except Exception:  # corrupt / truncated / foreign file: rebuilt transparently
        return None


def _save_cache(path, sdf: SDF, edges):
    d = os.path.dirname(path)
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, version=np.int64(CACHE_VERSION), values=sdf.values, dims=np.asarray(sdf.dims, np.int64),
                     lower=sdf.lower, voxel=np.float64(sdf.voxel_size), band=np.asarray(sdf.narrow_band_range),
                     has_scale=np.int64(sdf.baked_scale is not None),
                     scale=np.asarray(sdf.baked_scale if sdf.baked_scale is not None else (1.0, 1.0, 1.0)),
                     edges=np.asarray(edges, np.int32).reshape(-1, 2))  # fmt: skip
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _mesh_sdf_values(verts, idx, watertight, lower, h, cells, band_lo, band_hi, device):
    dev = wp.get_device(device)
    pts = wp.array(verts.astype(np.float32), dtype=wp.vec3, device=dev)
    ind = wp.array(idx.astype(np.int32).reshape(-1), dtype=wp.int32, device=dev)
    mesh = wp.Mesh(points=pts, indices=ind, support_winding_number=not watertight)
    nx, ny, nz = (c + 1 for c in cells)
    bx, by, bz = (c // BRICK for c in cells)
    cx, cy, cz = bx + 1, by + 1, bz + 1
    lo = wp.vec3(*(float(x) for x in lower))
    wt = 1 if watertight else 0
    coarse = wp.empty(cx * cy * cz, dtype=float, device=dev)
    wp.launch(_coarse_kernel, dim=cx * cy * cz, device=dev,
              inputs=[mesh.id, lo, float(BRICK * h), wp.vec3i(cx, cy, cz), wt, coarse])  # fmt: skip
    side = wp.empty(bx * by * bz, dtype=int, device=dev)
    diag = BRICK * h * math.sqrt(3.0)
    wp.launch(_brick_kernel, dim=bx * by * bz, device=dev,
              inputs=[coarse, wp.vec3i(cx, cy, cz), wp.vec3i(bx, by, bz), float(diag), float(band_lo),
                      float(band_hi), side])  # fmt: skip
    out = wp.empty(nx * ny * nz, dtype=float, device=dev)
    band_abs = float(max(-band_lo, band_hi, 1.0e-9))
    wp.launch(_fine_kernel, dim=nx * ny * nz, device=dev,
              inputs=[mesh.id, lo, float(h), wp.vec3i(nx, ny, nz), coarse, wp.vec3i(cx, cy, cz),
                      wp.vec3i(bx, by, bz), side, float(band_lo), float(band_hi), band_abs, wt, out])  # fmt: skip
    values = out.numpy()
    active = int(np.count_nonzero(side.numpy() == 0))
    return values, (nx, ny, nz), active, bx * by * bz


def build_mesh_sdf(mesh, max_resolution=None, narrow_band_range=(-0.1, 0.1), margin=0.05, shape_margin=0.0,
                   scale=None, *, target_voxel_size=None, edge_lower_angle_threshold_rad=math.radians(0.1),
                   edge_box_absorption=False, edge_box_half_normal=None, edge_box_half_normal_rel=None,
                   edge_box_half_lateral=None, edge_box_half_lateral_rel=None, cache_dir=None,
                   device=None):  # fmt: skip
    """Build (or load from ``cache_dir``) the SDF of ``mesh``; returns ``(sdf, sdf_edges)``.
    See :meth:`armillary.Mesh.build_sdf` for the parameters."""
    who = "Mesh.build_sdf"
    band_lo, band_hi, mg = _check_grid_args(max_resolution, target_voxel_size, narrow_band_range, margin, who)
    sc = _check_scale(scale, who)
    try:
        smg = float(shape_margin)
    except (TypeError, ValueError):
        raise ValueError(f"{who}: shape_margin={shape_margin!r} must be a finite number [m]") from None
    if not math.isfinite(smg):
        raise ValueError(f"{who}: shape_margin={shape_margin!r} must be a finite number [m]")
    verts = np.asarray(mesh.vertices, np.float64).reshape(-1, 3)
    idx = np.asarray(mesh.indices, np.int64).reshape(-1, 3)
    if len(idx) == 0 or len(verts) == 0:
        raise ValueError(f"{who}: the mesh is empty ({len(verts)} vertices, {len(idx)} triangles); nothing to build")
    ang = edge_lower_angle_threshold_rad
    if ang is not None and not math.isfinite(float(ang)):
        raise ValueError(f"{who}: edge_lower_angle_threshold_rad={ang!r} must be finite (negative disables)")
    params = dict(max_resolution=None if max_resolution is None else int(max_resolution),
                  target_voxel_size=None if target_voxel_size is None else float(target_voxel_size),
                  narrow_band_range=(band_lo, band_hi), margin=mg, scale=sc,
                  edge_angle=None if ang is None else float(ang), edge_box_absorption=bool(edge_box_absorption),
                  edge_box=(edge_box_half_normal, edge_box_half_normal_rel, edge_box_half_lateral,
                            edge_box_half_lateral_rel))  # fmt: skip
    path = None
    if cache_dir is not None:
        key = cache_key(mesh.vertices, mesh.indices, params)
        path = os.path.join(os.fspath(cache_dir), f"sdf_{key}.npz")
        if os.path.isfile(path):
            hit = _load_cache(path)
            if hit is not None:
                sdf, edges = hit
                sdf.shape_margin = smg
                sdf.active_bricks = None
                sdf.watertight = is_watertight(mesh.indices)
                sdf.cache_path = path
                sdf.loaded_from_cache = True
                return sdf, edges
    # grid frame = mesh frame with the baked scale applied
    gv = verts * np.asarray(sc) if sc is not None else verts
    gi = idx
    if sc is not None and sc[0] * sc[1] * sc[2] < 0.0:  # mirrored: keep the outward winding
        gi = idx[:, [0, 2, 1]]
    lower, h, cells = _grid_layout(gv.min(axis=0), gv.max(axis=0), mg, max_resolution, target_voxel_size)
    watertight = is_watertight(idx)
    values, dims, active, nbricks = _mesh_sdf_values(gv, gi, watertight, lower, h, cells, band_lo, band_hi, device)
    sdf = SDF(values, dims, lower, h, baked_scale=sc, shape_margin=smg, narrow_band_range=(band_lo, band_hi))
    sdf.active_bricks = (active, nbricks)
    sdf.watertight = watertight
    edges = filter_sdf_edges(verts, idx, -1.0 if ang is None else float(ang), bool(edge_box_absorption),
                             edge_box_half_normal, edge_box_half_normal_rel, edge_box_half_lateral,
                             edge_box_half_lateral_rel, device=device)  # fmt: skip
    sdf.loaded_from_cache = False
    sdf.cache_path = path
    if path is not None:
        _save_cache(path, sdf, edges)
    return sdf, edges


# ---------------------------------------------------------------------------------------------
# primitives
# ---------------------------------------------------------------------------------------------


@wp.func
def _seg_dist2d(p: wp.vec2, a: wp.vec2, b: wp.vec2):
    ab = b - a
    t = wp.clamp(wp.dot(p - a, ab) / wp.max(wp.dot(ab, ab), 1.0e-30), 0.0, 1.0)
    return wp.length(p - (a + t * ab))


@wp.func
def primitive_distance(t: int, s: wp.vec3, p: wp.vec3):
    """Signed distance [m] from the shape-local point ``p`` to primitive ``t`` of scale ``s``
    (exact except the ellipsoid, see :func:`primitive_sdf`, and the barrel cylinder)."""
    if t == _T_SPHERE:
        return wp.length(p) - s[0]
    if t == _T_BOX:
        q = wp.vec3(wp.abs(p[0]) - s[0], wp.abs(p[1]) - s[1], wp.abs(p[2]) - s[2])
        return wp.length(wp.max(q, wp.vec3(0.0))) + wp.min(wp.max(q[0], wp.max(q[1], q[2])), 0.0)
    if t == _T_CAPSULE:
        z = wp.clamp(p[2], -s[1], s[1])
        return wp.length(p - wp.vec3(0.0, 0.0, z)) - s[0]
    rho = wp.sqrt(p[0] * p[0] + p[1] * p[1])
    if t == _T_CYLINDER:
        dz = wp.abs(p[2]) - s[1]
        if s[2] > 0.0:
            # barrel: profile circle of radius s[2] through the rims (center at radial offset c)
            cb = s[0] - wp.sqrt(wp.max(s[2] * s[2] - s[1] * s[1], 0.0))
            dr = wp.length(wp.vec2(rho - cb, p[2])) - s[2]
            return wp.max(dz, dr)
        dr = rho - s[0]
        return wp.min(wp.max(dr, dz), 0.0) + wp.length(wp.vec2(wp.max(dr, 0.0), wp.max(dz, 0.0)))
    if t == _T_CONE:
        # revolved triangle (0,-h) (r,-h) (0,h) in the (rho, z) half plane; apex at +z
        q2 = wp.vec2(rho, p[2])
        va = wp.vec2(0.0, -s[1])
        vb = wp.vec2(s[0], -s[1])
        vc = wp.vec2(0.0, s[1])
        d = wp.min(_seg_dist2d(q2, va, vb), _seg_dist2d(q2, vb, vc))
        inside = p[2] >= -s[1] and p[2] <= s[1] and rho * 2.0 * s[1] <= s[0] * (s[1] - p[2])
        if inside:
            return -d
        return d
    if t == _T_ELLIPSOID:
        r = wp.vec3(wp.max(s[0], 1.0e-12), wp.max(s[1], 1.0e-12), wp.max(s[2], 1.0e-12))
        k0 = wp.length(wp.cw_div(p, r))
        k1 = wp.length(wp.cw_div(p, wp.cw_mul(r, r)))
        if k1 < 1.0e-20:
            return -wp.min(r[0], wp.min(r[1], r[2]))
        return k0 * (k0 - 1.0) / k1
    return float(1.0e6)


@wp.kernel
def _prim_kernel(t: int, s: wp.vec3, lower: wp.vec3, h: float, dims: wp.vec3i, out: wp.array(dtype=float)):
    tid = wp.tid()
    i = tid % dims[0]
    j = (tid // dims[0]) % dims[1]
    k = tid // (dims[0] * dims[1])
    p = lower + h * wp.vec3(float(i), float(j), float(k))
    out[tid] = primitive_distance(t, s, p)


def primitive_half_extents(geo_type: int, scale) -> np.ndarray:
    """Half extents of the local AABB of a primitive."""
    s = np.asarray(scale, np.float64).reshape(3)
    t = int(geo_type)
    if t == _T_SPHERE:
        return np.full(3, s[0])
    if t == int(GeoType.BOX) or t == _T_ELLIPSOID:
        return s.copy()
    if t == _T_CAPSULE:
        return np.array([s[0], s[0], s[1] + s[0]])
    if t in (int(GeoType.CYLINDER), int(GeoType.CONE)):
        return np.array([s[0], s[0], s[1]])
    raise ValueError(f"primitive_sdf: geo_type={geo_type!r} has no primitive SDF")


def primitive_sdf(geo_type, scale, max_resolution=None, target_voxel_size=None, narrow_band_range=(-0.1, 0.1),
                  margin=0.05, device=None) -> SDF:  # fmt: skip
    """Sampled SDF of an analytic primitive in its scaled local frame (``baked_scale=None``).

    ``geo_type``: SPHERE, BOX, CAPSULE, CYLINDER, CONE or ELLIPSOID; ``scale`` as in
    ``Model.shape_scale`` (sphere ``(r,0,0)``, box half extents, capsule / cone
    ``(r, half_height, 0)`` along local z with the cone apex at +z, cylinder
    ``(r, half_height, barrel)``, ellipsoid radii). Every sample holds the analytic signed
    distance (the narrow band is recorded but not needed: the whole grid is exact), except:
    the ellipsoid uses the first-order approximation ``k0 (k0 - 1) / k1`` with
    ``k0 = |p / r|``, ``k1 = |p / r^2|`` (exact for spheres and on the surface, correct sign,
    error grows with the aspect ratio away from the surface), and a barrel cylinder uses
    ``max(slab, profile circle)`` (exact inside and near the barrel, a lower bound at the rims).
    Grid layout and defaults as for meshes: ``max_resolution`` 64 when neither it nor
    ``target_voxel_size`` is given, ``margin`` 0.05 m.
    """
    who = "primitive_sdf"
    try:
        t = int(geo_type)
    except (TypeError, ValueError):
        raise ValueError(f"{who}: geo_type={geo_type!r} must be a GeoType") from None
    allowed = (GeoType.SPHERE, GeoType.BOX, GeoType.CAPSULE, GeoType.CYLINDER, GeoType.CONE, GeoType.ELLIPSOID)
    if t not in [int(a) for a in allowed]:
        name = GeoType(t).name if t in [int(g) for g in GeoType] else str(t)
        raise ValueError(f"{who}: geo_type {name} has no primitive SDF (allowed: "
                         f"{', '.join(a.name for a in allowed)}; use Mesh.build_sdf for meshes)")  # fmt: skip
    band_lo, band_hi, mg = _check_grid_args(max_resolution, target_voxel_size, narrow_band_range, margin, who)
    try:
        s = np.asarray(scale, np.float64).reshape(3)
    except (TypeError, ValueError):
        raise ValueError(f"{who}: scale={scale!r} must be 3 numbers") from None
    if not np.all(np.isfinite(s)):
        raise ValueError(f"{who}: scale={scale!r} must be finite")
    he = primitive_half_extents(t, s)
    if not np.all(he > 0.0):
        raise ValueError(f"{who}: scale={tuple(s)} gives a degenerate {GeoType(t).name} (extents {tuple(he)})")
    lower, h, cells = _grid_layout(-he, he, mg, max_resolution, target_voxel_size)
    dims = tuple(c + 1 for c in cells)
    dev = wp.get_device(device)
    out = wp.empty(dims[0] * dims[1] * dims[2], dtype=float, device=dev)
    wp.launch(_prim_kernel, dim=out.shape[0], device=dev,
              inputs=[t, wp.vec3(*(float(x) for x in s)), wp.vec3(*(float(x) for x in lower)), float(h),
                      wp.vec3i(*dims), out])  # fmt: skip
    return SDF(out.numpy(), dims, lower, h, baked_scale=None, narrow_band_range=(band_lo, band_hi))

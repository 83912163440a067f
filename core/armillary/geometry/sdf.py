"""Signed distance fields (SDFs) as collision data: the host grid :class:`SDF`, the per-model
device buffers :class:`SDFBuffers` and the Warp query :func:`sdf_query`.

An :class:`SDF` is a dense grid of signed distances [m] sampled at the points
``lower + voxel_size * (i, j, k)`` (``0 <= i < nx`` ...) of its *grid frame*: the shape's local
frame, in the units of the scale baked into it (``baked_scale``; ``None`` = the unscaled
source geometry). Negative inside the solid, positive outside. Storage is float32, flat, x
fastest: ``values[i + nx * (j + ny * k)]``; memory is ``nx * ny * nz * 4`` bytes
(:attr:`SDF.memory_bytes`).

Queries take points in the shape-local *scaled* frame (the frame the narrow phase works in:
``shape_X^-1 * p``). When the SDF was built for another scale than the shape's, points are
mapped into the grid frame component-wise and distances multiplied by the smallest scale
ratio (exact for uniform ratios, a conservative approximation otherwise). Outside the grid box
the query clamps to the box and adds the distance to it.
"""

from __future__ import annotations

import numpy as np
import warp as wp

wp.set_module_options({"enable_backward": False, "max_unroll": 1})

from ..sim.enums import GeoType


class SDF:
    """A dense signed-distance grid (see the module docstring for the layout and frames).

    Args:
        values: signed distances [m], shape ``(nz, ny, nx)`` or flat ``nx*ny*nz`` (x fastest).
        dims: ``(nx, ny, nz)`` sample counts (each >= 2).
        lower: grid origin ``(3,)`` [m] in the grid frame.
        voxel_size: sample spacing [m] (uniform along all axes).
        baked_scale: scale baked into the grid, ``None`` for the unscaled geometry.
        shape_margin: subtracted from every sampled distance at query time [m] (shrinks the
            surface inward for negative values, grows it for positive; not part of the grid).
        narrow_band_range: ``(inner, outer)`` [m] inside which the values are exact distances.
    """

    def __init__(self, values, dims, lower, voxel_size: float, *, baked_scale=None, shape_margin: float = 0.0,
                 narrow_band_range=(-0.1, 0.1)):  # fmt: skip
        nx, ny, nz = (int(d) for d in dims)
        if min(nx, ny, nz) < 2:
            raise ValueError(f"SDF: dims={tuple(dims)} must be >= 2 along every axis")
        v = np.ascontiguousarray(np.asarray(values, dtype=np.float32).reshape(-1))
        if v.size != nx * ny * nz:
            raise ValueError(f"SDF: {v.size} values for dims {(nx, ny, nz)} (expected {nx * ny * nz})")
        if not np.all(np.isfinite(v)):
            raise ValueError("SDF: values contain NaN or inf")
        if not float(voxel_size) > 0.0:
            raise ValueError(f"SDF: voxel_size={voxel_size} must be > 0")
        self.values = v
        self.dims = (nx, ny, nz)
        self.lower = np.asarray(lower, dtype=np.float64).reshape(3)
        self.voxel_size = float(voxel_size)
        self.baked_scale = None if baked_scale is None else tuple(float(s) for s in baked_scale)
        self.shape_margin = float(shape_margin)
        self.narrow_band_range = tuple(float(x) for x in narrow_band_range)

    @property
    def upper(self) -> np.ndarray:
        """Grid box upper corner [m] in the grid frame."""
        return self.lower + self.voxel_size * (np.asarray(self.dims, dtype=np.float64) - 1.0)

    @property
    def memory_bytes(self) -> int:
        """Bytes of the distance grid (voxels x 4 bytes)."""
        return int(self.values.nbytes)

    def grid(self) -> np.ndarray:
        """The values as an ``(nz, ny, nx)`` array (a view)."""
        nx, ny, nz = self.dims
        return self.values.reshape(nz, ny, nx)

    def sample(self, points) -> np.ndarray:
        """Host-side trilinear query at grid-frame ``points`` ``(N, 3)`` [m] (same rule as
        :func:`sdf_query`, including the outside-box extension); returns ``(N,)`` float64."""
        p = np.asarray(points, dtype=np.float64).reshape(-1, 3)
        lo, hi = self.lower, self.upper
        c = np.clip(p, lo, hi)
        out = np.linalg.norm(p - c, axis=1)
        g = (c - lo) / self.voxel_size
        nx, ny, nz = self.dims
        i0 = np.clip(np.floor(g).astype(np.int64), 0, np.array([nx - 2, ny - 2, nz - 2]))
        f = g - i0
        grid = self.grid().astype(np.float64)
        acc = np.zeros(len(p))
        for dz in (0, 1):
            for dy in (0, 1):
                for dx in (0, 1):
                    w = (f[:, 0] if dx else 1 - f[:, 0]) * (f[:, 1] if dy else 1 - f[:, 1]) * (
                        f[:, 2] if dz else 1 - f[:, 2])  # fmt: skip
                    acc += w * grid[i0[:, 2] + dz, i0[:, 1] + dy, i0[:, 0] + dx]
        return acc + out - self.shape_margin

    def __repr__(self) -> str:
        return (f"SDF(dims={self.dims}, voxel_size={self.voxel_size:.4g}, lower={tuple(np.round(self.lower, 6))}, "
                f"memory={self.memory_bytes} B)")  # fmt: skip


@wp.struct
class SDFBuffers:
    """Every SDF of a model, concatenated (one entry per shape; ``start[s] < 0``: no SDF)."""

    values: wp.array(dtype=float)
    start: wp.array(dtype=int)
    dims: wp.array(dtype=wp.vec3i)
    lower: wp.array(dtype=wp.vec3)
    voxel: wp.array(dtype=float)
    qscale: wp.array(dtype=wp.vec3)  # shape-local scaled point * qscale = grid-frame point
    dscale: wp.array(dtype=float)  # grid distance * dscale = shape-local distance
    margin: wp.array(dtype=float)  # subtracted from the distance (SDF.shape_margin)


@wp.func
def _sdf_at(sdf: SDFBuffers, base: int, nx: int, ny: int, i: int, j: int, k: int):
    return sdf.values[base + i + nx * (j + ny * k)]


@wp.func
def trilinear_grad(c000: float, c100: float, c010: float, c110: float, c001: float, c101: float, c011: float,
                   c111: float, fx: float, fy: float, fz: float):  # fmt: skip
    """Trilinear interpolant of the 8 corner values (``cXYZ``) at the cell fractions (fx, fy, fz),
    and its analytic gradient in cell units (d/dfx, d/dfy, d/dfz)."""
    x00 = c000 + fx * (c100 - c000)
    x10 = c010 + fx * (c110 - c010)
    x01 = c001 + fx * (c101 - c001)
    x11 = c011 + fx * (c111 - c011)
    y0 = x00 + fy * (x10 - x00)
    y1 = x01 + fy * (x11 - x01)
    gx = (1.0 - fz) * ((1.0 - fy) * (c100 - c000) + fy * (c110 - c010)) + fz * (
        (1.0 - fy) * (c101 - c001) + fy * (c111 - c011))
    return y0 + fz * (y1 - y0), wp.vec3(gx, (1.0 - fz) * (x10 - x00) + fz * (x11 - x01), y1 - y0)


@wp.func
def sdf_has(sdf: SDFBuffers, shape: int):
    """Whether ``shape`` carries an SDF."""
    return sdf.start[shape] >= 0


@wp.func
def sdf_query(sdf: SDFBuffers, shape: int, p: wp.vec3):
    """Signed distance [m] and outward unit gradient at the shape-local (scaled-frame) point ``p``.

    Trilinear interpolation of the grid; the gradient is the analytic gradient of the trilinear
    interpolant (falls back to +z where it vanishes). Outside the grid box: the value at the
    clamped point plus the distance to the box, gradient blended toward the box direction."""
    qs = sdf.qscale[shape]
    g = wp.cw_mul(p, qs)
    lo = sdf.lower[shape]
    h = sdf.voxel[shape]
    dm = sdf.dims[shape]
    nx = dm[0]
    ny = dm[1]
    nz = dm[2]
    hi = lo + h * wp.vec3(float(nx - 1), float(ny - 1), float(nz - 1))
    c = wp.min(wp.max(g, lo), hi)
    outside = g - c
    dout = wp.length(outside)
    u = (c - lo) / h
    i = wp.min(wp.max(int(wp.floor(u[0])), 0), nx - 2)
    j = wp.min(wp.max(int(wp.floor(u[1])), 0), ny - 2)
    k = wp.min(wp.max(int(wp.floor(u[2])), 0), nz - 2)
    fx = u[0] - float(i)
    fy = u[1] - float(j)
    fz = u[2] - float(k)
    base = sdf.start[shape]
    c000 = _sdf_at(sdf, base, nx, ny, i, j, k)
    c100 = _sdf_at(sdf, base, nx, ny, i + 1, j, k)
    c010 = _sdf_at(sdf, base, nx, ny, i, j + 1, k)
    c110 = _sdf_at(sdf, base, nx, ny, i + 1, j + 1, k)
    c001 = _sdf_at(sdf, base, nx, ny, i, j, k + 1)
    c101 = _sdf_at(sdf, base, nx, ny, i + 1, j, k + 1)
    c011 = _sdf_at(sdf, base, nx, ny, i, j + 1, k + 1)
    c111 = _sdf_at(sdf, base, nx, ny, i + 1, j + 1, k + 1)
    d, grad = trilinear_grad(c000, c100, c010, c110, c001, c101, c011, c111, fx, fy, fz)
    # chain rule to the shape-local frame (grid = p * qs)
    grad = wp.cw_mul(grad, qs)
    gl = wp.length(grad)
    if gl > 1.0e-12:
        grad = grad / gl
    else:
        grad = wp.vec3(0.0, 0.0, 1.0)
    if dout > 0.0:
        dirn = wp.cw_div(outside, qs)
        dl = wp.length(dirn)
        if dl > 0.0:
            dirn = dirn / dl
        w = wp.min(dout / h, 1.0)
        grad = wp.normalize((1.0 - w) * grad + w * dirn + wp.vec3(1.0e-12))
        d = d + dout
    return d * sdf.dscale[shape] - sdf.margin[shape], grad


def shape_sdf(model, s: int):
    """The :class:`SDF` of shape ``s`` of ``model``, or ``None``: a MESH shape's ``mesh.sdf``; a
    primitive's SDF generated from its ShapeConfig SDF parameters (cached on the model)."""
    cache = getattr(model, "_armillary_shape_sdfs", None)
    if cache is None:
        cache = {}
        try:
            model._armillary_shape_sdfs = cache
        except AttributeError:
            pass
    if s in cache:
        return cache[s]
    t = int(model.shape_type.numpy()[s]) if not hasattr(model, "_shape_type_np") else int(model._shape_type_np[s])
    src = model.shape_source[s] if s < len(model.shape_source) else None
    out = None
    if t in (int(GeoType.MESH), int(GeoType.CONVEX_MESH)):
        out = getattr(src, "sdf", None)
    else:
        res = _list_get(getattr(model, "shape_sdf_max_resolution", None), s)
        vox = _list_get(getattr(model, "shape_sdf_target_voxel_size", None), s)
        if res is not None or vox is not None:
            from .sdf_build import primitive_sdf  # built on demand (host work, once per shape)

            band = _list_get(getattr(model, "shape_sdf_narrow_band_range", None), s) or (-0.1, 0.1)
            scale = model.shape_scale.numpy()[s]
            out = primitive_sdf(t, scale, max_resolution=res, target_voxel_size=vox, narrow_band_range=band)
    cache[s] = out
    return out


def _list_get(seq, i):
    if seq is None or i >= len(seq):
        return None
    return seq[i]


def build_sdf_buffers(model) -> SDFBuffers:
    """Device buffers of every shape SDF of ``model`` (built once, cached on the model)."""
    cached = getattr(model, "_armillary_sdf_buffers", None)
    if cached is not None:
        return cached
    n = int(model.shape_count)
    dev = model.device
    m = max(n, 1)
    start = np.full(m, -1, np.int32)
    dims = np.ones((m, 3), np.int32) * 2
    lower = np.zeros((m, 3), np.float32)
    voxel = np.ones(m, np.float32)
    qscale = np.ones((m, 3), np.float32)
    dscale = np.ones(m, np.float32)
    margin = np.zeros(m, np.float32)
    chunks = []
    placed = {}
    total = 0
    scales = model.shape_scale.numpy() if n else np.zeros((0, 3))
    types = model.shape_type.numpy() if n else np.zeros(0)
    for s in range(n):
        sdf = shape_sdf(model, s)
        if sdf is None:
            continue
        if id(sdf) not in placed:
            placed[id(sdf)] = total
            chunks.append(sdf.values)
            total += sdf.values.size
        start[s] = placed[id(sdf)]
        dims[s] = sdf.dims
        lower[s] = sdf.lower
        voxel[s] = sdf.voxel_size
        margin[s] = sdf.shape_margin
        if int(types[s]) in (int(GeoType.MESH), int(GeoType.CONVEX_MESH)):
            sc = np.asarray(scales[s], np.float64)
            baked = np.ones(3) if sdf.baked_scale is None else np.asarray(sdf.baked_scale, np.float64)
            ratio = baked / np.where(sc == 0.0, 1.0, sc)  # grid = local_scaled * baked / shape_scale
            qscale[s] = ratio
            dscale[s] = float(np.min(np.abs(1.0 / ratio)))
    buf = SDFBuffers()
    buf.values = wp.array(np.concatenate(chunks) if chunks else np.zeros(1, np.float32), dtype=float, device=dev)
    buf.start = wp.array(start, dtype=int, device=dev)
    buf.dims = wp.array(dims, dtype=wp.vec3i, device=dev)
    buf.lower = wp.array(lower, dtype=wp.vec3, device=dev)
    buf.voxel = wp.array(voxel, dtype=float, device=dev)
    buf.qscale = wp.array(qscale, dtype=wp.vec3, device=dev)
    buf.dscale = wp.array(dscale, dtype=float, device=dev)
    buf.margin = wp.array(margin, dtype=float, device=dev)
    try:
        model._armillary_sdf_buffers = buf
    except AttributeError:
        pass
    return buf

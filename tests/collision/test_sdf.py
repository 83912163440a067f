"""Mesh and primitive SDFs (``Mesh.build_sdf``, ``primitive_sdf``) against brute force.

* Grid samples inside the narrow band equal the brute-force distance (numpy point-triangle
  distance over every triangle, sign from the generalized winding number) within GRID_TOL;
  random points near the surface within ~half a voxel (trilinear interpolation error).
* Outside the band: correct sign, magnitude >= the band limit.
* Topology (watertight, edges, edge filtering), the on-disk cache, argument validation,
  primitive SDFs vs the analytic distances, and ``sdf_query`` on a finalized model.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
import warp as wp

import armillary as newton
from armillary.geometry.sdf import SDF, SDFBuffers, build_sdf_buffers, sdf_query, shape_sdf
from armillary.geometry.sdf_build import filter_sdf_edges, primitive_sdf
from armillary.sim.enums import GeoType

GRID_TOL = 2.0e-5
BAND = (-0.05, 0.05)


# --------------------------------------------------------------------------- helpers


def icosphere(radius=0.3, subdiv=2):
    t = (1.0 + 5.0**0.5) / 2.0
    v = [(-1, t, 0), (1, t, 0), (-1, -t, 0), (1, -t, 0), (0, -1, t), (0, 1, t), (0, -1, -t), (0, 1, -t),
         (t, 0, -1), (t, 0, 1), (-t, 0, -1), (-t, 0, 1)]  # fmt: skip
    f = [(0, 11, 5), (0, 5, 1), (0, 1, 7), (0, 7, 10), (0, 10, 11), (1, 5, 9), (5, 11, 4), (11, 10, 2), (10, 7, 6),
         (7, 1, 8), (3, 9, 4), (3, 4, 2), (3, 2, 6), (3, 6, 8), (3, 8, 9), (4, 9, 5), (2, 4, 11), (6, 2, 10),
         (8, 6, 7), (9, 8, 1)]  # fmt: skip
    v = [np.array(p, float) / np.linalg.norm(p) for p in v]
    for _ in range(subdiv):
        mids = {}
        nf = []

        def mid(a, b):
            k = (min(a, b), max(a, b))
            if k not in mids:
                p = v[a] + v[b]
                v.append(p / np.linalg.norm(p))
                mids[k] = len(v) - 1
            return mids[k]

        for a, b, c in f:
            ab, bc, ca = mid(a, b), mid(b, c), mid(c, a)
            nf += [(a, ab, ca), (b, bc, ab), (c, ca, bc), (ab, bc, ca)]
        f = nf
    return newton.Mesh(np.array(v) * radius, np.array(f, np.int32).reshape(-1))


def point_tri_dist(p, a, b, c):
    """Distances ``(N, T)`` from points ``p (N,3)`` to triangles ``a,b,c (T,3)`` (Ericson)."""
    p = p[:, None, :]
    ab, ac, ap = b - a, c - a, p - a
    d1, d2 = (ab * ap).sum(-1), (ac * ap).sum(-1)
    bp = p - b
    d3, d4 = (ab * bp).sum(-1), (ac * bp).sum(-1)
    cp = p - c
    d5, d6 = (ab * cp).sum(-1), (ac * cp).sum(-1)
    va = d3 * d6 - d5 * d4
    vb = d5 * d2 - d1 * d6
    vc = d1 * d4 - d3 * d2
    den = np.where(np.abs(va + vb + vc) < 1e-30, 1e-30, va + vb + vc)
    v = vb / den
    w = vc / den
    q = a + v[..., None] * ab + w[..., None] * ac  # interior
    # edges / vertices
    t_ab = np.clip(d1 / np.maximum(d1 - d3, 1e-30), 0, 1)
    t_ac = np.clip(d2 / np.maximum(d2 - d6, 1e-30), 0, 1)
    t_bc = np.clip((d4 - d3) / np.maximum((d4 - d3) + (d5 - d6), 1e-30), 0, 1)
    cands = [
        (d1 <= 0) & (d2 <= 0), a + 0 * q,
        (d3 >= 0) & (d4 <= d3), b + 0 * q,
        (d6 >= 0) & (d5 <= d6), c + 0 * q,
        (vc <= 0) & (d1 >= 0) & (d3 <= 0), a + t_ab[..., None] * ab,
        (vb <= 0) & (d2 >= 0) & (d6 <= 0), a + t_ac[..., None] * ac,
        (va <= 0) & ((d4 - d3) >= 0) & ((d5 - d6) >= 0), b + t_bc[..., None] * (c - b),
    ]  # fmt: skip
    out = q
    for cond, val in reversed(list(zip(cands[0::2], cands[1::2]))):
        out = np.where(cond[..., None], val, out)
    return np.linalg.norm(p - out, axis=-1)


def winding_number(p, a, b, c):
    ra, rb, rc = a[None] - p[:, None], b[None] - p[:, None], c[None] - p[:, None]
    la, lb, lc = (np.linalg.norm(x, axis=-1) for x in (ra, rb, rc))
    num = np.einsum("ntk,ntk->nt", ra, np.cross(rb, rc))
    den = la * lb * lc + (ra * rb).sum(-1) * lc + (rb * rc).sum(-1) * la + (rc * ra).sum(-1) * lb
    return (2.0 * np.arctan2(num, den)).sum(-1) / (4.0 * np.pi)


def brute(mesh, pts, scale=(1.0, 1.0, 1.0)):
    v = np.asarray(mesh.vertices, float) * np.asarray(scale)
    f = np.asarray(mesh.indices).reshape(-1, 3)
    if np.prod(scale) < 0:  # mirrored: keep the outward winding
        f = f[:, [0, 2, 1]]
    a, b, c = v[f[:, 0]], v[f[:, 1]], v[f[:, 2]]
    d = point_tri_dist(pts, a, b, c).min(axis=1)
    w = winding_number(pts, a, b, c)
    return np.where(w > 0.5, -d, d), w


def grid_points(sdf: SDF):
    nx, ny, nz = sdf.dims
    k, j, i = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
    return sdf.lower + sdf.voxel_size * np.stack([i.ravel(), j.ravel(), k.ravel()], axis=1)


def open_box():
    m = newton.Mesh.create_box(0.3, 0.25, 0.2)
    idx = m.indices.reshape(-1, 3)[:10]  # drop the +z face
    return newton.Mesh(m.vertices, idx.reshape(-1), compute_inertia=False)


# --------------------------------------------------------------------------- mesh SDF values


def test_watertight_sphere_mesh_values():
    mesh = icosphere(0.3, 2)
    assert mesh.is_watertight
    sdf = mesh.build_sdf(max_resolution=32, narrow_band_range=BAND, margin=0.05)
    assert mesh.sdf is sdf and sdf.baked_scale is None
    assert sdf.dims[0] == 33 and sdf.memory_bytes == np.prod(sdf.dims) * 4
    gp = grid_points(sdf)
    rng = np.random.default_rng(1)
    vals = sdf.values.astype(float)
    r = np.linalg.norm(gp, axis=1)
    near = np.abs(r - 0.3) < BAND[1] + 0.02  # the icosphere lies within 0.3 * [0.98, 1]
    ref, _ = brute(mesh, gp[near])
    inb = np.abs(ref) < BAND[1]
    assert inb.sum() > 100
    np.testing.assert_allclose(vals[near][inb], ref[inb], atol=GRID_TOL)
    assert np.all(np.sign(vals[near][~inb]) == np.sign(ref[~inb]))
    assert np.all(np.abs(vals[near][~inb]) >= BAND[1] - 1e-6)
    far = ~near  # sign from the radius, magnitude at least the band limit
    assert np.all(np.sign(vals[far]) == np.sign(r[far] - 0.3))
    assert np.all(np.abs(vals[far]) >= BAND[1] - 1e-6)
    # random points near the surface: trilinear interpolation error only
    d = rng.normal(size=(400, 3))
    pts = d / np.linalg.norm(d, axis=1, keepdims=True) * rng.uniform(0.27, 0.33, (400, 1))
    ref, _ = brute(mesh, pts)
    np.testing.assert_allclose(sdf.sample(pts), ref, atol=0.5 * sdf.voxel_size)


def test_open_mesh_values_and_signs():
    mesh = open_box()
    assert not mesh.is_watertight
    sdf = mesh.build_sdf(max_resolution=32, narrow_band_range=BAND, margin=0.05)
    gp = grid_points(sdf)
    ref, w = brute(mesh, gp)
    vals = sdf.values.astype(float)
    inb = np.abs(ref) < BAND[1]
    np.testing.assert_allclose(np.abs(vals[inb]), np.abs(ref[inb]), atol=GRID_TOL)
    clear = np.abs(w - 0.5) > 0.25  # sign well defined
    assert clear.sum() > 0.5 * len(w)
    assert np.mean(np.sign(vals[clear]) == np.sign(ref[clear])) > 0.995


def test_scale_baked_and_mirrored():
    mesh = icosphere(0.3, 1)
    for sc in [(2.0, 1.0, 0.5), (-1.0, 1.0, 1.0)]:
        sdf = mesh.build_sdf(max_resolution=16, narrow_band_range=(-0.2, 0.2), margin=0.05, scale=sc)
        assert sdf.baked_scale == sc
        gp = grid_points(sdf)
        ref, _ = brute(mesh, gp, sc)
        inb = np.abs(ref) < 0.2
        np.testing.assert_allclose(sdf.values[inb], ref[inb], atol=GRID_TOL)


def test_target_voxel_size_and_shape_margin():
    mesh = newton.Mesh.create_box(0.2)
    sdf = mesh.build_sdf(max_resolution=8, target_voxel_size=0.025, margin=0.0, shape_margin=0.01,
                         narrow_band_range=(-0.3, 0.3))
    assert abs(sdf.voxel_size - 0.025) < 1e-12
    assert all((d - 1) % 8 == 0 for d in sdf.dims) and sdf.dims[0] == 17
    assert sdf.shape_margin == 0.01
    assert abs(sdf.sample([[0.0, 0.0, 0.0]])[0] - (-0.2 - 0.01)) < 1e-5
    mesh.clear_sdf()
    assert mesh.sdf is None and mesh.sdf_edges is None
    # default resolution: 64 cells along the longest axis
    assert mesh.build_sdf().dims == (65, 65, 65)


# --------------------------------------------------------------------------- topology


def test_watertight_and_edges():
    mesh = icosphere(0.3, 1)
    nf = len(mesh.indices) // 3
    assert mesh.is_watertight
    assert mesh.edges.shape == (3 * nf // 2, 2) and mesh.edges.dtype == np.int32
    assert np.all(mesh.edges[:, 0] < mesh.edges[:, 1])
    assert not open_box().is_watertight
    # flipped triangle: closed but inconsistently oriented
    idx = mesh.indices.reshape(-1, 3).copy()
    idx[0] = idx[0, [0, 2, 1]]
    assert not newton.Mesh(mesh.vertices, idx.reshape(-1), compute_inertia=False).is_watertight
    box = newton.Mesh.create_box(0.5)
    assert box.is_watertight and len(box.edges) == 18


def test_edge_filtering_box():
    box = newton.Mesh.create_box(0.5, 0.4, 0.3)
    box.build_sdf(max_resolution=8)
    assert box.sdf_edges.shape == (12, 2)
    v = box.vertices
    for a, b in box.sdf_edges:  # box feature edges are axis aligned
        assert np.count_nonzero(np.abs(v[a] - v[b]) > 1e-6) == 1
    assert len(filter_sdf_edges(box.vertices, box.indices, 0.0)) == 18
    assert len(filter_sdf_edges(box.vertices, box.indices, -1.0)) == 18
    box.build_sdf(max_resolution=8, edge_lower_angle_threshold_rad=0.0)
    assert len(box.sdf_edges) == 18
    box.build_sdf(max_resolution=8, edge_lower_angle_threshold_rad=-1.0, edge_box_absorption=True)
    assert len(box.sdf_edges) == 18
    # open mesh: boundary edges always kept
    ob = open_box()
    e = filter_sdf_edges(ob.vertices, ob.indices, math.radians(0.1))
    assert len(e) == 12  # 4 boundary + 8 other box edges; the 5 face diagonals dropped
    assert len(ob.edges) == 17


def test_edge_box_absorption():
    # a shallow "roof": two long ridges close together; the short tilted edges between them get
    # absorbed only with box absorption
    v = np.array([[0, 0, 0], [1, 0, 0], [0, 0.01, 0.001], [1, 0.01, 0.001], [0, 0.02, 0], [1, 0.02, 0]], float)
    f = np.array([[0, 1, 3], [0, 3, 2], [2, 3, 5], [2, 5, 4]], np.int32)
    kept = filter_sdf_edges(v, f.reshape(-1), math.radians(0.1))
    kept_abs = filter_sdf_edges(v, f.reshape(-1), math.radians(0.1), box_absorption=True, half_normal=0.01,
                                half_lateral=0.015)  # fmt: skip
    assert len(kept_abs) < len(kept)
    # boundary edges survive
    boundary = {(0, 1), (4, 5), (0, 2), (2, 4), (1, 3), (3, 5)}
    assert boundary <= {tuple(e) for e in kept_abs.tolist()}


# --------------------------------------------------------------------------- cache


def test_cache_round_trip(tmp_path):
    mesh = icosphere(0.3, 1)
    a = mesh.build_sdf(max_resolution=16, narrow_band_range=BAND, cache_dir=tmp_path)
    assert not a.loaded_from_cache and os.path.isfile(a.cache_path)
    b = mesh.build_sdf(max_resolution=16, narrow_band_range=BAND, cache_dir=tmp_path, shape_margin=0.003)
    assert b.loaded_from_cache and b.cache_path == a.cache_path
    assert b.shape_margin == 0.003
    np.testing.assert_array_equal(a.values, b.values)
    assert b.dims == a.dims and np.allclose(b.lower, a.lower) and b.voxel_size == a.voxel_size
    np.testing.assert_array_equal(mesh.sdf_edges, filter_sdf_edges(mesh.vertices, mesh.indices))
    assert len(os.listdir(tmp_path)) == 1
    c = mesh.build_sdf(max_resolution=24, narrow_band_range=BAND, cache_dir=tmp_path)
    assert not c.loaded_from_cache and len(os.listdir(tmp_path)) == 2
    mesh.build_sdf(max_resolution=16, narrow_band_range=BAND, cache_dir=tmp_path, scale=(1.0, 2.0, 1.0))
    assert len(os.listdir(tmp_path)) == 3
    m2 = mesh.copy(vertices=mesh.vertices * 1.01)
    m2.build_sdf(max_resolution=16, narrow_band_range=BAND, cache_dir=tmp_path)
    assert len(os.listdir(tmp_path)) == 4
    # corrupt entry: rebuilt transparently
    with open(a.cache_path, "wb") as fh:
        fh.write(b"garbage")
    d = mesh.build_sdf(max_resolution=16, narrow_band_range=BAND, cache_dir=tmp_path)
    assert not d.loaded_from_cache
    np.testing.assert_array_equal(a.values, d.values)
    assert mesh.build_sdf(max_resolution=16, narrow_band_range=BAND, cache_dir=tmp_path).loaded_from_cache


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "kw, word",
    [
        (dict(max_resolution=30), "max_resolution"),
        (dict(max_resolution=0), "max_resolution"),
        (dict(max_resolution=8.0), "max_resolution"),
        (dict(target_voxel_size=0.0), "target_voxel_size"),
        (dict(target_voxel_size=-1.0), "target_voxel_size"),
        (dict(narrow_band_range=(0.1, -0.1)), "narrow_band_range"),
        (dict(narrow_band_range=0.1), "narrow_band_range"),
        (dict(margin=-0.01), "margin"),
        (dict(scale=(1.0, 0.0, 1.0)), "scale"),
        (dict(scale=(1.0, 1.0)), "scale"),
        (dict(scale=(1.0, float("nan"), 1.0)), "scale"),
    ],
)
def test_build_sdf_validation(kw, word):
    with pytest.raises(ValueError, match=word):
        newton.Mesh.create_box(0.1).build_sdf(**kw)


def test_build_sdf_empty_mesh():
    with pytest.raises(ValueError, match="empty"):
        newton.Mesh(np.zeros((0, 3)), np.zeros(0, np.int32), compute_inertia=False).build_sdf()


# --------------------------------------------------------------------------- primitives


def _analytic(t, s, p):
    if t == GeoType.SPHERE:
        return np.linalg.norm(p, axis=1) - s[0]
    if t == GeoType.BOX:
        q = np.abs(p) - s
        return np.linalg.norm(np.maximum(q, 0), axis=1) + np.minimum(q.max(1), 0)
    if t == GeoType.CAPSULE:
        z = np.clip(p[:, 2], -s[1], s[1])
        return np.linalg.norm(p - np.stack([0 * z, 0 * z, z], 1), axis=1) - s[0]
    if t == GeoType.CYLINDER:
        dr = np.hypot(p[:, 0], p[:, 1]) - s[0]
        dz = np.abs(p[:, 2]) - s[1]
        return np.minimum(np.maximum(dr, dz), 0) + np.hypot(np.maximum(dr, 0), np.maximum(dz, 0))
    if t == GeoType.CONE:  # via a fine revolved-profile polygon check
        rho, z = np.hypot(p[:, 0], p[:, 1]), p[:, 2]
        r, h = s[0], s[1]

        def seg(ax, az, bx, bz):
            ex, ez = bx - ax, bz - az
            tt = np.clip(((rho - ax) * ex + (z - az) * ez) / (ex * ex + ez * ez), 0, 1)
            return np.hypot(rho - ax - tt * ex, z - az - tt * ez)

        d = np.minimum(seg(0, -h, r, -h), seg(r, -h, 0, h))
        inside = (z >= -h) & (z <= h) & (rho <= r * (h - z) / (2 * h))
        return np.where(inside, -d, d)
    raise AssertionError


@pytest.mark.parametrize("t, s", [(GeoType.SPHERE, (0.3, 0, 0)), (GeoType.BOX, (0.3, 0.2, 0.1)),
                                  (GeoType.CAPSULE, (0.1, 0.2, 0)), (GeoType.CYLINDER, (0.15, 0.25, 0)),
                                  (GeoType.CONE, (0.2, 0.3, 0))])  # fmt: skip
def test_primitive_sdf_vs_analytic(t, s):
    sdf = primitive_sdf(t, s, max_resolution=32, margin=0.05)
    assert sdf.baked_scale is None
    gp = grid_points(sdf)
    np.testing.assert_allclose(sdf.values, _analytic(t, np.asarray(s, float), gp), atol=1e-5)
    rng = np.random.default_rng(3)
    pts = rng.uniform(sdf.lower, sdf.upper, (500, 3))
    ref = _analytic(t, np.asarray(s, float), pts)
    near = np.abs(ref) < 0.05
    np.testing.assert_allclose(sdf.sample(pts)[near], ref[near], atol=0.6 * sdf.voxel_size)


def test_primitive_sdf_ellipsoid_approx():
    r = np.array([0.3, 0.2, 0.1])
    sdf = primitive_sdf(GeoType.ELLIPSOID, r, target_voxel_size=0.01, margin=0.05)
    rng = np.random.default_rng(4)
    u = rng.normal(size=(300, 3))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    surf = u * r
    n = surf / r**2
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    for off in (-0.02, 0.0, 0.02):  # along the true normal: exact distance |off| (small offsets)
        v = sdf.sample(surf + off * n)
        assert np.all(np.abs(v - off) < 0.35 * abs(off) + 0.5 * sdf.voxel_size)
    assert sdf.sample([[0, 0, 0]])[0] < -0.09


def test_primitive_sdf_errors():
    for t in (GeoType.PLANE, GeoType.HFIELD, GeoType.MESH):
        with pytest.raises(ValueError, match="no primitive SDF"):
            primitive_sdf(t, (1, 1, 1), max_resolution=8)
    with pytest.raises(ValueError, match="max_resolution"):
        primitive_sdf(GeoType.BOX, (1, 1, 1), max_resolution=12)
    with pytest.raises(ValueError, match="degenerate"):
        primitive_sdf(GeoType.BOX, (1, 0, 1), max_resolution=8)


# --------------------------------------------------------------------------- device query


@wp.kernel
def _query_kernel(sdf: SDFBuffers, shape: wp.array(dtype=int), pts: wp.array(dtype=wp.vec3),
                  out: wp.array(dtype=float)):  # fmt: skip
    tid = wp.tid()
    d, g = sdf_query(sdf, shape[tid], pts[tid])
    out[tid] = d


def test_sdf_query_on_model():
    mesh_b = icosphere(0.3, 2)  # baked scale
    mesh_u = icosphere(0.3, 2)  # unscaled grid, scale applied at query time
    sc = (1.5, 1.0, 0.8)
    mesh_b.build_sdf(max_resolution=32, narrow_band_range=(-0.1, 0.1), scale=sc, shape_margin=0.002)
    mesh_u.build_sdf(max_resolution=32, narrow_band_range=(-0.1, 0.1))
    b = newton.ModelBuilder()
    body = b.add_body()
    sb = b.add_shape_mesh(body, mesh=mesh_b, scale=sc)
    su = b.add_shape_mesh(body, mesh=mesh_u, scale=(2.0, 2.0, 2.0))
    model = b.finalize(device="cpu")
    assert shape_sdf(model, sb) is mesh_b.sdf and shape_sdf(model, su) is mesh_u.sdf
    buf = build_sdf_buffers(model)
    rng = np.random.default_rng(5)
    u = rng.normal(size=(200, 3))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    pb = u * 0.3 * np.asarray(sc) * rng.uniform(0.8, 1.2, (200, 1))
    pu = u * 0.6 * rng.uniform(0.8, 1.2, (200, 1))
    pts = np.concatenate([pb, pu, np.array([[2.0, 0.0, 0.0]])])  # last: outside the box
    shp = np.array([sb] * 200 + [su] * 200 + [sb], np.int32)
    out = wp.zeros(len(pts), dtype=float, device="cpu")
    wp.launch(_query_kernel, dim=len(pts), device="cpu",
              inputs=[buf, wp.array(shp, dtype=int), wp.array(pts.astype(np.float32), dtype=wp.vec3), out])  # fmt: skip
    got = out.numpy()
    np.testing.assert_allclose(got[:200], mesh_b.sdf.sample(pb), atol=1e-4)
    np.testing.assert_allclose(got[200:400], 2.0 * mesh_u.sdf.sample(pu / 2.0), atol=1e-4)
    np.testing.assert_allclose(got[400], mesh_b.sdf.sample(pts[400:]), atol=1e-4)
    # against brute force (uniformly scaled shape: exact up to interpolation)
    ref, _ = brute(mesh_u, pu, (2.0, 2.0, 2.0))
    near = np.abs(ref) < 0.1
    np.testing.assert_allclose(got[200:400][near], ref[near], atol=2.0 * mesh_u.sdf.voxel_size)

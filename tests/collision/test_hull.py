"""Our numpy quickhull (armillary.geometry.hull) against brute-force checks and analytic shapes."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from armillary.geometry.hull import convex_hull, fibonacci_directions, hull_volume


def check_hull(points, v, idx, rel_tol=1e-5):
    """Brute-force validity checks of a hull ``(v, idx)`` of ``points``."""
    P = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    assert v.dtype == np.float32 and v.ndim == 2 and v.shape[1] == 3
    assert idx.dtype == np.int32 and idx.ndim == 1 and len(idx) % 3 == 0
    tris = idx.reshape(-1, 3)
    # hull vertices are (bit-exact float32) input points, all used
    inputs = {tuple(p) for p in P.astype(np.float32).tolist()}
    assert all(tuple(p) in inputs for p in v.tolist())
    assert set(np.unique(tris).tolist()) == set(range(len(v)))
    # closed 2-manifold: every directed edge once, with its reverse; Euler characteristic 2
    edges = [(int(a), int(b)) for t in tris for a, b in ((t[0], t[1]), (t[1], t[2]), (t[2], t[0]))]
    assert len(set(edges)) == len(edges)
    es = set(edges)
    assert all((b, a) in es for a, b in edges)
    V, E, F = len(v), len(edges) // 2, len(tris)
    assert V - E + F == 2
    # outward CCW faces; every input point inside or on every face plane
    w = v.astype(np.float64)
    ext = float(np.linalg.norm(P.max(axis=0) - P.min(axis=0)))
    n = np.cross(w[tris[:, 1]] - w[tris[:, 0]], w[tris[:, 2]] - w[tris[:, 0]])
    area = np.linalg.norm(n, axis=1)
    assert np.all(area > 0.0)
    n /= area[:, None]
    c = w.mean(axis=0)
    assert np.all(np.einsum("ij,ij->i", n, c - w[tris[:, 0]]) < 0.0)
    d = P @ n.T - np.einsum("ij,ij->i", n, w[tris[:, 0]])
    assert d.max() <= rel_tol * ext, d.max()
    assert hull_volume(w, idx) > 0.0


def brute_force_volume(P):
    """Hull volume from all supporting triangles (points in general position)."""
    P = np.asarray(P, dtype=np.float64)
    c = P.mean(axis=0)
    vol = 0.0
    for i, j, k in itertools.combinations(range(len(P)), 3):
        n = np.cross(P[j] - P[i], P[k] - P[i])
        s = (P - P[i]) @ n
        s[[i, j, k]] = 0.0
        if np.all(s <= 1e-12) or np.all(s >= -1e-12):
            vol += abs(n @ (P[i] - c)) / 6.0
    return vol


def test_cube_grid_with_duplicates_and_coplanar_points():
    g = np.stack(np.meshgrid(*[np.linspace(0.0, 1.0, 5)] * 3), -1).reshape(-1, 3)
    pts = np.concatenate([g, g[::-1]])  # duplicates; grid points on faces and edges are coplanar / collinear
    v, i = convex_hull(pts)
    check_hull(pts, v, i)
    assert len(v) == 8 and len(i) // 3 == 12
    assert hull_volume(v, i) == pytest.approx(1.0, abs=1e-6)


def test_sphere_sample_volume_and_trimesh_volume():
    trimesh = pytest.importorskip("trimesh")
    pts = 0.5 * fibonacci_directions(1500)
    v, i = convex_hull(pts)
    check_hull(pts, v, i)
    assert len(v) >= 1490  # every sample is a vertex (up to tolerance merges)
    vol = hull_volume(v, i)
    assert vol == pytest.approx(4.0 / 3.0 * np.pi * 0.125, rel=5e-3)
    tm = trimesh.Trimesh(v, i.reshape(-1, 3), process=False)
    assert tm.is_watertight and tm.is_winding_consistent
    assert tm.volume == pytest.approx(vol, rel=1e-6)


@pytest.mark.parametrize("seed", range(6))
def test_random_cloud_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    pts = rng.normal(size=(int(rng.integers(5, 13)), 3)) * rng.uniform(0.01, 100.0)
    v, i = convex_hull(pts)
    check_hull(pts, v, i)
    assert hull_volume(v, i) == pytest.approx(brute_force_volume(pts), rel=1e-5)


def test_large_cloud_prefilter():
    rng = np.random.default_rng(3)
    pts = rng.uniform(-1.0, 1.0, size=(5000, 3))
    v, i = convex_hull(pts)
    check_hull(pts, v, i)
    assert hull_volume(v, i) == pytest.approx(8.0, rel=0.05)


def test_maxhullvert_reduces_vertex_count():
    pts = fibonacci_directions(800)
    full_v, full_i = convex_hull(pts)
    for limit in (4, 10, 32, 64):
        v, i = convex_hull(pts, maxhullvert=limit)
        assert 4 <= len(v) <= limit
        check_hull(v, v, i)  # a valid hull of its own vertices ...
        inputs = {tuple(p) for p in pts.astype(np.float32).tolist()}
        assert all(tuple(p) in inputs for p in v.tolist())  # ... which are input points
        assert hull_volume(v, i) <= hull_volume(full_v, full_i) + 1e-9
    v, i = convex_hull(pts, maxhullvert=64)
    assert hull_volume(v, i) > 0.85 * hull_volume(full_v, full_i)
    # a limit above the exact vertex count changes nothing
    cube = np.array(list(itertools.product((0.0, 1.0), repeat=3)))
    v, i = convex_hull(cube, maxhullvert=64)
    assert len(v) == 8
    assert len(convex_hull(cube, maxhullvert=-1)[0]) == 8


@pytest.mark.parametrize(
    "pts, match",
    [
        (np.zeros((10, 3)), "distinct points"),
        (np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]] * 3, dtype=float), "distinct points"),
        (np.outer(np.linspace(0.0, 1.0, 10), (1.0, 2.0, 3.0)), "collinear"),
        (np.c_[np.random.default_rng(0).uniform(size=(20, 2)), np.zeros(20)], "coplanar"),
        (np.array([[0.0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, np.nan]]), "non-finite"),
        (np.zeros((4, 2)), "shape"),
    ],
)
def test_degenerate_input_raises(pts, match):
    with pytest.raises(ValueError, match=match):
        convex_hull(pts)


def test_bad_maxhullvert_raises():
    with pytest.raises(ValueError, match="maxhullvert=3"):
        convex_hull(np.eye(3).tolist() + [[0.0, 0.0, 0.0]], maxhullvert=3)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(*[st.integers(-3, 3)] * 3), min_size=4, max_size=60), st.floats(0.001, 1000.0))
def test_hypothesis_integer_grid_clouds(raw, scale):
    """Lattice points: many duplicates, coplanar and collinear subsets."""
    pts = np.asarray(raw, dtype=np.float64) * scale
    rank = np.linalg.matrix_rank(np.asarray(raw, dtype=np.float64) - raw[0])
    if rank < 3:
        with pytest.raises(ValueError):
            convex_hull(pts)
        return
    v, i = convex_hull(pts)
    check_hull(pts, v, i)
    # exact volume of a lattice polytope is a multiple of 1/6 (scaled)
    vol = hull_volume(v.astype(np.float64) / scale, i) * 6.0
    assert vol == pytest.approx(round(vol), abs=1e-3)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(*[st.floats(-100.0, 100.0, allow_nan=False, allow_subnormal=False, width=32)] * 3),
        min_size=4,
        max_size=40,
    )
)
def test_hypothesis_float_clouds(raw):
    pts = np.asarray(raw, dtype=np.float64)
    ext = float(np.linalg.norm(pts.max(axis=0) - pts.min(axis=0)))
    try:
        v, i = convex_hull(pts)
    except ValueError:
        # only (nearly) flat / collinear / coincident sets may be rejected
        assert ext == 0.0 or np.linalg.matrix_rank(pts - pts[0], tol=1e-5 * ext) < 3
        return
    check_hull(pts, v, i)

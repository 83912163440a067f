"""Fast collision paths against the general ones.

* box-triangle (:func:`armillary.geometry.mesh_collision.triangle_convex_distance`): separated
  pairs give GJK's answer (same iteration in the box frame), overlapping pairs the exact
  separating-axis least overlap (checked against a float64 numpy enumeration of the 26 Minkowski
  face directions), which the general MPR + refinement route (:func:`.convex.convex_distance`)
  never beats and matches in normal;
* the serial CPU sorts of :mod:`armillary.geometry.host_sort` give numpy's stable argsort order,
  and the SAP broad phase and the deterministic contact order are bit-identical with Warp's radix
  sorts.
"""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import armillary as newton
from armillary.geometry import host_sort
from armillary.geometry.convex import convex_distance
from armillary.geometry.mesh_collision import triangle_convex_distance, tri_geo
from armillary.geometry.support import BOX, ConvexGeo

wp.config.quiet = True


@wp.kernel
def _tri_box_kernel(tris: wp.array(dtype=wp.vec3), boxes: wp.array(dtype=wp.transform), h: wp.array(dtype=wp.vec3),
                    verts: wp.array(dtype=wp.vec3), limit: float, out: wp.array2d(dtype=wp.vec3)):  # fmt: skip
    i = wp.tid()
    gT = tri_geo(wp.transform_identity(), tris[3 * i], tris[3 * i + 1], tris[3 * i + 2])
    gB = ConvexGeo()
    gB.t = BOX
    gB.X = boxes[i]
    gB.s = h[i]
    gB.vstart = 0
    gB.vcount = 0
    gB.fcount = 0
    d0, n0, a0, b0 = convex_distance(gT, gB, verts)
    d1, n1, a1, b1 = triangle_convex_distance(gT, gB, verts, limit)
    out[i, 0] = wp.vec3(d0, d1, 0.0)
    out[i, 1] = n0
    out[i, 2] = n1
    out[i, 3] = a0
    out[i, 4] = b0
    out[i, 5] = a1
    out[i, 6] = b1


def _quat_matrix(q):
    x, y, z, w = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])  # fmt: skip


def _sat_depth(tri, c, R, h):
    """Least overlap of a triangle and a box (float64 oracle): min over the 26 face directions of
    their Minkowski difference of max_tri(u) - min_box(u)."""
    axes = [np.cross(tri[1] - tri[0], tri[2] - tri[0])] + [R[:, i] for i in range(3)]
    for j in range(3):
        e = tri[(j + 1) % 3] - tri[j]
        axes += [np.cross(R[:, i], e) for i in range(3)]
    best = np.inf
    for u in axes:
        ln = np.linalg.norm(u)
        if ln < 1e-9:
            continue
        u = u / ln
        r = float(np.sum(h * np.abs(R.T @ u)))
        for s in (u, -u):
            best = min(best, float(np.max(tri @ s)) - (float(c @ s) - r))
    return best


def _run(tris, poses, hs, limit=10.0):
    k = len(poses)
    out = wp.zeros((k, 7), dtype=wp.vec3, device="cpu")
    wp.launch(_tri_box_kernel, dim=k,
              inputs=[wp.array(np.asarray(tris, np.float32).reshape(-1, 3), dtype=wp.vec3, device="cpu"),
                      wp.array(np.asarray(poses, np.float32), dtype=wp.transform, device="cpu"),
                      wp.array(np.asarray(hs, np.float32), dtype=wp.vec3, device="cpu"),
                      wp.zeros(1, dtype=wp.vec3, device="cpu"), float(limit), out], device="cpu")  # fmt: skip
    return out.numpy()


unit = st.floats(-1.0, 1.0, allow_nan=False)
vec = st.tuples(unit, unit, unit)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tri=st.tuples(vec, vec, vec), pos=vec, quat=st.tuples(unit, unit, unit, unit),
       h=st.tuples(st.floats(0.05, 0.5), st.floats(0.05, 0.5), st.floats(0.05, 0.5)))
def test_triangle_box_fast_path_matches_general_route(tri, pos, quat, h):
    tri = 0.6 * np.asarray(tri, np.float64)
    area = np.linalg.norm(np.cross(tri[1] - tri[0], tri[2] - tri[0]))
    q = np.asarray(quat, np.float64)
    if area < 1e-2 or np.linalg.norm(q) < 0.1:
        return
    q /= np.linalg.norm(q)
    c = 0.5 * np.asarray(pos, np.float64)
    h = np.asarray(h, np.float64)
    r = _run(tri, [np.r_[c, q]], [h])[0]
    d_gen, d_fast = float(r[0, 0]), float(r[0, 1])
    n_gen, n_fast = r[1], r[2]
    a_gen, b_gen, a_fast, b_fast = r[3], r[4], r[5], r[6]
    tri32 = tri.astype(np.float32).astype(np.float64)
    scale = max(float(h.max()), 0.5 * max(np.linalg.norm(tri32[i] - tri32[j]) for i, j in ((0, 1), (0, 2), (1, 2))))
    assert abs(np.linalg.norm(n_fast) - 1.0) < 1e-5
    # the signed distance along the normal is the returned distance
    assert abs(float(n_fast @ (b_fast - a_fast)) - d_fast) < 2e-5 * scale
    if d_gen > 1e-5 * scale and d_fast > 1e-5 * scale:
        # separated: the same GJK in the box frame
        assert d_fast == pytest.approx(d_gen, abs=2e-5 * scale)
        assert np.linalg.norm(n_fast - n_gen) < 2e-3
        assert np.linalg.norm(a_fast - a_gen) < 1e-3 * scale and np.linalg.norm(b_fast - b_gen) < 1e-3 * scale
        return
    if d_fast > 0.0 or d_gen > 0.0:
        return  # touching within round-off: either classification is right
    exact = _sat_depth(tri32, c.astype(np.float32), _quat_matrix(q.astype(np.float32)), h.astype(np.float32))
    assert -d_fast == pytest.approx(exact, abs=2e-5 * scale)  # the exact least overlap
    assert -d_gen >= exact - 2e-5 * scale  # the general route's depth is an upper bound of it
    if -d_gen <= exact + 1e-5 * scale:
        # both found the least overlap: the same direction unless two directions tie in depth
        dirs_tie = abs(float(n_gen @ n_fast)) < 1.0 - 1e-3
        if dirs_tie:
            assert float(n_gen @ (b_gen - a_gen)) == pytest.approx(d_fast, abs=2e-5 * scale)


def test_triangle_box_beyond_limit_is_rejected_like_gjk():
    """A box farther than ``limit`` from the triangle reports a distance above ``limit`` either way."""
    tri = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], np.float64)
    poses = [np.r_[0.3, 0.3, 0.1 + z, 0, 0, 0, 1] for z in (0.05, 0.25, 0.5, 1.0)]
    r = _run(np.stack([tri] * 4), poses, [(0.1, 0.1, 0.1)] * 4, limit=0.2)
    for k, z in enumerate((0.05, 0.25, 0.5, 1.0)):
        assert r[k, 0, 0] == pytest.approx(z, abs=1e-5)
        if z <= 0.2:
            assert r[k, 0, 1] == pytest.approx(z, abs=1e-5)
        else:
            assert r[k, 0, 1] > 0.2


# ---------------------------------------------------------------------------------------------- sorts


def _sort_f32(keys, segments):
    n = len(keys)
    k = wp.array(np.r_[keys, np.zeros(n)].astype(np.float32), dtype=float, device="cpu")
    v = wp.array(np.r_[np.arange(n), np.zeros(n)].astype(np.int32), dtype=int, device="cpu")
    b = wp.array(np.asarray([s[0] for s in segments], np.int32), dtype=int, device="cpu")
    e = wp.array(np.asarray([s[1] for s in segments], np.int32), dtype=int, device="cpu")
    wp.launch(host_sort.sort_f32_segments_kernel, dim=1, inputs=[k, v, n, b, e], device="cpu")
    return k.numpy()[:n], v.numpy()[:n]


@settings(max_examples=60, deadline=None)
@given(keys=st.lists(st.one_of(st.floats(-1e3, 1e3, width=32, allow_nan=False), st.sampled_from([0.0, -0.0, 1.5])),
                     min_size=0, max_size=300),  # fmt: skip
       cuts=st.lists(st.integers(0, 300), max_size=4))
def test_f32_segment_sort_is_numpy_stable_argsort(keys, cuts):
    keys = np.asarray(keys, np.float32)
    n = len(keys)
    bounds = sorted({0, n, *[c for c in cuts if c <= n]})
    segments = list(zip(bounds[:-1], bounds[1:]))
    got_k, got_v = _sort_f32(keys, segments)
    for b, e in segments:
        want = b + np.argsort(keys[b:e], kind="stable")
        np.testing.assert_array_equal(got_v[b:e], want)
        np.testing.assert_array_equal(got_k[b:e], keys[want])


@settings(max_examples=60, deadline=None)
@given(keys=st.lists(st.integers(0, (1 << 38) - 2), max_size=400), dup=st.integers(0, 50),
       spare=st.integers(0, 20), bits=st.sampled_from([24, 38, 40]))  # fmt: skip
def test_i64_count_sort_is_numpy_stable_argsort(keys, dup, spare, bits):
    keys = np.asarray(keys + [12345] * dup, np.int64) & ((1 << bits) - 1)
    keys = np.minimum(keys, (1 << bits) - 2)
    n = len(keys)
    cap = n + spare
    fill = (1 << bits) - 1
    kk = np.full(2 * max(cap, 1), fill, np.int64)
    kk[:n] = keys
    k = wp.array(kk, dtype=wp.int64, device="cpu")
    v = wp.array(np.arange(2 * max(cap, 1), dtype=np.int32), dtype=int, device="cpu")
    wp.launch(host_sort.sort_i64_count_kernel, dim=1,
              inputs=[k, v, wp.array([n], dtype=int, device="cpu"), max(cap, 1), 0, bits,
                      wp.zeros(host_sort.RADIX_BUCKETS, dtype=int, device="cpu")], device="cpu")  # fmt: skip
    np.testing.assert_array_equal(v.numpy()[:n], np.argsort(keys, kind="stable"))
    np.testing.assert_array_equal(k.numpy()[:n], np.sort(keys, kind="stable"))


def _pile(n=24, worlds=1):
    rng = np.random.default_rng(5)
    b = newton.ModelBuilder()
    for _w in range(worlds):
        if worlds > 1:
            b.begin_world()
        for k in range(n):
            i, j, lvl = k % 4, (k // 4) % 2, k // 8
            yaw = wp.quat_from_axis_angle(wp.vec3(0.0, 0.0, 1.0), float(rng.uniform(-0.2, 0.2)))
            pos = (0.4 * i + rng.uniform(-0.02, 0.02), 0.4 * j + rng.uniform(-0.02, 0.02), 0.2 + 0.39 * lvl)
            body = b.add_body(xform=wp.transform(pos, yaw))
            b.add_shape_box(body, hx=0.2, hy=0.2, hz=0.2)
        if worlds > 1:
            b.end_world()
    b.add_ground_plane()
    return b.finalize(device="cpu")


def _contacts(model, **kw):
    p = newton.CollisionPipeline(model, **kw)
    c = p.contacts()
    state = model.state()
    p.collide(state, c)
    p.collide(state, c)
    n = int(c.rigid_contact_count.numpy()[0])
    return {k: getattr(c, "rigid_contact_" + k).numpy()[:n].copy()
            for k in ("shape0", "shape1", "point0", "point1", "normal", "point_id")}  # fmt: skip


@pytest.mark.parametrize("worlds", [1, 3])
@pytest.mark.parametrize("deterministic", [False, True])
def test_cpu_sorts_are_bit_identical_to_warp_radix_sorts(monkeypatch, worlds, deterministic):
    """SAP broad phase and deterministic ordering with the serial CPU sorts vs Warp's sorts."""
    model = _pile(worlds=worlds)
    fast = _contacts(model, broad_phase="sap", deterministic=deterministic)
    from armillary.geometry import broad_phase as bpm
    from armillary.geometry import contact_sort as cs

    orig_launch = bpm._BroadPhaseBase._launch

    def warp_sort_launch(self, kernel, dim, inputs, device):
        if kernel is host_sort.sort_f32_segments_kernel:
            if self._segments == 1:
                wp.utils.radix_sort_pairs(self._keys, self._values, inputs[2])
            else:
                wp.utils.segmented_sort_pairs(self._keys, self._values, inputs[2], self._seg_begin, self._seg_end)
            return
        orig_launch(self, kernel, dim, inputs, device)

    def warp_sort_into(self, dst, device=None):
        dev = device if device is not None else self.device
        wp.utils.radix_sort_pairs(self.sort_key, self.sort_value, self.capacity, 0, self.sort_bits)
        gdim = bpm.grid_dim(wp.get_device(dev), self.capacity)
        wp.launch(cs._gather_kernel, dim=gdim, inputs=[self.scratch, self.sort_value, dst, gdim], device=dev)

    monkeypatch.setattr(bpm._BroadPhaseBase, "_launch", warp_sort_launch)
    monkeypatch.setattr(cs.DeterministicSort, "sort_into", warp_sort_into)
    ref = _contacts(model, broad_phase="sap", deterministic=deterministic)
    assert len(fast["shape0"]) > 0
    for k in fast:
        np.testing.assert_array_equal(fast[k], ref[k], err_msg=k)

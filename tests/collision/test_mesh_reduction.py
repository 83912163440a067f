"""Mesh / heightfield contact reduction and the widened deterministic sort key.

* A box resting on a finely triangulated mesh plane: unreduced, every triangle under the box
  contributes contacts; with ``reduce_contacts=True`` at most REDUCE_KEEP contacts remain per
  pair, the deepest is kept and they still span the box's support rectangle.
* Deterministic mode on a mesh of > 256 triangles: two runs are bit-identical, the order is
  by (shape_a, shape_b, sub_key) and sub-keys (4 * triangle + k) are unique beyond 255.
"""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import armillary as newton
from armillary.geometry.narrow_phase import REDUCE_KEEP

from .test_soft_contacts_mesh import _grid_mesh

HX, HY, HZ = 0.3, 0.2, 0.1
YAW = 0.3


def _hull_area(pts2):
    pts = sorted(map(tuple, np.round(pts2, 9)))
    if len(pts) < 3:
        return 0.0

    def cross(o, a, b):
        return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])

    lower, upper = [], []
    for p in pts:
        while len(lower) >= 2 and cross(lower[-2], lower[-1], p) <= 0:
            lower.pop()
        lower.append(p)
    for p in reversed(pts):
        while len(upper) >= 2 and cross(upper[-2], upper[-1], p) <= 0:
            upper.pop()
        upper.append(p)
    h = np.array(lower[:-1] + upper[:-1])
    return 0.5 * abs(np.dot(h[:, 0], np.roll(h[:, 1], 1)) - np.dot(h[:, 1], np.roll(h[:, 0], 1)))


def _box_on_mesh(cells=40, **kw):
    b = newton.ModelBuilder()
    b.add_shape_mesh(-1, mesh=_grid_mesh(cells, 1.0))
    body = b.add_body(xform=wp.transform((0.05, -0.03, HZ - 0.002),
                                         wp.quat_from_axis_angle(wp.vec3(0.0, 0.0, 1.0), YAW)))  # fmt: skip
    b.add_shape_box(body, hx=HX, hy=HY, hz=HZ)
    m = b.finalize(device="cpu")
    pipe = newton.CollisionPipeline(m, **kw)
    c = pipe.contacts()
    st = m.state()
    pipe.collide(st, c)
    n = int(c.rigid_contact_count.numpy()[0])
    bq = st.body_q.numpy()[0]
    Xb = wp.transform(wp.vec3(*bq[:3]), wp.quat(*bq[3:]))
    sb = m.shape_body.numpy()
    s0 = c.rigid_contact_shape0.numpy()[:n]
    p0 = c.rigid_contact_point0.numpy()[:n]
    world = np.array([np.array(wp.transform_point(Xb, wp.vec3(*p))) if sb[s] >= 0 else p for s, p in zip(s0, p0)])
    nrm = c.rigid_contact_normal.numpy()[:n]
    p1 = c.rigid_contact_point1.numpy()[:n]
    return n, world, nrm, c, (s0, p1)


def test_box_on_fine_mesh_reduced_contacts_span_support():
    n_full, w_full, _, _, _ = _box_on_mesh(reduce_contacts=False)
    n_red, w_red, nrm, _, _ = _box_on_mesh(reduce_contacts=True)
    assert n_full > 50  # 40 x 40 cells over 2 x 2 m: dozens of triangles under the 0.6 x 0.4 m box
    assert 4 <= n_red <= REDUCE_KEEP
    np.testing.assert_allclose(np.abs(nrm[:, 2]), 1.0, atol=1e-5)
    area = HX * HY * 4.0
    a_full = _hull_area(w_full[:, :2])
    a_red = _hull_area(w_red[:, :2])
    assert a_full == pytest.approx(area, rel=1e-3)
    assert a_red >= 0.98 * a_full, (a_red, a_full)
    # every box corner is (near) a kept contact
    R = np.array([[np.cos(YAW), -np.sin(YAW)], [np.sin(YAW), np.cos(YAW)]])
    for sx in (-1, 1):
        for sy in (-1, 1):
            corner = np.array([0.05, -0.03]) + R @ np.array([sx * HX, sy * HY])
            assert np.min(np.linalg.norm(w_red[:, :2] - corner, axis=1)) < 1e-4


def test_reduction_keeps_the_deepest_contact():
    """Tilted box on a fine mesh: one edge penetrates (slightly skewed, so the depth varies along
    it); the reduced set keeps the deepest depth."""
    def depth(reduce):
        b = newton.ModelBuilder()
        b.add_shape_mesh(-1, mesh=_grid_mesh(30, 1.0))
        q = wp.quat_from_axis_angle(wp.normalize(wp.vec3(1.0, 0.01, 0.0)), 0.2)
        body = b.add_body(xform=wp.transform((0.0, 0.0, 0.135), q))
        b.add_shape_box(body, hx=HX, hy=HY, hz=HZ)
        m = b.finalize(device="cpu")
        pipe = newton.CollisionPipeline(m, reduce_contacts=reduce)
        c = pipe.contacts()
        st = m.state()
        pipe.collide(st, c)
        n = int(c.rigid_contact_count.numpy()[0])
        bq = st.body_q.numpy()[0]
        Xb = wp.transform(wp.vec3(*bq[:3]), wp.quat(*bq[3:]))
        sb = m.shape_body.numpy()
        d = []
        for i in range(n):
            pts = []
            for s, p, o in ((c.rigid_contact_shape0.numpy()[i], c.rigid_contact_point0.numpy()[i],
                             c.rigid_contact_offset0.numpy()[i]),
                            (c.rigid_contact_shape1.numpy()[i], c.rigid_contact_point1.numpy()[i],
                             c.rigid_contact_offset1.numpy()[i])):  # fmt: skip
                w = wp.vec3(*(p + o))
                pts.append(np.array(wp.transform_point(Xb, w)) if sb[s] >= 0 else np.array(w))
            d.append(float(np.dot(c.rigid_contact_normal.numpy()[i], pts[1] - pts[0])))
        return n, min(d)

    n_full, d_full = depth(False)
    n_red, d_red = depth(True)
    assert n_red <= REDUCE_KEEP < n_full
    assert d_full < -1e-3
    assert d_red == pytest.approx(d_full, abs=1e-6)


def test_deterministic_order_with_many_triangles():
    """> 256 triangles, unreduced: sub-keys beyond 8 bits stay unique, runs are bit-identical."""
    runs = []
    for _ in range(2):
        n, _, _, c, _ = _box_on_mesh(cells=40, reduce_contacts=False, deterministic=True)
        s0 = c.rigid_contact_shape0.numpy()[:n]
        s1 = c.rigid_contact_shape1.numpy()[:n]
        pid = c.rigid_contact_point_id.numpy()[:n]
        runs.append((n, s0, s1, pid, c.rigid_contact_point0.numpy()[:n].copy(),
                     c.rigid_contact_point1.numpy()[:n].copy(), c.rigid_contact_normal.numpy()[:n].copy()))
    a, b = runs
    assert a[0] == b[0] and a[0] > 50
    for x, y in zip(a[1:], b[1:]):
        assert np.array_equal(x, y)
    n, s0, s1, pid = a[:4]
    assert pid.max() > 255 * 4  # triangle ids above 255 (40 x 40 cells = 3200 triangles)
    keys = [(int(s0[i]), int(s1[i]), int(pid[i])) for i in range(n)]
    assert keys == sorted(keys)
    assert len(set(keys)) == n  # no ties


def test_heightfield_reduction_bounded():
    """A box on a fine flat heightfield: reduced to <= REDUCE_KEEP contacts spanning the footprint."""
    nrow = ncol = 41
    hf = newton.Heightfield(np.zeros((nrow, ncol)), nrow, ncol, hx=1.0, hy=1.0)
    counts = {}
    for reduce in (False, True):
        b = newton.ModelBuilder()
        b.add_shape_heightfield(heightfield=hf)
        body = b.add_body(xform=wp.transform((0.05, -0.03, HZ - 0.002),
                                             wp.quat_from_axis_angle(wp.vec3(0.0, 0.0, 1.0), YAW)))  # fmt: skip
        b.add_shape_box(body, hx=HX, hy=HY, hz=HZ)
        m = b.finalize(device="cpu")
        pipe = newton.CollisionPipeline(m, reduce_contacts=reduce, deterministic=True)
        c = pipe.contacts()
        pipe.collide(m.state(), c)
        counts[reduce] = int(c.rigid_contact_count.numpy()[0])
    assert counts[False] > 50
    assert 4 <= counts[True] <= REDUCE_KEEP

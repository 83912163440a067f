"""Boxes resting on a triangle-mesh floor (the ``boxes on mesh`` benchmark scene, smaller): the
box-triangle fast path (exact separating-axis overlap, GJK in the box frame) gives every
triangle the general route's depth and normal, and the pipeline's contacts are the resting
box's: normal along the floor normal, 1 mm deep, points on the box's bottom face, and with
reduction the 4 bottom corners (the support polygon) among them."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import armillary as newton
from armillary.geometry import narrow_phase as npm
from armillary.geometry.convex import convex_distance
from armillary.geometry.mesh_collision import GeoBuffers, local_aabb, tri_geo, triangle_convex_distance, world_aabb

wp.config.quiet = True
H = (0.15, 0.12, 0.1)


def _hull_area(p):
    """Area of the 2D convex hull of points ``p`` (monotone chain)."""
    pts = sorted(map(tuple, np.round(p, 9)))

    def half(seq):
        h = []
        for q in seq:
            while len(h) >= 2 and ((h[-1][0] - h[-2][0]) * (q[1] - h[-2][1])
                                   - (h[-1][1] - h[-2][1]) * (q[0] - h[-2][0])) <= 0:  # fmt: skip
                h.pop()
            h.append(q)
        return h

    hull = half(pts)[:-1] + half(pts[::-1])[:-1]
    if len(hull) < 3:
        return 0.0
    x, y = np.array(hull).T
    return 0.5 * abs(float(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))))


def _scene(n=9, cells=24):
    rng = np.random.default_rng(2)
    xs = np.linspace(-1.0, 1.0, cells + 1)
    verts = np.array([(x, y, 0.0) for y in xs for x in xs], np.float32)
    faces = []
    for i in range(cells):
        for j in range(cells):
            a, d = i * (cells + 1) + j, (i + 1) * (cells + 1) + j
            faces += [a, a + 1, d + 1, a, d + 1, d]
    b = newton.ModelBuilder()
    b.add_shape_mesh(-1, mesh=newton.Mesh(verts, np.array(faces, np.int32), compute_inertia=False))
    side = int(np.ceil(np.sqrt(n)))
    for k in range(n):
        i, j = divmod(k, side)
        yaw = wp.quat_from_axis_angle(wp.vec3(0.0, 0.0, 1.0), float(rng.uniform(-0.5, 0.5)))
        pos = (-0.6 + 1.2 * i / (side - 1), -0.6 + 1.2 * j / (side - 1), H[2] - 0.001)
        body = b.add_body(xform=wp.transform(pos, yaw))
        b.add_shape_box(body, hx=H[0], hy=H[1], hz=H[2])
    return b.finalize(device="cpu")


@wp.kernel
def _per_triangle(shape_X: wp.array(dtype=wp.transform), shape_scale: wp.array(dtype=wp.vec3), geo: GeoBuffers,
                  limit: float, count: wp.array(dtype=int), out: wp.array2d(dtype=wp.vec3)):  # fmt: skip
    b = wp.tid() + 1
    XM = shape_X[0]
    sM = shape_scale[0]
    g = npm.make_geo(npm.BOX, shape_X[b], shape_scale[b], b, geo.vstart, geo.vcount, geo.fcount)
    lo, hi = world_aabb(g, geo.verts, limit)
    llo, lhi = local_aabb(XM, sM, lo, hi)
    mesh = wp.mesh_get(geo.mesh_id[0])
    q = wp.mesh_query_aabb(geo.mesh_id[0], llo, lhi)
    f = int(0)
    while wp.mesh_query_aabb_next(q, f):
        gT = tri_geo(XM, wp.cw_mul(mesh.points[mesh.indices[3 * f]], sM),
                     wp.cw_mul(mesh.points[mesh.indices[3 * f + 1]], sM),
                     wp.cw_mul(mesh.points[mesh.indices[3 * f + 2]], sM))  # fmt: skip
        d0, n0, a0, b0 = convex_distance(gT, g, geo.verts)
        d1, n1, a1, b1 = triangle_convex_distance(gT, g, geo.verts, limit)
        k = wp.atomic_add(count, 0, 1)
        if k < out.shape[0]:
            out[k, 0] = wp.vec3(d0, d1, float(f))
            out[k, 1] = n0
            out[k, 2] = n1


def test_every_triangle_gets_the_general_routes_depth_and_normal():
    model = _scene()
    pipeline = newton.CollisionPipeline(model, broad_phase="explicit")
    contacts = pipeline.contacts()
    pipeline.collide(model.state(), contacts)
    geo = npm.convex_mesh_buffers(model)[0]
    count = wp.zeros(1, dtype=int, device="cpu")
    out = wp.zeros((20000, 3), dtype=wp.vec3, device="cpu")
    limit = 0.2
    wp.launch(_per_triangle, dim=model.shape_count - 1,
              inputs=[pipeline._shape_X, model.shape_scale, geo, limit, count, out], device="cpu")  # fmt: skip
    r = out.numpy()[: int(count.numpy()[0])]
    d_gen, d_fast = r[:, 0, 0], r[:, 0, 1]
    near = d_gen <= limit
    pen = d_gen < 0.0
    assert pen.sum() > 50 and (near & ~pen).sum() > 500
    # within the limit both routes agree; beyond it both reject
    np.testing.assert_allclose(d_fast[near], d_gen[near], atol=1e-6)
    assert np.all(d_fast[~near] > limit)
    # overlapping triangles: at most 1 mm deep (less for one the box barely reaches over: it
    # leaves sideways), and those 1 mm deep along the floor normal (triangle -> box: +z)
    assert np.all(d_fast[pen] >= -0.001 - 2e-6)
    full = pen & (d_fast < -0.001 + 2e-6)
    assert full.sum() > 50
    np.testing.assert_allclose(r[full, 2], np.tile([0.0, 0.0, 1.0], (full.sum(), 1)), atol=1e-5)
    np.testing.assert_allclose(r[near, 2], r[near, 1], atol=1e-3)


@pytest.mark.parametrize("reduce", [True, False])
def test_pipeline_contacts_are_the_resting_boxes(reduce):
    model = _scene()
    pipeline = newton.CollisionPipeline(model, broad_phase="explicit", reduce_contacts=reduce, rigid_contact_max=20000)
    contacts = pipeline.contacts()
    pipeline.collide(model.state(), contacts)
    assert not pipeline.check_overflow(contacts, warn=False)
    n = int(contacts.rigid_contact_count.numpy()[0])
    s0 = contacts.rigid_contact_shape0.numpy()[:n]
    s1 = contacts.rigid_contact_shape1.numpy()[:n]
    p0 = contacts.rigid_contact_point0.numpy()[:n]
    p1 = contacts.rigid_contact_point1.numpy()[:n]
    nrm = contacts.rigid_contact_normal.numpy()[:n]
    corners = np.array([(sx * H[0], sy * H[1], -H[2]) for sx in (-1, 1) for sy in (-1, 1)])
    for box in range(1, model.shape_count):
        m = ((s0 == box) & (s1 == 0)) | ((s0 == 0) & (s1 == box))
        assert m.sum() >= 4, box
        box_first = s0[m][0] == box
        pb = p0[m] if box_first else p1[m]  # box body frame
        pm = p1[m] if box_first else p0[m]  # mesh (static: world)
        nb = nrm[m] * (1.0 if box_first else -1.0)  # box -> mesh
        # contacts within the 0.2 m detection range of the floor; the ones under the box are
        # on its bottom face, 1 mm into the floor, with the floor normal
        under = np.abs(pm[:, 2]) < 1e-6
        assert under.sum() >= 3
        np.testing.assert_allclose(pb[under, 2], -H[2], atol=1e-5)
        on_face = np.all(np.abs(pb[under, :2]) <= np.array(H[:2]) + 1e-5, axis=1)
        assert on_face.all()
        if reduce:
            assert m.sum() <= npm.REDUCE_KEEP
            # the reduced points keep the support polygon: extremal corners of the bottom face,
            # spanning most of it around the center
            near_corner = [np.min(np.linalg.norm(pb - c, axis=1)) < 1e-5 for c in corners]
            assert sum(near_corner) >= 3, box
            assert _hull_area(pb[:, :2]) >= 0.5 * 4 * H[0] * H[1], box
            np.testing.assert_allclose(nb, np.tile([0.0, 0.0, -1.0], (m.sum(), 1)), atol=1e-3)

"""Soft (particle) contacts against triangle meshes and heightfields: the particle center as a
point against the closest triangle (CCW front side outward, solid behind), compared with the
analytic distance / normal of the flat or sloped surface the geometry represents."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import armillary as newton


def _grid_mesh(n, half, z=0.0):
    """Flat n x n-cell mesh of the square [-half, half]^2 at height z, CCW seen from +z."""
    xs = np.linspace(-half, half, n + 1)
    v = np.array([(x, y, z) for y in xs for x in xs], np.float32)
    f = []
    for i in range(n):
        for j in range(n):
            a, b, c, d = i * (n + 1) + j, i * (n + 1) + j + 1, (i + 1) * (n + 1) + j + 1, (i + 1) * (n + 1) + j
            f += [a, b, c, a, c, d]
    return newton.Mesh(v, np.array(f, np.int32), compute_inertia=False)


def _collide(add_shape, particles, X, radius=0.05, gap=0.1):
    b = newton.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    add_shape(b)
    for p in particles:
        b.add_particle(tuple(float(v) for v in p), (0.0, 0.0, 0.0), 1.0, radius=radius)
    m = b.finalize(device="cpu")
    pipe = newton.CollisionPipeline(m, soft_contact_gap=gap)
    c = pipe.contacts()
    st = m.state()
    pipe.collide(st, c)
    n = int(c.soft_contact_count.numpy()[0])
    part = c.soft_contact_particle.numpy()[:n]
    order = np.argsort(part)
    pos = c.soft_contact_body_pos.numpy()[:n][order]
    nrm = c.soft_contact_normal.numpy()[:n][order]
    assert np.all(c.soft_contact_shape.numpy()[:n] == 0)
    return part[order], pos, nrm, m, st


def test_soft_contact_flat_mesh_on_body():
    rot = wp.quat_from_axis_angle(wp.normalize(wp.vec3(0.2, 1.0, 0.4)), 0.7)
    X = wp.transform((0.3, -0.2, 0.5), rot)
    mesh = _grid_mesh(6, 1.0)
    local = [(0.13, -0.41, 0.08), (0.5, 0.5, 0.149), (-0.7, 0.2, 0.2), (0.0, 0.0, -0.03), (1.5, 0.0, 0.02)]
    world = [np.array(wp.transform_point(X, wp.vec3(*p))) for p in local]

    def add(b):
        body = b.add_body(xform=X)
        b.add_shape_mesh(body, mesh=mesh)

    part, pos, nrm, m, st = _collide(add, world, X)
    # contact when the signed distance to the plane z = 0 is below radius + gap = 0.15;
    # particle 3 is just behind the (CCW, +z facing) surface: inside, normal still +z
    assert part.tolist() == [0, 1, 3]
    for k, i in enumerate(part):
        p = np.array(local[i])
        np.testing.assert_allclose(pos[k], [p[0], p[1], 0.0], atol=1e-5)  # body frame == shape frame here
        np.testing.assert_allclose(nrm[k], np.array(wp.quat_rotate(rot, wp.vec3(0.0, 0.0, 1.0))), atol=1e-5)


def test_soft_contact_scaled_mesh_and_edge():
    """Non-uniform scale is exact; beyond the mesh border the closest point is on the edge."""
    mesh = _grid_mesh(3, 0.5)
    pts = [(0.6, 0.3, 0.1), (1.1, 0.0, 0.05), (0.0, 0.0, 0.3)]

    def add(b):
        b.add_shape_mesh(-1, mesh=mesh, scale=(2.0, 1.0, 1.0))

    part, pos, nrm, _, _ = _collide(add, pts, wp.transform_identity())
    assert part.tolist() == [0, 1]
    np.testing.assert_allclose(pos[0], [0.6, 0.3, 0.0], atol=1e-5)
    np.testing.assert_allclose(nrm[0], [0.0, 0.0, 1.0], atol=1e-5)
    # (1.1, 0, 0.05): the scaled border is x = 1.0 -> closest point (1, 0, 0), normal along (0.1, 0, 0.05)
    np.testing.assert_allclose(pos[1], [1.0, 0.0, 0.0], atol=1e-5)
    e = np.array([0.1, 0.0, 0.05]) / np.linalg.norm([0.1, 0.0, 0.05])
    np.testing.assert_allclose(nrm[1], e, atol=1e-5)


@pytest.mark.parametrize("slope", [(0.0, 0.0), (0.3, -0.2)], ids=["flat", "sloped"])
def test_soft_contact_heightfield(slope):
    nrow, ncol, hx, hy, z0 = 9, 11, 2.0, 1.5, 0.25
    ys = np.linspace(-hy, hy, nrow)
    xs = np.linspace(-hx, hx, ncol)
    data = z0 + slope[0] * xs[None, :] + slope[1] * ys[:, None]
    hf = newton.Heightfield(data, nrow, ncol, hx=hx, hy=hy)
    nrm = np.array([-slope[0], -slope[1], 1.0])
    nrm /= np.linalg.norm(nrm)
    off = np.array([0.5, -0.3, 0.1])  # heightfield shape origin
    rng = np.random.default_rng(5)
    xy = rng.uniform(-1.2, 1.2, (40, 2))
    h = rng.uniform(-0.1, 0.4, 40)  # signed distance to the surface plane
    surf = np.c_[xy, z0 + slope[0] * xy[:, 0] + slope[1] * xy[:, 1]]
    local = surf + h[:, None] * nrm[None, :]

    def add(b):
        b.add_shape_heightfield(xform=wp.transform(tuple(off), wp.quat_identity()), heightfield=hf)

    part, pos, n, _, _ = _collide(add, local + off, None)
    want = np.nonzero(h < 0.15)[0]
    assert part.tolist() == want.tolist()
    np.testing.assert_allclose(pos, surf[want] + off, atol=2e-5)  # static shape: body frame = world
    np.testing.assert_allclose(n, np.tile(nrm, (len(want), 1)), atol=1e-5)

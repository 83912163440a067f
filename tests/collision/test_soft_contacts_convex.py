"""Soft (particle) contacts against ellipsoids, cylinders, cones and convex meshes: the particle
center against the shape's surface, compared with analytic distances."""

from __future__ import annotations

import numpy as np
import warp as wp

import armillary as newton


def _collide(add_shape, particles, xform=None):
    b = newton.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    rot = wp.quat_from_axis_angle(wp.normalize(wp.vec3(0.3, 1.0, 0.2)), 0.6)
    X = wp.transform((0.4, -0.3, 0.2), rot) if xform is None else xform
    body = b.add_body(xform=X)
    add_shape(b, body)
    for p in particles:
        b.add_particle(tuple(float(v) for v in wp.transform_point(X, wp.vec3(*p))), (0.0, 0.0, 0.0), 1.0,
                       radius=0.05)  # fmt: skip
    m = b.finalize(device="cpu")
    pipe = newton.CollisionPipeline(m, soft_contact_gap=0.2)
    c = pipe.contacts()
    pipe.collide(m.state(), c)
    n = int(c.soft_contact_count.numpy()[0])
    part = c.soft_contact_particle.numpy()[:n]
    order = np.argsort(part)
    pos = c.soft_contact_body_pos.numpy()[:n][order]
    nrm = c.soft_contact_normal.numpy()[:n][order]
    nl = np.array([np.array(wp.quat_rotate_inv(X.q, wp.vec3(*v))) for v in nrm]).reshape(-1, 3)
    return part[order], pos, nl


def _check(part, pos, nl, expect):
    """expect: per particle index, (local surface point, local outward normal) or None (no contact)."""
    want = [i for i, e in enumerate(expect) if e is not None]
    assert list(part) == want
    for k, i in enumerate(want):
        np.testing.assert_allclose(pos[k], expect[i][0], atol=2e-4)
        np.testing.assert_allclose(nl[k], expect[i][1], atol=5e-3)  # MPR-refined normal inside curved shapes


def test_soft_contact_cylinder():
    pts = [(0.6, 0.0, 0.1), (0.0, 0.3, 0.45), (0.3, 0.0, 0.2), (0.0, 0.0, 0.9), (0.65, 0.0, 0.5)]
    part, pos, nl = _collide(lambda b, body: b.add_shape_cylinder(body, radius=0.5, half_height=0.4), pts)
    e = np.array([0.15, 0.0, 0.1]) / np.linalg.norm([0.15, 0.0, 0.1])
    _check(part, pos, nl, [
        ((0.5, 0.0, 0.1), (1, 0, 0)),  # outside the side
        ((0.0, 0.3, 0.4), (0, 0, 1)),  # above the cap
        ((0.5, 0.0, 0.2), (1, 0, 0)),  # inside, nearest the side
        None,  # far above
        ((0.5, 0.0, 0.4), e),  # near the rim (outside both the side and the cap)
    ])  # fmt: skip


def test_soft_contact_cone():
    # cone radius 0.5, half height 0.5: apex at z=0.5; the side has outward normal (2, 0, 1)/sqrt(5) in xz
    pts = [(0.0, 0.0, 0.6), (0.0, 0.2, -0.55), (0.4, 0.0, 0.1)]
    part, pos, nl = _collide(lambda b, body: b.add_shape_cone(body, radius=0.5, half_height=0.5), pts)
    ns = np.array([2.0, 0.0, 1.0]) / np.sqrt(5.0)
    p = np.array([0.4, 0.0, 0.1])
    # side line through (0.25, 0, 0) with outward normal ns
    h = float(np.dot(p - np.array([0.25, 0.0, 0.0]), ns))
    _check(part, pos, nl, [
        ((0.0, 0.0, 0.5), (0, 0, 1)),  # above the apex
        ((0.0, 0.2, -0.5), (0, 0, -1)),  # below the base
        (tuple(p - h * ns), ns),  # beside the slanted side
    ])  # fmt: skip


def test_soft_contact_ellipsoid():
    pts = [(0.9, 0.0, 0.0), (0.0, 0.0, 0.45), (0.0, 0.55, 0.0), (0.0, 0.0, 1.0)]
    part, pos, nl = _collide(lambda b, body: b.add_shape_ellipsoid(body, rx=0.8, ry=0.6, rz=0.4), pts)
    _check(part, pos, nl, [
        ((0.8, 0.0, 0.0), (1, 0, 0)),
        ((0.0, 0.0, 0.4), (0, 0, 1)),
        ((0.0, 0.6, 0.0), (0, 1, 0)),  # inside, nearest the y pole
        None,
    ])  # fmt: skip


def test_soft_contact_convex_mesh():
    mesh = newton.Mesh.create_box(0.3, 0.4, 0.5)
    pts = [(0.35, 0.1, 0.0), (0.0, 0.0, 0.45), (0.0, 0.0, 0.8), (0.4, 0.5, 0.1)]
    part, pos, nl = _collide(lambda b, body: b.add_shape_convex_hull(body, mesh=mesh, scale=(2.0, 1.0, 1.0)), pts)
    e = np.array([0.0, 0.1, 0.0])
    _check(part, pos, nl, [
        ((0.6, 0.1, 0.0), (1, 0, 0)),  # inside: the scaled x face (half extent 0.6) is nearest
        ((0.0, 0.0, 0.5), (0, 0, 1)),
        None,
        ((0.4, 0.4, 0.1), e / np.linalg.norm(e)),
    ])  # fmt: skip

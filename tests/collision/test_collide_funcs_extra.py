"""collide_sphere_cylinder, collide_plane_cylinder and collide_plane_ellipsoid called from a kernel,
checked against analytic distances, positions and normals."""

from __future__ import annotations

import numpy as np
import warp as wp

import armillary as newton
import armillary.geometry as geo

MAXVAL = geo.MAXVAL


@wp.kernel
def _sphere_cyl_kernel(p: wp.array(dtype=wp.vec3), r: float, c: wp.vec3, a: wp.vec3, R: float, hh: float,
                       d_out: wp.array(dtype=float), pos_out: wp.array(dtype=wp.vec3),
                       n_out: wp.array(dtype=wp.vec3)):  # fmt: skip
    i = wp.tid()
    d, pos, n = geo.collide_sphere_cylinder(p[i], r, c, a, R, hh)
    d_out[i] = d
    pos_out[i] = pos
    n_out[i] = n


def test_collide_sphere_cylinder():
    pts = np.array([[2.0, 0.0, 0.3], [0.8, 0.0, 0.3], [0.3, 0.0, 0.95], [0.0, 0.0, 1.7], [1.6, 0.0, 1.4]], np.float32)
    n = len(pts)
    p = wp.array(pts, dtype=wp.vec3, device="cpu")
    d = wp.zeros(n, dtype=float, device="cpu")
    pos = wp.zeros(n, dtype=wp.vec3, device="cpu")
    nn = wp.zeros(n, dtype=wp.vec3, device="cpu")
    wp.launch(_sphere_cyl_kernel, n, inputs=[p, 0.5, wp.vec3(0.0), wp.vec3(0.0, 0.0, 1.0), 1.0, 1.0],
              outputs=[d, pos, nn], device="cpu")  # fmt: skip
    d, pos, nn = d.numpy(), pos.numpy(), nn.numpy()
    e = np.sqrt(0.6**2 + 0.4**2)
    np.testing.assert_allclose(d, [0.5, -0.7, -0.55, 0.2, e - 0.5], atol=1e-5)
    np.testing.assert_allclose(nn[0], [-1, 0, 0], atol=1e-6)
    np.testing.assert_allclose(pos[0], [1.25, 0, 0.3], atol=1e-5)
    np.testing.assert_allclose(nn[1], [-1, 0, 0], atol=1e-6)
    np.testing.assert_allclose(pos[1], [0.65, 0, 0.3], atol=1e-5)
    np.testing.assert_allclose(nn[2], [0, 0, -1], atol=1e-6)
    np.testing.assert_allclose(pos[2], [0.3, 0, 0.725], atol=1e-5)
    np.testing.assert_allclose(nn[3], [0, 0, -1], atol=1e-6)
    np.testing.assert_allclose(nn[4], [-0.6 / e, 0, -0.4 / e], atol=1e-5)


def test_collide_sphere_cylinder_rotated_axis_matches_pipeline():
    """A sphere against a tilted cylinder: same distance and normal as the pipeline's contact."""
    q = wp.quat_from_axis_angle(wp.normalize(wp.vec3(1.0, 1.0, 0.0)), 0.7)
    b = newton.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    cyl = b.add_body(xform=wp.transform((0.1, -0.2, 0.3), q))
    b.add_shape_cylinder(cyl, radius=0.5, half_height=0.8)
    sph = b.add_body(xform=wp.transform((0.85, 0.1, 0.6), wp.quat_identity()))
    b.add_shape_sphere(sph, radius=0.3)
    m = b.finalize(device="cpu")
    pipe = newton.CollisionPipeline(m)
    c = pipe.contacts()
    pipe.collide(m.state(), c)
    cnt = int(c.rigid_contact_count.numpy()[0])
    assert cnt >= 1
    s0 = c.rigid_contact_shape0.numpy()[:cnt]
    nrm = c.rigid_contact_normal.numpy()[:cnt]
    p0 = c.rigid_contact_point0.numpy()[:cnt]
    p1 = c.rigid_contact_point1.numpy()[:cnt]
    sign = 1.0 if s0[0] == 1 else -1.0  # our normal points sphere -> cylinder
    bq = m.body_q.numpy()
    w0 = np.array(wp.transform_point(wp.transform(*bq[m.shape_body.numpy()[s0[0]]]), wp.vec3(*p0[0])))
    s1 = 1 - s0[0]
    w1 = np.array(wp.transform_point(wp.transform(*bq[m.shape_body.numpy()[s1]]), wp.vec3(*p1[0])))
    m0 = float(c.rigid_contact_margin0.numpy()[0])
    m1 = float(c.rigid_contact_margin1.numpy()[0])
    pipe_d = float(np.dot(nrm[0], w1 - w0)) - m0 - m1
    axis = np.array(wp.quat_rotate(q, wp.vec3(0.0, 0.0, 1.0)))
    p = wp.array([[0.85, 0.1, 0.6]], dtype=wp.vec3, device="cpu")
    d = wp.zeros(1, dtype=float, device="cpu")
    pos = wp.zeros(1, dtype=wp.vec3, device="cpu")
    nn = wp.zeros(1, dtype=wp.vec3, device="cpu")
    wp.launch(_sphere_cyl_kernel, 1, inputs=[p, 0.3, wp.vec3(0.1, -0.2, 0.3), wp.vec3(*axis), 0.5, 0.8],
              outputs=[d, pos, nn], device="cpu")  # fmt: skip
    np.testing.assert_allclose(d.numpy()[0], pipe_d, atol=2e-4)
    np.testing.assert_allclose(nn.numpy()[0], sign * nrm[0], atol=2e-3)


@wp.kernel
def _plane_cyl_kernel(c: wp.vec3, a: wp.vec3, d_out: wp.array(dtype=wp.vec4), pos_out: wp.array(dtype=wp.vec3),
                      n_out: wp.array(dtype=wp.vec3)):  # fmt: skip
    d, pos, n = geo.collide_plane_cylinder(wp.vec3(0.0, 0.0, 1.0), wp.vec3(0.0, 0.0, 0.0), c, a, 1.0, 1.0)
    d_out[0] = d
    for k in range(4):
        pos_out[k] = wp.vec3(pos[k, 0], pos[k, 1], pos[k, 2])
    n_out[0] = n


def _plane_cyl(c, a):
    d = wp.zeros(1, dtype=wp.vec4, device="cpu")
    pos = wp.zeros(4, dtype=wp.vec3, device="cpu")
    n = wp.zeros(1, dtype=wp.vec3, device="cpu")
    wp.launch(_plane_cyl_kernel, 1, inputs=[wp.vec3(*c), wp.vec3(*a)], outputs=[d, pos, n], device="cpu")
    return d.numpy()[0], pos.numpy(), n.numpy()[0]


def test_collide_plane_cylinder_standing():
    d, pos, n = _plane_cyl((0.0, 0.0, 0.9), (0.0, 0.0, 1.0))
    np.testing.assert_allclose(d[:3], [-0.1, -0.1, -0.1], atol=1e-5)
    assert d[3] == MAXVAL
    np.testing.assert_allclose(pos[:3, 2], -0.05, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(pos[:3, :2], axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(n, [0, 0, 1], atol=0)


def test_collide_plane_cylinder_lying_and_tilted():
    d, pos, n = _plane_cyl((0.0, 0.0, 0.9), (1.0, 0.0, 0.0))
    # rolling (the reference engine's layout): both ends of the lowest side line touch (slots 0
    # and 1), slot 2 is the near cap's rim point 90 degrees from the deepest one
    assert np.isclose(d.min(), -0.1, atol=1e-5)
    low = sorted(pos[d < 0][:, 0])
    np.testing.assert_allclose([low[0], low[-1]], [-1.0, 1.0], atol=1e-5)
    np.testing.assert_allclose(d[:3], [-0.1, -0.1, 0.9], atol=1e-5)
    assert d[3] == MAXVAL
    s = np.sqrt(0.5)
    d, pos, n = _plane_cyl((0.0, 0.0, 0.9), (s, 0.0, s))
    # deepest point: lower cap rim, z = 0.9 - s - s
    np.testing.assert_allclose(d[0], 0.9 - 2 * s, atol=1e-5)
    np.testing.assert_allclose(pos[0], [0.0, 0.0, 0.5 * (0.9 - 2 * s)], atol=1e-5)
    np.testing.assert_allclose(d[1], 0.9, atol=1e-5)  # upper cap's lowest rim point
    assert np.all(d >= d[0] - 1e-6)


@wp.kernel
def _plane_ell_kernel(c: wp.vec3, q: wp.quat, s: wp.vec3, out: wp.array(dtype=wp.vec3)):
    d, pos, n = geo.collide_plane_ellipsoid(wp.vec3(0.0, 0.0, 1.0), wp.vec3(0.0, 0.0, 0.1), c,
                                            wp.quat_to_matrix(q), s)  # fmt: skip
    out[0] = wp.vec3(d, 0.0, 0.0)
    out[1] = pos
    out[2] = n


def test_collide_plane_ellipsoid():
    out = wp.zeros(3, dtype=wp.vec3, device="cpu")
    wp.launch(_plane_ell_kernel, 1, inputs=[wp.vec3(0.3, 0.2, 0.5), wp.quat_identity(), wp.vec3(1.0, 2.0, 0.7)],
              outputs=[out], device="cpu")  # fmt: skip
    o = out.numpy()
    np.testing.assert_allclose(o[0, 0], 0.5 - 0.7 - 0.1, atol=1e-6)
    np.testing.assert_allclose(o[1], [0.3, 0.2, 0.5 - 0.7 - 0.5 * (0.5 - 0.7 - 0.1)], atol=1e-6)
    np.testing.assert_allclose(o[2], [0, 0, 1], atol=0)
    # rotated 90 degrees about x: the 2.0 semi-axis is vertical
    q = wp.quat_from_axis_angle(wp.vec3(1.0, 0.0, 0.0), 0.5 * np.pi)
    wp.launch(_plane_ell_kernel, 1, inputs=[wp.vec3(0.0, 0.0, 1.5), q, wp.vec3(1.0, 2.0, 0.7)], outputs=[out],
              device="cpu")  # fmt: skip
    np.testing.assert_allclose(out.numpy()[0, 0], 1.5 - 2.0 - 0.1, atol=1e-5)
    # tilted: support height sqrt(sum (R s)_z^2)
    q = wp.quat_from_axis_angle(wp.normalize(wp.vec3(1.0, 1.0, 0.3)), 0.9)
    wp.launch(_plane_ell_kernel, 1, inputs=[wp.vec3(0.0, 0.0, 3.0), q, wp.vec3(1.0, 2.0, 0.7)], outputs=[out],
              device="cpu")  # fmt: skip
    Rm = np.array(wp.quat_to_matrix(q)).reshape(3, 3)
    h = np.sqrt(np.sum((Rm[2, :] * np.array([1.0, 2.0, 0.7])) ** 2))
    np.testing.assert_allclose(out.numpy()[0, 0], 3.0 - h - 0.1, atol=1e-5)

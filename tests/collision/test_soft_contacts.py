"""Soft (particle-shape) contact records on a moving, rotating body.

soft_contact_body_pos is the contact point in the shape's body frame; soft_contact_body_vel is
the shape's own surface velocity in that frame on top of the rigid body motion, which is zero
for rigid primitives even when the body moves (the reference engine writes zero here as well;
solvers add the body velocity at the contact point themselves)."""

from __future__ import annotations

import numpy as np
import warp as wp

import armillary as newton


def test_soft_contact_on_moving_body():
    b = newton.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    rot = wp.quat_from_axis_angle(wp.vec3(0.0, 0.0, 1.0), 0.5)
    body = b.add_body(xform=wp.transform((1.0, 0.0, 0.0), rot))
    b.add_shape_box(body, hx=1.0, hy=1.0, hz=0.4)
    b.add_particle((1.2, 0.3, 0.45), (0.0, 0.0, 0.0), 1.0, radius=0.1)
    m = b.finalize(device="cpu")
    s = m.state()
    s.body_qd.assign(np.array([[0.1, 0.2, 0.3, 1.0, -2.0, 0.5]], np.float32))
    p = newton.CollisionPipeline(m)
    c = p.contacts()
    p.collide(s, c)
    assert c.soft_contact_count.numpy()[0] == 1
    assert c.soft_contact_shape.numpy()[0] == 0 and c.soft_contact_particle.numpy()[0] == 0
    # body-frame contact point: the particle projected onto the top face, expressed in the body frame
    local = np.array(wp.quat_rotate_inv(rot, wp.vec3(0.2, 0.3, 0.45)))
    np.testing.assert_allclose(c.soft_contact_body_pos.numpy()[0], [local[0], local[1], 0.4], atol=1e-5)
    np.testing.assert_allclose(c.soft_contact_normal.numpy()[0], [0.0, 0.0, 1.0], atol=1e-6)
    np.testing.assert_allclose(c.soft_contact_body_vel.numpy()[0], [0.0, 0.0, 0.0], atol=0.0)

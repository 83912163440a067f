"""Spatial-algebra helpers (``@wp.func``) shared by the kinematics and dynamics kernels.

Conventions (the public ones of :mod:`armillary.sim.state`):

* a *twist* is a ``wp.spatial_vector`` ``(v, w)``: linear velocity of a reference point
  first, angular velocity second, both in world coordinates;
* a *wrench* is a ``wp.spatial_vector`` ``(f, tau)``: force first, moment about the same
  reference point second;
* a twist and a wrench at the same point pair to power by the plain 6-vector dot product;
* a *spatial inertia* is a ``wp.spatial_matrix`` mapping a twist to a momentum wrench at
  the same reference point.

Frame names follow Drake's monogram style: ``X_WB`` is the pose of frame B in world W,
``R_WB`` its rotation, ``p_W`` a position in world coordinates, ``v_W`` / ``w_W`` world
velocities. Inside the dynamics kernels positions are taken relative to a per-articulation
reference point ``O`` (not the world origin) to keep float32 round-off independent of how
far a world is placed from the origin.
"""

from __future__ import annotations

import warp as wp


@wp.func
def lin(x: wp.spatial_vector) -> wp.vec3:
    """Linear part of a twist (or force part of a wrench)."""
    return wp.vec3(x[0], x[1], x[2])


@wp.func
def ang(x: wp.spatial_vector) -> wp.vec3:
    """Angular part of a twist (or moment part of a wrench)."""
    return wp.vec3(x[3], x[4], x[5])


@wp.func
def spatial(a: wp.vec3, b: wp.vec3) -> wp.spatial_vector:
    """Spatial vector ``(a, b)`` (linear first)."""
    return wp.spatial_vector(a[0], a[1], a[2], b[0], b[1], b[2])


@wp.func
def twist_cross(a: wp.spatial_vector, b: wp.spatial_vector) -> wp.spatial_vector:
    """Motion cross product ``a x b`` of two twists at the same point."""
    va = lin(a)
    wa = ang(a)
    vb = lin(b)
    wb = ang(b)
    return spatial(wp.cross(wa, vb) + wp.cross(va, wb), wp.cross(wa, wb))


@wp.func
def wrench_cross(a: wp.spatial_vector, f: wp.spatial_vector) -> wp.spatial_vector:
    """Force cross product ``a x* f`` of a twist and a wrench at the same point."""
    va = lin(a)
    wa = ang(a)
    ff = lin(f)
    tf = ang(f)
    return spatial(wp.cross(wa, ff), wp.cross(wa, tf) + wp.cross(va, ff))


@wp.func
def point_twist(p_W: wp.vec3, axis_W: wp.vec3) -> wp.spatial_vector:
    """Unit twist of a rotation about ``axis_W`` through the point ``p_W`` (relative to the reference point)."""
    return spatial(wp.cross(p_W, axis_W), axis_W)


@wp.func
def twist_at(x: wp.spatial_vector, p_W: wp.vec3) -> wp.spatial_vector:
    """Shift a twist from the reference point to the point ``p_W`` (velocity of the point ``p_W``)."""
    return spatial(lin(x) + wp.cross(ang(x), p_W), ang(x))


@wp.func
def skew(p: wp.vec3) -> wp.mat33:
    return wp.mat33(0.0, -p[2], p[1], p[2], 0.0, -p[0], -p[1], p[0], 0.0)


@wp.func
def body_spatial_inertia(m: float, c_W: wp.vec3, I_c_W: wp.mat33) -> wp.spatial_matrix:
    """Spatial inertia at the reference point of a body with mass ``m``, COM ``c_W`` (relative
    to the reference point) and rotational inertia ``I_c_W`` about the COM in world axes."""
    C = skew(c_W)
    mC = m * C
    Ib = I_c_W - mC * C
    return wp.spatial_matrix(
        m, 0.0, 0.0, -mC[0, 0], -mC[0, 1], -mC[0, 2],
        0.0, m, 0.0, -mC[1, 0], -mC[1, 1], -mC[1, 2],
        0.0, 0.0, m, -mC[2, 0], -mC[2, 1], -mC[2, 2],
        mC[0, 0], mC[0, 1], mC[0, 2], Ib[0, 0], Ib[0, 1], Ib[0, 2],
        mC[1, 0], mC[1, 1], mC[1, 2], Ib[1, 0], Ib[1, 1], Ib[1, 2],
        mC[2, 0], mC[2, 1], mC[2, 2], Ib[2, 0], Ib[2, 1], Ib[2, 2],
    )  # fmt: skip


@wp.func
def world_inertia(X_WB: wp.transform, I_B: wp.mat33) -> wp.mat33:
    """Rotate a body-axes inertia tensor into world axes."""
    R = wp.quat_to_matrix(wp.transform_get_rotation(X_WB))
    return R * I_B * wp.transpose(R)


@wp.func
def quat_twist_angle(q: wp.quat, axis: wp.vec3) -> float:
    """Signed rotation angle in (-pi, pi] of the twist component of ``q`` about the unit ``axis``."""
    s = q[0] * axis[0] + q[1] * axis[1] + q[2] * axis[2]
    c = q[3]
    if c < 0.0:
        s = -s
        c = -c
    return 2.0 * wp.atan2(s, c)


@wp.func
def quat_to_rotation_vector(q: wp.quat) -> wp.vec3:
    """Rotation vector (unit axis times angle in ``[0, pi]``, the shortest arc) of the unit quaternion ``q``."""
    v = wp.vec3(q[0], q[1], q[2])
    w = q[3]
    if w < 0.0:
        v = -v
        w = -w
    s = wp.length(v)
    if s < 1.0e-9:
        return 2.0 * v
    return v * (2.0 * wp.atan2(s, w) / s)


@wp.func
def rotate_into_plane_angle(u: wp.vec3, v: wp.vec3, axis: wp.vec3) -> float:
    """Angle of the rotation about ``axis`` taking the projection of ``u`` to that of ``v``
    (0 when a projection degenerates)."""
    up = u - wp.dot(u, axis) * axis
    vp = v - wp.dot(v, axis) * axis
    s = wp.dot(axis, wp.cross(up, vp))
    c = wp.dot(up, vp)
    if wp.abs(s) + wp.abs(c) < 1.0e-12:
        return 0.0
    return wp.atan2(s, c)

"""Warp kernels filling the standard solver observables (see :mod:`.observables`)."""

from __future__ import annotations

from typing import Any

import warp as wp

from ..sim.gravity import gravity_of_world


@wp.kernel
def body_qdd_kernel(
    qd_in: wp.array(dtype=wp.spatial_vector),
    qd_out: wp.array(dtype=wp.spatial_vector),
    inv_dt: float,
    body_qdd: wp.array(dtype=wp.spatial_vector),
):
    """Mean acceleration of the step: ``(qd_out - qd_in) / dt`` (COM linear, angular; world)."""
    i = wp.tid()
    body_qdd[i] = (qd_out[i] - qd_in[i]) * inv_dt


@wp.func
def _linear(f: wp.vec3):
    return f


@wp.func
def _linear(f: wp.spatial_vector):
    return wp.spatial_top(f)


@wp.kernel
def contact_f_kernel(
    rigid_max: int,
    use_force: int,
    midpoint: int,
    write_rows: int,
    sum_wrench: int,
    contact_count: wp.array(dtype=wp.int32),
    shape0: wp.array(dtype=wp.int32),
    shape1: wp.array(dtype=wp.int32),
    point0: wp.array(dtype=wp.vec3),
    point1: wp.array(dtype=wp.vec3),
    normal: wp.array(dtype=wp.vec3),
    margin0: wp.array(dtype=float),
    margin1: wp.array(dtype=float),
    force: wp.array(dtype=Any),
    shape_body: wp.array(dtype=wp.int32),
    body_q: wp.array(dtype=wp.transform),
    body_com: wp.array(dtype=wp.vec3),
    # outputs
    contact_f: wp.array(dtype=wp.spatial_vector),
    body_wrench: wp.array(dtype=wp.spatial_vector),
):
    """Per rigid contact ``i`` with ``force[i]`` the force shape 0 exerted on shape 1 (``vec3``, or a
    ``spatial_vector`` whose linear part is used): row ``i`` of
    ``contact_f`` = (force on body 0, its torque about body 0's COM or the world origin), rows of
    inactive contacts and soft rows zero; with ``sum_wrench`` also each body's total contact wrench."""
    i = wp.tid()
    zero = wp.spatial_vector(wp.vec3(0.0), wp.vec3(0.0))
    if i >= rigid_max or use_force == 0:
        if write_rows != 0 and i < contact_f.shape[0]:
            contact_f[i] = zero
        return
    count = wp.min(contact_count[0], rigid_max)
    s0 = shape0[i]
    s1 = shape1[i]
    if i >= count or s0 < 0 or s1 < 0:
        if write_rows != 0:
            contact_f[i] = zero
        return
    b0 = shape_body[s0]
    b1 = shape_body[s1]
    n = normal[i]
    p0 = point0[i]
    p1 = point1[i]
    if b0 >= 0:
        p0 = wp.transform_point(body_q[b0], p0)
    if b1 >= 0:
        p1 = wp.transform_point(body_q[b1], p1)
    pa = p0 + margin0[i] * n
    pb = p1 - margin1[i] * n
    if midpoint != 0:
        pa = 0.5 * (pa + pb)
        pb = pa
    f1 = _linear(force[i])
    f0 = -f1
    c0 = wp.vec3(0.0)
    if b0 >= 0:
        c0 = wp.transform_point(body_q[b0], body_com[b0])
    w0 = wp.spatial_vector(f0, wp.cross(pa - c0, f0))
    if write_rows != 0:
        contact_f[i] = w0
    if sum_wrench != 0:
        if b0 >= 0:
            wp.atomic_add(body_wrench, b0, w0)
        if b1 >= 0:
            c1 = wp.transform_point(body_q[b1], body_com[b1])
            wp.atomic_add(body_wrench, b1, wp.spatial_vector(f1, wp.cross(pb - c1, f1)))


@wp.kernel
def parent_base_kernel(
    body_q: wp.array(dtype=wp.transform),
    qd_in: wp.array(dtype=wp.spatial_vector),
    qd_out: wp.array(dtype=wp.spatial_vector),
    inv_dt: float,
    body_mass: wp.array(dtype=float),
    body_inertia: wp.array(dtype=wp.mat33),
    body_com: wp.array(dtype=wp.vec3),
    body_world: wp.array(dtype=wp.int32),
    gravity: wp.array(dtype=wp.vec3),
    body_f: wp.array(dtype=wp.spatial_vector),
    has_body_f: int,
    contact_wrench: wp.array(dtype=wp.spatial_vector),
    has_contact_wrench: int,
    # output
    acc: wp.array(dtype=wp.spatial_vector),
):
    """Each body's Newton-Euler wrench for the step's mean acceleration minus the wrenches that
    do not pass through joints (gravity, ``State.body_f``, contacts): what its joints supplied."""
    b = wp.tid()
    R = wp.quat_to_matrix(wp.transform_get_rotation(body_q[b]))
    v0 = wp.spatial_top(qd_in[b])
    w0 = wp.spatial_bottom(qd_in[b])
    a = (wp.spatial_top(qd_out[b]) - v0) * inv_dt
    alpha = (wp.spatial_bottom(qd_out[b]) - w0) * inv_dt
    m = body_mass[b]
    Iw = R * body_inertia[b] * wp.transpose(R)
    f = m * (a - gravity_of_world(gravity, body_world[b]))
    t = Iw * alpha + wp.cross(w0, Iw * w0)
    if has_body_f != 0:
        f = f - wp.spatial_top(body_f[b])
        t = t - wp.spatial_bottom(body_f[b])
    if has_contact_wrench != 0:
        f = f - wp.spatial_top(contact_wrench[b])
        t = t - wp.spatial_bottom(contact_wrench[b])
    acc[b] = wp.spatial_vector(f, t)


@wp.kernel
def parent_level_kernel(
    start: int,
    order: wp.array(dtype=wp.int32),
    parent_body: wp.array(dtype=wp.int32),
    body_q: wp.array(dtype=wp.transform),
    body_com: wp.array(dtype=wp.vec3),
    acc: wp.array(dtype=wp.spatial_vector),
    # output
    body_parent_f: wp.array(dtype=wp.spatial_vector),
):
    """One depth level, deepest first: a body's parent-joint wrench is its own balance plus what
    its children's joints took from it; pass it on to the parent body (moved to its COM)."""
    b = order[start + wp.tid()]
    f = acc[b]
    body_parent_f[b] = f
    p = parent_body[b]
    if p >= 0:
        cb = wp.transform_point(body_q[b], body_com[b])
        cp = wp.transform_point(body_q[p], body_com[p])
        fl = wp.spatial_top(f)
        wp.atomic_add(acc, p, wp.spatial_vector(fl, wp.spatial_bottom(f) + wp.cross(cb - cp, fl)))

"""Warp kernels of the coupled solvers (row scatter, per-entry contact filters)."""

from __future__ import annotations

from typing import Any

import warp as wp


@wp.kernel
def scatter_rows_kernel(rows: wp.array(dtype=wp.int32), src: wp.array(dtype=Any), dst: wp.array(dtype=Any)):
    """``dst[r] = src[r]`` for every row ``r`` in ``rows`` (same indexing on both sides)."""
    i = wp.tid()
    r = rows[i]
    dst[r] = src[r]


@wp.kernel
def entry_rigid_keep_kernel(
    count: wp.array(dtype=wp.int32),
    shape0: wp.array(dtype=wp.int32),
    shape1: wp.array(dtype=wp.int32),
    shape_body: wp.array(dtype=wp.int32),
    shape_visible: wp.array(dtype=wp.int32),
    body_active: wp.array(dtype=wp.int32),
    keep: wp.array(dtype=wp.int32),
):
    """Keep a rigid contact when both shapes are visible to the entry and at least one of them is on
    a body the entry simulates (owned or kept as a proxy)."""
    i = wp.tid()
    k = int(0)
    if i < count[0]:
        s0 = shape0[i]
        s1 = shape1[i]
        if s0 >= 0 and s1 >= 0:
            if shape_visible[s0] != 0 and shape_visible[s1] != 0:
                b0 = shape_body[s0]
                b1 = shape_body[s1]
                a0 = False
                a1 = False
                if b0 >= 0:
                    a0 = body_active[b0] != 0
                if b1 >= 0:
                    a1 = body_active[b1] != 0
                if a0 or a1:
                    k = 1
    keep[i] = k


@wp.kernel
def entry_soft_keep_kernel(
    count: wp.array(dtype=wp.int32),
    particle: wp.array(dtype=wp.int32),
    shape: wp.array(dtype=wp.int32),
    shape_visible: wp.array(dtype=wp.int32),
    particle_active: wp.array(dtype=wp.int32),
    keep: wp.array(dtype=wp.int32),
):
    """Keep a particle-shape contact when the entry simulates the particle and sees the shape."""
    i = wp.tid()
    k = int(0)
    if i < count[0] and particle_active.shape[0] > 0:
        p = particle[i]
        s = shape[i]
        if p >= 0 and s >= 0 and p < particle_active.shape[0]:
            if particle_active[p] != 0 and shape_visible[s] != 0:
                k = 1
    keep[i] = k


@wp.func
def _copy_row(i: int, src: wp.array(dtype=Any), dst_a: wp.array(dtype=Any), dst_b: wp.array(dtype=Any)):
    if i < dst_a.shape[0]:
        dst_a[i] = src[i]
    if i < dst_b.shape[0]:
        dst_b[i] = src[i]


@wp.kernel
def copy_state_kernel(
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    body_f: wp.array(dtype=wp.spatial_vector),
    joint_q: wp.array(dtype=float),
    joint_qd: wp.array(dtype=float),
    particle_q: wp.array(dtype=wp.vec3),
    particle_qd: wp.array(dtype=wp.vec3),
    particle_f: wp.array(dtype=wp.vec3),
    a_body_q: wp.array(dtype=wp.transform),
    a_body_qd: wp.array(dtype=wp.spatial_vector),
    a_body_f: wp.array(dtype=wp.spatial_vector),
    a_joint_q: wp.array(dtype=float),
    a_joint_qd: wp.array(dtype=float),
    a_particle_q: wp.array(dtype=wp.vec3),
    a_particle_qd: wp.array(dtype=wp.vec3),
    a_particle_f: wp.array(dtype=wp.vec3),
    b_body_q: wp.array(dtype=wp.transform),
    b_body_qd: wp.array(dtype=wp.spatial_vector),
    b_body_f: wp.array(dtype=wp.spatial_vector),
    b_joint_q: wp.array(dtype=float),
    b_joint_qd: wp.array(dtype=float),
    b_particle_q: wp.array(dtype=wp.vec3),
    b_particle_qd: wp.array(dtype=wp.vec3),
    b_particle_f: wp.array(dtype=wp.vec3),
):
    """Copy the public state arrays of one state into one or two others in a single launch.

    Row ``i`` of every source array (body poses [m, unit quaternion], twists [m/s, rad/s] and
    wrenches [N, N m] in the world frame, generalized coordinates / velocities, particle
    positions [m], velocities [m/s], forces [N]) is written to the same row of the
    same-named destination arrays ``a_*`` and ``b_*``; a destination passed as an empty array
    is skipped (the caller passes empty arrays for names it does not copy, so each copied
    destination has its source's length). Launch dimension: the longest copied array.
    """
    i = wp.tid()
    _copy_row(i, body_q, a_body_q, b_body_q)
    _copy_row(i, body_qd, a_body_qd, b_body_qd)
    _copy_row(i, body_f, a_body_f, b_body_f)
    _copy_row(i, joint_q, a_joint_q, b_joint_q)
    _copy_row(i, joint_qd, a_joint_qd, b_joint_qd)
    _copy_row(i, particle_q, a_particle_q, b_particle_q)
    _copy_row(i, particle_qd, a_particle_qd, b_particle_qd)
    _copy_row(i, particle_f, a_particle_f, b_particle_f)


@wp.func
def _scatter_row(i: int, rows: wp.array(dtype=wp.int32), src: wp.array(dtype=Any), dst: wp.array(dtype=Any)):
    if i < rows.shape[0] and dst.shape[0] > 0:
        r = rows[i]
        dst[r] = src[r]


@wp.kernel
def scatter_state_kernel(
    body_rows: wp.array(dtype=wp.int32),
    particle_rows: wp.array(dtype=wp.int32),
    joint_q_rows: wp.array(dtype=wp.int32),
    joint_qd_rows: wp.array(dtype=wp.int32),
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    joint_q: wp.array(dtype=float),
    joint_qd: wp.array(dtype=float),
    particle_q: wp.array(dtype=wp.vec3),
    particle_qd: wp.array(dtype=wp.vec3),
    out_body_q: wp.array(dtype=wp.transform),
    out_body_qd: wp.array(dtype=wp.spatial_vector),
    out_joint_q: wp.array(dtype=float),
    out_joint_qd: wp.array(dtype=float),
    out_particle_q: wp.array(dtype=wp.vec3),
    out_particle_qd: wp.array(dtype=wp.vec3),
):
    """Reconcile one entry's owned rows into the shared output state in a single launch:
    ``out_x[r] = x[r]`` for every owned body row (pose, twist), particle row (position,
    velocity), joint-coordinate row and joint-DOF row (same indexing on both sides: views are
    not compacted). Destinations passed as empty arrays are skipped. Launch dimension: the
    longest row list."""
    i = wp.tid()
    _scatter_row(i, body_rows, body_q, out_body_q)
    _scatter_row(i, body_rows, body_qd, out_body_qd)
    _scatter_row(i, particle_rows, particle_q, out_particle_q)
    _scatter_row(i, particle_rows, particle_qd, out_particle_qd)
    _scatter_row(i, joint_q_rows, joint_q, out_joint_q)
    _scatter_row(i, joint_qd_rows, joint_qd, out_joint_qd)

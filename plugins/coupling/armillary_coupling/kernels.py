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

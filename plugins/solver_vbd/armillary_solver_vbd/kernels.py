"""Solver-level kernels of SolverVBD (coupling bookkeeping). The particle and rigid block
solves live in ``particle_kernels.py`` and ``rigid_kernels.py``."""

from __future__ import annotations

import warp as wp


@wp.kernel
def accumulate_impulse_kernel(
    # In:
    reaction_in: wp.array(dtype=wp.spatial_vector),  # body-particle reaction wrench per body [N, N m]
    rigid_wrench_in: wp.array(dtype=wp.spatial_vector),  # rigid-contact wrench per body [N, N m]
    use_rigid: int,
    dt: float,
    # Out:
    impulse_out: wp.array(dtype=wp.spatial_vector),  # accumulated wrench * time [N s, N m s]
    time_out: wp.array(dtype=float),  # accumulated time [s]
):
    b = wp.tid()
    w = reaction_in[b]
    if use_rigid != 0:
        w = w + rigid_wrench_in[b]
    impulse_out[b] = impulse_out[b] + w * dt
    if b == 0:
        time_out[0] = time_out[0] + dt


@wp.kernel
def harvest_impulse_kernel(
    # In:
    body_to_proxy: wp.array(dtype=wp.int32),
    impulse_in: wp.array(dtype=wp.spatial_vector),
    time_in: wp.array(dtype=float),
    # Out:
    out_body_f: wp.array(dtype=wp.spatial_vector),  # mean wrench per proxy, added [N, N m]
):
    b = wp.tid()
    p = body_to_proxy[b]
    if p < 0:
        return
    t = time_in[0]
    if t > 0.0:
        out_body_f[p] = out_body_f[p] + impulse_in[b] / t

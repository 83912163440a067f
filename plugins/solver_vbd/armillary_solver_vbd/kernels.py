"""Solver-level kernels of SolverVBD (coupling bookkeeping). The particle and rigid block
solves live in ``particle_kernels.py`` and ``rigid_kernels.py``."""

from __future__ import annotations

import warp as wp

from armillary.sim.spatial import world_inertia

from .rigid_kernels import quat_log


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


@wp.kernel
def inertial_impulse_kernel(
    # Model:
    body_com: wp.array(dtype=wp.vec3),  # COM in the body frame [m]
    body_mass: wp.array(dtype=float),  # [kg]
    body_inertia: wp.array(dtype=wp.mat33),  # about the COM, body frame [kg m^2]
    body_inv_mass: wp.array(dtype=float),
    # State in:
    body_q_in: wp.array(dtype=wp.transform),  # end-of-step poses
    x_pred_in: wp.array(dtype=wp.vec3),  # inertial prediction of the COM [m] (gravity, body_f included)
    q_pred_in: wp.array(dtype=wp.quat),  # inertial prediction of the orientation
    dt: float,
    # Out:
    impulse_out: wp.array(dtype=wp.spatial_vector),  # accumulated interaction impulse [N s, N m s]
    time_out: wp.array(dtype=float),  # accumulated time [s]
):
    """The impulse the step's interactions (contacts, attachments, joints) applied to each body:
    the inertial residual ``M (x - x_pred) / dt`` of the solved pose against the prediction, which
    already contains gravity and the force input, so neither is counted."""
    b = wp.tid()
    if b == 0:
        time_out[0] = time_out[0] + dt
    if body_inv_mass[b] <= 0.0:
        return
    X = body_q_in[b]
    q = wp.transform_get_rotation(X)
    lin = body_mass[b] * (wp.transform_point(X, body_com[b]) - x_pred_in[b]) / dt
    ang = world_inertia(X, body_inertia[b]) * quat_log(q * wp.quat_inverse(q_pred_in[b])) / dt
    impulse_out[b] = impulse_out[b] + wp.spatial_vector(lin, ang)

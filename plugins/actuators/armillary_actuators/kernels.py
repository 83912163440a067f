"""Warp kernels of the actuator components (one module: one compilation).

Conventions shared by every kernel: thread ``i`` is local actuator ``i``
(``0..n-1``); index arrays are ``wp.uint32``; per-actuator parameters are
``wp.float32`` arrays of shape ``(n,)``; an optional array argument may be
passed as ``None`` and is tested with ``if arr:``.
"""

from __future__ import annotations

import warp as wp


# ---------------------------------------------------------------------------- controllers
@wp.func
def tracking_errors(
    i: int,
    positions: wp.array(dtype=wp.float32),
    velocities: wp.array(dtype=wp.float32),
    target_pos: wp.array(dtype=wp.float32),
    target_vel: wp.array(dtype=wp.float32),
    pos_indices: wp.array(dtype=wp.uint32),
    vel_indices: wp.array(dtype=wp.uint32),
    target_pos_indices: wp.array(dtype=wp.uint32),
    target_vel_indices: wp.array(dtype=wp.uint32),
):
    """(position error, velocity error, target-velocity index) of actuator ``i``."""
    tv = int(target_vel_indices[i])
    e = target_pos[int(target_pos_indices[i])] - positions[int(pos_indices[i])]
    de = target_vel[tv] - velocities[int(vel_indices[i])]
    return e, de, tv


@wp.func
def add_offsets(f: float, i: int, tv: int, const_effort: wp.array(dtype=wp.float32),
                feedforward: wp.array(dtype=wp.float32)):
    """``f`` plus the constant effort of actuator ``i`` and the feedforward at ``tv`` (each when given)."""
    if const_effort:
        f = f + const_effort[i]
    if feedforward:
        f = f + feedforward[tv]
    return f


@wp.kernel
def pd_kernel(
    positions: wp.array(dtype=wp.float32),
    velocities: wp.array(dtype=wp.float32),
    target_pos: wp.array(dtype=wp.float32),
    target_vel: wp.array(dtype=wp.float32),
    feedforward: wp.array(dtype=wp.float32),
    pos_indices: wp.array(dtype=wp.uint32),
    vel_indices: wp.array(dtype=wp.uint32),
    target_pos_indices: wp.array(dtype=wp.uint32),
    target_vel_indices: wp.array(dtype=wp.uint32),
    kp: wp.array(dtype=wp.float32),
    kd: wp.array(dtype=wp.float32),
    const_effort: wp.array(dtype=wp.float32),
    forces: wp.array(dtype=wp.float32),
):
    i = wp.tid()
    e, de, tv = tracking_errors(i, positions, velocities, target_pos, target_vel, pos_indices, vel_indices,
                                target_pos_indices, target_vel_indices)
    forces[i] = add_offsets(kp[i] * e + kd[i] * de, i, tv, const_effort, feedforward)


@wp.kernel
def pid_kernel(
    positions: wp.array(dtype=wp.float32),
    velocities: wp.array(dtype=wp.float32),
    target_pos: wp.array(dtype=wp.float32),
    target_vel: wp.array(dtype=wp.float32),
    feedforward: wp.array(dtype=wp.float32),
    pos_indices: wp.array(dtype=wp.uint32),
    vel_indices: wp.array(dtype=wp.uint32),
    target_pos_indices: wp.array(dtype=wp.uint32),
    target_vel_indices: wp.array(dtype=wp.uint32),
    kp: wp.array(dtype=wp.float32),
    ki: wp.array(dtype=wp.float32),
    kd: wp.array(dtype=wp.float32),
    integral_max: wp.array(dtype=wp.float32),
    const_effort: wp.array(dtype=wp.float32),
    integral: wp.array(dtype=wp.float32),
    dt: wp.float32,
    integral_next: wp.array(dtype=wp.float32),
    forces: wp.array(dtype=wp.float32),
):
    i = wp.tid()
    e, de, tv = tracking_errors(i, positions, velocities, target_pos, target_vel, pos_indices, vel_indices,
                                target_pos_indices, target_vel_indices)
    lim = integral_max[i]
    acc = wp.clamp(integral[i] + e * dt, -lim, lim)
    integral_next[i] = acc
    forces[i] = add_offsets(kp[i] * e + ki[i] * acc + kd[i] * de, i, tv, const_effort, feedforward)


# ---------------------------------------------------------------------------- clampings
@wp.kernel
def clamp_max_effort_kernel(
    src: wp.array(dtype=wp.float32),
    max_effort: wp.array(dtype=wp.float32),
    dst: wp.array(dtype=wp.float32),
):
    i = wp.tid()
    m = max_effort[i]
    dst[i] = wp.clamp(src[i], -m, m)


@wp.func
def table_interval(table_pos: wp.array(dtype=wp.float32), q: float) -> int:
    """``lo`` with ``table_pos[lo] <= q < table_pos[lo + 1]`` (binary search; ``table_pos[0] < q <
    table_pos[-1]``). A function, so that the adjoint kernel replays the search: Warp's adjoint
    does not replay a ``while`` loop in the kernel body, and would interpolate on a stale interval."""
    lo = int(0)
    hi = table_pos.shape[0] - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if table_pos[mid] <= q:
            lo = mid
        else:
            hi = mid
    return lo


@wp.kernel
def clamp_position_table_kernel(
    src: wp.array(dtype=wp.float32),
    positions: wp.array(dtype=wp.float32),
    pos_indices: wp.array(dtype=wp.uint32),
    table_pos: wp.array(dtype=wp.float32),
    table_eff: wp.array(dtype=wp.float32),
    dst: wp.array(dtype=wp.float32),
):
    i = wp.tid()
    q = positions[int(pos_indices[i])]
    k = table_pos.shape[0]
    lim = table_eff[0]
    if q >= table_pos[k - 1]:
        lim = table_eff[k - 1]
    elif q > table_pos[0]:
        lo = table_interval(table_pos, q)
        hi = lo + 1
        t = (q - table_pos[lo]) / (table_pos[hi] - table_pos[lo])
        lim = table_eff[lo] + t * (table_eff[hi] - table_eff[lo])
    dst[i] = wp.clamp(src[i], -lim, lim)


# ---------------------------------------------------------------------------- delay
@wp.kernel
def delay_read_kernel(
    target_pos: wp.array(dtype=wp.float32),
    target_vel: wp.array(dtype=wp.float32),
    feedforward: wp.array(dtype=wp.float32),
    target_pos_indices: wp.array(dtype=wp.uint32),
    target_vel_indices: wp.array(dtype=wp.uint32),
    delay_steps: wp.array(dtype=wp.int32),
    buffer_pos: wp.array2d(dtype=wp.float32),
    buffer_vel: wp.array2d(dtype=wp.float32),
    buffer_act: wp.array2d(dtype=wp.float32),
    num_pushes: wp.array(dtype=wp.int32),
    write_idx: wp.array(dtype=wp.int32),
    out_pos: wp.array(dtype=wp.float32),
    out_vel: wp.array(dtype=wp.float32),
    out_act: wp.array(dtype=wp.float32),
):
    i = wp.tid()
    lag = wp.min(delay_steps[i], num_pushes[i])
    tv = int(target_vel_indices[i])
    if lag <= 0:
        out_pos[i] = target_pos[int(target_pos_indices[i])]
        out_vel[i] = target_vel[tv]
        if feedforward:
            out_act[i] = feedforward[tv]
    else:
        cap = buffer_pos.shape[0]
        slot = (write_idx[0] - lag + cap) % cap
        out_pos[i] = buffer_pos[slot, i]
        out_vel[i] = buffer_vel[slot, i]
        if feedforward:
            out_act[i] = buffer_act[slot, i]


@wp.kernel
def delay_push_kernel(
    # Command in:
    target_pos: wp.array(dtype=wp.float32),
    target_vel: wp.array(dtype=wp.float32),
    feedforward: wp.array(dtype=wp.float32),
    target_pos_indices: wp.array(dtype=wp.uint32),
    target_vel_indices: wp.array(dtype=wp.uint32),
    # State in:
    num_pushes: wp.array(dtype=wp.int32),
    write_idx: wp.array(dtype=wp.int32),
    # State out (buffers already hold a copy of the current history):
    next_buffer_pos: wp.array2d(dtype=wp.float32),
    next_buffer_vel: wp.array2d(dtype=wp.float32),
    next_buffer_act: wp.array2d(dtype=wp.float32),
    next_num_pushes: wp.array(dtype=wp.int32),
    next_write_idx: wp.array(dtype=wp.int32),
):
    """Push this step's command of DOF ``i`` into slot ``write_idx`` of the next history."""
    i = wp.tid()
    cap = next_buffer_pos.shape[0]
    w = write_idx[0]
    tv = int(target_vel_indices[i])
    next_buffer_pos[w, i] = target_pos[int(target_pos_indices[i])]
    next_buffer_vel[w, i] = target_vel[tv]
    if feedforward:
        next_buffer_act[w, i] = feedforward[tv]
    else:
        next_buffer_act[w, i] = 0.0
    next_num_pushes[i] = wp.min(num_pushes[i] + 1, cap)
    if i == 0:
        next_write_idx[0] = (w + 1) % cap


# ---------------------------------------------------------------------------- actuator
@wp.kernel
def scatter_add_kernel(
    values: wp.array(dtype=wp.float32),
    indices: wp.array(dtype=wp.uint32),
    out: wp.array(dtype=wp.float32),
):
    i = wp.tid()
    wp.atomic_add(out, int(indices[i]), values[i])


@wp.kernel
def fill_identity_kernel(out: wp.array(dtype=wp.uint32)):
    i = wp.tid()
    out[i] = wp.uint32(i)

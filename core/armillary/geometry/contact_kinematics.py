"""Differentiable reconstruction of rigid-contact kinematics from frozen narrow-phase output.

:func:`eval_rigid_contact_kinematics` maps the body-frame contact points of a populated
:class:`~armillary.Contacts` through ``state.body_q`` to world space and evaluates the
signed distance ``dot(n, p1 - p0) - margin0 - margin1`` with the frozen world normal ``n``.
The launch is recorded by :class:`wp.Tape`, so gradients reach ``state.body_q`` (first-order
tangent-plane approximation: the contact set and the normal do not move). This module keeps
backward code generation enabled; it is the only differentiable part of the collision path.
"""

from __future__ import annotations

import warp as wp

wp.set_module_options({"enable_backward": True, "max_unroll": 1})


@wp.kernel
def contact_kinematics_kernel(
    count: wp.array(dtype=int),
    shape0: wp.array(dtype=int),
    shape1: wp.array(dtype=int),
    point0: wp.array(dtype=wp.vec3),
    point1: wp.array(dtype=wp.vec3),
    normal: wp.array(dtype=wp.vec3),
    margin0: wp.array(dtype=float),
    margin1: wp.array(dtype=float),
    shape_body: wp.array(dtype=int),
    body_q: wp.array(dtype=wp.transform),
    out_distance: wp.array(dtype=float),
    out_point0: wp.array(dtype=wp.vec3),
    out_point1: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    if i >= count[0]:
        if out_distance.shape[0] > 0:
            out_distance[i] = 0.0
        if out_point0.shape[0] > 0:
            out_point0[i] = wp.vec3(0.0)
        if out_point1.shape[0] > 0:
            out_point1[i] = wp.vec3(0.0)
        return
    b0 = shape_body[shape0[i]]
    b1 = shape_body[shape1[i]]
    p0 = point0[i]
    p1 = point1[i]
    if b0 >= 0:
        p0 = wp.transform_point(body_q[b0], p0)
    if b1 >= 0:
        p1 = wp.transform_point(body_q[b1], p1)
    if out_distance.shape[0] > 0:
        out_distance[i] = wp.dot(normal[i], p1 - p0) - margin0[i] - margin1[i]
    if out_point0.shape[0] > 0:
        out_point0[i] = p0
    if out_point1.shape[0] > 0:
        out_point1[i] = p1


def _check_out(name: str, arr, dtype, n: int, device):
    if arr is None:
        return
    if not isinstance(arr, wp.array):
        raise TypeError(f"{name} must be a Warp array or None, got {type(arr).__name__}")
    if arr.dtype != dtype:
        raise TypeError(f"{name} has dtype {arr.dtype}, expected {dtype}")
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"{name} has shape {arr.shape}, expected ({n},)")
    if arr.device != device:
        raise ValueError(f"{name} is on device {arr.device}, expected {device}")


def eval_rigid_contact_kinematics(model, state, contacts, *, out_distance=None, out_point0_world=None,
                                  out_point1_world=None) -> None:  # fmt: skip
    """Evaluate selected rigid-contact kinematic quantities in caller-provided arrays.

    World-space points are ``body_q[body(shape_k)] * rigid_contact_point{k}`` (static shapes:
    the stored point itself); the signed distance [m] is
    ``dot(rigid_contact_normal, p1 - p0) - rigid_contact_margin0 - rigid_contact_margin1``
    (positive: gap, negative: penetration). Entries at and beyond ``rigid_contact_count`` are
    written as zero. Recorded by :class:`wp.Tape`: gradients flow to ``state.body_q``, not
    through the frozen normal or the discrete contact set.

    Args:
        model: Model providing ``shape_body``.
        state: State providing ``body_q``.
        contacts: Populated contacts.
        out_distance: optional float array of shape ``(contacts.rigid_contact_max,)``.
        out_point0_world, out_point1_world: optional vec3 arrays of the same shape.

    Raises:
        ValueError: no output given, or an output has the wrong shape or device.
        TypeError: an output is not a Warp array or has the wrong dtype.
    """
    if out_distance is None and out_point0_world is None and out_point1_world is None:
        raise ValueError("At least one output must be provided.")
    n = int(contacts.rigid_contact_max)
    dev = contacts.device
    _check_out("out_distance", out_distance, wp.float32, n, dev)
    _check_out("out_point0_world", out_point0_world, wp.vec3, n, dev)
    _check_out("out_point1_world", out_point1_world, wp.vec3, n, dev)
    if n == 0:
        return
    body_q = state.body_q if getattr(model, "body_count", 0) and state.body_q is not None else None
    if body_q is None:
        body_q = wp.zeros(1, dtype=wp.transform, device=dev)

    def out(arr, dtype):
        return arr if arr is not None else wp.empty(0, dtype=dtype, device=dev)

    wp.launch(contact_kinematics_kernel, dim=n,
              inputs=[contacts.rigid_contact_count, contacts.rigid_contact_shape0, contacts.rigid_contact_shape1,
                      contacts.rigid_contact_point0, contacts.rigid_contact_point1, contacts.rigid_contact_normal,
                      contacts.rigid_contact_margin0, contacts.rigid_contact_margin1, model.shape_body, body_q],
              outputs=[out(out_distance, wp.float32), out(out_point0_world, wp.vec3), out(out_point1_world, wp.vec3)],
              device=dev)  # fmt: skip

"""MuJoCo joint coordinates -> armillary joint coordinates as Warp functions, generic over the
float precision (the C backend's writer reads float64 ``MjData``, MuJoCo Warp is float32).

The conventions are :mod:`.state_map`'s (its numpy functions are the host versions): quaternions
xyzw here (the callers reorder MuJoCo's wxyz), BALL rotations conjugated by the child anchor
rotation ``rc``, FREE joints from MuJoCo's body pose, origin velocity and body-frame angular
velocity to the child anchor pose in the parent anchor frame and the COM twist.
"""

from __future__ import annotations

from typing import Any

import warp as wp


@wp.func
def ball_from_mujoco(rc: Any, q_mj: Any, w_mj: Any):
    """BALL joint: MuJoCo's quaternion ``q_mj`` (xyzw) and body-frame angular velocity ``w_mj``
    -> our quaternion and angular velocity (parent anchor frame)."""
    q = wp.mul(wp.mul(wp.quat_inverse(rc), q_mj), rc)
    return q, wp.quat_rotate(q, wp.quat_rotate_inv(rc, w_mj))


@wp.func
def free_from_mujoco(p_WB: Any, q_WB: Any, v_o: Any, w_B: Any, pp: Any, pr: Any, cp: Any, cr: Any, com: Any):
    """FREE joint: MuJoCo's body pose ``(p_WB, q_WB)``, origin velocity ``v_o`` (world) and
    body-frame angular velocity ``w_B`` -> our joint translation and rotation
    (``X_j = inv(X_p) X_WB X_c``, parent anchor ``(pp, pr)``, child anchor ``(cp, cr)``) and COM
    twist (linear, angular) in the parent anchor frame; ``com``: the body's COM (body frame)."""
    w_W = wp.quat_rotate(q_WB, w_B)
    v_com = v_o + wp.cross(w_W, wp.quat_rotate(q_WB, com))
    r = wp.mul(wp.quat_inverse(pr), wp.mul(q_WB, cr))
    p = wp.quat_rotate_inv(pr, p_WB + wp.quat_rotate(q_WB, cp) - pp)
    return p, r, wp.quat_rotate_inv(pr, v_com), wp.quat_rotate_inv(pr, w_W)

"""Host-side (numpy, float64) rotation helpers for xyzw quaternions.

Used while building models and by host-side tools (runner, conformance kit);
device code uses Warp's own quaternion functions.
"""

from __future__ import annotations

import numpy as np


def quat_to_matrix(q) -> np.ndarray:
    """Rotation matrices ``(..., 3, 3)`` of unit quaternions ``(..., 4)`` stored ``(x, y, z, w)``."""
    q = np.asarray(q, dtype=np.float64)
    x, y, z, w = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    rows = (
        (1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)),
        (2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)),
        (2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)),
    )
    return np.stack([np.stack(r, axis=-1) for r in rows], axis=-2)


def quat_rotate(q, v) -> np.ndarray:
    """Rotate vectors ``v`` (..., 3) by unit quaternions ``q`` (..., 4) stored ``(x, y, z, w)`` (broadcasting)."""
    q = np.asarray(q, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    if q.shape == (4,) and v.shape == (3,):  # one rotation: plain float maths (np.cross costs ~20 us a call)
        x, y, z, w = q.tolist()
        a, b, c = v.tolist()
        tx, ty, tz = 2.0 * (y * c - z * b), 2.0 * (z * a - x * c), 2.0 * (x * b - y * a)
        return np.array([a + w * tx + (y * tz - z * ty), b + w * ty + (z * tx - x * tz), c + w * tz + (x * ty - y * tx)])
    u, w = q[..., :3], q[..., 3:4]
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def quat_multiply(a, b) -> np.ndarray:
    """Hamilton products ``a * b`` of quaternions ``(..., 4)`` stored ``(x, y, z, w)`` (broadcasting)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape == (4,) and b.shape == (4,):  # one product: plain float maths
        ax, ay, az, aw = a.tolist()
        bx, by, bz, bw = b.tolist()
        return np.array([aw * bx + ax * bw + ay * bz - az * by, aw * by - ax * bz + ay * bw + az * bx,
                         aw * bz + ax * by - ay * bx + az * bw, aw * bw - ax * bx - ay * by - az * bz])  # fmt: skip
    u, w = a[..., :3], a[..., 3:4]
    v, x = b[..., :3], b[..., 3:4]
    return np.concatenate([w * v + x * u + np.cross(u, v), w * x - np.sum(u * v, axis=-1, keepdims=True)], axis=-1)


def quat_conjugate(q) -> np.ndarray:
    """Conjugates (inverses of unit quaternions) of ``(..., 4)`` xyzw quaternions."""
    q = np.array(q, dtype=np.float64)
    q[..., :3] *= -1.0
    return q


def quat_from_matrix(r) -> np.ndarray:
    """Unit xyzw quaternion (``w >= 0``) of a 3x3 proper rotation matrix (Shepperd's method)."""
    r = np.asarray(r, dtype=np.float64)
    tr = r[0, 0] + r[1, 1] + r[2, 2]
    if tr > 0:
        s = np.sqrt(tr + 1.0) * 2
        q = [(r[2, 1] - r[1, 2]) / s, (r[0, 2] - r[2, 0]) / s, (r[1, 0] - r[0, 1]) / s, 0.25 * s]
    elif r[0, 0] > r[1, 1] and r[0, 0] > r[2, 2]:
        s = np.sqrt(1.0 + r[0, 0] - r[1, 1] - r[2, 2]) * 2
        q = [0.25 * s, (r[0, 1] + r[1, 0]) / s, (r[0, 2] + r[2, 0]) / s, (r[2, 1] - r[1, 2]) / s]
    elif r[1, 1] > r[2, 2]:
        s = np.sqrt(1.0 + r[1, 1] - r[0, 0] - r[2, 2]) * 2
        q = [(r[0, 1] + r[1, 0]) / s, 0.25 * s, (r[1, 2] + r[2, 1]) / s, (r[0, 2] - r[2, 0]) / s]
    else:
        s = np.sqrt(1.0 + r[2, 2] - r[0, 0] - r[1, 1]) * 2
        q = [(r[0, 2] + r[2, 0]) / s, (r[1, 2] + r[2, 1]) / s, 0.25 * s, (r[1, 0] - r[0, 1]) / s]
    q = np.asarray(q, dtype=np.float64)
    q /= np.linalg.norm(q)
    return -q if q[3] < 0 else q

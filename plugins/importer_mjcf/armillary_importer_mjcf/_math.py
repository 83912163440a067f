"""Small float64 rigid-transform helpers (quaternions are ``w, x, y, z`` here, as in MJCF)."""

from __future__ import annotations

import math

import numpy as np

QI = np.array([1.0, 0.0, 0.0, 0.0])


def qmul(a, b) -> np.ndarray:
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return np.array([
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    ])  # fmt: skip


def qconj(q) -> np.ndarray:
    return np.array([q[0], -q[1], -q[2], -q[3]])


def qnorm(q) -> np.ndarray:
    q = np.asarray(q, dtype=np.float64)
    n = float(np.linalg.norm(q))
    return q / n


def qrot(q, v) -> np.ndarray:
    return qmat(q) @ np.asarray(v, dtype=np.float64)


def qmat(q) -> np.ndarray:
    w, x, y, z = q
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])  # fmt: skip


def mat2q(m) -> np.ndarray:
    m = np.asarray(m, dtype=np.float64)
    t = np.trace(m)
    if t > 0:
        s = math.sqrt(t + 1.0) * 2
        q = [0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s]
    elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
        s = math.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2]) * 2
        q = [(m[2, 1] - m[1, 2]) / s, 0.25 * s, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s]
    elif m[1, 1] > m[2, 2]:
        s = math.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2]) * 2
        q = [(m[0, 2] - m[2, 0]) / s, (m[0, 1] + m[1, 0]) / s, 0.25 * s, (m[1, 2] + m[2, 1]) / s]
    else:
        s = math.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1]) * 2
        q = [(m[1, 0] - m[0, 1]) / s, (m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, 0.25 * s]
    return qnorm(q)


def axis_angle(axis, angle) -> np.ndarray:
    a = np.asarray(axis, dtype=np.float64)
    a = a / np.linalg.norm(a)
    s = math.sin(0.5 * angle)
    return np.array([math.cos(0.5 * angle), a[0] * s, a[1] * s, a[2] * s])


def quat_z_to(v) -> np.ndarray:
    """Minimal rotation taking +Z onto ``v``, computed as MuJoCo's ``mjuu_z2quat`` does (``zaxis``,
    ``fromto``): axis ``z x v`` (``+X`` when parallel), angle ``atan2(|z x v|, v_z)``."""
    v = np.asarray(v, dtype=np.float64)
    axis = np.array([0.0 * v[2] - 1.0 * v[1], 1.0 * v[0] - 0.0 * v[2], 0.0 * v[1] - 0.0 * v[0]])
    s = math.sqrt(axis[0] * axis[0] + axis[1] * axis[1] + axis[2] * axis[2])
    if s < 1e-10:
        axis = np.array([1.0, 0.0, 0.0])
    else:
        axis = axis / s
    ang = math.atan2(s, float(v[2]))
    sh = math.sin(ang / 2)
    return np.array([math.cos(ang / 2), axis[0] * sh, axis[1] * sh, axis[2] * sh])


class Tf:
    """Rigid transform: position ``p`` and rotation ``q`` (wxyz)."""

    __slots__ = ("p", "q")

    def __init__(self, p=None, q=None):
        self.p = np.zeros(3) if p is None else np.asarray(p, dtype=np.float64)
        self.q = QI.copy() if q is None else np.asarray(q, dtype=np.float64)

    def __mul__(self, o: "Tf") -> "Tf":
        return Tf(self.p + qrot(self.q, o.p), qmul(self.q, o.q))

    def inv(self) -> "Tf":
        qi = qconj(self.q)
        return Tf(-qrot(qi, self.p), qi)

    def point(self, v) -> np.ndarray:
        return self.p + qrot(self.q, v)

    def xyzw(self) -> tuple:
        """``(px, py, pz, qx, qy, qz, qw)`` for :func:`warp.transform`."""
        p, q = self.p, self.q
        return (float(p[0]), float(p[1]), float(p[2]), float(q[1]), float(q[2]), float(q[3]), float(q[0]))

    @staticmethod
    def from_xyzw(v) -> "Tf":
        v = [float(x) for x in v]
        return Tf(v[:3], [v[6], v[3], v[4], v[5]])

    def __repr__(self):
        return f"Tf(p={self.p.tolist()}, q={self.q.tolist()})"

"""Validated conversion of user input (transforms, vectors, matrices, scalars) for the builder.

Every function raises ``ValueError`` whose message names ``what`` (the entity and
argument) and the allowed values; none of them touches builder state.
"""

from __future__ import annotations

import ctypes
import math

import numpy as np
import warp as wp

_F32_MAX = float(np.finfo(np.float32).max)
IDENTITY_TRANSFORM = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0)


def _floats(value, n: int, what: str) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a sequence of {n} numbers, got {value!r}") from None
    if arr.size != n:
        raise ValueError(f"{what} must have {n} components, got {arr.size} ({value!r})")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{what} must be finite (no NaN or inf), got {arr.tolist()}")
    if np.abs(arr).max(initial=0.0) > _F32_MAX:
        raise ValueError(f"{what} exceeds the float32 range (|x| <= {_F32_MAX:.3g}), got {arr.tolist()}")
    return arr


def to_transform(value, what: str) -> wp.transform:
    """``None`` -> identity; otherwise a 7-sequence ``(p, q_xyzw)`` or a 3-sequence position."""
    if value is None:
        return wp.transform_identity()
    if isinstance(value, wp.transform):
        arr = _floats(value, 7, what)
    else:
        try:
            raw = np.asarray(value, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            # (pos, quat) pair of sequences
            try:
                p, q = value
                raw = np.concatenate([np.asarray(p, dtype=np.float64).reshape(-1), np.asarray(q, dtype=np.float64).reshape(-1)])
            except (TypeError, ValueError):
                raise ValueError(f"{what} must be a wp.transform or 7 numbers (px, py, pz, qx, qy, qz, qw), got {value!r}") from None
        if raw.size == 3:
            raw = np.concatenate([raw, [0.0, 0.0, 0.0, 1.0]])
        arr = _floats(raw, 7, what)
    qn = float(np.linalg.norm(arr[3:]))
    if qn < 1e-9:
        raise ValueError(f"{what} has a zero-length rotation quaternion {arr[3:].tolist()}; expected a unit quaternion (x, y, z, w)")
    if abs(qn - 1.0) > 1e-6:
        arr[3:] /= qn
    return wp.transform(*arr.tolist())


def to_vec3(value, what: str, default=(0.0, 0.0, 0.0)) -> wp.vec3:
    if value is None:
        value = default
    return wp.vec3(*_floats(value, 3, what).tolist())


def to_mat33(value, what: str) -> wp.mat33:
    if value is None:
        return wp.mat33(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    arr = _floats(value, 9, what).reshape(3, 3)
    if not np.allclose(arr, arr.T, atol=1e-6 * max(1.0, float(np.abs(arr).max()))):
        raise ValueError(f"{what} must be a symmetric 3x3 matrix, got {arr.tolist()}")
    ev = np.linalg.eigvalsh(arr)
    if ev.min() < -1e-9 * max(1.0, float(np.abs(ev).max())):
        raise ValueError(f"{what} must be positive semi-definite (eigenvalues >= 0), got eigenvalues {ev.tolist()}")
    return wp.mat33(*arr.reshape(-1).tolist())


def to_float(value, what: str, *, minimum: float | None = None, allow_inf: bool = False, strict: bool = False) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number, got {value!r}") from None
    if math.isnan(v) or (not allow_inf and math.isinf(v)):
        raise ValueError(f"{what} must be a finite number, got {v}")
    if not math.isinf(v) and abs(v) > _F32_MAX:
        raise ValueError(f"{what}={v} exceeds the float32 range (|x| <= {_F32_MAX:.3g})")
    if minimum is not None and (v < minimum or (strict and v <= minimum)):
        op = ">" if strict else ">="
        raise ValueError(f"{what}={v} is invalid; expected a value {op} {minimum}")
    return v


def check_index(value, count: int, what: str, *, allow_world: bool = False) -> int:
    """Validate an entity index in ``[0, count)`` (or ``-1`` when ``allow_world``)."""
    try:
        if isinstance(value, bool) or int(value) != value:
            raise TypeError
        idx = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be an integer index, got {value!r}") from None
    lo = -1 if allow_world else 0
    if idx < lo or idx >= count:
        allowed = f"-1 (world) or 0..{count - 1}" if allow_world else f"0..{count - 1}"
        if count == 0:
            allowed = "-1 (world)" if allow_world else "none (no entities exist yet)"
        raise ValueError(f"{what}={idx} is out of range; allowed values: {allowed}")
    return idx


def stack(values, width: int, dtype=np.float32) -> np.ndarray:
    """Stack builder list items (warp vectors/matrices, tuples, arrays) into an ``(n, width)`` array."""
    n = len(values)
    if n == 0:
        return np.zeros((0, width), dtype=dtype)
    if dtype == np.float32 and all(isinstance(v, ctypes.Array) for v in values):
        # warp vector / matrix / transform objects: concatenate their raw float32 buffers
        buf = b"".join(map(bytes, values))
        if len(buf) == 4 * n * width:
            return np.frombuffer(buf, dtype=np.float32).reshape(n, width).copy()
    try:
        arr = np.asarray(values, dtype=dtype)
        if arr.size == n * width:
            return arr.reshape(n, width)
    except (TypeError, ValueError):
        pass
    out = np.empty((n, width), dtype=dtype)
    for i, v in enumerate(values):
        out[i] = np.asarray(v, dtype=dtype).reshape(width)
    return out

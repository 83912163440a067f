"""Argument helpers shared by the components: array conversion, length checks, resolve_arguments."""

from __future__ import annotations

import math
import numbers
from typing import Any, Callable

import numpy as np
import warp as wp


def is_number(value) -> bool:
    """True for int / float (Python or numpy) values, False for bool and everything else."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def as_array(value, owner: str, name: str, dtype=wp.float32, device=None, optional: bool = False):
    """``value`` as a 1-D Warp array of ``dtype``.

    A Warp array of the right dtype is used as is (no copy); numpy arrays and
    sequences are copied to ``device`` (default: Warp's default device).
    ``None`` is returned for ``None`` when ``optional``.
    """
    if value is None:
        if optional:
            return None
        raise ValueError(f"{owner}: {name} is required (an array of shape (n,))")
    if isinstance(value, wp.array):
        if value.ndim != 1:
            raise ValueError(f"{owner}: {name} must be 1-D with one entry per actuator, got shape {value.shape}")
        if value.dtype == dtype:
            return value
        device = device if device is not None else value.device
        value = value.numpy()
    arr = np.asarray(value)
    if arr.ndim != 1:
        raise ValueError(f"{owner}: {name} must be 1-D with one entry per actuator, got shape {arr.shape}")
    np_dtype = wp.dtype_to_numpy(dtype)
    if np.issubdtype(np_dtype, np.integer) and arr.size and not np.all(np.equal(np.mod(arr, 1), 0)):
        raise ValueError(f"{owner}: {name} must hold integers, got {arr.tolist()}")
    if np.issubdtype(np_dtype, np.unsignedinteger) and arr.size and np.any(arr < 0):
        k = int(np.argmax(arr < 0))
        raise ValueError(f"{owner}: {name}[{k}] = {arr[k]} is negative")
    return wp.array(arr.astype(np_dtype), dtype=dtype, device=device)


def check_length(arr, n: int, label: str, owner: str, name: str) -> None:
    """ValueError naming ``label``, ``owner`` and ``name`` when ``arr`` (if not None) has not ``n`` entries."""
    if arr is not None and arr.shape[0] != n:
        raise ValueError(
            f"{label}: {owner}.{name} has {arr.shape[0]} entries but the actuator drives {n} DOFs "
            "(one entry per actuator expected)"
        )


def nonneg(value) -> bool:
    return value >= 0.0 and not math.isnan(value)


def positive(value) -> bool:
    return value > 0.0 and not math.isnan(value)


def finite(value) -> bool:
    return math.isfinite(value)


def resolve(
    cls,
    args: dict[str, Any],
    *,
    required: tuple[str, ...] = (),
    defaults: dict[str, Any] | None = None,
    checks: dict[str, tuple[Callable[[float], bool], str]] | None = None,
) -> dict[str, Any]:
    """Common ``resolve_arguments``: unknown / missing keys and per-value checks -> ValueError.

    ``checks`` maps an argument to ``(predicate, description)``; number values
    that fail the predicate raise ``ValueError`` naming the class, the argument
    and the value.
    """
    defaults = defaults or {}
    name = cls.__name__
    if not isinstance(args, dict):
        raise ValueError(f"{name}: arguments must be a dict, got {type(args).__name__}")
    accepted = (*required, *defaults)
    unknown = [k for k in args if k not in accepted]
    if unknown:
        raise ValueError(f"{name}: unknown argument {unknown[0]!r}; accepted: {', '.join(accepted)}")
    missing = [k for k in required if k not in args]
    if missing:
        raise ValueError(f"{name}: missing required argument {missing[0]!r}")
    out = dict(defaults)
    out.update(args)
    for key, (ok, what) in (checks or {}).items():
        value = out.get(key)
        if value is None:
            continue
        if not is_number(value):
            raise ValueError(f"{name}: {key} must be a number, got {value!r}")
        if not ok(float(value)):
            raise ValueError(f"{name}: {key} must be {what}, got {value!r}")
        out[key] = float(value)
    return out


def check_same_length(owner: str, first: str, arrays: dict) -> None:
    """ValueError when the (non-None) per-actuator arrays of one component differ in length."""
    n = arrays[first].shape[0]
    for name, arr in arrays.items():
        if arr is not None and arr.shape[0] != n:
            raise ValueError(f"{owner}: {name} has {arr.shape[0]} entries but {first} has {n} (one per actuator)")

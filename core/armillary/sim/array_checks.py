"""One check for every array a step, a collision pass or an eval function reads: :func:`expect_array`.

A wrong-sized array handed to a Warp kernel is read or written out of bounds (and can crash the
interpreter); ``None`` becomes a null pointer. Checking on the host before the launch turns both
into a ``ValueError`` that names the array.
"""

from __future__ import annotations

import numpy as np
import warp as wp

__all__ = ["expect_array"]


def _dtype_name(dtype) -> str:
    return getattr(dtype, "__name__", str(dtype))


def expect_array(where: str, name: str, arr, n: int, dtype, device, *, required: bool, hint: str) -> None:
    """Raise ``ValueError`` unless ``where.name`` (``arr``) is a 1-d ``wp.array`` of ``n`` ``dtype``
    on ``device`` (``None`` passes when ``n == 0`` or not ``required``); the message names the
    array, what it is and what was expected (``hint`` says why, e.g. "the model has 4 bodies")."""
    label = f"{where}.{name}"
    want = f"expected a wp.array of shape ({n},) and dtype {_dtype_name(dtype)} on {device} ({hint})"
    if arr is None:
        if required and n > 0:
            raise ValueError(f"{label} is None; {want}")
        return
    if n == 0 and isinstance(arr, wp.array):
        return  # nothing of this kind to read (e.g. a ModelView hiding particles or joints of a full state)
    if not isinstance(arr, wp.array):
        shape = f" of shape {arr.shape}" if isinstance(arr, np.ndarray) else ""
        raise ValueError(f"{label} is {type(arr).__module__}.{type(arr).__name__}{shape}, not a Warp array; {want} "
                         f"(wrap data with wp.array(..., dtype=..., device=...) or copy it into the existing array "
                         f"with {label}.assign(...))")  # fmt: skip
    if arr.dtype != dtype or arr.ndim != 1 or arr.shape[0] != n or arr.device != device:
        raise ValueError(f"{label} has shape {tuple(arr.shape)} and dtype {_dtype_name(arr.dtype)} on {arr.device}; "
                         f"{want}")

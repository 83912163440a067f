"""Colour-space helpers: the IEC 61966-2-1 sRGB transfer curve and :class:`ColorSpace`.

Authored colours (``Model.shape_color``, ``Mesh.color``, builder ``color=`` arguments, base-colour
textures) are display/sRGB values in ``[0, 1]``; renderers convert them to linear light for
shading with :func:`color_srgb_to_linear` and back with :func:`color_linear_to_srgb`.

Host functions accept a tuple, list or 1-D array of at least three components and return a
tuple of three Python floats (the first three components; alpha is dropped), like the
reference engine; a NumPy array with two or more dimensions (``(..., C)``, ``C >= 3``) returns a
float64 array ``(..., 3)`` converted element-wise. Negative components are clamped to zero;
values above one follow the curve's analytic continuation. Warp ``@wp.func`` versions
(:func:`srgb_to_linear_wp`, :func:`linear_to_srgb_wp`, scalar and ``vec3``) serve kernels.
"""

from __future__ import annotations

import enum

import numpy as np
import warp as wp

__all__ = [
    "ColorSpace",
    "color_linear_to_srgb",
    "color_srgb_to_linear",
    "linear_to_srgb_vec3_wp",
    "linear_to_srgb_wp",
    "srgb_to_linear_vec3_wp",
    "srgb_to_linear_wp",
]

# IEC 61966-2-1 constants
_SRGB_THRESHOLD = 0.04045  # encoded value where the linear segment ends
_LINEAR_THRESHOLD = 0.0031308  # linear value where the linear segment ends
_SLOPE = 12.92
_A = 0.055
_GAMMA = 2.4


class ColorSpace(enum.IntEnum):
    """Encoding of colour values: ``LINEAR`` light (Rec. 709 primaries) or display ``SRGB``."""

    LINEAR = 0
    SRGB = 1


def _srgb_to_linear_np(c: np.ndarray) -> np.ndarray:
    c = np.maximum(c, 0.0)
    return np.where(c <= _SRGB_THRESHOLD, c / _SLOPE, ((c + _A) / (1.0 + _A)) ** _GAMMA)


def _linear_to_srgb_np(c: np.ndarray) -> np.ndarray:
    c = np.maximum(c, 0.0)
    return np.where(c <= _LINEAR_THRESHOLD, c * _SLOPE, (1.0 + _A) * c ** (1.0 / _GAMMA) - _A)


def _rgb_input(color, name: str) -> np.ndarray:
    try:
        a = np.asarray(color, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name}: color must be a sequence of at least 3 numbers (RGB[A]), got {color!r}: {e}") from None
    if a.ndim == 0 or a.shape[-1] < 3:
        raise ValueError(f"{name}: color must have at least 3 components (RGB[A]), got shape {a.shape} ({color!r})")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name}: color components must be finite, got {color!r}")
    return a


def _convert(color, fn, name: str):
    a = _rgb_input(color, name)
    if a.ndim == 1:
        r = fn(a[:3])
        return (float(r[0]), float(r[1]), float(r[2]))
    return fn(a[..., :3])


def color_srgb_to_linear(color):
    """Display/sRGB-encoded RGB -> linear RGB (IEC 61966-2-1).

    Args:
        color: RGB or RGBA values in ``[0, 1]``: a sequence / 1-D array (returns a tuple of three
            floats) or an array ``(..., C)`` with ``C >= 3`` (returns a float64 array ``(..., 3)``).

    Returns:
        Linear RGB, same kind as described above. Negative inputs are clamped to zero.
    """
    return _convert(color, _srgb_to_linear_np, "color_srgb_to_linear")


def color_linear_to_srgb(color):
    """Linear RGB -> display/sRGB-encoded RGB (IEC 61966-2-1); the inverse of
    :func:`color_srgb_to_linear` (same argument and return conventions)."""
    return _convert(color, _linear_to_srgb_np, "color_linear_to_srgb")


@wp.func
def srgb_to_linear_wp(c: float):
    """One display/sRGB component -> linear (negatives clamp to 0)."""
    x = wp.max(c, 0.0)
    if x <= 0.04045:
        return x / 12.92
    return wp.pow((x + 0.055) / 1.055, 2.4)


@wp.func
def linear_to_srgb_wp(c: float):
    """One linear component -> display/sRGB (negatives clamp to 0)."""
    x = wp.max(c, 0.0)
    if x <= 0.0031308:
        return x * 12.92
    return 1.055 * wp.pow(x, 1.0 / 2.4) - 0.055


@wp.func
def srgb_to_linear_vec3_wp(c: wp.vec3):
    """Display/sRGB RGB -> linear RGB."""
    return wp.vec3(srgb_to_linear_wp(c[0]), srgb_to_linear_wp(c[1]), srgb_to_linear_wp(c[2]))


@wp.func
def linear_to_srgb_vec3_wp(c: wp.vec3):
    """Linear RGB -> display/sRGB RGB."""
    return wp.vec3(linear_to_srgb_wp(c[0]), linear_to_srgb_wp(c[1]), linear_to_srgb_wp(c[2]))

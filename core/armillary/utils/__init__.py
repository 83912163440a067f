"""Utilities: colour-space conversion (:mod:`armillary.utils.color`).

``armillary.utils`` is imported on first access (``armillary.utils.color_srgb_to_linear``), never
by ``import armillary``.
"""

from .color import ColorSpace, color_linear_to_srgb, color_srgb_to_linear

__all__ = ["ColorSpace", "color_linear_to_srgb", "color_srgb_to_linear"]

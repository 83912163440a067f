"""Gravity per world: the layout of ``Model.gravity`` and the lookup every kernel uses.

``Model.gravity`` (``wp.vec3``) has one row per world plus a last row for the global world
``-1`` (``world_count + 1`` rows) when the builder created worlds (``begin_world``,
``add_world``, ``replicate``); a model built without worlds, whose entities are all global, has a
single row, which is both world 0's and the global world's. Kernels take the gravity of an entity
of world ``w`` with :func:`gravity_of_world`: row ``w`` for ``w >= 0``, the last row for ``w < 0``
(and, defensively, for an index past the end).
"""

from __future__ import annotations

import numpy as np
import warp as wp

__all__ = ["global_gravity_row", "gravity_of_world", "gravity_rows"]


@wp.func
def gravity_of_world(gravity: wp.array(dtype=wp.vec3), world: int):
    """Gravity [m/s^2] of world ``world``: ``gravity[world]``, or the last (global) row for a
    negative world; zero for an empty array."""
    n = gravity.shape[0]
    if n == 0:
        return wp.vec3(0.0)
    if world < 0 or world >= n:
        return gravity[n - 1]
    return gravity[world]


def gravity_rows(world_count: int, builder_world_count: int) -> int:
    """Number of rows of ``Model.gravity``: ``world_count + 1`` when the builder created worlds,
    else 1."""
    return int(world_count) + 1 if int(builder_world_count) > 0 else 1


def global_gravity_row(gravity) -> np.ndarray:
    """The global world's gravity (last row) of a ``Model.gravity`` array, as float64 numpy."""
    g = np.asarray(gravity.numpy(), dtype=np.float64).reshape(-1, 3)
    return g[-1]

"""Sensors: :class:`SensorTiledCamera`, a Warp ray-casting camera rendering every world at once.

Imported on first access (``armillary.sensors.SensorTiledCamera``), never by ``import armillary``.
"""

from .tiled_camera import SensorTiledCamera

__all__ = ["SensorTiledCamera"]

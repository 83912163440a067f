"""Core's own plugin: the built-in demo scenes, registered through the public hooks."""

from __future__ import annotations

from .hookspecs import hookimpl


@hookimpl
def armillary_register_scenes(registry):
    registry.add(
        "falling_shapes",
        "armillary.demos:falling_shapes",
        summary="spheres and boxes dropped onto the ground plane in a grid",
        dt=1.0 / 600.0,
        frames=120,
        substeps=10,
    )
    registry.add(
        "sphere_rest",
        "armillary.demos:sphere_rest",
        summary="one sphere dropped onto the ground plane (the Collisions quick start)",
        dt=1.0 / 600.0,
        frames=60,
        substeps=10,
    )

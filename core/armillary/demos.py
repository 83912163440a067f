"""Built-in demo scenes (registered by :mod:`armillary._builtin` through the scene hook).

Each function returns an un-finalized :class:`~armillary.ModelBuilder`; units
are SI (m, kg, s), z is up.
"""

from __future__ import annotations

import warp as wp


def _material():
    """Stiff, well-damped contact material for the demos (penalty solvers settle within 1 mm)."""
    from .sim.builder import ModelBuilder

    return ModelBuilder.ShapeConfig(density=1000.0, ke=1.0e5, kd=1.0e3, mu=0.6)


def _replicated(make_world, world_count: int):
    from .sim.builder import ModelBuilder

    if world_count < 1:
        raise ValueError(f"world_count must be at least 1, got {world_count}")
    world = make_world()
    scene = ModelBuilder()
    scene.add_ground_plane(cfg=_material())
    if world_count == 1:
        scene.add_builder(world)
    else:
        scene.replicate(world, world_count)
    return scene


def falling_shapes(world_count: int = 1):
    """A 3 x 3 grid of spheres (r = 0.1 m) and boxes (0.2 m cubes), density 1000 kg/m^3,
    released from rest 0.3-0.9 m above the ground plane in tilted orientations.

    Bodies are named after their shape and grid index (``sphere_0``, ``box_1``, ... ``sphere_8``),
    their shapes ``<body>_geom``."""
    from .sim.builder import ModelBuilder

    def make_world():
        b = ModelBuilder()
        for i in range(3):
            for j in range(3):
                k = 3 * i + j
                pos = wp.vec3(0.4 * (i - 1), 0.4 * (j - 1), 0.3 + 0.2 * (k % 4))
                rot = wp.quat_from_axis_angle(wp.normalize(wp.vec3(1.0, 1.0, 0.0)), 0.3 * k)
                name = f"{'sphere' if k % 2 == 0 else 'box'}_{k}"
                body = b.add_body(xform=wp.transform(pos, rot), label=name)
                if k % 2 == 0:
                    b.add_shape_sphere(body, radius=0.1, cfg=_material(), label=f"{name}_geom")
                else:
                    b.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1, cfg=_material(), label=f"{name}_geom")
        return b

    return _replicated(make_world, world_count)


def sphere_rest(world_count: int = 1):
    """One sphere (r = 0.1 m, density 1000 kg/m^3) released 0.5 m above the ground plane."""
    from .sim.builder import ModelBuilder

    def make_world():
        b = ModelBuilder()
        body = b.add_body(xform=wp.transform(wp.vec3(0.0, 0.0, 0.5), wp.quat_identity()), label="sphere")
        b.add_shape_sphere(body, radius=0.1, cfg=_material(), label="sphere_geom")
        return b

    return _replicated(make_world, world_count)

"""Collision detection: broad phases, primitive narrow phase and :class:`CollisionPipeline`.

Public building blocks: :class:`BroadPhaseAllPairs`, :class:`BroadPhaseSAP`,
:class:`BroadPhaseExplicit`, :class:`NarrowPhase` (with :class:`ContactData` for custom
contact writers) and the ``collide_*`` Warp device functions for single primitive pairs
(call them from your own kernels), with the reference engine's signatures and return
conventions (see docs/collision.md).
"""

from .broad_phase import BroadPhaseAllPairs, BroadPhaseExplicit, BroadPhaseSAP
from .hydroelastic import HydroelasticSDF
from .narrow_phase_api import ContactData, NarrowPhase
from .pipeline import CollisionPipeline
from .primitives import (
    MAXVAL,
    collide_box_box,
    collide_capsule_box,
    collide_capsule_capsule,
    collide_plane_box,
    collide_plane_capsule,
    collide_plane_cylinder,
    collide_plane_ellipsoid,
    collide_plane_sphere,
    collide_sphere_box,
    collide_sphere_capsule,
    collide_sphere_cylinder,
    collide_sphere_sphere,
)

__all__ = [
    "MAXVAL",
    "BroadPhaseAllPairs",
    "BroadPhaseExplicit",
    "BroadPhaseSAP",
    "CollisionPipeline",
    "ContactData",
    "HydroelasticSDF",
    "NarrowPhase",
    "collide_box_box",
    "collide_capsule_box",
    "collide_capsule_capsule",
    "collide_plane_box",
    "collide_plane_capsule",
    "collide_plane_cylinder",
    "collide_plane_ellipsoid",
    "collide_plane_sphere",
    "collide_sphere_box",
    "collide_sphere_capsule",
    "collide_sphere_cylinder",
    "collide_sphere_sphere",
]

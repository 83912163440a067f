"""Core data model: builder, model, state, control, contacts, geometry sources and enums.

The enums are imported eagerly (they are light); the classes that need Warp are
imported on first access, so that ``import armillary`` stays fast.
"""

from __future__ import annotations

import importlib

from .enums import Axis, BodyFlags, GeoType, JointTargetMode, JointType, ParticleFlags, ShapeFlags

_LAZY = {
    "ModelBuilder": ".builder",
    "Model": ".model",
    "State": ".state",
    "Control": ".control",
    "Contacts": ".contacts",
    "Mesh": ".geometry_types",
    "Heightfield": ".geometry_types",
    "Rod": ".rod",
    "TetMesh": ".tetmesh",
}

__all__ = [
    "Axis",
    "BodyFlags",
    "GeoType",
    "JointTargetMode",
    "JointType",
    "ParticleFlags",
    "ShapeFlags",
    *_LAZY,
]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value

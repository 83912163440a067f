"""armillary: modular physics simulation on NVIDIA Warp.

The core defines the data model (:class:`ModelBuilder`, :class:`Model`,
:class:`State`, :class:`Control`, :class:`Contacts`), kinematics, collision
and the contracts; solvers, importers and actuators come from plugins
(:mod:`armillary.hookspecs`) resolved on first use, e.g.
``armillary.solvers.SolverXPBD``. ``import armillary`` imports no plugin.
"""

from __future__ import annotations

import importlib

from . import solvers
from ._version import __version__
from .flags import ModelFlags, StateFlags
from .hookspecs import hookimpl
from .sim.enums import Axis, BodyFlags, GeoType, JointTargetMode, JointType, ParticleFlags, ShapeFlags
from .sim.exceptions import ArmillaryDeprecationWarning, ArmillaryWarning, NewtonDeprecationWarning, NewtonWarning

MAXVAL = 1.0e10
"""Sentinel magnitude for unbounded values (e.g. unused slots of the ``geometry.collide_*`` results);
the same value as ``armillary.geometry.MAXVAL``."""

# public names defined in submodules, imported on first access
_LAZY = {name: "armillary.sim" for name in ("ModelBuilder", "Model", "State", "Control", "Contacts", "Mesh",
                                             "Heightfield", "Rod", "TetMesh")}
_LAZY["CollisionPipeline"] = "armillary.geometry"
_LAZY["eval_rigid_contact_kinematics"] = "armillary.geometry.contact_kinematics"
_LAZY.update({name: "armillary.sim.kinematics" for name in ("eval_fk", "eval_ik", "eval_mimic")})
_LAZY.update({name: "armillary.sim.dynamics" for name in ("eval_mass_matrix", "eval_inverse_dynamics_passive",
                                                          "eval_inverse_dynamics_force", "eval_jacobian")})
_SUBMODULES = {"actuators", "catalog", "cli", "demos", "docsgen", "hookspecs", "plugins", "registry", "runner",
               "selection", "sensors", "sim", "testing", "usd", "utils", "viewer"}

__all__ = [
    "MAXVAL",
    "ArmillaryDeprecationWarning",
    "ArmillaryWarning",
    "Axis",
    "BodyFlags",
    "GeoType",
    "JointTargetMode",
    "JointType",
    "ModelFlags",
    "NewtonDeprecationWarning",
    "NewtonWarning",
    "ParticleFlags",
    "ShapeFlags",
    "StateFlags",
    "__version__",
    "hookimpl",
    "solvers",
    *_LAZY,
]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'armillary' has no attribute {name!r}")

"""Solvers: the :class:`SolverBase` contract and every solver installed as a plugin.

``armillary.solvers.SolverXPBD`` (and any other solver name) is resolved
through the plugin registry on first access: the plugin's module is imported
only then. A solver that is known but not installed raises ``ImportError``
naming the distribution and the pip command; an unknown name raises
``AttributeError`` listing what is installed.
"""

from __future__ import annotations

from ..flags import ModelFlags, StateFlags
from .base import SolverBase
from .capabilities import FEATURES, Coordinates, SolverCapabilities
from .coupling import CouplingInterface

__all__ = ["FEATURES", "CouplingInterface", "Coordinates", "ModelFlags", "NonFiniteStateError",
           "NotDifferentiableError", "SolverBase", "SolverCapabilities", "StateFlags"]


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    if name == "experimental":
        import importlib

        return importlib.import_module(".experimental", __name__)
    if name in ("NonFiniteStateError", "NotDifferentiableError"):  # step_guard imports Warp: loaded on first use
        from . import step_guard

        return getattr(step_guard, name)
    from .. import plugins

    return plugins.get_registry().solvers.resolve(name)


def __dir__():
    from .. import plugins

    return sorted(set(globals()) | set(plugins.get_registry().solvers.names()))

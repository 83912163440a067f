"""The solver conformance kit.

A solver plugin tests itself against the solver contract and against every
feature it declares with one line::

    import armillary.testing

    class TestConformance(armillary.testing.SolverConformance):
        solver = "SolverMine"            # a name known to armillary.solvers, or the class
        solver_kwargs = {"iterations": 4}  # optional constructor arguments

Checks for features the solver does not declare are skipped with a reason
naming the missing feature; every declared feature gets a physical check with
a stated tolerance (see :class:`SolverConformance`).

The kit is also a pytest plugin (entry point ``pytest11: armillary``) that
provides the ``armillary_registry`` fixture: an isolated plugin registry.

Importing this package is light: :class:`SolverConformance` (and Warp) load
on first attribute access.
"""

from __future__ import annotations

import importlib

__all__ = ["SolverConformance", "Tolerances", "check_step_host_sync", "forbid_host_sync"]
_MODULE_OF = {"SolverConformance": ".conformance", "Tolerances": ".conformance", "forbid_host_sync": ".host_sync",
              "check_step_host_sync": ".host_sync"}


def __getattr__(name: str):
    if name in __all__:
        value = getattr(importlib.import_module(_MODULE_OF[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'armillary.testing' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))

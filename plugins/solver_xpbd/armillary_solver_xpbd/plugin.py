"""Hook implementations of armillary-solver-xpbd (entry point ``solver_xpbd`` in group ``armillary``).

Only names and where they live are registered here; nothing heavy is imported, so
``armillary plugins`` and name resolution stay fast. ``armillary.solvers.SolverXPBD``
imports :mod:`armillary_solver_xpbd.solver` (and Warp) on first use.
"""

from __future__ import annotations

try:
    from armillary import hookimpl
except ImportError:  # very early cores: the marker is plain pluggy
    import pluggy

    hookimpl = pluggy.HookimplMarker("armillary")


@hookimpl
def armillary_register_solvers(registry):
    registry.add(
        "SolverXPBD",
        "armillary_solver_xpbd.solver:SolverXPBD",
        summary="XPBD: maximal-coordinate rigid bodies, joints, contacts, particles and cloth",
    )

"""Hook implementations of armillary-solver-vbd (entry point ``solver_vbd`` in group ``armillary``).

Only names and where they live are registered here; nothing heavy is imported, so
``armillary plugins`` and name resolution stay fast. ``armillary.solvers.SolverVBD``
imports :mod:`armillary_solver_vbd.solver` (and Warp) on first use.
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
        "SolverVBD",
        "armillary_solver_vbd.solver:SolverVBD",
        summary="VBD/AVBD: cloth, soft bodies, springs, rigid bodies, joints and rods (implicit block descent)",
    )

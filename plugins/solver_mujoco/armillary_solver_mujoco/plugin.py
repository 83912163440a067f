"""Hook implementations of armillary-solver-mujoco (entry point ``solver_mujoco`` in group ``armillary``).

Only names and where they live: nothing heavy (no ``mujoco``) is imported here.
"""

from __future__ import annotations

from armillary import hookimpl


@hookimpl
def armillary_register_solvers(registry):
    registry.add(
        "SolverMuJoCo",
        "armillary_solver_mujoco.solver:SolverMuJoCo",
        summary="MuJoCo C engine on a converted model (MjSpec): native or armillary contacts",
    )


@hookimpl
def armillary_register_custom_attributes(builder, solver):
    """The ``mujoco:*`` attributes, declared when MuJoCo is the target solver (or no solver is named)."""
    if solver in (None, "SolverMuJoCo"):
        from .attributes import register

        register(builder)

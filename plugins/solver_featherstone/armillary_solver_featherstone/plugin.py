"""Hook implementations of armillary-solver-featherstone (entry point ``solver_featherstone`` in group ``armillary``).

Only names and where they live: nothing heavy is imported here.
"""

from __future__ import annotations

from armillary import hookimpl


@hookimpl
def armillary_register_solvers(registry):
    registry.add(
        "SolverFeatherstone",
        "armillary_solver_featherstone.solver:SolverFeatherstone",
        summary="articulated bodies in generalized coordinates: CRBA + Cholesky, semi-implicit Euler, penalty contacts",
    )

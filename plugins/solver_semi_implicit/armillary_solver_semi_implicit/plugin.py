"""Hook implementations of armillary-solver-semi-implicit (entry point ``solver_semi_implicit``).

Only names and where they live: nothing heavy is imported here.
"""

from __future__ import annotations

from armillary import hookimpl


@hookimpl
def armillary_register_solvers(registry):
    registry.add(
        "SolverSemiImplicit",
        "armillary_solver_semi_implicit.solver:SolverSemiImplicit",
        summary="semi-implicit (symplectic) Euler: penalty joints and contacts, particles, cloth and soft-body FEM",
    )

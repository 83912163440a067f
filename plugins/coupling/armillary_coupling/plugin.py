"""Hook implementations of armillary-coupling (entry point ``coupling`` in group ``armillary``).

Registers the coupled solvers through ``armillary_register_solvers`` (issue #10). The module
imports nothing heavy: the targets are imported when a name is first resolved
(``armillary.solvers.experimental.coupled.SolverCoupled``).
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
        "SolverCoupled",
        "armillary_coupling.solver_coupled:SolverCoupled",
        summary="coupled-solver base: per-entry model views, ownership, substeps and owned-state reconciliation",
    )
    registry.add(
        "SolverCoupledProxy",
        "armillary_coupling.solver_coupled_proxy:SolverCoupledProxy",
        summary="proxy coupling: endpoints of one solver as proxies in another, lagged or staggered feedback",
    )
    registry.add(
        "SolverCoupledADMM",
        "armillary_coupling.solver_coupled_admm:SolverCoupledADMM",
        summary="ADMM coupling: cross-solver joints and body-particle attachments as hard constraint rows",
    )

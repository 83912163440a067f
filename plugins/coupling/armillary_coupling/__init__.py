"""armillary-coupling: cross-solver coupling: ModelView, SolverCoupled (SolverCoupledProxy and
SolverCoupledADMM to follow).

Public names resolve lazily (no warp import at package import):
``armillary_coupling.ModelView``, ``armillary_coupling.SolverCoupled``; the solvers are also
reachable as ``armillary.solvers.experimental.coupled.<name>``.
"""

__version__ = "0.1.0"

_LAZY = {
    "ModelView": "armillary_coupling.model_view",
    "SolverCoupled": "armillary_coupling.solver_coupled",
    "SolverEntry": "armillary_coupling.solver_coupled",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'armillary_coupling' has no attribute {name!r}")

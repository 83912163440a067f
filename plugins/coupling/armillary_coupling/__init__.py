"""armillary-coupling: cross-solver coupling: ModelView, SolverCoupledProxy, SolverCoupledADMM."""

__version__ = "0.1.0"

"""armillary-solver-semi-implicit: SolverSemiImplicit (symplectic Euler with penalty forces)."""

__version__ = "0.1.0"

"""armillary-solver-featherstone: Featherstone articulated-body solver (generalized coordinates)."""

__version__ = "0.1.0"

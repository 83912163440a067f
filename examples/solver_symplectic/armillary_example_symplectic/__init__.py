"""armillary-example-symplectic: an example third-party solver plugin for armillary.

Importing this package is cheap; the solver (and Warp) load only when
``armillary.solvers.SolverSymplecticEuler`` is first used.
"""

__version__ = "0.1.0"

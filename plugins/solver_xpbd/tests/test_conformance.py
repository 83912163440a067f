"""armillary's conformance kit against SolverXPBD."""

import armillary.testing
from armillary.testing import Tolerances


class TestConformance(armillary.testing.SolverConformance):
    solver = "SolverXPBD"
    # Position projection dissipates energy at first order in dt: the kit's pendulum (dt = 1 ms,
    # 2 s, released horizontally) loses 6.6% of m g L with this solver, 7.9% with the reference
    # engine's SolverXPBD on the same scene, and half as much at dt = 0.5 ms. Every other
    # tolerance is the kit's default.
    tolerances = Tolerances(pendulum_energy=0.075)

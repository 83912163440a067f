"""The whole test suite of this plugin: armillary's conformance kit, in one line."""

import armillary.testing


class TestConformance(armillary.testing.SolverConformance):
    solver = "SolverSymplecticEuler"

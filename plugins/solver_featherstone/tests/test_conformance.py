"""armillary's conformance kit, run against SolverFeatherstone."""

import armillary.testing


class TestConformance(armillary.testing.SolverConformance):
    solver = "SolverFeatherstone"
    # the kit checks exact conservation of spin in free flight: no artificial angular damping
    solver_kwargs = {"angular_damping": 0.0}

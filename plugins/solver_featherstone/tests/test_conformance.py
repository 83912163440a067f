"""armillary's conformance kit, run against SolverFeatherstone."""

import pytest

import armillary.testing


class TestConformance(armillary.testing.SolverConformance):
    solver = "SolverFeatherstone"
    # the kit checks exact conservation of spin in free flight: no artificial angular damping
    solver_kwargs = {"angular_damping": 0.0}

    # Known defect, kept visible (strict: the test fails once it passes): DISTANCE joints are
    # integrated as FREE joints (no range enforced); the kit's rope check measures the anchors
    # 1.11 m apart with max_distance 0.5 m.
    @pytest.mark.xfail(strict=True, reason="DISTANCE joints are simulated as FREE joints: the range is not enforced")
    def test_distance_joint_keeps_its_range(self):  # a new function: marking the kit's own would mark it for every solver
        super().test_distance_joint_keeps_its_range()

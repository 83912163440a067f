"""armillary's conformance kit against SolverXPBD."""

import armillary.testing
from armillary.testing import Tolerances


class TestConformance(armillary.testing.SolverConformance):
    solver = "SolverXPBD"
    # Position projection dissipates energy at first order in dt: the kit's pendulum (dt = 1 ms,
    # 2 s, released horizontally) loses 6.6% of m g L with this solver, 7.9% with the reference
    # engine's SolverXPBD on the same scene, and half as much at dt = 0.5 ms. Every other
    # tolerance is the kit's default.
    # Cloth: XPBD's triangle constraints are ~10x softer than the penalty solvers' for the same
    # tri_ke / tri_ka (a 4x4 cloth at 500 stretches an edge 36%, SemiImplicit 2.6%, VBD 2.8%; the
    # reference engine's SolverXPBD 794%): a known softness, allowed up to 40% here.
    tolerances = Tolerances(pendulum_energy=0.075, cloth_stretch=0.4)
    # restitution is opt-in in SolverXPBD (enable_restitution=False by default, as in the reference)
    feature_solver_kwargs = {"restitution": {"enable_restitution": True}}

"""armillary's conformance kit, run against SolverMuJoCo (armillary contacts injected into MuJoCo)."""

import pytest

import armillary.testing

pytest.importorskip("mujoco")


class TestConformance(armillary.testing.SolverConformance):
    solver = "SolverMuJoCo"
    solver_kwargs = {"use_mujoco_contacts": False}
    # MuJoCo C steps on the host: step reads the state back (no CUDA graph capture)
    graph_capturable = False

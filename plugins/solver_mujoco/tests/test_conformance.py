"""armillary's conformance kit, run against SolverMuJoCo (armillary contacts injected into MuJoCo)."""

import pytest

import armillary.testing

pytest.importorskip("mujoco")


class TestConformance(armillary.testing.SolverConformance):
    solver = "SolverMuJoCo"
    solver_kwargs = {"use_mujoco_contacts": False}
    # MuJoCo C steps on the host: step reads the state back (no CUDA graph capture)
    graph_capturable = False
    # one gravity per MjModel: global bodies (single-world models only) take world 0's row, with a
    # conversion warning when the global row differs (test_global_world_gravity.py, README)
    global_world_gravity = False

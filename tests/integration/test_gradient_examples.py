"""The gradient examples (examples/gradients/) converge: system identification of a link mass and a
cart-pole swing-up, both with gradients through every SolverFeatherstone step on a wp.Tape."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "gradients"


def _load(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sysid_recovers_the_link_mass():
    sysid = _load("sysid_mass")
    mass, history = sysid.identify(true_mass=1.3, guess=0.6, iterations=25, verbose=False)
    assert abs(mass - 1.3) < 5e-3, history
    assert history[-1][1] < 1e-4 * history[0][1]  # the trajectory error fell by four orders


@pytest.mark.slow
def test_cartpole_swing_up_brings_the_pole_upright():
    swingup = _load("cartpole_swingup")
    problem, history = swingup.optimise(iterations=60, verbose=False)
    x, theta, w, v = problem.final_state()
    assert history[0] > 1.9  # hanging at the start: 1 + cos(0) = 2
    assert abs(theta - math.pi) < 0.2, (theta, history[-1])  # within 11.5 degrees of upright at 2 s
    assert history[-1] < 0.1  # (the example's 150 iterations end within 1 degree, loss 0.018)

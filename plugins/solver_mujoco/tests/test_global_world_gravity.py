"""SolverMuJoCo and the global world's gravity row (issue 20): each world's MjModel takes its own
row of Model.gravity; global bodies (accepted in single-world models only) are simulated in world 0
under its row, and the conversion says so when the global row differs."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import warp as wp

from armillary import ModelBuilder
from armillary_solver_mujoco.convert import MuJoCoConversionWarning
from armillary_solver_mujoco.solver import SolverMuJoCo


def _model(global_gravity):
    b = ModelBuilder()
    b.begin_world()
    b.add_body(xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()), mass=1.0, inertia=wp.mat33(np.eye(3) * 0.01))
    b.end_world()
    b.add_body(xform=wp.transform((3.0, 0.0, 1.0), wp.quat_identity()), mass=1.0, inertia=wp.mat33(np.eye(3) * 0.01))  # global body
    m = b.finalize(device="cpu")
    m.set_gravity((0.0, 0.0, -2.0), world=0)
    if global_gravity is not None:
        m.set_gravity(global_gravity, world=-1)
    return m


def test_global_bodies_fall_under_world_0_with_a_warning_when_rows_differ():
    m = _model((0.0, 0.0, -7.0))
    assert m.gravity.shape == (2,)
    with pytest.warns(MuJoCoConversionWarning, match="global bodies"):
        solver = SolverMuJoCo(m, use_mujoco_contacts=False)
    s0, s1 = m.state(), m.state()
    n, dt = 5, 1.0e-3
    for _ in range(n):
        solver.step(s0, s1, None, None, dt)
        s0, s1 = s1, s0
    np.testing.assert_allclose(s0.body_qd.numpy()[:, 2] / (n * dt), [-2.0, -2.0], rtol=1e-4)


def test_no_warning_when_the_rows_agree():
    m = _model((0.0, 0.0, -2.0))
    with warnings.catch_warnings():
        warnings.filterwarnings("error", category=MuJoCoConversionWarning, message="global bodies")
        SolverMuJoCo(m, use_mujoco_contacts=False)

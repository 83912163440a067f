"""SolverVBD: bodies and particles of the global world (-1) fall under the last row of Model.gravity,
not world 0's (issue 20)."""

from __future__ import annotations

import numpy as np
import warp as wp

from armillary import ModelBuilder
from armillary_solver_vbd.solver import SolverVBD as Solver


def _model():
    t = ModelBuilder()
    t.add_body(xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()), mass=1.0)
    b = ModelBuilder()
    b.replicate(t, 2, spacing=(2.0, 0.0, 0.0))
    b.add_body(xform=wp.transform((5.0, 0.0, 1.0), wp.quat_identity()), mass=1.0)  # global body
    b.add_particle((9.0, 0.0, 1.0), (0.0, 0.0, 0.0), 1.0)  # global particle
    m = b.finalize(device="cpu")
    m.set_gravity((0.0, 0.0, -2.0), world=0)
    m.set_gravity((0.0, 0.0, -3.0), world=1)
    m.set_gravity((1.0, 0.0, -4.0), world=-1)
    return m


def test_global_bodies_and_particles_take_the_global_row():
    m = _model()
    assert m.body_world.numpy().tolist() == [0, 1, -1]
    solver = Solver(m)
    s0, s1 = m.state(), m.state()
    n, dt = 10, 1.0e-3
    for _ in range(n):
        solver.step(s0, s1, None, None, dt)
        s0, s1 = s1, s0
    np.testing.assert_allclose(s0.body_qd.numpy()[:, :3] / (n * dt), [[0, 0, -2], [0, 0, -3], [1, 0, -4]], atol=1e-4)
    np.testing.assert_allclose(s0.particle_qd.numpy() / (n * dt), [[1, 0, -4]], atol=1e-4)

"""SolverVBD and ``wp.Tape``: not differentiable, and it says so (README, "Differentiability").

The solver does not declare ``differentiable=True``: stepping it while a tape records on a model or
state that requires gradients raises ``armillary.solvers.NotDifferentiableError`` before any launch
(never silently wrong or zero gradients); without gradients, or without a tape, it steps as usual.
"""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import armillary
from armillary.solvers import NotDifferentiableError

wp.config.quiet = True


def _cloth(requires_grad: bool):
    b = armillary.ModelBuilder()
    b.add_cloth_grid(pos=wp.vec3(-0.2, -0.2, 1.0), rot=wp.quat_identity(), vel=wp.vec3(0.0, 0.0, 0.0), dim_x=4,
                     dim_y=4, cell_x=0.1, cell_y=0.1, mass=0.01, tri_ke=1.0e3, tri_ka=1.0e3, edge_ke=1.0,
                     particle_radius=0.01)  # fmt: skip
    b.add_spring(0, 24, 10.0, 0.0, 0)
    b.color()
    return b.finalize(device="cpu", requires_grad=requires_grad)


def _pendulum(requires_grad: bool):
    b = armillary.ModelBuilder()
    link = b.add_link(xform=wp.transform((0.5, 0.0, 2.0), wp.quat_identity()), mass=1.0,
                      inertia=wp.mat33(np.eye(3, dtype=np.float32) * 0.01))  # fmt: skip
    j = b.add_joint_revolute(parent=-1, child=link, parent_xform=wp.transform((0.0, 0.0, 2.0), wp.quat_identity()),
                             child_xform=wp.transform((-0.5, 0.0, 0.0), wp.quat_identity()), axis=(0.0, 1.0, 0.0))  # fmt: skip
    b.add_articulation([j])
    b.color()
    return b.finalize(device="cpu", requires_grad=requires_grad)


def test_not_declared_differentiable():
    assert not armillary.solvers.SolverVBD.capabilities.differentiable


@pytest.mark.parametrize("scene", [_cloth, _pendulum], ids=["cloth", "pendulum"])
def test_step_under_recording_tape_with_gradients_raises(scene):
    """Particles (cloth, springs) and rigid bodies (a revolute pendulum) alike: the error names the
    solver and leaves the output state untouched."""
    model = scene(True)
    solver = armillary.solvers.SolverVBD(model, iterations=5)
    s0, s1 = model.state(requires_grad=True), model.state(requires_grad=True)
    before = {name: getattr(s1, name).numpy().copy() for name in ("particle_q", "body_q")
              if getattr(s1, name, None) is not None}  # fmt: skip
    with wp.Tape():
        with pytest.raises(NotDifferentiableError, match="SolverVBD is not differentiable"):
            solver.step(s0, s1, model.control(), None, 1e-3)
    for name, values in before.items():
        np.testing.assert_array_equal(getattr(s1, name).numpy(), values)
    # a state with gradients on a model without them: the same
    model = scene(False)
    solver = armillary.solvers.SolverVBD(model, iterations=5)
    with wp.Tape():
        with pytest.raises(NotDifferentiableError):
            solver.step(model.state(requires_grad=True), model.state(), None, None, 1e-3)


def test_steps_under_tape_without_gradients_and_untaped_with_them():
    """Nothing to differentiate (no ``requires_grad``): stepping inside a tape's ``with`` block is
    allowed; a model finalized with ``requires_grad=True`` steps untaped exactly as one without."""
    results = []
    for grad, taped in ((False, True), (True, False), (False, False)):
        model = _cloth(grad)
        solver = armillary.solvers.SolverVBD(model, iterations=5)
        s0, s1 = model.state(), model.state()
        if taped:
            with wp.Tape():
                solver.step(s0, s1, None, None, 1e-3)
        else:
            solver.step(s0, s1, None, None, 1e-3)
        results.append(s1.particle_q.numpy())
    np.testing.assert_array_equal(results[0], results[2])
    np.testing.assert_array_equal(results[1], results[2])

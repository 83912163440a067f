"""The differentiability contract: no silent zero gradients.

A solver that does not declare ``differentiable`` raises NotDifferentiableError when stepped while a
wp.Tape records on a model or state with requires_grad; recorded launches (LaunchCache, replayer)
are recorded on the tape instead of bypassing it.
"""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import armillary
from armillary.launch import LaunchCache, replayer, tape_recording
from armillary.solvers import NotDifferentiableError, SolverBase, SolverCapabilities


@wp.kernel
def _scale(a: float, x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = a * x[i] * x[i]


@wp.kernel
def _drift(dt: float, qd: wp.array(dtype=wp.spatial_vector), q_in: wp.array(dtype=wp.transform),
           q_out: wp.array(dtype=wp.transform)):  # fmt: skip
    i = wp.tid()
    x = q_in[i]
    v = wp.spatial_top(qd[i])
    q_out[i] = wp.transform(wp.transform_get_translation(x) + dt * v, wp.transform_get_rotation(x))


class _Drift(SolverBase):
    """x += dt v for free bodies, through a LaunchCache (replayed launches)."""

    capabilities = SolverCapabilities(coordinates="maximal", joint_types={armillary.JointType.FREE},
                                      features={"rigid_bodies"}, differentiable=True)  # fmt: skip

    def __init__(self, model):
        super().__init__(model)
        self.cache = LaunchCache()

    def step(self, state_in, state_out, control, contacts, dt):
        self.cache.launch(_drift, self.model.body_count, [dt, state_in.body_qd, state_in.body_q],
                          [state_out.body_q], device=self.model.device)  # fmt: skip


class _DriftUndeclared(_Drift):
    capabilities = SolverCapabilities(coordinates="maximal", joint_types={armillary.JointType.FREE},
                                      features={"rigid_bodies"})  # fmt: skip


def _model(requires_grad=True):
    b = armillary.ModelBuilder()
    body = b.add_body(xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()))
    b.add_shape_sphere(body, radius=0.1)
    return b.finalize(device="cpu", requires_grad=requires_grad)


def test_an_undeclared_solver_under_a_recording_tape_raises_with_its_name():
    model = _model()
    solver = _DriftUndeclared(model)
    s0, s1 = model.state(), model.state()
    with pytest.raises(NotDifferentiableError, match="_DriftUndeclared is not differentiable"):
        with wp.Tape():
            solver.step(s0, s1, None, None, 0.01)
    solver.step(s0, s1, None, None, 0.01)  # outside a tape: fine


def test_no_gradients_requested_means_no_error():
    model = _model(requires_grad=False)
    solver = _DriftUndeclared(model)
    s0, s1 = model.state(), model.state()
    with wp.Tape():
        solver.step(s0, s1, None, None, 0.01)


def test_launch_cache_launches_are_recorded_on_the_tape():
    """Replayed launches bypass wp.launch: under a tape the cache launches for real, so the gradient
    of x(T) with respect to v0 is dt * steps, not zero (also after the launch was cached untaped)."""
    model = _model()
    solver = _Drift(model)
    states = [model.state() for _ in range(4)]
    for s in states:
        s.body_qd.assign(np.array([[0.3, 0.0, 0.0, 0.0, 0.0, 0.0]], dtype=np.float32))
    solver.step(states[0], states[1], None, None, 0.1)  # cached outside the tape first
    loss = wp.zeros(1, dtype=float, requires_grad=True)

    @wp.kernel
    def x_of(q: wp.array(dtype=wp.transform), out: wp.array(dtype=float)):
        out[0] = wp.transform_get_translation(q[0])[0]

    tape = wp.Tape()
    with tape:
        assert tape_recording()
        solver.step(states[0], states[1], None, None, 0.1)
        solver.step(states[1], states[2], None, None, 0.1)
        solver.step(states[2], states[3], None, None, 0.1)
        wp.launch(x_of, 1, inputs=[states[3].body_q], outputs=[loss], device="cpu")
    assert not tape_recording()
    tape.backward(loss)
    assert states[0].body_q.grad.numpy()[0, 0] == pytest.approx(1.0)
    # each step reads its own state_in.body_qd
    for s in states[:3]:
        assert s.body_qd.grad.numpy()[0, 0] == pytest.approx(0.1)


def test_a_replayer_without_relaunch_refuses_to_bypass_a_tape():
    x = wp.array(np.arange(3, dtype=np.float32), device="cpu", requires_grad=True)
    y = wp.zeros(3, dtype=float, device="cpu", requires_grad=True)
    recorded = wp.launch(_scale, dim=3, inputs=[2.0, x], outputs=[y], device="cpu", record_cmd=True)
    run = replayer(recorded)
    run()  # untaped: replays
    with pytest.raises(RuntimeError, match="'.*_scale.*' was replayed while a wp.Tape records"):
        with wp.Tape():
            run()
    taped = replayer(recorded, relaunch=lambda: wp.launch(_scale, 3, inputs=[2.0, x], outputs=[y], device="cpu"))
    tape = wp.Tape()
    with tape:
        taped()
    tape.backward(grads={y: wp.ones(3, dtype=float, device="cpu")})
    np.testing.assert_allclose(x.grad.numpy(), 4.0 * np.arange(3))

"""Gradients of the components docs/actuators.md calls differentiable (PD, PID, delay, the three
clampings) against central finite differences, over several taped steps; neural controllers refuse
a tape that wants gradients.

Every comparison uses :func:`armillary.testing.gradient_checks.compare_gradients` (a random weighting
of the outputs, float32 central differences with a step of 1e-3) and a relative error below 1 %:
the laws are piecewise linear, and the inputs are chosen at least 0.05 away from every kink
(clamp bounds, table breakpoints), so the differences are exact up to float32 round-off.
"""

from __future__ import annotations

import types

import numpy as np
import pytest
import warp as wp
from _actuator_helpers import f32, u32

from armillary.actuators import (
    Actuator,
    ClampingDCMotor,
    ClampingMaxEffort,
    ClampingPositionBased,
    ControllerPD,
    ControllerPID,
    Delay,
)
from armillary.testing.gradient_checks import compare_gradients

REL = 0.01
N = 4  # DOFs
Q = np.array([0.30, -0.20, 0.75, -0.60], np.float32)
QD = np.array([0.50, -1.50, 0.20, 2.50], np.float32)
TQ = np.array([0.10, 0.40, 0.00, -0.20], np.float32)
TQD = np.array([0.00, 0.30, -0.40, 0.10], np.float32)
FF = np.array([0.20, -0.10, 0.00, 0.50], np.float32)


def _inputs(steps: int) -> dict:
    """Per-step commands (targets change every step, so delays show) and the initial joint state."""
    out = {"joint_q": f32(Q), "joint_qd": f32(QD)}
    for k in range(steps):
        out[f"target_q{k}"] = f32(TQ + 0.05 * k)
        out[f"target_qd{k}"] = f32(TQD - 0.03 * k)
        out[f"act{k}"] = f32(FF + 0.02 * k)
    return out


def _rollout(make_actuator, steps: int, dt: float = 0.01, clamp_effort_to=None):
    """``forward`` for compare_gradients: ``steps`` actuator steps, each with its own actuator state and
    control (the taped usage); the joints move by a semi-implicit Euler step with unit inertia in
    between, so later efforts depend on earlier ones. Returns every step's effort."""
    actuator = make_actuator()

    def forward(a):
        states = [actuator.state() for _ in range(steps + 1)]
        q, qd = a["joint_q"], a["joint_qd"]
        outs = []
        for k in range(steps):
            sim = types.SimpleNamespace(joint_q=q, joint_qd=qd)
            f = wp.zeros(N, dtype=wp.float32, requires_grad=True)
            control = types.SimpleNamespace(joint_target_q=a[f"target_q{k}"], joint_target_qd=a[f"target_qd{k}"],
                                            joint_act=a[f"act{k}"], joint_f=f)  # fmt: skip
            actuator.step(sim, control, states[k], states[k + 1], dt=dt)
            outs.append(f)
            q_next = wp.zeros(N, dtype=wp.float32, requires_grad=True)
            qd_next = wp.zeros(N, dtype=wp.float32, requires_grad=True)
            wp.launch(_euler, dim=N, inputs=[q, qd, f, dt], outputs=[q_next, qd_next])
            q, qd = q_next, qd_next
        return outs

    return forward


@wp.kernel
def _euler(q: wp.array(dtype=float), qd: wp.array(dtype=float), f: wp.array(dtype=float), dt: float,
           q_out: wp.array(dtype=float), qd_out: wp.array(dtype=float)):  # fmt: skip
    i = wp.tid()
    v = qd[i] + 0.01 * f[i] * dt
    qd_out[i] = v
    q_out[i] = q[i] + v * dt


def _check(results: dict, what: str):
    for comparison in results.values():
        comparison.check(REL, what)


def _gains(kp=(20.0, 5.0, 12.0, 8.0), kd=(2.0, 1.0, 0.5, 3.0)):
    return f32(kp), f32(kd)


def test_pd_gradients_wrt_state_targets_and_feedforward():
    kp, kd = _gains()

    def make():
        return Actuator(u32(range(N)), controller=ControllerPD(kp=kp, kd=kd, const_effort=f32([0.1] * N)),
                        requires_grad=True)

    results = compare_gradients(_rollout(make, 3), _inputs(3), eps=1e-3)
    _check(results, "ControllerPD")


def test_pd_gains_are_differentiable():
    """Gains passed as arrays with gradients get gradients (``d effort / d kp = e``)."""
    make_inputs = {"kp": f32([20.0, 5.0, 12.0, 8.0]), "kd": f32([2.0, 1.0, 0.5, 3.0])}
    state = types.SimpleNamespace(joint_q=f32(Q), joint_qd=f32(QD))

    def forward(a):
        act = Actuator(u32(range(N)), controller=ControllerPD(kp=a["kp"], kd=a["kd"]), requires_grad=True)
        f = wp.zeros(N, dtype=wp.float32, requires_grad=True)
        control = types.SimpleNamespace(joint_target_q=f32(TQ), joint_target_qd=f32(TQD), joint_act=None, joint_f=f)
        act.step(state, control)
        return [f]

    results = compare_gradients(forward, make_inputs, eps=1e-2)
    _check(results, "ControllerPD gains")


def test_pid_gradients_through_the_integral_over_steps():
    kp, kd = _gains()
    # integral_max: DOF 3 saturates (its integral is held at the bound: zero sensitivity there)
    def make():
        pid = ControllerPID(kp=kp, ki=f32([30.0, 10.0, 5.0, 50.0]), kd=kd, integral_max=f32([1.0, 1.0, 1.0, 1e-3]))
        return Actuator(u32(range(N)), controller=pid, requires_grad=True)

    results = compare_gradients(_rollout(make, 4), _inputs(4), eps=1e-3)
    _check(results, "ControllerPID")


def test_delay_gradients_reach_the_commands_of_earlier_steps():
    kp, kd = _gains()

    def make():
        return Actuator(u32(range(N)), controller=ControllerPD(kp=kp, kd=kd),
                        delay=Delay(delay_steps=wp.array([0, 1, 2, 2], dtype=wp.int32), max_delay=2),
                        requires_grad=True)

    steps = 4
    results = compare_gradients(_rollout(make, steps), _inputs(steps), eps=1e-3)
    _check(results, "Delay")
    # the last commands of the delayed DOFs (1, 2, 3) reach no output within the rollout; DOF 0's does
    last = results[f"target_q{steps - 1}"]
    np.testing.assert_array_equal(last.autodiff[1:], 0.0)
    np.testing.assert_allclose(last.finite_difference[1:], 0.0, atol=1e-3)
    assert abs(last.autodiff[0]) > 0.1
    # DOF 3 (delay 2) at the first step still acts on the third step's output
    assert abs(results["target_q0"].autodiff[3]) > 0.1


def test_clamping_gradients_in_a_chain():
    """MaxEffort, then the DC-motor line, then the position table, each the active bound on one DOF
    (the stages write separate arrays while taped, so each stage's adjoint sees its own input)."""
    kp, kd = _gains(kp=(200.0, 5.0, 120.0, 80.0))

    def make():
        return Actuator(
            u32(range(N)), controller=ControllerPD(kp=kp, kd=kd),
            clamping=[ClampingMaxEffort(max_effort=f32([25.0, 30.0, 100.0, 100.0])),
                      ClampingDCMotor(saturation_effort=f32([40.0, 40.0, 25.0, 40.0]),
                                      velocity_limit=f32([10.0, 10.0, 2.0, 10.0]),
                                      max_motor_effort=f32([35.0] * N)),
                      ClampingPositionBased(lookup_positions=(-1.0, 0.0, 1.0), lookup_efforts=(5.0, 30.0, 40.0))],
            requires_grad=True,
        )  # fmt: skip

    # raw efforts -40.8, 4.7, -90.3, 25.3: DOF 0 held by the max effort (25), DOF 1 free, DOF 2 by the
    # DC-motor line (25 * (-1 - 0.2 / 2)), DOF 3 by the table (5 + 0.4 * 25 at q = -0.6)
    f = wp.zeros(N, dtype=wp.float32)
    make().step(types.SimpleNamespace(joint_q=f32(Q), joint_qd=f32(QD)),
                types.SimpleNamespace(joint_target_q=f32(TQ), joint_target_qd=f32(TQD), joint_act=f32(FF), joint_f=f))
    np.testing.assert_allclose(f.numpy(), [-25.0, 4.7, -27.5, 15.0], atol=1e-4)
    results = compare_gradients(_rollout(make, 3), _inputs(3), eps=1e-3)
    _check(results, "clamping chain")
    assert abs(results["joint_q"].autodiff[3]) > 1.0  # the table's slope reaches q of DOF 3


def test_clamp_bounds_receive_the_gradient_when_active():
    """A saturated max-effort clamp passes no gradient to the effort but all of it to its bound."""
    inputs = {"q": f32([0.0, 0.0]), "max_effort": f32([1.0, 50.0])}

    def forward(a):
        act = Actuator(u32([0, 1]), controller=ControllerPD(kp=f32([10.0, 10.0]), kd=f32([0.0, 0.0])),
                       clamping=[ClampingMaxEffort(max_effort=a["max_effort"])], requires_grad=True)
        f = wp.zeros(2, dtype=wp.float32, requires_grad=True)
        act.step(types.SimpleNamespace(joint_q=a["q"], joint_qd=f32([0.0, 0.0])),
                 types.SimpleNamespace(joint_target_q=f32([1.0, 1.0]), joint_target_qd=f32([0.0, 0.0]),
                                       joint_act=None, joint_f=f))  # fmt: skip
        return [f]

    results = compare_gradients(forward, inputs, eps=1e-3)
    _check(results, "ClampingMaxEffort bound")
    assert results["q"].autodiff[0] == 0.0 and results["q"].autodiff[1] != 0.0
    assert results["max_effort"].autodiff[0] != 0.0 and results["max_effort"].autodiff[1] == 0.0


def test_untaped_steps_reuse_their_buffers():
    """Outside a tape a step allocates nothing: the controller and clamp outputs are the actuator's own."""
    kp, kd = _gains()
    clamps = [ClampingMaxEffort(max_effort=f32([1.0] * N)), ClampingMaxEffort(max_effort=f32([0.5] * N))]
    act = Actuator(u32(range(N)), controller=ControllerPD(kp=kp, kd=kd), clamping=clamps)
    computed, stages = act._efforts()
    assert computed is act._computed and all(s is act._applied for s in stages)
    with wp.Tape():
        computed, stages = act._efforts()
    assert computed is not act._computed and len({id(s) for s in stages}) == 2 and computed.requires_grad


def test_actuator_state_carries_gradients_with_requires_grad():
    def pid():
        return ControllerPID(kp=f32([1.0] * N), ki=f32([1.0] * N), kd=f32([0.0] * N), integral_max=f32([1.0] * N))

    delay = Delay(delay_steps=wp.array([1] * N, dtype=wp.int32), max_delay=1)
    s = Actuator(u32(range(N)), controller=pid(), delay=delay, requires_grad=True).state()
    assert s.controller_state.integral.requires_grad and s.delay_state.buffer_pos.requires_grad
    assert not s.delay_state.num_pushes.requires_grad
    assert not Actuator(u32(range(N)), controller=pid()).state().controller_state.integral.requires_grad


class _Opaque(ControllerPD):
    """A controller that declares itself not differentiable (as the neural ones do)."""

    def is_differentiable(self) -> bool:
        return False


def test_a_non_differentiable_controller_refuses_a_tape_that_wants_gradients():
    from armillary.solvers import NotDifferentiableError

    act = Actuator(u32([0]), controller=_Opaque(kp=f32([1.0]), kd=f32([0.0])), label="arm")
    assert not act.is_differentiable()
    q = wp.array([0.1], dtype=wp.float32, requires_grad=True)
    sim = types.SimpleNamespace(joint_q=q, joint_qd=f32([0.0]))
    control = types.SimpleNamespace(joint_target_q=f32([0.0]), joint_target_qd=f32([0.0]), joint_act=None,
                                    joint_f=wp.zeros(1, dtype=wp.float32))  # fmt: skip
    with wp.Tape():
        with pytest.raises(NotDifferentiableError, match="arm: _Opaque is not differentiable"):
            act.step(sim, control)
    act.step(sim, control)  # untaped: fine
    with wp.Tape():  # taped, but nothing wants gradients: fine
        act.step(types.SimpleNamespace(joint_q=f32([0.1]), joint_qd=f32([0.0])), control)


def test_neural_controllers_declare_themselves_not_differentiable():
    from armillary_actuators.neural import _NeuralController

    assert _NeuralController.is_differentiable(object.__new__(_NeuralController)) is False
    for cls in (ControllerPD, ControllerPID, ClampingMaxEffort, ClampingDCMotor, ClampingPositionBased):
        assert cls.is_differentiable(object.__new__(cls)) is True

"""ControllerPD and ControllerPID: control laws against numpy, closed-form step responses under
SolverFeatherstone, integral action against a constant load, anti-windup."""

from __future__ import annotations

import math

import numpy as np
import pytest
import warp as wp
from _actuator_helpers import f32, revolute_builder, sim_control, sim_state, step_effort, u32

import armillary as newton
from armillary.actuators import Actuator, ClampingMaxEffort, ControllerPD, ControllerPID


# ------------------------------------------------------------------------------ PD law
def test_pd_law_with_indices_const_effort_and_feedforward_matches_numpy():
    rng = np.random.default_rng(3)
    nq, nd = 9, 8
    q, qd = rng.normal(size=nq), rng.normal(size=nd)
    tq, tqd, ff = rng.normal(size=nq), rng.normal(size=nd), rng.normal(size=nd)
    pos_idx, vel_idx = np.array([7, 1, 4]), np.array([6, 0, 3])
    kp, kd, const = np.array([10.0, 2.0, 0.5]), np.array([1.0, 0.0, 3.0]), np.array([0.1, -0.2, 0.3])
    act = Actuator(u32(vel_idx), controller=ControllerPD(kp=f32(kp), kd=f32(kd), const_effort=f32(const)),
                   pos_indices=u32(pos_idx))
    state, control = sim_state(q, qd), sim_control(tq, tqd, act=ff, n_out=nd)
    out = step_effort(act, state, control)
    expected = np.zeros(nd)
    expected[vel_idx] = const + kp * (tq[pos_idx] - q[pos_idx]) + kd * (tqd[vel_idx] - qd[vel_idx]) + ff[vel_idx]
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    # no feedforward when the control object has none (attribute absent or None)
    del control.joint_act
    expected[vel_idx] -= ff[vel_idx]
    np.testing.assert_allclose(step_effort(act, state, control), expected, rtol=1e-5, atol=1e-6)


def _pd_step_response(dt: float, inertia=0.5, kp=20.0, kd=2.0, duration=2.0):
    b, dof = revolute_builder(newton, inertia=inertia)
    b.add_actuator(ControllerPD, index=dof, kp=kp, kd=kd)
    model = b.finalize()
    solver = newton.solvers.SolverFeatherstone(model)
    s0, s1, control = model.state(), model.state(), model.control()
    control.joint_target_q.fill_(1.0)
    act = model.actuators[0]
    q = []
    for _ in range(int(round(duration / dt))):
        control.joint_f.zero_()
        act.step(s0, control, dt=dt)
        solver.step(s0, s1, control, None, dt)
        s0, s1 = s1, s0
        q.append(float(s0.joint_q.numpy()[0]))
    return np.asarray(q)


def test_pd_step_response_of_a_revolute_joint_is_the_closed_form_second_order_response():
    inertia, kp, kd, dt = 0.5, 20.0, 2.0, 1.0e-3
    q = _pd_step_response(dt, inertia, kp, kd)
    t = dt * np.arange(1, len(q) + 1)
    wn = math.sqrt(kp / inertia)
    zeta = kd / (2.0 * math.sqrt(kp * inertia))
    wd = wn * math.sqrt(1.0 - zeta**2)
    exact = 1.0 - np.exp(-zeta * wn * t) * (np.cos(wd * t) + zeta / math.sqrt(1.0 - zeta**2) * np.sin(wd * t))
    err = np.abs(q - exact).max()
    assert err < 4.0e-3  # first-order time stepping: O(dt) with dt = 1 ms
    # the overshoot of the underdamped response (zeta = 0.32): exp(-pi zeta / sqrt(1 - zeta^2)) = 35 %
    assert q.max() - 1.0 == pytest.approx(math.exp(-math.pi * zeta / math.sqrt(1 - zeta**2)), abs=5e-3)
    # each step applies exactly the PD effort: Featherstone's semi-implicit Euler recurrence, step by step
    x = v = 0.0
    rec = []
    for _ in q:
        v += dt * (kp * (1.0 - x) - kd * v) / inertia
        x += dt * v
        rec.append(x)
    np.testing.assert_allclose(q, rec, atol=2e-5)
    # and the deviation from the closed form is the time-stepping error: it halves with dt
    err_half = np.abs(_pd_step_response(dt / 2, inertia, kp, kd)[1::2] - exact).max()
    assert 0.4 < err_half / err < 0.6


# ------------------------------------------------------------------------------ PID
def test_pid_matches_the_reference_engine_step_by_step():
    """One DOF, q=0.2, qd=0.4, target 1.0, feedforward 0.05, dt 0.1: the reference engine's
    DrivePID (kp 2, ki 3, kd 0.5, integral_max 0.25, const_effort 0.1) gives these efforts
    and integrals (newton 1.8 run as a black box)."""
    act = Actuator(u32([0]), controller=ControllerPID(kp=f32([2.0]), ki=f32([3.0]), kd=f32([0.5]),
                                                       integral_max=f32([0.25]), const_effort=f32([0.1])))
    state, control = sim_state([0.2], [0.4]), sim_control([1.0], [0.0], act=[0.05])
    states = [act.state(), act.state()]
    efforts, integrals = [], []
    for _ in range(5):
        efforts.append(step_effort(act, state, control, states, dt=0.1)[0])
        integrals.append(states[0].controller_state.integral.numpy()[0])
    np.testing.assert_allclose(efforts, [1.79, 2.03, 2.27, 2.3, 2.3], atol=1e-5)
    np.testing.assert_allclose(integrals, [0.08, 0.16, 0.24, 0.25, 0.25], atol=1e-6)


def _pid_run(controller, load, duration, dt, clamping=None, **kwargs):
    b, dof = revolute_builder(newton, inertia=1.0)
    b.add_actuator(controller, index=dof, clamping=clamping, **kwargs)
    model = b.finalize()
    solver = newton.solvers.SolverFeatherstone(model)
    s0, s1, control = model.state(), model.state(), model.control()
    control.joint_target_q.fill_(1.0)
    act = model.actuators[0]
    states = [act.state(), act.state()]
    q, integral = [], []
    for _ in range(int(round(duration / dt))):
        control.joint_f.fill_(-load)  # a constant load; the actuator adds its effort on top
        act.step(s0, control, states[0], states[1], dt=dt)
        states.reverse()
        solver.step(s0, s1, control, None, dt)
        s0, s1 = s1, s0
        q.append(float(s0.joint_q.numpy()[0]))
        if states[0] is not None:
            integral.append(float(states[0].controller_state.integral.numpy()[0]))
    return np.asarray(q), np.asarray(integral)


def test_pid_integral_removes_the_steady_state_error_of_a_constant_load():
    load, kp, kd, ki, dt = 10.0, 100.0, 20.0, 200.0, 2.0e-3
    # closed loop s^3 + kd s^2 + kp s + ki (unit inertia) is stable: kd * kp > ki
    assert np.all(np.roots([1.0, kd, kp, ki]).real < -2.0)
    q_pd, _ = _pid_run(ControllerPD, load, 6.0, dt, kp=kp, kd=kd)
    assert 1.0 - q_pd[-1] == pytest.approx(load / kp, abs=1e-4)  # PD: error load / kp
    q_pid, integral = _pid_run(ControllerPID, load, 6.0, dt, kp=kp, kd=kd, ki=ki)
    assert abs(1.0 - q_pid[-1]) < 1e-4  # PID: no steady-state error
    assert integral[-1] == pytest.approx(load / ki, rel=1e-3)  # the integral term carries the load


def test_anti_windup_bounds_the_integral():
    # a stuck joint: the error stays 1, the integral grows by dt per step up to integral_max
    dt, ki, kp, imax = 0.05, 4.0, 1.0, 0.3
    act = Actuator([0], controller=ControllerPID(kp=[kp], ki=[ki], kd=[0.0], integral_max=[imax]))
    state, control = sim_state([0.0], [0.0]), sim_control([1.0], [0.0])
    states = [act.state(), act.state()]
    for k in range(1, 21):
        effort = step_effort(act, state, control, states, dt=dt)[0]
        integral = min(k * dt, imax)
        assert states[0].controller_state.integral.numpy()[0] == pytest.approx(integral, abs=1e-6)
        assert effort == pytest.approx(kp + ki * integral, abs=1e-5)  # ki * I never exceeds ki * integral_max
    # a saturated step response: without the clamp the integral winds up and the joint overshoots
    clamp = [(ClampingMaxEffort, {"max_effort": 5.0})]
    q_wind, i_wind = _pid_run(ControllerPID, 0.0, 4.0, 2e-3, clamp, kp=50.0, kd=10.0, ki=100.0)
    q_aw, i_aw = _pid_run(ControllerPID, 0.0, 4.0, 2e-3, clamp, kp=50.0, kd=10.0, ki=100.0, integral_max=0.02)
    assert np.abs(i_aw).max() <= 0.02 + 1e-7 < np.abs(i_wind).max()
    assert q_aw.max() - 1.0 < 0.25 < 1.0 < q_wind.max() - 1.0
    assert abs(q_aw[-1] - 1.0) < 1e-3


def test_pid_needs_dt_and_two_states():
    act = Actuator([0], controller=ControllerPID(kp=[1.0], ki=[1.0], kd=[0.0], integral_max=[1.0]))
    state, control = sim_state([0.0], [0.0]), sim_control([1.0], [0.0])
    a, b = act.state(), act.state()
    with pytest.raises(ValueError, match="dt"):
        act.step(state, control, a, b)
    with pytest.raises(ValueError, match="state"):
        act.step(state, control, dt=0.1)


def test_pid_reference_protocol_compute_then_update_state():
    """A caller that runs compute() without next_state and then update_state(current, next)."""
    pid = ControllerPID(kp=[2.0], ki=[3.0], kd=[0.0], integral_max=[10.0])
    cur, nxt = pid.state(1, "cpu"), pid.state(1, "cpu")
    forces = wp.zeros(1, dtype=wp.float32)
    idx = u32([0])
    pid.compute(f32([0.0]), f32([0.0]), f32([1.0]), f32([0.0]), None, idx, idx, idx, idx, forces, cur, 0.5)
    assert nxt.integral.numpy()[0] == 0.0
    pid.update_state(cur, nxt)
    assert nxt.integral.numpy()[0] == pytest.approx(0.5)
    assert forces.numpy()[0] == pytest.approx(2.0 + 3.0 * 0.5)
    assert cur.integral.numpy()[0] == 0.0  # the current state is only read


def test_resolve_arguments_defaults_and_errors():
    assert ControllerPD.resolve_arguments({"kp": 5}) == {"kp": 5.0, "kd": 0.0, "const_effort": 0.0}
    assert ControllerPID.resolve_arguments({"kp": 1.0, "ki": 2.0}) == {
        "kp": 1.0, "ki": 2.0, "kd": 0.0, "integral_max": math.inf, "const_effort": 0.0}
    with pytest.raises(ValueError, match="ControllerPD.*unknown argument 'kq'"):
        ControllerPD.resolve_arguments({"kp": 1.0, "kq": 2.0})
    with pytest.raises(ValueError, match="ControllerPD.*missing required argument 'kp'"):
        ControllerPD.resolve_arguments({"kd": 1.0})
    with pytest.raises(ValueError, match="ControllerPID.*missing required argument 'ki'"):
        ControllerPID.resolve_arguments({"kp": 1.0})
    with pytest.raises(ValueError, match="ControllerPID.*integral_max must be >= 0"):
        ControllerPID.resolve_arguments({"kp": 1.0, "ki": 1.0, "integral_max": -1.0})
    with pytest.raises(ValueError, match="ControllerPD.*kp must be a number"):
        ControllerPD.resolve_arguments({"kp": "high"})
    with pytest.raises(ValueError, match="ControllerPD.*kd has 1 entries but kp has 2"):
        ControllerPD(kp=[1.0, 2.0], kd=[1.0])

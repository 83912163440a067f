"""Delay: a command reaches the controller exactly N actuator steps later (underfill, N = 0, resets)."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp
from _actuator_helpers import f32, sim_control, sim_state, step_effort, u32

from armillary.actuators import Actuator, ControllerPD, Delay


def _commanded(k: int, n: int) -> np.ndarray:
    """The command of step k: distinct per step and DOF."""
    return 10.0 * (k + 1) + np.arange(n)


def test_delay_shifts_targets_velocity_targets_and_feedforward_by_exactly_n_steps():
    steps = [0, 1, 3, 5]
    n = len(steps)
    # effort = kp * target_pos + kd * target_vel + feedforward with q = qd = 0; one term at a time
    cases = {"target_pos": (1.0, 0.0), "target_vel": (0.0, 1.0), "feedforward": (0.0, 0.0)}
    for which, (kp, kd) in cases.items():
        act = Actuator(u32(range(n)), controller=ControllerPD(kp=f32([kp] * n), kd=f32([kd] * n)),
                       delay=Delay(wp.array(steps, dtype=wp.int32), max_delay=5))
        state = sim_state(np.zeros(n), np.zeros(n))
        control = sim_control(np.zeros(n), np.zeros(n), act=np.zeros(n))
        attr = {"target_pos": "joint_target_q", "target_vel": "joint_target_qd", "feedforward": "joint_act"}[which]
        states = [act.state(), act.state()]
        for k in range(12):
            getattr(control, attr).assign(_commanded(k, n).astype(np.float32))
            out = step_effort(act, state, control, states)
            # step k sees the command of step k - N; before N commands were pushed, the oldest one (step 0)
            expected = [_commanded(max(k - steps[i], 0), n)[i] for i in range(n)]
            np.testing.assert_allclose(out, expected, err_msg=f"{which}, step {k}")


def test_delay_sequence_matches_the_reference_engine():
    """Targets 1, 2, 3, ... with delays (0, 1, 3): the reference engine's outputs (newton 1.8, black box)."""
    act = Actuator([0, 1, 2], controller=ControllerPD(kp=[1.0] * 3, kd=[0.0] * 3),
                   delay=Delay(delay_steps=[0, 1, 3], max_delay=3))
    state, control = sim_state(np.zeros(3), np.zeros(3)), sim_control(np.zeros(3), np.zeros(3))
    states = [act.state(), act.state()]
    got = []
    for k in range(8):
        control.joint_target_q.fill_(k + 1.0)
        got.append(step_effort(act, state, control, states))
    reference = [[1, 1, 1], [2, 1, 1], [3, 2, 1], [4, 3, 1], [5, 4, 2], [6, 5, 3], [7, 6, 4], [8, 7, 5]]
    np.testing.assert_allclose(got, reference)


def test_zero_delay_and_zero_max_delay_use_the_current_command():
    act = Actuator([0], controller=ControllerPD(kp=[1.0], kd=[0.0]), delay=Delay([0], max_delay=0))
    assert act.is_stateful()
    state, control = sim_state([0.0], [0.0]), sim_control([0.0], [0.0])
    states = [act.state(), act.state()]
    for k in range(4):
        control.joint_target_q.fill_(float(k))
        assert step_effort(act, state, control, states)[0] == k


def test_double_buffering_leaves_the_current_state_untouched_and_resets_by_num_pushes():
    act = Actuator([0, 1], controller=ControllerPD(kp=[1.0, 1.0], kd=[0.0, 0.0]), delay=Delay([2, 2], max_delay=2))
    state, control = sim_state([0.0, 0.0], [0.0, 0.0]), sim_control([0.0, 0.0], [0.0, 0.0])
    a, b = act.state(), act.state()
    control.joint_target_q.fill_(1.0)
    act.step(state, control, a, b, dt=0.01)
    assert a.delay_state.num_pushes.numpy().tolist() == [0, 0] and b.delay_state.num_pushes.numpy().tolist() == [1, 1]
    # stepping again from the same (unchanged) current state gives the same result: a pure function of it
    control.joint_target_q.fill_(2.0)
    for _ in range(2):
        control.joint_f.zero_()
        act.step(state, control, a, b, dt=0.01)
        assert control.joint_f.numpy().tolist() == [2.0, 2.0]  # empty history: the current command
    for target in (3.0, 4.0, 5.0):
        control.joint_target_q.fill_(target)
        control.joint_f.zero_()
        act.step(state, control, b, a, dt=0.01)
        a, b = b, a
    assert control.joint_f.numpy().tolist() == [3.0, 3.0]  # pushed 2, 3, 4; commanding 5: two steps earlier
    # restart the delay of DOF 1 only (an environment reset): its history is forgotten
    b_pushes = b.delay_state.num_pushes.numpy()
    b_pushes[1] = 0
    b.delay_state.num_pushes.assign(b_pushes)
    control.joint_target_q.fill_(6.0)
    control.joint_f.zero_()
    act.step(state, control, b, a, dt=0.01)
    assert control.joint_f.numpy().tolist() == [4.0, 6.0]


def test_bad_delay_arguments():
    with pytest.raises(ValueError, match=r"Delay: delay_steps\[1\] = 4 exceeds max_delay = 3"):
        Delay([1, 4], max_delay=3)
    with pytest.raises(ValueError, match=r"Delay: delay_steps\[0\] = -1 is negative"):
        Delay([-1, 0], max_delay=3)
    with pytest.raises(ValueError, match="Delay: max_delay"):
        Delay([0], max_delay=-1)
    with pytest.raises(ValueError, match="Delay: max_delay"):
        Delay([0], max_delay=1.5)
    with pytest.raises(ValueError, match="integers"):
        Delay(np.array([0.5]), max_delay=1)
    with pytest.raises(ValueError, match="Delay: delay_steps must be an integer >= 0"):
        Delay.resolve_arguments({"delay_steps": -2})
    with pytest.raises(ValueError, match=r"Actuator\(ControllerPD, 2 DOFs\): Delay.delay_steps has 1 entries"):
        Actuator([0, 1], controller=ControllerPD(kp=[1.0, 1.0], kd=[0.0, 0.0]), delay=Delay([1], max_delay=1))
    delay = Delay([1], max_delay=1)
    s = delay.state(1, "cpu")
    with pytest.raises(ValueError, match="two different State objects"):
        delay.update_state(f32([0.0]), f32([0.0]), None, u32([0]), u32([0]), s, s)

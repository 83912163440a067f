"""Actuator: duck-typed inputs, scatter-add, computed output, checks and errors, double-buffered state
across replicated worlds, gradients."""

from __future__ import annotations

import types

import numpy as np
import pytest
import warp as wp
from _actuator_helpers import f32, sim_control, sim_state, step_effort, u32

import armillary as newton
from armillary.actuators import (
    Actuator,
    ClampingMaxEffort,
    Controller,
    ControllerPD,
    ControllerPID,
    Delay,
)


def _pd(n=1, kp=10.0, kd=0.0):
    return ControllerPD(kp=f32([kp] * n), kd=f32([kd] * n))


def test_scatter_add_accumulates_into_the_output_and_computed_output_holds_the_raw_effort():
    act = Actuator(u32([2, 0]), controller=_pd(2), clamping=[ClampingMaxEffort(max_effort=f32([1.0, 1.0]))],
                   control_computed_output_attr="joint_f_raw")
    state = sim_state([0.0, 0.0, 0.0], [0.0, 0.0, 0.0])
    control = sim_control([-0.05, 0.0, 1.0], [0.0, 0.0, 0.0])
    control.joint_f.assign(np.array([5.0, 5.0, 5.0], np.float32))  # another source's effort: kept, added to
    control.joint_f_raw = f32([7.0, 7.0, 7.0])
    act.step(state, control)
    np.testing.assert_allclose(control.joint_f.numpy(), [4.5, 5.0, 6.0])  # clamped effort added at DOFs 2, 0
    np.testing.assert_allclose(control.joint_f_raw.numpy(), [6.5, 7.0, 17.0])  # raw controller effort added
    act.step(state, control)  # the caller zeroes the output: without it the effort accumulates
    np.testing.assert_allclose(control.joint_f.numpy(), [4.0, 5.0, 7.0])


def test_duck_typed_objects_custom_attribute_names_and_missing_attributes():
    act = Actuator([0], controller=_pd(), state_pos_attr="q", state_vel_attr="v", control_target_pos_attr="goal",
                   control_target_vel_attr=None, control_feedforward_attr=None, control_output_attr="tau")
    state = types.SimpleNamespace(q=f32([0.25]), v=f32([3.0]))
    control = types.SimpleNamespace(goal=f32([1.0]), tau=f32([0.0]))
    act.step(state, control)
    assert control.tau.numpy()[0] == pytest.approx(7.5)
    assert set(vars(act.sim_state())) == {"q", "v"} and set(vars(act.sim_control())) == {"goal", "tau"}
    default = Actuator([0], controller=_pd())
    no_velocity_target = types.SimpleNamespace(joint_target_q=f32([0.0]), joint_f=f32([0.0]))
    with pytest.raises(AttributeError,
                       match=r"Actuator\(ControllerPD, 1 DOFs\): sim_control has no attribute 'joint_target_qd'"):
        default.step(sim_state([0.0], [0.0]), no_velocity_target)
    with pytest.raises(ValueError, match="sim_state.joint_q is None"):
        default.step(types.SimpleNamespace(joint_q=None, joint_qd=f32([0.0])), sim_control([0.0], [0.0]))
    double_output = types.SimpleNamespace(joint_target_q=f32([0.0]), joint_target_qd=f32([0.0]),
                                          joint_f=wp.zeros(1, dtype=wp.float64))
    with pytest.raises(ValueError, match="joint_f must be a 1-D wp.float32 array"):
        default.step(sim_state([0.0], [0.0]), double_output)


def test_index_ranges_are_checked_once_per_array_shape(monkeypatch):
    act = Actuator(u32([0, 3]), controller=_pd(2), pos_indices=u32([1, 4]), label="arm")
    calls = []
    original = act._check_arrays
    monkeypatch.setattr(act, "_check_arrays", lambda arrays: (calls.append(1), original(arrays)))
    state, control = sim_state(np.zeros(5), np.zeros(4)), sim_control(np.zeros(5), np.zeros(4))
    for _ in range(3):
        act.step(state, control)
    state_b = sim_state(np.ones(5), np.ones(4))  # other arrays, same shapes: no new check
    act.step(state_b, control)
    assert len(calls) == 1
    with pytest.raises(ValueError,
                       match=r"arm: pos_indices\[1\] = 4 is out of range for sim_state.joint_q \(4 entries\)"):
        act.step(sim_state(np.zeros(4), np.zeros(4)), control)
    with pytest.raises(ValueError, match=r"arm: indices\[1\] = 3 is out of range for sim_state.joint_qd \(3 entries\)"):
        act.step(sim_state(np.zeros(5), np.zeros(3)), control)
    with pytest.raises(ValueError, match=r"arm: effort_indices\[1\] = 3 is out of range for sim_control.joint_f"):
        act.step(state, sim_control(np.zeros(5), np.zeros(4), n_out=2))


def test_constructor_errors_name_the_actuator_and_the_parameter():
    with pytest.raises(ValueError, match="controller= or drive="):
        Actuator([0], controller=_pd(), drive=_pd())
    with pytest.raises(ValueError, match="a controller is required"):
        Actuator([0])
    with pytest.raises(ValueError, match=r"Actuator\(ControllerPD, 2 DOFs\): ControllerPD.kp has 1 entries"):
        Actuator([0, 1], controller=_pd(1))
    with pytest.raises(ValueError, match="pos_indices has 1 entries but indices has 2"):
        Actuator([0, 1], controller=_pd(2), pos_indices=[0])
    with pytest.raises(ValueError, match=r"indices\[1\] = -1 is negative"):
        Actuator([0, -1], controller=_pd(2))
    with pytest.raises(ValueError, match="indices is empty"):
        Actuator([], controller=_pd(0))
    act = Actuator([0], drive=_pd())
    assert act.drive is act.controller


def test_stateful_actuator_needs_two_different_states():
    act = Actuator([0], controller=_pd(), delay=Delay([1], max_delay=1), label="knee")
    assert act.is_stateful() and act.is_graphable()
    state, control = sim_state([0.0], [0.0]), sim_control([1.0], [0.0])
    with pytest.raises(ValueError, match="knee is stateful.*actuator.state\\(\\)"):
        act.step(state, control)
    s = act.state()
    with pytest.raises(ValueError, match="knee: current_act_state and next_act_state are the same object"):
        act.step(state, control, s, s)
    stateless = Actuator([0], controller=_pd())
    assert not stateless.is_stateful() and stateless.state() is None and stateless.is_graphable()
    pid = Actuator([0], controller=ControllerPID(kp=[1.0], ki=[1.0], kd=[0.0], integral_max=[1.0]))
    st = pid.state()
    assert st.delay_state is None and st.controller_state.integral.shape == (1,)
    assert st.drive_state is st.controller_state


def _pid_delay_reference(q, qd, targets, kp, ki, kd, imax, delays, dt):
    """numpy PID on delayed position targets (per DOF), velocity target 0."""
    steps, n = targets.shape
    integral = np.zeros(n)
    out = []
    for k in range(steps):
        tq = np.array([targets[max(k - delays[i], 0), i] for i in range(n)])
        e = tq - q
        integral = np.clip(integral + e * dt, -imax, imax)
        out.append(kp * e + ki * integral - kd * qd)
    return np.asarray(out)


def test_stateful_actuator_double_buffered_across_replicated_worlds():
    """A robot (ball joint + two revolute joints) replicated into 4 worlds, PID + per-DOF delay on the
    revolute DOFs: one vectorised actuator, each world's DOFs follow their own targets and history."""
    robot = newton.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    b0 = robot.add_link(mass=1.0)
    j0 = robot.add_joint_ball(parent=-1, child=b0)
    b1 = robot.add_link(mass=1.0)
    j1 = robot.add_joint_revolute(parent=b0, child=b1, axis=newton.Axis.Y)
    b2 = robot.add_link(mass=1.0)
    j2 = robot.add_joint_revolute(parent=b1, child=b2, axis=newton.Axis.Y)
    robot.add_articulation([j0, j1, j2])
    kp, ki, kd, imax = 20.0, 5.0, 0.5, 0.05
    for j, delay in ((j1, 1), (j2, 3)):
        robot.add_actuator(ControllerPID, index=robot.joint_qd_start[j], delay_steps=delay, kp=kp, ki=ki, kd=kd,
                           integral_max=imax)
    worlds = 4
    builder = newton.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    builder.replicate(robot, worlds)
    model = builder.finalize()
    assert len(model.actuators) == 1
    act = model.actuators[0]
    # DOFs 3, 4 of each 5-DOF world; coordinates 4, 5 of each 6-coordinate world (the ball joint has 4)
    np.testing.assert_array_equal(act.indices.numpy(), [w * 5 + k for w in range(worlds) for k in (3, 4)])
    np.testing.assert_array_equal(act.pos_indices.numpy(), [w * 6 + k for w in range(worlds) for k in (4, 5)])
    np.testing.assert_array_equal(act.delay.delay_steps.numpy(), [1, 3] * worlds)

    rng = np.random.default_rng(0)
    state, control = model.state(), model.control()
    q = rng.normal(size=model.joint_coord_count).astype(np.float32)
    qd = rng.normal(size=model.joint_dof_count).astype(np.float32)
    state.joint_q.assign(q)
    state.joint_qd.assign(qd)
    dofs, coords = act.indices.numpy(), act.pos_indices.numpy()
    steps, dt = 8, 0.02
    targets = rng.normal(size=(steps, len(dofs)))
    delays = np.array([1, 3] * worlds)
    expected = _pid_delay_reference(q[coords], qd[dofs], targets, kp, ki, kd, imax, delays, dt)

    sa, sb = act.state(), act.state()
    for k in range(steps):
        tq = control.joint_target_q.numpy()
        tq[coords] = targets[k]
        control.joint_target_q.assign(tq)
        before = sa.controller_state.integral.numpy().copy(), sa.delay_state.buffer_pos.numpy().copy()
        control.joint_f.zero_()
        act.step(state, control, sa, sb, dt=dt)
        # the current state is only read; the next one is written
        np.testing.assert_array_equal(sa.controller_state.integral.numpy(), before[0])
        np.testing.assert_array_equal(sa.delay_state.buffer_pos.numpy(), before[1])
        sa, sb = sb, sa
        f = control.joint_f.numpy()
        np.testing.assert_allclose(f[dofs], expected[k], rtol=1e-4, atol=1e-4)
        assert np.count_nonzero(np.delete(f, dofs)) == 0


def test_gradients_flow_through_the_actuator():
    act = Actuator([0, 1], controller=ControllerPD(kp=f32([3.0, 5.0]), kd=f32([0.0, 0.0])),
                   clamping=[ClampingMaxEffort(max_effort=f32([100.0, 100.0]))], requires_grad=True)
    q = wp.array([0.1, 0.2], dtype=wp.float32, requires_grad=True)
    state = types.SimpleNamespace(joint_q=q, joint_qd=wp.zeros(2, dtype=wp.float32, requires_grad=True))
    control = types.SimpleNamespace(joint_target_q=wp.zeros(2, dtype=wp.float32, requires_grad=True),
                                    joint_target_qd=wp.zeros(2, dtype=wp.float32, requires_grad=True),
                                    joint_f=wp.zeros(2, dtype=wp.float32, requires_grad=True))
    tape = wp.Tape()
    with tape:
        act.step(state, control)
    tape.backward(grads={control.joint_f: wp.array([1.0, 1.0], dtype=wp.float32)})
    np.testing.assert_allclose(q.grad.numpy(), [-3.0, -5.0])  # d effort / d q = -kp


class _Sum(Controller):
    """A stateful custom controller with the reference engine's protocol (compute, then update_state):
    effort = running count of steps."""

    class State(Controller.State):
        def __init__(self, count):
            self.count = count

    def __init__(self, n):
        self.n = n
        self.steps = 0

    @classmethod
    def resolve_arguments(cls, args):
        return dict(args)

    def is_stateful(self):
        return True

    def state(self, num_actuators, device):
        return _Sum.State(wp.zeros(num_actuators, dtype=wp.float32, device=device))

    def compute(self, positions, velocities, target_pos, target_vel, feedforward, pos_indices, vel_indices,
                target_pos_indices, target_vel_indices, forces, state, dt, device=None):
        wp.copy(forces, state.count)

    def update_state(self, current_state, next_state):
        next_state.count.assign(current_state.count.numpy() + 1.0)


def test_custom_controller_without_next_state_gets_update_state():
    act = Actuator([0, 1], controller=_Sum(2))
    state, control = sim_state([0.0, 0.0], [0.0, 0.0]), sim_control([0.0, 0.0], [0.0, 0.0])
    states = [act.state(), act.state()]
    got = [step_effort(act, state, control, states)[0] for _ in range(4)]
    assert got == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.skipif(not wp.is_cuda_available(), reason="CUDA graph capture needs a CUDA device")
def test_a_step_pair_captured_in_a_cuda_graph_replays_like_eager_steps():
    from armillary.actuators import ClampingDCMotor

    device = "cuda:0"
    n = 6

    def make():
        with wp.ScopedDevice(device):
            return Actuator(
                wp.array(np.arange(n), dtype=wp.uint32),
                controller=ControllerPID(kp=np.full(n, 5.0), ki=np.full(n, 2.0), kd=np.full(n, 0.1),
                                         integral_max=np.full(n, 0.3)),
                delay=Delay(wp.array([0, 1, 2, 3, 1, 0], dtype=wp.int32), max_delay=3),
                clamping=[ClampingDCMotor(np.full(n, 4.0), np.full(n, 2.0), np.full(n, 3.0))],
            )

    def objects():
        rng = np.random.default_rng(1)
        with wp.ScopedDevice(device):
            state = types.SimpleNamespace(joint_q=wp.array(rng.normal(size=n), dtype=wp.float32),
                                          joint_qd=wp.array(rng.normal(size=n), dtype=wp.float32))
            control = types.SimpleNamespace(joint_target_q=wp.array(rng.normal(size=n), dtype=wp.float32),
                                            joint_target_qd=wp.zeros(n, dtype=wp.float32),
                                            joint_act=wp.array(rng.normal(size=n), dtype=wp.float32),
                                            joint_f=wp.zeros(n, dtype=wp.float32))
        return state, control

    eager, graphed = make(), make()
    s_e, c_e = objects()
    s_g, c_g = objects()
    a_e, b_e = eager.state(), eager.state()
    a_g, b_g = graphed.state(), graphed.state()
    graphed.step(s_g, c_g, a_g, b_g, dt=0.01)  # warm-up (kernel loading, first-shape checks) ...
    graphed.step(s_g, c_g, b_g, a_g, dt=0.01)
    eager.step(s_e, c_e, a_e, b_e, dt=0.01)  # ... mirrored on the eager actuator
    eager.step(s_e, c_e, b_e, a_e, dt=0.01)
    with wp.ScopedCapture(device=device) as capture:
        c_g.joint_f.zero_()
        graphed.step(s_g, c_g, a_g, b_g, dt=0.01)
        graphed.step(s_g, c_g, b_g, a_g, dt=0.01)
    for _ in range(5):
        wp.capture_launch(capture.graph)
        c_e.joint_f.zero_()
        eager.step(s_e, c_e, a_e, b_e, dt=0.01)
        eager.step(s_e, c_e, b_e, a_e, dt=0.01)
        np.testing.assert_allclose(c_g.joint_f.numpy(), c_e.joint_f.numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(a_g.controller_state.integral.numpy(), a_e.controller_state.integral.numpy())

"""Small helpers shared by the actuator tests: Warp arrays and duck-typed state / control objects."""

from __future__ import annotations

import types

import numpy as np
import warp as wp


def f32(values) -> wp.array:
    return wp.array(np.asarray(values, dtype=np.float32).reshape(-1), dtype=wp.float32)


def u32(values) -> wp.array:
    return wp.array(np.asarray(values, dtype=np.uint32).reshape(-1), dtype=wp.uint32)


def sim_state(q, qd) -> types.SimpleNamespace:
    return types.SimpleNamespace(joint_q=f32(q), joint_qd=f32(qd))


def sim_control(target_q, target_qd, act=None, n_out=None) -> types.SimpleNamespace:
    n_out = len(np.atleast_1d(target_qd)) if n_out is None else n_out
    return types.SimpleNamespace(
        joint_target_q=f32(target_q),
        joint_target_qd=f32(target_qd),
        joint_act=None if act is None else f32(act),
        joint_f=wp.zeros(n_out, dtype=wp.float32),
    )


def step_effort(actuator, state, control, states=None, dt=0.01) -> np.ndarray:
    """Zero ``joint_f``, step once, return ``joint_f`` (swaps ``states`` in place when given)."""
    control.joint_f.zero_()
    if states is None:
        actuator.step(state, control, dt=dt)
    else:
        actuator.step(state, control, states[0], states[1], dt=dt)
        states.reverse()
    return control.joint_f.numpy().copy()


def revolute_builder(newton, inertia: float = 0.5):
    """One link on a revolute joint about Z, no gravity: ``(builder, dof_index)``."""
    b = newton.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    link = b.add_link(mass=1.0, inertia=((inertia, 0.0, 0.0), (0.0, inertia, 0.0), (0.0, 0.0, inertia)))
    joint = b.add_joint_revolute(parent=-1, child=link, axis=newton.Axis.Z)
    b.add_articulation([joint])
    return b, b.joint_qd_start[joint]

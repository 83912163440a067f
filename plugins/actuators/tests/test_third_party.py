"""A third-party component library: a test plugin registers its own controller and clamping through
the ``armillary_register_actuators`` hook; ``armillary.actuators.<Name>`` and ``add_actuator`` find them."""

from __future__ import annotations

import types
from typing import Any

import numpy as np
import pytest
import warp as wp

import armillary
import armillary as newton
from armillary_actuators import Clamping, Controller


@wp.kernel
def _bang_bang_kernel(
    positions: wp.array(dtype=wp.float32),
    target_pos: wp.array(dtype=wp.float32),
    pos_indices: wp.array(dtype=wp.uint32),
    target_pos_indices: wp.array(dtype=wp.uint32),
    effort: wp.array(dtype=wp.float32),
    forces: wp.array(dtype=wp.float32),
):
    i = wp.tid()
    e = target_pos[int(target_pos_indices[i])] - positions[int(pos_indices[i])]
    forces[i] = wp.sign(e) * effort[i]


@wp.kernel
def _scale_kernel(src: wp.array(dtype=wp.float32), factor: float, dst: wp.array(dtype=wp.float32)):
    i = wp.tid()
    dst[i] = src[i] * factor


class ControllerBangBang(Controller):
    """effort = sign(target_pos - q) * effort (per DOF)."""

    def __init__(self, effort: wp.array):
        self.effort = effort

    @classmethod
    def resolve_arguments(cls, args: dict[str, Any]) -> dict[str, Any]:
        unknown = set(args) - {"effort"}
        if unknown:
            raise ValueError(f"ControllerBangBang: unknown argument {sorted(unknown)[0]!r}")
        return {"effort": float(args.get("effort", 1.0))}

    def compute(self, positions, velocities, target_pos, target_vel, feedforward, pos_indices, vel_indices,
                target_pos_indices, target_vel_indices, forces, state, dt, device=None):
        wp.launch(_bang_bang_kernel, dim=forces.shape[0],
                  inputs=[positions, target_pos, pos_indices, target_pos_indices, self.effort], outputs=[forces],
                  device=device)


class ClampingGearbox(Clamping):
    """Scales the effort by a shared (non-number-per-DOF) ratio given as a string, e.g. "1:2"."""

    def __init__(self, ratio: str):
        a, b = (float(x) for x in ratio.split(":"))
        self.ratio = ratio
        self.factor = b / a

    @classmethod
    def resolve_arguments(cls, args):
        return {"ratio": str(args["ratio"])}

    def modify_forces(self, src_forces, dst_forces, positions, velocities, pos_indices, vel_indices, device=None):
        wp.launch(_scale_kernel, dim=src_forces.shape[0], inputs=[src_forces, self.factor], outputs=[dst_forces],
                  device=device)


def _plugin():
    def armillary_register_actuators(registry):
        registry.add("ControllerBangBang", ControllerBangBang, kind="controller", summary="bang-bang position control")
        registry.add("ClampingGearbox", ClampingGearbox,
                     kind="clamping", summary="scales effort by a gear ratio")

    ns = types.SimpleNamespace()
    ns.armillary_register_actuators = armillary.hookimpl(armillary_register_actuators)
    return ns


@pytest.fixture
def third_party(armillary_registry):
    """An isolated registry with this repository's actuators plugin and the test's third-party plugin."""
    import armillary_actuators.plugin

    armillary_registry.register(armillary_actuators.plugin, name="actuators")
    record = armillary_registry.register(_plugin(), name="my_actuators", distribution="my-actuators", version="0.3")
    assert record.status == "loaded"
    return armillary_registry


def test_third_party_components_resolve_and_build(third_party):
    assert armillary.actuators.ControllerBangBang is ControllerBangBang
    assert armillary.actuators.ClampingGearbox is ClampingGearbox
    assert third_party.actuators.get("ControllerBangBang").meta["component_kind"] == "controller"
    assert "ControllerBangBang" in dir(armillary.actuators) and "ControllerPD" in dir(armillary.actuators)

    b = newton.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    parent, joints = -1, []
    for _ in range(3):
        link = b.add_link(mass=1.0)
        joints.append(b.add_joint_revolute(parent=parent, child=link, axis=newton.Axis.Y))
        parent = link
    b.add_articulation(joints)
    b.add_actuator(armillary.actuators.ControllerBangBang, index=0, effort=2.0)
    b.add_actuator("ControllerBangBang", index=1, effort=3.0, delay_steps=1)
    b.add_actuator(ControllerBangBang, index=2, effort=4.0, clamping=[("ClampingGearbox", {"ratio": "1:2"})])
    with pytest.raises(ValueError, match="ControllerBangBang: unknown argument 'gain'"):
        b.add_actuator(ControllerBangBang, index=0, gain=1.0)
    model = b.finalize()
    assert [type(a.controller).__name__ for a in model.actuators] == ["ControllerBangBang"] * 3

    state, control = model.state(), model.control()
    state.joint_q.assign(np.array([0.5, 0.5, 0.5], np.float32))
    control.joint_target_q.assign(np.array([1.0, 0.0, 0.0], np.float32))
    states = {id(a): [a.state(), a.state()] for a in model.actuators}
    for a in model.actuators:
        s = states[id(a)]
        a.step(state, control, s[0], s[1], dt=0.01)
    np.testing.assert_allclose(control.joint_f.numpy(), [2.0, -3.0, -8.0])  # gear ratio 1:2 doubles DOF 2

"""Core side of ``ModelBuilder.add_actuator``: entries, merging offsets and the hand-off to the
registered ``Actuator`` component at finalize, with fake components (no actuator plugin)."""

from __future__ import annotations

import types

import pytest

import armillary
from armillary.sim.builder_actuators import ActuatorEntry


class FakeController:
    @classmethod
    def resolve_arguments(cls, args):
        if "gain" not in args:
            raise ValueError("FakeController: missing required argument 'gain'")
        return {"gain": float(args["gain"]), "mode": args.get("mode", "a")}


class FakeClamp:
    @classmethod
    def resolve_arguments(cls, args):
        return {"limit": float(args.get("limit", 1.0))}


class FakeActuator:
    calls: list = []

    @classmethod
    def from_entries(cls, entries, device=None, requires_grad=False):
        cls.calls.append((list(entries), str(device), requires_grad))
        return ["actuator-for-%d-entries" % len(entries)]


def _register(registry):
    def hook(registry):
        registry.add("Actuator", FakeActuator, kind="actuator", summary="fake vectorised actuator")
        registry.add("FakeController", FakeController, kind="controller", summary="fake control law")

    ns = types.SimpleNamespace(armillary_register_actuators=armillary.hookimpl(hook))
    registry.register(ns, name="fake_actuators")


def _robot():
    b = armillary.ModelBuilder()
    root = b.add_link(mass=1.0)
    j0 = b.add_joint_free(parent=-1, child=root)
    link = b.add_link(mass=1.0)
    j1 = b.add_joint_revolute(parent=root, child=link)
    b.add_articulation([j0, j1])
    return b


def test_entries_record_resolved_arguments_and_default_coordinate_index(registry):
    _register(registry)
    b = _robot()  # FREE joint: 7 coordinates / 6 DOFs, then a revolute joint (DOF 6, coordinate 7)
    b.add_actuator(FakeController, index=6, gain=2, clamping=[(FakeClamp, {"limit": 3})], delay_steps=2)
    b.add_actuator("FakeController", index=2, gain=1.0)
    assert b.actuator_entries == [
        ActuatorEntry(FakeController, 6, 7, 2, [(FakeClamp, {"limit": 3.0})], {"gain": 2.0, "mode": "a"}),
        ActuatorEntry(FakeController, 2, 2, None, [], {"gain": 1.0, "mode": "a"}),  # FREE DOF: pos_index = index
    ]
    with pytest.raises(ValueError, match=r"add_actuator\(index=6\): FakeController: missing required argument 'gain'"):
        b.add_actuator(FakeController, index=6)
    with pytest.raises(ValueError, match="add_actuator: index=7 is out of range"):
        b.add_actuator(FakeController, index=7, gain=1.0)


def test_merging_shifts_entries_and_finalize_hands_them_to_the_actuator_component(registry):
    _register(registry)
    robot = _robot()
    robot.add_actuator(FakeController, index=6, gain=1.0)
    b = armillary.ModelBuilder()
    b.replicate(robot, 2)
    b.add_builder(robot)
    assert [(e.index, e.pos_index) for e in b.actuator_entries] == [(6, 7), (13, 15), (20, 23)]
    FakeActuator.calls.clear()
    model = b.finalize(requires_grad=True)
    assert model.actuators == ["actuator-for-3-entries"]
    entries, device, grad = FakeActuator.calls[0]
    assert [e.index for e in entries] == [6, 13, 20] and device == "cpu" and grad is True


def test_no_entries_no_actuator_component_needed(registry):
    # nothing registered: finalize must not ask the registry for "Actuator"
    model = _robot().finalize()
    assert model.actuators == []
    b = _robot()
    b.add_actuator(FakeController, index=6, gain=1.0)  # a class needs no registry at build time
    with pytest.raises(ImportError, match="pip install armillary-actuators"):
        b.finalize()  # but finalize needs the plugin's Actuator: the install hint names it

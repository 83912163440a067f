"""ModelBuilder.add_actuator: entries, validation at build time, grouping at finalize across
replicate / add_builder / add_world, default coordinate indices."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import armillary as newton
from armillary.actuators import (
    ClampingDCMotor,
    ClampingMaxEffort,
    ClampingPositionBased,
    ControllerPD,
    ControllerPID,
    DrivePD,
)


def _chain(joint_count=3, ball_first=False):
    b = newton.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    parent, joints = -1, []
    for k in range(joint_count):
        link = b.add_link(mass=1.0)
        if k == 0 and ball_first:
            joints.append(b.add_joint_ball(parent=parent, child=link))
        else:
            joints.append(b.add_joint_revolute(parent=parent, child=link, axis=newton.Axis.Y))
        parent = link
    b.add_articulation(joints)
    return b, joints


def _summary(model):
    return [(type(a.controller).__name__, a.indices.numpy().tolist(), a.pos_indices.numpy().tolist(),
             None if a.delay is None else a.delay.delay_steps.numpy().tolist(), [type(c).__name__ for c in a.clamping])
            for a in model.actuators]


def test_compatible_entries_group_into_one_actuator_per_kind_in_first_appearance_order():
    b, _ = _chain(6)
    table = {"lookup_positions": (0.0, 1.0), "lookup_efforts": (1.0, 2.0)}
    b.add_actuator(ControllerPD, index=0, kp=1.0, kd=0.1)
    b.add_actuator(ControllerPD, index=1, kp=2.0, delay_steps=2)
    b.add_actuator(ControllerPD, index=2, kp=3.0, clamping=[(ClampingMaxEffort, {"max_effort": 3.0})])
    b.add_actuator(ControllerPD, index=3, kp=4.0, delay_steps=0)
    b.add_actuator(ControllerPD, index=4, kp=5.0, clamping=[(ClampingMaxEffort, {"max_effort": 4.0})])
    b.add_actuator(ControllerPD, index=5, kp=6.0)
    b.add_actuator(ControllerPD, index=0, kp=7.0, clamping=[(ClampingPositionBased, table)])
    other_table = dict(table, lookup_efforts=(1.0, 3.0))
    b.add_actuator(ControllerPD, index=1, kp=8.0, clamping=[(ClampingPositionBased, other_table)])
    b.add_actuator(ControllerPD, index=2, kp=9.0, clamping=[(ClampingPositionBased, table)])
    b.add_actuator(ControllerPID, index=3, kp=1.0, ki=1.0)
    motor = {"saturation_effort": 1.0, "velocity_limit": 1.0}
    b.add_actuator(ControllerPD, index=4, kp=1.0,
                   clamping=[(ClampingMaxEffort, {"max_effort": 1.0}), (ClampingDCMotor, motor)])
    model = b.finalize()
    assert _summary(model) == [
        ("ControllerPD", [0, 5], [0, 5], None, []),
        ("ControllerPD", [1, 3], [1, 3], [2, 0], []),  # delays may differ within a group
        ("ControllerPD", [2, 4], [2, 4], None, ["ClampingMaxEffort"]),
        ("ControllerPD", [0, 2], [0, 2], None, ["ClampingPositionBased"]),  # equal tables share
        ("ControllerPD", [1], [1], None, ["ClampingPositionBased"]),
        ("ControllerPID", [3], [3], None, []),
        ("ControllerPD", [4], [4], None, ["ClampingMaxEffort", "ClampingDCMotor"]),
    ]
    a = model.actuators
    np.testing.assert_allclose(a[0].controller.kp.numpy(), [1.0, 6.0])
    np.testing.assert_allclose(a[0].controller.kd.numpy(), [0.1, 0.0])
    assert a[1].delay.max_delay == 2
    np.testing.assert_allclose(a[2].clamping[0].max_effort.numpy(), [3.0, 4.0])
    assert a[4].clamping[0].lookup_efforts == (1.0, 3.0)
    assert "model.actuators[1]" in a[1].label


def test_replicate_and_add_builder_shift_dof_and_coordinate_indices():
    robot, joints = _chain(3, ball_first=True)  # ball: 4 coordinates / 3 DOFs, then two revolute joints
    robot.add_actuator(ControllerPD, index=robot.joint_qd_start[joints[1]], kp=1.0, delay_steps=1)
    robot.add_actuator(ControllerPD, index=robot.joint_qd_start[joints[2]], kp=2.0, delay_steps=2)
    robot.add_actuator(ControllerPD, index=1, kp=3.0)  # a ball DOF: pos_index defaults to index
    assert [(e.index, e.pos_index) for e in robot.actuator_entries] == [(3, 4), (4, 5), (1, 1)]

    b = newton.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    b.replicate(robot, 2)
    b.add_builder(robot)  # a global copy
    b.add_world(robot)
    model = b.finalize()
    assert model.world_count == 3
    offsets = [(0, 0), (5, 6), (10, 12), (15, 18)]  # (DOF, coordinate) offset of each copy
    assert _summary(model) == [
        ("ControllerPD", [d + k for d, _ in offsets for k in (3, 4)], [c + k for _, c in offsets for k in (4, 5)],
         [1, 2] * 4, []),
        ("ControllerPD", [d + 1 for d, _ in offsets], [c + 1 for _, c in offsets], None, []),
    ]
    np.testing.assert_allclose(model.actuators[0].controller.kp.numpy(), [1.0, 2.0] * 4)
    assert robot.actuator_entries[0].index == 3  # the source builder is unchanged


def test_explicit_pos_index_names_and_reference_aliases():
    b, _ = _chain(2)
    b.add_actuator("ControllerPD", index=0, pos_index=1, kp=1.0, clamping=[("ClampingMaxEffort", {"max_effort": 2.0})])
    b.add_actuator(drive_class=DrivePD, index=1, kp=2.0, clamping=[(ClampingMaxEffort, {"max_effort": 2.0})])
    model = b.finalize(requires_grad=True)
    assert _summary(model) == [("ControllerPD", [0, 1], [1, 1], None, ["ClampingMaxEffort"])]
    assert model.actuators[0].requires_grad and model.actuators[0]._computed.requires_grad


def test_add_actuator_validates_its_input_at_build_time(tmp_path):
    b, _ = _chain(2)
    cases = [
        (dict(controller_class=ControllerPD, index=2, kp=1.0),
         r"add_actuator: index=2 is out of range; allowed values: 0..1"),
        (dict(controller_class=ControllerPD, kp=1.0), "index .* is required"),
        (dict(controller_class=ControllerPD, index=0, pos_index=5, kp=1.0), "pos_index=5 is out of range"),
        (dict(controller_class=ControllerPD, index=0, kq=1.0),
         r"add_actuator\(index=0\): ControllerPD: unknown argument 'kq'"),
        (dict(controller_class=ControllerPD, index=0), "ControllerPD: missing required argument 'kp'"),
        (dict(controller_class=ControllerPD, index=0, kp=-1.0), "ControllerPD: kp must be >= 0"),
        (dict(controller_class=ControllerPD, index=0, kp=1.0, delay_steps=-1), "delay_steps must be an integer >= 0"),
        (dict(controller_class=ControllerPD, index=0, kp=1.0, delay_steps=1.5), "delay_steps must be an integer >= 0"),
        (dict(controller_class=ControllerPD, index=0, kp=1.0, clamping=[ClampingMaxEffort]),
         r"clamping\[0\]: ClampingMaxEffort: missing required argument 'max_effort'"),
        (dict(controller_class=ControllerPD, index=0, kp=1.0, clamping=[(ClampingMaxEffort, 3.0)]),
         r"clamping\[0\] arguments must be a dict"),
        (dict(controller_class=ControllerPD, index=0, kp=1.0, clamping=[(ClampingMaxEffort, {"max_effort": -1.0})]),
         "max_effort must be >= 0"),
        (dict(controller_class=ControllerPD, index=0, kp=1.0,
              clamping=[(ClampingPositionBased, {"lookup_table_path": str(tmp_path / "none.txt")})]),
         "cannot read lookup table"),
        (dict(controller_class="ControllerNope", index=0, kp=1.0),
         "controller_class: unknown actuator component 'ControllerNope'"),
        (dict(controller_class=object, index=0), "must be an actuator component class"),
        (dict(controller_class=ControllerPD, drive_class=DrivePD, index=0, kp=1.0), "not both"),
        (dict(index=0, kp=1.0), "a controller class is required"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            b.add_actuator(**kwargs)
    assert b.actuator_entries == []  # nothing recorded by a failing call


def test_a_model_without_actuators_does_not_load_the_plugin():
    code = (
        "import sys, armillary as newton\n"
        "b = newton.ModelBuilder()\n"
        "l = b.add_link(mass=1.0)\n"
        "b.add_articulation([b.add_joint_revolute(parent=-1, child=l)])\n"
        "m = b.finalize()\n"
        "assert m.actuators == []\n"
        "loaded = [k for k in sys.modules\n"
        "          if k.startswith('armillary_actuators.') and k != 'armillary_actuators.plugin']\n"
        "print(loaded); raise SystemExit(1 if loaded else 0)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr

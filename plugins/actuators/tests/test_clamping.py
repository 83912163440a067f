"""Clampings: symmetric max effort, the DC-motor torque-speed line, position lookup tables, stacking."""

from __future__ import annotations

import numpy as np
import pytest
from _actuator_helpers import sim_control, sim_state, step_effort

from armillary.actuators import (
    Actuator,
    ClampingDCMotor,
    ClampingMaxEffort,
    ClampingPositionBased,
    ControllerPD,
)


def _constant_effort_actuator(effort: np.ndarray, clamping) -> Actuator:
    """An actuator whose controller outputs ``effort`` (kp = kd = 0, const_effort) before ``clamping``."""
    n = len(effort)
    return Actuator(list(range(n)), controller=ControllerPD(kp=np.zeros(n), kd=np.zeros(n), const_effort=effort),
                    clamping=clamping)


def test_max_effort_clamps_symmetrically():
    effort = np.array([-9.0, -2.0, 0.5, 3.0, 9.0])
    limit = np.array([4.0, 4.0, 0.1, 3.0, 10.0])
    act = _constant_effort_actuator(effort, [ClampingMaxEffort(max_effort=limit)])
    out = step_effort(act, sim_state(np.zeros(5), np.zeros(5)), sim_control(np.zeros(5), np.zeros(5)))
    np.testing.assert_allclose(out, np.clip(effort, -limit, limit))


def test_dc_motor_reproduces_its_torque_speed_line():
    sat, vlim, cap = 10.0, 10.0, 8.0
    qd = np.linspace(-vlim, vlim, 41)
    n = len(qd)
    state = sim_state(np.zeros(n), qd)
    clamp = ClampingDCMotor(saturation_effort=np.full(n, sat), velocity_limit=np.full(n, vlim),
                            max_motor_effort=np.full(n, cap))
    # a huge positive / negative command traces the upper / lower envelope
    control = sim_control(np.zeros(n), np.zeros(n))
    upper = step_effort(_constant_effort_actuator(np.full(n, 1e6), [clamp]), state, control)
    lower = step_effort(_constant_effort_actuator(np.full(n, -1e6), [clamp]), state, control)
    np.testing.assert_allclose(upper, np.minimum(sat * (1.0 - qd / vlim), cap), atol=1e-5)
    np.testing.assert_allclose(lower, np.maximum(sat * (-1.0 - qd / vlim), -cap), atol=1e-5)
    # the line: zero effort left in the direction of motion at the no-load speed, the stall effort at rest
    assert upper[-1] == pytest.approx(0.0, abs=1e-6) and lower[0] == pytest.approx(0.0, abs=1e-6)
    assert upper[n // 2] == cap and lower[n // 2] == -cap
    # inside the envelope the command passes unchanged
    small = step_effort(_constant_effort_actuator(np.full(n, 0.5), [clamp]), state, control)
    np.testing.assert_allclose(small, np.minimum(0.5, upper), atol=1e-6)


def test_dc_motor_matches_the_reference_engine_inside_the_velocity_limit():
    """saturation 10, velocity limit 10, cap 8 (newton 1.8 ClampingDCMotor, black box)."""
    qd = np.array([-10.0, -5.0, 0.0, 5.0, 10.0])
    reference = {1000.0: [8.0, 8.0, 8.0, 5.0, 0.0], -1000.0: [0.0, -5.0, -8.0, -8.0, -8.0],
                 3.0: [3.0, 3.0, 3.0, 3.0, 0.0]}
    n = len(qd)
    clamp = ClampingDCMotor(saturation_effort=np.full(n, 10.0), velocity_limit=np.full(n, 10.0),
                            max_motor_effort=np.full(n, 8.0))
    for command, expected in reference.items():
        out = step_effort(_constant_effort_actuator(np.full(n, command), [clamp]), sim_state(np.zeros(n), qd),
                          sim_control(np.zeros(n), np.zeros(n)))
        np.testing.assert_allclose(out, expected, atol=1e-5)


def test_dc_motor_beyond_the_velocity_limit_matches_the_reference_engine():
    """Beyond the no-load speed the line crosses zero and brakes (newton 1.8 ClampingDCMotor, black box)."""
    cases = [  # (saturation, cap, qd, command) -> reference output (velocity limit 10)
        (10.0, 8.0, 20.0, 3.0, -8.0),
        (10.0, 8.0, 30.0, -3.0, -8.0),
        (10.0, 8.0, -20.0, 3.0, 8.0),
        (10.0, 8.0, 15.0, 100.0, -5.0),
        (10.0, 8.0, 20.0, -100.0, -8.0),
        (10.0, np.inf, 20.0, 3.0, -10.0),
        (10.0, np.inf, 20.0, -50.0, -30.0),
        (10.0, np.inf, -25.0, -3.0, 15.0),
    ]
    sat, cap, qd, command, reference = (np.array(c) for c in zip(*cases))
    n = len(cases)
    clamp = ClampingDCMotor(saturation_effort=sat, velocity_limit=np.full(n, 10.0), max_motor_effort=cap)
    out = step_effort(_constant_effort_actuator(command, [clamp]), sim_state(np.zeros(n), qd),
                      sim_control(np.zeros(n), np.zeros(n)))
    np.testing.assert_allclose(out, reference, rtol=1e-6, atol=1e-5)


def test_dc_motor_envelope_over_a_wide_speed_range():
    """upper / lower = clamp(sat * (+-1 - qd / v_lim), -cap, cap) on both sides of the no-load speed."""
    sat, vlim, cap = 10.0, 10.0, 8.0
    qd = np.linspace(-3.0 * vlim, 3.0 * vlim, 61)
    n = len(qd)
    clamp = ClampingDCMotor(saturation_effort=np.full(n, sat), velocity_limit=np.full(n, vlim),
                            max_motor_effort=np.full(n, cap))
    state = sim_state(np.zeros(n), qd)
    control = sim_control(np.zeros(n), np.zeros(n))
    upper = np.clip(sat * (1.0 - qd / vlim), -cap, cap)
    lower = np.clip(sat * (-1.0 - qd / vlim), -cap, cap)
    for command in (1e6, -1e6, 3.0, -3.0, 0.0):
        out = step_effort(_constant_effort_actuator(np.full(n, command), [clamp]), state, control)
        np.testing.assert_allclose(out, np.clip(command, lower, upper), atol=1e-5)
    assert np.all(lower <= upper)


def test_position_based_table_interpolates_and_holds_the_ends():
    positions, efforts = (-1.0, 0.0, 0.5, 1.0), (1.0, 3.0, 3.5, 2.0)
    q = np.array([-2.0, -1.0, -0.5, 0.0, 0.25, 0.5, 0.75, 1.0, 2.0])
    n = len(q)
    clamp = ClampingPositionBased(lookup_positions=positions, lookup_efforts=efforts)
    for command in (100.0, -100.0, 1.5):
        out = step_effort(_constant_effort_actuator(np.full(n, command), [clamp]), sim_state(q, np.zeros(n)),
                          sim_control(np.zeros(n), np.zeros(n)))
        limit = np.interp(q, positions, efforts)  # numpy holds the end values outside the table too
        np.testing.assert_allclose(out, np.clip(command, -limit, limit), atol=1e-6)
    # the reference engine's numbers for table (-1, 0, 1) -> (1, 3, 2) and a command of 100 (newton 1.8, black box)
    q2 = np.array([-2, -1, -0.5, 0, 0.25, 0.5, 1, 2], dtype=float)
    clamp2 = ClampingPositionBased(lookup_positions=(-1.0, 0.0, 1.0), lookup_efforts=(1.0, 3.0, 2.0))
    out = step_effort(_constant_effort_actuator(np.full(8, 100.0), [clamp2]), sim_state(q2, np.zeros(8)),
                      sim_control(np.zeros(8), np.zeros(8)))
    np.testing.assert_allclose(out, [1.0, 1.0, 2.0, 3.0, 2.75, 2.5, 2.0, 2.0], atol=1e-6)


def test_position_based_table_file(tmp_path):
    path = tmp_path / "table.txt"
    path.write_text("# position, effort\n-1.0, 1.0\n0.0 3.0   # peak\n\n1.0,\t2.0\n")
    clamp = ClampingPositionBased(lookup_table_path=path)
    assert clamp.lookup_positions == (-1.0, 0.0, 1.0) and clamp.lookup_efforts == (1.0, 3.0, 2.0)
    assert ClampingPositionBased.resolve_arguments({"lookup_table_path": str(path)}) == {"lookup_table_path": str(path)}
    bad = tmp_path / "bad.txt"
    bad.write_text("0.0 1.0\n0.5 two\n")
    with pytest.raises(ValueError,
                       match=r"ClampingPositionBased: lookup table '.*bad.txt' line 2: expected two numbers"):
        ClampingPositionBased(lookup_table_path=bad)
    with pytest.raises(ValueError, match=r"line 2"):  # already at build time
        ClampingPositionBased.resolve_arguments({"lookup_table_path": str(bad)})
    with pytest.raises(ValueError, match="cannot read lookup table '.*missing.txt'"):
        ClampingPositionBased(lookup_table_path=tmp_path / "missing.txt")
    unsorted = tmp_path / "unsorted.txt"
    unsorted.write_text("0.0 1.0\n0.0 2.0\n")
    with pytest.raises(ValueError, match="strictly increasing"):
        ClampingPositionBased(lookup_table_path=unsorted)


def test_position_based_bad_tables():
    with pytest.raises(ValueError, match="lookup_positions has 2 entries but lookup_efforts has 1"):
        ClampingPositionBased(lookup_positions=(0.0, 1.0), lookup_efforts=(1.0,))
    with pytest.raises(ValueError, match=r"lookup_efforts\[1\] = -2.0 is negative"):
        ClampingPositionBased.resolve_arguments({"lookup_positions": (0.0, 1.0), "lookup_efforts": (1.0, -2.0)})
    with pytest.raises(ValueError, match="lookup_table_path or both"):
        ClampingPositionBased(lookup_positions=(0.0, 1.0))
    with pytest.raises(ValueError, match="strictly increasing; entry 1"):
        ClampingPositionBased(lookup_positions=(1.0, 0.0), lookup_efforts=(1.0, 1.0))


def test_clampings_stack_in_order_and_check_lengths():
    qd = np.array([0.0, 5.0, -5.0])
    command = np.array([20.0, 20.0, 20.0])
    dc = ClampingDCMotor(saturation_effort=np.full(3, 10.0), velocity_limit=np.full(3, 10.0),
                         max_motor_effort=np.full(3, 100.0))
    act = _constant_effort_actuator(command, [ClampingMaxEffort(max_effort=np.full(3, 7.0)), dc])
    out = step_effort(act, sim_state(np.zeros(3), qd), sim_control(np.zeros(3), np.zeros(3)))
    np.testing.assert_allclose(out, [7.0, 5.0, 7.0])  # min(7, line): the line at +5 rad/s leaves 5
    with pytest.raises(ValueError, match=r"Actuator\(ControllerPD, 3 DOFs\): ClampingMaxEffort.max_effort has 2"):
        _constant_effort_actuator(command, [ClampingMaxEffort(max_effort=np.ones(2))])
    with pytest.raises(ValueError, match="ClampingDCMotor.*velocity_limit must be > 0"):
        ClampingDCMotor.resolve_arguments({"saturation_effort": 1.0, "velocity_limit": 0.0})
    with pytest.raises(ValueError, match="ClampingMaxEffort.*missing required argument 'max_effort'"):
        ClampingMaxEffort.resolve_arguments({})

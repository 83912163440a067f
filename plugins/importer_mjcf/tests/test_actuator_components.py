"""``add_mjcf(..., actuator_components=True)``: ``<actuator>`` elements as ``add_actuator`` entries.

Oracles: the joint-drive import of the same file (trajectory of a pendulum under Featherstone) and
MuJoCo's own ``qfrc_actuator`` for gears != 1, force / control ranges, biases and two actuators on
one joint.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import armillary as newton
from armillary.sim.enums import JointTargetMode

pytest.importorskip("armillary_actuators")

PENDULUM = """
<mujoco>
  <option timestep="0.002" gravity="0 0 -9.81"/>
  <worldbody>
    <body name="link" pos="0 0 1">
      <joint name="hinge" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.05" mass="1"/>
    </body>
  </worldbody>
  <actuator>
    <position name="servo" joint="hinge" kp="10" kv="0.5" forcerange="-4 4"/>
  </actuator>
</mujoco>
"""


def _build(xml: str, **kwargs):
    b = newton.ModelBuilder()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        b.add_mjcf(xml, **kwargs)
    return b, [str(w.message) for w in caught]


def _pendulum_trajectory(actuator_components: bool, steps: int, dt: float) -> np.ndarray:
    b, _ = _build(PENDULUM, actuator_components=actuator_components)
    model = b.finalize()
    solver = newton.solvers.SolverFeatherstone(model)
    s0, s1, control = model.state(), model.state(), model.control()
    control.joint_target_q.fill_(0.8)
    q = []
    for _ in range(steps):
        if actuator_components:
            control.joint_f.zero_()
            for act in model.actuators:
                act.step(s0, control, dt=dt)
        solver.step(s0, s1, control, None, dt)
        s0, s1 = s1, s0
        q.append(float(s0.joint_q.numpy()[0]))
    return np.asarray(q)


def test_position_actuator_gives_the_joint_drive_trajectory():
    dt, steps = 2.0e-3, 500  # 1 s; the 4 N*m force limit is active during the first swing
    drive = _pendulum_trajectory(False, steps, dt)
    comp = _pendulum_trajectory(True, steps, dt)
    assert np.ptp(drive) > 1.0  # it swings
    # Featherstone integrates a joint drive linearly implicitly, the actuator's effort explicitly:
    # the trajectories differ by the O(dt) time-stepping error only, 0.021 rad at dt = 2 ms ...
    err = np.abs(drive - comp).max()
    assert err < 3.0e-2
    # ... which halves with dt (the two paths apply the same law, gains, target and limit)
    half = [_pendulum_trajectory(comp, 2 * steps, dt / 2) for comp in (False, True)]
    err_half = np.abs(half[0] - half[1]).max()
    assert 0.4 < err_half / err < 0.6


def test_entries_replace_the_joint_drive():
    b_drive, _ = _build(PENDULUM)
    b_comp, _ = _build(PENDULUM, actuator_components=True)
    assert b_drive.actuator_entries == []
    assert b_drive.joint_target_ke[0] == 10.0 and b_drive.joint_target_kd[0] == 0.5
    assert b_drive.joint_target_mode[0] == int(JointTargetMode.POSITION_VELOCITY)
    assert b_drive.joint_effort_limit[0] == 4.0
    # the components path leaves the joint undriven: no double actuation
    plain = newton.ModelBuilder()
    plain.add_mjcf(PENDULUM.replace('<position name="servo" joint="hinge" kp="10" kv="0.5" forcerange="-4 4"/>', ""))
    assert b_comp.joint_target_ke[0] == plain.joint_target_ke[0] == 0.0
    assert b_comp.joint_target_kd[0] == plain.joint_target_kd[0]
    assert b_comp.joint_target_mode[0] == plain.joint_target_mode[0]
    assert b_comp.joint_effort_limit[0] == plain.joint_effort_limit[0]
    (entry,) = b_comp.actuator_entries
    assert entry.controller_class.__name__ == "ControllerPD"
    assert (entry.index, entry.pos_index, entry.delay_steps) == (0, 0, None)
    assert entry.args == {"kp": 10.0, "kd": 0.5, "const_effort": 0.0}
    assert [(c.__name__, args) for c, args in entry.clamping] == [("ClampingMaxEffort", {"max_effort": 4.0})]
    # the entries travel with replicate: one vectorised actuator over all worlds
    scene = newton.ModelBuilder()
    scene.replicate(b_comp, 3)
    model = scene.finalize()
    assert len(model.actuators) == 1
    assert model.actuators[0].indices.numpy().tolist() == [0, 1, 2]


MIXED = """
<mujoco>
  <worldbody>
    <body name="a"><joint name="ja" type="hinge" axis="0 0 1"/><geom size="0.1" mass="1"/></body>
    <body name="b" pos="1 0 0"><joint name="jb" type="slide" axis="1 0 0"/><geom size="0.1" mass="1"/></body>
    <body name="c" pos="2 0 0"><joint name="jc" type="hinge" axis="0 1 0"/><geom size="0.1" mass="1"/></body>
    <body name="d" pos="3 0 0"><joint name="jd" type="hinge" axis="1 0 0"/><geom size="0.1" mass="1"/></body>
    <body name="e" pos="4 0 0"><joint name="je" type="hinge" axis="1 0 0"/><geom size="0.1" mass="1"/></body>
  </worldbody>
  <actuator>
    <position joint="ja" kp="5" gear="2" forcerange="-3 3"/>
    <velocity joint="ja" kv="1.2" gear="2" forcerange="-1 1"/>
    <velocity joint="jb" kv="2" gear="-1.5"/>
    <motor joint="jc" gear="3" forcerange="-1 1"/>
    <general joint="jd" gainprm="4" biastype="affine" biasprm="0.7 -4 -0.3" gear="0.5" forcerange="-1.5 1.5"/>
    <motor joint="je" gear="-0.5" ctrlrange="-1 1" ctrllimited="true"/>
  </actuator>
</mujoco>
"""
# the forms of MIXED's actuators: position-target, velocity-target or feedforward commands
FORMS = ["pos", "vel", "vel", "ff", "pos", "ff"]


def test_efforts_match_mujoco_qfrc_actuator():
    mujoco = pytest.importorskip("mujoco")
    mj = mujoco.MjModel.from_xml_string(MIXED)
    data = mujoco.MjData(mj)
    rng = np.random.default_rng(3)
    b, caught = _build(MIXED, actuator_components=True)
    assert not [m for m in caught if "actuator" in m]  # the pair on ja reads different commands: no warning
    assert len(b.actuator_entries) == 6
    model = b.finalize()
    state, control = model.state(), model.control()
    gear = mj.actuator_gear[:, 0]
    gain = mj.actuator_gainprm[:, 0]
    dof_of = mj.actuator_trnid[:, 0]  # hinge / slide joints: joint index = DOF index here
    clamped = set()
    for trial in range(8):
        qpos = rng.uniform(-1.0, 1.0, mj.nq)
        qvel = rng.uniform(-2.0, 2.0, mj.nv)
        ctrl = rng.uniform(-2.0, 2.0, mj.nu)  # beyond the motors' ranges sometimes
        data.qpos[:], data.qvel[:], data.ctrl[:] = qpos, qvel, ctrl
        mujoco.mj_forward(mj, data)
        # joint-space commands: targets ctrl / gear, feedforward gear * gain * ctrl
        target_q, target_qd, act = np.zeros(mj.nv), np.zeros(mj.nv), np.zeros(mj.nv)
        for k, form in enumerate(FORMS):
            {"pos": target_q, "vel": target_qd, "ff": act}[form][dof_of[k]] = (
                gear[k] * gain[k] * ctrl[k] if form == "ff" else ctrl[k] / gear[k])
        state.joint_q.assign(qpos.astype(np.float32))
        state.joint_qd.assign(qvel.astype(np.float32))
        control.joint_target_q.assign(target_q.astype(np.float32))
        control.joint_target_qd.assign(target_qd.astype(np.float32))
        control.joint_act.assign(act.astype(np.float32))
        control.joint_f.zero_()
        for a in model.actuators:
            a.step(state, control, dt=0.01)
        np.testing.assert_allclose(control.joint_f.numpy(), data.qfrc_actuator, rtol=1e-5, atol=1e-5,
                                   err_msg=f"trial {trial}")
        limits = np.where(mj.actuator_forcelimited, mj.actuator_forcerange[:, 1], np.inf)
        clamped |= {k for k in range(mj.nu) if np.isclose(abs(data.actuator_force[k]), limits[k])}
        clamped |= {5} if abs(ctrl[5]) > 1.0 else set()
    # the force ranges (servo, velocity pair, motor) and the motor's ctrlrange were exercised
    assert {0, 1, 3, 4, 5} <= clamped


def test_gear_scales_gains_const_and_limits():
    b, _ = _build(MIXED, actuator_components=True)
    args = [(e.index, e.args, [(c.__name__, a) for c, a in e.clamping]) for e in b.actuator_entries]
    assert args[0] == (0, {"kp": 20.0, "kd": 0.0, "const_effort": 0.0}, [("ClampingMaxEffort", {"max_effort": 6.0})])
    assert args[1] == (0, {"kp": 0.0, "kd": 4.8, "const_effort": 0.0}, [("ClampingMaxEffort", {"max_effort": 2.0})])
    assert args[2] == (1, {"kp": 0.0, "kd": 4.5, "const_effort": 0.0}, [])
    assert args[3] == (2, {"kp": 0.0, "kd": 0.0, "const_effort": 0.0}, [("ClampingMaxEffort", {"max_effort": 3.0})])
    assert args[4][0] == 3 and args[4][2] == [("ClampingMaxEffort", {"max_effort": 0.75})]
    assert args[4][1] == pytest.approx({"kp": 1.0, "kd": 0.075, "const_effort": 0.35})
    assert args[5] == (4, {"kp": 0.0, "kd": 0.0, "const_effort": 0.0}, [("ClampingMaxEffort", {"max_effort": 0.5})])


def test_actuators_sharing_a_command_warn():
    xml = MIXED.replace('<velocity joint="jb" kv="2" gear="-1.5"/>',
                        '<velocity joint="jb" kv="2" gear="-1.5"/><motor joint="jb"/>')
    b, caught = _build(xml, actuator_components=True)
    assert len(b.actuator_entries) == 7
    (msg,) = [m for m in caught if "has 2 actuators" in m]
    assert "'jb'" in msg and "joint_act" in msg


def test_unsupported_forms_warn_and_add_nothing():
    xml = """
    <mujoco>
      <worldbody>
        <body name="a"><joint name="ja" type="hinge"/><geom size="0.1" mass="1"/>
          <site name="s"/></body>
        <body name="f" pos="2 0 0"><freejoint name="free"/><geom size="0.1" mass="1"/></body>
      </worldbody>
      <actuator>
        <general joint="ja" gaintype="affine" gainprm="1 2 3"/>
        <general joint="ja" gainprm="2" biastype="affine" biasprm="0 -2 0.5"/>
        <muscle joint="ja"/>
        <motor site="s" gear="1 0 0 0 0 0"/>
        <motor joint="free"/>
      </actuator>
    </mujoco>
    """
    b, caught = _build(xml, actuator_components=True)
    assert b.actuator_entries == []
    text = " ".join(caught)
    for needle in ("gaintype=affine", "negative gain", "muscle", "site transmission", "free joints"):
        assert needle in text, needle
    assert b.joint_target_ke[0] == 0.0  # and no joint drive either

"""<include> of files whose root element is not <mujoco> (issue 20).

MuJoCo only uses the included file's root element as a wrapper and splices its children in,
whatever its tag; Adroit's door model (gymnasium_robotics / mj_envs) writes its assets, defaults
and door body as ``<mujocoinclude>`` files. The pair below has the same structure: a top-level
include of defaults + assets and a worldbody include of a hinged door chain.
"""

import mujoco
import numpy as np
import pytest

import armillary

_ASSETS = """<mujocoinclude>
  <compiler angle="radian"/>
  <default>
    <default class="door">
      <joint damping="0.5" armature="0.01"/>
      <geom density="500" rgba="0.6 0.4 0.2 1"/>
    </default>
  </default>
  <asset>
    <material name="wood" rgba="0.6 0.4 0.2 1"/>
  </asset>
</mujocoinclude>
"""

_DOOR = """<mujocoinclude>
  <body name="frame" pos="0 0.2 0.3" childclass="door">
    <geom type="box" size="0.02 0.02 0.3" pos="-0.3 0 0"/>
    <body name="door" pos="-0.28 0 0">
      <joint name="door_hinge" type="hinge" axis="0 0 1" range="0 1.57"/>
      <geom type="box" size="0.25 0.02 0.28" pos="0.25 0 0" material="wood"/>
      <body name="latch" pos="0.45 -0.05 0">
        <joint name="latch" type="hinge" axis="0 1 0" range="0 0.8"/>
        <geom type="capsule" size="0.015 0.06" euler="0 1.5708 0"/>
      </body>
    </body>
  </body>
</mujocoinclude>
"""

_MAIN = """<mujoco model="door_like">
  <include file="assets.xml"/>
  <worldbody>
    <include file="door.xml"/>
  </worldbody>
</mujoco>
"""


@pytest.fixture
def door_model(tmp_path):
    (tmp_path / "assets.xml").write_text(_ASSETS)
    (tmp_path / "door.xml").write_text(_DOOR)
    main = tmp_path / "door_like.xml"
    main.write_text(_MAIN)
    return main


def test_include_with_mujocoinclude_root_matches_mujoco(door_model):
    m = mujoco.MjModel.from_xml_path(str(door_model))  # MuJoCo accepts the <mujocoinclude> roots
    b = armillary.ModelBuilder()
    b.add_mjcf(str(door_model))  # was: "included file ... must have <mujoco> as its root element"
    model = b.finalize(device="cpu")
    keys = list(model.body_label)
    for name in ("frame", "door", "latch"):
        mid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, name)
        i = next(k for k, lab in enumerate(keys) if lab.split("/")[-1] == name)
        assert float(model.body_mass.numpy()[i]) == pytest.approx(m.body_mass[mid], rel=1e-5)
    # the included <default class="door"> reached the joints through childclass
    assert model.joint_dof_count == 2
    np.testing.assert_allclose(model.joint_armature.numpy(), [0.01, 0.01], rtol=1e-6)
    np.testing.assert_allclose(model.joint_limit_upper.numpy(), [1.57, 0.8], rtol=1e-6)
    # forward kinematics at q = 0 matches MuJoCo's body positions
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    state = model.state()
    armillary.eval_fk(model, model.joint_q, model.joint_qd, state)
    bq = state.body_q.numpy()
    for name in ("frame", "door", "latch"):
        mid = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, name)
        i = next(k for k, lab in enumerate(keys) if lab.split("/")[-1] == name)
        np.testing.assert_allclose(bq[i, :3], d.xpos[mid], atol=1e-6)


def test_include_root_tag_is_only_a_wrapper(tmp_path):
    """Any root tag is spliced (MuJoCo 4.0 and the reference engine accept e.g. <foo> too)."""
    (tmp_path / "part.xml").write_text('<foo><body name="b"><freejoint/><geom size="0.1"/></body></foo>')
    (tmp_path / "main.xml").write_text('<mujoco><worldbody><include file="part.xml"/></worldbody></mujoco>')
    assert mujoco.MjModel.from_xml_path(str(tmp_path / "main.xml")).nbody == 2
    b = armillary.ModelBuilder()
    b.add_mjcf(str(tmp_path / "main.xml"))
    assert b.body_count == 1

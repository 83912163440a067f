"""Focused tests: each fidelity trap of issue #5 and the MJCF conventions, checked against MuJoCo."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import armillary
from _mjcf_helpers import host_fk
from armillary_importer_mjcf.importer import MJCFImportWarning, mujoco_qpos_to_joint_q
from armillary.sim.enums import JointType

mujoco = pytest.importorskip("mujoco")


def _load(xml, **kw):
    b = armillary.ModelBuilder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MJCFImportWarning)
        b.add_mjcf(xml, **kw)
    return b


def _compare_fk(xml, n=5, seed=0, tol=1e-5):
    """FK of the import vs MuJoCo at random qpos (hinge/slide uniform, free/ball random quaternions)."""
    b = _load(xml)
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    rng = np.random.default_rng(seed)
    info = b.mjcf_imports[-1]
    names = [m.joint(j).name for j in range(m.njnt)]
    for _ in range(n):
        qpos = m.qpos0.copy()
        for j in range(m.njnt):
            a, t = m.jnt_qposadr[j], m.jnt_type[j]
            if t == 0:
                qpos[a:a + 3] = rng.uniform(-1, 1, 3)
                qpos[a + 3:a + 7] = rng.normal(size=4)
            elif t == 1:
                qpos[a:a + 4] = rng.normal(size=4)
            else:
                qpos[a] = rng.uniform(-1.5, 1.5)
        d.qpos[:] = qpos
        mujoco.mj_kinematics(m, d)
        q = mujoco_qpos_to_joint_q(b, d.qpos, mj_joint_names=names, mj_joint_types=m.jnt_type, mj_qposadr=m.jnt_qposadr)
        poses = host_fk(b, q)
        for i in range(1, m.nbody):
            p, r = poses[info["bodies"][m.body(i).name]]
            np.testing.assert_allclose(p, d.xpos[i], atol=tol)
            assert 1 - abs(np.dot([r[3], r[0], r[1], r[2]], d.xquat[i])) < tol
    return b, m


def _compare_mass(xml, b=None):
    b = b or _load(xml)
    m = mujoco.MjModel.from_xml_string(xml)
    info = b.mjcf_imports[-1]
    for i in range(1, m.nbody):
        k = info["bodies"][m.body(i).name]
        assert b.body_mass[k] == pytest.approx(m.body_mass[i], rel=1e-9, abs=1e-12)
        if m.body_mass[i] > 0:
            np.testing.assert_allclose(np.array(b.body_com[k]), m.body_ipos[i], atol=1e-6)
            r = np.zeros(9)
            mujoco.mju_quat2Mat(r, m.body_iquat[i])
            r = r.reshape(3, 3)
            np.testing.assert_allclose(np.array(b.body_inertia[k]).reshape(3, 3), r @ np.diag(m.body_inertia[i]) @ r.T,
                                       rtol=1e-5, atol=1e-9)  # fmt: skip
    return b, m


ANKLE = """
<mujoco>
  <worldbody>
    <body name="shin" pos="0 0 1">
      <joint name="knee" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.4" size="0.05"/>
      <body name="foot" pos="0 0 -0.45">
        <joint name="ankle_y" pos="0 0 0.05" axis="0 1 0"/>
        <joint name="ankle_x" pos="0.02 0 0.08" axis="1 0 0"/>
        <geom type="box" size="0.1 0.05 0.02" pos="0.05 0 0"/>
      </body>
    </body>
  </worldbody>
</mujoco>"""


def test_multi_joint_body_with_different_anchors_keeps_each_anchor():
    b, m = _compare_fk(ANKLE)
    labels = b.body_label
    # composition through a massless intermediate link named after the body and the joint
    inter = [lbl for lbl in labels if "foot" in lbl and "ankle_y" in lbl]
    assert len(inter) == 1
    assert b.body_mass[labels.index(inter[0])] == 0.0
    assert "ankle_y" in b.joint_label and "ankle_x" in b.joint_label
    assert b.joint_dof_count == m.nv


PLANAR = """
<mujoco>
  <worldbody>
    <body name="torso" pos="0 0 0.7">
      <joint name="rootx" type="slide" axis="1 0 0" pos="0.3 0 0"/>
      <joint name="rootz" type="slide" axis="0 0 1"/>
      <joint name="rooty" type="hinge" axis="0 1 0" pos="0.1 0 0.2"/>
      <geom type="box" size="0.4 0.1 0.05"/>
    </body>
  </worldbody>
</mujoco>"""


def test_coinciding_anchors_merge_into_one_d6():
    b, m = _compare_fk(PLANAR)
    assert b.joint_count == 1 and b.joint_type[0] == JointType.D6
    assert b.joint_label[0] == "rootx_rootz_rooty"
    assert b.joint_dof_dim[0] == (2, 1)


def test_settotalmass_scales_masses_and_inertias(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # MuJoCo logs a deprecation warning to ./MUJOCO_LOG.TXT
    xml = ANKLE.replace("<mujoco>", '<mujoco><compiler settotalmass="7.5"/>')
    b, m = _compare_mass(xml)
    assert sum(b.body_mass) == pytest.approx(7.5)


def test_option_gravity_and_timestep_are_stored():
    xml = ANKLE.replace("<mujoco>", '<mujoco><option timestep="0.004" gravity="0 1 -3"/>')
    b = _load(xml)
    assert b.gravity == pytest.approx((0.0, 1.0, -3.0))
    assert b.timestep == pytest.approx(0.004)
    assert b.mjcf_options["timestep"] == pytest.approx(0.004)
    b = _load(ANKLE.replace("<mujoco>", '<mujoco><option><flag gravity="disable"/></option>'))
    assert b.gravity == pytest.approx((0.0, 0.0, 0.0))
    b = _load(ANKLE, parse_mujoco_options=False)
    assert b.gravity == pytest.approx((0.0, 0.0, -9.81))


INERTIA = """
<mujoco>
  <compiler inertiafromgeom="{ifg}" boundmass="{bm}" boundinertia="{bi}" balanceinertia="{bal}"/>
  <worldbody>
    <body name="a" pos="0 0 1">
      <joint axis="0 1 0"/>
      <inertial pos="0.1 0 0" mass="2" diaginertia="0.1 0.2 0.25" quat="0.9 0.1 0.2 0.3"/>
      <geom type="box" size="0.2 0.1 0.05" pos="0 0.1 0" euler="10 20 30"/>
      <geom type="sphere" size="0.1" pos="0.2 0 0" mass="0.5"/>
      <body name="b" pos="0 0 -0.5">
        <joint axis="1 0 0"/>
        <geom type="cylinder" size="0.02 0.2" density="500"/>
        <geom type="ellipsoid" size="0.03 0.04 0.05" pos="0 0 -0.2"/>
        <body name="c" pos="0 0 -0.3">
          <joint axis="1 0 0"/>
          <geom type="capsule" size="0.0001 0.0001" mass="0.00001"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>"""


@pytest.mark.parametrize("ifg", ["auto", "true", "false"])
@pytest.mark.parametrize("bounds", [(0, 0, "false"), (0.01, 0.001, "true")])
def test_inertiafromgeom_and_bounds(ifg, bounds):
    xml = INERTIA.format(ifg=ifg, bm=bounds[0], bi=bounds[1], bal=bounds[2])
    if ifg == "false":  # massless moving bodies are rejected by MuJoCo; give them inertials
        xml = xml.replace('<geom type="cylinder"', '<inertial pos="0 0 0" mass="1" diaginertia="1 1 1"/><geom type="cylinder"')
        xml = xml.replace('<geom type="capsule"', '<inertial pos="0 0 0" mass="1" diaginertia="0.1 0.1 0.1"/><geom type="capsule"')
    _compare_mass(xml)


def test_balanceinertia_fixes_triangle_inequality():
    xml = """<mujoco><compiler balanceinertia="true"/><worldbody><body name="a"><joint/>
    <inertial pos="0 0 0" mass="1" diaginertia="0.1 0.1 0.5"/></body></worldbody></mujoco>"""
    _compare_mass(xml)


MAIN_CLASS = """
<mujoco>
  <default class="main">
    <joint damping="0.7" armature="0.05" axis="0 1 0"/>
    <geom type="capsule" size="0.05 0.2" density="800"/>
    <default class="stiff">
      <joint stiffness="12" damping="3"/>
      <default class="stiffer"><joint stiffness="20"/><geom type="box" size="0.1 0.1 0.1"/></default>
    </default>
  </default>
  <worldbody>
    <body name="a" pos="0 0 1">
      <joint name="ja"/>
      <geom/>
      <body name="b" pos="0 0 -0.5" childclass="stiff">
        <joint name="jb"/>
        <geom/>
        <body name="c" pos="0 0 -0.5" childclass="stiffer">
          <joint name="jc"/>
          <joint name="jd" class="main" axis="1 0 0" pos="0 0 0.1"/>
          <geom/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>"""


def test_top_level_main_class_nested_defaults_and_childclass():
    b, m = _compare_mass(MAIN_CLASS)
    _compare_fk(MAIN_CLASS)
    info = b.mjcf_imports[-1]
    for name in ("ja", "jb", "jc", "jd"):
        j, k, dk, _ = info["joints"][name]
        dof = b.joint_qd_start[j] + dk
        mj = m.joint(name)
        assert b.joint_damping[dof] == pytest.approx(m.dof_damping[mj.dofadr[0]])
        assert b.joint_armature[dof] == pytest.approx(m.dof_armature[mj.dofadr[0]])
        assert b.joint_stiffness[dof] == pytest.approx(m.jnt_stiffness[mj.id])


REF = """
<mujoco>
  <compiler angle="degree"/>
  <worldbody>
    <body name="a" pos="0 0 1" euler="10 20 30">
      <joint name="h" axis="0 1 1" pos="0.1 0 0" ref="30" springref="45" stiffness="2" range="-10 80"/>
      <geom type="box" size="0.1 0.2 0.3"/>
      <body name="b" pos="0 0 -0.5" axisangle="1 1 0 40">
        <joint name="s" type="slide" axis="1 0 0" ref="0.2" springref="-0.1" range="-0.5 0.5"/>
        <geom type="sphere" size="0.1"/>
        <body name="c" pos="0.2 0 0" xyaxes="0 1 0 -1 0 0">
          <joint name="ball" type="ball" pos="0 0 0.1"/>
          <geom type="ellipsoid" size="0.1 0.05 0.02" zaxis="1 1 1"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>"""


def test_ref_springref_and_qpos_convention():
    b, m = _compare_fk(REF)
    info = b.mjcf_imports[-1]
    jh, _, _, _ = info["joints"]["h"]
    js, _, _, _ = info["joints"]["s"]
    # joint_q == qpos: the default coordinate is qpos0 = ref, limits and springref in the same coordinate
    assert b.joint_q[b.joint_q_start[jh]] == pytest.approx(math.radians(30))
    assert b.joint_q[b.joint_q_start[js]] == pytest.approx(0.2)
    assert b.joint_rest_q[b.joint_q_start[jh]] == pytest.approx(math.radians(45))
    assert b.joint_rest_q[b.joint_q_start[js]] == pytest.approx(-0.1)
    assert b.joint_limit_lower[b.joint_qd_start[jh]] == pytest.approx(math.radians(-10))
    np.testing.assert_allclose(m.qpos0[:2], [math.radians(30), 0.2])
    # at the default joint_q every body is at its XML pose
    poses = host_fk(b, b.joint_q)
    for i in range(1, m.nbody):
        np.testing.assert_allclose(poses[info["bodies"][m.body(i).name]][0], b.body_q[info["bodies"][m.body(i).name]][:3], atol=1e-6)


def test_eulerseq_and_radian_compiler():
    xml = REF.replace('angle="degree"', 'angle="radian" eulerseq="ZYX"').replace('ref="30" springref="45"', "").replace("-10 80", "-1 1").replace("40", "0.7").replace("10 20 30", "0.1 0.2 0.3")
    _compare_fk(xml)


def test_free_joint_and_parallel_top_level_bodies():
    xml = """<mujoco><worldbody><geom type="plane" size="1 1 1"/>
      <body name="box" pos="0 0 1" quat="0.9 0 0.1 0"><freejoint name="root"/><geom type="box" size="0.1 0.1 0.1"/>
        <body name="arm" pos="0.2 0 0"><joint name="j1" axis="0 0 1"/><geom type="sphere" size="0.05"/></body></body>
      <body name="static" pos="1 0 0"><geom type="box" size="0.1 0.1 0.1"/></body></worldbody></mujoco>"""
    b, m = _compare_fk(xml)
    assert b.articulation_count == 2
    assert b.joint_type[b.joint_label.index("root")] == JointType.FREE
    assert b.joint_type[b.joint_label.index("static_fixed")] == JointType.FIXED


def test_equality_constraints_become_loop_joints_and_mimic():
    xml = """<mujoco><worldbody>
      <body name="base"><geom type="box" size="0.1 0.1 0.1"/>
        <body name="crank" pos="0 0 0.5"><joint name="ja" axis="0 1 0"/><geom type="capsule" size="0.02 0.2"/>
          <body name="coupler" pos="0 0 0.3"><joint name="jb" axis="0 1 0"/><geom type="sphere" size="0.05"/></body></body>
        <body name="rocker" pos="1 0 0.5"><joint name="jd" axis="0 1 0"/><geom type="capsule" size="0.02 0.2"/>
          <body name="shadow" pos="0 0 0.3"><joint name="jc" axis="0 1 0" ref="10"/>
            <inertial pos="0 0 0" mass="0.1" diaginertia="0.01 0.01 0.01"/></body></body>
      </body></worldbody>
      <equality>
        <connect name="c1" body1="crank" body2="rocker" anchor="0.5 0 0.3"/>
        <weld body1="coupler" body2="shadow"/>
        <weld body1="crank" body2="rocker" torquescale="0"/>
        <joint joint1="jd" joint2="ja" polycoef="0.1 -2"/>
      </equality></mujoco>"""
    with pytest.warns(MJCFImportWarning, match="torquescale"):
        b = armillary.ModelBuilder()
        b.add_mjcf(xml)
    loops = [j for j in range(b.joint_count) if b.joint_articulation[j] < 0]
    types = [b.joint_type[j] for j in loops]
    assert types == [JointType.BALL, JointType.FIXED, JointType.BALL]
    assert b.joint_label[loops[0]] == "c1"
    info = b.mjcf_imports[-1]
    jd, ja = info["joints"]["jd"][0], info["joints"]["ja"][0]
    assert b.joint_mimic_joint[jd] == ja
    assert b.joint_mimic_coeffs[jd] == pytest.approx((0.1, -2.0))
    # loop frames coincide at the authored pose
    for j in loops:
        pa, ch = b.joint_parent[j], b.joint_child[j]
        import warp as wp

        a = wp.transform_multiply(b.body_q[pa], b.joint_X_p[j])
        c = wp.transform_multiply(b.body_q[ch], b.joint_X_c[j])
        np.testing.assert_allclose(np.array(a)[:3], np.array(c)[:3], atol=1e-5)
        assert abs(abs(np.dot(np.array(a)[3:], np.array(c)[3:])) - 1) < 1e-5
    model = b.finalize(device="cpu")
    assert model.joint_count == b.joint_count


def test_actuators_map_to_joint_drives():
    xml = """<mujoco><worldbody><body name="a"><joint name="j1" axis="0 1 0"/><geom type="sphere" size="0.1"/>
      <body name="b" pos="0 0 -0.3"><joint name="j2" axis="0 1 0"/><geom type="sphere" size="0.1"/>
      <body name="c" pos="0 0 -0.3"><joint name="j3" axis="0 1 0"/><geom type="sphere" size="0.1"/></body></body></body></worldbody>
      <actuator><position joint="j1" kp="50" kv="3" forcerange="-7 7"/><velocity joint="j2" kv="4"/>
        <motor joint="j3" gear="2" ctrlrange="-1 1"/></actuator></mujoco>"""
    from armillary.sim.enums import JointTargetMode as M

    b = _load(xml)
    assert b.joint_target_ke[0] == 50 and b.joint_target_kd[0] == 3 and b.joint_target_mode[0] == M.POSITION_VELOCITY
    assert b.joint_effort_limit[0] == pytest.approx(7)
    assert b.joint_target_kd[1] == 4 and b.joint_target_mode[1] == M.VELOCITY
    assert b.joint_target_mode[2] == M.EFFORT and b.joint_effort_limit[2] == pytest.approx(2)


def test_contype_conaffinity_exclude_and_pairs():
    xml = """<mujoco><worldbody><geom name="floor" type="plane" size="1 1 1"/>
      <body name="a" pos="0 0 1"><freejoint/><geom name="ga" type="sphere" size="0.1" contype="1" conaffinity="2"/>
        <geom name="va" type="sphere" size="0.1" contype="0" conaffinity="0"/></body>
      <body name="b" pos="1 0 1"><freejoint/><geom name="gb" type="sphere" size="0.1" contype="1" conaffinity="2"/></body>
      <body name="c" pos="2 0 1"><freejoint/><geom name="gc" type="sphere" size="0.1" contype="2" conaffinity="1"/></body>
      <body name="d" pos="3 0 1"><freejoint/><geom name="gd" type="sphere" size="0.1"/></body>
      <body name="e" pos="4 0 1"><freejoint/><geom name="ge" type="sphere" size="0.1" contype="4" conaffinity="4"/></body>
      </worldbody><contact><exclude body1="c" body2="d"/><pair geom1="ga" geom2="gb"/></contact></mujoco>"""
    b = _load(xml)
    sid = {lbl: i for i, lbl in enumerate(b.shape_label)}
    pairs = b.shape_collision_filter_pairs
    assert (sid["ga"], sid["gc"]) not in pairs  # 1&1 -> collide
    assert (sid["gc"], sid["gd"]) in pairs  # excluded
    assert (sid["ga"], sid["gb"]) not in pairs  # 1&2 fails both ways, but <pair> enables it
    assert (sid["floor"], sid["ga"]) not in pairs  # ga.contype & floor.conaffinity = 1
    assert (sid["ga"], sid["ge"]) in pairs  # 1&4 = 0 and 4&2 = 0
    assert b.shape_collision_group[sid["va"]] == 0


def test_labels_keep_file_names_and_sites():
    xml = """<mujoco><worldbody><body name="left_thigh"><joint name="left_knee"/><geom name="thigh_geom" type="sphere" size="0.1"/>
      <site name="tip" pos="0 0 0.1"/></body></worldbody></mujoco>"""
    b = _load(xml)
    assert b.body_label == ["left_thigh"]
    assert b.joint_label == ["left_knee"]
    assert "thigh_geom" in b.shape_label and "tip" in b.shape_label
    from armillary.sim.enums import ShapeFlags

    assert b.shape_flags[b.shape_label.index("tip")] & ShapeFlags.SITE


def test_unsupported_elements_warn_once_naming_the_element():
    xml = """<mujoco><worldbody><camera name="a"/><camera name="b"/><light/><body name="x"><joint/><geom size="0.1"/>
      <site name="s1"/><site name="s2" pos="0 0 1"/></body></worldbody>
      <tendon><spatial><site site="s1"/><site site="s2"/></spatial></tendon></mujoco>"""
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        armillary.ModelBuilder().add_mjcf(xml, parse_sites=False)
    msgs = [str(w.message) for w in rec if issubclass(w.category, MJCFImportWarning)]
    assert sum("<camera>" in s for s in msgs) == 1
    assert sum("<light>" in s for s in msgs) == 1
    assert sum("<tendon>" in s for s in msgs) == 1


def test_include_meshdir_and_mesh_scale(tmp_path):
    import trimesh

    (tmp_path / "assets").mkdir()
    trimesh.creation.box(extents=(1, 2, 3)).export(tmp_path / "assets" / "box.stl")
    (tmp_path / "part.xml").write_text('<mujoco><asset><mesh name="m" file="box.stl" scale="0.1 0.1 0.1"/></asset></mujoco>')
    main = tmp_path / "model.xml"
    main.write_text("""<mujoco><compiler meshdir="assets"/><include file="part.xml"/>
      <worldbody><body name="a"><freejoint/><geom type="mesh" mesh="m" pos="0.1 0 0"/></body></worldbody></mujoco>""")
    b = armillary.ModelBuilder()
    b.add_mjcf(str(main))
    m = mujoco.MjModel.from_xml_path(str(main))
    assert b.body_mass[0] == pytest.approx(m.body_mass[1])
    np.testing.assert_allclose(np.array(b.body_com[0]), m.body_ipos[1], atol=1e-6)
    from armillary.sim.enums import GeoType

    assert b.shape_type[0] == GeoType.MESH and b.shape_scale[0] == pytest.approx((0.1, 0.1, 0.1))


def test_custom_attributes_read_through_transformers():
    import warp as wp
    from armillary.sim.custom_attributes import AttributeFrequency as F

    b = armillary.ModelBuilder()
    b.add_custom_attribute(armillary.ModelBuilder.CustomAttribute(
        name="my_damping", frequency=F.JOINT_DOF, dtype=wp.float32, default=0.0, namespace="t", mjcf_attribute_name="damping"))
    b.add_custom_attribute(armillary.ModelBuilder.CustomAttribute(
        name="prio", frequency=F.SHAPE, dtype=wp.int32, default=0, namespace="t", mjcf_attribute_name="priority",
        mjcf_value_transformer=lambda s, ctx: int(s) * 10))  # fmt: skip
    xml = """<mujoco><default><joint damping="0.5"/></default><worldbody><body name="a"><joint/><geom size="0.1" priority="2"/>
      <body name="b"><joint damping="3"/><geom size="0.1"/></body></body></worldbody></mujoco>"""
    b.add_mjcf(xml)
    assert b.custom_attributes["t:my_damping"].values == {0: 0.5, 1: 3.0}
    assert b.custom_attributes["t:prio"].values == {0: 20}


def test_xform_floating_base_joint_and_parent_body():
    import warp as wp

    xml = """<mujoco><worldbody><body name="a" pos="0 0 1"><geom type="sphere" size="0.1"/>
      <body name="b" pos="0 0 -0.5"><joint name="h" axis="0 1 0"/><geom type="sphere" size="0.1"/></body></body></worldbody></mujoco>"""
    b = _load(xml, xform=wp.transform((1.0, 2.0, 3.0), wp.quat_identity()))
    assert np.array(b.body_q[0])[:3] == pytest.approx([1, 2, 4])
    assert b.joint_type[0] == JointType.FIXED
    b = _load(xml, floating=True)
    assert b.joint_type[0] == JointType.FREE
    b = _load(xml, base_joint={"joint_type": JointType.D6, "linear_axes": [armillary.ModelBuilder.JointDofConfig(axis=(1, 0, 0))]})
    assert b.joint_type[0] == JointType.D6
    with pytest.raises(ValueError):
        _load(xml, floating=True, base_joint={})
    # parent_body: appended to the parent's articulation
    b = armillary.ModelBuilder()
    root = b.add_link(mass=1.0)
    b.add_articulation([b.add_joint_fixed(-1, root)])
    b.add_mjcf(xml, parent_body=root, xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()))
    assert b.articulation_count == 1
    assert b.joint_parent[1] == root and b.joint_articulation[1] == 0
    assert np.array(b.body_q[1])[:3] == pytest.approx([0, 0, 2])
    b.finalize(device="cpu")


def test_enable_self_collisions_false_filters_articulation_pairs():
    xml = """<mujoco><worldbody><body name="a"><joint/><geom name="g1" size="0.1"/>
      <body name="b"><joint/><geom name="g2" size="0.1"/><body name="c"><joint/><geom name="g3" size="0.1"/></body></body></body></worldbody></mujoco>"""
    on, off = _load(xml), _load(xml, enable_self_collisions=False)
    i1, i3 = on.shape_label.index("g1"), on.shape_label.index("g3")
    assert (i1, i3) not in on.shape_collision_filter_pairs
    assert (i1, i3) in off.shape_collision_filter_pairs


def test_collapse_fixed_joints_merges_jointless_children():
    xml = """<mujoco><worldbody><body name="a"><joint/><geom type="sphere" size="0.1"/>
      <body name="b" pos="0 0 -0.3"><geom type="sphere" size="0.1"/></body></body></worldbody></mujoco>"""
    full, coll = _load(xml), _load(xml, collapse_fixed_joints=True)
    assert full.body_count == 2 and coll.body_count == 1
    assert coll.body_mass[0] == pytest.approx(full.body_mass[0] + full.body_mass[1])
    assert coll.shape_count == 2


PARTIAL_DEFAULTS_XML = """<mujoco><default>
  <geom friction="0.9 0.02 0.003" solimp="0.8 0.85 0.002 0.4 3" solref="0.03 2" size="0.1 0.2 0.3"/>
  <joint solimplimit="0.7 0.8 0.003 0.6 4" solreflimit="0.05 3" solimpfriction="0.6 0.7 0.004 0.3 5"/>
  <tendon solimplimit="0.7 0.8 0.003 0.6 4" solreflimit="0.05 3"/>
  <site size="0.1 0.2 0.3"/>
  <default class="c1">
    <geom friction="0.5" solimp="0.6" solref="0.04" size="0.2"/>
    <joint solimplimit="0.5" solreflimit="0.07" solimpfriction="0.2 0.3"/>
    <tendon solimplimit="0.5" solreflimit="0.07"/>
    <site size="0.2"/>
    <default class="c2"><geom friction="0.4 0.1"/></default>
  </default>
</default>
<worldbody>
  <body name="a" pos="0 0 1"><joint name="j1" class="c1" range="-1 1"/><geom name="g1" class="c1" type="box"/>
    <site name="s1" class="c1" type="box"/>
    <body name="b" pos="0 0 1" childclass="c2"><joint name="j2" range="-1 1" solimplimit="0.1 0.2"/>
      <geom name="g2" type="box" friction="0.3" size="0.05 0.06"/>
      <geom name="g3" type="box" friction="0.35 0.2 0.1 " solimp="0.55 0.65"/></body>
  </body>
</worldbody>
<tendon><fixed name="t1" class="c1" limited="true" range="0 1"><joint joint="j1" coef="1"/></fixed>
  <fixed name="t2" limited="true" range="0 1" solimplimit="0.3"><joint joint="j2" coef="1"/></fixed></tendon>
</mujoco>"""


def test_partial_vector_attributes_fill_over_the_default_chain_like_mujoco():
    """A class's (or element's) friction="0.5" overrides only the leading numbers of the inherited
    vector; the rest come from the class chain (geoms, sites, joints, tendons), as MuJoCo compiles."""
    m = mujoco.MjModel.from_xml_string(PARTIAL_DEFAULTS_XML)
    model = _load(PARTIAL_DEFAULTS_XML).finalize(device="cpu")
    labels = list(model.shape_label)
    mu = np.stack([model.shape_material_mu.numpy(), model.shape_material_mu_torsional.numpy(),
                   model.shape_material_mu_rolling.numpy()], axis=1)  # fmt: skip
    scale = model.shape_scale.numpy()
    ns = getattr(model, "mujoco", None)
    for g in ("g1", "g2", "g3"):
        s, gid = labels.index(g), m.geom(g).id
        np.testing.assert_allclose(mu[s], m.geom_friction[gid], rtol=1e-6, err_msg=g)
        np.testing.assert_allclose(scale[s], m.geom_size[gid], rtol=1e-6, err_msg=g)
        if ns is not None:  # the mujoco:* attributes (SolverMuJoCo installed)
            np.testing.assert_allclose(ns.geom_solimp.numpy()[s], m.geom_solimp[gid], rtol=1e-12, err_msg=g)
            np.testing.assert_allclose(ns.solref.numpy()[s], m.geom_solref[gid], rtol=1e-12, err_msg=g)
    s = labels.index("s1")
    np.testing.assert_allclose(scale[s], m.site_size[m.site("s1").id], rtol=1e-6)
    if ns is None:
        return
    jl = list(model.joint_label)
    for j in ("j1", "j2"):
        d = model.joint_qd_start.numpy()[jl.index(j)]
        jid = m.joint(j).id
        np.testing.assert_allclose(ns.solimplimit.numpy()[d], m.jnt_solimp[jid], rtol=1e-12, err_msg=j)
        np.testing.assert_allclose(ns.solreflimit.numpy()[d], m.jnt_solref[jid], rtol=1e-12, err_msg=j)
        np.testing.assert_allclose(ns.solimpfriction.numpy()[d], m.dof_solimp[m.jnt_dofadr[jid]], rtol=1e-12, err_msg=j)
    np.testing.assert_allclose(ns.tendon_solimp_limit.numpy(), m.tendon_solimp_lim, rtol=1e-12)
    np.testing.assert_allclose(ns.tendon_solref_limit.numpy(), m.tendon_solref_lim, rtol=1e-12)


def test_a_second_main_default_adds_to_the_first_like_mujoco():
    """Two top-level main <default> elements (e.g. one from an <include>d file, as dm_control's jaco):
    the second adds to main; a class defined before it keeps the main it copied."""
    xml = """<mujoco>
      <default><geom solref="0.01 1" friction="0.7"/><default class="early"><geom condim="1"/></default></default>
      <default><geom solimp="0.8 0.9"/><default class="late"><geom condim="4"/></default></default>
      <worldbody><body name="a"><freejoint/><geom name="a" size="1"/><geom name="b" class="early" size="1"/>
        <geom name="c" class="late" size="1"/></body></worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    model = _load(xml).finalize(device="cpu")
    labels = list(model.shape_label)
    ns = getattr(model, "mujoco", None)
    for g in "abc":
        s, gid = labels.index(g), m.geom(g).id
        assert model.shape_material_mu.numpy()[s] == pytest.approx(m.geom_friction[gid][0], rel=1e-6)
        if ns is not None:
            np.testing.assert_allclose(ns.solref.numpy()[s], m.geom_solref[gid], rtol=1e-12, err_msg=g)
            np.testing.assert_allclose(ns.geom_solimp.numpy()[s], m.geom_solimp[gid], rtol=1e-12, err_msg=g)
            assert int(ns.condim.numpy()[s]) == int(m.geom_condim[gid]), g

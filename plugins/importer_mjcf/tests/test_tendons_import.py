"""``<tendon>`` and ``<equality>`` solver parameters imported into the ``mujoco:*`` custom attributes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import armillary
from armillary.sim.enums import ShapeFlags
from armillary_importer_mjcf.importer import MJCFImportWarning

pytest.importorskip("armillary_solver_mujoco")

FIXED_XML = """<mujoco>
  <default>
    <tendon stiffness="3" damping="0.5"/>
    <default class="lim"><tendon range="-0.1 0.2" solreflimit="0.03" solimplimit="0.8 0.9" margin="0.01"/></default>
  </default>
  <worldbody>
    <body name="a"><joint name="ja" axis="0 1 0" range="-1 1"/><geom size="0.1" pos="0 0 -0.2"/>
      <body name="b" pos="0 0 -0.4">
        <joint name="sx" type="slide" axis="1 0 0"/><joint name="hy" axis="0 1 0"/><joint name="hz" axis="0 0 1"/>
        <geom size="0.1"/>
      </body>
    </body>
  </worldbody>
  <tendon>
    <fixed name="t0" class="lim" frictionloss="0.2" springlength="0.05" armature="0.01">
      <joint joint="ja" coef="0.5"/><joint joint="hz" coef="-2"/>
    </fixed>
    <fixed name="t1" stiffness="0" limited="false" range="0 1"><joint joint="sx" coef="1"/></fixed>
  </tendon>
  <equality><tendon name="e0" tendon1="t0" tendon2="t1" polycoef="0.1 2" solref="0.01 0.5" solimp="0.7"/></equality>
</mujoco>"""


def _load(xml, **kw):
    b = armillary.ModelBuilder()
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        b.add_mjcf(xml, **kw)
    return b, [str(w.message) for w in rec if issubclass(w.category, MJCFImportWarning)]


def _col(b, key):
    attr = b.custom_attributes[key]
    return attr.build_numpy(b.get_custom_frequency_count(attr.frequency))


def test_fixed_tendons_with_defaults_classes_and_merged_joints():
    b, msgs = _load(FIXED_XML)
    assert not [m for m in msgs if "tendon" in m.lower()], msgs
    assert b.get_custom_frequency_count("mujoco:tendon") == 2
    assert b.get_custom_frequency_count("mujoco:tendon_joint") == 3
    assert _col(b, "mujoco:tendon_label") == ["t0", "t1"]
    np.testing.assert_array_equal(_col(b, "mujoco:tendon_type"), [0, 0])
    np.testing.assert_array_equal(_col(b, "mujoco:tendon_limited"), [True, False])
    np.testing.assert_allclose(_col(b, "mujoco:tendon_range"), [[-0.1, 0.2], [0.0, 1.0]])
    np.testing.assert_allclose(_col(b, "mujoco:tendon_stiffness"), [[3, 0, 0], [0, 0, 0]])
    np.testing.assert_allclose(_col(b, "mujoco:tendon_damping"), [[0.5, 0, 0], [0.5, 0, 0]])
    np.testing.assert_allclose(_col(b, "mujoco:tendon_frictionloss"), [0.2, 0.0])
    np.testing.assert_allclose(_col(b, "mujoco:tendon_springlength"), [[0.05, 0.05], [-1, -1]])
    np.testing.assert_allclose(_col(b, "mujoco:tendon_armature"), [0.01, 0.0])
    np.testing.assert_allclose(_col(b, "mujoco:tendon_margin"), [0.01, 0.0])
    np.testing.assert_allclose(_col(b, "mujoco:tendon_solref_limit"), [[0.03, 1.0], [0.02, 1.0]])
    np.testing.assert_allclose(_col(b, "mujoco:tendon_solimp_limit")[0], [0.8, 0.9, 0.001, 0.5, 2.0])
    np.testing.assert_array_equal(_col(b, "mujoco:tendon_joint_adr"), [0, 2])
    np.testing.assert_array_equal(_col(b, "mujoco:tendon_joint_num"), [2, 1])
    np.testing.assert_array_equal(_col(b, "mujoco:tendon_wrap_num"), [0, 0])
    # joints: ja is joint 0; sx, hy, hz merge into one D6 joint (1) with local DOFs 0, 1, 2
    assert b.joint_label[1] == "sx_hy_hz"
    np.testing.assert_array_equal(_col(b, "mujoco:tendon_joint"), [0, 1, 1])
    np.testing.assert_array_equal(_col(b, "mujoco:tendon_joint_dof"), [0, 2, 0])
    np.testing.assert_allclose(_col(b, "mujoco:tendon_coef"), [0.5, -2.0, 1.0])
    # tendon equality
    assert b.get_custom_frequency_count("mujoco:tendon_equality") == 1
    np.testing.assert_array_equal(_col(b, "mujoco:tendon_eq_tendon1"), [0])
    np.testing.assert_array_equal(_col(b, "mujoco:tendon_eq_tendon2"), [1])
    np.testing.assert_allclose(_col(b, "mujoco:tendon_eq_polycoef"), [[0.1, 2, 0, 0, 0]])
    np.testing.assert_allclose(_col(b, "mujoco:tendon_eq_solref"), [[0.01, 0.5]])
    np.testing.assert_allclose(_col(b, "mujoco:tendon_eq_solimp"), [[0.7, 0.95, 0.001, 0.5, 2.0]])
    assert _col(b, "mujoco:tendon_equality_label") == ["e0"]


def test_rows_are_remapped_when_imported_twice_and_replicated():
    b = armillary.ModelBuilder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b.add_mjcf(FIXED_XML)
        b.add_mjcf(FIXED_XML)
    nj = b.joint_count // 2
    np.testing.assert_array_equal(_col(b, "mujoco:tendon_joint"), [0, 1, 1, nj, nj + 1, nj + 1])
    np.testing.assert_array_equal(_col(b, "mujoco:tendon_joint_adr"), [0, 2, 3, 5])
    np.testing.assert_array_equal(_col(b, "mujoco:tendon_eq_tendon1"), [0, 2])
    np.testing.assert_array_equal(_col(b, "mujoco:tendon_eq_tendon2"), [1, 3])

    single = armillary.ModelBuilder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        single.add_mjcf(FIXED_XML)
    scene = armillary.ModelBuilder()
    scene.replicate(single, 3)
    np.testing.assert_array_equal(_col(scene, "mujoco:tendon_world"), [0, 0, 1, 1, 2, 2])
    np.testing.assert_array_equal(_col(scene, "mujoco:tendon_joint"), [0, 1, 1, 2, 3, 3, 4, 5, 5])
    m = scene.finalize()
    assert m.custom_frequency_counts["mujoco:tendon"] == 6
    np.testing.assert_array_equal(m.mujoco.tendon_joint_adr.numpy(), [0, 2, 3, 5, 6, 8])


SPATIAL_XML = """<mujoco>
  <worldbody>
    <site name="anchor" pos="0 0 1"/>
    <body name="a" pos="0 0 0.5"><joint name="ja" axis="0 1 0"/><geom name="wrap" type="cylinder" size="0.05 0.02"/>
      <site name="side" pos="0.1 0 0"/><site name="mid" pos="0 0 -0.2"/>
      <body name="b" pos="0 0 -0.4"><joint name="jb" axis="0 1 0"/><geom size="0.05"/><site name="end"/></body>
    </body>
  </worldbody>
  <tendon>
    <spatial name="sp" limited="true" range="0 2" stiffness="10">
      <site site="anchor"/><geom geom="wrap" sidesite="side"/><site site="mid"/><pulley divisor="2"/>
      <site site="mid"/><site site="end"/>
    </spatial>
  </tendon>
</mujoco>"""


def test_spatial_tendon_rows_reference_sites_and_geoms():
    b, msgs = _load(SPATIAL_XML)
    assert not [m for m in msgs if "tendon" in m.lower()], msgs
    np.testing.assert_array_equal(_col(b, "mujoco:tendon_type"), [1])
    np.testing.assert_array_equal(_col(b, "mujoco:tendon_wrap_adr"), [0])
    np.testing.assert_array_equal(_col(b, "mujoco:tendon_wrap_num"), [6])
    np.testing.assert_array_equal(_col(b, "mujoco:tendon_joint_num"), [0])
    types = _col(b, "mujoco:tendon_wrap_type")
    shapes = _col(b, "mujoco:tendon_wrap_shape")
    np.testing.assert_array_equal(types, [0, 1, 0, 2, 0, 0])
    labels = [b.shape_label[s] if s >= 0 else None for s in shapes]
    assert labels == ["anchor", "wrap", "mid", None, "mid", "end"]
    for s, t in zip(shapes, types):
        if t == 0:
            assert b.shape_flags[s] & ShapeFlags.SITE
    assert b.shape_label[_col(b, "mujoco:tendon_wrap_sidesite")[1]] == "side"
    assert _col(b, "mujoco:tendon_wrap_divisor")[3] == 2.0


def test_equality_solver_parameters_on_loop_and_mimic_joints():
    xml = """<mujoco>
      <default><default class="c"><equality solref="0.005 0.5" solimp="0.95 0.99 0.01"/></default></default>
      <worldbody>
        <body name="a"><joint name="j1" axis="0 1 0"/><geom size="0.1"/></body>
        <body name="b" pos="1 0 0"><joint name="j2" axis="0 1 0"/><geom size="0.1"/></body>
        <body name="c" pos="2 0 0"><joint name="j3" axis="0 1 0"/><geom size="0.1"/></body>
      </worldbody>
      <equality>
        <connect body1="a" body2="b" anchor="0.5 0 0" class="c"/>
        <joint joint1="j3" joint2="j1" solref="0.1 2"/>
        <weld body1="c"/>
      </equality></mujoco>"""
    b, _ = _load(xml)
    ref = b.custom_attributes["mujoco:eq_solref"].build_numpy(b.joint_count)
    imp = b.custom_attributes["mujoco:eq_solimp"].build_numpy(b.joint_count)
    loop = b.joint_label.index("connect_a_b")
    np.testing.assert_allclose(ref[loop], [0.005, 0.5])
    np.testing.assert_allclose(imp[loop], [0.95, 0.99, 0.01, 0.5, 2.0])
    follower = b.joint_label.index("j3")
    np.testing.assert_allclose(ref[follower], [0.1, 2.0])
    np.testing.assert_allclose(imp[follower], [0.9, 0.95, 0.001, 0.5, 2.0])  # MuJoCo's default
    weld = b.joint_label.index("weld_c_world")
    np.testing.assert_allclose(ref[weld], [0.02, 1.0])


def test_unresolvable_tendons_warn_and_are_skipped():
    xml = """<mujoco><worldbody><body name="x"><joint/><geom size="0.1"/><site name="s"/></body>
      <body name="y" pos="1 0 0"><joint name="named"/><geom size="0.1"/><site name="s2"/></body></worldbody>
      <tendon><fixed name="good"><joint joint="named" coef="1"/></fixed>
        <spatial name="nosite"><site site="s"/><site site="s2"/></spatial></tendon>
      <equality><tendon tendon1="nosite"/></equality></mujoco>"""
    b, msgs = _load(xml, parse_sites=False)
    assert _col(b, "mujoco:tendon_label") == ["good"]
    assert any("site 's'" in m and "not imported" in m for m in msgs)
    assert any("tendon equality on ignored tendon" in m for m in msgs)
    assert b.get_custom_frequency_count("mujoco:tendon_equality") == 0


def test_tendon_on_an_unknown_joint_raises():
    """MuJoCo rejects a tendon naming a joint the model lacks (a generated name such as ``x_joint0``
    is not a MuJoCo name)."""
    from armillary_importer_mjcf.importer import MJCFImportError

    xml = """<mujoco><worldbody><body name="x"><joint/><geom size="0.1"/></body></worldbody>
      <tendon><fixed name="bad"><joint joint="x_joint0" coef="1"/></fixed></tendon></mujoco>"""
    with pytest.raises(MJCFImportError, match=r"<string>:line 2: <joint> unknown joint 'x_joint0' in joint"):
        _load(xml)


def test_invalid_tendons_raise():
    from armillary_importer_mjcf.importer import MJCFImportError

    base = """<mujoco><worldbody><body name="x"><joint name="j"/><freejoint name="f"/><geom size="0.1"/>
      <site name="s"/></body></worldbody><tendon>{}</tendon></mujoco>"""
    for body, match in (('<fixed><joint joint="j"/></fixed>', "coef"),
                        ("<fixed/>", "no joints"),
                        ('<spatial><site site="s"/></spatial>', "two sites"),
                        ('<spatial><site site="nope"/><site site="s"/></spatial>', "unknown site"),
                        ('<fixed range="1 0" limited="true"><joint joint="j" coef="1"/></fixed>', "range")):  # fmt: skip
        with pytest.raises(MJCFImportError, match=match), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            armillary.ModelBuilder().add_mjcf(base.format(body).replace('<freejoint name="f"/>', ""))


def test_without_the_tendon_frequency_tendons_are_ignored_with_a_warning(monkeypatch):
    from armillary import plugins

    monkeypatch.setattr(plugins, "register_custom_attributes", lambda builder, *a, **k: None)
    b, msgs = _load(FIXED_XML)
    assert "mujoco:tendon" not in b.custom_frequencies
    assert sum(m.startswith("MJCF import: <tendon> is not supported") for m in msgs) == 1
    assert any("<equality><tendon>" in m for m in msgs)

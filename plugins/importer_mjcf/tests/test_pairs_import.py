"""``<contact><pair>`` / ``<exclude>`` imported into the ``mujoco:pair`` / ``mujoco:exclude`` rows
(declared by the MuJoCo solver plugin), next to the collision filter pairs the importer makes for
armillary's own collision pipeline."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import armillary
from armillary.sim.enums import ShapeFlags
from armillary_importer_mjcf.importer import MJCFImportError

pytest.importorskip("armillary_solver_mujoco")

XML = """<mujoco>
  <default>
    <pair solref="0.05 3" friction="0.6 0.5 0.4 0.3 0.2" solimp="0.5 0.6 0.01 0.4 3"/>
    <geom condim="6" friction="0.3 0.02 0.003" margin="0.01"/>
    <default class="c1"><pair solref="0.07" friction="0.9" solimp="0.8 0.85" condim="4" margin="0.002"/>
      <default class="c2"><pair solimp="0.1" gap="0.01" solreffriction="0.2"/></default>
    </default>
  </default>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 0.1"/>
    <body name="a" pos="0 0 0.1"><freejoint/><geom name="ga" size="0.1"/>
      <body name="a2" pos="0.3 0 0"><joint axis="0 1 0"/><geom name="ga2" type="capsule" size="0.05 0.1"/>
        <body name="a3" pos="0.2 0 0"><geom name="ga3" size="0.05"/></body>
      </body>
    </body>
    <body name="b" pos="0 0 0.3"><freejoint/><geom name="gb" size="0.1" contype="0" conaffinity="0"/></body>
    <body name="c" pos="0.5 0 0.3"><freejoint/><geom name="gc" type="box" size="0.1 0.1 0.1"/></body>
  </worldbody>
  <contact>
    <pair geom1="ga" geom2="gb"/>
    <pair name="p1" geom1="ga" geom2="gb" class="c1" solref="0.08"/>
    <pair geom1="gb" geom2="floor" class="c2" friction="0.1 0.2" condim="1" adhesion="0.5"/>
    <pair geom1="ga3" geom2="gc" solref="-1000 -20" margin="0.03" gap="0.02"/>
    <exclude body1="a" body2="c"/>
    <exclude name="ex_world" body1="world" body2="c"/>
    <exclude body1="a3" body2="b"/>
  </contact>
</mujoco>"""


def _load(xml, **kw):
    b = armillary.ModelBuilder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b.add_mjcf(xml, **kw)
    return b


def _col(b, key):
    attr = b.custom_attributes[key]
    return attr.build_numpy(b.get_custom_frequency_count(attr.frequency))


def _shape(b, label):
    return b.shape_label.index(label)


def _body(b, label):
    return b.body_label.index(label)


def test_pair_rows_follow_mujoco_defaults_classes_and_partial_vectors():
    b = _load(XML)
    assert b.get_custom_frequency_count("mujoco:pair") == 4
    s = {n: _shape(b, n) for n in ("floor", "ga", "gb", "ga3", "gc")}
    np.testing.assert_array_equal(_col(b, "mujoco:pair_geom1"), [s["ga"], s["ga"], s["gb"], s["ga3"]])
    np.testing.assert_array_equal(_col(b, "mujoco:pair_geom2"), [s["gb"], s["gb"], s["floor"], s["gc"]])
    assert _col(b, "mujoco:pair_label") == ["", "p1", "", ""]
    # never mixed from the geoms (condim 6, friction 0.3 ..., margin 0.01 there)
    np.testing.assert_array_equal(_col(b, "mujoco:pair_condim"), [3, 4, 1, 3])
    np.testing.assert_allclose(_col(b, "mujoco:pair_friction"),
                               [[0.6, 0.5, 0.4, 0.3, 0.2], [0.9, 0.5, 0.4, 0.3, 0.2],
                                [0.1, 0.2, 0.4, 0.3, 0.2], [0.6, 0.5, 0.4, 0.3, 0.2]])  # fmt: skip
    # a partial vector keeps the remaining numbers of its class chain
    np.testing.assert_allclose(_col(b, "mujoco:pair_solref"), [[0.05, 3], [0.08, 3], [0.07, 3], [-1000, -20]])
    np.testing.assert_allclose(_col(b, "mujoco:pair_solreffriction"), [[0, 0], [0, 0], [0.2, 0], [0, 0]])
    np.testing.assert_allclose(_col(b, "mujoco:pair_solimp"),
                               [[0.5, 0.6, 0.01, 0.4, 3], [0.8, 0.85, 0.01, 0.4, 3],
                                [0.1, 0.85, 0.01, 0.4, 3], [0.5, 0.6, 0.01, 0.4, 3]])  # fmt: skip
    np.testing.assert_allclose(_col(b, "mujoco:pair_margin"), [0, 0.002, 0.002, 0.03])
    np.testing.assert_allclose(_col(b, "mujoco:pair_gap"), [0, 0, 0.01, 0.02])
    np.testing.assert_allclose(_col(b, "mujoco:pair_adhesion"), [0, 0, 0.5, 0])


def test_rows_match_mujoco_compiled_pairs():
    mujoco = pytest.importorskip("mujoco")
    b = _load(XML)
    raw = mujoco.MjModel.from_xml_string(XML)
    names = list(b.shape_label)
    ours = {}
    for r in range(b.get_custom_frequency_count("mujoco:pair")):
        key = tuple(sorted((names[_col(b, "mujoco:pair_geom1")[r]], names[_col(b, "mujoco:pair_geom2")[r]])))
        ours.setdefault(key, []).append(
            (int(_col(b, "mujoco:pair_condim")[r]), *_col(b, "mujoco:pair_friction")[r],
             *_col(b, "mujoco:pair_solref")[r],
             *_col(b, "mujoco:pair_solreffriction")[r], *_col(b, "mujoco:pair_solimp")[r],
             float(_col(b, "mujoco:pair_margin")[r]), float(_col(b, "mujoco:pair_gap")[r])))  # fmt: skip
    theirs = {}
    for i in range(raw.npair):
        key = tuple(sorted((mujoco.mj_id2name(raw, mujoco.mjtObj.mjOBJ_GEOM, int(raw.pair_geom1[i])),
                            mujoco.mj_id2name(raw, mujoco.mjtObj.mjOBJ_GEOM, int(raw.pair_geom2[i])))))  # fmt: skip
        theirs.setdefault(key, []).append(
            (int(raw.pair_dim[i]), *raw.pair_friction[i], *raw.pair_solref[i], *raw.pair_solreffriction[i],
             *raw.pair_solimp[i], float(raw.pair_margin[i]), float(raw.pair_gap[i])))  # fmt: skip
    assert ours.keys() == theirs.keys()
    for k in ours:
        np.testing.assert_allclose(sorted(ours[k]), sorted(theirs[k]), err_msg=str(k))


def test_exclude_rows_and_filter_pairs():
    b = _load(XML)
    assert b.get_custom_frequency_count("mujoco:exclude") == 3
    np.testing.assert_array_equal(_col(b, "mujoco:exclude_body1"), [_body(b, "a"), -1, _body(b, "a3")])
    np.testing.assert_array_equal(_col(b, "mujoco:exclude_body2"), [_body(b, "c"), _body(b, "c"), _body(b, "b")])
    assert _col(b, "mujoco:exclude_label") == ["", "ex_world", ""]
    # armillary's own pipeline: excluded body pairs are filtered, explicit pairs are not
    fp = b.shape_collision_filter_pairs
    ga, gb, gc, ga2 = (_shape(b, n) for n in ("ga", "gb", "gc", "ga2"))
    assert (min(ga, gc), max(ga, gc)) in fp
    assert (min(ga, gb), max(ga, gb)) not in fp
    # gb has contype = conaffinity = 0 but is named by pairs: it collides, with its pair partners only
    assert b.shape_flags[gb] & int(ShapeFlags.COLLIDE_SHAPES)
    assert (min(ga2, gb), max(ga2, gb)) in fp and (min(gc, gb), max(gc, gb)) in fp


def test_collapsed_bodies_remap_excludes():
    b = _load(XML, collapse_fixed_joints=True)
    assert "a3" not in b.body_label  # merged into a2
    np.testing.assert_array_equal(_col(b, "mujoco:exclude_body1"), [_body(b, "a"), -1, _body(b, "a2")])
    np.testing.assert_array_equal(_col(b, "mujoco:pair_geom1")[3], _shape(b, "ga3"))


def test_rows_are_remapped_when_imported_twice_and_replicated():
    b = armillary.ModelBuilder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b.add_mjcf(XML)
        ns, nb = b.shape_count, b.body_count
        b.add_mjcf(XML)
    g1 = _col(b, "mujoco:pair_geom1")
    np.testing.assert_array_equal(g1[4:], g1[:4] + ns)
    e1 = _col(b, "mujoco:exclude_body1")
    np.testing.assert_array_equal(e1[3:], [e1[0] + nb, -1, e1[2] + nb])

    scene = armillary.ModelBuilder()
    scene.replicate(_load(XML), 2)
    m = scene.finalize()
    assert m.custom_frequency_counts["mujoco:pair"] == 8
    sw = m.shape_world.numpy()
    g1 = m.mujoco.pair_geom1.numpy()
    assert sw[g1[:4]].tolist() == [0] * 4 and sw[g1[4:]].tolist() == [1] * 4


def test_invalid_pairs_raise():
    with pytest.raises(MJCFImportError, match="condim"):
        _load(XML.replace('condim="1" adhesion', 'condim="2" adhesion'))
    with pytest.raises(MJCFImportError, match="<pair> unknown geom 'nope' in geom2"):
        _load(XML.replace('geom2="floor"', 'geom2="nope"'))
    with pytest.raises(MJCFImportError, match="unknown default class"):
        _load(XML.replace('class="c2" friction', 'class="c9" friction'))

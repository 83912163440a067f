"""MJCF ``<contact><pair>`` / ``<exclude>`` (``mujoco:pair`` / ``mujoco:exclude`` rows) through
:class:`SolverMuJoCo`: the compiled pairs and excludes match MuJoCo's own compilation of the XML, and
the shadow hand (whose only contacts are explicit pairs) reproduces its MuJoCo reference rollout."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")
pytest.importorskip("armillary_importer_mjcf")

import armillary  # noqa: E402
from armillary.testing.assets import shared_assets_dir  # noqa: E402
from armillary_solver_mujoco.convert import MuJoCoConversionWarning  # noqa: E402
from armillary_solver_mujoco.solver import SolverMuJoCo  # noqa: E402

PAIR_FIELDS = ("pair_dim", "pair_friction", "pair_solref", "pair_solreffriction", "pair_solimp", "pair_margin",
               "pair_gap", "pair_adhesion")  # fmt: skip

PARTIAL_XML = """<mujoco>
  <default>
    <pair solref="0.05 3" friction="0.6 0.5 0.4 0.3 0.2" solimp="0.5 0.6 0.01 0.4 3" margin="0.002"/>
    <geom condim="6" friction="0.3 0.02 0.003" solref="0.03 2" margin="0.01" gap="0.004"/>
    <default class="c1"><pair solref="0.07" friction="0.9" solimp="0.8 0.85" condim="4"/>
      <default class="c2"><pair solimp="0.1" gap="0.01" solreffriction="0.2"/></default>
    </default>
  </default>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 0.1" contype="0" conaffinity="0"/>
    <body name="a" pos="0 0 0.1"><freejoint/><geom name="ga" size="0.1" priority="1"/>
      <body name="a2" pos="0.3 0 0"><joint axis="0 1 0"/><geom name="ga2" type="capsule" size="0.05 0.1"/></body>
    </body>
    <body name="b" pos="0 0 0.3"><freejoint/><geom name="gb" size="0.1" contype="0" conaffinity="0" solmix="3"/></body>
    <body name="c" pos="0.5 0 0.3"><freejoint/><geom name="gc" type="box" size="0.1 0.1 0.1"/></body>
  </worldbody>
  <contact>
    <pair geom1="ga" geom2="gb"/>
    <pair name="p1" geom1="ga" geom2="gb" class="c1" solref="0.08"/>
    <pair geom1="gb" geom2="floor" class="c2" friction="0.1 0.2" condim="1"/>
    <pair geom1="ga2" geom2="gc" solref="-1000 -20" margin="0.03" gap="0.02"/>
    <exclude body1="a" body2="c"/>
    <exclude name="ex_world" body1="world" body2="c"/>
    <exclude body1="a2" body2="c"/>
  </contact>
</mujoco>"""


def _assets():
    d = shared_assets_dir(__file__)
    if d is None:
        pytest.skip("shared assets not found")
    return d


def _shadow_xml():
    path = os.path.join(str(_assets()), "mjcf", "shadow_hand", "hand", "reach.xml")
    if not os.path.exists(path):
        pytest.skip("shadow_hand not in the asset corpus")
    return path


def _convert(xml, **kw):
    b = armillary.ModelBuilder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b.add_mjcf(xml)
        m = b.finalize(device="cpu")
        solver = SolverMuJoCo(m, **kw)
    return b, m, solver


def _raw(xml):
    if xml.lstrip().startswith("<"):
        return mujoco.MjModel.from_xml_string(xml)
    return mujoco.MjModel.from_xml_path(xml)


def _pairs_by_geom_names(mm, geom_name):
    """sorted [(geom name 1, geom name 2, field values...)] of the compiled explicit pairs."""
    out = []
    for i in range(mm.npair):
        n1, n2 = geom_name(int(mm.pair_geom1[i])), geom_name(int(mm.pair_geom2[i]))
        vals = tuple(tuple(np.atleast_1d(getattr(mm, f)[i]).round(12).tolist()) for f in PAIR_FIELDS)
        out.append(tuple(sorted((n1, n2))) + vals)
    return sorted(out)


def _excludes_by_body_names(mm, body_name, names=None):
    out = []
    for i in range(mm.nexclude):
        name = mujoco.mj_id2name(mm, mujoco.mjtObj.mjOBJ_EXCLUDE, i) or ""
        if names is not None and not name.startswith("exclude"):
            continue  # excludes the converter derived from collision filter pairs
        sig = int(mm.exclude_signature[i])
        b1, b2 = sig >> 16, sig & 0xFFFF
        out.append(tuple(sorted((body_name(b1), body_name(b2)))))
    return sorted(out)


def _compare(xml):
    b, m, solver = _convert(xml)
    mm, raw = solver.mj_model, _raw(xml)
    labels = list(m.shape_label)
    blabels = list(m.body_label)

    def conv_geom(g):
        return labels[int(mujoco.mj_id2name(mm, mujoco.mjtObj.mjOBJ_GEOM, g)[1:])]

    def raw_geom(g):
        return mujoco.mj_id2name(raw, mujoco.mjtObj.mjOBJ_GEOM, g)

    def conv_body(i):
        return "world" if i == 0 else blabels[int(mujoco.mj_id2name(mm, mujoco.mjtObj.mjOBJ_BODY, i)[1:])]

    def raw_body(i):
        return mujoco.mj_id2name(raw, mujoco.mjtObj.mjOBJ_BODY, i)

    assert mm.npair == raw.npair
    assert _pairs_by_geom_names(mm, conv_geom) == _pairs_by_geom_names(raw, raw_geom)
    assert _excludes_by_body_names(mm, conv_body, names=True) == _excludes_by_body_names(raw, raw_body)
    return b, m, solver, raw


def test_shadow_hand_pairs_match_mujoco():
    b, m, solver, raw = _compare(_shadow_xml())
    assert raw.npair == 19
    assert b.get_custom_frequency_count("mujoco:pair") == 19


def test_partial_pair_attributes_and_classes_match_mujoco():
    b, m, solver, raw = _compare(PARTIAL_XML)
    assert raw.npair == 4 and raw.nexclude == 3
    mm = solver.mj_model
    # the explicit excludes replace the ones derived from the importer's filter pairs: one per body pair
    sigs = [int(s) for s in mm.exclude_signature]
    assert len(sigs) == len(set(sigs))


def test_pairs_collide_like_mujoco():
    """contact count and contact parameters at the initial pose (gb has contype = conaffinity = 0)."""
    xml = PARTIAL_XML.replace('pos="0 0 0.3"', 'pos="0 0 0.25"')
    b, m, solver = _convert(xml)
    mm, raw = solver.mj_model, _raw(xml)
    # the XML's qpos0 in float64 (same joint layout): this pose puts ga2-gc exactly at margin + gap, and
    # the model's float32 initial state (c at z = 0.30000001) would be 1.2e-8 outside it
    assert mm.nq == raw.nq
    solver.reset_mujoco_state(m.state(), qpos=raw.qpos0.copy(), qvel=np.zeros(raw.nv))
    d, dr = solver.mj_data, mujoco.MjData(raw)
    mujoco.mj_forward(mm, d)
    mujoco.mj_forward(raw, dr)
    assert dr.ncon > 0 and d.ncon == dr.ncon

    def key(c):
        return (int(c.dim), int(c.exclude), round(float(c.dist), 6), tuple(np.round(c.friction, 9)),
                tuple(np.round(c.solref, 9)), tuple(np.round(c.solimp, 9)), round(float(c.includemargin), 9))

    assert sorted(key(d.contact[i]) for i in range(d.ncon)) == sorted(key(dr.contact[i]) for i in range(dr.ncon))


def test_no_pairs_without_mujoco_contacts():
    b, m, solver = _convert(PARTIAL_XML, use_mujoco_contacts=False)
    assert solver.mj_model.npair == 0


def test_shadow_hand_reference_rollout_with_contacts():
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from test_reference_models import imported_solver, rollout_error

    _shadow_xml()
    ref, model, solver, jmap = imported_solver("shadow_hand")
    assert solver.mj_model.npair == 19
    err = rollout_error(ref, model, solver, jmap, "rollout_qpos")
    print(f"shadow_hand rollout_qpos (with contacts): max deviation {err:.3e}")
    assert err <= 1.0e-5, f"shadow_hand with contacts: max deviation {err:.2e}"


def _coded_builder():
    from armillary_solver_mujoco.solver import SolverMuJoCo as S

    b = armillary.ModelBuilder()
    S.register_custom_attributes(b)
    return b


def test_rows_built_in_code_get_mujoco_pair_defaults_and_replicate():
    import warp as wp

    env = _coded_builder()
    bodies = []
    shapes = []
    for x in (0.0, 0.15):
        body = env.add_body(xform=wp.transform((x, 0.0, 0.5), wp.quat_identity()), mass=1.0)
        shapes.append(env.add_shape_sphere(body, radius=0.1))
        bodies.append(body)
    env.add_custom_values({"mujoco:pair_geom1": shapes[0], "mujoco:pair_geom2": shapes[1]})
    env.add_custom_values({"mujoco:exclude_body1": bodies[0], "mujoco:exclude_body2": bodies[1]})
    env.add_custom_values({"mujoco:exclude_body1": -1, "mujoco:exclude_body2": bodies[1]})
    top = _coded_builder()
    top.replicate(env, 3)
    m = top.finalize(device="cpu")
    assert m.custom_frequency_counts["mujoco:pair"] == 3
    g1 = m.mujoco.pair_geom1.numpy()
    assert len(set(g1.tolist())) == 3  # re-mapped per world
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        solver = SolverMuJoCo(m)
    mm = solver.mj_model
    assert mm.npair == 1 and mm.nexclude == 2  # world 0's rows only; no derived duplicate
    bare = mujoco.MjModel.from_xml_string("""<mujoco><worldbody>
        <body name="a"><freejoint/><geom name="a" size="0.1"/></body>
        <body name="b"><freejoint/><geom name="b" size="0.1"/></body>
        </worldbody><contact><pair geom1="a" geom2="b"/></contact></mujoco>""")  # fmt: skip
    for f in PAIR_FIELDS:
        np.testing.assert_allclose(getattr(mm, f), getattr(bare, f), err_msg=f)


def test_pair_on_an_unconverted_shape_is_skipped_with_a_warning():
    import warp as wp

    b = _coded_builder()
    body = b.add_body(xform=wp.transform((0.0, 0.0, 0.5), wp.quat_identity()), mass=1.0)
    s = b.add_shape_sphere(body, radius=0.1)
    site = b.add_site(body, label="site")
    b.add_custom_values({"mujoco:pair_geom1": s, "mujoco:pair_geom2": site, "mujoco:pair_label": "bad"})
    m = b.finalize(device="cpu")
    with pytest.warns(MuJoCoConversionWarning, match="contact pair 0 .'bad'. uses shape"):
        solver = SolverMuJoCo(m)
    assert solver.mj_model.npair == 0


def test_pair_attributes_register_idempotently():
    b = _coded_builder()
    from armillary_solver_mujoco.pairs import register_pair_attributes

    register_pair_attributes(b)
    assert "mujoco:pair" in b.custom_frequencies and "mujoco:exclude" in b.custom_frequencies
    assert b.custom_attributes["mujoco:pair_geom1"].references is not None

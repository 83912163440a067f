"""MJCF tendons (``mujoco:tendon*`` rows) and equality solver parameters through :class:`SolverMuJoCo`:
the compiled MuJoCo model matches MuJoCo's own compilation of the XML, and rollouts reproduce the
MuJoCo reference rollouts (computed by ``armillary.testing.mujoco_refs``, fields in its docstring)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

import armillary  # noqa: E402
from armillary.testing.assets import shared_assets_dir  # noqa: E402
from armillary.testing.mujoco_refs import mujoco_reference  # noqa: E402
from armillary_solver_mujoco.solver import SolverMuJoCo  # noqa: E402

ASSETS = shared_assets_dir(__file__)
MODELS = ("manipulator", "quadruped", "robotiq_2f140", "shadow_hand")
# rollouts with contacts are only compared where the contact model converts exactly: quadruped's
# flat hfield loses its elevation offset in the converter and shadow_hand's <contact><pair>s are not
# converted (see the report in test output); their no-contact rollouts are compared


def _ref(name):
    ref = mujoco_reference(name, ASSETS)
    return ref, str(ref.xml)


def _convert(xml):
    b = armillary.ModelBuilder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b.add_mjcf(xml)
        m = b.finalize()
        solver = SolverMuJoCo(m)
    return b, m, solver


def _raw_joint_of(b, mm):
    """converted MuJoCo joint id -> raw MuJoCo joint name."""
    out = {}
    for name, (j, k, _, _) in b.mjcf_imports[-1]["joints"].items():
        for cand in (f"j{j}_{k}", f"j{j}"):
            jid = mujoco.mj_name2id(mm, mujoco.mjtObj.mjOBJ_JOINT, cand)
            if jid >= 0:
                out[jid] = name
                break
    return out


@pytest.mark.parametrize("name", MODELS)
def test_compiled_tendons_and_equalities_match_mujoco(name):
    ref, xml = _ref(name)
    b, m, solver = _convert(xml)
    mm, raw = solver.mj_model, mujoco.MjModel.from_xml_path(xml)
    assert mm.ntendon == raw.ntendon > 0
    assert mm.nwrap == raw.nwrap
    for field in ("tendon_num", "tendon_limited", "tendon_range", "tendon_stiffness", "tendon_damping",
                  "tendon_frictionloss", "tendon_lengthspring", "tendon_margin", "tendon_armature",
                  "tendon_solref_lim", "tendon_solimp_lim", "tendon_solref_fri", "tendon_solimp_fri",
                  "tendon_length0", "wrap_type", "wrap_prm"):  # fmt: skip
        np.testing.assert_allclose(getattr(mm, field), getattr(raw, field), rtol=1e-9, atol=1e-12, err_msg=field)
    # fixed-tendon joints: same joints (by name) in the same order
    names = _raw_joint_of(b, mm)
    for w in range(raw.nwrap):
        if raw.wrap_type[w] == mujoco.mjtWrap.mjWRAP_JOINT:
            raw_name = mujoco.mj_id2name(raw, mujoco.mjtObj.mjOBJ_JOINT, int(raw.wrap_objid[w]))
            assert names[int(mm.wrap_objid[w])] == raw_name
    # equalities (tendon couplings here): type, data and solver parameters
    assert mm.neq == raw.neq
    for e in range(raw.neq):
        assert mm.eq_type[e] == raw.eq_type[e]
        np.testing.assert_allclose(mm.eq_solref[e], raw.eq_solref[e], err_msg=f"eq {e} solref")
        np.testing.assert_allclose(mm.eq_solimp[e], raw.eq_solimp[e], err_msg=f"eq {e} solimp")
        if raw.eq_type[e] == mujoco.mjtEq.mjEQ_TENDON:
            np.testing.assert_allclose(mm.eq_data[e][:5], raw.eq_data[e][:5])
            assert mm.eq_obj1id[e] == raw.eq_obj1id[e] and mm.eq_obj2id[e] == raw.eq_obj2id[e]


def _rollout_errors(name):
    """(max error with contacts, without) of 200-step SolverMuJoCo rollouts against the reference."""
    ref, xml = _ref(name)
    b, m, solver = _convert(xml)
    mm = solver.mj_model
    info = b.mjcf_imports[-1]
    sizes = {0: (7, 6), 1: (4, 3), 2: (1, 1), 3: (1, 1)}
    jmap = []  # (raw qposadr, converted qposadr, nq, raw dofadr, converted dofadr, nv)
    for jn, t, qa, da in zip(ref["jnt_names"], ref["jnt_type"], ref["jnt_qposadr"], ref["jnt_dofadr"]):
        j, k, _, _ = info["joints"][str(jn)]
        cid = mujoco.mj_name2id(mm, mujoco.mjtObj.mjOBJ_JOINT, f"j{j}")
        if cid < 0:
            cid = mujoco.mj_name2id(mm, mujoco.mjtObj.mjOBJ_JOINT, f"j{j}_{k}")
        nq, nv = sizes[int(t)]
        jmap.append((int(qa), int(mm.jnt_qposadr[cid]), nq, int(da), int(mm.jnt_dofadr[cid]), nv))
    dt = float(ref["timestep"])
    flags0 = int(mm.opt.disableflags) | int(mujoco.mjtDisableBit.mjDSBL_ACTUATION)
    errors = {}
    for key, extra in (("rollout_qpos", 0), ("rollout_nocontact_qpos", int(mujoco.mjtDisableBit.mjDSBL_CONTACT))):
        mm.opt.disableflags = flags0 | extra
        worst = 0.0
        for s in range(ref["qpos"].shape[0]):
            qpos, qvel = mm.qpos0.copy(), np.zeros(mm.nv)
            for qa, ca, nq, da, cda, nv in jmap:
                qpos[ca:ca + nq] = ref["qpos"][s][qa:qa + nq]
                qvel[cda:cda + nv] = ref["qvel"][s][da:da + nv]
            q = m.joint_q.numpy().astype(np.float64)
            qd = np.zeros(m.joint_dof_count)
            solver.state_map.from_mujoco(qpos[None], qvel[None], q, qd)
            s0, s1 = m.state(), m.state()
            s0.joint_q.assign(q.astype(np.float32))
            s0.joint_qd.assign(qd.astype(np.float32))
            solver.reset_mujoco_state(s0, qpos=qpos, qvel=qvel)
            for step in range(1, 201):
                solver.step(s0, s1, None, None, dt)
                s0, s1 = s1, s0
                if step % 10:
                    continue
                cur = solver.mj_datas[0].qpos
                r = ref[key][s][step // 10]
                for qa, ca, nq, _, _, _ in jmap:
                    a, e = cur[ca:ca + nq], r[qa:qa + nq]
                    if nq in (4, 7):
                        worst = max(worst, 1.0 - abs(float(np.dot(a[-4:], e[-4:]))))
                        if nq == 7:
                            worst = max(worst, float(np.abs(a[:3] - e[:3]).max()))
                    else:
                        worst = max(worst, abs(float(a[0] - e[0])))
        errors[key] = worst
    mm.opt.disableflags = flags0
    return errors["rollout_qpos"], errors["rollout_nocontact_qpos"]


# The reference rollouts of these models (with and without contacts) are checked in
# test_reference_models.py with the other corpus models.


SPATIAL_XML = """<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <site name="anchor" pos="0 0 1"/>
    <body name="a" pos="0 0 0.5"><joint name="ja" axis="0 1 0" damping="0.1"/>
      <geom name="wrap" type="cylinder" size="0.05 0.02" quat="0.7071 0.7071 0 0" contype="2" conaffinity="2"
            density="0"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.4" size="0.02"/>
      <site name="side" pos="0.1 0 0"/><site name="mid" pos="0.06 0 -0.2"/>
      <body name="b" pos="0 0 -0.4"><joint name="jb" axis="0 1 0" ref="0.3"/>
        <joint name="jc" type="slide" axis="1 0 0" ref="0.02" damping="1"/><geom size="0.05"/>
        <site name="end" pos="0.05 0 -0.05"/></body>
    </body>
  </worldbody>
  <tendon>
    <spatial name="sp" limited="true" range="0 1.2" stiffness="40" damping="2">
      <site site="anchor"/><geom geom="wrap" sidesite="side"/><site site="mid"/><pulley divisor="2"/>
      <site site="mid"/><site site="end"/>
    </spatial>
    <fixed name="fx" stiffness="5" frictionloss="0.01">
      <joint joint="ja" coef="1"/><joint joint="jb" coef="-0.5"/>
    </fixed>
  </tendon>
  <equality><tendon tendon1="fx" polycoef="0.05" solref="0.01 1"/><tendon tendon1="sp" polycoef="-0.01"/></equality>
</mujoco>"""


def _spatial(xml):
    b = armillary.ModelBuilder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b.add_mjcf(xml)
    m = b.finalize()
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        solver = SolverMuJoCo(m)
    assert not [str(w.message) for w in rec if "tendon" in str(w.message)]
    raw = mujoco.MjModel.from_xml_string(xml)
    # both start at MuJoCo's raw qpos0 (joints at their ref)
    s0 = m.state()
    q = m.joint_q.numpy().astype(np.float64)
    qd = np.array([0.5, -1.0, 0.2])
    s0.joint_q.assign(q.astype(np.float32))
    s0.joint_qd.assign(qd.astype(np.float32))
    qpos, qvel = solver.state_map.to_mujoco(q, qd)
    solver.reset_mujoco_state(s0, qpos=qpos[0], qvel=qvel[0])
    d_raw = mujoco.MjData(raw)
    d_raw.qpos[:] = raw.qpos0
    d_raw.qvel[:] = qd
    return m, solver, raw, d_raw, s0


def test_spatial_tendon_and_reference_offsets_match_mujoco():
    """Spatial path (sites, wrapping geom with side site, pulley), a fixed tendon over joints with
    ``ref`` and tendon equalities on both: same lengths, spring lengths and equality violations."""
    xml = SPATIAL_XML.replace("<mujoco>", '<mujoco><compiler angle="radian"/>')
    m, solver, raw, d_raw, _ = _spatial(xml)
    mm, d = solver.mj_model, solver.mj_datas[0]
    assert mm.ntendon == 2 and mm.nwrap == raw.nwrap == 8
    np.testing.assert_array_equal(mm.wrap_type, raw.wrap_type)
    np.testing.assert_allclose(mm.wrap_prm, raw.wrap_prm)
    np.testing.assert_allclose(mm.tendon_lengthspring, raw.tendon_lengthspring, atol=1e-9)
    mujoco.mj_forward(raw, d_raw)
    mujoco.mj_forward(mm, d)
    assert abs(raw.qpos0[1]) == 0.3  # the equalities are measured from there
    np.testing.assert_allclose(d.ten_length, d_raw.ten_length, atol=1e-9)
    EQ = mujoco.mjtConstraint.mjCNSTR_EQUALITY
    eq, eq_raw = d.efc_type == EQ, d_raw.efc_type == EQ
    np.testing.assert_allclose(d.efc_pos[eq], d_raw.efc_pos[eq_raw], atol=1e-9)


def test_spatial_tendon_rollout_matches_mujoco():
    # no joint ref here: MuJoCo's constraint scaling (invweight0) is taken at qpos0, which the
    # converter puts at zero joint coordinates
    xml = SPATIAL_XML.replace(' ref="0.3"', "").replace(' ref="0.02"', "")
    m, solver, raw, d_raw, s0 = _spatial(xml)
    d, s1 = solver.mj_datas[0], m.state()
    for _ in range(300):
        solver.step(s0, s1, None, None, raw.opt.timestep)
        s0, s1 = s1, s0
        mujoco.mj_step(raw, d_raw)
    np.testing.assert_allclose(d.qpos, d_raw.qpos, atol=1e-6)
    # tendon lengths of the final qpos on both sides (the solver may already hold mj_step1 of it)
    mujoco.mj_forward(solver.mj_models[0], d)
    mujoco.mj_forward(raw, d_raw)
    np.testing.assert_allclose(d.ten_length, d_raw.ten_length, atol=1e-6)


def test_tendon_on_a_dropped_geom_is_skipped_with_a_warning():
    """A wrap geom the converter does not keep (here a visual-only geom) drops its tendon, with a note."""
    xml = SPATIAL_XML.replace('contype="2" conaffinity="2"', 'contype="0" conaffinity="0"')
    b = armillary.ModelBuilder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b.add_mjcf(xml)
    m = b.finalize()
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        solver = SolverMuJoCo(m)
    notes = [str(w.message) for w in rec if "tendon" in str(w.message)]
    if solver.mj_model.ntendon == 2:
        pytest.skip("the converter keeps visual-only wrap geoms")
    assert solver.mj_model.ntendon == 1
    assert any("spatial tendon 0" in n and "not converted" in n for n in notes), notes
    assert solver.mj_model.neq == 1  # the fixed tendon and its equality remain
    assert any("tendon equality 1" in n for n in notes), notes


def test_tendon_attributes_register_idempotently():
    from armillary_solver_mujoco.attributes import register

    b = armillary.ModelBuilder()
    register(b)
    n = len(b.custom_attributes)
    register(b)
    assert len(b.custom_attributes) == n
    assert {"mujoco:tendon", "mujoco:tendon_joint", "mujoco:tendon_wrap", "mujoco:tendon_equality"} <= set(
        b.custom_frequencies
    )

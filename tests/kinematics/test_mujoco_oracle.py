"""Kinematics and joint-space dynamics of the shared robot models against MuJoCo's C engine.

For every MJCF model of the corpus (MuJoCo references computed by
:mod:`armillary.testing.mujoco_refs`) the compiled MuJoCo model is converted
with :mod:`tests.oracle.mujoco_to_builder` (independent of the MJCF importer), the five
reference states are set in five worlds at once, and body poses, COM positions, the mass
matrix (with armature), ``qfrc_bias`` and ``qfrc_gravity`` are compared. MuJoCo's
generalized coordinates differ from ours for free and ball joints: with ``qd = T qvel``,
``M_mj = T^T M T``, ``g_mj = T^T g`` and ``bias_mj = T^T (C qd + g + M dT/dt qvel)`` (the
last term: MuJoCo's zero-acceleration frame holds the body origin still, ours the COM).
"""

from __future__ import annotations

import os
import sys
import warnings

import numpy as np
import pytest
import warp as wp

mujoco = pytest.importorskip("mujoco")

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
from tests.oracle.mujoco_to_builder import builder_from_mjmodel  # noqa: E402

import armillary  # noqa: E402
from armillary.testing.assets import shared_assets_dir  # noqa: E402
from armillary.testing.mujoco_refs import mujoco_reference, reference_models  # noqa: E402

POSE_RTOL = 1.0e-5
"""body origins / COMs: max error <= POSE_RTOL * max(1 m, model extent); rotations: angle <= POSE_RTOL rad."""
DYN_RTOL = 1.0e-4
"""mass matrix, bias and gravity forces: max abs error <= DYN_RTOL * max abs reference entry (float32)."""

ASSETS = shared_assets_dir(__file__)
MODELS = reference_models(ASSETS)


@pytest.fixture(scope="module", params=MODELS)
def evaluated(request, tmp_path_factory):
    ref = mujoco_reference(request.param, ASSETS)
    cwd = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("mujoco_log"))  # MuJoCo writes compiler warnings to ./MUJOCO_LOG.TXT
    try:
        mj = mujoco.MjModel.from_xml_path(str(ref.xml))
    finally:
        os.chdir(cwd)
    conv = builder_from_mjmodel(mj, armillary)
    K = ref["qpos"].shape[0]
    scene = armillary.ModelBuilder(gravity=tuple(float(g) for g in mj.opt.gravity))
    scene.replicate(conv.builder, K)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = scene.finalize(device="cpu", skip_validation_inertia=True)
    state = model.state()
    nq, nd = conv.builder.joint_coord_count, conv.builder.joint_dof_count
    q = np.concatenate([conv.joint_q(ref["qpos"][k]) for k in range(K)]).astype(np.float32)
    qd = np.concatenate([conv.joint_qd(ref["qpos"][k], ref["qvel"][k]) for k in range(K)]).astype(np.float32)
    state.joint_q.assign(q)
    state.joint_qd.assign(qd)
    armillary.eval_fk(model, state.joint_q, state.joint_qd, state)
    n = model.max_dofs_per_articulation
    H = wp.zeros((model.articulation_count, n, n), dtype=wp.float32)
    g = wp.zeros(model.joint_dof_count, dtype=wp.float32)
    c = wp.zeros(model.joint_dof_count, dtype=wp.float32)
    armillary.eval_inverse_dynamics_passive(model, state, mass_matrix=H, gravity_force=g, coriolis_force=c)
    out = dict(ref=ref, mj=mj, conv=conv, model=model, K=K, nb=conv.builder.body_count, nq=nq, nd=nd,
               body_q=state.body_q.numpy().astype(np.float64), H=H.numpy().astype(np.float64),
               g=g.numpy().astype(np.float64), c=c.numpy().astype(np.float64))  # fmt: skip
    return out


def _full_mass_matrix(e, k):
    """Dense (nv, nv) mass matrix of world ``k`` assembled from the per-articulation blocks."""
    m = e["model"]
    a_start = m.articulation_start.numpy()
    a_end = m.articulation_end.numpy()
    qd_start = m.joint_qd_start.numpy()
    nd = e["nd"]
    M = np.zeros((nd, nd))
    for a in range(m.articulation_count):
        d0, d1 = qd_start[a_start[a]], qd_start[a_end[a]]
        if d0 // nd != k or d1 == d0:
            continue
        lo = d0 - k * nd
        M[lo : lo + d1 - d0, lo : lo + d1 - d0] = e["H"][a, : d1 - d0, : d1 - d0]
    return M


def _rel_err(a, b):
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-9)) if b.size else 0.0


def test_body_poses_and_coms(evaluated):
    e = evaluated
    ref, conv, nb = e["ref"], e["conv"], e["nb"]
    com = e["model"].body_com.numpy().astype(np.float64)
    extent = max(1.0, float(np.abs(ref["xpos"]).max()))
    worst_p, worst_r = 0.0, 0.0
    for k in range(e["K"]):
        for i_mj, i_ours in conv.body_map.items():
            b = k * nb + i_ours
            X = e["body_q"][b]
            p, quat = X[:3], X[3:]
            quat_ref = np.roll(ref["xquat"][k, i_mj], -1)  # wxyz -> xyzw
            rel = _quat_mul(_quat_conj(quat_ref), quat / np.linalg.norm(quat))
            angle = 2.0 * np.arcsin(min(1.0, np.linalg.norm(rel[:3])))
            worst_p = max(worst_p, np.abs(p - ref["xpos"][k, i_mj]).max() / extent)
            worst_r = max(worst_r, angle)
            xipos = p + _quat_rotate(quat / np.linalg.norm(quat), com[b])
            worst_p = max(worst_p, np.abs(xipos - ref["xipos"][k, i_mj]).max() / extent)
    print(f"{_name_of(e)}: pose rel {worst_p:.2e}, rotation {worst_r:.2e} rad")
    assert worst_p <= POSE_RTOL
    assert worst_r <= POSE_RTOL


def test_mass_matrix_and_bias_forces(evaluated):
    e = evaluated
    ref, conv, nd = e["ref"], e["conv"], e["nd"]
    errs = {"M": 0.0, "bias": 0.0, "gravity": 0.0}
    for k in range(e["K"]):
        qpos, qvel = ref["qpos"][k], ref["qvel"][k]
        T = conv.velocity_map(qpos)
        M = _full_mass_matrix(e, k)
        g = e["g"][k * nd : (k + 1) * nd]
        c = e["c"][k * nd : (k + 1) * nd]
        kappa = conv.velocity_map_rate(qpos, qvel)
        errs["M"] = max(errs["M"], _rel_err(T.T @ M @ T, ref["M"][k]))
        errs["gravity"] = max(errs["gravity"], _rel_err(T.T @ g, ref["qfrc_gravity"][k]))
        errs["bias"] = max(errs["bias"], _rel_err(T.T @ (c + g + M @ kappa), ref["qfrc_bias"][k]))
    print(f"{_name_of(e)}: " + ", ".join(f"{k} {v:.2e}" for k, v in errs.items()))
    for k, v in errs.items():
        assert v <= DYN_RTOL, f"{k}: relative error {v:.3e} > {DYN_RTOL}"


def test_ik_recovers_reference_coordinates(evaluated):
    """eval_ik on the FK body state gives back the MuJoCo coordinates (quaternions up to sign)."""
    e = evaluated
    m = e["model"]
    state = m.state()
    state.body_q.assign(e["body_q"].astype(np.float32))
    q_fk = wp.zeros(m.joint_coord_count, dtype=wp.float32)
    qd_fk = wp.zeros(m.joint_dof_count, dtype=wp.float32)
    # body velocities from FK of the reference velocities
    K, nq, nd = e["K"], e["nq"], e["nd"]
    conv, ref = e["conv"], e["ref"]
    q = np.concatenate([conv.joint_q(ref["qpos"][k]) for k in range(K)]).astype(np.float32)
    qd = np.concatenate([conv.joint_qd(ref["qpos"][k], ref["qvel"][k]) for k in range(K)]).astype(np.float32)
    armillary.eval_fk(m, wp.array(q), wp.array(qd), state)
    armillary.eval_ik(m, state, q_fk, qd_fk)
    q_ik, qd_ik = q_fk.numpy(), qd_fk.numpy()
    jt = m.joint_type.numpy()
    qs = m.joint_q_start.numpy()
    for j in range(m.joint_count):
        a, b = qs[j], qs[j + 1]
        if jt[j] in (int(armillary.JointType.FREE), int(armillary.JointType.BALL)):
            quat_a, quat_b = q_ik[b - 4 : b], q[b - 4 : b]
            assert abs(abs(np.dot(quat_a, quat_b)) - 1.0) < 1e-5
            assert np.allclose(q_ik[a : b - 4], q[a : b - 4], atol=1e-5)
        elif jt[j] == int(armillary.JointType.REVOLUTE):  # principal angles: compare modulo 2 pi
            d = (q_ik[a:b] - q[a:b] + np.pi) % (2 * np.pi) - np.pi
            assert np.abs(d).max() < 2e-5, (j, q_ik[a:b], q[a:b])
        else:
            assert np.allclose(q_ik[a:b], q[a:b], atol=2e-5), (j, q_ik[a:b], q[a:b])
    assert np.allclose(qd_ik, qd, atol=1e-4 * max(1.0, np.abs(qd).max()))


def _name_of(e):
    return str(e["ref"]["model_file"])


def _quat_conj(q):
    return np.array([-q[0], -q[1], -q[2], q[3]])


def _quat_mul(a, b):
    av, aw, bv, bw = a[:3], a[3], b[:3], b[3]
    return np.concatenate([aw * bv + bw * av + np.cross(av, bv), [aw * bw - av @ bv]])


def _quat_rotate(q, v):
    u, w = q[:3], q[3]
    return v + 2.0 * np.cross(u, np.cross(u, v) + w * v)

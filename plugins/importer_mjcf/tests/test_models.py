"""Every MJCF model of the shared asset corpus imports and matches MuJoCo's compiled model.

Masses, centers of mass and inertias are compared with ``mujoco.MjModel`` (inertias as full body-frame
matrices ``R diag(I) R^T``, so the principal-axes choice does not matter); forward kinematics at the five
MuJoCo reference configurations (``armillary.testing.mujoco_refs``) is compared with ``xpos``/``xquat``, with the
importer's host transforms (always) and with ``armillary.eval_fk`` (when the core provides it).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from _mjcf_helpers import host_fk, mjcf_models, mujoco_ref

MODELS = mjcf_models()
mujoco = pytest.importorskip("mujoco")

pytestmark = pytest.mark.skipif(not MODELS, reason="robot-model corpus (armillary.testing.assets) not found")


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    import os

    import armillary

    log_dir = str(tmp_path_factory.mktemp("mujoco_log"))  # MuJoCo writes compiler warnings to ./MUJOCO_LOG.TXT

    cache = {}

    def get(name):
        if name not in cache:
            b = armillary.ModelBuilder()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                b.add_mjcf(MODELS[name])
            cwd = os.getcwd()
            os.chdir(log_dir)
            try:
                m = mujoco.MjModel.from_xml_path(MODELS[name])
            finally:
                os.chdir(cwd)
            cache[name] = (b, m)
        return cache[name]

    return get


def _body_map(b, m):
    """MuJoCo body id -> armillary body index; unnamed bodies matched by depth-first order."""
    info = b.mjcf_imports[-1]
    by_order = sorted(info["bodies"].values())
    out = {}
    for i in range(1, m.nbody):
        name = m.body(i).name
        out[i] = info["bodies"][name] if name else by_order[i - 1]
    return out


@pytest.mark.parametrize("name", sorted(MODELS))
def test_structure_matches_mujoco(name, imported):
    b, m = imported(name)
    info = b.mjcf_imports[-1]
    assert len(info["bodies"]) == m.nbody - 1
    named = [m.body(i).name for i in range(1, m.nbody) if m.body(i).name]
    assert all(n in info["bodies"] for n in named)
    # labels keep the file's names
    for n in named:
        assert b.body_label[info["bodies"][n]] == n
    assert b.joint_dof_count == m.nv
    assert b.joint_coord_count == m.nq
    for j in range(m.njnt):
        jn = m.joint(j).name
        if jn:
            assert jn in info["joints"], jn
            assert jn in b.joint_label[info["joints"][jn][0]]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_mass_properties_match_mujoco(name, imported):
    b, m = imported(name)
    for i, k in _body_map(b, m).items():
        assert b.body_mass[k] == pytest.approx(m.body_mass[i], rel=1e-9, abs=1e-12), m.body(i).name
        if m.body_mass[i] <= 0:
            continue  # MuJoCo reports an arbitrary frame for massless bodies
        np.testing.assert_allclose(np.array(b.body_com[k]), m.body_ipos[i], atol=1e-6, err_msg=m.body(i).name)
        r = np.zeros(9)
        mujoco.mju_quat2Mat(r, m.body_iquat[i])
        r = r.reshape(3, 3)
        inertia = r @ np.diag(m.body_inertia[i]) @ r.T
        ours = np.array(b.body_inertia[k], dtype=np.float64).reshape(3, 3)
        np.testing.assert_allclose(ours, inertia, atol=1e-6 * max(1e-12, np.abs(inertia).max()) + 1e-12, rtol=1e-5,
                                   err_msg=m.body(i).name)  # fmt: skip


def _fk_check(name, b, m, poses_of_state):
    from armillary_importer_mjcf.importer import mujoco_qpos_to_joint_q

    ref = mujoco_ref(name)
    bmap = _body_map(b, m)
    worst = 0.0
    for s in range(ref["qpos"].shape[0]):
        q = mujoco_qpos_to_joint_q(b, ref["qpos"][s], mj_joint_names=ref["jnt_names"], mj_joint_types=ref["jnt_type"],
                                   mj_qposadr=ref["jnt_qposadr"])  # fmt: skip
        poses = poses_of_state(q)
        for i, k in bmap.items():
            p, qq = poses[k]
            xpos, xquat = ref["xpos"][s, i], ref["xquat"][s, i]
            scale = max(1.0, float(np.abs(xpos).max()))
            err_p = float(np.abs(np.asarray(p) - xpos).max()) / scale
            wq = np.array([qq[3], qq[0], qq[1], qq[2]])
            err_q = 1.0 - abs(float(np.dot(wq, xquat)))
            worst = max(worst, err_p, err_q)
            assert err_p < 1e-5 and err_q < 1e-5, f"{name} state {s} body {m.body(i).name}: dp={err_p:.2e} dq={err_q:.2e}"
    return worst


@pytest.mark.parametrize("name", sorted(MODELS))
def test_forward_kinematics_host(name, imported):
    b, m = imported(name)
    _fk_check(name, b, m, lambda q: host_fk(b, q))


def _eval_fk_available():
    try:
        import armillary

        return callable(getattr(armillary, "eval_fk", None))
    except Exception:
        return False


@pytest.mark.skipif(not _eval_fk_available(), reason="armillary.eval_fk is not available in this core build yet")
@pytest.mark.parametrize("name", sorted(MODELS))
def test_forward_kinematics_eval_fk(name, imported):
    import armillary

    b, m = imported(name)
    model = b.finalize(device="cpu")
    state = model.state()

    def poses(q):
        import warp as wp

        jq = wp.array(np.asarray(q, dtype=np.float32), dtype=wp.float32, device="cpu")
        armillary.eval_fk(model, jq, state.joint_qd, state)
        bq = state.body_q.numpy()
        return [(bq[i, :3].astype(np.float64), bq[i, 3:].astype(np.float64)) for i in range(len(bq))]

    _fk_check(name, b, m, poses)

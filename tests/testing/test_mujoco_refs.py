"""MuJoCo reference data computed at test time (armillary.testing.mujoco_refs)."""

from __future__ import annotations

import hashlib
import zlib

import numpy as np
import pytest

from armillary.testing import mujoco_refs
from armillary.testing.mujoco_refs import compute_reference, model_path, mujoco_reference, reference_models

mujoco = pytest.importorskip("mujoco")

# the first random state of two models, as the procedure drew them with numpy 2 / MuJoCo 4.0.0 (it only
# depends on numpy's PCG64 stream and the compiled joint ranges)
PINNED = {
    "cartpole": ([0.8793707947360156, 0.8282606062133682], [0.07036447436147464, -0.7798374979434246]),
    "ant": (
        [0.13177902361883903, -0.0856280831119583, 0.8385200079740107, 0.8371709064771127, -0.41724681860846646,
         -0.14162359149095327, 0.32402580767989264, -0.14184034894314757, 1.1846436601911718, -0.35915358686589627,
         -0.8927918915550437, -0.1622445346150891, -0.5653011919575172, -0.26981966792015416, 0.8108891945951452],
        [-0.8925172565768023, -0.9707930909346145, 0.8667431776742145, -0.49976801576951213, -0.20804693103003347,
         0.04638021549275395, 0.03403150684598666, -0.9306962427966881, 0.6653072281860086, -0.14174786788506877,
         -0.05945414643712543, -0.6296801729195836, -0.2774101305533556, -0.9131788203437585],
    ),
}  # fmt: skip


def test_reference_models_are_the_corpus_mjcf_models():
    assert reference_models() == ["ant", "cartpole", "cheetah", "humanoid", "jaco_arm", "manipulator", "pusher",
                                  "quadruped", "robotiq_2f140", "shadow_hand", "xarm7"]  # fmt: skip


@pytest.mark.parametrize("name", sorted(PINNED))
def test_random_states_follow_the_documented_procedure(name):
    ref = mujoco_reference(name)
    qpos, qvel = PINNED[name]
    np.testing.assert_allclose(ref["qpos"][0], qpos, rtol=0, atol=1e-12)
    np.testing.assert_allclose(ref["qvel"][0], qvel, rtol=0, atol=1e-12)
    assert int(ref["seed"]) == mujoco_refs.SEED_BASE + zlib.crc32(name.encode())


@pytest.mark.parametrize("name", ["cartpole", "ant"])
def test_fields_are_consistent_with_mujoco(name):
    ref = mujoco_reference(name)
    m = mujoco.MjModel.from_xml_path(str(ref.xml))
    K, S = mujoco_refs.N_STATES, mujoco_refs.N_STEPS // mujoco_refs.SAMPLE_EVERY + 1
    assert ref["qpos"].shape == (K, m.nq) and ref["qvel"].shape == (K, m.nv)
    assert ref["xpos"].shape == (K, m.nbody, 3) and ref["xquat"].shape == (K, m.nbody, 4)
    assert ref["M"].shape == (K, m.nv, m.nv)
    assert ref["rollout_qpos"].shape == ref["rollout_nocontact_qpos"].shape == (K, S, m.nq)
    assert ref["rollout_ok"].all() and ref["rollout_nocontact_ok"].all()
    assert str(ref["model_file"]) == ref.xml.name
    assert str(ref["model_sha256"]) == hashlib.sha256(ref.xml.read_bytes()).hexdigest()
    assert str(ref["mujoco_version"]) == mujoco.__version__
    assert int(ref["disableflags"]) == m.opt.disableflags  # the model's own flags, not the actuation-off ones
    for k in range(K):
        M = ref["M"][k]
        np.testing.assert_allclose(M, M.T, atol=1e-12)
        acc = np.linalg.solve(M, ref["qfrc_passive"][k] - ref["qfrc_bias"][k])
        np.testing.assert_allclose(acc, ref["qacc_smooth"][k], rtol=1e-8, atol=1e-8)
        np.testing.assert_array_equal(ref["rollout_qpos"][k, 0], ref["qpos"][k])
        np.testing.assert_array_equal(ref["rollout_nocontact_qvel"][k, 0], ref["qvel"][k])
        for j in np.flatnonzero(ref["jnt_limited"]):
            lo, hi = ref["jnt_range"][j]
            assert lo <= ref["qpos"][k, ref["jnt_qposadr"][j]] <= hi
    # gravity-only bias: the same state with zero velocity
    d = mujoco.MjData(m)
    d.qpos[:] = ref["qpos"][2]
    mujoco.mj_forward(m, d)
    np.testing.assert_array_equal(d.qfrc_bias, ref["qfrc_gravity"][2])
    np.testing.assert_array_equal(d.xpos, ref["xpos"][2])


def test_rollout_is_mujoco_stepping_with_actuation_off():
    ref = mujoco_reference("cartpole")
    m = mujoco.MjModel.from_xml_path(str(ref.xml))
    m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_ACTUATION) | int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = ref["qpos"][3], ref["qvel"][3]
    for _ in range(30):
        mujoco.mj_step(m, d)
    np.testing.assert_array_equal(d.qpos, ref["rollout_nocontact_qpos"][3, 3])


def test_computation_is_deterministic_and_cached():
    ref = mujoco_reference("cartpole")
    assert mujoco_reference("cartpole") is ref
    again = compute_reference(ref.xml, "cartpole")
    assert sorted(again) == sorted(ref.files)
    for key in ref:
        np.testing.assert_array_equal(again[key], ref[key], err_msg=key)


def test_cached_arrays_are_read_only():
    ref = mujoco_reference("cartpole")
    with pytest.raises(ValueError, match="read-only"):
        ref["qpos"][0, 0] = 1.0
    with pytest.raises(KeyError, match="'cartpole' has no field 'qpoz'"):
        ref["qpoz"]


def test_unknown_and_non_mjcf_models_are_rejected():
    with pytest.raises(KeyError, match=r"corpus model 'nope' is not in .*catalog\.json; models: \["):
        model_path("nope")
    with pytest.raises(ValueError, match=r"'panda' is 'urdf'; MuJoCo references exist for MJCF models only"):
        mujoco_reference("panda")


def test_missing_corpus_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="robot-model corpus not found"):
        reference_models(tmp_path)

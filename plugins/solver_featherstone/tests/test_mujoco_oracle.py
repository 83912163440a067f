"""SolverFeatherstone against MuJoCo C on every fixed-base model of the shared corpus.

Two checks per model, both from the five MuJoCo reference initial states (``armillary.testing.mujoco_refs``):

1. ``test_rollout_matches_mujoco_euler``: MuJoCo steps the same XML with its semi-implicit
   Euler integrator (implicit joint damping, like ours) at the model's own time step; the
   constraint-based features that Featherstone models differently or not at all are
   disabled on both sides (joint/tendon limits, frictionloss, equality constraints,
   actuation, contacts). Then both integrate the same ODE with the same scheme, so the
   trajectories agree to float32 round-off: ``TOL_EARLY`` over the first 50 steps and
   ``TOL_FULL`` over all 200 (errors grow with time on the chaotic four-bar gripper).
2. ``test_reference_rollout``: the reference ``rollout_nocontact_qpos`` (MuJoCo with the model's
   own integrator and every non-contact constraint active) for the models whose rollout only
   uses what Featherstone models (no frictionloss, equality constraints or tendon limits:
   cartpole, cheetah, pusher), compared over the samples before MuJoCo's trajectory comes
   within ``LIMIT_BAND`` of a joint limit (MuJoCo's soft-constraint limits and our penalty
   limits are different models). cartpole's reference uses RK4 at 10 ms: we take 100 Euler
   substeps per step, so the remaining error is Euler's O(dt) (``TOL_RK4``).
   Excluded (and why): jaco_arm and xarm7 (frictionloss), manipulator and robotiq_2f140
   (equality constraints), shadow_hand (tendon limits; xarm7 also uses implicitfast).
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
import warp as wp

mujoco = pytest.importorskip("mujoco")
pytest.importorskip("armillary_importer_mjcf")

import armillary  # noqa: E402
from armillary.testing.assets import shared_assets_dir  # noqa: E402
from armillary.testing.mujoco_refs import mujoco_reference  # noqa: E402

TOL_EARLY = 1.0e-5  # rad or m, first 50 steps
TOL_FULL = 5.0e-4  # rad or m, all 200 steps
TOL_REF = 1.0e-5  # stored Euler reference, before limits
TOL_RK4 = 2.0e-3  # stored RK4 reference (cartpole), 100 Euler substeps per step
LIMIT_BAND = 0.02  # rad or m

ASSETS = shared_assets_dir()
FIXED_BASE = ["cartpole", "cheetah", "jaco_arm", "manipulator", "pusher", "robotiq_2f140", "shadow_hand", "xarm7"]
REFERENCE_OK = ["cartpole", "cheetah", "pusher"]


def _reference(name):
    ref = mujoco_reference(name, ASSETS)
    return ref, str(ref.xml)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from armillary_importer_mjcf.importer import mujoco_qpos_to_joint_q

    from armillary_solver_featherstone.solver import SolverFeatherstone

    log_dir = str(tmp_path_factory.mktemp("mujoco_log"))  # MuJoCo writes compiler warnings to ./MUJOCO_LOG.TXT
    cache = {}

    def get(name):
        if name in cache:
            return cache[name]
        ref, xml = _reference(name)
        b = armillary.ModelBuilder()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            b.add_mjcf(xml)
        info = b.mjcf_imports[-1]
        model = b.finalize(device="cpu")
        # actuation is disabled in every reference: no drives
        model.joint_target_ke.zero_()
        model.joint_target_kd.zero_()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            solver = SolverFeatherstone(model, angular_damping=0.0)
        q_map, qd_map = [], []
        for jn, t, qa, da in zip(ref["jnt_names"], ref["jnt_type"], ref["jnt_qposadr"], ref["jnt_dofadr"]):
            assert int(t) in (2, 3), f"{name}: fixed-base models have hinge/slide joints only"
            j, k, _, _ = info["joints"][str(jn)]
            q_map.append((b.joint_q_start[j] + k, int(qa)))
            qd_map.append((b.joint_qd_start[j] + k, int(da)))

        def initial_state(s):
            q = mujoco_qpos_to_joint_q(b, ref["qpos"][s], mj_joint_names=ref["jnt_names"],
                                       mj_joint_types=ref["jnt_type"], mj_qposadr=ref["jnt_qposadr"])  # fmt: skip
            qd = np.zeros(model.joint_dof_count)
            for ours, theirs in qd_map:
                qd[ours] = ref["qvel"][s][theirs]
            state = model.state()
            state.joint_q.assign(q.astype(np.float32))
            state.joint_qd.assign(qd.astype(np.float32))
            armillary.eval_fk(model, state.joint_q, state.joint_qd, state)
            return state

        cwd = os.getcwd()
        os.chdir(log_dir)
        try:
            mjm = mujoco.MjModel.from_xml_path(xml)
        finally:
            os.chdir(cwd)
        cache[name] = (ref, model, solver, q_map, initial_state, mjm)
        return cache[name]

    return get


def _limited_window(ref, s):
    """Number of stored samples before MuJoCo's rollout of state ``s`` comes within LIMIT_BAND of a limit."""
    R = ref["rollout_nocontact_qpos"][s]
    for i in range(R.shape[0]):
        for lim, rng, qa in zip(ref["jnt_limited"], ref["jnt_range"], ref["jnt_qposadr"]):
            if lim and (R[i, qa] <= rng[0] + LIMIT_BAND or R[i, qa] >= rng[1] - LIMIT_BAND):
                return i
    return R.shape[0]


@pytest.mark.parametrize("name", FIXED_BASE)
def test_rollout_matches_mujoco_euler(name, setup):
    ref, model, solver, q_map, initial_state, mjm = setup(name)
    mjm.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    off = mujoco.mjtDisableBit
    mjm.opt.disableflags |= (off.mjDSBL_ACTUATION | off.mjDSBL_CONTACT | off.mjDSBL_LIMIT | off.mjDSBL_EQUALITY
                             | off.mjDSBL_FRICTIONLOSS)  # fmt: skip
    saved = (model.joint_limit_ke.numpy().copy(), model.joint_limit_kd.numpy().copy(), solver.limit_time_constant)
    model.joint_limit_ke.zero_()
    model.joint_limit_kd.zero_()
    solver.limit_time_constant = 0.0  # no limit floor either: limits off, as in MuJoCo here
    try:
        data = mujoco.MjData(mjm)
        dt = float(ref["timestep"])
        worst_early = worst = 0.0
        for s in range(ref["qpos"].shape[0]):
            mujoco.mj_resetData(mjm, data)
            data.qpos[:] = ref["qpos"][s]
            data.qvel[:] = ref["qvel"][s]
            s0, s1 = initial_state(s), model.state()
            for step in range(1, 201):
                solver.step(s0, s1, None, None, dt)
                s0, s1 = s1, s0
                mujoco.mj_step(mjm, data)
                if step % 10 == 0:
                    q = s0.joint_q.numpy()
                    err = max(abs(float(q[a]) - data.qpos[b]) for a, b in q_map)
                    worst = max(worst, err)
                    if step <= 50:
                        worst_early = max(worst_early, err)
    finally:
        model.joint_limit_ke.assign(saved[0])
        model.joint_limit_kd.assign(saved[1])
    assert worst_early <= TOL_EARLY, f"{name}: |q - q_mujoco| = {worst_early:.2e} within 50 steps (> {TOL_EARLY})"
    assert worst <= TOL_FULL, f"{name}: |q - q_mujoco| = {worst:.2e} within 200 steps (> {TOL_FULL})"


@pytest.mark.parametrize("name", REFERENCE_OK)
def test_reference_rollout(name, setup):
    ref, model, solver, q_map, initial_state, _ = setup(name)
    dt = float(ref["timestep"])
    rk4 = str(ref["integrator"]) == "mjINT_RK4"
    substeps = 100 if rk4 else 1
    tol = TOL_RK4 if rk4 else TOL_REF
    compared = 0
    for s in range(ref["qpos"].shape[0]):
        window = _limited_window(ref, s)
        s0, s1 = initial_state(s), model.state()
        for i in range(window):
            q = s0.joint_q.numpy()
            mj = ref["rollout_nocontact_qpos"][s][i]
            err = max(abs(float(q[a]) - mj[b]) for a, b in q_map)
            assert err <= tol, f"{name} state {s}: |q - q_ref| = {err:.2e} after {10 * i} steps (> {tol})"
            compared += 1
            for _ in range(10 * substeps):
                solver.step(s0, s1, None, None, dt / substeps)
                s0, s1 = s1, s0
    assert compared >= 5, f"{name}: only {compared} samples compared"

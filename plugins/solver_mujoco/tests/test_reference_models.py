"""SolverMuJoCo on every MJCF model of the shared corpus: import with our importer, convert, step,
and compare with the reference rollouts MuJoCo computed from the original XML
(``<model>.ref.npz``, see shared/assets/REFERENCE.md; actuation disabled there and here).

Tolerance ``TOL`` = 1e-5 (rad, m; quaternions as ``1 - |q . q_ref|``) over all 200 steps with
contacts and without. Our model stores its parameters in float32, MuJoCo in float64: rounding
only the raw model's masses, inertias, poses and geom sizes to float32 already moves the
humanoid's contact rollout by up to 5e-6, so the humanoid (a falling, contact-rich rollout)
gets ``TOL_HUMANOID`` = 2e-5.

Models with tendons (manipulator, quadruped, robotiq_2f140, shadow_hand) are in
``test_tendons.py``.
"""

from __future__ import annotations

import glob
import os
import warnings

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")
pytest.importorskip("armillary_importer_mjcf")

import armillary  # noqa: E402
from armillary.testing.assets import shared_assets_dir  # noqa: E402

TOL = 1.0e-5
TOL_HUMANOID = 2.0e-5
ASSETS = shared_assets_dir()
CONVERTED = ["ant", "cartpole", "cheetah", "humanoid", "jaco_arm", "pusher", "xarm7"]

pytestmark = pytest.mark.skipif(ASSETS is None, reason="shared asset corpus (../shared/assets) not available")


def reference(name):
    path = glob.glob(os.path.join(str(ASSETS), "mjcf", name, "**", "*.ref.npz"), recursive=True)[0]
    ref = np.load(path)
    return ref, os.path.join(os.path.dirname(path), str(ref["model_file"]))


def imported_solver(name, **kw):
    """(reference, model, solver, joint map raw -> converted) for one corpus model."""
    from armillary_solver_mujoco.solver import SolverMuJoCo

    ref, xml = reference(name)
    b = armillary.ModelBuilder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b.add_mjcf(xml)
        model = b.finalize(device="cpu")
        solver = SolverMuJoCo(model, **kw)
    info = b.mjcf_imports[-1]
    mm = solver.mj_model
    sizes = {0: (7, 6), 1: (4, 3), 2: (1, 1), 3: (1, 1)}
    jmap = []
    for jn, t, qa, da in zip(ref["jnt_names"], ref["jnt_type"], ref["jnt_qposadr"], ref["jnt_dofadr"]):
        j, k, _, _ = info["joints"][str(jn)]
        cid = mujoco.mj_name2id(mm, mujoco.mjtObj.mjOBJ_JOINT, f"j{j}")
        if cid < 0:
            cid = mujoco.mj_name2id(mm, mujoco.mjtObj.mjOBJ_JOINT, f"j{j}_{k}")
        nq, nv = sizes[int(t)]
        jmap.append((int(qa), int(mm.jnt_qposadr[cid]), nq, int(da), int(mm.jnt_dofadr[cid]), nv))
    return ref, model, solver, jmap


def rollout_error(ref, model, solver, jmap, key):
    """Max deviation from ``ref[key]`` over the 5 states x 20 samples."""
    mm = solver.mj_model
    flags = int(mm.opt.disableflags) | int(mujoco.mjtDisableBit.mjDSBL_ACTUATION)
    if key == "rollout_nocontact_qpos":
        flags |= int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
    mm.opt.disableflags = flags
    dt = float(ref["timestep"])
    worst = 0.0
    for s in range(ref["qpos"].shape[0]):
        # initial state: MuJoCo's qpos/qvel mapped onto the converted layout, then to joint_q/qd
        qpos = np.zeros(mm.nq)
        qvel = np.zeros(mm.nv)
        for qa, ca, nq, da, cda, nv in jmap:
            qpos[ca:ca + nq] = ref["qpos"][s][qa:qa + nq]
            qvel[cda:cda + nv] = ref["qvel"][s][da:da + nv]
        q = model.joint_q.numpy().astype(np.float64)
        qd = np.zeros(model.joint_dof_count)
        solver.state_map.from_mujoco(qpos[None], qvel[None], q, qd)
        s0, s1 = model.state(), model.state()
        s0.joint_q.assign(q.astype(np.float32))
        s0.joint_qd.assign(qd.astype(np.float32))
        solver.reset_mujoco_state(s0, qpos=qpos, qvel=qvel)
        for step in range(1, 201):
            solver.step(s0, s1, None, None, dt)
            s0, s1 = s1, s0
            if step % 10:
                continue
            R = ref[key][s][step // 10]
            d = solver.mj_data
            for qa, ca, nq, da, cda, nv in jmap:
                a, r = d.qpos[ca:ca + nq], R[qa:qa + nq]
                if nq >= 4:
                    worst = max(worst, 1.0 - abs(float(np.dot(a[-4:], r[-4:]))))
                    worst = max(worst, float(np.abs(a[:-4] - r[:-4]).max()) if nq == 7 else 0.0)
                else:
                    worst = max(worst, abs(float(a[0] - r[0])))
            # the armillary state follows MuJoCo's (float32)
            assert np.all(np.isfinite(s0.joint_q.numpy()))
    return worst


@pytest.mark.parametrize("name", CONVERTED)
@pytest.mark.parametrize("key", ["rollout_qpos", "rollout_nocontact_qpos"])
def test_reproduces_mujoco_reference_rollout(name, key):
    ref, model, solver, jmap = imported_solver(name)
    err = rollout_error(ref, model, solver, jmap, key)
    tol = TOL_HUMANOID if (name == "humanoid" and key == "rollout_qpos") else TOL
    assert err <= tol, f"{name} {key}: max deviation {err:.2e} > {tol}"


@pytest.mark.parametrize("name", CONVERTED)
def test_options_come_from_the_xml(name):
    ref, model, solver, _ = imported_solver(name)
    raw = mujoco.MjModel.from_xml_path(reference(name)[1])
    for field in ("integrator", "cone", "solver", "iterations", "ls_iterations", "impratio", "tolerance", "timestep"):
        if field == "timestep":
            continue  # the step's dt sets it
        assert getattr(solver.mj_model.opt, field) == pytest.approx(getattr(raw.opt, field), rel=1e-12), field
    assert solver.mj_model.nq == raw.nq and solver.mj_model.nv == raw.nv

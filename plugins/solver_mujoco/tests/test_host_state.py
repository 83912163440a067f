"""SolverMuJoCo's C-backend step path: ``mj_step2`` + ``mj_step1`` (bit-identical to ``mj_step``)
and the one-launch MjData -> State writer (joint coordinates, body poses and COM twists of every
world), checked against the host conversion, forward kinematics and plain ``mj_step``."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

mujoco = pytest.importorskip("mujoco")

import armillary as newton  # noqa: E402
from armillary import ModelBuilder  # noqa: E402
from armillary.flags import ModelFlags  # noqa: E402
from armillary_solver_mujoco.solver import SolverMuJoCo  # noqa: E402

wp.config.log_level = wp.LOG_WARNING
WORLDS = 3


def _mechanism(integrator=None):
    """Per world: a FREE root with offset/rotated anchors, a BALL, a D6 (slide + 2 hinges), a
    REVOLUTE and a PRISMATIC joint; a position drive on the revolute joint; three worlds."""
    t = ModelBuilder(gravity=(0.0, 0.0, -9.81))
    r1 = wp.quat_from_axis_angle(wp.vec3(0.3, 1.0, 0.2), 0.7)
    r2 = wp.quat_from_axis_angle(wp.vec3(1.0, 0.0, 0.4), -0.5)
    I = wp.mat33(np.diag([0.1, 0.2, 0.15]).astype(np.float32))  # noqa: E741
    root = t.add_link(mass=2.0, com=(0.05, 0.0, 0.02), inertia=I)
    l1 = t.add_link(mass=1.0, com=(0.0, 0.1, 0.0), inertia=I * 0.1)
    l2 = t.add_link(mass=0.5, com=(0.1, 0.0, 0.0), inertia=I * 0.05)
    l3 = t.add_link(mass=0.4, com=(0.0, 0.0, 0.1), inertia=I * 0.05)
    l4 = t.add_link(mass=0.3, com=(0.02, 0.0, 0.0), inertia=I * 0.05)
    cfg = ModelBuilder.JointDofConfig
    joints = [
        t.add_joint_free(root, parent_xform=wp.transform((0.1, 0.2, 0.3), r1),
                         child_xform=wp.transform((0.0, 0.05, 0.0), r2)),
        t.add_joint_ball(root, l1, parent_xform=wp.transform((0.2, 0.0, 0.0), r2),
                         child_xform=wp.transform((0.0, -0.1, 0.0), r1)),
        t.add_joint_d6(l1, l2, linear_axes=[cfg(axis=(1.0, 0.0, 0.0))],
                       angular_axes=[cfg(axis=(0.0, 0.0, 1.0)), cfg(axis=(0.0, 1.0, 0.0))],
                       parent_xform=wp.transform((0.0, 0.2, 0.0), r1), child_xform=wp.transform((0.05, 0.0, 0.0), r2)),
        t.add_joint_revolute(l2, l3, axis=(0.0, 1.0, 0.0), parent_xform=wp.transform((0.1, 0.0, 0.0), r2),
                             target_ke=50.0, target_kd=1.0),
        t.add_joint_prismatic(l3, l4, axis=(0.0, 0.0, 1.0), parent_xform=wp.transform((0.0, 0.0, 0.2), r1)),
    ]  # fmt: skip
    t.add_articulation(joints)
    b = ModelBuilder(gravity=(0.0, 0.0, -9.81))
    b.replicate(t, WORLDS)
    if integrator is not None:
        SolverMuJoCo.register_custom_attributes(b)
    model = b.finalize()
    kw = {} if integrator is None else {"integrator": integrator}
    return model, SolverMuJoCo(model, **kw)


def _random_state(model, seed):
    rng = np.random.default_rng(seed)
    q = model.joint_q.numpy().astype(np.float64).reshape(WORLDS, -1)
    n_q = q.shape[1]
    q[:, :3] += rng.uniform(-0.5, 0.5, (WORLDS, 3))
    for start in (3, 7):
        v = rng.normal(size=(WORLDS, 4))
        q[:, start:start + 4] = v / np.linalg.norm(v, axis=1, keepdims=True)
    q[:, 11:] += rng.uniform(-0.4, 0.4, (WORLDS, n_q - 11))
    qd = rng.uniform(-1.0, 1.0, model.joint_dof_count)
    state = model.state()
    state.joint_q.assign(q.reshape(-1).astype(np.float32))
    state.joint_qd.assign(qd.astype(np.float32))
    newton.eval_fk(model, state.joint_q, state.joint_qd, state)
    return state


def _host_reference(solver):
    """Joint coordinates of the MjDatas converted on the host (numpy, float64)."""
    qpos = np.stack([d.qpos for d in solver.mj_datas])
    qvel = np.stack([d.qvel for d in solver.mj_datas])
    q = np.zeros(solver.model.joint_coord_count)
    qd = np.zeros(solver.model.joint_dof_count)
    solver.state_map.from_mujoco(qpos, qvel, q, qd)
    return q, qd


@pytest.mark.parametrize("integrator", [None, "rk4"])
def test_written_state_matches_host_conversion_and_forward_kinematics(integrator):
    model, solver = _mechanism(integrator)
    assert solver._step_split == (integrator is None)  # RK4 steps with mj_step, then kinematics
    s0, s1 = _random_state(model, 1), model.state()
    fk = model.state()
    for _ in range(25):
        solver.step(s0, s1, None, None, 2e-3)
        s0, s1 = s1, s0
        q_ref, qd_ref = _host_reference(solver)
        np.testing.assert_allclose(s0.joint_q.numpy(), q_ref, atol=2e-7)
        np.testing.assert_allclose(s0.joint_qd.numpy(), qd_ref, rtol=1e-6, atol=1e-6)
        newton.eval_fk(model, s0.joint_q, s0.joint_qd, fk)
        np.testing.assert_allclose(s0.body_q.numpy(), fk.body_q.numpy(), atol=2e-6)
        np.testing.assert_allclose(s0.body_qd.numpy(), fk.body_qd.numpy(), rtol=1e-5, atol=1e-5)
    assert np.all(np.abs(s0.body_qd.numpy()) > 0.0)  # every body of every world was written


def test_split_stepping_is_bit_identical_to_mj_step():
    """The solver's float64 MuJoCo state follows plain mj_step exactly, through a change of dt, of
    the drive target, of body forces, of a pushed parameter and an edit of the state."""
    model, solver = _mechanism()
    s0, s1 = _random_state(model, 2), model.state()
    control = model.control()
    solver.step(s0, s1, control, None, 2e-3)
    s0, s1 = s1, s0
    ref = [mujoco.MjData(m) for m in solver.mj_models]
    for r, d in zip(ref, solver.mj_datas):
        r.qpos[:], r.qvel[:], r.qacc_warmstart[:] = d.qpos, d.qvel, d.qacc_warmstart
        r.ctrl[:] = d.ctrl

    def advance(n, dt):
        nonlocal s0, s1
        for _ in range(n):
            solver.step(s0, s1, control, None, dt)
            s0, s1 = s1, s0
            for m, r in zip(solver.mj_models, ref):
                m.opt.timestep = dt
                mujoco.mj_step(m, r)
        for r, d in zip(ref, solver.mj_datas):
            np.testing.assert_array_equal(d.qpos, r.qpos)
            np.testing.assert_array_equal(d.qvel, r.qvel)

    advance(20, 2e-3)
    advance(10, 1e-3)  # a new timestep (constraint impedances depend on it)
    target = control.joint_target_q.numpy()
    target[:] = 0.3
    control.joint_target_q.assign(target)
    for r, d in zip(ref, solver.mj_datas):
        advance(0, 1e-3)
    solver.step(s0, s1, control, None, 1e-3)  # the drive target moves: ctrl written before mj_step2
    s0, s1 = s1, s0
    for m, r, d in zip(solver.mj_models, ref, solver.mj_datas):
        r.ctrl[:] = d.ctrl
        mujoco.mj_step(m, r)
    assert np.any(solver.mj_data.ctrl != 0.0)
    advance(5, 1e-3)
    damping = model.joint_damping.numpy()
    damping[:] = 0.5
    model.joint_damping.assign(damping)
    solver.notify_model_changed(ModelFlags.JOINT_DOF_PROPERTIES)
    advance(10, 1e-3)
    edited = s0.joint_qd.numpy()
    edited[:] *= 0.5
    s0.joint_qd.assign(edited)  # an edited state restarts MuJoCo from the float32 values
    qpos, qvel = solver.state_map.to_mujoco(s0.joint_q.numpy(), edited)
    for w, r in enumerate(ref):
        r.qpos[:], r.qvel[:] = qpos[w], qvel[w]
    advance(10, 1e-3)


def test_applied_forces_follow_the_input_state():
    """body_f is read from each step's input state; clearing it stops the push (written zeros)."""
    model, solver = _mechanism()
    model.gravity.assign(np.zeros((model.gravity.shape[0], 3), np.float32))
    solver.notify_model_changed(ModelFlags.MODEL_PROPERTIES)
    s0, s1 = model.state(), model.state()
    newton.eval_fk(model, s0.joint_q, s0.joint_qd, s0)
    f = np.zeros((model.body_count, 6), np.float32)
    f[0, 0] = 4.0  # +x on world 0's root
    s0.body_f.assign(f)
    solver.step(s0, s1, None, None, 1e-2)
    v = s1.body_qd.numpy()
    assert v[0, 0] > 1e-3 and np.all(np.abs(v[model.body_count // WORLDS:, :]) < 1e-9)
    s1.body_f.zero_()
    solver.step(s1, s0, None, None, 1e-2)
    assert np.all(solver.mj_data.xfrc_applied == 0.0)


def test_position_targets_use_the_coordinate_layout():
    """``joint_target_q`` has the ``joint_q`` layout: behind a FREE and a BALL joint (7 + 4
    coordinates, 6 + 3 DOFs) the revolute joint's target is read at its coordinate, per world."""
    model, solver = _mechanism()
    model.gravity.assign(np.zeros((model.gravity.shape[0], 3), np.float32))
    solver.notify_model_changed(ModelFlags.MODEL_PROPERTIES)
    q_start = model.joint_q_start.numpy()
    per_world = model.joint_count // WORLDS
    control = model.control()
    target = control.joint_target_q.numpy()
    goals = [0.2, 0.4, -0.3]
    rev = [int(q_start[w * per_world + 3]) for w in range(WORLDS)]
    for w, g in enumerate(goals):
        target[rev[w]] = g
    control.joint_target_q.assign(target)
    s0, s1 = model.state(), model.state()
    newton.eval_fk(model, s0.joint_q, s0.joint_qd, s0)
    for _ in range(400):
        solver.step(s0, s1, control, None, 5e-3)
        s0, s1 = s1, s0
    q = s0.joint_q.numpy()
    for w, g in enumerate(goals):
        assert abs(q[rev[w]] - g) < 0.05 * abs(g), (w, q[rev[w]], g)


def test_injected_contact_sequence_is_bit_identical_to_mj_step(monkeypatch):
    """use_mujoco_contacts=False: when the injected rows are MuJoCo's own contacts (from a copy of
    the model that collides), the injection pipeline reproduces ``mj_step`` exactly."""
    import copy

    from armillary_solver_mujoco import contacts as injection

    b = ModelBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_ground_plane()
    box = b.add_body(xform=wp.transform((0.0, 0.0, 0.12), wp.quat_from_axis_angle(wp.vec3(1.0, 0.3, 0.0), 0.3)))
    b.add_shape_box(box, hx=0.1, hy=0.08, hz=0.05)
    model = b.finalize()
    solver = SolverMuJoCo(model, use_mujoco_contacts=False, integrator="implicitfast")
    m = solver.mj_model
    ref_m = copy.copy(m)
    ref_m.geom_contype[:] = 1
    ref_m.geom_conaffinity[:] = 1
    ref_m.body_contype[:] = 1  # MuJoCo's broadphase filters by the per-body aggregates
    ref_m.body_conaffinity[:] = 1
    probe = mujoco.MjData(ref_m)
    seen = []

    def own_rows(solver_, contacts):
        d = solver_.mj_data
        probe.qpos[:], probe.qvel[:] = d.qpos, d.qvel
        mujoco.mj_fwdPosition(ref_m, probe)
        c = probe.contact
        seen.append(probe.ncon)
        if probe.ncon == 0:
            return None
        return {"world": np.zeros(probe.ncon, np.int64), "ga": c.geom1.copy(), "gb": c.geom2.copy(),
                "dist": c.dist.copy(), "pos": c.pos.copy(), "frame": c.frame.copy(), "dim": c.dim.copy(),
                "friction": c.friction.copy(), "solref": c.solref.copy(), "solimp": c.solimp.copy()}  # fmt: skip

    monkeypatch.setattr(injection, "_rows", own_rows)
    pipeline = newton.CollisionPipeline(model)
    cts = pipeline.contacts()
    s0, s1 = model.state(), model.state()
    newton.eval_fk(model, s0.joint_q, s0.joint_qd, s0)
    solver.step(s0, s1, None, cts, 2e-3)  # starts MuJoCo from the float32 state
    s0, s1 = s1, s0
    ref = mujoco.MjData(ref_m)
    d = solver.mj_data
    ref.qpos[:], ref.qvel[:], ref.qacc_warmstart[:] = d.qpos, d.qvel, d.qacc_warmstart
    for _ in range(100):
        pipeline.collide(s0, cts)
        cts.rigid_contact_count.fill_(1)  # rows come from the probe; any non-zero count will do
        solver.step(s0, s1, None, cts, 2e-3)
        s0, s1 = s1, s0
        ref_m.opt.timestep = 2e-3
        mujoco.mj_step(ref_m, ref)
    assert max(seen) >= 4  # the box lands and rests on a face
    np.testing.assert_array_equal(d.qpos, ref.qpos)
    np.testing.assert_array_equal(d.qvel, ref.qvel)

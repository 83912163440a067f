"""SolverMuJoCo features: spec examples, state conversion round trips, drives, forces, mimic and
loop joints, kinematic bodies, worlds, model changes, MJCF export and errors."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
import warp as wp

mujoco = pytest.importorskip("mujoco")

import armillary as newton  # noqa: E402
from armillary import ModelBuilder  # noqa: E402
from armillary_solver_mujoco.solver import SolverMuJoCo  # noqa: E402
from armillary_solver_mujoco.state_map import qrot  # noqa: E402

wp.config.log_level = wp.LOG_WARNING
G = 9.81


def inertia(i):
    return wp.mat33(np.eye(3, dtype=np.float32) * i)


def run(model, solver, steps, dt=2e-3, control=None, before=None, pipeline=None):
    s0, s1 = model.state(), model.state()
    newton.eval_fk(model, s0.joint_q, s0.joint_qd, s0)
    contacts = pipeline.contacts() if pipeline is not None else None
    for _ in range(steps):
        s0.clear_forces()
        if before is not None:
            before(s0)
        if pipeline is not None:
            pipeline.collide(s0, contacts)
        solver.step(s0, s1, control, contacts, dt)
        s0, s1 = s1, s0
    return s0


# ---------------------------------------------------------------------------- spec examples
def test_registering_solver_attributes_example():
    """Custom Attributes page: SolverMuJoCo.register_custom_attributes, then model.mujoco.condim."""
    builder_mujoco = ModelBuilder()
    SolverMuJoCo.register_custom_attributes(builder_mujoco)
    body = builder_mujoco.add_link()
    joint = builder_mujoco.add_joint_free(body)
    builder_mujoco.add_articulation([joint])
    builder_mujoco.add_shape_box(body=body, hx=0.1, hy=0.1, hz=0.1)
    model_mujoco = builder_mujoco.finalize()
    assert hasattr(model_mujoco, "mujoco")
    assert hasattr(model_mujoco.mujoco, "condim")
    assert model_mujoco.mujoco.condim.numpy().tolist() == [3]


def test_collisions_page_mujoco_example():
    """Collisions page: SolverMuJoCo(use_mujoco_contacts=False) with the armillary pipeline."""
    builder = newton.ModelBuilder()
    builder.add_ground_plane()
    body = builder.add_body(xform=wp.transform((0.0, 0.0, 2.0), wp.quat_identity()))
    builder.add_shape_sphere(body, radius=0.5)
    model = builder.finalize()
    state_0 = model.state()
    state_1 = model.state()
    control = model.control()
    num_steps = 2
    pipeline = newton.CollisionPipeline(model, broad_phase="sap")
    solver = newton.solvers.SolverMuJoCo(
        model,
        use_mujoco_contacts=False,
    )
    contacts = pipeline.contacts()
    for step in range(num_steps):
        pipeline.collide(state_0, contacts)
        solver.step(state_0, state_1, control, contacts, dt=1.0 / 60.0)
        state_0, state_1 = state_1, state_0
    assert state_0.body_q.numpy()[0, 2] < 2.0


@pytest.mark.parametrize("native", [True, False])
def test_sphere_comes_to_rest_on_the_ground(native):
    b = ModelBuilder()
    b.add_ground_plane()
    body = b.add_body(xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()))
    b.add_shape_sphere(body, radius=0.5)
    model = b.finalize()
    solver = SolverMuJoCo(model, use_mujoco_contacts=native)
    s = run(model, solver, 1500, pipeline=None if native else newton.CollisionPipeline(model))
    assert abs(float(s.body_q.numpy()[0, 2]) - 0.5) < 2e-3
    assert np.abs(s.body_qd.numpy()).max() < 1e-2


# ------------------------------------------------------------------------ state conversion
def _odd_frames_model():
    """A FREE root with offset anchors, a BALL and a D6 joint whose child anchors are rotated."""
    b = ModelBuilder(gravity=(0.0, 0.0, -G))
    r1 = wp.quat_from_axis_angle(wp.vec3(0.3, 1.0, 0.2), 0.7)
    r2 = wp.quat_from_axis_angle(wp.vec3(1.0, 0.0, 0.4), -0.5)
    root = b.add_link(mass=2.0, com=(0.05, 0.0, 0.02), inertia=wp.mat33(np.diag([0.1, 0.2, 0.15]).astype(np.float32)))
    l1 = b.add_link(mass=1.0, com=(0.0, 0.1, 0.0), inertia=inertia(0.01))
    l2 = b.add_link(mass=0.5, com=(0.1, 0.0, 0.0), inertia=inertia(0.005))
    j0 = b.add_joint_free(root, parent_xform=wp.transform((0.1, 0.2, 0.3), r1), child_xform=wp.transform((0.0, 0.05, 0.0), r2))
    j1 = b.add_joint_ball(root, l1, parent_xform=wp.transform((0.2, 0.0, 0.0), r2), child_xform=wp.transform((0.0, -0.1, 0.0), r1))
    cfg = ModelBuilder.JointDofConfig
    j2 = b.add_joint_d6(l1, l2, linear_axes=[cfg(axis=(1.0, 0.0, 0.0))],
                        angular_axes=[cfg(axis=(0.0, 0.0, 1.0)), cfg(axis=(0.0, 1.0, 0.0))],
                        parent_xform=wp.transform((0.0, 0.2, 0.0), r1), child_xform=wp.transform((0.05, 0.0, 0.0), r2))
    b.add_articulation([j0, j1, j2])
    return b.finalize()


def _random_state(model, rng):
    q = model.joint_q.numpy().copy()
    qd = rng.uniform(-1.0, 1.0, model.joint_dof_count)
    q[:3] = rng.uniform(-1, 1, 3)
    for start in (3, 7):
        v = rng.normal(size=4)
        q[start:start + 4] = v / np.linalg.norm(v)
    q[11:14] = rng.uniform(-1, 1, 3)
    return q, qd


@pytest.mark.parametrize("seed", range(8))
def test_state_round_trip_and_forward_kinematics_match_mujoco(seed):
    """For random configurations: MuJoCo's body poses (mj_kinematics) from the converted qpos equal
    eval_fk's, MuJoCo's COM velocities equal body_qd, and qpos/qvel convert back exactly."""
    model = _odd_frames_model()
    solver = SolverMuJoCo(model)
    rng = np.random.default_rng(seed)
    q, qd = _random_state(model, rng)
    state = model.state()
    state.joint_q.assign(q.astype(np.float32))
    state.joint_qd.assign(qd.astype(np.float32))
    newton.eval_fk(model, state.joint_q, state.joint_qd, state)
    q32, qd32 = state.joint_q.numpy().astype(np.float64), state.joint_qd.numpy().astype(np.float64)
    qpos, qvel = solver.state_map.to_mujoco(q32, qd32)
    m, d = solver.mj_model, solver.mj_data
    d.qpos[:] = qpos[0]
    d.qvel[:] = qvel[0]
    mujoco.mj_forward(m, d)
    body_q = state.body_q.numpy().astype(np.float64)
    body_qd = state.body_qd.numpy().astype(np.float64)
    for b in range(model.body_count):
        mid = int(solver.conversion.body_ids[b])
        np.testing.assert_allclose(d.xpos[mid], body_q[b, :3], atol=2e-6)
        qm = d.xquat[mid][[1, 2, 3, 0]]
        assert 1.0 - abs(float(np.dot(qm, body_q[b, 3:]))) < 1e-6
        vel = np.zeros(6)
        mujoco.mj_objectVelocity(m, d, mujoco.mjtObj.mjOBJ_BODY, mid, vel, 0)  # (ang, lin) at the COM, world axes
        np.testing.assert_allclose(vel[:3], body_qd[b, 3:], atol=2e-5)
        np.testing.assert_allclose(vel[3:], body_qd[b, :3], atol=2e-5)
    q_back, qd_back = np.zeros_like(q32), np.zeros_like(qd32)
    solver.state_map.from_mujoco(qpos, qvel, q_back, qd_back)
    np.testing.assert_allclose(qd_back, qd32, atol=1e-6)  # float32 quaternions are normalized to ~1e-7
    for s, e in ((0, 3), (11, 14)):
        np.testing.assert_allclose(q_back[s:e], q32[s:e], atol=1e-9)
    for s in (3, 7):
        assert 1.0 - abs(float(np.dot(q_back[s:s + 4], q32[s:s + 4] / np.linalg.norm(q32[s:s + 4])))) < 1e-12


# ------------------------------------------------------------------------------- features
def test_position_drive_becomes_an_actuator_and_reaches_its_target():
    b = ModelBuilder(gravity=(0.0, 0.0, 0.0))
    link = b.add_link(mass=1.0, inertia=inertia(0.1))
    j = b.add_joint_revolute(-1, link, axis=(0.0, 0.0, 1.0), target_ke=100.0, target_kd=10.0)
    b.add_articulation([j])
    model = b.finalize()
    solver = SolverMuJoCo(model, integrator="implicitfast")
    control = model.control()
    control.joint_target_q.assign(np.array([0.5], np.float32))
    s = run(model, solver, 2000, control=control)
    assert abs(float(s.joint_q.numpy()[0]) - 0.5) < 1e-4
    assert solver.mj_model.nu == 2  # position (kp) + velocity (kv) actuators


def test_free_joint_f_and_body_f_are_com_wrenches():
    """Control.joint_f of a FREE joint and State.body_f: world wrenches at the COM (xfrc_applied)."""
    b = ModelBuilder(gravity=(0.0, 0.0, -G))
    body = b.add_body(xform=wp.transform((0, 0, 1), wp.quat_from_axis_angle(wp.vec3(1, 0, 0), 0.4)), mass=2.0,
                      com=(0.1, 0.0, 0.0), inertia=inertia(0.2))  # fmt: skip
    b.add_shape_sphere(body, radius=0.1, cfg=ModelBuilder.ShapeConfig(density=0.0))
    model = b.finalize()
    solver = SolverMuJoCo(model)
    control = model.control()
    control.joint_f.assign(np.array([0, 0, G, 0, 0, 0.2], np.float32))  # half the weight + a torque
    half = np.array([[0, 0, G, 0, 0, 0]], np.float32)
    s = run(model, solver, 500, dt=1e-3, control=control, before=lambda st: st.body_f.assign(half))
    qd = s.body_qd.numpy()[0]
    np.testing.assert_allclose(qd[:3], 0.0, atol=1e-4)
    np.testing.assert_allclose(qd[3:], [0.0, 0.0, 0.2 / 0.2 * 0.5], atol=1e-4)


def test_mimic_joint_becomes_a_joint_equality():
    b = ModelBuilder(gravity=(0.0, 0.0, -G))
    l0 = b.add_link(mass=1.0, com=(0.2, 0, 0), inertia=inertia(0.01))
    l1 = b.add_link(mass=1.0, com=(0.2, 0, 0), inertia=inertia(0.01))
    j0 = b.add_joint_revolute(-1, l0, axis=(0, 1, 0))
    j1 = b.add_joint_revolute(-1, l1, axis=(0, 1, 0), parent_xform=wp.transform((0, 1, 0), wp.quat_identity()))
    b.set_joint_mimic(j1, j0, coeffs=(0.1, -0.5))
    b.add_articulation([j0, j1])
    model = b.finalize()
    solver = SolverMuJoCo(model)
    assert solver.mj_model.neq == 1
    s = run(model, solver, 500)
    q = s.joint_q.numpy()
    assert abs(q[1] - (0.1 - 0.5 * q[0])) < 2e-3  # soft equality (default solref)
    assert abs(q[0]) > 0.1


def test_loop_closing_ball_joint_becomes_a_connect_equality():
    """A four-bar-like loop: the closing BALL joint keeps the two ends together."""
    b = ModelBuilder(gravity=(0.0, 0.0, -G))
    a = b.add_link(mass=1.0, com=(0.0, 0.0, -0.5), inertia=inertia(0.01))
    coupler = b.add_link(mass=1.0, com=(0.5, 0, 0), inertia=inertia(0.01))
    c = b.add_link(mass=1.0, com=(0.0, 0.0, -0.5), inertia=inertia(0.01))
    ja = b.add_joint_revolute(-1, a, axis=(0, 1, 0))
    jb = b.add_joint_revolute(a, coupler, axis=(0, 1, 0), parent_xform=wp.transform((0, 0, -1), wp.quat_identity()))
    b.add_articulation([ja, jb])
    jc = b.add_joint_revolute(-1, c, axis=(0, 1, 0), parent_xform=wp.transform((1, 0, 0), wp.quat_identity()))
    b.add_articulation([jc])
    b.add_joint_ball(coupler, c, parent_xform=wp.transform((1, 0, 0), wp.quat_identity()),
                     child_xform=wp.transform((0, 0, -1), wp.quat_identity()))  # fmt: skip
    model = b.finalize()
    solver = SolverMuJoCo(model)
    assert solver.mj_model.neq == 1
    s0 = model.state()
    s0.joint_qd.assign(np.array([1.0, 0.0, 0.0], np.float32))
    s1 = model.state()
    for _ in range(500):
        solver.step(s0, s1, None, None, 2e-3)
        s0, s1 = s1, s0
    bq = s0.body_q.numpy()
    end_coupler = bq[coupler, :3] + qrot(bq[coupler, 3:].astype(np.float64), np.array([1.0, 0, 0]))
    end_c = bq[c, :3] + qrot(bq[c, 3:].astype(np.float64), np.array([0, 0, -1.0]))
    assert np.linalg.norm(end_coupler - end_c) < 5e-3


def test_worlds_step_like_one_world():
    template = ModelBuilder(gravity=(0.0, 0.0, -G))
    link = template.add_link(mass=1.0, com=(0.3, 0, 0), inertia=inertia(0.01))
    j = template.add_joint_revolute(-1, link, axis=(0, 1, 0))
    template.add_articulation([j])
    b = ModelBuilder(gravity=(0.0, 0.0, -G))
    b.replicate(template, 3)
    model = b.finalize()
    solver = SolverMuJoCo(model)
    assert len(solver.mj_datas) == 3 and solver.mj_model.nq == 1
    s0, s1 = model.state(), model.state()
    s0.joint_q.assign(np.array([0.1, 0.5, -0.3], np.float32))
    for _ in range(200):
        solver.step(s0, s1, None, None, 2e-3)
        s0, s1 = s1, s0
    single = ModelBuilder(gravity=(0.0, 0.0, -G))
    single.add_builder(template)
    m1 = single.finalize()
    sv = SolverMuJoCo(m1)
    a0, a1 = m1.state(), m1.state()
    a0.joint_q.assign(np.array([0.5], np.float32))
    for _ in range(200):
        sv.step(a0, a1, None, None, 2e-3)
        a0, a1 = a1, a0
    assert float(s0.joint_q.numpy()[1]) == pytest.approx(float(a0.joint_q.numpy()[0]), abs=1e-7)


def test_notify_model_changed_applies_new_masses():
    b = ModelBuilder(gravity=(0.0, 0.0, -G))
    link = b.add_link(mass=1.0, inertia=inertia(0.01))
    j = b.add_joint_prismatic(-1, link, axis=(0, 0, 1), target_ke=0.0)
    b.add_articulation([j])
    model = b.finalize()
    solver = SolverMuJoCo(model)
    control = model.control()
    control.joint_f.assign(np.array([2.0 * G], np.float32))  # holds 2 kg
    model.body_mass.assign(np.array([2.0], np.float32))
    solver.notify_model_changed(newton.ModelFlags.BODY_INERTIAL_PROPERTIES)
    assert solver.mj_model.body_mass[1] == pytest.approx(2.0)
    s = run(model, solver, 200, control=control)
    assert abs(float(s.joint_q.numpy()[0])) < 1e-6


def test_save_to_mjcf_writes_a_loadable_model(tmp_path):
    b = ModelBuilder()
    b.add_ground_plane()
    body = b.add_body(xform=wp.transform((0, 0, 1), wp.quat_identity()))
    b.add_shape_capsule(body, radius=0.1, half_height=0.2)
    model = b.finalize()
    path = str(tmp_path / "converted.xml")
    solver = SolverMuJoCo(model, save_to_mjcf=path)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        m = mujoco.MjModel.from_xml_path(path)
    finally:
        os.chdir(cwd)
    assert m.nq == solver.mj_model.nq == 7 and m.ngeom == solver.mj_model.ngeom == 2


def test_unsupported_input_is_rejected_clearly():
    b = ModelBuilder()
    l0 = b.add_link(mass=1.0, inertia=inertia(0.01))
    j = b.add_joint_distance(-1, l0)
    b.add_articulation([j])
    model = b.finalize()
    with pytest.raises(ValueError, match="DISTANCE"):
        SolverMuJoCo(model)
    b = ModelBuilder()
    l0 = b.add_link(mass=1.0, inertia=inertia(0.01))
    b.add_articulation([b.add_joint_revolute(-1, l0)])
    with pytest.raises(ValueError, match="integrator"):
        SolverMuJoCo(b.finalize(), integrator="verlet")


def test_worlds_with_different_parameters_get_their_own_mujoco_model():
    """Randomised per-world masses (after replicate): each world steps with its own values, and a
    later notify_model_changed pushes new per-world damping without recompiling."""
    template = ModelBuilder(gravity=(0.0, 0.0, -G))
    link = template.add_link(mass=1.0, inertia=inertia(0.01))
    template.add_articulation([template.add_joint_prismatic(-1, link, axis=(0, 0, 1))])
    b = ModelBuilder(gravity=(0.0, 0.0, -G))
    b.replicate(template, 2)
    model = b.finalize()
    model.body_mass.assign(np.array([1.0, 3.0], np.float32))
    control = model.control()
    control.joint_f.assign(np.array([G, G], np.float32))  # holds 1 kg: world 0 hovers, world 1 falls at 2/3 g
    solver = SolverMuJoCo(model)
    assert solver.mj_models[0] is not solver.mj_models[1]
    s = run(model, solver, 500, dt=1e-3, control=control)
    qd = s.joint_qd.numpy()
    assert abs(qd[0]) < 1e-6
    assert qd[1] == pytest.approx(-G * 2.0 / 3.0 * 0.5, rel=1e-4)
    m0 = solver.mj_models[0]
    model.joint_damping.assign(np.array([0.5, 2.0], np.float32))
    solver.notify_model_changed(newton.ModelFlags.JOINT_DOF_PROPERTIES)
    assert solver.mj_models[0] is m0  # pushed in place, not recompiled
    assert solver.mj_models[0].dof_damping[0] == pytest.approx(0.5)
    assert solver.mj_models[1].dof_damping[0] == pytest.approx(2.0)


def test_effective_mass_hooks_from_mujoco_inertia():
    """Free body at its COM: mass m and inertia I; a bob on a hinge (z axis, distance r, body inertia
    I_c about its COM): only the tangential direction moves, with mass (I_c + m r^2) / r^2, so the
    scalar (harmonic mean over 3 axes) is 3 (I_c + m r^2) / r^2; its rotational inertia about the
    hinge axis is I_c + m r^2 (others locked)."""
    from armillary.solvers.coupling import ENDPOINT_BODY

    b = ModelBuilder(gravity=(0.0, 0.0, 0.0))
    free = b.add_body(mass=2.0, inertia=wp.mat33(np.diag([0.1, 0.2, 0.3]).astype(np.float32)))
    b.add_shape_sphere(free, radius=0.1, cfg=ModelBuilder.ShapeConfig(density=0.0))
    m, r, Ic = 1.5, 0.4, 0.01
    bob = b.add_link(mass=m, com=(r, 0.0, 0.0), inertia=inertia(Ic))
    b.add_articulation([b.add_joint_revolute(-1, bob, axis=(0, 0, 1))])
    model = b.finalize()
    solver = SolverMuJoCo(model)
    kinds = wp.array([ENDPOINT_BODY, ENDPOINT_BODY], dtype=wp.int32)
    idx = wp.array([free, bob], dtype=wp.int32)
    loc = wp.zeros(2, dtype=wp.vec3)
    out = wp.zeros(2, dtype=wp.float32)
    solver.coupling_eval_effective_mass(kinds, idx, loc, out)
    expected = 3.0 * (Ic + m * r * r) / (r * r)
    np.testing.assert_allclose(out.numpy(), [2.0, expected], rtol=1e-5)
    out_i = wp.zeros(2, dtype=wp.mat33)
    solver.coupling_eval_effective_mass_block(kinds, idx, loc, out, out_i)
    I = out_i.numpy()
    np.testing.assert_allclose(I[0], np.diag([0.1, 0.2, 0.3]), rtol=1e-5, atol=1e-7)
    assert I[1][2, 2] == pytest.approx(Ic + m * r * r, rel=1e-5)
    assert I[1][0, 0] > 1e20 and I[1][1, 1] > 1e20
    with pytest.raises(ValueError, match="not a body"):
        solver.coupling_eval_effective_mass(wp.array([1], dtype=wp.int32), wp.array([0], dtype=wp.int32),
                                            wp.zeros(1, dtype=wp.vec3), wp.zeros(1, dtype=wp.float32))  # fmt: skip


@pytest.mark.slow
def test_mujoco_warp_backend_matches_the_c_engine():
    """use_mujoco_cpu=False (MuJoCo Warp, here on Warp's CPU device): a swinging pendulum with a
    position drive and a box falling onto the ground follow the C engine within float32 tolerance."""
    pytest.importorskip("mujoco_warp")

    def scene():
        b = ModelBuilder(gravity=(0.0, 0.0, -G))
        b.add_ground_plane()
        link = b.add_link(mass=1.0, com=(0.3, 0, 0), inertia=inertia(0.01))
        b.add_articulation([b.add_joint_revolute(-1, link, axis=(0, 1, 0), target_ke=2.0, target_kd=0.1,
                                                 parent_xform=wp.transform((0, 0, 2), wp.quat_identity()))])
        box = b.add_body(xform=wp.transform((1.0, 0.0, 0.5), wp.quat_from_axis_angle(wp.vec3(1, 0, 0), 0.3)))
        b.add_shape_box(box, hx=0.1, hy=0.1, hz=0.1)
        return b.finalize()

    out = []
    for cpu in (True, False):
        model = scene()
        solver = SolverMuJoCo(model, use_mujoco_cpu=cpu, integrator="implicitfast")
        control = model.control()
        control.joint_target_q.assign(np.array([0.4, 0, 0, 0, 0, 0, 0], np.float32)[: model.joint_dof_count])
        s = run(model, solver, 300, dt=2e-3, control=control)
        out.append((s.joint_q.numpy().copy(), s.body_q.numpy().copy()))
    np.testing.assert_allclose(out[1][0][:1], out[0][0][:1], atol=2e-3)  # pendulum angle
    np.testing.assert_allclose(out[1][1][:, :3], out[0][1][:, :3], atol=5e-3)  # body positions
    assert abs(float(out[1][1][1, 2]) - 0.1) < 5e-3  # the box rests on the ground


# ------------------------------------------------------------------------ BALL spring rest orientation
def _ball_spring_model(rest_xyzw, child_rot, k=2.0, c=0.5):
    """One body on a BALL joint (gravity off) with an isotropic spring resting at ``rest_xyzw``."""
    b = ModelBuilder(gravity=(0.0, 0.0, 0.0))
    link = b.add_link(mass=1.0, com=(0.0, 0.0, -0.3), inertia=wp.mat33(np.diag([0.02, 0.03, 0.04]).astype(np.float32)))
    j = b.add_joint_ball(-1, link, parent_xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()),
                         child_xform=wp.transform((0.1, 0.0, 0.0), child_rot), stiffness=k, damping=c)  # fmt: skip
    b.add_articulation([j])
    qs = b.joint_q_start[j]
    b.joint_rest_q[qs:qs + 4] = [float(v) for v in rest_xyzw]
    return b.finalize()


def test_ball_spring_rests_at_its_rest_orientation():
    """Analytic: with gravity off and damping, the ball settles at the rest orientation (child anchor
    rotated, so the conjugation into MuJoCo's body frame is exercised); no conversion warning."""
    rest = np.array([0.3, -0.2, 0.5, 0.8])
    rest /= np.linalg.norm(rest)
    model = _ball_spring_model(rest, wp.quat_from_axis_angle(wp.vec3(0.3, 1.0, 0.2), 0.7))
    import warnings

    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        solver = SolverMuJoCo(model)
    assert not [str(w.message) for w in rec if "BALL" in str(w.message)]
    s = run(model, solver, 4000, dt=2e-3)
    q = s.joint_q.numpy().astype(np.float64)
    assert 1.0 - abs(float(np.dot(q, rest))) < 1e-8
    assert np.abs(s.joint_qd.numpy()).max() < 1e-4


def test_ball_spring_rest_orientation_matches_mujoco():
    """The converted model against the equivalent MuJoCo model (qpos_spring set by hand, as MJCF has no
    quaternion springref): same trajectory from the identity."""
    rest = np.array([0.1, 0.4, -0.3, 0.85])
    rest /= np.linalg.norm(rest)
    model = _ball_spring_model(rest, wp.quat_identity())
    solver = SolverMuJoCo(model)
    xml = """<mujoco><option gravity="0 0 0" timestep="0.002"/><worldbody>
      <body pos="-0.1 0 1"><joint type="ball" pos="0.1 0 0" stiffness="2" damping="0.5"/>
        <inertial pos="0 0 -0.3" mass="1" diaginertia="0.02 0.03 0.04"/></body></worldbody></mujoco>"""
    raw = mujoco.MjModel.from_xml_string(xml)
    raw.qpos_spring[:] = [rest[3], rest[0], rest[1], rest[2]]
    np.testing.assert_allclose(solver.mj_model.qpos_spring, raw.qpos_spring, atol=1e-7)
    d_raw = mujoco.MjData(raw)
    s0, s1 = model.state(), model.state()
    for _ in range(500):
        solver.step(s0, s1, None, None, 2e-3)
        s0, s1 = s1, s0
        mujoco.mj_step(raw, d_raw)
    q = s0.joint_q.numpy().astype(np.float64)
    ref = d_raw.qpos[[1, 2, 3, 0]]
    assert 1.0 - abs(float(np.dot(q / np.linalg.norm(q), ref))) < 1e-10
    assert 1.0 - abs(float(np.dot(solver.mj_data.qpos, d_raw.qpos))) < 1e-12


def test_ball_spring_rest_orientation_is_pushed_by_notify_model_changed():
    from armillary.flags import ModelFlags

    model = _ball_spring_model([0.0, 0.0, 0.0, 1.0], wp.quat_identity())
    solver = SolverMuJoCo(model)
    np.testing.assert_array_equal(solver.mj_model.qpos_spring, [1.0, 0.0, 0.0, 0.0])
    rest = np.array([0.0, np.sin(0.25), 0.0, np.cos(0.25)])
    model.joint_rest_q.assign(rest.astype(np.float32))
    solver.notify_model_changed(ModelFlags.JOINT_DOF_PROPERTIES)
    np.testing.assert_allclose(solver.mj_models[0].qpos_spring, [rest[3], 0.0, rest[1], 0.0], atol=1e-7)

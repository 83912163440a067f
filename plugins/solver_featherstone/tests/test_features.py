"""SolverFeatherstone features: kinematic bodies, mimic joints, drives, limits, forces, contacts,
model changes and the errors/warnings for what it does not simulate."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import warp as wp

import armillary
from armillary import ModelFlags
from armillary.sim.enums import JointTargetMode
from armillary.solvers import SolverFeatherstone

wp.config.log_level = wp.LOG_WARNING
G = 9.81
NO_DENSITY = armillary.ModelBuilder.ShapeConfig(density=0.0)


def inertia(i):
    return wp.mat33(np.eye(3, dtype=np.float32) * i)


def stepper(model, control=None, contacts=False, **kw):
    solver = SolverFeatherstone(model, **{"angular_damping": 0.0, **kw})
    states = [model.state(), model.state()]
    armillary.eval_fk(model, states[0].joint_q, states[0].joint_qd, states[0])
    pipeline = armillary.CollisionPipeline(model) if contacts else None
    cts = pipeline.contacts() if contacts else None

    def step(n, dt=1.0e-3, before=None):
        for _ in range(n):
            states[0].clear_forces()
            if before is not None:
                before(states[0])
            if pipeline is not None:
                pipeline.collide(states[0], cts)
            solver.step(states[0], states[1], control, cts, dt)
            states.reverse()
        return states[0]

    return solver, step, cts


# ------------------------------------------------------------------ kinematic bodies
def test_kinematic_root_follows_prescribed_velocity_and_carries_a_pendulum():
    """A kinematic cart on a prismatic joint moves at its prescribed joint_qd whatever the
    forces (gravity, the swinging pole, joint_f); the pole it carries swings."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, -G))
    cart = b.add_link(mass=1.0, inertia=inertia(0.01), is_kinematic=True)
    pole = b.add_link(mass=0.5, com=(0.0, 0.0, -0.5), inertia=inertia(0.01))
    j0 = b.add_joint_prismatic(-1, cart, axis=(1.0, 0.0, 0.0))
    j1 = b.add_joint_revolute(cart, pole, axis=(0.0, 1.0, 0.0))
    b.add_articulation([j0, j1])
    model = b.finalize(device="cpu")
    control = model.control()
    control.joint_f.assign(np.array([100.0, 0.0], np.float32))  # must not move the kinematic cart
    solver, step, _ = stepper(model, control)
    s = step(0)
    s.joint_q.assign(np.array([0.0, 0.3], np.float32))
    s.joint_qd.assign(np.array([0.5, 0.0], np.float32))
    lowest = [1.0]
    s = step(1000, before=lambda st: lowest.__setitem__(0, min(lowest[0], float(st.joint_q.numpy()[1]))))
    q, qd = s.joint_q.numpy(), s.joint_qd.numpy()
    assert abs(q[0] - 0.5) < 1e-5 and abs(qd[0] - 0.5) < 1e-7
    assert lowest[0] < -0.25  # the pole swings through to the other side (period ~1.4 s)
    assert abs(s.body_q.numpy()[0, 0] - 0.5) < 1e-5


def test_kinematic_body_is_an_infinite_mass_collider():
    """A dynamic sphere dropped on a kinematic box (FREE joint, zero velocity) comes to rest on it;
    the box does not move under the impact or the sphere's weight."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, -G))
    box = b.add_body(xform=wp.transform((0.0, 0.0, 0.5), wp.quat_identity()), mass=1.0, inertia=inertia(0.1),
                     is_kinematic=True)  # fmt: skip
    b.add_shape_box(box, hx=0.5, hy=0.5, hz=0.5, cfg=NO_DENSITY)
    ball = b.add_body(xform=wp.transform((0.0, 0.0, 1.3), wp.quat_identity()), mass=1.0, inertia=inertia(0.004))
    b.add_shape_sphere(ball, radius=0.1, cfg=NO_DENSITY)
    model = b.finalize(device="cpu")
    _, step, _ = stepper(model, contacts=True)
    s = step(2000)
    q = s.body_q.numpy()
    np.testing.assert_allclose(q[0, :3], [0.0, 0.0, 0.5], atol=1e-6)
    assert 1.0 + 0.1 - 0.01 < q[1, 2] < 1.0 + 0.1 + 1e-3, q[1, 2]
    assert np.abs(s.body_qd.numpy()[1]).max() < 0.05


# ------------------------------------------------------------------------- mimic joints
def _mimic_model(c0=0.1, c1=2.0):
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    ref = b.add_link(mass=1.0, inertia=inertia(0.3))
    fol = b.add_link(mass=1.0, inertia=inertia(0.05))
    j0 = b.add_joint_revolute(-1, ref, axis=(0.0, 0.0, 1.0))
    j1 = b.add_joint_revolute(-1, fol, axis=(0.0, 0.0, 1.0), parent_xform=wp.transform((1.0, 0, 0), wp.quat_identity()))
    b.set_joint_mimic(j1, j0, coeffs=(c0, c1))
    b.add_articulation([j0, j1])
    return b.finalize(device="cpu")


def test_mimic_follower_moves_with_reference_and_transfers_its_forces_and_inertia():
    """Follower q = c0 + c1 q_ref exactly; a torque on the follower drives the reference with
    (I_ref + c1^2 I_fol) qdd_ref = c1 tau (the follower's force and inertia transferred)."""
    c0, c1, tau = 0.1, 2.0, 0.7
    model = _mimic_model(c0, c1)
    control = model.control()
    control.joint_f.assign(np.array([0.0, tau], np.float32))
    _, step, _ = stepper(model, control)
    dt, n = 1.0e-3, 500
    s = step(n, dt)
    q, qd = s.joint_q.numpy().astype(np.float64), s.joint_qd.numpy().astype(np.float64)
    qdd = c1 * tau / (0.3 + c1 * c1 * 0.05)
    assert abs(qd[0] - qdd * n * dt) < 1e-4 * qdd * n * dt
    assert abs(q[0] - 0.5 * qdd * (n * dt) ** 2) < qdd * n * dt * dt  # semi-implicit Euler O(dt) error
    assert abs(q[1] - (c0 + c1 * q[0])) < 1e-6
    assert abs(qd[1] - c1 * qd[0]) < 1e-6


def test_mimic_across_articulations_is_rejected():
    b = armillary.ModelBuilder()
    l0, l1 = b.add_link(mass=1.0, inertia=inertia(0.1)), b.add_link(mass=1.0, inertia=inertia(0.1))
    j0 = b.add_joint_revolute(-1, l0, axis=(0, 0, 1))
    j1 = b.add_joint_revolute(-1, l1, axis=(0, 0, 1))
    b.set_joint_mimic(j1, j0)
    b.add_articulation([j0])
    b.add_articulation([j1])
    model = b.finalize(device="cpu")
    with pytest.raises(ValueError, match="same articulation"):
        SolverFeatherstone(model)


# ------------------------------------------------------------------- drives and limits
def _hinge(target_mode=JointTargetMode.POSITION_VELOCITY, **kw):
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    link = b.add_link(mass=1.0, inertia=inertia(0.1))
    j = b.add_joint_revolute(-1, link, axis=(0.0, 0.0, 1.0), actuator_mode=target_mode, **kw)
    b.add_articulation([j])
    return b.finalize(device="cpu")


def test_position_drive_reaches_target_and_implicit_gains_are_stable():
    """A stiff PD drive (ke = 1e5, kd = 1e3 on I = 0.1: explicit Euler would need dt < 2e-3 ... 1e-4)
    converges to its target at dt = 10 ms without overshoot blow-up."""
    model = _hinge(target_ke=1.0e5, target_kd=1.0e3)
    control = model.control()
    control.joint_target_q.assign(np.array([0.8], np.float32))
    _, step, _ = stepper(model, control)
    s = step(100, dt=1.0e-2)
    assert abs(float(s.joint_q.numpy()[0]) - 0.8) < 1e-4


def test_velocity_drive_tracks_target_velocity():
    model = _hinge(target_mode=JointTargetMode.VELOCITY, target_ke=50.0, target_kd=5.0)
    control = model.control()
    control.joint_target_qd.assign(np.array([2.0], np.float32))
    control.joint_target_q.assign(np.array([-3.0], np.float32))  # ignored in VELOCITY mode
    _, step, _ = stepper(model, control)
    s = step(1000)
    assert abs(float(s.joint_qd.numpy()[0]) - 2.0) < 1e-3


def test_effort_limit_caps_the_drive():
    """With effort_limit E the drive accelerates the joint at no more than E / I."""
    model = _hinge(target_ke=1.0e4, target_kd=0.0, effort_limit=0.5)
    control = model.control()
    control.joint_target_q.assign(np.array([1.0], np.float32))
    _, step, _ = stepper(model, control)
    s = step(100)
    qd = float(s.joint_qd.numpy()[0])
    assert 0.0 < qd <= 0.5 / 0.1 * 0.1 + 1e-5  # E/I * t
    assert abs(qd - 0.5) < 1e-4


def test_joint_limit_stops_a_falling_pendulum():
    """A pendulum released horizontally hits an upper limit at 0.5 rad and stays near it
    (penetration below 0.05 rad with limit_ke = 1e4, limit_kd = 10)."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, -G))
    link = b.add_link(mass=1.0, com=(0.5, 0.0, 0.0), inertia=inertia(0.01))
    j = b.add_joint_revolute(-1, link, axis=(0.0, 1.0, 0.0), limit_lower=-2.0, limit_upper=0.5,
                             limit_ke=1.0e4, limit_kd=10.0)  # fmt: skip
    b.add_articulation([j])
    model = b.finalize(device="cpu")
    _, step, _ = stepper(model)
    worst = [0.0]
    s = step(3000, before=lambda st: worst.__setitem__(0, max(worst[0], float(st.joint_q.numpy()[0]))))
    assert worst[0] < 0.55, worst[0]
    assert abs(float(s.joint_q.numpy()[0]) - 0.5) < 0.01
    assert abs(float(s.joint_qd.numpy()[0])) < 0.05


# ------------------------------------------------------------------------- forces
def test_free_joint_f_is_a_world_wrench_at_the_com():
    """Control.joint_f of a FREE joint = (force, torque) in world at the COM: a force equal to
    the weight holds the body; a torque spins it up at tau / I about the world axis."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, -G))
    rot = wp.quat_from_axis_angle(wp.vec3(1.0, 0.0, 0.0), 0.7)
    body = b.add_body(xform=wp.transform((0.0, 0.0, 1.0), rot), mass=2.0, com=(0.1, 0.0, 0.0), inertia=inertia(0.2))
    b.add_shape_sphere(body, radius=0.1, cfg=NO_DENSITY)
    model = b.finalize(device="cpu")
    control = model.control()
    control.joint_f.assign(np.array([0.0, 0.0, 2.0 * G, 0.0, 0.0, 0.4], np.float32))
    _, step, _ = stepper(model, control)
    s0 = step(0)
    com0 = s0.body_q.numpy()[0, :3].copy()
    s = step(500)
    qd = s.body_qd.numpy()[0]
    np.testing.assert_allclose(qd[:3], 0.0, atol=1e-4)
    np.testing.assert_allclose(qd[3:], [0.0, 0.0, 0.4 / 0.2 * 0.5], rtol=1e-4, atol=1e-5)
    assert np.abs(s.body_q.numpy()[0, :3] - com0).max() < 0.1  # origin circles the COM, no drift
    assert abs(float(s.body_q.numpy()[0, 2]) - com0[2]) < 1e-4


def test_body_f_on_an_articulated_link_balances_gravity():
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, -G))
    link = b.add_link(mass=1.5, com=(0.5, 0.0, 0.0), inertia=inertia(0.01))
    j = b.add_joint_revolute(-1, link, axis=(0.0, 1.0, 0.0))
    b.add_articulation([j])
    model = b.finalize(device="cpu")
    _, step, _ = stepper(model)
    lift = np.array([[0.0, 0.0, 1.5 * G, 0.0, 0.0, 0.0]], np.float32)
    s = step(500, before=lambda st: st.body_f.assign(lift))
    assert abs(float(s.joint_q.numpy()[0])) < 1e-6


def test_global_world_articulation_falls_with_the_global_gravity_row():
    """Model.gravity has world_count + 1 rows, the last for the global world -1: a FREE body built
    outside every world falls with that row (set by set_gravity(world=-1)), the body of world 0 with
    row 0. Before the global row existed, global articulations took world 0's gravity."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, -G))
    b.begin_world()
    world_body = b.add_link(mass=1.0, inertia=inertia(0.01))
    b.add_articulation([b.add_joint_free(world_body)])
    b.end_world()
    global_body = b.add_link(mass=1.0, inertia=inertia(0.01))
    b.add_articulation([b.add_joint_free(global_body)])
    model = b.finalize(device="cpu")
    assert model.gravity.shape[0] == model.world_count + 1 == 2
    model.set_gravity((0.0, 0.0, -2.0), world=-1)
    model.set_gravity((1.0, 0.0, -G), world=0)
    solver, step, _ = stepper(model)
    solver.notify_model_changed(ModelFlags.MODEL_PROPERTIES)
    s = step(100)  # 0.1 s
    qd = s.body_qd.numpy()
    np.testing.assert_allclose(qd[world_body, :3], [0.1, 0.0, -0.1 * G], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(qd[global_body, :3], [0.0, 0.0, -0.2], rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------- contacts
def test_box_resting_on_ground_reports_its_weight():
    """A box on a FREE joint settles on the ground plane at its half height (penetration below
    5 mm with the default contact stiffness) and update_contacts reports a total normal force
    equal to its weight within 2 %."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, -G))
    body = b.add_body(xform=wp.transform((0.0, 0.0, 0.3), wp.quat_identity()), mass=2.0, inertia=inertia(0.02))
    b.add_shape_box(body, hx=0.2, hy=0.2, hz=0.2, cfg=NO_DENSITY)
    b.add_ground_plane()
    model = b.finalize(device="cpu")
    solver, step, cts = stepper(model, contacts=True)
    s = step(3000)
    z = float(s.body_q.numpy()[0, 2])
    assert 0.2 - 5e-3 < z < 0.2 + 1e-3, z
    assert np.abs(s.body_qd.numpy()[0]).max() < 1e-2
    solver.update_contacts(cts)
    n = int(cts.rigid_contact_count.numpy()[0])
    assert n >= 4
    f = cts.rigid_contact_force.numpy()[:n]
    normal = cts.rigid_contact_normal.numpy()[:n]
    shape1_is_box = cts.rigid_contact_shape1.numpy()[:n] == 0
    sign = np.where(shape1_is_box, 1.0, -1.0)  # force on the box
    total = float((sign[:, None] * f)[:, 2].sum())
    assert abs(total - 2.0 * G) < 0.02 * 2.0 * G, total
    assert np.all(np.abs(normal[:, 2]) > 0.99)


def test_reported_contact_forces_are_the_impulses_the_implicit_step_applied():
    """A 2 kg box dropped 0.1 m onto the ground at dt = 10 ms: every step, the contact forces
    reported for it (update_contacts: start-of-step force plus its linearisation at the new
    velocities) times dt equal its momentum change minus gravity's impulse, through the impact
    (where the start-of-step penalty force alone is far off) and at rest (sum = weight)."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, -G))
    body = b.add_body(xform=wp.transform((0.0, 0.0, 0.3), wp.quat_identity()), mass=2.0, inertia=inertia(0.02))
    b.add_shape_box(body, hx=0.2, hy=0.2, hz=0.2, cfg=NO_DENSITY)
    b.add_ground_plane()
    model = b.finalize(device="cpu")
    solver, step, cts = stepper(model, contacts=True)
    dt = 0.01
    worst, peak = 0.0, 0.0
    for _ in range(100):
        vz0 = float(step(0).body_qd.numpy()[0, 2])
        s = step(1, dt=dt)
        n = int(cts.rigid_contact_count.numpy()[0])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # update_contacts: see the observables
            solver.update_contacts(cts)
        f = cts.rigid_contact_force.numpy()[:n]
        on_box = np.where(cts.rigid_contact_shape1.numpy()[:n] == 0, 1.0, -1.0)
        fz = float((on_box * f[:, 2]).sum())
        momentum = 2.0 * (float(s.body_qd.numpy()[0, 2]) - vz0) / dt + 2.0 * G
        worst, peak = max(worst, abs(fz - momentum)), max(peak, abs(fz))
    assert peak > 10.0 * 2.0 * G  # an impact happened
    assert worst < 1e-3 * peak, (worst, peak)
    assert abs(fz - 2.0 * G) < 0.01 * 2.0 * G, fz


def test_arm_link_pushed_up_by_the_ground():
    """A revolute arm whose sphere tip falls onto the ground comes to rest on it: contact forces
    act through the joint (S^T f), holding the arm at the contact angle."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, -G))
    link = b.add_link(mass=1.0, com=(0.5, 0.0, 0.0), inertia=inertia(0.01))
    b.add_shape_sphere(link, xform=wp.transform((1.0, 0.0, 0.0), wp.quat_identity()), radius=0.1, cfg=NO_DENSITY)
    j = b.add_joint_revolute(-1, link, axis=(0.0, 1.0, 0.0), parent_xform=wp.transform((0, 0, 0.5), wp.quat_identity()))
    b.add_articulation([j])
    b.add_ground_plane()
    model = b.finalize(device="cpu")
    _, step, _ = stepper(model, contacts=True)
    s = step(3000)
    angle = math.asin(0.4 / 1.0)  # tip centre 0.1 above the ground: 0.5 - sin(q) = 0.1
    assert abs(float(s.joint_q.numpy()[0]) - angle) < 0.01
    assert abs(float(s.joint_qd.numpy()[0])) < 1e-2


# ------------------------------------------------------------------ model changes
def test_notify_model_changed_picks_up_new_inertial_properties():
    """With update_mass_matrix_interval=1000 the mass matrix is cached; after changing the
    armature and notifying JOINT_DOF_PROPERTIES the next step uses the new value."""
    model = _hinge()
    control = model.control()
    control.joint_f.assign(np.array([1.0], np.float32))
    solver, step, _ = stepper(model, control, update_mass_matrix_interval=1000)
    step(1)
    qd0 = float(step(0).joint_qd.numpy()[0])
    assert abs(qd0 - 1.0 / 0.1 * 1e-3) < 1e-6
    model.joint_armature.assign(np.array([0.9], np.float32))
    solver.notify_model_changed(ModelFlags.JOINT_DOF_PROPERTIES)
    qd1 = float(step(1).joint_qd.numpy()[0])
    assert abs((qd1 - qd0) - 1.0 / 1.0 * 1e-3) < 1e-6


def test_bad_arguments_are_rejected():
    model = _hinge()
    with pytest.raises(ValueError, match="update_mass_matrix_interval"):
        SolverFeatherstone(model, update_mass_matrix_interval=0)
    with pytest.raises(ValueError, match="angular_damping"):
        SolverFeatherstone(model, angular_damping=-1.0)


# ------------------------------------------------------------ not simulated: say so
def test_loop_closing_joint_warns_once_naming_it():
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, -G))
    l0 = b.add_link(mass=1.0, com=(0.5, 0, 0), inertia=inertia(0.01))
    l1 = b.add_link(mass=1.0, com=(0.5, 0, 0), inertia=inertia(0.01))
    j0 = b.add_joint_revolute(-1, l0, axis=(0, 1, 0))
    j1 = b.add_joint_revolute(l0, l1, axis=(0, 1, 0), parent_xform=wp.transform((1, 0, 0), wp.quat_identity()))
    b.add_articulation([j0, j1])
    b.add_joint_ball(l1, l0, parent_xform=wp.transform((1, 0, 0), wp.quat_identity()), label="closing")
    model = b.finalize(device="cpu")
    with pytest.warns(UserWarning, match="loop-closing.*closing"):
        SolverFeatherstone(model)


def test_world_joint_outside_an_articulation_is_rejected():
    b = armillary.ModelBuilder()
    link = b.add_link(mass=1.0, inertia=inertia(0.01))
    b.add_joint_revolute(-1, link, axis=(0, 0, 1), label="loose_hinge")
    model = b.finalize(device="cpu")
    with pytest.raises(ValueError, match="loose_hinge.*add_articulation"):
        SolverFeatherstone(model)


def test_position_target_behind_free_and_ball_joints_uses_the_coordinate_layout():
    """``joint_target_q`` has the ``joint_q`` layout: behind a FREE root and a BALL joint (7 + 4
    coordinates, 6 + 3 DOFs) a revolute joint's drive reads its target at its coordinate."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    root = b.add_link(mass=2.0, inertia=inertia(0.1))
    l1 = b.add_link(mass=1.0, com=(0.0, 0.1, 0.0), inertia=inertia(0.01))
    l2 = b.add_link(mass=0.5, com=(0.1, 0.0, 0.0), inertia=inertia(0.01))
    joints = [b.add_joint_free(root),
              b.add_joint_ball(root, l1, parent_xform=wp.transform((0.2, 0.0, 0.0), wp.quat_identity())),
              b.add_joint_revolute(l1, l2, axis=(0.0, 0.0, 1.0), target_ke=20.0, target_kd=1.0,
                                   parent_xform=wp.transform((0.0, 0.2, 0.0), wp.quat_identity()))]  # fmt: skip
    b.add_articulation(joints)
    model = b.finalize()
    control = model.control()
    target = control.joint_target_q.numpy()
    coord = int(model.joint_q_start.numpy()[2])
    assert coord == 11 and int(model.joint_qd_start.numpy()[2]) == 9
    target[coord] = 0.5
    control.joint_target_q.assign(target)
    _, step, _ = stepper(model, control)
    final = step(3000, dt=1.0e-3)
    assert final.joint_q.numpy()[coord] == pytest.approx(0.5, abs=0.02)

"""SolverFeatherstone gradients through ``wp.Tape`` (issue 23), each against central finite
differences of the plain (untaped) step on the same scene.

Reference usage: ``finalize(requires_grad=True)``, one state per step, the steps recorded on a
tape (``eval_fk`` of the initial state too), ``tape.backward(loss)``. Finite differences run in
float32, so each uses an epsilon of 1e-3 .. 1e-2 of its input's scale and scenes without events
inside the interval (no contact starting or ending, no drive hitting its effort limit); the
relative tolerance of each comparison is stated with it (``RTOL`` unless noted).
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import warp as wp

import armillary
from armillary.solvers import SolverFeatherstone

wp.config.log_level = wp.LOG_WARNING
G = 9.81
RTOL = 0.02  # autodiff vs central finite difference
NO_DENSITY = armillary.ModelBuilder.ShapeConfig(density=0.0)


def inertia(i):
    return wp.mat33(np.eye(3, dtype=np.float32) * i)


@wp.kernel
def _body_coordinate(body_q: wp.array(dtype=wp.transform), body: int, coord: int, loss: wp.array(dtype=float)):
    loss[0] = body_q[body][coord]


@wp.kernel
def _joint_coordinate(joint_q: wp.array(dtype=float), index: int, loss: wp.array(dtype=float)):
    loss[0] = joint_q[index]


class Scene:
    """A model, its initial coordinates, the steps to take and the loss (a coordinate of the last
    state: ``("body", body, 0..6)`` of ``body_q`` or ``("joint", index)`` of ``joint_q``).
    ``contacts``: collide before every step (True), or only before the first and keep those
    contacts (``"once"``: contact points fixed in the bodies' frames, normals fixed)."""

    def __init__(self, model, steps, dt, loss, *, q0=None, qd0=None, control=None, contacts=False, **solver_kw):
        self.model, self.steps, self.dt, self.loss = model, steps, dt, loss
        self.q0 = model.joint_q.numpy() if q0 is None else np.asarray(q0, np.float32)
        self.qd0 = model.joint_qd.numpy() if qd0 is None else np.asarray(qd0, np.float32)
        self.control, self.contacts, self.solver_kw = control, contacts, solver_kw

    def run(self, tape=None):
        """Roll out (recording on ``tape`` when given); returns the loss array and the states."""
        model = self.model
        solver = SolverFeatherstone(model, **self.solver_kw)
        states = [model.state() for _ in range(self.steps + 1)]
        states[0].joint_q.assign(self.q0)
        states[0].joint_qd.assign(self.qd0)
        pipeline = armillary.CollisionPipeline(model) if self.contacts else None
        contacts = pipeline.contacts() if pipeline is not None else None
        loss = wp.zeros(1, dtype=float, requires_grad=True)
        with tape if tape is not None else contextlib.nullcontext():
            armillary.eval_fk(model, states[0].joint_q, states[0].joint_qd, states[0])
            for i in range(self.steps):
                if pipeline is not None and (i == 0 or self.contacts != "once"):
                    pipeline.collide(states[i], contacts)
                solver.step(states[i], states[i + 1], self.control, contacts, self.dt)
            if self.loss[0] == "body":
                wp.launch(_body_coordinate, 1, inputs=[states[-1].body_q, self.loss[1], self.loss[2], loss])
            else:
                wp.launch(_joint_coordinate, 1, inputs=[states[-1].joint_q, self.loss[1], loss])
        return loss, states

    def _array(self, where, name, states):
        owner = states[0] if where == "state" else {"model": self.model, "control": self.control}[where]
        return getattr(owner, name)

    def gradient(self, where, name, index):
        """d loss / d ``<where>.<name>`` (flattened ``index``) by the tape."""
        tape = wp.Tape()
        loss, states = self.run(tape)
        tape.backward(loss)
        grad = self._array(where, name, states).grad.numpy().reshape(-1)[index]
        tape.reset()
        return float(grad)

    def finite_difference(self, where, name, index, eps):
        """Central finite difference of the untaped rollout."""
        values = []
        for sign in (1.0, -1.0):
            with self._perturbed(where, name, index, sign * eps):
                values.append(float(self.run()[0].numpy()[0]))
        return (values[0] - values[1]) / (2.0 * eps)

    @contextlib.contextmanager
    def _perturbed(self, where, name, index, delta):
        if where == "state":
            src = {"joint_q": self.q0, "joint_qd": self.qd0}[name]
            saved = src.copy()
            src.reshape(-1)[index] += delta
            try:
                yield
            finally:
                src[...] = saved
            return
        arr = self._array(where, name, None)
        saved = arr.numpy().copy()  # (numpy() of a CPU array is a view)
        values = saved.copy()
        values.reshape(-1)[index] += delta
        arr.assign(values)
        try:
            yield
        finally:
            arr.assign(saved)

    def check(self, where, name, index, eps, rtol=RTOL):
        grad = self.gradient(where, name, index)
        fd = self.finite_difference(where, name, index, eps)
        assert np.isfinite(grad), grad
        assert abs(fd) > 1.0e-4, (where, name, index, fd)  # a derivative worth comparing
        assert abs(grad - fd) <= rtol * abs(fd), (where, name, index, grad, fd)
        return grad, fd


# ----------------------------------------------------------------------------------- scenes
def pendulum(steps, q0=-1.5, damping=0.0, torque=0.0, **kw):
    """The issue's pendulum: a 1 kg bob 0.5 m below a revolute joint about world y, released at
    ``q0`` (-1.5 rad: almost horizontal); loss = the bob's height after ``steps`` steps of 10 ms."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, -G))
    link = b.add_link(mass=1.0, inertia=inertia(4.0e-3))
    j = b.add_joint_revolute(-1, link, axis=(0.0, 1.0, 0.0), damping=damping,
                             child_xform=wp.transform((0.0, 0.0, 0.5), wp.quat_identity()))
    b.add_articulation([j])
    model = b.finalize(device="cpu", requires_grad=True)
    control = model.control()
    control.joint_f.assign(np.array([torque], np.float32))
    return Scene(model, steps, 0.01, ("body", 0, 2), q0=[q0], qd0=[0.0], control=control, **kw)


def test_pendulum_20_steps_matches_finite_differences():
    """d height / d joint_qd0 and d height / d joint_q0 over 20 steps; the reference engine's
    SolverFeatherstone gives -0.086906 and -0.421089 on this scene (newton 1.8, same builder calls)."""
    scene = pendulum(20)
    g_qd, _ = scene.check("state", "joint_qd", 0, eps=1.0e-3)
    g_q, _ = scene.check("state", "joint_q", 0, eps=1.0e-3)
    assert abs(g_qd - (-0.086906)) < 1e-3 * 0.086906, g_qd
    assert abs(g_q - (-0.421089)) < 1e-3 * 0.421089, g_q


def test_pendulum_200_steps_matches_finite_differences():
    """Over 200 steps (2 s, about 1.4 swings) the gradients pass through every step's adjoint: the
    per-step buffers keep each step's intermediates (a shared buffer would give the last step's).
    The reference engine gives -0.057877 and -0.568511 (finite differences: 0.5 % and 0.02 % off)."""
    scene = pendulum(200)
    g_qd, _ = scene.check("state", "joint_qd", 0, eps=1.0e-3)
    g_q, _ = scene.check("state", "joint_q", 0, eps=1.0e-3)
    assert abs(g_qd - (-0.057877)) < 1e-3 * 0.057877, g_qd
    assert abs(g_q - (-0.568511)) < 1e-3 * 0.568511, g_q


def test_mass_inertia_damping_gradients_for_system_identification():
    """Model parameters read by the step carry gradients: ``body_mass``, ``body_inertia`` and
    ``joint_damping`` (a pendulum driven by a constant torque, with damping, so that all three
    change the motion)."""
    scene = pendulum(50, q0=-0.5, damping=0.3, torque=2.0)
    scene.check("model", "body_mass", 0, eps=1.0e-2)
    scene.check("model", "body_inertia", 4, eps=1.0e-3)  # I_yy, about the hinge axis
    scene.check("model", "joint_damping", 0, eps=1.0e-2)


def test_update_mass_matrix_interval_reuses_the_taped_matrix():
    """With a mass matrix rebuilt every 3rd step, the steps in between reuse it; its gradient goes
    to the step that built it."""
    pendulum_scene = pendulum(30, q0=-0.5, torque=2.0, update_mass_matrix_interval=3)
    pendulum_scene.check("model", "body_mass", 0, eps=1.0e-2)
    pendulum_scene.check("state", "joint_qd", 0, eps=1.0e-3)


def test_free_body_velocity_and_spin_from_rest():
    """A FREE body in gravity: x(T) = x0 + vx0 T, so d x / d vx0 = T exactly; the quaternion's x
    component after a spin w about x from rest is sin(w T / 2), d / d w = T / 2 at w = 0 (the
    exponential map keeps its derivative at zero angular velocity)."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, -G))
    body = b.add_body(mass=2.0, inertia=inertia(0.02))
    model = b.finalize(device="cpu", requires_grad=True)
    assert int(model.joint_type.numpy()[0]) == int(armillary.JointType.FREE) and body == 0
    scene = Scene(model, 20, 0.01, ("body", 0, 0))
    grad, _ = scene.check("state", "joint_qd", 0, eps=1.0e-2)
    assert abs(grad - 0.2) < 1e-4
    scene.loss = ("body", 0, 3)
    grad, _ = scene.check("state", "joint_qd", 3, eps=1.0e-3)
    assert abs(grad - 0.1) < 1e-3


def test_mimic_pair_gradient_goes_through_the_mimic_constraint():
    """A reference arm and a follower (q_f = 0.1 - 0.5 q_ref) hanging from its tip; loss = the
    follower tip's height. Its derivative in the reference's initial speed and in the follower's
    mass (whose inertia the reduction transfers to the reference) passes through ``T^T M T``."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, -G))
    ref = b.add_link(mass=1.0, com=(0.3, 0.0, 0.0), inertia=inertia(0.05))
    fol = b.add_link(mass=0.5, com=(0.3, 0.0, 0.0), inertia=inertia(0.02))
    j0 = b.add_joint_revolute(-1, ref, axis=(0.0, 1.0, 0.0))
    j1 = b.add_joint_revolute(ref, fol, axis=(0.0, 1.0, 0.0),
                              parent_xform=wp.transform((0.6, 0, 0), wp.quat_identity()))
    b.set_joint_mimic(j1, j0, coeffs=(0.1, -0.5))
    b.add_articulation([j0, j1])
    model = b.finalize(device="cpu", requires_grad=True)
    scene = Scene(model, 40, 0.01, ("body", 1, 2), q0=[0.2, 0.0], qd0=[0.5, -0.25])
    scene.check("state", "joint_qd", 0, eps=1.0e-2)
    scene.check("model", "body_mass", 1, eps=1.0e-2)
    # the follower's own initial coordinates are overwritten from the reference: no influence
    assert scene.gradient("state", "joint_qd", 1) == 0.0


def test_pd_drive_target_gradient():
    """A position-velocity drive (ke 50, kd 2) holding an arm against gravity: d final q / d
    ``Control.joint_target_q``, through the implicit drive term."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, -G))
    link = b.add_link(mass=1.0, com=(0.3, 0.0, 0.0), inertia=inertia(0.05))
    j = b.add_joint_revolute(-1, link, axis=(0.0, 1.0, 0.0), target_ke=50.0, target_kd=2.0)
    b.add_articulation([j])
    model = b.finalize(device="cpu", requires_grad=True)
    control = model.control()
    control.joint_target_q.assign(np.array([0.3], np.float32))
    scene = Scene(model, 60, 0.01, ("joint", 0), control=control)
    scene.check("control", "joint_target_q", 0, eps=1.0e-2)
    scene.check("model", "joint_target_ke", 0, eps=1.0e-1)


def sliding_box(steps=30):
    """A 2 kg box (0.4 m cube) resting 1 mm deep on the ground (about its equilibrium penetration),
    pushed along x at 1 m/s: friction (mu 0.2 on both shapes) slows it, the four corner contacts
    persist. loss = x after ``steps`` steps of 10 ms (still sliding: it would stop after 0.5 s)."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, -G))
    cfg = armillary.ModelBuilder.ShapeConfig(density=0.0, mu=0.2)
    b.add_body(xform=wp.transform((0.0, 0.0, 0.199), wp.quat_identity()), mass=2.0, inertia=inertia(0.05))
    b.add_shape_box(0, hx=0.2, hy=0.2, hz=0.2, cfg=cfg)
    b.add_ground_plane(cfg=cfg)
    model = b.finalize(device="cpu", requires_grad=True)
    qd0 = np.zeros(6, np.float32)
    qd0[0] = 1.0
    return Scene(model, steps, 0.01, ("body", 0, 0), qd0=qd0, contacts=True)


def test_sliding_box_with_friction_matches_finite_differences():
    """Through the penalty contacts (stiffness floor, Coulomb friction, implicit terms): d x / d
    the initial speed and d x / d mu of the box's shape (the contact uses the mean of the two
    shapes': about -g t^2 / 4 while it slides)."""
    scene = sliding_box()
    g_v, _ = scene.check("state", "joint_qd", 0, eps=1.0e-2)
    assert 0.2 < g_v < 0.4  # about t = 0.3 s
    g_mu, _ = scene.check("model", "shape_material_mu", 0, eps=1.0e-2)
    assert -0.5 * G * 0.09 < g_mu < 0.0


def test_box_at_rest_on_the_ground_has_finite_gradients():
    """Exactly at rest on the ground (zero slip: the friction gain's slip speed is 0) the gradients
    are finite and match finite differences of the settling height in the box's mass... which is
    about zero: the stiffness floor makes the rest penetration g tau^2 whatever the mass."""
    scene = sliding_box(20)
    scene.qd0[:] = 0.0
    scene.loss = ("body", 0, 2)
    grad = scene.gradient("model", "body_mass", 0)
    fd = scene.finite_difference("model", "body_mass", 0, eps=1.0e-2)
    assert np.isfinite(grad)
    assert abs(grad - fd) < 2.0e-4, (grad, fd)  # [m/kg]: both close to 0


def test_self_contact_pair_gradient():
    """Two links on vertical hinges, B's sphere 2 cm deep in a box on A (a self-contact of one
    articulation, implicit through the relative Jacobian): d (B's angle after 40 steps) / d the
    initial spins, with the contact found once and kept (the solver's part: the dependence of the
    narrow phase's contact points and normal on the poses is the collision pipeline's to
    differentiate; with a fresh collide every step the gradient is 3.6 % off after 20 steps here)."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, -G))
    a = b.add_link(mass=1.0, com=(0.5, 0.0, 0.0), inertia=inertia(0.1))
    b.add_shape_box(a, xform=wp.transform((1.0, -0.2, 0.0), wp.quat_identity()), hx=0.2, hy=0.1, hz=0.2, cfg=NO_DENSITY)
    c = b.add_link(mass=1.0, com=(0.5, 0.0, 0.0), inertia=inertia(0.1))
    b.add_shape_sphere(c, radius=0.12, cfg=NO_DENSITY)
    j0 = b.add_joint_revolute(-1, a, axis=(0.0, 0.0, 1.0))
    j1 = b.add_joint_revolute(a, c, axis=(0.0, 0.0, 1.0), collision_filter_parent=False,
                              parent_xform=wp.transform((1.0, 0.0, 0.0), wp.quat_identity()))
    b.add_articulation([j0, j1])
    model = b.finalize(device="cpu", requires_grad=True)
    scene = Scene(model, 40, 0.01, ("joint", 1), qd0=[0.0, 2.0], contacts="once")
    scene.check("state", "joint_qd", 1, eps=1.0e-2)
    scene.check("state", "joint_qd", 0, eps=1.0e-2)


# ------------------------------------------------------------------ the plain step is unchanged
def _drive_limit_mimic_model(requires_grad=False, tip_limit_ke=None):
    """Three links: a driven joint with limits, a mimic follower, a tip with tight limits
    (``tip_limit_ke=0``: held by the joint-limit floor alone)."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, -G))
    ref = b.add_link(mass=1.0, com=(0.3, 0, 0), inertia=inertia(0.3))
    fol = b.add_link(mass=1.0, com=(0.2, 0, 0), inertia=inertia(0.05))
    tip = b.add_link(mass=0.5, com=(0.2, 0, 0), inertia=inertia(0.01))
    j0 = b.add_joint_revolute(-1, ref, axis=(0.0, 1.0, 0.0), target_ke=50.0, target_kd=2.0, limit_lower=-0.5,
                              limit_upper=0.3)  # fmt: skip
    j1 = b.add_joint_revolute(ref, fol, axis=(0.0, 1.0, 0.0),
                              parent_xform=wp.transform((0.6, 0, 0), wp.quat_identity()))
    j2 = b.add_joint_revolute(fol, tip, axis=(0.0, 1.0, 0.0), limit_lower=-0.2, limit_upper=0.2,
                              limit_ke=tip_limit_ke, limit_kd=tip_limit_ke,
                              parent_xform=wp.transform((0.4, 0, 0), wp.quat_identity()))
    b.set_joint_mimic(j1, j0, coeffs=(0.1, -0.5))
    b.add_articulation([j0, j1, j2])
    model = b.finalize(device="cpu", requires_grad=requires_grad)
    control = model.control()
    control.joint_target_q.assign(np.array([0.2, 0.0, 0.0], np.float32))
    return model, control


def _resting_box_model(requires_grad=False):
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, -G))
    body = b.add_body(xform=wp.transform((0.0, 0.0, 0.21), wp.quat_identity()), mass=2.0, inertia=inertia(0.02))
    b.add_shape_box(body, hx=0.2, hy=0.2, hz=0.2, cfg=NO_DENSITY)
    b.add_ground_plane()
    return b.finalize(device="cpu", requires_grad=requires_grad)


def _plain_rollout(model, steps, dt, control=None, contacts=False):
    solver = SolverFeatherstone(model, angular_damping=0.0)
    s0, s1 = model.state(), model.state()
    armillary.eval_fk(model, s0.joint_q, s0.joint_qd, s0)
    pipeline = armillary.CollisionPipeline(model) if contacts else None
    cts = pipeline.contacts() if contacts else None
    for _ in range(steps):
        s0.clear_forces()
        if pipeline is not None:
            pipeline.collide(s0, cts)
        solver.step(s0, s1, control, cts, dt)
        s0, s1 = s1, s0
    return s0


def _f32(hexes):
    return np.array([float.fromhex(h) for h in hexes], np.float32)


def test_distance_joint_with_an_active_range():
    """A DISTANCE joint held at its maximum distance (issue 22): a 1 kg body whose anchor is 0.1 m
    from its COM, released 45 degrees below the horizontal with its anchor 0.401 m from the pivot
    (max_distance 0.4) and swinging down, so that the limit acts at every one of the 40 steps of
    5 ms (the anchor stays 0.4005 .. 0.4017 m out): d final x / d initial coordinates and speeds,
    max_distance and the mass. The radial force enters through the linear and the angular DOFs (the
    anchor is off the COM); measured errors <= 0.7 % (the spin's, a derivative of -3e-4), <= 0.07 %
    for the others."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, -G))
    u = np.array([np.cos(np.pi / 4), 0.0, -np.sin(np.pi / 4)])
    rot = wp.quat_from_axis_angle(wp.vec3(0.0, 1.0, 0.0), float(np.pi / 4))  # body x along u
    pivot = np.array([0.0, 0.0, 1.0])
    link = b.add_link(xform=wp.transform(wp.vec3(*(pivot + 0.501 * u)), rot), mass=1.0, inertia=inertia(4.0e-3))
    j = b.add_joint_distance(-1, link, parent_xform=wp.transform(wp.vec3(*pivot), wp.quat_identity()),
                             child_xform=wp.transform((-0.1, 0.0, 0.0), wp.quat_identity()), max_distance=0.4)
    b.add_articulation([j])
    model = b.finalize(device="cpu", requires_grad=True)
    speed = 1.0  # COM speed [m/s], swinging down (about +y)
    qd0 = [-u[2] * speed, 0.0, u[0] * speed, 0.0, speed / 0.501, 0.0]
    scene = Scene(model, 40, 0.005, ("body", 0, 0), qd0=qd0)
    for i in (0, 2):  # the anchor's offset from the pivot (x, z)
        scene.check("state", "joint_q", i, eps=1.0e-3)
    for i in (0, 2, 4):  # COM velocity (x, z), spin about y
        scene.check("state", "joint_qd", i, eps=1.0e-2)
    scene.check("model", "joint_limit_upper", 0, eps=1.0e-3)
    scene.check("model", "body_mass", 0, eps=1.0e-2)


def test_plain_step_is_bit_identical_to_before_the_gradient_work():
    """Without a tape the step computes exactly what it did before it was made differentiable
    (numbers stored from that version): drives, limits and a mimic pair (400 steps of 1 ms), and a
    box settling on the ground through the contact stiffness floor (150 steps of 10 ms)."""
    model, control = _drive_limit_mimic_model()
    s = _plain_rollout(model, 400, 1.0e-3, control=control)
    before = _f32(["0x1.34132ep-2", "-0x1.9d1984p-5", "0x1.99c7e6p-3", "-0x1.701238p-17", "0x1.701238p-18",
                   "-0x1.5f61ecp-22"])  # fmt: skip
    np.testing.assert_array_equal(np.r_[s.joint_q.numpy(), s.joint_qd.numpy()], before)
    s = _plain_rollout(_resting_box_model(), 150, 0.01, contacts=True)
    before = _f32(["0x0.0p+0", "0x0.0p+0", "0x1.9594f0p-3", "0x0.0p+0", "0x0.0p+0", "0x1.c2b09cp-22"])
    np.testing.assert_array_equal(np.r_[s.joint_q.numpy()[:3], s.joint_qd.numpy()[:3]], before)


def _taped_rollout(model, steps, dt, control=None, contacts=False, after=None):
    """Steps recorded on a tape, one state per step; ``after(solver, states, i)`` runs after step i."""
    solver = SolverFeatherstone(model, angular_damping=0.0)
    states = [model.state() for _ in range(steps + 1)]
    pipeline = armillary.CollisionPipeline(model) if contacts else None
    cts = pipeline.contacts() if contacts else None
    tape = wp.Tape()
    with tape:
        armillary.eval_fk(model, states[0].joint_q, states[0].joint_qd, states[0])
        for i in range(steps):
            if pipeline is not None:
                pipeline.collide(states[i], cts)
            solver.step(states[i], states[i + 1], control, cts, dt)
            if after is not None:
                after(solver, states, i)
    return tape, states, solver


def test_taped_step_computes_the_same_states_as_the_plain_step():
    """Recording on a tape changes where the intermediates live, not what is computed: the same
    states, bit for bit (drives, limits, mimic; contacts with the stiffness floor)."""
    model, control = _drive_limit_mimic_model(requires_grad=True)
    plain = _plain_rollout(model, 100, 1.0e-3, control=control)
    _, states, _ = _taped_rollout(model, 100, 1.0e-3, control=control)
    np.testing.assert_array_equal(states[-1].joint_q.numpy(), plain.joint_q.numpy())
    np.testing.assert_array_equal(states[-1].body_qd.numpy(), plain.body_qd.numpy())
    model = _resting_box_model(requires_grad=True)
    plain = _plain_rollout(model, 40, 0.01, contacts=True)
    _, states, _ = _taped_rollout(model, 40, 0.01, contacts=True)
    np.testing.assert_array_equal(states[-1].body_q.numpy(), plain.body_q.numpy())


def test_plain_steps_and_reset_after_taped_ones_leave_the_tape_intact():
    """Plain steps (and a reset) after taped ones, before ``tape.backward``, must not write into
    buffers the tape reads (here the last taped step's mass matrix, whose diagonal sets the
    joint-limit floor of the tip, 0.15 rad beyond its limit): the gradient is the one without them."""
    def gradient(extra):
        model, control = _drive_limit_mimic_model(requires_grad=True, tip_limit_ke=0.0)
        model.joint_q.assign(np.array([0.0, 0.1, 0.35], np.float32))  # the tip 0.15 rad beyond its limit

        def more_steps(solver, states, i):
            if i == 19 and extra:
                with tape_paused():
                    scratch = [model.state(), model.state()]
                    scratch[0].joint_q.assign(np.array([0.3, 0.0, -0.2], np.float32))
                    solver.step(scratch[0], scratch[1], control, None, 1.0e-3)
                    solver.step(scratch[1], scratch[0], control, None, 1.0e-3)
                    solver.reset(scratch[1])

        tape, states, _ = _taped_rollout(model, 20, 1.0e-3, control=control, after=more_steps)
        tape.backward(grads={states[-1].joint_qd: wp.array(np.float32([1.0, 0.0, 1.0]), dtype=float)})
        return model.body_mass.grad.numpy().copy(), states[0].joint_q.grad.numpy().copy()

    clean, dirty = gradient(False), gradient(True)
    np.testing.assert_array_equal(clean[0], dirty[0])
    np.testing.assert_array_equal(clean[1], dirty[1])


@contextlib.contextmanager
def tape_paused():
    """Run code untaped inside a tape's ``with`` block."""
    from armillary.launch import _warp_context

    runtime = _warp_context.runtime
    tape, runtime.tape = runtime.tape, None
    try:
        yield
    finally:
        runtime.tape = tape


def test_tape_bytes_per_step():
    """Per-step storage while taping: about 1.3 KB for the pendulum, growing with the model
    (O(bodies + articulations x dofs^2)) and with contacts (the contact stage and a copy of the
    contact arrays); the plain step allocates nothing."""
    scene = pendulum(1)
    solver = SolverFeatherstone(scene.model)
    small = solver.tape_bytes_per_step()
    assert 500 < small < 4000, small
    model = _resting_box_model(requires_grad=True)
    contacts = armillary.CollisionPipeline(model).contacts()
    solver = SolverFeatherstone(model)
    assert solver.tape_bytes_per_step(contacts) > solver.tape_bytes_per_step() + contacts.rigid_contact_max * 40


def test_reused_states_under_a_tape_are_rejected():
    """A taped step needs its own output state: stepping a state into itself, or ping-pong states
    (whose outputs a later step overwrites before ``tape.backward``), would give wrong gradients,
    so they raise, naming the fix. A reset tape may reuse its states."""
    scene = pendulum(1)
    model = scene.model
    solver = SolverFeatherstone(model)
    s0, s1 = model.state(), model.state()
    with pytest.raises(ValueError, match="state_in is state_out"):
        with wp.Tape():
            solver.step(s0, s0, None, None, 0.01)
    with pytest.raises(ValueError, match="input or output of an earlier step.*one State per step"):
        with wp.Tape():
            solver.step(s0, s1, None, None, 0.01)
            solver.step(s1, s0, None, None, 0.01)  # overwrites the first step's input
    tape = wp.Tape()
    for _ in range(2):  # the same states on a reset tape: fine
        with tape:
            solver.step(s0, s1, None, None, 0.01)
        tape.reset()
    solver.step(s0, s0, None, None, 0.01)  # and without a tape, in place is fine


def test_ball_and_d6_joints():
    """Multi-DOF joints: a BALL pendulum (quaternion coordinates, the exponential map) and a D6
    with a slide and two hinges: d final orientation (position for the slide) / d each initial
    speed."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, -G))
    link = b.add_link(mass=1.0, com=(0.0, 0.0, -0.5), inertia=inertia(0.01))
    b.add_articulation([b.add_joint_ball(-1, link)])
    model = b.finalize(device="cpu", requires_grad=True)
    q0 = np.array([np.sin(0.25), 0.0, 0.0, np.cos(0.25)], np.float32)  # 0.5 rad about x
    scene = Scene(model, 30, 0.01, ("body", 0, 3), q0=q0, qd0=[0.3, 1.0, 0.2])  # loss: the quaternion's x
    for i in range(3):
        scene.check("state", "joint_qd", i, eps=1.0e-2)

    b = armillary.ModelBuilder(gravity=(0.0, 0.0, -G))
    link = b.add_link(mass=1.0, com=(0.4, 0.0, 0.0), inertia=inertia(0.01))
    cfg = armillary.ModelBuilder.JointDofConfig
    j = b.add_joint_d6(-1, link, linear_axes=[cfg(axis=(0.0, 1.0, 0.0))],
                       angular_axes=[cfg(axis=(0.0, 1.0, 0.0)), cfg(axis=(0.0, 0.0, 1.0))])  # fmt: skip
    b.add_articulation([j])
    model = b.finalize(device="cpu", requires_grad=True)
    scene = Scene(model, 30, 0.01, ("body", 0, 4), q0=[0.0, -0.3, 0.2], qd0=[0.2, 0.5, 1.0])
    for i in (1, 2):  # the quaternion's y component: the two hinges
        scene.check("state", "joint_qd", i, eps=1.0e-2)
    scene.loss = ("body", 0, 1)  # the slide
    scene.check("state", "joint_qd", 0, eps=1.0e-2)

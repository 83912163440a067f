"""The specification's code examples in the passages that name SolverSemiImplicit, run with
``import armillary as newton`` under ``SolverSemiImplicit``.

No code block of the specification constructs ``SolverSemiImplicit`` itself; the pages name it in
the text around their examples: the Conventions page (``body_qd`` twists, ``body_f`` wrenches and
FREE-joint ``joint_f`` "used in all Newton solvers"), the Collisions page ("Newton's collision
pipeline works with all built-in solvers (... SolverSemiImplicit ...)": Quick Start, the
simulation-loop patterns, graph capture) and the Articulations page (maximal-coordinate solvers,
the state-initialisation examples, kinematic bodies, mimic joints enforced by penalty springs,
standalone and loop-closing joints consumed independently of articulations, passive springs on
principal angles). Each test runs the page's code as written (only the indentation lost in the
text extraction restored) with the solver named where the page names a generic ``solver``, then
checks what the passage states. Where the page gives no number, the expected value comes from the
reference engine (newton 1.8's SolverSemiImplicit run as a black box on the same code; the
``_example_*`` functions take the module as ``newton`` so the same code ran there) and is hard-coded
with a comment.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import warp as wp

import armillary as newton

# ---------------------------------------------------------------------- helpers


def _solver(model, **kwargs):
    return newton.solvers.SolverSemiImplicit(model, **kwargs)


def _quat_rotate(q, v):
    R = np.asarray(wp.quat_to_matrix(wp.quat(*[float(x) for x in q]))).reshape(3, 3)
    return R @ np.asarray(v, np.float64)


def _yaw(q) -> float:
    """Rotation angle about +z of a quaternion (x, y, z, w) that rotates about z only, in [-pi, pi)."""
    return math.atan2(2.0 * q[3] * q[2], 1.0 - 2.0 * q[2] * q[2])


# ---------------------------------------------------------------------- the solver's own page example
def _example_solver_page(steps=100, dt=1.0e-3):
    """The solver page's loop (``solver = newton.solvers.SolverSemiImplicit(model)``, 100 steps) on
    a free sphere: semi-implicit Euler free fall."""
    builder = newton.ModelBuilder()
    body = builder.add_body(xform=wp.transform((0.0, 0.0, 2.0), wp.quat_identity()))
    builder.add_shape_sphere(body, radius=0.5)
    model = builder.finalize()
    state_in, state_out, control, contacts = model.state(), model.state(), model.control(), None

    solver = newton.solvers.SolverSemiImplicit(model)

    # simulation loop
    for i in range(100):
        solver.step(state_in, state_out, control, contacts, dt)
        state_in, state_out = state_out, state_in
    return state_in.body_q.numpy()[0].astype(np.float64), state_in.body_qd.numpy()[0].astype(np.float64)


def test_solver_page_loop_is_semi_implicit_euler_free_fall():
    q, qd = _example_solver_page()
    n, dt, g = 100, 1.0e-3, 9.81
    # v_k = -g k dt, z_n = z_0 + dt sum_{k=1..n} v_k (velocity first, then position)
    assert qd[2] == pytest.approx(-g * n * dt, rel=1e-5)
    assert q[2] == pytest.approx(2.0 - g * dt * dt * n * (n + 1) / 2, abs=2e-6)
    np.testing.assert_allclose(q[3:], [0.0, 0.0, 0.0, 1.0], atol=1e-7)
    np.testing.assert_allclose(qd[[0, 1, 3, 4, 5]], 0.0, atol=1e-7)


# ---------------------------------------------------------------------- Conventions: body twist
@wp.kernel
def get_body_twist(body_qd: wp.array[wp.spatial_vector]):
    body_id = wp.tid()
    # body_qd is a 6D wp.spatial_vector in world frame
    twist = body_qd[body_id]
    # linear velocity is the velocity of the body's center of mass in world frame
    linear_velocity = twist[0:3]
    # angular velocity is the angular velocity of the body in world frame
    angular_velocity = twist[3:6]


COM_OFFSET = (0.3, 0.0, 0.0)  # [m] body frame
CUBE_HALF = 0.1  # [m]


def _cube_with_offset_com():
    """A cube whose centre (= COM) sits COM_OFFSET from the body origin; isotropic inertia, so a free
    spin keeps its world angular velocity; no gravity."""
    builder = newton.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    body = builder.add_body(xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()))
    builder.add_shape_box(body, xform=wp.transform(COM_OFFSET, wp.quat_identity()), hx=CUBE_HALF, hy=CUBE_HALF,
                          hz=CUBE_HALF)  # fmt: skip
    return builder.finalize()


TWIST0 = (0.5, -0.2, 0.1, 0.0, 0.0, 2.0)  # (v_com, omega), world frame [m/s, rad/s]


def _example_body_twist(steps=200, dt=1.0e-3):
    model = _cube_with_offset_com()
    state, state_1, control = model.state(), model.state(), model.control()
    state.body_qd.assign(np.array([TWIST0], np.float32))
    solver = newton.solvers.SolverSemiImplicit(model, angular_damping=0.0)
    origins = []
    for _ in range(steps):
        solver.step(state, state_1, control, None, dt)
        state, state_1 = state_1, state
        origins.append(state.body_q.numpy()[0, :3].astype(np.float64))
    wp.launch(get_body_twist, dim=model.body_count, inputs=[state.body_qd])
    return (state.body_q.numpy()[0].astype(np.float64), state.body_qd.numpy()[0].astype(np.float64),
            np.asarray(origins), model.body_com.numpy()[0].astype(np.float64))  # fmt: skip


def test_conventions_body_qd_is_com_velocity_and_world_angular_velocity():
    """"Newton's State.body_qd stores both linear and angular velocities in the world frame ... The
    linear velocity represents the COM velocity in world coordinates", and the origin moves with
    ``v_origin = v_com - omega x r_com`` (the page's formula)."""
    steps, dt = 200, 1.0e-3
    q, qd, origins, com = _example_body_twist(steps, dt)
    np.testing.assert_allclose(com, COM_OFFSET, atol=1e-7)
    # no force: the twist is unchanged (isotropic inertia, no damping)
    np.testing.assert_allclose(qd, TWIST0, atol=1e-5)
    # the COM moved with the linear part; the body turned about world z by omega t
    t = steps * dt
    com_w = q[:3] + _quat_rotate(q[3:], com)
    np.testing.assert_allclose(com_w, np.array([0.3, 0.0, 1.0]) + np.array(TWIST0[:3]) * t, atol=1e-5)
    assert _yaw(q[3:]) == pytest.approx(TWIST0[5] * t, abs=1e-5)
    # the body origin moves with v_com - omega x r_com (finite difference of the last two steps)
    v_origin = (origins[-1] - origins[-2]) / dt
    r_w = _quat_rotate(q[3:], com)
    expected = np.array(TWIST0[:3]) - np.cross(TWIST0[3:], r_w)
    np.testing.assert_allclose(v_origin, expected, atol=2e-3)


# ---------------------------------------------------------------------- Conventions: body_f wrench
@wp.kernel
def _set_wrench(body_f: wp.array(dtype=wp.spatial_vector), w: wp.spatial_vector):
    body_f[wp.tid()] = w


def _example_wrench(wrench, steps=100, dt=1.0e-3, via="body_f"):
    """Apply a constant world-frame wrench (force, torque about the COM) through ``State.body_f`` or
    the FREE joint's ``Control.joint_f``; return the final body pose and twist."""
    model = _cube_with_offset_com()
    state_0, state_1, control = model.state(), model.state(), model.control()
    solver = newton.solvers.SolverSemiImplicit(model, angular_damping=0.0)
    w = wp.spatial_vector(*[float(x) for x in wrench])
    if via == "joint_f":
        control.joint_f.assign(np.asarray(wrench, np.float32))
    for _ in range(steps):
        state_0.clear_forces()
        if via == "body_f":
            wp.launch(_set_wrench, dim=1, inputs=[state_0.body_f, w])
        solver.step(state_0, state_1, control, None, dt)
        state_0, state_1 = state_1, state_0
    return state_0.body_q.numpy()[0].astype(np.float64), state_0.body_qd.numpy()[0].astype(np.float64)


def _cube_mass_inertia():
    m = 1000.0 * (2 * CUBE_HALF) ** 3
    return m, m * (2 * CUBE_HALF) ** 2 / 6.0


def test_conventions_body_f_force_acts_at_the_com():
    """"f is the linear force and tau is the moment about the body's center of mass (COM), both
    expressed in world coordinates": a pure force at the COM of a body whose COM is off its origin
    accelerates it without turning it."""
    steps, dt = 100, 1.0e-3
    q, qd = _example_wrench((2.0, 0.0, 1.0, 0.0, 0.0, 0.0), steps, dt)
    m, _ = _cube_mass_inertia()
    np.testing.assert_allclose(qd[:3], np.array([2.0, 0.0, 1.0]) / m * steps * dt, rtol=1e-4)
    np.testing.assert_allclose(qd[3:], 0.0, atol=1e-7)
    np.testing.assert_allclose(q[3:], [0.0, 0.0, 0.0, 1.0], atol=1e-7)


def test_conventions_body_f_torque_is_about_the_com():
    """A pure moment spins the body about its COM: the COM stays where it is (the origin orbits it)."""
    steps, dt = 100, 1.0e-3
    q, qd = _example_wrench((0.0, 0.0, 0.0, 0.0, 0.0, 0.05), steps, dt)
    _, inertia = _cube_mass_inertia()
    assert qd[5] == pytest.approx(0.05 / inertia * steps * dt, rel=1e-4)
    np.testing.assert_allclose(qd[:3], 0.0, atol=1e-6)
    com_w = q[:3] + _quat_rotate(q[3:], COM_OFFSET)
    np.testing.assert_allclose(com_w, [0.3, 0.0, 1.0], atol=1e-6)
    # it turned by sum_k alpha k dt^2 (semi-implicit Euler)
    assert _yaw(q[3:]) == pytest.approx(0.05 / inertia * dt * dt * steps * (steps + 1) / 2, rel=1e-3)


def test_conventions_body_f_shifted_reference_point():
    """A force applied at a point p off the COM enters body_f as (f, r x f) with r = p - com (the
    page's shift rule); the same force without the moment does not turn the body."""
    steps, dt = 100, 1.0e-3
    f = np.array([0.0, 1.0, 0.0])
    r = np.array([0.1, 0.0, 0.0])
    q, qd = _example_wrench((*f, *np.cross(r, f)), steps, dt)
    m, inertia = _cube_mass_inertia()
    np.testing.assert_allclose(qd[:3], f / m * steps * dt, rtol=1e-3, atol=1e-7)
    assert qd[5] == pytest.approx(0.1 / inertia * steps * dt, rel=2e-3)


def test_conventions_free_joint_f_is_the_same_wrench_as_body_f():
    """"For FREE and DISTANCE joints, the corresponding 6 dimensions in this array are the physical
    wrench in world coordinates, with the force and torque referenced at the child body's center of
    mass": the same numbers through Control.joint_f give the same motion as through State.body_f."""
    wrench = (0.5, -1.0, 2.0, 0.01, 0.02, -0.03)
    qa, qda = _example_wrench(wrench, via="body_f")
    qb, qdb = _example_wrench(wrench, via="joint_f")
    np.testing.assert_allclose(qdb, qda, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(qb, qa, atol=1e-6)
    assert np.abs(qda[3:]).max() > 1e-2  # non-trivial


# ---------------------------------------------------------------------- Collisions: Quick Start
def _example_quickstart(frames=120, density=None):
    builder = newton.ModelBuilder()
    builder.add_ground_plane()
    # Dynamic sphere
    body = builder.add_body(xform=wp.transform((0.0, 0.0, 2.0), wp.quat_identity()))
    if density is None:
        builder.add_shape_sphere(body, radius=0.5)
    else:  # the same sphere, lighter
        builder.add_shape_sphere(body, radius=0.5, cfg=newton.ModelBuilder.ShapeConfig(density=density))
    model = builder.finalize()
    solver = newton.solvers.SolverSemiImplicit(model)
    state_0 = model.state()
    state_1 = model.state()
    control = model.control()
    pipeline = newton.CollisionPipeline(model)
    contacts = pipeline.contacts()
    dt = 1.0 / 60.0 / 10.0
    zs = []
    for frame in range(frames):
        for substep in range(10):
            state_0.clear_forces()
            pipeline.collide(state_0, contacts)
            solver.step(state_0, state_1, control, contacts, dt)
            state_0, state_1 = state_1, state_0
        zs.append(float(state_0.body_q.numpy()[0, 2]))
    return np.asarray(zs), state_0.body_qd.numpy()[0].astype(np.float64)


def test_collisions_quickstart_with_semi_implicit():
    """The Quick Start with SolverSemiImplicit (the Solver Integration section: the pipeline works with
    all built-in solvers; pass the Contacts object to step). The sphere falls freely until it touches
    the ground (frame 30: z = 0.686 m), then meets the penalty contact of the default material
    (ke = 2500 N/m, kd = 100 N s/m): as written (density 1000, 524 kg) the static overlap
    m g / ke = 2.05 m exceeds the radius and the sphere sinks through the ground plane, as it does in
    the reference; a 5.24 kg sphere (density 10) lands and stays on the ground.

    Reference (newton 1.8 SolverSemiImplicit, same code): as written the lowest z is -4.41 m; with
    density 10 the lowest z is 0.3465 m (landing overlap 0.153 m) and z after 2 s is 0.49 m."""
    zs, qd = _example_quickstart()
    assert np.all(np.isfinite(zs))
    dt, g = 1.0 / 600.0, 9.81
    n = 10 * np.arange(1, 31)
    np.testing.assert_allclose(zs[:30], 2.0 - g * dt * dt * n * (n + 1) / 2, atol=1e-4)  # free fall
    assert zs.min() < -0.5  # sank through, like the reference (-4.41 m)
    zs, qd = _example_quickstart(density=10.0)
    np.testing.assert_allclose(zs[:30], 2.0 - g * dt * dt * n * (n + 1) / 2, atol=1e-4)
    assert zs.min() == pytest.approx(0.3465, abs=0.03)  # reference landing depth
    assert np.all(zs[40:] > 0.3) and np.all(zs[40:] < 1.5)  # stays on the ground (bounces below 1 m)


def _example_sim_loops():
    CollisionPipeline = newton.CollisionPipeline  # the page: ``from newton import CollisionPipeline``

    builder = newton.ModelBuilder()
    builder.add_ground_plane()
    body = builder.add_body(xform=wp.transform((0.0, 0.0, 2.0), wp.quat_identity()))
    builder.add_shape_sphere(body, radius=0.5)
    model = builder.finalize()
    solver = newton.solvers.SolverSemiImplicit(model)
    pipeline = CollisionPipeline(model, broad_phase="sap")
    state_0 = model.state()
    state_1 = model.state()
    control = model.control()
    contacts = pipeline.contacts()
    num_frames = 2
    sim_substeps = 3
    sim_dt = 1.0 / 60.0 / sim_substeps
    collide_every_n = 2
    zs = []
    # Every substep
    for frame in range(num_frames):
        for substep in range(sim_substeps):
            pipeline.collide(state_0, contacts)
            solver.step(state_0, state_1, control, contacts, dt=sim_dt)
            state_0, state_1 = state_1, state_0
    zs.append(float(state_0.body_q.numpy()[0, 2]))
    # Once per frame
    for frame in range(num_frames):
        pipeline.collide(state_0, contacts)
        for substep in range(sim_substeps):
            solver.step(state_0, state_1, control, contacts, dt=sim_dt)
            state_0, state_1 = state_1, state_0
    zs.append(float(state_0.body_q.numpy()[0, 2]))
    # Every N substeps
    for frame in range(num_frames):
        for substep in range(sim_substeps):
            if substep % collide_every_n == 0:
                pipeline.collide(state_0, contacts)
            solver.step(state_0, state_1, control, contacts, dt=sim_dt)
            state_0, state_1 = state_1, state_0
    zs.append(float(state_0.body_q.numpy()[0, 2]))
    return np.asarray(zs)


def test_collisions_simulation_loop_patterns():
    """The three loop patterns of "Collision frequency in the simulation loop" with
    SolverSemiImplicit: 18 steps of free fall (no contact yet), z_n = 2 - g dt^2 n(n+1)/2."""
    zs = _example_sim_loops()
    dt, g = 1.0 / 180.0, 9.81
    expected = [2.0 - g * dt * dt * n * (n + 1) / 2 for n in (6, 12, 18)]
    np.testing.assert_allclose(zs, expected, atol=1e-5)


def test_collisions_graph_capture_example():
    """The Graph capture block: collide and the SolverSemiImplicit substeps captured and replayed (CUDA
    only: the page guards it with ``if wp.get_device().is_cuda``)."""
    if not wp.get_device().is_cuda:
        pytest.skip("graph capture needs a CUDA device")
    builder = newton.ModelBuilder()
    builder.add_ground_plane()
    body = builder.add_body(xform=wp.transform((0.0, 0.0, 2.0), wp.quat_identity()))
    builder.add_shape_sphere(body, radius=0.5)
    model = builder.finalize()
    solver = newton.solvers.SolverSemiImplicit(model)
    pipeline = newton.CollisionPipeline(model, broad_phase="sap")
    state_0, state_1, control = model.state(), model.state(), model.control()
    contacts = pipeline.contacts()
    sim_substeps, dt = 2, 1.0 / 600.0  # even: the capture's state_0 is the input again
    if wp.get_device().is_cuda:
        with wp.ScopedCapture() as capture:
            pipeline.collide(state_0, contacts)
            for _ in range(sim_substeps):
                solver.step(state_0, state_1, control, contacts, dt)
                state_0, state_1 = state_1, state_0
        graph = capture.graph
    # Each frame:
    for _ in range(10):
        wp.capture_launch(graph)
    z = float(state_0.body_q.numpy()[0, 2])
    assert z < 2.0 and np.isfinite(z)


# ---------------------------------------------------------------------- Articulations
def test_articulations_add_body_and_free_link_examples_simulate():
    """The two initialisation examples ("This scene can now be simulated by both maximal-coordinate and
    generalized-coordinate solvers"), stepped by SolverSemiImplicit: the body falls freely and the
    FREE joint's coordinates are recovered from the body state after each step."""
    for variant in ("add_body", "add_link"):
        builder = newton.ModelBuilder()
        tf = wp.transform(wp.vec3(1.0, 2.0, 3.0), wp.quat_from_axis_angle(wp.vec3(0.0, 0.0, 1.0), 0.5 * wp.pi))
        if variant == "add_body":
            body = builder.add_body(xform=tf)
            builder.add_shape_box(body)  # add a shape to the body to add some inertia
        else:
            body = builder.add_link(xform=tf)
            builder.add_shape_box(body)  # add a shape to the body to add some inertia
            joint = builder.add_joint_free(body)  # add a free joint to connect the body to the world
            builder.add_articulation([joint])  # create articulation from the joint
        model = builder.finalize()
        state = model.state()
        # The body poses (maximal coordinates) are initialized by the xform argument:
        assert all(state.body_q.numpy()[0] == [*tf])
        assert len(state.joint_q) == 7

        solver = newton.solvers.SolverSemiImplicit(model)
        state_1 = model.state()
        n, dt = 50, 1.0e-3
        for _ in range(n):
            solver.step(state, state_1, model.control(), None, dt)
            state, state_1 = state_1, state
        q = state.body_q.numpy()[0]
        assert q[2] == pytest.approx(3.0 - 9.81 * dt * dt * n * (n + 1) / 2, abs=2e-6), variant
        np.testing.assert_allclose(q[3:], [*tf][3:], atol=1e-6)
        # FREE joint coordinates follow the body (COM at the origin): pose and world twist
        np.testing.assert_allclose(state.joint_q.numpy(), q, atol=1e-6)
        np.testing.assert_allclose(state.joint_qd.numpy(), state.body_qd.numpy()[0], atol=1e-6)


def _example_revolute_init(seconds=1.0, dt=1.0e-3):
    builder = newton.ModelBuilder()
    # create an articulation with a single revolute joint
    body = builder.add_link()
    builder.add_shape_box(body)  # add a shape to the body to add some inertia
    joint = builder.add_joint_revolute(parent=-1, child=body, axis=wp.vec3(0.0, 0.0, 1.0))  # noqa: E501 - add a revolute joint to the body
    builder.add_articulation([joint])  # create articulation from the joint
    builder.joint_q[-1] = 0.5
    builder.joint_qd[-1] = 10.0
    model = builder.finalize()
    state = model.state()
    # The generalized coordinates have been initialized by the revolute joint:
    assert all(state.joint_q.numpy() == [0.5])
    assert all(state.joint_qd.numpy() == [10.0])
    newton.eval_fk(model, state.joint_q, state.joint_qd, state)

    solver = newton.solvers.SolverSemiImplicit(model)
    state_1 = model.state()
    qs, yaws = [], []
    for _ in range(int(round(seconds / dt))):
        solver.step(state, state_1, model.control(), None, dt)
        state, state_1 = state_1, state
        qs.append(float(state.joint_q.numpy()[0]))
        yaws.append(_yaw(state.body_q.numpy()[0, 3:].astype(np.float64)))
    return np.asarray(qs), np.asarray(yaws), state.body_qd.numpy()[0].astype(np.float64), state.body_q.numpy()[0]


def test_articulations_revolute_initialisation_then_semi_implicit_without_winding():
    """The revolute initialisation example (q = 0.5, qd = 10 rad/s, eval_fk: "a maximal-coordinate
    solver can simulate the scene starting from these initial conditions"). Under SemiImplicit the
    body spins about z; "SemiImplicit derives angular coordinates from body orientations and does
    not track multi-turn winding": joint_q is the principal angle in [-pi, pi) of the body's yaw.

    Reference (newton 1.8, same code): after 1 s the body's angular velocity is REF_REV_WZ rad/s
    (angular_damping 0.05 s^-1) and the 1000 kg box (the example's default 1 m cube) has sagged to
    z = REF_REV_Z m on the 1e4 N/m penalty hinge (period 2 s, static sag 0.98 m). newton itself leaves
    joint_q untouched (the page: refreshing it is solver-defined); this solver recovers it."""
    qs, yaws, qd, q_body = _example_revolute_init()
    assert np.all(qs >= -math.pi - 1e-6) and np.all(qs < math.pi + 1e-6)
    np.testing.assert_allclose(np.angle(np.exp(1j * (qs - yaws))), 0.0, atol=1e-4)
    assert np.count_nonzero(np.abs(np.diff(qs)) > math.pi) >= 2  # wrapped, not wound
    assert qd[5] == pytest.approx(REF_REV_WZ, rel=2e-3)
    assert q_body[2] == pytest.approx(REF_REV_Z, abs=0.02)
    np.testing.assert_allclose(q_body[:2], 0.0, atol=1e-3)


def _example_mimic():
    builder = newton.ModelBuilder()
    link_0 = builder.add_link()
    link_1 = builder.add_link()
    reference = builder.add_joint_revolute(parent=-1, child=link_0, axis=wp.vec3(0.0, 0.0, 1.0))
    follower = builder.add_joint_revolute(parent=link_0, child=link_1, axis=wp.vec3(0.0, 0.0, 1.0))
    builder.add_articulation([reference, follower])
    builder.set_joint_mimic(follower, reference, coeffs=(0.25, -2.0))
    model = builder.finalize()
    state = model.state()
    state.joint_q.assign([0.5, 0.0])
    state.joint_qd.assign([1.0, 0.0])
    newton.eval_mimic(model, state)
    assert np.allclose(state.joint_q.numpy(), [0.5, -0.75])
    assert np.allclose(state.joint_qd.numpy(), [1.0, -2.0])
    return model


def _mimic_pair(ke=None, kd=None, seconds=1.0, dt=1.0e-3):
    """The mimic page's mechanism with inertia (small boxes on both links; the page's bare links have
    none), no gravity, the reference joint driven by a PD target to 0.4 rad, the follower free but
    for the mimic coupling q_f = 0.25 - 2 q_r. Returns the final (q_r, q_f) and the solver output."""
    builder = newton.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    link_0 = builder.add_link()
    builder.add_shape_box(link_0, hx=0.1, hy=0.1, hz=0.1)
    link_1 = builder.add_link()
    builder.add_shape_box(link_1, xform=wp.transform((0.3, 0.0, 0.0), wp.quat_identity()), hx=0.1, hy=0.05,
                          hz=0.05)  # fmt: skip
    reference = builder.add_joint_revolute(parent=-1, child=link_0, axis=wp.vec3(0.0, 0.0, 1.0), target_q=0.4,
                                           target_ke=50.0, target_kd=5.0)  # fmt: skip
    follower = builder.add_joint_revolute(parent=link_0, child=link_1, axis=wp.vec3(0.0, 0.0, 1.0))
    builder.add_articulation([reference, follower])
    builder.set_joint_mimic(follower, reference, coeffs=(0.25, -2.0))
    model = builder.finalize()
    state_0, state_1 = model.state(), model.state()
    newton.eval_mimic(model, state_0)
    newton.eval_fk(model, state_0.joint_q, state_0.joint_qd, state_0)
    kw = {} if ke is None else dict(joint_mimic_ke=ke, joint_mimic_kd=kd)
    solver = newton.solvers.SolverSemiImplicit(model, **kw)
    control = model.control()
    errs = []
    for _ in range(int(round(seconds / dt))):
        solver.step(state_0, state_1, control, None, dt)
        state_0, state_1 = state_1, state_0
        # "To read joint coordinates from the updated body state, use newton.eval_ik()"
        newton.eval_ik(model, state_0, state_0.joint_q, state_0.joint_qd)
        qr, qf = state_0.joint_q.numpy()
        errs.append(qf - (0.25 - 2.0 * qr))
    return state_0.joint_q.numpy().astype(np.float64), np.asarray(errs)


def test_articulations_mimic_example_and_semi_implicit_penalty_coupling():
    """The mimic example as written, then: "newton.solvers.SolverSemiImplicit enforces these
    relationships with penalty spring and damping forces. Configure the global gains with
    joint_mimic_ke and joint_mimic_kd on the solver."

    Reference (newton 1.8, same scene): final (q_r, q_f) = REF_MIMIC_Q (default gains) and
    REF_MIMIC_Q_STIFF (ke 1000, kd 3); the largest follower error is REF_MIMIC_ERR and
    REF_MIMIC_ERR_STIFF."""
    model = _example_mimic()
    assert model.joint_mimic_joint.numpy().tolist() == [-1, 0]
    q, errs = _mimic_pair()
    np.testing.assert_allclose(q, REF_MIMIC_Q, atol=0.02)
    assert np.abs(errs).max() == pytest.approx(REF_MIMIC_ERR, rel=0.2)
    assert abs(errs[-1]) < 5e-3
    q_stiff, errs_stiff = _mimic_pair(1000.0, 3.0)
    np.testing.assert_allclose(q_stiff, REF_MIMIC_Q_STIFF, atol=0.01)
    # stiffer gains follow more closely
    assert np.abs(errs_stiff).max() == pytest.approx(REF_MIMIC_ERR_STIFF, rel=0.2)
    assert np.abs(errs_stiff).max() < 0.5 * np.abs(errs).max()


def _example_kinematic(steps=100, dt=1.0e-3):
    builder = newton.ModelBuilder()
    # 1) Kinematic free-base body (add_body creates free joint + articulation)
    kinematic_free = builder.add_body(is_kinematic=True, mass=1.0)
    # 2) Kinematic revolute root with a dynamic child
    root = builder.add_link(is_kinematic=True, mass=1.0)
    child = builder.add_link(mass=1.0)
    j_root = builder.add_joint_revolute(parent=-1, child=root, axis=newton.Axis.Z)
    j_child = builder.add_joint_revolute(parent=root, child=child, axis=newton.Axis.Z)
    builder.add_articulation([j_root, j_child])
    # 3) Static fixed-root body (zero joint DOFs)
    static_root = builder.add_link(is_kinematic=True, mass=1.0)
    j_static = builder.add_joint_fixed(parent=-1, child=static_root)
    builder.add_articulation([j_static])
    model = builder.finalize()

    state_0, state_1 = model.state(), model.state()
    # maximal-coordinate workflow: write body_q / body_qd of the kinematic bodies directly
    qd = state_0.body_qd.numpy()
    qd[kinematic_free] = (0.5, 0.0, 0.0, 0.0, 0.0, 0.0)
    qd[root] = (0.0, 0.0, 0.0, 0.0, 0.0, 1.0)
    state_0.body_qd.assign(qd)
    q0 = state_0.body_q.numpy().copy()
    solver = newton.solvers.SolverSemiImplicit(model)
    control = model.control()
    first = None
    for k in range(steps):
        solver.step(state_0, state_1, control, None, dt)
        if k == 0:
            first = (state_1.body_q.numpy().copy(), state_1.body_qd.numpy().copy())
        state_0, state_1 = state_1, state_0
    return model, q0, qd, first, state_0.body_q.numpy(), state_0.body_qd.numpy(), (kinematic_free, root, child,
                                                                                    static_root)  # fmt: skip


def test_articulations_kinematic_bodies_keep_prescribed_state():
    """The kinematic combinations example under SolverSemiImplicit: "Maximal-coordinate solvers ... use
    prescribed body transforms/twists" and SemiImplicit "preserves prescribed state"; "Applied forces
    do not drive kinematic motion" (gravity here); the dynamic child falls.

    Reference (newton 1.8, same code): the kinematic bodies' body_q / body_qd are their inputs after
    every step (REF_KIN_FIRST_MOVES is False: the pose is not advanced by the prescribed twist); the
    child (1 kg on the 1e4 N/m penalty hinge) sags by REF_KIN_CHILD_DZ m in 100 steps."""
    model, q0, qd0, first, q, qd, (kf, root, child, static_root) = _example_kinematic()
    q1, qd1 = first
    for b in (kf, root, static_root):
        np.testing.assert_allclose(qd1[b], qd0[b], atol=1e-7)
        np.testing.assert_allclose(qd[b], qd0[b], atol=1e-7)
    moved = bool(np.abs(q1[kf, :3] - q0[kf, :3]).max() > 1e-6)
    assert moved == REF_KIN_FIRST_MOVES
    for b in (kf, root):
        np.testing.assert_allclose(q[b], q0[b], atol=1e-7)
    np.testing.assert_allclose(q[static_root], q0[static_root], atol=1e-7)
    assert q[child, 2] - q0[child, 2] == pytest.approx(REF_KIN_CHILD_DZ, abs=1e-3)


def _example_standalone_joint(seconds=1.0, dt=1.0e-3):
    """A pendulum hinged to the world by a revolute joint outside every articulation (a standalone
    world-root joint, finalize(skip_validation_joints=True))."""
    builder = newton.ModelBuilder()
    body = builder.add_link(xform=wp.transform((0.5, 0.0, 1.0), wp.quat_identity()))
    builder.add_shape_box(body, hx=0.5, hy=0.05, hz=0.05)  # 10 kg rod
    builder.add_joint_revolute(parent=-1, child=body, axis=newton.Axis.Y,
                               parent_xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()),
                               child_xform=wp.transform((-0.5, 0.0, 0.0), wp.quat_identity()))  # fmt: skip
    model = builder.finalize(skip_validation_joints=True)
    solver = newton.solvers.SolverSemiImplicit(model)
    s0, s1, control = model.state(), model.state(), model.control()
    gaps, zs = [], []
    for _ in range(int(round(seconds / dt))):
        solver.step(s0, s1, control, None, dt)
        s0, s1 = s1, s0
        q = s0.body_q.numpy()[0].astype(np.float64)
        anchor = q[:3] + _quat_rotate(q[3:], (-0.5, 0.0, 0.0))
        gaps.append(np.linalg.norm(anchor - np.array([0.0, 0.0, 1.0])))
        zs.append(q[2])
    return np.asarray(gaps), np.asarray(zs)


def test_articulations_standalone_joint_is_consumed_without_articulation():
    """"Maximal-coordinate solvers (SolverXPBD, SolverSemiImplicit) consume joints independently of
    articulation membership. Semi-implicit joint constraints are penalty forces, so their accuracy
    and stability depend on the configured stiffness, damping, and time step."

    Reference (newton 1.8, same scene, dt 1 ms, default joint_attach_ke/kd): max gap REF_SA_GAP m,
    lowest COM z REF_SA_ZMIN m (swung down to the bottom), COM z after 1 s REF_SA_Z m."""
    gaps, zs = _example_standalone_joint()
    assert zs.min() == pytest.approx(REF_SA_ZMIN, abs=0.01)
    assert zs[-1] == pytest.approx(REF_SA_Z, abs=0.02)
    assert gaps.max() < 1.3 * REF_SA_GAP


def _example_loop_closure(seconds=0.5, dt=1.0e-3, with_loop=True):
    builder = newton.ModelBuilder()
    # Fixed root attached to the world.
    root = builder.add_link()
    builder.add_shape_box(root, hx=0.1, hy=0.1, hz=0.1)
    j_root = builder.add_joint_fixed(parent=-1, child=root)
    # Child A: revolute about Z, hinged on the root at +X.
    child_a = builder.add_link()
    builder.add_shape_box(child_a, hx=0.5, hy=0.05, hz=0.05)
    j_a = builder.add_joint_revolute(
        parent=root,
        child=child_a,
        axis=newton.Axis.Z,
        parent_xform=wp.transform(wp.vec3(1.0, 0.0, 0.0), wp.quat_identity()),
    )
    # Child B: revolute about Z, hinged on the root at -X.
    child_b = builder.add_link()
    builder.add_shape_box(child_b, hx=0.5, hy=0.05, hz=0.05)
    j_b = builder.add_joint_revolute(
        parent=root,
        child=child_b,
        axis=newton.Axis.Z,
        parent_xform=wp.transform(wp.vec3(-1.0, 0.0, 0.0), wp.quat_identity()),
    )
    # Loop-closing joint: a fixed joint between the two children. Authored with
    # add_joint_* exactly like a tree joint, but deliberately left out of the
    # articulation below.
    if with_loop:
        j_loop = builder.add_joint_fixed(parent=child_a, child=child_b)
    # Only the tree joints (j_root, j_a, j_b) go into the articulation;
    # j_loop is excluded so the articulation graph remains a tree.
    builder.add_articulation([j_root, j_a, j_b])
    model = builder.finalize()

    state_0, state_1 = model.state(), model.state()
    newton.eval_fk(model, state_0.joint_q, state_0.joint_qd, state_0)
    solver = newton.solvers.SolverSemiImplicit(model)
    control = model.control()
    for _ in range(int(round(seconds / dt))):
        solver.step(state_0, state_1, control, None, dt)
        state_0, state_1 = state_1, state_0
    q = state_0.body_q.numpy().astype(np.float64)
    return np.linalg.norm(q[child_a, :3] - q[child_b, :3]), q


def test_articulations_loop_closing_joint_acts_under_semi_implicit():
    """The loop-closure example: "Under SolverXPBD and SolverSemiImplicit, j_loop keeps its full joint
    behavior". The example's loop joint wants the two children's origins (2 m apart on their hinges)
    to coincide, so under penalty forces it pulls them together against the tree joints; without it
    they stay apart.

    Reference (newton 1.8, same code, 0.5 s at 1 ms): child distance REF_LOOP_D m with the loop joint,
    REF_LOOP_D_FREE m without."""
    d, q = _example_loop_closure()
    d_free, _ = _example_loop_closure(with_loop=False)
    assert np.all(np.isfinite(q))
    assert d == pytest.approx(REF_LOOP_D, abs=0.05)
    assert d_free == pytest.approx(REF_LOOP_D_FREE, abs=0.05)
    assert d < d_free - 0.1


def _example_four_bar(seconds=0.5, dt=2.0e-4):
    builder = newton.ModelBuilder()
    inertia = wp.mat33(0.02, 0.0, 0.0, 0.0, 0.02, 0.0, 0.0, 0.0, 0.02)
    half_inertia = wp.mat33(0.01, 0.0, 0.0, 0.0, 0.01, 0.0, 0.0, 0.0, 0.01)
    crank = builder.add_link(xform=wp.transform((0.0, 0.0, 0.5), wp.quat_identity()), mass=1.0, inertia=inertia)
    rocker = builder.add_link(xform=wp.transform((1.0, 0.0, 0.5), wp.quat_identity()), mass=1.0, inertia=inertia)
    # Split the coupler into a primary and a shadow at the same pose, each with
    # half of its mass and inertia. Collision shapes go on the primary only.
    coupler_pose = wp.transform((0.5, 0.0, 1.0), wp.quat_identity())
    coupler = builder.add_link(xform=coupler_pose, mass=0.5, inertia=half_inertia)
    coupler_shadow = builder.add_link(xform=coupler_pose, mass=0.5, inertia=half_inertia)

    def hinge(parent, child, parent_pos, child_pos):
        return builder.add_joint_revolute(
            parent=parent,
            child=child,
            axis=newton.Axis.Y,
            parent_xform=wp.transform(parent_pos, wp.quat_identity()),
            child_xform=wp.transform(child_pos, wp.quat_identity()),
        )

    j_a = hinge(-1, crank, (0.0, 0.0, 0.0), (0.0, 0.0, -0.5))
    j_b = hinge(crank, coupler, (0.0, 0.0, 0.5), (-0.5, 0.0, 0.0))
    j_d = hinge(-1, rocker, (1.0, 0.0, 0.0), (0.0, 0.0, -0.5))
    # The hinge that closes the loop is a tree joint into the shadow, so it keeps its coordinate.
    j_c = hinge(rocker, coupler_shadow, (0.0, 0.0, 0.5), (0.5, 0.0, 0.0))
    # Both branches of the loop belong to one articulation.
    builder.add_articulation([j_a, j_b, j_d, j_c])
    # The weld is the loop-closing joint: it holds the shadow on its primary.
    builder.add_joint_fixed(parent=coupler, child=coupler_shadow)
    model = builder.finalize()

    state_0, state_1 = model.state(), model.state()
    qd = state_0.body_qd.numpy()
    qd[crank] = (0.5, 0.0, 0.0, 0.0, 1.0, 0.0)  # kick the crank (1 rad/s about +y at its hinge)
    state_0.body_qd.assign(qd)
    solver = newton.solvers.SolverSemiImplicit(model)
    control = model.control()
    weld, crank_angle = [], []
    for _ in range(int(round(seconds / dt))):
        solver.step(state_0, state_1, control, None, dt)
        state_0, state_1 = state_1, state_0
        q = state_0.body_q.numpy().astype(np.float64)
        weld.append(np.linalg.norm(q[coupler, :3] - q[coupler_shadow, :3]))
        qc = q[crank, 3:]
        crank_angle.append(2.0 * math.atan2(qc[1], qc[3]))  # rotation about +y
    return np.asarray(weld), np.asarray(crank_angle), state_0


def test_articulations_four_bar_loop_holds_under_semi_implicit():
    """The link-break four-bar (Articulations, "Link-break loops"), consumed by SolverSemiImplicit as
    pairwise penalty joints (tree joints and the weld alike): the mechanism moves and the weld
    holds the shadow on its primary.

    Reference (newton 1.8, same code, crank kicked at 1 rad/s, 0.5 s at 0.2 ms; at 0.5 ms the
    reference's weld grows to 0.25 m in 1 s): max weld gap REF_FOURBAR_GAP m (the kick's transient),
    crank angle after 0.5 s REF_FOURBAR_CRANK rad."""
    weld, crank, state = _example_four_bar()
    assert np.all(np.isfinite(state.body_q.numpy()))
    assert weld.max() < 1.5 * REF_FOURBAR_GAP
    assert weld[-1] < 1e-4
    assert crank[-1] == pytest.approx(REF_FOURBAR_CRANK, abs=0.02)


def _example_passive_spring(seconds=1.0, dt=1.0e-4):
    builder = newton.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    body = builder.add_link()
    builder.add_shape_box(body, hx=0.05, hy=0.05, hz=0.05)
    builder.add_joint_revolute(
        parent=-1, child=body, stiffness=2.0, rest_q=0.25,
        target_q=0.0, target_qd=0.0,
    )  # fmt: skip
    model = builder.finalize()
    solver = newton.solvers.SolverSemiImplicit(model, angular_damping=0.0)
    s0, s1, control = model.state(), model.state(), model.control()
    axis = model.joint_axis.numpy()[0].astype(np.float64)
    qs, angles = [], []
    for _ in range(int(round(seconds / dt))):
        solver.step(s0, s1, control, None, dt)
        s0, s1 = s1, s0
        qs.append(float(s0.joint_q.numpy()[0]))
        rot = s0.body_q.numpy()[0, 3:].astype(np.float64)
        angles.append(2.0 * math.atan2(rot[:3] @ axis, rot[3]))  # rotation about the joint axis
    inertia = float(model.body_inertia.numpy()[0][0, 0])
    return np.asarray(angles), np.asarray(qs), inertia


def test_articulations_passive_revolute_spring():
    """The passive-spring example: "For each scalar coordinate, its generalized force is
    stiffness * (rest_q - q)"; "Featherstone, Steel, and SemiImplicit apply springs only to REVOLUTE,
    PRISMATIC, and D6 coordinates". From q = 0 the hinge oscillates about 0.25 rad between 0 and
    0.5 rad with the period 2 pi sqrt(I / k)."""
    dt = 1.0e-4
    qs, joint_q, inertia = _example_passive_spring(dt=dt)
    np.testing.assert_allclose(joint_q, qs, atol=1e-5)  # joint_q recovered from the body
    period = 2.0 * math.pi * math.sqrt(inertia / 2.0)
    assert qs.max() == pytest.approx(0.5, abs=0.01)
    assert qs.min() == pytest.approx(0.0, abs=0.01)
    assert 0.5 * (qs.max() + qs.min()) == pytest.approx(0.25, abs=0.01)
    # period from the upward crossings of the rest angle
    up = np.nonzero((qs[:-1] < 0.25) & (qs[1:] >= 0.25))[0]
    assert len(up) >= 2
    assert np.mean(np.diff(up)) * dt == pytest.approx(period, rel=0.02)


# ---------------------------------------------------------------------- reference figures
# newton 1.8 SolverSemiImplicit on the same code (black box, /tmp/nvenv), see the docstrings above.
REF_REV_WZ = 9.5140162  # [rad/s] body angular velocity after 1 s
REF_REV_Z = -1.914231  # [m] body z after 1 s (the 1000 kg cube sagging on the penalty hinge)
REF_MIMIC_Q = (0.3993962, -0.5483931)  # [rad] (q_r, q_f) after 1 s, default joint_mimic_ke/kd
REF_MIMIC_ERR = 0.0673  # [rad] largest |q_f - (0.25 - 2 q_r)|, default gains
REF_MIMIC_Q_STIFF = (0.4000145, -0.5500287)  # [rad] joint_mimic_ke=1000, joint_mimic_kd=3
REF_MIMIC_ERR_STIFF = 0.01193  # [rad]
REF_KIN_FIRST_MOVES = False
REF_KIN_CHILD_DZ = -0.0009836  # [m]
REF_SA_GAP = 0.02427  # [m]
REF_SA_ZMIN = 0.47578  # [m]
REF_SA_Z = 0.98681  # [m]
REF_LOOP_D = 0.66695  # [m]
REF_LOOP_D_FREE = 2.0  # [m]
REF_FOURBAR_GAP = 8.56e-4  # [m]
REF_FOURBAR_CRANK = 0.14279  # [rad]

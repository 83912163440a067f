"""SolverVBD particle half: particle-shape contacts (every shape type the pipeline handles for
particles) and friction."""

import math

import numpy as np
import pytest
import warp as wp

import armillary as newton

wp.config.quiet = True
R = 0.02


def _settle(b, steps=300, dt=1.0 / 600.0, gravity=None, mu=None):
    b.color()
    model = b.finalize(device="cpu")
    if gravity is not None:
        model.set_gravity(gravity)
    if mu is not None:
        model.shape_material_mu.fill_(mu)
    solver = newton.solvers.SolverVBD(model, iterations=10)
    pipe = newton.CollisionPipeline(model)
    s0, s1, c = model.state(), model.state(), model.control()
    for _ in range(steps):
        contacts = model.collide(s0, collision_pipeline=pipe)
        solver.step(s0, s1, c, contacts, dt)
        s0, s1 = s1, s0
    return model, s0


def _shape(b, kind):
    X = wp.transform((0.0, 0.0, 0.0), wp.quat_identity())
    if kind == "plane":
        b.add_ground_plane()
        return 0.0
    if kind == "box":
        b.add_shape_box(-1, xform=X, hx=0.2, hy=0.2, hz=0.1)
        return 0.1
    if kind == "sphere":
        b.add_shape_sphere(-1, xform=X, radius=0.1)
        return 0.1
    if kind == "capsule":
        b.add_shape_capsule(-1, xform=wp.transform((0.0, 0.0, 0.0), wp.quat_from_axis_angle(wp.vec3(1.0, 0.0, 0.0),
                            math.pi / 2)), radius=0.1, half_height=0.2)  # fmt: skip
        return 0.1
    if kind == "mesh":
        v = np.array([[-1, -1, 0], [1, -1, 0], [1, 1, 0], [-1, 1, 0]], dtype=np.float32)
        i = np.array([0, 1, 2, 0, 2, 3], dtype=np.int32)
        b.add_shape_mesh(-1, xform=X, mesh=newton.Mesh(v, i))
        return 0.0
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["plane", "box", "sphere", "capsule", "mesh"])
def test_particle_rests_on_shape(kind):
    b = newton.ModelBuilder()
    top = _shape(b, kind)
    b.add_particle((0.0, 0.0, top + 0.1), (0.0, 0.0, 0.0), 0.01, R)
    model, st = _settle(b)
    x = st.particle_q.numpy()[0]
    v = st.particle_qd.numpy()[0]
    assert abs(x[2] - (top + R)) < 0.2 * R, (kind, x)
    assert np.linalg.norm(v) < 0.02, (kind, v)


@pytest.mark.parametrize("deg, sticks", [(15.0, True), (40.0, False)])
def test_friction_on_tilted_plane(deg, sticks):
    """soft_contact_mu = shape mu = 0.5 (friction angle 26.6 deg): a particle sticks below it and slides above it."""
    b = newton.ModelBuilder()
    b.soft_contact_mu = 0.5
    b.add_ground_plane()
    b.add_particle((0.0, 0.0, R), (0.0, 0.0, 0.0), 0.01, R)
    th = math.radians(deg)
    model, st = _settle(b, steps=600, gravity=(9.81 * math.sin(th), 0.0, -9.81 * math.cos(th)), mu=0.5)
    x = st.particle_q.numpy()[0]
    v = st.particle_qd.numpy()[0]
    assert abs(x[2] - R) < 0.2 * R
    if sticks:
        assert abs(x[0]) < 0.01 and abs(v[0]) < 0.01, (x, v)
    else:
        expected = 9.81 * (math.sin(th) - 0.5 * math.cos(th))  # Coulomb sliding acceleration
        assert abs(v[0] - expected) < 0.1 * expected, (v, expected)


def test_moving_collider_carries_particle_by_friction():
    """A particle on a kinematic box moving sideways is dragged along by friction."""
    b = newton.ModelBuilder()
    body = b.add_body(xform=wp.transform((0.0, 0.0, 0.0), wp.quat_identity()))
    b.add_shape_box(body, hx=0.5, hy=0.5, hz=0.1)
    b.add_particle((0.0, 0.0, 0.1 + R), (0.0, 0.0, 0.0), 0.01, R)
    b.color()
    model = b.finalize(device="cpu")
    model.body_inv_mass.zero_()  # kinematic: the VBD rigid half is not exercised here
    model.body_inv_inertia.zero_()
    solver = newton.solvers.SolverVBD(model, iterations=10, integrate_with_external_rigid_solver=True)
    pipe = newton.CollisionPipeline(model)
    s0, s1, c = model.state(), model.state(), model.control()
    dt, speed = 1.0 / 600.0, 0.2
    for i in range(300):
        contacts = model.collide(s0, collision_pipeline=pipe)
        q = np.array([[speed * dt * (i + 1), 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]], dtype=np.float32)
        s1.body_q.assign(q)  # the external "rigid solver": a prescribed motion
        solver.step(s0, s1, c, contacts, dt)
        s0, s1 = s1, s0
    v = st_v = s0.particle_qd.numpy()[0]
    assert abs(st_v[0] - speed) < 0.05 * speed, v
    assert abs(s0.particle_q.numpy()[0, 2] - (0.1 + R)) < 0.2 * R

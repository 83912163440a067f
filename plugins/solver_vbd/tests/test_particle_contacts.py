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
    if kind == "cylinder":
        b.add_shape_cylinder(-1, xform=X, radius=0.2, half_height=0.1)
        return 0.1
    if kind == "cone":  # upside down: the flat base (radius 0.2) on top at z = 0.1
        b.add_shape_cone(-1, xform=wp.transform((0.0, 0.0, 0.0), wp.quat_from_axis_angle(wp.vec3(1.0, 0.0, 0.0),
                         math.pi)), radius=0.2, half_height=0.1)  # fmt: skip
        return 0.1
    if kind == "ellipsoid":
        b.add_shape_ellipsoid(-1, xform=X, rx=0.3, ry=0.2, rz=0.1)
        return 0.1
    if kind == "heightfield":  # a 5x5 grid over 1 m x 1 m: a plateau at 0.05 m, the rim at 0
        data = np.zeros((5, 5), dtype=np.float32)
        data[1:4, 1:4] = 0.05
        b.add_shape_heightfield(xform=X, heightfield=newton.Heightfield(data, 5, 5, hx=0.5, hy=0.5))
        return 0.05
    if kind == "convex_hull":  # the hull of a 0.4 x 0.4 x 0.2 box mesh
        b.add_shape_convex_hull(-1, xform=X, mesh=newton.Mesh.create_box(0.2, 0.2, 0.1))
        return 0.1
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["plane", "box", "sphere", "capsule", "mesh", "cylinder", "cone", "ellipsoid",
                                  "heightfield", "convex_hull"])  # fmt: skip
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


# --------------------------------------------------------------------------- particle-body attachments
def _sim(b, steps, dt, apply=None, collide=False):
    b.color()
    model = b.finalize(device="cpu")
    solver = newton.solvers.SolverVBD(model, iterations=10)
    s0, s1, ctrl = model.state(), model.state(), model.control()
    contacts = model.contacts() if collide else None
    for _ in range(steps):
        s0.clear_forces()
        if apply is not None:
            apply(s0)
        if collide:
            model.collide(s0, contacts)
        solver.step(s0, s1, ctrl, contacts, dt)
        s0, s1 = s1, s0
    return model, s0


def _chain(b, top, n=5, mp=0.02, dz=0.05, ke=1.0e3):
    """A hanging chain of ``n`` particles joined by springs (10x the softest attachment: with 1e4
    and a damped 100 N/m attachment the per-step Gauss-Seidel sweeps stall 12 % short of the
    equilibrium stretch at dt = 1/300, see the report); returns the first particle."""
    first = b.particle_count
    for i in range(n):
        b.add_particle(wp.vec3(top[0], top[1], top[2] - dz * i), wp.vec3(0.0), mp, 0.01)
    for i in range(n - 1):
        b.add_spring(first + i, first + i + 1, ke, 0.0, 0.0)
    return first


def _body(b, z=1.0, mass=1.0):
    return b.add_body(xform=wp.transform((0.0, 0.0, z), wp.quat_identity()), mass=mass,
                      inertia=wp.mat33(np.eye(3) * 1.0e-2))  # fmt: skip


@pytest.mark.parametrize("stiffness, damping", [(100.0, 5.0), (1000.0, 0.0), (math.inf, 0.0)])
def test_chain_attached_to_revolute_body(stiffness, damping):
    """A 5 x 20 g chain hangs from a 1 kg body on a revolute joint: the attachment stretches by
    m g / k (within 5 %) and by < 1e-4 m when the stiffness is infinite; the joint holds."""
    b = newton.ModelBuilder()
    body = _body(b)
    b.add_joint_revolute(-1, body, axis=(1.0, 0.0, 0.0), parent_xform=wp.transform((0.0, 0.0, 1.2), wp.quat_identity()),
                         child_xform=wp.transform((0.0, 0.0, 0.2), wp.quat_identity()))  # fmt: skip
    p0 = _chain(b, (0.0, 0.0, 0.9))
    b.add_attachment_particle_body(p0, body, body_point=(0.0, 0.0, -0.1), stiffness=stiffness, damping=damping)
    model, st = _sim(b, 300, 1.0 / 300.0)
    q = st.body_q.numpy()[0]
    anchor = np.array(wp.transform_point(wp.transform(q[:3], q[3:]), wp.vec3(0.0, 0.0, -0.1)))
    gap = np.linalg.norm(st.particle_q.numpy()[p0] - anchor)
    if math.isfinite(stiffness):
        expected = 5 * 0.02 * 9.81 / stiffness
        assert abs(gap - expected) < 0.05 * expected, (gap, expected)
    else:
        assert gap < 1.0e-4, gap
    assert np.linalg.norm(q[:3] - (0.0, 0.0, 1.0)) < 1.0e-3, q
    assert np.abs(st.particle_qd.numpy()).max() < 0.02


@pytest.mark.parametrize("with_chain", [False, True])
def test_body_on_prismatic_drive_carries_the_chain_weight(with_chain):
    """A 1 kg body on a vertical prismatic drive (ke 1000 N/m) sags by (1 kg + chain) g / ke: the
    attachment's reaction reaches the body."""
    b = newton.ModelBuilder()
    body = _body(b)
    b.add_joint_prismatic(-1, body, axis=(0.0, 0.0, 1.0),
                          parent_xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()), target_q=0.0,
                          target_ke=1000.0, target_kd=50.0)  # fmt: skip
    if with_chain:
        p0 = _chain(b, (0.0, 0.0, 0.9))
        b.add_attachment_particle_body(p0, body, body_point=(0.0, 0.0, -0.1), stiffness=math.inf)
    else:
        b.add_particle(wp.vec3(5.0, 0.0, 0.0), wp.vec3(0.0), 0.0, 0.01)  # keep the particle half in the step
    model, st = _sim(b, 300, 1.0 / 300.0)
    sag = 1.0 - st.body_q.numpy()[0, 2]
    expected = (1.0 + (0.1 if with_chain else 0.0)) * 9.81 / 1000.0
    assert abs(sag - expected) < 0.02 * expected, (sag, expected)


def test_free_body_with_attached_particle_falls_with_combined_mass():
    """A 1 kg free body pushed up by its own weight carries a 0.25 kg particle (infinite stiffness):
    the pair accelerates down at g * 0.25 / 1.25, not at 0 (body alone) or g (particle alone)."""
    b = newton.ModelBuilder()
    body = _body(b)
    b.add_particle(wp.vec3(0.0, 0.0, 0.9), wp.vec3(0.0), 0.25, 0.01)
    b.add_attachment_particle_body(0, body, body_point=(0.0, 0.0, -0.1), stiffness=math.inf)
    lift = wp.array([wp.spatial_vector(0.0, 0.0, 9.81, 0.0, 0.0, 0.0)], dtype=wp.spatial_vector, device="cpu")
    n, dt = 150, 1.0 / 300.0
    model, st = _sim(b, n, dt, apply=lambda s: wp.copy(s.body_f, lift))
    a = 9.81 * 0.25 / 1.25
    drop = 1.0 - st.body_q.numpy()[0, 2]
    expected = a * dt * dt * n * (n + 1) / 2  # implicit Euler
    assert abs(drop - expected) < 0.05 * expected, (drop, expected)
    assert abs(st.body_qd.numpy()[0, 2] + a * n * dt) < 0.05 * a * n * dt
    assert abs(st.particle_q.numpy()[0, 2] - (st.body_q.numpy()[0, 2] - 0.1)) < 1.0e-4


def test_cloth_rests_on_dynamic_box_on_ground():
    """Two-way body-particle contact: a cloth dropped on a dynamic box (3.6 kg) lying on the ground
    comes to rest on the box top; the box stays on the ground and is not pushed sideways."""
    b = newton.ModelBuilder()
    b.add_ground_plane()
    body = b.add_body(xform=wp.transform((0.0, 0.0, 0.05), wp.quat_identity()))
    b.add_shape_box(body, hx=0.3, hy=0.3, hz=0.05, cfg=newton.ModelBuilder.ShapeConfig(density=100.0))
    b.add_cloth_grid(pos=wp.vec3(-0.2, -0.2, 0.13), rot=wp.quat_identity(), vel=wp.vec3(0.0), dim_x=8, dim_y=8,
                     cell_x=0.05, cell_y=0.05, mass=0.01, tri_ke=1e4, tri_ka=1e4, edge_ke=1.0,
                     particle_radius=0.01)  # fmt: skip
    model, st = _sim(b, 300, 1.0 / 300.0, collide=True)
    q = st.body_q.numpy()[0]
    x = st.particle_q.numpy()
    # rigid contacts are compliant: 3.6 kg on the default shape stiffness sinks a few mm
    assert abs(q[2] - 0.05) < 5.0e-3 and np.linalg.norm(q[:2]) < 1.0e-3, q
    top = q[2] + 0.05
    assert np.all(np.abs(x[:, 2] - (top + 0.01)) < 3.0e-3), (x[:, 2].min(), x[:, 2].max(), top)
    assert np.all(np.abs(x[:, :2]) < 0.3)
    assert np.abs(st.particle_qd.numpy()).max() < 0.02 and np.abs(st.body_qd.numpy()).max() < 0.02

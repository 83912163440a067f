"""Collisions-page code blocks within this slice's scope, run with ``import armillary as newton``.

Blocks that step a solver (quick start, simulation loops, MuJoCo integration) need solver
plugins and are exercised up to the collision calls; hydroelastic, SDF, contact matching
and differentiable-contact blocks are outside this slice.
"""

from __future__ import annotations

import numpy as np
import warp as wp

import armillary as newton


def _sphere_on_ground():
    builder = newton.ModelBuilder()
    builder.add_ground_plane()
    body = builder.add_body(xform=wp.transform((0.0, 0.0, 2.0), wp.quat_identity()))
    builder.add_shape_sphere(body, radius=0.5)
    model = builder.finalize()
    return model, model.state()


def test_pipeline_basics():
    model, state = _sphere_on_ground()
    from armillary import CollisionPipeline

    pipeline = CollisionPipeline(
        model,
        broad_phase="sap",
    )
    contacts = pipeline.contacts()
    pipeline.collide(state, contacts)
    assert contacts.rigid_contact_count.numpy()[0] == 0  # sphere 1.5 m above the ground, gap 0.2


def test_broad_phase_modes():
    model, state = _sphere_on_ground()
    from armillary import CollisionPipeline

    # Default: EXPLICIT (precomputed pairs)
    pipeline = CollisionPipeline(model)
    # NxN for small scenes
    pipeline = CollisionPipeline(model, broad_phase="nxn")
    # SAP for larger scenes
    pipeline = CollisionPipeline(model, broad_phase="sap")
    contacts = pipeline.contacts()
    pipeline.collide(state, contacts)


def test_world_indices():
    builder = newton.ModelBuilder()
    builder.add_ground_plane()
    robot_builder = newton.ModelBuilder()
    body = robot_builder.add_link()
    robot_builder.add_shape_sphere(body, radius=0.5)
    joint = robot_builder.add_joint_free(body)
    robot_builder.add_articulation([joint])
    builder.add_world(robot_builder)  # World 0
    builder.add_world(robot_builder)  # World 1
    model = builder.finalize()
    # the two robots overlap in space but live in different worlds; both touch the global ground
    state = model.state()
    state.body_q.assign(np.array([[0, 0, 0.45, 0, 0, 0, 1], [0.2, 0, 0.45, 0, 0, 0, 1]], dtype=np.float32))
    pipeline = newton.CollisionPipeline(model, broad_phase="nxn")
    contacts = pipeline.contacts()
    pipeline.collide(state, contacts)
    n = contacts.rigid_contact_count.numpy()[0]
    assert sorted(zip(contacts.rigid_contact_shape0.numpy()[:n], contacts.rigid_contact_shape1.numpy()[:n])) == [
        (0, 1), (0, 2)]  # fmt: skip


def test_replicate():
    env_builder = newton.ModelBuilder()
    body = env_builder.add_body()
    env_builder.add_shape_sphere(body, radius=0.5)
    main = newton.ModelBuilder()
    main.add_ground_plane()
    main.replicate(env_builder, world_count=1024)
    model = main.finalize()
    pipeline = newton.CollisionPipeline(model, broad_phase="sap")
    contacts = pipeline.contacts()
    pipeline.collide(model.state(), contacts)
    n = contacts.rigid_contact_count.numpy()[0]
    assert n == 1024  # every sphere (at the origin, radius 0.5) touches the global ground, none another
    assert set(contacts.rigid_contact_shape0.numpy()[:n]) == {0}


def test_collision_groups():
    builder = newton.ModelBuilder()
    body1 = builder.add_body()
    builder.add_shape_sphere(body1, radius=0.5, cfg=builder.ShapeConfig(collision_group=1))
    body2 = builder.add_body()
    builder.add_shape_sphere(body2, radius=0.5, cfg=builder.ShapeConfig(collision_group=-1))
    model = builder.finalize()
    contacts = newton.CollisionPipeline(model).contacts()
    newton.CollisionPipeline(model).collide(model.state(), contacts)
    assert contacts.rigid_contact_count.numpy()[0] == 1


def test_particle_collision_flags():
    builder = newton.ModelBuilder()
    cfg = builder.ShapeConfig(has_shape_collision=False, has_particle_collision=True)
    cfg = builder.ShapeConfig(has_shape_collision=True, has_particle_collision=False)
    assert cfg.has_shape_collision and not cfg.has_particle_collision


def test_filter_pairs():
    builder = newton.ModelBuilder()
    body = builder.add_body()
    shape_a = builder.add_shape_sphere(body, radius=0.5)
    shape_b = builder.add_shape_box(body, hx=0.5, hy=0.5, hz=0.5)
    builder.add_shape_collision_filter_pair(shape_a, shape_b)
    model = builder.finalize()
    assert (shape_a, shape_b) in model.shape_collision_filter_pairs


def test_static_geometry():
    builder = newton.ModelBuilder()
    builder.add_ground_plane()
    builder.add_shape_plane(body=-1, xform=wp.transform_identity())
    builder.add_shape_box(body=-1, hx=5.0, hy=5.0, hz=0.1)
    model = builder.finalize()
    pipeline = newton.CollisionPipeline(model, broad_phase="nxn")
    contacts = pipeline.contacts()
    pipeline.collide(model.state(), contacts)
    assert contacts.rigid_contact_count.numpy()[0] == 0  # static-static pairs are skipped


def test_soft_contacts():
    builder = newton.ModelBuilder()
    builder.add_ground_plane()
    builder.add_particle(pos=wp.vec3(0, 0, 1), vel=wp.vec3(0, 0, 0), mass=1.0)
    model = builder.finalize()
    state = model.state()
    from armillary import CollisionPipeline

    pipeline = CollisionPipeline(model, soft_contact_margin=0.01)
    contacts = pipeline.contacts()
    pipeline.collide(state, contacts)
    n_soft = contacts.soft_contact_count.numpy()[0]
    particles = contacts.soft_contact_particle.numpy()[:n_soft]
    shapes = contacts.soft_contact_shape.numpy()[:n_soft]
    assert n_soft == 0 and len(particles) == len(shapes) == 0
    state.particle_q.assign(np.array([[0.3, 0.2, 0.005]], dtype=np.float32))
    pipeline.collide(state, contacts)
    n_soft = contacts.soft_contact_count.numpy()[0]
    assert n_soft == 1
    assert contacts.soft_contact_particle.numpy()[0] == 0 and contacts.soft_contact_shape.numpy()[0] == 0
    assert np.allclose(contacts.soft_contact_body_pos.numpy()[0], [0.3, 0.2, 0.0], atol=1e-6)
    assert np.allclose(contacts.soft_contact_normal.numpy()[0], [0.0, 0.0, 1.0])


def test_contact_data():
    model, state = _sphere_on_ground()
    state.body_q.assign(np.array([[0.0, 0.0, 0.45, 0, 0, 0, 1]], dtype=np.float32))
    pipeline = newton.CollisionPipeline(model)
    contacts = pipeline.contacts()
    pipeline.collide(state, contacts)
    n = contacts.rigid_contact_count.numpy()[0]
    points0 = contacts.rigid_contact_point0.numpy()[:n]
    points1 = contacts.rigid_contact_point1.numpy()[:n]
    normals = contacts.rigid_contact_normal.numpy()[:n]
    shape0 = contacts.rigid_contact_shape0.numpy()[:n]
    shape1 = contacts.rigid_contact_shape1.numpy()[:n]
    assert n == 1 and shape0[0] == 0 and shape1[0] == 1
    assert np.allclose(points0[0], [0.0, 0.0, 0.0]) and np.allclose(points1[0], [0.0, 0.0, 0.0])
    assert np.allclose(normals[0], [0.0, 0.0, 1.0])
    assert np.isclose(contacts.rigid_contact_margin1.numpy()[0], 0.5)
    assert np.allclose(contacts.rigid_contact_offset1.numpy()[0], [0.0, 0.0, -0.5])


def test_creating_contacts():
    model, state = _sphere_on_ground()
    pipeline = newton.CollisionPipeline(model)
    contacts = pipeline.contacts()
    pipeline.collide(state, contacts)
    from armillary import CollisionPipeline

    pipeline = CollisionPipeline(
        model,
        broad_phase="sap",
        rigid_contact_max=50000,
    )
    contacts = pipeline.contacts()
    pipeline.collide(state, contacts)
    assert contacts.rigid_contact_max == 50000


def test_see_also_imports():
    from armillary import CollisionPipeline, Contacts, GeoType  # noqa: F401
    from armillary.geometry import BroadPhaseAllPairs, BroadPhaseExplicit, BroadPhaseSAP  # noqa: F401


def test_speculative_config_example():
    model, state = _sphere_on_ground()
    pipeline = newton.CollisionPipeline(
        model,
        speculative_config=newton.CollisionPipeline.SpeculativeContactConfig(
            max_speculative_extension=0.1,
        ),
    )
    contacts = pipeline.contacts()
    pipeline.collide(state, contacts, dt=1.0 / 60.0)

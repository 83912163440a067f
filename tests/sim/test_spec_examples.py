"""Code blocks of the specification pages (articulations.txt, concepts.txt) that need only the core."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import armillary as newton


def test_revolute_joint_q_initialization():
    builder = newton.ModelBuilder()
    body = builder.add_link()
    builder.add_shape_box(body)
    joint = builder.add_joint_revolute(parent=-1, child=body, axis=wp.vec3(0.0, 0.0, 1.0))
    builder.add_articulation([joint])
    builder.joint_q[-1] = 0.5
    builder.joint_qd[-1] = 10.0
    model = builder.finalize(device="cpu")
    state = model.state()
    assert all(state.joint_q.numpy() == [0.5])
    assert all(state.joint_qd.numpy() == [10.0])


def test_mimic_joint_metadata():
    builder = newton.ModelBuilder()
    link_0 = builder.add_link()
    link_1 = builder.add_link()
    reference = builder.add_joint_revolute(parent=-1, child=link_0, axis=wp.vec3(0.0, 0.0, 1.0))
    follower = builder.add_joint_revolute(parent=link_0, child=link_1, axis=wp.vec3(0.0, 0.0, 1.0))
    builder.add_articulation([reference, follower])
    builder.set_joint_mimic(follower, reference, coeffs=(0.25, -2.0))
    model = builder.finalize(device="cpu")
    assert model.joint_mimic_joint.numpy().tolist() == [-1, 0]
    assert np.allclose(model.joint_mimic_coeffs.numpy(), [[0.0, 1.0], [0.25, -2.0]])
    state = model.state()
    state.joint_q.assign([0.5, 0.0])
    state.joint_qd.assign([1.0, 0.0])
    if hasattr(newton, "eval_mimic"):
        newton.eval_mimic(model, state)
        assert np.allclose(state.joint_q.numpy(), [0.5, -0.75])
        assert np.allclose(state.joint_qd.numpy(), [1.0, -2.0])


def test_add_body_initializes_body_q_and_free_joint():
    builder = newton.ModelBuilder()
    tf = wp.transform(wp.vec3(1.0, 2.0, 3.0), wp.quat_from_axis_angle(wp.vec3(0.0, 0.0, 1.0), 0.5 * wp.pi))
    body = builder.add_body(xform=tf)
    builder.add_shape_box(body)
    model = builder.finalize(device="cpu")
    state = model.state()
    assert all(state.body_q.numpy()[0] == [*tf])
    assert len(state.joint_q) == 7


def test_add_link_free_joint_initialized_from_pose():
    builder = newton.ModelBuilder()
    tf = wp.transform(wp.vec3(1.0, 2.0, 3.0), wp.quat_from_axis_angle(wp.vec3(0.0, 0.0, 1.0), 0.5 * wp.pi))
    body = builder.add_link(xform=tf)
    builder.add_shape_box(body)
    joint = builder.add_joint_free(body)
    builder.add_articulation([joint])
    model = builder.finalize(device="cpu")
    state = model.state()
    assert all(state.body_q.numpy()[0] == [*tf])
    assert len(state.joint_q) == 7
    assert all(state.joint_q.numpy() == [*tf])


def test_kinematic_combinations():
    builder = newton.ModelBuilder()
    builder.add_body(is_kinematic=True, mass=1.0)
    root = builder.add_link(is_kinematic=True, mass=1.0)
    child = builder.add_link(mass=1.0)
    j_root = builder.add_joint_revolute(parent=-1, child=root, axis=newton.Axis.Z)
    j_child = builder.add_joint_revolute(parent=root, child=child, axis=newton.Axis.Z)
    builder.add_articulation([j_root, j_child])
    static_root = builder.add_link(is_kinematic=True, mass=1.0)
    j_static = builder.add_joint_fixed(parent=-1, child=static_root)
    builder.add_articulation([j_static])
    model = builder.finalize(device="cpu")
    flags = model.body_flags.numpy()
    assert flags.tolist() == [int(newton.BodyFlags.KINEMATIC), int(newton.BodyFlags.KINEMATIC),
                              int(newton.BodyFlags.DYNAMIC), int(newton.BodyFlags.KINEMATIC)]  # fmt: skip
    assert model.joint_dof_count == 6 + 1 + 1 + 0


def test_kinematic_non_root_rejected():
    builder = newton.ModelBuilder()
    a = builder.add_link()
    b = builder.add_link(is_kinematic=True, label="kin")
    j0 = builder.add_joint_revolute(-1, a)
    j1 = builder.add_joint_revolute(a, b)
    n_art = builder.articulation_count
    with pytest.raises(ValueError, match="kin.*kinematic"):
        builder.add_articulation([j0, j1])
    assert builder.articulation_count == n_art
    assert builder.joint_articulation == [-1, -1]


def test_dof_layout_example():
    builder = newton.ModelBuilder()
    body = builder.add_link()
    cfg = newton.ModelBuilder.JointDofConfig
    joint_id = builder.add_joint_d6(
        -1,
        body,
        linear_axes=[cfg(axis=newton.Axis.X, limit_lower=-0.5, limit_upper=0.5)],
        angular_axes=[cfg(axis=newton.Axis.Z, limit_lower=-1.0, limit_upper=1.0)],
    )
    builder.add_articulation([joint_id])
    model = builder.finalize(device="cpu")
    control = model.control()
    joint_dof_dim = model.joint_dof_dim.numpy()
    joint_qd_start = model.joint_qd_start.numpy()
    joint_target_q_start = model.joint_target_q_start.numpy()
    joint_axis = model.joint_axis.numpy()
    joint_limit_lower = model.joint_limit_lower.numpy()
    joint_target_q = control.joint_target_q.numpy()
    num_linear_dofs = joint_dof_dim[joint_id, 0]
    num_angular_dofs = joint_dof_dim[joint_id, 1]
    dof_start = joint_qd_start[joint_id]
    target_q_start = joint_target_q_start[joint_id]
    first_lin_axis = joint_axis[dof_start]
    _ = joint_target_q[target_q_start]
    first_lin_limit = joint_limit_lower[dof_start]
    first_ang_axis = joint_axis[dof_start + num_linear_dofs]
    _ = joint_target_q[target_q_start + num_linear_dofs]
    first_ang_limit = joint_limit_lower[dof_start + num_linear_dofs]
    assert (num_linear_dofs, num_angular_dofs) == (1, 1)
    assert np.allclose(first_lin_axis, [1.0, 0.0, 0.0])
    assert np.allclose(first_ang_axis, [0.0, 0.0, 1.0])
    assert np.allclose([first_lin_limit, first_ang_limit], [-0.5, -1.0])


def test_center_joint_q_kernel_example():
    builder = newton.ModelBuilder()
    a = builder.add_link()
    b = builder.add_link()
    j0 = builder.add_joint_revolute(-1, a, limit_lower=0.2, limit_upper=1.0)
    j1 = builder.add_joint_ball(a, b)
    builder.add_articulation([j0, j1])
    model = builder.finalize(device="cpu")
    state = model.state()

    @wp.kernel
    def center_joint_q_from_limits(
        joint_q_start: wp.array(dtype=wp.int32),
        joint_qd_start: wp.array(dtype=wp.int32),
        joint_dof_dim: wp.array2d(dtype=wp.int32),
        joint_type: wp.array(dtype=wp.int32),
        joint_limit_lower: wp.array(dtype=float),
        joint_limit_upper: wp.array(dtype=float),
        joint_q: wp.array(dtype=float),
    ):
        joint_id = wp.tid()
        qd_begin = joint_qd_start[joint_id]
        dof_count = joint_dof_dim[joint_id, 0] + joint_dof_dim[joint_id, 1]
        q_begin = joint_q_start[joint_id]
        jt = joint_type[joint_id]
        if jt == 4 or jt == 2 or jt == 5 or jt == 7:
            return
        for local_dof in range(dof_count):
            lower = joint_limit_lower[qd_begin + local_dof]
            upper = joint_limit_upper[qd_begin + local_dof]
            if wp.isfinite(lower) and wp.isfinite(upper):
                joint_q[q_begin + local_dof] = 0.5 * (lower + upper)

    wp.launch(
        center_joint_q_from_limits,
        dim=model.joint_count,
        inputs=[model.joint_q_start, model.joint_qd_start, model.joint_dof_dim, model.joint_type,
                model.joint_limit_lower, model.joint_limit_upper, state.joint_q],  # fmt: skip
        device="cpu",
    )
    assert np.allclose(state.joint_q.numpy(), [0.6, 0.0, 0.0, 0.0, 1.0])


def test_loop_closure_example():
    builder = newton.ModelBuilder()
    root = builder.add_link()
    builder.add_shape_box(root, hx=0.1, hy=0.1, hz=0.1)
    j_root = builder.add_joint_fixed(parent=-1, child=root)
    child_a = builder.add_link()
    builder.add_shape_box(child_a, hx=0.5, hy=0.05, hz=0.05)
    j_a = builder.add_joint_revolute(parent=root, child=child_a, axis=newton.Axis.Z,
                                     parent_xform=wp.transform(wp.vec3(1.0, 0.0, 0.0), wp.quat_identity()))  # fmt: skip
    child_b = builder.add_link()
    builder.add_shape_box(child_b, hx=0.5, hy=0.05, hz=0.05)
    j_b = builder.add_joint_revolute(parent=root, child=child_b, axis=newton.Axis.Z,
                                     parent_xform=wp.transform(wp.vec3(-1.0, 0.0, 0.0), wp.quat_identity()))  # fmt: skip
    j_loop = builder.add_joint_fixed(parent=child_a, child=child_b)
    builder.add_articulation([j_root, j_a, j_b])
    model = builder.finalize(device="cpu")
    assert model.joint_articulation.numpy().tolist() == [0, 0, 0, -1]
    assert model.joint_count == 4 and j_loop == 3


def test_link_break_loop_example():
    builder = newton.ModelBuilder()
    inertia = wp.mat33(0.02, 0.0, 0.0, 0.0, 0.02, 0.0, 0.0, 0.0, 0.02)
    half_inertia = wp.mat33(0.01, 0.0, 0.0, 0.0, 0.01, 0.0, 0.0, 0.0, 0.01)
    crank = builder.add_link(xform=wp.transform((0.0, 0.0, 0.5), wp.quat_identity()), mass=1.0, inertia=inertia)
    rocker = builder.add_link(xform=wp.transform((1.0, 0.0, 0.5), wp.quat_identity()), mass=1.0, inertia=inertia)
    coupler_pose = wp.transform((0.5, 0.0, 1.0), wp.quat_identity())
    coupler = builder.add_link(xform=coupler_pose, mass=0.5, inertia=half_inertia)
    coupler_shadow = builder.add_link(xform=coupler_pose, mass=0.5, inertia=half_inertia)

    def hinge(parent, child, parent_pos, child_pos):
        return builder.add_joint_revolute(
            parent=parent, child=child, axis=newton.Axis.Y,
            parent_xform=wp.transform(parent_pos, wp.quat_identity()),
            child_xform=wp.transform(child_pos, wp.quat_identity()),
        )  # fmt: skip

    j_a = hinge(-1, crank, (0.0, 0.0, 0.0), (0.0, 0.0, -0.5))
    j_b = hinge(crank, coupler, (0.0, 0.0, 0.5), (-0.5, 0.0, 0.0))
    j_d = hinge(-1, rocker, (1.0, 0.0, 0.0), (0.0, 0.0, -0.5))
    j_c = hinge(rocker, coupler_shadow, (0.0, 0.0, 0.5), (0.5, 0.0, 0.0))
    builder.add_articulation([j_a, j_b, j_d, j_c])
    builder.add_joint_fixed(parent=coupler, child=coupler_shadow)
    model = builder.finalize(device="cpu")
    assert model.articulation_count == 1
    assert np.allclose(model.body_mass.numpy(), [1.0, 1.0, 0.5, 0.5])


def test_passive_spring_authoring():
    builder = newton.ModelBuilder()
    body = builder.add_link()
    j = builder.add_joint_revolute(parent=-1, child=body, stiffness=2.0, rest_q=0.25, target_q=0.0, target_qd=0.0)
    b2 = builder.add_link()
    j2 = builder.add_joint_ball(body, b2)
    builder.add_articulation([j, j2])
    model = builder.finalize(device="cpu")
    assert np.allclose(model.joint_stiffness.numpy(), [2.0, 0.0, 0.0, 0.0])
    # rest coordinates follow the joint_q layout, identity quaternion for the ball joint
    assert np.allclose(model.joint_rest_q.numpy(), [0.25, 0.0, 0.0, 0.0, 1.0])


def test_orphan_joint_skip_validation():
    builder = newton.ModelBuilder()
    a = builder.add_link()
    j0 = builder.add_joint_revolute(-1, a)
    builder.add_articulation([j0])
    c = builder.add_link()
    d = builder.add_link()
    builder.add_joint_revolute(c, d, label="orph")
    with pytest.raises(ValueError, match=r"orph"):
        builder.finalize(device="cpu")
    model = builder.finalize(device="cpu", skip_validation_joints=True)
    assert model.joint_count == 2


def test_world_indices_example():
    builder = newton.ModelBuilder()
    builder.add_ground_plane()
    robot_builder = newton.ModelBuilder()
    body = robot_builder.add_link()
    robot_builder.add_shape_sphere(body, radius=0.5)
    joint = robot_builder.add_joint_free(body)
    robot_builder.add_articulation([joint])
    builder.add_world(robot_builder)
    builder.add_world(robot_builder)
    model = builder.finalize(device="cpu")
    assert model.world_count == 2
    assert model.shape_world.numpy().tolist() == [-1, 0, 1]
    assert model.body_world.numpy().tolist() == [0, 1]


def test_replicate_example():
    env_builder = newton.ModelBuilder()
    body = env_builder.add_body()
    env_builder.add_shape_sphere(body, radius=0.5)
    main = newton.ModelBuilder()
    main.add_ground_plane()
    main.replicate(env_builder, world_count=1024)
    model = main.finalize(device="cpu")
    assert model.world_count == 1024
    assert model.body_count == 1024
    assert model.shape_world.numpy()[0] == -1
    assert np.array_equal(model.body_world.numpy(), np.arange(1024))


def test_collision_groups_example():
    builder = newton.ModelBuilder()
    body1 = builder.add_body()
    builder.add_shape_sphere(body1, radius=0.5, cfg=builder.ShapeConfig(collision_group=1))
    body2 = builder.add_body()
    builder.add_shape_sphere(body2, radius=0.5, cfg=builder.ShapeConfig(collision_group=-1))
    model = builder.finalize(device="cpu")
    assert model.shape_collision_group.numpy().tolist() == [1, -1]
    assert model.shape_contact_pairs.tolist() == [[0, 1]]


def test_particle_collision_flags_example():
    builder = newton.ModelBuilder()
    cfg = builder.ShapeConfig(has_shape_collision=False, has_particle_collision=True)
    assert cfg.flags & newton.ShapeFlags.COLLIDE_PARTICLES and not cfg.flags & newton.ShapeFlags.COLLIDE_SHAPES
    cfg = builder.ShapeConfig(has_shape_collision=True, has_particle_collision=False)
    assert cfg.flags & newton.ShapeFlags.COLLIDE_SHAPES and not cfg.flags & newton.ShapeFlags.COLLIDE_PARTICLES


def test_filter_pairs_example():
    builder = newton.ModelBuilder()
    body = builder.add_body()
    shape_a = builder.add_shape_sphere(body, radius=0.5)
    shape_b = builder.add_shape_box(body, hx=0.5, hy=0.5, hz=0.5)
    builder.add_shape_collision_filter_pair(shape_a, shape_b)
    model = builder.finalize(device="cpu")
    assert (shape_a, shape_b) in model.shape_collision_filter_pairs


def test_configure_sdf_and_material_examples():
    builder = newton.ModelBuilder()
    cfg = builder.ShapeConfig()
    cfg.configure_sdf(max_resolution=64, is_hydroelastic=True, kh=1.0e11)
    assert cfg.sdf_max_resolution == 64 and cfg.is_hydroelastic and cfg.kh == 1.0e11
    cfg = builder.ShapeConfig(collision_group=-1, margin=0.001, gap=0.01)
    body = builder.add_body()
    s = builder.add_shape_box(body, hx=0.5, hy=0.5, hz=0.5, cfg=cfg)
    cfg = builder.ShapeConfig(is_hydroelastic=True, sdf_max_resolution=64, kh=1.0e11)
    builder.add_shape_box(body, hx=0.5, hy=0.5, hz=0.5, cfg=cfg)
    cfg = builder.ShapeConfig(mu=0.8, ke=1.0e6, kd=1000.0, restitution=0.5)
    s3 = builder.add_shape_sphere(body, radius=0.1, cfg=cfg)
    model = builder.finalize(device="cpu")
    assert model.shape_margin.numpy()[s] == pytest.approx(0.001)
    assert model.shape_gap.numpy()[s] == pytest.approx(0.01)
    assert model.shape_material_mu.numpy()[s3] == pytest.approx(0.8)
    assert model.shape_material_restitution.numpy()[s3] == pytest.approx(0.5)
    assert model.shape_flags.numpy()[1] & newton.ShapeFlags.HYDROELASTIC


def test_static_geometry_and_default_cfg_examples():
    builder = newton.ModelBuilder()
    builder.add_ground_plane()
    builder.add_shape_plane(body=-1, xform=wp.transform_identity())
    builder.add_shape_box(body=-1, hx=5.0, hy=5.0, hz=0.1)
    builder.default_shape_cfg.ke = 1.0e6
    builder.default_shape_cfg.kd = 1000.0
    builder.default_shape_cfg.mu = 0.5
    builder.default_shape_cfg.sdf_max_resolution = 64
    s = builder.add_shape_sphere(-1, radius=1.0)
    model = builder.finalize(device="cpu")
    assert model.shape_body.numpy().tolist() == [-1, -1, -1, -1]
    assert model.shape_material_ke.numpy()[s] == pytest.approx(1.0e6)
    assert model.shape_gap.numpy()[0] == pytest.approx(0.1)  # builder.rigid_gap default


def test_up_axis_configuration_example():
    b = newton.ModelBuilder(up_axis=newton.Axis.Z, gravity=(0.0, 0.0, -9.81))
    assert np.allclose(b.gravity, (0.0, 0.0, -9.81))
    b = newton.ModelBuilder(up_axis=newton.Axis.Y, gravity=(0.0, -9.81, 0.0))
    m = b.finalize(device="cpu")
    assert m.up_axis == newton.Axis.Y
    assert np.allclose(m.gravity.numpy(), [[0.0, -9.81, 0.0]])
    b = newton.ModelBuilder(up_axis="y")
    assert np.allclose(b.gravity, (0.0, -9.81, 0.0))
    with pytest.warns(DeprecationWarning):
        b = newton.ModelBuilder(gravity=-5.0)
    assert np.allclose(b.gravity, (0.0, 0.0, -5.0))


def test_cone_com_convention():
    b = newton.ModelBuilder()
    body = b.add_body()
    b.add_shape_cone(body, radius=0.5, half_height=1.0)
    m = b.finalize(device="cpu")
    assert np.allclose(m.body_com.numpy()[0], [0.0, 0.0, -0.5])


def test_twist_convention_kernel_runs():
    b = newton.ModelBuilder()
    b.add_body(mass=1.0)
    model = b.finalize(device="cpu")
    state = model.state()
    state.body_qd.assign(np.array([[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]], dtype=np.float32))

    @wp.kernel
    def get_body_twist(body_qd: wp.array(dtype=wp.spatial_vector), lin: wp.array(dtype=wp.vec3), ang: wp.array(dtype=wp.vec3)):
        body_id = wp.tid()
        twist = body_qd[body_id]
        lin[body_id] = wp.vec3(twist[0], twist[1], twist[2])
        ang[body_id] = wp.vec3(twist[3], twist[4], twist[5])

    lin = wp.zeros(1, dtype=wp.vec3, device="cpu")
    ang = wp.zeros(1, dtype=wp.vec3, device="cpu")
    wp.launch(get_body_twist, dim=model.body_count, inputs=[state.body_qd, lin, ang], device="cpu")
    assert np.allclose(lin.numpy(), [[1, 2, 3]]) and np.allclose(ang.numpy(), [[4, 5, 6]])

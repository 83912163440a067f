"""Code blocks of the Articulations page (FK / IK, mimic joints, inverse dynamics), run with
``import armillary as newton``, asserting what the page asserts."""

from __future__ import annotations

import numpy as np
import warp as wp

import armillary as newton


def test_revolute_initialization_then_eval_fk():
    builder = newton.ModelBuilder()
    body = builder.add_link()
    builder.add_shape_box(body)  # add a shape to the body to add some inertia
    joint = builder.add_joint_revolute(parent=-1, child=body, axis=wp.vec3(0.0, 0.0, 1.0))
    builder.add_articulation([joint])
    builder.joint_q[-1] = 0.5
    builder.joint_qd[-1] = 10.0
    model = builder.finalize()
    state = model.state()
    assert all(state.joint_q.numpy() == [0.5])
    assert all(state.joint_qd.numpy() == [10.0])
    # body poses are still the identity until FK runs
    assert np.allclose(state.body_q.numpy()[0], [0, 0, 0, 0, 0, 0, 1])
    newton.eval_fk(model, state.joint_q, state.joint_qd, state)
    expected = wp.quat_from_axis_angle(wp.vec3(0.0, 0.0, 1.0), 0.5)
    assert np.allclose(state.body_q.numpy()[0, 3:], [*expected], atol=1e-6)
    assert np.allclose(state.body_qd.numpy()[0], [0, 0, 0, 0, 0, 10.0])


def _mimic_model():
    builder = newton.ModelBuilder()
    link_0 = builder.add_link()
    link_1 = builder.add_link()
    reference = builder.add_joint_revolute(parent=-1, child=link_0, axis=wp.vec3(0.0, 0.0, 1.0))
    follower = builder.add_joint_revolute(parent=link_0, child=link_1, axis=wp.vec3(0.0, 0.0, 1.0))
    builder.add_articulation([reference, follower])
    builder.set_joint_mimic(follower, reference, coeffs=(0.25, -2.0))
    return builder


def test_mimic_example():
    model = _mimic_model().finalize()
    state = model.state()
    state.joint_q.assign([0.5, 0.0])
    state.joint_qd.assign([1.0, 0.0])
    newton.eval_mimic(model, state)
    assert np.allclose(state.joint_q.numpy(), [0.5, -0.75])
    assert np.allclose(state.joint_qd.numpy(), [1.0, -2.0])


def test_mimic_partial_reset_example():
    scene = newton.ModelBuilder()
    scene.replicate(_mimic_model(), 3)
    model = scene.finalize()
    state = model.state()
    state.joint_q.assign([0.5, 0.0] * 3)
    articulation_indices = wp.array([0, 2], dtype=wp.int32, device=model.device)
    newton.eval_mimic(model, state, indices=articulation_indices)
    newton.eval_fk(model, state.joint_q, state.joint_qd, state, indices=articulation_indices)
    assert np.allclose(state.joint_q.numpy(), [0.5, -0.75, 0.5, 0.0, 0.5, -0.75])


def test_eval_ik_reads_solved_body_state():
    model = _mimic_model().finalize()
    state_out = model.state()
    state_out.joint_q.assign([0.3, -0.2])
    state_out.joint_qd.assign([0.1, 0.7])
    newton.eval_fk(model, state_out.joint_q, state_out.joint_qd, state_out)
    state_out.joint_q.zero_()
    state_out.joint_qd.zero_()
    newton.eval_ik(model, state_out, state_out.joint_q, state_out.joint_qd)
    assert np.allclose(state_out.joint_q.numpy(), [0.3, -0.2], atol=1e-6)
    assert np.allclose(state_out.joint_qd.numpy(), [0.1, 0.7], atol=1e-6)


def test_center_joint_q_from_limits_then_eval_fk():
    builder = newton.ModelBuilder()
    a = builder.add_link()
    b = builder.add_link()
    j0 = builder.add_joint_revolute(-1, a, limit_lower=0.2, limit_upper=1.0)
    j1 = builder.add_joint_ball(a, b)
    builder.add_articulation([j0, j1])
    model = builder.finalize()
    state = model.state()

    @wp.kernel
    def center_joint_q_from_limits(
        joint_q_start: wp.array[wp.int32],
        joint_qd_start: wp.array[wp.int32],
        joint_dof_dim: wp.array2d[wp.int32],
        joint_type: wp.array[wp.int32],
        joint_limit_lower: wp.array[float],
        joint_limit_upper: wp.array[float],
        joint_q: wp.array[float],
    ):
        joint_id = wp.tid()
        # First DOF index for this joint in qd-order arrays (limits/axes/forces)
        qd_begin = joint_qd_start[joint_id]
        dof_count = joint_dof_dim[joint_id, 0] + joint_dof_dim[joint_id, 1]
        # Start index for this joint in generalized coordinates q
        q_begin = joint_q_start[joint_id]
        # Skip joints whose q entries include quaternion coordinates.
        jt = joint_type[joint_id]
        if (
            jt == newton.JointType.FREE
            or jt == newton.JointType.BALL
            or jt == newton.JointType.DISTANCE
            or jt == newton.JointType.ROD
        ):
            return
        # For scalar joints, q coordinates align with this joint's total DOF count.
        for local_dof in range(dof_count):
            qd_idx = qd_begin + local_dof
            q_idx = q_begin + local_dof
            lower = joint_limit_lower[qd_idx]
            upper = joint_limit_upper[qd_idx]
            if wp.isfinite(lower) and wp.isfinite(upper):
                joint_q[q_idx] = 0.5 * (lower + upper)

    # Launch over all joints in the model
    wp.launch(
        kernel=center_joint_q_from_limits,
        dim=model.joint_count,
        inputs=[
            model.joint_q_start,
            model.joint_qd_start,
            model.joint_dof_dim,
            model.joint_type,
            model.joint_limit_lower,
            model.joint_limit_upper,
            state.joint_q,
        ],
    )
    # Recompute transforms after editing generalized coordinates
    newton.eval_fk(model, state.joint_q, state.joint_qd, state)
    assert np.allclose(state.joint_q.numpy(), [0.6, 0.0, 0.0, 0.0, 1.0])
    expected = wp.quat_from_axis_angle(wp.vec3(1.0, 0.0, 0.0), 0.6)  # default revolute axis: X
    assert np.allclose(np.abs(state.body_q.numpy()[0, 3:] @ np.array([*expected])), 1.0, atol=1e-6)


def test_kinematic_links_then_eval_fk():
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
    state = model.state()
    # prescribed generalized motion, then FK for the maximal coordinates
    q = state.joint_q.numpy()
    q[7] = 0.3
    state.joint_q.assign(q)
    newton.eval_fk(model, state.joint_q, state.joint_qd, state)
    assert np.allclose(state.body_q.numpy()[root, 3:], [*wp.quat_from_axis_angle(wp.vec3(0.0, 0.0, 1.0), 0.3)],
                       atol=1e-6)  # fmt: skip
    assert kinematic_free == 0


def test_inverse_dynamics_example():
    builder = newton.ModelBuilder()
    base = builder.add_link(mass=1.0, inertia=wp.mat33(np.eye(3) * 0.01))
    arm = builder.add_link(mass=0.5, com=wp.vec3(0.2, 0.0, 0.0), inertia=wp.mat33(np.eye(3) * 0.005))
    j0 = builder.add_joint_free(base)
    j1 = builder.add_joint_revolute(base, arm, axis=newton.Axis.Y)
    builder.add_articulation([j0, j1])
    model = builder.finalize()
    state = model.state()
    state.joint_qd.assign(np.linspace(-0.5, 0.5, model.joint_dof_count).astype(np.float32))

    # bring state.body_q in sync with state.joint_q (precondition of
    # eval_inverse_dynamics_passive)
    newton.eval_fk(model, state.joint_q, state.joint_qd, state)

    # allocate the requested outputs
    mass_matrix = wp.empty(
        (
            model.articulation_count,
            model.max_dofs_per_articulation,
            model.max_dofs_per_articulation,
        ),
        dtype=wp.float32,
        device=model.device,
    )
    gravity_force = wp.empty_like(state.joint_qd)
    coriolis_force = wp.empty_like(state.joint_qd)
    joint_f = wp.empty_like(state.joint_qd)

    # populate M(q), g(q), and C(q, q_dot)*q_dot in one call
    newton.eval_inverse_dynamics_passive(
        model,
        state,
        mass_matrix=mass_matrix,
        gravity_force=gravity_force,
        coriolis_force=coriolis_force,
    )

    # combine into the generalized joint force tau = M*joint_qdd + C*qdot + g
    joint_qdd = wp.zeros_like(state.joint_qd)
    newton.eval_inverse_dynamics_force(
        model,
        state,
        mass_matrix=mass_matrix,
        joint_qdd=joint_qdd,
        coriolis_force=coriolis_force,
        gravity_force=gravity_force,
        joint_f=joint_f,
    )
    # tau = C qd + g at zero acceleration; the free joint holds the total weight
    assert np.allclose(joint_f.numpy(), coriolis_force.numpy() + gravity_force.numpy(), atol=1e-5)
    assert np.allclose(gravity_force.numpy()[:3], [0.0, 0.0, 1.5 * 9.81], atol=1e-4)
    M = mass_matrix.numpy()[0]
    assert np.allclose(M, M.T, atol=1e-6) and np.allclose(M[:3, :3], 1.5 * np.eye(3), atol=1e-6)

    # Pass only the output arrays you need
    g2 = wp.zeros_like(state.joint_qd)
    c2 = wp.zeros_like(state.joint_qd)
    newton.eval_inverse_dynamics_passive(model, state, gravity_force=g2, coriolis_force=c2)
    assert np.allclose(g2.numpy(), gravity_force.numpy()) and np.allclose(c2.numpy(), coriolis_force.numpy())

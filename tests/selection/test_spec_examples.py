"""The ArticulationView examples of the Articulations page, run with ``import armillary as newton``."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import warp as wp

import armillary as newton


def _has(module: str, name: str) -> bool:
    try:
        if importlib.util.find_spec(module) is None:
            return False
    except ModuleNotFoundError:
        return False
    return hasattr(importlib.import_module(module), name)


needs_fk = pytest.mark.skipif(
    not _has("armillary.sim.kinematics", "eval_fk"),
    reason="armillary.eval_fk (armillary.sim.kinematics) not available yet",
)
needs_id = pytest.mark.skipif(
    not (
        _has("armillary.sim.kinematics", "eval_fk")
        and _has("armillary.sim.dynamics", "eval_inverse_dynamics_passive")
    ),
    reason="armillary.eval_inverse_dynamics_* (armillary.sim.dynamics) or eval_fk not available yet",
)


@pytest.fixture
def scene(mk):
    model = mk.robots().finalize()
    return model, model.state()


def test_construct_view_by_pattern_and_filters(scene):
    model, state = scene
    # select all articulations whose key starts with "robot"
    view = newton.selection.ArticulationView(model, pattern="robot*")
    assert view.count == 2

    # select only scalar-joint articulations (exclude quaternion-root joint types)
    scalar_view = newton.selection.ArticulationView(
        model,
        pattern="robot*",
        include_joint_types=[newton.JointType.PRISMATIC, newton.JointType.REVOLUTE],
        exclude_joint_types=[newton.JointType.FREE, newton.JointType.BALL],
    )
    assert scalar_view.get_dof_positions(state).shape == (1, 2, 1)


@needs_fk
def test_move_articulations_in_world_space(scene):
    model, state = scene
    view = newton.selection.ArticulationView(model, pattern="robot*")
    root_tf = view.get_root_transforms(state).numpy()
    # shift +0.2 m along world x for all selected articulations
    root_tf[..., 0] += 0.2
    view.set_root_transforms(state, root_tf)
    # recompute link transforms from generalized coordinates
    newton.eval_fk(model, state.joint_q, state.joint_qd, state)
    assert np.allclose(view.get_root_transforms(state).numpy()[0, :, 0], [0.2, 2.2])


def test_move_articulations_in_world_space_without_fk(scene):
    """The same edit without eval_fk: the floating-base root coordinates in joint_q move."""
    model, state = scene
    view = newton.selection.ArticulationView(model, pattern="robot*")
    root_tf = view.get_root_transforms(state).numpy()
    root_tf[..., 0] += 0.2
    view.set_root_transforms(state, root_tf)
    assert np.allclose(view.get_root_transforms(state).numpy()[0, :, 0], [0.2, 2.2])
    q = state.joint_q.numpy()
    assert np.allclose(q[[0, 8]], [0.2, 2.2])


def test_inspect_and_modify_selected_articulations(scene):
    model, state = scene
    view = newton.selection.ArticulationView(model, pattern="robot*")
    scalar_view = newton.selection.ArticulationView(
        model,
        pattern="robot*",
        include_joint_types=[newton.JointType.PRISMATIC, newton.JointType.REVOLUTE],
        exclude_joint_types=[newton.JointType.FREE, newton.JointType.BALL],
    )
    # inspect
    q = scalar_view.get_dof_positions(state)  # shape [world_count, articulation_count, dof_count]
    qd = scalar_view.get_dof_velocities(state)  # shape [world_count, articulation_count, dof_count]
    link_q = view.get_link_transforms(state)  # shape [world_count, articulation_count, link_count]
    assert q.shape == (1, 2, 1)
    assert qd.shape == (1, 2, 1)
    assert link_q.shape == (1, 2, 2)

    # edit selected articulation values in-place
    q_np = q.numpy()
    q_np[..., 0] = 0.0
    scalar_view.set_dof_positions(state, q_np)
    assert np.allclose(scalar_view.get_dof_positions(state).numpy()[0, :, 0], 0.0)


def test_selections_with_structural_differences(mk):
    """Joint topology shared, shapes differ: joint and link data stay available, shapes do not."""
    builder = newton.ModelBuilder()
    mk.chain(builder, 2, "robot_a", shapes=1)
    mk.chain(builder, 2, "robot_b", shapes=2)
    model = builder.finalize()
    state = model.state()

    with pytest.raises(ValueError):
        newton.selection.ArticulationView(model, pattern="robot*")  # homogeneous=True

    view = newton.selection.ArticulationView(model, pattern="robot*", homogeneous=False)
    try:
        shape_margin = view.get_attribute("shape_margin", model)
    except AttributeError:
        shape_margin = None
    assert shape_margin is None
    assert view.shape_count is None and view.shape_names is None and view.link_shapes is None
    assert view.get_dof_positions(state).shape == (1, 2, 2)
    assert view.get_link_transforms(state).shape == (1, 2, 2)
    with pytest.raises(AttributeError):
        view.set_attribute("shape_margin", model, np.zeros((1, 2, 2), dtype=np.float32))


def test_replicated_robot_scene_is_homogeneous(mk):
    model = mk.replicated(mk.arm("free", label="robot"), 16)
    view = newton.selection.ArticulationView(model, pattern="robot*")  # homogeneous=True
    assert (view.world_count, view.count_per_world, view.count) == (16, 1, 16)
    assert not view.is_sparse and not view.uses_explicit_model_indices


@needs_id
def test_restricting_inverse_dynamics_with_the_selection_api(scene):
    model, state = scene
    newton.eval_fk(model, state.joint_q, state.joint_qd, state)
    n = model.max_dofs_per_articulation
    mass_matrix = wp.empty((model.articulation_count, n, n), dtype=wp.float32, device=model.device)
    gravity_force = wp.empty_like(state.joint_qd)
    coriolis_force = wp.empty_like(state.joint_qd)
    joint_f = wp.empty_like(state.joint_qd)
    joint_qdd = wp.zeros_like(state.joint_qd)

    # reference: the whole model
    ref_m = wp.empty_like(mass_matrix)
    ref_g = wp.empty_like(gravity_force)
    ref_c = wp.empty_like(coriolis_force)
    newton.eval_inverse_dynamics_passive(model, state, mass_matrix=ref_m, gravity_force=ref_g, coriolis_force=ref_c)

    # only compute M(q), g(q), and C*q_dot for selected articulations
    view = newton.selection.ArticulationView(model, pattern="robot*")
    view.eval_inverse_dynamics_passive(
        state, mass_matrix=mass_matrix, gravity_force=gravity_force, coriolis_force=coriolis_force
    )
    np.testing.assert_allclose(mass_matrix.numpy(), ref_m.numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(gravity_force.numpy(), ref_g.numpy(), rtol=1e-6, atol=1e-6)

    # optionally narrow further with a per-world submask (shape [world_count])
    per_world_mask = wp.array([True], dtype=bool, device=model.device)
    view.eval_inverse_dynamics_passive(
        state,
        mass_matrix=mass_matrix,
        gravity_force=gravity_force,
        coriolis_force=coriolis_force,
        mask=per_world_mask,
    )
    view.eval_inverse_dynamics_force(
        state,
        mass_matrix=mass_matrix,
        joint_qdd=joint_qdd,
        coriolis_force=coriolis_force,
        gravity_force=gravity_force,
        joint_f=joint_f,
        mask=per_world_mask,
    )
    # zero acceleration: tau = C qd + g
    np.testing.assert_allclose(
        joint_f.numpy(), coriolis_force.numpy() + gravity_force.numpy(), rtol=1e-5, atol=1e-5
    )

    # a view of one articulation: the other articulation's slots come back as zero
    one = newton.selection.ArticulationView(model, pattern="robot_1")
    one.eval_inverse_dynamics_passive(state, mass_matrix=mass_matrix, gravity_force=gravity_force)
    assert np.all(mass_matrix.numpy()[0] == 0.0)
    np.testing.assert_allclose(mass_matrix.numpy()[1], ref_m.numpy()[1], rtol=1e-6, atol=1e-6)
    assert np.all(gravity_force.numpy()[:7] == 0.0)
    np.testing.assert_allclose(gravity_force.numpy()[7:], ref_g.numpy()[7:], rtol=1e-6, atol=1e-6)

"""ArticulationView: selection, metadata, layouts, getters / setters, masks and errors."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import warp as wp

import armillary as newton
from armillary.selection import ArticulationView as AV

AF = newton.Model.AttributeFrequency


def bits(a):
    """Raw bytes of an array's values (for bit-for-bit comparisons)."""
    return np.ascontiguousarray(a.numpy()).reshape(-1).view(np.uint8).copy()


def test_glob_without_slash_matches_path_label_tail():
    """``"robot*"`` selects articulations labelled by USD prim path (``"/World/robot_0"``)."""
    robot = newton.ModelBuilder()
    link = robot.add_link()
    robot.add_articulation([robot.add_joint_revolute(-1, link)], label="/World/robot")
    other = newton.ModelBuilder()
    link = other.add_link()
    other.add_articulation([other.add_joint_revolute(-1, link)], label="/World/robot/arm")
    scene = newton.ModelBuilder()
    scene.add_builder(robot)
    scene.add_builder(other)
    m = scene.finalize()
    assert AV(m, "robot*").articulation_ids.numpy().tolist() == [[0]]
    assert AV(m, "arm").articulation_ids.numpy().tolist() == [[1]]
    assert AV(m, "/World/robot*").count == 2  # a pattern with "/" matches full labels only
    with pytest.raises(KeyError, match="No articulations matching pattern 'World\*'"):
        AV(m, "World*")


# ------------------------------------------------------------------ selection by pattern
@pytest.fixture(scope="module")
def two_robots(mk):
    return mk.robots().finalize()


def test_pattern_kinds(two_robots):
    m = two_robots
    assert AV(m, "robot*").count == 2
    assert AV(m, "robot_?").count == 2
    assert AV(m, ["robot_1"]).articulation_ids.numpy().tolist() == [[1]]
    assert AV(m, ["robot_0", "robot_1"]).count == 2
    assert AV(m, [1]).articulation_ids.numpy().tolist() == [[1]]
    assert AV(m, re.compile(r"robot_[01]")).count == 2
    with pytest.raises(KeyError, match="No articulations matching"):
        AV(m, re.compile("robot"))  # regular expressions use full matching
    with pytest.raises(KeyError, match="No articulations matching pattern 'foo\\*'"):
        AV(m, "foo*")
    with pytest.raises(ValueError, match="ascending"):
        AV(m, [1, 0])
    with pytest.raises(ValueError, match="ascending"):
        AV(m, [1, 1])


def test_metadata_of_the_spec_scene(two_robots):
    v = AV(two_robots, "robot*")
    assert (v.count, v.world_count, v.count_per_world) == (2, 1, 2)
    assert v.world_ids.numpy().tolist() == [-1]
    assert v.articulation_ids.shape == (1, 2)
    assert v.articulation_mask.numpy().tolist() == [True, True]
    assert v.full_mask.numpy().tolist() == [True]
    assert (v.joint_count, v.joint_dof_count, v.joint_coord_count) == (2, 7, 8)
    assert v.joint_dof_counts == [6, 1] and v.joint_coord_counts == [7, 1]
    assert v.joint_names == ["joint_1", "joint_2"]
    assert v.joint_dof_names == [f"joint_1:{k}" for k in range(6)] + ["joint_2"]
    assert v.joint_coord_names == [f"joint_1:{k}" for k in range(7)] + ["joint_2"]
    assert (v.link_count, v.link_names, v.body_names) == (2, ["body_0", "body_1"], ["body_0", "body_1"])
    assert (v.shape_count, v.link_shapes, v.body_shapes) == (2, [[0], [1]], [[0], [1]])
    assert v.root_joint_type == int(newton.JointType.FREE)
    assert v.is_floating_base is True and v.is_fixed_base is False
    assert v.joints_contiguous and v.joint_dofs_contiguous and v.joint_coords_contiguous
    assert v.links_contiguous and v.shapes_contiguous
    assert not v.is_sparse and not v.uses_explicit_model_indices
    assert v.custom_frequency_counts == {} and v.tendon_count == 0 and v.tendon_names == []


def test_getter_shapes_and_dtypes(two_robots):
    m = two_robots
    s, c = m.state(), m.control()
    v = AV(m, "robot*")
    cases = {
        "dofpos": (v.get_dof_positions(s), (1, 2, 8), wp.float32),
        "dofvel": (v.get_dof_velocities(s), (1, 2, 7), wp.float32),
        "dofforce": (v.get_dof_forces(c), (1, 2, 7), wp.float32),
        "root": (v.get_root_transforms(s), (1, 2), wp.transform),
        "rootvel": (v.get_root_velocities(s), (1, 2), wp.spatial_vector),
        "link": (v.get_link_transforms(s), (1, 2, 2), wp.transform),
        "linkvel": (v.get_link_velocities(s), (1, 2, 2), wp.spatial_vector),
        "mass": (v.get_attribute("body_mass", m), (1, 2, 2), wp.float32),
        "inertia": (v.get_attribute("body_inertia", m), (1, 2, 2), wp.mat33),
        "X_p": (v.get_attribute("joint_X_p", m), (1, 2, 2), wp.transform),
        "axis": (v.get_attribute("joint_axis", m), (1, 2, 7), wp.vec3),
        "dof_dim": (v.get_attribute("joint_dof_dim", m), (1, 2, 2, 2), wp.int32),
        "target_q": (v.get_attribute("joint_target_q", c), (1, 2, 8), wp.float32),
        "margin": (v.get_attribute("shape_margin", m), (1, 2, 2), wp.float32),
        "enabled": (v.get_attribute("joint_enabled", m), (1, 2, 2), wp.bool),
    }
    for tag, (arr, shape, dtype) in cases.items():
        assert arr.shape == shape, tag
        assert arr.dtype == dtype, tag
    np.testing.assert_array_equal(v.get_attribute("joint_dof_dim", m).numpy()[0, 0], [[3, 3], [0, 1]])
    np.testing.assert_array_equal(v.get_dof_positions(s).numpy(), s.joint_q.numpy().reshape(1, 2, 8))
    # regular contiguous rows: the getter is a view of the source array
    assert v.get_dof_positions(s).ptr == s.joint_q.ptr
    assert v.get_root_transforms(s).strides == (64, 32)


def test_attribute_errors(two_robots):
    m = two_robots
    v = AV(m, "robot*")
    with pytest.raises(AttributeError):
        v.get_attribute("nonexistent", m)
    with pytest.raises(KeyError, match="frequency of 'gravity' is not known"):
        v.get_attribute("gravity", m)
    with pytest.raises(AttributeError, match="frequency 'ARTICULATION'"):
        v.get_attribute("articulation_world", m)
    with pytest.raises(AttributeError, match="frequency 'ARTICULATION'"):
        v.set_attribute("articulation_world", m, np.zeros((1, 2), dtype=np.int32))


# ------------------------------------------------------------------ setters and masks
def test_setters_write_only_selected_entries(mk):
    b = mk.robots(3)
    m = b.finalize()
    s = m.state()
    v = AV(m, ["robot_0", "robot_2"])
    q0 = s.joint_q.numpy().copy()
    vals = np.arange(16, dtype=np.float32).reshape(1, 2, 8) + 100.0
    v.set_dof_positions(s, vals)
    q = s.joint_q.numpy()
    np.testing.assert_array_equal(q[0:8], vals[0, 0])
    np.testing.assert_array_equal(q[8:16], q0[8:16])  # robot_1 untouched
    np.testing.assert_array_equal(q[16:24], vals[0, 1])
    np.testing.assert_array_equal(v.get_dof_positions(s).numpy(), vals)
    # sparse within the world: rows are strided, not contiguous
    assert v.joint_coords_contiguous is False


def test_masks(mk):
    m = mk.replicated(mk.arm("revolute"), 3)
    s = m.state()
    v = AV(m, "arm")
    assert v.get_dof_positions(s).shape == (3, 1, 2)
    before = bits(s.joint_q)
    # per-world mask, False everywhere: nothing is written
    v.set_dof_positions(s, np.ones((3, 1, 2), dtype=np.float32), mask=wp.array([False, False, False], dtype=bool))
    assert np.array_equal(bits(s.joint_q), before)
    v.set_dof_positions(s, np.ones((3, 1, 2), dtype=np.float32), mask=wp.array([False, True, False], dtype=bool))
    np.testing.assert_array_equal(s.joint_q.numpy(), [0, 0, 1, 1, 0, 0])
    v.set_dof_positions(s, np.full((3, 1, 2), 2.0, dtype=np.float32), mask=np.array([[True], [False], [False]]))
    np.testing.assert_array_equal(s.joint_q.numpy(), [2, 2, 1, 1, 0, 0])
    v.set_dof_positions(s, np.full((3, 1, 2), 3.0, dtype=np.float32), mask=[False, False, True])
    np.testing.assert_array_equal(s.joint_q.numpy(), [2, 2, 1, 1, 3, 3])
    with pytest.raises(ValueError, match=r"Expected Boolean mask with shape \(3, 1\) or \(3,\), got \(2,\)"):
        v.set_dof_positions(s, np.zeros((3, 1, 2), dtype=np.float32), mask=[True, False])
    # model articulation mask
    np.testing.assert_array_equal(v.get_model_articulation_mask().numpy(), [True, True, True])
    np.testing.assert_array_equal(v.get_model_articulation_mask(wp.array([False, True, True])).numpy(), [0, 1, 1])
    np.testing.assert_array_equal(v.get_model_articulation_mask([[True], [False], [False]]).numpy(), [1, 0, 0])


def test_value_conversion_and_shape_checks(two_robots):
    m = two_robots
    s = m.state()
    v = AV(m, "robot*")
    v.set_dof_velocities(s, wp.full((1, 2, 7), 3.0, dtype=float))
    np.testing.assert_array_equal(s.joint_qd.numpy(), np.full(14, 3.0))
    v.set_dof_velocities(s, np.zeros(14))  # numpy input with the right size is reshaped
    np.testing.assert_array_equal(s.joint_qd.numpy(), np.zeros(14))
    v.set_attribute("body_mass", m, np.full((1, 2, 2), 0.5, dtype=np.float64))  # converted to float32
    np.testing.assert_array_equal(m.body_mass.numpy(), np.full(4, 0.5, dtype=np.float32))
    with pytest.raises(ValueError, match="shape"):
        v.set_dof_velocities(s, wp.zeros(14, dtype=float))
    with pytest.raises(Exception):
        v.set_dof_positions(s, np.zeros((1, 2, 3)))
    with pytest.raises(Exception):
        v.set_root_transforms(s, np.zeros((1, 1, 7)))


def test_vector_bool_and_matrix_round_trips(two_robots):
    m = two_robots
    v = AV(m, "robot_1")
    axis = np.array([[[[1, 2, 3]] * 7]], dtype=np.float32)
    before = bits(m.joint_axis)
    v.set_attribute("joint_axis", m, axis)
    after = m.joint_axis.numpy()
    np.testing.assert_array_equal(after[7:], axis[0, 0])
    assert np.array_equal(bits(m.joint_axis)[: 7 * 12], before[: 7 * 12])
    en = np.array([[[False, True]]])
    v.set_attribute("joint_enabled", m, en)
    np.testing.assert_array_equal(m.joint_enabled.numpy(), [True, True, False, True])
    v.set_attribute("joint_dof_dim", m, np.array([[[[3, 3], [1, 0]]]], dtype=np.int32))
    np.testing.assert_array_equal(m.joint_dof_dim.numpy()[2:], [[3, 3], [1, 0]])
    np.testing.assert_array_equal(m.joint_dof_dim.numpy()[:2], [[3, 3], [0, 1]])


# ------------------------------------------------------------------ roots
@pytest.mark.parametrize("root", ["fixed", "revolute"])
def test_fixed_and_world_attached_roots_move_through_joint_X_p(mk, root):
    m = mk.replicated(mk.arm(root), 3)
    s = m.state()
    v = AV(m, "arm")
    assert v.is_fixed_base is (root == "fixed")
    assert v.is_floating_base is False
    tf = v.get_root_transforms(s)
    assert tf.shape == (3, 1) and tf.dtype == wp.transform
    np.testing.assert_array_equal(tf.numpy()[:, 0, :3], [[0, 0, 1]] * 3)
    np.testing.assert_array_equal(v.get_root_transforms(m).numpy(), tf.numpy())
    q_before = bits(s.joint_q)
    xp_before = m.joint_X_p.numpy().copy()
    new = tf.numpy().copy()
    new[1, 0, 0] += 5.0
    v.set_root_transforms(s, new)
    xp = m.joint_X_p.numpy()
    np.testing.assert_array_equal(xp[2], new[1, 0])
    np.testing.assert_array_equal(np.delete(xp, 2, axis=0), np.delete(xp_before, 2, axis=0))
    assert np.array_equal(bits(s.joint_q), q_before)
    assert v.get_root_velocities(s) is None
    v.set_root_velocities(s, np.ones((3, 1, 6), dtype=np.float32))  # no effect
    assert np.all(s.joint_qd.numpy() == 0.0)


def test_floating_root_velocities(mk):
    m = mk.replicated(mk.arm("free"), 2)
    s = m.state()
    v = AV(m, "arm")
    assert v.is_floating_base and v.root_joint_type == int(newton.JointType.FREE)
    vel = np.arange(12, dtype=np.float32).reshape(2, 1, 6)
    v.set_root_velocities(s, vel, mask=[False, True])
    qd = s.joint_qd.numpy()
    np.testing.assert_array_equal(qd[:7], 0.0)
    np.testing.assert_array_equal(qd[7:13], vel[1, 0])
    np.testing.assert_array_equal(v.get_root_velocities(s).numpy()[1, 0], vel[1, 0])
    tf = v.get_root_transforms(m)
    np.testing.assert_array_equal(tf.numpy()[:, 0], m.joint_q.numpy().reshape(2, 8)[:, :7])


# ------------------------------------------------------------------ joint / link filters
def test_joint_and_link_filters(mk):
    m = mk.replicated(mk.arm("revolute"), 2)
    s = m.state()
    vj = AV(m, "arm", exclude_joints=["root"])
    assert vj.joint_names == ["elbow"] and vj.joint_dof_names == ["elbow"]
    assert vj.link_names == ["base", "tip"]  # joint filters keep every link
    assert vj.root_joint_type == int(newton.JointType.REVOLUTE)
    assert AV(m, "arm", include_joints="elb*").joint_names == ["elbow"]
    assert AV(m, "arm", include_joints=[1]).joint_names == ["elbow"]
    assert AV(m, "arm", include_joints=re.compile("root|elbow")).joint_count == 2
    vl = AV(m, "arm", include_links="tip")
    assert vl.link_names == ["tip"] and vl.joint_names == ["root", "elbow"]
    assert vl.shape_count == 2 and vl.link_shapes == [[0, 1]]
    assert vl.get_link_transforms(s).shape == (2, 1, 1)
    assert vl.get_attribute("shape_margin", m).shape == (2, 1, 2)
    vx = AV(m, "arm", exclude_links=["base"])
    assert vx.link_names == ["tip"] and vx.links_contiguous is False
    # gaps: the getter gathers a copy; the setter writes back only the selected rows
    before = m.body_mass.numpy().copy()
    vx.set_attribute("body_mass", m, np.array([[[7.0]], [[8.0]]], dtype=np.float32))
    np.testing.assert_array_equal(m.body_mass.numpy(), [before[0], 7.0, before[2], 8.0])
    np.testing.assert_array_equal(vx.get_attribute("body_mass", m).numpy().reshape(-1), [7.0, 8.0])


def test_joint_type_filters_select_template_positions(two_robots):
    m = two_robots
    s = m.state()
    v = AV(m, "robot*", include_joint_types=[newton.JointType.REVOLUTE])
    assert v.joint_names == ["joint_2"] and v.joint_dof_count == 1 and v.joint_coord_count == 1
    vals = np.array([[[0.25], [-0.5]]], dtype=np.float32)
    v.set_dof_positions(s, vals)
    np.testing.assert_array_equal(s.joint_q.numpy()[[7, 15]], [0.25, -0.5])
    v = AV(m, "robot*", exclude_joint_types=[newton.JointType.REVOLUTE])
    assert v.joint_dof_count == 6 and v.joint_coord_count == 7


# ------------------------------------------------------------------ homogeneity
def test_sparse_view(mk):
    b = newton.ModelBuilder()
    for w in range(3):
        b.begin_world()
        if w != 1:
            mk.chain(b, 2, "robot")
        else:
            mk.chain(b, 1, "other")
        b.end_world()
    m = b.finalize()
    s = m.state()
    with pytest.raises(ValueError, match="does not match articulations in every world"):
        AV(m, "robot")
    v = AV(m, "robot", homogeneous=False)
    assert v.is_sparse and v.world_count == 2 and v.count_per_world == 1
    assert v.world_ids.numpy().tolist() == [0, 2]
    assert v.articulation_ids.numpy().tolist() == [[0], [2]]
    before = s.joint_q.numpy().copy()
    v.set_dof_positions(s, np.array([[[1, 2]], [[3, 4]]], dtype=np.float32), mask=[False, True])
    np.testing.assert_array_equal(s.joint_q.numpy(), [before[0], before[1], before[2], 3, 4])
    np.testing.assert_array_equal(v.get_model_articulation_mask([True, False]).numpy(), [True, False, False])


def test_irregular_layout_uses_explicit_model_indices(mk):
    b = newton.ModelBuilder()
    for w in range(3):
        b.begin_world()
        mk.chain(b, 2, "robot")
        for _ in range(w):  # a different number of extra articulations per world
            mk.chain(b, 1, "extra")
        b.end_world()
    m = b.finalize()
    s = m.state()
    with pytest.raises(ValueError, match="JOINT layout is unavailable: start indices are not uniformly strided"):
        AV(m, "robot")
    v = AV(m, "robot", homogeneous=False)
    assert v.uses_explicit_model_indices and not v.is_sparse
    assert v.joint_count == 2 and v.link_count == 2
    vals = np.arange(6, dtype=np.float32).reshape(3, 1, 2) + 1
    v.set_dof_positions(s, vals)
    q = s.joint_q.numpy()
    ids = v.articulation_ids.numpy().reshape(-1)
    a_start = m.articulation_start.numpy()
    qs = m.joint_q_start.numpy()
    for k, a in enumerate(ids):
        np.testing.assert_array_equal(q[qs[a_start[a]] : qs[a_start[a]] + 2], vals[k, 0])
    extra = np.setdiff1d(np.arange(len(q)), np.concatenate([qs[a_start[a]] + np.arange(2) for a in ids]))
    assert np.all(q[extra] == 0.0)
    np.testing.assert_array_equal(v.get_dof_positions(s).numpy(), vals)
    np.testing.assert_array_equal(v.get_link_transforms(s).shape, (3, 1, 2))


def test_unavailable_frequencies(mk):
    b = newton.ModelBuilder()
    mk.chain(b, 2, "robot_a")
    mk.chain(b, 3, "robot_b")
    m = b.finalize()
    s = m.state()
    with pytest.raises(ValueError, match="JOINT layout is unavailable: selected count differs"):
        AV(m, "robot*")
    v = AV(m, "robot*", homogeneous=False)
    names = ("joint_count", "joint_names", "joint_dof_count", "joint_coord_count", "link_count", "link_names",
             "shape_count", "link_shapes", "joint_dof_counts", "joint_coord_counts", "joints_contiguous")  # fmt: skip
    for name in names:
        assert getattr(v, name) is None, name
    assert v.root_joint_type == int(newton.JointType.REVOLUTE)
    with pytest.raises(AttributeError, match="'joint_q' is unavailable"):
        v.get_dof_positions(s)
    with pytest.raises(AttributeError, match="'joint_q' is unavailable"):
        v.set_dof_positions(s, np.zeros((1, 2, 2)))
    with pytest.raises(AttributeError, match="'body_q' is unavailable"):
        v.get_link_transforms(s)
    assert v.get_root_transforms(s).shape == (1, 2)
    # a joint filter choosing template positions present in every match restores the joint layouts
    vf = AV(m, "robot*", include_joints=[0, 1], homogeneous=False)
    assert vf.joint_count == 2 and vf.get_dof_positions(s).shape == (1, 2, 2)


def test_varying_counts_per_world_and_deprecated_flag(mk):
    b = newton.ModelBuilder()
    for w in range(2):
        b.begin_world()
        mk.chain(b, 2, "robot")
        if w == 0:
            mk.chain(b, 2, "robot")
        b.end_world()
    m = b.finalize()
    for kw in ({}, {"homogeneous": False}):
        with pytest.raises(ValueError, match="Varying articulation counts per selected world"):
            AV(m, "robot", **kw)
    with pytest.warns(DeprecationWarning):
        with pytest.raises(ValueError, match="implies"):
            AV(m, "robot", allow_partial_layouts=False, homogeneous=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        v = AV(mk.robots().finalize(), "robot*", allow_partial_layouts=True)
    assert v.homogeneous is False


def test_interleaved_shapes_use_explicit_indices_in_homogeneous_views(mk):
    b = newton.ModelBuilder()
    for w in range(2):
        b.begin_world()
        mk.chain(b, 2, "robot")
        # a second shape on the first link, after the second link's shape
        b.add_shape_box(2 * w, hx=0.1, hy=0.1, hz=0.1)
        b.end_world()
    m = b.finalize()
    v = AV(m, "robot")  # homogeneous: shapes may be interleaved
    assert v.shape_count == 3 and v.link_shapes == [[0, 1], [2]]
    assert v.shapes_contiguous is False
    v.set_attribute("shape_margin", m, np.array([[[1, 2, 3]], [[4, 5, 6]]], dtype=np.float32))
    got = m.shape_margin.numpy()
    sb = m.shape_body.numpy()
    np.testing.assert_array_equal(got[sb == 0], [1, 2])
    np.testing.assert_array_equal(got[sb == 1], [3])
    np.testing.assert_array_equal(got[sb == 2], [4, 5])
    np.testing.assert_array_equal(got[sb == 3], [6])
    np.testing.assert_array_equal(v.get_attribute("shape_margin", m).numpy().reshape(-1), [1, 2, 3, 4, 5, 6])


def test_global_shapes_of_world_links_are_not_homogeneous(mk):
    b = newton.ModelBuilder()
    for w in range(2):
        b.begin_world()
        mk.chain(b, 2, "robot")
        b.end_world()
    b.add_shape_box(0, hx=0.1, hy=0.1, hz=0.1)  # global shapes (world -1) on each robot's first link
    b.add_shape_box(2, hx=0.1, hy=0.1, hz=0.1)
    m = b.finalize()
    with pytest.raises(ValueError, match="SHAPE layout is unavailable: selected rows differ between worlds"):
        AV(m, "robot")
    v = AV(m, "robot", homogeneous=False)
    assert v.shape_count == 3 and v.get_attribute("shape_margin", m).shape == (2, 1, 3)


# ------------------------------------------------------------------ custom attributes
def test_custom_attributes_and_articulation_owned_frequencies(mk):
    CA, CF = newton.ModelBuilder.CustomAttribute, newton.ModelBuilder.CustomFrequency
    src = mk.arm("revolute")
    src.add_custom_attribute(CA(name="temperature", frequency=AF.BODY, dtype=wp.float32, default=20.0))
    src.add_custom_attribute(
        CA(name="gain", frequency=AF.JOINT_DOF, dtype=wp.float32, default=1.0, namespace="ctl",
           assignment=newton.Model.AttributeAssignment.CONTROL)
    )  # fmt: skip
    tendon = "mujoco:tendon"
    src.add_custom_frequency(
        CF(name="tendon", namespace="mujoco", articulation_owner_attribute=f"{tendon}_articulation",
           label_attribute=f"{tendon}_label")
    )  # fmt: skip
    src.add_custom_attribute(
        CA(name="tendon_articulation", frequency=tendon, dtype=wp.int32, namespace="mujoco", references="articulation")
    )
    src.add_custom_attribute(CA(name="tendon_label", frequency=tendon, dtype=str, namespace="mujoco"))
    src.add_custom_attribute(CA(name="tendon_stiffness", frequency=tendon, dtype=wp.float32, namespace="mujoco"))
    for k in range(2):
        src.add_custom_values(**{"mujoco:tendon_articulation": 0, "mujoco:tendon_label": f"t{k}",
                                 "mujoco:tendon_stiffness": float(k)})  # fmt: skip
    m = mk.replicated(src, 3)
    v = AV(m, "arm")
    t = v.get_attribute("temperature", m)
    assert t.shape == (3, 1, 2) and np.all(t.numpy() == 20.0)
    c = m.control()
    g = v.get_attribute("ctl:gain", c)
    assert g.shape == (3, 1, 2)
    v.set_attribute("ctl:gain", c, np.full((3, 1, 2), 4.0, dtype=np.float32), mask=[True, False, True])
    np.testing.assert_array_equal(c.ctl.gain.numpy(), [4, 4, 1, 1, 4, 4])
    assert v.custom_frequency_counts == {"mujoco:tendon": 2}
    assert v.tendon_count == 2 and v.tendon_names == ["t0", "t1"]
    ts = v.get_attribute("mujoco:tendon_stiffness", m)
    assert ts.shape == (3, 1, 2)
    np.testing.assert_array_equal(ts.numpy()[:, 0], [[0, 1]] * 3)
    nine = np.full((3, 1, 2), 9.0, dtype=np.float32)
    v.set_attribute("mujoco:tendon_stiffness", m, nine, mask=[[False], [True], [False]])
    np.testing.assert_array_equal(m.mujoco.tendon_stiffness.numpy(), [0, 1, 9, 9, 0, 1])


def test_include_loop_closing_joints_appends_the_loop_joints_of_each_articulation():
    import warp as wp

    import armillary as newton
    from armillary.selection import ArticulationView

    def four_bar():
        b = newton.ModelBuilder()
        base = b.add_link(mass=1.0, label="base")
        left = b.add_link(mass=1.0, label="left")
        right = b.add_link(mass=1.0, label="right")
        j0 = b.add_joint_fixed(-1, base, label="root")
        j1 = b.add_joint_revolute(base, left, label="hinge_left")
        j2 = b.add_joint_revolute(base, right, label="hinge_right")
        b.add_articulation([j0, j1, j2], label="bar")
        b.add_joint_ball(left, right, parent_xform=wp.transform((0.0, 0.1, 0.0), wp.quat_identity()), label="closure")
        return b

    scene = newton.ModelBuilder()
    scene.replicate(four_bar(), 2)
    model = scene.finalize(device="cpu")
    plain = ArticulationView(model, "bar")
    loops = ArticulationView(model, "bar", include_loop_closing_joints=True)
    assert plain.joint_count == 3 and loops.joint_count == 4
    assert loops.joint_names[-1] == "closure"
    assert loops.joint_dof_count == plain.joint_dof_count + 3  # the ball joint's 3 DOFs
    ids = loops.get_attribute("joint_type", model).numpy()
    assert ids.shape == (2, 1, 4) and ids[0, 0, -1] == int(newton.JointType.BALL)

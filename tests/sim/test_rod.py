"""Rods (``armillary.Rod``, ``ModelBuilder.add_rod`` / ``add_joint_rod``) and particle-body attachments."""

from __future__ import annotations

import math

import numpy as np
import pytest
import warp as wp

import armillary
from armillary.sim.rod import quat_conj, quat_mul, quat_rotate

EZ = np.array([0.0, 0.0, 1.0])
BENT = [[0, 0, 0], [1, 0, 0], [2, 0.5, 0], [3, 0.5, 1]]


def _rows(values, n):
    return np.asarray(values, dtype=np.float64).reshape(-1, n)


def _same_quat(a, b, atol=1e-5):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return np.allclose(a, b, atol=atol) or np.allclose(a, -b, atol=atol)


# ---------------------------------------------------------------------- Rod validation
@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(points=[[0, 0], [1, 0]]), r"points must have shape \(N, 3\)"),
        (dict(points=[[0, 0, 0]]), "at least 2 points"),
        (dict(points=[[0, 0, 0], [np.nan, 0, 0]]), "points must be finite; point index 1"),
        (dict(points=[[0, 0, 0], [0, 0, 0], [1, 0, 0]]), "segment index 0"),
        (dict(edges=[[0, 1, 2]]), r"edges must have shape \(E, 2\)"),
        (dict(edges=[[0, 3]]), r"indices in \[0, 3\); edge index 0"),
        (dict(edges=[[0, 1], [1, 1]]), "must not connect a point to itself; edge index 1"),
        (dict(edges=[[0, 1], [1, 0]]), "duplicates; edge index 1"),
        (dict(quaternions=[[0, 0, 0, 1]]), "quaternions must contain 2 frames"),
        (dict(quaternions=[[0, 0, 0, 0], [0, 0, 0, 1]]), "quaternions must be non-zero; segment index 0"),
        (dict(quaternions=[[0, 0, np.inf, 1], [0, 0, 0, 1]]), "quaternions must be finite; segment index 0"),
        (dict(quaternions=[[0, 0.7071068, 0, 0.7071068], [0, 0, 0, 1]]), "quaternion at segment index 1 must align"),
        (dict(rest_points=[[0, 0, 0], [1, 0, 0]]), "rest_points must contain 3 points"),
        (dict(rest_quaternions=[[0, 0, 0, 1]]), "rest_quaternions must contain 2 frames"),
        (dict(rest_straight=True, rest_points=[[0, 0, 0], [1, 0, 0], [2, 0, 0]]), "rest_straight cannot be combined"),
        (dict(points=[[0, 0, 0], [1, 0, 0]], rest_straight=True), "at least two segments"),
        (dict(edges=[[0, 1], [0, 2]], rest_straight=True), "ordered chain"),
        (dict(closed=True), "first and last points to coincide"),
        (dict(edges=[[0, 1], [1, 2]], closed=True), "closed is only valid when edges is omitted"),
        (dict(radius=0.1, youngs_modulus=1e6, poissons_ratio=0.3, stretch_rigidity=1, shear_rigidity=1,
              bend_rigidity=1, twist_rigidity=1), "mutually exclusive"),
        (dict(stretch_rigidity=1, bend_rigidity=2), "must be supplied together"),
        (dict(youngs_modulus=1e6, poissons_ratio=0.3), "radius is required"),
        (dict(radius=0.1, youngs_modulus=1e6, poissons_ratio=0.3, shear_modulus=1e5), "exactly one of poissons_ratio"),
        (dict(radius=0.1, youngs_modulus=1e6), "exactly one of poissons_ratio"),
        (dict(radius=0.1, poissons_ratio=0.3), "youngs_modulus is required"),
        (dict(radius=-0.1), "radius must be finite and > 0"),
        (dict(radius=0.1, youngs_modulus=1e6, poissons_ratio=0.5), "-1 < nu < 0.5"),
        (dict(stretch_rigidity=-1, shear_rigidity=1, bend_rigidity=1, twist_rigidity=1), "stretch_rigidity must be finite"),
    ],
)  # fmt: skip
def test_rod_validation(kwargs, match):
    kwargs = dict(kwargs)
    points = kwargs.pop("points", [[0, 0, 0], [1, 0, 0], [2, 0, 0]])
    with pytest.raises(ValueError, match=match):
        armillary.Rod(points, **kwargs)


def test_rod_properties_and_setters():
    rod = armillary.Rod(BENT)
    assert rod.point_count == 4 and rod.segment_count == 3
    assert rod.edges.dtype == np.int32 and rod.points.dtype == np.float32
    np.testing.assert_allclose(rod.segment_lengths, [1.0, math.sqrt(1.25), math.sqrt(2.0)], rtol=1e-6)
    rod.points = [[0, 0, 0], [1, 0, 0]]  # implicit chain edges follow the point count
    assert rod.edges.tolist() == [[0, 1]]
    with pytest.raises(ValueError, match=r"points must have shape"):
        rod.points = [[0, 0]]
    with pytest.raises(ValueError, match="must not connect a point to itself"):
        rod.edges = [[0, 0]]
    rod.edges = [[1, 0]]
    assert not rod.is_ordered_chain()
    # non-unit frames are normalized
    r2 = armillary.Rod([[0, 0, 0], [0, 0, 1]], quaternions=[[0, 0, 0, 3.0]])
    np.testing.assert_allclose(r2.quaternions, [[0, 0, 0, 1]])
    assert isinstance(armillary.sim.Rod(BENT).copy(), armillary.Rod)


# ---------------------------------------------------------------------- frames
def test_parallel_transport_frames():
    rod = armillary.Rod(BENT)
    p = np.asarray(BENT, float)
    q = rod.quaternions.astype(np.float64)
    for i in range(3):
        t = (p[i + 1] - p[i]) / np.linalg.norm(p[i + 1] - p[i])
        np.testing.assert_allclose(quat_rotate(q[i], EZ), t, atol=1e-6)  # local +Z = tangent
        np.testing.assert_allclose(np.linalg.norm(q[i]), 1.0, atol=1e-6)
    for i in range(2):
        rel = quat_mul(quat_conj(q[i]), q[i + 1])  # relative rotation in the frame of segment i
        axis_local = rel[:3]
        # parallel transport: the relative rotation has no component about the tangent (no twist)
        assert abs(axis_local[2]) < 1e-6
    # explicitly twisted frames: equal increments of twist_total, the first frame included
    r2 = armillary.Rod.create_straight((0, 0, 0), (1, 0, 0), 3.0, segment_count=3, twist_total=math.pi / 2)
    qs = r2.quaternions.astype(np.float64)
    rel = quat_mul(quat_conj(qs[0]), qs[1])
    assert _same_quat(rel, [0, 0, math.sin(math.pi / 12), math.cos(math.pi / 12)])
    # graph frames are aligned independently (minimal rotation of the identity)
    r3 = armillary.Rod([[0, 0, 0], [1, 0, 0], [1, 0, 1]], edges=[[1, 0], [1, 2]])
    assert _same_quat(r3.quaternions[1], [0, 0, 0, 1])
    np.testing.assert_allclose(quat_rotate(r3.quaternions[0].astype(float), EZ), [-1, 0, 0], atol=1e-6)
    with pytest.raises(ValueError, match="twist_total must be zero"):
        r3.compute_frames(twist_total=1.0)


def test_compute_frames_after_point_edit():
    rod = armillary.Rod([[0, 0, 0], [1, 0, 0], [2, 0, 0]])
    rod.points = [[0, 0, 0], [0, 1, 0], [0, 2, 0]]
    with pytest.raises(ValueError, match="must align"):
        rod.validate()
    rod.compute_frames()
    np.testing.assert_allclose(quat_rotate(rod.quaternions[0].astype(float), EZ), [0, 1, 0], atol=1e-6)


# ---------------------------------------------------------------------- rigidities
def test_section_rigidities_material():
    E, nu, r = 1.0e6, 0.3, 0.05
    rod = armillary.Rod([[0, 0, 0], [1, 0, 0]], radius=r, youngs_modulus=E, poissons_ratio=nu)
    G = E / (2 * (1 + nu))
    A, I, J = math.pi * r**2, math.pi * r**4 / 4, math.pi * r**4 / 2
    np.testing.assert_allclose(rod.section_rigidities(), [E * A, 0.9 * G * A, E * I, G * J], rtol=1e-12)
    rod2 = armillary.Rod([[0, 0, 0], [1, 0, 0]], radius=r, youngs_modulus=E, shear_modulus=2.0e5)
    np.testing.assert_allclose(rod2.section_rigidities()[1], 0.9 * 2.0e5 * A)
    rod3 = armillary.Rod([[0, 0, 0], [1, 0, 0]], stretch_rigidity=1, shear_rigidity=2, bend_rigidity=3, twist_rigidity=4)
    assert rod3.section_rigidities() == (1.0, 2.0, 3.0, 4.0)
    assert armillary.Rod([[0, 0, 0], [1, 0, 0]]).section_rigidities() is None


def test_stiffness_is_rigidity_over_dual_length():
    rod = armillary.Rod([[0, 0, 0], [1, 0, 0], [3, 0, 0], [4, 0, 0]], radius=0.05, youngs_modulus=1e6, poissons_ratio=0.3)
    EA, kGA, EI, GJ = rod.section_rigidities()
    b = armillary.ModelBuilder()
    bodies, joints = b.add_rod(rod=rod, stretch_damping=2.0, bend_damping=0.5)
    assert len(bodies) == 3 and len(joints) == 2
    for j in joints:
        s = b.joint_qd_start[j]
        l_dual = 0.5 * (1.0 + 2.0)
        np.testing.assert_allclose(b.joint_target_ke[s : s + 6], np.array([kGA, kGA, EA, EI, EI, GJ]) / l_dual, rtol=1e-9)
        np.testing.assert_allclose(b.joint_target_kd[s : s + 6], [2.0, 2.0, 2.0, 0.5, 0.5, 0.5])
    # direct stiffness overrides the derived value per mode; damping defaults follow the docs
    b2 = armillary.ModelBuilder()
    _, joints = b2.add_rod(rod=rod, shear_stiffness=7.0, twist_damping=3.0)
    s = b2.joint_qd_start[joints[0]]
    np.testing.assert_allclose(b2.joint_target_ke[s : s + 6], [7.0, 7.0, EA / 1.5, EI / 1.5, EI / 1.5, GJ / 1.5], rtol=1e-9)
    np.testing.assert_allclose(b2.joint_target_kd[s : s + 6], [0, 0, 0, 0, 0, 3.0])


# ---------------------------------------------------------------------- add_joint_rod
def test_add_joint_rod_layout_and_defaults():
    b = armillary.ModelBuilder()
    b0 = b.add_link()
    q = (0.0, 0.0, math.sin(math.pi / 8), math.cos(math.pi / 8))
    b1 = b.add_link(xform=wp.transform((1.0, 0.0, 0.0), q))
    j = b.add_joint_rod(b0, b1, parent_xform=wp.transform((0.5, 0, 0), wp.quat_identity()),
                        child_xform=wp.transform((-0.5, 0, 0), wp.quat_identity()))  # fmt: skip
    assert b.joint_type[j] == int(armillary.JointType.ROD)
    s, c = b.joint_qd_start[j], b.joint_q_start[j]
    assert b.joint_target_ke[s : s + 6] == [1e5, 1e5, 1e5, 0, 0, 0]
    assert b.joint_target_kd[s : s + 6] == [0.0] * 6
    assert b.joint_target_mode[s : s + 6] == [int(armillary.JointTargetMode.NONE)] * 6
    np.testing.assert_allclose(b.joint_rest_q[c : c + 7], [0, 0, 0, *q], atol=1e-6)  # initial relative rotation
    assert b.joint_collision_filter_parent[j]
    j2 = b.add_joint_rod(b0, b1, rest_rotation=(0, 0, 0, 2), stretch_stiffness=3, stretch_damping=0.5,
                         bend_stiffness=4, twist_damping=1)  # fmt: skip
    s, c = b.joint_qd_start[j2], b.joint_q_start[j2]
    assert b.joint_target_ke[s : s + 6] == [3, 3, 3, 4, 4, 4]
    assert b.joint_target_kd[s : s + 6] == [0.5, 0.5, 0.5, 0, 0, 1]
    assert b.joint_rest_q[c : c + 7] == [0, 0, 0, 0, 0, 0, 1]
    with pytest.raises(ValueError, match="nonzero quaternion"):
        b.add_joint_rod(b0, b1, rest_rotation=(0, 0, 0, 0))
    with pytest.raises(ValueError, match="finite"):
        b.add_joint_rod(b0, b1, rest_rotation=(0, 0, math.nan, 1))
    with pytest.raises(ValueError, match="bend_stiffness"):
        b.add_joint_rod(b0, b1, bend_stiffness=-1)
    with pytest.raises(TypeError):
        b.add_joint_rod(b0, b1, foo=1)


# ---------------------------------------------------------------------- add_rod
def test_add_rod_chain_layout():
    rod = armillary.Rod(BENT)
    b = armillary.ModelBuilder()
    bodies, joints = b.add_rod(rod=rod, label="rope")
    assert bodies == [0, 1, 2] and joints == [1, 2]
    # the first segment gets a FREE joint to the world; free joint + rod joints form one articulation
    assert b.joint_type == [int(armillary.JointType.FREE)] + [int(armillary.JointType.ROD)] * 2
    assert b.joint_parent == [-1, 0, 1] and b.joint_child == [0, 1, 2]
    assert b.articulation_count == 1 and b.joint_articulation == [0, 0, 0]
    assert b.joint_label == ["rope_free_joint", "rope_cable_1", "rope_cable_2"]
    assert b.articulation_label == ["rope_articulation"] and b.curve_label == ["rope"]
    assert b.body_label[0] == "rope_edge_body_0" and b.shape_label[0] == "rope_edge_capsule_0"
    lengths = rod.segment_lengths
    for i in range(3):  # capsule along body +Z, half height = half the rest length, default radius 0.1 m
        np.testing.assert_allclose(b.shape_scale[i], [0.1, lengths[i] / 2, 0.0], rtol=1e-6)
        assert b.shape_type[i] == int(armillary.GeoType.CAPSULE)
        vol = math.pi * 0.01 * lengths[i] + 4 / 3 * math.pi * 0.001
        np.testing.assert_allclose(b.body_mass[i], 1000.0 * vol, rtol=1e-5)
    for k, j in enumerate(joints):
        np.testing.assert_allclose(list(b.joint_X_p[j])[:3], [0, 0, lengths[k] / 2], rtol=1e-6)
        np.testing.assert_allclose(list(b.joint_X_c[j])[:3], [0, 0, -lengths[k + 1] / 2], rtol=1e-6)
        s = b.joint_qd_start[j]
        assert b.joint_target_ke[s : s + 6] == [1e5, 1e5, 1e5, 0, 0, 0]
        c = b.joint_q_start[j]
        # rest rotation = initial relative frame rotation; the initial joint_q equals it
        q = rod.quaternions.astype(np.float64)
        assert _same_quat(b.joint_rest_q[c + 3 : c + 7], quat_mul(quat_conj(q[k]), q[k + 1]))
        assert b.joint_rest_q[c : c + 3] == [0.0, 0.0, 0.0]
        np.testing.assert_allclose(b.joint_q[c : c + 3], 0.0, atol=1e-6)
    assert sorted(b.shape_collision_filter_pairs) == [(0, 1), (1, 2)]
    b.finalize()


def test_add_rod_no_wrap_and_single_segment():
    b = armillary.ModelBuilder()
    bodies, joints = b.add_rod(rod=armillary.Rod([[0, 0, 0], [0, 0, 1], [0, 0, 2]]), wrap_in_articulation=False)
    assert (bodies, joints) == ([0, 1], [0])
    assert b.joint_type == [int(armillary.JointType.ROD)] and b.articulation_count == 0
    b = armillary.ModelBuilder()
    assert b.add_rod(rod=armillary.Rod([[0, 0, 0], [0, 0, 1]])) == ([0], [])
    assert b.joint_type == [int(armillary.JointType.FREE)] and b.articulation_count == 1


def test_rest_points_and_rest_straight():
    rod = armillary.Rod([[0, 0, 0], [1, 0, 0], [2, 0, 0]], rest_points=[[0, 0, 0], [0.5, 0, 0], [1.0, 0.5, 0]])
    b = armillary.ModelBuilder()
    _, (j,) = b.add_rod(rod=rod)
    np.testing.assert_allclose(list(b.body_q[1])[:3], [1.5, 0, 0], atol=1e-6)  # initial midpoint
    np.testing.assert_allclose(list(b.joint_X_p[j])[2], 0.25, rtol=1e-6)  # rest lengths
    np.testing.assert_allclose(list(b.joint_X_c[j])[2], -math.sqrt(0.5) / 2, rtol=1e-6)
    c = b.joint_q_start[j]
    # 45 degree rest bend about the world Z, i.e. about local -X of the first frame
    assert _same_quat(b.joint_rest_q[c + 3 : c + 7], [-math.sin(math.pi / 8), 0, 0, math.cos(math.pi / 8)])
    rod = armillary.Rod([[0, 0, 0], [1, 0, 0], [2, 1, 0], [2, 2, 1]], rest_straight=True)
    b = armillary.ModelBuilder()
    _, joints = b.add_rod(rod=rod)
    for j in joints:
        c = b.joint_q_start[j]
        assert b.joint_rest_q[c : c + 7] == [0, 0, 0, 0, 0, 0, 1]
        assert not _same_quat(b.joint_q[c + 3 : c + 7], [0, 0, 0, 1])  # the initial pose stays bent


def test_closed_chain():
    sq = [[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0], [0, 0, 0]]
    b = armillary.ModelBuilder()
    bodies, joints = b.add_rod(rod=armillary.Rod(sq, closed=True))
    assert bodies == [0, 1, 2, 3] and joints == [1, 2, 3, 4]
    assert (b.joint_parent[4], b.joint_child[4]) == (3, 0)
    assert b.joint_articulation == [0, 0, 0, 0, -1]  # the loop-closing joint stays outside
    for j in joints:
        c = b.joint_q_start[j]
        assert _same_quat(b.joint_rest_q[c + 3 : c + 7], [-math.sqrt(0.5), 0, 0, math.sqrt(0.5)])
    b.finalize()
    b = armillary.ModelBuilder()
    _, joints = b.add_rod(rod=armillary.Rod(sq, closed=True), wrap_in_articulation=False)
    assert list(zip(b.joint_parent, b.joint_child)) == [(0, 1), (1, 2), (2, 3), (3, 0)]
    # explicit rest points close the loop; the initial endpoints may differ
    armillary.Rod([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0.1, 0, 0]], rest_points=sq[:3] + [[0, 0, 0]], closed=True)


def test_explicit_graph():
    pts = [[0, 0, 0], [1, 0, 0], [2, 0, 0], [3, 0, 0]]
    rod = armillary.Rod(pts, edges=[[1, 0], [1, 2], [3, 2]], stretch_rigidity=1, shear_rigidity=2, bend_rigidity=3, twist_rigidity=4)
    b = armillary.ModelBuilder()
    _, joints = b.add_rod(rod=rod)
    # anchors follow the tree direction: parent +Z points into the junction, child +Z away from it
    xp, xc = _rows([list(b.joint_X_p[j]) for j in joints], 7), _rows([list(b.joint_X_c[j]) for j in joints], 7)
    np.testing.assert_allclose(xp[0], [0, 0, -0.5, 0, 1, 0, 0], atol=1e-6)
    np.testing.assert_allclose(xc[0], [0, 0, -0.5, 0, 0, 0, 1], atol=1e-6)
    np.testing.assert_allclose(xp[1], [0, 0, 0.5, 0, 0, 0, 1], atol=1e-6)
    np.testing.assert_allclose(xc[1], [0, 0, 0.5, 0, 1, 0, 0], atol=1e-6)
    for j in joints:
        s, c = b.joint_qd_start[j], b.joint_q_start[j]
        assert b.joint_target_ke[s : s + 6] == [2, 2, 1, 3, 3, 4]
        assert _same_quat(b.joint_rest_q[c + 3 : c + 7], [0, 0, 0, 1])  # straight at rest
    # cyclic graph: breadth-first spanning tree when wrapped (cycle joint omitted) ...
    tri = [[0, 0, 0], [1, 0, 0], [0, 1, 0]]
    b = armillary.ModelBuilder()
    _, joints = b.add_rod(rod=armillary.Rod(tri, edges=[[0, 1], [1, 2], [2, 0]]))
    assert [(b.joint_parent[j], b.joint_child[j]) for j in joints] == [(0, 2), (0, 1)]
    # ... every adjacency joint otherwise, and rigidity-derived stiffness needs wrap_in_articulation=False
    rig = dict(stretch_rigidity=1, shear_rigidity=2, bend_rigidity=3, twist_rigidity=4)
    cyc = armillary.Rod(tri, edges=[[0, 1], [1, 2], [2, 0]], **rig)
    with pytest.raises(ValueError, match="wrap_in_articulation=False"):
        armillary.ModelBuilder().add_rod(rod=cyc)
    b = armillary.ModelBuilder()
    _, joints = b.add_rod(rod=cyc, wrap_in_articulation=False)
    assert [(b.joint_parent[j], b.joint_child[j]) for j in joints] == [(0, 2), (0, 1), (1, 2)]
    s = b.joint_qd_start[joints[1]]
    l_dual = 0.5 * (1.0 + math.sqrt(2.0))
    np.testing.assert_allclose(b.joint_target_ke[s : s + 6], np.array([2, 2, 1, 3, 3, 4]) / l_dual, rtol=1e-9)
    # without wrapping, the caller must form articulations before a validated finalize
    with pytest.raises(ValueError, match="orphan"):
        b.finalize()
    b.finalize(skip_validation_joints=True)
    # two components: one free root and one articulation each
    b = armillary.ModelBuilder()
    _, joints = b.add_rod(rod=armillary.Rod([[0, 0, 0], [1, 0, 0], [2, 0, 0], [0, 5, 0], [0, 6, 0]],
                                            edges=[[0, 1], [1, 2], [3, 4]]), label="G")  # fmt: skip
    assert joints == [1] and b.articulation_label == ["G_articulation", "G_articulation_1"]
    assert b.joint_label == ["G_free_joint", "G_cable_1", "G_free_joint_1"]


def test_branched_graph():
    star = [[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]]
    edges = [[0, 1], [0, 2], [0, 3]]
    rod = armillary.Rod(star, edges=edges, stretch_rigidity=1, shear_rigidity=2, bend_rigidity=3, twist_rigidity=4)
    with pytest.raises(ValueError, match="branched graph"):
        armillary.ModelBuilder().add_rod(rod=rod)
    with pytest.raises(ValueError, match="branched graph"):
        armillary.ModelBuilder().add_rod(rod=rod, stretch_stiffness=1.0, bend_stiffness=1.0)
    b = armillary.ModelBuilder()
    _, joints = b.add_rod(rod=rod, stretch_stiffness=1, shear_stiffness=1, bend_stiffness=1, twist_stiffness=1)
    assert [(b.joint_parent[j], b.joint_child[j]) for j in joints] == [(0, 1), (0, 2)]
    assert sorted(b.shape_collision_filter_pairs) == [(0, 1), (0, 2), (1, 2)]  # junction filter
    b = armillary.ModelBuilder()
    b.add_rod(rod=armillary.Rod(star, edges=edges), junction_collision_filter=False)
    assert sorted(b.shape_collision_filter_pairs) == [(0, 1), (0, 2)]


def test_add_rod_argument_errors():
    with pytest.raises(TypeError, match="armillary.Rod"):
        armillary.ModelBuilder().add_rod(rod=[[0, 0, 0], [1, 0, 0]])
    with pytest.raises(ValueError, match="body_frame_origin"):
        armillary.ModelBuilder().add_rod(rod=armillary.Rod(BENT), body_frame_origin="end")
    with pytest.warns(DeprecationWarning):
        b = armillary.ModelBuilder()
        b.add_rod(rod=armillary.Rod([[0, 0, 0], [1, 0, 0], [3, 0, 0]]), body_frame_origin="start")
    np.testing.assert_allclose(list(b.body_q[1])[:3], [1, 0, 0], atol=1e-6)
    np.testing.assert_allclose(list(b.body_com[1]), [0, 0, 1], atol=1e-6)


# ---------------------------------------------------------------------- kinematics and solvers
def test_rod_fk_ik_round_trip():
    b = armillary.ModelBuilder()
    b.add_rod(rod=armillary.Rod(BENT))
    b.add_rod(rod=armillary.Rod([[0, 2, 0], [1, 2, 0], [1, 3, 0], [0, 3, 0], [0, 2, 0]], closed=True))
    model = b.finalize(device="cpu")
    state = model.state()
    q0 = model.joint_q.numpy().copy()
    # FK from the initial coordinates reproduces the authored body poses
    armillary.eval_fk(model, model.joint_q, model.joint_qd, state)
    body_q0 = model.body_q.numpy()
    got = state.body_q.numpy()
    for i in range(model.body_count):
        np.testing.assert_allclose(got[i, :3], body_q0[i, :3], atol=1e-5)
        assert _same_quat(got[i, 3:], body_q0[i, 3:], atol=1e-5)
    # perturb the coordinates, FK, then IK recovers them (quaternions up to sign)
    rng = np.random.default_rng(0)
    q = q0.copy()
    starts = model.joint_q_start.numpy()
    for j in range(model.joint_count):
        s = starts[j]
        q[s : s + 3] += rng.normal(scale=0.05, size=3)
        quat = q[s + 3 : s + 7] + rng.normal(scale=0.1, size=4)
        q[s + 3 : s + 7] = quat / np.linalg.norm(quat)
    joint_q = wp.array(q.astype(np.float32), dtype=wp.float32, device="cpu")
    armillary.eval_fk(model, joint_q, model.joint_qd, state)
    q_ik = wp.zeros_like(model.joint_q)
    qd_ik = wp.zeros_like(model.joint_qd)
    armillary.eval_ik(model, state, q_ik, qd_ik)
    got = q_ik.numpy()
    types = model.joint_type.numpy()
    art = model.joint_articulation.numpy()
    for j in range(model.joint_count):
        if art[j] < 0:  # the loop-closing joint is not a tree joint: FK does not honour it
            continue
        s = starts[j]
        np.testing.assert_allclose(got[s : s + 3], q[s : s + 3], atol=1e-4)
        assert _same_quat(got[s + 3 : s + 7], q[s + 3 : s + 7], atol=1e-4), (j, types[j])


def test_featherstone_rejects_rod_joints(registry):
    plugin = pytest.importorskip("armillary_solver_featherstone.plugin")
    registry.register(plugin)  # core tests run in an isolated registry
    b = armillary.ModelBuilder()
    b.add_rod(rod=armillary.Rod(BENT))
    model = b.finalize(device="cpu")
    with pytest.raises(ValueError, match="does not support joint type ROD"):
        armillary.solvers.SolverFeatherstone(model)


# ---------------------------------------------------------------------- attachments
def _attachment_builder():
    b = armillary.ModelBuilder()
    b.add_particle((0, 0, 1), (0, 0, 0), 1.0)
    b.add_particle((0, 0, 2), (0, 0, 0), 1.0)
    body = b.add_body(mass=1.0)
    b.add_attachment_particle_body(0, body, body_point=(0, 0, 0.5), stiffness=math.inf, damping=2.0, enabled=False)
    b.add_attachment_particle_body(1, body)
    return b


def test_attachment_arrays_and_validation():
    b = _attachment_builder()
    m = b.finalize(device="cpu")
    assert m.attachment_particle_body_count == 2
    assert m.attachment_particle_body_particle.dtype == wp.int32
    assert m.attachment_particle_body_particle.numpy().tolist() == [0, 1]
    assert m.attachment_particle_body_body.numpy().tolist() == [0, 0]
    np.testing.assert_allclose(m.attachment_particle_body_body_point.numpy(), [[0, 0, 0.5], [0, 0, 0]])
    assert m.attachment_particle_body_stiffness.numpy().tolist() == [math.inf, 1.0e4]
    assert m.attachment_particle_body_damping.numpy().tolist() == [2.0, 0.0]
    assert m.attachment_particle_body_enabled.numpy().tolist() == [False, True]
    assert m.attachment_particle_body_world.numpy().tolist() == [-1, -1]
    empty = armillary.ModelBuilder().finalize(device="cpu")
    assert empty.attachment_particle_body_count == 0 and empty.attachment_particle_body_particle is None

    with pytest.raises(IndexError, match="Particle index 5"):
        b.add_attachment_particle_body(5, 0)
    with pytest.raises(IndexError, match="Body index -1"):
        b.add_attachment_particle_body(0, -1)
    for kw, match in ((dict(stiffness=-1.0), "stiffness"), (dict(stiffness=math.nan), "stiffness"),
                      (dict(stiffness=1e40), "float32"), (dict(damping=math.inf), "damping"),
                      (dict(damping=-1.0), "damping"), (dict(body_point=(0, math.nan, 0)), "body_point")):  # fmt: skip
        with pytest.raises(ValueError, match=match):
            b.add_attachment_particle_body(0, 0, **kw)
    w = armillary.ModelBuilder()
    w.begin_world()
    w.add_particle((0, 0, 0), (0, 0, 0), 1.0)
    w.end_world()
    w.begin_world()
    body = w.add_body(mass=1.0)
    w.end_world()
    with pytest.raises(ValueError, match="different worlds"):
        w.add_attachment_particle_body(0, body)


def test_attachments_survive_replicate_and_add_builder():
    src = _attachment_builder()
    main = armillary.ModelBuilder()
    main.add_particle((0, 0, 0), (0, 0, 0), 1.0)
    main.add_body(mass=1.0)
    main.replicate(src, 2, spacing=(1.0, 0.0, 0.0))
    main.add_builder(src)
    m = main.finalize(device="cpu")
    assert m.attachment_particle_body_count == 6
    assert m.attachment_particle_body_particle.numpy().tolist() == [1, 2, 3, 4, 5, 6]
    assert m.attachment_particle_body_body.numpy().tolist() == [1, 1, 2, 2, 3, 3]
    assert m.attachment_particle_body_world.numpy().tolist() == [0, 0, 1, 1, -1, -1]
    assert m.attachment_particle_body_stiffness.numpy().tolist() == [math.inf, 1.0e4] * 3
    assert m.attachment_particle_body_enabled.numpy().tolist() == [False, True] * 3
    # rods survive replication as well (curves and joints shifted)
    rod_src = armillary.ModelBuilder()
    rod_src.add_rod(rod=armillary.Rod(BENT), label="r")
    main = armillary.ModelBuilder()
    main.replicate(rod_src, 2)
    assert main.curve_label == ["r", "r"]
    m = main.finalize(device="cpu")
    assert m.curve_count == 2 and m.curve_body_start.numpy().tolist() == [0, 3]
    assert m.curve_world.numpy().tolist() == [0, 1]

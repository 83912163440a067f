"""collapse_fixed_joints: bodies joined by FIXED joints merge into their parents."""

from __future__ import annotations

import math

import numpy as np
import pytest
import warp as wp

import armillary as newton
from armillary.sim.collapse import collapse_fixed_joints


def rot(axis, angle):
    return wp.quat_from_axis_angle(wp.vec3(*axis), angle)


def mat(q):
    x, y, z, w = (float(v) for v in q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])  # fmt: skip


I_A = np.diag([0.1, 0.2, 0.25])
I_B = np.array([[0.05, 0.01, 0.0], [0.01, 0.04, 0.0], [0.0, 0.0, 0.03]])


def build():
    """world -revolute-> a -fixed(offset, rotated)-> b -revolute-> c ; b has a shape."""
    b = newton.ModelBuilder()
    a = b.add_link(mass=2.0, com=(0.1, 0, 0), inertia=I_A, label="a")
    bb = b.add_link(mass=1.0, com=(0, 0.2, 0), inertia=I_B, label="b")
    c = b.add_link(mass=0.5, inertia=np.eye(3) * 0.01, label="c")
    b.add_shape_box(bb, xform=wp.transform(wp.vec3(0.0, 0.0, 0.1), wp.quat_identity()), hx=0.1, hy=0.1, hz=0.1,
                    cfg=newton.ModelBuilder.ShapeConfig(density=0.0), label="box_b")  # fmt: skip
    j0 = b.add_joint_revolute(-1, a, axis=newton.Axis.Z, label="j0")
    x_ab = wp.transform(wp.vec3(0.3, 0.0, 0.1), rot((1, 0, 0), 0.7))
    x_c = wp.transform(wp.vec3(0.0, 0.05, 0.0), rot((0, 0, 1), 0.2))
    j1 = b.add_joint_fixed(a, bb, parent_xform=x_ab, child_xform=x_c, label="weld")
    j2 = b.add_joint_revolute(bb, c, axis=newton.Axis.Y, parent_xform=wp.transform(wp.vec3(0.0, 0.0, 0.4), wp.quat_identity()),
                              label="j2")  # fmt: skip
    b.add_articulation([j0, j1, j2], label="art")
    return b, x_ab, x_c


def rel_pose(x_ab, x_c):
    t = wp.transform_multiply(x_ab, wp.transform_inverse(x_c))
    return np.asarray(t.p, dtype=float), mat(t.q)


def test_mass_com_inertia_parallel_axis():
    b, x_ab, x_c = build()
    info = collapse_fixed_joints(b)
    p, r = rel_pose(x_ab, x_c)
    m = 3.0
    c_a, c_b = np.array([0.1, 0, 0]), r @ np.array([0, 0.2, 0]) + p
    com = (2.0 * c_a + 1.0 * c_b) / m
    i_b = r @ I_B @ r.T

    def shift(i, mass, d):
        return i + mass * (d @ d * np.eye(3) - np.outer(d, d))

    inertia = shift(I_A, 2.0, c_a - com) + shift(i_b, 1.0, c_b - com)
    assert b.body_count == 2 and b.joint_count == 2
    assert b.body_label == ["a", "c"] and b.joint_label == ["j0", "j2"]
    assert b.body_mass[0] == pytest.approx(m)
    np.testing.assert_allclose(np.asarray(b.body_com[0]), com, atol=1e-6)
    np.testing.assert_allclose(np.asarray(b.body_inertia[0]).reshape(3, 3), inertia, atol=1e-6)
    assert sum(b.body_mass) == pytest.approx(3.5)
    assert info["merged_body_data"]["b"]["parent_body"] == "a"
    assert info["body_remap"] == {-1: -1, 0: 0, 2: 1}
    assert info["joint_remap"] == {0: 0, 2: 1}
    assert info["removed_joints"] == ["weld"]
    assert b.articulation_start == [0] and b.articulation_end == [2]


def test_shapes_and_child_joints_keep_world_poses():
    ref, _, _ = build()
    m_ref = ref.finalize(device="cpu")
    b, _, _ = build()
    b.collapse_fixed_joints()
    assert b.shape_body == [0]
    m = b.finalize(device="cpu")
    for q0, q2 in [(0.0, 0.0), (0.4, -1.1), (2.0, 0.7)]:
        s_ref, s = m_ref.state(), m.state()
        newton.eval_fk(m_ref, wp.array([q0, q2], dtype=wp.float32), m_ref.joint_qd, s_ref)
        newton.eval_fk(m, wp.array([q0, q2], dtype=wp.float32), m.joint_qd, s)
        bq_ref, bq = s_ref.body_q.numpy(), s.body_q.numpy()
        np.testing.assert_allclose(bq[1], bq_ref[2], atol=1e-5)  # c
        # the box: world pose through its old body b and through a now
        def world(tf_body, tf_shape):
            t = wp.transform_multiply(wp.transform(wp.vec3(*tf_body[:3]), wp.quat(*tf_body[3:])), tf_shape)
            return np.asarray(t.p)

        np.testing.assert_allclose(world(bq[0], b.shape_transform[0]), world(bq_ref[1], ref.shape_transform[0]), atol=1e-5)


def test_chain_into_world_and_static_shapes():
    b = newton.ModelBuilder()
    a = b.add_link(mass=1.0, inertia=np.eye(3), label="a")
    c = b.add_link(mass=1.0, inertia=np.eye(3), label="c")
    d = b.add_link(mass=1.0, inertia=np.eye(3), label="d")
    b.add_shape_sphere(c, radius=0.1)
    j0 = b.add_joint_fixed(-1, a, parent_xform=wp.transform(wp.vec3(0.0, 0.0, 1.0), wp.quat_identity()))
    j1 = b.add_joint_fixed(a, c, parent_xform=wp.transform(wp.vec3(0.5, 0.0, 0.0), wp.quat_identity()))
    j2 = b.add_joint_revolute(c, d, axis=newton.Axis.Z, parent_xform=wp.transform(wp.vec3(0.0, 0.2, 0.0), wp.quat_identity()))
    b.add_articulation([j0, j1, j2])
    info = b.collapse_fixed_joints()
    assert b.body_label == ["d"] and b.joint_count == 1 and b.joint_parent == [-1]
    np.testing.assert_allclose(np.asarray(b.joint_X_p[0])[:3], [0.5, 0.2, 1.0], atol=1e-6)
    assert b.shape_body == [-1]
    np.testing.assert_allclose(np.asarray(b.shape_transform[0])[:3], [0.5, 0.0, 1.0], atol=1e-6)
    assert info["body_merged_parent"] == {0: -1, 1: -1}
    assert info["merged_body_data"]["c"]["parent_body"] == "world"
    b.finalize(device="cpu")


def test_joints_to_keep_mimic_and_custom_attributes():
    b = newton.ModelBuilder()
    b.add_custom_attribute(newton.ModelBuilder.CustomAttribute(
        name="tag", dtype=wp.int32, frequency=newton.Model.AttributeFrequency.BODY))
    b.add_custom_attribute(newton.ModelBuilder.CustomAttribute(
        name="jtag", dtype=wp.int32, frequency=newton.Model.AttributeFrequency.JOINT))  # fmt: skip
    links = [b.add_link(mass=1.0, inertia=np.eye(3), label=f"l{i}", custom_attributes={"tag": 10 + i}) for i in range(5)]
    js = [b.add_joint_revolute(-1, links[0], axis=newton.Axis.Z, label="r0", custom_attributes={"jtag": 1})]
    js.append(b.add_joint_fixed(links[0], links[1], label="f1"))
    js.append(b.add_joint_revolute(links[1], links[2], axis=newton.Axis.Z, label="r2", custom_attributes={"jtag": 3}))
    js.append(b.add_joint_fixed(links[2], links[3], label="keep_me"))
    js.append(b.add_joint_revolute(links[3], links[4], axis=newton.Axis.Z, label="r4", custom_attributes={"jtag": 5}))
    b.add_articulation(js)
    b.set_joint_mimic(js[4], js[2], coeffs=(0.1, 2.0))
    b.collapse_fixed_joints(joints_to_keep=["keep_me"])
    assert b.joint_label == ["r0", "r2", "keep_me", "r4"]
    assert b.body_label == ["l0", "l2", "l3", "l4"]
    assert b.joint_mimic_joint == [-1, -1, -1, 1] and b.joint_mimic_coeffs[3] == (0.1, 2.0)
    m = b.finalize(device="cpu")
    assert m.tag.numpy().tolist() == [10, 12, 13, 14]
    assert m.jtag.numpy().tolist() == [1, 3, 0, 5]
    with pytest.raises(ValueError, match="unknown joint"):
        b.collapse_fixed_joints(joints_to_keep=["nope"])


def test_nothing_to_collapse_is_identity():
    b = newton.ModelBuilder()
    a = b.add_link(mass=1.0, inertia=np.eye(3))
    j = b.add_joint_revolute(-1, a, axis=newton.Axis.Z)
    b.add_articulation([j])
    info = b.collapse_fixed_joints()
    assert b.body_count == 1 and b.joint_count == 1 and info["removed_joints"] == []
    assert math.isclose(b.body_mass[0], 1.0)

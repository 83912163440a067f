"""joint_q / joint_qd layouts, world merging offsets and the finalized arrays (property tests)."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp
from hypothesis import given, settings
from hypothesis import strategies as st

import armillary as newton
from armillary import JointType

COORDS = {JointType.PRISMATIC: (1, 1), JointType.REVOLUTE: (1, 1), JointType.BALL: (4, 3), JointType.FIXED: (0, 0),
          JointType.FREE: (7, 6), JointType.DISTANCE: (7, 6)}  # fmt: skip
JOINT_KINDS = st.sampled_from(["prismatic", "revolute", "ball", "fixed", "free", "distance", "d6"])


def _add(b, kind, parent, child, d6=(1, 1)):
    cfg = newton.ModelBuilder.JointDofConfig
    if kind == "prismatic":
        return b.add_joint_prismatic(parent, child, axis=(0, 1, 0)), 1, 1, (1, 0)
    if kind == "revolute":
        return b.add_joint_revolute(parent, child, axis=newton.Axis.Z), 1, 1, (0, 1)
    if kind == "ball":
        return b.add_joint_ball(parent, child), 4, 3, (0, 3)
    if kind == "fixed":
        return b.add_joint_fixed(parent, child), 0, 0, (0, 0)
    if kind == "free":
        return b.add_joint_free(child, parent=parent), 7, 6, (3, 3)
    if kind == "distance":
        return b.add_joint_distance(parent, child), 7, 6, (3, 3)
    lin = [cfg(axis=a) for a in ((1, 0, 0), (0, 1, 0), (0, 0, 1))[: d6[0]]]
    ang = [cfg(axis=a) for a in ((1, 0, 0), (0, 1, 0), (0, 0, 1))[: d6[1]]]
    return b.add_joint_d6(parent, child, linear_axes=lin, angular_axes=ang), d6[0] + d6[1], d6[0] + d6[1], d6


def _random_robot(kinds, d6s, parents_choice):
    b = newton.ModelBuilder()
    expected = []
    joints = []
    for i, kind in enumerate(kinds):
        link = b.add_link(mass=1.0, inertia=np.eye(3) * 0.1)
        b.add_shape_sphere(link, radius=0.1)
        parent = -1 if i == 0 else parents_choice[i] % i
        j, nq, nqd, dim = _add(b, kind, parent, link, d6s[i])
        joints.append(j)
        expected.append((nq, nqd, dim))
    b.add_articulation(joints, label="robot")
    return b, expected


robots = st.integers(1, 8).flatmap(
    lambda n: st.tuples(
        st.lists(JOINT_KINDS, min_size=n, max_size=n),
        st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=n, max_size=n),
        st.lists(st.integers(0, 100), min_size=n, max_size=n),
    )
)


@settings(max_examples=40, deadline=None)
@given(robots)
def test_q_qd_start_layout(spec):
    kinds, d6s, parents = spec
    b, expected = _random_robot(kinds, d6s, parents)
    m = b.finalize(device="cpu")
    q_start = m.joint_q_start.numpy()
    qd_start = m.joint_qd_start.numpy()
    dof_dim = m.joint_dof_dim.numpy()
    assert len(q_start) == m.joint_count + 1 and len(qd_start) == m.joint_count + 1
    assert q_start[0] == 0 and qd_start[0] == 0
    assert np.array_equal(np.diff(q_start), [e[0] for e in expected])
    assert np.array_equal(np.diff(qd_start), [e[1] for e in expected])
    assert [tuple(r) for r in dof_dim] == [e[2] for e in expected]
    assert m.joint_coord_count == q_start[-1] == len(m.joint_q) == len(m.joint_rest_q) == len(m.joint_target_q)
    assert m.joint_dof_count == qd_start[-1] == len(m.joint_qd) == len(m.joint_axis) == len(m.joint_limit_lower)
    assert np.array_equal(m.joint_target_q_start.numpy(), q_start)
    assert m.max_dofs_per_articulation == m.joint_dof_count
    # joint_q initial values: identity quaternions for BALL, free poses for FREE/DISTANCE
    jq = m.joint_q.numpy()
    rest = m.joint_rest_q.numpy()
    for j, t in enumerate(m.joint_type.numpy()):
        s = q_start[j]
        if t == JointType.BALL:
            assert np.allclose(jq[s : s + 4], [0, 0, 0, 1]) and np.allclose(rest[s : s + 4], [0, 0, 0, 1])
        if t in (JointType.FREE, JointType.DISTANCE):
            assert np.allclose(rest[s : s + 7], [0, 0, 0, 0, 0, 0, 1])
            assert np.linalg.norm(jq[s + 3 : s + 7]) == pytest.approx(1.0, abs=1e-5)
    # axes are unit vectors, ancestors point to the parent's joint
    assert np.allclose(np.linalg.norm(m.joint_axis.numpy(), axis=1), 1.0) if m.joint_dof_count else True
    parent = m.joint_parent.numpy()
    child = m.joint_child.numpy()
    anc = m.joint_ancestor.numpy()
    for j in range(m.joint_count):
        if parent[j] < 0:
            assert anc[j] == -1
        else:
            assert child[anc[j]] == parent[j]


worlds = st.tuples(st.integers(1, 4), st.integers(0, 5), st.booleans(), st.booleans())


@settings(max_examples=25, deadline=None)
@given(robots, worlds)
def test_replicate_and_add_world_offsets(spec, wspec):
    kinds, d6s, parents = spec
    count, n_global, use_add_world, ground = wspec
    robot, _ = _random_robot(kinds, d6s, parents)
    robot.set_joint_mimic  # noqa: B018 - exists
    scene = newton.ModelBuilder()
    if ground:
        scene.add_ground_plane()
    if use_add_world:
        for _ in range(count):
            scene.add_world(robot, label_prefix="env")
    else:
        scene.replicate(robot, world_count=count, spacing=(1.0, 2.0, 0.0))
    m = scene.finalize(device="cpu")
    r = robot.finalize(device="cpu")
    nb, nj, ns, nd, nc = r.body_count, r.joint_count, r.shape_count, r.joint_dof_count, r.joint_coord_count
    g = 1 if ground else 0
    assert m.world_count == count
    assert m.body_count == nb * count and m.joint_count == nj * count and m.shape_count == ns * count + g
    assert m.joint_dof_count == nd * count and m.joint_coord_count == nc * count
    assert m.articulation_count == count
    parent, child = m.joint_parent.numpy(), m.joint_child.numpy()
    rp, rc = r.joint_parent.numpy(), r.joint_child.numpy()
    for k in range(count):
        sl = slice(k * nj, (k + 1) * nj)
        assert np.array_equal(child[sl], rc + k * nb)
        assert np.array_equal(parent[sl], np.where(rp >= 0, rp + k * nb, -1))
        assert np.array_equal(m.joint_q_start.numpy()[sl], r.joint_q_start.numpy()[:-1] + k * nc)
        assert np.array_equal(m.joint_qd_start.numpy()[sl], r.joint_qd_start.numpy()[:-1] + k * nd)
        assert np.array_equal(m.joint_articulation.numpy()[sl], np.full(nj, k))
        assert np.all(m.body_world.numpy()[k * nb : (k + 1) * nb] == k)
        assert np.all(m.joint_world.numpy()[sl] == k)
        sb = m.shape_body.numpy()[g + k * ns : g + (k + 1) * ns]
        assert np.array_equal(sb, r.shape_body.numpy() + k * nb)
    assert np.array_equal(m.articulation_start.numpy(), np.append(np.arange(count) * nj, count * nj))
    assert np.array_equal(m.body_world_start.numpy(), np.append(np.arange(count + 1) * nb, count * nb))
    expect_shape_start = np.append(np.arange(count + 1) * ns + g, count * ns + g)
    assert np.array_equal(m.shape_world_start.numpy(), expect_shape_start)
    pairs = {(a - g, b - g) for a, b in m.shape_collision_filter_pairs}
    expect = {(a + k * ns, b + k * ns) for k in range(count) for a, b in r.shape_collision_filter_pairs}
    assert pairs == expect
    assert m.gravity.shape == (count + 1,)  # one row per world and the global world's last
    if use_add_world:
        assert m.body_label[0].startswith("env/")


def test_replicate_spacing_and_copy_count():
    robot = newton.ModelBuilder()
    link = robot.add_link()
    robot.add_shape_sphere(link)
    j = robot.add_joint_free(link)
    robot.add_articulation([j], label="robot")
    b = newton.ModelBuilder()
    b.add_ground_plane()
    b.replicate(robot, 3, spacing=(1.0, 0.0, 0.0))
    m = b.finalize(device="cpu")
    assert np.allclose(m.body_q.numpy()[:, :3], [[-1, 0, 0], [0, 0, 0], [1, 0, 0]])
    assert np.allclose(m.joint_q.numpy().reshape(-1, 7)[:, :3], [[-1, 0, 0], [0, 0, 0], [1, 0, 0]])
    assert m.articulation_label == ["robot"] * 3
    b2 = newton.ModelBuilder()
    b2.replicate(robot, copy_count=2)
    assert b2.world_count == 2
    with pytest.raises(ValueError, match="world_count"):
        newton.ModelBuilder().replicate(robot)


def test_add_builder_xform_and_worlds():
    robot = newton.ModelBuilder()
    link = robot.add_link()
    j = robot.add_joint_free(link)
    robot.add_articulation([j], label="robot")
    arm = newton.ModelBuilder()
    a = arm.add_link()
    ja = arm.add_joint_revolute(-1, a, parent_xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()))
    arm.add_articulation([ja])
    b = newton.ModelBuilder()
    b.add_world(robot)
    b.add_world(robot, label_prefix="foo")
    b.add_builder(robot, xform=wp.transform((0.0, 0.0, 5.0), wp.quat_identity()))
    b.add_builder(arm, xform=wp.transform((1.0, 0.0, 0.0), wp.quat_identity()))
    assert b.body_world == [0, 1, -1, -1]
    assert b.body_label[:3] == ["body_0", "foo/body_0", "body_0"]
    assert b.articulation_label[1] == "foo/robot"
    assert list(b.body_q[2])[:3] == [0.0, 0.0, 5.0]
    assert b.joint_q[14:17] == [0.0, 0.0, 5.0]
    assert np.allclose(list(b.joint_X_p[3])[:3], [1.0, 0.0, 1.0])  # world-attached revolute moved via X_p
    assert b.current_world == -1
    w = b.begin_world()
    assert b.current_world == w == 2
    with pytest.raises(RuntimeError):
        b.begin_world()
    with pytest.raises(RuntimeError):
        b.add_world(robot)
    b.add_builder(robot)
    b.end_world()
    with pytest.raises(RuntimeError):
        b.end_world()
    assert b.body_world[-1] == 2
    m = b.finalize(device="cpu")
    assert m.world_count == 3
    assert np.array_equal(m.body_world_start.numpy(), [0, 1, 4, 5, 5])


def test_begin_world_gravity_and_global_entities():
    b = newton.ModelBuilder()
    b.add_ground_plane()
    b.begin_world(gravity=(0.0, 0.0, -1.0))
    body = b.add_body()
    b.add_shape_sphere(body)
    b.end_world()
    b.begin_world()
    b.end_world()
    m = b.finalize(device="cpu")
    assert np.allclose(m.gravity.numpy(), [[0, 0, -1], [0, 0, -9.81], [0, 0, -9.81]])  # last row: world -1
    assert m.shape_world.numpy().tolist() == [-1, 0]
    m.set_gravity((0.0, 0.0, -2.0), world=1)
    assert np.allclose(m.gravity.numpy()[1], [0, 0, -2])


def test_no_worlds_model_has_one_world():
    b = newton.ModelBuilder()
    b.add_body()
    m = b.finalize(device="cpu")
    assert m.world_count == 1
    assert m.body_world.numpy().tolist() == [-1]
    assert m.gravity.shape == (1,)
    assert np.array_equal(m.body_world_start.numpy(), [1, 1, 1])


def test_labels_and_defaults():
    b = newton.ModelBuilder()
    b.add_ground_plane()
    r = b.add_body(label="base")
    s = b.add_shape_box(r)
    c = b.add_link()
    j = b.add_joint_revolute(r, c)
    b.add_articulation([j])
    with pytest.raises(ValueError, match=r"Joint 1 \('joint_2'\).*articulation 0"):
        b.finalize(device="cpu")  # the second articulation hangs from the first one
    m = b.finalize(device="cpu", skip_validation_joints=True)
    assert m.body_label == ["base", "body_1"]
    assert m.joint_label == ["base_free_joint", "joint_2"]
    assert m.articulation_label == ["base_articulation", "articulation_1"]
    assert m.shape_label == ["ground_plane", f"shape_{s}"]
    assert m.shape_scale.numpy()[0].tolist() == [0, 0, 0]
    assert m.shape_collision_radius.numpy()[0] == pytest.approx(1e6)
    assert m.shape_flags.numpy().tolist() == [7, 7]
    assert m.shape_gap.numpy().tolist() == pytest.approx([0.1, 0.1])
    assert m.joint_limit_ke.numpy().tolist() == [0.0] * 6 + [1e4]
    assert m.joint_effort_limit.numpy()[0] == pytest.approx(1e6)
    assert m.body_flags.numpy().tolist() == [1, 1]
    assert m.joint_enabled.numpy().all()


def test_collision_filter_pairs_automatic():
    b = newton.ModelBuilder()
    a = b.add_link()
    s0 = b.add_shape_sphere(a)
    s1 = b.add_shape_box(a)  # same body
    c = b.add_link()
    j0 = b.add_joint_revolute(-1, a)
    j1 = b.add_joint_revolute(a, c)
    s2 = b.add_shape_sphere(c)  # added after the joint
    d = b.add_link()
    s3 = b.add_shape_sphere(d, cfg=newton.ModelBuilder.ShapeConfig(collision_filter_parent=False))
    j2 = b.add_joint_revolute(c, d)
    e = b.add_link()
    s4 = b.add_shape_sphere(e)
    j3 = b.add_joint_revolute(d, e, collision_filter_parent=False)
    b.add_articulation([j0, j1, j2, j3])
    m = b.finalize(device="cpu")
    pairs = m.shape_collision_filter_pairs
    assert (s0, s1) in pairs and (s0, s2) in pairs and (s1, s2) in pairs
    assert (s2, s3) not in pairs and (s3, s4) not in pairs
    assert all(a_ < b_ for a_, b_ in pairs)
    cp = {tuple(p) for p in m.shape_contact_pairs.tolist()}
    assert (s2, s3) in cp and (s0, s1) not in cp


def test_state_control_contacts():
    b = newton.ModelBuilder()
    b.add_ground_plane()
    body = b.add_body(xform=wp.transform((0.0, 0.0, 2.0), wp.quat_identity()))
    b.add_shape_sphere(body, radius=0.5)
    a = b.add_link()
    ja = b.add_joint_ball(-1, a)
    b.add_articulation([ja])
    m = b.finalize(device="cpu", requires_grad=True)
    s0, s1 = m.state(), m.state(requires_grad=False)
    assert s0.requires_grad and s0.body_q.requires_grad and not s1.body_q.requires_grad
    assert s0.body_f.shape == (2,) and s0.particle_q is None
    s0.body_f.fill_(1.0)
    s0.clear_forces()
    assert np.all(s0.body_f.numpy() == 0)
    s0.joint_q.fill_(3.0)
    s1.assign(s0)
    assert np.all(s1.joint_q.numpy() == 3.0)
    s1.joint_q = None
    with pytest.raises(ValueError, match="joint_q"):
        s0.assign(s1)
    c = m.control()
    assert c.joint_f.shape == (9,) and c.joint_target_q.shape == (11,)
    c.joint_f.fill_(2.0)
    c.joint_target_q.fill_(5.0)
    c.clear(m)
    assert np.all(c.joint_f.numpy() == 0)
    assert np.allclose(c.joint_target_q.numpy(), m.joint_target_q.numpy())
    contacts = m.contacts()
    assert contacts.rigid_contact_max >= 1000 and contacts.soft_contact_max == 0
    for name in ("rigid_contact_shape0", "rigid_contact_shape1", "rigid_contact_point0", "rigid_contact_point1",
                 "rigid_contact_offset0", "rigid_contact_offset1", "rigid_contact_normal", "rigid_contact_margin0",
                 "rigid_contact_margin1"):  # fmt: skip
        assert len(getattr(contacts, name)) == contacts.rigid_contact_max
    assert contacts.rigid_contact_count.shape == (1,)
    ct = newton.Contacts(10, 5, device="cpu", requested_attributes={"force"})
    assert ct.soft_contact_particle.shape == (5,) and ct.soft_contact_indices.shape == (5,)
    assert ct.force.shape == (15,)
    ct.clear()
    assert ct.contact_generation.numpy()[0] == 1


def test_model_enums_and_importer_hooks(monkeypatch):
    assert newton.Model.AttributeFrequency.BODY == 5
    assert newton.Model.AttributeAssignment.STATE == 1
    b = newton.ModelBuilder()
    calls = []
    import armillary.plugins as plugins

    monkeypatch.setattr(plugins, "import_into", lambda builder, fmt, src, **kw: calls.append((fmt, src, kw)) or "ok", raising=False)
    monkeypatch.setattr(plugins, "importer_method", lambda builder, name: (lambda *a, **k: calls.append((name, a, k))), raising=False)
    assert b.add_mjcf("x.xml", floating=True) == "ok"
    b.add_urdf("r.urdf")
    b.add_usd("s.usd")
    b.add_gltf("m.gltf")
    assert [c[0] for c in calls] == ["mjcf", "urdf", "usd", "add_gltf"]
    with pytest.raises(AttributeError):
        b.not_a_method  # noqa: B018


def test_deprecated_target_aliases():
    cfg = newton.ModelBuilder.JointDofConfig
    with pytest.warns(DeprecationWarning):
        c = cfg(target_pos=0.3, target_vel=0.1)
    assert c.target_q == 0.3 and c.target_qd == 0.1
    with pytest.warns(DeprecationWarning):
        assert c.target_pos == 0.3
    b = newton.ModelBuilder()
    link = b.add_link()
    with pytest.warns(DeprecationWarning):
        b.add_joint_revolute(-1, link, axis=(0, 0, 2.0), target_pos=0.4, target_vel=0.2)
    assert b.joint_target_q[-1] == pytest.approx(0.4) and b.joint_target_qd[-1] == pytest.approx(0.2)
    assert list(b.joint_axis[-1]) == [0.0, 0.0, 1.0]

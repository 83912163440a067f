"""Options and features of the URDF importer on small generated files."""

from __future__ import annotations

import math

import numpy as np
import pytest
import warp as wp

import armillary as newton
from armillary_importer_urdf.importer import URDFImportError

INERTIAL = '<inertial><mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial>'


def chain(n=3, joint="revolute", extra=None, name="r"):
    links = "".join(f'<link name="l{i}">{INERTIAL}</link>' for i in range(n + 1))
    joints = ""
    for i in range(n):
        e = (extra or {}).get(i, "")
        joints += (
            f'<joint name="j{i}" type="{joint}"><origin xyz="0 0 0.5"/><parent link="l{i}"/><child link="l{i + 1}"/>'
            f'<axis xyz="0 1 0"/><limit lower="-2" upper="2" effort="5" velocity="3"/>{e}</joint>'
        )
    return f'<robot name="{name}">{links}{joints}</robot>'


def test_mimic_chain_composed_into_direct_references():
    extra = {1: '<mimic joint="j0" multiplier="2" offset="0.1"/>', 2: '<mimic joint="j1" multiplier="-3" offset="0.5"/>'}
    b = newton.ModelBuilder()
    b.add_urdf(chain(3, extra=extra))
    j0, j1, j2 = (b.joint_label.index(f"j{i}") for i in range(3))
    assert b.joint_mimic_joint[j1] == j0 and b.joint_mimic_coeffs[j1] == pytest.approx((0.1, 2.0))
    # q2 = 0.5 - 3 * (0.1 + 2 q0) = 0.2 - 6 q0
    assert b.joint_mimic_joint[j2] == j0 and b.joint_mimic_coeffs[j2] == pytest.approx((0.2, -6.0))
    model = b.finalize(device="cpu")
    state = model.state()
    q = np.zeros(model.joint_coord_count, dtype=np.float32)
    q[b.joint_q_start[j0]] = 0.3
    state.joint_q.assign(q)
    newton.eval_mimic(model, state)
    got = state.joint_q.numpy()
    assert got[b.joint_q_start[j2]] == pytest.approx(0.2 - 6 * 0.3, abs=1e-6)


def test_mimic_cycle_is_an_error():
    extra = {0: '<mimic joint="j1"/>', 1: '<mimic joint="j0"/>'}
    with pytest.raises(URDFImportError, match="cycle"):
        newton.ModelBuilder().add_urdf(chain(2, extra=extra))


def test_joint_types_and_planar():
    text = (
        f'<robot name="r"><link name="a">{INERTIAL}</link><link name="b">{INERTIAL}</link>'
        f'<link name="c">{INERTIAL}</link><link name="d">{INERTIAL}</link>'
        '<joint name="cont" type="continuous"><parent link="a"/><child link="b"/><axis xyz="0 0 2"/>'
        '<dynamics damping="0.5" friction="0.2"/></joint>'
        '<joint name="pl" type="planar"><parent link="b"/><child link="c"/><axis xyz="0 0 1"/></joint>'
        '<joint name="fl" type="floating"><parent link="c"/><child link="d"/></joint></robot>'
    )
    b = newton.ModelBuilder()
    b.add_urdf(text)
    jt = newton.JointType
    assert b.joint_type == [jt.FIXED, jt.REVOLUTE, jt.D6, jt.FREE]
    assert b.joint_dof_dim[2] == (2, 1)
    d = b.joint_qd_start[1]
    np.testing.assert_allclose(np.asarray(b.joint_axis[d]), [0, 0, 1])
    assert b.joint_damping[d] == 0.5 and b.joint_friction[d] == pytest.approx(0.2)
    assert b.joint_limit_lower[d] <= -1e9  # continuous: unlimited
    ax = [np.asarray(b.joint_axis[b.joint_qd_start[2] + k]) for k in range(3)]
    assert abs(ax[0] @ [0, 0, 1]) < 1e-6 and abs(ax[1] @ [0, 0, 1]) < 1e-6
    np.testing.assert_allclose(ax[2], [0, 0, 1])
    b.finalize(device="cpu")


def test_floating_xform_and_base_joint():
    tf = wp.transform(wp.vec3(1.0, 2.0, 3.0), wp.quat_from_axis_angle(wp.vec3(0.0, 0.0, 1.0), 0.3))
    b = newton.ModelBuilder()
    b.add_urdf(chain(1), floating=True, xform=tf)
    assert b.joint_type[0] == newton.JointType.FREE and b.joint_label[0] == "floating_base"
    np.testing.assert_allclose(b.joint_q[:7], list(tf), atol=1e-6)
    np.testing.assert_allclose(np.asarray(b.body_q[1])[:3], [1, 2, 3.5], atol=1e-6)
    b2 = newton.ModelBuilder()
    lin = [newton.ModelBuilder.JointDofConfig(axis=newton.Axis.X)]
    b2.add_urdf(chain(1), base_joint={"joint_type": newton.JointType.D6, "linear_axes": lin})
    assert b2.joint_type[0] == newton.JointType.D6 and b2.joint_dof_count == 2
    b2.finalize(device="cpu")


def test_parent_body_extends_last_articulation():
    b = newton.ModelBuilder()
    cart = b.add_link(mass=1.0, inertia=np.eye(3) * 0.1, label="cart")
    j = b.add_joint_prismatic(-1, cart, axis=newton.Axis.X)
    b.add_articulation([j], label="cart")
    b.add_urdf(chain(2), parent_body=cart, xform=wp.transform(wp.vec3(0.0, 0.0, 0.25), wp.quat_identity()))
    assert b.articulation_count == 1 and b.articulation_end[0] == b.joint_count
    root = b.joint_label.index("fixed_base")
    assert b.joint_parent[root] == cart
    model = b.finalize(device="cpu")
    state = model.state()
    q = model.joint_q.numpy()
    q[0] = 1.0
    newton.eval_fk(model, wp.array(q, dtype=wp.float32), model.joint_qd, state)
    np.testing.assert_allclose(state.body_q.numpy()[b.body_label.index("l2"), :3], [1.0, 0, 1.25], atol=1e-6)


def test_scale():
    text = (
        f'<robot name="r"><link name="a"><inertial><mass value="2"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" '
        'iyz="0"/></inertial><collision><origin xyz="0 0 1"/><geometry><box size="1 2 3"/></geometry></collision>'
        '</link><link name="b">' + INERTIAL + '</link><joint name="p" type="prismatic"><origin xyz="1 0 0"/>'
        '<parent link="a"/><child link="b"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint></robot>'
    )
    b = newton.ModelBuilder()
    b.add_urdf(text, scale=2.0)
    assert b.body_mass[0] == 2.0
    np.testing.assert_allclose(np.asarray(b.body_inertia[0]).reshape(3, 3), 4 * np.eye(3))
    assert b.shape_scale[0] == pytest.approx((1.0, 2.0, 3.0))
    np.testing.assert_allclose(np.asarray(b.shape_transform[0])[:3], [0, 0, 2])
    np.testing.assert_allclose(np.asarray(b.joint_X_p[1])[:3], [2, 0, 0])
    assert b.joint_limit_upper[0] == 2.0


def test_shapes_primitives_visual_collision_and_mass():
    text = (
        '<robot name="r"><link name="a">' + INERTIAL + '<visual><geometry><sphere radius="0.1"/></geometry></visual>'
        '<collision><geometry><cylinder radius="0.1" length="0.4"/></geometry></collision></link>'
        '<link name="b"><collision><geometry><box size="0.1 0.1 0.1"/></geometry></collision></link>'
        '<joint name="j" type="fixed"><parent link="a"/><child link="b"/></joint></robot>'
    )
    b = newton.ModelBuilder()
    b.add_urdf(text)
    g = newton.GeoType
    assert b.shape_type == [g.SPHERE, g.CYLINDER, g.BOX]
    flags = newton.ShapeFlags
    assert not b.shape_flags[0] & flags.COLLIDE_SHAPES and b.shape_flags[0] & flags.VISIBLE
    assert b.shape_flags[1] & flags.COLLIDE_SHAPES and not b.shape_flags[1] & flags.VISIBLE
    assert b.shape_scale[1] == pytest.approx((0.1, 0.2, 0.0))
    assert b.body_mass[0] == 1.0  # <inertial> wins over shape density
    assert b.body_mass[1] == pytest.approx(1.0)  # no <inertial>: box 0.001 m^3 * 1000 kg/m^3


def _write_mesh(path, fmt):
    import trimesh

    m = trimesh.creation.box(extents=(0.2, 0.2, 0.2))
    m.export(str(path), file_type=fmt)


@pytest.mark.parametrize("fmt", ["stl", "obj", "dae"])
def test_relative_and_package_mesh_paths(tmp_path, fmt, monkeypatch):
    pkg = tmp_path / "src" / "mypkg"
    (pkg / "meshes").mkdir(parents=True)
    (pkg / "urdf").mkdir()
    _write_mesh(pkg / "meshes" / f"box.{fmt}", fmt)
    text = (
        f'<robot name="r"><link name="a">{INERTIAL}'
        f'<collision><geometry><mesh filename="../meshes/box.{fmt}" scale="2 1 -1"/></geometry></collision>'
        f'<visual><geometry><mesh filename="package://mypkg/meshes/box.{fmt}"/></geometry></visual></link></robot>'
    )
    f = pkg / "urdf" / "r.urdf"
    f.write_text(text)
    b = newton.ModelBuilder()
    b.add_urdf(str(f))  # relative path and package:// found by searching upward
    assert b.shape_count == 2 and all(t == newton.GeoType.MESH for t in b.shape_type)
    coll = next(i for i in range(2) if b.shape_flags[i] & newton.ShapeFlags.COLLIDE_SHAPES)
    assert b.shape_scale[coll] == pytest.approx((2.0, 1.0, 1.0))  # mirror baked into the vertices
    lo, hi = b.shape_source[coll].aabb()
    np.testing.assert_allclose(hi - lo, [0.2, 0.2, 0.2], atol=1e-6)
    b.finalize(device="cpu")
    # outside the tree: the string form finds the package through ROS_PACKAGE_PATH / a resolver
    text_abs = text.replace("../meshes/", f"package://mypkg/meshes/")
    with pytest.raises(URDFImportError, match="not found"):
        newton.ModelBuilder().add_urdf(text_abs)
    monkeypatch.setenv("ROS_PACKAGE_PATH", str(tmp_path / "src"))
    newton.ModelBuilder().add_urdf(text_abs)
    monkeypatch.delenv("ROS_PACKAGE_PATH")
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(tmp_path / "nowhere"))
    seen = []

    def resolver(uri):
        seen.append(uri)
        return pkg / uri.split("mypkg/", 1)[1]

    bb = newton.ModelBuilder()
    bb.add_urdf(text_abs, package_resolver=resolver)
    assert bb.shape_count == 2 and len(seen) == 2
    bb = newton.ModelBuilder()
    bb.add_urdf(text_abs, package_dirs=[str(tmp_path / "src")])
    assert bb.shape_count == 2


def test_corrupt_mesh_file_is_a_clean_error(tmp_path):
    (tmp_path / "bad.stl").write_bytes(b"solid x\nfacet normal garbage\n")
    text = f'<robot name="r"><link name="a"><collision><geometry><mesh filename="bad.stl"/></geometry></collision></link></robot>'
    p = tmp_path / "r.urdf"
    p.write_text(text)
    b = newton.ModelBuilder()
    with pytest.raises(URDFImportError, match=r"r\.urdf:1: <mesh>"):
        b.add_urdf(str(p))
    assert b.shape_count == 0


def test_enable_self_collisions_false_filters_pairs():
    text = chain(2).replace(
        "</link>", '<collision><geometry><sphere radius="0.05"/></geometry></collision></link>'
    )
    on, off = newton.ModelBuilder(), newton.ModelBuilder()
    on.add_urdf(text)
    off.add_urdf(text, enable_self_collisions=False)
    assert (0, 2) not in on.shape_collision_filter_pairs  # l0 and l2 are not jointed
    assert (0, 2) in off.shape_collision_filter_pairs and (0, 1) in off.shape_collision_filter_pairs


def test_custom_attributes_read_with_transformer():
    b = newton.ModelBuilder()
    Freq = newton.Model.AttributeFrequency
    b.add_custom_attribute(newton.ModelBuilder.CustomAttribute(
        name="color_id", dtype=wp.int32, frequency=Freq.BODY, namespace="test", urdf_attribute_name="color_id"))
    b.add_custom_attribute(newton.ModelBuilder.CustomAttribute(
        name="gear", dtype=wp.float32, frequency=Freq.JOINT_DOF, namespace="test", urdf_attribute_name="gear",
        urdf_value_transformer=lambda s, ctx: 10.0 * float(s)))
    b.add_custom_attribute(newton.ModelBuilder.CustomAttribute(
        name="spring_ref", dtype=wp.float32, frequency=Freq.JOINT_DOF, namespace="test",
        urdf_attribute_name="spring_reference"))  # fmt: skip
    text = chain(2).replace('<link name="l1">', '<link name="l1" color_id="7">')
    text = text.replace('<joint name="j1" type="revolute">', '<joint name="j1" type="revolute" gear="0.5">')
    text = text.replace('effort="5" velocity="3"/></joint>', 'effort="5" velocity="3"/><dynamics spring_reference="0.3"/></joint>', 1)
    b.add_urdf(text)
    model = b.finalize(device="cpu")
    assert model.test.color_id.numpy()[b.body_label.index("l1")] == 7
    d1 = b.joint_qd_start[b.joint_label.index("j1")]
    assert model.test.gear.numpy()[d1] == pytest.approx(5.0)
    d0 = b.joint_qd_start[b.joint_label.index("j0")]
    assert model.test.spring_ref.numpy()[d0] == pytest.approx(0.3)


def test_joint_ordering_options():
    text = (
        '<robot name="r"><link name="a"/><link name="b"/><link name="c"/><link name="d"/>'
        '<joint name="ac" type="fixed"><parent link="a"/><child link="c"/></joint>'
        '<joint name="cd" type="fixed"><parent link="c"/><child link="d"/></joint>'
        '<joint name="ab" type="fixed"><parent link="a"/><child link="b"/></joint></robot>'
    )
    dfs, bfs, none = newton.ModelBuilder(), newton.ModelBuilder(), newton.ModelBuilder()
    dfs.add_urdf(text)
    bfs.add_urdf(text, joint_ordering="bfs")
    none.add_urdf(text, joint_ordering=None, bodies_follow_joint_ordering=False)
    assert dfs.joint_label[1:] == ["ac", "cd", "ab"]
    assert bfs.joint_label[1:] == ["ac", "ab", "cd"]
    assert none.body_label == ["a", "b", "c", "d"]
    assert none.joint_label[1:] == ["ac", "cd", "ab"]


def test_registered_importer_and_signature_matches_reference():
    import inspect

    from armillary import plugins

    entry = plugins.get_registry().importers.for_method("add_urdf")
    assert entry is not None and entry.name == "urdf" and ".urdf" in entry.meta["suffixes"]
    from armillary_importer_urdf.importer import add_urdf

    params = inspect.signature(add_urdf).parameters
    for name in ("xform", "floating", "base_joint", "parent_body", "scale", "hide_visuals",
                 "parse_visuals_as_colliders", "up_axis", "force_show_colliders", "enable_self_collisions",
                 "ignore_inertial_definitions", "joint_ordering", "bodies_follow_joint_ordering",
                 "collapse_fixed_joints", "mesh_maxhullvert", "force_position_velocity_actuation",
                 "joint_damping_mode", "package_dirs"):  # fmt: skip
        assert name in params, name


def test_up_axis_rotation():
    b = newton.ModelBuilder(up_axis=newton.Axis.Z)
    b.add_urdf(chain(1), up_axis="y")
    # the file's +Y (up) maps onto the builder's +Z; the chain offset (0, 0, 0.5) goes to -Y
    np.testing.assert_allclose(np.asarray(b.body_q[1])[:3], [0, -0.5, 0], atol=1e-6)


def test_hide_visuals_and_ignore_inertial():
    text = (
        '<robot name="r"><link name="a">' + INERTIAL + '<visual><geometry><sphere radius="0.1"/></geometry></visual>'
        '<collision><geometry><box size="0.1 0.1 0.1"/></geometry></collision></link></robot>'
    )
    b = newton.ModelBuilder()
    b.add_urdf(text, hide_visuals=True, ignore_inertial_definitions=True)
    assert b.shape_count == 1 and b.body_mass[0] == pytest.approx(1.0)
    assert math.isclose(float(np.asarray(b.body_inertia[0]).reshape(3, 3)[0, 0]), 1.0 / 12 * 0.02, rel_tol=1e-4)

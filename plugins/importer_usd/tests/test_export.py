"""``armillary.usd.export``: what the written stage contains (read back with pxr, no importer involved)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

pytest.importorskip("pxr")

import warp as wp  # noqa: E402
from pxr import Usd, UsdGeom, UsdPhysics, UsdShade  # noqa: E402

import armillary  # noqa: E402
from armillary_importer_usd.export import USDExportError, export, principal_inertia  # noqa: E402


def _quat_to_matrix(q):
    x, y, z, w = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])  # fmt: skip


def _gf_to_xyzw(q) -> np.ndarray:
    return np.array([*q.GetImaginary(), q.GetReal()])


def _api_names(prim) -> list[str]:
    """Applied API schema names from the metadata (unregistered codeless schemas such as NewtonJointAPI
    are not in GetAppliedSchemas() without newton-usd-schemas)."""
    op = prim.GetMetadata("apiSchemas")
    return list(op.GetAddedOrExplicitItems()) if op else []


def _two_link(up_axis="Z", gravity=-9.81, **revolute):
    g = [0.0, 0.0, 0.0]
    g["XYZ".index(up_axis)] = gravity
    b = armillary.ModelBuilder(up_axis=up_axis, gravity=g)
    inertia = np.array([[0.2, 0.01, 0.02], [0.01, 0.3, 0.03], [0.02, 0.03, 0.4]])
    base = b.add_link(mass=2.0, com=wp.vec3(0.1, 0.0, 0.0), inertia=wp.mat33(*inertia.reshape(-1)), label="base")
    arm = b.add_link(mass=1.0, inertia=wp.mat33(*np.eye(3).reshape(-1) * 0.1), label="arm/link 1")
    j0 = b.add_joint_fixed(-1, base, parent_xform=wp.transform(wp.vec3(0, 0, 1), wp.quat_identity()), label="mount")
    j1 = b.add_joint_revolute(base, arm, label="elbow", **revolute)
    b.add_articulation([j0, j1], label="robot")
    return b


def test_stage_metadata_scene_and_bodies(tmp_path):
    model = _two_link(up_axis="Y", gravity=-3.0).finalize(device="cpu")
    res = export(model, tmp_path / "m.usda")
    stage = Usd.Stage.Open(str(tmp_path / "m.usda"))
    assert UsdGeom.GetStageUpAxis(stage) == "Y"
    assert UsdGeom.GetStageMetersPerUnit(stage) == 1.0
    assert UsdPhysics.GetStageKilogramsPerUnit(stage) == 1.0
    assert stage.GetDefaultPrim().GetPath() == "/World"
    scene = UsdPhysics.Scene(stage.GetPrimAtPath("/World/PhysicsScene"))
    assert scene.GetGravityMagnitudeAttr().Get() == pytest.approx(3.0)
    assert tuple(scene.GetGravityDirectionAttr().Get()) == pytest.approx((0.0, -1.0, 0.0))
    # bodies: rigid body + mass API, inertia reconstructed from diagonal + principal axes (Gf real first)
    inertia = model.body_inertia.numpy()
    for b, path in res["body_paths"].items():
        prim = stage.GetPrimAtPath(path)
        assert prim.HasAPI(UsdPhysics.RigidBodyAPI) and prim.HasAPI(UsdPhysics.MassAPI)
        mass = UsdPhysics.MassAPI(prim)
        assert mass.GetMassAttr().Get() == pytest.approx(model.body_mass.numpy()[b])
        assert tuple(mass.GetCenterOfMassAttr().Get()) == pytest.approx(tuple(model.body_com.numpy()[b]), abs=1e-7)
        R = _quat_to_matrix(_gf_to_xyzw(mass.GetPrincipalAxesAttr().Get()))
        d = np.array(mass.GetDiagonalInertiaAttr().Get())
        np.testing.assert_allclose(R @ np.diag(d) @ R.T, inertia[b], atol=1e-6)
    assert res["body_paths"][1] == "/World/robot/link_1"  # last label component, made a valid identifier
    assert stage.GetPrimAtPath("/World/robot").HasAPI(UsdPhysics.ArticulationRootAPI)


def test_principal_inertia_convention():
    R = _quat_to_matrix(np.array([0.1, 0.2, 0.3, 0.9]) / np.linalg.norm([0.1, 0.2, 0.3, 0.9]))
    inertia = R @ np.diag([1.0, 2.0, 3.0]) @ R.T
    d, q = principal_inertia(inertia)
    Rq = _quat_to_matrix(q)
    np.testing.assert_allclose(Rq @ np.diag(d) @ Rq.T, inertia, atol=1e-12)
    assert np.linalg.det(Rq) == pytest.approx(1.0)


def test_revolute_joint_units_frames_and_schema():
    axis = np.array([0.0, 0.6, 0.8])
    b = _two_link(axis=wp.vec3(*axis), limit_lower=-0.5, limit_upper=1.0, target_ke=100.0, target_kd=10.0,
                  target_q=0.25, armature=0.01, damping=0.5, friction=0.2, velocity_limit=3.0, effort_limit=7.0,
                  parent_xform=wp.transform(wp.vec3(0.1, 0.2, 0.3), wp.quat_rpy(0.3, 0.2, 0.1)))  # fmt: skip
    model = b.finalize(device="cpu")
    stage = Usd.Stage.CreateInMemory()
    res = export(model, stage)
    mount = UsdPhysics.FixedJoint(stage.GetPrimAtPath(res["joint_paths"][0][0]))
    assert not mount.GetBody0Rel().GetTargets()  # world
    assert tuple(mount.GetLocalPos0Attr().Get()) == pytest.approx((0, 0, 1))
    prim = stage.GetPrimAtPath(res["joint_paths"][1][0])
    joint = UsdPhysics.RevoluteJoint(prim)
    assert joint.GetAxisAttr().Get() == "X"  # frames rotated so that the axis is +X
    # the axis in the parent body frame is unchanged: R(localRot0) * X == R(X_p) * axis
    X_p = model.joint_X_p.numpy()[1]
    a_ref = _quat_to_matrix(X_p[3:]) @ axis
    a_usd = _quat_to_matrix(_gf_to_xyzw(joint.GetLocalRot0Attr().Get())) @ np.array([1.0, 0, 0])
    np.testing.assert_allclose(a_usd, a_ref, atol=1e-6)
    assert joint.GetLowerLimitAttr().Get() == pytest.approx(math.degrees(-0.5), rel=1e-6)
    assert joint.GetUpperLimitAttr().Get() == pytest.approx(math.degrees(1.0), rel=1e-6)
    drive = UsdPhysics.DriveAPI(prim, "angular")
    assert drive.GetStiffnessAttr().Get() == pytest.approx(100.0 * math.pi / 180, rel=1e-6)  # per degree
    assert drive.GetDampingAttr().Get() == pytest.approx(10.0 * math.pi / 180, rel=1e-6)
    assert drive.GetTargetPositionAttr().Get() == pytest.approx(math.degrees(0.25), rel=1e-6)
    assert drive.GetMaxForceAttr().Get() == pytest.approx(7.0)
    assert _api_names(prim).count("NewtonJointAPI") == 1
    assert prim.GetAttribute("newton:armature").Get() == pytest.approx(0.01)
    assert prim.GetAttribute("newton:damping").Get() == pytest.approx(0.5 * math.pi / 180, rel=1e-6)
    assert prim.GetAttribute("newton:friction").Get() == pytest.approx(0.2)
    assert prim.GetAttribute("newton:velocityLimit").Get() == pytest.approx(math.degrees(3.0), rel=1e-6)


def test_prismatic_joint_limits_in_meters():
    b = armillary.ModelBuilder()
    link = b.add_link(mass=1.0, inertia=wp.mat33(*np.eye(3).reshape(-1)))
    j = b.add_joint_prismatic(-1, link, axis=(0.0, 0.0, 1.0), limit_lower=-0.2, limit_upper=0.3, label="slide")
    b.add_articulation([j])
    stage = Usd.Stage.CreateInMemory()
    res = export(b.finalize(device="cpu"), stage)
    joint = UsdPhysics.PrismaticJoint(stage.GetPrimAtPath(res["joint_paths"][0][0]))
    assert joint.GetAxisAttr().Get() == "Z"  # a coordinate axis keeps the frame
    assert (joint.GetLowerLimitAttr().Get(), joint.GetUpperLimitAttr().Get()) == pytest.approx((-0.2, 0.3))


def test_every_shape_type_and_material(tmp_path):
    b = armillary.ModelBuilder()
    cfg = armillary.ModelBuilder.ShapeConfig(mu=0.7, restitution=0.3)
    body = b.add_body(mass=1.0, inertia=wp.mat33(*np.eye(3).reshape(-1)), label="body")
    X = wp.transform(wp.vec3(0.1, 0.2, 0.3), wp.quat_rpy(0.5, 0.0, 0.0))
    s_box = b.add_shape_box(body, xform=X, hx=0.1, hy=0.2, hz=0.3, cfg=cfg, label="box")
    s_sph = b.add_shape_sphere(body, radius=0.25, cfg=cfg, label="sphere")
    s_cap = b.add_shape_capsule(body, radius=0.05, half_height=0.2, cfg=cfg, label="capsule")
    s_cyl = b.add_shape_cylinder(body, radius=0.06, half_height=0.3, cfg=cfg, label="cylinder")
    s_cone = b.add_shape_cone(body, radius=0.07, half_height=0.4, cfg=cfg, label="cone")
    mesh = armillary.Mesh([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], [0, 2, 1, 0, 1, 3, 0, 3, 2, 1, 2, 3])
    s_mesh = b.add_shape_mesh(body, mesh=mesh, scale=(2.0, 3.0, 4.0), cfg=cfg, label="mesh")
    s_plane = b.add_shape_plane(width=5.0, length=6.0, label="ground")
    model = b.finalize(device="cpu")
    res = export(model, tmp_path / "s.usda")
    stage = Usd.Stage.Open(str(tmp_path / "s.usda"))
    paths = res["shape_paths"]
    # the FREE root joint is omitted: a floating body is a rigid body without a joint
    assert not [p for p in stage.Traverse() if p.IsA(UsdPhysics.Joint)]

    cube = UsdGeom.Cube(stage.GetPrimAtPath(paths[s_box]))
    scale = [op for op in cube.GetOrderedXformOps() if op.GetOpType() == UsdGeom.XformOp.TypeScale][0].Get()
    np.testing.assert_allclose(np.array(scale) * cube.GetSizeAttr().Get(), [0.2, 0.4, 0.6], rtol=1e-6)  # full size
    local = cube.GetLocalTransformation()
    np.testing.assert_allclose(local.ExtractTranslation(), [0.1, 0.2, 0.3], atol=1e-6)
    assert UsdGeom.Sphere(stage.GetPrimAtPath(paths[s_sph])).GetRadiusAttr().Get() == pytest.approx(0.25)
    for s, cls, r, h in ((s_cap, UsdGeom.Capsule, 0.05, 0.4), (s_cyl, UsdGeom.Cylinder, 0.06, 0.6),
                         (s_cone, UsdGeom.Cone, 0.07, 0.8)):  # fmt: skip
        g = cls(stage.GetPrimAtPath(paths[s]))
        assert g, paths[s]
        assert (g.GetRadiusAttr().Get(), g.GetHeightAttr().Get(), g.GetAxisAttr().Get()) == pytest.approx((r, h, "Z"))
    m = UsdGeom.Mesh(stage.GetPrimAtPath(paths[s_mesh]))
    assert len(m.GetPointsAttr().Get()) == 4 and list(m.GetFaceVertexCountsAttr().Get()) == [3] * 4
    assert list(m.GetFaceVertexIndicesAttr().Get()) == [0, 2, 1, 0, 1, 3, 0, 3, 2, 1, 2, 3]
    assert UsdPhysics.MeshCollisionAPI(m.GetPrim()).GetApproximationAttr().Get() == "none"
    plane = UsdGeom.Plane(stage.GetPrimAtPath(paths[s_plane]))
    assert (plane.GetWidthAttr().Get(), plane.GetLengthAttr().Get()) == pytest.approx((5.0, 6.0))
    assert paths[s_plane].startswith("/World/StaticShapes/")
    for s in (s_box, s_sph, s_cap, s_cyl, s_cone, s_mesh, s_plane):
        assert stage.GetPrimAtPath(paths[s]).HasAPI(UsdPhysics.CollisionAPI)
    binding = UsdShade.MaterialBindingAPI(stage.GetPrimAtPath(paths[s_box]))
    material = binding.GetDirectBinding("physics").GetMaterial()
    mat = UsdPhysics.MaterialAPI(material.GetPrim())
    assert mat.GetDynamicFrictionAttr().Get() == pytest.approx(0.7)
    assert mat.GetRestitutionAttr().Get() == pytest.approx(0.3)


def test_d6_generic_and_stacked():
    b = armillary.ModelBuilder()
    cfg = armillary.ModelBuilder.JointDofConfig
    inertia = wp.mat33(*np.eye(3).reshape(-1))
    l1 = b.add_link(mass=1.0, inertia=inertia)
    l2 = b.add_link(mass=1.0, inertia=inertia)
    # coordinate axes in increasing order, one kind, uniform values: one generic PhysicsJoint, other axes locked
    j1 = b.add_joint_d6(-1, l1, angular_axes=[cfg(axis=(1, 0, 0)), cfg(axis=(0, 0, 1), limit_lower=-1.0,
                                                                        limit_upper=1.0)], label="gimbal")  # fmt: skip
    # Z then X: not expressible by one generic joint -> stacked revolute joints + jointsAddMobility
    j2 = b.add_joint_d6(l1, l2, angular_axes=[cfg(axis=(0, 0, 1)), cfg(axis=(1, 0, 0))], label="hip")
    # linear + angular DOFs: NewtonJointAPI values (per degree for angular DOFs) differ per DOF -> stacked
    l3 = b.add_link(mass=1.0, inertia=inertia)
    j3 = b.add_joint_d6(l2, l3, linear_axes=[cfg(axis=(1, 0, 0))], angular_axes=[cfg(axis=(0, 1, 0))], label="mix")
    b.add_articulation([j1, j2, j3], label="robot")
    stage = Usd.Stage.CreateInMemory()
    res = export(b.finalize(device="cpu"), stage)
    (p1,) = res["joint_paths"][0]
    prim = stage.GetPrimAtPath(p1)
    assert prim.GetTypeName() == "PhysicsJoint"
    lim = {s: (UsdPhysics.LimitAPI(prim, s).GetLowAttr().Get(), UsdPhysics.LimitAPI(prim, s).GetHighAttr().Get())
           for s in ("transX", "transY", "transZ", "rotX", "rotY", "rotZ")}  # fmt: skip
    assert lim["transX"][0] > lim["transX"][1] and lim["rotY"][0] > lim["rotY"][1]  # locked
    assert lim["rotX"] == (-math.inf, math.inf)
    assert lim["rotZ"] == pytest.approx((math.degrees(-1.0), math.degrees(1.0)))
    mix = [stage.GetPrimAtPath(p).GetTypeName() for p in res["joint_paths"][2]]
    assert mix == ["PhysicsPrismaticJoint", "PhysicsRevoluteJoint"]
    stacked = res["joint_paths"][1]
    assert len(stacked) == 2
    assert all(stage.GetPrimAtPath(p).GetTypeName() == "PhysicsRevoluteJoint" for p in stacked)
    (root_path,) = res["articulation_paths"][0]
    root = stage.GetPrimAtPath(root_path)
    assert _api_names(root).count("NewtonArticulationRootAPI") == 1
    assert root.GetAttribute("newton:jointsAddMobility").Get() is True
    # DOF order = prim order; each axis in the parent frame is R(localRot0) * axis token
    axes = []
    for p in stacked:
        joint = UsdPhysics.RevoluteJoint(stage.GetPrimAtPath(p))
        k = "XYZ".index(joint.GetAxisAttr().Get())
        axes.append(_quat_to_matrix(_gf_to_xyzw(joint.GetLocalRot0Attr().Get()))[:, k])
    np.testing.assert_allclose(axes, [[0, 0, 1], [1, 0, 0]], atol=1e-6)


def test_loop_joint_excluded_from_articulation():
    b = armillary.ModelBuilder()
    inertia = wp.mat33(*np.eye(3).reshape(-1))
    l1, l2 = b.add_link(mass=1.0, inertia=inertia), b.add_link(mass=1.0, inertia=inertia)
    j1 = b.add_joint_revolute(-1, l1, axis=(0, 0, 1))
    j2 = b.add_joint_revolute(l1, l2, axis=(0, 0, 1))
    b.add_articulation([j1, j2])
    loop = b.add_joint_ball(-1, l2, label="loop")
    stage = Usd.Stage.CreateInMemory()
    res = export(b.finalize(device="cpu"), stage)
    joint = UsdPhysics.Joint(stage.GetPrimAtPath(res["joint_paths"][loop][0]))
    assert joint.GetExcludeFromArticulationAttr().Get() is True
    assert not UsdPhysics.Joint(stage.GetPrimAtPath(res["joint_paths"][j2][0])).GetExcludeFromArticulationAttr().Get()


def test_unique_valid_names():
    b = armillary.ModelBuilder()
    inertia = wp.mat33(*np.eye(3).reshape(-1))
    a = b.add_body(mass=1.0, inertia=inertia, label="1 arm")
    c = b.add_body(mass=1.0, inertia=inertia, label="1 arm")
    b.add_shape_sphere(a, radius=0.1, label="ball/x.y")
    b.add_shape_sphere(a, radius=0.1, label="ball/x.y")
    stage = Usd.Stage.CreateInMemory()
    res = export(b.finalize(device="cpu"), stage)
    names = [p.rsplit("/", 1)[1] for p in res["body_paths"].values()]
    assert res["body_paths"][a] != res["body_paths"][c]
    assert all(n.startswith("_1_arm") for n in names)
    assert sorted(p.rsplit("/", 1)[1] for p in res["shape_paths"].values()) == ["x_y", "x_y_1"]


def test_unsupported_shape_is_named():
    b = armillary.ModelBuilder()
    body = b.add_body(mass=1.0, inertia=wp.mat33(*np.eye(3).reshape(-1)))
    b.add_shape_ellipsoid(body, rx=0.1, ry=0.2, rz=0.3, label="egg")
    model = b.finalize(device="cpu")
    with pytest.raises(USDExportError, match=r"shape 0 \('egg'\).*ellipsoid"):
        export(model, Usd.Stage.CreateInMemory())
    with pytest.warns(UserWarning, match="egg"):
        res = export(model, Usd.Stage.CreateInMemory(), on_unsupported="skip")
    assert res["skipped"] and not res["shape_paths"]


def test_bad_path_and_option():
    model = armillary.ModelBuilder().finalize(device="cpu")
    with pytest.raises(ValueError, match="must end with"):
        export(model, "out.txt")
    with pytest.raises(ValueError, match="on_unsupported"):
        export(model, Usd.Stage.CreateInMemory(), on_unsupported="maybe")


def test_public_name_and_world_selection(tmp_path):
    world = _two_link()
    b = armillary.ModelBuilder()
    b.replicate(world, 2)
    model = b.finalize(device="cpu")
    res_all = armillary.usd.export(model, tmp_path / "all.usda")
    res_one = armillary.usd.export(model, tmp_path / "one.usda", world=1)
    assert len(res_all["body_paths"]) == 4
    assert sorted(res_one["body_paths"]) == [2, 3]


def test_rest_pose_is_where_joint_frames_agree():
    """Bodies are written at joint coordinate zero (USD has no joint coordinates); FREE roots keep their pose."""
    b = _two_link(axis=(0.0, 0.0, 1.0), child_xform=wp.transform(wp.vec3(0.5, 0, 0), wp.quat_identity()))
    b.joint_q[-1] = 1.0  # elbow bent in the model's initial state
    model = b.finalize(device="cpu")
    stage = Usd.Stage.CreateInMemory()
    res = export(model, stage)
    xf = UsdGeom.Xformable(stage.GetPrimAtPath(res["body_paths"][1])).GetLocalTransformation()
    np.testing.assert_allclose(xf.ExtractTranslation(), [-0.5, 0.0, 1.0], atol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        export(model, Usd.Stage.CreateInMemory())


def test_heightfield_as_triangle_mesh():
    b = armillary.ModelBuilder()
    data = np.array([[0.0, 0.1, 0.2], [0.3, 0.4, 0.5]])
    hf = armillary.Heightfield(data, nrow=2, ncol=3, hx=1.0, hy=0.5)
    s = b.add_shape_heightfield(heightfield=hf, label="terrain")
    stage = Usd.Stage.CreateInMemory()
    res = export(b.finalize(device="cpu"), stage)
    mesh = UsdGeom.Mesh(stage.GetPrimAtPath(res["shape_paths"][s]))
    pts = np.array(mesh.GetPointsAttr().Get())
    assert pts.shape == (6, 3)
    np.testing.assert_allclose(pts[5], [1.0, 0.5, 0.5], atol=1e-6)  # row 1 -> +y, column 2 -> +x
    assert len(mesh.GetFaceVertexIndicesAttr().Get()) == 2 * 2 * 3
    idx = np.array(mesh.GetFaceVertexIndicesAttr().Get()).reshape(-1, 3)
    n = np.cross(pts[idx[:, 1]] - pts[idx[:, 0]], pts[idx[:, 2]] - pts[idx[:, 0]])
    assert np.all(n[:, 2] > 0)  # faces point up


def test_passive_spring_as_mjc_attributes():
    b = _two_link(axis=(0.0, 0.0, 1.0), stiffness=2.0, rest_q=0.5)
    stage = Usd.Stage.CreateInMemory()
    res = export(b.finalize(device="cpu"), stage)
    prim = stage.GetPrimAtPath(res["joint_paths"][1][0])
    assert prim.GetAttribute("mjc:stiffness").Get() == pytest.approx(2.0)
    assert prim.GetAttribute("mjc:springref").Get() == pytest.approx(math.degrees(0.5), rel=1e-6)


def test_collision_filters():
    b = armillary.ModelBuilder()
    inertia = wp.mat33(*np.eye(3).reshape(-1))
    l1, l2, l3 = (b.add_link(mass=1.0, inertia=inertia) for _ in range(3))
    s1 = b.add_shape_sphere(l1, radius=0.1)
    s2 = b.add_shape_sphere(l2, radius=0.1)
    s3 = b.add_shape_sphere(l3, radius=0.1)
    j1 = b.add_joint_revolute(-1, l1)
    j2 = b.add_joint_revolute(l1, l2)  # parent/child filtered (default)
    j3 = b.add_joint_revolute(l2, l3, collision_filter_parent=False)
    b.add_articulation([j1, j2, j3])
    b.add_shape_collision_filter_pair(s1, s3)
    s4 = b.add_shape_box(l3, cfg=armillary.ModelBuilder.ShapeConfig(collision_group=-2))
    stage = Usd.Stage.CreateInMemory()
    res = export(b.finalize(device="cpu"), stage)
    joint = {j: UsdPhysics.Joint(stage.GetPrimAtPath(res["joint_paths"][j][0])) for j in (j2, j3)}
    assert not joint[j2].GetCollisionEnabledAttr().Get()
    assert joint[j3].GetCollisionEnabledAttr().Get() is True
    rel = UsdPhysics.FilteredPairsAPI(stage.GetPrimAtPath(res["shape_paths"][s1])).GetFilteredPairsRel()
    assert [str(t) for t in rel.GetTargets()] == [res["shape_paths"][s3]]
    assert not stage.GetPrimAtPath(res["shape_paths"][s2]).HasAPI(UsdPhysics.FilteredPairsAPI)
    assert stage.GetPrimAtPath(res["shape_paths"][s4]).GetAttribute("newton:collision_group").Get() == -2
    assert not stage.GetPrimAtPath(res["shape_paths"][s3]).GetAttribute("newton:collision_group").IsValid()


def test_articulation_of_several_trees_is_split():
    b = armillary.ModelBuilder()
    inertia = wp.mat33(*np.eye(3).reshape(-1))
    l1, l2, l3 = (b.add_link(mass=1.0, inertia=inertia, label=f"l{i}") for i in range(3))
    j1 = b.add_joint_revolute(-1, l1)
    j2 = b.add_joint_revolute(l1, l2)
    j3 = b.add_joint_free(l3)
    b.add_articulation([j1, j2, j3], label="forest")
    stage = Usd.Stage.CreateInMemory()
    res = export(b.finalize(device="cpu"), stage)
    assert res["articulation_paths"][0] == ["/World/forest", "/World/forest_1"]
    assert res["body_paths"][l2].startswith("/World/forest/") and res["body_paths"][l3].startswith("/World/forest_1/")


def test_written_stages_pass_usd_validation(tmp_path):
    """USD's own validators (UsdPhysics rules included) find nothing wrong in an exported robot."""
    UsdValidation = pytest.importorskip("pxr.UsdValidation")
    from armillary.testing.assets import shared_assets_dir

    root = shared_assets_dir()
    if root is None:
        pytest.skip("shared assets not found")
    validators = UsdValidation.ValidationRegistry().GetOrLoadAllValidators()
    context = UsdValidation.ValidationContext(validators)
    for name in ("humanoid", "cheetah", "quadruped"):
        b = armillary.ModelBuilder()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            b.add_mjcf(str(root / f"mjcf/{name}/{name}.xml"))
            export(b.finalize(device="cpu"), tmp_path / f"{name}.usda", on_unsupported="skip")
        errors = context.Validate(Usd.Stage.Open(str(tmp_path / f"{name}.usda")))
        assert not errors, [e.GetMessage() for e in errors][:5]

"""The stage and attribute helpers of ``armillary_importer_usd.utils`` (public as ``armillary.usd.*``),
and importer features that cut across modules (schema attributes, stacked joints, warnings)."""

import math
import warnings

import numpy as np
import pytest

import armillary

pxr = pytest.importorskip("pxr")
from pxr import Gf, Sdf, Usd, UsdGeom, UsdPhysics  # noqa: E402

from armillary_importer_usd import utils  # noqa: E402
from armillary_importer_usd.importer import USDImportWarning  # noqa: E402
from armillary_importer_usd.utils import USDImportError  # noqa: E402

S = math.sqrt(0.5)


def test_error_message_names_prim_and_attribute():
    e = USDImportError("must be > 0", "/World/a", "physics:mass")
    assert str(e).startswith("/World/a.physics:mass: must be > 0")
    assert isinstance(e, ValueError) and e.prim_path == "/World/a" and e.attribute == "physics:mass"
    assert str(USDImportError("plain")) == "plain"


def test_quaternion_conventions():
    s = Usd.Stage.CreateInMemory()
    p = s.DefinePrim("/p")
    p.CreateAttribute("q", Sdf.ValueTypeNames.Quatf).Set(Gf.Quatf(S, 0, 0, S))  # (real, imaginary): 90 deg about z
    q = utils.get_quat(p, "q")
    np.testing.assert_allclose(list(q), [0, 0, S, S], atol=1e-6)  # xyzw
    np.testing.assert_allclose(utils.quat_wxyz_gf_to_xyzw(Gf.Quatd(0.5, 0.5, 0.5, 0.5)), [0.5, 0.5, 0.5, 0.5])
    assert utils.get_quat(p, "missing", "d") == "d"
    w = utils.value_to_warp(Gf.Quatf(S, 0, 0, S))
    np.testing.assert_allclose(list(w), [0, 0, S, S], atol=1e-6)


def test_transform_and_scale():
    s = Usd.Stage.CreateInMemory()
    a = UsdGeom.Xform.Define(s, "/a")
    a.AddTranslateOp().Set(Gf.Vec3d(1, 2, 3))
    a.AddRotateZOp().Set(90.0)
    a.AddScaleOp().Set(Gf.Vec3f(2, 3, 4))
    b = UsdGeom.Xform.Define(s, "/a/b")
    b.AddTranslateOp().Set(Gf.Vec3d(1, 0, 0))
    t = utils.get_transform(a.GetPrim())
    np.testing.assert_allclose(list(t), [1, 2, 3, 0, 0, S, S], atol=1e-6)
    np.testing.assert_allclose(list(utils.get_scale(a.GetPrim())), [2, 3, 4], atol=1e-6)
    tw = utils.get_transform(b.GetPrim(), local=False)
    np.testing.assert_allclose(list(tw)[:3], [1, 4, 3], atol=1e-6)  # (1, 0, 0) scaled by 2, turned onto +y
    np.testing.assert_allclose(list(utils.get_scale(b.GetPrim(), local=False)), [2, 3, 4], atol=1e-6)
    cache = UsdGeom.XformCache()
    np.testing.assert_allclose(list(utils.get_transform(b.GetPrim(), local=False, xform_cache=cache)), list(tw), atol=1e-7)


def test_attribute_helpers():
    s = Usd.Stage.CreateInMemory()
    p = s.DefinePrim("/p")
    p.CreateAttribute("newton:a", Sdf.ValueTypeNames.Float).Set(2.0)
    p.CreateAttribute("newton:inf", Sdf.ValueTypeNames.Float).Set(float("inf"))
    p.CreateAttribute("other:b", Sdf.ValueTypeNames.Int).Set(3)
    p.CreateAttribute("newton:unset", Sdf.ValueTypeNames.Int)
    assert utils.get_attribute(p, "newton:a") == 2.0
    assert utils.get_attribute(p, "newton:unset", 7) == 7
    assert utils.has_attribute(p, "other:b") and not utils.has_attribute(p, "newton:unset")
    assert utils.get_float(p, "newton:inf", -1.0) == -1.0
    assert utils.get_attributes_in_namespace(p, "newton") == {"newton:a": 2.0, "newton:inf": float("inf")}


def test_applied_schema_by_name_without_registration():
    s = Usd.Stage.CreateInMemory()
    assert s.GetRootLayer().ImportFromString(
        '#usda 1.0\ndef Xform "j" (\n    prepend apiSchemas = ["NewtonJointAPI", "PhysicsLimitAPI:rotX"]\n)\n{\n}\n'
    )
    p = s.GetPrimAtPath("/j")
    assert utils.has_applied_api_schema(p, "NewtonJointAPI")
    assert utils.has_applied_api_schema(p, "PhysicsLimitAPI:rotX")
    assert utils.has_applied_api_schema(p, "PhysicsLimitAPI")
    assert not utils.has_applied_api_schema(p, "MjcSiteAPI")


def test_gprim_axis_and_scenes():
    s = Usd.Stage.CreateInMemory()
    c = UsdGeom.Capsule.Define(s, "/c")
    assert utils.get_gprim_axis(c.GetPrim()) == armillary.Axis.Z
    c.CreateAxisAttr("X")
    assert utils.get_gprim_axis(c.GetPrim()) == armillary.Axis.X
    UsdPhysics.Scene.Define(s, "/a/scene")
    UsdPhysics.Scene.Define(s, "/b/scene")
    assert [str(x.GetPath()) for x in utils.get_physics_scenes(s)] == ["/a/scene", "/b/scene"]
    assert [str(x.GetPath()) for x in utils.get_physics_scenes(s, exclude_paths=["/a"])] == ["/b/scene"]
    assert [str(x.GetPath()) for x in utils.get_physics_scenes(s, root_path="/b")] == ["/b/scene"]


def test_type_to_warp():
    import warp as wp

    assert utils.type_to_warp(Gf.Vec3f(1, 2, 3)) == wp.vec3
    assert utils.type_to_warp(1.0) == wp.float32
    m = utils.value_to_warp(Gf.Matrix3d(1, 2, 3, 4, 5, 6, 7, 8, 9))
    assert float(m[0, 1]) == 2.0


def test_stage_units_and_up_axis():
    s = Usd.Stage.CreateInMemory()
    assert utils.stage_linear_unit(s) == 1.0 and utils.stage_up_axis(s) == "Z"
    UsdGeom.SetStageMetersPerUnit(s, 0.01)
    UsdGeom.SetStageUpAxis(s, "Y")
    assert utils.stage_linear_unit(s) == 0.01 and utils.stage_up_axis(s) == "Y"
    s.SetMetadata("metersPerUnit", 0.0)
    with pytest.raises(USDImportError, match="metersPerUnit"):
        utils.stage_linear_unit(s)


def test_open_stage(tmp_path):
    s = Usd.Stage.CreateInMemory()
    assert utils.open_stage(s) is s
    with pytest.raises(FileNotFoundError):
        utils.open_stage(tmp_path / "missing.usd")
    with pytest.raises(USDImportError):
        utils.open_stage(42)


# ------------------------------------------------------------------------------------------------ importer, cross-module


HEADER = '#usda 1.0\n(\n    upAxis = "Z"\n    metersPerUnit = 1\n)\n'


def _stage(text):
    s = Usd.Stage.CreateInMemory()
    assert s.GetRootLayer().ImportFromString(text)
    return s


def _two_bodies(root_attrs="", joint_kind="PhysicsRevoluteJoint"):
    return HEADER + f"""
def Xform "R" (
    prepend apiSchemas = ["PhysicsArticulationRootAPI", "NewtonArticulationRootAPI"]
)
{{
    {root_attrs}
    def Xform "A" (
        prepend apiSchemas = ["PhysicsRigidBodyAPI"]
    )
    {{
    }}
    def Xform "B" (
        prepend apiSchemas = ["PhysicsRigidBodyAPI"]
    )
    {{
        def Sphere "s" (
            prepend apiSchemas = ["PhysicsCollisionAPI"]
        )
        {{
            double radius = 0.1
        }}
    }}
    def PhysicsFixedJoint "root"
    {{
        rel physics:body1 = </R/A>
    }}
    def {joint_kind} "jx"
    {{
        rel physics:body0 = </R/A>
        rel physics:body1 = </R/B>
        uniform token physics:axis = "X"
    }}
    def {joint_kind} "jy"
    {{
        rel physics:body0 = </R/A>
        rel physics:body1 = </R/B>
        uniform token physics:axis = "Y"
    }}
}}
"""


def test_stacked_joints_stay_constraints_without_mobility():
    b = armillary.ModelBuilder()
    r = b.add_usd(_stage(_two_bodies()))
    jx, jy = r["path_joint_map"]["/R/jx"], r["path_joint_map"]["/R/jy"]
    assert b.joint_articulation[jx] == 0 and b.joint_articulation[jy] == -1  # loop-closing constraint
    b.finalize(device="cpu")


def test_stacked_joints_merge_with_mobility():
    b = armillary.ModelBuilder()
    r = b.add_usd(_stage(_two_bodies("bool newton:jointsAddMobility = 1")))
    jx, jy = r["path_joint_map"]["/R/jx"], r["path_joint_map"]["/R/jy"]
    assert jx == jy and int(b.joint_type[jx]) == int(armillary.JointType.D6)
    assert b.joint_dof_dim[jx] == (0, 2)
    np.testing.assert_allclose([list(b.joint_axis[k]) for k in range(2)], [[1, 0, 0], [0, 1, 0]], atol=1e-6)


def test_schema_attrs_have_the_reference_layout():
    schemas = pytest.importorskip("armillary_importer_usd.schemas")
    text = _two_bodies("bool physxArticulation:enabledSelfCollisions = 0")
    b = armillary.ModelBuilder()
    r = b.add_usd(_stage(text), schema_resolvers=[schemas.SchemaResolverNewton(), schemas.SchemaResolverPhysx()])
    sa = r["schema_attrs"]
    assert set(sa) == {"newton", "physx"}
    assert sa["physx"]["/R"] == {"physxArticulation:enabledSelfCollisions": False}
    assert {"/R", "/", "/R/A", "/R/B", "/R/jx", "/R/B/s"} <= set(sa["newton"])


def test_deformables_are_reported_not_silently_dropped():
    text = HEADER + 'def Mesh "cloth" (\n    prepend apiSchemas = ["PhysicsDeformableBodyAPI"]\n)\n{\n}\n'
    b = armillary.ModelBuilder()
    with pytest.warns(USDImportWarning, match="/cloth"):
        b.add_usd(_stage(text))


def test_verbose_prints_a_summary(capsys):
    b = armillary.ModelBuilder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b.add_usd(_stage(_two_bodies()), verbose=True)
    assert "2 bodies" in capsys.readouterr().out

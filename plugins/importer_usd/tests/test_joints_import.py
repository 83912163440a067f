"""Joints end to end through ``armillary_importer_usd.importer.add_usd``: newton:jointsAddMobility, loop closures,
joint errors. Numbers marked "reference" were measured once with newton 1.8 ``add_usd`` on the same stages."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("pxr")
from pxr import Usd  # noqa: E402

import armillary  # noqa: E402
from armillary import JointType  # noqa: E402
from armillary_importer_usd.utils import USDImportError  # noqa: E402

importer = pytest.importorskip("armillary_importer_usd.importer")
add_usd = importer.add_usd


def stage_text(mobility, joints: str) -> str:
    mob = f"bool newton:jointsAddMobility = {mobility}" if mobility is not None else ""
    return f"""#usda 1.0
(
    metersPerUnit = 1
    upAxis = "Z"
)
def PhysicsScene "physicsScene"
{{
}}
def Xform "World" (prepend apiSchemas = ["PhysicsArticulationRootAPI", "NewtonArticulationRootAPI"])
{{
    {mob}
    def Xform "A" (prepend apiSchemas = ["PhysicsRigidBodyAPI", "PhysicsMassAPI"])
    {{
        double3 xformOp:translate = (0, 0, 1)
        uniform token[] xformOpOrder = ["xformOp:translate"]
        float physics:mass = 1
        float3 physics:diagonalInertia = (0.1, 0.1, 0.1)
    }}
    def Xform "B" (prepend apiSchemas = ["PhysicsRigidBodyAPI", "PhysicsMassAPI"])
    {{
        double3 xformOp:translate = (1, 0, 1)
        uniform token[] xformOpOrder = ["xformOp:translate"]
        float physics:mass = 1
        float3 physics:diagonalInertia = (0.1, 0.1, 0.1)
    }}
    def PhysicsFixedJoint "root"
    {{
        rel physics:body1 = </World/A>
    }}
{joints}
}}
"""


def rev(name, axis, extra="", rot="(1, 0, 0, 0)", body1="/World/B"):
    return f"""
    def PhysicsRevoluteJoint "{name}" (prepend apiSchemas = ["NewtonJointAPI"])
    {{
        rel physics:body0 = </World/A>
        rel physics:body1 = <{body1}>
        uniform token physics:axis = "{axis}"
        point3f physics:localPos0 = (0.5, 0, 0)
        point3f physics:localPos1 = (-0.5, 0, 0)
        quatf physics:localRot0 = {rot}
        quatf physics:localRot1 = {rot}
        {extra}
    }}
"""


# traversal order jz, jx, jy differs from path order jx, jy, jz
THREE = (
    rev("jz", "Z", "float physics:lowerLimit = -10\n        float physics:upperLimit = 20\n        float newton:armature = 0.1")
    + rev("jx", "X", "float newton:armature = 0.2\n        float newton:damping = 1")
    + rev("jy", "Y", "float newton:armature = 0.3\n        float physics:lowerLimit = -30\n        float physics:upperLimit = 40")
)


def load(text, builder=None, **kw):
    stage = Usd.Stage.CreateInMemory()
    stage.GetRootLayer().ImportFromString(text)
    b = builder or armillary.ModelBuilder()
    return b, add_usd(b, stage, **kw)


def dofs(b, j):
    end = b.joint_qd_start[j + 1] if j + 1 < b.joint_count else b.joint_dof_count
    return list(range(b.joint_qd_start[j], end))


def test_jointsaddmobility_true_merges_in_traversal_order():
    b, r = load(stage_text("true", THREE))
    assert b.joint_count == 2
    j = r["path_joint_map"]["/World/jz"]
    assert r["path_joint_map"]["/World/jx"] == j and r["path_joint_map"]["/World/jy"] == j
    assert b.joint_type[j] == int(JointType.D6) and tuple(b.joint_dof_dim[j]) == (0, 3)
    assert b.joint_articulation[j] == b.joint_articulation[r["path_joint_map"]["/World/root"]] >= 0
    d = dofs(b, j)
    # DOFs in traversal order jz, jx, jy (the reference orders them by prim path: jx, jy, jz, same per-DOF values:
    # arm [0.2, 0.3, 0.1], damping [57.2958, 0, 0], limits jy (-0.523599, 0.698132), jz (-0.174533, 0.349066))
    np.testing.assert_allclose([[float(v) for v in b.joint_axis[k]] for k in d], [[0, 0, 1], [1, 0, 0], [0, 1, 0]])
    np.testing.assert_allclose([b.joint_armature[k] for k in d], [0.1, 0.2, 0.3], rtol=1e-6)
    np.testing.assert_allclose([b.joint_damping[k] for k in d], [0.0, 57.29578, 0.0], rtol=1e-6)
    np.testing.assert_allclose([b.joint_limit_lower[k] for k in d], [-math.radians(10), -1e10, -math.radians(30)], rtol=1e-6)
    np.testing.assert_allclose([b.joint_limit_upper[k] for k in d], [math.radians(20), 1e10, math.radians(40)], rtol=1e-6)
    # reference: X_p (0.5, 0, 0), X_c (-0.5, 0, 0), identity rotations
    np.testing.assert_allclose([float(v) for v in b.joint_X_p[j]], [0.5, 0, 0, 0, 0, 0, 1], atol=1e-7)
    np.testing.assert_allclose([float(v) for v in b.joint_X_c[j]], [-0.5, 0, 0, 0, 0, 0, 1], atol=1e-7)
    b.finalize()


@pytest.mark.parametrize("mobility", ["false", None])
def test_jointsaddmobility_false_keeps_joints_as_constraints(mobility):
    b, r = load(stage_text(mobility, THREE))
    pj = r["path_joint_map"]
    assert b.joint_count == 4 and {"/World/jx", "/World/jy", "/World/jz"} <= set(pj)
    js = [pj[p] for p in ("/World/jx", "/World/jy", "/World/jz")]
    assert all(b.joint_type[j] == int(JointType.REVOLUTE) for j in js)
    # one of them is the tree joint of B, the other two are loop-closing (outside the articulation)
    assert sorted(b.joint_articulation[j] >= 0 for j in js) == [False, False, True]


def test_jointsaddmobility_non_orthogonal_raises_builder_unchanged():
    joints = rev("ja", "Z") + rev("jb", "X", rot="(0.9659258, 0, 0.258819, 0)")
    b = armillary.ModelBuilder()
    with pytest.raises(USDImportError, match=r"/World/ja.*/World/jb.*non-orthogonal"):
        load(stage_text("true", joints), builder=b)
    assert b.joint_count == 0 and b.body_count == 0


def test_missing_joint_body_raises_builder_unchanged():
    b = armillary.ModelBuilder()
    with pytest.raises(USDImportError, match=r"/World/ja\.physics:body1.*/World/Nope"):
        load(stage_text(None, rev("ja", "Z", body1="/World/Nope")), builder=b)
    assert b.joint_count == 0 and b.body_count == 0


FOUR_BAR = """#usda 1.0
(
    metersPerUnit = 1
    upAxis = "Z"
)
def Xform "Mech" (prepend apiSchemas = ["PhysicsArticulationRootAPI"])
{
    def Xform "crank" (prepend apiSchemas = ["PhysicsRigidBodyAPI", "PhysicsMassAPI"])
    {
        double3 xformOp:translate = (0, 0, 0.5)
        uniform token[] xformOpOrder = ["xformOp:translate"]
        float physics:mass = 1
        float3 physics:diagonalInertia = (0.02, 0.02, 0.02)
    }
    def Xform "coupler" (prepend apiSchemas = ["PhysicsRigidBodyAPI", "PhysicsMassAPI"])
    {
        double3 xformOp:translate = (0.5, 0, 1)
        uniform token[] xformOpOrder = ["xformOp:translate"]
        float physics:mass = 1
        float3 physics:diagonalInertia = (0.02, 0.02, 0.02)
    }
    def Xform "rocker" (prepend apiSchemas = ["PhysicsRigidBodyAPI", "PhysicsMassAPI"])
    {
        double3 xformOp:translate = (1, 0, 0.5)
        uniform token[] xformOpOrder = ["xformOp:translate"]
        float physics:mass = 1
        float3 physics:diagonalInertia = (0.02, 0.02, 0.02)
    }
    def PhysicsRevoluteJoint "j_a"
    {
        rel physics:body1 = </Mech/crank>
        uniform token physics:axis = "Y"
        point3f physics:localPos1 = (0, 0, -0.5)
    }
    def PhysicsRevoluteJoint "j_b"
    {
        rel physics:body0 = </Mech/crank>
        rel physics:body1 = </Mech/coupler>
        uniform token physics:axis = "Y"
        point3f physics:localPos0 = (0, 0, 0.5)
        point3f physics:localPos1 = (-0.5, 0, 0)
    }
    def PhysicsRevoluteJoint "j_c"
    {
        rel physics:body0 = </Mech/coupler>
        rel physics:body1 = </Mech/rocker>
        uniform token physics:axis = "Y"
        point3f physics:localPos0 = (0.5, 0, 0)
        point3f physics:localPos1 = (0, 0, 0.5)
        bool physics:excludeFromArticulation = 1
    }
    def PhysicsRevoluteJoint "j_d"
    {
        rel physics:body1 = </Mech/rocker>
        uniform token physics:axis = "Y"
        point3f physics:localPos0 = (1, 0, 0)
        point3f physics:localPos1 = (0, 0, -0.5)
    }
}
"""


def test_four_bar_loop_with_exclude_from_articulation():
    b, r = load(FOUR_BAR)
    pj = r["path_joint_map"]
    # reference: joints [j_a, j_b, j_d, j_c], parents [-1, 0, -1, 1], children [0, 1, 2, 2], articulation [0, 0, 0, -1]
    assert [b.joint_label[j] for j in range(b.joint_count)] == ["/Mech/j_a", "/Mech/j_b", "/Mech/j_d", "/Mech/j_c"]
    assert list(b.joint_parent) == [-1, 0, -1, 1] and list(b.joint_child) == [0, 1, 2, 2]
    assert list(b.joint_articulation) == [0, 0, 0, -1]
    jc = pj["/Mech/j_c"]
    np.testing.assert_allclose([float(v) for v in b.joint_X_p[jc]], [0.5, 0, 0, 0, 0, 0, 1], atol=1e-7)
    np.testing.assert_allclose([float(v) for v in b.joint_X_c[jc]], [0, 0, 0.5, 0, 0, 0, 1], atol=1e-7)
    jd = pj["/Mech/j_d"]
    np.testing.assert_allclose([float(v) for v in b.joint_X_p[jd]], [1, 0, 0, 0, 0, 0, 1], atol=1e-7)
    model = b.finalize()
    assert model.articulation_count == 1


def test_merged_joint_source_prims_keep_their_own_custom_dof_values():
    """A JOINT_DOF custom attribute authored on each stacked source prim lands on that prim's DOF."""
    import warp as wp

    joints = (rev("jz", "Z", "custom float newton:k = 1") + rev("jx", "X", "custom float newton:k = 2")
              + rev("jy", "Y", "custom float newton:k = 3"))  # fmt: skip
    b = armillary.ModelBuilder()
    b.add_custom_attribute(armillary.ModelBuilder.CustomAttribute(
        name="k", dtype=wp.float32, frequency=armillary.Model.AttributeFrequency.JOINT_DOF))
    pre = b.add_link()
    b.add_articulation([b.add_joint_revolute(-1, pre)])  # one DOF before the import: indices are offset
    b, r = load(stage_text("true", joints), builder=b)
    j = r["path_joint_map"]["/World/jz"]
    assert r["path_joint_dof_map"] == {"/World/jz": [1], "/World/jx": [2], "/World/jy": [3]}
    assert dofs(b, j) == [1, 2, 3]
    np.testing.assert_allclose(b.finalize().k.numpy(), [0.0, 1.0, 2.0, 3.0])

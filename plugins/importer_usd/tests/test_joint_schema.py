"""The project's joint schema (usd_joint_schema.txt: NewtonJointAPI) and other resolvers' joint values.

Checks units (degrees on angular DOFs), the inf / -inf sentinels, broadcast to every DOF, resolver
priority, MjcJointAPI passive springs and NewtonMimicAPI. Expected numbers marked "reference" were
measured once with the reference engine (newton 1.8 ``add_usd``) on the same stages and hard-coded.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("pxr")
from pxr import Usd, UsdGeom, UsdPhysics  # noqa: E402

import armillary  # noqa: E402
from armillary_importer_usd import joints as J  # noqa: E402
from armillary_importer_usd.utils import USDImportError  # noqa: E402

schemas = pytest.importorskip("armillary_importer_usd.schemas")

D2R = math.pi / 180.0
R2D = 180.0 / math.pi

BODIES = """
    def Xform "A" (prepend apiSchemas = ["PhysicsRigidBodyAPI"])
    {
        double3 xformOp:translate = (0, 0, 1)
        uniform token[] xformOpOrder = ["xformOp:translate"]
    }
    def Xform "B" (prepend apiSchemas = ["PhysicsRigidBodyAPI"])
    {
        double3 xformOp:translate = (1, 0, 1)
        uniform token[] xformOpOrder = ["xformOp:translate"]
    }
    def Xform "C" (prepend apiSchemas = ["PhysicsRigidBodyAPI"])
    {
        double3 xformOp:translate = (2, 0, 1)
        uniform token[] xformOpOrder = ["xformOp:translate"]
    }
"""


def joint(name, typ, attrs="", apis=(), body0="/World/A", body1="/World/B"):
    meta = ("(prepend apiSchemas = [%s])" % ", ".join(f'"{a}"' for a in apis)) if apis else ""
    return f"""
    def {typ} "{name}" {meta}
    {{
        rel physics:body0 = <{body0}>
        rel physics:body1 = <{body1}>
        {attrs}
    }}
"""


def build(body, *, resolvers=None, builder=None, mpu=1.0):
    """Local harness: bodies by hand, then parse_joint + JointSpec.add_to. Returns (builder, {path: joint}, warnings)."""
    stage = Usd.Stage.CreateInMemory()
    stage.GetRootLayer().ImportFromString(
        f'#usda 1.0\n(\n    metersPerUnit = {mpu}\n    upAxis = "Z"\n)\ndef Xform "World"\n{{\n{BODIES}\n{body}\n}}\n'
    )
    b = builder or armillary.ModelBuilder()
    bodies = {}
    cache = UsdGeom.XformCache()
    for prim in stage.Traverse():
        if prim.HasAPI(UsdPhysics.RigidBodyAPI):
            t = cache.GetLocalToWorldTransform(prim).ExtractTranslation()
            bodies[str(prim.GetPath())] = b.add_link(xform=((t[0] * mpu, t[1] * mpu, t[2] * mpu), (0, 0, 0, 1)), mass=1.0)
    warnings = []
    ctx = J.JointContext(linear_unit=mpu, body_scale=lambda p: np.ones(3), resolvers=list(resolvers or []),
                         warn=lambda p, a, m: warnings.append((p, a, m)))  # fmt: skip
    joints, specs = {}, {}
    for prim in stage.Traverse():
        if prim.IsA(UsdPhysics.Joint):
            s = J.parse_joint(prim, ctx)
            specs[s.path] = s
            joints[s.path] = s.add_to(b, bodies.get(s.body0, -1), bodies[s.body1], s.X_B0J, s.X_B1J)
    return b, joints, specs, warnings


def dof(b, j, name):
    start = b.joint_qd_start[j]
    end = b.joint_qd_start[j + 1] if j + 1 < b.joint_count else b.joint_dof_count
    return np.array([getattr(b, name)[d] for d in range(start, end)], dtype=np.float64)


def newton_rev(attrs, typ="PhysicsRevoluteJoint", axis="X"):
    return joint("j", typ, f'uniform token physics:axis = "{axis}"\n        ' + attrs, apis=("NewtonJointAPI",))


ALL_SIX = """float newton:armature = 0.5
        float newton:damping = 2
        float newton:friction = 3
        float newton:velocityLimit = 180
        float newton:limitStiffness = 1000
        float newton:limitDamping = 20"""

NEWTON = [schemas.SchemaResolverNewton()]


@pytest.mark.parametrize("resolvers", [NEWTON, [], None], ids=["newton-resolver", "no-resolvers", "default"])
def test_angular_conversions(resolvers):
    # reference: arm 0.5 (not converted), damp 2/deg/s -> 114.59 per rad/s, fr 3, vl 180 deg/s -> pi rad/s,
    # limit_ke 1000/deg -> 57295.8 per rad, limit_kd 20 -> 1145.92
    b, js, _, _ = build(newton_rev(ALL_SIX), resolvers=resolvers)
    j = js["/World/j"]
    np.testing.assert_allclose(dof(b, j, "joint_armature"), [0.5])
    np.testing.assert_allclose(dof(b, j, "joint_damping"), [2 * R2D], rtol=1e-6)
    np.testing.assert_allclose(dof(b, j, "joint_friction"), [3.0])
    np.testing.assert_allclose(dof(b, j, "joint_velocity_limit"), [math.pi], rtol=1e-6)
    np.testing.assert_allclose(dof(b, j, "joint_limit_ke"), [1000 * R2D], rtol=1e-6)
    np.testing.assert_allclose(dof(b, j, "joint_limit_kd"), [20 * R2D], rtol=1e-6)


def test_linear_values_not_converted():
    # reference (prismatic): all six as authored at metersPerUnit = 1
    b, js, _, _ = build(newton_rev(ALL_SIX, typ="PhysicsPrismaticJoint"))
    j = js["/World/j"]
    for name, v in (("joint_armature", 0.5), ("joint_damping", 2), ("joint_friction", 3), ("joint_velocity_limit", 180),
                    ("joint_limit_ke", 1000), ("joint_limit_kd", 20)):  # fmt: skip
        np.testing.assert_allclose(dof(b, j, name), [v], err_msg=name)


def test_linear_values_in_stage_units():
    # centimeter stage: velocity cm/s -> x0.01, damping / stiffness per cm -> x100 (armature kg, friction N unchanged)
    b, js, _, _ = build(newton_rev(ALL_SIX, typ="PhysicsPrismaticJoint"), mpu=0.01)
    j = js["/World/j"]
    for name, v in (("joint_armature", 0.5), ("joint_damping", 200), ("joint_friction", 3), ("joint_velocity_limit", 1.8),
                    ("joint_limit_ke", 1e5), ("joint_limit_kd", 2000)):  # fmt: skip
        np.testing.assert_allclose(dof(b, j, name), [v], rtol=1e-6, err_msg=name)


def test_works_without_schemas_module(monkeypatch):
    """The importer reads newton:* by name when schemas.py (or newton-usd-schemas) is unavailable."""
    monkeypatch.setattr(J, "_schemas", lambda: None)
    b, js, _, _ = build(newton_rev(ALL_SIX), resolvers=[schemas.SchemaResolverMjc()])
    j = js["/World/j"]
    np.testing.assert_allclose(dof(b, j, "joint_velocity_limit"), [math.pi], rtol=1e-6)
    np.testing.assert_allclose(dof(b, j, "joint_damping"), [2 * R2D], rtol=1e-6)


def test_attributes_read_without_applied_api():
    # reference: newton:* attributes are read without NewtonJointAPI applied (arm 0.25, vl 360 deg/s -> 2 pi)
    body = joint("j", "PhysicsRevoluteJoint", "float newton:armature = 0.25\n        float newton:velocityLimit = 360")
    b, js, _, _ = build(body)
    np.testing.assert_allclose(dof(b, js["/World/j"], "joint_armature"), [0.25])
    np.testing.assert_allclose(dof(b, js["/World/j"], "joint_velocity_limit"), [2 * math.pi], rtol=1e-6)


# ----------------------------------------------------------------------------- sentinels
def test_limit_stiffness_inf_is_hard_limit():
    # reference: limitStiffness inf -> 1e8 per degree = 5.72958e9 per rad, limitDamping ignored (0)
    b, js, specs, _ = build(newton_rev("float newton:limitStiffness = inf\n        float newton:limitDamping = 5"))
    j = js["/World/j"]
    np.testing.assert_allclose(dof(b, j, "joint_limit_ke"), [5.72958e9], rtol=1e-5)
    np.testing.assert_allclose(dof(b, j, "joint_limit_kd"), [0.0])
    assert specs["/World/j"].extra["hard_limit"] is True


def test_minus_inf_sentinels_keep_builder_defaults():
    b = armillary.ModelBuilder()
    b.default_joint_cfg.limit_ke, b.default_joint_cfg.limit_kd = 123.0, 4.5
    b, js, specs, _ = build(newton_rev("float newton:limitStiffness = -inf\n        float newton:limitDamping = -inf\n"
                                       "        float newton:velocityLimit = inf"), builder=b)  # fmt: skip
    j = js["/World/j"]
    # reference (default builder): lke 1e4 lkd 10 vl 1e6 = the builder's defaults
    np.testing.assert_allclose(dof(b, j, "joint_limit_ke"), [123.0])
    np.testing.assert_allclose(dof(b, j, "joint_limit_kd"), [4.5])
    np.testing.assert_allclose(dof(b, j, "joint_velocity_limit"), [b.default_joint_cfg.velocity_limit])
    assert "hard_limit" not in specs["/World/j"].extra


def test_unauthored_schema_defaults_are_builder_defaults():
    b, js, _, _ = build(newton_rev(""))
    d = b.default_joint_cfg
    j = js["/World/j"]
    for name, v in (("joint_armature", d.armature), ("joint_damping", d.damping), ("joint_friction", d.friction),
                    ("joint_velocity_limit", d.velocity_limit), ("joint_limit_ke", d.limit_ke),
                    ("joint_limit_kd", d.limit_kd)):  # fmt: skip
        np.testing.assert_allclose(dof(b, j, name), [v], err_msg=name)


@pytest.mark.parametrize(
    "attr",
    ["newton:armature = -1", "newton:damping = -0.5", "newton:friction = inf", "newton:velocityLimit = 0",
     "newton:velocityLimit = -inf", "newton:limitStiffness = -3", "newton:limitDamping = -0.1",
     "newton:armature = nan"],
)  # fmt: skip
@pytest.mark.parametrize("resolvers", [NEWTON, None], ids=["newton-resolver", "by-name"])
def test_invalid_values_raise_naming_attribute(attr, resolvers):
    name = attr.split(" =")[0]
    with pytest.raises(USDImportError, match=rf"/World/j\.{name}"):
        build(newton_rev(f"float {attr}"), resolvers=resolvers)


def test_limit_damping_inf_warns():
    _, _, _, warns = build(newton_rev("float newton:limitDamping = inf"))
    assert [(w[0], w[1]) for w in warns] == [("/World/j", "newton:limitDamping")]


# ----------------------------------------------------------------------------- broadcast
def test_broadcast_to_d6_dofs_by_kind():
    body = joint("j", "PhysicsJoint", """float limit:transX:physics:low = -1
        float limit:transX:physics:high = 1
        float limit:rotY:physics:low = -30
        float limit:rotY:physics:high = 60
        float limit:rotZ:physics:low = -30
        float limit:rotZ:physics:high = 60
        """ + ALL_SIX, apis=("PhysicsLimitAPI:transX", "PhysicsLimitAPI:rotY", "PhysicsLimitAPI:rotZ", "NewtonJointAPI"))
    b, js, _, _ = build(body)
    j = js["/World/j"]
    np.testing.assert_allclose(dof(b, j, "joint_armature"), [0.5] * 3)
    np.testing.assert_allclose(dof(b, j, "joint_friction"), [3.0] * 3)
    np.testing.assert_allclose(dof(b, j, "joint_damping"), [2, 2 * R2D, 2 * R2D], rtol=1e-6)
    np.testing.assert_allclose(dof(b, j, "joint_velocity_limit"), [180, math.pi, math.pi], rtol=1e-6)
    np.testing.assert_allclose(dof(b, j, "joint_limit_ke"), [1000, 1000 * R2D, 1000 * R2D], rtol=1e-6)


def test_broadcast_to_ball():
    b, js, _, _ = build(joint("j", "PhysicsSphericalJoint", ALL_SIX, apis=("NewtonJointAPI",)))
    j = js["/World/j"]
    np.testing.assert_allclose(dof(b, j, "joint_velocity_limit"), [math.pi] * 3, rtol=1e-6)
    np.testing.assert_allclose(dof(b, j, "joint_damping"), [2 * R2D] * 3, rtol=1e-6)


def test_per_axis_forms_are_deprecated_fallbacks():
    # reference: broadcast newton:limitStiffness wins over newton:rotX:limitStiffness; per-axis
    # newton:rotY:limitDamping (7/deg -> 401.07) is used when no broadcast value exists, with a deprecation warning
    body = joint("j", "PhysicsJoint", """float limit:rotX:physics:low = -30
        float limit:rotX:physics:high = 60
        float limit:rotY:physics:low = -30
        float limit:rotY:physics:high = 60
        float newton:limitStiffness = 100
        float newton:rotX:limitStiffness = 200
        float newton:rotY:limitDamping = 7""", apis=("PhysicsLimitAPI:rotX", "PhysicsLimitAPI:rotY", "NewtonJointAPI"))
    b, js, _, warns = build(body, resolvers=NEWTON)
    j = js["/World/j"]
    np.testing.assert_allclose(dof(b, j, "joint_limit_ke"), [5729.578, 5729.578], rtol=1e-5)
    np.testing.assert_allclose(dof(b, j, "joint_limit_kd"), [10.0, 401.0705], rtol=1e-5)
    assert [w[1] for w in warns] == ["newton:rotY:limitDamping"]


# ----------------------------------------------------------------------------- other resolvers
MJC = """float mjc:stiffness = 3
        float mjc:springref = 30
        float mjc:ref = 10
        float mjc:armature = 0.4
        float mjc:damping = 2"""


def test_mjc_passive_spring_revolute():
    # reference (schema_resolvers=[Mjc, Newton]): stiffness 3 (per rad), rest_q = springref - ref = 20 deg = 0.349066,
    # armature 0.4, damping 2 (per rad: MuJoCo units)
    b, js, _, _ = build(joint("j", "PhysicsRevoluteJoint", MJC, apis=("MjcJointAPI",)),
                        resolvers=[schemas.SchemaResolverMjc(), schemas.SchemaResolverNewton()])  # fmt: skip
    j = js["/World/j"]
    np.testing.assert_allclose(dof(b, j, "joint_stiffness"), [3.0])
    np.testing.assert_allclose(b.joint_rest_q[b.joint_q_start[j]], 20 * D2R, rtol=1e-6)
    np.testing.assert_allclose(dof(b, j, "joint_armature"), [0.4])
    np.testing.assert_allclose(dof(b, j, "joint_damping"), [2.0], rtol=1e-6)


def test_mjc_passive_spring_prismatic():
    # reference: stiffness 3, rest_q = 0.3 - 0.1 = 0.2 m
    body = joint("j", "PhysicsPrismaticJoint", "float mjc:stiffness = 3\n        float mjc:springref = 0.3\n"
                 "        float mjc:ref = 0.1", apis=("MjcJointAPI",))  # fmt: skip
    b, js, _, _ = build(body, resolvers=[schemas.SchemaResolverMjc()])
    j = js["/World/j"]
    np.testing.assert_allclose(dof(b, j, "joint_stiffness"), [3.0])
    np.testing.assert_allclose(b.joint_rest_q[b.joint_q_start[j]], 0.2, rtol=1e-6)


def test_mjc_ignored_without_mjc_resolver():
    b, js, _, _ = build(joint("j", "PhysicsRevoluteJoint", MJC, apis=("MjcJointAPI",)), resolvers=NEWTON)
    j = js["/World/j"]
    np.testing.assert_allclose(dof(b, j, "joint_stiffness"), [0.0])
    assert b.joint_rest_q[b.joint_q_start[j]] == 0.0
    np.testing.assert_allclose(dof(b, j, "joint_armature"), [b.default_joint_cfg.armature])


def test_physx_velocity_limit_degrees():
    # reference (schema_resolvers=[Physx]): maxJointVelocity 180 deg/s -> pi (revolute), 180 (prismatic); armature 0.3
    px = "float physxJoint:maxJointVelocity = 180\n        float physxJoint:armature = 0.3"
    for typ, vl in (("PhysicsRevoluteJoint", math.pi), ("PhysicsPrismaticJoint", 180.0)):
        b, js, _, _ = build(joint("j", typ, px, apis=("PhysxJointAPI",)), resolvers=[schemas.SchemaResolverPhysx()])
        np.testing.assert_allclose(dof(b, js["/World/j"], "joint_velocity_limit"), [vl], rtol=1e-6)
        np.testing.assert_allclose(dof(b, js["/World/j"], "joint_armature"), [0.3])


BOTH = joint("j", "PhysicsRevoluteJoint", """float physxJoint:maxJointVelocity = 180
        float physxJoint:armature = 0.3
        float newton:armature = 0.1
        float mjc:armature = 0.2
        float newton:velocityLimit = 90
        float mjc:damping = 4
        float mjc:frictionloss = 0.3""", apis=("PhysxJointAPI", "NewtonJointAPI", "MjcJointAPI"))


@pytest.mark.parametrize(
    "order, arm, damp, fr, vl",
    [
        # reference: [Newton, Physx, Mjc] -> arm 0.1, damp 4.0, fr 0.3, vl pi/2
        (("Newton", "Physx", "Mjc"), 0.1, 4.0, 0.3, math.pi / 2),
        # reference: [Mjc, Physx] -> arm 0.2, damp 4.0, fr 0.3, vl pi (newton:* only as the last fallback)
        (("Mjc", "Physx"), 0.2, 4.0, 0.3, math.pi),
    ],
)
def test_resolver_priority(order, arm, damp, fr, vl):
    res = [getattr(schemas, f"SchemaResolver{n}")() for n in order]
    b, js, _, _ = build(BOTH, resolvers=res)
    j = js["/World/j"]
    np.testing.assert_allclose(dof(b, j, "joint_armature"), [arm])
    np.testing.assert_allclose(dof(b, j, "joint_damping"), [damp], rtol=1e-6)
    np.testing.assert_allclose(dof(b, j, "joint_friction"), [fr], rtol=1e-6)
    np.testing.assert_allclose(dof(b, j, "joint_velocity_limit"), [vl], rtol=1e-6)


# ----------------------------------------------------------------------------- mimic
@pytest.mark.parametrize("typ, coef0", [("PhysicsRevoluteJoint", 10 * D2R), ("PhysicsPrismaticJoint", 10.0)])
def test_mimic_info(typ, coef0):
    # reference: set_joint_mimic(follower, leader, coeffs=(0.174533, -2)) for a revolute, (10, -2) for a prismatic
    body = joint("lead", typ, 'uniform token physics:axis = "Z"') + joint(
        "follow", typ, 'uniform token physics:axis = "X"\n        rel newton:mimicJoint = </World/lead>\n'
        "        float newton:mimicCoef0 = 10\n        float newton:mimicCoef1 = -2", apis=("NewtonMimicAPI",),
        body1="/World/C")  # fmt: skip
    _, _, specs, _ = build(body)
    m = specs["/World/follow"].extra["mimic"]
    assert m["joint"] == "/World/lead" and m["enabled"] is True
    np.testing.assert_allclose([m["coef0"], m["coef1"]], [coef0, -2.0], rtol=1e-6)
    assert "mimic" not in specs["/World/lead"].extra


def test_mimic_self_reference_raises():
    body = joint("j", "PhysicsRevoluteJoint", "rel newton:mimicJoint = </World/j>", apis=("NewtonMimicAPI",))
    with pytest.raises(USDImportError, match=r"/World/j\.newton:mimicJoint"):
        build(body)


def test_authored_values_a_solver_ignores_are_warned_about_at_solver_construction(tmp_path):
    """newton:friction / armature on a revolute joint: SolverXPBD warns naming the prim and attribute."""
    import warnings

    import armillary

    text = """#usda 1.0
(
    upAxis = "Z"
    metersPerUnit = 1
)
def Xform "robot" (prepend apiSchemas = ["PhysicsArticulationRootAPI"])
{
    def Xform "a" (prepend apiSchemas = ["PhysicsRigidBodyAPI", "PhysicsMassAPI"])
    {
        float physics:mass = 1
        float3 physics:diagonalInertia = (0.1, 0.1, 0.1)
    }
    def PhysicsRevoluteJoint "hinge" (prepend apiSchemas = ["NewtonJointAPI"])
    {
        rel physics:body1 = </robot/a>
        uniform token physics:axis = "Z"
        float newton:friction = 0.5
        float newton:armature = 0.01
        float newton:limitStiffness = -inf
    }
}
"""
    path = tmp_path / "friction.usda"
    path.write_text(text)
    builder = armillary.ModelBuilder()
    builder.add_usd(str(path))
    model = builder.finalize()
    assert set(model.authored_features) == {("joint_friction", "</robot/hinge> newton:friction"),
                                            ("joint_armature", "</robot/hinge> newton:armature")}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        armillary.solvers.SolverXPBD(model)
    text = " | ".join(str(w.message) for w in caught)
    assert "SolverXPBD does not honour joint_friction" in text and "</robot/hinge> newton:friction" in text
    assert "joint_armature" in text
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        armillary.solvers.SolverMuJoCo(model)
    assert not [w for w in caught if "does not honour" in str(w.message)]

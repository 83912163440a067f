"""UsdPhysics joints -> JointSpec -> builder (armillary_importer_usd.joints).

Tests run through a small local harness (stage -> bodies added by hand -> parse_joint + add_to), so they
do not depend on the importer. Expected numbers marked "reference" were measured once by running the
reference engine (newton 1.8 ``ModelBuilder.add_usd``) on the same stage text, and are hard-coded.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pxr = pytest.importorskip("pxr")
from pxr import Usd, UsdGeom, UsdPhysics  # noqa: E402

import armillary  # noqa: E402
from armillary import JointTargetMode, JointType  # noqa: E402
from armillary_importer_usd.joints import (  # noqa: E402
    HARD_LIMIT_KE,
    JointContext,
    JointSpec,
    merge_stacked_joints,
    parse_joint,
    target_mode_from_gains,
)
from armillary_importer_usd.utils import USDImportError  # noqa: E402

R2D = 180.0 / math.pi

# ----------------------------------------------------------------------------- harness
BODIES = """
    def Xform "A" (prepend apiSchemas = ["PhysicsRigidBodyAPI", "PhysicsMassAPI"])
    {
        double3 xformOp:translate = (0, 0, 1)
        uniform token[] xformOpOrder = ["xformOp:translate"]
        float physics:mass = 1
    }
    def Xform "B" (prepend apiSchemas = ["PhysicsRigidBodyAPI", "PhysicsMassAPI"])
    {
        double3 xformOp:translate = (1, 0, 1)
        uniform token[] xformOpOrder = ["xformOp:translate"]
        float physics:mass = 1
    }
"""


def make_stage(body: str, mpu: float = 1.0, bodies: str = BODIES, root_meta: str = "") -> Usd.Stage:
    text = f"""#usda 1.0
(
    metersPerUnit = {mpu}
    upAxis = "Z"
)
def Xform "World" {root_meta}
{{
{bodies}
{body}
}}
"""
    stage = Usd.Stage.CreateInMemory()
    stage.GetRootLayer().ImportFromString(text)
    return stage


def joint(name: str, typ: str, attrs: str = "", apis=(), body0="/World/A", body1="/World/B") -> str:
    meta = ("(prepend apiSchemas = [%s])" % ", ".join(f'"{a}"' for a in apis)) if apis else ""
    rels = ""
    if body0:
        rels += f"rel physics:body0 = <{body0}>\n        "
    if body1:
        rels += f"rel physics:body1 = <{body1}>\n        "
    return f"""
    def {typ} "{name}" {meta}
    {{
        {rels}{attrs}
    }}
"""


class Harness:
    """Adds the stage's rigid bodies to a builder, then its joints through parse_joint / add_to."""

    def __init__(self, stage, *, resolvers=None, mobility=None, builder=None, **ctx_kw):
        self.stage = stage
        self.warnings: list[tuple] = []
        self.builder = builder or armillary.ModelBuilder()
        cache = UsdGeom.XformCache()
        self.bodies: dict[str, int] = {}
        self.scales: dict[str, np.ndarray] = {}
        lu = float(UsdGeom.GetStageMetersPerUnit(stage))
        for prim in stage.Traverse():
            if prim.HasAPI(UsdPhysics.RigidBodyAPI):
                m = np.array(cache.GetLocalToWorldTransform(prim), dtype=np.float64).T
                s = np.linalg.norm(m[:3, :3], axis=0)
                r = m[:3, :3] / s
                q = armillary_quat(r)
                self.bodies[str(prim.GetPath())] = self.builder.add_link(
                    xform=((m[:3, 3] * lu).tolist(), q), mass=1.0, label=str(prim.GetPath())
                )
                self.scales[str(prim.GetPath())] = s
        self.ctx = JointContext(
            linear_unit=lu,
            body_scale=lambda p: self.scales[p],
            resolvers=list(resolvers or []),
            warn=lambda path, attr, msg: self.warnings.append((path, attr, msg)),
            **ctx_kw,
        )
        self.specs = []
        for prim in stage.Traverse():
            if prim.IsA(UsdPhysics.Joint):
                s = parse_joint(prim, self.ctx)
                if s is not None:
                    self.specs.append(s)
        if mobility is not None:
            self.specs = merge_stacked_joints(self.specs, mobility, self.ctx.warn)
        self.joints = {}
        for s in self.specs:
            parent = self.bodies[s.body0] if s.body0 is not None else -1
            self.joints[s.path] = s.add_to(self.builder, parent, self.bodies[s.body1], s.X_B0J, s.X_B1J)

    def dofs(self, path):
        b = self.builder
        j = self.joints[path]
        start = b.joint_qd_start[j]
        end = b.joint_qd_start[j + 1] if j + 1 < b.joint_count else b.joint_dof_count
        return list(range(start, end))

    def arr(self, name, path):
        return np.array([getattr(self.builder, name)[d] for d in self.dofs(path)], dtype=np.float64)

    def axes(self, path):
        return np.array([[float(v) for v in self.builder.joint_axis[d]] for d in self.dofs(path)])


def armillary_quat(r):
    import warp as wp

    q = wp.quat_from_matrix(wp.mat33(*r.flatten().tolist()))
    return [float(q[0]), float(q[1]), float(q[2]), float(q[3])]


def tf(t):
    return np.array([float(v) for v in t])


def build(body: str, **kw) -> Harness:
    mpu = kw.pop("mpu", 1.0)
    return Harness(make_stage(body, mpu=mpu), **kw)


# ----------------------------------------------------------------------------- revolute
REV_FULL = joint(
    "rev",
    "PhysicsRevoluteJoint",
    """uniform token physics:axis = "Y"
        float physics:lowerLimit = -45
        float physics:upperLimit = 90
        point3f physics:localPos0 = (0.5, 0, 0)
        point3f physics:localPos1 = (-0.5, 0, 0)
        quatf physics:localRot0 = (0.7071068, 0, 0, 0.7071068)
        quatf physics:localRot1 = (0.7071068, 0, 0, 0.7071068)
        float drive:angular:physics:stiffness = 100
        float drive:angular:physics:damping = 10
        float drive:angular:physics:targetPosition = 30
        float drive:angular:physics:targetVelocity = 60
        float drive:angular:physics:maxForce = 50
        float newton:armature = 0.5
        float newton:damping = 2
        float newton:friction = 3
        float newton:velocityLimit = 180
        float newton:limitStiffness = 1000
        float newton:limitDamping = 20""",
    apis=("PhysicsDriveAPI:angular", "NewtonJointAPI"),
)


def test_revolute_matches_reference():
    h = build(REV_FULL)
    b, j = h.builder, h.joints["/World/rev"]
    assert b.joint_type[j] == int(JointType.REVOLUTE)
    assert b.joint_parent[j] == h.bodies["/World/A"] and b.joint_child[j] == h.bodies["/World/B"]
    # reference: X_p [0.5,0,0, 0,0,0.70711,0.70711], X_c [-0.5,0,0, 0,0,0.70711,0.70711]
    np.testing.assert_allclose(tf(b.joint_X_p[j]), [0.5, 0, 0, 0, 0, 0.70710678, 0.70710678], atol=1e-6)
    np.testing.assert_allclose(tf(b.joint_X_c[j]), [-0.5, 0, 0, 0, 0, 0.70710678, 0.70710678], atol=1e-6)
    np.testing.assert_allclose(h.axes("/World/rev"), [[0, 1, 0]])
    # reference: lim=(-0.785398,1.5708) lke=57295.8 lkd=1145.92 ke=5729.58 kd=572.958 target_q=0.5236
    # target_qd=1.0472 mode=POSITION arm=0.5 damp=114.59 fr=3 vl=3.14159 el=50
    np.testing.assert_allclose(h.arr("joint_limit_lower", "/World/rev"), [-math.pi / 4], rtol=1e-6)
    np.testing.assert_allclose(h.arr("joint_limit_upper", "/World/rev"), [math.pi / 2], rtol=1e-6)
    np.testing.assert_allclose(h.arr("joint_limit_ke", "/World/rev"), [57295.78], rtol=1e-5)
    np.testing.assert_allclose(h.arr("joint_limit_kd", "/World/rev"), [1145.916], rtol=1e-5)
    np.testing.assert_allclose(h.arr("joint_target_ke", "/World/rev"), [5729.578], rtol=1e-5)
    np.testing.assert_allclose(h.arr("joint_target_kd", "/World/rev"), [572.9578], rtol=1e-5)
    np.testing.assert_allclose(b.joint_target_q[b.joint_q_start[j]], 0.5235988, rtol=1e-6)
    np.testing.assert_allclose(h.arr("joint_target_qd", "/World/rev"), [1.0471976], rtol=1e-6)
    assert h.arr("joint_target_mode", "/World/rev").tolist() == [int(JointTargetMode.POSITION)]
    np.testing.assert_allclose(h.arr("joint_armature", "/World/rev"), [0.5])
    np.testing.assert_allclose(h.arr("joint_damping", "/World/rev"), [114.59156], rtol=1e-6)
    np.testing.assert_allclose(h.arr("joint_friction", "/World/rev"), [3.0])
    np.testing.assert_allclose(h.arr("joint_velocity_limit", "/World/rev"), [math.pi], rtol=1e-6)
    np.testing.assert_allclose(h.arr("joint_effort_limit", "/World/rev"), [50.0])
    assert b.joint_collision_filter_parent[j] is True
    assert h.warnings == []


def test_revolute_gains_scaling_and_position_velocity():
    # reference (joint_drive_gains_scaling=2, force_position_velocity_actuation=True): ke=11459.2 kd=1145.92 mode=3
    h = build(REV_FULL, joint_drive_gains_scaling=2.0, force_position_velocity_actuation=True)
    np.testing.assert_allclose(h.arr("joint_target_ke", "/World/rev"), [11459.156], rtol=1e-5)
    np.testing.assert_allclose(h.arr("joint_target_kd", "/World/rev"), [1145.9156], rtol=1e-5)
    assert h.arr("joint_target_mode", "/World/rev").tolist() == [int(JointTargetMode.POSITION_VELOCITY)]


@pytest.mark.parametrize(
    "attrs, mode, ke, kd, effort",
    [
        # reference: drive with zero gains -> EFFORT, effort_limit inf (maxForce default)
        ("float drive:angular:physics:stiffness = 0", JointTargetMode.EFFORT, 0.0, 0.0, math.inf),
        # reference: damping only -> VELOCITY, kd = 3 * 180/pi = 171.887
        ("float drive:angular:physics:damping = 3", JointTargetMode.VELOCITY, 0.0, 171.88733, math.inf),
    ],
)
def test_drive_modes(attrs, mode, ke, kd, effort):
    h = build(joint("j", "PhysicsRevoluteJoint", 'uniform token physics:axis = "X"\n        ' + attrs,
                    apis=("PhysicsDriveAPI:angular",)))  # fmt: skip
    assert h.arr("joint_target_mode", "/World/j").tolist() == [int(mode)]
    np.testing.assert_allclose(h.arr("joint_target_ke", "/World/j"), [ke], rtol=1e-5)
    np.testing.assert_allclose(h.arr("joint_target_kd", "/World/j"), [kd], rtol=1e-5)
    assert h.arr("joint_effort_limit", "/World/j")[0] == effort


def test_no_drive_uses_builder_defaults_and_mode_none():
    # reference: unauthored values take builder.default_joint_cfg (armature 0.7, limit_ke 11, ...), mode NONE
    b = armillary.ModelBuilder()
    c = b.default_joint_cfg
    c.armature, c.limit_ke, c.limit_kd, c.damping, c.friction = 0.7, 11.0, 3.0, 0.4, 0.6
    c.velocity_limit, c.effort_limit, c.target_ke, c.target_kd = 55.0, 66.0, 9.0, 8.0
    h = Harness(make_stage(joint("j", "PhysicsRevoluteJoint", 'uniform token physics:axis = "Z"\n'
                                 "        float physics:lowerLimit = -10\n        float physics:upperLimit = 20")),
                builder=b)  # fmt: skip
    for name, v in (("joint_armature", 0.7), ("joint_limit_ke", 11.0), ("joint_limit_kd", 3.0), ("joint_damping", 0.4),
                    ("joint_friction", 0.6), ("joint_velocity_limit", 55.0), ("joint_effort_limit", 66.0),
                    ("joint_target_ke", 9.0), ("joint_target_kd", 8.0)):  # fmt: skip
        np.testing.assert_allclose(h.arr(name, "/World/j"), [v], err_msg=name)
    np.testing.assert_allclose(h.arr("joint_limit_lower", "/World/j"), [-math.radians(10)], rtol=1e-6)
    assert h.arr("joint_target_mode", "/World/j").tolist() == [int(JointTargetMode.NONE)]


def test_unlimited_sides():
    # reference: lowerLimit -inf -> -1e10 (unlimited), upperLimit 30 deg -> 0.523599
    h = build(joint("j", "PhysicsRevoluteJoint", 'uniform token physics:axis = "X"\n'
                    "        float physics:lowerLimit = -inf\n        float physics:upperLimit = 30"))  # fmt: skip
    np.testing.assert_allclose(h.arr("joint_limit_lower", "/World/j"), [-1e10])
    np.testing.assert_allclose(h.arr("joint_limit_upper", "/World/j"), [math.radians(30)], rtol=1e-6)


def test_revolute_lower_above_upper_raises():
    with pytest.raises(USDImportError, match=r"/World/j.*lowerLimit"):
        build(joint("j", "PhysicsRevoluteJoint", "float physics:lowerLimit = 30\n        float physics:upperLimit = -30"))


def test_bad_axis_token_raises():
    with pytest.raises(USDImportError, match=r"/World/j\.physics:axis.*'W'"):
        build(joint("j", "PhysicsRevoluteJoint", 'uniform token physics:axis = "W"'))


def test_wrong_drive_instance_warns():
    h = build(joint("j", "PhysicsRevoluteJoint", "float drive:linear:physics:stiffness = 10",
                    apis=("PhysicsDriveAPI:linear",)))  # fmt: skip
    assert h.arr("joint_target_ke", "/World/j").tolist() == [0.0]
    assert any(w[0] == "/World/j" and "linear drive" in w[2] for w in h.warnings)


def test_acceleration_drive_warns():
    h = build(joint("j", "PhysicsRevoluteJoint", 'uniform token drive:angular:physics:type = "acceleration"\n'
                    "        float drive:angular:physics:stiffness = 10", apis=("PhysicsDriveAPI:angular",)))  # fmt: skip
    np.testing.assert_allclose(h.arr("joint_target_ke", "/World/j"), [572.9578], rtol=1e-5)  # reference
    assert any("acceleration" in w[2] for w in h.warnings)


# ----------------------------------------------------------------------------- prismatic
PRI = joint(
    "pri",
    "PhysicsPrismaticJoint",
    """uniform token physics:axis = "Z"
        float physics:lowerLimit = -0.5
        float physics:upperLimit = inf
        point3f physics:localPos0 = (0.5, 0, 0)
        float drive:linear:physics:stiffness = 100
        float drive:linear:physics:targetPosition = 0.3
        float drive:linear:physics:targetVelocity = 0.2
        float newton:armature = 0.5
        float newton:damping = 2
        float newton:friction = 3
        float newton:velocityLimit = 1.5
        float newton:limitStiffness = inf
        float newton:limitDamping = -inf""",
    apis=("PhysicsDriveAPI:linear", "NewtonJointAPI"),
)


def test_prismatic_matches_reference():
    h = build(PRI)
    b, j = h.builder, h.joints["/World/pri"]
    assert b.joint_type[j] == int(JointType.PRISMATIC)
    np.testing.assert_allclose(h.axes("/World/pri"), [[0, 0, 1]])
    np.testing.assert_allclose(tf(b.joint_X_p[j]), [0.5, 0, 0, 0, 0, 0, 1], atol=1e-7)
    # reference: lim=(-0.5,1e10) lke=1e8 (hard) lkd=0 ke=100 kd=0 target_q=0.3 target_qd=0.2 mode=POSITION
    # arm=0.5 damp=2 fr=3 vl=1.5 el=inf
    np.testing.assert_allclose(h.arr("joint_limit_lower", "/World/pri"), [-0.5])
    np.testing.assert_allclose(h.arr("joint_limit_upper", "/World/pri"), [1e10])
    np.testing.assert_allclose(h.arr("joint_limit_ke", "/World/pri"), [1e8])
    np.testing.assert_allclose(h.arr("joint_limit_kd", "/World/pri"), [0.0])
    np.testing.assert_allclose(h.arr("joint_target_ke", "/World/pri"), [100.0])
    np.testing.assert_allclose(b.joint_target_q[b.joint_q_start[j]], 0.3, rtol=1e-6)
    np.testing.assert_allclose(h.arr("joint_target_qd", "/World/pri"), [0.2], rtol=1e-6)
    np.testing.assert_allclose(h.arr("joint_damping", "/World/pri"), [2.0])
    np.testing.assert_allclose(h.arr("joint_velocity_limit", "/World/pri"), [1.5])
    assert h.arr("joint_effort_limit", "/World/pri")[0] == math.inf
    assert h.specs[0].extra.get("hard_limit") is True


def test_prismatic_linear_unit_scaling():
    # stage in centimeters: positions, limits and targets x 0.01, linear gains / 0.01, velocities x 0.01
    # (the reference engine does not convert metersPerUnit; armillary does)
    h = build(PRI.replace("float newton:limitStiffness = inf", "float newton:limitStiffness = 50"), mpu=0.01)
    b, j = h.builder, h.joints["/World/pri"]
    np.testing.assert_allclose(tf(b.joint_X_p[j])[:3], [0.005, 0, 0], atol=1e-9)
    np.testing.assert_allclose(h.arr("joint_limit_lower", "/World/pri"), [-0.005], rtol=1e-6)
    np.testing.assert_allclose(h.arr("joint_target_ke", "/World/pri"), [100.0 / 0.01], rtol=1e-6)
    np.testing.assert_allclose(b.joint_target_q[b.joint_q_start[j]], 0.003, rtol=1e-6)
    np.testing.assert_allclose(h.arr("joint_velocity_limit", "/World/pri"), [0.015], rtol=1e-6)
    np.testing.assert_allclose(h.arr("joint_damping", "/World/pri"), [200.0], rtol=1e-6)
    np.testing.assert_allclose(h.arr("joint_limit_ke", "/World/pri"), [5000.0], rtol=1e-6)


# ----------------------------------------------------------------------------- frames
def test_local_pos_scaled_by_body_world_scale():
    bodies = BODIES.replace(
        'double3 xformOp:translate = (1, 0, 1)\n        uniform token[] xformOpOrder = ["xformOp:translate"]',
        'double3 xformOp:translate = (1, 0, 1)\n        float3 xformOp:scale = (2, 3, 4)\n'
        '        uniform token[] xformOpOrder = ["xformOp:translate", "xformOp:scale"]',
    )
    stage = make_stage(joint("j", "PhysicsFixedJoint", "point3f physics:localPos1 = (0.5, 0.5, 0.5)"), bodies=bodies)
    h = Harness(stage)
    np.testing.assert_allclose(tf(h.builder.joint_X_c[h.joints["/World/j"]])[:3], [1.0, 1.5, 2.0], atol=1e-6)


def test_quaternion_real_first_convention():
    # Gf quat (real=0.9238795, i=0, j=0.3826834, k=0): 45 deg about Y -> xyzw (0, 0.38268, 0, 0.92388)
    h = build(joint("j", "PhysicsFixedJoint", "quatf physics:localRot0 = (0.9238795, 0, 0.3826834, 0)"))
    np.testing.assert_allclose(tf(h.builder.joint_X_p[h.joints["/World/j"]])[3:], [0, 0.3826834, 0, 0.9238795], atol=1e-6)


def test_zero_quaternion_raises():
    with pytest.raises(USDImportError, match=r"/World/j\.physics:localRot1"):
        build(joint("j", "PhysicsFixedJoint", "quatf physics:localRot1 = (0, 0, 0, 0)"))


def test_missing_body_target_raises_and_names_relationship():
    with pytest.raises(USDImportError, match=r"/World/j\.physics:body1.*/World/Nope"):
        build(joint("j", "PhysicsRevoluteJoint", body1="/World/Nope"))


def test_both_bodies_empty_raises():
    with pytest.raises(USDImportError, match=r"/World/j.*both physics:body0 and physics:body1"):
        build(joint("j", "PhysicsRevoluteJoint", body0=None, body1=None))


def test_same_body_twice_raises():
    with pytest.raises(USDImportError, match=r"/World/j\.physics:body1"):
        build(joint("j", "PhysicsRevoluteJoint", body0="/World/A", body1="/World/A"))


def test_world_joint_frame_in_world_and_no_filter():
    h = build(joint("j", "PhysicsRevoluteJoint", "point3f physics:localPos0 = (0.5, 0, 1)\n"
                    "        point3f physics:localPos1 = (-0.5, 0, 0)", body0=None))  # fmt: skip
    s = h.specs[0]
    assert s.body0 is None and s.body1 == "/World/B"
    b, j = h.builder, h.joints["/World/j"]
    assert b.joint_parent[j] == -1
    np.testing.assert_allclose(tf(b.joint_X_p[j])[:3], [0.5, 0, 1])
    assert s.collision_filter_parent is False


def test_body0_only_is_flipped():
    h = build(joint("j", "PhysicsRevoluteJoint", 'uniform token physics:axis = "Z"\n'
                    "        float physics:lowerLimit = -10\n        float physics:upperLimit = 20", body1=None))  # fmt: skip
    s = h.specs[0]
    assert (s.body0, s.body1) == (None, "/World/A") and s.extra["flipped"] is True
    np.testing.assert_allclose(h.axes("/World/j"), [[0, 0, -1]])
    np.testing.assert_allclose(h.arr("joint_limit_lower", "/World/j"), [-math.radians(10)], rtol=1e-6)


def test_target_below_rigid_body_attaches_to_body():
    bodies = BODIES.replace(
        '        float physics:mass = 1\n    }\n    def Xform "B"',
        '        float physics:mass = 1\n        def Xform "site"\n        {\n'
        '            double3 xformOp:translate = (0, 0.25, 0)\n            uniform token[] xformOpOrder = ["xformOp:translate"]\n'
        '        }\n    }\n    def Xform "B"',
    )
    stage = make_stage(joint("j", "PhysicsFixedJoint", "point3f physics:localPos0 = (0.5, 0, 0)", body0="/World/A/site"),
                       bodies=bodies)  # fmt: skip
    h = Harness(stage)
    assert h.specs[0].body0 == "/World/A"
    np.testing.assert_allclose(tf(h.builder.joint_X_p[h.joints["/World/j"]])[:3], [0.5, 0.25, 0], atol=1e-6)


# ----------------------------------------------------------------------------- flags
def test_flags_enabled_exclude_collision_break():
    h = build(joint("j", "PhysicsRevoluteJoint", "bool physics:jointEnabled = 0\n"
                    "        bool physics:excludeFromArticulation = 1\n        bool physics:collisionEnabled = 1\n"
                    "        float physics:breakForce = 100\n        float physics:breakTorque = 50"),
              only_load_enabled_joints=False)  # fmt: skip
    s = h.specs[0]
    assert s.enabled is False and s.exclude_from_articulation is True and s.collision_filter_parent is False
    assert s.extra["break_force"] == 100.0 and s.extra["break_torque"] == 50.0
    assert h.builder.joint_enabled[h.joints["/World/j"]] is False
    assert h.builder.joint_collision_filter_parent[h.joints["/World/j"]] is False
    assert {w[1] for w in h.warnings} >= {"physics:breakForce", "physics:breakTorque"}


def test_disabled_joint_skipped_when_only_enabled():
    h = build(joint("j", "PhysicsRevoluteJoint", "bool physics:jointEnabled = 0"))
    assert h.specs == [] and h.builder.joint_count == 0


# ----------------------------------------------------------------------------- other joint types
def test_spherical_broadcast_and_cone_limit_warning():
    h = build(joint("j", "PhysicsSphericalJoint", 'uniform token physics:axis = "X"\n'
                    "        float physics:coneAngle0Limit = 30\n        float physics:coneAngle1Limit = 40\n"
                    "        float newton:armature = 0.2\n        float newton:damping = 1",
                    apis=("NewtonJointAPI",)))  # fmt: skip
    b, j = h.builder, h.joints["/World/j"]
    assert b.joint_type[j] == int(JointType.BALL) and tuple(b.joint_dof_dim[j]) == (0, 3)
    # reference: arm=0.2, damp=57.29578 on all three DOFs, limits unlimited (cone limits ignored)
    np.testing.assert_allclose(h.arr("joint_armature", "/World/j"), [0.2] * 3)
    np.testing.assert_allclose(h.arr("joint_damping", "/World/j"), [57.29578] * 3, rtol=1e-6)
    np.testing.assert_allclose(h.arr("joint_limit_upper", "/World/j"), [1e10] * 3)
    assert {w[1] for w in h.warnings} == {"physics:coneAngle0Limit", "physics:coneAngle1Limit"}


def test_fixed_joint():
    h = build(joint("j", "PhysicsFixedJoint"))
    assert h.builder.joint_type[h.joints["/World/j"]] == int(JointType.FIXED) and h.dofs("/World/j") == []


def test_distance_joint():
    h = build(joint("j", "PhysicsDistanceJoint", "float physics:minDistance = 0.2\n        float physics:maxDistance = 0.8"))
    b, j = h.builder, h.joints["/World/j"]
    # reference: type DISTANCE, dim (3,3), dof0 limits (0.2, 0.8) with lke 1e4 / lkd 10, others unlimited with 0 gains
    assert b.joint_type[j] == int(JointType.DISTANCE) and tuple(b.joint_dof_dim[j]) == (3, 3)
    np.testing.assert_allclose(h.arr("joint_limit_lower", "/World/j"), [0.2] + [-1e10] * 5)
    np.testing.assert_allclose(h.arr("joint_limit_upper", "/World/j"), [0.8] + [1e10] * 5)
    np.testing.assert_allclose(h.arr("joint_limit_ke", "/World/j"), [1e4, 0, 0, 0, 0, 0])


def test_distance_joint_unlimited_and_bad_order():
    h = build(joint("j", "PhysicsDistanceJoint"))
    np.testing.assert_allclose(h.arr("joint_limit_lower", "/World/j")[:1], [-1.0])  # reference: (-1, -1)
    np.testing.assert_allclose(h.arr("joint_limit_upper", "/World/j")[:1], [-1.0])
    with pytest.raises(USDImportError, match=r"/World/j\.physics:minDistance"):
        build(joint("j", "PhysicsDistanceJoint", "float physics:minDistance = 0.9\n        float physics:maxDistance = 0.1"))


D6 = joint(
    "j",
    "PhysicsJoint",
    """float limit:transX:physics:low = -0.1
        float limit:transX:physics:high = 0.2
        float limit:transY:physics:low = 1
        float limit:transY:physics:high = -1
        float limit:rotX:physics:low = -30
        float limit:rotX:physics:high = 60
        float limit:rotY:physics:low = -inf
        float limit:rotY:physics:high = inf
        float limit:rotZ:physics:low = 10
        float limit:rotZ:physics:high = 10
        float drive:rotX:physics:stiffness = 10
        float drive:rotX:physics:damping = 1
        float drive:rotX:physics:targetPosition = 15
        float drive:transX:physics:stiffness = 10
        float drive:transX:physics:targetPosition = 0.05
        float drive:transX:physics:maxForce = 7
        float newton:armature = 0.1
        float newton:damping = 1
        float newton:velocityLimit = 90""",
    apis=("PhysicsLimitAPI:transX", "PhysicsLimitAPI:transY", "PhysicsLimitAPI:rotX", "PhysicsLimitAPI:rotY",
          "PhysicsLimitAPI:rotZ", "PhysicsDriveAPI:rotX", "PhysicsDriveAPI:transX", "NewtonJointAPI"),
)  # fmt: skip


def test_generic_d6_matches_reference():
    h = build(D6)
    b, j = h.builder, h.joints["/World/j"]
    # reference: D6 dim (1, 2): transX, rotX, rotY (transY low>high locked, rotZ low==high locked, transZ no limit)
    assert b.joint_type[j] == int(JointType.D6) and tuple(b.joint_dof_dim[j]) == (1, 2)
    np.testing.assert_allclose(h.axes("/World/j"), [[1, 0, 0], [1, 0, 0], [0, 1, 0]])
    np.testing.assert_allclose(h.arr("joint_limit_lower", "/World/j")[:2], [-0.1, -math.radians(30)], rtol=1e-6)
    np.testing.assert_allclose(h.arr("joint_limit_upper", "/World/j")[:2], [0.2, math.radians(60)], rtol=1e-6)
    # reference gives +-1.74533e8 for the unlimited rotY (1e10 converted as degrees); armillary keeps 1e10
    np.testing.assert_allclose(h.arr("joint_limit_upper", "/World/j")[2], 1e10)
    # reference: ke=[10, 572.958, 0] kd=[0, 57.2958, 0] target_q=[0.05, 0.2618, 0] modes [1, 1, 0]
    np.testing.assert_allclose(h.arr("joint_target_ke", "/World/j"), [10, 572.9578, 0], rtol=1e-5)
    np.testing.assert_allclose(h.arr("joint_target_kd", "/World/j"), [0, 57.29578, 0], rtol=1e-5)
    q0 = b.joint_q_start[j]
    np.testing.assert_allclose(b.joint_target_q[q0:q0 + 3], [0.05, 0.2617994, 0], rtol=1e-6)
    assert h.arr("joint_target_mode", "/World/j").tolist() == [1, 1, 0]
    # reference: arm 0.1 x3, damp [1, 57.2958, 57.2958], vl [90, 1.5708, 1.5708], el [7, inf, 1e6]
    np.testing.assert_allclose(h.arr("joint_armature", "/World/j"), [0.1] * 3)
    np.testing.assert_allclose(h.arr("joint_damping", "/World/j"), [1, 57.29578, 57.29578], rtol=1e-6)
    np.testing.assert_allclose(h.arr("joint_velocity_limit", "/World/j"), [90, math.pi / 2, math.pi / 2], rtol=1e-6)
    np.testing.assert_allclose(h.arr("joint_effort_limit", "/World/j")[:2], [7, math.inf])


def test_generic_d6_without_limits_is_locked_and_drive_warns():
    # reference: a PhysicsJoint without PhysicsLimitAPI instances has no DOF; a drive on such an axis is dropped
    h = build(joint("j", "PhysicsJoint", "float drive:rotY:physics:stiffness = 10", apis=("PhysicsDriveAPI:rotY",)))
    assert tuple(h.builder.joint_dof_dim[h.joints["/World/j"]]) == (0, 0)
    assert [w[1] for w in h.warnings] == ["drive:rotY"]


def test_generic_d6_distance_limit_warns():
    h = build(joint("j", "PhysicsJoint", "float limit:distance:physics:low = 0.1\n"
                    "        float limit:distance:physics:high = 0.5", apis=("PhysicsLimitAPI:distance",)))  # fmt: skip
    assert h.dofs("/World/j") == [] and [w[1] for w in h.warnings] == ["limit:distance"]


def test_non_joint_prim_raises():
    stage = make_stage("")
    with pytest.raises(USDImportError, match="/World/A"):
        parse_joint(stage.GetPrimAtPath("/World/A"), JointContext())


# ----------------------------------------------------------------------------- target mode helper
@pytest.mark.parametrize(
    "ke, kd, force, has, mode",
    [(0, 0, False, False, JointTargetMode.NONE), (5, 5, False, False, JointTargetMode.NONE),
     (0, 0, False, True, JointTargetMode.EFFORT), (5, 0, False, True, JointTargetMode.POSITION),
     (0, 5, False, True, JointTargetMode.VELOCITY), (5, 5, False, True, JointTargetMode.POSITION),
     (5, 5, True, True, JointTargetMode.POSITION_VELOCITY)],
)  # fmt: skip
def test_target_mode_from_gains(ke, kd, force, has, mode):
    # the reference's JointTargetMode.from_gains gives the same table
    assert target_mode_from_gains(ke, kd, force_position_velocity=force, has_drive=has) == mode


# ----------------------------------------------------------------------------- merging
def rev(name, axis, extra="", typ="PhysicsRevoluteJoint", pos0="(0.5, 0, 0)", pos1="(-0.5, 0, 0)",
        rot0="(1, 0, 0, 0)", rot1="(1, 0, 0, 0)", apis=("NewtonJointAPI",), body0="/World/A", body1="/World/B"):  # fmt: skip
    return joint(name, typ, f"""uniform token physics:axis = "{axis}"
        point3f physics:localPos0 = {pos0}
        point3f physics:localPos1 = {pos1}
        quatf physics:localRot0 = {rot0}
        quatf physics:localRot1 = {rot1}
        {extra}""", apis=apis, body0=body0, body1=body1)  # fmt: skip


THREE = (
    rev("jz", "Z", "float physics:lowerLimit = -10\n        float physics:upperLimit = 20\n        float newton:armature = 0.1")
    + rev("jx", "X", "float newton:armature = 0.2\n        float newton:damping = 1")
    + rev("jy", "Y", "float newton:armature = 0.3\n        float physics:lowerLimit = -30\n        float physics:upperLimit = 40")
)


def test_merge_three_revolutes_traversal_order():
    h = build(THREE, mobility=True)
    assert len(h.specs) == 1
    s = h.specs[0]
    assert s.joint_type == JointType.D6 and s.source_paths == ["/World/jz", "/World/jx", "/World/jy"]
    assert s.dof_sources == ["/World/jz", "/World/jx", "/World/jy"]
    b, j = h.builder, h.joints["/World/jz"]
    assert tuple(b.joint_dof_dim[j]) == (0, 3)
    # DOF order = traversal order (the reference orders by prim path: jx, jy, jz; values per DOF match)
    np.testing.assert_allclose(h.axes("/World/jz"), [[0, 0, 1], [1, 0, 0], [0, 1, 0]])
    np.testing.assert_allclose(h.arr("joint_armature", "/World/jz"), [0.1, 0.2, 0.3])
    np.testing.assert_allclose(h.arr("joint_damping", "/World/jz"), [0.0, 57.29578, 0.0], rtol=1e-6)
    np.testing.assert_allclose(h.arr("joint_limit_lower", "/World/jz"), [-math.radians(10), -1e10, -math.radians(30)], rtol=1e-6)
    np.testing.assert_allclose(h.arr("joint_limit_upper", "/World/jz"), [math.radians(20), 1e10, math.radians(40)], rtol=1e-6)
    np.testing.assert_allclose(tf(b.joint_X_p[j]), [0.5, 0, 0, 0, 0, 0, 1])
    np.testing.assert_allclose(tf(b.joint_X_c[j]), [-0.5, 0, 0, 0, 0, 0, 1])


def test_merge_false_leaves_list_unchanged():
    h = build(THREE)
    specs = list(h.specs)
    assert merge_stacked_joints(specs, False, None) is specs
    assert [s.path for s in specs] == ["/World/jz", "/World/jx", "/World/jy"]


def test_merge_revolute_and_prismatic_linear_first():
    h = build(rev("jz", "Z") + rev("px", "X", "float physics:lowerLimit = -0.1\n        float physics:upperLimit = 0.2",
                                   typ="PhysicsPrismaticJoint"), mobility=True)  # fmt: skip
    b, j = h.builder, h.joints["/World/jz"]
    # reference: D6 (1, 1): dof0 X linear (-0.1, 0.2), dof1 Z angular
    assert tuple(b.joint_dof_dim[j]) == (1, 1)
    np.testing.assert_allclose(h.axes("/World/jz"), [[1, 0, 0], [0, 0, 1]])
    np.testing.assert_allclose(h.arr("joint_limit_lower", "/World/jz"), [-0.1, -1e10])


def test_merge_reexpresses_axes_in_first_frame():
    # jb's frame is rotated 90 deg about Z; its X axis is world Y. In ja's (identity) frame: (0, 1, 0).
    # reference (first joint by path is the rotated one): axes [1,0,0], [0,-1,0] in the rotated frame.
    h = build(rev("ja", "X") + rev("jb", "X", rot0="(0.7071068, 0, 0, 0.7071068)", rot1="(0.7071068, 0, 0, 0.7071068)"),
              mobility=True)  # fmt: skip
    np.testing.assert_allclose(h.axes("/World/ja"), [[1, 0, 0], [0, 1, 0]], atol=1e-6)
    h = build(rev("jb", "X", rot0="(0.7071068, 0, 0, 0.7071068)", rot1="(0.7071068, 0, 0, 0.7071068)") + rev("ja", "X"),
              mobility=True)  # fmt: skip
    np.testing.assert_allclose(h.axes("/World/jb"), [[1, 0, 0], [0, -1, 0]], atol=1e-6)


def test_merge_non_orthogonal_raises_naming_prims():
    # jb's X axis is tilted 30 deg about Y towards -Z: not orthogonal to ja's Z axis (the reference accepts it)
    body = rev("ja", "Z") + rev("jb", "X", rot0="(0.9659258, 0, 0.258819, 0)", rot1="(0.9659258, 0, 0.258819, 0)")
    with pytest.raises(USDImportError, match=r"/World/ja.*/World/jb.*non-orthogonal"):
        build(body, mobility=True)
    build(body, mobility=False)  # stays two joints


def test_merge_parallel_axes_raises():
    with pytest.raises(USDImportError, match="non-orthogonal"):
        build(rev("ja", "Z") + rev("jb", "Z"), mobility=True)


def test_merge_different_anchor_warns():
    # reference: warns "different anchor positions" and uses the representative's frames
    h = build(rev("ja", "Z") + rev("jb", "X", pos0="(0.6, 0, 0)", pos1="(-0.4, 0, 0)"), mobility=True)
    assert len(h.specs) == 1 and any(w[0] == "/World/jb" for w in h.warnings)
    np.testing.assert_allclose(tf(h.builder.joint_X_p[h.joints["/World/ja"]])[:3], [0.5, 0, 0])


def test_merge_with_fixed_joint_raises():
    with pytest.raises(USDImportError, match=r"/World/f.*FIXED"):
        build(rev("ja", "Z") + joint("f", "PhysicsFixedJoint"), mobility=True)


def test_merge_reversed_body_order():
    # jb connects B -> A: merged with its axis negated (same joint coordinate)
    h = build(rev("ja", "Z") + rev("jb", "X", pos0="(-0.5, 0, 0)", pos1="(0.5, 0, 0)", body0="/World/B", body1="/World/A"),
              mobility=True)  # fmt: skip
    assert len(h.specs) == 1
    np.testing.assert_allclose(h.axes("/World/ja"), [[0, 0, 1], [-1, 0, 0]], atol=1e-6)
    assert h.warnings == []


def test_merge_skips_disabled_and_excluded_members():
    # reference: a disabled or excluded joint is not merged
    h = build(rev("ja", "Z") + rev("jb", "X", "bool physics:excludeFromArticulation = 1"), mobility=True)
    assert [s.path for s in h.specs] == ["/World/ja", "/World/jb"]
    assert [s.joint_type for s in h.specs] == [JointType.REVOLUTE, JointType.REVOLUTE]


def test_merge_drives_per_dof():
    h = build(rev("ja", "Z", "float drive:angular:physics:stiffness = 10\n        float drive:angular:physics:targetPosition = 5",
                  apis=("PhysicsDriveAPI:angular",))
              + rev("jb", "X", "float drive:angular:physics:damping = 2", apis=("PhysicsDriveAPI:angular",)),
              mobility=True)  # fmt: skip
    b, j = h.builder, h.joints["/World/ja"]
    # reference: ke [572.958, 0], kd [0, 114.592], target_q [0.0872665, 0], modes [POSITION, VELOCITY]
    np.testing.assert_allclose(h.arr("joint_target_ke", "/World/ja"), [572.9578, 0], rtol=1e-5)
    np.testing.assert_allclose(h.arr("joint_target_kd", "/World/ja"), [0, 114.59156], rtol=1e-5)
    np.testing.assert_allclose(b.joint_target_q[b.joint_q_start[j]:b.joint_q_start[j] + 2], [0.0872665, 0], rtol=1e-5)
    assert h.arr("joint_target_mode", "/World/ja").tolist() == [1, 2]


def test_jointspec_add_to_returns_index():
    h = build(rev("ja", "Z"))
    s = h.specs[0]
    assert isinstance(s, JointSpec)
    n = h.builder.joint_count
    assert s.add_to(h.builder, h.bodies["/World/A"], h.bodies["/World/B"], s.X_B0J, s.X_B1J) == n


def test_hard_limit_constant():
    assert HARD_LIMIT_KE == 1e8


def test_merge_order_is_traversal_not_list_order():
    h = build(THREE)
    by_path = sorted(h.specs, key=lambda s: s.path)  # jx, jy, jz (an importer sorting by path)
    merged = merge_stacked_joints(by_path, True, None)
    assert len(merged) == 1
    assert merged[0].dof_sources == ["/World/jz", "/World/jx", "/World/jy"]
    assert merged[0].path == "/World/jz"

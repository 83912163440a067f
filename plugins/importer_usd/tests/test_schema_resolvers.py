"""Schema resolvers (armillary_importer_usd.schemas): newton:*, physx*:*, mjc:* values by key, priority
order, per-prim attribute collection (``result["schema_attrs"]``) and the value transformers.

Expected numbers marked "reference" were measured once by running the reference engine (newton 1.8,
``newton.usd.SchemaResolver*``) on the same stage text, and are hard-coded.
"""

from __future__ import annotations

import math

import pytest

pxr = pytest.importorskip("pxr")
from pxr import Gf, Sdf, Usd  # noqa: E402

import armillary  # noqa: E402
from armillary_importer_usd.schemas import (  # noqa: E402
    PrimType,
    SchemaResolver,
    SchemaResolverMjc,
    SchemaResolverNewton,
    SchemaResolverPhysx,
    collect_schema_attrs,
    default_resolvers,
    resolve_value,
    solref_to_damping,
    solref_to_stiffness,
)

STAGE = """#usda 1.0
(
    upAxis = "Z"
    metersPerUnit = 1
)
def PhysicsScene "physicsScene"
{
    vector3f physics:gravityDirection = (0, 0, -1)
    float physics:gravityMagnitude = 9.81
    int newton:timeStepsPerSecond = 500
    int physxScene:timeStepsPerSecond = 120
    float mjc:option:timestep = 0.004
    int physxScene:maxVelocityIterationCount = 7
    custom float physxScene:bounceThreshold = 0.3
    bool mjc:flag:gravity = false
    custom float newton:foo = 1.5
}
def Xform "robot" (
    prepend apiSchemas = ["PhysicsArticulationRootAPI", "PhysxArticulationAPI"]
)
{
    bool physxArticulation:enabledSelfCollisions = false
    int physxArticulation:solverPositionIterationCount = 16
    def Xform "base" (
        prepend apiSchemas = ["PhysicsRigidBodyAPI", "PhysicsMassAPI"]
    )
    {
        float physics:mass = 1
        float physxRigidBody:linearDamping = 0.3
        float physxRigidBody:angularDamping = 0.7
        bool physxRigidBody:disableGravity = true
        float mjc:gravcomp = 0.5
        def Cube "geom" (
            prepend apiSchemas = ["PhysicsCollisionAPI"]
        )
        {
            double size = 0.2
            float physxCollision:contactOffset = 0.05
            float physxCollision:restOffset = 0.01
            float mjc:margin = 0.02
            float mjc:gap = 0.005
            float newton:contactMargin = 0.03
            int mjc:condim = 4
        }
    }
    def Xform "link" (
        prepend apiSchemas = ["PhysicsRigidBodyAPI", "PhysicsMassAPI"]
    )
    {
        double3 xformOp:translate = (0, 0, 1)
        uniform token[] xformOpOrder = ["xformOp:translate"]
        float physics:mass = 1
        def Sphere "geom" (
            prepend apiSchemas = ["PhysicsCollisionAPI"]
        )
        {
            double radius = 0.1
        }
    }
    def PhysicsRevoluteJoint "joint" (
        prepend apiSchemas = ["PhysxJointAPI"]
    )
    {
        rel physics:body0 = </robot/base>
        rel physics:body1 = </robot/link>
        point3f physics:localPos0 = (0, 0, 0.5)
        point3f physics:localPos1 = (0, 0, -0.5)
        quatf physics:localRot0 = (1, 0, 0, 0)
        quatf physics:localRot1 = (1, 0, 0, 0)
        uniform token physics:axis = "X"
        float physics:lowerLimit = -90
        float physics:upperLimit = 90
        float newton:armature = 0.1
        float physxJoint:armature = 0.2
        float mjc:armature = 0.3
        float mjc:damping = 2.0
        float mjc:frictionloss = 0.4
        float physxJoint:maxJointVelocity = 100
        float mjc:stiffness = 5
        float mjc:springref = 10
        float mjc:ref = 3
        float physxLimit:angular:stiffness = 11
        float state:angular:physics:position = 30
    }
}
"""

# reference: every (resolver, prim type, key, prim) with an authored value on STAGE
REFERENCE_VALUES = {
    ("mjc", "JOINT", "armature", "/robot/joint"): 0.30000001192092896,
    ("mjc", "JOINT", "damping_per_rad", "/robot/joint"): 2.0,
    ("mjc", "JOINT", "friction", "/robot/joint"): 0.4000000059604645,
    ("mjc", "JOINT", "ref", "/robot/joint"): 3.0,
    ("mjc", "JOINT", "springref", "/robot/joint"): 10.0,
    ("mjc", "JOINT", "stiffness", "/robot/joint"): 5.0,
    ("mjc", "SCENE", "gravity_enabled", "/physicsScene"): False,
    ("mjc", "SHAPE", "gap", "/robot/base/geom"): 0.004999999888241291,
    ("mjc", "SHAPE", "margin", "/robot/base/geom"): 0.019999999552965164,
    ("newton", "JOINT", "armature", "/robot/joint"): 0.10000000149011612,
    ("newton", "SCENE", "time_steps_per_second", "/physicsScene"): 500,
    ("newton", "SHAPE", "margin", "/robot/base/geom"): 0.029999999329447746,
    ("physx", "ARTICULATION", "self_collision_enabled", "/robot"): False,
    ("physx", "BODY", "rigid_body_angular_damping", "/robot/base"): 0.699999988079071,
    ("physx", "BODY", "rigid_body_linear_damping", "/robot/base"): 0.30000001192092896,
    ("physx", "JOINT", "angular_position", "/robot/joint"): 30.0,
    ("physx", "JOINT", "armature", "/robot/joint"): 0.20000000298023224,
    ("physx", "JOINT", "limit_angular_ke", "/robot/joint"): 11.0,
    ("physx", "JOINT", "velocity_limit", "/robot/joint"): 100.0,
    ("physx", "SCENE", "gravity_enabled", "/robot/base"): False,
    ("physx", "SCENE", "max_solver_iterations", "/physicsScene"): 7,
    ("physx", "SCENE", "time_steps_per_second", "/physicsScene"): 120,
    ("physx", "SHAPE", "gap", "/robot/base/geom"): 0.04000000096857548,
    ("physx", "SHAPE", "margin", "/robot/base/geom"): 0.009999999776482582,
    # keys where armillary deliberately differs from the reference (see the resolver docstrings):
    # reference 249 = int(1 / float32(0.004)); armillary rounds
    ("mjc", "SCENE", "time_steps_per_second", "/physicsScene"): 250,
    # mjc:damping (per rad) in NewtonJointAPI units (per degree) for the revolute joint
    ("mjc", "JOINT", "damping", "/robot/joint"): 2.0 * math.pi / 180.0,
    # interface alias of springref
    ("mjc", "JOINT", "rest_q", "/robot/joint"): 10.0,
}

# reference: collect_prim_attrs per resolver and prim
REFERENCE_COLLECT = {
    "mjc": {
        "/physicsScene": {"mjc:flag:gravity": False, "mjc:option:timestep": 0.004000000189989805},
        "/robot": {},
        "/robot/base": {"mjc:gravcomp": 0.5},
        "/robot/base/geom": {"mjc:condim": 4, "mjc:gap": 0.004999999888241291,
                             "mjc:margin": 0.019999999552965164},
        "/robot/joint": {"mjc:armature": 0.30000001192092896, "mjc:damping": 2.0,
                         "mjc:frictionloss": 0.4000000059604645, "mjc:ref": 3.0, "mjc:springref": 10.0,
                         "mjc:stiffness": 5.0},
        "/robot/link": {},
        "/robot/link/geom": {},
    },
    "newton": {
        "/physicsScene": {"newton:foo": 1.5, "newton:timeStepsPerSecond": 500},
        "/robot": {},
        "/robot/base": {},
        "/robot/base/geom": {"newton:contactMargin": 0.029999999329447746},
        "/robot/joint": {"newton:armature": 0.10000000149011612},
        "/robot/link": {},
        "/robot/link/geom": {},
    },
    "physx": {
        "/physicsScene": {"physxScene:bounceThreshold": 0.30000001192092896,
                          "physxScene:maxVelocityIterationCount": 7, "physxScene:timeStepsPerSecond": 120},
        "/robot": {"physxArticulation:enabledSelfCollisions": False,
                   "physxArticulation:solverPositionIterationCount": 16},
        "/robot/base": {"physxRigidBody:angularDamping": 0.699999988079071, "physxRigidBody:disableGravity": True,
                        "physxRigidBody:linearDamping": 0.30000001192092896},
        "/robot/base/geom": {"physxCollision:contactOffset": 0.05000000074505806,
                             "physxCollision:restOffset": 0.009999999776482582},
        "/robot/joint": {"physxJoint:armature": 0.20000000298023224, "physxJoint:maxJointVelocity": 100.0,
                         "physxLimit:angular:stiffness": 11.0, "state:angular:physics:position": 30.0},
        "/robot/link": {},
        "/robot/link/geom": {},
    },
}  # fmt: skip


@pytest.fixture(scope="module")
def stage():
    st = Usd.Stage.CreateInMemory()
    st.GetRootLayer().ImportFromString(STAGE)
    return st


def all_resolvers():
    return [SchemaResolverNewton(), SchemaResolverPhysx(), SchemaResolverMjc()]


def test_prim_type_order_matches_reference():
    assert [(p.name, int(p)) for p in PrimType] == [
        ("SCENE", 0), ("JOINT", 1), ("SHAPE", 2), ("BODY", 3), ("MATERIAL", 4), ("ACTUATOR", 5), ("ARTICULATION", 6),
    ]  # fmt: skip


def test_every_authored_value_matches_reference(stage):
    found = {}
    for r in all_resolvers():
        for pt, table in r.mapping.items():
            for key in table:
                for prim in stage.Traverse():
                    v = r.get_value(prim, pt, key)
                    if v is not None:
                        found[(r.name, pt.name, key, str(prim.GetPath()))] = v
    assert set(found) == set(REFERENCE_VALUES)
    for k, v in REFERENCE_VALUES.items():
        assert found[k] == pytest.approx(v, rel=1e-12), k


def test_collect_prim_attrs_matches_reference(stage):
    for r in all_resolvers():
        got = {str(p.GetPath()): r.collect_prim_attrs(p) for p in stage.Traverse()}
        assert got.keys() == REFERENCE_COLLECT[r.name].keys()
        for path, attrs in REFERENCE_COLLECT[r.name].items():
            assert set(got[path]) == set(attrs), (r.name, path)
            for name, value in attrs.items():
                assert got[path][name] == pytest.approx(value), (r.name, path, name)


def test_collect_schema_attrs_shape(stage):
    prims = [stage.GetPrimAtPath(p) for p in ("/physicsScene", "/robot/joint", "/robot/link")]
    out = collect_schema_attrs([SchemaResolverPhysx(), SchemaResolverNewton()], prims)
    assert list(out) == ["physx", "newton"]
    assert list(out["newton"]) == ["/physicsScene", "/robot/joint", "/robot/link"]
    assert out["newton"]["/robot/link"] == {} and out["newton"]["/robot/joint"] == pytest.approx(
        {"newton:armature": 0.1}
    )
    assert set(out["physx"]["/robot/joint"]) == set(REFERENCE_COLLECT["physx"]["/robot/joint"])


def test_resolve_value_priority_order(stage):
    geom = stage.GetPrimAtPath("/robot/base/geom")
    scene = stage.GetPrimAtPath("/physicsScene")
    joint = stage.GetPrimAtPath("/robot/joint")
    n, px, mj = SchemaResolverNewton(), SchemaResolverPhysx(), SchemaResolverMjc()
    # reference (add_usd with [newton, physx, mjc] / [mjc, physx, newton]): margin 0.03 / 0.02
    assert resolve_value([n, px, mj], geom, PrimType.SHAPE, "margin", None) == pytest.approx(0.03)
    assert resolve_value([mj, px, n], geom, PrimType.SHAPE, "margin", None) == pytest.approx(0.02)
    # newton:maxSolverIterations not authored -> physx's 7 in both orders (reference)
    assert resolve_value([n, px, mj], scene, PrimType.SCENE, "max_solver_iterations", -1) == 7
    assert resolve_value([mj, px, n], scene, PrimType.SCENE, "max_solver_iterations", -1) == 7
    # friction only authored as mjc:frictionloss (reference: 0.4 with newton first)
    assert resolve_value([n, px, mj], joint, PrimType.JOINT, "friction", 0.0) == pytest.approx(0.4)
    assert resolve_value([n, px, mj], joint, PrimType.JOINT, "armature", 0.0) == pytest.approx(0.1)
    assert resolve_value([px, n], joint, PrimType.JOINT, "armature", 0.0) == pytest.approx(0.2)
    # nothing authored -> the caller's default; unknown keys and invalid prims -> default
    assert resolve_value([n], joint, PrimType.JOINT, "limit_ke", "dflt") == "dflt"
    assert resolve_value([n, px, mj], joint, PrimType.JOINT, "no_such_key", 3) == 3
    assert resolve_value([n], stage.GetPrimAtPath("/missing"), PrimType.JOINT, "armature", 1) == 1
    assert resolve_value([], joint, PrimType.JOINT, "armature", 5) == 5


def test_interface_keys_are_mapped():
    n = SchemaResolverNewton.mapping
    for key in ("time_steps_per_second", "max_solver_iterations", "gravity_enabled"):
        assert key in n[PrimType.SCENE] and key in SchemaResolverPhysx.mapping[PrimType.SCENE]
        assert key in SchemaResolverMjc.mapping[PrimType.SCENE]
    assert n[PrimType.ARTICULATION]["self_collision_enabled"].name == "newton:selfCollisionEnabled"
    assert n[PrimType.ARTICULATION]["joints_add_mobility"].name == "newton:jointsAddMobility"
    assert SchemaResolverPhysx.mapping[PrimType.ARTICULATION]["self_collision_enabled"].name == (
        "physxArticulation:enabledSelfCollisions"
    )
    expected_joint = {"armature": "newton:armature", "damping": "newton:damping", "friction": "newton:friction",
                      "velocity_limit": "newton:velocityLimit", "limit_ke": "newton:limitStiffness",
                      "limit_kd": "newton:limitDamping"}  # fmt: skip
    assert {k: n[PrimType.JOINT][k].name for k in expected_joint} == expected_joint
    m = SchemaResolverMjc.mapping[PrimType.JOINT]
    assert (m["stiffness"].name, m["rest_q"].name, m["ref"].name) == ("mjc:stiffness", "mjc:springref", "mjc:ref")
    shape = {"margin": "newton:contactMargin", "gap": "newton:contactGap",
             "max_hull_vertices": "newton:maxHullVertices", "collision_group": "newton:collision_group",
             "is_sensor": "newton:is_sensor"}  # fmt: skip
    assert {k: n[PrimType.SHAPE][k].name for k in shape} == shape
    assert SchemaResolverMjc.mapping[PrimType.SHAPE]["margin"].name == "mjc:margin"
    assert SchemaResolverMjc.mapping[PrimType.SHAPE]["gap"].name == "mjc:gap"
    material = {"mu_torsional": "newton:torsionalFriction", "mu_rolling": "newton:rollingFriction",
                "ke": "newton:contactStiffness", "kd": "newton:contactDamping", "kf": "newton:contactFrictionGain",
                "ka": "newton:contactAdhesion"}  # fmt: skip
    assert {k: n[PrimType.MATERIAL][k].name for k in material} == material
    assert PrimType.BODY not in n or "rigid_body_enabled" not in n[PrimType.BODY]


def _prim(type_name="Xform", **attrs):
    st = Usd.Stage.CreateInMemory()
    p = st.DefinePrim("/p", type_name)
    for name, (tn, value) in attrs.items():
        p.CreateAttribute(name.replace("__", ":"), tn).Set(value)
    return st, p


def test_physx_transformers():
    px = SchemaResolverPhysx()
    T = Sdf.ValueTypeNames
    # reference: disableGravity true -> gravity disabled; restOffset -inf ("auto") reads as unauthored
    _, p = _prim(physxRigidBody__disableGravity=(T.Bool, True))
    assert px.get_value(p, PrimType.SCENE, "gravity_enabled") is False
    _, p = _prim(physxCollision__restOffset=(T.Float, -math.inf), physxCollision__contactOffset=(T.Float, 0.05))
    assert px.get_value(p, PrimType.SHAPE, "margin") is None and px.get_value(p, PrimType.SHAPE, "gap") is None
    # contactOffset alone: no gap (reference)
    _, p = _prim(physxCollision__contactOffset=(T.Float, 0.1))
    assert px.get_value(p, PrimType.SHAPE, "gap") is None
    # hull vertex limit: hull schema; the decomposition schema only for convexDecomposition shapes
    _, p = _prim(physxConvexDecompositionCollision__hullVertexLimit=(T.Int, 32))
    assert px.get_value(p, PrimType.SHAPE, "max_hull_vertices") is None  # reference
    p.CreateAttribute("physxConvexHullCollision:hullVertexLimit", T.Int).Set(16)
    assert px.get_value(p, PrimType.SHAPE, "max_hull_vertices") == 16  # reference
    p.CreateAttribute("physics:approximation", T.Token).Set("convexDecomposition")
    assert px.get_value(p, PrimType.SHAPE, "max_hull_vertices") == 32


def test_mjc_transformers():
    mj = SchemaResolverMjc()
    T = Sdf.ValueTypeNames
    # reference: solref (0.02, 1) -> ke 2500, kd 100; (0.01, 0.5) -> 40000, 200; direct (-100, -10) -> 100, 10
    assert solref_to_stiffness((0.02, 1.0)) == pytest.approx(2500.0)
    assert solref_to_damping((0.02, 1.0)) == pytest.approx(100.0)
    assert solref_to_stiffness((0.01, 0.5)) == pytest.approx(40000.0)
    assert solref_to_damping((0.01, 0.5)) == pytest.approx(200.0)
    assert (solref_to_stiffness((-100.0, -10.0)), solref_to_damping((-100.0, -10.0))) == (100.0, 10.0)
    _, p = _prim(mjc__solref=(T.Double2, Gf.Vec2d(0.02, 1.0)), mjc__shellinertia=(T.Bool, True))
    assert mj.get_value(p, PrimType.SHAPE, "ke") == pytest.approx(2500.0)
    assert mj.get_value(p, PrimType.MATERIAL, "kd") == pytest.approx(100.0)
    assert mj.get_value(p, PrimType.SHAPE, "mass_model") == "shell"
    # reference: timestep 0.002 (double) -> 500 steps/s
    _, p = _prim("PhysicsScene", mjc__option__timestep=(T.Double, 0.002))
    assert mj.get_value(p, PrimType.SCENE, "time_steps_per_second") == 500
    # effort limit (reference: frcrange [-3, 5] -> 5; limited "false" -> None; "auto"/"true" -> 5)
    _, p = _prim(mjc__actuatorfrcrange__min=(T.Float, -3.0), mjc__actuatorfrcrange__max=(T.Float, 5.0))
    assert mj.get_value(p, PrimType.JOINT, "effort_limit") == 5.0
    a = p.CreateAttribute("mjc:actuatorfrclimited", T.Token)
    for token, expected in (("false", None), ("true", 5.0), ("auto", 5.0)):
        a.Set(token)
        assert mj.get_value(p, PrimType.JOINT, "effort_limit") == expected
    # damping in NewtonJointAPI units: per degree on angular joints, unchanged on prismatic joints
    _, p = _prim("PhysicsRevoluteJoint", mjc__damping=(T.Float, 1.0))
    assert mj.get_value(p, PrimType.JOINT, "damping") == pytest.approx(math.pi / 180.0)
    assert mj.get_value(p, PrimType.JOINT, "damping_per_rad") == 1.0
    _, p = _prim("PhysicsPrismaticJoint", mjc__damping=(T.Float, 1.0))
    assert mj.get_value(p, PrimType.JOINT, "damping") == 1.0


def test_newton_sentinels_returned_raw():
    n = SchemaResolverNewton()
    T = Sdf.ValueTypeNames
    _, p = _prim(
        "PhysicsRevoluteJoint", newton__limitStiffness=(T.Float, -math.inf), newton__velocityLimit=(T.Float, math.inf)
    )
    assert n.get_value(p, PrimType.JOINT, "limit_ke") == -math.inf
    assert n.get_value(p, PrimType.JOINT, "velocity_limit") == math.inf


def test_default_resolvers_and_base_class():
    rs = default_resolvers()
    assert len(rs) == 1 and isinstance(rs[0], SchemaResolverNewton)
    assert issubclass(SchemaResolverMjc, SchemaResolver)
    assert (
        SchemaResolverNewton.name == "newton"
        and SchemaResolverPhysx.name == "physx"
        and SchemaResolverMjc.name == "mjc"
    )
    attr = SchemaResolver.SchemaAttribute("x:y", 1.0)
    assert (attr.name, attr.default, attr.usd_value_transformer, attr.usd_value_getter) == ("x:y", 1.0, None, None)
    SchemaResolverNewton().validate_custom_attributes(armillary.ModelBuilder())


def test_custom_resolver_subclass():
    class MyResolver(SchemaResolver):
        name = "my"
        mapping = {  # noqa: RUF012
            PrimType.JOINT: {"armature": SchemaResolver.SchemaAttribute("my:arm", 0.0, lambda v: 2.0 * v)}
        }

    _, p = _prim(my__arm=(Sdf.ValueTypeNames.Float, 0.25), my__other=(Sdf.ValueTypeNames.Int, 3))
    r = MyResolver()
    assert resolve_value([r, SchemaResolverNewton()], p, PrimType.JOINT, "armature", 0.0) == 0.5
    assert r.collect_prim_attrs(p) == {"my:arm": 0.25, "my:other": 3}


@pytest.mark.filterwarnings("ignore:.*newton.foo.*customData")
def test_schema_attrs_through_add_usd(stage):
    b = armillary.ModelBuilder()
    result = b.add_usd(stage, schema_resolvers=all_resolvers())
    attrs = result["schema_attrs"]
    assert set(attrs) == {"newton", "physx", "mjc"}
    for name, per_prim in attrs.items():
        for path, values in per_prim.items():
            if path in REFERENCE_COLLECT[name]:
                assert values == pytest.approx(REFERENCE_COLLECT[name][path]), (name, path)
    for path in ("/physicsScene", "/robot/joint", "/robot/base/geom"):
        assert path in attrs["physx"] and attrs["physx"][path] == pytest.approx(REFERENCE_COLLECT["physx"][path])


def test_public_names():
    for name in ("PrimType", "SchemaResolver", "SchemaResolverNewton", "SchemaResolverPhysx", "SchemaResolverMjc"):
        assert getattr(armillary.usd, name) is globals()[name]

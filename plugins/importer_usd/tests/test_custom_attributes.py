"""USD custom attributes and custom frequencies (Custom Attributes concept page, "USD Integration" and
"USD Parsing Support"), end to end through ``ModelBuilder.add_usd`` and through
``armillary_importer_usd.custom.apply_custom_attributes`` on a hand-built builder.

Expected numbers marked "reference" were measured once by running the reference engine (newton 1.8
``ModelBuilder.add_usd``) on the same stage text, and are hard-coded.
"""

from __future__ import annotations

import numpy as np
import pytest

pxr = pytest.importorskip("pxr")
from pxr import Usd  # noqa: E402

import warp as wp  # noqa: E402

import armillary  # noqa: E402
from armillary import Model, ModelBuilder  # noqa: E402
from armillary_importer_usd.custom import (  # noqa: E402
    apply_custom_attributes,
    get_custom_attribute_declarations,
    get_custom_attribute_values,
)
from armillary_importer_usd.utils import USDImportError  # noqa: E402

F = Model.AttributeFrequency
A = Model.AttributeAssignment

HEAD = """#usda 1.0
(
    upAxis = "Z"
    metersPerUnit = 1
)
"""

# the spec's robot_arm.usda: declarations on the PhysicsScene prim (+ JOINT and JOINT_COORD examples)
ROBOT_ARM = (
    HEAD
    + """
def PhysicsScene "physicsScene"
{
    custom float newton:float_attr = 0.0 (
        customData = {
            string assignment = "model"
            string frequency = "body"
        }
    )
    custom float3 newton:vec3_attr = (0.0, 0.0, 0.0) (
        customData = {
            string assignment = "state"
            string frequency = "body"
        }
    )
    custom float newton:articulation_stiffness = 100.0 (
        customData = {
            string assignment = "model"
            string frequency = "articulation"
        }
    )
    custom float newton:namespace_a:some_attrib = 150.0 (
        customData = {
            string assignment = "control"
            string frequency = "joint_dof"
        }
    )
    custom bool newton:namespace_a:bool_attr = false (
        customData = {
            string assignment = "model"
            string frequency = "shape"
        }
    )
    custom int newton:joint_int = 7 (
        customData = {
            string assignment = "model"
            string frequency = "joint"
        }
    )
    custom float newton:coord_attr = 0.25 (
        customData = {
            string assignment = "state"
            string frequency = "joint_coord"
        }
    )
}

def Xform "root" (
    prepend apiSchemas = ["PhysicsArticulationRootAPI"]
)
{
    custom float newton:articulation_stiffness = 300.0

    def Xform "robot_arm" (
        prepend apiSchemas = ["PhysicsRigidBodyAPI"]
    )
    {
        custom float newton:float_attr = 850.0
        custom float3 newton:vec3_attr = (1.0, 0.5, 0.3)
        custom float newton:namespace_a:some_attrib = 250.0

        def Cube "box" (
            prepend apiSchemas = ["PhysicsCollisionAPI"]
        )
        {
            double size = 0.2
        }
    }

    def Mesh "gripper" (
        prepend apiSchemas = ["PhysicsRigidBodyAPI", "PhysicsCollisionAPI"]
    )
    {
        double3 xformOp:translate = (0, 0, 1)
        uniform token[] xformOpOrder = ["xformOp:translate"]
        custom bool newton:namespace_a:bool_attr = true
        point3f[] points = [(-0.1, -0.1, -0.1), (0.1, -0.1, -0.1), (0.1, 0.1, -0.1), (-0.1, 0.1, -0.1),
                            (-0.1, -0.1, 0.1), (0.1, -0.1, 0.1), (0.1, 0.1, 0.1), (-0.1, 0.1, 0.1)]
        int[] faceVertexCounts = [4, 4, 4, 4, 4, 4]
        int[] faceVertexIndices = [0, 3, 2, 1, 4, 5, 6, 7, 0, 1, 5, 4, 1, 2, 6, 5, 2, 3, 7, 6, 3, 0, 4, 7]
    }

    def PhysicsRevoluteJoint "joint"
    {
        rel physics:body0 = </root/robot_arm>
        rel physics:body1 = </root/gripper>
        point3f physics:localPos0 = (0, 0, 0.5)
        point3f physics:localPos1 = (0, 0, -0.5)
        uniform token physics:axis = "Z"
        custom float newton:namespace_a:some_attrib = 42.0
        custom int newton:joint_int = 3
        custom float newton:coord_attr = 0.75
    }

    def PhysicsFixedJoint "anchor"
    {
        rel physics:body1 = </root/robot_arm>
    }
}
"""
)

# custom frequencies: the spec's is_actuator_prim / tendon expander / wildcard sensor-distance examples
FREQ_STAGE = (
    HEAD
    + """
def PhysicsScene "physicsScene"
{
}

class Xform "SensorProto"
{
    def Xform "SensorInner"
    {
        custom float3 sensor:position = (0, 6, 8)
    }
}

def Xform "World"
{
    def Xform "robot" (
        prepend apiSchemas = ["PhysicsArticulationRootAPI"]
    )
    {
        def Xform "base" (
            prepend apiSchemas = ["PhysicsRigidBodyAPI"]
        )
        {
            def Sphere "geom" (
                prepend apiSchemas = ["PhysicsCollisionAPI"]
            )
            {
                double radius = 0.1
                custom int mjc:condim = 4
            }
        }

        def Xform "link" (
            prepend apiSchemas = ["PhysicsRigidBodyAPI"]
        )
        {
            double3 xformOp:translate = (0, 0, 1)
            uniform token[] xformOpOrder = ["xformOp:translate"]

            def Sphere "geom" (
                prepend apiSchemas = ["PhysicsCollisionAPI"]
            )
            {
                double radius = 0.1
            }
        }

        def PhysicsFixedJoint "anchor"
        {
            rel physics:body1 = </World/robot/base>
        }

        def PhysicsSphericalJoint "ball"
        {
            rel physics:body0 = </World/robot/base>
            rel physics:body1 = </World/robot/link>
            point3f physics:localPos0 = (0, 0, 0.5)
            point3f physics:localPos1 = (0, 0, -0.5)
            custom float newton:dofattr = 3
            custom float newton:coordattr = 4
        }
    }

    def MjcActuator "act1"
    {
        custom float mjc:gain = 5
    }

    def Xform "SensorA"
    {
        custom float3 sensor:position = (3, 4, 0)
    }

    def MjcTendon "tendon1"
    {
    }

    def MjcActuator "act2"
    {
    }

    def Xform "SensorB"
    {
        custom float3 sensor:position = (1, 0, 0)
    }

    def Xform "Inst" (
        instanceable = true
        prepend references = </SensorProto>
    )
    {
    }
}
"""
)

# one body with one sphere, for error cases: %s = declarations, %s = body attributes
SMALL = (
    HEAD
    + """
def PhysicsScene "physicsScene"
{
%s
}

def Xform "body" (
    prepend apiSchemas = ["PhysicsRigidBodyAPI"]
)
{
%s
    def Sphere "geom" (
        prepend apiSchemas = ["PhysicsCollisionAPI"]
    )
    {
        double radius = 0.1
    }
}
"""
)


def decl(usd_type: str, name: str, value, assignment="model", frequency="body") -> str:
    data = ""
    if assignment is not None:
        data += f'            string assignment = "{assignment}"\n'
    if frequency is not None:
        data += f'            string frequency = "{frequency}"\n'
    return f"    custom {usd_type} {name} = {value} (\n        customData = {{\n{data}        }}\n    )\n"


def write(tmp_path, text: str, name: str = "stage.usda") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def small_stage(decls: str, body_attrs: str = "") -> Usd.Stage:
    stage = Usd.Stage.CreateInMemory()
    stage.GetRootLayer().ImportFromString(SMALL % (decls, body_attrs))
    return stage


def values_of(builder, key: str) -> np.ndarray:
    attr = builder.custom_attributes[key]
    return attr.build_numpy(builder._custom_entity_count(attr.frequency))


# ------------------------------------------------------------------------------------------ spec example


def test_robot_arm_spec_example_end_to_end(tmp_path):
    builder = ModelBuilder()
    result = builder.add_usd(write(tmp_path, ROBOT_ARM, "robot_arm.usda"))
    body, shape, joint = result["path_body_map"], result["path_shape_map"], result["path_joint_map"]
    assert result["path_articulation_map"]["/root"] == 0
    model = builder.finalize(device="cpu")
    state, control = model.state(), model.control()

    float_values = model.float_attr.numpy()
    assert float_values[body["/root/robot_arm"]] == 850.0  # reference: [850, 0]
    assert float_values[body["/root/gripper"]] == 0.0  # declared default
    vec3 = state.vec3_attr.numpy()
    np.testing.assert_allclose(vec3[body["/root/robot_arm"]], [1.0, 0.5, 0.3], rtol=1e-6)
    np.testing.assert_allclose(vec3[body["/root/gripper"]], [0.0, 0.0, 0.0])
    np.testing.assert_allclose(model.articulation_stiffness.numpy(), [300.0])  # reference
    # joint_dof: the revolute joint's DOF gets 42; the value authored on the body prim is not a DOF's
    np.testing.assert_allclose(control.namespace_a.some_attrib.numpy(), [42.0])  # reference
    bools = model.namespace_a.bool_attr.numpy()
    assert bool(bools[shape["/root/gripper"]]) and not bool(bools[shape["/root/robot_arm/box"]])
    joint_int = model.joint_int.numpy()
    assert joint_int[joint["/root/joint"]] == 3 and joint_int[joint["/root/anchor"]] == 7  # reference [7 3]
    np.testing.assert_allclose(state.coord_attr.numpy(), [0.75])  # reference
    # declarations kept their assignment / frequency
    assert model.attribute_frequency["namespace_a:some_attrib"] == F.JOINT_DOF
    assert model.attribute_assignment["namespace_a:some_attrib"] == A.CONTROL
    assert model.attribute_assignment["vec3_attr"] == A.STATE


def test_robot_arm_declarations_match_reference():
    stage = Usd.Stage.CreateInMemory()
    stage.GetRootLayer().ImportFromString(ROBOT_ARM)
    decls = get_custom_attribute_declarations(stage.GetPrimAtPath("/physicsScene"))
    # reference: keys, frequency, assignment, namespace, default, usd_attribute_name
    expected = {
        "articulation_stiffness": (F.ARTICULATION, A.MODEL, None, 100.0, wp.float32),
        "coord_attr": (F.JOINT_COORD, A.STATE, None, 0.25, wp.float32),
        "float_attr": (F.BODY, A.MODEL, None, 0.0, wp.float32),
        "joint_int": (F.JOINT, A.MODEL, None, 7, wp.int32),
        "namespace_a:bool_attr": (F.SHAPE, A.MODEL, "namespace_a", False, wp.bool),
        "namespace_a:some_attrib": (F.JOINT_DOF, A.CONTROL, "namespace_a", 150.0, wp.float32),
        "vec3_attr": (F.BODY, A.STATE, None, (0.0, 0.0, 0.0), wp.vec3),
    }
    assert set(decls) == set(expected)
    for key, (freq, assignment, ns, default, dtype) in expected.items():
        d = decls[key]
        assert d.frequency == freq and d.assignment == assignment and d.namespace == ns, key
        assert d.dtype == dtype, key
        np.testing.assert_allclose(np.asarray(d.default, dtype=float), np.asarray(default, dtype=float))
        assert d.usd_attribute_name == "newton:" + key


def test_apply_custom_attributes_harness_matches_add_usd():
    """The same example through a hand-built builder and result dict."""
    stage = Usd.Stage.CreateInMemory()
    stage.GetRootLayer().ImportFromString(ROBOT_ARM)
    b = ModelBuilder()
    b0 = b.add_link(mass=1.0)
    b.add_shape_box(b0, hx=0.1, hy=0.1, hz=0.1)
    b1 = b.add_link(mass=1.0)
    b.add_shape_box(b1, hx=0.1, hy=0.1, hz=0.1)
    j0 = b.add_joint_fixed(-1, b0)
    j1 = b.add_joint_revolute(b0, b1, axis=(0.0, 0.0, 1.0))
    b.add_articulation([j0, j1])
    result = {
        "path_body_map": {"/root/robot_arm": 0, "/root/gripper": 1},
        "path_shape_map": {"/root/robot_arm/box": 0, "/root/gripper": 1},
        "path_joint_map": {"/root/anchor": 0, "/root/joint": 1},
        "path_articulation_map": {"/root": 0},
    }
    apply_custom_attributes(b, stage, result)
    np.testing.assert_allclose(values_of(b, "float_attr"), [850.0, 0.0])
    np.testing.assert_allclose(values_of(b, "vec3_attr"), [[1.0, 0.5, 0.3], [0.0, 0.0, 0.0]], rtol=1e-6)
    np.testing.assert_allclose(values_of(b, "articulation_stiffness"), [300.0])
    np.testing.assert_allclose(values_of(b, "namespace_a:some_attrib"), [42.0])
    np.testing.assert_array_equal(values_of(b, "namespace_a:bool_attr"), [False, True])
    np.testing.assert_array_equal(values_of(b, "joint_int"), [7, 3])
    np.testing.assert_allclose(values_of(b, "coord_attr"), [0.75])


# ------------------------------------------------------------------------------------------ frequencies


def test_once_and_world_values_read_from_the_scene_prim():
    stage = small_stage(
        decl("float", "newton:g", 2.0, "model", "once") + decl("float", "newton:w", 3.0, "model", "world")
    )
    b = ModelBuilder()
    b.add_usd(stage)
    assert b.custom_attributes["g"].frequency == F.ONCE and b.custom_attributes["g"].values == {0: 2.0}
    assert b.custom_attributes["w"].frequency == F.WORLD and b.custom_attributes["w"].values == {0: 3.0}


def test_declared_types_quat_string_array_and_int_widening():
    decls = (
        decl("quatf", "newton:q", "(1, 0, 0, 0)")
        + decl("string", "newton:label", '"none"')
        + decl("token", "newton:tok", '"a"')
        + decl("int[]", "newton:pair", "[1, 2]")
        + decl("double", "newton:d", 1.5)
    )
    body = (
        "    custom quatf newton:q = (0.5, 0.1, 0.2, 0.3)\n"
        '    custom string newton:label = "arm"\n'
        '    custom token newton:tok = "b"\n'
        "    custom int[] newton:pair = [3, 4]\n"
        "    custom int newton:d = 4\n"
    )
    stage = small_stage(decls, body)
    d = get_custom_attribute_declarations(stage.GetPrimAtPath("/physicsScene"))
    assert d["q"].dtype == wp.quat and tuple(d["q"].default) == (0.0, 0.0, 0.0, 1.0)  # wxyz (1,0,0,0) -> xyzw
    assert d["label"].dtype is str and d["tok"].dtype is str
    assert d["pair"].dtype == wp.vec2i and d["d"].dtype == wp.float32
    b = ModelBuilder()
    b.add_usd(stage)
    np.testing.assert_allclose(values_of(b, "q")[0], [0.1, 0.2, 0.3, 0.5], rtol=1e-6)  # xyzw
    assert values_of(b, "label") == ["arm"] and values_of(b, "tok") == ["b"]
    np.testing.assert_array_equal(values_of(b, "pair")[0], [3, 4])
    assert values_of(b, "d")[0] == 4.0  # int authored on a float attribute (reference: 4.0)


def test_custom_frequencies_filter_expander_wildcard_instance_proxies(tmp_path):
    calls = []
    b = ModelBuilder()
    b.add_custom_attribute(ModelBuilder.CustomAttribute(name="dofattr", dtype=wp.float32, frequency=F.JOINT_DOF))
    b.add_custom_attribute(ModelBuilder.CustomAttribute(name="coordattr", dtype=wp.float32, frequency=F.JOINT_COORD))
    # a solver-style attribute with its own USD name
    b.add_custom_attribute(
        ModelBuilder.CustomAttribute(
            name="condim",
            dtype=wp.int32,
            frequency=F.SHAPE,
            namespace="myso",
            default=3,
            usd_attribute_name="mjc:condim",
        )
    )

    def is_actuator_prim(prim, context):
        calls.append(("filter", str(prim.GetPath()), sorted(context)))
        assert context["prim"] == prim
        return prim.GetTypeName() == "MjcActuator"

    b.add_custom_frequency(
        ModelBuilder.CustomFrequency(name="actuator", namespace="myso", usd_prim_filter=is_actuator_prim)
    )
    b.add_custom_attribute(
        ModelBuilder.CustomAttribute(
            name="actuator_gain", dtype=wp.float32, frequency="myso:actuator", namespace="myso",
            usd_attribute_name="mjc:gain", default=-1.0,
        )
    )  # fmt: skip

    def is_tendon_prim(prim, context):
        return prim.GetTypeName() == "MjcTendon"

    def expand_joint_rows(prim, context):
        return [{"myso:tendon_joint": 4, "myso:tendon_coef": 0.5}, {"myso:tendon_joint": 8}]

    b.add_custom_frequency(
        ModelBuilder.CustomFrequency(
            name="tendon_joint", namespace="myso", usd_prim_filter=is_tendon_prim, usd_entry_expander=expand_joint_rows
        )
    )
    b.add_custom_attribute(
        ModelBuilder.CustomAttribute(
            name="tendon_joint", dtype=wp.int32, frequency="myso:tendon_joint", namespace="myso"
        )
    )
    # with an expander, the attribute's own USD parsing (here a wildcard) is skipped
    b.add_custom_attribute(
        ModelBuilder.CustomAttribute(
            name="tendon_coef", dtype=wp.float32, frequency="myso:tendon_joint", namespace="myso", default=1.0,
            usd_attribute_name="*", usd_value_transformer=lambda v, c: 99.0,
        )
    )  # fmt: skip

    def is_sensor(prim, context):
        return prim.GetName().startswith("Sensor")

    b.add_custom_frequency(ModelBuilder.CustomFrequency(name="sensor", namespace="myns", usd_prim_filter=is_sensor))

    def compute_distance(value, context):
        calls.append(("dist", value, sorted(context), str(context["prim"].GetPath())))
        assert context["attr"].key == "myns:distance"
        pos = context["prim"].GetAttribute("sensor:position").Get()
        return wp.float32(float(np.linalg.norm(pos)))

    b.add_custom_attribute(
        ModelBuilder.CustomAttribute(
            name="distance", frequency="myns:sensor", dtype=wp.float32, default=0.0, namespace="myns",
            usd_attribute_name="*", usd_value_transformer=compute_distance,
        )
    )  # fmt: skip

    result = b.add_usd(write(tmp_path, FREQ_STAGE))
    joint, shape = result["path_joint_map"], result["path_shape_map"]
    ball = joint["/World/robot/ball"]
    # JOINT_DOF / JOINT_COORD scalars broadcast over the ball joint's 3 DOFs / 4 coordinates (reference)
    qd0, q0 = b.joint_qd_start[ball], b.joint_q_start[ball]
    np.testing.assert_allclose(values_of(b, "dofattr")[qd0 : qd0 + 3], [3.0, 3.0, 3.0])
    np.testing.assert_allclose(values_of(b, "coordattr")[q0 : q0 + 4], [4.0] * 4)
    condim = values_of(b, "myso:condim")
    assert condim[shape["/World/robot/base/geom"]] == 4 and condim[shape["/World/robot/link/geom"]] == 3
    # reference: actuator_gain [5, -1], tendon_joint [4, 8], tendon_coef [0.5, 1.0], distance [5, 1, 10]
    np.testing.assert_allclose(values_of(b, "myso:actuator_gain"), [5.0, -1.0])
    np.testing.assert_array_equal(values_of(b, "myso:tendon_joint"), [4, 8])
    np.testing.assert_allclose(values_of(b, "myso:tendon_coef"), [0.5, 1.0])
    np.testing.assert_allclose(values_of(b, "myns:distance"), [5.0, 1.0, 10.0])
    assert b.get_custom_frequency_count("myso:actuator") == 2
    assert b.get_custom_frequency_count("myns:sensor") == 3
    # one traversal in prim order, pseudo-root and instance proxies included, abstract class prims not
    visited = [c[1] for c in calls if c[0] == "filter"]
    assert visited[0] == "/" and visited[-1] == "/World/Inst/SensorInner"
    assert len(visited) == len(set(visited)) and "/SensorProto" not in visited
    assert all(c[2] == ["builder", "prim", "result"] for c in calls if c[0] == "filter")
    dist = [c for c in calls if c[0] == "dist"]
    assert [c[3] for c in dist] == ["/World/SensorA", "/World/SensorB", "/World/Inst/SensorInner"]
    assert all(c[1] is None and c[2] == ["attr", "builder", "prim", "result"] for c in dist)
    model = b.finalize(device="cpu")
    np.testing.assert_allclose(model.myns.distance.numpy(), [5.0, 1.0, 10.0])


def test_custom_frequency_rows_respect_root_path_and_ignore():
    stage = Usd.Stage.CreateInMemory()
    stage.GetRootLayer().ImportFromString(FREQ_STAGE)
    b = ModelBuilder()
    b.add_custom_frequency(
        ModelBuilder.CustomFrequency(
            name="s", namespace="t", usd_prim_filter=lambda p, c: p.GetName().startswith("Sensor")
        )
    )
    b.add_custom_attribute(
        ModelBuilder.CustomAttribute(
            name="name", dtype=str, frequency="t:s", namespace="t", usd_attribute_name="*",
            usd_value_transformer=lambda v, c: str(c["prim"].GetPath()),
        )
    )  # fmt: skip
    apply_custom_attributes(b, stage, {}, root_path="/World", ignore=lambda path: path.startswith("/World/Inst"))
    assert values_of(b, "t:name") == ["/World/SensorA", "/World/SensorB"]


def test_wildcard_on_entity_frequency_called_for_every_shape():
    stage = Usd.Stage.CreateInMemory()
    stage.GetRootLayer().ImportFromString(FREQ_STAGE)
    b = ModelBuilder()
    seen = []

    def name_len(value, context):
        seen.append((value, str(context["prim"].GetPath()), sorted(context)))
        return len(str(context["prim"].GetPath()))

    b.add_custom_attribute(
        ModelBuilder.CustomAttribute(
            name="plen", dtype=wp.int32, frequency=F.SHAPE, default=-5, usd_attribute_name="*",
            usd_value_transformer=name_len,
        )
    )  # fmt: skip
    result = b.add_usd(stage)
    shape = result["path_shape_map"]
    assert sorted(p for _, p, _ in seen) == sorted(shape)
    assert all(v is None and {"prim", "attr"} <= set(ctx) for v, _, ctx in seen)
    vals = values_of(b, "plen")
    for path, idx in shape.items():
        assert vals[idx] == len(path)


def test_per_dof_array_and_merged_joint_dof_map():
    """A JOINT_DOF array gives one value per DOF; ``path_joint_dof_map`` narrows a source prim to its DOFs."""
    stage = Usd.Stage.CreateInMemory()
    stage.GetRootLayer().ImportFromString(
        HEAD
        + """
def Xform "a"
{
    custom float[] newton:k = [1, 2, 3]
}
def Xform "b"
{
    custom float newton:k = 9
}
def Xform "c"
{
    custom float[] newton:k = [1, 2]
}
"""
    )
    b = ModelBuilder()
    b.add_custom_attribute(ModelBuilder.CustomAttribute(name="k", dtype=wp.float32, frequency=F.JOINT_DOF))
    p = b.add_link()
    c1, c2 = b.add_link(), b.add_link()
    cfg = ModelBuilder.JointDofConfig
    j0 = b.add_joint_d6(
        p, c1, linear_axes=[cfg(axis=(1, 0, 0))], angular_axes=[cfg(axis=(0, 0, 1)), cfg(axis=(0, 1, 0))]
    )
    j1 = b.add_joint_d6(p, c2, angular_axes=[cfg(axis=(1, 0, 0)), cfg(axis=(0, 1, 0)), cfg(axis=(0, 0, 1))])
    result = {"path_joint_map": {"/a": j0, "/b": j1}, "path_joint_dof_map": {"/b": [4]}}
    apply_custom_attributes(b, stage, result)
    np.testing.assert_allclose(values_of(b, "k"), [1.0, 2.0, 3.0, 0.0, 9.0, 0.0])
    with pytest.raises(USDImportError, match=r"^/c"):
        apply_custom_attributes(b, stage, {"path_joint_map": {"/c": j1}})


def test_get_custom_attribute_values_context_and_transformer():
    stage = small_stage("", "    custom float my:x = 2\n")
    prim = stage.GetPrimAtPath("/body")
    seen = {}

    def twice(value, context):
        seen.update(context)
        return value * 2.0

    attrs = [
        ModelBuilder.CustomAttribute(name="x", dtype=wp.float32, frequency=F.BODY, usd_attribute_name="my:x",
                                     usd_value_transformer=twice),
        ModelBuilder.CustomAttribute(name="y", dtype=wp.float32, frequency=F.BODY),  # not authored
    ]  # fmt: skip
    out = get_custom_attribute_values(prim, attrs, context={"extra": 1})
    assert out == {"x": 4.0}
    assert seen["prim"] == prim and seen["attr"] is attrs[0] and seen["extra"] == 1


# ------------------------------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    ("decls", "body", "match"),
    [
        (decl("float", "newton:a", 2.0, "model", "foo"), "", r"^/physicsScene\.newton:a: .*frequency 'foo'"),
        (decl("float", "newton:a", 2.0, "bogus", "body"), "", r"^/physicsScene\.newton:a: .*assignment 'bogus'"),
        (
            decl("float", "newton:a", 2.0, "model", None),
            "",
            r"^/physicsScene\.newton:a: .*missing customData 'frequency'",
        ),
        (decl("float", "newton:a", 2.0, "model", "contact"), "", r"^/physicsScene\.newton:a: .*reserved"),
        (decl("float", "newton:a:b:c", 2.0), "", r"^/physicsScene\.newton:a:b:c: .*names must be"),
        (decl("asset", "newton:a", "@x.usd@"), "", r"^/physicsScene\.newton:a: .*not supported"),
        (decl("float", "newton:a", 2.0), '    custom string newton:a = "abc"\n', r"^/body\.newton:a: .*abc"),
        (decl("float3", "newton:a", "(1, 2, 3)"), "    custom float newton:a = 4\n", r"^/body\.newton:a: "),
        (decl("int", "newton:a", 2), "    custom float newton:a = 4.5\n", r"^/body\.newton:a: .*integer"),
    ],
)
def test_bad_declarations_and_values_raise_and_leave_builder_unchanged(decls, body, match):
    b = ModelBuilder()
    b.add_body(mass=1.0)
    before = (dict(b.custom_attributes), b.body_count, b.shape_count)
    with pytest.raises(USDImportError, match=match):
        b.add_usd(small_stage(decls, body))
    assert (dict(b.custom_attributes), b.body_count, b.shape_count) == before


def test_declaration_incompatible_with_registered_attribute():
    b = ModelBuilder()
    b.add_custom_attribute(ModelBuilder.CustomAttribute(name="a", dtype=wp.float32, frequency=F.BODY, default=1.0))
    # same spec: kept, with the builder's default
    b.add_usd(small_stage(decl("float", "newton:a", 2.0)))
    assert b.custom_attributes["a"].default == 1.0
    with pytest.raises(USDImportError, match=r"^/physicsScene\.newton:a: .*incompatible"):
        b.add_usd(small_stage(decl("int", "newton:a", 2, "model", "shape")))


def test_custom_frequency_declaration_needs_registration():
    stage = small_stage(decl("float", "newton:myns:a", 2.0, "model", "myns:item"))
    with pytest.raises(USDImportError, match=r"no custom frequency with this key is registered"):
        ModelBuilder().add_usd(stage)
    b = ModelBuilder()
    b.add_custom_frequency(ModelBuilder.CustomFrequency(name="item", namespace="myns"))
    b.add_usd(stage)
    assert b.custom_attributes["myns:a"].frequency == "myns:item"


def test_expander_row_with_foreign_key_is_rejected():
    stage = small_stage("")
    b = ModelBuilder()
    b.add_custom_frequency(
        ModelBuilder.CustomFrequency(
            name="f", namespace="n", usd_prim_filter=lambda p, c: p.GetName() == "body",
            usd_entry_expander=lambda p, c: [{"n:nope": 1}],
        )
    )  # fmt: skip
    b.add_custom_attribute(ModelBuilder.CustomAttribute(name="v", dtype=wp.int32, frequency="n:f", namespace="n"))
    with pytest.raises(USDImportError, match=r"^/body: .*'n:nope', which is not declared"):
        apply_custom_attributes(b, stage, {})


def test_schema_attribute_without_custom_data_is_not_a_declaration():
    stage = small_stage("    int newton:timeStepsPerSecond = 500\n")
    assert get_custom_attribute_declarations(stage.GetPrimAtPath("/physicsScene")) == {}
    stage = small_stage("    custom float newton:undeclared = 1\n")
    with pytest.warns(UserWarning, match="newton:undeclared"):
        assert get_custom_attribute_declarations(stage.GetPrimAtPath("/physicsScene")) == {}


def test_public_names():
    assert armillary.usd.get_custom_attribute_declarations is get_custom_attribute_declarations
    assert armillary.usd.get_custom_attribute_values is get_custom_attribute_values

"""Rigid bodies, mass properties, units, up axis, scene settings, arguments and errors of the USD importer.

Numbers marked "reference" were measured with the reference engine (newton 1.8 ``add_usd``) on the
same stage; the others are analytic.
"""

import math
import warnings

import numpy as np
import pytest

import armillary
from armillary.sim.enums import BodyFlags, JointType

pxr = pytest.importorskip("pxr")
from pxr import Usd  # noqa: E402

from armillary_importer_usd.utils import USDImportError  # noqa: E402

S = math.sqrt(0.5)


def stage_from(text: str):
    text = text.replace("{ ", "{\n").replace(" }", "\n}")  # one-line blocks need line breaks in usda
    s = Usd.Stage.CreateInMemory()
    assert s.GetRootLayer().ImportFromString(text)
    return s


def load(text, builder=None, **kw):
    b = builder or armillary.ModelBuilder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = b.add_usd(stage_from(text), **kw)
    return b, r


def body(name, pos=(0, 0, 0), apis="", attrs="", shape='def Cube "g" (prepend apiSchemas = ["PhysicsCollisionAPI"]) { double size = 0.2 }'):
    return f"""
def Xform "{name}" (prepend apiSchemas = ["PhysicsRigidBodyAPI"{apis}])
{{
    double3 xformOp:translate = {tuple(pos)}
    uniform token[] xformOpOrder = ["xformOp:translate"]
    {attrs}
    {shape}
}}
"""


HEADER = '#usda 1.0\n(\n    upAxis = "Z"\n    metersPerUnit = 1\n    kilogramsPerUnit = 1\n)\n'


# ------------------------------------------------------------------------------------------------ mass


def test_mass_api_variants_match_reference():
    text = HEADER + "".join([
        body("A", (0, 0, 0), ', "PhysicsMassAPI"', "float physics:mass = 3"),
        body("B", (1, 0, 0), ', "PhysicsMassAPI"', "float physics:mass = 3\n float3 physics:diagonalInertia = (1, 2, 3)\n"
             " quatf physics:principalAxes = (0.7071068, 0, 0, 0.7071068)\n point3f physics:centerOfMass = (0.1, 0.2, 0.3)"),
        body("C", (2, 0, 0), ', "PhysicsMassAPI"', "float physics:density = 10"),
        body("D", (3, 0, 0), "", "", 'def Cube "g" (prepend apiSchemas = ["PhysicsCollisionAPI", "PhysicsMassAPI"]) '
             "{ double size = 0.2\n float physics:mass = 5 }"),
        body("E", (4, 0, 0)),
    ])  # fmt: skip
    b, r = load(text)
    m = r["path_body_map"]
    I = lambda p: np.asarray(b.body_inertia[m[p]]).reshape(3, 3)  # noqa: E731
    # reference: mass without inertia -> shape inertia scaled to the mass (3 * (0.04 + 0.04) / 12)
    assert b.body_mass[m["/A"]] == pytest.approx(3.0)
    np.testing.assert_allclose(I("/A"), np.eye(3) * 0.02, atol=1e-7)
    # reference: diagonal inertia rotated by the principal axes (90 deg about z) -> diag(2, 1, 3)
    assert b.body_mass[m["/B"]] == pytest.approx(3.0)
    np.testing.assert_allclose(I("/B"), np.diag([2.0, 1.0, 3.0]), atol=1e-5)
    np.testing.assert_allclose(np.asarray(b.body_com[m["/B"]]), [0.1, 0.2, 0.3], atol=1e-6)
    # reference: body density 10 -> 0.08 kg, inertia 0.08 * 0.08 / 12
    assert b.body_mass[m["/C"]] == pytest.approx(0.08)
    np.testing.assert_allclose(I("/C"), np.eye(3) * 0.000533333, atol=1e-8)
    # reference: collider mass 5 kg
    assert b.body_mass[m["/D"]] == pytest.approx(5.0)
    np.testing.assert_allclose(I("/D"), np.eye(3) * 0.0333333, atol=1e-6)
    # nothing authored: default density 1000 kg/m^3
    assert b.body_mass[m["/E"]] == pytest.approx(8.0)
    assert all(b.body_lock_inertia)


def test_material_density_and_friction_match_reference():
    text = HEADER + """
def Material "M" (prepend apiSchemas = ["PhysicsMaterialAPI"])
{
    float physics:staticFriction = 0.9
    float physics:dynamicFriction = 0.4
    float physics:restitution = 0.3
    float physics:density = 500
}
def Xform "A" (prepend apiSchemas = ["PhysicsRigidBodyAPI"])
{
    def Capsule "g" (prepend apiSchemas = ["PhysicsCollisionAPI", "MaterialBindingAPI"])
    {
        uniform token axis = "X"
        double radius = 0.1
        double height = 0.4
        rel material:binding:physics = </M>
    }
}
"""
    b, r = load(text)
    s = r["path_shape_map"]["/A/g"]
    # reference values: mu = dynamic friction, restitution, mass 8.37758 from density 500
    assert b.shape_material_mu[s] == pytest.approx(0.4)
    assert b.shape_material_restitution[s] == pytest.approx(0.3)
    assert b.body_mass[0] == pytest.approx(8.37758, rel=1e-5)
    np.testing.assert_allclose(np.diag(np.asarray(b.body_inertia[0]).reshape(3, 3)), [0.039794, 0.223053, 0.223053], rtol=1e-4)


def test_kinematic_and_disabled_bodies_match_reference():
    text = HEADER + body("A", attrs="bool physics:rigidBodyEnabled = 0") + body("K", (1, 0, 0), attrs="bool physics:kinematicEnabled = 1")
    b, r = load(text)
    # reference: the disabled body stays (massless) and its shape becomes static; the kinematic body keeps its mass
    assert b.body_count == 2
    assert b.body_mass[r["path_body_map"]["/A"]] == 0.0
    assert b.shape_body[r["path_shape_map"]["/A/g"]] == -1
    k = r["path_body_map"]["/K"]
    assert b.body_flags[k] == int(BodyFlags.KINEMATIC)
    assert b.body_mass[k] == pytest.approx(8.0)
    b2, r2 = load(text, only_load_enabled_rigid_bodies=True)
    assert list(r2["path_body_map"]) == ["/K"] and b2.body_count == 1
    assert b2.shape_body[r2["path_shape_map"]["/A/g"]] == -1


# ------------------------------------------------------------------------------------------------ units, up axis, scene


def test_stage_units_are_converted():
    text = """#usda 1.0
(
    upAxis = "Z"
    metersPerUnit = 0.01
    kilogramsPerUnit = 0.001
)
def PhysicsScene "scene"
{
    vector3f physics:gravityDirection = (0, -1, 0)
    float physics:gravityMagnitude = 981
}
""" + body("A", (100, 0, 0), ', "PhysicsMassAPI"', "float physics:mass = 2000\n float3 physics:diagonalInertia = (1000, 2000, 3000)",
           'def Cube "g" (prepend apiSchemas = ["PhysicsCollisionAPI"]) { double size = 10 }')  # fmt: skip
    b, r = load(text)
    assert r["linear_unit"] == 0.01 and r["mass_unit"] == 0.001
    np.testing.assert_allclose(np.asarray(b.body_q[0])[:3], [1.0, 0.0, 0.0], atol=1e-6)
    np.testing.assert_allclose(b.shape_scale[0], [0.05, 0.05, 0.05], atol=1e-7)
    assert b.body_mass[0] == pytest.approx(2.0)
    # kg * m^2: 1000 g cm^2 = 1e-4 kg m^2
    np.testing.assert_allclose(np.diag(np.asarray(b.body_inertia[0]).reshape(3, 3)), [1e-4, 2e-4, 3e-4], rtol=1e-5)
    np.testing.assert_allclose(b.gravity, [0.0, -9.81, 0.0], atol=1e-5)


def test_bad_units_raise():
    text = '#usda 1.0\n(\n    metersPerUnit = -1\n)\n' + body("A")
    b = armillary.ModelBuilder()
    with pytest.raises(USDImportError, match="metersPerUnit"):
        b.add_usd(stage_from(text))
    assert b.body_count == 0


def test_y_up_stage_is_rotated_onto_the_builder_up_axis():
    text = '#usda 1.0\n(\n    upAxis = "Y"\n    metersPerUnit = 1\n)\ndef PhysicsScene "scene" {}\n' + body(
        "A", (1, 2, 3), shape='def Capsule "g" (prepend apiSchemas = ["PhysicsCollisionAPI"]) { double radius = 0.5 \n double height = 1 }')
    b, r = load(text)
    # reference: (x, y, z) -> (x, -z, y), rotation +90 deg about x
    np.testing.assert_allclose(np.asarray(b.body_q[0]), [1, -3, 2, S, 0, 0, S], atol=1e-6)
    assert r["up_axis"] == armillary.Axis.Y
    np.testing.assert_allclose(b.gravity, [0, 0, -9.81], atol=1e-5)
    b2, _ = load(text, apply_up_axis_from_stage=True)
    assert b2.up_axis == armillary.Axis.Y
    np.testing.assert_allclose(np.asarray(b2.body_q[0]), [1, 2, 3, 0, 0, 0, 1], atol=1e-6)
    np.testing.assert_allclose(b2.gravity, [0, -9.81, 0], atol=1e-5)


def test_scene_result_entries():
    text = HEADER + """
def PhysicsScene "physicsScene"
{
    vector3f physics:gravityDirection = (0, 0, -1)
    float physics:gravityMagnitude = 5
    custom float newton:timeStepsPerSecond = 500
}
""" + body("A")
    b, r = load(text)
    assert set(r) >= {"fps", "duration", "up_axis", "path_body_map", "path_joint_map", "path_shape_map", "path_shape_scale",
                      "path_particle_map", "mass_unit", "linear_unit", "scene_attributes", "physics_scene_path",
                      "collapse_results", "physics_dt", "schema_attrs", "max_solver_iterations",
                      "path_body_relative_transform", "path_original_body_map", "actuator_count", "path_articulation_map"}  # fmt: skip
    assert r["physics_scene_path"] == "/physicsScene"
    assert r["path_particle_map"] == {}
    assert r["physics_dt"] == pytest.approx(1 / 500)
    assert r["scene_attributes"]["physics:gravityMagnitude"] == pytest.approx(5)
    np.testing.assert_allclose(b.gravity, [0, 0, -5], atol=1e-6)
    assert r["max_solver_iterations"] == -1
    assert r["path_articulation_map"] == {"/A": 0}


def test_default_physics_dt_and_no_scene():
    b, r = load(HEADER + body("A"))
    assert r["physics_scene_path"] is None
    b, r = load(HEADER + 'def PhysicsScene "s" {}\n' + body("A"))
    assert r["physics_dt"] == pytest.approx(0.001)  # reference default: 1000 steps per second


# ------------------------------------------------------------------------------------------------ placement


def test_xform_moves_bodies_and_static_shapes():
    text = HEADER + body("A", (1, 0, 0)) + 'def Sphere "ground" (prepend apiSchemas = ["PhysicsCollisionAPI"]) { double radius = 1 }\n'
    b, r = load(text, xform=((0, 0, 2), (0, 0, S, S)))
    np.testing.assert_allclose(np.asarray(b.body_q[0]), [0, 1, 2, 0, 0, S, S], atol=1e-6)
    g = r["path_shape_map"]["/ground"]
    assert b.shape_body[g] == -1
    np.testing.assert_allclose(np.asarray(b.shape_transform[g])[:3], [0, 0, 2], atol=1e-6)


def test_body_scale_goes_to_shapes_not_bodies():
    text = HEADER + """
def Xform "A" (prepend apiSchemas = ["PhysicsRigidBodyAPI"])
{
    double3 xformOp:translate = (0, 0, 1)
    float3 xformOp:scale = (2, 3, 4)
    uniform token[] xformOpOrder = ["xformOp:translate", "xformOp:scale"]
    def Cube "g" (prepend apiSchemas = ["PhysicsCollisionAPI"])
    {
        double size = 1
        double3 xformOp:translate = (0.5, 0, 0)
        uniform token[] xformOpOrder = ["xformOp:translate"]
    }
}
"""
    b, r = load(text)
    np.testing.assert_allclose(np.asarray(b.body_q[0]), [0, 0, 1, 0, 0, 0, 1], atol=1e-6)
    np.testing.assert_allclose(b.shape_scale[0], [1.0, 1.5, 2.0], atol=1e-6)
    np.testing.assert_allclose(np.asarray(b.shape_transform[0])[:3], [1.0, 0, 0], atol=1e-6)
    np.testing.assert_allclose(np.asarray(r["path_shape_scale"]["/A/g"]), [2, 3, 4], atol=1e-6)


def test_floating_and_base_joint_for_jointless_bodies():
    text = HEADER + body("A", (1, 0, 0))
    b, _ = load(text)
    assert [int(t) for t in b.joint_type] == [int(JointType.FREE)]
    b, _ = load(text, floating=False)
    assert [int(t) for t in b.joint_type] == [int(JointType.FIXED)]
    np.testing.assert_allclose(np.asarray(b.joint_X_p[0])[:3], [1, 0, 0], atol=1e-6)
    cfg = armillary.ModelBuilder.JointDofConfig
    b, _ = load(text, base_joint={"joint_type": JointType.D6, "linear_axes": [cfg(axis=(1, 0, 0))], "angular_axes": [cfg(axis=(0, 0, 1))]})
    assert [int(t) for t in b.joint_type] == [int(JointType.D6)] and b.joint_dof_count == 2
    with pytest.raises(ValueError, match="mutually exclusive"):
        load(text, floating=True, base_joint={"joint_type": JointType.D6})


def test_parent_body_attaches_into_the_last_articulation():
    b = armillary.ModelBuilder()
    base = b.add_link(xform=((0, 0, 1), (0, 0, 0, 1)), mass=1.0)
    j = b.add_joint_fixed(-1, base)
    b.add_articulation([j])
    text = HEADER + body("A", (1, 0, 0))
    _, r = load(text, builder=b, parent_body=base)
    a = r["path_body_map"]["/A"]
    np.testing.assert_allclose(np.asarray(b.body_q[a])[:3], [1, 0, 1], atol=1e-6)
    assert b.joint_parent[-1] == base and b.joint_type[-1] == int(JointType.FIXED)
    assert b.articulation_count == 1 and b.joint_articulation == [0, 0]
    b.finalize(device="cpu")
    with pytest.raises(ValueError, match="FREE"):
        load(text, builder=b, parent_body=base, floating=True)


def test_override_root_xform_replaces_the_root_pose():
    text = HEADER + body("A", (5, 5, 5))
    b, _ = load(text, xform=((1, 2, 3), (0, 0, 0, 1)), override_root_xform=True)
    np.testing.assert_allclose(np.asarray(b.body_q[0]), [1, 2, 3, 0, 0, 0, 1], atol=1e-6)
    b, _ = load(text, xform=((1, 2, 3), (0, 0, 0, 1)))
    np.testing.assert_allclose(np.asarray(b.body_q[0]), [6, 7, 8, 0, 0, 0, 1], atol=1e-6)


def test_ignore_paths_and_root_path():
    text = HEADER + 'def Xform "R"\n{\n' + body("A") + body("B", (1, 0, 0)) + "}\n" + body("C", (2, 0, 0))
    _, r = load(text, ignore_paths=[".*/B$"])
    assert sorted(r["path_body_map"]) == ["/C", "/R/A"]
    _, r = load(text, root_path="/R")
    assert sorted(r["path_body_map"]) == ["/R/A", "/R/B"]
    with pytest.raises(USDImportError, match="/nope"):
        load(text, root_path="/nope")


# ------------------------------------------------------------------------------------------------ arguments and errors


@pytest.mark.parametrize("kw", [dict(return_deformable_results=True), dict(allow_unsafe_torch_checkpoints=True),
                                dict(legacy_margin_gap=True), dict(convert_mjc_equality_constraints=False)])  # fmt: skip
def test_unsupported_arguments_raise(kw):
    b = armillary.ModelBuilder()
    with pytest.raises(NotImplementedError, match=next(iter(kw))):
        b.add_usd(stage_from(HEADER + body("A")), **kw)
    assert b.body_count == 0


def test_missing_and_malformed_files(tmp_path):
    b = armillary.ModelBuilder()
    with pytest.raises(FileNotFoundError, match="nope.usda"):
        b.add_usd(str(tmp_path / "nope.usda"))
    bad = tmp_path / "bad.usda"
    bad.write_text("#usda 1.0\ndef Xform \"A\" {\n")
    with pytest.raises(USDImportError, match="bad.usda"):
        b.add_usd(str(bad))
    good = tmp_path / "good.usda"
    good.write_text((HEADER + body("A")).replace("{ ", "{\n").replace(" }", "\n}"))
    r = b.add_usd(good)
    assert r["path_body_map"] == {"/A": 0}


def test_failure_leaves_the_builder_unchanged():
    b = armillary.ModelBuilder()
    b.add_body(mass=1.0)
    before = (b.body_count, b.joint_count, b.shape_count, b.articulation_count, len(b.shape_collision_filter_pairs), b.gravity)
    text = HEADER + 'def PhysicsScene "s" { float physics:gravityMagnitude = 3 }\n' + body("A") + """
def PhysicsRevoluteJoint "j"
{
    rel physics:body0 = </A>
    rel physics:body1 = </Missing>
    uniform token physics:axis = "Z"
}
"""
    with pytest.raises(USDImportError, match="/j"):
        b.add_usd(stage_from(text))
    assert (b.body_count, b.joint_count, b.shape_count, b.articulation_count, len(b.shape_collision_filter_pairs), b.gravity) == before


def test_result_indices_are_offset_by_existing_entities():
    b = armillary.ModelBuilder()
    b.add_body(mass=1.0)
    b.add_shape_sphere(0, radius=0.1)
    _, r = load(HEADER + body("A"), builder=b)
    assert r["path_body_map"] == {"/A": 1}
    assert r["path_shape_map"] == {"/A/g": 1}
    assert r["path_joint_map"] == {}
    assert r["path_articulation_map"] == {"/A": 1}


BAD = [
    ('def Cube "g" (prepend apiSchemas = ["PhysicsCollisionAPI"]) { double size = -1 }', "", "/A/g"),
    ('def Sphere "g" (prepend apiSchemas = ["PhysicsCollisionAPI"]) { double radius = nan }', "", "/A/g"),
    ('def Capsule "g" (prepend apiSchemas = ["PhysicsCollisionAPI"]) { double height = -1 }', "", "/A/g"),
    ('def Capsule "g" (prepend apiSchemas = ["PhysicsCollisionAPI"]) { uniform token axis = "W" }', "", "/A/g.axis"),
    ('def Cube "g" (prepend apiSchemas = ["PhysicsCollisionAPI"]) { double3 xformOp:translate = (nan, 0, 0)\n'
     ' uniform token[] xformOpOrder = ["xformOp:translate"] }', "", "/A/g.xformOpOrder"),
    (None, "float physics:mass = nan", "/A.physics:mass"),
    (None, "float physics:mass = -2", "/A.physics:mass"),
    (None, "float3 physics:diagonalInertia = (-1, 1, 1)", "/A.physics:diagonalInertia"),
    (None, "float physics:density = -5", "/A.physics:density"),
    ('def Mesh "g" (prepend apiSchemas = ["PhysicsCollisionAPI"]) { point3f[] points = [(0,0,0),(1,0,0),(0,1,0)]\n'
     ' int[] faceVertexCounts = [3]\n int[] faceVertexIndices = [0,1,7] }', "", "/A/g"),
]  # fmt: skip


@pytest.mark.parametrize("shape,attrs,where", BAD)
def test_malformed_values_raise_naming_the_prim(shape, attrs, where):
    kw = {} if shape is None else {"shape": shape}
    text = HEADER + body("A", apis=', "PhysicsMassAPI"', attrs=attrs, **kw)
    b = armillary.ModelBuilder()
    with pytest.raises(USDImportError) as e:
        b.add_usd(stage_from(text))
    assert str(e.value).startswith(where)
    assert (b.body_count, b.shape_count, b.joint_count) == (0, 0, 0)


def test_parent_body_with_an_authored_world_joint():
    b = armillary.ModelBuilder()
    base = b.add_link(xform=((0, 0, 1), (0, 0, S, S)), mass=1.0)
    b.add_articulation([b.add_joint_fixed(-1, base, parent_xform=((0, 0, 1), (0, 0, S, S)))])
    text = HEADER + body("A", (0, 0, 0.5)) + 'def PhysicsFixedJoint "fix" { rel physics:body1 = </A>\n point3f physics:localPos0 = (0, 0, 0.5) }\n'
    _, r = load(text, builder=b, parent_body=base, xform=((1, 0, 0), (0, 0, 0, 1)))
    j = r["path_joint_map"]["/fix"]
    assert b.joint_parent[j] == base and b.joint_articulation[j] == 0
    np.testing.assert_allclose(np.asarray(b.joint_X_p[j])[:3], [1, 0, 0.5], atol=1e-6)  # in the parent's frame
    model = b.finalize(device="cpu")
    state = model.state()
    armillary.eval_fk(model, model.joint_q, model.joint_qd, state)
    # the parent turned 90 deg about z: its local (1, 0, 0.5) is world (0, 1, 1.5)
    np.testing.assert_allclose(state.body_q.numpy()[r["path_body_map"]["/A"], :3], [0, 1, 1.5], atol=1e-6)

"""Collision, visual and site shapes, materials, NewtonCollisionAPI/NewtonMaterialAPI, instancing and variants.

Numbers marked "reference" were measured with the reference engine (newton 1.8 ``add_usd``) on the
same stage; the others are analytic or follow the spec pages.
"""

import math
import warnings

import numpy as np
import pytest

import armillary
from armillary.sim.enums import GeoType, ShapeFlags

pxr = pytest.importorskip("pxr")
from pxr import Usd  # noqa: E402

from armillary_importer_usd.importer import USDImportWarning  # noqa: E402

S = math.sqrt(0.5)
HEADER = '#usda 1.0\n(\n    upAxis = "Z"\n    metersPerUnit = 1\n)\n'


def stage_from(text: str):
    s = Usd.Stage.CreateInMemory()
    assert s.GetRootLayer().ImportFromString(text)
    return s


def load(text, **kw):
    b = armillary.ModelBuilder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = b.add_usd(stage_from(text), **kw)
    return b, r


CUBE_MESH = """
        point3f[] points = [(-0.1,-0.1,-0.1),(0.1,-0.1,-0.1),(0.1,0.1,-0.1),(-0.1,0.1,-0.1),(-0.1,-0.1,0.1),(0.1,-0.1,0.1),(0.1,0.1,0.1),(-0.1,0.1,0.1)]
        int[] faceVertexCounts = [4,4,4,4,4,4]
        int[] faceVertexIndices = [0,3,2,1, 4,5,6,7, 0,1,5,4, 1,2,6,5, 2,3,7,6, 3,0,4,7]
"""

SHAPES = HEADER + f"""
def Xform "A" (prepend apiSchemas = ["PhysicsRigidBodyAPI"])
{{
    def Mesh "hull" (prepend apiSchemas = ["PhysicsCollisionAPI", "PhysicsMeshCollisionAPI"])
    {{
        uniform token physics:approximation = "convexHull"
{CUBE_MESH}
    }}
    def Mesh "box" (prepend apiSchemas = ["PhysicsCollisionAPI", "PhysicsMeshCollisionAPI"])
    {{
        uniform token physics:approximation = "boundingCube"
        double3 xformOp:translate = (1, 0, 0)
        uniform token[] xformOpOrder = ["xformOp:translate"]
{CUBE_MESH}
    }}
    def Mesh "raw" (prepend apiSchemas = ["PhysicsCollisionAPI"])
    {{
{CUBE_MESH}
    }}
    def Sphere "site" (prepend apiSchemas = ["MjcSiteAPI"])
    {{
        double radius = 0.05
    }}
    def Sphere "vis"
    {{
        double radius = 0.3
    }}
}}
def Plane "floor" (prepend apiSchemas = ["PhysicsCollisionAPI"])
{{
    uniform token axis = "Z"
    double width = 4
    double length = 6
}}
def Cube "static_vis"
{{
    double size = 1
}}
"""


def test_meshes_sites_visuals_planes_match_reference():
    b, r = load(SHAPES)
    m = r["path_shape_map"]
    # reference: shape types, bodies, sizes and flags
    assert [m[p] for p in ("/A/hull", "/A/box", "/A/raw", "/A/site", "/A/vis", "/floor", "/static_vis")] == list(range(7))
    assert [int(t) for t in b.shape_type] == [GeoType.CONVEX_MESH, GeoType.BOX, GeoType.MESH, GeoType.SPHERE,
                                              GeoType.SPHERE, GeoType.PLANE, GeoType.BOX]  # fmt: skip
    assert b.shape_body == [0, 0, 0, 0, 0, -1, -1]
    np.testing.assert_allclose(b.shape_scale[1], [0.1, 0.1, 0.1], atol=1e-6)
    np.testing.assert_allclose(b.shape_scale[5], [4, 6, 0], atol=1e-6)
    np.testing.assert_allclose(b.shape_scale[6], [0.5, 0.5, 0.5], atol=1e-6)
    # colliders of a body with visual geometry are hidden; sites are SITE only; visuals VISIBLE only
    assert b.shape_flags == [6, 6, 6, 8, 1, 7, 1]
    assert b.shape_collision_group[3] == 0
    np.testing.assert_allclose(np.asarray(b.shape_transform[1])[:3], [1, 0, 0], atol=1e-6)
    # reference: the three 0.2 m cubes give 24 kg (meshes keep the mass they had before approximation)
    assert b.body_mass[0] == pytest.approx(24.0, rel=1e-6)
    np.testing.assert_allclose(np.diag(np.asarray(b.body_inertia[0]).reshape(3, 3)), [0.16, 5.493333, 5.493333], rtol=1e-5)


def test_shape_loading_options():
    b, r = load(SHAPES, load_sites=False, load_visual_shapes=False)
    assert "/A/site" not in r["path_shape_map"] and "/A/vis" not in r["path_shape_map"]
    assert "/static_vis" not in r["path_shape_map"]
    assert all(f & ShapeFlags.VISIBLE for f in b.shape_flags)  # no visual geometry -> colliders shown
    b, r = load(SHAPES, load_static_visual_shapes=False)
    assert "/static_vis" not in r["path_shape_map"] and "/A/vis" in r["path_shape_map"]
    b, r = load(SHAPES, force_show_colliders=True)
    assert b.shape_flags[r["path_shape_map"]["/A/hull"]] & ShapeFlags.VISIBLE
    b, r = load(SHAPES, force_show_colliders=True, hide_collision_shapes=True)
    assert not b.shape_flags[r["path_shape_map"]["/A/hull"]] & ShapeFlags.VISIBLE
    b, r = load(SHAPES, skip_mesh_approximation=True)
    assert int(b.shape_type[r["path_shape_map"]["/A/hull"]]) == GeoType.MESH
    assert int(b.shape_type[r["path_shape_map"]["/A/box"]]) == GeoType.MESH


def test_max_hull_vertices():
    sphere_pts = []
    for i in range(8):
        for k in range(1, 8):
            th, ph = 2 * math.pi * i / 8, math.pi * k / 8
            sphere_pts.append((math.sin(ph) * math.cos(th), math.sin(ph) * math.sin(th), math.cos(ph)))
    sphere_pts += [(0, 0, 1), (0, 0, -1)]
    pts = ",".join(f"({x:.6f},{y:.6f},{z:.6f})" for x, y, z in sphere_pts)
    n = len(sphere_pts)
    tris = ",".join(f"{a},{(a + 1) % n},{(a + 2) % n}" for a in range(n))
    text = HEADER + f"""
def Xform "A" (prepend apiSchemas = ["PhysicsRigidBodyAPI"])
{{
    def Mesh "m" (prepend apiSchemas = ["PhysicsCollisionAPI", "PhysicsMeshCollisionAPI", "NewtonMeshCollisionAPI"])
    {{
        uniform token physics:approximation = "convexHull"
        point3f[] points = [{pts}]
        int[] faceVertexCounts = [{",".join(["3"] * n)}]
        int[] faceVertexIndices = [{tris}]
        {{extra}}
    }}
}}
"""
    b, _ = load(text.replace("{extra}", ""), mesh_maxhullvert=10)
    assert len(b.shape_source[0].vertices) <= 10
    b, _ = load(text.replace("{extra}", "int newton:maxHullVertices = 6"), mesh_maxhullvert=10)
    assert len(b.shape_source[0].vertices) <= 6


def test_primitive_axes_and_sizes_match_reference():
    text = HEADER + """
def Xform "A" (prepend apiSchemas = ["PhysicsRigidBodyAPI"])
{
    def Capsule "cap" (prepend apiSchemas = ["PhysicsCollisionAPI"])
    {
        uniform token axis = "X"
        double radius = 0.1
        double height = 0.4
    }
    def Cylinder "cyl" (prepend apiSchemas = ["PhysicsCollisionAPI"])
    {
        uniform token axis = "Y"
        double radius = 0.1
        double height = 0.4
    }
    def Cone "cone" (prepend apiSchemas = ["PhysicsCollisionAPI"])
    {
        uniform token axis = "Z"
        double radius = 0.1
        double height = 0.4
    }
    def Cube "cube" (prepend apiSchemas = ["PhysicsCollisionAPI"])
    {
        double size = 2
        float3 xformOp:scale = (0.1, 0.2, 0.3)
        uniform token[] xformOpOrder = ["xformOp:scale"]
    }
}
"""
    b, r = load(text)
    m = r["path_shape_map"]
    # reference: (radius, half height); the shape's +Z is turned onto the authored axis
    assert int(b.shape_type[m["/A/cap"]]) == GeoType.CAPSULE
    np.testing.assert_allclose(b.shape_scale[m["/A/cap"]][:2], [0.1, 0.2], atol=1e-7)
    np.testing.assert_allclose(np.asarray(b.shape_transform[m["/A/cap"]])[3:], [0, S, 0, S], atol=1e-6)
    assert int(b.shape_type[m["/A/cyl"]]) == GeoType.CYLINDER
    np.testing.assert_allclose(np.asarray(b.shape_transform[m["/A/cyl"]])[3:], [-S, 0, 0, S], atol=1e-6)
    assert int(b.shape_type[m["/A/cone"]]) == GeoType.CONE
    np.testing.assert_allclose(b.shape_scale[m["/A/cone"]][:2], [0.1, 0.2], atol=1e-7)
    # cube: full-size `size` times the scale
    np.testing.assert_allclose(b.shape_scale[m["/A/cube"]], [0.1, 0.2, 0.3], atol=1e-7)


def test_non_uniform_sphere_scale_warns():
    text = HEADER + """
def Xform "A" (prepend apiSchemas = ["PhysicsRigidBodyAPI"])
{
    def Sphere "s" (prepend apiSchemas = ["PhysicsCollisionAPI"])
    {
        double radius = 0.1
        float3 xformOp:scale = (1, 2, 3)
        uniform token[] xformOpOrder = ["xformOp:scale"]
    }
}
"""
    b = armillary.ModelBuilder()
    with pytest.warns(USDImportWarning, match="/A/s"):
        b.add_usd(stage_from(text))
    assert b.shape_scale[0][0] == pytest.approx(0.3)  # reference: the largest scale


def test_newton_material_and_collision_api():
    text = HEADER + """
def Material "RubberMaterial" (prepend apiSchemas = ["PhysicsMaterialAPI", "NewtonMaterialAPI"])
{
    float physics:staticFriction = 1.0
    float physics:dynamicFriction = 0.8
    float newton:torsionalFriction = 0.1
    float newton:rollingFriction = 0.01
    float newton:contactStiffness = 5000.0
    float newton:contactDamping = 200.0
    float newton:contactFrictionGain = 800.0
    float newton:contactAdhesion = -inf
}
def Xform "A" (prepend apiSchemas = ["PhysicsRigidBodyAPI"])
{
    def Cube "Collider" (prepend apiSchemas = ["PhysicsCollisionAPI", "NewtonCollisionAPI", "MaterialBindingAPI"])
    {
        float newton:contactMargin = 0.001
        float newton:contactGap = 0.02
        rel material:binding:physics = </RubberMaterial>
        custom int newton:collision_group = 3
    }
}
"""
    b, r = load(text)
    s = r["path_shape_map"]["/A/Collider"]
    d = armillary.ModelBuilder.ShapeConfig()
    assert b.shape_material_mu[s] == pytest.approx(0.8)
    assert b.shape_material_mu_torsional[s] == pytest.approx(0.1)
    assert b.shape_material_mu_rolling[s] == pytest.approx(0.01)
    assert (b.shape_material_ke[s], b.shape_material_kd[s], b.shape_material_kf[s]) == pytest.approx((5000, 200, 800))
    assert b.shape_material_ka[s] == d.ka  # -inf: engine default
    assert b.shape_margin[s] == pytest.approx(0.001)
    assert b.shape_gap[s] == pytest.approx(0.02)
    assert b.shape_collision_group[s] == 3


def test_is_sensor_is_reported():
    text = HEADER + """
def Xform "A" (prepend apiSchemas = ["PhysicsRigidBodyAPI"])
{
    def Cube "c" (prepend apiSchemas = ["PhysicsCollisionAPI"])
    {
        custom bool newton:is_sensor = 1
    }
}
"""
    b = armillary.ModelBuilder()
    with pytest.warns(USDImportWarning, match="newton:is_sensor"):
        b.add_usd(stage_from(text))
    assert not b.shape_flags[0] & ShapeFlags.COLLIDE_SHAPES


def test_static_colliders_without_body():
    text = HEADER + """
def Xform "env"
{
    double3 xformOp:translate = (0, 0, -1)
    uniform token[] xformOpOrder = ["xformOp:translate"]
    def Cube "ground" (prepend apiSchemas = ["PhysicsCollisionAPI"])
    {
        double size = 2
    }
}
"""
    b, r = load(text)
    assert b.body_count == 0 and b.shape_body == [-1]
    np.testing.assert_allclose(np.asarray(b.shape_transform[0])[:3], [0, 0, -1], atol=1e-7)
    assert b.shape_flags[0] & ShapeFlags.COLLIDE_SHAPES


def test_instanceable_references_import_like_inline_prims():
    proto = """
def Xform "Proto"
{
    def Xform "link" (prepend apiSchemas = ["PhysicsRigidBodyAPI"])
    {
        def Sphere "s" (prepend apiSchemas = ["PhysicsCollisionAPI"])
        {
            double radius = 0.2
        }
    }
}
"""
    text = HEADER + proto + """
def Xform "R1" (instanceable = true
    prepend references = </Proto>)
{
    double3 xformOp:translate = (1, 0, 0)
    uniform token[] xformOpOrder = ["xformOp:translate"]
}
def Xform "R2" (prepend references = </Proto>)
{
    double3 xformOp:translate = (2, 0, 0)
    uniform token[] xformOpOrder = ["xformOp:translate"]
}
"""
    b, r = load(text, root_path="/")
    bm = r["path_body_map"]
    assert {"/R1/link", "/R2/link", "/Proto/link"} <= set(bm)
    np.testing.assert_allclose(np.asarray(b.body_q[bm["/R1/link"]])[:3], [1, 0, 0], atol=1e-7)
    np.testing.assert_allclose(np.asarray(b.body_q[bm["/R2/link"]])[:3], [2, 0, 0], atol=1e-7)
    assert b.shape_scale[r["path_shape_map"]["/R1/link/s"]][0] == pytest.approx(0.2)
    assert b.body_mass[bm["/R1/link"]] == pytest.approx(b.body_mass[bm["/Proto/link"]])


def test_variant_selection_is_honoured():
    text = HEADER + """
def Xform "robot" (
    variants = { string size = "big" }
    prepend variantSets = "size"
)
{
    def Xform "link" (prepend apiSchemas = ["PhysicsRigidBodyAPI"])
    {
        def Sphere "s" (prepend apiSchemas = ["PhysicsCollisionAPI"])
        {
        }
    }
    variantSet "size" = {
        "big" {
            over "link" { over "s" { double radius = 0.5 } }
        }
        "small" {
            over "link" { over "s" { double radius = 0.1 } }
        }
    }
}
""".replace("{ over", "{\n over").replace("} }", "}\n }").replace("{ double", "{\n double").replace("0.5 }", "0.5\n }").replace("0.1 }", "0.1\n }")
    st = stage_from(text)
    b = armillary.ModelBuilder()
    b.add_usd(st)
    assert b.shape_scale[0][0] == pytest.approx(0.5)
    st.GetPrimAtPath("/robot").GetVariantSet("size").SetVariantSelection("small")
    b = armillary.ModelBuilder()
    b.add_usd(st)
    assert b.shape_scale[0][0] == pytest.approx(0.1)

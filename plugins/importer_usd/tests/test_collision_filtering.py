"""UsdPhysics collision filtering on import: collision groups, filteredPairs, collisionEnabled, joints and
self-collisions, including the USD examples of the Collisions page.

Pairs marked "reference" were measured with the reference engine (newton 1.8 ``add_usd``) on the same
stage (compared by prim path, since shape indices may be ordered differently).
"""

import warnings

import pytest

import armillary
from armillary.sim.enums import ShapeFlags

pxr = pytest.importorskip("pxr")
from pxr import Usd, UsdPhysics  # noqa: E402


HEADER = '#usda 1.0\n(\n    upAxis = "Z"\n    metersPerUnit = 1\n)\n'


def stage_from(text: str):
    s = Usd.Stage.CreateInMemory()
    assert s.GetRootLayer().ImportFromString(text)
    return s


def load(stage, **kw):
    b = armillary.ModelBuilder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = b.add_usd(stage, **kw)
    return b, r


def path_pairs(b, r):
    inv = {i: p for p, i in r["path_shape_map"].items()}
    return {frozenset((inv[a], inv[c])) for a, c in b.shape_collision_filter_pairs}


def P(a, c):
    return frozenset((a, c))


# ------------------------------------------------------------------------------------------------ Collisions page


def test_collisions_page_group_example():
    text = HEADER + """
def "CollisionGroup_Robot" (
    prepend apiSchemas = ["PhysicsCollisionGroup"]
) {
}
def Sphere "RobotPart" (
    prepend apiSchemas = ["PhysicsCollisionAPI"]
) {
    rel physics:collisionGroup = </CollisionGroup_Robot>
}
"""
    b, r = load(stage_from(text))
    s = r["path_shape_map"]["/RobotPart"]
    assert b.shape_collision_group[s] == 1
    assert b.shape_flags[s] & ShapeFlags.COLLIDE_SHAPES


def test_collisions_page_filtered_pairs_example():
    text = HEADER + """
def Sphere "ShapeA" (
    prepend apiSchemas = ["PhysicsCollisionAPI"]
) {
    rel physics:filteredPairs = [</ShapeB>]
}
def Sphere "ShapeB" (
    prepend apiSchemas = ["PhysicsCollisionAPI"]
) {
}
def Sphere "ShapeC" (
    prepend apiSchemas = ["PhysicsCollisionAPI"]
) {
}
"""
    b, r = load(stage_from(text))
    assert path_pairs(b, r) == {P("/ShapeA", "/ShapeB")}
    m = r["path_shape_map"]
    assert (m["/ShapeA"], m["/ShapeB"]) in b.shape_collision_filter_pairs


# ------------------------------------------------------------------------------------------------ groups and pairs

GROUPS = HEADER + """
def PhysicsScene "scene" {
}
def PhysicsCollisionGroup "GroupA" (prepend apiSchemas = ["CollectionAPI:colliders"]) {
    rel physics:filteredGroups = </GroupB>
    prepend rel collection:colliders:includes = </b1/s1>
}
def PhysicsCollisionGroup "GroupB" (prepend apiSchemas = ["CollectionAPI:colliders"]) {
    prepend rel collection:colliders:includes = </b2>
}
def PhysicsCollisionGroup "GroupC" (prepend apiSchemas = ["CollectionAPI:colliders"]) {
    prepend rel collection:colliders:includes = </b3/s4>
}
def Xform "b1" (prepend apiSchemas = ["PhysicsRigidBodyAPI"]) {
    def Sphere "s1" (prepend apiSchemas = ["PhysicsCollisionAPI"]) {
        double radius = 0.1
        rel physics:filteredPairs = [</b2/s2>]
    }
    def Cube "c1" (prepend apiSchemas = ["PhysicsCollisionAPI"]) {
        double size = 0.2
        bool physics:collisionEnabled = 0
    }
}
def Xform "b2" (prepend apiSchemas = ["PhysicsRigidBodyAPI"]) {
    def Sphere "s2" (prepend apiSchemas = ["PhysicsCollisionAPI"]) {
        double radius = 0.1
    }
    def Sphere "s3" (prepend apiSchemas = ["PhysicsCollisionAPI"]) {
        double radius = 0.1
    }
}
def Xform "b3" (prepend apiSchemas = ["PhysicsRigidBodyAPI"]) {
    rel physics:filteredPairs = [</b2>]
    def Sphere "s4" (prepend apiSchemas = ["PhysicsCollisionAPI"]) {
        double radius = 0.1
    }
}
def Sphere "ground" (prepend apiSchemas = ["PhysicsCollisionAPI"]) {
    double radius = 0.5
}
"""


def test_groups_filtered_pairs_and_disabled_colliders():
    b, r = load(stage_from(GROUPS))
    pairs = path_pairs(b, r)
    m = r["path_shape_map"]
    # reference: GroupA filters GroupB (s1 with s2, s3); b3's filteredPairs with body b2 (s4 with s2, s3)
    ref = {P("/b1/s1", "/b2/s2"), P("/b1/s1", "/b2/s3"), P("/b2/s2", "/b3/s4"), P("/b2/s3", "/b3/s4")}
    assert ref <= pairs
    # unfiltered groups keep colliding (GroupC with GroupA, anything with the ungrouped ground)
    assert P("/b1/s1", "/b3/s4") not in pairs
    assert P("/b3/s4", "/ground") not in pairs and P("/b1/s1", "/ground") not in pairs
    # reference: the shapes keep the default collision group
    assert {b.shape_collision_group[i] for i in m.values()} == {1}
    assert r["collision_group_ids"] == {"/GroupA": 1, "/GroupB": 2, "/GroupC": 3}
    # collisionEnabled = false: no collision flags, no mass (reference), filtered against all (Collisions page)
    c1 = m["/b1/c1"]
    assert not b.shape_flags[c1] & (ShapeFlags.COLLIDE_SHAPES | ShapeFlags.COLLIDE_PARTICLES)
    assert all(P("/b1/c1", p) in pairs for p in m if p != "/b1/c1")
    assert b.body_mass[r["path_body_map"]["/b1"]] == pytest.approx(4 / 3 * 3.141592653589793 * 0.001 * 1000, rel=1e-6)


def test_inverted_filtered_groups():
    text = GROUPS.replace("rel physics:filteredGroups = </GroupB>", "rel physics:filteredGroups = </GroupB>\n    bool physics:invertFilteredGroups = 1")
    b, r = load(stage_from(text))
    pairs = path_pairs(b, r)
    # GroupA now collides only with GroupB: filtered against GroupC (and itself: one member)
    assert P("/b1/s1", "/b3/s4") in pairs
    assert P("/b1/s1", "/b2/s3") not in pairs


# ------------------------------------------------------------------------------------------------ joints and self collisions


def two_links(extra_joint="", root_attrs="", root_api='"PhysicsArticulationRootAPI"'):
    return HEADER + f"""
def Xform "R" (prepend apiSchemas = [{root_api}]) {{
    {root_attrs}
    def Xform "A" (prepend apiSchemas = ["PhysicsRigidBodyAPI"]) {{
        def Cube "c" (prepend apiSchemas = ["PhysicsCollisionAPI"]) {{
            double size = 0.2
        }}
    }}
    def Xform "B" (prepend apiSchemas = ["PhysicsRigidBodyAPI"]) {{
        double3 xformOp:translate = (1, 0, 0)
        uniform token[] xformOpOrder = ["xformOp:translate"]
        def Cube "c" (prepend apiSchemas = ["PhysicsCollisionAPI"]) {{
            double size = 0.2
        }}
    }}
    def Xform "C" (prepend apiSchemas = ["PhysicsRigidBodyAPI"]) {{
        double3 xformOp:translate = (2, 0, 0)
        uniform token[] xformOpOrder = ["xformOp:translate"]
        def Cube "c" (prepend apiSchemas = ["PhysicsCollisionAPI"]) {{
            double size = 0.2
        }}
    }}
    def PhysicsFixedJoint "root" {{
        rel physics:body1 = </R/A>
    }}
    def PhysicsRevoluteJoint "ab" {{
        rel physics:body0 = </R/A>
        rel physics:body1 = </R/B>
        point3f physics:localPos0 = (0.5, 0, 0)
        point3f physics:localPos1 = (-0.5, 0, 0)
        uniform token physics:axis = "Z"
        {extra_joint}
    }}
    def PhysicsRevoluteJoint "bc" {{
        rel physics:body0 = </R/B>
        rel physics:body1 = </R/C>
        point3f physics:localPos0 = (0.5, 0, 0)
        point3f physics:localPos1 = (-0.5, 0, 0)
        uniform token physics:axis = "Z"
    }}
}}
"""


def test_joint_collision_enabled_has_inverse_polarity():
    b, r = load(stage_from(two_links()))
    pairs = path_pairs(b, r)
    assert P("/R/A/c", "/R/B/c") in pairs and P("/R/B/c", "/R/C/c") in pairs
    assert P("/R/A/c", "/R/C/c") not in pairs
    b, r = load(stage_from(two_links("bool physics:collisionEnabled = 1")))
    pairs = path_pairs(b, r)
    assert P("/R/A/c", "/R/B/c") not in pairs and P("/R/B/c", "/R/C/c") in pairs


def test_enable_self_collisions_argument_and_attributes():
    b, r = load(stage_from(two_links()), enable_self_collisions=False)
    assert P("/R/A/c", "/R/C/c") in path_pairs(b, r)
    # newton:selfCollisionEnabled on the articulation root wins over the argument
    text = two_links(root_attrs="bool newton:selfCollisionEnabled = 1",
                     root_api='"PhysicsArticulationRootAPI", "NewtonArticulationRootAPI"')
    b, r = load(stage_from(text), enable_self_collisions=False)
    assert P("/R/A/c", "/R/C/c") not in path_pairs(b, r)
    text = two_links(root_attrs="bool newton:selfCollisionEnabled = 0",
                     root_api='"PhysicsArticulationRootAPI", "NewtonArticulationRootAPI"')
    b, r = load(stage_from(text))
    assert P("/R/A/c", "/R/C/c") in path_pairs(b, r)


def test_physx_self_collision_attribute_through_its_resolver():
    schemas = pytest.importorskip("armillary_importer_usd.schemas")
    text = two_links(root_attrs="bool physxArticulation:enabledSelfCollisions = 0",
                     root_api='"PhysicsArticulationRootAPI", "PhysxArticulationAPI"')
    # reference: the default (newton-only) resolvers ignore the PhysX attribute
    b, r = load(stage_from(text))
    assert P("/R/A/c", "/R/C/c") not in path_pairs(b, r)
    b, r = load(stage_from(text), schema_resolvers=[schemas.SchemaResolverNewton(), schemas.SchemaResolverPhysx()])
    assert P("/R/A/c", "/R/C/c") in path_pairs(b, r)


def test_filtered_pairs_api_authored_with_the_schema_class():
    s = stage_from(two_links())
    UsdPhysics.FilteredPairsAPI.Apply(s.GetPrimAtPath("/R/A")).CreateFilteredPairsRel().AddTarget("/R/C/c")
    b, r = load(s)
    assert P("/R/A/c", "/R/C/c") in path_pairs(b, r)

"""The USD code examples of the specification pages, run as written (``import armillary as newton``).

Each test writes the asset the example names into a temporary folder, changes into it and runs the
example's code unchanged; then it checks what the page says the example does.
"""

import warnings

import numpy as np
import pytest

import armillary as newton

ROBOT = """#usda 1.0
(
    defaultPrim = "robot"
    metersPerUnit = 1
    upAxis = "Z"
)
def PhysicsScene "physicsScene"
{
}
def Xform "robot" (
    prepend apiSchemas = ["PhysicsArticulationRootAPI"]
)
{
    def Xform "base" (prepend apiSchemas = ["PhysicsRigidBodyAPI", "PhysicsMassAPI"])
    {
        float physics:mass = 2
        def Cube "geom" (prepend apiSchemas = ["PhysicsCollisionAPI"])
        {
            double size = 0.2
        }
    }
    def Xform "link1" (prepend apiSchemas = ["PhysicsRigidBodyAPI", "PhysicsMassAPI"])
    {
        double3 xformOp:translate = (0, 0, 0.5)
        uniform token[] xformOpOrder = ["xformOp:translate"]
        float physics:mass = 1
        def Capsule "geom" (prepend apiSchemas = ["PhysicsCollisionAPI"])
        {
            double radius = 0.05
            double height = 0.4
            uniform token axis = "Z"
        }
    }
    def Xform "finger" (prepend apiSchemas = ["PhysicsRigidBodyAPI", "PhysicsMassAPI"])
    {
        double3 xformOp:translate = (0, 0, 1.0)
        uniform token[] xformOpOrder = ["xformOp:translate"]
        float physics:mass = 0.2
        def Mesh "geom" (prepend apiSchemas = ["PhysicsCollisionAPI", "PhysicsMeshCollisionAPI"])
        {
            point3f[] points = [(-0.05, -0.05, -0.1), (0.05, -0.05, -0.1), (0.05, 0.05, -0.1), (-0.05, 0.05, -0.1),
                                (-0.05, -0.05, 0.1), (0.05, -0.05, 0.1), (0.05, 0.05, 0.1), (-0.05, 0.05, 0.1),
                                (0, 0, 0.15)]
            int[] faceVertexCounts = [4, 4, 4, 4, 4, 3, 3, 3, 3]
            int[] faceVertexIndices = [0, 3, 2, 1, 0, 1, 5, 4, 1, 2, 6, 5, 2, 3, 7, 6, 3, 0, 4, 7,
                                       4, 5, 8, 5, 6, 8, 6, 7, 8, 7, 4, 8]
            uniform token physics:approximation = "none"
        }
    }
    def PhysicsFixedJoint "root_joint"
    {
        rel physics:body1 = </robot/base>
    }
    def PhysicsRevoluteJoint "joint1"
    {
        rel physics:body0 = </robot/base>
        rel physics:body1 = </robot/link1>
        uniform token physics:axis = "Y"
        point3f physics:localPos0 = (0, 0, 0.25)
        point3f physics:localPos1 = (0, 0, -0.25)
        float physics:lowerLimit = -90
        float physics:upperLimit = 90
    }
    def PhysicsPrismaticJoint "finger_joint"
    {
        rel physics:body0 = </robot/link1>
        rel physics:body1 = </robot/finger>
        uniform token physics:axis = "Z"
        point3f physics:localPos0 = (0, 0, 0.25)
        point3f physics:localPos1 = (0, 0, -0.25)
        float physics:lowerLimit = 0
        float physics:upperLimit = 0.05
    }
}
"""


@pytest.fixture
def in_assets(tmp_path, monkeypatch):
    """A folder holding robot.usd / robot.usda (the page's file names), made the working directory."""
    (tmp_path / "robot.usd").write_text(ROBOT)
    (tmp_path / "robot.usda").write_text(ROBOT)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_articulations_replicated_usd_robot_in_an_articulation_view(in_assets):
    # Articulations page, "Selections with structural differences"
    robot = newton.ModelBuilder()
    robot.add_usd("robot.usd")
    scene = newton.ModelBuilder()
    scene.replicate(robot, copy_count=1024)
    model = scene.finalize()
    view = newton.selection.ArticulationView(model, pattern="robot*")  # homogeneous=True

    assert view.count == 1024 and view.world_count == 1024
    assert view.joint_dof_count == 2 and view.link_count == 3
    state = model.state()
    q = view.get_dof_positions(state)
    assert q.shape == (1024, 1, 2)
    target = np.tile(np.array([0.3, 0.02], dtype=np.float32), (1024, 1, 1))
    view.set_dof_positions(state, target)
    np.testing.assert_allclose(state.joint_q.numpy().reshape(1024, 2), target.reshape(1024, 2))


def test_collisions_self_collision_switch(in_assets):
    # Collisions page, "Self-collision within articulations"
    builder = newton.ModelBuilder()
    builder.add_usd("robot.usda", enable_self_collisions=True)
    pairs_on = set(builder.shape_collision_filter_pairs)
    off = newton.ModelBuilder()
    off.add_usd("robot.usda", enable_self_collisions=False)
    pairs_off = set(off.shape_collision_filter_pairs)
    # base (0) and finger (2) are not adjacent: they collide only when self-collisions are enabled
    assert (0, 2) not in pairs_on and (0, 2) in pairs_off
    # adjacent bodies stay filtered either way (collision_filter_parent)
    assert {(0, 1), (1, 2)} <= pairs_on and {(0, 1), (1, 2)} <= pairs_off


def test_collisions_mesh_simplification(in_assets):
    # Collisions page, "Mesh simplification for collision"
    builder = newton.ModelBuilder()
    builder.add_usd("robot.usda")
    mesh_shapes = [i for i, t in enumerate(builder.shape_type) if int(t) == int(newton.GeoType.MESH)]
    assert len(mesh_shapes) == 1
    # Replace all collision meshes with convex hulls (default)
    builder.approximate_meshes()
    assert int(builder.shape_type[mesh_shapes[0]]) == int(newton.GeoType.CONVEX_MESH)

    builder = newton.ModelBuilder()
    builder.add_usd("robot.usda")
    non_finger_shapes = [0, 1]
    count = builder.shape_count
    # Or target specific shapes and keep visual geometry
    builder.approximate_meshes(
        method="convex_hull",
        shape_indices=non_finger_shapes,
        keep_visual_shapes=True,
    )
    assert int(builder.shape_type[2]) == int(newton.GeoType.MESH)  # the finger was not targeted
    assert builder.shape_count == count  # primitives are left alone: nothing to keep as visual


def test_orphan_joints_without_articulation_root_import_silently(in_assets):
    # Articulations page, "Orphan joints": no PhysicsArticulationRootAPI on any prim
    (in_assets / "rootless.usda").write_text(ROBOT.replace('prepend apiSchemas = ["PhysicsArticulationRootAPI"]', ""))
    builder = newton.ModelBuilder()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        builder.add_usd("rootless.usda")
    assert builder.articulation_count == 0 and builder.joint_count == 3
    model = builder.finalize(skip_validation_joints=True)
    assert model.joint_count == 3

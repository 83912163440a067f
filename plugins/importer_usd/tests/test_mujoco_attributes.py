"""MuJoCo's USD schema (mjc:*) fills the mujoco:* custom attributes SolverMuJoCo reads."""

import numpy as np
import pytest

import armillary

STAGE = """#usda 1.0
(
    upAxis = "Z"
    metersPerUnit = 1
)
def PhysicsScene "scene"
{
    int mjc:option:iterations = 7
    token mjc:option:integrator = "implicitfast"
    token mjc:option:cone = "elliptic"
    double3 mjc:option:wind = (1, 2, 3)
    bool mjc:flag:contact = 0
}
def Xform "robot" (prepend apiSchemas = ["PhysicsArticulationRootAPI"])
{
    def Xform "base" (prepend apiSchemas = ["PhysicsRigidBodyAPI", "PhysicsMassAPI"])
    {
        float physics:mass = 1
        double mjc:gravcomp = 0.5
        def Sphere "ball" (prepend apiSchemas = ["PhysicsCollisionAPI"])
        {
            double radius = 0.1
            int mjc:condim = 6
            int mjc:priority = 2
            double2 mjc:solref = (0.05, 0.8)
            double mjc:solmix = 0.3
        }
    }
    def PhysicsRevoluteJoint "hinge"
    {
        rel physics:body1 = </robot/base>
        uniform token physics:axis = "Z"
        float physics:lowerLimit = -45
        float physics:upperLimit = 45
        double2 mjc:solreflimit = (0.01, 2)
        double mjc:margin = 0.02
    }
}
"""


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("mjc") / "mjc.usda"
    path.write_text(STAGE)
    builder = armillary.ModelBuilder()
    builder.add_usd(str(path))
    return builder.finalize()


def test_shape_body_and_joint_values(model):
    assert model.mujoco.condim.numpy().tolist() == [6]
    assert model.mujoco.geom_priority.numpy().tolist() == [2]
    np.testing.assert_allclose(model.mujoco.solref.numpy()[0], [0.05, 0.8])
    np.testing.assert_allclose(model.mujoco.geom_solmix.numpy(), [0.3])
    np.testing.assert_allclose(model.mujoco.gravcomp.numpy(), [0.5])
    np.testing.assert_allclose(model.mujoco.solreflimit.numpy()[0], [0.01, 2.0])
    np.testing.assert_allclose(model.mujoco.limit_margin.numpy(), [0.02])


def test_scene_options_and_flags(model):
    assert int(model.mujoco.iterations.numpy()[0]) == 7
    assert int(model.mujoco.integrator.numpy()[0]) == 3  # implicitfast
    assert int(model.mujoco.cone.numpy()[0]) == 1  # elliptic
    np.testing.assert_allclose(model.mujoco.wind.numpy()[0], [1.0, 2.0, 3.0])
    assert not bool(model.mujoco.flag_contact.numpy()[0])
    assert bool(model.mujoco.flag_limit.numpy()[0])  # unauthored: MuJoCo's default


def test_solver_mujoco_uses_them(model):
    solver = armillary.solvers.SolverMuJoCo(model)
    mj = solver.mj_model
    assert mj.opt.iterations == 7
    assert mj.geom_condim.tolist() == [6]
    np.testing.assert_allclose(mj.jnt_solref[0], [0.01, 2.0])


def test_parse_mujoco_options_false_keeps_option_defaults(tmp_path):
    path = tmp_path / "mjc.usda"
    path.write_text(STAGE)
    builder = armillary.ModelBuilder()
    builder.add_usd(str(path), parse_mujoco_options=False)
    model = builder.finalize()
    assert int(model.mujoco.iterations.numpy()[0]) == 100  # MuJoCo's default, not the authored 7
    assert bool(model.mujoco.flag_contact.numpy()[0])
    assert model.mujoco.condim.numpy().tolist() == [6]  # per-entity values are not options: still read

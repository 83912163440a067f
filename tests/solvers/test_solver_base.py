"""The SolverBase contract: early capability checks, flags, declarations."""

import types

import numpy as np
import pytest
import warp as wp

from armillary import JointType, ModelFlags, StateFlags
from armillary.solvers import FEATURES, Coordinates, SolverBase, SolverCapabilities


def fake_model(joint_types=(), labels=None, **counts):
    """Just the attributes the capability checks read."""
    model = types.SimpleNamespace(
        device=wp.get_device("cpu"),
        joint_count=len(joint_types),
        joint_type=wp.array(np.array([int(t) for t in joint_types], dtype=np.int32), dtype=wp.int32, device="cpu"),
        joint_label=labels or [f"j{i}" for i in range(len(joint_types))],
        particle_count=0, spring_count=0, tri_count=0, tet_count=0, world_count=1,
    )
    for k, v in counts.items():
        setattr(model, k, v)
    return model


class SolverRigid(SolverBase):
    """Free and revolute joints, rigid bodies only."""

    capabilities = SolverCapabilities(
        coordinates=Coordinates.MAXIMAL,
        joint_types={JointType.FREE, "REVOLUTE"},
        features={"rigid_bodies"},
    )

    def __init__(self, model):
        super().__init__(model)
        self.seen_flags = []

    def notify_model_changed(self, flags):
        super().notify_model_changed(flags)
        self.seen_flags.append(int(flags))


def test_supported_model_is_accepted():
    solver = SolverRigid(fake_model([JointType.FREE, JointType.REVOLUTE]))
    assert solver.model.joint_count == 2


def test_unsupported_joint_type_is_rejected_naming_the_joint():
    with pytest.raises(ValueError) as info:
        SolverRigid(fake_model([JointType.FREE, JointType.BALL, JointType.BALL], labels=["root", "shoulder", "elbow"]))
    message = str(info.value)
    assert "SolverRigid" in message and "BALL" in message and "'shoulder'" in message and "joint 1" in message
    assert "2 unsupported" in message and "FREE, REVOLUTE" in message


@pytest.mark.parametrize("feature,count_name", [("particles", "particle_count"), ("springs", "spring_count"),
                                                ("cloth", "tri_count"), ("soft_bodies", "tet_count")])
def test_undeclared_model_features_are_rejected(feature, count_name):
    with pytest.raises(ValueError, match=f"does not support {feature} \\(the model has 3\\)"):
        SolverRigid(fake_model([], **{count_name: 3}))


def test_multiple_worlds_need_the_declaration():
    with pytest.raises(ValueError, match="multiple worlds"):
        SolverRigid(fake_model([], world_count=4))


def test_collision_pipeline_only_when_declared():
    class SolverNoPipeline(SolverBase):
        capabilities = SolverCapabilities(coordinates="maximal")

    class SolverWithPipeline(SolverBase):
        capabilities = SolverCapabilities(coordinates="maximal", collision_pipeline=True)

    with pytest.raises(ValueError, match="collision_pipeline=False"):
        SolverNoPipeline(fake_model([]), collision_pipeline=object())
    pipeline = object()
    assert SolverWithPipeline(fake_model([]), collision_pipeline=pipeline).collision_pipeline is pipeline


def test_custom_model_flag_bits_pass_through():
    solver = SolverRigid(fake_model([]))
    custom = 1 << 20
    solver.notify_model_changed(ModelFlags.JOINT_PROPERTIES | custom)
    solver.notify_model_changed(custom)
    assert solver.seen_flags == [int(ModelFlags.JOINT_PROPERTIES) | custom, custom]
    with pytest.raises(TypeError, match="ModelFlags or an int"):
        solver.notify_model_changed("joints")
    with pytest.raises(ValueError, match="non-negative"):
        solver.notify_model_changed(-1)


def test_default_update_contacts_and_step_say_what_is_missing():
    solver = SolverRigid(fake_model([]))
    with pytest.raises(NotImplementedError, match="SolverRigid does not report contact forces"):
        solver.update_contacts(None)
    with pytest.raises(NotImplementedError, match="SolverRigid.step"):
        solver.step(None, None, None, None, 0.01)


def test_capability_declarations_are_validated():
    with pytest.raises(ValueError, match="unknown feature"):
        SolverCapabilities(coordinates="maximal", features={"teleportation"})
    with pytest.raises(ValueError, match="unknown joint type"):
        SolverCapabilities(coordinates="maximal", joint_types={"HINGE"})
    with pytest.raises(ValueError):
        SolverCapabilities(coordinates="polar")
    caps = SolverCapabilities(coordinates="generalized", joint_types={"REVOLUTE"}, features={"joint_limits"})
    assert caps.coordinates is Coordinates.GENERALIZED and caps.joint_types == {JointType.REVOLUTE}
    assert caps.supports("joint_limits") and not caps.supports("particles")
    with pytest.raises(ValueError, match="unknown feature"):
        caps.supports("nope")


def test_flags_layout_matches_reference_values():
    assert int(ModelFlags.JOINT_PROPERTIES) == 1 and int(ModelFlags.SHAPE_TYPE_AND_SOURCE) == 4096
    assert int(ModelFlags.ALL) == 8191
    assert StateFlags.BODY == StateFlags.BODY_Q | StateFlags.BODY_QD and int(StateFlags.ALL) == 511
    assert set(FEATURES) >= {"rigid_bodies", "rigid_contacts", "kinematic_bodies", "particles"}

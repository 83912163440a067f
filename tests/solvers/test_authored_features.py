"""Imported values that need a solver feature: recorded on the builder, carried to the model, warned about."""

import warnings

import pytest

import armillary
from armillary.solvers import SolverBase, SolverCapabilities


class SolverArmatureOnly(SolverBase):
    capabilities = SolverCapabilities(coordinates="maximal", joint_types={"REVOLUTE"},
                                      features={"rigid_bodies", "joint_armature", "multiple_worlds"})


def _pendulum():
    b = armillary.ModelBuilder()
    link = b.add_link()
    b.add_articulation([b.add_joint_revolute(-1, link)])
    return b


def test_notes_survive_replication_once_and_reach_the_model():
    b = _pendulum()
    b.note_authored_feature("joint_friction", "</robot/elbow> newton:friction")
    b.note_authored_feature("joint_friction", "</robot/elbow> newton:friction")  # recorded once
    b.note_authored_feature("joint_armature", "</robot/elbow> newton:armature")
    scene = armillary.ModelBuilder()
    scene.replicate(b, 3)
    model = scene.finalize()
    assert model.authored_features == (("joint_friction", "</robot/elbow> newton:friction"),
                                       ("joint_armature", "</robot/elbow> newton:armature"))


def test_unknown_feature_is_rejected():
    with pytest.raises(ValueError, match="unknown feature 'joint_magic'.*allowed:.*joint_friction"):
        _pendulum().note_authored_feature("joint_magic", "somewhere")


def test_solver_warns_once_per_unhonoured_feature_naming_the_sources():
    b = _pendulum()
    for i in range(5):
        b.note_authored_feature("joint_friction", f"</robot/j{i}> newton:friction")
    b.note_authored_feature("joint_armature", "</robot/j0> newton:armature")
    model = b.finalize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        SolverArmatureOnly(model)
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1, messages
    assert "SolverArmatureOnly does not honour joint_friction" in messages[0]
    assert "</robot/j0> newton:friction, </robot/j1> newton:friction, </robot/j2> newton:friction and 2 more" in messages[0]


def test_no_warning_without_notes():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SolverArmatureOnly(_pendulum().finalize())

"""Top-level names scripts import, warning categories, and deprecation warnings that point at the
caller's line (issue 20).

Before issue 20 ``armillary.MAXVAL`` and the warning classes did not exist, and
``ArticulationView.eval_mass_matrix(include_armature=False)`` reported its deprecation at a line of
``armillary/selection.py`` instead of the script's.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import warp as wp

import armillary
import armillary as newton


# ------------------------------------------------------------------------------ names
def test_top_level_names():
    assert armillary.MAXVAL == 1.0e10
    from armillary import MAXVAL, NewtonDeprecationWarning, NewtonWarning, Rod, TetMesh  # noqa: F401
    from armillary.geometry import MAXVAL as GEOMETRY_MAXVAL
    from armillary.sim.rod import Rod as SimRod
    from armillary.sim.tetmesh import TetMesh as SimTetMesh

    assert MAXVAL == GEOMETRY_MAXVAL
    assert Rod is SimRod and TetMesh is SimTetMesh
    for name in ("MAXVAL", "NewtonWarning", "NewtonDeprecationWarning", "Rod", "TetMesh"):
        assert name in armillary.__all__


def test_warning_classes():
    assert armillary.NewtonWarning is armillary.ArmillaryWarning
    assert armillary.NewtonDeprecationWarning is armillary.ArmillaryDeprecationWarning
    assert issubclass(armillary.NewtonWarning, UserWarning)
    assert issubclass(armillary.NewtonDeprecationWarning, DeprecationWarning)
    assert not issubclass(armillary.NewtonDeprecationWarning, armillary.NewtonWarning)
    from armillary.sim.custom_attributes import CustomAttributeWarning

    assert issubclass(CustomAttributeWarning, armillary.NewtonWarning)


def test_core_warnings_use_the_category_and_the_callers_line():
    b = newton.ModelBuilder()
    b.add_link(mass=1.0, inertia=wp.mat33(np.diag([1.0, 1.0, 5.0])))  # violates the triangle inequality
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        b.finalize(device="cpu")
    hits = [w for w in rec if "inertia" in str(w.message)]
    assert hits and hits[0].category is armillary.NewtonWarning
    assert hits[0].filename == __file__
    with warnings.catch_warnings():
        warnings.filterwarnings("error", category=armillary.NewtonWarning)
        with pytest.raises(armillary.NewtonWarning):
            b.finalize(device="cpu")


# ------------------------------------------------------------------------------ deprecations
def _arm():
    b = newton.ModelBuilder()
    a = b.add_link(mass=1.0, com=(0.3, 0.0, 0.0))
    b.add_articulation([b.add_joint_revolute(-1, a, axis=(0.0, 1.0, 0.0), armature=0.5)], label="arm")
    m = b.finalize(device="cpu")
    s = m.state()
    newton.eval_fk(m, s.joint_q, s.joint_qd, s)
    return m, s


def _call(fn):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        result = fn()
    dep = [w for w in rec if issubclass(w.category, DeprecationWarning)]
    assert dep, "no deprecation warning"
    return dep, result


def _dof_cfg_target_pos_get():
    cfg = newton.ModelBuilder.JointDofConfig()
    return cfg.target_pos  # the line the warning must name


def _dof_cfg_target_vel_set():
    cfg = newton.ModelBuilder.JointDofConfig()
    cfg.target_vel = 1.0


def _rod_start():
    return newton.ModelBuilder().add_rod(rod=newton.Rod([[0, 0, 0], [1, 0, 0], [3, 0, 0]]), body_frame_origin="start")


def _builder_gravity_setter():
    b = newton.ModelBuilder()
    b.gravity = -3.0


def _revolute_target_pos():
    b = newton.ModelBuilder()
    return b.add_joint_revolute(-1, b.add_link(), target_pos=0.1)


def _prismatic_target_vel():
    b = newton.ModelBuilder()
    return b.add_joint_prismatic(-1, b.add_link(), target_vel=0.1)


def _eval_mass_matrix():
    m, s = _arm()
    return newton.eval_mass_matrix(m, s, include_armature=False)


def _view_eval_mass_matrix():
    m, s = _arm()
    view = newton.selection.ArticulationView(m, "arm")
    return view.eval_mass_matrix(s, include_armature=False)


def _view_allow_partial_layouts():
    m, _ = _arm()
    return newton.selection.ArticulationView(m, "arm", allow_partial_layouts=True)


def _contacts_diff_distance():
    return newton.Contacts(4, 0, requires_grad=True).rigid_contact_diff_distance


def _contacts_diff_normal():
    return newton.Contacts(4, 0, requires_grad=True).rigid_contact_diff_normal


DEPRECATED = {
    "ModelBuilder(gravity=scalar)": lambda: newton.ModelBuilder(gravity=-9.81),
    "ModelBuilder.gravity = scalar": _builder_gravity_setter,
    "JointDofConfig(target_pos=)": lambda: newton.ModelBuilder.JointDofConfig(target_pos=0.2),
    "JointDofConfig.target_pos": _dof_cfg_target_pos_get,
    "JointDofConfig.target_vel =": _dof_cfg_target_vel_set,
    "add_joint_revolute(target_pos=)": _revolute_target_pos,
    "add_joint_prismatic(target_vel=)": _prismatic_target_vel,
    "add_rod(body_frame_origin='start')": _rod_start,
    "eval_mass_matrix(include_armature=False)": _eval_mass_matrix,
    "ArticulationView.eval_mass_matrix(include_armature=False)": _view_eval_mass_matrix,
    "ArticulationView(allow_partial_layouts=)": _view_allow_partial_layouts,
    "Contacts.rigid_contact_diff_distance": _contacts_diff_distance,
    "Contacts.rigid_contact_diff_normal": _contacts_diff_normal,
}


@pytest.mark.parametrize("path", list(DEPRECATED))
def test_deprecations_point_at_the_callers_line(path):
    dep, _ = _call(DEPRECATED[path])
    for w in dep:
        assert w.category is armillary.NewtonDeprecationWarning, (path, w.category)
        assert w.filename == __file__, (path, w.filename, w.lineno)


def test_view_mass_matrix_without_armature_still_computes():
    _, H = _call(_view_eval_mass_matrix)
    m, s = _arm()
    with_armature = newton.eval_mass_matrix(m, s).numpy()
    np.testing.assert_allclose(with_armature[0, 0, 0] - H.numpy()[0, 0, 0], 0.5, rtol=1e-5)

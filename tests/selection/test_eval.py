"""The view's evaluation helpers delegate to armillary.eval_* with the view's articulation mask."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import warp as wp

import armillary as newton
from armillary.selection import ArticulationView as AV


def _has(module: str, name: str) -> bool:
    try:
        if importlib.util.find_spec(module) is None:
            return False
    except ModuleNotFoundError:
        return False
    return hasattr(importlib.import_module(module), name)


needs_fk = pytest.mark.skipif(
    not _has("armillary.sim.kinematics", "eval_fk"),
    reason="armillary.eval_fk (armillary.sim.kinematics) not available yet",
)
needs_dyn = pytest.mark.skipif(
    not (_has("armillary.sim.kinematics", "eval_fk") and _has("armillary.sim.dynamics", "eval_mass_matrix")),
    reason="armillary.sim.dynamics not available yet",
)


@needs_fk
def test_view_eval_fk_updates_only_selected_articulations(mk):
    model = mk.replicated(mk.arm("free"), 3)
    state = model.state()
    view = AV(model, "arm")
    tf = view.get_root_transforms(state).numpy()
    tf[..., 1] += 3.0
    view.set_root_transforms(state, tf)
    before = state.body_q.numpy().copy()
    view.eval_fk(state, mask=wp.array([False, True, False], dtype=bool))
    after = state.body_q.numpy()
    np.testing.assert_array_equal(after[[0, 1, 4, 5]], before[[0, 1, 4, 5]])
    np.testing.assert_allclose(view.get_link_transforms(state).numpy()[1, 0, :, 1], before[[2, 3], 1] + 3.0, atol=1e-6)
    view.eval_fk(state)
    np.testing.assert_allclose(after[2:4], view.get_link_transforms(state).numpy()[1, 0], atol=1e-6)
    np.testing.assert_allclose(view.get_link_transforms(state).numpy()[:, 0, 0, :3], tf[:, 0, :3], atol=1e-6)


@needs_dyn
def test_view_mass_matrix_and_jacobian_match_the_model_functions_on_selected_articulations(mk):
    model = mk.replicated(mk.arm("revolute"), 2)
    state = model.state()
    newton.eval_fk(model, state.joint_q, state.joint_qd, state)
    full = newton.eval_mass_matrix(model, state)
    view = AV(model, "arm")
    H = view.eval_mass_matrix(state, mask=[[False], [True]])
    np.testing.assert_allclose(H.numpy()[1], full.numpy()[1], rtol=1e-6, atol=1e-6)
    Jfull = newton.eval_jacobian(model, state)
    J = view.eval_jacobian(state)
    np.testing.assert_allclose(J.numpy(), Jfull.numpy(), rtol=1e-6, atol=1e-6)

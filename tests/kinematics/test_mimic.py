"""eval_mimic: formulas, separate output state, articulation selectors."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp
from hypothesis import given, settings
from hypothesis import strategies as st

import armillary

finite = st.floats(-5.0, 5.0, allow_nan=False)


def _model(n_axes: int, coeffs, worlds: int = 1):
    b = armillary.ModelBuilder()
    Cfg = armillary.ModelBuilder.JointDofConfig
    l0, l1, l2 = (b.add_link(mass=1.0) for _ in range(3))
    axes = [armillary.Axis.X, armillary.Axis.Y, armillary.Axis.Z][:n_axes]
    j0 = b.add_joint_d6(-1, l0, linear_axes=[Cfg(axis=a) for a in axes[:1]],
                        angular_axes=[Cfg(axis=a) for a in axes[1:]])
    j1 = b.add_joint_revolute(l0, l1, axis=(0, 0, 1))
    j2 = b.add_joint_d6(l1, l2, angular_axes=[Cfg(axis=a) for a in axes])
    b.add_articulation([j0, j1, j2])
    b.set_joint_mimic(j2, j0, coeffs=coeffs)
    if worlds > 1:
        s = armillary.ModelBuilder()
        s.replicate(b, worlds)
        b = s
    return b.finalize(device="cpu")


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 3), offset=finite, mult=finite, seed=st.integers(0, 2**31 - 1))
def test_mimic_formula_componentwise(n, offset, mult, seed):
    model = _model(n, (offset, mult))
    rng = np.random.default_rng(seed)
    state = model.state()
    q = rng.uniform(-2, 2, model.joint_coord_count).astype(np.float32)
    qd = rng.uniform(-2, 2, model.joint_dof_count).astype(np.float32)
    state.joint_q.assign(q)
    state.joint_qd.assign(qd)
    armillary.eval_mimic(model, state)
    out_q, out_qd = state.joint_q.numpy(), state.joint_qd.numpy()
    # leader (joint 0) and independent joint 1 unchanged; follower = offset + mult * leader
    assert np.array_equal(out_q[: n + 1], q[: n + 1])
    assert np.array_equal(out_qd[: n + 1], qd[: n + 1])
    assert np.allclose(out_q[n + 1 :], np.float32(offset) + np.float32(mult) * q[:n], rtol=1e-6, atol=1e-5)
    assert np.allclose(out_qd[n + 1 :], np.float32(mult) * qd[:n], rtol=1e-6, atol=1e-5)


def test_mimic_separate_output_state_and_selectors():
    model = _model(2, (0.5, -1.5), worlds=3)
    nq, nd = model.joint_coord_count // 3, model.joint_dof_count // 3
    s_in = model.state()
    s_in.joint_q.assign(np.arange(model.joint_coord_count, dtype=np.float32))
    s_in.joint_qd.assign(np.arange(model.joint_dof_count, dtype=np.float32))
    q_in_before = s_in.joint_q.numpy().copy()
    s_out = model.state()
    s_out.joint_q.fill_(-9.0)
    s_out.joint_qd.fill_(-9.0)
    armillary.eval_mimic(model, s_in, s_out, indices=wp.array([2, 0], dtype=wp.int32))
    assert np.array_equal(s_in.joint_q.numpy(), q_in_before)  # input untouched
    q_out = s_out.joint_q.numpy()
    for a in range(3):
        block = q_out[a * nq : (a + 1) * nq]
        if a == 1:
            assert np.all(block == -9.0)
        else:
            src = q_in_before[a * nq : (a + 1) * nq]
            assert np.array_equal(block[:3], src[:3])
            assert np.allclose(block[3:], 0.5 - 1.5 * src[:2])
    # mask selector updates in place only selected articulations
    s = model.state()
    s.joint_q.assign(q_in_before)
    armillary.eval_mimic(model, s, mask=wp.array([False, True, False], dtype=wp.bool))
    q = s.joint_q.numpy()
    assert np.array_equal(q[:nq], q_in_before[:nq]) and np.array_equal(q[2 * nq :], q_in_before[2 * nq :])
    assert np.allclose(q[nq + 3 : 2 * nq], 0.5 - 1.5 * q_in_before[nq : nq + 2])
    # no selector with an output state copies everything
    s_out2 = model.state()
    s_out2.joint_q.fill_(-9.0)
    armillary.eval_mimic(model, s_in, s_out2)
    assert not np.any(s_out2.joint_q.numpy() == -9.0)


def test_mimic_then_fk():
    model = _model(1, (0.1, 2.0))
    state = model.state()
    state.joint_q.assign([0.3, 0.0, 0.0])
    armillary.eval_mimic(model, state)
    armillary.eval_fk(model, state.joint_q, state.joint_qd, state)
    assert np.allclose(state.joint_q.numpy(), [0.3, 0.0, 0.7])


def test_set_joint_mimic_validation():
    b = armillary.ModelBuilder()
    l0, l1, l2 = (b.add_link() for _ in range(3))
    j0 = b.add_joint_revolute(-1, l0)
    j1 = b.add_joint_revolute(l0, l1)
    j2 = b.add_joint_ball(l1, l2)
    b.set_joint_mimic(j1, j0)
    with pytest.raises(ValueError):
        b.set_joint_mimic(j0, j1)  # j1 is a follower: would create a chain
    with pytest.raises(ValueError):
        b.set_joint_mimic(j2, j0)  # BALL unsupported


def test_mimic_state_without_coordinates():
    model = _model(1, (0.0, 1.0))

    class Empty:
        pass

    with pytest.raises(ValueError):
        armillary.eval_mimic(model, Empty())

"""Mass matrix, Jacobian and inverse dynamics: energy consistency, finite differences, masks, shapes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import warp as wp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import armillary

from ._trees import build_tree, random_coordinates

SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _evaluate(model, q, qd):
    state = model.state()
    state.joint_q.assign(q)
    state.joint_qd.assign(qd)
    armillary.eval_fk(model, state.joint_q, state.joint_qd, state)
    n = model.max_dofs_per_articulation
    H = wp.zeros((model.articulation_count, n, n), dtype=wp.float32)
    g = wp.zeros_like(state.joint_qd)
    c = wp.zeros_like(state.joint_qd)
    armillary.eval_inverse_dynamics_passive(model, state, mass_matrix=H, gravity_force=g, coriolis_force=c)
    return state, H, g, c


@SETTINGS
@given(seed=st.integers(0, 2**31 - 1), root=st.sampled_from([None, "free"]))
def test_mass_matrix_matches_kinetic_energy_and_jacobian(seed, root):
    model = build_tree(seed, 6, root=root)
    q, qd = random_coordinates(model, seed)
    state, H, _, _ = _evaluate(model, q, qd)
    M = H.numpy()[0].astype(np.float64)
    assert np.allclose(M, M.T, atol=1e-5)
    assert np.linalg.eigvalsh(M).min() > 0
    # kinetic energy from body twists (COM, world) equals 1/2 qd^T M qd (no armature here)
    bq, bqd = state.body_q.numpy().astype(np.float64), state.body_qd.numpy().astype(np.float64)
    mass, inertia = model.body_mass.numpy(), model.body_inertia.numpy()
    ke = 0.0
    for b in range(model.body_count):
        R = _rot(bq[b, 3:])
        v, w = bqd[b, :3], bqd[b, 3:]
        ke += 0.5 * mass[b] * v @ v + 0.5 * w @ (R @ inertia[b] @ R.T) @ w
    assert np.isclose(0.5 * qd @ M @ qd, ke, rtol=1e-4)
    # J qd = body_qd, and J^T M J = H
    J = armillary.eval_jacobian(model, state).numpy()[0]
    child = model.joint_child.numpy()
    for l in range(model.joint_count):
        assert np.allclose(J[6 * l : 6 * l + 6] @ qd, bqd[child[l]], atol=1e-4)
    H2 = armillary.eval_mass_matrix(model, state, J=armillary.eval_jacobian(model, state)).numpy()[0]
    assert np.allclose(H2, M, atol=1e-4 * np.abs(M).max())


def _rot(q):
    x, y, z, w = q / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])  # fmt: skip


def _potential(model, q):
    state = model.state()
    state.joint_q.assign(q)
    armillary.eval_fk(model, state.joint_q, state.joint_qd, state)
    bq = state.body_q.numpy().astype(np.float64)
    com = model.body_com.numpy().astype(np.float64)
    g = model.gravity.numpy()[0].astype(np.float64)
    return sum(-model.body_mass.numpy()[b] * g @ (bq[b, :3] + _rot(bq[b, 3:]) @ com[b]) for b in range(len(bq)))


def test_gravity_force_is_potential_gradient():
    model = build_tree(8, 6, types=("revolute", "prismatic", "d6"), root="revolute")
    q, qd = random_coordinates(model, 8)
    _, _, g, _ = _evaluate(model, q, qd)
    h = 1e-2
    fd = np.array([(_potential(model, q + h * e) - _potential(model, q - h * e)) / (2 * h)
                   for e in np.eye(len(q), dtype=np.float32)])  # fmt: skip
    assert np.allclose(g.numpy(), fd, atol=2e-3 * np.abs(fd).max())


def test_coriolis_from_lagrangian_finite_differences():
    """C qd = dM/dt qd - d/dq (1/2 qd^T M qd) for a chain of scalar joints."""
    model = build_tree(9, 5, types=("revolute", "prismatic"), root="revolute")
    q, qd = random_coordinates(model, 9)
    _, _, _, c = _evaluate(model, q, qd)
    h = 1e-2

    def M_at(x):
        return _evaluate(model, x.astype(np.float32), qd)[1].numpy()[0].astype(np.float64)

    dM = [(M_at(q + h * e) - M_at(q - h * e)) / (2 * h) for e in np.eye(len(q))]
    Mdot = sum(dM[i] * qd[i] for i in range(len(q)))
    expected = Mdot @ qd - 0.5 * np.array([qd @ dM[i] @ qd for i in range(len(q))])
    assert np.allclose(c.numpy(), expected, atol=2e-3 * max(1.0, np.abs(expected).max()))


def test_inverse_dynamics_force_and_masks():
    model = build_tree(12, 4, root="free", worlds=3)
    q, qd = random_coordinates(model, 12)
    state, H, g, c = _evaluate(model, q, qd)
    qdd = np.random.default_rng(0).uniform(-1, 1, model.joint_dof_count).astype(np.float32)
    f = wp.zeros_like(state.joint_qd)
    armillary.eval_inverse_dynamics_force(model, state, mass_matrix=H, joint_qdd=wp.array(qdd), coriolis_force=c,
                                          gravity_force=g, joint_f=f)  # fmt: skip
    nd = model.joint_dof_count // 3
    Hn = H.numpy()
    Mqdd = np.concatenate([Hn[a] @ qdd[a * nd : (a + 1) * nd] for a in range(3)])
    expected = _rotate_free_rows(model, state, Mqdd) + c.numpy() + g.numpy()
    assert np.allclose(f.numpy(), expected, atol=1e-4 * np.abs(expected).max())

    mask = wp.array([True, False, True], dtype=wp.bool)
    H2 = wp.full(H.shape, 5.0, dtype=wp.float32)
    g2 = wp.full(model.joint_dof_count, 5.0, dtype=wp.float32)
    c2 = wp.full(model.joint_dof_count, 5.0, dtype=wp.float32)
    armillary.eval_inverse_dynamics_passive(model, state, mass_matrix=H2, gravity_force=g2, coriolis_force=c2,
                                            mask=mask)  # fmt: skip
    assert np.all(H2.numpy()[1] == 0.0) and np.array_equal(H2.numpy()[[0, 2]], Hn[[0, 2]])
    assert np.all(g2.numpy()[nd : 2 * nd] == 0.0) and np.all(c2.numpy()[nd : 2 * nd] == 0.0)
    f2 = wp.full(model.joint_dof_count, 5.0, dtype=wp.float32)
    armillary.eval_inverse_dynamics_force(model, state, mass_matrix=H, joint_qdd=wp.array(qdd), coriolis_force=c,
                                          gravity_force=g, joint_f=f2, mask=mask)  # fmt: skip
    assert np.all(f2.numpy()[nd : 2 * nd] == 0.0)
    assert np.allclose(f2.numpy()[:nd], f.numpy()[:nd])
    Hm = armillary.eval_mass_matrix(model, state, mask=mask).numpy()
    assert np.all(Hm[1] == 0.0) and np.allclose(Hm[0], Hn[0])


def test_non_root_free_joint_force_convention():
    """For a FREE joint below a rotated parent, M qdd is rotated into the world before adding bias forces."""
    model = build_tree(13, 3, types=("free",), root="revolute")
    q, qd = random_coordinates(model, 13)
    state, H, g, c = _evaluate(model, q, qd)
    qdd = np.random.default_rng(1).uniform(-1, 1, model.joint_dof_count).astype(np.float32)
    f = wp.zeros_like(state.joint_qd)
    armillary.eval_inverse_dynamics_force(model, state, mass_matrix=H, joint_qdd=wp.array(qdd), coriolis_force=c,
                                          gravity_force=g, joint_f=f)  # fmt: skip
    expected = _rotate_free_rows(model, state, H.numpy()[0] @ qdd) + c.numpy() + g.numpy()
    assert np.allclose(f.numpy(), expected, atol=1e-4 * np.abs(expected).max())


def _rotate_free_rows(model, state, Mqdd):
    jt, ds = model.joint_type.numpy(), model.joint_qd_start.numpy()
    parent, X_p = model.joint_parent.numpy(), model.joint_X_p.numpy()
    bq = state.body_q.numpy()
    expected = Mqdd.copy()
    for j in range(model.joint_count):
        if jt[j] in (armillary.JointType.FREE, armillary.JointType.DISTANCE):
            R = _rot(X_p[j, 3:])
            if parent[j] >= 0:
                R = _rot(bq[parent[j], 3:]) @ R
            d = ds[j]
            expected[d : d + 3] = R @ Mqdd[d : d + 3]
            expected[d + 3 : d + 6] = R @ Mqdd[d + 3 : d + 6]
    return expected


def test_armature_and_deprecated_flag():
    b = armillary.ModelBuilder()
    link = b.add_link(mass=2.0, inertia=np.eye(3).reshape(-1) * 0.1)
    j = b.add_joint_revolute(-1, link, axis=(0, 0, 1), armature=0.25)
    b.add_articulation([j])
    model = b.finalize(device="cpu")
    state = model.state()
    assert np.isclose(armillary.eval_mass_matrix(model, state).numpy()[0, 0, 0], 0.35)
    with pytest.warns(DeprecationWarning):
        H = armillary.eval_mass_matrix(model, state, include_armature=False)
    assert np.isclose(H.numpy()[0, 0, 0], 0.1)


def test_shape_errors():
    model = build_tree(14, 3, root="free", worlds=2)
    state = model.state()
    n = model.max_dofs_per_articulation
    H = wp.zeros((model.articulation_count, n, n), dtype=wp.float32)
    g = wp.zeros(model.joint_dof_count, dtype=wp.float32)
    c = wp.zeros(model.joint_dof_count, dtype=wp.float32)
    ID = armillary.eval_inverse_dynamics_passive
    with pytest.raises(ValueError):
        ID(model, state)
    with pytest.raises(ValueError):
        ID(model, state, gravity_force=g, coriolis_force=g)
    with pytest.raises(ValueError):
        ID(model, state, mass_matrix=wp.zeros((1, n, n), dtype=wp.float32))
    with pytest.raises(ValueError):
        ID(model, state, gravity_force=wp.zeros(3, dtype=wp.float32))
    with pytest.raises(ValueError):
        ID(model, state, coriolis_force=c, mask=wp.array([True], dtype=wp.bool))
    with pytest.raises(ValueError):
        armillary.eval_mass_matrix(model, state, mask=wp.zeros((2, 1), dtype=wp.bool))
    with pytest.raises(ValueError):
        armillary.eval_inverse_dynamics_force(model, state, mass_matrix=H, joint_qdd=wp.zeros(2, dtype=wp.float32),
                                              coriolis_force=c, gravity_force=g, joint_f=g)  # fmt: skip


def test_rod_joints_rejected():
    b = armillary.ModelBuilder()
    l0 = b.add_link(mass=1.0)
    Cfg = armillary.ModelBuilder.JointDofConfig
    j = b.add_joint(armillary.JointType.ROD, -1, l0, linear_axes=[Cfg(axis=a) for a in "xyz"],
                    angular_axes=[Cfg(axis=a) for a in "xyz"])
    b.add_articulation([j])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = b.finalize(device="cpu")
    state = model.state()
    with pytest.raises(ValueError, match="ROD"):
        armillary.eval_inverse_dynamics_passive(model, state, gravity_force=wp.zeros(6, dtype=wp.float32))

"""Forward / inverse kinematics: round trips on random trees, twist conventions, selectors."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import armillary
from armillary import BodyFlags, JointType

from ._trees import build_tree, compare_coordinates, random_coordinates

ROUND_TRIP_ATOL = 2e-4
"""FK -> IK coordinate error (float32, up to 6 joints deep)."""

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _fk(model, q, qd, state=None):
    state = state or model.state()
    state.joint_q.assign(q)
    state.joint_qd.assign(qd)
    armillary.eval_fk(model, state.joint_q, state.joint_qd, state)
    return state


def _ik(model, state):
    q = wp.zeros(model.joint_coord_count, dtype=wp.float32)
    qd = wp.zeros(model.joint_dof_count, dtype=wp.float32)
    armillary.eval_ik(model, state, q, qd)
    return q.numpy(), qd.numpy()


@SETTINGS
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(1, 7), root=st.sampled_from([None, "free", "revolute"]))
def test_fk_ik_round_trip_random_trees(seed, n, root):
    model = build_tree(seed, n, root=root)
    q, qd = random_coordinates(model, seed)
    state = _fk(model, q, qd)
    q_ik, qd_ik = _ik(model, state)
    assert compare_coordinates(model, q_ik, q) < ROUND_TRIP_ATOL
    assert np.abs(qd_ik - qd).max(initial=0.0) < ROUND_TRIP_ATOL
    # and FK of the recovered coordinates reproduces the bodies
    state2 = _fk(model, q_ik, qd_ik)
    assert np.allclose(state2.body_q.numpy()[:, :3], state.body_q.numpy()[:, :3], atol=ROUND_TRIP_ATOL)
    assert np.allclose(state2.body_qd.numpy(), state.body_qd.numpy(), atol=ROUND_TRIP_ATOL)


@SETTINGS
@given(seed=st.integers(0, 2**31 - 1))
def test_quaternion_sign_and_normalization(seed):
    """q and -q (and a scaled q) give the same body poses; IK returns the sign FK was given."""
    model = build_tree(seed, 5, types=("ball", "free", "revolute"), root="free")
    q, qd = random_coordinates(model, seed, flip_quat_signs=False)
    ref = _fk(model, q, qd)
    jt = model.joint_type.numpy()
    qs = model.joint_q_start.numpy()
    q_neg = q.copy()
    q_scaled = q.copy()
    for j in range(model.joint_count):
        if jt[j] in (JointType.BALL, JointType.FREE):
            e = qs[j + 1]
            q_neg[e - 4 : e] *= -1.0
            q_scaled[e - 4 : e] *= 2.5
    for variant in (q_neg, q_scaled):
        st_v = _fk(model, variant, qd)
        bq, bq_ref = st_v.body_q.numpy(), ref.body_q.numpy()
        assert np.allclose(bq[:, :3], bq_ref[:, :3], atol=1e-5)
        dots = np.abs((bq[:, 3:] * bq_ref[:, 3:]).sum(axis=1))
        assert np.allclose(dots, 1.0, atol=1e-5)
        assert np.allclose(st_v.body_qd.numpy(), ref.body_qd.numpy(), atol=1e-5)
    # sign preserved through the round trip for a single free body and a ball below it
    q_ik, _ = _ik(model, _fk(model, q_neg, qd))
    for j in range(model.joint_count):
        if jt[j] in (JointType.BALL, JointType.FREE):
            e = qs[j + 1]
            assert np.allclose(q_ik[e - 4 : e], q_neg[e - 4 : e], atol=1e-4) or np.allclose(
                q_ik[e - 4 : e], -q_neg[e - 4 : e], atol=1e-4
            )


@pytest.mark.parametrize("seed", [11, 12])
def test_body_qd_is_com_velocity_in_world(seed):
    """body_qd = (v_com, w) in world: central differences of FK poses along joint_qd."""
    model = build_tree(seed, 6, types=("revolute", "prismatic", "ball", "d6", "fixed"), root="d6")
    q, qd = random_coordinates(model, 3, flip_quat_signs=False)
    state = _fk(model, q, qd)
    jt = model.joint_type.numpy()
    qs, ds = model.joint_q_start.numpy(), model.joint_qd_start.numpy()
    dim = model.joint_dof_dim.numpy()
    h = 1e-3

    def integrate(h):
        out = q.astype(np.float64).copy()
        for j in range(model.joint_count):
            a, d = qs[j], ds[j]
            if jt[j] == JointType.BALL:
                # parent-frame angular velocity: q <- exp(w h / 2) q
                out[a : a + 4] = _quat_mul(_quat_exp(qd[d : d + 3] * h), out[a : a + 4])
            elif jt[j] in (JointType.REVOLUTE, JointType.PRISMATIC):
                out[a] += h * qd[d]
            elif jt[j] == JointType.D6:
                n = dim[j].sum()
                out[a : a + n] += h * qd[d : d + n]
        return out.astype(np.float32)

    bp = _fk(model, integrate(h), qd).body_q.numpy().astype(np.float64)
    bm = _fk(model, integrate(-h), qd).body_q.numpy().astype(np.float64)
    com = model.body_com.numpy()
    v_fd = (_com(bp, com) - _com(bm, com)) / (2 * h)
    dq = _quat_mul(bp[:, 3:], _quat_conj(bm[:, 3:]))
    w_fd = 2.0 * dq[:, :3] / (2 * h) * np.sign(dq[:, 3:4])
    bqd = state.body_qd.numpy()
    assert np.allclose(bqd[:, :3], v_fd, atol=5e-3)
    assert np.allclose(bqd[:, 3:], w_fd, atol=5e-3)


def _com(bq, com):
    return bq[:, :3] + np.stack([_quat_rotate(bq[i, 3:], com[i]) for i in range(len(bq))])


def _quat_conj(q):
    q = np.array(q, dtype=np.float64)
    q[..., :3] *= -1.0
    return q


def _quat_mul(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    av, aw, bv, bw = a[..., :3], a[..., 3:], b[..., :3], b[..., 3:]
    v = aw * bv + bw * av + np.cross(av, bv)
    w = aw * bw - (av * bv).sum(-1, keepdims=True)
    return np.concatenate([v, w], axis=-1)


def _quat_exp(r):
    ang = np.linalg.norm(r)
    if ang < 1e-12:
        return np.array([0.0, 0.0, 0.0, 1.0])
    ax = r / ang
    return np.concatenate([ax * np.sin(ang / 2), [np.cos(ang / 2)]])


def _quat_rotate(q, v):
    q = np.asarray(q, dtype=np.float64) / np.linalg.norm(q)
    u, w = q[:3], q[3]
    return v + 2.0 * np.cross(u, np.cross(u, v) + w * v)


def test_free_joint_velocity_is_child_com_twist_in_parent_frame():
    """A FREE joint under a rotated, moving parent: joint_qd = COM twist relative to the parent, parent frame."""
    b = armillary.ModelBuilder()
    p = b.add_link(mass=1.0, inertia=np.eye(3).reshape(-1) * 0.1)
    c = b.add_link(mass=1.0, com=(0.1, -0.2, 0.3), inertia=np.eye(3).reshape(-1) * 0.1)
    jp = b.add_joint_revolute(-1, p, axis=(0.0, 0.0, 1.0))
    rot = wp.quat_from_axis_angle(wp.vec3(1.0, 0.0, 0.0), 0.7)
    jc = b.add_joint_free(c, parent=p, parent_xform=wp.transform(wp.vec3(0.5, 0.0, 0.0), rot))
    b.add_articulation([jp, jc])
    model = b.finalize(device="cpu")
    q = model.joint_q.numpy()
    q[0] = 0.3
    qd = np.array([2.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6], dtype=np.float32)
    state = _fk(model, q, qd)
    bq, bqd = state.body_q.numpy().astype(np.float64), state.body_qd.numpy().astype(np.float64)
    R_wpj = _rot(_quat_mul(bq[0, 3:], [*rot]))
    com_p = _com(bq[:1], model.body_com.numpy()[:1])[0]
    com_c = _com(bq[1:2], model.body_com.numpy()[1:2])[0]
    w_p = bqd[0, 3:]
    assert np.allclose(bqd[1, 3:], w_p + R_wpj @ qd[4:7], atol=1e-5)
    assert np.allclose(bqd[1, :3], bqd[0, :3] + np.cross(w_p, com_c - com_p) + R_wpj @ qd[1:4], atol=1e-5)
    q_ik, qd_ik = _ik(model, state)
    assert np.allclose(qd_ik, qd, atol=1e-5)


def _rot(q):
    return np.stack([_quat_rotate(q, e) for e in np.eye(3)], axis=1)


# ---------------------------------------------------------------------- joint_mask
@SETTINGS
@given(seed=st.integers(0, 2**31 - 1), bits=st.integers(0, 2**7 - 1))
def test_joint_mask_semantics(seed, bits):
    model = build_tree(seed, 7, root="free")
    q0, qd0 = random_coordinates(model, seed)
    state = _fk(model, q0, qd0)
    before_q, before_qd = state.body_q.numpy().copy(), state.body_qd.numpy().copy()
    q1, qd1 = random_coordinates(model, seed + 1)
    sel = np.array([(bits >> j) & 1 == 1 for j in range(model.joint_count)])
    armillary.eval_fk(model, wp.array(q1), wp.array(qd1), state, joint_mask=wp.array(sel, dtype=wp.bool))
    after_q, after_qd = state.body_q.numpy(), state.body_qd.numpy()
    child = model.joint_child.numpy()
    # unselected joints leave their child bodies bit for bit untouched
    for j in np.nonzero(~sel)[0]:
        assert np.array_equal(after_q[child[j]], before_q[child[j]])
        assert np.array_equal(after_qd[child[j]], before_qd[child[j]])
    # selected joints are placed relative to their parent's *current* state: IK gives back q1
    q_ik, qd_ik = _ik(model, state)
    qs, ds = model.joint_q_start.numpy(), model.joint_qd_start.numpy()
    for j in np.nonzero(sel)[0]:
        a, e = qs[j], qs[j + 1]
        sub_ik = np.zeros_like(q1)
        sub_ik[a:e] = q_ik[a:e]
        sub_ref = np.zeros_like(q1)
        sub_ref[a:e] = q1[a:e]
        assert compare_coordinates(model, sub_ik, sub_ref) < ROUND_TRIP_ATOL
        assert np.abs(qd_ik[ds[j] : ds[j + 1]] - qd1[ds[j] : ds[j + 1]]).max(initial=0.0) < ROUND_TRIP_ATOL
    # selecting everything equals plain FK
    if sel.all():
        full = _fk(model, q1, qd1)
        assert np.array_equal(full.body_q.numpy(), after_q)


def test_joint_mask_branch_edit_preserves_rest():
    model = build_tree(5, 6, types=("revolute",), root="revolute")
    q, qd = random_coordinates(model, 5)
    state = _fk(model, q, qd)
    before = state.body_q.numpy().copy()
    anc = model.joint_ancestor.numpy()
    edited = 2
    # the edited joint and all its descendants
    sel = np.zeros(model.joint_count, dtype=bool)
    for j in range(model.joint_count):
        k = j
        while k >= 0 and k != edited:
            k = anc[k]
        sel[j] = k == edited
    q[model.joint_q_start.numpy()[edited]] += 0.4
    armillary.eval_fk(model, wp.array(q), wp.array(qd), state, joint_mask=wp.array(sel))
    child = model.joint_child.numpy()
    full = _fk(model, q, qd)
    for j in range(model.joint_count):
        if sel[j]:
            assert np.allclose(state.body_q.numpy()[child[j]], full.body_q.numpy()[child[j]], atol=1e-6)
        else:
            assert np.array_equal(state.body_q.numpy()[child[j]], before[child[j]])


# ---------------------------------------------------------------------- articulation selectors, flags
def _multi(worlds=4):
    return build_tree(21, 4, root="free", worlds=worlds)


@pytest.mark.parametrize("how", ["mask", "indices"])
def test_articulation_selection_leaves_others_untouched(how):
    model = _multi()
    q, qd = random_coordinates(model, 1)
    state = model.state()
    rng = np.random.default_rng(0)
    bq0 = rng.normal(size=(model.body_count, 7)).astype(np.float32)
    state.body_q.assign(bq0)
    state.body_qd.assign(bq0[:, :6])
    sel = [1, 3]
    kw = {"mask": wp.array([a in sel for a in range(4)], dtype=wp.bool)} if how == "mask" else {
        "indices": wp.array(sel + [7, -1], dtype=wp.int32)}  # out-of-range entries are skipped
    armillary.eval_fk(model, wp.array(q), wp.array(qd), state, **kw)
    full = _fk(model, q, qd)
    nb = model.body_count // 4
    for a in range(4):
        rows = slice(a * nb, (a + 1) * nb)
        if a in sel:
            assert np.array_equal(state.body_q.numpy()[rows], full.body_q.numpy()[rows])
        else:
            assert np.array_equal(state.body_q.numpy()[rows], bq0[rows])
    # IK with the same selection only writes the selected articulations' coordinates
    jq = wp.full(model.joint_coord_count, 7.0, dtype=wp.float32)
    jqd = wp.full(model.joint_dof_count, 7.0, dtype=wp.float32)
    armillary.eval_ik(model, full, jq, jqd, **kw)
    nq, nd = model.joint_coord_count // 4, model.joint_dof_count // 4
    for a in range(4):
        if a in sel:
            assert not np.any(jq.numpy()[a * nq : (a + 1) * nq] == 7.0)
        else:
            assert np.all(jq.numpy()[a * nq : (a + 1) * nq] == 7.0)
            assert np.all(jqd.numpy()[a * nd : (a + 1) * nd] == 7.0)


def test_body_flag_filter():
    model = build_tree(3, 3, types=("revolute",), root="revolute", kinematic_root=True)
    q, qd = random_coordinates(model, 3)
    state = model.state()
    before = state.body_q.numpy().copy()
    armillary.eval_fk(model, wp.array(q), wp.array(qd), state, body_flag_filter=BodyFlags.DYNAMIC)
    flags = model.body_flags.numpy()
    after = state.body_q.numpy()
    assert flags[0] == BodyFlags.KINEMATIC
    assert np.array_equal(after[0], before[0])
    assert not np.array_equal(after[1:], before[1:])
    jq = wp.full(model.joint_coord_count, 9.0, dtype=wp.float32)
    jqd = wp.zeros(model.joint_dof_count, dtype=wp.float32)
    armillary.eval_ik(model, state, jq, jqd, body_flag_filter=BodyFlags.KINEMATIC)
    assert jq.numpy()[0] != 9.0 and np.all(jq.numpy()[1:] == 9.0)


def test_fk_accepts_model_as_target():
    model = build_tree(4, 3, root="revolute")
    q, qd = random_coordinates(model, 4)
    armillary.eval_fk(model, wp.array(q), wp.array(qd), model)
    assert np.allclose(model.body_q.numpy(), _fk(model, q, qd).body_q.numpy())


def test_unsorted_joint_order():
    """Joints added child-first within an articulation are still evaluated parent-first."""
    b = armillary.ModelBuilder()
    l0, l1, l2 = (b.add_link(mass=1.0, inertia=np.eye(3).reshape(-1) * 0.1) for _ in range(3))
    x = wp.transform(wp.vec3(1.0, 0.0, 0.0), wp.quat_identity())
    j2 = b.add_joint_revolute(l1, l2, axis=(0, 0, 1), parent_xform=x)
    j1 = b.add_joint_revolute(l0, l1, axis=(0, 0, 1), parent_xform=x)
    j0 = b.add_joint_revolute(-1, l0, axis=(0, 0, 1))
    b.add_articulation([j2, j1, j0])
    model = b.finalize(device="cpu")
    state = _fk(model, np.array([0.5, 0.5, 0.5], dtype=np.float32), np.zeros(3, dtype=np.float32))
    assert np.allclose(state.body_q.numpy()[2, :2], [np.cos(0.5) + np.cos(1.0), np.sin(0.5) + np.sin(1.0)], atol=1e-6)
    H = armillary.eval_mass_matrix(model, state).numpy()[0]
    assert np.allclose(H, H.T) and np.all(np.linalg.eigvalsh(H) > 0)


# ---------------------------------------------------------------------- selector validation
@pytest.fixture(scope="module")
def small():
    model = _multi(2)
    return model, model.state()


def test_selector_errors(small):
    model, state = small
    q, qd = state.joint_q, state.joint_qd
    good_mask = wp.array([True, False], dtype=wp.bool)
    good_idx = wp.array([0], dtype=wp.int32)
    bad = [
        dict(mask=good_mask, indices=good_idx),
        dict(mask=wp.array([True, False, True], dtype=wp.bool)),
        dict(mask=wp.array([1, 0], dtype=wp.int32)),
        dict(indices=wp.array([0], dtype=wp.int64)),
        dict(indices=wp.array([0.0], dtype=wp.float32)),
        dict(indices=wp.array([[0]], dtype=wp.int32)),
        dict(mask=np.array([1, 0])),
        dict(indices="0"),
    ]
    for kw in bad:
        with pytest.raises(ValueError):
            armillary.eval_fk(model, q, qd, state, **kw)
        with pytest.raises(ValueError):
            armillary.eval_ik(model, state, q, qd, **kw)
        with pytest.raises(ValueError):
            armillary.eval_mimic(model, state, **kw)
    for jm in (wp.array([True], dtype=wp.bool), wp.ones(model.joint_count, dtype=wp.int32), np.ones(3)):
        with pytest.raises(ValueError, match="joint_mask"):
            armillary.eval_fk(model, q, qd, state, joint_mask=jm)
    with pytest.raises(ValueError):
        armillary.eval_fk(model, wp.zeros(3, dtype=wp.float32), qd, state)
    # well-formed host-side selectors are accepted
    armillary.eval_fk(model, q, qd, state, mask=np.array([True, False]))
    armillary.eval_fk(model, q, qd, state, indices=[1])
    armillary.eval_fk(model, q, qd, state, joint_mask=np.ones(model.joint_count, dtype=bool))
    armillary.eval_fk(model, q, qd, state, indices=wp.zeros(0, dtype=wp.int32))

"""The forward-only eval_fk kernel (``kinematics_fast``) against the kernel with an adjoint.

Outside a tape ``armillary.eval_fk`` launches ``eval_fk_fast_kernel`` (and replays the launch of a
repeated call); these tests launch the general ``eval_fk_kernel`` directly as the reference and
require agreement to float32 round-off: ``TOL`` times the largest magnitude of the compared
quantity in the model (positions; quaternion components: 1; velocities: the largest of the speeds
and of angular speed times the position scale). The fast kernel composes
the same transforms in another order and skips products with identity joint frames, so the
results are not bit-identical; bodies that are not written must stay bit for bit.
"""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import armillary
from armillary import BodyFlags
from armillary.sim import kinematics_fast as kf
from armillary.sim import kinematics_kernels as kk
from armillary.sim.kinematics import topology

from ._trees import TYPES, build_tree, random_coordinates

TOL = 2e-6
"""Agreement of the two kernels relative to the scale of each quantity (measured worst over 300 random
trees of up to 8 joints, 2 worlds: 6.9e-7 positions, 3.6e-7 quaternions, 7.3e-7 velocities)."""

_LAUNCH = wp.launch  # the reference launches are not counted by the spy below
SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _reference(model, q, qd, body_q0, body_qd0, mask=None, indices=None, joint_mask=None, flags=BodyFlags.ALL):
    """body_q / body_qd from the general kernel (the one with an adjoint), launched directly."""
    body_q = wp.array(body_q0, dtype=wp.transform)
    body_qd = wp.array(body_qd0, dtype=wp.spatial_vector)
    mode, dim = kk.SEL_ALL, model.articulation_count
    if mask is not None:
        mode = kk.SEL_MASK
    elif indices is not None:
        mode, dim = kk.SEL_INDICES, indices.shape[0]
    _LAUNCH(
        kk.eval_fk_kernel, dim=dim,
        inputs=[
            model.articulation_start, model.articulation_end, model.articulation_count, topology(model).joint_order,
            model.joint_type, model.joint_parent, model.joint_child, model.joint_X_p, model.joint_X_c,
            model.joint_q_start, model.joint_qd_start, model.joint_dof_dim, model.joint_axis, model.body_com,
            model.body_flags, wp.array(q, dtype=float), wp.array(qd, dtype=float), mode, mask, indices,
            int(joint_mask is not None), joint_mask, int(flags),
        ],
        outputs=[body_q, body_qd],
    )  # fmt: skip
    return body_q.numpy(), body_qd.numpy()


def _fast(model, q, qd, body_q0, body_qd0, **kw):
    state = model.state()
    state.body_q.assign(body_q0)
    state.body_qd.assign(body_qd0)
    armillary.eval_fk(model, wp.array(q, dtype=float), wp.array(qd, dtype=float), state, **kw)
    return state.body_q.numpy(), state.body_qd.numpy()


def _assert_close(model, got, ref, what):
    (gq, gqd), (rq, rqd) = got, ref
    length = max(1.0, float(np.abs(rq[:, :3]).max(initial=0.0)))
    # a velocity inherits the round-off of the positions it is computed from, times an angular velocity
    speed = max(1.0, float(np.abs(rqd).max(initial=0.0)), float(np.abs(rqd[:, 3:]).max(initial=0.0)) * length)
    for name, g, r, scale in (("positions", gq[:, :3], rq[:, :3], length), ("quaternions", gq[:, 3:], rq[:, 3:], 1.0),
                              ("velocities", gqd, rqd, speed)):  # fmt: skip
        err = float(np.abs(g - r).max(initial=0.0))
        assert err <= TOL * scale, f"{what}: {name} differ by {err:.3g} (scale {scale:.3g})"


def _start(model, seed):
    """Random joint coordinates and a random prior body state (so untouched bodies are visible)."""
    q, qd = random_coordinates(model, seed)
    rng = np.random.default_rng(seed)
    bq0 = rng.normal(size=(model.body_count, 7))
    bq0[:, 3:] /= np.linalg.norm(bq0[:, 3:], axis=1, keepdims=True)  # parents' poses are read back: unit quaternions
    bq0 = bq0.astype(np.float32)
    bqd0 = rng.normal(size=(model.body_count, 6)).astype(np.float32)
    return q, qd, bq0, bqd0


def _identity_frames(model, seed, fraction=0.5):
    """Set a random share of joint frames to identity rotations / zero offsets (the fast kernel's
    shortcuts), keeping the rest random."""
    rng = np.random.default_rng(seed)
    for name in ("joint_X_p", "joint_X_c"):
        x = getattr(model, name).numpy()
        rot = rng.random(model.joint_count) < fraction
        x[rot, 3:] = (0.0, 0.0, 0.0, 1.0)
        if name == "joint_X_c":
            x[rng.random(model.joint_count) < fraction, :3] = 0.0
        getattr(model, name).assign(x)


# ---------------------------------------------------------------------- agreement
@pytest.mark.parametrize("jtype", TYPES)
@pytest.mark.parametrize("frames", ["random", "identity"])
def test_every_joint_type_agrees_with_the_general_kernel(jtype, frames):
    """A tree of one joint type only (root of the same type), 3 worlds."""
    for seed in range(4):
        model = build_tree(seed, 6, types=(jtype,), root=jtype, worlds=3)
        if frames == "identity":
            _identity_frames(model, seed, fraction=1.0)
        q, qd, bq0, bqd0 = _start(model, seed)
        _assert_close(model, _fast(model, q, qd, bq0, bqd0), _reference(model, q, qd, bq0, bqd0),
                      f"{jtype} tree, {frames} frames, seed {seed}")  # fmt: skip


@SETTINGS
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(1, 8), worlds=st.integers(1, 5),
       root=st.sampled_from([None, "free", "revolute", "d6"]), identity=st.floats(0.0, 1.0))  # fmt: skip
def test_random_trees_agree(seed, n, worlds, root, identity):
    model = build_tree(seed, n, root=root, worlds=worlds)
    _identity_frames(model, seed, identity)
    q, qd, bq0, bqd0 = _start(model, seed)
    _assert_close(model, _fast(model, q, qd, bq0, bqd0), _reference(model, q, qd, bq0, bqd0), f"seed {seed}")


@SETTINGS
@given(seed=st.integers(0, 2**31 - 1), bits=st.integers(0, 2**6 - 1), arts=st.integers(0, 2**4 - 1),
       how=st.sampled_from(["mask", "indices", "none"]), flags=st.sampled_from(list(BodyFlags)))  # fmt: skip
def test_selectors_agree_and_leave_the_rest_untouched(seed, bits, arts, how, flags):
    """mask / indices / joint_mask / body flag filter: the same bodies written, the others bit for bit."""
    model = build_tree(seed, 6, root="free", worlds=4, kinematic_root=bool(seed % 2))
    q, qd, bq0, bqd0 = _start(model, seed)
    jm = wp.array([(bits >> (j % 6)) & 1 == 1 for j in range(model.joint_count)], dtype=wp.bool)
    kw = {"joint_mask": jm, "body_flag_filter": flags}
    ref_kw = {"joint_mask": jm, "flags": flags}
    chosen = [a for a in range(4) if (arts >> a) & 1]
    if how == "mask":
        kw["mask"] = ref_kw["mask"] = wp.array([a in chosen for a in range(4)], dtype=wp.bool)
    elif how == "indices":
        kw["indices"] = ref_kw["indices"] = wp.array(chosen + [9, -2], dtype=wp.int32)
    got = _fast(model, q, qd, bq0, bqd0, **kw)
    ref = _reference(model, q, qd, bq0, bqd0, **ref_kw)
    _assert_close(model, got, ref, f"seed {seed}, {how}")
    untouched = np.all(ref[0] == bq0, axis=1) & np.all(ref[1] == bqd0, axis=1)
    assert np.array_equal(got[0][untouched], bq0[untouched])
    assert np.array_equal(got[1][untouched], bqd0[untouched])
    assert np.array_equal(np.all(got[0] == bq0, axis=1) & np.all(got[1] == bqd0, axis=1), untouched)


def test_parent_outside_the_thread_and_unsorted_joints():
    """Joints listed child-first inside an articulation (sorted by the topology cache) and a tree
    whose parents are not the previously written body: the kernel reads those parents back."""
    b = armillary.ModelBuilder()
    links = [b.add_link(mass=1.0, com=(0.1 * i, 0.0, 0.05)) for i in range(5)]
    tf = lambda p: wp.transform(wp.vec3(*p), wp.quat_identity())  # noqa: E731
    j3 = b.add_joint_revolute(links[1], links[3], axis=(0.0, 1.0, 0.0), parent_xform=tf((0.0, 0.3, 0.0)))
    j1 = b.add_joint_revolute(links[0], links[1], axis=(1.0, 0.0, 0.0), parent_xform=tf((0.2, 0.0, 0.0)))
    j0 = b.add_joint_free(links[0])
    j2 = b.add_joint_prismatic(links[0], links[2], axis=(0.0, 0.0, 1.0), parent_xform=tf((0.0, 0.0, 0.4)))
    j4 = b.add_joint_ball(links[1], links[4], parent_xform=tf((0.1, 0.1, 0.0)))
    b.add_articulation([j3, j1, j0, j2, j4])
    model = b.finalize()
    assert not topology(model).sorted
    for seed in range(5):
        q, qd, bq0, bqd0 = _start(model, seed)
        _assert_close(model, _fast(model, q, qd, bq0, bqd0), _reference(model, q, qd, bq0, bqd0), f"seed {seed}")


# ---------------------------------------------------------------------- which kernel runs
def _kernels_launched(monkeypatch):
    """Record the kernels eval_fk launches through wp.launch (first calls and tape launches)."""
    seen = []
    real = wp.launch

    def spy(kernel, *args, **kwargs):
        seen.append(kernel)
        return real(kernel, *args, **kwargs)

    monkeypatch.setattr(wp, "launch", spy)
    return seen


def test_untaped_calls_use_the_fast_kernel_and_replay(monkeypatch):
    model = build_tree(2, 5, root="free", worlds=2)
    q, qd, _, _ = _start(model, 2)
    state = model.state()
    jq, jqd = wp.array(q), wp.array(qd)
    seen = _kernels_launched(monkeypatch)
    for _ in range(3):
        armillary.eval_fk(model, jq, jqd, state)
    assert seen == [kf.eval_fk_fast_kernel]  # recorded once, then replayed
    first = state.body_q.numpy().copy()
    # a replay still reads the current coordinates and model arrays
    jq.assign(q + 0.1)
    armillary.eval_fk(model, jq, jqd, state)
    assert not np.array_equal(state.body_q.numpy(), first)
    ref = _reference(model, q + 0.1, qd, first, state.body_qd.numpy())
    _assert_close(model, (state.body_q.numpy(), state.body_qd.numpy()), ref, "replay after assign")
    # another target array, or a reassigned model array, is validated and recorded anew
    other = model.state()
    armillary.eval_fk(model, jq, jqd, other)
    model.body_com = wp.array(model.body_com.numpy() * 2.0, dtype=wp.vec3)
    armillary.eval_fk(model, jq, jqd, state)
    assert seen == [kf.eval_fk_fast_kernel] * 3
    ref = _reference(model, q + 0.1, qd, first, state.body_qd.numpy())
    _assert_close(model, (state.body_q.numpy(), state.body_qd.numpy()), ref, "reassigned body_com")


def test_replayed_call_still_validates_changed_arguments():
    model = build_tree(3, 4, root="revolute", worlds=2)
    q, qd, _, _ = _start(model, 3)
    state = model.state()
    jq, jqd = wp.array(q), wp.array(qd)
    armillary.eval_fk(model, jq, jqd, state)
    armillary.eval_fk(model, jq, jqd, state)
    with pytest.raises(ValueError, match="mask"):
        armillary.eval_fk(model, jq, jqd, state, mask=wp.array([True], dtype=wp.bool))
    with pytest.raises(ValueError, match="joint_q"):
        armillary.eval_fk(model, wp.zeros(3, dtype=float), jqd, state)
    state.body_q = wp.zeros(model.body_count + 1, dtype=wp.transform)
    with pytest.raises(ValueError, match="body_q"):
        armillary.eval_fk(model, jq, jqd, state)


def test_mask_contents_are_read_at_every_call():
    model = build_tree(4, 4, root="free", worlds=3)
    q, qd, bq0, bqd0 = _start(model, 4)
    state = model.state()
    state.body_q.assign(bq0)
    state.body_qd.assign(bqd0)
    mask = wp.array([True, False, False], dtype=wp.bool)
    jq, jqd = wp.array(q), wp.array(qd)
    armillary.eval_fk(model, jq, jqd, state, mask=mask)
    mask.assign(np.array([False, False, True]))
    armillary.eval_fk(model, jq, jqd, state, mask=mask)  # replayed launch, new mask contents
    ref = _reference(model, q, qd, bq0, bqd0, mask=wp.array([True, False, True], dtype=wp.bool))
    _assert_close(model, (state.body_q.numpy(), state.body_qd.numpy()), ref, "mask changed between calls")
    nb = model.body_count // 3
    assert np.array_equal(state.body_q.numpy()[nb : 2 * nb], bq0[nb : 2 * nb])


def _tape_gradient(model, q, qd, warm_untaped: bool):
    jq = wp.array(q, dtype=float)
    jqd = wp.array(qd, dtype=float)
    state = model.state()
    if warm_untaped:  # memoize the fast launch for exactly these arrays
        armillary.eval_fk(model, jq, jqd, state)
        armillary.eval_fk(model, jq, jqd, state)
    for arr in (jq, jqd, state.body_q, state.body_qd):
        arr.requires_grad = True
    tape = wp.Tape()
    with tape:
        armillary.eval_fk(model, jq, jqd, state)
    w = np.random.default_rng(0).normal(size=(model.body_count, 7)).astype(np.float32)
    wd = np.random.default_rng(1).normal(size=(model.body_count, 6)).astype(np.float32)
    tape.backward(grads={state.body_q: wp.array(w, dtype=wp.transform),
                         state.body_qd: wp.array(wd, dtype=wp.spatial_vector)})  # fmt: skip
    return tape, jq.grad.numpy().copy(), jqd.grad.numpy().copy()


def test_tape_records_the_kernel_with_an_adjoint_even_without_requires_grad():
    model = build_tree(5, 4, root="revolute")
    q, qd, _, _ = _start(model, 5)
    jq, jqd, state = wp.array(q), wp.array(qd), model.state()
    armillary.eval_fk(model, jq, jqd, state)
    armillary.eval_fk(model, jq, jqd, state)
    tape = wp.Tape()
    with tape:
        armillary.eval_fk(model, jq, jqd, state)
    assert [launch[0] for launch in tape.launches] == [kk.eval_fk_kernel]


def test_tape_records_the_kernel_with_an_adjoint():
    """Under a tape the general kernel runs (also after untaped calls were memoized) and the
    gradients are those of the general kernel on a model that never saw the fast path."""
    q, qd = random_coordinates(build_tree(6, 6, root="free"), 6)
    tape, gq, gqd = _tape_gradient(build_tree(6, 6, root="free"), q, qd, warm_untaped=True)
    assert [launch[0] for launch in tape.launches] == [kk.eval_fk_kernel]
    _, gq_ref, gqd_ref = _tape_gradient(build_tree(6, 6, root="free"), q, qd, warm_untaped=False)
    assert np.abs(gq).max() > 0.0 and np.abs(gqd).max() > 0.0
    assert np.array_equal(gq, gq_ref) and np.array_equal(gqd, gqd_ref)


def test_arrays_requiring_grad_get_the_general_kernel_without_a_tape(monkeypatch):
    model = build_tree(7, 4, root="revolute")
    q, qd, _, _ = _start(model, 7)
    jq, jqd = wp.array(q), wp.array(qd)
    state = model.state()
    seen = _kernels_launched(monkeypatch)
    armillary.eval_fk(model, jq, jqd, state)
    armillary.eval_fk(model, jq, jqd, state)  # replayed
    jq.requires_grad = True  # the memoized fast launch no longer applies
    armillary.eval_fk(model, jq, jqd, state)
    assert seen == [kf.eval_fk_fast_kernel, kk.eval_fk_kernel]
    grad_model = build_tree(7, 4, root="revolute", device="cpu")
    grad_model.joint_X_p.requires_grad = True
    armillary.eval_fk(grad_model, wp.array(q), wp.array(qd), grad_model.state())
    assert seen[-1] is kk.eval_fk_kernel

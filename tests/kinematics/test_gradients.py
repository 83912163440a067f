"""Gradients of eval_fk, eval_ik, eval_mimic, eval_jacobian, eval_mass_matrix and inverse dynamics
through ``wp.Tape``, against central finite differences.

Each comparison (:func:`armillary.testing.gradient_checks.compare_gradients`) differentiates a random
weighting of the outputs, with a float32 central difference of step 1e-3 per input component, and
requires a relative error ``|g_ad - g_fd| / |g_fd|`` below ``REL`` = 1 % (the measured errors are
1e-4 .. 1e-3: float32 round-off of the differences). Quaternion coordinates are perturbed
component-wise as stored (the functions normalize them, the differences see the same map).
"""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import armillary
from armillary.sim import dynamics
from armillary.sim.kinematics import topology
from armillary.testing.gradient_checks import compare_gradients

from ._trees import build_tree, random_coordinates

REL = 0.01
EPS = 1e-3
ALL_TYPES = ("revolute", "prismatic", "ball", "fixed", "free", "distance", "d6")


def _chain():
    """Free root, then revolute, prismatic and ball links, with offset frames, COMs and inertias."""
    b = armillary.ModelBuilder(gravity=(0.3, -0.5, -9.81))
    tf = lambda p, q=(0.0, 0.0, 0.0, 1.0): wp.transform(wp.vec3(*p), wp.quat(*q))  # noqa: E731
    inertia = lambda a, b_, c: wp.mat33(a, 0.01, 0.0, 0.01, b_, 0.02, 0.0, 0.02, c)  # noqa: E731
    l0 = b.add_link(mass=2.0, com=(0.05, 0.0, -0.02), inertia=inertia(0.2, 0.3, 0.25))
    l1 = b.add_link(mass=1.0, com=(0.0, 0.1, 0.0), inertia=inertia(0.05, 0.04, 0.06))
    l2 = b.add_link(mass=0.7, com=(0.02, 0.0, 0.1), inertia=inertia(0.06, 0.07, 0.065))
    l3 = b.add_link(mass=0.5, com=(0.0, -0.05, 0.05), inertia=inertia(0.05, 0.055, 0.05))
    s = np.sqrt(0.5)
    joints = [
        b.add_joint_free(l0, parent_xform=tf((0.0, 0.0, 1.0))),
        b.add_joint_revolute(l0, l1, axis=(0.0, 0.6, 0.8), parent_xform=tf((0.2, 0.0, 0.1), (0.0, 0.0, s, s)),
                             child_xform=tf((0.0, -0.1, 0.0))),
        b.add_joint_prismatic(l1, l2, axis=(1.0, 0.0, 0.0), parent_xform=tf((0.0, 0.3, 0.0)),
                              child_xform=tf((0.0, 0.0, -0.05), (s, 0.0, 0.0, s))),
        b.add_joint_ball(l2, l3, parent_xform=tf((0.1, 0.0, 0.2)), child_xform=tf((0.0, 0.0, -0.1))),
    ]  # fmt: skip
    b.add_articulation(joints)
    b.joint_q[:7] = [0.1, -0.2, 1.1, 0.1, 0.2, -0.1, 0.97]  # not at the identity: every term shows
    b.joint_q[7] = 0.4
    b.joint_q[8] = 0.15
    b.joint_q[9:13] = [0.2, -0.1, 0.3, 0.93]
    return b.finalize(device="cpu")


def _point(model, seed=0):
    rng = np.random.default_rng(seed)
    q = model.joint_q.numpy()
    qd = rng.uniform(-1.0, 1.0, model.joint_dof_count).astype(np.float32)
    return q, qd


def _arrays(**values) -> dict:
    out = {}
    for name, (v, dtype) in values.items():
        out[name] = wp.array(np.asarray(v), dtype=dtype, device="cpu")
    return out


def _fk_state(model, q, qd):
    """A state with ``body_q`` / ``body_qd`` from FK and ``joint_q`` / ``joint_qd`` copied, all on the tape."""
    state = model.state(requires_grad=True)
    wp.copy(state.joint_q, q)
    wp.copy(state.joint_qd, qd)
    armillary.eval_fk(model, q, qd, state)
    return state


def _check(results: dict, what: str):
    for comparison in results.values():
        comparison.check(REL, what)


def _trees():
    return [pytest.param(seed, types, id=f"{'+'.join(types) if len(types) <= 3 else 'all'}-{seed}")
            for types in (("d6",), ("ball", "free", "distance"), ALL_TYPES) for seed in (1, 2)]  # fmt: skip


def _tree_point(seed, types):
    model = build_tree(seed, 5, types=types)
    q, qd = random_coordinates(model, seed)
    return model, q, qd


# ---------------------------------------------------------------------------------- eval_fk
def _fk_forward(model):
    def forward(a):
        state = model.state(requires_grad=True)
        armillary.eval_fk(model, a["joint_q"], a["joint_qd"], state)
        return [state.body_q, state.body_qd]

    return forward


def test_fk_chain_body_poses_and_twists_wrt_joint_coordinates():
    model = _chain()
    q, qd = _point(model)
    results = compare_gradients(_fk_forward(model), _arrays(joint_q=(q, float), joint_qd=(qd, float)), eps=EPS)
    _check(results, "eval_fk, free + revolute + prismatic + ball chain")


def test_fk_wrt_joint_frames_axes_and_com():
    model = _chain()
    q, qd = _point(model)
    inputs = {**_arrays(joint_q=(q, float), joint_qd=(qd, float)),
              **_model_inputs(model, "joint_X_p", "joint_X_c", "joint_axis", "body_com")}  # fmt: skip
    fk = _fk_forward(model)
    results = compare_gradients(lambda a: _with_model_inputs(model, a, lambda: fk(a)), inputs, eps=EPS)
    _check(results, "eval_fk w.r.t. model arrays")


def test_ancestor_lists_stay_within_their_articulation():
    model = build_tree(3, 6, worlds=3)
    start, joints = (a.numpy() for a in topology(model).ancestors())
    ancestor, art = model.joint_ancestor.numpy(), model.joint_articulation.numpy()
    for j in range(model.joint_count):
        chain, k = [], j
        while k >= 0 and art[k] == art[j]:
            chain.append(k)
            k = ancestor[k]
        assert list(joints[start[j] : start[j + 1]]) == chain


@pytest.mark.parametrize("seed, types", _trees())
def test_fk_random_trees(seed, types):
    """D6 joints included (their axes used to be summed in a dynamic loop: wrong adjoints)."""
    model, q, qd = _tree_point(seed, types)
    results = compare_gradients(_fk_forward(model), _arrays(joint_q=(q, float), joint_qd=(qd, float)), eps=EPS)
    _check(results, f"eval_fk, tree {types} seed {seed}")


def test_fk_under_a_tape_launches_through_the_tape():
    """eval_fk replays recorded launches outside a tape (LaunchCache); under one the tape sees them."""
    model = _chain()
    q, qd = _point(model)
    jq = wp.array(q, dtype=float, requires_grad=True)
    jqd = wp.array(qd, dtype=float, requires_grad=True)
    state = model.state(requires_grad=True)
    for _ in range(2):  # the second call replays the cached launch when untaped
        armillary.eval_fk(model, jq, jqd, state)
    tape = wp.Tape()
    with tape:
        armillary.eval_fk(model, jq, jqd, state)
    assert len(tape.launches) == 1
    tape.backward(grads={state.body_q: wp.array(np.ones((model.body_count, 7), np.float32), dtype=wp.transform)})
    assert np.abs(jq.grad.numpy()).max() > 0.0


# ---------------------------------------------------------------------------------- eval_ik
@pytest.mark.parametrize("seed, types", [pytest.param(0, None, id="chain"), *_trees()])
def test_ik_joint_coordinates_wrt_body_state(seed, types):
    if types is None:
        model = _chain()
        q, qd = _point(model)
    else:
        model, q, qd = _tree_point(seed, types)
    state = model.state()
    armillary.eval_fk(model, wp.array(q, dtype=float), wp.array(qd, dtype=float), state)

    def forward(a):
        s = model.state(requires_grad=True)
        wp.copy(s.body_q, a["body_q"])
        wp.copy(s.body_qd, a["body_qd"])
        jq = wp.zeros(model.joint_coord_count, dtype=float, requires_grad=True)
        jqd = wp.zeros(model.joint_dof_count, dtype=float, requires_grad=True)
        armillary.eval_ik(model, s, jq, jqd)
        return [jq, jqd]

    inputs = {"body_q": wp.array(state.body_q.numpy(), dtype=wp.transform),
              "body_qd": wp.array(state.body_qd.numpy(), dtype=wp.spatial_vector)}  # fmt: skip
    results = compare_gradients(forward, inputs, eps=EPS)
    _check(results, "eval_ik")


# ---------------------------------------------------------------------------------- eval_mimic
def test_mimic_follower_wrt_leader():
    b = armillary.ModelBuilder()
    l0, l1 = b.add_link(mass=1.0), b.add_link(mass=1.0)
    j0 = b.add_joint_revolute(-1, l0, axis=(0, 0, 1))
    j1 = b.add_joint_revolute(l0, l1, axis=(0, 1, 0))
    b.add_articulation([j0, j1])
    b.set_joint_mimic(j1, j0, coeffs=(0.2, -1.5))
    model = b.finalize(device="cpu")

    def forward(a):
        s_in, s_out = model.state(requires_grad=True), model.state(requires_grad=True)
        wp.copy(s_in.joint_q, a["joint_q"])
        wp.copy(s_in.joint_qd, a["joint_qd"])
        armillary.eval_mimic(model, s_in, s_out)
        return [s_out.joint_q, s_out.joint_qd]

    results = compare_gradients(forward, _arrays(joint_q=([0.3, 0.0], float), joint_qd=([0.7, 0.0], float)), eps=EPS)
    _check(results, "eval_mimic")
    np.testing.assert_allclose(results["joint_q"].autodiff, results["joint_q"].finite_difference, rtol=1e-3, atol=1e-3)


# ------------------------------------------------------------------------- Jacobian and mass matrix
MODEL_INPUTS = ("body_mass", "body_inertia", "body_com", "joint_X_p", "joint_X_c", "joint_axis")


def _with_model_inputs(model, a, fn):
    """Run ``fn()`` with the model arrays named in ``a`` replaced by the inputs (restored after)."""
    saved = {k: getattr(model, k) for k in MODEL_INPUTS if k in a}
    for k in saved:
        setattr(model, k, a[k])
    try:
        return fn()
    finally:
        for k, v in saved.items():
            setattr(model, k, v)


def _model_inputs(model, *names) -> dict:
    return {k: wp.array(getattr(model, k).numpy(), dtype=getattr(model, k).dtype) for k in names}


def _mass_matrix_forward(model, how: str):
    def forward(a):
        def run():
            state = _fk_state(model, a["joint_q"], a["joint_qd"])
            if how == "jacobian":
                return [armillary.eval_jacobian(model, state)]
            if how == "crba":
                return [armillary.eval_mass_matrix(model, state)]
            return [armillary.eval_mass_matrix(model, state, J=armillary.eval_jacobian(model, state))]

        return _with_model_inputs(model, a, run)

    return forward


@pytest.mark.parametrize("how", ["crba", "from_jacobian"])
def test_mass_matrix_wrt_joint_q_and_body_mass(how):
    model = _chain()
    q, qd = _point(model)
    inputs = _arrays(joint_q=(q, float), joint_qd=(qd, float), body_mass=(model.body_mass.numpy(), float))
    results = compare_gradients(_mass_matrix_forward(model, how), inputs, eps=EPS)
    assert float(np.linalg.norm(results["joint_qd"].finite_difference)) == 0.0  # M does not depend on qd
    np.testing.assert_array_equal(results["joint_qd"].autodiff, 0.0)
    del results["joint_qd"]
    _check(results, f"eval_mass_matrix ({how})")


@pytest.mark.parametrize("how", ["crba", "from_jacobian"])
def test_mass_matrix_wrt_inertias_and_joint_frames(how):
    model = _chain()
    q, qd = _point(model)
    inputs = {**_arrays(joint_q=(q, float), joint_qd=(qd, float)),
              **_model_inputs(model, "body_inertia", "body_com", "joint_X_p", "joint_axis")}  # fmt: skip
    results = compare_gradients(_mass_matrix_forward(model, how), inputs, eps=EPS)
    del results["joint_qd"]
    _check(results, f"eval_mass_matrix ({how}) w.r.t. model arrays")


@pytest.mark.parametrize("seed, types", _trees())
def test_mass_matrix_random_trees(seed, types):
    """Branches: entries are written through the ancestor test (a while walk gave them no gradient)."""
    model, q, qd = _tree_point(seed, types)
    results = compare_gradients(_mass_matrix_forward(model, "crba"), _arrays(joint_q=(q, float), joint_qd=(qd, float)),
                                eps=EPS, components=None)  # fmt: skip
    _check({"joint_q": results["joint_q"]}, f"eval_mass_matrix, tree {types} seed {seed}")


@pytest.mark.parametrize("seed, types", [pytest.param(0, None, id="chain"), *_trees()])
def test_jacobian_wrt_joint_q(seed, types):
    if types is None:
        model = _chain()
        q, qd = _point(model)
    else:
        model, q, qd = _tree_point(seed, types)
    results = compare_gradients(_mass_matrix_forward(model, "jacobian"),
                                _arrays(joint_q=(q, float), joint_qd=(qd, float)), eps=EPS)  # fmt: skip
    _check({"joint_q": results["joint_q"]}, "eval_jacobian")


def test_two_calls_on_one_tape_keep_their_own_intermediates():
    """Per-call storage: H at two configurations on one tape (a shared scratch would hand the first
    call's adjoint the second call's composite inertias)."""
    model = _chain()
    q, qd = _point(model)
    q2 = q.copy()
    q2[7] += 0.8

    def forward(a):
        s1 = _fk_state(model, a["q1"], a["qd"])
        s2 = _fk_state(model, a["q2"], a["qd"])
        return [armillary.eval_mass_matrix(model, s1), armillary.eval_mass_matrix(model, s2)]

    results = compare_gradients(forward, _arrays(q1=(q, float), q2=(q2, float), qd=(qd, float)), eps=EPS)
    del results["qd"]
    _check(results, "two eval_mass_matrix calls on one tape")


def test_scratch_arrays_without_gradients_do_not_cut_the_tape():
    model = _chain()
    q, qd = _point(model)
    S = wp.zeros(model.joint_dof_count, dtype=wp.spatial_vector)
    Ic = wp.zeros(model.body_count, dtype=wp.spatial_matrix)

    def forward(a):
        state = _fk_state(model, a["joint_q"], a["joint_qd"])
        return [armillary.eval_mass_matrix(model, state, body_I_s=Ic, joint_S_s=S)]

    results = compare_gradients(forward, _arrays(joint_q=(q, float), joint_qd=(qd, float)), eps=EPS)
    _check({"joint_q": results["joint_q"]}, "eval_mass_matrix with untracked scratch")


def test_untaped_calls_reuse_the_cached_scratch():
    model = _chain()
    cached = dynamics._scratch(model)
    work = dynamics._work(model)
    assert all(work[k] is cached[k] for k in ("S", "Ic", "V", "A", "F", "Fg"))
    with wp.Tape():
        taped = dynamics._work(model)
    assert all(taped[k] is not cached[k] and taped[k].requires_grad for k in ("S", "Ic", "V", "A", "F", "Fg"))


def test_outputs_allocated_here_carry_gradients_when_asked():
    model = _chain()
    state = model.state()
    armillary.eval_fk(model, model.joint_q, model.joint_qd, state)
    assert not armillary.eval_mass_matrix(model, state).requires_grad
    assert armillary.eval_jacobian(model, model.state(requires_grad=True)).requires_grad
    with wp.Tape():
        assert armillary.eval_mass_matrix(model, state).requires_grad


# ---------------------------------------------------------------------------------- inverse dynamics
def _inverse_dynamics_forward(model, outputs: str):
    n, na, m = model.joint_dof_count, model.articulation_count, model.max_dofs_per_articulation

    def forward(a):
        state = _fk_state(model, a["joint_q"], a["joint_qd"])
        H = wp.zeros((na, m, m), dtype=float, requires_grad=True)
        g = wp.zeros(n, dtype=float, requires_grad=True)
        c = wp.zeros(n, dtype=float, requires_grad=True)
        armillary.eval_inverse_dynamics_passive(model, state, mass_matrix=H, gravity_force=g, coriolis_force=c)
        if outputs == "passive":
            return [H, g, c]
        f = wp.zeros(n, dtype=float, requires_grad=True)
        armillary.eval_inverse_dynamics_force(model, state, mass_matrix=H, joint_qdd=a["joint_qdd"],
                                              coriolis_force=c, gravity_force=g, joint_f=f)  # fmt: skip
        return [f]

    return forward


@pytest.mark.parametrize("outputs", ["passive", "force"])
def test_inverse_dynamics_wrt_joint_q_qd_qdd(outputs):
    model = _chain()
    q, qd = _point(model)
    qdd = np.random.default_rng(3).uniform(-1.0, 1.0, model.joint_dof_count).astype(np.float32)
    inputs = _arrays(joint_q=(q, float), joint_qd=(qd, float), joint_qdd=(qdd, float))
    results = compare_gradients(_inverse_dynamics_forward(model, outputs), inputs, eps=EPS)
    if outputs == "passive":  # nothing of M, g, C qd depends on qdd
        np.testing.assert_array_equal(results.pop("joint_qdd").autodiff, 0.0)
    _check(results, f"inverse dynamics ({outputs})")


@pytest.mark.parametrize("seed, types", _trees())
def test_inverse_dynamics_random_trees(seed, types):
    model, q, qd = _tree_point(seed, types)
    qdd = np.random.default_rng(seed).uniform(-1.0, 1.0, model.joint_dof_count).astype(np.float32)
    inputs = _arrays(joint_q=(q, float), joint_qd=(qd, float), joint_qdd=(qdd, float))
    results = compare_gradients(_inverse_dynamics_forward(model, "force"), inputs, eps=EPS)
    _check(results, f"eval_inverse_dynamics_force, tree {types} seed {seed}")

"""Orphan-joint rule and joint_ancestor (issue 20).

A joint outside every articulation is an orphan only when its child body is neither the parent
nor the child of any articulated joint (the reference engine's rule), so a loop-closing joint onto
an articulation's root body is accepted. ``joint_ancestor`` is acyclic whatever the topology and
keeps -1 for an articulation's root joint whatever order joints were added in.
"""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import armillary as newton
from armillary.sim.finalize import joint_ancestors


def _root_loop(b):
    """Articulation rooted at body R (no joint of its own): R -> a -> c, closed by c -> R."""
    R, a, c = b.add_link(label="R"), b.add_link(label="a"), b.add_link(label="c")
    j0 = b.add_joint_revolute(R, a, axis=(0.0, 0.0, 1.0))
    j1 = b.add_joint_revolute(a, c, axis=(0.0, 0.0, 1.0), parent_xform=wp.transform((1.0, 0, 0), wp.quat_identity()))
    b.add_articulation([j0, j1])
    return b.add_joint_ball(c, R, label="close")


def _acyclic(anc):
    n = len(anc)
    for j in range(n):
        k, steps = j, 0
        while k >= 0:
            k = int(anc[k])
            steps += 1
            if steps > n:
                return False
    return True


def test_loop_closing_joint_onto_an_articulation_root_is_not_an_orphan():
    b = newton.ModelBuilder()
    loop = _root_loop(b)
    m = b.finalize(device="cpu")  # used to raise "Found 1 orphan joint(s)..."
    assert m.joint_articulation.numpy().tolist() == [0, 0, -1]
    assert m.joint_ancestor.numpy().tolist() == [-1, 0, 1]  # the root joint keeps -1
    assert loop == 2


def test_loop_closing_joint_onto_a_world_rooted_articulation_root():
    b = newton.ModelBuilder()
    R, a = b.add_link(), b.add_link()
    j = b.add_joint_free(R)
    j0 = b.add_joint_revolute(R, a)
    b.add_articulation([j, j0])
    b.add_joint_ball(a, R)
    m = b.finalize(device="cpu")
    assert m.joint_ancestor.numpy().tolist() == [-1, 0, 1]


def test_joint_whose_child_is_articulated_passes_and_true_orphans_still_fail():
    b = newton.ModelBuilder()
    R, a, X = b.add_link(), b.add_link(), b.add_link()
    b.add_articulation([b.add_joint_free(R), b.add_joint_revolute(R, a)])
    b.add_joint_ball(X, a)  # child a is articulated: closes onto the tree (reference rule)
    assert b.finalize(device="cpu").joint_ancestor.numpy().tolist() == [-1, 0, -1]
    Y, Z = b.add_link(), b.add_link()
    b.add_joint_ball(Y, Z, label="dangling")  # Z touches no articulated joint
    with pytest.raises(ValueError, match=r"1 orphan joint\(s\).*3 \('dangling'\).*neither the parent nor the child"):
        b.finalize(device="cpu")


def test_skip_validation_ring_has_an_acyclic_ancestor():
    b = newton.ModelBuilder()
    b0, b1, b2 = b.add_link(), b.add_link(), b.add_link()
    b.add_joint_revolute(b2, b0)
    b.add_joint_revolute(b0, b1)
    b.add_joint_revolute(b1, b2)
    with pytest.raises(ValueError, match="orphan"):
        b.finalize(device="cpu")
    m = b.finalize(device="cpu", skip_validation_joints=True)
    assert m.joint_ancestor.numpy().tolist() == [-1, 0, 1]  # was [2, 0, 1]


def test_root_joint_keeps_minus_one_whatever_the_order():
    """The articulation's joints added child-first, plus a non-articulated joint ending on its root body."""
    b = newton.ModelBuilder()
    R, a, c, X = b.add_link(), b.add_link(), b.add_link(), b.add_link()
    jx = b.add_joint_ball(X, R)  # non-articulated, added first, ends on the root body R
    j1 = b.add_joint_revolute(a, c)
    j0 = b.add_joint_revolute(R, a)
    b.add_articulation([j1, j0])
    m = b.finalize(device="cpu")  # X -> R ends on the articulation's root body: not an orphan
    anc = m.joint_ancestor.numpy().tolist()
    assert anc[j0] == -1 and anc[j1] == j0 and anc[jx] == -1


def test_mass_matrix_of_a_loop_closed_model_ignores_the_loop_joint():
    b = newton.ModelBuilder()
    _root_loop(b)
    m = b.finalize(device="cpu")
    t = newton.ModelBuilder()
    R, a, c = t.add_link(), t.add_link(), t.add_link()
    t.add_articulation([t.add_joint_revolute(R, a, axis=(0.0, 0.0, 1.0)),
                        t.add_joint_revolute(a, c, axis=(0.0, 0.0, 1.0),
                                             parent_xform=wp.transform((1.0, 0, 0), wp.quat_identity()))])  # fmt: skip
    tree = t.finalize(device="cpu")
    H = []
    for model in (m, tree):
        s = model.state()
        newton.eval_fk(model, s.joint_q, s.joint_qd, s)
        H.append(newton.eval_mass_matrix(model, s).numpy())
    np.testing.assert_allclose(H[0], H[1], atol=1e-6)


@pytest.mark.parametrize("seed", range(20))
def test_random_topologies_give_acyclic_ancestors(seed):
    rng = np.random.default_rng(seed)
    nb = int(rng.integers(1, 8))
    nj = int(rng.integers(1, 12))
    parent = rng.integers(-1, nb, nj)
    child = rng.integers(0, nb, nj)
    art = rng.integers(-1, 3, nj)
    anc = joint_ancestors(parent, child, art, nb)
    assert _acyclic(anc)
    # ancestors are joints whose child is the parent body; articulated joints stay in their articulation
    for j in range(nj):
        if anc[j] >= 0:
            assert child[anc[j]] == parent[j]
            if art[j] >= 0:
                assert art[anc[j]] == art[j]
        elif parent[j] < 0:
            assert anc[j] == -1

"""Articulations built from UsdPhysics joints: roots, ordering, loop closures, rootless mechanisms, collapse.

Expected joint lists marked "reference" were measured with the reference engine (newton 1.8
``add_usd``) on the same stages. ``JointType``: 0 PRISMATIC, 1 REVOLUTE, 3 FIXED, 4 FREE, 6 D6.
"""

import warnings

import numpy as np
import pytest

import armillary

pxr = pytest.importorskip("pxr")
from pxr import Gf, Usd, UsdGeom, UsdPhysics  # noqa: E402

from armillary_importer_usd.utils import USDImportError  # noqa: E402


def chain_stage(joints, root=None, kind="Revolute"):
    """Bodies /R/A../R/D at x = 0..3 (0.2 m cubes); ``joints``: (body0, body1, excludeFromArticulation)."""
    s = Usd.Stage.CreateInMemory()
    UsdGeom.SetStageUpAxis(s, "Z")
    UsdPhysics.Scene.Define(s, "/scene")
    UsdGeom.Xform.Define(s, "/R")
    for i, n in enumerate("ABCD"):
        x = UsdGeom.Xform.Define(s, f"/R/{n}")
        x.AddTranslateOp().Set(Gf.Vec3d(i, 0, 0))
        UsdPhysics.RigidBodyAPI.Apply(x.GetPrim())
        c = UsdGeom.Cube.Define(s, f"/R/{n}/c")
        c.GetSizeAttr().Set(0.2)
        UsdPhysics.CollisionAPI.Apply(c.GetPrim())
    for k, (b0, b1, ex) in enumerate(joints):
        j = getattr(UsdPhysics, f"{kind}Joint").Define(s, f"/R/j{k}")
        if b0:
            j.CreateBody0Rel().SetTargets([f"/R/{b0}"])
            j.CreateLocalPos0Attr(Gf.Vec3f(0.5, 0, 0))
        if b1:
            j.CreateBody1Rel().SetTargets([f"/R/{b1}"])
            j.CreateLocalPos1Attr(Gf.Vec3f(-0.5, 0, 0))
        if kind != "Fixed":
            j.CreateAxisAttr("Z")
        if ex:
            j.CreateExcludeFromArticulationAttr(True)
    if root:
        UsdPhysics.ArticulationRootAPI.Apply(s.GetPrimAtPath(root))
    return s


def load(stage, **kw):
    b = armillary.ModelBuilder()
    with warnings.catch_warnings():
        warnings.simplefilter("error", category=UserWarning)  # imports below must not warn
        r = b.add_usd(stage, **kw)
    return b, r


def summary(b):
    return (
        b.body_label,
        list(zip(b.joint_label, [int(t) for t in b.joint_type], b.joint_parent, b.joint_child, b.joint_articulation)),
        list(zip(b.articulation_start, b.articulation_label)),
    )


# reference: (body labels, (joint label, type, parent, child, articulation), (articulation start, label))
CASES = {
    "chain_no_root": (
        [(None, "A", 0), ("A", "B", 0)], None, {},
        (["/R/A", "/R/B", "/R/C", "/R/D"],
         [("/R/j0", 1, -1, 0, -1), ("/R/j1", 1, 0, 1, -1), ("joint_3", 4, -1, 2, 0), ("joint_4", 4, -1, 3, 1)],
         [(2, "/R/C"), (3, "/R/D")]),
    ),
    "root_chain_excluded": (
        [(None, "A", 0), ("A", "B", 0), ("B", "C", 0), ("C", "A", 1)], "/R", {},
        (["/R/A", "/R/B", "/R/C", "/R/D"],
         [("/R/j0", 1, -1, 0, 0), ("/R/j1", 1, 0, 1, 0), ("/R/j2", 1, 1, 2, 0), ("joint_4", 4, -1, 3, 1), ("/R/j3", 1, 2, 0, -1)],
         [(0, "/R"), (3, "/R")]),
    ),
    "root_on_middle_body": (
        [("A", "B", 0), ("B", "C", 0)], "/R/B", {},
        (["/R/A", "/R/B", "/R/C", "/R/D"],
         [("joint_1", 4, -1, 0, 0), ("/R/j0", 1, 0, 1, 0), ("/R/j1", 1, 1, 2, 0), ("joint_4", 4, -1, 3, 1)],
         [(0, "/R/B"), (3, "/R/D")]),
    ),
    "free_bodies_under_root": (
        [(None, "A", 0), ("A", "B", 0)], "/R", {},
        (["/R/A", "/R/B", "/R/C", "/R/D"],
         [("/R/j0", 1, -1, 0, 0), ("/R/j1", 1, 0, 1, 0), ("joint_3", 4, -1, 2, 1), ("joint_4", 4, -1, 3, 2)],
         [(0, "/R"), (2, "/R"), (3, "/R")]),
    ),
    "tree_dfs": (
        [(None, "A", 0), ("A", "D", 0), ("D", "C", 0), ("A", "B", 0)], "/R", {"joint_ordering": "dfs"},
        (["/R/A", "/R/D", "/R/C", "/R/B"],
         [("/R/j0", 1, -1, 0, 0), ("/R/j1", 1, 0, 1, 0), ("/R/j2", 1, 1, 2, 0), ("/R/j3", 1, 0, 3, 0)],
         [(0, "/R")]),
    ),
    "tree_bfs": (
        [(None, "A", 0), ("A", "D", 0), ("D", "C", 0), ("A", "B", 0)], "/R", {"joint_ordering": "bfs"},
        (["/R/A", "/R/D", "/R/B", "/R/C"],
         [("/R/j0", 1, -1, 0, 0), ("/R/j1", 1, 0, 1, 0), ("/R/j3", 1, 0, 2, 0), ("/R/j2", 1, 1, 3, 0)],
         [(0, "/R")]),
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_topology_matches_reference(name):
    joints, root, kw, expected = CASES[name]
    b, r = load(chain_stage(joints, root), **kw)
    assert summary(b) == expected


def test_bodies_in_file_order_when_not_following_joints():
    b, _ = load(chain_stage([(None, "A", 0), ("A", "D", 0), ("D", "C", 0), ("A", "B", 0)], "/R"), bodies_follow_joint_ordering=False)
    assert b.body_label == ["/R/A", "/R/B", "/R/C", "/R/D"]
    assert [b.body_label[c] for c in b.joint_child] == ["/R/A", "/R/D", "/R/C", "/R/B"]


def test_excluded_loop_joint_finalizes():
    b, r = load(chain_stage([(None, "A", 0), ("A", "B", 0), ("B", "C", 0), ("C", "A", 1)], "/R"))
    model = b.finalize(device="cpu")
    assert model.joint_count == 5
    assert r["path_articulation_map"] == {"/R": 0}


def test_closed_loop_without_articulation_root_imports():
    """The reference engine leaves every joint of this loop outside any articulation (finalize then
    rejects the orphans); armillary picks a spanning tree and keeps the last joint as a loop closure."""
    b, r = load(chain_stage([(None, "A", 0), ("A", "B", 0), ("B", "C", 0), ("C", "A", 0)]))
    labels = [(b.joint_label[j], b.joint_articulation[j]) for j in range(b.joint_count)]
    assert labels == [("/R/j0", 0), ("/R/j1", 0), ("/R/j2", 0), ("joint_4", 1), ("/R/j3", -1)]
    model = b.finalize(device="cpu")
    state = model.state()
    armillary.eval_fk(model, model.joint_q, model.joint_qd, state)
    np.testing.assert_allclose(state.body_q.numpy()[:3, 0], [0.5, 1.5, 2.5], atol=1e-6)


def test_closed_loop_without_world_joint_gets_a_free_root():
    b, _ = load(chain_stage([("A", "B", 0), ("B", "C", 0), ("C", "A", 0)]))
    types = [(b.joint_label[j], int(b.joint_type[j]), b.joint_articulation[j]) for j in range(b.joint_count)]
    assert types[:3] == [("joint_1", 4, 0), ("/R/j0", 1, 0), ("/R/j1", 1, 0)]
    assert ("/R/j2", 1, -1) in types
    b.finalize(device="cpu")


def test_world_joint_outside_articulations_is_standalone():
    b, _ = load(chain_stage([(None, "A", 0)]))
    assert b.joint_articulation[0] == -1 and b.joint_parent[0] == -1
    b.finalize(device="cpu")


def test_reversed_joint_raises_naming_the_joint():
    # reference: "Reversed joints are not supported: /R/j1"
    with pytest.raises(USDImportError, match="/R/j1"):
        load(chain_stage([(None, "A", 0), ("B", "A", 0)], "/R"))


def test_joint_frames_follow_the_stage():
    b, r = load(chain_stage([(None, "A", 0), ("A", "B", 0)], "/R"))
    np.testing.assert_allclose(np.asarray(b.joint_X_p[0])[:3], [0, 0, 0], atol=1e-6)  # world anchor (localPos0 unset)
    np.testing.assert_allclose(np.asarray(b.joint_X_p[1])[:3], [0.5, 0, 0], atol=1e-6)
    np.testing.assert_allclose(np.asarray(b.joint_X_c[1])[:3], [-0.5, 0, 0], atol=1e-6)
    assert r["path_joint_map"] == {"/R/j0": 0, "/R/j1": 1}


def test_xform_moves_world_joint_anchors():
    b, _ = load(chain_stage([(None, "A", 0), ("A", "B", 0)], "/R"), xform=((0, 0, 1), (0, 0, 0, 1)))
    np.testing.assert_allclose(np.asarray(b.joint_X_p[0])[:3], [0, 0, 1], atol=1e-6)
    model = b.finalize(device="cpu")
    state = model.state()
    armillary.eval_fk(model, model.joint_q, model.joint_qd, state)
    np.testing.assert_allclose(state.body_q.numpy()[:2, :3], [[0.5, 0, 1], [1.5, 0, 1]], atol=1e-6)


def test_disabled_joint_is_skipped():
    s = chain_stage([(None, "A", 0), ("A", "B", 0)], "/R")
    s.GetPrimAtPath("/R/j1").GetAttribute("physics:jointEnabled").Set(False)
    b, r = load(s)
    assert "/R/j1" not in r["path_joint_map"]
    assert int(b.joint_type[r["path_joint_map"]["/R/j0"]]) == 1
    b, r = load(s, only_load_enabled_joints=False)
    assert "/R/j1" in r["path_joint_map"]


def test_collapse_fixed_joints():
    s = chain_stage([(None, "A", 0), ("A", "B", 0)], "/R", kind="Fixed")
    b, r = load(s, collapse_fixed_joints=True)
    assert r["collapse_results"] is not None
    assert set(r["path_original_body_map"]) == {"/R/A", "/R/B", "/R/C", "/R/D"}
    # reference: A and B are fixed to the world, so they collapse into it (their shapes become static)
    assert r["path_body_map"] == {"/R/A": -1, "/R/B": -1, "/R/C": 0, "/R/D": 1}
    assert set(r["path_body_relative_transform"]) == {"/R/A", "/R/B"}
    assert b.body_count == 2 and b.shape_body == [-1, -1, 0, 1]


def test_articulation_map_names_roots():
    b, r = load(chain_stage([(None, "A", 0), ("A", "B", 0)], "/R"))
    # C and D (jointless, under the root prim) get their own FREE articulations labelled "/R" too
    assert r["path_articulation_map"] == {"/R": 0}
    assert b.articulation_label == ["/R", "/R", "/R"]
    assert b.articulation_label[r["path_articulation_map"]["/R"]] == "/R"


def _random_tree_stage(parents, poses, ordering_seed):
    """A tree with body i at ``poses[i]`` (p, q xyzw) and a revolute joint from ``parents[i]`` at body i's origin."""
    s = Usd.Stage.CreateInMemory()
    UsdGeom.SetStageUpAxis(s, "Z")
    UsdGeom.Xform.Define(s, "/R")
    UsdPhysics.ArticulationRootAPI.Apply(s.GetPrimAtPath("/R"))
    for i, (p, q) in enumerate(poses):
        x = UsdGeom.Xform.Define(s, f"/R/b{i}")
        x.AddTranslateOp().Set(Gf.Vec3d(*p))
        x.AddOrientOp().Set(Gf.Quatf(float(q[3]), float(q[0]), float(q[1]), float(q[2])))
        UsdPhysics.RigidBodyAPI.Apply(x.GetPrim())
        c = UsdGeom.Sphere.Define(s, f"/R/b{i}/s")
        c.GetRadiusAttr().Set(0.05)
        UsdPhysics.CollisionAPI.Apply(c.GetPrim())
    rng = np.random.default_rng(ordering_seed)
    names = rng.permutation(len(poses))  # joint prim names in a random order
    for i, par in enumerate(parents):
        j = UsdPhysics.RevoluteJoint.Define(s, f"/R/j{names[i]:02d}")
        j.CreateAxisAttr("XYZ"[i % 3])
        j.CreateBody1Rel().SetTargets([f"/R/b{i}"])
        if par >= 0:
            j.CreateBody0Rel().SetTargets([f"/R/b{par}"])
            X = _tf_inv(poses[par]) @ _tf_mat(poses[i])
        else:
            X = _tf_mat(poses[i])
        from armillary_importer_usd.utils import decompose

        t, qq, _ = decompose(X)
        j.CreateLocalPos0Attr(Gf.Vec3f(*t.tolist()))
        j.CreateLocalRot0Attr(Gf.Quatf(float(qq[3]), float(qq[0]), float(qq[1]), float(qq[2])))
    return s


def _tf_mat(pq):
    p, q = pq
    x, y, z, w = q
    m = np.eye(4)
    m[:3, :3] = [[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                 [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                 [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]]  # fmt: skip
    m[:3, 3] = p
    return m


def _tf_inv(pq):
    return np.linalg.inv(_tf_mat(pq))


def test_random_trees_reproduce_the_authored_poses_in_fk():
    hyp = pytest.importorskip("hypothesis")
    st = hyp.strategies

    @hyp.settings(max_examples=15, deadline=None, derandomize=True)
    @hyp.given(st.integers(2, 7).flatmap(lambda n: st.tuples(
        st.tuples(*[st.just(-1)] + [st.integers(0, i - 1) for i in range(1, n)]),
        st.lists(st.tuples(st.tuples(*[st.floats(-2, 2)] * 3), st.tuples(*[st.floats(-1, 1)] * 4)), min_size=n, max_size=n),
        st.integers(0, 1000), st.sampled_from(["dfs", "bfs"]))))  # fmt: skip
    def check(args):
        parents, raw, seed, ordering = args
        poses = []
        for p, q in raw:
            q = np.asarray(q, dtype=float)
            n = np.linalg.norm(q)
            q = np.array([0, 0, 0, 1.0]) if n < 1e-3 else q / n
            poses.append((np.asarray(p, dtype=float), q))
        b, r = load(_random_tree_stage(list(parents), poses, seed), joint_ordering=ordering)
        assert b.articulation_count == 1 and b.joint_count == len(poses)
        model = b.finalize(device="cpu")
        state = model.state()
        armillary.eval_fk(model, model.joint_q, model.joint_qd, state)
        body_q = state.body_q.numpy()
        for i, (p, q) in enumerate(poses):
            k = r["path_body_map"][f"/R/b{i}"]
            np.testing.assert_allclose(body_q[k, :3], p, atol=2e-5)
            assert min(np.abs(body_q[k, 3:] - q).max(), np.abs(body_q[k, 3:] + q).max()) < 2e-5
            # parents come before children in the joint order
            j = r["path_joint_map"]
            jc = [jj for path, jj in j.items() if b.joint_child[jj] == k][0]
            if b.joint_parent[jc] >= 0:
                pj = [jj for jj in range(b.joint_count) if b.joint_child[jj] == b.joint_parent[jc]][0]
                assert pj < jc

    check()

"""Property tests: ArticulationView index mapping round trips on replicated and irregular models.

Setting values through a view and reading them back returns the values (in masked-in
articulations), and every other entry of the target array stays bit-for-bit unchanged. The
expected rows are derived independently from the model's start arrays.
"""

from __future__ import annotations

import numpy as np
import warp as wp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import armillary as newton
from armillary.selection import ArticulationView as AV

JT = newton.JointType
ROOTS = ["free", "fixed", "revolute", "ball"]
INNER = ["revolute", "prismatic", "ball", "fixed"]
ATTRS = [  # (name, source, frequency)
    ("joint_q", "state", "coord"),
    ("joint_qd", "state", "dof"),
    ("body_q", "state", "body"),
    ("body_qd", "state", "body"),
    ("body_mass", "model", "body"),
    ("joint_X_p", "model", "joint"),
    ("joint_axis", "model", "dof"),
    ("joint_target_q", "control", "coord"),
    ("joint_f", "control", "dof"),
    ("shape_margin", "model", "shape"),
]


def _add_articulation(b, root, inner, shapes, label):
    links = [b.add_link(label=f"{label}_l{k}") for k in range(1 + len(inner))]
    for link, n in zip(links, shapes):
        for _ in range(n):
            b.add_shape_sphere(link, radius=0.1)
    joints = []
    for k, kind in enumerate([root, *inner]):
        parent = -1 if k == 0 else links[k - 1]
        child = links[k]
        if kind == "free":
            joints.append(b.add_joint_free(child, label=f"{label}_j{k}"))
        elif kind == "fixed":
            joints.append(b.add_joint_fixed(parent, child, label=f"{label}_j{k}"))
        elif kind == "revolute":
            joints.append(b.add_joint_revolute(parent, child, axis=(0.0, 0.0, 1.0), label=f"{label}_j{k}"))
        elif kind == "prismatic":
            joints.append(b.add_joint_prismatic(parent, child, axis=(1.0, 0.0, 0.0), label=f"{label}_j{k}"))
        else:
            joints.append(b.add_joint_ball(parent, child, label=f"{label}_j{k}"))
    b.add_articulation(joints, label=label)


@st.composite
def scenes(draw):
    root = draw(st.sampled_from(ROOTS))
    inner = draw(st.lists(st.sampled_from(INNER), min_size=0, max_size=3))
    shapes = draw(st.lists(st.integers(0, 2), min_size=1 + len(inner), max_size=1 + len(inner)))
    world_count = draw(st.integers(1, 3))
    per_world = draw(st.integers(1, 2))
    irregular = draw(st.booleans())
    # decoys: per world, before each match, a number of other articulations
    decoys = [
        [draw(st.integers(0, 2 if irregular else 0)) for _ in range(per_world)] for _ in range(world_count)
    ]
    if not irregular:
        d = draw(st.integers(0, 1))
        decoys = [[d] * per_world for _ in range(world_count)]
    attr = draw(st.sampled_from(ATTRS))
    mask_kind = draw(st.sampled_from(["none", "world", "art"]))
    seed = draw(st.integers(0, 2**31 - 1))
    return root, inner, shapes, world_count, per_world, decoys, irregular, attr, mask_kind, seed


def _rows2d(a):
    a = np.ascontiguousarray(a)
    return a.reshape(a.shape[0], int(np.prod(a.shape[1:], dtype=np.int64)))


def _expected_rows(model, arts, freq):
    a_start = model.articulation_start.numpy()
    a_end = model.articulation_end.numpy()
    q_start = model.joint_q_start.numpy()
    qd_start = model.joint_qd_start.numpy()
    child = model.joint_child.numpy()
    shape_body = model.shape_body.numpy()
    out = []
    for a in arts:
        joints = list(range(a_start[a], a_end[a]))
        if freq == "joint":
            rows = joints
        elif freq == "coord":
            rows = [r for j in joints for r in range(q_start[j], q_start[j + 1])]
        elif freq == "dof":
            rows = [r for j in joints for r in range(qd_start[j], qd_start[j + 1])]
        elif freq == "body":
            rows = [int(child[j]) for j in joints]
        else:
            rows = [int(s) for j in joints for s in np.nonzero(shape_body == child[j])[0]]
        out.append(rows)
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scene=scenes())
def test_set_get_round_trip_leaves_everything_else_untouched(scene):
    root, inner, shapes, W, C, decoys, irregular, (name, source, freq), mask_kind, seed = scene
    rng = np.random.default_rng(seed)
    b = newton.ModelBuilder()
    for w in range(W):
        b.begin_world()
        for c in range(C):
            for d in range(decoys[w][c]):
                _add_articulation(b, "revolute", ["prismatic"] * d, [1] * (d + 1), "decoy")
            _add_articulation(b, root, inner, shapes, "robot")
        b.end_world()
    model = b.finalize()
    src = {"model": model, "state": model.state(), "control": model.control()}[source]
    arr = getattr(src, name)

    view = AV(model, "robot", homogeneous=not irregular)
    assert (view.world_count, view.count_per_world) == (W, C)
    arts = view.articulation_ids.numpy().reshape(-1)
    assert [model.articulation_label[a] for a in arts] == ["robot"] * (W * C)
    rows = _expected_rows(model, arts, freq)

    got = view.get_attribute(name, src)
    V = len(rows[0])
    scalar_shape = got.numpy().shape
    assert scalar_shape[:3] == (W, C, V)
    flat_src = _rows2d(arr.numpy())
    width = flat_src.shape[1]
    if V:
        np.testing.assert_array_equal(got.numpy().reshape(W * C, V, width), np.stack([flat_src[r] for r in rows]))

    before = np.ascontiguousarray(arr.numpy()).copy()
    if getattr(arr.dtype, "_wp_scalar_type_", arr.dtype) == wp.float32:
        values = rng.standard_normal(scalar_shape).astype(np.float32)
    else:
        values = rng.integers(-5, 5, scalar_shape).astype(np.int32)
    if mask_kind == "none":
        mask, art_sel = None, np.ones(W * C, dtype=bool)
    elif mask_kind == "world":
        wm = rng.random(W) < 0.5
        mask, art_sel = wp.array(wm, dtype=bool), np.repeat(wm, C)
    else:
        am = rng.random((W, C)) < 0.5
        mask, art_sel = wp.array(am, dtype=bool), am.reshape(-1)
    view.set_attribute(name, src, values, mask=mask)

    expected = _rows2d(before).copy()
    vals = values.reshape(W * C, V, width)
    for k, r in enumerate(rows):
        if art_sel[k] and V:
            expected[r] = vals[k]
    after = _rows2d(arr.numpy())
    assert after.tobytes() == expected.astype(after.dtype).tobytes()

    # get after set: the written values where selected, the old ones elsewhere
    got2 = view.get_attribute(name, src).numpy().reshape(W * C, V, width)
    old = _rows2d(before)
    for k, r in enumerate(rows):
        if V:
            np.testing.assert_array_equal(got2[k], vals[k] if art_sel[k] else old[r])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    root=st.sampled_from(ROOTS),
    W=st.integers(1, 3),
    C=st.integers(1, 2),
    seed=st.integers(0, 2**31 - 1),
)
def test_root_transform_round_trip(root, W, C, seed):
    rng = np.random.default_rng(seed)
    b = newton.ModelBuilder()
    for w in range(W):
        b.begin_world()
        for c in range(C):
            _add_articulation(b, root, ["revolute"], [1, 1], "robot")
        b.end_world()
    model = b.finalize()
    state = model.state()
    view = AV(model, "robot")
    q_before = state.joint_q.numpy().tobytes()
    xp_before = model.joint_X_p.numpy().copy()
    tf = rng.standard_normal((W, C, 7)).astype(np.float32)
    tf[..., 3:] /= np.linalg.norm(tf[..., 3:], axis=-1, keepdims=True)
    view.set_root_transforms(state, tf)
    np.testing.assert_array_equal(view.get_root_transforms(state).numpy(), tf)
    roots = model.articulation_start.numpy()[view.articulation_ids.numpy().reshape(-1)]
    if root == "free":
        q = state.joint_q.numpy()
        qs = model.joint_q_start.numpy()
        for k, j in enumerate(roots):
            np.testing.assert_array_equal(q[qs[j] : qs[j] + 7], tf.reshape(-1, 7)[k])
        assert model.joint_X_p.numpy().tobytes() == xp_before.tobytes()
    else:
        assert state.joint_q.numpy().tobytes() == q_before
        xp = model.joint_X_p.numpy()
        np.testing.assert_array_equal(xp[roots], tf.reshape(-1, 7))
        others = np.setdiff1d(np.arange(len(xp)), roots)
        assert xp[others].tobytes() == xp_before[others].tobytes()

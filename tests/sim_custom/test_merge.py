"""References remapping of custom attributes across add_builder / add_world / replicate."""

import numpy as np
import pytest
import warp as wp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import armillary as newton

Model = newton.Model
ModelBuilder = newton.ModelBuilder
CA, CF = ModelBuilder.CustomAttribute, ModelBuilder.CustomFrequency
AF = Model.AttributeFrequency


def _sub(n_bodies: int, n_pairs: int, pair_rows, body_refs):
    sub = ModelBuilder()
    sub.add_custom_frequency(CF(name="pair", namespace="mj"))
    sub.add_custom_attribute(CA(name="pw", frequency="mj:pair", dtype=wp.int32, namespace="mj", references="world"))
    sub.add_custom_attribute(CA(name="pb", frequency="mj:pair", dtype=wp.int32, namespace="mj", references="body"))
    sub.add_custom_attribute(CA(name="pp", frequency="mj:pair", dtype=wp.int32, namespace="mj", references="mj:pair"))
    sub.add_custom_attribute(CA(name="bref", frequency=AF.BODY, dtype=wp.int32, references="body", default=-1))
    sub.add_custom_attribute(CA(name="bval", frequency=AF.BODY, dtype=wp.float32, default=0.5))
    for i in range(n_bodies):
        sub.add_body(mass=1.0, custom_attributes={"bref": body_refs[i], "bval": float(i)})
    for r in range(n_pairs):
        b, p = pair_rows[r]
        sub.add_custom_values(**{"mj:pb": b % n_bodies, "mj:pp": p % n_pairs})
    return sub


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n_bodies=st.integers(1, 4),
    n_pairs=st.integers(0, 3),
    copies=st.integers(1, 3),
    main_bodies=st.integers(0, 2),
    data=st.data(),
)
def test_replicate_remaps_references(n_bodies, n_pairs, copies, main_bodies, data):
    pair_rows = data.draw(st.lists(st.tuples(st.integers(0, 10), st.integers(0, 10)), min_size=n_pairs, max_size=n_pairs))
    body_refs = data.draw(st.lists(st.integers(-1, n_bodies - 1), min_size=n_bodies, max_size=n_bodies))
    sub = _sub(n_bodies, n_pairs, pair_rows, body_refs)
    main = ModelBuilder()
    for _ in range(main_bodies):
        main.add_body(mass=1.0)
    main.replicate(sub, copies)
    model = main.finalize(device="cpu")

    assert model.get_custom_frequency_count("mj:pair") == copies * n_pairs
    pw, pb, pp = model.mj.pw.numpy(), model.mj.pb.numpy(), model.mj.pp.numpy()
    bref, bval = model.bref.numpy(), model.bval.numpy()
    for w in range(copies):
        body_off = main_bodies + w * n_bodies
        for r in range(n_pairs):
            k = w * n_pairs + r
            assert pw[k] == w
            assert pb[k] == pair_rows[r][0] % n_bodies + body_off
            assert pp[k] == pair_rows[r][1] % n_pairs + w * n_pairs
        for i in range(n_bodies):
            ref = body_refs[i]
            assert bref[body_off + i] == (ref + body_off if ref >= 0 else -1)
            assert bval[body_off + i] == float(i)
    assert np.all(bref[:main_bodies] == -1) and np.all(bval[:main_bodies] == 0.5)


def test_add_builder_global_sets_world_minus_one():
    sub = _sub(2, 2, [(0, 1), (1, 0)], [0, 1])
    main = ModelBuilder()
    main.add_builder(sub)
    main.add_world(sub)
    model = main.finalize(device="cpu")
    np.testing.assert_array_equal(model.mj.pw.numpy(), [-1, -1, 0, 0])
    np.testing.assert_array_equal(model.mj.pb.numpy(), [0, 1, 2, 3])
    np.testing.assert_array_equal(model.mj.pp.numpy(), [1, 0, 3, 2])


def test_declarations_are_adopted_and_not_shared():
    sub = _sub(1, 1, [(0, 0)], [0])
    main = ModelBuilder()
    main.add_world(sub)
    assert main.custom_attributes["mj:pb"] is not sub.custom_attributes["mj:pb"]
    assert sub.custom_attributes["mj:pb"].values == [0]
    main.add_world(sub)
    assert sub.custom_attributes["mj:pb"].values == [0]


def test_incompatible_declarations_refuse_to_merge():
    sub = ModelBuilder()
    sub.add_custom_attribute(CA(name="x", frequency=AF.BODY, dtype=wp.float32))
    main = ModelBuilder()
    main.add_custom_attribute(CA(name="x", frequency=AF.BODY, dtype=wp.int32))
    with pytest.raises(ValueError, match="'x'"):
        main.add_builder(sub)


def test_world_frequency_and_other_references():
    sub = ModelBuilder()
    sub.add_custom_attribute(CA(name="wv", frequency=AF.WORLD, dtype=wp.float32, default=2.0, values={0: 8.0}))
    sub.add_custom_attribute(CA(name="sref", frequency=AF.SHAPE, dtype=wp.int32, references="shape"))
    sub.add_custom_attribute(CA(name="jref", frequency=AF.JOINT, dtype=wp.vec2i, references="joint"))
    sub.add_custom_attribute(CA(name="pref", frequency=AF.PARTICLE, dtype=wp.int32, references="particle"))
    b = sub.add_link(mass=1.0)
    s = sub.add_shape_sphere(b, radius=0.1, custom_attributes={"sref": 0})
    j = sub.add_joint_revolute(-1, b, axis=(0, 0, 1), custom_attributes={"jref": (0, -1)})
    sub.add_articulation([j])
    sub.add_particle((0, 0, 0), (0, 0, 0), 1.0, custom_attributes={"pref": 0})
    main = ModelBuilder()
    main.replicate(sub, 3)
    model = main.finalize(device="cpu")
    np.testing.assert_allclose(model.wv.numpy(), [8.0, 8.0, 8.0])
    np.testing.assert_array_equal(model.sref.numpy(), [0, 1, 2])
    np.testing.assert_array_equal(model.jref.numpy(), [[0, -1], [1, -1], [2, -1]])
    np.testing.assert_array_equal(model.pref.numpy(), [0, 1, 2])
    assert s == 0


def test_reference_value_transformer_gets_context():
    seen = []

    def remap(values, ctx):
        seen.append((list(values), ctx["world"], ctx["entity_offsets"]["body"], list(ctx["row_indices"])))
        return [v * 10 for v in values]

    sub = ModelBuilder()
    sub.add_custom_frequency(CF(name="it"))
    sub.add_custom_attribute(CA(name="v", frequency="it", dtype=wp.int32, reference_value_transformer=remap))
    sub.add_body()
    sub.add_custom_values(v=2)
    main = ModelBuilder()
    main.add_world(sub)
    main.add_world(sub)
    model = main.finalize(device="cpu")
    np.testing.assert_array_equal(model.v.numpy(), [20, 20])
    assert seen == [([2], 0, 0, [0]), ([2], 1, 1, [0])]
    assert sub.custom_attributes["v"].values == [2]

"""CollisionPipeline behaviour: filtering, broad phases, margin/gap, speculative contacts,
determinism, capacities and unsupported pairs."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import armillary as newton
from armillary.geometry import BroadPhaseAllPairs, BroadPhaseExplicit, BroadPhaseSAP

FIELDS = ("shape0", "shape1", "point0", "point1", "offset0", "offset1", "normal", "margin0", "margin1")


def _read(contacts):
    n = int(contacts.rigid_contact_count.numpy()[0])
    return {f: getattr(contacts, "rigid_contact_" + f).numpy()[:n].copy() for f in FIELDS}


def _run(model, state=None, **kw):
    p = newton.CollisionPipeline(model, **kw)
    c = p.contacts()
    p.collide(state if state is not None else model.state(), c)
    return _read(c)


def _pairs(res):
    return sorted(set(zip(res["shape0"].tolist(), res["shape1"].tolist())))


def random_scene(seed=0, n=200, worlds=3):
    """Random primitives on free bodies in several worlds plus a global ground and static box."""
    rng = np.random.default_rng(seed)
    b = newton.ModelBuilder()
    b.add_ground_plane()
    b.add_shape_box(body=-1, xform=wp.transform((0.0, 0.0, 0.1), wp.quat_identity()), hx=1.0, hy=1.0, hz=0.1)
    per = (n - 2) // worlds
    for w in range(worlds):
        b.begin_world()
        for _ in range(per):
            q = rng.normal(size=4)
            q /= np.linalg.norm(q)
            body = b.add_body(xform=wp.transform(tuple(rng.uniform([-1.5, -1.5, 0.0], [1.5, 1.5, 1.5])),
                                                 wp.quat(*q.tolist())))  # fmt: skip
            group = int(rng.choice([1, 1, 1, 2, -1, -2]))
            cfg = b.ShapeConfig(collision_group=group, gap=float(rng.uniform(0.0, 0.05)),
                                margin=float(rng.uniform(0.0, 0.01)))  # fmt: skip
            kind = rng.integers(3)
            if kind == 0:
                b.add_shape_sphere(body, radius=float(rng.uniform(0.05, 0.2)), cfg=cfg)
            elif kind == 1:
                b.add_shape_capsule(body, radius=float(rng.uniform(0.03, 0.15)),
                                    half_height=float(rng.uniform(0.05, 0.25)), cfg=cfg)  # fmt: skip
            else:
                b.add_shape_box(body, hx=float(rng.uniform(0.05, 0.2)), hy=float(rng.uniform(0.05, 0.2)),
                                hz=float(rng.uniform(0.05, 0.2)), cfg=cfg)  # fmt: skip
        b.end_world()
    shapes = b.shape_count
    for _ in range(20):
        i, j = (int(v) for v in rng.choice(np.arange(2, shapes), 2, replace=False))
        b.add_shape_collision_filter_pair(i, j)
    return b.finalize(device="cpu")


def test_broad_phases_agree_and_deterministic_is_bit_identical():
    model = random_scene()
    assert model.shape_count >= 200
    ref = _run(model, broad_phase="explicit", deterministic=True)
    assert len(ref["shape0"]) > 100
    for mode in ("nxn", "sap"):
        res = _run(model, broad_phase=mode, deterministic=True)
        for f in FIELDS:
            assert np.array_equal(res[f], ref[f]), (mode, f)
    again = _run(model, broad_phase="sap", deterministic=True)
    for f in FIELDS:
        assert again[f].tobytes() == ref[f].tobytes()
    # sorted by (shape_a, shape_b, sub_key)
    key = ref["shape0"].astype(np.int64) * model.shape_count + ref["shape1"]
    assert np.all(np.diff(key) >= 0)
    # the non-deterministic path finds the same contact set
    plain = _run(model, broad_phase="nxn")
    assert _pairs(plain) == _pairs(ref) and len(plain["shape0"]) == len(ref["shape0"])
    # the filtering rules hold for every contact
    world = model.shape_world.numpy()
    group = model.shape_collision_group.numpy()
    body = model.shape_body.numpy()
    for a, b in _pairs(ref):
        assert world[a] == world[b] or world[a] < 0 or world[b] < 0
        ga, gb = group[a], group[b]
        assert ga != 0 and gb != 0 and (ga == gb > 0 or (ga != gb and (ga < 0 or gb < 0)))
        assert body[a] != body[b] and not (body[a] < 0 and body[b] < 0)
        assert (min(a, b), max(a, b)) not in model.shape_collision_filter_pairs
    assert set(_pairs(ref)) <= {tuple(p) for p in model.shape_contact_pairs.tolist()} | {
        (b, a) for a, b in model.shape_contact_pairs.tolist()}  # fmt: skip


@pytest.mark.parametrize("ga,gb,collide", [(0, 1, False), (1, 1, True), (1, 2, False), (1, -2, True),
                                           (-1, -1, False), (-1, -2, True)])  # fmt: skip
@pytest.mark.parametrize("mode", ["explicit", "nxn", "sap"])
def test_collision_group_table(ga, gb, collide, mode):
    b = newton.ModelBuilder()
    for g, x in ((ga, 0.0), (gb, 0.5)):
        body = b.add_body(xform=wp.transform((x, 0.0, 1.0), wp.quat_identity()))
        b.add_shape_sphere(body, radius=0.3, cfg=b.ShapeConfig(collision_group=g))
    res = _run(b.finalize(device="cpu"), broad_phase=mode)
    assert (len(res["shape0"]) == 1) == collide


@pytest.mark.parametrize("mode", ["explicit", "nxn", "sap"])
def test_world_filters_and_flags(mode):
    b = newton.ModelBuilder()
    b.add_ground_plane()  # global
    specs = []
    for w in (0, 1):
        b.begin_world()
        body = b.add_body(xform=wp.transform((0.0, 0.0, 0.25), wp.quat_identity()))
        specs.append(b.add_shape_sphere(body, radius=0.3))
        b.end_world()
    # same-body shapes never collide; filtered pair; visual-only shape
    body = b.add_body(xform=wp.transform((3.0, 0.0, 1.0), wp.quat_identity()))
    s1 = b.add_shape_box(body, hx=0.3, hy=0.3, hz=0.3)
    s2 = b.add_shape_sphere(body, radius=0.3)
    other = b.add_body(xform=wp.transform((3.3, 0.0, 1.0), wp.quat_identity()))
    s3 = b.add_shape_sphere(other, radius=0.3)
    b.add_shape_collision_filter_pair(s1, s3)
    ghost = b.add_body(xform=wp.transform((3.0, 0.3, 1.0), wp.quat_identity()))
    b.add_shape_sphere(ghost, radius=0.3, cfg=b.ShapeConfig(has_shape_collision=False))
    res = _run(b.finalize(device="cpu"), broad_phase=mode)
    assert _pairs(res) == [(0, specs[0]), (0, specs[1]), (s2, s3)]


def test_margin_and_gap_semantics():
    """Contacts when s <= m + g; reported d = s - m; margins carried per shape."""
    for s, ma, mb, ga, gb, expect in [(0.25, 0.05, 0.1, 0.05, 0.05, True), (0.26, 0.05, 0.1, 0.05, 0.05, False),
                                      (0.0, 0.0, 0.0, 0.0, 0.0, True), (0.01, 0.0, 0.0, 0.0, 0.0, False)]:  # fmt: skip
        b = newton.ModelBuilder()
        b.add_ground_plane(cfg=b.ShapeConfig(margin=ma, gap=ga))
        body = b.add_body(xform=wp.transform((0.0, 0.0, 0.5 + s - 1e-4 * (s > 0) * 0), wp.quat_identity()))
        b.add_shape_sphere(body, radius=0.5, cfg=b.ShapeConfig(margin=mb, gap=gb))
        m = b.finalize(device="cpu")
        # AABB expansion by margin + gap keeps broad phase consistent with the narrow phase
        for mode in ("explicit", "nxn", "sap"):
            res = _run(m, broad_phase=mode)
            assert (len(res["shape0"]) == 1) == expect, (s, mode)
            if expect:
                d = res["normal"][0] @ (res["point1"][0] + [0, 0, 0.5 + s] - res["point0"][0])
                d -= res["margin0"][0] + res["margin1"][0]
                assert np.isclose(d, s - ma - mb, atol=1e-6)
                assert np.isclose(res["margin0"][0], ma) and np.isclose(res["margin1"][0], 0.5 + mb)


def test_builder_default_gap_is_rigid_gap():
    b = newton.ModelBuilder()
    assert b.rigid_gap == 0.1
    b.add_ground_plane()
    body = b.add_body(xform=wp.transform((0.0, 0.0, 0.5 + 0.19), wp.quat_identity()))
    b.add_shape_sphere(body, radius=0.5)
    assert len(_run(b.finalize(device="cpu"))["shape0"]) == 1


def test_speculative_contacts():
    b = newton.ModelBuilder()
    b.add_ground_plane(cfg=b.ShapeConfig(gap=0.0))
    body = b.add_body(xform=wp.transform((0.0, 0.0, 0.8), wp.quat_identity()))
    b.add_shape_sphere(body, radius=0.5, cfg=b.ShapeConfig(gap=0.0))
    m = b.finalize(device="cpu")
    state = m.state()
    p = newton.CollisionPipeline(m, speculative_contact_gap_max=0.4)
    c = p.contacts()
    with pytest.raises(ValueError, match="dt"):
        p.collide(state, c)
    state.body_qd.assign(np.array([[0.0, 0.0, -5.0, 0.0, 0.0, 0.0]], dtype=np.float32))
    p.collide(state, c, dt=0.1)  # v dt = 0.5 capped at 0.4 >= separation 0.3
    assert c.rigid_contact_count.numpy()[0] == 1
    p.collide(state, c, dt=0.05)  # 0.25 < 0.3
    assert c.rigid_contact_count.numpy()[0] == 0
    p.collide(state, c, dt=0.0)
    assert c.rigid_contact_count.numpy()[0] == 0
    state.body_qd.assign(np.array([[0.0, 0.0, 5.0, 0.0, 0.0, 0.0]], dtype=np.float32))  # receding
    p.collide(state, c, dt=0.1)
    assert c.rigid_contact_count.numpy()[0] == 0
    plain = newton.CollisionPipeline(m)
    plain.collide(state, c)
    assert c.rigid_contact_count.numpy()[0] == 0
    with pytest.raises(ValueError):
        newton.CollisionPipeline(m, speculative_contact_gap_max=-1.0)


def test_capacity_overflow_clamps_count():
    b = newton.ModelBuilder()
    b.add_ground_plane()
    for i in range(5):
        body = b.add_body(xform=wp.transform((2.0 * i, 0.0, 0.5), wp.quat_identity()))
        b.add_shape_box(body, hx=0.5, hy=0.5, hz=0.5)
    m = b.finalize(device="cpu")
    for det in (False, True):
        p = newton.CollisionPipeline(m, rigid_contact_max=7, deterministic=det, publish_capacity=False)
        c = p.contacts()
        p.collide(m.state(), c)
        assert c.rigid_contact_count.numpy()[0] == 7
    assert len(_run(m)["shape0"]) == 20


def test_bad_options_raise_and_mesh_mesh_pairs_collide():
    b = newton.ModelBuilder()
    b.add_ground_plane()
    body = b.add_body()
    b.add_shape_mesh(body, mesh=newton.Mesh.create_box(0.2, 0.2, 0.2))
    b.add_shape_mesh(b.add_body(), mesh=newton.Mesh.create_box(0.2, 0.2, 0.2))
    m = b.finalize(device="cpu")
    p = newton.CollisionPipeline(m)  # MESH-MESH pairs are supported (tests/collision/test_mesh_mesh.py)
    c = p.contacts()
    p.collide(m.state(), c)
    shapes = {(int(x), int(y)) for x, y in zip(c.rigid_contact_shape0.numpy()[: c.rigid_contact_count.numpy()[0]],
                                              c.rigid_contact_shape1.numpy()[: c.rigid_contact_count.numpy()[0]])}
    assert (1, 2) in shapes or (2, 1) in shapes  # the two coincident mesh boxes touch
    b = newton.ModelBuilder()
    body = b.add_body()
    b.add_shape_sphere(body, radius=0.2)
    m = b.finalize(device="cpu")
    with pytest.raises(ValueError, match="contact_matching"):
        newton.CollisionPipeline(m, contact_matching="newest")
    with pytest.raises(ValueError):
        newton.CollisionPipeline(m, contact_report=True)
    with pytest.raises(ValueError):
        newton.CollisionPipeline(m, broad_phase="octree")
    with pytest.raises(TypeError):
        newton.Contacts(10, 0, bogus_option=True)


def test_model_collide_default_pipeline():
    b = newton.ModelBuilder()
    b.add_ground_plane()
    body = b.add_body(xform=wp.transform((0.0, 0.0, 0.45), wp.quat_identity()))
    b.add_shape_sphere(body, radius=0.5)
    m = b.finalize(device="cpu")
    c = m.collide(m.state())
    assert c.rigid_contact_count.numpy()[0] == 1
    assert m.collide(m.state(), c) is c


def test_broad_phase_launch_interfaces():
    model = random_scene(seed=3, n=60, worlds=2)
    state = model.state()
    p = newton.CollisionPipeline(model, broad_phase="explicit")
    c = p.contacts()
    p.collide(state, c)  # computes p._lower/_upper (already expanded by margin + gap)
    lower, upper = p._lower, p._upper
    cap = model.shape_count * model.shape_count
    results = {}
    for name, bp in (("nxn", BroadPhaseAllPairs(model.shape_world, model.shape_flags)),
                     ("sap", BroadPhaseSAP(model.shape_world, model.shape_flags))):  # fmt: skip
        pairs = wp.zeros(cap, dtype=wp.vec2i)
        count = wp.zeros(1, dtype=int)
        bp.launch(shape_lower=lower, shape_upper=upper, shape_gap=None,
                  shape_collision_group=model.shape_collision_group, shape_world=model.shape_world,
                  shape_count=model.shape_count, candidate_pair=pairs, candidate_pair_count=count,
                  device="cpu", filter_pairs=wp.array(model.shape_collision_filter_pairs_array(), dtype=wp.vec2i),
                  shape_body=model.shape_body)  # fmt: skip
        k = count.numpy()[0]
        results[name] = sorted(map(tuple, pairs.numpy()[:k].tolist()))
    ex_pairs = wp.array(model.shape_contact_pairs, dtype=wp.vec2i)
    pairs = wp.zeros(cap, dtype=wp.vec2i)
    count = wp.zeros(1, dtype=int)
    BroadPhaseExplicit().launch(lower, upper, None, ex_pairs, len(model.shape_contact_pairs), pairs, count,
                                shape_body=model.shape_body)  # fmt: skip
    results["explicit"] = sorted(map(tuple, pairs.numpy()[: count.numpy()[0]].tolist()))
    assert results["nxn"] == results["sap"] == results["explicit"]
    assert len(results["nxn"]) > 0
    assert all(a < b for a, b in results["nxn"])

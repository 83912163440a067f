"""geometry.NarrowPhase with mesh geometry from ``shape_source`` (no model), deterministic
ordering, contact reduction and speculative inputs, against CollisionPipeline."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import armillary as newton
from armillary.geometry import BroadPhaseAllPairs, NarrowPhase
from armillary.geometry.narrow_phase import REDUCE_KEEP

from .test_narrow_phase_api import _aabbs, _narrow_inputs, _world_shape_transforms
from .test_soft_contacts_mesh import _grid_mesh


def _scene():
    b = newton.ModelBuilder()
    plate = _grid_mesh(24, 1.0)
    b.add_shape_mesh(-1, mesh=plate)  # 0: fine flat mesh
    hull = newton.Mesh.create_box(0.1, 0.15, 0.1)
    body = b.add_body(xform=wp.transform((0.3, 0.2, 0.098), wp.quat_from_axis_angle(wp.vec3(0, 0, 1), 0.4)))
    b.add_shape_convex_hull(body, mesh=hull)  # 1: convex mesh touching the plate
    body = b.add_body(xform=wp.transform((-0.4, 0.1, 0.148), wp.quat_identity()))
    b.add_shape_box(body, hx=0.2, hy=0.25, hz=0.15)  # 2: box resting on the plate
    body = b.add_body(xform=wp.transform((0.0, -0.5, 0.09), wp.quat_identity()))
    b.add_shape_sphere(body, radius=0.1)  # 3: sphere into the plate
    m = b.finalize(device="cpu")
    # shape_source as in the reference: per shape the id of a wp.Mesh of its geometry
    keep = [wp.Mesh(points=wp.array(src.vertices, dtype=wp.vec3), indices=wp.array(src.indices.reshape(-1),
                                                                                      dtype=wp.int32))
            if src is not None and hasattr(src, "indices") else None for src in m.shape_source]  # fmt: skip
    ids = np.array([k.id if k is not None else 0 for k in keep], np.uint64)
    return m, wp.array(ids, dtype=wp.uint64), keep


def _pairs(model, X):
    lower, upper = _aabbs(model, X)
    cand = wp.zeros(64, dtype=wp.vec2i)
    count = wp.zeros(1, dtype=wp.int32)
    bp = BroadPhaseAllPairs(model.shape_world, model.shape_flags)
    bp.launch(lower, upper, None, model.shape_collision_group, model.shape_world, model.shape_count, cand, count,
              shape_body=model.shape_body)  # fmt: skip
    return cand, count


def _launch(np_, model, X, cand, count, source=None, use_model=False, cap=5000, **kw):
    out = dict(contact_pair=wp.zeros(cap, dtype=wp.vec2i), contact_position=wp.zeros(cap, dtype=wp.vec3),
               contact_normal=wp.zeros(cap, dtype=wp.vec3), contact_penetration=wp.zeros(cap, dtype=float),
               contact_count=wp.zeros(1, dtype=int))  # fmt: skip
    inputs = _narrow_inputs(model, X)
    inputs["shape_source"] = source
    np_.launch(candidate_pair=cand, candidate_pair_count=count, **inputs, **out,
               model=model if use_model else None, **kw)  # fmt: skip
    n = int(out["contact_count"].numpy()[0])
    return (out["contact_pair"].numpy()[:n], out["contact_position"].numpy()[:n], out["contact_normal"].numpy()[:n],
            out["contact_penetration"].numpy()[:n])  # fmt: skip


def test_mesh_shapes_from_shape_source_match_model_buffers():
    model, source, _keep = _scene()
    X = _world_shape_transforms(model, model.state())
    cand, count = _pairs(model, X)
    for reduce in (False, True):
        a = _launch(NarrowPhase(max_candidate_pairs=64, reduce_contacts=reduce, deterministic=True), model, X, cand,
                    count, source=source)  # fmt: skip
        b = _launch(NarrowPhase(max_candidate_pairs=64, reduce_contacts=reduce, deterministic=True), model, X, cand,
                    count, use_model=True)  # fmt: skip
        assert len(a[0]) == len(b[0]) > 0
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
        pairs = [tuple(p) for p in a[0]]
        assert {(0, 1), (0, 2), (0, 3)} <= {tuple(sorted(p)) for p in pairs}
        if reduce:
            for p in set(pairs):
                assert pairs.count(p) <= REDUCE_KEEP
            # deepest contacts: sphere 1 cm into the plate, box and hull 2 mm
            assert a[3].min() == pytest.approx(-0.01, abs=1e-5)
        else:
            assert pairs.count((2, 0)) + pairs.count((0, 2)) > REDUCE_KEEP


def test_mesh_without_source_or_model_is_refused():
    model, _, _keep = _scene()
    X = _world_shape_transforms(model, model.state())
    cand, count = _pairs(model, X)
    with pytest.raises(ValueError, match="shape 0 is a MESH"):
        _launch(NarrowPhase(max_candidate_pairs=64), model, X, cand, count, source=None)


def test_deterministic_narrow_phase_matches_pipeline_order():
    model, source, _keep = _scene()
    state = model.state()
    X = _world_shape_transforms(model, state)
    cand, count = _pairs(model, X)
    runs = [_launch(NarrowPhase(max_candidate_pairs=64, reduce_contacts=False, deterministic=True), model, X, cand,
                    count, source=source) for _ in range(2)]  # fmt: skip
    for x, y in zip(*runs):
        np.testing.assert_array_equal(x, y)
    pipe = newton.CollisionPipeline(model, broad_phase="nxn", deterministic=True, reduce_contacts=False)
    c = pipe.contacts()
    pipe.collide(state, c)
    n = int(c.rigid_contact_count.numpy()[0])
    got = runs[0][0]
    assert len(got) == n
    # same (shape_a, shape_b) sequence as the pipeline's sorted contacts
    np.testing.assert_array_equal(got[:, 0], c.rigid_contact_shape0.numpy()[:n])
    np.testing.assert_array_equal(got[:, 1], c.rigid_contact_shape1.numpy()[:n])
    np.testing.assert_allclose(runs[0][2], c.rigid_contact_normal.numpy()[:n], atol=1e-6)


def test_speculative_inputs():
    """A sphere 5 cm above the plate approaching at 1 m/s: no contact without speculation, one
    with dt = 0.1 s (v dt = 0.1 m covers the gap), none when moving away or with a small cap."""
    b = newton.ModelBuilder()
    cfg = b.ShapeConfig(gap=0.005, margin=0.0)
    b.add_shape_mesh(-1, mesh=_grid_mesh(4, 1.0), cfg=cfg)
    body = b.add_body(xform=wp.transform((0.1, 0.1, 0.15), wp.quat_identity()))
    b.add_shape_sphere(body, radius=0.1, cfg=cfg)
    m = b.finalize(device="cpu")
    src = m.shape_source[0]
    mesh = wp.Mesh(points=wp.array(src.vertices, dtype=wp.vec3), indices=wp.array(src.indices.reshape(-1),
                                                                                     dtype=wp.int32))  # fmt: skip
    source = wp.array(np.array([mesh.id, 0], np.uint64), dtype=wp.uint64)
    X = _world_shape_transforms(m, m.state())
    cand = wp.array([wp.vec2i(0, 1)], dtype=wp.vec2i)
    count = wp.array([1], dtype=wp.int32)
    npz = NarrowPhase(max_candidate_pairs=4)

    def run(vz, **kw):
        lin = wp.array(np.array([[0, 0, 0], [0, 0, vz]], np.float32), dtype=wp.vec3)
        return _launch(npz, m, X, cand, count, source=source, shape_linear_velocity=lin, **kw)

    assert len(run(-1.0)[0]) == 0
    got = run(-1.0, collision_update_dt=0.1, max_speculative_extension=0.5)
    assert len(got[0]) == 1 and got[3][0] == pytest.approx(0.05, abs=1e-5)
    assert len(run(1.0, collision_update_dt=0.1, max_speculative_extension=0.5)[0]) == 0
    assert len(run(-1.0, collision_update_dt=0.1, max_speculative_extension=0.02)[0]) == 0
    with pytest.raises(ValueError, match="collision_update_dt"):
        run(-1.0, collision_update_dt=-1.0)

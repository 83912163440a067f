"""Public :class:`armillary.geometry.NarrowPhase`: broad phase -> NarrowPhase.launch agrees with
CollisionPipeline, and custom contact writers."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import armillary as newton
from armillary.geometry import BroadPhaseSAP, ContactData, NarrowPhase


def _scene():
    b = newton.ModelBuilder()
    b.add_ground_plane()
    cfg = b.ShapeConfig(gap=0.01, margin=0.002)
    body = b.add_body(xform=wp.transform((0.0, 0.0, 0.19), wp.quat_identity()))
    b.add_shape_sphere(body, radius=0.2, cfg=cfg)
    body = b.add_body(xform=wp.transform((0.3, 0.0, 0.18), wp.quat_rpy(0.1, 0.2, 0.3)))
    b.add_shape_box(body, hx=0.15, hy=0.1, hz=0.12, cfg=cfg)
    body = b.add_body(xform=wp.transform((-0.3, 0.05, 0.12), wp.quat_rpy(1.5, 0.0, 0.2)))
    b.add_shape_capsule(body, radius=0.1, half_height=0.2, cfg=cfg)
    body = b.add_body(xform=wp.transform((0.1, 0.35, 0.2), wp.quat_rpy(0.3, 0.0, 0.0)))
    b.add_shape_cylinder(body, radius=0.12, half_height=0.15, cfg=cfg)
    body = b.add_body(xform=wp.transform((0.35, 0.3, 0.3), wp.quat_identity()))
    b.add_shape_ellipsoid(body, rx=0.15, ry=0.1, rz=0.08, cfg=cfg)
    body = b.add_body(xform=wp.transform((3.0, 3.0, 1.0), wp.quat_identity()))
    b.add_shape_sphere(body, radius=0.1, cfg=cfg)  # touches nothing
    return b.finalize(device="cpu")


def _world_shape_transforms(model, state):
    bq = state.body_q.numpy()
    out = []
    for s, (body, X) in enumerate(zip(model.shape_body.numpy(), model.shape_transform.numpy())):
        Xs = wp.transform(wp.vec3(*X[:3]), wp.quat(*X[3:]))
        if body >= 0:
            Xb = wp.transform(wp.vec3(*bq[body][:3]), wp.quat(*bq[body][3:]))
            Xs = wp.transform_multiply(Xb, Xs)
        out.append(Xs)
    return wp.array(out, dtype=wp.transform, device=model.device)


def _aabbs(model, X):
    types = model.shape_type.numpy()
    rad = model.shape_collision_radius.numpy()
    pad = model.shape_gap.numpy() + model.shape_margin.numpy()
    c = X.numpy()[:, :3]
    r = np.where(types == int(newton.GeoType.PLANE), 1.0e6, rad) + pad
    lo = (c - r[:, None]).astype(np.float32)
    hi = (c + r[:, None]).astype(np.float32)
    return wp.array(lo, dtype=wp.vec3, device=model.device), wp.array(hi, dtype=wp.vec3, device=model.device)


def _narrow_inputs(model, X):
    scale = model.shape_scale.numpy()
    margin = model.shape_margin.numpy()
    shape_data = wp.array(np.concatenate([scale, margin[:, None]], axis=1).astype(np.float32), dtype=wp.vec4,
                          device=model.device)  # fmt: skip
    return dict(shape_types=model.shape_type, shape_data=shape_data, shape_transform=X,
                shape_source=wp.zeros(model.shape_count, dtype=wp.uint64, device=model.device),
                shape_gap=model.shape_gap, shape_collision_radius=model.shape_collision_radius,
                shape_flags=model.shape_flags,
                shape_voxel_resolution=wp.zeros(model.shape_count, dtype=wp.vec3i, device=model.device))  # fmt: skip


def _broad_phase(model, X, device):
    lower, upper = _aabbs(model, X)
    candidate_pairs = wp.zeros(1000, dtype=wp.vec2i, device=device)
    pair_count = wp.zeros(1, dtype=wp.int32, device=device)
    bp = BroadPhaseSAP(model.shape_world, model.shape_flags, device=device)
    bp.launch(shape_lower=lower, shape_upper=upper, shape_gap=None, shape_collision_group=model.shape_collision_group,
              shape_world=model.shape_world, shape_count=model.shape_count, candidate_pair=candidate_pairs,
              candidate_pair_count=pair_count, device=device, shape_body=model.shape_body)  # fmt: skip
    return candidate_pairs, pair_count


def _pipeline_contacts(model, state):
    p = newton.CollisionPipeline(model, broad_phase="sap")
    c = p.contacts()
    p.collide(state, c)
    n = int(c.rigid_contact_count.numpy()[0])
    bq = state.body_q.numpy()
    sb = model.shape_body.numpy()
    rows = []
    for i in range(n):
        s0, s1 = int(c.rigid_contact_shape0.numpy()[i]), int(c.rigid_contact_shape1.numpy()[i])
        pts = []
        for s, p_, o in ((s0, c.rigid_contact_point0, c.rigid_contact_offset0),
                         (s1, c.rigid_contact_point1, c.rigid_contact_offset1)):  # fmt: skip
            local = wp.vec3(*(p_.numpy()[i] + o.numpy()[i]))
            b = sb[s]
            if b >= 0:
                Xb = wp.transform(wp.vec3(*bq[b][:3]), wp.quat(*bq[b][3:]))
                local = wp.transform_point(Xb, local)
            pts.append(np.array(local))
        nrm = c.rigid_contact_normal.numpy()[i]
        rows.append((s0, s1, 0.5 * (pts[0] + pts[1]), nrm, float(np.dot(nrm, pts[1] - pts[0]))))
    return rows


def _canon(rows):
    return sorted(rows, key=lambda r: (r[0], r[1], *np.round(r[2], 4).tolist()))


def test_broad_phase_then_narrow_phase_matches_pipeline():
    model = _scene()
    device = model.device
    state = model.state()
    X = _world_shape_transforms(model, state)
    candidate_pairs, pair_count = _broad_phase(model, X, device)

    narrow_phase = NarrowPhase(max_candidate_pairs=1000, reduce_contacts=True, device=device)
    cap = 200
    out_pairs = wp.zeros(cap, dtype=wp.vec2i, device=device)
    out_positions = wp.zeros(cap, dtype=wp.vec3, device=device)
    out_normals = wp.zeros(cap, dtype=wp.vec3, device=device)
    out_depths = wp.zeros(cap, dtype=float, device=device)
    out_count = wp.zeros(1, dtype=int, device=device)
    narrow_phase.launch(candidate_pair=candidate_pairs, candidate_pair_count=pair_count,
                        **_narrow_inputs(model, X), contact_pair=out_pairs, contact_position=out_positions,
                        contact_normal=out_normals, contact_penetration=out_depths, contact_count=out_count,
                        device=device)  # fmt: skip
    n = int(out_count.numpy()[0])
    got = [(int(p[0]), int(p[1]), pos, nrm, float(d)) for p, pos, nrm, d in
           zip(out_pairs.numpy()[:n], out_positions.numpy()[:n], out_normals.numpy()[:n], out_depths.numpy()[:n])]
    ref = _pipeline_contacts(model, state)
    assert n == len(ref) and n >= 5
    pairs = {(r[0], r[1]) for r in ref}
    assert len(pairs) >= 4  # ground and body-body contacts of several kinds
    assert any(r[4] < 0.0 for r in ref)
    for g, r in zip(_canon(got), _canon(ref)):
        assert g[:2] == r[:2]
        np.testing.assert_allclose(g[2], r[2], atol=1e-4)
        np.testing.assert_allclose(g[3], r[3], atol=1e-4)
        assert abs(g[4] - r[4]) < 1e-4

    # a second launch overwrites (count is set, not accumulated); a too-small output is capped
    narrow_phase.launch(candidate_pair=candidate_pairs, candidate_pair_count=pair_count,
                        **_narrow_inputs(model, X), contact_pair=out_pairs[:2], contact_position=out_positions[:2],
                        contact_normal=out_normals[:2], contact_penetration=out_depths[:2], contact_count=out_count,
                        device=device)  # fmt: skip
    assert int(out_count.numpy()[0]) == 2


@wp.struct
class DepthWriterData:
    depths: wp.array(dtype=float)
    shape_a: wp.array(dtype=int)
    count: wp.array(dtype=int)


@wp.func
def write_depth_only(contact: ContactData, data: DepthWriterData, output_index: int):
    if contact.contact_distance < 0.0:
        k = wp.atomic_add(data.count, 0, 1)
        if k < data.depths.shape[0]:
            data.depths[k] = -contact.contact_distance
            data.shape_a[k] = contact.shape_a


def test_custom_contact_writer():
    model = _scene()
    device = model.device
    state = model.state()
    X = _world_shape_transforms(model, state)
    candidate_pairs, pair_count = _broad_phase(model, X, device)
    narrow_phase = NarrowPhase(max_candidate_pairs=1000, device=device, contact_writer_warp_func=write_depth_only)
    data = DepthWriterData()
    data.depths = wp.zeros(100, dtype=float, device=device)
    data.shape_a = wp.zeros(100, dtype=int, device=device)
    data.count = wp.zeros(1, dtype=int, device=device)
    narrow_phase.launch_custom_write(candidate_pair=candidate_pairs, candidate_pair_count=pair_count,
                                     **_narrow_inputs(model, X), writer_data=data, device=device)  # fmt: skip
    n = int(data.count.numpy()[0])
    ref = [r for r in _pipeline_contacts(model, state) if r[4] < 0.0]
    assert n == len(ref) > 0
    np.testing.assert_allclose(np.sort(data.depths.numpy()[:n]), np.sort([-r[4] for r in ref]), atol=1e-4)
    assert sorted(data.shape_a.numpy()[:n].tolist()) == sorted(r[0] for r in ref)

    # the plain launch still works on a narrow phase built with a custom writer
    out_count = wp.zeros(1, dtype=int, device=device)
    narrow_phase.launch(candidate_pair=candidate_pairs, candidate_pair_count=pair_count, **_narrow_inputs(model, X),
                        contact_pair=wp.zeros(50, dtype=wp.vec2i, device=device),
                        contact_position=wp.zeros(50, dtype=wp.vec3, device=device),
                        contact_normal=wp.zeros(50, dtype=wp.vec3, device=device),
                        contact_penetration=wp.zeros(50, dtype=float, device=device), contact_count=out_count,
                        device=device)  # fmt: skip
    assert int(out_count.numpy()[0]) == len(_pipeline_contacts(model, state))

    # launch_custom_write without a writer function is refused
    with pytest.raises(ValueError, match="contact_writer_warp_func"):
        NarrowPhase(max_candidate_pairs=10, device=device).launch_custom_write(
            candidate_pair=candidate_pairs, candidate_pair_count=pair_count, **_narrow_inputs(model, X),
            writer_data=data, device=device)  # fmt: skip


def test_unsupported_options_refuse():
    with pytest.raises(NotImplementedError):
        NarrowPhase(max_candidate_pairs=10, hydroelastic_sdf=object())


def test_unsupported_pairs_are_counted_not_silently_dropped():
    import numpy as np
    import warp as wp

    import armillary as newton
    from armillary.geometry import NarrowPhase

    types = wp.array(np.array([int(newton.GeoType.PLANE), int(newton.GeoType.PLANE), int(newton.GeoType.SPHERE)],
                              dtype=np.int32), dtype=int)
    data = wp.array(np.array([[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.5, 0.0, 0.0, 0.0]], dtype=np.float32),
                    dtype=wp.vec4)
    xf = wp.array([wp.transform_identity(), wp.transform_identity(),
                   wp.transform(wp.vec3(0.0, 0.0, 0.4), wp.quat_identity())], dtype=wp.transform)
    gap = wp.zeros(3, dtype=float)
    pairs = wp.array([wp.vec2i(0, 1), wp.vec2i(0, 2)], dtype=wp.vec2i)
    count = wp.array([2], dtype=int)
    np_ = NarrowPhase(max_candidate_pairs=4)
    out_pair = wp.zeros(8, dtype=wp.vec2i)
    out_pos = wp.zeros(8, dtype=wp.vec3)
    out_n = wp.zeros(8, dtype=wp.vec3)
    out_d = wp.zeros(8, dtype=float)
    out_c = wp.zeros(1, dtype=int)
    np_.launch(candidate_pair=pairs, candidate_pair_count=count, shape_types=types, shape_data=data,
               shape_transform=xf, shape_gap=gap, contact_pair=out_pair, contact_position=out_pos,
               contact_normal=out_n, contact_penetration=out_d, contact_count=out_c)
    assert np_.skipped_pair_count.numpy()[0] == 1  # the plane-plane pair
    assert out_c.numpy()[0] >= 1  # the sphere resting 0.1 m into the plane

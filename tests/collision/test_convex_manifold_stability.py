"""General convex manifolds (convex hulls, cylinders; :func:`armillary.geometry.convex.select4`) keep their
points on a face resting flat (issue 24, stacking): micro-tilts must not change which points are chosen,
the deepest emitted contact keeps the exact depth, and a stack of convex-hull boxes stands still.

Before the fix the exact GJK/MPR contact (a vertex or a cylinder rim point that micro-tilts move around
the face) was always the first point and the others were spread from it: the chosen 4 of a yawed
hull-on-hull octagon or of a cylinder cap changed with every tilt, and a 5-box hull tower of alternating
yaw rocked at 0.2 rad/s with its contact set changing on 94 % of the steps."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import armillary
from armillary import ModelBuilder

H = 0.1  # hull box half extent [m]
R, HH = 0.08, 0.1  # cylinder radius, half height [m]
TILT = 1.0e-4  # [rad]
AXES = (0.0, 0.7, 1.9, 3.3, 4.4, 5.6)  # tilt axis directions in the horizontal plane [rad]


def _quat_apply(q, v):
    x, w = np.asarray(q[:3], np.float64), float(q[3])
    t = 2.0 * np.cross(x, v)
    return v + w * t + np.cross(x, t)


def _yaw(a):
    return wp.quat_from_axis_angle(wp.vec3(0.0, 0.0, 1.0), float(a))


def _resting_scene():
    """Resting pairs 1 m apart in x, the lower shape static, the upper one a body touching it (1e-5 m deep).
    Returns (builder, [(name, upper shape, lower shape, manifold radius [m] or None)])."""
    b = ModelBuilder()
    hull = armillary.Mesh.create_box(H, H, H)
    pairs = []

    def top(x, z, yaw, kind, below, name):
        body = b.add_body(xform=wp.transform(wp.vec3(x, 0.0, z - 1.0e-5), _yaw(yaw)))
        if kind == "hull":
            s = b.add_shape_convex_hull(body, mesh=hull)
        else:
            s = b.add_shape_cylinder(body, radius=R, half_height=HH)
        pairs.append((name, s, below))

    plane = b.add_ground_plane()
    x = 0.0
    # hull box on a hull box yawed by 0.3 rad: an octagon of 8 clipped points, 4 kept
    below = b.add_shape_convex_hull(-1, xform=wp.transform(wp.vec3(x, 0.0, H), wp.quat_identity()), mesh=hull)
    top(x, 3.0 * H, 0.3, "hull", below, "hull on hull")
    x += 1.0
    below = b.add_shape_box(-1, xform=wp.transform(wp.vec3(x, 0.0, H), _yaw(0.2)), hx=H, hy=H, hz=H)
    top(x, 3.0 * H, -0.25, "hull", below, "hull on box")
    x += 1.0
    top(x, H, 0.4, "hull", plane, "hull on plane")
    x += 1.0
    below = b.add_shape_convex_hull(-1, xform=wp.transform(wp.vec3(x, 0.0, H), _yaw(0.1)), mesh=hull)
    top(x, 2.0 * H + HH, 0.35, "cylinder", below, "cylinder on hull")
    x += 1.0
    below = b.add_shape_box(-1, xform=wp.transform(wp.vec3(x, 0.0, H), _yaw(-0.3)), hx=H, hy=H, hz=H)
    top(x, 2.0 * H + HH, 0.2, "cylinder", below, "cylinder on box")
    x += 1.0
    top(x, HH, 0.6, "cylinder", plane, "cylinder on plane")
    return b, pairs


def _chosen_points(model, pipeline, contacts, state, pairs):
    """Per pair: contact points on the upper shape in its body frame (k x 3) and the smallest distance [m]."""
    pipeline.collide(state, contacts)
    n = int(contacts.rigid_contact_count.numpy()[0])
    s0 = contacts.rigid_contact_shape0.numpy()[:n]
    s1 = contacts.rigid_contact_shape1.numpy()[:n]
    p0 = contacts.rigid_contact_point0.numpy()[:n].astype(np.float64)
    p1 = contacts.rigid_contact_point1.numpy()[:n].astype(np.float64)
    nrm = contacts.rigid_contact_normal.numpy()[:n].astype(np.float64)
    m0 = contacts.rigid_contact_margin0.numpy()[:n].astype(np.float64)
    m1 = contacts.rigid_contact_margin1.numpy()[:n].astype(np.float64)
    shape_body = model.shape_body.numpy()
    bq = state.body_q.numpy().astype(np.float64)

    def world(p, s):
        bb = shape_body[s]
        return p if bb < 0 else bq[bb, :3] + _quat_apply(bq[bb, 3:], p)

    out = {}
    for name, upper, lower in pairs:
        pts, dmin = [], np.inf
        for k in range(n):
            if {int(s0[k]), int(s1[k])} != {upper, lower}:
                continue
            d = float(nrm[k] @ (world(p1[k], s1[k]) - world(p0[k], s0[k]))) - m0[k] - m1[k]
            dmin = min(dmin, d)
            pts.append(p0[k] if s0[k] == upper else p1[k])
        out[name] = (np.array(pts), dmin)
    return out


def _same_set(a, b, tol=1.0e-3):
    if len(a) != len(b):
        return False
    return bool(np.linalg.norm(a[:, None, :] - b[None, :, :], axis=2).min(axis=1).max() <= tol)


def test_micro_tilts_keep_the_chosen_points():
    """Each upper shape tilted by +-1e-4 rad about 6 horizontal axes (12 poses): every pair keeps the same 4
    points (body frame, within 1 mm), the yawed hull-on-hull octagon its 4 widest; the deepest emitted contact stays within 1e-4 x the manifold radius
    (+ float32 noise) of the exact distance (plane pairs, analytic)."""
    b, pairs = _resting_scene()
    model = b.finalize(device="cpu")
    pipeline = armillary.CollisionPipeline(model)
    contacts = pipeline.contacts()
    state = model.state()
    q_rest = model.body_q.numpy().copy()
    reference = None
    for a in AXES:
        for sign in (1.0, -1.0):
            tilt = wp.quat_from_axis_angle(wp.vec3(float(np.cos(a)), float(np.sin(a)), 0.0), sign * TILT)
            q = q_rest.copy()
            for i in range(len(q)):
                q[i, 3:] = np.array(wp.mul(tilt, wp.quat(*q_rest[i, 3:].tolist())))
            state.body_q.assign(q)
            got = _chosen_points(model, pipeline, contacts, state, pairs)
            for name, (pts, _) in got.items():
                assert len(pts) == 4, (name, a, sign, pts)
            # the hull-on-hull octagon (relative yaw 0.3 rad) keeps its 4 widest points, as the box-box reduction
            # does: the edge x = H of the lower square meets the upper square's edges at y = H (1 - c) / s
            # (narrow, 0.101 m from the centre) and y = -H (1 - s) / c (wide, 0.124 m); the other edges alike
            c, s = np.cos(0.3), np.sin(0.3)
            r = np.linalg.norm(got["hull on hull"][0][:, :2], axis=1)
            assert np.allclose(r, H * np.hypot(1.0, (1.0 - s) / c), atol=2.0e-3), (a, sign, r)
            if reference is None:
                reference = got
            for name in got:
                assert _same_set(got[name][0], reference[name][0]), (name, a, sign, got[name][0], reference[name][0])
            # exact distances of the plane pairs at this pose
            for i, (name, upper, _lower) in enumerate(pairs):
                if "plane" not in name:
                    continue
                body = int(model.shape_body.numpy()[upper])
                pos, rot = q[body, :3].astype(np.float64), q[body, 3:].astype(np.float64)
                if name.startswith("hull"):
                    corners = np.array([[sx, sy, sz] for sx in (-H, H) for sy in (-H, H) for sz in (-H, H)])
                    exact, radius = min(pos[2] + _quat_apply(rot, c)[2] for c in corners), H * np.sqrt(2.0)
                else:
                    axis = _quat_apply(rot, np.array([0.0, 0.0, 1.0]))
                    exact = pos[2] - HH * abs(axis[2]) - R * np.sqrt(max(0.0, 1.0 - axis[2] ** 2))
                    radius = R
                dmin = got[name][1]
                assert exact - 1.0e-6 <= dmin <= exact + 1.0e-4 * radius + 2.0e-6, (name, a, sign, dmin, exact)


@pytest.mark.parametrize("seed", [0])
def test_hull_box_tower_stands_still(seed):
    """A 4-box tower of convex-hull boxes (alternating yaw 0 / 0.3 rad, seeded jitter of +-3 mm and +-0.05 rad),
    SolverXPBD(iterations=10) at 600 Hz for 1.5 s: over the last 0.5 s the contact set never changes and no box
    turns faster than 2e-3 rad/s. Measured: no change, <= 5e-4 rad/s (before the fix: the set changed on
    94 % of the steps of a 5-box tower and the boxes rocked at 0.2 rad/s)."""
    rng = np.random.default_rng(seed)
    b = ModelBuilder()
    hull = armillary.Mesh.create_box(H, H, H)
    for i in range(4):
        x, y = rng.uniform(-0.003, 0.003, 2)
        yaw = (0.3 if i % 2 else 0.0) + rng.uniform(-0.05, 0.05)
        body = b.add_body(xform=wp.transform(wp.vec3(x, y, H + 2.0 * H * i), _yaw(yaw)))
        b.add_shape_convex_hull(body, mesh=hull, cfg=ModelBuilder.ShapeConfig(density=1000.0, mu=0.5))
    b.add_ground_plane()
    model = b.finalize(device="cpu")
    # the plugin's class itself (core tests run in an isolated plugin registry); setup.sh installs it
    SolverXPBD = pytest.importorskip("armillary_solver_xpbd.solver").SolverXPBD
    solver = SolverXPBD(model, iterations=10)
    pipeline = armillary.CollisionPipeline(model, broad_phase="sap")
    contacts = pipeline.contacts()
    s0, s1 = model.state(), model.state()
    pairs = [("ground", 0, 4)] + [(f"{i}-{i + 1}", i + 1, i) for i in range(3)]
    steps, tail = 900, 300
    previous, changes, w_max = None, 0, 0.0
    for k in range(steps):
        s0.clear_forces()
        if k >= steps - tail:
            got = _chosen_points(model, pipeline, contacts, s0, pairs)
            if previous is not None and any(not _same_set(got[p][0], previous[p][0]) for p in got):
                changes += 1
            previous = got
        else:
            pipeline.collide(s0, contacts)
        solver.step(s0, s1, None, contacts, 1.0 / 600.0)
        s0, s1 = s1, s0
        if k >= steps - tail:
            w_max = max(w_max, float(np.linalg.norm(s0.body_qd.numpy()[:, 3:], axis=1).max()))
    assert all(len(previous[p][0]) == 4 for p in previous), previous
    assert changes == 0, changes
    assert w_max < 2.0e-3, w_max
    q = s0.body_q.numpy()
    assert np.abs(q[:, 2] - (H + 2.0 * H * np.arange(4))).max() < 2.0e-3

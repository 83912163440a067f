"""A mesh cube against a box primitive gives the same contact set as the box-box routine: same
points (on both shapes, world frame), same normals and same distances, within tolerance."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import armillary as newton


def _contacts(mesh: bool, pos, rot):
    b = newton.ModelBuilder()
    # a 2 mm gap per shape: with the builder's default (0.1 m per shape) every feature of the small
    # box within 0.2 m of the big one is a (speculative) contact of the mesh route, far from the
    # closest features that box-box reports
    b.default_shape_cfg.gap = 0.002
    b.add_shape_box(-1, hx=0.5, hy=0.5, hz=0.5)
    body = b.add_body(xform=wp.transform(pos, rot))
    if mesh:
        b.add_shape_mesh(body, mesh=newton.Mesh.create_box(0.1, 0.1, 0.1))
    else:
        b.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1)
    m = b.finalize(device="cpu")
    st = m.state()
    p = newton.CollisionPipeline(m)
    c = p.contacts()
    p.collide(st, c)
    n = int(c.rigid_contact_count.numpy()[0])
    X = st.body_q.numpy()[0]
    Xw = wp.transform(wp.vec3(*X[:3]), wp.quat(*X[3:]))
    out = []
    for i in range(n):
        s0, s1 = int(c.rigid_contact_shape0.numpy()[i]), int(c.rigid_contact_shape1.numpy()[i])
        pts = []
        for s, q in ((s0, c.rigid_contact_point0.numpy()[i]), (s1, c.rigid_contact_point1.numpy()[i])):
            pts.append(np.array(wp.transform_point(Xw, wp.vec3(*q))) if s == 1 else np.asarray(q))
        nrm = c.rigid_contact_normal.numpy()[i]
        if s0 == 1:  # orient every contact from the static box (shape 0) to the body's shape
            pts.reverse()
            nrm = -nrm
        out.append((pts[0], pts[1], nrm, float(np.dot(nrm, pts[1] - pts[0]))))
    return out


POSES = [
    ((0.05, -0.03, 0.599), wp.quat_from_axis_angle(wp.vec3(0.0, 0.0, 1.0), 0.3)),  # resting face down, 1 mm deep
    ((0.0, 0.0, 0.601), wp.quat_identity()),  # 1 mm above (inside the gap)
    ((0.45, 0.1, 0.598), wp.quat_from_axis_angle(wp.vec3(0.0, 0.0, 1.0), 0.7)),  # over the box's edge
    ((0.0, 0.0, 0.6315), wp.quat_from_axis_angle(wp.normalize(wp.vec3(1.0, 1.0, 0.0)), 0.6)),  # tilted: edge down
]


def _hull_area(points, n):
    """Area of the convex hull of ``points`` projected on the plane normal to ``n``."""
    u = np.cross(n, [1.0, 0.0, 0.0] if abs(n[0]) < 0.9 else [0.0, 1.0, 0.0])
    u /= np.linalg.norm(u)
    v = np.cross(n, u)
    q = sorted({(round(float(p @ u), 6), round(float(p @ v), 6)) for p in points})
    if len(q) < 3:
        return 0.0

    def half(pts):
        h = []
        for p in pts:
            while len(h) >= 2 and (h[-1][0] - h[-2][0]) * (p[1] - h[-2][1]) - (h[-1][1] - h[-2][1]) * (p[0] - h[-2][0]) <= 0:
                h.pop()
            h.append(p)
        return h

    hull = half(q)[:-1] + half(q[::-1])[:-1]
    return 0.5 * abs(sum(a[0] * b[1] - b[0] * a[1] for a, b in zip(hull, hull[1:] + hull[:1])))


def _on_box(p, X, h, tol=2e-4):
    """Whether world point p lies on the surface of the box (frame X, half extents h)."""
    lp = np.array(wp.transform_point(wp.transform_inverse(X), wp.vec3(*p)))
    return np.all(np.abs(lp) <= np.asarray(h) + tol) and np.any(np.abs(np.abs(lp) - h) <= tol)


@pytest.mark.parametrize("pose", range(len(POSES)))
def test_mesh_cube_matches_box_box(pose):
    """Same closest distance, same normal, the same support region (hull area within 10 %), and
    every mesh contact a valid contact (its points on the two boxes' surfaces, the distance
    between them along the normal); the two routes may keep different representative points of
    the same contact polygon (box-box keeps the largest quad, the mesh reduction the deepest and
    the extremal points along 6 directions), and neither emits duplicates."""
    pos, rot = POSES[pose]
    ref = _contacts(False, pos, rot)
    got = _contacts(True, pos, rot)
    assert ref and got
    assert min(g[3] for g in got) == pytest.approx(min(r[3] for r in ref), abs=2e-5)
    n_ref = ref[0][2]
    for ga, gb, gn, gd in got:
        assert np.dot(gn, n_ref) > 1.0 - 1e-4, (pose, gn, n_ref)
        assert _on_box(ga, wp.transform_identity(), (0.5, 0.5, 0.5)), (pose, ga)
        assert _on_box(gb, wp.transform(pos, rot), (0.1, 0.1, 0.1)), (pose, gb)
        assert abs(float(np.dot(gn, gb - ga)) - gd) < 1e-6
    a_ref = _hull_area([r[0] for r in ref], n_ref)
    a_got = _hull_area([g[0] for g in got], n_ref)
    assert a_got == pytest.approx(a_ref, rel=0.1, abs=1e-6), (pose, a_got, a_ref)
    pts = np.round(np.array([np.concatenate([g[0], g[1]]) for g in got]), 6)
    assert len(np.unique(pts, axis=0)) == len(pts), "duplicate contacts"

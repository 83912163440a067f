"""Triangle-mesh (BVH) and heightfield narrow phase against analytic references.

* A box-shaped triangle mesh must collide like the BOX primitive of the same size: for
  random poses of every convex type above / beside the box (centers outside it), the
  deepest signed distance and normal agree within MESH_D_TOL / MESH_N_DOT.
* Flat and sloped (planar) heightfields must collide like the equivalent infinite plane.
* Back-face culling: a shape behind a single CCW triangle gets no contact; in front it does.

Stated tolerances: MESH_D_TOL = 2e-4 m on the deepest distance (GJK/MPR on triangles vs
analytic box routines), MESH_N_DOT = 0.999 where |d| > 1e-3; HF_D_TOL = 2e-4 m.
"""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import armillary as newton

from . import oracle

MESH_D_TOL = 2.0e-4
MESH_N_DOT = 0.999
HF_D_TOL = 2.0e-4
GAP = 0.05
N = 150
KINDS = ["sphere", "capsule", "box", "cylinder", "ellipsoid", "cone"]
BOX_H = (0.5, 0.4, 0.3)


def _add(builder, kind, body, s, cfg):
    if kind == "sphere":
        builder.add_shape_sphere(body, radius=float(s[0]), cfg=cfg)
    elif kind == "capsule":
        builder.add_shape_capsule(body, radius=float(s[0]), half_height=float(s[1]), cfg=cfg)
    elif kind == "box":
        builder.add_shape_box(body, hx=float(s[0]), hy=float(s[1]), hz=float(s[2]), cfg=cfg)
    elif kind == "cylinder":
        builder.add_shape_cylinder(body, radius=float(s[0]), half_height=float(s[1]), cfg=cfg)
    elif kind == "ellipsoid":
        builder.add_shape_ellipsoid(body, rx=float(s[0]), ry=float(s[1]), rz=float(s[2]), cfg=cfg)
    elif kind == "cone":
        builder.add_shape_cone(body, radius=float(s[0]), half_height=float(s[1]), cfg=cfg)


def _min_per_world(res, n):
    d = np.full(n, np.inf)
    nr = np.full((n, 3), np.nan)
    for k in range(res["count"]):
        w = res["world"][k]
        if res["d"][k] < d[w]:
            d[w], nr[w] = res["d"][k], res["normal"][k]
    return d, nr


def _scene(kind, statics, sizes, poses, quats):
    """One world per pose: the static shape(s) from ``statics(builder, cfg)`` plus ``kind`` on a body."""
    b = newton.ModelBuilder()
    cfg = b.ShapeConfig(gap=GAP, margin=0.0, density=100.0)
    for i in range(len(sizes)):
        b.begin_world()
        statics(b, cfg)
        _add(b, kind, b.add_body(), sizes[i], cfg)
        b.end_world()
    m = b.finalize(device="cpu")
    st = m.state()
    st.body_q.assign(np.concatenate([poses, oracle.xyzw(quats)], 1).astype(np.float32))
    return m, st


def _sizes(rng, kind, n):
    s = rng.uniform(0.08, 0.3, (n, 3))
    if kind in ("capsule", "cylinder", "cone"):
        s[:, 2] = 0.0
    return s


@pytest.mark.parametrize("kind", KINDS)
def test_box_mesh_matches_box(kind):
    rng = np.random.default_rng(7 + KINDS.index(kind))
    sizes = _sizes(rng, kind, N)
    quats = oracle.random_quat(rng, N)
    # centers outside the box, near one of its faces / edges / corners
    h = np.asarray(BOX_H)
    dirs = rng.normal(size=(N, 3))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    surf = np.clip(dirs * 2.0, -h, h)
    out = surf + dirs * rng.uniform(0.02, 0.4, N)[:, None]
    mesh = newton.Mesh.create_box(*BOX_H)
    m1, s1 = _scene(kind, lambda b, cfg: b.add_shape_mesh(-1, mesh=mesh, cfg=cfg), sizes, out, quats)
    m2, s2 = _scene(kind, lambda b, cfg: b.add_shape_box(-1, hx=BOX_H[0], hy=BOX_H[1], hz=BOX_H[2], cfg=cfg),
                    sizes, out, quats)  # fmt: skip
    r1 = oracle.armillary_contacts(m1, s1)
    r2 = oracle.armillary_contacts(m2, s2)
    d1, n1 = _min_per_world(r1, N)
    d2, n2 = _min_per_world(r2, N)
    # normals are stored from shape 0 to shape 1; the mesh (type MESH) sorts after most primitives
    # the static shape of world k is shape 2 k
    sign1 = np.where(r1["shape0"] % 2 == 0, 1.0, -1.0) if r1["count"] else np.zeros(0)
    sign2 = np.where(r2["shape0"] % 2 == 0, 1.0, -1.0) if r2["count"] else np.zeros(0)
    both = np.isfinite(d1) & np.isfinite(d2)
    shallow = both & (d2 > -0.02)
    assert shallow.sum() > N // 4
    # deep penetration (beyond 0.02 m) is resolved per triangle and may differ from the solid box
    assert not np.any(np.isfinite(d2) & ~np.isfinite(d1) & (d2 < 2 * GAP - 1e-3) & (d2 > -0.02)), \
        f"{kind}: mesh missed contacts"
    assert not np.any(np.isfinite(d1) & ~np.isfinite(d2) & (d1 < 2 * GAP - 1e-3)), f"{kind}: spurious mesh contacts"
    err = np.abs(d1[shallow] - d2[shallow])
    assert err.max() <= MESH_D_TOL, f"{kind}: mesh vs box distance error {err.max():.2e}"
    # compare normals oriented box -> shape
    o1 = {int(r1["world"][k]): sign1[k] for k in range(r1["count"])}
    o2 = {int(r2["world"][k]): sign2[k] for k in range(r2["count"])}
    well = [w for w in np.nonzero(shallow & (np.abs(d2) > 1e-3))[0]]
    dots = [float(np.dot(n1[w] * o1[w], n2[w] * o2[w])) for w in well]
    assert min(dots) >= MESH_N_DOT, f"{kind}: normal mismatch {min(dots):.4f}"


def test_box_mesh_on_plane_and_resting():
    """A resting box mesh on a plane gives the box primitive's 4 contacts; a box resting on a
    box mesh gives a face manifold."""
    b = newton.ModelBuilder()
    b.add_ground_plane()
    mesh = newton.Mesh.create_box(0.5, 0.5, 0.5)
    mb = b.add_body(xform=wp.transform((0.0, 0.0, 0.5), wp.quat_identity()))
    sm = b.add_shape_mesh(mb, mesh=mesh)
    top = b.add_body(xform=wp.transform((0.1, 0.0, 1.3), wp.quat_identity()))
    sb = b.add_shape_box(top, hx=0.3, hy=0.3, hz=0.3)
    m = b.finalize(device="cpu")
    res = oracle.armillary_contacts(m, m.state())
    pairs = list(zip(res["shape0"].tolist(), res["shape1"].tolist()))
    assert pairs.count((0, sm)) == 4
    assert pairs.count((sb, sm)) >= 3
    assert np.all(np.abs(res["d"]) < 1e-5)


def test_back_face_culling():
    """A sphere in front of a CCW triangle touches it; behind it, no contact."""
    tri = newton.Mesh(np.array([[-1.0, -1.0, 0.0], [1.0, -1.0, 0.0], [0.0, 1.0, 0.0]], np.float32),
                      np.array([0, 1, 2], np.int32), compute_inertia=False)  # fmt: skip
    b = newton.ModelBuilder()
    cfg = b.ShapeConfig(gap=0.05)
    b.add_shape_mesh(-1, mesh=tri, cfg=cfg)
    front = b.add_body(xform=wp.transform((0.0, 0.0, 0.19), wp.quat_identity()))
    b.add_shape_sphere(front, radius=0.2, cfg=cfg)
    m = b.finalize(device="cpu")
    res = oracle.armillary_contacts(m, m.state())
    assert res["count"] == 1 and abs(res["d"][0] + 0.01) < 1e-5
    st = m.state()
    st.body_q.assign(np.array([[0.0, 0.0, -0.19, 0.0, 0.0, 0.0, 1.0]], np.float32))
    assert oracle.armillary_contacts(m, st)["count"] == 0


@pytest.mark.parametrize("slope", [(0.0, 0.0), (0.3, -0.2)], ids=["flat", "sloped"])
def test_heightfield_matches_plane(slope):
    rng = np.random.default_rng(3)
    nrow, ncol, hx, hy, z0 = 9, 11, 2.0, 1.5, 0.25
    ys = np.linspace(-hy, hy, nrow)
    xs = np.linspace(-hx, hx, ncol)
    data = z0 + slope[0] * xs[None, :] + slope[1] * ys[:, None]
    hf = newton.Heightfield(data, nrow, ncol, hx=hx, hy=hy)
    nrm = np.array([-slope[0], -slope[1], 1.0])
    nrm /= np.linalg.norm(nrm)
    # plane through (0, 0, z0) with normal nrm
    plane = (nrm[0], nrm[1], nrm[2], -nrm[2] * z0)
    for kind in ("sphere", "box", "capsule", "cylinder"):
        sizes = _sizes(rng, kind, N)
        quats = oracle.random_quat(rng, N)
        xy = rng.uniform(-0.8, 0.8, (N, 2))
        zsurf = z0 + slope[0] * xy[:, 0] + slope[1] * xy[:, 1]
        poses = np.c_[xy, zsurf + rng.uniform(0.0, 0.5, N)]
        m1, s1 = _scene(kind, lambda b, cfg: b.add_shape_heightfield(heightfield=hf, cfg=cfg), sizes, poses, quats)
        m2, s2 = _scene(kind, lambda b, cfg: b.add_shape_plane(plane, width=0.0, length=0.0, cfg=cfg), sizes, poses,
                        quats)  # fmt: skip
        d1, n1 = _min_per_world(oracle.armillary_contacts(m1, s1), N)
        d2, n2 = _min_per_world(oracle.armillary_contacts(m2, s2), N)
        assert np.array_equal(np.isfinite(d1), np.isfinite(d2)) or np.all(
            np.abs(d2[np.isfinite(d1) != np.isfinite(d2)] - 2 * GAP) < 1e-3), f"{kind}: admission differs"
        both = np.isfinite(d1) & np.isfinite(d2)
        assert both.sum() > N // 5
        assert np.abs(d1[both] - d2[both]).max() <= HF_D_TOL, f"{kind}: heightfield vs plane {np.abs(d1[both] - d2[both]).max():.2e}"
        assert np.einsum("ij,ij->i", n1[both], n2[both]).min() >= 0.999

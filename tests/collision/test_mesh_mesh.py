"""Mesh-mesh, heightfield-mesh and SDF narrow-phase routes (:mod:`armillary.geometry.mesh_mesh`).

* mesh cube resting on a mesh cube (BVH and analytic-box SDF routes, reduction on / off): the
  contacts are the corners of the support polygon, normal +z, depth exact;
* primitive sphere in a bowl mesh (convex route) and a mesh sphere in the bowl (mesh-mesh route):
  contact at the bottom, normal along z, distance exact (pole vertices);
* signed distances of two separated convex meshes against ``mujoco.mj_geomDistance``
  (tolerance MJ_TOL = 1e-3 * size);
* a mesh box on a flat and on a sloped heightfield;
* deterministic mode gives bit-identical arrays; moving a body updates the contacts.
"""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import armillary as newton
from armillary.geometry.sdf import SDF

DEPTH = 0.002
MJ_TOL = 1.0e-3


# ------------------------------------------------------------------------------------ helpers


def _uv_sphere(r, nlat=12, nlon=16, inward=False, lower_half=False):
    """Lat-long sphere (pole vertices on the z axis), CCW outward; ``lower_half``: the open
    bowl z <= 0 (bottom pole up to the equator)."""
    lat_max = nlat // 2 if lower_half else nlat
    verts = [(0.0, 0.0, -r)]
    for i in range(1, lat_max + 1):
        th = np.pi * i / nlat  # from the bottom pole
        for j in range(nlon):
            ph = 2 * np.pi * j / nlon
            verts.append((r * np.sin(th) * np.cos(ph), r * np.sin(th) * np.sin(ph), -r * np.cos(th)))
    faces = []
    for j in range(nlon):
        faces.append((0, 1 + (j + 1) % nlon, 1 + j))
    for i in range(lat_max - 1):
        a0 = 1 + i * nlon
        b0 = 1 + (i + 1) * nlon
        for j in range(nlon):
            j1 = (j + 1) % nlon
            faces.append((a0 + j, a0 + j1, b0 + j1))
            faces.append((a0 + j, b0 + j1, b0 + j))
    if not lower_half:
        # drop the last ring (it coincides with the top pole) and close the top with a fan
        verts = verts[: 1 + (nlat - 1) * nlon] + [(0.0, 0.0, r)]
        top = len(verts) - 1
        faces = [f for f in faces if max(f) < 1 + (nlat - 1) * nlon]
        a0 = 1 + (nlat - 2) * nlon
        for j in range(nlon):
            faces.append((a0 + j, a0 + (j + 1) % nlon, top))
    f = np.asarray(faces, np.int32)
    if inward:
        f = f[:, [0, 2, 1]]
    return np.asarray(verts, np.float32), f.reshape(-1)


def _box_sdf(h, pad=0.2, voxel=0.025):
    h = np.asarray(h, np.float64)
    lo = -h - pad
    dims = np.ceil((2 * h + 2 * pad) / voxel).astype(int) + 1
    zs, ys, xs = (lo[k] + voxel * np.arange(dims[k]) for k in (2, 1, 0))
    Z, Y, X = np.meshgrid(zs, ys, xs, indexing="ij")
    q = np.abs(np.stack([X, Y, Z], -1)) - h
    d = np.linalg.norm(np.maximum(q, 0.0), axis=-1) + np.minimum(q.max(-1), 0.0)
    return SDF(d.astype(np.float32), tuple(dims), lo, voxel, narrow_band_range=(-1.0, 1.0))


def _collide(model, state, **kw):
    cp = newton.CollisionPipeline(model, **kw)
    c = cp.contacts()
    cp.collide(state, c)
    return cp, c


def _read(model, state, c):
    n = int(c.rigid_contact_count.numpy()[0])
    s0 = c.rigid_contact_shape0.numpy()[:n]
    s1 = c.rigid_contact_shape1.numpy()[:n]
    body = model.shape_body.numpy()
    bq = state.body_q.numpy() if model.body_count else np.zeros((1, 7), np.float32)

    def world(b, p):
        out = np.array(p, np.float64)
        for k in range(n):
            if b[k] >= 0:
                q = bq[b[k]]
                out[k] = _rot(q[3:], p[k]) + q[:3]
        return out

    p0 = world(body[s0], c.rigid_contact_point0.numpy()[:n])
    p1 = world(body[s1], c.rigid_contact_point1.numpy()[:n])
    nrm = c.rigid_contact_normal.numpy()[:n].astype(np.float64)
    d = np.einsum("ij,ij->i", nrm, p1 - p0) - c.rigid_contact_margin0.numpy()[:n] - c.rigid_contact_margin1.numpy()[:n]
    return dict(n=n, s0=s0, s1=s1, p0=p0, p1=p1, normal=nrm, d=d)


def _rot(q, v):
    x, y, z, w = (float(t) for t in q)
    u = np.array([x, y, z])
    v = np.asarray(v, np.float64)
    return v + 2.0 * w * np.cross(u, v) + 2.0 * np.cross(u, np.cross(u, v))


def _two_meshes(mesh_a, mesh_b, pose_b, gap=0.01, pose_a=None):
    b = newton.ModelBuilder()
    cfg = b.ShapeConfig(gap=gap, margin=0.0, density=100.0)
    if pose_a is None:
        b.add_shape_mesh(-1, mesh=mesh_a, cfg=cfg)
        ba = None
    else:
        ba = b.add_body()
        b.add_shape_mesh(ba, mesh=mesh_a, cfg=cfg)
    bb = b.add_body()
    b.add_shape_mesh(bb, mesh=mesh_b, cfg=cfg)
    m = b.finalize(device="cpu")
    st = m.state()
    q = [pose_b] if pose_a is None else [pose_a, pose_b]
    st.body_q.assign(np.asarray(q, np.float32))
    return m, st


# ------------------------------------------------------------------------------------ tests


@pytest.mark.parametrize("use_sdf", [False, True], ids=["bvh", "sdf"])
def test_cube_on_cube(use_sdf):
    h = 0.5
    ma = newton.Mesh.create_box(h)
    mb = newton.Mesh.create_box(h)
    if use_sdf:
        ma.sdf = _box_sdf((h, h, h))
        mb.sdf = _box_sdf((h, h, h))
    off = (0.1, 0.05)
    m, st = _two_meshes(ma, mb, [off[0], off[1], 2 * h - DEPTH, 0, 0, 0, 1])
    _, c = _collide(m, st)
    r = _read(m, st, c)
    tol = 2e-4 if use_sdf else 1e-5
    assert 4 <= r["n"] <= 240
    assert np.all(r["normal"] @ np.array([0, 0, 1.0]) > 0.999)
    assert abs(r["d"].min() + DEPTH) < tol
    assert np.all(r["d"] < 0.0) and np.all(r["d"] > -DEPTH - tol)
    # support polygon: intersection of the two squares, x in [-0.4, 0.5], y in [-0.45, 0.5]
    corners = np.array([[-0.4, -0.45], [0.5, 0.5], [0.5, -0.45], [-0.4, 0.5]])
    mid = 0.5 * (r["p0"] + r["p1"])[:, :2]
    for cxy in corners:
        assert np.linalg.norm(mid - cxy, axis=1).min() < 2.5 * DEPTH + 0.03 * use_sdf  # SDF: within a voxel (0.025)
    # unreduced: at least as many contacts, same deepest distance
    _, c2 = _collide(m, st, reduce_contacts=False)
    r2 = _read(m, st, c2)
    assert r2["n"] >= r["n"]
    assert abs(r2["d"].min() - r["d"].min()) < 1e-7


def test_cube_on_cube_reduction_caps_dense_contacts():
    """A finely tessellated flat contact: reduction keeps the deepest and the support extent."""
    v, f = _grid_box(0.5, 8)
    ma = newton.Mesh(v, f)
    mb = newton.Mesh(v, f)
    m, st = _two_meshes(ma, mb, [0.0, 0.0, 1.0 - DEPTH, 0, 0, 0, 0.9999619], pose_a=None)
    st.body_q.assign(np.array([[0.0, 0.0, 1.0 - DEPTH, 0, 0, np.sin(0.2), np.cos(0.2)]], np.float32))
    _, c1 = _collide(m, st, reduce_contacts=False)
    _, c2 = _collide(m, st)
    r1, r2 = _read(m, st, c1), _read(m, st, c2)
    assert r1["n"] > r2["n"] >= 4
    assert abs(r1["d"].min() - r2["d"].min()) < 1e-7
    # the reduced set spans (almost) the whole contact patch
    ext1 = np.ptp(r1["p0"][:, :2], axis=0)
    ext2 = np.ptp(r2["p0"][:, :2], axis=0)
    assert np.all(ext2 > 0.9 * ext1)


def _grid_box(h, k):
    """Box of half extent h with every face split into k x k quads (CCW outward)."""
    verts, faces, index = [], [], {}

    def vid(p):
        key = tuple(np.round(p, 6))
        if key not in index:
            index[key] = len(verts)
            verts.append(p)
        return index[key]

    t = np.linspace(-h, h, k + 1)
    for axis in range(3):
        for sign in (-1.0, 1.0):
            u, w = [(axis + 1) % 3, (axis + 2) % 3]
            for i in range(k):
                for j in range(k):
                    quad = []
                    for di, dj in ((0, 0), (1, 0), (1, 1), (0, 1)):
                        p = np.zeros(3)
                        p[axis] = sign * h
                        p[u] = t[i + di]
                        p[w] = t[j + dj]
                        quad.append(vid(p))
                    if sign < 0:
                        quad = quad[::-1]
                    faces += [(quad[0], quad[1], quad[2]), (quad[0], quad[2], quad[3])]
    return np.asarray(verts, np.float32), np.asarray(faces, np.int32).reshape(-1)


def test_sphere_primitive_in_bowl():
    R, r, g = 1.0, 0.3, 0.005
    v, f = _uv_sphere(R, 16, 24, inward=True, lower_half=True)
    bowl = newton.Mesh(v, f, is_solid=False)
    b = newton.ModelBuilder()
    cfg = b.ShapeConfig(gap=0.02, margin=0.0, density=100.0)
    b.add_shape_mesh(-1, mesh=bowl, cfg=cfg)
    body = b.add_body()
    b.add_shape_sphere(body, radius=r, cfg=cfg)
    m = b.finalize(device="cpu")
    st = m.state()
    st.body_q.assign(np.array([[0, 0, -R + r + g, 0, 0, 0, 1]], np.float32))
    _, c = _collide(m, st)
    res = _read(m, st, c)
    assert res["n"] >= 1
    k = int(np.argmin(res["d"]))
    assert abs(res["d"][k] - _bowl_fan_distance(v, f, np.array([0, 0, -R + r + g]), r)) < 1e-4
    # contact at the bottom, normal along z toward the sphere center (sign: shape0 -> shape1)
    sphere_first = m.shape_type.numpy()[res["s0"][k]] == int(newton.GeoType.SPHERE)
    nz = -1.0 if sphere_first else 1.0
    assert res["normal"][k] @ np.array([0, 0, nz]) > 0.99  # fan facet tilt (pi / 32)
    pb = res["p1"][k] if sphere_first else res["p0"][k]
    assert np.linalg.norm(pb - np.array([0, 0, -R])) < 0.05  # foot point on a fan facet


def _bowl_fan_distance(v, f, c, r):
    """Distance of a sphere (center c on the z axis, radius r) to the faceted bowl bottom: the
    fan triangles around the pole (the center projects into one of them)."""
    tri = v[np.asarray(f).reshape(-1, 3)[0]].astype(np.float64)
    n = np.cross(tri[1] - tri[0], tri[2] - tri[0])
    n /= np.linalg.norm(n)
    return abs(float((c - tri[0]) @ n)) - r


@pytest.mark.parametrize("use_sdf", [False, True], ids=["bvh", "sdf"])
def test_mesh_sphere_in_bowl(use_sdf):
    R, r, g = 1.0, 0.3, 0.004
    v, f = _uv_sphere(R, 16, 24, inward=True, lower_half=True)
    bowl = newton.Mesh(v, f, is_solid=False)
    sv, sf = _uv_sphere(r, 12, 16)
    ball = newton.Mesh(sv, sf)
    if use_sdf:
        # analytic sphere SDF on the ball (the bowl keeps its BVH)
        vox = 0.02
        n = int(np.ceil(2 * (r + 0.1) / vox)) + 1
        lo = np.full(3, -(r + 0.1))
        ax = lo[0] + vox * np.arange(n)
        Z, Y, X = np.meshgrid(ax, ax, ax, indexing="ij")
        ball.sdf = SDF((np.sqrt(X * X + Y * Y + Z * Z) - r).astype(np.float32), (n, n, n), lo, vox)
    m, st = _two_meshes(bowl, ball, [0, 0, -R + r + g, 0, 0, 0, 1], gap=0.02)
    _, c = _collide(m, st)
    res = _read(m, st, c)
    assert res["n"] >= 1
    k = int(np.argmin(res["d"]))
    assert abs(res["d"][k] - g) < (2e-3 if use_sdf else 1e-4)
    # shape 0 = bowl (lower index): normal from the bowl toward the ball, +z
    assert res["s0"][k] == 0
    assert res["normal"][k] @ np.array([0, 0, 1.0]) > 0.995
    assert np.linalg.norm(res["p0"][k] - np.array([0, 0, -R])) < 0.05


def _mujoco_pair():
    mujoco = pytest.importorskip("mujoco")
    box = newton.Mesh.create_box(0.3, 0.2, 0.1)
    octa_v = np.array([[0.25, 0, 0], [-0.25, 0, 0], [0, 0.2, 0], [0, -0.2, 0], [0, 0, 0.15], [0, 0, -0.15]])
    xml = f"""<mujoco><asset>
      <mesh name="a" vertex="{' '.join(map(str, np.asarray(box.vertices).reshape(-1)))}"/>
      <mesh name="b" vertex="{' '.join(map(str, octa_v.reshape(-1)))}"/>
    </asset><worldbody>
      <body name="A" mocap="true"><geom type="mesh" mesh="a"/></body>
      <body name="B" mocap="true"><geom type="mesh" mesh="b"/></body>
    </worldbody></mujoco>"""
    mm = mujoco.MjModel.from_xml_string(xml)
    return mujoco, mm


def _mj_mesh(mm, k):
    adr, nv = mm.mesh_vertadr[k], mm.mesh_vertnum[k]
    fadr, nf = mm.mesh_faceadr[k], mm.mesh_facenum[k]
    return newton.Mesh(mm.mesh_vert[adr:adr + nv].copy(), mm.mesh_face[fadr:fadr + nf].copy().reshape(-1))


def test_convex_mesh_distance_vs_mujoco():
    mujoco, mm = _mujoco_pair()
    md = mujoco.MjData(mm)
    rng = np.random.default_rng(7)
    ma, mb = _mj_mesh(mm, 0), _mj_mesh(mm, 1)
    poses, ref = [], []
    while len(poses) < 8:
        qa = rng.normal(size=4)
        qb = rng.normal(size=4)
        qa /= np.linalg.norm(qa)
        qb /= np.linalg.norm(qb)
        u = rng.normal(size=3)
        u /= np.linalg.norm(u)
        md.mocap_pos[0] = 0.0
        md.mocap_quat[0] = qa
        md.mocap_quat[1] = qb
        md.mocap_pos[1] = u * 0.2
        for _ in range(40):  # push B out along u until separated by 5..60 mm
            mujoco.mj_kinematics(mm, md)
            dist = mujoco.mj_geomDistance(mm, md, 0, 1, 1.0, None)
            if dist > 0.005:
                break
            md.mocap_pos[1] += u * 0.03
        if not 0.005 < dist < 0.06:
            continue
        pa = np.r_[md.geom_xpos[0], _xyzw(md.geom_xmat[0])]
        pb = np.r_[md.geom_xpos[1], _xyzw(md.geom_xmat[1])]
        poses.append((pa, pb))
        ref.append(dist)
    for (pa, pb), dref in zip(poses, ref):
        m, st = _two_meshes(ma, mb, pb, gap=0.1, pose_a=pa)
        _, c = _collide(m, st)
        r = _read(m, st, c)
        assert r["n"] >= 1
        assert abs(r["d"].min() - dref) < MJ_TOL * 0.6, (r["d"].min(), dref)


def _xyzw(xmat):
    import mujoco

    q = np.zeros(4)
    mujoco.mju_mat2Quat(q, np.asarray(xmat, np.float64))
    return np.r_[q[1:], q[0]]


@pytest.mark.parametrize("slope", [0.0, 0.25], ids=["flat", "sloped"])
def test_heightfield_mesh_box(slope):
    nrow, ncol, hx, hy = 11, 11, 1.0, 1.0
    xs = np.linspace(-hx, hx, ncol)
    data = np.tile(slope * xs[None, :], (nrow, 1))
    hf = newton.Heightfield(data, nrow, ncol, hx=hx, hy=hy)
    h = 0.2
    b = newton.ModelBuilder()
    cfg = b.ShapeConfig(gap=0.01, margin=0.0, density=100.0)
    b.add_shape_heightfield(heightfield=hf, cfg=cfg)
    body = b.add_body()
    b.add_shape_mesh(body, mesh=newton.Mesh.create_box(h), cfg=cfg)
    m = b.finalize(device="cpu")
    st = m.state()
    nrm = np.array([-slope, 0.0, 1.0]) / np.hypot(slope, 1.0)
    ang = np.arctan(slope)  # rotate about -y so the box bottom lies on the slope
    q = [0.0, -np.sin(ang / 2), 0.0, np.cos(ang / 2)]
    c0 = np.array([0.05, 0.03, 0.0])
    c0[2] = slope * c0[0]
    center = c0 + nrm * (h - DEPTH)
    st.body_q.assign(np.array([np.r_[center, q]], np.float32))
    for reduce in (True, False):
        _, c = _collide(m, st, reduce_contacts=reduce)
        r = _read(m, st, c)
        assert r["n"] >= 4
        assert np.all(m.shape_type.numpy()[r["s0"]] == int(newton.GeoType.HFIELD))
        assert np.all(r["normal"] @ nrm > 0.999)
        assert abs(r["d"].min() + DEPTH) < 1e-4
        assert np.all(r["d"] < 1e-4)


def test_deterministic_and_moving_body():
    sv, sf = _uv_sphere(0.3, 10, 14)
    ma = newton.Mesh.create_box(0.5)
    mb = newton.Mesh(sv, sf)
    m, st = _two_meshes(ma, mb, [0.1, 0.0, 0.79, 0.1, 0.2, 0.0, 0.9746794], gap=0.01)
    arrays = []
    for _ in range(2):
        cp, c = _collide(m, st, deterministic=True, reduce_contacts=False)
        n = int(c.rigid_contact_count.numpy()[0])
        assert n > 0
        arrays.append([getattr(c, k).numpy()[:n].copy() for k in ("rigid_contact_shape0", "rigid_contact_point0",
                                                                   "rigid_contact_point1", "rigid_contact_normal",
                                                                   "rigid_contact_point_id")])
    for x, y in zip(*arrays):
        assert x.shape == y.shape and np.array_equal(x, y)
    # same pipeline and buffer, body moved: contacts follow (no stale state)
    cp = newton.CollisionPipeline(m)
    c = cp.contacts()
    cp.collide(st, c)
    d1 = _read(m, st, c)["d"].min()
    q = st.body_q.numpy()
    q[0, 2] -= 0.01
    st.body_q.assign(q)
    cp.collide(st, c)
    d2 = _read(m, st, c)["d"].min()
    assert abs((d1 - d2) - 0.01) < 2e-3
    q[0, 2] += 1.0
    st.body_q.assign(q)
    cp.collide(st, c)
    assert int(c.rigid_contact_count.numpy()[0]) == 0


def test_static_heightfield_pairs_do_not_raise():
    hf = newton.Heightfield(np.zeros((3, 3)), 3, 3, hx=1.0, hy=1.0)
    b = newton.ModelBuilder()
    b.add_shape_heightfield(heightfield=hf)
    b.add_shape_heightfield(heightfield=hf)
    b.add_shape_plane((0, 0, 1, 0))
    m = b.finalize(device="cpu")
    pairs = np.array([[0, 1], [0, 2], [1, 2]], np.int32)
    cp = newton.CollisionPipeline(m, shape_pairs_filtered=pairs)
    c = cp.contacts()
    cp.collide(m.state(), c)
    assert int(c.rigid_contact_count.numpy()[0]) == 0


@pytest.mark.parametrize("use_sdf", [False, True], ids=["bvh", "sdf"])
def test_aligned_equal_boxes_stack(use_sdf):
    """Two equal, exactly aligned mesh boxes, the upper one 1 cm lower than touching: every vertex
    and edge of each lies on the other's side faces (distance 0, lateral normals). The vertex
    normal rule (closest face opposing the corner's outward normal) gives vertical contacts: normal
    +z from the lower box to the upper one, depth ~1 cm; lateral contacts only at zero depth."""
    h = 0.1
    ma = newton.Mesh.create_box(h)
    mb = newton.Mesh.create_box(h)
    if use_sdf:
        ma.sdf = _box_sdf((h, h, h), pad=0.05, voxel=0.01)
        mb.sdf = _box_sdf((h, h, h), pad=0.05, voxel=0.01)
    overlap = 0.01
    m, st = _two_meshes(ma, mb, [0.0, 0.0, 2 * h - overlap, 0, 0, 0, 1], gap=0.002)
    _, c = _collide(m, st)
    r = _read(m, st, c)
    assert r["n"] >= 4
    # orient every contact from the lower (static, shape 0) box to the upper one
    sign = np.where(r["s0"] == 0, 1.0, -1.0)
    nz = sign * r["normal"][:, 2]
    vertical = np.abs(nz) > 0.99
    assert vertical.sum() >= 4, (r["normal"], r["d"])
    assert np.all(nz[vertical] > 0.99)
    assert np.allclose(r["d"][vertical], -overlap, atol=1.5e-3), r["d"]
    assert np.all(r["d"][~vertical] > -1.0e-4), r["d"]

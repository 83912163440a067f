"""GJK/MPR convex narrow phase vs MuJoCo (``mj_geomDistance``) for cylinder, ellipsoid and
convex-mesh pairs, plus manifold counts for resting face/side contacts.

Each pair type: seeded random sizes and relative poses (separated within the detection
range, touching and penetrating), one pair per world, all in one ``collide`` call. MuJoCo
runs its own GJK/EPA (``ccd_iterations`` raised, ``ccd_tolerance`` lowered so that the
oracle itself is converged).

Stated tolerances (float32 engine vs float64 oracle, sizes 0.1-0.5 m), as named constants below:
* separated, touching and shallow (d_mj > -SHALLOW) poses: |d - d_mj| <= D_TOL_SEP (GJK is
  exact up to its duality-gap tolerance; MPR + refinement is exact for shallow overlap);
* deeper penetration: MPR + refinement finds a local minimum of the penetration depth, so
  d <= d_mj + D_TOL_SEP always (never shallower than MuJoCo's EPA), and at least DEEP_MATCH
  of those poses agree within D_TOL_DEEP;
* normal of the deepest contact (shallow poses, |d_mj| > 1e-3): dot(n, n_mj) >= N_DOT;
* admission: a contact exists iff d_mj <= gap_a + gap_b (+- ADMIT_TOL);
* contact points lie on or inside both shapes (SURF_TOL), the deepest on both surfaces;
* contact count per pair within the reference table bound.
"""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import armillary as newton

from . import oracle

GAP = oracle.GAP  # per shape; pair gap 2 * GAP
#: separated or shallow (|d| <= SHALLOW) poses: |d - d_mj| <= D_TOL_SEP
D_TOL_SEP = 5.0e-5
#: penetration depth beyond SHALLOW: |d - d_mj| <= D_TOL_DEEP (both are iterative estimates)
SHALLOW = 0.02
D_TOL_DEEP = 2.0e-3
#: fraction of deep poses (d_mj < -SHALLOW) matching within D_TOL_DEEP
DEEP_MATCH = 0.9
#: convex mesh vs convex mesh: hull face normals seed the refinement (measured 0.98; the misses
#: are edge-edge minima that no face seed reaches)
DEEP_MATCH_MESH_MESH = 0.95
#: normals of the deepest contact where |d_mj| > 1e-3: dot(n, n_mj) >= N_DOT
N_DOT = 0.99
#: admission: a contact exists iff d_mj <= gap (+- ADMIT_TOL)
ADMIT_TOL = 5.0e-4
#: contact points lie on the surfaces within SURF_TOL
SURF_TOL = 5.0e-4
N = 400

# a fixed convex polyhedron (irregular hull of 14 points)
_rng = np.random.default_rng(5)
HULL = np.concatenate([_rng.normal(size=(12, 3)) * [0.25, 0.18, 0.15], [[0.0, 0.0, 0.3], [0.0, 0.0, -0.3]]])
HULL_RADIUS = float(np.linalg.norm(HULL, axis=1).max())

TABLE = {"plane": {"cylinder": 4, "ellipsoid": 1, "mesh": 5}}


def _size(rng, kind, n):
    if kind == "sphere":
        return np.stack([rng.uniform(0.1, 0.5, n), np.zeros(n), np.zeros(n)], 1)
    if kind == "capsule":
        return np.stack([rng.uniform(0.05, 0.3, n), rng.uniform(0.05, 0.5, n), np.zeros(n)], 1)
    if kind == "cylinder":
        return np.stack([rng.uniform(0.1, 0.5, n), rng.uniform(0.1, 0.5, n), np.zeros(n)], 1)
    if kind in ("box", "ellipsoid"):
        return rng.uniform(0.1, 0.5, (n, 3))
    return np.zeros((n, 3))


def _bound(kind, s):
    if kind == "sphere":
        return s[:, 0]
    if kind in ("capsule", "cylinder"):
        return np.hypot(s[:, 0], s[:, 1]) + (s[:, 0] if kind == "capsule" else 0)
    if kind == "ellipsoid":
        return s.max(axis=1)
    if kind == "box":
        return np.linalg.norm(s, axis=1)
    return np.full(len(s), 0.6 * HULL_RADIUS)


def _sample(rng, ka, kb, n):
    sa, sb = _size(rng, ka, n), _size(rng, kb, n)
    qa, qb = oracle.random_quat(rng, n), oracle.random_quat(rng, n)
    pa = np.zeros((n, 3))
    if ka == "plane":
        qa[:] = (1.0, 0.0, 0.0, 0.0)
        pb = np.stack([rng.uniform(-1, 1, n), rng.uniform(-1, 1, n), rng.uniform(-0.3, 1.0, n) * _bound(kb, sb)], 1)
    else:
        d = rng.normal(size=(n, 3))
        d /= np.linalg.norm(d, axis=1, keepdims=True)
        reach = _bound(ka, sa) + _bound(kb, sb)
        pb = d * (reach * rng.uniform(0.45, 1.0, n))[:, None]
    return sa, sb, pa, qa, pb, qb


def _build(ka, kb, sa, sb, pa, qa, pb, qb):
    builder = newton.ModelBuilder()
    cfg = builder.ShapeConfig(gap=GAP, margin=0.0, density=100.0)
    hull = newton.Mesh(HULL.astype(np.float32), _hull_faces(), compute_inertia=False)

    def add(kind, body, s):
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
        elif kind == "mesh":
            builder.add_shape_convex_hull(body, mesh=hull, cfg=cfg)
        else:
            builder.add_shape_plane(body=-1, xform=wp.transform_identity(), width=0.0, length=0.0, cfg=cfg)

    for i in range(len(sa)):
        builder.begin_world()
        add(ka, -1 if ka == "plane" else builder.add_body(), sa[i])
        add(kb, builder.add_body(), sb[i])
        builder.end_world()
    model = builder.finalize(device="cpu")
    state = model.state()
    bq = []
    for i in range(len(sa)):
        if ka != "plane":
            bq.append(np.concatenate([pa[i], oracle.xyzw(qa[i : i + 1])[0]]))
        bq.append(np.concatenate([pb[i], oracle.xyzw(qb[i : i + 1])[0]]))
    state.body_q.assign(np.asarray(bq, dtype=np.float32))
    return model, state


_FACES = None


def _hull():
    """Brute-force convex hull of HULL: (CCW-outward triangles, facet planes (n, -n.p))."""
    global _FACES
    if _FACES is None:
        import itertools

        tris, eqs = [], []
        for i, j, k in itertools.combinations(range(len(HULL)), 3):
            nrm = np.cross(HULL[j] - HULL[i], HULL[k] - HULL[i])
            nrm /= np.linalg.norm(nrm)
            h = (HULL - HULL[i]) @ nrm
            if np.all(h <= 1e-9):
                tris.append((i, j, k))
            elif np.all(h >= -1e-9):
                tris.append((i, k, j))
                nrm = -nrm
            else:
                continue
            eqs.append(np.concatenate([nrm, [-nrm @ HULL[i]]]))
        _FACES = (np.asarray(tris, np.int32).reshape(-1), np.asarray(eqs))
    return _FACES


def _hull_faces():
    return _hull()[0]


def _mj_geom(kind, name):
    if kind == "plane":
        return f'<geom name="{name}" type="plane" size="0 0 1"/>'
    extra = ' mesh="hull"' if kind == "mesh" else ' size="0.1 0.1 0.1"'
    return f'<body name="{name}b"><freejoint/><geom name="{name}" type="{kind}"{extra}/></body>'


def _mujoco(ka, kb, sa, sb, pa, qa, pb, qb, distmax):
    import mujoco

    verts = " ".join(f"{v:.9g}" for v in HULL.reshape(-1))
    xml = f"""<mujoco><option ccd_iterations="500" ccd_tolerance="1e-10"><flag multiccd="enable"/></option>
    <asset><mesh name="hull" vertex="{verts}"/></asset>
    <worldbody>{_mj_geom(ka, "a")}{_mj_geom(kb, "b")}</worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    ga, gb = m.geom("a").id, m.geom("b").id
    m.geom_rbound[:] = 100.0
    out_d = np.zeros(len(sa))
    out_n = np.zeros((len(sa), 3))
    ft = np.zeros(6)
    for i in range(len(sa)):
        for g, k, s in ((ga, ka, sa[i]), (gb, kb, sb[i])):
            if k not in ("plane", "mesh"):
                m.geom_size[g] = s
        q = [] if ka == "plane" else [*pa[i], *qa[i]]
        d.qpos[:] = q + [*pb[i], *qb[i]]
        mujoco.mj_kinematics(m, d)
        dist = mujoco.mj_geomDistance(m, d, ga, gb, distmax, ft)
        out_d[i] = dist
        v = ft[3:] - ft[:3]
        out_n[i] = v / dist if abs(dist) > 1e-9 else np.nan
    return out_d, out_n


def _sdf(kind, s, pos, quat, p):
    local = oracle._rot(quat).T @ (np.asarray(p) - pos)
    if kind == "cylinder":
        dr = np.hypot(local[0], local[1]) - s[0]
        dz = abs(local[2]) - s[1]
        return np.hypot(max(dr, 0.0), max(dz, 0.0)) + min(max(dr, dz), 0.0)
    if kind == "ellipsoid":
        k0 = np.linalg.norm(local / s)
        k1 = np.linalg.norm(local / (s * s))
        return k0 * (k0 - 1.0) / k1
    if kind == "mesh":
        eq = _hull()[1]
        return float((eq[:, :3] @ local + eq[:, 3]).max())
    return oracle.sdf(kind, s, pos, quat, p)


PAIRS = [("plane", "cylinder"), ("plane", "ellipsoid"), ("sphere", "cylinder"), ("sphere", "ellipsoid"),
         ("capsule", "cylinder"), ("capsule", "ellipsoid"), ("ellipsoid", "ellipsoid"), ("ellipsoid", "cylinder"),
         ("cylinder", "cylinder"), ("cylinder", "box"), ("ellipsoid", "box"), ("plane", "mesh"), ("sphere", "mesh"),
         ("box", "mesh"), ("cylinder", "mesh"), ("mesh", "mesh")]  # fmt: skip


def _bound_table(ka, kb):
    if "ellipsoid" in (ka, kb) or "sphere" in (ka, kb):
        return 1
    if ka == "plane" and kb == "cylinder":
        return 4
    return 5


@pytest.mark.parametrize("ka,kb", PAIRS, ids=[f"{a}-{b}" for a, b in PAIRS])
def test_convex_pair_against_mujoco(ka, kb):
    rng = np.random.default_rng(100 + PAIRS.index((ka, kb)))
    sa, sb, pa, qa, pb, qb = _sample(rng, ka, kb, N)
    model, state = _build(ka, kb, sa, sb, pa, qa, pb, qb)
    res = oracle.armillary_contacts(model, state)
    dmin = np.full(N, np.inf)
    nmin = np.full((N, 3), np.nan)
    counts = np.zeros(N, int)
    kmin = np.full(N, -1)
    for k in range(res["count"]):
        w = res["world"][k]
        counts[w] += 1
        if res["d"][k] < dmin[w]:
            dmin[w], nmin[w], kmin[w] = res["d"][k], res["normal"][k], k
    mj_d, mj_n = _mujoco(ka, kb, sa, sb, pa, qa, pb, qb, 2 * GAP + 0.2)
    g = 2 * GAP
    found = np.isfinite(dmin)
    assert not np.any(~found & (mj_d <= g - ADMIT_TOL)), f"{ka}-{kb}: missed contacts {np.nonzero(~found & (mj_d <= g - ADMIT_TOL))[0][:5]}"
    assert not np.any(found & (mj_d > g + ADMIT_TOL)), f"{ka}-{kb}: contacts beyond the gap"
    assert found.sum() > N // 3 and (mj_d[found] < 0).sum() > N // 6
    err = np.where(found, np.abs(np.where(found, dmin, 0.0) - mj_d), np.inf)
    shallow = found & (mj_d > -SHALLOW)
    deep = found & ~shallow
    assert err[shallow].max() <= D_TOL_SEP, f"{ka}-{kb}: shallow distance error {err[shallow].max():.2e} at {np.argmax(np.where(shallow, err, 0))}"
    if deep.any():
        # MPR + refinement converges to a local minimum of the penetration: never shallower
        # than the true depth, equal to it for most poses
        assert np.all(dmin[deep] <= mj_d[deep] + D_TOL_SEP), f"{ka}-{kb}: depth under-estimated"
        frac = (err[deep] <= D_TOL_DEEP).mean()
        assert frac >= (DEEP_MATCH_MESH_MESH if (ka, kb) == ("mesh", "mesh") else DEEP_MATCH), f"{ka}-{kb}: only {frac:.2f} of deep poses match"
    well = shallow & (np.abs(mj_d) > 1e-3)
    dots = np.einsum("ij,ij->i", nmin, mj_n)
    assert dots[well].min() >= N_DOT, f"{ka}-{kb}: normal mismatch {dots[well].min():.4f}"
    assert counts.max() <= _bound_table(ka, kb)
    # every contact point lies on (or inside) both surfaces; the deepest on both surfaces
    worst_out, worst_deep = 0.0, 0.0
    for k in range(res["count"]):
        w = res["world"][k]
        e0 = _sdf(ka, sa[w], pa[w], qa[w], res["surf0"][k])
        e1 = _sdf(kb, sb[w], pb[w], qb[w], res["surf1"][k])
        worst_out = max(worst_out, e0, e1)
        if k == kmin[w]:
            worst_deep = max(worst_deep, abs(e0), abs(e1))
    assert worst_out <= SURF_TOL, f"{ka}-{kb}: contact point outside a shape by {worst_out:.2e}"
    assert worst_deep <= SURF_TOL, f"{ka}-{kb}: deepest contact off-surface by {worst_deep:.2e}"


def test_resting_manifolds():
    """Face and side contacts give multi-point manifolds within the table's bounds."""
    b = newton.ModelBuilder()
    b.add_ground_plane()
    up = wp.quat_identity()
    lying = wp.quat_from_axis_angle(wp.vec3(1.0, 0.0, 0.0), 0.5 * np.pi)
    c1 = b.add_shape_cylinder(b.add_body(xform=wp.transform((0.0, 0.0, 0.3), up)), radius=0.2, half_height=0.3)
    c2 = b.add_shape_cylinder(b.add_body(xform=wp.transform((3.0, 0.0, 0.2), lying)), radius=0.2, half_height=0.4)
    box = b.add_shape_box(b.add_body(xform=wp.transform((6.0, 0.0, 0.5), up)), hx=0.5, hy=0.5, hz=0.5)
    c3 = b.add_shape_cylinder(b.add_body(xform=wp.transform((6.0, 0.0, 1.3), up)), radius=0.2, half_height=0.3)
    cone = b.add_shape_cone(b.add_body(xform=wp.transform((9.0, 0.0, 0.5), up)), radius=0.3, half_height=0.5)
    hull = newton.Mesh.create_box(0.3, 0.3, 0.3)
    mh = b.add_shape_convex_hull(b.add_body(xform=wp.transform((12.0, 0.0, 0.3), up)), mesh=hull)
    m = b.finalize(device="cpu")
    res = oracle.armillary_contacts(m, m.state())
    pairs = list(zip(res["shape0"].tolist(), res["shape1"].tolist()))
    assert pairs.count((0, c1)) == 4  # cylinder standing on the plane
    assert pairs.count((0, c2)) == 2  # cylinder lying on the plane
    assert pairs.count((c3, box)) == 4  # cylinder standing on a box face
    assert pairs.count((0, cone)) == 4  # cone base on the plane
    assert pairs.count((0, mh)) == 4  # convex box hull on the plane
    assert np.all(np.abs(res["d"]) < 1e-5)


def test_barrel_cone_ellipsoid_on_plane():
    """Analytic plane distances: barrel cylinder (cap and bulging side), cone base / apex, ellipsoid."""
    r, h, R = 0.2, 0.3, 0.5
    bulge = r - np.sqrt(R * R - h * h) + R  # radius of the barrel at mid-height
    lying = wp.quat_from_axis_angle(wp.vec3(1.0, 0.0, 0.0), 0.5 * np.pi)
    flip = wp.quat_from_axis_angle(wp.vec3(1.0, 0.0, 0.0), np.pi)
    cases = [  # (add, xform, expected distance)
        (lambda b, body: b.add_shape_cylinder(body, radius=r, half_height=h, barrel_radius=R), (0.0, 0.0, h + 0.01),
         wp.quat_identity(), 0.01),
        (lambda b, body: b.add_shape_cylinder(body, radius=r, half_height=h, barrel_radius=R), (0.0, 0.0, bulge - 0.02),
         lying, -0.02),
        (lambda b, body: b.add_shape_cone(body, radius=r, half_height=h), (0.0, 0.0, h - 0.03), wp.quat_identity(), -0.03),
        (lambda b, body: b.add_shape_cone(body, radius=r, half_height=h), (0.0, 0.0, h + 0.04), flip, 0.04),
        (lambda b, body: b.add_shape_ellipsoid(body, rx=0.3, ry=0.2, rz=0.1), (0.0, 0.0, 0.2), lying, 0.0),
    ]  # fmt: skip
    for add, pos, q, expected in cases:
        b = newton.ModelBuilder()
        b.add_ground_plane(cfg=b.ShapeConfig(gap=0.05))
        add(b, b.add_body(xform=wp.transform(pos, q)))
        m = b.finalize(device="cpu")
        res = oracle.armillary_contacts(m, m.state())
        assert res["count"] >= 1
        assert abs(res["d"].min() - expected) < 1e-5, (pos, res["d"], expected)
        assert np.allclose(res["normal"], [0.0, 0.0, 1.0], atol=1e-6)


def test_margin_gap_semantics_convex():
    """Margins shift where (d is measured between margin-offset surfaces), gaps shift when."""
    for gap, expect in ((0.0, 0), (0.01, 1)):
        b = newton.ModelBuilder()
        cfg = b.ShapeConfig(margin=0.01, gap=gap)
        b.add_shape_ellipsoid(b.add_body(xform=wp.transform((0.0, 0.0, 0.0), wp.quat_identity())), rx=0.3, ry=0.2,
                              rz=0.1, cfg=cfg)  # fmt: skip
        # cylinder cap 0.025 above the ellipsoid top: d = 0.025 - 2 * 0.01 = 0.005
        b.add_shape_cylinder(b.add_body(xform=wp.transform((0.0, 0.0, 0.1 + 0.025 + 0.2), wp.quat_identity())),
                             radius=0.2, half_height=0.2, cfg=cfg)  # fmt: skip
        m = b.finalize(device="cpu")
        res = oracle.armillary_contacts(m, m.state())
        assert res["count"] == expect
        if expect:
            assert abs(res["d"][0] - 0.005) < 1e-5
            c = res["contacts"]
            assert abs(c.rigid_contact_margin0.numpy()[0] - 0.01) < 1e-7


def test_hull_face_normals_seed_data():
    """The hull face normals stored for convex meshes (deep-penetration seeds): a box hull with
    interior points has its 6 face normals; a tetrahedron its 4 outward normals."""
    from armillary.geometry.mesh_collision import hull_face_normals

    box = newton.Mesh.create_box(0.3, 0.2, 0.1).vertices
    pts = np.concatenate([box, np.random.default_rng(0).uniform(-0.05, 0.05, (5, 3))])
    fn = hull_face_normals(pts)
    assert len(fn) == 6
    np.testing.assert_allclose(np.sort(np.abs(fn).max(axis=1)), 1.0, atol=1e-6)
    np.testing.assert_allclose(fn.sum(axis=0), 0.0, atol=1e-6)
    tet = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32)
    fn = hull_face_normals(tet)
    assert len(fn) == 4
    c = tet.mean(axis=0)
    for nrm in fn:
        face = tet[np.abs((tet - c) @ nrm - ((tet - c) @ nrm).max()) < 1e-6]
        assert len(face) == 3  # the normal points away from the centroid, toward its face

"""MuJoCo oracle for primitive pairs: batched armillary contacts vs ``mujoco.mj_geomDistance``.

One armillary model holds every pose of a pair type, one pair per world (so a plane only
meets its own partner); one ``collide`` call produces all contacts. MuJoCo evaluates the
same two geoms (sizes written into ``geom_size`` per pose) with ``mj_geomDistance``.
"""

from __future__ import annotations

import numpy as np
import warp as wp

import armillary as newton

TYPES = {"plane": newton.GeoType.PLANE, "sphere": newton.GeoType.SPHERE, "capsule": newton.GeoType.CAPSULE,
         "box": newton.GeoType.BOX}  # fmt: skip
MJ_TYPE = {"plane": "plane", "sphere": "sphere", "capsule": "capsule", "box": "box"}
GAP = 0.05  # per shape -> pair gap 0.1


def random_quat(rng, n):
    q = rng.normal(size=(n, 4))
    return q / np.linalg.norm(q, axis=1, keepdims=True)  # (w, x, y, z)


def random_size(rng, kind, n):
    if kind == "sphere":
        return np.stack([rng.uniform(0.1, 0.6, n), np.zeros(n), np.zeros(n)], 1)
    if kind == "capsule":
        return np.stack([rng.uniform(0.05, 0.4, n), rng.uniform(0.05, 0.6, n), np.zeros(n)], 1)
    if kind == "box":
        return rng.uniform(0.1, 0.6, (n, 3))
    return np.zeros((n, 3))


def bounding_radius(kind, s):
    if kind == "sphere":
        return s[:, 0]
    if kind == "capsule":
        return s[:, 0] + s[:, 1]
    return np.linalg.norm(s, axis=1)


def sample_poses(rng, ka, kb, n):
    """Random sizes and world poses; the pair is placed near contact (separated or overlapping)."""
    sa, sb = random_size(rng, ka, n), random_size(rng, kb, n)
    qa, qb = random_quat(rng, n), random_quat(rng, n)
    pa = np.zeros((n, 3))
    if ka == "plane":
        qa[:] = (1.0, 0.0, 0.0, 0.0)
        rb = bounding_radius(kb, sb)
        pb = np.stack([rng.uniform(-1, 1, n), rng.uniform(-1, 1, n), rng.uniform(-0.3, 1.0, n) * rb], 1)
    else:
        d = rng.normal(size=(n, 3))
        d /= np.linalg.norm(d, axis=1, keepdims=True)
        reach = bounding_radius(ka, sa) + bounding_radius(kb, sb)
        pb = d * (reach * rng.uniform(0.35, 1.0, n))[:, None]
    return sa, sb, pa, qa, pb, qb


def xyzw(q):
    return np.concatenate([q[:, 1:], q[:, :1]], axis=1)


def build_armillary(ka, kb, sa, sb, pa, qa, pb, qb, device="cpu"):
    builder = newton.ModelBuilder()
    cfg = builder.ShapeConfig(gap=GAP, margin=0.0, density=100.0)
    n = len(sa)

    def add(kind, body, s):
        if kind == "sphere":
            builder.add_shape_sphere(body, radius=float(s[0]), cfg=cfg)
        elif kind == "capsule":
            builder.add_shape_capsule(body, radius=float(s[0]), half_height=float(s[1]), cfg=cfg)
        elif kind == "box":
            builder.add_shape_box(body, hx=float(s[0]), hy=float(s[1]), hz=float(s[2]), cfg=cfg)
        else:
            builder.add_shape_plane(body=-1, xform=wp.transform_identity(), width=0.0, length=0.0, cfg=cfg)

    for i in range(n):
        builder.begin_world()
        if ka == "plane":
            add(ka, -1, sa[i])
        else:
            add(ka, builder.add_body(), sa[i])
        add(kb, builder.add_body(), sb[i])
        builder.end_world()
    model = builder.finalize(device=device)
    state = model.state()
    bq = []
    for i in range(n):
        if ka != "plane":
            bq.append(np.concatenate([pa[i], xyzw(qa[i : i + 1])[0]]))
        bq.append(np.concatenate([pb[i], xyzw(qb[i : i + 1])[0]]))
    state.body_q.assign(np.asarray(bq, dtype=np.float32))
    return model, state


def mujoco_model(ka, kb):
    import mujoco

    def geom(kind, name):
        if kind == "plane":
            return f'<geom name="{name}" type="plane" size="0 0 1"/>'
        return f'<body name="{name}b"><freejoint/><geom name="{name}" type="{MJ_TYPE[kind]}" size="0.1 0.1 0.1"/></body>'

    xml = f"""<mujoco><option><flag multiccd="enable"/></option><worldbody>
    {geom(ka, "a")}{geom(kb, "b")}</worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    return m, mujoco.MjData(m)


def mujoco_distances(ka, kb, sa, sb, pa, qa, pb, qb, idx, distmax):
    """Signed distance and unit normal (geom a -> geom b) from MuJoCo for the poses in ``idx``."""
    import mujoco

    m, d = mujoco_model(ka, kb)
    ga, gb = m.geom("a").id, m.geom("b").id
    m.geom_rbound[:] = 100.0
    out_d = np.zeros(len(idx))
    out_n = np.zeros((len(idx), 3))
    fromto = np.zeros(6)
    for k, i in enumerate(idx):
        if ka != "plane":
            m.geom_size[ga] = sa[i] if ka == "box" else (sa[i][0], sa[i][1], 0.0)
        m.geom_size[gb] = sb[i] if kb == "box" else (sb[i][0], sb[i][1], 0.0)
        q = []
        if ka != "plane":
            q += [*pa[i], *qa[i]]
        q += [*pb[i], *qb[i]]
        d.qpos[:] = q
        mujoco.mj_kinematics(m, d)
        dist = mujoco.mj_geomDistance(m, d, ga, gb, distmax, fromto)
        out_d[k] = dist
        v = fromto[3:] - fromto[:3]
        out_n[k] = v / dist if abs(dist) > 1e-9 else np.nan
    return out_d, out_n


# ----------------------------------------------------------------------------- surface distances (numpy)
def _rot(q):  # (w, x, y, z) -> 3x3
    w, x, y, z = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])  # fmt: skip


def sdf(kind, size, pos, quat, p):
    local = _rot(quat).T @ (np.asarray(p) - pos)
    if kind == "plane":
        return local[2]
    if kind == "sphere":
        return np.linalg.norm(local) - size[0]
    if kind == "capsule":
        z = np.clip(local[2], -size[1], size[1])
        return np.linalg.norm(local - np.array([0.0, 0.0, z])) - size[0]
    q = np.abs(local) - size
    return np.linalg.norm(np.maximum(q, 0.0)) + min(q.max(), 0.0)


def _quat_apply(q_xyzw, v):
    x, y, z, w = q_xyzw
    u = np.array([x, y, z])
    return v + 2.0 * np.cross(u, np.cross(u, v) + w * v)


def armillary_contacts(model, state, **pipeline_kwargs):
    """Per-contact world, d, n, surface points on both shapes (numpy)."""
    pipeline = newton.CollisionPipeline(model, **pipeline_kwargs)
    contacts = pipeline.contacts()
    pipeline.collide(state, contacts)
    n = int(contacts.rigid_contact_count.numpy()[0])
    s0 = contacts.rigid_contact_shape0.numpy()[:n]
    s1 = contacts.rigid_contact_shape1.numpy()[:n]
    p0 = contacts.rigid_contact_point0.numpy()[:n].astype(np.float64)
    p1 = contacts.rigid_contact_point1.numpy()[:n].astype(np.float64)
    nrm = contacts.rigid_contact_normal.numpy()[:n].astype(np.float64)
    m0 = contacts.rigid_contact_margin0.numpy()[:n].astype(np.float64)
    m1 = contacts.rigid_contact_margin1.numpy()[:n].astype(np.float64)
    body = model.shape_body.numpy()
    bq = state.body_q.numpy().astype(np.float64)

    def world(points, shapes):
        out = points.copy()
        for k, (p, s) in enumerate(zip(points, shapes)):
            b = body[s]
            if b >= 0:
                out[k] = bq[b, :3] + _quat_apply(bq[b, 3:], p)
        return out

    w0, w1 = world(p0, s0), world(p1, s1)
    d = np.einsum("ij,ij->i", nrm, w1 - w0) - m0 - m1
    surf0 = w0 + nrm * m0[:, None]
    surf1 = w1 - nrm * m1[:, None]
    return dict(count=n, shape0=s0, shape1=s1, world=model.shape_world.numpy()[s0], d=d, normal=nrm,
                surf0=surf0, surf1=surf1, contacts=contacts)  # fmt: skip


def compare(ka, kb, n_poses, seed, n_mujoco=None, **pipeline_kwargs):
    """Run one pair type; return per-pose armillary minimum distances/normals and MuJoCo's."""
    rng = np.random.default_rng(seed)
    sa, sb, pa, qa, pb, qb = sample_poses(rng, ka, kb, n_poses)
    model, state = build_armillary(ka, kb, sa, sb, pa, qa, pb, qb)
    res = armillary_contacts(model, state, **pipeline_kwargs)
    dmin = np.full(n_poses, np.inf)
    nmin = np.full((n_poses, 3), np.nan)
    counts = np.zeros(n_poses, dtype=int)
    for k in range(res["count"]):
        w = res["world"][k]
        counts[w] += 1
        if res["d"][k] < dmin[w]:
            dmin[w] = res["d"][k]
            nmin[w] = res["normal"][k]
    # surface residuals: the deepest contact lies on both surfaces, no point lies outside a shape
    deepest = np.zeros(n_poses)
    outside = np.zeros(max(res["count"], 1))
    for k in range(res["count"]):
        w = res["world"][k]
        e0 = sdf(ka, sa[w], pa[w], qa[w], res["surf0"][k])
        e1 = sdf(kb, sb[w], pb[w], qb[w], res["surf1"][k])
        outside[k] = max(e0, e1, 0.0)
        if res["d"][k] == dmin[w]:
            deepest[w] = max(abs(e0), abs(e1))
    idx = np.arange(n_poses) if n_mujoco is None else np.arange(min(n_mujoco, n_poses))
    mj_d, mj_n = mujoco_distances(ka, kb, sa, sb, pa, qa, pb, qb, idx, 2 * GAP + 0.2)
    return dict(idx=idx, d=dmin[idx], n=nmin[idx], counts=counts, mj_d=mj_d, mj_n=mj_n, deepest_surface=deepest,
                outside=outside,
                sizes=(sa[idx], sb[idx]))  # fmt: skip

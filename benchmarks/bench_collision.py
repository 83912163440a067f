"""Collision pipeline throughput: ``collide`` calls/s on (a) 1000 random primitives on free
bodies over a ground plane (SAP and NxN broad phases), (b) a 64-box pile and (c) 64 boxes
resting on a 64 x 64-cell triangle-mesh floor (8192 triangles) with and without mesh contact
reduction, (d) two 5k-triangle icosphere meshes in contact through the BVH route (no SDF) and
the SDF route (``Mesh.build_sdf(max_resolution=64)`` on both) and (e) a hydroelastic box resting on
a hydroelastic box (primitive SDFs, ``sdf_max_resolution=32``), for armillary and, when installed,
the reference engine newton on the identical scene (newton builds SDFs only on CUDA: its SDF and
hydroelastic rows read "error" on the CPU).

Usage: python benchmarks/bench_collision.py [--device cpu] [--calls 50] [--quick] [--json PATH] [--cpu-time]
(the last two: benchmarks/_protocol.py)
"""

from __future__ import annotations

import argparse
import importlib

import numpy as np
import warp as wp

import _protocol as protocol


def random_primitives(lib, n=1000, seed=0, device="cpu"):
    rng = np.random.default_rng(seed)
    b = lib.ModelBuilder()
    b.add_ground_plane()
    side = 10.0 * (n / 1000.0) ** (1.0 / 3.0)
    for _ in range(n):
        q = rng.normal(size=4)
        q /= np.linalg.norm(q)
        pos = rng.uniform([-side / 2, -side / 2, 0.0], [side / 2, side / 2, side])
        body = b.add_body(xform=wp.transform(tuple(pos.tolist()), wp.quat(*q.tolist())))
        kind = rng.integers(3)
        if kind == 0:
            b.add_shape_sphere(body, radius=float(rng.uniform(0.1, 0.3)))
        elif kind == 1:
            b.add_shape_capsule(body, radius=float(rng.uniform(0.05, 0.2)), half_height=float(rng.uniform(0.1, 0.3)))
        else:
            b.add_shape_box(body, hx=float(rng.uniform(0.1, 0.3)), hy=float(rng.uniform(0.1, 0.3)),
                            hz=float(rng.uniform(0.1, 0.3)))  # fmt: skip
    return b.finalize(device=device)


def box_pile(lib, n=64, seed=1, device="cpu"):
    rng = np.random.default_rng(seed)
    b = lib.ModelBuilder()
    b.add_ground_plane()
    k = 0
    for level in range(n // 16 + 1):
        for i in range(4):
            for j in range(4):
                if k == n:
                    break
                yaw = wp.quat_from_axis_angle(wp.vec3(0.0, 0.0, 1.0), float(rng.uniform(-0.2, 0.2)))
                pos = (0.4 * i + rng.uniform(-0.02, 0.02), 0.4 * j + rng.uniform(-0.02, 0.02), 0.2 + 0.39 * level)
                body = b.add_body(xform=wp.transform(pos, yaw))
                b.add_shape_box(body, hx=0.2, hy=0.2, hz=0.2)
                k += 1
    return b.finalize(device=device)


def boxes_on_mesh(lib, n=64, cells=64, seed=2, device="cpu"):
    rng = np.random.default_rng(seed)
    xs = np.linspace(-2.0, 2.0, cells + 1)
    verts = np.array([(x, y, 0.0) for y in xs for x in xs], np.float32)
    faces = []
    for i in range(cells):
        for j in range(cells):
            a, d = i * (cells + 1) + j, (i + 1) * (cells + 1) + j
            faces += [a, a + 1, d + 1, a, d + 1, d]
    b = lib.ModelBuilder()
    b.add_shape_mesh(-1, mesh=lib.Mesh(verts, np.array(faces, np.int32), compute_inertia=False))
    side = int(np.ceil(np.sqrt(n)))
    for k in range(n):
        i, j = divmod(k, side)
        yaw = wp.quat_from_axis_angle(wp.vec3(0.0, 0.0, 1.0), float(rng.uniform(-0.5, 0.5)))
        pos = (-1.6 + 3.2 * i / max(side - 1, 1), -1.6 + 3.2 * j / max(side - 1, 1), 0.099)
        body = b.add_body(xform=wp.transform(pos, yaw))
        b.add_shape_box(body, hx=0.15, hy=0.12, hz=0.1)
    return b.finalize(device=device)


def icosphere(lib, radius=0.1, subdivisions=4):
    """Closed CCW icosphere mesh: 20 * 4**subdivisions triangles (5120 for 4)."""
    t = (1.0 + 5.0 ** 0.5) / 2.0
    v = [(-1, t, 0), (1, t, 0), (-1, -t, 0), (1, -t, 0), (0, -1, t), (0, 1, t), (0, -1, -t), (0, 1, -t),
         (t, 0, -1), (t, 0, 1), (-t, 0, -1), (-t, 0, 1)]
    f = [(0, 11, 5), (0, 5, 1), (0, 1, 7), (0, 7, 10), (0, 10, 11), (1, 5, 9), (5, 11, 4), (11, 10, 2), (10, 7, 6),
         (7, 1, 8), (3, 9, 4), (3, 4, 2), (3, 2, 6), (3, 6, 8), (3, 8, 9), (4, 9, 5), (2, 4, 11), (6, 2, 10),
         (8, 6, 7), (9, 8, 1)]  # fmt: skip
    verts = [np.asarray(p, np.float64) / np.linalg.norm(p) for p in v]
    for _ in range(subdivisions):
        mid = {}

        def midpoint(a, b):
            key = (min(a, b), max(a, b))
            if key not in mid:
                m = verts[a] + verts[b]
                verts.append(m / np.linalg.norm(m))
                mid[key] = len(verts) - 1
            return mid[key]

        nf = []
        for a, b, c in f:
            ab, bc, ca = midpoint(a, b), midpoint(b, c), midpoint(c, a)
            nf += [(a, ab, ca), (b, bc, ab), (c, ca, bc), (ab, bc, ca)]
        f = nf
    return lib.Mesh(np.asarray(verts, np.float32) * radius, np.asarray(f, np.int32).reshape(-1))


def tessellated_box(lib, h=0.1, n=20):
    """Closed CCW box mesh of half extent ``h`` with every face split into n x n quads
    (12 n^2 triangles: 4800 for n = 20), vertices welded."""
    verts, index, faces = [], {}, []

    def vid(p):
        key = tuple(np.round(p, 9))
        if key not in index:
            index[key] = len(verts)
            verts.append(p)
        return index[key]

    g = np.linspace(-h, h, n + 1)
    for axis in range(3):
        for sign in (-1.0, 1.0):
            u, v = (axis + 1) % 3, (axis + 2) % 3
            for i in range(n):
                for j in range(n):
                    quad = []
                    for di, dj in ((0, 0), (1, 0), (1, 1), (0, 1)):
                        p = np.zeros(3)
                        p[axis] = sign * h
                        p[u], p[v] = g[i + di], g[j + dj]
                        quad.append(vid(p))
                    a, b, c, d = quad
                    faces += [(a, b, c), (a, c, d)] if sign > 0 else [(a, c, b), (a, d, c)]
    return lib.Mesh(np.asarray(verts, np.float32), np.asarray(faces, np.int32).reshape(-1))


def mesh_boxes(lib, sdf=False, device="cpu"):
    """A 4800-triangle box mesh resting face-down 1 mm deep on another, turned 30 degrees about z
    (a large flat contact patch); contact gap 5 mm per shape."""
    b = lib.ModelBuilder()
    b.default_shape_cfg.gap = 0.005
    lower, upper = tessellated_box(lib), tessellated_box(lib)
    if sdf:
        lower.build_sdf(max_resolution=64)
        upper.build_sdf(max_resolution=64)
    b.add_shape_mesh(-1, mesh=lower)
    body = b.add_body(xform=wp.transform((0.0, 0.0, 0.199), wp.quat_from_axis_angle(wp.vec3(0.0, 0.0, 1.0), 0.5236)))
    b.add_shape_mesh(body, mesh=upper)
    return b.finalize(device=device)


def mesh_boxes_sdf(lib, device="cpu"):
    return mesh_boxes(lib, sdf=True, device=device)


def mesh_pair(lib, sdf=False, device="cpu"):
    """Two 5120-triangle icospheres (radius 0.1 m), the upper one on a free body overlapping the
    static lower one by 2 mm; contact gap 5 mm per shape (the builder's default 0.1 m would put
    every feature of these 0.2 m meshes in detection range)."""
    b = lib.ModelBuilder()
    b.default_shape_cfg.gap = 0.005
    lower, upper = icosphere(lib), icosphere(lib)
    if sdf:
        lower.build_sdf(max_resolution=64)
        upper.build_sdf(max_resolution=64)
    b.add_shape_mesh(-1, mesh=lower)
    body = b.add_body(xform=wp.transform((0.01, 0.005, 0.198), wp.quat_identity()))
    b.add_shape_mesh(body, mesh=upper)
    return b.finalize(device=device)


def mesh_pair_sdf(lib, device="cpu"):
    return mesh_pair(lib, sdf=True, device=device)


def hydro_boxes(lib, device="cpu"):
    """A 0.1 m hydroelastic box resting 1 mm deep on a 0.5 x 0.5 x 0.1 m hydroelastic box."""
    b = lib.ModelBuilder()
    cfg = b.ShapeConfig(is_hydroelastic=True, sdf_max_resolution=32, kh=1.0e8)
    b.add_shape_box(-1, hx=0.25, hy=0.25, hz=0.05, cfg=cfg)
    body = b.add_body(xform=wp.transform((0.02, -0.01, 0.099), wp.quat_identity()))
    b.add_shape_box(body, hx=0.05, hy=0.05, hz=0.05, cfg=cfg)
    return b.finalize(device=device)


def bench(lib, scene, broad_phase, calls, device, **kw):
    model = scene(lib, device=device)
    state = model.state()
    pipeline = lib.CollisionPipeline(model, broad_phase=broad_phase, **kw)
    contacts = pipeline.contacts()
    for _ in range(3):
        pipeline.collide(state, contacts)
    wp.synchronize_device(device)
    t = protocol.clock()
    for _ in range(calls):
        pipeline.collide(state, contacts)
    wp.synchronize_device(device)
    dt = protocol.clock() - t
    return calls / dt, int(contacts.rigid_contact_count.numpy()[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--quick", action="store_true", help="5 calls per scene: a smoke run")
    protocol.add_arguments(ap)
    args = ap.parse_args()
    if args.quick:
        args.calls = 5
    results = protocol.Results.from_args(__file__, args)
    wp.config.quiet = True
    libs = {"armillary": importlib.import_module("armillary")}
    protocol.reference_on_path()
    try:
        libs["newton"] = importlib.import_module("newton")
    except ImportError:
        pass
    cases = [("1000 primitives", random_primitives, "sap", {}), ("1000 primitives", random_primitives, "nxn", {}),
             ("64-box pile", box_pile, "sap", {}), ("64-box pile", box_pile, "explicit", {}),
             ("boxes on mesh", boxes_on_mesh, "explicit", {"reduce_contacts": True}),
             ("boxes on mesh unred", boxes_on_mesh, "explicit", {"reduce_contacts": False}),
             ("5k mesh pair BVH", mesh_pair, "explicit", {}), ("5k mesh pair SDF", mesh_pair_sdf, "explicit", {}),
             ("5k mesh boxes BVH", mesh_boxes, "explicit", {}), ("5k mesh boxes SDF", mesh_boxes_sdf, "explicit", {}),
             ("hydro box on box", hydro_boxes, "explicit", {})]  # fmt: skip
    print(f"device={args.device} calls={args.calls}")
    print(f"{'scene':20s} {'broad':9s} " + " ".join(f"{name + ' calls/s':>18s} {'contacts':>8s}" for name in libs))
    rates = {}
    for label, scene, bp, kw in cases:
        row = []
        for name, lib in libs.items():
            try:
                rate, n = bench(lib, scene, bp, args.calls, args.device, **kw)
                rates[(label, name)] = rate
                results.add(f"{label} ({bp})", name, rate, "calls/s", contacts=n,
                            ratio_vs="newton" if name != "newton" and "newton" in libs else None)
                row.append(f"{rate:18.1f} {n:8d}")
            except Exception as e:  # a scene one engine cannot build or collide
                row.append(f"{'error: ' + type(e).__name__:>18s} {'-':>8s}")
        print(f"{label:20s} {bp:9s} " + " ".join(row), flush=True)
    for scene in ("5k mesh pair", "5k mesh boxes"):
        bvh, sdf = rates.get((scene + " BVH", "armillary")), rates.get((scene + " SDF", "armillary"))
        if bvh and sdf:
            print(f"armillary {scene}: SDF route / BVH route = {sdf / bvh:.1f}x calls/s (target >= 5x)")


if __name__ == "__main__":
    main()

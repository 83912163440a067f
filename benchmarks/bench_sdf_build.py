"""SDF construction time: ``Mesh.build_sdf`` on a ~50k-triangle torus (major radius 0.3 m, minor
0.1 m, 250 x 100 quads = 50,000 triangles, built in numpy) at max_resolution 64 and 128 with the
default narrow band (-0.1, 0.1) and a thin one (-0.005, 0.005), plus the time to load the same
SDF from the on-disk cache (``cache_dir``). The first build of a session also compiles / loads
the Warp kernels; it is run once untimed (warm-up) before the measurements.

Usage: python benchmarks/bench_sdf_build.py [--device cpu] [--repeat 1] [--quick] [--json PATH] [--cpu-time]
(the last two: benchmarks/_protocol.py; --quick: max_resolution 64 only)
"""

from __future__ import annotations

import argparse
import tempfile

import numpy as np
import warp as wp

import _protocol as protocol


def torus(R=0.3, r=0.1, nu=250, nv=100):
    u = np.linspace(0.0, 2.0 * np.pi, nu, endpoint=False)
    v = np.linspace(0.0, 2.0 * np.pi, nv, endpoint=False)
    uu, vv = np.meshgrid(u, v, indexing="ij")
    pts = np.stack([(R + r * np.cos(vv)) * np.cos(uu), (R + r * np.cos(vv)) * np.sin(uu), r * np.sin(vv)], -1)
    i, j = np.meshgrid(np.arange(nu), np.arange(nv), indexing="ij")
    a = i * nv + j
    b = ((i + 1) % nu) * nv + j
    c = ((i + 1) % nu) * nv + (j + 1) % nv
    d = i * nv + (j + 1) % nv
    tris = np.concatenate([np.stack([a, b, c], -1).reshape(-1, 3), np.stack([a, c, d], -1).reshape(-1, 3)])
    return pts.reshape(-1, 3), tris.astype(np.int32).reshape(-1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default=None)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="max_resolution 64 only: a smoke run")
    protocol.add_arguments(ap)
    args = ap.parse_args()
    results = protocol.Results.from_args(__file__, args)
    wp.config.quiet = True
    wp.init()
    import armillary as newton

    dev = wp.get_device(args.device)
    v, f = torus()
    mesh = newton.Mesh(v, f, compute_inertia=False)
    print(f"device {dev}, torus mesh: {len(f) // 3} triangles, watertight={mesh.is_watertight}")
    mesh.build_sdf(max_resolution=16, device=dev)  # warm-up (kernel compile / load)
    with tempfile.TemporaryDirectory() as cache:
        for res in (64,) if args.quick else (64, 128):
            for band in ((-0.1, 0.1), (-0.005, 0.005)):
                best = float("inf")
                for _ in range(args.repeat):
                    wp.synchronize_device(dev)
                    t0 = protocol.clock()
                    sdf = mesh.build_sdf(max_resolution=res, narrow_band_range=band, margin=0.05, device=dev)
                    best = min(best, protocol.clock() - t0)
                act, nb = sdf.active_bricks
                print(f"build res={res:4d} band={band}: {best * 1e3:9.1f} ms  dims={sdf.dims} "
                      f"memory={sdf.memory_bytes / 2**20:.2f} MiB  active bricks {act}/{nb}")  # fmt: skip
                results.add(f"50k-triangle torus, build res={res} band={band}", "armillary", best, "s", n=args.repeat,
                            stat="best", memory_bytes=int(sdf.memory_bytes))  # fmt: skip
            mesh.build_sdf(max_resolution=res, device=dev, cache_dir=cache)
            t0 = protocol.clock()
            sdf = mesh.build_sdf(max_resolution=res, device=dev, cache_dir=cache)
            t = protocol.clock() - t0
            assert sdf.loaded_from_cache
            print(f"cached load res={res:4d}: {t * 1e3:9.1f} ms")
            results.add(f"50k-triangle torus, cached load res={res}", "armillary", t, "s")


if __name__ == "__main__":
    main()

"""Tiled camera throughput: 64 worlds x one 64x64 camera of the 64-box pile (bench_xpbd's scene),
colour + depth with one directional light, in rays per second, for armillary's
``SensorTiledCamera`` and, when ``import newton`` works, the reference engine's (black box, same
script: the two APIs match). Never run as a test.

Each camera looks at its world's pile from (2.5, -1.5, 1.6) m; a timed call is one
``SensorTiledCamera.update`` (armillary's includes refitting its shape BVH from the state).

Run: ``python benchmarks/bench_camera.py [--worlds 64] [--size 64] [--repeats 5] [--quick] [--json PATH]``
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import warp as wp

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _protocol as protocol  # noqa: E402
from bench_xpbd import make_pile  # noqa: E402


def camera_transform(eye, target):
    """Camera-to-world transform (camera -Z forward, +Y up, world +Z up) as 7 floats."""
    eye, target = np.asarray(eye, float), np.asarray(target, float)
    f = (target - eye) / np.linalg.norm(target - eye)
    r = np.cross(f, (0.0, 0.0, 1.0))
    r /= np.linalg.norm(r)
    u = np.cross(r, f)
    q = wp.quat_from_matrix(wp.mat33(*np.stack([r, u, -f], axis=1).ravel().tolist()))
    return [*eye.tolist(), *q]


def rays_per_second(nt, worlds: int, size: int, repeats: int, device: str) -> tuple[float, float]:
    """(median rays/s over ``repeats`` timed windows, fraction of pixels that hit something)."""
    b = nt.ModelBuilder()
    b.replicate(make_pile(nt), worlds)
    model = b.finalize(device=device)
    cam = nt.sensors.SensorTiledCamera(model)
    cam.utils.create_default_light(enable_shadows=False)
    rays = cam.utils.compute_camera_rays_pinhole(size, size, camera_fovs=math.radians(50.0))
    tf = np.tile(np.asarray(camera_transform((2.5, -1.5, 1.6), (0.4, 0.4, 0.35)), np.float32), (1, worlds, 1))
    tf = wp.array(tf, dtype=wp.transformf, device=device)
    color = cam.utils.create_color_image_output(size, size)
    depth = cam.utils.create_depth_image_output(size, size)
    state = model.state()

    def render():
        cam.update(state, tf, rays, color_image=color, depth_image=depth)

    render()  # compile
    wp.synchronize_device(device)
    t = protocol.clock()
    render()
    wp.synchronize_device(device)
    probe = max(protocol.clock() - t, 1e-9)
    calls = max(1, min(1000, math.ceil(1.0 / probe)))
    costs = []
    for _ in range(repeats):
        t = protocol.clock()
        for _ in range(calls):
            render()
        wp.synchronize_device(device)
        costs.append((protocol.clock() - t) / calls)
    hit = float((depth.numpy() > 0.0).mean())
    return worlds * size * size / protocol.median(costs), hit


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worlds", type=int, default=64)
    p.add_argument("--size", type=int, default=64, help="image width = height [px]")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--device", default="cpu")
    p.add_argument("--quick", action="store_true", help="4 worlds, 32x32, 1 repeat: a smoke run")
    protocol.add_arguments(p)
    args = p.parse_args(argv)
    if args.quick:
        args.worlds, args.size, args.repeats = 4, 32, 1
    results = protocol.Results.from_args(__file__, args)
    wp.config.quiet = True
    wp.init()

    import armillary

    protocol.reference_on_path()
    try:
        import newton
    except Exception:  # noqa: BLE001 - newton is an optional black-box baseline
        newton = None

    scene = f"{args.worlds} worlds x {args.size}x{args.size} camera, 64-box pile"
    ours, hit = rays_per_second(armillary, args.worlds, args.size, args.repeats, args.device)
    line = f"{scene}: armillary {ours / 1e6:7.3f} Mrays/s (hit fraction {hit:.2f})"
    ref = None
    if newton is not None:
        try:
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # SensorTiledCamera is deprecated in newton 1.7+
                ref, ref_hit = rays_per_second(newton, args.worlds, args.size, args.repeats, args.device)
            line += f" | newton {ref / 1e6:7.3f} Mrays/s (hit fraction {ref_hit:.2f}) | ratio {ours / ref:5.2f}"
        except Exception as e:  # noqa: BLE001 - report, keep benchmarking
            line += f" | newton failed: {type(e).__name__}: {e}"
    print(line, flush=True)
    results.add(scene, "armillary", ours, metric="rays/s", ratio_vs="newton" if ref else None, n=args.repeats,
                worlds=args.worlds, width=args.size, height=args.size)  # fmt: skip
    results.add(scene, "newton", ref, metric="rays/s", n=args.repeats, worlds=args.worlds, width=args.size,
                height=args.size)  # fmt: skip
    return {"armillary_rays_per_s": ours, "newton_rays_per_s": ref}


if __name__ == "__main__":
    main()

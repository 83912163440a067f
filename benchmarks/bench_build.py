"""Build and finalize a 1024-world replicated 30-body robot; prints timings (target: < 2 s total).

Run: ``python benchmarks/bench_build.py [--worlds N] [--bodies N] [--quick] [--json PATH] [--cpu-time]`` (the last two:
``benchmarks/_protocol.py``).
"""

from __future__ import annotations

import argparse

import warp as wp

import _protocol as protocol
import armillary as newton


def make_robot(body_count: int = 30) -> newton.ModelBuilder:
    """A floating base with a branching chain of revolute links, one capsule per link."""
    rb = newton.ModelBuilder()
    base = rb.add_link(xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()), label="base")
    rb.add_shape_box(base, hx=0.2, hy=0.1, hz=0.05)
    joints = [rb.add_joint_free(base)]
    parents = [base]
    for i in range(1, body_count):
        parent = parents[(i - 1) // 2 if i > 2 else 0] if i % 3 == 0 else parents[-1]
        link = rb.add_link(label=f"link_{i}")
        rb.add_shape_capsule(link, radius=0.03, half_height=0.1)
        joints.append(
            rb.add_joint_revolute(
                parent,
                link,
                axis=newton.Axis.Y if i % 2 else newton.Axis.Z,
                parent_xform=wp.transform((0.0, 0.0, 0.2), wp.quat_identity()),
                limit_lower=-1.5,
                limit_upper=1.5,
                target_ke=100.0,
                target_kd=1.0,
            )
        )
        parents.append(link)
    rb.add_articulation(joints, label="robot")
    return rb


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--worlds", type=int, default=1024)
    p.add_argument("--bodies", type=int, default=30)
    p.add_argument("--quick", action="store_true", help="64 worlds: a smoke run")
    protocol.add_arguments(p)
    args = p.parse_args(argv)
    if args.quick:
        args.worlds = 64
    results = protocol.Results.from_args(__file__, args)
    wp.init()
    t0 = protocol.clock()
    robot = make_robot(args.bodies)
    scene = newton.ModelBuilder()
    scene.add_ground_plane()
    scene.replicate(robot, world_count=args.worlds, spacing=(2.0, 2.0, 0.0))
    t1 = protocol.clock()
    model = scene.finalize(device="cpu")
    t2 = protocol.clock()
    out = {"build_s": t1 - t0, "finalize_s": t2 - t1, "bodies": model.body_count, "joints": model.joint_count,
           "shapes": model.shape_count, "worlds": model.world_count}  # fmt: skip
    print(f"build    {out['build_s']:.3f} s")
    print(f"finalize {out['finalize_s']:.3f} s")
    print(f"total    {out['build_s'] + out['finalize_s']:.3f} s  ({model.body_count} bodies, {model.joint_count} joints, "
          f"{model.shape_count} shapes, {model.world_count} worlds)")  # fmt: skip
    scene_name = f"{args.bodies}-body robot x {args.worlds} worlds"
    results.add(f"{scene_name}: build", "armillary", out["build_s"], "s")
    results.add(f"{scene_name}: finalize", "armillary", out["finalize_s"], "s")
    results.add(f"{scene_name}: build + finalize", "armillary", out["build_s"] + out["finalize_s"], "s")
    return out


if __name__ == "__main__":
    main()

"""Kinematics / dynamics throughput: ``eval_fk`` on 1024 worlds of a 7-DOF arm and
``eval_mass_matrix`` on 256 worlds of a humanoid, in calls per second, next to newton (the
reference engine, used as a black box) when it is installed.

The humanoid is the robot-model corpus's ``mjcf/humanoid/humanoid.xml`` converted from the compiled
MuJoCo model by ``tests/oracle/mujoco_to_builder.py`` (needs ``mujoco``; falls back to a
synthetic 16-body floating tree otherwise). Both engines get the identical builder calls.

Run: ``python benchmarks/bench_kinematics.py [--arm-worlds N] [--humanoid-worlds N] [--device cpu] [--quick]
[--json PATH] [--cpu-time]`` (the last two: ``benchmarks/_protocol.py``).
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings

import numpy as np
import warp as wp

import _protocol as protocol

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _corpus_humanoid() -> str:
    """``mjcf/humanoid/humanoid.xml`` of the robot-model corpus (``shared_assets_dir``), or ``""``."""
    from armillary.testing.assets import shared_assets_dir

    assets = shared_assets_dir(__file__)
    return os.path.join(assets, "mjcf", "humanoid", "humanoid.xml") if assets else ""


HUMANOID = _corpus_humanoid()


def make_arm(nt):
    """A 7-DOF revolute arm with alternating Z/Y axes (Panda-like proportions)."""
    b = nt.ModelBuilder()
    links, joints = [], []
    parent = -1
    for i in range(7):
        link = b.add_link(mass=1.0, com=(0.0, 0.0, 0.1), inertia=wp.mat33(np.eye(3, dtype=np.float32) * 0.01))
        joints.append(b.add_joint_revolute(
            parent, link, axis=(0.0, 0.0, 1.0) if i % 2 == 0 else (0.0, 1.0, 0.0),
            parent_xform=wp.transform((0.0, 0.0, 0.0 if i == 0 else 0.2), wp.quat_identity()),
        ))  # fmt: skip
        parent = link
        links.append(link)
    b.add_articulation(joints, label="arm")
    return b


def make_humanoid(nt):
    if os.path.exists(HUMANOID):
        try:
            import mujoco

            sys.path.insert(0, ROOT)
            from tests.oracle.mujoco_to_builder import builder_from_mjmodel

            return builder_from_mjmodel(mujoco.MjModel.from_xml_path(HUMANOID), nt).builder, "humanoid.xml (MuJoCo)"
        except ImportError:
            pass
    b = nt.ModelBuilder()
    root = b.add_link(mass=5.0, inertia=wp.mat33(np.eye(3, dtype=np.float32) * 0.1))
    joints = [b.add_joint_free(root)]
    tips = [root] * 4
    for i in range(15):
        link = b.add_link(mass=1.0, com=(0.0, 0.0, -0.1), inertia=wp.mat33(np.eye(3, dtype=np.float32) * 0.01))
        joints.append(b.add_joint_revolute(tips[i % 4], link, axis=(1.0, 0.0, 0.0) if i % 2 else (0.0, 1.0, 0.0),
                                           parent_xform=wp.transform((0.0, 0.0, -0.2), wp.quat_identity())))
        tips[i % 4] = link
    b.add_articulation(joints, label="humanoid")
    return b, "synthetic 16-body tree"


def replicate(nt, robot, worlds, device):
    scene = nt.ModelBuilder()
    scene.replicate(robot, worlds)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return scene.finalize(device=device, skip_validation_inertia=True)
        except TypeError:
            return scene.finalize(device=device)


def rate(fn, device, min_time=0.5):
    fn()
    wp.synchronize_device(device)
    n, t0 = 0, protocol.clock()
    while True:
        fn()
        n += 1
        if n % 10 == 0:
            wp.synchronize_device(device)
            dt = protocol.clock() - t0
            if dt >= min_time:
                return n / dt


def bench(nt, arm_worlds, humanoid_worlds, device):
    arm = replicate(nt, make_arm(nt), arm_worlds, device)
    s_arm = arm.state()
    s_arm.joint_q.assign(np.random.default_rng(0).uniform(-1, 1, arm.joint_coord_count).astype(np.float32))
    fk = rate(lambda: nt.eval_fk(arm, s_arm.joint_q, s_arm.joint_qd, s_arm), device)
    robot, what = make_humanoid(nt)
    hum = replicate(nt, robot, humanoid_worlds, device)
    s_h = hum.state()
    nt.eval_fk(hum, s_h.joint_q, s_h.joint_qd, s_h)
    n = hum.max_dofs_per_articulation
    H = wp.zeros((hum.articulation_count, n, n), dtype=wp.float32, device=device)
    mm = rate(lambda: nt.eval_mass_matrix(hum, s_h, H=H), device)
    return fk, mm, what


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--arm-worlds", type=int, default=1024)
    p.add_argument("--humanoid-worlds", type=int, default=256)
    p.add_argument("--device", default=None)
    p.add_argument("--quick", action="store_true", help="64 arm worlds, 16 humanoid worlds: a smoke run")
    protocol.add_arguments(p)
    args = p.parse_args(argv)
    if args.quick:
        args.arm_worlds, args.humanoid_worlds = 64, 16
    table = protocol.Results.from_args(__file__, args)
    wp.config.quiet = True
    wp.init()
    device = wp.get_device(args.device)
    import armillary

    results = {}
    engines = [("armillary", armillary)]
    protocol.reference_on_path()
    try:
        import newton

        engines.append(("newton", newton))
    except ImportError:
        pass
    for name, nt in engines:
        fk, mm, what = bench(nt, args.arm_worlds, args.humanoid_worlds, device)
        results[name] = {"eval_fk": fk, "eval_mass_matrix": mm}
    print(f"device {device}; humanoid: {what}")
    fk_head = f"eval_fk 7-DOF x{args.arm_worlds}"
    mm_head = f"eval_mass_matrix humanoid x{args.humanoid_worlds}"
    print(f"{'engine':<10} {fk_head:>24} {mm_head:>36}")
    for name, r in results.items():
        print(f"{name:<10} {r['eval_fk']:>18.0f} calls/s {r['eval_mass_matrix']:>30.0f} calls/s")
    for name, r in results.items():
        vs = "newton" if name != "newton" and "newton" in results else None
        table.add(f"eval_fk, 7-DOF arm x {args.arm_worlds} worlds", name, r["eval_fk"], "calls/s", ratio_vs=vs)
        table.add(f"eval_mass_matrix, {what} x {args.humanoid_worlds} worlds", name, r["eval_mass_matrix"],
                  "calls/s", ratio_vs=vs)
    return results


if __name__ == "__main__":
    main()

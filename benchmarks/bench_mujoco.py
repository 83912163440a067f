"""SolverMuJoCo throughput: the shared-corpus humanoid (one world) and a 64-world batch of it, in
steps per second, next to raw ``mujoco.mj_step`` on the same XML (one ``MjData`` per world, a
Python loop: exactly the work SolverMuJoCo's C backend does) and newton's SolverMuJoCo (C backend,
used as a black box) when it is installed. The ratio ours / raw is the framework overhead target
(>= 1/1.2).

Both start from the XML's initial pose and fall onto the floor (contacts included); the solver
steps ``state_0 -> state_1`` with ``control`` and no armillary contacts (MuJoCo's own).

Run: ``python benchmarks/bench_mujoco.py [--steps N] [--worlds N]``.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np
import warp as wp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HUMANOID = os.path.join(ROOT, "..", "shared", "assets", "mjcf", "humanoid", "humanoid.xml")


def raw_rate(xml, worlds, steps):
    import mujoco

    m = mujoco.MjModel.from_xml_path(xml)
    datas = [mujoco.MjData(m) for _ in range(worlds)]
    for _ in range(5):
        for d in datas:
            mujoco.mj_step(m, d)
    t = time.perf_counter()
    for _ in range(steps):
        for d in datas:
            mujoco.mj_step(m, d)
    return steps / (time.perf_counter() - t)


def engine_rate(nt, solver_cls, xml, worlds, steps, **kw):
    b = nt.ModelBuilder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b.add_mjcf(xml)
        if worlds > 1:
            top = nt.ModelBuilder()
            top.replicate(b, worlds)
            b = top
        model = b.finalize(device="cpu")
        solver = solver_cls(model, **kw)
    s0, s1, control = model.state(), model.state(), model.control()
    nt.eval_fk(model, s0.joint_q, s0.joint_qd, s0)
    for _ in range(5):
        solver.step(s0, s1, control, None, 0.005)
        s0, s1 = s1, s0
    t = time.perf_counter()
    for _ in range(steps):
        solver.step(s0, s1, control, None, 0.005)
        s0, s1 = s1, s0
    wp.synchronize()
    return steps / (time.perf_counter() - t)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--worlds", type=int, default=64)
    parser.add_argument("--warp", action="store_true", help="also time the MuJoCo Warp backend (slow on the CPU)")
    args = parser.parse_args()
    wp.config.log_level = wp.LOG_WARNING
    if not os.path.exists(HUMANOID):
        raise SystemExit(f"needs the shared asset corpus: {HUMANOID} not found")
    import armillary
    from armillary.solvers import SolverMuJoCo

    try:
        import newton
        from newton.solvers import SolverMuJoCo as NewtonMuJoCo
    except Exception:  # noqa: BLE001 - optional black-box baseline
        newton = None
    cwd = os.getcwd()
    os.chdir(os.path.dirname(HUMANOID))  # MuJoCo may write MUJOCO_LOG.TXT
    try:
        for worlds, steps in ((1, args.steps), (args.worlds, max(args.steps // args.worlds * 4, 20))):
            print(f"\n== humanoid x {worlds} world(s), {steps} steps of 5 ms")
            raw = raw_rate(HUMANOID, worlds, steps)
            ours = engine_rate(armillary, SolverMuJoCo, HUMANOID, worlds, steps)
            print(f"raw mujoco.mj_step loop:   {raw:9.1f} steps/s")
            print(f"armillary SolverMuJoCo:    {ours:9.1f} steps/s   overhead raw/ours = {raw / ours:.2f}x")
            if args.warp:
                mjw_rate = engine_rate(armillary, SolverMuJoCo, HUMANOID, worlds, max(steps // 10, 5), use_mujoco_cpu=False)
                print(f"armillary SolverMuJoCo, MuJoCo Warp backend on {wp.get_device()}: {mjw_rate:9.1f} steps/s")
            if newton is not None:
                try:
                    theirs = engine_rate(newton, NewtonMuJoCo, HUMANOID, worlds, steps, use_mujoco_cpu=True)
                    print(f"newton SolverMuJoCo (CPU): {theirs:9.1f} steps/s   ratio armillary/newton = {ours / theirs:.2f}")
                except Exception as e:  # noqa: BLE001
                    print(f"newton SolverMuJoCo failed: {type(e).__name__}: {e}")
    finally:
        os.chdir(cwd)


if __name__ == "__main__":
    main()

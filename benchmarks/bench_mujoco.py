"""SolverMuJoCo throughput: the shared-corpus humanoid (one world) and a 64-world batch of it, in
steps per second, next to raw ``mujoco.mj_step`` on the same XML (one ``MjData`` per world, a
Python loop: exactly the work SolverMuJoCo's C backend does) and newton's SolverMuJoCo (C backend,
used as a black box) when it is installed. The ratio ours / raw is the framework overhead target
(>= 1/1.2).

Both start from the XML's initial pose and fall onto the floor (contacts included); the solver
steps ``state_0 -> state_1`` with ``control`` and no armillary contacts (MuJoCo's own).

Run: ``python benchmarks/bench_mujoco.py [--steps N] [--worlds N] [--quick] [--json PATH] [--cpu-time]`` (the last
two: ``benchmarks/_protocol.py``).
"""

from __future__ import annotations

import argparse
import os
import warnings

import numpy as np
import warp as wp

import _protocol as protocol


def _corpus_humanoid() -> str:
    """``mjcf/humanoid/humanoid.xml`` of the robot-model corpus (``shared_assets_dir``), or ``""``."""
    from armillary.testing.assets import shared_assets_dir

    assets = shared_assets_dir(__file__)
    return os.path.join(assets, "mjcf", "humanoid", "humanoid.xml") if assets else ""


HUMANOID = _corpus_humanoid()


def raw_stepper(xml, worlds):
    """A function running ``n`` raw ``mj_step`` loops over one ``MjData`` per world."""
    import mujoco

    m = mujoco.MjModel.from_xml_path(xml)
    datas = [mujoco.MjData(m) for _ in range(worlds)]

    def run(n):
        for _ in range(n):
            for d in datas:
                mujoco.mj_step(m, d)

    return run


def engine_stepper(nt, solver_cls, xml, worlds, **kw):
    """A function running ``n`` steps of an engine's solver on the XML replicated ``worlds`` times."""
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
    states = [model.state(), model.state()]
    control = model.control()
    nt.eval_fk(model, states[0].joint_q, states[0].joint_qd, states[0])

    def run(n):
        for _ in range(n):
            solver.step(states[0], states[1], control, None, 0.005)
            states.reverse()
        wp.synchronize()

    return run


def best_rates(runners, steps, rounds):
    """Steps/s of each runner: the best of ``rounds`` interleaved timings (a shared machine's
    load hits every runner alike; the best round is the least disturbed)."""
    for run in runners:
        run(5)  # warm up (compilation, first allocations)
    best = [0.0] * len(runners)
    for _ in range(rounds):
        for i, run in enumerate(runners):
            t = protocol.clock()
            run(steps)
            best[i] = max(best[i], steps / (protocol.clock() - t))
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--worlds", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=7, help="interleaved timing rounds (best kept)")
    parser.add_argument("--warp", action="store_true", help="also time the MuJoCo Warp backend (slow on the CPU)")
    parser.add_argument("--quick", action="store_true", help="50 steps, 4 worlds, 1 round: a smoke run")
    protocol.add_arguments(parser)
    args = parser.parse_args()
    if args.quick:
        args.steps, args.worlds, args.rounds = 50, 4, 1
    results = protocol.Results.from_args(__file__, args)
    wp.config.log_level = wp.LOG_WARNING
    if not os.path.exists(HUMANOID):
        raise SystemExit(f"needs the robot-model corpus (scripts/setup.sh installs it, or set ARMILLARY_ASSETS): "
                         f"{HUMANOID or 'mjcf/humanoid/humanoid.xml'} not found")
    import armillary
    from armillary.solvers import SolverMuJoCo

    protocol.reference_on_path()
    try:
        import newton
        from newton.solvers import SolverMuJoCo as NewtonMuJoCo
    except Exception:  # noqa: BLE001 - optional black-box baseline
        newton = None
    cwd = os.getcwd()
    os.chdir(os.path.dirname(HUMANOID))  # MuJoCo may write MUJOCO_LOG.TXT
    try:
        for worlds, steps in ((1, args.steps), (args.worlds, max(args.steps // args.worlds * 12, 50))):
            print(f"\n== humanoid x {worlds} world(s), {steps} steps of 5 ms, best of {args.rounds} interleaved rounds")
            runners = [raw_stepper(HUMANOID, worlds), engine_stepper(armillary, SolverMuJoCo, HUMANOID, worlds)]
            if newton is not None and worlds > 1:
                # newton's C backend refuses several worlds without separate_worlds=True, and with it
                # keeps a single 17-body MjModel and one MjData (observed as a black box): it does not
                # step 64 humanoids, so its rate is not comparable
                print("newton SolverMuJoCo (CPU): not compared (one MjData for all worlds)")
            elif newton is not None:
                try:
                    runners.append(engine_stepper(newton, NewtonMuJoCo, HUMANOID, worlds, use_mujoco_cpu=True))
                except Exception as e:  # noqa: BLE001
                    print(f"newton SolverMuJoCo failed: {type(e).__name__}: {e}")
            rates = best_rates(runners, steps, args.rounds)
            raw, ours = rates[0], rates[1]
            scene = f"humanoid x {worlds} world{'s' if worlds > 1 else ''}"
            best = {"n": args.rounds, "stat": "best"}
            results.add(scene, "armillary", ours, ratio_vs="mujoco", **best)
            results.add(scene, "mujoco", raw, **best)
            if len(rates) > 2:
                results.add(scene, "newton", rates[2], **best)
            print(f"raw mujoco.mj_step loop:   {raw:9.1f} steps/s")
            print(f"armillary SolverMuJoCo:    {ours:9.1f} steps/s   overhead raw/ours = {raw / ours:.2f}x")
            if len(rates) > 2:
                print(f"newton SolverMuJoCo (CPU): {rates[2]:9.1f} steps/s   ratio armillary/newton = {ours / rates[2]:.2f}")
            if args.warp:
                run = engine_stepper(armillary, SolverMuJoCo, HUMANOID, worlds, use_mujoco_cpu=False)
                mjw_rate = best_rates([run], max(steps // 10, 5), 1)[0]
                print(f"armillary SolverMuJoCo, MuJoCo Warp backend on {wp.get_device()}: {mjw_rate:9.1f} steps/s")
                results.add(f"{scene}, MuJoCo Warp backend", "armillary", mjw_rate)
    finally:
        os.chdir(cwd)


if __name__ == "__main__":
    main()

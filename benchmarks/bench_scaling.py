"""Scaling with the number of worlds: cost per step of the cartpole under ``SolverFeatherstone`` (the
scene of bench_featherstone.py, no contacts) and of the 64-box pile under ``SolverXPBD`` with collision
detection every step (the scene and loop of bench_xpbd.py), each replicated over 1, 16, 256 and
4096 worlds, for armillary (the 4096-world pile, 262,144 boxes, costs ~10 CPU seconds per step and
about two minutes in all on a 2-core CPU; ``--pile-worlds`` lowers it).

Printed per world count: bodies, cost per step, cost per world-step, and memory per world: the bytes
of every Warp array held by the Model, one State, the Control and the Contacts, divided by the worlds
(the step loop holds a second State; solver-internal arrays are not counted). Then, per scene, the
least-squares line ``cost per step = fixed + per_world x worlds`` and its R^2 (1 = exactly linear;
the fixed part is the per-step launch overhead that a single world pays alone), and the exponent k of
``cost ~ worlds^k`` between the two largest world counts (1 = linear; above 1, the cost per world grows,
e.g. once the arrays outgrow the CPU caches).

Each figure is the median of ``--repeats`` timed windows of as many steps as fill ``--window``
seconds (at least one step), after ``--warmup`` steps (fewer once they have taken a window: at least the
first, which compiles). Never run as a test.

Run: ``python benchmarks/bench_scaling.py [--worlds 1 16 256 4096] [--pile-worlds 1 16 256 4096] [--repeats 3]
[--window 0.5] [--device cpu] [--quick] [--json PATH] [--cpu-time]`` (the last two: ``benchmarks/_protocol.py``;
``--quick``: 1 and 16 worlds).
"""

from __future__ import annotations

import argparse
import math
import warnings

import numpy as np
import warp as wp

import _protocol as protocol
from bench_featherstone import DT as CARTPOLE_DT
from bench_featherstone import make_cartpole
from bench_xpbd import DT as PILE_DT
from bench_xpbd import make_pile

PILE_ITERATIONS = 4  # bench_xpbd.py's default


def array_bytes(*objects) -> int:
    """Bytes of the distinct Warp arrays held by ``objects`` (their attributes, and the values of
    dicts, lists and tuples among them, one level deep)."""
    seen: set[int] = set()
    total = 0

    def add(value) -> None:
        nonlocal total
        if isinstance(value, wp.array) and id(value) not in seen:
            seen.add(id(value))
            total += int(value.capacity or value.size * wp.types.type_size_in_bytes(value.dtype))

    for obj in objects:
        for value in vars(obj).values():
            add(value)
            if isinstance(value, dict):
                value = list(value.values())
            if isinstance(value, (list, tuple)):
                for item in value:
                    add(item)
    return total


def cartpole(worlds: int, device):
    """A stepper for ``worlds`` cartpoles (pole at 0.3 rad), and what it holds."""
    import armillary

    b = armillary.ModelBuilder()
    b.replicate(make_cartpole(armillary), worlds)
    model = b.finalize(device=device)
    s0, s1, control = model.state(), model.state(), model.control()
    s0.joint_q.assign(np.tile([0.0, 0.3], worlds).astype(np.float32))
    armillary.eval_fk(model, s0.joint_q, s0.joint_qd, s0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        solver = armillary.solvers.SolverFeatherstone(model, angular_damping=0.0)
    states = [s0, s1]

    def step():
        solver.step(states[0], states[1], control, None, CARTPOLE_DT)
        states.reverse()

    return step, model, (model, s0, control)


def pile(worlds: int, device):
    """A stepper for ``worlds`` 64-box piles (collide, then one XPBD step), and what it holds."""
    import armillary

    b = armillary.ModelBuilder()
    b.replicate(make_pile(armillary), worlds)
    model = b.finalize(device=device)
    solver = armillary.solvers.SolverXPBD(model, iterations=PILE_ITERATIONS)
    pipeline = armillary.CollisionPipeline(model)
    contacts = pipeline.contacts()
    s0, s1, control = model.state(), model.state(), model.control()
    states = [s0, s1]

    def step():
        states[0].clear_forces()
        pipeline.collide(states[0], contacts)
        solver.step(states[0], states[1], control, contacts, PILE_DT)
        states.reverse()

    return step, model, (model, s0, control, contacts)


SCENES = {"cartpole": ("cartpole, SolverFeatherstone", cartpole),
          "pile": ("64-box pile, SolverXPBD + collide", pile)}  # fmt: skip


def seconds_per_step(step, device, window: float, repeats: int, warmup: int) -> tuple[float, int]:
    """Median seconds per step over ``repeats`` windows of ~``window`` s; returns (median, steps per window)."""
    t = protocol.clock()
    for i in range(max(warmup, 1)):
        step()
        if i + 1 < warmup and protocol.clock() - t > window:
            break  # a large configuration: the first step compiled, more warm-up costs minutes
    wp.synchronize_device(device)
    t = protocol.clock()
    step()
    wp.synchronize_device(device)
    probe = max(protocol.clock() - t, 1e-9)
    steps = max(1, min(10000, math.ceil(window / probe)))
    costs = []
    for _ in range(repeats):
        t = protocol.clock()
        for _ in range(steps):
            step()
        wp.synchronize_device(device)
        costs.append((protocol.clock() - t) / steps)
    return protocol.median(costs), steps


def linear_fit(x, y) -> tuple[float, float, float]:
    """Least-squares ``y = a + b x``: (a, b, R^2)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    b, a = np.polyfit(x, y, 1) if len(x) > 1 else (0.0, float(y[0]))
    ss_res = float(((y - (a + b * x)) ** 2).sum())
    ss_tot = float(((y - y.mean()) ** 2).sum())
    return float(a), float(b), 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scene", nargs="+", choices=sorted(SCENES), default=sorted(SCENES))
    p.add_argument("--worlds", type=int, nargs="+", default=[1, 16, 256, 4096], help="cartpole world counts")
    p.add_argument("--pile-worlds", type=int, nargs="+", default=[1, 16, 256, 4096],
                   help="box-pile world counts (4096 worlds: ~2 minutes on a 2-core CPU)")
    p.add_argument("--repeats", type=int, default=3, help="timed windows per configuration (median)")
    p.add_argument("--window", type=float, default=0.5, help="seconds per timed window")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--device", default="cpu")
    p.add_argument("--quick", action="store_true", help="1 and 16 worlds, 1 short window: a smoke run")
    protocol.add_arguments(p)
    args = p.parse_args(argv)
    if args.quick:
        args.worlds = args.pile_worlds = [1, 16]
        args.repeats, args.window, args.warmup = 1, 0.1, 2
    for name, counts in (("--worlds", args.worlds), ("--pile-worlds", args.pile_worlds)):
        if any(w < 1 for w in counts):
            p.error(f"{name} {counts}: every world count must be >= 1")
    args.worlds, args.pile_worlds = sorted(set(args.worlds)), sorted(set(args.pile_worlds))
    results = protocol.Results.from_args(__file__, args)
    wp.config.quiet = True
    wp.init()
    device = wp.get_device(args.device)
    clock = "CPU" if protocol.cpu_time() else "wall"
    print(f"device {device}; median of {args.repeats} windows of ~{args.window} s ({clock} time) after "
          f"up to {args.warmup} warm-up steps")  # fmt: skip
    out = {}
    for key in args.scene:
        title, make = SCENES[key]
        counts = args.pile_worlds if key == "pile" else args.worlds
        print(f"\n== {title}")
        print(f"{'worlds':>7} {'bodies':>8} {'ms/step':>10} {'us/world-step':>14} {'KiB/world':>10} "
              f"{'steps timed':>12}")
        costs = []
        for worlds in counts:
            step, model, held = make(worlds, device)
            cost, steps = seconds_per_step(step, device, args.window, args.repeats, args.warmup)
            per_world = array_bytes(*held) / worlds
            costs.append(cost)
            print(f"{worlds:7d} {model.body_count:8d} {cost * 1e3:10.3f} {cost / worlds * 1e6:14.2f} "
                  f"{per_world / 1024:10.2f} {steps:>5d} x {args.repeats}", flush=True)  # fmt: skip
            results.add(f"{title}: {worlds} world{'s' if worlds > 1 else ''}", "armillary", cost * 1e3, "ms/step",
                        n=args.repeats, worlds=worlds, bodies=model.body_count,
                        us_per_world_step=round(cost / worlds * 1e6, 3), bytes_per_world=round(per_world))  # fmt: skip
            del step, model, held
        fixed, slope, r2 = linear_fit(counts, costs)
        line = f"linear fit: {fixed * 1e3:.3f} ms + {slope * 1e6:.3f} us x worlds per step, R^2 = {r2:.4f}"
        extra = {"fixed_ms": round(fixed * 1e3, 4), "us_per_world": round(slope * 1e6, 4)}
        k = None
        if len(counts) > 1:
            (w0, c0), (w1, c1) = list(zip(counts, costs))[-2:]
            k = math.log(c1 / c0) / math.log(w1 / w0)
            line += f"; cost ~ worlds^{k:.2f} from {w0} to {w1} worlds"
            extra.update(exponent=round(k, 3), exponent_between=[w0, w1])
        print(line)
        results.add(f"{title}: linear fit over {len(counts)} world counts", "armillary", r2, "R^2", **extra)
        out[key] = {"worlds": counts, "s_per_step": costs, "fixed_s": fixed, "s_per_world": slope, "r2": r2,
                    "exponent": k}
    return out


if __name__ == "__main__":
    main()

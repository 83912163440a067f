"""SolverVBD throughput: a 32 x 32-vertex cloth (1024 particles, 1922 triangles) falling onto and
draped over a static sphere, collision detection every step, dt = 1/600 s, 10 iterations, for
armillary and, when installed, the reference engine newton on the identical scene in the same run.

Prints steps/s (collide + step), the ratio armillary / newton (target >= 1.5x on the CPU), and the
solver's device memory (allocated arrays, bytes per particle and per contact slot).

Usage: python benchmarks/bench_vbd.py [--device cpu] [--steps 300] [--warmup 20] [--quick] [--json PATH]
[--cpu-time] (the last two: benchmarks/_protocol.py)
"""

from __future__ import annotations

import argparse
import importlib

import numpy as np
import warp as wp

import _protocol as protocol

N, CELL, SPHERE_R, DT, ITERATIONS = 32, 0.05, 0.4, 1.0 / 600.0, 10


def cloth_on_sphere(lib, device="cpu"):
    b = lib.ModelBuilder()
    span = (N - 1) * CELL
    b.add_cloth_grid(pos=wp.vec3(-0.5 * span, -0.5 * span, SPHERE_R + 0.6), rot=wp.quat_identity(),
                     vel=wp.vec3(0.0), dim_x=N - 1, dim_y=N - 1, cell_x=CELL, cell_y=CELL, mass=0.01,
                     tri_ke=1.0e4, tri_ka=1.0e4, tri_kd=1.0e-5, edge_ke=1.0, edge_kd=1.0e-3,
                     particle_radius=0.01)  # fmt: skip
    b.add_shape_sphere(-1, xform=wp.transform((0.0, 0.0, 0.0), wp.quat_identity()), radius=SPHERE_R)
    b.color()
    return b.finalize(device=device)


def _array_bytes(obj, seen) -> int:
    total = 0
    for v in vars(obj).values():
        if isinstance(v, wp.array) and id(v) not in seen:
            seen.add(id(v))
            total += v.capacity if hasattr(v, "capacity") and v.capacity else v.size * wp.types.type_size_in_bytes(v.dtype)
    return total


def solver_bytes(solver) -> int:
    seen: set[int] = set()
    total = _array_bytes(solver, seen)
    for name in ("_particles", "_rigid"):
        half = getattr(solver, name, None)
        if half is not None:
            total += _array_bytes(half, seen)
            for sub in vars(half).values():
                if hasattr(sub, "__dict__") and not isinstance(sub, wp.array) and type(sub).__module__.startswith(
                        "armillary_solver_vbd"):  # fmt: skip
                    total += _array_bytes(sub, seen)
    return total


def bench(lib, steps, warmup, device):
    model = cloth_on_sphere(lib, device)
    solver = lib.solvers.SolverVBD(model, iterations=ITERATIONS)
    pipeline = lib.CollisionPipeline(model)
    contacts = pipeline.contacts()
    s0, s1 = model.state(), model.state()
    control = model.control()

    def one():
        nonlocal s0, s1
        pipeline.collide(s0, contacts)
        solver.step(s0, s1, control, contacts, DT)
        s0, s1 = s1, s0

    for _ in range(warmup):
        one()
    wp.synchronize_device(device)
    t = protocol.clock()
    for _ in range(steps):
        one()
    wp.synchronize_device(device)
    rate = steps / (protocol.clock() - t)
    q = s0.particle_q.numpy()
    ok = bool(np.isfinite(q).all())
    soft = int(contacts.soft_contact_count.numpy()[0])
    return rate, ok, soft, solver, model, contacts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="20 steps after 2 warm-up steps: a smoke run")
    protocol.add_arguments(ap)
    args = ap.parse_args()
    if args.quick:
        args.steps, args.warmup = 20, 2
    results = protocol.Results.from_args(__file__, args)
    wp.config.quiet = True
    libs = {"armillary": importlib.import_module("armillary")}
    protocol.reference_on_path()
    try:
        libs["newton"] = importlib.import_module("newton")
    except ImportError:
        print("newton is not installed: armillary only")
    print(f"device={args.device} cloth {N}x{N} on a sphere, dt=1/600, {ITERATIONS} iterations, "
          f"{args.steps} steps after {args.warmup} warm-up steps")  # fmt: skip
    rates = {}
    for name, lib in libs.items():
        try:
            rate, ok, soft, solver, model, contacts = bench(lib, args.steps, args.warmup, args.device)
        except Exception as e:  # noqa: BLE001 - report and go on with the other engine
            print(f"{name:10s} error: {type(e).__name__}: {e}")
            continue
        rates[name] = rate
        line = f"{name:10s} {rate:9.1f} steps/s  finite={ok}  soft contacts={soft}"
        if name == "armillary":
            nbytes = solver_bytes(solver)
            per = nbytes / max(model.particle_count + contacts.soft_contact_max, 1)
            line += (f"  solver arrays={nbytes / 1024:.0f} KiB ({nbytes / model.particle_count:.0f} B/particle; "
                     f"{per:.0f} B per particle+contact slot, {contacts.soft_contact_max} soft slots)")  # fmt: skip
        print(line, flush=True)
    for name, rate in rates.items():
        vs = "newton" if name != "newton" and "newton" in rates else None
        results.add(f"cloth {N}x{N} on a sphere", name, rate, ratio_vs=vs)
    if "armillary" in rates and "newton" in rates:
        print(f"armillary / newton = {rates['armillary'] / rates['newton']:.2f}x steps/s (target >= 1.5x)")


if __name__ == "__main__":
    main()

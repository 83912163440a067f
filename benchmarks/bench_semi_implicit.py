"""SolverSemiImplicit throughput: the 64-box pile (the scene of bench_xpbd.py) and a 32 x 32-vertex
cloth (1024 particles, 1922 triangles) falling onto a static sphere, in steps per second, next to
newton's SolverSemiImplicit (the reference engine, used as a black box) on the same scenes in the
same run when ``import newton`` works.

Both engines get identical builder calls and step the same loop: collision detection with their
own ``CollisionPipeline`` (SAP broad phase) every step, then one ``SolverSemiImplicit`` step (newton
additionally rebuilds its ``model.particle_grid`` for particle-particle contacts, which armillary's
solver does inside ``step``). Each line ends with the mean body / particle height after the run,
to see that both engines simulate the same thing. A few
warm-up steps (kernel compilation, settling) are not timed. Target (issue 18): armillary at least
1.5x the reference on the CPU. Never run as a test.

Run: ``python benchmarks/bench_semi_implicit.py [--steps N] [--repeat R] [--device cpu|cuda:0] [--scene pile|cloth]
[--quick] [--json PATH] [--cpu-time]`` (the last two: ``benchmarks/_protocol.py``).
To compare with the reference, run it with an interpreter that has both engines (armillary and this
plugin installed editable next to newton).
"""

from __future__ import annotations

import argparse

import numpy as np
import warp as wp

import _protocol as protocol

DT = 1.0 / 600.0
CLOTH_N, CELL, SPHERE_R = 32, 0.05, 0.4


def make_pile(nt, n=4):
    """n^3 boxes (0.2 m) on a jittered lattice above the ground (bench_xpbd.py's scene)."""
    rng = np.random.default_rng(0)
    b = nt.ModelBuilder()
    for i in range(n):
        for j in range(n):
            for k in range(n):
                body = b.add_body(xform=wp.transform(
                    wp.vec3(0.25 * i + rng.uniform(-0.02, 0.02), 0.25 * j + rng.uniform(-0.02, 0.02), 0.12 + 0.21 * k),
                    wp.quat_from_axis_angle(wp.vec3(0.0, 0.0, 1.0), float(rng.uniform(0.0, 1.0)))))  # fmt: skip
                b.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1, cfg=nt.ModelBuilder.ShapeConfig(density=1000.0, mu=0.5))
    b.add_ground_plane()
    return b


def make_cloth(nt):
    """A 32 x 32-vertex cloth (5 cm cells, 0.1 kg particles) 0.6 m above a static 0.4 m sphere, with
    bending edges; masses and stiffnesses sized for the explicit integrator at dt = 1/600 s with the
    default soft-contact gains; the particle-particle damping is lowered after finalize (cloth_setup:
    the default 100 N s/m gives kd dt / m > 2 per contact pair and both engines blow up once the
    cloth folds on the sphere)."""
    b = nt.ModelBuilder()
    span = (CLOTH_N - 1) * CELL
    b.add_cloth_grid(pos=wp.vec3(-0.5 * span, -0.5 * span, SPHERE_R + 0.6), rot=wp.quat_identity(),
                     vel=wp.vec3(0.0), dim_x=CLOTH_N - 1, dim_y=CLOTH_N - 1, cell_x=CELL, cell_y=CELL, mass=0.1,
                     tri_ke=1.0e3, tri_ka=1.0e3, tri_kd=1.0e-1, edge_ke=1.0e-2, edge_kd=1.0e-3,
                     particle_radius=0.01)  # fmt: skip
    b.add_shape_sphere(-1, xform=wp.transform((0.0, 0.0, 0.0), wp.quat_identity()), radius=SPHERE_R)
    return b


def cloth_setup(model):
    model.particle_kd = 1.0  # [N s/m] explicit-stable particle-particle contact damping


def prepare(nt, builder, device, warmup=10, setup=None, **solver_kwargs):
    """Finalize, build the solver and pipeline, run the warm-up steps; return (step, result) where
    step(n) advances n steps and result() gives (finite, mean height)."""
    model = builder.finalize(device=device)
    if setup is not None:
        setup(model)
    solver = nt.solvers.SolverSemiImplicit(model, **solver_kwargs)
    pipeline = nt.CollisionPipeline(model, broad_phase="sap")
    contacts = pipeline.contacts()
    states = [model.state(), model.state()]
    control = model.control()
    # newton's particle-particle contacts read model.particle_grid, which the caller builds (armillary's
    # solver builds its own grid inside step)
    grid = getattr(model, "particle_grid", None) if model.particle_count else None
    radius = float(getattr(model, "particle_max_radius", 0.0) or 0.0)

    solver_time = [0.0]  # [s] inside solver.step (meaningful on the CPU, where launches are synchronous)

    def step(n):
        for _ in range(n):
            s0, s1 = states
            s0.clear_forces()
            if grid is not None:
                grid.build(s0.particle_q, radius=2.0 * radius)
            pipeline.collide(s0, contacts)
            t = protocol.clock()
            solver.step(s0, s1, control, contacts, DT)
            solver_time[0] += protocol.clock() - t
            states.reverse()
        wp.synchronize_device(device)

    def result():
        s0 = states[0]
        finite = bool(np.isfinite(s0.body_q.numpy()).all()) if model.body_count else True
        if model.particle_count:
            finite = finite and bool(np.isfinite(s0.particle_q.numpy()).all())
        # a state figure to see that both engines simulate the same thing: mean body / particle height
        z = s0.body_q.numpy()[:, 2] if model.body_count else s0.particle_q.numpy()[:, 2]
        return finite, float(np.mean(z))

    step(warmup)
    step.solver_time = solver_time
    return step, result


def timed(step, steps) -> tuple[float, float]:
    """(steps/s of collide + step, steps/s of solver.step alone) over one window."""
    step.solver_time[0] = 0.0
    t0 = protocol.clock()
    step(steps)
    return steps / (protocol.clock() - t0), steps / max(step.solver_time[0], 1e-12)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=100, help="steps per timed window")
    p.add_argument("--repeat", type=int, default=5, help="timed windows per engine (interleaved; medians)")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--device", default="cpu")
    p.add_argument("--scene", choices=("pile", "cloth", "all"), default="all")
    p.add_argument("--no-tri-contact", action="store_true", help="enable_tri_contact=False for both engines")
    p.add_argument("--quick", action="store_true", help="1 x 20 steps after 2 warm-up steps: a smoke run")
    protocol.add_arguments(p)
    args = p.parse_args(argv)
    if args.quick:
        args.steps, args.repeat, args.warmup = 20, 1, 2
    results = protocol.Results.from_args(__file__, args)
    wp.config.quiet = True
    wp.init()

    import armillary

    protocol.reference_on_path()

    try:
        import newton
    except Exception:  # noqa: BLE001 - newton is an optional black-box baseline
        newton = None

    scenes = {"pile": ("64-box pile", make_pile, None),
              "cloth": (f"{CLOTH_N}x{CLOTH_N} cloth", make_cloth, cloth_setup)}
    if args.scene != "all":
        scenes = {args.scene: scenes[args.scene]}
    print(f"device={args.device} dt=1/600 s, collide (SAP) + SolverSemiImplicit.step per step, "
          f"{args.repeat} x {args.steps} steps after {args.warmup} warm-up steps", flush=True)  # fmt: skip
    kw = {"enable_tri_contact": False} if args.no_tri_contact else {}
    out = {}
    for name, make, setup in scenes.values():
        engines = {}
        for label, nt in (("armillary", armillary), ("newton", newton)):
            if nt is None:
                continue
            try:
                engines[label] = prepare(nt, make(nt), args.device, args.warmup, setup, **kw)
            except Exception as e:  # noqa: BLE001 - report, keep benchmarking
                print(f"{name:16s} {label} failed: {type(e).__name__}: {e}", flush=True)
        # interleave the timed windows so both engines see the same machine load; report medians
        rates = {label: [] for label in engines}
        solver_rates = {label: [] for label in engines}
        for _ in range(args.repeat):
            for label, (step, _) in engines.items():
                total, alone = timed(step, args.steps)
                rates[label].append(total)
                solver_rates[label].append(alone)
        line = f"{name:16s}"
        med, med_solver = {}, {}
        for label, (_, result) in engines.items():
            ok, z = result()
            med[label] = float(np.median(rates[label]))
            med_solver[label] = float(np.median(solver_rates[label]))
            spread = f"{min(rates[label]):.0f}-{max(rates[label]):.0f}"
            line += (f"\n  {label:9s} {med[label]:8.1f} steps/s ({spread}), solver.step alone {med_solver[label]:8.1f}"
                     f" steps/s; mean z after {z:.4f} m{'' if ok else ' NOT FINITE'}")  # fmt: skip
        if len(med) == 2:
            line += (f"\n  ratio armillary / newton: {med['armillary'] / med['newton']:.2f} collide + step, "
                     f"{med_solver['armillary'] / med_solver['newton']:.2f} solver.step alone (target >= 1.5)")
        print(line, flush=True)
        for label in med:
            vs = "newton" if label != "newton" and "newton" in med else None
            results.add(name, label, med[label], ratio_vs=vs, n=args.repeat)
            results.add(f"{name}, solver.step alone", label, med_solver[label], ratio_vs=vs, n=args.repeat)
        out[name] = {**{f"{k}_steps_per_s": v for k, v in med.items()},
                     **{f"{k}_solver_steps_per_s": v for k, v in med_solver.items()}}
    return out


if __name__ == "__main__":
    main()

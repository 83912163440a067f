"""SolverXPBD throughput: a 64-box pile and a 10k-particle scene, in steps per second, next to
newton's SolverXPBD (the reference engine, used as a black box) on the same scenes when
``import newton`` works.

Both engines get identical builder calls and step the same loop: collision detection with their
own ``CollisionPipeline`` every step, then one solver step (newton additionally rebuilds its
``model.particle_grid`` for particle-particle contacts, which armillary's solver does inside
``step``). A few warm-up steps (kernel compilation, settling) are not timed. Never run as a test.

Run: ``python benchmarks/bench_xpbd.py [--steps N] [--particles N] [--device cpu|cuda:0] [--quick]
[--json PATH] [--cpu-time]`` (the last two: ``benchmarks/_protocol.py``).
"""

from __future__ import annotations

import argparse

import numpy as np
import warp as wp

import _protocol as protocol

DT = 1.0 / 600.0


def make_pile(nt, n=4):
    """n^3 boxes (0.2 m) on a jittered lattice above the ground."""
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


def make_particles(nt, count=10000):
    """~count particles (r = 0.02 m) on a lattice falling onto the ground, with particle contacts."""
    side = max(2, int(round(count ** (1.0 / 3.0))))
    b = nt.ModelBuilder()
    b.add_particle_grid(pos=wp.vec3(0.0, 0.0, 0.1), rot=wp.quat_identity(), vel=wp.vec3(0.0, 0.0, 0.0),
                        dim_x=side, dim_y=side, dim_z=side, cell_x=0.05, cell_y=0.05, cell_z=0.05, mass=0.01,
                        jitter=0.005, radius_mean=0.02)  # fmt: skip
    b.add_ground_plane()
    return b


def run(nt, builder, steps, device, iterations, warmup=10):
    model = builder.finalize(device=device)
    solver = nt.solvers.SolverXPBD(model, iterations=iterations)
    pipeline = nt.CollisionPipeline(model)
    contacts = pipeline.contacts()
    s0, s1 = model.state(), model.state()
    control = model.control()
    grid = getattr(model, "particle_grid", None) if model.particle_count else None
    radius = float(getattr(model, "particle_max_radius", 0.0) or 0.0)

    def step():
        nonlocal s0, s1
        s0.clear_forces()
        if grid is not None:
            grid.build(s0.particle_q, radius=2.0 * radius)
        pipeline.collide(s0, contacts)
        solver.step(s0, s1, control, contacts, DT)
        s0, s1 = s1, s0

    for _ in range(warmup):
        step()
    wp.synchronize_device(device)
    t0 = protocol.clock()
    for _ in range(steps):
        step()
    wp.synchronize_device(device)
    elapsed = protocol.clock() - t0
    finite = bool(np.isfinite(s0.body_q.numpy()).all()) if model.body_count else True
    if model.particle_count:
        finite = finite and bool(np.isfinite(s0.particle_q.numpy()).all())
    return steps / elapsed, finite


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--particles", type=int, default=10000)
    p.add_argument("--iterations", type=int, default=4)
    p.add_argument("--device", default="cpu")
    p.add_argument("--quick", action="store_true", help="20 steps, 1000 particles: a smoke run")
    protocol.add_arguments(p)
    args = p.parse_args(argv)
    if args.quick:
        args.steps, args.particles = 20, 1000
    results = protocol.Results.from_args(__file__, args)
    wp.config.quiet = True
    wp.init()

    import armillary

    protocol.reference_on_path()
    try:
        import newton
    except Exception:  # noqa: BLE001 - newton is an optional black-box baseline
        newton = None

    scenes = {
        "64-box pile": lambda nt: make_pile(nt),
        f"{args.particles}-particle scene": lambda nt: make_particles(nt, args.particles),
    }
    out = {}
    for name, make in scenes.items():
        ours, ok = run(armillary, make(armillary), args.steps, args.device, args.iterations)
        line = f"{name:24s} armillary {ours:9.1f} steps/s{'' if ok else ' (NOT FINITE)'}"
        ref = None
        if newton is not None:
            try:
                ref, ok_ref = run(newton, make(newton), args.steps, args.device, args.iterations)
                line += f" | newton {ref:9.1f} steps/s{'' if ok_ref else ' (NOT FINITE)'} | ratio {ours / ref:5.2f}"
            except Exception as e:  # noqa: BLE001 - report, keep benchmarking
                line += f" | newton failed: {type(e).__name__}: {e}"
        print(line, flush=True)
        out[name] = {"armillary_steps_per_s": ours, "newton_steps_per_s": ref}
        results.add(name, "armillary", ours, ratio_vs="newton" if ref else None)
        results.add(name, "newton", ref)
    return out


if __name__ == "__main__":
    main()

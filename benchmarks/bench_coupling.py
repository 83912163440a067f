"""Coupling overhead of ``SolverCoupledADMM`` per iteration, against the sub-solver steps it wraps.

Scene: the two-link pendulum of ``examples/coupling/admm_two_link.py`` (link 1 in Featherstone,
link 2 in XPBD, the revolute joint between them coupled by ADMM) and, optionally, ``--copies``
independent copies of it to give the kernels more rows. For each iteration count it times

* the coupled step (``SolverCoupledADMM.step``),
* the two sub-solver steps alone (each entry solver stepped once on its own entry state, exactly
  the calls one ADMM iteration makes),

and reports per iteration: coupled time / iterations, sub-solver time, and the overhead
(coupled per iteration - sub-solver steps), i.e. state restart, force splatting, gathering and
the dual update. A few warm-up steps (kernel compilation) are not timed. Never run as a test.

Run: ``python benchmarks/bench_coupling.py [--steps 200] [--iterations 1 2 4 8] [--copies 1]
[--device cpu|cuda:0]``.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import warp as wp

import armillary as newton
from armillary_coupling.solver_coupled import SolverCoupled
from armillary_coupling.solver_coupled_admm import SolverCoupledADMM

L, M, DT = 0.5, 1.0, 1.0 / 600.0


def build(copies: int):
    b = newton.ModelBuilder()
    inertia = np.diag([M * 0.04**2 / 6, M * (L * L + 0.04**2) / 12, M * (L * L + 0.04**2) / 12])
    first, second = [], []
    for c in range(copies):
        y = 0.2 * c
        l1 = b.add_link(mass=M, inertia=inertia)
        l2 = b.add_link(mass=M, inertia=inertia)
        j0 = b.add_joint_revolute(-1, l1, parent_xform=wp.transform((0.0, y, 2.0), wp.quat_identity()),
                                  child_xform=wp.transform((-L / 2, 0.0, 0.0), wp.quat_identity()), axis=(0, 1, 0))
        j1 = b.add_joint_revolute(l1, l2, parent_xform=wp.transform((L / 2, 0.0, 0.0), wp.quat_identity()),
                                  child_xform=wp.transform((-L / 2, 0.0, 0.0), wp.quat_identity()), axis=(0, 1, 0))
        b.add_articulation([j0, j1])
        first.append(l1)
        second.append(l2)
    model = b.finalize()
    state = model.state()
    state.joint_q.assign(np.tile(np.asarray([1.07, 0.3], np.float32), copies))
    newton.eval_fk(model, state.joint_q, state.joint_qd, state)
    return model, state, first, second


def timed(fn, steps: int, device) -> float:
    for _ in range(5):
        fn()
    wp.synchronize_device(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        fn()
    wp.synchronize_device(device)
    return (time.perf_counter() - t0) / steps


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--iterations", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--copies", type=int, default=1)
    ap.add_argument("--device", default=None)
    args = ap.parse_args()
    warnings.filterwarnings("ignore", message="SolverFeatherstone ignores joint_enabled")
    with wp.ScopedDevice(args.device):
        device = wp.get_device()
        print(f"device {device}, {args.copies} pendulum(s), {args.steps} timed steps")
        print(f"{'iters':>5} {'step[ms]':>9} {'per_iter[ms]':>13} {'substeps[ms]':>13} {'overhead[ms]':>13} "
              f"{'overhead/substeps':>18}")  # fmt: skip
        for k in args.iterations:
            model, s0, first, second = build(args.copies)
            s1 = model.state()
            solver = SolverCoupledADMM(model, [
                SolverCoupled.Entry("rigid", lambda v: newton.solvers.SolverFeatherstone(v), bodies=first),
                SolverCoupled.Entry("xpbd", lambda v: newton.solvers.SolverXPBD(v, iterations=4), bodies=second),
            ], SolverCoupledADMM.Config(iterations=k))  # fmt: skip
            states = [s0, s1]

            def coupled():
                solver.step(states[0], states[1], None, None, DT)
                states.reverse()

            t_step = timed(coupled, args.steps, device)

            def substeps():
                for name in solver.entry_names():
                    e = solver.entry(name)
                    e.solver.step(e.state_0, e.state_1, None, None, DT)

            t_sub = timed(substeps, args.steps, device)
            per_iter = t_step / k
            over = per_iter - t_sub
            print(f"{k:5d} {t_step * 1e3:9.3f} {per_iter * 1e3:13.3f} {t_sub * 1e3:13.3f} {over * 1e3:13.3f} "
                  f"{over / t_sub:18.2f}")  # fmt: skip


if __name__ == "__main__":
    main()

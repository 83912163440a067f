"""Coupling overhead per iteration of the coupled solvers, against the sub-solver steps they wrap.

Target (issue): the coupling overhead of one iteration is no larger than the two sub-solver steps
it wraps. Two scenes:

* ``admm``: the two-link pendulum of ``examples/coupling/admm_two_link.py`` (link 1 in
  Featherstone, link 2 in XPBD, the revolute joint between them coupled by
  ``SolverCoupledADMM``), optionally ``--copies`` independent copies of it;
* ``proxy``: the box-on-cloth scene of ``examples/coupling/proxy_box_on_cloth.py`` (the box in
  Featherstone, the cloth in XPBD with 4 substeps, ``SolverCoupledProxy`` in the default lagged
  mode with a proxy-local collision pipeline).

For each scene and iteration count it times, in the same run, interleaved over ``--repeats``
rounds (medians reported, the machine is shared):

* ``step``: the coupled step (``solver.step``), outer collision excluded;
* ``subs``: the sub-solver steps one iteration makes, alone: every coupled entry's solver
  stepped ``substeps`` times on its own entry states with the contacts it uses;
* ``collide`` (proxy only): the proxy-local collision refresh the coupled step makes once.

and prints per iteration ``step / iterations``, ``subs``, the overhead ``step / iterations -
subs`` (state distribution, feedback, reconciliation, contact filtering, notifications,
dual updates; for the proxy also its collision refresh divided by the iterations), the ratio
``overhead / subs`` (target <= 1) and the same ratio without the proxy collision refresh.
Warm-up steps (kernel compilation) are not timed. Never run as a test.

Run: ``python benchmarks/bench_coupling.py [--scene admm proxy] [--steps 200] [--iterations 1 2 4]
[--copies 1] [--repeats 5] [--mode lagged|staggered] [--device cpu|cuda:0] [--profile] [--quick] [--json PATH]
[--cpu-time]`` (the last two: ``benchmarks/_protocol.py``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import warnings

import numpy as np
import warp as wp

import _protocol as protocol
import armillary as newton
from armillary.solvers.coupling import coupling_hook
from armillary_coupling.solver_coupled import SolverCoupled
from armillary_coupling.solver_coupled_admm import SolverCoupledADMM

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "coupling"))

L, M, DT_ADMM = 0.5, 1.0, 1.0 / 600.0


# ---------------------------------------------------------------------- scenes
def build_admm(copies: int, iterations: int):
    """The two-link pendulum(s) and a ``SolverCoupledADMM`` over them; returns
    ``(model, solver, states, dt, contacts_fn)``."""
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
    solver = SolverCoupledADMM(model, [
        SolverCoupled.Entry("rigid", lambda v: newton.solvers.SolverFeatherstone(v), bodies=first),
        SolverCoupled.Entry("xpbd", lambda v: newton.solvers.SolverXPBD(v, iterations=4), bodies=second),
    ], SolverCoupledADMM.Config(iterations=iterations))  # fmt: skip
    return model, solver, [state, model.state()], DT_ADMM, lambda s: None


PROXY_MODE = ["lagged"]


def build_proxy(copies: int, iterations: int):
    """The box-on-cloth scene with ``SolverCoupledProxy`` (``--mode``, ``iterations`` passes)."""
    import proxy_box_on_cloth as ex

    model, box = ex.build_scene(with_box=True)
    solver = ex.make_solver(model, box, iterations=iterations, mode=PROXY_MODE[0])
    states = [model.state(), model.state()]
    return model, solver, states, ex.DT, lambda s: model.collide(s)


SCENES = {"admm": build_admm, "proxy": build_proxy}


# ---------------------------------------------------------------------- timing
def _time(fn, steps: int, device) -> float:
    wp.synchronize_device(device)
    t0 = protocol.clock()
    for _ in range(steps):
        fn()
    wp.synchronize_device(device)
    return (protocol.clock() - t0) / steps


def measure(scene: str, iterations: int, *, copies: int, steps: int, repeats: int, device, profile: bool = False):
    model, solver, states, dt, collide = SCENES[scene](copies, iterations)
    contacts = [collide(states[0])]

    def coupled():
        solver.step(states[0], states[1], None, contacts[0], dt)
        states.reverse()

    for _ in range(20):  # warm-up (compilation) and let the scene reach contact
        contacts[0] = collide(states[0])
        coupled()
    contacts[0] = collide(states[0])

    # the sub-solver steps of one iteration, with the contacts each entry used in the last step
    groups = getattr(solver, "_groups", [])
    proxy_contacts = {}
    for g in groups:
        dst = g.destination
        local = g.contacts if g.pipeline is not None else solver.entry_contacts(dst.name, contacts[0])
        proxy_contacts[dst.name] = coupling_hook(dst.solver, "coupling_prepare_proxy_contacts")(
            dst.state_0, local, contacts_freshly_detected=False) if local is not None else None
    entries = [solver.entry(n) for n in solver.entry_names()]
    entry_contacts = {e.name: proxy_contacts.get(e.name, solver.entry_contacts(e.name, contacts[0])) for e in entries}

    def subs():
        for e in entries:
            h = dt / e.substeps
            s_in, s_out = e.state_0, e.state_1
            for _ in range(e.substeps):
                e.solver.step(s_in, s_out, None, entry_contacts[e.name], h)
                if s_out is not s_in:
                    s_in, s_out = s_out, s_in

    def proxy_collide():
        for g in groups:
            if g.pipeline is not None:
                g.pipeline.collide(g.destination.state_0, g.contacts)

    # (the coupled step redistributes its input into the entry states, so stepping them here
    # changes nothing it computes)
    for _ in range(3):
        subs()
        proxy_collide()
    t_step, t_sub, t_col = [], [], []
    for _ in range(repeats):
        t_step.append(_time(coupled, steps, device))
        t_sub.append(_time(subs, steps, device))
        t_col.append(_time(proxy_collide, steps, device) if groups else 0.0)
    if profile:
        import cProfile
        import pstats

        pr = cProfile.Profile()
        pr.enable()
        for _ in range(steps):
            coupled()
        pr.disable()
        pstats.Stats(pr).sort_stats("tottime").print_stats(25)
    med = statistics.median
    return med(t_step), med(t_sub), med(t_col)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scene", nargs="+", default=["admm", "proxy"], choices=sorted(SCENES))
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--iterations", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--copies", type=int, default=1, help="pendulum copies (admm scene)")
    ap.add_argument("--repeats", type=int, default=5, help="interleaved timing rounds (medians reported)")
    ap.add_argument("--mode", default="lagged", choices=("lagged", "staggered"), help="proxy mode (proxy scene)")
    ap.add_argument("--device", default=None)
    ap.add_argument("--profile", action="store_true", help="cProfile the coupled steps (top 25 by own time)")
    ap.add_argument("--quick", action="store_true", help="20 steps, 1 iteration, 1 round: a smoke run")
    protocol.add_arguments(ap)
    args = ap.parse_args()
    if args.quick:
        args.steps, args.iterations, args.repeats = 20, [1], 1
    results = protocol.Results.from_args(__file__, args)
    warnings.filterwarnings("ignore", message="SolverFeatherstone ignores joint_enabled")
    PROXY_MODE[0] = args.mode
    with wp.ScopedDevice(args.device):
        device = wp.get_device()
        print(f"device {device}, {args.steps} timed steps x {args.repeats} rounds (medians)")
        print(f"{'scene':>6} {'iters':>5} {'steps/s':>8} {'step[ms]':>9} {'per_iter[ms]':>13} {'subs[ms]':>9} "
              f"{'collide[ms]':>11} {'overhead[ms]':>13} {'overhead/subs':>14} {'(no collide)':>13}")  # fmt: skip
        for scene in args.scene:
            for k in args.iterations:
                t_step, t_sub, t_col = measure(scene, k, copies=args.copies, steps=args.steps, repeats=args.repeats,
                                               device=device, profile=args.profile)  # fmt: skip
                per_iter = t_step / k
                over = per_iter - t_sub
                over_nc = over - t_col / k
                print(f"{scene:>6} {k:5d} {1.0 / t_step:8.1f} {t_step * 1e3:9.3f} {per_iter * 1e3:13.3f} "
                      f"{t_sub * 1e3:9.3f} {t_col * 1e3:11.3f} {over * 1e3:13.3f} {over / t_sub:14.2f} "
                      f"{over_nc / t_sub:13.2f}", flush=True)  # fmt: skip
                name = f"{scene}, {k} iteration{'s' if k > 1 else ''}"
                results.add(f"{name}: coupled step", "armillary", 1.0 / t_step, n=args.repeats)
                results.add(f"{name}: sub-solver steps alone", "armillary", 1.0 / t_sub, n=args.repeats)
                results.add(f"{name}: overhead per iteration / sub-solver steps", "armillary", over / t_sub,
                            "overhead/subs", n=args.repeats)


if __name__ == "__main__":
    main()

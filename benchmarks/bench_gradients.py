"""Cost of gradients: backward time over forward time of a taped rollout, next to the reference engine.

Scenes (the same builder calls for both engines):

* ``chain``: the 32-link revolute chain of ``bench_featherstone.py`` under ``SolverFeatherstone``
  (dt 1 ms, no contacts); loss = sum of the last state's joint coordinates; gradient with respect to
  the initial ``joint_qd``.
* ``pile``: the 64-box pile of ``bench_xpbd.py`` under ``SolverSemiImplicit`` and ``SolverXPBD``
  (dt 1/600 s, collision every step into one ``Contacts`` per step); loss = sum of the last state's
  body heights; gradient with respect to the initial ``body_qd``. A solver that does not declare
  ``differentiable`` is reported as such (armillary raises ``NotDifferentiableError`` under a tape).

For each: the untaped forward rollout (over the same distinct per-step states, so recorded launches
are not replayed: slower than a ping-pong loop), the taped forward rollout (``wp.Tape`` recording),
and ``tape.backward``, in seconds per step (median of ``--repeat`` rounds, engines alternating), and the
ratio backward / taped forward; the gradient norms of both engines are printed as a cross-check
(they agree to 2-3 digits on all three scenes). Never run as a test.

Run: ``python benchmarks/bench_gradients.py [--steps N] [--repeat N] [--quick] [--json PATH] [--cpu-time]``.
"""

from __future__ import annotations

import argparse
import importlib

import numpy as np
import warp as wp

import _protocol as protocol
from bench_featherstone import make_chain
from bench_xpbd import make_pile

SCENES = {
    "chain": ("SolverFeatherstone", 1.0e-3),
    "pile SemiImplicit": ("SolverSemiImplicit", 1.0 / 600.0),
    "pile XPBD": ("SolverXPBD", 1.0 / 600.0),
}


@wp.kernel
def _sum_joint_q(q: wp.array(dtype=float), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, q[wp.tid()])


@wp.kernel
def _sum_heights(q: wp.array(dtype=wp.transform), loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, wp.transform_get_translation(q[wp.tid()])[2])


class Rollout:
    """One scene in one engine: ``steps`` states (and contacts) allocated once."""

    def __init__(self, nt, scene: str, steps: int):
        solver_name, self.dt = SCENES[scene]
        builder = make_chain(nt, 32) if scene == "chain" else make_pile(nt, 4)
        self.model = builder.finalize(device="cpu", requires_grad=True)
        self.solver = getattr(nt.solvers, solver_name)(self.model)
        self.states = [self.model.state(requires_grad=True) for _ in range(steps + 1)]
        self.control = self.model.control()
        self.pipeline = None if scene == "chain" else nt.CollisionPipeline(self.model, requires_grad=True)
        self.contacts = [self.pipeline.contacts() for _ in range(steps)] if self.pipeline else [None] * steps
        self.chain = scene == "chain"
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)
        if self.chain:
            self.states[0].joint_qd.assign(np.full(self.model.joint_dof_count, 0.5, dtype=np.float32))
            nt.eval_fk(self.model, self.states[0].joint_q, self.states[0].joint_qd, self.states[0])

    def forward(self):
        for k in range(len(self.states) - 1):
            s0, s1 = self.states[k], self.states[k + 1]
            s0.clear_forces()
            if self.pipeline is not None:
                self.pipeline.collide(s0, self.contacts[k])
            self.solver.step(s0, s1, self.control, self.contacts[k], self.dt)
        last = self.states[-1]
        if self.chain:
            wp.launch(_sum_joint_q, len(last.joint_q), inputs=[last.joint_q], outputs=[self.loss], device="cpu")
        else:
            wp.launch(_sum_heights, len(last.body_q), inputs=[last.body_q], outputs=[self.loss], device="cpu")

    def time(self):
        """(untaped forward, taped forward, backward) seconds for the whole rollout, and the gradient norm."""
        self.loss.zero_()
        t0 = protocol.clock()
        self.forward()
        t1 = protocol.clock()
        self.loss.zero_()
        tape = wp.Tape()
        t2 = protocol.clock()
        with tape:
            self.forward()
        t3 = protocol.clock()
        tape.backward(self.loss)
        t4 = protocol.clock()
        grad = (self.states[0].joint_qd if self.chain else self.states[0].body_qd).grad.numpy()
        norm = float(np.linalg.norm(grad))
        tape.zero()
        return t1 - t0, t3 - t2, t4 - t3, norm


def measure(engines, scene, steps, repeat):
    """engine -> (median untaped, taped, backward [s/step], gradient norm) or an error string."""
    rollouts, out = {}, {}
    for name, nt in engines.items():
        try:
            rollouts[name] = Rollout(nt, scene, steps)
            rollouts[name].time()  # warm-up: kernels compiled
        except Exception as exc:  # noqa: BLE001 - reported per engine, the benchmark goes on
            out[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:100]}"
    samples = {name: [] for name in rollouts}
    for _ in range(repeat):
        for name, r in rollouts.items():  # engines alternate
            samples[name].append(r.time())
    for name, rows in samples.items():
        arr = np.array(rows)
        out[name] = (*(np.median(arr[:, i]) / steps for i in range(3)), float(arr[-1, 3]))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="20 steps, one round: a smoke run")
    protocol.add_arguments(ap)
    args = ap.parse_args(argv)
    if args.quick:
        args.steps, args.repeat = 20, 1
    results = protocol.Results.from_args(__file__, args)
    import armillary

    engines = {"armillary": armillary}
    if protocol.reference_on_path():
        try:
            engines["newton"] = importlib.import_module("newton")
        except ImportError:
            pass
    wp.config.quiet = True
    print(f"{'scene':<18} {'engine':<10} {'untaped us/step':>15} {'taped us/step':>14} {'backward us/step':>16} "
          f"{'backward/forward':>16} {'|grad|':>10}")  # fmt: skip
    for scene in SCENES:
        res = measure(engines, scene, args.steps, args.repeat)
        for name in engines:
            r = res.get(name)
            if isinstance(r, str):
                print(f"{scene:<18} {name:<10} {r}")
                continue
            plain, taped, back, norm = r
            print(f"{scene:<18} {name:<10} {plain * 1e6:15.1f} {taped * 1e6:14.1f} {back * 1e6:16.1f} "
                  f"{back / taped:16.2f} {norm:10.3g}")  # fmt: skip
            other = "newton" if name == "armillary" and isinstance(res.get("newton"), tuple) else None
            results.add(scene, name, back / taped, "backward/forward", ratio_vs=other, n=args.repeat,
                        higher_is_better=False)  # fmt: skip
            results.add(scene, name, 1.0 / (taped + back), "taped steps/s", ratio_vs=other, n=args.repeat)
    return results.rows


if __name__ == "__main__":
    main()

"""ADMM coupling: a two-link pendulum split across two solvers, against the monolithic run.

Link 1 (hinged to the world) belongs to a reduced-coordinate entry (Featherstone or MuJoCo),
link 2 to an XPBD entry; the revolute joint between them belongs to no entry and is coupled by
``SolverCoupledADMM`` (3 anchor rows + 2 hinge-axis rows). The same model is also run in one
``SolverFeatherstone`` (monolithic) and, as a near-exact reference, in Featherstone at a ten times
smaller step.

For each ADMM iteration count it prints link 2's largest COM distance to the monolithic run and to
the fine reference, the largest and mean joint gap and the energy change; then writes a plot of
these against the iteration count (``admm_two_link.png``, matplotlib) or, without matplotlib, a CSV
(``admm_two_link.csv``).

Run: ``python examples/coupling/admm_two_link.py [--rigid featherstone|mujoco] [--seconds 2]
[--iterations 1 2 4 8 16] [--theta1 1.07] [--theta2 0.3] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import math
import os
import warnings

import numpy as np
import warp as wp

import armillary as newton
from armillary_coupling.solver_coupled import SolverCoupled
from armillary_coupling.solver_coupled_admm import SolverCoupledADMM

L, M, DT = 0.5, 1.0, 1.0 / 600.0


def build(theta):
    b = newton.ModelBuilder()
    inertia = np.diag([M * 0.04**2 / 6, M * (L * L + 0.04**2) / 12, M * (L * L + 0.04**2) / 12])
    l1 = b.add_link(mass=M, inertia=inertia, label="link1")
    l2 = b.add_link(mass=M, inertia=inertia, label="link2")
    j0 = b.add_joint_revolute(-1, l1, parent_xform=wp.transform((0.0, 0.0, 2.0), wp.quat_identity()),
                              child_xform=wp.transform((-L / 2, 0.0, 0.0), wp.quat_identity()), axis=(0, 1, 0))
    j1 = b.add_joint_revolute(l1, l2, parent_xform=wp.transform((L / 2, 0.0, 0.0), wp.quat_identity()),
                              child_xform=wp.transform((-L / 2, 0.0, 0.0), wp.quat_identity()), axis=(0, 1, 0))
    b.add_articulation([j0, j1])
    model = b.finalize()
    state = model.state()
    state.joint_q.assign(np.asarray(theta, np.float32))
    newton.eval_fk(model, state.joint_q, state.joint_qd, state)
    return model, state


def energy(model, state):
    q, qd = state.body_q.numpy().astype(np.float64), state.body_qd.numpy().astype(np.float64)
    e = 0.0
    for i in range(len(q)):
        R = np.asarray(wp.quat_to_matrix(wp.quat(*q[i, 3:]))).reshape(3, 3)
        x = q[i, :3] + R @ model.body_com.numpy()[i]
        v, w = qd[i, :3], qd[i, 3:]
        m = float(model.body_mass.numpy()[i])
        e += 0.5 * m * v @ v + 0.5 * w @ (R @ model.body_inertia.numpy()[i] @ R.T) @ w + m * 9.81 * x[2]
    return e


def gap(state):
    q = state.body_q.numpy().astype(np.float64)
    pts = []
    for i, off in ((0, L / 2), (1, -L / 2)):
        R = np.asarray(wp.quat_to_matrix(wp.quat(*q[i, 3:]))).reshape(3, 3)
        pts.append(q[i, :3] + R @ np.array([off, 0.0, 0.0]))
    return float(np.linalg.norm(pts[0] - pts[1]))


def run(make, theta, seconds, dt=DT, every=1):
    model, s0 = build(theta)
    s1 = model.state()
    solver = make(model)
    e0 = energy(model, s0)
    com, gaps = [], []
    n = int(round(seconds / dt))
    for i in range(n):
        solver.step(s0, s1, None, None, dt)
        s0, s1 = s1, s0
        if (i + 1) % every == 0:
            com.append(s0.body_q.numpy()[1, :3].astype(np.float64))
            gaps.append(gap(s0))
    return np.asarray(com), np.asarray(gaps), energy(model, s0) - e0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rigid", choices=("featherstone", "mujoco"), default="featherstone")
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--iterations", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    ap.add_argument("--theta1", type=float, default=math.pi / 2 - 0.5, help="link 1 angle from +x about +y [rad]")
    ap.add_argument("--theta2", type=float, default=0.3, help="link 2 angle relative to link 1 [rad]")
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    warnings.filterwarnings("ignore", message="SolverFeatherstone ignores joint_enabled")
    theta = (args.theta1, args.theta2)

    mono, _, de_mono = run(lambda m: newton.solvers.SolverFeatherstone(m), theta, args.seconds)
    fine, _, _ = run(lambda m: newton.solvers.SolverFeatherstone(m), theta, args.seconds, dt=DT / 10, every=10)
    print(f"monolithic Featherstone: energy change {de_mono:+.4f} J, max distance to the dt/10 reference "
          f"{np.linalg.norm(mono - fine, axis=1).max() * 1e3:.3f} mm")  # fmt: skip
    rigid = (lambda v: newton.solvers.SolverFeatherstone(v)) if args.rigid == "featherstone" else \
        (lambda v: newton.solvers.SolverMuJoCo(v))  # fmt: skip
    rows = []
    print(f"{'iters':>5} {'err_mono[mm]':>13} {'err_fine[mm]':>13} {'max_gap[mm]':>12} {'mean_gap[mm]':>13} "
          f"{'dE[J]':>9}")  # fmt: skip
    for k in args.iterations:
        def make(m, k=k):
            soft = SolverCoupled.Entry("xpbd", lambda v: newton.solvers.SolverXPBD(v, iterations=4), bodies=[1])
            return SolverCoupledADMM(m, [SolverCoupled.Entry("rigid", rigid, bodies=[0]), soft],
                                     SolverCoupledADMM.Config(iterations=k))

        com, gaps, de = run(make, theta, args.seconds)
        row = (k, np.linalg.norm(com - mono, axis=1).max(), np.linalg.norm(com - fine, axis=1).max(), gaps.max(),
               gaps.mean(), de)  # fmt: skip
        rows.append(row)
        print(f"{k:5d} {row[1] * 1e3:13.4f} {row[2] * 1e3:13.4f} {row[3] * 1e3:12.5f} {row[4] * 1e3:13.6f} "
              f"{de:+9.4f}")  # fmt: skip

    os.makedirs(args.out, exist_ok=True)
    data = np.asarray(rows)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        path = os.path.join(args.out, "admm_two_link.csv")
        np.savetxt(path, data, delimiter=",", header="iterations,err_monolithic_m,err_reference_m,max_gap_m,"
                   "mean_gap_m,energy_change_J", comments="")  # fmt: skip
        print(f"matplotlib not available: wrote {path}")
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.loglog(data[:, 0], data[:, 1], "o-", label="link 2 COM vs monolithic (max)")
    ax.loglog(data[:, 0], data[:, 2], "s-", label="link 2 COM vs dt/10 reference (max)")
    ax.loglog(data[:, 0], np.maximum(data[:, 3], 1e-12), "^-", label="joint gap (max)")
    ax.loglog(data[:, 0], np.maximum(data[:, 4], 1e-12), "v-", label="joint gap (mean)")
    ax.set_xlabel("ADMM iterations per step")
    ax.set_ylabel("distance [m]")
    ax.set_title(f"{args.rigid} + XPBD, ADMM, {args.seconds:g} s at dt = 1/600")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(args.out, "admm_two_link.png")
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

"""Proxy coupling, experiment 2: a rigid box owned by one solver resting on cloth owned by another.

The box belongs to a rigid-body entry (Featherstone, MuJoCo or XPBD), the cloth (a trampoline
pinned along its four edges) to an XPBD entry. The box enters the cloth's solve as a proxy body
(``SolverCoupledProxy``): XPBD pushes the cloth and the proxy apart, the proxy's momentum change
is returned to the rigid solver as a lagged force. A ground plane (owned by no entry) collides
with both entries.

Run: ``python examples/coupling/proxy_box_on_cloth.py [--rigid featherstone|mujoco|xpbd]
[--seconds 10] [--iterations 1] [--mode lagged|staggered] [--dt 0.01] [--cloth-substeps 4]
[--no-box]``. Prints the box height, the penetration of the box into the cloth, the cloth's
sag and the total energy over time.

Modes: ``lagged`` (the default, as in ``SolverCoupledProxy.Proxy``) gives the cloth the box's
begin pose and its rewound velocity, and returns the cloth's answer (the mean force over the
step) to the box on the next step, extrapolated to that step's start
(``SolverCoupledProxy.lagged_extrapolation``): with one proxy iteration at dt = 0.01 s and four
XPBD cloth substeps the box settles with about 1.2 mm penetration, whichever solver owns it.
``staggered`` gives the cloth the box's end pose and velocity (about the same result).
"""

from __future__ import annotations

import argparse

import numpy as np
import warp as wp

import armillary as newton
from armillary_coupling.solver_coupled import SolverCoupled
from armillary_coupling.solver_coupled_proxy import SolverCoupledProxy

CLOTH_N = 10  # particles per side
CLOTH_CELL = 0.1  # [m]
CLOTH_Z = 0.6  # [m]
PARTICLE_MASS = 0.02  # [kg]
PARTICLE_RADIUS = 0.02  # [m]
BOX_HALF = (0.15, 0.15, 0.04)  # [m] half extents (a flat box: a tall one tips over on the soft cloth)
BOX_MASS = 0.5  # [kg]
BOX_GAP = 0.005  # [m] initial gap between the box and the cloth
DT = 1.0 / 100.0  # [s]
CLOTH_SUBSTEPS = 4  # XPBD substeps of the cloth entry per coupled step
CLOTH_ITERATIONS = 5


def build_scene(*, with_box: bool = True):
    """Model with a pinned 10x10 cloth, optionally a box above its middle, and a ground plane.

    Returns ``(model, box_body_or_None)``.
    """
    b = newton.ModelBuilder()
    span = (CLOTH_N - 1) * CLOTH_CELL
    b.add_cloth_grid(pos=wp.vec3(-0.5 * span, -0.5 * span, CLOTH_Z), rot=wp.quat_identity(), vel=wp.vec3(0.0),
                     dim_x=CLOTH_N - 1, dim_y=CLOTH_N - 1, cell_x=CLOTH_CELL, cell_y=CLOTH_CELL,
                     mass=PARTICLE_MASS, fix_left=True, fix_right=True, fix_top=True, fix_bottom=True,
                     particle_radius=PARTICLE_RADIUS,
                     tri_ke=1.0e4, tri_ka=1.0e4, edge_ke=10.0)  # fmt: skip
    box = None
    if with_box:
        z = CLOTH_Z + PARTICLE_RADIUS + BOX_HALF[2] + BOX_GAP
        box = b.add_body(xform=wp.transform((0.0, 0.0, z), wp.quat_identity()), mass=BOX_MASS,
                         inertia=wp.mat33(np.diag(_box_inertia_diag())), label="box")
        b.add_shape_box(box, hx=BOX_HALF[0], hy=BOX_HALF[1], hz=BOX_HALF[2], cfg=newton.ModelBuilder.ShapeConfig(density=0.0))
    b.add_ground_plane()
    model = b.finalize()
    return model, box


def _box_inertia_diag():
    hx, hy, hz = BOX_HALF
    return [BOX_MASS * (hy * hy + hz * hz) / 3.0, BOX_MASS * (hx * hx + hz * hz) / 3.0,
            BOX_MASS * (hx * hx + hy * hy) / 3.0]  # fmt: skip


def rigid_factory(kind: str):
    if kind == "featherstone":
        return lambda view: newton.solvers.SolverFeatherstone(view)
    if kind == "mujoco":
        return lambda view: newton.solvers.SolverMuJoCo(view, use_mujoco_contacts=False)
    if kind == "xpbd":
        return lambda view: newton.solvers.SolverXPBD(view, iterations=4)
    raise ValueError(f"unknown rigid solver {kind!r}")


def cloth_factory(view):
    return newton.solvers.SolverXPBD(view, iterations=CLOTH_ITERATIONS, soft_contact_relaxation=1.0)


def make_solver(model, box, *, rigid: str = "featherstone", iterations: int = 1, proxy_pipeline: bool = True,
                mass_scale: float = 1.0, relaxation: float = 1.0, mode: str = "lagged"):  # fmt: skip
    """A ``SolverCoupledProxy`` with entries ``rigid`` (the box) and ``cloth`` (every particle)."""
    particles = range(model.particle_count)
    entries = [SolverCoupledProxy.Entry(name="cloth", solver=cloth_factory, particles=particles,
                                        substeps=CLOTH_SUBSTEPS)]
    if box is None:  # the cloth alone, stepped the same way
        return SolverCoupled(model, entries=entries)
    entries.insert(0, SolverCoupledProxy.Entry(name="rigid", solver=rigid_factory(rigid), bodies=[box]))
    pipeline = (lambda view: newton.CollisionPipeline(view)) if proxy_pipeline else None
    return SolverCoupledProxy(model, entries=entries, coupling=SolverCoupledProxy.Config(
        proxies=[SolverCoupledProxy.Proxy(source="rigid", destination="cloth", bodies=[box], mass_scale=mass_scale,
                                          proxy_relaxation=relaxation, mode=mode, collision_pipeline=pipeline,
                                          collide_interval=1)],
        iterations=iterations))  # fmt: skip


def energy(model, state, box) -> float:
    """Kinetic + gravitational potential energy [J] of particles and the box."""
    g = np.asarray(model.gravity.numpy()).reshape(-1, 3)[0]
    pm = model.particle_mass.numpy()
    pq, pv = state.particle_q.numpy(), state.particle_qd.numpy()
    e = 0.5 * float(np.sum(pm * np.sum(pv * pv, axis=1))) - float(np.sum(pm * (pq @ g)))
    if box is not None:
        m = float(model.body_mass.numpy()[box])
        inertia = model.body_inertia.numpy()[box]
        q, qd = state.body_q.numpy()[box], state.body_qd.numpy()[box]
        v, w = qd[:3], qd[3:]
        rot = _quat_to_matrix(q[3:7])
        e += 0.5 * m * float(v @ v) + 0.5 * float(w @ (rot @ inertia @ rot.T) @ w) - m * float(q[:3] @ g)
    return e


def _quat_to_matrix(q):
    x, y, z, w = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])  # fmt: skip


def penetration(model, state, box) -> float:
    """Deepest overlap [m] of a cloth particle (sphere of its radius) with the box (0: none)."""
    q = state.body_q.numpy()[box]
    rot = _quat_to_matrix(q[3:7])
    local = (state.particle_q.numpy() - q[:3]) @ rot  # particle centres in box axes
    r = model.particle_radius.numpy()
    # signed distance of each centre to the box surface (negative inside)
    d = np.abs(local) - np.asarray(BOX_HALF)
    outside = np.linalg.norm(np.maximum(d, 0.0), axis=1)
    inside = np.minimum(np.max(d, axis=1), 0.0)
    sdf = outside + inside
    return float(max(0.0, np.max(r - sdf)))


def cloth_sag(model, state) -> float:
    """Depth [m] of the lowest cloth particle below the cloth's initial plane."""
    return float(CLOTH_Z - np.min(state.particle_q.numpy()[:, 2]))


def run(*, rigid: str = "featherstone", seconds: float = 10.0, iterations: int = 1, with_box: bool = True,
        proxy_pipeline: bool = True, mode: str = "lagged", report_every: float | None = 1.0,
        verbose: bool = True):  # fmt: skip
    """Simulate and return a dict of histories (time, box height, penetration, sag, energy)."""
    model, box = build_scene(with_box=with_box)
    solver = make_solver(model, box, rigid=rigid, iterations=iterations, proxy_pipeline=proxy_pipeline, mode=mode)
    s0, s1 = model.state(), model.state()
    control = model.control()
    steps = int(round(seconds / DT))
    every = None if report_every is None else max(1, int(round(report_every / DT)))
    hist = dict(t=[], box_z=[], penetration=[], sag=[], energy=[], feedback_change=[])
    for k in range(steps):
        contacts = model.collide(s0)
        solver.step(s0, s1, control, contacts, DT)
        s0, s1 = s1, s0
        hist["t"].append((k + 1) * DT)
        hist["sag"].append(cloth_sag(model, s0))
        hist["energy"].append(energy(model, s0, box))
        if box is not None:
            hist["box_z"].append(float(s0.body_q.numpy()[box, 2]))
            hist["penetration"].append(penetration(model, s0, box))
            if hasattr(solver, "diagnostics"):
                hist["feedback_change"].append(solver.diagnostics.proxy_feedback_change.numpy().copy())
        if verbose and every and (k + 1) % every == 0:
            line = f"t={hist['t'][-1]:5.2f}s sag={hist['sag'][-1] * 1e3:7.2f}mm E={hist['energy'][-1]:8.4f}J"
            if box is not None:
                line += f" box_z={hist['box_z'][-1]:.4f}m penetration={hist['penetration'][-1] * 1e3:6.2f}mm"
            print(line, flush=True)
    return hist


def main():
    global DT, CLOTH_SUBSTEPS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rigid", default="featherstone", choices=("featherstone", "mujoco", "xpbd"))
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--iterations", type=int, default=1)
    parser.add_argument("--mode", default="lagged", choices=("lagged", "staggered"))
    parser.add_argument("--dt", type=float, default=DT)
    parser.add_argument("--cloth-substeps", type=int, default=CLOTH_SUBSTEPS)
    parser.add_argument("--no-box", action="store_true", help="the cloth alone (reference sag)")
    parser.add_argument("--outer-contacts", action="store_true", help="no proxy-local collision pipeline")
    args = parser.parse_args()
    DT, CLOTH_SUBSTEPS = args.dt, args.cloth_substeps
    hist = run(rigid=args.rigid, seconds=args.seconds, iterations=args.iterations, with_box=not args.no_box,
               proxy_pipeline=not args.outer_contacts, mode=args.mode)  # fmt: skip
    n = len(hist["t"])
    late = slice(n // 2, n)
    print(f"final sag {hist['sag'][-1] * 1e3:.2f} mm, energy start {hist['energy'][0]:.4f} J, "
          f"max {max(hist['energy']):.4f} J, end {hist['energy'][-1]:.4f} J")  # fmt: skip
    if hist["penetration"]:
        print(f"max penetration (second half) {max(hist['penetration'][late]) * 1e3:.2f} mm, "
              f"final box height {hist['box_z'][-1]:.4f} m")  # fmt: skip


if __name__ == "__main__":
    main()

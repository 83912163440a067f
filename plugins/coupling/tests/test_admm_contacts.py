"""SolverCoupledADMM contact rows: rigid-rigid, rigid-particle and particle-particle contacts
between entries, Coulomb friction, warm start and residuals."""

from __future__ import annotations

import math

import numpy as np
import pytest
import warp as wp

import armillary as newton
from armillary_coupling.solver_coupled import SolverCoupled
from armillary_coupling.solver_coupled_admm import SolverCoupledADMM

pytestmark = pytest.mark.filterwarnings("ignore:SolverFeatherstone ignores joint_enabled")

G = 9.81
PLATE_H = 0.05  # plate half thickness [m]
BOX_H = 0.1  # box half extent [m]


# ---------------------------------------------------------------------- scenes
def featherstone(v):
    return newton.solvers.SolverFeatherstone(v)


def xpbd(v):
    return newton.solvers.SolverXPBD(v, iterations=4)


def plate_scene(*, angle: float = 0.0, mu: float = 0.5, box_gap: float = 0.0, box: bool = True,
                particles=None, gravity=None):  # fmt: skip
    """A plate (1 m x 1 m, fixed to the world, tilted by ``angle`` about y) and, optionally, a
    0.2 m box lying on it ``box_gap`` above its surface; ``particles``: ``(positions, radius)``
    of free particles. Returns the model and its input state."""
    b = newton.ModelBuilder(gravity=gravity) if gravity is not None else newton.ModelBuilder()
    cfg = newton.ModelBuilder.ShapeConfig(mu=mu)
    q = wp.quat_from_axis_angle(wp.vec3(0.0, 1.0, 0.0), angle)
    plate = b.add_link(mass=50.0, label="plate")
    b.add_shape_box(plate, hx=1.0, hy=1.0, hz=PLATE_H, cfg=cfg)
    j = b.add_joint_fixed(-1, plate, parent_xform=wp.transform((0.0, 0.0, 0.0), q))
    b.add_articulation([j])
    if box:
        c = wp.quat_rotate(q, wp.vec3(0.0, 0.0, PLATE_H + BOX_H + box_gap))
        i = b.add_body(xform=wp.transform(c, q), mass=1.0, label="box")
        b.add_shape_box(i, hx=BOX_H, hy=BOX_H, hz=BOX_H, cfg=cfg)
    if particles is not None:
        pos, radius = particles
        for p in pos:
            b.add_particle(tuple(float(x) for x in p), (0.0, 0.0, 0.0), 0.1, radius=radius)
    model = b.finalize()
    state = model.state()
    newton.eval_fk(model, state.joint_q, state.joint_qd, state)
    return model, state


def plate_admm(model, config=None, *, particles=False, pair=True):
    """Plate in a Featherstone entry, the box (or the particles) in an XPBD entry."""
    npart = int(model.particle_count or 0)
    others = dict(particles=list(range(npart))) if particles else dict(bodies=[1])
    entries = [SolverCoupled.Entry("plate", featherstone, bodies=[0]), SolverCoupled.Entry("free", xpbd, **others)]
    if config is None:
        config = SolverCoupledADMM.Config()
    if pair:
        config.contact_pairs = SolverCoupledADMM.auto_detect_contact_pairs(entries)
    return SolverCoupledADMM(model, entries, config)


def run(solver, model, state, steps: int, dt: float, record=None):
    s0, s1 = state, model.state()
    out = []
    for _ in range(steps):
        solver.step(s0, s1, None, None, dt)
        s0, s1 = s1, s0
        if record is not None:
            out.append(record(s0))
    return s0, out


def box_height(state) -> float:
    return float(state.body_q.numpy()[1, 2])


# ---------------------------------------------------------------------- configuration
def test_contact_config_validation():
    model, _ = plate_scene()
    for kw in (dict(contact_matching_pos_threshold=-1.0), dict(contact_matching_normal_dot_threshold=1.5),
               dict(contact_matching_force_scale=-0.5), dict(contact_max_triangle_pairs=-3),
               dict(contact_reduction_hashtable_size_factor=0.0)):  # fmt: skip
        with pytest.raises(ValueError):
            plate_admm(model, SolverCoupledADMM.Config(**kw))
    with pytest.raises(ValueError, match="unknown entry"):
        plate_admm(model, SolverCoupledADMM.Config(contact_pairs=[SolverCoupledADMM.ContactPair("plate", "nope")]),
                   pair=False)  # fmt: skip
    # a pair whose entries own nothing that can touch: no rows, no error
    b = newton.ModelBuilder()
    b.add_body(mass=1.0)
    b.add_body(mass=1.0)
    m = b.finalize()
    entries = [SolverCoupled.Entry("a", xpbd, bodies=[0]), SolverCoupled.Entry("b", xpbd, bodies=[1])]
    s = SolverCoupledADMM(m, entries, SolverCoupledADMM.Config(
        contact_pairs=SolverCoupledADMM.auto_detect_contact_pairs(entries)))  # fmt: skip
    st = m.state()
    run(s, m, st, 2, 0.01)
    assert s.diagnostics.contact_count.numpy().tolist() == [0, 0, 0]


# ---------------------------------------------------------------------- rigid-rigid
def test_box_lands_on_plate_of_another_entry():
    dt = 0.01
    model, state = plate_scene(box_gap=0.15)
    solver = plate_admm(model)
    final, hs = run(solver, model, state, 100, dt, box_height)
    rest = PLATE_H + BOX_H
    pen = rest - min(hs)
    assert np.all(np.isfinite(final.body_q.numpy()))
    assert pen < 5.0e-3, f"max penetration {pen:.2e} m"
    assert abs(hs[-1] - rest) < 1.0e-3
    assert np.abs(final.body_qd.numpy()[1]).max() < 1.0e-2
    assert solver.diagnostics.contact_count.numpy()[0] == 4
    # without the contact pair the entries do not see each other's shapes: the box falls through
    model, state = plate_scene(box_gap=0.15)
    final, _ = run(plate_admm(model, pair=False), model, state, 100, dt)
    assert box_height(final) < -1.0


@pytest.mark.parametrize("angle_deg", [15.0, 40.0])
def test_friction_stick_and_slide_on_tilted_plate(angle_deg):
    mu, dt, steps = 0.5, 0.01, 50
    a = math.radians(angle_deg)
    model, state = plate_scene(angle=a, mu=mu)
    solver = plate_admm(model, SolverCoupledADMM.Config(iterations=8))
    x0 = state.body_q.numpy()[1, :3].astype(np.float64)
    final, _ = run(solver, model, state, steps, dt)
    d = final.body_q.numpy()[1, :3].astype(np.float64) - x0
    down = np.array([math.cos(a), 0.0, -math.sin(a)])  # downhill tangent of the plate tilted about +y
    s = float(d @ down)
    t = steps * dt
    expected = max(G * (math.sin(a) - mu * math.cos(a)), 0.0)
    acc = 2.0 * s / t**2
    normal_drift = abs(float(d @ np.array([math.sin(a), 0.0, math.cos(a)])))
    assert normal_drift < 5.0e-3
    if expected == 0.0:
        assert abs(s) < 5.0e-3, f"box slid {s:.4f} m below the friction angle"
    else:
        assert abs(acc - expected) < 0.15 * expected, f"acceleration {acc:.3f} vs analytic {expected:.3f} m/s^2"


# ---------------------------------------------------------------------- rigid-particle
def test_particles_rest_on_rigid_plate_of_another_entry():
    r, dt = 0.05, 0.01
    xs = np.linspace(-0.3, 0.3, 4)
    pos = [(x, y, PLATE_H + r + 0.1) for x in xs for y in xs]
    model, state = plate_scene(box=False, particles=(pos, r))
    solver = plate_admm(model, particles=True)
    final, zs = run(solver, model, state, 60, dt, lambda s: s.particle_q.numpy()[:, 2].copy())
    rest = PLATE_H + r
    pen = rest - float(np.min(zs))
    q = final.particle_q.numpy()
    assert np.all(np.isfinite(q))
    assert pen < 5.0e-3, f"max particle penetration {pen:.2e} m"
    assert np.abs(q[:, 2] - rest).max() < 1.0e-3
    assert np.abs(final.particle_qd.numpy()).max() < 2.0e-2
    assert solver.diagnostics.contact_count.numpy()[1] == len(pos)
    # without the pair the particles fall through the plate
    model, state = plate_scene(box=False, particles=(pos, r))
    final, _ = run(plate_admm(model, particles=True, pair=False), model, state, 40, dt)
    assert final.particle_q.numpy()[:, 2].max() < -0.3


# ---------------------------------------------------------------------- particle-particle
def two_particle_groups(v: float = 1.0):
    """Two 3x3x3 particle blocks (radius 5 cm, 0.1 kg) approaching each other along x, no gravity;
    particles 0..26 move at +v, 27..53 at -v/2 (different masses of momentum on each side)."""
    b = newton.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    r = 0.05
    for side, (x0, vx, m) in enumerate(((-0.5, v, 0.1), (0.3, -0.5 * v, 0.2))):
        for i in range(3):
            for j in range(3):
                for k in range(3):
                    b.add_particle((x0 + 2 * r * i, 2 * r * j, 1.0 + 2 * r * k), (vx, 0.0, 0.0), m, radius=r)
    model = b.finalize()
    return model, model.state(), r


def test_particle_groups_of_two_entries_collide():
    model, state, r = two_particle_groups()
    n = model.particle_count // 2
    entries = [SolverCoupled.Entry("left", xpbd, particles=list(range(n))),
               SolverCoupled.Entry("right", xpbd, particles=list(range(n, 2 * n)))]  # fmt: skip
    cfg = SolverCoupledADMM.Config(iterations=6, contact_pairs=SolverCoupledADMM.auto_detect_contact_pairs(entries))
    solver = SolverCoupledADMM(model, entries, cfg)
    mass = model.particle_mass.numpy().astype(np.float64)
    p0 = (mass[:, None] * state.particle_qd.numpy()).sum(axis=0)
    p_side = float(np.abs(mass[:n] * state.particle_qd.numpy()[:n, 0]).sum())  # 2.7 kg m/s each way
    worst = [0.0]
    rows = [0]

    def record(s):
        q = s.particle_q.numpy().astype(np.float64)
        d = np.linalg.norm(q[:n, None, :] - q[None, n:, :], axis=-1)
        worst[0] = max(worst[0], 2 * r - float(d.min()))
        rows[0] = max(rows[0], int(solver.diagnostics.contact_count.numpy()[2]))

    final, _ = run(solver, model, state, 60, 0.01, record)
    v = final.particle_qd.numpy().astype(np.float64)
    p1 = (mass[:, None] * v).sum(axis=0)
    assert np.all(np.isfinite(v))
    assert rows[0] > 0
    assert worst[0] < 0.2 * r, f"max cross-entry interpenetration {worst[0]:.2e} m"
    assert np.abs(p1 - p0).max() < 1.0e-4 * p_side, f"momentum {p0} -> {p1}"
    # the blocks bounced: the left block no longer moves toward the right one at its initial speed
    assert v[:n, 0].mean() < 0.5
    # without the pair they pass through each other
    model, state, r = two_particle_groups()
    solver = SolverCoupledADMM(model, entries, SolverCoupledADMM.Config())
    final, _ = run(solver, model, state, 60, 0.01)
    assert final.particle_q.numpy()[:n, 0].mean() > final.particle_q.numpy()[n:, 0].mean()


# ---------------------------------------------------------------------- two dynamic sides
def test_box_stack_across_entries_on_ground():
    """A free box (XPBD entry) resting on the ground (caller's contacts) carries a second free box
    (Featherstone entry, free joint): the ADMM contact rows hold the top box, the ground holds both."""
    b = newton.ModelBuilder()
    b.add_ground_plane()
    lower = b.add_body(xform=wp.transform((0.0, 0.0, BOX_H), wp.quat_identity()), mass=1.0, label="lower")
    b.add_shape_box(lower, hx=2 * BOX_H, hy=2 * BOX_H, hz=BOX_H)
    upper = b.add_body(xform=wp.transform((0.0, 0.0, 3 * BOX_H + 0.05), wp.quat_identity()), mass=1.0, label="upper")
    b.add_shape_box(upper, hx=BOX_H, hy=BOX_H, hz=BOX_H)
    model = b.finalize()
    state = model.state()
    entries = [SolverCoupled.Entry("lower", xpbd, bodies=[lower]), SolverCoupled.Entry("upper", featherstone,
                                                                                      bodies=[upper])]  # fmt: skip
    cfg = SolverCoupledADMM.Config(iterations=6, rigid_contact_matching="latest",
                                   contact_pairs=SolverCoupledADMM.auto_detect_contact_pairs(entries))  # fmt: skip
    solver = SolverCoupledADMM(model, entries, cfg)
    contacts = model.contacts()
    s0, s1 = state, model.state()
    z = []
    for _ in range(80):
        model.collide(s0, contacts)
        solver.step(s0, s1, None, contacts, 0.01)
        s0, s1 = s1, s0
        z.append(s0.body_q.numpy()[:, 2].copy())
    z = np.asarray(z)
    assert np.all(np.isfinite(z))
    assert abs(z[-1, 0] - BOX_H) < 2.0e-3
    pen = (2 * BOX_H + BOX_H) - z[:, 1].min()
    assert pen < 5.0e-3, f"max stack penetration {pen:.2e} m"
    assert abs(z[-1, 1] - 3 * BOX_H) < 2.0e-3
    assert np.abs(s0.body_qd.numpy()).max() < 2.0e-2


# ---------------------------------------------------------------------- warm start and residuals
def _resting_penetration(matching: str, steps: int = 30):
    model, state = plate_scene()
    solver = plate_admm(model, SolverCoupledADMM.Config(iterations=2, rigid_contact_matching=matching,
                                                        contact_matching_pos_threshold=0.005))  # fmt: skip
    final, pens = run(solver, model, state, steps, 0.01, lambda s: float(solver.diagnostics.contact_gap.numpy()[0]))
    return solver, final, pens


@pytest.mark.parametrize("matching", ["latest", "sticky"])
def test_warm_start_by_contact_matching(matching):
    _, _, cold = _resting_penetration("disabled")
    solver, final, warm = _resting_penetration(matching)
    # a resting contact starts each step from 0.9 x its last force: the first iteration penetrates
    # about 10x less than from zero (g dt^2 ~ 1e-3 m)
    assert cold[-1] > 5.0e-4
    assert warm[-1] < 0.3 * cold[-1], f"{matching}: {warm[-1]:.2e} vs disabled {cold[-1]:.2e}"
    # reset() forgets the duals and the matching history: the next step starts cold again
    solver.reset(final)
    _, after = run(solver, solver.model, final, 1, 0.01, lambda s: float(solver.diagnostics.contact_gap.numpy()[0]))
    assert after[0] > 0.5 * cold[-1]


def test_residuals_decrease_within_a_step():
    model, state = plate_scene(box_gap=0.02)
    n_it = 8
    solver = plate_admm(model, SolverCoupledADMM.Config(iterations=n_it))
    s = state
    for _ in range(10):  # until the box lands
        s, _ = run(solver, model, s, 1, 0.01)
        if solver.diagnostics.contact_gap.numpy()[0] > 1.0e-4:
            break
    d = solver.diagnostics
    primal, dual, gap = d.primal_residual.numpy(), d.dual_residual.numpy(), d.contact_gap.numpy()
    assert gap[0] > 1.0e-4
    assert np.all(np.diff(primal) <= 1.0e-7), primal
    assert primal[-1] < 0.1 * primal[0], primal
    assert np.all(gap <= primal + 1.0e-9)
    assert dual[-2] < 0.1 * dual[0], dual


def test_particle_rows_warm_start_by_keys():
    """Rigid-particle rows keyed by (particle, shape): "latest" carries their duals over."""
    r = 0.05
    xs = np.linspace(-0.3, 0.3, 4)
    pos = [(x, y, PLATE_H + r) for x in xs for y in xs]
    first = {}
    for matching in ("disabled", "latest"):
        model, state = plate_scene(box=False, particles=(pos, r))
        solver = plate_admm(model, SolverCoupledADMM.Config(iterations=2, rigid_contact_matching=matching),
                            particles=True)  # fmt: skip
        _, pens = run(solver, model, state, 20, 0.01, lambda s: float(solver.diagnostics.contact_gap.numpy()[0]))
        first[matching] = pens[-1]
    assert first["disabled"] > 5.0e-4
    assert first["latest"] < 0.3 * first["disabled"], first


def test_particle_column_alternating_entries_stands_on_ground():
    """Four particles stacked on the ground, alternately owned by two XPBD entries: three
    particle-particle rows in series carry the weight (the ground contact is the caller's)."""
    r = 0.05
    b = newton.ModelBuilder()
    b.add_ground_plane()
    for k in range(4):
        b.add_particle((0.0, 0.0, r + 2 * r * k + 0.01 * k), (0.0, 0.0, 0.0), 0.1, radius=r)
    model = b.finalize()
    entries = [SolverCoupled.Entry("even", xpbd, particles=[0, 2]), SolverCoupled.Entry("odd", xpbd, particles=[1, 3])]
    cfg = SolverCoupledADMM.Config(iterations=4, contact_pairs=SolverCoupledADMM.auto_detect_contact_pairs(entries))
    solver = SolverCoupledADMM(model, entries, cfg)
    contacts = model.contacts()
    s0, s1 = model.state(), model.state()
    zs = []
    for _ in range(80):
        model.collide(s0, contacts)
        solver.step(s0, s1, None, contacts, 0.01)
        s0, s1 = s1, s0
        zs.append(s0.particle_q.numpy()[:, 2].copy())
    zs = np.asarray(zs)
    gaps = np.diff(zs, axis=1) - 2 * r
    assert np.all(np.isfinite(zs))
    assert gaps.min() > -5.0e-3, f"max interpenetration {-gaps.min():.2e} m"
    assert np.abs(gaps[-1]).max() < 3.0e-3, gaps[-1]
    assert np.abs(s0.particle_qd.numpy()).max() < 2.0e-2
    assert solver.diagnostics.contact_count.numpy()[2] == 3

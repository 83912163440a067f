"""SolverSemiImplicit as an entry of the coupled solvers (the Coupled Solvers page): a penalty-jointed
link under SemiImplicit joined to a link under XPBD or Featherstone by a cross-solver BALL joint
(``SolverCoupledADMM`` joint rows), a SemiImplicit particle rope attached to a Featherstone pendulum
(ADMM body-particle attachment), a rigid box (XPBD) resting on a SemiImplicit cloth through
``SolverCoupledProxy``, and the page's ``Entry(solver=lambda view: ...)`` factory with SemiImplicit.

SemiImplicit's penalty forces are explicit, so its entries take substeps: its joint damping
(``joint_attach_kd`` = 100 N m s/rad) is stable while ``kd dt / I`` stays below 2, its springs while
``dt sqrt(k / m)`` does. The scenes are sized for that. Each bound below was measured here and on
the reference engine (newton 1.8's SolverSemiImplicit in newton's own coupled solvers, run as a
black box on the same code; the ``_run_*`` functions take the module as ``newton``); the figures
are in the docstrings.
"""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import armillary as newton
import armillary.solvers.experimental.coupled  # noqa: F401  (the namespace is imported on demand)

DT = 1.0 / 600.0  # the ADMM suite's step (plugins/coupling/tests/test_admm.py)
L, M = 0.5, 1.0  # link length [m], mass [kg]
LINK_INERTIA = np.diag([0.01, 0.03, 0.03])  # [kg m^2] fat links: SemiImplicit's angular damping is explicit

# Featherstone's view keeps the coupler-owned BALL joint, disabled; it says so once
pytestmark = pytest.mark.filterwarnings("ignore:SolverFeatherstone ignores joint_enabled")


def _coupled():
    return newton.solvers.experimental.coupled


def _rot(q):
    return np.asarray(wp.quat_to_matrix(wp.quat(*[float(x) for x in q]))).reshape(3, 3)


def _semi_implicit(view):
    return newton.solvers.SolverSemiImplicit(view)


def _xpbd(view):
    return newton.solvers.SolverXPBD(view, iterations=4)


def _featherstone(view):
    return newton.solvers.SolverFeatherstone(view)


# ---------------------------------------------------------------------- ADMM: cross-solver BALL joint
def _ball_pair(theta0=0.6):
    """Link 1 hinged (revolute about y) to the world at z = 2, link 2 hanging from link 1's tip by a
    BALL joint; link 1 starts theta0 rad from the vertical, link 2 hangs straight down from it."""
    b = newton.ModelBuilder()
    l1 = b.add_link(mass=M, inertia=wp.mat33(LINK_INERTIA), label="link1")
    l2 = b.add_link(mass=M, inertia=wp.mat33(LINK_INERTIA), label="link2")
    j0 = b.add_joint_revolute(-1, l1, parent_xform=wp.transform((0.0, 0.0, 2.0), wp.quat_identity()),
                              child_xform=wp.transform((0.0, 0.0, L / 2), wp.quat_identity()), axis=(0, 1, 0))
    j1 = b.add_joint_ball(l1, l2, parent_xform=wp.transform((0.0, 0.0, -L / 2), wp.quat_identity()),
                          child_xform=wp.transform((0.0, 0.0, L / 2), wp.quat_identity()))  # fmt: skip
    b.add_articulation([j0, j1])
    model = b.finalize()
    state = model.state()
    q = state.joint_q.numpy()
    q[0] = theta0
    q[1:5] = [0.0, float(np.sin(-theta0 / 2)), 0.0, float(np.cos(-theta0 / 2))]  # link 2 vertical
    state.joint_q.assign(q)
    newton.eval_fk(model, state.joint_q, state.joint_qd, state)
    return model, state


def _ball_gaps(state):
    q = state.body_q.numpy().astype(np.float64)
    tip = q[0, :3] + _rot(q[0, 3:]) @ np.array([0.0, 0.0, -L / 2])
    top = q[1, :3] + _rot(q[1, 3:]) @ np.array([0.0, 0.0, L / 2])
    hinge = q[0, :3] + _rot(q[0, 3:]) @ np.array([0.0, 0.0, L / 2])
    return float(np.linalg.norm(tip - top)), float(np.linalg.norm(hinge - np.array([0.0, 0.0, 2.0])))


def _run_ball(second="xpbd", seconds=0.6, substeps=10, iterations=5):
    C = _coupled()
    model, s0 = _ball_pair()
    s1 = model.state()
    if second == "xpbd":  # SemiImplicit holds link 1 on its penalty hinge, XPBD owns link 2
        entries = [C.SolverCoupled.Entry("penalty", _semi_implicit, bodies=[0], joints=[0], substeps=substeps),
                   C.SolverCoupled.Entry("other", _xpbd, bodies=[1])]
    else:  # Featherstone owns the hinged link 1 (it needs the link's joint), SemiImplicit the free link 2
        entries = [C.SolverCoupled.Entry("other", _featherstone, bodies=[0], joints=[0]),
                   C.SolverCoupled.Entry("penalty", _semi_implicit, bodies=[1])]  # no joint: no substeps
    solver = C.SolverCoupledADMM(model, entries, C.SolverCoupledADMM.Config(iterations=iterations))
    ball, hinge, x2 = [], [], []
    for _ in range(int(round(seconds / DT))):
        solver.step(s0, s1, None, None, DT)
        s0, s1 = s1, s0
        g = _ball_gaps(s0)
        ball.append(g[0])
        hinge.append(g[1])
        x2.append(float(s0.body_q.numpy()[1, 0]))
    return np.asarray(ball), np.asarray(hinge), np.asarray(x2), solver, s0


BALL_GAP_MAX = 2.0e-3  # [m] cross-solver BALL joint (ADMM row), 5 iterations
HINGE_GAP_MAX = 5.0e-3  # [m] SemiImplicit's own penalty hinge (joint_attach_ke = 1e4 N/m)


@pytest.mark.parametrize("second", ["xpbd", "featherstone"])
def test_admm_ball_joint_between_semi_implicit_and_other_solver(second):
    """The cross-entry BALL joint becomes an ADMM row and the double pendulum swings with both gaps
    bounded. With XPBD the SemiImplicit entry keeps link 1's hinge as its own penalty joint; with
    Featherstone (which needs the link's joint in its own entry) SemiImplicit owns the free link 2.

    Reference engine, same code (1 s; the test runs 0.6 s, half a swing; dt 1/600 s, SemiImplicit
    10 substeps, 5 ADMM iterations):
    with XPBD ball gap max 0.49 mm, hinge gap max 0.68 mm, link 2's x swings over [-0.282, 0.237] m.
    With Featherstone the reference diverges (gap 0.2 m at 0.7 s, then NaN); with SemiImplicit on
    link 1 and Featherstone on the jointless link 2 it does not move link 2 at all. Here: ball gap
    max 1.6 um (XPBD) / 4.5 um (Featherstone), hinge gap max 3.1 mm (XPBD layout)."""
    ball, hinge, x2, solver, state = _run_ball(second)
    assert solver.coupled_joints.tolist() == [1]  # the hinge (joint 0) stays with its entry
    assert np.all(np.isfinite(state.body_q.numpy()))
    assert ball.max() <= BALL_GAP_MAX, ball.max()
    assert hinge.max() <= HINGE_GAP_MAX, hinge.max()
    assert x2.min() < -0.25 and x2.max() > 0.15  # it swings through the bottom to the other side


# ---------------------------------------------------------------------- ADMM: particle rope attachment
def _rope_on_pendulum(n=10, seg=0.05):
    C = _coupled()
    b = newton.ModelBuilder()
    link = b.add_link(mass=M, inertia=wp.mat33(LINK_INERTIA), label="link")
    j0 = b.add_joint_revolute(-1, link, parent_xform=wp.transform((0.0, 0.0, 2.0), wp.quat_identity()),
                              child_xform=wp.transform((-L / 2, 0.0, 0.0), wp.quat_identity()), axis=(0, 1, 0))
    b.add_articulation([j0])
    tip = np.array([L, 0.0, 2.0])
    parts = [b.add_particle(tuple(tip + np.array([0.0, 0.0, -seg * i])), (0.0, 0.0, 0.0), 0.01, radius=0.01)
             for i in range(n)]  # fmt: skip
    for i in range(n - 1):
        b.add_spring(parts[i], parts[i + 1], 1.0e3, 0.5, 0.0)
    C.SolverCoupledADMM.add_body_particle_attachment(b, link, parts[0], body_point=(L / 2, 0.0, 0.0))
    model = b.finalize()
    state = model.state()
    newton.eval_fk(model, state.joint_q, state.joint_qd, state)
    return model, state


def _attachment_gap(state) -> float:
    q = state.body_q.numpy()[0].astype(np.float64)
    return float(np.linalg.norm(q[:3] + _rot(q[3:]) @ np.array([L / 2, 0.0, 0.0]) - state.particle_q.numpy()[0]))


def _run_rope(seconds=1.0, substeps=10, iterations=4):
    C = _coupled()
    model, s0 = _rope_on_pendulum()
    s1 = model.state()
    solver = C.SolverCoupledADMM(model, [
        C.SolverCoupled.Entry("pendulum", _featherstone, bodies=[0], joints=[0]),
        C.SolverCoupled.Entry("rope", _semi_implicit, particles=range(model.particle_count), substeps=substeps),
    ], C.SolverCoupledADMM.Config(iterations=iterations))  # fmt: skip
    gaps = []
    for _ in range(int(round(seconds / DT))):
        solver.step(s0, s1, None, None, DT)
        s0, s1 = s1, s0
        gaps.append(_attachment_gap(s0))
    return np.asarray(gaps), solver, s0


ROPE_GAP_MAX = 2.0e-3  # [m]


def test_admm_semi_implicit_rope_attached_to_featherstone_pendulum():
    """A SemiImplicit particle rope (springs, 1e3 N/m) hangs from a Featherstone pendulum's tip by an
    ADMM body-particle attachment: the attachment holds and the rope swings down with the pendulum.

    No reference figure: the reference engine's coupler does not hold this attachment (the gap
    reaches 0.107 m within 0.3 s with an XPBD rope as well as a SemiImplicit one, 0.26 m over 1 s),
    while armillary's ADMM rows hold a VBD rope within 1 mm (plugins/solver_vbd/tests/test_coupled.py).
    Here, rope at 10 substeps: gap max 0.17 mm. At 4 substeps the gap grows from microns to 8 mm
    over 0.6 s and the rope is flung off at 0.9 s (0.33 m), so the rope takes 10."""
    gaps, solver, state = _run_rope()
    assert solver.coupled_attachments.tolist() == [0]
    assert np.all(np.isfinite(state.particle_q.numpy()))
    assert gaps.max() <= ROPE_GAP_MAX, gaps.max()
    assert state.particle_q.numpy()[-1, 0] < 0.4  # the rope swung down with the pendulum


# ---------------------------------------------------------------------- proxy: box on a SemiImplicit cloth
CLOTH_N, CELL, CLOTH_Z, PMASS, PRADIUS = 10, 0.1, 0.6, 0.02, 0.02
BOX_HALF, BOX_MASS, BOX_GAP = (0.15, 0.15, 0.04), 0.5, 0.005
DT_PROXY = 1.0e-2


def _cloth_scene():
    b = newton.ModelBuilder()
    span = (CLOTH_N - 1) * CELL
    b.add_cloth_grid(pos=wp.vec3(-0.5 * span, -0.5 * span, CLOTH_Z), rot=wp.quat_identity(), vel=wp.vec3(0.0),
                     dim_x=CLOTH_N - 1, dim_y=CLOTH_N - 1, cell_x=CELL, cell_y=CELL, mass=PMASS, fix_left=True,
                     fix_right=True, fix_top=True, fix_bottom=True, particle_radius=PRADIUS, tri_ke=1.0e3,
                     tri_ka=1.0e3, tri_kd=1.0, edge_ke=1.0)  # fmt: skip
    hx, hy, hz = BOX_HALF
    inertia = np.diag([hy * hy + hz * hz, hx * hx + hz * hz, hx * hx + hy * hy]) * BOX_MASS / 3.0
    box = b.add_body(xform=wp.transform((0.0, 0.0, CLOTH_Z + PRADIUS + hz + BOX_GAP), wp.quat_identity()),
                     mass=BOX_MASS, inertia=wp.mat33(inertia), label="box")  # fmt: skip
    b.add_shape_box(box, hx=hx, hy=hy, hz=hz, cfg=newton.ModelBuilder.ShapeConfig(density=0.0))
    b.add_ground_plane()
    return b.finalize(), box


def _run_box_on_cloth(seconds=2.0, substeps=20, mode="staggered", rigid="xpbd"):
    C = _coupled()
    model, box = _cloth_scene()
    rigid_solver = {"xpbd": _xpbd, "featherstone": _featherstone}[rigid]
    entries = [
        C.SolverCoupled.Entry(name="rigid", solver=rigid_solver, bodies=[box]),
        C.SolverCoupled.Entry(name="cloth", solver=_semi_implicit, particles=range(model.particle_count),
                              substeps=substeps),
    ]  # fmt: skip
    solver = C.SolverCoupledProxy(model, entries=entries, coupling=C.SolverCoupledProxy.Config(
        proxies=[C.SolverCoupledProxy.Proxy("rigid", "cloth", bodies=[box], mode=mode,
                                            collision_pipeline=lambda v: newton.CollisionPipeline(v))],
        iterations=1))  # fmt: skip
    s0, s1 = model.state(), model.state()
    z, v, sag = [], [], []
    for _ in range(int(round(seconds / DT_PROXY))):
        solver.step(s0, s1, None, model.collide(s0), DT_PROXY)
        s0, s1 = s1, s0
        z.append(float(s0.body_q.numpy()[box, 2]))
        v.append(float(np.abs(s0.body_qd.numpy()[box]).max()))
        sag.append(CLOTH_Z - float(s0.particle_q.numpy()[:, 2].min()))
    return np.asarray(z), np.asarray(v), np.asarray(sag), solver, s0


def test_proxy_xpbd_box_rests_on_semi_implicit_cloth():
    """A 0.5 kg box owned by XPBD, proxied into a pinned SemiImplicit cloth (staggered mode, one proxy
    iteration, dt 0.01 s, 20 cloth substeps): the cloth's penalty contacts carry the box, which
    comes to rest above the cloth's plane minus its sag, and the feedback returned to the box's owner
    carries its weight.

    Reference engine, same code (2 s, 20 substeps): final box z 0.5918 m (lowest 0.5741 m), speed
    0.028 m/s, cloth sag 0.0703 m (resting height 0.66 m - sag = 0.5897 m); its coupler has no
    feedback accessor, the weight check is armillary's. Here: z 0.593 m, speed about 0.02 m/s. With
    10 cloth substeps both engines keep rocking (speeds 0.05-0.2 m/s in the reference, 0.1-0.9 m/s
    here over 4 s), so the test uses 20."""
    z, v, sag, solver, state = _run_box_on_cloth()
    fb = solver.proxy_feedback()[0].numpy()[0].astype(np.float64)
    assert np.all(np.isfinite(state.particle_q.numpy())) and np.all(np.isfinite(state.body_q.numpy()))
    assert z.min() > CLOTH_Z - 0.25  # held by the cloth (the ground is 0.6 m below)
    assert sag[-1] > 0.01  # the box pushes the cloth down
    assert abs(z[-1] - (CLOTH_Z + PRADIUS + BOX_HALF[2] - sag[-1])) < 0.03  # resting on the sagging cloth
    assert v[-1] < 0.05
    assert fb[2] == pytest.approx(BOX_MASS * 9.81, rel=0.1)


# ---------------------------------------------------------------------- the page's Entry factory
def test_entry_factory_builds_semi_implicit_on_the_view():
    """"Each sub-solver receives a ModelView ... constructs the sub-solver by calling the entry's
    solver(view) factory": SolverSemiImplicit is built on its entry's view (with bound keyword
    arguments, as the page advises) and only its owned outputs reach the shared state."""
    C = _coupled()
    model, box = _cloth_scene()
    entry = C.SolverCoupled.Entry(
        name="soft",
        solver=lambda view: newton.solvers.SolverSemiImplicit(view, angular_damping=0.0, enable_tri_contact=False),
        particles=range(model.particle_count),
        substeps=10,
    )
    rigid = C.SolverCoupled.Entry(name="rigid", solver=_xpbd, bodies=[box])
    solver = C.SolverCoupled(model, entries=[rigid, entry])
    sub = solver.solver("soft")
    assert isinstance(sub, newton.solvers.SolverSemiImplicit) and sub.model is solver.view("soft")
    s0, s1 = model.state(), model.state()
    for _ in range(5):
        solver.step(s0, s1, None, None, DT_PROXY)
        s0, s1 = s1, s0
    # without a proxy the box falls freely (XPBD) and the cloth sags on its own (SemiImplicit)
    t = 5 * DT_PROXY
    z0 = CLOTH_Z + PRADIUS + BOX_HALF[2] + BOX_GAP
    assert float(s0.body_q.numpy()[box, 2]) == pytest.approx(z0 - 0.5 * 9.81 * t * t, abs=0.02)
    assert np.all(np.isfinite(s0.particle_q.numpy()))
    assert s0.particle_q.numpy()[:, 2].min() < CLOTH_Z

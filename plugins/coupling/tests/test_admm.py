"""SolverCoupledADMM: cross-solver joints and body-particle attachments (issue #10, ADMM part)."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import warp as wp

import armillary as newton
from armillary_coupling.solver_coupled import SolverCoupled
from armillary_coupling.solver_coupled_admm import SolverCoupledADMM

DT = 1.0 / 600.0
L = 0.5  # link length [m]
M = 1.0  # link mass [kg]
THETA0 = (math.pi / 2 - 0.5, 0.3)  # link 1 30 deg from vertical, link 2 a further 0.3 rad

pytestmark = pytest.mark.filterwarnings("ignore:SolverFeatherstone ignores joint_enabled")


# ---------------------------------------------------------------------- scenes
def two_link(theta0=THETA0, *, friction: float = 0.0):
    """Two rods joined by a revolute (y axis) joint; link 1 hinged to the world at z = 2."""
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
    if friction:
        fr = model.joint_friction.numpy()
        fr[int(model.joint_qd_start.numpy()[j1])] = friction
        model.joint_friction.assign(fr)
    state = model.state()
    state.joint_q.assign(np.asarray(theta0, np.float32))
    newton.eval_fk(model, state.joint_q, state.joint_qd, state)
    return model, state


def featherstone(v):
    return newton.solvers.SolverFeatherstone(v)


def xpbd(v):
    return newton.solvers.SolverXPBD(v, iterations=4)


def admm(model, config=None, first=featherstone, second=xpbd):
    return SolverCoupledADMM(model, [SolverCoupled.Entry("rigid", first, bodies=[0]),
                                     SolverCoupled.Entry("xpbd", second, bodies=[1])], config)  # fmt: skip


def energy(model, state) -> float:
    q, qd = state.body_q.numpy().astype(np.float64), state.body_qd.numpy().astype(np.float64)
    mass, inertia, com = model.body_mass.numpy(), model.body_inertia.numpy(), model.body_com.numpy()
    e = 0.0
    for i in range(len(q)):
        R = np.asarray(wp.quat_to_matrix(wp.quat(*q[i, 3:]))).reshape(3, 3)
        x = q[i, :3] + R @ com[i]
        v, w = qd[i, :3], qd[i, 3:]
        e += 0.5 * mass[i] * v @ v + 0.5 * w @ (R @ inertia[i] @ R.T) @ w + mass[i] * 9.81 * x[2]
    return e


def joint_gap(state) -> float:
    q = state.body_q.numpy().astype(np.float64)
    anchors = []
    for i, off in ((0, L / 2), (1, -L / 2)):
        R = np.asarray(wp.quat_to_matrix(wp.quat(*q[i, 3:]))).reshape(3, 3)
        anchors.append(q[i, :3] + R @ np.array([off, 0.0, 0.0]))
    return float(np.linalg.norm(anchors[0] - anchors[1]))


def simulate(make_solver, seconds: float = 2.0, theta0=THETA0, **scene):
    model, s0 = two_link(theta0, **scene)
    s1 = model.state()
    solver = make_solver(model)
    e0 = energy(model, s0)
    com, gaps = [], []
    for _ in range(int(round(seconds / DT))):
        solver.step(s0, s1, None, None, DT)
        s0, s1 = s1, s0
        com.append(s0.body_q.numpy()[1, :3].astype(np.float64))
        gaps.append(joint_gap(s0))
    return np.asarray(com), energy(model, s0) - e0, np.asarray(gaps), solver


@pytest.fixture(scope="module")
def monolithic():
    com, de, _, _ = simulate(featherstone)
    return com, de


# ---------------------------------------------------------------------- configuration
def test_config_defaults_and_names():
    c = SolverCoupledADMM.Config()
    assert (c.iterations, c.rho, c.gamma, c.baumgarte) == (5, 1.0, 0.0, 0.0)
    assert (c.joint_stiffness, c.joint_damping, c.joint_angular_stiffness, c.joint_angular_damping) == \
        (1.0e4, 0.0, 1.0e4, 0.0)  # fmt: skip
    assert c.rigid_contact_matching == "disabled" and c.contact_matching_force_scale == 0.9
    assert tuple(c.contact_pairs) == ()
    assert SolverCoupledADMM.BODY_PARTICLE_ATTACHMENT_FREQUENCY == "coupling:body_particle_attachment"
    assert SolverCoupledADMM.BODY_PARTICLE_ATTACHMENT_BODY_ATTR == "coupling:body_particle_attachment_body"


@pytest.mark.parametrize("kwargs", [dict(iterations=0), dict(iterations=2.5), dict(rho=0.0), dict(rho=-1.0),
                                    dict(rho=float("nan")), dict(gamma=-0.1), dict(gamma=float("inf")),
                                    dict(baumgarte=-0.1), dict(baumgarte=1.5), dict(joint_stiffness=-1.0),
                                    dict(joint_angular_damping=float("nan")),
                                    dict(rigid_contact_matching="sometimes")])  # fmt: skip
def test_config_rejects_unstable_or_invalid_parameters(kwargs):
    model, _ = two_link()
    with pytest.raises(ValueError):
        admm(model, SolverCoupledADMM.Config(**kwargs))


def test_contact_pairs():
    entries = [SolverCoupled.Entry(n, featherstone) for n in ("a", "b", "c")]
    pairs = SolverCoupledADMM.auto_detect_contact_pairs(entries)
    assert [(p.source, p.destination) for p in pairs] == [("a", "b"), ("a", "c"), ("b", "c")]
    with pytest.raises(ValueError):
        SolverCoupledADMM.ContactPair("a", "a")
    model, _ = two_link()
    with pytest.raises(ValueError, match="unknown entry"):
        admm(model, SolverCoupledADMM.Config(contact_pairs=[SolverCoupledADMM.ContactPair("rigid", "other")]))
    # the links own no shapes and no particles: the pair produces no contact rows
    solver = admm(model, SolverCoupledADMM.Config(contact_pairs=[SolverCoupledADMM.ContactPair("rigid", "xpbd")]))
    assert solver.diagnostics.contact_count.numpy().tolist() == [0, 0, 0]


def test_rows_from_cross_solver_joints_only():
    model, _ = two_link()
    solver = admm(model)
    assert solver.coupled_joints.tolist() == [1]  # joint 0 (world - link1) belongs to the Featherstone entry
    assert solver.joint_owner.tolist() == [0, -1]
    d = solver.diagnostics
    for name in ("primal_residual", "dual_residual", "joint_gap", "attachment_gap"):
        assert getattr(d, name).shape == (5,)
    single = SolverCoupledADMM(model, [SolverCoupled.Entry("all", featherstone, bodies=[0, 1])])
    assert single.coupled_joints.tolist() == []


def test_unsupported_cross_joint_type_is_rejected():
    b = newton.ModelBuilder()
    a = b.add_link(mass=1.0, inertia=np.eye(3) * 0.01)
    c = b.add_link(mass=1.0, inertia=np.eye(3) * 0.01)
    j0 = b.add_joint_revolute(-1, a, axis=(0, 1, 0))
    j1 = b.add_joint_prismatic(a, c, axis=(1, 0, 0))
    b.add_articulation([j0, j1])
    model = b.finalize()
    with pytest.raises(NotImplementedError, match="BALL, FIXED and REVOLUTE"):
        admm(model)


# ---------------------------------------------------------------------- target 1: two-link pendulum
def test_two_link_default_settings_match_monolithic(monolithic):
    ref, de_ref = monolithic
    com, de, gaps, solver = simulate(admm)
    err = np.linalg.norm(com - ref, axis=1)
    assert np.all(np.isfinite(com))
    assert err.max() <= 0.01, err.max()
    assert abs(de) <= 0.05, de
    assert gaps.max() <= 1.0e-3, gaps.max()
    pr = solver.diagnostics.primal_residual.numpy()
    assert np.all(np.isfinite(pr)) and np.all(np.isfinite(solver.diagnostics.dual_residual.numpy()))


def test_two_link_four_iterations_within_2mm(monolithic):
    ref, _ = monolithic
    com, de, gaps, _ = simulate(lambda m: admm(m, SolverCoupledADMM.Config(iterations=4)))
    err = np.linalg.norm(com - ref, axis=1)
    assert err.max() <= 2.0e-3, err.max()
    assert abs(de) <= 0.05, de


@pytest.mark.slow
def test_two_link_mujoco_xpbd(monolithic):
    ref, _ = monolithic
    mujoco = lambda v: newton.solvers.SolverMuJoCo(v)  # noqa: E731
    com, de, gaps, _ = simulate(lambda m: admm(m, SolverCoupledADMM.Config(iterations=4), first=mujoco))
    err = np.linalg.norm(com - ref, axis=1)
    assert err.max() <= 2.0e-3, err.max()
    assert abs(de) <= 0.05, de
    assert gaps.max() <= 1.0e-3


@pytest.mark.slow
def test_error_and_gap_decrease_with_iterations(monolithic):
    ref, _ = monolithic
    runs = {k: simulate(lambda m, k=k: admm(m, SolverCoupledADMM.Config(iterations=k)), seconds=1.0)
            for k in (1, 2, 4, 8, 16)}  # fmt: skip
    converged = runs[16][0]
    n = len(converged)
    coupling_err = [np.linalg.norm(runs[k][0] - converged, axis=1).max() for k in (1, 2, 4, 8)]
    mean_gap = [runs[k][2].mean() for k in (1, 2, 4, 8)]
    assert all(a > b for a, b in zip(coupling_err, coupling_err[1:])), coupling_err
    assert all(a > b for a, b in zip(mean_gap, mean_gap[1:])), mean_gap
    for k in (1, 2, 4, 8):  # every count stays within the default target of the monolithic run
        assert np.linalg.norm(runs[k][0] - ref[:n], axis=1).max() <= 0.01


def test_residuals_decrease_within_a_step():
    model, s0 = two_link()
    s1 = model.state()
    solver = admm(model, SolverCoupledADMM.Config(iterations=6))
    for _ in range(60):
        solver.step(s0, s1, None, None, DT)
        s0, s1 = s1, s0
    primal = solver.diagnostics.primal_residual.numpy()
    dual = solver.diagnostics.dual_residual.numpy()
    assert primal.shape == (6,) and dual.shape == (6,)
    assert primal[-1] < primal[0] and primal[0] < 1.0e-4


@pytest.mark.filterwarnings("ignore:SolverFeatherstone ignores joint friction")
def test_revolute_dry_friction_row():
    """A frictional cross-solver hinge (joint_friction [N m]) resists the relative swing."""

    def relative_rate(friction):
        model, s0 = two_link(friction=friction)
        s1 = model.state()
        solver = admm(model)
        rates = []
        for _ in range(300):
            solver.step(s0, s1, None, None, DT)
            s0, s1 = s1, s0
            qd = s0.body_qd.numpy()
            rates.append(abs(float(qd[1, 4] - qd[0, 4])))
        assert np.all(np.isfinite(s0.body_q.numpy())) and joint_gap(s0) < 1.0e-3
        return np.mean(rates), solver

    free, _ = relative_rate(0.0)
    sticky, solver = relative_rate(5.0)  # far above the gravity torque on link 2: the hinge sticks
    assert solver._j_friction.numpy().tolist() == [5.0]
    assert sticky < 0.05 * free, (sticky, free)
    slipping, _ = relative_rate(0.2)
    assert sticky < slipping < free


@pytest.mark.parametrize("name,value", [("rho", 1.0), ("rho", 10.0), ("rho", 100.0), ("baumgarte", 0.25),
                                        ("baumgarte", 0.5), ("gamma", 0.5), ("gamma", 1.0),
                                        ("joint_damping", 50.0)])  # fmt: skip
def test_parameter_ranges_stay_finite(name, value):
    com, de, gaps, solver = simulate(lambda m: admm(m, SolverCoupledADMM.Config(**{name: value})), seconds=0.3)
    assert np.all(np.isfinite(com)) and math.isfinite(de)
    assert gaps.max() < 5.0e-3, gaps.max()
    assert abs(de) < 0.05


def test_reset_clears_dual_variables():
    model, s0 = two_link()
    s1 = model.state()
    solver = admm(model)
    for _ in range(5):
        solver.step(s0, s1, None, None, DT)
        s0, s1 = s1, s0
    assert np.abs(solver._j_f.numpy()).max() > 0.0
    solver.reset(s0)
    assert np.abs(solver._j_f.numpy()).max() == 0.0


# ---------------------------------------------------------------------- target 2: rope on a pendulum
def rope_on_pendulum(n: int = 10, seg: float = 0.05, *, authored: bool = False):
    b = newton.ModelBuilder()
    inertia = np.diag([M * 0.04**2 / 6, M * (L * L + 0.04**2) / 12, M * (L * L + 0.04**2) / 12])
    link = b.add_link(mass=M, inertia=inertia, label="link")
    j0 = b.add_joint_revolute(-1, link, parent_xform=wp.transform((0.0, 0.0, 2.0), wp.quat_identity()),
                              child_xform=wp.transform((-L / 2, 0.0, 0.0), wp.quat_identity()), axis=(0, 1, 0))
    b.add_articulation([j0])
    tip = np.array([L, 0.0, 2.0])
    parts = [b.add_particle(tuple(tip + np.array([0.0, 0.0, -seg * i])), (0.0, 0.0, 0.0), 0.01, radius=0.01)
             for i in range(n)]  # fmt: skip
    for i in range(n - 1):
        b.add_spring(parts[i], parts[i + 1], 1.0e4, 1.0, 0.0)
    if authored:  # importer path: the custom attributes written directly
        SolverCoupledADMM.register_custom_attributes(b)
        b.add_custom_values({SolverCoupledADMM.BODY_PARTICLE_ATTACHMENT_BODY_ATTR: link,
                             SolverCoupledADMM.BODY_PARTICLE_ATTACHMENT_PARTICLE_ATTR: parts[0],
                             SolverCoupledADMM.BODY_PARTICLE_ATTACHMENT_BODY_POINT_ATTR: wp.vec3(L / 2, 0.0, 0.0)})
    else:
        idx = SolverCoupledADMM.add_body_particle_attachment(b, link, parts[0], body_point=(L / 2, 0.0, 0.0))
        assert idx == 0
    model = b.finalize()
    state = model.state()
    newton.eval_fk(model, state.joint_q, state.joint_qd, state)
    return model, state


def attachment_gap(state) -> float:
    q = state.body_q.numpy()[0].astype(np.float64)
    R = np.asarray(wp.quat_to_matrix(wp.quat(*q[3:]))).reshape(3, 3)
    return float(np.linalg.norm(q[:3] + R @ np.array([L / 2, 0.0, 0.0]) - state.particle_q.numpy()[0]))


def rope_solver(model, iterations: int):
    n = model.particle_count
    return SolverCoupledADMM(model, [
        SolverCoupled.Entry("pendulum", featherstone, bodies=[0]),
        SolverCoupled.Entry("rope", lambda v: newton.solvers.SolverXPBD(v, iterations=10), particles=range(n)),
    ], SolverCoupledADMM.Config(iterations=iterations))  # fmt: skip


@pytest.mark.parametrize("iterations", [2, 4])
def test_rope_attachment_gap_below_1mm(iterations):
    model, s0 = rope_on_pendulum()
    s1 = model.state()
    solver = rope_solver(model, iterations)
    assert solver.coupled_attachments.tolist() == [0]
    gaps = []
    for _ in range(600):
        solver.step(s0, s1, None, None, DT)
        s0, s1 = s1, s0
        gaps.append(attachment_gap(s0))
    assert np.all(np.isfinite(s0.particle_q.numpy()))
    assert max(gaps) <= 1.0e-3, max(gaps)
    # the rope hangs from the pendulum: it swung with it
    assert s0.particle_q.numpy()[-1, 0] < 0.4


def test_authored_attachment_attributes_and_same_entry_rows():
    model, _ = rope_on_pendulum(authored=True)
    assert rope_solver(model, 2).coupled_attachments.tolist() == [0]
    ns = getattr(model, "coupling")
    assert ns.body_particle_attachment_stiffness.numpy().tolist() == [1.0e4]
    # body and particle in the same entry: not an ADMM row
    same = SolverCoupledADMM(model, [SolverCoupled.Entry("all", lambda v: newton.solvers.SolverXPBD(v), bodies=[0],
                                                         particles=range(model.particle_count))])  # fmt: skip
    assert same.coupled_attachments.tolist() == []


def test_add_body_particle_attachment_validates():
    b = newton.ModelBuilder()
    body = b.add_body(mass=1.0)
    p = b.add_particle((0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 1.0)
    with pytest.raises(ValueError):
        SolverCoupledADMM.add_body_particle_attachment(b, body + 1, p)
    with pytest.raises(ValueError):
        SolverCoupledADMM.add_body_particle_attachment(b, body, p, stiffness=-1.0)
    assert SolverCoupledADMM.add_body_particle_attachment(b, body, p) == 0
    assert SolverCoupledADMM.add_body_particle_attachment(b, body, p, damping=2.0) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = b.finalize()
    assert model.coupling.body_particle_attachment_damping.numpy().tolist() == [0.0, 2.0]


def test_in_place_step_and_xpbd_substeps_match():
    """``state_in is state_out`` gives the same result; an XPBD entry with substeps stays coupled."""
    model, s0 = two_link()
    s1 = model.state()
    ref = admm(model)
    model2, s = two_link()
    inplace = admm(model2)
    for _ in range(60):
        ref.step(s0, s1, None, None, DT)
        s0, s1 = s1, s0
        inplace.step(s, s, None, None, DT)
    np.testing.assert_allclose(s.body_q.numpy(), s0.body_q.numpy(), atol=1e-5)

    def xpbd_sub(v):
        return newton.solvers.SolverXPBD(v, iterations=2)

    model3, a = two_link()
    b = model3.state()
    sub = SolverCoupledADMM(model3, [SolverCoupled.Entry("rigid", featherstone, bodies=[0]),
                                     SolverCoupled.Entry("xpbd", xpbd_sub, bodies=[1], substeps=2)])  # fmt: skip
    for _ in range(300):
        sub.step(a, b, None, None, DT)
        a, b = b, a
    for _ in range(240):
        ref.step(s0, s1, None, None, DT)
        s0, s1 = s1, s0
    assert joint_gap(a) < 1.0e-4
    assert np.linalg.norm(a.body_q.numpy()[1, :3] - s0.body_q.numpy()[1, :3]) < 5.0e-3


def test_model_change_refreshes_endpoint_mobility():
    model, s0 = two_link()
    s1 = model.state()
    solver = admm(model, SolverCoupledADMM.Config(gamma=0.5))
    for name in ("body_mass", "body_inertia"):
        arr = getattr(model, name).numpy()
        arr[1] *= 2.0
        getattr(model, name).assign(arr)
    for name in ("body_inv_mass", "body_inv_inertia"):
        arr = getattr(model, name).numpy()
        arr[1] *= 0.5
        getattr(model, name).assign(arr)
    solver.notify_model_changed(newton.ModelFlags.BODY_INERTIAL_PROPERTIES)
    # link 2 (XPBD, maximal coordinates) carries the proximal scaling 1 + gamma in its view
    assert solver.view("xpbd").body_mass.numpy()[1] == pytest.approx(2.0 * 1.5)
    assert solver.view("rigid").body_mass.numpy()[1] == 0.0  # not owned: no forward mass
    assert solver._eff_inv_mass.numpy()[1] == pytest.approx(0.5 / 1.5)
    for _ in range(200):
        solver.step(s0, s1, None, None, DT)
        s0, s1 = s1, s0
    assert np.all(np.isfinite(s0.body_q.numpy())) and joint_gap(s0) < 1.0e-3


@pytest.mark.parametrize("kwargs", [dict(rho=1000.0), dict(gamma=5.0), dict(baumgarte=1.0),
                                    dict(iterations=1, rho=100.0)])
def test_extreme_parameters_do_not_diverge(kwargs):
    com, de, gaps, _ = simulate(lambda m: admm(m, SolverCoupledADMM.Config(**kwargs)), seconds=0.3)
    assert np.all(np.isfinite(com)) and gaps.max() < 1.0e-2 and abs(de) < 0.2


def test_unimplemented_joint_proximal_options_warn():
    """Joint proximal proxy bodies are not implemented: asking for them says so (not silently)."""
    model, _ = two_link()
    with pytest.warns(UserWarning, match="joint proximal proxy bodies are not implemented"):
        admm(model, SolverCoupledADMM.Config(iterations=2, joint_proximal_mass_scale=2.0))

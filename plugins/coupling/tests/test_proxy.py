"""SolverCoupledProxy: configuration, proxy views, lagged/staggered passes, feedback relaxation,
proxy-local collision, reset, and experiment 2 of issue #10 (a rigid box resting on cloth)."""

from __future__ import annotations

import inspect
import time
import warnings

import numpy as np
import pytest
import warp as wp

import armillary as newton
from armillary.sim.enums import BodyFlags, ParticleFlags
from armillary_coupling.solver_coupled import SolverCoupled
from armillary_coupling.solver_coupled_proxy import SolverCoupledProxy

DT = 1.0e-2
P = SolverCoupledProxy.Proxy
E = SolverCoupledProxy.Entry


def _fs(v):
    return newton.solvers.SolverFeatherstone(v)


def _xpbd(v):
    return newton.solvers.SolverXPBD(v, iterations=4)


def _two_boxes(*, ground=True, z=(0.5, 0.5)):
    """Box 'a' (1 kg) and box 'c' (2 kg), 1 m apart, over an optional ground plane."""
    b = newton.ModelBuilder()
    zero = newton.ModelBuilder.ShapeConfig(density=0.0)
    a = b.add_body(xform=wp.transform((0.0, 0.0, z[0]), wp.quat_identity()), mass=1.0,
                   inertia=wp.mat33(np.eye(3) * 0.01), label="a")  # fmt: skip
    b.add_shape_box(a, hx=0.1, hy=0.1, hz=0.1, cfg=zero)
    c = b.add_body(xform=wp.transform((1.0, 0.0, z[1]), wp.quat_identity()), mass=2.0,
                   inertia=wp.mat33(np.eye(3) * 0.02), label="c")  # fmt: skip
    b.add_shape_box(c, hx=0.1, hy=0.1, hz=0.1, cfg=zero)
    if ground:
        b.add_ground_plane()
    return b.finalize()


def _box_proxy_solver(model, **proxy_kw):
    return SolverCoupledProxy(model, entries=[E(name="rigid", solver=_fs, bodies=[0]),
                                              E(name="soft", solver=_xpbd, bodies=[1])],
                              coupling=SolverCoupledProxy.Config(proxies=[P("rigid", "soft", bodies=[0], **proxy_kw)]))  # fmt: skip


# ------------------------------------------------------------------ API
def test_names_and_defaults_match_the_reference_api():
    ref = pytest.importorskip("newton.solvers.experimental.coupled").SolverCoupledProxy
    for ours, theirs in ((SolverCoupledProxy.Proxy, ref.Proxy), (SolverCoupledProxy.Config, ref.Config)):
        a = [(p.name, p.default) for p in inspect.signature(ours).parameters.values()]
        b = [(p.name, p.default) for p in inspect.signature(theirs).parameters.values()]
        assert a == b
    assert list(inspect.signature(SolverCoupledProxy.__init__).parameters) == \
        list(inspect.signature(ref.__init__).parameters)  # fmt: skip


@pytest.mark.parametrize("kw, err", [
    (dict(iterations=0), ValueError),
    (dict(proxy=dict(mode="implicit")), ValueError),
    (dict(proxy=dict(mass_scale=0.0)), ValueError),
    (dict(proxy=dict(mass_scale=float("inf"))), ValueError),
    (dict(proxy=dict(proxy_relaxation=-0.5)), ValueError),
    (dict(proxy=dict(proxy_relaxation_mode="newton")), ValueError),
    (dict(proxy=dict(collide_interval=0)), ValueError),
    (dict(proxy=dict(joints=[0])), ValueError),  # joint 0 is box a's FREE joint: not a proxy joint type
    (dict(proxy=dict(source="nobody")), ValueError),
    (dict(proxy=dict(bodies=[1])), ValueError),  # body 1 is not owned by the source
    (dict(proxy=dict(bodies=[0], proxy_bodies=[1])), ValueError),  # owned by the destination
    (dict(proxy=dict(bodies=[0], proxy_bodies=[0, 1])), ValueError),  # length mismatch
    (dict(proxy=dict(bodies=[])), ValueError),  # maps nothing
])
def test_invalid_configurations_raise(kw, err):
    model = _two_boxes()
    proxy = dict(source="rigid", destination="soft", bodies=[0])
    proxy.update(kw.get("proxy", {}))
    cfg = SolverCoupledProxy.Config(proxies=[P(**proxy)], iterations=kw.get("iterations", 1))
    with pytest.raises(err):
        SolverCoupledProxy(model, entries=[E(name="rigid", solver=_fs, bodies=[0]),
                                           E(name="soft", solver=_xpbd, bodies=[1])], coupling=cfg)  # fmt: skip


def test_coupling_must_be_a_config_and_one_direction():
    model = _two_boxes()
    entries = [E(name="rigid", solver=_fs, bodies=[0]), E(name="soft", solver=_xpbd, bodies=[1])]
    with pytest.raises(TypeError):
        SolverCoupledProxy(model, entries=entries, coupling=None)
    with pytest.raises(NotImplementedError, match="same source"):
        SolverCoupledProxy(model, entries=entries, coupling=SolverCoupledProxy.Config(
            proxies=[P("rigid", "soft", bodies=[0]), P("soft", "rigid", bodies=[1])]))  # fmt: skip


def test_destination_view_holds_dynamic_marked_scaled_proxies():
    model = _two_boxes()
    solver = _box_proxy_solver(model, mass_scale=0.5)
    dst, src = solver.view("soft"), solver.view("rigid")
    flags = dst.body_flags.numpy()
    assert flags[0] & int(BodyFlags.PROXY) and flags[0] & int(BodyFlags.DYNAMIC)
    assert not flags[0] & int(BodyFlags.KINEMATIC)
    np.testing.assert_allclose(dst.body_mass.numpy()[0], 0.5, rtol=1e-6)
    np.testing.assert_allclose(dst.body_inv_mass.numpy()[0], 2.0, rtol=1e-6)
    np.testing.assert_allclose(dst.body_inertia.numpy()[0], np.eye(3) * 0.005, rtol=1e-5, atol=1e-9)
    assert solver.solver("soft").body_mask.numpy().tolist() == [1, 1]  # the proxy is simulated there
    assert 0 in solver.entry("soft").visible_shapes  # and collides there
    # the source and the parent model are untouched
    assert not src.body_flags.numpy()[0] & int(BodyFlags.PROXY)
    np.testing.assert_allclose(src.body_mass.numpy()[0], 1.0)
    np.testing.assert_allclose(model.body_mass.numpy()[0], 1.0)
    assert not model.body_flags.numpy()[0] & int(BodyFlags.PROXY)


def test_distinct_proxy_body_must_belong_to_no_entry_and_is_used():
    b = newton.ModelBuilder()
    a = b.add_body(xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()), mass=1.0, inertia=wp.mat33(np.eye(3) * 0.01))
    v = b.add_body(xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()), mass=1.0, inertia=wp.mat33(np.eye(3) * 0.01))
    c = b.add_body(xform=wp.transform((3.0, 0.0, 1.0), wp.quat_identity()), mass=1.0, inertia=wp.mat33(np.eye(3) * 0.01))
    model = b.finalize()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # body v belongs to no entry
        solver = SolverCoupledProxy(model, entries=[E(name="rigid", solver=_fs, bodies=[a]),
                                                    E(name="soft", solver=_xpbd, bodies=[c])],
                                    coupling=SolverCoupledProxy.Config(proxies=[
                                        P("rigid", "soft", bodies=[a], proxy_bodies=[v], mass_scale=2.0)]))  # fmt: skip
    dst = solver.view("soft")
    assert dst.body_flags.numpy()[v] & int(BodyFlags.PROXY)
    assert dst.body_inv_mass.numpy()[v] == pytest.approx(0.5)
    assert dst.body_inv_mass.numpy()[a] == 0.0  # the real body stays immobile there


# ------------------------------------------------------------------ stepping
def _run(model, solver, steps, *, contacts=True, dt=DT):
    s0, s1 = model.state(), model.state()
    control = model.control()
    for _ in range(steps):
        c = model.collide(s0) if contacts else None
        solver.step(s0, s1, control, c, dt)
        s0, s1 = s1, s0
    return s0


@pytest.mark.parametrize("mode", ["lagged", "staggered"])
def test_without_interaction_the_source_moves_as_alone_and_feedback_stays_zero(mode):
    model = _two_boxes(ground=False, z=(1.0, 1.0))
    solver = _box_proxy_solver(model, mode=mode)
    out = _run(model, solver, 20, contacts=False)
    alone_model = _two_boxes(ground=False, z=(1.0, 1.0))
    ref = _run(alone_model, SolverCoupled(alone_model, entries=[E(name="rigid", solver=_fs, bodies=[0]),
                                                                E(name="soft", solver=_xpbd, bodies=[1])]),
               20, contacts=False)  # fmt: skip
    np.testing.assert_allclose(out.body_q.numpy(), ref.body_q.numpy(), atol=1e-6)
    body_fb, particle_fb = solver.proxy_feedback()
    # momentum fallback: a free-falling proxy exerts (almost) nothing
    assert np.abs(body_fb.numpy()).max() < 1e-3 * 9.81
    assert particle_fb.shape == (0,)
    assert solver.diagnostics.proxy_feedback_change.shape == (1,)


@pytest.mark.parametrize("source, pipeline", [("xpbd", "proxy"), ("xpbd", "none"), ("mujoco", "proxy")])
def test_static_ground_collides_with_every_entry_and_proxy_ground_rows_are_dropped(source, pipeline):
    """Both boxes (one per entry) come to rest on the ground plane, which belongs to no entry; the
    proxy of box 'a' in the XPBD entry does not report its own ground contact as feedback.
    (Featherstone's penalty contacts need a smaller step than this test's.) ``pipeline="none"``:
    the factory returns ``None``, so the destination uses the outer contacts."""
    if source == "mujoco":
        pytest.importorskip("mujoco")
    model = _two_boxes(ground=True, z=(0.3, 0.3))
    solver = SolverCoupledProxy(model, entries=[E(name="rigid", solver=_RIGID[source], bodies=[0]),
                                                E(name="soft", solver=_xpbd, bodies=[1])],
                                coupling=SolverCoupledProxy.Config(proxies=[P(
                                    "rigid", "soft", bodies=[0],
                                    collision_pipeline=lambda view: newton.CollisionPipeline(view) if pipeline == "proxy"
                                    else None)]))  # fmt: skip
    assert (solver.proxy_contacts() is None) == (pipeline == "none")
    out = _run(model, solver, 150)
    z = out.body_q.numpy()[:, 2]
    np.testing.assert_allclose(z, [0.1, 0.1], atol=6e-3)
    assert np.abs(out.body_qd.numpy()).max() < 0.05
    body_fb, _ = solver.proxy_feedback()
    assert np.abs(body_fb.numpy()).max() < 0.05 * 9.81


def test_proxy_pushes_destination_body_and_feedback_slows_the_source():
    """Box 'a' (Featherstone) slides into box 'c' (XPBD): momentum flows both ways."""
    model = _two_boxes(ground=False, z=(1.0, 1.0))
    model.gravity.assign(np.zeros((1, 3), np.float32))
    solver = _box_proxy_solver(model, collision_pipeline=lambda view: newton.CollisionPipeline(view))
    s0, s1 = model.state(), model.state()
    s0.body_qd.assign(np.array([[1.0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]], np.float32))
    newton.eval_ik(model, s0, s0.joint_q, s0.joint_qd)
    p0 = 1.0 * 1.0
    for _ in range(120):
        solver.step(s0, s1, None, model.collide(s0), DT)
        s0, s1 = s1, s0
    v = s0.body_qd.numpy()[:, 0]
    assert v[1] > 0.2  # the XPBD box was pushed
    assert v[0] < 0.8  # the Featherstone box was slowed by the feedback
    p1 = 1.0 * v[0] + 2.0 * v[1]
    assert p1 == pytest.approx(p0, rel=0.15)  # momentum is (approximately) exchanged, not created


@pytest.mark.parametrize("mode, iterations", [("staggered", 1), ("lagged", 3)])
def test_particle_proxies_rest_on_a_destination_box(mode, iterations):
    """Particles owned by one XPBD entry fall onto a box owned by another: the proxies' feedback
    (``particle_f`` of the source) holds them up. (One lagged iteration is not enough here: a
    light proxy against a heavy body gets its full projective correction one step late.)"""
    b = newton.ModelBuilder()
    box = b.add_body(xform=wp.transform((0.0, 0.0, 0.1), wp.quat_identity()), mass=2.0,
                     inertia=wp.mat33(np.eye(3) * 0.02))  # fmt: skip
    b.add_shape_box(box, hx=0.3, hy=0.3, hz=0.1, cfg=newton.ModelBuilder.ShapeConfig(density=0.0))
    for x in (-0.1, 0.0, 0.1):
        b.add_particle((x, 0.0, 0.3), (0.0, 0.0, 0.0), 0.05, radius=0.02)
    b.add_ground_plane()
    model = b.finalize()
    solver = SolverCoupledProxy(model, entries=[
        E(name="particles", solver=lambda v: newton.solvers.SolverXPBD(v, iterations=4), particles=[0, 1, 2]),
        E(name="rigid", solver=lambda v: newton.solvers.SolverXPBD(v, iterations=4), bodies=[box]),
    ], coupling=SolverCoupledProxy.Config(proxies=[
        P("particles", "rigid", particles=[0, 1, 2], mode=mode,
          collision_pipeline=lambda v: newton.CollisionPipeline(v)),
    ], iterations=iterations))  # fmt: skip
    dst = solver.view("rigid")
    assert np.all(dst.particle_flags.numpy() & int(ParticleFlags.PROXY))
    out = _run(model, solver, 150)
    pz = out.particle_q.numpy()[:, 2]
    top = out.body_q.numpy()[box, 2] + 0.1
    np.testing.assert_allclose(pz, top + 0.02, atol=3e-3)  # on top of the box (its top + radius)
    assert np.abs(out.particle_qd.numpy()).max() < 0.05
    _, pf = solver.proxy_feedback()
    np.testing.assert_allclose(pf.numpy()[:, 2], 0.05 * 9.81, rtol=0.2)


def test_iterations_diagnostics_and_aitken():
    model = _two_boxes(ground=True, z=(0.3, 0.3))
    for mode in ("fixed", "aitken"):
        solver = SolverCoupledProxy(model, entries=[E(name="rigid", solver=_fs, bodies=[0]),
                                                    E(name="soft", solver=_xpbd, bodies=[1])],
                                    coupling=SolverCoupledProxy.Config(proxies=[
                                        P("rigid", "soft", bodies=[0], proxy_relaxation=0.5,
                                          proxy_relaxation_mode=mode)], iterations=3))  # fmt: skip
        out = _run(model, solver, 40)
        d = solver.diagnostics
        assert d.proxy_feedback_change.shape == (3,) and d.proxy_feedback_norm.shape == (3,)
        assert np.all(np.isfinite(d.proxy_feedback_change.numpy()))
        relax = d.proxy_relaxation.numpy()
        assert relax[0] == pytest.approx(0.5)
        if mode == "fixed":
            np.testing.assert_allclose(relax, 0.5)
        else:
            assert np.all((relax >= 0.1 - 1e-6) & (relax <= 1.0 + 1e-6))
        assert np.all(np.isfinite(out.body_q.numpy()))


class _CountingPipeline:
    """A CollisionPipeline wrapper that records its calls."""

    def __init__(self, view):
        self.inner = newton.CollisionPipeline(view)
        self.collides = 0
        self.resets = []

    def contacts(self):
        return self.inner.contacts()

    def collide(self, state, contacts, **kw):
        self.collides += 1
        self.inner.collide(state, contacts, **kw)

    def reset_contact_matching(self, world_mask=None):
        self.resets.append(None if world_mask is None else world_mask.numpy().tolist())
        self.inner.reset_contact_matching(world_mask)


def test_proxy_collision_cadence_persistent_buffer_and_masked_reset():
    model = _two_boxes(ground=True, z=(0.3, 0.3))
    made = []

    def factory(view):
        made.append(_CountingPipeline(view))
        assert view is not model and view.name == "soft"
        return made[-1]

    solver = SolverCoupledProxy(model, entries=[E(name="rigid", solver=_fs, bodies=[0]),
                                                E(name="soft", solver=_xpbd, bodies=[1])],
                                coupling=SolverCoupledProxy.Config(proxies=[
                                    P("rigid", "soft", bodies=[0], collision_pipeline=factory, collide_interval=3)],
                                    iterations=2))  # fmt: skip
    assert len(made) == 1
    pipe = made[0]
    buf = solver.proxy_contacts()
    s0, s1 = model.state(), model.state()
    for _ in range(7):
        solver.step(s0, s1, None, model.collide(s0), DT)
        s0, s1 = s1, s0
    assert pipe.collides == 3  # steps 0, 3, 6; inner iterations reuse the result
    assert solver.proxy_contacts() is buf
    solver.reset(s0, world_mask=wp.array([True], dtype=wp.bool, device=model.device))
    assert pipe.resets == [[True, True]]  # (world_count + 1) layout, global entities selected
    body_fb, _ = solver.proxy_feedback()
    assert not np.any(body_fb.numpy())  # lagged feedback of the reset world cleared
    for _ in range(2):  # steps 7, 8: no refresh (cadence kept across the reset)
        solver.step(s0, s1, None, model.collide(s0), DT)
        s0, s1 = s1, s0
    assert pipe.collides == 3 and solver.proxy_contacts() is buf
    solver.step(s0, s1, None, model.collide(s0), DT)  # step 9
    assert pipe.collides == 4


def test_registered_at_run_time_and_resolved_by_name():
    """The coupler can be added to a solver registry at run time (the plugin module will register
    it for good) and resolves to this class."""
    from armillary import hookimpl
    from armillary.plugins import isolated_registry

    class _ProxyPlugin:
        @hookimpl
        def armillary_register_solvers(self, registry):
            registry.add("SolverCoupledProxy", "armillary_coupling.solver_coupled_proxy:SolverCoupledProxy",
                         summary="lagged-impulse proxy coupling")  # fmt: skip

    with isolated_registry() as reg:
        record = reg.register(_ProxyPlugin(), name="proxy-test")
        assert record.status == "loaded", record.error
        assert reg.solvers.resolve("SolverCoupledProxy") is SolverCoupledProxy


# ------------------------------------------------------------------ experiment 2: box on cloth
CLOTH_N, CELL, CLOTH_Z, PMASS, PRADIUS = 10, 0.1, 0.6, 0.02, 0.02
BOX_HALF, BOX_MASS, BOX_GAP = (0.15, 0.15, 0.04), 0.5, 0.005


def _cloth_scene(with_box=True):
    b = newton.ModelBuilder()
    span = (CLOTH_N - 1) * CELL
    b.add_cloth_grid(pos=wp.vec3(-0.5 * span, -0.5 * span, CLOTH_Z), rot=wp.quat_identity(), vel=wp.vec3(0.0),
                     dim_x=CLOTH_N - 1, dim_y=CLOTH_N - 1, cell_x=CELL, cell_y=CELL, mass=PMASS, fix_left=True,
                     fix_right=True, fix_top=True, fix_bottom=True, particle_radius=PRADIUS, tri_ke=1.0e4,
                     tri_ka=1.0e4, edge_ke=10.0)  # fmt: skip
    box = None
    if with_box:
        hx, hy, hz = BOX_HALF
        inertia = np.diag([hy * hy + hz * hz, hx * hx + hz * hz, hx * hx + hy * hy]) * BOX_MASS / 3.0
        box = b.add_body(xform=wp.transform((0.0, 0.0, CLOTH_Z + PRADIUS + hz + BOX_GAP), wp.quat_identity()),
                         mass=BOX_MASS, inertia=wp.mat33(inertia), label="box")  # fmt: skip
        b.add_shape_box(box, hx=hx, hy=hy, hz=hz, cfg=newton.ModelBuilder.ShapeConfig(density=0.0))
    b.add_ground_plane()
    return b.finalize(), box


def _cloth_entry(model, substeps):
    return E(name="cloth", particles=range(model.particle_count), substeps=substeps,
             solver=lambda v: newton.solvers.SolverXPBD(v, iterations=5, soft_contact_relaxation=1.0))  # fmt: skip


_RIGID = {
    "featherstone": _fs,
    "mujoco": lambda v: newton.solvers.SolverMuJoCo(v, use_mujoco_contacts=False),
    "xpbd": lambda v: newton.solvers.SolverXPBD(v, iterations=4),
}


def _energy(model, state, box):
    g = model.gravity.numpy().reshape(-1, 3)[0]
    m = model.particle_mass.numpy()
    q, v = state.particle_q.numpy(), state.particle_qd.numpy()
    e = 0.5 * float(np.sum(m * np.sum(v * v, axis=1))) - float(np.sum(m * (q @ g)))
    if box is not None:
        bq, bqd = state.body_q.numpy()[box], state.body_qd.numpy()[box]
        w = bqd[3:]
        # box inertia is isotropic enough about z; use the body-frame diagonal as a bound
        e += 0.5 * BOX_MASS * float(bqd[:3] @ bqd[:3]) + 0.5 * float(w @ model.body_inertia.numpy()[box] @ w)
        e -= BOX_MASS * float(bq[:3] @ g)
    return e


def _penetration(model, state, box):
    """Deepest overlap [m] of a cloth particle sphere with the box."""
    q = state.body_q.numpy()[box]
    x, y, z, w = q[3:7]
    rot = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                    [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                    [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])  # fmt: skip
    local = (state.particle_q.numpy() - q[:3]) @ rot
    d = np.abs(local) - np.asarray(BOX_HALF)
    sdf = np.linalg.norm(np.maximum(d, 0.0), axis=1) + np.minimum(d.max(axis=1), 0.0)
    return float(max(0.0, np.max(model.particle_radius.numpy() - sdf)))


def _simulate_cloth(rigid, seconds, *, mode="staggered", dt=DT, substeps=4, with_box=True):
    model, box = _cloth_scene(with_box)
    entries = [_cloth_entry(model, substeps)]
    if with_box:
        entries.insert(0, E(name="rigid", solver=_RIGID[rigid], bodies=[box]))
        solver = SolverCoupledProxy(model, entries=entries, coupling=SolverCoupledProxy.Config(proxies=[
            P("rigid", "cloth", bodies=[box], mode=mode,
              collision_pipeline=lambda v: newton.CollisionPipeline(v))]))  # fmt: skip
    else:
        solver = SolverCoupled(model, entries=entries)
    s0, s1 = model.state(), model.state()
    n = int(round(seconds / dt))
    hist = dict(energy=[], pen=[], sag=[], mean_sag=[], box_v=[])
    for k in range(n):
        solver.step(s0, s1, None, model.collide(s0), dt)
        s0, s1 = s1, s0
        if k % 5 == 4 or k == n - 1:
            hist["energy"].append(_energy(model, s0, box))
            hist["sag"].append(CLOTH_Z - float(s0.particle_q.numpy()[:, 2].min()))
            hist["mean_sag"].append(CLOTH_Z - float(s0.particle_q.numpy()[:, 2].mean()))
            if with_box:
                hist["pen"].append(_penetration(model, s0, box))
                hist["box_v"].append(float(np.abs(s0.body_qd.numpy()[box]).max()))
    return {k: np.asarray(v) for k, v in hist.items()}, model, solver


@pytest.fixture(scope="module")
def cloth_alone():
    return _simulate_cloth(None, 4.0, with_box=False)[0]


def _check_box_on_cloth(hist, alone, *, e0, solver):
    late = slice(len(hist["pen"]) // 2, None)
    assert np.all(np.isfinite(hist["energy"]))
    assert hist["energy"].max() <= e0 + 1e-3  # no energy blow-up: the system only dissipates
    assert hist["pen"][late].max() <= 3.6e-3  # the box rests on (not in) the cloth
    assert hist["box_v"][-1] < 0.05  # and comes to rest
    # momentum went both ways: the box pushes the cloth down (deeper, and on average) ...
    assert hist["sag"][-1] > alone["sag"][-1] + 0.005
    assert hist["mean_sag"][-1] > alone["mean_sag"][-1] + 0.0015
    # ... and the cloth holds the box up: the lagged feedback carries its weight
    body_fb, _ = solver.proxy_feedback()
    fb = body_fb.numpy()[0]
    assert fb[2] == pytest.approx(BOX_MASS * 9.81, rel=0.1)
    assert np.abs(fb[:2]).max() < 0.05 * BOX_MASS * 9.81


@pytest.mark.slow
@pytest.mark.parametrize("rigid", ["featherstone", "mujoco", "xpbd"])
def test_experiment2_box_rests_on_cloth(rigid, cloth_alone):
    if rigid == "mujoco":
        pytest.importorskip("mujoco")
    t = time.perf_counter()
    hist, model, solver = _simulate_cloth(rigid, 10.0)
    model0, box = _cloth_scene(True)
    e0 = _energy(model0, model0.state(), box)
    _check_box_on_cloth(hist, cloth_alone, e0=e0, solver=solver)
    assert time.perf_counter() - t < 120.0


@pytest.mark.slow
@pytest.mark.parametrize("rigid", ["featherstone", "mujoco", "xpbd"])
def test_experiment2_lagged_mode_box_rests_on_cloth(rigid, cloth_alone):
    """The default lagged mode with one proxy iteration, at the real scene's step (dt = 0.01 s,
    four XPBD cloth substeps): the box settles with at most 3.6 mm penetration and the energy
    never rises above its start (the lagged predictor removes the one-step lag's negative
    damping; without it the box bounces off the cloth and the rocking mode blows up)."""
    if rigid == "mujoco":
        pytest.importorskip("mujoco")
    assert SolverCoupledProxy.Proxy("a", "b").mode == "lagged"  # the default
    hist, model, solver = _simulate_cloth(rigid, 10.0, mode="lagged")
    model0, box = _cloth_scene(True)
    _check_box_on_cloth(hist, cloth_alone, e0=_energy(model0, model0.state(), box), solver=solver)


def test_lagged_predictor_extrapolates_the_feedback_history_on_the_first_pass():
    """Lagged mode: the source's first pass of a step gets ``F + b (F - F_last)`` (``b`` =
    ``lagged_extrapolation``), later passes the current feedback iterate; staggered mode gets the
    bare feedback. Checked on the source's force input with a frozen feedback history."""
    for mode, iterations in (("lagged", 1), ("lagged", 2), ("staggered", 1)):
        model = _two_boxes(ground=False, z=(1.0, 1.0))
        solver = _box_proxy_solver(model, mode=mode)
        solver.coupling.iterations = iterations
        g = solver._groups[0]
        F = np.array([[1.0, 2.0, 3.0, 0.1, 0.2, 0.3]], np.float32)
        F_last = np.array([[0.5, 1.0, 1.0, 0.0, 0.1, 0.5]], np.float32)
        g.body_feedback.assign(F)
        g.body_feedback_last.assign(F_last)
        src = solver.entry("rigid")
        for it in range(iterations):
            src.state_0.body_f.zero_()
            solver._add_source_feedback(g, it)
            b = solver.lagged_extrapolation if (mode == "lagged" and it == 0) else 0.0
            np.testing.assert_allclose(src.state_0.body_f.numpy()[0], (F + b * (F - (F_last if it == 0 else F)))[0],
                                       rtol=1e-6, atol=1e-7)  # fmt: skip
        np.testing.assert_allclose(g.body_feedback_last.numpy(), F)  # the history moved on


# ------------------------------------------------------------------ proxy joints (VBD destination)
_ARM_L = 0.5


def _proxy_arm(*, prismatic: bool = False, ball: bool = False):
    """Two-link arm (links 0, 1; joint 0 world-link 0 and joint 1 link 0-link 1, revolute about y,
    PD-driven) plus a free box (body 2, joint 2); coloured for SolverVBD."""
    b = newton.ModelBuilder()
    m, L = 1.0, _ARM_L
    inertia = np.diag([m * 0.04**2 / 6, m * (L * L + 0.04**2) / 12, m * (L * L + 0.04**2) / 12])
    l1 = b.add_link(mass=m, inertia=inertia, label="link1")
    l2 = b.add_link(mass=m, inertia=inertia, label="link2")
    j0 = b.add_joint_revolute(-1, l1, parent_xform=wp.transform((0.0, 0.0, 2.0), wp.quat_identity()),
                              child_xform=wp.transform((-L / 2, 0.0, 0.0), wp.quat_identity()), axis=(0, 1, 0),
                              target_ke=100.0, target_kd=10.0)  # fmt: skip
    px, cx = wp.transform((L / 2, 0.0, 0.0), wp.quat_identity()), wp.transform((-L / 2, 0.0, 0.0), wp.quat_identity())
    if ball:
        j1 = b.add_joint_ball(l1, l2, parent_xform=px, child_xform=cx)
    elif prismatic:
        j1 = b.add_joint_prismatic(l1, l2, parent_xform=px, child_xform=cx, axis=(1, 0, 0))
    else:
        j1 = b.add_joint_revolute(l1, l2, parent_xform=px, child_xform=cx, axis=(0, 1, 0), target_ke=50.0,
                                  target_kd=5.0)  # fmt: skip
    b.add_articulation([j0, j1])
    b.add_body(xform=wp.transform((3.0, 0.0, 1.0), wp.quat_identity()), mass=1.0, inertia=wp.mat33(np.eye(3) * 0.01),
               label="box")  # fmt: skip
    b.color()
    model = b.finalize()
    state = model.state()
    newton.eval_fk(model, state.joint_q, state.joint_qd, state)
    return model, state


def _vbd(v):
    return newton.solvers.SolverVBD(v, iterations=10)


def _arm_proxy_solver(model, source=_fs, **proxy_kw):
    proxy_kw.setdefault("bodies", [0, 1])
    return SolverCoupledProxy(model, entries=[E(name="arm", solver=source, bodies=[0, 1]),
                                              E(name="vbd", solver=_vbd, bodies=[2])],
                              coupling=SolverCoupledProxy.Config(proxies=[P("arm", "vbd", **proxy_kw)]))  # fmt: skip


def _arm_gaps(body_q) -> tuple[float, float]:
    """(gap of joint 1 between the links, gap of joint 0 to its world anchor) [m]."""
    q = body_q.astype(np.float64)
    rot = [np.asarray(wp.quat_to_matrix(wp.quat(*q[i, 3:]))).reshape(3, 3) for i in (0, 1)]
    a = q[0, :3] + rot[0] @ np.array([_ARM_L / 2, 0.0, 0.0])
    c = q[1, :3] + rot[1] @ np.array([-_ARM_L / 2, 0.0, 0.0])
    w = q[0, :3] + rot[0] @ np.array([-_ARM_L / 2, 0.0, 0.0])
    return float(np.linalg.norm(a - c)), float(np.linalg.norm(w - np.array([0.0, 0.0, 2.0])))


@pytest.mark.filterwarnings("ignore:SolverFeatherstone ignores joint_enabled")
def test_proxy_joints_stay_enabled_in_the_destination_view():
    model, _ = _proxy_arm()
    with_joints = _arm_proxy_solver(model, joints=[0, 1])
    assert with_joints.view("vbd").joint_enabled.numpy().tolist() == [True, True, True]
    assert with_joints.entry("vbd").joints.tolist() == [2]  # kept, not owned: no joint rows are reconciled
    without = _arm_proxy_solver(model)
    assert without.view("vbd").joint_enabled.numpy().tolist() == [False, False, True]
    aliased = _arm_proxy_solver(model, joints=[0, 1], proxy_joints=[0, 1])
    assert aliased.view("vbd").joint_enabled.numpy().tolist() == [True, True, True]


@pytest.mark.filterwarnings("ignore:SolverFeatherstone ignores joint_enabled")
@pytest.mark.parametrize("source", ["featherstone", "xpbd"])
def test_proxy_joints_keep_the_driven_arm_together_in_vbd(source):
    """A two-link arm (Featherstone or XPBD) driven to joint targets; its proxies in a SolverVBD
    entry keep both revolute constraints (gap below 1 mm in the destination output) and get the
    drive targets copied; the source behaves as alone (no joint force is fed back twice)."""
    model, s0 = _proxy_arm()
    s1 = model.state()
    solver = _arm_proxy_solver(model, source=_fs if source == "featherstone" else _xpbd, joints=[0, 1])
    control = model.control()
    target = np.asarray(control.joint_target_q.numpy())
    target[:2] = (0.8, -0.5)
    control.joint_target_q.assign(target)
    gaps = []
    for _ in range(150):
        solver.step(s0, s1, control, None, DT)
        s0, s1 = s1, s0
        gaps.append(_arm_gaps(solver.entry("vbd").state_out.body_q.numpy()))
    gaps = np.asarray(gaps)
    assert np.all(np.isfinite(gaps)) and gaps.max() < 1.0e-3, gaps.max(axis=0)
    np.testing.assert_allclose(solver.entry("vbd").control.joint_target_q.numpy()[:2], (0.8, -0.5))
    # the source followed its drives (from 0 rad; gravity sag and the drive feedback aside)
    q = s0.body_q.numpy()
    angle0 = np.arctan2(-(q[0, 2] - 2.0), q[0, 0])  # link 0's angle about +y (x towards -z)
    assert abs(angle0 - 0.8) < 0.15, angle0
    # the joints act between two proxies of the same source: their forces are the source's own
    # business, so VBD reports contact feedback only (none here: the arm touches nothing)
    assert solver.solver("vbd").coupling_harvest == "contact"
    body_f, _ = solver.proxy_feedback()
    assert np.all(np.isfinite(body_f.numpy())) and np.abs(body_f.numpy()).max() < 1.0e-6


@pytest.mark.filterwarnings("ignore:SolverFeatherstone ignores joint_enabled")
def test_proxy_joint_targets_are_copied_into_the_destination_rows():
    model, s0 = _proxy_arm()
    solver = _arm_proxy_solver(model, joints=[1])
    control = model.control()
    tq, tqd = control.joint_target_q.numpy(), control.joint_target_qd.numpy()
    tq[:2], tqd[:2] = (0.3, -0.4), (0.1, 0.2)
    control.joint_target_q.assign(tq)
    control.joint_target_qd.assign(tqd)
    local = solver._copy_control(solver.entry("vbd"), control)
    assert local is solver.entry("vbd").control
    assert local.joint_target_q.numpy()[1] == pytest.approx(-0.4)
    assert local.joint_target_qd.numpy()[1] == pytest.approx(0.2)


@pytest.mark.parametrize("kw, match", [
    (dict(joints=[2]), "FREE"),  # the box's free joint
    (dict(joints=[0, 1], proxy_joints=[1, 0]), "proxy_joints"),
    (dict(joints=[0], proxy_joints=[]), "proxy_joints"),
    (dict(bodies=[0], joints=[1]), "child body 1 is not one of the proxy's bodies"),
    (dict(bodies=[1], joints=[1]), "parent body 0 is not one of the proxy's bodies"),
    (dict(joints=[5]), "joint"),
])
@pytest.mark.filterwarnings("ignore:SolverFeatherstone ignores joint_enabled")
def test_invalid_proxy_joints_raise(kw, match):
    model, _ = _proxy_arm()
    with pytest.raises(ValueError, match=match):
        _arm_proxy_solver(model, **kw)


@pytest.mark.filterwarnings("ignore:SolverFeatherstone ignores joint_enabled")
def test_unsupported_proxy_joint_type_names_the_joint_and_type():
    model, _ = _proxy_arm(ball=True)
    with pytest.raises(ValueError, match=r"joint 1 .*BALL"):
        _arm_proxy_solver(model, joints=[0, 1])
    model, _ = _proxy_arm(prismatic=True)
    solver = _arm_proxy_solver(model, joints=[0, 1])  # PRISMATIC is supported
    assert solver.view("vbd").joint_enabled.numpy().tolist() == [True, True, True]

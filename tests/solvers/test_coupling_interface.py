"""CouplingInterface: the hook set, its defaults, and their use on plain SolverBase solvers."""

from __future__ import annotations

import inspect
import subprocess
import sys

import numpy as np
import pytest
import warp as wp

import armillary as newton
from armillary.solvers import CouplingInterface, SolverBase, SolverCapabilities
from armillary.solvers.coupling import COUPLING_HOOKS, ENDPOINT_BODY, ENDPOINT_PARTICLE, coupling_hook


def test_import_armillary_stays_free_of_warp():
    code = ("import sys, armillary, armillary.solvers, armillary.solvers.coupling; "
            "raise SystemExit(1 if 'warp' in sys.modules else 0)")  # fmt: skip
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_hooks_match_the_reference_names_and_parameters():
    coupled = pytest.importorskip("newton.solvers.experimental.coupled")
    ref = coupled.CouplingInterface
    ref_hooks = sorted(n for n in vars(ref) if n.startswith("coupling_"))
    assert sorted(COUPLING_HOOKS) == ref_hooks
    for name in ref_hooks:
        ours = inspect.signature(getattr(CouplingInterface, name)).parameters
        theirs = inspect.signature(getattr(ref, name)).parameters
        assert [(p.name, p.kind, p.default is inspect.Parameter.empty) for p in ours.values()] == \
            [(p.name, p.kind, p.default is inspect.Parameter.empty) for p in theirs.values()], name  # fmt: skip
        assert getattr(CouplingInterface, name).__doc__, name
    assert [int(k) for k in CouplingInterface.EndpointKind] == [int(k) for k in ref.EndpointKind] == [0, 1]
    assert CouplingInterface.EndpointKind.BODY == ENDPOINT_BODY and CouplingInterface.EndpointKind.PARTICLE == 1


def _scene(gravity=(0.0, 0.0, -9.81), kinematic=False):
    b = newton.ModelBuilder()
    a = b.add_body(xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()), mass=2.0,
                   inertia=wp.mat33(*(np.eye(3) * 0.02).ravel()))
    b.add_shape_sphere(a, radius=0.1, cfg=newton.ModelBuilder.ShapeConfig(density=0.0))
    k = b.add_body(xform=wp.transform((1.0, 0.0, 1.0), wp.quat_identity()), mass=1.0)
    b.add_shape_sphere(k, radius=0.1)
    b.add_particle((0.0, 1.0, 1.0), (0.0, 0.0, 0.0), 0.5)
    b.add_particle((0.0, 2.0, 1.0), (0.0, 0.0, 0.0), 0.0)  # zero mass: immovable
    model = b.finalize()
    model.set_gravity(gravity)
    flags = model.body_flags.numpy()
    flags[1] = int(newton.BodyFlags.KINEMATIC)
    model.body_flags.assign(flags)
    return model


class _Plain(SolverBase):
    """Semi-implicit Euler for free bodies and particles, without the mixin (a plain SolverBase)."""

    capabilities = SolverCapabilities(
        coordinates="maximal", joint_types={newton.JointType.FREE},
        features={"rigid_bodies", "particles", "kinematic_bodies", "multiple_worlds"},
    )

    def step(self, state_in, state_out, control, contacts, dt):
        m = self.model
        g = m.gravity.numpy()[0]
        qd = state_in.body_qd.numpy().copy()
        inv_m = m.body_inv_mass.numpy()
        kin = (m.body_flags.numpy() & int(newton.BodyFlags.KINEMATIC)) != 0
        f = state_in.body_f.numpy()
        for b in range(m.body_count):
            if not kin[b]:
                qd[b, :3] += dt * (g + inv_m[b] * f[b, :3])
                qd[b, 3:] += dt * (m.body_inv_inertia.numpy()[b] @ f[b, 3:])
        state_out.body_qd.assign(qd)
        pqd = state_in.particle_qd.numpy().copy()
        pinv = m.particle_inv_mass.numpy()
        pf = state_in.particle_f.numpy()
        for p in range(m.particle_count):
            if pinv[p] > 0:
                pqd[p] += dt * (g + pinv[p] * pf[p])
        state_out.particle_qd.assign(pqd)


class _Mixed(_Plain, CouplingInterface):
    capabilities = _Plain.capabilities

    def coupling_harvest_proxy_wrenches(self, *args, **kwargs):
        raise NotImplementedError("_Mixed keeps no proxy-body contact data")


def test_gravity_default_per_entity():
    model = _scene(gravity=(0.0, 1.0, -5.0))
    solver = _Plain(model)
    gb = wp.zeros(2, dtype=wp.vec3)
    gp = wp.zeros(2, dtype=wp.vec3)
    coupling_hook(solver, "coupling_eval_gravity_acceleration")(gb, gp)
    np.testing.assert_allclose(gb.numpy(), [[0, 1, -5], [0, 0, 0]])  # kinematic body: none
    np.testing.assert_allclose(gp.numpy(), [[0, 1, -5], [0, 0, 0]])  # zero-mass particle: none
    coupling_hook(solver, "coupling_eval_gravity_acceleration")(None, gp)  # either output may be skipped
    with pytest.raises(ValueError, match="out_body_acceleration has 3 rows"):
        coupling_hook(solver, "coupling_eval_gravity_acceleration")(wp.zeros(3, dtype=wp.vec3), None)


def test_gravity_default_follows_each_world():
    b = newton.ModelBuilder()
    for _ in range(2):
        b.begin_world()
        b.add_body(mass=1.0)
        b.end_world()
    model = b.finalize()
    model.set_gravity((0.0, 0.0, -1.0), world=0)
    model.set_gravity((0.0, 0.0, -2.0), world=1)
    out = wp.zeros(2, dtype=wp.vec3)
    CouplingInterface.coupling_eval_gravity_acceleration(_Plain(model), out, None)
    np.testing.assert_allclose(out.numpy(), [[0, 0, -1.0], [0, 0, -2.0]])


def test_rewind_then_step_returns_the_source_velocity_and_harvest_sees_no_interaction():
    """Rewinding removes exactly what the destination re-applies (gravity, force input, lagged
    feedback): with no interaction, the destination ends at the source velocity, and the momentum
    fallback harvests the lagged feedback only as the missing part (zero here)."""
    model = _scene()
    solver = _Plain(model)
    dt = 0.01
    state, out = model.state(), model.state()
    v_src = np.array([[0.3, -0.2, 1.0, 0.5, 0.1, -0.4], [0, 0, 0, 0, 0, 0]], np.float32)
    state.body_qd.assign(v_src)
    state.body_f.assign(np.array([[1.0, 2.0, 0.0, 0.01, 0.0, 0.02], [0] * 6], np.float32))
    proxy = wp.array([0, -1], dtype=wp.int32)
    feedback = wp.array(np.array([[0.5, 0.0, -1.0, 0.0, 0.03, 0.0]], np.float32), dtype=wp.spatial_vector)
    gb, _ = wp.zeros(2, dtype=wp.vec3), None
    coupling_hook(solver, "coupling_eval_gravity_acceleration")(gb, None)
    coupling_hook(solver, "coupling_rewind_proxy_body")(proxy, state, feedback, gb, dt)
    rewound = state.body_qd.numpy().copy()
    inv_m = model.body_inv_mass.numpy()[0]
    f = np.array([1.5, 2.0, -1.0])
    np.testing.assert_allclose(rewound[0, :3], v_src[0, :3] - dt * (inv_m * f + [0, 0, -9.81]), rtol=1e-5)
    np.testing.assert_array_equal(rewound[1], v_src[1])  # not a proxy
    before = wp.clone(state.body_qd)
    solver.step(state, out, None, None, dt)
    # destination re-applied gravity and force input, not the feedback
    expected = v_src[0].copy()
    expected[:3] -= dt * inv_m * np.array([0.5, 0.0, -1.0])
    expected[3:] -= dt * (model.body_inv_inertia.numpy()[0] @ np.array([0.0, 0.03, 0.0]))
    np.testing.assert_allclose(out.body_qd.numpy()[0], expected, atol=1e-5)
    harvested = wp.zeros(1, dtype=wp.spatial_vector)
    coupling_hook(solver, "coupling_harvest_proxy_wrenches")(proxy, harvested, body_qd_before=before, state=state,
                                                             state_out=out, contacts=None, dt=dt)  # fmt: skip
    np.testing.assert_allclose(harvested.numpy(), 0.0, atol=2e-3)


def test_particle_rewind_and_harvest():
    model = _scene()
    solver = _Plain(model)
    dt = 0.01
    state, out = model.state(), model.state()
    state.particle_qd.assign(np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0]], np.float32))
    state.particle_f.assign(np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]], np.float32))
    proxy = wp.array([0, 1], dtype=wp.int32)
    feedback = wp.array(np.array([[0.0, 0.0, 2.0], [0.0, 0.0, 0.0]], np.float32), dtype=wp.vec3)
    gp = wp.zeros(2, dtype=wp.vec3)
    coupling_hook(solver, "coupling_eval_gravity_acceleration")(None, gp)
    coupling_hook(solver, "coupling_rewind_proxy_particle")(proxy, state, feedback, gp, dt)
    np.testing.assert_allclose(state.particle_qd.numpy()[0], [1.0, -dt * 2.0, -dt * (4.0 - 9.81)], rtol=1e-5)
    before = wp.clone(state.particle_qd)
    solver.step(state, out, None, None, dt)
    # a push of 3 N along x, as if from a contact the destination resolved
    qd = out.particle_qd.numpy()
    qd[0, 0] += dt * 3.0 * 2.0
    out.particle_qd.assign(qd)
    harvested = wp.zeros(2, dtype=wp.vec3)
    coupling_hook(solver, "coupling_harvest_proxy_particle_forces")(proxy, harvested, particle_qd_before=before,
                                                                    state=state, state_out=out, contacts=None, dt=dt)
    np.testing.assert_allclose(harvested.numpy(), [[3.0, 0.0, 0.0], [0.0, 0.0, 0.0]], atol=1e-3)


def test_notifications_capabilities_and_unsupported_hooks():
    model = _scene()
    mixed = _Mixed(model)
    plain = _Plain(model)
    for s in (mixed, plain):
        coupling_hook(s, "coupling_notify_iteration_restarts")(True)
        coupling_hook(s, "coupling_notify_input_state_update")(model.state(), newton.StateFlags.BODY_Q, dt=0.01)
        assert coupling_hook(s, "coupling_supports_inertial_property_refresh")() is False
        assert coupling_hook(s, "coupling_supports_full_surface_soft_contacts")() is False
        assert coupling_hook(s, "coupling_prepare_proxy_contacts")(model.state(), None) is None
        assert int(coupling_hook(s, "coupling_effective_mass_refresh_flags")()) & int(
            newton.ModelFlags.BODY_INERTIAL_PROPERTIES)
    assert mixed._coupling_iteration_restarts is True
    with pytest.raises(TypeError, match="StateFlags or an int"):
        mixed.coupling_notify_input_state_update(model.state(), "BODY")
    with pytest.raises(NotImplementedError, match="no proxy-body contact data"):
        coupling_hook(mixed, "coupling_harvest_proxy_wrenches")(None, None)
    with pytest.raises(AttributeError, match="unknown coupling hook"):
        coupling_hook(plain, "coupling_nope")


def test_effective_mass_defaults_work_on_plain_solvers():
    model = _scene()
    solver = _Plain(model)
    out = wp.zeros(3, dtype=wp.float32)
    kinds = wp.array([ENDPOINT_BODY, ENDPOINT_BODY, ENDPOINT_PARTICLE], dtype=wp.int32)
    coupling_hook(solver, "coupling_eval_effective_mass")(kinds, wp.array([0, 1, 0], dtype=wp.int32),
                                                          wp.zeros(3, dtype=wp.vec3), out)  # fmt: skip
    np.testing.assert_allclose(out.numpy(), [2.0, model.body_mass.numpy()[1], 0.5], rtol=1e-6)

"""SolverSemiImplicit particle half (``particles.ParticleForces``): force laws against the reference
engine's SolverSemiImplicit (black-box numbers, hard-coded below with the scene that produced them),
against analytic values, and whole-scene behaviour (oscillation, settling, contacts, momentum).

Scenes are stepped through ``armillary.solvers.SolverSemiImplicit`` when it declares the
``particles`` feature, else through a minimal stand-in (``ParticleForces.eval`` + ``integrate``,
which is what the solver calls); tests parametrised over ``stepper`` run both where possible.

Reference numbers were measured by stepping newton 1.8's ``SolverSemiImplicit`` once with
``dt = 1e-3`` or ``1e-4`` and zero gravity from the stated configuration and reading
``m (v1 - v0) / dt``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import warp as wp

import armillary
from armillary_solver_semi_implicit.particles import ParticleForces

wp.config.quiet = True

TRI_REST = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
TET_REST = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])


# --------------------------------------------------------------------------- harness
def _solver_has_particles() -> bool:
    try:
        cls = armillary.solvers.SolverSemiImplicit
    except Exception:  # noqa: BLE001 - the core half may not be importable yet
        return False
    return "particles" in set(getattr(cls.capabilities, "features", ()) or ())


class _Stepper:
    """``step(s0, s1, control, contacts, dt)`` through the solver or through ParticleForces."""

    def __init__(self, model, kind: str, enable_tri_contact: bool = True):
        self.model = model
        if kind == "solver":
            self.solver = armillary.solvers.SolverSemiImplicit(model, enable_tri_contact=enable_tri_contact)
            self.pf = None
        else:
            self.solver = None
            self.pf = ParticleForces(model, enable_tri_contact=enable_tri_contact, friction_smoothing=1.0)
            self.f = wp.zeros(model.particle_count, dtype=wp.vec3, device=model.device)
            self.bf = wp.zeros(model.body_count, dtype=wp.spatial_vector, device=model.device)

    def step(self, s0, s1, control, contacts, dt):
        if self.solver is not None:
            self.solver.step(s0, s1, control, contacts, dt)
            return
        self.f.zero_()
        self.pf.eval(s0, control, contacts, self.f, self.bf if self.model.body_count else None)
        self.pf.integrate(s0, s1, self.f, dt)


@pytest.fixture(params=["forces", "solver"])
def stepper(request):
    if request.param == "solver" and not _solver_has_particles():
        pytest.skip("SolverSemiImplicit does not declare the 'particles' feature yet")
    return request.param


def _ground_contacts(model, state, contacts, margin=0.01):
    """Soft contacts of every particle within ``margin`` of the ground plane (shape 0, z = 0), as
    the collision pipeline reports them: surface point (world, static shape), normal +z. Written
    on the host so that these tests do not compile the whole collision pipeline."""
    x = state.particle_q.numpy()
    idx = np.nonzero(x[:, 2] - model.particle_radius.numpy() < margin)[0].astype(np.int32)
    n = len(idx)
    contacts.soft_contact_count.assign(np.array([n], np.int32))
    if n:
        pos = x[idx].copy()
        pos[:, 2] = 0.0
        contacts.soft_contact_particle[:n].assign(idx)
        contacts.soft_contact_shape[:n].assign(np.zeros(n, np.int32))
        contacts.soft_contact_body_pos[:n].assign(pos)
        contacts.soft_contact_body_vel[:n].assign(np.zeros((n, 3), np.float32))
        contacts.soft_contact_normal[:n].assign(np.tile(np.array([0, 0, 1], np.float32), (n, 1)))
    return contacts


def _simulate(model, kind, steps, dt, *, collide=False, enable_tri_contact=True, record=None):
    st = _Stepper(model, kind, enable_tri_contact)
    s0, s1, c = model.state(), model.state(), model.control()
    contacts = armillary.Contacts(0, model.particle_count, device=model.device) if collide else None
    for i in range(steps):
        if collide:
            _ground_contacts(model, s0, contacts)
        st.step(s0, s1, c, contacts, dt)
        s0, s1 = s1, s0
        if record is not None:
            record(i, s0)
    return s0


def _forces(model, state, control=None, contacts=None, enable_tri_contact=True):
    pf = ParticleForces(model, enable_tri_contact=enable_tri_contact, friction_smoothing=1.0)
    f = wp.zeros(model.particle_count, dtype=wp.vec3, device=model.device)
    bf = wp.zeros(model.body_count, dtype=wp.spatial_vector, device=model.device)
    pf.eval(state, control, contacts, f, bf if model.body_count else None)
    return f.numpy().astype(np.float64), bf.numpy().astype(np.float64)


def _element_model(rest, add, radius=1.0e-4):
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    for p in rest:
        b.add_particle(tuple(float(v) for v in p), (0.0, 0.0, 0.0), 1.0, radius=radius)
    add(b)
    return b.finalize(device="cpu")


def _set(model, q=None, qd=None):
    s = model.state()
    if q is not None:
        s.particle_q.assign(np.asarray(q, np.float32))
    if qd is not None:
        s.particle_qd.assign(np.asarray(qd, np.float32))
    return s


# --------------------------------------------------------------------------- reference parity: elements
@pytest.mark.parametrize(
    "cur, vel, mat, act, expected",
    [
        # stretch x by 1.1, tri_ke = tri_ka = 100 (mu F and the area term)
        (TRI_REST * [1.1, 1, 1], None, (100, 100, 0, 0, 0), None, [[10, 0.5, 0], [-10, 0, 0], [0, -0.5, 0]]),
        # shear of vertex 2 by 0.1 along x
        ([[0, 0, 0], [1, 0, 0], [0.1, 1, 0]], None, (100, 100, 0, 0, 0), None, [[5, 5, 0], [0, -5, 0], [-5, 0, 0]]),
        # tri_ke only: the rest shape is not force-free (mu F), as in the reference
        (TRI_REST, None, (100, 0, 0, 0, 0), None, [[50, 50, 0], [-50, 0, 0], [0, -50, 0]]),
        # damping: vertex 1 moving along x at 1 m/s, tri_kd = 10
        (TRI_REST, [[0, 0, 0], [1, 0, 0], [0, 0, 0]], (0, 0, 10, 0, 0), None, [[5, 0, 0], [-5, 0, 0], [0, 0, 0]]),
        # drag 1, all vertices moving along the normal at 1 m/s: -drag A |n.v| v on each vertex
        (TRI_REST, [[0, 0, 1]] * 3, (0, 0, 0, 1, 0), None, [[0, 0, -0.5]] * 3),
        # lift 1, v = (2, 0, 1): -lift A (pi/2 - acos(n.v/|v|)) |v|^2 n on each vertex
        (TRI_REST, [[2, 0, 1]] * 3, (0, 0, 0, 0, 1), None, [[0, 0, -1.1589]] * 3),
        # activation 0.5 with tri_ka = 100 at rest
        (TRI_REST, None, (0, 100, 0, 0, 0), 0.5, [[25, 25, 0], [-25, 0, 0], [0, -25, 0]]),
        # a random configuration with every term (including the area-rate damping)
        ([[0.200792, -0.123581, 0.364402], [0.735914, -0.132306, 0.18701], [0.009811, 1.400479, 0.037704]],
         [[-0.633194, -0.377564, -1.091146], [-1.27768, 0.630411, 0.581166], [1.294559, -0.754606, 1.689107]],
         (10, 300, 1, 2, 1), None,
         [[-31.8474, -6.8152, 14.8344], [32.7158, 1.3363, -12.3084], [-0.7808, 5.5528, -2.954]]),
    ],
)  # fmt: skip
def test_triangle_forces_match_reference(cur, vel, mat, act, expected):
    ke, ka, kd, drag, lift = mat
    model = _element_model(TRI_REST, lambda b: b.add_triangle(0, 1, 2, tri_ke=ke, tri_ka=ka, tri_kd=kd, tri_drag=drag,
                                                             tri_lift=lift))  # fmt: skip
    control = model.control()
    if act is not None:
        control.tri_activations.assign(np.array([act], np.float32))
    f, _ = _forces(model, _set(model, cur, vel), control)
    np.testing.assert_allclose(f, expected, atol=2e-3 + 1e-4 * np.abs(expected).max())


def _edge_cfg(phi, L=1.0):
    return np.array([[0.5 * L, -1.0, 0.0], [0.5 * L, math.cos(phi), math.sin(phi)], [0, 0, 0], [L, 0, 0]])


@pytest.mark.parametrize(
    "rest, cur, vel, ke, kd, expected",
    [
        # fold by 0.2 rad (edge_ke = 1): f = L (ke dtheta) u, u_o0 = L n1, ...
        (_edge_cfg(0.0), _edge_cfg(0.2), None, 1.0, 0.0,
         [[0, 0, -0.2], [0, 0.03973, -0.19601], [0, -0.01987, 0.19801], [0, -0.01987, 0.19801]]),
        # rest angle 0.3, current 0.5
        (_edge_cfg(0.3), _edge_cfg(0.5), None, 1.0, 0.0,
         [[0, 0, -0.2], [0, 0.09589, -0.17552], [0, -0.04794, 0.18776], [0, -0.04794, 0.18776]]),
        # damping, L = 2: the far vertex rotating about the edge at 1 rad/s
        (_edge_cfg(0.0, 2.0), _edge_cfg(0.2, 2.0),
         [[0, 0, 0], [0, -math.sin(0.2), math.cos(0.2)], [0, 0, 0], [0, 0, 0]], 0.0, 1.0,
         [[0, 0, -8.0], [0, 1.58936, -7.84049], [0, -0.79468, 7.92027], [0, -0.79468, 7.92027]]),
        # random, both terms
        ([[1.14, -1.6, 0.0], [0.532, 0.764269, 0.236416], [0, 0, 0], [1.9, 0, 0]],
         [[1.018378, -1.487163, 0.038017], [0.666382, 0.712487, 0.014143], [-0.016502, -0.066874, 0.116299],
          [1.929045, -0.244627, -0.179274]],
         [[0.883789, 0.679765, -0.640243], [-0.001049, 0.445574, 0.468404], [0.876242, 0.256486, -0.094828],
          [-0.258848, 1.055743, -2.250854]], 5.0, 0.5,
         [[-0.4458, -0.1687, -2.8342], [-0.4312, 0.0054, -2.8414], [0.481, 0.0662, 3.1255], [0.3964, 0.0978, 2.5487]]),
    ],
)  # fmt: skip
def test_bending_forces_match_reference(rest, cur, vel, ke, kd, expected):
    model = _element_model(rest, lambda b: b.add_edge(0, 1, 2, 3, edge_ke=ke, edge_kd=kd))
    f, _ = _forces(model, _set(model, cur, vel))
    np.testing.assert_allclose(f, expected, atol=2e-3)


@pytest.mark.parametrize(
    "cur, vel, mat, act, expected",
    [
        # activation 0.2 on a 5 % dilated tet (mu = lambda = 100)
        (TET_REST, None, (100, 100, 0), 0.5,
         [[8.33333, 8.33333, 8.33333], [-8.33333, 0, 0], [0, -8.33333, 0], [0, 0, -8.33333]]),
        # random deformation and velocities (vertex 0 at rest: see test_tet_damping_ignores_translation)
        ([[-0.111323, 0.071689, -0.011488], [0.811872, -0.13276, 0.265017], [0.053153, 1.062458, -0.041483],
          [-0.103458, 0.133748, 0.984306]],
         [[0, 0, 0], [0.190046, 1.129228, -0.836085], [1.428544, -0.66762, 0.153412], [-0.836387, -0.222235, 0.047404]],
         (50, 200, 3), None,
         [[-0.3554, -1.2416, 0.2505], [2.1054, -0.6104, -1.2869], [0.037, 1.5384, -0.3639], [-1.7869, 0.3132, 1.4005]]),
    ],
)  # fmt: skip
def test_tet_forces_match_reference(cur, vel, mat, act, expected):
    mu, lam, damp = mat
    model = _element_model(TET_REST, lambda b: b.add_tetrahedron(0, 1, 2, 3, k_mu=mu, k_lambda=lam, k_damp=damp))
    control = model.control()
    if act is not None:
        control.tet_activations.assign(np.array([act], np.float32))
    f, _ = _forces(model, _set(model, cur, vel), control)
    np.testing.assert_allclose(f, expected, atol=3e-3)


def test_tet_rest_shape_is_force_free_and_damping_ignores_translation():
    """Stable neo-Hookean with alpha = 1 + 3 mu / (4 lambda): no force at rest. A rigid translation
    is not damped (the reference's volumetric damping term ignores vertex 0's velocity and so does
    push a translating tet; this implementation deliberately does not)."""
    model = _element_model(TET_REST, lambda b: b.add_tetrahedron(0, 1, 2, 3, k_mu=1e3, k_lambda=5e3, k_damp=10.0))
    f, _ = _forces(model, _set(model, None, [[1.0, -2.0, 0.5]] * 4))
    assert np.abs(f).max() < 1e-3


def test_spring_force_analytic():
    """f = -(ke (l - L) + kd dl/dt) d: extension 0.1 m at ke = 100 N/m, closing at 1 m/s with kd = 2."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    b.add_particle((0, 0, 0), (0, 0, 0), 1.0, radius=0.01)
    b.add_particle((1, 0, 0), (0, 0, 0), 1.0, radius=0.01)
    b.add_spring(0, 1, 100.0, 2.0, 0.0)
    model = b.finalize(device="cpu")
    f, _ = _forces(model, _set(model, [[0, 0, 0], [1.1, 0, 0]], [[0, 0, 0], [1, 0, 0]]))
    np.testing.assert_allclose(f, [[12, 0, 0], [-12, 0, 0]], atol=1e-4)  # reference: 12.0 N
    f, _ = _forces(model, _set(model, [[0, 0, 0], [1.1, 0, 0]], [[0, 0, 0], [0, 1, 0]]))
    np.testing.assert_allclose(f, [[10, 0, 0], [-10, 0, 0]], atol=1e-4)  # no damping across the spring


# --------------------------------------------------------------------------- reference parity: contacts
def _ground_particle(z, v, *, shape=None, soft=None, radius=0.1, body=False):
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    cfg = armillary.ModelBuilder.ShapeConfig(**(shape or {}))
    if body:
        cfg.density = 1.0
        bid = b.add_body(xform=wp.transform(wp.vec3(0.02, 0.01, -1.0), wp.quat_identity()))
        b.add_shape_sphere(bid, radius=1.0, cfg=cfg)
    else:
        b.add_ground_plane(cfg=cfg)
    b.add_particle((0.0, 0.0, z), v, 0.5, radius=radius)
    model = b.finalize(device="cpu")
    for k, val in (soft or {}).items():
        setattr(model, f"soft_contact_{k}", val)
    return model


@pytest.mark.parametrize(
    "z, v, shape, soft, expected",
    [
        # 1 cm penetration: ke = (1000 + 2500) / 2 (Model.soft_contact_ke and the shape's ke averaged)
        (0.09, (0, 0, 0), None, None, [0, 0, 17.5]),
        (0.09, (0, 0, 0), None, {"ke": 2000.0}, [0, 0, 22.5]),
        # touching and approaching at 1 m/s: kd = (10 + 100) / 2 on the approach speed only
        (0.1, (0, 0, -1), None, None, [0, 0, 55.0]),
        (0.1, (0, 0, 1), None, None, [0, 0, 0]),
        # separated: nothing
        (0.105, (0, 0, -1), None, None, [0, 0, 0]),
        # friction: kf = (1000 + 1000) / 2 below the Coulomb limit, mu = (0.5 + 1.0) / 2 times the elastic
        # normal force above it (damping does not raise the limit)
        (0.09, (0.01, 0, 0), None, None, [-10.0, 0, 17.5]),
        (0.09, (1, 0, 0), None, None, [-13.125, 0, 17.5]),
        (0.09, (1, 0, -1), None, None, [-13.125, 0, 72.5]),
        (0.09, (1, 0, 0), None, {"mu": 1.0}, [-17.5, 0, 17.5]),
    ],
)  # fmt: skip
def test_particle_shape_contact_matches_reference(z, v, shape, soft, expected):
    model = _ground_particle(z, v, shape=shape, soft=soft)
    s = model.state()
    contacts = _ground_contacts(model, s, armillary.Contacts(0, 1, device="cpu"))
    f, _ = _forces(model, s, contacts=contacts)
    np.testing.assert_allclose(f[0], expected, atol=2e-3)


def test_particle_contact_reaction_on_dynamic_body():
    """A particle pressed into a moving, spinning sphere body: the particle's force matches the
    reference and the body receives the opposite force and its moment about the COM."""
    model = _ground_particle(0.09, (0.0, 0.0, 0.0), body=True)
    s = model.state()
    s.body_qd.assign(np.array([[0.1, -0.2, 0.3, 0.5, -0.4, 0.2]], np.float32))
    # the soft contact the collision pipeline reports: surface point in the body frame, world normal
    com = model.body_q.numpy()[0, :3].astype(np.float64)
    n = (model.particle_q.numpy()[0] - com) / np.linalg.norm(model.particle_q.numpy()[0] - com)
    contacts = armillary.Contacts(0, 1, device="cpu")
    contacts.soft_contact_count.assign(np.array([1], np.int32))
    contacts.soft_contact_particle.assign(np.array([0], np.int32))
    contacts.soft_contact_shape.assign(np.array([0], np.int32))
    contacts.soft_contact_body_pos.assign(np.array([n], np.float32))
    contacts.soft_contact_normal.assign(np.array([n], np.float32))
    f, bf = _forces(model, s, contacts=contacts)
    # reference (measured from the body's and the particle's velocity changes):
    np.testing.assert_allclose(bf[0, :3], [5.5562, 12.1408, -33.3889], atol=2e-3)
    np.testing.assert_allclose(bf[0, 3:], [-11.832, 4.9426, -0.1718], atol=2e-3)
    np.testing.assert_allclose(f[0], -bf[0, :3], atol=1e-5)
    p = com + n * 1.0  # the contact point on the sphere surface
    np.testing.assert_allclose(bf[0, 3:], np.cross(p - com, bf[0, :3]), atol=1e-3)


def _particle_pair(d, v1, **params):
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    b.add_particle((0, 0, 0), (0, 0, 0), 1.0, radius=0.1)
    b.add_particle((d, 0, 0), v1, 1.0, radius=0.1)
    model = b.finalize(device="cpu")
    for k, val in params.items():
        setattr(model, k, val)
    return model


@pytest.mark.parametrize(
    "d, v1, params, expected",
    [
        (0.19, (0, 0, 0), {}, [10.0, 0, 0]),  # particle_ke = 1e3, 1 cm overlap
        (0.19, (0, 0, 0), {"particle_ke": 2000.0}, [20.0, 0, 0]),
        (0.2, (-1, 0, 0), {}, [100.0, 0, 0]),  # particle_kd = 100 on approach
        (0.2, (1, 0, 0), {}, [0, 0, 0]),
        (0.19, (0, 0.01, 0), {}, [10.0, -1.0, 0]),  # particle_kf = 100 below the limit
        (0.19, (0, 1, 0), {}, [10.0, -5.0, 0]),  # mu = 0.5 times the normal force
        (0.21, (0, 0, 0), {"particle_cohesion": 0.02}, [-10.0, 0, 0]),  # cohesion: attraction inside the band
    ],
)  # fmt: skip
def test_particle_particle_contact_matches_reference(d, v1, params, expected):
    """Force on the second particle (the reference's numbers); the first gets the opposite."""
    model = _particle_pair(d, v1, **params)
    f, _ = _forces(model, model.state())
    np.testing.assert_allclose(f[1], expected, atol=2e-3)
    np.testing.assert_allclose(f[0], -f[1], atol=1e-5)


def test_particle_particle_friction_limit_includes_damping():
    """Reference: the particle-particle Coulomb limit is mu (elastic + damping); 1 mm overlap,
    approaching at 1 m/s and sliding at 1 m/s: normal 1 + 100 N, friction min(100, 0.5 * 101)."""
    model = _particle_pair(0.199, (-1.0, 1.0, 0.0))
    f, _ = _forces(model, model.state())
    np.testing.assert_allclose(f[1], [101.0, -50.5, 0.0], atol=2e-2)


def _tri_contact_model(z, xy=(0.25, 0.25), cloth_active=True):
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    for p in ((0, 0, 0), (1, 0, 0), (0, 1, 0)):
        b.add_particle(p, (0, 0, 0), 1.0, radius=0.01, flags=int(armillary.ParticleFlags.ACTIVE) if cloth_active else 0)
    b.add_particle((xy[0], xy[1], z), (0, 0, 0), 1.0, radius=0.05)
    b.add_triangle(0, 1, 2, tri_ke=0.0, tri_ka=0.0, tri_kd=0.0)
    return b.finalize(device="cpu")


@pytest.mark.parametrize(
    "z, xy, expected",
    [
        # 1 cm inside the particle radius above (0.25, 0.25): soft_contact_ke * 0.01, reaction by barycentric weight
        (0.04, (0.25, 0.25), [[0, 0, -5.0], [0, 0, -2.5], [0, 0, -2.5], [0, 0, 10.0]]),
        (-0.02, (0.25, 0.25), [[0, 0, 15.0], [0, 0, 7.5], [0, 0, 7.5], [0, 0, -30.0]]),
        # next to an edge: the closest point is on the edge
        (0.0, (-0.03, 0.5), [[10.0, 0, 0], [0, 0, 0], [10.0, 0, 0], [-20.0, 0, 0]]),
        (0.06, (0.25, 0.25), [[0, 0, 0]] * 4),
    ],
)  # fmt: skip
def test_triangle_contact_matches_reference(z, xy, expected):
    model = _tri_contact_model(z, xy)
    f, _ = _forces(model, model.state())
    np.testing.assert_allclose(f, expected, atol=2e-3)
    f, _ = _forces(model, model.state(), enable_tri_contact=False)
    assert np.abs(f).max() == 0.0


# --------------------------------------------------------------------------- dynamics
def test_spring_pair_oscillates_at_analytic_frequency(stepper):
    """Two 0.5 kg particles on a 200 N/m spring: omega = sqrt(k / mu_red) = 28.28 rad/s."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    b.add_particle((0, 0, 0), (0, 0, 0), 0.5, radius=0.001)
    b.add_particle((1, 0, 0), (0, 0, 0), 0.5, radius=0.001)
    b.add_spring(0, 1, 200.0, 0.0, 0.0)
    model = b.finalize(device="cpu")
    model.particle_q.assign(np.array([[-0.05, 0, 0], [1.05, 0, 0]], np.float32))  # stretched by 0.1 m
    dt, steps = 1.0e-4, 5000
    ext = []
    _simulate(model, stepper, steps, dt, record=lambda i, s: ext.append(np.diff(s.particle_q.numpy()[:, 0])[0] - 1.0))
    ext = np.array(ext)
    crossings = np.nonzero(np.sign(ext[1:]) != np.sign(ext[:-1]))[0]
    period = 2.0 * float(np.mean(np.diff(crossings))) * dt
    omega = 2.0 * math.pi / period
    assert abs(omega - math.sqrt(200.0 / 0.25)) < 0.005 * math.sqrt(200.0 / 0.25), omega
    assert abs(np.abs(ext).max() - 0.1) < 2e-3  # undamped: amplitude kept (symplectic Euler)


def test_particle_particle_collision_conserves_momentum(stepper):
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    b.add_particle((0, 0, 0), (1.0, 0.3, 0.0), 1.0, radius=0.1)
    b.add_particle((0.5, 0.05, 0), (-0.5, 0.0, 0.1), 3.0, radius=0.1)
    model = b.finalize(device="cpu")
    m = model.particle_mass.numpy()[:, None].astype(np.float64)
    p0 = (m * model.particle_qd.numpy()).sum(axis=0)
    touched = []
    def record(i, st):
        touched.append(np.linalg.norm(np.diff(st.particle_q.numpy(), axis=0)) < 0.2)

    s = _simulate(model, stepper, 5000, 1.0e-4, record=record)
    assert any(touched), "the particles never met"
    v = s.particle_qd.numpy().astype(np.float64)
    np.testing.assert_allclose((m * v).sum(axis=0), p0, atol=1e-4)
    assert np.dot(v[1] - v[0], [1.0, 0.1, 0.0]) > 0.0, "the particles did not separate"


def test_particle_ground_penetration_bound(stepper):
    """A 0.1 kg particle dropped from 0.3 m rests at the penalty equilibrium m g / ke above -r
    (ke = (1000 + 2500) / 2 N/m: 0.56 mm) and never sinks deeper than 5 mm on impact."""
    b = armillary.ModelBuilder()
    b.add_ground_plane()
    b.add_particle((0, 0, 0.3), (0, 0, 0), 0.1, radius=0.05)
    model = b.finalize(device="cpu")
    zmin = []
    s = _simulate(model, stepper, 3000, 1.0e-3 / 2, collide=True,
                  record=lambda i, st: zmin.append(st.particle_q.numpy()[0, 2]))  # fmt: skip
    pen_eq = 0.1 * 9.81 / 1750.0
    assert 0.05 - min(zmin) < 5e-3
    assert abs((0.05 - s.particle_q.numpy()[0, 2]) - pen_eq) < 1e-4
    assert abs(s.particle_qd.numpy()[0, 2]) < 1e-2


def test_hanging_cloth_settles(stepper):
    """A 12 x 12 cloth (0.6 m) hanging from its pinned top row: no NaN, the kinetic energy decays
    from its peak, the cloth stretches under its own weight by less than 3 % and the pinned row
    does not move."""
    b = armillary.ModelBuilder()
    n, cell = 12, 0.05
    b.add_cloth_grid(pos=(0.0, 0.0, 1.0), rot=wp.quat_from_axis_angle(wp.vec3(1.0, 0.0, 0.0), -0.5 * math.pi),
                     vel=(0, 0, 0), dim_x=n, dim_y=n, cell_x=cell, cell_y=cell, mass=0.01, tri_ke=500.0, tri_ka=500.0,
                     tri_kd=1.0, edge_ke=0.5, edge_kd=0.01, particle_radius=0.01)  # fmt: skip
    model = b.finalize(device="cpu")
    q0 = model.particle_q.numpy()
    flags = model.particle_flags.numpy()
    pinned = q0[:, 2] > q0[:, 2].max() - 1e-4
    flags[pinned] = 0
    model.particle_flags.assign(flags)
    m = model.particle_mass.numpy()[:, None]
    ke = []
    s = _simulate(model, stepper, 1500, 1.0e-3,
                  record=lambda i, st: ke.append(0.5 * float((m * st.particle_qd.numpy() ** 2).sum())))  # fmt: skip
    x = s.particle_q.numpy()
    assert np.isfinite(x).all()
    length = n * cell
    sag = 1.0 - x[:, 2].min()
    assert length < sag < 1.03 * length, sag
    assert max(ke[-100:]) < 0.7 * max(ke), (max(ke[-100:]), max(ke))
    assert np.abs(s.particle_qd.numpy()).max() < 0.05
    np.testing.assert_array_equal(x[pinned], q0[pinned])


def test_soft_cube_rests_on_ground(stepper):
    """A 2 x 2 x 2 cell neo-Hookean cube dropped on the ground settles: bounded penetration, its
    height kept within 10 %, and small velocities at the end."""
    b = armillary.ModelBuilder()
    b.add_ground_plane()
    b.add_soft_grid(pos=(0.0, 0.0, 0.05), rot=wp.quat_identity(), vel=(0, 0, 0), dim_x=2, dim_y=2, dim_z=2,
                    cell_x=0.1, cell_y=0.1, cell_z=0.1, density=100.0, k_mu=2.0e4, k_lambda=2.0e4, k_damp=5.0,
                    particle_radius=0.01)  # fmt: skip
    model = b.finalize(device="cpu")
    s = _simulate(model, stepper, 2000, 1.0 / 2000.0, collide=True)
    x = s.particle_q.numpy()
    assert np.isfinite(x).all()
    assert x[:, 2].min() > -0.01, x[:, 2].min()  # the particles' centres stay above -r
    height = x[:, 2].max() - x[:, 2].min()
    assert abs(height - 0.2) < 0.02, height
    assert np.abs(s.particle_qd.numpy()).max() < 0.1  # dropped from 5 cm: 1 m/s on impact


def test_triangle_contact_on_off(stepper):
    """A 1 kg particle (r = 5 cm) dropped 3 cm onto a pinned triangle bounces on it with
    enable_tri_contact: the contact is undamped (as in the reference), so the deepest point follows
    from energy, m g (0.03 + d) = ke d^2 / 2 with ke = 1000 N/m: d = 3.59 cm, z = 1.41 cm; and it
    falls through without."""
    out = {}
    for on in (True, False):
        model = _tri_contact_model(0.08, cloth_active=False)  # 3 cm above contact: 0.77 m/s on impact
        model.set_gravity((0.0, 0.0, -9.81))
        st = _Stepper(model, stepper, enable_tri_contact=on)
        s0, s1, c = model.state(), model.state(), model.control()
        z = []
        for _ in range(600):
            st.step(s0, s1, c, None, 1.0e-3)
            s0, s1 = s1, s0
            z.append(float(s0.particle_q.numpy()[3, 2]))
        out[on] = (min(z), z[-1])
    d = (9.81 + math.sqrt(9.81**2 + 4 * 500.0 * 9.81 * 0.03)) / (2 * 500.0)
    assert abs(out[True][0] - (0.05 - d)) < 1.5e-3 and out[True][1] > 0.01, out
    assert out[False][1] < -1.0, out


def test_integration_gravity_inactive_and_velocity_clamp():
    """Semi-implicit Euler: v' = v + dt (f/m + g), x' = x + dt v'; zero-mass particles feel no gravity,
    inactive ones keep their state, speeds are clamped to particle_max_velocity. Reference numbers."""
    b = armillary.ModelBuilder(gravity=(0.0, -3.0, -9.81))
    b.add_particle((0, 0, 0), (0, 0, 0), 0.0, radius=0.01)
    b.add_particle((1.1, 0, 0), (0.5, 0.2, 0), 2.0, radius=0.01)
    b.add_particle((1.1, 1.3, 0), (0, 0, 0), 1.0, radius=0.01, flags=0)
    b.add_particle((3, 3, 3), (200, 0, 0), 1.0, radius=0.01)
    b.add_spring(0, 1, 100.0, 2.0, 0.0)
    b.add_spring(1, 2, 50.0, 1.0, 0.0)
    b.particle_max_velocity = 100.0
    model = b.finalize(device="cpu")
    st = _Stepper(model, "forces")
    s0, s1 = model.state(), model.state()
    s0.particle_q.assign(np.array([[0, 0, 0], [1.2, 0.1, 0], [1.1, 1.2, 0.1], [3, 3, 3]], np.float32))
    st.step(s0, s1, model.control(), None, 0.01)
    v = s1.particle_qd.numpy()
    expected = [[0, 0, 0], [0.447342, 0.117140, -0.102473], [0, 0, 0], [99.99999, -0.015, -0.049050]]
    np.testing.assert_allclose(v, expected, atol=1e-5)
    np.testing.assert_allclose(s1.particle_q.numpy()[2], [1.1, 1.2, 0.1], atol=1e-7)


def test_per_world_gravity_and_external_force():
    b = armillary.ModelBuilder()
    b.add_particle((0, 0, 1), (0, 0, 0), 2.0, radius=0.01)
    b.add_particle((5, 0, 1), (0, 0, 0), 2.0, radius=0.01)
    model = b.finalize(device="cpu")
    model.world_count = 2
    model.gravity = wp.array([[0.0, 0.0, -9.81], [1.0, 0.0, 0.0]], dtype=wp.vec3, device="cpu")
    model.particle_world.assign(np.array([0, 1], np.int32))
    st = _Stepper(model, "forces")
    s0, s1 = model.state(), model.state()
    s0.particle_f.assign(np.array([[0, 4.0, 0], [0, 0, 0]], np.float32))
    st.step(s0, s1, None, None, 0.1)
    np.testing.assert_allclose(s1.particle_qd.numpy(), [[0, 0.2, -0.981], [0.1, 0, 0]], atol=1e-6)


# --------------------------------------------------------------------------- launches, bad input
def test_no_particles_no_launch():
    model = armillary.ModelBuilder().finalize(device="cpu")
    pf = ParticleForces(model, enable_tri_contact=True, friction_smoothing=1.0)
    s = model.state()
    pf.eval(s, None, None, wp.zeros(0, dtype=wp.vec3), None)
    pf.integrate(s, s, wp.zeros(0, dtype=wp.vec3), 0.01)
    assert not pf._launches


def test_launches_are_recorded_once_per_state_pair():
    b = armillary.ModelBuilder()
    b.add_cloth_grid(pos=(0, 0, 1), rot=wp.quat_identity(), vel=(0, 0, 0), dim_x=3, dim_y=3, cell_x=0.1, cell_y=0.1,
                     mass=0.1, particle_radius=0.02)  # fmt: skip
    model = b.finalize(device="cpu")
    st = _Stepper(model, "forces")
    s0, s1, c = model.state(), model.state(), model.control()
    for _ in range(6):
        st.step(s0, s1, c, None, 1e-3)
        s0, s1 = s1, s0
    assert len(st.pf._launches) == 4  # (forces, integrate) x (two ping-pong states)


def test_bad_input_raises_clear_errors():
    b = armillary.ModelBuilder()
    for p in ((0, 0, 0), (1, 0, 0), (0, 1, 0)):
        b.add_particle(p, (0, 0, 0), 1.0, radius=0.01)
    b.add_triangle(0, 1, 2)
    model = b.finalize(device="cpu")
    with pytest.raises(ValueError, match="friction_smoothing"):
        ParticleForces(model, enable_tri_contact=True, friction_smoothing=-1.0)
    model.tri_indices.assign(np.array([[0, 1, 7]], np.int32))
    with pytest.raises(ValueError, match=r"tri_indices\[0\].*outside \[0, 3\)"):
        ParticleForces(model, enable_tri_contact=True, friction_smoothing=1.0)
    model.tri_indices.assign(np.array([[0, 1, 2]], np.int32))
    model.particle_radius.assign(np.array([0.01, -1.0, 0.01], np.float32))
    with pytest.raises(ValueError, match="particle 1 has particle_radius"):
        ParticleForces(model, enable_tri_contact=True, friction_smoothing=1.0)
    model.particle_radius.assign(np.array([0.01, 0.01, 0.01], np.float32))
    model.tri_materials = wp.zeros((1, 3), dtype=float, device="cpu")
    with pytest.raises(ValueError, match=r"tri_materials must have shape \(1, 5\)"):
        ParticleForces(model, enable_tri_contact=True, friction_smoothing=1.0)
    model.tri_materials = wp.zeros((1, 5), dtype=float, device="cpu")
    pf = ParticleForces(model, enable_tri_contact=True, friction_smoothing=1.0)
    s = model.state()
    with pytest.raises(ValueError, match=r"particle_f must have shape \(3,\)"):
        pf.eval(s, None, None, wp.zeros(2, dtype=wp.vec3), None)
    c = model.control()
    c.tri_activations = wp.zeros(4, dtype=float)
    x_before = s.particle_q.numpy().copy()
    with pytest.raises(ValueError, match=r"tri_activations must have shape \(1,\)"):
        pf.eval(s, c, None, wp.zeros(3, dtype=wp.vec3), None)
    np.testing.assert_array_equal(s.particle_q.numpy(), x_before)

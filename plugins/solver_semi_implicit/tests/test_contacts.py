"""SolverSemiImplicit: penalty rigid contacts (normal, damping, friction, adhesion, overrides).

Reference figures were measured on the reference engine's SolverSemiImplicit (newton 1.8, CPU)
run as a black box on the same scenes.
"""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import armillary

H = 0.1  # box half extent [m]
I_BOX = 1.0 * (2 * H) ** 2 / 6.0  # 1 kg cube


def _box_on_ground(pen=0.0, mu=(0.5, 0.5), kd=(100.0, 100.0), kf=(1000.0, 1000.0), ke=(2.5e3, 2.5e3),
                   ka=(0.0, 0.0), gravity=-9.81):  # fmt: skip
    """A 1 kg cube (half extent 0.1 m) penetrating the ground plane by ``pen`` [m]: shape 0 is the box."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, gravity))
    body = b.add_body(xform=wp.transform((0.0, 0.0, H - pen), wp.quat_identity()), mass=1.0,
                      inertia=wp.mat33(I_BOX, 0, 0, 0, I_BOX, 0, 0, 0, I_BOX))  # fmt: skip
    cfg = armillary.ModelBuilder.ShapeConfig
    b.add_shape_box(body, hx=H, hy=H, hz=H, cfg=cfg(density=0.0, ke=ke[0], kd=kd[0], kf=kf[0], ka=ka[0], mu=mu[0]))
    b.add_ground_plane(cfg=cfg(density=0.0, ke=ke[1], kd=kd[1], kf=kf[1], ka=ka[1], mu=mu[1]))
    return b.finalize(device="cpu")


def _accel(model, qd, dt=1e-3, edit=None):
    """Acceleration [m/s^2, rad/s^2] of the box over one step (no gravity in the scenes that use it)."""
    solver = armillary.solvers.SolverSemiImplicit(model, angular_damping=0.0)
    s0, s1 = model.state(), model.state()
    s0.body_qd.assign(np.array([qd], np.float32))
    contacts = model.contacts()
    model.collide(s0, contacts)
    assert int(contacts.rigid_contact_count.numpy()[0]) == 4  # the four bottom corners
    if edit is not None:
        edit(contacts)
    solver.step(s0, s1, None, contacts, dt)
    return (s1.body_qd.numpy()[0].astype(np.float64) - np.array(qd)) / dt


# (case, box twist, material overrides, acceleration measured on the reference: 1 mm penetration, 4 corners)
REFERENCE = [
    ("static: 4 x ke x 1 mm", [0, 0, 0, 0, 0, 0], {}, [0, 0, 10.0, 0, 0, 0]),
    ("approaching: + kd vn (mean kd)", [0, 0, -0.5, 0, 0, 0], {}, [0, 0, 210.0, 0, 0, 0]),
    ("separating: no damping", [0, 0, 0.5, 0, 0, 0], {}, [0, 0, 10.0, 0, 0, 0]),
    ("kd mean (100, 300)", [0, 0, -0.5, 0, 0, 0], {"kd": (100.0, 300.0)}, [0, 0, 410.0, 0, 0, 0]),
    ("sliding: mu fn", [1, 0, 0, 0, 0, 0], {}, [-5.0, 0, 10.0, 0, 75.0, 0]),
    ("slow slide: kf |vt|", [0.001, 0, 0, 0, 0, 0], {}, [-4.0, 0, 10.0, 0, 60.0, 0]),
    ("kf mean capped by mu fn", [0.001, 0, 0, 0, 0, 0], {"kf": (1000.0, 3000.0)}, [-5.0, 0, 10.0, 0, 75.0, 0]),
    ("mu mean (0.2, 0.8)", [1, 0, 0, 0, 0, 0], {"mu": (0.2, 0.8)}, [-5.0, 0, 10.0, 0, 75.0, 0]),
    ("mu 0.2", [1, 0, 0, 0, 0, 0], {"mu": (0.2, 0.2)}, [-2.0, 0, 10.0, 0, 30.0, 0]),
    ("friction bound includes damping", [1, 0, -0.5, 0, 0, 0], {}, [-105.0, 0, 210.0, 0, 1575.0, 0]),
    ("spinning: torsion from corner friction", [0, 0, 0, 0, 0, 1.0], {}, [0, 0, 10.0, 0, 0, -106.06622]),
]


@pytest.mark.parametrize("case, qd, materials, expected", REFERENCE, ids=[r[0] for r in REFERENCE])
def test_one_step_contact_force_matches_the_reference(case, qd, materials, expected):
    model = _box_on_ground(pen=0.001, gravity=0.0, **materials)
    np.testing.assert_allclose(_accel(model, qd), expected, rtol=1e-4, atol=1e-3)


def test_adhesion_distance_ka_attracts_a_separated_contact():
    """Reference: 1 mm above the ground with ka = 2 mm the box is pulled down by 4 ke d = 10 N; without ka nothing."""
    model = _box_on_ground(pen=-0.001, gravity=0.0, ka=(0.002, 0.002))
    np.testing.assert_allclose(_accel(model, [0] * 6), [0, 0, -10.0, 0, 0, 0], rtol=1e-4, atol=1e-3)
    solver = armillary.solvers.SolverSemiImplicit(_box_on_ground(pen=-0.001, gravity=0.0))
    model = solver.model
    s0, s1 = model.state(), model.state()
    contacts = model.contacts()
    model.collide(s0, contacts)
    solver.step(s0, s1, None, contacts, 1e-3)
    assert not s1.body_qd.numpy().any()


def test_per_contact_overrides_replace_the_materials():
    """rigid_contact_stiffness / damping / friction > 0 (hydroelastic contacts write them) replace ke / kd / mu."""

    def edit(c):
        n = c.rigid_contact_stiffness.shape[0]
        c.rigid_contact_stiffness.assign(np.full(n, 1.0e4, np.float32))
        c.rigid_contact_damping.assign(np.full(n, 10.0, np.float32))
        c.rigid_contact_friction.assign(np.full(n, 0.1, np.float32))

    model = _box_on_ground(pen=0.001, gravity=0.0)
    a = _accel(model, [1.0, 0, -0.5, 0, 0, 0], edit=edit)
    fn = 4 * (1.0e4 * 0.001 + 10.0 * 0.5)  # 60 N
    np.testing.assert_allclose(a[:3], [-0.1 * fn, 0.0, fn], rtol=1e-4)


def test_resting_box_penetration_bound():
    """A 1 kg cube settles at m g / (4 ke) = 0.981 mm penetration (default ke 2.5e3 N/m on both shapes);
    the reference settles at 0.98087 mm with 4 contacts and 7.5e-9 m height jitter. Bound: 1.0 mm."""
    model = _box_on_ground(pen=0.0)
    solver = armillary.solvers.SolverSemiImplicit(model)
    s0, s1 = model.state(), model.state()
    contacts = model.contacts()
    z = []
    for _ in range(1500):
        model.collide(s0, contacts)
        solver.step(s0, s1, None, contacts, 1e-3)
        s0, s1 = s1, s0
        z.append(float(s0.body_q.numpy()[0, 2]))
    z = np.array(z)
    pen = H - z[-1]
    assert abs(pen - 9.81 / (4 * 2.5e3)) <= 2e-6, pen
    assert H - z.min() <= 1.0e-3, H - z.min()
    assert z[-300:].std() <= 1e-7
    np.testing.assert_allclose(s0.body_q.numpy()[0, 3:], [0, 0, 0, 1], atol=1e-6)
    # contact forces of the last step: shape 0 (the box) pushes the ground down, so the ground pushes it up
    contacts_f = armillary.Contacts(contacts.rigid_contact_max, 0, requested_attributes={"force"}, device="cpu")
    model.collide(s0, contacts_f)
    solver.step(s0, s1, None, contacts_f, 1e-3)
    solver.update_contacts(contacts_f)
    f = contacts_f.force.numpy()[:4]
    n = contacts_f.rigid_contact_normal.numpy()[:4]
    s0_is_box = contacts_f.rigid_contact_shape0.numpy()[:4] == 0
    up = np.where(s0_is_box[:, None], -f[:, :3], f[:, :3])  # force on the box
    np.testing.assert_allclose(up.sum(axis=0), [0.0, 0.0, 9.81], rtol=1e-3, atol=1e-4)
    assert np.all(np.abs(np.einsum("ij,ij->i", f[:, :3], n)) > 0.0) and not f[:, 3:].any()


def test_update_contacts_requires_the_force_attribute_and_a_step():
    model = _box_on_ground()
    solver = armillary.solvers.SolverSemiImplicit(model)
    with pytest.raises(ValueError, match="contacts.force is None"):
        solver.update_contacts(model.contacts())
    c = armillary.Contacts(16, 0, requested_attributes={"force"}, device="cpu")
    with pytest.raises(ValueError, match="no step with contacts"):
        solver.update_contacts(c)


def test_sliding_box_decelerates_at_mu_g():
    """mu = 0.5 on both shapes, v0 = 2 m/s: deceleration mu g = 4.905 m/s^2 (reference: 4.9099 between
    0.1 s and 0.3 s, then stopped below 0.04 m/s at 0.4 s)."""
    model = _box_on_ground(pen=9.81 / (4 * 2.5e3))
    solver = armillary.solvers.SolverSemiImplicit(model)
    s0, s1 = model.state(), model.state()
    s0.body_qd.assign(np.array([[2.0, 0, 0, 0, 0, 0]], np.float32))
    contacts = model.contacts()
    vx = []
    for _ in range(600):
        model.collide(s0, contacts)
        solver.step(s0, s1, None, contacts, 1e-3)
        s0, s1 = s1, s0
        vx.append(float(s0.body_qd.numpy()[0, 0]))
    decel = (vx[99] - vx[299]) / 0.2
    assert abs(decel - 0.5 * 9.81) <= 0.01 * 0.5 * 9.81, decel
    assert abs(vx[399]) < 0.04 and abs(vx[-1]) < 0.01


def test_sliding_sphere_rolls_at_five_sevenths():
    """A solid sphere thrown sliding (v0 = 1 m/s, no spin) on the ground: friction at the contact point
    (on the sphere's surface) spins it up until it rolls at 5/7 v0 with w = v / r."""
    r, m = 0.1, 1.0
    inertia = 0.4 * m * r * r
    b = armillary.ModelBuilder()
    body = b.add_body(xform=wp.transform((0.0, 0.0, r - 9.81 / 2.5e3), wp.quat_identity()), mass=m,
                      inertia=wp.mat33(inertia, 0, 0, 0, inertia, 0, 0, 0, inertia))  # fmt: skip
    cfg = armillary.ModelBuilder.ShapeConfig(density=0.0, mu=0.5)
    b.add_shape_sphere(body, radius=r, cfg=cfg)
    b.add_ground_plane(cfg=cfg)
    model = b.finalize(device="cpu")
    solver = armillary.solvers.SolverSemiImplicit(model, angular_damping=0.0)
    s0, s1 = model.state(), model.state()
    s0.body_qd.assign(np.array([[1.0, 0, 0, 0, 0, 0]], np.float32))
    contacts = model.contacts()
    for _ in range(500):
        model.collide(s0, contacts)
        solver.step(s0, s1, None, contacts, 1e-3)
        s0, s1 = s1, s0
    v = s0.body_qd.numpy()[0]
    assert abs(v[0] - 5.0 / 7.0) <= 0.01, v
    assert abs(v[4] - v[0] / r) <= 0.02 * v[0] / r, v  # rolling about +y for motion along +x

"""SolverFeatherstone's solver observables (observables.py): body_qdd, body_parent_f, contact_f."""

import numpy as np
import warp as wp

import armillary as newton


def _released_pendulum(m=8.0, L=0.5, h=0.1):
    b = newton.ModelBuilder()
    link = b.add_link(xform=wp.transform((L, 0.0, 1.0), wp.quat_identity()))
    b.add_shape_box(link, hx=h, hy=h, hz=h, cfg=newton.ModelBuilder.ShapeConfig(density=m / (2 * h) ** 3))
    j = b.add_joint_revolute(-1, link, parent_xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()),
                             child_xform=wp.transform((-L, 0.0, 0.0), wp.quat_identity()), axis=(0, 1, 0))  # fmt: skip
    b.add_articulation([j])
    return b.finalize(device="cpu")


def test_supported_kinds():
    assert newton.solvers.SolverFeatherstone.SUPPORTED_OBSERVABLES == {"body_qdd", "body_parent_f", "contact_f"}


def test_body_parent_f_of_a_released_pendulum_is_the_analytic_reaction():
    """Released horizontally: the pivot pushes up with m g I_c / (I_c + m L^2), torque L times that
    about the COM, and the COM accelerates down at alpha L (the reference engine 1.8's
    SolverFeatherstone reports m g = 78.48 N here, the static weight)."""
    m, L, h = 8.0, 0.5, 0.1
    model = _released_pendulum(m, L, h)
    solver = newton.solvers.SolverFeatherstone(model)
    obs = solver.observables({"body_parent_f", "body_qdd"})
    s0, s1 = model.state(), model.state()
    newton.eval_fk(model, model.joint_q, model.joint_qd, s0)
    solver.step(s0, s1, None, None, 1e-4, observables=obs)
    ic = m * (2 * h) ** 2 / 6.0
    fz = m * 9.81 * ic / (ic + m * L * L)
    np.testing.assert_allclose(obs.body_parent_f.numpy()[0], [0.0, 0.0, fz, 0.0, L * fz, 0.0], atol=5e-3)
    alpha = m * 9.81 * L / (ic + m * L * L)
    np.testing.assert_allclose(obs.body_qdd.numpy()[0], [0.0, 0.0, -alpha * L, 0.0, alpha, 0.0], rtol=1e-3,
                               atol=1e-3)  # fmt: skip


def test_contact_f_of_a_resting_box_carries_its_weight():
    b = newton.ModelBuilder()
    body = b.add_body(xform=wp.transform((0.3, 0.2, 0.1), wp.quat_identity()))
    b.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1)
    b.add_ground_plane()
    model = b.finalize(device="cpu")
    weight = float(model.body_mass.numpy()[0]) * 9.81
    solver = newton.solvers.SolverFeatherstone(model)
    pipeline = newton.CollisionPipeline(model)
    contacts = pipeline.contacts()
    obs = solver.observables(solver.supported_observables, contacts=contacts)
    s0, s1 = model.state(), model.state()
    for _ in range(500):
        pipeline.collide(s0, contacts)
        solver.step(s0, s1, None, contacts, 1e-3, observables=obs)
        s0, s1 = s1, s0
    n = int(contacts.rigid_contact_count.numpy()[0])
    f = obs.contact_f.numpy()[:n].astype(np.float64)
    # the plane is shape 0: rows hold the force of the box on the ground, torque about the world origin
    np.testing.assert_allclose(f[:, :3].sum(0), [0.0, 0.0, -weight], rtol=1e-3, atol=1e-2)
    assert not np.any(obs.contact_f.numpy()[n:])
    np.testing.assert_allclose(obs.body_parent_f.numpy(), 0.0, atol=0.05 * weight)  # FREE: nothing transmitted

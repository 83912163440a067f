"""SolverSemiImplicit's solver observables (body_qdd, body_parent_f, contact_f)."""

import numpy as np
import warp as wp

import armillary as newton


def _resting_box(mass=8.0):
    b = newton.ModelBuilder()
    body = b.add_body(xform=wp.transform((0.3, 0.2, 0.1), wp.quat_identity()), mass=mass,
                      inertia=wp.mat33(0.05, 0.0, 0.0, 0.0, 0.05, 0.0, 0.0, 0.0, 0.05))  # fmt: skip
    b.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1, cfg=newton.ModelBuilder.ShapeConfig(density=0.0))
    b.add_ground_plane()
    return b.finalize(device="cpu")


def test_contact_f_carries_the_weight_and_matches_update_contacts():
    model = _resting_box()
    solver = newton.solvers.SolverSemiImplicit(model)
    pipeline = newton.CollisionPipeline(model)
    contacts = pipeline.contacts()
    obs = solver.observables(solver.supported_observables, contacts=contacts)
    s0, s1 = model.state(), model.state()
    for _ in range(1000):
        pipeline.collide(s0, contacts)
        solver.step(s0, s1, None, contacts, 1e-3, observables=obs)
        s0, s1 = s1, s0
    n = int(contacts.rigid_contact_count.numpy()[0])
    f = obs.contact_f.numpy()[:n].astype(np.float64)
    # the ground is shape 0: each row is the force of the box on the ground (down), torque about the origin
    np.testing.assert_allclose(f[:, :3].sum(0), [0.0, 0.0, -8.0 * 9.81], rtol=1e-3, atol=1e-3)
    p0 = contacts.rigid_contact_point0.numpy()[:n]
    np.testing.assert_allclose(f[:, 3:], np.cross(p0, f[:, :3]), atol=1e-3)
    legacy = newton.Contacts(contacts.rigid_contact_max, contacts.soft_contact_max, requested_attributes={"force"},
                             device="cpu")  # fmt: skip
    for name in ("rigid_contact_count", "rigid_contact_shape0", "rigid_contact_shape1"):
        wp.copy(getattr(legacy, name), getattr(contacts, name))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        solver.update_contacts(legacy)  # (force of shape 0 on shape 1, 0): the opposite sign
    np.testing.assert_allclose(-legacy.force.numpy()[:n, :3], f[:, :3], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(obs.body_parent_f.numpy(), 0.0, atol=1e-2)  # a FREE joint transmits nothing
    np.testing.assert_allclose(obs.body_qdd.numpy(), 0.0, atol=1e-2)


def test_body_parent_f_of_a_hanging_chain():
    b = newton.ModelBuilder()
    m = 8.0
    inertia = wp.mat33(0.05, 0.0, 0.0, 0.0, 0.05, 0.0, 0.0, 0.0, 0.05)
    l1 = b.add_link(xform=wp.transform((0.0, 0.0, 0.5), wp.quat_identity()), mass=m, inertia=inertia)
    l2 = b.add_link(xform=wp.transform((0.0, 0.0, -0.5), wp.quat_identity()), mass=m, inertia=inertia)
    j1 = b.add_joint_revolute(-1, l1, parent_xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()),
                              child_xform=wp.transform((0.0, 0.0, 0.5), wp.quat_identity()), axis=(0, 1, 0))  # fmt: skip
    j2 = b.add_joint_revolute(l1, l2, parent_xform=wp.transform((0.0, 0.0, -0.5), wp.quat_identity()),
                              child_xform=wp.transform((0.0, 0.0, 0.5), wp.quat_identity()), axis=(0, 1, 0))  # fmt: skip
    b.add_articulation([j1, j2])
    model = b.finalize(device="cpu")
    solver = newton.solvers.SolverSemiImplicit(model)
    obs = solver.observables({"body_parent_f"})
    s0, s1 = model.state(), model.state()
    newton.eval_fk(model, model.joint_q, model.joint_qd, s0)
    samples = []
    for i in range(2400):  # the penalty joints ring down (2.3 cm sag, kd = 100); mean of the last 0.4 s
        solver.step(s0, s1, None, None, 1e-3, observables=obs)
        s0, s1 = s1, s0
        if i >= 2000:
            samples.append(obs.body_parent_f.numpy())
    f = np.mean(samples, axis=0)
    np.testing.assert_allclose(f[:, 2], [2 * m * 9.81, m * 9.81], rtol=5e-3)
    np.testing.assert_allclose(f[:, [0, 1, 3, 4, 5]], 0.0, atol=1e-3)

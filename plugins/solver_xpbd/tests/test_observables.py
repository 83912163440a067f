"""SolverXPBD's solver observables (body_qdd, body_parent_f, contact_f)."""

import numpy as np
import warp as wp

import armillary as newton


def test_contact_f_of_a_resting_box_matches_the_reference_engine():
    """A 20 cm box of density 1000 resting on the ground (shape 1; the pipeline makes the plane shape
    0): 4 contacts each carrying a quarter of its weight, torque about the world origin (static
    shape 0). Rows observed from the reference engine 1.8's SolverXPBD on the same scene and steps:
    (0, 0, -19.6218, -1.9622, 3.9244, 0), (0, 0, -19.6218, -1.9622, 7.8487, 0),
    (0, 0, -19.6218, -5.8866, 3.9244, 0), (0, 0, -19.6218, -5.8866, 7.8487, 0)."""
    b = newton.ModelBuilder()
    body = b.add_body(xform=wp.transform((0.3, 0.2, 0.1), wp.quat_identity()))
    b.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1)
    b.add_ground_plane()
    model = b.finalize(device="cpu")
    solver = newton.solvers.SolverXPBD(model)
    pipeline = newton.CollisionPipeline(model)
    contacts = pipeline.contacts()
    obs = solver.observables({solver.ObservableKind.CONTACT_F, "body_parent_f", "body_qdd"}, contacts=contacts)
    s0, s1 = model.state(), model.state()
    for _ in range(200):
        pipeline.collide(s0, contacts)
        solver.step(s0, s1, None, contacts, 1e-3, observables=obs)
        s0, s1 = s1, s0
    n = int(contacts.rigid_contact_count.numpy()[0])
    f = obs.contact_f.numpy()[:n].astype(np.float64)
    expected = np.array([[0, 0, -19.6218, -1.9622, 3.9244, 0], [0, 0, -19.6218, -1.9622, 7.8487, 0],
                         [0, 0, -19.6218, -5.8866, 3.9244, 0], [0, 0, -19.6218, -5.8866, 7.8487, 0]])  # fmt: skip

    def rows(a):  # contact order is the pipeline's: compare sorted by torque
        return a[np.lexsort((np.round(a[:, 4], 2), np.round(a[:, 3], 2)))]

    np.testing.assert_allclose(rows(f), rows(expected), atol=5e-3)
    assert not np.any(obs.contact_f.numpy()[n:])
    np.testing.assert_allclose(obs.body_parent_f.numpy(), 0.0, atol=0.05)
    np.testing.assert_allclose(obs.body_qdd.numpy(), 0.0, atol=0.01)


def test_body_parent_f_of_a_hanging_chain():
    """Two 8 kg links hanging at rest: the joints carry 2 m g and m g (the reference engine 1.8's
    XPBD reports 80.44 N for the lower joint, 2.5 % high; ours is within 0.5 %)."""
    b = newton.ModelBuilder()
    l1 = b.add_link(xform=wp.transform((0.0, 0.0, 0.5), wp.quat_identity()))
    b.add_shape_box(l1, hx=0.1, hy=0.1, hz=0.1)
    l2 = b.add_link(xform=wp.transform((0.0, 0.0, -0.5), wp.quat_identity()))
    b.add_shape_box(l2, hx=0.1, hy=0.1, hz=0.1)
    j1 = b.add_joint_revolute(-1, l1, parent_xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()),
                              child_xform=wp.transform((0.0, 0.0, 0.5), wp.quat_identity()), axis=(0, 1, 0))  # fmt: skip
    j2 = b.add_joint_revolute(l1, l2, parent_xform=wp.transform((0.0, 0.0, -0.5), wp.quat_identity()),
                              child_xform=wp.transform((0.0, 0.0, 0.5), wp.quat_identity()), axis=(0, 1, 0))  # fmt: skip
    b.add_articulation([j1, j2])
    model = b.finalize(device="cpu")
    m = float(model.body_mass.numpy()[0])
    solver = newton.solvers.SolverXPBD(model)
    obs = solver.observables({"body_parent_f"})
    s0, s1 = model.state(), model.state()
    newton.eval_fk(model, model.joint_q, model.joint_qd, s0)
    for _ in range(200):
        solver.step(s0, s1, None, None, 1e-3, observables=obs)
        s0, s1 = s1, s0
    f = obs.body_parent_f.numpy()
    np.testing.assert_allclose(f[:, 2], [2 * m * 9.81, m * 9.81], rtol=5e-3)
    np.testing.assert_allclose(f[:, [0, 1, 3, 4, 5]], 0.0, atol=1e-3)

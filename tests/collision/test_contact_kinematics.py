"""eval_rigid_contact_kinematics: values, gradients through body_q under wp.Tape (finite
differences), argument checks, and the deprecated rigid_contact_diff_* outputs."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import warp as wp

import armillary as newton


def _scene():
    b = newton.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    ball = b.add_body(xform=wp.transform((0.0, 0.0, 0.3), wp.quat_identity()))
    b.add_shape_sphere(body=ball, radius=0.5, cfg=newton.ModelBuilder.ShapeConfig(margin=0.01))
    b.add_ground_plane()
    rot = wp.quat_from_axis_angle(wp.normalize(wp.vec3(0.3, 1.0, 0.2)), 0.2)
    box = b.add_body(xform=wp.transform((2.0, 0.0, 0.35), rot))
    b.add_shape_box(box, hx=0.4, hy=0.3, hz=0.4)
    # a sphere resting on the tilted box: a dynamic-dynamic pair
    ball2 = b.add_body(xform=wp.transform((2.05, 0.02, 0.95), wp.quat_identity()))
    b.add_shape_sphere(body=ball2, radius=0.2)
    return b.finalize(device="cpu", requires_grad=True)


def _apply(X, p):
    """Transform point p by the (x, y, z, qx, qy, qz, qw) transform X (numpy)."""
    t, q = np.asarray(X[:3], np.float64), np.asarray(X[3:], np.float64)
    u, w = q[:3], q[3]
    p = np.asarray(p, np.float64)
    return t + p + 2.0 * w * np.cross(u, p) + 2.0 * np.cross(u, np.cross(u, p))


def _eval(model, state, contacts):
    n = contacts.rigid_contact_max
    d = wp.zeros(n, dtype=float, requires_grad=True, device="cpu")
    p0 = wp.zeros(n, dtype=wp.vec3, requires_grad=True, device="cpu")
    p1 = wp.zeros(n, dtype=wp.vec3, requires_grad=True, device="cpu")
    newton.eval_rigid_contact_kinematics(model, state, contacts, out_distance=d, out_point0_world=p0,
                                         out_point1_world=p1)  # fmt: skip
    return d, p0, p1


def test_values_match_geometry():
    model = _scene()
    state = model.state(requires_grad=True)
    pipe = newton.CollisionPipeline(model, requires_grad=False)
    c = pipe.contacts()
    pipe.collide(state, c)
    d, p0, p1 = _eval(model, state, c)
    n = int(c.rigid_contact_count.numpy()[0])
    assert n >= 3
    s0, s1 = c.rigid_contact_shape0.numpy()[:n], c.rigid_contact_shape1.numpy()[:n]
    k = int(np.nonzero((s0 == 1) & (s1 == 0))[0][0])  # ground - sphere(r=0.5, margin 0.01) at z=0.3
    assert d.numpy()[k] == pytest.approx(0.3 - 0.51, abs=1e-5)
    np.testing.assert_allclose(p0.numpy()[k], [0.0, 0.0, 0.0], atol=1e-6)
    np.testing.assert_allclose(p1.numpy()[k], [0.0, 0.0, 0.3], atol=1e-6)
    # world points are the body-frame points moved with body_q; distance uses the frozen normal
    bq = state.body_q.numpy()
    shape_body = model.shape_body.numpy()
    for i in range(n):
        w = []
        for s, pt in ((s0[i], c.rigid_contact_point0.numpy()[i]), (s1[i], c.rigid_contact_point1.numpy()[i])):
            bb = shape_body[s]
            w.append(_apply(bq[bb], pt) if bb >= 0 else pt)
        np.testing.assert_allclose(p0.numpy()[i], w[0], atol=1e-5)
        np.testing.assert_allclose(p1.numpy()[i], w[1], atol=1e-5)
        nrm = c.rigid_contact_normal.numpy()[i]
        expect = float(np.dot(nrm, w[1] - w[0])) - c.rigid_contact_margin0.numpy()[i] - c.rigid_contact_margin1.numpy()[i]
        assert d.numpy()[i] == pytest.approx(expect, abs=1e-5)
    assert not d.numpy()[n:].any() and not p0.numpy()[n:].any()  # inactive rows are zero


def test_gradient_wrt_body_q_matches_finite_differences():
    model = _scene()
    state = model.state(requires_grad=True)
    pipe = newton.CollisionPipeline(model, requires_grad=False)
    c = pipe.contacts()
    rng = np.random.default_rng(3)
    n = c.rigid_contact_max
    wd = wp.array(rng.normal(size=n).astype(np.float32), device="cpu")
    wpt = wp.array(rng.normal(size=(n, 3)).astype(np.float32), dtype=wp.vec3, device="cpu")
    with wp.Tape() as tape:
        pipe.collide(state, c)
        d, p0, p1 = _eval(model, state, c)
    tape.backward(grads={d: wd, p0: wpt, p1: wpt})
    grad = tape.gradients[state.body_q].numpy().copy()
    assert np.abs(grad).sum() > 0.0

    def loss(bq):
        s = model.state()
        s.body_q.assign(bq)
        dd, q0, q1 = _eval(model, s, c)  # contacts frozen: tangent-plane model
        return float((dd.numpy() * wd.numpy()).sum() + ((q0.numpy() + q1.numpy()) * wpt.numpy()).sum())

    bq0 = state.body_q.numpy().astype(np.float64)
    eps = 1e-3
    fd = np.zeros_like(bq0)
    for b in range(bq0.shape[0]):
        for k in range(7):
            a, m = bq0.copy(), bq0.copy()
            a[b, k] += eps
            m[b, k] -= eps
            fd[b, k] = (loss(a.astype(np.float32)) - loss(m.astype(np.float32))) / (2 * eps)
    np.testing.assert_allclose(grad, fd, rtol=2e-2, atol=2e-2)


def test_spec_example_and_deprecated_outputs():
    builder = newton.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    body = builder.add_body(xform=wp.transform((0.0, 0.0, 0.3)))
    builder.add_shape_sphere(body=body, radius=0.5)
    builder.add_ground_plane()
    model = builder.finalize(requires_grad=True)
    pipeline = newton.CollisionPipeline(model, requires_grad=False)
    contacts = pipeline.contacts()
    state = model.state(requires_grad=True)
    distance = wp.empty(contacts.rigid_contact_max, dtype=float, requires_grad=True)
    with wp.Tape() as tape:
        pipeline.collide(state, contacts)
        newton.eval_rigid_contact_kinematics(model, state, contacts, out_distance=distance)
    tape.backward(grads={distance: wp.ones(contacts.rigid_contact_max, dtype=float)})
    grad_body_q = tape.gradients[state.body_q]
    np.testing.assert_allclose(grad_body_q.numpy()[0], [0, 0, 1, 0, 0, 0, 0], atol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert contacts.rigid_contact_diff_distance is None and contacts.rigid_contact_diff_normal is None

    # requires_grad=True: deprecated outputs allocated, filled by collide and recorded on the tape
    pipeline = newton.CollisionPipeline(model, requires_grad=True)
    contacts = pipeline.contacts()
    state = model.state(requires_grad=True)
    with pytest.warns(DeprecationWarning):
        diff_d = contacts.rigid_contact_diff_distance
    with pytest.warns(DeprecationWarning):
        assert contacts.rigid_contact_diff_normal is contacts.rigid_contact_normal
    with pytest.warns(DeprecationWarning):
        diff_p1 = contacts.rigid_contact_diff_point1_world
    with wp.Tape() as tape:
        pipeline.collide(state, contacts)
    assert diff_d.numpy()[0] == pytest.approx(0.3 - 0.5, abs=1e-5)
    np.testing.assert_allclose(diff_p1.numpy()[0], [0.0, 0.0, 0.3], atol=1e-6)
    tape.backward(grads={diff_d: wp.ones(contacts.rigid_contact_max, dtype=float)})
    np.testing.assert_allclose(tape.gradients[state.body_q].numpy()[0], [0, 0, 1, 0, 0, 0, 0], atol=1e-6)


def test_argument_checks():
    model = _scene()
    pipe = newton.CollisionPipeline(model, requires_grad=False)
    c = pipe.contacts()
    s = model.state()
    n = c.rigid_contact_max
    with pytest.raises(ValueError, match="At least one output"):
        newton.eval_rigid_contact_kinematics(model, s, c)
    with pytest.raises(ValueError, match="shape"):
        newton.eval_rigid_contact_kinematics(model, s, c, out_distance=wp.zeros(3, dtype=float, device="cpu"))
    with pytest.raises(TypeError, match="dtype"):
        newton.eval_rigid_contact_kinematics(model, s, c, out_distance=wp.zeros(n, dtype=wp.vec3, device="cpu"))
    with pytest.raises(TypeError, match="Warp array"):
        newton.eval_rigid_contact_kinematics(model, s, c, out_point0_world=np.zeros((n, 3)))

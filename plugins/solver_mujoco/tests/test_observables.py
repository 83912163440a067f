"""SolverMuJoCo's solver observables: body_qdd and body_parent_f (MuJoCo's cfrc_int)."""

import numpy as np
import pytest
import warp as wp

import armillary as newton

pytest.importorskip("mujoco")


def _released_pendulum(m=8.0, L=0.5, h=0.1):
    b = newton.ModelBuilder()
    link = b.add_link(xform=wp.transform((L, 0.0, 1.0), wp.quat_identity()))
    b.add_shape_box(link, hx=h, hy=h, hz=h, cfg=newton.ModelBuilder.ShapeConfig(density=m / (2 * h) ** 3))
    j = b.add_joint_revolute(-1, link, parent_xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()),
                             child_xform=wp.transform((-L, 0.0, 0.0), wp.quat_identity()), axis=(0, 1, 0))  # fmt: skip
    b.add_articulation([j])
    return b.finalize(device="cpu")


def test_body_parent_f_of_a_released_pendulum_is_the_analytic_reaction():
    """A box pendulum released horizontally: the pivot pushes up with m g I_c / (I_c + m L^2) and, about
    the COM, a torque L times that (the rigid-body answer; MuJoCo's cfrc_int moved to the COM)."""
    m, L, h = 8.0, 0.5, 0.1
    model = _released_pendulum(m, L, h)
    solver = newton.solvers.SolverMuJoCo(model)
    obs = solver.observables(solver.supported_observables)
    assert obs.kinds == {"body_qdd", "body_parent_f"}
    s0, s1 = model.state(), model.state()
    newton.eval_fk(model, model.joint_q, model.joint_qd, s0)
    solver.step(s0, s1, None, None, 1e-4, observables=obs)
    ic = m * (2 * h) ** 2 / 6.0
    fz = m * 9.81 * ic / (ic + m * L * L)
    np.testing.assert_allclose(obs.body_parent_f.numpy()[0], [0.0, 0.0, fz, 0.0, L * fz, 0.0], atol=2e-3)
    alpha = m * 9.81 * L / (ic + m * L * L)
    np.testing.assert_allclose(obs.body_qdd.numpy()[0], [0.0, 0.0, -alpha * L, 0.0, alpha, 0.0], rtol=1e-3,
                               atol=1e-3)  # fmt: skip


def test_a_free_joints_joint_f_is_transmitted_by_the_joint():
    b = newton.ModelBuilder()
    body = b.add_body(xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()), mass=2.0,
                      inertia=wp.mat33(0.1, 0.0, 0.0, 0.0, 0.1, 0.0, 0.0, 0.0, 0.1))  # fmt: skip
    b.add_shape_sphere(body, radius=0.1, cfg=newton.ModelBuilder.ShapeConfig(density=0.0))
    model = b.finalize(device="cpu")
    solver = newton.solvers.SolverMuJoCo(model)
    obs = solver.observables({"body_parent_f", "body_qdd"})
    control = model.control()
    wrench = np.array([[1.0, 0.0, 2.0 * 9.81, 0.0, 0.0, 0.5]], np.float32)
    control.joint_f.assign(wrench.reshape(-1))
    solver.step(model.state(), model.state(), control, None, 1e-3, observables=obs)
    np.testing.assert_allclose(obs.body_parent_f.numpy(), wrench, atol=1e-4)
    np.testing.assert_allclose(obs.body_qdd.numpy()[0, :3], [0.5, 0.0, 0.0], atol=1e-3)


def test_the_warp_backend_narrows_the_supported_kinds():
    pytest.importorskip("mujoco_warp")
    model = _released_pendulum()
    solver = newton.solvers.SolverMuJoCo(model, use_mujoco_cpu=False)
    assert solver.supported_observables == {"body_qdd"}
    with pytest.raises(ValueError, match="does not support solver observable"):
        solver.observables({"body_parent_f"})
    obs = solver.observables(solver.supported_observables)
    s0, s1 = model.state(), model.state()
    newton.eval_fk(model, model.joint_q, model.joint_qd, s0)
    solver.step(s0, s1, None, None, 1e-4, observables=obs)
    assert abs(float(obs.body_qdd.numpy()[0, 4]) - 19.11) < 0.05  # alpha of the released pendulum

"""Meta-tests of the conformance kit's gradient checks (armillary.testing.gradient_checks): correct
differentiable fakes pass, fakes that declare ``differentiable`` but cut or corrupt the gradient fail,
solvers without the declaration are skipped there and must raise ``NotDifferentiableError`` under a tape.

The fakes below are written into a pytester directory next to ``fake_solvers.py`` and the suite runs
in-process, as in ``test_conformance_kit.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import warp as wp

from armillary.testing.gradient_checks import GradientComparison, compare_gradients

pytest_plugins = ["pytester"]

FAKES = Path(__file__).with_name("fake_solvers.py").read_text()

GRAD_FAKES = '''
"""Warp fakes for the gradient checks."""
import numpy as np
import warp as wp

import armillary
from armillary.sim.enums import JointType
from armillary.solvers import Coordinates, SolverBase, SolverCapabilities

from fake_solvers import FakeEuler


@wp.kernel
def integrate_bodies(body_q: wp.array(dtype=wp.transform), body_qd: wp.array(dtype=wp.spatial_vector),
                     body_com: wp.array(dtype=wp.vec3), gravity: wp.array(dtype=wp.vec3), dt: float,
                     q_out: wp.array(dtype=wp.transform), qd_out: wp.array(dtype=wp.spatial_vector)):
    i = wp.tid()
    q = body_q[i]
    qd = body_qd[i]
    v = wp.spatial_top(qd) + gravity[0] * dt
    w = wp.spatial_bottom(qd)
    x = wp.transform_point(q, body_com[i]) + v * dt
    r = wp.transform_get_rotation(q)
    r = wp.normalize(r + wp.quat(w * 0.5 * dt, 0.0) * r)
    q_out[i] = wp.transform(x - wp.quat_rotate(r, body_com[i]), r)
    qd_out[i] = wp.spatial_vector(v, w)


@wp.kernel
def integrate_particles(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), gravity: wp.array(dtype=wp.vec3),
                        dt: float, x_out: wp.array(dtype=wp.vec3), v_out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    vn = v[i] + gravity[0] * dt
    v_out[i] = vn
    x_out[i] = x[i] + vn * dt


class FakeWarpEuler(SolverBase):
    """Correct and differentiable: semi-implicit Euler in Warp kernels, free bodies and particles."""

    capabilities = SolverCapabilities(
        coordinates=Coordinates.MAXIMAL, joint_types=frozenset({JointType.FREE}),
        features=frozenset({"rigid_bodies", "particles"}), differentiable=True,
    )

    def step(self, state_in, state_out, control, contacts, dt, *, observables=None):
        self.validate_observables(observables, contacts)
        m = self.model
        if m.body_count:
            self._bodies(state_in, state_out, dt)
        if m.particle_count:
            wp.launch(integrate_particles, m.particle_count,
                      inputs=[state_in.particle_q, state_in.particle_qd, m.gravity, dt],
                      outputs=[state_out.particle_q, state_out.particle_qd], device=m.device)

    def _bodies(self, state_in, state_out, dt):
        m = self.model
        wp.launch(integrate_bodies, m.body_count, inputs=[state_in.body_q, state_in.body_qd, m.body_com, m.gravity, dt],
                  outputs=[state_out.body_q, state_out.body_qd], device=m.device)


@wp.kernel
def velocity_step(body_qd: wp.array(dtype=wp.spatial_vector), gravity: wp.array(dtype=wp.vec3), dt: float,
                  qd_out: wp.array(dtype=wp.spatial_vector)):
    i = wp.tid()
    qd = body_qd[i]
    qd_out[i] = wp.spatial_vector(wp.spatial_top(qd) + gravity[0] * dt, wp.spatial_bottom(qd))


@wp.kernel
def rotation_step(body_q: wp.array(dtype=wp.transform), body_qd: wp.array(dtype=wp.spatial_vector), dt: float,
                  rot_out: wp.array(dtype=wp.quat)):
    i = wp.tid()
    w = wp.spatial_bottom(body_qd[i])
    r = wp.transform_get_rotation(body_q[i])
    rot_out[i] = wp.normalize(r + wp.quat(w * 0.5 * dt, 0.0) * r)


@wp.kernel
def pose_step(body_q: wp.array(dtype=wp.transform), qd_new: wp.array(dtype=wp.spatial_vector),
              rot: wp.array(dtype=wp.quat), body_com: wp.array(dtype=wp.vec3), dt: float,
              q_out: wp.array(dtype=wp.transform)):
    i = wp.tid()
    r = rot[i]
    x = wp.transform_point(body_q[i], body_com[i]) + wp.spatial_top(qd_new[i]) * dt
    q_out[i] = wp.transform(x - wp.quat_rotate(r, body_com[i]), r)


class FakeWarpLostIntermediate(FakeWarpEuler):
    """Broken: the new velocities go through a solver-owned array without gradients (the tape cannot
    carry anything through it: d x / d v comes out as zero)."""

    def _bodies(self, state_in, state_out, dt):
        m = self.model
        if getattr(self, "_v", None) is None:
            self._v = wp.zeros(m.body_count, dtype=wp.spatial_vector, device=m.device)
            self._r = wp.zeros(m.body_count, dtype=wp.quat, device=m.device)
        wp.launch(velocity_step, m.body_count, inputs=[state_in.body_qd, m.gravity, dt], outputs=[self._v],
                  device=m.device)
        wp.launch(rotation_step, m.body_count, inputs=[state_in.body_q, state_in.body_qd, dt], outputs=[self._r],
                  device=m.device)
        wp.launch(pose_step, m.body_count, inputs=[state_in.body_q, self._v, self._r, m.body_com, dt],
                  outputs=[state_out.body_q], device=m.device)
        wp.copy(state_out.body_qd, self._v)


@wp.kernel
def gravity_step(v: wp.array(dtype=wp.vec3), gravity: wp.array(dtype=wp.vec3), dt: float,
                 v_out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    v_out[i] = v[i] + gravity[0] * dt


@wp.kernel
def drag_step(x: wp.array(dtype=wp.vec3), v: wp.array(dtype=wp.vec3), drag: float, dt: float,
              x_out: wp.array(dtype=wp.vec3), v_out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    vi = v[i]
    vn = vi * (1.0 - drag * dt * wp.length(vi))  # quadratic air drag: its adjoint re-reads v
    v_out[i] = vn
    x_out[i] = x[i] + vn * dt


class FakeWarpSharedScratch(FakeWarpEuler):
    """Broken the subtle way: particles with quadratic drag through an intermediate velocity that
    carries gradients, but every step overwrites the same scratch array, so the adjoint of an early
    step re-reads the last step's velocity (the per-step storage problem)."""

    drag = 20.0

    def step(self, state_in, state_out, control, contacts, dt, *, observables=None):
        self.validate_observables(observables, contacts)
        m = self.model
        if m.body_count:
            self._bodies(state_in, state_out, dt)
        if m.particle_count:
            if getattr(self, "_v", None) is None:
                self._v = wp.zeros(m.particle_count, dtype=wp.vec3, device=m.device, requires_grad=True)
            wp.launch(gravity_step, m.particle_count, inputs=[state_in.particle_qd, m.gravity, dt], outputs=[self._v],
                      device=m.device)
            wp.launch(drag_step, m.particle_count, inputs=[state_in.particle_q, self._v, self.drag, dt],
                      outputs=[state_out.particle_q, state_out.particle_qd], device=m.device)


class FakeWarpPerStepScratch(FakeWarpSharedScratch):
    """Correct: the same drag, with a fresh intermediate per step while a tape records."""

    def step(self, state_in, state_out, control, contacts, dt, *, observables=None):
        from armillary.launch import tape_recording

        if tape_recording():
            self._v = None
        super().step(state_in, state_out, control, contacts, dt, observables=observables)


class FakeNumpyClaimsGradients(FakeEuler):
    """Broken: declares differentiable but integrates in NumPy (read-backs and assign: zero gradients)."""

    capabilities = SolverCapabilities(
        coordinates=Coordinates.MAXIMAL, joint_types=frozenset({JointType.FREE}),
        features=frozenset({"rigid_bodies", "particles"}), differentiable=True,
    )


@wp.kernel
def pendulum_step(joint_q: wp.array(dtype=float), joint_qd: wp.array(dtype=float),
                  body_q: wp.array(dtype=wp.transform), joint_X_p: wp.array(dtype=wp.transform),
                  joint_axis: wp.array(dtype=wp.vec3), body_com: wp.array(dtype=wp.vec3),
                  body_mass: wp.array(dtype=float), body_inertia: wp.array(dtype=wp.mat33),
                  gravity: wp.array(dtype=wp.vec3), dt: float,
                  q_out: wp.array(dtype=float), qd_out: wp.array(dtype=float)):
    X = body_q[0]
    pivot = wp.transform_get_translation(joint_X_p[0])
    axis = wp.transform_vector(joint_X_p[0], joint_axis[0])
    r = wp.transform_point(X, body_com[0]) - pivot
    m = body_mass[0]
    R = wp.quat_to_matrix(wp.transform_get_rotation(X))
    Iw = R * body_inertia[0] * wp.transpose(R)
    rp = r - axis * wp.dot(r, axis)
    Ip = wp.dot(axis, Iw * axis) + m * wp.dot(rp, rp)
    tau = wp.dot(axis, wp.cross(r, m * gravity[0]))
    qd = joint_qd[0] + dt * tau / Ip
    qd_out[0] = qd
    q_out[0] = joint_q[0] + dt * qd


class FakeWarpPendulum(SolverBase):
    """Correct and differentiable: the kit's single revolute pendulum (generalized coordinates),
    semi-implicit Euler on the angle in a kernel, then eval_fk."""

    capabilities = SolverCapabilities(
        coordinates=Coordinates.GENERALIZED, joint_types=frozenset({JointType.REVOLUTE}),
        features=frozenset({"rigid_bodies"}), differentiable=True,
    )

    def step(self, state_in, state_out, control, contacts, dt, *, observables=None):
        self.validate_observables(observables, contacts)
        m = self.model
        if m.joint_count != 1:
            return
        wp.launch(pendulum_step, 1, inputs=[state_in.joint_q, state_in.joint_qd, state_in.body_q, m.joint_X_p,
                                            m.joint_axis, m.body_com, m.body_mass, m.body_inertia, m.gravity, dt],
                  outputs=[state_out.joint_q, state_out.joint_qd], device=m.device)
        armillary.eval_fk(m, state_out.joint_q, state_out.joint_qd, state_out)
'''

SELECT = "gradient or differentiable"


def run_checks(pytester, solver_class: str):
    """Run the kit's gradient checks against ``grad_fakes.<solver_class>``; ``{test: outcome}``
    (with ``test:message`` for failures and skips)."""
    pytester.makepyfile(fake_solvers=FAKES, grad_fakes=GRAD_FAKES)
    pytester.makepyfile(
        test_suite=f"""
import armillary.testing
import grad_fakes

class TestSuite(armillary.testing.SolverConformance):
    solver = grad_fakes.{solver_class}
    graph_capturable = False
"""
    )
    pytester.syspathinsert()
    try:
        reprec = pytester.inline_run("-p", "no:cacheprovider", "-q", "-k", SELECT)
    finally:
        sys.modules.pop("fake_solvers", None)
        sys.modules.pop("grad_fakes", None)
    outcomes = {}
    for rep in reprec.getreports("pytest_runtest_logreport"):
        name = rep.nodeid.split("::")[-1]
        if rep.when == "call" or (rep.when == "setup" and not rep.passed):
            outcomes[name] = rep.outcome
            if rep.outcome in ("failed", "skipped"):
                outcomes[name + ":message"] = str(rep.longrepr)
    return outcomes


CHECKS = ("test_gradient_pendulum", "test_gradient_free_body", "test_gradient_particle",
          "test_not_differentiable_raises_under_tape")  # fmt: skip


def test_correct_maximal_fake_passes(pytester):
    out = run_checks(pytester, "FakeWarpEuler")
    assert out["test_gradient_free_body"] == "passed", out.get("test_gradient_free_body:message")
    assert out["test_gradient_particle"] == "passed", out.get("test_gradient_particle:message")
    assert out["test_gradient_pendulum"] == "skipped" and "REVOLUTE" in out["test_gradient_pendulum:message"]
    assert out["test_not_differentiable_raises_under_tape"] == "skipped"
    assert "declares differentiable=True" in out["test_not_differentiable_raises_under_tape:message"]


def test_correct_generalized_pendulum_fake_passes(pytester):
    out = run_checks(pytester, "FakeWarpPendulum")
    assert out["test_gradient_pendulum"] == "passed", out.get("test_gradient_pendulum:message")
    assert out["test_gradient_free_body"] == "skipped"  # no FREE joint declared


def test_zero_gradients_fail(pytester):
    """Declares differentiable, computes in NumPy: every gradient is zero, relative error 1."""
    out = run_checks(pytester, "FakeNumpyClaimsGradients")
    for check in ("test_gradient_free_body", "test_gradient_particle"):
        assert out[check] == "failed", out
        assert "FakeNumpyClaimsGradients" in out[check + ":message"]
        assert "relative error 1.00e+00" in out[check + ":message"]


def test_a_gradient_cut_by_an_untracked_intermediate_fails(pytester):
    out = run_checks(pytester, "FakeWarpLostIntermediate")
    assert out["test_gradient_free_body"] == "failed", out
    assert "body_qd" in out["test_gradient_free_body:message"]
    assert out["test_gradient_particle"] == "passed"  # its particles are integrated correctly


def test_a_scratch_buffer_overwritten_by_later_steps_fails(pytester):
    out = run_checks(pytester, "FakeWarpSharedScratch")
    assert out["test_gradient_particle"] == "failed", out
    assert "gradient off by more than 2%" in out["test_gradient_particle:message"]
    out = run_checks(pytester, "FakeWarpPerStepScratch")  # the same physics with per-step storage
    assert out["test_gradient_particle"] == "passed", out.get("test_gradient_particle:message")


def test_undeclared_solvers_skip_the_gradient_checks_and_must_refuse_the_tape(pytester):
    pytester.makepyfile(fake_solvers=FAKES)
    pytester.makepyfile(
        test_suite="""
import armillary.testing
import fake_solvers

class TestEuler(armillary.testing.SolverConformance):
    solver = fake_solvers.FakeEuler
    graph_capturable = False

class TestPendulum(armillary.testing.SolverConformance):
    solver = fake_solvers.FakePendulum
    graph_capturable = False
"""
    )
    pytester.syspathinsert()
    try:
        reprec = pytester.inline_run("-p", "no:cacheprovider", "-q", "-k", SELECT)
    finally:
        sys.modules.pop("fake_solvers", None)
    passed, skipped, failed = reprec.listoutcomes()
    assert not failed, [str(r.longrepr) for r in failed]
    assert {r.nodeid.split("::")[-1] for r in passed} == {"test_not_differentiable_raises_under_tape"}
    assert len(passed) == 2
    for rep in skipped:
        assert "does not declare differentiable=True" in str(rep.longrepr)
    assert len(skipped) == 6


def test_the_refusal_check_fails_a_solver_that_steps_silently_under_a_tape(pytester):
    """A step that escapes the core's wrapper (assigned after the class was made) is caught by the kit."""
    pytester.makepyfile(fake_solvers=FAKES)
    pytester.makepyfile(
        test_suite="""
import armillary.testing
import fake_solvers

class FakeUnguarded(fake_solvers.FakeEuler):
    pass

FakeUnguarded.step = fake_solvers.FakeEuler.step.__wrapped__  # the raw step, without the core's checks

class TestUnguarded(armillary.testing.SolverConformance):
    solver = FakeUnguarded
    graph_capturable = False
"""
    )
    pytester.syspathinsert()
    try:
        reprec = pytester.inline_run("-p", "no:cacheprovider", "-q", "-k", "not_differentiable")
    finally:
        sys.modules.pop("fake_solvers", None)
    passed, skipped, failed = reprec.listoutcomes()
    assert len(failed) == 1 and "DID NOT RAISE" in str(failed[0].longrepr), [str(r.longrepr) for r in failed]


# ------------------------------------------------------------------ compare_gradients itself
def test_compare_gradients_on_a_known_function():
    @wp.kernel
    def square_sin(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = x[i] * x[i] + wp.sin(x[i])

    def forward(a):
        y = wp.zeros(3, dtype=float, requires_grad=True)
        wp.launch(square_sin, 3, inputs=[a["x"]], outputs=[y])
        return [y]

    res = compare_gradients(forward, {"x": wp.array([0.5, -1.0, 2.0], dtype=float)}, eps=1e-3, seed=4)["x"]
    w = np.random.default_rng(4).normal(size=3).astype(np.float32)
    x = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(res.autodiff, w * (2 * x + np.cos(x)), rtol=1e-5)
    assert res.rel_error < 1e-3
    res.check(0.01)


def test_comparison_messages():
    zero = GradientComparison("v", np.arange(2), np.zeros(2), np.array([1.0, 2.0]), 1e-2)
    assert zero.rel_error == 1.0
    with pytest.raises(AssertionError, match=r"scene: gradient off by more than 5%; d loss / d v\[0, 1\]"):
        zero.check(0.05, "scene")
    flat = GradientComparison("v", np.arange(2), np.zeros(2), np.zeros(2), 1e-2)
    with pytest.raises(AssertionError, match="does not depend on v"):
        flat.check(0.05)
    nan = GradientComparison("v", np.arange(1), np.array([np.nan]), np.array([1.0]), 1e-2)
    with pytest.raises(AssertionError, match="non-finite"):
        nan.check(0.05)

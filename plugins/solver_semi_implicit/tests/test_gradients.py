"""SolverSemiImplicit under ``wp.Tape``: autodiff gradients against central finite differences.

Every check runs the computation once under a tape, back-propagates a fixed random weighting of
its outputs and compares the gradient with central differences of the same float32 computation
(:func:`armillary.testing.gradient_checks.compare_gradients`; relative error ``|g_ad - g_fd| /
|g_fd|`` over the checked components). Tolerances:

* ``FORCE_TOL`` (0.5 %): one force evaluation (joints, rigid contacts, particle forces,
  ``update_joint_state``), central step 1e-3 on positions, velocities and quaternion components;
* ``ROLLOUT_TOL`` (2 %, the conformance kit's ``gradient_rel``): whole trajectories through a list
  of states, central step 1e-2 (1 N/m on a spring stiffness).

Scenes are chosen smooth inside the difference interval: no contact begins or ends, no friction
regime, drive / limit or angle-wrap switch is crossed. Measured relative errors are quoted next
to each scene (this 2-core CPU).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import warp as wp

import armillary
from armillary.testing.gradient_checks import compare_gradients
from armillary_solver_semi_implicit.joint_kernels import eval_joint_forces, update_joint_state
from armillary_solver_semi_implicit.particles import ParticleForces

wp.config.quiet = True

FORCE_TOL = 5.0e-3
ROLLOUT_TOL = 2.0e-2
X, Y, Z = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)


def _check(results, tol, what):
    for comparison in results.values():
        print(f"{what}: d / d {comparison.name}: relative error {comparison.rel_error:.1e}")  # shown with -s
        comparison.check(tol, what)


def _arr(values, dtype):
    return wp.array(np.asarray(values, np.float32), dtype=dtype, device="cpu")


def _rollout(model, solver, init, steps, dt, *, outputs=("body_q", "body_qd"), contacts=None, control=None):
    """``forward`` for ``compare_gradients``: ``init(state_0, control, arrays)`` on the tape, then
    ``steps`` solver steps through a list of fresh states (the reference usage)."""

    def forward(arrays):
        states = [model.state(requires_grad=True) for _ in range(steps + 1)]
        ctrl = model.control(requires_grad=True) if control is None else control
        init(states[0], ctrl, arrays)
        c = contacts(states[0]) if callable(contacts) else contacts
        for i in range(steps):
            states[i].clear_forces()
            solver.step(states[i], states[i + 1], ctrl, c, dt)
        return [getattr(states[-1], name) for name in outputs]

    return forward


# ------------------------------------------------------------------------------------------ contract
def test_declares_differentiable():
    assert armillary.solvers.SolverSemiImplicit.capabilities.differentiable


def test_taped_step_uses_per_step_scratch_and_matches_untaped():
    """A taped step gives the untaped step's result bit for bit; each taped step writes its own
    body-wrench scratch (what a later step writes must not reach an earlier step's adjoint)."""
    b = armillary.ModelBuilder()
    L = 0.5
    link = b.add_link(xform=wp.transform((L, 0.0, 2.0), wp.quat_identity()), mass=1.0,
                      inertia=wp.mat33(np.eye(3, dtype=np.float32) * 0.01))  # fmt: skip
    j = b.add_joint_revolute(parent=-1, child=link, parent_xform=wp.transform((0.0, 0.0, 2.0), wp.quat_identity()),
                             child_xform=wp.transform((-L, 0.0, 0.0), wp.quat_identity()), axis=Y)  # fmt: skip
    b.add_articulation([j])
    model = b.finalize(device="cpu", requires_grad=True)
    solver = armillary.solvers.SolverSemiImplicit(model, joint_attach_kd=10.0)
    plain = [model.state() for _ in range(4)]
    for i in range(3):
        solver.step(plain[i], plain[i + 1], None, None, 1e-3)
    taped = [model.state(requires_grad=True) for _ in range(4)]
    scratch = []
    with wp.Tape():
        for i in range(3):
            solver.step(taped[i], taped[i + 1], None, None, 1e-3)
            scratch.append(solver.body_f_int)
    assert len({id(a) for a in scratch}) == 3
    for name in ("body_q", "body_qd", "joint_q", "joint_qd"):
        np.testing.assert_array_equal(getattr(taped[3], name).numpy(), getattr(plain[3], name).numpy())


def test_in_place_step_under_tape_raises():
    """``state_in is state_out`` under a recording tape with gradients: a ``ValueError`` (the in-place
    update would overwrite what the adjoint reads), never silently wrong gradients; without a tape it
    still steps in place."""
    model = _pendulum()
    solver = armillary.solvers.SolverSemiImplicit(model, joint_attach_kd=10.0)
    state = model.state(requires_grad=True)
    with wp.Tape():
        with pytest.raises(ValueError, match="state_in is state_out"):
            solver.step(state, state, None, None, 1e-3)
    solver.step(state, state, None, None, 1e-3)


# ------------------------------------------------------------------------------------------ rollouts
def _pendulum(L=0.5):
    b = armillary.ModelBuilder()
    link = b.add_link(xform=wp.transform((L, 0.0, 2.0), wp.quat_identity()), mass=1.0,
                      inertia=wp.mat33(np.eye(3, dtype=np.float32) * 0.01))  # fmt: skip
    j = b.add_joint_revolute(parent=-1, child=link, parent_xform=wp.transform((0.0, 0.0, 2.0), wp.quat_identity()),
                             child_xform=wp.transform((-L, 0.0, 0.0), wp.quat_identity()), axis=Y)  # fmt: skip
    b.add_articulation([j])
    return b.finalize(device="cpu", requires_grad=True)


def test_free_body_rollout():
    """A spinning free body with an offset COM, 50 steps of 1 ms: d final pose and twist / d initial
    position and twist (d x_T / d v_0 = T on the linear part). Measured: 4.5e-4, 2.0e-4."""
    b = armillary.ModelBuilder()
    body = b.add_body(xform=wp.transform((0.1, -0.2, 1.0), wp.quat_from_axis_angle(wp.vec3(X), 0.3)), mass=2.0,
                      com=wp.vec3(0.05, 0.0, 0.0), inertia=wp.mat33(np.diag([0.02, 0.03, 0.04]).astype(np.float32)))  # fmt: skip
    b.add_shape_sphere(body, radius=0.1)
    model = b.finalize(device="cpu", requires_grad=True)
    solver = armillary.solvers.SolverSemiImplicit(model)

    def init(state, control, a):
        wp.copy(state.body_q, a["body_q"])
        wp.copy(state.body_qd, a["body_qd"])

    inputs = {"body_q": wp.clone(model.body_q), "body_qd": _arr([[0.5, -0.3, 2.0, 4.0, -2.0, 10.0]], wp.spatial_vector)}
    results = compare_gradients(_rollout(model, solver, init, 50, 1e-3), inputs, eps=1e-2,
                                components={"body_q": range(7)})  # fmt: skip
    _check(results, ROLLOUT_TOL, "free body")

    # the linear part in closed form: x_T = x_0 + T v_0 + g dt^2 n (n + 1) / 2, so d x_T / d v_0 = T
    qd = wp.array(np.zeros((1, 6), np.float32), dtype=wp.spatial_vector, requires_grad=True)
    states = [model.state(requires_grad=True) for _ in range(11)]
    tape = wp.Tape()
    with tape:
        wp.copy(states[0].body_qd, qd)
        for i in range(10):
            solver.step(states[i], states[i + 1], None, None, 0.01)
    seed = np.zeros((1, 7), np.float32)
    seed[0, 0] = 1.0
    tape.backward(grads={states[-1].body_q: wp.array(seed, dtype=wp.transform)})
    assert qd.grad.numpy()[0, 0] == pytest.approx(0.1, rel=1e-5)


@pytest.mark.parametrize("steps, dt", [(20, 1e-3), (200, 1e-3)])
def test_pendulum_rollout_through_eval_fk(steps, dt):
    """0.5 m revolute pendulum (penalty joint, kd 10) started at 0.4 rad, 1 rad/s: d final bob pose and
    ``joint_q`` / d initial ``joint_q``, ``joint_qd`` (``eval_fk`` on the tape writes the initial body
    state). Measured: 20 steps 3.3e-5, 2.5e-3; 200 steps 5.4e-5, 7.0e-5 (dt 1 ms: explicit penalty
    joints need ``joint_attach_ke dt^2 / m << 1``)."""
    from armillary.sim.kinematics import eval_fk

    model = _pendulum()
    solver = armillary.solvers.SolverSemiImplicit(model, joint_attach_kd=10.0)

    def init(state, control, a):
        wp.copy(state.joint_q, a["joint_q"])
        wp.copy(state.joint_qd, a["joint_qd"])
        eval_fk(model, a["joint_q"], a["joint_qd"], state)

    inputs = {"joint_q": _arr([0.4], float), "joint_qd": _arr([1.0], float)}
    forward = _rollout(model, solver, init, steps, dt, outputs=("body_q", "joint_q"))
    _check(compare_gradients(forward, inputs, eps=1e-2), ROLLOUT_TOL, f"pendulum, {steps} steps")


def test_pendulum_rollout_body_velocity():
    """The same pendulum without ``eval_fk``: d final bob height / d initial body twist, 200 steps of 1 ms.
    Measured: 3.3e-3."""
    L = 0.5
    model = _pendulum(L)
    solver = armillary.solvers.SolverSemiImplicit(model, joint_attach_kd=10.0)

    def init(state, control, a):
        wp.copy(state.body_qd, a["body_qd"])

    inputs = {"body_qd": _arr([[0.0, 0.0, -L, 0.0, 1.0, 0.0]], wp.spatial_vector)}
    forward = _rollout(model, solver, init, 200, 1e-3, outputs=("body_q", "joint_q", "joint_qd"))
    _check(compare_gradients(forward, inputs, eps=1e-2), ROLLOUT_TOL, "pendulum, body twist")


def test_spring_pair_rollout():
    """Two 1 kg particles on a stretched spring (k 100 N/m, kd 1, rest 0.5 m, 0.6 m apart), 100 steps of
    5 ms: d final positions / d initial velocities and d / d spring stiffness and rest length.
    Measured: 3.6e-4 (velocities), 2.5e-4 (stiffness), 3.4e-4 (rest length)."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    b.add_particle((0.0, 0.0, 1.0), (0.0, 0.0, 0.0), 1.0, radius=0.01)
    b.add_particle((0.6, 0.0, 1.0), (0.0, 0.0, 0.0), 1.0, radius=0.01)
    b.add_spring(0, 1, 100.0, 1.0, 0)
    model = b.finalize(device="cpu", requires_grad=True)
    model.spring_rest_length.assign(np.array([0.5], np.float32))
    solver = armillary.solvers.SolverSemiImplicit(model)

    def init(state, control, a):
        wp.copy(state.particle_qd, a["particle_qd"])
        wp.copy(model.spring_stiffness, a["spring_stiffness"])
        wp.copy(model.spring_rest_length, a["spring_rest_length"])

    inputs = {"particle_qd": _arr([[0.3, 0.0, 0.0], [0.0, 0.2, 0.1]], wp.vec3),
              "spring_stiffness": _arr([100.0], float), "spring_rest_length": _arr([0.5], float)}  # fmt: skip
    forward = _rollout(model, solver, init, 100, 5e-3, outputs=("particle_q", "particle_qd"))
    results = compare_gradients(forward, inputs, eps={"particle_qd": 1e-2, "spring_stiffness": 1.0,
                                                      "spring_rest_length": 1e-3})  # fmt: skip
    _check(results, ROLLOUT_TOL, "spring pair")


def test_box_sliding_with_friction_rollout():
    """A flat box (0.4 x 0.4 x 0.04 m, 6.4 kg) sliding at 2 m/s and turning at 0.5 rad/s on the ground
    plane (mu 0.5; penalty contacts of the core collision pipeline, detected once on the tape from
    the initial state), 100 steps of 1 ms: its four bottom corners stay in contact and in the Coulomb
    regime (slip >> mu f_n / kf). d final pose and twist / d initial in-plane twist (vx, vy, wz) and
    d / d the box's friction coefficient. Measured: 3.1e-5, 5.8e-4. (The normal damping acts only while
    approaching, ``kd min(vn, 0)``: a kink the resting box crosses all the time, so derivatives along
    vz, wx, wy are one-sided and a central difference of 1e-2 straddles the kink.)"""
    b = armillary.ModelBuilder()
    cfg = armillary.ModelBuilder.ShapeConfig(mu=0.5)
    b.add_ground_plane(cfg=cfg)
    body = b.add_body(xform=wp.transform((0.0, 0.0, 0.02), wp.quat_identity()))
    b.add_shape_box(body, hx=0.2, hy=0.2, hz=0.02, cfg=cfg)
    model = b.finalize(device="cpu", requires_grad=True)
    ke = float(model.shape_material_ke.numpy().mean())
    m = float(model.body_mass.numpy()[0])
    rest = model.body_q.numpy()
    rest[0, 2] = 0.02 - m * 9.81 / (4.0 * ke)  # resting penetration: no bounce
    solver = armillary.solvers.SolverSemiImplicit(model)
    pipeline = armillary.CollisionPipeline(model)

    def init(state, control, a):
        state.body_q.assign(rest)
        wp.copy(state.body_qd, a["body_qd"])
        wp.copy(model.shape_material_mu, a["shape_material_mu"])

    def contacts(state):
        c = pipeline.contacts()
        pipeline.collide(state, c)
        return c

    mu = model.shape_material_mu.numpy()
    inputs = {"body_qd": _arr([[2.0, 0.3, 0.0, 0.0, 0.0, 0.5]], wp.spatial_vector),
              "shape_material_mu": _arr(mu, float)}
    forward = _rollout(model, solver, init, 100, 1e-3, contacts=contacts)
    results = compare_gradients(forward, inputs, eps=1e-2, components={"body_qd": [0, 1, 5], "shape_material_mu": [1]})
    _check(results, ROLLOUT_TOL, "sliding box")


def test_pd_drive_target_rollout():
    """A revolute pendulum held by a PD drive (ke 20 N m/rad, kd 1) towards ``Control.joint_target_q``
    under gravity, 200 steps of 1 ms: d final ``joint_q`` and bob pose / d target angle and target
    velocity. Measured: 5.4e-6, 2.5e-3."""
    model = _pendulum()
    model.joint_target_ke.assign(np.array([20.0], np.float32))
    model.joint_target_kd.assign(np.array([1.0], np.float32))
    solver = armillary.solvers.SolverSemiImplicit(model, joint_attach_kd=10.0)

    def init(state, control, a):
        wp.copy(control.joint_target_q, a["joint_target_q"])
        wp.copy(control.joint_target_qd, a["joint_target_qd"])

    inputs = {"joint_target_q": _arr([0.3], float), "joint_target_qd": _arr([0.5], float)}
    forward = _rollout(model, solver, init, 200, 1e-3, outputs=("joint_q", "body_q"))
    _check(compare_gradients(forward, inputs, eps=1e-2), ROLLOUT_TOL, "PD drive target")


# ------------------------------------------------------------------------------------------ force kernels
QP = (0.09164329, 0.18328658, 0.27492985, 0.9393727)  # anchor frame rotations (unit quaternions, xyzw)
QC = (-0.08671, 0.04336, 0.17342, 0.98007)


def _two_bodies(case):
    """Parent and child cubes joined by one joint with offset, rotated anchor frames (zero gravity)."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    p = b.add_link(xform=wp.transform((0.0, 0.0, 2.0), wp.quat_identity()))
    b.add_shape_box(p, hx=0.1, hy=0.1, hz=0.1)
    c = b.add_link(xform=wp.transform((0.3, 0.1, 1.0), wp.quat_identity()))
    b.add_shape_box(c, hx=0.1, hy=0.1, hz=0.1)
    Xp = wp.transform((0.2, -0.1, -0.5), wp.normalize(wp.quat(*QP)))
    Xc = wp.transform((-0.1, 0.3, 0.4), wp.normalize(wp.quat(*QC)))
    cfg = armillary.ModelBuilder.JointDofConfig
    drive = dict(target_ke=50.0, target_kd=5.0, target_q=0.3, target_qd=0.5)
    spring = dict(stiffness=20.0, damping=3.0, rest_q=0.25)
    if case == "fixed":
        j = b.add_joint_fixed(p, c, parent_xform=Xp, child_xform=Xc)
    elif case == "revolute":
        j = b.add_joint_revolute(p, c, parent_xform=Xp, child_xform=Xc, axis=Z, **drive, **spring)
    elif case == "revolute_limit":
        j = b.add_joint_revolute(p, c, parent_xform=Xp, child_xform=Xc, axis=Z, target_ke=50.0, limit_lower=-0.05,
                                 limit_upper=0.05, limit_ke=1000.0, limit_kd=10.0)  # fmt: skip
    elif case == "prismatic":
        j = b.add_joint_prismatic(p, c, parent_xform=Xp, child_xform=Xc, axis=Z, **drive, **spring)
    elif case == "ball":
        j = b.add_joint_ball(p, c, parent_xform=Xp, child_xform=Xc, damping=3.0)
    elif case == "distance":
        # the anchors start 0.51 m apart: beyond max_distance, the range spring-damper acts
        j = b.add_joint_distance(p, c, parent_xform=Xp, child_xform=Xc, min_distance=0.1, max_distance=0.3)
    elif case == "d6_33":
        d = dict(target_ke=50.0, target_kd=5.0, target_q=0.1, target_qd=0.5)
        j = b.add_joint_d6(p, c, linear_axes=[cfg(axis=a, **d) for a in (X, Y, Z)],
                           angular_axes=[cfg(axis=a, **d) for a in (Z, X, Y)], parent_xform=Xp, child_xform=Xc)  # fmt: skip
    elif case == "d6_12":
        d = dict(target_ke=50.0, target_kd=5.0, target_q=0.0, limit_lower=-0.3, limit_upper=0.3, limit_ke=1000.0,
                 limit_kd=10.0)  # fmt: skip
        j = b.add_joint_d6(p, c, linear_axes=[cfg(axis=X, **d)], angular_axes=[cfg(axis=a, **d) for a in (Z, X)],
                           parent_xform=Xp, child_xform=Xc)  # fmt: skip
    elif case == "mimic":
        j0 = b.add_joint_revolute(-1, p, parent_xform=wp.transform((0.0, 0.0, 2.5), wp.quat(*QC)),
                                  child_xform=wp.transform((0.0, 0.0, 0.5), wp.quat(*QC)), axis=X)  # fmt: skip
        j = b.add_joint_revolute(p, c, parent_xform=Xp, child_xform=Xc, axis=Z)
        b.set_joint_mimic(j, j0, coeffs=(0.25, -2.0))
        b.add_articulation([j0, j])
        return b.finalize(device="cpu", requires_grad=True)
    else:
        raise ValueError(case)
    b.add_articulation([j])
    return b.finalize(device="cpu", requires_grad=True, skip_validation_joints=True)


def _moved_state(model, seed):
    """Bodies moved by ~5 cm, turned by ~0.3 rad, moving at ~0.5 m/s and rad/s (deterministic)."""
    rng = np.random.default_rng(seed)
    bq = model.body_q.numpy().astype(np.float64)
    for i in range(len(bq)):
        bq[i, :3] += rng.uniform(-0.05, 0.05, 3)
        axis = rng.normal(size=3)
        axis /= np.linalg.norm(axis)
        half = 0.5 * rng.uniform(-0.4, 0.4)
        x1, y1, z1, w1 = np.r_[math.sin(half) * axis, math.cos(half)]
        x2, y2, z2, w2 = bq[i, 3:]
        bq[i, 3:] = [w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2, w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
                     w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2, w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2]  # fmt: skip
    qd = rng.uniform(-0.5, 0.5, (len(bq), 6))
    return bq.astype(np.float32), qd.astype(np.float32)


JOINT_CASES = ["fixed", "revolute", "revolute_limit", "prismatic", "ball", "distance", "d6_33", "d6_12", "mimic"]


@pytest.mark.parametrize("case", JOINT_CASES)
def test_joint_forces_gradient(case):
    """``eval_joint_forces`` (attachment springs, drives, passive springs, limits, DISTANCE range,
    mimic couplings): d body wrenches / d body poses (positions and quaternion components), twists
    and the drive targets, at two moved states. Measured: at most 5.5e-4."""
    model = _two_bodies(case)
    control = model.control(requires_grad=True)
    if case in ("ball", "d6_33"):
        control.joint_f.assign(np.arange(1.0, model.joint_dof_count + 1.0, dtype=np.float32))
    for seed in (0, 1):
        bq, qd = _moved_state(model, seed)

        def forward(a):
            f = wp.zeros(model.body_count, dtype=wp.spatial_vector, device="cpu", requires_grad=True)
            ctrl = model.control(requires_grad=True)
            wp.copy(ctrl.joint_target_q, a["joint_target_q"])
            wp.copy(ctrl.joint_target_qd, a["joint_target_qd"])
            wp.copy(ctrl.joint_f, control.joint_f)
            eval_joint_forces(model, a["body_q"], a["body_qd"], ctrl, f, joint_attach_ke=1.0e4, joint_attach_kd=100.0,
                              joint_mimic_ke=100.0, joint_mimic_kd=1.0)  # fmt: skip
            return [f]

        inputs = {"body_q": _arr(bq, wp.transform), "body_qd": _arr(qd, wp.spatial_vector),
                  "joint_target_q": wp.clone(model.joint_target_q), "joint_target_qd": wp.clone(model.joint_target_qd)}  # fmt: skip
        # (forces are affine in the twist and the targets: a wider step keeps float32 round-off out)
        results = compare_gradients(forward, inputs, eps={"body_q": 1e-3, "body_qd": 5e-2, "joint_target_q": 1e-2,
                                                          "joint_target_qd": 5e-2})  # fmt: skip
        if not np.any(model.joint_target_ke.numpy()) or case == "revolute_limit":  # no drive acts: targets unread
            del results["joint_target_q"], results["joint_target_qd"]
        _check(results, FORCE_TOL, f"{case} joint forces, state {seed}")


@pytest.mark.parametrize("case", ["revolute", "prismatic", "ball", "distance", "d6_33", "d6_12"])
def test_update_joint_state_gradient(case):
    """``update_joint_state`` (``joint_q`` / ``joint_qd`` of ``state_out`` from the body state):
    d joint coordinates and rates / d body poses and twists. Measured: at most 5.4e-5."""
    model = _two_bodies(case)
    bq, qd = _moved_state(model, 2)

    def forward(a):
        q = wp.zeros(model.joint_coord_count, dtype=float, device="cpu", requires_grad=True)
        v = wp.zeros(model.joint_dof_count, dtype=float, device="cpu", requires_grad=True)
        update_joint_state(model, a["body_q"], a["body_qd"], q, v)
        return [q, v]

    inputs = {"body_q": _arr(bq, wp.transform), "body_qd": _arr(qd, wp.spatial_vector)}
    _check(compare_gradients(forward, inputs, eps=1e-3), FORCE_TOL, f"{case} joint state")


def test_rigid_contact_forces_gradient():
    """``body_contact_forces_kernel`` through a solver step's force pass: a box pressed 1 cm into the
    ground and into a second box, sliding and spinning (normal, damping and Coulomb friction terms):
    d body wrenches / d body poses and twists and d / d the shapes' stiffness, damping and friction.
    Measured: at most 1.6e-3."""
    from armillary_solver_semi_implicit import kernels

    b = armillary.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    b.add_ground_plane()
    for x in (0.0, 0.19):
        body = b.add_body(xform=wp.transform((x, 0.0, 0.09), wp.quat_from_axis_angle(wp.vec3(Z), 0.05 * x)))
        b.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1)
    model = b.finalize(device="cpu", requires_grad=True)
    pipeline = armillary.CollisionPipeline(model)
    state = model.state()
    contacts = pipeline.contacts()
    pipeline.collide(state, contacts)
    assert int(contacts.rigid_contact_count.numpy()[0]) >= 8
    n = contacts.rigid_contact_shape0.shape[0]
    qd = np.array([[0.5, 0.2, -0.1, 0.3, -0.2, 1.0], [-0.4, 0.1, -0.2, -0.1, 0.3, -0.5]], np.float32)

    def forward(a):
        f = wp.zeros(model.body_count, dtype=wp.spatial_vector, device="cpu", requires_grad=True)
        cf = wp.zeros(n, dtype=wp.vec3, device="cpu", requires_grad=True)
        c = contacts
        wp.launch(kernels.body_contact_forces_kernel, dim=1,
                  inputs=[model.shape_body, a["ke"], a["kd"], model.shape_material_kf, model.shape_material_ka,
                          a["mu"], model.body_com, a["body_q"], a["body_qd"], c.rigid_contact_count,
                          c.rigid_contact_shape0, c.rigid_contact_shape1, c.rigid_contact_point0,
                          c.rigid_contact_point1, c.rigid_contact_normal, c.rigid_contact_margin0,
                          c.rigid_contact_margin1, c.rigid_contact_stiffness, c.rigid_contact_damping,
                          c.rigid_contact_friction, 1],
                  outputs=[f, cf], device="cpu")  # fmt: skip
        return [f, cf]

    inputs = {"body_q": wp.clone(model.body_q), "body_qd": _arr(qd, wp.spatial_vector),
              "ke": wp.clone(model.shape_material_ke), "kd": wp.clone(model.shape_material_kd),
              "mu": wp.clone(model.shape_material_mu)}  # fmt: skip
    eps = {"body_q": 1e-4, "body_qd": 1e-2, "ke": 1.0, "kd": 0.1, "mu": 1e-3}
    results = compare_gradients(forward, inputs, eps=eps)
    _check(results, FORCE_TOL, "rigid contact forces")


def _particle_force_check(model, state, what, *, control=None, contacts=None, eps=1e-3, body_inputs=False,
                          velocity=True):
    """d particle forces (and body wrenches) / d particle (and body) positions and velocities of one
    ``ParticleForces.eval``."""
    pf = ParticleForces(model, enable_tri_contact=True, friction_smoothing=1.0)
    nb = model.body_count

    def forward(a):
        s = model.state(requires_grad=True)
        wp.copy(s.particle_q, a["particle_q"])
        wp.copy(s.particle_qd, a["particle_qd"])
        if body_inputs:
            wp.copy(s.body_q, a["body_q"])
            wp.copy(s.body_qd, a["body_qd"])
        f = wp.zeros(model.particle_count, dtype=wp.vec3, device="cpu", requires_grad=True)
        bf = wp.zeros(nb, dtype=wp.spatial_vector, device="cpu", requires_grad=True)
        pf.eval(s, control, contacts, f, bf if nb else None)
        return [f, bf] if nb else [f]

    inputs = {"particle_q": wp.clone(state.particle_q), "particle_qd": wp.clone(state.particle_qd)}
    if body_inputs:
        inputs.update(body_q=wp.clone(state.body_q), body_qd=wp.clone(state.body_qd))
    results = compare_gradients(forward, inputs, eps=eps)
    if not velocity:  # a force law without damping or friction
        del results["particle_qd"]
    _check(results, FORCE_TOL, what)


def _particles(points, velocities, *, radius=1.0e-4, gravity=(0.0, 0.0, 0.0)):
    b = armillary.ModelBuilder(gravity=gravity)
    for p, v in zip(points, velocities):
        b.add_particle(tuple(map(float, p)), tuple(map(float, v)), 1.0, radius=radius)
    return b


def test_particle_element_forces_gradient():
    """Springs, cloth triangles (shear, area with activation, damping, drag and lift), bending edges and
    stable neo-Hookean tetrahedra with damping, at random deformed and moving configurations:
    d forces / d positions and velocities. Measured: at most 1.1e-3."""
    rng = np.random.default_rng(3)
    tri = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    b = _particles(tri, np.zeros((3, 3)))
    b.add_triangle(0, 1, 2, tri_ke=10.0, tri_ka=300.0, tri_kd=1.0, tri_drag=2.0, tri_lift=1.0)
    model = b.finalize(device="cpu", requires_grad=True)
    s = model.state()
    s.particle_q.assign((tri + rng.uniform(-0.15, 0.15, (3, 3))).astype(np.float32))
    s.particle_qd.assign(rng.uniform(-1.0, 1.0, (3, 3)).astype(np.float32))
    _particle_force_check(model, s, "triangle")

    edge = np.array([[0.57, -0.8, 0.0], [0.53, 0.76, 0.24], [0.0, 0.0, 0.0], [1.1, 0.0, 0.0]])
    b = _particles(edge, np.zeros((4, 3)))
    b.add_edge(0, 1, 2, 3, edge_ke=5.0, edge_kd=0.5)
    model = b.finalize(device="cpu", requires_grad=True)
    s = model.state()
    s.particle_q.assign((edge + rng.uniform(-0.1, 0.1, (4, 3))).astype(np.float32))
    s.particle_qd.assign(rng.uniform(-1.0, 1.0, (4, 3)).astype(np.float32))
    _particle_force_check(model, s, "bending edge")

    tet = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    b = _particles(tet, np.zeros((4, 3)))
    b.add_tetrahedron(0, 1, 2, 3, k_mu=100.0, k_lambda=300.0, k_damp=2.0)
    b.add_spring(0, 3, 50.0, 0.5, 0)
    model = b.finalize(device="cpu", requires_grad=True)
    s = model.state()
    s.particle_q.assign((tet + rng.uniform(-0.1, 0.1, (4, 3))).astype(np.float32))
    s.particle_qd.assign(rng.uniform(-1.0, 1.0, (4, 3)).astype(np.float32))
    _particle_force_check(model, s, "tetrahedron and spring")


def test_particle_contact_forces_gradient():
    """Particle-shape contact against a moving, spinning dynamic sphere (normal, damping and Coulomb
    friction, reaction wrench on the body): d particle force and body wrench / d particle and body
    state. Particle-particle contacts (hash grid; friction and damping) and particle-triangle
    contacts (BVH): d forces / d positions and velocities. Measured: at most 9e-4."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    body = b.add_body(xform=wp.transform((0.02, 0.01, -1.0), wp.quat_identity()))
    b.add_shape_sphere(body, radius=1.0, cfg=armillary.ModelBuilder.ShapeConfig(density=1.0))
    b.add_particle((0.0, 0.0, 0.09), (0.3, -0.2, -0.5), 0.5, radius=0.1)
    model = b.finalize(device="cpu", requires_grad=True)
    s = model.state()
    s.body_qd.assign(np.array([[0.1, -0.2, 0.3, 0.5, -0.4, 0.2]], np.float32))
    pipeline = armillary.CollisionPipeline(model)
    contacts = pipeline.contacts()
    pipeline.collide(s, contacts)
    assert int(contacts.soft_contact_count.numpy()[0]) == 1
    _particle_force_check(model, s, "particle-shape contact", contacts=contacts, body_inputs=True)

    # particle pair: 1 cm overlap, approaching and sliding (kd and friction act)
    model = _particles([(0.0, 0.0, 0.0), (0.19, 0.02, 0.0)], [(0.0, 0.0, 0.0), (-0.5, 0.8, 0.1)], radius=0.1).finalize(
        device="cpu", requires_grad=True)  # fmt: skip
    model.particle_kf = 100.0
    _particle_force_check(model, model.state(), "particle-particle contact", eps=1e-4)

    # a particle 1 cm inside its radius above a cloth triangle (no damping, no friction)
    b = _particles([(0.0, 0.0, 0.0), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0)], np.zeros((3, 3)), radius=0.01)
    b.add_particle((0.25, 0.3, 0.04), (0.0, 0.0, 0.0), 1.0, radius=0.05)
    b.add_triangle(0, 1, 2, tri_ke=0.0, tri_ka=0.0, tri_kd=0.0)
    model = b.finalize(device="cpu", requires_grad=True)
    _particle_force_check(model, model.state(), "particle-triangle contact", eps=1e-4, velocity=False)


def test_neighbour_structures_are_rebuilt_for_the_adjoint():
    """The hash grid (particle-particle contacts) and the triangle BVH (particle-triangle contacts)
    are rebuilt by every step from its own positions; the force kernel's adjoint queries them
    again, so the backward pass rebuilds them from each step's positions before that step's adjoint
    (without it the adjoint of an early contact would query the last step's structures, where the
    bodies have moved apart, and lose the contact). Two particles collide head-on and fly apart; a
    particle lands on a cloth triangle that slides away at 5 m/s. 100 steps of 1 ms. Measured: 2.1e-3
    (without the grid rebuild 68 %, without the BVH refit 15 %)."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, -9.81))
    b.add_particle((-0.13, 3.0, 0.5), (4.0, 0.0, 0.0), 0.1, radius=0.1)
    b.add_particle((0.13, 3.02, 0.5), (-4.0, 0.0, 0.0), 0.1, radius=0.1)
    for p in ((0.0, 0.0, 0.0), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0)):  # zero mass: moves at its velocity
        b.add_particle(p, (5.0, 0.0, 0.0), 0.0, radius=0.01)
    b.add_particle((0.25, 0.3, 0.06), (0.0, 0.0, -1.0), 0.1, radius=0.05)
    b.add_triangle(2, 3, 4, tri_ke=0.0, tri_ka=0.0, tri_kd=0.0)
    model = b.finalize(device="cpu", requires_grad=True)
    model.particle_kd = 1.0
    model.particle_mu = 0.0  # frictionless: the stick / slip switch of the pair would sit inside the interval
    solver = armillary.solvers.SolverSemiImplicit(model)
    qd0 = model.particle_qd.numpy()

    def init(state, control, a):
        wp.copy(state.particle_qd, a["particle_qd"])

    forward = _rollout(model, solver, init, 100, 1e-3, outputs=("particle_q", "particle_qd"))
    results = compare_gradients(forward, {"particle_qd": _arr(qd0, wp.vec3)}, eps=1e-2,
                                components={"particle_qd": [0, 1, 3, 4, 15, 16, 17]})  # fmt: skip
    _check(results, ROLLOUT_TOL, "grid and BVH rebuilt for the adjoint")

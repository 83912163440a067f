"""SolverSemiImplicit penalty joints (``joint_kernels``): wrenches, drives, limits, springs, mimic
couplings, loop closures, joint-state recovery, and whole trajectories.

Reference numbers (``REF_WRENCH``, ``REF_TRAJ``, the angle-wrap torques) were measured on newton 1.8's
``SolverSemiImplicit`` (CPU) run as a black box on the same scenes: the wrenches from one step with
zero gravity and ``angular_damping=0`` (``f = m dv/dt``, ``tau = I dw/dt`` for cubes), the poses after
the quoted number of steps.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import warp as wp

import armillary
from armillary_solver_semi_implicit.joint_kernels import eval_joint_forces, update_joint_state

KE, KD, MKE, MKD = 1.0e4, 100.0, 100.0, 1.0  # the solver's default gains
X, Y, Z = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)


# ------------------------------------------------------------------------------------ quaternion helpers
def qmul(a, b):
    x1, y1, z1, w1 = a
    x2, y2, z2, w2 = b
    return np.array([w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2, w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
                     w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2, w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2])  # fmt: skip


def qinv(q):
    return np.array([-q[0], -q[1], -q[2], q[3]])


def qrot(q, v):
    u, w = np.asarray(q[:3], dtype=np.float64), float(q[3])
    v = np.asarray(v, dtype=np.float64)
    return v + 2.0 * np.cross(u, np.cross(u, v) + w * v)


def qaxis(axis, angle):
    a = np.asarray(axis, dtype=np.float64)
    a = a / np.linalg.norm(a)
    return np.r_[math.sin(angle / 2) * a, math.cos(angle / 2)]


def rotation_angle(q):
    q = np.asarray(q, dtype=np.float64)
    return 2.0 * math.atan2(np.linalg.norm(q[:3]), abs(q[3]))


def forces(model, bq, qd=None, control=None, ke=KE, kd=KD, mke=MKE, mkd=MKD):
    """``eval_joint_forces`` on the given body state: per-body wrenches (f, tau) as a float64 array."""
    qd = np.zeros((model.body_count, 6)) if qd is None else qd
    f = wp.zeros(model.body_count, dtype=wp.spatial_vector, device=model.device)
    eval_joint_forces(model, wp.array(np.asarray(bq, np.float32), dtype=wp.transform, device=model.device),
                      wp.array(np.asarray(qd, np.float32), dtype=wp.spatial_vector, device=model.device), control, f,
                      joint_attach_ke=ke, joint_attach_kd=kd, joint_mimic_ke=mke, joint_mimic_kd=mkd)  # fmt: skip
    return f.numpy().astype(np.float64)


# ------------------------------------------------------------------------------------ two-body scenes
QP = (0.09164329, 0.18328658, 0.27492985, 0.9393727)  # joint frame rotations (unit quaternions, xyzw)
QC = (-0.08671, 0.04336, 0.17342, 0.98007)


def two_body_model(nt, case):
    """Parent cube (0.2 m, 8 kg) and child cube joined by a joint with offset, rotated anchor frames."""
    b = nt.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    p = b.add_link(xform=wp.transform(wp.vec3(0.0, 0.0, 2.0), wp.quat_identity()))
    b.add_shape_box(p, hx=0.1, hy=0.1, hz=0.1)
    c = b.add_link(xform=wp.transform(wp.vec3(0.3, 0.1, 1.0), wp.quat_identity()))
    b.add_shape_box(c, hx=0.1, hy=0.1, hz=0.1)
    Xp = wp.transform(wp.vec3(0.2, -0.1, -0.5), wp.normalize(wp.quat(*QP)))
    Xc = wp.transform(wp.vec3(-0.1, 0.3, 0.4), wp.normalize(wp.quat(*QC)))
    cfg = nt.ModelBuilder.JointDofConfig
    drive = dict(target_ke=50.0, target_kd=5.0, target_q=0.3, target_qd=0.5)
    spring = dict(stiffness=20.0, damping=3.0, rest_q=0.25)
    limit = dict(limit_lower=-0.05, limit_upper=0.05, limit_ke=1000.0, limit_kd=10.0)
    X, Y, Z = (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)
    if case == "fixed":
        j = b.add_joint_fixed(p, c, parent_xform=Xp, child_xform=Xc)
    elif case == "revolute":
        j = b.add_joint_revolute(p, c, parent_xform=Xp, child_xform=Xc, axis=Z, **drive, **spring)
    elif case == "revolute_limit":
        j = b.add_joint_revolute(p, c, parent_xform=Xp, child_xform=Xc, axis=Z, target_ke=50.0, target_q=0.0, **limit)
    elif case == "prismatic":
        j = b.add_joint_prismatic(p, c, parent_xform=Xp, child_xform=Xc, axis=Z, **drive, **spring)
    elif case == "ball":
        j = b.add_joint_ball(p, c, parent_xform=Xp, child_xform=Xc, damping=3.0)
    elif case == "d6_33":
        d = dict(target_ke=50.0, target_kd=5.0, target_q=0.1, target_qd=0.5)
        j = b.add_joint_d6(p, c, linear_axes=[cfg(axis=a, **d) for a in (X, Y, Z)],
                           angular_axes=[cfg(axis=a, **d) for a in (Z, X, Y)], parent_xform=Xp, child_xform=Xc)
    elif case == "d6_12":
        d = dict(target_ke=50.0, target_kd=5.0, target_q=0.0, limit_lower=-0.3, limit_upper=0.3, limit_ke=1000.0,
                 limit_kd=10.0)
        j = b.add_joint_d6(p, c, linear_axes=[cfg(axis=X, **d)], angular_axes=[cfg(axis=a, **d) for a in (Z, X)],
                           parent_xform=Xp, child_xform=Xc)
    elif case == "mimic":
        j0 = b.add_joint_revolute(-1, p, parent_xform=wp.transform(wp.vec3(0.0, 0.0, 2.5), wp.quat(*QC)),
                                  child_xform=wp.transform(wp.vec3(0.0, 0.0, 0.5), wp.quat(*QC)), axis=X)
        j = b.add_joint_revolute(p, c, parent_xform=Xp, child_xform=Xc, axis=Z)
        b.set_joint_mimic(j, j0, coeffs=(0.25, -2.0))
        b.add_articulation([j0, j])
        return b.finalize(device="cpu")
    b.add_articulation([j])
    return b.finalize(device="cpu", skip_validation_joints=True)


def perturbed_state(model, i):
    """A deterministic state ``i``: bodies moved by ~5 cm, turned by ~0.3 rad, moving at ~0.5 m/s, rad/s."""
    bq = model.body_q.numpy().astype(np.float64)
    qd = np.zeros((len(bq), 6))
    for b in range(len(bq)):
        k = (i + 1) * (b + 1)
        bq[b, :3] += 0.05 * np.sin(1.3 * k + np.arange(3))
        axis = np.cos(0.7 * (i + 1) + b + np.array([0.0, 2.0, 4.0]))
        axis /= np.linalg.norm(axis)
        ang = 0.4 * np.sin(2.1 * (i + 1) + b)
        r = np.r_[np.sin(ang / 2) * axis, np.cos(ang / 2)]
        x1, y1, z1, w1 = r
        x2, y2, z2, w2 = bq[b, 3:]
        bq[b, 3:] = [w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2, w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
                     w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2, w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2]  # fmt: skip
        qd[b] = 0.5 * np.sin(0.9 * k + np.arange(6))
    return bq.astype(np.float32), qd.astype(np.float32)


CASE_CONTROL = {"ball": {"joint_f": [1.0, 2.0, 3.0]}, "d6_33": {"joint_f": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]}}


REF_WRENCH = {  # case -> [state 0, state 1] -> per-body (f, tau) [N, N m]; measured on newton 1.8
    'fixed': [
        [
            [-1585.375, 3358.842, -2103.367, -3503.720, 444.676, -1314.488],
            [1585.375, -3358.842, 2103.367, 6941.387, 1796.794, 2302.785],
        ],
        [
            [2058.526, 4850.942, 734.513, 498.287, -5978.619, -2029.160],
            [-2058.526, -4850.941, -734.513, 4005.176, 3939.204, 2876.790],
        ],
    ],
    'revolute': [
        [
            [-1585.375, 3358.842, -2103.367, -3082.745, 352.410, 1451.991],
            [1585.375, -3358.842, 2103.367, 6520.411, 1889.060, -463.693],
        ],
        [
            [2058.526, 4850.942, 734.513, 1557.847, -6005.031, 306.216],
            [-2058.526, -4850.941, -734.513, 2945.616, 3965.616, 541.414],
        ],
    ],
    'revolute_limit': [
        [
            [-1585.375, 3358.842, -2103.367, -3110.159, 405.446, 1273.873],
            [1585.375, -3358.842, 2103.367, 6547.826, 1836.024, -285.575],
        ],
        [
            [2058.526, 4850.942, 734.513, 1455.170, -5984.335, 178.603],
            [-2058.526, -4850.941, -734.513, 3048.292, 3944.920, 669.027],
        ],
    ],
    'prismatic': [
        [
            [-1129.544, 2477.007, 858.216, -3877.643, -718.968, -1603.420],
            [1129.544, -2477.007, -858.216, 5703.193, 1294.879, 2343.912],
        ],
        [
            [1276.795, 5008.507, -237.077, 725.039, -5540.905, -2140.617],
            [-1276.796, -5008.507, 237.077, 4294.895, 4287.685, 2700.199],
        ],
    ],
    'ball': [
        [
            [-1585.375, 3358.842, -2103.367, 1469.478, 1382.085, 1097.550],
            [1585.375, -3358.842, 2103.367, 1968.188, 859.385, -109.252],
        ],
        [
            [2058.526, 4850.942, 734.513, 2445.995, -1103.518, 432.306],
            [-2058.526, -4850.941, -734.513, 2057.467, -935.897, 415.324],
        ],
    ],
    'd6_33': [
        [
            [-12.396, 7.925, -27.256, -27.788, -10.681, -23.242],
            [12.396, -7.925, 27.256, 42.465, 32.890, 23.025],
        ],
        [
            [-3.718, 11.477, -3.267, -20.774, -34.760, -14.620],
            [3.718, -11.477, 3.267, 33.289, 38.477, 13.431],
        ],
    ],
    'd6_12': [
        [
            [-2026.059, 3048.505, -2127.945, 978.439, 2068.419, 1185.743],
            [2026.059, -3048.505, 2127.945, 2206.081, 553.451, -461.685],
        ],
        [
            [-189.059, 3703.880, 2356.871, 1897.896, -4864.698, -975.270],
            [189.059, -3703.880, -2356.871, 872.747, 5010.977, 967.642],
        ],
    ],
    'mimic': [
        [
            [-787.254, 4010.682, -1738.781, -4424.874, 3785.236, 1549.533],
            [1585.375, -3358.842, 2103.367, 6518.884, 1892.015, -473.615],
        ],
        [
            [327.054, 4914.778, 1471.294, 2755.958, -9575.554, 2002.389],
            [-2058.526, -4850.941, -734.513, 2945.634, 3965.613, 541.437],
        ],
    ],
}


@pytest.mark.parametrize("case", list(REF_WRENCH))
def test_wrench_matches_reference(case):
    """Every joint type's attachment, drive, limit, spring, damping, ``joint_f`` and mimic wrench,
    applied at the right points, equals the reference's on two off-axis perturbed states."""
    model = two_body_model(armillary, case)
    control = None
    if case in CASE_CONTROL:
        control = model.control()
        for name, value in CASE_CONTROL[case].items():
            getattr(control, name).assign(np.asarray(value, np.float32))
    for i, ref in enumerate(REF_WRENCH[case]):
        bq, qd = perturbed_state(model, i)
        got = forces(model, bq, qd, control)
        ref = np.asarray(ref)
        np.testing.assert_allclose(got, ref, rtol=0.0, atol=0.05 + 1.0e-5 * np.abs(ref).max(), err_msg=f"state {i}")


def test_forces_balance_between_the_two_bodies():
    """The pair of wrenches is equal and opposite up to the anchor gap: sum of forces zero, and the
    total moment about the world origin is ``(x_c - x_p) x f`` (the child's force acts at its anchor)."""
    for case in ("fixed", "revolute", "d6_33"):
        model = two_body_model(armillary, case)
        bq, qd = perturbed_state(model, 0)
        w = forces(model, bq, qd)
        np.testing.assert_allclose(w[0, :3] + w[1, :3], 0.0, atol=1e-3)
        Xp, Xc = model.joint_X_p.numpy()[0], model.joint_X_c.numpy()[0]
        x_p = bq[0, :3] + qrot(bq[0, 3:], Xp[:3])
        x_c = bq[1, :3] + qrot(bq[1, 3:], Xc[:3])
        moment = sum(np.cross(bq[b, :3], w[b, :3]) + w[b, 3:] for b in range(2))  # COM at the body origin
        np.testing.assert_allclose(moment, np.cross(x_c - x_p, w[1, :3]), atol=2e-3 * np.abs(w).max())


# ------------------------------------------------------------------------------------ single hinge at the COM
def hinge(kind="revolute", axis=Z, **kw):
    """One 8 kg cube (0.2 m) on a world joint whose anchor is its COM (joint frames identity)."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    c = b.add_link()
    b.add_shape_box(c, hx=0.1, hy=0.1, hz=0.1)
    if kind == "revolute":
        j = b.add_joint_revolute(-1, c, axis=axis, **kw)
    elif kind == "prismatic":
        j = b.add_joint_prismatic(-1, c, axis=axis, **kw)
    elif kind == "d6":
        j = b.add_joint_d6(-1, c, angular_axes=[armillary.ModelBuilder.JointDofConfig(axis=axis, **kw)])
    elif kind == "ball":
        j = b.add_joint_ball(-1, c, **kw)
    b.add_articulation([j])
    return b.finalize(device="cpu")


def turned(theta, axis=Z, sign=1.0):
    bq = np.zeros((1, 7))
    bq[0, 3:] = sign * qaxis(axis, theta)
    return bq


def spin(w, axis=Z):
    qd = np.zeros((1, 6))
    qd[0, 3:] = w * np.asarray(axis)
    return qd


def test_revolute_drive_targets_and_joint_f():
    """PD drive ``ke (target_q - q) + kd (target_qd - qd)`` about the world axis; ``None`` control uses
    the model's targets, a control its own; ``joint_f`` adds."""
    model = hinge(target_ke=50.0, target_kd=5.0, target_q=0.3, target_qd=0.5)
    w = forces(model, turned(-0.2), spin(1.5))
    np.testing.assert_allclose(w[0, 5], 50.0 * 0.5 + 5.0 * (0.5 - 1.5), atol=1e-3)
    np.testing.assert_allclose(w[0, :5], 0.0, atol=1e-3)
    control = model.control()
    control.joint_target_q.assign([-0.4])
    control.joint_target_qd.assign([0.0])
    control.joint_f.assign([2.0])
    w = forces(model, turned(-0.2), spin(1.5), control)
    np.testing.assert_allclose(w[0, 5], 50.0 * -0.2 + 5.0 * -1.5 + 2.0, atol=1e-3)


def test_limit_replaces_drive_and_spring_stays():
    """Outside ``[lower, upper]`` the limit spring-damper acts instead of the drive (as on the
    reference); the passive spring and damping act everywhere, with rest coordinates beyond the limits
    (preload)."""
    kw = dict(target_ke=50.0, target_kd=5.0, target_q=0.2, limit_lower=-0.5, limit_upper=0.5, limit_ke=1000.0,
              limit_kd=10.0, stiffness=20.0, damping=3.0, rest_q=1.0)  # fmt: skip
    model = hinge(**kw)
    inside = forces(model, turned(0.3), spin(0.4))[0, 5]
    np.testing.assert_allclose(inside, 50.0 * (0.2 - 0.3) - 5.0 * 0.4 + 20.0 * (1.0 - 0.3) - 3.0 * 0.4, atol=1e-3)
    above = forces(model, turned(0.7), spin(0.4))[0, 5]
    np.testing.assert_allclose(above, 1000.0 * (0.5 - 0.7) - 10.0 * 0.4 + 20.0 * (1.0 - 0.7) - 3.0 * 0.4, atol=1e-2)
    below = forces(model, turned(-0.6), spin(-0.4))[0, 5]
    np.testing.assert_allclose(below, 1000.0 * 0.1 + 10.0 * 0.4 + 20.0 * 1.6 + 3.0 * 0.4, atol=1e-2)
    model = hinge("prismatic", axis=X, **kw)
    bq = np.array([[0.7, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]])
    qd = np.array([[0.4, 0.0, 0.0, 0.0, 0.0, 0.0]])
    np.testing.assert_allclose(forces(model, bq, qd)[0, 0], above, atol=1e-2)


@pytest.mark.parametrize("kind", ["revolute", "d6"])
def test_angles_principal_for_springs_raw_for_drives(kind):
    """Springs see the principal angle in [-pi, pi) whatever the quaternion sign, and ``rest_q - q``
    is not wrapped; drives and limits of a single angular axis see ``2 atan2(s, w)`` of the relative
    quaternion as it is (continuous past pi while the quaternion evolves continuously, but sign
    dependent), as on the reference. Torques measured on newton 1.8 (drive ke 1, spring k 2, rest 4)."""
    spring = hinge(kind, stiffness=2.0, rest_q=4.0)
    drive = hinge(kind, target_ke=1.0, target_q=0.0)
    for theta, sign, ref_spring, ref_drive in (
        (3.1, 1.0, 2.0 * (4.0 - 3.1), -3.1),
        (4.0, 1.0, 2.0 * (4.0 - (4.0 - 2.0 * math.pi)), -4.0),  # reference: 12.566, -4.000
        (4.0, -1.0, 2.0 * (4.0 - (4.0 - 2.0 * math.pi)), 2.2832),  # reference: 12.566, 2.283
        (1.0, -1.0, 2.0 * (4.0 - 1.0), 5.2832),  # reference: 6.000, 5.283
        (-3.1, 1.0, 2.0 * (4.0 + 3.1), 3.1),
    ):
        np.testing.assert_allclose(forces(spring, turned(theta, sign=sign))[0, 5], ref_spring, atol=1e-3)
        np.testing.assert_allclose(forces(drive, turned(theta, sign=sign))[0, 5], ref_drive, atol=1e-3)


def test_ball_joint_f_and_damping_only():
    """BALL: no drive, limit or spring (stiffness is ignored); ``joint_f`` is a torque in the parent
    anchor frame and ``joint_damping`` damps the relative angular velocity per axis (reference)."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    c = b.add_link()
    b.add_shape_box(c, hx=0.1, hy=0.1, hz=0.1)
    q_p = qaxis((1.0, 1.0, 0.0), 0.8)
    j = b.add_joint_ball(-1, c, parent_xform=wp.transform(wp.vec3(0.0), wp.quat(*q_p)),
                         child_xform=wp.transform(wp.vec3(0.0), wp.quat(*q_p)), stiffness=50.0,
                         damping=3.0)  # fmt: skip
    b.add_articulation([j])
    model = b.finalize(device="cpu")
    control = model.control()
    control.joint_f.assign([1.0, 2.0, 3.0])
    bq = turned(1.0, axis=(0.3, -0.2, 0.9))
    w_world = np.array([0.3, -0.5, 0.8])
    qd = np.zeros((1, 6))
    qd[0, 3:] = w_world
    w = forces(model, bq, qd, control)
    expect = qrot(q_p, [1.0, 2.0, 3.0]) - 3.0 * w_world
    np.testing.assert_allclose(w[0, 3:], expect, atol=1e-3)
    np.testing.assert_allclose(w[0, :3], 0.0, atol=1e-3)


@pytest.mark.parametrize("case", ["d6_33", "d6_12", "revolute", "prismatic"])
def test_generalized_forces_do_the_right_virtual_work(case):
    """``joint_f`` maps to the wrench whose power on any relative motion equals ``joint_f . qd`` with
    ``qd`` the joint velocities ``update_joint_state`` recovers (non-orthogonal D6 axes included)."""
    model = two_body_model(armillary, case)
    bq, _ = perturbed_state(model, 1)
    # a consistent pose (no attachment error): the joint's own coordinates through eval_fk
    state = model.state()
    state.body_q.assign(bq.astype(np.float32))
    jq, jqd = wp.zeros_like(state.joint_q), wp.zeros_like(state.joint_qd)
    update_joint_state(model, state.body_q, state.body_qd, jq, jqd)
    rng = np.random.default_rng(3)
    jqd.assign(rng.normal(size=model.joint_dof_count).astype(np.float32))
    armillary.eval_fk(model, jq, jqd, state, joint_mask=wp.array([True], dtype=wp.bool, device="cpu"))
    bq, qd = state.body_q.numpy(), state.body_qd.numpy()
    f_gen = rng.normal(size=model.joint_dof_count)
    control = model.control()
    base = forces(model, bq, np.zeros_like(qd), control, kd=0.0)
    control.joint_f.assign(f_gen.astype(np.float32))
    w = forces(model, bq, np.zeros_like(qd), control, kd=0.0) - base
    # joint velocities of this twist, and the power of the wrenches on it (COM twists, wrenches at the COM)
    update_joint_state(model, state.body_q, state.body_qd, jq, jqd)
    power = float(np.sum(w * qd))
    np.testing.assert_allclose(power, float(f_gen @ jqd.numpy()), rtol=2e-4, atol=1e-4)


def test_mimic_follower_coupling_and_reference_reaction():
    """A follower is pulled to ``c0 + c1 q_ref`` with ``mimic_ke / mimic_kd``; the reference joint gets
    ``-c1`` times that generalized force (the gradient of the coupling energy, as on the reference)."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    l0 = b.add_link()
    b.add_shape_box(l0, hx=0.1, hy=0.1, hz=0.1)
    l1 = b.add_link()
    b.add_shape_box(l1, hx=0.1, hy=0.1, hz=0.1)
    j0 = b.add_joint_revolute(-1, l0, axis=Z)
    j1 = b.add_joint_revolute(l0, l1, axis=Z)
    b.add_articulation([j0, j1])
    b.set_joint_mimic(j1, j0, coeffs=(0.25, -2.0))
    model = b.finalize(device="cpu")
    ql, qf, wl, wf = 0.3, -0.1, 0.7, -0.2  # reference / follower angles and rates
    bq = np.zeros((2, 7))
    bq[0, 3:] = qaxis(Z, ql)
    bq[1, 3:] = qaxis(Z, ql + qf)
    qd = np.zeros((2, 6))
    qd[0, 5], qd[1, 5] = wl, wl + wf
    w = forces(model, bq, qd, mke=100.0, mkd=1.0, kd=0.0)
    g = 100.0 * (0.25 - 2.0 * ql - qf) + 1.0 * (-2.0 * wl - wf)
    np.testing.assert_allclose(w[1, 5], g, atol=1e-3)  # follower child
    np.testing.assert_allclose(w[0, 5], -g + 2.0 * g, atol=1e-3)  # follower's parent: -g, reference child: -c1 g
    np.testing.assert_allclose(w[:, :5], 0.0, atol=1e-3)


def test_disabled_free_distance_and_empty_models():
    """Disabled joints, FREE joints and DISTANCE joints inside their range get no penalty force; a model
    without joints launches nothing."""
    for case_kw in ({"enabled": False}, None):
        b = armillary.ModelBuilder(gravity=(0.0, 0.0, 0.0))
        c = b.add_link()
        b.add_shape_box(c, hx=0.1, hy=0.1, hz=0.1)
        if case_kw is None:
            j = b.add_joint_distance(-1, c, parent_xform=wp.transform(wp.vec3(1.0, 0.0, 0.0), wp.quat_identity()))
        else:
            j = b.add_joint_revolute(-1, c, axis=Z, target_ke=50.0, target_q=1.0, **case_kw)
        b.add_articulation([j])
        model = b.finalize(device="cpu")
        control = model.control()
        control.joint_f.fill_(3.0)
        np.testing.assert_array_equal(forces(model, turned(0.5) + [[0.3, 0, 0, 0, 0, 0, 0]], spin(1.0), control), 0.0)
    b = armillary.ModelBuilder()
    b.add_body()
    model = b.finalize(device="cpu")
    body_f = wp.full(1, wp.spatial_vector(1.0, 2.0, 3.0, 4.0, 5.0, 6.0), dtype=wp.spatial_vector, device="cpu")
    eval_joint_forces(model, model.body_q, model.body_qd, None, body_f, joint_attach_ke=KE, joint_attach_kd=KD,
                      joint_mimic_ke=MKE, joint_mimic_kd=MKD)  # fmt: skip  (one FREE joint: nothing added)
    np.testing.assert_array_equal(body_f.numpy(), [[1, 2, 3, 4, 5, 6]])
    empty = armillary.ModelBuilder().finalize(device="cpu")
    eval_joint_forces(empty, None, None, None, None, joint_attach_ke=KE, joint_attach_kd=KD, joint_mimic_ke=MKE,
                      joint_mimic_kd=MKD)  # fmt: skip
    update_joint_state(empty, None, None, None, None)


def test_bad_control_array_raises():
    model = hinge(target_ke=1.0)
    control = model.control()
    control.joint_target_q = wp.zeros(3, dtype=float, device="cpu")
    with pytest.raises(ValueError, match="control.joint_target_q has 3 entries, expected 1"):
        forces(model, turned(0.1), None, control)


# ------------------------------------------------------------------------------------ dynamics through the solver
def pendulum(kind, angle=0.6, **kw):
    """A 1 m pendulum (0.2 m cube, 8 kg) hanging from the world at (0, 0, 2), released ``angle`` [rad] off
    vertical (about +x: positive angles swing the bob towards +y)."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, -9.81))
    q0 = wp.quat_from_axis_angle(wp.vec3(1.0, 0.0, 0.0), angle)
    pos = wp.quat_rotate(q0, wp.vec3(0.0, 0.0, -1.0)) + wp.vec3(0.0, 0.0, 2.0)
    c = b.add_link(xform=wp.transform(pos, q0))
    b.add_shape_box(c, hx=0.1, hy=0.1, hz=0.1)
    Xp = wp.transform(wp.vec3(0.0, 0.0, 2.0), wp.quat_identity())
    Xc = wp.transform(wp.vec3(0.0, 0.0, 1.0), wp.quat_identity())
    cfg = armillary.ModelBuilder.JointDofConfig
    if kind == "revolute":
        j = b.add_joint_revolute(-1, c, parent_xform=Xp, child_xform=Xc, axis=X, **kw)
    elif kind == "ball":
        j = b.add_joint_ball(-1, c, parent_xform=Xp, child_xform=Xc, **kw)
    elif kind == "prismatic":  # slides along y; the joint holds the orientation
        j = b.add_joint_prismatic(-1, c, parent_xform=Xp, child_xform=Xc, axis=Y, **kw)
    elif kind == "fixed":
        j = b.add_joint_fixed(-1, c, parent_xform=Xp, child_xform=Xc)
    elif kind == "d6":  # slides along y, turns about x and y
        j = b.add_joint_d6(-1, c, linear_axes=[cfg(axis=Y, **kw)], angular_axes=[cfg(axis=X, **kw), cfg(axis=Y, **kw)],
                           parent_xform=Xp, child_xform=Xc)  # fmt: skip
    b.add_articulation([j])
    return b.finalize(device="cpu")


def mimic_pair():
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, -9.81))
    l0 = b.add_link(xform=wp.transform(wp.vec3(0.0, 0.0, 1.5), wp.quat_identity()))
    b.add_shape_box(l0, hx=0.05, hy=0.05, hz=0.25)
    l1 = b.add_link(xform=wp.transform(wp.vec3(0.0, 0.0, 0.9), wp.quat_identity()))
    b.add_shape_box(l1, hx=0.05, hy=0.05, hz=0.25)
    j0 = b.add_joint_revolute(-1, l0, parent_xform=wp.transform(wp.vec3(0.0, 0.0, 2.0), wp.quat_identity()),
                              child_xform=wp.transform(wp.vec3(0.0, 0.0, 0.5), wp.quat_identity()), axis=X,
                              target_ke=200.0, target_kd=20.0, target_q=0.5)  # fmt: skip
    j1 = b.add_joint_revolute(l0, l1, parent_xform=wp.transform(wp.vec3(0.0, 0.0, -0.25), wp.quat_identity()),
                              child_xform=wp.transform(wp.vec3(0.0, 0.0, 0.35), wp.quat_identity()),
                              axis=X)  # fmt: skip
    b.add_articulation([j0, j1])
    b.set_joint_mimic(j1, j0, coeffs=(0.1, -1.5))
    return b.finalize(device="cpu")


def four_bar(target=0.5):
    """Parallelogram four-bar: two 0.5 m cranks from the world and a coupler pinned to both; the second
    pin (``joints[3]``) closes the loop (in no articulation) and carries a drive to ``target``."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, -9.81))
    L = 0.5
    a = b.add_link(xform=wp.transform(wp.vec3(0.0, 0.0, 2.0 - L / 2), wp.quat_identity()))
    b.add_shape_box(a, hx=0.03, hy=0.03, hz=L / 2)
    c = b.add_link(xform=wp.transform(wp.vec3(0.5, 0.0, 2.0 - L / 2), wp.quat_identity()))
    b.add_shape_box(c, hx=0.03, hy=0.03, hz=L / 2)
    cp = b.add_link(xform=wp.transform(wp.vec3(0.25, 0.0, 2.0 - L), wp.quat_identity()))
    b.add_shape_box(cp, hx=0.25, hy=0.03, hz=0.03)

    def tf(x, z):
        return wp.transform(wp.vec3(x, 0.0, z), wp.quat_identity())

    ja = b.add_joint_revolute(-1, a, parent_xform=tf(0.0, 2.0), child_xform=tf(0.0, L / 2), axis=Y)
    jc = b.add_joint_revolute(a, cp, parent_xform=tf(0.0, -L / 2), child_xform=tf(-0.25, 0.0), axis=Y)
    jb = b.add_joint_revolute(-1, c, parent_xform=tf(0.5, 2.0), child_xform=tf(0.0, L / 2), axis=Y)
    b.add_joint_revolute(c, cp, parent_xform=tf(0.0, -L / 2), child_xform=tf(0.25, 0.0), axis=Y, target_ke=50.0,
                         target_kd=5.0, target_q=target)  # fmt: skip
    b.add_articulation([ja, jc])
    b.add_articulation([jb])
    return b.finalize(device="cpu")


def simulate(model, steps, dt, every=None, state=None, **solver_kw):
    """Step ``SolverSemiImplicit``; return the final state and the body poses every ``every`` steps."""
    solver = armillary.solvers.SolverSemiImplicit(model, **solver_kw)
    s0 = model.state() if state is None else state
    s1 = model.state()
    control = model.control()
    poses = []
    for i in range(steps):
        solver.step(s0, s1, control, None, dt)
        s0, s1 = s1, s0
        if every and (i + 1) % every == 0:
            poses.append(s0.body_q.numpy().copy())
    return s0, poses


def anchor_errors(model, poses, j=0):
    """Anchor distance [m] and rotation-axis / frame misalignment [rad] of world joint ``j`` per pose."""
    Xp, Xc = model.joint_X_p.numpy()[j], model.joint_X_c.numpy()[j]
    c = model.joint_child.numpy()[j]
    lin, ang = [], []
    for bq in poses:
        x_c = bq[c, :3] + qrot(bq[c, 3:], Xc[:3])
        rel = qmul(qinv(Xp[3:]), qmul(bq[c, 3:], Xc[3:]))
        lin.append(np.linalg.norm(x_c - Xp[:3]))
        ang.append(rotation_angle(rel))
    return np.array(lin), np.array(ang)


# The pendulum's peak joint load is the tension at the bottom, T = m g (3 - 2 cos 0.6) = 106 N (8 kg):
# a penalty joint stretches by T / joint_attach_ke = 10.6 mm. Measured at dt 1e-3 over 2 s (same on
# the reference): 10.77 mm for REVOLUTE and BALL; 12.3 mm for a FIXED one released on the joint (static
# sag m g / ke = 7.8 mm, overshooting). A FIXED joint holding 8 kg at a 1 m lever is close to the
# explicit stability limit at dt 1e-3 (lever-arm damping kd r^2 / I ~ 1900 1/s): pushed hard it
# diverges, on the reference too; use a smaller dt or softer gains for such scenes.
JOINT_ERROR_BOUND = 0.0125  # [m] at the default joint_attach_ke = 1e4, dt = 1e-3


@pytest.mark.parametrize("kind", ["revolute", "ball", "fixed"])
def test_pendulum_joint_error_bound(kind):
    model = pendulum(kind)
    state = model.state()
    if kind == "fixed":  # start on the joint: a fixed pendulum hangs straight and sags under gravity
        armillary.eval_fk(model, state.joint_q, state.joint_qd, state)
    _, poses = simulate(model, 2000, 1.0e-3, every=10, state=state)
    lin, ang = anchor_errors(model, poses)
    assert lin.max() < JOINT_ERROR_BOUND, lin.max()
    assert lin.max() > 0.5 * JOINT_ERROR_BOUND  # the bound is tight: a penalty joint stretches
    if kind == "revolute":  # the hinge axis stays aligned (sine of the swing below 1e-3)
        a = np.array(X)
        for bq in poses:
            assert np.linalg.norm(np.cross(a, qrot(bq[0, 3:], a))) < 1e-3
    if kind == "fixed":
        assert ang.max() < 2e-3
    z = np.array([bq[0, 2] for bq in poses])
    if kind != "fixed":  # it swings: from 0.6 rad through the bottom and back
        assert z.min() < 1.0 + JOINT_ERROR_BOUND and z.max() > 2.0 - math.cos(0.6) - 0.02


# Poses after the given steps, measured on newton 1.8 (same scene, same solver defaults).
REF_TRAJ = {
    "pendulum_revolute": (2000, 1.0e-3, [[0.0, 0.556203, 1.16095, 0.28856, 0.0, 0.0, 0.957462]]),
    "pendulum_prismatic_spring": (2000, 1.0e-3, [[0.0, 0.386944, 0.992152, 0.000477, 0.0, 0.0, 1.0]]),
    "pendulum_d6_limits_drive": (5000, 1.0e-4, [[-0.085335, 0.041846, 0.994963, 0.005692, 0.042386, 0.000289,
                                                  0.999085]]),  # fmt: skip
    "pendulum_revolute_drive_limits": (5000, 1.0e-4, [[0.0, -0.165588, 0.981761, -0.084469, 0.0, 0.0, 0.996426]]),
    "mimic_pair": (2000, 1.0e-3, [[0.0, 0.189809, 1.527561, 0.19308, 0.0, 0.0, 0.981183],
                                  [0.0, 0.259403, 0.94227, -0.036287, 0.0, 0.0, 0.999342]]),  # fmt: skip
    "four_bar_loop_drive": (2000, 1.0e-3, [[0.089012, 0.0, 1.764926, 0.0, -0.180614, 0.0, 0.983554],
                                           [0.589001, 0.0, 1.762539, 0.0, -0.181408, 0.0, 0.983408],
                                           [0.428015, 0.0, 1.529231, 0.0, 0.004774, 0.0, 0.999989]]),  # fmt: skip
}
REF_SCENES = {
    "pendulum_revolute": lambda: pendulum("revolute"),
    "pendulum_prismatic_spring": lambda: pendulum("prismatic", stiffness=50.0, damping=2.0, rest_q=0.3),
    "pendulum_d6_limits_drive": lambda: pendulum("d6", limit_lower=-0.3, limit_upper=0.3, limit_ke=2000.0,
                                                 limit_kd=20.0, target_ke=100.0, target_kd=5.0, target_q=0.1),
    "pendulum_revolute_drive_limits": lambda: pendulum("revolute", target_ke=300.0, target_kd=10.0, target_q=-0.4,
                                                       limit_lower=-0.5, limit_upper=0.7),
    "mimic_pair": mimic_pair,
    "four_bar_loop_drive": four_bar,
}


@pytest.mark.parametrize("name", list(REF_TRAJ))
def test_trajectory_matches_reference(name):
    """Same algorithm as the reference: thousands of steps agree to float32 round-off (observed <= 6e-6)."""
    steps, dt, ref = REF_TRAJ[name]
    state, _ = simulate(REF_SCENES[name](), steps, dt)
    got = state.body_q.numpy()
    ref = np.asarray(ref)
    # The prismatic pendulum holds its orientation with the full angular attachment, where the reference
    # computes the rotation angle with float32 acos: ~7e-4 rad of noise near zero error (x ke = several
    # N m of torque noise), which moves its slider by 4e-4 m over 2 s. Elsewhere the poses agree to 1e-6.
    tol = 1e-3 if name == "pendulum_prismatic_spring" else 5e-5
    np.testing.assert_allclose(got[:, :3], ref[:, :3], atol=tol)
    np.testing.assert_allclose(np.abs(np.sum(got[:, 3:] * ref[:, 3:], axis=1)), 1.0, atol=tol / 10)


def test_prismatic_spring_period_and_rest():
    """A free slider (no gravity along the axis) on a passive spring oscillates about ``rest_q`` with
    the period ``2 pi sqrt(m / k)`` (symplectic Euler: O(dt^2) period error)."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    c = b.add_link()
    b.add_shape_box(c, hx=0.1, hy=0.1, hz=0.1)  # 8 kg
    j = b.add_joint_prismatic(-1, c, axis=X, stiffness=200.0, rest_q=0.2)
    b.add_articulation([j])
    model = b.finalize(device="cpu")
    period = 2.0 * math.pi * math.sqrt(8.0 / 200.0)
    dt = 1.0e-3
    solver = armillary.solvers.SolverSemiImplicit(model)
    s0, s1 = model.state(), model.state()
    xs = []
    for _ in range(int(1.6 * period / dt)):
        solver.step(s0, s1, None, None, dt)
        s0, s1 = s1, s0
        xs.append(float(s0.joint_q.numpy()[0]))  # joint_q is recovered after each step
    xs = np.array(xs)
    assert abs(xs.max() - 0.4) < 2e-3 and abs(xs.min()) < 2e-3  # 0 .. 2 rest
    up = np.nonzero((xs[:-1] < 0.2) & (xs[1:] >= 0.2))[0]
    down = np.nonzero((xs[:-1] > 0.2) & (xs[1:] <= 0.2))[0]
    assert len(down) >= 1 and len(up) >= 1
    np.testing.assert_allclose(abs(down[0] - up[0]) * dt, period / 2, atol=2 * dt)


def test_revolute_drive_holds_the_gravity_equilibrium():
    """A PD drive holds a 1 m pendulum where ``ke (target - q) = m g l sin q``: released there, it stays.

    (Drive torques act on the bob's small inertia about its COM (0.053 kg m^2): at dt 1e-3 this drive
    with ``target_kd`` = 5 diverges within 0.3 s, on the reference too (measured); dt 2e-4 is stable.)"""
    ke, target, m, g = 300.0, -0.4, 8.0, 9.81
    f = lambda q: ke * (target - q) - m * g * math.sin(q)  # noqa: E731  (decreasing in q)
    lo, hi = target, 0.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if f(mid) > 0.0 else (lo, mid)
    q_eq = 0.5 * (lo + hi)
    model = pendulum("revolute", angle=q_eq, target_ke=ke, target_kd=5.0, target_q=target)
    np.testing.assert_allclose(model.body_mass.numpy(), [m])
    solver = armillary.solvers.SolverSemiImplicit(model)
    s0, s1 = model.state(), model.state()
    qs = []
    for _ in range(2500):
        solver.step(s0, s1, None, None, 2.0e-4)
        s0, s1 = s1, s0
        qs.append(float(s0.joint_q.numpy()[0]))
    np.testing.assert_allclose(qs, q_eq, atol=3e-3)  # the joint's 8 mm sag perturbs it slightly
    np.testing.assert_allclose(np.mean(qs[-1000:]), q_eq, atol=2.5e-3)  # measured: 1.7e-3 (sag, lever)


def test_loop_closing_joint_keeps_drive_and_closes_the_loop():
    """The four-bar's loop-closing pin is in no articulation: it holds the coupler (penalty error of a
    few mm) and its drive moves the mechanism; ``joint_q`` of the loop joint is recovered too."""
    model = four_bar(target=0.5)
    state, poses = simulate(model, 3000, 1.0e-3, every=50)
    # loop pin: the coupler's right end stays on the right crank's tip
    Xp, Xc = model.joint_X_p.numpy()[3], model.joint_X_c.numpy()[3]
    for bq in poses:
        tip = bq[1, :3] + qrot(bq[1, 3:], Xp[:3])
        end = bq[2, :3] + qrot(bq[2, 3:], Xc[:3])
        assert np.linalg.norm(tip - end) < 1e-2  # measured: up to 5.3 mm
    crank = [2.0 * math.atan2(bq[0, 4], bq[0, 6]) for bq in poses]
    assert min(crank) < -0.15  # the drive moved the cranks (rest: hanging straight down)
    jq = state.joint_q.numpy()
    q_loop = jq[model.joint_q_start.numpy()[3]]
    # the loop joint's coordinate is the coupler's angle relative to the right crank
    rel = qmul(qinv(state.body_q.numpy()[1, 3:]), state.body_q.numpy()[2, 3:])
    np.testing.assert_allclose(q_loop, 2.0 * math.atan2(rel[1], rel[3]), atol=1e-5)
    assert abs(q_loop) > 0.1


def test_without_the_loop_drive_the_mechanism_hangs_still():
    state, _ = simulate(four_bar(target=0.0), 500, 1.0e-3)
    np.testing.assert_allclose(state.body_qd.numpy(), 0.0, atol=1e-3)


# ------------------------------------------------------------------------------------ joint state recovery
def all_joints_model():
    """One articulation per joint type (PRISMATIC, REVOLUTE, BALL, FIXED, FREE, DISTANCE, D6 with 1-3
    angular and linear axes, non-orthogonal D6 linear axes) hanging from moving parent bodies."""
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, 0.0))
    cfg = armillary.ModelBuilder.JointDofConfig
    rng = np.random.default_rng(7)

    def frame():
        q = rng.normal(size=4)
        return wp.transform(wp.vec3(*rng.normal(0.0, 0.3, 3)), wp.quat(*(q / np.linalg.norm(q))))

    kinds = ["prismatic", "revolute", "ball", "fixed", "free", "distance", "d6_01", "d6_02", "d6_03", "d6_30",
             "d6_12", "d6_21", "d6_skew"]  # fmt: skip
    for i, kind in enumerate(kinds):
        root = b.add_link(xform=wp.transform(wp.vec3(2.0 * i, 0.0, 0.0), wp.quat_identity()))
        b.add_shape_box(root, hx=0.1, hy=0.1, hz=0.1)
        child = b.add_link(com=wp.vec3(0.05, -0.02, 0.03))
        b.add_shape_sphere(child, radius=0.1)
        j0 = b.add_joint_free(root)
        kw = dict(parent_xform=frame(), child_xform=frame())
        if kind == "prismatic":
            j = b.add_joint_prismatic(root, child, axis=(0.6, 0.0, 0.8), **kw)
        elif kind == "revolute":
            j = b.add_joint_revolute(root, child, axis=(0.0, 0.6, 0.8), **kw)
        elif kind == "ball":
            j = b.add_joint_ball(root, child, **kw)
        elif kind == "fixed":
            j = b.add_joint_fixed(root, child, **kw)
        elif kind == "free":
            j = b.add_joint_free(child, parent=root, **kw)
        elif kind == "distance":
            j = b.add_joint_distance(root, child, **kw)
        else:
            if kind == "d6_skew":
                lin = [cfg(axis=(1.0, 0.0, 0.0)), cfg(axis=(0.6, 0.8, 0.0))]
                ang = [cfg(axis=Z)]
            else:
                n_lin, n_ang = int(kind[3]), int(kind[4])
                lin = [cfg(axis=a) for a in (X, Y, Z)[:n_lin]]
                ang = [cfg(axis=a) for a in (Y, Z, X)[:n_ang]]
            j = b.add_joint_d6(root, child, linear_axes=lin, angular_axes=ang, **kw)
        b.add_articulation([j0, j])
    return b.finalize(device="cpu"), kinds


def test_update_joint_state_round_trip_with_eval_fk():
    """Random coordinates (angles in (-pi, pi), the middle D6 angle in (-pi/2, pi/2)) and velocities
    through ``eval_fk`` come back from ``update_joint_state`` (quaternions up to sign)."""
    model, kinds = all_joints_model()
    rng = np.random.default_rng(11)
    jt = model.joint_type.numpy()
    qs, ds = model.joint_q_start.numpy(), model.joint_qd_start.numpy()
    dims = model.joint_dof_dim.numpy()
    q = np.zeros(model.joint_coord_count)
    qd = rng.normal(0.0, 1.0, model.joint_dof_count)
    for j in range(model.joint_count):
        t = int(jt[j])
        if t in (int(armillary.JointType.FREE), int(armillary.JointType.DISTANCE), int(armillary.JointType.BALL)):
            quat = rng.normal(size=4)
            quat /= np.linalg.norm(quat)
            if t == int(armillary.JointType.BALL):
                q[qs[j]:qs[j] + 4] = quat
            else:
                q[qs[j]:qs[j] + 3] = rng.normal(0.0, 0.5, 3)
                q[qs[j] + 3:qs[j] + 7] = quat
        else:
            n = qs[j + 1] - qs[j]
            n_lin = int(dims[j, 0]) if t == int(armillary.JointType.D6) else (1 if t == 0 else 0)
            vals = rng.uniform(-3.0, 3.0, n)
            vals[:n_lin] = rng.uniform(-0.5, 0.5, n_lin)
            if t == int(armillary.JointType.D6) and n - n_lin == 3:
                vals[n_lin + 1] = rng.uniform(-1.4, 1.4)
            q[qs[j]:qs[j + 1]] = vals
    state = model.state()
    jq = wp.array(q.astype(np.float32), dtype=float, device="cpu")
    jqd = wp.array(qd.astype(np.float32), dtype=float, device="cpu")
    armillary.eval_fk(model, jq, jqd, state)
    out_q, out_qd = wp.zeros_like(jq), wp.zeros_like(jqd)
    update_joint_state(model, state.body_q, state.body_qd, out_q, out_qd)
    got_q, got_qd = out_q.numpy(), out_qd.numpy()
    for j in range(model.joint_count):
        a, b_ = qs[j], qs[j + 1]
        t = int(jt[j])
        if t == int(armillary.JointType.BALL):
            err = min(np.abs(got_q[a:b_] - q[a:b_]).max(), np.abs(got_q[a:b_] + q[a:b_]).max())
        elif t in (int(armillary.JointType.FREE), int(armillary.JointType.DISTANCE)):
            err = max(np.abs(got_q[a:a + 3] - q[a:a + 3]).max(),
                      min(np.abs(got_q[a + 3:b_] - q[a + 3:b_]).max(), np.abs(got_q[a + 3:b_] + q[a + 3:b_]).max()))
        else:
            err = np.abs(got_q[a:b_] - q[a:b_]).max() if b_ > a else 0.0
            assert np.all(got_q[a:b_] >= -math.pi) and np.all(got_q[a:b_] < math.pi)
        assert err < 5e-5, (j, t, got_q[a:b_], q[a:b_])
        np.testing.assert_allclose(got_qd[ds[j]:ds[j + 1]], qd[ds[j]:ds[j + 1]], atol=2e-4, err_msg=f"joint {j}")


def test_update_joint_state_uses_principal_angles():
    """A hinge turned 4 rad reads ``4 - 2 pi`` whatever the quaternion sign (no winding)."""
    model = hinge()
    for sign in (1.0, -1.0):
        jq, jqd = wp.zeros(1, dtype=float), wp.zeros(1, dtype=float)
        update_joint_state(model, wp.array(turned(4.0, sign=sign).astype(np.float32), dtype=wp.transform),
                           wp.array(spin(0.7).astype(np.float32), dtype=wp.spatial_vector), jq, jqd)  # fmt: skip
        np.testing.assert_allclose(jq.numpy(), [4.0 - 2.0 * math.pi], atol=1e-5)
        np.testing.assert_allclose(jqd.numpy(), [0.7], atol=1e-6)


def test_step_writes_joint_state_of_every_joint():
    """After a step ``state_out.joint_q`` / ``joint_qd`` hold the recovered coordinates of every joint,
    loop-closing joints included (``eval_ik`` walks articulations only)."""
    model = four_bar(target=0.5)
    state, _ = simulate(model, 200, 1.0e-3)
    jq, jqd = wp.zeros_like(state.joint_q), wp.zeros_like(state.joint_qd)
    update_joint_state(model, state.body_q, state.body_qd, jq, jqd)
    np.testing.assert_array_equal(state.joint_q.numpy(), jq.numpy())
    np.testing.assert_array_equal(state.joint_qd.numpy(), jqd.numpy())
    assert np.all(np.abs(jq.numpy()) > 1e-3)

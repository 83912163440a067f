"""Random articulated trees of mixed joint types for the property tests."""

from __future__ import annotations

import numpy as np
import warp as wp

import armillary

JT = armillary.JointType
TYPES = ("revolute", "prismatic", "ball", "fixed", "free", "distance", "d6")


def unit_quat(rng) -> np.ndarray:
    q = rng.normal(size=4)
    return q / np.linalg.norm(q)


def rand_tf(rng, scale=0.5):
    return wp.transform(wp.vec3(*rng.uniform(-scale, scale, 3)), wp.quat(*unit_quat(rng)))


def rotation(rng) -> np.ndarray:
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    return q * np.sign(np.diag(r))


def build_tree(seed: int, n_joints: int = 6, types=TYPES, root: str | None = None, worlds: int = 1,
               kinematic_root: bool = False, device="cpu"):  # fmt: skip
    """A random tree (each joint's parent is a random earlier body) as one articulation per world."""
    rng = np.random.default_rng(seed)
    b = armillary.ModelBuilder(gravity=(0.3, -0.5, -9.81))
    Cfg = armillary.ModelBuilder.JointDofConfig
    bodies, joints = [], []
    for i in range(n_joints):
        R = rotation(rng)
        inertia = R @ np.diag(rng.uniform(0.05, 0.1, 3)) @ R.T
        body = b.add_link(
            mass=float(rng.uniform(0.5, 2.0)), com=tuple(rng.uniform(-0.2, 0.2, 3)),
            inertia=tuple(inertia.reshape(-1)), is_kinematic=kinematic_root and i == 0,
        )  # fmt: skip
        if i == 0:
            parent = -1
            jt = root if root is not None else str(rng.choice(types))
        else:
            parent = int(rng.choice(bodies))
            jt = str(rng.choice(types))
        xp, xc = rand_tf(rng), rand_tf(rng)
        ax = rng.normal(size=3)
        ax = tuple(ax / np.linalg.norm(ax))
        if jt == "revolute":
            j = b.add_joint_revolute(parent, body, axis=ax, parent_xform=xp, child_xform=xc)
        elif jt == "prismatic":
            j = b.add_joint_prismatic(parent, body, axis=ax, parent_xform=xp, child_xform=xc)
        elif jt == "ball":
            j = b.add_joint_ball(parent, body, parent_xform=xp, child_xform=xc)
        elif jt == "fixed":
            j = b.add_joint_fixed(parent, body, parent_xform=xp, child_xform=xc)
        elif jt == "free":
            j = b.add_joint_free(body, parent=parent, parent_xform=xp, child_xform=xc)
        elif jt == "distance":
            j = b.add_joint_distance(parent, body, parent_xform=xp, child_xform=xc)
        else:
            n_lin = int(rng.integers(0, 4))
            n_ang = int(rng.integers(0 if n_lin else 1, 4))
            Rl, Ra = rotation(rng), rotation(rng)
            j = b.add_joint_d6(
                parent, body, linear_axes=[Cfg(axis=tuple(Rl[:, k])) for k in range(n_lin)],
                angular_axes=[Cfg(axis=tuple(Ra[:, k])) for k in range(n_ang)], parent_xform=xp, child_xform=xc,
            )  # fmt: skip
        bodies.append(body)
        joints.append(j)
    b.add_articulation(joints)
    if worlds > 1:
        scene = armillary.ModelBuilder(gravity=(0.3, -0.5, -9.81))
        scene.replicate(b, worlds)
        b = scene
    return b.finalize(device=device)


def random_coordinates(model, seed: int, flip_quat_signs: bool = True):
    """Joint coordinates inside the IK's principal ranges, and velocities.

    Revolute angles in (-pi, pi); D6 angles in (-pi, pi) except the middle one of three
    (in (-1.4, 1.4), away from gimbal lock); quaternions uniform with random sign.
    """
    rng = np.random.default_rng(seed)
    q = model.joint_q.numpy().astype(np.float64)
    qd = rng.uniform(-1.0, 1.0, model.joint_dof_count)
    jt = model.joint_type.numpy()
    qs = model.joint_q_start.numpy()
    dim = model.joint_dof_dim.numpy()
    for j in range(model.joint_count):
        a, e = qs[j], qs[j + 1]
        t = jt[j]
        if t == JT.BALL:
            q[a:e] = unit_quat(rng) * (rng.choice([-1.0, 1.0]) if flip_quat_signs else 1.0)
        elif t in (JT.FREE, JT.DISTANCE):
            q[a : a + 3] = rng.uniform(-0.5, 0.5, 3)
            q[a + 3 : a + 7] = unit_quat(rng) * (rng.choice([-1.0, 1.0]) if flip_quat_signs else 1.0)
        elif t == JT.REVOLUTE:
            q[a] = rng.uniform(-3.1, 3.1)
        elif t == JT.PRISMATIC:
            q[a] = rng.uniform(-1.0, 1.0)
        elif t == JT.D6:
            n_lin, n_ang = dim[j]
            q[a : a + n_lin] = rng.uniform(-1.0, 1.0, n_lin)
            ang = rng.uniform(-3.1, 3.1, n_ang)
            if n_ang == 3:
                ang[1] = rng.uniform(-1.4, 1.4)
            q[a + n_lin : e] = ang
    return q.astype(np.float32), qd.astype(np.float32)


def compare_coordinates(model, q_a, q_b, atol=1e-4):
    """Max coordinate difference, with quaternions compared up to sign and angles modulo 2 pi."""
    jt = model.joint_type.numpy()
    qs = model.joint_q_start.numpy()
    worst = 0.0
    for j in range(model.joint_count):
        a, e = qs[j], qs[j + 1]
        t = jt[j]
        if t in (JT.BALL, JT.FREE, JT.DISTANCE):
            qa, qb = q_a[e - 4 : e], q_b[e - 4 : e]
            if not (np.linalg.norm(qa) > 0 and np.linalg.norm(qb) > 0):
                worst = max(worst, float(np.abs(qa - qb).max()))
                continue
            qa, qb = qa / np.linalg.norm(qa), qb / np.linalg.norm(qb)
            worst = max(worst, float(min(np.abs(qa - qb).max(), np.abs(qa + qb).max())))
            worst = max(worst, float(np.abs(q_a[a : e - 4] - q_b[a : e - 4]).max(initial=0.0)))
        elif e > a:
            worst = max(worst, float(np.abs(q_a[a:e] - q_b[a:e]).max()))
    return worst

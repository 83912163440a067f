"""Build an armillary :class:`~armillary.ModelBuilder` from a *compiled* ``mujoco.MjModel``.

Used by the oracle tests (and by anyone who needs a reference model without the MJCF
importer): the compiled fields are unambiguous, so the result reproduces MuJoCo's
kinematics and rigid-body dynamics exactly.

Mapping:

* every MuJoCo body becomes a link labeled with its MuJoCo name (unnamed: ``body_<id>``),
  with ``body_mass``, ``body_ipos`` as COM and ``R(body_iquat) diag(body_inertia) R^T`` as
  inertia; each top-level body (child of the world) with its subtree is one articulation;
* a body without joint (or a mocap body) is welded to its parent by a FIXED joint;
* a free joint becomes a FREE joint from the world with identity anchors (coordinates =
  body pose);
* hinge / slide / ball joints become REVOLUTE / PRISMATIC / BALL joints whose anchors sit
  at ``jnt_pos`` in the parent-side frame and the child frame; several joints in one body
  are chained in XML order through massless intermediate links (labeled
  ``<body>/<joint>``) so each keeps its own anchor, exactly as MuJoCo composes them;
* joint coordinates are measured from the XML pose: ``q = qpos - qpos0`` for hinge/slide
  (MuJoCo's ``qpos`` includes the joint ``ref``);
* ``dof_armature`` becomes the joint armature, ``opt.gravity`` the builder gravity.

Our DOF order equals MuJoCo's. :class:`MjConversion` converts states (quaternions wxyz ->
xyzw, free-joint velocity (origin velocity, body-frame angular velocity) -> (COM velocity,
world angular velocity), ball angular velocity child frame -> parent frame) and gives the
velocity map ``T`` (``qd_ours = T qvel``) used to compare generalized forces and mass matrices:
``M_mj = T^T M T`` and ``bias_mj = T^T (C qd + g + M dT/dt qvel)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

MJ_FREE, MJ_BALL, MJ_SLIDE, MJ_HINGE = 0, 1, 2, 3


def _xyzw(q_wxyz) -> tuple:
    w, x, y, z = (float(v) for v in q_wxyz)
    return (x, y, z, w)


def _quat_to_mat(q_wxyz) -> np.ndarray:
    w, x, y, z = (float(v) for v in q_wxyz)
    n = w * w + x * x + y * y + z * z
    s = 2.0 / n if n > 0 else 0.0
    return np.array(
        [
            [1 - s * (y * y + z * z), s * (x * y - z * w), s * (x * z + y * w)],
            [s * (x * y + z * w), 1 - s * (x * x + z * z), s * (y * z - x * w)],
            [s * (x * z - y * w), s * (y * z + x * w), 1 - s * (x * x + y * y)],
        ]
    )


def _skew(v) -> np.ndarray:
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


@dataclass
class MjConversion:
    """A converted model: the builder plus the maps between MuJoCo and armillary indices."""

    builder: object
    mj: object
    body_map: dict = field(default_factory=dict)
    """MuJoCo body id -> armillary body index (world body 0 is not mapped)."""
    joint_map: dict = field(default_factory=dict)
    """MuJoCo joint id -> armillary joint index."""
    body_names: list = field(default_factory=list)
    """MuJoCo body names by MuJoCo body id."""

    # ------------------------------------------------------------------ state conversion
    def joint_q(self, qpos: np.ndarray) -> np.ndarray:
        """armillary ``joint_q`` from MuJoCo ``qpos``."""
        mj, b = self.mj, self.builder
        out = np.asarray(b.joint_q, dtype=np.float64).copy()
        for jm, ja in self.joint_map.items():
            t = int(mj.jnt_type[jm])
            qa = b.joint_q_start[ja]
            qm = int(mj.jnt_qposadr[jm])
            if t == MJ_FREE:
                out[qa : qa + 3] = qpos[qm : qm + 3]
                out[qa + 3 : qa + 7] = _xyzw(qpos[qm + 3 : qm + 7])
            elif t == MJ_BALL:
                out[qa : qa + 4] = _xyzw(qpos[qm : qm + 4])
            else:
                out[qa] = qpos[qm] - mj.qpos0[qm]
        return out

    def velocity_map(self, qpos: np.ndarray) -> np.ndarray:
        """``T`` (nv x nv) with ``joint_qd = T @ qvel`` at configuration ``qpos``."""
        mj = self.mj
        T = np.eye(mj.nv)
        for jm in range(mj.njnt):
            t = int(mj.jnt_type[jm])
            d = int(mj.jnt_dofadr[jm])
            qm = int(mj.jnt_qposadr[jm])
            if t == MJ_FREE:
                R = _quat_to_mat(qpos[qm + 3 : qm + 7])
                r_W = R @ mj.body_ipos[mj.jnt_bodyid[jm]]
                T[d + 3 : d + 6, d + 3 : d + 6] = R
                T[d : d + 3, d + 3 : d + 6] = -_skew(r_W) @ R  # v_com = v_o + (R w_b) x r_W
            elif t == MJ_BALL:
                T[d : d + 3, d : d + 3] = _quat_to_mat(qpos[qm : qm + 4])
        return T

    def joint_qd(self, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
        """armillary ``joint_qd`` from MuJoCo ``qpos``, ``qvel``."""
        return self.velocity_map(qpos) @ np.asarray(qvel, dtype=np.float64)

    def velocity_map_rate(self, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
        """``dT/dt @ qvel`` at constant ``qvel``: the acceleration our coordinates see when
        MuJoCo's are unaccelerated (free joints: ``w x (w x r_com)``; ball joints: zero)."""
        mj = self.mj
        out = np.zeros(mj.nv)
        for jm in range(mj.njnt):
            if int(mj.jnt_type[jm]) != MJ_FREE:
                continue
            d = int(mj.jnt_dofadr[jm])
            qm = int(mj.jnt_qposadr[jm])
            R = _quat_to_mat(qpos[qm + 3 : qm + 7])
            w = R @ qvel[d + 3 : d + 6]
            r = R @ mj.body_ipos[mj.jnt_bodyid[jm]]
            out[d : d + 3] = np.cross(w, np.cross(w, r))
        return out


def builder_from_mjmodel(mj, nt=None, *, up_axis="Z") -> MjConversion:
    """Convert a compiled ``mujoco.MjModel`` into a ModelBuilder (see the module docstring).

    ``nt`` is the engine module providing ``ModelBuilder`` (``armillary`` by default).
    """
    import mujoco

    if nt is None:
        import armillary as nt

    data = mujoco.MjData(mj)
    data.qpos[:] = mj.qpos0
    mujoco.mj_kinematics(mj, data)

    b = nt.ModelBuilder(up_axis=up_axis, gravity=tuple(float(g) for g in mj.opt.gravity))
    names = [mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_BODY, i) or f"body_{i}" for i in range(mj.nbody)]
    jnames = [mujoco.mj_id2name(mj, mujoco.mjtObj.mjOBJ_JOINT, j) or f"joint_{j}" for j in range(mj.njnt)]
    conv = MjConversion(builder=b, mj=mj, body_names=names)
    ident = ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0))

    def tf(p, q_xyzw):
        import warp as wp

        return wp.transform(wp.vec3(*[float(v) for v in p]), wp.quat(*q_xyzw))

    art_joints: list[int] = []
    art_label = None

    def flush():
        nonlocal art_joints
        if art_joints:
            b.add_articulation(art_joints, label=art_label)
        art_joints = []

    for i in range(1, mj.nbody):
        parent_mj = int(mj.body_parentid[i])
        if parent_mj == 0:
            flush()
            art_label = names[i]
        parent = -1 if parent_mj == 0 else conv.body_map[parent_mj]
        x_world = tf(data.xpos[i], _xyzw(data.xquat[i]))
        R_i = _quat_to_mat(mj.body_iquat[i])
        inertia = R_i @ np.diag(mj.body_inertia[i]) @ R_i.T
        x_rel = (mj.body_pos[i], _xyzw(mj.body_quat[i]))
        jadr, jnum = int(mj.body_jntadr[i]), int(mj.body_jntnum[i])
        joints = list(range(jadr, jadr + jnum)) if jnum > 0 and mj.body_mocapid[i] < 0 else []

        # massless intermediate links for all but the last joint of the body
        links = [b.add_link(xform=x_world, mass=0.0, label=f"{names[i]}/{jnames[jm]}") for jm in joints[:-1]]
        body = b.add_link(
            xform=x_world, mass=float(mj.body_mass[i]), com=tuple(float(v) for v in mj.body_ipos[i]),
            inertia=tuple(float(v) for v in inertia.reshape(-1)), label=names[i],
        )  # fmt: skip
        links.append(body)
        conv.body_map[i] = body
        if not joints:
            art_joints.append(b.add_joint_fixed(parent, body, parent_xform=tf(*x_rel), child_xform=tf(*ident),
                                                label=f"{names[i]}_weld"))  # fmt: skip
            continue
        prev = parent
        for k, jm in enumerate(joints):
            t = int(mj.jnt_type[jm])
            child = links[k]
            anchor = mj.jnt_pos[jm]
            if k == 0:
                # parent frame of the body, then the anchor in the body frame
                R0 = _quat_to_mat(mj.body_quat[i])
                x_p = tf(np.asarray(mj.body_pos[i]) + R0 @ anchor, x_rel[1])
            else:
                x_p = tf(anchor, ident[1])
            x_c = tf(anchor, ident[1])
            arm = float(mj.dof_armature[mj.jnt_dofadr[jm]])
            if t == MJ_FREE:
                j = b.add_joint_free(child, label=jnames[jm])
            elif t == MJ_BALL:
                j = b.add_joint_ball(prev, child, parent_xform=x_p, child_xform=x_c, armature=arm, label=jnames[jm])
            elif t == MJ_HINGE:
                j = b.add_joint_revolute(prev, child, axis=tuple(float(v) for v in mj.jnt_axis[jm]), armature=arm,
                                         parent_xform=x_p, child_xform=x_c, label=jnames[jm])  # fmt: skip
            else:
                j = b.add_joint_prismatic(prev, child, axis=tuple(float(v) for v in mj.jnt_axis[jm]), armature=arm,
                                          parent_xform=x_p, child_xform=x_c, label=jnames[jm])  # fmt: skip
            if t == MJ_FREE and arm:
                start = b.joint_qd_start[j]
                for d in range(6):
                    b.joint_armature[start + d] = float(mj.dof_armature[mj.jnt_dofadr[jm] + d])
            conv.joint_map[jm] = j
            art_joints.append(j)
            prev = child
    flush()
    return conv

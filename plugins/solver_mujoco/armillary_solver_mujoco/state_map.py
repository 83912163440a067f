"""State conversion between armillary joint coordinates and MuJoCo ``qpos`` / ``qvel`` (host, numpy).

Conventions (see :mod:`.convert` for the frames):

* PRISMATIC / REVOLUTE / D6 DOFs: identical scalars.
* BALL: our quaternion ``q`` (xyzw, rotation in the parent anchor frame) and angular velocity
  ``w`` (parent anchor frame); MuJoCo's quaternion (wxyz) is ``Rc q Rc^-1`` with ``Rc`` the child
  anchor rotation, its angular velocity is in the child body frame: ``w_mj = Rc R(q)^T w``.
* FREE: MuJoCo ``qpos`` is the body pose in world (wxyz), ``qvel`` the body-origin velocity in
  world and the angular velocity in the body frame; ours are the child anchor pose in the parent
  anchor frame and the COM twist (world axes for a root joint with identity anchors).

All functions work on arrays with a leading world axis.
"""

from __future__ import annotations

import numpy as np


def qmul(a, b):
    """Hamilton product of xyzw quaternions, broadcasting over leading axes (component arithmetic:
    much faster than generic numpy helpers on the few quaternions of a step)."""
    ax, ay, az, aw = a[..., 0], a[..., 1], a[..., 2], a[..., 3]
    bx, by, bz, bw = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    out = np.empty(np.broadcast_shapes(a.shape, b.shape))
    out[..., 0] = aw * bx + ax * bw + ay * bz - az * by
    out[..., 1] = aw * by - ax * bz + ay * bw + az * bx
    out[..., 2] = aw * bz + ax * by - ay * bx + az * bw
    out[..., 3] = aw * bw - ax * bx - ay * by - az * bz
    return out


def qconj(q):
    return q * np.array([-1.0, -1.0, -1.0, 1.0])


def cross(a, b):
    """Cross product over the last axis (component arithmetic)."""
    out = np.empty(np.broadcast_shapes(a.shape, b.shape))
    out[..., 0] = a[..., 1] * b[..., 2] - a[..., 2] * b[..., 1]
    out[..., 1] = a[..., 2] * b[..., 0] - a[..., 0] * b[..., 2]
    out[..., 2] = a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]
    return out


def qrot(q, v):
    """Rotate vectors ``v`` (..., 3) by quaternions ``q`` (..., 4, xyzw)."""
    u = q[..., :3]
    w = q[..., 3:4]
    t = 2.0 * cross(u, v)
    return v + w * t + cross(u, t)


def xyzw_to_wxyz(q):
    return q[..., [3, 0, 1, 2]]


def wxyz_to_xyzw(q):
    return q[..., [1, 2, 3, 0]]


class StateMap:
    """Index tables built from a :class:`~.convert.Conversion`, and the two conversions."""

    def __init__(self, model, conv):
        self.W = conv.world_count
        self.nq = conv.mj_model.nq
        self.nv = conv.mj_model.nv
        worlds = conv.worlds
        q_start = model.joint_q_start.numpy()
        qd_start = model.joint_qd_start.numpy()
        if len(worlds[0].joints):
            j0 = [int(w.joints[0]) if len(w.joints) else 0 for w in worlds]
            self.q_off = np.array([q_start[j] - q_start[j0[0]] for j in j0], np.int64)
            self.d_off = np.array([qd_start[j] - qd_start[j0[0]] for j in j0], np.int64)
        else:
            self.q_off = np.zeros(self.W, np.int64)
            self.d_off = np.zeros(self.W, np.int64)
        sq, smq, sd, smd = [], [], [], []
        ball, free = [], []
        X_p = model.joint_X_p.numpy() if model.joint_count else np.zeros((0, 7))
        X_c = model.joint_X_c.numpy() if model.joint_count else np.zeros((0, 7))
        child = model.joint_child.numpy() if model.joint_count else np.zeros(0, np.int64)
        com = model.body_com.numpy() if model.body_count else np.zeros((0, 3))
        for j, kind, qs, ds, mq, md, n in conv.joint_map:
            if kind == "scalar":
                sq.extend(range(qs, qs + n))
                smq.extend(range(mq, mq + n))
                sd.extend(range(ds, ds + n))
                smd.extend(range(md, md + n))
            elif kind == "ball":
                ball.append((qs, ds, mq, md, X_c[j, 3:7] / np.linalg.norm(X_c[j, 3:7])))
            elif kind == "free":
                free.append((qs, ds, mq, md, X_p[j], X_c[j], com[child[j]]))
        self.scalar_q = np.asarray(sq, np.int64)
        self.scalar_mq = np.asarray(smq, np.int64)
        self.scalar_d = np.asarray(sd, np.int64)
        self.scalar_md = np.asarray(smd, np.int64)
        self.ball_q = np.asarray([b[0] for b in ball], np.int64)
        self.ball_d = np.asarray([b[1] for b in ball], np.int64)
        self.ball_mq = np.asarray([b[2] for b in ball], np.int64)
        self.ball_md = np.asarray([b[3] for b in ball], np.int64)
        self.ball_rc = np.asarray([b[4] for b in ball], np.float64).reshape(-1, 4)
        self.free_q = np.asarray([f[0] for f in free], np.int64)
        self.free_d = np.asarray([f[1] for f in free], np.int64)
        self.free_mq = np.asarray([f[2] for f in free], np.int64)
        self.free_md = np.asarray([f[3] for f in free], np.int64)
        fp = np.asarray([f[4] for f in free], np.float64).reshape(-1, 7)
        fc = np.asarray([f[5] for f in free], np.float64).reshape(-1, 7)
        self.free_p_pos, self.free_p_rot = fp[:, :3], fp[:, 3:] / np.maximum(np.linalg.norm(fp[:, 3:], axis=1, keepdims=True), 1e-30)
        self.free_c_pos, self.free_c_rot = fc[:, :3], fc[:, 3:] / np.maximum(np.linalg.norm(fc[:, 3:], axis=1, keepdims=True), 1e-30)
        self.free_com = np.asarray([f[6] for f in free], np.float64).reshape(-1, 3)
        ident = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0])
        self.free_identity_anchors = bool(np.allclose(fp, ident, atol=0.0) and np.allclose(fc, ident, atol=0.0))

    # ------------------------------------------------------------ ours -> MuJoCo
    def _idx(self, base, off):
        """Flat indices of ``base`` (world-0 indices) in every world, shape (W, len(base)); cached."""
        key = (id(base), id(off))
        cache = self.__dict__.setdefault("_idx_cache", {})
        hit = cache.get(key)
        if hit is None:
            hit = cache[key] = off[:, None] + base[None, :]
        return hit

    def to_mujoco(self, joint_q, joint_qd):
        """``joint_q`` / ``joint_qd`` (flat, all worlds) -> ``qpos`` (W, nq), ``qvel`` (W, nv).

        float32 coordinates are widened through their shortest decimal (:func:`.convert.decimal64`),
        as the model parameters are: a model's initial state reaches MuJoCo as the ``qpos0`` an MJCF
        wrote (0.3, not 0.30000001)."""
        from .convert import decimal64

        Q = decimal64(joint_q)
        QD = decimal64(joint_qd)
        qpos = np.zeros((self.W, self.nq))
        qvel = np.zeros((self.W, self.nv))
        if len(self.scalar_q):
            qpos[:, self.scalar_mq] = Q[self._idx(self.scalar_q, self.q_off)]
            qvel[:, self.scalar_md] = QD[self._idx(self.scalar_d, self.d_off)]
        if len(self.ball_q):
            qi = self._idx(self.ball_q, self.q_off)[..., None] + np.arange(4)
            di = self._idx(self.ball_d, self.d_off)[..., None] + np.arange(3)
            q = Q[qi]
            q = q / np.linalg.norm(q, axis=-1, keepdims=True)
            rc = np.broadcast_to(self.ball_rc, q.shape)
            qm = qmul(qmul(rc, q), qconj(rc))
            w = QD[di]
            wm = qrot(rc, qrot(qconj(q), w))
            qpos[:, (self.ball_mq[:, None] + np.arange(4))] = xyzw_to_wxyz(qm)
            qvel[:, (self.ball_md[:, None] + np.arange(3))] = wm
        if len(self.free_q):
            qi = self._idx(self.free_q, self.q_off)[..., None] + np.arange(7)
            di = self._idx(self.free_d, self.d_off)[..., None] + np.arange(6)
            q = Q[qi]
            t, r = q[..., :3], q[..., 3:] / np.linalg.norm(q[..., 3:], axis=-1, keepdims=True)
            pp, pr = self.free_p_pos, self.free_p_rot
            cp, cr = self.free_c_pos, self.free_c_rot
            # X_WB = X_p * X_j * inv(X_c)
            rj = qmul(pr, r)
            pj = pp + qrot(pr, t)
            rb = qmul(rj, qconj(cr))
            pb = pj - qrot(rb, cp)
            v = qrot(pr, QD[di][..., :3])
            w = qrot(pr, QD[di][..., 3:])
            com_offset = qrot(rb, self.free_com)
            v_origin = v - cross(w, com_offset)
            qpos[:, (self.free_mq[:, None] + np.arange(7))] = np.concatenate([pb, xyzw_to_wxyz(rb)], axis=-1)
            qvel[:, (self.free_md[:, None] + np.arange(6))] = np.concatenate([v_origin, qrot(qconj(rb), w)], axis=-1)
        return qpos, qvel

    # ------------------------------------------------------------ MuJoCo -> ours
    def from_mujoco(self, qpos, qvel, joint_q, joint_qd):
        """Write ``qpos`` (W, nq) / ``qvel`` (W, nv) into the flat ``joint_q`` / ``joint_qd`` numpy arrays."""
        if len(self.scalar_q):
            joint_q[self._idx(self.scalar_q, self.q_off)] = qpos[:, self.scalar_mq]
            joint_qd[self._idx(self.scalar_d, self.d_off)] = qvel[:, self.scalar_md]
        if len(self.ball_q):
            qm = wxyz_to_xyzw(qpos[:, (self.ball_mq[:, None] + np.arange(4))])
            wm = qvel[:, (self.ball_md[:, None] + np.arange(3))]
            rc = np.broadcast_to(self.ball_rc, qm.shape)
            q = qmul(qmul(qconj(rc), qm), rc)
            w = qrot(q, qrot(qconj(rc), wm))
            joint_q[self._idx(self.ball_q, self.q_off)[..., None] + np.arange(4)] = q
            joint_qd[self._idx(self.ball_d, self.d_off)[..., None] + np.arange(3)] = w
        if len(self.free_q):
            x = qpos[:, (self.free_mq[:, None] + np.arange(7))]
            vel = qvel[:, (self.free_md[:, None] + np.arange(6))]
            pb, rb = x[..., :3], wxyz_to_xyzw(x[..., 3:])
            w = qrot(rb, vel[..., 3:])
            v = vel[..., :3] + cross(w, qrot(rb, self.free_com))
            if self.free_identity_anchors:  # the common case: joint frame = world, child frame = body
                t, r = pb, rb
            else:
                pp, pr = self.free_p_pos, self.free_p_rot
                cp, cr = self.free_c_pos, self.free_c_rot
                # X_j = inv(X_p) * X_WB * X_c
                r = qmul(qconj(pr), qmul(rb, cr))
                t = qrot(qconj(pr), pb + qrot(rb, cp) - pp)
                v = qrot(qconj(pr), v)
                w = qrot(qconj(pr), w)
            joint_q[self._idx(self.free_q, self.q_off)[..., None] + np.arange(7)] = np.concatenate([t, r], axis=-1)
            joint_qd[self._idx(self.free_d, self.d_off)[..., None] + np.arange(6)] = np.concatenate([v, w], axis=-1)

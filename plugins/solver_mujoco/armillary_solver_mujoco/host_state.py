"""MuJoCo C ``MjData`` -> armillary :class:`~armillary.State` in one Warp launch (CPU backend).

After a step, every world's ``MjData`` holds the forward pass of the *new* state (the solver
keeps ``mj_step1`` one step ahead: ``mj_step2`` then ``mj_step1`` is bit-identical to ``mj_step``
for the Euler, implicit and implicitfast integrators), so ``xpos`` / ``xquat`` / ``cvel`` are the
body poses and velocities of the output state. :class:`HostStateWriter` reads them, together with
``qpos`` / ``qvel``, straight from MuJoCo's float64 buffers (a per-world pointer table) and writes
``joint_q``, ``joint_qd``, ``body_q`` and ``body_qd`` of every world with one recorded kernel
launch: no numpy conversion and no forward kinematics per step.

Conventions (see :mod:`.state_map` for the joint coordinates): MuJoCo's body frame is the
armillary body frame; ``cvel`` is ``(w, v)`` of the body about the subtree COM of its root body,
so the COM velocity is ``v + w x (xipos - subtree_com[root])``; quaternions wxyz -> xyzw.
"""

from __future__ import annotations

import numpy as np
import warp as wp

from armillary.launch import replayer

from .joint_funcs import ball_from_mujoco, free_from_mujoco

JOINT_SCALAR = wp.constant(0)
JOINT_BALL = wp.constant(1)
JOINT_FREE = wp.constant(2)


@wp.func
def _quat_xyzw(buf: wp.array(dtype=wp.float64), i: int):
    """MuJoCo wxyz quaternion at ``buf[i:i+4]`` as an xyzw ``quatd``."""
    return wp.quatd(buf[i + 1], buf[i + 2], buf[i + 3], buf[i])


@wp.func
def _vec3d(buf: wp.array(dtype=wp.float64), i: int):
    return wp.vec3d(buf[i], buf[i + 1], buf[i + 2])


@wp.struct
class MjDataTables:
    """Everything the kernel reads: MjData pointers per world and the index tables."""

    # MjData buffers of each world (float64 pointers, shape (W,)):
    qpos_ptr: wp.array(dtype=wp.uint64)
    qvel_ptr: wp.array(dtype=wp.uint64)
    xpos_ptr: wp.array(dtype=wp.uint64)
    xquat_ptr: wp.array(dtype=wp.uint64)
    xipos_ptr: wp.array(dtype=wp.uint64)
    cvel_ptr: wp.array(dtype=wp.uint64)
    subtree_com_ptr: wp.array(dtype=wp.uint64)
    nq: int
    nv: int
    nbody_mj: int
    # Model (world-0 tables; per-world offsets):
    body_local: wp.array(dtype=wp.int32)  # our world-0 body index per body task
    body_mj: wp.array(dtype=wp.int32)  # MuJoCo body id per body task
    body_root_mj: wp.array(dtype=wp.int32)  # MuJoCo root body id per body task
    body_off: wp.array(dtype=wp.int32)  # (W,) body index offset of world w
    joint_kind: wp.array(dtype=wp.int32)  # JOINT_SCALAR / JOINT_BALL / JOINT_FREE per joint task
    joint_qs: wp.array(dtype=wp.int32)  # our world-0 joint_q start
    joint_ds: wp.array(dtype=wp.int32)  # our world-0 joint_qd start
    joint_mq: wp.array(dtype=wp.int32)  # MuJoCo qpos address
    joint_md: wp.array(dtype=wp.int32)  # MuJoCo dof address
    joint_n: wp.array(dtype=wp.int32)  # scalar DOF count (scalar joints)
    joint_rc: wp.array(dtype=wp.quatd)  # BALL: child anchor rotation (xyzw)
    free_pp: wp.array(dtype=wp.vec3d)  # FREE: parent anchor position [m]
    free_pr: wp.array(dtype=wp.quatd)  # FREE: parent anchor rotation
    free_cp: wp.array(dtype=wp.vec3d)  # FREE: child anchor position [m] (body frame)
    free_cr: wp.array(dtype=wp.quatd)  # FREE: child anchor rotation
    free_com: wp.array(dtype=wp.vec3d)  # FREE: child COM in the body frame [m]
    q_off: wp.array(dtype=wp.int32)  # (W,) joint_q offset of world w
    d_off: wp.array(dtype=wp.int32)  # (W,) joint_qd offset of world w


@wp.struct
class StateOut:
    joint_q: wp.array(dtype=float)
    joint_qd: wp.array(dtype=float)
    body_q: wp.array(dtype=wp.transform)
    body_qd: wp.array(dtype=wp.spatial_vector)


@wp.kernel
def mjdata_to_state_kernel(tab: MjDataTables, out: StateOut):
    """Thread ``(w, t)``: body task ``t < n_bodies`` or joint task ``t - n_bodies`` of world ``w``.
    (One struct per side: a recorded CPU launch sets each kernel parameter from Python.)"""
    w, t = wp.tid()
    nb = tab.body_local.shape[0]
    if t < nb:
        xpos = wp.array(ptr=tab.xpos_ptr[w], shape=(tab.nbody_mj * 3,), dtype=wp.float64)
        xquat = wp.array(ptr=tab.xquat_ptr[w], shape=(tab.nbody_mj * 4,), dtype=wp.float64)
        xipos = wp.array(ptr=tab.xipos_ptr[w], shape=(tab.nbody_mj * 3,), dtype=wp.float64)
        cvel = wp.array(ptr=tab.cvel_ptr[w], shape=(tab.nbody_mj * 6,), dtype=wp.float64)
        stc = wp.array(ptr=tab.subtree_com_ptr[w], shape=(tab.nbody_mj * 3,), dtype=wp.float64)
        mb = tab.body_mj[t]
        root = tab.body_root_mj[t]
        b = tab.body_local[t] + tab.body_off[w]
        p_W = _vec3d(xpos, 3 * mb)
        q_WB = _quat_xyzw(xquat, 4 * mb)
        w_W = _vec3d(cvel, 6 * mb)
        v_ref = _vec3d(cvel, 6 * mb + 3)  # velocity of the point at the root's subtree COM
        v_com = v_ref + wp.cross(w_W, _vec3d(xipos, 3 * mb) - _vec3d(stc, 3 * root))
        out.body_q[b] = wp.transform(wp.vec3(p_W), wp.quat(q_WB))
        out.body_qd[b] = wp.spatial_vector(wp.vec3(v_com), wp.vec3(w_W))
        return
    j = t - nb
    qpos = wp.array(ptr=tab.qpos_ptr[w], shape=(tab.nq,), dtype=wp.float64)
    qvel = wp.array(ptr=tab.qvel_ptr[w], shape=(tab.nv,), dtype=wp.float64)
    qs = tab.joint_qs[j] + tab.q_off[w]
    ds = tab.joint_ds[j] + tab.d_off[w]
    mq = tab.joint_mq[j]
    md = tab.joint_md[j]
    kind = tab.joint_kind[j]
    if kind == JOINT_SCALAR:
        for k in range(tab.joint_n[j]):
            out.joint_q[qs + k] = float(qpos[mq + k])
            out.joint_qd[ds + k] = float(qvel[md + k])
    elif kind == JOINT_BALL:
        q, w_P = ball_from_mujoco(tab.joint_rc[j], _quat_xyzw(qpos, mq), _vec3d(qvel, md))
        for k in range(4):
            out.joint_q[qs + k] = float(q[k])
        for k in range(3):
            out.joint_qd[ds + k] = float(w_P[k])
    else:
        p, r, v, om = free_from_mujoco(_vec3d(qpos, mq), _quat_xyzw(qpos, mq + 3), _vec3d(qvel, md),
                                       _vec3d(qvel, md + 3), tab.free_pp[j], tab.free_pr[j], tab.free_cp[j],
                                       tab.free_cr[j], tab.free_com[j])  # fmt: skip
        for k in range(3):
            out.joint_q[qs + k] = float(p[k])
            out.joint_qd[ds + k] = float(v[k])
            out.joint_qd[ds + 3 + k] = float(om[k])
        for k in range(4):
            out.joint_q[qs + 3 + k] = float(r[k])


def _ptrs(datas, field):
    return np.asarray([getattr(d, field).ctypes.data for d in datas], np.uint64)


class HostStateWriter:
    """Writes the state of every world's ``MjData`` into armillary states (one launch per call).

    ``supported`` is ``False`` when some body or DOF is not a plain image of a MuJoCo body or
    joint (unconverted joints, bodies outside the MuJoCo tree); the solver then converts on the
    host and runs forward kinematics instead."""

    def __init__(self, model, conv, state_map, datas, mj_model):
        self.device = model.device
        worlds = conv.worlds
        if not wp.get_device(self.device).is_cpu:  # the kernel dereferences host pointers
            self.supported = False
            return
        W = len(datas)
        local = np.asarray(worlds[0].bodies, np.int64)
        body_mj = conv.body_ids[local] if len(local) else np.zeros(0, np.int64)
        converted = sum(n for *_, n in conv.joint_map) * conv.world_count
        nbody = int(model.body_count or 0)
        covered = np.concatenate([np.asarray(w.bodies, np.int64) for w in worlds]) if W else np.zeros(0, np.int64)
        self.supported = bool(
            converted == int(model.joint_dof_count or 0)
            and np.all(body_mj >= 0)
            and len(covered) == nbody and len(np.unique(covered)) == nbody
        )  # fmt: skip
        if not self.supported:
            return
        b0 = int(local[0]) if len(local) else 0
        body_off = np.array([int(w.bodies[0]) - b0 if len(w.bodies) else 0 for w in worlds], np.int32)
        kinds, qs, ds, mq, md, n = [], [], [], [], [], []
        rc, pp, pr, cp, cr, com = [], [], [], [], [], []
        X_p = model.joint_X_p.numpy() if model.joint_count else np.zeros((0, 7))
        X_c = model.joint_X_c.numpy() if model.joint_count else np.zeros((0, 7))
        child = model.joint_child.numpy() if model.joint_count else np.zeros(0, np.int64)
        body_com = model.body_com.numpy() if nbody else np.zeros((0, 3))
        ident = np.array([0.0, 0.0, 0.0, 1.0])

        def unit(q):
            q = np.asarray(q, np.float64)
            return q / max(np.linalg.norm(q), 1e-30)

        for j, kind, jqs, jds, jmq, jmd, jn in conv.joint_map:
            if kind not in ("scalar", "ball", "free"):
                continue
            kinds.append({"scalar": 0, "ball": 1, "free": 2}[kind])
            qs.append(jqs)
            ds.append(jds)
            mq.append(jmq)
            md.append(jmd)
            n.append(jn)
            rc.append(unit(X_c[j, 3:7]) if kind == "ball" else ident)
            if kind == "free":
                pp.append(X_p[j, :3]), pr.append(unit(X_p[j, 3:7]))
                cp.append(X_c[j, :3]), cr.append(unit(X_c[j, 3:7]))
                com.append(body_com[child[j]])
            else:
                pp.append(np.zeros(3)), pr.append(ident), cp.append(np.zeros(3)), cr.append(ident)
                com.append(np.zeros(3))
        dev = self.device

        def i32(x):
            return wp.array(np.asarray(x, np.int32).reshape(-1), dtype=wp.int32, device=dev)

        def f64(x, dtype, k):
            return wp.array(np.asarray(x, np.float64).reshape(-1, k), dtype=dtype, device=dev)

        self.dim = (W, len(local) + len(kinds))
        tab = MjDataTables()
        tab.nq, tab.nv, tab.nbody_mj = int(mj_model.nq), int(mj_model.nv), int(mj_model.nbody)
        tab.body_local, tab.body_mj, tab.body_off = i32(local), i32(body_mj), i32(body_off)
        tab.body_root_mj = i32(mj_model.body_rootid[body_mj] if len(body_mj) else [])
        tab.joint_kind, tab.joint_qs, tab.joint_ds = i32(kinds), i32(qs), i32(ds)
        tab.joint_mq, tab.joint_md, tab.joint_n = i32(mq), i32(md), i32(n)
        tab.joint_rc = f64(rc, wp.quatd, 4)
        tab.free_pp, tab.free_pr = f64(pp, wp.vec3d, 3), f64(pr, wp.quatd, 4)
        tab.free_cp, tab.free_cr = f64(cp, wp.vec3d, 3), f64(cr, wp.quatd, 4)
        tab.free_com = f64(com, wp.vec3d, 3)
        tab.q_off, tab.d_off = i32(state_map.q_off), i32(state_map.d_off)
        self._tab = tab
        self.rebind(datas)

    def rebind(self, datas) -> None:
        """Point the kernel at (new) ``MjData`` buffers."""
        dev, tab = self.device, self._tab
        for field in ("qpos", "qvel", "xpos", "xquat", "xipos", "cvel", "subtree_com"):
            setattr(tab, f"{field}_ptr", wp.array(_ptrs(datas, field), dtype=wp.uint64, device=dev))
        self._datas = list(datas)  # keeps the buffers alive while pointers to them are held

    def replay_for(self, state):
        """A zero-argument callable filling ``state.joint_q``, ``joint_qd``, ``body_q`` and
        ``body_qd`` from the ``MjData``\\s (one recorded launch; it keeps the arrays alive)."""
        out = StateOut()
        out.joint_q, out.joint_qd, out.body_q, out.body_qd = state.joint_q, state.joint_qd, state.body_q, state.body_qd
        launch = wp.launch(mjdata_to_state_kernel, dim=self.dim, inputs=[self._tab, out], device=self.device,
                           record_cmd=True)  # fmt: skip
        run = replayer(launch)

        def replay() -> None:
            run()

        replay.keep_alive = (out, state.joint_q, state.joint_qd, state.body_q, state.body_qd)
        return replay

"""The MuJoCo Warp backend of :class:`~.solver.SolverMuJoCo` (``use_mujoco_cpu=False``).

The converted ``MjModel`` is put on the Warp device once (``mujoco_warp.put_model``) with a
batched ``Data`` of ``world_count`` worlds. A step is device work only (graph-capturable): one
kernel converts the armillary state, drive targets and forces into MuJoCo Warp's arrays (one
thread per world, the conventions of :mod:`.state_map`), ``mujoco_warp.step``, one kernel converts
back, then forward kinematics. MuJoCo Warp computes in float32.

Supported: native MuJoCo contacts, armillary contacts (``use_mujoco_contacts=False``: written into
MuJoCo Warp's contact arrays by :mod:`.warp_contacts`), every converted joint type, drives,
``joint_f``/``body_f``, kinematic DOFs, several worlds, also with different parameters (MuJoCo Warp's batched per-world
model arrays, for every field in which the worlds' ``MjModel`` copies differ; ``notify_model_changed``
re-puts them). Works on Warp's CPU device, slowly (see the plugin README for figures).
"""

from __future__ import annotations

import numpy as np
import warp as wp

from .joint_funcs import ball_from_mujoco, free_from_mujoco


@wp.func
def _to_wxyz_store(q: wp.quat, out: wp.array2d(dtype=float), w: int, adr: int):
    out[w, adr + 0] = q[3]
    out[w, adr + 1] = q[0]
    out[w, adr + 2] = q[1]
    out[w, adr + 3] = q[2]


@wp.func
def _load_wxyz(src: wp.array2d(dtype=float), w: int, adr: int) -> wp.quat:
    return wp.normalize(wp.quat(src[w, adr + 1], src[w, adr + 2], src[w, adr + 3], src[w, adr + 0]))


@wp.kernel
def to_mujoco_kernel(
    # tables (world 0):
    scalar_q: wp.array(dtype=wp.int32), scalar_mq: wp.array(dtype=wp.int32),
    scalar_d: wp.array(dtype=wp.int32), scalar_md: wp.array(dtype=wp.int32),
    ball_q: wp.array(dtype=wp.int32), ball_d: wp.array(dtype=wp.int32),
    ball_mq: wp.array(dtype=wp.int32), ball_md: wp.array(dtype=wp.int32), ball_rc: wp.array(dtype=wp.quat),
    free_q: wp.array(dtype=wp.int32), free_d: wp.array(dtype=wp.int32),
    free_mq: wp.array(dtype=wp.int32), free_md: wp.array(dtype=wp.int32),
    free_xp: wp.array(dtype=wp.transform), free_xc: wp.array(dtype=wp.transform), free_com: wp.array(dtype=wp.vec3),
    free_body: wp.array(dtype=wp.int32),
    act_p_coord: wp.array(dtype=wp.int32), act_p_id: wp.array(dtype=wp.int32),
    act_v_dof: wp.array(dtype=wp.int32), act_v_id: wp.array(dtype=wp.int32),
    body_local: wp.array(dtype=wp.int32), body_mj: wp.array(dtype=wp.int32),
    q_off: wp.array(dtype=wp.int32), d_off: wp.array(dtype=wp.int32), b_off: wp.array(dtype=wp.int32),
    # armillary in:
    joint_q: wp.array(dtype=float), joint_qd: wp.array(dtype=float), joint_f: wp.array(dtype=float),
    target_q: wp.array(dtype=float), target_qd: wp.array(dtype=float), body_f: wp.array(dtype=wp.spatial_vector),
    use_joint_f: int, use_body_f: int,
    # MuJoCo Warp out:
    qpos: wp.array2d(dtype=float), qvel: wp.array2d(dtype=float), ctrl: wp.array2d(dtype=float),
    qfrc_applied: wp.array2d(dtype=float), xfrc_applied: wp.array2d(dtype=wp.spatial_vector),
):
    """One thread per world: armillary joint state, targets and forces -> MuJoCo Warp arrays."""
    w = wp.tid()
    qo = q_off[w]
    do = d_off[w]
    for i in range(qfrc_applied.shape[1]):
        qfrc_applied[w, i] = 0.0
    for i in range(xfrc_applied.shape[1]):
        xfrc_applied[w, i] = wp.spatial_vector()
    for k in range(scalar_q.shape[0]):
        qpos[w, scalar_mq[k]] = joint_q[qo + scalar_q[k]]
        qvel[w, scalar_md[k]] = joint_qd[do + scalar_d[k]]
        if use_joint_f != 0:
            qfrc_applied[w, scalar_md[k]] = joint_f[do + scalar_d[k]]
    for k in range(ball_q.shape[0]):
        qs = qo + ball_q[k]
        q = wp.normalize(wp.quat(joint_q[qs], joint_q[qs + 1], joint_q[qs + 2], joint_q[qs + 3]))
        rc = ball_rc[k]
        _to_wxyz_store(rc * q * wp.quat_inverse(rc), qpos, w, ball_mq[k])
        ds = do + ball_d[k]
        om = wp.quat_rotate(rc, wp.quat_rotate_inv(q, wp.vec3(joint_qd[ds], joint_qd[ds + 1], joint_qd[ds + 2])))
        for c in range(3):
            qvel[w, ball_md[k] + c] = om[c]
        if use_joint_f != 0:
            tq = wp.quat_rotate(rc, wp.quat_rotate_inv(q, wp.vec3(joint_f[ds], joint_f[ds + 1], joint_f[ds + 2])))
            for c in range(3):
                qfrc_applied[w, ball_md[k] + c] = tq[c]
    for k in range(free_q.shape[0]):
        qs = qo + free_q[k]
        ds = do + free_d[k]
        t = wp.vec3(joint_q[qs], joint_q[qs + 1], joint_q[qs + 2])
        r = wp.normalize(wp.quat(joint_q[qs + 3], joint_q[qs + 4], joint_q[qs + 5], joint_q[qs + 6]))
        xp = free_xp[k]
        xc = free_xc[k]
        X_WB = xp * wp.transform(t, r) * wp.transform_inverse(xc)
        pb = wp.transform_get_translation(X_WB)
        rb = wp.transform_get_rotation(X_WB)
        mq = free_mq[k]
        for c in range(3):
            qpos[w, mq + c] = pb[c]
        _to_wxyz_store(rb, qpos, w, mq + 3)
        v = wp.transform_vector(xp, wp.vec3(joint_qd[ds], joint_qd[ds + 1], joint_qd[ds + 2]))
        om = wp.transform_vector(xp, wp.vec3(joint_qd[ds + 3], joint_qd[ds + 4], joint_qd[ds + 5]))
        v_origin = v - wp.cross(om, wp.quat_rotate(rb, free_com[k]))
        om_local = wp.quat_rotate_inv(rb, om)
        md = free_md[k]
        for c in range(3):
            qvel[w, md + c] = v_origin[c]
            qvel[w, md + 3 + c] = om_local[c]
        if use_joint_f != 0:
            f = wp.spatial_vector(wp.vec3(joint_f[ds], joint_f[ds + 1], joint_f[ds + 2]),
                                  wp.vec3(joint_f[ds + 3], joint_f[ds + 4], joint_f[ds + 5]))  # fmt: skip
            xfrc_applied[w, free_body[k]] = xfrc_applied[w, free_body[k]] + f
    for k in range(act_p_coord.shape[0]):  # position targets have the joint_q layout
        ctrl[w, act_p_id[k]] = target_q[qo + act_p_coord[k]]
    for k in range(act_v_dof.shape[0]):
        ctrl[w, act_v_id[k]] = target_qd[do + act_v_dof[k]]
    if use_body_f != 0:
        for k in range(body_local.shape[0]):
            xfrc_applied[w, body_mj[k]] = xfrc_applied[w, body_mj[k]] + body_f[b_off[w] + body_local[k]]


@wp.kernel
def from_mujoco_kernel(
    scalar_q: wp.array(dtype=wp.int32), scalar_mq: wp.array(dtype=wp.int32),
    scalar_d: wp.array(dtype=wp.int32), scalar_md: wp.array(dtype=wp.int32),
    ball_q: wp.array(dtype=wp.int32), ball_d: wp.array(dtype=wp.int32),
    ball_mq: wp.array(dtype=wp.int32), ball_md: wp.array(dtype=wp.int32), ball_rc: wp.array(dtype=wp.quat),
    free_q: wp.array(dtype=wp.int32), free_d: wp.array(dtype=wp.int32),
    free_mq: wp.array(dtype=wp.int32), free_md: wp.array(dtype=wp.int32),
    free_xp: wp.array(dtype=wp.transform), free_xc: wp.array(dtype=wp.transform), free_com: wp.array(dtype=wp.vec3),
    kin_d: wp.array(dtype=wp.int32),
    q_off: wp.array(dtype=wp.int32), d_off: wp.array(dtype=wp.int32),
    qpos: wp.array2d(dtype=float), qvel: wp.array2d(dtype=float),
    joint_qd_in: wp.array(dtype=float),
    joint_q: wp.array(dtype=float), joint_qd: wp.array(dtype=float),
):
    """One thread per world: MuJoCo Warp ``qpos``/``qvel`` -> armillary ``joint_q``/``joint_qd``."""
    w = wp.tid()
    qo = q_off[w]
    do = d_off[w]
    for k in range(scalar_q.shape[0]):
        joint_q[qo + scalar_q[k]] = qpos[w, scalar_mq[k]]
        joint_qd[do + scalar_d[k]] = qvel[w, scalar_md[k]]
    for k in range(ball_q.shape[0]):
        md = ball_md[k]
        q, o = ball_from_mujoco(ball_rc[k], _load_wxyz(qpos, w, ball_mq[k]),
                                wp.vec3(qvel[w, md], qvel[w, md + 1], qvel[w, md + 2]))  # fmt: skip
        qs = qo + ball_q[k]
        for c in range(4):
            joint_q[qs + c] = q[c]
        for c in range(3):
            joint_qd[do + ball_d[k] + c] = o[c]
    for k in range(free_q.shape[0]):
        mq = free_mq[k]
        md = free_md[k]
        xp = free_xp[k]
        xc = free_xc[k]
        t, r, v_p, om_p = free_from_mujoco(
            wp.vec3(qpos[w, mq], qpos[w, mq + 1], qpos[w, mq + 2]), _load_wxyz(qpos, w, mq + 3),
            wp.vec3(qvel[w, md], qvel[w, md + 1], qvel[w, md + 2]),
            wp.vec3(qvel[w, md + 3], qvel[w, md + 4], qvel[w, md + 5]), wp.transform_get_translation(xp),
            wp.transform_get_rotation(xp), wp.transform_get_translation(xc), wp.transform_get_rotation(xc),
            free_com[k])  # fmt: skip
        qs = qo + free_q[k]
        ds = do + free_d[k]
        for c in range(3):
            joint_q[qs + c] = t[c]
            joint_qd[ds + c] = v_p[c]
            joint_qd[ds + 3 + c] = om_p[c]
        for c in range(4):
            joint_q[qs + 3 + c] = r[c]
    for k in range(kin_d.shape[0]):
        joint_qd[do + kin_d[k]] = joint_qd_in[do + kin_d[k]]


class WarpBackend:
    """Device tables and the per-step launches of the MuJoCo Warp backend."""

    def __init__(self, solver):
        import mujoco_warp as mjw

        self.mjw = mjw
        model, conv, sm = solver.model, solver.conversion, solver.state_map
        dev = wp.get_device(model.device)
        self.device = dev
        W = conv.world_count
        kw = {}
        if solver.nconmax is not None:
            kw["nconmax"] = int(solver.nconmax)
        if solver.njmax is not None:
            kw["njmax"] = int(solver.njmax)
        with wp.ScopedDevice(dev):
            self.d = mjw.put_data(solver.mj_model, solver.mj_data, nworld=W, **kw)
        self.injector = None
        self.put_parameters(solver)

        def arr(values, dtype=wp.int32):
            return wp.array(np.asarray(values), dtype=dtype, device=dev)

        def tf(rows):
            rows = np.asarray(rows, np.float64).reshape(-1, 7)
            return wp.array(rows.astype(np.float32), dtype=wp.transform, device=dev)

        fp = np.concatenate([sm.free_p_pos, sm.free_p_rot], axis=1) if len(sm.free_q) else np.zeros((0, 7))
        fc = np.concatenate([sm.free_c_pos, sm.free_c_rot], axis=1) if len(sm.free_q) else np.zeros((0, 7))
        free_body = [bid for _, bid in solver._free_joint_body]
        self.tables = [
            arr(sm.scalar_q), arr(sm.scalar_mq), arr(sm.scalar_d), arr(sm.scalar_md),
            arr(sm.ball_q), arr(sm.ball_d), arr(sm.ball_mq), arr(sm.ball_md),
            wp.array(sm.ball_rc.astype(np.float32).reshape(-1, 4), dtype=wp.quat, device=dev),
            arr(sm.free_q), arr(sm.free_d), arr(sm.free_mq), arr(sm.free_md), tf(fp), tf(fc),
            wp.array(sm.free_com.astype(np.float32).reshape(-1, 3), dtype=wp.vec3, device=dev),
        ]  # fmt: skip
        self.free_body = arr(free_body)
        self.act = [arr(solver._act_p_coord), arr(solver._act_p_id), arr(solver._act_v_dof), arr(solver._act_v_id)]
        self.bodies = [arr(solver._body_local), arr(solver._body_mj)]
        self.offsets_in = [arr(sm.q_off), arr(sm.d_off), arr(solver._body_off)]
        self.offsets_out = [arr(sm.q_off), arr(sm.d_off)]
        self.kin = arr(solver.conversion.kinematic_dofs)
        self.W = W
        self.zero_dof = wp.zeros(max(int(model.joint_dof_count), 1), dtype=wp.float32, device=dev)
        self.zero_body = wp.zeros(max(int(model.body_count), 1), dtype=wp.spatial_vector, device=dev)
        self.timestep = None

    def put_parameters(self, solver) -> None:
        """(Re)build the device model from ``solver.mj_models``: worlds with their own ``MjModel``
        (different parameters) get MuJoCo Warp's batched per-world arrays for every field that
        differs. Fields MuJoCo Warp cannot batch keep world 0's value (with a warning naming them)."""
        mjw, dev = self.mjw, self.device
        models = solver.mj_models
        with wp.ScopedDevice(dev):
            m = mjw.put_model(models[0])
        if any(mw is not models[0] for mw in models):
            for name, arr in list(vars(m).items()):
                if not isinstance(arr, wp.array) or not hasattr(models[0], name):
                    continue
                host = [np.asarray(getattr(mw, name)) for mw in models]
                if all(np.array_equal(h, host[0]) for h in host[1:]):
                    continue
                if arr.ndim < 2 or arr.shape[0] != 1:  # not batchable in MuJoCo Warp (e.g. derived dof_length)
                    solver._warn_once(f"mjw-unbatched-{name}", f"SolverMuJoCo: the worlds differ in MuJoCo's {name!r}, "
                                      "which MuJoCo Warp holds once for all worlds: world 0's value is used (the C "
                                      "backend, use_mujoco_cpu=True, keeps every world's)")  # fmt: skip
                    continue
                scalar = wp.dtype_to_numpy(getattr(arr.dtype, "_wp_scalar_type_", arr.dtype))
                setattr(m, name, wp.array(np.stack(host).astype(scalar), dtype=arr.dtype, device=dev))
            g = np.stack([np.asarray(mw.opt.gravity, np.float32) for mw in models])
            if not np.all(g == g[0]):
                m.opt.gravity = wp.array(g, dtype=wp.vec3, device=dev)
        self.m = m
        self.timestep = None  # the new model carries the converted timestep
        self.injector = None
        if not solver.use_mujoco_contacts:
            from .warp_contacts import WarpContactInjector

            self.injector = WarpContactInjector(solver, m)

    def step(self, solver, state_in, state_out, control, contacts, dt: float) -> None:
        model = solver.model
        d = self.d
        if self.timestep != float(dt):  # host-side value: set once per distinct dt
            self.m.opt.timestep.fill_(float(dt))
            self.timestep = float(dt)
        joint_f = getattr(control, "joint_f", None) if control is not None else None
        target_q = control.joint_target_q if control is not None and control.joint_target_q is not None else model.joint_target_q
        target_qd = control.joint_target_qd if control is not None and control.joint_target_qd is not None else model.joint_target_qd
        body_f = getattr(state_in, "body_f", None)
        solver._launches.launch(
            to_mujoco_kernel, dim=self.W,
            inputs=[*self.tables, self.free_body, *self.act, *self.bodies, *self.offsets_in,
                    state_in.joint_q, state_in.joint_qd, joint_f if joint_f is not None else self.zero_dof,
                    target_q if target_q is not None else self.zero_dof,
                    target_qd if target_qd is not None else self.zero_dof,
                    body_f if body_f is not None else self.zero_body, int(joint_f is not None),
                    int(body_f is not None)],
            outputs=[d.qpos, d.qvel, d.ctrl, d.qfrc_applied, d.xfrc_applied], device=self.device,
        )  # fmt: skip
        if self.injector is not None:
            self.injector.inject(solver, state_in, contacts, d)
        with wp.ScopedDevice(self.device):
            self.mjw.step(self.m, d)
        solver._launches.launch(
            from_mujoco_kernel, dim=self.W,
            inputs=[*self.tables, self.kin, *self.offsets_out, d.qpos, d.qvel, state_in.joint_qd],
            outputs=[state_out.joint_q, state_out.joint_qd], device=self.device,
        )  # fmt: skip

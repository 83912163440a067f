"""MuJoCo C ``MjData`` -> armillary :class:`~armillary.State` in one Warp launch (CPU backend).

After a step, every world's ``MjData`` holds the forward pass of the *new* state (the solver
keeps ``mj_step1`` one step ahead: ``mj_step2`` then ``mj_step1`` is bit-identical to ``mj_step``
for the Euler, implicit and implicitfast integrators), so ``xpos`` / ``xquat`` / ``cvel`` are the
body poses and velocities of the output state. :class:`HostStateWriter` reads them, together with
``qpos`` / ``qvel``, straight from MuJoCo's float64 buffers (a per-world pointer table) and writes
``joint_q``, ``joint_qd``, ``body_q`` and ``body_qd`` of every world with one recorded kernel
launch: no numpy conversion and no forward kinematics per step.

A second small launch, one thread per world, is the step's non-finite guard (the solver declares
``fuses_finite_guard``): it flags non-finite ``control.joint_f`` / ``state_in.body_f`` entries in
the solver's ``nonfinite_flags`` (skipped while the host saw only zero forces), and it consumes
MuJoCo's instability warnings of every world (``mjWARN_BADQPOS`` / ``BADQVEL`` / ``BADQACC``:
MuJoCo found a NaN, infinite or huge (> 1e10) ``qpos`` / ``qvel`` / ``qacc`` entry and, unless
``mjDSBL_AUTORESET`` is set, reset the world with ``mj_resetData``), reporting the offending
MuJoCo coordinate or DOF as our joint coordinate or DOF (a ``qacc`` warning in a world with a
non-finite force entry is left to that entry's flag). The outputs themselves need no check:
MuJoCo checks the step's ``qpos`` / ``qvel`` and its ``qacc`` (``mj_step2`` + ``mj_step1`` also
the new state), so with no warning every value the writer reads is finite and bounded (a step
moves ``qpos`` by at most ``1e10 dt``). See :class:`MjWarnings`. (The guard is its own launch:
the same code in the writer kernel made each of its threads measurably slower, ~10 ns.)

Conventions (see :mod:`.state_map` for the joint coordinates): MuJoCo's body frame is the
armillary body frame; ``cvel`` is ``(w, v)`` of the body about the subtree COM of its root body,
so the COM velocity is ``v + w x (xipos - subtree_com[root])``; quaternions wxyz -> xyzw.
"""

from __future__ import annotations

import numpy as np
import warp as wp

from armillary.launch import replayer
from armillary.solvers import step_guard

from .joint_funcs import ball_from_mujoco, free_from_mujoco

JOINT_SCALAR = wp.constant(0)
JOINT_BALL = wp.constant(1)
JOINT_FREE = wp.constant(2)

SLOT_JOINT_COORD = wp.constant(step_guard.SLOT_JOINT_COORD)
SLOT_JOINT_DOF = wp.constant(step_guard.SLOT_JOINT_DOF)
SLOT_JOINT_F = wp.constant(step_guard.SLOT_JOINT_F)
SLOT_BODY_F = wp.constant(step_guard.SLOT_BODY_F)

#: MuJoCo's instability warnings the guard consumes, in the order of :attr:`MjWarnings.count`'s
#: columns: a bad ``qpos`` entry (``lastinfo``: its qpos address), ``qvel`` and ``qacc`` (DOF address)
WARNING_NAMES = ("mjWARN_BADQPOS", "mjWARN_BADQVEL", "mjWARN_BADQACC")
WARN_QPOS, WARN_QVEL = wp.constant(0), wp.constant(1)  # (BADQACC: column 2)


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


@wp.struct
class GuardTables:
    """What the guard reads per world: MuJoCo's warning counters and the index tables."""

    warn_count_ptr: wp.array(dtype=wp.uint64)  # (W,) address of mjData.warning[0].number (int32)
    warn_info_ptr: wp.array(dtype=wp.uint64)  # (W,) address of mjData.warning[0].lastinfo (int32)
    warn_stride: int  # int32 elements between two warnings
    warn_len: int  # int32 elements spanned by the warnings
    warn_index: wp.array(dtype=wp.int32)  # (3,) mjtWarning values of BADQPOS, BADQVEL, BADQACC
    qpos_coord: wp.array(dtype=wp.int32)  # (nq,) our world-0 joint_q index per MuJoCo qpos address
    dof_dof: wp.array(dtype=wp.int32)  # (nv,) our world-0 joint_qd index per MuJoCo DOF address
    body_local: wp.array(dtype=wp.int32)  # our world-0 bodies
    body_off: wp.array(dtype=wp.int32)  # (W,) body index offset of world w
    joint_ds: wp.array(dtype=wp.int32)  # our world-0 joint_qd start per converted joint
    joint_n: wp.array(dtype=wp.int32)  # its DOF count
    q_off: wp.array(dtype=wp.int32)  # (W,) joint_q offset of world w
    d_off: wp.array(dtype=wp.int32)  # (W,) joint_qd offset of world w


@wp.struct
class GuardIO:
    """What the guard reads and writes per ``(state_in, state_out, control)``."""

    # the step's force inputs (checked while force_scan[0] != 0; empty when absent):
    joint_f: wp.array(dtype=float)
    body_f: wp.array(dtype=wp.spatial_vector)
    force_scan: wp.array(dtype=wp.int32)  # (1,) set by the host: 0 while both are all zero bytes
    flags: wp.array(dtype=wp.int32)  # the solver's nonfinite_flags
    warn_count: wp.array(dtype=wp.int32)  # (W * 3,) MuJoCo warnings consumed, per world and kind
    warn_info: wp.array(dtype=wp.int32)  # (W * 3,) MuJoCo's lastinfo of the latest one
    warn_new: wp.array(dtype=wp.int32)  # (1,) warnings consumed since the host last looked


@wp.kernel
def mjdata_guard_kernel(tab: GuardTables, io: GuardIO):
    """Thread ``w``: flag world ``w``'s non-finite ``body_f`` / ``joint_f`` entries (unless the host
    saw only zeros), then report and clear its BADQPOS / BADQVEL / BADQACC warnings (a bad ``qacc``
    in a world with a non-finite force entry is left to that entry's flag)."""
    w = wp.tid()
    forces_finite = bool(True)
    if io.force_scan[0] != 0:
        if io.body_f.shape[0] > 0:
            for i in range(tab.body_local.shape[0]):
                b = tab.body_local[i] + tab.body_off[w]
                f = io.body_f[b]
                if not (wp.isfinite(wp.spatial_top(f)) and wp.isfinite(wp.spatial_bottom(f))):
                    wp.atomic_min(io.flags, SLOT_BODY_F, b)
                    forces_finite = False
        if io.joint_f.shape[0] > 0:
            for j in range(tab.joint_ds.shape[0]):
                ds = tab.joint_ds[j] + tab.d_off[w]
                for k in range(tab.joint_n[j]):
                    if not wp.isfinite(io.joint_f[ds + k]):
                        wp.atomic_min(io.flags, SLOT_JOINT_F, ds + k)
                        forces_finite = False
    count = wp.array(ptr=tab.warn_count_ptr[w], shape=(tab.warn_len,), dtype=wp.int32)
    info = wp.array(ptr=tab.warn_info_ptr[w], shape=(tab.warn_len,), dtype=wp.int32)
    for k in range(3):
        at = tab.warn_index[k] * tab.warn_stride
        n = count[at]
        if n != 0:
            i = info[at]
            count[at] = 0  # consumed: MuJoCo's reset zeroes the counters, so "changed since" cannot tell
            io.warn_count[3 * w + k] = io.warn_count[3 * w + k] + n
            io.warn_info[3 * w + k] = i
            wp.atomic_add(io.warn_new, 0, n)
            if k == WARN_QPOS:
                c = 0
                if i >= 0 and i < tab.qpos_coord.shape[0]:
                    c = tab.qpos_coord[i]
                wp.atomic_min(io.flags, SLOT_JOINT_COORD, c + tab.q_off[w])
            elif k == WARN_QVEL or forces_finite:
                d = 0
                if i >= 0 and i < tab.dof_dof.shape[0]:
                    d = tab.dof_dof[i]
                wp.atomic_min(io.flags, SLOT_JOINT_DOF, d + tab.d_off[w])


def _ptrs(datas, field):
    return np.asarray([getattr(d, field).ctypes.data for d in datas], np.uint64)


def _warning_ptrs(datas):
    """Addresses of ``warning[0].number`` and ``warning[0].lastinfo`` per world, the stride between
    two warnings and the span of the array (int32 elements)."""
    count = [d.warning.number for d in datas]
    info = [d.warning.lastinfo for d in datas]
    stride = count[0].strides[0] // 4 if count else 1
    span = (len(count[0]) - 1) * stride + 1 if count else 1
    return (np.asarray([c.ctypes.data for c in count], np.uint64), np.asarray([i.ctypes.data for i in info], np.uint64),
            stride, span)  # fmt: skip


def mujoco_index_maps(conv, nq: int, nv: int):
    """``(qpos_coord, dof_dof)``: our world-0 joint coordinate per MuJoCo qpos address and joint DOF
    per MuJoCo DOF address. Scalar joints map one to one; a BALL or FREE joint's MuJoCo entries
    (its quaternion in another frame, its world pose) map to the joint's first coordinate / DOF;
    addresses of no converted joint map to 0."""
    qpos_coord = np.zeros(nq, np.int32)
    dof_dof = np.zeros(nv, np.int32)
    for _, kind, qs, ds, mq, md, n in conv.joint_map:
        if kind == "scalar":
            qpos_coord[mq:mq + n] = np.arange(qs, qs + n)
            dof_dof[md:md + n] = np.arange(ds, ds + n)
        elif kind in ("ball", "free"):
            qpos_coord[mq:mq + (4 if kind == "ball" else 7)] = qs
            dof_dof[md:md + (3 if kind == "ball" else 6)] = ds
    return qpos_coord, dof_dof


class MjWarnings:
    """MuJoCo's instability warnings consumed by the step guard, per world (host arrays, CPU).

    ``count[w, k]``: warnings of kind ``WARNING_NAMES[k]`` in world ``w`` since the last
    :meth:`clear`; ``info[w, k]``: MuJoCo's ``lastinfo`` of the latest (its qpos or DOF
    address); ``new[0]``: warnings since the solver last looked (it re-sends the controls and
    forces that ``mj_resetData`` cleared). Written by the writer kernel, or on the host by
    :meth:`consume` for the step paths without it."""

    def __init__(self, worlds: int):
        self.worlds = worlds
        self.count_wp = wp.zeros(3 * worlds, dtype=wp.int32, device="cpu")
        self.info_wp = wp.zeros(3 * worlds, dtype=wp.int32, device="cpu")
        self.new_wp = wp.zeros(1, dtype=wp.int32, device="cpu")
        self.count = self.count_wp.numpy().reshape(worlds, 3)  # zero-copy views
        self.info = self.info_wp.numpy().reshape(worlds, 3)
        self.new = self.new_wp.numpy()

    def consume(self, datas, indices) -> list:
        """Host version of the kernel's check: clear each world's three warnings and return
        ``[(world, k, lastinfo), ...]`` of those that fired (``indices``: their mjtWarning values)."""
        fired = []
        for w, d in enumerate(datas):
            number = d.warning.number
            for k, idx in enumerate(indices):
                n = int(number[idx])
                if n:
                    i = int(d.warning.lastinfo[idx])
                    number[idx] = 0
                    self.count[w, k] += n
                    self.info[w, k] = i
                    self.new[0] += n
                    fired.append((w, k, i))
        return fired

    def clear(self) -> None:
        """Forget the reported warnings (``new`` is the solver's own business)."""
        self.count[:] = 0
        self.info[:] = 0

    def describe(self, autoreset: bool = True) -> str:
        """What MuJoCo reported since the last :meth:`clear` (``""`` when nothing); ``autoreset``:
        whether MuJoCo resets a world that warns (``mjDSBL_AUTORESET`` not set)."""
        parts = []
        for w, k in zip(*np.nonzero(self.count)):
            n = int(self.count[w, k])
            parts.append(f"{WARNING_NAMES[k]} in world {int(w)} ({('qpos', 'qvel', 'qacc')[k]}[{int(self.info[w, k])}]"
                         f"{f', {n} times' if n > 1 else ''})")  # fmt: skip
        if not parts:
            return ""
        head = "MuJoCo reported " + ", ".join(parts) + " (a NaN, infinite or > 1e10 value)"
        if not autoreset:
            return head + " (mjDSBL_AUTORESET: the world was not reset)"
        return head + (" and reset that world (mj_resetData: qpos0 at rest, controls and applied forces cleared): "
                       "state_out holds the world restarted from there, so the values above are after the reset")


class HostStateWriter:
    """Writes the state of every world's ``MjData`` into armillary states (one launch per call).

    ``supported`` is ``False`` when some body or DOF is not a plain image of a MuJoCo body or
    joint (unconverted joints, bodies outside the MuJoCo tree); the solver then converts on the
    host and runs forward kinematics instead."""

    def __init__(self, model, conv, state_map, datas, mj_model, warnings: MjWarnings | None = None):
        self.device = model.device
        self.warnings = warnings
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
        import mujoco

        g = GuardTables()
        g.warn_index = i32([int(getattr(mujoco.mjtWarning, name)) for name in WARNING_NAMES])
        qpos_coord, dof_dof = mujoco_index_maps(conv, int(mj_model.nq), int(mj_model.nv))
        g.qpos_coord, g.dof_dof = i32(qpos_coord), i32(dof_dof)
        g.body_local, g.body_off, g.q_off, g.d_off = tab.body_local, tab.body_off, tab.q_off, tab.d_off
        g.joint_ds, g.joint_n = tab.joint_ds, tab.joint_n
        self._guard_tab = g
        self.force_scan = wp.ones(1, dtype=wp.int32, device=dev)
        self.force_scan_np = self.force_scan.numpy()  # zero-copy (CPU): the solver writes it per step
        self.rebind(datas)

    def rebind(self, datas) -> None:
        """Point the kernel at (new) ``MjData`` buffers."""
        dev, tab = self.device, self._tab
        for field in ("qpos", "qvel", "xpos", "xquat", "xipos", "cvel", "subtree_com"):
            setattr(tab, f"{field}_ptr", wp.array(_ptrs(datas, field), dtype=wp.uint64, device=dev))
        g = self._guard_tab
        count, info, g.warn_stride, g.warn_len = _warning_ptrs(datas)
        g.warn_count_ptr = wp.array(count, dtype=wp.uint64, device=dev)
        g.warn_info_ptr = wp.array(info, dtype=wp.uint64, device=dev)
        self._datas = list(datas)  # keeps the buffers alive while pointers to them are held

    def replay_for(self, state, state_in=None, control=None, flags=None):
        """A zero-argument callable filling ``state.joint_q``, ``joint_qd``, ``body_q`` and
        ``body_qd`` from the ``MjData``\\s (one recorded launch; it keeps the arrays alive), then
        running the guard (a second one): ``control.joint_f`` and ``state_in.body_f`` are checked
        when given (and :attr:`force_scan` is non-zero), ``flags`` (the solver's
        ``nonfinite_flags``; a scratch array when ``None``) receives what it finds."""
        dev = self.device
        out = StateOut()
        out.joint_q, out.joint_qd, out.body_q, out.body_qd = state.joint_q, state.joint_qd, state.body_q, state.body_qd
        launch = wp.launch(mjdata_to_state_kernel, dim=self.dim, inputs=[self._tab, out], device=dev,
                           record_cmd=True)  # fmt: skip
        io = GuardIO()
        joint_f = getattr(control, "joint_f", None) if control is not None else None
        body_f = getattr(state_in, "body_f", None) if state_in is not None else None
        io.joint_f = joint_f if isinstance(joint_f, wp.array) else wp.empty(0, dtype=float, device=dev)
        io.body_f = body_f if isinstance(body_f, wp.array) else wp.empty(0, dtype=wp.spatial_vector, device=dev)
        io.force_scan = self.force_scan
        io.flags = flags if flags is not None else wp.full(step_guard.SLOT_COUNT, step_guard.CLEAN, dtype=wp.int32,
                                                           device=dev)  # fmt: skip
        warn = self.warnings if self.warnings is not None else MjWarnings(self.dim[0])
        io.warn_count, io.warn_info, io.warn_new = warn.count_wp, warn.info_wp, warn.new_wp
        guard = wp.launch(mjdata_guard_kernel, dim=self.dim[0], inputs=[self._guard_tab, io], device=dev,
                          record_cmd=True)  # fmt: skip
        run, check = replayer(launch), replayer(guard)

        def replay() -> None:
            run()
            check()

        replay.keep_alive = (out, io, state.joint_q, state.joint_qd, state.body_q, state.body_qd, io.joint_f, io.body_f,
                             io.flags, warn)  # fmt: skip
        return replay

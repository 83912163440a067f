"""Forward / inverse kinematics and mimic joints: :func:`eval_fk`, :func:`eval_ik`, :func:`eval_mimic`.

Each function is one Warp launch with one thread per selected articulation (all worlds at
once); a thread walks its articulation's joints parent-first. Conventions: ``State.body_q``
holds world transforms of body frames, ``State.body_qd`` the twist ``(v_com, w)`` in world
coordinates; joint coordinate layouts and per-type meanings are documented in
:mod:`armillary.sim.kinematics_kernels`.

Selectors (``mask`` / ``indices``) select articulations; a ``joint_mask`` selects joints whose
child bodies FK writes. Invalid selectors raise ``ValueError`` before any launch. Besides a
one-time topology cache built on the first call for a model (host side), the functions do
not synchronize with the device, so they can be captured in a CUDA graph once warmed up.

All three are differentiable through ``wp.Tape`` (``eval_fk``: ``body_q`` / ``body_qd`` with
respect to ``joint_q``, ``joint_qd`` and the model's joint frames and axes; ``eval_ik`` the
reverse; ``eval_mimic`` followers with respect to leaders). While a tape records, or when one of
the arrays ``eval_fk`` differentiates through requires grad, ``eval_fk`` launches the kernel with
an adjoint (:func:`~armillary.sim.kinematics_kernels.eval_fk_kernel`); otherwise the forward-only
:func:`~armillary.sim.kinematics_fast.eval_fk_fast_kernel` (same results to float32 round-off),
and a repeated call with the same arrays, selectors and flag filter replays its recorded launch
without validating again. Revolute angles from
``eval_ik`` are principal values: their derivative does not exist where the angle wraps at
``+-pi``.
"""

from __future__ import annotations

import operator

import numpy as np
import warp as wp

from .array_checks import expect_array
from ..launch import LaunchCache, replayer, tape_recording
from .enums import BodyFlags
from . import kinematics_fast as kfast
from . import kinematics_kernels as kk

__all__ = ["eval_fk", "eval_ik", "eval_mimic"]


# ---------------------------------------------------------------------- model topology cache
class _Topology:
    """Per-model data derived once on the host: joints of each articulation in parent-first order."""

    def __init__(self, model):
        nj = int(model.joint_count)
        dev = model.device
        order = np.arange(nj, dtype=np.int32)
        self.sorted = True
        if nj and model.articulation_count:
            parent = model.joint_parent.numpy()
            child = model.joint_child.numpy()
            starts = model.articulation_start.numpy()[: model.articulation_count]
            ends = model.articulation_end.numpy()
            for s, e in zip(starts, ends):
                order[s:e] = _parent_first(np.arange(s, e), parent, child)
            self.sorted = bool(np.array_equal(order, np.arange(nj)))
        self.joint_order = wp.array(order, dtype=wp.int32, device=dev)
        self.scratch: dict = {}
        self._model = model
        self._ancestors = None

    def ancestors(self):
        """``(start, joints)`` int32 arrays (CSR): ``joints[start[j]:start[j + 1]]`` is joint ``j``
        followed by its ancestors within its articulation, child to root (empty for joints outside
        articulations). Lets kernels visit a joint's ancestors with a ``for`` loop instead of a
        ``while`` walk, which Warp's adjoint does not replay. Built once, on first use."""
        if self._ancestors is None:
            self._ancestors = _ancestor_lists(self._model)
        return self._ancestors


def _ancestor_lists(model):
    nj = int(model.joint_count)
    dev = model.device
    if nj == 0 or model.articulation_count == 0:
        return wp.zeros(nj + 1, dtype=wp.int32, device=dev), wp.zeros(1, dtype=wp.int32, device=dev)
    ancestor = model.joint_ancestor.numpy().astype(np.int64)
    art = model.joint_articulation.numpy().astype(np.int64)
    owner, level, joint = [], [], []
    cur = np.arange(nj)
    alive = art >= 0
    depth = 0
    while alive.any():  # one numpy pass per tree level
        idx = np.nonzero(alive)[0]
        owner.append(idx)
        level.append(np.full(len(idx), depth))
        joint.append(cur[idx])
        nxt = ancestor[cur]
        ok = nxt >= 0
        ok[ok] = art[nxt[ok]] == art[ok]
        alive = alive & ok
        cur = np.where(ok, nxt, cur)
        depth += 1
        if depth > nj:  # a loop in the ancestor relation (invalid tree): stop
            break
    owner, level, joint = np.concatenate(owner), np.concatenate(level), np.concatenate(joint)
    order = np.lexsort((level, owner))
    start = np.zeros(nj + 1, dtype=np.int32)
    np.cumsum(np.bincount(owner, minlength=nj), out=start[1:])
    return (wp.array(start, dtype=wp.int32, device=dev),
            wp.array(joint[order].astype(np.int32), dtype=wp.int32, device=dev))  # fmt: skip


def _parent_first(joints: np.ndarray, parent: np.ndarray, child: np.ndarray) -> np.ndarray:
    """Joints sorted so that each joint comes after the joint whose child is its parent body."""
    children = {int(child[j]) for j in joints}
    ready = {int(parent[j]) for j in joints if int(parent[j]) not in children}
    out, pending = [], [int(j) for j in joints]
    while pending:
        progress = [j for j in pending if int(parent[j]) in ready]
        if not progress:  # a loop (invalid tree): keep the remaining index order
            out.extend(pending)
            break
        for j in progress:
            out.append(j)
            ready.add(int(child[j]))
        pending = [j for j in pending if j not in set(progress)]
    return np.asarray(out, dtype=np.int32)


def topology(model) -> _Topology:
    topo = getattr(model, "_armillary_topology", None)
    if topo is None or topo.joint_order.shape[0] != model.joint_count:
        topo = _Topology(model)
        model._armillary_topology = topo
    return topo


# ---------------------------------------------------------------------- selector validation
def _same_device(arr, model) -> bool:
    return wp.get_device(arr.device) == wp.get_device(model.device)


def _as_bool_array(value, n: int, name: str, fn: str, model):
    if isinstance(value, wp.array):
        arr = value
    elif isinstance(value, (np.ndarray, list, tuple)):
        np_val = np.asarray(value)
        if np_val.dtype != np.bool_:
            raise ValueError(f"{fn}: {name} must be a bool array of shape ({n},), got dtype {np_val.dtype}")
        arr = wp.array(np_val, dtype=wp.bool, device=model.device)
    else:
        raise ValueError(f"{fn}: {name} must be a wp.array of bool with shape ({n},), got {type(value).__name__}")
    if arr.dtype != wp.bool:
        raise ValueError(f"{fn}: {name} must be a bool array of shape ({n},), got dtype {wp.types.type_repr(arr.dtype)}")
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"{fn}: {name} must have shape ({n},), got {tuple(arr.shape)}")
    if not _same_device(arr, model):
        raise ValueError(f"{fn}: {name} is on device {arr.device} but the model is on {model.device}")
    return arr


def _as_index_array(value, name: str, fn: str, model):
    if isinstance(value, wp.array):
        arr = value
    elif isinstance(value, (np.ndarray, list, tuple)):
        np_val = np.asarray(value)
        if np_val.size and not np.issubdtype(np_val.dtype, np.integer):
            raise ValueError(f"{fn}: {name} must hold integer articulation indices, got dtype {np_val.dtype}")
        if np_val.ndim != 1:
            raise ValueError(f"{fn}: {name} must be one-dimensional, got shape {np_val.shape}")
        arr = wp.array(np_val.astype(np.int32), dtype=wp.int32, device=model.device)
    else:
        raise ValueError(f"{fn}: {name} must be a one-dimensional wp.array of int32, got {type(value).__name__}")
    if arr.dtype != wp.int32:
        raise ValueError(f"{fn}: {name} must be a one-dimensional int32 array, got dtype {wp.types.type_repr(arr.dtype)}")
    if arr.ndim != 1:
        raise ValueError(f"{fn}: {name} must be one-dimensional, got shape {tuple(arr.shape)}")
    if not _same_device(arr, model):
        raise ValueError(f"{fn}: {name} is on device {arr.device} but the model is on {model.device}")
    return arr


def articulation_selector(model, mask, indices, fn: str):
    """Validate ``mask`` / ``indices``; return ``(mode, mask, indices, launch_dim)``."""
    if mask is not None and indices is not None:
        raise ValueError(f"{fn}: mask and indices are mutually exclusive; pass only one")
    na = int(model.articulation_count)
    if mask is not None:
        return kk.SEL_MASK, _as_bool_array(mask, na, "mask", fn, model), None, na
    if indices is not None:
        idx = _as_index_array(indices, "indices", fn, model)
        return kk.SEL_INDICES, None, idx, int(idx.shape[0])
    return kk.SEL_ALL, None, None, na


def _check_coords(model, joint_q, joint_qd, fn: str):
    for name, arr, n in (("joint_q", joint_q, model.joint_coord_count), ("joint_qd", joint_qd, model.joint_dof_count)):
        if not isinstance(arr, wp.array):
            raise ValueError(f"{fn}: {name} must be a wp.array of float32, got {type(arr).__name__}")
        if arr.ndim != 1 or arr.shape[0] != n or arr.dtype != wp.float32:
            raise ValueError(
                f"{fn}: {name} must be a float32 array of shape ({n},), got {wp.types.type_repr(arr.dtype)} "
                f"{tuple(arr.shape)}"
            )
        if not _same_device(arr, model):
            raise ValueError(f"{fn}: {name} is on device {arr.device} but the model is on {model.device}")


def _body_arrays(model, state, fn: str):
    body_q = getattr(state, "body_q", None)
    body_qd = getattr(state, "body_qd", None)
    nb = int(model.body_count)
    for name, arr, dtype in (("body_q", body_q, wp.transform), ("body_qd", body_qd, wp.spatial_vector)):
        if arr is None:
            raise ValueError(f"{fn}: state has no {name} array")
        expect_array(f"{fn}: state", name, arr, nb, dtype, wp.get_device(model.device), required=True,
                     hint=f"the model has {nb} bodies")  # fmt: skip
    return body_q, body_qd


# ---------------------------------------------------------------------- public API
def eval_fk(model, joint_q, joint_qd, state, mask=None, indices=None, body_flag_filter=BodyFlags.ALL, *,
            joint_mask=None) -> None:  # fmt: skip
    """Forward kinematics: write ``state.body_q`` / ``state.body_qd`` from joint coordinates.

    Args:
        model: the :class:`~armillary.Model`.
        joint_q: joint coordinates, float32 ``(joint_coord_count,)``.
        joint_qd: joint velocities, float32 ``(joint_dof_count,)``.
        state: state-like target with ``body_q`` / ``body_qd`` (a ``State`` or the ``Model``).
        mask: bool ``(articulation_count,)``; only articulations with ``True`` are updated.
        indices: int32 articulation indices to update (out-of-range entries are skipped).
        body_flag_filter: only bodies whose ``Model.body_flags`` intersect it are written.
        joint_mask: bool ``(joint_count,)``; only selected joints write their child body.
            Selected joints read their parent's current state (written earlier in this call
            or left as it was); descendants are not selected automatically.

    ``body_qd`` is written as ``(v_com, w)`` in world coordinates. Bodies that are not written
    keep their values bit for bit. Joints outside articulations are not evaluated.

    Raises:
        ValueError: both ``mask`` and ``indices``, or a selector / ``joint_mask`` with a wrong
            dtype, shape or device.
    """
    fn = "eval_fk"
    taped = tape_recording()
    if not taped:  # a repeated call with validated arguments: replay its launch
        run = _fk_memo_get(model, joint_q, joint_qd, state, mask, indices, body_flag_filter, joint_mask)
        if run is not None:
            run()
            return
    mode, mask_arr, idx_arr, dim = articulation_selector(model, mask, indices, fn)
    use_jm = 0
    jm = None
    if joint_mask is not None:
        jm = _as_bool_array(joint_mask, int(model.joint_count), "joint_mask", fn, model)
        use_jm = 1
    _check_coords(model, joint_q, joint_qd, fn)
    body_q, body_qd = _body_arrays(model, state, fn)
    if dim == 0:
        return
    topo = topology(model)
    inputs = [
        model.articulation_start, model.articulation_end, int(model.articulation_count), topo.joint_order,
        model.joint_type, model.joint_parent, model.joint_child, model.joint_X_p, model.joint_X_c,
        model.joint_q_start, model.joint_qd_start, model.joint_dof_dim, model.joint_axis, model.body_com,
        model.body_flags, joint_q, joint_qd, mode, mask_arr, idx_arr, use_jm, jm, int(body_flag_filter),
    ]  # fmt: skip
    outputs = [body_q, body_qd]
    if taped or _fk_requires_grad(model, joint_q, joint_qd, body_q, body_qd):
        # the kernel with an adjoint; replays recorded launches except while a tape records
        launches = topo.scratch.get("fk_launches")
        if launches is None:
            launches = topo.scratch["fk_launches"] = LaunchCache()
        launches.launch(kk.eval_fk_kernel, dim=dim, inputs=inputs, outputs=outputs, device=model.device)
        return
    recorded = wp.launch(kfast.eval_fk_fast_kernel, dim=dim, inputs=inputs, outputs=outputs, device=model.device,
                         record_cmd=True)  # fmt: skip
    recorded.launch()
    if all(x is None or isinstance(x, wp.array) for x in (mask, indices, joint_mask)):
        # a tape recording when this is replayed gets the adjoint-capable kernel instead
        run = replayer(recorded, relaunch=lambda: wp.launch(kk.eval_fk_kernel, dim=dim, inputs=inputs,
                                                            outputs=outputs, device=model.device))
        _fk_memo_put(model, topo, joint_q, joint_qd, state, mask, indices, body_flag_filter, joint_mask, run)


# eval_fk memo: the launch of a validated argument set, keyed by the identity of every array
# involved (the entry holds them, so no id is reused while it lives) and the flag filter value
_FK_MODEL_ARRAYS = operator.attrgetter(
    "articulation_start", "articulation_end", "joint_type", "joint_parent", "joint_child", "joint_X_p", "joint_X_c",
    "joint_q_start", "joint_qd_start", "joint_dof_dim", "joint_axis", "body_com", "body_flags",
)
_FK_MEMO_SIZE = 16


def _fk_requires_grad(model, joint_q, joint_qd, body_q, body_qd) -> bool:
    """Whether any array ``eval_fk`` differentiates through requires grad."""
    return bool(
        joint_q.requires_grad or joint_qd.requires_grad or body_q.requires_grad or body_qd.requires_grad
        or model.joint_X_p.requires_grad or model.joint_X_c.requires_grad or model.joint_axis.requires_grad
        or model.body_com.requires_grad
    )  # fmt: skip


def _fk_memo_key(model, topo, joint_q, joint_qd, state, mask, indices, body_flag_filter, joint_mask):
    body_q = getattr(state, "body_q", None)
    body_qd = getattr(state, "body_qd", None)
    arrays = (joint_q, joint_qd, body_q, body_qd, mask, indices, joint_mask, topo.joint_order,
              *_FK_MODEL_ARRAYS(model))  # fmt: skip
    return (*map(id, arrays), model.articulation_count, body_flag_filter), arrays


def _fk_memo_get(model, joint_q, joint_qd, state, mask, indices, body_flag_filter, joint_mask):
    topo = getattr(model, "_armillary_topology", None)
    if topo is None:
        return None
    memo = topo.scratch.get("fk_memo")
    if not memo:
        return None
    key, arrays = _fk_memo_key(model, topo, joint_q, joint_qd, state, mask, indices, body_flag_filter, joint_mask)
    entry = memo.get(key)
    if entry is None or _fk_requires_grad(model, *arrays[:4]):
        return None
    return entry[0]


def _fk_memo_put(model, topo, joint_q, joint_qd, state, mask, indices, body_flag_filter, joint_mask, run) -> None:
    memo = topo.scratch.setdefault("fk_memo", {})
    key, arrays = _fk_memo_key(model, topo, joint_q, joint_qd, state, mask, indices, body_flag_filter, joint_mask)
    memo[key] = (run, arrays)
    while len(memo) > _FK_MEMO_SIZE:
        memo.pop(next(iter(memo)))


def eval_ik(model, state, joint_q, joint_qd, mask=None, indices=None, body_flag_filter=BodyFlags.ALL) -> None:
    """Inverse kinematics: write ``joint_q`` / ``joint_qd`` from ``state.body_q`` / ``state.body_qd``.

    ``state.body_qd`` is read as ``(v_com, w)`` in world coordinates. FREE / DISTANCE / ROD
    joints recover the child-COM twist relative to the parent in the joint parent frame;
    BALL joints the relative angular velocity in the joint parent frame; D6 joints project
    the relative motion onto their axes (angles decoded as successive rotations). Revolute
    angles are principal values in ``(-pi, pi]``; quaternions keep the sign of the composed
    body rotations.

    Args:
        mask / indices: articulation selectors as in :func:`eval_fk` (mutually exclusive).
        body_flag_filter: only joints whose child body flags intersect it are written.

    Raises:
        ValueError: both ``mask`` and ``indices`` or a malformed selector.
    """
    fn = "eval_ik"
    mode, mask_arr, idx_arr, dim = articulation_selector(model, mask, indices, fn)
    _check_coords(model, joint_q, joint_qd, fn)
    body_q, body_qd = _body_arrays(model, state, fn)
    if dim == 0:
        return
    wp.launch(
        kk.eval_ik_kernel,
        dim=dim,
        inputs=[
            model.articulation_start, model.articulation_end, int(model.articulation_count), model.joint_type,
            model.joint_parent, model.joint_child, model.joint_X_p, model.joint_X_c, model.joint_q_start,
            model.joint_qd_start, model.joint_dof_dim, model.joint_axis, model.body_com, model.body_flags, body_q,
            body_qd, mode, mask_arr, idx_arr, int(body_flag_filter),
        ],
        outputs=[joint_q, joint_qd],
        device=model.device,
    )  # fmt: skip


def eval_mimic(model, state_in, state_out=None, *, mask=None, indices=None) -> None:
    """Update follower joint coordinates from their reference joints.

    For each follower ``q_f[k] = offset + multiplier * q_ref[k]`` and ``qd_f[k] = multiplier *
    qd_ref[k]`` (``Model.joint_mimic_coeffs = (offset, multiplier)``); independent joints are
    left unchanged. With ``state_out`` the input coordinates of the processed joints are
    copied into it first and followers are evaluated from ``state_in``. ``mask`` / ``indices``
    select articulations (then only their joints are copied and updated); with neither all
    joints are processed, including joints outside articulations.

    Raises:
        ValueError: a state without joint coordinate arrays, both selectors, or a malformed selector.
    """
    fn = "eval_mimic"
    out = state_in if state_out is None else state_out
    arrays = []
    for what, st in (("state_in", state_in), ("state_out", out)):
        q = getattr(st, "joint_q", None)
        qd = getattr(st, "joint_qd", None)
        if not isinstance(q, wp.array) or not isinstance(qd, wp.array):
            raise ValueError(f"{fn}: {what} has no joint_q / joint_qd arrays")
        if q.shape[0] != model.joint_coord_count or qd.shape[0] != model.joint_dof_count:
            raise ValueError(
                f"{fn}: {what}.joint_q / joint_qd must have {model.joint_coord_count} / {model.joint_dof_count} entries"
            )
        arrays += [q, qd]
    q_in, qd_in, q_out, qd_out = arrays
    mode, mask_arr, idx_arr, dim = articulation_selector(model, mask, indices, fn)
    copy = int(q_out.ptr != q_in.ptr or qd_out.ptr != qd_in.ptr)
    mimic = model.joint_mimic_joint
    if mode == kk.SEL_ALL:
        if model.joint_count == 0:
            return
        if not copy and not _has_mimic(model):
            return
        wp.launch(
            kk.eval_mimic_joints_kernel,
            dim=model.joint_count,
            inputs=[mimic, model.joint_mimic_coeffs, model.joint_q_start, model.joint_qd_start, copy, q_in, qd_in],
            outputs=[q_out, qd_out],
            device=model.device,
        )
        return
    if dim == 0:
        return
    wp.launch(
        kk.eval_mimic_articulations_kernel,
        dim=dim,
        inputs=[
            model.articulation_start, model.articulation_end, int(model.articulation_count), mode, mask_arr, idx_arr,
            mimic, model.joint_mimic_coeffs, model.joint_q_start, model.joint_qd_start, copy, q_in, qd_in,
        ],
        outputs=[q_out, qd_out],
        device=model.device,
    )  # fmt: skip


def _has_mimic(model) -> bool:
    topo = topology(model)
    flag = topo.scratch.get("has_mimic")
    if flag is None:
        flag = bool((model.joint_mimic_joint.numpy() >= 0).any())
        topo.scratch["has_mimic"] = flag
    return flag

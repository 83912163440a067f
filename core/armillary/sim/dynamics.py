"""Joint-space dynamics of articulations: :func:`eval_mass_matrix`, :func:`eval_jacobian`,
:func:`eval_inverse_dynamics_passive` and :func:`eval_inverse_dynamics_force` (experimental).

The manipulator equation ``tau = M(q) qdd + C(q, qd) qd + g(q)`` in the generalized
coordinates of :mod:`armillary.sim.kinematics`. Every function is one Warp launch with one
thread per articulation (all worlds at once): the composite-rigid-body algorithm for ``M``
and the recursive Newton-Euler algorithm (zero acceleration) for the bias forces, both with
world-frame spatial algebra about a per-articulation reference point (:mod:`.spatial`).

Frames of the generalized forces: rows of FREE / DISTANCE joints in ``M`` use the joint's
generalized velocity (child-COM twist in the joint parent frame), while ``g`` and
``C qd`` of those joints are world-frame wrenches ``(f, tau)`` with the moment about the
child's COM (the ``Control.joint_f`` convention). For a root free joint the two coincide.

All functions read ``state.body_q`` (call :func:`~armillary.eval_fk` first) and
``state.joint_q`` / ``state.joint_qd``; they allocate scratch buffers on the first call for
a model and reuse them, so later calls do not allocate or synchronize.

Differentiable through ``wp.Tape`` (with respect to ``body_q``, ``joint_q``, ``joint_qd``,
``joint_qdd`` and the model's inertial and joint arrays): while a tape records, each call writes
its intermediates (motion subspaces, composite inertias, velocities, accelerations, forces) into
fresh arrays with gradients instead of the shared scratch, so that later calls on the same tape
cannot overwrite what its adjoint re-reads: 240 bytes per body and 24 per DOF per call, twice
that with the gradients. Outputs allocated here get ``requires_grad`` when the model or state
has it or a tape records. The kernels visit ancestors through the topology cache's ancestor
lists (no ``while`` walk) and carry nothing across the iterations of a dynamic loop, the two
patterns whose Warp adjoints are wrong.
"""

from __future__ import annotations

import warp as wp

from . import dynamics_kernels as dk
from . import kinematics_kernels as kk
from .array_checks import expect_array
from .enums import JointType
from .exceptions import warn_deprecated
from .kinematics import _as_bool_array, topology
from ..launch import tape_recording

__all__ = ["eval_mass_matrix", "eval_jacobian", "eval_inverse_dynamics_passive", "eval_inverse_dynamics_force"]

MISSING_OUTPUT_MESSAGE = "At least one inverse-dynamics output must be provided."


def _work_arrays(model, requires_grad: bool = False) -> dict:
    dev = model.device
    nb = max(int(model.body_count), 1)
    nd = max(int(model.joint_dof_count), 1)
    return {name: wp.zeros(n, dtype=dtype, device=dev, requires_grad=requires_grad)
            for name, n, dtype in (("S", nd, wp.spatial_vector), ("Ic", nb, wp.spatial_matrix),
                                   ("V", nb, wp.spatial_vector), ("A", nb, wp.spatial_vector),
                                   ("F", nb, wp.spatial_vector), ("Fg", nb, wp.spatial_vector))}  # fmt: skip


def _scratch(model):
    topo = topology(model)
    s = topo.scratch.get("dynamics")
    if s is None:
        dev = model.device
        nd = max(int(model.joint_dof_count), 1)
        s = _work_arrays(model)
        s.update({
            "dummy_dof": wp.zeros(1, dtype=wp.float32, device=dev),
            "zero_armature": wp.zeros(nd, dtype=wp.float32, device=dev),
            "dummy_H": wp.zeros((1, 1, 1), dtype=wp.float32, device=dev),
        })  # fmt: skip
        topo.scratch["dynamics"] = s
    return s


def _wants_grad(model, state) -> bool:
    """Whether an output allocated here gets ``requires_grad``: the model or state has it, or a tape records."""
    return bool(getattr(model, "requires_grad", False) or getattr(state, "requires_grad", False) or tape_recording())


def _work(model, **given) -> dict:
    """The intermediate arrays of one call: the cached scratch, or while a ``wp.Tape`` records,
    fresh ones with ``requires_grad`` (per-call storage: a later call on the same tape must not
    overwrite what the adjoint of an earlier one re-reads; 240 bytes per body and 24 per DOF,
    twice that with the gradients). ``given`` scratch arrays (``S``, ``Ic``) are used unless a tape
    records and they lack ``requires_grad`` (writing through them would cut the gradient)."""
    if tape_recording():
        work = _work_arrays(model, requires_grad=True)
        work.update({k: v for k, v in given.items() if v is not None and v.requires_grad})
        return work
    work = dict(_scratch(model))
    work.update({k: v for k, v in given.items() if v is not None})
    return work


def _has_rod(model) -> bool:
    topo = topology(model)
    flag = topo.scratch.get("has_rod")
    if flag is None:
        jt = model.joint_type
        flag = bool(model.joint_count) and jt is not None and bool((jt.numpy() == int(JointType.ROD)).any())
        topo.scratch["has_rod"] = flag
    return flag


def _mask(model, mask, fn):
    if mask is None:
        return kk.SEL_ALL, None
    if isinstance(mask, wp.array) and mask.ndim != 1:
        raise ValueError(f"{fn}: mask must be one-dimensional with shape ({model.articulation_count},); "
                         f"per-world masks are not supported, got shape {tuple(mask.shape)}")  # fmt: skip
    return kk.SEL_MASK, _as_bool_array(mask, int(model.articulation_count), "mask", fn, model)


def _mass_matrix_shape(model):
    n = int(model.max_dofs_per_articulation)
    return (int(model.articulation_count), n, n)


def _check_array(arr, shape, name, fn, model, dtype=wp.float32):
    if not isinstance(arr, wp.array):
        raise ValueError(f"{fn}: {name} must be a wp.array, got {type(arr).__name__}")
    if tuple(arr.shape) != tuple(shape) or arr.dtype != dtype:
        raise ValueError(
            f"{fn}: {name} must have shape {tuple(shape)} and dtype {wp.types.type_repr(dtype)}, got "
            f"{tuple(arr.shape)} {wp.types.type_repr(arr.dtype)}"
        )
    if wp.get_device(arr.device) != wp.get_device(model.device):
        raise ValueError(f"{fn}: {name} is on device {arr.device} but the model is on {model.device}")


# model arrays every dynamics function reads; ``None`` in any of them is a ValueError, never a crash
_REQUIRED = ("articulation_start", "articulation_end", "joint_type", "joint_parent", "joint_child", "joint_ancestor",
             "joint_articulation", "joint_X_p", "joint_X_c", "joint_q_start", "joint_qd_start", "joint_dof_dim",
             "joint_axis", "body_com", "body_mass", "body_inertia")  # fmt: skip


def _check_model_arrays(model, fn, names=_REQUIRED):
    missing = [n for n in names if getattr(model, n, None) is None]
    if missing:
        raise ValueError(f"{fn}: model.{missing[0]} is None; the model arrays {', '.join(missing)} are required")


_STATE_LAYOUT = {"body_q": ("body_count", wp.transform), "body_qd": ("body_count", wp.spatial_vector),
                 "joint_q": ("joint_coord_count", wp.float32), "joint_qd": ("joint_dof_count", wp.float32)}


def _check_state_arrays(state, fn, names=("body_q", "joint_q", "joint_qd"), model=None):
    missing = [n for n in names if getattr(state, n, None) is None]
    if missing:
        raise ValueError(f"{fn}: state.{missing[0]} is None; the state arrays {', '.join(missing)} are required")
    if model is not None:
        for name in names:
            count, dtype = _STATE_LAYOUT[name]
            n = int(getattr(model, count))
            expect_array(f"{fn}: state", name, getattr(state, name), n, dtype, wp.get_device(model.device),
                         required=True, hint=f"the model's {count} is {n}")  # fmt: skip


def _armature(model):
    """``(array, scale)``: ``model.joint_armature``, or zeros when it is ``None`` (rigid-body matrix)."""
    if model.joint_armature is None:
        return _scratch(model)["zero_armature"], 0.0
    return model.joint_armature, 1.0


def _gravity(model, want_g, fn):
    """``(model.gravity, model.joint_world)`` when ``g(q)`` is requested (both required), else
    stand-ins that the kernel reads instead (so ``None`` in either is harmless then)."""
    if want_g:
        _check_model_arrays(model, fn, ("gravity", "joint_world"))
        return model.gravity, model.joint_world
    s = _scratch(model)
    if "dummy_gravity" not in s:
        s["dummy_gravity"] = wp.zeros(1, dtype=wp.vec3, device=model.device)
        s["dummy_world"] = wp.full(max(int(model.joint_count), 1), -1, dtype=wp.int32, device=model.device)
    return s["dummy_gravity"], s["dummy_world"]


def _launch_dynamics(model, state, mode, mask_arr, H, g, c, armature_scale, S=None, Ic=None, fn="dynamics"):
    s = _scratch(model)
    w = _work(model, S=S, Ic=Ic)
    armature, present = _armature(model)
    gravity, joint_world = _gravity(model, g is not None, fn)
    topo = topology(model)
    anc_start, anc_joints = topo.ancestors()
    wp.launch(
        dk.dynamics_kernel,
        dim=int(model.articulation_count),
        inputs=[
            model.articulation_start, model.articulation_end, int(model.articulation_count), mode, mask_arr,
            topo.joint_order, model.joint_type, model.joint_parent, model.joint_child, model.joint_ancestor,
            model.joint_articulation, joint_world, model.joint_X_p, model.joint_X_c, model.joint_q_start,
            model.joint_qd_start, model.joint_dof_dim, model.joint_axis, armature, anc_start, anc_joints, state.body_q,
            model.body_com, model.body_mass, model.body_inertia, gravity, state.joint_q, state.joint_qd,
            int(H is not None), int(g is not None), int(c is not None), float(armature_scale * present),
            w["S"], w["Ic"], w["V"], w["A"], w["F"], w["Fg"],
        ],
        outputs=[
            s["dummy_H"] if H is None else H, s["dummy_dof"] if g is None else g, s["dummy_dof"] if c is None else c,
        ],
        device=model.device,
    )  # fmt: skip


def eval_mass_matrix(model, state, H=None, J=None, body_I_s=None, joint_S_s=None, mask=None, *,
                     include_armature: bool = True):  # fmt: skip
    """Joint-space mass matrix ``H = J^T M J`` of every articulation (``Model.joint_armature``
    added to the diagonal; a model whose ``joint_armature`` is ``None`` gives the rigid-body matrix).

    Consistent with the kinetic energy of COM-referenced body twists. Assembled with the
    composite-rigid-body algorithm, or as ``J^T M J`` when a Jacobian ``J`` (from
    :func:`eval_jacobian`) is passed.

    Args:
        model: the model.
        state: state with ``body_q`` consistent with ``joint_q`` (see :func:`~armillary.eval_fk`).
        H: optional output, float32 ``(articulation_count, max_dofs_per_articulation,
            max_dofs_per_articulation)``; allocated when ``None`` (with ``requires_grad`` when
            the model or state has it or a ``wp.Tape`` records). Padding is zero.
        J: optional Jacobian ``(articulation_count, 6 * max_joints_per_articulation, max_dofs)``.
        body_I_s: optional scratch ``wp.spatial_matrix`` array of shape ``(body_count,)``.
        joint_S_s: optional scratch ``wp.spatial_vector`` array of shape ``(joint_dof_count,)``.
            While a ``wp.Tape`` records, a scratch array without ``requires_grad`` is left alone
            (fresh arrays with gradients are used: see the module documentation).
        mask: optional bool ``(articulation_count,)``; unselected blocks are zero.
        include_armature: deprecated; ``False`` omits the armature (with a ``DeprecationWarning``).

    Returns:
        ``H``, or ``None`` when the model has no articulation.

    Raises:
        ValueError: a malformed ``mask`` (also two-dimensional ones) or output / scratch array, or
            a model / state array the computation reads being ``None`` (``joint_armature`` may be).
    """
    fn = "eval_mass_matrix"
    if not include_armature:
        warn_deprecated("eval_mass_matrix(include_armature=False) is deprecated; the armature will always be included")
    mode, mask_arr = _mask(model, mask, fn)
    if model.articulation_count == 0:
        return None
    _check_model_arrays(model, fn)
    _check_state_arrays(state, fn, model=model)
    shape = _mass_matrix_shape(model)
    if H is None:
        H = wp.zeros(shape, dtype=wp.float32, device=model.device, requires_grad=_wants_grad(model, state))
    else:
        _check_array(H, shape, "H", fn, model)
    if body_I_s is not None:
        _check_array(body_I_s, (model.body_count,), "body_I_s", fn, model, wp.spatial_matrix)
    if joint_S_s is not None:
        _check_array(joint_S_s, (model.joint_dof_count,), "joint_S_s", fn, model, wp.spatial_vector)
    scale = 1.0 if include_armature else 0.0
    if J is not None:
        _check_array(J, _jacobian_shape(model), "J", fn, model)
        armature, present = _armature(model)
        wp.launch(
            dk.mass_matrix_from_jacobian_kernel,
            dim=int(model.articulation_count),
            inputs=[model.articulation_start, model.articulation_end, mode, mask_arr, model.joint_child,
                    model.joint_qd_start, armature, scale * present, state.body_q, model.body_mass,
                    model.body_inertia, J],
            outputs=[H],
            device=model.device,
        )  # fmt: skip
        return H
    _launch_dynamics(model, state, mode, mask_arr, H, None, None, scale, S=joint_S_s, Ic=body_I_s, fn=fn)
    return H


def _jacobian_shape(model):
    return (int(model.articulation_count), 6 * int(model.max_joints_per_articulation),
            int(model.max_dofs_per_articulation))  # fmt: skip


def eval_jacobian(model, state, J=None, joint_S_s=None, mask=None):
    """Jacobian mapping each articulation's ``joint_qd`` to the COM twists ``(v_com, w)`` (world)
    of its links: ``J[a, 6 l : 6 l + 6] @ qd_a == state.body_qd[child of joint start_a + l]``.

    Args:
        J: optional output, float32 ``(articulation_count, 6 * max_joints_per_articulation,
            max_dofs_per_articulation)``; allocated when ``None`` (with
            ``requires_grad`` as for ``H`` in :func:`eval_mass_matrix`).
        joint_S_s: optional scratch ``wp.spatial_vector`` array ``(joint_dof_count,)``.
        mask: optional bool ``(articulation_count,)``; unselected blocks are zero.

    Returns:
        ``J``, or ``None`` when the model has no articulation.
    """
    fn = "eval_jacobian"
    mode, mask_arr = _mask(model, mask, fn)
    if model.articulation_count == 0:
        return None
    _check_model_arrays(model, fn)
    _check_state_arrays(state, fn, model=model)
    shape = _jacobian_shape(model)
    if J is None:
        J = wp.zeros(shape, dtype=wp.float32, device=model.device, requires_grad=_wants_grad(model, state))
    else:
        _check_array(J, shape, "J", fn, model)
    if joint_S_s is not None:
        _check_array(joint_S_s, (model.joint_dof_count,), "joint_S_s", fn, model, wp.spatial_vector)
    S = _work(model, S=joint_S_s)["S"]
    topo = topology(model)
    anc_start, anc_joints = topo.ancestors()
    wp.launch(
        dk.jacobian_kernel,
        dim=int(model.articulation_count),
        inputs=[model.articulation_start, model.articulation_end, mode, mask_arr, topo.joint_order, model.joint_type,
                model.joint_parent, model.joint_child, model.joint_X_p, model.joint_X_c, model.joint_q_start,
                model.joint_qd_start, model.joint_dof_dim, model.joint_axis, anc_start, anc_joints, state.body_q,
                model.body_com, state.joint_q, state.joint_qd, S],
        outputs=[J],
        device=model.device,
    )  # fmt: skip
    return J


def eval_inverse_dynamics_passive(model, state, *, mass_matrix=None, gravity_force=None, coriolis_force=None,
                                  mask=None) -> None:  # fmt: skip
    """Compute any of ``M(q)`` (with armature), ``g(q) = dU/dq`` and ``C(q, qd) qd`` (experimental).

    Only the requested (non-``None``) outputs are computed, in one launch. ``U(q) = sum_i
    -m_i g . x_com_i`` is the gravitational potential, so ``g`` is the force holding the
    system static. Requires ``state.body_q`` consistent with ``state.joint_q``; velocities are
    taken from ``state.joint_qd``. FREE / DISTANCE rows of ``g`` and ``C qd`` are world-frame
    wrenches about the child COM (see the module documentation). A model whose
    ``joint_armature`` is ``None`` gives the rigid-body ``M``.

    Args:
        mass_matrix: float32 ``(articulation_count, max_dofs, max_dofs)``; padding is zero.
        gravity_force, coriolis_force: float32 ``(joint_dof_count,)``.
        mask: optional bool ``(articulation_count,)``; unselected entries are zero.

    Raises:
        ValueError: a ROD joint in the model, no output requested ("At least one inverse-dynamics
            output must be provided."), an output or mask of the wrong shape, ``gravity_force``
            and ``coriolis_force`` being the same array, or a model / state array the computation
            reads being ``None``.
    """
    fn = "eval_inverse_dynamics_passive"
    if mass_matrix is None and gravity_force is None and coriolis_force is None:
        raise ValueError(MISSING_OUTPUT_MESSAGE)
    if gravity_force is not None and coriolis_force is not None and gravity_force.ptr == coriolis_force.ptr \
            and gravity_force.ptr is not None:  # fmt: skip
        raise ValueError(f"{fn}: gravity_force and coriolis_force must be different arrays")
    if mass_matrix is not None:
        _check_array(mass_matrix, _mass_matrix_shape(model), "mass_matrix", fn, model)
    for name, arr in (("gravity_force", gravity_force), ("coriolis_force", coriolis_force)):
        if arr is not None:
            _check_array(arr, (model.joint_dof_count,), name, fn, model)
    mode, mask_arr = _mask(model, mask, fn)
    if model.articulation_count == 0:
        if _has_rod(model):
            raise ValueError(f"{fn}: ROD joints are not supported by the inverse-dynamics pipeline")
        return
    _check_model_arrays(model, fn)
    _check_state_arrays(state, fn, model=model)
    if _has_rod(model):
        raise ValueError(f"{fn}: ROD joints are not supported by the inverse-dynamics pipeline")
    _launch_dynamics(model, state, mode, mask_arr, mass_matrix, gravity_force, coriolis_force, 1.0, fn=fn)


def eval_inverse_dynamics_force(model, state, *, mass_matrix, joint_qdd, coriolis_force, gravity_force, joint_f,
                                mask=None) -> None:  # fmt: skip
    """``joint_f = M(q) joint_qdd + C(q, qd) qd + g(q)`` (experimental).

    The inputs are the buffers of :func:`eval_inverse_dynamics_passive`. For FREE / DISTANCE
    joints the ``M qdd`` rows (joint parent frame) are rotated into the world frame with
    ``state.body_q`` before adding the world-frame bias wrenches, so ``joint_f`` follows the
    ``Control.joint_f`` convention throughout.

    A model without articulations returns at once, before any input is checked, and leaves
    ``joint_f`` untouched.

    Args:
        mask: optional bool ``(articulation_count,)``; unselected entries of ``joint_f`` are
            zeroed without reading the inputs.

    Raises:
        ValueError: a ROD joint in the model or an input, output or mask of the wrong shape.
    """
    fn = "eval_inverse_dynamics_force"
    if model.articulation_count == 0:
        return
    _check_array(mass_matrix, _mass_matrix_shape(model), "mass_matrix", fn, model)
    for name, arr in (("joint_qdd", joint_qdd), ("coriolis_force", coriolis_force), ("gravity_force", gravity_force),
                      ("joint_f", joint_f)):  # fmt: skip
        _check_array(arr, (model.joint_dof_count,), name, fn, model)
    mode, mask_arr = _mask(model, mask, fn)
    _check_model_arrays(model, fn, ("articulation_start", "articulation_end", "joint_type", "joint_parent", "joint_X_p",
                                    "joint_qd_start"))  # fmt: skip
    _check_state_arrays(state, fn, ("body_q",), model=model)
    if _has_rod(model):
        raise ValueError(f"{fn}: ROD joints are not supported by the inverse-dynamics pipeline")
    wp.launch(
        dk.inverse_dynamics_force_kernel,
        dim=int(model.articulation_count),
        inputs=[model.articulation_start, model.articulation_end, mode, mask_arr, model.joint_type, model.joint_parent,
                model.joint_X_p, model.joint_qd_start, state.body_q, mass_matrix, joint_qdd, coriolis_force,
                gravity_force],
        outputs=[joint_f],
        device=model.device,
    )  # fmt: skip

"""Control inputs of a simulation step: :class:`Control`."""

from __future__ import annotations

import warp as wp

from .checked import CheckedAttributes


class Control(CheckedAttributes):
    """Joint forces and drive targets. Create with :meth:`armillary.Model.control`.

    Attributes:
        joint_f: generalized joint forces, shape ``(joint_dof_count,)`` [N or N*m]; for FREE and
            DISTANCE joints a world-frame wrench ``(f, tau)`` about the child COM.
        joint_act: additional per-DOF actuation, shape ``(joint_dof_count,)``.
        joint_target_q: position targets, coordinate layout of ``joint_q`` (``joint_coord_count``).
        joint_target_qd: velocity targets, DOF layout of ``joint_qd`` (``joint_dof_count``).
        tri_activations, tet_activations, muscle_activations: soft-body / muscle activations or ``None``.
    """

    def __init__(self) -> None:
        self.joint_f: wp.array | None = None
        self.joint_act: wp.array | None = None
        self.joint_target_q: wp.array | None = None
        self.joint_target_qd: wp.array | None = None
        self.tri_activations: wp.array | None = None
        self.tet_activations: wp.array | None = None
        self.muscle_activations: wp.array | None = None

    def clear(self, model=None) -> None:
        """Reset all control inputs to zero.

        ``joint_target_q`` is restored from ``model.joint_target_q`` when ``model`` is
        given (zero is not a valid quaternion for BALL/FREE/DISTANCE coordinates).
        """
        for name, arr in vars(self).items():
            if not isinstance(arr, wp.array) or len(arr) == 0:
                continue
            if name == "joint_target_q" and model is not None and getattr(model, "joint_target_q", None) is not None:
                wp.copy(arr, model.joint_target_q)
            else:
                arr.zero_()

"""Per-DOF joint configuration: :class:`JointDofConfig` (``ModelBuilder.JointDofConfig``).

Units: linear DOFs in m, m/s, N, N/m; angular DOFs in rad, rad/s, N*m, N*m/rad.
"""

from __future__ import annotations

import math

import numpy as np
import warp as wp

from .enums import Axis, JointTargetMode
from .exceptions import warn_deprecated


def normalize_axis(axis, what: str = "joint axis") -> wp.vec3:
    """Convert an :class:`Axis`, ``"x"``-style string or 3-vector into a unit ``wp.vec3``.

    Raises ``ValueError`` for zero-length or non-finite vectors.
    """
    if isinstance(axis, (Axis, str, int)) and not isinstance(axis, bool):
        return wp.vec3(*Axis.from_any(axis).to_vector())
    try:
        v = np.asarray([float(x) for x in axis], dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{what} {axis!r} must be an Axis (X, Y, Z) or a 3-vector of floats") from None
    if v.shape != (3,):
        raise ValueError(f"{what} {axis!r} must have 3 components, got {v.size}")
    n = float(np.linalg.norm(v))
    if not math.isfinite(n) or n < 1e-12:
        raise ValueError(f"{what} {tuple(v.tolist())} must be a finite non-zero 3-vector (got length {n})")
    v = v / n
    return wp.vec3(float(v[0]), float(v[1]), float(v[2]))


def _deprecated(old: str, new: str):
    warn_deprecated(f"{old} is deprecated; use {new} instead.")


class JointDofConfig:
    """Configuration of one joint degree of freedom.

    Args:
        axis: DOF axis in the joint frame (unit vector; ``Axis`` or 3-vector).
        limit_lower, limit_upper: position limits [m or rad].
        limit_ke, limit_kd: limit stiffness / damping.
        target_q, target_qd: drive position / velocity targets (``None`` means 0).
        target_ke, target_kd: drive stiffness / damping gains.
        damping: passive damping (generalized force ``-damping * qd``).
        stiffness: passive spring stiffness (generalized force ``stiffness * (rest_q - q)``).
        rest_q: passive spring rest coordinate; ``None`` leaves it unspecified (resolved to 0).
        armature: added diagonal inertia [kg or kg*m^2].
        effort_limit, velocity_limit: actuator force and velocity limits.
        friction: joint friction coefficient.
        actuator_mode: optional :class:`JointTargetMode`.
        target_pos, target_vel: deprecated aliases of ``target_q`` / ``target_qd``.
    """

    def __init__(
        self,
        *,
        axis=Axis.X,
        limit_lower: float = -1e10,
        limit_upper: float = 1e10,
        limit_ke: float = 1e4,
        limit_kd: float = 1e1,
        target_q: float | None = None,
        target_qd: float | None = None,
        target_ke: float = 0.0,
        target_kd: float = 0.0,
        damping: float = 0.0,
        stiffness: float = 0.0,
        rest_q: float | None = None,
        armature: float = 0.0,
        effort_limit: float = 1e6,
        velocity_limit: float = 1e6,
        friction: float = 0.0,
        actuator_mode: JointTargetMode | None = None,
        target_pos: float | None = None,
        target_vel: float | None = None,
    ):
        if target_pos is not None:
            _deprecated("target_pos", "target_q")
            if target_q is None:
                target_q = target_pos
        if target_vel is not None:
            _deprecated("target_vel", "target_qd")
            if target_qd is None:
                target_qd = target_vel
        self.axis = normalize_axis(axis)
        self.limit_lower = float(limit_lower)
        self.limit_upper = float(limit_upper)
        self.limit_ke = float(limit_ke)
        self.limit_kd = float(limit_kd)
        self.target_q = 0.0 if target_q is None else float(target_q)
        self.target_qd = 0.0 if target_qd is None else float(target_qd)
        self.target_ke = float(target_ke)
        self.target_kd = float(target_kd)
        self.damping = float(damping)
        self.stiffness = float(stiffness)
        self.rest_q = None if rest_q is None else float(rest_q)
        self.armature = float(armature)
        self.effort_limit = float(effort_limit)
        self.velocity_limit = float(velocity_limit)
        self.friction = float(friction)
        self.actuator_mode = actuator_mode

    # deprecated aliases -------------------------------------------------
    @property
    def target_pos(self) -> float:
        _deprecated("target_pos", "target_q")
        return self.target_q

    @target_pos.setter
    def target_pos(self, value: float):
        _deprecated("target_pos", "target_q")
        self.target_q = float(value)

    @property
    def target_vel(self) -> float:
        _deprecated("target_vel", "target_qd")
        return self.target_qd

    @target_vel.setter
    def target_vel(self, value: float):
        _deprecated("target_vel", "target_qd")
        self.target_qd = float(value)

    @classmethod
    def create_unlimited(cls, axis) -> "JointDofConfig":
        """A DOF without limits and without limit gains."""
        return cls(axis=axis, limit_lower=-1e10, limit_upper=1e10, limit_ke=0.0, limit_kd=0.0)

    def validate(self, what: str, check_order: bool = True) -> None:
        """Raise ``ValueError`` naming ``what`` when a value is invalid."""
        for name in ("limit_lower", "limit_upper", "target_q", "target_qd"):
            if math.isnan(getattr(self, name)):
                raise ValueError(f"{what}: {name} is NaN; expected a finite number or +/-inf")
        for name in ("limit_ke", "limit_kd", "target_ke", "target_kd", "damping", "stiffness", "armature",
                     "effort_limit", "velocity_limit", "friction"):  # fmt: skip
            v = getattr(self, name)
            if math.isnan(v) or v < 0.0:
                raise ValueError(f"{what}: {name}={v} is invalid; expected a value >= 0")
        if self.rest_q is not None and not math.isfinite(self.rest_q):
            raise ValueError(f"{what}: rest_q={self.rest_q} must be finite")
        if check_order and self.limit_lower > self.limit_upper:
            raise ValueError(
                f"{what}: limit_lower={self.limit_lower} is greater than limit_upper={self.limit_upper}; "
                "expected limit_lower <= limit_upper"
            )

    def __repr__(self) -> str:
        return (
            f"JointDofConfig(axis={tuple(self.axis)}, limits=({self.limit_lower}, {self.limit_upper}), "
            f"target_q={self.target_q}, target_ke={self.target_ke}, target_kd={self.target_kd})"
        )

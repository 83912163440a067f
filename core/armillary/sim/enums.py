"""Enumerations of the data model: joint types, geometry types, axes and entity flags.

Integer values are stored in model arrays (``Model.joint_type``, ``Model.shape_type``,
``Model.body_flags``, ...), so they are part of the data layout: never renumber.
"""

from __future__ import annotations

import enum


class JointType(enum.IntEnum):
    """Type of a joint (``Model.joint_type``)."""

    PRISMATIC = 0
    """one translational DOF along ``axis``."""
    REVOLUTE = 1
    """one rotational DOF about ``axis``."""
    BALL = 2
    """three rotational DOFs; 4 coordinates (quaternion xyzw), 3 velocity DOFs."""
    FIXED = 3
    """no DOF."""
    FREE = 4
    """six DOFs; 7 coordinates (position, quaternion xyzw), 6 velocity DOFs."""
    DISTANCE = 5
    """like FREE in coordinates, constrained to a distance range by solvers."""
    D6 = 6
    """up to three linear and three angular DOFs, linear first."""
    ROD = 7
    """Cosserat rod segment joint."""

    def dof_count(self, num_axes: int = 0) -> tuple[int, int]:
        """Return ``(dof_count, coord_count)`` of this joint type (the reference engine's order).

        ``dof_count`` is the number of velocity DOFs (entries of ``joint_qd``), ``coord_count`` the number
        of position coordinates (entries of ``joint_q``). ``num_axes`` is the number of configured axes,
        used by PRISMATIC, REVOLUTE and D6 (one DOF and one coordinate per axis).
        """
        if self in (JointType.PRISMATIC, JointType.REVOLUTE, JointType.D6):
            return num_axes, num_axes
        if self == JointType.BALL:
            return 3, 4
        if self in (JointType.FREE, JointType.DISTANCE, JointType.ROD):
            return 6, 7
        return 0, 0  # FIXED


class GeoType(enum.IntEnum):
    """Geometry type of a shape (``Model.shape_type``)."""

    NONE = 0
    PLANE = 1
    HFIELD = 2
    SPHERE = 3
    CAPSULE = 4
    ELLIPSOID = 5
    CYLINDER = 6
    BOX = 7
    MESH = 8
    CONE = 9
    CONVEX_MESH = 10
    GAUSSIAN = 11


class Axis(enum.IntEnum):
    """A coordinate axis; ``int(Axis.Z) == 2``."""

    X = 0
    Y = 1
    Z = 2

    @classmethod
    def from_any(cls, value) -> "Axis":
        """Convert ``Axis``, ``0..2`` or ``"x"/"y"/"z"`` (any case) into an ``Axis``."""
        if isinstance(value, Axis):
            return value
        if isinstance(value, str):
            try:
                return cls[value.upper()]
            except KeyError:
                raise ValueError(f"axis {value!r} is not one of 'X', 'Y', 'Z'") from None
        try:
            return cls(int(value))
        except (ValueError, TypeError):
            raise ValueError(f"axis {value!r} is not one of Axis.X, Axis.Y, Axis.Z (0, 1, 2)") from None

    def to_vector(self) -> tuple[float, float, float]:
        """Unit vector along this axis."""
        v = [0.0, 0.0, 0.0]
        v[int(self)] = 1.0
        return tuple(v)

    def __str__(self) -> str:  # "Axis.Z" -> "Z"
        return self.name


class BodyFlags(enum.IntFlag):
    """Per-body flags (``Model.body_flags``)."""

    DYNAMIC = 1
    KINEMATIC = 2
    PROXY = 4
    ALL = 7


class ShapeFlags(enum.IntFlag):
    """Per-shape flags (``Model.shape_flags``)."""

    VISIBLE = 1
    COLLIDE_SHAPES = 2
    COLLIDE_PARTICLES = 4
    SITE = 8
    HYDROELASTIC = 16


class ParticleFlags(enum.IntFlag):
    """Per-particle flags (``Model.particle_flags``)."""

    ACTIVE = 1
    PROXY = 2


class JointTargetMode(enum.IntEnum):
    """Drive mode of a joint DOF (``Model.joint_target_mode``).

    ``NONE`` leaves the choice to the solver (drives act when their gains are non-zero).
    """

    NONE = 0
    POSITION = 1
    VELOCITY = 2
    POSITION_VELOCITY = 3
    EFFORT = 4

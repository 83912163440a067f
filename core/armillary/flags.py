"""Bit flags shared by the model, the state and every solver.

``ModelFlags`` tells :meth:`armillary.solvers.SolverBase.notify_model_changed`
which groups of model arrays a user edited; ``StateFlags`` selects what
:meth:`~armillary.solvers.SolverBase.reset` re-initialises. Both are
:class:`enum.IntFlag`, so plain integers (including custom bits above
``ALL``, for third-party solvers) pass through unchanged.
"""

from __future__ import annotations

import enum


class ModelFlags(enum.IntFlag):
    """Groups of model properties that can change between steps."""

    JOINT_PROPERTIES = 1 << 0
    """joint_type-independent joint data: parent/child transforms, enabled, ..."""
    JOINT_DOF_PROPERTIES = 1 << 1
    """per-DOF data: axes, limits, gains, armature, friction, springs."""
    BODY_PROPERTIES = 1 << 2
    """body flags, kinematic status, body transforms used as references."""
    BODY_INERTIAL_PROPERTIES = 1 << 3
    """body mass, inertia, center of mass (and their inverses)."""
    SHAPE_PROPERTIES = 1 << 4
    """shape transforms, sizes, materials, margins and gaps."""
    MODEL_PROPERTIES = 1 << 5
    """model-wide settings: gravity, soft-contact parameters."""
    CONSTRAINT_PROPERTIES = 1 << 6
    """equality / loop-closure constraint data."""
    TENDON_PROPERTIES = 1 << 7
    """tendon data."""
    ACTUATOR_PROPERTIES = 1 << 8
    """actuator data."""
    JOINT_DOF_FORCE_PROPERTIES = 1 << 9
    """the force-producing subset of DOF data: stiffness, damping, gains."""
    JOINT_DOF_INERTIAL_PROPERTIES = 1 << 10
    """the inertial subset of DOF data: armature."""
    JOINT_REFERENCE_POSE_PROPERTIES = 1 << 11
    """rest coordinates (``joint_rest_q``) of passive springs."""
    SHAPE_TYPE_AND_SOURCE = 1 << 12
    """shape geometry type and its source (mesh, heightfield)."""
    ALL = (1 << 13) - 1
    """every built-in group."""


class StateFlags(enum.IntFlag):
    """Parts of a :class:`~armillary.State` that ``reset`` may re-initialise."""

    NONE = 0
    JOINT_Q = 1 << 0
    JOINT_QD = 1 << 1
    BODY_Q = 1 << 2
    BODY_QD = 1 << 3
    PARTICLE_Q = 1 << 4
    PARTICLE_QD = 1 << 5
    BODY_F = 1 << 6
    PARTICLE_F = 1 << 7
    JOINT_F = 1 << 8
    BODY = BODY_Q | BODY_QD
    PARTICLE = PARTICLE_Q | PARTICLE_QD
    JOINT = JOINT_Q | JOINT_QD
    FORCE = BODY_F | PARTICLE_F | JOINT_F
    ALL = (1 << 9) - 1

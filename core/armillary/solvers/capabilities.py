"""What a solver declares it can do, checked when it is constructed.

Every solver class sets ``capabilities = SolverCapabilities(...)``. The
declaration is the single source of truth for:

* the early checks in :class:`~armillary.solvers.SolverBase` (a model that
  uses a joint type or feature the solver lacks is rejected at construction
  with an error naming the entity);
* the per-solver feature table in the README (``armillary features``);
* the conformance kit (:mod:`armillary.testing`), which runs a physical check
  for every declared feature, so a declaration cannot lie unnoticed.
"""

from __future__ import annotations

import dataclasses
import enum

from ..sim.enums import JointType


class Coordinates(str, enum.Enum):
    """Which state a solver integrates."""

    GENERALIZED = "generalized"
    """``State.joint_q`` / ``joint_qd`` (reduced coordinates); body poses follow by FK."""
    MAXIMAL = "maximal"
    """``State.body_q`` / ``body_qd`` (and particles); joints are constraints."""


FEATURES: dict[str, str] = {
    "rigid_bodies": "integrates rigid bodies (body_q/body_qd) under gravity",
    "body_forces": "applies external body wrenches State.body_f (world frame, at the COM)",
    "joint_forces": "applies generalized forces Control.joint_f",
    "kinematic_bodies": "honours kinematic bodies (prescribed motion, infinite mass in contacts)",
    "rigid_contacts": "resolves rigid contacts (shape-shape, including the ground plane)",
    "friction": "applies Coulomb friction at rigid contacts",
    "restitution": "applies restitution at rigid contacts",
    "particles": "integrates particles (particle_q/particle_qd) under gravity",
    "particle_forces": "applies external particle forces State.particle_f",
    "particle_contacts": "resolves particle-shape and particle-particle contacts",
    "springs": "simulates particle springs",
    "cloth": "simulates cloth triangles (membrane and bending)",
    "soft_bodies": "simulates tetrahedral soft bodies",
    "joint_limits": "enforces joint position limits",
    "joint_drives": "applies PD drives towards Control.joint_target_q / joint_target_qd",
    "joint_springs": "applies passive joint springs (joint_stiffness, joint_rest_q)",
    "joint_armature": "adds joint armature (Model.joint_armature) to the joint-space inertia",
    "joint_damping": "applies passive joint damping (Model.joint_damping)",
    "joint_friction": "applies joint dry friction (Model.joint_friction)",
    "joint_velocity_limits": "clamps joint velocities to Model.joint_velocity_limit",
    "joint_limit_springs": "enforces joint limits as springs with Model.joint_limit_ke / joint_limit_kd",
    "mimic_joints": "enforces mimic relationships between joints",
    "loop_joints": "enforces loop-closing joints",
    "multiple_worlds": "steps several worlds (Model.world_count > 1) independently",
    "reset_world_mask": "reset() re-initialises only the worlds selected by world_mask",
}
"""Every feature name a solver may declare, with its meaning (the README legend)."""


@dataclasses.dataclass(frozen=True)
class SolverCapabilities:
    """A solver's declaration of what it supports.

    Attributes:
        coordinates: which state the solver integrates (:class:`Coordinates`).
        joint_types: joint types the solver can simulate; a model containing
            any other joint type is rejected at construction.
        features: names from :data:`FEATURES`.
        deterministic: two runs with the same inputs give bit-identical states.
        collision_pipeline: ``step`` consumes :class:`~armillary.Contacts`
            produced by the core collision pipeline.
        differentiable: ``step`` records on a ``wp.Tape`` so that ``tape.backward`` gives
            gradients of its outputs with respect to its inputs (state, control, model arrays
            finalized with ``requires_grad=True``). Stepping a solver that does not declare it while
            a tape records on a model or state that requires gradients raises
            :class:`~armillary.solvers.NotDifferentiableError` (never silent zero gradients).
    """

    coordinates: Coordinates
    joint_types: frozenset = frozenset()
    features: frozenset = frozenset()
    deterministic: bool = False
    collision_pipeline: bool = False
    differentiable: bool = False

    def __post_init__(self):
        object.__setattr__(self, "coordinates", Coordinates(self.coordinates))
        try:
            joint_types = frozenset(JointType(j) if not isinstance(j, str) else JointType[j] for j in self.joint_types)
        except (KeyError, ValueError) as e:
            raise ValueError(
                f"SolverCapabilities.joint_types: unknown joint type {e.args[0]!r}; "
                f"allowed: {', '.join(t.name for t in JointType)}"
            ) from None
        object.__setattr__(self, "joint_types", joint_types)
        features = frozenset(self.features)
        unknown = sorted(features - FEATURES.keys())
        if unknown:
            raise ValueError(
                f"SolverCapabilities.features: unknown feature(s) {unknown}; "
                f"allowed: {', '.join(sorted(FEATURES))}"
            )
        object.__setattr__(self, "features", features)

    def supports(self, feature: str) -> bool:
        """True when ``feature`` (a :data:`FEATURES` key) is declared."""
        if feature not in FEATURES:
            raise ValueError(f"unknown feature {feature!r}; allowed: {', '.join(sorted(FEATURES))}")
        return feature in self.features

"""Resolved option groups that :class:`~armillary_solver_vbd.solver.SolverVBD` hands to its halves.

The solver validates and resolves its constructor arguments (the reference engine's names and
defaults) into these frozen records, so the particle and rigid halves receive plain numbers.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class SelfContactConfig:
    """Particle self-contact (vertex-triangle and edge-edge) settings.

    Attributes:
        margin: interaction distance [m]: a vertex-triangle or edge-edge pair closer than this
            repels (the contact surface is offset by ``margin`` from the mesh).
        gap: extra detection-only distance [m]; detection queries use ``margin + gap``.
        vertex_buffer_size: vertex-triangle candidates kept per vertex (extra ones dropped).
        edge_buffer_size: edge-edge candidates kept per edge (extra ones dropped).
        edge_parallel_epsilon: near-parallel edge threshold of the edge-edge closest points.
        topological_filter_threshold: pairs within this many rings of each other are ignored.
        rest_exclusion_radius: pairs closer than this [m] in the rest shape (``model.particle_q``)
            are ignored.
        bound_relaxation: in (0, 1]: each vertex may move at most
            ``0.5 * bound_relaxation * (margin + gap)`` between two detections (displacement
            truncation keeps the contact set valid, so no pair can tunnel undetected).
        contact_ke: contact stiffness [N/m] (``model.soft_contact_ke``).
        contact_kd: contact damping ratio (``model.soft_contact_kd``) [s].
        contact_mu: friction coefficient (``model.soft_contact_mu``).
    """

    margin: float = 0.2
    gap: float = 0.0
    vertex_buffer_size: int = 32
    edge_buffer_size: int = 64
    edge_parallel_epsilon: float = 1.0e-5
    topological_filter_threshold: int = 2
    rest_exclusion_radius: float = 0.0
    bound_relaxation: float = 0.85
    contact_ke: float = 1.0e3
    contact_kd: float = 0.0
    contact_mu: float = 0.5


@dataclasses.dataclass(frozen=True)
class AVBDConfig:
    """Rigid-body (AVBD) settings, resolved from the solver's ``rigid_*`` arguments.

    Attributes:
        joint_alpha, contact_alpha: C0 stabilisation ``C_stab = C - alpha * C0`` in [0, 1]
            (compliant ALM default 0; legacy default 0.95).
        linear_beta, angular_beta: legacy penalty ramp per iteration [N/m, N m/rad per m or rad
            of violation]; 0 keeps penalties fixed.
        gamma: per-step retention of multipliers (and legacy penalties) in [0, 1].
        contact_hard: legacy body-body contact mode (hard ALM when True, penalty when False).
        contact_k_start: legacy contact penalty seed [N/m].
        joint_linear_ke, joint_angular_ke: material stiffness of the structural joint rows of
            non-rod joints [N/m, N m/rad].
        joint_linear_k_start, joint_angular_k_start: legacy joint penalty seeds.
        joint_linear_kd, joint_angular_kd: damping of the structural joint rows [N s/m, N m s/rad].
    """

    joint_alpha: float = 0.0
    contact_alpha: float = 0.0
    linear_beta: float = 0.0
    angular_beta: float = 0.0
    gamma: float = 0.999
    contact_hard: bool = True
    contact_k_start: float = 100.0
    joint_linear_ke: float = 1.0e5
    joint_angular_ke: float = 1.0e5
    joint_linear_k_start: float = 100.0
    joint_angular_k_start: float = 10.0
    joint_linear_kd: float = 0.0
    joint_angular_kd: float = 0.0

"""Scene callables of the coupling studies (``source = "armillary.sweep.scenes:<name>"``).

Each returns ``(builder, entries)``: an un-finalized :class:`~armillary.ModelBuilder` and the
ownership of the coupled entries (entry name -> ``{"bodies": [...], "particles": [...]}``; ids or
labels). Units SI, z up; quaternions xyzw. The initial joint coordinates are set in the builder
(``builder.joint_q``); the sweep evaluates the forward kinematics before the first step.
"""

from __future__ import annotations

import numpy as np

LINK_LENGTH = 0.5  # [m]
LINK_RADIUS = 0.04  # [m] (inertia of a thin rod of this radius)


def _rod_inertia(mass: float, length: float):
    r = LINK_RADIUS
    return np.diag([mass * r * r / 6, mass * (length * length + r * r) / 12, mass * (length * length + r * r) / 12])


def two_link_pendulum(theta1: float = 1.0707963267948966, theta2: float = 0.3, mass1: float = 1.0,
                      mass2: float = 1.0):
    """Two rods (``link1``, ``link2``; length 0.5 m, masses ``mass1``, ``mass2`` [kg]) joined by a
    revolute joint about +y; ``link1`` hinged to the world at z = 2 m. ``theta1``: link 1's angle
    from +x about +y [rad]; ``theta2``: link 2's angle relative to link 1 [rad].

    Entries: ``rigid`` owns ``link1``, ``soft`` owns ``link2``; the joint between them is coupled."""
    import warp as wp

    import armillary

    L = LINK_LENGTH
    b = armillary.ModelBuilder()
    l1 = b.add_link(mass=mass1, inertia=_rod_inertia(mass1, L), label="link1")
    l2 = b.add_link(mass=mass2, inertia=_rod_inertia(mass2, L), label="link2")
    j0 = b.add_joint_revolute(-1, l1, parent_xform=wp.transform((0.0, 0.0, 2.0), wp.quat_identity()),
                              child_xform=wp.transform((-L / 2, 0.0, 0.0), wp.quat_identity()), axis=(0, 1, 0))
    j1 = b.add_joint_revolute(l1, l2, parent_xform=wp.transform((L / 2, 0.0, 0.0), wp.quat_identity()),
                              child_xform=wp.transform((-L / 2, 0.0, 0.0), wp.quat_identity()), axis=(0, 1, 0))
    b.add_articulation([j0, j1])
    b.joint_q[0] = float(theta1)
    b.joint_q[1] = float(theta2)
    return b, {"rigid": {"bodies": ["link1"]}, "soft": {"bodies": ["link2"]}}


def rope_on_pendulum(segments: int = 10, segment_length: float = 0.05, particle_mass: float = 0.01,
                     spring_stiffness: float = 1.0e4, theta: float = 0.0):
    """A rod (``link``, 0.5 m, 1 kg) hinged to the world at z = 2 m about +y, at angle ``theta``
    from +x [rad], with a rope of ``segments`` particles (``particle_mass`` [kg], radius 0.01 m)
    hanging from its tip, ``segment_length`` [m] apart, joined by springs (``spring_stiffness``
    [N/m], damping 1 N s/m); the first particle is attached to the rod's tip by a body-particle
    attachment (``SolverCoupledADMM.add_body_particle_attachment``).

    Entries: ``pendulum`` owns the rod, ``rope`` owns every particle; the attachment is coupled."""
    import warp as wp

    import armillary
    from armillary.solvers.experimental.coupled import SolverCoupledADMM

    L = LINK_LENGTH
    b = armillary.ModelBuilder()
    link = b.add_link(mass=1.0, inertia=_rod_inertia(1.0, L), label="link")
    j0 = b.add_joint_revolute(-1, link, parent_xform=wp.transform((0.0, 0.0, 2.0), wp.quat_identity()),
                              child_xform=wp.transform((-L / 2, 0.0, 0.0), wp.quat_identity()), axis=(0, 1, 0))
    b.add_articulation([j0])
    b.joint_q[0] = float(theta)
    c, s = np.cos(theta), np.sin(theta)
    tip = np.array([L * c, 0.0, 2.0 - L * s])  # rotation about +y by theta takes +x to (cos, 0, -sin)
    parts = [b.add_particle(tuple(tip + np.array([0.0, 0.0, -segment_length * i])), (0.0, 0.0, 0.0), particle_mass,
                            radius=0.01) for i in range(int(segments))]  # fmt: skip
    for i in range(len(parts) - 1):
        b.add_spring(parts[i], parts[i + 1], float(spring_stiffness), 1.0, 0.0)
    SolverCoupledADMM.add_body_particle_attachment(b, link, parts[0], body_point=(L / 2, 0.0, 0.0))
    return b, {"pendulum": {"bodies": ["link"]}, "rope": {"particles": list(range(len(parts)))}}

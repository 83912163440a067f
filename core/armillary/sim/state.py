"""Time-varying simulation state: :class:`State`.

Conventions: ``body_q`` holds world transforms ``(px, py, pz, qx, qy, qz, qw)``
of the body frames; ``body_qd`` holds twists ``(v, w)`` with ``v`` the linear
velocity of the body's center of mass and ``w`` the angular velocity, both in
the world frame [m/s, rad/s]; ``body_f`` holds wrenches ``(f, tau)`` in the
world frame with the torque taken about the center of mass [N, N*m].
"""

from __future__ import annotations

import warp as wp

from .checked import CheckedAttributes


class State(CheckedAttributes):
    """Positions, velocities and external forces of bodies, joints and particles.

    Create with :meth:`armillary.Model.state`. Attributes are ``None`` when the
    model has no entity of that kind.

    Attributes:
        body_q: ``wp.array(dtype=wp.transform)``, shape ``(body_count,)``.
        body_qd: ``wp.array(dtype=wp.spatial_vector)``, shape ``(body_count,)``, ``(v_com, w)`` world frame.
        body_f: ``wp.array(dtype=wp.spatial_vector)``, shape ``(body_count,)``, ``(f, tau_com)`` world frame.
        joint_q: ``wp.array(dtype=float)``, shape ``(joint_coord_count,)``.
        joint_qd: ``wp.array(dtype=float)``, shape ``(joint_dof_count,)``.
        particle_q, particle_qd, particle_f: ``wp.array(dtype=wp.vec3)``, shape ``(particle_count,)``.
    """

    def __init__(self) -> None:
        self.body_q: wp.array | None = None
        self.body_qd: wp.array | None = None
        self.body_f: wp.array | None = None
        self.joint_q: wp.array | None = None
        self.joint_qd: wp.array | None = None
        self.particle_q: wp.array | None = None
        self.particle_qd: wp.array | None = None
        self.particle_f: wp.array | None = None
        self.requires_grad: bool = False

    @property
    def body_count(self) -> int:
        return 0 if self.body_q is None else len(self.body_q)

    @property
    def joint_coord_count(self) -> int:
        return 0 if self.joint_q is None else len(self.joint_q)

    @property
    def joint_dof_count(self) -> int:
        return 0 if self.joint_qd is None else len(self.joint_qd)

    @property
    def particle_count(self) -> int:
        return 0 if self.particle_q is None else len(self.particle_q)

    def clear_forces(self) -> None:
        """Zero ``body_f`` and ``particle_f`` (when present)."""
        for name in ("body_f", "particle_f"):
            arr = getattr(self, name, None)
            if arr is not None and len(arr):
                arr.zero_()

    def _arrays(self) -> dict:
        return {k: v for k, v in vars(self).items() if isinstance(v, wp.array)}

    def assign(self, other: "State") -> None:
        """Copy every array attribute of ``other`` into this state's arrays (in place).

        Raises:
            ValueError: if an attribute is an array in one state and ``None`` in the
                other, or the shapes differ.
        """
        names = set(self._arrays()) | set(other._arrays())
        for name in sorted(names):
            dst, src = getattr(self, name, None), getattr(other, name, None)
            if dst is None or src is None:
                raise ValueError(
                    f"State.assign: attribute '{name}' is allocated in one state but None in the other"
                )
            if dst.shape != src.shape:
                raise ValueError(f"State.assign: attribute '{name}' has shape {dst.shape} here but {src.shape} in other")
            wp.copy(dst, src)

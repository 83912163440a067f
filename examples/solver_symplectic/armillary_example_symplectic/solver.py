"""``SolverSymplecticEuler``: a small third-party solver for armillary.

It integrates free rigid bodies and particles with semi-implicit
(symplectic) Euler and resolves contacts with penalty springs. It is an
example of the solver contract, not a production solver: contacts are found
by brute force (O(shapes x shapes) per step) and only spheres, capsules and
boxes against planes and sphere-sphere pairs collide.
"""

from __future__ import annotations

import numpy as np
import warp as wp

from armillary.flags import ModelFlags
from armillary.sim.enums import GeoType, JointType, ShapeFlags
from armillary.solvers import Coordinates, SolverBase, SolverCapabilities
from armillary.solvers.observables import begin_step

from . import kernels

__all__ = ["SolverSymplecticEuler"]


class SolverSymplecticEuler(SolverBase):
    """Semi-implicit Euler for free rigid bodies and particles, with penalty contacts.

    Each step is two Warp launches (shape poses, then one fused kernel):

    * rigid bodies: the COM velocity is advanced by gravity (per world), the
      external wrench ``State.body_f`` and contact forces, then the position
      by the new velocity; the angular velocity is advanced in the body frame
      with an implicit gyroscopic term, and the orientation by
      ``q += dt/2 (w, 0) q``, renormalised. Kinematic bodies move with their
      prescribed velocity and are never pushed;
    * particles: gravity and ``State.particle_f`` (no particle contacts);
    * contacts: sphere/capsule/box vs plane and sphere vs sphere, within a
      world or against global shapes (world -1): a spring-damper normal force
      ``max(ke * depth - kd * vn, 0)`` and regularised Coulomb friction
      ``-mu fn vt / sqrt(|vt|^2 + friction_smoothing^2)``.

    Forces are gathered per body without atomics, so runs are bit-for-bit
    reproducible. ``step`` never synchronises with the host.

    Args:
        model: the model to simulate (free bodies only: joints other than
            FREE are rejected).
        contact_ke: contact stiffness [N/m]; ``None`` (default) uses the mean
            of the two shapes' ``shape_material_ke``.
        contact_kd: contact damping [N s/m]; ``None`` uses the mean of
            ``shape_material_kd``.
        contact_mu: friction coefficient; ``None`` uses the mean of
            ``shape_material_mu``.
        friction_smoothing: velocity [m/s] below which friction becomes
            viscous instead of Coulomb (regularisation). Explicit friction is
            stable when ``friction_smoothing > mu * g * dt / 2``.
        angular_damping: angular velocity decay rate [1/s] (0 = none).

    Stability: like every explicit penalty method it needs
    ``dt < 2 / sqrt(ke_total / m)`` and ``dt < 2 m / kd_total``.
    """

    capabilities = SolverCapabilities(
        coordinates=Coordinates.MAXIMAL,
        joint_types=frozenset({JointType.FREE}),
        features=frozenset(
            {
                "rigid_bodies",
                "body_forces",
                "kinematic_bodies",
                "rigid_contacts",
                "friction",
                "particles",
                "particle_forces",
                "multiple_worlds",
                "reset_world_mask",
            }
        ),
        deterministic=True,
    )
    # solver observables this solver fills (docs/observables.md): the standard body accelerations
    SUPPORTED_OBSERVABLES = frozenset({"body_qdd"})

    def __init__(
        self,
        model,
        *,
        contact_ke: float | None = None,
        contact_kd: float | None = None,
        contact_mu: float | None = None,
        friction_smoothing: float = 0.05,
        angular_damping: float = 0.0,
    ):
        super().__init__(model)
        for name, value in (("contact_ke", contact_ke), ("contact_kd", contact_kd), ("contact_mu", contact_mu)):
            if value is not None and not (float(value) >= 0.0):
                raise ValueError(f"SolverSymplecticEuler: {name} must be >= 0 or None, got {value!r}")
        if not float(friction_smoothing) > 0.0:
            raise ValueError(f"SolverSymplecticEuler: friction_smoothing must be > 0, got {friction_smoothing!r}")
        if not float(angular_damping) >= 0.0:
            raise ValueError(f"SolverSymplecticEuler: angular_damping must be >= 0, got {angular_damping!r}")
        self.contact_ke = contact_ke
        self.contact_kd = contact_kd
        self.contact_mu = contact_mu
        self.friction_smoothing = float(friction_smoothing)
        self.angular_damping = float(angular_damping)

        self.body_count = int(getattr(model, "body_count", 0) or 0)
        self.particle_count = int(getattr(model, "particle_count", 0) or 0)
        # scratch copies used when step() is called in place (state_in is state_out)
        self._scratch_body_q = None
        self._scratch_body_qd = None
        if self.body_count:
            self._scratch_body_q = wp.empty(self.body_count, dtype=wp.transform, device=self.device)
            self._scratch_body_qd = wp.empty(self.body_count, dtype=wp.spatial_vector, device=self.device)
        self._build_shape_tables()

    # ------------------------------------------------------------------ setup
    def _build_shape_tables(self) -> None:
        """Host-side (setup only): collision shape lists per body and per world, bounding radii."""
        model = self.model
        shape_count = int(getattr(model, "shape_count", 0) or 0)
        if shape_count == 0 and getattr(model, "shape_type", None) is not None:
            shape_count = int(model.shape_type.shape[0])
        self.shape_count = shape_count
        body_count = self.body_count
        world_count = int(getattr(model, "world_count", 1) or 1)
        collide = np.zeros(shape_count, dtype=bool)
        bound = np.zeros(shape_count, dtype=np.float32)
        shape_body = np.zeros(0, np.int64)
        shape_world = np.zeros(0, np.int64)
        if shape_count:
            shape_body = model.shape_body.numpy().astype(np.int64)
            shape_world = model.shape_world.numpy().astype(np.int64)
            shape_type = model.shape_type.numpy()
            scale = model.shape_scale.numpy().astype(np.float64)
            collide = np.isin(
                shape_type, [int(GeoType.PLANE), int(GeoType.SPHERE), int(GeoType.CAPSULE), int(GeoType.BOX)]
            )
            flags = getattr(model, "shape_flags", None)
            if flags is not None:
                collide &= (flags.numpy() & int(ShapeFlags.COLLIDE_SHAPES)) != 0
            bound = np.where(shape_type == int(GeoType.SPHERE), scale[:, 0], 0.0)
            bound = np.where(shape_type == int(GeoType.CAPSULE), scale[:, 0] + scale[:, 1], bound)
            bound = np.where(shape_type == int(GeoType.BOX), np.linalg.norm(scale, axis=1), bound)
            bound = np.where(shape_type == int(GeoType.PLANE), -1.0, bound).astype(np.float32)
        # shapes owned by each body (CSR over bodies)
        owned = np.nonzero((shape_body >= 0) & collide)[0]
        owned = owned[np.argsort(shape_body[owned], kind="stable")]
        counts = np.bincount(shape_body[owned], minlength=body_count)[:body_count] if body_count else []
        body_start = np.zeros(body_count + 1, dtype=np.int32)
        body_start[1:] = np.cumsum(counts)
        # collision candidates grouped by world (group 0: global shapes, group w + 1: world w)
        cand = np.nonzero(collide)[0]
        group = np.clip(shape_world[cand] + 1, 0, world_count) if cand.size else np.zeros(0, np.int64)
        cand = cand[np.argsort(group, kind="stable")]
        group_start = np.zeros(world_count + 2, dtype=np.int32)
        group_start[1:] = np.cumsum(np.bincount(group, minlength=world_count + 1)[: world_count + 1])

        dev = self.device

        def ints(a):
            a = np.asarray(a, dtype=np.int32)
            return wp.array(a if a.size else np.zeros(1, np.int32), dtype=wp.int32, device=dev)

        self._body_shape_start = wp.array(body_start, dtype=wp.int32, device=dev)
        self._body_shape_ids = ints(owned)
        self._group_start = wp.array(group_start, dtype=wp.int32, device=dev)
        self._group_ids = ints(cand)
        self._shape_bound = wp.array(bound if bound.size else np.zeros(1, np.float32), dtype=float, device=dev)
        self._shape_X = wp.empty(max(shape_count, 1), dtype=wp.transform, device=dev)

    def notify_model_changed(self, flags) -> None:
        """Refresh the collision tables after shape edits; everything else is read live from the model."""
        super().notify_model_changed(flags)
        value = int(flags)
        if value & int(ModelFlags.SHAPE_PROPERTIES | ModelFlags.SHAPE_TYPE_AND_SOURCE):
            self._build_shape_tables()

    # ------------------------------------------------------------------- step
    def step(self, state_in, state_out, control, contacts, dt: float, *, observables=None) -> None:
        """Advance ``state_in`` by ``dt`` into ``state_out`` (``control`` and ``contacts`` are unused).

        ``state_in`` is only read. Calling with ``state_in is state_out`` is
        allowed (the body state is first copied to internal scratch arrays).
        ``observables``: a container from :meth:`observables` (``body_qdd``).
        """
        # validates the container (it must come from this solver) and remembers the input state
        observed = begin_step(self, observables, state_in, state_out, contacts)
        model = self.model
        n = max(self.body_count, self.particle_count)
        if n == 0:
            return
        body_q = state_in.body_q if self.body_count else None
        body_qd = state_in.body_qd if self.body_count else None
        if self.body_count and state_in is state_out:
            wp.copy(self._scratch_body_q, state_in.body_q)
            wp.copy(self._scratch_body_qd, state_in.body_qd)
            body_q, body_qd = self._scratch_body_q, self._scratch_body_qd
        has_bodies = self.body_count > 0
        has_particles = self.particle_count > 0
        shapes = self.shape_count > 0

        def opt(value):
            return -1.0 if value is None else float(value)

        if has_bodies and shapes:
            wp.launch(
                kernels.shape_pose_kernel,
                dim=self.shape_count,
                inputs=[model.shape_body, model.shape_transform, body_q],
                outputs=[self._shape_X],
                device=self.device,
            )
        wp.launch(
            kernels.step_kernel,
            dim=n,
            inputs=[
                self.body_count,
                self.particle_count,
                float(dt),
                model.gravity,
                body_q,
                body_qd,
                getattr(state_in, "body_f", None) if has_bodies else None,
                model.body_com if has_bodies else None,
                model.body_inv_mass if has_bodies else None,
                model.body_inertia if has_bodies else None,
                model.body_inv_inertia if has_bodies else None,
                model.body_flags if has_bodies else None,
                model.body_world if has_bodies else None,
                self._body_shape_start,
                self._body_shape_ids,
                self._group_start,
                self._group_ids,
                model.shape_type if shapes else None,
                model.shape_body if shapes else None,
                self._shape_X,
                model.shape_scale if shapes else None,
                model.shape_world if shapes else None,
                self._shape_bound,
                model.shape_material_ke if shapes else None,
                model.shape_material_kd if shapes else None,
                model.shape_material_mu if shapes else None,
                opt(self.contact_ke),
                opt(self.contact_kd),
                opt(self.contact_mu),
                self.friction_smoothing,
                self.angular_damping,
                state_in.particle_q if has_particles else None,
                state_in.particle_qd if has_particles else None,
                getattr(state_in, "particle_f", None) if has_particles else None,
                model.particle_inv_mass if has_particles else None,
                getattr(model, "particle_world", None) if has_particles else None,
                getattr(model, "particle_flags", None) if has_particles else None,
            ],
            outputs=[
                state_out.body_q if has_bodies else None,
                state_out.body_qd if has_bodies else None,
                state_out.particle_q if has_particles else None,
                state_out.particle_qd if has_particles else None,
            ],
            device=self.device,
        )
        if observed is not None:
            observed.finish(state_out, dt)  # body_qdd = (body_qd_out - body_qd_in) / dt

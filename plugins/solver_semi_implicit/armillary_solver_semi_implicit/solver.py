"""``SolverSemiImplicit``: semi-implicit (symplectic) Euler in maximal coordinates.

Every interaction is an explicit force evaluated at the start of the step (penalty joints,
penalty contacts, particle springs and FEM elements); bodies and particles are then advanced by
one symplectic Euler step (velocity first, position from the new velocity). Written from the
physics and the specification; the reference engine was used only as a black box to measure
the numbers the tests quote. See ``plugins/solver_semi_implicit/README.md``.
"""

from __future__ import annotations

import math

import numpy as np
import warp as wp

from armillary.flags import ModelFlags
from armillary.launch import LaunchCache, tape_recording
from armillary.sim.enums import JointType
from armillary.solvers import Coordinates, SolverBase, SolverCapabilities
from armillary.solvers.coupling import CouplingInterface
from armillary.solvers.observables import begin_step

from . import kernels
from .joint_kernels import eval_joint_forces, update_joint_state

__all__ = ["SolverSemiImplicit"]


def _count(model, name: str) -> int:
    return int(getattr(model, name, 0) or 0)


def _nonneg(name: str, value) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"SolverSemiImplicit: {name} must be a number, got {value!r}") from None
    if not (math.isfinite(v) and v >= 0.0):
        raise ValueError(f"SolverSemiImplicit: {name} must be finite and >= 0, got {value!r}")
    return v


def _resolve_deterministic(value):
    """``None`` -> ``wp.config.deterministic``; ``True`` -> RUN_TO_RUN; ``False`` -> NOT_GUARANTEED."""
    mode_cls = getattr(wp, "DeterministicMode", None)
    if value is None:
        return getattr(wp.config, "deterministic", None) if mode_cls is not None else None
    if isinstance(value, bool):
        if mode_cls is None:
            return None
        return mode_cls.RUN_TO_RUN if value else mode_cls.NOT_GUARANTEED
    if mode_cls is not None and isinstance(value, mode_cls):
        return value
    allowed = "None, True, False" + (" or a warp.DeterministicMode" if mode_cls is not None else "")
    raise ValueError(f"SolverSemiImplicit: deterministic must be {allowed}, got {value!r}")


class SolverSemiImplicit(SolverBase, CouplingInterface):
    """Semi-implicit (symplectic) Euler with penalty joints, penalty contacts and particle forces.

    One :meth:`step` evaluates every force from ``state_in``, then integrates:

    * rigid bodies (maximal coordinates): ``v1 = v + dt (f / m + g)``, ``w1 = w + dt I_W^-1
      (tau - w x I_W w)`` (world inertia at the start pose, explicit gyroscopic term), the
      orientation ``q1 = normalize(q + dt/2 (w1, 0) q)``, the COM ``c1 = c + dt v1``, and the
      stored angular velocity ``w1 (1 - angular_damping dt)``; ``f, tau`` is the world-frame
      wrench at the COM: ``State.body_f`` + ``Control.joint_f`` of the body's FREE / DISTANCE
      joint (a world wrench at the child COM; the parent gets nothing) + joint, contact and
      particle-contact forces. Gravity is the body's world's ``Model.gravity`` (bodies with zero
      inverse mass get none). Kinematic bodies (``BodyFlags.KINEMATIC``) keep their input
      ``body_q`` / ``body_qd`` unchanged (they are not advanced by their twist: write the pose
      you prescribe every step). Contact and joint forces on them are computed like on any
      body, so contacts against kinematic bodies are as soft as other contacts (they are not
      made infinite-mass colliders inside the contact model, by design).
    * joints (``joint_kernels``): spring-dampers between the joint frames
      (``joint_attach_ke/kd``), drives, passive springs, limit springs, the range of DISTANCE
      joints (a radial limit spring-damper on the anchor separation) and mimic couplings
      (``joint_mimic_ke/kd``); ``joint_q`` / ``joint_qd`` of ``state_out`` are recovered from the
      new body state (principal angles, no winding).
    * rigid contacts (``contacts`` from the core collision pipeline): per contact the normal
      force ``ke * depth`` plus ``kd`` times the approach speed (while penetrating; ``ka`` is an
      adhesion distance below which a separated contact attracts with ``ke * distance``) and
      friction ``min(kf |vt|, mu |fn|)`` against the slip; materials are the means of the two
      shapes' ``shape_material_ke/kd/kf/ka/mu``, and per-contact ``rigid_contact_stiffness /
      damping / friction`` > 0 replace ``ke / kd / mu``.
    * particles (``particles.ParticleForces``): springs, cloth triangles, bending, tetrahedra,
      particle-shape and particle-particle contacts, gravity and ``State.particle_f``.

    ``step`` validates its arguments once per set of arrays (``ValueError`` naming the array),
    never synchronises with the host and accepts ``state_in is state_out`` (every force is
    evaluated before anything is written).

    Differentiable (``capabilities.differentiable``): steps recorded on a ``wp.Tape`` through a list
    of states (``finalize(requires_grad=True)``, ``model.state(requires_grad=True)``, one state per
    step) back-propagate into the initial state, ``Control`` and the model's parameters. While a tape
    records, every launch goes through ``wp.launch`` (no replays), each step writes its forces into
    fresh scratch arrays (48 B per body and 24 B per particle per step, gradients included) and the
    backward pass rebuilds the particle hash grid and triangle BVH from each step's positions
    before that step's adjoint. See the README's "Differentiability" section.

    Args:
        model: the :class:`~armillary.Model` to simulate (or a coupling ``ModelView``).
        angular_damping: angular velocity decay rate [1/s]: each step multiplies the new angular
            velocity of every dynamic body by ``1 - angular_damping * dt`` (after the
            orientation update used it).
        friction_smoothing: deprecated compatibility argument: ``None`` (default) or a positive
            number [m/s]. Rigid contact friction does not use it (``kf`` sets the low-speed
            slope, ``mu`` the Coulomb limit); it is passed on to the particle forces (1.0 when
            ``None``).
        joint_attach_ke: joint attachment stiffness [N/m for linear, N m/rad for angular DOFs].
        joint_attach_kd: joint attachment damping [N s/m, N m s/rad].
        joint_mimic_ke: mimic coupling stiffness per follower coordinate [N/m or N m/rad].
        joint_mimic_kd: mimic coupling damping per follower coordinate [N s/m or N m s/rad].
        enable_tri_contact: particle-triangle contacts between cloth particles and triangles.
        deterministic: ``None`` (inherit ``wp.config.deterministic``), ``True`` / ``False`` or a
            ``warp.DeterministicMode``. On the CPU every kernel runs its items one after the
            other in a fixed order, so two runs are bit-identical whatever the mode; on CUDA a
            mode other than ``NOT_GUARANTEED`` is set as the ``deterministic`` module option of
            this plugin's kernel modules (Warp orders their atomic accumulations).

    Attributes:
        body_f_int: ``wp.array(dtype=wp.spatial_vector)``, per body: the joint, contact and
            particle-contact wrench (world frame, at the COM) of the last step (external inputs
            excluded); a new array after each step recorded on a ``wp.Tape``.
    """

    capabilities = SolverCapabilities(
        coordinates=Coordinates.MAXIMAL,
        joint_types=frozenset(
            {
                JointType.PRISMATIC,
                JointType.REVOLUTE,
                JointType.BALL,
                JointType.FIXED,
                JointType.FREE,
                JointType.DISTANCE,
                JointType.D6,
            }
        ),
        features=frozenset(
            {
                "rigid_bodies",
                "body_forces",
                "joint_forces",
                "kinematic_bodies",
                "rigid_contacts",
                "friction",
                "particles",
                "particle_forces",
                "particle_contacts",
                "springs",
                "cloth",
                "soft_bodies",
                "joint_limits",
                "joint_limit_springs",
                "joint_drives",
                "joint_springs",
                "joint_damping",
                "mimic_joints",
                "loop_joints",
                "multiple_worlds",
                "reset_world_mask",
            }
        ),
        deterministic=False,  # atomics accumulate forces: order-dependent on GPUs unless `deterministic` is set
        collision_pipeline=True,
        differentiable=True,  # every launch is taped while a wp.Tape records; per-step scratch (README)
    )
    SUPPORTED_OBSERVABLES = frozenset({"body_qdd", "body_parent_f", "contact_f"})
    """``body_qdd``; ``contact_f`` from the penalty forces; ``body_parent_f`` by Newton-Euler from
    the step's accelerations (particle-contact reactions and angular damping count as joint
    wrench)."""

    def __init__(
        self,
        model,
        *,
        angular_damping: float = 0.05,
        friction_smoothing: float | None = None,
        joint_attach_ke: float = 1.0e4,
        joint_attach_kd: float = 100.0,
        joint_mimic_ke: float = 100.0,
        joint_mimic_kd: float = 1.0,
        enable_tri_contact: bool = True,
        deterministic=None,
    ):
        super().__init__(model)
        self.angular_damping = _nonneg("angular_damping", angular_damping)
        if friction_smoothing is not None:
            fs = _nonneg("friction_smoothing", friction_smoothing)
            if fs <= 0.0:
                raise ValueError(f"SolverSemiImplicit: friction_smoothing must be > 0, got {friction_smoothing!r}")
        self.friction_smoothing = friction_smoothing
        self.joint_attach_ke = _nonneg("joint_attach_ke", joint_attach_ke)
        self.joint_attach_kd = _nonneg("joint_attach_kd", joint_attach_kd)
        self.joint_mimic_ke = _nonneg("joint_mimic_ke", joint_mimic_ke)
        self.joint_mimic_kd = _nonneg("joint_mimic_kd", joint_mimic_kd)
        self.enable_tri_contact = bool(enable_tri_contact)
        self.deterministic = _resolve_deterministic(deterministic)

        self.body_count = _count(model, "body_count")
        self.particle_count = _count(model, "particle_count")
        self.joint_count = _count(model, "joint_count")
        self.dof_count = _count(model, "joint_dof_count")
        self.coord_count = _count(model, "joint_coord_count")
        self._shape_count = _count(model, "shape_count")
        dev = self.device
        nb = self.body_count
        self._launches = LaunchCache(max_entries=16)
        self._empty_s = wp.zeros(0, dtype=wp.spatial_vector, device=dev)
        self._empty_f = wp.zeros(0, dtype=float, device=dev)
        self._empty_v = wp.zeros(0, dtype=wp.vec3, device=dev)
        self._body_f_scratch = wp.zeros(nb, dtype=wp.spatial_vector, device=dev)
        self.body_f_int = self._body_f_scratch
        self._impulse = wp.zeros(nb, dtype=wp.spatial_vector, device=dev)
        self._impulse_time = wp.zeros(nb, dtype=float, device=dev)
        self._track_impulse = False
        self._contact_force = wp.zeros(0, dtype=wp.vec3, device=dev)
        self._last_dt = None
        self._last_rigid_max = None
        self._particles = None
        self._particle_f = None
        if self.particle_count:
            from .particles import ParticleForces

            self._particles = ParticleForces(
                model,
                enable_tri_contact=self.enable_tri_contact,
                friction_smoothing=1.0 if friction_smoothing is None else float(friction_smoothing),
            )
            self._particle_f = wp.zeros(self.particle_count, dtype=wp.vec3, device=dev)
        self._build_tables()
        self._apply_deterministic()

    # ------------------------------------------------------------------ setup
    def _build_tables(self) -> None:
        """Host-side tables (construction and :meth:`notify_model_changed` only): the FREE /
        DISTANCE joint DOF of each body (``Control.joint_f`` rows) and whether any joint needs
        the penalty-force pass."""
        model, nb = self.model, self.body_count
        free_dof = np.full(nb, -1, dtype=np.int32)
        self._joint_pass = False
        if self.joint_count and nb:
            jt = model.joint_type.numpy()
            child = model.joint_child.numpy()
            enabled = model.joint_enabled.numpy().astype(bool)
            qd_start = model.joint_qd_start.numpy()
            free_like = (jt == int(JointType.FREE)) | (jt == int(JointType.DISTANCE))
            for j in np.nonzero(free_like & enabled & (child >= 0))[0]:
                if free_dof[child[j]] < 0:
                    free_dof[child[j]] = qd_start[j]
            mimic = getattr(model, "joint_mimic_joint", None)
            has_mimic = mimic is not None and bool(np.any(mimic.numpy() >= 0))
            # every enabled joint but FREE needs the pass (DISTANCE: its range)
            self._joint_pass = bool(np.any((jt != int(JointType.FREE)) & enabled)) or has_mimic
        self._body_free_dof = wp.array(free_dof, dtype=wp.int32, device=self.device)
        self._launches.clear()

    def _apply_deterministic(self) -> None:
        mode_cls = getattr(wp, "DeterministicMode", None)
        if mode_cls is None or self.deterministic is None or self.deterministic == mode_cls.NOT_GUARANTEED:
            return
        if not wp.get_device(self.device).is_cuda:
            return  # CPU kernels run their items serially in a fixed order: deterministic already
        import importlib

        for name in ("kernels", "joint_kernels", "particle_kernels"):
            try:
                mod = importlib.import_module(f"{__package__}.{name}")
            except ImportError:
                continue
            wp.set_module_options({"deterministic": self.deterministic}, module=mod)

    def _loop_dim(self, n: int) -> int:
        """Threads of a grid-stride launch over ``n`` items: one on the CPU, ``n`` on a GPU."""
        return 1 if wp.get_device(self.device).is_cpu else max(int(n), 1)

    # ------------------------------------------------------------------ step
    def step(self, state_in, state_out, control, contacts, dt: float, *, observables=None) -> None:
        """Advance ``state_in`` by ``dt`` [s] into ``state_out`` (``state_in is state_out`` allowed).

        ``control`` may be ``None`` (the model's drive targets, no ``joint_f``); ``contacts`` may
        be ``None`` (nothing collides). Raises ``ValueError`` (before any launch) for a bad
        ``dt`` or a missing / mis-shaped / mis-typed / foreign-device array. ``observables``: a
        container from :meth:`observables` (``SUPPORTED_OBSERVABLES``) filled by this step.
        """
        dt = float(dt)  # checked by SolverBase (finite, > 0), as are the arrays
        observed = begin_step(self, observables, state_in, state_out, contacts)

        model, dev, nb = self.model, self.device, self.body_count
        taped = tape_recording()
        launch = self._launch_taped if taped else self._launches.launch
        if taped:
            wants_grad = getattr(model, "requires_grad", False) or getattr(state_in, "requires_grad", False)
            if state_in is state_out and wants_grad:
                raise ValueError(
                    "SolverSemiImplicit.step: state_in is state_out while a wp.Tape records on arrays that require "
                    "gradients: the in-place update would overwrite the values this step's adjoint reads; step "
                    "into a new State each step (a list of states)"
                )
            # per-step scratch: a later step must not overwrite what this step's adjoint reads
            body_f_int = wp.zeros(nb, dtype=wp.spatial_vector, device=dev, requires_grad=True)
            particle_f = None
            if self._particles is not None:
                particle_f = wp.zeros(self.particle_count, dtype=wp.vec3, device=dev, requires_grad=True)
        else:
            body_f_int = self._body_f_scratch
            particle_f = self._particle_f
            if nb:
                body_f_int.zero_()
            if particle_f is not None:
                particle_f.zero_()
        self.body_f_int = body_f_int
        # ---- rigid contacts
        rigid_max = 0
        if contacts is not None and nb and self._shape_count:
            rigid_max = int(contacts.rigid_contact_shape0.shape[0])
        if rigid_max:
            if self._contact_force.shape[0] != rigid_max:
                self._contact_force = wp.zeros(rigid_max, dtype=wp.vec3, device=dev)
            c = contacts
            launch(kernels.body_contact_forces_kernel, self._loop_dim(rigid_max),
                   [model.shape_body, model.shape_material_ke, model.shape_material_kd, model.shape_material_kf,
                    model.shape_material_ka, model.shape_material_mu, model.body_com, state_in.body_q,
                    state_in.body_qd, c.rigid_contact_count, c.rigid_contact_shape0, c.rigid_contact_shape1,
                    c.rigid_contact_point0, c.rigid_contact_point1, c.rigid_contact_normal, c.rigid_contact_margin0,
                    c.rigid_contact_margin1, c.rigid_contact_stiffness, c.rigid_contact_damping,
                    c.rigid_contact_friction, self._loop_dim(rigid_max)],
                   [body_f_int, self._contact_force], device=dev)  # fmt: skip
        self._last_rigid_max = rigid_max if contacts is not None else None
        # ---- joints
        if nb and self._joint_pass:
            eval_joint_forces(model, state_in.body_q, state_in.body_qd, control, body_f_int,
                              joint_attach_ke=self.joint_attach_ke, joint_attach_kd=self.joint_attach_kd,
                              joint_mimic_ke=self.joint_mimic_ke, joint_mimic_kd=self.joint_mimic_kd)  # fmt: skip
        # ---- particles (forces, including particle-shape reactions on bodies)
        if self._particles is not None:
            self._particles.eval(state_in, control, contacts, particle_f, body_f_int if nb else None)
        # ---- integrate
        if nb:
            body_f = getattr(state_in, "body_f", None)
            joint_f = getattr(control, "joint_f", None) if (control is not None and self.dof_count) else None
            launch(kernels.integrate_bodies_kernel, self._loop_dim(nb),
                   [model.body_com, model.body_inv_mass, model.body_inertia, model.body_inv_inertia,
                    model.body_flags, model.body_world, model.gravity, self._body_free_dof, state_in.body_q,
                    state_in.body_qd, body_f if body_f is not None else self._empty_s, 0 if body_f is None else 1,
                    joint_f if joint_f is not None else self._empty_f, 0 if joint_f is None else 1, body_f_int,
                    self.angular_damping, dt, 1 if self._track_impulse else 0, nb, self._loop_dim(nb)],
                   [self._impulse, self._impulse_time, state_out.body_q, state_out.body_qd], device=dev)  # fmt: skip
        if self._particles is not None:
            self._particles.integrate(state_in, state_out, particle_f, dt)
        if self.joint_count and nb:
            jq, jqd = getattr(state_out, "joint_q", None), getattr(state_out, "joint_qd", None)
            if jq is not None and jqd is not None:
                update_joint_state(model, state_out.body_q, state_out.body_qd, jq, jqd)
        self._last_dt = dt
        if observed is not None:
            observed.finish(state_out, dt, contact_force=self._contact_force if rigid_max else None)

    @staticmethod
    def _launch_taped(kernel, dim, inputs, outputs=(), device=None) -> None:
        """``wp.launch`` (recorded by the active tape) instead of a cached replay: per-step arrays
        would only fill the replay cache."""
        wp.launch(kernel, dim=dim, inputs=list(inputs), outputs=list(outputs), device=device)

    # ------------------------------------------------------------------ contact forces
    def update_contacts(self, contacts, state=None) -> None:
        """Fill ``contacts.force`` with the rigid contact forces of the last :meth:`step`.

        ``force[i]`` is ``(f, 0)``: ``f`` [N] is the world-frame penalty force (normal and
        friction) that shape 0 exerts on shape 1 at contact ``i``; soft-contact rows are zero.

        Raises:
            ValueError: ``contacts.force`` was not requested (``requested_attributes={"force"}``),
                no step with contacts has run, or ``contacts`` has another capacity.
        """
        if getattr(contacts, "force", None) is None:
            raise ValueError(
                'update_contacts: contacts.force is None; create the Contacts with requested_attributes={"force"}'
            )
        if self._last_rigid_max is None:
            raise ValueError("update_contacts: no step with contacts has been run yet")
        n = int(contacts.rigid_contact_shape0.shape[0])
        if n != self._last_rigid_max:
            raise ValueError(f"update_contacts: contacts capacity {n} differs from the {self._last_rigid_max} of the "
                             "last step()")  # fmt: skip
        contacts.force.zero_()
        if n:
            wp.launch(kernels.forces_to_wrenches_kernel, dim=n, inputs=[self._contact_force], outputs=[contacts.force],
                      device=self.device)  # fmt: skip

    # ------------------------------------------------------------------ model changes
    def notify_model_changed(self, flags) -> None:
        """Refresh host tables after joint changes; every other model array is read at each step.

        ``BODY_INERTIAL_PROPERTIES`` alone does no host work (graph-capturable)."""
        super().notify_model_changed(flags)
        value = int(flags)
        host = int(ModelFlags.JOINT_PROPERTIES | ModelFlags.JOINT_DOF_PROPERTIES | ModelFlags.CONSTRAINT_PROPERTIES)
        if value & host:
            self._build_tables()
        if self._particles is not None and value & ~int(ModelFlags.BODY_INERTIAL_PROPERTIES):
            refresh = getattr(self._particles, "notify_model_changed", None)
            if refresh is not None:
                refresh(value)

    # ------------------------------------------------------------------ coupling hooks
    def coupling_supports_inertial_property_refresh(self) -> bool:
        """Masses and inertias are read at every step: a mass-only notification does no host work."""
        return True

    def coupling_notify_iteration_restarts(self, enabled: bool) -> None:
        """Start tracking the interaction impulse the proxy harvest reports."""
        super().coupling_notify_iteration_restarts(enabled)
        self._track_impulse = True

    def coupling_notify_input_state_update(self, state, flags, *, iteration_restart: bool = False,
                                           dt: float = 0.0) -> None:  # fmt: skip
        """Restart the interaction-impulse accumulator (device work only); there is no other
        private state: every step starts from the public arrays."""
        super().coupling_notify_input_state_update(state, flags, iteration_restart=iteration_restart, dt=dt)
        self._track_impulse = True
        if self.body_count:
            self._impulse.zero_()
            self._impulse_time.zero_()

    def coupling_harvest_proxy_wrenches(self, body_local_to_proxy_global, out_body_f, *, body_qd_before, state,
                                        state_out, contacts, dt: float) -> None:  # fmt: skip
        """Add to ``out_body_f[proxy]`` the mean joint, contact and particle-contact wrench
        (world frame, at the COM) on each proxy body over the steps since the last input update:
        exactly the interaction forces this solver applied (no gyroscopic or damping residue).
        Before any input update it falls back to the momentum-difference default."""
        if not self.body_count:
            return
        if int(body_local_to_proxy_global.shape[0]) != self.body_count:
            raise ValueError(f"SolverSemiImplicit.coupling_harvest_proxy_wrenches: body_local_to_proxy_global has "
                             f"{body_local_to_proxy_global.shape[0]} rows, the model has {self.body_count} bodies")  # fmt: skip
        if not self._track_impulse:
            super().coupling_harvest_proxy_wrenches(body_local_to_proxy_global, out_body_f,
                                                    body_qd_before=body_qd_before, state=state, state_out=state_out,
                                                    contacts=contacts, dt=dt)  # fmt: skip
            return
        self._launches.launch(kernels.harvest_impulse_kernel, self.body_count,
                              [body_local_to_proxy_global, self._impulse, self._impulse_time], [out_body_f],
                              device=self.device)  # fmt: skip


"""``SolverXPBD``: eXtended Position-Based Dynamics for armillary (maximal coordinates).

Rigid bodies are integrated in ``State.body_q`` / ``State.body_qd`` and every joint is a set of
compliant positional and angular constraints between its two bodies (Müller et al. 2020,
"Detailed rigid body simulation with extended position based dynamics"); particles, springs
and cloth are position constraints on ``State.particle_q`` (Macklin et al. 2016, "XPBD").
Written from the papers; see :mod:`.kernels` for the launch structure.
"""

from __future__ import annotations

import numpy as np
import warp as wp

from armillary.flags import ModelFlags
from armillary.sim.enums import JointType
from armillary.solvers import Coordinates, SolverBase, SolverCapabilities
from armillary.solvers.observables import begin_step

from . import kernels

__all__ = ["SolverXPBD"]


def _count(model, name: str) -> int:
    return int(getattr(model, name, 0) or 0)


class SolverXPBD(SolverBase):
    """XPBD integrator for rigid bodies (maximal coordinates), joints, contacts, particles and cloth.

    One call of :meth:`step` is one XPBD substep: predict poses from velocities, gravity (per
    world, ``Model.gravity``) and external forces (``State.body_f``, ``State.particle_f``,
    ``Control.joint_f``); run ``iterations`` rounds of constraint projection (joints, then one
    fused launch for rigid contacts, particle-shape and particle-particle contacts, springs,
    cloth triangles and bending edges); derive velocities from the pose change; optionally
    apply restitution at velocity level. ``step`` never synchronises with the host.

    Joints (PRISMATIC, REVOLUTE, BALL, FIXED, FREE, DISTANCE, D6) are constraints between the
    two joint frames ``body_q[parent] * joint_X_p`` and ``body_q[child] * joint_X_c``: locked
    directions with ``joint_*_compliance``, position limits (``joint_limit_lower/upper``, hard
    constraints), drives and passive springs (``joint_target_ke/kd``, ``joint_stiffness``,
    ``joint_damping``, targets from ``Control.joint_target_q/qd``) as one implicit PD constraint
    of compliance ``1 / (ke + ks + (kd + damping) / dt)``, and mimic relationships
    (``joint_mimic_joint``/``joint_mimic_coeffs``, PRISMATIC/REVOLUTE/D6) as a coupled
    correction of follower and reference. Joints outside articulations (loop closures) are
    solved like every other joint. D6 joints with two or three angular axes use the twist angle
    about each axis as its coordinate (exact for one axis, a small-angle approximation
    otherwise). BALL joints have neither limits nor drives here.

    Rigid contacts come from the core :class:`~armillary.CollisionPipeline` (``contacts``):
    non-penetration of the surface points ``point + margin * normal``, Coulomb friction per
    contact patch (a run of consecutive contacts of one shape pair with one normal): the
    tangential impulses of the patch, accumulated over the step, are bounded by ``mu`` times its
    accumulated normal impulses (static and sliding alike; ``mu`` is the mean of both shapes'
    ``shape_material_mu``); a patch spanning an area (a resting box face) gets one friction
    impulse at its centroid from its mean slip with the tilt-free effective mass plus a twist
    impulse, so it sticks exactly below the friction angle; point and line patches (rolling
    shapes) keep per-contact friction under the pooled bound. Torsional and rolling friction
    (``shape_material_mu_torsional`` / ``shape_material_mu_rolling`` [m]), restitution
    (``shape_material_restitution``) when ``enable_restitution``. Kinematic bodies have infinite
    mass and keep their prescribed velocity.

    Particles: particle-shape contacts (``contacts.soft_contact_*``, two-way with dynamic
    bodies, friction ``(Model.particle_mu + shape mu) / 2``), particle-particle contacts through
    a ``wp.HashGrid`` (particles not used by springs, triangles or edges; no cloth
    self-collision), springs (compliance ``1 / spring_stiffness``, damping
    ``spring_damping``), cloth triangles as three edge-length constraints of stiffness
    ``(k_mu + k_lambda) * area / rest_length^2`` (``tri_materials``; 0 means rigid) and bending
    as a distance constraint between the two vertices opposite each edge (stiffness
    ``edge_bending_properties[:, 0]``, rest distance from the initial configuration). Tetrahedra
    are not supported.

    Args:
        model: the model to simulate. Call ``armillary.eval_fk`` first when the initial body
            poses should follow ``joint_q``.
        iterations: constraint projection rounds per step.
        soft_body_relaxation: relaxation of spring, triangle and bending corrections.
        soft_contact_relaxation: relaxation of particle-shape and particle-particle contacts.
        joint_linear_relaxation: relaxation of positional joint corrections.
        joint_angular_relaxation: relaxation of angular joint corrections.
        joint_linear_compliance: compliance [m/N] of the locked linear joint directions.
        joint_angular_compliance: compliance [rad/(N m)] of the locked angular joint directions.
        rigid_contact_relaxation: relaxation of rigid contact corrections.
        rigid_contact_restitution_iterations: velocity passes of the restitution solve.
        rigid_contact_con_weighting: divide each body's contact corrections by its number of
            active contacts (better stacking; does not conserve momentum at contacts).
        angular_damping: angular velocity decay rate [1/s] applied during integration.
        enable_restitution: apply ``shape_material_restitution`` at rigid contacts.

    Attributes:
        friction_velocity_pass: number of velocity-level friction passes after the position solve
            (default 1; 0 disables): per patch, they remove the tangential contact velocity left
            by the position solve within the Coulomb budget the position-level friction left
            unused (``mu * sum(lambda_n) - sum(|lambda_t|)``).
        body_mask, particle_mask: optional ``wp.array(dtype=wp.int32)`` ownership masks
            (``None``: every entity is owned), for coupling schemes. An entity whose entry is 0
            is not integrated (``state_out`` keeps its ``state_in`` values: its owner moves it)
            and acts as an infinite-mass collider in contacts and joints.
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
                "restitution",
                "particles",
                "particle_forces",
                "particle_contacts",
                "springs",
                "cloth",
                "joint_limits",
                "joint_drives",
                "joint_springs",
                "joint_damping",
                "mimic_joints",
                "loop_joints",
                "multiple_worlds",
                "reset_world_mask",
            }
        ),
        deterministic=False,  # atomics accumulate corrections (order-dependent on GPUs)
        collision_pipeline=True,
    )
    SUPPORTED_OBSERVABLES = frozenset({"body_qdd", "body_parent_f", "contact_f"})
    """``body_qdd``; ``contact_f`` from the accumulated contact impulses / dt (approximate, as
    :meth:`update_contacts`); ``body_parent_f`` by Newton-Euler from the step's accelerations."""

    def __init__(
        self,
        model,
        *,
        iterations: int = 2,
        soft_body_relaxation: float = 0.9,
        soft_contact_relaxation: float = 0.9,
        joint_linear_relaxation: float = 0.7,
        joint_angular_relaxation: float = 0.4,
        joint_linear_compliance: float = 0.0,
        joint_angular_compliance: float = 0.0,
        rigid_contact_relaxation: float = 0.8,
        rigid_contact_restitution_iterations: int = 2,
        rigid_contact_con_weighting: bool = True,
        angular_damping: float = 0.0,
        enable_restitution: bool = False,
    ):
        super().__init__(model)
        if int(iterations) < 1:
            raise ValueError(f"SolverXPBD: iterations must be >= 1, got {iterations!r}")
        for name, value in (
            ("soft_body_relaxation", soft_body_relaxation),
            ("soft_contact_relaxation", soft_contact_relaxation),
            ("joint_linear_relaxation", joint_linear_relaxation),
            ("joint_angular_relaxation", joint_angular_relaxation),
            ("rigid_contact_relaxation", rigid_contact_relaxation),
        ):
            if not 0.0 < float(value) <= 2.0:
                raise ValueError(f"SolverXPBD: {name} must be in (0, 2], got {value!r}")
        for name, value in (
            ("joint_linear_compliance", joint_linear_compliance),
            ("joint_angular_compliance", joint_angular_compliance),
            ("angular_damping", angular_damping),
        ):
            if not float(value) >= 0.0:
                raise ValueError(f"SolverXPBD: {name} must be >= 0, got {value!r}")
        if int(rigid_contact_restitution_iterations) < 1:
            raise ValueError(
                "SolverXPBD: rigid_contact_restitution_iterations must be >= 1, "
                f"got {rigid_contact_restitution_iterations!r}"
            )
        self.iterations = int(iterations)
        self.soft_body_relaxation = float(soft_body_relaxation)
        self.soft_contact_relaxation = float(soft_contact_relaxation)
        self.joint_linear_relaxation = float(joint_linear_relaxation)
        self.joint_angular_relaxation = float(joint_angular_relaxation)
        self.joint_linear_compliance = float(joint_linear_compliance)
        self.joint_angular_compliance = float(joint_angular_compliance)
        self.rigid_contact_relaxation = float(rigid_contact_relaxation)
        self.rigid_contact_restitution_iterations = int(rigid_contact_restitution_iterations)
        self.rigid_contact_con_weighting = bool(rigid_contact_con_weighting)
        self.angular_damping = float(angular_damping)
        self.enable_restitution = bool(enable_restitution)
        self.body_mask = None
        self.particle_mask = None
        self.friction_velocity_pass = 1

        self.body_count = _count(model, "body_count")
        self.particle_count = _count(model, "particle_count")
        self.joint_count = _count(model, "joint_count")
        self.dof_count = _count(model, "joint_dof_count")
        self._last_dt = None
        self._last_rigid_max = None
        self._allocate()
        self._build_tables()

    # ------------------------------------------------------------------ setup
    def _allocate(self) -> None:
        dev = self.device
        nb, npart = self.body_count, self.particle_count
        self._empty_i = wp.zeros(0, dtype=wp.int32, device=dev)
        self._empty_f = wp.zeros(0, dtype=float, device=dev)
        self._empty_v = wp.zeros(0, dtype=wp.vec3, device=dev)
        self._empty_t = wp.zeros(0, dtype=wp.transform, device=dev)
        self._empty_s = wp.zeros(0, dtype=wp.spatial_vector, device=dev)
        self._empty_m = wp.zeros(0, dtype=wp.mat33, device=dev)
        self._empty_i2 = wp.zeros((0, 3), dtype=wp.int32, device=dev)
        self._empty_i4 = wp.zeros((0, 4), dtype=wp.int32, device=dev)
        self._zero_count = wp.zeros(1, dtype=wp.int32, device=dev)
        self._body_q_prev = wp.zeros(nb, dtype=wp.transform, device=dev)
        self._body_qd_prev = wp.zeros(nb, dtype=wp.spatial_vector, device=dev)
        self._body_dx = wp.zeros(nb, dtype=wp.vec3, device=dev)
        self._body_dth = wp.zeros(nb, dtype=wp.vec3, device=dev)
        self._body_cnt = wp.zeros(nb, dtype=float, device=dev)
        self._body_corr_x = wp.zeros(nb, dtype=wp.vec3, device=dev)
        self._body_corr_th = wp.zeros(nb, dtype=wp.vec3, device=dev)
        self._particle_corr = wp.zeros(npart, dtype=wp.vec3, device=dev)
        self._body_f = wp.zeros(nb, dtype=wp.spatial_vector, device=dev)
        self._particle_q_prev = wp.zeros(npart, dtype=wp.vec3, device=dev)
        self._particle_qd_prev = wp.zeros(npart, dtype=wp.vec3, device=dev)
        self._particle_dx = wp.zeros(npart, dtype=wp.vec3, device=dev)
        self._particle_cnt = wp.zeros(npart, dtype=float, device=dev)
        self._dof_lambda = wp.zeros(self.dof_count, dtype=float, device=dev)
        self._body_contact_count = wp.zeros(nb, dtype=float, device=dev)
        self._soft_lambda = wp.zeros(0, dtype=float, device=dev)
        self._contact_lambda = wp.zeros(0, dtype=float, device=dev)
        self._contact_impulse = wp.zeros(0, dtype=wp.vec3, device=dev)
        self._grid = None
        self._packed = {}

    def _contact_buffers(self, rigid_max: int) -> None:
        if self._contact_lambda.shape[0] != rigid_max:
            self._contact_lambda = wp.zeros(rigid_max, dtype=float, device=self.device)
            self._contact_impulse = wp.zeros(rigid_max, dtype=wp.vec3, device=self.device)

    def _build_tables(self) -> None:
        """Host-side (construction / notify_model_changed only): constraint tables and flags."""
        model, dev = self.model, self.device
        # joints that need a constraint pass (anything but FREE, or a mimic follower)
        self._joint_pass = False
        if self.joint_count:
            types = model.joint_type.numpy()
            mimic = model.joint_mimic_joint.numpy() if getattr(model, "joint_mimic_joint", None) is not None else None
            self._joint_pass = bool(np.any(types != int(JointType.FREE)) or (mimic is not None and np.any(mimic >= 0)))
        npart = self.particle_count
        self._spring_count = _count(model, "spring_count")
        self._tri_count = _count(model, "tri_count")
        self._edge_count = _count(model, "edge_count")
        used = np.zeros(npart, dtype=bool)
        x0 = model.particle_q.numpy().astype(np.float64) if npart else np.zeros((0, 3))
        # cloth triangles: rest edge lengths and edge stiffness
        if self._tri_count:
            tri = model.tri_indices.numpy().astype(np.int64)
            poses = model.tri_poses.numpy().astype(np.float64)
            rest = np.zeros((self._tri_count, 3))
            for t in range(self._tri_count):
                try:
                    Dm = np.linalg.inv(poses[t])
                    e1, e2 = Dm[:, 0], Dm[:, 1]
                    rest[t] = [np.linalg.norm(e1), np.linalg.norm(e2 - e1), np.linalg.norm(e2)]
                except np.linalg.LinAlgError:
                    a, b, c = x0[tri[t]]
                    rest[t] = [np.linalg.norm(b - a), np.linalg.norm(c - b), np.linalg.norm(a - c)]
            mat = model.tri_materials.numpy().astype(np.float64)
            area = model.tri_areas.numpy().astype(np.float64) if getattr(model, "tri_areas", None) is not None else None
            if area is None:
                area = 0.5 * rest[:, 0] * rest[:, 2]
            k = (mat[:, 0] + mat[:, 1])[:, None] * area[:, None] / np.maximum(rest, 1e-9) ** 2
            self._tri_rest = wp.array(rest.astype(np.float32), dtype=wp.vec3, device=dev)
            self._tri_ke = wp.array(k.astype(np.float32), dtype=wp.vec3, device=dev)
            self._tri_indices = model.tri_indices
            used[tri.ravel()] = True
        else:
            self._tri_rest, self._tri_ke, self._tri_indices = self._empty_v, self._empty_v, self._empty_i2
        if self._edge_count:
            edges = model.edge_indices.numpy().astype(np.int64)
            ok = (edges[:, 0] >= 0) & (edges[:, 1] >= 0)
            rest = np.zeros(self._edge_count)
            rest[ok] = np.linalg.norm(x0[edges[ok, 0]] - x0[edges[ok, 1]], axis=1)
            ke = model.edge_bending_properties.numpy()[:, 0].astype(np.float64) * ok
            self._edge_rest = wp.array(rest.astype(np.float32), dtype=float, device=dev)
            self._edge_ke = wp.array(ke.astype(np.float32), dtype=float, device=dev)
            self._edge_indices = model.edge_indices
            used[edges[edges >= 0]] = True
        else:
            self._edge_rest, self._edge_ke, self._edge_indices = self._empty_f, self._empty_f, self._empty_i4
        if self._spring_count:
            used[model.spring_indices.numpy().astype(np.int64)] = True
        n_soft = self._spring_count + 3 * self._tri_count + self._edge_count
        if self._soft_lambda.shape[0] != n_soft:
            self._soft_lambda = wp.zeros(n_soft, dtype=float, device=dev)
        self._particle_self = wp.array((~used).astype(np.int32) if npart else np.zeros(0, np.int32),
                                       dtype=wp.int32, device=dev)
        g = np.asarray(model.gravity.numpy(), dtype=np.float64).reshape(-1, 3) if model.gravity is not None else []
        self._gnorm = float(np.linalg.norm(g, axis=1).max()) if len(g) else 0.0
        g = np.asarray(model.gravity.numpy(), dtype=np.float64).reshape(-1, 3) if model.gravity is not None else []
        self._gnorm = float(np.linalg.norm(g, axis=1).max()) if len(g) else 0.0
        self._max_radius = float(getattr(model, "particle_max_radius", 0.0) or 0.0)
        if npart and self._max_radius <= 0.0 and getattr(model, "particle_radius", None) is not None:
            self._max_radius = float(model.particle_radius.numpy().max())
        self._use_grid = bool(npart > 1 and (~used).sum() > 1 and self._max_radius > 0.0)
        if self._use_grid and self._grid is None:
            self._grid = wp.HashGrid(128, 128, 128, device=dev)

    def notify_model_changed(self, flags) -> None:
        """Refresh the constraint tables; every other model array is read live at each step."""
        super().notify_model_changed(flags)
        self._packed.clear()
        value = int(flags)
        if value & int(ModelFlags.ALL):
            self._build_tables()

    # ------------------------------------------------------------------- step
    def _arr(self, value, empty):
        return empty if value is None else value

    def _packed_args(self, struct_cls, names, fields, values) -> list:
        """Launch arguments of a kernel taking its scalars then one struct of arrays (``struct_cls``,
        whose ``fields`` are among ``names``) from ``values`` (one per name, in order). The struct
        is cached per set of arrays (ping-pong states alternate between two), since packing an
        array argument costs microseconds on every CPU launch and a struct's packing is kept."""
        key = (struct_cls,) + tuple(id(v) for n, v in zip(names, values) if n in fields)
        entry = self._packed.pop(key, None)
        if entry is None:
            A = struct_cls()
            for n, v in zip(names, values):
                if n in fields:
                    setattr(A, n, v)
            entry = (A, tuple(values))  # the values keep the arrays (and so their ids) alive
        self._packed[key] = entry  # most recently used last
        while len(self._packed) > 16:
            self._packed.pop(next(iter(self._packed)))
        return [v for n, v in zip(names, values) if n not in fields] + [entry[0]]

    def _contact_args(self, values) -> list:
        """:func:`.kernels.solve_contacts_kernel` arguments from the values of
        :data:`.kernels.SOLVE_CONTACTS_ARG_NAMES`."""
        return self._packed_args(kernels.ContactArrays, kernels.SOLVE_CONTACTS_ARG_NAMES,
                                 kernels.CONTACT_ARRAY_FIELDS, values)

    def _delta_args(self, values) -> list:
        """:func:`.kernels.apply_deltas_kernel` arguments from the values of
        :data:`.kernels.APPLY_DELTAS_ARG_NAMES`."""
        return self._packed_args(kernels.DeltaArrays, kernels.APPLY_DELTAS_ARG_NAMES, kernels.DELTA_ARRAY_FIELDS,
                                 values)

    def _loop_dim(self, n: int) -> int:
        """Thread count of a grid-stride launch over ``n`` items: one thread per item on a GPU, a
        single thread on the CPU (Warp runs CPU kernels serially, and looping inside one thread
        avoids the per-thread argument setup and keeps the item order)."""
        return 1 if self.device.is_cpu else max(int(n), 1)

    def step(self, state_in, state_out, control, contacts, dt: float, *, observables=None) -> None:
        """Advance ``state_in`` by ``dt`` into ``state_out`` (``state_in is state_out`` is allowed).

        ``contacts`` (from ``armillary.CollisionPipeline`` / ``Model.collide``) may be ``None``:
        then nothing collides. ``control`` may be ``None``: the model's drive targets are used
        and no joint forces are applied. ``observables``: a container from :meth:`observables`
        (``SUPPORTED_OBSERVABLES``) filled by this step.
        """
        observed = begin_step(self, observables, state_in, state_out, contacts)
        model, dev = self.model, self.device
        dt = float(dt)
        nb, npart = self.body_count, self.particle_count
        E = self
        bodies = nb > 0
        parts = npart > 0

        def m(name, empty):
            v = getattr(model, name, None)
            return empty if v is None else v

        body_com = m("body_com", E._empty_v) if bodies else E._empty_v
        body_inv_mass = m("body_inv_mass", E._empty_f) if bodies else E._empty_f
        body_inv_inertia = m("body_inv_inertia", E._empty_m) if bodies else E._empty_m
        body_flags = m("body_flags", E._empty_i) if bodies else E._empty_i
        body_mask = self.body_mask if self.body_mask is not None else E._empty_i
        particle_mask = self.particle_mask if self.particle_mask is not None else E._empty_i

        # ---- external body wrenches (+ Control.joint_f)
        body_f = getattr(state_in, "body_f", None) if bodies else None
        joint_f = getattr(control, "joint_f", None) if control is not None else None
        if bodies and self.joint_count and self.dof_count and joint_f is not None and joint_f.shape[0]:
            if body_f is not None:
                wp.copy(self._body_f, body_f)
            else:
                self._body_f.zero_()
            wp.launch(
                kernels.joint_force_kernel, dim=self.joint_count,
                inputs=[model.joint_type, model.joint_enabled, model.joint_parent, model.joint_child,
                        model.joint_X_p, model.joint_X_c, model.joint_qd_start, model.joint_dof_dim,
                        model.joint_axis, joint_f, state_in.body_q, model.body_com],
                outputs=[self._body_f], device=dev,
            )  # fmt: skip
            body_f = self._body_f

        # ---- contacts
        rigid_max = 0
        soft_max = 0
        if contacts is not None:
            rigid_max = int(contacts.rigid_contact_shape0.shape[0]) if bodies else 0
            soft_max = int(contacts.soft_contact_particle.shape[0]) if parts else 0
        self._contact_buffers(rigid_max)
        self._last_rigid_max = rigid_max if contacts is not None else None

        n = max(nb, npart, rigid_max, self.dof_count, self._soft_lambda.shape[0])
        if n == 0:
            return
        wp.launch(
            kernels.integrate_kernel, dim=self._loop_dim(n),
            inputs=[nb, npart, dt, model.gravity, self.angular_damping,
                    state_in.body_q if bodies else E._empty_t, state_in.body_qd if bodies else E._empty_s,
                    self._arr(body_f, E._empty_s), body_com, body_inv_mass,
                    m("body_inertia", E._empty_m) if bodies else E._empty_m, body_inv_inertia, body_flags,
                    m("body_world", E._empty_i) if bodies else E._empty_i,
                    state_in.particle_q if parts else E._empty_v, state_in.particle_qd if parts else E._empty_v,
                    self._arr(getattr(state_in, "particle_f", None) if parts else None, E._empty_v),
                    m("particle_inv_mass", E._empty_f) if parts else E._empty_f,
                    m("particle_flags", E._empty_i) if parts else E._empty_i,
                    m("particle_world", E._empty_i) if parts else E._empty_i, body_mask, particle_mask, n,
                    self._loop_dim(n)],
            outputs=[self._body_q_prev, self._body_qd_prev, self._particle_q_prev, self._particle_qd_prev,
                     self._body_dx, self._body_dth, self._body_cnt, self._particle_dx, self._particle_cnt,
                     self._contact_lambda, self._contact_impulse, self._dof_lambda,
                     self._body_corr_x, self._body_corr_th, self._particle_corr, self._soft_lambda,
                     state_out.body_q if bodies else E._empty_t, state_out.body_qd if bodies else E._empty_s,
                     state_out.particle_q if parts else E._empty_v, state_out.particle_qd if parts else E._empty_v],
            device=dev,
        )  # fmt: skip

        use_grid = self._use_grid
        if use_grid:
            self._grid.build(state_out.particle_q, radius=2.0 * self._max_radius)

        body_q = state_out.body_q if bodies else E._empty_t
        particle_q = state_out.particle_q if parts else E._empty_v
        apply_dim = max(nb, npart)

        # ---- joint tables
        joint_pass = bodies and self.joint_count and self._joint_pass
        if joint_pass:
            tq = getattr(control, "joint_target_q", None) if control is not None else None
            tqd = getattr(control, "joint_target_qd", None) if control is not None else None
            tq = model.joint_target_q if tq is None else tq
            tqd = model.joint_target_qd if tqd is None else tqd
            joint_inputs = [
                dt, model.joint_type, model.joint_enabled, model.joint_parent, model.joint_child,
                model.joint_X_p, model.joint_X_c, model.joint_q_start, model.joint_qd_start, model.joint_dof_dim,
                model.joint_axis, model.joint_limit_lower, model.joint_limit_upper, model.joint_target_ke,
                model.joint_target_kd, model.joint_stiffness, model.joint_damping, model.joint_rest_q, tq, tqd,
                model.joint_mimic_joint, model.joint_mimic_coeffs, body_q, self._body_q_prev, body_com,
                body_inv_mass, body_inv_inertia, body_flags, body_mask, self.joint_linear_relaxation,
                self.joint_angular_relaxation, self.joint_linear_compliance, self.joint_angular_compliance,
            ]  # fmt: skip

        contact_dim = 0
        if contacts is not None or self._spring_count or self._tri_count or self._edge_count or use_grid:
            contact_dim = (rigid_max + soft_max + (npart if use_grid else 0) + self._spring_count
                           + self._tri_count + self._edge_count)  # fmt: skip
        if contact_dim:
            c = contacts
            rigid = c is not None and rigid_max > 0
            soft = c is not None and soft_max > 0
            shape_ok = _count(model, "shape_count") > 0
            contact_inputs = [
                dt, rigid_max, soft_max, npart if use_grid else 0, self._spring_count, self._tri_count,
                self._edge_count,
                c.rigid_contact_count if rigid else E._zero_count,
                c.rigid_contact_shape0 if rigid else E._empty_i, c.rigid_contact_shape1 if rigid else E._empty_i,
                c.rigid_contact_point0 if rigid else E._empty_v, c.rigid_contact_point1 if rigid else E._empty_v,
                c.rigid_contact_normal if rigid else E._empty_v,
                c.rigid_contact_margin0 if rigid else E._empty_f, c.rigid_contact_margin1 if rigid else E._empty_f,
                self.rigid_contact_relaxation, self._contact_lambda, self._contact_impulse,
                c.soft_contact_count if soft else E._zero_count,
                c.soft_contact_particle if soft else E._empty_i, c.soft_contact_shape if soft else E._empty_i,
                c.soft_contact_body_pos if soft else E._empty_v, c.soft_contact_normal if soft else E._empty_v,
                self.soft_contact_relaxation, float(getattr(model, "particle_mu", 0.5) or 0.0),
                model.shape_body if shape_ok else E._empty_i,
                model.shape_material_mu if shape_ok else E._empty_f,
                self._arr(getattr(model, "shape_material_mu_torsional", None) if shape_ok else None, E._empty_f),
                self._arr(getattr(model, "shape_material_mu_rolling", None) if shape_ok else None, E._empty_f),
                body_q, self._body_q_prev, body_com, body_inv_mass, body_inv_inertia, body_flags, body_mask,
                self._grid.id if use_grid else wp.uint64(0), 1 if use_grid else 0, particle_q,
                self._particle_q_prev, m("particle_radius", E._empty_f) if parts else E._empty_f,
                m("particle_inv_mass", E._empty_f) if parts else E._empty_f,
                m("particle_flags", E._empty_i) if parts else E._empty_i,
                m("particle_world", E._empty_i) if parts else E._empty_i, particle_mask,
                float(getattr(model, "particle_mu", 0.5) or 0.0), self._max_radius, self._particle_self,
                model.spring_indices if self._spring_count else E._empty_i,
                model.spring_rest_length if self._spring_count else E._empty_f,
                model.spring_stiffness if self._spring_count else E._empty_f,
                model.spring_damping if self._spring_count else E._empty_f,
                self._tri_indices, self._tri_rest, self._tri_ke, self._edge_indices, self._edge_rest, self._edge_ke,
                self.soft_body_relaxation, self._soft_lambda, self._loop_dim(contact_dim),
                self._body_dx, self._body_dth, self._body_cnt, self._particle_dx, self._particle_cnt,
            ]  # fmt: skip
            contact_inputs = self._contact_args(contact_inputs)

        weighting = 1 if self.rigid_contact_con_weighting else 0
        for _ in range(self.iterations):
            if joint_pass:
                wp.launch(kernels.solve_joints_kernel, dim=self.joint_count, inputs=joint_inputs,
                          outputs=[self._dof_lambda, self._body_dx, self._body_dth, self._body_cnt], device=dev)
                # each body's summed joint corrections divided by its summed shares when above 1
                wp.launch(kernels.apply_deltas_kernel, dim=nb,
                          inputs=self._delta_args([nb, 0, 1, body_com, self._body_dx, self._body_dth, self._body_cnt,
                                                   self._particle_dx, self._particle_cnt, body_q, particle_q,
                                                   self._body_corr_x, self._body_corr_th, self._particle_corr,
                                                   E._empty_f]),
                          device=dev)  # fmt: skip
            if contact_dim:
                wp.launch(kernels.solve_contacts_kernel, dim=self._loop_dim(contact_dim), inputs=contact_inputs,
                          device=dev)  # fmt: skip
                wp.launch(kernels.apply_deltas_kernel, dim=apply_dim,
                          inputs=self._delta_args([nb, npart, weighting, body_com, self._body_dx, self._body_dth,
                                                   self._body_cnt, self._particle_dx, self._particle_cnt, body_q,
                                                   particle_q, self._body_corr_x, self._body_corr_th,
                                                   self._particle_corr, self._body_contact_count]),
                          device=dev)  # fmt: skip

        wp.launch(
            kernels.update_velocities_kernel, dim=apply_dim,
            inputs=[nb, npart, dt, body_inv_mass, body_flags, self._body_qd_prev, self._body_corr_x,
                    self._body_corr_th, self._particle_corr,
                    m("particle_inv_mass", E._empty_f) if parts else E._empty_f,
                    m("particle_flags", E._empty_i) if parts else E._empty_i, body_mask, particle_mask],
            outputs=[state_out.body_qd if bodies else E._empty_s, state_out.particle_qd if parts else E._empty_v],
            device=dev,
        )  # fmt: skip

        for _ in range(self.friction_velocity_pass if rigid_max and contacts is not None else 0):
            wp.launch(
                kernels.friction_velocity_kernel, dim=self._loop_dim(rigid_max),
                inputs=[dt, contacts.rigid_contact_count, contacts.rigid_contact_shape0,
                        contacts.rigid_contact_shape1, contacts.rigid_contact_point0, contacts.rigid_contact_point1,
                        contacts.rigid_contact_normal, contacts.rigid_contact_margin0, contacts.rigid_contact_margin1,
                        self._contact_lambda, self._contact_impulse, model.shape_body, model.shape_material_mu,
                        body_q, state_out.body_qd, body_com, body_inv_mass, body_inv_inertia, body_flags, body_mask,
                        self._loop_dim(rigid_max)],
                outputs=[self._body_dx, self._body_dth, self._body_cnt], device=dev,
            )  # fmt: skip
            wp.launch(kernels.apply_velocity_deltas_kernel, dim=nb,
                      inputs=[weighting, self._body_dx, self._body_dth, self._body_cnt],
                      outputs=[state_out.body_qd], device=dev)  # fmt: skip
            # the budget is per step: later passes only finish what the first left (see kernel)

        if self.enable_restitution and rigid_max and contacts is not None:
            gdt = self._gnorm * dt
            for _ in range(self.rigid_contact_restitution_iterations):
                wp.launch(
                    kernels.restitution_kernel, dim=self._loop_dim(rigid_max),
                    inputs=[gdt, contacts.rigid_contact_count, contacts.rigid_contact_shape0,
                            contacts.rigid_contact_shape1, contacts.rigid_contact_point0,
                            contacts.rigid_contact_point1, contacts.rigid_contact_normal,
                            contacts.rigid_contact_margin0, contacts.rigid_contact_margin1, self._contact_lambda,
                            model.shape_body, model.shape_material_restitution, body_q, self._body_q_prev,
                            state_out.body_qd, self._body_qd_prev, body_com, body_inv_mass, body_inv_inertia,
                            body_flags, body_mask, self._loop_dim(rigid_max)],
                    outputs=[self._body_dx, self._body_dth, self._body_cnt], device=dev,
                )  # fmt: skip
                wp.launch(kernels.apply_velocity_deltas_kernel, dim=nb,
                          inputs=[weighting, self._body_dx, self._body_dth, self._body_cnt],
                          outputs=[state_out.body_qd], device=dev)  # fmt: skip
                # only the first pass uses the start-of-step velocity as reference; later passes
                # see the corrected velocity and add nothing unless another contact undid it
        self._last_dt = dt
        if observed is not None:
            observed.finish(state_out, dt, contact_force=self._observed_contact_force(contacts, rigid_max, dt))

    def _observed_contact_force(self, contacts, rigid_max: int, dt: float):
        """The step's rigid contact forces (``spatial_vector`` rows ``(f, 0)``, f = force of shape 0
        on shape 1, as :meth:`update_contacts`) for the observables; ``None`` without contacts."""
        if not rigid_max or contacts is None:
            return None
        out = getattr(self, "_contact_force_obs", None)
        if out is None or out.shape[0] != rigid_max:
            out = self._contact_force_obs = wp.zeros(rigid_max, dtype=wp.spatial_vector, device=self.device)
        model = self.model
        wp.launch(kernels.contact_force_kernel, dim=rigid_max,
                  inputs=[1.0 / (dt * dt), 1 if self.rigid_contact_con_weighting else 0,
                          contacts.rigid_contact_count, contacts.rigid_contact_shape0, contacts.rigid_contact_shape1,
                          model.shape_body, model.body_inv_mass, model.body_flags,
                          self.body_mask if self.body_mask is not None else self._empty_i,
                          self._body_contact_count, self._contact_impulse],
                  outputs=[out], device=self.device)  # fmt: skip
        return out

    # ------------------------------------------------------------- contact forces
    def update_contacts(self, contacts, state=None) -> None:
        """Fill ``contacts.force`` with the rigid contact forces of the last :meth:`step`.

        The values are approximate: each is the positional impulse accumulated by the contact over
        the step's iterations (plus its velocity-level friction) divided by ``dt^2`` (that is,
        impulse / dt). With ``rigid_contact_con_weighting`` the value is scaled like the applied
        correction: by ``1/N`` (``N`` the contact count of the dynamic body in the last iteration)
        or, between two dynamic bodies, by the symmetric ``2 / (N0 + N1)``, which no single scalar
        can make exact. ``force[i]`` holds ``(f, 0)``: ``f`` is the world-frame force that
        shape 0 exerts on shape 1 (normal part along ``+rigid_contact_normal`` when pushing,
        friction included); torques and soft-contact slots are zero.

        Raises:
            ValueError: ``contacts.force`` was not requested (``requested_attributes={"force"}``),
                no step has run, or ``contacts`` is not the buffer the last step used.
        """
        if getattr(contacts, "force", None) is None:
            raise ValueError(
                'update_contacts: contacts.force is None; create the Contacts with requested_attributes={"force"}'
            )
        if self._last_dt is None or self._last_rigid_max is None:
            raise ValueError("update_contacts: no step with contacts has been run yet")
        if int(contacts.rigid_contact_shape0.shape[0]) != self._last_rigid_max:
            raise ValueError("update_contacts: contacts capacity differs from the one passed to the last step()")
        n = int(contacts.force.shape[0])
        if n == 0:
            return
        model = self.model
        wp.launch(kernels.contact_force_kernel, dim=n,
                  inputs=[1.0 / (self._last_dt * self._last_dt), 1 if self.rigid_contact_con_weighting else 0,
                          contacts.rigid_contact_count, contacts.rigid_contact_shape0, contacts.rigid_contact_shape1,
                          model.shape_body, model.body_inv_mass, model.body_flags,
                          self.body_mask if self.body_mask is not None else self._empty_i,
                          self._body_contact_count, self._contact_impulse],
                  outputs=[contacts.force], device=self.device)  # fmt: skip

"""``SolverVBD``: vertex block descent for particles (cloth, soft bodies, springs) and augmented
vertex block descent (AVBD) for rigid bodies, joints and rods, in one implicit step.

One step (``dt``) minimises the incremental potential

    E(x) = sum_i m_i / (2 dt^2) |x_i - y_i|^2 + elastic(x) + contact(x) + constraints(x)

(``y`` the inertial prediction) by ``iterations`` sweeps of block coordinate descent: every
particle (a 3x3 Newton step on its own block) and every rigid body (a 6x6 step) is updated with
its neighbours held fixed, colour by colour (:meth:`armillary.ModelBuilder.color`), so blocks of
one colour run in parallel. Velocities follow as ``(x_end - x_begin) / dt``.

Per iteration the particle sweep runs first (bodies held at their current iterate), then the
body-particle contact and attachment reactions are accumulated onto the bodies (force and 6x6
Hessian) and the rigid sweep runs. See ``plugins/solver_vbd/README.md`` for the options, what is
supported and where this solver differs from the reference engine.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import warp as wp

from armillary.flags import ModelFlags, StateFlags
from armillary.sim.enums import JointType
from armillary.solvers import Coordinates, SolverBase, SolverCapabilities
from armillary.solvers.coupling import CouplingInterface
from armillary.solvers.observables import begin_step

from . import kernels
from .config import AVBDConfig, SelfContactConfig

__all__ = ["SolverVBD"]


def _count(model, name: str) -> int:
    return int(getattr(model, name, 0) or 0)


def _finite(name: str, value, *, lo=None, hi=None, lo_open=False, allow_none=False):
    if value is None and allow_none:
        return None
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"SolverVBD: {name} must be a number, got {value!r}") from None
    ok = math.isfinite(v) and (lo is None or (v > lo if lo_open else v >= lo)) and (hi is None or v <= hi)
    if not ok:
        rng = f"{'(' if lo_open else '['}{lo if lo is not None else '-inf'}, {hi if hi is not None else 'inf'}]"
        raise ValueError(f"SolverVBD: {name} must be finite and in {rng}, got {value!r}")
    return v


class SolverVBD(SolverBase, CouplingInterface):
    """Implicit solver: VBD for particles, AVBD for rigid bodies, joints and rods.

    Requires a colouring (:meth:`armillary.ModelBuilder.color` before ``finalize``) when
    particles are joined by elements or bodies by joints; particles without elements and bodies
    without joints need none. The constructor takes the reference engine's argument names and
    defaults; options this solver does not implement raise ``NotImplementedError`` when given a
    non-default value (never silently ignored). See ``plugins/solver_vbd/README.md``.

    Args:
        model: the :class:`~armillary.Model` (or a coupling ``ModelView``).
        iterations: block-descent sweeps per step (``None``: 10).
        friction_epsilon: slip velocity [m/s] below which friction is smoothed (static regime;
            slip per step ``friction_epsilon * dt``), particle and rigid contacts.
        dat_conservative_bound_relaxation: in (0, 1]: scale of each vertex's motion budget
            between two self-contact detections, ``0.5 * relaxation * (margin + gap)``.
        integrate_with_external_rigid_solver: bodies are moved by another solver; VBD reads their
            begin pose (``state_in``) and end pose (``state_out``) and moves only particles.
        particle_enable_self_contact: vertex-triangle and edge-edge self-contact.
        particle_self_contact_radius: deprecated legacy interaction distance [m]; when given,
            ``particle_self_contact_margin`` is the detection query radius.
        particle_self_contact_margin: self-contact interaction distance [m] (default 0.2).
        particle_self_contact_gap: extra detection-only distance [m] (default 0).
        particle_conservative_bound_relaxation: deprecated alias of
            ``dat_conservative_bound_relaxation`` (overrides it when given).
        particle_vertex_contact_buffer_size: vertex-triangle candidates kept per vertex.
        particle_edge_contact_buffer_size: edge-edge candidates kept per edge.
        particle_collision_detection_interval: ``< 0`` / ``None``: self-contact detection once
            per step before the solve; ``0``: before and after the first iteration; ``k >= 1``:
            before every ``k`` iterations.
        particle_edge_parallel_epsilon: near-parallel threshold of the edge-edge closest points.
        particle_enable_tile_solve: a speed hint for CUDA tiles; no effect on results (none on
            the CPU).
        particle_topological_contact_filter_threshold: self-contact pairs within this many mesh
            rings of each other are ignored.
        particle_rest_shape_contact_exclusion_radius: self-contact pairs closer than this [m] in
            the rest shape are ignored.
        particle_external_vertex_contact_filtering_map: not implemented (must be ``None``).
        particle_external_edge_contact_filtering_map: not implemented (must be ``None``).
        particle_membrane_model: ``"stvk"`` (default, the reference's membrane) or
            ``"neo_hookean"``; ``tri_ke`` / ``tri_ka`` are its Lame parameters [Pa m].
        rigid_compliant_alm: compliant augmented-Lagrangian rows (default) or the legacy AVBD
            penalty path (``False``, deprecated in the reference engine too).
        rigid_avbd_alpha: C0 stabilisation of joints and contacts in [0, 1] (``None``: 0 with
            compliant ALM, 0.95 on the legacy path).
        rigid_avbd_joint_alpha: joint override of ``rigid_avbd_alpha``.
        rigid_avbd_contact_alpha: contact override of ``rigid_avbd_alpha``.
        rigid_avbd_beta: legacy penalty ramp per iteration (``None``: 0, fixed penalties).
        rigid_avbd_linear_beta: linear override of ``rigid_avbd_beta``.
        rigid_avbd_angular_beta: angular override of ``rigid_avbd_beta``.
        rigid_avbd_gamma: per-step retention of multipliers (and legacy penalties) in [0, 1].
        rigid_contact_hard: legacy body-body contact mode (``None``: hard).
        rigid_contact_history: not implemented: body-body contact multipliers restart every step
            (``None`` / ``False`` only).
        rigid_contact_k_start: legacy contact penalty seed [N/m] (``None``: 100).
        rigid_body_contact_buffer_size: validated capacity (>= 1) with no effect: the per-body
            contact lists are sized from the contact buffer every step, so none can overflow.
        rigid_body_particle_contact_buffer_size: validated capacity (>= 1), as above.
        rigid_soft_contact_use_log_barrier: not implemented (must be ``False``).
        rigid_joint_linear_ke: structural stiffness of non-rod linear joint rows [N/m] (1e5).
        rigid_joint_angular_ke: structural stiffness of non-rod angular joint rows [N m/rad] (1e5).
        rigid_joint_linear_k_start: legacy linear joint penalty seed (100).
        rigid_joint_angular_k_start: legacy angular joint penalty seed (10).
        rigid_joint_linear_kd: damping of non-rod linear joint rows [N s/m] (0; negative clamps
            to 0).
        rigid_joint_angular_kd: damping of non-rod angular joint rows [N m s/rad] (0).
        tendon_max_sweeps: validated only (the core has no tendon model).
        tendon_settle_tol: validated only.
        tendon_activation_tol: validated only.
        rigid_soft_enable_dat: not implemented (must be ``False``).
        rigid_soft_dat_use_interval_arithmetic: not implemented (must be ``False``).
        deterministic: not implemented (must be ``None``).
        enable_fast_math: a code-generation hint; kernels keep IEEE arithmetic here.
        collision_pipeline: an optional pipeline the solver runs itself when ``step`` receives
            ``contacts=None``.
        collision_frequency: not implemented (must be ``None``: detection every step).
        collision_frequency_type: not implemented (must be ``None``).
    """

    capabilities = SolverCapabilities(
        coordinates=Coordinates.MAXIMAL,
        joint_types=frozenset(
            {
                JointType.BALL,
                JointType.FIXED,
                JointType.FREE,
                JointType.REVOLUTE,
                JointType.PRISMATIC,
                JointType.D6,
                JointType.ROD,
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
                "joint_drives",
                "joint_limit_springs",
                "mimic_joints",
                "loop_joints",
                "multiple_worlds",
                "reset_world_mask",
            }
        ),
        deterministic=False,
        collision_pipeline=True,
    )
    SUPPORTED_OBSERVABLES = frozenset({"body_qdd"})
    """``body_qdd``: the mean acceleration of the step, ``(body_qd_out - body_qd_in) / dt``."""

    class JointSlot:
        """Structural constraint slots of :meth:`SolverVBD.set_joint_constraint_mode`.

        ROD joints: ``STRETCH`` (0), ``SHEAR`` (1), ``BEND`` (2), ``TWIST`` (3). BALL: ``LINEAR``
        (0). FIXED / REVOLUTE / PRISMATIC / D6: ``LINEAR`` (0), ``ANGULAR`` (1). These are solver
        slots, not offsets into ``joint_target_ke`` (whose ROD order is
        ``[shear_x, shear_y, stretch_z, bend_x, bend_y, twist_z]``).
        """

        STRETCH = 0
        SHEAR = 1
        BEND = 2
        TWIST = 3
        LINEAR = 0
        ANGULAR = 1

    def __init__(
        self,
        model,
        *,
        iterations: int | None = None,
        friction_epsilon: float = 0.01,
        dat_conservative_bound_relaxation: float = 0.85,
        integrate_with_external_rigid_solver: bool = False,
        particle_enable_self_contact: bool = False,
        particle_self_contact_radius: float | None = None,
        particle_self_contact_margin: float | None = None,
        particle_self_contact_gap: float | None = None,
        particle_conservative_bound_relaxation: float | None = None,
        particle_vertex_contact_buffer_size: int = 32,
        particle_edge_contact_buffer_size: int = 64,
        particle_collision_detection_interval: int | None = None,
        particle_edge_parallel_epsilon: float = 1.0e-5,
        particle_enable_tile_solve: bool = True,
        particle_topological_contact_filter_threshold: int = 2,
        particle_rest_shape_contact_exclusion_radius: float = 0.0,
        particle_external_vertex_contact_filtering_map: dict | None = None,
        particle_external_edge_contact_filtering_map: dict | None = None,
        particle_membrane_model: str = "stvk",
        rigid_compliant_alm: bool = True,
        rigid_avbd_alpha: float | None = None,
        rigid_avbd_joint_alpha: float | None = None,
        rigid_avbd_contact_alpha: float | None = None,
        rigid_avbd_beta: float | None = None,
        rigid_avbd_linear_beta: float | None = None,
        rigid_avbd_angular_beta: float | None = None,
        rigid_avbd_gamma: float = 0.999,
        rigid_contact_hard: bool | None = None,
        rigid_contact_history: bool | None = None,
        rigid_contact_k_start: float | None = None,
        rigid_body_contact_buffer_size: int = 64,
        rigid_body_particle_contact_buffer_size: int = 256,
        rigid_soft_contact_use_log_barrier: bool = False,
        rigid_joint_linear_ke: float | None = None,
        rigid_joint_angular_ke: float | None = None,
        rigid_joint_linear_k_start: float | None = None,
        rigid_joint_angular_k_start: float | None = None,
        rigid_joint_linear_kd: float | None = None,
        rigid_joint_angular_kd: float | None = None,
        tendon_max_sweeps: int = 256,
        tendon_settle_tol: float = 1.0e-3,
        tendon_activation_tol: float = 2.0e-3,
        rigid_soft_enable_dat: bool = False,
        rigid_soft_dat_use_interval_arithmetic: bool = False,
        deterministic=None,
        enable_fast_math: bool = True,
        collision_pipeline=None,
        collision_frequency=None,
        collision_frequency_type=None,
    ):
        # options this solver does not implement: refuse non-default values instead of ignoring them
        unsupported = {
            "particle_external_vertex_contact_filtering_map": (particle_external_vertex_contact_filtering_map, None),
            "particle_external_edge_contact_filtering_map": (particle_external_edge_contact_filtering_map, None),
            "rigid_soft_contact_use_log_barrier": (rigid_soft_contact_use_log_barrier, False),
            "rigid_soft_enable_dat": (rigid_soft_enable_dat, False),
            "rigid_soft_dat_use_interval_arithmetic": (rigid_soft_dat_use_interval_arithmetic, False),
            "deterministic": (deterministic, None),
            "collision_frequency": (collision_frequency, None),
            "collision_frequency_type": (collision_frequency_type, None),
        }
        if rigid_contact_history:  # body-body multipliers restart every step (no contact matching)
            unsupported["rigid_contact_history"] = (rigid_contact_history, None)
        for name, (value, default) in unsupported.items():
            if value is not default and value != default:
                raise NotImplementedError(
                    f"SolverVBD: {name}={value!r} is not implemented by armillary's SolverVBD "
                    f"(only the default {default!r} is accepted); see plugins/solver_vbd/README.md"
                )
        # tendons: the core has no tendon model; the arguments are accepted for signature parity
        for name, value in (("tendon_max_sweeps", tendon_max_sweeps),):
            if int(value) < 1:
                raise ValueError(f"SolverVBD: {name} must be >= 1, got {value!r}")
        _finite("tendon_settle_tol", tendon_settle_tol, lo=0.0)
        _finite("tendon_activation_tol", tendon_activation_tol, lo=0.0)
        super().__init__(model, collision_pipeline=collision_pipeline)

        if iterations is None:
            iterations = 10
        if isinstance(iterations, bool) or int(iterations) != iterations or int(iterations) < 1:
            raise ValueError(f"SolverVBD: iterations must be an integer >= 1, got {iterations!r}")
        self.iterations = int(iterations)
        self.friction_epsilon = _finite("friction_epsilon", friction_epsilon, lo=0.0, lo_open=True)
        self.integrate_with_external_rigid_solver = bool(integrate_with_external_rigid_solver)
        self.particle_enable_tile_solve = bool(particle_enable_tile_solve)  # a speed hint: no tiles on the CPU
        self.enable_fast_math = bool(enable_fast_math)  # a codegen hint; results stay IEEE here
        if particle_membrane_model not in ("stvk", "neo_hookean"):
            raise ValueError(
                f"SolverVBD: particle_membrane_model must be 'stvk' or 'neo_hookean', got {particle_membrane_model!r}"
            )
        self.particle_membrane_model = particle_membrane_model

        # ---- self-contact
        relax = dat_conservative_bound_relaxation
        if particle_conservative_bound_relaxation is not None:
            warnings.warn("SolverVBD: particle_conservative_bound_relaxation is deprecated; use "
                          "dat_conservative_bound_relaxation", DeprecationWarning, stacklevel=2)  # fmt: skip
            relax = particle_conservative_bound_relaxation
        relax = _finite("dat_conservative_bound_relaxation", relax, lo=0.0, hi=1.0, lo_open=True)
        if particle_self_contact_radius is not None:
            warnings.warn("SolverVBD: particle_self_contact_radius is deprecated; use particle_self_contact_margin "
                          "(+ particle_self_contact_gap)", DeprecationWarning, stacklevel=2)  # fmt: skip
            radius = _finite("particle_self_contact_radius", particle_self_contact_radius, lo=0.0, lo_open=True)
            query = _finite("particle_self_contact_margin", 0.2 if particle_self_contact_margin is None
                            else particle_self_contact_margin, lo=0.0, lo_open=True)  # fmt: skip
            if query < radius:
                raise ValueError(f"SolverVBD: particle_self_contact_margin ({query}) is the detection radius in the "
                                 f"legacy form and must be >= particle_self_contact_radius ({radius})")  # fmt: skip
            margin, gap = radius, query - radius
        else:
            margin = _finite("particle_self_contact_margin", 0.2 if particle_self_contact_margin is None
                             else particle_self_contact_margin, lo=0.0, lo_open=True)  # fmt: skip
            gap = _finite("particle_self_contact_gap", 0.0 if particle_self_contact_gap is None
                          else particle_self_contact_gap, lo=0.0)  # fmt: skip
        for name, value in (("particle_vertex_contact_buffer_size", particle_vertex_contact_buffer_size),
                            ("particle_edge_contact_buffer_size", particle_edge_contact_buffer_size),
                            ("rigid_body_contact_buffer_size", rigid_body_contact_buffer_size),
                            ("rigid_body_particle_contact_buffer_size", rigid_body_particle_contact_buffer_size)):  # fmt: skip
            if isinstance(value, bool) or int(value) != value or int(value) < 1:
                raise ValueError(f"SolverVBD: {name} must be an integer >= 1, got {value!r}")
        if int(particle_topological_contact_filter_threshold) < 0:
            raise ValueError("SolverVBD: particle_topological_contact_filter_threshold must be >= 0, got "
                             f"{particle_topological_contact_filter_threshold!r}")  # fmt: skip
        self.particle_enable_self_contact = bool(particle_enable_self_contact)
        interval = -1 if particle_collision_detection_interval is None else particle_collision_detection_interval
        if isinstance(interval, bool) or int(interval) != interval:
            raise ValueError(f"SolverVBD: particle_collision_detection_interval must be an integer, got {interval!r}")
        self.particle_collision_detection_interval = int(interval)
        self.self_contact = SelfContactConfig(
            margin=margin,
            gap=gap,
            vertex_buffer_size=int(particle_vertex_contact_buffer_size),
            edge_buffer_size=int(particle_edge_contact_buffer_size),
            edge_parallel_epsilon=_finite("particle_edge_parallel_epsilon", particle_edge_parallel_epsilon, lo=0.0),
            topological_filter_threshold=int(particle_topological_contact_filter_threshold),
            rest_exclusion_radius=_finite("particle_rest_shape_contact_exclusion_radius",
                                          particle_rest_shape_contact_exclusion_radius, lo=0.0),  # fmt: skip
            bound_relaxation=relax,
            contact_ke=float(getattr(model, "soft_contact_ke", 1.0e3)),
            contact_kd=float(getattr(model, "soft_contact_kd", 0.0)),
            contact_mu=float(getattr(model, "soft_contact_mu", 0.5)),
        )

        # ---- rigid (AVBD)
        self.rigid_compliant_alm = bool(rigid_compliant_alm)
        if not self.rigid_compliant_alm:
            warnings.warn("SolverVBD: rigid_compliant_alm=False selects the legacy AVBD penalty path "
                          "(deprecated in the reference engine)", DeprecationWarning, stacklevel=2)  # fmt: skip
        legacy_alpha = 0.0 if self.rigid_compliant_alm else 0.95
        alpha = _finite("rigid_avbd_alpha", rigid_avbd_alpha, lo=0.0, hi=1.0, allow_none=True)
        beta = _finite("rigid_avbd_beta", rigid_avbd_beta, lo=0.0, allow_none=True)
        beta = 0.0 if beta is None else beta

        def pick(name, value, fallback, **kw):
            v = _finite(name, value, allow_none=True, **kw)
            return fallback if v is None else v

        jkd = pick("rigid_joint_linear_kd", rigid_joint_linear_kd, 0.0)
        akd = pick("rigid_joint_angular_kd", rigid_joint_angular_kd, 0.0)
        self.avbd = AVBDConfig(
            joint_alpha=pick("rigid_avbd_joint_alpha", rigid_avbd_joint_alpha,
                             legacy_alpha if alpha is None else alpha, lo=0.0, hi=1.0),  # fmt: skip
            contact_alpha=pick("rigid_avbd_contact_alpha", rigid_avbd_contact_alpha,
                               legacy_alpha if alpha is None else alpha, lo=0.0, hi=1.0),  # fmt: skip
            linear_beta=pick("rigid_avbd_linear_beta", rigid_avbd_linear_beta, beta, lo=0.0),
            angular_beta=pick("rigid_avbd_angular_beta", rigid_avbd_angular_beta, beta, lo=0.0),
            gamma=_finite("rigid_avbd_gamma", rigid_avbd_gamma, lo=0.0, hi=1.0),
            contact_hard=True if rigid_contact_hard is None else bool(rigid_contact_hard),
            contact_k_start=pick("rigid_contact_k_start", rigid_contact_k_start, 100.0, lo=0.0, lo_open=True),
            joint_linear_ke=pick("rigid_joint_linear_ke", rigid_joint_linear_ke, 1.0e5, lo=0.0),
            joint_angular_ke=pick("rigid_joint_angular_ke", rigid_joint_angular_ke, 1.0e5, lo=0.0),
            joint_linear_k_start=pick("rigid_joint_linear_k_start", rigid_joint_linear_k_start, 100.0, lo=0.0,
                                      lo_open=True),  # fmt: skip
            joint_angular_k_start=pick("rigid_joint_angular_k_start", rigid_joint_angular_k_start, 10.0, lo=0.0,
                                       lo_open=True),  # fmt: skip
            joint_linear_kd=max(jkd, 0.0),
            joint_angular_kd=max(akd, 0.0),
        )

        self.body_count = _count(model, "body_count")
        self.particle_count = _count(model, "particle_count")
        self._validate_model(model)

        from .particles import ParticleVBD
        from .rigid import RigidAVBD

        self._particles = None
        if self.particle_count:
            self._particles = ParticleVBD(
                model,
                friction_epsilon=self.friction_epsilon,
                membrane_model=self.particle_membrane_model,
                self_contact=self.self_contact if self.particle_enable_self_contact else None,
                collision_detection_interval=self.particle_collision_detection_interval,
            )
        self._rigid = None
        if self.body_count and not self.integrate_with_external_rigid_solver:
            self._rigid = RigidAVBD(model, friction_epsilon=self.friction_epsilon,
                                    compliant_alm=self.rigid_compliant_alm, avbd=self.avbd)  # fmt: skip
        dev = self.device
        nb = max(self.body_count, 1)
        self._ext_f = wp.zeros(nb, dtype=wp.spatial_vector, device=dev)
        self._ext_h_ll = wp.zeros(nb, dtype=wp.mat33, device=dev)
        self._ext_h_la = wp.zeros(nb, dtype=wp.mat33, device=dev)
        self._ext_h_aa = wp.zeros(nb, dtype=wp.mat33, device=dev)
        # coupling: time integral of the interaction wrench on every body since the last input update
        self._impulse = wp.zeros(nb, dtype=wp.spatial_vector, device=dev)
        self._impulse_time = wp.zeros(1, dtype=float, device=dev)
        self._track_impulse = False
        self.coupling_harvest = "contact" if self._proxy_joints(model) else "inertial"
        """How :meth:`coupling_harvest_proxy_wrenches` measures the feedback on proxy bodies:
        ``"inertial"`` (default): the impulse VBD's own solve applied, the inertial residual of
        each body's solved pose against its private prediction (gravity and force input excluded
        exactly); ``"contact"``: the body-particle reactions and rigid contact wrenches of the
        last sweep. Both agree at convergence; with one lagged proxy iteration only the first
        settles a box on cloth (README). ``"contact"`` is the default when the model (a coupling
        view) keeps a constraining joint on a proxy body (proxy joints): the inertial residual
        would also count those joints' forces, which the source applies itself."""

    @staticmethod
    def _proxy_joints(model) -> bool:
        """True when an enabled, constraining (non-FREE) joint touches a ``BodyFlags.PROXY`` body."""
        from armillary.sim.enums import BodyFlags

        if not _count(model, "body_count") or not _count(model, "joint_count"):
            return False
        flags = model.body_flags.numpy()
        proxy = (flags & int(BodyFlags.PROXY)) != 0
        if not proxy.any():
            return False
        jt, en = model.joint_type.numpy(), model.joint_enabled.numpy()
        par, chi = model.joint_parent.numpy(), model.joint_child.numpy()
        for j in range(len(jt)):
            if not en[j] or int(jt[j]) == int(JointType.FREE):
                continue
            if (par[j] >= 0 and proxy[par[j]]) or (chi[j] >= 0 and proxy[chi[j]]):
                return True
        return False

    # ------------------------------------------------------------------ validation
    def _validate_model(self, model) -> None:
        """Build-time checks: colouring where needed, non-degenerate elements (ValueError naming
        the element, never NaN at step time)."""
        np_ = self.particle_count
        elements = _count(model, "spring_count") + _count(model, "tri_count") + _count(model, "tet_count") + \
            _count(model, "edge_count")  # fmt: skip
        groups = getattr(model, "particle_color_groups", None) or []
        if np_ and elements and not groups:
            raise ValueError(
                "SolverVBD: model.particle_color_groups is empty, but the model's particles are joined by "
                f"{elements} element(s) (springs, triangles, edges, tetrahedra): call ModelBuilder.color() (or "
                "set_coloring()) before finalize()"
            )
        if np_ and groups:
            colored = sum(int(g.shape[0]) for g in groups)
            if colored != np_:
                raise ValueError(f"SolverVBD: model.particle_color_groups covers {colored} particle(s), the model has "
                                 f"{np_}: colour again after adding particles (ModelBuilder.color())")  # fmt: skip
        if self.body_count and not self.integrate_with_external_rigid_solver and _count(model, "joint_count"):
            parents = model.joint_parent.numpy()
            if (parents >= 0).any() and not (getattr(model, "body_color_groups", None) or []):
                raise ValueError(
                    "SolverVBD: model.body_color_groups is empty, but bodies are joined by joints: call "
                    "ModelBuilder.color() before finalize()"
                )
        T = _count(model, "tri_count")
        if T:
            area = model.tri_areas.numpy()
            poses = model.tri_poses.numpy().reshape(T, 4)
            bad = np.nonzero(~(np.isfinite(area) & (area > 0.0) & np.isfinite(poses).all(axis=1)))[0]
            if len(bad):
                i = int(bad[0])
                raise ValueError(f"SolverVBD: triangle {i} {tuple(model.tri_indices.numpy()[i].tolist())} is degenerate "
                                 f"(rest area {float(area[i])!r}); {len(bad)} such triangle(s)")  # fmt: skip
        K = _count(model, "tet_count")
        if K:
            poses = model.tet_poses.numpy().reshape(K, 3, 3)
            finite = np.isfinite(poses).reshape(K, 9).all(axis=1)
            det = np.where(finite, np.linalg.det(np.where(finite[:, None, None], poses, 0.0)), 0.0)
            bad = np.nonzero(~(finite & (det > 0.0)))[0]
            if len(bad):
                i = int(bad[0])
                raise ValueError(f"SolverVBD: tetrahedron {i} {tuple(model.tet_indices.numpy()[i].tolist())} is inverted "
                                 f"or degenerate (rest pose determinant {float(det[i])!r}); {len(bad)} such "
                                 "tetrahedron(s)")  # fmt: skip
        S = _count(model, "spring_count")
        if S:
            rest = model.spring_rest_length.numpy()
            bad = np.nonzero(~(np.isfinite(rest) & (rest >= 0.0)))[0]
            if len(bad):
                raise ValueError(f"SolverVBD: spring {int(bad[0])} has rest length {float(rest[bad[0]])!r} "
                                 "(must be finite and >= 0)")  # fmt: skip

    def _check_array(self, owner, which: str, name: str, n: int, dtype, required: bool) -> None:
        """``owner.name`` must be a wp.array of ``n`` ``dtype`` on the model's device (or absent
        when not ``required``): checked on the host before any launch reads it."""
        a = getattr(owner, name, None)
        if a is None and not required:
            return
        if not isinstance(a, wp.array):
            raise ValueError(f"SolverVBD.step: {which}.{name} is {a!r}; expected a wp.array of {n} {dtype.__name__}")
        if a.ndim != 1 or a.shape[0] != n or a.dtype != dtype:
            raise ValueError(f"SolverVBD.step: {which}.{name} has shape {a.shape} and dtype {a.dtype.__name__}; "
                             f"expected ({n},) {dtype.__name__}")  # fmt: skip
        if str(a.device) != str(self.device):
            raise ValueError(f"SolverVBD.step: {which}.{name} is on {a.device}, the model on {self.device}")

    def _check_state(self, state, which: str) -> None:
        nb, npart = self.body_count, self.particle_count
        for name, n, dtype, required in (("body_q", nb, wp.transform, True), ("body_qd", nb, wp.spatial_vector, True),
                                         ("body_f", nb, wp.spatial_vector, False),
                                         ("particle_q", npart, wp.vec3, True), ("particle_qd", npart, wp.vec3, True),
                                         ("particle_f", npart, wp.vec3, False)):  # fmt: skip
            if n:
                self._check_array(state, which, name, n, dtype, required)

    def _check_control(self, control) -> None:
        if control is None or not self.body_count:
            return
        nq, nd = _count(self.model, "joint_coord_count"), _count(self.model, "joint_dof_count")
        for name, n in (("joint_target_q", nq), ("joint_target_qd", nd), ("joint_f", nd)):
            a = getattr(control, name, None)
            if a is not None and n:
                self._check_array(control, "control", name, n, wp.float32, False)

    # ------------------------------------------------------------------ step
    def step(self, state_in, state_out, control, contacts, dt: float, *, observables=None) -> None:
        """Advance ``state_in`` by ``dt`` [s] into ``state_out`` (``state_in`` is not modified).

        ``contacts`` may be ``None``: with a solver-owned ``collision_pipeline`` the solver
        detects contacts from ``state_in`` itself, otherwise nothing collides. ``observables``:
        a container from :meth:`observables` (``SUPPORTED_OBSERVABLES``) filled by this step.
        """
        dt = float(dt)
        if not (math.isfinite(dt) and dt > 0.0):
            raise ValueError(f"SolverVBD.step: dt must be finite and > 0, got {dt!r}")
        if state_in is None or state_out is None:
            raise ValueError("SolverVBD.step: state_in and state_out must be State objects, got None")
        self._check_state(state_in, "state_in")
        self._check_state(state_out, "state_out")
        self._check_control(control)
        if contacts is None and self.collision_pipeline is not None:
            contacts = self.collision_pipeline.collide(state_in)
        if contacts is not None and str(getattr(contacts, "device", self.device)) != str(self.device):
            raise ValueError(f"SolverVBD.step: contacts are on {contacts.device}, the model on {self.device}")
        observed = begin_step(self, observables, state_in, state_out, contacts)

        rigid, parts = self._rigid, self._particles
        if self.body_count:
            if rigid is not None:
                rigid.begin_step(state_in, state_out, control, contacts, dt)
                body_q, body_q_prev = state_out.body_q, rigid.body_q_prev
            else:  # an external solver moves the bodies: read its begin and end poses
                body_q_prev = state_in.body_q
                body_q = state_out.body_q
        else:
            body_q = body_q_prev = None
        if parts is not None:
            parts.begin_step(state_in, state_out, contacts, dt)
        for it in range(self.iterations):
            if parts is not None:
                parts.iterate(state_in, state_out, contacts, dt, body_q, body_q_prev, it)
            if rigid is not None:
                self._zero_ext()
                if parts is not None:
                    parts.accumulate_body_reactions(state_out, contacts, dt, body_q, body_q_prev, self._ext_f,
                                                    self._ext_h_ll, self._ext_h_la, self._ext_h_aa)  # fmt: skip
                rigid.iterate(state_in, state_out, control, contacts, dt, self._ext_f, self._ext_h_ll,
                              self._ext_h_la, self._ext_h_aa, it)  # fmt: skip
        if rigid is not None:
            rigid.end_step(state_in, state_out, dt)
        if parts is not None:
            parts.end_step(state_in, state_out, dt)
        if self._track_impulse and self.body_count:
            self._accumulate_impulse(state_out, contacts, dt, body_q, body_q_prev)
        if observed is not None:
            observed.finish(state_out, dt)

    def _zero_ext(self) -> None:
        self._ext_f.zero_()
        self._ext_h_ll.zero_()
        self._ext_h_la.zero_()
        self._ext_h_aa.zero_()

    def _accumulate_impulse(self, state_out, contacts, dt, body_q, body_q_prev) -> None:
        """Add ``dt`` times the interaction wrench on every body (body-particle reactions and rigid
        contacts) to the coupling impulse accumulator. With the rigid half the reactions are those
        of the last sweep, the ones that produced the bodies' final update (their momentum change);
        without it (external rigid solver) they are evaluated at the final poses."""
        if self._rigid is None:
            self._zero_ext()
        if self._rigid is None and self._particles is not None and body_q is not None:
            self._particles.accumulate_body_reactions(state_out, contacts, dt, body_q, body_q_prev, self._ext_f,
                                                      self._ext_h_ll, self._ext_h_la, self._ext_h_aa)  # fmt: skip
        if self._rigid is not None and self.coupling_harvest == "inertial":
            m = self.model
            wp.launch(kernels.inertial_impulse_kernel, dim=self.body_count,
                      inputs=[m.body_com, m.body_mass, m.body_inertia, m.body_inv_mass, state_out.body_q,
                              self._rigid._x_pred, self._rigid._q_pred, dt],
                      outputs=[self._impulse, self._impulse_time], device=self.device)  # fmt: skip
            return
        rigid_wrench = self._rigid.contact_body_wrench if self._rigid is not None else self._ext_f
        wp.launch(kernels.accumulate_impulse_kernel, dim=self.body_count,
                  inputs=[self._ext_f, rigid_wrench, 1 if self._rigid is not None else 0, dt],
                  outputs=[self._impulse, self._impulse_time], device=self.device)  # fmt: skip

    # ------------------------------------------------------------------ model changes / reset
    def notify_model_changed(self, flags) -> None:
        super().notify_model_changed(flags)
        value = int(flags)
        if self._particles is not None:
            self._particles.refresh(value)
        if self._rigid is not None:
            self._rigid.refresh(value)

    def reset(self, state, world_mask=None, flags=None) -> None:
        super().reset(state, world_mask=world_mask, flags=flags)
        for half in (self._particles, self._rigid):
            if half is not None and hasattr(half, "reset"):
                half.reset(world_mask)

    # ------------------------------------------------------------------ coupling hooks
    def coupling_notify_input_state_update(self, state, flags, *, iteration_restart: bool = False,
                                           dt: float = 0.0) -> None:  # fmt: skip
        """Restart the interaction-impulse accumulator the proxy harvest reads, and let the
        halves realign private history (self-contact references, warm starts) with the new
        public state."""
        super().coupling_notify_input_state_update(state, flags, iteration_restart=iteration_restart, dt=dt)
        self._track_impulse = True
        self._impulse.zero_()
        self._impulse_time.zero_()
        for half in (self._particles, self._rigid):
            if half is not None and hasattr(half, "notify_input_state_update"):
                half.notify_input_state_update(state, int(flags), iteration_restart)

    def coupling_harvest_proxy_wrenches(self, body_local_to_proxy_global, out_body_f, *, body_qd_before, state,
                                        state_out, contacts, dt: float) -> None:  # fmt: skip
        """Solver-native feedback on each proxy body (world frame, at the COM), added to
        ``out_body_f[proxy]``: the mean wrench over the VBD steps since the last input update,
        measured as :attr:`coupling_harvest` says (the impulse VBD's solve applied, from its
        private inertial prediction, by default)."""
        if not self.body_count:
            return
        if int(body_local_to_proxy_global.shape[0]) != self.body_count:
            raise ValueError(f"SolverVBD.coupling_harvest_proxy_wrenches: body_local_to_proxy_global has "
                             f"{body_local_to_proxy_global.shape[0]} rows, the model has {self.body_count} bodies")  # fmt: skip
        if not self._track_impulse:
            super().coupling_harvest_proxy_wrenches(body_local_to_proxy_global, out_body_f,
                                                    body_qd_before=body_qd_before, state=state, state_out=state_out,
                                                    contacts=contacts, dt=dt)  # fmt: skip
            return
        wp.launch(kernels.harvest_impulse_kernel, dim=self.body_count,
                  inputs=[body_local_to_proxy_global, self._impulse, self._impulse_time],
                  outputs=[out_body_f], device=self.device)  # fmt: skip

    def coupling_notify_iteration_restarts(self, enabled: bool) -> None:
        super().coupling_notify_iteration_restarts(enabled)
        self._track_impulse = True

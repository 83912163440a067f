"""``SolverCoupledADMM``: symmetric coupling of solver entries by fixed-iteration ADMM.

Interface rows are discovered from the shared model:

* cross-solver model joints (``joint_owner == -1`` with parent and child owned by different
  entries): BALL (3 translational anchor rows), FIXED (3 + 3 angular rows) and REVOLUTE (3
  translational + 2 hinge-axis alignment rows, plus a dry-friction row about the hinge axis from
  ``Model.joint_friction`` [N m] when it is positive);
* body-particle attachments authored as ``coupling:body_particle_attachment`` custom attributes
  (:meth:`SolverCoupledADMM.add_body_particle_attachment`), coupled when the body and the
  particle belong to different entries;
* contacts between the entities of the two entries of every ``Config.contact_pairs`` entry
  (:class:`SolverCoupledADMM.ContactPair`), detected once per step at ``state_in`` by the
  coupler's private detection (:mod:`.admm_contacts`): rigid-rigid contacts from a private
  :class:`~armillary.CollisionPipeline` whose explicit broad phase holds only the model's
  candidate shape pairs (``Model.shape_contact_pairs``: collision groups, filter pairs and
  worlds respected) between shapes on bodies of the two entries (speculative gap up to
  0.1 m, so approaching shapes are caught a step early), rigid-particle contacts from that
  pipeline's soft contacts kept when the particle and the shape's body belong to the two
  entries (detection gap 0.02 m), and particle-particle contacts from a private
  ``wp.HashGrid`` (distance below the radii + 0.01 m + the relative motion over ``dt``). Each
  contact is a unilateral normal row (force ``lam_n >= 0`` along the normal, equal and
  opposite at the two points: body points fixed in the body frames at detection, particle
  centres) and an isotropic Coulomb row (tangential force projected onto
  ``|lam_t| <= mu lam_n``; ``mu`` combined as XPBD does: ``(mu_0 + mu_1) / 2`` for two shapes,
  ``(Model.particle_mu + shape mu) / 2`` for a particle and a shape, ``Model.particle_mu`` for
  two particles). Buffers are fixed-capacity (the pipeline's ``rigid_contact_max`` for the
  cross-entry pairs, every particle against every particle-colliding shape and, per pair of
  particle entries, ``min(n_a n_b, 12 max(n_a, n_b))`` particle-particle rows: extra ones are
  dropped and ``diagnostics.contact_count[2]`` counts only stored rows).

Entries never see the shapes of bodies they do not own (entry-local collision visibility), so a
cross-entry contact is handled by the coupler alone, never twice; without a ``ContactPair``
bodies and particles of different entries pass through each other. Static shapes (the ground)
stay with the entries: pass the caller's contacts to :meth:`step` for them.

Algorithm (one :meth:`step`, ``Config.iterations`` fixed iterations, no host synchronisation):

0. predictor: every row's dual variable (its coupling force / wrench, warm-started from the last
   step) takes a full Newton step closing the gap predicted at the end of the step from the input
   state, ``g + dt c + dt^2 a`` (``a``: the relative acceleration the last step produced);
1. every entry restarts from ``state_in`` (public arrays copied again; the input-state hooks get
   ``iteration_restart=True`` after the first iteration); the coupling forces are added to the
   public force inputs (``body_f`` / ``particle_f``) of the entry's own bodies and particles,
   the force inputs of entities it does not own are zeroed (a reduced-coordinate solver would
   pass a force on its kinematic copy of the other entry's body on to the parent); with
   ``gamma > 0`` the endpoint masses are proximally scaled by ``1 + gamma`` in the entry views
   (once), input velocities are shifted toward the previous iterate and the extra weight is
   compensated, so the fixed point is unchanged;
2. each entry steps (its own substeps);
3. the owned rows are gathered and each row's gap ``g`` (anchor distance, hinge-axis or relative
   rotation misalignment) and gap rate ``c`` are measured on the outputs (``diagnostics``);
4. dual update: the Newton step closing ``g`` for the linearised endpoint response
   ``dg = dt^2 W dlam`` (``W``: the endpoints' mobility at the anchors; for contact rows the
   normal gap and the tangential slip, i.e. the relative tangential displacement since the
   step start, followed by the projections onto ``lam_n >= 0`` and the friction disk), relaxed
   by the proximal-point (method-of-multipliers) factor ``p / (1 + p)`` with the dimensionless
   penalty ``p = rho + baumgarte + (k dt^2 + d dt) w`` (``k``, ``d``: the row's stiffness and
   damping, ``w``: its mobility). Body mobilities are the free-body ones, which bound every
   constrained mobility from above, so the steps never overshoot and every positive ``rho``
   contracts (contact rows sharing an endpoint step simultaneously: beyond 4 rows per endpoint
   its mobility is split among them). The last iteration only measures (the next predictor
   starts from its outputs);
5. equal and opposite forces are splatted to the endpoint force buffers for the next iteration.

Rows are hard constraints at convergence: more iterations shrink the gaps. The last iteration's
entry outputs are reconciled into ``state_out``. Per-iteration diagnostics of the last step are
device arrays in :attr:`SolverCoupledADMM.diagnostics`.

Warm start: joint and attachment duals carry over from step to step. Contact rows are new every
step: with ``Config.rigid_contact_matching="disabled"`` they start from zero; with ``"latest"``
or ``"sticky"`` a rigid contact that the core matcher pairs with one of the previous step
(same shape pair, midpoint within ``contact_matching_pos_threshold``, normal dot above
``contact_matching_normal_dot_threshold``; ``"sticky"`` also replays its contact geometry)
starts from ``contact_matching_force_scale`` times its previous dual and predicts with its
previous relative acceleration; particle rows are matched by their ``(particle, shape)`` /
``(particle, particle)`` keys the same way. :meth:`SolverCoupledADMM.reset` forgets all of it.
A warm-started dual is carried from step to step like an integral term: with few iterations,
several contact rows in series (e.g. a column of particles alternately owned by two entries,
4 iterations) can ring by a few millimetres at the default scale 0.9; more iterations or a
smaller ``contact_matching_force_scale`` (0.5) settle it.

The proximal terms (``gamma``) act on joint and attachment endpoints only; contact rows use
the model's free-body mobilities. Contact detection is built at construction from the model's
shapes, ownership and candidate pairs (``shape_material_mu`` and ``Model.particle_mu`` are read
every step).

Not implemented yet: joint proximal proxy bodies (``joint_proximal_*`` options are validated
and ignored).
"""

from __future__ import annotations

import dataclasses
import math
import types
from collections.abc import Sequence
from typing import Literal

import numpy as np
import warp as wp

from armillary.flags import ModelFlags, StateFlags
from armillary.sim.enums import JointType
from armillary.solvers import Coordinates, SolverCapabilities
from armillary.solvers.coupling import ENDPOINT_PARTICLE, coupling_hook

from armillary.launch import LaunchCache

from . import admm_kernels as K
from .admm_contacts import ContactRowManager
from . import kernels as base_kernels
from .solver_coupled import _RECONCILED, SolverCoupled, _np

__all__ = ["SolverCoupledADMM"]

_KINEMATIC = ("body_q", "body_qd", "joint_q", "joint_qd", "particle_q", "particle_qd")
_ATTACH_NS = "coupling"
_ATTACH_FREQ = "body_particle_attachment"


def _finite(value, label: str, *, lower: float | None = None, upper: float | None = None,
            lower_inclusive: bool = True) -> float:  # fmt: skip
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"SolverCoupledADMM.Config: {label} must be a finite number, got {value!r}") from None
    if not math.isfinite(v):
        raise ValueError(f"SolverCoupledADMM.Config: {label} must be finite, got {value!r}")
    if lower is not None and (v < lower or (v == lower and not lower_inclusive)):
        op = ">=" if lower_inclusive else ">"
        raise ValueError(f"SolverCoupledADMM.Config: {label} must be {op} {lower}, got {value!r}")
    if upper is not None and v > upper:
        raise ValueError(f"SolverCoupledADMM.Config: {label} must be <= {upper}, got {value!r}")
    return v


class SolverCoupledADMM(SolverCoupled):
    """Couple multiple solvers with linearized ADMM over model-derived constraints.

    Args:
        model: the shared model.
        entries: the :class:`SolverCoupled.Entry` list.
        coupling: a :class:`SolverCoupledADMM.Config` (``None``: defaults).

    See the module documentation for rows and the algorithm. ``diagnostics`` holds, for the last
    step, ``primal_residual`` (max interface gap [m] / misalignment [rad] / contact penetration
    [m] after each iteration), ``dual_residual`` (max change of a row's dual force [N] / torque
    [N m] in each iteration), ``joint_gap`` and ``attachment_gap`` (max translational gaps [m])
    and ``contact_gap`` (max contact penetration [m]), each of shape ``(iterations,)``, and
    ``contact_count`` (device int32, shape ``(3,)``: this step's rigid-rigid, rigid-particle and
    particle-particle contact rows).
    """

    capabilities = SolverCapabilities(coordinates=Coordinates.MAXIMAL, collision_pipeline=True)

    BODY_PARTICLE_ATTACHMENT_FREQUENCY = f"{_ATTACH_NS}:{_ATTACH_FREQ}"
    BODY_PARTICLE_ATTACHMENT_BODY_ATTR = f"{_ATTACH_NS}:{_ATTACH_FREQ}_body"
    BODY_PARTICLE_ATTACHMENT_PARTICLE_ATTR = f"{_ATTACH_NS}:{_ATTACH_FREQ}_particle"
    BODY_PARTICLE_ATTACHMENT_BODY_POINT_ATTR = f"{_ATTACH_NS}:{_ATTACH_FREQ}_body_point"
    BODY_PARTICLE_ATTACHMENT_STIFFNESS_ATTR = f"{_ATTACH_NS}:{_ATTACH_FREQ}_stiffness"
    BODY_PARTICLE_ATTACHMENT_DAMPING_ATTR = f"{_ATTACH_NS}:{_ATTACH_FREQ}_damping"
    BODY_PARTICLE_ATTACHMENT_ENABLED_ATTR = f"{_ATTACH_NS}:{_ATTACH_FREQ}_enabled"

    @dataclasses.dataclass(frozen=True)
    class ContactPair:
        """One cross-solver contact interface: ADMM contact rows between the entities of two entries.

        The coupler emits the applicable subset of rigid-rigid (shapes on bodies of one entry
        against shapes on bodies of the other), rigid-particle and particle-particle rows; a pair
        whose entries own nothing that can touch produces no rows. The order of the two names
        does not matter. Friction comes from the materials (``shape_material_mu``,
        ``Model.particle_mu``), not from the pair.

        Args:
            source: name of one entry.
            destination: name of the other entry (must differ from ``source``; both must name
                entries of the coupled solver, else its constructor raises ``ValueError``).
        """

        source: str
        destination: str

        def __post_init__(self):
            for label in ("source", "destination"):
                v = getattr(self, label)
                if not isinstance(v, str) or not v:
                    raise ValueError(f"SolverCoupledADMM.ContactPair: {label} must be a non-empty entry name, "
                                     f"got {v!r}")  # fmt: skip
            if self.source == self.destination:
                raise ValueError(f"SolverCoupledADMM.ContactPair: source and destination must differ, both are "
                                 f"{self.source!r}")  # fmt: skip

    @dataclasses.dataclass
    class Config:
        """Linearized ADMM coupling configuration.

        Args:
            iterations: positive number of ADMM iterations per step (fixed: graph-capturable).
            rho: positive penalty, dimensionless (in units of a row's effective mass over
                ``dt^2``); larger values take longer dual steps (relaxation ``p / (1 + p)``).
            gamma: non-negative proximal mass scaling: endpoint masses ``x (1 + gamma)`` in the
                views of maximal-coordinate entries (and particle entries), input velocities
                shifted toward the previous iterate (slower, more damped iterations).
            baumgarte: position error correction weight in ``[0, 1]``, added to the penalty.
            joint_stiffness, joint_damping: translational quadratic penalty stiffness [N/m] and
                damping [N s/m] of cross-solver joint rows (added to the penalty).
            joint_angular_stiffness, joint_angular_damping: the same for the angular rows of
                FIXED and REVOLUTE joints [N m/rad, N m s/rad].
            joint_proximal_bodies, joint_proximal_destination_entries, joint_proximal_mass_scale:
                accepted for API compatibility (validated); joint proxy bodies are not implemented:
                cross-solver joints are always coupled by their ADMM rows alone, and a warning says
                so when ``joint_proximal_destination_entries`` or a mass scale other than 1 is given
                while the model has cross-solver joints.
            rigid_contact_matching: warm start of the contact rows: ``"disabled"`` (every
                step starts from zero), ``"latest"`` (contacts matched to the previous step's by
                the core matcher start from their scaled previous dual) or ``"sticky"`` (also
                replays the matched contact geometry); particle rows match by their keys.
            contact_matching_pos_threshold: maximum midpoint displacement [m] of a matched rigid
                contact (>= 0; ``None``: the :class:`~armillary.CollisionPipeline` default,
                0.0005 m).
            contact_matching_normal_dot_threshold: minimum dot product of a matched contact's
                old and new normals (in ``[-1, 1]``; ``None``: the pipeline default, 0.995).
            contact_matching_force_scale: factor (>= 0) on a matched contact's previous dual
                (``0``: matching without dual warm start).
            contact_pairs: :class:`SolverCoupledADMM.ContactPair` values enabling contact rows
                (empty: entries of different solvers do not collide; see
                :meth:`SolverCoupledADMM.auto_detect_contact_pairs`).
            contact_max_triangle_pairs: keyword-only, forwarded to the private
                :class:`~armillary.CollisionPipeline` as ``max_triangle_pairs`` (``None``: its
                default; integer >= 0). The core pipeline processes a mesh pair's triangles in
                the pair's thread, so the value currently has no effect there.
            contact_reduction_hashtable_size_factor: keyword-only, forwarded to the pipeline's
                ``contact_reduction_hashtable_size_factor`` (``None``: its default; > 0); like
                the previous option it has no effect in the core pipeline.
        """

        iterations: int = 5
        rho: float = 1.0
        gamma: float = 0.0
        baumgarte: float = 0.0
        joint_stiffness: float = 10000.0
        joint_damping: float = 0.0
        joint_angular_stiffness: float = 10000.0
        joint_angular_damping: float = 0.0
        joint_proximal_bodies: bool = True
        joint_proximal_destination_entries: Sequence[str] | None = None
        joint_proximal_mass_scale: float = 1.0
        rigid_contact_matching: Literal["disabled", "latest", "sticky"] = "disabled"
        contact_matching_pos_threshold: float | None = None
        contact_matching_normal_dot_threshold: float | None = None
        contact_matching_force_scale: float = 0.9
        contact_pairs: Sequence[SolverCoupledADMM.ContactPair] = ()
        _: dataclasses.KW_ONLY
        contact_max_triangle_pairs: int | None = None
        contact_reduction_hashtable_size_factor: float | None = None

    # ------------------------------------------------------------------ authoring helpers
    @staticmethod
    def register_custom_attributes(builder) -> None:
        """Register the ``coupling:body_particle_attachment`` frequency and its attributes on
        ``builder`` (idempotent)."""
        from armillary.sim.custom_attributes import CustomAttribute, CustomFrequency

        key = SolverCoupledADMM.BODY_PARTICLE_ATTACHMENT_FREQUENCY
        builder.add_custom_frequency(CustomFrequency(name=_ATTACH_FREQ, namespace=_ATTACH_NS))
        specs = (("body", wp.int32, -1, "body"), ("particle", wp.int32, -1, "particle"),
                 ("body_point", wp.vec3, None, None), ("stiffness", wp.float32, 1.0e4, None),
                 ("damping", wp.float32, 0.0, None), ("enabled", wp.bool, True, None))  # fmt: skip
        for suffix, dtype, default, refs in specs:
            name = f"{_ATTACH_FREQ}_{suffix}"
            if builder.has_custom_attribute(f"{_ATTACH_NS}:{name}"):
                continue
            builder.add_custom_attribute(CustomAttribute(name=name, dtype=dtype, frequency=key, namespace=_ATTACH_NS,
                                                         default=default, references=refs))  # fmt: skip

    @staticmethod
    def add_body_particle_attachment(builder, body: int, particle: int, *, body_point=(0.0, 0.0, 0.0),
                                     stiffness: float = 10000.0, damping: float = 0.0,
                                     enabled: bool = True) -> int:  # fmt: skip
        """Add a model-level rigid-body-to-particle attachment row (registers the custom
        attributes on first use); returns the attachment index.

        Args:
            builder: model builder owning the body and the particle.
            body: body index; particle: particle index.
            body_point: body-frame attachment point [m].
            stiffness: quadratic attachment stiffness [N/m] (>= 0).
            damping: attachment damping [N s/m] (>= 0).
            enabled: whether the row is active.
        """
        nb, npart = int(builder.body_count), int(builder.particle_count)
        if not 0 <= int(body) < nb:
            raise ValueError(f"add_body_particle_attachment: body {body} out of range [0, {nb})")
        if not 0 <= int(particle) < npart:
            raise ValueError(f"add_body_particle_attachment: particle {particle} out of range [0, {npart})")
        for label, v in (("stiffness", stiffness), ("damping", damping)):
            if not (math.isfinite(float(v)) and float(v) >= 0.0):
                raise ValueError(f"add_body_particle_attachment: {label} must be finite and >= 0, got {v!r}")
        SolverCoupledADMM.register_custom_attributes(builder)
        S = SolverCoupledADMM
        rows = builder.add_custom_values({
            S.BODY_PARTICLE_ATTACHMENT_BODY_ATTR: int(body),
            S.BODY_PARTICLE_ATTACHMENT_PARTICLE_ATTR: int(particle),
            S.BODY_PARTICLE_ATTACHMENT_BODY_POINT_ATTR: wp.vec3(*[float(x) for x in body_point]),
            S.BODY_PARTICLE_ATTACHMENT_STIFFNESS_ATTR: float(stiffness),
            S.BODY_PARTICLE_ATTACHMENT_DAMPING_ATTR: float(damping),
            S.BODY_PARTICLE_ATTACHMENT_ENABLED_ATTR: bool(enabled),
        })
        return int(rows[S.BODY_PARTICLE_ATTACHMENT_BODY_ATTR])

    @staticmethod
    def auto_detect_contact_pairs(entries) -> list[SolverCoupledADMM.ContactPair]:
        """A :class:`ContactPair` for every distinct combination of entries (stepping order)."""
        names = [e.name for e in entries]
        return [SolverCoupledADMM.ContactPair(a, b) for i, a in enumerate(names) for b in names[i + 1:]]

    # ------------------------------------------------------------------ construction
    def __init__(self, model, entries, coupling: SolverCoupledADMM.Config | None = None) -> None:
        if coupling is None:
            coupling = SolverCoupledADMM.Config()
        super().__init__(model, entries, coupling)

    def _validate_coupling(self, coupling) -> None:
        if not isinstance(coupling, SolverCoupledADMM.Config):
            raise TypeError(f"SolverCoupledADMM: coupling must be a SolverCoupledADMM.Config, got "
                            f"{type(coupling).__name__}")  # fmt: skip
        c = coupling
        it = c.iterations
        if isinstance(it, bool) or not isinstance(it, (int, np.integer)) or int(it) < 1:
            raise ValueError(f"SolverCoupledADMM.Config: iterations must be an integer >= 1, got {it!r}")
        _finite(c.rho, "rho", lower=0.0, lower_inclusive=False)
        _finite(c.gamma, "gamma", lower=0.0)
        _finite(c.baumgarte, "baumgarte", lower=0.0, upper=1.0)
        for name in ("joint_stiffness", "joint_damping", "joint_angular_stiffness", "joint_angular_damping"):
            _finite(getattr(c, name), name, lower=0.0)
        _finite(c.joint_proximal_mass_scale, "joint_proximal_mass_scale", lower=0.0, lower_inclusive=False)
        if c.rigid_contact_matching not in ("disabled", "latest", "sticky"):
            raise ValueError("SolverCoupledADMM.Config: rigid_contact_matching must be 'disabled', 'latest' or "
                             f"'sticky', got {c.rigid_contact_matching!r}")  # fmt: skip
        _finite(c.contact_matching_force_scale, "contact_matching_force_scale", lower=0.0)
        for p in c.contact_pairs:
            if not isinstance(p, SolverCoupledADMM.ContactPair):
                raise TypeError(f"SolverCoupledADMM.Config: contact_pairs must hold ContactPair values, got {p!r}")
        if c.contact_matching_pos_threshold is not None:
            _finite(c.contact_matching_pos_threshold, "contact_matching_pos_threshold", lower=0.0)
        if c.contact_matching_normal_dot_threshold is not None:
            _finite(c.contact_matching_normal_dot_threshold, "contact_matching_normal_dot_threshold", lower=-1.0,
                    upper=1.0)  # fmt: skip
        mtp = c.contact_max_triangle_pairs
        if mtp is not None and (isinstance(mtp, bool) or not isinstance(mtp, (int, np.integer)) or int(mtp) < 0):
            raise ValueError(f"SolverCoupledADMM.Config: contact_max_triangle_pairs must be None or an integer >= 0, "
                             f"got {mtp!r}")  # fmt: skip
        if c.contact_reduction_hashtable_size_factor is not None:
            _finite(c.contact_reduction_hashtable_size_factor, "contact_reduction_hashtable_size_factor", lower=0.0,
                    lower_inclusive=False)  # fmt: skip

    def _iteration_restarts_possible(self) -> bool:
        return True

    def _customize_view(self, entry) -> None:
        """Bodies an entry does not own carry no forward mass in its view: reduced-coordinate
        solvers keep a cross-solver joint's child (kinematic, joint disabled) in their tree, and
        its inertia would otherwise load the entry's own bodies a second time (the coupling rows
        already transmit the other entry's loads)."""
        nb = int(self.model.body_count or 0)
        if nb:
            other = np.nonzero(self.body_owner != entry.index)[0]
            if len(other):
                entry.view.set_body_mass(other, 0.0)

    def _after_entries_constructed(self) -> None:
        names = set(self._by_name)
        for p in self.coupling.contact_pairs:
            for n in (p.source, p.destination):
                if n not in names:
                    raise ValueError(f"SolverCoupledADMM: contact pair names unknown entry {n!r}")
        dest = self.coupling.joint_proximal_destination_entries
        if dest is not None:
            for n in dest:
                if n not in names:
                    raise ValueError(f"SolverCoupledADMM.Config: joint_proximal_destination_entries names unknown "
                                     f"entry {n!r}")  # fmt: skip
        ne = len(self._entries)
        self._contact_pair_mask = np.zeros((ne, ne), np.int32)
        for p in self.coupling.contact_pairs:
            a, b = self._by_name[p.source].index, self._by_name[p.destination].index
            self._contact_pair_mask[a, b] = self._contact_pair_mask[b, a] = 1
        self._build_joint_rows()
        c = self.coupling
        if self._nj and (c.joint_proximal_destination_entries is not None or float(c.joint_proximal_mass_scale) != 1.0):
            import warnings

            warnings.warn("SolverCoupledADMM: joint proximal proxy bodies are not implemented; "
                          "joint_proximal_destination_entries / joint_proximal_mass_scale have no effect (the "
                          f"{self._nj} cross-solver joint(s) are coupled by their ADMM rows)", UserWarning,
                          stacklevel=3)  # fmt: skip
        self._build_attachment_rows()
        if float(self.coupling.gamma) > 0.0:
            self._install_proximal_masses()

    def _build_joint_rows(self) -> None:
        m, dev = self.model, self.model.device
        nj = int(m.joint_count or 0)
        rows = []
        if nj:
            jtype, jp, jc = _np(m.joint_type), _np(m.joint_parent), _np(m.joint_child)
            je = getattr(m, "joint_enabled", None)
            enabled = _np(je, np.int64) if je is not None else np.ones(nj, np.int64)
            qd_start = _np(m.joint_qd_start)
            axis = m.joint_axis.numpy() if int(m.joint_dof_count or 0) else np.zeros((0, 3))
            fric_arr = getattr(m, "joint_friction", None)
            fric = fric_arr.numpy() if fric_arr is not None and int(m.joint_dof_count or 0) else np.zeros(len(axis))
            kinds = {int(JointType.BALL): 0, int(JointType.FIXED): 1, int(JointType.REVOLUTE): 2}
            for j in range(nj):
                if self.joint_owner[j] >= 0 or not enabled[j]:
                    continue
                p, c = int(jp[j]), int(jc[j])
                if p < 0 or c < 0:
                    continue
                op, oc = self.body_owner[p], self.body_owner[c]
                if op < 0 or oc < 0 or op == oc:
                    continue
                t = int(jtype[j])
                if t not in kinds:
                    raise NotImplementedError(
                        f"SolverCoupledADMM: joint {j} ({JointType(t).name}) connects bodies of entries "
                        f"{self._configs[op].name!r} and {self._configs[oc].name!r}; cross-solver ADMM rows support "
                        "BALL, FIXED and REVOLUTE joints only")
                ax, fr = np.zeros(3), 0.0
                if t == int(JointType.REVOLUTE):
                    ax = np.asarray(axis[int(qd_start[j])], np.float64)
                    fr = max(float(fric[int(qd_start[j])]), 0.0)
                rows.append((j, kinds[t], p, c, ax, fr))
        self.coupled_joints = np.asarray([r[0] for r in rows], np.int64)
        n = len(rows)
        self._nj = n
        xp = m.joint_X_p.numpy() if nj else np.zeros((0, 7))
        xc = m.joint_X_c.numpy() if nj else np.zeros((0, 7))
        idx = self.coupled_joints
        self._j_type = wp.array(np.asarray([r[1] for r in rows], np.int32), dtype=wp.int32, device=dev)
        self._j_parent = wp.array(np.asarray([r[2] for r in rows], np.int32), dtype=wp.int32, device=dev)
        self._j_child = wp.array(np.asarray([r[3] for r in rows], np.int32), dtype=wp.int32, device=dev)
        rows_p = np.asarray(xp[idx] if n else np.zeros((0, 7)), np.float32)
        rows_c = np.asarray(xc[idx] if n else np.zeros((0, 7)), np.float32)
        self._j_Xp = wp.array(rows_p, dtype=wp.transform, device=dev)
        self._j_Xc = wp.array(rows_c, dtype=wp.transform, device=dev)
        self._j_axis = wp.array(np.asarray([r[4] for r in rows], np.float32).reshape(n, 3), dtype=wp.vec3, device=dev)
        self._j_friction = wp.array(np.asarray([r[5] for r in rows], np.float32), dtype=float, device=dev)
        self._j_f = wp.zeros(n, dtype=wp.spatial_vector, device=dev)  # dual: the coupling wrench
        self._j_pred = wp.zeros(n, dtype=wp.spatial_vector, device=dev)
        self._j_acc = wp.zeros(n, dtype=wp.spatial_vector, device=dev)

    def _build_attachment_rows(self) -> None:
        m, dev = self.model, self.model.device
        ns = getattr(m, _ATTACH_NS, None)
        rows = []
        if ns is not None and getattr(ns, f"{_ATTACH_FREQ}_body", None) is not None:
            body = _np(getattr(ns, f"{_ATTACH_FREQ}_body"))
            part = _np(getattr(ns, f"{_ATTACH_FREQ}_particle"))
            pt = getattr(ns, f"{_ATTACH_FREQ}_body_point").numpy()
            ke = getattr(ns, f"{_ATTACH_FREQ}_stiffness").numpy()
            kd = getattr(ns, f"{_ATTACH_FREQ}_damping").numpy()
            en = getattr(ns, f"{_ATTACH_FREQ}_enabled").numpy()
            nb, npart = int(m.body_count or 0), int(getattr(m, "particle_count", 0) or 0)
            for i in range(len(body)):
                b, p = int(body[i]), int(part[i])
                if not en[i] or not (0 <= b < nb) or not (0 <= p < npart):
                    continue
                ob, op = self.body_owner[b], self.particle_owner[p]
                if ob < 0 or op < 0 or ob == op:
                    continue
                if not (np.isfinite(ke[i]) and ke[i] >= 0 and np.isfinite(kd[i]) and kd[i] >= 0):
                    raise ValueError(f"SolverCoupledADMM: body-particle attachment {i} has invalid stiffness/damping "
                                     f"({ke[i]}, {kd[i]}); both must be finite and >= 0")  # fmt: skip
                rows.append((i, b, p, pt[i], float(ke[i]), float(kd[i])))
        n = len(rows)
        self._na = n
        self.coupled_attachments = np.asarray([r[0] for r in rows], np.int64)
        self._a_body = wp.array(np.asarray([r[1] for r in rows], np.int32), dtype=wp.int32, device=dev)
        self._a_particle = wp.array(np.asarray([r[2] for r in rows], np.int32), dtype=wp.int32, device=dev)
        self._a_point = wp.array(np.asarray([r[3] for r in rows], np.float32).reshape(n, 3), dtype=wp.vec3, device=dev)
        self._a_ke = wp.array(np.asarray([r[4] for r in rows], np.float32), dtype=float, device=dev)
        self._a_kd = wp.array(np.asarray([r[5] for r in rows], np.float32), dtype=float, device=dev)
        self._a_f = wp.zeros(n, dtype=wp.vec3, device=dev)  # dual: the coupling force
        self._a_pred = wp.zeros(n, dtype=wp.vec3, device=dev)
        self._a_acc = wp.zeros(n, dtype=wp.vec3, device=dev)

    def _endpoint_sets(self):
        """Global endpoint body and particle ids per owning entry."""
        bodies: dict[int, set[int]] = {}
        parts: dict[int, set[int]] = {}
        for arr in (self._j_parent, self._j_child, self._a_body):
            for b in arr.numpy().tolist():
                bodies.setdefault(int(self.body_owner[b]), set()).add(int(b))
        for p in self._a_particle.numpy().tolist():
            parts.setdefault(int(self.particle_owner[p]), set()).add(int(p))
        return bodies, parts

    def _proximal_sets(self):
        """Endpoints that take the proximal (gamma) terms: particles, and bodies of entries whose
        solver integrates maximal coordinates (a reduced-coordinate solver integrates ``joint_qd``,
        which the body-velocity shift cannot reach; its bodies keep their masses)."""
        bodies, parts = self._endpoint_sets()
        for e in self._entries:
            coords = getattr(getattr(e.solver, "capabilities", None), "coordinates", None)
            if getattr(coords, "value", coords) != "maximal":
                bodies.pop(e.index, None)
        return bodies, parts

    def _install_proximal_masses(self) -> None:
        """gamma > 0: scale endpoint masses by ``1 + gamma`` in their owners' views."""
        f = 1.0 + float(self.coupling.gamma)
        bodies, parts = self._proximal_sets()
        for e in self._entries:
            b = sorted(bodies.get(e.index, ()))
            p = sorted(parts.get(e.index, ()))
            if not b and not p:
                continue
            if b:
                e.view.scale_body_mass(b, f)
            if p:
                e.view.scale_particle_mass(p, f)
            e.solver.notify_model_changed(ModelFlags.BODY_INERTIAL_PROPERTIES)
            e.gravity_body = e.gravity_particle = None

    def _after_entry_states_created(self) -> None:
        m, dev = self.model, self.model.device
        n_it = int(self.coupling.iterations)
        self._iterate = m.state()
        self._launches = LaunchCache(max_entries=64 + 16 * n_it)
        nb, npart = int(m.body_count or 0), int(getattr(m, "particle_count", 0) or 0)
        self._coupling_body_f = wp.zeros(nb, dtype=wp.spatial_vector, device=dev)
        self._coupling_particle_f = wp.zeros(npart, dtype=wp.vec3, device=dev)
        self._coupling_zero_body_f = wp.zeros(nb, dtype=wp.spatial_vector, device=dev)
        self._coupling_zero_particle_f = wp.zeros(npart, dtype=wp.vec3, device=dev)
        self.diagnostics = types.SimpleNamespace(
            primal_residual=wp.zeros(n_it, dtype=float, device=dev),
            dual_residual=wp.zeros(n_it, dtype=float, device=dev),
            joint_gap=wp.zeros(n_it, dtype=float, device=dev),
            attachment_gap=wp.zeros(n_it, dtype=float, device=dev),
            contact_gap=wp.zeros(n_it, dtype=float, device=dev),
            contact_count=wp.zeros(3, dtype=wp.int32, device=dev),
        )
        self._contact_rows = None
        if self._contact_pair_mask.any():
            c = self.coupling
            self._contact_rows = ContactRowManager(
                m, self._contact_pair_mask, self.body_owner, self.particle_owner, self.shape_owner,
                matching=c.rigid_contact_matching, pos_threshold=c.contact_matching_pos_threshold,
                normal_dot_threshold=c.contact_matching_normal_dot_threshold,
                force_scale=float(c.contact_matching_force_scale), max_triangle_pairs=c.contact_max_triangle_pairs,
                hashtable_size_factor=c.contact_reduction_hashtable_size_factor, launch=self._launch)  # fmt: skip
            self.diagnostics.contact_count = self._contact_rows.contact_count
        self._eval_effective_masses()
        # proximal (gamma) bookkeeping: endpoint rows per entry
        self._prox = []
        if float(self.coupling.gamma) > 0.0:
            bodies, parts = self._proximal_sets()
            for e in self._entries:
                b = np.asarray(sorted(bodies.get(e.index, ())), np.int32)
                p = np.asarray(sorted(parts.get(e.index, ())), np.int32)
                self._prox.append((wp.array(b, dtype=wp.int32, device=dev), wp.array(p, dtype=wp.int32, device=dev)))
            self._prev_body_qd = wp.zeros(nb, dtype=wp.spatial_vector, device=dev)
            self._prev_particle_qd = wp.zeros(npart, dtype=wp.vec3, device=dev)

    def _eval_effective_masses(self) -> None:
        """Endpoint mobilities: per-body inverse mass / inverse inertia (body frame) and
        per-particle inverse mass, divided by ``1 + gamma`` (the proximal scaling is in the views).

        Bodies use their free-body (model) mobility: joints and contacts inside an entry only
        lower a body's mobility, so the Newton steps built on it never overshoot (a solver's
        articulated effective mass, e.g. MuJoCo's, mixes directions into one scalar and can
        under-estimate the mobility along the interface rows, which makes few-iteration coupling
        unstable). Particles use the owner's ``coupling_eval_effective_mass`` hook (model mass by
        default)."""
        m, dev = self.model, self.model.device
        nb, npart = int(m.body_count or 0), int(getattr(m, "particle_count", 0) or 0)
        inv_m = _np(m.body_inv_mass, np.float64).copy() if nb else np.zeros(0)
        inv_I = m.body_inv_inertia.numpy().astype(np.float64) if nb else np.zeros((0, 3, 3))
        pinv = _np(m.particle_inv_mass, np.float64).copy() if npart else np.zeros(0)
        bodies, parts = self._endpoint_sets()
        for e in self._entries:
            p = sorted(parts.get(e.index, ()))
            if p:
                try:
                    out = wp.zeros(len(p), dtype=wp.float32, device=dev)
                    kinds, idx, pos = self._endpoint_arrays(ENDPOINT_PARTICLE, p, None)
                    coupling_hook(e.solver, "coupling_eval_effective_mass")(kinds, idx, pos, out)
                    mm = out.numpy().astype(np.float64)
                    for k, pp in enumerate(p):
                        if mm[k] > 0 and np.isfinite(mm[k]):
                            pinv[pp] = 1.0 / mm[k]
                except NotImplementedError:
                    pass
        # the particle hooks see the (gamma-scaled) view masses; the model values do not
        f = 1.0 + float(self.coupling.gamma)
        if f != 1.0:
            prox_bodies, _ = self._proximal_sets()
            for e in self._entries:
                for bb in prox_bodies.get(e.index, ()):
                    inv_m[bb] /= f
                    inv_I[bb] /= f
                for pp in parts.get(e.index, ()):
                    base = float(_np(m.particle_inv_mass, np.float64)[pp])
                    if abs(pinv[pp] - base) < 1e-12 * max(base, 1.0):
                        pinv[pp] /= f
        self._eff_inv_mass = wp.array(inv_m.astype(np.float32), dtype=float, device=dev)
        self._eff_inv_inertia = wp.array(inv_I.astype(np.float32).reshape(-1, 3, 3), dtype=wp.mat33, device=dev)
        self._eff_particle_inv_mass = wp.array(pinv.astype(np.float32), dtype=float, device=dev)

    # ------------------------------------------------------------------ stepping
    def _launch(self, kernel, dim, inputs, outputs=()) -> None:
        """A launch replayed from the cache (host argument packing once per argument set)."""
        self._launches.launch(kernel, dim, inputs, outputs, device=self.model.device)

    def _restart_entry(self, entry, state_in, k: int, dt: float) -> None:
        """Restart ``entry`` from ``state_in`` for iteration ``k``: kinematic arrays copied, force
        inputs = caller's + coupling forces on owned rows (zero elsewhere), proximal terms."""
        flags = self._copy_arrays(state_in, entry.state_0, _KINEMATIC)
        s0 = entry.state_0
        gamma = float(self.coupling.gamma)
        bf = getattr(s0, "body_f", None)
        if bf is not None and bf.shape[0] and bf.shape == self._coupling_body_f.shape:
            src = state_in.body_f if getattr(state_in, "body_f", None) is not None else self._coupling_zero_body_f
            self._launch(K.add_forces_body_kernel, bf.shape[0], [entry.body_active, src, self._coupling_body_f], [bf])
            flags |= int(StateFlags.BODY_F)
        pf = getattr(s0, "particle_f", None)
        if (pf is not None and pf.shape[0] and pf.shape == self._coupling_particle_f.shape
                and entry.particle_active.shape == pf.shape):  # fmt: skip
            src = state_in.particle_f if getattr(state_in, "particle_f", None) is not None else \
                self._coupling_zero_particle_f  # fmt: skip
            self._launch(K.add_forces_particle_kernel, pf.shape[0],
                         [entry.particle_active, src, self._coupling_particle_f], [pf])  # fmt: skip
            flags |= int(StateFlags.PARTICLE_F)
        if gamma > 0.0 and self._prox:
            brows, prows = self._prox[entry.index]
            gb, gp = self.entry_gravity_acceleration(entry.name)
            if brows.shape[0] and bf is not None:
                self._launch(K.scale_rows_body_kernel, brows.shape[0], [brows, gb, self.model.body_mass, gamma, bf])
                if k > 0:
                    self._launch(K.proximal_shift_body_kernel, brows.shape[0],
                                 [brows, self._prev_body_qd, gamma, s0.body_qd])  # fmt: skip
            if prows.shape[0] and pf is not None:
                self._launch(K.scale_rows_particle_kernel, prows.shape[0],
                             [prows, gp, self.model.particle_mass, gamma, pf])  # fmt: skip
                if k > 0:
                    self._launch(K.proximal_shift_particle_kernel, prows.shape[0],
                                 [prows, self._prev_particle_qd, gamma, s0.particle_qd])  # fmt: skip
        if entry.state_1 is not entry.state_0:
            if k == 0:
                # the output buffer starts from the step's input once; owned rows are overwritten
                # by every step and only owned rows are gathered
                self._copy_arrays(entry.state_0, entry.state_1, _KINEMATIC + ("body_f", "particle_f"))
            elif entry.substeps > 1:  # later substeps read their force input from state_1
                self._copy_arrays(entry.state_0, entry.state_1, ("body_f", "particle_f"))
        self._notify_input_state_update(entry, flags, dt=dt, iteration_restart=k > 0)

    def _gather(self, state_in, k: int) -> None:
        """The current iterate: unowned rows from ``state_in`` (once per step), owned rows from
        each entry's output."""
        it = self._iterate
        if k == 0:
            for name in _RECONCILED:
                a, b = getattr(state_in, name, None), getattr(it, name, None)
                if a is not None and b is not None and a.shape == b.shape and a.shape[0]:
                    wp.copy(b, a)
        for entry in self._entries:
            src = entry.state_out
            for rows, names in ((entry.body_rows, ("body_q", "body_qd")),
                                (entry.particle_rows, ("particle_q", "particle_qd"))):  # fmt: skip
                n = int(rows.shape[0])
                if n == 0:
                    continue
                for name in names:
                    a, b = getattr(src, name, None), getattr(it, name, None)
                    if a is not None and b is not None:
                        self._launch(base_kernels.scatter_rows_kernel, n, [rows, a, b])

    def _splat(self, state_in) -> None:
        self._coupling_body_f.zero_()
        self._coupling_particle_f.zero_()
        m = self.model
        if self._nj:
            self._launch(K.joint_splat_kernel, self._nj,
                         [self._j_parent, self._j_child, self._j_Xp, self._j_Xc, state_in.body_q, m.body_com,
                          self._j_f], [self._coupling_body_f])  # fmt: skip
        if self._na:
            self._launch(K.attachment_splat_kernel, self._na,
                         [self._a_body, self._a_particle, self._a_point, state_in.body_q, m.body_com, self._a_f],
                         [self._coupling_body_f, self._coupling_particle_f])  # fmt: skip
        if self._contact_rows is not None:
            self._contact_rows.splat(state_in, self._coupling_body_f, self._coupling_particle_f)

    def _dual_update(self, k: int, dt: float, state=None, apply: bool = True) -> None:
        """Dual and force update from the entries' outputs of iteration ``k`` (``state`` given:
        the predictor from the step's input state, before the first iteration)."""
        c, m = self.coupling, self.model
        src = self._iterate if state is None else state
        predict = 0 if state is None else 1
        d = self.diagnostics
        rho = float(c.rho)
        if self._nj:
            self._launch(K.joint_update_kernel, self._nj,
                      [self._j_type, self._j_parent, self._j_child, self._j_Xp, self._j_Xc, self._j_axis,
                              self._j_friction, src.body_q, src.body_qd, m.body_com, self._eff_inv_mass,
                              self._eff_inv_inertia, rho, float(c.joint_stiffness), float(c.joint_damping),
                              float(c.joint_angular_stiffness), float(c.joint_angular_damping),
                              float(c.baumgarte), float(dt), predict, int(k), int(apply)],
                      [self._j_f, self._j_pred, self._j_acc, d.primal_residual, d.dual_residual,
                       d.joint_gap])  # fmt: skip
        if self._na:
            self._launch(K.attachment_update_kernel, self._na,
                      [self._a_body, self._a_particle, self._a_point, self._a_ke, self._a_kd, src.body_q,
                              src.body_qd, m.body_com, src.particle_q, src.particle_qd, self._eff_inv_mass,
                              self._eff_inv_inertia, self._eff_particle_inv_mass, rho, float(c.baumgarte),
                              float(dt), predict, int(k), int(apply)],
                      [self._a_f, self._a_pred, self._a_acc, d.primal_residual, d.dual_residual,
                       d.attachment_gap])  # fmt: skip
        if self._contact_rows is not None:
            self._contact_rows.update(src, self._eff_inv_mass, self._eff_inv_inertia, self._eff_particle_inv_mass,
                                      rho, float(c.baumgarte), float(dt), predict, int(k), int(apply), d)  # fmt: skip

    def _step_coupled(self, state_in, state_out, control, contacts, dt: float) -> None:
        d = self.diagnostics
        for arr in (d.primal_residual, d.dual_residual, d.joint_gap, d.attachment_gap, d.contact_gap):
            arr.zero_()
        if self._contact_rows is not None:
            self._contact_rows.detect(state_in, dt)
        gamma = float(self.coupling.gamma)
        if gamma > 0.0:
            if getattr(state_in, "body_qd", None) is not None and self._prev_body_qd.shape[0]:
                wp.copy(self._prev_body_qd, state_in.body_qd)
            if getattr(state_in, "particle_qd", None) is not None and self._prev_particle_qd.shape[0]:
                wp.copy(self._prev_particle_qd, state_in.particle_qd)
        self._dual_update(0, dt, state=state_in)
        self._splat(state_in)
        n_it = int(self.coupling.iterations)
        for k in range(n_it):
            self._step_phase = f"ADMM iteration {k + 1} of {n_it}"
            for entry in self._entries:
                self._restart_entry(entry, state_in, k, dt)
            for entry in self._entries:
                self._step_entry(entry, control, contacts, dt)
            self._outputs_valid = True
            self._gather(state_in, k)
            self._dual_update(k, dt, apply=k < n_it - 1)
            self._splat(state_in)
            if gamma > 0.0:
                if self._prev_body_qd.shape[0]:
                    wp.copy(self._prev_body_qd, self._iterate.body_qd)
                if self._prev_particle_qd.shape[0]:
                    wp.copy(self._prev_particle_qd, self._iterate.particle_qd)
        self._reconcile_state(state_in, state_out)

    # ------------------------------------------------------------------ model changes and reset
    def notify_model_changed(self, flags) -> None:
        """Forward to the base (views, entry solvers) and re-evaluate the endpoint mobilities when
        an entry's effective-mass refresh flags are notified."""
        super().notify_model_changed(flags)  # view refresh replays the recorded mass edits (gamma too)
        value = int(flags)
        refresh = 0
        for e in self._entries:
            refresh |= int(coupling_hook(e.solver, "coupling_effective_mass_refresh_flags")())
        if value & refresh:
            self._eval_effective_masses()

    def reset(self, state, world_mask=None, flags=None) -> None:
        """Reset like :meth:`SolverCoupled.reset` and clear the ADMM dual variables (warm start)."""
        super().reset(state, world_mask=world_mask, flags=flags)
        for arr in (self._j_f, self._j_pred, self._j_acc, self._a_f, self._a_pred, self._a_acc):
            arr.zero_()
        self._coupling_body_f.zero_()
        self._coupling_particle_f.zero_()
        if self._contact_rows is not None:
            self._contact_rows.reset()


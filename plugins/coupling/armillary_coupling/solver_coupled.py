"""``SolverCoupled``: the shared base of the coupled solvers (ownership, views, entry states).

One shared :class:`~armillary.Model`; one :class:`SolverCoupled.Entry` per sub-solver. Each
entry gets a :class:`~armillary_coupling.model_view.ModelView` of the model in which the
entities it does not own are deactivated, its solver is built by ``entry.solver(view)``, and it
keeps its own input/output states. A step distributes the shared input state to every entry
(public state arrays and force inputs), steps each entry with its own substep count, and
reconciles only the rows each entry owns into the shared ``state_out``. With no coupling
algorithm (this base class) the entries do not interact: it is the foundation that
``SolverCoupledProxy`` and ``SolverCoupledADMM`` build on (they override :meth:`_step_coupled`
and the ``_entry_*_keep_indices`` / ``_customize_view`` hooks).
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Sequence

import numpy as np
import warp as wp

from armillary.flags import ModelFlags, StateFlags
from armillary.launch import LaunchCache, replayer
from armillary.sim.enums import BodyFlags, JointType
from armillary.solvers import Coordinates, SolverBase, SolverCapabilities
from armillary.solvers.coupling import ENDPOINT_BODY, ENDPOINT_PARTICLE, coupling_hook
from armillary.solvers.observables import begin_step
from armillary.solvers.step_guard import NonFiniteStateError

from . import kernels
from .model_view import ModelView

__all__ = ["SolverCoupled", "SolverEntry"]

_STATE_ARRAYS = (
    ("body_q", StateFlags.BODY_Q),
    ("body_qd", StateFlags.BODY_QD),
    ("body_f", StateFlags.BODY_F),
    ("joint_q", StateFlags.JOINT_Q),
    ("joint_qd", StateFlags.JOINT_QD),
    ("particle_q", StateFlags.PARTICLE_Q),
    ("particle_qd", StateFlags.PARTICLE_QD),
    ("particle_f", StateFlags.PARTICLE_F),
)
_RECONCILED = ("body_q", "body_qd", "joint_q", "joint_qd", "particle_q", "particle_qd")
# dtypes of the fused copy / scatter kernels' arguments (kernels.copy_state_kernel)
_ALL_NAMES = frozenset(n for n, _ in _STATE_ARRAYS)
_STATE_DTYPES = {"body_q": wp.transform, "body_qd": wp.spatial_vector, "body_f": wp.spatial_vector,
                 "joint_q": wp.float32, "joint_qd": wp.float32, "particle_q": wp.vec3, "particle_qd": wp.vec3,
                 "particle_f": wp.vec3}  # fmt: skip
_GRAVITY_FLAGS = int(ModelFlags.MODEL_PROPERTIES | ModelFlags.BODY_PROPERTIES | ModelFlags.BODY_INERTIAL_PROPERTIES)


def _np(arr, dtype=np.int64):
    return np.zeros(0, dtype=dtype) if arr is None else np.asarray(arr.numpy(), dtype=dtype)


@dataclasses.dataclass
class SolverEntry:
    """Run-time record of one entry (built by :class:`SolverCoupled`; read-only for users)."""

    index: int
    name: str
    config: object
    view: ModelView
    solver: SolverBase | None = None
    bodies: np.ndarray = None  # owned global ids (sorted)
    particles: np.ndarray = None
    joints: np.ndarray = None
    shapes: np.ndarray = None
    visible_shapes: np.ndarray = None
    substeps: int = 1
    in_place: bool = False
    state_0: object = None
    state_1: object = None
    state_out: object = None  # output of the last step (state_0 or state_1)
    control: object = None
    # device index arrays (rows reconciled into the shared state)
    body_rows: wp.array = None
    particle_rows: wp.array = None
    joint_q_rows: wp.array = None
    joint_qd_rows: wp.array = None
    # device masks (int32) for contact filtering
    shape_visible: wp.array = None
    body_active: wp.array = None
    particle_active: wp.array = None
    contact_compactor: object = None
    gravity_body: wp.array = None
    gravity_particle: wp.array = None


class SolverCoupled(SolverBase):
    """Couple several solvers through explicit ownership (base class; entries do not interact).

    ``SolverCoupled`` owns the generic mechanics derivable from the model, the views and the
    states: one :class:`~armillary_coupling.model_view.ModelView` per entry, ownership, state
    distribution and reconciliation, per-entry substeps, entry-local collision visibility,
    input-state notifications and the dispatch of the :class:`~armillary.solvers.CouplingInterface`
    hooks (the mixin's model-based defaults serve solvers that do not implement them, so any
    :class:`~armillary.solvers.SolverBase` can be an entry).

    Ownership: every body, particle, joint and shape belongs to at most one entry (a second
    owner, an unknown id or label is a ``ValueError``). Joints an entry does not list default to
    the entry owning their child body when their parent is the world or a body of the same entry
    (joints between bodies of different entries stay unowned: they are the coupling algorithm's
    business). Shapes default to the owner of their body; static shapes (body -1) that no entry
    lists are visible to every entry.

    Each entry's view: bodies it does not own are kinematic with zero inverse mass
    (``make_bodies_kinematic`` + ``disable_body_dynamics``); particles it does not own are
    inactive with zero mass, or all particles are hidden (``hide_particles``) when it owns none;
    joints it does not own are disabled (FREE joints excepted: they constrain nothing), or all
    are hidden (``hide_joints``) when it owns none; shapes it cannot see lose their collision
    flags. ``Entry.configure_view`` runs last, then the solver factory. Solvers exposing
    ``body_mask`` / ``particle_mask`` ownership masks (``SolverXPBD``) get the entry's masks.

    A step copies ``state_in`` (``body_q/qd/f``, ``joint_q/qd``, ``particle_q/qd/f``) into each
    entry's states and the caller's ``Control`` arrays into each entry's control, calls
    ``coupling_notify_input_state_update``, steps every entry ``substeps`` times with
    ``dt / substeps`` (contacts filtered to what the entry sees: both shapes visible and at least
    one on a body it simulates; particle contacts of its own particles), then writes
    ``state_out``: rows no entry owns keep their ``state_in`` values, owned body, particle,
    joint-coordinate and joint-DOF rows come from their owner's output. Maximal-coordinate
    solvers do not update ``joint_q``: rows of their joints keep the input (call ``eval_ik``).

    Step checks (:mod:`armillary.solvers.step_guard`): the coupled step checks ``dt`` and the
    caller's arrays against the shared model before anything runs, and its one non-finite guard
    launch covers the reconciled ``state_out`` (and the force inputs); the entry solvers' own
    per-step guard launches are switched off (``finite_guard = False``: they would check the same
    rows again, once per substep and iteration). :meth:`check_finite` names the coupled step, the
    first offending body / particle / joint coordinate / DOF and the entry that owns it (and reads
    the flags that entry solvers with ``fuses_finite_guard`` write in their own kernels).
    ``debug = True`` first checks the step's inputs (NaN or infinity in ``state_in`` or a force
    input raises before any entry runs, naming the row's owner), and is passed on to every entry
    solver with its guard switched back on, so the first substep that produces NaN or infinity
    raises. An error an entry solver raises inside a coupled step is re-raised naming the entry
    (index, name, solver), the coupled step, the ADMM iteration or proxy pass and the substep.
    A coupled solver's :class:`~armillary.solvers.step_guard.NonFiniteStateError` carries
    ``entry_index``, ``entry_name`` and ``entry_solver``: the entry whose substep raised, else
    the owner of the offending row (``None`` for rows no entry owns).

    Args:
        model: the shared model.
        entries: the :class:`SolverCoupled.Entry` list (stepping order; unique names).
        coupling: algorithm configuration reserved for derived couplers; the base accepts
            ``None`` only.

    The capabilities declare nothing: what a coupled solver supports is what its entries do
    (each entry's solver checks its own view at construction).
    """

    capabilities = SolverCapabilities(coordinates=Coordinates.MAXIMAL, collision_pipeline=True)
    SUPPORTED_OBSERVABLES = frozenset({"body_qdd"})
    """``body_qdd`` of the reconciled state (``(body_qd_out - body_qd_in) / dt``)."""

    @dataclasses.dataclass
    class Entry:
        """Public configuration of one sub-solver.

        Args:
            name: unique entry name (used by coupling configurations).
            solver: factory called as ``solver(view)`` with this entry's
                :class:`~armillary_coupling.model_view.ModelView`; it must build the solver on
                that view and return a :class:`~armillary.solvers.SolverBase`. Bind extra
                constructor arguments in it (``lambda v: SolverXPBD(v, iterations=10)``).
            bodies: body ids (or labels) owned by this entry.
            particles: particle ids owned by this entry.
            joints: joint ids (or labels) owned by this entry (defaults: see :class:`SolverCoupled`).
            shapes: shape ids (or labels) owned by this entry; ids stay in the parent model's
                numbering, so every entry consumes the shared contact buffers.
            configure_view: optional callback ``configure_view(view)`` for entry-local view
                overrides, run after the ownership overrides and before the factory.
            substeps: substeps per coupled step (integer >= 1).
            in_place: step the sub-solver in place (``state_in is state_out``), only for solvers
                documented to support it.
        """

        name: str
        solver: Callable[[ModelView], SolverBase]
        bodies: Sequence[int] = ()
        particles: Sequence[int] = ()
        joints: Sequence[int] = ()
        shapes: Sequence[int] = ()
        configure_view: Callable[[ModelView], None] | None = None
        substeps: int = 1
        in_place: bool = False

    # ------------------------------------------------------------------ construction
    def __init__(self, model, entries: Sequence[SolverCoupled.Entry], coupling: object | None = None) -> None:
        super().__init__(model)
        self.coupling = coupling
        self._validate_coupling(coupling)
        entries = list(entries) if entries is not None else []
        if not entries:
            raise ValueError(f"{type(self).__name__}: at least one entry is required")
        for i, cfg in enumerate(entries):
            if not isinstance(cfg, SolverCoupled.Entry):
                raise TypeError(f"{type(self).__name__}: entries[{i}] must be a SolverCoupled.Entry, got "
                                f"{type(cfg).__name__}")  # fmt: skip
            if not callable(cfg.solver):
                raise TypeError(f"{type(self).__name__}: entry {cfg.name!r}: solver must be a factory "
                                f"callable(view) -> SolverBase, got {cfg.solver!r}")  # fmt: skip
        self._configs = entries
        self._validate_entry_names()
        self._entries: list[SolverEntry] = []
        self._by_name: dict[str, SolverEntry] = {}
        self._outputs_valid = False
        self._build_ownership()
        self._build_entries()
        self._after_entries_constructed()
        restarts = self._iteration_restarts_possible()
        for entry in self._entries:
            coupling_hook(entry.solver, "coupling_notify_iteration_restarts")(restarts)
        self._create_entry_states()
        self._after_entry_states_created()

    @classmethod
    def check_model_supported(cls, model) -> None:
        """Nothing to check here: each entry's solver checks its own view at construction."""
        return None

    def _validate_coupling(self, coupling) -> None:
        """Derived couplers validate their configuration; the base takes none."""
        if coupling is not None and type(self) is SolverCoupled:
            raise ValueError("SolverCoupled: `coupling` is reserved for derived couplers (SolverCoupledProxy, "
                             "SolverCoupledADMM); the base class steps entries independently")  # fmt: skip

    def _validate_entry_names(self) -> None:
        seen = set()
        for cfg in self._configs:
            if not isinstance(cfg.name, str) or not cfg.name:
                raise ValueError(f"{type(self).__name__}: entry names must be non-empty strings, got {cfg.name!r}")
            if cfg.name in seen:
                raise ValueError(f"{type(self).__name__}: duplicate entry name {cfg.name!r}; entry names must be "
                                 "unique")
            seen.add(cfg.name)
            sub = cfg.substeps
            if isinstance(sub, bool) or not isinstance(sub, (int, np.integer)) or int(sub) < 1:
                raise ValueError(f"{type(self).__name__}: entry {cfg.name!r}: substeps must be an integer >= 1, "
                                 f"got {sub!r}")  # fmt: skip

    # ------------------------------------------------------------------ ownership
    def _resolve_ids(self, cfg, kind: str, ids, count: int, labels) -> list[int]:
        out = []
        if isinstance(ids, (str, bytes)) or not hasattr(ids, "__iter__"):
            ids = [ids]
        if hasattr(ids, "numpy"):
            ids = ids.numpy().tolist()
        for raw in ids:
            if isinstance(raw, str):
                try:
                    i = list(labels).index(raw)
                except ValueError:
                    raise ValueError(f"{type(self).__name__}: entry {cfg.name!r} lists {kind} {raw!r}, but no {kind} "
                                     "of the model has this label") from None  # fmt: skip
            else:
                if isinstance(raw, bool) or not isinstance(raw, (int, np.integer)):
                    raise ValueError(f"{type(self).__name__}: entry {cfg.name!r} lists {kind} {raw!r}: ids must be "
                                     "integers or labels")  # fmt: skip
                i = int(raw)
                if not 0 <= i < count:
                    raise ValueError(f"{type(self).__name__}: entry {cfg.name!r} lists {kind} {i}, but the model has "
                                     f"{count} {kind}(s) (valid ids 0..{count - 1})")  # fmt: skip
            if i not in out:
                out.append(i)
        return out

    def _build_owner_map(self, kind: str, count: int, owned_by_entry: Sequence[Sequence[int]], labels) -> np.ndarray:
        owner = np.full(count, -1, dtype=np.int64)
        for e, ids in enumerate(owned_by_entry):
            for i in ids:
                if owner[i] >= 0:
                    label = f" ({labels[i]!r})" if i < len(labels) else ""
                    raise ValueError(f"{type(self).__name__}: {kind} {i}{label} is owned by entry "
                                     f"{self._configs[owner[i]].name!r} and by entry {self._configs[e].name!r}; "
                                     f"each {kind} belongs to one entry at most")  # fmt: skip
                owner[i] = e
        return owner

    def _build_ownership(self) -> None:
        m = self.model
        nb, npart = int(m.body_count or 0), int(getattr(m, "particle_count", 0) or 0)
        nj, ns = int(m.joint_count or 0), int(m.shape_count or 0)
        body_labels = list(getattr(m, "body_label", []) or [])
        joint_labels = list(getattr(m, "joint_label", []) or [])
        shape_labels = list(getattr(m, "shape_label", []) or [])
        bodies = [self._resolve_ids(c, "body", c.bodies, nb, body_labels) for c in self._configs]
        particles = [self._resolve_ids(c, "particle", c.particles, npart, ()) for c in self._configs]
        joints = [self._resolve_ids(c, "joint", c.joints, nj, joint_labels) for c in self._configs]
        shapes = [self._resolve_ids(c, "shape", c.shapes, ns, shape_labels) for c in self._configs]
        self.body_owner = self._build_owner_map("body", nb, bodies, body_labels)
        self.particle_owner = self._build_owner_map("particle", npart, particles, ())
        joint_owner = self._build_owner_map("joint", nj, joints, joint_labels)
        shape_owner = self._build_owner_map("shape", ns, shapes, shape_labels)

        jparent, jchild = _np(getattr(m, "joint_parent", None)), _np(getattr(m, "joint_child", None))
        for j in range(nj):
            c, p = int(jchild[j]), int(jparent[j])
            child_owner = self.body_owner[c] if c >= 0 else -1
            if joint_owner[j] >= 0:
                if child_owner >= 0 and child_owner != joint_owner[j]:
                    raise ValueError(
                        f"{type(self).__name__}: joint {j} ({joint_labels[j] if j < len(joint_labels) else ''!r}) is "
                        f"owned by entry {self._configs[joint_owner[j]].name!r}, but its child body {c} is owned by "
                        f"entry {self._configs[child_owner].name!r}; a joint's owner must own its child body")
                continue
            if child_owner >= 0 and (p < 0 or self.body_owner[p] == child_owner):
                joint_owner[j] = child_owner
        self.joint_owner = joint_owner

        shape_body = _np(getattr(m, "shape_body", None))
        for s in range(ns):
            b = int(shape_body[s])
            b_owner = self.body_owner[b] if b >= 0 else -1
            if shape_owner[s] >= 0:
                if b_owner >= 0 and b_owner != shape_owner[s]:
                    raise ValueError(
                        f"{type(self).__name__}: shape {s} ({shape_labels[s] if s < len(shape_labels) else ''!r}) is "
                        f"owned by entry {self._configs[shape_owner[s]].name!r}, but its body {b} is owned by entry "
                        f"{self._configs[b_owner].name!r}")
            elif b_owner >= 0:
                shape_owner[s] = b_owner
        self.shape_owner = shape_owner

        # dynamic entities no entry owns keep their input state: say so once
        if nb:
            flags = _np(m.body_flags)
            inv_mass = _np(m.body_inv_mass, np.float64)
            loose = [b for b in range(nb) if self.body_owner[b] < 0 and inv_mass[b] > 0.0
                     and not (flags[b] & int(BodyFlags.KINEMATIC))]  # fmt: skip
            if loose:
                warnings.warn(f"{type(self).__name__}: {len(loose)} dynamic body(ies) belong to no entry and keep "
                              f"their input state: {loose[:10]}", UserWarning, stacklevel=3)  # fmt: skip
        if npart:
            loose = np.nonzero(self.particle_owner < 0)[0]
            if len(loose):
                warnings.warn(f"{type(self).__name__}: {len(loose)} particle(s) belong to no entry and keep their "
                              f"input state: {loose[:10].tolist()}", UserWarning, stacklevel=3)  # fmt: skip

    # ------------------------------------------------------------------ hooks for derived couplers
    def _entry_proxy_body_keep_indices(self, name: str) -> set[int]:
        """Non-owned bodies that stay dynamic (and visible) in entry ``name``'s view (proxies)."""
        return set()

    def _entry_proxy_particle_keep_indices(self, name: str) -> set[int]:
        """Non-owned particles that stay dynamic in entry ``name``'s view (proxies)."""
        return set()

    def _entry_proxy_joint_keep_indices(self, name: str) -> set[int]:
        """Non-owned joints that stay enabled in entry ``name``'s view (proxy joints)."""
        return set()

    def _customize_view(self, entry: SolverEntry) -> None:
        """Derived couplers' view edits (proxy marking, mass scaling), after the ownership overrides
        and before ``Entry.configure_view``."""

    def _after_entries_constructed(self) -> None:
        """Called once every entry solver exists, before states are allocated."""

    def _after_entry_states_created(self) -> None:
        """Called once entry states exist (allocate algorithm scratch here)."""

    def _iteration_restarts_possible(self) -> bool:
        """Whether :meth:`step` may solve an entry again within one step (ADMM-style restarts)."""
        return False

    # ------------------------------------------------------------------ views and solvers
    def _build_entries(self) -> None:
        m = self.model
        nb, npart = int(m.body_count or 0), int(getattr(m, "particle_count", 0) or 0)
        nj, ns = int(m.joint_count or 0), int(m.shape_count or 0)
        jtype = _np(getattr(m, "joint_type", None))
        shape_body = _np(getattr(m, "shape_body", None))
        dev = m.device
        for e, cfg in enumerate(self._configs):
            view = ModelView(m, cfg.name)
            entry = SolverEntry(index=e, name=cfg.name, config=cfg, view=view, substeps=int(cfg.substeps),
                                in_place=bool(cfg.in_place))  # fmt: skip
            entry.bodies = np.nonzero(self.body_owner == e)[0]
            entry.particles = np.nonzero(self.particle_owner == e)[0]
            entry.joints = np.nonzero(self.joint_owner == e)[0]
            entry.shapes = np.nonzero(self.shape_owner == e)[0]
            keep_b = {int(b) for b in self._entry_proxy_body_keep_indices(cfg.name)}
            keep_p = {int(p) for p in self._entry_proxy_particle_keep_indices(cfg.name)}
            keep_j = {int(j) for j in self._entry_proxy_joint_keep_indices(cfg.name)}

            body_active = np.zeros(nb, dtype=np.int32)
            body_active[entry.bodies] = 1
            body_active[list(keep_b)] = 1
            inactive = np.nonzero(body_active == 0)[0]
            if len(inactive):
                view.make_bodies_kinematic(inactive)
                view.disable_body_dynamics(inactive)

            particle_active = np.zeros(npart, dtype=np.int32)
            particle_active[entry.particles] = 1
            particle_active[list(keep_p)] = 1
            if npart and not particle_active.any():
                view.hide_particles()
                particle_active = np.zeros(0, dtype=np.int32)
            elif npart:
                off = np.nonzero(particle_active == 0)[0]
                if len(off):
                    view.disable_particles(off)
                    view.zero_particle_mass(off)

            if nj:
                joint_active = np.zeros(nj, dtype=bool)
                joint_active[entry.joints] = True
                joint_active[list(keep_j)] = True
                if not joint_active.any():
                    view.hide_joints()
                else:
                    off = np.nonzero(~joint_active & (jtype != int(JointType.FREE)))[0]
                    if len(off):
                        view.disable_joints(off)

            visible = np.zeros(ns, dtype=np.int32)
            for s in range(ns):
                b = int(shape_body[s])
                if self.shape_owner[s] == e or (self.shape_owner[s] < 0 and b < 0) or (b >= 0 and b in keep_b):
                    visible[s] = 1
            hidden = np.nonzero(visible == 0)[0]
            if len(hidden):
                view.disable_shape_collisions(hidden)
            entry.visible_shapes = np.nonzero(visible)[0]

            entry.shape_visible = wp.array(visible, dtype=wp.int32, device=dev)
            entry.body_active = wp.array(body_active, dtype=wp.int32, device=dev)
            entry.particle_active = wp.array(particle_active, dtype=wp.int32, device=dev)

            self._customize_view(entry)
            if cfg.configure_view is not None:
                cfg.configure_view(view)

            solver = cfg.solver(view)
            if not isinstance(solver, SolverBase):
                raise TypeError(f"{type(self).__name__}: entry {cfg.name!r}: the factory returned "
                                f"{type(solver).__name__}, not a SolverBase")  # fmt: skip
            if solver.model is not view:
                raise ValueError(f"{type(self).__name__}: entry {cfg.name!r}: the factory must build the solver on "
                                 "the ModelView it receives (solver(view)), not on another model")  # fmt: skip
            entry.solver = solver
            self._configure_entry_checks(entry)
            self._install_ownership_masks(entry, body_active, particle_active)
            self._build_rows(entry)
            self._entries.append(entry)
            self._by_name[cfg.name] = entry

    def _install_ownership_masks(self, entry: SolverEntry, body_active, particle_active) -> None:
        """Give solvers that expose ``body_mask`` / ``particle_mask`` (unset) the entry's masks."""
        dev = self.model.device
        s = entry.solver
        if getattr(s, "body_mask", 1) is None and entry.view.body_count:
            s.body_mask = wp.array(np.asarray(body_active, dtype=np.int32), dtype=wp.int32, device=dev)
        if getattr(s, "particle_mask", 1) is None and int(getattr(entry.view, "particle_count", 0) or 0):
            s.particle_mask = wp.array(np.asarray(particle_active, dtype=np.int32), dtype=wp.int32, device=dev)

    def _build_rows(self, entry: SolverEntry) -> None:
        m, view, dev = self.model, entry.view, self.model.device
        entry.body_rows = wp.array(entry.bodies.astype(np.int32), dtype=wp.int32, device=dev)
        parts = entry.particles if int(getattr(view, "particle_count", 0) or 0) else np.zeros(0, np.int64)
        entry.particle_rows = wp.array(parts.astype(np.int32), dtype=wp.int32, device=dev)
        q_rows, qd_rows = [], []
        if int(view.joint_count or 0) and len(entry.joints):
            q_start, qd_start = _np(m.joint_q_start), _np(m.joint_qd_start)
            for j in entry.joints:
                q_rows += range(int(q_start[j]), int(q_start[j + 1]))
                qd_rows += range(int(qd_start[j]), int(qd_start[j + 1]))
        entry.joint_q_rows = wp.array(np.asarray(q_rows, np.int32), dtype=wp.int32, device=dev)
        entry.joint_qd_rows = wp.array(np.asarray(qd_rows, np.int32), dtype=wp.int32, device=dev)

    def _create_entry_states(self) -> None:
        for entry in self._entries:
            entry.state_0 = entry.view.state()
            entry.state_1 = entry.state_0 if entry.in_place else entry.view.state()
            entry.state_out = entry.state_0
            entry.control = entry.view.control()

    # ------------------------------------------------------------------ accessors
    def solver(self, name: str) -> SolverBase:
        """The sub-solver of entry ``name``."""
        return self._entry(name).solver

    def view(self, name: str) -> ModelView:
        """The :class:`ModelView` of entry ``name``."""
        return self._entry(name).view

    def entry_names(self) -> tuple[str, ...]:
        """Entry names in stepping order."""
        return tuple(e.name for e in self._entries)

    def entry(self, name: str) -> SolverEntry:
        """The run-time record of entry ``name`` (ownership arrays, states, masks)."""
        return self._entry(name)

    def _entry(self, name: str) -> SolverEntry:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"{type(self).__name__}: no entry named {name!r}; entries: "
                           f"{', '.join(self._by_name)}") from None

    def entry_state(self, name: str, phase: str = "current"):
        """An entry-local state (arrays shaped like :meth:`view`): ``"input"`` (last distributed),
        ``"output"`` (last sub-solver output) or ``"current"`` (output after the first step, input
        before)."""
        entry = self._entry(name)
        if phase == "input":
            return entry.state_0
        if phase == "output":
            return entry.state_out
        if phase == "current":
            return entry.state_out if self._outputs_valid else entry.state_0
        raise ValueError(f"{type(self).__name__}.entry_state: phase must be 'current', 'input' or 'output', "
                         f"got {phase!r}")  # fmt: skip

    def entry_output_state_valid(self) -> bool:
        """Whether entry output states reflect the last coupled step."""
        return self._outputs_valid

    def sync_entry_states(self, state_in, dt: float = 0.0) -> None:
        """Distribute ``state_in`` into every entry's input state (e.g. for visualisation before the
        first step); input-state hooks get ``dt``."""
        self._distribute_state(state_in, dt=dt)

    # ------------------------------------------------------------------ launches
    def _replay(self, kernel, dim, inputs, outputs=()) -> None:
        """``wp.launch`` on the model's device through the coupler's :class:`~armillary.launch.LaunchCache`
        (host argument packing once per argument set; replays are capturable)."""
        cache = self.__dict__.get("_replays")
        if cache is None:
            cache = self._replays = LaunchCache(max_entries=256)
        cache.launch(kernel, dim, inputs, outputs, device=self.model.device)

    # ------------------------------------------------------------------ state distribution
    def _empty_rows(self, name: str):
        """A cached empty array with the dtype of state array ``name`` (kernel placeholder)."""
        cache = self.__dict__.setdefault("_empties", {})
        a = cache.get(name)
        if a is None:
            a = cache[name] = wp.zeros(0, dtype=_STATE_DTYPES[name], device=self.model.device)
        return a

    def _planned(self, key, probe):
        """The recorded plan ``(probe, run, result)`` for ``key`` when every array of ``probe`` is
        still the same object (states whose arrays were replaced get a new plan), else ``None``."""
        plan = self.__dict__.setdefault("_plans", {}).get(key)
        if plan is not None and len(plan[0]) == len(probe) and all(a is b for a, b in zip(plan[0], probe)):
            return plan
        return None

    def _record(self, key, probe, kernel, dim, inputs, result=None):
        """Launch ``kernel`` now and keep it as the plan of ``key`` (replayed by :meth:`_planned`
        users; packing the arguments once). At most 256 plans are kept."""
        plans = self.__dict__.setdefault("_plans", {})
        run = None
        if dim:
            run = replayer(wp.launch(kernel, dim=dim, inputs=list(inputs), device=self.model.device, record_cmd=True))
            run()
        if len(plans) >= 256:
            plans.pop(next(iter(plans)))
        plans[key] = (probe, run, result)

    def _copy_arrays(self, src, dst, names, dst2=None) -> int:
        """Copy the state arrays ``names`` (of ``_STATE_ARRAYS``) of ``src`` into ``dst`` (and
        ``dst2`` when given) where both exist with the same shape and are not the same array; one
        fused launch (``kernels.copy_state_kernel``) for all of them, recorded once per
        (states, names) and replayed. Returns the :class:`~armillary.StateFlags` bits of the arrays
        copied into ``dst``."""
        if not isinstance(names, (tuple, frozenset)):
            names = frozenset(names)
        key = ("copy", id(src), id(dst), id(dst2), names)
        probe = tuple(getattr(o, n, None) for o in (src, dst, dst2) for n, _ in _STATE_ARRAYS)
        plan = self._planned(key, probe)
        if plan is not None:
            if plan[1] is not None:
                plan[1]()
            return plan[2]
        flags = 0
        args_src, args_a, args_b = [], [], []
        n = 0
        for name, flag in _STATE_ARRAYS:
            empty = self._empty_rows(name)
            a = getattr(src, name, None) if name in names else None
            b = c = None
            if a is not None and a.shape[0]:
                b = getattr(dst, name, None)
                if b is None or b is a or b.shape != a.shape:
                    b = None
                if dst2 is not None and dst2 is not dst:
                    c = getattr(dst2, name, None)
                    if c is None or c is a or c.shape != a.shape:
                        c = None
                if (b is not None or c is not None) and not (a.dtype == empty.dtype and a.ndim == 1):
                    for d in (b, c):  # unusual layout: plain copies
                        if d is not None:
                            wp.copy(d, a)
                    flags |= int(flag) if b is not None else 0
                    b = c = None
            if b is not None:
                flags |= int(flag)
            if b is not None or c is not None:
                n = max(n, int(a.shape[0]))
            args_src.append(a if (b is not None or c is not None) else empty)
            args_a.append(b if b is not None else empty)
            args_b.append(c if c is not None else empty)
        self._record(key, probe, kernels.copy_state_kernel, n, (*args_src, *args_a, *args_b), flags)
        return flags

    def _distribute_state(self, state_in, *, dt: float = 0.0, iteration_restart: bool = False) -> None:
        """Copy ``state_in`` (kinematic arrays and public force inputs) into each entry's input
        buffers and notify the entry solvers."""
        for entry in self._entries:
            flags = self._copy_arrays(state_in, entry.state_0, _ALL_NAMES, entry.state_1)
            self._notify_input_state_update(entry, flags, dt=dt, iteration_restart=iteration_restart)

    def _notify_input_state_update(self, entry: SolverEntry, flags: int, *, dt: float = 0.0,
                                   iteration_restart: bool = False) -> None:  # fmt: skip
        """Tell entry solvers with private history that the coupler rewrote their inputs."""
        if flags or iteration_restart:
            coupling_hook(entry.solver, "coupling_notify_input_state_update")(
                entry.state_0, StateFlags(flags) if flags <= int(StateFlags.ALL) else flags,
                iteration_restart=iteration_restart, dt=float(dt))

    def _copy_control(self, entry: SolverEntry, control):
        """The entry-local control filled from the caller's ``control`` (``None`` passes through)."""
        if control is None:
            return None
        dst = entry.control
        _copy_namespace(control, dst)
        return dst

    def _reconcile_state(self, state_in, state_out) -> None:
        """``state_out``: unowned rows from ``state_in``, owned rows from their owner's output
        (one fused copy launch, then one fused scatter launch per entry)."""
        if state_out is not state_in:
            self._copy_arrays(state_in, state_out, _RECONCILED)
        names = ("body_q", "body_qd", "joint_q", "joint_qd", "particle_q", "particle_qd")
        for entry in self._entries:
            rows = (entry.body_rows, entry.particle_rows, entry.joint_q_rows, entry.joint_qd_rows)
            src = entry.state_out
            key = ("scatter", entry.index, id(src), id(state_out))
            probe = (*rows, *(getattr(o, n, None) for o in (src, state_out) for n in names))
            plan = self._planned(key, probe)
            if plan is not None:
                if plan[1] is not None:
                    plan[1]()
                continue
            n = max(int(r.shape[0]) for r in rows)
            srcs, dsts = [], []
            for name in names:
                a, b = getattr(src, name, None), getattr(state_out, name, None)
                if a is None or b is None:
                    a = b = self._empty_rows(name)
                srcs.append(a)
                dsts.append(b)
            self._record(key, probe, kernels.scatter_state_kernel, n, (*rows, *srcs, *dsts))

    # ------------------------------------------------------------------ contacts
    def _contacts_for_entry(self, entry: SolverEntry, contacts):
        """``contacts`` restricted to what the entry sees (a buffer owned by the entry)."""
        if contacts is None:
            return None
        if not entry.solver.capabilities.collision_pipeline:
            return None
        comp = self._ensure_entry_contact_buffer(entry, contacts)
        m = self.model
        if comp.rigid_max:
            self._replay(kernels.entry_rigid_keep_kernel, comp.rigid_max,
                         (contacts.rigid_contact_count, contacts.rigid_contact_shape0, contacts.rigid_contact_shape1,
                          m.shape_body, entry.shape_visible, entry.body_active), (comp.rigid_keep,))  # fmt: skip
        # an entry without particles keeps no soft contact: its soft stream is just an empty count
        soft = comp.soft_max and entry.particle_active.shape[0] > 0
        if soft:
            self._replay(kernels.entry_soft_keep_kernel, comp.soft_max,
                         (contacts.soft_contact_count, contacts.soft_contact_particle, contacts.soft_contact_shape,
                          entry.shape_visible, entry.particle_active), (comp.soft_keep,))  # fmt: skip
        return comp.compact(contacts, soft=bool(soft))

    def _ensure_entry_contact_buffer(self, entry: SolverEntry, contacts):
        from armillary.solvers._coupling_kernels import ContactCompactor

        comp = entry.contact_compactor
        if comp is None or not comp.matches(contacts):
            comp = entry.contact_compactor = ContactCompactor(contacts)
        return comp

    def entry_contacts(self, name: str, contacts):
        """``contacts`` filtered for entry ``name`` (``None`` when the entry takes no contacts)."""
        return self._contacts_for_entry(self._entry(name), contacts)

    def prepare_contacts(self, contacts) -> None:
        """Allocate the entry-local contact buffers for ``contacts`` now (before graph capture)."""
        if contacts is None:
            return
        for entry in self._entries:
            if entry.solver.capabilities.collision_pipeline:
                self._ensure_entry_contact_buffer(entry, contacts)

    # ------------------------------------------------------------------ stepping
    def _step_entry(self, entry: SolverEntry, control, contacts, dt: float, *, filter_contacts: bool = True):
        """Step one entry ``entry.substeps`` times with ``dt / substeps`` from ``entry.state_0``;
        the result is ``entry.state_out``. Returns the contacts the entry used."""
        local_contacts = self._contacts_for_entry(entry, contacts) if filter_contacts else contacts
        local_control = self._copy_control(entry, control)
        h = float(dt) / entry.substeps
        s_in, s_out = entry.state_0, entry.state_1
        for k in range(entry.substeps):
            try:
                entry.solver.step(s_in, s_out, local_control, local_contacts, h)
            except (ValueError, TypeError, FloatingPointError) as exc:
                raise self._entry_step_error(entry, exc, k) from exc
            s_in, s_out = s_out, s_in
        entry.state_out = s_in
        return local_contacts

    def _step_coupled(self, state_in, state_out, control, contacts, dt: float) -> None:
        """One coupled step (template method: Proxy and ADMM override it). The base distributes,
        steps every entry independently and reconciles."""
        self._distribute_state(state_in, dt=dt)
        for entry in self._entries:
            self._step_entry(entry, control, contacts, dt)
        self._outputs_valid = True
        self._reconcile_state(state_in, state_out)

    def step(self, state_in, state_out, control, contacts, dt: float, *, observables=None) -> None:
        """Step every entry for ``dt`` seconds and reconcile owned results into ``state_out``.

        ``contacts`` (from the shared model's collision pipeline) is filtered per entry;
        ``state_in`` is left untouched (``state_in is state_out`` is allowed). ``observables``: a
        container from :meth:`observables` (``body_qdd`` of the reconciled state).
        """
        if self.debug:
            self._check_inputs_finite(state_in, control)
        observed = begin_step(self, observables, state_in, state_out, contacts)
        self._step_phase = ""
        self._step_coupled(state_in, state_out, control, contacts, float(dt))
        self._step_phase = ""
        if observed is not None:
            observed.finish(state_out, float(dt))

    # ------------------------------------------------------------------ step checks
    _step_phase = ""
    """Where a derived coupler is within a step (``"ADMM iteration 2 of 4"``), for error messages."""

    @property
    def debug(self) -> bool:
        """Debug mode (:attr:`SolverBase.debug`): every coupled step ends with :meth:`check_finite`.
        Setting it sets every entry solver's ``debug`` and switches its own per-step guard on
        (``True``) or off (``False``), so the first substep that produces NaN or infinity raises,
        naming the entry."""
        return self.__dict__.get("_debug", False)

    @debug.setter
    def debug(self, value) -> None:
        self.__dict__["_debug"] = bool(value)
        for entry in self.__dict__.get("_entries", ()):
            self._configure_entry_checks(entry)

    def _configure_entry_checks(self, entry: SolverEntry) -> None:
        """Entry solvers run their own non-finite guard and debug check only in debug mode (the
        coupled step's guard covers their owned rows of ``state_out`` otherwise)."""
        s, on = entry.solver, self.debug
        s.debug = on
        s.finite_guard = on
        s.reset_nonfinite()

    def _entry_label(self, entry: SolverEntry) -> str:
        return f"entry {entry.index} {entry.name!r} ({type(entry.solver).__name__})"

    def _entry_step_error(self, entry: SolverEntry, exc: Exception, substep: int) -> Exception:
        """``exc`` raised by ``entry``'s solver, re-made to name the entry, the coupled step and
        the substep (``exc`` itself, with a note, when its type cannot be re-made)."""
        where = f"{type(self).__name__}: {self._entry_label(entry)}, coupled step {self.step_count + 1}"
        if self._step_phase:
            where += f", {self._step_phase}"
        if entry.substeps > 1:
            where += f", substep {substep + 1} of {entry.substeps}"
        if isinstance(exc, NonFiniteStateError):
            owner, owner_text = self._owner_of(exc.kind, exc.index)
            note = "" if owner is entry else f" ({exc.kind} {exc.index} is {owner_text})"
            return self._nonfinite_error(f"{where}: {exc}{note}", exc.kind, exc.index, self.step_count + 1, entry)
        try:
            return type(exc)(f"{where}: {exc}")
        except Exception:  # noqa: BLE001 - an exception type with another constructor: keep it
            if hasattr(exc, "add_note"):
                exc.add_note(where)
            return exc

    def _nonfinite_error(self, message: str, kind: str, index: int, step, entry) -> NonFiniteStateError:
        err = NonFiniteStateError(message, solver=type(self).__name__, kind=kind, index=index, step=step)
        err.entry_index = None if entry is None else entry.index
        err.entry_name = None if entry is None else entry.name
        err.entry_solver = None if entry is None else type(entry.solver).__name__
        return err

    def _owner_of(self, kind: str, index: int) -> tuple[SolverEntry | None, str]:
        """The entry owning entity ``index`` of ``kind`` (a ``step_guard.SLOT_NAMES`` entry) and a
        phrase saying so (``"owned by entry 1 'cloth' (SolverXPBD)"``)."""
        owner = -1
        if kind.startswith("body") or kind.startswith("state_in.body_f"):
            if 0 <= index < len(self.body_owner):
                owner = int(self.body_owner[index])
        elif kind.startswith("particle") or kind.startswith("state_in.particle_f"):
            if 0 <= index < len(self.particle_owner):
                owner = int(self.particle_owner[index])
        elif kind.startswith("joint") or kind.startswith("control.joint_f"):
            starts = _np(self.model.joint_q_start if kind == "joint coordinate" else self.model.joint_qd_start)
            joint = int(np.searchsorted(starts, index, side="right") - 1)
            if 0 <= joint < len(self.joint_owner):
                owner = int(self.joint_owner[joint])
                if owner < 0:
                    return None, (f"a row of joint {joint}, which no entry owns (a joint between entries or of no "
                                  f"entry's bodies: the coupled step keeps its input value)")  # fmt: skip
        if owner < 0:
            return None, "owned by no entry (the coupled step keeps its input value)"
        entry = self._entries[owner]
        return entry, f"owned by {self._entry_label(entry)}"

    def _check_inputs_finite(self, state_in, control) -> None:
        """Debug mode, before the entries run: raise for flags left by earlier steps, then for NaN or
        infinity in ``state_in`` or the force inputs, naming the row's owner (an entry solver would
        otherwise report a row of another entry that it merely carries as a kinematic copy)."""
        self.check_finite(state_in)
        guard = self.__dict__["_step_guard"]
        guard.launch_guard(state_in, state_in, control)
        found = guard.first_nonfinite()
        if found is None:
            return
        guard.reset()
        kind, index = found
        owner, owner_text = self._owner_of(kind, index)
        text = str(guard.error(kind, index, state_in, None)).partition(": ")[2]
        text = text.replace("non-finite state: first ", "non-finite input: first state_in ", 1)
        head, sep, tail = text.partition("; check dt")
        msg = (f"{type(self).__name__}: coupled step {self.step_count + 1}: {head}; {kind} {index} is {owner_text}"
               f"{sep}{tail}")  # fmt: skip
        raise self._nonfinite_error(msg, kind, index, self.step_count + 1, owner)

    def check_finite(self, state=None) -> None:
        """Raise :class:`~armillary.solvers.step_guard.NonFiniteStateError` when a coupled step since
        the last check produced NaN or infinity in ``state_out`` (or read it in a force input),
        naming the coupled step count, the first offending body / particle / joint coordinate / DOF
        (label and, given ``state``, value) and the entry that owns it (``entry_index``,
        ``entry_name``, ``entry_solver`` on the exception). Entry solvers that write their own flags
        (``fuses_finite_guard``, or ``finite_guard`` switched on) are read too: NaN in rows the
        coupled output does not show (proxies) names that entry. Every flag is reset either way
        (a host sync)."""
        guard = self.__dict__.get("_step_guard") or self._make_step_guard()
        found, culprit = guard.first_nonfinite(), None
        if found is None:
            for entry in self._entries:
                s = entry.solver
                sub = s.__dict__.get("_step_guard")
                if sub is not None and (s.finite_guard or s.fuses_finite_guard):
                    found = sub.first_nonfinite()
                    if found is not None:
                        culprit = entry
                        break
        self.reset_nonfinite()
        if found is None:
            return
        kind, index = found
        if culprit is None:
            err = guard.error(kind, index, state, self.step_count)
            owner, owner_text = self._owner_of(kind, index)
            head, sep, tail = str(err).partition("; check dt")
            msg = f"{head}; {kind} {index} is {owner_text}{sep}{tail}"
            raise self._nonfinite_error(msg, kind, index, self.step_count, owner)
        sub_err = culprit.solver.__dict__["_step_guard"].error(kind, index, None, culprit.solver.step_count)
        raise self._nonfinite_error(f"{type(self).__name__}: {self._entry_label(culprit)}, detected after coupled "
                                    f"step {self.step_count} in rows the coupled output does not hold: {sub_err}",
                                    kind, index, self.step_count, culprit)  # fmt: skip

    def reset_nonfinite(self) -> None:
        """Clear :attr:`nonfinite_flags` and the entry solvers' flags (no sync)."""
        super().reset_nonfinite()
        for entry in self.__dict__.get("_entries", ()):
            sub = entry.solver.__dict__.get("_step_guard")
            if sub is not None:
                sub.reset()

    # ------------------------------------------------------------------ model changes and reset
    def notify_model_changed(self, flags) -> None:
        """Refresh every entry view's parent-derived overrides, then forward ``flags`` to the entry
        solvers (custom bits pass through), and drop cached gravity accelerations."""
        super().notify_model_changed(flags)
        value = int(flags)
        for entry in self._entries:
            entry.view.refresh(value)
            entry.solver.notify_model_changed(flags)
            if value & _GRAVITY_FLAGS:
                entry.gravity_body = entry.gravity_particle = None

    def reset(self, state, world_mask=None, flags=None) -> None:
        """Reset ``state`` (selected worlds) and every entry solver's private state.

        The shared state is reset from the model, distributed to the entries, each entry solver
        resets its input state (clearing its caches), and the owned rows come back into ``state``;
        entry solvers then get ``coupling_notify_input_state_update(..., iteration_restart=True,
        dt=0)``.
        """
        super().reset(state, world_mask=world_mask, flags=flags)
        names = _ALL_NAMES
        for entry in self._entries:
            self._copy_arrays(state, entry.state_0, names)
            entry.solver.reset(entry.state_0, world_mask=world_mask, flags=flags)
            if entry.state_1 is not entry.state_0:
                self._copy_arrays(entry.state_0, entry.state_1, names)
            entry.state_out = entry.state_0
        self._reconcile_state(state, state)
        for entry in self._entries:
            self._notify_input_state_update(entry, int(StateFlags.ALL), dt=0.0, iteration_restart=True)
        self._outputs_valid = False

    # ------------------------------------------------------------------ coupling helpers
    def entry_gravity_acceleration(self, name: str):
        """``(body_acc, particle_acc)``: the gravity acceleration entry ``name``'s solver applies
        to each body and particle of its view (``coupling_eval_gravity_acceleration``), cached
        until a model change touches gravity, masses or body flags."""
        entry = self._entry(name)
        if entry.gravity_body is None:
            view, dev = entry.view, self.model.device
            entry.gravity_body = wp.zeros(int(view.body_count or 0), dtype=wp.vec3, device=dev)
            entry.gravity_particle = wp.zeros(int(getattr(view, "particle_count", 0) or 0), dtype=wp.vec3, device=dev)
            hook = coupling_hook(entry.solver, "coupling_eval_gravity_acceleration")
            hook(entry.gravity_body, entry.gravity_particle)
        return entry.gravity_body, entry.gravity_particle

    def eval_effective_mass(self, name: str, endpoint_kind, endpoint_indices, endpoint_local_pos=None) -> np.ndarray:
        """Scalar effective masses [kg] of endpoints of entry ``name`` (the solver's hook, else the
        model-mass fallback). ``endpoint_kind``: one kind for all or one per endpoint."""
        entry = self._entry(name)
        kinds, idx, pos = self._endpoint_arrays(endpoint_kind, endpoint_indices, endpoint_local_pos)
        out = wp.zeros(len(idx), dtype=wp.float32, device=self.model.device)
        coupling_hook(entry.solver, "coupling_eval_effective_mass")(kinds, idx, pos, out)
        return out.numpy().astype(np.float64)

    def eval_effective_mass_block(self, name: str, body_indices, endpoint_local_pos=None):
        """``(masses [kg], inertias [kg m^2])`` of body endpoints of entry ``name``."""
        entry = self._entry(name)
        kinds, idx, pos = self._endpoint_arrays(ENDPOINT_BODY, body_indices, endpoint_local_pos)
        dev = self.model.device
        out_m = wp.zeros(len(idx), dtype=wp.float32, device=dev)
        out_i = wp.zeros(len(idx), dtype=wp.mat33, device=dev)
        coupling_hook(entry.solver, "coupling_eval_effective_mass_block")(kinds, idx, pos, out_m, out_i)
        return out_m.numpy().astype(np.float64), out_i.numpy().astype(np.float64)

    def _endpoint_arrays(self, endpoint_kind, endpoint_indices, endpoint_local_pos):
        dev = self.model.device
        idx = np.asarray(endpoint_indices.numpy() if hasattr(endpoint_indices, "numpy") else endpoint_indices,
                         dtype=np.int32).reshape(-1)  # fmt: skip
        kinds = np.asarray(endpoint_kind.numpy() if hasattr(endpoint_kind, "numpy") else endpoint_kind, dtype=np.int32)
        if kinds.ndim == 0:
            kinds = np.full(len(idx), int(kinds), dtype=np.int32)
        if np.any((kinds != ENDPOINT_BODY) & (kinds != ENDPOINT_PARTICLE)):
            raise ValueError(f"{type(self).__name__}: endpoint kinds must be ENDPOINT_BODY (0) or "
                             "ENDPOINT_PARTICLE (1)")
        pos = np.zeros((len(idx), 3), np.float32) if endpoint_local_pos is None else \
            np.asarray(endpoint_local_pos, np.float32).reshape(len(idx), 3)  # fmt: skip
        return (wp.array(kinds, dtype=wp.int32, device=dev), wp.array(idx, dtype=wp.int32, device=dev),
                wp.array(pos, dtype=wp.vec3, device=dev))  # fmt: skip


def _copy_namespace(src, dst) -> None:
    """Copy every Warp array of ``src`` into the same-named, same-shaped array of ``dst`` (one level
    of custom-attribute namespaces included)."""
    for name, a in vars(src).items():
        b = getattr(dst, name, None)
        if isinstance(a, wp.array):
            if isinstance(b, wp.array) and a is not b and a.shape == b.shape and a.dtype == b.dtype and a.size:
                wp.copy(b, a)
        elif b is not None and type(a).__name__ == "AttributeNamespace":
            _copy_namespace(a, b)

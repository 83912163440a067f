"""Solver observables: extra outputs a caller requests from a solver's :meth:`~SolverBase.step`.

A caller allocates a container once with :meth:`SolverBase.observables` and passes it to the
same solver's ``step(..., observables=container)`` on every step that needs the values; the
solver writes into the container's arrays (no allocation, no host synchronisation)::

    kinds = {solver.ObservableKind.BODY_QDD, solver.ObservableKind.CONTACT_F}
    obs = solver.observables(kinds & solver.supported_observables, contacts=contacts)
    solver.step(state_0, state_1, control, contacts, dt, observables=obs)
    obs.body_qdd.numpy()  # (body_count, 6) spatial accelerations of that step

Standard kinds (:class:`ObservableKind`), all world frame, linear part first:

* ``body_qdd`` (per body, ``spatial_vector``): the mean acceleration of the step,
  ``(body_qd_out - body_qd_in) / dt``: COM linear acceleration [m/s^2], angular
  acceleration [rad/s^2]. A free-falling body reports exactly ``(g, 0)``.
* ``body_parent_f`` (per body, ``spatial_vector``): the wrench its parent joint exerted on the
  body during the step [N, N m], torque about the body's COM; zero for a body that is the child
  of no joint.
* ``contact_f`` (per contact, ``spatial_vector``, ``rigid_contact_max + soft_contact_max``
  rows, soft contact ``i`` in row ``rigid_contact_max + i``): the force that body 1 exerted on
  body 0 (the bodies of ``rigid_contact_shape0/1``) and its torque about body 0's COM (about the
  world origin when shape 0 is static) [N, N m]. Rows of inactive contacts are zero.

Solvers declare what they fill in ``SUPPORTED_OBSERVABLES`` (and may narrow it per instance in
:attr:`SolverBase.supported_observables`); solver-specific kinds are declared on a subclass of
:class:`ObservableKind` and as fields (:meth:`Observables.field`) of a
``@dataclass(eq=False)`` subclass of :class:`Observables`. See ``docs/observables.md``.

:class:`StepObservables` (returned by :func:`begin_step`) fills the standard kinds from a step's
input and output states for any solver: ``body_qdd`` always, ``contact_f`` and ``body_parent_f``
from the per-contact forces the solver applied.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable
from typing import Any

import numpy as np
import warp as wp

from ..sim.custom_attributes import _COUNT_ATTRS, AttributeFrequency

__all__ = [
    "ObservableKind",
    "Observables",
    "StepObservables",
    "begin_step",
]

OBSERVABLE_KEY = "solver_observable"
"""Key of a field's metadata holding its :class:`_ObservableField` declaration."""

_CONTACT_FREQUENCIES = (AttributeFrequency.CONTACT, AttributeFrequency.CONTACT_RIGID, AttributeFrequency.CONTACT_SOFT)


# ------------------------------------------------------------------------------------- kinds
class ObservableKind:
    """Names of the observable kinds: the standard ones and, in subclasses, solver-specific ones.

    A namespace of string constants, used through ``solver.ObservableKind`` and combined as sets
    (``{K.BODY_QDD, K.CONTACT_F}``); literal strings are interchangeable with the constants. A
    solver declares new kinds on a subclass (``BODY_TEMPERATURE = "body_temperature"``); inherited
    names stay available.

    Checked when a subclass is defined: every public attribute (not starting with ``_``) must be
    a nonempty string (``TypeError``); changing an inherited name's value, or giving one string
    to two names, raises ``ValueError``, also between several parents. Redeclaring a name with
    the same value is allowed.

    Which kinds a configured solver fills is :attr:`SolverBase.supported_observables`; this
    namespace is not iterable and names kinds that a given solver may not support.
    """

    BODY_QDD = "body_qdd"
    """Per-body spatial acceleration of the step (COM linear, angular; world frame)."""
    BODY_PARENT_F = "body_parent_f"
    """Per-body wrench exerted by the parent joint (world frame, about the body's COM)."""
    CONTACT_F = "contact_f"
    """Per-contact wrench exerted on body 0 by body 1 (world frame, about body 0's COM)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _check_kind_namespace(cls)


def _check_kind_namespace(cls: type) -> None:
    name = cls.__qualname__
    by_name: dict[str, str] = {}
    by_value: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is object:
            continue
        for attr, value in vars(klass).items():
            if attr.startswith("_"):
                continue
            if not isinstance(value, str) or not value:
                raise TypeError(f"{name}.{attr} must be a nonempty string; got {value!r}.")
            old = by_name.get(attr)
            if old is not None and old != value:
                raise ValueError(f"Conflicting observable kind {attr} in {name}: {old!r} and {value!r}.")
            owner = by_value.get(value)
            if owner is not None and owner != attr:
                raise ValueError(f"Duplicate observable kind {value!r} for {owner} and {attr} in {name}.")
            by_name[attr] = value
            by_value[value] = attr


# ------------------------------------------------------------------------------- containers
@dataclasses.dataclass(frozen=True)
class _ObservableField:
    """Declaration of one observable array: its kind (``None``: the field name), dtype, rows."""

    kind: str | None
    dtype: Any
    frequency: AttributeFrequency | str


def _field(*, dtype: type, frequency: AttributeFrequency | str, kind: str | None = None) -> Any:
    """Declare an optional observable array on a ``@dataclass(eq=False)`` container.

    Args:
        dtype: Warp element type of the array (``wp.float32``, ``wp.vec3``, ...).
        frequency: what indexes the rows (not how often they update): a
            ``Model.AttributeFrequency`` (``BODY``, ``JOINT_DOF``, ``WORLD``, ``ONCE``,
            ``CONTACT`` = rigid + soft contact capacity, ``CONTACT_RIGID``, ``CONTACT_SOFT``, ...)
            or the key of a custom frequency (``model.custom_frequency_counts``).
        kind: the kind string this field answers to; ``None`` (default) uses the field name.

    Returns:
        A dataclass field defaulting to ``None``; the array is allocated only when
        :meth:`SolverBase.observables` requests its kind.

    Raises:
        TypeError: ``kind`` is not ``None`` or a nonempty string, or ``frequency`` is neither an
            ``AttributeFrequency`` nor a nonempty string.
    """
    if kind is not None and (not isinstance(kind, str) or not kind):
        raise TypeError("Solver observable kinds must be nonempty strings.")
    if not isinstance(frequency, AttributeFrequency) and (not isinstance(frequency, str) or not frequency):
        raise TypeError(f"Invalid observable frequency for {kind!r}: {frequency!r}.")
    spec = _ObservableField(kind=kind, dtype=dtype, frequency=frequency)
    return dataclasses.field(default=None, init=False, repr=False, metadata={OBSERVABLE_KEY: spec})


_field.__name__ = "field"
_field.__qualname__ = "SolverBase.Observables.field"


@dataclasses.dataclass(eq=False)
class Observables:
    """Arrays a solver fills in addition to the simulation state.

    Allocate once with :meth:`SolverBase.observables` (only the requested arrays are allocated;
    the others stay ``None``), then pass the same container as ``observables=`` to that solver's
    :meth:`~SolverBase.step` on each step that needs the values: the solver writes into the
    existing arrays. A container works only with the solver instance that allocated it.

    Solvers add their own arrays on a subclass decorated with ``@dataclass(eq=False)``, declaring
    each with :meth:`field`; identity equality (``eq=False``) lets a container serve as a cache
    key (for instance as a source of :class:`~armillary.selection.ArticulationView` reads).

    Attributes:
        body_qdd: ``(body_count,)`` ``spatial_vector``: mean acceleration over the step (COM
            linear [m/s^2], angular [rad/s^2], world frame).
        body_parent_f: ``(body_count,)`` ``spatial_vector``: wrench of the parent joint on the
            body [N, N m], world frame, torque about the body's COM.
        contact_f: ``(rigid_contact_max + soft_contact_max,)`` ``spatial_vector``: force of body 1
            on body 0 and its torque about body 0's COM (world origin for a static shape 0).
    """

    body_qdd: wp.array | None = _field(dtype=wp.spatial_vector, frequency=AttributeFrequency.BODY)
    body_parent_f: wp.array | None = _field(dtype=wp.spatial_vector, frequency=AttributeFrequency.BODY)
    contact_f: wp.array | None = _field(dtype=wp.spatial_vector, frequency=AttributeFrequency.CONTACT)
    _kinds: frozenset = dataclasses.field(default_factory=frozenset, init=False, repr=False)
    _solver: Any = dataclasses.field(default=None, init=False, repr=False)
    _contact_layouts: dict = dataclasses.field(default_factory=dict, init=False, repr=False)

    field = staticmethod(_field)

    def __repr__(self) -> str:
        return f"{type(self).__qualname__}()"

    # -------------------------------------------------------------------- queries
    @property
    def kinds(self) -> frozenset[str]:
        """The kinds this container (or selection) requests."""
        return self._kinds

    @property
    def model(self):
        """The model whose indexing the arrays use; ``None`` before allocation."""
        return None if self._solver is None else self._solver.model

    @property
    def contacts(self):
        """``contacts_for_kind("contact_f")``: ``None`` when ``contact_f`` is not requested."""
        return self.contacts_for_kind("contact_f")

    def is_requested(self, kind: str) -> bool:
        """Whether this container requests ``kind`` (the request, not whether values are fresh)."""
        return kind in self._kinds

    def contacts_for_kind(self, kind: str):
        """The :class:`~armillary.Contacts` the array of ``kind`` was last produced with.

        Before any step: the contacts it was allocated with. Selections share this record.

        Returns:
            The contacts of a requested contact-indexed kind; ``None`` for a kind not requested
            or not contact-indexed.

        Raises:
            KeyError: the container type declares no observable ``kind``.
            TypeError: the container type is not an identity-equality dataclass.
        """
        by_kind, specs = _declarations(type(self))
        if kind not in by_kind:
            raise KeyError(f"No observable declared for kind {kind!r}.")
        if kind not in self._kinds or specs[by_kind[kind]].frequency not in _CONTACT_FREQUENCIES:
            return None
        return self._contact_layouts.get(kind)

    def get_attribute_frequency(self, name: str) -> AttributeFrequency | str:
        """Row domain of the observable array ``name`` (a field name), inherited ones included.

        Raises:
            KeyError: no observable field ``name``.
            TypeError: the container type is not an identity-equality dataclass.
        """
        specs = _declarations(type(self))[1]
        if name not in specs:
            raise KeyError(f"No observable frequency declared for {name!r}.")
        return specs[name].frequency

    def select(self, kinds: Iterable[str]) -> Observables:
        """A container of the same type sharing this one's arrays for a subset of its kinds.

        No array is allocated or copied: the selected fields reference this container's arrays
        (gradients included); the others are ``None``, so stepping the selection leaves them
        unchanged. Create selections before graph capture and reuse them. Subclasses holding
        nested containers override this, call ``super()`` and select their children.

        Raises:
            TypeError: ``kinds`` is not a collection of nonempty strings.
            ValueError: this container was not allocated by a solver, or a kind is not requested
                by it (a selection can only narrow).
        """
        wanted = _normalize_kinds(kinds)
        if self._solver is None:
            raise ValueError("Solver observables must be allocated by a solver before selecting fields.")
        extra = wanted - self._kinds
        if extra:
            raise ValueError(f"Cannot select observable kinds not requested by this container: {frozenset(extra)}.")
        by_kind, _ = _declarations(type(self))
        out = copy.copy(self)
        for kind, name in by_kind.items():
            if kind not in wanted:
                object.__setattr__(out, name, None)
        out._kinds = frozenset(wanted)
        return out


def _is_identity_dataclass(cls: type) -> bool:
    return dataclasses.is_dataclass(cls) and cls.__eq__ is object.__eq__ and cls.__hash__ is object.__hash__


_DECLARATIONS: dict[type, tuple[dict[str, str], dict[str, _ObservableField]]] = {}


def _declarations(cls: type) -> tuple[dict[str, str], dict[str, _ObservableField]]:
    """``({kind: field name}, {field name: declaration})`` of a container type (cached)."""
    hit = _DECLARATIONS.get(cls)
    if hit is not None:
        return hit
    if not _is_identity_dataclass(cls):
        raise TypeError("Solver observable containers must use @dataclass(eq=False) for identity equality.")
    by_kind: dict[str, str] = {}
    specs: dict[str, _ObservableField] = {}
    for f in dataclasses.fields(cls):
        spec = f.metadata.get(OBSERVABLE_KEY)
        if spec is None:
            continue
        kind = spec.kind or f.name
        if kind in by_kind:
            raise ValueError(f"Duplicate observable kind {kind!r} for {by_kind[kind]!r} and {f.name!r}.")
        by_kind[kind] = f.name
        specs[f.name] = spec
    _DECLARATIONS[cls] = (by_kind, specs)
    return by_kind, specs


def _normalize_kinds(kinds) -> frozenset[str]:
    if isinstance(kinds, str):
        raise TypeError("Pass observable kinds as a collection of strings, for example {'body_qdd'}.")
    items = list(kinds)
    bad = [k for k in items if not isinstance(k, str) or not k]
    if bad:
        raise TypeError(f"Solver observable kinds must be nonempty strings; got: {', '.join(repr(k) for k in bad)}.")
    return frozenset(items)


# ------------------------------------------------------------------------------- allocation
def _solver_contacts(solver):
    """The contacts a solver owns (its ``contacts`` attribute when it is a Contacts), else None."""
    from ..sim.contacts import Contacts

    c = getattr(solver, "contacts", None)
    return c if isinstance(c, Contacts) else None


def _check_contacts(solver, contacts, *, missing: str):
    from ..sim.contacts import Contacts

    if contacts is None:
        contacts = _solver_contacts(solver)
    if contacts is None:
        raise ValueError(missing)
    if not isinstance(contacts, Contacts):
        raise TypeError("Contact-indexed observables require a Contacts instance.")
    dev = getattr(solver, "device", None)
    if dev is not None and wp.get_device(contacts.device) != wp.get_device(dev):
        raise ValueError(
            f"Contacts are on device {wp.get_device(contacts.device)}, the solver on {wp.get_device(dev)}; "
            "solver observables need contacts on the solver's device."
        )
    return contacts


def _contact_rows(frequency, contacts) -> int:
    nr = int(contacts.rigid_contact_max)
    ns = int(contacts.soft_contact_max)
    if frequency == AttributeFrequency.CONTACT_RIGID:
        return nr
    if frequency == AttributeFrequency.CONTACT_SOFT:
        return ns
    return nr + ns


def _row_count(model, frequency) -> int:
    if isinstance(frequency, AttributeFrequency):
        if frequency == AttributeFrequency.ONCE:
            return 1
        if frequency == AttributeFrequency.WORLD:
            return int(getattr(model, "world_count", 1) or 0)
        return int(getattr(model, _COUNT_ATTRS[frequency], 0) or 0)
    return int(model.custom_frequency_counts[frequency])


def allocate(solver, kinds, *, contacts=None, requires_grad=None) -> Observables:
    """:meth:`SolverBase.observables` (see there)."""
    wanted = _normalize_kinds(kinds)
    cls = type(solver).Observables
    if not (isinstance(cls, type) and issubclass(cls, Observables)):
        raise TypeError("Observables must derive from SolverBase.Observables.")
    by_kind, specs = _declarations(cls)
    supported = frozenset(solver.supported_observables)
    unsupported = sorted(wanted - supported)
    if unsupported:
        raise ValueError(
            f"{type(solver).__name__} does not support solver observable(s): "
            f"{', '.join(repr(k) for k in unsupported)}."
        )
    for kind in sorted(wanted):
        if kind not in by_kind:
            raise ValueError(f"No observable field declared for {kind!r}.")
    contact_kinds = [k for k in wanted if specs[by_kind[k]].frequency in _CONTACT_FREQUENCIES]
    if contact_kinds:
        contacts = _check_contacts(
            solver, contacts,
            missing="Pass Contacts to solver.observables() when requesting contact-indexed observables.",
        )  # fmt: skip
    model = solver.model
    grad = bool(getattr(model, "requires_grad", False)) if requires_grad is None else bool(requires_grad)
    device = solver.device
    out = cls()
    for kind in wanted:
        name = by_kind[kind]
        spec = specs[name]
        if spec.frequency in _CONTACT_FREQUENCIES:
            rows = _contact_rows(spec.frequency, contacts)
        else:
            rows = _row_count(model, spec.frequency)
        object.__setattr__(out, name, wp.zeros(rows, dtype=spec.dtype, device=device, requires_grad=grad))
    out._kinds = wanted
    out._solver = solver
    out._contact_layouts = {k: contacts for k in contact_kinds}
    if wanted & _STANDARD and int(getattr(model, "body_count", 0) or 0):
        object.__setattr__(out, "_work", _new_work(solver))  # shared by selections (shallow copies)
    return out


def validate(solver, observables, contacts=None) -> None:
    """:meth:`SolverBase.validate_observables` (see there)."""
    if observables is None:
        return
    if not isinstance(observables, Observables):
        raise TypeError("'observables' must be an instance of Observables.")
    by_kind, specs = _declarations(type(observables))
    if observables._solver is not solver:
        raise ValueError("Solver observables must be passed to the solver instance that allocated them.")
    contact_kinds = [k for k in observables._kinds if specs[by_kind[k]].frequency in _CONTACT_FREQUENCIES]
    if not contact_kinds:
        return
    contacts = _check_contacts(solver, contacts,
                               missing="Pass the step's Contacts when using contact-indexed solver observables.")
    for kind in sorted(contact_kinds):
        name = by_kind[kind]
        need = _contact_rows(specs[name].frequency, contacts)
        have = int(getattr(observables, name).shape[0])
        if need > have:
            raise ValueError(
                f"Contacts capacities (rigid={int(contacts.rigid_contact_max)}, soft={int(contacts.soft_contact_max)}) "
                f"need {need} rows for observable {kind!r}, which has {have}; allocate observables with the largest "
                "Contacts they will be used with."
            )
    for kind in contact_kinds:
        observables._contact_layouts[kind] = contacts


# reached as ``SolverBase.ObservableKind`` / ``SolverBase.Observables``: name them so
ObservableKind.__qualname__ = "SolverBase.ObservableKind"
Observables.__qualname__ = "SolverBase.Observables"


# ------------------------------------------------------------------------- standard filling
def begin_step(solver, observables, state_in, state_out, contacts) -> StepObservables | None:
    """Start filling the standard kinds for one step; call first in ``step``.

    Validates ``observables`` (:meth:`SolverBase.validate_observables`) and, when ``state_in is
    state_out``, copies the input body poses and twists the standard kinds need. Returns ``None``
    when nothing is requested (then there is nothing to finish), else a :class:`StepObservables`
    whose :meth:`~StepObservables.finish` the solver calls after it wrote ``state_out``.
    """
    solver.validate_observables(observables, contacts)
    if observables is None or not observables._kinds:
        return None
    return StepObservables(solver, observables, state_in, state_out, contacts)


class StepObservables:
    """Fills ``body_qdd``, ``contact_f`` and ``body_parent_f`` of one step (see :func:`begin_step`).

    Everything runs as Warp launches on the solver's device into arrays allocated with the
    container: no allocation and no host synchronisation (graph capturable).
    """

    def __init__(self, solver, observables: Observables, state_in, state_out, contacts):
        self.solver = solver
        self.observables = observables
        self.contacts = contacts
        self.body_f = getattr(state_in, "body_f", None)
        kinds = observables._kinds
        nb = int(getattr(solver.model, "body_count", 0) or 0)
        self.needs_bodies = nb > 0 and bool(kinds & {"body_qdd", "body_parent_f", "contact_f"})
        self.body_q_in = getattr(state_in, "body_q", None)
        self.body_qd_in = getattr(state_in, "body_qd", None)
        if self.needs_bodies and state_in is state_out and self.body_q_in is not None:
            work = _work(observables, solver)
            wp.copy(work["body_q"], state_in.body_q)
            wp.copy(work["body_qd"], state_in.body_qd)
            self.body_q_in, self.body_qd_in = work["body_q"], work["body_qd"]

    def finish(self, state_out, dt: float, *, contact_force=None, contact_point: str = "surface",
               contact_wrench=None, kinds=None) -> None:  # fmt: skip
        """Write the requested standard kinds after the step wrote ``state_out``.

        Args:
            state_out: the output state of the step.
            dt: the step's time step [s].
            contact_force: ``vec3`` array (or ``spatial_vector``, linear part used), one row per
                rigid contact slot: the force [N, world frame] that shape 0 exerted on shape 1
                during the step (the solver's own convention before conversion); ``None`` when
                the solver applied none.
            contact_point: where the solver applied it: ``"surface"`` (each body at its own
                surface point ``X point0 + margin0 n`` / ``X point1 - margin1 n``) or
                ``"midpoint"`` (both at the midpoint of the two).
            contact_wrench: optional ``spatial_vector`` per body: the total contact wrench (world,
                about the COM) the step applied, when the solver has it; else it is summed from
                ``contact_force``.
            kinds: fill only these of the requested kinds (default: every standard one), for a
                solver that writes some kinds itself.
        """
        obs = self.observables
        kinds = obs._kinds if kinds is None else obs._kinds & frozenset(kinds)
        solver = self.solver
        model = solver.model
        dev = solver.device
        nb = int(getattr(model, "body_count", 0) or 0)
        inv_dt = 1.0 / float(dt)
        from . import _observable_kernels as K

        if "body_qdd" in kinds and obs.body_qdd is not None and nb:
            wp.launch(K.body_qdd_kernel, dim=nb, inputs=[self.body_qd_in, state_out.body_qd, inv_dt],
                      outputs=[obs.body_qdd], device=dev)  # fmt: skip

        contacts = self.contacts
        nr = int(contacts.rigid_contact_max) if contacts is not None else 0
        want_cf = "contact_f" in kinds and obs.contact_f is not None
        want_pf = "body_parent_f" in kinds and obs.body_parent_f is not None and nb
        work = _work(obs, solver) if (want_pf or want_cf) else None
        have_wrench = contact_wrench is not None
        sum_wrench = want_pf and not have_wrench and contact_force is not None and nr > 0
        if sum_wrench:
            contact_wrench = work["contact_wrench"]
            contact_wrench.zero_()
        if want_cf or sum_wrench:
            rows = int(obs.contact_f.shape[0]) if want_cf else 0
            n = max(rows, nr)
            if n:
                midpoint = 1 if contact_point == "midpoint" else 0
                use_f = contact_force is not None and nr > 0
                wp.launch(
                    K.contact_f_kernel, dim=n,
                    inputs=[nr, int(use_f), midpoint, int(want_cf), int(sum_wrench),
                            contacts.rigid_contact_count if use_f else work["zero_count"],
                            contacts.rigid_contact_shape0 if use_f else work["empty_i"],
                            contacts.rigid_contact_shape1 if use_f else work["empty_i"],
                            contacts.rigid_contact_point0 if use_f else work["empty_v"],
                            contacts.rigid_contact_point1 if use_f else work["empty_v"],
                            contacts.rigid_contact_normal if use_f else work["empty_v"],
                            contacts.rigid_contact_margin0 if use_f else work["empty_f"],
                            contacts.rigid_contact_margin1 if use_f else work["empty_f"],
                            contact_force if use_f else work["empty_v"], model.shape_body if use_f else work["empty_i"],
                            self.body_q_in if (use_f and nb) else work["empty_t"],
                            model.body_com if (use_f and nb) else work["empty_v"]],
                    outputs=[obs.contact_f if want_cf else work["empty_s"],
                             contact_wrench if sum_wrench else work["empty_s"]],
                    device=dev,
                )  # fmt: skip

        if want_pf:
            tree = work["tree"]
            acc = work["parent_acc"]
            body_f = self.body_f
            wp.launch(
                K.parent_base_kernel, dim=nb,
                inputs=[self.body_q_in, self.body_qd_in, state_out.body_qd, inv_dt, model.body_mass,
                        model.body_inertia, model.body_com, model.body_world, model.gravity,
                        body_f if body_f is not None else work["empty_s"], int(body_f is not None),
                        contact_wrench if contact_wrench is not None else work["empty_s"],
                        int(contact_wrench is not None)],
                outputs=[acc], device=dev,
            )  # fmt: skip
            obs.body_parent_f.zero_()
            for start, count in tree.levels:
                wp.launch(K.parent_level_kernel, dim=count,
                          inputs=[start, tree.order, tree.parent_body, self.body_q_in, model.body_com, acc],
                          outputs=[obs.body_parent_f], device=dev)  # fmt: skip


@dataclasses.dataclass
class _Tree:
    """Bodies ordered deepest first along their parent joints, with per-level ranges."""

    order: wp.array
    parent_body: wp.array
    levels: list


def _body_tree(model, device) -> _Tree:
    """Host tables (built once per container): each body's parent joint (the first articulated
    joint with it as child, else the first joint), its parent body and its depth."""
    nb = int(model.body_count)
    nj = int(getattr(model, "joint_count", 0) or 0)
    parent_body = np.full(max(nb, 1), -1, np.int32)
    has_joint = np.zeros(max(nb, 1), bool)
    if nj:
        child = model.joint_child.numpy()
        parent = model.joint_parent.numpy()
        art = model.joint_articulation.numpy() if getattr(model, "joint_articulation", None) is not None else None
        order = sorted(range(nj), key=lambda j: (0 if art is None or art[j] >= 0 else 1, j))
        for j in order:
            c = int(child[j])
            if 0 <= c < nb and not has_joint[c]:
                has_joint[c] = True
                parent_body[c] = int(parent[j]) if int(parent[j]) != c else -1
    depth = np.full(nb, -1, np.int64)

    def depth_of(b: int) -> int:
        path = []
        while b >= 0 and depth[b] < 0 and b not in path:
            path.append(b)
            b = int(parent_body[b])
        d = depth[b] if b >= 0 and depth[b] >= 0 else -1
        if b >= 0 and b in path:  # a cycle: cut it here
            parent_body[b] = -1
            d = -1
        for x in reversed(path):
            d += 1
            depth[x] = d
        return int(depth[path[0]]) if path else int(depth[b])

    for b in range(nb):
        if depth[b] < 0:
            depth_of(b)
    members = [b for b in range(nb) if has_joint[b]]
    members.sort(key=lambda b: (-depth[b], b))
    levels = []
    i = 0
    while i < len(members):
        d = depth[members[i]]
        j = i
        while j < len(members) and depth[members[j]] == d:
            j += 1
        levels.append((i, j - i))
        i = j
    order = np.asarray(members if members else [0], np.int32)
    return _Tree(
        order=wp.array(order, dtype=wp.int32, device=device),
        parent_body=wp.array(parent_body, dtype=wp.int32, device=device),
        levels=levels,
    )


_STANDARD = frozenset({"body_qdd", "body_parent_f", "contact_f"})


def _work(observables: Observables, solver) -> dict:
    """The container's work arrays for the standard kinds (allocated with it, shared by its
    selections; allocated here only for a container made without :func:`allocate`)."""
    work = observables.__dict__.get("_work")
    if work is None:
        work = _new_work(solver)
        object.__setattr__(observables, "_work", work)
    return work


def _new_work(solver) -> dict:
    model = solver.model
    dev = solver.device
    nb = max(int(getattr(model, "body_count", 0) or 0), 1)
    return {
        "body_q": wp.zeros(nb, dtype=wp.transform, device=dev),
        "body_qd": wp.zeros(nb, dtype=wp.spatial_vector, device=dev),
        "contact_wrench": wp.zeros(nb, dtype=wp.spatial_vector, device=dev),
        "parent_acc": wp.zeros(nb, dtype=wp.spatial_vector, device=dev),
        "tree": _body_tree(model, dev) if int(getattr(model, "body_count", 0) or 0) else None,
        "zero_count": wp.zeros(1, dtype=wp.int32, device=dev),
        "empty_i": wp.zeros(0, dtype=wp.int32, device=dev),
        "empty_f": wp.zeros(0, dtype=wp.float32, device=dev),
        "empty_v": wp.zeros(0, dtype=wp.vec3, device=dev),
        "empty_t": wp.zeros(0, dtype=wp.transform, device=dev),
        "empty_s": wp.zeros(0, dtype=wp.spatial_vector, device=dev),
    }

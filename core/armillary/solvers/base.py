"""The solver contract: :class:`SolverBase`.

A solver advances a :class:`~armillary.State` by one time step. Solvers are
shipped by plugins (see :mod:`armillary.hookspecs`); third-party authors
subclass :class:`SolverBase`, declare ``capabilities`` and implement
:meth:`SolverBase.step`. See ``docs/solver_authors.md`` for the full contract
and :mod:`armillary.testing` for the conformance suite every solver runs.
"""

from __future__ import annotations

import functools
import inspect
import math
import os
import warnings
from typing import ClassVar

import numpy as np

from ..flags import ModelFlags, StateFlags
from ..sim.enums import JointType
from .capabilities import FEATURES, Coordinates, SolverCapabilities


class _ObservablesAttribute:
    """``SolverBase.Observables`` / ``SolverBase.ObservableKind``, imported from
    :mod:`.observables` on first access (it needs Warp; ``import armillary.solvers`` must not)."""

    def __init__(self, name: str):
        self.name = name

    def __get__(self, obj, owner=None):
        from . import observables

        return getattr(observables, self.name)


def _deprecated_update_contacts(fn):
    """Wrap a solver's own ``update_contacts`` so that calling it warns once per call (deprecated
    in favour of ``ObservableKind.CONTACT_F``); nested ``super()`` calls do not warn again."""

    @functools.wraps(fn)
    def update_contacts(self, *args, **kwargs):
        if self.__dict__.get("_in_update_contacts"):
            return fn(self, *args, **kwargs)
        from ..sim.exceptions import warn_deprecated

        warn_deprecated(
            f"{type(self).__name__}.update_contacts() is deprecated; request "
            "SolverBase.ObservableKind.CONTACT_F with solver.observables() and pass the container to "
            "step(..., observables=...) instead."
        )
        self.__dict__["_in_update_contacts"] = True
        try:
            return fn(self, *args, **kwargs)
        finally:
            self.__dict__["_in_update_contacts"] = False

    update_contacts._armillary_deprecated = True
    return update_contacts


def _debug_from_env() -> bool:
    return os.environ.get("ARMILLARY_DEBUG", "").strip().lower() not in ("", "0", "false", "no", "off")


_STEP_TEMPLATE = """
def step(self, state_in, state_out, control, contacts, dt{params}):
    guard = self._step_guard
    if guard is None:
        guard = self._make_step_guard()
    if warp_context.runtime.tape is not None and not self.capabilities.differentiable:
        not_differentiable(self, state_in)
    if guard.active:  # a nested super().step() of a wrapped subclass step
        return fn(self, state_in, state_out, control, contacts, dt{args})
    stamp = guard.stamp
    if type(dt) is not float or not 0.0 < dt < inf or getattr(state_in, "_armillary_checked", None) is not stamp \\
            or getattr(state_out, "_armillary_checked", None) is not stamp \\
            or (control is not None and getattr(control, "_armillary_checked", None) is not stamp) \\
            or (contacts is not None and getattr(contacts, "_armillary_checked", None) is not stamp):
        dt = slow_checks(self, guard, state_in, state_out, control, contacts, dt)
    guard.active = True
    try:
        fn(self, state_in, state_out, control, contacts, dt{args})
    finally:
        guard.active = False
    guard.steps += 1
    if guard.launch:
        guard.launch_guard(state_in, state_out, control)
    if self.debug:
        self.check_finite(state_out)
"""


def _slow_checks(solver, guard, state_in, state_out, control, contacts, dt):
    if type(dt) is not float or not 0.0 < dt < math.inf:
        from .step_guard import check_dt

        dt = check_dt(type(solver).__name__, dt)
    guard.check_inputs(state_in, state_out, control, contacts)
    return dt


def _not_differentiable(solver, state_in):
    """Raise when a non-differentiable solver steps under a recording tape that wants gradients."""
    model = getattr(solver, "model", None)
    if not (getattr(model, "requires_grad", False) or getattr(state_in, "requires_grad", False)):
        return
    from .step_guard import NotDifferentiableError

    raise NotDifferentiableError(
        f"{type(solver).__name__} is not differentiable (its capabilities do not declare "
        "differentiable=True): stepping it while a wp.Tape records on a model or state with "
        "requires_grad would give zero gradients. Step it outside the tape's `with` block, or use a "
        "solver whose `armillary features` row says differentiable"
    )


def _checked_step(fn):
    """Wrap a solver's own ``step`` with the checks of :mod:`.step_guard`: ``dt`` and the input
    arrays before it, the non-finite guard after it (and, in debug mode, the host check). A nested
    ``super().step`` call runs unchecked. The fast path (every object already checked, ``dt`` a
    positive float) costs a few attribute reads; a ``step`` with the contract's exact signature gets
    a wrapper without ``*args, **kwargs`` packing."""
    params = list(inspect.signature(fn).parameters.values())
    standard = [p.name for p in params[:6]] == ["self", "state_in", "state_out", "control", "contacts", "dt"]
    rest = params[6:]
    if standard and len(rest) == 1 and rest[0].name == "observables" and rest[0].kind is inspect.Parameter.KEYWORD_ONLY:
        code = _STEP_TEMPLATE.format(params=", *, observables=None", args=", observables=observables")
    elif standard and not rest:
        code = _STEP_TEMPLATE.format(params="", args="")
    else:
        code = _STEP_TEMPLATE.format(params=", *args, **kwargs", args=", *args, **kwargs")
    from ..launch import _warp_context

    namespace = {"fn": fn, "inf": math.inf, "slow_checks": _slow_checks, "warp_context": _warp_context,
                 "not_differentiable": _not_differentiable}  # fmt: skip
    # a fixed template: the wrapper's signature follows the solver's (tracebacks name the wrapper)
    exec(compile(code, f"<armillary step checks of {fn.__qualname__}>", "exec"), namespace)  # noqa: S102
    step = functools.wraps(fn)(namespace["step"])
    step._armillary_checked_step = True
    return step


class SolverBase:
    """Base class of every solver.

    Subclasses set the class attribute ``capabilities`` and implement
    :meth:`step`. The constructor checks the model against the declaration
    and raises ``ValueError`` naming the offending entity when the model uses
    a joint type or a feature the solver does not support.

    Args:
        model: the :class:`~armillary.Model` to simulate. The solver keeps a
            reference; edits to model arrays become visible to the solver after
            :meth:`notify_model_changed`.
        collision_pipeline: an optional :class:`~armillary.CollisionPipeline`
            the solver may run itself. Only solvers declaring
            ``collision_pipeline=True`` accept one.
    """

    capabilities: ClassVar[SolverCapabilities] = SolverCapabilities(coordinates=Coordinates.MAXIMAL)

    ObservableKind = _ObservablesAttribute("ObservableKind")
    """Names of the observable kinds (:class:`armillary.solvers.observables.ObservableKind`);
    solvers with their own kinds set a subclass here."""
    Observables = _ObservablesAttribute("Observables")
    """The observable container type (:class:`armillary.solvers.observables.Observables`);
    solvers with their own arrays set a ``@dataclass(eq=False)`` subclass here."""
    SUPPORTED_OBSERVABLES: ClassVar[frozenset[str]] = frozenset()
    """Observable kinds this solver class fills (see :attr:`supported_observables`)."""

    _step_guard = None  # the StepGuard of an instance, made on its first step

    fuses_finite_guard: ClassVar[bool] = False
    """``True`` when the solver's own kernels record non-finite outputs in :attr:`nonfinite_flags`
    (with :func:`armillary.solvers.step_guard.report_nonfinite`); otherwise every step ends with the
    generic guard launch over ``state_out``."""

    @property
    def finite_guard(self) -> bool:
        """Whether steps end with the generic non-finite guard launch (default ``True``; set
        ``False`` on an instance whose outputs another guard covers, e.g. an entry of a coupled
        solver). Solvers with ``fuses_finite_guard`` (a class attribute, or an instance attribute
        set in ``__init__``) write the flags from their own kernels either way."""
        return self.__dict__.get("_finite_guard", True)

    @finite_guard.setter
    def finite_guard(self, value: bool) -> None:
        self.__dict__["_finite_guard"] = bool(value)
        guard = self.__dict__.get("_step_guard")
        if guard is not None:
            self._refresh_finite_guard()

    @property
    def step_count(self) -> int:
        """Steps this solver has taken (counted by the step checks)."""
        guard = self.__dict__.get("_step_guard")
        return 0 if guard is None else guard.steps

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None and callable(step) and not getattr(step, "_armillary_checked_step", False):
            cls.step = _checked_step(step)
        fn = cls.__dict__.get("update_contacts")
        if fn is not None and callable(fn) and not getattr(fn, "_armillary_deprecated", False):
            cls.update_contacts = _deprecated_update_contacts(fn)

    def __init__(self, model, *, collision_pipeline=None):
        self.model = model
        self.device = getattr(model, "device", None)
        if collision_pipeline is not None and not self.capabilities.collision_pipeline:
            raise ValueError(
                f"{type(self).__name__} does not accept a collision pipeline "
                f"(its capabilities declare collision_pipeline=False)"
            )
        self.collision_pipeline = collision_pipeline
        self._last_model_flags = 0
        self.debug = _debug_from_env()
        self.check_model_supported(model)
        self.warn_unhonoured_features(model)

    # ------------------------------------------------------------------ checks
    @classmethod
    def check_model_supported(cls, model) -> None:
        """Raise ``ValueError`` when ``model`` needs something this solver lacks.

        Checks joint types (naming the first unsupported joint by label and
        index), particles, springs, triangles and tetrahedra against
        ``cls.capabilities``. Called by the constructor; runs once on the host.
        """
        caps = cls.capabilities
        name = cls.__name__
        joint_count = int(getattr(model, "joint_count", 0) or 0)
        if joint_count:
            types = np.asarray(model.joint_type.numpy())
            allowed = {int(t) for t in caps.joint_types}
            bad = [i for i, t in enumerate(types.tolist()) if t not in allowed]
            if bad:
                i = bad[0]
                labels = getattr(model, "joint_label", None) or []
                label = labels[i] if i < len(labels) else f"joint {i}"
                jt = JointType(int(types[i])).name
                raise ValueError(
                    f"{name} does not support joint type {jt} (joint {i}, {label!r}; "
                    f"{len(bad)} unsupported joint(s) in total); supported: "
                    f"{', '.join(sorted(t.name for t in caps.joint_types)) or 'none'}"
                )
        needs = {
            "particles": int(getattr(model, "particle_count", 0) or 0),
            "springs": int(getattr(model, "spring_count", 0) or 0),
            "cloth": int(getattr(model, "tri_count", 0) or 0),
            "soft_bodies": int(getattr(model, "tet_count", 0) or 0),
        }
        for feature, count in needs.items():
            if count and feature not in caps.features:
                raise ValueError(
                    f"{name} does not support {feature} (the model has {count}); "
                    f"its declared features: {', '.join(sorted(caps.features)) or 'none'}"
                )
        world_count = int(getattr(model, "world_count", 1) or 1)
        if world_count > 1 and "multiple_worlds" not in caps.features:
            raise ValueError(f"{name} does not support multiple worlds (the model has {world_count})")

    @classmethod
    def warn_unhonoured_features(cls, model) -> None:
        """Warn once per feature for imported values (``Model.authored_features``) this solver ignores.

        Each warning names the feature, its meaning and where the values were authored (the first
        three sources and how many more), e.g. a USD prim and attribute.
        """
        notes = getattr(model, "authored_features", ()) or ()
        by_feature: dict[str, list[str]] = {}
        for feature, source in notes:
            if feature not in cls.capabilities.features:
                by_feature.setdefault(feature, []).append(source)
        for feature, sources in by_feature.items():
            shown = ", ".join(sources[:3]) + (f" and {len(sources) - 3} more" if len(sources) > 3 else "")
            warnings.warn(
                f"{cls.__name__} does not honour {feature} ({FEATURES.get(feature, feature)}); "
                f"values authored at {shown} have no effect with this solver",
                UserWarning,
                stacklevel=3,
            )

    # --------------------------------------------------------------- contract
    def step(self, state_in, state_out, control, contacts, dt: float, *, observables=None) -> None:
        """Advance ``state_in`` by ``dt`` seconds and write the result into ``state_out``.

        ``state_in`` must be left untouched (except where a solver documents
        in-place use when ``state_in is state_out``). ``control`` and
        ``contacts`` may be ``None``. Must not synchronise with the host, so
        that it can be captured in a CUDA graph.

        ``observables`` (keyword only): a container from this solver's :meth:`observables`; the
        step fills its requested arrays. Implementations call :meth:`validate_observables` first
        (or :func:`armillary.solvers.observables.begin_step`, which also fills the standard kinds).
        """
        raise NotImplementedError(f"{type(self).__name__}.step is not implemented")

    # ------------------------------------------------------------ step checks
    debug: bool = False
    """Debug mode: every step ends with :meth:`check_finite` (a host sync), so the first step that
    produces NaN or infinity raises. Defaults to the environment variable ``ARMILLARY_DEBUG``."""

    def _make_step_guard(self):
        from .step_guard import StepGuard

        guard = self.__dict__["_step_guard"] = StepGuard(self)
        return guard

    def _refresh_finite_guard(self) -> None:
        """Call after changing ``fuses_finite_guard`` on an instance that may have stepped already."""
        guard = self.__dict__.get("_step_guard")
        if guard is not None:
            guard.launch = self.finite_guard and not self.fuses_finite_guard

    @property
    def nonfinite_flags(self):
        """``wp.array(dtype=int32, shape=(7,))``: the smallest index of a non-finite body (pose or
        twist), particle (position or velocity), joint coordinate and joint DOF of any step's
        ``state_out``, and of a non-finite ``control.joint_f``, ``state_in.body_f`` and
        ``state_in.particle_f`` entry, since the last :meth:`check_finite` /
        :meth:`reset_nonfinite`; ``2**31 - 1`` where none (slots in
        :mod:`armillary.solvers.step_guard`). Written on the device by every step, never
        synchronised."""
        guard = self.__dict__.get("_step_guard") or self._make_step_guard()
        return guard.flags

    def check_finite(self, state=None) -> None:
        """Raise :class:`~armillary.solvers.step_guard.NonFiniteStateError` when a step since the last
        check produced NaN or infinity, naming the first offending body, particle, joint coordinate or
        DOF (its label and, given the ``state``, its value) and this solver's step count; the flags are
        reset either way. Reads :attr:`nonfinite_flags` (a host sync): call it between steps, e.g. once
        per frame."""
        guard = self.__dict__.get("_step_guard") or self._make_step_guard()
        found = guard.first_nonfinite()
        if found is None:
            return
        guard.reset()
        raise guard.error(found[0], found[1], state, self.step_count)

    def reset_nonfinite(self) -> None:
        """Clear :attr:`nonfinite_flags` (no sync)."""
        guard = self.__dict__.get("_step_guard") or self._make_step_guard()
        guard.reset()

    # ------------------------------------------------------------ observables
    @property
    def supported_observables(self) -> frozenset[str]:
        """The observable kinds :meth:`observables` accepts on this instance.

        Defaults to the class's ``SUPPORTED_OBSERVABLES``; a solver narrows it per instance for a
        configuration that cannot produce a kind (e.g. a backend without contact forces).
        Applications query this property.
        """
        return frozenset(self.SUPPORTED_OBSERVABLES)

    def observables(self, kinds, *, contacts=None, requires_grad: bool | None = None):
        """Allocate a reusable container for the requested observable kinds.

        The container belongs to this solver: pass it as ``step(..., observables=container)`` on
        every step that needs the values; the step writes into its arrays. Allocate before graph
        capture.

        Args:
            kinds: a set (any iterable but a string) of kind names; :class:`ObservableKind`
                constants and literal strings are interchangeable. ``supported_observables``
                requests everything this solver fills; an empty set allocates nothing.
            contacts: the :class:`~armillary.Contacts` that size contact-indexed arrays (their
                capacities, not the live count); required when such a kind is requested (defaults
                to the solver's own ``contacts`` when it owns a buffer); must be on the solver's
                device. Ignored otherwise.
            requires_grad: whether the arrays require gradients; ``None`` follows the model.

        Returns:
            An instance of ``type(self).Observables`` with the requested arrays allocated (zeros)
            and every other observable field ``None``.

        Raises:
            TypeError: ``kinds`` is a string or holds something other than nonempty strings; the
                solver's ``Observables`` does not derive from :class:`SolverBase.Observables` or is
                not an ``eq=False`` dataclass; ``contacts`` is not a ``Contacts``.
            ValueError: a kind is not supported by this solver or has no (or no unique) field;
                contacts are required but missing, or on another device.
        """
        from . import observables as _obs

        return _obs.allocate(self, kinds, contacts=contacts, requires_grad=requires_grad)

    def validate_observables(self, observables, contacts=None) -> None:
        """Check a container before a step writes it; call at the start of :meth:`step`.

        ``None`` passes. Records ``contacts`` as the layout of the contact-indexed arrays
        (``Observables.contacts_for_kind``). No device work (safe during graph capture).

        Raises:
            TypeError: ``observables`` is not an ``Observables``, or ``contacts`` is not a
                ``Contacts`` when one is needed.
            ValueError: the container was allocated by another solver instance (or by none); a
                contact-indexed kind is requested and ``contacts`` is missing, on another device,
                or larger than the arrays were allocated for.
        """
        from . import observables as _obs

        _obs.validate(self, observables, contacts)

    def notify_model_changed(self, flags: ModelFlags | int) -> None:
        """Tell the solver which groups of model arrays changed (:class:`ModelFlags`).

        Custom integer bits (above ``ModelFlags.ALL``) are accepted and passed
        on to subclasses unchanged, so third-party solvers can define their
        own. Subclasses refresh their caches and call ``super()``.
        """
        try:
            value = int(flags)
        except (TypeError, ValueError):
            raise TypeError(f"notify_model_changed expects ModelFlags or an int, got {flags!r}") from None
        if value < 0:
            raise ValueError(f"notify_model_changed: flags must be non-negative, got {value}")
        self._last_model_flags = value

    def reset(self, state, world_mask=None, flags: StateFlags | int | None = None) -> None:
        """Re-initialise ``state`` from the model's initial values.

        Args:
            state: the state to reset in place.
            world_mask: optional ``wp.array(dtype=wp.bool)``: length
                ``model.world_count`` (global entities, world -1, are reset
                when any world is selected) or ``model.world_count + 1`` (the
                last entry selects the global entities, the reference engine's
                layout). Only entities of selected worlds are reset; a mask of
                another length, dtype or device raises ``ValueError``.
            flags: :class:`StateFlags` selecting which arrays to reset
                (default: ``StateFlags.ALL``).

        Subclasses with internal per-world caches (warm starts, histories)
        extend this and call ``super().reset(...)``.
        """
        from ..sim.reset import reset_state

        reset_state(self.model, state, world_mask=world_mask, flags=StateFlags.ALL if flags is None else flags)

    def update_contacts(self, contacts, state=None) -> None:
        """Fill ``contacts.force`` with the contact forces of the last step.

        Deprecated: request ``ObservableKind.CONTACT_F`` with :meth:`observables` and pass the
        container to :meth:`step` instead; a solver's own implementation warns with
        ``NewtonDeprecationWarning`` when called. Solvers that do not compute contact forces raise
        ``NotImplementedError``.
        """
        raise NotImplementedError(f"{type(self).__name__} does not report contact forces")

    @classmethod
    def register_custom_attributes(cls, builder) -> None:
        """Declare the custom attributes this solver reads on ``builder``.

        The default asks every installed plugin, through the
        ``armillary_register_custom_attributes`` hook, for attributes it
        contributes to this solver (``solver=cls.__name__``). Subclasses that
        own attributes register them and call ``super()``.
        """
        from .. import plugins

        plugins.get_registry().hook.armillary_register_custom_attributes(builder=builder, solver=cls.__name__)

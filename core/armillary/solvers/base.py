"""The solver contract: :class:`SolverBase`.

A solver advances a :class:`~armillary.State` by one time step. Solvers are
shipped by plugins (see :mod:`armillary.hookspecs`); third-party authors
subclass :class:`SolverBase`, declare ``capabilities`` and implement
:meth:`SolverBase.step`. See ``docs/solver_authors.md`` for the full contract
and :mod:`armillary.testing` for the conformance suite every solver runs.
"""

from __future__ import annotations

import warnings
from typing import ClassVar

import numpy as np

from ..flags import ModelFlags, StateFlags
from ..sim.enums import JointType
from .capabilities import FEATURES, Coordinates, SolverCapabilities


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
    def step(self, state_in, state_out, control, contacts, dt: float) -> None:
        """Advance ``state_in`` by ``dt`` seconds and write the result into ``state_out``.

        ``state_in`` must be left untouched (except where a solver documents
        in-place use when ``state_in is state_out``). ``control`` and
        ``contacts`` may be ``None``. Must not synchronise with the host, so
        that it can be captured in a CUDA graph.
        """
        raise NotImplementedError(f"{type(self).__name__}.step is not implemented")

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

        Solvers that do not compute contact forces raise ``NotImplementedError``.
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

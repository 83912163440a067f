"""Typed registries that plugins fill through the hooks in :mod:`armillary.hookspecs`.

Each registry maps a name to an :class:`Entry` that knows where the
implementation lives (``"package.module:Name"``) and which plugin registered
it. Loading is lazy: :meth:`Entry.load` imports the module on first use and
re-raises an import failure as ``ImportError`` naming the distribution, with
the original exception chained.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Callable

from .catalog import KNOWN, install_hint


class PluginError(Exception):
    """Base class of plugin-system errors."""


class PluginConflictError(PluginError, ImportError):
    """Two plugins registered the same name."""


@dataclasses.dataclass
class PluginRecord:
    """One plugin known to the registry (installed or registered at run time).

    Attributes:
        name: entry-point name, or the name given to ``register``.
        module: the plugin module's import name ('' for objects).
        distribution: distribution name ('' for run-time registrations).
        version: distribution version ('' when unknown).
        core_requirement: the core version range the plugin declares ('' when none).
        status: ``"loaded"``, ``"failed"`` (import or hook error),
            ``"incompatible"`` (core version outside the declared range) or
            ``"disabled"`` (not selected by ``ARMILLARY_PLUGINS``).
        error: the exception behind ``failed`` / ``incompatible``.
        provides: ``(kind, name)`` pairs the plugin registered.
    """

    name: str
    module: str = ""
    distribution: str = ""
    version: str = ""
    core_requirement: str = ""
    status: str = "loaded"
    error: BaseException | None = None
    provides: list = dataclasses.field(default_factory=list)

    @property
    def label(self) -> str:
        """``distribution version`` or the plugin name for run-time plugins."""
        if self.distribution:
            return f"{self.distribution} {self.version}".strip()
        return f"plugin {self.name!r} (registered at run time)"


@dataclasses.dataclass
class Entry:
    """A registered implementation: ``name`` -> ``target`` from ``plugin``.

    ``meta`` holds the kind-specific fields (importer suffixes, actuator kind,
    scene time step ...). ``conflicts`` lists the entries of further plugins
    that registered the same name; a conflicted entry cannot be loaded.
    """

    kind: str
    name: str
    target: Any
    plugin: PluginRecord
    summary: str
    meta: dict = dataclasses.field(default_factory=dict)
    conflicts: list = dataclasses.field(default_factory=list)
    _loaded: Any = dataclasses.field(default=None, repr=False)

    def owners(self) -> list[str]:
        """Labels of every plugin that registered this name (more than one: a conflict)."""
        return [e.plugin.label for e in [self, *self.conflicts]]

    def load(self):
        """Import and return the implementation (cached)."""
        if self.conflicts:
            owners = ", ".join(self.owners())
            raise PluginConflictError(
                f"{self.kind} {self.name!r} is registered by more than one plugin: {owners}. "
                f"Uninstall one of them (pip uninstall <distribution>) or unregister it at run time."
            )
        if self._loaded is not None:
            return self._loaded
        target = self.target
        if isinstance(target, str):
            module_name, _, attr = target.partition(":")
            try:
                obj = importlib.import_module(module_name)
                for part in attr.split(".") if attr else []:
                    obj = getattr(obj, part)
            except Exception as exc:
                raise ImportError(
                    f"{self.kind} {self.name!r} from {self.plugin.label} failed to load "
                    f"({target}): {type(exc).__name__}: {exc}"
                ) from exc
            target = obj
        self._loaded = target
        return target


class _Registry:
    """Common machinery: add / names / entries / resolve with good errors."""

    kind = "entry"

    def __init__(self, owner):
        self._owner = owner  # the PluginRegistry, for failure reports
        self._entries: dict[str, Entry] = {}
        self._current_plugin: PluginRecord | None = None

    # the plugin currently registering (set by the PluginRegistry around hook calls)
    def _set_plugin(self, record: PluginRecord | None):
        self._current_plugin = record

    def _add(self, name: str, target, summary: str, **meta) -> Entry:
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"{self.kind} name must be a Python identifier, got {name!r}")
        if not (isinstance(target, str) and ":" in target) and not callable(target):
            raise ValueError(
                f"{self.kind} {name!r}: target must be 'package.module:Name' or the object itself, got {target!r}"
            )
        if not summary or not str(summary).strip():
            raise ValueError(f"{self.kind} {name!r}: a one-line summary is required (it is the documentation)")
        plugin = self._current_plugin or PluginRecord(name="<direct>")
        entry = Entry(self.kind, name, target, plugin, str(summary).strip(), meta)
        existing = self._entries.get(name)
        if existing is not None:
            existing.conflicts.append(entry)
        else:
            self._entries[name] = entry
        plugin.provides.append((self.kind, name))
        return entry

    def names(self) -> list[str]:
        """Registered names (including conflicted ones), sorted."""
        self._owner.ensure_loaded()
        return sorted(self._entries)

    def entries(self) -> list[Entry]:
        """Registered entries, sorted by name."""
        self._owner.ensure_loaded()
        return [self._entries[n] for n in sorted(self._entries)]

    def get(self, name: str) -> Entry | None:
        """The entry registered under ``name``, or ``None``."""
        self._owner.ensure_loaded()
        return self._entries.get(name)

    def resolve(self, name: str):
        """Load ``name``: ImportError when known but not installed, AttributeError when unknown."""
        entry = self.get(name)
        if entry is not None:
            return entry.load()
        raise self._missing(name)

    def _missing(self, name: str) -> Exception:
        known = KNOWN.get(name)
        if known is not None and known.kind == self.kind:
            record = self._owner.plugin_for_distribution(known.distribution)
            if record is not None and record.status != "loaded":
                err = ImportError(
                    f"{self.kind} {name!r} is provided by {record.label}, whose plugin did not load "
                    f"({record.status}): {record.error}"
                )
                err.__cause__ = record.error
                return err
            if record is not None:
                return ImportError(
                    f"{self.kind} {name!r} is provided by {known.distribution}, which is installed "
                    f"({record.version}) but does not register {name!r} in this version"
                )
            return ImportError(f"{self.kind} {name!r} is not installed: {install_hint(known.distribution)}")
        available = ", ".join(self.names()) or "none"
        msg = f"unknown {self.kind} {name!r}; installed: {available}"
        broken = [p for p in self._owner.plugins() if p.status == "failed"]
        if broken:
            msg += "; plugins that failed to load: " + ", ".join(f"{p.label} ({p.error})" for p in broken)
        msg += unloaded_note(self._owner)
        err = AttributeError(msg)
        if len(broken) == 1:
            err.__cause__ = broken[0].error
        return err


def unloaded_note(owner) -> str:
    """``"; ..."`` naming the installed plugins not loaded because their core version range excludes
    this core (any of them may provide the missing name), with why and how to fix it; ``""`` if none."""
    incompatible = [p for p in owner.plugins() if p.status == "incompatible"]
    if not incompatible:
        return ""
    return (
        "; installed but not loaded (INCOMPATIBLE with this core, so what they provide is unknown): "
        + "; ".join(str(p.error) if p.error is not None else p.label for p in incompatible)
    )


class SolverRegistry(_Registry):
    """Solvers by class name (``"SolverXPBD"``); see ``armillary_register_solvers``."""

    kind = "solver"

    def add(self, name: str, target, *, summary: str) -> None:
        """Register solver ``name`` implemented by ``target`` (a SolverBase subclass)."""
        self._add(name, target, summary)

    def resolve(self, name: str):
        cls = super().resolve(name)
        from .solvers.base import SolverBase
        from .solvers.capabilities import SolverCapabilities

        if not (isinstance(cls, type) and issubclass(cls, SolverBase)):
            raise TypeError(f"solver {name!r} ({self.get(name).plugin.label}) is not a SolverBase subclass: {cls!r}")
        if not isinstance(cls.__dict__.get("capabilities", None), SolverCapabilities):
            raise TypeError(
                f"solver {name!r} ({self.get(name).plugin.label}) must declare its own "
                f"`capabilities = SolverCapabilities(...)` class attribute"
            )
        return cls


class ImporterRegistry(_Registry):
    """Importers by format name (``"mjcf"``); see ``armillary_register_importers``."""

    kind = "importer"

    def add(self, format: str, target, *, suffixes=(), method: str | None = None, summary: str,
            api: str | None = None) -> None:
        """Register importer ``format`` serving ``ModelBuilder.<method>`` (default ``add_<format>``).

        ``api`` optionally names a module (``"package.module"``) whose public names a core
        namespace module re-exports on first access (``armillary.usd.<name>`` for ``"usd"``).
        """
        suffixes = tuple(s.lower() if s.startswith(".") else "." + s.lower() for s in suffixes)
        if api is not None and (not isinstance(api, str) or not all(p.isidentifier() for p in api.split("."))):
            raise ValueError(f"importer {format!r}: api must be a dotted module name, got {api!r}")
        self._add(format, target, summary, suffixes=suffixes, method=method or f"add_{format}", api=api)

    def api(self, format: str, name: str):
        """The public helper ``name`` of importer ``format``'s ``api`` module.

        Raises ImportError when no installed plugin provides ``format`` (naming the distribution
        to install), AttributeError when the module has no such public name.
        """
        entry = self.get(format)
        if entry is None:
            raise self._missing(format)
        module_name = entry.meta.get("api")
        if module_name is None:
            raise AttributeError(f"importer {format!r} ({entry.plugin.label}) declares no api module, so it has no {name!r}")
        module = importlib.import_module(module_name)
        public = getattr(module, "__all__", None)
        if name.startswith("_") or (public is not None and name not in public) or not hasattr(module, name):
            available = ", ".join(sorted(public if public is not None else (n for n in dir(module) if not n.startswith("_"))))
            raise AttributeError(f"armillary.{format} has no attribute {name!r} ({entry.plugin.label}); available: {available}")
        return getattr(module, name)

    def api_names(self, format: str) -> list[str]:
        """The public names of importer ``format``'s api module (empty when it declares none)."""
        entry = self.get(format)
        module_name = entry.meta.get("api") if entry is not None else None
        if module_name is None:
            return []
        module = importlib.import_module(module_name)
        return sorted(getattr(module, "__all__", [n for n in dir(module) if not n.startswith("_")]))

    def for_method(self, method: str) -> Entry | None:
        """The importer serving builder method ``method`` (e.g. ``"add_mjcf"``)."""
        for entry in self.entries():
            if entry.meta["method"] == method:
                return entry
        return None

    def for_path(self, path) -> Entry | None:
        """The importer whose suffixes match ``path``'s (case-insensitive)."""
        name = str(path).lower()
        for entry in self.entries():
            if any(name.endswith(s) for s in entry.meta["suffixes"]):
                return entry
        return None


ACTUATOR_KINDS = ("actuator", "controller", "delay", "clamping")


class ActuatorRegistry(_Registry):
    """Actuator components by class name; see ``armillary_register_actuators``."""

    kind = "actuator component"

    def add(self, name: str, target, *, kind: str, summary: str) -> None:
        """Register component ``name`` of ``kind`` (one of :data:`ACTUATOR_KINDS`)."""
        if kind not in ACTUATOR_KINDS:
            raise ValueError(f"actuator component {name!r}: kind {kind!r} is not one of {ACTUATOR_KINDS}")
        self._add(name, target, summary, component_kind=kind)


class SceneRegistry(_Registry):
    """Demo scenes by name; see ``armillary_register_scenes``."""

    kind = "scene"

    def add(self, name: str, target: str | Callable, *, summary: str, dt: float = 1.0 / 600.0,
            frames: int = 300, substeps: int = 10) -> None:
        """Register scene ``name``: ``target(world_count=1) -> ModelBuilder``.

        ``dt`` is the solver time step in seconds; a frame is ``substeps``
        steps; ``frames`` is the default run length.
        """
        if not dt > 0:
            raise ValueError(f"scene {name!r}: dt must be positive, got {dt}")
        self._add(name, target, summary, dt=float(dt), frames=int(frames), substeps=int(substeps))

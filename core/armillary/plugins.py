"""Plugin discovery and the process-wide :class:`PluginRegistry`.

Plugins are found through the entry-point group ``armillary`` the first time
armillary needs them (never at ``import armillary``). Environment variables:

``ARMILLARY_DISABLE_PLUGIN_AUTOLOAD``
    when set to a non-empty value other than ``0``, installed plugins are not
    loaded from entry points (core's built-in plugin still is); register
    plugins at run time instead.
``ARMILLARY_PLUGINS``
    a comma-separated list of entry-point names: only these installed plugins
    are loaded (the others are listed as ``disabled``).

A plugin that fails to import, whose hook raises, or that requires another
core version is recorded with its error and skipped: it never breaks
``import armillary`` or another plugin; using what it provides re-raises the
error, chained.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import os
import re
import threading

import pluggy

from . import hookspecs
from ._version import __version__ as CORE_VERSION
from .registry import (  # noqa: F401  (PluginError, PluginConflictError re-exported)
    ActuatorRegistry,
    PluginConflictError,
    PluginError,
    ImporterRegistry,
    PluginRecord,
    SceneRegistry,
    SolverRegistry,
)

_REGISTRATION_HOOKS = (
    ("armillary_register_solvers", "solvers"),
    ("armillary_register_importers", "importers"),
    ("armillary_register_actuators", "actuators"),
    ("armillary_register_scenes", "scenes"),
)


class PluginVersionError(ImportError):
    """A plugin requires a core version range that excludes this core."""


# ----------------------------------------------------------------- versions
def _version_tuple(text: str) -> tuple:
    parts = []
    for piece in re.split(r"[.+]", text.strip()):
        m = re.match(r"\d+", piece)
        if not m:
            break
        parts.append(int(m.group()))
    return tuple(parts)


def _cmp(a: tuple, b: tuple) -> int:
    n = max(len(a), len(b))
    a, b = a + (0,) * (n - len(a)), b + (0,) * (n - len(b))
    return (a > b) - (a < b)


def version_satisfies(version: str, specifier: str) -> bool:
    """True when ``version`` satisfies a PEP 440-style ``specifier`` such as ``">=0.1,<0.2"``.

    Supports the operators ``>= <= > < == != ~=`` and ``==X.*`` on numeric
    release segments (pre-release tags are ignored), which is what plugin
    distributions use to declare the core range they work with.
    """
    v = _version_tuple(version)
    for clause in filter(None, (c.strip() for c in specifier.split(","))):
        m = re.fullmatch(r"(~=|==|!=|<=|>=|<|>)\s*([0-9][0-9A-Za-z.*+-]*)", clause)
        if not m:
            raise ValueError(f"unsupported version specifier {clause!r} in {specifier!r}")
        op, target = m.groups()
        if target.endswith(".*"):
            prefix = _version_tuple(target[:-2])
            ok = v[: len(prefix)] == prefix
            ok = ok if op == "==" else not ok
        else:
            t = _version_tuple(target)
            c = _cmp(v, t)
            if op == "~=":
                upper = t[:-1]
                ok = c >= 0 and v[: len(upper)] == upper
            else:
                ok = {"==": c == 0, "!=": c != 0, "<=": c <= 0, ">=": c >= 0, "<": c < 0, ">": c > 0}[op]
        if not ok:
            return False
    return True


def _core_requirement(dist) -> str:
    """The specifier of the ``armillary`` requirement in ``dist``'s metadata ('' when none)."""
    for req in dist.requires or []:
        body = req.split(";", 1)[0].strip()
        m = re.match(r"^armillary(?![A-Za-z0-9_.-])\s*(?:\[[^\]]*\])?\s*\(?([^)]*)\)?$", body)
        if m:
            return m.group(1).strip()
    return ""


def _autoload_disabled() -> bool:
    value = os.environ.get("ARMILLARY_DISABLE_PLUGIN_AUTOLOAD", "")
    return value.strip() not in ("", "0")


def _selected_plugins() -> set[str] | None:
    value = os.environ.get("ARMILLARY_PLUGINS")
    if value is None:
        return None
    return {v.strip() for v in value.split(",") if v.strip()}


# ----------------------------------------------------------------- registry
class PluginRegistry:
    """Every plugin armillary knows of, and what they registered.

    Attributes:
        solvers, importers, actuators, scenes: the typed registries.
        hook: the pluggy hook caller (``registry.hook.armillary_register_custom_attributes(...)``).

    Args:
        autoload: load installed plugins from entry points (subject to the
            environment variables above). ``False`` gives an empty registry
            with only core's built-in plugin, for tests and notebooks.
    """

    def __init__(self, autoload: bool = True):
        self._pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self._pm.add_hookspecs(hookspecs)
        self.autoload = autoload
        self.solvers = SolverRegistry(self)
        self.importers = ImporterRegistry(self)
        self.actuators = ActuatorRegistry(self)
        self.scenes = SceneRegistry(self)
        self._records: dict[str, PluginRecord] = {}
        self._loaded = False
        self._lock = threading.RLock()

    @property
    def hook(self):
        """pluggy's hook relay; loads plugins first."""
        self.ensure_loaded()
        return self._pm.hook

    # -------------------------------------------------------------- loading
    def ensure_loaded(self) -> None:
        """Discover and register plugins once (idempotent, thread-safe)."""
        if self._loaded:
            return
        with self._lock:
            if self._loaded:
                return
            self._loaded = True  # set first: hooks may resolve names while registering
            from . import _builtin

            self._add_plugin(_builtin, PluginRecord(name="builtin", module=_builtin.__name__,
                                                    distribution="armillary", version=CORE_VERSION))
            if self.autoload and not _autoload_disabled():
                self._load_entry_points()

    def _load_entry_points(self) -> None:
        selected = _selected_plugins()
        for ep in sorted(importlib.metadata.entry_points(group=hookspecs.ENTRY_POINT_GROUP), key=lambda e: e.name):
            dist = getattr(ep, "dist", None)
            record = PluginRecord(
                name=ep.name,
                module=ep.value.split(":")[0],
                distribution=dist.metadata["Name"] if dist else "",
                version=dist.version if dist else "",
                core_requirement=_core_requirement(dist) if dist else "",
            )
            if ep.name in self._records:
                other = self._records[ep.name]
                record.status, record.error = "failed", PluginError(
                    f"entry point name {ep.name!r} is used by both {other.label} and {record.label}"
                )
                self._records[f"{ep.name}@{record.distribution}"] = record
                continue
            if selected is not None and ep.name not in selected:
                record.status = "disabled"
                self._records[ep.name] = record
                continue
            if record.core_requirement and not version_satisfies(CORE_VERSION, record.core_requirement):
                record.status = "incompatible"
                record.error = PluginVersionError(
                    f"{record.label} requires armillary{record.core_requirement} but this core is "
                    f"{CORE_VERSION}: install a matching version (pip install "
                    f"'{record.distribution}' 'armillary{record.core_requirement}') or upgrade the plugin"
                )
                self._records[ep.name] = record
                continue
            try:
                module = ep.load()
            except Exception as exc:  # a broken plugin must not break the others
                record.status, record.error = "failed", exc
                self._records[ep.name] = record
                continue
            self._add_plugin(module, record)

    def _add_plugin(self, plugin, record: PluginRecord) -> None:
        try:
            self._pm.register(plugin, name=record.name)
        except Exception as exc:
            record.status, record.error = "failed", exc
            self._records[record.name] = record
            return
        self._records[record.name] = record
        self._run_registration_hooks(plugin, record)

    def _run_registration_hooks(self, plugin, record: PluginRecord) -> None:
        for hook_name, attr in _REGISTRATION_HOOKS:
            impls = [i for i in getattr(self._pm.hook, hook_name).get_hookimpls() if i.plugin is plugin]
            target = getattr(self, attr)
            for impl in impls:
                target._set_plugin(record)
                try:
                    impl.function(registry=target)
                except Exception as exc:
                    record.status = "failed"
                    record.error = exc
                    self._forget(record)
                    self._pm.unregister(plugin)
                    return
                finally:
                    target._set_plugin(None)

    def _forget(self, record: PluginRecord) -> None:
        """Drop every entry ``record`` registered (after one of its hooks failed)."""
        for reg in (self.solvers, self.importers, self.actuators, self.scenes):
            for name, entry in list(reg._entries.items()):
                if entry.plugin is record:
                    if entry.conflicts:
                        successor = entry.conflicts.pop(0)
                        successor.conflicts = entry.conflicts
                        reg._entries[name] = successor
                    else:
                        del reg._entries[name]
                else:
                    entry.conflicts = [c for c in entry.conflicts if c.plugin is not record]
        record.provides.clear()

    # ----------------------------------------------------------- run time
    def register(self, plugin, name: str | None = None, *, distribution: str = "", version: str = "",
                 core_requirement: str = "") -> PluginRecord:
        """Register a plugin object (a module, class or instance with hookimpls) at run time.

        Its registration hooks run immediately. Raises ``ValueError`` when the
        name is taken and :class:`PluginVersionError` when ``core_requirement``
        excludes this core. Returns the plugin's record (check ``status`` and
        ``error`` to see whether its hooks succeeded).
        """
        self.ensure_loaded()
        name = name or getattr(plugin, "__name__", None) or type(plugin).__name__
        if name in self._records:
            raise ValueError(f"a plugin named {name!r} is already registered ({self._records[name].label})")
        if core_requirement and not version_satisfies(CORE_VERSION, core_requirement):
            raise PluginVersionError(
                f"plugin {name!r} requires armillary{core_requirement}, this core is {CORE_VERSION}"
            )
        record = PluginRecord(name=name, module=getattr(plugin, "__name__", ""), distribution=distribution,
                              version=version, core_requirement=core_requirement)
        self._add_plugin(plugin, record)
        return record

    def unregister(self, name: str) -> None:
        """Remove a plugin and everything it registered."""
        self.ensure_loaded()
        record = self._records.pop(name, None)
        if record is None:
            raise ValueError(f"no plugin named {name!r}; registered: {', '.join(sorted(self._records))}")
        self._forget(record)
        plugin = self._pm.get_plugin(name)
        if plugin is not None:
            self._pm.unregister(plugin)

    # ------------------------------------------------------------- queries
    def plugins(self) -> list[PluginRecord]:
        """Every plugin record (loaded, failed, incompatible, disabled), by name."""
        self.ensure_loaded()
        return [self._records[k] for k in sorted(self._records)]

    def plugin_for_distribution(self, distribution: str) -> PluginRecord | None:
        """The record of an installed plugin distribution, or ``None``."""
        self.ensure_loaded()
        for record in self._records.values():
            if record.distribution == distribution:
                return record
        return None


_registry: PluginRegistry | None = None
_registry_lock = threading.Lock()


def get_registry() -> PluginRegistry:
    """The process-wide registry (created on first call; plugins load on first use)."""
    global _registry
    if _registry is None:
        with _registry_lock:
            if _registry is None:
                _registry = PluginRegistry()
    return _registry


@contextlib.contextmanager
def isolated_registry(autoload: bool = False):
    """Swap in a fresh registry for the duration of a ``with`` block (tests, notebooks).

    With ``autoload=False`` it contains only core's built-in plugin; register
    fakes with ``registry.register(...)``. The previous registry is restored
    on exit.
    """
    global _registry
    previous = _registry
    _registry = PluginRegistry(autoload=autoload)
    try:
        yield _registry
    finally:
        _registry = previous


# ------------------------------------------------------------- convenience
def import_into(builder, format: str, source, **kwargs):
    """Run importer ``format`` on ``builder`` (serves ``ModelBuilder.add_<format>``)."""
    fn = get_registry().importers.resolve(format)
    return fn(builder, source, **kwargs)


def importer_method(builder, method: str):
    """Bound importer for ``ModelBuilder.<method>`` (``add_<format>``); AttributeError if none."""
    registry = get_registry()
    entry = registry.importers.for_method(method)
    if entry is None:
        methods = ", ".join(e.meta["method"] for e in registry.importers.entries()) or "none"
        raise AttributeError(f"'ModelBuilder' has no attribute {method!r} (importer methods installed: {methods})")
    fn = entry.load()

    def bound(source, **kwargs):
        return fn(builder, source, **kwargs)

    bound.__name__ = method
    bound.__doc__ = getattr(fn, "__doc__", None)
    return bound


def register_custom_attributes(builder, solver: str | None = None) -> None:
    """Ask every plugin to declare its custom attributes on ``builder`` (see the hook)."""
    get_registry().hook.armillary_register_custom_attributes(builder=builder, solver=solver)

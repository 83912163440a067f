"""Every extension point of armillary, in one place.

A plugin is a module (or any object) with functions decorated by
:data:`armillary.hookimpl` whose names are the hooks below. Installed plugins
are found through the entry-point group ``armillary``::

    # a plugin distribution's pyproject.toml
    [project.entry-points.armillary]
    my_solver = "my_solver_package.plugin"

and loaded lazily, the first time armillary needs to know what is installed
(never at ``import armillary``). Plugins can also be registered at run time,
without a distribution, with ``armillary.plugins.get_registry().register(obj)``.

Core's own contributions (the built-in demo scenes) register through exactly
these hooks too (:mod:`armillary._builtin`).

Registration hooks are handed a typed registry object and record *where* to
find an implementation (``"package.module:Name"``); the implementation's module
is imported only when a user asks for it. Keep plugin modules free of heavy
imports (mujoco, pxr, torch, even warp kernels): they are imported for
``armillary plugins`` and for name resolution.
"""

from __future__ import annotations

import pluggy

PROJECT_NAME = "armillary"
ENTRY_POINT_GROUP = "armillary"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
"""Decorator marking a plugin function as a hook implementation."""


@hookspec
def armillary_register_solvers(registry):
    """Register the solvers a plugin provides.

    Called: once per plugin, the first time armillary resolves a solver name
    (``armillary.solvers.SolverX``), lists plugins, or builds the feature
    table; for a plugin registered at run time, immediately.

    Args:
        registry (armillary.registry.SolverRegistry): call
            ``registry.add(name, target, summary=...)`` once per solver.
            ``target`` is ``"package.module:ClassName"`` (imported on first
            use) or the class itself. The class must subclass
            :class:`armillary.solvers.SolverBase` and declare ``capabilities``
            (coordinates, joint types, features, determinism, whether it takes
            a collision pipeline): the README's feature table and the early
            model checks are generated from that declaration.

    Returns:
        None. Registering a name another plugin already registered is not an
        override: both stay listed and resolving the name raises
        :class:`armillary.registry.PluginConflictError` naming both
        distributions.

    Implemented by: solver plugins (ours and third-party).

    Example::

        @armillary.hookimpl
        def armillary_register_solvers(registry):
            registry.add("SolverMine", "my_pkg.solver:SolverMine",
                         summary="semi-implicit Euler for free rigid bodies")
    """


@hookspec
def armillary_register_importers(registry):
    """Register file-format importers that fill a :class:`~armillary.ModelBuilder`.

    Called: once per plugin, the first time an importer is needed
    (``ModelBuilder.add_mjcf(...)``, ``armillary run model.xml``) or listed.

    Args:
        registry (armillary.registry.ImporterRegistry): call
            ``registry.add(format, target, suffixes=(...), method="add_<format>",
            summary=...)``. ``target`` names a function
            ``fn(builder, source, **kwargs)`` that adds the file's content to
            ``builder`` and returns what ``ModelBuilder.add_<format>`` returns.
            ``suffixes`` (lower case, with the dot) let ``armillary run`` pick
            the importer for a file. ``api="package.module"`` (optional)
            names a module of public helpers that core re-exports as
            ``armillary.<format>.<name>`` on first access (today core has
            such a namespace for ``usd``: ``armillary.usd.SchemaResolverMjc``).

    Returns:
        None. The builder method ``ModelBuilder.add_<format>`` then serves the
        importer; when no plugin provides it, calling the method raises
        ``ImportError`` naming the distribution to install.

    Implemented by: importer plugins (MJCF, URDF, USD, third-party formats).

    Example::

        @armillary.hookimpl
        def armillary_register_importers(registry):
            registry.add("mjcf", "armillary_importer_mjcf.importer:add_mjcf",
                         suffixes=(".xml", ".mjcf"), method="add_mjcf",
                         summary="MuJoCo MJCF models")
    """


@hookspec
def armillary_register_actuators(registry):
    """Register actuator components: actuators, controllers, delays and clampings.

    Called: once per plugin, the first time ``armillary.actuators.<Name>`` is
    resolved or components are listed.

    Args:
        registry (armillary.registry.ActuatorRegistry): call
            ``registry.add(name, target, kind=..., summary=...)`` where ``kind``
            is one of ``"actuator"`` (drives a set of DOFs), ``"controller"``
            (the control law), ``"delay"`` (delays command inputs) or
            ``"clamping"`` (limits the effort); see ``docs/actuators.md``.

    Returns:
        None. The component is then available as ``armillary.actuators.<name>``.

    Implemented by: the actuators plugin and third-party component libraries.

    Example::

        @armillary.hookimpl
        def armillary_register_actuators(registry):
            registry.add("ControllerPD", "my_pkg.pd:ControllerPD",
                         kind="controller", summary="PD law on joint targets")
    """


@hookspec
def armillary_register_custom_attributes(builder, solver):
    """Declare custom attributes on a :class:`~armillary.ModelBuilder`.

    Called: by ``SolverX.register_custom_attributes(builder)`` with
    ``solver="SolverX"`` (every solver's default implementation asks the
    plugins), and by ``armillary.plugins.register_custom_attributes(builder)``
    with ``solver=None`` (importers call this so that plugin attributes are
    parsed from files).

    Args:
        builder (armillary.ModelBuilder): call
            ``builder.add_custom_attribute(ModelBuilder.CustomAttribute(...))``
            (and ``add_custom_frequency``) for the attributes the plugin reads.
            Skip attributes the builder already has (plugins may be asked
            twice).
        solver (str | None): the solver class name the attributes are wanted
            for, or ``None`` for "every installed plugin's attributes".
            Ignore the call when ``solver`` names a solver you do not serve.

    Returns:
        None.

    Implemented by: solver plugins with model parameters of their own (e.g.
    the MuJoCo plugin's ``mujoco:condim``), coupling and actuator plugins.

    Example::

        @armillary.hookimpl
        def armillary_register_custom_attributes(builder, solver):
            if solver not in (None, "SolverMine"):
                return
            builder.add_custom_attribute(ModelBuilder.CustomAttribute(
                name="stiction", namespace="mine", frequency=Model.AttributeFrequency.SHAPE,
                dtype=float, default=0.0))
    """


@hookspec
def armillary_register_scenes(registry):
    """Register named demo scenes for ``armillary run`` (no model file needed).

    Called: once per plugin, the first time ``armillary run`` looks a scene up
    or ``armillary plugins`` lists them.

    Args:
        registry (armillary.registry.SceneRegistry): call
            ``registry.add(name, target, summary=..., dt=..., frames=...)``.
            ``target`` names a function ``fn(world_count=1) -> ModelBuilder``
            returning an un-finalized builder with the scene.

    Returns:
        None. ``armillary run --scene <name>`` then simulates it with any
        installed solver that supports it.

    Implemented by: core (the built-in scenes in :mod:`armillary._builtin`)
    and any plugin that wants to ship demos or benchmark scenes.

    Example::

        @armillary.hookimpl
        def armillary_register_scenes(registry):
            registry.add("box_stack", "my_pkg.scenes:box_stack",
                         summary="ten boxes stacked on the ground", dt=1/600)
    """

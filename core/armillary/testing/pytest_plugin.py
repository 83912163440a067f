"""armillary's pytest plugin (entry point ``pytest11: armillary``).

Loaded by pytest in every environment where armillary is installed, so it
must stay light: it imports neither Warp nor the conformance kit.

Provides:

* the ``armillary_registry`` fixture: a fresh plugin registry containing only
  core's built-in plugin (no installed plugins are loaded), active for the
  duration of the test; register fakes with ``armillary_registry.register(obj)``;
* the ``conformance`` marker, set on every test of
  :class:`armillary.testing.SolverConformance` so a suite can select them with
  ``-m conformance``.
"""

from __future__ import annotations

import pytest


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "conformance: a check of armillary's solver conformance kit (armillary.testing)"
    )


@pytest.fixture
def armillary_registry():
    """An isolated :class:`armillary.plugins.PluginRegistry` for the test.

    ``armillary.solvers.<Name>`` resolves through it while the test runs; the
    process-wide registry is restored afterwards.
    """
    from armillary import plugins

    isolated = getattr(plugins, "isolated_registry", None)
    if isolated is not None:
        with isolated(autoload=False) as registry:
            yield registry
        return
    # fallback for cores without isolated_registry: a private registry object
    previous = getattr(plugins, "_registry", None)
    plugins._registry = plugins.PluginRegistry(autoload=False)
    try:
        yield plugins._registry
    finally:
        plugins._registry = previous

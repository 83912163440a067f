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
    from armillary.plugins import isolated_registry

    with isolated_registry(autoload=False) as registry:
        yield registry

"""Core tests never see whatever plugins happen to be installed.

Every test runs inside ``armillary.plugins.isolated_registry(autoload=False)``
(only core's built-in plugin); tests that need a plugin register a fake one,
or build a registry from fake distributions on ``sys.path``.
"""

import pytest


@pytest.fixture(autouse=True)
def _isolated_plugin_registry():
    from armillary.plugins import isolated_registry

    with isolated_registry(autoload=False) as registry:
        yield registry


@pytest.fixture
def registry(_isolated_plugin_registry):
    """The isolated plugin registry of this test."""
    return _isolated_plugin_registry

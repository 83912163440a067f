"""Core tests never see whatever plugins happen to be installed.

Every test runs inside an isolated plugin registry (the ``armillary_registry``
fixture of armillary's pytest plugin: only core's built-in plugin); tests that
need a plugin register a fake one, or build a registry from fake
distributions on ``sys.path``.
"""

import pytest


@pytest.fixture(autouse=True)
def registry(armillary_registry):
    """The isolated plugin registry of this test (active for every core test)."""
    return armillary_registry

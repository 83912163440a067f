"""Sweeps run the installed solver plugins (like a user's ``armillary sweep``): these tests override the
core tests' isolated registry with the process-wide one."""

import pytest


@pytest.fixture(autouse=True)
def registry():
    """The process-wide plugin registry (every installed plugin), not an isolated one."""
    from armillary.plugins import get_registry

    return get_registry()

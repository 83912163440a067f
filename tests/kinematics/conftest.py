"""Shared fixtures of the kinematics / dynamics tests (CPU device)."""

from __future__ import annotations

import pytest
import warp as wp

wp.config.log_level = wp.LOG_WARNING
wp.config.quiet = True


@pytest.fixture(scope="session", autouse=True)
def _warp_init():
    wp.init()
    yield


@pytest.fixture
def device():
    return "cpu"

import os
import sys

import pytest
import warp as wp

# the tests share _urdf_helpers.py (pytest runs with --import-mode=importlib, which adds no path)
_here = os.path.dirname(os.path.abspath(__file__))
if _here not in sys.path:
    sys.path.insert(0, _here)

wp.config.log_level = wp.LOG_WARNING


@pytest.fixture(scope="session", autouse=True)
def _warp_init():
    wp.init()
    yield

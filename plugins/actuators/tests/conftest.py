import os
import sys

# the tests share _actuator_helpers.py (pytest runs with --import-mode=importlib, which adds no path)
_here = os.path.dirname(os.path.abspath(__file__))
if _here not in sys.path:
    sys.path.insert(0, _here)

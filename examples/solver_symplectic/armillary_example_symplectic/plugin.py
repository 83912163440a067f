"""The plugin module named by this distribution's ``armillary`` entry point.

It only registers names and where they live; it imports nothing heavy, so
``armillary plugins`` and name resolution stay fast.
"""

from __future__ import annotations

try:
    from armillary import hookimpl
except ImportError:  # very early cores: the marker is plain pluggy
    import pluggy

    hookimpl = pluggy.HookimplMarker("armillary")


@hookimpl
def armillary_register_solvers(registry):
    registry.add(
        "SolverSymplecticEuler",
        "armillary_example_symplectic.solver:SolverSymplecticEuler",
        summary="example plugin: semi-implicit Euler for free bodies and particles with penalty contacts",
    )

"""The armillary-coupling distribution is discoverable through the ``armillary`` entry points."""

import importlib.metadata


def test_entry_point_is_declared():
    eps = [ep for ep in importlib.metadata.entry_points(group="armillary") if ep.name == "coupling"]
    assert len(eps) == 1
    assert eps[0].value == "armillary_coupling.plugin"
    assert eps[0].dist.metadata["Name"] == "armillary-coupling"


def test_plugin_module_is_light():
    """Importing the plugin module (what discovery does) pulls in no heavy dependency."""
    import subprocess
    import sys

    code = (
        "import sys, armillary_coupling.plugin; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('mujoco', 'mujoco_warp', 'pxr', 'torch', 'trimesh')]; "
        "print(bad); raise SystemExit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_registers_solver_coupled():
    from armillary.plugins import get_registry

    entry = get_registry().solvers.get("SolverCoupled")
    assert entry.plugin.distribution == "armillary-coupling"
    cls = get_registry().solvers.resolve("SolverCoupled")
    assert cls.__module__ == "armillary_coupling.solver_coupled"
    import armillary_coupling

    assert armillary_coupling.SolverCoupled is cls
    from armillary.sim.model_view import ModelView

    assert armillary_coupling.ModelView is ModelView  # lives in core; the plugin's import path re-exports it

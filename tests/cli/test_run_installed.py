"""``armillary run`` with the installed solvers: no warning the user did not cause, composite solvers
left out with how to run them, plugins disabled by ARMILLARY_PLUGINS named."""

import os
import subprocess
import sys
import warnings

import pytest

from armillary.cli import main
from armillary.runner import RunOptions, run, runnable_solvers
from armillary.testing.assets import shared_assets_dir


def _run_quietly(options):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = run(options)
    return summary, [str(w.message) for w in caught]


def test_mujoco_on_the_demo_scene_warns_nothing():
    """SolverMuJoCo detects its own contacts: the runner passes contacts=None, so no "contacts passed to
    step() are ignored" warning (nor any other) reaches the user."""
    summary, caught = _run_quietly(RunOptions(solver="SolverMuJoCo", frames=3, out=None, progress=False))
    assert summary.solver == "SolverMuJoCo"
    assert caught == []


def test_mujoco_on_a_model_file_warns_only_about_the_model():
    path = shared_assets_dir() / "mjcf" / "cartpole" / "cartpole.xml"
    summary, caught = _run_quietly(RunOptions(model_file=str(path), solver="SolverMuJoCo", frames=3, out=None,
                                              progress=False))
    assert [m for m in caught if not m.startswith("MJCF import")] == []
    assert summary.warnings == []


def test_composite_solvers_are_not_offered_by_the_command_line(capsys):
    runnable, composite = runnable_solvers(__import__("armillary.plugins").plugins.get_registry())
    assert {"SolverCoupled", "SolverCoupledADMM", "SolverCoupledProxy"} <= set(composite)
    assert "SolverXPBD" in runnable and not set(runnable) & set(composite)
    for name in ("SolverCoupled", "SolverCoupledADMM", "SolverCoupledProxy"):
        assert main(["run", "--solver", name]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "TypeError" not in err
        assert f"solver {name!r} (armillary-coupling" in err and "is a composite solver" in err
        assert os.path.join("plugins", "coupling", "README.md") in err


@pytest.mark.parametrize("env_value", ["symplectic", "symplectic,solver_featherstone"])
def test_solver_disabled_by_armillary_plugins(env_value, tmp_path):
    env = {**os.environ, "ARMILLARY_PLUGINS": env_value}
    result = subprocess.run([sys.executable, "-m", "armillary", "run", "--solver", "SolverXPBD", "--frames", "1"],
                            capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert f"whose plugin 'solver_xpbd' is disabled by ARMILLARY_PLUGINS={env_value}" in result.stderr
    assert f"ARMILLARY_PLUGINS={env_value},solver_xpbd" in result.stderr and "None" not in result.stderr


def test_unknown_solver_lists_the_disabled_plugins(tmp_path):
    env = {**os.environ, "ARMILLARY_PLUGINS": "symplectic"}
    result = subprocess.run([sys.executable, "-m", "armillary", "run", "--solver", "SolverThirdParty"],
                            capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "unknown solver 'SolverThirdParty'" in result.stderr
    assert "can use: SolverSymplecticEuler;" in result.stderr
    assert "plugins disabled by ARMILLARY_PLUGINS: " in result.stderr and "solver_xpbd" in result.stderr

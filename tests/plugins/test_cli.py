"""The command line: ``armillary plugins`` and ``armillary run``."""

import subprocess
import sys
import types

import numpy as np
import pytest

import armillary
from armillary.cli import main
from armillary.solvers import SolverBase, SolverCapabilities


def _plugin(**hooks):
    ns = types.SimpleNamespace()
    for name, fn in hooks.items():
        setattr(ns, name, armillary.hookimpl(fn))
    return ns


def test_plugins_lists_versions_provides_errors_and_conflicts(registry, capsys):
    class SolverA(SolverBase):
        capabilities = SolverCapabilities(coordinates="maximal")

    registry.register(_plugin(armillary_register_solvers=lambda registry: registry.add(
        "SolverDup", SolverA, summary="first")), name="one", distribution="dist-one", version="1.2")
    registry.register(_plugin(armillary_register_solvers=lambda registry: registry.add(
        "SolverDup", SolverA, summary="second")), name="two", distribution="dist-two", version="3.4")
    registry.register(_plugin(armillary_register_solvers=lambda registry: 1 / 0), name="broken")
    assert main(["plugins"]) == 0
    out = capsys.readouterr().out
    assert f"armillary core {armillary.__version__}" in out
    assert "one: dist-one 1.2" in out and "solvers: SolverDup" in out
    assert "broken" in out and "[FAILED]" in out and "ZeroDivisionError" in out
    assert "CONFLICT: solver 'SolverDup' is registered by dist-one 1.2, dist-two 3.4" in out
    assert "scenes: falling_shapes" in out


def test_python_dash_m_plugins_lists_every_in_repo_plugin():
    result = subprocess.run([sys.executable, "-m", "armillary", "plugins"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    for dist in ("armillary-solver-xpbd", "armillary-solver-featherstone", "armillary-solver-mujoco",
                 "armillary-solver-vbd", "armillary-solver-semi-implicit", "armillary-coupling", "armillary-importer-mjcf",
                 "armillary-importer-urdf", "armillary-importer-usd", "armillary-actuators",
                 "armillary-example-symplectic"):
        assert dist in result.stdout
    assert "SolverSymplecticEuler" in result.stdout


@pytest.mark.parametrize(
    "argv,fragment",
    [
        (["run", "--solver", "SolverNope", "--frames", "1"], "unknown solver 'SolverNope'"),
        (["run", "--solver", "SolverXPBD", "--frames", "1"], "pip install armillary-solver-xpbd"),
        (["run", "does/not/exist.xml"], "cannot read model file"),
        (["run", "--scene", "nope"], "unknown scene 'nope'"),
        (["run", "--frames", "0"], "--frames must be at least 1"),
        (["run", "--out", "x.txt"], "--out must name a .npz file"),
    ],
)
def test_run_errors_are_one_line_without_traceback(argv, fragment, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert fragment in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_run_unknown_file_format_is_one_line(tmp_path, capsys):
    path = tmp_path / "model.weird"
    path.write_text("x")
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert "no installed importer reads '.weird' files" in err and err.count("\n") == 1


def test_cli_subprocess_error_exit_code():
    result = subprocess.run([sys.executable, "-m", "armillary", "run", "--solver", "SolverNope"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and "SolverNope" in result.stderr


def test_run_demo_scene_writes_a_numpy_trajectory(tmp_path):
    """The main job end to end with the example third-party solver (installed in the test env)."""
    out = tmp_path / "traj.npz"
    result = subprocess.run(
        [sys.executable, "-m", "armillary", "run", "--solver", "SolverSymplecticEuler", "--frames", "30",
         "--out", str(out), "--progress"],
        capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert "steps/s" in result.stdout and "energy:" in result.stdout
    assert "100%" in result.stderr  # the progress bar
    data = np.load(out)
    assert data["body_q"].shape == (31, 9, 7)
    assert list(data["body_names"])[:2] == ["shape_0", "shape_1"]
    assert np.all(np.isfinite(data["body_q"]))
    # bodies fell: every body is lower at the end than at the start, none went through the ground
    z = data["body_q"][..., 2]
    assert np.all(z[-1] < z[0]) and z.min() > 0.0

"""Installing only the core plus one plugin, in a fresh virtual environment, works."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_core_plus_one_plugin_in_a_fresh_venv(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    install = subprocess.run(
        [python, "-m", "pip", "install", "--disable-pip-version-check", "-q",
         "-e", str(ROOT), "-e", str(ROOT / "examples" / "solver_symplectic")],
        capture_output=True, text=True, timeout=900, env=env,
    )
    assert install.returncode == 0, install.stderr[-3000:]

    listing = subprocess.run([str(venv / "bin" / "armillary"), "plugins"], capture_output=True, text=True,
                             timeout=300, env=env)
    assert listing.returncode == 0, listing.stderr
    assert "armillary-example-symplectic" in listing.stdout
    assert "armillary-solver-xpbd" not in listing.stdout  # only what this venv installed

    probe = (
        "import armillary\n"
        "for name in ('SolverXPBD', 'SolverFeatherstone', 'SolverMuJoCo', 'SolverVBD'):\n"
        "    try:\n"
        "        getattr(armillary.solvers, name)\n"
        "    except ImportError as exc:\n"
        "        print(exc)\n"
        "print(armillary.solvers.SolverSymplecticEuler.__name__)\n"
    )
    result = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[-1] == "SolverSymplecticEuler"
    for dist in ("armillary-solver-xpbd", "armillary-solver-featherstone", "armillary-solver-mujoco",
                 "armillary-solver-vbd"):
        assert any(f"not installed: pip install {dist}" in line for line in lines), lines

    out = tmp_path / "t.npz"
    run = subprocess.run([str(venv / "bin" / "armillary"), "run", "--frames", "5", "--out", str(out)],
                         capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "SolverSymplecticEuler" in run.stdout and out.is_file()

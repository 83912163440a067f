"""Every robot of the shared corpus (MJCF and URDF) runs 2 s of simulated time through
``armillary run`` with SolverXPBD and SolverFeatherstone on our own collision pipeline (mesh-mesh
contacts through the runner's default cached SDFs, self-collision filtering as each importer sets
it), and with SolverMuJoCo (MuJoCo's own contacts)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from armillary.plugins import get_registry
from armillary.runner import RunOptions, _load_builder, run
from armillary.testing.assets import shared_assets_dir

ROOT = shared_assets_dir()
CATALOG = json.loads((ROOT / "catalog.json").read_text())
ROBOTS = sorted(n for n, e in CATALOG.items() if e["fmt"] in ("mjcf", "urdf"))
SOLVERS = ("SolverXPBD", "SolverFeatherstone", "SolverMuJoCo")


@pytest.fixture(scope="module", autouse=True)
def _sdf_cache(tmp_path_factory):
    """One SDF cache for the module (each mesh is cooked once, then loaded by the other solvers'
    runs), outside the user's ~/.cache."""
    mp = pytest.MonkeyPatch()
    mp.setenv("ARMILLARY_CACHE", str(tmp_path_factory.mktemp("armillary_cache")))
    yield
    mp.undo()


def test_corpus_has_the_fourteen_robots():
    assert len(ROBOTS) == 14, ROBOTS


@pytest.mark.slow
@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("name", ROBOTS)
def test_robot_runs_two_seconds(name, solver, tmp_path):
    out = tmp_path / "traj.npz"
    path = str(ROOT / CATALOG[name]["path"])
    # the runner's own time step and substeps (MJCF <option timestep>, else 1/600 s; a frame is
    # ~1/60 s): enough frames for 2 s of simulated time
    _, _, dt, _, substeps = _load_builder(RunOptions(model_file=path, mesh_collision="mesh"), get_registry())
    frames = math.ceil(2.0 / (dt * substeps) - 1e-9)
    summary = run(RunOptions(model_file=path, solver=solver, frames=frames, out=str(out), progress=False))
    assert summary.simulated_seconds >= 2.0 - 1e-9
    traj = np.load(out)
    assert np.all(np.isfinite(traj["body_q"])), f"{name} with {solver}: non-finite body poses"
    assert np.isfinite(summary.energy_end)

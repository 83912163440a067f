"""Fake plugin distributions written to a temporary folder on ``sys.path``.

``importlib.metadata`` discovers a ``*.dist-info`` folder with METADATA and
entry_points.txt like any installed distribution, so discovery, version
checks and failure isolation are tested exactly as they run for real plugins.
"""

from __future__ import annotations

import textwrap
from pathlib import Path


def write_distribution(root: Path, dist: str, entry_point: str, module: str, source: str,
                       requires: str = "armillary>=0.1,<0.2", version: str = "1.0") -> None:
    """Create distribution ``dist`` whose entry point ``entry_point`` names ``module`` (with ``source``)."""
    info = root / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    meta = f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n"
    if requires:
        meta += f"Requires-Dist: {requires}\n"
    (info / "METADATA").write_text(meta)
    (info / "entry_points.txt").write_text(f"[armillary]\n{entry_point} = {module}\n")
    (root / f"{module}.py").write_text(textwrap.dedent(source))


SOLVER_PLUGIN = """
import armillary
from armillary.solvers import SolverBase, SolverCapabilities


class {cls}(SolverBase):
    \"\"\"A fake solver.\"\"\"

    capabilities = SolverCapabilities(coordinates="maximal", joint_types={{"FREE"}}, features={{"rigid_bodies"}})

    def step(self, state_in, state_out, control, contacts, dt):
        pass


@armillary.hookimpl
def armillary_register_solvers(registry):
    registry.add("{name}", {cls}, summary="a fake solver for discovery tests")
"""

"""Names that armillary's own plugin distributions provide, for install hints.

When a user asks for ``armillary.solvers.SolverXPBD`` and no installed plugin
registers it, this table turns an "unknown name" into "not installed: pip
install armillary-solver-xpbd". Third-party plugins need no entry here.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class KnownName:
    """A name provided by one of this repository's plugin distributions."""

    kind: str
    distribution: str
    directory: str  # plugin folder in the source tree


def _table() -> dict[str, KnownName]:
    rows = {
        "solver": {
            "armillary-solver-featherstone": ("solver_featherstone", ["SolverFeatherstone"]),
            "armillary-solver-xpbd": ("solver_xpbd", ["SolverXPBD"]),
            "armillary-solver-vbd": ("solver_vbd", ["SolverVBD"]),
            "armillary-solver-semi-implicit": ("solver_semi_implicit", ["SolverSemiImplicit"]),
            "armillary-solver-mujoco": ("solver_mujoco", ["SolverMuJoCo"]),
            "armillary-coupling": ("coupling", ["SolverCoupled", "SolverCoupledProxy", "SolverCoupledADMM"]),
        },
        "importer": {
            "armillary-importer-mjcf": ("importer_mjcf", ["mjcf"]),
            "armillary-importer-urdf": ("importer_urdf", ["urdf"]),
            "armillary-importer-usd": ("importer_usd", ["usd"]),
        },
        "actuator component": {
            "armillary-actuators": ("actuators", [
                "Actuator", "Delay", "Controller", "ControllerPD", "ControllerPID", "ControllerNeuralMLP",
                "ControllerNeuralLSTM", "Clamping", "ClampingMaxEffort", "ClampingDCMotor", "ClampingPositionBased",
                "DrivePD", "DrivePID", "DriveNeuralMLP", "DriveNeuralLSTM", "DriveBase", "ClampingBase",
            ]),
        },
    }
    out = {}
    for kind, dists in rows.items():
        for dist, (directory, names) in dists.items():
            for name in names:
                out[name] = KnownName(kind, dist, directory)
    return out


KNOWN: dict[str, KnownName] = _table()

DISTRIBUTION_DIRS = {k.distribution: k.directory for k in KNOWN.values()}


def install_hint(distribution: str) -> str:
    """``pip install <distribution>`` (plus the editable path inside a source checkout)."""
    hint = f"pip install {distribution}"
    directory = DISTRIBUTION_DIRS.get(distribution)
    if directory:
        root = Path(__file__).resolve().parents[2]
        plugin_dir = root / "plugins" / directory
        if (plugin_dir / "pyproject.toml").is_file():
            hint += f"  (from this checkout: pip install -e {plugin_dir})"
    return hint

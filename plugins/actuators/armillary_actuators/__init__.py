"""armillary-actuators: actuator components: actuators, controllers, delays, clampings.

Public names (also ``armillary.actuators.<Name>`` through the plugin registry):
:class:`Actuator`, :class:`Delay`, :class:`Controller`, :class:`ControllerPD`,
:class:`ControllerPID`, :class:`ControllerNeuralMLP`, :class:`ControllerNeuralLSTM`,
:class:`Clamping`, :class:`ClampingMaxEffort`, :class:`ClampingDCMotor`,
:class:`ClampingPositionBased`, and the reference engine's aliases ``DrivePD``,
``DrivePID``, ``DriveNeuralMLP``, ``DriveNeuralLSTM``, ``DriveBase``, ``ClampingBase``.
They load on first access, so importing the package (what plugin discovery
does) stays light.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "Actuator": "actuator",
    "Delay": "delay",
    "Controller": "base",
    "Clamping": "base",
    "ControllerPD": "controllers",
    "ControllerPID": "controllers",
    "ControllerNeuralMLP": "neural",
    "ControllerNeuralLSTM": "neural",
    "ClampingMaxEffort": "clamping",
    "ClampingDCMotor": "clamping",
    "ClampingPositionBased": "clamping",
}
_ALIASES = {
    "DrivePD": "ControllerPD",
    "DrivePID": "ControllerPID",
    "DriveNeuralMLP": "ControllerNeuralMLP",
    "DriveNeuralLSTM": "ControllerNeuralLSTM",
    "DriveBase": "Controller",
    "ClampingBase": "Clamping",
}

__all__ = sorted([*_EXPORTS, *_ALIASES])


def __getattr__(name: str):
    target = _ALIASES.get(name, name)
    module = _EXPORTS.get(target)
    if module is None:
        raise AttributeError(f"module 'armillary_actuators' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), target)
    globals()[name] = value
    return value


def __dir__():
    return sorted([*globals(), *__all__])

"""Hook implementations of armillary-actuators (entry point ``actuators`` in group ``armillary``).

Only names and where they live: nothing heavy (no Warp, no onnx, no torch) is
imported here; ``armillary.actuators.<Name>`` imports the module on first use.
"""

from __future__ import annotations

from armillary import hookimpl

# (name, "module:attribute", kind, summary)
COMPONENTS = [
    ("Actuator", "armillary_actuators.actuator:Actuator", "actuator",
     "vectorised actuator: delay -> controller -> clampings -> scatter-add into a control array"),
    ("Delay", "armillary_actuators.delay:Delay", "delay",
     "circular-buffer delay of targets and feedforward by N actuator steps per DOF"),
    ("Controller", "armillary_actuators.base:Controller", "controller",
     "base class of control laws (compute, resolve_arguments, is_stateful, is_graphable)"),
    ("ControllerPD", "armillary_actuators.controllers:ControllerPD", "controller",
     "proportional-derivative control law with constant effort and feedforward (stateless)"),
    ("ControllerPID", "armillary_actuators.controllers:ControllerPID", "controller",
     "proportional-integral-derivative control law with anti-windup integral clamp (stateful)"),
    ("ControllerNeuralMLP", "armillary_actuators.neural:ControllerNeuralMLP", "controller",
     "MLP policy network (ONNX via Warp kernels, or torch .pt2) on position-error/velocity history"),
    ("ControllerNeuralLSTM", "armillary_actuators.neural:ControllerNeuralLSTM", "controller",
     "LSTM policy network (ONNX via Warp kernels, or torch .pt2) with hidden/cell state"),
    ("Clamping", "armillary_actuators.base:Clamping", "clamping",
     "base class of post-controller effort limits (modify_forces)"),
    ("ClampingMaxEffort", "armillary_actuators.clamping:ClampingMaxEffort", "clamping",
     "symmetric clamp of the effort to +-max_effort per DOF"),
    ("ClampingDCMotor", "armillary_actuators.clamping:ClampingDCMotor", "clamping",
     "DC-motor effort-speed line: velocity-dependent effort saturation"),
    ("ClampingPositionBased", "armillary_actuators.clamping:ClampingPositionBased", "clamping",
     "position-dependent effort limit interpolated from a lookup table"),
    # the reference engine's (newton 1.8) names, so scripts port unchanged
    ("DrivePD", "armillary_actuators.controllers:ControllerPD", "controller",
     "reference-engine name of ControllerPD (proportional-derivative law)"),
    ("DrivePID", "armillary_actuators.controllers:ControllerPID", "controller",
     "reference-engine name of ControllerPID (PID law with anti-windup)"),
    ("DriveNeuralMLP", "armillary_actuators.neural:ControllerNeuralMLP", "controller",
     "reference-engine name of ControllerNeuralMLP (MLP policy network)"),
    ("DriveNeuralLSTM", "armillary_actuators.neural:ControllerNeuralLSTM", "controller",
     "reference-engine name of ControllerNeuralLSTM (LSTM policy network)"),
    ("DriveBase", "armillary_actuators.base:Controller", "controller",
     "reference-engine name of the Controller base class"),
    ("ClampingBase", "armillary_actuators.base:Clamping", "clamping",
     "reference-engine name of the Clamping base class"),
]


@hookimpl
def armillary_register_actuators(registry):
    for name, target, kind, summary in COMPONENTS:
        registry.add(name, target, kind=kind, summary=summary)

"""Every code example of the specification's Actuators page, run with ``import armillary as newton``.

The code is the page's (indentation lost in the text extraction restored); each test then checks
what the surrounding text states. The examples of one ``testsetup``/``testcode`` group share their
namespace on the page, so ``_usage_namespace`` runs the setup and the first example in order.
"""

from __future__ import annotations

import numpy as np
import pytest


def _usage_namespace() -> dict:
    ns: dict = {}
    # .. testsetup:: actuator-usage
    exec(
        """
import warp as wp
import armillary as newton
from armillary.actuators import (
    Actuator, ClampingMaxEffort, ControllerPD, Delay,
)

builder = newton.ModelBuilder()
link = builder.add_link()
joint = builder.add_joint_revolute(parent=-1, child=link, axis=newton.Axis.Z)
builder.add_articulation([joint])
dof_index = builder.joint_qd_start[joint]
""",
        ns,
    )
    # .. testcode:: actuator-usage (registration at build time)
    exec(
        """
builder.add_actuator(
    ControllerPD,
    index=dof_index,
    kp=100.0,
    kd=10.0,
    delay_steps=5,
    clamping=[(ClampingMaxEffort, {"max_effort": 50.0})],
)
model = builder.finalize()
""",
        ns,
    )
    return ns


def test_usage_add_actuator_is_instantiated_at_finalize():
    ns = _usage_namespace()
    model = ns["model"]
    assert len(model.actuators) == 1
    act = model.actuators[0]
    assert type(act.controller).__name__ == "ControllerPD"
    assert act.delay.max_delay == 5 and act.delay.delay_steps.numpy().tolist() == [5]
    assert [type(c).__name__ for c in act.clamping] == ["ClampingMaxEffort"]
    assert act.controller.kp.numpy().tolist() == [100.0] and act.controller.kd.numpy().tolist() == [10.0]


def test_usage_manual_construction_and_duck_typed_simulator():
    ns = _usage_namespace()
    exec(
        """
indices = wp.array([0], dtype=wp.uint32)
kp = wp.array([100.0], dtype=wp.float32)
kd = wp.array([10.0], dtype=wp.float32)
max_e = wp.array([50.0], dtype=wp.float32)

actuator = Actuator(
    indices,
    controller=ControllerPD(kp=kp, kd=kd),
    delay=Delay(delay_steps=wp.array([5], dtype=wp.int32), max_delay=5),
    clamping=[ClampingMaxEffort(max_effort=max_e)],
    control_target_pos_attr="joint_target_q",
    control_target_vel_attr="joint_target_qd",
)
""",
        ns,
    )
    exec(
        """
import types

sim_state = types.SimpleNamespace(
    joint_q=wp.array([0.0], dtype=wp.float32),
    joint_qd=wp.array([0.0], dtype=wp.float32),
)
sim_control = types.SimpleNamespace(
    joint_target_q=wp.array([1.0], dtype=wp.float32),
    joint_target_qd=wp.array([0.0], dtype=wp.float32),
    joint_act=None,
    joint_f=wp.zeros(1, dtype=wp.float32),
)

state_a = actuator.state()
state_b = actuator.state()
sim_control.joint_f.zero_()
actuator.step(sim_state, sim_control, state_a, state_b, dt=0.01)
""",
        ns,
    )
    # empty delay history: the current target (1.0); PD effort 100 clamped to 50
    assert ns["sim_control"].joint_f.numpy().tolist() == [50.0]
    # the caller must zero the output: effort is scatter-added
    ns["actuator"].step(ns["sim_state"], ns["sim_control"], ns["state_b"], ns["state_a"], dt=0.01)
    assert ns["sim_control"].joint_f.numpy().tolist() == [100.0]


def test_stateful_actuators_swap_two_states():
    ns = _usage_namespace()
    exec(
        """
state_0 = model.actuators[0].state()
state_1 = model.actuators[0].state()
state = model.state()
control = model.control()

for step in range(3):
    control.joint_f.zero_()  # zero output before stepping actuators
    model.actuators[0].step(state, control, state_0, state_1, dt=0.01)
    state_0, state_1 = state_1, state_0
""",
        ns,
    )
    act = ns["model"].actuators[0]
    assert act.is_stateful()
    # three commands pushed into the delay; the latest state is state_0 after the swaps
    assert ns["state_0"].delay_state.num_pushes.numpy().tolist() == [3]
    assert ns["state_1"].delay_state.num_pushes.numpy().tolist() == [2]
    # model targets are 0 and the joint is at 0: no effort
    assert ns["control"].joint_f.numpy().tolist() == [0.0]


def test_stateless_actuators_need_no_state_objects():
    ns = _usage_namespace()
    exec(
        """
# Build a stateless actuator (no delay, stateless controller)
b2 = newton.ModelBuilder()
lk = b2.add_link()
jt = b2.add_joint_revolute(parent=-1, child=lk, axis=newton.Axis.Z)
b2.add_articulation([jt])
b2.add_actuator(ControllerPD, index=b2.joint_qd_start[jt], kp=50.0)
m2 = b2.finalize()
m2.actuators[0].step(m2.state(), m2.control())
""",
        ns,
    )
    act = ns["m2"].actuators[0]
    assert not act.is_stateful() and act.state() is None


def test_pd_and_pid_are_graphable():
    import armillary as newton

    for controller in (newton.actuators.ControllerPD(kp=[1.0], kd=[0.0]),
                       newton.actuators.ControllerPID(kp=[1.0], ki=[1.0], kd=[0.0], integral_max=[1.0])):
        act = newton.actuators.Actuator([0], controller=controller,
                                        clamping=[newton.actuators.ClampingDCMotor([1.0], [1.0], [1.0])],
                                        delay=newton.actuators.Delay([1], 1))
        assert controller.is_graphable() and act.is_graphable()


def test_customization_skeleton_controller():
    ns: dict = {}
    exec(
        """
import warp as wp
from armillary.actuators import Controller

class MyController(Controller):
    @classmethod
    def resolve_arguments(cls, args):
        return {"gain": args.get("gain", 1.0)}

    def __init__(self, gain: wp.array):
        self.gain = gain

    def is_stateful(self):
        return False

    def is_graphable(self):
        return True

    def compute(self, positions, velocities, target_pos, target_vel,
                feedforward, pos_indices, vel_indices,
                target_pos_indices, target_vel_indices,
                forces, state, dt, device=None):
        # Launch a Warp kernel that writes effort into forces
        ...
""",
        ns,
    )
    import armillary as newton

    MyController = ns["MyController"]
    assert MyController.resolve_arguments({}) == {"gain": 1.0}
    # the skeleton plugs into add_actuator and the actuator pipeline as is
    b = newton.ModelBuilder()
    link = b.add_link()
    b.add_articulation([b.add_joint_revolute(parent=-1, child=link, axis=newton.Axis.Z)])
    b.add_actuator(MyController, index=0, gain=2.0)
    model = b.finalize()
    act = model.actuators[0]
    assert isinstance(act.controller, MyController) and act.controller.gain.numpy().tolist() == [2.0]
    control = model.control()
    act.step(model.state(), control)  # its compute writes nothing: the effort buffer stays zero
    assert control.joint_f.numpy().tolist() == [0.0]
    assert isinstance(act.controller, newton.actuators.Controller)
    assert newton.actuators.Clamping is newton.actuators.ClampingBase


def test_torch_checkpoint_metadata_example(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    net = torch.nn.Sequential(torch.nn.Linear(2, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    example_inputs = (torch.zeros(1, 2),)
    ns = {"net": net, "example_inputs": example_inputs}
    exec(
        """
import json
import torch

exported = torch.export.export(net, example_inputs)
metadata = {"effort_scale": 2.0, "num_layers": 2, "hidden_size": 8}
torch.export.save(exported, "policy.pt2", extra_files={"metadata.json": json.dumps(metadata)})
""",
        ns,
    )
    extra = {"metadata.json": ""}
    torch.export.load(str(tmp_path / "policy.pt2"), extra_files=extra)
    assert np.isclose(__import__("json").loads(extra["metadata.json"])["effort_scale"], 2.0)

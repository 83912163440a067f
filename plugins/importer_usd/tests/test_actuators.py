"""Actuator prims -> ``add_actuator`` entries: ``NewtonActuator`` (always) and ``MjcActuator``
(``actuator_components=True``). Stages are built in code, attributes authored by name (no schema
package needed). Numbers marked "reference" were read from newton 1.8's ``parse_actuator_prim`` on
the same prims (black box)."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest

pytest.importorskip("pxr")
pytest.importorskip("armillary_actuators")
from pxr import Sdf, Usd, UsdGeom, UsdPhysics  # noqa: E402

import armillary  # noqa: E402
from armillary_importer_usd.utils import USDImportError  # noqa: E402

importer = pytest.importorskip("armillary_importer_usd.importer")
add_usd = importer.add_usd
T = Sdf.ValueTypeNames


def _robot(meters_per_unit: float = 1.0) -> Usd.Stage:
    """World-fixed base, a revolute joint ``/World/robot/hinge`` and a prismatic joint ``/World/robot/slider``."""
    st = Usd.Stage.CreateInMemory()
    UsdGeom.SetStageUpAxis(st, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(st, meters_per_unit)
    UsdPhysics.Scene.Define(st, "/World/scene")
    root = UsdGeom.Xform.Define(st, "/World/robot")
    UsdPhysics.ArticulationRootAPI.Apply(root.GetPrim())
    for k, name in enumerate(("base", "arm", "tip")):
        body = UsdGeom.Xform.Define(st, f"/World/robot/{name}")
        body.AddTranslateOp().Set((float(k), 0.0, 0.0))
        UsdPhysics.RigidBodyAPI.Apply(body.GetPrim())
        mass = UsdPhysics.MassAPI.Apply(body.GetPrim())
        mass.CreateMassAttr(1.0)
        mass.CreateDiagonalInertiaAttr((0.1, 0.1, 0.1))
    fixed = UsdPhysics.FixedJoint.Define(st, "/World/robot/root")
    fixed.CreateBody1Rel().SetTargets(["/World/robot/base"])
    hinge = UsdPhysics.RevoluteJoint.Define(st, "/World/robot/hinge")
    hinge.CreateBody0Rel().SetTargets(["/World/robot/base"])
    hinge.CreateBody1Rel().SetTargets(["/World/robot/arm"])
    hinge.CreateAxisAttr("Z")
    hinge.CreateLocalPos0Attr((1.0, 0.0, 0.0))
    slider = UsdPhysics.PrismaticJoint.Define(st, "/World/robot/slider")
    slider.CreateBody0Rel().SetTargets(["/World/robot/arm"])
    slider.CreateBody1Rel().SetTargets(["/World/robot/tip"])
    slider.CreateAxisAttr("X")
    slider.CreateLocalPos0Attr((1.0, 0.0, 0.0))
    return st


def _actuator(st, name: str, apis, attrs: dict, target="/World/robot/hinge", type_name="NewtonActuator",
              rel="newton:targets"):
    prim = st.DefinePrim(f"/World/robot/{name}", type_name)
    for api in apis:
        prim.AddAppliedSchema(api)
    if target is not None:
        prim.CreateRelationship(rel).SetTargets([Sdf.Path(target)])
    for key, (vtype, value) in attrs.items():
        prim.CreateAttribute(key, vtype).Set(value)
    return prim


def _import(st, **kwargs):
    b = armillary.ModelBuilder()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = add_usd(b, st, **kwargs)
    return b, result, [str(w.message) for w in caught]


def _entries(b):
    return [(e.controller_class.__name__, e.index, e.pos_index, e.delay_steps,
             [(c.__name__, a) for c, a in e.clamping], e.args) for e in b.actuator_entries]


def _dof(b, result, path):
    return b.joint_qd_start[result["path_joint_map"][path]]


# ------------------------------------------------------------------------------------------ NewtonActuator
def test_newton_actuators_become_entries():
    st = _robot()
    _actuator(st, "pd", ["NewtonPDControlAPI", "NewtonActuatorDelayAPI", "NewtonMaxEffortClampingAPI",
                         "NewtonDCMotorClampingAPI"],
              {"newton:kp": (T.Float, 5.0), "newton:kd": (T.Float, 0.5), "newton:constEffort": (T.Float, 0.25),
               "newton:delaySteps": (T.Int, 3), "newton:maxEffort": (T.Float, 7.0),
               "newton:saturationEffort": (T.Float, 10.0), "newton:velocityLimit": (T.Float, 4.0),
               "newton:maxMotorEffort": (T.Float, 8.0)})
    _actuator(st, "pid", ["NewtonPIDControlAPI", "NewtonPositionBasedClampingAPI"],
              {"newton:kp": (T.Float, 2.0), "newton:ki": (T.Float, 1.0), "newton:integralMax": (T.Float, 0.5),
               "newton:lookupPositions": (T.FloatArray, [0.0, 1.0]),
               "newton:lookupEfforts": (T.FloatArray, [1.0, 2.0])},
              target="/World/robot/slider")
    b, result, caught = _import(st)
    assert result["actuator_count"] == 2 and not caught
    hinge, slider = _dof(b, result, "/World/robot/hinge"), _dof(b, result, "/World/robot/slider")
    assert _entries(b) == [
        ("ControllerPD", hinge, b.joint_q_start[result["path_joint_map"]["/World/robot/hinge"]], 3,
         [("ClampingMaxEffort", {"max_effort": 7.0}),
          ("ClampingDCMotor", {"saturation_effort": 10.0, "velocity_limit": 4.0, "max_motor_effort": 8.0})],
         {"kp": 5.0, "kd": 0.5, "const_effort": 0.25}),
        ("ControllerPID", slider, slider, None,
         [("ClampingPositionBased", {"lookup_positions": (0.0, 1.0), "lookup_efforts": (1.0, 2.0)})],
         {"kp": 2.0, "ki": 1.0, "kd": 0.0, "integral_max": 0.5, "const_effort": 0.0}),
    ]
    model = b.finalize()
    assert [type(a).__name__ for a in model.actuators] == ["Actuator", "Actuator"]


def test_unauthored_values_take_the_schema_defaults():
    # reference: only authored values are passed; the schema's defaults are gains 0, limits inf, delay 1
    st = _robot()
    _actuator(st, "pd", ["NewtonPDControlAPI", "NewtonActuatorDelayAPI", "NewtonDCMotorClampingAPI",
                         "NewtonMaxEffortClampingAPI"], {})
    b, result, _ = _import(st)
    ((cls, _, _, delay, clamps, args),) = _entries(b)
    assert (cls, delay, args) == ("ControllerPD", 1, {"kp": 0.0, "kd": 0.0, "const_effort": 0.0})
    assert clamps == [("ClampingMaxEffort", {"max_effort": math.inf}),
                      ("ClampingDCMotor", {"saturation_effort": math.inf, "velocity_limit": math.inf,
                                           "max_motor_effort": math.inf})]


def test_prismatic_lengths_are_converted_with_meters_per_unit():
    st = _robot(meters_per_unit=0.01)  # centimetres
    _actuator(st, "pid", ["NewtonPIDControlAPI", "NewtonDCMotorClampingAPI", "NewtonPositionBasedClampingAPI"],
              {"newton:kp": (T.Float, 200.0), "newton:ki": (T.Float, 100.0), "newton:kd": (T.Float, 4.0),
               "newton:integralMax": (T.Float, 50.0), "newton:velocityLimit": (T.Float, 300.0),
               "newton:saturationEffort": (T.Float, 9.0),
               "newton:lookupPositions": (T.FloatArray, [0.0, 50.0]),
               "newton:lookupEfforts": (T.FloatArray, [1.0, 2.0])},
              target="/World/robot/slider")
    _actuator(st, "pd", ["NewtonPDControlAPI"], {"newton:kp": (T.Float, 200.0)})  # revolute: radians, unchanged
    b, _, _ = _import(st)
    pid, pd = _entries(b)
    assert pid[5] == pytest.approx({"kp": 2e4, "ki": 1e4, "kd": 400.0, "integral_max": 0.5, "const_effort": 0.0})
    assert pid[4][0][1] == pytest.approx({"saturation_effort": 9.0, "velocity_limit": 3.0,
                                          "max_motor_effort": math.inf})
    assert pid[4][1][1]["lookup_positions"] == pytest.approx((0.0, 0.5))
    assert pd[5]["kp"] == 200.0


def test_entries_follow_replicate_and_drive_the_joint():
    st = _robot()
    _actuator(st, "pd", ["NewtonPDControlAPI", "NewtonMaxEffortClampingAPI"],
              {"newton:kp": (T.Float, 5.0), "newton:kd": (T.Float, 0.5), "newton:maxEffort": (T.Float, 2.0)})
    robot, result, _ = _import(st)
    scene = armillary.ModelBuilder()
    scene.replicate(robot, 3)
    model = scene.finalize()
    (act,) = model.actuators
    dof = _dof(robot, result, "/World/robot/hinge")
    assert act.indices.numpy().tolist() == [dof + w * robot.joint_dof_count for w in range(3)]
    state, control = model.state(), model.control()
    q = np.zeros(model.joint_coord_count, np.float32)
    qd = np.zeros(model.joint_dof_count, np.float32)
    tq = np.zeros(model.joint_coord_count, np.float32)
    idx = act.indices.numpy()
    q[idx], qd[idx], tq[idx] = [0.1, 0.2, -0.5], [1.0, -1.0, 0.0], [0.2, 0.2, 0.2]
    state.joint_q.assign(q)
    state.joint_qd.assign(qd)
    control.joint_target_q.assign(tq)
    control.joint_f.zero_()
    act.step(state, control)
    expected = np.clip(5.0 * (tq[idx] - q[idx]) - 0.5 * qd[idx], -2.0, 2.0)
    np.testing.assert_allclose(control.joint_f.numpy()[idx], expected, rtol=1e-6)


def _mlp_onnx(path, meta: dict):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.normal(size=(2, 8)).astype(np.float32), "W1"),
             numpy_helper.from_array(rng.normal(size=(8, 1)).astype(np.float32), "W2")]
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["h"]), helper.make_node("Tanh", ["h"], ["a"]),
             helper.make_node("MatMul", ["a", "W2"], ["y"])]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    for k, v in meta.items():
        entry = model.metadata_props.add()
        entry.key, entry.value = k, json.dumps(v)
    onnx.save(model, str(path))
    return str(path)


def test_neural_control_api_picks_the_network_from_model_type(tmp_path):
    good = _mlp_onnx(tmp_path / "policy.onnx", {"model_type": "mlp"})
    st = _robot()
    _actuator(st, "nn", ["NewtonNeuralControlAPI", "NewtonMaxEffortClampingAPI"],
              {"newton:modelPath": (T.Asset, good), "newton:maxEffort": (T.Float, 3.0)})
    b, result, _ = _import(st)
    ((cls, _, _, _, clamps, args),) = _entries(b)
    assert (cls, args, result["actuator_count"]) == ("ControllerNeuralMLP", {"model_path": good}, 1)
    model = b.finalize()
    assert type(model.actuators[0].controller).__name__ == "ControllerNeuralMLP"
    # reference: a checkpoint without model_type, an unknown one, and Torch checkpoints are errors
    for meta, needle in (({}, "model_type"), ({"model_type": "gru"}, "'gru'")):
        st = _robot()
        _actuator(st, "nn", ["NewtonNeuralControlAPI"],
                  {"newton:modelPath": (T.Asset, _mlp_onnx(tmp_path / "bad.onnx", meta))})
        with pytest.raises(USDImportError, match=f"/World/robot/nn.*{needle}"):
            _import(st)
    st = _robot()
    _actuator(st, "nn", ["NewtonNeuralControlAPI"], {"newton:modelPath": (T.Asset, str(tmp_path / "p.pt2"))})
    with pytest.raises(USDImportError, match="/World/robot/nn.*Torch checkpoint"):
        _import(st)


@pytest.mark.parametrize(
    "apis, attrs, target, needle",
    [
        (["NewtonPDControlAPI"], {}, None, "no authored 'newton:targets'"),
        (["NewtonPDControlAPI"], {}, "/World/nothing", "does not exist"),
        (["NewtonPDControlAPI"], {}, "/World/robot/arm", "only PhysicsRevoluteJoint / PhysicsPrismaticJoint"),
        ([], {}, "/World/robot/hinge", "no control API"),
        (["NewtonPDControlAPI", "NewtonPIDControlAPI"], {}, "/World/robot/hinge", "several control APIs"),
        (["NewtonPDControlAPI", "NewtonActuatorDelayAPI"], {"newton:delaySteps": (T.Int, -1)}, "/World/robot/hinge",
         "delay must be an integer >= 0"),
        (["NewtonPDControlAPI"], {"newton:kp": (T.Float, -1.0)}, "/World/robot/hinge", "kp must be >= 0"),
        (["NewtonPDControlAPI", "NewtonPositionBasedClampingAPI"], {}, "/World/robot/hinge", "lookup table is empty"),
    ],
)
def test_bad_newton_actuators_name_the_prim(apis, attrs, target, needle):
    st = _robot()
    _actuator(st, "bad", apis, attrs, target=target)
    with pytest.raises(USDImportError, match="/World/robot/bad") as info:
        _import(st)
    assert needle in str(info.value)
    assert isinstance(info.value, ValueError)


def test_inactive_actuators_and_ignored_targets_are_skipped():
    st = _robot()
    _actuator(st, "off", ["NewtonPDControlAPI"], {}).SetActive(False)
    _actuator(st, "on_slider", ["NewtonPDControlAPI"], {}, target="/World/robot/slider")
    b, result, caught = _import(st, ignore_paths=["/World/robot/slider$"])
    assert result["actuator_count"] == 0 and b.actuator_entries == []
    assert any("/World/robot/on_slider" in m and "was not imported" in m for m in caught)


# ------------------------------------------------------------------------------------------ MjcActuator
def _mjc(st, name, attrs, target="/World/robot/hinge"):
    return _actuator(st, name, [], attrs, target=target, type_name="MjcActuator", rel="mjc:target")


def test_mjc_actuators_need_actuator_components():
    st = _robot()
    _mjc(st, "servo", {"mjc:gainPrm": (T.DoubleArray, [10.0]), "mjc:biasType": (T.Token, "affine"),
                       "mjc:biasPrm": (T.DoubleArray, [0.0, -10.0, -1.0])})
    b, result, _ = _import(st)
    assert result["actuator_count"] == 0 and b.actuator_entries == []
    b, result, _ = _import(st, actuator_components=True)
    assert result["actuator_count"] == 1
    assert _entries(b)[0][5] == {"kp": 10.0, "kd": 1.0, "const_effort": 0.0}


def test_mjc_actuator_forms_gear_and_ranges():
    st = _robot(meters_per_unit=0.5)
    # position form with a constant bias, gear 2, force range: kp gear^2, kv gear^2, const gear b0, |gear| range
    _mjc(st, "servo", {"mjc:gainPrm": (T.DoubleArray, [4.0, 0, 0]), "mjc:biasType": (T.Token, "affine"),
                       "mjc:biasPrm": (T.DoubleArray, [0.7, -4.0, -0.3]),
                       "mjc:gear": (T.DoubleArray, [2.0, 0, 0, 0, 0, 0]),
                       "mjc:forceRange:min": (T.Double, -1.5), "mjc:forceRange:max": (T.Double, 1.5)})
    # a motor (the humanoid assets' form): ctrlLimited range times |gear * gain|
    _mjc(st, "motor", {"mjc:ctrlLimited": (T.Token, "true"), "mjc:ctrlRange:min": (T.Double, -1.0),
                       "mjc:ctrlRange:max": (T.Double, 1.0), "mjc:gear": (T.DoubleArray, [67.5, 0, 0, 0, 0, 0])})
    # velocity form on the slider (0.5 m per unit: gains per stage length / 0.5), forceLimited false ignores the range
    _mjc(st, "vel", {"mjc:gainPrm": (T.DoubleArray, [3.0]), "mjc:biasType": (T.Token, "affine"),
                     "mjc:biasPrm": (T.DoubleArray, [0.0, 0.0, -3.0]), "mjc:forceLimited": (T.Token, "false"),
                     "mjc:forceRange:min": (T.Double, -1.0), "mjc:forceRange:max": (T.Double, 1.0)},
         target="/World/robot/slider")
    b, result, caught = _import(st, actuator_components=True)
    assert result["actuator_count"] == 3 and not caught
    servo, motor, vel = _entries(b)
    assert servo[5] == pytest.approx({"kp": 16.0, "kd": 1.2, "const_effort": 1.4})
    assert servo[4] == [("ClampingMaxEffort", {"max_effort": 3.0})]
    assert motor[5] == {"kp": 0.0, "kd": 0.0, "const_effort": 0.0}
    assert motor[4] == [("ClampingMaxEffort", {"max_effort": 67.5})]
    assert vel[5] == pytest.approx({"kp": 0.0, "kd": 6.0, "const_effort": 0.0}) and vel[4] == []
    assert b.joint_target_ke[servo[1]] == 0.0  # no joint drive is set


def test_mjc_unsupported_forms_warn_and_bad_targets_raise():
    st = _robot()
    _mjc(st, "affine_gain", {"mjc:gainType": (T.Token, "affine")})
    _mjc(st, "body", {}, target="/World/robot/arm")
    b, result, caught = _import(st, actuator_components=True)
    assert result["actuator_count"] == 0
    assert any("/World/robot/affine_gain" in m and "gainType=affine" in m for m in caught)
    assert any("/World/robot/body" in m and "body transmissions" in m for m in caught)
    st = _robot()
    _mjc(st, "dangling", {}, target=None)
    with pytest.raises(USDImportError, match="/World/robot/dangling.*mjc:target"):
        _import(st, actuator_components=True)

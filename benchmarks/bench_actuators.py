"""Actuator throughput: a fixed-base 12-DOF quadruped (4 legs x hip abduction, hip flexion, knee)
replicated over 4096 worlds (49152 actuated DOFs), driven by

* (a) ``ControllerPD`` + ``Delay`` (3 steps) + ``ClampingDCMotor``, and
* (b) ``ControllerNeuralMLP``: an ONNX policy with two hidden layers of 64 (ELU), input the
  position errors and velocities of the current and two past steps (6 values per DOF), built with
  ``onnx.helper`` into a temporary file (no download),

in actuator steps per second (one ``Actuator.step`` over all worlds), and each next to one
``SolverFeatherstone`` step of the same replicated robot in the same run (no contacts), as the
actuator's cost relative to the physics step. When the reference engine (newton) is importable in
the same interpreter, its ``DrivePD`` + ``Delay`` + ``ClampingDCMotor`` (and ``DriveNeuralMLP`` on
the same checkpoint, when it loads) are timed side by side on identical builder calls, black box.

Run: ``python benchmarks/bench_actuators.py [--worlds N] [--steps N] [--device cpu|cuda:0] [--quick] [--json PATH]
[--cpu-time]`` (the last two: ``benchmarks/_protocol.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import warnings

import numpy as np
import warp as wp

import _protocol as protocol

DT = 2.0e-3
DELAY = 3
PD = {"kp": 40.0, "kd": 1.0}
MOTOR = {"saturation_effort": 30.0, "velocity_limit": 20.0, "max_motor_effort": 25.0}


def make_quadruped(nt) -> tuple:
    """A fixed base and 4 legs of 3 revolute joints; returns ``(builder, [12 DOF indices])``."""
    b = nt.ModelBuilder()
    inertia = wp.mat33(np.eye(3, dtype=np.float32) * 1.0e-3)
    base = b.add_link(mass=5.0, inertia=wp.mat33(np.eye(3, dtype=np.float32) * 0.05))
    joints = [b.add_joint_fixed(-1, base, parent_xform=wp.transform((0.0, 0.0, 0.5), wp.quat_identity()))]
    for sx in (0.2, -0.2):
        for sy in (0.1, -0.1):
            parent, offset = base, (sx, sy, 0.0)
            for axis, length in (((1.0, 0.0, 0.0), 0.05), ((0.0, 1.0, 0.0), 0.2), ((0.0, 1.0, 0.0), 0.2)):
                link = b.add_link(mass=0.5, com=(0.0, 0.0, -0.5 * length), inertia=inertia)
                joints.append(b.add_joint_revolute(parent, link, axis=axis,
                                                   parent_xform=wp.transform(offset, wp.quat_identity())))
                parent, offset = link, (0.0, 0.0, -length)
    b.add_articulation(joints)
    dofs = [b.joint_qd_start[j] for j in joints[1:]]
    assert len(dofs) == 12
    return b, dofs


def write_mlp(path: str, hidden: int = 64, history: int = 3) -> None:
    """An ONNX MLP (Gemm-Elu-Gemm-Elu-Gemm), inputs ``2 * history`` per DOF, one output."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    sizes = [2 * history, hidden, hidden, 1]
    nodes, inits, x = [], [], "x"
    for k in range(3):
        w = (rng.normal(size=(sizes[k], sizes[k + 1])) / np.sqrt(sizes[k])).astype(np.float32)
        bias = np.zeros(sizes[k + 1], np.float32)
        inits += [numpy_helper.from_array(w, f"W{k}"), numpy_helper.from_array(bias, f"b{k}")]
        y = f"h{k}" if k < 2 else "y"
        nodes.append(helper.make_node("Gemm", [x, f"W{k}", f"b{k}"], [y if k == 2 else f"g{k}"]))
        if k < 2:
            nodes.append(helper.make_node("Elu", [f"g{k}"], [y]))
        x = y
    graph = helper.make_graph(nodes, "policy", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", sizes[0]])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    meta = {"model_type": "mlp", "input_idx": list(range(history)), "input_order": "pos_vel", "effort_scale": 10.0}
    for key, value in meta.items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, json.dumps(value)
    onnx.save(model, path)


def build(nt, worlds: int, device: str, controller, clamping, delay, args):
    robot, dofs = make_quadruped(nt)
    for d in dofs:
        robot.add_actuator(controller, index=d, clamping=clamping, delay_steps=delay, **args)
    scene = nt.ModelBuilder()
    scene.replicate(robot, worlds)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = scene.finalize(device=device)
    return model


def time_actuators(model, steps: int) -> float:
    """Actuator steps per second (all of ``model.actuators`` once per step, double-buffered states)."""
    state, control = model.state(), model.control()
    rng = np.random.default_rng(1)
    control.joint_target_q.assign(rng.uniform(-0.3, 0.3, model.joint_coord_count).astype(np.float32))
    state.joint_qd.assign(rng.uniform(-1.0, 1.0, model.joint_dof_count).astype(np.float32))
    pairs = [(a.state(), a.state()) for a in model.actuators]

    def one():
        nonlocal pairs
        control.joint_f.zero_()
        for a, (cur, nxt) in zip(model.actuators, pairs):
            a.step(state, control, cur, nxt, dt=DT)
        pairs = [(n, c) for c, n in pairs]

    for _ in range(5):  # compile + warm up
        one()
    wp.synchronize_device(model.device)
    t = protocol.clock()
    for _ in range(steps):
        one()
    wp.synchronize_device(model.device)
    return steps / (protocol.clock() - t)


def time_featherstone(nt, model, steps: int) -> float | None:
    try:
        solver_cls = nt.solvers.SolverFeatherstone
    except AttributeError:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        solver = solver_cls(model)
    s0, s1, control = model.state(), model.state(), model.control()
    for _ in range(5):
        solver.step(s0, s1, control, None, DT)
        s0, s1 = s1, s0
    wp.synchronize_device(model.device)
    t = protocol.clock()
    for _ in range(steps):
        solver.step(s0, s1, control, None, DT)
        s0, s1 = s1, s0
    wp.synchronize_device(model.device)
    return steps / (protocol.clock() - t)


def report(name: str, act_rate: float, fs_rate: float | None, dofs: int) -> None:
    rel = f"{fs_rate / act_rate:6.2f} x a Featherstone step" if fs_rate else "  (no Featherstone solver here)"
    print(f"  {name:44s} {act_rate:10.1f} steps/s  {act_rate * dofs / 1e6:8.2f} M DOF-steps/s  cost = {rel}")


def run_engine(label: str, nt, act, worlds: int, steps: int, device: str, mlp_path: str | None) -> dict:
    out = {}
    ndof = worlds * 12
    fs = None
    pd_model = build(nt, worlds, device, act.get("pd"), [(act["ClampingDCMotor"], MOTOR)], DELAY, PD)
    try:
        fs = time_featherstone(nt, pd_model, steps)
    except Exception as e:  # noqa: BLE001 - a missing or failing solver only removes the ratio
        print(f"  ({label}: SolverFeatherstone unavailable: {type(e).__name__}: {e})")
    out["featherstone"] = fs
    if fs:
        print(f"  {label + ' SolverFeatherstone step':44s} {fs:10.1f} steps/s")
    out["pd_delay_dc"] = time_actuators(pd_model, steps)
    report(f"{label} PD + delay({DELAY}) + DC motor", out["pd_delay_dc"], fs, ndof)
    if mlp_path is not None and act.get("mlp") is not None:
        try:
            mlp_model = build(nt, worlds, device, act["mlp"], None, None, {"model_path": mlp_path})
            out["mlp"] = time_actuators(mlp_model, steps)
            report(f"{label} MLP 2x64 (ONNX)", out["mlp"], fs, ndof)
        except Exception as e:  # noqa: BLE001 - the reference may not load this checkpoint
            print(f"  ({label}: MLP policy not timed: {type(e).__name__}: {str(e)[:160]})")
    return out


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worlds", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--device", default=None, help="Warp device (default: Warp's default device)")
    parser.add_argument("--quick", action="store_true", help="64 worlds, 20 steps: a smoke run")
    parser.add_argument("--no-reference", action="store_true", help="do not time the reference engine")
    protocol.add_arguments(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.worlds, args.steps = 64, 20
    table = protocol.Results.from_args(__file__, args)
    wp.config.log_level = wp.LOG_WARNING
    wp.init()
    device = str(wp.get_device(args.device))
    import armillary
    import armillary.actuators as A

    ours = {"pd": A.ControllerPD, "mlp": A.ControllerNeuralMLP, "ClampingDCMotor": A.ClampingDCMotor}
    reference = None
    if not args.no_reference:
        try:
            protocol.reference_on_path()
            import newton
            import newton.actuators as NA

            reference = (newton, {"pd": NA.DrivePD, "mlp": NA.DriveNeuralMLP, "ClampingDCMotor": NA.ClampingDCMotor})
        except Exception:  # noqa: BLE001 - the reference engine is an optional black-box baseline
            reference = None
    print(f"== 12-DOF quadruped x {args.worlds} worlds ({args.worlds * 12} actuated DOFs), {args.steps} steps, "
          f"device {device}")  # fmt: skip
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        mlp_path = os.path.join(tmp, "policy.onnx")
        try:
            write_mlp(mlp_path)
        except ImportError:
            print("  (onnx not installed: no MLP policy)")
            mlp_path = None
        results["armillary"] = run_engine("armillary", armillary, ours, args.worlds, args.steps, device, mlp_path)
        if reference is not None:
            results["newton"] = run_engine("newton", reference[0], reference[1], args.worlds, args.steps, device,
                                           mlp_path)  # fmt: skip
            for key, what in (("pd_delay_dc", "PD + delay + DC motor"), ("mlp", "MLP policy")):
                a, b = results["armillary"].get(key), results["newton"].get(key)
                if a and b:
                    print(f"  ratio armillary/newton, {what}: {a / b:.2f}")
        elif not args.no_reference:
            print("  (reference engine not importable: no side-by-side timing)")
    scenes = {"featherstone": "SolverFeatherstone step (for scale)", "pd_delay_dc": f"PD + delay({DELAY}) + DC motor",
              "mlp": "MLP 2x64 (ONNX)"}  # fmt: skip
    for key, scene in scenes.items():
        for engine, rates in results.items():
            vs = "newton" if engine == "armillary" and results.get("newton", {}).get(key) else None
            table.add(f"{scene}, quadruped x {args.worlds} worlds", engine, rates.get(key), ratio_vs=vs,
                      dofs=args.worlds * 12)
    return results


if __name__ == "__main__":
    main()

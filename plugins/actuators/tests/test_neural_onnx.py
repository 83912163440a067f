"""Neural controllers on ONNX checkpoints built in the test with ``onnx.helper``.

Oracles: a numpy evaluation of the same weights written here, and onnxruntime
on the very checkpoint when it is installed (both must agree to 1e-5).
"""

from __future__ import annotations

import itertools
import json
import sys

import numpy as np
import pytest
import warp as wp

onnx = pytest.importorskip("onnx")
from armillary_actuators.neural import (
    ControllerNeuralLSTM,
    ControllerNeuralMLP,
    DriveNeuralLSTM,
    DriveNeuralMLP,
)
from onnx import TensorProto, helper, numpy_helper

try:
    import onnxruntime as ort
except ImportError:  # the numpy oracle still runs
    ort = None

TOL = {"rtol": 1e-5, "atol": 1e-5}


# ----------------------------------------------------------------------------- helpers
def save_model(path, nodes, inputs, outputs, inits=(), meta=None, opset=17):
    graph = helper.make_graph(
        nodes, "policy",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    for k, v in (meta or {}).items():
        model.metadata_props.append(onnx.StringStringEntryProto(key=k, value=v if isinstance(v, str) else json.dumps(v)))
    onnx.save(model, str(path))
    return str(path)


def ort_run(path, feeds):
    if ort is None:
        return None
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def u32(values):
    return wp.array(np.asarray(values, np.uint32), dtype=wp.uint32)


def f32(values):
    return wp.array(np.asarray(values, np.float32), dtype=wp.float32)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def elu(x, a=1.0):
    return np.where(x >= 0, x, a * (np.exp(x) - 1))


def mlp_weights(rng, sizes):
    return [((rng.standard_normal((o, i)) / np.sqrt(i)).astype(np.float32), (0.1 * rng.standard_normal(o)).astype(np.float32))
            for i, o in itertools.pairwise(sizes)]


def make_mlp(path, weights, meta=None, acts=("Elu", "Tanh")):
    """Gemm(transB) + activation per hidden layer, a final Gemm; batch axis symbolic."""
    nodes, inits, prev = [], [], "obs"
    for k, (W, b) in enumerate(weights):
        inits += [(f"W{k}", W), (f"b{k}", b)]
        out = f"z{k}" if k < len(weights) - 1 else "effort"
        nodes.append(helper.make_node("Gemm", [prev, f"W{k}", f"b{k}"], [out], transB=1, name=f"fc{k}"))
        if k < len(weights) - 1:
            nodes.append(helper.make_node(acts[k], [out], [f"a{k}"], name=f"act{k}"))
            prev = f"a{k}"
    return save_model(path, nodes, [("obs", ["N", weights[0][0].shape[1]])], [("effort", ["N", 1])], inits, meta)


def np_mlp(weights, x, acts=("Elu", "Tanh")):
    f = {"Elu": elu, "Tanh": np.tanh, "Relu": lambda v: np.maximum(v, 0)}
    for k, (W, b) in enumerate(weights):
        x = x @ W.T + b
        if k < len(weights) - 1:
            x = f[acts[k]](x)
    return x


def lstm_weights(rng, n_in, hidden, peepholes=False):
    W = (0.5 * rng.standard_normal((1, 4 * hidden, n_in))).astype(np.float32)
    R = (0.3 * rng.standard_normal((1, 4 * hidden, hidden))).astype(np.float32)
    B = (0.1 * rng.standard_normal((1, 8 * hidden))).astype(np.float32)
    P = (0.2 * rng.standard_normal((1, 3 * hidden))).astype(np.float32) if peepholes else None
    return W, R, B, P


def np_lstm_step(x, h, c, W, R, B, P=None):
    """ONNX LSTM, one step, gate order (i, o, f, c)."""
    H = h.shape[1]
    g = x @ W[0].T + h @ R[0].T + B[0, :4 * H] + B[0, 4 * H:]
    gi, go, gf, gc = g[:, :H], g[:, H:2 * H], g[:, 2 * H:3 * H], g[:, 3 * H:]
    p = np.zeros(3 * H, np.float32) if P is None else P[0]
    i = sigmoid(gi + p[:H] * c)
    f = sigmoid(gf + p[2 * H:] * c)
    c2 = f * c + i * np.tanh(gc)
    o = sigmoid(go + p[H:2 * H] * c2)
    return o * np.tanh(c2), c2


class Rig:
    """Random joint arrays of ``size`` entries driven at ``idx`` (a permutation subset)."""

    def __init__(self, rng, size, idx):
        self.rng, self.size = rng, size
        self.idx = np.asarray(idx)
        self.w_idx = u32(idx)

    def draw(self):
        r = self.rng
        q, qd, tq, tqd = (r.uniform(-1, 1, self.size).astype(np.float32) for _ in range(4))
        return q, qd, tq, tqd

    def compute(self, ctrl, arrays, state, next_state=None, **kw):
        q, qd, tq, tqd = arrays
        forces = wp.zeros(len(self.idx), dtype=wp.float32)
        ctrl.compute(f32(q), f32(qd), f32(tq), f32(tqd), None, self.w_idx, self.w_idx, self.w_idx, self.w_idx,
                     forces, state, 0.01, next_state=next_state, **kw)
        return forces.numpy()


# ----------------------------------------------------------------------------- MLP
def test_mlp_2x64_history_matches_numpy_and_onnxruntime(tmp_path):
    rng = np.random.default_rng(0)
    input_idx = [0, 1, 3]
    meta = {"pos_scale": 2.0, "vel_scale": 0.25, "effort_scale": 7.5, "input_order": "vel_pos",
            "input_idx": input_idx}
    weights = mlp_weights(rng, [6, 64, 64, 1])
    path = make_mlp(tmp_path / "mlp.onnx", weights, meta)
    ctrl = ControllerNeuralMLP(path)
    assert (ctrl.pos_scale, ctrl.vel_scale, ctrl.effort_scale) == (2.0, 0.25, 7.5)
    assert ctrl.input_order == "vel_pos" and ctrl.input_idx == input_idx and ctrl.history_length == 4
    assert ctrl.is_stateful() and ctrl.is_graphable()

    n = 24  # e.g. 2 worlds x 12 DOFs, driven through a permuted subset of 30 entries
    rig = Rig(rng, 30, rng.permutation(30)[:n])
    states = [ctrl.state(n, "cpu"), ctrl.state(n, "cpu")]
    pe_hist, v_hist = [], []
    for _step in range(6):
        arrays = rig.draw()
        q, qd, tq, _ = arrays
        got = rig.compute(ctrl, arrays, states[0], states[1])
        states.reverse()
        pe_hist.insert(0, (tq - q)[rig.idx])
        v_hist.insert(0, qd[rig.idx])
        old = lambda h, k: h[k] if k < len(h) else np.zeros(n, np.float32)
        pe = np.stack([old(pe_hist, k) for k in input_idx], 1) * 2.0
        v = np.stack([old(v_hist, k) for k in input_idx], 1) * 0.25
        x = np.concatenate([v, pe], 1).astype(np.float32)
        np.testing.assert_allclose(got, 7.5 * np_mlp(weights, x)[:, 0], **TOL)
        ref = ort_run(path, {"obs": x})
        if ref is not None:
            np.testing.assert_allclose(got, 7.5 * ref[0][:, 0], **TOL)
    # the history state: row 0 = newest position error
    np.testing.assert_allclose(states[0].pos_error_history.numpy()[0], pe_hist[0], rtol=0, atol=0)
    np.testing.assert_allclose(states[0].vel_history.numpy()[3], v_hist[3], rtol=0, atol=0)


def test_mlp_runs_one_launch_per_layer(tmp_path):
    rng = np.random.default_rng(1)
    path = make_mlp(tmp_path / "mlp.onnx", mlp_weights(rng, [2, 64, 64, 1]))
    ctrl = ControllerNeuralMLP(path, device="cpu")
    ctrl.finalize(wp.get_device("cpu"), 48)
    rt = ctrl._runtime(48, "cpu")
    assert [layer.kind for layer in ctrl.graph.layers] == ["dense"] * 3  # bias + activation fused
    assert len(rt.ws.launches) == 3


def test_mlp_defaults_and_metadata_blob_precedence(tmp_path):
    rng = np.random.default_rng(2)
    w = mlp_weights(rng, [2, 4, 1])
    ctrl = DriveNeuralMLP(make_mlp(tmp_path / "a.onnx", w))
    assert (ctrl.pos_scale, ctrl.vel_scale, ctrl.effort_scale) == (1.0, 1.0, 1.0)
    assert (ctrl.input_order, ctrl.input_idx, ctrl.history_length) == ("pos_vel", [0], 1)
    meta = {"metadata": json.dumps({"pos_scale": 2.0, "input_idx": [0, 2]}), "pos_scale": "3.0",
            "vel_scale": "0.5", "input_order": "pos_vel"}
    ctrl = ControllerNeuralMLP(make_mlp(tmp_path / "b.onnx", mlp_weights(rng, [4, 4, 1]), meta))
    assert (ctrl.pos_scale, ctrl.vel_scale, ctrl.input_idx, ctrl.history_length) == (2.0, 0.5, [0, 2], 3)


def test_mlp_torch_style_export_and_static_batch(tmp_path):
    """MatMul + Add + Relu (torch's export pattern) and a graph exported with a static batch of 1."""
    rng = np.random.default_rng(3)
    W1 = rng.standard_normal((2, 8)).astype(np.float32)
    b1 = rng.standard_normal(8).astype(np.float32)
    W2 = rng.standard_normal((8, 1)).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["m"]),
        helper.make_node("Add", ["b1", "m"], ["s"]),
        helper.make_node("Relu", ["s"], ["h"]),
        helper.make_node("Reshape", ["h", "shape"], ["hr"]),  # literal [1, 8]: batch-1 export
        helper.make_node("MatMul", ["hr", "W2"], ["y"]),
    ]
    path = save_model(tmp_path / "s.onnx", nodes, [("x", [1, 2])], [("y", [1, 1])],
                      [("W1", W1), ("b1", b1), ("W2", W2), ("shape", np.array([1, 8], np.int64))])
    ctrl = ControllerNeuralMLP(path)
    assert [layer.kind for layer in ctrl.graph.layers] == ["dense", "dense"]
    n = 5
    rig = Rig(rng, n, np.arange(n))
    arrays = rig.draw()
    got = rig.compute(ctrl, arrays, ctrl.state(n, "cpu"), ctrl.state(n, "cpu"))
    q, qd, tq, _ = arrays
    x = np.stack([tq - q, qd], 1)
    np.testing.assert_allclose(got, (np.maximum(x @ W1 + b1, 0) @ W2)[:, 0], **TOL)


def test_operator_coverage_matches_numpy_and_onnxruntime(tmp_path):
    rng = np.random.default_rng(4)
    c1 = rng.standard_normal(4).astype(np.float32)
    c3 = rng.uniform(0.5, 2.0, 4).astype(np.float32)
    Wc = rng.standard_normal((20, 3)).astype(np.float32)
    bc = rng.standard_normal(3).astype(np.float32)
    Wo = rng.standard_normal((1, 2)).astype(np.float32)
    nodes = [
        helper.make_node("Reshape", ["obs", "shape_n4"], ["x"]),                       # (N, 2, 2) -> (N, 4)
        helper.make_node("Sub", ["x", "c1"], ["a"]),
        helper.make_node("Constant", [], ["c2"], value=numpy_helper.from_array(np.array(1.5, np.float32))),
        helper.make_node("Mul", ["c2", "a"], ["b"]),
        helper.make_node("Div", ["b", "c3"], ["d"]),
        helper.make_node("Elu", ["d"], ["e1"], alpha=0.7),
        helper.make_node("Selu", ["d"], ["e2"]),
        helper.make_node("LeakyRelu", ["d"], ["e3"], alpha=0.2),
        helper.make_node("Softplus", ["d"], ["e4"]),
        helper.make_node("Sigmoid", ["d"], ["e5"]),
        helper.make_node("Identity", ["e5"], ["e6"]),
        helper.make_node("Concat", ["e1", "e2", "e3", "e4", "e6"], ["cat"], axis=1),   # (N, 20)
        helper.make_node("Unsqueeze", ["cat", "ax1"], ["u"]),                          # (N, 1, 20)
        helper.make_node("Reshape", ["u", "shape_045"], ["r"]),                        # (N, 4, 5)
        helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1]),                   # (N, 5, 4)
        helper.make_node("Flatten", ["t"], ["fl"], axis=1),                            # (N, 20)
        helper.make_node("Constant", [], ["Wc"], value=numpy_helper.from_array(Wc)),
        helper.make_node("MatMul", ["fl", "Wc"], ["m"]),
        helper.make_node("Add", ["m", "bc"], ["ad"]),
        helper.make_node("Tanh", ["ad"], ["th"]),                                      # (N, 3)
        helper.make_node("Unsqueeze", ["th", "ax2"], ["th3"]),
        helper.make_node("Squeeze", ["th3", "ax2"], ["th2"]),
        helper.make_node("Slice", ["th2", "st", "en", "ax1"], ["sl"]),                 # (N, 2)
        helper.make_node("Gather", ["th2", "g0"], ["g"], axis=1),                      # (N, 1)
        helper.make_node("Sub", ["sl", "g"], ["diff"]),                                # broadcast (N,2)-(N,1)
        helper.make_node("Gemm", ["diff", "Wo"], ["y"], transB=1, alpha=0.5),
    ]
    inits = [("shape_n4", np.array([0, 4], np.int64)), ("c1", c1), ("c3", c3), ("bc", bc), ("Wo", Wo),
             ("ax1", np.array([1], np.int64)), ("ax2", np.array([2], np.int64)),
             ("shape_045", np.array([0, 4, 5], np.int64)), ("st", np.array([1], np.int64)),
             ("en", np.array([3], np.int64)), ("g0", np.array([0], np.int64))]
    # the controller feeds 2 values per history step: input_idx [0, 1] -> 4 values, declared (N, 2, 2)
    path = save_model(tmp_path / "ops.onnx", nodes, [("obs", ["N", 2, 2])], [("y", ["N", 1])], inits,
                      {"input_idx": [0, 1], "pos_scale": 1.0})
    ctrl = ControllerNeuralMLP(path)
    n = 9
    rig = Rig(rng, n, np.arange(n)[::-1])
    states = [ctrl.state(n, "cpu"), ctrl.state(n, "cpu")]
    prev = np.zeros((n, 2), np.float32)
    for _ in range(2):
        arrays = rig.draw()
        q, qd, tq, _ = arrays
        got = rig.compute(ctrl, arrays, states[0], states[1])
        states.reverse()
        cur = np.stack([(tq - q)[rig.idx], qd[rig.idx]], 1)
        x = np.stack([cur[:, 0], prev[:, 0], cur[:, 1], prev[:, 1]], 1).astype(np.float32)
        prev = cur
        d = 1.5 * (x - c1) / c3
        selu = 1.05070102214813232421875 * np.where(d > 0, d, 1.67326319217681884765625 * (np.exp(d) - 1))
        cat = np.concatenate([elu(d, 0.7), selu, np.where(d >= 0, d, 0.2 * d), np.logaddexp(0, d), sigmoid(d)], 1)
        fl = cat.reshape(n, 4, 5).transpose(0, 2, 1).reshape(n, 20)
        th = np.tanh(fl @ Wc + bc)
        want = 0.5 * ((th[:, 1:3] - th[:, :1]) @ Wo.T)[:, 0]
        np.testing.assert_allclose(got, want, **TOL)
        ref = ort_run(path, {"obs": x.reshape(n, 2, 2)})
        if ref is not None:
            np.testing.assert_allclose(got, ref[0][:, 0], **TOL)


UNARY = {
    "Relu": ({}, lambda x: np.maximum(x, 0)),
    "Tanh": ({}, np.tanh),
    "Sigmoid": ({}, sigmoid),
    "Elu": ({"alpha": 0.5}, lambda x: elu(x, 0.5)),
    "LeakyRelu": ({}, lambda x: np.where(x >= 0, x, 0.01 * x)),
    "Softplus": ({}, lambda x: np.logaddexp(0, x)),
    "Softsign": ({}, lambda x: x / (1 + np.abs(x))),
    "HardSigmoid": ({"alpha": 0.3}, lambda x: np.clip(0.3 * x + 0.5, 0, 1)),
    "Neg": ({}, np.negative),
    "Abs": ({}, np.abs),
    "Exp": ({}, np.exp),
}


def test_unary_operators(tmp_path):
    from armillary_actuators.onnx_graph import build_graph
    from armillary_actuators.onnx_kernels import Program

    rng = np.random.default_rng(5)
    x = rng.uniform(-3, 3, (7, 3)).astype(np.float32)
    for op, (attrs, fn) in {**UNARY, "Clip": ({}, lambda v: np.clip(v, -0.5, 1.0))}.items():
        inputs = ["x", "lo", "hi"] if op == "Clip" else ["x"]
        inits = [("lo", np.array(-0.5, np.float32)), ("hi", np.array(1.0, np.float32))] if op == "Clip" else []
        path = save_model(tmp_path / f"{op}.onnx", [helper.make_node(op, inputs, ["y"], **attrs)],
                          [("x", ["N", 3])], [("y", ["N", 3])], inits)
        graph = build_graph(onnx.load(path), path, "test")
        ws = Program(graph, "cpu").workspace(7)
        ws.buffer("x").assign(x)
        ws.run()
        np.testing.assert_allclose(ws.buffer("y").numpy(), fn(x), err_msg=op, **TOL)
        ref = ort_run(path, {"x": x})
        if ref is not None:
            np.testing.assert_allclose(ws.buffer("y").numpy(), ref[0], err_msg=op, **TOL)


# ----------------------------------------------------------------------------- LSTM
def make_lstm(path, W, R, B, P, Wo, bo, meta, layout=0):
    H = R.shape[2]
    ins = ["x", "W", "R", "B", "", "h0", "c0"] + (["P"] if P is not None else [])
    nodes = [
        helper.make_node("LSTM", ins, ["Y", "h1", "c1"], hidden_size=H, layout=layout, name="lstm"),
        helper.make_node("Squeeze", ["h1", "ax0"], ["hs"]),
        helper.make_node("Gemm", ["hs", "Wo", "bo"], ["effort"], transB=1),
    ]
    inits = [("W", W), ("R", R), ("B", B), ("Wo", Wo), ("bo", bo), ("ax0", np.array([0], np.int64))]
    if P is not None:
        inits.append(("P", P))
    return save_model(path, nodes, [("x", [1, "N", 2]), ("h0", [1, "N", H]), ("c0", [1, "N", H])],
                      [("effort", ["N", 1]), ("h1", [1, "N", H]), ("c1", [1, "N", H])], inits, meta)


def test_lstm_matches_numpy_and_onnxruntime(tmp_path):
    rng = np.random.default_rng(6)
    H = 8
    W, R, B, P = lstm_weights(rng, 2, H, peepholes=True)
    Wo = (0.5 * rng.standard_normal((1, H))).astype(np.float32)
    bo = np.array([0.05], np.float32)
    meta = {"num_layers": 1, "hidden_size": H, "pos_scale": 1.5, "vel_scale": 0.5, "effort_scale": 4.0}
    path = make_lstm(tmp_path / "lstm.onnx", W, R, B, P, Wo, bo, meta)
    ctrl = ControllerNeuralLSTM(path)
    assert ctrl.is_stateful() and ctrl.is_graphable() and (ctrl.num_layers, ctrl.hidden_size) == (1, H)
    n = 10
    rig = Rig(rng, 13, rng.permutation(13)[:n])
    states = [ctrl.state(n, "cpu"), ctrl.state(n, "cpu")]
    assert states[0].hidden.shape == (1, n, H)
    h = np.zeros((n, H), np.float32)
    c = np.zeros((n, H), np.float32)
    for _ in range(5):
        arrays = rig.draw()
        q, qd, tq, _ = arrays
        got = rig.compute(ctrl, arrays, states[0], states[1])
        states.reverse()
        x = np.stack([1.5 * (tq - q)[rig.idx], 0.5 * qd[rig.idx]], 1).astype(np.float32)
        ref = ort_run(path, {"x": x[None], "h0": h[None], "c0": c[None]})
        h, c = np_lstm_step(x, h, c, W, R, B, P)
        np.testing.assert_allclose(got, 4.0 * (h @ Wo.T + bo)[:, 0], **TOL)
        np.testing.assert_allclose(states[0].hidden.numpy()[0], h, **TOL)
        np.testing.assert_allclose(states[0].cell.numpy()[0], c, **TOL)
        if ref is not None:
            np.testing.assert_allclose(got, 4.0 * ref[0][:, 0], **TOL)
            np.testing.assert_allclose(states[0].hidden.numpy()[0], ref[1][0], **TOL)


def test_two_layer_lstm_with_named_tensors(tmp_path):
    """Stacked layers as two LSTM nodes reading Gather-ed slices of the (2, N, H) state; reference role names."""
    rng = np.random.default_rng(7)
    H = 6
    W1, R1, B1, _ = lstm_weights(rng, 2, H)
    W2, R2, B2, _ = lstm_weights(rng, H, H)
    Wo = rng.standard_normal((H, 1)).astype(np.float32)
    i0 = np.array(0, np.int64)
    nodes = [
        helper.make_node("Gather", ["h_in", "i0"], ["h0a"], axis=0),
        helper.make_node("Unsqueeze", ["h0a", "ax0"], ["h0"]),
        helper.make_node("Gather", ["c_in", "i0"], ["c0a"], axis=0),
        helper.make_node("Unsqueeze", ["c0a", "ax0"], ["c0"]),
        helper.make_node("Slice", ["h_in", "s1", "e2", "ax0"], ["h1"]),
        helper.make_node("Slice", ["c_in", "s1", "e2", "ax0"], ["c1"]),
        helper.make_node("LSTM", ["obs", "W1", "R1", "B1", "", "h0", "c0"], ["Y1", "hA", "cA"], hidden_size=H),
        helper.make_node("Squeeze", ["Y1", "ax1"], ["x2"]),
        helper.make_node("LSTM", ["x2", "W2", "R2", "B2", "", "h1", "c1"], ["Y2", "hB", "cB"], hidden_size=H),
        helper.make_node("Concat", ["hA", "hB"], ["h_out"], axis=0),
        helper.make_node("Concat", ["cA", "cB"], ["c_out"], axis=0),
        helper.make_node("Squeeze", ["Y2", "ax01"], ["top"]),
        helper.make_node("MatMul", ["top", "Wo"], ["tau"]),
    ]
    inits = [("W1", W1), ("R1", R1), ("B1", B1), ("W2", W2), ("R2", R2), ("B2", B2), ("Wo", Wo), ("i0", i0),
             ("ax0", np.array([0], np.int64)), ("ax1", np.array([1], np.int64)), ("ax01", np.array([0, 1], np.int64)),
             ("s1", np.array([1], np.int64)), ("e2", np.array([2], np.int64))]
    meta = {"num_layers": 2, "hidden_size": H, "input_name": "obs", "hidden_in_name": "h_in", "cell_in_name": "c_in",
            "output_name": "tau", "hidden_out_name": "h_out", "cell_out_name": "c_out"}
    # outputs deliberately listed in another order: the role names decide
    path = save_model(tmp_path / "l2.onnx", nodes,
                      [("c_in", [2, "N", H]), ("obs", [1, "N", 2]), ("h_in", [2, "N", H])],
                      [("h_out", [2, "N", H]), ("tau", ["N", 1]), ("c_out", [2, "N", H])], inits, meta)
    ctrl = ControllerNeuralLSTM(path)
    n = 4
    rig = Rig(rng, n, np.arange(n))
    states = [ctrl.state(n, "cpu"), ctrl.state(n, "cpu")]
    h = np.zeros((2, n, H), np.float32)
    c = np.zeros((2, n, H), np.float32)
    for _ in range(3):
        arrays = rig.draw()
        q, qd, tq, _ = arrays
        got = rig.compute(ctrl, arrays, states[0], states[1])
        states.reverse()
        x = np.stack([tq - q, qd], 1).astype(np.float32)
        ref = ort_run(path, {"obs": x[None], "h_in": h, "c_in": c})
        ha, ca = np_lstm_step(x, h[0], c[0], W1, R1, B1)
        hb, cb = np_lstm_step(ha, h[1], c[1], W2, R2, B2)
        h, c = np.stack([ha, hb]), np.stack([ca, cb])
        np.testing.assert_allclose(got, (hb @ Wo)[:, 0], **TOL)
        np.testing.assert_allclose(states[0].hidden.numpy(), h, **TOL)
        np.testing.assert_allclose(states[0].cell.numpy(), c, **TOL)
        if ref is not None:
            np.testing.assert_allclose(got, ref[1][:, 0], **TOL)


# ----------------------------------------------------------------------------- errors
def test_unsupported_operator_names_operator_and_node(tmp_path):
    nodes = [helper.make_node("Softmax", ["x"], ["y"], name="policy/softmax")]
    path = save_model(tmp_path / "bad.onnx", nodes, [("x", ["N", 2])], [("y", ["N", 2])])
    with pytest.raises(ValueError, match=r"ControllerNeuralMLP.*'Softmax'.*'policy/softmax'"):
        ControllerNeuralMLP(path)


@pytest.mark.parametrize("nodes, init, msg", [
    ([helper.make_node("Concat", ["x", "x"], ["y"], axis=0, name="cat")], [], "batch axis"),
    ([helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")], [("s", np.array([-1, 1], np.int64))], "mixes the batch"),
    ([helper.make_node("MatMul", ["x", "x"], ["y"], name="mm")], [], "both operands"),
    ([helper.make_node("Gemm", ["x", "w"], ["y"], name="g")], [], "constant"),
])
def test_graph_that_mixes_actuators_is_rejected(tmp_path, nodes, init, msg):
    inputs = [("x", ["N", 2])] + ([("w", [2, 1])] if nodes[0].op_type == "Gemm" else [])
    path = save_model(tmp_path / "bad.onnx", nodes, inputs, [("y", ["N", 1])], init)
    with pytest.raises(ValueError, match=rf"ControllerNeuralMLP: ONNX operator '{nodes[0].op_type}'.*{msg}"):
        ControllerNeuralMLP(path)


def test_lstm_requires_num_layers_and_hidden_size(tmp_path):
    rng = np.random.default_rng(8)
    W, R, B, _ = lstm_weights(rng, 2, 4)
    Wo, bo = np.ones((1, 4), np.float32), np.zeros(1, np.float32)
    for meta, missing in (({"hidden_size": 4}, "num_layers"), ({"num_layers": 1}, "hidden_size")):
        path = make_lstm(tmp_path / f"{missing}.onnx", W, R, B, None, Wo, bo, meta)
        with pytest.raises(ValueError, match=rf"ControllerNeuralLSTM.*missing the required key '{missing}'"):
            ControllerNeuralLSTM(path)
    path = make_lstm(tmp_path / "bad.onnx", W, R, B, None, Wo, bo, {"num_layers": 1, "hidden_size": 0})
    with pytest.raises(ValueError, match="hidden_size"):
        ControllerNeuralLSTM(path)


def test_input_size_mismatch_names_controller_checkpoint_and_sizes(tmp_path):
    rng = np.random.default_rng(9)
    path = make_mlp(tmp_path / "five.onnx", mlp_weights(rng, [5, 4, 1]), {"input_idx": [0, 1]})
    with pytest.raises(ValueError, match=r"ControllerNeuralMLP.*five\.onnx.*5 values per actuator.*gives 4"):
        ControllerNeuralMLP(path)
    W, R, B, _ = lstm_weights(rng, 2, 8)
    path = make_lstm(tmp_path / "l8.onnx", W, R, B, None, np.ones((1, 8), np.float32), np.zeros(1, np.float32),
                     {"num_layers": 1, "hidden_size": 6})
    with pytest.raises(ValueError, match=r"ControllerNeuralLSTM.*l8\.onnx.*8 values per actuator.*gives 6"):
        ControllerNeuralLSTM(path)
    path = make_mlp(tmp_path / "two_out.onnx", mlp_weights(rng, [2, 2]))
    with pytest.raises(ValueError, match=r"output.*2 values per actuator"):
        ControllerNeuralMLP(path)


@pytest.mark.parametrize("meta, msg", [
    ({"pos_scale": "0"}, "pos_scale"),
    ({"effort_scale": "inf"}, "effort_scale"),
    ({"vel_scale": "true"}, "vel_scale"),
    ({"input_order": "pos_then_vel"}, "input_order"),
    ({"input_idx": "[]"}, "input_idx"),
    ({"input_idx": "[0, -1]"}, "input_idx"),
    ({"input_idx": "[0.5]"}, "input_idx"),
    ({"input_idx": "2"}, "input_idx"),
    ({"metadata": "{not json"}, "not valid JSON"),
    ({"metadata": "[1, 2]"}, "JSON object"),
])
def test_bad_metadata_is_a_value_error(tmp_path, meta, msg):
    path = make_mlp(tmp_path / "m.onnx", mlp_weights(np.random.default_rng(10), [2, 3, 1]), meta)
    with pytest.raises(ValueError, match=msg):
        ControllerNeuralMLP(path)


def test_paths_and_arguments(tmp_path):
    (tmp_path / "policy.h5").write_bytes(b"")
    with pytest.raises(ValueError, match=r"ControllerNeuralMLP.*suffix '\.h5'"):
        ControllerNeuralMLP(tmp_path / "policy.h5")
    with pytest.raises(FileNotFoundError, match="missing.onnx"):
        ControllerNeuralLSTM(tmp_path / "missing.onnx")
    (tmp_path / "junk.onnx").write_bytes(b"\x00not a protobuf\xff" * 10)
    with pytest.raises(ValueError, match="junk.onnx"):
        ControllerNeuralMLP(tmp_path / "junk.onnx")
    assert ControllerNeuralMLP.resolve_arguments({"model_path": tmp_path / "a.onnx"}) == {
        "model_path": str(tmp_path / "a.onnx")}
    with pytest.raises(ValueError, match=r"ControllerNeuralLSTM.*missing required argument 'model_path'"):
        ControllerNeuralLSTM.resolve_arguments({})
    with pytest.raises(ValueError, match=r"ControllerNeuralMLP.*unknown argument 'kp'"):
        ControllerNeuralMLP.resolve_arguments({"model_path": "a.onnx", "kp": 1.0})


def test_torch_checkpoint_without_torch_says_to_install_it(tmp_path, monkeypatch):
    (tmp_path / "policy.pt2").write_bytes(b"")
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    with pytest.raises(ImportError, match="pip install torch"):
        ControllerNeuralMLP(tmp_path / "policy.pt2")


# ----------------------------------------------------------------------------- state protocol
def test_state_protocol(tmp_path):
    rng = np.random.default_rng(11)
    path = make_mlp(tmp_path / "m.onnx", mlp_weights(rng, [4, 8, 1]), {"input_idx": [0, 1]})
    ctrl = ControllerNeuralMLP(path)
    n = 3
    rig = Rig(rng, n, np.arange(n))
    arrays = rig.draw()
    s = ctrl.state(n, "cpu")
    with pytest.raises(ValueError, match="stateful"):
        rig.compute(ctrl, arrays, None)
    with pytest.raises(ValueError, match="two different State objects"):
        rig.compute(ctrl, arrays, s, s)
    with pytest.raises(ValueError, match="created for 5 actuators"):
        rig.compute(ctrl, arrays, ctrl.state(5, "cpu"), s)
    # reference protocol (compute without next_state, then update_state) == next_state protocol
    a0, a1 = ctrl.state(n, "cpu"), ctrl.state(n, "cpu")
    b0, b1 = ctrl.state(n, "cpu"), ctrl.state(n, "cpu")
    for _ in range(3):
        arrays = rig.draw()
        fa = rig.compute(ctrl, arrays, a0, a1)
        fb = rig.compute(ctrl, arrays, b0)
        ctrl.update_state(b0, b1)
        np.testing.assert_array_equal(fa, fb)
        np.testing.assert_array_equal(a1.pos_error_history.numpy(), b1.pos_error_history.numpy())
        a0, a1, b0, b1 = a1, a0, b1, b0
    a0.reset()
    assert not a0.pos_error_history.numpy().any()


def test_through_actuator(tmp_path):
    actuator_mod = pytest.importorskip("armillary_actuators.actuator")
    rng = np.random.default_rng(12)
    weights = mlp_weights(rng, [2, 16, 1])
    path = make_mlp(tmp_path / "m.onnx", weights, {"effort_scale": 2.0})
    indices = [4, 1, 3]
    act = actuator_mod.Actuator(u32(indices), controller=ControllerNeuralMLP(path))
    assert act.is_stateful() and act.is_graphable()
    import types

    q, qd, tq = (rng.uniform(-1, 1, 6).astype(np.float32) for _ in range(3))
    state = types.SimpleNamespace(joint_q=f32(q), joint_qd=f32(qd))
    control = types.SimpleNamespace(joint_target_q=f32(tq), joint_target_qd=wp.zeros(6, dtype=wp.float32),
                                    joint_act=None, joint_f=f32(np.ones(6)))
    with pytest.raises(ValueError, match="state"):
        act.step(state, control, dt=0.01)
    s0, s1 = act.state(), act.state()
    act.step(state, control, s0, s1, dt=0.01)
    x = np.stack([tq - q, qd], 1)[indices]
    want = np.ones(6, np.float32)
    want[indices] += 2.0 * np_mlp(weights, x, acts=("Elu",))[:, 0]
    np.testing.assert_allclose(control.joint_f.numpy(), want, **TOL)


def test_registered_names():
    import armillary

    assert armillary.actuators.ControllerNeuralMLP is ControllerNeuralMLP
    assert armillary.actuators.DriveNeuralLSTM is DriveNeuralLSTM is ControllerNeuralLSTM


def test_builder_entries_become_one_batched_actuator(tmp_path):
    import armillary

    if not hasattr(armillary.ModelBuilder, "add_actuator"):
        pytest.skip("ModelBuilder.add_actuator not available")
    rng = np.random.default_rng(13)
    weights = mlp_weights(rng, [2, 8, 1])
    path = make_mlp(tmp_path / "policy.onnx", weights, {"effort_scale": 0.5})
    robot = armillary.ModelBuilder()
    for _ in range(3):
        link = robot.add_link()
        joint = robot.add_joint_revolute(parent=-1, child=link, axis=armillary.Axis.Z)
        robot.add_articulation([joint])
        robot.add_actuator("ControllerNeuralMLP", index=robot.joint_qd_start[joint], model_path=path)
    scene = armillary.ModelBuilder()
    scene.replicate(robot, 2)
    model = scene.finalize()
    assert len(model.actuators) == 1 and model.actuators[0].num_actuators == 6
    act = model.actuators[0]
    state, control = model.state(), model.control()
    tq = rng.uniform(-1, 1, 6).astype(np.float32)
    control.joint_target_q.assign(tq)
    control.joint_f.zero_()
    act.step(state, control, act.state(), act.state(), dt=0.01)
    x = np.stack([tq, np.zeros(6, np.float32)], 1)
    np.testing.assert_allclose(control.joint_f.numpy(), 0.5 * np_mlp(weights, x, acts=("Elu",))[:, 0], **TOL)


def test_dense_tile_kernels_differing_only_in_activation_do_not_share_a_module():
    """Warp's module hash does not cover the constants of the activation function handed to
    tile_map: without distinct names a ReLU and a tanh layer of one tile shape shared one module
    (and kernel-cache entry), so a warm cache gave one of them the other's activation."""
    from armillary_actuators import onnx_kernels

    relu = onnx_kernels.dense_tile_kernel(8, 16, 1, 0.0, 0.0)
    tanh = onnx_kernels.dense_tile_kernel(8, 16, 2, 0.0, 0.0)
    leaky_a = onnx_kernels.dense_tile_kernel(8, 16, 6, 0.01, 0.0)
    leaky_b = onnx_kernels.dense_tile_kernel(8, 16, 6, 0.2, 0.0)
    kernels = [relu, tanh, leaky_a, leaky_b]
    assert len({k.module.name for k in kernels}) == 4
    assert len({k.module.get_module_hash() for k in kernels}) == 4
    assert onnx_kernels.dense_tile_kernel(8, 16, 1, 0.0, 0.0) is relu

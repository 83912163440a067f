"""Neural controllers on Torch ``.pt2`` archives (``torch.export.save`` with a ``metadata.json`` extra file)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import warp as wp

torch = pytest.importorskip("torch")

from armillary_actuators.neural import ControllerNeuralLSTM, ControllerNeuralMLP

TOL = {"rtol": 1e-5, "atol": 1e-5}


def u32(values):
    return wp.array(np.asarray(values, np.uint32), dtype=wp.uint32)


def f32(values):
    return wp.array(np.asarray(values, np.float32), dtype=wp.float32)


def save_pt2(path, net, args, meta=None, dynamic_shapes=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exported = torch.export.export(net, args, dynamic_shapes=dynamic_shapes)
    extra = {} if meta is None else {"metadata.json": json.dumps(meta)}
    torch.export.save(exported, str(path), extra_files=extra)
    return str(path)


def compute(ctrl, q, qd, tq, idx, state, next_state):
    forces = wp.zeros(len(idx), dtype=wp.float32)
    w = u32(idx)
    ctrl.compute(f32(q), f32(qd), f32(tq), wp.zeros(len(q), dtype=wp.float32), None, w, w, w, w, forces, state, 0.01,
                 next_state=next_state)
    return forces.numpy()


def test_mlp_pt2_round_trip(tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.ELU(), torch.nn.Linear(32, 32), torch.nn.Tanh(),
                              torch.nn.Linear(32, 1)).eval()
    meta = {"pos_scale": 2.0, "vel_scale": 0.5, "effort_scale": 3.0, "input_idx": [0, 2]}
    batch = torch.export.Dim("batch", min=2)
    path = save_pt2(tmp_path / "mlp.pt2", net, (torch.zeros(4, 4),), meta, dynamic_shapes=({0: batch},))
    ctrl = ControllerNeuralMLP(path)
    assert ctrl.backend == "torch" and not ctrl.is_graphable() and ctrl.is_stateful()
    assert (ctrl.pos_scale, ctrl.input_idx, ctrl.history_length) == (2.0, [0, 2], 3)
    rng = np.random.default_rng(0)
    n = 6
    idx = rng.permutation(8)[:n]
    states = [ctrl.state(n, "cpu"), ctrl.state(n, "cpu")]
    pe_hist, v_hist = [], []
    for _ in range(4):
        q, qd, tq = (rng.uniform(-1, 1, 8).astype(np.float32) for _ in range(3))
        got = compute(ctrl, q, qd, tq, idx, *states)
        states.reverse()
        pe_hist.insert(0, (tq - q)[idx])
        v_hist.insert(0, qd[idx])
        old = lambda h, k: h[k] if k < len(h) else np.zeros(n, np.float32)
        x = np.concatenate([2.0 * np.stack([old(pe_hist, k) for k in (0, 2)], 1),
                            0.5 * np.stack([old(v_hist, k) for k in (0, 2)], 1)], 1).astype(np.float32)
        with torch.no_grad():
            want = 3.0 * net(torch.from_numpy(x)).numpy()[:, 0]
        np.testing.assert_allclose(got, want, **TOL)


class _LSTMPolicy(torch.nn.Module):
    def __init__(self, hidden, layers):
        super().__init__()
        self.lstm = torch.nn.LSTM(2, hidden, num_layers=layers, batch_first=True)
        self.head = torch.nn.Linear(hidden, 1)

    def forward(self, x, hc):
        y, (h, c) = self.lstm(x, hc)
        return self.head(y), (h, c)


def test_lstm_pt2_round_trip_and_static_batch(tmp_path):
    torch.manual_seed(1)
    H, L, n = 5, 2, 3
    net = _LSTMPolicy(H, L).eval()
    # two distinct example tensors: torch.export would alias one tensor passed twice
    path = save_pt2(tmp_path / "lstm.pt2", net, (torch.zeros(n, 1, 2), (torch.zeros(L, n, H), torch.zeros(L, n, H))),
                    {"num_layers": L, "hidden_size": H, "effort_scale": 2.0, "vel_scale": 0.1})
    ctrl = ControllerNeuralLSTM(path)
    assert not ctrl.is_graphable()
    with pytest.raises(ValueError, match=r"exported for a batch of 3 .* drives 5"):
        ctrl.state(5, "cpu")
    states = [ctrl.state(n, "cpu"), ctrl.state(n, "cpu")]
    rng = np.random.default_rng(1)
    h = c = torch.zeros(L, n, H)
    for _ in range(3):
        q, qd, tq = (rng.uniform(-1, 1, n).astype(np.float32) for _ in range(3))
        got = compute(ctrl, q, qd, tq, np.arange(n), *states)
        states.reverse()
        x = torch.from_numpy(np.stack([tq - q, 0.1 * qd], 1).astype(np.float32)).reshape(n, 1, 2)
        with torch.no_grad():
            y, (h, c) = net(x, (h, c))
        np.testing.assert_allclose(got, 2.0 * y.numpy().reshape(n), **TOL)
        np.testing.assert_allclose(states[0].hidden.numpy(), h.numpy(), **TOL)
        np.testing.assert_allclose(states[0].cell.numpy(), c.numpy(), **TOL)


def test_pt2_metadata_and_size_errors(tmp_path):
    torch.manual_seed(2)
    n, H = 2, 3
    path = save_pt2(tmp_path / "nometa.pt2", _LSTMPolicy(H, 1),
                    (torch.zeros(n, 1, 2), (torch.zeros(1, n, H), torch.zeros(1, n, H))),
                    {"hidden_size": H})
    with pytest.raises(ValueError, match=r"ControllerNeuralLSTM.*nometa\.pt2.*'num_layers'"):
        ControllerNeuralLSTM(path)
    net = torch.nn.Linear(4, 1)
    path = save_pt2(tmp_path / "four.pt2", net, (torch.zeros(2, 4),), {"input_idx": [0]})
    with pytest.raises(ValueError, match=r"ControllerNeuralMLP.*four\.pt2.*4 values per actuator.*gives 2"):
        ControllerNeuralMLP(path)

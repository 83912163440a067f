"""Neural-network controllers: :class:`ControllerNeuralMLP` and :class:`ControllerNeuralLSTM`.

Each actuator evaluates the same trained network independently, batched over
the actuator's ``n`` DOFs. Checkpoints are chosen by suffix:

- ``.onnx`` (read with the optional ``onnx`` package): the graph is converted
  into batched layers (:mod:`.onnx_graph`) run by Warp kernels
  (:mod:`.onnx_kernels`) on the actuator's device; graphable, no onnxruntime
  or Torch at run time;
- ``.pt2`` (also ``.pt`` / ``.pth`` holding a pt2 archive) saved with
  ``torch.export.save``: run by Torch (:mod:`.torch_backend`); needs PyTorch;
  not graphable.

Checkpoint metadata (ONNX: ``metadata_props``, each value JSON or a plain
string, or one ``metadata`` entry holding a JSON object, which wins; pt2: the
``metadata.json`` extra file), with the reference engine's keys and defaults:

=================  ===========  ==============================================
key                default      meaning
=================  ===========  ==============================================
``pos_scale``      1.0          network input = pos_scale * (target_pos - q)
``vel_scale``      1.0          network input = vel_scale * qd
``effort_scale``   1.0          effort [N or N*m] = effort_scale * output
``input_order``    ``pos_vel``  MLP: position errors first (or ``vel_pos``)
``input_idx``      ``[0]``      MLP: history steps fed (0 = current step)
``num_layers``     (required)   LSTM: stacked layers
``hidden_size``    (required)   LSTM: hidden units per layer
=================  ===========  ==============================================

Scales must be finite and non-zero. ONNX LSTM checkpoints may also name the
graph's tensors (``input_name``, ``hidden_in_name``, ``cell_in_name``,
``output_name``, ``hidden_out_name``, ``cell_out_name``); without them the
graph's three inputs and outputs are taken in that order. Like the reference
engine, the networks see the joint velocity ``qd`` (not a velocity error); the
target velocity and the feedforward input are not used.
"""

from __future__ import annotations

import math
import numbers
import os
from typing import Any

import numpy as np
import warp as wp

from ._params import resolve
from .base import Controller

__all__ = ["ControllerNeuralLSTM", "ControllerNeuralMLP", "DriveNeuralLSTM", "DriveNeuralMLP"]

wp.set_module_options({"enable_backward": False})  # inference only

_ONNX_SUFFIXES = (".onnx",)
_TORCH_SUFFIXES = (".pt2", ".pt", ".pth")


# ----------------------------------------------------------------------------- kernels
@wp.kernel
def _mlp_input_kernel(
    positions: wp.array(dtype=wp.float32),
    velocities: wp.array(dtype=wp.float32),
    target_pos: wp.array(dtype=wp.float32),
    pos_indices: wp.array(dtype=wp.uint32),
    vel_indices: wp.array(dtype=wp.uint32),
    target_pos_indices: wp.array(dtype=wp.uint32),
    pos_hist: wp.array2d(dtype=wp.float32),
    vel_hist: wp.array2d(dtype=wp.float32),
    input_idx: wp.array(dtype=wp.int32),
    pos_scale: float,
    vel_scale: float,
    pos_offset: int,
    vel_offset: int,
    next_pos_hist: wp.array2d(dtype=wp.float32),
    next_vel_hist: wp.array2d(dtype=wp.float32),
    x: wp.array2d(dtype=wp.float32),
):
    """Shift the histories (row 0 = current step) and write the scaled network input row."""
    i = wp.tid()
    pe = target_pos[int(target_pos_indices[i])] - positions[int(pos_indices[i])]
    v = velocities[int(vel_indices[i])]
    depth = pos_hist.shape[0]
    for k in range(depth - 1, 0, -1):
        next_pos_hist[k, i] = pos_hist[k - 1, i]
        next_vel_hist[k, i] = vel_hist[k - 1, i]
    next_pos_hist[0, i] = pe
    next_vel_hist[0, i] = v
    for j in range(input_idx.shape[0]):
        s = input_idx[j]
        pj = pe
        vj = v
        if s > 0:
            pj = pos_hist[s - 1, i]
            vj = vel_hist[s - 1, i]
        x[i, pos_offset + j] = pos_scale * pj
        x[i, vel_offset + j] = vel_scale * vj


@wp.kernel
def _lstm_input_kernel(
    positions: wp.array(dtype=wp.float32),
    velocities: wp.array(dtype=wp.float32),
    target_pos: wp.array(dtype=wp.float32),
    pos_indices: wp.array(dtype=wp.uint32),
    vel_indices: wp.array(dtype=wp.uint32),
    target_pos_indices: wp.array(dtype=wp.uint32),
    pos_scale: float,
    vel_scale: float,
    x: wp.array2d(dtype=wp.float32),
):
    i = wp.tid()
    x[i, 0] = pos_scale * (target_pos[int(target_pos_indices[i])] - positions[int(pos_indices[i])])
    x[i, 1] = vel_scale * velocities[int(vel_indices[i])]


@wp.kernel
def _state_to_rows_kernel(
    hidden: wp.array3d(dtype=wp.float32),
    cell: wp.array3d(dtype=wp.float32),
    h_rows: wp.array2d(dtype=wp.float32),
    c_rows: wp.array2d(dtype=wp.float32),
):
    """``(L, n, H)`` state -> ``(n, L*H)`` network rows (ONNX ``(layers, batch, hidden)`` order)."""
    i, j = wp.tid()
    hs = hidden.shape[2]
    layer = j // hs
    k = j - layer * hs
    h_rows[i, j] = hidden[layer, i, k]
    c_rows[i, j] = cell[layer, i, k]


@wp.kernel
def _rows_to_state_kernel(
    h_rows: wp.array2d(dtype=wp.float32),
    c_rows: wp.array2d(dtype=wp.float32),
    hidden: wp.array3d(dtype=wp.float32),
    cell: wp.array3d(dtype=wp.float32),
):
    i, j = wp.tid()
    hs = hidden.shape[2]
    layer = j // hs
    k = j - layer * hs
    hidden[layer, i, k] = h_rows[i, j]
    cell[layer, i, k] = c_rows[i, j]


@wp.kernel
def _effort_kernel(y: wp.array2d(dtype=wp.float32), effort_scale: float, forces: wp.array(dtype=wp.float32)):
    i = wp.tid()
    forces[i] = effort_scale * y[i, 0]


# ----------------------------------------------------------------------------- metadata
def _number(meta: dict, key: str, default: float, owner: str, path: str) -> float:
    value = meta.get(key, default)
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if ok:
        value = float(value)
        ok = math.isfinite(value) and value != 0.0
    if not ok:
        raise ValueError(
            f"{owner}: metadata {key!r} of {path!r} must be a finite non-zero number, got {meta.get(key)!r}"
        )
    return value


def _positive_int(meta: dict, key: str, owner: str, path: str, what: str) -> int:
    if key not in meta:
        raise ValueError(
            f"{owner}: the metadata of {path!r} is missing the required key {key!r} ({what}); "
            "LSTM checkpoints must record 'num_layers' and 'hidden_size'"
        )
    value = meta[key]
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise ValueError(f"{owner}: metadata {key!r} of {path!r} must be a positive integer, got {value!r}")
    return int(value)


def _checkpoint_kind(model_path, owner: str) -> tuple[str, str]:
    try:
        path = os.fspath(model_path)
    except TypeError:
        raise ValueError(f"{owner}: model_path must be a path, got {type(model_path).__name__}") from None
    suffix = os.path.splitext(path)[1].lower()
    if suffix in _ONNX_SUFFIXES:
        kind = "onnx"
    elif suffix in _TORCH_SUFFIXES:
        kind = "torch"
    else:
        raise ValueError(
            f"{owner}: model_path {path!r} has an unknown checkpoint suffix {suffix!r}; "
            f"expected one of {', '.join(_ONNX_SUFFIXES + _TORCH_SUFFIXES)}"
        )
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{owner}: model_path {path!r} does not exist")
    return path, kind


class _Runtime:
    """Device buffers of one controller for ``n`` actuators on one device."""


class _NeuralController(Controller):
    """Shared part: checkpoint loading, backend selection, per-device runtimes."""

    SHARED_PARAMS = frozenset({"model_path"})

    def __init__(self, model_path, device=None):
        owner = type(self).__name__
        self.model_path, self.backend = _checkpoint_kind(model_path, owner)
        self.device = wp.get_device(device) if device is not None else None
        self._runtimes: dict[tuple[str, int], _Runtime] = {}
        self._programs: dict[str, Any] = {}
        self._pending_fresh = False
        self._last_runtime = None
        if self.backend == "onnx":
            from .onnx_graph import load_onnx, onnx_metadata

            self._onnx_model = load_onnx(self.model_path, owner)
            self.metadata = onnx_metadata(self._onnx_model, self.model_path, owner)
            self._torch = None
        else:
            from .torch_backend import TorchCheckpoint

            self._onnx_model = None
            self._torch = TorchCheckpoint(self.model_path, owner)
            self.metadata = dict(self._torch.metadata)
        meta, path = self.metadata, self.model_path
        self.pos_scale = _number(meta, "pos_scale", 1.0, owner, path)
        self.vel_scale = _number(meta, "vel_scale", 1.0, owner, path)
        self.effort_scale = _number(meta, "effort_scale", 1.0, owner, path)

    # -- Component interface
    @classmethod
    def resolve_arguments(cls, args: dict[str, Any]) -> dict[str, Any]:
        """``model_path`` (required, shared by all DOFs of one actuator)."""
        out = resolve(cls, args, required=("model_path",))
        try:
            out["model_path"] = os.fspath(out["model_path"])
        except TypeError:
            raise ValueError(f"{cls.__name__}: model_path must be a path, got {out['model_path']!r}") from None
        return out

    def is_stateful(self) -> bool:
        return True

    def is_graphable(self) -> bool:
        """ONNX checkpoints run as Warp kernels (graphable); Torch checkpoints do not."""
        return self.backend == "onnx"

    def is_differentiable(self) -> bool:
        """Inference only: the network kernels have no adjoint."""
        return False

    def finalize(self, device, num_actuators: int) -> None:
        """Upload the weights and allocate the buffers for ``num_actuators`` on ``device``
        (called by :class:`~armillary_actuators.actuator.Actuator` at construction)."""
        self._runtime(num_actuators, device)

    # -- helpers
    def _program(self, device):
        key = str(device)
        prog = self._programs.get(key)
        if prog is None:
            from .onnx_kernels import Program

            prog = Program(self.graph, device)
            self._programs[key] = prog
        return prog

    def _runtime(self, n: int, device) -> _Runtime:
        device = wp.get_device(device)
        key = (str(device), n)
        rt = self._runtimes.get(key)
        if rt is None:
            rt = self._make_runtime(n, device)
            self._runtimes[key] = rt
        return rt

    def _device(self, device, forces):
        if device is not None:
            return wp.get_device(device)
        return forces.device

    def _check_states(self, state, next_state, n: int) -> None:
        name = type(self).__name__
        if state is None:
            raise ValueError(
                f"{name} is stateful: pass a state created with state() (Actuator.state(), two of them, swapped each step)"
            )
        if next_state is not None and next_state is state:
            raise ValueError(f"{name}: state and next_state must be two different State objects")
        for s in (state, next_state):
            if s is not None:
                for arr in s.arrays():
                    if arr.shape[1] != n:
                        raise ValueError(
                            f"{name}: the state was created for {arr.shape[1]} actuators but this step drives {n}"
                        )

    def update_state(self, current_state, next_state) -> None:
        """Copy the state of the last ``compute`` made without ``next_state`` into ``next_state``."""
        if self._pending_fresh and next_state is not None:
            for dst, src in zip(next_state.arrays(), self._last_runtime.pending.arrays()):
                wp.copy(dst, src)
            self._pending_fresh = False

    def _target_state(self, rt, next_state):
        if next_state is None:  # reference-engine protocol: compute(), then update_state(current, next)
            self._pending_fresh = True
            self._last_runtime = rt
            return rt.pending
        return next_state

    def _size_error(self, what: str, expected: int, got: int, detail: str) -> ValueError:
        return ValueError(
            f"{type(self).__name__}: checkpoint {self.model_path!r}: {what} has {got} values per actuator "
            f"but {detail} gives {expected}"
        )


class ControllerNeuralMLP(_NeuralController):
    """MLP controller: effort from a history of scaled position errors and velocities (stateful).

    For actuator ``i`` with ``e_k = target_pos - q`` and ``v_k = qd`` at ``k``
    steps ago, the network input row is (``input_order="pos_vel"``)::

        [pos_scale * e_{idx_0}, ..., pos_scale * e_{idx_m-1}, vel_scale * v_{idx_0}, ..., vel_scale * v_{idx_m-1}]

    with ``idx = input_idx`` (``vel_pos`` puts the velocities first); history
    entries older than the first step are 0. ``effort = effort_scale * net(row)``
    [N or N*m]. State: ``pos_error_history`` and ``vel_history``, each
    ``(max(input_idx) + 1, n)`` (row 0 = most recent step), double-buffered.

    Args:
        model_path: ``.onnx`` or ``.pt2`` checkpoint (see the module docstring for metadata).
        device: Warp device to upload ONNX weights to at construction (default: on first use).

    Raises ``ValueError`` when the network's input size is not
    ``2 * len(input_idx)`` or its output is not one value per actuator.
    """

    class State(Controller.State):
        """History buffers ``(history_length, n)`` [m or rad] and [m/s or rad/s]; row 0 is the newest."""

        def __init__(self, pos_error_history: wp.array, vel_history: wp.array):
            self.pos_error_history = pos_error_history
            self.vel_history = vel_history

        def arrays(self) -> tuple[wp.array, ...]:
            return (self.pos_error_history, self.vel_history)

        def reset(self) -> None:
            """Zero the histories (e.g. at an episode start)."""
            self.pos_error_history.zero_()
            self.vel_history.zero_()

    def __init__(self, model_path, device=None):
        super().__init__(model_path, device)
        owner, meta, path = type(self).__name__, self.metadata, self.model_path
        order = meta.get("input_order", "pos_vel")
        if order not in ("pos_vel", "vel_pos"):
            raise ValueError(f"{owner}: metadata 'input_order' of {path!r} must be 'pos_vel' or 'vel_pos', got {order!r}")
        idx = meta.get("input_idx", [0])
        if (not isinstance(idx, (list, tuple)) or not idx
                or any(isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 0 for v in idx)):
            raise ValueError(
                f"{owner}: metadata 'input_idx' of {path!r} must be a non-empty list of non-negative integers "
                f"(history steps, 0 = current), got {idx!r}"
            )
        self.input_order = order
        self.input_idx = [int(v) for v in idx]
        self.history_length = max(self.input_idx) + 1
        m = len(self.input_idx)
        self.num_inputs = 2 * m
        detail = f"the metadata (input_idx={self.input_idx}: 2 x {m} history values)"
        if self.backend == "onnx":
            from .onnx_graph import build_graph

            self.graph = build_graph(self._onnx_model, path, owner)
            g = self.graph
            self._in = meta.get("input_name")
            self._out = meta.get("output_name")
            if self._in is None:
                if len(g.inputs) != 1:
                    raise ValueError(
                        f"{owner}: {path!r} must have one input, got {g.inputs}; "
                        "name the controller's input with the metadata key 'input_name'"
                    )
                self._in = g.inputs[0]
            if self._out is None:
                self._out = g.outputs[0]
            for nm, where in ((self._in, self.graph.inputs), (self._out, self.graph.outputs)):
                if nm not in where:
                    raise ValueError(f"{owner}: {path!r} has no graph input/output named {nm!r} (has {where})")
            got = self.graph.features(self._in)
            if got != self.num_inputs:
                raise self._size_error(f"the network input {self._in!r}", self.num_inputs, got, detail)
            got = self.graph.features(self._out)
            if got != 1:
                raise self._size_error(f"the network output {self._out!r}", 1, got, "one effort per actuator")
            if self.device is not None:
                self._program(self.device)
        else:
            shapes = self._torch.input_shapes()
            if len(shapes) != 1:
                raise ValueError(f"{owner}: {path!r} must take one input tensor (n, {self.num_inputs}), got {len(shapes)}")
            if shapes[0] and shapes[0][-1] is not None and shapes[0][-1] != self.num_inputs:
                raise self._size_error("the network input", self.num_inputs, shapes[0][-1], detail)

    def check(self, num_actuators: int, label: str) -> None:
        if self.backend == "torch":
            shape = self._torch.input_shapes()[0]
            if shape and shape[0] is not None and shape[0] != num_actuators:
                raise ValueError(
                    f"{label}: {type(self).__name__}: {self.model_path!r} was exported for a batch of {shape[0]} "
                    f"but the actuator drives {num_actuators} DOFs (export with a dynamic batch dimension)"
                )

    def state(self, num_actuators: int, device) -> ControllerNeuralMLP.State:
        device = wp.get_device(device)
        self._runtime(num_actuators, device)  # allocate buffers now, not inside a captured step
        shape = (self.history_length, num_actuators)
        return ControllerNeuralMLP.State(wp.zeros(shape, dtype=wp.float32, device=device),
                                         wp.zeros(shape, dtype=wp.float32, device=device))

    def _make_runtime(self, n: int, device) -> _Runtime:
        rt = _Runtime()
        rt.input_idx = wp.array(np.array(self.input_idx, np.int32), dtype=wp.int32, device=device)
        shape = (self.history_length, n)
        rt.pending = ControllerNeuralMLP.State(wp.zeros(shape, dtype=wp.float32, device=device),
                                               wp.zeros(shape, dtype=wp.float32, device=device))
        if self.backend == "onnx":
            rt.ws = self._program(device).workspace(n)
            rt.x = rt.ws.buffer(self._in)
            rt.y = rt.ws.buffer(self._out)
        else:
            self.check(n, "actuator")
            rt.x = wp.zeros((n, self.num_inputs), dtype=wp.float32, device=device)
            rt.y = wp.zeros((n, 1), dtype=wp.float32, device=device)
        return rt

    def compute(self, positions, velocities, target_pos, target_vel, feedforward, pos_indices, vel_indices,
                target_pos_indices, target_vel_indices, forces, state, dt, device=None, *, next_state=None) -> None:
        """Write ``effort_scale * net(history)`` into ``forces`` and the shifted histories into ``next_state``."""
        n = forces.shape[0]
        device = self._device(device, forces)
        self._check_states(state, next_state, n)
        rt = self._runtime(n, device)
        out = self._target_state(rt, next_state)
        m = len(self.input_idx)
        pos_off, vel_off = (0, m) if self.input_order == "pos_vel" else (m, 0)
        wp.launch(
            _mlp_input_kernel, dim=n,
            inputs=[positions, velocities, target_pos, pos_indices, vel_indices, target_pos_indices,
                    state.pos_error_history, state.vel_history, rt.input_idx, self.pos_scale, self.vel_scale,
                    pos_off, vel_off],
            outputs=[out.pos_error_history, out.vel_history, rt.x], device=device,
        )
        if self.backend == "onnx":
            rt.ws.run()
        else:
            self._torch.run_mlp(device, rt.x, rt.y)
        wp.launch(_effort_kernel, dim=n, inputs=[rt.y, self.effort_scale], outputs=[forces], device=device)


class ControllerNeuralLSTM(_NeuralController):
    """LSTM controller: effort from the scaled position error and velocity, with hidden/cell state (stateful).

    Per step and actuator the network gets ``[pos_scale * (target_pos - q), vel_scale * qd]``
    and the previous hidden and cell state, and returns the effort (times
    ``effort_scale``, [N or N*m]) and the next state. State: ``hidden`` and
    ``cell``, each ``(num_layers, n, hidden_size)``, double-buffered.

    ONNX checkpoints: a graph with inputs (x, h, c) and outputs (effort, h', c')
    (names from metadata or in that order), x of 2 values per actuator (e.g.
    ``(1, n, 2)``), h and c ``(num_layers, n, hidden_size)``; any number of
    ``LSTM`` nodes (stacked layers via Gather/Slice/Concat of the state).
    ``num_layers`` and ``hidden_size`` are required metadata for both formats.

    Args:
        model_path: ``.onnx`` or ``.pt2`` checkpoint.
        device: Warp device to upload ONNX weights to at construction (default: on first use).
    """

    class State(Controller.State):
        """Hidden and cell state, each ``(num_layers, n, hidden_size)``."""

        def __init__(self, hidden: wp.array, cell: wp.array):
            self.hidden = hidden
            self.cell = cell

        def arrays(self) -> tuple[wp.array, ...]:
            return (self.hidden, self.cell)

        def reset(self) -> None:
            """Zero the hidden and cell state (e.g. at an episode start)."""
            self.hidden.zero_()
            self.cell.zero_()

    _ROLES = ("input_name", "hidden_in_name", "cell_in_name", "output_name", "hidden_out_name", "cell_out_name")

    def __init__(self, model_path, device=None):
        super().__init__(model_path, device)
        owner, meta, path = type(self).__name__, self.metadata, self.model_path
        self.num_layers = _positive_int(meta, "num_layers", owner, path, "stacked LSTM layers")
        self.hidden_size = _positive_int(meta, "hidden_size", owner, path, "hidden units per layer")
        state_size = self.num_layers * self.hidden_size
        detail = f"the metadata (num_layers={self.num_layers} x hidden_size={self.hidden_size})"
        if self.backend == "onnx":
            from .onnx_graph import build_graph

            self.graph = build_graph(self._onnx_model, path, owner)
            g = self.graph
            if any(k in meta for k in self._ROLES):
                missing = [k for k in self._ROLES if k not in meta]
                if missing:
                    raise ValueError(f"{owner}: the metadata of {path!r} names some graph tensors but not {missing[0]!r}")
                names = [meta[k] for k in self._ROLES]
            else:
                if len(g.inputs) != 3 or len(g.outputs) != 3:
                    raise ValueError(
                        f"{owner}: {path!r} must have three inputs (x, hidden, cell) and three outputs "
                        f"(effort, hidden, cell), got inputs {g.inputs} and outputs {g.outputs}"
                    )
                names = [*g.inputs, *g.outputs]
            for k, nm in zip(self._ROLES, names):
                where = g.inputs if k.endswith("in_name") or k == "input_name" else g.outputs
                if nm not in where:
                    raise ValueError(f"{owner}: metadata {k!r}={nm!r} of {path!r} is not a graph tensor of {where}")
            self._names = dict(zip(self._ROLES, names))
            expect = {"input_name": (2, "the controller input (position error, velocity)"),
                      "hidden_in_name": (state_size, detail), "cell_in_name": (state_size, detail),
                      "output_name": (1, "one effort per actuator"),
                      "hidden_out_name": (state_size, detail), "cell_out_name": (state_size, detail)}
            for k, (size, why) in expect.items():
                got = g.features(self._names[k])
                if got != size:
                    raise self._size_error(f"graph tensor {self._names[k]!r} ({k})", size, got, why)
            if self.device is not None:
                self._program(self.device)
        else:
            shapes = self._torch.input_shapes()
            if len(shapes) != 3:
                raise ValueError(f"{owner}: {path!r} must take (x, (hidden, cell)), got {len(shapes)} input tensors")
            if shapes[0] and shapes[0][-1] is not None and shapes[0][-1] != 2:
                raise self._size_error("the network input", 2, shapes[0][-1], "(position error, velocity)")
            for s in shapes[1:]:
                if s and len(s) == 3 and s[0] is not None and s[2] is not None and (s[0], s[2]) != (
                        self.num_layers, self.hidden_size):
                    raise ValueError(
                        f"{owner}: checkpoint {path!r}: the exported hidden/cell state has shape {s} but "
                        f"{detail} expects ({self.num_layers}, n, {self.hidden_size})"
                    )

    def check(self, num_actuators: int, label: str) -> None:
        if self.backend == "torch":
            shape = self._torch.input_shapes()[0]
            if shape and shape[0] is not None and shape[0] != num_actuators:
                raise ValueError(
                    f"{label}: {type(self).__name__}: {self.model_path!r} was exported for a batch of {shape[0]} "
                    f"but the actuator drives {num_actuators} DOFs (export with a dynamic batch dimension)"
                )

    def state(self, num_actuators: int, device) -> ControllerNeuralLSTM.State:
        device = wp.get_device(device)
        self._runtime(num_actuators, device)
        shape = (self.num_layers, num_actuators, self.hidden_size)
        return ControllerNeuralLSTM.State(wp.zeros(shape, dtype=wp.float32, device=device),
                                          wp.zeros(shape, dtype=wp.float32, device=device))

    def _make_runtime(self, n: int, device) -> _Runtime:
        rt = _Runtime()
        shape = (self.num_layers, n, self.hidden_size)
        rt.pending = ControllerNeuralLSTM.State(wp.zeros(shape, dtype=wp.float32, device=device),
                                                wp.zeros(shape, dtype=wp.float32, device=device))
        if self.backend == "onnx":
            rt.ws = self._program(device).workspace(n)
            nm = self._names
            rt.x = rt.ws.buffer(nm["input_name"])
            rt.h_in, rt.c_in = rt.ws.buffer(nm["hidden_in_name"]), rt.ws.buffer(nm["cell_in_name"])
            rt.y = rt.ws.buffer(nm["output_name"])
            rt.h_out, rt.c_out = rt.ws.buffer(nm["hidden_out_name"]), rt.ws.buffer(nm["cell_out_name"])
        else:
            self.check(n, "actuator")
            rt.x = wp.zeros((n, 2), dtype=wp.float32, device=device)
            rt.y = wp.zeros((n, 1), dtype=wp.float32, device=device)
        return rt

    def compute(self, positions, velocities, target_pos, target_vel, feedforward, pos_indices, vel_indices,
                target_pos_indices, target_vel_indices, forces, state, dt, device=None, *, next_state=None) -> None:
        """Write ``effort_scale * net(x, state)`` into ``forces`` and the next hidden/cell into ``next_state``."""
        n = forces.shape[0]
        device = self._device(device, forces)
        self._check_states(state, next_state, n)
        rt = self._runtime(n, device)
        out = self._target_state(rt, next_state)
        wp.launch(
            _lstm_input_kernel, dim=n,
            inputs=[positions, velocities, target_pos, pos_indices, vel_indices, target_pos_indices,
                    self.pos_scale, self.vel_scale],
            outputs=[rt.x], device=device,
        )
        width = self.num_layers * self.hidden_size
        if self.backend == "onnx":
            wp.launch(_state_to_rows_kernel, dim=(n, width), inputs=[state.hidden, state.cell],
                      outputs=[rt.h_in, rt.c_in], device=device)
            rt.ws.run()
            wp.launch(_rows_to_state_kernel, dim=(n, width), inputs=[rt.h_out, rt.c_out],
                      outputs=[out.hidden, out.cell], device=device)
        else:
            self._torch.run_lstm(device, rt.x, state.hidden, state.cell, rt.y, out.hidden, out.cell)
        wp.launch(_effort_kernel, dim=n, inputs=[rt.y, self.effort_scale], outputs=[forces], device=device)


# the reference engine's 1.8 names
DriveNeuralMLP = ControllerNeuralMLP
DriveNeuralLSTM = ControllerNeuralLSTM

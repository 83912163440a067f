"""ONNX model -> a flat list of batched layers that :mod:`.onnx_kernels` runs with Warp.

A neural actuator controller evaluates the same network independently for each
of its ``n`` actuators: every tensor that depends on a graph input carries one
*batch* axis of size ``n`` (declared symbolically, e.g. ``"N"``, or as a static
``1`` in models exported with batch size one). This module tracks, for each
such tensor, its *per-sample* shape (the logical shape with the batch axis set
to 1) and the position of the batch axis. Physically every batched tensor is a
2-D ``(n, F)`` float32 array, ``F`` = product of the per-sample shape, holding
the non-batch axes in row-major order. Shape-only operators (Reshape,
Flatten, Squeeze, Unsqueeze, Identity, order-preserving Transpose/Slice) are
aliases of their input's buffer; the rest become layers:

- ``dense``: ``y = act(x @ W + b)`` (Gemm / MatMul with a constant weight, with a
  following bias Add and activation fused in);
- ``unary``: an activation (Relu, Tanh, Sigmoid, Elu, Selu, LeakyRelu,
  Softplus, Softsign, HardSigmoid, Clip, Neg, Abs, Exp);
- ``binary_const`` / ``binary``: Add, Sub, Mul, Div with a constant (broadcast)
  or with another batched tensor of the same batch axis;
- ``copy``: index-map copies (Concat, Slice, Gather, Split, Transpose);
- ``lstm``: one time step of the ONNX ``LSTM`` operator (forward or, which is
  the same for one step, reverse direction; default activations; optional
  peepholes; layout 0 or 1).

Nodes whose inputs are all constants are folded with numpy. Anything else
(another operator, a non-constant weight, an operation along the batch axis,
a sequence longer than one step) is a ``ValueError`` naming the operator, the
node and the checkpoint.

Batch axis of a graph input: the one an ``LSTM`` node that reads the input
directly expects (axis 1 for layout 0, 0 for layout 1); otherwise its only
symbolic dimension; otherwise axis 1 for rank-3 inputs (the ONNX recurrent
convention ``(seq | layers, batch, features)``) and axis 0 for the others.
Other symbolic dimensions (e.g. a sequence length) are taken as 1: the
controller feeds one time step per actuator step.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "ACT",
    "BINOP",
    "SUPPORTED_OPS",
    "Graph",
    "Layer",
    "TensorInfo",
    "build_graph",
    "load_onnx",
    "onnx_metadata",
]

# activation codes shared with the Warp kernels (onnx_kernels._act)
ACT = {
    "Identity": 0,
    "Relu": 1,
    "Tanh": 2,
    "Sigmoid": 3,
    "Elu": 4,
    "Selu": 5,
    "LeakyRelu": 6,
    "Softplus": 7,
    "Softsign": 8,
    "HardSigmoid": 9,
    "Clip": 10,
    "Neg": 11,
    "Abs": 12,
    "Exp": 13,
}
BINOP = {"Add": 0, "Sub": 1, "Mul": 2, "Div": 3}
_SHAPE_OPS = ("Identity", "Dropout", "Cast", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Constant")
_COPY_OPS = ("Concat", "Slice", "Gather", "Split", "Transpose")
SUPPORTED_OPS = tuple(sorted({*ACT, *BINOP, *_SHAPE_OPS, *_COPY_OPS, "Gemm", "MatMul", "LSTM"}))

_FLOAT_TYPES = (1, 11)  # onnx.TensorProto.FLOAT, DOUBLE (computed in float32)


@dataclass
class TensorInfo:
    """A batched tensor: ``shape`` is per-sample (batch axis set to 1), ``batch_axis`` its position."""

    shape: tuple[int, ...]
    batch_axis: int

    @property
    def features(self) -> int:
        """Floats per sample ``F`` (the physical row length)."""
        return int(np.prod(self.shape, dtype=np.int64))


@dataclass
class Layer:
    """One batched operation; ``inputs`` / ``outputs`` are buffer names, ``params`` numpy data and scalars."""

    kind: str
    inputs: list[str | None]
    outputs: list[str]
    params: dict[str, Any] = field(default_factory=dict)
    node: str = ""


@dataclass
class Graph:
    """The converted network: layers in execution order and the buffers they use.

    ``buffers`` maps every buffer name to its floats per sample; ``alias`` maps
    a tensor name to the buffer holding it; ``inputs`` / ``outputs`` are the
    graph's tensor names (resolve with :meth:`buffer`).
    """

    path: str
    layers: list[Layer]
    buffers: dict[str, int]
    tensors: dict[str, TensorInfo]
    alias: dict[str, str]
    inputs: list[str]
    outputs: list[str]
    opset: int

    def buffer(self, name: str) -> str:
        return self.alias.get(name, name)

    def features(self, name: str) -> int:
        return self.tensors[name].features


# ----------------------------------------------------------------------------- loading
def _import_onnx(owner: str):
    try:
        import onnx
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            f"{owner}: reading .onnx checkpoints needs the optional 'onnx' package: "
            "pip install 'armillary-actuators[onnx]' (or pip install onnx)"
        ) from exc
    return onnx


def load_onnx(path: str, owner: str):
    """The ``onnx.ModelProto`` at ``path`` (``ValueError`` naming ``owner`` when it does not parse)."""
    onnx = _import_onnx(owner)
    try:
        return onnx.load(path)
    except FileNotFoundError:
        raise
    except Exception as exc:  # protobuf DecodeError and friends
        raise ValueError(f"{owner}: {path!r} is not a readable ONNX model: {exc}") from exc


def onnx_metadata(model, path: str, owner: str) -> dict[str, Any]:
    """Checkpoint metadata from the model's ``metadata_props``.

    Each entry's value is parsed as JSON when it parses (``"2.0"`` -> 2.0,
    ``"[0, 1]"`` -> [0, 1]) and kept as the raw string otherwise
    (``vel_pos``). An entry named ``metadata`` holding a JSON object supplies
    all keys at once and wins over separate entries of the same key (the
    reference engine's precedence).
    """
    out: dict[str, Any] = {}
    blob = None
    for prop in model.metadata_props:
        if prop.key == "metadata":
            try:
                blob = json.loads(prop.value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{owner}: ONNX metadata property 'metadata' of {path!r} is not valid JSON") from exc
            if not isinstance(blob, dict):
                raise ValueError(
                    f"{owner}: ONNX metadata property 'metadata' of {path!r} must be a JSON object, "
                    f"got {type(blob).__name__}"
                )
            continue
        try:
            out[prop.key] = json.loads(prop.value)
        except json.JSONDecodeError:
            out[prop.key] = prop.value
    if blob:
        out.update(blob)
    return out


# ----------------------------------------------------------------------------- conversion
class _Converter:
    def __init__(self, model, path: str, owner: str, batch_axes: dict[str, int] | None):
        from onnx import numpy_helper

        self._numpy_helper = numpy_helper
        self.path = path
        self.owner = owner
        g = model.graph
        self.opset = 1
        for imp in model.opset_import:
            if imp.domain in ("", "ai.onnx"):
                self.opset = imp.version
        self.consts: dict[str, np.ndarray] = {}
        for init in g.initializer:
            self.consts[init.name] = numpy_helper.to_array(init)
        self.tensors: dict[str, TensorInfo] = {}
        self.alias: dict[str, str] = {}
        self.buffers: dict[str, int] = {}
        self.layers: list[Layer] = []
        self._tmp = 0
        self.graph = g
        self.inputs = [i.name for i in g.input if i.name not in self.consts]
        self.outputs = [o.name for o in g.output]
        lstm_axes = self._lstm_input_axes(g)
        for vi in g.input:
            if vi.name in self.consts:
                continue
            self._add_graph_input(vi, (batch_axes or {}).get(vi.name, lstm_axes.get(vi.name)))

    # -- helpers
    def err(self, node, msg: str) -> ValueError:
        name = node.name or (node.output[0] if node.output else "?")
        return ValueError(f"{self.owner}: ONNX operator {node.op_type!r} (node {name!r}) in {self.path!r}: {msg}")

    def tmp(self, base: str) -> str:
        self._tmp += 1
        return f"__{base}_{self._tmp}"

    def _lstm_input_axes(self, g) -> dict[str, int]:
        axes = {}
        for node in g.node:
            if node.op_type != "LSTM":
                continue
            layout = 0
            for a in node.attribute:
                if a.name == "layout":
                    layout = a.i
            for pos in (0, 5, 6):
                if pos < len(node.input) and node.input[pos]:
                    axes.setdefault(node.input[pos], 1 if layout == 0 else 0)
        return axes

    def _add_graph_input(self, vi, batch_axis: int | None) -> None:
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type") or tt.elem_type not in _FLOAT_TYPES:
            raise ValueError(f"{self.owner}: graph input {vi.name!r} of {self.path!r} must be a float tensor")
        if not tt.HasField("shape"):
            raise ValueError(f"{self.owner}: graph input {vi.name!r} of {self.path!r} has no declared shape")
        dims = list(tt.shape.dim)
        if not dims:
            raise ValueError(f"{self.owner}: graph input {vi.name!r} of {self.path!r} is a scalar (no batch axis)")
        symbolic = [k for k, d in enumerate(dims) if not d.HasField("dim_value")]
        if batch_axis is None:
            if len(symbolic) == 1:
                batch_axis = symbolic[0]
            elif len(dims) == 3:
                batch_axis = 1
            else:
                batch_axis = 0
        if not 0 <= batch_axis < len(dims):
            raise ValueError(
                f"{self.owner}: graph input {vi.name!r} of {self.path!r}: batch axis {batch_axis} out of range"
            )
        shape = tuple(1 if (k == batch_axis or not d.HasField("dim_value")) else int(d.dim_value)
                      for k, d in enumerate(dims))
        self.tensors[vi.name] = TensorInfo(shape, batch_axis)
        self.buffers[vi.name] = int(np.prod(shape, dtype=np.int64))

    def buf(self, name: str) -> str:
        return self.alias.get(name, name)

    def new_tensor(self, name: str, info: TensorInfo) -> str:
        self.tensors[name] = info
        self.buffers[name] = info.features
        return name

    def set_alias(self, out: str, src: str, info: TensorInfo) -> None:
        self.tensors[out] = info
        self.alias[out] = self.buf(src)

    def const(self, node, pos: int, what: str, optional: bool = False) -> np.ndarray | None:
        if pos >= len(node.input) or not node.input[pos]:
            if optional:
                return None
            raise self.err(node, f"missing input {what}")
        name = node.input[pos]
        if name not in self.consts:
            raise self.err(node, f"{what} ({name!r}) must be a constant (initializer or Constant node)")
        return self.consts[name]

    @staticmethod
    def attrs(node) -> dict[str, Any]:
        from onnx import helper

        return {a.name: helper.get_attribute_value(a) for a in node.attribute}

    # -- main loop
    def run(self) -> Graph:
        for node in self.graph.node:
            if node.domain not in ("", "ai.onnx"):
                raise self.err(node, f"operators of domain {node.domain!r} are not supported")
            op = node.op_type
            if op not in SUPPORTED_OPS:
                raise self.err(node, f"not supported; supported operators: {', '.join(SUPPORTED_OPS)}")
            if op == "Constant":
                self._constant(node)
                continue
            ins = [n for n in node.input if n]
            if op != "LSTM" and all(n in self.consts for n in ins):
                self._fold(node)
                continue
            for n in ins:
                if n not in self.consts and n not in self.tensors:
                    raise self.err(node, f"input {n!r} is not produced by an earlier node (graph not sorted?)")
            handler = getattr(self, "_op_" + op, None)
            (handler or self._elementwise)(node)
        for name in self.outputs:
            if name in self.consts:
                raise ValueError(f"{self.owner}: graph output {name!r} of {self.path!r} is a constant")
            if name not in self.tensors:
                raise ValueError(f"{self.owner}: graph output {name!r} of {self.path!r} is never computed")
        self._fuse()
        used = {b for layer in self.layers for b in (*layer.inputs, *layer.outputs) if b}
        used |= {self.buf(n) for n in (*self.inputs, *self.outputs)}
        buffers = {k: v for k, v in self.buffers.items() if k in used}
        return Graph(self.path, self.layers, buffers, self.tensors, self.alias, self.inputs, self.outputs, self.opset)

    # -- constants
    def _constant(self, node) -> None:
        a = self.attrs(node)
        nh = self._numpy_helper
        if "value" in a:
            v = nh.to_array(a["value"])
        elif "value_float" in a:
            v = np.array(a["value_float"], np.float32)
        elif "value_floats" in a:
            v = np.array(a["value_floats"], np.float32)
        elif "value_int" in a:
            v = np.array(a["value_int"], np.int64)
        elif "value_ints" in a:
            v = np.array(a["value_ints"], np.int64)
        else:
            raise self.err(node, f"unsupported Constant attribute {sorted(a)}")
        self.consts[node.output[0]] = v

    def _fold(self, node) -> None:
        """Evaluate a node whose inputs are all constants with numpy."""
        op = node.op_type
        a = self.attrs(node)
        x = [self.consts[n] if n else None for n in node.input]
        if op in ("Identity", "Dropout"):
            out = [x[0]]
        elif op == "Cast":
            from onnx import helper

            out = [x[0].astype(helper.tensor_dtype_to_np_dtype(a["to"]))]
        elif op in BINOP:
            f = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}[op]
            if op == "Div" and np.issubdtype(x[0].dtype, np.integer):
                f = np.floor_divide
            out = [f(x[0], x[1]).astype(np.result_type(x[0], x[1]))]
        elif op in ACT:
            alpha, beta = self._act_params(node, a)
            out = [_np_act(ACT[op], x[0].astype(np.float32), alpha, beta)]
        elif op == "Gemm":
            A = x[0].T if a.get("transA", 0) else x[0]
            B = x[1].T if a.get("transB", 0) else x[1]
            y = a.get("alpha", 1.0) * (A @ B)
            if len(x) > 2 and x[2] is not None:
                y = y + a.get("beta", 1.0) * x[2]
            out = [y.astype(np.float32)]
        elif op == "MatMul":
            out = [np.matmul(x[0], x[1])]
        elif op == "Concat":
            out = [np.concatenate([v for v in x if v is not None], axis=a["axis"])]
        elif op == "Transpose":
            out = [np.transpose(x[0], a.get("perm"))]
        elif op == "Gather":
            out = [np.take(x[0], x[1], axis=a.get("axis", 0))]
        elif op in ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Slice", "Split"):
            shape = x[0].shape
            if op == "Reshape":
                out = [x[0].reshape(_reshape_target(self, node, x[0].shape, x[1], a))]
            elif op == "Flatten":
                ax = a.get("axis", 1)
                ax = ax + len(shape) if ax < 0 else ax
                out = [x[0].reshape(int(np.prod(shape[:ax])), -1)]
            elif op == "Squeeze":
                axes = self._axes(node, a, len(shape))
                out = [np.squeeze(x[0], axis=tuple(axes)) if axes is not None else np.squeeze(x[0])]
            elif op == "Unsqueeze":
                axes = self._axes(node, a, len(shape) + len(self._raw_axes(node, a)))
                out = [np.expand_dims(x[0], tuple(axes))]
            elif op == "Slice":
                out = [x[0][self._slices(node, a, shape, info=None)]]
            else:
                out = list(np.split(x[0], np.cumsum(self._split_sizes(node, a, shape))[:-1], axis=a.get("axis", 0)))
        else:
            raise self.err(node, "cannot be evaluated on constant inputs")
        for name, v in zip(node.output, out):
            if name:
                self.consts[name] = np.asarray(v)

    # -- attribute helpers
    def _raw_axes(self, node, a) -> list[int]:
        if self.opset >= 13 and node.op_type in ("Squeeze", "Unsqueeze"):
            v = self.const(node, 1, "axes", optional=True)
            return [] if v is None else [int(t) for t in np.atleast_1d(v)]
        return [int(t) for t in a.get("axes", [])]

    def _axes(self, node, a, rank: int) -> list[int] | None:
        raw = self._raw_axes(node, a)
        if not raw and node.op_type == "Squeeze":
            return None
        axes = []
        for ax in raw:
            if not -rank <= ax < rank:
                raise self.err(node, f"axis {ax} out of range for rank {rank}")
            axes.append(ax % rank)
        return sorted(axes)

    def _act_params(self, node, a) -> tuple[float, float]:
        op = node.op_type
        if op == "Elu":
            return float(a.get("alpha", 1.0)), 0.0
        if op == "Selu":
            return float(a.get("alpha", 1.67326319217681884765625)), float(a.get("gamma", 1.05070102214813232421875))
        if op == "LeakyRelu":
            return float(a.get("alpha", 0.01)), 0.0
        if op == "HardSigmoid":
            return float(a.get("alpha", 0.2)), float(a.get("beta", 0.5))
        if op == "Clip":
            if self.opset >= 11:
                lo = self.const(node, 1, "min", optional=True)
                hi = self.const(node, 2, "max", optional=True)
                lo = -math.inf if lo is None else float(np.asarray(lo).reshape(()))
                hi = math.inf if hi is None else float(np.asarray(hi).reshape(()))
            else:
                lo, hi = float(a.get("min", -math.inf)), float(a.get("max", math.inf))
            big = float(np.finfo(np.float32).max)  # finite bounds: they may become kernel constants
            return float(np.clip(lo, -big, big)), float(np.clip(hi, -big, big))
        return 0.0, 0.0

    def _slices(self, node, a, shape, info: TensorInfo | None):
        rank = len(shape)
        if self.opset >= 10:
            starts = self.const(node, 1, "starts")
            ends = self.const(node, 2, "ends")
            axes = self.const(node, 3, "axes", optional=True)
            steps = self.const(node, 4, "steps", optional=True)
        else:
            starts, ends = np.array(a["starts"]), np.array(a["ends"])
            axes, steps = (np.array(a["axes"]) if "axes" in a else None), None
        starts = [int(v) for v in np.atleast_1d(starts)]
        ends = [int(v) for v in np.atleast_1d(ends)]
        axes = list(range(len(starts))) if axes is None else [int(v) % rank for v in np.atleast_1d(axes)]
        steps = [1] * len(starts) if steps is None else [int(v) for v in np.atleast_1d(steps)]
        sl = [slice(None)] * rank
        for ax, s, e, st in zip(axes, starts, ends, steps):
            if st == 0:
                raise self.err(node, "a step of 0")
            if info is not None and ax == info.batch_axis:
                full = st == 1 and s in (0, -(2**63)) and e >= 2**31 - 1
                if not full:
                    raise self.err(node, "slicing along the batch axis (one row per actuator) is not supported")
                continue
            big = 2**62
            sl[ax] = slice(max(min(s, big), -big), max(min(e, big), -big), st)
        return tuple(sl)

    def _split_sizes(self, node, a, shape) -> list[int]:
        axis = a.get("axis", 0) % len(shape)
        n_out = len(node.output)
        sizes = None
        if self.opset >= 13:
            v = self.const(node, 1, "split", optional=True)
            sizes = None if v is None else [int(t) for t in np.atleast_1d(v)]
        elif "split" in a:
            sizes = [int(t) for t in a["split"]]
        if sizes is None:
            total = shape[axis]
            if "num_outputs" in a:
                n_out = int(a["num_outputs"])
            chunk = -(-total // n_out)
            sizes = [min(chunk, total - k * chunk) for k in range(n_out)]
        if sum(sizes) != shape[axis]:
            raise self.err(node, f"split sizes {sizes} do not add up to {shape[axis]}")
        return sizes

    def _info(self, node, pos: int = 0) -> TensorInfo:
        return self.tensors[node.input[pos]]

    def _copy_layer(self, node, src_buf: str, out: str, info: TensorInfo, src_map: np.ndarray,
                    dst_map: np.ndarray | None = None) -> None:
        src_map = np.ascontiguousarray(src_map.ravel(), dtype=np.int32)
        if dst_map is None and src_map.size == self.tensors_features(src_buf) and np.array_equal(
            src_map, np.arange(src_map.size)
        ):
            self.set_alias(out, src_buf, info)
            return
        if out not in self.buffers:
            self.new_tensor(out, info)
        params = {"src": src_map}
        if dst_map is not None:
            params["dst"] = np.ascontiguousarray(dst_map.ravel(), dtype=np.int32)
        self.layers.append(Layer("copy", [src_buf], [out], params, node.name))

    def tensors_features(self, buf: str) -> int:
        return self.buffers[buf]

    # -- shape-only operators
    def _op_Identity(self, node) -> None:
        self.set_alias(node.output[0], node.input[0], self._info(node))

    def _op_Dropout(self, node) -> None:
        if len(node.output) > 1 and node.output[1]:
            raise self.err(node, "the mask output is not supported")
        self._op_Identity(node)

    def _op_Cast(self, node) -> None:
        if self.attrs(node).get("to") not in _FLOAT_TYPES:
            raise self.err(node, "only casts to float are supported on batched tensors")
        self._op_Identity(node)

    def _op_Reshape(self, node) -> None:
        info = self._info(node)
        a = self.attrs(node)
        target = [int(v) for v in np.atleast_1d(self.const(node, 1, "shape"))]
        if a.get("allowzero", 0) and 0 in target:
            raise self.err(node, "allowzero with a 0 in the target shape is not supported")
        b = info.batch_axis
        P = int(np.prod(info.shape[:b], dtype=np.int64))
        Q = int(np.prod(info.shape[b + 1:], dtype=np.int64))
        F = P * Q
        dims = list(target)
        j = None
        for k, d in enumerate(dims):
            if d == 0:
                if k >= len(info.shape):
                    raise self.err(node, f"0 at position {k} beyond the input rank")
                dims[k] = info.shape[k]
                if k == b:
                    j = k
        if dims.count(-1) > 1:
            raise self.err(node, "more than one -1 in the target shape")
        if j is not None:
            if -1 in dims:
                rest = int(np.prod([d for k, d in enumerate(dims) if d != -1 and k != j], dtype=np.int64))
                if rest == 0 or F % rest:
                    raise self.err(node, f"cannot reshape {F} floats per actuator into {target}")
                dims[dims.index(-1)] = F // rest
        elif -1 in dims:
            j = dims.index(-1)
            rest = int(np.prod([d for d in dims if d != -1], dtype=np.int64))
            if rest != F:
                raise self.err(
                    node,
                    f"target shape {target} mixes the batch axis (one row per actuator) with the "
                    f"{F} features of each actuator",
                )
        else:  # static batch-1 export: the batch axis is a literal 1
            if int(np.prod(dims, dtype=np.int64)) != F:
                raise self.err(node, f"target shape {target} does not hold {F} floats per actuator")
            j = next((k for k, d in enumerate(dims) if d == 1 and int(np.prod(dims[:k], dtype=np.int64)) == P), None)
            if j is None:
                raise self.err(node, f"target shape {target} has no batch axis")
        dims[j] = 1
        if int(np.prod(dims[:j], dtype=np.int64)) != P or int(np.prod(dims[j + 1:], dtype=np.int64)) != Q:
            raise self.err(node, f"target shape {target} moves features across the batch axis")
        self.set_alias(node.output[0], node.input[0], TensorInfo(tuple(dims), j))

    def _op_Flatten(self, node) -> None:
        info = self._info(node)
        rank = len(info.shape)
        axis = self.attrs(node).get("axis", 1)
        axis = axis + rank if axis < 0 else axis
        b = info.batch_axis
        if b >= axis or int(np.prod(info.shape[:axis], dtype=np.int64)) != 1:
            raise self.err(node, f"axis={axis} merges the batch axis with features")
        self.set_alias(node.output[0], node.input[0], TensorInfo((1, info.features), 0))

    def _op_Squeeze(self, node) -> None:
        info = self._info(node)
        a = self.attrs(node)
        axes = self._axes(node, a, len(info.shape))
        if axes is None:
            axes = [k for k, d in enumerate(info.shape) if d == 1 and k != info.batch_axis]
        for ax in axes:
            if ax == info.batch_axis:
                raise self.err(node, "squeezing the batch axis (one row per actuator) is not supported")
            if info.shape[ax] != 1:
                raise self.err(node, f"axis {ax} has size {info.shape[ax]}, not 1")
        shape = tuple(d for k, d in enumerate(info.shape) if k not in axes)
        b = info.batch_axis - sum(1 for ax in axes if ax < info.batch_axis)
        self.set_alias(node.output[0], node.input[0], TensorInfo(shape, b))

    def _op_Unsqueeze(self, node) -> None:
        info = self._info(node)
        a = self.attrs(node)
        rank = len(info.shape) + len(self._raw_axes(node, a))
        axes = self._axes(node, a, rank)
        shape = list(info.shape)
        b = info.batch_axis
        for ax in axes:
            shape.insert(ax, 1)
            if ax <= b:
                b += 1
        self.set_alias(node.output[0], node.input[0], TensorInfo(tuple(shape), b))

    # -- index-map operators
    def _index(self, info: TensorInfo) -> np.ndarray:
        return np.arange(info.features, dtype=np.int64).reshape(info.shape)

    def _op_Transpose(self, node) -> None:
        info = self._info(node)
        perm = self.attrs(node).get("perm") or list(range(len(info.shape)))[::-1]
        perm = [int(p) for p in perm]
        idx = np.transpose(self._index(info), perm)
        out = TensorInfo(tuple(idx.shape), perm.index(info.batch_axis))
        self._copy_layer(node, self.buf(node.input[0]), node.output[0], out, idx)

    def _op_Slice(self, node) -> None:
        info = self._info(node)
        idx = self._index(info)[self._slices(node, self.attrs(node), info.shape, info)]
        if idx.size == 0:
            raise self.err(node, "empty slice")
        self._copy_layer(node, self.buf(node.input[0]), node.output[0], TensorInfo(idx.shape, info.batch_axis), idx)

    def _op_Gather(self, node) -> None:
        info = self._info(node)
        axis = self.attrs(node).get("axis", 0) % len(info.shape)
        if axis == info.batch_axis:
            raise self.err(node, "gathering along the batch axis (one row per actuator) is not supported")
        ind = np.asarray(self.const(node, 1, "indices")).astype(np.int64)
        size = info.shape[axis]
        if np.any(ind < -size) or np.any(ind >= size):
            raise self.err(node, f"indices {ind.tolist()} out of range for size {size}")
        idx = np.take(self._index(info), ind % size, axis=axis)
        b = info.batch_axis + (ind.ndim - 1 if axis < info.batch_axis else 0)
        self._copy_layer(node, self.buf(node.input[0]), node.output[0], TensorInfo(idx.shape, b), idx)

    def _op_Split(self, node) -> None:
        info = self._info(node)
        a = self.attrs(node)
        axis = a.get("axis", 0) % len(info.shape)
        if axis == info.batch_axis:
            raise self.err(node, "splitting along the batch axis (one row per actuator) is not supported")
        sizes = self._split_sizes(node, a, info.shape)
        pieces = np.split(self._index(info), np.cumsum(sizes)[:-1], axis=axis)
        for name, idx in zip(node.output, pieces):
            if name:
                self._copy_layer(node, self.buf(node.input[0]), name, TensorInfo(idx.shape, info.batch_axis), idx)

    def _op_Concat(self, node) -> None:
        names = [n for n in node.input if n]
        if any(n in self.consts for n in names):
            raise self.err(node, "concatenating a constant with a batched tensor is not supported")
        infos = [self.tensors[n] for n in names]
        rank = len(infos[0].shape)
        axis = self.attrs(node)["axis"] % rank
        b = infos[0].batch_axis
        for inf in infos:
            if len(inf.shape) != rank or inf.batch_axis != b:
                raise self.err(node, "inputs with different ranks or batch axes")
            if axis == b:
                raise self.err(node, "concatenating along the batch axis (one row per actuator) is not supported")
            if any(inf.shape[k] != infos[0].shape[k] for k in range(rank) if k != axis):
                raise self.err(node, "inputs of mismatched shapes")
        shape = list(infos[0].shape)
        shape[axis] = sum(inf.shape[axis] for inf in infos)
        out_info = TensorInfo(tuple(shape), b)
        out = node.output[0]
        if len(names) == 1:
            self.set_alias(out, names[0], out_info)
            return
        self.new_tensor(out, out_info)
        sizes = [inf.shape[axis] for inf in infos]
        pieces = np.split(self._index(out_info), np.cumsum(sizes)[:-1], axis=axis)
        for name, inf, dst in zip(names, infos, pieces):
            self._copy_layer(node, self.buf(name), out, out_info, np.arange(inf.features), dst)

    # -- compute operators
    def _op_Gemm(self, node) -> None:
        a = self.attrs(node)
        if node.input[0] in self.consts:
            raise self.err(node, "input A must be the batched tensor (a constant A is not supported)")
        info = self._info(node)
        if len(info.shape) != 2 or info.batch_axis != 0 or a.get("transA", 0):
            raise self.err(node, "A must be 2-D with the batch (actuator) axis first and transA=0")
        B = np.asarray(self.const(node, 1, "B (weights)"), np.float32)
        if B.ndim != 2:
            raise self.err(node, f"B must be 2-D, got shape {B.shape}")
        W = B.T if a.get("transB", 0) else B  # (K, M)
        K, M = W.shape
        if K != info.shape[1]:
            raise self.err(node, f"A has {info.shape[1]} columns but B has {K} rows")
        W = W * np.float32(a.get("alpha", 1.0))
        C = self.const(node, 2, "C (bias)", optional=True)
        bias = np.zeros(M, np.float32)
        if C is not None:
            C = np.asarray(C, np.float32) * np.float32(a.get("beta", 1.0))
            try:
                bias = np.broadcast_to(C, (1, M)).reshape(M).astype(np.float32)
            except ValueError:
                raise self.err(node, f"bias C of shape {C.shape} does not broadcast to (1, {M})") from None
        self._dense(node, info, W, bias, TensorInfo((1, M), 0))

    def _op_MatMul(self, node) -> None:
        if node.input[0] in self.consts:
            raise self.err(node, "the first input must be the batched tensor (a constant left operand is not supported)")
        if node.input[1] not in self.consts:
            raise self.err(node, "both operands are batched; only a constant weight matrix is supported")
        info = self._info(node)
        W = np.asarray(self.consts[node.input[1]], np.float32)
        if W.ndim != 2:
            raise self.err(node, f"the weight must be 2-D, got shape {W.shape}")
        if len(info.shape) < 2 or info.batch_axis == len(info.shape) - 1:
            raise self.err(node, "the batch (actuator) axis is the contracted axis")
        K, M = W.shape
        if info.shape[-1] != K:
            raise self.err(node, f"input has {info.shape[-1]} columns but the weight has {K} rows")
        self._dense(node, info, W, np.zeros(M, np.float32), TensorInfo(info.shape[:-1] + (M,), info.batch_axis))

    def _dense(self, node, info: TensorInfo, W: np.ndarray, bias: np.ndarray, out_info: TensorInfo) -> None:
        K = W.shape[0]
        rows = info.features // K
        out = self.new_tensor(node.output[0], out_info)
        self.layers.append(
            Layer(
                "dense", [self.buf(node.input[0])], [out],
                {"W": np.ascontiguousarray(W, np.float32), "b": np.ascontiguousarray(bias, np.float32),
                 "rows": rows, "act": 0, "alpha": 0.0, "beta": 0.0},
                node.name,
            )
        )

    def _elementwise(self, node) -> None:
        op = node.op_type
        a = self.attrs(node)
        if op in ACT:
            info = self._info(node)
            alpha, beta = self._act_params(node, a)
            out = self.new_tensor(node.output[0], info)
            self.layers.append(
                Layer("unary", [self.buf(node.input[0])], [out],
                      {"act": ACT[op], "alpha": alpha, "beta": beta}, node.name)
            )
            return
        # binary
        n0, n1 = node.input[0], node.input[1]
        code = BINOP[op]
        if n0 in self.consts or n1 in self.consts:
            reverse = n0 in self.consts
            dyn, cst = (n1, n0) if reverse else (n0, n1)
            info = self.tensors[dyn]
            c = np.asarray(self.consts[cst], np.float32)
            out_info, xmap, cmap = self._broadcast(node, info, None, c)
            cvals = c.reshape(-1)[cmap] if c.size else c.reshape(-1)
            out = self.new_tensor(node.output[0], out_info)
            self.layers.append(
                Layer("binary_const", [self.buf(dyn)], [out],
                      {"op": code, "reverse": int(reverse), "c": np.ascontiguousarray(cvals, np.float32),
                       "xmap": xmap}, node.name)
            )
        else:
            i0, i1 = self.tensors[n0], self.tensors[n1]
            out_info, m0, m1 = self._broadcast(node, i0, i1, None)
            out = self.new_tensor(node.output[0], out_info)
            self.layers.append(
                Layer("binary", [self.buf(n0), self.buf(n1)], [out],
                      {"op": code, "amap": m0, "bmap": m1}, node.name)
            )

    def _broadcast(self, node, i0: TensorInfo, i1: TensorInfo | None, c: np.ndarray | None):
        """Per-sample output shape and index maps (None = identity) of a broadcasting binary op."""
        s0 = i0.shape
        s1 = i1.shape if i1 is not None else c.shape
        rank = max(len(s0), len(s1))
        b0 = i0.batch_axis + rank - len(s0)
        if i1 is not None:
            b1 = i1.batch_axis + rank - len(s1)
            if b1 != b0:
                raise self.err(node, "the two batched operands have their batch axes at different positions")
        else:
            k = b0 - (rank - len(s1))
            if 0 <= k < len(s1) and s1[k] != 1:
                raise self.err(node, f"the constant of shape {c.shape} varies along the batch (actuator) axis")
        try:
            out_shape = np.broadcast_shapes(s0, s1)
        except ValueError:
            raise self.err(node, f"shapes {s0} and {s1} do not broadcast") from None
        out_info = TensorInfo(tuple(int(d) for d in out_shape), b0)

        def index_map(shape):
            idx = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape)
            full = np.broadcast_to(idx, out_shape).reshape(-1)
            return None if (full.size == idx.size and np.array_equal(full, idx.reshape(-1))) else full.astype(np.int32)

        m0 = index_map(s0)
        if i1 is not None:
            return out_info, m0, index_map(s1)
        cmap = np.broadcast_to(np.arange(c.size, dtype=np.int64).reshape(c.shape), out_shape).reshape(-1)
        return out_info, m0, cmap

    def _op_LSTM(self, node) -> None:
        a = self.attrs(node)
        direction = a.get("direction", b"forward")
        direction = direction.decode() if isinstance(direction, bytes) else direction
        if direction not in ("forward", "reverse"):
            raise self.err(node, f"direction={direction!r} is not supported (forward only)")
        acts = [s.decode() if isinstance(s, bytes) else s for s in a.get("activations", [])]
        if acts and [s.lower() for s in acts] != ["sigmoid", "tanh", "tanh"]:
            raise self.err(node, f"activations {acts} are not supported (only the default Sigmoid, Tanh, Tanh)")
        for key in ("activation_alpha", "activation_beta", "clip"):
            if key in a:
                raise self.err(node, f"attribute {key!r} is not supported")
        if a.get("input_forget", 0):
            raise self.err(node, "input_forget=1 is not supported")
        layout = int(a.get("layout", 0))
        if node.input[0] in self.consts:
            raise self.err(node, "the input X must be batched")
        X = self._info(node)
        W = np.asarray(self.const(node, 1, "W"), np.float32)
        R = np.asarray(self.const(node, 2, "R"), np.float32)
        if W.ndim != 3 or W.shape[0] != 1 or R.ndim != 3 or R.shape[0] != 1:
            raise self.err(node, f"W {W.shape} and R {R.shape} must be (1, 4*hidden, .) (one direction)")
        H = int(a.get("hidden_size", R.shape[2]))
        K = W.shape[2]
        if W.shape[1] != 4 * H or R.shape[1:] != (4 * H, H):
            raise self.err(node, f"W {W.shape} / R {R.shape} do not match hidden_size={H}")
        batch = 1 if layout == 0 else 0
        if len(X.shape) != 3 or X.batch_axis != batch:
            raise self.err(node, f"X must be 3-D with the batch axis at {batch} (layout={layout}), got "
                                 f"per-sample shape {X.shape} with the batch axis at {X.batch_axis}")
        seq = X.shape[1 - batch]
        if seq != 1:
            raise self.err(node, f"a sequence of {seq} steps; the controller feeds one step per actuator step")
        if X.shape[2] != K:
            raise self.err(node, f"X has {X.shape[2]} features but W expects {K}")
        B = self.const(node, 3, "B", optional=True)
        bias = np.zeros(4 * H, np.float32)
        if B is not None:
            B = np.asarray(B, np.float32).reshape(-1)
            if B.size != 8 * H:
                raise self.err(node, f"B has {B.size} entries, expected {8 * H}")
            bias = B[: 4 * H] + B[4 * H:]
        if len(node.input) > 4 and node.input[4]:
            sl = self.consts.get(node.input[4])
            if sl is None or np.any(np.asarray(sl) != 1):
                raise self.err(node, "sequence_lens must be absent (or constant ones)")
        states = []
        for pos, what in ((5, "initial_h"), (6, "initial_c")):
            if len(node.input) > pos and node.input[pos]:
                name = node.input[pos]
                if name in self.consts:
                    raise self.err(node, f"a constant {what} is not supported")
                info = self.tensors[name]
                if len(info.shape) != 3 or info.batch_axis != batch or info.features != H:
                    raise self.err(node, f"{what} must be 3-D with the batch axis at {batch} and {H} features, "
                                         f"got per-sample shape {info.shape} with the batch axis at {info.batch_axis}")
                states.append(self.buf(name))
            else:
                states.append(None)
        P = self.const(node, 7, "P", optional=True)
        peep = np.zeros(3 * H, np.float32)
        if P is not None:
            peep = np.asarray(P, np.float32).reshape(-1)
            if peep.size != 3 * H:
                raise self.err(node, f"P has {peep.size} entries, expected {3 * H}")
        outs = list(node.output) + [""] * (3 - len(node.output))
        y_h = outs[1] or self.tmp("lstm_h")
        y_c = outs[2] or self.tmp("lstm_c")
        hinfo = TensorInfo((1, 1, H), batch)
        self.new_tensor(y_h, hinfo)
        self.new_tensor(y_c, hinfo)
        if outs[0]:
            self.set_alias(outs[0], y_h, TensorInfo((1, 1, 1, H), 2 if layout == 0 else 0))
        self.layers.append(
            Layer(
                "lstm", [self.buf(node.input[0]), states[0], states[1]], [y_h, y_c],
                {"W": np.ascontiguousarray(W[0].T), "R": np.ascontiguousarray(R[0].T), "b": bias, "P": peep, "H": H},
                node.name,
            )
        )

    # -- fusion: dense -> bias add -> activation
    def _consumers(self, buf: str) -> int:
        n = sum(1 for layer in self.layers for b in layer.inputs if b == buf)
        n += sum(1 for o in self.outputs if self.buf(o) == buf)
        return n

    def _fuse(self) -> None:
        out: list[Layer] = []
        for layer in self.layers:
            prev = out[-1] if out else None
            if (
                prev is not None
                and prev.kind == "dense"
                and prev.params["act"] == 0
                and layer.inputs[0] == prev.outputs[0]
                and self._consumers(prev.outputs[0]) == 1
            ):
                if layer.kind == "binary_const" and layer.params["op"] in (0, 1) and layer.params["xmap"] is None \
                        and not (layer.params["op"] == 1 and layer.params["reverse"]):
                    M = prev.params["W"].shape[1]
                    c = layer.params["c"].reshape(prev.params["rows"], M)
                    if np.all(c == c[:1]):
                        sign = 1.0 if layer.params["op"] == 0 else -1.0
                        prev.params["b"] = (prev.params["b"] + sign * c[0]).astype(np.float32)
                        self._retarget(prev, layer)
                        continue
                if layer.kind == "unary":
                    prev.params.update(act=layer.params["act"], alpha=layer.params["alpha"], beta=layer.params["beta"])
                    self._retarget(prev, layer)
                    continue
            out.append(layer)
        self.layers = out

    def _retarget(self, prev: Layer, layer: Layer) -> None:
        """``prev`` now writes ``layer``'s output; its old buffer disappears."""
        old, new = prev.outputs[0], layer.outputs[0]
        prev.outputs[0] = new
        self.buffers.pop(old, None)
        for k, v in list(self.alias.items()):
            if v == old:
                self.alias[k] = new
        self.alias[old] = new


def _reshape_target(conv: _Converter, node, shape, target, a) -> tuple[int, ...]:
    dims = [int(v) for v in np.atleast_1d(target)]
    if not a.get("allowzero", 0):
        dims = [shape[k] if d == 0 else d for k, d in enumerate(dims)]
    return tuple(dims)


def _np_act(code: int, x: np.ndarray, alpha: float, beta: float) -> np.ndarray:
    """numpy version of the activations (constant folding only)."""
    if code == 0:
        return x
    if code == 1:
        return np.maximum(x, 0)
    if code == 2:
        return np.tanh(x)
    if code == 3:
        return 1 / (1 + np.exp(-x))
    if code == 4:
        return np.where(x >= 0, x, alpha * (np.exp(x) - 1))
    if code == 5:
        return beta * np.where(x > 0, x, alpha * (np.exp(x) - 1))
    if code == 6:
        return np.where(x >= 0, x, alpha * x)
    if code == 7:
        return np.logaddexp(0, x)
    if code == 8:
        return x / (1 + np.abs(x))
    if code == 9:
        return np.clip(alpha * x + beta, 0, 1)
    if code == 10:
        return np.clip(x, alpha, beta)
    if code == 11:
        return -x
    if code == 12:
        return np.abs(x)
    return np.exp(x)


def build_graph(model, path: str, owner: str, batch_axes: dict[str, int] | None = None) -> Graph:
    """Convert ``model`` (an ``onnx.ModelProto``) into a :class:`Graph` (``ValueError`` on unsupported content).

    ``owner`` (the controller's name) prefixes every error; ``batch_axes``
    overrides the batch axis of named graph inputs.
    """
    return _Converter(model, path, owner, batch_axes).run()

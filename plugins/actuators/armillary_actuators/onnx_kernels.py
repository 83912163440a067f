"""Warp kernels running a converted ONNX network (:class:`.onnx_graph.Graph`) batched over actuators.

Every batched tensor is a ``wp.array2d`` of shape ``(n, F)`` (one row per
actuator). One launch per layer. A dense layer (Gemm/MatMul + fused bias and
activation) with ``K * M >= TILE_MIN_WORK`` weights is a tiled matrix product
(``wp.tile_matmul`` on blocks of ``TILE_ROWS`` actuators, one kernel compiled
per tile shape and activation); a smaller one is one thread per output, a dot
product of length ``K`` against the weights stored ``(K, M)``. An LSTM step is
one kernel over ``(n, hidden)``.

:class:`Program` holds the weights on one device; :meth:`Program.workspace`
allocates every buffer for ``n`` actuators once and records the launches,
so :meth:`Workspace.run` allocates nothing and is CUDA-graph capturable.
"""

from __future__ import annotations

import numpy as np
import warp as wp

from .onnx_graph import Graph

__all__ = ["Program", "Workspace"]

# inference only: no adjoint kernels (halves compilation time)
wp.set_module_options({"enable_backward": False})

_ACT_IDENTITY = wp.constant(0)
_ACT_RELU = wp.constant(1)
_ACT_TANH = wp.constant(2)
_ACT_SIGMOID = wp.constant(3)
_ACT_ELU = wp.constant(4)
_ACT_SELU = wp.constant(5)
_ACT_LEAKY_RELU = wp.constant(6)
_ACT_SOFTPLUS = wp.constant(7)
_ACT_SOFTSIGN = wp.constant(8)
_ACT_HARD_SIGMOID = wp.constant(9)
_ACT_CLIP = wp.constant(10)
_ACT_NEG = wp.constant(11)
_ACT_ABS = wp.constant(12)
_ACT_EXP = wp.constant(13)


@wp.func
def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + wp.exp(-x))


@wp.func
def _act(code: int, x: float, alpha: float, beta: float) -> float:
    """ONNX activation ``code`` (see ``onnx_graph.ACT``) with its parameters."""
    y = x
    if code == _ACT_RELU:
        y = wp.max(x, 0.0)
    elif code == _ACT_TANH:
        y = wp.tanh(x)
    elif code == _ACT_SIGMOID:
        y = _sigmoid(x)
    elif code == _ACT_ELU:
        if x < 0.0:
            y = alpha * (wp.exp(x) - 1.0)
    elif code == _ACT_SELU:
        if x > 0.0:
            y = beta * x
        else:
            y = beta * alpha * (wp.exp(x) - 1.0)
    elif code == _ACT_LEAKY_RELU:
        if x < 0.0:
            y = alpha * x
    elif code == _ACT_SOFTPLUS:
        y = wp.max(x, 0.0) + wp.log(1.0 + wp.exp(-wp.abs(x)))
    elif code == _ACT_SOFTSIGN:
        y = x / (1.0 + wp.abs(x))
    elif code == _ACT_HARD_SIGMOID:
        y = wp.clamp(alpha * x + beta, 0.0, 1.0)
    elif code == _ACT_CLIP:
        y = wp.min(wp.max(x, alpha), beta)
    elif code == _ACT_NEG:
        y = -x
    elif code == _ACT_ABS:
        y = wp.abs(x)
    elif code == _ACT_EXP:
        y = wp.exp(x)
    return y


@wp.func
def _binop(op: int, a: float, b: float) -> float:
    y = a + b
    if op == 1:
        y = a - b
    elif op == 2:
        y = a * b
    elif op == 3:
        y = a / b
    return y


@wp.kernel
def dense_kernel(
    x: wp.array2d(dtype=wp.float32),
    w: wp.array2d(dtype=wp.float32),
    b: wp.array(dtype=wp.float32),
    act: int,
    alpha: float,
    beta: float,
    y: wp.array2d(dtype=wp.float32),
):
    """``y[n, r*M + m] = act(sum_k x[n, r*K + k] * w[k, m] + b[m])``; ``w`` is ``(K, M)``."""
    n, t = wp.tid()
    k_in = w.shape[0]
    m_out = w.shape[1]
    r = t // m_out
    m = t - r * m_out
    base = r * k_in
    acc = b[m]
    for k in range(k_in):
        acc += x[n, base + k] * w[k, m]
    y[n, t] = _act(act, acc, alpha, beta)


# tiled dense layers: one block computes a (TILE_ROWS, tm) output tile, looping over K in tk chunks
# (tile_load zero-pads past the array ends and tile_store masks them, so any n, K, M work)
TILE_ROWS = 32
TILE_MIN_WORK = 256  # K * M from which a dense layer uses the tiled kernel (smaller: dense_kernel)
_TILE_KERNELS: dict = {}


def _pow2_tile(size: int) -> int:
    t = 8
    while t < size and t < 64:
        t *= 2
    return t


def _float_key(x: float) -> str:
    """``x`` as a C identifier fragment (its float64 bits in hex)."""
    import struct

    return struct.pack("<d", float(x)).hex()


def dense_tile_kernel(tk: int, tm: int, act: int, alpha: float, beta: float):
    """The tiled dense kernel for weight tiles ``(tk, tm)`` and a fixed activation (compiled once per key)."""
    key = (TILE_ROWS, tk, tm, act, alpha, beta)
    kernel = _TILE_KERNELS.get(key)
    if kernel is not None:
        return kernel
    TN, TK, TM, ACT, ALPHA, BETA = TILE_ROWS, tk, tm, act, alpha, beta
    # Warp's module hash does not see the constants of a function handed to tile_map (act_fn), so
    # kernels differing only in activation would share a module (and a kernel-cache entry): the
    # kernel's name carries the whole key.
    name = "dense_tiled_{}_{}_{}_{}_{}_{}".format(TN, tk, tm, int(act), _float_key(alpha), _float_key(beta))

    @wp.func
    def act_fn(v: float):
        return _act(ACT, v, ALPHA, BETA)

    @wp.kernel(name=name, module="unique", enable_backward=False)
    def dense_tiled(
        x: wp.array2d(dtype=wp.float32),
        w: wp.array2d(dtype=wp.float32),
        b: wp.array(dtype=wp.float32),
        y: wp.array2d(dtype=wp.float32),
    ):
        i, j = wp.tid()
        acc = wp.tile_zeros(shape=(TN, TM), dtype=wp.float32)
        for kk in range((w.shape[0] + TK - 1) // TK):
            a = wp.tile_load(x, shape=(TN, TK), offset=(i * TN, kk * TK))
            wt = wp.tile_load(w, shape=(TK, TM), offset=(kk * TK, j * TM))
            wp.tile_matmul(a, wt, acc)
        bias = wp.tile_load(b, shape=(TM,), offset=(j * TM,))
        out = acc + wp.tile_broadcast(wp.tile_reshape(bias, shape=(1, TM)), shape=(TN, TM))
        wp.tile_store(y, wp.tile_map(act_fn, out), offset=(i * TN, j * TM))

    _TILE_KERNELS[key] = dense_tiled
    return dense_tiled


@wp.kernel
def unary_kernel(
    x: wp.array2d(dtype=wp.float32),
    act: int,
    alpha: float,
    beta: float,
    y: wp.array2d(dtype=wp.float32),
):
    n, f = wp.tid()
    y[n, f] = _act(act, x[n, f], alpha, beta)


@wp.kernel
def binary_const_kernel(
    x: wp.array2d(dtype=wp.float32),
    xmap: wp.array(dtype=wp.int32),
    use_xmap: int,
    c: wp.array(dtype=wp.float32),
    op: int,
    reverse: int,
    y: wp.array2d(dtype=wp.float32),
):
    """``y[n, f] = x[n, xmap[f]] (op) c[f]`` (operands swapped when ``reverse``)."""
    n, f = wp.tid()
    xf = f
    if use_xmap != 0:
        xf = xmap[f]
    a = x[n, xf]
    if reverse != 0:
        y[n, f] = _binop(op, c[f], a)
    else:
        y[n, f] = _binop(op, a, c[f])


@wp.kernel
def binary_kernel(
    a: wp.array2d(dtype=wp.float32),
    amap: wp.array(dtype=wp.int32),
    use_amap: int,
    b: wp.array2d(dtype=wp.float32),
    bmap: wp.array(dtype=wp.int32),
    use_bmap: int,
    op: int,
    y: wp.array2d(dtype=wp.float32),
):
    n, f = wp.tid()
    af = f
    bf = f
    if use_amap != 0:
        af = amap[f]
    if use_bmap != 0:
        bf = bmap[f]
    y[n, f] = _binop(op, a[n, af], b[n, bf])


@wp.kernel
def copy_kernel(
    x: wp.array2d(dtype=wp.float32),
    src: wp.array(dtype=wp.int32),
    dst: wp.array(dtype=wp.int32),
    use_dst: int,
    y: wp.array2d(dtype=wp.float32),
):
    """``y[n, dst[k]] = x[n, src[k]]`` (``dst[k] = k`` unless ``use_dst``)."""
    n, k = wp.tid()
    d = k
    if use_dst != 0:
        d = dst[k]
    y[n, d] = x[n, src[k]]


@wp.kernel
def lstm_kernel(
    x: wp.array2d(dtype=wp.float32),
    h0: wp.array2d(dtype=wp.float32),
    c0: wp.array2d(dtype=wp.float32),
    w: wp.array2d(dtype=wp.float32),
    r: wp.array2d(dtype=wp.float32),
    bias: wp.array(dtype=wp.float32),
    peep: wp.array(dtype=wp.float32),
    h_out: wp.array2d(dtype=wp.float32),
    c_out: wp.array2d(dtype=wp.float32),
):
    """One ONNX LSTM step (gate order i, o, f, c); ``w`` is ``(K, 4H)``, ``r`` ``(H, 4H)``."""
    n, j = wp.tid()
    hs = r.shape[0]
    gi = bias[j]
    go = bias[hs + j]
    gf = bias[2 * hs + j]
    gc = bias[3 * hs + j]
    for k in range(w.shape[0]):
        xv = x[n, k]
        gi += xv * w[k, j]
        go += xv * w[k, hs + j]
        gf += xv * w[k, 2 * hs + j]
        gc += xv * w[k, 3 * hs + j]
    for k in range(hs):
        hv = h0[n, k]
        gi += hv * r[k, j]
        go += hv * r[k, hs + j]
        gf += hv * r[k, 2 * hs + j]
        gc += hv * r[k, 3 * hs + j]
    c_prev = c0[n, j]
    i_g = _sigmoid(gi + peep[j] * c_prev)
    f_g = _sigmoid(gf + peep[2 * hs + j] * c_prev)
    c_new = f_g * c_prev + i_g * wp.tanh(gc)
    o_g = _sigmoid(go + peep[hs + j] * c_new)
    h_out[n, j] = o_g * wp.tanh(c_new)
    c_out[n, j] = c_new


class Program:
    """The weights of a :class:`~.onnx_graph.Graph` on ``device``."""

    def __init__(self, graph: Graph, device):
        self.graph = graph
        self.device = wp.get_device(device)
        dummy_i = wp.zeros(1, dtype=wp.int32, device=self.device)
        self._params: list[dict] = []
        for layer in graph.layers:
            p = {}
            for key, val in layer.params.items():
                if isinstance(val, np.ndarray):
                    dtype = wp.int32 if np.issubdtype(val.dtype, np.integer) else wp.float32
                    p[key] = wp.array(val, dtype=dtype, device=self.device)
                elif val is None and key in ("xmap", "amap", "bmap"):
                    p[key] = dummy_i
                else:
                    p[key] = val
            if layer.kind == "copy" and "dst" not in p:
                p["dst"] = dummy_i
            self._params.append(p)

    def workspace(self, n: int) -> Workspace:
        """Buffers for ``n`` actuators and the recorded launches (allocates; call before capturing)."""
        return Workspace(self, n)


class Workspace:
    """Every buffer of a :class:`Program` for ``n`` actuators (``buffer(name)``: ``(n, F)``) and its launches."""

    def __init__(self, program: Program, n: int):
        g = program.graph
        dev = program.device
        self.n = n
        self.graph = g
        self.buffers = {name: wp.zeros((n, f), dtype=wp.float32, device=dev) for name, f in g.buffers.items()}
        self.launches = []
        for layer, p in zip(g.layers, program._params):
            self.launches.append(self._record(layer, p, dev))

    def buffer(self, name: str) -> wp.array:
        """The ``(n, F)`` buffer holding graph tensor ``name`` (an input, output or any intermediate)."""
        return self.buffers[self.graph.buffer(name)]

    def _zeros(self, f: int, dev) -> wp.array:
        return wp.zeros((self.n, f), dtype=wp.float32, device=dev)

    def _record(self, layer, p, dev):
        buf = self.buffers
        n = self.n
        if layer.kind == "dense":
            y = buf[layer.outputs[0]]
            k_in, m_out = layer.params["W"].shape
            if k_in * m_out >= TILE_MIN_WORK:
                rows = n * layer.params["rows"]
                kernel = dense_tile_kernel(_pow2_tile(k_in), _pow2_tile(m_out), p["act"], p["alpha"], p["beta"])
                tm = _pow2_tile(m_out)
                block = 1 if dev.is_cpu else 64
                return wp.launch(kernel, dim=((rows + TILE_ROWS - 1) // TILE_ROWS, (m_out + tm - 1) // tm, block),
                                 inputs=[buf[layer.inputs[0]].reshape((rows, k_in)), p["W"], p["b"]],
                                 outputs=[y.reshape((rows, m_out))], device=dev, block_dim=block, record_cmd=True)
            return wp.launch(dense_kernel, dim=(n, y.shape[1]),
                             inputs=[buf[layer.inputs[0]], p["W"], p["b"], p["act"], p["alpha"], p["beta"]],
                             outputs=[y], device=dev, record_cmd=True)
        if layer.kind == "unary":
            y = buf[layer.outputs[0]]
            return wp.launch(unary_kernel, dim=(n, y.shape[1]),
                             inputs=[buf[layer.inputs[0]], p["act"], p["alpha"], p["beta"]],
                             outputs=[y], device=dev, record_cmd=True)
        if layer.kind == "binary_const":
            y = buf[layer.outputs[0]]
            return wp.launch(binary_const_kernel, dim=(n, y.shape[1]),
                             inputs=[buf[layer.inputs[0]], p["xmap"], int(layer.params["xmap"] is not None), p["c"],
                                     p["op"], p["reverse"]],
                             outputs=[y], device=dev, record_cmd=True)
        if layer.kind == "binary":
            y = buf[layer.outputs[0]]
            return wp.launch(binary_kernel, dim=(n, y.shape[1]),
                             inputs=[buf[layer.inputs[0]], p["amap"], int(layer.params["amap"] is not None),
                                     buf[layer.inputs[1]], p["bmap"], int(layer.params["bmap"] is not None), p["op"]],
                             outputs=[y], device=dev, record_cmd=True)
        if layer.kind == "copy":
            return wp.launch(copy_kernel, dim=(n, p["src"].shape[0]),
                             inputs=[buf[layer.inputs[0]], p["src"], p["dst"], int("dst" in layer.params)],
                             outputs=[buf[layer.outputs[0]]], device=dev, record_cmd=True)
        if layer.kind == "lstm":
            hs = p["H"]
            h0 = buf[layer.inputs[1]] if layer.inputs[1] else self._zeros(hs, dev)
            c0 = buf[layer.inputs[2]] if layer.inputs[2] else self._zeros(hs, dev)
            return wp.launch(lstm_kernel, dim=(n, hs),
                             inputs=[buf[layer.inputs[0]], h0, c0, p["W"], p["R"], p["b"], p["P"]],
                             outputs=[buf[layer.outputs[0]], buf[layer.outputs[1]]], device=dev, record_cmd=True)
        raise AssertionError(layer.kind)

    def run(self) -> None:
        """Run every layer (reads the input buffers, writes the rest; no allocation)."""
        for launch in self.launches:
            launch.launch()

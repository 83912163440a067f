"""Torch backend of the neural controllers: ``.pt2`` archives saved with ``torch.export.save``.

Imported only when a Torch checkpoint is loaded (torch is optional). The
network is the archive's exported program (``torch.export.load(path).module()``);
checkpoint metadata is its ``metadata.json`` extra file (a JSON object).
Calling conventions (the reference engine's):

- MLP: ``net(x)`` with ``x`` of shape ``(n, F)`` -> effort of ``n`` values;
- LSTM: ``net(x, (h, c))`` with ``x`` ``(n, 1, 2)`` (batch first, one step),
  ``h``, ``c`` ``(num_layers, n, hidden_size)`` -> ``(effort, (h', c'))``.

Tensors cross between Warp and Torch with ``wp.to_torch`` (zero copy). Not
graphable: each step calls into Torch from Python.
"""

from __future__ import annotations

import json
from typing import Any

import warp as wp

__all__ = ["TorchCheckpoint", "import_torch"]


def import_torch(owner: str, path: str):
    """``torch``, or ``ImportError`` saying how to install it."""
    try:
        import torch
    except ImportError as exc:
        raise ImportError(
            f"{owner}: {path!r} is a Torch checkpoint; loading it needs PyTorch: pip install torch "
            "(or export the network to ONNX, which needs no Torch at run time)"
        ) from exc
    return torch


class TorchCheckpoint:
    """An exported program, its metadata and the shapes of its example inputs."""

    def __init__(self, path: str, owner: str):
        torch = import_torch(owner, path)
        self.torch = torch
        self.path = path
        self.owner = owner
        extra = {"metadata.json": ""}
        try:
            self.program = torch.export.load(path, extra_files=extra)
        except Exception as exc:  # not a pt2 archive, incompatible torch version, ...
            raise ValueError(
                f"{owner}: {path!r} is not a pt2 archive saved with torch.export.save ({type(exc).__name__}: {exc})"
            ) from exc
        text = extra.get("metadata.json") or ""
        if isinstance(text, bytes):
            text = text.decode()
        self.metadata: dict[str, Any] = {}
        if text.strip():
            try:
                meta = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{owner}: the metadata.json extra file of {path!r} is not valid JSON") from exc
            if not isinstance(meta, dict):
                raise ValueError(f"{owner}: the metadata.json extra file of {path!r} must hold a JSON object")
            self.metadata = meta
        self._modules: dict[str, Any] = {}

    def input_shapes(self) -> list[tuple]:
        """Shapes of the user inputs as exported (ints; a dynamic dimension is ``None``)."""
        names = list(self.program.graph_signature.user_inputs)
        shapes = []
        for node in self.program.graph.nodes:
            if node.op == "placeholder" and node.name in names:
                val = node.meta.get("val")
                shape = getattr(val, "shape", None)
                if shape is None:
                    shapes.append(None)
                    continue
                shapes.append(tuple(int(d) if isinstance(d, int) else None for d in shape))
        return shapes

    def module(self, device):
        """The callable network on Warp ``device``."""
        key = str(device)
        mod = self._modules.get(key)
        if mod is None:
            torch_device = wp.device_to_torch(device)
            program = self.program
            if torch_device != "cpu":
                try:
                    from torch.export.passes import move_to_device_pass

                    program = move_to_device_pass(program, torch_device)
                    mod = program.module()
                except ImportError:  # older torch
                    mod = program.module().to(torch_device)
            else:
                mod = program.module()
            self._modules[key] = mod
        return mod

    def run_mlp(self, device, x: wp.array, y: wp.array) -> None:
        """``y[:, 0] = net(x)`` (``x`` ``(n, F)``, ``y`` ``(n, 1)`` Warp arrays)."""
        torch = self.torch
        n = x.shape[0]
        with torch.no_grad():
            out = self.module(device)(wp.to_torch(x))
            out = self._tensor(out, "the network output")
            if out.numel() != n:
                raise ValueError(
                    f"{self.owner}: {self.path!r} returned {out.numel()} values for {n} actuators "
                    "(one effort per actuator expected)"
                )
            wp.to_torch(y).copy_(out.reshape(n, 1))

    def run_lstm(self, device, x: wp.array, hidden: wp.array, cell: wp.array, y: wp.array,
                 hidden_out: wp.array, cell_out: wp.array) -> None:
        """One step: ``x`` ``(n, 2)``, ``hidden``/``cell`` ``(L, n, H)`` -> ``y`` ``(n, 1)`` and the next state."""
        torch = self.torch
        n = x.shape[0]
        with torch.no_grad():
            out = self.module(device)(wp.to_torch(x).reshape(n, 1, 2), (wp.to_torch(hidden), wp.to_torch(cell)))
            if not (isinstance(out, (tuple, list)) and len(out) == 2 and isinstance(out[1], (tuple, list))
                    and len(out[1]) == 2):
                raise ValueError(
                    f"{self.owner}: {self.path!r} must return (effort, (hidden, cell)), got {type(out).__name__}"
                )
            eff = self._tensor(out[0], "the effort output")
            if eff.numel() != n:
                raise ValueError(f"{self.owner}: {self.path!r} returned {eff.numel()} efforts for {n} actuators")
            h1 = self._tensor(out[1][0], "the hidden state output")
            c1 = self._tensor(out[1][1], "the cell state output")
            for name, t, dst in (("hidden", h1, hidden_out), ("cell", c1, cell_out)):
                if tuple(t.shape) != tuple(dst.shape):
                    raise ValueError(
                        f"{self.owner}: {self.path!r} returned a {name} state of shape {tuple(t.shape)}, "
                        f"expected {tuple(dst.shape)} (num_layers, n, hidden_size)"
                    )
                wp.to_torch(dst).copy_(t)
            wp.to_torch(y).copy_(eff.reshape(n, 1))

    def _tensor(self, value, what: str):
        torch = self.torch
        if isinstance(value, (tuple, list)) and len(value) == 1:
            value = value[0]
        if not isinstance(value, torch.Tensor):
            raise ValueError(f"{self.owner}: {what} of {self.path!r} is not a tensor ({type(value).__name__})")  # noqa: TRY004
        return value.to(torch.float32)

"""Cheap repeated kernel launches: :class:`LaunchCache`.

On the CPU, ``wp.launch`` spends most of its time packing arguments (a few microseconds per
argument), which dominates small per-step kernels with dozens of model arrays. A solver that
launches the same kernel with the same arrays every step (ping-pong states alternate between
two argument sets) can record the packed launch once per argument set and replay it.
"""

from __future__ import annotations

from collections import OrderedDict

import warp as wp

__all__ = ["LaunchCache"]


class LaunchCache:
    """Records ``wp.launch`` commands keyed by their exact arguments and replays them.

    The key holds the identity of every array argument and the value of every other
    argument; the recorded command keeps references to its arrays, so an ``id`` cannot be
    reused by another array while its entry lives. Up to ``max_entries`` argument sets are
    kept (least recently used evicted). Replaying does not synchronise and is capturable.
    """

    def __init__(self, max_entries: int = 16):
        self.max_entries = int(max_entries)
        self._entries: OrderedDict = OrderedDict()

    @staticmethod
    def _key_of(value):
        if isinstance(value, wp.array):
            return ("a", id(value))
        if value is None:
            return ("n",)
        if isinstance(value, (int, float, bool)):
            return ("v", type(value), value)
        return ("o", id(value))

    def launch(self, kernel, dim, inputs, outputs=(), device=None) -> None:
        """Like ``wp.launch(kernel, dim, inputs=..., outputs=..., device=...)``."""
        key = (id(kernel), dim if isinstance(dim, int) else tuple(dim), str(device),
               tuple(self._key_of(v) for v in inputs), tuple(self._key_of(v) for v in outputs))  # fmt: skip
        cmd = self._entries.get(key)
        if cmd is None:
            cmd = wp.launch(kernel, dim=dim, inputs=list(inputs), outputs=list(outputs), device=device,
                            record_cmd=True)  # fmt: skip
            self._entries[key] = (cmd, kernel, tuple(inputs), tuple(outputs))
            if len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        else:
            self._entries.move_to_end(key)
            cmd = cmd[0]
        cmd.launch()

    def clear(self) -> None:
        """Forget every recorded launch (releases the references they hold to arrays)."""
        self._entries.clear()

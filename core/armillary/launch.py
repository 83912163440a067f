"""Cheap repeated kernel launches: :class:`LaunchCache`.

On the CPU, ``wp.launch`` spends most of its time packing arguments (a few microseconds per
argument), which dominates small per-step kernels with dozens of model arrays. A solver that
launches the same kernel with the same arrays every step (ping-pong states alternate between
two argument sets) can record the packed launch once per argument set and replay it.

Even a recorded ``wp.Launch`` re-packs every argument into a fresh ctypes block on each CPU
replay (about 8 us for a 30-argument kernel); :func:`replayer` packs the block once and calls the
compiled kernel entry directly (about 1.4 us).

Both are tape-aware: a replayed launch bypasses ``wp.launch``, so a recording ``wp.Tape`` would not
see it and its gradients would silently be zero. While a tape records (:func:`tape_recording`),
:class:`LaunchCache` launches through ``wp.launch`` (the tape records it) and a :func:`replayer`
callable runs its ``relaunch`` fallback, or raises when it has none.
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict

import warp as wp

__all__ = ["LaunchCache", "has_adjoint", "replayer", "tape_recording"]

try:
    from warp._src import context as _warp_context
except ImportError:  # older Warp layouts
    from warp import context as _warp_context


def tape_recording() -> bool:
    """True while a ``wp.Tape`` records launches (inside ``with wp.Tape():``)."""
    runtime = _warp_context.runtime
    return runtime is not None and runtime.tape is not None


def has_adjoint(kernel) -> bool:
    """Whether ``kernel`` is compiled with a backward (adjoint) entry: its own ``enable_backward``
    option, else its module's."""
    option = kernel.options.get("enable_backward")
    if option is None:
        option = kernel.module.options.get("enable_backward", True)
    return bool(option)


def replayer(cmd, relaunch=None):
    """A zero-argument callable that runs the recorded launch ``cmd`` (from ``wp.launch(...,
    record_cmd=True)``) again with the same arguments.

    While a ``wp.Tape`` records, the callable runs ``relaunch`` instead (a zero-argument callable
    doing the same launch through ``wp.launch``, so the tape records it); without ``relaunch`` it
    raises ``RuntimeError`` naming the kernel rather than leave the tape without the launch.

    On the CPU the argument block is packed once and the kernel's compiled forward entry is
    called directly; while a Warp CPU capture is active, and on other devices or where Warp's
    launch object lacks the expected fields, it is ``cmd.launch``. The callable keeps ``cmd``
    (and so every argument array) alive."""
    runtime = _warp_context.runtime
    kernel_name = getattr(getattr(cmd, "kernel", None), "key", "?")

    def untaped() -> None:
        raise RuntimeError(
            f"the recorded launch of kernel {kernel_name!r} was replayed while a wp.Tape records; "
            "replays bypass the tape, so its gradients would be lost: launch it with wp.launch while "
            "recording (pass relaunch= to armillary.launch.replayer)"
        )

    on_tape = relaunch if relaunch is not None else untaped

    def launch_plain() -> None:
        if runtime.tape is not None:
            on_tape()
        else:
            cmd.launch()

    try:
        if not cmd.device.is_cpu or cmd.adjoint or int(getattr(cmd, "block_dim", 1) or 1) > 1:
            return launch_plain
        params = cmd.params
        labels = [a.label for a in cmd.kernel.adj.args]
        if len(labels) != len(params) - 1:
            return launch_plain
        fields = [(label, type(p)) for label, p in zip(labels, params[1:])]
        block = type("ArgsStruct", (ctypes.Structure,), {"_fields_": fields})()
        for (label, _), p in zip(fields, params[1:]):
            setattr(block, label, p)
        forward = cmd.hooks.forward
        bounds_ref, block_ref = ctypes.byref(params[0]), ctypes.byref(block)
        runtime._apic_capture  # noqa: B018 - the capture flag checked on every replay must exist
    except (AttributeError, ImportError, TypeError):
        return launch_plain

    def run() -> None:
        if runtime.tape is not None:  # a recording tape must see the launch
            on_tape()
        elif runtime._apic_capture is not None:  # a capture records launches: Warp's own path
            cmd.launch()
        else:
            forward(bounds_ref, block_ref)

    run.keep_alive = (cmd, block)
    return run


class LaunchCache:
    """Records ``wp.launch`` commands keyed by their exact arguments and replays them.

    An argument set is recorded the second time it is launched (the first launch is a plain
    ``wp.launch``), so argument sets that never come back cost no recording.

    The key holds the identity of every array argument and the value of every other
    argument; the recorded command keeps references to its arrays, so an ``id`` cannot be
    reused by another array while its entry lives. Up to ``max_entries`` argument sets are
    kept (least recently used evicted). Replaying does not synchronise and is capturable; while
    a ``wp.Tape`` records, every launch goes through ``wp.launch`` so that the tape records it.
    """

    def __init__(self, max_entries: int = 16):
        self.max_entries = int(max_entries)
        self._entries: OrderedDict = OrderedDict()
        self._seen: OrderedDict = OrderedDict()  # keys launched once, not recorded (bounded)

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
        if _warp_context.runtime.tape is not None:  # a recording tape must see the launch; nothing to cache
            # a kernel compiled without adjoints (collision) is left off the tape: its outputs are
            # constants for the gradients either way, and the tape would warn on every backward
            wp.launch(kernel, dim=dim, inputs=list(inputs), outputs=list(outputs), device=device,
                      record_tape=has_adjoint(kernel))  # fmt: skip
            return
        key = (id(kernel), dim if isinstance(dim, int) else tuple(dim), str(device),
               tuple(self._key_of(v) for v in inputs), tuple(self._key_of(v) for v in outputs))  # fmt: skip
        cmd = self._entries.get(key)
        if cmd is None and key not in self._seen:
            # first sight of this argument set: a plain launch. Recording costs more than a launch
            # (packing plus a replayer), which only pays off for argument sets that come back
            # (ping-pong states); rollouts over fresh arrays every step never record.
            self._seen[key] = None
            if len(self._seen) > 4 * self.max_entries:
                self._seen.popitem(last=False)
            wp.launch(kernel, dim=dim, inputs=list(inputs), outputs=list(outputs), device=device)
            return
        if cmd is None:
            self._seen.pop(key, None)
            recorded = wp.launch(kernel, dim=dim, inputs=list(inputs), outputs=list(outputs), device=device,
                                 record_cmd=True)  # fmt: skip
            cmd = replayer(recorded, relaunch=lambda: wp.launch(kernel, dim=dim, inputs=list(inputs),
                                                                outputs=list(outputs), device=device))
            self._entries[key] = (cmd, kernel, tuple(inputs), tuple(outputs))
            if len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        else:
            self._entries.move_to_end(key)
            cmd = cmd[0]
        cmd()

    def clear(self) -> None:
        """Forget every recorded launch (releases the references they hold to arrays)."""
        self._entries.clear()
        self._seen.clear()

"""Trap host synchronisation: a check that code is ready for CUDA graph capture, run on the CPU.

On a CUDA device a step is captured into a graph; on the CPU the next best check is that it
never reads a device array back (``wp.array.numpy`` / ``list`` / ``__array__``) and never calls
``wp.synchronize*`` — either would break (or silently freeze values into) a captured graph.
"""

from __future__ import annotations

__all__ = ["forbid_host_sync"]

_ARRAY_READS = ("numpy", "list", "__array__")
_SYNCS = ("synchronize", "synchronize_device", "synchronize_stream")


def forbid_host_sync(monkeypatch, what: str = "step()") -> None:
    """Make every host read of a ``wp.array`` and every ``wp.synchronize*`` raise ``AssertionError``
    naming ``what`` (e.g. ``"collide()"``) until ``monkeypatch`` is undone; use it inside
    ``with monkeypatch.context() as m: forbid_host_sync(m)`` to scope it to the code under test."""
    import warp as wp

    def trap(name):
        def _raise(*args, **kwargs):
            raise AssertionError(f"{what} synchronised with the host ({name}): it cannot be graph-captured")

        return _raise

    for name in _ARRAY_READS:
        monkeypatch.setattr(wp.array, name, trap(f"wp.array.{name}"))
    for name in _SYNCS:
        if hasattr(wp, name):
            monkeypatch.setattr(wp, name, trap(f"wp.{name}"))

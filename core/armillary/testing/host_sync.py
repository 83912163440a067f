"""Trap host synchronisation: a check that code is ready for CUDA graph capture, run on the CPU.

On a CUDA device a step is captured into a graph; on the CPU the next best check is that it
never reads a device array back (``wp.array.numpy`` / ``list`` / ``__array__``) and never calls
``wp.synchronize*`` — either would break (or silently freeze values into) a captured graph.
"""

from __future__ import annotations

__all__ = ["check_step_host_sync", "forbid_host_sync"]

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


def check_step_host_sync(monkeypatch, model, solver, *, collide: bool = True, dt: float = 2e-3,
                         warmup: int = 4, steps: int = 4):  # fmt: skip
    """Step ``solver`` on ``model`` (``CollisionPipeline.collide`` before each step when ``collide``)
    ``warmup`` times, then ``steps`` more times under :func:`forbid_host_sync`; returns the final
    ``body_q`` (B, 7) as a NumPy array, checked finite. ``dt`` [s]."""
    import numpy as np

    import armillary

    pipeline = armillary.CollisionPipeline(model) if collide else None
    contacts = pipeline.contacts() if collide else None
    states = [model.state(), model.state()]
    control = model.control()
    armillary.eval_fk(model, model.joint_q, model.joint_qd, states[0])

    def step():
        if collide:
            pipeline.collide(states[0], contacts)
        solver.step(states[0], states[1], control, contacts, dt)
        states.reverse()

    for _ in range(warmup):  # kernels compiled, caches and recorded launches in place
        step()
    with monkeypatch.context() as m:
        forbid_host_sync(m, f"{type(solver).__name__}.step()")
        for _ in range(steps):
            step()
    q = states[0].body_q.numpy()
    assert np.all(np.isfinite(q)), f"{type(solver).__name__}: non-finite body_q after the trapped steps"
    return q

"""``ModelBuilder.add_actuator`` entries -> vectorised :class:`~armillary_actuators.actuator.Actuator` objects.

An entry (recorded by the core builder, see ``armillary.sim.builder.ActuatorEntry``)
has ``controller_class``, ``index`` (DOF), ``pos_index`` (coordinate),
``delay_steps`` (int or None), ``clamping`` (list of ``(ClampingClass, resolved
kwargs)``) and ``args`` (the controller's resolved kwargs).

Entries share one actuator when they have the same controller class, the same
clamping classes in the same order, the same shared (non-number) arguments of
every component (paths, tables), the same argument names, and either all or
none of them have a delay. Number arguments become per-DOF ``wp.float32``
arrays; delay steps may differ per DOF (``max_delay`` is the group's largest).
Groups are ordered by their first entry, DOFs within a group by entry order.
"""

from __future__ import annotations

import numpy as np
import warp as wp

from ._params import is_number
from .delay import Delay

__all__ = ["build_actuators", "group_entries"]


def _freeze(value):
    """A hashable stand-in for a shared argument value (equal values -> equal keys)."""
    if isinstance(value, dict):
        return ("dict", tuple(sorted((str(k), _freeze(v)) for k, v in value.items())))
    if isinstance(value, (list, tuple)):
        return ("seq", tuple(_freeze(v) for v in value))
    if isinstance(value, np.ndarray):
        return ("ndarray", value.shape, tuple(value.ravel().tolist()))
    try:
        hash(value)
    except TypeError:
        return ("object", id(value))
    return value


def _split(args: dict):
    numbers = tuple(sorted(k for k, v in args.items() if is_number(v)))
    shared = {k: v for k, v in args.items() if k not in numbers}
    return numbers, shared


def _signature(cls, args: dict):
    numbers, shared = _split(args)
    return (cls, numbers, _freeze(shared))


def group_entries(entries) -> list[list]:
    """Entries grouped as described in the module docstring (a list of entry lists)."""
    groups: dict = {}
    for e in entries:
        key = (
            _signature(e.controller_class, e.args),
            e.delay_steps is not None,
            tuple(_signature(c, a) for c, a in e.clamping),
        )
        groups.setdefault(key, []).append(e)
    return list(groups.values())


def _component(cls, arg_list: list[dict], device, label: str, what: str):
    numbers, shared = _split(arg_list[0])
    kwargs = dict(shared)
    for k in numbers:
        kwargs[k] = wp.array(np.asarray([float(a[k]) for a in arg_list], dtype=np.float32), dtype=wp.float32,
                             device=device)
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{label}: cannot create {what} {cls.__name__}: {exc}") from exc


def build_actuators(actuator_cls, entries, device=None, requires_grad: bool = False) -> list:
    """One ``actuator_cls`` per group of compatible entries, on ``device``."""
    device = wp.get_device(device)
    out = []
    for k, group in enumerate(group_entries(entries)):
        first = group[0]
        n = len(group)
        label = f"model.actuators[{k}] ({first.controller_class.__name__}, {n} DOFs)"
        controller = _component(first.controller_class, [e.args for e in group], device, label, "controller")
        clamping = [
            _component(cls, [e.clamping[j][1] for e in group], device, label, f"clamping[{j}]")
            for j, (cls, _) in enumerate(first.clamping)
        ]
        delay = None
        if first.delay_steps is not None:
            steps = np.asarray([e.delay_steps for e in group], dtype=np.int32)
            delay = Delay(wp.array(steps, dtype=wp.int32, device=device), max_delay=int(steps.max()))
        indices = wp.array(np.asarray([e.index for e in group], dtype=np.uint32), dtype=wp.uint32, device=device)
        pos_indices = wp.array(np.asarray([e.pos_index for e in group], dtype=np.uint32), dtype=wp.uint32,
                               device=device)
        out.append(actuator_cls(indices, controller=controller, delay=delay, clamping=clamping,
                                pos_indices=pos_indices, requires_grad=requires_grad, label=label))
    return out

"""Actuators recorded at build time: :meth:`ModelBuilder.add_actuator`.

The builder only records one :class:`ActuatorEntry` per call (component
classes, DOF / coordinate index, resolved arguments); :meth:`ModelBuilder.finalize`
hands the entries to the registered ``"Actuator"`` component
(``Actuator.from_entries``, the actuators plugin), which groups compatible
entries into vectorised actuators (``Model.actuators``). Core imports no
actuator plugin unless the builder holds entries.
"""

from __future__ import annotations

import bisect
import dataclasses
from typing import Any

from ._convert import check_index
from .enums import JointType


@dataclasses.dataclass
class ActuatorEntry:
    """One ``add_actuator`` call.

    Attributes:
        controller_class: the controller component class.
        index: DOF index (``joint_qd`` layout).
        pos_index: coordinate index (``joint_q`` layout).
        delay_steps: command delay [actuator steps], or ``None`` for no delay.
        clamping: ``[(ClampingClass, resolved kwargs), ...]`` in application order.
        args: the controller's resolved keyword arguments.
    """

    controller_class: type
    index: int
    pos_index: int
    delay_steps: int | None
    clamping: list
    args: dict

    def shifted(self, dof_offset: int, coord_offset: int) -> ActuatorEntry:
        """A copy moved by ``dof_offset`` DOFs and ``coord_offset`` coordinates (builder merging)."""
        return dataclasses.replace(self, index=self.index + dof_offset, pos_index=self.pos_index + coord_offset)


def _component(value, what: str):
    """A component class from a class or a registered name (``"ControllerPD"``)."""
    if isinstance(value, str):
        from ..plugins import get_registry

        try:
            value = get_registry().actuators.resolve(value)
        except AttributeError as exc:
            raise ValueError(f"add_actuator: {what}: {exc}") from None
    if not isinstance(value, type) or not callable(getattr(value, "resolve_arguments", None)):
        raise ValueError(
            f"add_actuator: {what} must be an actuator component class (with resolve_arguments) or the name of "
            f"a registered one, got {value!r}"
        )
    return value


class ActuatorBuilderMixin:
    """``add_actuator`` and the merging / finalization of its entries."""

    def _init_actuators(self) -> None:
        self.actuator_entries: list[ActuatorEntry] = []

    def add_actuator(
        self,
        controller_class=None,
        index: int | None = None,
        clamping=None,
        delay_steps: int | None = None,
        pos_index: int | None = None,
        *,
        drive_class=None,
        **kwargs: Any,
    ) -> None:
        """Record an actuator driving one DOF; ``finalize()`` turns the entries into ``Model.actuators``.

        Entries with the same controller class, the same clamping classes and equal
        shared (non-number) arguments become one vectorised actuator; their number
        arguments become per-DOF arrays, and their delays may differ (entries with and
        without a delay are kept apart).

        Args:
            controller_class: controller class (e.g. ``armillary.actuators.ControllerPD``) or the
                name it is registered under; ``drive_class`` is the reference engine's name
                (give one of the two).
            index: DOF index into ``joint_qd``-shaped arrays (velocities, velocity targets,
                feedforward, ``joint_f``).
            clamping: list of ``(ClampingClass, kwargs)`` applied after the controller, in order,
                e.g. ``[(ClampingMaxEffort, {"max_effort": 50.0})]``.
            delay_steps: command delay [actuator steps] (integer >= 0); ``None``: no delay.
            pos_index: coordinate index into ``joint_q``-shaped arrays (positions, position
                targets). Default: the coordinate of DOF ``index`` for joints whose coordinates
                and DOFs coincide; ``index`` itself for FREE / BALL / DISTANCE DOFs (the
                reference engine's default there; pass it explicitly for those joints).
            **kwargs: controller arguments (e.g. ``kp``, ``kd``), checked now by the class's
                ``resolve_arguments`` (``ValueError`` for unknown, missing or invalid values).
        """
        if controller_class is not None and drive_class is not None:
            raise ValueError("add_actuator: give controller_class or drive_class (its reference-engine name), not both")
        cls = controller_class if controller_class is not None else drive_class
        if cls is None:
            raise ValueError("add_actuator: a controller class is required (e.g. armillary.actuators.ControllerPD)")
        cls = _component(cls, "controller_class")
        if index is None:
            raise ValueError("add_actuator: index (the DOF index) is required")
        index = check_index(index, self.joint_dof_count, "add_actuator: index")
        if pos_index is None:
            pos_index = self._default_pos_index(index)
        pos_index = check_index(pos_index, self.joint_coord_count, "add_actuator: pos_index")
        if delay_steps is not None:
            ok = isinstance(delay_steps, (int, float)) and not isinstance(delay_steps, bool)
            if not ok or int(delay_steps) != delay_steps or delay_steps < 0:
                raise ValueError(
                    f"add_actuator: delay_steps must be an integer >= 0 [actuator steps], got {delay_steps!r}"
                )
            delay_steps = int(delay_steps)
        where = f"add_actuator(index={index})"
        try:
            args = dict(cls.resolve_arguments(dict(kwargs)))
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        clamps = []
        for k, item in enumerate(clamping or []):
            if isinstance(item, (tuple, list)) and len(item) == 2:
                ccls, cargs = item
            elif isinstance(item, (type, str)):
                ccls, cargs = item, {}
            else:
                raise ValueError(f"{where}: clamping[{k}] must be a (ClampingClass, kwargs) pair, got {item!r}")
            ccls = _component(ccls, f"clamping[{k}]")
            if not isinstance(cargs, dict):
                raise ValueError(f"{where}: clamping[{k}] arguments must be a dict, got {cargs!r}")
            try:
                clamps.append((ccls, dict(ccls.resolve_arguments(dict(cargs)))))
            except ValueError as exc:
                raise ValueError(f"{where}: clamping[{k}]: {exc}") from None
        self.actuator_entries.append(ActuatorEntry(cls, index, pos_index, delay_steps, clamps, args))

    def _default_pos_index(self, index: int) -> int:
        j = bisect.bisect_right(self.joint_qd_start, index) - 1
        jt = JointType(self.joint_type[j])
        if jt in (JointType.FREE, JointType.BALL, JointType.DISTANCE, JointType.ROD):
            return index
        return self.joint_q_start[j] + (index - self.joint_qd_start[j])

    def _merge_actuators(self, src, dof_offset: int, coord_offset: int) -> None:
        self.actuator_entries.extend(e.shifted(dof_offset, coord_offset) for e in getattr(src, "actuator_entries", ()))

    def _finalize_actuators(self, m, device, requires_grad: bool) -> None:
        entries = list(self.actuator_entries)
        m.actuators = []
        if not entries:
            return
        for k, e in enumerate(entries):
            if not (0 <= e.index < self.joint_dof_count and 0 <= e.pos_index < self.joint_coord_count):
                raise ValueError(
                    f"actuator entry {k} ({e.controller_class.__name__}): index={e.index} / pos_index={e.pos_index} "
                    f"out of range for {self.joint_dof_count} DOFs / {self.joint_coord_count} coordinates"
                )
        from ..plugins import get_registry

        actuator_cls = get_registry().actuators.resolve("Actuator")
        m.actuators = list(actuator_cls.from_entries(entries, device=device, requires_grad=requires_grad))

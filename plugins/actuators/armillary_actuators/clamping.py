"""Effort limits applied after the controller: max effort, DC-motor line, position lookup table."""

from __future__ import annotations

import math
import os
import re
from typing import Any

import numpy as np
import warp as wp

from . import kernels
from ._params import as_array, check_length, check_same_length, nonneg, positive, resolve
from .base import Clamping

__all__ = ["ClampingMaxEffort", "ClampingDCMotor", "ClampingPositionBased"]


class ClampingMaxEffort(Clamping):
    """Symmetric clamp: ``effort = clamp(effort, -max_effort, max_effort)``.

    Args:
        max_effort: per-actuator limits [N or N*m], shape ``(n,)``, >= 0.

    ``resolve_arguments``: ``max_effort`` required.
    """

    def __init__(self, max_effort):
        self.max_effort = as_array(max_effort, type(self).__name__, "max_effort")

    @classmethod
    def resolve_arguments(cls, args: dict[str, Any]) -> dict[str, Any]:
        return resolve(cls, args, required=("max_effort",), checks={"max_effort": (nonneg, ">= 0")})

    def check(self, num_actuators: int, label: str) -> None:
        check_length(self.max_effort, num_actuators, label, type(self).__name__, "max_effort")

    def modify_forces(self, src_forces, dst_forces, positions, velocities, pos_indices, vel_indices, device=None):
        wp.launch(kernels.clamp_max_effort_kernel, dim=src_forces.shape[0], inputs=[src_forces, self.max_effort],
                  outputs=[dst_forces], device=device if device is not None else src_forces.device)


@wp.kernel
def _dc_motor_line_kernel(
    src: wp.array(dtype=wp.float32),
    velocities: wp.array(dtype=wp.float32),
    vel_indices: wp.array(dtype=wp.uint32),
    saturation_effort: wp.array(dtype=wp.float32),
    velocity_limit: wp.array(dtype=wp.float32),
    max_motor_effort: wp.array(dtype=wp.float32),
    dst: wp.array(dtype=wp.float32),
):
    """``dst = clamp(src, lower, upper)`` on the DC-motor line; both bounds in ``[-max, max]``, may share a sign."""
    i = wp.tid()
    ratio = velocities[int(vel_indices[i])] / velocity_limit[i]
    sat = saturation_effort[i]
    m = max_motor_effort[i]
    upper = wp.clamp(sat * (1.0 - ratio), -m, m)
    lower = wp.clamp(sat * (-1.0 - ratio), -m, m)
    dst[i] = wp.clamp(src[i], lower, upper)


class ClampingDCMotor(Clamping):
    """DC-motor effort-speed line: the available effort shrinks linearly with the joint velocity.

    With ``r = qd / velocity_limit`` and ``m = max_motor_effort``::

        upper = clamp(saturation_effort * ( 1 - r), -m, m)
        lower = clamp(saturation_effort * (-1 - r), -m, m)
        effort = clamp(effort, lower, upper)

    At rest the motor gives up to ``+-min(saturation_effort, max_motor_effort)``;
    at ``qd = +velocity_limit`` no more positive effort is available (and at
    ``-velocity_limit`` no negative effort). The line is not clamped to contain
    zero: beyond the velocity limit the envelope crosses zero, so the motor
    brakes (effort against the motion, e.g. ``-8`` for a command of ``+3`` at
    ``qd = 2 * velocity_limit`` with saturation 10 and cap 8), as in the
    reference engine. ``lower <= upper`` always holds.

    Args:
        saturation_effort: stall effort [N or N*m], shape ``(n,)``, >= 0.
        velocity_limit: no-load speed [m/s or rad/s], shape ``(n,)``, > 0.
        max_motor_effort: effort cap [N or N*m], shape ``(n,)``, >= 0.

    ``resolve_arguments``: ``saturation_effort`` and ``velocity_limit`` required,
    ``max_motor_effort=inf``.
    """

    def __init__(self, saturation_effort, velocity_limit, max_motor_effort):
        owner = type(self).__name__
        self.saturation_effort = as_array(saturation_effort, owner, "saturation_effort")
        dev = self.saturation_effort.device
        self.velocity_limit = as_array(velocity_limit, owner, "velocity_limit", device=dev)
        self.max_motor_effort = as_array(max_motor_effort, owner, "max_motor_effort", device=dev)
        check_same_length(owner, "saturation_effort", {"saturation_effort": self.saturation_effort,
                                                       "velocity_limit": self.velocity_limit,
                                                       "max_motor_effort": self.max_motor_effort})

    @classmethod
    def resolve_arguments(cls, args: dict[str, Any]) -> dict[str, Any]:
        return resolve(
            cls, args, required=("saturation_effort", "velocity_limit"), defaults={"max_motor_effort": math.inf},
            checks={"saturation_effort": (nonneg, ">= 0"), "velocity_limit": (positive, "> 0"),
                    "max_motor_effort": (nonneg, ">= 0")},
        )

    def check(self, num_actuators: int, label: str) -> None:
        for name in ("saturation_effort", "velocity_limit", "max_motor_effort"):
            check_length(getattr(self, name), num_actuators, label, type(self).__name__, name)

    def modify_forces(self, src_forces, dst_forces, positions, velocities, pos_indices, vel_indices, device=None):
        wp.launch(
            _dc_motor_line_kernel,
            dim=src_forces.shape[0],
            inputs=[src_forces, velocities, vel_indices, self.saturation_effort, self.velocity_limit,
                    self.max_motor_effort],
            outputs=[dst_forces],
            device=device if device is not None else src_forces.device,
        )


def read_lookup_table(path) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Read a two-column (position, effort) table: whitespace or comma separated, ``#`` comments.

    Raises ``ValueError`` naming the path (and the line) for a missing file or a bad line.
    """
    owner = "ClampingPositionBased"
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.readlines()
    except OSError as exc:
        raise ValueError(f"{owner}: cannot read lookup table {path!r}: {exc.strerror or exc}") from exc
    positions, efforts = [], []
    for lineno, raw in enumerate(lines, start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = [f for f in re.split(r"[,\s]+", line) if f]
        try:
            values = [float(f) for f in fields]
        except ValueError:
            values = []
        if len(values) != 2:
            raise ValueError(
                f"{owner}: lookup table {path!r} line {lineno}: expected two numbers (position, effort), "
                f"got {raw.strip()!r}"
            )
        positions.append(values[0])
        efforts.append(values[1])
    if not positions:
        raise ValueError(f"{owner}: lookup table {path!r} has no (position, effort) rows")
    return tuple(positions), tuple(efforts)


def _check_table(positions, efforts, where: str) -> tuple[tuple[float, ...], tuple[float, ...]]:
    owner = "ClampingPositionBased"
    try:
        pos = np.asarray(positions, dtype=np.float64).reshape(-1)
        eff = np.asarray(efforts, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{owner}: {where}: lookup_positions and lookup_efforts must be numbers ({exc})") from exc
    if len(pos) != len(eff):
        raise ValueError(f"{owner}: {where}: lookup_positions has {len(pos)} entries but lookup_efforts has {len(eff)}")
    if len(pos) == 0:
        raise ValueError(f"{owner}: {where}: the lookup table is empty")
    if not (np.all(np.isfinite(pos)) and np.all(np.isfinite(eff))):
        raise ValueError(f"{owner}: {where}: the lookup table holds a non-finite value")
    bad = np.nonzero(np.diff(pos) <= 0)[0]
    if len(bad):
        k = int(bad[0]) + 1
        raise ValueError(
            f"{owner}: {where}: lookup_positions must be strictly increasing; "
            f"entry {k} ({pos[k]}) follows {pos[k - 1]}"
        )
    neg = np.nonzero(eff < 0)[0]
    if len(neg):
        k = int(neg[0])
        raise ValueError(f"{owner}: {where}: lookup_efforts[{k}] = {eff[k]} is negative (it is a symmetric limit)")
    return tuple(float(v) for v in pos), tuple(float(v) for v in eff)


class ClampingPositionBased(Clamping):
    """Position-dependent symmetric limit from a lookup table (e.g. linkage-driven joints).

    ``limit(q)`` interpolates the table linearly and holds its end values
    outside it (no wrapping); ``effort = clamp(effort, -limit(q), limit(q))``.
    The table is shared by every actuator of the object.

    Args:
        lookup_table_path: text file with two columns, position [m or rad] and
            effort [N or N*m], separated by whitespace or commas; ``#`` starts a comment.
        lookup_positions: table positions (strictly increasing), when no path is given.
        lookup_efforts: table efforts (>= 0), same length.

    Give either the path or both sequences. A bad table raises ``ValueError``
    (naming the path and line for files), already in ``resolve_arguments``.
    """

    def __init__(self, lookup_table_path=None, lookup_positions=None, lookup_efforts=None):
        self.lookup_table_path = None if lookup_table_path is None else os.fspath(lookup_table_path)
        pos, eff = self._table_from(self.lookup_table_path, lookup_positions, lookup_efforts)
        self.lookup_positions, self.lookup_efforts = pos, eff
        self._device = None
        self.table_positions = None  # wp.float32 (K,) on the actuator's device
        self.table_efforts = None
        self.finalize(wp.get_device(), 0)

    @staticmethod
    def _table_from(path, positions, efforts):
        if path is not None:
            if positions is not None or efforts is not None:
                raise ValueError("ClampingPositionBased: give lookup_table_path or lookup_positions + lookup_efforts, "
                                 "not both")
            pos, eff = read_lookup_table(path)
            return _check_table(pos, eff, f"lookup table {path!r}")
        if positions is None or efforts is None:
            raise ValueError("ClampingPositionBased: lookup_table_path or both lookup_positions and lookup_efforts "
                             "are required")
        return _check_table(positions, efforts, "table")

    @classmethod
    def resolve_arguments(cls, args: dict[str, Any]) -> dict[str, Any]:
        out = resolve(cls, args, defaults={"lookup_table_path": None, "lookup_positions": None, "lookup_efforts": None})
        path = out["lookup_table_path"]
        if path is not None:
            out["lookup_table_path"] = os.fspath(path)
            cls._table_from(out["lookup_table_path"], out["lookup_positions"], out["lookup_efforts"])
            del out["lookup_positions"], out["lookup_efforts"]
        else:
            pos, eff = cls._table_from(None, out["lookup_positions"], out["lookup_efforts"])
            out = {"lookup_positions": pos, "lookup_efforts": eff}
        return out

    def finalize(self, device, num_actuators: int) -> None:
        """Place the table on ``device`` (called by :class:`Actuator`)."""
        device = wp.get_device(device)
        if self._device == device:
            return
        self.table_positions = wp.array(np.asarray(self.lookup_positions, np.float32), dtype=wp.float32, device=device)
        self.table_efforts = wp.array(np.asarray(self.lookup_efforts, np.float32), dtype=wp.float32, device=device)
        self._device = device

    def modify_forces(self, src_forces, dst_forces, positions, velocities, pos_indices, vel_indices, device=None):
        wp.launch(
            kernels.clamp_position_table_kernel,
            dim=src_forces.shape[0],
            inputs=[src_forces, positions, pos_indices, self.table_positions, self.table_efforts],
            outputs=[dst_forces],
            device=device if device is not None else src_forces.device,
        )

"""Command delay: :class:`Delay`, a per-DOF circular buffer of targets and feedforward."""

from __future__ import annotations

from typing import Any

import numpy as np
import warp as wp
from armillary.launch import tape_recording

from . import kernels
from ._params import as_array, check_length, is_number

__all__ = ["Delay"]


class Delay:
    """Delays the command inputs (position / velocity targets, feedforward) by ``delay_steps[i]`` actuator steps.

    The command read at step ``k`` is the one given at step ``k - delay_steps[i]``:
    ``Delay(N)`` shifts a command sequence by exactly ``N`` steps. ``N = 0`` uses
    the current command. Right after :meth:`state` (empty history) the current
    command is used, and while fewer than ``N`` commands were pushed the oldest
    one pushed is used (the lag is clamped to the available history): the first
    commands repeat until the buffer has filled.

    Args:
        delay_steps: per-DOF lag [actuator steps], ``wp.int32`` shape ``(n,)``
            (or a sequence of ints), ``0 <= delay_steps[i] <= max_delay``.
        max_delay: buffer depth [actuator steps], >= 0 (``0``: every lag is 0).

    The state (:class:`Delay.State`) holds the buffers, a device-side write
    cursor and per-DOF fill counts, so stepping is graphable. To restart the
    delay of some DOFs (e.g. an environment reset), zero their entries of
    ``state.num_pushes``.
    """

    class State:
        """Circular-buffer state.

        Attributes:
            buffer_pos, buffer_vel, buffer_act: ``(capacity, n)`` float32 past targets / feedforward.
            num_pushes: ``(n,)`` int32 commands held per DOF (saturates at ``capacity``).
            write_idx: ``(1,)`` int32 slot the next command is written to.
        """

        def __init__(self, buffer_pos, buffer_vel, buffer_act, num_pushes, write_idx):
            self.buffer_pos = buffer_pos
            self.buffer_vel = buffer_vel
            self.buffer_act = buffer_act
            self.num_pushes = num_pushes
            self.write_idx = write_idx

    def __init__(self, delay_steps, max_delay: int):
        if isinstance(max_delay, bool) or not is_number(max_delay) or int(max_delay) != max_delay or max_delay < 0:
            raise ValueError(f"Delay: max_delay must be an integer >= 0 [actuator steps], got {max_delay!r}")
        self.max_delay = int(max_delay)
        self.delay_steps = as_array(delay_steps, "Delay", "delay_steps", dtype=wp.int32)
        steps = self.delay_steps.numpy()  # once, at construction
        if steps.size:
            if steps.min() < 0:
                k = int(np.argmin(steps))
                raise ValueError(f"Delay: delay_steps[{k}] = {int(steps[k])} is negative")
            if steps.max() > self.max_delay:
                k = int(np.argmax(steps))
                raise ValueError(
                    f"Delay: delay_steps[{k}] = {int(steps[k])} exceeds max_delay = {self.max_delay}"
                )
        self.capacity = max(self.max_delay, 1)
        self._device = None
        self._n = -1
        self._requires_grad = False
        self.out_pos = self.out_vel = self.out_act = None

    @classmethod
    def resolve_arguments(cls, args: dict[str, Any]) -> dict[str, Any]:
        """``{"delay_steps": N}`` with an integer ``N >= 0`` (required)."""
        if "delay_steps" not in args:
            raise ValueError("Delay: missing required argument 'delay_steps'")
        unknown = [k for k in args if k != "delay_steps"]
        if unknown:
            raise ValueError(f"Delay: unknown argument {unknown[0]!r}; accepted: delay_steps")
        n = args["delay_steps"]
        if isinstance(n, bool) or not is_number(n) or int(n) != n or n < 0:
            raise ValueError(f"Delay: delay_steps must be an integer >= 0 [actuator steps], got {n!r}")
        return {"delay_steps": int(n)}

    def is_stateful(self) -> bool:
        return True

    def is_graphable(self) -> bool:
        return True

    def check(self, num_actuators: int, label: str) -> None:
        check_length(self.delay_steps, num_actuators, label, "Delay", "delay_steps")

    def finalize(self, device, num_actuators: int, requires_grad: bool = False) -> None:
        """Allocate the delayed-output arrays (called by :class:`Actuator`)."""
        device = wp.get_device(device)
        if self._device == device and self._n == num_actuators and self._requires_grad == requires_grad:
            return
        if self.delay_steps.device != device:
            self.delay_steps = self.delay_steps.to(device)
        self.out_pos = wp.zeros(num_actuators, dtype=wp.float32, device=device, requires_grad=requires_grad)
        self.out_vel = wp.zeros(num_actuators, dtype=wp.float32, device=device, requires_grad=requires_grad)
        self.out_act = wp.zeros(num_actuators, dtype=wp.float32, device=device, requires_grad=requires_grad)
        self._device, self._n, self._requires_grad = device, num_actuators, requires_grad

    def state(self, num_actuators: int, device) -> Delay.State:
        """A fresh, empty state (zeroed buffers) for ``num_actuators`` DOFs on ``device``."""
        shape = (self.capacity, num_actuators)
        return Delay.State(
            buffer_pos=wp.zeros(shape, dtype=wp.float32, device=device),
            buffer_vel=wp.zeros(shape, dtype=wp.float32, device=device),
            buffer_act=wp.zeros(shape, dtype=wp.float32, device=device),
            num_pushes=wp.zeros(num_actuators, dtype=wp.int32, device=device),
            write_idx=wp.zeros(1, dtype=wp.int32, device=device),
        )

    def get_delayed_targets(self, target_pos, target_vel, feedforward, pos_indices, vel_indices, current_state):
        """Delayed ``(target_pos, target_vel, feedforward)``, each ``(n,)`` (local order); feedforward
        is ``None`` when ``feedforward`` is. ``pos_indices`` / ``vel_indices`` index the target arrays."""
        n = self.delay_steps.shape[0]
        if self.out_pos is None or self._n != n:
            self.finalize(target_pos.device, n)
        out_pos, out_vel, out_act = self.out_pos, self.out_vel, self.out_act
        if tape_recording():  # per-step outputs: a later taped step must not overwrite what this one's adjoint reads
            out_pos, out_vel, out_act = (wp.zeros(n, dtype=wp.float32, device=self._device, requires_grad=True)
                                         for _ in range(3))  # fmt: skip
        s = current_state
        wp.launch(
            kernels.delay_read_kernel,
            dim=n,
            inputs=[target_pos, target_vel, feedforward, pos_indices, vel_indices, self.delay_steps,
                    s.buffer_pos, s.buffer_vel, s.buffer_act, s.num_pushes, s.write_idx],
            outputs=[out_pos, out_vel, out_act],
            device=self._device,
        )
        return out_pos, out_vel, (out_act if feedforward is not None else None)

    def update_state(self, target_pos, target_vel, feedforward, pos_indices, vel_indices, current_state, next_state):
        """Push the current command into ``next_state`` (``current_state``'s history plus this command)."""
        if next_state is current_state:
            raise ValueError("Delay: current_state and next_state must be two different State objects")
        n = self.delay_steps.shape[0]
        c, nx = current_state, next_state
        # the next history is the current one plus this step's command: bulk copy, then push
        wp.copy(nx.buffer_pos, c.buffer_pos)
        wp.copy(nx.buffer_vel, c.buffer_vel)
        wp.copy(nx.buffer_act, c.buffer_act)
        wp.launch(
            kernels.delay_push_kernel,
            dim=n,
            inputs=[target_pos, target_vel, feedforward, pos_indices, vel_indices, c.num_pushes, c.write_idx],
            outputs=[nx.buffer_pos, nx.buffer_vel, nx.buffer_act, nx.num_pushes, nx.write_idx],
            device=self._device if self._device is not None else target_pos.device,
        )

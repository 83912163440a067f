"""Linear control laws: :class:`ControllerPD` (stateless) and :class:`ControllerPID` (integral state)."""

from __future__ import annotations

import math
from typing import Any

import warp as wp

from . import kernels
from ._params import as_array, check_length, check_same_length, finite, nonneg, resolve
from .base import Controller

__all__ = ["ControllerPD", "ControllerPID"]


class ControllerPD(Controller):
    """Proportional-derivative control law (stateless, graphable, differentiable).

    ``effort = const_effort + kp * (target_pos - q) + kd * (target_vel - qd) + feedforward``

    Args:
        kp: proportional gains [N/m or N*m/rad], shape ``(n,)``.
        kd: derivative gains [N*s/m or N*m*s/rad], shape ``(n,)``.
        const_effort: constant bias effort [N or N*m], shape ``(n,)``; ``None``: none.

    Arrays may be ``wp.float32`` arrays (used as is, so later writes to them take
    effect) or anything numpy accepts (copied to Warp's default device).
    ``resolve_arguments`` (``add_actuator`` keywords): ``kp`` required, ``kd=0``,
    ``const_effort=0``; ``kp`` and ``kd`` must be >= 0.
    """

    def __init__(self, kp, kd, const_effort=None):
        owner = type(self).__name__
        self.kp = as_array(kp, owner, "kp")
        self.kd = as_array(kd, owner, "kd", device=self.kp.device)
        self.const_effort = as_array(const_effort, owner, "const_effort", device=self.kp.device, optional=True)
        check_same_length(owner, "kp", {"kp": self.kp, "kd": self.kd, "const_effort": self.const_effort})

    @classmethod
    def resolve_arguments(cls, args: dict[str, Any]) -> dict[str, Any]:
        return resolve(
            cls, args, required=("kp",), defaults={"kd": 0.0, "const_effort": 0.0},
            checks={"kp": (nonneg, ">= 0"), "kd": (nonneg, ">= 0"), "const_effort": (finite, "finite")},
        )

    def is_stateful(self) -> bool:
        return False

    def is_graphable(self) -> bool:
        return True

    def check(self, num_actuators: int, label: str) -> None:
        for name in ("kp", "kd", "const_effort"):
            check_length(getattr(self, name), num_actuators, label, type(self).__name__, name)

    def compute(self, positions, velocities, target_pos, target_vel, feedforward, pos_indices, vel_indices,
                target_pos_indices, target_vel_indices, forces, state, dt, device=None, *, next_state=None) -> None:
        wp.launch(
            kernels.pd_kernel,
            dim=forces.shape[0],
            inputs=[positions, velocities, target_pos, target_vel, feedforward, pos_indices, vel_indices,
                    target_pos_indices, target_vel_indices, self.kp, self.kd, self.const_effort],
            outputs=[forces],
            device=device if device is not None else forces.device,
        )


class ControllerPID(Controller):
    """Proportional-integral-derivative control law with an anti-windup clamp (stateful, graphable).

    With ``e = target_pos - q`` and the step ``dt`` [s]::

        I'     = clamp(I + e * dt, -integral_max, integral_max)
        effort = const_effort + kp * e + ki * I' + kd * (target_vel - qd) + feedforward

    The integral used in the effort already includes the current error (the
    reference engine's convention), and the clamp bounds the integral term by
    ``ki * integral_max``. ``I'`` is written to the next state.

    Args:
        kp: proportional gains [N/m or N*m/rad], shape ``(n,)``.
        ki: integral gains [N/(m*s) or N*m/(rad*s)], shape ``(n,)``.
        kd: derivative gains [N*s/m or N*m*s/rad], shape ``(n,)``.
        integral_max: anti-windup bound of the integral [m*s or rad*s], shape ``(n,)``.
        const_effort: constant bias effort [N or N*m], shape ``(n,)``; ``None``: none.

    ``resolve_arguments``: ``kp`` and ``ki`` required, ``kd=0``,
    ``integral_max=inf``, ``const_effort=0``; gains and ``integral_max`` >= 0.
    """

    class State(Controller.State):
        """Integral accumulator [m*s or rad*s], shape ``(n,)``."""

        def __init__(self, integral: wp.array):
            self.integral = integral

    def __init__(self, kp, ki, kd, integral_max, const_effort=None):
        owner = type(self).__name__
        self.kp = as_array(kp, owner, "kp")
        dev = self.kp.device
        self.ki = as_array(ki, owner, "ki", device=dev)
        self.kd = as_array(kd, owner, "kd", device=dev)
        self.integral_max = as_array(integral_max, owner, "integral_max", device=dev)
        self.const_effort = as_array(const_effort, owner, "const_effort", device=dev, optional=True)
        check_same_length(owner, "kp", {"kp": self.kp, "ki": self.ki, "kd": self.kd, "integral_max": self.integral_max,
                                        "const_effort": self.const_effort})
        self._pending = None  # next integral when compute() is called without next_state
        self._pending_fresh = False

    @classmethod
    def resolve_arguments(cls, args: dict[str, Any]) -> dict[str, Any]:
        return resolve(
            cls, args, required=("kp", "ki"), defaults={"kd": 0.0, "integral_max": math.inf, "const_effort": 0.0},
            checks={"kp": (nonneg, ">= 0"), "ki": (nonneg, ">= 0"), "kd": (nonneg, ">= 0"),
                    "integral_max": (nonneg, ">= 0"), "const_effort": (finite, "finite")},
        )

    def is_stateful(self) -> bool:
        return True

    def is_graphable(self) -> bool:
        return True

    def check(self, num_actuators: int, label: str) -> None:
        for name in ("kp", "ki", "kd", "integral_max", "const_effort"):
            check_length(getattr(self, name), num_actuators, label, type(self).__name__, name)

    def state(self, num_actuators: int, device) -> ControllerPID.State:
        return ControllerPID.State(wp.zeros(num_actuators, dtype=wp.float32, device=device))

    def compute(self, positions, velocities, target_pos, target_vel, feedforward, pos_indices, vel_indices,
                target_pos_indices, target_vel_indices, forces, state, dt, device=None, *, next_state=None) -> None:
        name = type(self).__name__
        if state is None:
            raise ValueError(f"{name} is stateful: pass a state created with state() (Actuator.state())")
        if dt is None:
            raise ValueError(f"{name} integrates the position error: pass dt [s] to step()")
        if next_state is None:  # reference-engine protocol: compute(), then update_state(current, next)
            if self._pending is None or self._pending.shape != state.integral.shape:
                self._pending = wp.empty_like(state.integral)
            out = self._pending
            self._pending_fresh = True
        else:
            if next_state is state:
                raise ValueError(f"{name}: state and next_state must be two different State objects")
            out = next_state.integral
        wp.launch(
            kernels.pid_kernel,
            dim=forces.shape[0],
            inputs=[positions, velocities, target_pos, target_vel, feedforward, pos_indices, vel_indices,
                    target_pos_indices, target_vel_indices, self.kp, self.ki, self.kd, self.integral_max,
                    self.const_effort, state.integral, float(dt)],
            outputs=[out, forces],
            device=device if device is not None else forces.device,
        )

    def update_state(self, current_state, next_state) -> None:
        """Copy the integral of the last ``compute`` made without ``next_state`` into ``next_state``."""
        if self._pending_fresh and next_state is not None:
            wp.copy(next_state.integral, self._pending)
            self._pending_fresh = False

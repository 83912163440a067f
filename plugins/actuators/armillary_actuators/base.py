"""Base classes of actuator components: :class:`Controller` and :class:`Clamping`.

An :class:`~armillary_actuators.actuator.Actuator` drives ``n`` DOFs (its
*actuators*, local index ``i`` in ``0..n-1``). Each step it

1. reads delayed command inputs (:class:`~armillary_actuators.delay.Delay`),
2. asks its controller for the raw effort ``forces[i]`` (shape ``(n,)``,
   [N] or [N*m]),
3. passes the effort through each clamping stage in order
   (``modify_forces(src, dst, ...)``, both shape ``(n,)``),
4. scatter-adds the result into the output array at ``indices[i]``,
5. writes the next controller and delay state.

Index arrays are ``wp.uint32`` of shape ``(n,)``: ``pos_indices`` into
``joint_q``-shaped arrays (positions), ``vel_indices`` into ``joint_qd``-shaped
arrays (velocities, feedforward, output), ``target_pos_indices`` /
``target_vel_indices`` into the target arrays the controller is handed (the
delay's own buffers use the identity ``0..n-1``).

Per-actuator parameters are ``wp.float32`` arrays of shape ``(n,)``; a
component validates their lengths in :meth:`check` so that a mismatch is a
``ValueError`` naming the component and the parameter, never a kernel reading
out of bounds.
"""

from __future__ import annotations

from typing import Any

import warp as wp


class Component:
    """Common part of controllers and clampings: argument resolution and checks."""

    @classmethod
    def resolve_arguments(cls, args: dict[str, Any]) -> dict[str, Any]:
        """Map user keyword arguments (``add_actuator`` / importer schemas) to constructor arguments.

        Returns a dict of constructor keyword arguments with defaults filled in;
        raises ``ValueError`` naming ``cls`` and the argument for an unknown or
        missing one. Number values are per-actuator (stacked into ``(n,)`` arrays
        when entries are grouped); every other value (paths, tables) is shared and
        must be equal for entries to share one actuator.
        """
        raise NotImplementedError(f"{cls.__name__}.resolve_arguments")

    def is_stateful(self) -> bool:
        """True when the component keeps state between steps (needs ``Actuator.state()``)."""
        return False

    def is_graphable(self) -> bool:
        """True when every launch of the component can be captured in a CUDA graph."""
        return True

    def is_differentiable(self) -> bool:
        """True when gradients flow through the component's launches on a ``wp.Tape`` (an
        :class:`~armillary_actuators.actuator.Actuator` with a component returning ``False``
        refuses to step while a tape records on arrays with gradients). Default: ``True``."""
        return True

    def check(self, num_actuators: int, label: str) -> None:
        """Raise ``ValueError`` (naming ``label`` and the parameter) when a per-actuator
        parameter's length differs from ``num_actuators``. Default: no check."""


class Controller(Component):
    """A control law: raw effort from state and (delayed) targets.

    Subclasses implement :meth:`resolve_arguments`, :meth:`compute`,
    :meth:`is_stateful`, :meth:`is_graphable` and, when stateful,
    :meth:`state`.
    """

    class State:
        """Per-controller state arrays (subclasses define their own)."""

    def state(self, num_actuators: int, device) -> Controller.State | None:
        """A fresh state for ``num_actuators`` actuators on ``device`` (None when stateless)."""
        return None

    def compute(
        self,
        positions: wp.array,
        velocities: wp.array,
        target_pos: wp.array,
        target_vel: wp.array,
        feedforward: wp.array | None,
        pos_indices: wp.array,
        vel_indices: wp.array,
        target_pos_indices: wp.array,
        target_vel_indices: wp.array,
        forces: wp.array,
        state: Controller.State | None,
        dt: float,
        device=None,
        *,
        next_state: Controller.State | None = None,
    ) -> None:
        """Write raw effort into ``forces`` (shape ``(n,)``) with Warp launches.

        ``state`` is read; a stateful controller writes its updated state into
        ``next_state`` (the double-buffered partner; never the same object).
        ``feedforward`` may be None (no feedforward input).
        """
        raise NotImplementedError(f"{type(self).__name__}.compute")

    def update_state(self, current_state: Controller.State | None, next_state: Controller.State | None) -> None:
        """Second-stage state update, called after :meth:`compute` for controllers
        whose ``compute`` does not take ``next_state``. Default: nothing."""


class Clamping(Component):
    """A post-controller effort limit (motor saturation, envelopes, lookup tables)."""

    def modify_forces(
        self,
        src_forces: wp.array,
        dst_forces: wp.array,
        positions: wp.array,
        velocities: wp.array,
        pos_indices: wp.array,
        vel_indices: wp.array,
        device=None,
    ) -> None:
        """Read effort from ``src_forces`` and write the bounded effort to ``dst_forces`` (both ``(n,)``).

        ``src_forces`` and ``dst_forces`` may be the same array.
        """
        raise NotImplementedError(f"{type(self).__name__}.modify_forces")

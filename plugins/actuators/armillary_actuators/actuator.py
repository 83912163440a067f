"""The composed, vectorised actuator: :class:`Actuator` (delay -> controller -> clampings -> scatter-add)."""

from __future__ import annotations

import inspect
import types
from typing import Any

import numpy as np
import warp as wp
from armillary.launch import tape_recording

from . import kernels
from ._params import as_array

__all__ = ["Actuator"]


def _accepts_next_state(fn) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "next_state" or p.kind is p.VAR_KEYWORD for p in params)


class Actuator:
    """Drives ``n`` DOFs (across any number of worlds) with one controller, an optional delay and clampings.

    Each :meth:`step`: delay read -> controller -> clampings (in order) ->
    **scatter-add** into ``getattr(sim_control, control_output_attr)`` at
    ``indices`` (the caller zeroes that array once per step, before stepping its
    actuators) -> state updates (controller state, then delay write).

    Args:
        indices: DOF indices into ``joint_qd``-shaped arrays (velocities, velocity
            targets, feedforward, output), shape ``(n,)``; a ``wp.uint32`` array or
            any integer sequence (copied to Warp's default device). Its device is
            the actuator's device.
        controller: the :class:`~armillary_actuators.base.Controller` (``drive=``
            is the reference engine's name for it; give one of the two).
        delay: optional :class:`~armillary_actuators.delay.Delay`.
        clamping: list of :class:`~armillary_actuators.base.Clamping`, applied in order.
        pos_indices: indices into ``joint_q``-shaped arrays (positions); default ``indices``
            (they differ where coordinates and DOFs differ: FREE / BALL joints, or
            any model with such a joint before the actuated one).
        target_pos_indices: indices into the position-target array; default ``pos_indices``.
        target_vel_indices: indices into the velocity-target and feedforward arrays;
            default ``indices``.
        state_pos_attr, state_vel_attr: attribute names of positions / velocities on ``sim_state``.
        control_target_pos_attr, control_target_vel_attr: attribute names of the targets on
            ``sim_control``; ``None``: zero targets.
        control_feedforward_attr: attribute name of the feedforward effort on ``sim_control``;
            absent, ``None``-valued or ``None`` name: no feedforward.
        control_output_attr: attribute name of the output effort array the applied
            (clamped) effort is added into.
        control_computed_output_attr: optional attribute name of a second output array
            the raw controller effort (before clamping) is added into, e.g. for logging.
        requires_grad: allocate the internal effort buffers, and the float arrays of every
            :meth:`state`, with gradients.
        label: name used in error messages (default: controller class and DOF count).
        effort_indices: indices into the output arrays; default ``indices``.

    All ``sim_state`` / ``sim_control`` arrays are ``wp.float32`` on the actuator's
    device. Index ranges are checked against the array lengths the first time an
    array shape is seen (``ValueError`` naming the actuator and the index); later
    steps with the same shapes do no host work beyond attribute lookups.

    Differentiable (PD, PID, delay and every clamping; not the neural controllers): a step
    recorded on a ``wp.Tape`` writes its intermediate efforts (and the delayed commands) into
    fresh arrays with gradients, so that later steps on the same tape do not overwrite what its
    adjoint re-reads: ``4 * n * (1 + len(clamping) + 3 * (delay is not None))`` bytes per step,
    twice that with the gradients. Give each step its own actuator state (a list of
    :meth:`state` objects, as for simulation states) when several steps are taped.
    """

    class State:
        """Composed state: ``controller_state`` and ``delay_state`` (either may be ``None``)."""

        def __init__(self, controller_state=None, delay_state=None):
            self.controller_state = controller_state
            self.delay_state = delay_state

        @property
        def drive_state(self):
            """The reference engine's name of :attr:`controller_state`."""
            return self.controller_state

    def __init__(
        self,
        indices,
        controller=None,
        delay=None,
        clamping=None,
        pos_indices=None,
        target_pos_indices=None,
        target_vel_indices=None,
        state_pos_attr: str = "joint_q",
        state_vel_attr: str = "joint_qd",
        control_target_pos_attr: str | None = "joint_target_q",
        control_target_vel_attr: str | None = "joint_target_qd",
        control_feedforward_attr: str | None = "joint_act",
        control_output_attr: str = "joint_f",
        control_computed_output_attr: str | None = None,
        requires_grad: bool = False,
        *,
        drive=None,
        label: str | None = None,
        effort_indices=None,
    ):
        if controller is not None and drive is not None:
            raise ValueError("Actuator: give controller= or drive= (its reference-engine name), not both")
        controller = controller if controller is not None else drive
        if controller is None:
            raise ValueError("Actuator: a controller is required (controller=ControllerPD(...), for example)")
        if not callable(getattr(controller, "compute", None)):
            raise ValueError(f"Actuator: controller {controller!r} has no compute() method")
        cname = type(controller).__name__
        self.controller = controller
        self.delay = delay
        self.clamping = list(clamping) if clamping is not None else []
        for k, c in enumerate(self.clamping):
            if not callable(getattr(c, "modify_forces", None)):
                raise ValueError(f"Actuator: clamping[{k}] ({type(c).__name__}) has no modify_forces() method")

        device = indices.device if isinstance(indices, wp.array) else wp.get_device()
        self.device = wp.get_device(device)
        pre_label = label or f"Actuator({cname})"
        self.indices = self._index_array(indices, pre_label, "indices")
        n = int(self.indices.shape[0])
        if n == 0:
            raise ValueError(f"{pre_label}: indices is empty; an actuator drives at least one DOF")
        self.num_actuators = n
        self.label = label or f"Actuator({cname}, {n} DOFs)"
        self.pos_indices = (self._index_array(pos_indices, self.label, "pos_indices")
                            if pos_indices is not None else self.indices)
        self.target_pos_indices = (self._index_array(target_pos_indices, self.label, "target_pos_indices")
                                   if target_pos_indices is not None else self.pos_indices)
        self.target_vel_indices = (self._index_array(target_vel_indices, self.label, "target_vel_indices")
                                   if target_vel_indices is not None else self.indices)
        self.effort_indices = (self._index_array(effort_indices, self.label, "effort_indices")
                               if effort_indices is not None else self.indices)
        for name in ("pos_indices", "target_pos_indices", "target_vel_indices", "effort_indices"):
            m = getattr(self, name).shape[0]
            if m != n:
                raise ValueError(f"{self.label}: {name} has {m} entries but indices has {n}")

        # largest index of each index array (host, once): checked against array lengths at step time
        self._index_max = {}
        for name in ("indices", "pos_indices", "target_pos_indices", "target_vel_indices", "effort_indices"):
            host = getattr(self, name).numpy()
            k = int(np.argmax(host))
            self._index_max[name] = (int(host[k]), k)

        self.state_pos_attr = state_pos_attr
        self.state_vel_attr = state_vel_attr
        self.control_target_pos_attr = control_target_pos_attr
        self.control_target_vel_attr = control_target_vel_attr
        self.control_feedforward_attr = control_feedforward_attr
        self.control_output_attr = control_output_attr
        self.control_computed_output_attr = control_computed_output_attr
        self.requires_grad = bool(requires_grad)

        # component checks and device setup
        for comp in (controller, *self.clamping):
            check = getattr(comp, "check", None)
            if callable(check):
                check(n, self.label)
        if delay is not None:
            delay.check(n, self.label)
            delay.finalize(self.device, n, self.requires_grad)
        for comp in (controller, *self.clamping):
            fin = getattr(comp, "finalize", None)
            if callable(fin):
                fin(self.device, n)

        g = self.requires_grad
        self._computed = wp.zeros(n, dtype=wp.float32, device=self.device, requires_grad=g)
        self._applied = (wp.zeros(n, dtype=wp.float32, device=self.device, requires_grad=g)
                         if self.clamping else self._computed)
        self._local = wp.empty(n, dtype=wp.uint32, device=self.device)
        wp.launch(kernels.fill_identity_kernel, dim=n, inputs=[], outputs=[self._local], device=self.device)
        # zero targets for a ``None`` target attribute, long enough for the target indices
        self._zero_target_pos = wp.zeros(self._index_max["target_pos_indices"][0] + 1, dtype=wp.float32,
                                         device=self.device)
        self._zero_target_vel = wp.zeros(self._index_max["target_vel_indices"][0] + 1, dtype=wp.float32,
                                         device=self.device)
        self._controller_stateful = bool(controller.is_stateful())
        self._pass_next_state = _accepts_next_state(controller.compute)
        self._checked: set = set()

    # ------------------------------------------------------------------ helpers
    def _index_array(self, value, label, name):
        arr = as_array(value, label, name, dtype=wp.uint32, device=self.device)
        if arr.device != self.device:
            raise ValueError(f"{label}: {name} is on {arr.device} but indices is on {self.device}")
        return arr

    @property
    def drive(self):
        """The reference engine's name of :attr:`controller`."""
        return self.controller

    def is_stateful(self) -> bool:
        """True when the delay or the controller keeps state (step needs two :meth:`state` objects)."""
        return self.delay is not None or self._controller_stateful

    def is_graphable(self) -> bool:
        """True when every component can be captured in a CUDA graph."""
        comps = [self.controller, *self.clamping] + ([self.delay] if self.delay is not None else [])
        return all(c.is_graphable() for c in comps)

    def is_differentiable(self) -> bool:
        """True when every component is (a component without ``is_differentiable`` counts as one)."""
        comps = [self.controller, *self.clamping] + ([self.delay] if self.delay is not None else [])
        return all(getattr(c, "is_differentiable", lambda: True)() for c in comps)

    def _refuse_tape(self, arrays) -> None:
        """Raise ``NotDifferentiableError`` when a non-differentiable actuator steps under a tape
        that wants gradients (the actuator or one of its input arrays has ``requires_grad``)."""
        if self.is_differentiable():
            return
        if not (self.requires_grad or any(isinstance(a, wp.array) and a.requires_grad for a in arrays)):
            return
        from armillary.solvers import NotDifferentiableError

        comps = [self.controller, *self.clamping] + ([self.delay] if self.delay is not None else [])
        bad = [type(c).__name__ for c in comps if not getattr(c, "is_differentiable", lambda: True)()]
        raise NotDifferentiableError(
            f"{self.label}: {', '.join(bad)} is not differentiable (inference only), but a wp.Tape records "
            "on arrays with requires_grad: its gradients would be wrong. Step it outside the tape's `with` block"
        )

    def state(self) -> Actuator.State | None:
        """A fresh composed state (zeroed), or ``None`` when the actuator is stateless. With
        ``requires_grad`` its float arrays (PID integral, delay buffers) carry gradients."""
        if not self.is_stateful():
            return None
        n, dev = self.num_actuators, self.device
        state = Actuator.State(
            controller_state=self.controller.state(n, dev) if self._controller_stateful else None,
            delay_state=self.delay.state(n, dev) if self.delay is not None else None,
        )
        if self.requires_grad:
            for part in (state.controller_state, state.delay_state):
                for value in vars(part).values() if part is not None else ():
                    if isinstance(value, wp.array) and value.dtype in (wp.float16, wp.float32, wp.float64):
                        value.requires_grad = True
        return state

    def _efforts(self) -> tuple[wp.array, list[wp.array]]:
        """``(controller output, output of each clamping stage)``. Untaped: the reused buffers
        (clampings after the first work in place). Taped: fresh arrays with gradients per step."""
        if not tape_recording():
            return self._computed, [self._applied] * len(self.clamping)
        n, dev = self.num_actuators, self.device
        fresh = [wp.zeros(n, dtype=wp.float32, device=dev, requires_grad=True) for _ in range(1 + len(self.clamping))]
        return fresh[0], fresh[1:]

    def sim_state(self) -> Any:
        """An empty container with the ``sim_state`` fields this actuator reads (all ``None``)."""
        return types.SimpleNamespace(**{self.state_pos_attr: None, self.state_vel_attr: None})

    def sim_control(self) -> Any:
        """An empty container with the ``sim_control`` fields this actuator reads and writes (all ``None``)."""
        names = [self.control_target_pos_attr, self.control_target_vel_attr, self.control_feedforward_attr,
                 self.control_output_attr, self.control_computed_output_attr]
        return types.SimpleNamespace(**{a: None for a in names if a})

    @classmethod
    def from_entries(cls, entries, device=None, requires_grad: bool = False) -> list[Actuator]:
        """Actuators for ``ModelBuilder`` entries, compatible entries grouped (see :mod:`.grouping`)."""
        from .grouping import build_actuators

        return build_actuators(cls, entries, device=device, requires_grad=requires_grad)

    def __repr__(self) -> str:
        clamps = ", ".join(type(c).__name__ for c in self.clamping)
        delay = f", delay<={self.delay.max_delay}" if self.delay is not None else ""
        return f"<{self.label}: {type(self.controller).__name__}{delay}, clamping=[{clamps}] on {self.device}>"

    def _fetch(self, obj, attr: str, where: str):
        try:
            value = getattr(obj, attr)
        except AttributeError:
            raise AttributeError(f"{self.label}: {where} has no attribute {attr!r} (needed by this actuator)") from None
        if value is None:
            raise ValueError(f"{self.label}: {where}.{attr} is None; it must be a wp.float32 array")
        return value

    def _check_arrays(self, arrays: dict) -> None:
        """Host-side checks of the step's arrays (dtype, device, index ranges)."""
        uses = {
            "sim_state." + self.state_pos_attr: ("pos_indices",),
            "sim_state." + self.state_vel_attr: ("indices",),
            "target_pos": ("target_pos_indices",),
            "target_vel": ("target_vel_indices",),
            "feedforward": ("target_vel_indices",),
            "output": ("effort_indices",),
            "computed_output": ("effort_indices",),
        }
        for key, (where, arr) in arrays.items():
            if arr is None:
                continue
            if not isinstance(arr, wp.array) or arr.dtype != wp.float32 or arr.ndim != 1:
                raise ValueError(f"{self.label}: {where} must be a 1-D wp.float32 array, got {arr!r}")
            if arr.device != self.device:
                raise ValueError(f"{self.label}: {where} is on {arr.device} but the actuator is on {self.device}")
            for idx_name in uses[key]:
                top, k = self._index_max[idx_name]
                if top >= arr.shape[0]:
                    raise ValueError(
                        f"{self.label}: {idx_name}[{k}] = {top} is out of range for {where} "
                        f"({arr.shape[0]} entries)"
                    )

    # ------------------------------------------------------------------ step
    def step(self, sim_state, sim_control, current_act_state=None, next_act_state=None, dt: float | None = None):
        """Compute, clamp and scatter-add the effort for one step; write the next state.

        Args:
            sim_state: object with the position / velocity arrays (``joint_q``, ``joint_qd``).
            sim_control: object with the target, feedforward and output arrays.
            current_act_state, next_act_state: two different :meth:`state` objects
                (required when :meth:`is_stateful`); the next state is written, swap them
                after the step.
            dt: actuator time step [s] (required by ``ControllerPID``).
        """
        pos = self._fetch(sim_state, self.state_pos_attr, "sim_state")
        vel = self._fetch(sim_state, self.state_vel_attr, "sim_state")
        tpa, tva, ffa = self.control_target_pos_attr, self.control_target_vel_attr, self.control_feedforward_attr
        tpos = self._fetch(sim_control, tpa, "sim_control") if tpa else self._zero_target_pos
        tvel = self._fetch(sim_control, tva, "sim_control") if tva else self._zero_target_vel
        tpos_idx, tvel_idx = self.target_pos_indices, self.target_vel_indices
        ff = getattr(sim_control, ffa, None) if ffa else None
        out = self._fetch(sim_control, self.control_output_attr, "sim_control")
        cout = (self._fetch(sim_control, self.control_computed_output_attr, "sim_control")
                if self.control_computed_output_attr else None)

        key = tuple((a.shape, a.dtype, a.device.alias) if isinstance(a, wp.array) else (type(a), id(a))
                    for a in (pos, vel, tpos, tvel, ff, out, cout))
        if key not in self._checked:
            self._check_arrays({
                "sim_state." + self.state_pos_attr: (f"sim_state.{self.state_pos_attr}", pos),
                "sim_state." + self.state_vel_attr: (f"sim_state.{self.state_vel_attr}", vel),
                "target_pos": (f"sim_control.{tpa}", tpos if tpa else None),
                "target_vel": (f"sim_control.{tva}", tvel if tva else None),
                "feedforward": (f"sim_control.{ffa}", ff),
                "output": (f"sim_control.{self.control_output_attr}", out),
                "computed_output": (f"sim_control.{self.control_computed_output_attr}", cout),
            })
            self._checked.add(key)

        cstate = nstate = None
        cur = nxt = None
        if self.is_stateful():
            if current_act_state is None or next_act_state is None:
                raise ValueError(
                    f"{self.label} is stateful (delay or stateful controller): create two states with "
                    "actuator.state() and pass them as step(sim_state, sim_control, state_a, state_b, dt=...), "
                    "swapping them after each step"
                )
            if current_act_state is next_act_state:
                raise ValueError(
                    f"{self.label}: current_act_state and next_act_state are the same object; create two with "
                    "actuator.state() (double buffering) and swap them after each step"
                )
            cur, nxt = current_act_state, next_act_state
            cstate, nstate = cur.controller_state, nxt.controller_state

        if tape_recording():
            self._refuse_tape((pos, vel, tpos, tvel, ff))

        # 1. delay read
        if self.delay is not None:
            c_tpos, c_tvel, c_ff = self.delay.get_delayed_targets(tpos, tvel, ff, tpos_idx, tvel_idx, cur.delay_state)
            c_tpos_idx = c_tvel_idx = self._local
        else:
            c_tpos, c_tvel, c_ff, c_tpos_idx, c_tvel_idx = tpos, tvel, ff, tpos_idx, tvel_idx

        # 2. controller
        computed, stages = self._efforts()
        args = (pos, vel, c_tpos, c_tvel, c_ff, self.pos_indices, self.indices, c_tpos_idx, c_tvel_idx,
                computed, cstate, dt, self.device)
        if self._pass_next_state:
            self.controller.compute(*args, next_state=nstate)
        else:
            self.controller.compute(*args)

        # 3. clampings
        src = computed
        for clamp, dst in zip(self.clamping, stages):
            clamp.modify_forces(src, dst, pos, vel, self.pos_indices, self.indices, self.device)
            src = dst

        # 4. scatter-add
        n = self.num_actuators
        wp.launch(kernels.scatter_add_kernel, dim=n, inputs=[src, self.effort_indices], outputs=[out],
                  device=self.device)
        if cout is not None:
            wp.launch(kernels.scatter_add_kernel, dim=n, inputs=[computed, self.effort_indices],
                      outputs=[cout], device=self.device)

        # 5. state updates
        if self._controller_stateful and not self._pass_next_state:
            self.controller.update_state(cstate, nstate)
        if self.delay is not None:
            self.delay.update_state(tpos, tvel, ff, tpos_idx, tvel_idx, cur.delay_state, nxt.delay_state)

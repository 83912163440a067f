"""What every solver step checks: its inputs before the launches, its outputs after them.

:class:`SolverBase` wraps each subclass's ``step`` (and so third-party solvers get the same
checks without writing any code):

* ``dt`` must be a finite positive number of seconds.
* Every array a step reads or writes (``State``, ``Control``, ``Contacts``) must be a Warp array of
  the model's size, dtype and device: a ``ValueError`` names the array, the expected and the actual
  shape/dtype/device, before any kernel runs (a wrong-sized array would otherwise be read or written
  out of bounds by the kernels and can crash the interpreter). The check runs once per object:
  ``State``, ``Control`` and ``Contacts`` forget that they were checked when an attribute is
  reassigned, so steady stepping costs a few attribute reads per step.
* After the step, a non-finite guard: one small kernel (or the solver's own kernels, for solvers
  that declare ``fuses_finite_guard``) records the first non-finite body pose/twist, particle
  position/velocity, joint coordinate and joint velocity of ``state_out`` in
  :attr:`SolverBase.nonfinite_flags` without synchronising. :meth:`SolverBase.check_finite` reads
  it (a host sync) and raises :class:`NonFiniteStateError` naming the entity; with
  ``solver.debug = True`` (or the environment variable ``ARMILLARY_DEBUG=1``) every step does so.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import warp as wp

from ..sim.array_checks import expect_array

__all__ = ["NonFiniteStateError", "StepGuard", "check_dt", "check_state_arrays"]

#: ``nonfinite_flags`` slots: the smallest offending index of each kind (``CLEAN`` = none): the
#: step's outputs (body pose or twist, particle position or velocity, joint coordinate, joint DOF
#: velocity of ``state_out``) and its force inputs (``control.joint_f``, ``state_in.body_f``,
#: ``state_in.particle_f``)
SLOT_BODY, SLOT_PARTICLE, SLOT_JOINT_COORD, SLOT_JOINT_DOF, SLOT_JOINT_F, SLOT_BODY_F, SLOT_PARTICLE_F = range(7)
SLOT_NAMES = ("body", "particle", "joint coordinate", "joint DOF", "control.joint_f entry", "state_in.body_f entry",
              "state_in.particle_f entry")  # fmt: skip
SLOT_COUNT = len(SLOT_NAMES)
CLEAN = 2**31 - 1


class NonFiniteStateError(FloatingPointError):
    """A solver step produced NaN or infinity. ``kind`` is ``"body"``, ``"particle"``, ``"joint
    coordinate"`` or ``"joint DOF"``, ``index`` the first offending entity, ``step`` the step count
    of the solver when it was detected (``None`` when unknown)."""

    def __init__(self, message: str, *, solver: str, kind: str, index: int, step: int | None):
        super().__init__(message)
        self.solver, self.kind, self.index, self.step = solver, kind, index, step


class NotDifferentiableError(RuntimeError):
    """A solver that does not declare ``differentiable`` was stepped while a ``wp.Tape`` recorded on
    a model or state with ``requires_grad``: its gradients would silently be zero."""


def check_dt(solver_name: str, dt) -> float:
    """``dt`` as a float; ``TypeError`` unless it is a real number (not a string or a bool),
    ``ValueError`` unless it is finite and positive [s]."""
    if isinstance(dt, (bool, str, bytes)) or not isinstance(dt, numbers.Real):
        raise TypeError(f"{solver_name}.step: dt must be a number of seconds, got {dt!r}")
    value = float(dt)
    if not (0.0 < value < math.inf):
        raise ValueError(f"{solver_name}.step: dt must be finite and > 0 [s], got {dt!r}")
    return value


# ------------------------------------------------------------------------------ array checks
def check_state_arrays(model, where: str, state) -> None:
    """Check a :class:`~armillary.State` against ``model`` (see :func:`_expect`)."""
    if state is None:
        raise ValueError(f"{where} is None; pass a State from model.state()")
    if not hasattr(state, "body_q"):
        raise TypeError(f"{where} must be an armillary.State (from model.state()), got {type(state).__name__}")
    dev = model.device
    nb, nc, nd = int(model.body_count), int(model.joint_coord_count), int(model.joint_dof_count)
    npart = int(model.particle_count or 0)
    hint_b = f"the model has {nb} bodies"
    expect_array(where, "body_q", state.body_q, nb, wp.transform, dev, required=True, hint=hint_b)
    expect_array(where, "body_qd", state.body_qd, nb, wp.spatial_vector, dev, required=True, hint=hint_b)
    expect_array(where, "body_f", state.body_f, nb, wp.spatial_vector, dev, required=True, hint=hint_b)
    expect_array(where, "joint_q", state.joint_q, nc, wp.float32, dev, required=True,
            hint=f"the model has {nc} joint coordinates")  # fmt: skip
    expect_array(where, "joint_qd", state.joint_qd, nd, wp.float32, dev, required=True,
            hint=f"the model has {nd} joint DOFs")  # fmt: skip
    hint_p = f"the model has {npart} particles"
    expect_array(where, "particle_q", state.particle_q, npart, wp.vec3, dev, required=True, hint=hint_p)
    expect_array(where, "particle_qd", state.particle_qd, npart, wp.vec3, dev, required=True, hint=hint_p)
    expect_array(where, "particle_f", state.particle_f, npart, wp.vec3, dev, required=True, hint=hint_p)


def check_control_arrays(model, control) -> None:
    """Check a :class:`~armillary.Control` against ``model``; ``None`` passes."""
    if control is None:
        return
    if not hasattr(control, "joint_f"):
        raise TypeError(f"control must be an armillary.Control (from model.control()) or None, "
                        f"got {type(control).__name__}")  # fmt: skip
    dev = model.device
    nc, nd = int(model.joint_coord_count), int(model.joint_dof_count)
    hint_d = f"the model has {nd} joint DOFs"
    expect_array("control", "joint_f", control.joint_f, nd, wp.float32, dev, required=True, hint=hint_d)
    expect_array("control", "joint_act", control.joint_act, nd, wp.float32, dev, required=False, hint=hint_d)
    expect_array("control", "joint_target_q", control.joint_target_q, nc, wp.float32, dev, required=True,
            hint=f"the model has {nc} joint coordinates")  # fmt: skip
    expect_array("control", "joint_target_qd", control.joint_target_qd, nd, wp.float32, dev, required=True, hint=hint_d)
    for name, count in (("tri_activations", "tri_count"), ("tet_activations", "tet_count"),
                        ("muscle_activations", "muscle_count")):  # fmt: skip
        arr = getattr(control, name, None)
        if arr is not None:
            n = int(getattr(model, count, 0) or 0)
            expect_array("control", name, arr, n, wp.float32, dev, required=False, hint=f"the model's {count} is {n}")


_RIGID = (("rigid_contact_shape0", wp.int32), ("rigid_contact_shape1", wp.int32),
          ("rigid_contact_point0", wp.vec3), ("rigid_contact_point1", wp.vec3),
          ("rigid_contact_offset0", wp.vec3), ("rigid_contact_offset1", wp.vec3),
          ("rigid_contact_normal", wp.vec3), ("rigid_contact_margin0", wp.float32),
          ("rigid_contact_margin1", wp.float32), ("rigid_contact_stiffness", wp.float32),
          ("rigid_contact_damping", wp.float32), ("rigid_contact_friction", wp.float32))  # fmt: skip
_SOFT = (("soft_contact_particle", wp.int32), ("soft_contact_shape", wp.int32),
         ("soft_contact_body_pos", wp.vec3), ("soft_contact_body_vel", wp.vec3),
         ("soft_contact_normal", wp.vec3))  # fmt: skip


def check_contacts(model, contacts) -> None:
    """Check a :class:`~armillary.Contacts`: its type, device, the layout of the arrays solvers read,
    and that it was filled for a model with this model's shapes (``Contacts.shape_count``, stamped
    by ``model.contacts()`` and by the collision pipeline); ``None`` passes."""
    if contacts is None:
        return
    if not hasattr(contacts, "rigid_contact_count"):
        raise TypeError(f"contacts must be an armillary.Contacts (from model.contacts() or "
                        f"CollisionPipeline.contacts()) or None, got {type(contacts).__name__}")  # fmt: skip
    dev = model.device
    for name, n in (("rigid_contact_count", 1), ("soft_contact_count", 1)):
        expect_array("contacts", name, getattr(contacts, name, None), n, wp.int32, dev, required=True,
                hint="a one-element counter")  # fmt: skip
    nr, ns = int(contacts.rigid_contact_max), int(contacts.soft_contact_max)
    for name, dtype in _RIGID:
        expect_array("contacts", name, getattr(contacts, name, None), nr, dtype, dev, required=True,
                hint=f"contacts.rigid_contact_max is {nr}")  # fmt: skip
    for name, dtype in _SOFT:
        expect_array("contacts", name, getattr(contacts, name, None), ns, dtype, dev, required=True,
                hint=f"contacts.soft_contact_max is {ns}")  # fmt: skip
    owner = contacts.__dict__.get("shape_count")
    if owner is not None and int(owner) != int(model.shape_count):
        raise ValueError(f"contacts were allocated or filled for a model with {owner} shapes, this model has "
                         f"{model.shape_count}: use model.contacts() / CollisionPipeline(model).contacts() of "
                         f"this model")  # fmt: skip


def _check_once(obj, stamp, check, *args) -> None:
    """Run ``check(*args)`` unless ``obj`` carries ``stamp`` (checked since its last attribute
    assignment); stamp it when the check passes (``None`` objects are skipped)."""
    if obj is not None and getattr(obj, "_armillary_checked", None) is not stamp:
        check(*args)
        obj.__dict__["_armillary_checked"] = stamp


def check_collide_inputs(model, state, contacts, where: str = "CollisionPipeline.collide") -> None:
    """The checks of a step for a collision pass: ``state`` and ``contacts`` against ``model`` (once
    per object, as for a step; ``ValueError`` / ``TypeError`` prefixed with ``where``)."""
    stamp = _stamp_for(model)
    try:
        if state is None:
            check_state_arrays(model, "state", state)  # raises, naming it
        _check_once(state, stamp, check_state_arrays, model, "state", state)
        if contacts is None:
            raise TypeError("contacts is None; pass a Contacts from pipeline.contacts()")
        _check_once(contacts, stamp, check_contacts, model, contacts)
    except (ValueError, TypeError) as exc:
        raise type(exc)(f"{where}: {exc}") from None


# ------------------------------------------------------------------------- non-finite guard
@wp.func
def transform_finite(x: wp.transform) -> bool:
    return wp.isfinite(wp.transform_get_translation(x)) and wp.isfinite(wp.transform_get_rotation(x))


@wp.func
def twist_finite(v: wp.spatial_vector) -> bool:
    return wp.isfinite(wp.spatial_top(v)) and wp.isfinite(wp.spatial_bottom(v))


@wp.func
def report_nonfinite(flags: wp.array(dtype=wp.int32), slot: int, index: int):
    """Record entity ``index`` as non-finite in ``flags[slot]`` (keeps the smallest index). For
    solvers' own kernels (``fuses_finite_guard``): slots 0 body, 1 particle, 2 joint coordinate,
    3 joint DOF (outputs), 4 ``control.joint_f``, 5 ``state_in.body_f``, 6 ``state_in.particle_f``."""
    wp.atomic_min(flags, slot, index)


@wp.kernel
def finite_guard_kernel(
    # State out:
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    particle_q: wp.array(dtype=wp.vec3),
    particle_qd: wp.array(dtype=wp.vec3),
    joint_q: wp.array(dtype=float),
    joint_qd: wp.array(dtype=float),
    # Inputs (forces):
    joint_f: wp.array(dtype=float),
    body_f: wp.array(dtype=wp.spatial_vector),
    particle_f: wp.array(dtype=wp.vec3),
    # out:
    flags: wp.array(dtype=wp.int32),
):
    """Flag the first non-finite entry of each array (launched over the longest one)."""
    i = wp.tid()
    if i < body_q.shape[0]:
        if not (transform_finite(body_q[i]) and twist_finite(body_qd[i])):
            report_nonfinite(flags, 0, i)
    if i < particle_q.shape[0]:
        if not (wp.isfinite(particle_q[i]) and wp.isfinite(particle_qd[i])):
            report_nonfinite(flags, 1, i)
    if i < joint_q.shape[0]:
        if not wp.isfinite(joint_q[i]):
            report_nonfinite(flags, 2, i)
    if i < joint_qd.shape[0]:
        if not wp.isfinite(joint_qd[i]):
            report_nonfinite(flags, 3, i)
    if i < joint_f.shape[0]:
        if not wp.isfinite(joint_f[i]):
            report_nonfinite(flags, 4, i)
    if i < body_f.shape[0]:
        if not twist_finite(body_f[i]):
            report_nonfinite(flags, 5, i)
    if i < particle_f.shape[0]:
        if not wp.isfinite(particle_f[i]):
            report_nonfinite(flags, 6, i)


def _empty(dtype, device):
    return wp.empty(0, dtype=dtype, device=device)


_STAMPS: dict = {}


def _stamp_for(model) -> object:
    """One marker object per model layout (device and entity counts): an object checked for one
    solver is valid for every solver of a model with the same layout (a coupled solver and the
    solvers of its entries check the same states without re-checking each other's)."""
    key = (str(model.device),) + tuple(int(getattr(model, name, 0) or 0) for name in (
        "body_count", "joint_coord_count", "joint_dof_count", "particle_count", "shape_count", "tri_count",
        "tet_count", "muscle_count"))  # fmt: skip
    return _STAMPS.setdefault(key, object())


class StepGuard:
    """Per-solver state of the checks: the stamp that marks objects as checked, the non-finite flags
    and the recorded guard launch of each ``state_out``."""

    def __init__(self, solver):
        self.solver = solver
        self.model = solver.model
        self.name = type(solver).__name__
        self.stamp = _stamp_for(self.model)  # objects checked for a model of this layout carry it
        self.active = False  # inside a checked step (a nested super().step() is not checked again)
        self.steps = 0  # SolverBase.step_count
        self.launch = solver.finite_guard and not solver.fuses_finite_guard  # the generic guard launch
        self.flags = wp.full(SLOT_COUNT, CLEAN, dtype=wp.int32, device=self.model.device)
        self._guards: dict = {}  # ids of (state_in, state_out, control) -> the recorded guard launch

    # -- inputs
    def check_inputs(self, state_in, state_out, control, contacts) -> None:
        """Full check of each object not stamped since its last attribute assignment."""
        try:
            self._check_inputs(state_in, state_out, control, contacts)
        except (ValueError, TypeError) as exc:
            raise type(exc)(f"{self.name}.step: {exc}") from None

    def _check_inputs(self, state_in, state_out, control, contacts) -> None:
        stamp, model = self.stamp, self.model
        for where, state in (("state_in", state_in), ("state_out", state_out)):
            if state is None:
                check_state_arrays(model, where, state)  # raises, naming it
            _check_once(state, stamp, check_state_arrays, model, where, state)
        _check_once(control, stamp, check_control_arrays, model, control)
        _check_once(contacts, stamp, check_contacts, model, contacts)

    # -- outputs
    def launch_guard(self, state_in, state_out, control) -> None:
        """Record the non-finite flags of ``state_out`` and of the force inputs (one replayed launch,
        no host sync). The recorded launch is keyed on the objects and their assignment counts, so
        it never replays arrays they no longer hold."""
        key = (id(state_in), id(state_out), id(control))
        versions = tuple(None if o is None else o.__dict__.get("_armillary_version")
                         for o in (state_in, state_out, control))  # fmt: skip
        entry = self._guards.get(key)
        if entry is None or entry[0] is not state_out or entry[1] is not state_in or entry[2] is not control \
                or entry[3] != versions:
            dev = self.model.device

            def arr(obj, name, dtype):
                a = getattr(obj, name, None) if obj is not None else None
                return a if isinstance(a, wp.array) else _empty(dtype, dev)

            arrays = [arr(state_out, "body_q", wp.transform), arr(state_out, "body_qd", wp.spatial_vector),
                      arr(state_out, "particle_q", wp.vec3), arr(state_out, "particle_qd", wp.vec3),
                      arr(state_out, "joint_q", wp.float32), arr(state_out, "joint_qd", wp.float32),
                      arr(control, "joint_f", wp.float32), arr(state_in, "body_f", wp.spatial_vector),
                      arr(state_in, "particle_f", wp.vec3)]  # fmt: skip
            n = max(len(a) for a in arrays)
            cmd = None
            if n:
                from ..launch import replayer

                recorded = wp.launch(finite_guard_kernel, dim=n, inputs=arrays, outputs=[self.flags],
                                     device=dev, record_cmd=True)  # fmt: skip
                # the guard only reads the state: under a recording tape it runs untaped
                cmd = replayer(recorded, relaunch=recorded.launch)
            if len(self._guards) >= 8:
                self._guards.clear()
            entry = self._guards[key] = (state_out, state_in, control, versions, cmd)
        if entry[4] is not None:
            entry[4]()

    def first_nonfinite(self) -> tuple[str, int] | None:
        """``(kind, index)`` of the first flagged entity, or ``None`` (reads the flags: a host sync)."""
        flags = self.flags.numpy()
        for slot, value in enumerate(flags.tolist()):
            if value != CLEAN:
                return SLOT_NAMES[slot], int(value)
        return None

    def reset(self) -> None:
        self.flags.fill_(CLEAN)

    def error(self, kind: str, index: int, state, step: int | None) -> NonFiniteStateError:
        """The exception for entity ``index`` of ``kind`` (a ``SLOT_NAMES`` entry), naming its label
        and, for outputs, its value in ``state``."""
        model = self.model
        slot = SLOT_NAMES.index(kind)
        what, value = f"{kind} {index}", None
        if slot in (SLOT_BODY, SLOT_BODY_F):
            labels = getattr(model, "body_label", None) or []
            if index < len(labels):
                what += f" ({labels[index]!r})"
            if slot == SLOT_BODY and state is not None and state.body_q is not None:
                value = f"body_q={state.body_q.numpy()[index].tolist()}, body_qd={state.body_qd.numpy()[index].tolist()}"
        elif slot == SLOT_PARTICLE:
            if state is not None and state.particle_q is not None:
                value = f"particle_q={state.particle_q.numpy()[index].tolist()}"
        elif slot in (SLOT_JOINT_COORD, SLOT_JOINT_DOF, SLOT_JOINT_F):
            coord = slot == SLOT_JOINT_COORD
            starts = (model.joint_q_start if coord else model.joint_qd_start).numpy()
            joint = int(np.searchsorted(starts, index, side="right") - 1)
            labels = getattr(model, "joint_label", None) or []
            if 0 <= joint < len(labels):
                what += f" (joint {joint}, {labels[joint]!r})"
            arr = None if state is None or slot == SLOT_JOINT_F else (state.joint_q if coord else state.joint_qd)
            if arr is not None:
                value = f"{'joint_q' if coord else 'joint_qd'}={float(arr.numpy()[index])}"
        when = f" (detected after step {step})" if step is not None else ""
        head = "non-finite input" if slot >= SLOT_JOINT_F else "non-finite state"
        msg = f"{self.name}: {head}{when}: first {what}" + (f": {value}" if value else "")
        msg += ("; check dt, joint limits/gains, forces and initial overlaps; ARMILLARY_DEBUG=1 (or solver.debug = "
                "True) raises at the first step that produces it")  # fmt: skip
        return NonFiniteStateError(msg, solver=self.name, kind=kind, index=index, step=step)

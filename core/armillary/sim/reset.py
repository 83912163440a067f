"""Re-initialise a :class:`~armillary.State` from its :class:`~armillary.Model`.

:func:`reset_state` is what :meth:`armillary.solvers.SolverBase.reset` calls.
It copies the model's initial coordinates (``joint_q``, ``joint_qd``,
``body_q``, ``body_qd``, ``particle_q``, ``particle_qd``) into a state and
zeroes its external force arrays (``body_f``, ``particle_f`` and, when the
state carries one, ``joint_f``), optionally restricted to some worlds.

Everything runs in a single Warp kernel launch (one thread per joint, body
and particle, whichever count is largest) and never reads a device array back
to the host, so a reset with a ``world_mask`` array can be captured in a CUDA
graph and replayed with different mask contents.

World masks
-----------
``world_mask`` is a ``wp.array(dtype=wp.bool)`` on the model's device, in one
of two layouts:

* length ``model.world_count``: entry ``w`` selects world ``w``; global
  entities (world ``-1``, e.g. the ground plane's body-less shapes or a
  particle added outside any world) are reset when *any* world is selected;
* length ``model.world_count + 1``: as above, and the final entry selects the
  global entities explicitly (the layout of the reference engine).

``None`` resets everything.
"""

from __future__ import annotations

import warp as wp

from ..flags import StateFlags

__all__ = ["WorldMaskError", "reset_state", "validate_world_mask"]


class WorldMaskError(ValueError, TypeError):
    """A ``world_mask`` with the wrong type, dtype, shape or device.

    Subclasses both ``ValueError`` and ``TypeError`` so callers written for
    either convention catch it.
    """


# mask modes passed to the kernel
_MASK_NONE = 0  # reset every entity
_MASK_WORLDS = 1  # length world_count; globals follow "any world selected"
_MASK_WORLDS_AND_GLOBAL = 2  # length world_count + 1; last entry = globals


@wp.func
def _selected(world: int, world_mask: wp.array(dtype=wp.bool), mode: int, world_count: int):
    if mode == 0:
        return True
    if world >= 0:
        if world < world_count:
            return world_mask[world]
        return False
    # global entity (world -1)
    if mode == 2:
        return world_mask[world_count]
    for w in range(world_count):
        if world_mask[w]:
            return True
    return False


@wp.func
def _entity_world(worlds: wp.array(dtype=wp.int32), i: int):
    if worlds.shape[0] > i:
        return worlds[i]
    return 0


@wp.kernel
def _reset_state_kernel(
    flags: int,
    mask_mode: int,
    world_count: int,
    world_mask: wp.array(dtype=wp.bool),
    # joints
    joint_count: int,
    joint_world: wp.array(dtype=wp.int32),
    joint_q_start: wp.array(dtype=wp.int32),
    joint_qd_start: wp.array(dtype=wp.int32),
    model_joint_q: wp.array(dtype=wp.float32),
    model_joint_qd: wp.array(dtype=wp.float32),
    joint_q: wp.array(dtype=wp.float32),
    joint_qd: wp.array(dtype=wp.float32),
    joint_f: wp.array(dtype=wp.float32),
    # bodies
    body_count: int,
    body_world: wp.array(dtype=wp.int32),
    model_body_q: wp.array(dtype=wp.transform),
    model_body_qd: wp.array(dtype=wp.spatial_vector),
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    body_f: wp.array(dtype=wp.spatial_vector),
    # particles
    particle_count: int,
    particle_world: wp.array(dtype=wp.int32),
    model_particle_q: wp.array(dtype=wp.vec3),
    model_particle_qd: wp.array(dtype=wp.vec3),
    particle_q: wp.array(dtype=wp.vec3),
    particle_qd: wp.array(dtype=wp.vec3),
    particle_f: wp.array(dtype=wp.vec3),
):
    tid = wp.tid()

    if tid < joint_count:
        if _selected(_entity_world(joint_world, tid), world_mask, mask_mode, world_count):
            if (flags & 1) != 0 and joint_q.shape[0] > 0:
                q0 = joint_q_start[tid]
                q1 = joint_q.shape[0]
                if tid + 1 < joint_q_start.shape[0]:
                    q1 = joint_q_start[tid + 1]
                for k in range(q0, q1):
                    joint_q[k] = model_joint_q[k]
            if ((flags & 2) != 0 and joint_qd.shape[0] > 0) or ((flags & 256) != 0 and joint_f.shape[0] > 0):
                d0 = joint_qd_start[tid]
                d1 = wp.max(joint_qd.shape[0], joint_f.shape[0])
                if tid + 1 < joint_qd_start.shape[0]:
                    d1 = joint_qd_start[tid + 1]
                for k in range(d0, d1):
                    if (flags & 2) != 0 and k < joint_qd.shape[0]:
                        joint_qd[k] = model_joint_qd[k]
                    if (flags & 256) != 0 and k < joint_f.shape[0]:
                        joint_f[k] = 0.0

    if tid < body_count:
        if _selected(_entity_world(body_world, tid), world_mask, mask_mode, world_count):
            if (flags & 4) != 0 and body_q.shape[0] > tid:
                body_q[tid] = model_body_q[tid]
            if (flags & 8) != 0 and body_qd.shape[0] > tid:
                body_qd[tid] = model_body_qd[tid]
            if (flags & 64) != 0 and body_f.shape[0] > tid:
                body_f[tid] = wp.spatial_vector()

    if tid < particle_count:
        if _selected(_entity_world(particle_world, tid), world_mask, mask_mode, world_count):
            if (flags & 16) != 0 and particle_q.shape[0] > tid:
                particle_q[tid] = model_particle_q[tid]
            if (flags & 32) != 0 and particle_qd.shape[0] > tid:
                particle_qd[tid] = model_particle_qd[tid]
            if (flags & 128) != 0 and particle_f.shape[0] > tid:
                particle_f[tid] = wp.vec3()


def validate_world_mask(world_mask, world_count: int, device=None):
    """Check ``world_mask`` and return ``(mask_array_or_None, mode)``.

    Accepts ``None``, a ``wp.array(dtype=wp.bool)`` of length ``world_count``
    or ``world_count + 1`` on ``device``. Raises :class:`WorldMaskError`
    (a ``ValueError``) with a message naming what is wrong otherwise. Does not
    read the mask's contents (no host synchronisation).
    """
    if world_mask is None:
        return None, _MASK_NONE
    if not isinstance(world_mask, wp.array):
        raise WorldMaskError(
            f"world_mask must be a wp.array(dtype=wp.bool) of length model.world_count ({world_count}) "
            f"or world_count + 1, got {type(world_mask).__name__}"
        )
    if world_mask.dtype != wp.bool:
        raise WorldMaskError(
            f"world_mask must have dtype wp.bool, got {getattr(world_mask.dtype, '__name__', world_mask.dtype)}"
        )
    if world_mask.ndim != 1:
        raise WorldMaskError(f"world_mask must be one-dimensional, got shape {tuple(world_mask.shape)}")
    n = int(world_mask.shape[0])
    if n == world_count:
        mode = _MASK_WORLDS
    elif n == world_count + 1:
        mode = _MASK_WORLDS_AND_GLOBAL
    else:
        raise WorldMaskError(
            f"world_mask has length {n}; expected model.world_count ({world_count}) "
            f"or world_count + 1 ({world_count + 1}, the last entry selecting global entities)"
        )
    if device is not None and wp.get_device(device) != world_mask.device:
        raise WorldMaskError(f"world_mask is on device {world_mask.device}, the model on {wp.get_device(device)}")
    return world_mask, mode


def _len(a) -> int:
    return 0 if a is None else int(a.shape[0])


def reset_state(model, state, world_mask=None, flags: StateFlags | int = StateFlags.ALL) -> None:
    """Re-initialise ``state`` in place from ``model``'s initial values.

    Args:
        model: the :class:`~armillary.Model` whose initial ``joint_q``,
            ``joint_qd``, ``body_q``, ``body_qd``, ``particle_q`` and
            ``particle_qd`` are copied.
        state: the :class:`~armillary.State` to reset. Arrays it lacks (or
            that are ``None``) are skipped.
        world_mask: ``None`` (reset all) or a ``wp.array(dtype=wp.bool)`` of
            length ``model.world_count`` (global entities follow "any world
            selected") or ``model.world_count + 1`` (the last entry selects
            global entities).
        flags: :class:`~armillary.StateFlags` choosing what to reset; the
            ``*_F`` flags zero the force arrays (``body_f``, ``particle_f``,
            and ``joint_f`` when the state has one).

    Raises:
        ValueError: a malformed ``world_mask`` (:class:`WorldMaskError`).

    One kernel launch; no host synchronisation.
    """
    try:
        flags = int(flags)
    except (TypeError, ValueError):
        raise TypeError(f"reset_state: flags must be StateFlags or an int, got {flags!r}") from None
    if flags < 0:
        raise ValueError(f"reset_state: flags must be non-negative, got {flags}")
    device = getattr(model, "device", None)
    world_count = int(getattr(model, "world_count", 1) or 1)
    mask, mode = validate_world_mask(world_mask, world_count, device)
    if flags & int(StateFlags.ALL) == 0:
        return

    def m(name):
        return getattr(model, name, None)

    def s(name):
        return getattr(state, name, None)

    joint_count = int(getattr(model, "joint_count", 0) or 0)
    body_count = int(getattr(model, "body_count", 0) or 0)
    particle_count = int(getattr(model, "particle_count", 0) or 0)

    joint_q, joint_qd, joint_f = s("joint_q"), s("joint_qd"), s("joint_f")
    if m("joint_q") is None or m("joint_q_start") is None:
        joint_q = None
    if m("joint_qd") is None or m("joint_qd_start") is None:
        joint_qd = None
    if m("joint_qd_start") is None:
        joint_f = None
    if joint_q is None and joint_qd is None and joint_f is None:
        joint_count = 0
    # guard against states built for a different model
    for name, arr, ref in (
        ("joint_q", joint_q, m("joint_q")),
        ("joint_qd", joint_qd, m("joint_qd")),
        ("body_q", s("body_q"), m("body_q")),
        ("body_qd", s("body_qd"), m("body_qd")),
        ("particle_q", s("particle_q"), m("particle_q")),
        ("particle_qd", s("particle_qd"), m("particle_qd")),
    ):
        if arr is not None and ref is not None and _len(arr) > _len(ref):
            raise ValueError(
                f"reset_state: state.{name} has {_len(arr)} entries but model.{name} only {_len(ref)}; "
                f"was the state created by this model (model.state())?"
            )
    if s("body_q") is not None and m("body_q") is None or s("body_qd") is not None and m("body_qd") is None:
        raise ValueError("reset_state: the model has no initial body_q/body_qd to reset from")

    n = max(joint_count, body_count, particle_count)
    if n == 0:
        return
    wp.launch(
        _reset_state_kernel,
        dim=n,
        inputs=[
            flags,
            mode,
            world_count,
            mask,
            joint_count,
            m("joint_world"),
            m("joint_q_start"),
            m("joint_qd_start"),
            m("joint_q"),
            m("joint_qd"),
            joint_q,
            joint_qd,
            joint_f,
            body_count,
            m("body_world"),
            m("body_q"),
            m("body_qd"),
            s("body_q"),
            s("body_qd"),
            s("body_f"),
            particle_count,
            m("particle_world"),
            m("particle_q"),
            m("particle_qd"),
            s("particle_q"),
            s("particle_qd"),
            s("particle_f"),
        ],
        device=device,
    )

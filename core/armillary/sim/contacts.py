"""Contact buffers filled by collision detection: :class:`Contacts` (data container only)."""

from __future__ import annotations

import dataclasses

import warp as wp

from .checked import CheckedAttributes
from .exceptions import warn_deprecated

#: slots of :attr:`Contacts.contact_counters` and :attr:`Contacts.contact_capacity_needed`
OVERFLOW_RIGID, OVERFLOW_SOFT, OVERFLOW_PAIRS = 0, 1, 2


@dataclasses.dataclass(frozen=True)
class ContactOverflow:
    """Buffer overflow of a :class:`Contacts` buffer, read by :meth:`Contacts.overflow`.

    ``*_dropped``: contacts (candidate shape pairs) the most recent ``collide()`` dropped for
    lack of room. ``*_needed``: the capacity that would have held everything one ``collide()``
    produced, the largest since the buffer was created or last cleared; ``0`` while nothing of
    that kind was dropped. Truthy when anything was dropped since then.
    """

    rigid_dropped: int = 0
    soft_dropped: int = 0
    pairs_dropped: int = 0
    rigid_needed: int = 0
    soft_needed: int = 0
    pairs_needed: int = 0

    def __bool__(self) -> bool:
        return bool(self.rigid_needed or self.soft_needed or self.pairs_needed)


@wp.kernel
def _bump_generation(gen: wp.array(dtype=wp.int32)):
    gen[0] = gen[0] + 1


class Contacts(CheckedAttributes):
    """Preallocated rigid (shape-shape) and soft (particle-shape) contact arrays.

    Rigid contacts (length ``rigid_contact_max``): ``rigid_contact_shape0/1`` (int32, -1 when unused),
    ``rigid_contact_point0/1`` (vec3, body frame of each shape's body [m]),
    ``rigid_contact_offset0/1`` (vec3, body-frame friction-anchor offsets [m]),
    ``rigid_contact_normal`` (vec3, world frame, from shape 0 toward shape 1),
    ``rigid_contact_margin0/1`` (float, effective radius + margin [m]),
    ``rigid_contact_force`` (vec3), ``rigid_contact_point_id`` (int32, the contact's sub-key
    within its shape pair) and ``rigid_contact_tids`` (int32); ``rigid_contact_count`` is a
    one-element int32 array. Per-contact material overrides (float32, ``0`` = use the shapes'
    mixed materials): ``rigid_contact_stiffness`` [N/m] (set by hydroelastic contacts to
    ``area * k_eff``), ``rigid_contact_damping`` [N*s/m] and ``rigid_contact_friction`` (friction
    coefficient).

    Options: ``clear_buffers`` makes :meth:`clear` also reset the per-contact arrays;
    ``requested_attributes`` allocates extended attributes (``"force"``);
    ``contact_matching`` / ``contact_report`` allocate the match-index and new/broken
    index arrays; ``rigid_contact_surface_velocity`` allocates per-contact surface
    velocities; ``soft_contact_tids_size`` sizes ``soft_contact_tids``.

    Soft contacts (length ``soft_contact_max``): ``soft_contact_particle``, ``soft_contact_shape`` (int32),
    ``soft_contact_indices`` (vec3i, -1 padded), ``soft_contact_barycentric``,
    ``soft_contact_body_pos``, ``soft_contact_body_vel``, ``soft_contact_normal`` (vec3),
    ``soft_contact_tids`` (int32); ``soft_contact_count`` is a one-element int32 array.

    Overflow: a contact that finds its buffer full is dropped (the counts stay clamped to the
    capacities) and counted on the device, fused into the kernels that append contacts (no
    extra launch, no host sync). ``contact_counters`` (int32, 4) holds what the most recent
    ``collide()`` dropped: ``[0]`` rigid contacts, ``[1]`` soft contacts, ``[2]`` broad-phase
    candidate shape pairs (``CollisionPipeline(shape_pairs_max=...)``), ``[3]`` reserved (0);
    each ``collide()`` resets it. ``contact_capacity_needed`` (int32, 4, same slots) holds the
    capacity that would have held everything one ``collide()`` produced, the largest since the
    buffer was created or last cleared (``0`` while nothing of that kind was dropped).
    :attr:`rigid_contact_dropped`, :attr:`soft_contact_dropped`, :attr:`shape_pairs_dropped` and
    :meth:`overflow` read them on the host; ``CollisionPipeline.check_overflow`` also warns.
    :meth:`clear` resets both. (The reference engine's ``contact_counters`` holds its unclamped
    counts instead.)

    ``soft_contact_body_vel`` is the surface velocity of the shape in its body frame on top of the
    rigid body motion (zero for rigid primitives); solvers add the body's own velocity at
    ``soft_contact_body_pos`` themselves.

    With ``requires_grad=True`` the deprecated ``rigid_contact_diff_distance`` /
    ``rigid_contact_diff_point0_world`` / ``rigid_contact_diff_point1_world`` outputs are also
    allocated (the pipeline fills them when it has ``requires_grad=True``) and
    ``rigid_contact_diff_normal`` aliases ``rigid_contact_normal``; new code should call
    :func:`armillary.eval_rigid_contact_kinematics` instead.
    """

    EXTENDED_ATTRIBUTES = frozenset({"force"})
    Overflow = ContactOverflow

    def __init__(
        self,
        rigid_contact_max: int,
        soft_contact_max: int,
        *,
        soft_contact_tids_size: int | None = None,
        requires_grad: bool = False,
        device=None,
        clear_buffers: bool = False,
        requested_attributes: set[str] | None = None,
        contact_matching: bool = False,
        contact_report: bool = False,
        rigid_contact_surface_velocity: bool = False,
    ):
        rigid_contact_max, soft_contact_max = int(rigid_contact_max), int(soft_contact_max)
        if rigid_contact_max < 0 or soft_contact_max < 0:
            raise ValueError(
                f"Contacts: rigid_contact_max={rigid_contact_max} and soft_contact_max={soft_contact_max} must be >= 0"
            )
        unknown = set(requested_attributes or ()) - self.EXTENDED_ATTRIBUTES
        if contact_report and not contact_matching:
            raise ValueError("Contacts: contact_report=True requires contact_matching=True")
        if unknown:
            raise ValueError(f"Contacts: unknown requested attributes {sorted(unknown)}; allowed: {sorted(self.EXTENDED_ATTRIBUTES)}")
        self.device = wp.get_device(device)
        self.requires_grad = bool(requires_grad)
        self.rigid_contact_max = rigid_contact_max
        self.soft_contact_max = soft_contact_max
        self.clear_buffers = clear_buffers
        self.contact_matching = contact_matching
        self.contact_report = contact_report
        self._contact_matching_mode = "disabled"
        nr, ns, d, g = rigid_contact_max, soft_contact_max, self.device, self.requires_grad

        def full(n, value, dtype):
            return wp.full(n, value, dtype=dtype, device=d)

        with wp.ScopedDevice(d):
            # overflow (see the class docstring): dropped in the last collide(), needed capacities;
            # two views of one array, the one the contact-appending kernels receive
            self._overflow = wp.zeros(8, dtype=wp.int32)
            self.contact_counters = self._overflow[0:4]
            self.contact_capacity_needed = self._overflow[4:8]
            self.contact_generation = wp.zeros(1, dtype=wp.int32)
            # rigid
            self.rigid_contact_count = wp.zeros(1, dtype=wp.int32)
            self.rigid_contact_shape0 = full(nr, -1, wp.int32)
            self.rigid_contact_shape1 = full(nr, -1, wp.int32)
            self.rigid_contact_point0 = wp.zeros(nr, dtype=wp.vec3, requires_grad=g)
            self.rigid_contact_point1 = wp.zeros(nr, dtype=wp.vec3, requires_grad=g)
            self.rigid_contact_offset0 = wp.zeros(nr, dtype=wp.vec3, requires_grad=g)
            self.rigid_contact_offset1 = wp.zeros(nr, dtype=wp.vec3, requires_grad=g)
            self.rigid_contact_normal = wp.zeros(nr, dtype=wp.vec3, requires_grad=g)
            self.rigid_contact_margin0 = wp.zeros(nr, dtype=wp.float32, requires_grad=g)
            self.rigid_contact_margin1 = wp.zeros(nr, dtype=wp.float32, requires_grad=g)
            self.rigid_contact_force = wp.zeros(nr, dtype=wp.vec3, requires_grad=g)
            self.rigid_contact_point_id = wp.zeros(nr, dtype=wp.int32)
            self.rigid_contact_tids = full(nr, -1, wp.int32)
            # per-contact material overrides (0 = use the shapes' materials); hydroelastic contacts
            # set rigid_contact_stiffness = area * k_eff
            self.rigid_contact_stiffness = wp.zeros(nr, dtype=wp.float32)
            self.rigid_contact_damping = wp.zeros(nr, dtype=wp.float32)
            self.rigid_contact_friction = wp.zeros(nr, dtype=wp.float32)
            self.rigid_contact_surface_velocity = wp.zeros(nr, dtype=wp.vec3) if rigid_contact_surface_velocity else None
            self.rigid_contact_match_index = full(nr, -1, wp.int32) if contact_matching else None
            self.rigid_contact_new_indices = wp.zeros(nr, dtype=wp.int32) if contact_report else None
            self.rigid_contact_new_count = wp.zeros(1, dtype=wp.int32) if contact_report else None
            self.rigid_contact_broken_indices = wp.zeros(nr, dtype=wp.int32) if contact_report else None
            self.rigid_contact_broken_count = wp.zeros(1, dtype=wp.int32) if contact_report else None
            # deprecated differentiable rigid outputs (see eval_rigid_contact_kinematics)
            self._rigid_contact_diff_distance = wp.zeros(nr, dtype=wp.float32, requires_grad=True) if g else None
            self._rigid_contact_diff_point0_world = wp.zeros(nr, dtype=wp.vec3, requires_grad=True) if g else None
            self._rigid_contact_diff_point1_world = wp.zeros(nr, dtype=wp.vec3, requires_grad=True) if g else None
            # soft
            self.soft_contact_count = wp.zeros(1, dtype=wp.int32)
            self.soft_contact_particle = full(ns, -1, wp.int32)
            self.soft_contact_shape = full(ns, -1, wp.int32)
            self.soft_contact_indices = full(ns, wp.vec3i(-1, -1, -1), wp.vec3i)
            self.soft_contact_rigid_indices = full(ns, wp.vec3i(-1, -1, -1), wp.vec3i)
            self.soft_contact_barycentric = wp.zeros(ns, dtype=wp.vec3, requires_grad=g)
            self.soft_contact_body_pos = wp.zeros(ns, dtype=wp.vec3, requires_grad=g)
            self.soft_contact_body_vel = wp.zeros(ns, dtype=wp.vec3, requires_grad=g)
            self.soft_contact_normal = wp.zeros(ns, dtype=wp.vec3, requires_grad=g)
            tids = ns if soft_contact_tids_size is None else int(soft_contact_tids_size)
            self.soft_contact_tids = full(tids, -1, wp.int32)
            # extended
            requested = set(requested_attributes or ())
            self.force = wp.zeros(nr + ns, dtype=wp.spatial_vector, requires_grad=g) if "force" in requested else None

    @property
    def contact_matching_mode(self) -> str:
        """Matching mode (``"disabled"``, ``"latest"`` or ``"sticky"``) of the pipeline that last
        allocated or filled this buffer; ``"disabled"`` for a directly constructed buffer."""
        return self._contact_matching_mode

    @staticmethod
    def _deprecated(name: str, instead: str) -> None:
        warn_deprecated(f"Contacts.{name} is deprecated and will be removed in a future release; {instead}")

    @property
    def rigid_contact_diff_distance(self):
        """Deprecated differentiable signed distance [m]; pass ``out_distance`` to
        :func:`armillary.eval_rigid_contact_kinematics` instead."""
        self._deprecated("rigid_contact_diff_distance",
                         "pass out_distance to armillary.eval_rigid_contact_kinematics()")  # fmt: skip
        return self._rigid_contact_diff_distance

    @property
    def rigid_contact_diff_point0_world(self):
        """Deprecated differentiable world-space contact point on shape 0 [m]."""
        self._deprecated("rigid_contact_diff_point0_world",
                         "pass out_point0_world to armillary.eval_rigid_contact_kinematics()")  # fmt: skip
        return self._rigid_contact_diff_point0_world

    @property
    def rigid_contact_diff_point1_world(self):
        """Deprecated differentiable world-space contact point on shape 1 [m]."""
        self._deprecated("rigid_contact_diff_point1_world",
                         "pass out_point1_world to armillary.eval_rigid_contact_kinematics()")  # fmt: skip
        return self._rigid_contact_diff_point1_world

    @property
    def rigid_contact_diff_normal(self):
        """Deprecated alias of :attr:`rigid_contact_normal` (``None`` without ``requires_grad``)."""
        self._deprecated("rigid_contact_diff_normal", "use Contacts.rigid_contact_normal")
        return self.rigid_contact_normal if self.requires_grad else None

    @property
    def rigid_contact_dropped(self) -> int:
        """Rigid contacts the most recent ``collide()`` dropped because ``rigid_contact_max`` was
        reached (reads the device: synchronises)."""
        return int(self.contact_counters.numpy()[OVERFLOW_RIGID])

    @property
    def soft_contact_dropped(self) -> int:
        """Soft contacts the most recent ``collide()`` dropped because ``soft_contact_max`` was
        reached (reads the device: synchronises)."""
        return int(self.contact_counters.numpy()[OVERFLOW_SOFT])

    @property
    def shape_pairs_dropped(self) -> int:
        """Broad-phase candidate shape pairs the most recent ``collide()`` dropped because the
        pipeline's ``shape_pairs_max`` was reached (reads the device: synchronises)."""
        return int(self.contact_counters.numpy()[OVERFLOW_PAIRS])

    def overflow(self) -> ContactOverflow:
        """Dropped counts of the most recent ``collide()`` and the capacities needed since the
        last :meth:`clear` (one device read: synchronises; call it outside graph capture)."""
        v = self._overflow.numpy()
        d, n = v[:4], v[4:]
        return ContactOverflow(int(d[OVERFLOW_RIGID]), int(d[OVERFLOW_SOFT]), int(d[OVERFLOW_PAIRS]),
                               int(n[OVERFLOW_RIGID]), int(n[OVERFLOW_SOFT]), int(n[OVERFLOW_PAIRS]))  # fmt: skip

    def clear(self, bump_generation: bool = True) -> None:
        """Reset the contact counts and the overflow counters (``contact_counters``,
        ``contact_capacity_needed``), and with ``clear_buffers`` the per-contact arrays."""
        self.rigid_contact_count.zero_()
        self.soft_contact_count.zero_()
        self._overflow.zero_()
        if self.clear_buffers:
            self._clear_rows()
        if bump_generation:
            wp.launch(_bump_generation, dim=1, inputs=[self.contact_generation], device=self.device)

    def _clear_rows(self) -> None:
        """Reset the per-contact arrays (``clear_buffers``); ``collide()`` calls this, keeping
        ``contact_capacity_needed``."""
        for name in ("rigid_contact_shape0", "rigid_contact_shape1", "soft_contact_particle", "soft_contact_shape"):
            getattr(self, name).fill_(-1)
        for name in ("rigid_contact_point0", "rigid_contact_point1", "rigid_contact_normal", "rigid_contact_force",
                     "rigid_contact_stiffness", "rigid_contact_damping", "rigid_contact_friction"):
            getattr(self, name).zero_()

    def validate_extended_attributes(self, attributes: tuple[str, ...]) -> None:
        unknown = set(attributes) - self.EXTENDED_ATTRIBUTES
        if unknown:
            raise ValueError(f"Contacts: unknown extended attributes {sorted(unknown)}; allowed: {sorted(self.EXTENDED_ATTRIBUTES)}")

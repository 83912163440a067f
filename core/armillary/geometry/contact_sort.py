"""Shared contact-buffer helpers of :class:`.CollisionPipeline` and :class:`.NarrowPhase`:
allocation of :class:`.narrow_phase.ContactOut` staging buffers, the per-pair contact
reduction slots and the deterministic (radix sort + gather) contact ordering.

Deterministic key (64-bit, sorted over its low ``2 * key_shift + SUB_KEY_BITS`` bits)::

    key = shape_a << (key_shift + SUB_KEY_BITS) | shape_b << SUB_KEY_BITS | sub_key

``key_shift`` is the bit length of the shape count; ``sub_key`` is the per-pair feature id
(``point_id``): for triangle meshes ``4 * triangle + k``, for heightfields
``8 * cell + 4 * triangle_in_cell + k`` (``k < 4``), for plane-mesh pairs the vertex index, for
the mesh-mesh routes ``8 * feature + 2 * kind + end`` (:mod:`.mesh_mesh`).
:data:`SUB_KEY_BITS` = 24 bits keep sub-keys unique for meshes of up to 2^22 triangles
(heightfields of up to 2^21 cells); larger ids saturate at ``2^24 - 1``.
"""

from __future__ import annotations

import warp as wp

wp.set_module_options({"enable_backward": False, "max_unroll": 1})

from ..launch import LaunchCache, tape_recording
from .broad_phase import grid_dim
from .host_sort import RADIX_BUCKETS, sort_i64_count_kernel
from .narrow_phase import REDUCE_SLOTS, SUB_KEY_BITS, ContactOut

#: bits of the radix-sort key available to shape indices
_MAX_KEY_BITS = 63


def key_layout(shape_count: int, who: str = "CollisionPipeline"):
    """(key_shift, sort_bits, key_fill) of the deterministic sort key for ``shape_count`` shapes."""
    shift = max(1, int(shape_count).bit_length())
    bits = 2 * shift + SUB_KEY_BITS
    if bits > _MAX_KEY_BITS:
        most = 2 ** ((_MAX_KEY_BITS - SUB_KEY_BITS) // 2) - 1
        raise ValueError(f"{who}: deterministic contact ordering supports at most {most} shapes, got {shape_count}")
    return shift, bits, (1 << bits) - 1


def alloc_contact_out(cap: int, key_shift: int = 0) -> ContactOut:
    """A staging :class:`ContactOut` of capacity ``cap`` on the current (scoped) device."""
    cap = max(int(cap), 1)
    o = ContactOut()
    o.count = wp.zeros(1, dtype=int)
    o.shape0 = wp.zeros(cap, dtype=int)
    o.shape1 = wp.zeros(cap, dtype=int)
    o.point0 = wp.zeros(cap, dtype=wp.vec3)
    o.point1 = wp.zeros(cap, dtype=wp.vec3)
    o.offset0 = wp.zeros(cap, dtype=wp.vec3)
    o.offset1 = wp.zeros(cap, dtype=wp.vec3)
    o.normal = wp.zeros(cap, dtype=wp.vec3)
    o.margin0 = wp.zeros(cap, dtype=float)
    o.margin1 = wp.zeros(cap, dtype=float)
    o.point_id = wp.zeros(cap, dtype=int)
    o.sort_key = wp.zeros(0, dtype=wp.int64)
    o.sort_value = wp.zeros(0, dtype=int)
    o.capacity = cap
    o.key_shift = int(key_shift)
    o.overflow = wp.zeros(0, dtype=int)  # overflow not counted (see set_counters)
    set_reduction(o, None)
    return o


def set_counters(o: ContactOut, overflow) -> ContactOut:
    """Count the contacts ``o`` drops when full in ``overflow`` (8 ints: dropped, needed; a
    :class:`Contacts` buffer's ``_overflow``, see :func:`.narrow_phase.note_dropped`)."""
    o.overflow = overflow
    return o


def copy_contact_out(o: ContactOut) -> ContactOut:
    """A new :class:`ContactOut` sharing every array of ``o``."""
    c = ContactOut()
    for name in ContactOut.vars:
        setattr(c, name, getattr(o, name))
    return c


class ReductionSlots:
    """Per-pair reduction scratch: ``blocks`` blocks of :data:`.narrow_phase.REDUCE_SLOTS`
    candidate contacts, handed out to mesh / heightfield pairs by an atomic counter.

    A pair that finds every block taken emits its contacts unreduced (size ``blocks`` with
    the number of mesh / heightfield candidate pairs to avoid that)."""

    def __init__(self, blocks: int, device=None):
        self.blocks = max(int(blocks), 0)
        m = self.blocks * REDUCE_SLOTS
        with wp.ScopedDevice(device):
            self.pa = wp.zeros(m, dtype=wp.vec3)
            self.pb = wp.zeros(m, dtype=wp.vec3)
            self.n = wp.zeros(m, dtype=wp.vec3)
            self.r = wp.zeros(m, dtype=wp.vec3)
            self.sub = wp.zeros(m, dtype=int)
            self.fill = wp.zeros(self.blocks, dtype=int)
            self.counter = wp.zeros(1, dtype=int)
            self.no_route = wp.zeros(0, dtype=int)

    def reset(self):
        """Release every block (a device memset; call before each narrow-phase launch)."""
        self.counter.zero_()


_EMPTY_SLOTS: dict = {}


def set_reduction(o: ContactOut, slots: ReductionSlots | None, route=None) -> ContactOut:
    """Attach reduction slots to ``o`` (``None``: contacts are emitted unreduced), and the per-shape
    primitive-SDF route flags ``route`` (see :mod:`.mesh_mesh`; ``None``: no such route)."""
    if slots is None:
        dev = o.count.device
        slots = _EMPTY_SLOTS.get(str(dev))
        if slots is None:
            slots = _EMPTY_SLOTS[str(dev)] = ReductionSlots(0, dev)
    o.red_pa = slots.pa
    o.red_pb = slots.pb
    o.red_n = slots.n
    o.red_r = slots.r
    o.red_sub = slots.sub
    o.red_fill = slots.fill
    o.red_blocks = slots.counter
    o.route = route if route is not None else slots.no_route
    return o


@wp.kernel
def _gather_kernel(src: ContactOut, order: wp.array(dtype=int), dst: ContactOut, stride: int):
    tid = wp.tid()
    n = wp.min(src.count[0], src.capacity)
    if tid == 0:
        dst.count[0] = n
    i = tid
    while i < n:
        j = order[i]
        dst.shape0[i] = src.shape0[j]
        dst.shape1[i] = src.shape1[j]
        dst.point0[i] = src.point0[j]
        dst.point1[i] = src.point1[j]
        dst.offset0[i] = src.offset0[j]
        dst.offset1[i] = src.offset1[j]
        dst.normal[i] = src.normal[j]
        dst.margin0[i] = src.margin0[j]
        dst.margin1[i] = src.margin1[j]
        dst.point_id[i] = src.point_id[j]
        i += stride


class DeterministicSort:
    """Staging buffer with sort keys, and the radix sort + gather into the final buffer.

    Contacts are generated into :attr:`scratch` (whose ``sort_key`` entries must hold
    :attr:`key_fill` beyond the written contacts: :meth:`reset_keys`, or the pipeline's AABB
    kernel), then :meth:`sort_into` orders them by (shape_a, shape_b, sub_key)."""

    def __init__(self, shape_count: int, capacity: int, device=None, who: str = "CollisionPipeline"):
        self.key_shift, self.sort_bits, self.key_fill = key_layout(shape_count, who)
        self.capacity = max(int(capacity), 1)
        self.device = device
        with wp.ScopedDevice(device):
            self.scratch = alloc_contact_out(self.capacity, self.key_shift)
            self.sort_key = wp.zeros(2 * self.capacity, dtype=wp.int64)
            self.sort_value = wp.zeros(2 * self.capacity, dtype=int)
            self._hist = wp.zeros(RADIX_BUCKETS, dtype=int)
        self.scratch.sort_key = self.sort_key
        self.scratch.sort_value = self.sort_value
        self._launches = LaunchCache(max_entries=8)

    def reset_keys(self):
        self.sort_key.fill_(self.key_fill)

    def sort_into(self, dst: ContactOut, device=None):
        dev = wp.get_device(device if device is not None else self.device)
        if dev.is_cpu:
            # serial radix sort of the written contacts only (count read on the device): the same
            # order as sorting the whole buffer, whose unused keys hold key_fill (:mod:`.host_sort`)
            args = [self.sort_key, self.sort_value, self.scratch.count, self.capacity, 0, self.sort_bits, self._hist]
            if tape_recording():  # like the gather below: never on a tape (no adjoint)
                wp.launch(sort_i64_count_kernel, dim=1, inputs=args, device=dev, record_tape=False)
            else:
                self._launches.launch(sort_i64_count_kernel, 1, args, device=dev)
        else:
            wp.utils.radix_sort_pairs(self.sort_key, self.sort_value, self.capacity, 0, self.sort_bits)
        gdim = grid_dim(dev, self.capacity)
        wp.launch(_gather_kernel, dim=gdim, inputs=[self.scratch, self.sort_value, dst, gdim], device=dev,
                  record_tape=False)  # fmt: skip

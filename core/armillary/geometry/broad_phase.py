"""Broad phases: candidate shape pairs whose (gap-expanded) world AABBs overlap.

:class:`BroadPhaseAllPairs` (N x N per world), :class:`BroadPhaseSAP` (sweep and prune
per world, sorted along world x) and :class:`BroadPhaseExplicit` (precomputed pairs).
All write canonical pairs ``(i, j)`` with ``i < j`` into ``candidate_pair`` and the number
found into ``candidate_pair_count[0]``; pairs beyond the buffer capacity are dropped
(the count keeps counting, so ``count > len(candidate_pair)`` reveals an overflow).

Filtering shared by all three: both shapes must have a compatible world (equal, or one
of them global ``-1``), compatible collision groups (0 never collides; a positive group
collides with itself and with negative groups; a negative group collides with every
non-zero group except itself), must not be an excluded ``filter_pairs`` entry, and,
when ``shape_body`` is given, must not share a body nor both be static (body ``-1``)
(nor, with ``include_static_kinematic_pairs=False``, both be static or kinematic).
The N x N and SAP phases also skip shapes without :attr:`ShapeFlags.COLLIDE_SHAPES`
when ``shape_flags`` is given at construction.
"""

from __future__ import annotations

import numpy as np
import warp as wp

from ..launch import LaunchCache
from .host_sort import sort_f32_segments_kernel

wp.set_module_options({"enable_backward": False, "max_unroll": 1})

from ..sim.enums import BodyFlags, ShapeFlags

_KINEMATIC = int(BodyFlags.KINEMATIC)


def grid_dim(device, n: int) -> int:
    """Thread count for a grid-stride launch over at most ``n`` items."""
    n = max(int(n), 1)
    return min(n, 64) if device.is_cpu else min(n, 1 << 18)


@wp.func
def groups_collide(ga: int, gb: int):
    if ga == 0 or gb == 0:
        return False
    if ga > 0:
        return ga == gb or gb < 0
    return ga != gb


@wp.func
def is_filtered(a: int, b: int, filter_pairs: wp.array(dtype=wp.vec2i), num_filter: int):
    lo = int(0)
    hi = num_filter
    while lo < hi:
        mid = (lo + hi) // 2
        p = filter_pairs[mid]
        if p[0] < a or (p[0] == a and p[1] < b):
            lo = mid + 1
        else:
            hi = mid
    if lo < num_filter:
        p = filter_pairs[lo]
        return p[0] == a and p[1] == b
    return False


@wp.func
def body_pair_ok(a: int, b: int, shape_body: wp.array(dtype=int), body_flags: wp.array(dtype=int),
                 include_static_kinematic: int):  # fmt: skip
    if shape_body.shape[0] == 0:
        return True
    ba = shape_body[a]
    bb = shape_body[b]
    if ba < 0 and bb < 0:
        return False
    if ba == bb:
        return False
    if include_static_kinematic == 0:
        fixed_a = ba < 0
        fixed_b = bb < 0
        if ba >= 0 and body_flags.shape[0] > 0:
            fixed_a = (body_flags[ba] & _KINEMATIC) != 0
        if bb >= 0 and body_flags.shape[0] > 0:
            fixed_b = (body_flags[bb] & _KINEMATIC) != 0
        if fixed_a and fixed_b:
            return False
    return True


@wp.func
def aabb_overlap(a: int, b: int, lower: wp.array(dtype=wp.vec3), upper: wp.array(dtype=wp.vec3),
                 gap: wp.array(dtype=float), displacement: wp.array(dtype=wp.vec3)):  # fmt: skip
    la = lower[a]
    ua = upper[a]
    lb = lower[b]
    ub = upper[b]
    if gap.shape[0] > 0:
        ga = wp.vec3(gap[a])
        gb = wp.vec3(gap[b])
        la = la - ga
        ua = ua + ga
        lb = lb - gb
        ub = ub + gb
    if displacement.shape[0] > 0:
        # swept AABBs over the collision-update interval
        da = displacement[a]
        db = displacement[b]
        la = wp.vec3(wp.min(la[0], la[0] + da[0]), wp.min(la[1], la[1] + da[1]), wp.min(la[2], la[2] + da[2]))
        ua = wp.vec3(wp.max(ua[0], ua[0] + da[0]), wp.max(ua[1], ua[1] + da[1]), wp.max(ua[2], ua[2] + da[2]))
        lb = wp.vec3(wp.min(lb[0], lb[0] + db[0]), wp.min(lb[1], lb[1] + db[1]), wp.min(lb[2], lb[2] + db[2]))
        ub = wp.vec3(wp.max(ub[0], ub[0] + db[0]), wp.max(ub[1], ub[1] + db[1]), wp.max(ub[2], ub[2] + db[2]))
    return la[0] <= ub[0] and lb[0] <= ua[0] and la[1] <= ub[1] and lb[1] <= ua[1] and la[2] <= ub[2] and lb[2] <= ua[2]


@wp.func
def emit_pair(a: int, b: int, candidate_pair: wp.array(dtype=wp.vec2i), candidate_pair_count: wp.array(dtype=int)):
    idx = wp.atomic_add(candidate_pair_count, 0, 1)
    if idx < candidate_pair.shape[0]:
        if a < b:
            candidate_pair[idx] = wp.vec2i(a, b)
        else:
            candidate_pair[idx] = wp.vec2i(b, a)


@wp.func
def test_pair(a: int, b: int, lower: wp.array(dtype=wp.vec3), upper: wp.array(dtype=wp.vec3),
              gap: wp.array(dtype=float), group: wp.array(dtype=int), world: wp.array(dtype=int),
              filter_pairs: wp.array(dtype=wp.vec2i), num_filter: int, shape_body: wp.array(dtype=int),
              body_flags: wp.array(dtype=int), include_static_kinematic: int,
              displacement: wp.array(dtype=wp.vec3)):  # fmt: skip
    wa = world[a]
    wb = world[b]
    if wa != wb and wa >= 0 and wb >= 0:
        return False
    if not groups_collide(group[a], group[b]):
        return False
    if not body_pair_ok(a, b, shape_body, body_flags, include_static_kinematic):
        return False
    if not aabb_overlap(a, b, lower, upper, gap, displacement):
        return False
    if num_filter > 0:
        if is_filtered(wp.min(a, b), wp.max(a, b), filter_pairs, num_filter):
            return False
    return True


@wp.kernel
def _explicit_kernel(lower: wp.array(dtype=wp.vec3), upper: wp.array(dtype=wp.vec3), gap: wp.array(dtype=float),
                     pairs: wp.array(dtype=wp.vec2i), pair_count: int, shape_body: wp.array(dtype=int),
                     body_flags: wp.array(dtype=int), include_static_kinematic: int,
                     displacement: wp.array(dtype=wp.vec3), candidate_pair: wp.array(dtype=wp.vec2i),
                     candidate_pair_count: wp.array(dtype=int), stride: int):  # fmt: skip
    tid = wp.tid()
    i = tid
    while i < pair_count:
        p = pairs[i]
        if body_pair_ok(p[0], p[1], shape_body, body_flags, include_static_kinematic):
            if aabb_overlap(p[0], p[1], lower, upper, gap, displacement):
                emit_pair(p[0], p[1], candidate_pair, candidate_pair_count)
        i += stride


@wp.func
def segment_of(e: int, seg_start: wp.array(dtype=int)):
    lo = int(0)
    hi = seg_start.shape[0] - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if seg_start[mid] <= e:
            lo = mid
        else:
            hi = mid
    return lo


@wp.kernel
def _nxn_kernel(elems: wp.array(dtype=int), seg_start: wp.array(dtype=int), seg_global_start: wp.array(dtype=int),
                count: int, lower: wp.array(dtype=wp.vec3), upper: wp.array(dtype=wp.vec3),
                gap: wp.array(dtype=float), group: wp.array(dtype=int), world: wp.array(dtype=int),
                filter_pairs: wp.array(dtype=wp.vec2i), num_filter: int, shape_body: wp.array(dtype=int),
                body_flags: wp.array(dtype=int), include_static_kinematic: int,
                displacement: wp.array(dtype=wp.vec3), candidate_pair: wp.array(dtype=wp.vec2i),
                candidate_pair_count: wp.array(dtype=int), stride: int):  # fmt: skip
    tid = wp.tid()
    e = tid
    while e < count:
        s = segment_of(e, seg_start)
        end = seg_start[s + 1]
        gstart = seg_global_start[s]
        a = elems[e]
        for f in range(e + 1, end):
            if e >= gstart and f >= gstart:
                break  # global-global pairs are handled by their own segment
            b = elems[f]
            if test_pair(a, b, lower, upper, gap, group, world, filter_pairs, num_filter, shape_body, body_flags,
                         include_static_kinematic, displacement):  # fmt: skip
                emit_pair(a, b, candidate_pair, candidate_pair_count)
        e += stride


@wp.kernel
def _sap_keys_kernel(elems: wp.array(dtype=int), count: int, lower: wp.array(dtype=wp.vec3),
                     gap: wp.array(dtype=float), displacement: wp.array(dtype=wp.vec3),
                     keys: wp.array(dtype=float), values: wp.array(dtype=int), stride: int):  # fmt: skip
    tid = wp.tid()
    e = tid
    while e < count:
        a = elems[e]
        x = lower[a][0]
        if gap.shape[0] > 0:
            x = x - gap[a]
        if displacement.shape[0] > 0:
            x = wp.min(x, x + displacement[a][0])
        keys[e] = x
        values[e] = e
        e += stride


@wp.kernel
def _sap_sweep_kernel(elems: wp.array(dtype=int), seg_start: wp.array(dtype=int),
                      seg_global_start: wp.array(dtype=int), count: int, keys: wp.array(dtype=float),
                      order: wp.array(dtype=int), lower: wp.array(dtype=wp.vec3), upper: wp.array(dtype=wp.vec3),
                      gap: wp.array(dtype=float), group: wp.array(dtype=int), world: wp.array(dtype=int),
                      filter_pairs: wp.array(dtype=wp.vec2i), num_filter: int, shape_body: wp.array(dtype=int),
                      body_flags: wp.array(dtype=int), include_static_kinematic: int,
                      displacement: wp.array(dtype=wp.vec3), candidate_pair: wp.array(dtype=wp.vec2i),
                      candidate_pair_count: wp.array(dtype=int), stride: int, lanes: int):  # fmt: skip
    tid = wp.tid()
    item = tid
    while item < count * lanes:
        k = item // lanes
        lane = item - k * lanes
        item += stride
        s = segment_of(k, seg_start)
        end = seg_start[s + 1]
        gstart = seg_global_start[s]
        ea = order[k]
        a = elems[ea]
        ua = upper[a][0]
        if gap.shape[0] > 0:
            ua = ua + gap[a]
        if displacement.shape[0] > 0:
            ua = wp.max(ua, ua + displacement[a][0])
        for m in range(k + 1 + lane, end, lanes):
            if keys[m] > ua:
                break
            eb = order[m]
            if ea >= gstart and eb >= gstart:
                continue
            b = elems[eb]
            if test_pair(a, b, lower, upper, gap, group, world, filter_pairs, num_filter, shape_body, body_flags,
                         include_static_kinematic, displacement):  # fmt: skip
                emit_pair(a, b, candidate_pair, candidate_pair_count)


def _as_numpy(a):
    if a is None:
        return None
    if isinstance(a, wp.array):
        return a.numpy()
    return np.asarray(a)


def _segments(shape_world, shape_flags):
    """Per-world element lists: [world shapes..., global shapes...] per world, then the globals alone."""
    world = _as_numpy(shape_world).astype(np.int64)
    n = len(world)
    active = np.ones(n, dtype=bool)
    if shape_flags is not None:
        active = (_as_numpy(shape_flags).astype(np.int64) & int(ShapeFlags.COLLIDE_SHAPES)) != 0
    glob = np.nonzero(active & (world < 0))[0]
    elems, starts, gstarts = [], [0], []
    for w in np.unique(world[active & (world >= 0)]):
        local = np.nonzero(active & (world == w))[0]
        gstarts.append(starts[-1] + len(local))
        elems.append(np.concatenate([local, glob]))
        starts.append(starts[-1] + len(local) + len(glob))
    if len(glob) > 1:
        elems.append(glob)
        gstarts.append(starts[-1] + len(glob) + 1)  # never reached: all pairs allowed
        starts.append(starts[-1] + len(glob))
    if not elems:
        return np.zeros(0, np.int32), np.zeros(1, np.int32), np.zeros(0, np.int32)
    return (np.concatenate(elems).astype(np.int32), np.asarray(starts, np.int32), np.asarray(gstarts, np.int32))


def _empty(dtype, device):
    return wp.empty(0, dtype=dtype, device=device)


class _BroadPhaseBase:
    def _empty(self, dtype, device):
        """A zero-length array of ``dtype`` on ``device``, made once per broad phase (stable
        identity, so recorded launches that take it are replayed rather than re-recorded)."""
        cache = self.__dict__.setdefault("_empties", {})
        key = (dtype, str(device))
        a = cache.get(key)
        if a is None:
            a = cache[key] = _empty(dtype, device)
        return a

    def _launch(self, kernel, dim, inputs, device) -> None:
        """``wp.launch`` through this broad phase's :class:`~armillary.launch.LaunchCache`."""
        cache = self.__dict__.get("_launch_cache")
        if cache is None:
            cache = self.__dict__["_launch_cache"] = LaunchCache(max_entries=8)
        cache.launch(kernel, dim, inputs, device=device)

    def _common(self, shape_lower, device, filter_pairs, num_filter_pairs, shape_body, body_flags, shape_gap,
                shape_displacement):  # fmt: skip
        dev = wp.get_device(device) if device is not None else shape_lower.device
        if filter_pairs is None:
            filter_pairs = self._empty(wp.vec2i, dev)
            num_filter_pairs = 0
        elif num_filter_pairs is None:
            num_filter_pairs = int(filter_pairs.shape[0])
        if shape_body is None:
            shape_body = self._empty(int, dev)
        if body_flags is None:
            body_flags = self._empty(int, dev)
        if shape_gap is None:
            shape_gap = self._empty(float, dev)
        if shape_displacement is None:
            shape_displacement = self._empty(wp.vec3, dev)
        return dev, filter_pairs, int(num_filter_pairs), shape_body, body_flags, shape_gap, shape_displacement


class BroadPhaseAllPairs(_BroadPhaseBase):
    """All-pairs O(N^2) AABB broad phase, one row of a world's pair triangle per thread."""

    def __init__(self, shape_world, shape_flags=None, device=None):
        if device is None:
            device = shape_world.device if isinstance(shape_world, wp.array) else "cpu"
        self.device = wp.get_device(device)
        elems, starts, gstarts = _segments(shape_world, shape_flags)
        self.elem_count = int(len(elems))
        self._elems = wp.array(elems, dtype=int, device=self.device)
        self._seg_start = wp.array(starts, dtype=int, device=self.device)
        self._seg_global_start = wp.array(gstarts, dtype=int, device=self.device)
        sizes = np.diff(starts).astype(np.int64)
        self.max_pair_count = int((sizes * (sizes - 1) // 2).sum())

    def launch(self, shape_lower, shape_upper, shape_gap, shape_collision_group, shape_world, shape_count,
               candidate_pair, candidate_pair_count, device=None, filter_pairs=None, num_filter_pairs=None,
               skip_count_zero=False, *, shape_body=None, body_flags=None, include_static_kinematic_pairs=True,
               shape_displacement=None):  # fmt: skip
        """Write the overlapping, unfiltered pairs ``(i, j)``, ``i < j`` into ``candidate_pair``."""
        dev, fp, nf, sb, bf, gap, disp = self._common(shape_lower, device, filter_pairs, num_filter_pairs,
                                                      shape_body, body_flags, shape_gap, shape_displacement)  # fmt: skip
        if not skip_count_zero:
            candidate_pair_count.zero_()
        if self.elem_count == 0:
            return
        dim = grid_dim(dev, self.elem_count)
        self._launch(_nxn_kernel, dim,
                  [self._elems, self._seg_start, self._seg_global_start, self.elem_count, shape_lower,
                          shape_upper, gap, shape_collision_group, shape_world, fp, nf, sb, bf,
                          int(bool(include_static_kinematic_pairs)), disp, candidate_pair, candidate_pair_count, dim],
                  dev)  # fmt: skip


class BroadPhaseSAP(_BroadPhaseBase):
    """Sweep and prune along world x, per world (segmented sort of the AABB lower bounds)."""

    def __init__(self, shape_world, shape_flags=None, sweep_thread_count_multiplier: int = 5,
                 sort_type: str = "segmented", tile_block_dim: int | None = None, device=None):  # fmt: skip
        if sort_type not in ("segmented", "tile", "auto"):
            raise ValueError(f"BroadPhaseSAP: sort_type={sort_type!r} must be 'segmented', 'tile' or 'auto'")
        if int(sweep_thread_count_multiplier) < 1:
            raise ValueError("BroadPhaseSAP: sweep_thread_count_multiplier must be >= 1")
        if device is None:
            device = shape_world.device if isinstance(shape_world, wp.array) else "cpu"
        self.device = wp.get_device(device)
        # every sort_type sorts each world's segment (one segment: plain radix sort); the
        # multiplier sets how many GPU threads sweep the neighbours of one element.
        self.sort_type = sort_type
        self.tile_block_dim = tile_block_dim
        self.sweep_thread_count_multiplier = int(sweep_thread_count_multiplier)
        elems, starts, gstarts = _segments(shape_world, shape_flags)
        self.elem_count = n = int(len(elems))
        self._elems = wp.array(elems, dtype=int, device=self.device)
        self._seg_start = wp.array(starts, dtype=int, device=self.device)
        self._seg_global_start = wp.array(gstarts, dtype=int, device=self.device)
        self._seg_begin = wp.array(starts[:-1], dtype=int, device=self.device)
        self._seg_end = wp.array(starts[1:], dtype=int, device=self.device)
        self._segments = len(starts) - 1
        self._keys = wp.zeros(2 * max(n, 1), dtype=float, device=self.device)
        self._values = wp.zeros(2 * max(n, 1), dtype=int, device=self.device)
        sizes = np.diff(starts).astype(np.int64)
        self.max_pair_count = int((sizes * (sizes - 1) // 2).sum())

    def launch(self, shape_lower, shape_upper, shape_gap, shape_collision_group, shape_world, shape_count,
               candidate_pair, candidate_pair_count, device=None, filter_pairs=None, num_filter_pairs=None,
               skip_count_zero=False, *, shape_body=None, body_flags=None, include_static_kinematic_pairs=True,
               shape_displacement=None, sort_axis_displacement_limit=None):  # fmt: skip
        """Write the overlapping, unfiltered pairs ``(i, j)``, ``i < j`` into ``candidate_pair``.

        ``sort_axis_displacement_limit`` is accepted for interface compatibility; the swept
        bounds used for sorting are never capped here, so no pair is missed.
        """
        dev, fp, nf, sb, bf, gap, disp = self._common(shape_lower, device, filter_pairs, num_filter_pairs,
                                                      shape_body, body_flags, shape_gap, shape_displacement)  # fmt: skip
        if sort_axis_displacement_limit is not None and float(sort_axis_displacement_limit) < 0.0:
            raise ValueError("BroadPhaseSAP.launch: sort_axis_displacement_limit must be >= 0")
        if not skip_count_zero:
            candidate_pair_count.zero_()
        n = self.elem_count
        if n == 0:
            return
        dim = grid_dim(dev, n)
        self._launch(_sap_keys_kernel, dim, [self._elems, n, shape_lower, gap, disp, self._keys, self._values, dim],
                  dev)  # fmt: skip
        if dev.is_cpu:
            # one serial kernel (stable, same order as the radix sorts below): Warp's generic CPU
            # sorts cost ~90 us even for a few dozen keys (:mod:`.host_sort`)
            self._launch(sort_f32_segments_kernel, 1, [self._keys, self._values, n, self._seg_begin, self._seg_end],
                         dev)  # fmt: skip
        elif self._segments == 1:
            wp.utils.radix_sort_pairs(self._keys, self._values, n)
        else:
            wp.utils.segmented_sort_pairs(self._keys, self._values, n, self._seg_begin, self._seg_end)
        lanes = 1 if dev.is_cpu else self.sweep_thread_count_multiplier
        dim = grid_dim(dev, n * lanes)
        self._launch(_sap_sweep_kernel, dim,
                  [self._elems, self._seg_start, self._seg_global_start, n, self._keys, self._values,
                          shape_lower, shape_upper, gap, shape_collision_group, shape_world, fp, nf, sb, bf,
                          int(bool(include_static_kinematic_pairs)), disp, candidate_pair, candidate_pair_count, dim, lanes],
                  dev)  # fmt: skip


class BroadPhaseExplicit(_BroadPhaseBase):
    """Tests a precomputed list of shape pairs against their AABBs."""

    def launch(self, shape_lower, shape_upper, shape_gap, shape_pairs, shape_pair_count, candidate_pair,
               candidate_pair_count, device=None, skip_count_zero=False, *, shape_body=None, body_flags=None,
               include_static_kinematic_pairs=True, shape_displacement=None):  # fmt: skip
        """Write the pairs of ``shape_pairs[:shape_pair_count]`` whose AABBs overlap into ``candidate_pair``."""
        dev, _fp, _nf, sb, bf, gap, disp = self._common(shape_lower, device, None, None, shape_body, body_flags,
                                                        shape_gap, shape_displacement)  # fmt: skip
        if not skip_count_zero:
            candidate_pair_count.zero_()
        n = int(shape_pair_count)
        if n == 0:
            return
        dim = grid_dim(dev, n)
        self._launch(_explicit_kernel, dim,
                  [shape_lower, shape_upper, gap, shape_pairs, n, sb, bf,
                          int(bool(include_static_kinematic_pairs)), disp, candidate_pair, candidate_pair_count, dim],
                  dev)  # fmt: skip

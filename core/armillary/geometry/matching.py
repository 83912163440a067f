"""Frame-to-frame rigid-contact matching ("latest" / "sticky") and contact reports.

:class:`ContactMatcher` keeps the previous frame's sorted contacts (pair key, world-space
midpoint, normal, owning world and, in sticky mode, the body-frame points and offsets) and,
after the deterministic sort of each :meth:`CollisionPipeline.collide`, writes
``rigid_contact_match_index``:

* ``>= 0``: index of the matched contact in the previous frame's sorted buffer;
* ``-1``: no previous contact of the same shape pair (a genuinely new contact);
* ``-2``: the shape pair had previous contacts but none passed the thresholds (broken).

A current contact matches the previous contact of the same ``(shape0, shape1)`` pair whose
world midpoint ``0.5 * (world(point0) + world(point1))`` is closest, among those within
``pos_threshold`` and with ``dot(n_old, n_new) >= normal_dot_threshold`` (ties go to the
lowest previous index). Candidates are found by binary search over the previous sorted pair
keys, so every step is a fixed-size grid-stride kernel: no host sync, graph-capturable and
deterministic. Sticky mode then replays the saved body-frame points, offsets and normal of
each matched contact, unless either saved witness point, moved with the current body
transforms, lies farther than ``pos_threshold`` from the fresh one. Contact reports compact
the new (``match_index < 0``) and broken (previous contacts nobody matched) indices with one
exclusive scan, so both lists are in ascending order.
"""

from __future__ import annotations

import warp as wp

wp.set_module_options({"enable_backward": False, "max_unroll": 1})

from .broad_phase import grid_dim

#: match-index codes
MATCH_NONE = -1
MATCH_BROKEN = -2

_FLAG_FREE = wp.constant(0)
_FLAG_MATCHED = wp.constant(1)
_FLAG_DROPPED = wp.constant(2)


@wp.func
def _body_X(shape: int, shape_body: wp.array(dtype=int), body_q: wp.array(dtype=wp.transform)):
    b = shape_body[shape]
    if b >= 0:
        return body_q[b]
    return wp.transform_identity()


@wp.func
def _mask_slot(s: int, shape_world: wp.array(dtype=int), world_count: int):
    w = shape_world[s]
    if w < 0:
        w = world_count  # global shapes: last entry of the world mask
    return w


@wp.kernel
def _drop_masked_kernel(
    prev_count: wp.array(dtype=int),
    prev_world: wp.array(dtype=wp.vec2i),
    world_reset: wp.array(dtype=int),
    prev_flag: wp.array(dtype=int),
    stride: int,
):
    j = wp.tid()
    n = prev_count[0]
    while j < n:
        w = prev_world[j]
        if world_reset[w[0]] != 0 or world_reset[w[1]] != 0:
            prev_flag[j] = _FLAG_DROPPED
        j += stride


@wp.kernel
def _match_kernel(
    count: wp.array(dtype=int),
    shape0: wp.array(dtype=int),
    shape1: wp.array(dtype=int),
    point0: wp.array(dtype=wp.vec3),
    point1: wp.array(dtype=wp.vec3),
    normal: wp.array(dtype=wp.vec3),
    shape_body: wp.array(dtype=int),
    body_q: wp.array(dtype=wp.transform),
    shape_count: int,
    prev_count: wp.array(dtype=int),
    prev_pair: wp.array(dtype=wp.int64),
    prev_mid: wp.array(dtype=wp.vec3),
    prev_normal: wp.array(dtype=wp.vec3),
    prev_flag: wp.array(dtype=int),
    pos_threshold: float,
    dot_threshold: float,
    match_index: wp.array(dtype=int),
    stride: int,
):
    i = wp.tid()
    n = count[0]
    pn = prev_count[0]
    while i < match_index.shape[0]:
        if i >= n:
            match_index[i] = -1
        else:
            s0 = shape0[i]
            s1 = shape1[i]
            key = wp.int64(s0) * wp.int64(shape_count) + wp.int64(s1)
            # lower bound of key in prev_pair[0:pn]
            lo = int(0)
            hi = pn
            while lo < hi:
                mid = (lo + hi) // 2
                if prev_pair[mid] < key:
                    lo = mid + 1
                else:
                    hi = mid
            m = wp.transform_point(_body_X(s0, shape_body, body_q), point0[i])
            m = 0.5 * (m + wp.transform_point(_body_X(s1, shape_body, body_q), point1[i]))
            nrm = normal[i]
            best = int(-1)
            best_d = float(0.0)
            seen = int(0)
            j = lo
            while j < pn:
                if prev_pair[j] != key:
                    break
                if prev_flag[j] != _FLAG_DROPPED:
                    seen = 1
                    d = wp.length(m - prev_mid[j])
                    if d <= pos_threshold and wp.dot(nrm, prev_normal[j]) >= dot_threshold:
                        if best < 0 or d < best_d:
                            best = j
                            best_d = d
                j += 1
            if best >= 0:
                match_index[i] = best
                prev_flag[best] = _FLAG_MATCHED
            elif seen != 0:
                match_index[i] = -2
            else:
                match_index[i] = -1
        i += stride


@wp.kernel
def _sticky_kernel(
    count: wp.array(dtype=int),
    shape0: wp.array(dtype=int),
    shape1: wp.array(dtype=int),
    match_index: wp.array(dtype=int),
    shape_body: wp.array(dtype=int),
    body_q: wp.array(dtype=wp.transform),
    pos_threshold: float,
    prev_point0: wp.array(dtype=wp.vec3),
    prev_point1: wp.array(dtype=wp.vec3),
    prev_offset0: wp.array(dtype=wp.vec3),
    prev_offset1: wp.array(dtype=wp.vec3),
    prev_normal: wp.array(dtype=wp.vec3),
    point0: wp.array(dtype=wp.vec3),
    point1: wp.array(dtype=wp.vec3),
    offset0: wp.array(dtype=wp.vec3),
    offset1: wp.array(dtype=wp.vec3),
    normal: wp.array(dtype=wp.vec3),
    stride: int,
):
    i = wp.tid()
    n = count[0]
    while i < n:
        j = match_index[i]
        if j >= 0:
            X0 = _body_X(shape0[i], shape_body, body_q)
            X1 = _body_X(shape1[i], shape_body, body_q)
            d0 = wp.length(wp.transform_point(X0, prev_point0[j]) - wp.transform_point(X0, point0[i]))
            d1 = wp.length(wp.transform_point(X1, prev_point1[j]) - wp.transform_point(X1, point1[i]))
            if d0 <= pos_threshold and d1 <= pos_threshold:
                point0[i] = prev_point0[j]
                point1[i] = prev_point1[j]
                offset0[i] = prev_offset0[j]
                offset1[i] = prev_offset1[j]
                normal[i] = prev_normal[j]
        i += stride


@wp.kernel
def _report_flags_kernel(
    count: wp.array(dtype=int),
    match_index: wp.array(dtype=int),
    prev_count: wp.array(dtype=int),
    prev_flag: wp.array(dtype=int),
    cap: int,
    flags: wp.array(dtype=int),
    stride: int,
):
    # flags[0:cap]: current contact i is new; flags[cap:2cap]: previous contact j is broken
    k = wp.tid()
    n = count[0]
    pn = prev_count[0]
    while k < 2 * cap:
        f = int(0)
        if k < cap:
            if k < n:
                if match_index[k] < 0:
                    f = 1
        else:
            j = k - cap
            if j < pn:
                if prev_flag[j] == _FLAG_FREE:
                    f = 1
        flags[k] = f
        k += stride


@wp.kernel
def _report_scatter_kernel(
    flags: wp.array(dtype=int),
    scan: wp.array(dtype=int),
    cap: int,
    new_indices: wp.array(dtype=int),
    new_count: wp.array(dtype=int),
    broken_indices: wp.array(dtype=int),
    broken_count: wp.array(dtype=int),
    stride: int,
):
    k = wp.tid()
    base = scan[cap]
    if k == 0:
        new_count[0] = base
        broken_count[0] = scan[2 * cap - 1] + flags[2 * cap - 1] - base
    while k < 2 * cap:
        if flags[k] != 0:
            if k < cap:
                new_indices[scan[k]] = k
            else:
                broken_indices[scan[k] - base] = k - cap
        k += stride


@wp.kernel
def _save_kernel(
    count: wp.array(dtype=int),
    shape0: wp.array(dtype=int),
    shape1: wp.array(dtype=int),
    point0: wp.array(dtype=wp.vec3),
    point1: wp.array(dtype=wp.vec3),
    offset0: wp.array(dtype=wp.vec3),
    offset1: wp.array(dtype=wp.vec3),
    normal: wp.array(dtype=wp.vec3),
    shape_body: wp.array(dtype=int),
    body_q: wp.array(dtype=wp.transform),
    shape_world: wp.array(dtype=int),
    shape_count: int,
    world_count: int,
    sticky: int,
    prev_count: wp.array(dtype=int),
    prev_pair: wp.array(dtype=wp.int64),
    prev_mid: wp.array(dtype=wp.vec3),
    prev_normal: wp.array(dtype=wp.vec3),
    prev_world: wp.array(dtype=wp.vec2i),
    prev_flag: wp.array(dtype=int),
    prev_point0: wp.array(dtype=wp.vec3),
    prev_point1: wp.array(dtype=wp.vec3),
    prev_offset0: wp.array(dtype=wp.vec3),
    prev_offset1: wp.array(dtype=wp.vec3),
    world_reset: wp.array(dtype=int),
    stride: int,
):
    i = wp.tid()
    n = wp.min(count[0], prev_pair.shape[0])
    if i == 0:
        prev_count[0] = n
    k = i
    while k < world_reset.shape[0]:
        world_reset[k] = 0
        k += stride
    while i < prev_pair.shape[0]:
        prev_flag[i] = _FLAG_FREE
        if i < n:
            s0 = shape0[i]
            s1 = shape1[i]
            prev_pair[i] = wp.int64(s0) * wp.int64(shape_count) + wp.int64(s1)
            p0 = wp.transform_point(_body_X(s0, shape_body, body_q), point0[i])
            p1 = wp.transform_point(_body_X(s1, shape_body, body_q), point1[i])
            prev_mid[i] = 0.5 * (p0 + p1)
            prev_normal[i] = normal[i]
            prev_world[i] = wp.vec2i(_mask_slot(s0, shape_world, world_count), _mask_slot(s1, shape_world, world_count))
            if sticky != 0:
                prev_point0[i] = point0[i]
                prev_point1[i] = point1[i]
                prev_offset0[i] = offset0[i]
                prev_offset1[i] = offset1[i]
        i += stride


@wp.kernel
def _accumulate_mask_kernel(mask: wp.array(dtype=wp.bool), world_reset: wp.array(dtype=int)):
    w = wp.tid()
    if mask[w]:
        world_reset[w] = 1


class ContactMatcher:
    """Previous-frame contact history and the matching/report launches of one pipeline."""

    def __init__(self, model, capacity: int, mode: str, pos_threshold: float, normal_dot_threshold: float,
                 report: bool, device):  # fmt: skip
        self.mode = mode
        self.sticky = mode == "sticky"
        self.report = bool(report)
        self.pos_threshold = float(pos_threshold)
        self.normal_dot_threshold = float(normal_dot_threshold)
        self.capacity = cap = max(int(capacity), 1)
        self.device = device
        self.shape_count = int(model.shape_count)
        self.world_count = int(getattr(model, "world_count", 1) or 1)
        with wp.ScopedDevice(device):
            self.prev_count = wp.zeros(1, dtype=int)
            self.prev_pair = wp.zeros(cap, dtype=wp.int64)
            self.prev_mid = wp.zeros(cap, dtype=wp.vec3)
            self.prev_normal = wp.zeros(cap, dtype=wp.vec3)
            self.prev_world = wp.zeros(cap, dtype=wp.vec2i)
            self.prev_flag = wp.zeros(cap, dtype=int)
            self.world_reset = wp.zeros(self.world_count + 1, dtype=int)
            ps = cap if self.sticky else 0
            self.prev_point0 = wp.zeros(ps, dtype=wp.vec3)
            self.prev_point1 = wp.zeros(ps, dtype=wp.vec3)
            self.prev_offset0 = wp.zeros(ps, dtype=wp.vec3)
            self.prev_offset1 = wp.zeros(ps, dtype=wp.vec3)
            if self.report:
                self.flags = wp.zeros(2 * cap, dtype=int)
                self.scan = wp.zeros(2 * cap, dtype=int)

    def reset(self, world_mask=None) -> None:
        """Forget all history now, or (with a bool mask of ``world_count + 1`` entries, the last
        one selecting global shapes) drop, at the next match, the history of every contact with a
        shape in a selected world."""
        if world_mask is None:
            self.prev_count.zero_()
            self.world_reset.zero_()
            return
        if not isinstance(world_mask, wp.array) or world_mask.dtype != wp.bool or world_mask.ndim != 1:
            raise TypeError("reset_contact_matching: world_mask must be a one-dimensional wp.array of wp.bool")
        if world_mask.shape[0] != self.world_count + 1:
            raise ValueError(f"reset_contact_matching: world_mask has shape {world_mask.shape}, expected "
                             f"({self.world_count + 1},)")  # fmt: skip
        if world_mask.device != self.device:
            raise ValueError(f"reset_contact_matching: world_mask is on {world_mask.device}, expected {self.device}")
        wp.launch(_accumulate_mask_kernel, dim=self.world_count + 1, inputs=[world_mask, self.world_reset],
                  device=self.device, record_tape=False)  # fmt: skip

    def run(self, model, contacts, body_q) -> None:
        """Match ``contacts`` (sorted) against the history, replay (sticky), report, then save."""
        dev, cap = self.device, self.capacity
        c = contacts
        if c.rigid_contact_match_index is None:
            raise ValueError("CollisionPipeline.collide: contact matching is enabled but the contacts buffer has no "
                             "rigid_contact_match_index; allocate it with pipeline.contacts()")  # fmt: skip
        if self.report and c.rigid_contact_new_indices is None:
            raise ValueError("CollisionPipeline.collide: contact_report=True but the contacts buffer has no report "
                             "arrays; allocate it with pipeline.contacts()")  # fmt: skip
        pdim = grid_dim(dev, cap)
        wp.launch(_drop_masked_kernel, dim=pdim,
                  inputs=[self.prev_count, self.prev_world, self.world_reset, self.prev_flag, pdim],
                  device=dev, record_tape=False)  # fmt: skip
        mdim = grid_dim(dev, c.rigid_contact_match_index.shape[0])
        wp.launch(_match_kernel, dim=mdim,
                  inputs=[c.rigid_contact_count, c.rigid_contact_shape0, c.rigid_contact_shape1, c.rigid_contact_point0,
                          c.rigid_contact_point1, c.rigid_contact_normal, model.shape_body, body_q, self.shape_count,
                          self.prev_count, self.prev_pair, self.prev_mid, self.prev_normal, self.prev_flag,
                          self.pos_threshold, self.normal_dot_threshold, c.rigid_contact_match_index, mdim],
                  device=dev, record_tape=False)  # fmt: skip
        if self.sticky:
            wp.launch(_sticky_kernel, dim=pdim,
                      inputs=[c.rigid_contact_count, c.rigid_contact_shape0, c.rigid_contact_shape1,
                              c.rigid_contact_match_index, model.shape_body, body_q, self.pos_threshold,
                              self.prev_point0, self.prev_point1, self.prev_offset0, self.prev_offset1,
                              self.prev_normal, c.rigid_contact_point0, c.rigid_contact_point1,
                              c.rigid_contact_offset0, c.rigid_contact_offset1, c.rigid_contact_normal, pdim],
                      device=dev, record_tape=False)  # fmt: skip
        if self.report:
            rdim = grid_dim(dev, 2 * cap)
            wp.launch(_report_flags_kernel, dim=rdim,
                      inputs=[c.rigid_contact_count, c.rigid_contact_match_index, self.prev_count, self.prev_flag,
                              cap, self.flags, rdim],
                      device=dev, record_tape=False)  # fmt: skip
            wp.utils.array_scan(self.flags, self.scan, inclusive=False)
            wp.launch(_report_scatter_kernel, dim=rdim,
                      inputs=[self.flags, self.scan, cap, c.rigid_contact_new_indices, c.rigid_contact_new_count,
                              c.rigid_contact_broken_indices, c.rigid_contact_broken_count, rdim],
                      device=dev, record_tape=False)  # fmt: skip
        wp.launch(_save_kernel, dim=pdim,
                  inputs=[c.rigid_contact_count, c.rigid_contact_shape0, c.rigid_contact_shape1, c.rigid_contact_point0,
                          c.rigid_contact_point1, c.rigid_contact_offset0, c.rigid_contact_offset1,
                          c.rigid_contact_normal, model.shape_body, body_q, model.shape_world, self.shape_count,
                          self.world_count, int(self.sticky), self.prev_count, self.prev_pair, self.prev_mid,
                          self.prev_normal, self.prev_world, self.prev_flag, self.prev_point0, self.prev_point1,
                          self.prev_offset0, self.prev_offset1, self.world_reset, pdim],
                  device=dev, record_tape=False)  # fmt: skip

"""Serial key-value sorts for the CPU device: one kernel thread sorts (each segment of) the
arrays in place, without the fixed cost of Warp's generic CPU radix sort (about 90 us even for
65 keys), and without host synchronisation (counts are read on the device).

Both sorts are stable, so they give exactly the order of any other stable sort of the same keys
(``numpy.argsort(kind="stable")``; Warp's ``radix_sort_pairs`` / ``segmented_sort_pairs``), with
one documented exception: float keys compare as numbers, so ``-0.0`` and ``0.0`` tie (Warp's
radix sort orders ``-0.0`` first); NaN keys have no defined place.

Like Warp's sorts they need ``keys`` and ``values`` of at least ``2 * count`` entries: the second
half is scratch.

* :func:`sort_f32_segments_kernel` (SAP broad phase, ``dim=1``): float32 keys, int values, per
  segment ``[seg_begin[s], seg_end[s])``; insertion sort for short segments, a bottom-up merge
  sort (ping-pong between the segment and its scratch at ``+ n``) otherwise.
* :func:`sort_i64_count_kernel` (deterministic contact order, ``dim=1``): non-negative int64 keys
  over bits ``[begin_bit, end_bit)``, an LSD radix sort with 8-bit digits of the first
  ``min(count[0], capacity)`` entries only (the entries past the count, whose keys all hold the
  largest key, would stay after them and in their order).
"""

from __future__ import annotations

import warp as wp

wp.set_module_options({"enable_backward": False, "max_unroll": 1})

#: segments up to this length are insertion-sorted
INSERTION_MAX = wp.constant(32)
#: radix digit width [bits] and bucket count of :func:`sort_i64_count_kernel`
RADIX_BITS = 8
RADIX_BUCKETS = 1 << RADIX_BITS


@wp.func
def _insertion_f32(keys: wp.array(dtype=float), values: wp.array(dtype=int), b: int, e: int):
    for i in range(b + 1, e):
        k = keys[i]
        v = values[i]
        j = i - 1
        while j >= b and keys[j] > k:
            keys[j + 1] = keys[j]
            values[j + 1] = values[j]
            j -= 1
        keys[j + 1] = k
        values[j + 1] = v


@wp.func
def _merge_f32(keys: wp.array(dtype=float), values: wp.array(dtype=int), src: int, dst: int, lo: int, mid: int,
               hi: int):  # fmt: skip
    """Merge runs [lo, mid) and [mid, hi) (offsets relative to ``src``) into ``dst`` (stable)."""
    i = lo
    j = mid
    k = lo
    while i < mid and j < hi:
        if keys[src + j] < keys[src + i]:
            keys[dst + k] = keys[src + j]
            values[dst + k] = values[src + j]
            j += 1
        else:
            keys[dst + k] = keys[src + i]
            values[dst + k] = values[src + i]
            i += 1
        k += 1
    while i < mid:
        keys[dst + k] = keys[src + i]
        values[dst + k] = values[src + i]
        i += 1
        k += 1
    while j < hi:
        keys[dst + k] = keys[src + j]
        values[dst + k] = values[src + j]
        j += 1
        k += 1


@wp.kernel
def sort_f32_segments_kernel(keys: wp.array(dtype=float), values: wp.array(dtype=int), n: int,
                             seg_begin: wp.array(dtype=int), seg_end: wp.array(dtype=int)):  # fmt: skip
    """Stable in-place sort of every segment of ``keys[:n]`` (and ``values``); scratch ``[n, 2n)``."""
    for s in range(seg_begin.shape[0]):
        b = seg_begin[s]
        e = seg_end[s]
        m = e - b
        if m <= INSERTION_MAX:
            _insertion_f32(keys, values, b, e)
        else:
            # runs of INSERTION_MAX insertion-sorted in place, then merged pairwise, ping-pong
            r0 = int(0)
            while r0 < m:
                _insertion_f32(keys, values, b + r0, b + wp.min(r0 + INSERTION_MAX, m))
                r0 += INSERTION_MAX
            src = b
            dst = n + b
            width = int(INSERTION_MAX)
            while width < m:
                lo = int(0)
                while lo < m:
                    mid = wp.min(lo + width, m)
                    hi = wp.min(lo + 2 * width, m)
                    _merge_f32(keys, values, src, dst, lo, mid, hi)
                    lo += 2 * width
                tmp = src
                src = dst
                dst = tmp
                width *= 2
            if src != b:
                for i in range(m):
                    keys[b + i] = keys[src + i]
                    values[b + i] = values[src + i]


@wp.kernel
def sort_i64_count_kernel(keys: wp.array(dtype=wp.int64), values: wp.array(dtype=int), count: wp.array(dtype=int),
                          capacity: int, begin_bit: int, end_bit: int, hist: wp.array(dtype=int)):  # fmt: skip
    """Stable LSD radix sort of the first ``min(count[0], capacity)`` pairs by key bits
    ``[begin_bit, end_bit)``; scratch ``[capacity, 2 capacity)``, ``hist``: RADIX_BUCKETS ints."""
    cnt = wp.min(count[0], capacity)
    src = int(0)
    dst = capacity
    shift = begin_bit
    nb = hist.shape[0]
    while shift < end_bit and cnt > 1:
        width = wp.min(end_bit - shift, 8)
        mask = (wp.int64(1) << wp.int64(width)) - wp.int64(1)
        sh = wp.int64(shift)
        for d in range(nb):
            hist[d] = 0
        for i in range(cnt):
            d = int((keys[src + i] >> sh) & mask)
            hist[d] = hist[d] + 1
        # a digit shared by every key leaves the order unchanged: skip the scatter
        single = int(0)
        total = int(0)
        for d in range(nb):
            c = hist[d]
            if c == cnt:
                single = 1
            hist[d] = total
            total += c
        if single == 0:
            for i in range(cnt):
                k = keys[src + i]
                d = int((k >> sh) & mask)
                pos = hist[d]
                hist[d] = pos + 1
                keys[dst + pos] = k
                values[dst + pos] = values[src + i]
            tmp = src
            src = dst
            dst = tmp
        shift += 8
    if src != 0:
        for i in range(cnt):
            keys[i] = keys[src + i]
            values[i] = values[src + i]

"""Particle self-contact detection of SolverVBD: vertex-triangle and edge-edge candidates.

Candidates are every pair closer than ``margin + gap`` at detection time (Warp BVH queries over the
triangle and edge bounding boxes), minus pairs within ``topological_filter_threshold - 1`` rings of
each other (sharing a vertex at threshold 1, also 1-ring neighbours at 2, ...) and pairs closer than
``rest_exclusion_radius`` in the rest shape. Each vertex keeps at most ``vertex_buffer_size``
triangles, each triangle ``vertex_buffer_size`` vertices (the same pairs seen from the triangle, so
its corners can be solved without atomics), each edge ``edge_buffer_size`` edges. The solve then
repels pairs closer than ``margin`` and truncates each vertex's displacement since the last
detection to ``0.5 * bound_relaxation * (margin + gap)``, so no pair can pass undetected.
"""

from __future__ import annotations

import numpy as np
import warp as wp

from .particle_kernels import closest_params_segments, closest_point_triangle


def _csr(n: int, keys: np.ndarray, vals: np.ndarray):
    keys = np.asarray(keys, dtype=np.int64).reshape(-1)
    vals = np.asarray(vals, dtype=np.int64).reshape(-1)
    order = np.argsort(keys, kind="stable")
    off = np.zeros(n + 1, dtype=np.int32)
    np.add.at(off, keys + 1, 1)
    return np.cumsum(off).astype(np.int32), vals[order].astype(np.int32)


def _rings(n: int, edges: np.ndarray, k: int):
    """CSR of the vertices within ``k`` rings of each vertex (itself included), sorted."""
    nbrs = [set([i]) for i in range(n)]
    adj = [[] for _ in range(n)]
    for a, b in edges:
        adj[a].append(b)
        adj[b].append(a)
    for i in range(n):
        frontier = {i}
        seen = {i}
        for _ in range(max(k, 0)):
            nxt = set()
            for u in frontier:
                nxt.update(adj[u])
            nxt -= seen
            seen |= nxt
            frontier = nxt
        nbrs[i] = seen
    off = np.zeros(n + 1, dtype=np.int32)
    off[1:] = np.cumsum([len(s) for s in nbrs])
    flat = np.concatenate([np.array(sorted(s), dtype=np.int32) for s in nbrs]) if n else np.zeros(0, np.int32)
    return off, flat


@wp.func
def near(a: int, b: int, ring_off: wp.array(dtype=wp.int32), ring: wp.array(dtype=wp.int32)):
    for k in range(ring_off[a], ring_off[a + 1]):
        if ring[k] == b:
            return True
    return False


@wp.kernel
def bounds_kernel(
    x: wp.array(dtype=wp.vec3),
    tris: wp.array2d(dtype=wp.int32),
    edges: wp.array2d(dtype=wp.int32),
    tri_lo: wp.array(dtype=wp.vec3),
    tri_hi: wp.array(dtype=wp.vec3),
    edge_lo: wp.array(dtype=wp.vec3),
    edge_hi: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    if i < tris.shape[0]:
        a = x[tris[i, 0]]
        b = x[tris[i, 1]]
        c = x[tris[i, 2]]
        tri_lo[i] = wp.min(wp.min(a, b), c)
        tri_hi[i] = wp.max(wp.max(a, b), c)
    if i < edges.shape[0]:
        a = x[edges[i, 0]]
        b = x[edges[i, 1]]
        edge_lo[i] = wp.min(a, b)
        edge_hi[i] = wp.max(a, b)


@wp.kernel
def vertex_triangle_kernel(
    tri_bvh: wp.uint64,
    x: wp.array(dtype=wp.vec3),
    x_rest: wp.array(dtype=wp.vec3),
    tris: wp.array2d(dtype=wp.int32),
    radius: float,
    rest_radius: float,
    ring_off: wp.array(dtype=wp.int32),
    ring: wp.array(dtype=wp.int32),
    use_ring: int,
    vt_cap: int,
    vt_count: wp.array(dtype=wp.int32),
    vt_list: wp.array(dtype=wp.int32),
    tv_cap: int,
    tv_count: wp.array(dtype=wp.int32),
    tv_list: wp.array(dtype=wp.int32),
):
    v = wp.tid()
    xv = x[v]
    r3 = wp.vec3(radius)
    query = wp.bvh_query_aabb(tri_bvh, xv - r3, xv + r3)
    t = int(0)
    n = int(0)
    while wp.bvh_query_next(query, t):
        a = tris[t, 0]
        b = tris[t, 1]
        c = tris[t, 2]
        if a == v or b == v or c == v:
            continue
        if use_ring != 0:
            if near(v, a, ring_off, ring) or near(v, b, ring_off, ring) or near(v, c, ring_off, ring):
                continue
        bc = closest_point_triangle(xv, x[a], x[b], x[c])
        cp = bc[0] * x[a] + bc[1] * x[b] + bc[2] * x[c]
        if wp.length(xv - cp) >= radius:
            continue
        if rest_radius > 0.0:
            br = closest_point_triangle(x_rest[v], x_rest[a], x_rest[b], x_rest[c])
            cr = br[0] * x_rest[a] + br[1] * x_rest[b] + br[2] * x_rest[c]
            if wp.length(x_rest[v] - cr) < rest_radius:
                continue
        if n < vt_cap:
            vt_list[v * vt_cap + n] = t
            n += 1
            slot = wp.atomic_add(tv_count, t, 1)
            if slot < tv_cap:
                tv_list[t * tv_cap + slot] = v
    vt_count[v] = n


@wp.kernel
def edge_edge_kernel(
    edge_bvh: wp.uint64,
    x: wp.array(dtype=wp.vec3),
    x_rest: wp.array(dtype=wp.vec3),
    edges: wp.array2d(dtype=wp.int32),
    radius: float,
    rest_radius: float,
    parallel_eps: float,
    ring_off: wp.array(dtype=wp.int32),
    ring: wp.array(dtype=wp.int32),
    use_ring: int,
    ee_cap: int,
    ee_count: wp.array(dtype=wp.int32),
    ee_list: wp.array(dtype=wp.int32),
):
    e = wp.tid()
    p1 = edges[e, 0]
    q1 = edges[e, 1]
    r3 = wp.vec3(radius)
    lo = wp.min(x[p1], x[q1]) - r3
    hi = wp.max(x[p1], x[q1]) + r3
    query = wp.bvh_query_aabb(edge_bvh, lo, hi)
    e2 = int(0)
    n = int(0)
    while wp.bvh_query_next(query, e2):
        if e2 == e:
            continue
        p2 = edges[e2, 0]
        q2 = edges[e2, 1]
        if p1 == p2 or p1 == q2 or q1 == p2 or q1 == q2:
            continue
        if use_ring != 0:
            if near(p1, p2, ring_off, ring) or near(p1, q2, ring_off, ring) or near(q1, p2, ring_off, ring) or near(
                q1, q2, ring_off, ring
            ):
                continue
        st = closest_params_segments(x[p1], x[q1], x[p2], x[q2], parallel_eps)
        ca = (1.0 - st[0]) * x[p1] + st[0] * x[q1]
        cb = (1.0 - st[1]) * x[p2] + st[1] * x[q2]
        if wp.length(ca - cb) >= radius:
            continue
        if rest_radius > 0.0:
            sr = closest_params_segments(x_rest[p1], x_rest[q1], x_rest[p2], x_rest[q2], parallel_eps)
            ra = (1.0 - sr[0]) * x_rest[p1] + sr[0] * x_rest[q1]
            rb = (1.0 - sr[1]) * x_rest[p2] + sr[1] * x_rest[q2]
            if wp.length(ra - rb) < rest_radius:
                continue
        if n < ee_cap:
            ee_list[e * ee_cap + n] = e2
            n += 1
    ee_count[e] = n


class SelfContactDetector:
    """Host-side topology and device buffers of the self-contact candidate lists."""

    def __init__(self, model, cfg, device):
        self.cfg = cfg
        self.device = device
        N = int(model.particle_count)
        T = int(getattr(model, "tri_count", 0) or 0)
        tris = model.tri_indices.numpy().reshape(-1, 3).astype(np.int64) if T else np.zeros((0, 3), np.int64)
        if T:
            e = np.concatenate([tris[:, [0, 1]], tris[:, [1, 2]], tris[:, [2, 0]]])
            e = np.unique(np.sort(e, axis=1), axis=0)
        else:
            e = np.zeros((0, 2), np.int64)
        M = len(e)
        self.tri_count, self.edge_count = T, M
        # the solve indexes these with at least one row
        self.tris = wp.array(tris.astype(np.int32) if T else np.zeros((1, 3), np.int32), dtype=wp.int32,
                             device=device)  # fmt: skip
        self.edges = wp.array(e.astype(np.int32) if M else np.zeros((1, 2), np.int32), dtype=wp.int32, device=device)
        off, flat = _csr(N, tris.reshape(-1), np.arange(3 * T))
        self.adj_tri_off = wp.array(off, dtype=wp.int32, device=device)
        self.adj_tri = wp.array(np.append(flat, 0).astype(np.int32), dtype=wp.int32, device=device)
        off, flat = _csr(N, e.reshape(-1), np.arange(2 * M))
        self.adj_edge_off = wp.array(off, dtype=wp.int32, device=device)
        self.adj_edge = wp.array(np.append(flat, 0).astype(np.int32), dtype=wp.int32, device=device)
        k = int(cfg.topological_filter_threshold) - 1
        self.use_ring = 1 if k >= 1 else 0
        roff, ring = _rings(N, e, k) if self.use_ring else (np.zeros(N + 1, np.int32), np.zeros(1, np.int32))
        self.ring_off = wp.array(roff, dtype=wp.int32, device=device)
        self.ring = wp.array(np.append(ring, 0).astype(np.int32), dtype=wp.int32, device=device)
        self.x_rest = model.particle_q
        self.vt_cap = max(int(cfg.vertex_buffer_size), 1)
        self.tv_cap = self.vt_cap
        self.ee_cap = max(int(cfg.edge_buffer_size), 1)
        self.vt_count = wp.zeros(N, dtype=wp.int32, device=device)
        self.vt_list = wp.zeros(max(N * self.vt_cap, 1), dtype=wp.int32, device=device)
        self.tv_count = wp.zeros(max(T, 1), dtype=wp.int32, device=device)
        self.tv_list = wp.zeros(max(T, 1) * self.tv_cap, dtype=wp.int32, device=device)
        self.ee_count = wp.zeros(max(M, 1), dtype=wp.int32, device=device)
        self.ee_list = wp.zeros(max(M, 1) * self.ee_cap, dtype=wp.int32, device=device)
        self.x_detect = wp.zeros(N, dtype=wp.vec3, device=device)
        self.radius = float(cfg.margin + cfg.gap)
        self.bound = 0.5 * float(cfg.bound_relaxation) * self.radius
        self.tri_lo = wp.zeros(max(T, 1), dtype=wp.vec3, device=device)
        self.tri_hi = wp.zeros(max(T, 1), dtype=wp.vec3, device=device)
        self.edge_lo = wp.zeros(max(M, 1), dtype=wp.vec3, device=device)
        self.edge_hi = wp.zeros(max(M, 1), dtype=wp.vec3, device=device)
        self.tri_bvh = None
        self.edge_bvh = None
        if T:
            self._bounds(model.particle_q)
            self.tri_bvh = wp.Bvh(self.tri_lo, self.tri_hi)
            self.edge_bvh = wp.Bvh(self.edge_lo, self.edge_hi)

    def _bounds(self, x):
        n = max(self.tri_count, self.edge_count)
        if n:
            wp.launch(bounds_kernel, dim=n, inputs=[x, self.tris, self.edges],
                      outputs=[self.tri_lo, self.tri_hi, self.edge_lo, self.edge_hi], device=self.device)  # fmt: skip

    def detect(self, x) -> None:
        """Rebuild the candidate lists from positions ``x`` (no host synchronisation)."""
        wp.copy(self.x_detect, x)
        if not self.tri_count:
            return
        self._bounds(x)
        self.tri_bvh.refit()
        self.edge_bvh.refit()
        self.tv_count.zero_()
        cfg = self.cfg
        wp.launch(vertex_triangle_kernel, dim=x.shape[0],
                  inputs=[self.tri_bvh.id, x, self.x_rest, self.tris, self.radius, float(cfg.rest_exclusion_radius),
                          self.ring_off, self.ring, self.use_ring, self.vt_cap],
                  outputs=[self.vt_count, self.vt_list, self.tv_cap, self.tv_count, self.tv_list],
                  device=self.device)  # fmt: skip
        wp.launch(edge_edge_kernel, dim=self.edge_count,
                  inputs=[self.edge_bvh.id, x, self.x_rest, self.edges, self.radius, float(cfg.rest_exclusion_radius),
                          float(cfg.edge_parallel_epsilon), self.ring_off, self.ring, self.use_ring, self.ee_cap],
                  outputs=[self.ee_count, self.ee_list], device=self.device)  # fmt: skip

    def clear(self) -> None:
        self.vt_count.zero_()
        self.tv_count.zero_()
        self.ee_count.zero_()

"""Graph coloring for parallel Gauss-Seidel style solvers (VBD).

A coloring partitions the nodes so that no two nodes joined by a graph edge share a color;
all nodes of one color can then be updated in parallel. Host-side numpy / Python only.
"""

from __future__ import annotations

import enum

import numpy as np

__all__ = ["ColoringAlgorithm", "color_graph", "validate_coloring"]


class ColoringAlgorithm(enum.IntEnum):
    """Node ordering used before greedy coloring."""

    MCS = 0
    """maximum cardinality search order (usually fewer colors)."""
    GREEDY = 1
    """descending-degree order."""


def _adjacency(num_nodes: int, edges: np.ndarray) -> list[set[int]]:
    adj: list[set[int]] = [set() for _ in range(num_nodes)]
    for a, b in edges:
        a, b = int(a), int(b)
        if a == b or a < 0 or b < 0:
            continue
        adj[a].add(b)
        adj[b].add(a)
    return adj


def _mcs_order(adj: list[set[int]]) -> list[int]:
    """Maximum cardinality search: repeatedly pick the node with the most already-ordered neighbors."""
    n = len(adj)
    weight = [0] * n
    buckets: list[set[int]] = [set(range(n))]
    done = [False] * n
    order = []
    top = 0
    for _ in range(n):
        while top > 0 and not buckets[top]:
            top -= 1
        v = min(buckets[top])  # deterministic
        buckets[top].discard(v)
        done[v] = True
        order.append(v)
        for u in adj[v]:
            if done[u]:
                continue
            w = weight[u]
            buckets[w].discard(u)
            weight[u] = w + 1
            if w + 1 >= len(buckets):
                buckets.append(set())
            buckets[w + 1].add(u)
            top = max(top, w + 1)
    return order


def _greedy(adj: list[set[int]], order: list[int]) -> np.ndarray:
    colors = np.full(len(adj), -1, dtype=np.int64)
    for v in order:
        used = {colors[u] for u in adj[v] if colors[u] >= 0}
        c = 0
        while c in used:
            c += 1
        colors[v] = c
    return colors


def _balance(adj: list[set[int]], colors: np.ndarray, target_ratio: float) -> np.ndarray:
    """Move nodes from the largest color class to smaller ones where the coloring stays valid."""
    if colors.size == 0:
        return colors
    num_colors = int(colors.max()) + 1
    if num_colors < 2:
        return colors
    sizes = np.bincount(colors, minlength=num_colors)
    for _ in range(colors.size):
        big = int(np.argmax(sizes))
        small = int(np.argmin(sizes))
        if sizes[small] == 0 or sizes[big] / sizes[small] <= target_ratio or sizes[big] - sizes[small] <= 1:
            break
        moved = False
        for v in np.nonzero(colors == big)[0]:
            if all(colors[u] != small for u in adj[v]):
                colors[v] = small
                sizes[big] -= 1
                sizes[small] += 1
                moved = True
                break
        if not moved:
            # try any smaller class instead of only the smallest
            for c in np.argsort(sizes):
                if c == big or sizes[c] >= sizes[big] - 1:
                    continue
                for v in np.nonzero(colors == big)[0]:
                    if all(colors[u] != c for u in adj[v]):
                        colors[v] = c
                        sizes[big] -= 1
                        sizes[c] += 1
                        moved = True
                        break
                if moved:
                    break
        if not moved:
            break
    return colors


def color_graph(
    num_nodes: int,
    graph_edge_indices,
    balance_colors: bool = True,
    target_max_min_color_ratio: float = 1.1,
    algorithm: ColoringAlgorithm = ColoringAlgorithm.MCS,
) -> list[np.ndarray]:
    """Color a graph so that no edge joins two nodes of the same color.

    Args:
        num_nodes: number of nodes.
        graph_edge_indices: (E, 2) node index pairs (numpy array, list or ``wp.array``).
        balance_colors: move nodes between colors to even out the class sizes.
        target_max_min_color_ratio: balancing stops once largest / smallest class <= this.
        algorithm: :class:`ColoringAlgorithm` node order.

    Returns:
        One ``np.ndarray`` (int32) of node indices per color.
    """
    if hasattr(graph_edge_indices, "numpy"):
        graph_edge_indices = graph_edge_indices.numpy()
    edges = np.asarray(graph_edge_indices, dtype=np.int64).reshape(-1, 2) if len(graph_edge_indices) else np.zeros((0, 2), np.int64)
    algorithm = ColoringAlgorithm(algorithm)
    adj = _adjacency(int(num_nodes), edges)
    if algorithm == ColoringAlgorithm.MCS:
        order = _mcs_order(adj)
    else:
        order = sorted(range(num_nodes), key=lambda v: (-len(adj[v]), v))
    colors = _greedy(adj, order)
    if balance_colors:
        colors = _balance(adj, colors, float(target_max_min_color_ratio))
    if colors.size == 0:
        return []
    return [np.nonzero(colors == c)[0].astype(np.int32) for c in range(int(colors.max()) + 1) if np.any(colors == c)]


def validate_coloring(num_nodes: int, graph_edge_indices, groups) -> bool:
    """True if ``groups`` partition at most ``num_nodes`` nodes and no edge is monochrome."""
    colors = np.full(num_nodes, -1, dtype=np.int64)
    for c, g in enumerate(groups):
        g = np.asarray(g, dtype=np.int64)
        if np.any(colors[g] >= 0):
            return False
        colors[g] = c
    edges = np.asarray(graph_edge_indices, dtype=np.int64).reshape(-1, 2)
    for a, b in edges:
        if a >= 0 and b >= 0 and a != b and colors[a] >= 0 and colors[a] == colors[b]:
            return False
    return True

"""3D convex hulls in numpy (quickhull), without scipy / qhull.

:func:`convex_hull` returns a closed triangulated hull ``(vertices (V, 3) float32, indices (3F,) int32)``
with counter-clockwise faces seen from outside (outward normals by the right-hand rule), the
convention of :class:`armillary.Mesh`. Hull vertices are a subset of the input points (bit-exact
for float32 input); coplanar facets are triangulated; points closer than ``tol`` to the hull
surface are treated as lying on it (they never become hull vertices unless they are needed).

Degenerate input is rejected: fewer than 4 distinct points, collinear or coplanar point sets
(thickness below the degeneracy tolerance ``max(tol, 1e-6 * extent)``, ``extent`` = bounding box
diagonal) raise :class:`ValueError`, because a flat set has no volume to close (the caller may
thicken it or use a primitive instead).

``maxhullvert`` (as :attr:`armillary.Mesh.maxhullvert`, MuJoCo's ``maxhullvert``) caps the
vertex count: when the exact hull has more vertices, the points most extreme along a growing set
of evenly spread (Fibonacci sphere) directions are kept, up to ``maxhullvert`` of them, and
re-hulled. The reduced hull is then an inner approximation (every kept vertex is on the exact
hull; input points may lie slightly outside it).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["convex_hull", "hull_volume", "fibonacci_directions"]

_PREFILTER_MIN_POINTS = 512


class _TopologyError(RuntimeError):
    """The horizon was not a simple loop (numerical trouble); retried with a larger tolerance."""


def fibonacci_directions(n: int) -> np.ndarray:
    """``n`` roughly evenly spread unit vectors ``(n, 3)`` (golden-angle spiral on the sphere)."""
    n = max(int(n), 1)
    k = np.arange(n, dtype=np.float64) + 0.5
    z = 1.0 - 2.0 * k / n
    r = np.sqrt(np.maximum(0.0, 1.0 - z * z))
    phi = k * math.pi * (3.0 - math.sqrt(5.0))
    return np.stack([r * np.cos(phi), r * np.sin(phi), z], axis=1)


def hull_volume(vertices, indices) -> float:
    """Signed volume enclosed by a closed triangle mesh (positive for outward CCW faces)."""
    v = np.asarray(vertices, dtype=np.float64)
    t = np.asarray(indices, dtype=np.int64).reshape(-1, 3)
    if not len(t):
        return 0.0
    a, b, c = v[t[:, 0]], v[t[:, 1]], v[t[:, 2]]
    return float(np.einsum("ij,ij->i", a, np.cross(b, c)).sum() / 6.0)


def _pick(values: np.ndarray, P: np.ndarray) -> int:
    """Index maximizing ``values``; ties go to the lexicographically largest point.

    For a convex ``values`` function the lexicographic maximum of the maximizers is a vertex of
    the hull (a point inside a facet or an edge never is), so the initial simplex and hence the
    final hull contain no superfluous (coplanar / collinear) vertices.
    """
    m = float(values.max())
    cand = np.nonzero(values >= m - 1e-12 * max(abs(m), 1e-300))[0]
    if len(cand) == 1:
        return int(cand[0])
    Q = P[cand]
    return int(cand[np.lexsort((Q[:, 2], Q[:, 1], Q[:, 0]))[-1]])


def _initial_simplex(P: np.ndarray, degen: float) -> list[int]:
    i0 = _pick(-P[:, 0], P)
    d = np.linalg.norm(P - P[i0], axis=1)
    i1 = _pick(d, P)
    if d[i1] <= degen:
        raise ValueError("convex_hull: all points coincide (within tolerance); a hull needs volume")
    u = (P[i1] - P[i0]) / d[i1]
    w = P - P[i0]
    dl = np.linalg.norm(w - np.outer(w @ u, u), axis=1)
    i2 = _pick(dl, P)
    if dl[i2] <= degen:
        raise ValueError(
            f"convex_hull: the points are collinear (max distance from a line {dl[i2]:.3g} <= tolerance "
            f"{degen:.3g}); a hull needs volume"
        )
    n = np.cross(P[i1] - P[i0], P[i2] - P[i0])
    n /= np.linalg.norm(n)
    dp = w @ n
    i3 = _pick(np.abs(dp), P)
    if abs(dp[i3]) <= degen:
        raise ValueError(
            f"convex_hull: the points are coplanar (max distance from a plane {abs(dp[i3]):.3g} <= tolerance "
            f"{degen:.3g}); a hull needs volume"
        )
    return [i0, i1, i2, i3]


def _quickhull(P: np.ndarray, eps: float, degen: float) -> np.ndarray:
    """Triangles ``(F, 3)`` (indices into ``P``) of the hull of ``P`` (float64, distinct points)."""
    simplex = _initial_simplex(P, degen)
    interior = P[simplex].mean(axis=0)

    faces: list[tuple[int, int, int]] = []
    normals: list[np.ndarray] = []
    offsets: list[float] = []
    alive: list[bool] = []
    outside: list[np.ndarray] = []
    edge_face: dict[tuple[int, int], int] = {}

    def add_face(a: int, b: int, c: int) -> int:
        n = np.cross(P[b] - P[a], P[c] - P[a])
        ln = float(np.linalg.norm(n))
        if ln > 0.0:
            n = n / ln
        fid = len(faces)
        faces.append((a, b, c))
        normals.append(n)
        offsets.append(float(n @ P[a]))
        alive.append(True)
        outside.append(np.empty(0, dtype=np.int64))
        for e in ((a, b), (b, c), (c, a)):
            if e in edge_face:
                raise _TopologyError(f"edge {e} used twice")
            edge_face[e] = fid
        return fid

    def assign(points: np.ndarray, fids: list[int]) -> list[int]:
        if not len(points) or not fids:
            return []
        N = np.stack([normals[f] for f in fids])
        D = np.array([offsets[f] for f in fids])
        dist = P[points] @ N.T - D
        best = np.argmax(dist, axis=1)
        far = dist[np.arange(len(points)), best] > eps
        todo = []
        for k in np.unique(best[far]):
            f = fids[int(k)]
            outside[f] = points[far & (best == k)]
            todo.append(f)
        return todo

    a, b, c, d = simplex
    tets = [(a, b, c), (a, c, d), (a, d, b), (b, d, c)]
    fids = []
    for tri in tets:
        n = np.cross(P[tri[1]] - P[tri[0]], P[tri[2]] - P[tri[0]])
        if n @ (interior - P[tri[0]]) > 0.0:  # points inward: flip
            tri = (tri[0], tri[2], tri[1])
        fids.append(tri)
    # the four faces must form a consistent closed surface: orient by the first face's choice
    fids = [add_face(*tri) for tri in fids]
    rest = np.setdiff1d(np.arange(len(P)), np.array(simplex))
    stack = assign(rest, fids)

    while stack:
        fid = stack.pop()
        if not alive[fid] or not len(outside[fid]):
            continue
        pts = outside[fid]
        dist = P[pts] @ normals[fid] - offsets[fid]
        p = int(pts[_pick(dist, P[pts])])
        pp = P[p]
        # visible region (connected, grown from fid) and its horizon
        visible = {fid}
        hidden: set[int] = set()
        horizon: list[tuple[int, int]] = []
        queue = [fid]
        while queue:
            f = queue.pop()
            fa, fb, fc = faces[f]
            for u, v in ((fa, fb), (fb, fc), (fc, fa)):
                g = edge_face.get((v, u))
                if g is None:
                    raise _TopologyError("open edge")
                if g in visible:
                    continue
                if g not in hidden and float(normals[g] @ pp) - offsets[g] > eps:
                    visible.add(g)
                    queue.append(g)
                else:
                    hidden.add(g)
                    horizon.append((u, v))
        # horizon edges must form one simple loop
        nxt = {}
        for u, v in horizon:
            if u in nxt:
                raise _TopologyError("horizon is not a simple loop")
            nxt[u] = v
        start = horizon[0][0]
        cur, steps = start, 0
        while True:
            cur = nxt.get(cur)
            steps += 1
            if cur is None or steps > len(horizon):
                raise _TopologyError("horizon is not a simple loop")
            if cur == start:
                break
        if steps != len(horizon):
            raise _TopologyError("horizon has several loops")
        orphans = []
        for f in visible:
            alive[f] = False
            fa, fb, fc = faces[f]
            for e in ((fa, fb), (fb, fc), (fc, fa)):
                edge_face.pop(e, None)
            if len(outside[f]):
                orphans.append(outside[f])
            outside[f] = np.empty(0, dtype=np.int64)
        new = [add_face(u, v, p) for u, v in horizon]
        if orphans:
            pts = np.concatenate(orphans)
            pts = pts[pts != p]
            stack.extend(assign(pts, new))

    tris = np.array([faces[f] for f in range(len(faces)) if alive[f]], dtype=np.int64)
    return tris


def _prefilter(P: np.ndarray, eps: float, degen: float) -> np.ndarray:
    """Indices of ``P`` that may be hull vertices: drops points inside the hull of a few extremes."""
    dirs = fibonacci_directions(64)
    ext = np.unique(np.argmax(P @ dirs.T, axis=0))
    try:
        tris = _quickhull(P[ext], eps, degen)
    except (ValueError, _TopologyError):
        return np.arange(len(P))
    Q = P[ext]
    n = np.cross(Q[tris[:, 1]] - Q[tris[:, 0]], Q[tris[:, 2]] - Q[tris[:, 0]])
    ln = np.linalg.norm(n, axis=1)
    ok = ln > 0.0
    n = n[ok] / ln[ok, None]
    off = np.einsum("ij,ij->i", n, Q[tris[ok, 0]])
    inside = np.ones(len(P), dtype=bool)
    for k in range(0, len(n), 64):  # chunked: (N, 64) distance blocks
        inside &= np.all(P @ n[k : k + 64].T - off[k : k + 64] < -eps, axis=1)
    keep = ~inside
    keep[ext] = True
    return np.nonzero(keep)[0]


def _spread_extremes(P: np.ndarray, limit: int) -> tuple[np.ndarray, bool]:
    """Up to ``limit`` points of ``P`` most extreme along a growing set of spread directions.

    Returns ``(indices, overflow)``; ``overflow`` tells that more than ``limit`` distinct extreme
    points exist (so the hull of ``P`` has more than ``limit`` vertices).
    """
    Q = P - P.mean(axis=0)
    chosen = np.empty(0, dtype=np.int64)
    ndir = limit
    for _ in range(40):
        sel = np.unique(np.argmax(Q @ fibonacci_directions(ndir).T, axis=0))
        if len(sel) > limit:
            return (chosen if len(chosen) >= 4 else sel[:limit]), True
        chosen = sel
        ndir = int(math.ceil(ndir * 1.25)) + 1
    return chosen, False


def _hull_indices(P: np.ndarray, tol: float | None) -> tuple[np.ndarray, np.ndarray]:
    """``(vertex ids into P, triangles into those ids)`` of the hull of distinct float64 points."""
    ext = float(np.linalg.norm(P.max(axis=0) - P.min(axis=0)))
    if not ext > 0.0:
        raise ValueError("convex_hull: all points coincide; a hull needs volume")
    eps = float(tol) if tol is not None else 1e-9 * ext
    degen = max(eps, 1e-6 * ext)
    cand = _prefilter(P, eps, degen) if len(P) > _PREFILTER_MIN_POINTS else np.arange(len(P))
    tris = cand[_robust_quickhull(P[cand], eps, degen)]
    keep = _corner_vertices(P, tris)
    if keep is not None:  # drop vertices lying on an edge or inside a facet, then re-hull
        tris = keep[_robust_quickhull(P[keep], eps, degen)]
    used, inv = np.unique(tris.reshape(-1), return_inverse=True)
    return used, inv.reshape(-1, 3)


def _concavity(P: np.ndarray, tris: np.ndarray) -> float:
    """Largest height of a neighbor face's opposite vertex above a face plane (0 for convex)."""
    a, b, c = P[tris[:, 0]], P[tris[:, 1]], P[tris[:, 2]]
    n = np.cross(b - a, c - a)
    n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-300)
    F = len(tris)
    src = tris.reshape(-1)
    dst = tris[:, [1, 2, 0]].reshape(-1)
    opp = tris[:, [2, 0, 1]].reshape(-1)  # vertex opposite each directed edge in its face
    N = np.int64(len(P))
    key = src * N + dst
    order = np.argsort(key)
    pos = np.searchsorted(key[order], dst * N + src)
    pos = np.minimum(pos, len(key) - 1)
    rev = order[pos]
    face = np.repeat(np.arange(F), 3)
    h = np.einsum("ij,ij->i", n[face], P[opp[rev]] - a[face])
    return float(h.max()) if len(h) else 0.0


def _robust_quickhull(P: np.ndarray, eps: float, degen: float) -> np.ndarray:
    """Quickhull, validated (closed, locally convex) and retried with coarser tolerances.

    Points within the tolerance of a face plane but close to one of its edges can create thin
    triangles whose planes tilt arbitrarily (near-duplicate points); a coarser tolerance ignores
    such points.
    """
    last = None
    for attempt in range(5):
        e = eps * (10.0**attempt) if eps > 0.0 else 1e-12 * (10.0**attempt)
        try:
            tris = _quickhull(P, e, degen)
        except _TopologyError as err:
            last = err
            continue
        bad = _concavity(P, tris)
        if bad <= 10.0 * e:
            return tris
        last = f"concave edge ({bad:.3g} above a face)"
    raise RuntimeError(f"convex_hull: quickhull failed to build a convex closed hull ({last})")


def _corner_vertices(P: np.ndarray, tris: np.ndarray, angle_tol: float = 1e-7) -> np.ndarray | None:
    """Hull vertices with at least 3 distinct incident facet planes, or ``None`` when all are.

    Quickhull with ties (grids, boxes) can pick a point in the middle of an edge or a facet; such a
    vertex has only one or two distinct incident face normals.
    """
    a, b, c = P[tris[:, 0]], P[tris[:, 1]], P[tris[:, 2]]
    n = np.cross(b - a, c - a)
    n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-300)
    flat = tris.reshape(-1)
    order = np.argsort(flat, kind="stable")
    verts, starts = np.unique(flat[order], return_index=True)
    bounds = np.append(starts, len(flat))
    face_of = order // 3
    redundant = []
    for k, v in enumerate(verts):
        normals = n[face_of[bounds[k] : bounds[k + 1]]]
        distinct = 0
        while len(normals) and distinct < 3:
            distinct += 1
            normals = normals[np.linalg.norm(normals - normals[0], axis=1) > angle_tol]
        if distinct < 3:
            redundant.append(v)
    if not redundant:
        return None
    return np.setdiff1d(verts, np.array(redundant))


def convex_hull(points, maxhullvert: int | None = None, *, tol: float | None = None):
    """Convex hull of a 3D point set.

    Args:
        points: ``(N, 3)`` array-like of finite coordinates (duplicates allowed).
        maxhullvert: maximum number of hull vertices (``>= 4``), ``None`` or ``-1`` for no limit.
            A larger exact hull is reduced to the points most extreme along evenly spread
            directions and re-hulled (see the module docstring).
        tol: distance below which a point counts as on a face (default ``1e-9 * extent``,
            ``extent`` = bounding-box diagonal).

    Returns:
        ``(vertices, indices)``: hull vertices ``(V, 3)`` float32 (a subset of the input points)
        and triangle indices ``(3F,)`` int32, counter-clockwise seen from outside. The surface is
        closed and manifold: ``V - E + F = 2``.

    Raises:
        ValueError: malformed input, fewer than 4 distinct points, collinear or coplanar points
            (no volume), or ``maxhullvert < 4``.
    """
    try:
        P = np.asarray(points, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ValueError(f"convex_hull: points must be an (N, 3) array of floats: {e}") from None
    if P.ndim == 1 and P.size % 3 == 0:
        P = P.reshape(-1, 3)
    if P.ndim != 2 or P.shape[1] != 3:
        raise ValueError(f"convex_hull: points must have shape (N, 3), got {P.shape}")
    if not np.all(np.isfinite(P)):
        raise ValueError("convex_hull: points contain non-finite values (NaN or inf)")
    if maxhullvert is not None and int(maxhullvert) != -1 and int(maxhullvert) < 4:
        raise ValueError(f"convex_hull: maxhullvert={maxhullvert} must be >= 4 (or -1 / None for no limit)")
    if tol is not None and not (float(tol) >= 0.0):
        raise ValueError(f"convex_hull: tol={tol} must be >= 0")
    out_src = P.astype(np.float32)
    # distinct points (as the float32 values returned), computed in float64
    U = np.unique(out_src.astype(np.float64), axis=0)
    if len(U) < 4:
        raise ValueError(f"convex_hull: needs at least 4 distinct points, got {len(U)}")
    limit = None if maxhullvert is None or int(maxhullvert) == -1 else int(maxhullvert)
    if limit is not None:
        # points extreme along some direction are hull vertices: when more than ``limit`` of them
        # exist the exact hull is too large, so hull the extremes directly (cheap for big inputs)
        chosen, overflow = _spread_extremes(U, limit)
        if overflow and len(chosen) >= 4:
            try:
                used, tris = _hull_indices(U[chosen], tol)
                vertices = U[chosen[used]].astype(np.float32)
                return vertices, tris.reshape(-1).astype(np.int32)
            except ValueError:
                pass
    used, tris = _hull_indices(U, tol)
    if limit is not None and len(used) > limit:
        chosen, _ = _spread_extremes(U[used], limit)
        used2, tris = _hull_indices(U[used][chosen], tol)
        used = used[chosen[used2]]
    vertices = U[used].astype(np.float32)
    return vertices, tris.reshape(-1).astype(np.int32)

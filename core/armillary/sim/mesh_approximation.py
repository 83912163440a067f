"""Collision approximations of mesh shapes: :meth:`ModelBuilder.approximate_meshes`.

Methods:

* ``"convex_hull"`` (default): the MESH shape becomes a CONVEX_MESH whose source is a new
  :class:`~armillary.Mesh` of the hull (our own quickhull, :mod:`armillary.geometry.hull`),
  reduced to at most ``Mesh.maxhullvert`` vertices. Shape scale and transform are kept.
* ``"bounding_box"``: an oriented BOX (the smaller of the PCA-aligned box of the hull
  vertices and the shape-axis-aligned box); the shape scale is baked into the half extents and
  the box center / orientation folded into ``shape_transform``.
* ``"bounding_sphere"``: a SPHERE, the minimal enclosing sphere (Welzl) of the scaled hull
  vertices; its center is folded into ``shape_transform``.
* ``"coacd"`` / ``"vhacd"``: convex decomposition with the optional ``coacd`` /
  ``vhacdx`` packages; every part becomes a CONVEX_MESH shape on the same body (the first part
  takes the original shape's index). ``**remeshing_kwargs`` go to ``coacd.run_coacd`` /
  ``vhacdx.compute_vhacd``.

Bookkeeping: shapes are only replaced in place or appended, never deleted, so shape indices,
labels, collision filter pairs and SHAPE-frequency custom attributes stay valid. Appended
shapes copy every per-shape builder list entry of the original (material, margin, gap,
collision group, flags, world, SDF settings, ...), its collision filter pairs and its custom
attribute values. Body mass, center of mass and inertia are left unchanged (they stay those of
the original meshes; as in the reference, approximation does not recompute body inertia).
"""

from __future__ import annotations

import copy

import numpy as np
import warp as wp

from ..geometry.hull import convex_hull
from .custom_attributes import AttributeFrequency
from .enums import GeoType, ShapeFlags
from .exceptions import warn
from .geometry_types import Mesh

METHODS = ("convex_hull", "bounding_box", "bounding_sphere", "coacd", "vhacd")
_REMESHING_ONLY = ("ftetwild", "alphashape", "quadratic", "poisson")  # reference remeshers we do not ship
_MIN_EXTENT = 1.0e-6  # [m] smallest half extent / radius of a fitted primitive (flat meshes)


# ---------------------------------------------------------------------------------------- fits
def oriented_bounding_box(points) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(center (3,), rotation (3, 3) columns = box axes, det +1, half_extents (3,))`` of ``points``.

    Candidates: the PCA frame of the points and the identity frame; the smaller-volume box wins.
    """
    P = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    frames = [np.eye(3)]
    if len(P) >= 2:
        cov = np.cov((P - P.mean(axis=0)).T)
        _, vecs = np.linalg.eigh(cov)
        R = vecs[:, ::-1].copy()
        if np.linalg.det(R) < 0.0:
            R[:, 2] *= -1.0
        frames.append(R)
    best = None
    for R in frames:
        local = P @ R
        lo, hi = local.min(axis=0), local.max(axis=0)
        half = np.maximum(0.5 * (hi - lo), _MIN_EXTENT)
        vol = float(np.prod(half))
        if best is None or vol < best[0] * (1.0 - 1e-9):
            best = (vol, R @ (0.5 * (hi + lo)), R, half)
    return best[1], best[2], best[3]


def _sphere_from(pts: list[np.ndarray]) -> tuple[np.ndarray, float]:
    """Smallest sphere with all of ``pts`` (1..4 points) on its boundary (circumsphere)."""
    if len(pts) == 1:
        return pts[0].copy(), 0.0
    if len(pts) == 2:
        c = 0.5 * (pts[0] + pts[1])
        return c, float(np.linalg.norm(pts[0] - c))
    a = pts[0]
    A = np.array([p - a for p in pts[1:]])
    if len(pts) == 3:  # circumcircle in the plane of the triangle
        u, v = A
        n = np.cross(u, v)
        nn = float(n @ n)
        if nn < 1e-30:
            return _sphere_fallback(pts)
        c = a + (np.cross(n, u) * (v @ v) + np.cross(v, n) * (u @ u)) / (2.0 * nn)
        return c, float(np.linalg.norm(pts[0] - c))
    b = 0.5 * np.einsum("ij,ij->i", A, A)
    try:
        if abs(np.linalg.det(A)) < 1e-30:
            raise np.linalg.LinAlgError
        x = np.linalg.solve(A, b)
    except np.linalg.LinAlgError:
        return _sphere_fallback(pts)
    c = a + x
    return c, float(np.linalg.norm(pts[0] - c))


def _sphere_fallback(pts):
    """Degenerate support set: smallest sphere of pairs containing all points."""
    best = None
    for i in range(len(pts)):
        for j in range(i + 1, len(pts)):
            c = 0.5 * (pts[i] + pts[j])
            r = max(float(np.linalg.norm(p - c)) for p in pts)
            if best is None or r < best[1]:
                best = (c, r)
    return best


def bounding_sphere(points, seed: int = 0) -> tuple[np.ndarray, float]:
    """Minimal enclosing sphere ``(center (3,), radius)`` of ``points`` (Welzl, iterative form)."""
    P = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    P = np.unique(P, axis=0)
    P = P[np.random.default_rng(seed).permutation(len(P))]
    scale = float(np.abs(P).max()) if len(P) else 1.0
    tol = 1e-12 * max(scale, 1e-300)

    def outside(c, r, p):
        return float(np.linalg.norm(p - c)) > r + tol

    c, r = P[0].copy(), 0.0
    for i in range(1, len(P)):
        if not outside(c, r, P[i]):
            continue
        c, r = _sphere_from([P[i]])
        for j in range(i):
            if not outside(c, r, P[j]):
                continue
            c, r = _sphere_from([P[i], P[j]])
            for k in range(j):
                if not outside(c, r, P[k]):
                    continue
                c, r = _sphere_from([P[i], P[j], P[k]])
                for m in range(k):
                    if outside(c, r, P[m]):
                        c, r = _sphere_from([P[i], P[j], P[k], P[m]])
    # guard against round-off: cover every point exactly
    r = max(r, float(np.linalg.norm(P - c, axis=1).max())) if len(P) else r
    return c, r


# ---------------------------------------------------------------------------- decompositions
def _coacd_parts(mesh: Mesh, kwargs: dict) -> list[tuple[np.ndarray, np.ndarray]]:
    try:
        import coacd  # noqa: PLC0415
    except ImportError:
        raise ImportError(
            "approximate_meshes(method='coacd') needs the optional 'coacd' package: pip install coacd"
        ) from None
    cm = coacd.Mesh(np.asarray(mesh.vertices, dtype=np.float64), np.asarray(mesh.indices).reshape(-1, 3))
    return [(np.asarray(v), np.asarray(f)) for v, f in coacd.run_coacd(cm, **kwargs)]


def _vhacd_parts(mesh: Mesh, kwargs: dict) -> list[tuple[np.ndarray, np.ndarray]]:
    try:
        import vhacdx  # noqa: PLC0415
    except ImportError:
        raise ImportError(
            "approximate_meshes(method='vhacd') needs the optional 'vhacdx' package (also what "
            "trimesh.decomposition uses): pip install vhacdx"
        ) from None
    parts = vhacdx.compute_vhacd(
        np.asarray(mesh.vertices, dtype=np.float64), np.asarray(mesh.indices, dtype=np.uint32).reshape(-1, 3), **kwargs
    )
    return [(np.asarray(v), np.asarray(f)) for v, f in parts]


def _hull_mesh(vertices, like: Mesh, maxhullvert: int | None) -> Mesh:
    limit = like.maxhullvert if maxhullvert is None else maxhullvert  # -1: exact hull
    v, i = convex_hull(vertices, None if limit is None or int(limit) <= 0 else int(limit))
    return Mesh(v, i, is_solid=like.is_solid, maxhullvert=like.maxhullvert, color=like.color)


# ------------------------------------------------------------------------------- bookkeeping
def _shape_lists(builder) -> list[str]:
    """Names of every per-shape list of the builder (``shape_*`` / ``_shape_*`` of length shape_count)."""
    n = builder.shape_count
    names = []
    for name, value in vars(builder).items():
        if (name.startswith("shape_") or name.startswith("_shape_")) and isinstance(value, list) and len(value) == n:
            names.append(name)
    return names


def _duplicate_shape(builder, src: int, lists: list[str], label: str) -> int:
    """Append a copy of shape ``src`` (every per-shape list, filter pairs, custom attributes)."""
    idx = builder.shape_count
    for name in lists:
        seq = getattr(builder, name)
        seq.append(copy.copy(seq[src]))
    builder.shape_label[idx] = label
    body = builder.shape_body[src]
    for a, b in list(builder.shape_collision_filter_pairs):
        if a == src:
            builder.shape_collision_filter_pairs.add((idx, b))
        elif b == src:
            builder.shape_collision_filter_pairs.add((a, idx))
    if body >= 0:
        builder.shape_collision_filter_pairs.add((src, idx))
        for other in builder.body_shapes.get(body, ()):
            if other != idx:
                builder.shape_collision_filter_pairs.add((other, idx))
    builder.body_shapes.setdefault(body, []).append(idx)
    for attr in getattr(builder, "custom_attributes", {}).values():
        if attr.frequency == AttributeFrequency.SHAPE and isinstance(attr.values, dict) and src in attr.values:
            attr.values[idx] = copy.deepcopy(attr.values[src])
    return idx


def _set_geometry(builder, idx: int, geo: GeoType, src, scale, xform) -> None:
    from .builder_shapes import _collision_radius  # noqa: PLC0415 (avoid an import cycle)

    builder.shape_type[idx] = int(geo)
    builder.shape_source[idx] = src
    builder.shape_scale[idx] = tuple(float(v) for v in scale)
    builder.shape_transform[idx] = xform
    builder.shape_collision_radius[idx] = _collision_radius(geo, builder.shape_scale[idx], src)


def _compose(tf, center, rot: np.ndarray | None):
    q = wp.quat_identity() if rot is None else wp.quat_from_matrix(wp.mat33(*rot.reshape(-1).tolist()))
    local = wp.transform(wp.vec3(*(float(v) for v in center)), q)
    return wp.transform_multiply(tf, local)


# ------------------------------------------------------------------------------------ driver
def approximate_meshes(
    builder,
    method: str = "convex_hull",
    shape_indices=None,
    raise_on_failure: bool = False,
    keep_visual_shapes: bool = False,
    **remeshing_kwargs,
) -> set[int]:
    """Implementation of :meth:`ModelBuilder.approximate_meshes` (see there)."""
    if not isinstance(method, str) or method not in METHODS:
        extra = " (a remeshing method of the reference engine that armillary does not ship)" if method in _REMESHING_ONLY else ""
        raise ValueError(f"approximate_meshes: unknown method {method!r}{extra}; allowed: {list(METHODS)}")
    maxhullvert = None
    if method in ("convex_hull", "bounding_box", "bounding_sphere"):
        kwargs = dict(remeshing_kwargs)
        if method == "convex_hull" and "maxhullvert" in kwargs:
            maxhullvert = kwargs.pop("maxhullvert")
            if maxhullvert is not None and int(maxhullvert) != -1 and int(maxhullvert) < 4:
                raise ValueError(f"approximate_meshes: maxhullvert={maxhullvert} must be >= 4 or -1 (no limit)")
        if kwargs:
            allowed = "'maxhullvert'" if method == "convex_hull" else "none"
            raise TypeError(
                f"approximate_meshes(method={method!r}): unexpected keyword arguments {sorted(kwargs)}; allowed: {allowed}"
            )

    n = builder.shape_count
    collide = int(ShapeFlags.COLLIDE_SHAPES)
    if shape_indices is None:
        targets = [i for i in range(n) if builder.shape_type[i] == int(GeoType.MESH) and builder.shape_flags[i] & collide]
    else:
        try:
            raw = list(shape_indices)
        except TypeError:
            raise ValueError(f"approximate_meshes: shape_indices must be a sequence of shape indices, got {shape_indices!r}") from None
        targets = []
        for s in raw:
            if isinstance(s, bool) or not isinstance(s, (int, np.integer)):
                raise ValueError(f"approximate_meshes: shape index {s!r} is not an integer; allowed: 0..{n - 1}")
            if not 0 <= int(s) < n:
                raise ValueError(f"approximate_meshes: shape index {int(s)} is out of range; allowed: 0..{n - 1}")
            # non-MESH shapes (primitives, convex meshes, heightfields) are left untouched
            if builder.shape_type[int(s)] == int(GeoType.MESH) and int(s) not in targets:
                targets.append(int(s))

    lists = _shape_lists(builder)
    hull_cache: dict[int, Mesh] = {}
    parts_cache: dict[int, list[Mesh]] = {}
    done: set[int] = set()
    visible, coll_bits = int(ShapeFlags.VISIBLE), collide | int(ShapeFlags.COLLIDE_PARTICLES) | int(ShapeFlags.HYDROELASTIC)
    for s in targets:
        mesh = builder.shape_source[s]
        label = builder.shape_label[s]
        try:
            if not isinstance(mesh, Mesh) or not len(mesh.vertices):
                raise ValueError(f"shape {s} ('{label}') has no mesh vertices")
            key = id(mesh)
            if method in ("coacd", "vhacd"):
                if key not in parts_cache:
                    raw_parts = (_coacd_parts if method == "coacd" else _vhacd_parts)(mesh, remeshing_kwargs)
                    if not raw_parts:
                        raise ValueError("the decomposition returned no parts")
                    parts_cache[key] = [_hull_mesh(v, mesh, None) for v, _ in raw_parts]
                parts = parts_cache[key]
            elif method == "convex_hull":
                if key not in hull_cache:
                    hull_cache[key] = _hull_mesh(mesh.vertices, mesh, maxhullvert)
                parts = [hull_cache[key]]
            else:  # bounding primitives: the exact hull's vertices, or all vertices of a flat mesh
                if key not in hull_cache:
                    try:
                        hull_cache[key] = _hull_mesh(mesh.vertices, mesh, -1)
                    except ValueError:
                        hull_cache[key] = mesh
                parts = [hull_cache[key]]
        except ImportError:
            raise
        except (ValueError, RuntimeError, np.linalg.LinAlgError) as e:
            msg = f"approximate_meshes: could not approximate shape {s} ('{label}') with {method!r}: {e}"
            if raise_on_failure:
                raise RuntimeError(msg) from e
            warn(msg + "; the shape is left unchanged")
            continue

        scale = np.asarray(builder.shape_scale[s], dtype=np.float64)
        tf = builder.shape_transform[s]
        geoms = []  # (GeoType, source, scale, transform)
        if method == "bounding_box":
            c, R, half = oriented_bounding_box(np.asarray(parts[0].vertices, dtype=np.float64) * scale)
            geoms.append((GeoType.BOX, None, half, _compose(tf, c, R)))
        elif method == "bounding_sphere":
            c, r = bounding_sphere(np.asarray(parts[0].vertices, dtype=np.float64) * scale)
            geoms.append((GeoType.SPHERE, None, (max(r, _MIN_EXTENT), 0.0, 0.0), _compose(tf, c, None)))
        else:
            geoms.extend((GeoType.CONVEX_MESH, p, scale, tf) for p in parts)

        if keep_visual_shapes:
            orig_flags = int(builder.shape_flags[s])
            for k, (geo, src, sc, xf) in enumerate(geoms):
                idx = _duplicate_shape(builder, s, lists, f"{label}/{method}" + (f"_{k}" if len(geoms) > 1 else ""))
                _set_geometry(builder, idx, geo, src, sc, xf)
                builder.shape_flags[idx] = orig_flags & ~visible
            builder.shape_flags[s] = (orig_flags & ~coll_bits) | visible
        else:
            geo, src, sc, xf = geoms[0]
            for k, (geo_k, src_k, sc_k, xf_k) in enumerate(geoms[1:], start=1):
                idx = _duplicate_shape(builder, s, lists, f"{label}/{method}_{k}")
                _set_geometry(builder, idx, geo_k, src_k, sc_k, xf_k)
            _set_geometry(builder, s, geo, src, sc, xf)
        done.add(s)
    return done

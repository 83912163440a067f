"""Triangle meshes of every shape type, in the shape's frame, for viewers that draw meshes (Rerun).

Sizes follow ``Model.shape_scale`` (docs/data_model.md, "Shape sizes"): capsules, cylinders and cones
along local z (a cone's base at ``-half_height``, its apex at ``+half_height``), planes with normal
local +z, heightfield row ``i`` along local y and column ``j`` along local x.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["shape_mesh"]

_PLANE, _HFIELD, _SPHERE, _CAPSULE, _ELLIPSOID, _CYLINDER, _BOX, _MESH, _CONE, _CONVEX_MESH = range(1, 11)


def _revolve(profile: list[tuple[float, float]], segments: int = 24) -> tuple[np.ndarray, np.ndarray]:
    """Surface of revolution about z of a (radius, z) profile, top to bottom; rings of radius 0 are poles."""
    angles = np.linspace(0.0, 2.0 * math.pi, segments, endpoint=False)
    ring = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    verts = np.concatenate([np.column_stack([r * ring, np.full(segments, z)]) for r, z in profile])
    tris = []
    for k in range(len(profile) - 1):
        a0, b0 = k * segments, (k + 1) * segments
        for j in range(segments):
            j1 = (j + 1) % segments
            tris.append((a0 + j, b0 + j, b0 + j1))
            tris.append((a0 + j, b0 + j1, a0 + j1))
    return verts.astype(np.float32), np.asarray(tris, dtype=np.int32)


def _box(h) -> tuple[np.ndarray, np.ndarray]:
    hx, hy, hz = (float(v) for v in h)
    v = np.array([[x, y, z] for z in (-hz, hz) for y in (-hy, hy) for x in (-hx, hx)], dtype=np.float32)
    faces = [(0, 2, 3, 1), (4, 5, 7, 6), (0, 1, 5, 4), (2, 6, 7, 3), (0, 4, 6, 2), (1, 3, 7, 5)]
    t = [(a, b, c) for a, b, c, d in faces] + [(a, c, d) for a, b, c, d in faces]
    return v, np.asarray(t, dtype=np.int32)


def shape_mesh(geo_type: int, scale, source=None, *, plane_size: float = 10.0, segments: int = 24):
    """``(vertices (V, 3) float32 [m], triangles (T, 3) int32)`` of one shape in its own frame.

    ``source`` is the shape's ``Mesh`` / ``Heightfield`` (``Model.shape_source``) for those types;
    ``plane_size`` [m] is the side drawn for an infinite plane. Returns ``None`` for a mesh or
    heightfield shape without its source.
    """
    t = int(geo_type)
    s = np.asarray(scale, dtype=np.float64).reshape(3)
    if t == _SPHERE or t == _ELLIPSOID:
        r = np.ones(3) * s[0] if t == _SPHERE else s
        n = max(segments // 2, 4)
        th = np.linspace(0.0, math.pi, n + 1)
        v, tri = _revolve([(math.sin(a), math.cos(a)) for a in th], segments)
        return (v * r).astype(np.float32), tri
    if t == _CAPSULE:
        r, h = s[0], s[1]
        n = max(segments // 4, 2)
        upper = [(r * math.sin(a), h + r * math.cos(a)) for a in np.linspace(0.0, math.pi / 2, n + 1)]
        lower = [(r * math.sin(a), -h + r * math.cos(a)) for a in np.linspace(math.pi / 2, math.pi, n + 1)]
        return _revolve(upper + lower, segments)
    if t == _CYLINDER:
        r, h = s[0], s[1]
        return _revolve([(0.0, h), (r, h), (r, -h), (0.0, -h)], segments)
    if t == _CONE:
        r, h = s[0], s[1]
        return _revolve([(0.0, h), (r, -h), (0.0, -h)], segments)
    if t == _BOX:
        return _box(s)
    if t == _PLANE:
        hx = 0.5 * s[0] if s[0] > 0 else 0.5 * plane_size
        hy = 0.5 * s[1] if s[1] > 0 else 0.5 * plane_size
        v = np.array([[-hx, -hy, 0.0], [hx, -hy, 0.0], [hx, hy, 0.0], [-hx, hy, 0.0]], dtype=np.float32)
        return v, np.array([[0, 1, 2], [0, 2, 3]], dtype=np.int32)
    if t in (_MESH, _CONVEX_MESH):
        if source is None or getattr(source, "vertices", None) is None:
            return None
        v = np.asarray(source.vertices, dtype=np.float64) * s
        return v.astype(np.float32), np.asarray(source.indices, dtype=np.int32).reshape(-1, 3)
    if t == _HFIELD:
        if source is None or getattr(source, "data", None) is None:
            return None
        nrow, ncol = int(source.nrow), int(source.ncol)
        x = np.linspace(-source.hx, source.hx, ncol)
        y = np.linspace(-source.hy, source.hy, nrow)
        gx, gy = np.meshgrid(x, y)  # (nrow, ncol): row i -> y, column j -> x
        v = np.column_stack([gx.ravel(), gy.ravel(), np.asarray(source.data, dtype=np.float64).ravel()]) * s
        idx = np.arange(nrow * ncol).reshape(nrow, ncol)
        a, b, c, d = idx[:-1, :-1].ravel(), idx[:-1, 1:].ravel(), idx[1:, 1:].ravel(), idx[1:, :-1].ravel()
        tri = np.concatenate([np.stack([a, b, c], 1), np.stack([a, c, d], 1)])
        return v.astype(np.float32), tri.astype(np.int32)
    raise ValueError(f"shape_mesh: unknown geo_type {geo_type!r} (GeoType values 1..10)")

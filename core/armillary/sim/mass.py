"""Closed-form mass properties of shape primitives and triangle meshes.

Every function returns ``(mass, com, inertia)``:

* ``mass`` [kg] for the given ``density`` [kg/m^3],
* ``com`` (3,) center of mass in the shape frame [m],
* ``inertia`` (3, 3) inertia tensor about the center of mass, axes of the shape frame [kg*m^2].

Primitive conventions (shape frame): capsule, cylinder and cone extend along +Z;
``half_height`` excludes the capsule caps; the cone base is at ``-half_height``
and its apex at ``+half_height`` so its center of mass is at ``(0, 0, -half_height/2)``.

Hollow shapes (``is_solid=False``) are shells of wall thickness ``thickness``:
the mass properties of the outer solid minus an inner solid shrunk by the
thickness. Hollow meshes are thin laminae of thickness ``2*thickness``.
"""

from __future__ import annotations

import math

import numpy as np

from .rotations import quat_to_matrix

from .enums import GeoType

_EYE = np.eye(3)


def _diag(ixx, iyy, izz) -> np.ndarray:
    return np.diag([ixx, iyy, izz]).astype(np.float64)


def sphere(radius: float, density: float):
    m = 4.0 / 3.0 * math.pi * radius**3 * density
    i = 0.4 * m * radius**2
    return m, np.zeros(3), _diag(i, i, i)


def box(hx: float, hy: float, hz: float, density: float):
    m = 8.0 * hx * hy * hz * density
    return m, np.zeros(3), _diag(m / 3.0 * (hy * hy + hz * hz), m / 3.0 * (hx * hx + hz * hz), m / 3.0 * (hx * hx + hy * hy))


def cylinder(radius: float, half_height: float, density: float):
    h = 2.0 * half_height
    m = math.pi * radius**2 * h * density
    ixx = m * (3.0 * radius**2 + h * h) / 12.0
    return m, np.zeros(3), _diag(ixx, ixx, 0.5 * m * radius**2)


def capsule(radius: float, half_height: float, density: float):
    h = 2.0 * half_height
    mc = math.pi * radius**2 * h * density  # cylinder
    ms = 4.0 / 3.0 * math.pi * radius**3 * density  # both hemispheres
    ixx = mc * (3.0 * radius**2 + h * h) / 12.0 + ms * (0.4 * radius**2 + 0.25 * h * h + 0.375 * h * radius)
    izz = 0.5 * mc * radius**2 + 0.4 * ms * radius**2
    return mc + ms, np.zeros(3), _diag(ixx, ixx, izz)


def cone(radius: float, half_height: float, density: float):
    h = 2.0 * half_height
    m = math.pi * radius**2 * h * density / 3.0
    ixx = 3.0 / 20.0 * m * radius**2 + 3.0 / 80.0 * m * h * h
    return m, np.array([0.0, 0.0, -0.5 * half_height]), _diag(ixx, ixx, 0.3 * m * radius**2)


def ellipsoid(rx: float, ry: float, rz: float, density: float):
    m = 4.0 / 3.0 * math.pi * rx * ry * rz * density
    return m, np.zeros(3), _diag(m / 5.0 * (ry * ry + rz * rz), m / 5.0 * (rx * rx + rz * rz), m / 5.0 * (rx * rx + ry * ry))


def mesh_mass_properties(vertices, triangles, density: float = 1.0, is_solid: bool = True, thickness: float = 0.0):
    """Mass properties of a closed triangle mesh (solid) or a thin shell.

    Args:
        vertices: ``(N, 3)`` positions [m].
        triangles: ``(T, 3)`` vertex indices, counter-clockwise seen from outside.
        density: [kg/m^3].
        is_solid: volume integral over the enclosed region when ``True``;
            otherwise a lamina of thickness ``2*thickness`` over the surface.
    """
    v = np.asarray(vertices, dtype=np.float64)
    t = np.asarray(triangles, dtype=np.int64).reshape(-1, 3)
    if len(t) == 0:
        return 0.0, np.zeros(3), np.zeros((3, 3))
    a, b, c = v[t[:, 0]], v[t[:, 1]], v[t[:, 2]]
    s = a + b + c
    if is_solid:
        w = np.einsum("ij,ij->i", a, np.cross(b, c)) / 6.0  # signed tet volumes with the origin
        vol = w.sum()
        if abs(vol) < 1e-30:
            return 0.0, np.zeros(3), np.zeros((3, 3))
        com = (w[:, None] * s).sum(axis=0) / 4.0 / vol
        # second moment  int x x^T dV = sum_tets V/20 (sum_i v_i v_i^T + s s^T)
        outer = (
            np.einsum("i,ij,ik->jk", w, a, a)
            + np.einsum("i,ij,ik->jk", w, b, b)
            + np.einsum("i,ij,ik->jk", w, c, c)
            + np.einsum("i,ij,ik->jk", w, s, s)
        ) / 20.0
        mass = vol * density
        cov = outer * density
    else:
        area = 0.5 * np.linalg.norm(np.cross(b - a, c - a), axis=1)
        tot = area.sum()
        if tot < 1e-30 or thickness <= 0.0:
            return 0.0, np.zeros(3), np.zeros((3, 3))
        com = (area[:, None] * s).sum(axis=0) / 3.0 / tot
        outer = (
            np.einsum("i,ij,ik->jk", area, a, a)
            + np.einsum("i,ij,ik->jk", area, b, b)
            + np.einsum("i,ij,ik->jk", area, c, c)
            + np.einsum("i,ij,ik->jk", area, s, s)
        ) / 12.0
        rho = density * 2.0 * thickness
        mass = tot * rho
        cov = outer * rho
    if mass < 0.0:  # inward-facing winding: flip sign consistently
        mass, cov = -mass, -cov
    inertia_o = np.trace(cov) * _EYE - cov
    inertia = inertia_o - mass * (np.dot(com, com) * _EYE - np.outer(com, com))
    return float(mass), com, inertia


_SOLIDS = {
    GeoType.SPHERE: lambda s, d: sphere(s[0], d),
    GeoType.BOX: lambda s, d: box(s[0], s[1], s[2], d),
    GeoType.CAPSULE: lambda s, d: capsule(s[0], s[1], d),
    GeoType.CYLINDER: lambda s, d: cylinder(s[0], s[1], d),
    GeoType.CONE: lambda s, d: cone(s[0], s[1], d),
    GeoType.ELLIPSOID: lambda s, d: ellipsoid(s[0], s[1], s[2], d),
}


def _shrink(geo_type: int, scale, t: float):
    s = list(scale)
    if geo_type in (GeoType.SPHERE,):
        return [max(s[0] - t, 0.0), 0.0, 0.0]
    if geo_type == GeoType.CAPSULE:  # the caps already give the wall thickness at the ends
        return [max(s[0] - t, 0.0), s[1], 0.0]
    if geo_type in (GeoType.CYLINDER, GeoType.CONE):
        return [max(s[0] - t, 0.0), max(s[1] - t, 0.0), 0.0]
    return [max(v - t, 0.0) for v in s]


def shape_mass_properties(geo_type: int, scale, density: float, is_solid: bool = True, thickness: float = 0.0, src=None):
    """Mass properties of one shape in its own frame.

    ``scale`` holds the primitive size parameters as stored in ``shape_scale``
    (sphere ``(r, -, -)``, box ``(hx, hy, hz)``, capsule/cylinder/cone ``(r, half_height, -)``,
    ellipsoid ``(rx, ry, rz)``) or the per-axis scale of a mesh ``src``.
    Planes, heightfields and shapes without volume return zero mass.
    """
    geo_type = int(geo_type)
    if density == 0.0:
        return 0.0, np.zeros(3), np.zeros((3, 3))
    if geo_type in _SOLIDS:
        f = _SOLIDS[geo_type]
        m, c, inertia = f(scale, density)
        if not is_solid:
            if thickness <= 0.0:
                return 0.0, np.zeros(3), np.zeros((3, 3))
            mi, ci, ii = f(_shrink(geo_type, scale, thickness), density)
            return subtract(m, c, inertia, mi, ci, ii)
        return m, c, inertia
    if geo_type in (GeoType.MESH, GeoType.CONVEX_MESH) and src is not None:
        sc = np.asarray(scale, dtype=np.float64)
        verts = np.asarray(src.vertices, dtype=np.float64) * sc
        tris = np.asarray(src.indices).reshape(-1, 3)
        solid = is_solid and getattr(src, "is_solid", True)
        if solid and getattr(src, "has_inertia", False) and np.allclose(sc, 1.0):
            return src.mass * density, np.asarray(src.com, dtype=np.float64), np.asarray(src.inertia) * density
        return mesh_mass_properties(verts, tris, density, solid, thickness)
    return 0.0, np.zeros(3), np.zeros((3, 3))


def subtract(m1, c1, i1, m2, c2, i2):
    """Mass properties of body 1 with body 2 removed (both inertias about their own COM)."""
    m = m1 - m2
    if m <= 0.0:
        return 0.0, np.zeros(3), np.zeros((3, 3))
    c = (m1 * np.asarray(c1) - m2 * np.asarray(c2)) / m
    i = shift_inertia(i1, m1, np.asarray(c1) - c) - shift_inertia(i2, m2, np.asarray(c2) - c)
    return m, c, i


def shift_inertia(inertia, mass: float, offset) -> np.ndarray:
    """Parallel axis theorem: inertia about a point displaced by ``-offset`` from the COM.

    ``offset`` is the COM position relative to the new reference point.
    """
    r = np.asarray(offset, dtype=np.float64)
    return np.asarray(inertia, dtype=np.float64) + mass * (np.dot(r, r) * _EYE - np.outer(r, r))


def combine(m1, c1, i1, m2, c2, i2):
    """Compose two rigid mass distributions given in a common frame.

    Inertias are about each part's own COM; the result is about the combined COM.
    """
    m = m1 + m2
    if m <= 0.0:
        return 0.0, np.zeros(3), np.zeros((3, 3))
    c1, c2 = np.asarray(c1, dtype=np.float64), np.asarray(c2, dtype=np.float64)
    c = (m1 * c1 + m2 * c2) / m
    i = shift_inertia(i1, m1, c1 - c) + shift_inertia(i2, m2, c2 - c)
    return m, c, i


def transform_mass_properties(mass, com, inertia, pos, quat):
    """Express shape-frame mass properties in the body frame given the shape transform ``(pos, quat)``."""
    r = quat_to_matrix(quat)
    return mass, r @ np.asarray(com, dtype=np.float64) + np.asarray(pos, dtype=np.float64), r @ np.asarray(inertia) @ r.T

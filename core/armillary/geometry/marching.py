"""Marching tetrahedra helpers for iso-surface extraction on a regular grid (hydroelastic contacts).

Each grid cell (corners numbered by bits ``1 = +x, 2 = +y, 4 = +z``) is split into the six
Kuhn tetrahedra around its main diagonal ``0 -> 7``:
``(0,1,3,7) (0,2,3,7) (0,2,6,7) (0,4,6,7) (0,4,5,7) (0,1,5,7)``. The split is conforming (the
faces shared by neighbouring cells are split the same way), so the extracted surface is
watertight. A tetrahedron whose corner values change sign yields one triangle (one corner on
its own side) or two (a 2 / 2 split, the quad cut along one diagonal); the surface vertices
are linearly interpolated on the tetrahedron edges. Marching tetrahedra is used instead of
marching cubes because it needs no case tables and has no ambiguous cases.
"""

import warp as wp

wp.set_module_options({"enable_backward": False})


@wp.func
def kuhn_mid(t: int):
    """The two middle corners ``(a, b)`` of Kuhn tetrahedron ``t`` (its corners: 0, a, b, 7)."""
    if t == 0:
        return 1, 3
    if t == 1:
        return 2, 3
    if t == 2:
        return 2, 6
    if t == 3:
        return 4, 6
    if t == 4:
        return 4, 5
    return 1, 5


@wp.func
def corner_offset(c: int):
    """Integer offset of cell corner ``c`` (bits: 1 = +x, 2 = +y, 4 = +z)."""
    return wp.vec3i(c & 1, (c >> 1) & 1, (c >> 2) & 1)


@wp.func
def edge_t(fu: float, fv: float, clamp_min: float):
    """Interpolation parameter of the zero of ``f`` on the edge ``u -> v`` (opposite signs),
    clamped to ``[clamp_min, 1 - clamp_min]``."""
    den = fu - fv
    t = float(0.5)
    if den != 0.0:
        t = fu / den
    return wp.clamp(t, clamp_min, 1.0 - clamp_min)

"""The twelve public ``armillary.geometry.collide_*`` functions take the reference engine's
signatures and return conventions (issue 20): positions, ``wp.mat33`` rotations (columns = local
axes), half sizes, unit axes with half lengths; multi-contact results as fixed-size vectors and
matrices padded with MAXVAL. Each is called from a Warp kernel on fixed inputs and compared with
the numbers the reference engine 1.8 returned for the same inputs (hard-coded below). Where our
rules differ from the reference's (docs/collision.md: capsule-box in penetration, the side of
plane-cylinder's rolling slot 2, box-box slot order) the cases are ones where both agree.

Before: ``collide_sphere_box(c, r, X: wp.transform, h)`` and six others took transforms,
``collide_plane_sphere`` returned three values, ``collide_box_box`` four contacts, and a kernel
written for the reference engine did not compile.
"""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import armillary.geometry as geo

MAXVAL = geo.MAXVAL
vec8 = wp.types.vector(length=8, dtype=wp.float32)
mat23 = wp.types.matrix(shape=(2, 3), dtype=wp.float32)
mat43 = wp.types.matrix(shape=(4, 3), dtype=wp.float32)
mat83 = wp.types.matrix(shape=(8, 3), dtype=wp.float32)

# fmt: off
# inputs, one tuple of arguments per call (in the functions' parameter order)
def rz(t):
    c, s = np.cos(t), np.sin(t); return [[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]
def rx(t):
    c, s = np.cos(t), np.sin(t); return [[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]]
I = [[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0]]
R1 = (np.array(rz(0.4)) @ np.array(rx(0.3))).tolist()
s = float(np.sqrt(0.5)); t10 = np.radians(10.0)
CASES = {
 "collide_sphere_sphere": [
   ([0, 0, 0], 0.5, [1, 0, 0], 0.6), ([0, 0, 0], 0.5, [0, 0, 0], 0.6), ([0.1, 0.2, 0.3], 0.5, [0.4, 0.6, 0.3], 0.1)],
 "collide_plane_sphere": [
   ([0, 0, 1], [0, 0, 0], [0.3, 0.2, 0.4], 0.5), ([0.6, 0, 0.8], [0, 0, 0.2], [0.5, 0.1, 0.9], 0.1)],
 "collide_sphere_capsule": [
   ([1, 0, 0.1], 0.2, [0, 0, 0], [0, 0, 1], 0.3, 0.5), ([0.5, 0, 0.8], 0.1, [0, 0, 0], [0, 0, 1], 0.2, 0.5),
   ([0.3, -0.4, 0.2], 0.15, [0.1, 0.1, 0.0], [s, s, 0], 0.1, 0.4)],
 "collide_sphere_box": [
   ([1, 0.1, 0.1], 0.2, [0, 0, 0], I, [0.5, 0.3, 0.2]), ([0.1, 0.05, 0.05], 0.2, [0, 0, 0], I, [0.5, 0.3, 0.2]),
   ([0.7, 0.5, 0.3], 0.1, [0.1, 0.0, -0.1], R1, [0.5, 0.3, 0.2])],
 "collide_sphere_cylinder": [
   ([2, 0, 0.3], 0.5, [0, 0, 0], [0, 0, 1], 1.0, 1.0), ([0.3, 0, 0.95], 0.5, [0, 0, 0], [0, 0, 1], 1.0, 1.0),
   ([0.85, 0.1, 0.6], 0.3, [0.1, -0.2, 0.3], [0.3, -0.3, 0.9055385138], 0.5, 0.8)],
 "collide_capsule_capsule": [
   ([0, 0, 0], [1, 0, 0], 0.1, 0.5, [0, 0, 0.15], [0, 1, 0], 0.1, 0.5),
   ([0, 0, 0], [1, 0, 0], 0.1, 0.5, [0.2, 0, 0.15], [1, 0, 0], 0.1, 0.5),
   ([0, 0, 0], [1, 0, 0], 0.1, 0.5, [3, 0, 0.15], [1, 0, 0], 0.1, 0.5),
   ([0.1, 0.2, 0.0], [0, s, s], 0.2, 0.4, [0.5, -0.1, 0.3], [0.6, 0, 0.8], 0.15, 0.3)],
 "collide_capsule_box": [
   ([0, 0, 0.5], [1, 0, 0], 0.1, 0.3, [0, 0, 0], I, [0.5, 0.3, 0.2]),
   ([0, 0, 0.5], [0, 0, 1], 0.1, 0.2, [0, 0, 0], I, [0.5, 0.3, 0.2]),
   ([0.7, 0, 0.5], [0.6, 0, 0.8], 0.1, 0.2, [0, 0, 0], I, [0.5, 0.3, 0.2]),
   ([2.0, 0, 0.0], [1, 0, 0], 0.1, 0.2, [0, 0, 0], I, [0.5, 0.3, 0.2])],
 "collide_plane_capsule": [
   ([0, 0, 1], [0, 0, 0], [0, 0, 0.3], [1, 0, 0], 0.1, 0.5), ([0, 0, 1], [0, 0, 0], [0, 0, 0.3], [0.6, 0, 0.8], 0.1, 0.5),
   ([0, 0, 1], [0, 0, 0], [0, 0, 0.3], [0, 0, 1], 0.1, 0.5), ([0.6, 0, 0.8], [0, 0, 0], [0, 0.3, 0], [0, 1, 0], 0.1, 0.5)],
 "collide_plane_box": [
   ([0, 0, 1], [0, 0, 0], [0, 0, 0.15], I, [0.5, 0.3, 0.2], 0.0),
   ([0, 0, 1], [0, 0, 0], [0, 0, 0.25], R1, [0.5, 0.3, 0.2], 0.1),
   ([0, 0, 1], [0, 0, 0], [0, 0, 0.25], R1, [0.5, 0.3, 0.2], 1.0)],
 "collide_plane_cylinder": [
   ([0, 0, 1], [0, 0, 0], [0, 0, 0.9], [0, 0, 1], 1.0, 1.0),
   ([0, 0, 1], [0, 0, 0], [0, 0, 0.9], [float(np.sin(t10)), 0, float(np.cos(t10))], 1.0, 1.0),
   ([0, 0, 1], [0, 0, 0], [0, 0, 0.9], [0, float(np.sin(t10)), float(np.cos(t10))], 1.0, 1.0),
   ([0, 0, 1], [0, 0, 0], [0, 0, 0.9], [s, 0, s], 1.0, 1.0)],
 "collide_plane_ellipsoid": [
   ([0, 0, 1], [0, 0, 0.1], [0.3, 0.2, 0.5], I, [1.0, 2.0, 0.7]), ([0, 0, 1], [0, 0, 0.1], [0, 0, 3.0], R1, [1.0, 2.0, 0.7])],
 "collide_box_box": [
   ([0, 0, 0], I, [1, 1, 0.5], [0.2, 0.1, 0.9], I, [0.5, 0.5, 0.5], 0.0),
   ([0, 0, 0], I, [0.5, 0.5, 0.5], [0, 0, 0.95], rz(np.pi / 4), [0.5, 0.5, 0.5], 0.0),
   ([0, 0, 0], rx(np.pi / 4), [0.5, 0.5, 0.5], [0, 0, 1.15], (np.array(rz(np.pi / 4)) @ np.array(rx(np.pi / 4))).tolist(), [0.5, 0.5, 0.5], 0.0),
   ([0, 0, 0], I, [0.5, 0.5, 0.5], [0, 0, 1.05], I, [0.5, 0.5, 0.5], 0.0)],
}


# observed from the reference engine (newton 1.8) calling newton.geometry.collide_* on CASES;
# unused contact slots hold MAXVAL distances and zero rows
REFERENCE = {
    'collide_sphere_sphere': [
        [-0.1, -1.1, -0.1],
        [[0.45, 0.0, 0.0], [-0.05, 0.0, 0.0], [0.37, 0.56, 0.3]],
        [[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.6, 0.8, 0.0]],
    ],
    'collide_plane_sphere': [
        [-0.1, 0.76],
        [[0.3, 0.2, -0.05], [0.212, 0.1, 0.516]],
    ],
    'collide_sphere_capsule': [
        [0.5, 0.283095, 0.283854],
        [[0.55, 0.0, 0.1], [0.292875, 0.0, 0.675725], [0.10861, -0.20861, 0.090634]],
        [[-1.0, 0.0, -1e-06], [-0.857493, 0.0, -0.514496], [-0.655611, 0.65561, -0.374634]],
    ],
    'collide_sphere_box': [
        [0.3, -0.35, 0.17504],
        [[0.65, 0.1, 0.1], [0.1, 0.05, 0.025], [0.54451, 0.434717, 0.217996]],
        [[-1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [-0.829193, -0.34814, -0.437307]],
    ],
    'collide_sphere_cylinder': [
        [0.5, -0.55, -0.040312],
        [[1.25, 0.0, 0.3], [0.3, 0.0, 0.725], [0.618665, -0.05545, 0.62514]],
        [[-1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [-0.826657, -0.555489, 0.089836]],
    ],
    'collide_capsule_capsule': [
        [[-0.05, MAXVAL], [-0.05, 0.05], [1.805617, 2.803748], [-0.013548, MAXVAL]],
        [[[0.0, 0.0, 0.075], [0.0, 0.0, 0.0]], [[0.5, 0.0, 0.075], [-0.4, 0.0, 0.075]], [[1.5, 0.0, 0.075], [1.0, 0.0, 0.075]], [[0.226347, -0.023375, -0.016625], [0.0, 0.0, 0.0]]],
        [[0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.997199, 0.0, 0.07479], [0.653882, -0.534994, 0.534994]],
    ],
    'collide_capsule_box': [
        [[0.2, 0.2], [0.0, 0.4], [0.061245, MAXVAL], [1.2, 1.6]],
        [[[-0.3, 0.0, 0.3], [0.3, 0.0, 0.3]], [[0.0, 0.0, 0.2], [0.0, 0.0, 0.4]], [[0.515193, 0.0, 0.226588], [0.0, 0.0, 0.0]], [[1.1, 0.0, 0.0], [1.3, 0.0, 0.0]]],
        [[[0.0, 0.0, -1.0], [0.0, 0.0, -1.0]], [[0.0, 0.0, -1.0], [0.0, 0.0, -1.0]], [[-0.496139, 0.0, -0.868243], [0.0, 0.0, 0.0]], [[-1.0, 0.0, 0.0], [-1.0, 0.0, 0.0]]],
    ],
    'collide_plane_capsule': [
        [[0.2, 0.2], [0.6, -0.2], [0.7, -0.3], [-0.1, -0.1]],
        [[[0.5, 0.0, 0.1], [-0.5, 0.0, 0.1]], [[0.3, 0.0, 0.3], [-0.3, 0.0, -0.1]], [[0.0, 0.0, 0.35], [0.0, 0.0, -0.15]], [[-0.03, 0.8, -0.04], [-0.03, -0.2, -0.04]]],
        [[[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], [[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]], [[0.6, 0.0, 0.8], [0.0, 1.0, 0.0], [-0.8, 0.0, 0.6]]],
    ],
    'collide_plane_box': [
        [[-0.05, -0.05, -0.05, -0.05], [-0.029723, -0.029723, MAXVAL, MAXVAL], [-0.029723, -0.029723, 0.147589, 0.147589]],
        [[[-0.5, -0.3, -0.025], [0.5, -0.3, -0.025], [-0.5, 0.3, -0.025], [0.5, 0.3, -0.025]], [[-0.371939, -0.404248, -0.014862], [0.549122, -0.014829, -0.014862], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], [[-0.371939, -0.404248, -0.014862], [0.549122, -0.014829, -0.014862], [-0.595154, 0.123706, 0.073794], [0.325907, 0.513125, 0.073794]]],
        [[0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0]],
    ],
    'collide_plane_cylinder': [
        [[-0.1, -0.1, -0.1, MAXVAL], [-0.258456, 0.002016, 0.002016, MAXVAL], [-0.258456, -0.084808, 0.065576, -0.235191], [-0.514214, 0.9, 0.192893, MAXVAL]],
        [[[1.0, 0.0, -0.05], [-0.5, -0.866025, -0.05], [-0.5, 0.866025, -0.05], [0.0, 0.0, 0.0]], [[0.811159, 0.0, -0.129228], [-0.666052, -0.866025, 0.001008], [-0.666052, 0.866025, 0.001008], [0.0, 0.0, 0.0]], [[0.0, 0.811159, -0.129228], [1.0, -0.173648, -0.042404], [-0.5, -1.026517, 0.032788], [-0.5, 0.67922, -0.117596]], [[0.0, 0.0, -0.257107], [1.414213, 0.0, 0.45], [-0.707107, -1.0, 0.096447], [0.0, 0.0, 0.0]]],
        [[0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0]],
    ],
    'collide_plane_ellipsoid': [
        [-0.3, 2.007511],
        [[0.3, 0.2, -0.05], [0.432379, -1.022672, 1.103756]],
        [[0.0, 0.0, 1.0], [0.0, 0.0, 1.0]],
    ],
    'collide_box_box': [
        [[-0.1, -0.1, -0.1, -0.1, MAXVAL, MAXVAL, MAXVAL, MAXVAL], [-0.05, -0.05, -0.05, -0.05, -0.05, -0.05, -0.05, -0.05], [-0.264214, MAXVAL, MAXVAL, MAXVAL, MAXVAL, MAXVAL, MAXVAL, MAXVAL], [MAXVAL, MAXVAL, MAXVAL, MAXVAL, MAXVAL, MAXVAL, MAXVAL, MAXVAL]],
        [[[-0.3, -0.4, 0.45], [0.7, -0.4, 0.45], [-0.3, 0.6, 0.45], [0.7, 0.6, 0.45], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], [[0.5, -0.207107, 0.475], [0.207107, -0.5, 0.475], [-0.5, -0.207107, 0.475], [-0.207107, -0.5, 0.475], [0.5, 0.207107, 0.475], [0.207107, 0.5, 0.475], [-0.5, 0.207107, 0.475], [-0.207107, 0.5, 0.475]], [[0.0, 0.0, 0.575], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]],
        [[[0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], [[0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0]], [[0.0, 0.0, 1.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]],
    ],
}


# fmt: on


# --------------------------------------------------------------------------- kernels (one call per thread)
@wp.kernel
def k_sphere_sphere(p1: wp.array(dtype=wp.vec3), r1: wp.array(dtype=float), p2: wp.array(dtype=wp.vec3),
                    r2: wp.array(dtype=float), d: wp.array(dtype=float), pos: wp.array(dtype=wp.vec3),
                    n: wp.array(dtype=wp.vec3)):  # fmt: skip
    i = wp.tid()
    ret0, ret1, ret2 = geo.collide_sphere_sphere(p1[i], r1[i], p2[i], r2[i])
    d[i] = ret0
    pos[i] = ret1
    n[i] = ret2


@wp.kernel
def k_plane_sphere(pn: wp.array(dtype=wp.vec3), pp: wp.array(dtype=wp.vec3), c: wp.array(dtype=wp.vec3),
                   r: wp.array(dtype=float), d: wp.array(dtype=float), pos: wp.array(dtype=wp.vec3)):  # fmt: skip
    i = wp.tid()
    ret0, ret1 = geo.collide_plane_sphere(pn[i], pp[i], c[i], r[i])
    d[i] = ret0
    pos[i] = ret1


@wp.kernel
def k_sphere_capsule(c: wp.array(dtype=wp.vec3), r: wp.array(dtype=float), cp: wp.array(dtype=wp.vec3),
                     ca: wp.array(dtype=wp.vec3), cr: wp.array(dtype=float), ch: wp.array(dtype=float),
                     d: wp.array(dtype=float), pos: wp.array(dtype=wp.vec3), n: wp.array(dtype=wp.vec3)):  # fmt: skip
    i = wp.tid()
    ret0, ret1, ret2 = geo.collide_sphere_capsule(c[i], r[i], cp[i], ca[i], cr[i], ch[i])
    d[i] = ret0
    pos[i] = ret1
    n[i] = ret2


@wp.kernel
def k_sphere_box(c: wp.array(dtype=wp.vec3), r: wp.array(dtype=float), bp: wp.array(dtype=wp.vec3),
                 br: wp.array(dtype=wp.mat33), bs: wp.array(dtype=wp.vec3), d: wp.array(dtype=float),
                 pos: wp.array(dtype=wp.vec3), n: wp.array(dtype=wp.vec3)):  # fmt: skip
    i = wp.tid()
    ret0, ret1, ret2 = geo.collide_sphere_box(c[i], r[i], bp[i], br[i], bs[i])
    d[i] = ret0
    pos[i] = ret1
    n[i] = ret2


@wp.kernel
def k_sphere_cylinder(c: wp.array(dtype=wp.vec3), r: wp.array(dtype=float), cp: wp.array(dtype=wp.vec3),
                      ca: wp.array(dtype=wp.vec3), cr: wp.array(dtype=float), ch: wp.array(dtype=float),
                      d: wp.array(dtype=float), pos: wp.array(dtype=wp.vec3), n: wp.array(dtype=wp.vec3)):  # fmt: skip
    i = wp.tid()
    ret0, ret1, ret2 = geo.collide_sphere_cylinder(c[i], r[i], cp[i], ca[i], cr[i], ch[i])
    d[i] = ret0
    pos[i] = ret1
    n[i] = ret2


@wp.kernel
def k_capsule_capsule(p1: wp.array(dtype=wp.vec3), a1: wp.array(dtype=wp.vec3), r1: wp.array(dtype=float),
                      h1: wp.array(dtype=float), p2: wp.array(dtype=wp.vec3), a2: wp.array(dtype=wp.vec3),
                      r2: wp.array(dtype=float), h2: wp.array(dtype=float), d: wp.array(dtype=wp.vec2),
                      pos: wp.array(dtype=mat23), n: wp.array(dtype=wp.vec3)):  # fmt: skip
    i = wp.tid()
    ret0, ret1, ret2 = geo.collide_capsule_capsule(p1[i], a1[i], r1[i], h1[i], p2[i], a2[i], r2[i], h2[i])
    d[i] = ret0
    pos[i] = ret1
    n[i] = ret2


@wp.kernel
def k_capsule_box(cp: wp.array(dtype=wp.vec3), ca: wp.array(dtype=wp.vec3), cr: wp.array(dtype=float),
                  ch: wp.array(dtype=float), bp: wp.array(dtype=wp.vec3), br: wp.array(dtype=wp.mat33),
                  bs: wp.array(dtype=wp.vec3), d: wp.array(dtype=wp.vec2), pos: wp.array(dtype=mat23),
                  n: wp.array(dtype=mat23)):  # fmt: skip
    i = wp.tid()
    ret0, ret1, ret2 = geo.collide_capsule_box(cp[i], ca[i], cr[i], ch[i], bp[i], br[i], bs[i])
    d[i] = ret0
    pos[i] = ret1
    n[i] = ret2


@wp.kernel
def k_plane_capsule(pn: wp.array(dtype=wp.vec3), pp: wp.array(dtype=wp.vec3), cp: wp.array(dtype=wp.vec3),
                    ca: wp.array(dtype=wp.vec3), cr: wp.array(dtype=float), ch: wp.array(dtype=float),
                    d: wp.array(dtype=wp.vec2), pos: wp.array(dtype=mat23), frame: wp.array(dtype=wp.mat33)):  # fmt: skip
    i = wp.tid()
    ret0, ret1, ret2 = geo.collide_plane_capsule(pn[i], pp[i], cp[i], ca[i], cr[i], ch[i])
    d[i] = ret0
    pos[i] = ret1
    frame[i] = ret2


@wp.kernel
def k_plane_box(pn: wp.array(dtype=wp.vec3), pp: wp.array(dtype=wp.vec3), bp: wp.array(dtype=wp.vec3),
                br: wp.array(dtype=wp.mat33), bs: wp.array(dtype=wp.vec3), m: wp.array(dtype=float),
                d: wp.array(dtype=wp.vec4), pos: wp.array(dtype=mat43), n: wp.array(dtype=wp.vec3)):  # fmt: skip
    i = wp.tid()
    ret0, ret1, ret2 = geo.collide_plane_box(pn[i], pp[i], bp[i], br[i], bs[i], m[i])
    d[i] = ret0
    pos[i] = ret1
    n[i] = ret2


@wp.kernel
def k_plane_cylinder(pn: wp.array(dtype=wp.vec3), pp: wp.array(dtype=wp.vec3), cp: wp.array(dtype=wp.vec3),
                     ca: wp.array(dtype=wp.vec3), cr: wp.array(dtype=float), ch: wp.array(dtype=float),
                     d: wp.array(dtype=wp.vec4), pos: wp.array(dtype=mat43), n: wp.array(dtype=wp.vec3)):  # fmt: skip
    i = wp.tid()
    ret0, ret1, ret2 = geo.collide_plane_cylinder(pn[i], pp[i], cp[i], ca[i], cr[i], ch[i])
    d[i] = ret0
    pos[i] = ret1
    n[i] = ret2


@wp.kernel
def k_plane_ellipsoid(pn: wp.array(dtype=wp.vec3), pp: wp.array(dtype=wp.vec3), ep: wp.array(dtype=wp.vec3),
                      er: wp.array(dtype=wp.mat33), es: wp.array(dtype=wp.vec3), d: wp.array(dtype=float),
                      pos: wp.array(dtype=wp.vec3), n: wp.array(dtype=wp.vec3)):  # fmt: skip
    i = wp.tid()
    ret0, ret1, ret2 = geo.collide_plane_ellipsoid(pn[i], pp[i], ep[i], er[i], es[i])
    d[i] = ret0
    pos[i] = ret1
    n[i] = ret2


@wp.kernel
def k_box_box(p1: wp.array(dtype=wp.vec3), r1: wp.array(dtype=wp.mat33), s1: wp.array(dtype=wp.vec3),
              p2: wp.array(dtype=wp.vec3), r2: wp.array(dtype=wp.mat33), s2: wp.array(dtype=wp.vec3),
              m: wp.array(dtype=float), d: wp.array(dtype=vec8), pos: wp.array(dtype=mat83),
              n: wp.array(dtype=mat83)):  # fmt: skip
    i = wp.tid()
    ret0, ret1, ret2 = geo.collide_box_box(p1[i], r1[i], s1[i], p2[i], r2[i], s2[i], m[i])
    d[i] = ret0
    pos[i] = ret1
    n[i] = ret2


@wp.kernel
def k_default_margins(d4: wp.array(dtype=wp.vec4), d8: wp.array(dtype=vec8)):
    # ``margin`` defaults to 0 as in the reference engine
    I = wp.identity(n=3, dtype=float)
    a, b, c = geo.collide_plane_box(wp.vec3(0.0, 0.0, 1.0), wp.vec3(0.0), wp.vec3(0.0, 0.0, 0.21), I, wp.vec3(0.5, 0.3, 0.2))
    d4[0] = a
    e, f, g = geo.collide_box_box(wp.vec3(0.0), I, wp.vec3(0.5), wp.vec3(0.0, 0.0, 1.05), I, wp.vec3(0.5))
    d8[0] = e


# name -> (kernel, input types, output types)
F, V3, M33 = float, wp.vec3, wp.mat33
KERNELS = {
    "collide_sphere_sphere": (k_sphere_sphere, [V3, F, V3, F], [F, V3, V3]),
    "collide_plane_sphere": (k_plane_sphere, [V3, V3, V3, F], [F, V3]),
    "collide_sphere_capsule": (k_sphere_capsule, [V3, F, V3, V3, F, F], [F, V3, V3]),
    "collide_sphere_box": (k_sphere_box, [V3, F, V3, M33, V3], [F, V3, V3]),
    "collide_sphere_cylinder": (k_sphere_cylinder, [V3, F, V3, V3, F, F], [F, V3, V3]),
    "collide_capsule_capsule": (k_capsule_capsule, [V3, V3, F, F, V3, V3, F, F], [wp.vec2, mat23, V3]),
    "collide_capsule_box": (k_capsule_box, [V3, V3, F, F, V3, M33, V3], [wp.vec2, mat23, mat23]),
    "collide_plane_capsule": (k_plane_capsule, [V3, V3, V3, V3, F, F], [wp.vec2, mat23, M33]),
    "collide_plane_box": (k_plane_box, [V3, V3, V3, M33, V3, F], [wp.vec4, mat43, V3]),
    "collide_plane_cylinder": (k_plane_cylinder, [V3, V3, V3, V3, F, F], [wp.vec4, mat43, V3]),
    "collide_plane_ellipsoid": (k_plane_ellipsoid, [V3, V3, V3, M33, V3], [F, V3, V3]),
    "collide_box_box": (k_box_box, [V3, M33, V3, V3, M33, V3, F], [vec8, mat83, mat83]),
}

# parameter names of the reference engine 1.8's functions (inspect.signature)
PARAMS = {
    "collide_sphere_sphere": "pos1 radius1 pos2 radius2",
    "collide_plane_sphere": "plane_normal plane_pos sphere_pos sphere_radius",
    "collide_sphere_capsule": "sphere_pos sphere_radius capsule_pos capsule_axis capsule_radius capsule_half_length",
    "collide_sphere_box": "sphere_pos sphere_radius box_pos box_rot box_size",
    "collide_sphere_cylinder": "sphere_pos sphere_radius cylinder_pos cylinder_axis cylinder_radius cylinder_half_height",
    "collide_capsule_capsule": "cap1_pos cap1_axis cap1_radius cap1_half_length cap2_pos cap2_axis cap2_radius cap2_half_length",
    "collide_capsule_box": "capsule_pos capsule_axis capsule_radius capsule_half_length box_pos box_rot box_size",
    "collide_plane_capsule": "plane_normal plane_pos capsule_pos capsule_axis capsule_radius capsule_half_length",
    "collide_plane_box": "plane_normal plane_pos box_pos box_rot box_size margin",
    "collide_plane_cylinder": "plane_normal plane_pos cylinder_pos cylinder_axis cylinder_radius cylinder_half_height",
    "collide_plane_ellipsoid": "plane_normal plane_pos ellipsoid_pos ellipsoid_rot ellipsoid_size",
    "collide_box_box": "box1_pos box1_rot box1_size box2_pos box2_rot box2_size margin",
}


def _call(name):
    kernel, tin, tout = KERNELS[name]
    cases = CASES[name]
    n = len(cases)
    ins = [wp.array(np.array([c[k] for c in cases], dtype=np.float32), dtype=t, device="cpu") for k, t in enumerate(tin)]
    outs = [wp.zeros(n, dtype=t, device="cpu") for t in tout]
    wp.launch(kernel, n, inputs=ins, outputs=outs, device="cpu")
    return [o.numpy().astype(np.float64) for o in outs]


def test_signatures_match_the_reference_engine():
    assert sorted(PARAMS) == sorted(n for n in geo.__all__ if n.startswith("collide_"))
    for name, params in PARAMS.items():
        assert list(getattr(geo, name).input_types) == params.split(), name


@pytest.mark.parametrize("name", [n for n in PARAMS if n != "collide_box_box"])
def test_outputs_match_the_reference_engine(name):
    got = _call(name)
    want = REFERENCE[name]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.array(w, dtype=np.float64), rtol=1e-5, atol=2e-5, err_msg=name)


def _contact_rows(d, pos, n):
    """A box-box result as the sorted list of its distinct (distance, position, normal) rows."""
    rows = {tuple(np.round(np.concatenate([[d[k]], pos[k], n[k]]), 4)) for k in range(len(d)) if d[k] < 0.5 * MAXVAL}
    return sorted(rows)


def test_box_box_matches_the_reference_engine_as_contact_sets():
    """Same contacts (distances, positions, normals box 1 -> box 2) as the reference engine; the slot
    order differs, and the reference repeats the corners of two coincident faces (8 slots, 4 distinct)."""
    d, pos, n = _call("collide_box_box")
    want = REFERENCE["collide_box_box"]
    for i in range(len(CASES["collide_box_box"])):
        ref = _contact_rows(np.array(want[0][i]), np.array(want[1][i]), np.array(want[2][i]))
        ours = _contact_rows(d[i], pos[i], n[i])
        assert len(ours) == len(ref), i
        np.testing.assert_allclose(np.array(ours).reshape(-1, 7), np.array(ref).reshape(-1, 7), atol=2e-4)
        assert np.all((d[i] >= 0.5 * MAXVAL) == (np.arange(8) >= len(ours)))  # contacts first, MAXVAL padding


def test_margin_defaults_to_zero():
    d4 = wp.zeros(1, dtype=wp.vec4, device="cpu")
    d8 = wp.zeros(1, dtype=vec8, device="cpu")
    wp.launch(k_default_margins, 1, outputs=[d4, d8], device="cpu")
    assert np.all(d4.numpy() == MAXVAL) and np.all(d8.numpy() == MAXVAL)  # 1 cm / 5 cm apart, margin 0

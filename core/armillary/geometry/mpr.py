"""Minkowski Portal Refinement (Snethen, "XenoCollide", Game Programming Gems 7) for the
penetration of two overlapping convex shapes.

The ray from an interior point ``v0`` of ``D = A - B`` (difference of the shape centers)
through the origin is followed to the boundary of D: a portal triangle crossed by the ray
is discovered, then refined with support points along its normal until it lies on the
boundary. The result (portal normal, distance of the origin to the portal plane, witness
points from the barycentric coordinates of the origin's projection) seeds
:func:`.convex.penetration`, which polishes it into the minimum-translation direction.
"""

from __future__ import annotations

import warp as wp

wp.set_module_options({"enable_backward": False, "max_unroll": 1})

from .support import ConvexGeo, shape_center, shape_scale_len, support_world

MPR_MAX_ITER = wp.constant(64)
#: relative portal convergence tolerance (times the shape size)
MPR_TOL = wp.constant(1.0e-6)


@wp.func
def ray_through(v0: wp.vec3, a: wp.vec3, b: wp.vec3, c: wp.vec3):
    """Does the ray from v0 through the origin cross the cone spanned by triangle abc?"""
    r = -v0
    s1 = wp.dot(r, wp.cross(a - v0, b - v0))
    s2 = wp.dot(r, wp.cross(b - v0, c - v0))
    s3 = wp.dot(r, wp.cross(c - v0, a - v0))
    return (s1 >= 0.0 and s2 >= 0.0 and s3 >= 0.0) or (s1 <= 0.0 and s2 <= 0.0 and s3 <= 0.0)


@wp.func
def side_normal(v0: wp.vec3, a: wp.vec3, b: wp.vec3):
    """Normal of plane (v0, a, b) oriented toward the origin."""
    m = wp.cross(a - v0, b - v0)
    if wp.dot(m, -v0) < 0.0:
        m = -m
    return m


@wp.func(inline=False)
def mpr(gA: ConvexGeo, gB: ConvexGeo, verts: wp.array(dtype=wp.vec3)):
    """Returns (hit, depth >= 0, normal A -> B, point on A, point on B)."""
    scale = wp.max(shape_scale_len(gA), shape_scale_len(gB))
    v0 = shape_center(gA, verts) - shape_center(gB, verts)
    if wp.length(v0) < 1.0e-6 * scale:
        v0 = wp.vec3(1.0e-5 * scale, 0.0, 0.0)
    n = -v0
    a1 = support_world(gA, verts, n, 0)
    b1 = support_world(gB, verts, -n, 0)
    v1 = a1 - b1
    zero = wp.vec3(0.0)
    if wp.dot(v1, n) <= 0.0:
        return 0, 0.0, wp.normalize(n), a1, b1
    n = wp.cross(v1, v0)
    if wp.dot(n, n) < 1.0e-20 * scale * scale * scale * scale:
        # origin on the segment v0 - v1
        nn = wp.normalize(-v0)
        return 1, wp.dot(v1, nn), nn, a1, b1
    a2 = support_world(gA, verts, n, 0)
    b2 = support_world(gB, verts, -n, 0)
    v2 = a2 - b2
    if wp.dot(v2, n) <= 0.0:
        return 0, 0.0, wp.normalize(n), a1, b1
    n = side_normal(v0, v1, v2)
    a3 = zero
    b3 = zero
    v3 = zero
    found = int(0)
    for _it in range(MPR_MAX_ITER):
        a3 = support_world(gA, verts, n, 0)
        b3 = support_world(gB, verts, -n, 0)
        v3 = a3 - b3
        if wp.dot(v3, n) <= 0.0:
            return 0, 0.0, wp.normalize(n), a1, b1
        # plane (v0, v1, v3): origin must be on v2's side, else replace v2
        m = wp.cross(v1 - v0, v3 - v0)
        if wp.dot(m, -v0) * wp.dot(m, v2 - v0) < 0.0:
            v2 = v3
            a2 = a3
            b2 = b3
            n = side_normal(v0, v1, v2)
            continue
        m = wp.cross(v2 - v0, v3 - v0)
        if wp.dot(m, -v0) * wp.dot(m, v1 - v0) < 0.0:
            v1 = v3
            a1 = a3
            b1 = b3
            n = side_normal(v0, v1, v2)
            continue
        found = 1
        break
    if found == 0:
        return 0, 0.0, wp.normalize(n), a1, b1
    hit = int(0)
    for _it in range(MPR_MAX_ITER):
        n = wp.cross(v2 - v1, v3 - v1)
        if wp.dot(n, v1 - v0) < 0.0:
            n = -n
        ln = wp.length(n)
        if ln < 1.0e-30:
            break
        n = n / ln
        if wp.dot(n, v1) >= 0.0:
            hit = 1
        a4 = support_world(gA, verts, n, 0)
        b4 = support_world(gB, verts, -n, 0)
        v4 = a4 - b4
        if hit == 0 and wp.dot(v4, n) < 0.0:
            return 0, 0.0, n, a1, b1
        if wp.dot(v4 - v1, n) <= MPR_TOL * scale:
            break
        if ray_through(v0, v4, v2, v3):
            v1 = v4
            a1 = a4
            b1 = b4
        elif ray_through(v0, v1, v4, v3):
            v2 = v4
            a2 = a4
            b2 = b4
        elif ray_through(v0, v1, v2, v4):
            v3 = v4
            a3 = a4
            b3 = b4
        else:
            break
    n = wp.cross(v2 - v1, v3 - v1)
    if wp.dot(n, v1 - v0) < 0.0:
        n = -n
    n = wp.normalize(n)
    depth = wp.dot(n, v1)
    if depth < 0.0:
        return 0, 0.0, n, a1, b1
    # barycentric coordinates of the origin's projection onto the portal
    p = depth * n
    e1 = v2 - v1
    e2 = v3 - v1
    r = p - v1
    d11 = wp.dot(e1, e1)
    d12 = wp.dot(e1, e2)
    d22 = wp.dot(e2, e2)
    r1 = wp.dot(r, e1)
    r2 = wp.dot(r, e2)
    den = d11 * d22 - d12 * d12
    l2 = float(0.0)
    l3 = float(0.0)
    if wp.abs(den) > 1.0e-30:
        l2 = (d22 * r1 - d12 * r2) / den
        l3 = (d11 * r2 - d12 * r1) / den
    l2 = wp.clamp(l2, 0.0, 1.0)
    l3 = wp.clamp(l3, 0.0, 1.0 - l2)
    l1 = 1.0 - l2 - l3
    pa = l1 * a1 + l2 * a2 + l3 * a3
    pb = l1 * b1 + l2 * b2 + l3 * b3
    return 1, depth, n, pa, pb

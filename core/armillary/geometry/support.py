"""Support functions and support features of convex shapes (Warp device functions).

A convex shape is described by :class:`ConvexGeo` (geometry type, world transform, size
vector as stored in ``shape_scale`` and, for convex meshes, a vertex range in a flat
vertex buffer shared by the pipeline). :func:`support_world` returns the point of the
shape farthest along a direction; with ``core != 0`` spheres and capsules return the
support of their *core* (center point / axis segment) so that GJK can work on the cores
and add the radius afterwards (:func:`core_radius`).

:func:`support_feature` returns the support *feature* (vertex, edge or face polygon with
its vertices in cyclic order) of a shape along a direction, used to build multi-point
contact manifolds. Circular faces (cylinder caps, cone base) are sampled by
:data:`CIRCLE_SAMPLES` points.
"""

from __future__ import annotations

import warp as wp

wp.set_module_options({"enable_backward": False, "max_unroll": 1})

from ..sim.enums import GeoType

PLANE = wp.constant(int(GeoType.PLANE))
SPHERE = wp.constant(int(GeoType.SPHERE))
CAPSULE = wp.constant(int(GeoType.CAPSULE))
ELLIPSOID = wp.constant(int(GeoType.ELLIPSOID))
CYLINDER = wp.constant(int(GeoType.CYLINDER))
BOX = wp.constant(int(GeoType.BOX))
CONE = wp.constant(int(GeoType.CONE))
CONVEX_MESH = wp.constant(int(GeoType.CONVEX_MESH))
#: internal geometry type of a single triangle (triangle meshes, heightfield cells)
TRIANGLE = wp.constant(100)

#: sine of the angular tolerance under which a face / edge counts as facing a direction
FEATURE_SIN_TOL = wp.constant(0.02)
#: relative depth tolerance selecting convex-mesh vertices on the support plane
MESH_FEATURE_TOL = wp.constant(2.0e-3)
CIRCLE_SAMPLES = wp.constant(8)
MAX_FEATURE = 8

mat83f = wp.types.matrix(shape=(8, 3), dtype=wp.float32)
vec8f = wp.types.vector(length=8, dtype=wp.float32)


@wp.struct
class ConvexGeo:
    t: int
    X: wp.transform
    s: wp.vec3
    vstart: int
    vcount: int
    #: convex meshes: hull face normals (unscaled local) stored after the vertices in the buffer
    fcount: int
    p0: wp.vec3
    p1: wp.vec3
    p2: wp.vec3


@wp.func
def sgn(x: float):
    if x >= 0.0:
        return 1.0
    return -1.0


@wp.func
def core_radius(g: ConvexGeo):
    if g.t == SPHERE or g.t == CAPSULE:
        return g.s[0]
    return 0.0


@wp.func
def barrel_center(s: wp.vec3):
    """Radial offset of the barrel arc center (profile circle of radius s[2] through the rims)."""
    return s[0] - wp.sqrt(wp.max(s[2] * s[2] - s[1] * s[1], 0.0))


@wp.func(inline=False)
def support_local(g: ConvexGeo, verts: wp.array(dtype=wp.vec3), d: wp.vec3, core: int):
    s = g.s
    t = g.t
    ln = wp.length(d)
    u = wp.vec3(0.0, 0.0, 1.0)
    if ln > 1.0e-20:
        u = d / ln
    if t == SPHERE:
        if core != 0:
            return wp.vec3(0.0)
        return s[0] * u
    if t == CAPSULE:
        p = wp.vec3(0.0, 0.0, sgn(u[2]) * s[1])
        if core != 0:
            return p
        return p + s[0] * u
    if t == BOX:
        return wp.vec3(sgn(u[0]) * s[0], sgn(u[1]) * s[1], sgn(u[2]) * s[2])
    if t == ELLIPSOID:
        q = wp.vec3(s[0] * s[0] * u[0], s[1] * s[1] * u[1], s[2] * s[2] * u[2])
        den = wp.sqrt(s[0] * s[0] * u[0] * u[0] + s[1] * s[1] * u[1] * u[1] + s[2] * s[2] * u[2] * u[2])
        return q / wp.max(den, 1.0e-20)
    if t == CYLINDER or t == CONE:
        rl = wp.sqrt(u[0] * u[0] + u[1] * u[1])
        rx = float(1.0)
        ry = float(0.0)
        if rl > 1.0e-12:
            rx = u[0] / rl
            ry = u[1] / rl
        if t == CONE:
            apex = wp.vec3(0.0, 0.0, s[1])
            rim = wp.vec3(s[0] * rx, s[0] * ry, -s[1])
            if wp.dot(apex, u) >= wp.dot(rim, u):
                return apex
            return rim
        if s[2] > 0.0:
            # barrel: profile disk of radius s[2] centered at radial offset c, cut by |z| <= h
            c = barrel_center(s)
            z = s[2] * u[2]
            if wp.abs(z) <= s[1]:
                rho = c + s[2] * rl
                return wp.vec3(rho * rx, rho * ry, z)
        return wp.vec3(s[0] * rx, s[0] * ry, sgn(u[2]) * s[1])
    if t == TRIANGLE:
        h0 = wp.dot(g.p0, u)
        h1 = wp.dot(g.p1, u)
        h2 = wp.dot(g.p2, u)
        if h0 >= h1 and h0 >= h2:
            return g.p0
        if h1 >= h2:
            return g.p1
        return g.p2
    if t == CONVEX_MESH:
        ds = wp.vec3(u[0] * s[0], u[1] * s[1], u[2] * s[2])
        best = float(-1.0e30)
        bi = g.vstart
        for i in range(g.vstart, g.vstart + g.vcount):
            h = wp.dot(verts[i], ds)
            if h > best:
                best = h
                bi = i
        v = verts[bi]
        return wp.vec3(v[0] * s[0], v[1] * s[1], v[2] * s[2])
    return wp.vec3(0.0)


@wp.func
def support_world(g: ConvexGeo, verts: wp.array(dtype=wp.vec3), d: wp.vec3, core: int):
    q = wp.transform_get_rotation(g.X)
    return wp.transform_point(g.X, support_local(g, verts, wp.quat_rotate_inv(q, d), core))


@wp.func
def shape_center(g: ConvexGeo, verts: wp.array(dtype=wp.vec3)):
    """A point strictly inside the shape (world)."""
    c = wp.vec3(0.0)
    if g.t == TRIANGLE:
        c = (g.p0 + g.p1 + g.p2) / 3.0
    if g.t == CONVEX_MESH and g.vcount > 0:
        for i in range(g.vstart, g.vstart + g.vcount):
            v = verts[i]
            c += wp.vec3(v[0] * g.s[0], v[1] * g.s[1], v[2] * g.s[2])
        c = c / float(g.vcount)
    return wp.transform_point(g.X, c)


@wp.func
def shape_scale_len(g: ConvexGeo):
    if g.t == TRIANGLE:
        return 0.5 * wp.max(wp.max(wp.length(g.p1 - g.p0), wp.length(g.p2 - g.p0)), wp.length(g.p2 - g.p1))
    return wp.max(wp.max(wp.abs(g.s[0]), wp.abs(g.s[1])), wp.abs(g.s[2]))


@wp.func
def circle_feature(X: wp.transform, r: float, z: float, offset: float):
    pts = mat83f()
    for k in range(8):
        a = (float(k) + offset) * 0.7853981633974483
        pts[k] = wp.transform_point(X, wp.vec3(r * wp.cos(a), r * wp.sin(a), z))
    return pts


@wp.func(inline=False)
def support_feature(g: ConvexGeo, verts: wp.array(dtype=wp.vec3), d: wp.vec3):
    """Support feature along world direction ``d``: (points in cyclic order (world), count)."""
    pts = mat83f()
    q = wp.transform_get_rotation(g.X)
    u = wp.normalize(wp.quat_rotate_inv(q, d))
    s = g.s
    X = g.X
    t = g.t
    tol = FEATURE_SIN_TOL
    if t == BOX:
        nz = int(0)
        for i in range(3):
            if wp.abs(u[i]) <= tol:
                nz += 1
        if nz == 2:
            ax = int(0)
            for i in range(3):
                if wp.abs(u[i]) > tol:
                    ax = i
            k = (ax + 1) % 3
            l = (ax + 2) % 3
            for ci in range(4):
                p = wp.vec3(0.0)
                p[ax] = sgn(u[ax]) * s[ax]
                sk = float(1.0)
                sl = float(1.0)
                if ci == 1 or ci == 2:
                    sk = -1.0
                if ci >= 2:
                    sl = -1.0
                p[k] = sk * s[k]
                p[l] = sl * s[l]
                pts[ci] = wp.transform_point(X, p)
            return pts, 4
        if nz == 1:
            ax = int(0)
            for i in range(3):
                if wp.abs(u[i]) <= tol:
                    ax = i
            p = wp.vec3(sgn(u[0]) * s[0], sgn(u[1]) * s[1], sgn(u[2]) * s[2])
            p0 = p
            p1 = p
            p0[ax] = -s[ax]
            p1[ax] = s[ax]
            pts[0] = wp.transform_point(X, p0)
            pts[1] = wp.transform_point(X, p1)
            return pts, 2
        pts[0] = wp.transform_point(X, wp.vec3(sgn(u[0]) * s[0], sgn(u[1]) * s[1], sgn(u[2]) * s[2]))
        return pts, 1
    if t == TRIANGLE:
        h0 = wp.dot(g.p0, u)
        h1 = wp.dot(g.p1, u)
        h2 = wp.dot(g.p2, u)
        hm = wp.max(h0, wp.max(h1, h2))
        thr = hm - tol * 2.0 * shape_scale_len(g)
        m = int(0)
        if h0 >= thr:
            pts[m] = wp.transform_point(X, g.p0)
            m += 1
        if h1 >= thr:
            pts[m] = wp.transform_point(X, g.p1)
            m += 1
        if h2 >= thr:
            pts[m] = wp.transform_point(X, g.p2)
            m += 1
        return pts, m
    if t == CAPSULE:
        if wp.abs(u[2]) <= tol:
            pts[0] = wp.transform_point(X, wp.vec3(0.0, 0.0, -s[1]) + s[0] * u)
            pts[1] = wp.transform_point(X, wp.vec3(0.0, 0.0, s[1]) + s[0] * u)
            return pts, 2
    if t == CYLINDER:
        rl = wp.sqrt(u[0] * u[0] + u[1] * u[1])
        if rl <= tol:
            return circle_feature(X, s[0], sgn(u[2]) * s[1], 0.0), 8
        if wp.abs(u[2]) <= tol and s[2] <= 0.0:
            rx = u[0] / rl
            ry = u[1] / rl
            pts[0] = wp.transform_point(X, wp.vec3(s[0] * rx, s[0] * ry, -s[1]))
            pts[1] = wp.transform_point(X, wp.vec3(s[0] * rx, s[0] * ry, s[1]))
            return pts, 2
    if t == CONE:
        rl = wp.sqrt(u[0] * u[0] + u[1] * u[1])
        if rl <= tol and u[2] < 0.0:
            return circle_feature(X, s[0], -s[1], 0.0), 8
        if rl > 1.0e-9:
            rx = u[0] / rl
            ry = u[1] / rl
            # side generator outward normal in the (radial, z) plane
            gn = wp.normalize(wp.vec2(2.0 * s[1], s[0]))
            if wp.abs(rl * gn[1] - u[2] * gn[0]) <= tol and u[2] > -0.999:
                pts[0] = wp.transform_point(X, wp.vec3(0.0, 0.0, s[1]))
                pts[1] = wp.transform_point(X, wp.vec3(s[0] * rx, s[0] * ry, -s[1]))
                return pts, 2
    if t == CONVEX_MESH:
        ds = wp.vec3(u[0] * s[0], u[1] * s[1], u[2] * s[2])
        best = float(-1.0e30)
        rad = float(0.0)
        for i in range(g.vstart, g.vstart + g.vcount):
            v = verts[i]
            best = wp.max(best, wp.dot(v, ds))
            rad = wp.max(rad, wp.length(wp.vec3(v[0] * s[0], v[1] * s[1], v[2] * s[2])))
        thr = best - MESH_FEATURE_TOL * rad
        m = int(0)
        for i in range(g.vstart, g.vstart + g.vcount):
            v = verts[i]
            if wp.dot(v, ds) >= thr and m < 8:
                pts[m] = wp.vec3(v[0] * s[0], v[1] * s[1], v[2] * s[2])
                m += 1
        if m >= 3:
            # cyclic order by angle around the centroid in the plane normal to u
            cen = wp.vec3(0.0)
            for i in range(m):
                cen += pts[i]
            cen = cen / float(m)
            e1 = wp.vec3(1.0, 0.0, 0.0)
            if wp.abs(u[0]) > 0.57:
                e1 = wp.vec3(0.0, 1.0, 0.0)
            e1 = wp.normalize(wp.cross(u, e1))
            e2 = wp.cross(u, e1)
            ang = vec8f()
            for i in range(m):
                r = pts[i] - cen
                ang[i] = wp.atan2(wp.dot(r, e2), wp.dot(r, e1))
            for i in range(1, m):
                j = i
                while j > 0 and ang[j - 1] > ang[j]:
                    ta = ang[j]
                    ang[j] = ang[j - 1]
                    ang[j - 1] = ta
                    tp = pts[j]
                    pts[j] = pts[j - 1]
                    pts[j - 1] = tp
                    j -= 1
        for i in range(m):
            pts[i] = wp.transform_point(X, pts[i])
        return pts, m
    pts[0] = support_world(g, verts, d, 0)
    return pts, 1

"""Warp kernels of :class:`armillary.sensors.SensorTiledCamera`: ray / shape intersections, the
per-world scene traversal and the render kernel.

Conventions: every intersection routine works in the shape's local frame with a unit ray
direction, so the returned parameter ``t`` is the distance along the world ray [m]. Triangle
meshes and heightfields are queried through :class:`warp.Mesh` BVHs in unscaled local
coordinates (the scale divides the local ray; ``t`` stays the world distance). Bounded shapes of
every world sit in one grouped :class:`warp.Bvh` over their rotated local boxes (group = world,
global shapes in group ``world_count``); a ray tests its group's union box before walking the
group's BVH from its precomputed root; infinite planes are looped over per group as world plane
equations. Particles are spheres in a grouped BVH, cloth triangles a grouped :class:`warp.Mesh`
over ``particle_q``.

Speed notes (CPU): Warp passes structs by value, so only force-inlined functions take the scene
struct; intersection routines take the shape's data as values. The render kernel is large, so on
the CPU one thread renders a whole image row (see ``RenderParams.span``).

A surface hit is "front" when the ray meets its outward normal (``dot(n, d) < 0``); with back-face
culling only front hits count (a camera inside a solid sees through it), without it the back
hit is returned with its normal flipped toward the camera. Cloth is always two-sided.
"""

from __future__ import annotations

import inspect

import warp as wp

from ..sim.enums import GeoType
from ..utils.color import linear_to_srgb_wp, srgb_to_linear_vec3_wp

wp.set_module_options({"enable_backward": False})

#: ``@wp.func`` forced inline where this Warp supports the hint (1.19+): the per-ray traversal
#: functions take the scene struct by value, which an out-of-line call copies (kilobytes) per ray.
func_inline = wp.func(inline=True) if "inline" in inspect.signature(wp.func).parameters else wp.func

PLANE = wp.constant(int(GeoType.PLANE))
HFIELD = wp.constant(int(GeoType.HFIELD))
SPHERE = wp.constant(int(GeoType.SPHERE))
CAPSULE = wp.constant(int(GeoType.CAPSULE))
ELLIPSOID = wp.constant(int(GeoType.ELLIPSOID))
CYLINDER = wp.constant(int(GeoType.CYLINDER))
BOX = wp.constant(int(GeoType.BOX))
MESH = wp.constant(int(GeoType.MESH))
CONE = wp.constant(int(GeoType.CONE))
CONVEX_MESH = wp.constant(int(GeoType.CONVEX_MESH))

#: kind of the closest hit
HIT_NONE = wp.constant(0)
HIT_SHAPE = wp.constant(1)
HIT_PARTICLE = wp.constant(2)
HIT_CLOTH = wp.constant(3)

T_EPS = wp.constant(1.0e-6)
BIG = wp.constant(1.0e30)
#: marching steps of the barrel-cylinder side (bisection refines the bracketed root)
BARREL_STEPS = wp.constant(48)
#: shape_index values: no hit (default clear value), a particle, a cloth triangle
INDEX_NONE = wp.constant(wp.uint32(0xFFFFFFFF))
INDEX_PARTICLE = wp.constant(wp.uint32(0xFFFFFFFE))
INDEX_CLOTH = wp.constant(wp.uint32(0xFFFFFFFD))
HASH_MUL = wp.constant(wp.uint32(2654435761))


@wp.struct
class SceneData:
    """Device-side scene description (built once by the sensor; refreshed per render)."""

    world_count: int
    # shapes (indexed by model shape id)
    shape_type: wp.array(dtype=int)
    shape_scale: wp.array(dtype=wp.vec3)
    shape_xform: wp.array(dtype=wp.transform)  # world transforms, refreshed each render
    shape_color: wp.array(dtype=wp.vec3)  # model's display sRGB colours
    shape_color_override: wp.array(dtype=wp.vec4)  # w > 0: Mesh.color (sRGB) replaces shape_color
    shape_mesh: wp.array(dtype=wp.uint64)  # wp.Mesh id (MESH, CONVEX_MESH, HFIELD)
    shape_tex: wp.array(dtype=int)  # texture index or -1
    shape_uv_start: wp.array(dtype=int)  # first uv of the source mesh or -1
    shape_tex_xform: wp.array(dtype=wp.vec3, ndim=2)  # (n, 2): u' = r0 . (u, v, 1), v' = r1 . (u, v, 1)
    shape_albedo: wp.array(dtype=wp.vec3)  # linear base colour, refreshed each render
    shape_plane: wp.array(dtype=wp.vec4)  # world plane (unit +z axis, offset) of each shape, refreshed each render
    # bounded shapes: grouped BVH over bounding boxes
    shape_bvh: wp.uint64
    bounded_shape: wp.array(dtype=int)  # BVH item -> shape id
    group_root: wp.array(dtype=int)  # (world_count + 1,) BVH root node of each group, -1 if empty
    group_lower: wp.array(dtype=wp.vec3)  # (world_count + 1,) world box of each group's bounded shapes
    group_upper: wp.array(dtype=wp.vec3)
    # unbounded shapes (infinite planes only) per group, CSR
    unbounded_start: wp.array(dtype=int)  # (world_count + 2,)
    unbounded_shape: wp.array(dtype=int)
    # textures (linear RGB texels, concatenated)
    uvs: wp.array(dtype=wp.vec2)
    tex_data: wp.array(dtype=wp.vec3)
    tex_start: wp.array(dtype=int)
    tex_size: wp.array(dtype=wp.vec2i)  # (width, height)
    # particles
    particle_bvh: wp.uint64
    particle_item: wp.array(dtype=int)  # BVH item -> particle id
    group_has_particles: wp.array(dtype=int)
    particle_q: wp.array(dtype=wp.vec3)
    particle_radius: wp.array(dtype=float)
    particle_color: wp.vec3  # display sRGB
    # cloth
    cloth_mesh: wp.uint64
    group_has_cloth: wp.array(dtype=int)
    tri_color: wp.array(dtype=wp.vec3)  # display sRGB, per triangle
    # linear -> display sRGB byte table (:func:`srgb_byte`)
    srgb_lut_base: wp.array(dtype=wp.uint32)
    srgb_lut_thr: wp.array(dtype=float)


@wp.struct
class Hit:
    kind: int
    index: int  # shape, particle or triangle id
    t: float
    n: wp.vec3  # world normal facing the ray origin side as described in the module docstring
    face: int  # mesh face (textures)
    u: float
    v: float


@wp.func
def no_hit(max_t: float):
    h = Hit()
    h.kind = HIT_NONE
    h.index = -1
    h.t = max_t
    h.n = wp.vec3(0.0)
    h.face = -1
    h.u = 0.0
    h.v = 0.0
    return h


@wp.func
def accept(t: float, n: wp.vec3, d: wp.vec3, cull: int, best_t: float, best_n: wp.vec3):
    """Keep (t, n) if it is a valid surface hit closer than best_t; n is the outward normal."""
    if t > T_EPS and t < best_t:
        front = wp.dot(n, d) < 0.0
        if front:
            return t, n
        if cull == 0:
            return t, -n
    return best_t, best_n


@wp.func
def quad_roots(a: float, b: float, c: float):
    """Real roots of a t^2 + b t + c (t0 <= t1); ok = 0 when none."""
    if wp.abs(a) < 1.0e-12:
        if wp.abs(b) < 1.0e-12:
            return 0, 0.0, 0.0
        r = -c / b
        return 1, r, r
    disc = b * b - 4.0 * a * c
    if disc < 0.0:
        return 0, 0.0, 0.0
    sq = wp.sqrt(disc)
    # numerically stable pair
    q = -0.5 * (b + wp.where(b >= 0.0, sq, -sq))
    r0 = q / a
    r1 = r0
    if wp.abs(q) > 0.0:
        r1 = c / q
    return 1, wp.min(r0, r1), wp.max(r0, r1)


@wp.func
def isect_sphere(o: wp.vec3, d: wp.vec3, r: float, cull: int, best_t: float):
    bt = best_t
    bn = wp.vec3(0.0)
    ok, t0, t1 = quad_roots(1.0, 2.0 * wp.dot(o, d), wp.dot(o, o) - r * r)
    if ok != 0:
        bt, bn = accept(t0, wp.normalize(o + t0 * d), d, cull, bt, bn)
        bt, bn = accept(t1, wp.normalize(o + t1 * d), d, cull, bt, bn)
    return bt, bn


@wp.func
def isect_ellipsoid(o: wp.vec3, d: wp.vec3, s: wp.vec3, cull: int, best_t: float):
    bt = best_t
    bn = wp.vec3(0.0)
    os = wp.cw_div(o, s)
    ds = wp.cw_div(d, s)
    ok, t0, t1 = quad_roots(wp.dot(ds, ds), 2.0 * wp.dot(os, ds), wp.dot(os, os) - 1.0)
    if ok != 0:
        p0 = o + t0 * d
        p1 = o + t1 * d
        bt, bn = accept(t0, wp.normalize(wp.cw_div(p0, wp.cw_mul(s, s))), d, cull, bt, bn)
        bt, bn = accept(t1, wp.normalize(wp.cw_div(p1, wp.cw_mul(s, s))), d, cull, bt, bn)
    return bt, bn


@wp.func
def isect_box(o: wp.vec3, d: wp.vec3, h: wp.vec3, cull: int, best_t: float):
    tnear = -BIG
    tfar = BIG
    an = int(-1)
    af = int(-1)
    sn = float(0.0)
    sf = float(0.0)
    for k in range(3):
        if wp.abs(d[k]) < 1.0e-12:
            if wp.abs(o[k]) > h[k]:
                return best_t, wp.vec3(0.0)
        else:
            inv = 1.0 / d[k]
            ta = (-h[k] - o[k]) * inv
            tb = (h[k] - o[k]) * inv
            # entering face: the one facing against d
            s_in = wp.where(d[k] > 0.0, -1.0, 1.0)
            t_in = wp.min(ta, tb)
            t_out = wp.max(ta, tb)
            if t_in > tnear:
                tnear = t_in
                an = k
                sn = s_in
            if t_out < tfar:
                tfar = t_out
                af = k
                sf = -s_in
    bt = best_t
    bn = wp.vec3(0.0)
    if tnear <= tfar and an >= 0:
        nn = wp.vec3(0.0)
        nn[an] = sn
        bt, bn = accept(tnear, nn, d, cull, bt, bn)
        nf = wp.vec3(0.0)
        nf[af] = sf
        bt, bn = accept(tfar, nf, d, cull, bt, bn)
    return bt, bn


@wp.func
def isect_cyl_side(o: wp.vec3, d: wp.vec3, r: float, zlo: float, zhi: float, cull: int, bt: float, bn: wp.vec3):
    """Side of the z-aligned cylinder of radius r between zlo and zhi."""
    a = d[0] * d[0] + d[1] * d[1]
    if a > 1.0e-12:
        ok, t0, t1 = quad_roots(a, 2.0 * (o[0] * d[0] + o[1] * d[1]), o[0] * o[0] + o[1] * o[1] - r * r)
        if ok != 0:
            p0 = o + t0 * d
            if p0[2] >= zlo and p0[2] <= zhi:
                bt, bn = accept(t0, wp.normalize(wp.vec3(p0[0], p0[1], 0.0)), d, cull, bt, bn)
            p1 = o + t1 * d
            if p1[2] >= zlo and p1[2] <= zhi:
                bt, bn = accept(t1, wp.normalize(wp.vec3(p1[0], p1[1], 0.0)), d, cull, bt, bn)
    return bt, bn


@wp.func
def isect_disk(o: wp.vec3, d: wp.vec3, z: float, r: float, nz: float, cull: int, bt: float, bn: wp.vec3):
    """Disk of radius r in the plane at height z with outward normal (0, 0, nz)."""
    if wp.abs(d[2]) > 1.0e-12:
        t = (z - o[2]) / d[2]
        p = o + t * d
        if p[0] * p[0] + p[1] * p[1] <= r * r:
            bt, bn = accept(t, wp.vec3(0.0, 0.0, nz), d, cull, bt, bn)
    return bt, bn


@wp.func
def isect_capsule(o: wp.vec3, d: wp.vec3, r: float, hh: float, cull: int, best_t: float):
    bt = best_t
    bn = wp.vec3(0.0)
    bt, bn = isect_cyl_side(o, d, r, -hh, hh, cull, bt, bn)
    for k in range(2):
        zc = wp.where(k == 0, hh, -hh)
        c = wp.vec3(0.0, 0.0, zc)
        oc = o - c
        ok, t0, t1 = quad_roots(1.0, 2.0 * wp.dot(oc, d), wp.dot(oc, oc) - r * r)
        if ok != 0:
            for j in range(2):
                t = wp.where(j == 0, t0, t1)
                p = o + t * d
                if (k == 0 and p[2] >= hh) or (k == 1 and p[2] <= -hh):
                    bt, bn = accept(t, wp.normalize(p - c), d, cull, bt, bn)
    return bt, bn


@wp.func
def barrel_f(p: wp.vec3, c: float, rb: float):
    """Radial distance minus the barrel profile radius at height p.z (c + sqrt(rb^2 - z^2))."""
    return wp.sqrt(p[0] * p[0] + p[1] * p[1]) - (c + wp.sqrt(wp.max(rb * rb - p[2] * p[2], 0.0)))


@wp.func
def isect_cylinder(o: wp.vec3, d: wp.vec3, s: wp.vec3, cull: int, best_t: float):
    r = s[0]
    hh = s[1]
    rb = s[2]
    bt = best_t
    bn = wp.vec3(0.0)
    if rb <= 0.0:
        bt, bn = isect_cyl_side(o, d, r, -hh, hh, cull, bt, bn)
    else:
        # barrel side: profile c + sqrt(rb^2 - z^2) through (r, +-hh); march inside the bounding cylinder
        c = r - wp.sqrt(wp.max(rb * rb - hh * hh, 0.0))
        rmax = (c + rb) * 1.001 + 1.0e-6  # strictly outside the widest circle: the march starts outside
        a = d[0] * d[0] + d[1] * d[1]
        ta = float(0.0)
        tb = float(0.0)
        okr = int(0)
        if a > 1.0e-12:
            okr, ta, tb = quad_roots(a, 2.0 * (o[0] * d[0] + o[1] * d[1]), o[0] * o[0] + o[1] * o[1] - rmax * rmax)
        elif o[0] * o[0] + o[1] * o[1] <= rmax * rmax:
            okr = 1
            ta = -BIG
            tb = BIG
        if okr != 0:
            # clip to the slab |z| <= hh
            if wp.abs(d[2]) > 1.0e-12:
                z0 = (-hh - o[2]) / d[2]
                z1 = (hh - o[2]) / d[2]
                ta = wp.max(ta, wp.min(z0, z1))
                tb = wp.min(tb, wp.max(z0, z1))
            elif wp.abs(o[2]) > hh:
                tb = ta - 1.0
            ta = wp.max(ta, 0.0)
            tb = wp.min(tb, bt)
            if tb > ta:
                dt = (tb - ta) / float(BARREL_STEPS)
                tp = ta
                fp = barrel_f(o + ta * d, c, rb)
                found = int(0)
                for i in range(BARREL_STEPS):
                    if found == 0:
                        tn = ta + float(i + 1) * dt
                        fn = barrel_f(o + tn * d, c, rb)
                        if (fp > 0.0) != (fn > 0.0):
                            lo = tp
                            hi = tn
                            flo = fp
                            for _it in range(30):
                                mid = 0.5 * (lo + hi)
                                fm = barrel_f(o + mid * d, c, rb)
                                if (fm > 0.0) == (flo > 0.0):
                                    lo = mid
                                    flo = fm
                                else:
                                    hi = mid
                            t = 0.5 * (lo + hi)
                            p = o + t * d
                            rho = wp.sqrt(p[0] * p[0] + p[1] * p[1])
                            sq = wp.sqrt(wp.max(rb * rb - p[2] * p[2], 1.0e-12))
                            # gradient of rho - c - sqrt(rb^2 - z^2)
                            g = wp.vec3(p[0] / wp.max(rho, 1.0e-12), p[1] / wp.max(rho, 1.0e-12), p[2] / sq)
                            bt2, bn2 = accept(t, wp.normalize(g), d, cull, bt, bn)
                            if bt2 < bt:  # else a culled back hit: keep marching to the next crossing
                                bt = bt2
                                bn = bn2
                                found = 1
                        tp = tn
                        fp = fn
    bt, bn = isect_disk(o, d, hh, r, 1.0, cull, bt, bn)
    bt, bn = isect_disk(o, d, -hh, r, -1.0, cull, bt, bn)
    return bt, bn


@wp.func
def isect_cone(o: wp.vec3, d: wp.vec3, r: float, hh: float, cull: int, best_t: float):
    """Cone of base radius r at z = -hh, apex at z = +hh."""
    bt = best_t
    bn = wp.vec3(0.0)
    k = r / (2.0 * hh)
    k2 = k * k
    w = hh - o[2]
    a = d[0] * d[0] + d[1] * d[1] - k2 * d[2] * d[2]
    b = 2.0 * (o[0] * d[0] + o[1] * d[1] + k2 * w * d[2])
    c = o[0] * o[0] + o[1] * o[1] - k2 * w * w
    ok, t0, t1 = quad_roots(a, b, c)
    if ok != 0:
        for j in range(2):
            t = wp.where(j == 0, t0, t1)
            p = o + t * d
            if p[2] >= -hh and p[2] <= hh:
                n = wp.vec3(p[0], p[1], k2 * (hh - p[2]))
                if wp.length(n) > 1.0e-12:
                    bt, bn = accept(t, wp.normalize(n), d, cull, bt, bn)
    bt, bn = isect_disk(o, d, -hh, r, -1.0, cull, bt, bn)
    return bt, bn


@wp.func
def isect_plane(o: wp.vec3, d: wp.vec3, s: wp.vec3, cull: int, best_t: float):
    bt = best_t
    bn = wp.vec3(0.0)
    if wp.abs(d[2]) > 1.0e-12:
        t = -o[2] / d[2]
        p = o + t * d
        inside = True
        if s[0] > 0.0 and s[1] > 0.0:
            inside = wp.abs(p[0]) <= 0.5 * s[0] and wp.abs(p[1]) <= 0.5 * s[1]
        if inside:
            bt, bn = accept(t, wp.vec3(0.0, 0.0, 1.0), d, cull, bt, bn)
    return bt, bn


@wp.func
def intersect_shape(typ: int, X: wp.transform, sc: wp.vec3, mesh: wp.uint64, o: wp.vec3, d: wp.vec3, cull: int,
                    best_t: float):  # fmt: skip
    """Closest hit of the world ray (o, d) with one shape (type, world pose X, scale, mesh id) if
    closer than best_t: returns (t, world normal, mesh face, barycentric u, v); t == best_t (and
    face -1) when there is none. Takes the shape's data as values, never the scene struct, so a
    call copies a few words (Warp passes structs by value)."""
    q = wp.transform_get_rotation(X)
    lo = wp.quat_rotate_inv(q, o - wp.transform_get_translation(X))
    ld = wp.quat_rotate_inv(q, d)
    t = best_t
    n = wp.vec3(0.0)
    face = int(-1)
    u = float(0.0)
    v = float(0.0)
    if typ == BOX:
        t, n = isect_box(lo, ld, sc, cull, best_t)
    elif typ == SPHERE:
        t, n = isect_sphere(lo, ld, sc[0], cull, best_t)
    elif typ == CAPSULE:
        t, n = isect_capsule(lo, ld, sc[0], sc[1], cull, best_t)
    elif typ == CYLINDER:
        t, n = isect_cylinder(lo, ld, sc, cull, best_t)
    elif typ == CONE:
        t, n = isect_cone(lo, ld, sc[0], sc[1], cull, best_t)
    elif typ == ELLIPSOID:
        t, n = isect_ellipsoid(lo, ld, sc, cull, best_t)
    elif typ == PLANE:
        t, n = isect_plane(lo, ld, sc, cull, best_t)
    elif typ == MESH or typ == CONVEX_MESH or typ == HFIELD:
        mo = wp.cw_div(lo, sc)
        md = wp.cw_div(ld, sc)
        mq = wp.mesh_query_ray(mesh, mo, md, best_t)
        if mq.result:
            # face normal in the scaled frame: inverse-transpose of the scale
            nl = wp.normalize(wp.cw_div(mq.normal, sc))
            flip = sc[0] * sc[1] * sc[2] < 0.0  # mirrored scale flips the winding
            if flip:
                nl = -nl
            front = wp.dot(nl, ld) < 0.0
            if front or cull == 0:
                t = mq.t
                n = wp.where(front, nl, -nl)
                face = mq.face
                u = mq.u
                v = mq.v
    return t, wp.quat_rotate(q, n), face, u, v


@wp.func
def intersect_infinite_plane(plane: wp.vec4, o: wp.vec3, d: wp.vec3, cull: int, best_t: float):
    """Infinite plane ``dot(n, x) = w`` (world unit normal n = plane.xyz, its +z axis; offset w):
    (t, normal facing the ray side per :func:`accept`); t == best_t when there is no closer hit."""
    n = wp.vec3(plane[0], plane[1], plane[2])
    dn = wp.dot(n, d)
    bt = best_t
    bn = wp.vec3(0.0)
    if wp.abs(dn) > 1.0e-12:
        bt, bn = accept((plane[3] - wp.dot(n, o)) / dn, n, d, cull, bt, bn)
    return bt, bn


@wp.func
def ray_hits_box(o: wp.vec3, inv_d: wp.vec3, lower: wp.vec3, upper: wp.vec3, max_t: float):
    """Slab test: does the ray o + t d (inv_d = 1 / d per axis, +-inf allowed) meet the box for
    some t in [0, max_t]? Conservative (used only to skip work)."""
    t0 = float(0.0)
    t1 = max_t
    for k in range(3):
        ta = (lower[k] - o[k]) * inv_d[k]
        tb = (upper[k] - o[k]) * inv_d[k]
        t0 = wp.max(t0, wp.min(ta, tb))
        t1 = wp.min(t1, wp.max(ta, tb))
    return t0 <= t1 * 1.00001 + 1.0e-6


@wp.func
def safe_inv(d: wp.vec3):
    """Per-axis 1 / d with +-BIG for (near) zero components."""
    r = wp.vec3(0.0)
    for k in range(3):
        if wp.abs(d[k]) > 1.0e-20:
            r[k] = 1.0 / d[k]
        else:
            r[k] = wp.where(d[k] >= 0.0, BIG, -BIG)
    return r


@func_inline
def trace(scene: SceneData, world: int, o: wp.vec3, d: wp.vec3, max_t: float, cull: int, particles: int, use_global: int):
    """Closest hit of the world ray (o, d) (unit d) among the shapes, particles and cloth of
    ``world`` and, when use_global != 0, of the global group. Per group: the group's bounding
    box is tested first (most rays of a camera miss most of a world), then its BVH is walked with
    the query distance shrinking to the closest hit so far, then its infinite planes, particles
    and cloth. Call it from one place per kernel (it takes the scene struct by value)."""
    h = no_hit(max_t)
    inv_d = safe_inv(d)
    ng = wp.where(use_global != 0, 2, 1)
    for gi in range(ng):
        g = wp.where(gi == 0, world, scene.world_count)
        root = scene.group_root[g]
        if root >= 0:
            if ray_hits_box(o, inv_d, scene.group_lower[g], scene.group_upper[g], h.t):
                query = wp.bvh_query_ray(scene.shape_bvh, o, d, root)
                item = int(0)
                while wp.bvh_query_next(query, item, h.t):
                    s = scene.bounded_shape[item]
                    t, n, face, u, v = intersect_shape(scene.shape_type[s], scene.shape_xform[s], scene.shape_scale[s],
                                                       scene.shape_mesh[s], o, d, cull, h.t)  # fmt: skip
                    if t < h.t:
                        h.kind = HIT_SHAPE
                        h.index = s
                        h.t = t
                        h.n = n
                        h.face = face
                        h.u = u
                        h.v = v
        for k in range(scene.unbounded_start[g], scene.unbounded_start[g + 1]):
            s = scene.unbounded_shape[k]
            t, n = intersect_infinite_plane(scene.shape_plane[s], o, d, cull, h.t)
            if t < h.t:
                h.kind = HIT_SHAPE
                h.index = s
                h.t = t
                h.n = n
                h.face = -1
                h.u = 0.0
                h.v = 0.0
        if particles != 0 and scene.group_has_particles[g] != 0:
            proot = wp.bvh_get_group_root(scene.particle_bvh, g)
            pquery = wp.bvh_query_ray(scene.particle_bvh, o, d, proot)
            pitem = int(0)
            while wp.bvh_query_next(pquery, pitem, h.t):
                pid = scene.particle_item[pitem]
                pt, pn = isect_sphere(o - scene.particle_q[pid], d, scene.particle_radius[pid], cull, h.t)
                if pt < h.t:
                    h.kind = HIT_PARTICLE
                    h.index = pid
                    h.t = pt
                    h.n = pn
                    h.face = -1
        if scene.group_has_cloth[g] != 0:
            croot = wp.mesh_get_group_root(scene.cloth_mesh, g)
            mq = wp.mesh_query_ray(scene.cloth_mesh, o, d, h.t, croot)
            if mq.result and mq.t > T_EPS and mq.t < h.t:
                h.kind = HIT_CLOTH
                h.index = mq.face
                h.t = mq.t
                h.n = wp.where(wp.dot(mq.normal, d) < 0.0, mq.normal, -mq.normal)  # two-sided
                h.face = mq.face
    return h


@wp.func
def occluded(scene: SceneData, world: int, o: wp.vec3, d: wp.vec3, max_t: float, particles: int, use_global: int):
    """Whether anything (both faces count) lies on the ray (o, d) within (T_EPS, max_t): the shadow
    test, stopping at the first hit."""
    inv_d = safe_inv(d)
    ng = wp.where(use_global != 0, 2, 1)
    for gi in range(ng):
        g = wp.where(gi == 0, world, scene.world_count)
        root = scene.group_root[g]
        if root >= 0:
            if ray_hits_box(o, inv_d, scene.group_lower[g], scene.group_upper[g], max_t):
                query = wp.bvh_query_ray(scene.shape_bvh, o, d, root)
                item = int(0)
                while wp.bvh_query_next(query, item, max_t):
                    s = scene.bounded_shape[item]
                    t, n, face, u, v = intersect_shape(scene.shape_type[s], scene.shape_xform[s], scene.shape_scale[s],
                                                       scene.shape_mesh[s], o, d, 0, max_t)  # fmt: skip
                    if t < max_t:
                        return True
        for k in range(scene.unbounded_start[g], scene.unbounded_start[g + 1]):
            s = scene.unbounded_shape[k]
            t, n = intersect_infinite_plane(scene.shape_plane[s], o, d, 0, max_t)
            if t < max_t:
                return True
        if particles != 0 and scene.group_has_particles[g] != 0:
            proot = wp.bvh_get_group_root(scene.particle_bvh, g)
            pquery = wp.bvh_query_ray(scene.particle_bvh, o, d, proot)
            pitem = int(0)
            while wp.bvh_query_next(pquery, pitem, max_t):
                pid = scene.particle_item[pitem]
                pt, pn = isect_sphere(o - scene.particle_q[pid], d, scene.particle_radius[pid], 0, max_t)
                if pt < max_t:
                    return True
        if scene.group_has_cloth[g] != 0:
            croot = wp.mesh_get_group_root(scene.cloth_mesh, g)
            mq = wp.mesh_query_ray(scene.cloth_mesh, o, d, max_t, croot)
            if mq.result and mq.t > T_EPS and mq.t < max_t:
                return True
    return False


@wp.func
def sample_texture(scene: SceneData, tex: int, uv: wp.vec2):
    """Bilinear, repeating lookup of linear texels; uv (0, 0) is the image's bottom-left corner."""
    size = scene.tex_size[tex]
    w = size[0]
    hgt = size[1]
    x = (uv[0] - wp.floor(uv[0])) * float(w) - 0.5
    y = (1.0 - (uv[1] - wp.floor(uv[1]))) * float(hgt) - 0.5
    x0 = int(wp.floor(x))
    y0 = int(wp.floor(y))
    fx = x - float(x0)
    fy = y - float(y0)
    base = scene.tex_start[tex]
    c = wp.vec3(0.0)
    for k in range(4):
        dx = k % 2
        dy = k // 2
        xi = ((x0 + dx) % w + w) % w
        yi = ((y0 + dy) % hgt + hgt) % hgt
        wgt = wp.where(dx == 1, fx, 1.0 - fx) * wp.where(dy == 1, fy, 1.0 - fy)
        c += wgt * scene.tex_data[base + yi * w + xi]
    return c


@func_inline
def hit_albedo(scene: SceneData, h: Hit, textures: int):
    """Linear base colour at the hit (shape colours are converted once per render)."""
    if h.kind == HIT_SHAPE:
        s = h.index
        c = scene.shape_albedo[s]
        if textures != 0 and h.face >= 0:
            tex = scene.shape_tex[s]
            us = scene.shape_uv_start[s]
            if tex >= 0 and us >= 0:
                mid = scene.shape_mesh[s]
                i0 = wp.mesh_get_index(mid, 3 * h.face + 0)
                i1 = wp.mesh_get_index(mid, 3 * h.face + 1)
                i2 = wp.mesh_get_index(mid, 3 * h.face + 2)
                uv = h.u * scene.uvs[us + i0] + h.v * scene.uvs[us + i1] + (1.0 - h.u - h.v) * scene.uvs[us + i2]
                r0 = scene.shape_tex_xform[s, 0]
                r1 = scene.shape_tex_xform[s, 1]
                uvt = wp.vec2(r0[0] * uv[0] + r0[1] * uv[1] + r0[2], r1[0] * uv[0] + r1[1] * uv[1] + r1[2])
                c = wp.cw_mul(c, sample_texture(scene, tex, uvt))
        return c
    if h.kind == HIT_PARTICLE:
        return srgb_to_linear_vec3_wp(scene.particle_color)
    if h.kind == HIT_CLOTH:
        return srgb_to_linear_vec3_wp(scene.tri_color[h.index])
    return wp.vec3(0.0)


@wp.func
def to_byte(c: float):
    return wp.uint32(int(wp.clamp(c, 0.0, 1.0) * 255.0 + 0.5))


#: buckets of the linear -> sRGB byte table: bucket i holds linear values in [i, i + 1) / SRGB_LUT_N
#: (c * SRGB_LUT_N is exact, a power of two); the steepest slope of the sRGB curve (12.92) puts at
#: most 12.92 * 255 / 4096 = 0.8 byte steps in a bucket, so one threshold per bucket decides its byte
SRGB_LUT_N = wp.constant(4096)


@wp.func
def srgb_byte_exact(c: float):
    """Display sRGB byte of one linear component: ``round(clamp(srgb(c), 0, 1) * 255)``."""
    return to_byte(linear_to_srgb_wp(c))


@wp.kernel
def srgb_threshold_kernel(thr: wp.array(dtype=float)):
    """thr[b]: the smallest float c with srgb_byte_exact(c) >= b (b = 1..255), by bisection on the
    device's own arithmetic (so the table reproduces it exactly); thr[0] = -BIG, thr[256] = BIG."""
    b = wp.tid()
    if b == 0:
        thr[b] = -BIG
    elif b == 256:
        thr[b] = BIG
    else:
        lo = float(0.0)  # byte(lo) < b
        hi = float(1.0)  # byte(hi) >= b
        for _it in range(200):
            mid = 0.5 * (lo + hi)
            if mid <= lo or mid >= hi:
                break
            if srgb_byte_exact(mid) >= wp.uint32(b):
                hi = mid
            else:
                lo = mid
        thr[b] = hi


@wp.kernel
def srgb_lut_kernel(thr: wp.array(dtype=float), base: wp.array(dtype=wp.uint32), next_thr: wp.array(dtype=float)):
    """Bucket i (dim SRGB_LUT_N + 1): the byte at its lower edge and the threshold of the next byte."""
    i = wp.tid()
    b = srgb_byte_exact(float(i) / float(SRGB_LUT_N))
    base[i] = b
    next_thr[i] = thr[int(b) + 1]


@wp.func
def srgb_byte(c: float, lut_base: wp.array(dtype=wp.uint32), lut_thr: wp.array(dtype=float)):
    """:func:`srgb_byte_exact` through the bucket table (no ``pow``; the same byte wherever the
    device's sRGB curve is monotonic)."""
    if not (c > 0.0):
        return wp.uint32(0)
    if c >= 1.0:
        return wp.uint32(255)
    i = int(c * float(SRGB_LUT_N))
    b = lut_base[i]
    if c >= lut_thr[i]:
        b = b + wp.uint32(1)
    return b


@wp.func
def pack_rgba(c: wp.vec3, srgb: int, lut_base: wp.array(dtype=wp.uint32), lut_thr: wp.array(dtype=float)):
    """Linear RGB -> packed R | G << 8 | B << 16 | 255 << 24, sRGB-encoded when srgb != 0."""
    r = wp.uint32(0)
    g = wp.uint32(0)
    b = wp.uint32(0)
    if srgb != 0:
        r = srgb_byte(c[0], lut_base, lut_thr)
        g = srgb_byte(c[1], lut_base, lut_thr)
        b = srgb_byte(c[2], lut_base, lut_thr)
    else:
        r = to_byte(c[0])
        g = to_byte(c[1])
        b = to_byte(c[2])
    return r | (g << wp.uint32(8)) | (b << wp.uint32(16)) | (wp.uint32(255) << wp.uint32(24))


@wp.struct
class RenderParams:
    max_t: float
    cull: int
    particles: int
    use_global: int
    textures: int
    shadows: int
    ambient: int
    srgb: int
    up: wp.vec3
    light_count: int
    span: int  # pixels of one image row rendered by one thread
    light_dir: wp.array(dtype=wp.vec3)  # direction the light travels (world, unit)
    light_color: wp.array(dtype=wp.vec3)  # linear
    light_shadows: wp.array(dtype=int)
    # outputs wanted
    want_color: int
    want_hdr: int
    want_depth: int
    want_fdepth: int
    want_index: int
    want_normal: int
    want_albedo: int
    # clear values
    clear_color: wp.uint32
    clear_depth: float
    clear_index: wp.uint32
    clear_normal: wp.vec3
    clear_albedo: wp.uint32


#: ambient light of the hemisphere model: AMBIENT_BASE + AMBIENT_SKY * dot(n, up) (linear)
AMBIENT_BASE = wp.constant(0.15)
AMBIENT_SKY = wp.constant(0.1)


@wp.kernel
def render_kernel(
    scene: SceneData,
    p: RenderParams,
    cam_tf: wp.array2d(dtype=wp.transform),
    rays: wp.array4d(dtype=wp.vec3),
    color: wp.array4d(dtype=wp.uint32),
    hdr: wp.array4d(dtype=wp.vec3),
    depth: wp.array4d(dtype=float),
    fdepth: wp.array4d(dtype=float),
    index: wp.array4d(dtype=wp.uint32),
    normal: wp.array4d(dtype=wp.vec3),
    albedo: wp.array4d(dtype=wp.uint32),
):
    world, cam, y, xb = wp.tid()
    X = cam_tf[cam, world]
    # a thread renders the pixels [xb * span, (xb + 1) * span) of its row: span 1 on CUDA, whole rows
    # on the CPU (one launch thread per row amortizes the per-thread setup of this large kernel)
    x_end = wp.min((xb + 1) * p.span, rays.shape[2])
    for x in range(xb * p.span, x_end):
        o = wp.transform_point(X, rays[cam, y, x, 0])
        dw = wp.transform_vector(X, rays[cam, y, x, 1])
        # every channel starts at its clear value; a hit overwrites them, one store per wanted channel
        c_color = p.clear_color
        c_hdr = wp.vec3(0.0)
        c_depth = p.clear_depth
        c_fdepth = p.clear_depth
        c_index = p.clear_index
        c_normal = p.clear_normal
        c_albedo = p.clear_albedo
        if wp.length(dw) > 0.0:
            d = wp.normalize(dw)
            h = trace(scene, world, o, d, p.max_t, p.cull, p.particles, p.use_global)
            if h.kind != HIT_NONE:
                c_depth = h.t
                c_normal = h.n
                c_index = wp.uint32(h.index)
                if h.kind == HIT_PARTICLE:
                    c_index = INDEX_PARTICLE
                elif h.kind == HIT_CLOTH:
                    c_index = INDEX_CLOTH
                if p.want_fdepth != 0:
                    c_fdepth = h.t * wp.dot(d, wp.normalize(wp.transform_vector(X, wp.vec3(0.0, 0.0, -1.0))))
                if p.want_color != 0 or p.want_hdr != 0 or p.want_albedo != 0:
                    base = hit_albedo(scene, h, p.textures)
                    if p.want_albedo != 0:
                        c_albedo = pack_rgba(base, p.srgb, scene.srgb_lut_base, scene.srgb_lut_thr)
                    light = wp.vec3(0.0)
                    if p.ambient != 0:
                        light = wp.vec3(AMBIENT_BASE + AMBIENT_SKY * wp.dot(h.n, p.up))
                    hp = o + h.t * d
                    for li in range(p.light_count):
                        L = -p.light_dir[li]
                        ndl = wp.dot(h.n, L)
                        if ndl > 0.0:
                            lit = float(1.0)
                            if p.shadows != 0 and p.light_shadows[li] != 0:
                                if occluded(scene, world, hp + 1.0e-4 * h.n, L, p.max_t, p.particles, p.use_global):
                                    lit = 0.0
                            light += lit * ndl * p.light_color[li]
                    c_hdr = wp.cw_mul(base, light)
                    c_color = pack_rgba(c_hdr, p.srgb, scene.srgb_lut_base, scene.srgb_lut_thr)
        if p.want_color != 0:
            color[world, cam, y, x] = c_color
        if p.want_hdr != 0:
            hdr[world, cam, y, x] = c_hdr
        if p.want_depth != 0:
            depth[world, cam, y, x] = c_depth
        if p.want_fdepth != 0:
            fdepth[world, cam, y, x] = c_fdepth
        if p.want_index != 0:
            index[world, cam, y, x] = c_index
        if p.want_normal != 0:
            normal[world, cam, y, x] = c_normal
        if p.want_albedo != 0:
            albedo[world, cam, y, x] = c_albedo


# ------------------------------------------------------------------ per-render preparation


@wp.kernel
def shape_pose_kernel(
    shape_count: int,
    group_count: int,
    shape_body: wp.array(dtype=int),
    shape_transform: wp.array(dtype=wp.transform),
    body_q: wp.array(dtype=wp.transform),
    shape_color: wp.array(dtype=wp.vec3),
    shape_color_override: wp.array(dtype=wp.vec4),
    shape_xform: wp.array(dtype=wp.transform),
    shape_albedo: wp.array(dtype=wp.vec3),
    shape_plane: wp.array(dtype=wp.vec4),
    group_lower: wp.array(dtype=wp.vec3),
    group_upper: wp.array(dtype=wp.vec3),
):
    """Per shape (launch dim max(shape_count, group_count)): world transform
    (``body_q[body] * shape_transform``; static shapes as is) and linear albedo (``Mesh.color`` when
    set, else the model colour, display sRGB -> linear) and plane through its origin normal to its
    +z axis (used for infinite planes); per group: empty box, grown by
    :func:`shape_bounds_kernel`."""
    s = wp.tid()
    if s < group_count:
        group_lower[s] = wp.vec3(BIG)
        group_upper[s] = wp.vec3(-BIG)
    if s < shape_count:
        b = shape_body[s]
        X = shape_transform[s]
        if b >= 0:
            X = wp.transform_multiply(body_q[b], X)
        shape_xform[s] = X
        nz = wp.quat_rotate(wp.transform_get_rotation(X), wp.vec3(0.0, 0.0, 1.0))
        shape_plane[s] = wp.vec4(nz[0], nz[1], nz[2], wp.dot(nz, wp.transform_get_translation(X)))
        ov = shape_color_override[s]
        srgb = shape_color[s]
        if ov[3] > 0.0:
            srgb = wp.vec3(ov[0], ov[1], ov[2])
        shape_albedo[s] = srgb_to_linear_vec3_wp(srgb)


@wp.kernel
def shape_bounds_kernel(
    bounded_shape: wp.array(dtype=int),
    bound_group: wp.array(dtype=int),
    bound_center: wp.array(dtype=wp.vec3),
    bound_half: wp.array(dtype=wp.vec3),
    shape_xform: wp.array(dtype=wp.transform),
    lowers: wp.array(dtype=wp.vec3),
    uppers: wp.array(dtype=wp.vec3),
    group_lower: wp.array(dtype=wp.vec3),
    group_upper: wp.array(dtype=wp.vec3),
):
    """World AABB of each bounded shape (its local box, centre and half extents, rotated) and their
    union per group."""
    i = wp.tid()
    s = bounded_shape[i]
    X = shape_xform[s]
    c = wp.transform_point(X, bound_center[i])
    R = wp.quat_to_matrix(wp.transform_get_rotation(X))
    h = bound_half[i]
    e = wp.vec3(0.0)
    for r in range(3):
        e[r] = wp.abs(R[r, 0]) * h[0] + wp.abs(R[r, 1]) * h[1] + wp.abs(R[r, 2]) * h[2]
    pad = wp.vec3(1.0e-5)
    lo = c - e - pad
    hi = c + e + pad
    lowers[i] = lo
    uppers[i] = hi
    g = bound_group[i]
    wp.atomic_min(group_lower, g, lo)
    wp.atomic_max(group_upper, g, hi)


@wp.kernel
def group_root_kernel(bvh: wp.uint64, has: wp.array(dtype=int), root: wp.array(dtype=int)):
    """BVH root node of each group (-1 when the group has no bounded shape); refits keep it."""
    g = wp.tid()
    r = int(-1)
    if has[g] != 0:
        r = wp.bvh_get_group_root(bvh, g)
    root[g] = r


@wp.kernel
def particle_bounds_kernel(
    particle_item: wp.array(dtype=int),
    particle_q: wp.array(dtype=wp.vec3),
    particle_radius: wp.array(dtype=float),
    lowers: wp.array(dtype=wp.vec3),
    uppers: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    pid = particle_item[i]
    c = particle_q[pid]
    r = wp.vec3(particle_radius[pid])
    lowers[i] = c - r
    uppers[i] = c + r


@wp.kernel
def forward_depth_kernel(
    depth: wp.array4d(dtype=float),
    cam_tf: wp.array2d(dtype=wp.transform),
    rays: wp.array4d(dtype=wp.vec3),
    out: wp.array4d(dtype=float),
):
    world, cam, y, x = wp.tid()
    X = cam_tf[cam, world]
    dw = wp.transform_vector(X, rays[cam, y, x, 1])
    fwd = wp.transform_vector(X, wp.vec3(0.0, 0.0, -1.0))
    dd = depth[world, cam, y, x]
    val = dd
    if wp.length(dw) > 0.0 and dd > 0.0:
        val = dd * wp.dot(wp.normalize(dw), wp.normalize(fwd))
    out[world, cam, y, x] = val


@wp.kernel
def pinhole_rays_kernel(
    width: int,
    height: int,
    first: int,
    scale_x: wp.array(dtype=float),  # half extent of the image plane at unit distance, x
    scale_y: wp.array(dtype=float),
    off_x: wp.array(dtype=float),  # principal offset at unit distance
    off_y: wp.array(dtype=float),
    out: wp.array4d(dtype=wp.vec3),
):
    c, y, x = wp.tid()
    px = (2.0 * (float(x) + 0.5) / float(width) - 1.0) * scale_x[c] + off_x[c]
    py = (1.0 - 2.0 * (float(y) + 0.5) / float(height)) * scale_y[c] + off_y[c]
    out[first + c, y, x, 0] = wp.vec3(0.0)
    out[first + c, y, x, 1] = wp.normalize(wp.vec3(px, py, -1.0))


@wp.kernel
def flatten_color_kernel(
    image: wp.array4d(dtype=wp.uint32), per_row: int, out: wp.array3d(dtype=wp.uint8)
):
    world, cam, y, x = wp.tid()
    cams = image.shape[1]
    tile = world * cams + cam
    ty = tile // per_row
    tx = tile % per_row
    h = image.shape[2]
    w = image.shape[3]
    v = image[world, cam, y, x]
    for k in range(4):
        out[ty * h + y, tx * w + x, k] = wp.uint8((v >> wp.uint32(8 * k)) & wp.uint32(255))



@wp.func
def depth_grey(v: float, near: float, far: float):
    """Grey byte of a depth ``v`` [m] for preview images: 255 at ``near``, 50 at ``far``, 0 for no hit."""
    g = wp.uint8(0)
    if v > 0.0:
        f = float(1.0)
        if far > near:
            f = wp.clamp((far - v) / (far - near), 0.0, 1.0)
        g = wp.uint8(int(50.0 + 205.0 * f + 0.5))
    return g


@wp.func
def normal_byte(c: float):
    """A unit normal's component in [-1, 1] as a byte in [0, 255]."""
    return wp.uint8(int(wp.clamp(0.5 * c + 0.5, 0.0, 1.0) * 255.0 + 0.5))


@wp.kernel
def flatten_normal_kernel(image: wp.array4d(dtype=wp.vec3), per_row: int, out: wp.array3d(dtype=wp.uint8)):
    world, cam, y, x = wp.tid()
    cams = image.shape[1]
    tile = world * cams + cam
    ty = tile // per_row
    tx = tile % per_row
    h = image.shape[2]
    w = image.shape[3]
    n = image[world, cam, y, x]
    for k in range(3):
        out[ty * h + y, tx * w + x, k] = normal_byte(n[k])
    out[ty * h + y, tx * w + x, 3] = wp.uint8(255)


@wp.kernel
def depth_range_kernel(image: wp.array4d(dtype=float), out: wp.array(dtype=float)):
    world, cam, y, x = wp.tid()
    v = image[world, cam, y, x]
    if v > 0.0:
        wp.atomic_min(out, 0, v)
        wp.atomic_max(out, 1, v)


@wp.kernel
def flatten_depth_kernel(
    image: wp.array4d(dtype=float), per_row: int, rng: wp.array(dtype=float), out: wp.array3d(dtype=wp.uint8)
):
    world, cam, y, x = wp.tid()
    cams = image.shape[1]
    tile = world * cams + cam
    ty = tile // per_row
    tx = tile % per_row
    h = image.shape[2]
    w = image.shape[3]
    v = image[world, cam, y, x]
    g = depth_grey(v, rng[0], rng[1])
    for k in range(3):
        out[ty * h + y, tx * w + x, k] = g
    out[ty * h + y, tx * w + x, 3] = wp.uint8(255)


@wp.kernel
def shape_index_rgba_kernel(
    image: wp.array4d(dtype=wp.uint32), colors: wp.array2d(dtype=wp.uint8), use_palette: int,
    out: wp.array4d(dtype=wp.uint8),
):  # fmt: skip
    world, cam, y, x = wp.tid()
    tile = world * image.shape[1] + cam
    sid = image[world, cam, y, x]
    r = wp.uint8(0)
    g = wp.uint8(0)
    b = wp.uint8(0)
    if use_palette != 0:
        if int(sid) < colors.shape[0] and sid != INDEX_NONE:
            r = colors[int(sid), 0]
            g = colors[int(sid), 1]
            b = colors[int(sid), 2]
    elif sid != INDEX_NONE:
        hsh = sid * HASH_MUL
        hsh = hsh ^ (hsh >> wp.uint32(15))
        r = wp.uint8(int(hsh & wp.uint32(255)))
        g = wp.uint8(int((hsh >> wp.uint32(8)) & wp.uint32(255)))
        b = wp.uint8(int((hsh >> wp.uint32(16)) & wp.uint32(255)))
    out[tile, y, x, 0] = r
    out[tile, y, x, 1] = g
    out[tile, y, x, 2] = b
    out[tile, y, x, 3] = wp.uint8(255)


@wp.kernel
def normal_rgba_kernel(image: wp.array4d(dtype=wp.vec3), out: wp.array4d(dtype=wp.uint8)):
    world, cam, y, x = wp.tid()
    tile = world * image.shape[1] + cam
    n = image[world, cam, y, x]
    for k in range(3):
        out[tile, y, x, k] = normal_byte(n[k])
    out[tile, y, x, 3] = wp.uint8(255)


@wp.kernel
def depth_rgba_kernel(image: wp.array4d(dtype=float), rng: wp.array(dtype=float), out: wp.array4d(dtype=wp.uint8)):
    world, cam, y, x = wp.tid()
    tile = world * image.shape[1] + cam
    v = image[world, cam, y, x]
    g = depth_grey(v, rng[0], rng[1])
    for k in range(3):
        out[tile, y, x, k] = g
    out[tile, y, x, 3] = wp.uint8(255)

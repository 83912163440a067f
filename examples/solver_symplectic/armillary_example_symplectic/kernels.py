"""Warp kernels of the example semi-implicit (symplectic) Euler solver.

A step is two launches: :func:`shape_pose_kernel` computes the world pose
of every shape, then the fused :func:`step_kernel` does the rest: thread
``i`` integrates body ``i`` (when ``i < body_count``) and particle ``i``
(when ``i < particle_count``).

Contacts are penalty springs evaluated by *gathering*: each body thread loops
over its own collision shapes and, for each, over every collision shape of
its world and every global shape (brute force with a bounding-sphere test),
and sums the contact wrenches acting on itself. A pair is always evaluated in a canonical order (lower shape index
first), so the two bodies of a pair compute bit-identical, opposite forces.
No atomics are used, hence the result does not depend on thread scheduling:
the solver is deterministic.

Conventions (all of them, with every model array, in ``docs/data_model.md``):

* ``body_q`` is the pose of the body frame (position, quaternion ``xyzw``);
  the centre of mass sits at ``body_com`` in that frame;
* ``body_qd`` is ``(v, w)``: the COM linear velocity and the angular velocity,
  both in world frame;
* ``body_f`` is ``(f, tau)``: a world-frame force and torque about the COM.
"""

from __future__ import annotations

import warp as wp

# geometry types (armillary.GeoType values; stored in Model.shape_type)
GEO_PLANE = wp.constant(1)
GEO_SPHERE = wp.constant(3)
GEO_CAPSULE = wp.constant(4)
GEO_BOX = wp.constant(7)

BODY_KINEMATIC = wp.constant(2)
PARTICLE_ACTIVE = wp.constant(1)


@wp.func
def world_gravity(gravity: wp.array(dtype=wp.vec3), world: int):
    """Model.gravity has one row per world and a last row for the global world -1."""
    n = gravity.shape[0]
    if n == 0:
        return wp.vec3(0.0)
    if world < 0 or world >= n:
        return gravity[n - 1]
    return gravity[world]


@wp.kernel
def shape_pose_kernel(
    shape_body: wp.array(dtype=wp.int32),
    shape_transform: wp.array(dtype=wp.transform),
    body_q: wp.array(dtype=wp.transform),
    shape_X: wp.array(dtype=wp.transform),
):
    """World pose of every shape (first launch of a step)."""
    s = wp.tid()
    b = shape_body[s]
    if b < 0:
        shape_X[s] = shape_transform[s]
    else:
        shape_X[s] = wp.transform_multiply(body_q[b], shape_transform[s])


@wp.func
def point_velocity(b: int, p: wp.vec3, body_q: wp.array(dtype=wp.transform),
                   body_qd: wp.array(dtype=wp.spatial_vector), body_com: wp.array(dtype=wp.vec3)):
    """World velocity of the material point of body ``b`` at world point ``p`` (zero for static)."""
    if b < 0:
        return wp.vec3(0.0)
    qd = body_qd[b]
    v = wp.spatial_top(qd)
    w = wp.spatial_bottom(qd)
    x_com = wp.transform_point(body_q[b], body_com[b])
    return v + wp.cross(w, p - x_com)


@wp.func
def penalty_force(n: wp.vec3, depth: float, v_rel: wp.vec3, ke: float, kd: float, mu: float, v_eps: float):
    """Force on the first shape: spring-damper along ``n`` plus regularised Coulomb friction.

    ``n`` points from the second shape to the first, ``depth > 0`` is the
    penetration, ``v_rel`` the velocity of the first shape relative to the
    second at the contact point. The normal force never pulls; friction is
    ``-mu fn vt / sqrt(|vt|^2 + v_eps^2)`` (Coulomb above ``v_eps``, viscous below).
    """
    vn = wp.dot(v_rel, n)
    fn = wp.max(ke * depth - kd * vn, 0.0)
    vt = v_rel - n * vn
    ft = vt * (-mu * fn / wp.sqrt(wp.dot(vt, vt) + v_eps * v_eps))
    return n * fn + ft


@wp.func
def add_point_force(b: int, target: int, sign: float, f: wp.vec3, p: wp.vec3, x_com: wp.vec3, acc: wp.spatial_vector):
    if b == target:
        ff = f * sign
        return acc + wp.spatial_vector(ff, wp.cross(p - x_com, ff))
    return acc


@wp.func
def pair_wrench(
    sa: int,
    sb: int,
    target: int,
    x_com: wp.vec3,
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    body_com: wp.array(dtype=wp.vec3),
    shape_type: wp.array(dtype=wp.int32),
    shape_body: wp.array(dtype=wp.int32),
    shape_X: wp.array(dtype=wp.transform),
    shape_scale: wp.array(dtype=wp.vec3),
    shape_ke: wp.array(dtype=float),
    shape_kd: wp.array(dtype=float),
    shape_mu: wp.array(dtype=float),
    contact_ke: float,
    contact_kd: float,
    contact_mu: float,
    v_eps: float,
):
    """Wrench (world force, torque about ``x_com``) that the contact pair ``sa < sb`` exerts on body ``target``.

    Supported pairs: sphere/capsule/box against a plane, sphere-sphere.
    Anything else contributes nothing.
    """
    acc = wp.spatial_vector()
    ta = shape_type[sa]
    tb = shape_type[sb]
    ba = shape_body[sa]
    bb = shape_body[sb]

    ke = contact_ke
    if ke < 0.0:
        ke = 0.5 * (shape_ke[sa] + shape_ke[sb])
    kd = contact_kd
    if kd < 0.0:
        kd = 0.5 * (shape_kd[sa] + shape_kd[sb])
    mu = contact_mu
    if mu < 0.0:
        mu = 0.5 * (shape_mu[sa] + shape_mu[sb])

    xa = shape_X[sa]
    xb = shape_X[sb]

    # ---- shape vs plane (the plane may be either member of the pair)
    if ta == GEO_PLANE or tb == GEO_PLANE:
        if ta == GEO_PLANE and tb == GEO_PLANE:
            return acc
        s = sb
        t = tb
        b = bb
        xs = xb
        xp = xa
        bp = ba
        sign = 1.0  # force computed on the non-plane shape; plane gets the opposite
        if tb == GEO_PLANE:
            s = sa
            t = ta
            b = ba
            xs = xa
            xp = xb
            bp = bb
        n = wp.quat_rotate(wp.transform_get_rotation(xp), wp.vec3(0.0, 0.0, 1.0))
        p0 = wp.transform_get_translation(xp)
        scale = shape_scale[s]
        if t == GEO_SPHERE:
            c = wp.transform_get_translation(xs)
            depth = scale[0] - wp.dot(c - p0, n)
            if depth > 0.0:
                p = c - n * scale[0]
                v_rel = point_velocity(b, p, body_q, body_qd, body_com) - point_velocity(
                    bp, p, body_q, body_qd, body_com
                )
                f = penalty_force(n, depth, v_rel, ke, kd, mu, v_eps)
                acc = add_point_force(b, target, sign, f, p, x_com, acc)
                acc = add_point_force(bp, target, -sign, f, p, x_com, acc)
        elif t == GEO_CAPSULE:
            for k in range(2):
                e = wp.transform_point(xs, wp.vec3(0.0, 0.0, scale[1] * (2.0 * float(k) - 1.0)))
                depth = scale[0] - wp.dot(e - p0, n)
                if depth > 0.0:
                    p = e - n * scale[0]
                    v_rel = point_velocity(b, p, body_q, body_qd, body_com) - point_velocity(
                        bp, p, body_q, body_qd, body_com
                    )
                    f = penalty_force(n, depth, v_rel, ke, kd, mu, v_eps)
                    acc = add_point_force(b, target, sign, f, p, x_com, acc)
                    acc = add_point_force(bp, target, -sign, f, p, x_com, acc)
        elif t == GEO_BOX:
            for k in range(8):
                sx = float((k & 1) * 2 - 1)
                sy = float(((k >> 1) & 1) * 2 - 1)
                sz = float(((k >> 2) & 1) * 2 - 1)
                p = wp.transform_point(xs, wp.vec3(sx * scale[0], sy * scale[1], sz * scale[2]))
                depth = -wp.dot(p - p0, n)
                if depth > 0.0:
                    v_rel = point_velocity(b, p, body_q, body_qd, body_com) - point_velocity(
                        bp, p, body_q, body_qd, body_com
                    )
                    f = penalty_force(n, depth, v_rel, ke, kd, mu, v_eps)
                    acc = add_point_force(b, target, sign, f, p, x_com, acc)
                    acc = add_point_force(bp, target, -sign, f, p, x_com, acc)
        return acc

    # ---- sphere vs sphere
    if ta == GEO_SPHERE and tb == GEO_SPHERE:
        ca = wp.transform_get_translation(xa)
        cb = wp.transform_get_translation(xb)
        ra = shape_scale[sa][0]
        rb = shape_scale[sb][0]
        d = ca - cb
        dist = wp.length(d)
        depth = ra + rb - dist
        if depth > 0.0 and dist > 1.0e-9:
            n = d / dist
            p = 0.5 * ((ca - n * ra) + (cb + n * rb))
            v_rel = point_velocity(ba, p, body_q, body_qd, body_com) - point_velocity(bb, p, body_q, body_qd, body_com)
            f = penalty_force(n, depth, v_rel, ke, kd, mu, v_eps)
            acc = add_point_force(ba, target, 1.0, f, p, x_com, acc)
            acc = add_point_force(bb, target, -1.0, f, p, x_com, acc)
    return acc


@wp.func
def shapes_may_touch(
    sa: int,
    sb: int,
    shape_body: wp.array(dtype=wp.int32),
    shape_world: wp.array(dtype=wp.int32),
    shape_bound: wp.array(dtype=float),
    shape_X: wp.array(dtype=wp.transform),
):
    """Cheap filter: different bodies, compatible worlds, overlapping bounding spheres (planes: always)."""
    if sa == sb:
        return False
    ba = shape_body[sa]
    bb = shape_body[sb]
    if ba == bb:
        return False  # same body, or both static
    wa = shape_world[sa]
    wb = shape_world[sb]
    if wa != wb and wa >= 0 and wb >= 0:
        return False
    ra = shape_bound[sa]
    rb = shape_bound[sb]
    if ra >= 0.0 and rb >= 0.0:
        d = wp.transform_get_translation(shape_X[sa]) - wp.transform_get_translation(shape_X[sb])
        if wp.dot(d, d) > (ra + rb) * (ra + rb):
            return False
    return True


@wp.func
def integrate_rotation(q: wp.quat, w: wp.vec3, dt: float):
    """``q + dt/2 (w, 0) q`` with ``w`` in world frame, renormalised."""
    dq = (wp.quat(w, 0.0) * q) * (0.5 * dt)
    return wp.normalize(q + dq)


@wp.kernel
def step_kernel(
    body_count: int,
    particle_count: int,
    dt: float,
    gravity: wp.array(dtype=wp.vec3),
    # body state in
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    body_f: wp.array(dtype=wp.spatial_vector),
    # body model
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_inertia: wp.array(dtype=wp.mat33),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    body_flags: wp.array(dtype=wp.int32),
    body_world: wp.array(dtype=wp.int32),
    body_shape_start: wp.array(dtype=wp.int32),
    body_shape_ids: wp.array(dtype=wp.int32),
    # collision candidates grouped by world: group 0 = global shapes, group w + 1 = world w
    group_start: wp.array(dtype=wp.int32),
    group_ids: wp.array(dtype=wp.int32),
    # shapes
    shape_type: wp.array(dtype=wp.int32),
    shape_body: wp.array(dtype=wp.int32),
    shape_X: wp.array(dtype=wp.transform),
    shape_scale: wp.array(dtype=wp.vec3),
    shape_world: wp.array(dtype=wp.int32),
    shape_bound: wp.array(dtype=float),
    shape_ke: wp.array(dtype=float),
    shape_kd: wp.array(dtype=float),
    shape_mu: wp.array(dtype=float),
    contact_ke: float,
    contact_kd: float,
    contact_mu: float,
    friction_v_eps: float,
    angular_damping: float,
    # particles
    particle_q: wp.array(dtype=wp.vec3),
    particle_qd: wp.array(dtype=wp.vec3),
    particle_f: wp.array(dtype=wp.vec3),
    particle_inv_mass: wp.array(dtype=float),
    particle_world: wp.array(dtype=wp.int32),
    particle_flags: wp.array(dtype=wp.int32),
    # out
    body_q_out: wp.array(dtype=wp.transform),
    body_qd_out: wp.array(dtype=wp.spatial_vector),
    particle_q_out: wp.array(dtype=wp.vec3),
    particle_qd_out: wp.array(dtype=wp.vec3),
):
    tid = wp.tid()

    if tid < body_count:
        X = body_q[tid]
        q = wp.transform_get_rotation(X)
        com = body_com[tid]
        x_com = wp.transform_point(X, com)
        qd = body_qd[tid]
        v = wp.spatial_top(qd)
        w = wp.spatial_bottom(qd)
        inv_m = body_inv_mass[tid]
        kinematic = (body_flags[tid] & BODY_KINEMATIC) != 0

        if (not kinematic) and inv_m > 0.0:
            world = body_world[tid]
            g = world_gravity(gravity, world)
            wrench = wp.spatial_vector()
            if body_f.shape[0] > tid:
                wrench = body_f[tid]
            # contacts: every collision shape of this body against the global
            # shapes and the shapes of its own world (all worlds for a global body)
            groups = group_start.shape[0] - 1
            for k in range(body_shape_start[tid], body_shape_start[tid + 1]):
                s = body_shape_ids[k]
                for pass_ in range(2):
                    lo = group_start[0]
                    hi = group_start[1]
                    if pass_ == 1:
                        if world < 0:
                            lo = group_start[1]
                            hi = group_start[groups]
                        elif world + 2 <= groups:
                            lo = group_start[world + 1]
                            hi = group_start[world + 2]
                        else:
                            hi = lo
                    for c in range(lo, hi):
                        o = group_ids[c]
                        if shapes_may_touch(s, o, shape_body, shape_world, shape_bound, shape_X):
                            sa = wp.min(s, o)
                            sb = wp.max(s, o)
                            wrench = wrench + pair_wrench(
                                sa, sb, tid, x_com, body_q, body_qd, body_com, shape_type, shape_body, shape_X,
                                shape_scale, shape_ke, shape_kd, shape_mu, contact_ke, contact_kd, contact_mu,
                                friction_v_eps,
                            )
            f = wp.spatial_top(wrench)
            tau = wp.spatial_bottom(wrench)

            # linear: semi-implicit Euler on the COM
            v = v + (g + f * inv_m) * dt

            # angular, in body frame: one implicit Newton step for the gyroscopic
            # term (stable for fast spin), then the external torque
            I = body_inertia[tid]
            wb = wp.quat_rotate_inv(q, w)
            Iw = I @ wb
            J = I + (wp.skew(wb) @ I - wp.skew(Iw)) * dt
            if wp.abs(wp.determinant(J)) > 1.0e-12:
                wb = wb - wp.inverse(J) @ (wp.cross(wb, Iw) * dt)
            wb = wb + (body_inv_inertia[tid] @ wp.quat_rotate_inv(q, tau)) * dt
            w = wp.quat_rotate(q, wb) * wp.max(1.0 - angular_damping * dt, 0.0)
        # kinematic bodies (and bodies without mass) keep their velocity

        x_com = x_com + v * dt
        q = integrate_rotation(q, w, dt)
        body_q_out[tid] = wp.transform(x_com - wp.quat_rotate(q, com), q)
        body_qd_out[tid] = wp.spatial_vector(v, w)

    if tid < particle_count:
        x = particle_q[tid]
        pv = particle_qd[tid]
        active = True
        if particle_flags.shape[0] > tid:
            active = (particle_flags[tid] & PARTICLE_ACTIVE) != 0
        if active:
            inv_mp = particle_inv_mass[tid]
            if inv_mp > 0.0:
                pf = wp.vec3(0.0)
                if particle_f.shape[0] > tid:
                    pf = particle_f[tid]
                pw = -1
                if particle_world.shape[0] > tid:
                    pw = particle_world[tid]
                pv = pv + (world_gravity(gravity, pw) + pf * inv_mp) * dt
            x = x + pv * dt
        particle_q_out[tid] = x
        particle_qd_out[tid] = pv

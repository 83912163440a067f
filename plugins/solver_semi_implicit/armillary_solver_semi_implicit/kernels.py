"""Rigid-body kernels of :class:`~armillary_solver_semi_implicit.solver.SolverSemiImplicit`.

Two launches per step for the rigid part (joints and particles live in ``joint_kernels`` and
``particles``):

* :func:`body_contact_forces_kernel`: penalty forces of the rigid contacts of the core
  collision pipeline, accumulated into the solver's body-force scratch (world-frame wrench at
  each body's COM) and recorded per contact;
* :func:`integrate_bodies_kernel`: semi-implicit (symplectic) Euler of every body from the
  scratch wrench, ``State.body_f``, ``Control.joint_f`` of FREE / DISTANCE joints and gravity.

Both kernels loop grid-stride style over their items (``for i in range(tid, n, stride)``): the
solver launches one thread on the CPU (Warp runs CPU threads one after the other; one thread
avoids the per-thread setup and keeps the accumulation order fixed) and one thread per item on
a GPU. Written from the physics (penalty contact, symplectic Euler), see the solver docstring.
"""

from __future__ import annotations

import warp as wp

from armillary.sim.gravity import gravity_of_world
from armillary.sim.spatial import ang, lin, spatial

BODY_KINEMATIC = wp.constant(2)  # armillary.BodyFlags.KINEMATIC


@wp.func
def _body_point_velocity(
    b: int,
    p_W: wp.vec3,
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    body_com: wp.array(dtype=wp.vec3),
) -> wp.vec3:
    """World velocity [m/s] of the world point ``p_W`` moving with body ``b`` (zero for the world, ``b < 0``)."""
    if b < 0:
        return wp.vec3(0.0)
    com_W = wp.transform_point(body_q[b], body_com[b])
    qd = body_qd[b]
    return lin(qd) + wp.cross(ang(qd), p_W - com_W)


@wp.func
def _add_force_at(
    b: int,
    f_W: wp.vec3,
    p_W: wp.vec3,
    body_q: wp.array(dtype=wp.transform),
    body_com: wp.array(dtype=wp.vec3),
    body_f: wp.array(dtype=wp.spatial_vector),
):
    """Add the force ``f_W`` [N] applied at the world point ``p_W`` to body ``b`` as a wrench at its COM."""
    if b >= 0:
        com_W = wp.transform_point(body_q[b], body_com[b])
        wp.atomic_add(body_f, b, spatial(f_W, wp.cross(p_W - com_W, f_W)))


@wp.func
def _contact_force_item(
    i: int,
    count: int,
    shape_body: wp.array(dtype=wp.int32),
    shape_ke: wp.array(dtype=float),
    shape_kd: wp.array(dtype=float),
    shape_kf: wp.array(dtype=float),
    shape_ka: wp.array(dtype=float),
    shape_mu: wp.array(dtype=float),
    body_com: wp.array(dtype=wp.vec3),
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    contact_shape0: wp.array(dtype=wp.int32),
    contact_shape1: wp.array(dtype=wp.int32),
    contact_point0: wp.array(dtype=wp.vec3),
    contact_point1: wp.array(dtype=wp.vec3),
    contact_normal: wp.array(dtype=wp.vec3),
    contact_margin0: wp.array(dtype=float),
    contact_margin1: wp.array(dtype=float),
    contact_stiffness: wp.array(dtype=float),
    contact_damping: wp.array(dtype=float),
    contact_friction: wp.array(dtype=float),
    body_f: wp.array(dtype=wp.spatial_vector),
    contact_force: wp.array(dtype=wp.vec3),
):
    """Contact ``i`` of :func:`body_contact_forces_kernel` (a function with early returns: Warp 1.19
    drops the adjoint of a dynamic-loop iteration that ends with ``continue``, NVIDIA/warp#1552)."""
    if i >= count:
        contact_force[i] = wp.vec3(0.0)
        return
    s0 = contact_shape0[i]
    s1 = contact_shape1[i]
    if s0 < 0 or s1 < 0:
        contact_force[i] = wp.vec3(0.0)
        return
    b0 = shape_body[s0]
    b1 = shape_body[s1]
    n = contact_normal[i]
    p0 = contact_point0[i]
    p1 = contact_point1[i]
    if b0 >= 0:
        p0 = wp.transform_point(body_q[b0], p0)
    if b1 >= 0:
        p1 = wp.transform_point(body_q[b1], p1)
    pa = p0 + contact_margin0[i] * n
    pb = p1 - contact_margin1[i] * n
    d = wp.dot(n, pb - pa)
    ka = 0.5 * (shape_ka[s0] + shape_ka[s1])
    if d >= ka:
        contact_force[i] = wp.vec3(0.0)
        return
    ke = 0.5 * (shape_ke[s0] + shape_ke[s1])
    kd = 0.5 * (shape_kd[s0] + shape_kd[s1])
    kf = 0.5 * (shape_kf[s0] + shape_kf[s1])
    mu = 0.5 * (shape_mu[s0] + shape_mu[s1])
    if contact_stiffness[i] > 0.0:
        ke = contact_stiffness[i]
    if contact_damping[i] > 0.0:
        kd = contact_damping[i]
    if contact_friction[i] > 0.0:
        mu = contact_friction[i]
    v = _body_point_velocity(b1, pb, body_q, body_qd, body_com) - _body_point_velocity(
        b0, pa, body_q, body_qd, body_com
    )
    vn = wp.dot(n, v)
    fn = -ke * d
    if d < 0.0:
        fn = fn - kd * wp.min(vn, 0.0)
    vt = v - vn * n
    vt_len = wp.length(vt)
    f = fn * n
    if vt_len > 0.0:
        f = f - wp.min(kf * vt_len, mu * wp.abs(fn)) / vt_len * vt
    contact_force[i] = f
    _add_force_at(b1, f, pb, body_q, body_com, body_f)
    _add_force_at(b0, -f, pa, body_q, body_com, body_f)


@wp.kernel
def body_contact_forces_kernel(
    # Model:
    shape_body: wp.array(dtype=wp.int32),
    shape_ke: wp.array(dtype=float),
    shape_kd: wp.array(dtype=float),
    shape_kf: wp.array(dtype=float),
    shape_ka: wp.array(dtype=float),
    shape_mu: wp.array(dtype=float),
    body_com: wp.array(dtype=wp.vec3),
    # State in:
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    # Contacts:
    contact_count: wp.array(dtype=wp.int32),
    contact_shape0: wp.array(dtype=wp.int32),
    contact_shape1: wp.array(dtype=wp.int32),
    contact_point0: wp.array(dtype=wp.vec3),
    contact_point1: wp.array(dtype=wp.vec3),
    contact_normal: wp.array(dtype=wp.vec3),
    contact_margin0: wp.array(dtype=float),
    contact_margin1: wp.array(dtype=float),
    contact_stiffness: wp.array(dtype=float),
    contact_damping: wp.array(dtype=float),
    contact_friction: wp.array(dtype=float),
    stride: int,
    # Out (body_f accumulated, contact_force overwritten):
    body_f: wp.array(dtype=wp.spatial_vector),
    contact_force: wp.array(dtype=wp.vec3),
):
    """Penalty force of every active rigid contact.

    Per contact (normal ``n`` from shape 0 to shape 1, world frame): surface points
    ``a = X0 p0 + margin0 n`` and ``b = X1 p1 - margin1 n``, separation ``d = n . (b - a)``
    [m] (negative when penetrating), relative velocity ``v = v1(b) - v0(a)``, ``vn = n . v``.
    Materials are the means of the two shapes' ``ke, kd, kf, ka, mu`` (per-contact
    ``stiffness / damping / friction`` > 0 replace ``ke / kd / mu``). A contact with ``d < ka``
    pushes shape 1 along ``n`` with ``fn = -ke d - kd min(vn, 0) [d < 0]`` (attractive for
    ``0 <= d < ka``) and applies friction ``-min(kf |vt|, mu |fn|) vt / |vt|`` against the
    tangential slip ``vt = v - vn n``; shape 0 gets the opposite force. Each force acts at its
    body's surface point. ``contact_force[i]`` is the force on shape 1 [N] (zero when inactive).
    """
    tid = wp.tid()
    capacity = contact_shape0.shape[0]
    count = wp.min(contact_count[0], capacity)
    for i in range(tid, capacity, stride):
        _contact_force_item(i, count, shape_body, shape_ke, shape_kd, shape_kf, shape_ka, shape_mu, body_com, body_q,
                            body_qd, contact_shape0, contact_shape1, contact_point0, contact_point1, contact_normal,
                            contact_margin0, contact_margin1, contact_stiffness, contact_damping, contact_friction,
                            body_f, contact_force)  # fmt: skip


@wp.func
def _integrate_body(
    i: int,
    X: wp.transform,
    qd: wp.spatial_vector,
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_inertia: wp.array(dtype=wp.mat33),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    body_world: wp.array(dtype=wp.int32),
    gravity: wp.array(dtype=wp.vec3),
    body_free_dof: wp.array(dtype=wp.int32),
    body_f_ext: wp.array(dtype=wp.spatial_vector),
    has_body_f: int,
    joint_f: wp.array(dtype=float),
    has_joint_f: int,
    body_f_int: wp.array(dtype=wp.spatial_vector),
    angular_damping: float,
    dt: float,
    body_q_out: wp.array(dtype=wp.transform),
    body_qd_out: wp.array(dtype=wp.spatial_vector),
):
    """One dynamic body of :func:`integrate_bodies_kernel`."""
    F = body_f_int[i]
    if has_body_f != 0:
        F = F + body_f_ext[i]
    if has_joint_f != 0:
        k = body_free_dof[i]
        if k >= 0:
            F = F + wp.spatial_vector(
                joint_f[k], joint_f[k + 1], joint_f[k + 2], joint_f[k + 3], joint_f[k + 4], joint_f[k + 5]
            )
    p = wp.transform_get_translation(X)
    q = wp.transform_get_rotation(X)
    com = body_com[i]
    c = p + wp.quat_rotate(q, com)
    inv_m = body_inv_mass[i]
    v = lin(qd)
    w = ang(qd)
    a = lin(F) * inv_m
    if inv_m > 0.0:
        a = a + gravity_of_world(gravity, body_world[i])  # world -1: the last (global) row
    v1 = v + dt * a
    R = wp.quat_to_matrix(q)
    I_W = R * body_inertia[i] * wp.transpose(R)
    I_W_inv = R * body_inv_inertia[i] * wp.transpose(R)
    w1 = w + dt * (I_W_inv * (ang(F) - wp.cross(w, I_W * w)))
    q1 = wp.normalize(q + 0.5 * dt * wp.quat(w1[0], w1[1], w1[2], 0.0) * q)
    c1 = c + dt * v1
    body_q_out[i] = wp.transform(c1 - wp.quat_rotate(q1, com), q1)
    body_qd_out[i] = spatial(v1, w1 * (1.0 - angular_damping * dt))


@wp.kernel
def integrate_bodies_kernel(
    # Model:
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_inertia: wp.array(dtype=wp.mat33),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    body_flags: wp.array(dtype=wp.int32),
    body_world: wp.array(dtype=wp.int32),
    gravity: wp.array(dtype=wp.vec3),
    body_free_dof: wp.array(dtype=wp.int32),
    # State in:
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    body_f_ext: wp.array(dtype=wp.spatial_vector),
    has_body_f: int,
    # Control:
    joint_f: wp.array(dtype=float),
    has_joint_f: int,
    # Solver:
    body_f_int: wp.array(dtype=wp.spatial_vector),
    angular_damping: float,
    dt: float,
    track_impulse: int,
    count: int,
    stride: int,
    # Out:
    impulse: wp.array(dtype=wp.spatial_vector),
    impulse_time: wp.array(dtype=float),
    body_q_out: wp.array(dtype=wp.transform),
    body_qd_out: wp.array(dtype=wp.spatial_vector),
):
    """Semi-implicit Euler of every body (``state_in is state_out`` allowed: one item per body).

    Wrench at the COM (world): ``body_f_int`` (contacts, joints, particle reactions) +
    ``body_f_ext`` (``State.body_f``) + the 6 ``joint_f`` entries of the body's FREE / DISTANCE
    joint (``body_free_dof``, -1 for none). Then

    ``v1 = v + dt (f / m + g)`` (gravity of the body's world, only for ``1/m > 0``),
    ``w1 = w + dt I_W^-1 (tau - w x I_W w)`` (explicit gyroscopic term, ``I_W = R I R^T``),
    ``q1 = normalize(q + dt/2 (w1, 0) q)``, ``c1 = c + dt v1`` for the COM ``c``, the body origin
    ``c1 - R(q1) com`` and the stored angular velocity ``w1 (1 - angular_damping dt)``.
    Kinematic bodies (``BodyFlags.KINEMATIC``) keep their input pose and twist.
    """
    tid = wp.tid()
    for i in range(tid, count, stride):
        X = body_q[i]
        qd = body_qd[i]
        if track_impulse != 0:
            impulse[i] = impulse[i] + dt * body_f_int[i]
            impulse_time[i] = impulse_time[i] + dt
        if (body_flags[i] & BODY_KINEMATIC) != 0:
            body_q_out[i] = X
            body_qd_out[i] = qd
        else:
            _integrate_body(i, X, qd, body_com, body_inv_mass, body_inertia, body_inv_inertia, body_world, gravity,
                            body_free_dof, body_f_ext, has_body_f, joint_f, has_joint_f, body_f_int, angular_damping,
                            dt, body_q_out, body_qd_out)  # fmt: skip


@wp.kernel
def harvest_impulse_kernel(
    body_local_to_proxy: wp.array(dtype=wp.int32),
    impulse: wp.array(dtype=wp.spatial_vector),
    impulse_time: wp.array(dtype=float),
    # Out (accumulated):
    out_body_f: wp.array(dtype=wp.spatial_vector),
):
    """Mean interaction wrench since the last coupling input update, added to each proxy's row."""
    i = wp.tid()
    k = body_local_to_proxy[i]
    if k < 0:
        return
    t = impulse_time[i]
    if t > 0.0:
        out_body_f[k] = out_body_f[k] + impulse[i] / t


@wp.kernel
def forces_to_wrenches_kernel(
    contact_force: wp.array(dtype=wp.vec3),
    # Out:
    out: wp.array(dtype=wp.spatial_vector),
):
    """``out[i] = (contact_force[i], 0)`` (``Contacts.force`` rows of the rigid contacts)."""
    i = wp.tid()
    f = contact_force[i]
    out[i] = wp.spatial_vector(f[0], f[1], f[2], 0.0, 0.0, 0.0)

"""Warp kernels of :class:`~armillary_solver_featherstone.solver.SolverFeatherstone`.

One step is two launches:

1. ``contact_wrench_kernel`` (one thread per rigid contact, only when contacts are passed):
   penalty forces from shape materials with the contact-stiffness floor (from each body's
   articulated inverse inertia of the previous step), accumulated per body as world wrenches
   about the body's COM (``body_f_contact``), with the implicit stiffness/damping as 6x6
   twist-space matrices: per body (``body_K_contact``) for contacts with the world or another
   articulation, per body pair (``pair_K_contact``) for self-contacts (all zeroed just before),
   and a flag on every body near a contact (cleared by the articulation kernel that reads it);
2. ``articulation_step_kernel`` (one thread per articulation, all worlds at once): forward
   kinematics of the input coordinates, recursive Newton-Euler bias forces with gravity as a
   base acceleration (the articulation's world row of ``Model.gravity``, the last row for the
   global world), composite-rigid-body mass matrix, joint forces (``joint_f``, drives, limits,
   springs, damping, DISTANCE ranges), the articulated inverse inertia of the flagged bodies (for
   the next step's contact floor), the implicit contact terms (self-contacts through the relative
   Jacobian of their body pair), mimic reduction and kinematic locking,
   dense Cholesky solve, semi-implicit Euler on the joint manifold and forward kinematics of
   the result.

``implicit_contact_force_kernel`` (``update_contacts``) evaluates the contact forces the implicit
step applied, from the velocities after it.

Spatial algebra is world-frame about a per-articulation reference point ``O`` (the origin of
the articulation's first body), as in :mod:`armillary.sim.dynamics_kernels`, whose motion
subspace function this module reuses.

Gradients: both kernels are differentiated by Warp's generated adjoints (``wp.Tape``), which
shapes how they are written (Warp 1.19's semantics, checked by ``tests/test_gradients.py``):

* a kernel's adjoint re-reads arrays at their values after the launch (stores are not replayed), so
  every value it needs must still be there: while a tape records, the solver passes separate
  per-step buffers where the plain step works in place (the system and its Cholesky factor; the
  right-hand side, its forward and its back substitution; the forward kinematics of the input
  coordinates and of the result; the step counters and contact flags, read then written). The
  in-place updates that remain are linear accumulations (``F[p] += F[c]``, ``L += ...``, the mimic
  folding), whose adjoints need no values;
* the adjoint replays a kernel's straight-line code but not its dynamic loops, and re-runs the
  functions it calls: a value a loop computes and a later line uses non-linearly comes out of a
  function (``articulation_dofs``, ``minus_row_products``, ``column_products``, ``minus_solved``),
  and the functions that update arrays in place have empty replays (``wp.func_replay``), or the
  replay would apply their update a second time;
* a ``while`` loop's adjoint is wrong: the ancestor walks are loops over the solver's per-joint
  path table instead (``joint_path_start`` / ``joint_path``);
* ``sqrt(0)`` has no finite adjoint: the friction gain takes the square root of a slip speed only
  where it is positive;
* a ``continue`` in a dynamic loop also skips the rest of that iteration's adjoint (the replayed
  forward code jumps to the next iteration before the reverse code runs): the joint-force loop
  branches instead.
"""

from __future__ import annotations

import warp as wp

from armillary.sim.dynamics_kernels import in_articulation, joint_subspace
from armillary.solvers.step_guard import report_nonfinite, transform_finite, twist_finite
from armillary.sim.kinematics_kernels import JT_BALL, JT_DISTANCE, JT_FREE, JT_ROD, fk_joint
from armillary.sim.spatial import (
    ang,
    body_spatial_inertia,
    lin,
    skew,
    spatial,
    twist_at,
    twist_cross,
    world_inertia,
    wrench_cross,
)

#: ``Model.body_flags`` bit of kinematic bodies (``armillary.sim.enums.BodyFlags.KINEMATIC``)
BODY_KINEMATIC = wp.constant(2)

#: friction gain floor in units of ``m_eff / contact_time`` (see ``contact_wrench_kernel``)
FRICTION_FLOOR = wp.constant(20.0)

#: drive modes (``armillary.sim.enums.JointTargetMode``)
MODE_NONE = wp.constant(0)
MODE_POSITION = wp.constant(1)
MODE_VELOCITY = wp.constant(2)
MODE_POSITION_VELOCITY = wp.constant(3)
MODE_EFFORT = wp.constant(4)


@wp.func
def com_wrench_about(f: wp.vec3, t: wp.vec3, com_rel_O: wp.vec3) -> wp.spatial_vector:
    """A world wrench ``(f, t)`` given at a body's COM, re-expressed about the reference point ``O``."""
    return spatial(f, t + wp.cross(com_rel_O, f))


@wp.func
def point_stiffness(C: wp.mat33, p: wp.vec3) -> wp.spatial_matrix:
    """``J^T C J`` for the velocity ``J V = v + w x p`` of point ``p`` of a body with twist ``V = (v, w)``
    about the frame origin: a 3x3 point stiffness ``C`` seen as a 6x6 matrix on twists (``J = [I | -[p]x]``)."""
    P = skew(p)
    B = -(C * P)  # upper right block
    D = -(P * C * P)  # lower right block
    Bt = wp.transpose(B)
    return wp.spatial_matrix(
        C[0, 0], C[0, 1], C[0, 2], B[0, 0], B[0, 1], B[0, 2],
        C[1, 0], C[1, 1], C[1, 2], B[1, 0], B[1, 1], B[1, 2],
        C[2, 0], C[2, 1], C[2, 2], B[2, 0], B[2, 1], B[2, 2],
        Bt[0, 0], Bt[0, 1], Bt[0, 2], D[0, 0], D[0, 1], D[0, 2],
        Bt[1, 0], Bt[1, 1], Bt[1, 2], D[1, 0], D[1, 1], D[1, 2],
        Bt[2, 0], Bt[2, 1], Bt[2, 2], D[2, 0], D[2, 1], D[2, 2],
    )  # fmt: skip


@wp.func
def shift_twist_matrix(K_W: wp.spatial_matrix, O: wp.vec3) -> wp.spatial_matrix:
    """A twist-space matrix given about the world origin, re-expressed about point ``O``
    (``A^T K A`` with ``V_world_origin = A V_O``, ``A = [[I, [O]x], [0, I]]``)."""
    P = skew(O)
    A = wp.spatial_matrix(
        1.0, 0.0, 0.0, P[0, 0], P[0, 1], P[0, 2],
        0.0, 1.0, 0.0, P[1, 0], P[1, 1], P[1, 2],
        0.0, 0.0, 1.0, P[2, 0], P[2, 1], P[2, 2],
        0.0, 0.0, 0.0, 1.0, 0.0, 0.0,
        0.0, 0.0, 0.0, 0.0, 1.0, 0.0,
        0.0, 0.0, 0.0, 0.0, 0.0, 1.0,
    )  # fmt: skip
    return wp.transpose(A) * K_W * A


@wp.func
def contact_inverse_mass(
    b: int,
    p_W: wp.vec3,
    n: wp.vec3,
    X_WB: wp.transform,
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    body_flags: wp.array(dtype=wp.int32),
    body_articulation: wp.array(dtype=wp.int32),
    body_Ainv: wp.array(dtype=wp.spatial_matrix),
) -> float:
    """``j^T A_b j``: the inverse effective mass [1/kg] that body ``b`` contributes to a unit normal
    force ``n`` at ``p_W``, from its articulated inverse inertia ``body_Ainv[b]`` (about its COM,
    written by the articulation kernel of the previous step) or, until there is one, from the body
    alone. Kinematic bodies and bodies outside every articulation are immovable (0)."""
    if b < 0:
        return 0.0
    if body_articulation[b] < 0 or (body_flags[b] & BODY_KINEMATIC) != 0:
        return 0.0
    r = p_W - wp.transform_point(X_WB, body_com[b])
    rn = wp.cross(r, n)
    Ab = body_Ainv[b]
    if Ab[0, 0] > 0.0:
        j = spatial(n, rn)
        return wp.dot(j, Ab * j)
    R = wp.quat_to_matrix(wp.transform_get_rotation(X_WB))
    return body_inv_mass[b] + wp.dot(rn, (R * body_inv_inertia[b] * wp.transpose(R)) * rn)


@wp.func
def self_pair_slot(
    b0: int,
    b1: int,
    body_pair_first: wp.array(dtype=wp.int32),
    body_pair_count: wp.array(dtype=wp.int32),
    pair_partner: wp.array(dtype=wp.int32),
) -> int:
    """The slot of the self-contact body pair ``{b0, b1}`` in the solver's pair table (rows of the
    lower body index, see ``SolverFeatherstone._build_pair_table``), or -1 when it has none."""
    lo = wp.min(b0, b1)
    hi = wp.max(b0, b1)
    first = body_pair_first[lo]
    for s in range(first, first + body_pair_count[lo]):
        if pair_partner[s] == hi:
            return s
    return -1


@wp.kernel
def contact_wrench_kernel(
    # Model:
    shape_body: wp.array(dtype=wp.int32),
    shape_material_ke: wp.array(dtype=float),
    shape_material_kd: wp.array(dtype=float),
    shape_material_kf: wp.array(dtype=float),
    shape_material_mu: wp.array(dtype=float),
    body_com: wp.array(dtype=wp.vec3),
    body_inv_mass: wp.array(dtype=float),
    body_inv_inertia: wp.array(dtype=wp.mat33),
    body_flags: wp.array(dtype=wp.int32),
    body_articulation: wp.array(dtype=wp.int32),
    body_Ainv: wp.array(dtype=wp.spatial_matrix),
    body_pair_first: wp.array(dtype=wp.int32),
    body_pair_count: wp.array(dtype=wp.int32),
    pair_partner: wp.array(dtype=wp.int32),
    friction_smoothing: float,
    contact_time: float,
    dt: float,
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
    # out:
    body_f_contact_out: wp.array(dtype=wp.spatial_vector),
    contact_force_out: wp.array(dtype=wp.vec3),
    body_K_contact_out: wp.array(dtype=wp.spatial_matrix),
    pair_K_contact_out: wp.array(dtype=wp.spatial_matrix),
    body_contact_flag_out: wp.array(dtype=wp.int32),
    contact_point_out: wp.array(dtype=wp.vec3),
    contact_vrel_out: wp.array(dtype=wp.vec3),
    contact_slope_out: wp.array(dtype=wp.vec2),
):
    """Penalty contact force of one rigid contact, linearly implicit in the new velocity.

    Penetration ``d = -(n . (p1_W - p0_W) - margin0 - margin1)`` (p = the contact points
    in world, n from shape 0 to shape 1); for ``d > 0`` the force on shape 1 is
    ``n max(k (d - dt vn) - c vn, 0) + f_t`` with ``vn = n . (v1 - v0)`` the separating speed and
    ``f_t = -min(kf, mu fn / |vt|_s) vt``: Coulomb friction regularised by a viscous law
    below the sliding speed where ``kf |vt| = mu fn`` (``|vt|_s`` is smoothed by
    ``friction_smoothing`` [m/s]; the Coulomb bound uses the start-of-step ``fn``), treated as a
    viscous law of that gain in the implicit step, so that it can stop a slip but never reverse
    it. Materials are the mean of the two shapes', except where the per-contact
    ``contact_stiffness`` / ``contact_damping`` / ``contact_friction`` (``ke``, ``kd``, ``mu``;
    empty arrays allowed) are > 0, e.g. hydroelastic contacts. Shape 0 gets the opposite force.
    ``contact_force_out[k]`` is the force on shape 1 (world, N) at the start of the step;
    ``contact_point_out`` / ``contact_vrel_out`` / ``contact_slope_out`` keep what
    :func:`implicit_contact_force_kernel` needs to evaluate it at the end of the step.

    Stiffness floor: with ``contact_time = tau > 0`` the normal law is never softer than a
    critically damped spring of time constant ``tau`` on the contact's effective mass
    ``m = 1 / (j^T A j)`` (``A`` the bodies' articulated inverse inertias, lagged one step):
    ``k = max(ke, m / tau^2)``, ``c = max(kd, 2 m / tau)``, friction gain
    ``kf = max(kf, FRICTION_FLOOR m / tau)`` (per-contact stiffness overrides, e.g. hydroelastic,
    are used as given). So a robot rests at a penetration of about ``g tau^2`` whatever its
    mass, close to MuJoCo's default soft contacts.

    Implicit part (as the joint drives and limits): the normal force is evaluated at the
    predicted penetration ``d - dt vn``, and the contact's twist-space matrix ``J^T C J`` (about
    the world origin) with the point stiffness ``C = (dt^2 k + dt c) n n^T + dt h_t (I - n n^T)``
    (``h_t`` the friction gain) goes to the articulation kernel, which adds it to the mass
    matrix, so that ``(M + H) qdd = tau`` is the implicit Euler step of the linearised contact:
    the applied force is the contact law at the new velocity, which only dissipates. Stiff
    contacts on light links (many contacts of one pair, links overlapping at rest) then stay
    stable at any ``dt``; the equilibrium (``v = 0``) is the explicit one. ``H`` must be the
    exact ``(J1 - J0)^T C (J1 - J0)`` of the relative velocity: a contact with the world or with
    another articulation adds ``C`` to its body's matrix (``body_K_contact_out``; the other side
    is immovable within this articulation's solve), a self-contact (both bodies in one
    articulation) adds it to its body pair's (``pair_K_contact_out``, slot from the solver's pair
    table), whose relative Jacobian involves only the joints between the two bodies. The former
    per-body blocks doubled for self-contacts (``2 (J1^T C J1 + J0^T C J0)``, an upper bound) put
    a spurious inertia on the two bodies' common motion; next to strong joint damping (a
    joint-limit floor) it turned that hidden momentum into joint speed and pumped energy into
    the panda lying on itself. The doubled blocks remain only as a fallback for a self-contact
    whose body pair is missing from the table (contacts from a pair list other than
    ``Model.shape_contact_pairs``): stable, not exactly dissipative.
    """
    k = wp.tid()
    if k >= contact_count[0]:
        contact_force_out[k] = wp.vec3(0.0)
        return
    contact_slope_out[k] = wp.vec2(0.0)
    s0 = contact_shape0[k]
    s1 = contact_shape1[k]
    if s0 < 0 or s1 < 0:
        contact_force_out[k] = wp.vec3(0.0)
        return
    b0 = shape_body[s0]
    b1 = shape_body[s1]
    n = contact_normal[k]
    X_W0 = wp.transform_identity()
    X_W1 = wp.transform_identity()
    if b0 >= 0:
        X_W0 = body_q[b0]
    if b1 >= 0:
        X_W1 = body_q[b1]
    # surface points in world
    p0_W = wp.transform_point(X_W0, contact_point0[k]) + n * contact_margin0[k]
    p1_W = wp.transform_point(X_W1, contact_point1[k]) - n * contact_margin1[k]
    d = -wp.dot(n, p1_W - p0_W)
    p_W = 0.5 * (p0_W + p1_W)
    v0 = wp.vec3(0.0)
    v1 = wp.vec3(0.0)
    if b0 >= 0:
        com0 = wp.transform_point(X_W0, body_com[b0])
        v0 = lin(body_qd[b0]) + wp.cross(ang(body_qd[b0]), p_W - com0)
    if b1 >= 0:
        com1 = wp.transform_point(X_W1, body_com[b1])
        v1 = lin(body_qd[b1]) + wp.cross(ang(body_qd[b1]), p_W - com1)
    v_rel = v1 - v0
    vn = wp.dot(n, v_rel)
    # bodies in contact or about to be (within two steps at the current approach speed) get their
    # articulated inverse inertia computed for the next step's stiffness floor
    if d - 2.0 * dt * vn > 0.0:
        if b0 >= 0:
            body_contact_flag_out[b0] = 1
        if b1 >= 0:
            body_contact_flag_out[b1] = 1
    if d <= 0.0:
        contact_force_out[k] = wp.vec3(0.0)
        return
    ke = 0.5 * (shape_material_ke[s0] + shape_material_ke[s1])
    kd = 0.5 * (shape_material_kd[s0] + shape_material_kd[s1])
    kf = 0.5 * (shape_material_kf[s0] + shape_material_kf[s1])
    mu = 0.5 * (shape_material_mu[s0] + shape_material_mu[s1])
    floor = contact_time > 0.0
    if contact_stiffness.shape[0] > k:
        if contact_stiffness[k] > 0.0:
            ke = contact_stiffness[k]
            floor = False
    if contact_damping.shape[0] > k:
        if contact_damping[k] > 0.0:
            kd = contact_damping[k]
    if contact_friction.shape[0] > k:
        if contact_friction[k] > 0.0:
            mu = contact_friction[k]
    if floor:
        inv_m = contact_inverse_mass(b0, p_W, n, X_W0, body_com, body_inv_mass, body_inv_inertia, body_flags,
                                     body_articulation, body_Ainv) + contact_inverse_mass(
            b1, p_W, n, X_W1, body_com, body_inv_mass, body_inv_inertia, body_flags, body_articulation, body_Ainv)
        if inv_m > 0.0:
            m_eff = 1.0 / inv_m
            ke = wp.max(ke, m_eff / (contact_time * contact_time))
            kd = wp.max(kd, 2.0 * m_eff / contact_time)
            kf = wp.max(kf, FRICTION_FLOOR * m_eff / contact_time)
    fn = wp.max(ke * (d - dt * vn) - kd * vn, 0.0)
    vt = v_rel - n * vn
    vt_len2 = wp.dot(vt, vt) + friction_smoothing * friction_smoothing
    # friction as a viscous law of gain h_t = min(kf, mu fn / |vt|): the Coulomb force at the
    # current slip, and implicit like the normal damping, so it can stop the slip but never reverse it
    h_t = float(0.0)
    if vt_len2 > 0.0:  # (no sqrt of 0: its adjoint is not finite)
        h_t = wp.min(kf, mu * fn / wp.sqrt(vt_len2))
    ft = -h_t * vt
    f1 = n * fn + ft
    contact_force_out[k] = f1
    if fn <= 0.0:
        return
    h_n = dt * ke + kd
    contact_point_out[k] = p_W
    contact_vrel_out[k] = v_rel
    contact_slope_out[k] = wp.vec2(h_n, h_t)
    nn = wp.outer(n, n)
    C = dt * (h_n * nn + h_t * (wp.identity(n=3, dtype=float) - nn))
    per_body = True
    if b0 >= 0 and b1 >= 0:
        if body_articulation[b0] >= 0 and body_articulation[b0] == body_articulation[b1]:
            slot = self_pair_slot(b0, b1, body_pair_first, body_pair_count, pair_partner)
            if slot >= 0:
                wp.atomic_add(pair_K_contact_out, slot, point_stiffness(C, p_W))
                per_body = False
            else:
                C = 2.0 * C  # fallback: an upper bound of the relative term from per-body blocks
    K = point_stiffness(C, p_W)
    if b1 >= 0:
        com1 = wp.transform_point(X_W1, body_com[b1])
        wp.atomic_add(body_f_contact_out, b1, spatial(f1, wp.cross(p_W - com1, f1)))
        if per_body:
            wp.atomic_add(body_K_contact_out, b1, K)
    if b0 >= 0:
        com0 = wp.transform_point(X_W0, body_com[b0])
        wp.atomic_add(body_f_contact_out, b0, spatial(-f1, wp.cross(p_W - com0, -f1)))
        if per_body:
            wp.atomic_add(body_K_contact_out, b0, K)


@wp.kernel
def implicit_contact_force_kernel(
    shape_body: wp.array(dtype=wp.int32),
    body_com: wp.array(dtype=wp.vec3),
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    n_contacts: int,
    contact_count: wp.array(dtype=wp.int32),
    contact_shape0: wp.array(dtype=wp.int32),
    contact_shape1: wp.array(dtype=wp.int32),
    contact_normal: wp.array(dtype=wp.vec3),
    contact_force: wp.array(dtype=wp.vec3),
    contact_point: wp.array(dtype=wp.vec3),
    contact_vrel: wp.array(dtype=wp.vec3),
    contact_slope: wp.array(dtype=wp.vec2),
    force_out: wp.array(dtype=wp.vec3),
):
    """The contact force of the last step as the implicit solve applied it: the start-of-step force
    plus its linearisation in the new velocity (``body_q`` / ``body_qd`` after the step),
    ``f - (dt k + c) (vn' - vn) n - kf (vt' - vt)`` (the friction term only where it was viscous)."""
    k = wp.tid()
    if k >= n_contacts:
        return
    if k >= contact_count[0]:
        force_out[k] = wp.vec3(0.0)
        return
    f = contact_force[k]
    h = contact_slope[k]
    if h[0] > 0.0 or h[1] > 0.0:
        p = contact_point[k]
        n = contact_normal[k]
        b0 = shape_body[contact_shape0[k]]
        b1 = shape_body[contact_shape1[k]]
        v = wp.vec3(0.0)
        if b1 >= 0:
            v = v + lin(body_qd[b1]) + wp.cross(ang(body_qd[b1]), p - wp.transform_point(body_q[b1], body_com[b1]))
        if b0 >= 0:
            v = v - lin(body_qd[b0]) - wp.cross(ang(body_qd[b0]), p - wp.transform_point(body_q[b0], body_com[b0]))
        dv = v - contact_vrel[k]
        dvn = wp.dot(n, dv)
        f = f - n * (h[0] * dvn) - h[1] * (dv - n * dvn)
    force_out[k] = f


@wp.func
def drive_and_limit_force(
    i: int,
    q: float,
    qd: float,
    dt: float,
    joint_target_mode: wp.array(dtype=wp.int32),
    joint_target_ke: wp.array(dtype=float),
    joint_target_kd: wp.array(dtype=float),
    joint_effort_limit: wp.array(dtype=float),
    joint_limit_lower: wp.array(dtype=float),
    joint_limit_upper: wp.array(dtype=float),
    joint_limit_ke: wp.array(dtype=float),
    joint_limit_kd: wp.array(dtype=float),
    target_q: float,
    target_qd: float,
    m_ii: float,
    limit_tc: float,
):
    """Drive plus limit force of scalar DOF ``i``, linearly implicit in the new velocity.

    Beyond a limit, ``limit_tc > 0`` [s] floors the limit spring at a critically damped one of
    time constant ``limit_tc`` on the DOF's mass-matrix diagonal ``m_ii`` (armature included):
    ``ke >= m_ii / limit_tc^2``, ``kd >= 2 m_ii / limit_tc`` (MuJoCo's default soft limit is
    0.02 s, critically damped), so a violated limit is undone without overshoot whatever
    ``joint_limit_ke/kd`` say.

    Returns ``(f, h)``: the force evaluated at ``q + dt qd`` and the velocity ``qd`` (i.e.
    with ``qd_new = qd``), and ``h`` the amount added to the mass matrix diagonal, so that
    ``M qdd = ... + f`` with ``M_ii += h`` treats stiffness and damping implicitly
    (``h = dt kd + dt^2 ke``). A drive whose force would exceed ``joint_effort_limit`` is
    applied explicitly, clamped.
    """
    mode = joint_target_mode[i]
    ke = joint_target_ke[i]
    kd = joint_target_kd[i]
    f = float(0.0)
    h = float(0.0)
    if mode == MODE_EFFORT:
        ke = 0.0
        kd = 0.0
    if mode == MODE_VELOCITY:
        ke = 0.0
    if mode == MODE_POSITION:
        target_qd = 0.0
    if ke != 0.0 or kd != 0.0:
        fd = ke * (target_q - q - dt * qd) + kd * (target_qd - qd)
        limit = joint_effort_limit[i]
        if wp.abs(fd) > limit:
            f = wp.clamp(ke * (target_q - q) + kd * (target_qd - qd), -limit, limit)
        else:
            f = fd
            h = dt * kd + dt * dt * ke
    lo = joint_limit_lower[i]
    hi = joint_limit_upper[i]
    lke = joint_limit_ke[i]
    lkd = joint_limit_kd[i]
    if limit_tc > 0.0:
        lke = wp.max(lke, m_ii / (limit_tc * limit_tc))
        lkd = wp.max(lkd, 2.0 * m_ii / limit_tc)
    if q < lo:
        f = f + lke * (lo - q - dt * qd) - lkd * qd
        h = h + dt * lkd + dt * dt * lke
    elif q > hi:
        f = f + lke * (hi - q - dt * qd) - lkd * qd
        h = h + dt * lkd + dt * dt * lke
    return f, h


@wp.func
def distance_limit(
    j: int,
    a: int,
    l0: int,
    dt: float,
    joint_q: wp.array(dtype=float),
    joint_qd: wp.array(dtype=float),
    joint_q_start: wp.array(dtype=wp.int32),
    joint_qd_start: wp.array(dtype=wp.int32),
    joint_X_c: wp.array(dtype=wp.transform),
    joint_child: wp.array(dtype=wp.int32),
    joint_axis: wp.array(dtype=wp.vec3),
    body_com: wp.array(dtype=wp.vec3),
    joint_limit_lower: wp.array(dtype=float),
    joint_limit_upper: wp.array(dtype=float),
    joint_limit_ke: wp.array(dtype=float),
    joint_limit_kd: wp.array(dtype=float),
    M: wp.array3d(dtype=float),
    limit_tc: float,
):
    """Range force of DISTANCE joint ``j`` (its first linear DOF's ``joint_limit_lower/upper``, a
    negative bound turns that side off), linearly implicit in the new velocity like
    :func:`drive_and_limit_force`.

    The joint's coordinates are FREE ones: ``e`` (``joint_q[0:3]``) is the child anchor's offset
    from the parent anchor in the parent anchor frame, ``qd = (v, w)`` the child COM's velocity and
    the child's angular velocity relative to the parent, in that frame. The anchor separation
    ``d = |e|`` moves at ``dd = g . qd`` with ``g = (n, n x r)``, ``n = e / d`` (the joint's first
    axis while the anchors coincide) and ``r`` the child COM's offset from its anchor, so a force
    ``f n`` on the child at its anchor (``-f n`` on the parent) is the generalized force ``g f`` on
    the joint's 6 DOFs and nothing on the others. Outside ``[lower, upper]``: ``f = ke (bound - d -
    dt dd) - kd dd`` with ``ke`` / ``kd`` the limit gains floored by ``limit_tc`` on the radial
    mass ``g^T M_jj g`` (the joint's diagonal block of ``M[a]``, rows from ``l0``), as the scalar
    limits are on ``M_ii``.

    Returns ``(g, f, h)``: the step adds ``g f`` to the joint's forces and ``h g g^T``
    (``h = dt kd + dt^2 ke``) to its diagonal block, the implicit Euler step of the spring-damper in
    the radial direction; ``h = 0`` inside the range. The direction ``n`` is the one at the start of
    the step, so the force stays central (along the anchor line: the pair's linear and angular
    momentum are kept) and reaches no other joint's DOFs; the tangential motion of the step is
    explicit, so a link turning at ``w`` rad/s opens by about ``(w dt)^2 d / 2`` within a step
    before the next step's spring pulls it back. (Evaluating the force along the predicted
    direction ``e + dt de`` instead is not central, and spun the parent bodies of a rope; engaging
    the limit when the predicted separation ``d + dt dd`` leaves the range made neighbouring links
    of a rope alternate at 1/60 s.) Like the other limits it engages at the first step that ends
    beyond the bound.
    """
    qs = joint_q_start[j]
    ds = joint_qd_start[j]
    e = wp.vec3(joint_q[qs], joint_q[qs + 1], joint_q[qs + 2])
    rot = wp.normalize(wp.quat(joint_q[qs + 3], joint_q[qs + 4], joint_q[qs + 5], joint_q[qs + 6]))
    r = wp.quat_rotate(rot, wp.transform_point(wp.transform_inverse(joint_X_c[j]), body_com[joint_child[j]]))
    d = wp.length(e)
    n = wp.normalize(joint_axis[ds])
    if d > 1.0e-9:
        n = e / d
    g = spatial(n, wp.cross(n, r))
    lo = joint_limit_lower[ds]
    hi = joint_limit_upper[ds]
    bound = float(0.0)
    active = False
    if hi >= 0.0 and d > hi:
        bound = hi
        active = True
    elif lo >= 0.0 and d < lo:
        bound = lo
        active = True
    f = float(0.0)
    h = float(0.0)
    if active:
        qd = wp.spatial_vector(joint_qd[ds], joint_qd[ds + 1], joint_qd[ds + 2], joint_qd[ds + 3], joint_qd[ds + 4],
                               joint_qd[ds + 5])  # fmt: skip
        dd = wp.dot(g, qd)
        ke = joint_limit_ke[ds]
        kd = joint_limit_kd[ds]
        if limit_tc > 0.0:
            m_g = float(0.0)
            for row in range(6):
                for col in range(6):
                    m_g = m_g + g[row] * M[a, l0 + row, l0 + col] * g[col]
            ke = wp.max(ke, m_g / (limit_tc * limit_tc))
            kd = wp.max(kd, 2.0 * m_g / limit_tc)
        f = ke * (bound - d - dt * dd) - kd * dd
        h = dt * kd + dt * dt * ke
    return g, f, h


@wp.func
def rotate_by(w: wp.vec3, dt: float) -> wp.quat:
    """The rotation ``exp(dt w)`` of angular velocity ``w`` [rad/s] over ``dt`` [s]."""
    angle = wp.length(w) * dt
    if angle < 1.0e-12:
        # first order: the identity at w = 0, with the derivative in w that the exact map has there
        return wp.normalize(wp.quat(0.5 * dt * w[0], 0.5 * dt * w[1], 0.5 * dt * w[2], 1.0))
    return wp.quat_from_axis_angle(wp.normalize(w), angle)


@wp.func
def integrate_joint(
    j: int,
    dt: float,
    joint_type: wp.array(dtype=wp.int32),
    joint_X_c: wp.array(dtype=wp.transform),
    joint_child: wp.array(dtype=wp.int32),
    joint_q_start: wp.array(dtype=wp.int32),
    joint_qd_start: wp.array(dtype=wp.int32),
    body_com: wp.array(dtype=wp.vec3),
    joint_q_in: wp.array(dtype=float),
    joint_qd_new: wp.array(dtype=float),
    joint_q_out: wp.array(dtype=float),
    joint_qd_out: wp.array(dtype=float),
):
    """Semi-implicit Euler position update of joint ``j`` with the new velocities.

    Scalar coordinates: ``q += dt qd``. BALL: ``R <- exp(dt w) R`` (``w`` in the parent anchor
    frame). FREE-like: the COM moves by ``dt v`` and the rotation as for BALL; the stored
    position (child anchor origin) follows from both. No velocity is damped here: a torque-free
    FREE body keeps its angular momentum.
    """
    qs = joint_q_start[j]
    ds = joint_qd_start[j]
    de = joint_qd_start[j + 1]
    jt = joint_type[j]
    if jt == JT_BALL:
        w = wp.vec3(joint_qd_new[ds], joint_qd_new[ds + 1], joint_qd_new[ds + 2])
        r = wp.quat(joint_q_in[qs], joint_q_in[qs + 1], joint_q_in[qs + 2], joint_q_in[qs + 3])
        r = wp.normalize(rotate_by(w, dt) * r)
        for k in range(4):
            joint_q_out[qs + k] = r[k]
        for k in range(3):
            joint_qd_out[ds + k] = w[k]
    elif jt == JT_FREE or jt == JT_DISTANCE or jt == JT_ROD:
        v = wp.vec3(joint_qd_new[ds], joint_qd_new[ds + 1], joint_qd_new[ds + 2])
        w = wp.vec3(joint_qd_new[ds + 3], joint_qd_new[ds + 4], joint_qd_new[ds + 5])
        t = wp.vec3(joint_q_in[qs], joint_q_in[qs + 1], joint_q_in[qs + 2])
        r = wp.quat(joint_q_in[qs + 3], joint_q_in[qs + 4], joint_q_in[qs + 5], joint_q_in[qs + 6])
        r = wp.normalize(r)
        # child COM in the child anchor frame
        c_J = wp.transform_point(wp.transform_inverse(joint_X_c[j]), body_com[joint_child[j]])
        com = t + wp.quat_rotate(r, c_J) + v * dt
        r_new = wp.normalize(rotate_by(w, dt) * r)
        t_new = com - wp.quat_rotate(r_new, c_J)
        for k in range(3):
            joint_q_out[qs + k] = t_new[k]
            joint_qd_out[ds + k] = v[k]
            joint_qd_out[ds + 3 + k] = w[k]
        for k in range(4):
            joint_q_out[qs + 3 + k] = r_new[k]
    else:
        for i in range(de - ds):
            qd = joint_qd_new[ds + i]
            joint_qd_out[ds + i] = qd
            joint_q_out[qs + i] = joint_q_in[qs + i] + dt * qd


@wp.func_replay(integrate_joint)
def _integrate_joint_replay(
    j: int,
    dt: float,
    joint_type: wp.array(dtype=wp.int32),
    joint_X_c: wp.array(dtype=wp.transform),
    joint_child: wp.array(dtype=wp.int32),
    joint_q_start: wp.array(dtype=wp.int32),
    joint_qd_start: wp.array(dtype=wp.int32),
    body_com: wp.array(dtype=wp.vec3),
    joint_q_in: wp.array(dtype=float),
    joint_qd_new: wp.array(dtype=float),
    joint_q_out: wp.array(dtype=float),
    joint_qd_out: wp.array(dtype=float),
):
    # Replays of this module's array-writing functions (Warp runs a function's replay in the forward
    # part of a kernel's adjoint): the outputs already hold their final values, and re-running an
    # in-place update would apply it twice. See "Gradients" in the module docs.
    pass


@wp.func
def articulation_dofs(js: int, je: int, joint_order: wp.array(dtype=wp.int32),
                      joint_qd_start: wp.array(dtype=wp.int32)):  # fmt: skip
    """First DOF and DOF count of the articulation made of joints ``joint_order[js:je]`` (a function,
    not inline: Warp's adjoint replays a function's loops, not a kernel's)."""
    d0 = joint_qd_start[joint_order[js]]
    n = int(0)
    for jj in range(js, je):
        j = joint_order[jj]
        if joint_qd_start[j] < d0:
            d0 = joint_qd_start[j]
        n = n + joint_qd_start[j + 1] - joint_qd_start[j]
    return d0, n


@wp.func
def crba_mass_matrix(
    a: int,
    js: int,
    je: int,
    d0: int,
    joint_order: wp.array(dtype=wp.int32),
    joint_child: wp.array(dtype=wp.int32),
    joint_path_start: wp.array(dtype=wp.int32),
    joint_path: wp.array(dtype=wp.int32),
    joint_qd_start: wp.array(dtype=wp.int32),
    joint_armature: wp.array(dtype=float),
    S: wp.array(dtype=wp.spatial_vector),
    Ic: wp.array(dtype=wp.spatial_matrix),
    H: wp.array3d(dtype=float),
):
    """Composite-rigid-body mass matrix of articulation ``a`` into ``H[a]`` (zeroed by the caller):
    ``H_il = S_l . (Ic_child(i) S_i)`` along each joint's path to the root (``joint_path``), plus
    ``joint_armature`` on the diagonal (the same sums, in the same order, as
    :func:`armillary.sim.dynamics_kernels.assemble_mass_matrix`, whose ancestor walk is a
    ``while`` loop, which Warp cannot differentiate)."""
    for jj in range(js, je):
        j = joint_order[jj]
        Icc = Ic[joint_child[j]]
        for i in range(joint_qd_start[j], joint_qd_start[j + 1]):
            Fi = Icc * S[i]
            li = i - d0
            for t in range(joint_path_start[j], joint_path_start[j + 1]):
                k = joint_path[t]
                for l in range(joint_qd_start[k], joint_qd_start[k + 1]):
                    val = wp.dot(S[l], Fi)
                    H[a, li, l - d0] = val
                    H[a, l - d0, li] = val
            H[a, li, li] = H[a, li, li] + joint_armature[i]


@wp.func_replay(crba_mass_matrix)
def _crba_mass_matrix_replay(
    a: int,
    js: int,
    je: int,
    d0: int,
    joint_order: wp.array(dtype=wp.int32),
    joint_child: wp.array(dtype=wp.int32),
    joint_path_start: wp.array(dtype=wp.int32),
    joint_path: wp.array(dtype=wp.int32),
    joint_qd_start: wp.array(dtype=wp.int32),
    joint_armature: wp.array(dtype=float),
    S: wp.array(dtype=wp.spatial_vector),
    Ic: wp.array(dtype=wp.spatial_matrix),
    H: wp.array3d(dtype=float),
):
    pass


@wp.func
def reduce_system(
    a: int,
    js: int,
    je: int,
    d0: int,
    n: int,
    joint_order: wp.array(dtype=wp.int32),
    joint_child: wp.array(dtype=wp.int32),
    joint_qd_start: wp.array(dtype=wp.int32),
    body_flags: wp.array(dtype=wp.int32),
    dof_mimic_ref: wp.array(dtype=wp.int32),
    dof_mimic_coeffs: wp.array(dtype=wp.vec2),
    L: wp.array3d(dtype=float),
    tau: wp.array(dtype=float),
    with_tau: int,
):
    """Mimic reduction and kinematic locking of the system ``L[a] qdd = tau`` (``tau`` only when
    ``with_tau``). A follower DOF ``f = c0 + c1 ref`` moves with its reference, so its row and column
    fold into the reference's (``T^T M T``, ``T^T tau``) and it is solved as ``qdd_f = 0``; the DOFs
    of kinematic bodies' joints keep their prescribed velocity (``qdd = 0``). In place and linear
    (so Warp's adjoint of the in-place updates is exact)."""
    for i in range(d0, d0 + n):
        r = dof_mimic_ref[i]
        if r >= 0:
            c1 = dof_mimic_coeffs[i][1]
            li = i - d0
            lr = r - d0
            if with_tau != 0:
                tau[r] = tau[r] + c1 * tau[i]
                tau[i] = 0.0
            for k in range(n):
                L[a, lr, k] = L[a, lr, k] + c1 * L[a, li, k]
            for k in range(n):
                L[a, k, lr] = L[a, k, lr] + c1 * L[a, k, li]
            for k in range(n):
                L[a, li, k] = 0.0
                L[a, k, li] = 0.0
            L[a, li, li] = 1.0
    for jj in range(js, je):
        j = joint_order[jj]
        if (body_flags[joint_child[j]] & BODY_KINEMATIC) != 0:
            for i in range(joint_qd_start[j], joint_qd_start[j + 1]):
                li = i - d0
                for k in range(n):
                    L[a, li, k] = 0.0
                    L[a, k, li] = 0.0
                L[a, li, li] = 1.0
                if with_tau != 0:
                    tau[i] = 0.0


@wp.func_replay(reduce_system)
def _reduce_system_replay(
    a: int,
    js: int,
    je: int,
    d0: int,
    n: int,
    joint_order: wp.array(dtype=wp.int32),
    joint_child: wp.array(dtype=wp.int32),
    joint_qd_start: wp.array(dtype=wp.int32),
    body_flags: wp.array(dtype=wp.int32),
    dof_mimic_ref: wp.array(dtype=wp.int32),
    dof_mimic_coeffs: wp.array(dtype=wp.vec2),
    L: wp.array3d(dtype=float),
    tau: wp.array(dtype=float),
    with_tau: int,
):
    pass


@wp.func
def minus_row_products(s: float, L: wp.array3d(dtype=float), a: int, i: int, k: int, count: int) -> float:
    """``s - sum_{m < count} L[a, i, m] L[a, k, m]``, subtracted term by term."""
    for m in range(count):
        s = s - L[a, i, m] * L[a, k, m]
    return s


@wp.func
def cholesky(a: int, n: int, A: wp.array3d(dtype=float), Lf: wp.array3d(dtype=float)):
    """Dense Cholesky ``Lf[a] Lf[a]^T = A[a]`` (lower triangles). ``Lf`` may be ``A`` (in place);
    with separate arrays every ``Lf`` entry is written once, as Warp's adjoint needs."""
    for i in range(n):
        for k in range(i + 1):
            s = minus_row_products(A[a, i, k], Lf, a, i, k, k)
            if i == k:
                Lf[a, i, i] = wp.sqrt(wp.max(s, 1.0e-12))
            else:
                Lf[a, i, k] = s / Lf[a, k, k]


@wp.func_replay(cholesky)
def _cholesky_replay(a: int, n: int, A: wp.array3d(dtype=float), Lf: wp.array3d(dtype=float)):
    pass


@wp.func
def column_products(Lf: wp.array3d(dtype=float), Linv: wp.array3d(dtype=float), a: int, i: int, j: int) -> float:
    """``sum_{j <= k < i} Lf[a, i, k] Linv[a, k, j]``."""
    s = float(0.0)
    for k in range(j, i):
        s = s + Lf[a, i, k] * Linv[a, k, j]
    return s


@wp.func
def invert_lower(a: int, n: int, Lf: wp.array3d(dtype=float), Linv: wp.array3d(dtype=float)):
    """``Linv[a] = Lf[a]^-1`` for the lower-triangular Cholesky factor ``Lf[a]``, column by column
    (``n^3 / 6`` multiply-adds); ``Linv`` may be ``Lf`` (in place)."""
    for j in range(n):
        Linv[a, j, j] = 1.0 / Lf[a, j, j]
        for i in range(j + 1, n):
            Linv[a, i, j] = -column_products(Lf, Linv, a, i, j) / Lf[a, i, i]


@wp.func_replay(invert_lower)
def _invert_lower_replay(a: int, n: int, Lf: wp.array3d(dtype=float), Linv: wp.array3d(dtype=float)):
    pass


@wp.func
def mark_path(
    j: int,
    sign: float,
    row: int,
    joint_path_start: wp.array(dtype=wp.int32),
    joint_path: wp.array(dtype=wp.int32),
    joint_qd_start: wp.array(dtype=wp.int32),
    dof_sign: wp.array2d(dtype=float),
):
    """Add ``sign`` to ``dof_sign[row]`` on the DOFs of joint ``j`` and its ancestors."""
    for t in range(joint_path_start[j], joint_path_start[j + 1]):
        k = joint_path[t]
        for i in range(joint_qd_start[k], joint_qd_start[k + 1]):
            dof_sign[row, i] = dof_sign[row, i] + sign


@wp.func_replay(mark_path)
def _mark_path_replay(
    j: int,
    sign: float,
    row: int,
    joint_path_start: wp.array(dtype=wp.int32),
    joint_path: wp.array(dtype=wp.int32),
    joint_qd_start: wp.array(dtype=wp.int32),
    dof_sign: wp.array2d(dtype=float),
):
    pass


@wp.func
def add_relative_stiffness(
    a: int,
    d0: int,
    n: int,
    row: int,
    b0: int,
    b1: int,
    K: wp.spatial_matrix,
    body_joint: wp.array(dtype=wp.int32),
    joint_articulation: wp.array(dtype=wp.int32),
    joint_path_start: wp.array(dtype=wp.int32),
    joint_path: wp.array(dtype=wp.int32),
    joint_qd_start: wp.array(dtype=wp.int32),
    S: wp.array(dtype=wp.spatial_vector),
    dof_sign: wp.array2d(dtype=float),
    L: wp.array3d(dtype=float),
):
    """``L[a] += (J1 - J0)^T K (J1 - J0)`` for the twist-space matrix ``K`` (about the articulation's
    reference point) of a contact between bodies ``b1`` and ``b0`` of articulation ``a``: ``J1 - J0``
    has ``+S_i`` on the joints from the common ancestor down to ``b1``, ``-S_i`` down to ``b0``
    and nothing on the joints above the common ancestor (the two bodies' common motion).
    ``dof_sign[row]`` is per-DOF scratch (this articulation's columns only; one row per pair while a
    tape records, so that the adjoint reads each pair's own signs)."""
    for i in range(d0, d0 + n):
        dof_sign[row, i] = 0.0
    j = body_joint[b1]
    if in_articulation(j, a, joint_articulation):
        mark_path(j, 1.0, row, joint_path_start, joint_path, joint_qd_start, dof_sign)
    j = body_joint[b0]
    if in_articulation(j, a, joint_articulation):
        mark_path(j, -1.0, row, joint_path_start, joint_path, joint_qd_start, dof_sign)
    for i in range(d0, d0 + n):
        si = dof_sign[row, i]
        if si != 0.0:
            Fi = si * (K * S[i])
            for l in range(d0, d0 + n):
                sl = dof_sign[row, l]
                if sl != 0.0:
                    L[a, i - d0, l - d0] = L[a, i - d0, l - d0] + sl * wp.dot(S[l], Fi)


@wp.func_replay(add_relative_stiffness)
def _add_relative_stiffness_replay(
    a: int,
    d0: int,
    n: int,
    row: int,
    b0: int,
    b1: int,
    K: wp.spatial_matrix,
    body_joint: wp.array(dtype=wp.int32),
    joint_articulation: wp.array(dtype=wp.int32),
    joint_path_start: wp.array(dtype=wp.int32),
    joint_path: wp.array(dtype=wp.int32),
    joint_qd_start: wp.array(dtype=wp.int32),
    S: wp.array(dtype=wp.spatial_vector),
    dof_sign: wp.array2d(dtype=float),
    L: wp.array3d(dtype=float),
):
    pass


@wp.func
def minus_solved(s: float, Lf: wp.array3d(dtype=float), x: wp.array(dtype=float), a: int, d0: int, i: int,
                 first: int, last: int, transposed: int) -> float:  # fmt: skip
    """``s - sum_{first <= m < last} Lf[a, i, m] x[d0 + m]`` (``Lf[a, m, i]`` when ``transposed``),
    subtracted term by term: a row of the forward (back) substitution."""
    for m in range(first, last):
        if transposed != 0:
            s = s - Lf[a, m, i] * x[d0 + m]
        else:
            s = s - Lf[a, i, m] * x[d0 + m]
    return s


@wp.kernel
def articulation_step_kernel(
    # Model:
    art_start: wp.array(dtype=wp.int32),
    art_end: wp.array(dtype=wp.int32),
    joint_order: wp.array(dtype=wp.int32),
    joint_type: wp.array(dtype=wp.int32),
    joint_parent: wp.array(dtype=wp.int32),
    joint_child: wp.array(dtype=wp.int32),
    joint_ancestor: wp.array(dtype=wp.int32),
    joint_articulation: wp.array(dtype=wp.int32),
    joint_world: wp.array(dtype=wp.int32),
    joint_X_p: wp.array(dtype=wp.transform),
    joint_X_c: wp.array(dtype=wp.transform),
    joint_q_start: wp.array(dtype=wp.int32),
    joint_qd_start: wp.array(dtype=wp.int32),
    joint_dof_dim: wp.array2d(dtype=wp.int32),
    joint_axis: wp.array(dtype=wp.vec3),
    joint_armature: wp.array(dtype=float),
    joint_damping: wp.array(dtype=float),
    joint_stiffness: wp.array(dtype=float),
    joint_rest_q: wp.array(dtype=float),
    joint_target_mode: wp.array(dtype=wp.int32),
    joint_target_ke: wp.array(dtype=float),
    joint_target_kd: wp.array(dtype=float),
    joint_effort_limit: wp.array(dtype=float),
    joint_limit_lower: wp.array(dtype=float),
    joint_limit_upper: wp.array(dtype=float),
    joint_limit_ke: wp.array(dtype=float),
    joint_limit_kd: wp.array(dtype=float),
    body_com: wp.array(dtype=wp.vec3),
    body_mass: wp.array(dtype=float),
    body_inertia: wp.array(dtype=wp.mat33),
    body_flags: wp.array(dtype=wp.int32),
    gravity: wp.array(dtype=wp.vec3),
    # Solver tables (per joint, per body, per self-contact body pair, per articulation):
    joint_path_start: wp.array(dtype=wp.int32),
    joint_path: wp.array(dtype=wp.int32),
    body_joint: wp.array(dtype=wp.int32),
    pair_body: wp.array(dtype=wp.int32),
    pair_partner: wp.array(dtype=wp.int32),
    art_pair_start: wp.array(dtype=wp.int32),
    # Solver tables (per DOF):
    dof_mimic_ref: wp.array(dtype=wp.int32),
    dof_mimic_coeffs: wp.array(dtype=wp.vec2),
    dof_mimic_ref_q: wp.array(dtype=wp.int32),
    dof_scalar: wp.array(dtype=wp.int32),
    # Options:
    dt: float,
    limit_tc: float,
    mass_matrix_interval: int,
    use_body_f: int,
    use_contact_f: int,
    want_inverse_inertia: int,
    copy_M: int,
    # State in:
    joint_q_in: wp.array(dtype=float),
    joint_qd_in: wp.array(dtype=float),
    body_f_in: wp.array(dtype=wp.spatial_vector),
    body_f_contact_in: wp.array(dtype=wp.spatial_vector),
    body_K_contact_in: wp.array(dtype=wp.spatial_matrix),
    pair_K_contact_in: wp.array(dtype=wp.spatial_matrix),
    body_contact_flag: wp.array(dtype=wp.int32),
    step_count: wp.array(dtype=wp.int32),
    M_prev: wp.array3d(dtype=float),
    # Control:
    joint_f: wp.array(dtype=float),
    joint_target_q: wp.array(dtype=float),
    joint_target_qd: wp.array(dtype=float),
    # Scratch:
    S: wp.array(dtype=wp.spatial_vector),
    Ic: wp.array(dtype=wp.spatial_matrix),
    Kc: wp.array(dtype=wp.spatial_matrix),
    V: wp.array(dtype=wp.spatial_vector),
    A: wp.array(dtype=wp.spatial_vector),
    F: wp.array(dtype=wp.spatial_vector),
    M: wp.array3d(dtype=float),
    L: wp.array3d(dtype=float),
    Lf: wp.array3d(dtype=float),
    tau: wp.array(dtype=float),
    y: wp.array(dtype=float),
    qdd: wp.array(dtype=float),
    qd_new: wp.array(dtype=float),
    L2: wp.array3d(dtype=float),
    L2f: wp.array3d(dtype=float),
    L2inv: wp.array3d(dtype=float),
    Y: wp.array2d(dtype=wp.spatial_vector),
    dof_sign: wp.array2d(dtype=float),
    body_q_fk: wp.array(dtype=wp.transform),
    body_qd_fk: wp.array(dtype=wp.spatial_vector),
    # Solver out:
    body_Ainv_out: wp.array(dtype=wp.spatial_matrix),
    step_count_out: wp.array(dtype=wp.int32),
    body_contact_flag_out: wp.array(dtype=wp.int32),
    # State out:
    joint_q_out: wp.array(dtype=float),
    joint_qd_out: wp.array(dtype=float),
    body_q_out: wp.array(dtype=wp.transform),
    body_qd_out: wp.array(dtype=wp.spatial_vector),
    # Solver out (SolverBase.nonfinite_flags, the fused non-finite guard):
    nonfinite_flags: wp.array(dtype=wp.int32),
):
    """One step of one articulation (see the module docs). The pairs ``L``/``Lf`` (the step's system
    and its Cholesky factor), ``tau``/``y``/``qdd`` (right-hand side, forward-substituted, solved),
    ``L2``/``L2f``/``L2inv``, ``body_q_fk``/``body_q_out``, ``body_qd_fk``/``body_qd_out``,
    ``step_count``/``step_count_out``, ``body_contact_flag``/``body_contact_flag_out`` and
    ``M_prev``/``M`` may be the same arrays (in place: the solver's plain step); while a tape records
    they are separate, so that every value the adjoint reads is still there."""
    a = wp.tid()
    js = art_start[a]
    je = art_end[a]
    d0, n = articulation_dofs(js, je, joint_order, joint_qd_start)

    # 1. forward kinematics of the input coordinates (poses and COM twists in body_q_fk/body_qd_fk)
    for jj in range(js, je):
        fk_joint(joint_order[jj], joint_type, joint_parent, joint_child, joint_X_p, joint_X_c, joint_q_start,
                 joint_qd_start, joint_dof_dim, joint_axis, body_com, joint_q_in, joint_qd_in, body_q_fk,
                 body_qd_fk)  # fmt: skip

    origin = wp.transform_get_translation(body_q_fk[joint_child[joint_order[js]]])
    world = joint_world[joint_order[js]]
    if world < 0:
        world = gravity.shape[0] - 1  # the global world's row (the last one)
    a_base = spatial(-gravity[world], wp.vec3(0.0))
    count = step_count[a]
    step_count_out[a] = count + 1
    rebuild_M = (count % mass_matrix_interval) == 0

    # 2. forward pass: subspaces, velocities, accelerations (gravity as base acceleration),
    #    net body wrenches minus external wrenches
    for jj in range(js, je):
        j = joint_order[jj]
        c = joint_child[j]
        vJ, kappa = joint_subspace(j, origin, joint_type, joint_parent, joint_child, joint_X_p, joint_X_c,
                                   joint_q_start, joint_qd_start, joint_dof_dim, joint_axis, body_q_fk, body_com,
                                   joint_q_in, joint_qd_in, 1, S)  # fmt: skip
        X_WC = body_q_fk[c]
        com_c = wp.transform_point(X_WC, body_com[c]) - origin
        Ib = body_spatial_inertia(body_mass[c], com_c, world_inertia(X_WC, body_inertia[c]))
        Ic[c] = Ib
        Vp = wp.spatial_vector()
        Ap = a_base
        if in_articulation(joint_ancestor[j], a, joint_articulation):
            Vp = V[joint_parent[j]]
            Ap = A[joint_parent[j]]
        Vc = Vp + vJ
        Ac = Ap + twist_cross(Vc, vJ) + kappa
        V[c] = Vc
        A[c] = Ac
        f_ext = wp.spatial_vector()
        if use_body_f != 0:
            bf = body_f_in[c]
            f_ext = f_ext + com_wrench_about(lin(bf), ang(bf), com_c)
        if use_contact_f != 0:
            cf = body_f_contact_in[c]
            f_ext = f_ext + com_wrench_about(lin(cf), ang(cf), com_c)
            Kc[c] = shift_twist_matrix(body_K_contact_in[c], origin)
        jt = joint_type[j]
        if jt == JT_FREE or jt == JT_DISTANCE or jt == JT_ROD:
            # Control.joint_f of a FREE joint: world wrench (force, torque) at the child's COM
            ds = joint_qd_start[j]
            f_j = wp.vec3(joint_f[ds], joint_f[ds + 1], joint_f[ds + 2])
            t_j = wp.vec3(joint_f[ds + 3], joint_f[ds + 4], joint_f[ds + 5])
            f_ext = f_ext + com_wrench_about(f_j, t_j, com_c)
        F[c] = Ib * Ac + wrench_cross(Vc, Ib * Vc) - f_ext

    # 3. backward pass: bias forces projected on the joint axes; composite inertias
    for jr in range(je - js):
        j = joint_order[je - 1 - jr]
        c = joint_child[j]
        for i in range(joint_qd_start[j], joint_qd_start[j + 1]):
            tau[i] = -wp.dot(S[i], F[c])
        if in_articulation(joint_ancestor[j], a, joint_articulation):
            p = joint_parent[j]
            F[p] = F[p] + F[c]
            if use_contact_f != 0:
                Kc[p] = Kc[p] + Kc[c]
            if rebuild_M:
                Ic[p] = Ic[p] + Ic[c]

    # 4. composite-rigid-body mass matrix (with armature), kept between rebuilds (M_prev: the last one)
    if rebuild_M:
        for r in range(n):
            for k in range(n):
                M[a, r, k] = 0.0
        crba_mass_matrix(a, js, je, d0, joint_order, joint_child, joint_path_start, joint_path, joint_qd_start,
                             joint_armature, S, Ic, M)  # fmt: skip
    elif copy_M != 0:
        for r in range(n):
            for k in range(n):
                M[a, r, k] = M_prev[a, r, k]

    for r in range(n):
        for k in range(n):
            L[a, r, k] = M[a, r, k]

    # 5. joint-space forces: Control.joint_f (non-FREE), springs, damping (implicit), drives and limits,
    #    DISTANCE ranges (implicit)
    for jj in range(js, je):
        j = joint_order[jj]
        jt = joint_type[j]
        qs = joint_q_start[j]
        ds = joint_qd_start[j]
        if jt == JT_DISTANCE:
            # the range of the anchor separation: a radial force on the joint's 6 DOFs, implicit (branches,
            # not `continue`: Warp's adjoint of a dynamic loop skips the rest of an iteration's adjoint too)
            l0 = ds - d0
            g_dist, f_dist, h_dist = distance_limit(j, a, l0, dt, joint_q_in, joint_qd_in, joint_q_start,
                                                    joint_qd_start, joint_X_c, joint_child, joint_axis, body_com,
                                                    joint_limit_lower, joint_limit_upper, joint_limit_ke,
                                                    joint_limit_kd, M, limit_tc)  # fmt: skip
            if h_dist > 0.0:
                for row in range(6):
                    tau[ds + row] = tau[ds + row] + g_dist[row] * f_dist
                    for col in range(6):
                        L[a, l0 + row, l0 + col] = L[a, l0 + row, l0 + col] + h_dist * g_dist[row] * g_dist[col]
        elif jt != JT_FREE and jt != JT_ROD:
            for k in range(joint_qd_start[j + 1] - ds):
                i = ds + k
                li = i - d0
                qd = joint_qd_in[i]
                f = joint_f[i] - joint_damping[i] * qd
                h = dt * joint_damping[i]
                if dof_scalar[i] != 0:
                    q = joint_q_in[qs + k]
                    f = f + joint_stiffness[i] * (joint_rest_q[qs + k] - q)
                    fd, hd = drive_and_limit_force(i, q, qd, dt, joint_target_mode, joint_target_ke, joint_target_kd,
                                                   joint_effort_limit, joint_limit_lower, joint_limit_upper,
                                                   joint_limit_ke, joint_limit_kd, joint_target_q[qs + k],
                                                   joint_target_qd[i], M[a, li, li], limit_tc)  # fmt: skip
                    f = f + fd
                    h = h + hd
                tau[i] = tau[i] + f
                L[a, li, li] = L[a, li, li] + h

    # 6. articulated inverse inertia (about the COM) of the bodies near a contact, J M^-1 J^T from the
    #    step's matrix without the contact terms (a copy in L2): the contact kernel's stiffness floor
    #    uses it next step. With M = L L^T, J M^-1 J^T = Y^T Y, Y = L^-1 J^T, built down the tree:
    #    Y_child = Y_parent + sum over the joint's DOFs i of (column i of L^-1) S_i^T (mimic followers
    #    folded into their references, kinematic joints locked).
    if use_contact_f != 0:
        if want_inverse_inertia != 0:
            for r in range(n):
                for k in range(n):
                    L2[a, r, k] = L[a, r, k]
            reduce_system(a, js, je, d0, n, joint_order, joint_child, joint_qd_start, body_flags, dof_mimic_ref,
                          dof_mimic_coeffs, L2, tau, 0)  # fmt: skip
            cholesky(a, n, L2, L2f)
            invert_lower(a, n, L2f, L2inv)
        for jj in range(js, je):
            j = joint_order[jj]
            c = joint_child[j]
            Ab = wp.spatial_matrix()
            if want_inverse_inertia != 0:
                p = joint_parent[j]
                from_parent = in_articulation(joint_ancestor[j], a, joint_articulation)
                for r in range(n):
                    if from_parent:
                        Y[c, r] = Y[p, r]
                    else:
                        Y[c, r] = wp.spatial_vector()
                if (body_flags[c] & BODY_KINEMATIC) == 0:
                    for i in range(joint_qd_start[j], joint_qd_start[j + 1]):
                        t = i
                        coef = float(1.0)
                        if dof_mimic_ref[i] >= 0:
                            t = dof_mimic_ref[i]
                            coef = dof_mimic_coeffs[i][1]
                        lt = t - d0
                        for r in range(lt, n):
                            Y[c, r] = Y[c, r] + (coef * L2inv[a, r, lt]) * S[i]
                if body_contact_flag[c] != 0:
                    com_c = wp.transform_point(body_q_fk[c], body_com[c]) - origin
                    for r in range(n):
                        ys = twist_at(Y[c, r], com_c)
                        Ab = Ab + wp.outer(ys, ys)
            body_Ainv_out[c] = Ab
            body_contact_flag_out[c] = 0  # consumed: the next contact pass sets it again

    # 7. the step's system: M + implicit joint terms + implicit contact stiffness/damping
    #    (sum_b J_b^T K_b J_b, assembled like the CRBA from the composite contact matrices Kc, plus
    #    (J1 - J0)^T K (J1 - J0) of each self-contact body pair, whose cousin-DOF blocks the CRBA
    #    pattern cannot hold)
    if use_contact_f != 0:
        for jj in range(js, je):
            j = joint_order[jj]
            Kcc = Kc[joint_child[j]]
            for i in range(joint_qd_start[j], joint_qd_start[j + 1]):
                Fi = Kcc * S[i]
                li = i - d0
                for l in range(joint_qd_start[j], joint_qd_start[j + 1]):
                    L[a, li, l - d0] = L[a, li, l - d0] + wp.dot(S[l], Fi)
                for t in range(joint_path_start[j] + 1, joint_path_start[j + 1]):  # the strict ancestors
                    k = joint_path[t]
                    for l in range(joint_qd_start[k], joint_qd_start[k + 1]):
                        val = wp.dot(S[l], Fi)
                        L[a, li, l - d0] = L[a, li, l - d0] + val
                        L[a, l - d0, li] = L[a, l - d0, li] + val
        last_row = dof_sign.shape[0] - 1
        for ps in range(art_pair_start[a], art_pair_start[a + 1]):
            Kp = pair_K_contact_in[ps]
            if Kp[0, 0] + Kp[1, 1] + Kp[2, 2] > 0.0:  # the pair has a contact with force this step
                add_relative_stiffness(a, d0, n, wp.min(ps, last_row), pair_body[ps], pair_partner[ps],
                                       shift_twist_matrix(Kp, origin), body_joint, joint_articulation,
                                       joint_path_start, joint_path, joint_qd_start, S, dof_sign, L)  # fmt: skip
    # mimic reduction and kinematic locking, then the dense Cholesky solve for qdd
    reduce_system(a, js, je, d0, n, joint_order, joint_child, joint_qd_start, body_flags, dof_mimic_ref,
                  dof_mimic_coeffs, L, tau, 1)  # fmt: skip
    cholesky(a, n, L, Lf)
    for i in range(n):
        y[d0 + i] = minus_solved(tau[d0 + i], Lf, y, a, d0, i, 0, i, 0) / Lf[a, i, i]
    for ir in range(n):
        i = n - 1 - ir
        qdd[d0 + i] = minus_solved(y[d0 + i], Lf, qdd, a, d0, i, i + 1, n, 1) / Lf[a, i, i]
    for i in range(d0, d0 + n):
        r = dof_mimic_ref[i]
        if r >= 0:
            qdd[i] = dof_mimic_coeffs[i][1] * qdd[r]

    # 8. semi-implicit Euler: velocities first, then positions on the joint manifold
    for i in range(d0, d0 + n):
        qd_new[i] = joint_qd_in[i] + dt * qdd[i]
    for jj in range(js, je):
        integrate_joint(joint_order[jj], dt, joint_type, joint_X_c, joint_child, joint_q_start,
                        joint_qd_start, body_com, joint_q_in, qd_new, joint_q_out, joint_qd_out)  # fmt: skip
    # mimic followers: exact position relation with the integrated reference
    for jj in range(js, je):
        j = joint_order[jj]
        qs = joint_q_start[j]
        ds = joint_qd_start[j]
        for k in range(joint_qd_start[j + 1] - ds):
            r = dof_mimic_ref[ds + k]
            if r >= 0:
                mc = dof_mimic_coeffs[ds + k]
                joint_q_out[qs + k] = mc[0] + mc[1] * joint_q_out[dof_mimic_ref_q[ds + k]]
                joint_qd_out[ds + k] = mc[1] * joint_qd_out[r]

    # 9. forward kinematics of the result
    for jj in range(js, je):
        fk_joint(joint_order[jj], joint_type, joint_parent, joint_child, joint_X_p, joint_X_c, joint_q_start,
                 joint_qd_start, joint_dof_dim, joint_axis, body_com, joint_q_out, joint_qd_out, body_q_out,
                 body_qd_out)  # fmt: skip

    # 10. the non-finite guard (SolverBase.nonfinite_flags): this articulation's outputs and force inputs
    for jj in range(js, je):
        j = joint_order[jj]
        c = joint_child[j]
        if not (transform_finite(body_q_out[c]) and twist_finite(body_qd_out[c])):
            report_nonfinite(nonfinite_flags, 0, c)
        if use_body_f != 0:
            if not twist_finite(body_f_in[c]):
                report_nonfinite(nonfinite_flags, 5, c)
        for i in range(joint_q_start[j], joint_q_start[j + 1]):
            if not wp.isfinite(joint_q_out[i]):
                report_nonfinite(nonfinite_flags, 2, i)
        for i in range(joint_qd_start[j], joint_qd_start[j + 1]):
            if not wp.isfinite(joint_qd_out[i]):
                report_nonfinite(nonfinite_flags, 3, i)
            if not wp.isfinite(joint_f[i]):
                report_nonfinite(nonfinite_flags, 4, i)


@wp.kernel
def write_spatial_force(f: wp.array(dtype=wp.vec3), n: int, out: wp.array(dtype=wp.spatial_vector)):
    """``out[k] = (f[k], 0)`` for the first ``n`` contacts, zero after."""
    k = wp.tid()
    if k < n:
        out[k] = wp.spatial_vector(f[k], wp.vec3(0.0))
    else:
        out[k] = wp.spatial_vector()

"""ADMM contact rows of :class:`~armillary_coupling.solver_coupled_admm.SolverCoupledADMM`.

One contact row couples two endpoints owned by the two entries of a
:class:`~armillary_coupling.solver_coupled_admm.SolverCoupledADMM.ContactPair`:

* rigid-rigid (``ROW_RIGID``): a contact of the private :class:`~armillary.CollisionPipeline`
  whose explicit broad phase holds only the cross-entry shape pairs of the contact pairs
  (A = shape 0's body, B = shape 1's body);
* rigid-particle (``ROW_SOFT``): a soft contact of that pipeline whose particle and shape body
  belong to the two entries of a pair (A = the shape's body, B = the particle);
* particle-particle (``ROW_PARTICLE``): detected by :func:`particle_detect_kernel` through a
  private ``wp.HashGrid`` (A = the particle of the lower entry index, B = the other one).

Row storage is a fixed-capacity slot layout (no compaction): slots ``[0, R)`` mirror the
pipeline's rigid contacts (slot = contact index, so the core matcher's
``rigid_contact_match_index`` addresses the previous step's slots), ``[R, R + S)`` its soft
contacts and ``[R + S, R + S + P)`` the particle-particle stream; an unused slot has kind
``ROW_NONE``.

Conventions (as in :mod:`.admm_kernels`): ``body_q`` is the body frame, ``body_com`` the COM in
the body frame, ``body_qd = (v_com, w)`` and ``body_f = (f, tau_com)`` in the world frame. A row
stores, at detection (the step's input state), the world normal ``n`` [unit, from A toward B],
the endpoint points in their body frames [m] (body endpoints; fixed for the step), the thickness
``h`` [m] subtracted from the normal separation (particle radii; the rigid surface points
already include the shape margins) and the world points at the step start [m] (for the slip).
Its gap is ``g = n . (x_B - x_A) - h`` [m] and its dual variables are the normal force
``lam_n >= 0`` [N] and the tangential friction force ``lam_t`` [N] (``n . lam_t = 0``,
``|lam_t| <= mu lam_n``), applied as ``lam_n n + lam_t`` to B and opposite to A.
"""

from __future__ import annotations

import numpy as np
import warp as wp

from .admm_kernels import point_mobility, relaxation, world_inv_inertia

ROW_NONE = wp.constant(-1)
ROW_RIGID = wp.constant(0)
ROW_SOFT = wp.constant(1)
ROW_PARTICLE = wp.constant(2)

#: per-particle slots of the particle-row warm-start table
WARM_SLOT_COUNT = 8
WARM_SLOTS = wp.constant(WARM_SLOT_COUNT)


@wp.struct
class ContactRows:
    """Device arrays of the contact rows (capacity ``C``; see the module documentation)."""

    kind: wp.array(dtype=wp.int32)  # ROW_* (ROW_NONE: unused slot)
    body_a: wp.array(dtype=wp.int32)  # body of endpoint A (-1: particle endpoint)
    body_b: wp.array(dtype=wp.int32)
    part_a: wp.array(dtype=wp.int32)  # particle of endpoint A (-1: body endpoint)
    part_b: wp.array(dtype=wp.int32)
    point_a: wp.array(dtype=wp.vec3)  # body-frame point of a body endpoint [m]
    point_b: wp.array(dtype=wp.vec3)
    x_a: wp.array(dtype=wp.vec3)  # world point of A at the step start [m]
    x_b: wp.array(dtype=wp.vec3)
    normal: wp.array(dtype=wp.vec3)  # world normal from A toward B
    thickness: wp.array(dtype=float)  # subtracted from the normal separation [m]
    mu: wp.array(dtype=float)  # Coulomb friction coefficient
    lam_n: wp.array(dtype=float)  # normal force [N] (>= 0)
    lam_t: wp.array(dtype=wp.vec3)  # tangential friction force on B [N] (world)
    pred: wp.array(dtype=wp.vec3)  # predicted end-of-step relative displacement x_B - x_A [m]
    acc: wp.array(dtype=wp.vec3)  # relative acceleration the last step produced [m/s^2]


# ---------------------------------------------------------------------------- endpoint helpers
@wp.func
def endpoint_point(body: int, part: int, point: wp.vec3, body_q: wp.array(dtype=wp.transform),
                   particle_q: wp.array(dtype=wp.vec3)):  # fmt: skip
    """World position [m] of a row endpoint (a body point or a particle centre)."""
    if body >= 0:
        return wp.transform_point(body_q[body], point)
    return particle_q[part]


@wp.func
def endpoint_velocity(body: int, part: int, point: wp.vec3, body_q: wp.array(dtype=wp.transform),
                      body_qd: wp.array(dtype=wp.spatial_vector), body_com: wp.array(dtype=wp.vec3),
                      particle_qd: wp.array(dtype=wp.vec3)):  # fmt: skip
    """World velocity [m/s] of a row endpoint."""
    if body >= 0:
        X = body_q[body]
        r = wp.transform_point(X, point) - wp.transform_point(X, body_com[body])
        return wp.spatial_top(body_qd[body]) + wp.cross(wp.spatial_bottom(body_qd[body]), r)
    return particle_qd[part]


@wp.func
def endpoint_mobility(body: int, part: int, point: wp.vec3, body_q: wp.array(dtype=wp.transform),
                      body_com: wp.array(dtype=wp.vec3), eff_inv_mass: wp.array(dtype=float),
                      eff_inv_inertia: wp.array(dtype=wp.mat33),
                      particle_eff_inv_mass: wp.array(dtype=float)):  # fmt: skip
    """Free-endpoint mobility (3x3, world) of a row endpoint: the linear velocity response of the
    point to a unit force applied there [1/kg]."""
    if body >= 0:
        X = body_q[body]
        r = wp.transform_point(X, point) - wp.transform_point(X, body_com[body])
        Iw = world_inv_inertia(wp.transform_get_rotation(X), eff_inv_inertia[body])
        return point_mobility(eff_inv_mass[body], Iw, r)
    return wp.identity(3, dtype=float) * particle_eff_inv_mass[part]


@wp.func
def warm_lookup(p: int, key: int, tab_count: wp.array(dtype=wp.int32), tab_key: wp.array(dtype=wp.int32)):
    """Table slot of the previous step's particle row keyed ``(p, key)`` (-1: none)."""
    n = wp.min(tab_count[p], WARM_SLOTS)
    for s in range(n):
        if tab_key[p * WARM_SLOTS + s] == key:
            return p * WARM_SLOTS + s
    return -1


@wp.func
def init_row(rows: ContactRows, i: int, n: wp.vec3, ln: float, lt: wp.vec3, acc: wp.vec3, scale: float):
    """Warm start of row ``i``: ``scale`` times the previous dual (friction re-projected onto the
    new tangent plane) and the previous relative acceleration (zero for a new row)."""
    t = lt * scale
    rows.lam_n[i] = ln * scale
    rows.lam_t[i] = t - n * wp.dot(n, t)
    rows.acc[i] = acc


# ---------------------------------------------------------------------------- detection
@wp.kernel
def warm_store_kernel(
    rows: ContactRows,
    row_offset: int,
    # outputs: per-particle warm-start table (tab_count zeroed before)
    tab_count: wp.array(dtype=wp.int32),
    tab_key: wp.array(dtype=wp.int32),
    tab_lam: wp.array(dtype=wp.vec4),
    tab_acc: wp.array(dtype=wp.vec3),
):
    """Record the duals (and relative accelerations) of last step's particle rows (slots from ``row_offset``) under their keys:
    soft rows under ``(particle, -(shape + 1))`` (the shape is stored in ``part_a``'s place as
    ``-(shape + 2)`` by the fill kernel), particle-particle rows under ``(particle A, particle B)``."""
    i = wp.tid() + row_offset
    k = rows.kind[i]
    p = int(-1)
    key = int(0)
    if k == ROW_SOFT:
        p = rows.part_b[i]
        key = rows.part_a[i]  # -(shape + 2)
    elif k == ROW_PARTICLE:
        p = rows.part_a[i]
        key = rows.part_b[i]
    if p < 0:
        return
    s = wp.atomic_add(tab_count, p, 1)
    if s < WARM_SLOTS:
        t = rows.lam_t[i]
        tab_key[p * WARM_SLOTS + s] = key
        tab_lam[p * WARM_SLOTS + s] = wp.vec4(rows.lam_n[i], t[0], t[1], t[2])
        tab_acc[p * WARM_SLOTS + s] = rows.acc[i]


@wp.kernel
def clear_rows_kernel(rows: ContactRows):
    i = wp.tid()
    rows.kind[i] = ROW_NONE


@wp.kernel
def rigid_fill_kernel(
    # pipeline contacts (rigid part, cross-entry shape pairs only)
    count: wp.array(dtype=wp.int32),
    shape0: wp.array(dtype=wp.int32),
    shape1: wp.array(dtype=wp.int32),
    point0: wp.array(dtype=wp.vec3),
    point1: wp.array(dtype=wp.vec3),
    normal: wp.array(dtype=wp.vec3),
    margin0: wp.array(dtype=float),
    margin1: wp.array(dtype=float),
    match_index: wp.array(dtype=wp.int32),  # empty: no matching
    # model
    shape_body: wp.array(dtype=wp.int32),
    shape_mu: wp.array(dtype=float),
    body_q: wp.array(dtype=wp.transform),  # the step's input state
    # warm start: previous step's rigid duals (slot = previous contact index)
    prev_lam_n: wp.array(dtype=float),
    prev_lam_t: wp.array(dtype=wp.vec3),
    prev_acc: wp.array(dtype=wp.vec3),
    force_scale: float,
    # outputs
    rows: ContactRows,
    contact_count: wp.array(dtype=wp.int32),
):
    """Rigid-rigid rows from the pipeline's contacts (slot = contact index). The surface points
    ``point + n margin`` are stored in the body frames; a matched contact
    (``match_index >= 0``) starts from ``force_scale`` times its previous dual (the friction part
    re-projected onto the new tangent plane)."""
    i = wp.tid()
    if i >= count[0]:
        return
    s0 = shape0[i]
    s1 = shape1[i]
    if s0 < 0 or s1 < 0:
        return
    b0 = shape_body[s0]
    b1 = shape_body[s1]
    if b0 < 0 or b1 < 0:
        return
    n = normal[i]
    X0 = body_q[b0]
    X1 = body_q[b1]
    x0 = wp.transform_point(X0, point0[i]) + n * margin0[i]
    x1 = wp.transform_point(X1, point1[i]) - n * margin1[i]
    rows.kind[i] = ROW_RIGID
    rows.body_a[i] = b0
    rows.body_b[i] = b1
    rows.part_a[i] = -1
    rows.part_b[i] = -1
    rows.point_a[i] = wp.transform_point(wp.transform_inverse(X0), x0)
    rows.point_b[i] = wp.transform_point(wp.transform_inverse(X1), x1)
    rows.x_a[i] = x0
    rows.x_b[i] = x1
    rows.normal[i] = n
    rows.thickness[i] = 0.0
    rows.mu[i] = 0.5 * (shape_mu[s0] + shape_mu[s1])
    j = int(-1)
    if match_index.shape[0] > 0:
        j = match_index[i]
    if j >= 0:
        init_row(rows, i, n, prev_lam_n[j], prev_lam_t[j], prev_acc[j], force_scale)
    else:
        init_row(rows, i, n, 0.0, wp.vec3(0.0), wp.vec3(0.0), 0.0)
    wp.atomic_add(contact_count, 0, 1)


@wp.kernel
def soft_fill_kernel(
    # pipeline contacts (soft part: every particle against every particle-colliding shape)
    count: wp.array(dtype=wp.int32),
    particle: wp.array(dtype=wp.int32),
    shape: wp.array(dtype=wp.int32),
    body_pos: wp.array(dtype=wp.vec3),
    normal: wp.array(dtype=wp.vec3),
    # model and ownership
    shape_body: wp.array(dtype=wp.int32),
    shape_mu: wp.array(dtype=float),
    particle_mu: float,
    particle_radius: wp.array(dtype=float),
    body_owner: wp.array(dtype=wp.int32),
    particle_owner: wp.array(dtype=wp.int32),
    pair_mask: wp.array2d(dtype=wp.int32),  # [entry, entry] != 0: a contact pair
    body_q: wp.array(dtype=wp.transform),  # the step's input state
    particle_q: wp.array(dtype=wp.vec3),
    # warm start (per-particle table of the previous step)
    warm: int,
    force_scale: float,
    tab_count: wp.array(dtype=wp.int32),
    tab_key: wp.array(dtype=wp.int32),
    tab_lam: wp.array(dtype=wp.vec4),
    tab_acc: wp.array(dtype=wp.vec3),
    # outputs
    row_offset: int,
    rows: ContactRows,
    contact_count: wp.array(dtype=wp.int32),
):
    """Rigid-particle rows from the soft contacts whose particle and shape body belong to the two
    entries of a contact pair (A = the body point on the shape surface, B = the particle;
    thickness = the particle radius; friction ``(particle_mu + shape mu) / 2`` as in XPBD)."""
    k = wp.tid()
    if k >= count[0]:
        return
    p = particle[k]
    s = shape[k]
    if p < 0 or s < 0:
        return
    b = shape_body[s]
    if b < 0:
        return
    ep = particle_owner[p]
    eb = body_owner[b]
    if ep < 0 or eb < 0 or ep == eb:
        return
    if pair_mask[ep, eb] == 0:
        return
    i = k + row_offset
    rows.kind[i] = ROW_SOFT
    rows.body_a[i] = b
    rows.body_b[i] = -1
    rows.part_a[i] = -(s + 2)  # the shape, for the warm-start key (never read as a particle)
    rows.part_b[i] = p
    rows.point_a[i] = body_pos[k]
    rows.point_b[i] = wp.vec3(0.0)
    rows.x_a[i] = wp.transform_point(body_q[b], body_pos[k])
    rows.x_b[i] = particle_q[p]
    rows.normal[i] = normal[k]
    rows.thickness[i] = particle_radius[p]
    rows.mu[i] = 0.5 * (particle_mu + shape_mu[s])
    t = int(-1)
    if warm != 0:
        t = warm_lookup(p, -(s + 2), tab_count, tab_key)
    if t >= 0:
        v = tab_lam[t]
        init_row(rows, i, normal[k], v[0], wp.vec3(v[1], v[2], v[3]), tab_acc[t], force_scale)
    else:
        init_row(rows, i, normal[k], 0.0, wp.vec3(0.0), wp.vec3(0.0), 0.0)
    wp.atomic_add(contact_count, 1, 1)


@wp.kernel
def particle_detect_kernel(
    grid: wp.uint64,
    # particles (the step's input state) and ownership
    particle_q: wp.array(dtype=wp.vec3),
    particle_qd: wp.array(dtype=wp.vec3),
    particle_radius: wp.array(dtype=float),
    particle_world: wp.array(dtype=wp.int32),
    particle_owner: wp.array(dtype=wp.int32),
    pair_mask: wp.array2d(dtype=wp.int32),
    particle_mu: float,
    max_radius: float,
    gap: float,  # detection gap [m] on top of the radii and the relative motion over dt
    max_reach: float,  # cap of the velocity-extended query radius [m]
    dt: float,
    # warm start
    warm: int,
    force_scale: float,
    tab_count: wp.array(dtype=wp.int32),
    tab_key: wp.array(dtype=wp.int32),
    tab_lam: wp.array(dtype=wp.vec4),
    tab_acc: wp.array(dtype=wp.vec3),
    # outputs
    row_offset: int,
    capacity: int,
    pp_count: wp.array(dtype=wp.int32),  # [0]: slots claimed (may exceed capacity: overflow)
    rows: ContactRows,
    contact_count: wp.array(dtype=wp.int32),
):
    """Particle-particle rows between particles of two paired entries whose separation minus the
    radii is below ``gap`` plus their relative displacement over ``dt`` (one row per unordered
    pair: A is the particle of the lower entry index). Friction: ``Model.particle_mu``."""
    i = wp.tid()
    ei = particle_owner[i]
    if ei < 0:
        return
    xi = particle_q[i]
    vi = particle_qd[i]
    ri = particle_radius[i]
    wi = particle_world[i]
    reach = wp.min(ri + max_radius + gap + 2.0 * wp.length(vi) * dt, max_reach)
    query = wp.hash_grid_query(grid, xi, reach)
    j = int(0)
    while wp.hash_grid_query_next(query, j):
        ej = particle_owner[j]
        if ej <= ei:
            continue
        if pair_mask[ei, ej] == 0:
            continue
        wj = particle_world[j]
        if wi != wj and wi >= 0 and wj >= 0:
            continue
        d = particle_q[j] - xi
        dist = wp.length(d)
        if dist < 1.0e-9:
            continue
        h = ri + particle_radius[j]
        if dist - h > gap + wp.length(particle_qd[j] - vi) * dt:
            continue
        slot = wp.atomic_add(pp_count, 0, 1)
        if slot >= capacity:
            continue
        r = row_offset + slot
        n = d / dist
        rows.kind[r] = ROW_PARTICLE
        rows.body_a[r] = -1
        rows.body_b[r] = -1
        rows.part_a[r] = i
        rows.part_b[r] = j
        rows.point_a[r] = wp.vec3(0.0)
        rows.point_b[r] = wp.vec3(0.0)
        rows.x_a[r] = xi
        rows.x_b[r] = particle_q[j]
        rows.normal[r] = n
        rows.thickness[r] = h
        rows.mu[r] = particle_mu
        t = int(-1)
        if warm != 0:
            t = warm_lookup(i, j, tab_count, tab_key)
        if t >= 0:
            v = tab_lam[t]
            init_row(rows, r, n, v[0], wp.vec3(v[1], v[2], v[3]), tab_acc[t], force_scale)
        else:
            init_row(rows, r, n, 0.0, wp.vec3(0.0), wp.vec3(0.0), 0.0)
        wp.atomic_add(contact_count, 2, 1)


@wp.kernel
def count_rows_kernel(
    rows: ContactRows,
    # outputs (zeroed before)
    body_rows: wp.array(dtype=float),
    particle_rows: wp.array(dtype=float),
):
    """Number of contact rows touching each body and particle (mass splitting in the update)."""
    i = wp.tid()
    if rows.kind[i] == ROW_NONE:
        return
    ba = rows.body_a[i]
    bb = rows.body_b[i]
    if ba >= 0:
        wp.atomic_add(body_rows, ba, 1.0)
    else:
        wp.atomic_add(particle_rows, rows.part_a[i], 1.0)
    if bb >= 0:
        wp.atomic_add(body_rows, bb, 1.0)
    else:
        wp.atomic_add(particle_rows, rows.part_b[i], 1.0)


@wp.func
def endpoint_share(body: int, part: int, body_rows: wp.array(dtype=float), particle_rows: wp.array(dtype=float)):
    """Mobility multiplier of an endpoint shared by ``m`` contact rows: ``max(m / 4, 1)``.

    Up to 4 rows (a face manifold) each take their own Newton step: the rotational mobility at
    the corner points already shares the body among them, and full mass splitting
    (``m``) makes the warm-started few-iteration loop ring. Beyond 4 rows (a body on many
    particles or many manifolds) the endpoint's mobility is split, so that the simultaneous
    (Jacobi) steps of its rows cannot overshoot together."""
    n = float(1.0)
    if body >= 0:
        n = body_rows[body]
    else:
        n = particle_rows[part]
    return wp.max(n * 0.25, 1.0)


# ---------------------------------------------------------------------------- ADMM update / splat
@wp.kernel
def contact_update_kernel(
    rows: ContactRows,
    # current iterate (predict != 0: the step's input state)
    body_q: wp.array(dtype=wp.transform),
    body_qd: wp.array(dtype=wp.spatial_vector),
    body_com: wp.array(dtype=wp.vec3),
    particle_q: wp.array(dtype=wp.vec3),
    particle_qd: wp.array(dtype=wp.vec3),
    # free-endpoint mobilities
    eff_inv_mass: wp.array(dtype=float),
    eff_inv_inertia: wp.array(dtype=wp.mat33),
    particle_eff_inv_mass: wp.array(dtype=float),
    # contact rows per body / particle (mass splitting)
    body_rows: wp.array(dtype=float),
    particle_rows: wp.array(dtype=float),
    # ADMM parameters
    rho: float,
    baumgarte: float,
    dt: float,
    predict: int,
    iteration: int,
    apply: int,
    # diagnostics (per iteration)
    primal: wp.array(dtype=float),
    dual: wp.array(dtype=float),
    contact_gap: wp.array(dtype=float),
):
    """One ADMM dual update of a contact row (unilateral normal row + isotropic Coulomb row).

    Gap ``g = n . (x_B - x_A) - h`` and tangential slip ``s`` (the tangential part of the
    relative displacement of the two material points since the step start) are measured on
    the iterate; ``predict != 0`` (before the first iteration) predicts them from the input
    state with the relative displacement ``dt c + dt^2 a`` (``c``: the relative velocity,
    ``a``: the relative acceleration the row's last step produced under its force, carried over
    by the warm start; zero for a new row), and the last iteration records ``a``. The normal force
    takes the Newton step ``-g / (dt^2 w_n)`` (``w_n = n . W n``, ``W``: the free-endpoint
    mobilities at the two points, split by :func:`endpoint_share` when an endpoint carries more
    than 4 rows), the friction force ``-s / (dt^2 w_t)`` (``w_t``: the mean
    tangential mobility), both relaxed by :func:`relaxation` (full step in the predictor); then
    ``lam_n`` is projected onto ``[0, inf)`` and ``lam_t`` onto the disk ``|lam_t| <= mu lam_n``.
    ``apply == 0`` (last iteration) only measures. Diagnostics: the penetration ``max(-g, 0)``
    [m] into ``primal`` and ``contact_gap``, the dual change [N] into ``dual``.
    """
    i = wp.tid()
    if rows.kind[i] == ROW_NONE:
        return
    ba = rows.body_a[i]
    bb = rows.body_b[i]
    pa = rows.part_a[i]
    pb = rows.part_b[i]
    pta = rows.point_a[i]
    ptb = rows.point_b[i]
    n = rows.normal[i]
    xa = endpoint_point(ba, pa, pta, body_q, particle_q)
    xb = endpoint_point(bb, pb, ptb, body_q, particle_q)
    h2 = dt * dt
    D = xb - xa
    disp = (xb - rows.x_b[i]) - (xa - rows.x_a[i])  # relative displacement since the step start
    if predict != 0:
        # end-of-step prediction with the warm-started force: drift + last step's relative acceleration
        c = endpoint_velocity(bb, pb, ptb, body_q, body_qd, body_com, particle_qd) - endpoint_velocity(
            ba, pa, pta, body_q, body_qd, body_com, particle_qd)  # fmt: skip
        disp = c * dt
        rows.pred[i] = D + disp
        disp = disp + rows.acc[i] * h2
        D = D + disp
    elif apply == 0:
        rows.acc[i] = (D - rows.pred[i]) / h2
    g = wp.dot(n, D) - rows.thickness[i]
    slip = disp - n * wp.dot(n, disp)

    # mass splitting beyond 4 rows per endpoint (see endpoint_share)
    W = endpoint_mobility(ba, pa, pta, body_q, body_com, eff_inv_mass, eff_inv_inertia, particle_eff_inv_mass) * \
        endpoint_share(ba, pa, body_rows, particle_rows)
    W = W + endpoint_mobility(bb, pb, ptb, body_q, body_com, eff_inv_mass, eff_inv_inertia,
                              particle_eff_inv_mass) * endpoint_share(bb, pb, body_rows, particle_rows)
    w_n = wp.dot(n, W * n)
    w_t = 0.5 * (W[0, 0] + W[1, 1] + W[2, 2] - w_n)
    if w_n <= 0.0:
        return
    om = relaxation(rho, baumgarte, 0.0, 0.0, dt, w_n)
    if predict != 0:
        om = 1.0
    ln = rows.lam_n[i]
    lt = rows.lam_t[i]
    ln_new = wp.max(ln - om * g / (h2 * w_n), 0.0)
    lt_new = lt
    if w_t > 0.0:
        lt_new = lt - slip * (om / (h2 * w_t))
    lt_new = lt_new - n * wp.dot(n, lt_new)
    lmax = rows.mu[i] * ln_new
    ltl = wp.length(lt_new)
    if ltl > lmax:
        if ltl > 0.0:
            lt_new = lt_new * (lmax / ltl)
    if apply != 0:
        rows.lam_n[i] = ln_new
        rows.lam_t[i] = lt_new
    if predict == 0:
        pen = wp.max(-g, 0.0)
        wp.atomic_max(primal, iteration, pen)
        wp.atomic_max(contact_gap, iteration, pen)
        wp.atomic_max(dual, iteration, wp.length(n * (ln_new - ln) + (lt_new - lt)))


@wp.kernel
def contact_splat_kernel(
    rows: ContactRows,
    body_q: wp.array(dtype=wp.transform),  # the step's input state (lever arms)
    body_com: wp.array(dtype=wp.vec3),
    # outputs
    body_f: wp.array(dtype=wp.spatial_vector),
    particle_f: wp.array(dtype=wp.vec3),
):
    """Equal and opposite contact forces ``F = lam_n n + lam_t`` (on B; ``-F`` on A) into the
    coupling force buffers, at the endpoints' step-start points (body wrenches about the COM)."""
    i = wp.tid()
    if rows.kind[i] == ROW_NONE:
        return
    F = rows.normal[i] * rows.lam_n[i] + rows.lam_t[i]
    ba = rows.body_a[i]
    bb = rows.body_b[i]
    if bb >= 0:
        X = body_q[bb]
        r = rows.x_b[i] - wp.transform_point(X, body_com[bb])
        wp.atomic_add(body_f, bb, wp.spatial_vector(F, wp.cross(r, F)))
    else:
        wp.atomic_add(particle_f, rows.part_b[i], F)
    if ba >= 0:
        X = body_q[ba]
        r = rows.x_a[i] - wp.transform_point(X, body_com[ba])
        wp.atomic_add(body_f, ba, wp.spatial_vector(-F, -wp.cross(r, F)))
    else:
        wp.atomic_add(particle_f, rows.part_a[i], -F)


# ---------------------------------------------------------------------------- host side
class ContactRowManager:
    """Detection, warm start and row storage of the ADMM contact rows (host object).

    Built once from the contact pairs and the ownership maps (all buffers are allocated here,
    fixed-size); :meth:`detect` (once per step, at the step's input state), :meth:`update` and
    :meth:`splat` only launch kernels.

    Args:
        model: the shared model.
        pair_mask: ``(entries, entries)`` int32 numpy array, non-zero for the contact pairs.
        body_owner, particle_owner, shape_owner: entry index per entity (-1: none), numpy.
        matching: ``"disabled"``, ``"latest"`` or ``"sticky"``.
        pos_threshold, normal_dot_threshold: rigid matching thresholds (``None``: pipeline
            defaults).
        force_scale: warm-start scale of a matched dual.
        max_triangle_pairs, hashtable_size_factor: forwarded to the pipeline (``None``: its
            defaults).
        launch: ``launch(kernel, dim, inputs, outputs)`` (the solver's launch cache).
    """

    #: detection gap of the rigid-particle (soft) contacts [m] (particle radius + gap)
    SOFT_CONTACT_GAP = 0.02
    #: detection gap of the particle-particle rows [m] (on top of radii and relative motion)
    PARTICLE_CONTACT_GAP = 0.01
    #: cap of the speculative extension of the rigid contacts [m] (``|v| dt`` below it)
    SPECULATIVE_GAP_MAX = 0.1
    #: particle-particle rows per paired particle (capacity)
    PARTICLE_ROWS_PER_PARTICLE = 12

    def __init__(self, model, pair_mask, body_owner, particle_owner, shape_owner, *, matching: str,
                 pos_threshold, normal_dot_threshold, force_scale: float, max_triangle_pairs,
                 hashtable_size_factor, launch):  # fmt: skip
        from armillary.geometry.narrow_phase import PAIR_MAX_CONTACTS
        from armillary.geometry.pipeline import CollisionPipeline
        from armillary.sim.enums import ShapeFlags

        self.model = model
        dev = self.device = model.device
        self._launch = launch
        self.matching = matching
        self.force_scale = float(force_scale)
        nb = int(model.body_count or 0)
        npart = int(getattr(model, "particle_count", 0) or 0)
        ns = int(model.shape_count or 0)
        ne = int(pair_mask.shape[0])
        pm = np.asarray(pair_mask, np.int32).reshape(ne, ne)
        shape_body = model.shape_body.numpy().astype(np.int64) if ns else np.zeros(0, np.int64)
        flags = model.shape_flags.numpy().astype(np.int64) if ns else np.zeros(0, np.int64)
        types = model.shape_type.numpy().astype(np.int64) if ns else np.zeros(0, np.int64)

        # ---- rigid: cross-entry candidate pairs of the model (filters, groups, worlds respected)
        pairs = np.asarray(model.shape_contact_pairs, np.int64).reshape(-1, 2) if ns else np.zeros((0, 2), np.int64)
        so = np.asarray(shape_owner, np.int64).reshape(-1)
        ea, eb = so[pairs[:, 0]], so[pairs[:, 1]]
        ok = (ea >= 0) & (eb >= 0) & (ea != eb) & (shape_body[pairs[:, 0]] >= 0) & (shape_body[pairs[:, 1]] >= 0)
        ok[ok] = pm[ea[ok], eb[ok]] != 0
        self.rigid_pairs = np.ascontiguousarray(pairs[ok], dtype=np.int32).reshape(-1, 2)
        # ---- rigid-particle: particles of one entry vs particle-colliding shapes of a partner's bodies
        soft_entries = {int(so[s]) for s in range(ns) if flags[s] & int(ShapeFlags.COLLIDE_PARTICLES)
                        and shape_body[s] >= 0 and so[s] >= 0}  # fmt: skip
        part_entries = {int(e) for e in np.unique(particle_owner) if e >= 0} if npart else set()
        self.has_soft = any(pm[ep, es] for es in soft_entries for ep in part_entries)
        # ---- particle-particle
        pp_cap = 0
        for ea in part_entries:
            for eb in part_entries:
                if ea < eb and pm[ea, eb]:
                    na = int(np.count_nonzero(particle_owner == ea))
                    nbp = int(np.count_nonzero(particle_owner == eb))
                    pp_cap += min(na * nbp, self.PARTICLE_ROWS_PER_PARTICLE * max(na, nbp))
        self.has_particle = pp_cap > 0

        self.pipeline = None
        self.contacts = None
        R = S = 0
        if len(self.rigid_pairs) or self.has_soft:
            est = 0
            if len(self.rigid_pairs):
                ta, tb = types[self.rigid_pairs[:, 0]], types[self.rigid_pairs[:, 1]]
                lo, hi = np.minimum(ta, tb), np.maximum(ta, tb)
                for (x, y), m in PAIR_MAX_CONTACTS.items():
                    est += int(m) * int(np.count_nonzero((lo == x) & (hi == y)))
            kw = {}
            if pos_threshold is not None:
                kw["contact_matching_pos_threshold"] = float(pos_threshold)
            if normal_dot_threshold is not None:
                kw["contact_matching_normal_dot_threshold"] = float(normal_dot_threshold)
            if hashtable_size_factor is not None:
                kw["contact_reduction_hashtable_size_factor"] = float(hashtable_size_factor)
            # every particle against every particle-colliding shape (the pipeline's soft pair count)
            n_soft_all = int(np.count_nonzero(flags & int(ShapeFlags.COLLIDE_PARTICLES)))
            soft_max = npart * n_soft_all if self.has_soft else 0
            self.pipeline = CollisionPipeline(
                model, broad_phase="explicit", shape_pairs_filtered=self.rigid_pairs, rigid_contact_max=max(est, 1),
                max_triangle_pairs=max_triangle_pairs, contact_matching=matching,
                soft_contact_gap=self.SOFT_CONTACT_GAP, soft_contact_max=soft_max,
                speculative_contact_gap_max=self.SPECULATIVE_GAP_MAX,
                requires_grad=False, publish_capacity=False, **kw)  # fmt: skip
            self.contacts = self.pipeline.contacts()
            R = int(self.contacts.rigid_contact_max) if len(self.rigid_pairs) else 0
            S = int(self.contacts.soft_contact_max) if self.has_soft else 0
        P = int(pp_cap)
        self.R, self.S, self.P = R, S, P
        self.capacity = C = R + S + P

        with wp.ScopedDevice(dev):
            rows = ContactRows()
            rows.kind = wp.full(C, -1, dtype=wp.int32)
            for name in ("body_a", "body_b", "part_a", "part_b"):
                setattr(rows, name, wp.full(C, -1, dtype=wp.int32))
            for name in ("point_a", "point_b", "x_a", "x_b", "normal", "lam_t", "pred", "acc"):
                setattr(rows, name, wp.zeros(C, dtype=wp.vec3))
            for name in ("thickness", "mu", "lam_n"):
                setattr(rows, name, wp.zeros(C, dtype=float))
            self.rows = rows
            self.prev_lam_n = wp.zeros(max(R, 1), dtype=float)
            self.prev_lam_t = wp.zeros(max(R, 1), dtype=wp.vec3)
            self.prev_acc = wp.zeros(max(R, 1), dtype=wp.vec3)
            self.pair_mask = wp.array(pm, dtype=wp.int32)
            self.body_owner = wp.array(np.asarray(body_owner, np.int32).reshape(-1), dtype=wp.int32)
            self.particle_owner = wp.array(np.asarray(particle_owner, np.int32).reshape(-1), dtype=wp.int32)
            nt = max(npart, 1)
            self.tab_count = wp.zeros(nt, dtype=wp.int32)
            self.tab_key = wp.zeros(nt * WARM_SLOT_COUNT, dtype=wp.int32)
            self.tab_lam = wp.zeros(self.tab_key.shape[0], dtype=wp.vec4)
            self.tab_acc = wp.zeros(self.tab_key.shape[0], dtype=wp.vec3)
            self.pp_count = wp.zeros(1, dtype=wp.int32)
            self.body_rows = wp.zeros(max(nb, 1), dtype=float)
            self.particle_rows = wp.zeros(max(npart, 1), dtype=float)
            self.contact_count = wp.zeros(3, dtype=wp.int32)
            self.empty_i32 = wp.zeros(0, dtype=wp.int32)
            self.dummy_vec3 = wp.zeros(1, dtype=wp.vec3)
            self.dummy_float = wp.zeros(1, dtype=float)
            self.dummy_int = wp.zeros(1, dtype=wp.int32)
            self.dummy_q = wp.zeros(1, dtype=wp.transform)
            self.dummy_qd = wp.zeros(1, dtype=wp.spatial_vector)
            self.grid = None
            if self.has_particle:
                self.grid = wp.HashGrid(64, 64, 64)
                self.grid.reserve(npart)
        self.max_radius = float(getattr(model, "particle_max_radius", 0.0) or 0.0)
        pmu = getattr(model, "particle_mu", 0.5)
        self.particle_mu = float(0.5 if pmu is None else pmu)

    # ---------------------------------------------------------------- helpers
    def _particle_arrays(self, state):
        m = self.model
        if int(getattr(m, "particle_count", 0) or 0) and getattr(state, "particle_q", None) is not None:
            return state.particle_q, state.particle_qd
        return self.dummy_vec3, self.dummy_vec3

    def _body_arrays(self, state):
        m = self.model
        if int(m.body_count or 0) and getattr(state, "body_q", None) is not None:
            return state.body_q, state.body_qd, m.body_com
        return self.dummy_q, self.dummy_qd, self.dummy_vec3

    def _particle_model(self):
        m = self.model
        if int(getattr(m, "particle_count", 0) or 0):
            return m.particle_radius, m.particle_world
        return self.dummy_float, self.dummy_int

    # ---------------------------------------------------------------- per step
    def detect(self, state_in, dt: float) -> None:
        """Detect this step's rows at ``state_in`` (the previous rows' duals are kept for the warm
        start first)."""
        if self.capacity == 0:
            return
        m, rows, L = self.model, self.rows, self._launch
        warm = int(self.matching != "disabled")
        R, S, P = self.R, self.S, self.P
        # warm start: keep last step's duals
        if R and warm:
            wp.copy(self.prev_lam_n, rows.lam_n, 0, 0, R)
            wp.copy(self.prev_lam_t, rows.lam_t, 0, 0, R)
            wp.copy(self.prev_acc, rows.acc, 0, 0, R)
        if (S or P) and warm:
            self.tab_count.zero_()
            L(warm_store_kernel, S + P, [rows, R], [self.tab_count, self.tab_key, self.tab_lam, self.tab_acc])
        L(clear_rows_kernel, self.capacity, [rows])
        self.contact_count.zero_()
        pq, pqd = self._particle_arrays(state_in)
        prad, pworld = self._particle_model()
        bq, _, _ = self._body_arrays(state_in)
        if self.pipeline is not None:
            self.pipeline.collide(state_in, self.contacts, dt=float(dt))
            c = self.contacts
            if R:
                match = c.rigid_contact_match_index if c.rigid_contact_match_index is not None and warm else \
                    self.empty_i32  # fmt: skip
                L(rigid_fill_kernel, R,
                  [c.rigid_contact_count, c.rigid_contact_shape0, c.rigid_contact_shape1, c.rigid_contact_point0,
                   c.rigid_contact_point1, c.rigid_contact_normal, c.rigid_contact_margin0, c.rigid_contact_margin1,
                   match, m.shape_body, m.shape_material_mu, bq, self.prev_lam_n, self.prev_lam_t,
                   self.prev_acc, self.force_scale],
                  [rows, self.contact_count])  # fmt: skip
            if S:
                L(soft_fill_kernel, S,
                  [c.soft_contact_count, c.soft_contact_particle, c.soft_contact_shape, c.soft_contact_body_pos,
                   c.soft_contact_normal, m.shape_body, m.shape_material_mu, self.particle_mu, prad,
                   self.body_owner, self.particle_owner, self.pair_mask, bq, pq, warm,
                   self.force_scale, self.tab_count, self.tab_key, self.tab_lam, self.tab_acc, R],
                  [rows, self.contact_count])  # fmt: skip
        if P:
            self.grid.build(pq, 2.0 * self.max_radius + self.PARTICLE_CONTACT_GAP)
            self.pp_count.zero_()
            L(particle_detect_kernel, int(m.particle_count),
              [self.grid.id, pq, pqd, prad, pworld, self.particle_owner, self.pair_mask, self.particle_mu,
               self.max_radius, self.PARTICLE_CONTACT_GAP, 0.25, float(dt), warm, self.force_scale, self.tab_count,
               self.tab_key, self.tab_lam, self.tab_acc, R + S, P],
              [self.pp_count, rows, self.contact_count])  # fmt: skip
        self.body_rows.zero_()
        self.particle_rows.zero_()
        L(count_rows_kernel, self.capacity, [rows], [self.body_rows, self.particle_rows])

    def update(self, src, eff_inv_mass, eff_inv_inertia, eff_particle_inv_mass, rho: float, baumgarte: float,
               dt: float, predict: int, k: int, apply: int, diagnostics) -> None:  # fmt: skip
        """One dual update of every row from the iterate ``src`` (see
        :func:`contact_update_kernel`)."""
        if self.capacity == 0:
            return
        pq, pqd = self._particle_arrays(src)
        bq, bqd, com = self._body_arrays(src)
        d = diagnostics
        self._launch(contact_update_kernel, self.capacity,
                     [self.rows, bq, bqd, com, pq, pqd, eff_inv_mass, eff_inv_inertia,
                      eff_particle_inv_mass, self.body_rows, self.particle_rows, float(rho), float(baumgarte), float(dt), int(predict), int(k),
                      int(apply)],
                     [d.primal_residual, d.dual_residual, d.contact_gap])  # fmt: skip

    def splat(self, state_in, body_f, particle_f) -> None:
        """Add the rows' forces to the coupling force buffers."""
        if self.capacity == 0:
            return
        bq, _, com = self._body_arrays(state_in)
        self._launch(contact_splat_kernel, self.capacity, [self.rows, bq, com],
                     [body_f, particle_f])  # fmt: skip

    def reset(self) -> None:
        """Forget the warm start (duals, matching history)."""
        if self.capacity == 0:
            return
        self.rows.lam_n.zero_()
        self.rows.lam_t.zero_()
        self.rows.acc.zero_()
        self.prev_acc.zero_()
        self.rows.kind.fill_(-1)
        self.tab_count.zero_()
        self.prev_lam_n.zero_()
        self.prev_lam_t.zero_()
        if self.pipeline is not None:
            self.pipeline.reset_contact_matching()

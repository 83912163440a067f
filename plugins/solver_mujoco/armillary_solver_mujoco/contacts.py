"""``use_mujoco_contacts=False``: armillary contacts handed to MuJoCo's constraint solver.

Each step runs MuJoCo's pipeline with its own collision detection finding nothing (every geom has
``contype = conaffinity = 0``) and armillary's contacts added in its place with ``mj_addContact``
(verified bit-identical to ``mj_step`` when the injected contacts are MuJoCo's own):
``mj_fwdPosition``, ``mj_collision`` (clears), ``mj_addContact`` per contact, ``mj_makeConstraint``,
``mj_island``, ``mj_transmission``, ``mj_projectConstraint``, the velocity and acceleration stages,
then the integrator (Euler, implicit or implicitfast).

Contact conversion (per contact of world ``w``): geoms of the two shapes, normal = armillary's
(shape 0 -> shape 1, MuJoCo's geom1 -> geom2 frame axis), ``dist`` = signed distance between the
two surfaces (``n . (p1 - p0) - margin0 - margin1``), ``pos`` = their midpoint, parameters mixed
as MuJoCo mixes the two geoms' (priority, then max condim / friction, ``solmix``-weighted
solref/solimp; ``includemargin = 0`` since ``dist`` already includes the contact margins;
contacts with ``dist > 0`` are marked "in gap" (``exclude = 1``) and stay out of the constraints, as
MuJoCo marks its own). The rows are computed for all contacts at once with numpy; only
``mj_addContact`` (MuJoCo's one-contact API) is called per contact; each world mixes the
parameters of its own ``MjModel``.
"""

from __future__ import annotations

import numpy as np

from .state_map import qrot


def _frames(n):
    """Contact frames (k, 9): rows normal and two unit tangents (right-handed), per normal (k, 3)."""
    a = np.where((np.abs(n[:, 0]) < 0.5)[:, None], np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0]))
    t1 = np.cross(n, a)
    t1 /= np.linalg.norm(t1, axis=1, keepdims=True)
    return np.concatenate([n, t1, np.cross(n, t1)], axis=1)


class ContactInjector:
    """Per-solver tables mapping armillary shapes to MuJoCo geoms (and their worlds)."""

    def __init__(self, solver):
        model = solver.model
        conv = solver.conversion
        ns = int(model.shape_count)
        self.shape_world = np.full(ns, -2, np.int64)  # -1: global (in every world)
        self.shape_geom = np.full(ns, -1, np.int64)
        for w, lay in enumerate(conv.worlds):
            for k, s in enumerate(lay.shapes):
                s0 = int(conv.worlds[0].shapes[k])
                self.shape_world[int(s)] = w
                self.shape_geom[int(s)] = conv.geom_ids[s0]
        for s in conv.global_shapes:
            self.shape_world[int(s)] = -1
            self.shape_geom[int(s)] = conv.geom_ids[int(s)]
        self.shape_body = model.shape_body.numpy() if ns else np.zeros(0, np.int64)


def mixed_params(m, g1, g2):
    """MuJoCo's parameter mixing of geom pairs ``(g1[k], g2[k])`` of model ``m`` (arrays):
    ``(condim (k,), friction (k, 5), solref (k, 2), solimp (k, 5))``: the higher priority geom's
    values, else max condim / friction and ``solmix``-weighted solref / solimp."""
    p1, p2 = m.geom_priority[g1], m.geom_priority[g2]
    s1, s2 = m.geom_solmix[g1], m.geom_solmix[g2]
    tot = s1 + s2
    mix = np.where(tot < 1e-15, 0.5, s1 / np.where(tot < 1e-15, 1.0, tot))[:, None]
    r1, r2 = m.geom_solref[g1], m.geom_solref[g2]
    both_pos = ((r1[:, 0] > 0) & (r2[:, 0] > 0))[:, None]
    solref = np.where(both_pos, mix * r1 + (1 - mix) * r2, np.minimum(r1, r2))
    solimp = mix * m.geom_solimp[g1] + (1 - mix) * m.geom_solimp[g2]
    condim = np.maximum(m.geom_condim[g1], m.geom_condim[g2])
    fr = np.maximum(m.geom_friction[g1], m.geom_friction[g2])
    winner = np.where(p1 > p2, g1, g2)
    pick = (p1 != p2)
    condim = np.where(pick, m.geom_condim[winner], condim)
    fr = np.where(pick[:, None], m.geom_friction[winner], fr)
    solref = np.where(pick[:, None], m.geom_solref[winner], solref)
    solimp = np.where(pick[:, None], m.geom_solimp[winner], solimp)
    friction = np.stack([fr[:, 0], fr[:, 0], fr[:, 1], fr[:, 2], fr[:, 2]], axis=1)
    return condim, friction, solref, solimp


def step_with_injected_contacts(solver, contacts) -> None:
    """Step every world's ``MjData`` with armillary's ``contacts`` in place of MuJoCo's collision.

    The contact rows are computed with numpy for all contacts at once; MuJoCo's API adds contacts
    one call at a time (``mj_addContact`` of a template), after which the added slice of
    ``d.contact`` is overwritten with the rows in bulk."""
    import mujoco

    inj = solver.__dict__.get("_injector")
    if inj is None:
        inj = solver._injector = ContactInjector(solver)
    rows = None
    if contacts is not None and int(getattr(contacts, "rigid_contact_max", 0) or 0) > 0:
        n = min(int(contacts.rigid_contact_count.numpy()[0]), int(contacts.rigid_contact_max))
        if n:
            rows = _rows(solver, inj, contacts, n)
    template = mujoco.MjContact()
    integrator = int(solver.mj_model.opt.integrator)
    for w, d in enumerate(solver.mj_datas):
        m = solver.mj_models[w]
        mujoco.mj_fwdPosition(m, d)
        mujoco.mj_collision(m, d)
        if rows is not None:
            _add(solver, m, d, template, rows, w)
        mujoco.mj_makeConstraint(m, d)
        mujoco.mj_island(m, d)
        mujoco.mj_transmission(m, d)
        mujoco.mj_projectConstraint(m, d)
        mujoco.mj_sensorPos(m, d)
        mujoco.mj_energyPos(m, d)
        mujoco.mj_fwdVelocity(m, d)
        mujoco.mj_sensorVel(m, d)
        mujoco.mj_energyVel(m, d)
        mujoco.mj_fwdActuation(m, d)
        mujoco.mj_fwdAcceleration(m, d)
        mujoco.mj_fwdConstraint(m, d)
        mujoco.mj_sensorAcc(m, d)
        if integrator == int(mujoco.mjtIntegrator.mjINT_EULER):
            mujoco.mj_Euler(m, d)
        else:
            mujoco.mj_implicit(m, d)


def _rows(solver, inj, contacts, n):
    """Vectorised contact rows: world, geoms, dist, pos, frame of the first ``n`` contacts."""
    s0 = contacts.rigid_contact_shape0.numpy()[:n].astype(np.int64)
    s1 = contacts.rigid_contact_shape1.numpy()[:n].astype(np.int64)
    ok = (s0 >= 0) & (s1 >= 0)
    s0, s1 = np.where(ok, s0, 0), np.where(ok, s1, 0)
    ga, gb = inj.shape_geom[s0], inj.shape_geom[s1]
    wa, wb = inj.shape_world[s0], inj.shape_world[s1]
    world = np.where(wa >= 0, wa, wb)
    keep = np.nonzero(ok & (ga >= 0) & (gb >= 0) & (world >= 0))[0]
    if not len(keep):
        return None
    state = solver._contact_state
    nrm = contacts.rigid_contact_normal.numpy()[keep].astype(np.float64)

    def world_points(shapes, points):
        p = points.astype(np.float64)
        if state is None:
            return p
        body = inj.shape_body[shapes]
        X = state.body_q.numpy().astype(np.float64)[np.maximum(body, 0)]
        moved = X[:, :3] + qrot(X[:, 3:7], p)
        return np.where((body >= 0)[:, None], moved, p)

    xa = world_points(s0[keep], contacts.rigid_contact_point0.numpy()[keep]) \
        + nrm * contacts.rigid_contact_margin0.numpy()[keep].astype(np.float64)[:, None]  # fmt: skip
    xb = world_points(s1[keep], contacts.rigid_contact_point1.numpy()[keep]) \
        - nrm * contacts.rigid_contact_margin1.numpy()[keep].astype(np.float64)[:, None]  # fmt: skip
    return {
        "world": world[keep], "ga": ga[keep], "gb": gb[keep],
        "dist": np.einsum("ij,ij->i", nrm, xb - xa), "pos": 0.5 * (xa + xb), "frame": _frames(nrm),
    }  # fmt: skip


def _add(solver, m, d, template, rows, w) -> None:
    """Append world ``w``'s rows to ``d``'s contacts with ``m``'s mixed geom parameters."""
    import mujoco

    sel = np.nonzero(rows["world"] == w)[0]
    if not len(sel):
        return
    ga, gb = rows["ga"][sel], rows["gb"][sel]
    template.geom1, template.geom2 = int(ga[0]), int(gb[0])
    template.geom = np.array([ga[0], gb[0]])
    start = int(d.ncon)
    for _ in range(len(sel)):
        if mujoco.mj_addContact(m, d, template):
            solver._warn_once("mj-contacts-full", "SolverMuJoCo: MuJoCo's contact buffer is full; contacts dropped")
            break
    k = int(d.ncon) - start
    if k <= 0:
        return
    sel, ga, gb = sel[:k], ga[:k], gb[:k]
    condim, friction, solref, solimp = mixed_params(m, ga, gb)
    c = d.contact
    sl = slice(start, start + k)
    c.dist[sl] = rows["dist"][sel]
    c.pos[sl] = rows["pos"][sel]
    c.frame[sl] = rows["frame"][sel]
    # dist runs between the margin-offset surfaces (armillary's contact margins): the constraint
    # activates at dist = 0, so includemargin is 0
    c.includemargin[sl] = 0.0
    c.friction[sl] = friction
    c.solref[sl] = solref
    c.solreffriction[sl] = 0.0
    c.solimp[sl] = solimp
    c.dim[sl] = condim
    c.geom1[sl] = ga
    c.geom2[sl] = gb
    c.geom[sl] = np.stack([ga, gb], axis=1)
    c.flex[sl] = -1
    c.elem[sl] = -1
    c.vert[sl] = -1
    # MuJoCo keeps contacts beyond includemargin out of the constraints ("in gap"), as MuJoCo
    # Warp does (only dist < includemargin is active)
    c.exclude[sl] = (rows["dist"][sel] > 0.0).astype(np.int32)

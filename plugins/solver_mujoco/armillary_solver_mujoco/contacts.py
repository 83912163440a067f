"""``use_mujoco_contacts=False``: armillary contacts handed to MuJoCo's constraint solver.

Each step runs MuJoCo's pipeline with its own collision detection finding nothing (every geom has
``contype = conaffinity = 0``) and armillary's contacts added in its place with ``mj_addContact``
(verified bit-identical to ``mj_step`` when the injected contacts are MuJoCo's own):
``mj_checkPos``, ``mj_checkVel``, ``mj_fwdPosition``, ``mj_collision`` (clears), ``mj_addContact``
per contact, ``mj_makeConstraint``, ``mj_island``, ``mj_transmission``, ``mj_projectConstraint``,
the velocity and acceleration stages, ``mj_checkAcc``, then the integrator (Euler, implicit or
implicitfast). The three checks are ``mj_step``'s: a NaN, infinite or huge ``qpos`` / ``qvel`` /
``qacc`` entry makes MuJoCo warn and reset the world, as it does in ``mj_step`` (the solver's guard
reports it); a world reset by ``mj_checkAcc`` runs ``mj_forward`` without the injected contacts.

Contact conversion (per contact of world ``w``): geoms of the two shapes, normal = armillary's
(shape 0 -> shape 1, MuJoCo's geom1 -> geom2 frame axis), ``dist`` = signed distance between the
two surfaces (``n . (p1 - p0) - margin0 - margin1``), ``pos`` = their midpoint, parameters mixed
as MuJoCo mixes the two geoms' (priority, then max condim / friction, ``solmix``-weighted
solref/solimp; ``includemargin = 0`` since ``dist`` already includes the contact margins;
contacts with ``dist > 0`` are marked "in gap" (``exclude = 1``) and stay out of the constraints, as
MuJoCo marks its own). The rows of all contacts are computed in one launch of the MuJoCo Warp
backend's conversion kernel (:mod:`.warp_contacts`, each world mixing the parameters of its own
``MjModel``); only ``mj_addContact`` (MuJoCo's one-contact API) is called per contact.
"""

from __future__ import annotations

import numpy as np


class ContactInjector:
    """Per-solver maps from armillary shapes to MuJoCo geoms (of world 0's model) and worlds."""

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


def step_with_injected_contacts(solver, contacts) -> None:
    """Step every world's ``MjData`` with armillary's ``contacts`` in place of MuJoCo's collision.

    The contact rows of all contacts come from the MuJoCo Warp backend's conversion kernel
    (:mod:`.warp_contacts`: the same geometry and parameter mixing, one launch) into host
    buffers; MuJoCo's API adds contacts one call at a time (``mj_addContact`` of a template),
    after which the added slice of ``d.contact`` is overwritten with the rows in bulk."""
    import mujoco

    rows = None
    if contacts is not None and int(getattr(contacts, "rigid_contact_max", 0) or 0) > 0:
        n = min(int(contacts.rigid_contact_count.numpy()[0]), int(contacts.rigid_contact_max))
        if n:
            rows = _rows(solver, contacts)
    template = mujoco.MjContact()
    integrator = int(solver.mj_model.opt.integrator)
    for w, d in enumerate(solver.mj_datas):
        m = solver.mj_models[w]
        mujoco.mj_checkPos(m, d)
        mujoco.mj_checkVel(m, d)
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
        mujoco.mj_checkAcc(m, d)
        if integrator == int(mujoco.mjtIntegrator.mjINT_EULER):
            mujoco.mj_Euler(m, d)
        else:
            mujoco.mj_implicit(m, d)


def _rows(solver, contacts):
    """Contact rows (numpy, keyed like MuJoCo's contact fields, plus ``world``) of ``contacts``
    at the step's input state, converted by :func:`.warp_contacts.inject_contacts_kernel`."""
    from .warp_contacts import WarpContactInjector, contact_buffers

    inj = solver.__dict__.get("_injector")
    cap = int(contacts.rigid_contact_max)
    if inj is None or inj.models is not solver.mj_models:  # parameters pushed: new per-world tables
        inj = solver._injector = WarpContactInjector(solver)
    buf = solver.__dict__.get("_contact_buffers")
    if buf is None or buf.contact.dist.shape[0] != cap:
        buf = solver._contact_buffers = contact_buffers(cap, solver.model.device)
    inj.inject(solver, solver._contact_state, contacts, buf)
    k = min(int(buf.nacon.numpy()[0]), cap)
    if k == 0:
        return None
    c = buf.contact
    return {
        "world": c.worldid.numpy()[:k], "ga": c.geom.numpy()[:k, 0], "gb": c.geom.numpy()[:k, 1],
        "dist": c.dist.numpy()[:k], "pos": c.pos.numpy()[:k], "frame": c.frame.numpy()[:k].reshape(k, 9),
        "dim": c.dim.numpy()[:k], "friction": c.friction.numpy()[:k], "solref": c.solref.numpy()[:k],
        "solimp": c.solimp.numpy()[:k],
    }  # fmt: skip


def _add(solver, m, d, template, rows, w) -> None:
    """Append world ``w``'s rows (geometry and mixed parameters) to ``d``'s contacts."""
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
    c = d.contact
    sl = slice(start, start + k)
    c.dist[sl] = rows["dist"][sel]
    c.pos[sl] = rows["pos"][sel]
    c.frame[sl] = rows["frame"][sel]
    # dist runs between the margin-offset surfaces (armillary's contact margins): the constraint
    # activates at dist = 0, so includemargin is 0
    c.includemargin[sl] = 0.0
    c.friction[sl] = rows["friction"][sel]
    c.solref[sl] = rows["solref"][sel]
    c.solreffriction[sl] = 0.0
    c.solimp[sl] = rows["solimp"][sel]
    c.dim[sl] = rows["dim"][sel]
    c.geom1[sl] = ga
    c.geom2[sl] = gb
    c.geom[sl] = np.stack([ga, gb], axis=1)
    c.flex[sl] = -1
    c.elem[sl] = -1
    c.vert[sl] = -1
    # MuJoCo keeps contacts beyond includemargin out of the constraints ("in gap"), as MuJoCo
    # Warp does (only dist < includemargin is active)
    c.exclude[sl] = (rows["dist"][sel] > 0.0).astype(np.int32)

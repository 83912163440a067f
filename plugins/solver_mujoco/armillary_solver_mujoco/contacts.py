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
solref/solimp; ``includemargin = 0`` since ``dist`` already includes the contact margins).
"""

from __future__ import annotations

import numpy as np

from .state_map import qrot


def _tangents(n):
    """Two unit tangents completing the normal ``n`` into a right-handed frame."""
    a = np.array([1.0, 0.0, 0.0]) if abs(n[0]) < 0.5 else np.array([0.0, 1.0, 0.0])
    t1 = np.cross(n, a)
    t1 /= np.linalg.norm(t1)
    return t1, np.cross(n, t1)


class ContactInjector:
    """Per-solver tables mapping armillary shapes to MuJoCo geoms and their contact parameters."""

    def __init__(self, solver):
        model = solver.model
        conv = solver.conversion
        m = solver.mj_model
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
        self.m = m

    def params(self, g1, g2):
        """MuJoCo's parameter mixing of two geoms: (condim, friction5, solref, solimp, includemargin)."""
        m = self.m
        p1, p2 = int(m.geom_priority[g1]), int(m.geom_priority[g2])
        if p1 != p2:
            g = g1 if p1 > p2 else g2
            condim = int(m.geom_condim[g])
            fr = m.geom_friction[g]
            solref, solimp = m.geom_solref[g].copy(), m.geom_solimp[g].copy()
        else:
            condim = max(int(m.geom_condim[g1]), int(m.geom_condim[g2]))
            fr = np.maximum(m.geom_friction[g1], m.geom_friction[g2])
            s1, s2 = float(m.geom_solmix[g1]), float(m.geom_solmix[g2])
            mix = 0.5 if (s1 + s2) < 1e-15 else s1 / (s1 + s2)
            r1, r2 = m.geom_solref[g1], m.geom_solref[g2]
            if r1[0] > 0 and r2[0] > 0:
                solref = mix * r1 + (1 - mix) * r2
            else:
                solref = np.minimum(r1, r2)
            solimp = mix * m.geom_solimp[g1] + (1 - mix) * m.geom_solimp[g2]
        friction = np.array([fr[0], fr[0], fr[1], fr[2], fr[2]])
        # dist is measured between the margin-offset surfaces (armillary's contact margins), so
        # the constraint activates at dist = 0: includemargin 0
        return condim, friction, solref, solimp, 0.0


def step_with_injected_contacts(solver, contacts) -> None:
    """Step every world's ``MjData`` with armillary's ``contacts`` in place of MuJoCo's collision."""
    import mujoco

    m = solver.mj_model
    inj = solver.__dict__.get("_injector")
    if inj is None:
        inj = solver._injector = ContactInjector(solver)
    per_world = [[] for _ in solver.mj_datas]
    if contacts is not None and int(getattr(contacts, "rigid_contact_max", 0) or 0) > 0:
        n = int(contacts.rigid_contact_count.numpy()[0])
        n = min(n, int(contacts.rigid_contact_max))
        if n:
            s0 = contacts.rigid_contact_shape0.numpy()[:n]
            s1 = contacts.rigid_contact_shape1.numpy()[:n]
            p0 = contacts.rigid_contact_point0.numpy()[:n].astype(np.float64)
            p1 = contacts.rigid_contact_point1.numpy()[:n].astype(np.float64)
            nrm = contacts.rigid_contact_normal.numpy()[:n].astype(np.float64)
            m0 = contacts.rigid_contact_margin0.numpy()[:n].astype(np.float64)
            m1 = contacts.rigid_contact_margin1.numpy()[:n].astype(np.float64)
            per_world = _build(solver, inj, s0, s1, p0, p1, nrm, m0, m1)
    integrator = int(m.opt.integrator)
    for w, d in enumerate(solver.mj_datas):
        m = solver.mj_models[w]
        mujoco.mj_fwdPosition(m, d)
        mujoco.mj_collision(m, d)
        for c in per_world[w]:
            if mujoco.mj_addContact(m, d, c):
                solver._warn_once("mj-contacts-full", "SolverMuJoCo: MuJoCo's contact buffer is full; contacts dropped")
                break
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


def _build(solver, inj, s0, s1, p0, p1, nrm, m0, m1):
    import mujoco

    state = solver._contact_state
    body_q = state.body_q.numpy().astype(np.float64) if state is not None else None
    per_world = [[] for _ in solver.mj_datas]
    cache = {}
    for k in range(len(s0)):
        a, b = int(s0[k]), int(s1[k])
        if a < 0 or b < 0:
            continue
        ga, gb = int(inj.shape_geom[a]), int(inj.shape_geom[b])
        if ga < 0 or gb < 0:
            continue
        wa, wb = int(inj.shape_world[a]), int(inj.shape_world[b])
        w = wa if wa >= 0 else wb
        if w < 0:
            continue
        n = nrm[k]
        xa = _world_point(body_q, int(inj.shape_body[a]), p0[k]) + n * m0[k]
        xb = _world_point(body_q, int(inj.shape_body[b]), p1[k]) - n * m1[k]
        key = (ga, gb)
        if key not in cache:
            cache[key] = inj.params(ga, gb)
        condim, friction, solref, solimp, includemargin = cache[key]
        c = mujoco.MjContact()
        c.dist = float(np.dot(n, xb - xa))
        c.pos = 0.5 * (xa + xb)
        t1, t2 = _tangents(n)
        c.frame = np.concatenate([n, t1, t2])
        c.includemargin = includemargin
        c.friction = friction
        c.solref = solref
        c.solreffriction = np.zeros(2)
        c.solimp = solimp
        c.dim = condim
        c.geom1, c.geom2 = ga, gb
        c.geom = np.array([ga, gb])
        c.flex = np.array([-1, -1])
        c.elem = np.array([-1, -1])
        c.vert = np.array([-1, -1])
        c.exclude = 0
        per_world[w].append(c)
    return per_world


def _world_point(body_q, body, p):
    if body < 0 or body_q is None:
        return p
    q = body_q[body]
    return q[:3] + qrot(q[3:7], p)

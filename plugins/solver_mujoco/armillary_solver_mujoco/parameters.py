"""Write armillary model parameters into compiled ``MjModel`` arrays, per world, in place.

Used at construction (so that worlds whose parameters differ, e.g. randomised masses, each get
their own ``MjModel`` copy) and by ``notify_model_changed`` (parameters pushed without rebuilding
the model or touching the ``MjData`` state). Structural changes (joint types, axes, anchors,
shape types and sources, adding or removing limits or drives) need a rebuild instead.
"""

from __future__ import annotations

import numpy as np

from armillary.flags import ModelFlags

from .convert import KINEMATIC_ARMATURE, ball_spring_qpos, decimal64

INERTIAL = ModelFlags.BODY_INERTIAL_PROPERTIES
DOF = (ModelFlags.JOINT_DOF_PROPERTIES | ModelFlags.JOINT_DOF_FORCE_PROPERTIES
       | ModelFlags.JOINT_DOF_INERTIAL_PROPERTIES | ModelFlags.JOINT_REFERENCE_POSE_PROPERTIES)  # fmt: skip
SHAPE = ModelFlags.SHAPE_PROPERTIES
MODEL = ModelFlags.MODEL_PROPERTIES
PUSHABLE = INERTIAL | DOF | SHAPE | MODEL


def _principal(inertia):
    """(moments (3,), iquat wxyz) of a symmetric 3x3 inertia matrix."""
    inertia = np.asarray(inertia, dtype=np.float64)
    if not np.any(inertia - np.diag(np.diag(inertia))):  # diagonal: its own principal frame, as converted
        return np.maximum(np.diag(inertia), 0.0), np.array([1.0, 0.0, 0.0, 0.0])
    vals, vecs = np.linalg.eigh(inertia)
    if np.linalg.det(vecs) < 0:
        vecs[:, 0] = -vecs[:, 0]
    import mujoco

    q = np.zeros(4)
    mujoco.mju_mat2Quat(q, vecs.reshape(-1))
    return np.maximum(vals, 0.0), q


class ParameterWriter:
    """Per-world index tables and the write functions."""

    def __init__(self, solver):
        self.solver = solver
        conv = solver.conversion
        self.W = conv.world_count
        self.body_local = conv.worlds[0].bodies.astype(np.int64)
        self.body_mj = conv.body_ids[self.body_local] if len(self.body_local) else np.zeros(0, np.int64)
        self.body_off = solver._body_off
        self.shape_local = [int(s) for s in conv.worlds[0].shapes if conv.geom_ids[int(s)] >= 0]
        self.shape_mj = np.asarray([conv.geom_ids[s] for s in self.shape_local], np.int64)
        s0 = int(conv.worlds[0].shapes[0]) if len(conv.worlds[0].shapes) else 0
        self.shape_off = np.array([int(w.shapes[0]) - s0 if len(w.shapes) else 0 for w in conv.worlds], np.int64)
        self.d_off = solver.state_map.d_off
        self.q_off = solver.state_map.q_off
        kin = set(int(d) for d in conv.kinematic_dofs)
        # scalar DOFs: (our dof, our coordinate, mj dof, mj joint, kinematic)
        m = conv.mj_model
        rows = []
        X_c = solver.model.joint_X_c.numpy() if solver.model.joint_count else np.zeros((0, 7))
        # BALL joints: (our first dof, our first coordinate, mj joint, mj qpos address, child anchor rotation)
        self.ball_rows = [(ds, qs, int(m.dof_jntid[md]), mq, decimal64(X_c[j, 3:7]))
                          for j, kind, qs, ds, mq, md, n in conv.joint_map if kind == "ball"]  # fmt: skip
        for j, kind, qs, ds, mq, md, n in conv.joint_map:
            if kind != "scalar":
                continue
            for k in range(n):
                rows.append((ds + k, qs + k, md + k, int(m.dof_jntid[md + k]), (ds + k) in kin))
        self.dof_rows = rows
        self.acts = conv.actuators

    def write(self, models, flags: int) -> None:
        """Write the parameter groups in ``flags`` into ``models[w]`` for every world."""
        model = self.solver.model
        cache = {}

        def A(name):  # float64 (decimal-widened) copy of a model array, made once for all worlds
            if name not in cache:
                cache[name] = decimal64(getattr(model, name).numpy())
            return cache[name]

        for w, m in enumerate(models):
            if flags & INERTIAL and len(self.body_local):
                mass = A("body_mass")
                com = A("body_com")
                inertia = A("body_inertia")
                for b, mid in zip(self.body_local + self.body_off[w], self.body_mj):
                    m.body_ipos[mid] = com[b]
                    if mass[b] <= 0.0:  # massless: as converted (0, or 1e-9 where MuJoCo needs a mass)
                        if m.body_mass[mid] > 1.0e-9:
                            m.body_mass[mid] = 1.0e-9
                            m.body_inertia[mid] = 1.0e-12
                        continue
                    moments, iq = _principal(inertia[b])
                    m.body_mass[mid] = float(mass[b])
                    m.body_inertia[mid] = np.maximum(moments, 1.0e-12)
                    m.body_iquat[mid] = iq
            if flags & DOF and (self.dof_rows or self.ball_rows):
                arm = A("joint_armature")
                damp = A("joint_damping")
                fric = A("joint_friction")
                stiff = A("joint_stiffness")
                rest = A("joint_rest_q")
                lo, hi = A("joint_limit_lower"), A("joint_limit_upper")
                off, qoff = int(self.d_off[w]), int(self.q_off[w])
                for dof, coord, md, jid, kin in self.dof_rows:
                    i, c = dof + off, coord + qoff
                    m.dof_armature[md] = float(arm[i]) + (KINEMATIC_ARMATURE if kin else 0.0)
                    m.dof_damping[md] = float(damp[i])
                    m.dof_frictionloss[md] = float(fric[i])
                    m.jnt_stiffness[jid] = float(stiff[i])
                    m.qpos_spring[m.jnt_qposadr[jid]] = float(rest[c])
                    if m.jnt_limited[jid]:
                        m.jnt_range[jid] = [max(float(lo[i]), -1e9), min(float(hi[i]), 1e9)]
                for dof, coord, jid, adr, rc in self.ball_rows:
                    i, c = dof + off, coord + qoff
                    m.jnt_stiffness[jid] = float(np.mean(stiff[i:i + 3]))
                    spring = ball_spring_qpos(rest[c:c + 4], rc)
                    m.qpos_spring[adr:adr + 4] = [1.0, 0.0, 0.0, 0.0] if spring is None else spring
                ke, kd = A("joint_target_ke"), A("joint_target_kd")
                effort = A("joint_effort_limit")
                for dof, aid, kind in self.acts:
                    i = dof + off
                    if kind == "p":
                        m.actuator_gainprm[aid, 0] = float(ke[i])
                        m.actuator_biasprm[aid, 1] = -float(ke[i])
                    else:
                        m.actuator_gainprm[aid, 0] = float(kd[i])
                        m.actuator_biasprm[aid, 2] = -float(kd[i])
                    if m.actuator_forcelimited[aid]:
                        m.actuator_forcerange[aid] = [-float(effort[i]), float(effort[i])]
            if flags & SHAPE and len(self.shape_local):
                mu = A("shape_material_mu")
                mu_t = A("shape_material_mu_torsional")
                mu_r = A("shape_material_mu_rolling")
                ns = getattr(model, "mujoco", None)
                for s, gid in zip(np.asarray(self.shape_local) + self.shape_off[w], self.shape_mj):
                    m.geom_friction[gid] = [mu[s], mu_t[s], mu_r[s]]
                    if ns is not None and hasattr(ns, "condim"):
                        m.geom_condim[gid] = int(ns.condim.numpy()[s])
                        m.geom_priority[gid] = int(ns.geom_priority.numpy()[s])
                        m.geom_solref[gid] = ns.solref.numpy()[s]
                        m.geom_solimp[gid] = ns.geom_solimp.numpy()[s]
                        m.geom_solmix[gid] = float(ns.geom_solmix.numpy()[s])
                        m.geom_margin[gid] = float(ns.margin.numpy()[s])
                        m.geom_gap[gid] = float(ns.gap.numpy()[s])
                    else:
                        m.geom_margin[gid] = max(float(A("shape_margin")[s]), 0.0)
                        m.geom_gap[gid] = max(float(A("shape_gap")[s]), 0.0)
            if flags & MODEL:
                g = decimal64(model.gravity.numpy().reshape(-1, 3))
                m.opt.gravity[:] = g[min(w, len(g) - 1)]


def per_world_models(solver, flags: int):
    """Write ``flags`` parameters for every world; give worlds whose values differ their own copy.

    Returns the list of per-world ``MjModel`` s (the same object repeated when all agree).
    """
    import copy

    import mujoco

    writer = solver.__dict__.get("_param_writer")
    if writer is None:
        writer = solver._param_writer = ParameterWriter(solver)
    models = list(solver.mj_models)
    W = len(models)
    if W > 1 and all(m is models[0] for m in models):
        probe = [copy.copy(models[0]) for _ in range(W)]
        writer.write(probe, flags)
        same = all(_same(probe[0], p) for p in probe[1:])
        if same:
            writer.write([models[0]], flags)
        else:
            models = probe
    else:
        writer.write(models, flags)
    if flags & INERTIAL:
        done = set()
        for m, d in zip(models, solver.mj_datas):
            if id(m) not in done:
                mujoco.mj_setConst(m, d)
                done.add(id(m))
    return models


_FIELDS = ("body_mass", "body_ipos", "body_inertia", "body_iquat", "dof_armature", "dof_damping",
           "dof_frictionloss", "jnt_stiffness", "qpos_spring", "jnt_range", "actuator_gainprm", "actuator_biasprm",
           "actuator_forcerange", "geom_friction", "geom_condim", "geom_priority", "geom_solref", "geom_solimp",
           "geom_solmix", "geom_margin", "geom_gap")  # fmt: skip


def _same(a, b) -> bool:
    if not np.array_equal(a.opt.gravity, b.opt.gravity):
        return False
    return all(np.array_equal(getattr(a, f), getattr(b, f)) for f in _FIELDS)

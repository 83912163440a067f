"""Convert an armillary :class:`~armillary.Model` into a MuJoCo model through ``mujoco.MjSpec``.

One MuJoCo model holds one world: the entities of world 0 plus the global ones (world -1, e.g.
the ground plane). Every other world must be a replica of world 0 (same entity counts and
types); each world gets its own ``MjData`` (C backend) or its own slice of the batched data
(MuJoCo Warp backend).

Frames: a MuJoCo body frame is our body frame; its pose in the parent body at ``qpos = 0`` is
``joint_X_p * inverse(joint_X_c)``; joint anchors and axes are expressed in the child frame
(``joint_X_c``). Hinge/slide joints get ``ref`` = the model's initial ``joint_q`` (the body is
placed at that pose), so MuJoCo's ``qpos`` equals ``joint_q`` and its ``qpos0`` is the model's
initial configuration, as for an MJCF model; BALL quaternions
are conjugated by the child anchor rotation (:class:`StateMap`). D6 joints become stacked
slide then hinge joints at the same anchor, which compose exactly like our D6.

Names (unique, stable, what ``save_to_mjcf`` writes): body ``b<i>``, joint ``j<j>`` (D6:
``j<j>_<k>`` per DOF), geom ``g<s>``, site ``s<s>``, actuators ``p<dof>`` (position) and
``v<dof>`` (velocity), indices of world 0 / global entities.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np

from armillary.sim.enums import BodyFlags, GeoType, JointTargetMode, JointType, ShapeFlags

from .attributes import FLAGS

#: armature added to the DOFs of kinematic bodies (infinite-mass approximation) [kg m^2 or kg]
KINEMATIC_ARMATURE = 1.0e8


class MuJoCoConversionWarning(UserWarning):
    """Something in the model has no MuJoCo counterpart and was dropped or approximated."""


class Names:
    """MuJoCo element names of our (world-0 or global) entities."""

    @staticmethod
    def body(b: int) -> str:
        return f"b{b}"

    @staticmethod
    def joint(j: int, k: int | None = None) -> str:
        return f"j{j}" if k is None else f"j{j}_{k}"

    @staticmethod
    def geom(s: int) -> str:
        return f"g{s}"

    @staticmethod
    def site(s: int) -> str:
        return f"s{s}"


def decimal64(values) -> np.ndarray:
    """float64 copies of float32 model data, each value widened to the number it was rounded from
    when that is recognisable.

    Our model stores its parameters in float32. Widening ``np.float32(0.1)`` directly gives
    ``0.10000000149011612``, 1.5e-9 away from the ``0.1`` an MJCF author (or a script) wrote, and
    contact-rich rollouts amplify such differences. Every decimal with at most 6 significant digits
    (``FLT_DIG``) survives a float32 round trip, so a float32 value whose shortest decimal
    (``str(np.float32(0.1)) == "0.1"``) has at most 6 significant digits is read back as that
    decimal: exactly the authored number. Other values (7 to 9 digits: mostly computed ones such
    as normalised quaternions or masses from densities, whose float32 value is the best estimate
    and whose shortest decimal may be another half-ulp off) are widened exactly. Values that are
    not float32 (float64 custom attributes) are returned unchanged.
    """
    a = np.asarray(values)
    if a.dtype != np.float32:
        return a.astype(np.float64)
    if a.size == 0:
        return a.astype(np.float64)
    # replicated worlds repeat their values: convert each distinct bit pattern once (keeps -0.0)
    u, inv = np.unique(np.ascontiguousarray(a).reshape(-1).view(np.uint32), return_inverse=True)
    dec = np.array([_authored(v) for v in u.view(np.float32)], dtype=np.float64)
    return dec[inv.reshape(-1)].reshape(a.shape)


def _authored(v) -> float:
    """The number a float32 ``v`` was most likely rounded from (see :func:`decimal64`)."""
    text = str(v)  # the shortest decimal that rounds to v
    digits = text.lower().split("e")[0].lstrip("+-").replace(".", "").strip("0")
    return float(text) if len(digits) <= 6 else float(v)


def _wxyz(q_xyzw) -> list:
    x, y, z, w = (float(v) for v in q_xyzw)
    return [w, x, y, z]


def _quat_mul(a, b):
    """Hamilton product of xyzw quaternions."""
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return np.array([
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
        aw * bw - ax * bx - ay * by - az * bz,
    ])  # fmt: skip


def _quat_conj(q):
    return np.array([-q[0], -q[1], -q[2], q[3]])


def _rotate(q, v):
    return _quat_mul(_quat_mul(q, np.array([v[0], v[1], v[2], 0.0])), _quat_conj(q))[:3]


def _tf_mul(a, b):
    """(p, q) transforms, xyzw: a * b."""
    return np.asarray(a[0]) + _rotate(a[1], b[0]), _quat_mul(a[1], b[1])


def _tf_inv(a):
    qi = _quat_conj(a[1])
    return -_rotate(qi, a[0]), qi


def _split(tf):
    tf = np.asarray(tf, dtype=np.float64)
    return tf[:3], tf[3:7] / np.linalg.norm(tf[3:7])


@dataclasses.dataclass
class WorldLayout:
    """Index ranges of one world's entities (contiguous per world; ``-1`` entities are global)."""

    bodies: np.ndarray
    joints: np.ndarray
    shapes: np.ndarray


@dataclasses.dataclass
class Conversion:
    """Result of :func:`convert_model`: the spec, the compiled model and the index maps."""

    spec: object
    mj_model: object
    world_count: int
    worlds: list  # WorldLayout per world
    global_shapes: np.ndarray
    # per world-0 joint: (joint index, kind, our q start, our qd start, mj qpos adr, mj dof adr, ndof)
    joint_map: list
    # actuators: (our dof (world 0), mj actuator id, kind "p"/"v")
    actuators: list
    # per world-0 body: mj body id
    body_ids: np.ndarray
    # geom id per world-0 / global shape (-1: not converted)
    geom_ids: np.ndarray
    kinematic_dofs: np.ndarray  # our world-0 dof indices of kinematic bodies
    warnings: list


def _layout(model):
    """Contiguous per-world entity ranges; raise when worlds are not replicas of world 0."""
    W = int(getattr(model, "world_count", 1) or 1)

    def ranges(world_arr, n, what):
        if n == 0:
            return [np.zeros(0, np.int64) for _ in range(W)], np.zeros(0, np.int64)
        w = world_arr.numpy().astype(np.int64)
        glob = np.nonzero(w < 0)[0]
        per = [np.nonzero(w == i)[0] for i in range(W)]
        counts = {len(p) for p in per}
        if len(counts) > 1:
            raise ValueError(
                f"SolverMuJoCo: every world must be a replica of world 0, but worlds have different {what} "
                f"counts ({sorted(counts)})"
            )
        return per, glob

    bodies, gb = ranges(model.body_world, int(model.body_count), "body")
    joints, gj = ranges(model.joint_world, int(model.joint_count), "joint")
    shapes, gs = ranges(model.shape_world, int(model.shape_count), "shape")
    if W == 1:  # a single-world model may keep everything global (world -1): that is world 0
        bodies = [np.sort(np.concatenate([bodies[0], gb]))]
        joints = [np.sort(np.concatenate([joints[0], gj]))]
        gb = gj = np.zeros(0, np.int64)
        body_of_shape = model.shape_body.numpy() if model.shape_count else np.zeros(0, np.int64)
        on_body = gs[body_of_shape[gs] >= 0] if len(gs) else gs
        shapes = [np.sort(np.concatenate([shapes[0], on_body]))]
        gs = np.setdiff1d(gs, on_body)
    if len(gj):
        raise ValueError(f"SolverMuJoCo: joint {int(gj[0])} belongs to no world (world -1); joints must be in a world")
    if len(gb):
        raise ValueError(f"SolverMuJoCo: body {int(gb[0])} belongs to no world (world -1); bodies must be in a world")
    return W, [WorldLayout(bodies[i], joints[i], shapes[i]) for i in range(W)], gs


def _custom(model, name):
    ns = getattr(model, "mujoco", None)
    if ns is None:
        return None
    arr = getattr(ns, name, None)
    if arr is None:
        return None
    arr = arr.numpy()
    return decimal64(arr) if arr.dtype == np.float32 else arr


def convert_model(model, *, options: dict | None = None, include_sites: bool = True,
                  skip_visual_only_geoms: bool = True, use_mujoco_contacts: bool = True) -> Conversion:  # fmt: skip
    """Build and compile the MuJoCo model of world 0 (plus global entities).

    Args:
        model: the armillary model.
        options: ``mjOption`` overrides by attribute name (``integrator``, ``cone``, ``impratio``,
            ``iterations``, ...); values from the model's ``mujoco:*`` ONCE attributes are used
            otherwise.
        include_sites: convert site shapes (``ShapeFlags.SITE``) to MuJoCo sites.
        skip_visual_only_geoms: drop shapes that neither collide nor are sites.
        use_mujoco_contacts: when ``False`` every geom gets ``contype = conaffinity = 0`` (MuJoCo
            finds no contacts itself; armillary contacts are injected instead).
    """
    import mujoco

    notes: list[str] = []

    def note(msg):
        notes.append(msg)
        warnings.warn(msg, MuJoCoConversionWarning, stacklevel=3)

    W, worlds, global_shapes = _layout(model)
    w0 = worlds[0]
    spec = mujoco.MjSpec()
    spec.compiler.degree = False
    spec.compiler.autolimits = True
    # Model.gravity: one row per world, the last for the global world (a single row without worlds);
    # MuJoCo simulates world 0 with its row, global bodies (single-world models only) included
    g_rows = decimal64(model.gravity.numpy().reshape(-1, 3))
    g = g_rows[0]
    if model.body_count and (model.body_world.numpy() < 0).any() and not np.array_equal(g_rows[-1], g):
        note(f"global bodies (world -1) are simulated in world 0 under its gravity {g.tolist()}, not the global "
             f"world's {g_rows[-1].tolist()}")  # fmt: skip
    spec.option.gravity = [float(x) for x in g]
    _apply_options(spec, model, options or {})

    # ------------------------------------------------------------------ bodies and joints
    jt = model.joint_type.numpy() if model.joint_count else np.zeros(0, np.int32)
    jparent = model.joint_parent.numpy() if model.joint_count else np.zeros(0, np.int32)
    jchild = model.joint_child.numpy() if model.joint_count else np.zeros(0, np.int32)
    jart = model.joint_articulation.numpy() if model.joint_count else np.zeros(0, np.int32)
    X_p = decimal64(model.joint_X_p.numpy()) if model.joint_count else np.zeros((0, 7))
    X_c = decimal64(model.joint_X_c.numpy()) if model.joint_count else np.zeros((0, 7))
    axis = decimal64(model.joint_axis.numpy()) if model.joint_dof_count else np.zeros((0, 3))
    q_start = model.joint_q_start.numpy()
    qd_start = model.joint_qd_start.numpy()
    dof_dim = model.joint_dof_dim.numpy() if model.joint_count else np.zeros((0, 2), np.int32)
    lower = decimal64(model.joint_limit_lower.numpy()) if model.joint_dof_count else None
    upper = decimal64(model.joint_limit_upper.numpy()) if model.joint_dof_count else None
    armature = decimal64(model.joint_armature.numpy()) if model.joint_dof_count else None
    damping = decimal64(model.joint_damping.numpy()) if model.joint_dof_count else None
    friction = decimal64(model.joint_friction.numpy()) if model.joint_dof_count else None
    stiffness = decimal64(model.joint_stiffness.numpy()) if model.joint_dof_count else None
    rest_q = decimal64(model.joint_rest_q.numpy()) if model.joint_coord_count else None
    q_init = decimal64(model.joint_q.numpy()) if model.joint_coord_count else np.zeros(0)
    body_flags = model.body_flags.numpy() if model.body_count else np.zeros(0, np.int32)
    mass = decimal64(model.body_mass.numpy()) if model.body_count else None
    com = decimal64(model.body_com.numpy()) if model.body_count else None
    inertia = decimal64(model.body_inertia.numpy()) if model.body_count else None
    solreflimit = _custom(model, "solreflimit")
    solimplimit = _custom(model, "solimplimit")
    solreffriction = _custom(model, "solreffriction")
    solimpfriction = _custom(model, "solimpfriction")
    limit_margin = _custom(model, "limit_margin")
    gravcomp = _custom(model, "gravcomp")

    unsupported = [j for j in w0.joints if int(jt[j]) in (int(JointType.DISTANCE), int(JointType.ROD))]
    if unsupported:
        j = int(unsupported[0])
        raise ValueError(f"SolverMuJoCo does not support joint type {JointType(int(jt[j])).name} (joint {j}, "
                         f"{model.joint_label[j]!r})")  # fmt: skip

    tree = [int(j) for j in w0.joints if jart[j] >= 0]
    loops = [int(j) for j in w0.joints if jart[j] < 0 and jparent[j] >= 0]
    roots_outside = [int(j) for j in w0.joints if jart[j] < 0 and jparent[j] < 0]
    tree += roots_outside  # standalone world-root joints: converted like articulation roots
    if roots_outside:
        note(f"SolverMuJoCo: {len(roots_outside)} world-root joint(s) outside any articulation converted as "
             f"articulation roots (first: joint {roots_outside[0]}, {model.joint_label[roots_outside[0]]!r})")  # fmt: skip
    parent_joint_of = {}
    for j in tree:
        if int(jchild[j]) in parent_joint_of:
            raise ValueError(f"SolverMuJoCo: body {int(jchild[j])} has two tree joints ({parent_joint_of[int(jchild[j])]} "
                             f"and {j}); make one of them a loop-closing joint outside the articulation")  # fmt: skip
        parent_joint_of[int(jchild[j])] = j

    mj_body = {-1: spec.worldbody}
    joint_entries = []  # (j, kind, names...)
    kinematic_dofs = []
    order = _topological(tree, jparent, jchild)
    body_ids_pending = {}
    for j in order:
        c, p = int(jchild[j]), int(jparent[j])
        if p not in mj_body:
            raise ValueError(f"SolverMuJoCo: joint {j} ({model.joint_label[j]!r}) has parent body {p} which is not "
                             "reached from the world through tree joints")  # fmt: skip
        t = int(jt[j])
        xp, xc = _split(X_p[j]), _split(X_c[j])
        if t == int(JointType.FREE):
            if p != -1:
                raise ValueError(f"SolverMuJoCo: FREE joint {j} ({model.joint_label[j]!r}) has a parent body; "
                                 "MuJoCo allows free joints on top-level bodies only")  # fmt: skip
        # MuJoCo's reference configuration (qpos0) is the model's initial joint_q for hinge/slide
        # DOFs: the body is placed at that pose and the joints get ref = joint_q (so MuJoCo's
        # qpos equals joint_q, and qpos0-dependent quantities match an MJCF's own)
        rel = _tf_mul(_tf_mul(xp, _joint_tf(t, axis, int(qd_start[j]), int(q_start[j]), dof_dim[j], q_init)),
                      _tf_inv(xc))  # fmt: skip
        body = mj_body[p].add_body(name=Names.body(c), pos=[float(v) for v in rel[0]], quat=_wxyz(rel[1]))
        _set_inertial(body, mass[c], com[c], inertia[c])
        if gravcomp is not None:
            body.gravcomp = float(gravcomp[c])
        mj_body[c] = body
        body_ids_pending[c] = body
        kin = bool(body_flags[c] & int(BodyFlags.KINEMATIC))
        ds, qs = int(qd_start[j]), int(q_start[j])
        anchor = [float(v) for v in xc[0]]
        if t == int(JointType.FIXED):
            joint_entries.append((j, "fixed", []))
            continue
        if t == int(JointType.FREE):
            jn = body.add_freejoint(name=Names.joint(j))
            joint_entries.append((j, "free", [Names.joint(j)]))
            if kin:
                kinematic_dofs.extend(range(ds, ds + 6))
            # MuJoCo has one armature / damping / frictionloss per joint: the mean of the 6 DOFs
            jn.armature = float(np.mean(armature[ds:ds + 6])) + (KINEMATIC_ARMATURE if kin else 0.0)
            jn.damping = [float(np.mean(damping[ds:ds + 6])), 0.0, 0.0]
            jn.frictionloss = float(np.mean(friction[ds:ds + 6]))
            continue
        if t == int(JointType.BALL):
            jn = body.add_joint(name=Names.joint(j), type=mujoco.mjtJoint.mjJNT_BALL, pos=anchor)
            _scalar_params(jn, ds, armature, damping, friction, None, None, kin, solreffriction, solimpfriction)
            _ball_limits(jn, ds, lower, upper, solreflimit, solimplimit, limit_margin)
            if np.any(stiffness[ds:ds + 3] != 0.0):
                if np.ptp(stiffness[ds:ds + 3]) > 0.0:
                    note(f"SolverMuJoCo: BALL joint {j} stiffness uses the mean of its 3 DOFs as MuJoCo's isotropic "
                         "spring")  # fmt: skip
                jn.stiffness = [float(np.mean(stiffness[ds:ds + 3])), 0.0, 0.0]
            # the spring's rest orientation (MuJoCo's qpos_spring) is set after compiling: MjSpec has none
            joint_entries.append((j, "ball", [Names.joint(j)]))
            if kin:
                kinematic_dofs.extend(range(ds, ds + 3))
            continue
        # scalar joints: PRISMATIC, REVOLUTE, D6 (slides first, then hinges)
        n_lin, n_ang = (1, 0) if t == int(JointType.PRISMATIC) else (0, 1) if t == int(JointType.REVOLUTE) else (
            int(dof_dim[j, 0]), int(dof_dim[j, 1]))  # fmt: skip
        names = []
        for k in range(n_lin + n_ang):
            i = ds + k
            a = _rotate(xc[1], axis[i])
            kind = mujoco.mjtJoint.mjJNT_SLIDE if k < n_lin else mujoco.mjtJoint.mjJNT_HINGE
            name = Names.joint(j) if n_lin + n_ang == 1 else Names.joint(j, k)
            jn = body.add_joint(name=name, type=kind, pos=anchor, axis=[float(v) for v in a])
            jn.ref = float(q_init[qs + k])
            _scalar_params(jn, i, armature, damping, friction, stiffness, rest_q[qs + k], kin, solreffriction,
                           solimpfriction)  # fmt: skip
            if lower[i] > -1e9 or upper[i] < 1e9:
                jn.limited = mujoco.mjtLimited.mjLIMITED_TRUE
                jn.range = [float(max(lower[i], -1e9)), float(min(upper[i], 1e9))]
                if solreflimit is not None:
                    jn.solref_limit = [float(v) for v in solreflimit[i]]
                    jn.solimp_limit = [float(v) for v in solimplimit[i]]
                    jn.margin = float(limit_margin[i])
            else:
                jn.limited = mujoco.mjtLimited.mjLIMITED_FALSE
            names.append(name)
            if kin:
                kinematic_dofs.append(i)
        joint_entries.append((j, "scalar", names))

    bodies_missing = [int(b) for b in w0.bodies if int(b) not in mj_body]
    for b in bodies_missing:  # bodies without a tree joint: static, attached to the world
        note(f"SolverMuJoCo: body {b} ({model.body_label[b]!r}) has no tree joint; it is welded to the world")
        q = decimal64(model.body_q.numpy()[b])
        body = spec.worldbody.add_body(name=Names.body(b), pos=[float(v) for v in q[:3]], quat=_wxyz(q[3:7]))
        _set_inertial(body, mass[b], com[b], inertia[b])
        mj_body[b] = body

    # ------------------------------------------------------------------ shapes
    geom_of = _add_shapes(spec, model, mj_body, list(w0.shapes) + list(global_shapes), include_sites,
                          skip_visual_only_geoms, use_mujoco_contacts, note)  # fmt: skip

    # ------------------------------------------------------------------ equalities
    eq_solref, eq_solimp = _custom(model, "eq_solref"), _custom(model, "eq_solimp")
    mimic = model.joint_mimic_joint.numpy() if model.joint_count else np.zeros(0)
    coeffs = decimal64(model.joint_mimic_coeffs.numpy()) if model.joint_count else np.zeros((0, 2))
    entry_names = {j: names for j, _, names in joint_entries}
    for j in w0.joints:
        r = int(mimic[j])
        if r < 0:
            continue
        for nf, nr in zip(entry_names.get(int(j), []), entry_names.get(r, [])):
            eq = spec.add_equality(type=mujoco.mjtEq.mjEQ_JOINT, name1=nf, name2=nr)
            # MuJoCo: q_f - ref_f = p0 + p1 (q_r - ref_r); ours: q_f = c0 + c1 q_r
            ref_f = float(q_init[int(q_start[j])]) if len(q_init) else 0.0
            ref_r = float(q_init[int(q_start[r])]) if len(q_init) else 0.0
            c0, c1 = float(coeffs[j][0]), float(coeffs[j][1])
            eq.data[:5] = [c0 + c1 * ref_r - ref_f, c1, 0.0, 0.0, 0.0]
            _eq_params(eq, eq_solref, eq_solimp, int(j))
    enabled = model.joint_enabled.numpy() if model.joint_count else np.zeros(0, bool)
    for j in loops:
        t = int(jt[j])
        p, c = int(jparent[j]), int(jchild[j])
        xp, xc = _split(X_p[j]), _split(X_c[j])
        if t == int(JointType.BALL):
            eq = spec.add_equality(type=mujoco.mjtEq.mjEQ_CONNECT, name1=Names.body(p), name2=Names.body(c),
                                   objtype=mujoco.mjtObj.mjOBJ_BODY)  # fmt: skip
            eq.data[:3] = [float(v) for v in xp[0]]  # anchor in body 1 (the parent)
            eq.data[3:6] = [float(v) for v in xc[0]]
        elif t == int(JointType.FIXED):
            eq = spec.add_equality(type=mujoco.mjtEq.mjEQ_WELD, name1=Names.body(p), name2=Names.body(c),
                                   objtype=mujoco.mjtObj.mjOBJ_BODY)  # fmt: skip
            # weld: anchor in body 2 (child) frame, relpose = pose of body 2 in body 1 at the closed loop
            rel = _tf_mul(xp, _tf_inv(xc))
            eq.data[:3] = [float(v) for v in xc[0]]
            eq.data[3:6] = [float(v) for v in xp[0]]
            eq.data[6:10] = _wxyz(rel[1])
            eq.data[10] = 1.0
        else:
            raise ValueError(f"SolverMuJoCo: loop-closing joint {j} ({model.joint_label[j]!r}) has type "
                             f"{JointType(t).name}; MuJoCo loop closures support BALL (connect) and FIXED (weld)")  # fmt: skip
        eq.active = bool(enabled[j])
        eq.name = f"loop{j}"
        _eq_params(eq, eq_solref, eq_solimp, j)
        if np.any(np.abs(armature[qd_start[j]:qd_start[j + 1]]) > 0) if qd_start[j + 1] > qd_start[j] else False:
            note(f"SolverMuJoCo: loop-closing joint {j} loses its armature, drive and limits (MuJoCo equality)")

    # ------------------------------------------------------------------ tendons (mujoco:tendon rows)
    from .tendons import add_tendons

    add_tendons(spec, model, entry_names, note)

    # ------------------------------------------------------------------ contact pairs and excludes (mujoco:pair / mujoco:exclude rows)
    if use_mujoco_contacts:
        from .pairs import add_pairs

        add_pairs(spec, model, geom_of, {b: Names.body(b) for b in mj_body if b >= 0}, note)

    # ------------------------------------------------------------------ drives as actuators
    actuators = _add_actuators(spec, model, joint_entries, qd_start, jt, note)

    mj_model = _compile(spec, mj_body, mass, com, inertia)

    # index maps
    joint_map = []
    for j, kind, names in joint_entries:
        if kind == "fixed":
            continue
        jid = mujoco.mj_name2id(mj_model, mujoco.mjtObj.mjOBJ_JOINT, names[0])
        if kind == "ball":
            qs = int(q_start[j])
            rest = ball_spring_qpos(rest_q[qs:qs + 4], X_c[j, 3:7])
            if rest is not None:
                mj_model.qpos_spring[mj_model.jnt_qposadr[jid]:mj_model.jnt_qposadr[jid] + 4] = rest
        joint_map.append((j, kind, int(q_start[j]), int(qd_start[j]), int(mj_model.jnt_qposadr[jid]),
                          int(mj_model.jnt_dofadr[jid]), int(qd_start[j + 1] - qd_start[j])))  # fmt: skip
    body_ids = np.full(int(model.body_count), -1, np.int64)
    for b in w0.bodies:
        body_ids[b] = mujoco.mj_name2id(mj_model, mujoco.mjtObj.mjOBJ_BODY, Names.body(int(b)))
    geom_ids = np.full(int(model.shape_count), -1, np.int64)
    for s, name in geom_of.items():
        geom_ids[s] = mujoco.mj_name2id(mj_model, mujoco.mjtObj.mjOBJ_GEOM, name)
    act = [(dof, mujoco.mj_name2id(mj_model, mujoco.mjtObj.mjOBJ_ACTUATOR, name), kind) for dof, name, kind in actuators]
    return Conversion(spec=spec, mj_model=mj_model, world_count=W, worlds=worlds, global_shapes=global_shapes,
                      joint_map=joint_map, actuators=act, body_ids=body_ids, geom_ids=geom_ids,
                      kinematic_dofs=np.asarray(kinematic_dofs, np.int64), warnings=notes)  # fmt: skip


def ball_spring_qpos(rest_xyzw, child_rot_xyzw):
    """MuJoCo ``qpos_spring`` (wxyz) of a BALL joint whose rest orientation is ``rest_xyzw``, or
    ``None`` for the identity (MuJoCo's default). A BALL quaternion is expressed in MuJoCo's body
    frame, i.e. conjugated by the child anchor rotation ``X_c`` (as :class:`.StateMap` maps
    ``joint_q``)."""
    r = np.asarray(rest_xyzw, np.float64)
    n = np.linalg.norm(r)
    if n <= 0.0 or np.all(r / n == np.array([0.0, 0.0, 0.0, 1.0])):
        return None
    rc = np.asarray(child_rot_xyzw, np.float64)
    rc = rc / np.linalg.norm(rc)
    return np.asarray(_wxyz(_quat_mul(_quat_mul(rc, r / n), _quat_conj(rc))))


def _compile(spec, mj_body, mass, com, inertia):
    """Compile; a massless body MuJoCo rejects as a moving body without mass (e.g. an intermediate
    link between stacked joints) gets 1e-9 kg and the compile is retried."""
    import re

    massless = {Names.body(b): b for b in mj_body if b >= 0 and mass[b] <= 0.0}
    while True:
        try:
            return spec.compile()
        except Exception as e:  # noqa: BLE001 - report MuJoCo's compiler message with context
            msg = str(e)
            named = re.search(r"Element name '([^']*)'", msg)
            b = massless.pop(named.group(1), None) if named and "mass and inertia" in msg else None
            if b is None:
                raise ValueError(f"SolverMuJoCo: MuJoCo could not compile the converted model: {e}") from e
            _set_inertial(mj_body[b], mass[b], com[b], inertia[b], tiny_if_massless=True)


def _joint_tf(t, axis, ds, qs, dim, q):
    """Joint transform ``X_j(q)`` (position, xyzw) of a PRISMATIC / REVOLUTE / D6 joint (identity otherwise)."""
    pos = np.zeros(3)
    rot = np.array([0.0, 0.0, 0.0, 1.0])
    if t == int(JointType.PRISMATIC):
        pos = np.asarray(axis[ds], np.float64) * q[qs]
    elif t == int(JointType.REVOLUTE):
        rot = _axis_angle(axis[ds], q[qs])
    elif t == int(JointType.D6):
        n_lin, n_ang = int(dim[0]), int(dim[1])
        for i in range(n_lin):
            pos = pos + np.asarray(axis[ds + i], np.float64) * q[qs + i]
        for k in range(n_ang):
            rot = _quat_mul(rot, _axis_angle(axis[ds + n_lin + k], q[qs + n_lin + k]))
    return pos, rot


def _axis_angle(a, angle):
    a = np.asarray(a, np.float64)
    a = a / max(np.linalg.norm(a), 1e-30)
    s = np.sin(0.5 * float(angle))
    return np.array([a[0] * s, a[1] * s, a[2] * s, np.cos(0.5 * float(angle))])


def _eq_params(eq, solref, solimp, j):
    if solref is not None:
        eq.solref = [float(v) for v in solref[j]]
        eq.solimp = [float(v) for v in solimp[j]]


def _topological(tree, jparent, jchild):
    """Tree joints ordered so that a joint's parent body is created before it."""
    remaining = list(tree)
    done = {-1}
    out = []
    while remaining:
        progress = False
        rest = []
        for j in remaining:
            if int(jparent[j]) in done:
                out.append(j)
                done.add(int(jchild[j]))
                progress = True
            else:
                rest.append(j)
        if not progress:
            out.extend(rest)  # unreachable parents: reported by the caller
            break
        remaining = rest
    return out


def _set_inertial(body, m, c, I, tiny_if_massless=False):
    """Explicit inertial of a MuJoCo body from our mass, center of mass and inertia (about the com).

    A massless body stays massless (MuJoCo accepts that wherever the subtree below a joint has
    mass, as for an MJCF body without geoms); ``tiny_if_massless`` gives it 1e-9 kg instead, for
    the models MuJoCo rejects that way. A diagonal inertia is passed as principal moments with
    the identity ``iquat``, as an MJCF ``diaginertia`` compiles, not through MuJoCo's
    eigen-decomposition of a full inertia.
    """
    body.explicitinertial = True
    body.ipos = [float(v) for v in c]
    if m <= 0.0:
        body.mass = 1.0e-9 if tiny_if_massless else 0.0
        body.inertia = [1.0e-12] * 3 if tiny_if_massless else [0.0, 0.0, 0.0]
        body.iquat = [1.0, 0.0, 0.0, 0.0]
        return
    body.mass = float(m)
    I = np.asarray(I, dtype=np.float64)
    I = 0.5 * (I + I.T)
    if not np.any(I - np.diag(np.diag(I))):
        d = np.diag(I)
        a, b, c = np.sort(d)
        if a + b >= c:
            body.inertia = [float(v) for v in d]
            body.iquat = [1.0, 0.0, 0.0, 0.0]
            return
    a, b, c = np.sort(np.linalg.eigvalsh(I))
    deficit = c - (a + b)
    if 0.0 < deficit <= 1.0e-5 * max(c, 1e-30):  # float32 round-off of an inertia on the A + B = C edge
        I = I + 2.0 * deficit * np.eye(3)
    body.fullinertia = [I[0, 0], I[1, 1], I[2, 2], I[0, 1], I[0, 2], I[1, 2]]


def _scalar_params(jn, i, armature, damping, friction, stiffness, rest, kinematic, solreffriction, solimpfriction):
    jn.armature = float(armature[i]) + (KINEMATIC_ARMATURE if kinematic else 0.0)
    jn.damping = [float(damping[i]), 0.0, 0.0]  # MuJoCo 4: linear term of the damping polynomial
    jn.frictionloss = float(friction[i])
    if solreffriction is not None:
        jn.solref_friction = [float(v) for v in solreffriction[i]]
        jn.solimp_friction = [float(v) for v in solimpfriction[i]]
    if stiffness is not None:
        jn.stiffness = [float(stiffness[i]), 0.0, 0.0]
        jn.springref = float(rest)


def _ball_limits(jn, ds, lower, upper, solreflimit, solimplimit, limit_margin):
    import mujoco

    lo, hi = lower[ds:ds + 3], upper[ds:ds + 3]
    if np.all(lo <= -1e9) and np.all(hi >= 1e9):
        jn.limited = mujoco.mjtLimited.mjLIMITED_FALSE
        return
    # MuJoCo ball limits are a cone on the rotation angle: use the largest symmetric bound
    jn.limited = mujoco.mjtLimited.mjLIMITED_TRUE
    jn.range = [0.0, float(np.max(np.minimum(np.abs(lo), np.abs(hi))))]
    if solreflimit is not None:
        jn.solref_limit = [float(v) for v in solreflimit[ds]]
        jn.solimp_limit = [float(v) for v in solimplimit[ds]]
        jn.margin = float(limit_margin[ds])


def _add_shapes(spec, model, mj_body, shapes, include_sites, skip_visual_only, use_mujoco_contacts, note):
    import mujoco

    if not len(shapes):
        return {}
    st = model.shape_type.numpy()
    sb = model.shape_body.numpy()
    tf = decimal64(model.shape_transform.numpy())
    scale = decimal64(model.shape_scale.numpy())
    flags = model.shape_flags.numpy()
    mu = decimal64(model.shape_material_mu.numpy())
    mu_t = decimal64(model.shape_material_mu_torsional.numpy())
    mu_r = decimal64(model.shape_material_mu_rolling.numpy())
    condim = _custom(model, "condim")
    priority = _custom(model, "geom_priority")
    solref = _custom(model, "solref")
    solimp = _custom(model, "geom_solimp")
    solmix = _custom(model, "geom_solmix")
    margin = _custom(model, "margin")
    gap = _custom(model, "gap")
    contype = _custom(model, "contype")
    conaffinity = _custom(model, "conaffinity")
    gap_ours = decimal64(model.shape_gap.numpy())
    margin_ours = decimal64(model.shape_margin.numpy())
    sources = model.shape_source
    geom_of = {}
    mesh_names = {}
    for s in shapes:
        s = int(s)
        body = mj_body.get(int(sb[s]), None)
        if body is None:
            note(f"SolverMuJoCo: shape {s} is on body {int(sb[s])} which was not converted; dropped")
            continue
        pos, quat = _split(tf[s])
        is_site = bool(flags[s] & int(ShapeFlags.SITE))
        collides = bool(flags[s] & int(ShapeFlags.COLLIDE_SHAPES))
        t = int(st[s])
        if is_site:
            if include_sites:
                site = body.add_site(name=Names.site(s), pos=[float(v) for v in pos], quat=_wxyz(quat))
                _site_size(site, t, scale[s])
            continue
        if not collides and skip_visual_only:
            continue
        kw = dict(name=Names.geom(s), pos=[float(v) for v in pos], quat=_wxyz(quat))
        sc = scale[s]
        if t == int(GeoType.SPHERE):
            kw.update(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[float(sc[0]), 0, 0])
        elif t == int(GeoType.BOX):
            kw.update(type=mujoco.mjtGeom.mjGEOM_BOX, size=[float(v) for v in sc])
        elif t == int(GeoType.CAPSULE):
            kw.update(type=mujoco.mjtGeom.mjGEOM_CAPSULE, size=[float(sc[0]), float(sc[1]), 0])
        elif t == int(GeoType.CYLINDER):
            kw.update(type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[float(sc[0]), float(sc[1]), 0])
        elif t == int(GeoType.ELLIPSOID):
            kw.update(type=mujoco.mjtGeom.mjGEOM_ELLIPSOID, size=[float(v) for v in sc])
        elif t == int(GeoType.PLANE):
            w, l = float(sc[0]), float(sc[1])
            kw.update(type=mujoco.mjtGeom.mjGEOM_PLANE, size=[w if w > 0 else 0.0, l if l > 0 else 0.0, 1.0])
        elif t in (int(GeoType.MESH), int(GeoType.CONVEX_MESH)):
            src = sources[s]
            key = (id(src), tuple(float(v) for v in sc))
            if key not in mesh_names:
                mesh_names[key] = f"mesh{len(mesh_names)}"
                verts = np.asarray(src.vertices, dtype=np.float64) * np.asarray(sc, dtype=np.float64)
                spec.add_mesh(name=mesh_names[key], uservert=verts.reshape(-1).tolist(),
                              userface=np.asarray(src.indices, dtype=np.int64).reshape(-1).tolist())  # fmt: skip
            kw.update(type=mujoco.mjtGeom.mjGEOM_MESH, meshname=mesh_names[key])
        elif t == int(GeoType.HFIELD):
            # MuJoCo normalises the samples to [0, 1] by their own range and scales by size[2]:
            # the geom sits at the lowest sample, size[2] is the sample range, the base reaches
            # down to the field's min_z
            src = sources[s]
            name = f"hfield{s}"
            data = np.asarray(src.data, dtype=np.float64) * float(sc[2])
            d_lo, d_hi = float(data.min()), float(data.max())
            span = d_hi - d_lo
            elev = span if span > 0 else max(float(src.max_z) * float(sc[2]) - d_lo, 1.0)
            base = max(d_lo - float(src.min_z) * float(sc[2]), 1.0e-6)
            norm = (data - d_lo) / span if span > 0 else np.zeros_like(data)
            spec.add_hfield(name=name, nrow=int(src.nrow), ncol=int(src.ncol),
                            size=[float(src.hx * sc[0]), float(src.hy * sc[1]), elev, base],
                            userdata=norm.reshape(-1).tolist())  # fmt: skip
            kw["pos"] = [float(v) for v in (pos + _rotate(quat, [0.0, 0.0, d_lo]))]
            kw.update(type=mujoco.mjtGeom.mjGEOM_HFIELD, hfieldname=name)
        elif t == int(GeoType.CONE):
            note(f"SolverMuJoCo: shape {s} is a CONE, which MuJoCo lacks; converted to a cylinder")
            kw.update(type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[float(sc[0]), float(sc[1]), 0])
        else:
            note(f"SolverMuJoCo: shape {s} of type {GeoType(t).name} has no MuJoCo counterpart; dropped")
            continue
        geom = body.add_geom(**kw)
        geom.density = 0.0
        geom.mass = 0.0
        geom.friction = [float(mu[s]), float(mu_t[s]), float(mu_r[s])]
        if condim is not None:
            geom.condim = int(condim[s])
            geom.priority = int(priority[s])
            geom.solref = [float(v) for v in solref[s]]
            geom.solimp = [float(v) for v in solimp[s]]
            geom.solmix = float(solmix[s])
            geom.margin = float(margin[s])
            geom.gap = float(gap[s])
        else:
            # MuJoCo >= 4 uses armillary's semantics: per-pair sums, margin = where (surface offset),
            # gap = when (extra detection distance, inactive)
            geom.margin = float(max(margin_ours[s], 0.0))
            geom.gap = float(max(gap_ours[s], 0.0))
        if not use_mujoco_contacts or not collides:
            geom.contype = 0
            geom.conaffinity = 0
        elif contype is not None:
            geom.contype = int(contype[s])
            geom.conaffinity = int(conaffinity[s])
        geom_of[s] = Names.geom(s)
    if use_mujoco_contacts:
        _filters_to_excludes(spec, model, geom_of, note)
    return geom_of


def _site_size(site, t, sc):
    import mujoco

    if t == int(GeoType.BOX):
        site.type = mujoco.mjtGeom.mjGEOM_BOX
        site.size = [float(v) for v in sc]
    elif t == int(GeoType.CAPSULE):
        site.type = mujoco.mjtGeom.mjGEOM_CAPSULE
        site.size = [float(sc[0]), float(sc[1]), 0.0]
    else:
        site.size = [float(max(sc[0], 1e-3)), 0.0, 0.0]


def _filters_to_excludes(spec, model, geom_of, note):
    """Body pairs all of whose shape pairs our model filters out (shape_collision_filter_pairs)
    become MuJoCo ``<exclude>`` elements; partially filtered body pairs are reported."""
    pairs = getattr(model, "shape_collision_filter_pairs", None)
    if pairs is None or not geom_of:
        return
    pairs = pairs.numpy() if hasattr(pairs, "numpy") else np.asarray(list(pairs))
    if len(pairs) == 0:
        return
    sb = model.shape_body.numpy()
    shapes_of = {}
    for s in geom_of:
        shapes_of.setdefault(int(sb[s]), []).append(s)
    from .pairs import explicit_exclude_body_pairs

    explicit = explicit_exclude_body_pairs(model)  # mujoco:exclude rows: converted by add_pairs
    filtered = {}
    for a, b in np.asarray(pairs).reshape(-1, 2):
        a, b = int(a), int(b)
        if a not in geom_of or b not in geom_of:
            continue
        ba, bb = int(sb[a]), int(sb[b])
        if ba == bb:
            continue
        key = (min(ba, bb), max(ba, bb))
        filtered.setdefault(key, set()).add((min(a, b), max(a, b)))
    partial = 0
    for (ba, bb), got in filtered.items():
        total = len(shapes_of.get(ba, [])) * len(shapes_of.get(bb, []))
        if len(got) == total:
            if ba >= 0 and bb >= 0 and (ba, bb) not in explicit:
                spec.add_exclude(bodyname1=Names.body(ba), bodyname2=Names.body(bb))
        else:
            partial += 1
    if partial:
        note(f"SolverMuJoCo: {partial} body pair(s) have only some of their shape pairs filtered; MuJoCo filters "
             "per body pair, so those shape pairs still collide with use_mujoco_contacts=True")  # fmt: skip


def _add_actuators(spec, model, joint_entries, qd_start, jt, note):
    import mujoco

    if not model.joint_dof_count:
        return []
    ke = decimal64(model.joint_target_ke.numpy())
    kd = decimal64(model.joint_target_kd.numpy())
    mode = model.joint_target_mode.numpy()
    effort = decimal64(model.joint_effort_limit.numpy())
    out = []
    for j, kind, names in joint_entries:
        if kind != "scalar":
            continue
        ds = int(qd_start[j])
        for k, name in enumerate(names):
            i = ds + k
            m = int(mode[i])
            if m == int(JointTargetMode.EFFORT):
                continue
            kp = float(ke[i]) if m != int(JointTargetMode.VELOCITY) else 0.0
            kv = float(kd[i])
            limited = bool(effort[i] < 1e5)
            if kp != 0.0:
                a = spec.add_actuator(name=f"p{i}", target=name, trntype=mujoco.mjtTrn.mjTRN_JOINT)
                a.set_to_position(kp=kp, kv=0.0)
                if limited:
                    a.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
                    a.forcerange = [-float(effort[i]), float(effort[i])]
                out.append((i, f"p{i}", "p"))
            if kv != 0.0:
                a = spec.add_actuator(name=f"v{i}", target=name, trntype=mujoco.mjtTrn.mjTRN_JOINT)
                a.set_to_velocity(kv=kv)
                if limited:
                    a.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
                    a.forcerange = [-float(effort[i]), float(effort[i])]
                out.append((i, f"v{i}", "v"))
    return out


def _apply_options(spec, model, overrides):
    """mjOption from the model's ``mujoco:*`` ONCE attributes, then explicit overrides."""
    import mujoco

    opt = spec.option
    vals = {}
    for name in ("integrator", "cone", "solver", "impratio", "iterations", "ls_iterations", "tolerance",
                 "ls_tolerance", "noslip_iterations", "density", "viscosity", "wind", "magnetic"):  # fmt: skip
        arr = _custom(model, name)
        if arr is not None:
            vals[name] = arr[0]
    flags = {}
    for flag in FLAGS:
        arr = _custom(model, f"flag_{flag}")
        if arr is not None:
            flags[flag] = bool(arr[0])
    vals.update({k: v for k, v in overrides.items() if v is not None})
    for name, value in vals.items():
        if name in ("wind", "magnetic"):
            setattr(opt, name, [float(x) for x in value])
        elif name in ("integrator", "cone", "solver", "iterations", "ls_iterations", "noslip_iterations"):
            setattr(opt, name, int(value))
        else:
            setattr(opt, name, float(value))
    bits = {flag: getattr(mujoco.mjtDisableBit, f"mjDSBL_{flag.upper()}") for flag in FLAGS}
    disable = 0
    for flag, on in flags.items():
        if not on:
            disable |= int(bits[flag])
    opt.disableflags = disable

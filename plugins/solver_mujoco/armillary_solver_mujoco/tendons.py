"""MuJoCo tendons as ``mujoco:tendon*`` custom frequencies, and their conversion into ``MjSpec``.

Four custom frequencies (namespace ``mujoco``), filled by the MJCF importer from ``<tendon>`` and
``<equality><tendon>`` (or by hand with :meth:`ModelBuilder.add_custom_values`):

``mujoco:tendon`` (one row per tendon)
    ``tendon_type`` (0 fixed, 1 spatial), ``tendon_world`` (references the world), ``tendon_label``,
    ``tendon_limited``, ``tendon_range``, ``tendon_stiffness`` / ``tendon_damping`` (MuJoCo's
    3-vectors: linear coefficient then the two polynomial terms), ``tendon_frictionloss``,
    ``tendon_springlength`` (``(-1, -1)``: the length at the spring reference ``joint_rest_q``),
    ``tendon_margin``, ``tendon_solref_limit`` / ``tendon_solimp_limit``,
    ``tendon_solref_friction`` / ``tendon_solimp_friction``, ``tendon_armature``,
    ``tendon_actfrclimited`` / ``tendon_actfrcrange``, and the row ranges of its path elements
    ``tendon_joint_adr`` / ``tendon_joint_num`` (fixed) and ``tendon_wrap_adr`` /
    ``tendon_wrap_num`` (spatial); an empty range has ``adr = -1``.
``mujoco:tendon_joint`` (one row per fixed-tendon joint term)
    ``tendon_joint`` (references the joint), ``tendon_joint_dof`` (local DOF of a multi-DOF D6
    joint, 0 otherwise), ``tendon_coef``: the tendon length is ``sum(coef * q)``.
``mujoco:tendon_wrap`` (one row per spatial-tendon path element)
    ``tendon_wrap_type`` (0 site, 1 geom, 2 pulley), ``tendon_wrap_shape`` (the site or geom
    shape; sites are shapes with ``ShapeFlags.SITE``), ``tendon_wrap_sidesite`` (-1: none),
    ``tendon_wrap_divisor`` (pulleys).
``mujoco:tendon_equality`` (one row per ``<equality><tendon>``)
    ``tendon_eq_tendon1`` / ``tendon_eq_tendon2`` (tendon rows; -1: none), ``tendon_eq_polycoef``,
    ``tendon_eq_solref`` / ``tendon_eq_solimp``, ``tendon_eq_active``, ``tendon_eq_label``.

Every index attribute declares what it references, so ``add_builder`` / ``replicate`` re-map them.
:class:`SolverMuJoCo` converts the tendons of world 0 (and global rows); MuJoCo names them
``t<row>`` and their equalities ``teq<row>``.
"""

from __future__ import annotations

import numpy as np
import warp as wp

TENDON = "mujoco:tendon"
TENDON_JOINT = "mujoco:tendon_joint"
TENDON_WRAP = "mujoco:tendon_wrap"
TENDON_EQUALITY = "mujoco:tendon_equality"

FIXED, SPATIAL = 0, 1
WRAP_SITE, WRAP_GEOM, WRAP_PULLEY = 0, 1, 2


def register_tendon_attributes(builder) -> None:
    """Declare the ``mujoco:tendon``, ``mujoco:tendon_joint``, ``mujoco:tendon_wrap`` and
    ``mujoco:tendon_equality`` frequencies and their attributes (idempotent)."""
    from armillary.sim.custom_attributes import AttributeFrequency as F
    from armillary.sim.custom_attributes import CustomAttribute, CustomFrequency

    from .attributes import DEFAULT_SOLIMP, DEFAULT_SOLREF, vec5

    builder.add_custom_frequency(CustomFrequency(name="tendon", namespace="mujoco",
                                                 label_attribute="mujoco:tendon_label"))  # fmt: skip
    builder.add_custom_frequency(CustomFrequency(name="tendon_joint", namespace="mujoco"))
    builder.add_custom_frequency(CustomFrequency(name="tendon_wrap", namespace="mujoco"))
    builder.add_custom_frequency(CustomFrequency(name="tendon_equality", namespace="mujoco",
                                                 label_attribute="mujoco:tendon_equality_label"))  # fmt: skip

    def add(name, freq, dtype, default, mjcf=None, references=None):
        builder.add_custom_attribute(
            CustomAttribute(name=name, frequency=freq, dtype=dtype, default=default, namespace="mujoco",
                            mjcf_attribute_name=mjcf or name, references=references)  # fmt: skip
        )

    # tendons
    add("tendon_world", TENDON, wp.int32, -1, references="world")
    add("tendon_label", TENDON, str, "", "name")
    add("tendon_type", TENDON, wp.int32, FIXED)
    add("tendon_limited", TENDON, wp.bool, False, "limited")
    add("tendon_range", TENDON, wp.vec2d, (0.0, 0.0), "range")
    add("tendon_stiffness", TENDON, wp.vec3d, (0.0, 0.0, 0.0), "stiffness")
    add("tendon_damping", TENDON, wp.vec3d, (0.0, 0.0, 0.0), "damping")
    add("tendon_frictionloss", TENDON, wp.float64, 0.0, "frictionloss")
    add("tendon_springlength", TENDON, wp.vec2d, (-1.0, -1.0), "springlength")
    add("tendon_margin", TENDON, wp.float64, 0.0, "margin")
    add("tendon_solref_limit", TENDON, wp.vec2d, DEFAULT_SOLREF, "solreflimit")
    add("tendon_solimp_limit", TENDON, vec5, DEFAULT_SOLIMP, "solimplimit")
    add("tendon_solref_friction", TENDON, wp.vec2d, DEFAULT_SOLREF, "solreffriction")
    add("tendon_solimp_friction", TENDON, vec5, DEFAULT_SOLIMP, "solimpfriction")
    add("tendon_armature", TENDON, wp.float64, 0.0, "armature")
    add("tendon_actfrclimited", TENDON, wp.bool, False, "actuatorfrclimited")
    add("tendon_actfrcrange", TENDON, wp.vec2d, (0.0, 0.0), "actuatorfrcrange")
    add("tendon_joint_adr", TENDON, wp.int32, -1, references=TENDON_JOINT)
    add("tendon_joint_num", TENDON, wp.int32, 0)
    add("tendon_wrap_adr", TENDON, wp.int32, -1, references=TENDON_WRAP)
    add("tendon_wrap_num", TENDON, wp.int32, 0)
    # fixed-tendon joint terms
    add("tendon_joint", TENDON_JOINT, wp.int32, -1, "joint", references=F.JOINT)
    add("tendon_joint_dof", TENDON_JOINT, wp.int32, 0)
    add("tendon_coef", TENDON_JOINT, wp.float64, 1.0, "coef")
    # spatial-tendon path elements
    add("tendon_wrap_type", TENDON_WRAP, wp.int32, WRAP_SITE)
    add("tendon_wrap_shape", TENDON_WRAP, wp.int32, -1, references=F.SHAPE)
    add("tendon_wrap_sidesite", TENDON_WRAP, wp.int32, -1, "sidesite", references=F.SHAPE)
    add("tendon_wrap_divisor", TENDON_WRAP, wp.float64, 1.0, "divisor")
    # tendon equality constraints
    add("tendon_eq_tendon1", TENDON_EQUALITY, wp.int32, -1, "tendon1", references=TENDON)
    add("tendon_eq_tendon2", TENDON_EQUALITY, wp.int32, -1, "tendon2", references=TENDON)
    add("tendon_eq_polycoef", TENDON_EQUALITY, vec5, (0.0, 1.0, 0.0, 0.0, 0.0), "polycoef")
    add("tendon_eq_solref", TENDON_EQUALITY, wp.vec2d, DEFAULT_SOLREF, "solref")
    add("tendon_eq_solimp", TENDON_EQUALITY, vec5, DEFAULT_SOLIMP, "solimp")
    add("tendon_eq_active", TENDON_EQUALITY, wp.bool, True, "active")
    add("tendon_equality_label", TENDON_EQUALITY, str, "", "name")


def _rows(model, key):
    counts = getattr(model, "custom_frequency_counts", None) or {}
    return int(counts.get(key, 0))


def tendon_name(row: int) -> str:
    """MuJoCo name of tendon row ``row``."""
    return f"t{row}"


def add_tendons(spec, model, joint_names: dict, note) -> None:
    """Add the model's tendons (world 0) to ``spec``; ``joint_names[j]`` lists joint ``j``'s MuJoCo
    joint names per DOF (see :class:`.convert.Names`); ``note(message)`` records a warning."""
    import mujoco

    from armillary.sim.enums import JointType

    from .convert import Names

    n = _rows(model, TENDON)
    if n == 0:
        return
    ns = model.mujoco

    def arr(name):
        return getattr(ns, name).numpy()

    world = arr("tendon_world")
    ttype = arr("tendon_type")
    labels = list(getattr(ns, "tendon_label", [""] * n))
    limited, rng = arr("tendon_limited"), arr("tendon_range")
    stiffness, damping = arr("tendon_stiffness"), arr("tendon_damping")
    frictionloss, springlength, margin = arr("tendon_frictionloss"), arr("tendon_springlength"), arr("tendon_margin")
    solref_lim, solimp_lim = arr("tendon_solref_limit"), arr("tendon_solimp_limit")
    solref_fri, solimp_fri = arr("tendon_solref_friction"), arr("tendon_solimp_friction")
    armature = arr("tendon_armature")
    actfrclimited, actfrcrange = arr("tendon_actfrclimited"), arr("tendon_actfrcrange")
    jadr, jnum = arr("tendon_joint_adr"), arr("tendon_joint_num")
    wadr, wnum = arr("tendon_wrap_adr"), arr("tendon_wrap_num")
    nj, nw = _rows(model, TENDON_JOINT), _rows(model, TENDON_WRAP)
    tj = arr("tendon_joint") if nj else np.zeros(0, np.int32)
    tj_dof = arr("tendon_joint_dof") if nj else np.zeros(0, np.int32)
    tj_coef = arr("tendon_coef") if nj else np.zeros(0)
    wtype = arr("tendon_wrap_type") if nw else np.zeros(0, np.int32)
    wshape = arr("tendon_wrap_shape") if nw else np.zeros(0, np.int32)
    wside = arr("tendon_wrap_sidesite") if nw else np.zeros(0, np.int32)
    wdiv = arr("tendon_wrap_divisor") if nw else np.zeros(0)
    jt = model.joint_type.numpy() if model.joint_count else np.zeros(0, np.int32)
    single = int(getattr(model, "world_count", 1)) <= 1
    scalar_types = (int(JointType.REVOLUTE), int(JointType.PRISMATIC), int(JointType.D6))

    converted = set()  # tendon rows added to the spec
    for t in range(n):
        if not single and int(world[t]) not in (0, -1):
            continue
        label = labels[t] or f"tendon {t}"
        kind = int(ttype[t])
        path = []
        if kind == FIXED:
            a, m = int(jadr[t]), int(jnum[t])
            if m <= 0 or a < 0 or a + m > nj:
                note(f"SolverMuJoCo: fixed tendon {t} ({label!r}) has no valid joint terms; skipped")
                continue
            for r in range(a, a + m):
                j, k, c = int(tj[r]), int(tj_dof[r]), float(tj_coef[r])
                names = joint_names.get(j)
                if j < 0 or j >= len(jt) or names is None or not 0 <= k < len(names) or int(jt[j]) not in scalar_types:
                    path = None
                    note(f"SolverMuJoCo: fixed tendon {t} ({label!r}) uses joint {j} DOF {k}, which is not a converted "
                         "hinge/slide DOF of world 0; tendon skipped")  # fmt: skip
                    break
                path.append(("joint", names[k], c))
        elif kind == SPATIAL:
            a, m = int(wadr[t]), int(wnum[t])
            if m <= 0 or a < 0 or a + m > nw:
                note(f"SolverMuJoCo: spatial tendon {t} ({label!r}) has no valid path; skipped")
                continue
            for r in range(a, a + m):
                wt, s = int(wtype[r]), int(wshape[r])
                if wt == WRAP_PULLEY:
                    path.append(("pulley", float(wdiv[r])))
                    continue
                name = Names.site(s) if wt == WRAP_SITE else Names.geom(s)
                found = spec.site(name) if wt == WRAP_SITE else spec.geom(name)
                if s < 0 or found is None:
                    what = "site" if wt == WRAP_SITE else "geom"
                    note(f"SolverMuJoCo: spatial tendon {t} ({label!r}) wraps {what} shape {s}, which was not "
                         f"converted to a MuJoCo {what}; tendon skipped")  # fmt: skip
                    path = None
                    break
                if wt == WRAP_SITE:
                    path.append(("site", name))
                else:
                    ss = int(wside[r])
                    side = ""
                    if ss >= 0:
                        side = Names.site(ss)
                        if spec.site(side) is None:
                            note(f"SolverMuJoCo: spatial tendon {t} ({label!r}) sidesite shape {ss} was not converted; "
                                 "wrapping without it")  # fmt: skip
                            side = ""
                    path.append(("geom", name, side))
        else:
            note(f"SolverMuJoCo: tendon {t} ({label!r}) has unknown type {kind}; skipped")
            continue
        if path is None:
            continue
        tendon = spec.add_tendon(name=tendon_name(t))
        for item in path:
            if item[0] == "joint":
                tendon.wrap_joint(item[1], item[2])
            elif item[0] == "site":
                tendon.wrap_site(item[1])
            elif item[0] == "geom":
                tendon.wrap_geom(item[1], item[2])
            else:
                tendon.wrap_pulley(item[1])
        tendon.limited = mujoco.mjtLimited.mjLIMITED_TRUE if bool(limited[t]) else mujoco.mjtLimited.mjLIMITED_FALSE
        tendon.range = [float(v) for v in rng[t]]
        tendon.stiffness = [float(v) for v in stiffness[t]]
        tendon.damping = [float(v) for v in damping[t]]
        tendon.frictionloss = float(frictionloss[t])
        # (-1, -1): MuJoCo measures it at qpos_spring, i.e. at the converted joints' springref = joint_rest_q
        tendon.springlength = [float(v) for v in springlength[t]]
        tendon.margin = float(margin[t])
        tendon.solref_limit = [float(v) for v in solref_lim[t]]
        tendon.solimp_limit = [float(v) for v in solimp_lim[t]]
        tendon.solref_friction = [float(v) for v in solref_fri[t]]
        tendon.solimp_friction = [float(v) for v in solimp_fri[t]]
        tendon.armature = float(armature[t])
        tendon.actfrclimited = (mujoco.mjtLimited.mjLIMITED_TRUE if bool(actfrclimited[t])
                                else mujoco.mjtLimited.mjLIMITED_FALSE)  # fmt: skip
        tendon.actfrcrange = [float(v) for v in actfrcrange[t]]
        converted.add(t)

    _add_tendon_equalities(spec, model, joint_names, converted, note)


def _add_tendon_equalities(spec, model, joint_names, converted: set, note) -> None:
    import mujoco

    ne = _rows(model, TENDON_EQUALITY)
    if ne == 0:
        return
    ns = model.mujoco
    t1s, t2s = ns.tendon_eq_tendon1.numpy(), ns.tendon_eq_tendon2.numpy()
    poly = ns.tendon_eq_polycoef.numpy()
    solref, solimp = ns.tendon_eq_solref.numpy(), ns.tendon_eq_solimp.numpy()
    active = ns.tendon_eq_active.numpy()
    world = ns.tendon_world.numpy()
    single = int(getattr(model, "world_count", 1)) <= 1
    for e in range(ne):
        t1, t2 = int(t1s[e]), int(t2s[e])
        if t1 < 0:
            continue
        if not single and (t1 >= len(world) or int(world[t1]) not in (0, -1)):
            continue  # another world's replica
        if t1 not in converted or (t2 >= 0 and t2 not in converted):
            missing = t1 if t1 not in converted else t2
            note(f"SolverMuJoCo: tendon equality {e} refers to tendon {missing}, which was not converted; "
                 "equality skipped")  # fmt: skip
            continue
        # MuJoCo measures tendon lengths from their value at its qpos0, which the converter makes the
        # model's initial joint_q (hinge/slide ref), i.e. an imported MJCF's own reference: no re-centering
        c = [float(v) for v in poly[e]]
        eq = spec.add_equality(type=mujoco.mjtEq.mjEQ_TENDON, name1=tendon_name(t1),
                               name2=tendon_name(t2) if t2 >= 0 else "",
                               objtype=mujoco.mjtObj.mjOBJ_TENDON)  # fmt: skip
        eq.name = f"teq{e}"
        eq.data[:5] = c
        eq.solref = [float(v) for v in solref[e]]
        eq.solimp = [float(v) for v in solimp[e]]
        eq.active = bool(active[e])

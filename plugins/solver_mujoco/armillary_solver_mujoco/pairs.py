"""MuJoCo explicit contact pairs and body-pair exclusions as ``mujoco:pair`` / ``mujoco:exclude``
custom frequencies, and their conversion into ``MjSpec``.

Two custom frequencies (namespace ``mujoco``), filled by the MJCF importer from ``<contact><pair>``
and ``<contact><exclude>`` (or by hand with :meth:`ModelBuilder.add_custom_values`):

``mujoco:pair`` (one row per ``<pair>``)
    ``pair_geom1`` / ``pair_geom2`` (reference shapes), ``pair_condim``, ``pair_friction`` (MuJoCo's
    5 coefficients: tangent 1, tangent 2, torsional, rolling 1, rolling 2), ``pair_solref``,
    ``pair_solreffriction``, ``pair_solimp``, ``pair_margin``, ``pair_gap``, ``pair_adhesion``,
    ``pair_label``.
``mujoco:exclude`` (one row per ``<exclude>``)
    ``exclude_body1`` / ``exclude_body2`` (reference bodies; -1 is the world), ``exclude_label``.

MuJoCo never mixes an explicit pair's parameters from its geoms: an attribute a ``<pair>`` does not
author comes from its default class, ultimately from MuJoCo's built-in pair defaults, which are
the defaults declared here (``condim`` 3, ``friction`` ``1 1 0.005 0.0001 0.0001``, ``solref``
``0.02 1``, ``solreffriction`` ``0 0`` (use ``solref``), ``solimp`` ``0.9 0.95 0.001 0.5 2``,
``margin`` / ``gap`` / ``adhesion`` 0). A row built in code without values therefore converts like
a bare ``<pair geom1=.. geom2=..>``.

Every index attribute declares what it references, so ``add_builder`` / ``replicate`` re-map them.
:class:`SolverMuJoCo` converts the rows of world 0 and global rows (one MuJoCo model holds one
world); MuJoCo names them ``pair<row>`` and ``exclude<row>``. Explicit pairs collide regardless of
contype/conaffinity and of excludes, exactly as in MuJoCo.
"""

from __future__ import annotations

import numpy as np
import warp as wp

PAIR = "mujoco:pair"
EXCLUDE = "mujoco:exclude"

#: MuJoCo's built-in ``<pair>`` defaults (mjs_defaultPair)
PAIR_CONDIM = 3
PAIR_FRICTION = (1.0, 1.0, 0.005, 0.0001, 0.0001)
PAIR_SOLREFFRICTION = (0.0, 0.0)
CONDIMS = (1, 3, 4, 6)


def register_pair_attributes(builder) -> None:
    """Declare the ``mujoco:pair`` and ``mujoco:exclude`` frequencies and their attributes (idempotent)."""
    from armillary.sim.custom_attributes import AttributeFrequency as F
    from armillary.sim.custom_attributes import CustomAttribute, CustomFrequency

    from .attributes import DEFAULT_SOLIMP, DEFAULT_SOLREF, vec5

    builder.add_custom_frequency(CustomFrequency(name="pair", namespace="mujoco", label_attribute="mujoco:pair_label"))
    builder.add_custom_frequency(CustomFrequency(name="exclude", namespace="mujoco",
                                                 label_attribute="mujoco:exclude_label"))  # fmt: skip

    def add(name, freq, dtype, default, mjcf=None, references=None):
        builder.add_custom_attribute(
            CustomAttribute(name=name, frequency=freq, dtype=dtype, default=default, namespace="mujoco",
                            mjcf_attribute_name=mjcf or name, references=references)  # fmt: skip
        )

    add("pair_geom1", PAIR, wp.int32, -1, "geom1", references=F.SHAPE)
    add("pair_geom2", PAIR, wp.int32, -1, "geom2", references=F.SHAPE)
    add("pair_condim", PAIR, wp.int32, PAIR_CONDIM, "condim")
    add("pair_friction", PAIR, vec5, PAIR_FRICTION, "friction")
    add("pair_solref", PAIR, wp.vec2d, DEFAULT_SOLREF, "solref")
    add("pair_solreffriction", PAIR, wp.vec2d, PAIR_SOLREFFRICTION, "solreffriction")
    add("pair_solimp", PAIR, vec5, DEFAULT_SOLIMP, "solimp")
    add("pair_margin", PAIR, wp.float64, 0.0, "margin")
    add("pair_gap", PAIR, wp.float64, 0.0, "gap")
    add("pair_adhesion", PAIR, wp.float64, 0.0, "adhesion")
    add("pair_label", PAIR, str, "", "name")
    add("exclude_body1", EXCLUDE, wp.int32, -1, "body1", references=F.BODY)
    add("exclude_body2", EXCLUDE, wp.int32, -1, "body2", references=F.BODY)
    add("exclude_label", EXCLUDE, str, "", "name")


def _rows(model, key):
    counts = getattr(model, "custom_frequency_counts", None) or {}
    return int(counts.get(key, 0))


def pair_name(row: int) -> str:
    """MuJoCo name of pair row ``row``."""
    return f"pair{row}"


def exclude_name(row: int) -> str:
    """MuJoCo name of exclude row ``row``."""
    return f"exclude{row}"


def _world_of(world_arr, idx):
    return int(world_arr[idx]) if 0 <= idx < len(world_arr) else None


def _exclude_rows(model):
    """``[(row, body1, body2)]`` of the ``mujoco:exclude`` rows (empty when none)."""
    n = _rows(model, EXCLUDE)
    ns = getattr(model, "mujoco", None)
    if n == 0 or ns is None or not hasattr(ns, "exclude_body1"):
        return []
    b1, b2 = ns.exclude_body1.numpy(), ns.exclude_body2.numpy()
    return [(r, int(b1[r]), int(b2[r])) for r in range(n)]


def explicit_exclude_body_pairs(model) -> set:
    """Unordered body pairs ``(min, max)`` named by ``mujoco:exclude`` rows (-1: the world); the
    converter skips the excludes it would derive from filter pairs for these."""
    return {(min(a, b), max(a, b)) for _, a, b in _exclude_rows(model)}


def add_pairs(spec, model, geom_names: dict, body_names: dict, note) -> None:
    """Add the model's explicit contact pairs and excludes (world 0 and global rows) to ``spec``.

    ``geom_names[s]`` is the MuJoCo geom name of converted shape ``s``, ``body_names[b]`` the
    MuJoCo body name of converted body ``b`` (the world, -1, is MuJoCo's ``world``); ``note(message)``
    records a warning.
    """
    _add_pair_rows(spec, model, geom_names, note)
    _add_exclude_rows(spec, model, body_names, note)


def _add_pair_rows(spec, model, geom_names, note) -> None:
    n = _rows(model, PAIR)
    ns = getattr(model, "mujoco", None)
    if n == 0 or ns is None or not hasattr(ns, "pair_geom1"):
        return

    def arr(name):
        return getattr(ns, name).numpy()

    g1s, g2s = arr("pair_geom1"), arr("pair_geom2")
    condim, friction = arr("pair_condim"), arr("pair_friction")
    solref, solreffriction, solimp = arr("pair_solref"), arr("pair_solreffriction"), arr("pair_solimp")
    margin, gap, adhesion = arr("pair_margin"), arr("pair_gap"), arr("pair_adhesion")
    labels = list(getattr(ns, "pair_label", [""] * n))
    single = int(getattr(model, "world_count", 1) or 1) <= 1
    shape_world = model.shape_world.numpy() if model.shape_count else np.zeros(0, np.int32)
    global_done = set()
    for r in range(n):
        g1, g2 = int(g1s[r]), int(g2s[r])
        label = labels[r] or f"pair {r}"
        w1, w2 = _world_of(shape_world, g1), _world_of(shape_world, g2)
        if w1 is None or w2 is None:
            note(f"SolverMuJoCo: contact pair {r} ({label!r}) refers to shape {g1 if w1 is None else g2}, which does "
                 "not exist; pair skipped")  # fmt: skip
            continue
        if not single:
            if any(w not in (0, -1) for w in (w1, w2)):
                continue  # another world's replica
            if w1 == -1 and w2 == -1:  # a pair of global shapes: replicated rows convert once
                if (g1, g2) in global_done:
                    continue
                global_done.add((g1, g2))
        missing = [g for g in (g1, g2) if g not in geom_names]
        if missing:
            note(f"SolverMuJoCo: contact pair {r} ({label!r}) uses shape {missing[0]}, which was not converted to a "
                 "MuJoCo geom (a site, a visual-only shape or an unsupported type); pair skipped")  # fmt: skip
            continue
        cd = int(condim[r])
        if cd not in CONDIMS:
            note(f"SolverMuJoCo: contact pair {r} ({label!r}) has condim {cd}; MuJoCo allows 1, 3, 4 or 6; "
                 "pair skipped")  # fmt: skip
            continue
        pair = spec.add_pair(geomname1=geom_names[g1], geomname2=geom_names[g2])
        pair.name = pair_name(r)
        pair.condim = cd
        pair.friction = [float(v) for v in friction[r]]
        pair.solref = [float(v) for v in solref[r]]
        pair.solreffriction = [float(v) for v in solreffriction[r]]
        pair.solimp = [float(v) for v in solimp[r]]
        pair.margin = float(margin[r])
        pair.gap = float(gap[r])
        if hasattr(pair, "adhesion"):
            pair.adhesion = float(adhesion[r])
        elif float(adhesion[r]) != 0.0:
            note(f"SolverMuJoCo: contact pair {r} ({label!r}) adhesion needs a newer MuJoCo; dropped")


def _add_exclude_rows(spec, model, body_names, note) -> None:
    rows = _exclude_rows(model)
    if not rows:
        return
    single = int(getattr(model, "world_count", 1) or 1) <= 1
    body_world = model.body_world.numpy() if model.body_count else np.zeros(0, np.int32)
    labels = list(getattr(model.mujoco, "exclude_label", [""] * len(rows)))
    done = set()
    for r, b1, b2 in rows:
        label = labels[r] or f"exclude {r}"
        if b1 < -1 or b2 < -1 or b1 >= len(body_world) or b2 >= len(body_world):
            bad = b1 if not -1 <= b1 < len(body_world) else b2
            note(f"SolverMuJoCo: exclude {r} ({label!r}) refers to body {bad}, which does not exist; exclude skipped")
            continue
        if b1 == b2:
            note(f"SolverMuJoCo: exclude {r} ({label!r}) names body {b1} twice; exclude skipped")
            continue
        if not single and any(b >= 0 and int(body_world[b]) not in (0, -1) for b in (b1, b2)):
            continue  # another world's replica
        key = (min(b1, b2), max(b1, b2))
        if key in done:
            continue  # duplicates add nothing
        names = []
        for b in (b1, b2):
            names.append("world" if b < 0 else body_names.get(b))
        if None in names:
            note(f"SolverMuJoCo: exclude {r} ({label!r}) refers to a body that was not converted; exclude skipped")
            continue
        done.add(key)
        ex = spec.add_exclude(bodyname1=names[0], bodyname2=names[1])
        ex.name = exclude_name(r)

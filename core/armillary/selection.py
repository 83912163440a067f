"""Selection of articulations for batched access: :class:`ArticulationView`.

An :class:`ArticulationView` matches articulation labels with a pattern and exposes the
selected joints, DOFs, coordinates, links, shapes and articulation-owned custom-frequency
rows of every match as arrays of shape ``(world_count, count_per_world, values...)``.

All index bookkeeping happens once, at construction (on the host, with numpy); the device
then holds one flat ``int32`` table of absolute model rows per frequency layout. Getters
return a strided view of the source array when the selected rows are regularly spaced and
contiguous within each match, and otherwise gather a copy with a Warp kernel; setters
scatter with a Warp kernel and touch only the selected (and masked-in) rows. Copies move
raw words, so values round-trip bit for bit.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Any

import numpy as np
import warp as wp

from .sim.custom_attributes import AttributeFrequency
from .sim.enums import JointType
from .sim.exceptions import warn_deprecated

__all__ = ["ArticulationView"]

AF = AttributeFrequency

# ------------------------------------------------------------------------------------ kernels


@wp.kernel
def _gather_words(
    src: wp.array(dtype=Any),
    idx: wp.array(dtype=wp.int32),
    scale: int,
    k: int,
    out: wp.array(dtype=Any),
):
    tid = wp.tid()
    e = tid // k
    j = tid - e * k
    out[tid] = src[idx[e] * scale + j]


@wp.kernel
def _scatter_words(
    vals: wp.array(dtype=Any),
    idx: wp.array(dtype=wp.int32),
    scale: int,
    k: int,
    per_art: int,
    per_world: int,
    mask_mode: int,
    world_mask: wp.array(dtype=wp.bool),
    art_mask: wp.array(dtype=wp.bool),
    dst: wp.array(dtype=Any),
):
    tid = wp.tid()
    e = tid // k
    j = tid - e * k
    if mask_mode == 1:
        if not world_mask[e // per_world]:
            return
    elif mask_mode == 2:
        if not art_mask[e // per_art]:
            return
    dst[idx[e] * scale + j] = vals[tid]


@wp.kernel
def _model_articulation_mask(
    ids: wp.array(dtype=wp.int32),
    per_world: int,
    mask_mode: int,
    world_mask: wp.array(dtype=wp.bool),
    art_mask: wp.array(dtype=wp.bool),
    out: wp.array(dtype=wp.bool),
):
    tid = wp.tid()
    sel = True
    if mask_mode == 1:
        sel = world_mask[tid // per_world]
    elif mask_mode == 2:
        sel = art_mask[tid]
    out[ids[tid]] = sel


# ------------------------------------------------------------------------ attribute tables

_BODY_ATTRS = {
    "body_q", "body_qd", "body_f", "body_com", "body_mass", "body_inv_mass", "body_inertia", "body_inv_inertia",
    "body_world", "body_flags", "body_colors", "body_q_prev", "body_qdd", "body_parent_f",
}  # fmt: skip
_JOINT_ATTRS = {
    "joint_type", "joint_parent", "joint_child", "joint_X_p", "joint_X_c", "joint_world", "joint_articulation",
    "joint_enabled", "joint_ancestor", "joint_mimic_joint", "joint_mimic_coeffs", "joint_dof_dim", "joint_q_start",
    "joint_qd_start", "joint_target_q_start",
}  # fmt: skip
_COORD_ATTRS = {"joint_q", "joint_target_q", "joint_rest_q"}
_DOF_ATTRS = {
    "joint_qd", "joint_f", "joint_act", "joint_axis", "joint_limit_lower", "joint_limit_upper", "joint_limit_ke",
    "joint_limit_kd", "joint_target_qd", "joint_target_ke", "joint_target_kd", "joint_armature", "joint_friction",
    "joint_effort_limit", "joint_velocity_limit", "joint_stiffness", "joint_damping", "joint_target_mode",
    "joint_qdd", "joint_tau",
}  # fmt: skip

_FLOATING_ROOTS = (int(JointType.FREE), int(JointType.DISTANCE))


def _builtin_frequency(name: str):
    if name in _BODY_ATTRS:
        return AF.BODY
    if name in _JOINT_ATTRS:
        return AF.JOINT
    if name in _COORD_ATTRS:
        return AF.JOINT_COORD
    if name in _DOF_ATTRS:
        return AF.JOINT_DOF
    if name.startswith("shape_"):
        return AF.SHAPE
    if name.startswith("articulation_"):
        return AF.ARTICULATION
    if name.startswith("particle_"):
        return AF.PARTICLE
    return None


def _tail(label: str) -> str:
    """Final path component of a label (``"/World/robot/joint_1"`` -> ``"joint_1"``)."""
    return label.rstrip("/").rsplit("/", 1)[-1] if label else label


def _glob(labels: list[str], keys: list[str], pattern: str, full: bool) -> np.ndarray:
    """Glob match; a full-label pattern without ``/`` also matches a path label's final component.

    So ``"robot*"`` selects the articulation ``"/robot"`` a USD import labels by its prim path
    (so ``add_usd`` followed by a ``pattern="robot*"`` selection finds the robot).
    """
    hit = np.array([fnmatch.fnmatchcase(k, pattern) for k in keys], dtype=bool)
    if full and "/" not in pattern:
        hit |= np.array(["/" in k and fnmatch.fnmatchcase(_tail(k), pattern) for k in labels], dtype=bool)
    return hit


def _match_labels(labels: list[str], pattern, what: str, full: bool) -> np.ndarray:
    """Boolean match of ``labels`` against a glob, list of globs, compiled regex or list of indices."""
    n = len(labels)
    keys = labels if full else [_tail(s) for s in labels]
    if isinstance(pattern, re.Pattern):
        return np.array([pattern.fullmatch(k) is not None for k in keys], dtype=bool)
    if isinstance(pattern, str):
        return _glob(labels, keys, pattern, full)
    items = list(pattern)
    if items and all(isinstance(p, (int, np.integer)) and not isinstance(p, bool) for p in items):
        idx = np.asarray(items, dtype=np.int64)
        if len(idx) > 1 and np.any(np.diff(idx) <= 0):
            raise ValueError("Selection indices must be unique and in ascending order")
        bad = idx[(idx < 0) | (idx >= n)]
        if len(bad):
            raise IndexError(f"{what} index {int(bad[0])} is out of range [0, {n})")
        out = np.zeros(n, dtype=bool)
        out[idx] = True
        return out
    out = np.zeros(n, dtype=bool)
    for p in items:
        if isinstance(p, re.Pattern):
            out |= np.array([p.fullmatch(k) is not None for k in keys], dtype=bool)
        elif isinstance(p, str):
            out |= _glob(labels, keys, p, full)
        else:
            raise TypeError(
                f"{what} patterns must be strings, compiled regular expressions or integer indices, got {p!r}"
            )
    return out


def _expand_ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenation of ``range(s, s + c)`` for every pair (vectorized)."""
    starts = np.asarray(starts, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum()) if len(counts) else 0
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.cumsum(counts) - counts
    return np.repeat(starts - offsets, counts) + np.arange(total, dtype=np.int64)


def _word_dtype(*nbytes: int):
    return (wp.int32, 4) if all(n % 4 == 0 for n in nbytes) else (wp.uint8, 1)


def _reinterpret(arr: wp.array, word, word_bytes: int) -> wp.array:
    nbytes = arr.size * wp.types.type_size_in_bytes(arr.dtype)
    return wp.array(ptr=arr.ptr, dtype=word, shape=(nbytes // word_bytes,), device=arr.device, copy=False)


class _Layout:
    """Selected model rows of one frequency: ``indices`` ``(W, C, V)`` absolute rows, or unavailable."""

    def __init__(self, name: str, indices: np.ndarray | None, reason: str | None, device, owners=None):
        self.name = name
        self.reason = reason
        self.owners = owners  # local owner (joint / link position) of each value, or None
        self.indices = indices
        self.available = reason is None
        self.regular = False
        self.explicit = False
        self.contiguous = None
        self.local_contiguous = False
        self.base = self.sw = self.sc = 0
        if not self.available:
            self.count = None
            self.device_indices = None
            return
        W, C, V = indices.shape
        self.count = V
        flat = indices.reshape(-1)
        self.device_indices = wp.array(flat.astype(np.int32), dtype=wp.int32, device=device)
        if flat.size == 0:
            self.regular = True
            self.local_contiguous = True
            self.contiguous = True
            return
        local = indices[0, 0] - indices[0, 0, 0]
        self.local_contiguous = bool(np.array_equal(local, np.arange(V)))
        base = int(indices[0, 0, 0])
        sc = int(indices[0, 1, 0] - base) if C > 1 else 0
        sw = int(indices[1, 0, 0] - base) if W > 1 else 0
        expected = base + local[None, None, :] + sw * np.arange(W)[:, None, None] + sc * np.arange(C)[None, :, None]
        self.regular = bool(np.array_equal(expected, indices)) and sw >= 0 and sc >= 0
        self.explicit = not self.regular
        self.base, self.sw, self.sc = base, sw, sc
        self.contiguous = bool(np.array_equal(flat, np.arange(base, base + flat.size)))

    @property
    def shape(self):
        return self.indices.shape


# --------------------------------------------------------------------------------------- view


class ArticulationView:
    """Batched access to the joints, DOFs, links and shapes of selected articulations.

    Matches articulation labels against ``pattern`` (glob, list of globs, compiled regular
    expression with full matching, or ascending list of articulation indices; a glob without
    ``/`` also matches the final component of a path label such as ``"/World/robot"``, which
    the reference engine does not) and lays out
    per-frequency data as ``(world_count, count_per_world, values...)``.

    Joint and link filters (``include_joints``, ``exclude_joints``, ``include_links``,
    ``exclude_links``) match the final path component of each label in the first match (the
    template) or take template-local integer positions; the chosen positions are selected in
    every match. ``include_joint_types`` / ``exclude_joint_types`` filter joints by
    :class:`~armillary.JointType`. Link filters keep every shape attached to a selected link.
    ``include_loop_closing_joints=True`` appends to each match's joints its loop-closing joints
    (joints outside every articulation whose two bodies belong to that articulation's tree, see
    the Loop closure section), in model order, so their DOFs and coordinates become addressable.

    With ``homogeneous=True`` (default) construction raises :class:`ValueError` unless every
    world holds the same number of matches, every frequency has one layout for every match, and
    rows repeat with a fixed stride within and between worlds (shapes may instead be addressed
    through explicit model indices). With ``homogeneous=False`` worlds without matches are left
    out (``is_sparse``, ``world_ids``), irregular spacing is addressed through explicit model
    indices (``uses_explicit_model_indices``), and a frequency whose selected count or relative
    layout differs between matches is unavailable: its count and names are ``None`` (counts
    only when the counts differ) and reads and writes raise :class:`AttributeError`.

    Masks (``mask=``) are Boolean, either per world ``(world_count,)`` or per articulation
    ``(world_count, count_per_world)``, as Warp arrays on the view's device, numpy arrays or
    lists. Getters may return a copy (gaps, explicit indices); write back with the setters.
    """

    def __init__(
        self,
        model,
        pattern,
        *,
        include_joints=None,
        exclude_joints=None,
        include_links=None,
        exclude_links=None,
        include_joint_types: list[int] | None = None,
        exclude_joint_types: list[int] | None = None,
        include_loop_closing_joints: bool = False,
        homogeneous: bool = True,
        verbose: bool | None = None,
        allow_partial_layouts: bool | None = None,
    ):
        if allow_partial_layouts is not None:
            warn_deprecated("`allow_partial_layouts` is deprecated. Use `homogeneous` instead.")
            if not allow_partial_layouts and not homogeneous:
                raise ValueError("`homogeneous=False` implies `allow_partial_layouts=True`.")
            homogeneous = not allow_partial_layouts
        self.model = model
        self.device = model.device
        self.homogeneous = bool(homogeneous)
        self.include_loop_closing_joints = bool(include_loop_closing_joints)
        self._pattern = pattern
        self._build(
            pattern,
            include_joints,
            exclude_joints,
            include_links,
            exclude_links,
            include_joint_types,
            exclude_joint_types,
        )
        if verbose:
            print(self._summary())

    # ---------------------------------------------------------------------------- construction
    def _build(self, pattern, include_joints, exclude_joints, include_links, exclude_links, inc_types, exc_types):
        model = self.model
        dev = self.device
        na = int(model.articulation_count)
        labels = list(model.articulation_label)
        matched = _match_labels(labels, pattern, "Articulation", full=True) if na else np.zeros(0, dtype=bool)
        ids = np.nonzero(matched)[0]
        if len(ids) == 0:
            raise KeyError(f"No articulations matching pattern '{pattern}'")

        a_start = model.articulation_start.numpy()[:na].astype(np.int64)
        a_end = model.articulation_end.numpy()[:na].astype(np.int64)
        a_world = model.articulation_world.numpy()[:na].astype(np.int64)

        # ---- worlds
        sel_worlds = a_world[ids]
        worlds, per_world = np.unique(sel_worlds, return_counts=True)  # model order (-1 first)
        if np.any(per_world != per_world[0]):
            raise ValueError("Varying articulation counts per selected world are not supported")
        W, C = len(worlds), int(per_world[0])
        all_worlds = np.arange(int(model.world_count))
        covers = (len(worlds) == 1 and worlds[0] == -1) or np.array_equal(worlds, all_worlds)
        if self.homogeneous and not covers:
            raise ValueError(f"Articulation pattern '{pattern}' does not match articulations in every world")
        self.is_sparse = bool(not covers)
        order = np.argsort(sel_worlds, kind="stable")
        art = ids[order].reshape(W, C)  # ascending within each world
        self._art = art
        M = W * C
        flat_art = art.reshape(-1)

        self.count = int(M)
        self.world_count = int(W)
        self.count_per_world = int(C)
        self.world_ids = wp.array(worlds.astype(np.int32), dtype=wp.int32, device=dev)
        self.articulation_ids = wp.array(art.astype(np.int32), dtype=wp.int32, device=dev)
        self._articulation_ids_flat = wp.array(flat_art.astype(np.int32), dtype=wp.int32, device=dev)
        amask = np.zeros(na, dtype=bool)
        amask[ids] = True
        self.articulation_mask = wp.array(amask, dtype=wp.bool, device=dev)
        self.full_mask = wp.array(np.ones(W, dtype=bool), dtype=wp.bool, device=dev)
        self._dummy_mask = wp.zeros(1, dtype=wp.bool, device=dev)

        # ---- model topology (host)
        nj = int(model.joint_count)
        jtype = model.joint_type.numpy().astype(np.int64) if nj else np.zeros(0, np.int64)
        jchild = model.joint_child.numpy().astype(np.int64) if nj else np.zeros(0, np.int64)
        q_start = model.joint_q_start.numpy().astype(np.int64)
        qd_start = model.joint_qd_start.numpy().astype(np.int64)
        jlabels = list(model.joint_label)
        blabels = list(model.body_label)
        slabels = list(model.shape_label)
        ns = int(model.shape_count)
        shape_body = model.shape_body.numpy().astype(np.int64) if ns else np.zeros(0, np.int64)
        s_order = np.argsort(shape_body, kind="stable")
        s_sorted = shape_body[s_order]

        def shapes_of(body: int) -> np.ndarray:
            lo, hi = np.searchsorted(s_sorted, body, "left"), np.searchsorted(s_sorted, body, "right")
            return s_order[lo:hi]

        def where(m: int) -> str:
            return f"(first at world {m // C}, articulation {m % C})"

        def layout_from_rows(name, rows: list[np.ndarray], rel: list[np.ndarray] | None, owners=None):
            counts = np.array([len(r) for r in rows])
            bad = np.nonzero(counts != counts[0])[0]
            if len(bad):
                return _Layout(name, None, f"selected count differs between articulations {where(int(bad[0]))}", dev)
            if rel is not None:
                for m in range(1, M):
                    if not np.array_equal(rel[m], rel[0]):
                        return _Layout(
                            name, None, f"relative layout differs between articulations {where(m)}", dev
                        )
            if owners is not None:
                for m in range(1, M):
                    if not np.array_equal(owners[m], owners[0]):
                        return _Layout(name, None, f"ownership differs between articulations {where(m)}", dev)
            idx = np.stack(rows).reshape(W, C, int(counts[0])) if M else np.zeros((W, C, 0), np.int64)
            return _Layout(name, idx, None, dev, owners=None if owners is None else owners[0])

        # ---- joints of each articulation: its tree joints, then (optionally) its loop-closing joints
        loops_of: dict[int, np.ndarray] = {}
        if self.include_loop_closing_joints and nj:
            jart = model.joint_articulation.numpy().astype(np.int64)
            jparent = model.joint_parent.numpy().astype(np.int64)
            body_art = np.full(int(model.body_count), -1, dtype=np.int64)
            tree = np.nonzero(jart >= 0)[0]
            body_art[jchild[tree]] = jart[tree]
            for j in np.nonzero(jart < 0)[0]:
                a_child = body_art[jchild[j]]
                a_parent = body_art[jparent[j]] if jparent[j] >= 0 else a_child
                if a_child >= 0 and a_child == a_parent:  # both ends reachable in one articulation's tree
                    loops_of.setdefault(int(a_child), []).append(int(j))
            loops_of = {a: np.asarray(v, dtype=np.int64) for a, v in loops_of.items()}
        no_loops = np.zeros(0, dtype=np.int64)

        def joints_of(a: int) -> np.ndarray:
            return np.concatenate([np.arange(a_start[a], a_end[a]), loops_of.get(int(a), no_loops)])

        # ---- joints (template positions)
        t = int(flat_art[0])
        t_joints = joints_of(t)
        t_names = [_tail(jlabels[j]) for j in t_joints]
        jfilter = any(x is not None for x in (include_joints, exclude_joints, inc_types, exc_types))
        jsel = np.ones(len(t_joints), dtype=bool)
        if include_joints is not None:
            jsel &= _match_labels(t_names, include_joints, "Joint", full=False)
        if exclude_joints is not None:
            jsel &= ~_match_labels(t_names, exclude_joints, "Joint", full=False)
        if inc_types is not None:
            jsel &= np.isin(jtype[t_joints], np.asarray([int(x) for x in inc_types], dtype=np.int64))
        if exc_types is not None:
            jsel &= ~np.isin(jtype[t_joints], np.asarray([int(x) for x in exc_types], dtype=np.int64))
        jpos = np.nonzero(jsel)[0]
        joint_rows = []
        joint_reason = None
        joint_types = []
        for m, a in enumerate(flat_art):
            members = joints_of(a)
            if jfilter:
                if len(jpos) and jpos[-1] >= len(members):
                    joint_reason = f"selected positions exceed the joint count of an articulation {where(m)}"
                    break
                joint_rows.append(members[jpos])
            else:
                joint_rows.append(members)
            joint_types.append(jtype[joint_rows[-1]])
        if joint_reason is not None:
            jl = _Layout("JOINT", None, joint_reason, dev)
        else:
            jl = layout_from_rows("JOINT", joint_rows, joint_types)
        layouts = {AF.JOINT: jl}

        # ---- DOFs / coordinates of the selected joints
        for freq, starts in ((AF.JOINT_DOF, qd_start), (AF.JOINT_COORD, q_start)):
            if not jl.available:
                layouts[freq] = _Layout(freq.name, None, jl.reason, dev)
                continue
            rows, rel, own = [], [], []
            for r, a in zip(joint_rows, flat_art):
                cnt = starts[r + 1] - starts[r]
                rr = _expand_ranges(starts[r], cnt)
                rows.append(rr)
                rel.append(rr - starts[a_start[a]])
                own.append(np.repeat(np.arange(len(r)), cnt))
            layouts[freq] = layout_from_rows(freq.name, rows, rel, own)

        # ---- links (child bodies of all joints of each articulation, template positions)
        t_links = jchild[t_joints]
        l_names = [_tail(blabels[b]) for b in t_links]
        lfilter = include_links is not None or exclude_links is not None
        lsel = np.ones(len(t_links), dtype=bool)
        if include_links is not None:
            lsel &= _match_labels(l_names, include_links, "Link", full=False)
        if exclude_links is not None:
            lsel &= ~_match_labels(l_names, exclude_links, "Link", full=False)
        lpos = np.nonzero(lsel)[0]
        link_rows, link_reason = [], None
        for m, a in enumerate(flat_art):
            bodies = jchild[a_start[a] : a_end[a]]
            if lfilter:
                if len(lpos) and lpos[-1] >= len(bodies):
                    link_reason = f"selected positions exceed the link count of an articulation {where(m)}"
                    break
                link_rows.append(bodies[lpos])
            else:
                link_rows.append(bodies)
        if link_reason is not None:
            ll = _Layout("BODY", None, link_reason, dev)
        else:
            ll = layout_from_rows(
                "BODY", link_rows, [r - jchild[a_start[a]] for r, a in zip(link_rows, flat_art)] if M else None
            )
        layouts[AF.BODY] = ll

        # ---- shapes of the selected links (may be interleaved: explicit indices allowed)
        if link_reason is None:
            srows, sown = [], []
            for r in link_rows:
                per = [shapes_of(int(b)) for b in r]
                srows.append(np.concatenate(per) if per else np.zeros(0, np.int64))
                sown.append(np.repeat(np.arange(len(r)), [len(p) for p in per]) if per else np.zeros(0, np.int64))
            sl = layout_from_rows("SHAPE", srows, None, sown)
        else:
            sl = _Layout("SHAPE", None, link_reason, dev)
        layouts[AF.SHAPE] = sl

        # ---- articulation-owned custom frequencies
        self.custom_frequency_counts: dict[str, int | None] = {}
        self.custom_frequency_labels: dict[str, list[str] | None] = {}
        owners_map = getattr(model, "custom_frequency_articulation", {}) or {}
        label_attrs = getattr(model, "custom_frequency_label_attributes", {}) or {}
        for key, owner_arr in owners_map.items():
            owner = owner_arr.numpy().astype(np.int64)
            rows = [np.nonzero(owner == a)[0] for a in flat_art]
            cl = layout_from_rows(key, rows, None)
            layouts[key] = cl
            self.custom_frequency_counts[key] = cl.count
            labels_c = None
            if cl.available:
                lab_key = label_attrs.get(key)
                lab_vals = self._custom_labels(lab_key) if lab_key else None
                if lab_vals is not None:
                    labels_c = [str(lab_vals[i]) for i in rows[0]]
                else:
                    labels_c = [f"{key}_{i}" for i in range(cl.count)]
            self.custom_frequency_labels[key] = labels_c

        # ---- roots
        roots = a_start[flat_art]
        rtypes = jtype[roots] if nj else np.zeros(0, np.int64)
        self.root_joint_type = int(rtypes[0]) if len(rtypes) and np.all(rtypes == rtypes[0]) else None
        root_reason = None
        if self.root_joint_type is None:
            root_reason = "root joint types differ between articulations"
        rj = roots.reshape(W, C, 1)
        self._root_joint_layout = _Layout("ROOT_JOINT", rj, None, dev)
        self._root_coord_layout = _Layout("ROOT_COORD", q_start[roots].reshape(W, C, 1), root_reason, dev)
        self._root_dof_layout = _Layout("ROOT_DOF", qd_start[roots].reshape(W, C, 1), root_reason, dev)
        self._root_unavailable_reason = root_reason
        if self.root_joint_type is None:
            self.is_fixed_base = self.is_floating_base = None
        else:
            self.is_fixed_base = self.root_joint_type == int(JointType.FIXED)
            self.is_floating_base = self.root_joint_type in _FLOATING_ROOTS

        # ---- homogeneity
        if self.homogeneous:
            for freq, lay in layouts.items():
                fname = freq.name if isinstance(freq, AF) else str(freq)
                if not lay.available:
                    raise ValueError(f"Articulation {fname} layout is unavailable: {lay.reason}")
                if lay.explicit and freq != AF.SHAPE:
                    raise ValueError(
                        f"Articulation {fname} layout is unavailable: start indices are not uniformly strided "
                        f"{where(self._first_irregular(lay))}; pass homogeneous=False to address it through "
                        "explicit model indices"
                    )
                if lay.explicit and freq == AF.SHAPE:
                    bad = self._first_unrepeated_shape_row(lay, worlds)
                    if bad is not None:
                        raise ValueError(
                            "Articulation SHAPE layout is unavailable: selected rows differ between worlds "
                            f"{where(bad)}"
                        )
            if root_reason is not None:
                raise ValueError(f"Articulation root layout is unavailable: {root_reason}")
        self.frequency_layouts = layouts
        self._unavailable_reasons = {k: v.reason for k, v in layouts.items() if not v.available}
        self.uses_explicit_model_indices = any(lay.available and lay.explicit for lay in layouts.values()) or (
            root_reason is None and (self._root_coord_layout.explicit or self._root_joint_layout.explicit)
        )

        # ---- public metadata
        jn_ok = jl.available
        self.joint_count = jl.count
        self.joint_labels = [jlabels[j] for j in joint_rows[0]] if jn_ok else None
        self.joint_names = [_tail(s) for s in self.joint_labels] if jn_ok else None
        dl, cl_ = layouts[AF.JOINT_DOF], layouts[AF.JOINT_COORD]
        self.joint_dof_count = dl.count
        self.joint_coord_count = cl_.count
        if jn_ok and dl.available and cl_.available:
            r0 = joint_rows[0]
            self.joint_dof_counts = [int(x) for x in (qd_start[r0 + 1] - qd_start[r0])]
            self.joint_coord_counts = [int(x) for x in (q_start[r0 + 1] - q_start[r0])]
        else:
            self.joint_dof_counts = self.joint_coord_counts = None
        self.joint_dof_names = self._expanded_names(self.joint_names, self.joint_dof_counts) if dl.available else None
        self.joint_coord_names = (
            self._expanded_names(self.joint_names, self.joint_coord_counts) if cl_.available else None
        )
        self.link_count = ll.count
        self.link_labels = [blabels[b] for b in link_rows[0]] if ll.available else None
        self.link_names = [_tail(s) for s in self.link_labels] if ll.available else None
        self.shape_count = sl.count
        self.shape_labels = [slabels[s] for s in sl.indices[0, 0]] if sl.available else None
        self.shape_names = [_tail(s) for s in self.shape_labels] if sl.available else None
        if ll.available and sl.available:
            own = sl.owners if sl.owners is not None else np.zeros(0, np.int64)
            self.link_shapes = [[int(i) for i in np.nonzero(own == k)[0]] for k in range(ll.count)]
        else:
            self.link_shapes = None
        self.joints_contiguous = jl.contiguous
        self.joint_dofs_contiguous = dl.contiguous
        self.joint_coords_contiguous = cl_.contiguous
        self.links_contiguous = ll.contiguous
        self.shapes_contiguous = sl.contiguous
        tkey = "mujoco:tendon"
        self.tendon_count = self.custom_frequency_counts.get(tkey, 0)
        self.tendon_names = self.custom_frequency_labels.get(tkey, [])

    @staticmethod
    def _first_irregular(lay: _Layout) -> int:
        """Flat (world * C + articulation) index of the first match off the regular stride."""
        idx = lay.indices
        W, C, _ = idx.shape
        steps = lay.sw * np.arange(W)[:, None, None] + lay.sc * np.arange(C)[None, :, None]
        expected = idx[0, 0][None, None, :] + steps
        bad = np.nonzero(np.any(expected != idx, axis=2).reshape(-1))[0]
        return int(bad[0]) if len(bad) else 0

    def _first_unrepeated_shape_row(self, lay: _Layout, worlds: np.ndarray):
        """Shapes addressed through explicit indices must sit at the same world-relative rows in every world."""
        idx = lay.indices
        W, C, V = idx.shape
        if V == 0:
            return None
        sworld = self.model.shape_world.numpy()
        wstart = self.model.shape_world_start.numpy()

        def world_offset(wid: int) -> int:
            return int(wstart[wid]) if wid >= 0 else 0

        base0 = world_offset(int(worlds[0]))
        for w in range(W):
            wid = int(worlds[w])
            rel = idx[w] - world_offset(wid)
            for c in range(C):
                if np.any(sworld[idx[w, c]] != wid) or (w and not np.array_equal(rel[c], idx[0, c] - base0)):
                    return w * C + c
        return None

    @staticmethod
    def _expanded_names(names, counts):
        if names is None or counts is None:
            return None
        out = []
        for n, c in zip(names, counts):
            out.extend([n] if c == 1 else [f"{n}:{k}" for k in range(c)])
        return out

    def _custom_labels(self, key):
        try:
            arr = self._lookup(self.model, key)
        except AttributeError:
            return None
        if isinstance(arr, wp.array):
            return arr.numpy()
        return arr

    def _summary(self) -> str:
        return (
            f"ArticulationView(pattern={self._pattern!r}): {self.count} articulations in {self.world_count} worlds "
            f"({self.count_per_world} per world), joints={self.joint_count}, dofs={self.joint_dof_count}, "
            f"coords={self.joint_coord_count}, links={self.link_count}, shapes={self.shape_count}, "
            f"sparse={self.is_sparse}, explicit_indices={self.uses_explicit_model_indices}"
        )

    # ----------------------------------------------------------------------- aliases
    @property
    def body_labels(self):
        """Alias for ``link_labels``."""
        return self.link_labels

    @property
    def body_names(self):
        """Alias for ``link_names``."""
        return self.link_names

    @property
    def body_shapes(self):
        """Alias for ``link_shapes``."""
        return self.link_shapes

    # ----------------------------------------------------------------------- resolution
    @staticmethod
    def _lookup(source, name: str):
        if ":" in name:
            ns, attr = name.split(":", 1)
            return getattr(getattr(source, ns), attr)
        return getattr(source, name)

    def _frequency_of(self, name: str):
        freqs = getattr(self.model, "attribute_frequency", {}) or {}
        if name in freqs:
            return freqs[name]
        f = _builtin_frequency(name)
        if f is None:
            raise KeyError(f"Attribute frequency of '{name}' is not known")
        return f

    def _resolve_attribute(self, name: str, source) -> tuple[wp.array, _Layout]:
        arr = self._lookup(source, name)
        freq = self._frequency_of(name)
        if isinstance(freq, int) and not isinstance(freq, AF):
            freq = AF(freq)
        key = freq if isinstance(freq, AF) else str(freq)
        lay = self.frequency_layouts.get(key)
        if lay is None:
            fname = freq.name if isinstance(freq, AF) else str(freq)
            raise AttributeError(f"Unable to determine the layout of frequency '{fname}' for attribute '{name}'")
        if not lay.available:
            raise AttributeError(f"Attribute '{name}' is unavailable: {lay.reason}")
        if not isinstance(arr, wp.array):
            raise TypeError(f"Attribute '{name}' of {type(source).__name__} is not a Warp array")
        return arr, lay

    # ----------------------------------------------------------------------- core access
    def _gather(self, src: wp.array, lay: _Layout, out_dtype=None, squeeze: bool = False) -> wp.array:
        """Read ``src`` rows selected by ``lay``: ``(W, C[, V]) + inner`` array of ``out_dtype``.

        With ``out_dtype`` (reinterpretation, e.g. 7 coordinates as a transform) the output
        element starts at the selected row and spans ``sizeof(out_dtype)`` bytes.
        """
        W, C, V = lay.shape
        src_elem = wp.types.type_size_in_bytes(src.dtype)
        inner = tuple(src.shape[1:])
        row_bytes = src_elem * int(np.prod(inner, dtype=np.int64)) if inner else src_elem
        if out_dtype is None:
            out_dtype, out_inner, out_bytes = src.dtype, inner, row_bytes
        else:
            out_inner, out_bytes = (), wp.types.type_size_in_bytes(out_dtype)
        shape = (W, C) + (() if squeeze else (V,)) + out_inner
        if W * C * V == 0:
            return wp.empty(shape, dtype=out_dtype, device=src.device)
        if not src.is_contiguous:
            src = src.contiguous()
        if lay.regular and lay.local_contiguous and (not squeeze or V == 1):
            e_stride = row_bytes
            inner_strides = tuple(src.strides[1:]) if out_dtype is src.dtype and inner else ()
            v_span = out_bytes if squeeze else V * e_stride
            sc = lay.sc * row_bytes if C > 1 else v_span
            sw = lay.sw * row_bytes if W > 1 else C * sc
            strides = (sw, sc) + (() if squeeze else (e_stride,)) + inner_strides
            view = wp.array(
                ptr=src.ptr + lay.base * row_bytes,
                dtype=out_dtype,
                shape=shape,
                strides=strides,
                device=src.device,
                copy=False,
            )
            view._ref = src
            return view
        word, wb = _word_dtype(row_bytes, out_bytes)
        out = wp.empty(shape, dtype=out_dtype, device=src.device)
        k = out_bytes // wb
        wp.launch(
            _gather_words,
            dim=W * C * V * k,
            inputs=[_reinterpret(src, word, wb), lay.device_indices, row_bytes // wb, k],
            outputs=[_reinterpret(out, word, wb)],
            device=src.device,
        )
        return out

    def _values(self, values, shape: tuple, dtype) -> wp.array:
        """``values`` as a contiguous Warp array of ``dtype`` and ``shape`` on the view's device."""
        scalar = getattr(dtype, "_wp_scalar_type_", dtype)
        comp = tuple(getattr(dtype, "_shape_", ()))
        if isinstance(values, wp.array):
            if values.dtype == dtype:
                if tuple(values.shape) != tuple(shape):
                    raise ValueError(f"Expected values with shape {tuple(shape)}, got {tuple(values.shape)}")
                if values.device != self.device:
                    values = wp.clone(values, device=self.device)
                if not values.is_contiguous:
                    values = values.contiguous()
                return values
            values = values.numpy()
        arr = wp.array(values, dtype=scalar, shape=tuple(shape) + comp, device=self.device)
        return arr

    def _resolve_mask(self, mask):
        """``(mode, world_mask, art_mask)``; mode 0: all, 1: per world, 2: per articulation (flattened)."""
        if mask is None:
            return 0, self._dummy_mask, self._dummy_mask
        W, C = self.world_count, self.count_per_world
        if isinstance(mask, wp.array):
            if mask.device != self.device:
                raise ValueError(f"Mask is on device {mask.device}, expected the view's device {self.device}")
            shape = tuple(mask.shape)
            if mask.dtype != wp.bool:
                mask = wp.array(mask.numpy().astype(bool), dtype=wp.bool, device=self.device)
            elif not mask.is_contiguous:
                mask = mask.contiguous()
        else:
            np_mask = np.asarray(mask).astype(bool)
            shape = np_mask.shape
            mask = wp.array(np_mask, dtype=wp.bool, device=self.device)
        if shape == (W,):
            return 1, mask, self._dummy_mask
        if shape == (W, C):
            return 2, self._dummy_mask, mask.reshape((W * C,))
        raise ValueError(f"Expected Boolean mask with shape {(W, C)} or {(W,)}, got {shape}")

    def _scatter(self, dst: wp.array, lay: _Layout, values, mask, out_dtype=None, squeeze: bool = False) -> None:
        W, C, V = lay.shape
        src_elem = wp.types.type_size_in_bytes(dst.dtype)
        inner = tuple(dst.shape[1:])
        row_bytes = src_elem * int(np.prod(inner, dtype=np.int64)) if inner else src_elem
        if out_dtype is None:
            out_dtype, out_inner, out_bytes = dst.dtype, inner, row_bytes
        else:
            out_inner, out_bytes = (), wp.types.type_size_in_bytes(out_dtype)
        shape = (W, C) + (() if squeeze else (V,)) + out_inner
        vals = self._values(values, shape, out_dtype)
        mode, wmask, amask = self._resolve_mask(mask)
        if W * C * V == 0:
            return
        if not dst.is_contiguous:
            raise ValueError("ArticulationView setters require a contiguous target array")
        if dst.device != self.device:
            raise ValueError(f"Target array is on device {dst.device}, expected {self.device}")
        word, wb = _word_dtype(row_bytes, out_bytes)
        k = out_bytes // wb
        wp.launch(
            _scatter_words,
            dim=W * C * V * k,
            inputs=[
                _reinterpret(vals, word, wb),
                lay.device_indices,
                row_bytes // wb,
                k,
                V,
                C * V,
                mode,
                wmask,
                amask,
            ],
            outputs=[_reinterpret(dst, word, wb)],
            device=self.device,
        )

    # ----------------------------------------------------------------------- attributes
    def get_attribute(self, name: str, source):
        """Selected rows of ``source.<name>`` (``"namespace:name"`` for custom attributes).

        Returns an array of shape ``(world_count, count_per_world, count) + inner`` with the
        attribute's dtype (``count`` is the view's count of the attribute's frequency).

        Raises:
            AttributeError: if ``source`` has no such attribute, its frequency has no layout in
                this view (e.g. ARTICULATION, WORLD), or its layout is unavailable.
            KeyError: if the attribute's frequency is unknown.
        """
        arr, lay = self._resolve_attribute(name, source)
        return self._gather(arr, lay)

    def set_attribute(self, name: str, target, values, mask=None) -> None:
        """Write ``values`` (shape as returned by :meth:`get_attribute`) into the selected rows.

        Only rows of selected (and masked-in) articulations are written. After editing Model
        attributes, notify the solver (``solver.notify_model_changed(...)``).
        """
        arr, lay = self._resolve_attribute(name, target)
        self._scatter(arr, lay, values, mask)

    # ----------------------------------------------------------------------- DOFs
    def get_dof_positions(self, source):
        """Joint coordinates ``joint_q``: shape ``(world_count, count_per_world, joint_coord_count)``."""
        return self.get_attribute("joint_q", source)

    def set_dof_positions(self, target, values, mask=None) -> None:
        """Write joint coordinates ``joint_q`` of the selected articulations."""
        self.set_attribute("joint_q", target, values, mask)

    def get_dof_velocities(self, source):
        """Joint velocities ``joint_qd``: shape ``(world_count, count_per_world, joint_dof_count)``."""
        return self.get_attribute("joint_qd", source)

    def set_dof_velocities(self, target, values, mask=None) -> None:
        """Write joint velocities ``joint_qd`` of the selected articulations."""
        self.set_attribute("joint_qd", target, values, mask)

    def get_dof_forces(self, source):
        """Generalized joint forces ``joint_f`` (Control): ``(world_count, count_per_world, joint_dof_count)``."""
        return self.get_attribute("joint_f", source)

    def set_dof_forces(self, target, values, mask=None) -> None:
        """Write generalized joint forces ``joint_f`` of the selected articulations."""
        self.set_attribute("joint_f", target, values, mask)

    # ----------------------------------------------------------------------- links
    def get_link_transforms(self, source):
        """World transforms ``body_q`` of the selected links: ``(world_count, count_per_world, link_count)``."""
        return self.get_attribute("body_q", source)

    def set_link_transforms(self, target, values, mask=None) -> None:
        """Write ``body_q`` of the selected links."""
        self.set_attribute("body_q", target, values, mask)

    def get_link_velocities(self, source):
        """Twists ``body_qd`` ``(v_com_world, omega_world)`` of the selected links."""
        return self.get_attribute("body_qd", source)

    def set_link_velocities(self, target, values, mask=None) -> None:
        """Write ``body_qd`` of the selected links."""
        self.set_attribute("body_qd", target, values, mask)

    # ----------------------------------------------------------------------- roots
    def _check_root(self):
        if self._root_unavailable_reason is not None:
            raise AttributeError(f"Root data is unavailable: {self._root_unavailable_reason}")

    def get_root_transforms(self, source):
        """Root poses, shape ``(world_count, count_per_world)``, dtype ``wp.transform``.

        Floating bases (FREE or DISTANCE root): the root coordinates of ``source.joint_q``.
        Other bases: the root joint's parent transform ``Model.joint_X_p`` (for any source).
        """
        self._check_root()
        if self.is_floating_base:
            return self._gather(source.joint_q, self._root_coord_layout, out_dtype=wp.transform, squeeze=True)
        return self._gather(self.model.joint_X_p, self._root_joint_layout, out_dtype=wp.transform, squeeze=True)

    def set_root_transforms(self, target, values, mask=None) -> None:
        """Set root poses, shape ``(world_count, count_per_world)`` transforms.

        Floating bases: writes the root coordinates of ``target.joint_q``. Other bases: moves the
        articulation by writing ``Model.joint_X_p`` of the root joint (there is no root pose in
        state coordinates). Call :meth:`eval_fk` (or :func:`armillary.eval_fk`) to update links.
        """
        self._check_root()
        if self.is_floating_base:
            self._scatter(target.joint_q, self._root_coord_layout, values, mask, out_dtype=wp.transform, squeeze=True)
        else:
            self._scatter(
                self.model.joint_X_p, self._root_joint_layout, values, mask, out_dtype=wp.transform, squeeze=True
            )

    def get_root_velocities(self, source):
        """Root twists (``joint_qd`` of a floating root), shape ``(world_count, count_per_world)``.

        Returns ``None`` for articulations that are not floating-base.
        """
        self._check_root()
        if not self.is_floating_base:
            return None
        return self._gather(source.joint_qd, self._root_dof_layout, out_dtype=wp.spatial_vector, squeeze=True)

    def set_root_velocities(self, target, values, mask=None) -> None:
        """Set root twists of floating-base articulations (no effect on other bases)."""
        self._check_root()
        if not self.is_floating_base:
            return
        self._scatter(target.joint_qd, self._root_dof_layout, values, mask, out_dtype=wp.spatial_vector, squeeze=True)

    # ----------------------------------------------------------------------- masks / evaluation
    def get_model_articulation_mask(self, mask=None) -> wp.array:
        """Model-wide Boolean articulation mask (``(model.articulation_count,)``) from a view mask."""
        mode, wmask, amask = self._resolve_mask(mask)
        out = wp.zeros(int(self.model.articulation_count), dtype=wp.bool, device=self.device)
        if self.count:
            wp.launch(
                _model_articulation_mask,
                dim=self.count,
                inputs=[self._articulation_ids_flat, self.count_per_world, mode, wmask, amask],
                outputs=[out],
                device=self.device,
            )
        return out

    def eval_fk(self, target, mask=None, *, joint_mask=None) -> None:
        """Forward kinematics of the selected articulations (see :func:`armillary.eval_fk`)."""
        import armillary

        armillary.eval_fk(
            self.model,
            target.joint_q,
            target.joint_qd,
            target,
            mask=self.get_model_articulation_mask(mask),
            joint_mask=joint_mask,
        )

    def eval_jacobian(self, state, J=None, joint_S_s=None, mask=None):
        """Spatial Jacobian of the selected articulations (see :func:`armillary.eval_jacobian`)."""
        import armillary

        return armillary.eval_jacobian(
            self.model, state, J, joint_S_s=joint_S_s, mask=self.get_model_articulation_mask(mask)
        )

    def eval_mass_matrix(
        self, state, H=None, J=None, body_I_s=None, joint_S_s=None, mask=None, *, include_armature=True
    ):
        """Generalized mass matrix of the selected articulations (see :func:`armillary.eval_mass_matrix`)."""
        import armillary

        kwargs = {"include_armature": include_armature} if include_armature is not True else {}
        return armillary.eval_mass_matrix(
            self.model,
            state,
            H,
            J=J,
            body_I_s=body_I_s,
            joint_S_s=joint_S_s,
            mask=self.get_model_articulation_mask(mask),
            **kwargs,
        )

    def eval_inverse_dynamics_passive(
        self, state, *, mass_matrix=None, gravity_force=None, coriolis_force=None, mask=None
    ) -> None:
        """Passive inverse dynamics (``M(q)``, ``g(q)``, ``C(q, qd) qd``) of the selected articulations.

        Forwards to :func:`armillary.eval_inverse_dynamics_passive` with the model articulation
        mask of this view and the optional view mask (per world or per articulation); entries of
        unselected articulations are zero. Experimental.
        """
        import armillary

        armillary.eval_inverse_dynamics_passive(
            self.model,
            state,
            mass_matrix=mass_matrix,
            gravity_force=gravity_force,
            coriolis_force=coriolis_force,
            mask=self.get_model_articulation_mask(mask),
        )

    def eval_inverse_dynamics_force(
        self, state, *, mass_matrix, joint_qdd, coriolis_force, gravity_force, joint_f, mask=None
    ) -> None:
        """``tau = M qdd + C qd + g`` for the selected articulations (others are zeroed). Experimental."""
        import armillary

        armillary.eval_inverse_dynamics_force(
            self.model,
            state,
            mass_matrix=mass_matrix,
            joint_qdd=joint_qdd,
            coriolis_force=coriolis_force,
            gravity_force=gravity_force,
            joint_f=joint_f,
            mask=self.get_model_articulation_mask(mask),
        )

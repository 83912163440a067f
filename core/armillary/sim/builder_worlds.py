"""Worlds and builder composition of :class:`~armillary.ModelBuilder` (mixin).

A *world* groups entities that interact only with each other and with global
entities (world index ``-1``, e.g. a ground plane added outside any world).
``begin_world``/``end_world`` open and close a world context; ``add_world``
merges another builder into a new world; ``replicate`` stamps out many copies;
``add_builder`` merges into the current world (or the global world).
"""

from __future__ import annotations

import numpy as np
import warp as wp

from ._convert import to_transform, to_vec3
from .enums import JointType

# lists copied verbatim per entity kind (no index remapping)
_BODY_COPY = ("body_qd", "body_com", "body_mass", "body_inertia", "body_flags", "body_lock_inertia")
_JOINT_COPY = (
    "joint_type", "joint_X_c", "joint_enabled", "joint_dof_dim", "joint_collision_filter_parent", "joint_mimic_coeffs",
)  # fmt: skip
_DOF_COPY = (
    "joint_qd", "joint_f", "joint_act", "joint_axis", "joint_limit_lower", "joint_limit_upper", "joint_limit_ke",
    "joint_limit_kd", "joint_target_qd", "joint_target_ke", "joint_target_kd", "joint_target_mode", "joint_armature",
    "joint_friction", "joint_effort_limit", "joint_velocity_limit", "joint_stiffness", "joint_damping",
)  # fmt: skip
_COORD_COPY = ("joint_target_q", "joint_rest_q")
_SHAPE_COPY = (
    "shape_type", "shape_scale", "shape_flags", "shape_source", "shape_color", "shape_opacity",
    "shape_collision_group", "shape_collision_radius", "shape_margin", "shape_gap", "shape_is_solid", "shape_density",
    "shape_material_mu", "shape_material_ke", "shape_material_kd", "shape_material_kf", "shape_material_ka",
    "shape_material_kh", "shape_material_restitution", "shape_material_mu_torsional", "shape_material_mu_rolling",
    "shape_sdf_max_resolution", "shape_sdf_target_voxel_size", "shape_sdf_narrow_band_range",
    "shape_sdf_texture_format", "shape_sdf_padding", "shape_force_sdf", "_shape_filter_parent",
)  # fmt: skip
_FLOATING = (int(JointType.FREE), int(JointType.DISTANCE), int(JointType.ROD))


def transform_batch(xforms: np.ndarray, tfs: np.ndarray) -> np.ndarray:
    """``xforms[k] * tfs[i]`` for all k, i; transforms stored ``(px, py, pz, qx, qy, qz, qw)``.

    ``xforms`` (K, 7), ``tfs`` (N, 7) -> (K, N, 7).
    """
    xforms = np.asarray(xforms, dtype=np.float64).reshape(-1, 7)
    tfs = np.asarray(tfs, dtype=np.float64).reshape(-1, 7)
    p = tfs[None, :, :3]
    ax, ay, az, aw = (xforms[:, None, 3 + i] for i in range(4))
    bx, by, bz, bw = (tfs[None, :, 3 + i] for i in range(4))
    # rotate p by quaternion a: p + 2w (u x p) + 2 u x (u x p)
    px, py, pz = p[..., 0], p[..., 1], p[..., 2]
    tx = 2.0 * (ay * pz - az * py)
    ty = 2.0 * (az * px - ax * pz)
    tz = 2.0 * (ax * py - ay * px)
    out = np.empty((len(xforms), len(tfs), 7))
    out[..., 0] = px + aw * tx + (ay * tz - az * ty) + xforms[:, None, 0]
    out[..., 1] = py + aw * ty + (az * tx - ax * tz) + xforms[:, None, 1]
    out[..., 2] = pz + aw * tz + (ax * ty - ay * tx) + xforms[:, None, 2]
    out[..., 3] = aw * bx + ax * bw + ay * bz - az * by
    out[..., 4] = aw * by - ax * bz + ay * bw + az * bx
    out[..., 5] = aw * bz + ax * by - ay * bx + az * bw
    out[..., 6] = aw * bw - ax * bx - ay * by - az * bz
    return out


def transform_many(xform: np.ndarray, tfs: np.ndarray) -> np.ndarray:
    """``xform * tfs[i]`` (N, 7)."""
    return transform_batch(np.asarray(xform).reshape(1, 7), tfs)[0]


def _transforms_from_rows(rows: np.ndarray) -> list:
    """Fast creation of ``wp.transform`` objects from an (N, 7) array."""
    buf = np.ascontiguousarray(rows, dtype=np.float32).tobytes()
    make = wp.transform.from_buffer_copy
    return [make(buf, 28 * i) for i in range(len(rows))]


def grid_offsets(count: int, spacing) -> np.ndarray:
    """Positions of ``count`` copies on a grid over the non-zero ``spacing`` axes, centered at the origin."""
    spacing = np.asarray([float(s) for s in spacing], dtype=np.float64)
    out = np.zeros((count, 3))
    axes = [i for i in range(3) if spacing[i] != 0.0]
    if not axes or count == 0:
        return out
    side = max(1, int(round(count ** (1.0 / len(axes)))))
    while side ** len(axes) < count:
        side += 1
    idx = np.arange(count)
    for k, ax in enumerate(axes):
        out[:, ax] = ((idx // side**k) % side) * spacing[ax]
    out -= 0.5 * (out.max(axis=0) + out.min(axis=0))
    return out


class _MergeSource:
    """Per-source caches reused by every copy in :meth:`WorldBuilderMixin.replicate`."""

    def __init__(self, src):
        self.src = src
        self.body_q = np.asarray(src.body_q, dtype=np.float64).reshape(-1, 7) if src.body_q else np.zeros((0, 7))
        self.joint_parent = np.asarray(src.joint_parent, dtype=np.int64)
        self.joint_child = np.asarray(src.joint_child, dtype=np.int64)
        self.joint_articulation = np.asarray(src.joint_articulation, dtype=np.int64)
        self.joint_mimic = np.asarray(src.joint_mimic_joint, dtype=np.int64)
        self.shape_body = np.asarray(src.shape_body, dtype=np.int64)
        jt = np.asarray(src.joint_type, dtype=np.int64)
        root = self.joint_parent < 0
        self.root_floating = [int(j) for j in np.nonzero(root & np.isin(jt, _FLOATING))[0]]
        self.root_fixed = [int(j) for j in np.nonzero(root & ~np.isin(jt, _FLOATING))[0]]
        self.static_shapes = [int(s) for s in np.nonzero(self.shape_body < 0)[0]]
        self.root_q = np.asarray(
            [src.joint_q[src.joint_q_start[j] : src.joint_q_start[j] + 7] for j in self.root_floating], dtype=np.float64
        ).reshape(-1, 7)
        self.root_x_p = np.asarray([list(src.joint_X_p[j]) for j in self.root_fixed], dtype=np.float64).reshape(-1, 7)
        self.static_tf = np.asarray([list(src.shape_transform[s]) for s in self.static_shapes], dtype=np.float64).reshape(-1, 7)

        self.pairs = list(src.shape_collision_filter_pairs)
        self.body_world = np.asarray(src.body_world, dtype=np.int64)
        self.joint_world = np.asarray(src.joint_world, dtype=np.int64)
        self.shape_world = np.asarray(src.shape_world, dtype=np.int64)
        self.articulation_world = np.asarray(src.articulation_world, dtype=np.int64)

    def moved(self, tfs: list) -> list:
        """Per copy: ``None`` (no transform) or a dict of transformed rows."""
        idx = [k for k, t in enumerate(tfs) if t is not None]
        out: list = [None] * len(tfs)
        if not idx:
            return out
        x = np.stack([tfs[k] for k in idx])
        body = transform_batch(x, self.body_q).astype(np.float32)
        rq = transform_batch(x, self.root_q)
        rx = transform_batch(x, self.root_x_p)
        st = transform_batch(x, self.static_tf)
        for n, k in enumerate(idx):
            out[k] = {"tf": tfs[k], "body_q": body[n], "root_q": rq[n], "root_x_p": rx[n], "static_tf": st[n]}
        return out


def _shift(arr: np.ndarray, off: int) -> list:
    """Add ``off`` to non-negative entries, keep negative ones (world / none)."""
    if off == 0 or arr.size == 0:
        return arr.tolist()
    return np.where(arr >= 0, arr + off, arr).tolist()


class WorldBuilderMixin:
    """World contexts and merging of builders."""

    def _init_worlds(self) -> None:
        self._current_world = -1
        self.world_count = 0
        self.world_label: list[str] = []
        self.world_gravity: list = []

    @property
    def current_world(self) -> int:
        """Index of the open world context, or ``-1`` (global) outside ``begin_world``/``end_world``."""
        return self._current_world

    def begin_world(self, label: str | None = None, attributes: dict | None = None, gravity=None) -> int:
        """Open a new world; entities added until :meth:`end_world` belong to it. Returns its index."""
        if self._current_world != -1:
            raise RuntimeError(
                f"Cannot begin a new world: already in world context (current_world={self._current_world}). "
                "Call end_world() first to close the current world context."
            )
        g = None if gravity is None else tuple(float(v) for v in to_vec3(gravity, f"world {self.world_count}: gravity"))
        w = self.world_count
        self._check_custom_attributes("world", attributes)
        self.world_count += 1
        self.world_label.append(label if label is not None else f"world_{w}")
        self.world_gravity.append(g)
        self._current_world = w
        self._assign_custom_attributes("world", w, attributes)
        return w

    def end_world(self) -> None:
        """Close the world context opened by :meth:`begin_world`."""
        if self._current_world == -1:
            raise RuntimeError("Cannot end a world: no world context is open. Call begin_world() first.")
        self._current_world = -1

    def add_world(self, builder, xform=None, label_prefix: str | None = None) -> int:
        """Merge ``builder`` into a new world (see :meth:`add_builder`); returns the world index."""
        self._check_builder(builder)
        w = self.begin_world(gravity=self._source_gravity(builder))
        try:
            self.add_builder(builder, xform=xform, label_prefix=label_prefix)
        finally:
            self.end_world()
        return w

    def _source_gravity(self, builder):
        g = getattr(builder, "gravity", None)
        if g is None or np.allclose(g, self.gravity):
            return None
        return g

    def _check_builder(self, builder) -> None:
        if not hasattr(builder, "body_q") or not hasattr(builder, "joint_type"):
            raise ValueError(f"expected a ModelBuilder, got {type(builder).__name__}")
        if builder is self:
            raise ValueError("cannot merge a builder into itself")

    def add_builder(self, builder, xform=None, label_prefix: str | None = None) -> None:
        """Append all entities of ``builder`` to this builder.

        Entities go to the current world (global ``-1`` outside a world context;
        worlds of ``builder`` are appended as new worlds in that case). ``xform``
        moves the copy: body poses, world-attached joint frames (or the coordinates
        of floating root joints) and static shapes. Labels get ``"{label_prefix}/"``.
        """
        self._check_builder(builder)
        tf = None if xform is None else np.asarray(list(to_transform(xform, "add_builder: xform")), dtype=np.float64)
        c = _MergeSource(builder)
        self._merge(c, c.moved([tf])[0], label_prefix)

    def replicate(
        self,
        builder,
        copy_count: int | None = None,
        spacing=(0.0, 0.0, 0.0),
        *,
        separate_worlds: bool = True,
        xforms=None,
        label_prefixes=None,
        world_count: int | None = None,
    ) -> None:
        """Stamp out ``world_count`` copies of ``builder`` (one world each when ``separate_worlds``).

        Copies are placed on a grid with ``spacing`` [m] centered at the origin, or at ``xforms``.
        ``copy_count`` is the older name of ``world_count``.
        """
        self._check_builder(builder)
        if world_count is not None and copy_count is not None and int(world_count) != int(copy_count):
            raise ValueError(f"replicate: world_count={world_count} and copy_count={copy_count} disagree; pass only one")
        count = world_count if world_count is not None else copy_count
        if count is None:
            raise ValueError("replicate: world_count is required (number of copies, >= 0)")
        if isinstance(count, bool) or int(count) != count or int(count) < 0:
            raise ValueError(f"replicate: world_count={count!r} must be an integer >= 0")
        count = int(count)
        if xforms is not None:
            xforms = list(xforms)
            if len(xforms) != count:
                raise ValueError(f"replicate: got {len(xforms)} xforms for {count} copies; expected one per copy")
            tfs = [np.asarray(list(to_transform(x, f"replicate: xforms[{i}]")), dtype=np.float64) for i, x in enumerate(xforms)]
        else:
            offs = grid_offsets(count, to_vec3(spacing, "replicate: spacing"))
            tfs = [None if not o.any() else np.concatenate([o, [0.0, 0.0, 0.0, 1.0]]) for o in offs]
        if label_prefixes is not None:
            label_prefixes = list(label_prefixes)
            if len(label_prefixes) != count:
                raise ValueError(f"replicate: got {len(label_prefixes)} label_prefixes for {count} copies")
        if separate_worlds and self._current_world != -1:
            raise RuntimeError(
                f"Cannot replicate into separate worlds inside a world context (current_world={self._current_world}); "
                "call end_world() first or pass separate_worlds=False."
            )
        cache = _MergeSource(builder)
        moved = cache.moved(tfs)
        gravity = self._source_gravity(builder)
        for i in range(count):
            prefix = None if label_prefixes is None else label_prefixes[i]
            if separate_worlds:
                self.begin_world(gravity=gravity)
                try:
                    self._merge(cache, moved[i], prefix)
                finally:
                    self.end_world()
            else:
                self._merge(cache, moved[i], prefix)

    # ------------------------------------------------------------------ merge
    def _entity_count(self, kind: str) -> int:
        v = getattr(self, f"{kind}_count", None)
        if isinstance(v, int):
            return v
        return 0

    def _merge(self, c: _MergeSource, mv: dict | None, label_prefix) -> None:
        src = c.src
        nb, nj, ns, na = self.body_count, self.joint_count, self.shape_count, self.articulation_count
        ndof, ncoord = self.joint_dof_count, self.joint_coord_count

        # world mapping
        cw = self._current_world
        if cw >= 0:
            def wmap(arr):
                return [cw] * len(arr)
            world_off = cw
        elif src.world_count > 0:
            base = self.world_count
            for w in range(src.world_count):
                self.world_count += 1
                self.world_label.append(src.world_label[w] if w < len(src.world_label) else f"world_{base + w}")
                self.world_gravity.append(src.world_gravity[w] if w < len(src.world_gravity) else None)

            def wmap(arr):
                return _shift(arr, base)
            world_off = -1
        else:
            def wmap(arr):
                return [-1] * len(arr)
            world_off = -1

        offsets = {
            "body": nb, "shape": ns, "joint": nj, "joint_dof": ndof, "joint_coord": ncoord, "articulation": na,
            "particle": self._entity_count("particle"), "spring": self._entity_count("spring"),
            "tri": self._entity_count("tri"), "tet": self._entity_count("tet"), "edge": self._entity_count("edge"),
            "attachment_particle_body": self._entity_count("attachment_particle_body"),
            "curve": self._entity_count("curve"),
            "world": world_off, "label_prefix": label_prefix,
        }  # fmt: skip

        def prefixed(labels):
            return list(labels) if not label_prefix else [f"{label_prefix}/{lbl}" for lbl in labels]

        # bodies
        if mv is None:
            self.body_q.extend(src.body_q)
        else:
            self.body_q.extend(_transforms_from_rows(mv["body_q"]))
        for name in _BODY_COPY:
            getattr(self, name).extend(getattr(src, name))
        self.body_label.extend(prefixed(src.body_label))
        self.body_world.extend(wmap(c.body_world))
        for b, shapes in src.body_shapes.items():
            if b >= 0:
                self.body_shapes[b + nb] = [s + ns for s in shapes]
            else:
                self.body_shapes.setdefault(-1, []).extend(s + ns for s in shapes)

        # joints
        self.joint_parent.extend(_shift(c.joint_parent, nb))
        self.joint_child.extend((c.joint_child + nb).tolist())
        x_p = list(src.joint_X_p)
        if mv is not None and c.root_fixed:
            for k, tfk in enumerate(_transforms_from_rows(mv["root_x_p"])):
                x_p[c.root_fixed[k]] = tfk
        self.joint_X_p.extend(x_p)
        for name in _JOINT_COPY:
            getattr(self, name).extend(getattr(src, name))
        self.joint_label.extend(prefixed(src.joint_label))
        self.joint_world.extend(wmap(c.joint_world))
        self.joint_articulation.extend(_shift(c.joint_articulation, na))
        self.joint_mimic_joint.extend(_shift(c.joint_mimic, nj))
        self.joint_q_start.extend(s + ncoord for s in src.joint_q_start)
        self.joint_qd_start.extend(s + ndof for s in src.joint_qd_start)
        for name in _DOF_COPY:
            getattr(self, name).extend(getattr(src, name))
        q = list(src.joint_q)
        if mv is not None and c.root_floating:
            rows = mv["root_q"].tolist()
            for k, j in enumerate(c.root_floating):
                s0 = src.joint_q_start[j]
                q[s0 : s0 + 7] = rows[k]
        self.joint_q.extend(q)
        for name in _COORD_COPY:
            getattr(self, name).extend(getattr(src, name))
        self.joint_dof_count += src.joint_dof_count
        self.joint_coord_count += src.joint_coord_count
        for ch, parents in src.joint_parents.items():
            self.joint_parents.setdefault(ch + nb, []).extend(p + nb if p >= 0 else -1 for p in parents)
        for p, children in src.joint_children.items():
            self.joint_children.setdefault(p + nb if p >= 0 else -1, []).extend(ch + nb for ch in children)
        for b, js in src._body_joints.items():
            self._body_joints.setdefault(b + nb, []).extend(j + nj for j in js)

        # articulations
        self.articulation_start.extend(s + nj for s in src.articulation_start)
        self.articulation_end.extend(e + nj for e in src.articulation_end)
        self.articulation_label.extend(prefixed(src.articulation_label))
        self.articulation_world.extend(wmap(c.articulation_world))

        # shapes
        self.shape_body.extend(_shift(c.shape_body, nb))
        st = list(src.shape_transform)
        if mv is not None and c.static_shapes:
            for k, tfk in enumerate(_transforms_from_rows(mv["static_tf"])):
                st[c.static_shapes[k]] = tfk
        self.shape_transform.extend(st)
        for name in _SHAPE_COPY:
            getattr(self, name).extend(getattr(src, name))
        self.shape_label.extend(prefixed(src.shape_label))
        self.shape_world.extend(wmap(c.shape_world))
        if c.pairs:
            set.update(self.shape_collision_filter_pairs, ((a + ns, b + ns) for a, b in c.pairs))

        for note in getattr(src, "authored_features", ()):
            if note not in self.authored_features:
                self.authored_features.append(note)
        self._merge_particles(src, offsets, None if mv is None else wp.transform(*mv["tf"].tolist()))
        self._merge_rods(src, offsets)
        self._merge_actuators(src, ndof, ncoord)
        self._merge_custom_attributes(src, offsets)

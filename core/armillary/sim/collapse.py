"""Merging of bodies connected by FIXED joints: :func:`collapse_fixed_joints`.

Serves ``ModelBuilder.collapse_fixed_joints`` and the importers' ``collapse_fixed_joints=True``
option. A FIXED joint ``parent -> child`` is removed and the child body is merged into its
parent (or, for a fixed joint to the world, into the world: its shapes become static shapes
and its mass is dropped):

* mass, center of mass and inertia are composed with the parallel-axis theorem
  (:func:`armillary.sim.mass.combine`), the child's inertia rotated into the parent frame;
* the child's shapes move to the parent with their transforms composed with the child's
  pose in the parent frame ``X_pc = joint_X_p * inverse(joint_X_c)``;
* joints below the child are re-anchored: their ``joint_X_p`` is pre-multiplied by ``X_pc``;
* chains of fixed joints collapse into the first body that is not merged.

Joint DOF / coordinate arrays are untouched (FIXED joints have none). Mimic references,
articulation ranges and per-body / per-joint custom attribute values are re-indexed;
articulations left without joints are removed.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import warp as wp

from . import mass as _mass
from .enums import JointType
from .exceptions import warn
from .rotations import quat_to_matrix

__all__ = ["collapse_fixed_joints"]


# ---------------------------------------------------------------------------------------------
# small double-precision transform helpers, transforms as (p[3], q[4] xyzw)


def _tf(value) -> tuple[np.ndarray, np.ndarray]:
    v = np.asarray([float(x) for x in value], dtype=np.float64)
    q = v[3:7]
    n = np.linalg.norm(q)
    return v[:3].copy(), (q / n if n > 0 else np.array([0.0, 0.0, 0.0, 1.0]))


def _qmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return np.array(
        [
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz,
        ]
    )


def _qrot(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    return quat_to_matrix(q) @ v


def _mul(a, b):
    return a[0] + _qrot(a[1], b[0]), _qmul(a[1], b[1])


def _inv(a):
    qi = np.array([-a[1][0], -a[1][1], -a[1][2], a[1][3]])
    return -_qrot(qi, a[0]), qi


def _to_wp(a) -> wp.transform:
    return wp.transform(wp.vec3(*(float(x) for x in a[0])), wp.quat(*(float(x) for x in a[1])))


_IDENTITY = (np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0]))


# ---------------------------------------------------------------------------------------------


def _joint_keys(builder, joints_to_keep) -> set[int]:
    keep: set[int] = set()
    if joints_to_keep is None:
        return keep
    if isinstance(joints_to_keep, (str, int)):
        joints_to_keep = [joints_to_keep]
    labels = {lbl: j for j, lbl in enumerate(builder.joint_label)}
    for item in joints_to_keep:
        if isinstance(item, bool):
            raise ValueError(f"collapse_fixed_joints: joints_to_keep entry {item!r} is not a joint label or index")
        if isinstance(item, (int, np.integer)):
            j = int(item)
            if not 0 <= j < builder.joint_count:
                raise ValueError(
                    f"collapse_fixed_joints: joints_to_keep index {j} is out of range [0, {builder.joint_count})"
                )
            keep.add(j)
        elif isinstance(item, str):
            if item in labels:
                keep.add(labels[item])
            else:
                # also accept the last path component of hierarchical labels ("robot/joint")
                hits = [j for lbl, j in labels.items() if lbl.rsplit("/", 1)[-1] == item]
                if not hits:
                    raise ValueError(f"collapse_fixed_joints: joints_to_keep names an unknown joint {item!r}")
                keep.update(hits)
        else:
            raise ValueError(f"collapse_fixed_joints: joints_to_keep entry {item!r} is not a joint label or index")
    return keep


def collapse_fixed_joints(builder, verbose: bool = False, joints_to_keep: Sequence[str | int] | None = None) -> dict[str, Any]:
    """Remove FIXED joints from ``builder`` and merge the bodies they connect (in place).

    Args:
        builder: the :class:`~armillary.ModelBuilder` to modify.
        verbose: print one line per merged body.
        joints_to_keep: joint labels (or the last component of ``"robot/joint"`` labels) or
            joint indices whose FIXED joints are kept.

    Returns:
        A dict with

        * ``body_remap``: ``{old body index: new index}`` of the kept bodies (and ``-1: -1``);
        * ``joint_remap``: ``{old joint index: new index}`` of the kept joints;
        * ``articulation_remap``: ``{old: new}`` of the kept articulations;
        * ``body_merged_parent``: ``{old merged body index: old index of the body it went into}``
          (``-1`` for the world);
        * ``body_merged_transform``: ``{old merged body index: its frame in that body's frame}``
          (``wp.transform``; world frame for the world);
        * ``merged_body_data``: ``{merged body label: {"relative_xform": wp.transform,
          "parent_body": label of the body it went into ("world" for the world)}}``;
        * ``removed_joints``: labels of the removed joints.

    Raises:
        ValueError: an unknown ``joints_to_keep`` entry, or a fixed joint whose child is the
            child of more than one joint (not a tree).
    """
    keep = _joint_keys(builder, joints_to_keep)
    nb, nj = builder.body_count, builder.joint_count
    fixed = int(JointType.FIXED)

    # child -> joints having it as child
    child_joints: dict[int, list[int]] = {}
    for j in range(nj):
        child_joints.setdefault(builder.joint_child[j], []).append(j)

    remove_joint: set[int] = set()
    merge_of: dict[int, int] = {}  # child body -> removed joint
    for j in range(nj):
        if builder.joint_type[j] != fixed or j in keep:
            continue
        c = builder.joint_child[j]
        if len(child_joints[c]) != 1:
            # a body with another (e.g. loop-closing) joint keeps its own frame
            continue
        if builder.joint_parent[j] == c:
            continue
        remove_joint.add(j)
        merge_of[c] = j

    # resolve targets through chains: target[c] = (final body or -1, X_target_c)
    target: dict[int, tuple[int, tuple]] = {}

    def resolve(c: int, depth: int = 0):
        if c in target:
            return target[c]
        if depth > nb:
            raise ValueError("collapse_fixed_joints: cycle of fixed joints detected")
        j = merge_of[c]
        p = builder.joint_parent[j]
        x_pc = _mul(_tf(builder.joint_X_p[j]), _inv(_tf(builder.joint_X_c[j])))
        if p >= 0 and p in merge_of:
            tp, x_tp = resolve(p, depth + 1)
            res = (tp, _mul(x_tp, x_pc))
        else:
            res = (p, x_pc)
        target[c] = res
        return res

    for c in merge_of:
        resolve(c)

    # mass composition, in index order of the merged bodies (deterministic)
    mass_acc = {
        b: (float(builder.body_mass[b]), np.asarray(list(builder.body_com[b]), dtype=np.float64),
            np.asarray(builder.body_inertia[b], dtype=np.float64).reshape(3, 3))
        for b in range(nb)
    }  # fmt: skip
    for c in sorted(merge_of):
        t, x_tc = target[c]
        if t < 0:
            continue
        m, com, inertia = mass_acc[c][0], mass_acc[c][1], mass_acc[c][2]
        if builder.body_mass[c] <= 0.0:
            continue
        m, com, inertia = _mass.transform_mass_properties(m, com, inertia, x_tc[0], x_tc[1])
        mass_acc[t] = _mass.combine(mass_acc[t][0], mass_acc[t][1], mass_acc[t][2], m, com, inertia)

    kept_bodies = [b for b in range(nb) if b not in merge_of]
    body_remap = {-1: -1}
    body_remap.update({b: i for i, b in enumerate(kept_bodies)})
    kept_joints = [j for j in range(nj) if j not in remove_joint]
    joint_remap = {j: i for i, j in enumerate(kept_joints)}

    def final_body(b: int) -> int:
        """New index of the body that old body ``b`` ends up in (-1: world)."""
        if b < 0:
            return -1
        if b in merge_of:
            return body_remap[target[b][0]]
        return body_remap[b]

    # --- shapes: re-parent ---
    for s in range(builder.shape_count):
        b = builder.shape_body[s]
        if b >= 0 and b in merge_of:
            t, x_tc = target[b]
            builder.shape_transform[s] = _to_wp(_mul(x_tc, _tf(builder.shape_transform[s])))
        builder.shape_body[s] = final_body(b)

    # --- joints below merged bodies: re-anchor ---
    for j in kept_joints:
        p = builder.joint_parent[j]
        if p >= 0 and p in merge_of:
            t, x_tp = target[p]
            builder.joint_X_p[j] = _to_wp(_mul(x_tp, _tf(builder.joint_X_p[j])))

    # --- report (before the lists are rewritten) ---
    merged_parent = {c: target[c][0] for c in sorted(merge_of)}
    merged_tf = {c: _to_wp(target[c][1]) for c in sorted(merge_of)}
    merged_data = {
        builder.body_label[c]: {
            "relative_xform": merged_tf[c],
            "parent_body": builder.body_label[merged_parent[c]] if merged_parent[c] >= 0 else "world",
        }
        for c in sorted(merge_of)
    }
    removed_labels = [builder.joint_label[j] for j in sorted(remove_joint)]
    if verbose:
        for c in sorted(merge_of):
            into = merged_data[builder.body_label[c]]["parent_body"]
            print(f"collapse_fixed_joints: merged body '{builder.body_label[c]}' into '{into}'")

    # --- bodies ---
    for b in kept_bodies:
        m, com, inertia = mass_acc[b]
        builder.body_mass[b] = float(m)
        builder.body_com[b] = wp.vec3(*(float(v) for v in com))
        builder.body_inertia[b] = wp.mat33(*(float(v) for v in np.asarray(inertia).reshape(-1)))
    for name in ("body_q", "body_qd", "body_com", "body_mass", "body_inertia", "body_label", "body_world",
                 "body_flags", "body_lock_inertia"):  # fmt: skip
        lst = getattr(builder, name)
        lst[:] = [lst[b] for b in kept_bodies]

    # --- joints ---
    new_parent = [final_body(builder.joint_parent[j]) for j in kept_joints]
    new_child = [body_remap[builder.joint_child[j]] for j in kept_joints]
    for name in ("joint_type", "joint_X_p", "joint_X_c", "joint_label", "joint_world", "joint_enabled",
                 "joint_articulation", "joint_q_start", "joint_qd_start", "joint_dof_dim",
                 "joint_collision_filter_parent", "joint_mimic_joint", "joint_mimic_coeffs"):  # fmt: skip
        lst = getattr(builder, name)
        lst[:] = [lst[j] for j in kept_joints]
    builder.joint_parent[:] = new_parent
    builder.joint_child[:] = new_child
    for i, ref in enumerate(builder.joint_mimic_joint):
        if ref >= 0:
            builder.joint_mimic_joint[i] = joint_remap.get(ref, -1)
            if builder.joint_mimic_joint[i] < 0:
                builder.joint_mimic_coeffs[i] = (0.0, 1.0)
    builder.joint_parents.clear()
    builder.joint_children.clear()
    builder._body_joints.clear()
    for j in range(len(kept_joints)):
        p, c = builder.joint_parent[j], builder.joint_child[j]
        builder.joint_parents.setdefault(c, []).append(p)
        builder.joint_children.setdefault(p, []).append(c)
        builder._body_joints.setdefault(c, []).append(j)
        if p >= 0:
            builder._body_joints.setdefault(p, []).append(j)

    # --- articulations ---
    art_remap: dict[int, int] = {}
    starts, ends, labels, worlds = [], [], [], []
    for a in range(builder.articulation_count):
        js = [joint_remap[j] for j in range(builder.articulation_start[a], builder.articulation_end[a]) if j in joint_remap]
        if not js:
            continue
        art_remap[a] = len(starts)
        starts.append(min(js))
        ends.append(max(js) + 1)
        labels.append(builder.articulation_label[a])
        worlds.append(builder.articulation_world[a])
    builder.joint_articulation[:] = [art_remap.get(a, -1) if a >= 0 else -1 for a in builder.joint_articulation]
    builder.articulation_start[:] = starts
    builder.articulation_end[:] = ends
    builder.articulation_label[:] = labels
    builder.articulation_world[:] = worlds

    # --- shape lists per body and collision filtering of the merged bodies ---
    builder.body_shapes.clear()
    builder.body_shapes[-1] = []
    for b in range(len(kept_bodies)):
        builder.body_shapes[b] = []
    for s, b in enumerate(builder.shape_body):
        builder.body_shapes.setdefault(b, []).append(s)
    for b, shapes in builder.body_shapes.items():
        if b < 0:
            continue
        for i, a in enumerate(shapes):
            for c in shapes[i + 1 :]:
                builder.shape_collision_filter_pairs.add((a, c))
    for j in range(len(kept_joints)):
        p, c = builder.joint_parent[j], builder.joint_child[j]
        if p >= 0 and builder.joint_collision_filter_parent[j]:
            builder._filter_joint_shapes(p, c)

    # --- custom attribute values keyed by body / joint / articulation index ---
    _remap_custom_attributes(builder, body_remap, merge_of, joint_remap, art_remap, final_body)

    return {
        "body_remap": body_remap,
        "joint_remap": joint_remap,
        "articulation_remap": art_remap,
        "body_merged_parent": merged_parent,
        "body_merged_transform": merged_tf,
        "merged_body_data": merged_data,
        "removed_joints": removed_labels,
    }


def _remap_custom_attributes(builder, body_remap, merge_of, joint_remap, art_remap, final_body) -> None:
    attrs = getattr(builder, "custom_attributes", None)
    if not attrs:
        return
    from .custom_attributes import AttributeFrequency

    maps = {
        AttributeFrequency.BODY: body_remap,
        AttributeFrequency.JOINT: joint_remap,
        AttributeFrequency.ARTICULATION: art_remap,
    }

    def ref_map(ref):
        key = getattr(ref, "name", ref)
        key = str(key).lower() if key is not None else None
        if key == "body":
            return lambda v: final_body(int(v)) if int(v) >= 0 else int(v)
        if key == "joint":
            return lambda v: joint_remap.get(int(v), -1) if int(v) >= 0 else int(v)
        if key == "articulation":
            return lambda v: art_remap.get(int(v), -1) if int(v) >= 0 else int(v)
        return None

    for attr in attrs.values():
        f = attr.frequency
        if not attr.is_custom_frequency and f in maps and isinstance(attr.values, dict):
            m = maps[f]
            attr.values = {m[i]: v for i, v in attr.values.items() if i in m and m[i] >= 0}
        if attr.references is not None and attr.reference_value_transformer is None:
            fn = ref_map(attr.references)
            if fn is None:
                continue
            try:
                if isinstance(attr.values, dict):
                    attr.values = {i: fn(v) for i, v in attr.values.items()}
                else:
                    attr.values = [None if v is None else fn(v) for v in attr.values]
            except (TypeError, ValueError):
                warn(
                    f"collapse_fixed_joints: values of custom attribute '{attr.key}' reference "
                    f"{attr.references} indices but are not integers; left unchanged"
                )

"""Builder validation and conversion into a device :class:`~armillary.Model` (vectorized with numpy)."""

from __future__ import annotations

import numpy as np
import warp as wp

from ._convert import stack
from .exceptions import warn
from .gravity import gravity_rows
from .model import Model


# ---------------------------------------------------------------------- validation
def validate_structure(b) -> None:
    """List lengths and cross references of the builder must be consistent (users may edit lists)."""
    nb, nj, ns = b.body_count, b.joint_count, b.shape_count
    groups = {
        "body": (nb, ("body_q", "body_qd", "body_com", "body_mass", "body_inertia", "body_label", "body_world", "body_flags", "body_lock_inertia")),
        "joint": (nj, ("joint_parent", "joint_child", "joint_X_p", "joint_X_c", "joint_label", "joint_world", "joint_enabled",
                       "joint_articulation", "joint_q_start", "joint_qd_start", "joint_dof_dim", "joint_mimic_joint", "joint_mimic_coeffs")),
        "joint coordinate": (b.joint_coord_count, ("joint_q", "joint_target_q", "joint_rest_q")),
        "joint DOF": (b.joint_dof_count, ("joint_qd", "joint_axis", "joint_limit_lower", "joint_limit_upper", "joint_limit_ke",
                                          "joint_limit_kd", "joint_target_qd", "joint_target_ke", "joint_target_kd", "joint_armature",
                                          "joint_friction", "joint_effort_limit", "joint_velocity_limit", "joint_stiffness",
                                          "joint_damping", "joint_target_mode", "joint_f", "joint_act")),
        "shape": (ns, ("shape_body", "shape_transform", "shape_scale", "shape_flags", "shape_world", "shape_label", "shape_source",
                       "shape_collision_group", "shape_margin", "shape_gap", "shape_collision_radius", "shape_material_mu",
                       "shape_material_ke", "shape_material_kd", "shape_material_kf", "shape_material_ka", "shape_material_restitution",
                       "shape_material_mu_torsional", "shape_material_mu_rolling", "shape_material_kh")),
        "articulation": (b.articulation_count, ("articulation_end", "articulation_label", "articulation_world")),
    }  # fmt: skip
    for kind, (n, names) in groups.items():
        for name in names:
            if len(getattr(b, name)) != n:
                raise ValueError(
                    f"ModelBuilder.{name} has {len(getattr(b, name))} entries but the builder has {n} {kind} entries; "
                    "builder lists must be edited consistently"
                )
    if nj:
        parent = np.asarray(b.joint_parent)
        child = np.asarray(b.joint_child)
        bad = np.nonzero((parent < -1) | (parent >= nb) | (child < 0) | (child >= nb))[0]
        if len(bad):
            j = int(bad[0])
            raise ValueError(
                f"Joint {j} ('{b.joint_label[j]}') references body parent={b.joint_parent[j]}, child={b.joint_child[j]}; "
                f"allowed: parent -1..{nb - 1}, child 0..{nb - 1}"
            )
    if ns:
        sb = np.asarray(b.shape_body)
        bad = np.nonzero((sb < -1) | (sb >= nb))[0]
        if len(bad):
            s = int(bad[0])
            raise ValueError(f"Shape {s} ('{b.shape_label[s]}') references body {b.shape_body[s]}; allowed -1..{nb - 1}")
    mass = np.asarray(b.body_mass, dtype=np.float64)
    bad = np.nonzero(~np.isfinite(mass) | (mass < 0))[0]
    if len(bad):
        i = int(bad[0])
        raise ValueError(f"Body {i} ('{b.body_label[i]}') has mass {b.body_mass[i]}; expected a finite value >= 0")


def validate_joints(b) -> None:
    """Reject cross-articulation joints and non-root orphan joints (rules in ``docs/model.md``)."""
    nj = b.joint_count
    if nj == 0:
        return
    parent = np.asarray(b.joint_parent, dtype=np.int64)
    child = np.asarray(b.joint_child, dtype=np.int64)
    art = np.asarray(b.joint_articulation, dtype=np.int64)
    # articulation owning each body (as the child of an articulated joint)
    body_art = np.full(b.body_count, -1, dtype=np.int64)
    in_art = art >= 0
    body_art[child[in_art]] = art[in_art]
    # cross-articulation: an articulated joint whose parent body belongs to a different articulation
    pa = np.where(parent >= 0, body_art[np.maximum(parent, 0)], -1)
    cross = np.nonzero(in_art & (parent >= 0) & (pa >= 0) & (pa != art))[0]
    if len(cross):
        j = int(cross[0])
        a, p, other = int(art[j]), int(parent[j]), int(pa[j])
        raise ValueError(
            f"Joint {j} ('{b.joint_label[j]}') in articulation {a} ('{b.articulation_label[a]}') has parent body {p} "
            f"('{b.body_label[p]}') in articulation {other} ('{b.articulation_label[other]}'). Articulations cannot be "
            "connected through joints. Add all connected joints to the same articulation."
        )
    # orphan: outside every articulation, not world-rooted, and its child is neither the parent nor
    # the child of any articulated joint (otherwise it closes a loop, e.g. onto an articulation's root)
    touched = np.zeros(max(b.body_count, 1), dtype=bool)
    touched[child[in_art]] = True
    art_parent = parent[in_art]
    touched[art_parent[art_parent >= 0]] = True
    free = ~in_art & (parent >= 0)
    orphan = np.nonzero(free & ~touched[child])[0]
    if len(orphan):
        names = ", ".join(f"{int(j)} ('{b.joint_label[int(j)]}')" for j in orphan[:10])
        j = int(orphan[0])
        raise ValueError(
            f"Found {len(orphan)} orphan joint(s) not belonging to any articulation: joint {names}. Joint {j} "
            f"('{b.joint_label[j]}') connects body {int(parent[j])} ('{b.body_label[int(parent[j])]}') to body "
            f"{int(child[j])} ('{b.body_label[int(child[j])]}'), which is neither the parent nor the child of any "
            "articulated joint, so it is neither a loop-closing joint nor a world-root joint. Call add_articulation() "
            "for it, or pass skip_validation_joints=True to finalize()."
        )


def joint_ancestors(parent: np.ndarray, child: np.ndarray, art: np.ndarray, body_count: int) -> np.ndarray:
    """``joint_ancestor``: for each joint, the joint whose child is its parent body, or -1.

    An articulated joint's ancestor is the joint of its own articulation whose child is its parent
    body (-1 for the articulation's root joint, whatever order the joints were added in); a joint
    outside every articulation takes the articulated joint whose child is its parent body, else
    such a non-articulated joint. The result is acyclic even for topologies that validation would
    reject (``skip_validation_joints=True``): a cycle of ancestors is cut at its lowest joint index,
    which becomes a root (-1).
    """
    nj = len(parent)
    if nj == 0:
        return np.full(0, -1, dtype=np.int64)
    nb = max(int(body_count), 1)
    idx = np.arange(nj, dtype=np.int64)
    in_art = art >= 0
    p = np.maximum(parent, 0)
    # child joint of each body: the last articulated joint with that child, else the last other one
    child_art = np.full(nb, -1, dtype=np.int64)
    child_art[child[in_art]] = idx[in_art]
    child_free = np.full(nb, -1, dtype=np.int64)
    child_free[child[~in_art]] = idx[~in_art]
    cand = child_art[p]
    same = (cand >= 0) & (art[np.maximum(cand, 0)] == art)
    out = np.where(in_art, np.where(same, cand, -1), np.where(cand >= 0, cand, child_free[p]))
    out[parent < 0] = -1
    return _cut_ancestor_cycles(out)


def _cut_ancestor_cycles(anc: np.ndarray) -> np.ndarray:
    """Set the ancestor of the lowest joint of every cycle of ``anc`` to -1 (in place)."""
    n = len(anc)
    if (anc < np.arange(n)).all():
        return anc  # every ancestor (or -1) precedes its joint, as in parent-first order: no cycle
    # pointer doubling: after >= n steps a joint still pointing somewhere lies on or leads into a cycle
    up = anc.copy()
    steps = 1
    while steps < n:
        up = np.where(up >= 0, up[np.maximum(up, 0)], -1)
        steps *= 2
    if not (up >= 0).any():
        return anc
    state = np.zeros(n, dtype=np.int8)  # 0 unvisited, 1 on the current path, 2 done
    for start in np.nonzero(up >= 0)[0]:
        path = []
        j = int(start)
        while j >= 0 and state[j] == 0:
            state[j] = 1
            path.append(j)
            j = int(anc[j])
        if j >= 0 and state[j] == 1:  # closed a new cycle: it is the tail of path from j
            cycle = path[path.index(j):]
            anc[min(cycle)] = -1
        for k in path:
            state[k] = 2
    return anc


def validate_joint_ordering(b) -> None:
    """Joints of each articulation must be in topological order: a joint's parent body is the world,
    or the child of an earlier joint of the same articulation (what generalized-coordinate solvers
    traverse)."""
    seen_children: dict[int, set] = {}
    for j in range(b.joint_count):
        a = b.joint_articulation[j]
        if a < 0:
            continue
        children = seen_children.setdefault(a, set())
        parent = b.joint_parent[j]
        if parent >= 0 and parent not in children:
            later = [k for k in range(j + 1, b.joint_count) if b.joint_articulation[k] == a and b.joint_child[k] == parent]
            if later:
                raise ValueError(
                    f"joint {j} ('{b.joint_label[j]}') of articulation {a} comes before joint {later[0]} "
                    f"('{b.joint_label[later[0]]}') that creates its parent body {parent} ('{b.body_label[parent]}'); "
                    "add joints parent-first (depth-first order) or pass skip_validation_joint_ordering=True"
                )
        children.add(b.joint_child[j])


def validate_shapes(b) -> None:
    """Shape data edited directly in the builder lists must still be valid (finite, sizes > 0)."""
    ns = b.shape_count
    if not ns:
        return
    tf = stack(b.shape_transform, 7, np.float64)
    scale = stack(b.shape_scale, 3, np.float64)
    checks = (
        ("transform", ~np.all(np.isfinite(tf), axis=1)),
        ("scale", ~np.all(np.isfinite(scale), axis=1) | np.any(scale < 0.0, axis=1)),
        ("margin", ~(np.asarray(b.shape_margin, dtype=np.float64) >= 0.0)),
        ("gap", ~np.isfinite(np.asarray(b.shape_gap, dtype=np.float64))),
    )
    for name in ("mu", "ke", "kd", "kf", "ka", "restitution", "mu_torsional", "mu_rolling"):
        values = np.asarray(getattr(b, f"shape_material_{name}"), dtype=np.float64)
        checks += ((f"material {name}", ~(np.isfinite(values) & (values >= 0.0))),)
    for what, mask in checks:
        bad = np.nonzero(mask)[0]
        if len(bad):
            i = int(bad[0])
            raise ValueError(
                f"shape {i} ('{b.shape_label[i]}'): invalid {what} (must be finite"
                f"{'' if what in ('transform', 'gap') else ' and >= 0'}); {len(bad)} shape(s) affected"
            )


def corrected_inertia(b, inertia: np.ndarray) -> np.ndarray:
    """Return body inertias with physically invalid tensors corrected, warning once per body.

    Valid tensors (symmetric, positive semi-definite, principal moments satisfying the triangle
    inequality ``I1 + I2 >= I3``) are returned unchanged. Invalid ones are symmetrized, negative
    principal moments are clamped to zero and the two smaller moments are raised to satisfy the
    triangle inequality. Non-finite tensors are errors.
    """
    if not len(inertia):
        return inertia
    if not np.all(np.isfinite(inertia)):
        i = int(np.nonzero(~np.all(np.isfinite(inertia.reshape(len(inertia), -1)), axis=1))[0][0])
        raise ValueError(f"body {i} ('{b.body_label[i]}'): inertia contains non-finite values")
    i64 = inertia.astype(np.float64)
    scale = np.maximum(np.abs(i64).reshape(len(i64), -1).max(axis=1), 1e-30)
    sym = 0.5 * (i64 + np.transpose(i64, (0, 2, 1)))
    asym = np.abs(i64 - sym).reshape(len(i64), -1).max(axis=1) > 1e-6 * scale
    eig, vec = np.linalg.eigh(sym)  # ascending principal moments
    tol = 1e-6 * scale
    negative = eig[:, 0] < -tol
    triangle = eig[:, 0] + eig[:, 1] < eig[:, 2] - tol
    invalid = np.nonzero(asym | negative | triangle)[0]
    if not len(invalid):
        return inertia
    out = inertia.copy()
    import warnings

    for i in invalid:
        e = np.maximum(eig[i], 0.0)
        deficit = e[2] - (e[0] + e[1])
        if deficit > 0.0:
            e[0] += 0.5 * deficit
            e[1] += 0.5 * deficit
        fixed = (vec[i] * e) @ vec[i].T
        reasons = [r for r, flag in (("is asymmetric", asym[i]), ("is not positive semi-definite", negative[i]),
                                     ("violates the triangle inequality", triangle[i])) if flag]  # fmt: skip
        warn(
            f"body {i} ('{b.body_label[i]}'): inertia {' and '.join(reasons)}; corrected to principal moments "
            f"{np.round(e, 9).tolist()} (pass skip_validation_inertia=True to keep it as given)"
        )
        out[i] = fixed.astype(inertia.dtype)
    return out


# ---------------------------------------------------------------------- helpers
def _world_start_fast(world: np.ndarray, world_count: int) -> np.ndarray:
    n = len(world)
    out = np.empty(world_count + 2, dtype=np.int32)
    out[world_count + 1] = n
    in_world = np.nonzero(world >= 0)[0]
    out[world_count] = int(in_world[-1]) + 1 if len(in_world) else n
    first = np.full(world_count + 1, -1, dtype=np.int64)
    if len(in_world):
        w = world[in_world]
        # first occurrence of each world
        uniq, pos = np.unique(w, return_index=True)
        first[uniq[uniq < world_count]] = in_world[pos[uniq < world_count]]
    for k in range(world_count - 1, -1, -1):
        out[k] = first[k] if first[k] >= 0 else out[k + 1]
    return out


def _inv_mass(mass: np.ndarray) -> np.ndarray:
    out = np.zeros_like(mass)
    pos = mass > 0.0
    out[pos] = 1.0 / mass[pos]
    return out


def _inv_inertia(inertia: np.ndarray) -> np.ndarray:
    """Batched inverse; singular non-zero tensors get a pseudo-inverse, zero tensors stay zero."""
    out = np.zeros_like(inertia)
    if len(inertia) == 0:
        return out
    i64 = inertia.astype(np.float64)
    mag = np.abs(i64).reshape(len(i64), -1).max(axis=1)
    det = np.linalg.det(i64)
    ok = (mag > 0) & (np.abs(det) > 1e-12 * mag**3)
    if ok.any():
        out[ok] = np.linalg.inv(i64[ok]).astype(inertia.dtype)
    for i in np.nonzero(~ok & (mag > 0))[0]:
        out[i] = np.linalg.pinv(i64[i]).astype(inertia.dtype)
    return out


# ---------------------------------------------------------------------- finalize
def finalize_builder(b, device=None, *, requires_grad=False, skip_validation_joints=False,
                     skip_validation_structure=False, skip_validation_worlds=False, skip_validation_shapes=False,
                     skip_validation_inertia=False, skip_validation_joint_ordering=True) -> Model:  # fmt: skip
    if not skip_validation_structure:
        validate_structure(b)
    if not skip_validation_joints:
        validate_joints(b)
    if not skip_validation_joint_ordering:
        validate_joint_ordering(b)
    if not skip_validation_shapes:
        validate_shapes(b)
    if b.current_world != -1 and not skip_validation_worlds:
        raise RuntimeError(
            f"finalize() called inside an open world context (current_world={b.current_world}); call end_world() first"
        )

    m = Model(device)
    dev = m.device
    g = bool(requires_grad)
    m.requires_grad = g
    m.up_axis = b.up_axis
    m.world_count = max(1, int(b.world_count))
    W = m.world_count

    def arr(values, dtype, grad=False, shape=None):
        a = np.asarray(values)
        if shape is not None:
            a = a.reshape(shape)
        return wp.array(a, dtype=dtype, device=dev, requires_grad=grad and g)

    f32, i32 = np.float32, np.int32

    # ---- worlds
    # one row per world and a last row for the global world -1 (a single row without worlds)
    grav = np.tile(np.asarray(b.gravity, dtype=f32), (gravity_rows(W, b.world_count), 1))
    for w, gw in enumerate(getattr(b, "world_gravity", [])):
        if gw is not None and w < W and b.world_count > 0:
            grav[w] = gw
    m.gravity = arr(grav, wp.vec3, grad=True)
    m.world_label = list(getattr(b, "world_label", [])) or [f"world_{w}" for w in range(W)]

    # ---- bodies
    nb = b.body_count
    m.body_count = nb
    mass = np.asarray(b.body_mass, dtype=f32).reshape(nb)
    inertia = stack(b.body_inertia, 9, f32).reshape(nb, 3, 3)
    if not skip_validation_inertia:
        inertia = corrected_inertia(b, inertia)
    m.body_q = arr(stack(b.body_q, 7, f32), wp.transform, True)
    m.body_qd = arr(stack(b.body_qd, 6, f32), wp.spatial_vector, True)
    m.body_com = arr(stack(b.body_com, 3, f32), wp.vec3, True)
    m.body_mass = arr(mass, wp.float32, True)
    m.body_inv_mass = arr(_inv_mass(mass), wp.float32, True)
    m.body_inertia = arr(inertia, wp.mat33, True)
    m.body_inv_inertia = arr(_inv_inertia(inertia), wp.mat33, True)
    body_world = np.asarray(b.body_world, dtype=i32).reshape(nb)
    m.body_world = arr(body_world, wp.int32)
    m.body_flags = arr(np.asarray(b.body_flags, dtype=i32).reshape(nb), wp.int32)
    m.body_label = list(b.body_label)
    m.body_shapes = {k: list(v) for k, v in b.body_shapes.items()}
    m.body_world_start = arr(_world_start_fast(body_world, W), wp.int32)

    # ---- joints
    nj = b.joint_count
    m.joint_count = nj
    m.joint_dof_count = int(b.joint_dof_count)
    m.joint_coord_count = int(b.joint_coord_count)
    parent = np.asarray(b.joint_parent, dtype=i32).reshape(nj)
    child = np.asarray(b.joint_child, dtype=i32).reshape(nj)
    jart = np.asarray(b.joint_articulation, dtype=i32).reshape(nj)
    jworld = np.asarray(b.joint_world, dtype=i32).reshape(nj)
    q_start = np.append(np.asarray(b.joint_q_start, dtype=i32).reshape(nj), i32(b.joint_coord_count))
    qd_start = np.append(np.asarray(b.joint_qd_start, dtype=i32).reshape(nj), i32(b.joint_dof_count))
    m.joint_type = arr(np.asarray(b.joint_type, dtype=i32).reshape(nj), wp.int32)
    m.joint_parent = arr(parent, wp.int32)
    m.joint_child = arr(child, wp.int32)
    m.joint_X_p = arr(stack(b.joint_X_p, 7, f32), wp.transform, True)
    m.joint_X_c = arr(stack(b.joint_X_c, 7, f32), wp.transform, True)
    m.joint_world = arr(jworld, wp.int32)
    m.joint_articulation = arr(jart, wp.int32)
    m.joint_enabled = arr(np.asarray(b.joint_enabled, dtype=bool).reshape(nj), wp.bool)
    m.joint_label = list(b.joint_label)
    m.joint_q_start = arr(q_start, wp.int32)
    m.joint_qd_start = arr(qd_start, wp.int32)
    m.joint_target_q_start = m.joint_q_start
    dof_dim = np.asarray(b.joint_dof_dim, dtype=i32).reshape(nj, 2)
    m.joint_dof_dim = wp.array(dof_dim, dtype=wp.int32, device=dev)
    m.joint_mimic_joint = arr(np.asarray(b.joint_mimic_joint, dtype=i32).reshape(nj), wp.int32)
    m.joint_mimic_coeffs = arr(np.asarray(b.joint_mimic_coeffs, dtype=f32).reshape(nj, 2), wp.vec2, True)
    m.joint_world_start = arr(_world_start_fast(jworld, W), wp.int32)

    m.joint_ancestor = arr(joint_ancestors(parent, child, jart, nb).astype(i32), wp.int32)

    # per coordinate
    nc = m.joint_coord_count
    m.joint_q = arr(np.asarray(b.joint_q, dtype=f32).reshape(nc), wp.float32, True)
    m.joint_target_q = arr(np.asarray(b.joint_target_q, dtype=f32).reshape(nc), wp.float32, True)
    m.joint_rest_q = arr(np.asarray(b.joint_rest_q, dtype=f32).reshape(nc), wp.float32, True)
    coord_world = np.repeat(jworld, np.diff(q_start)) if nj else np.zeros(0, dtype=i32)
    m.joint_coord_world_start = arr(_world_start_fast(coord_world, W), wp.int32)

    # per DOF
    nd = m.joint_dof_count

    def dof(name, dtype=f32, wdtype=wp.float32, grad=True):
        return arr(np.asarray(getattr(b, name), dtype=dtype).reshape(nd), wdtype, grad)

    m.joint_qd = dof("joint_qd")
    m.joint_f = dof("joint_f")
    m.joint_act = dof("joint_act")
    m.joint_axis = arr(stack(b.joint_axis, 3, f32), wp.vec3, True)
    for name in ("joint_limit_lower", "joint_limit_upper", "joint_limit_ke", "joint_limit_kd", "joint_target_qd",
                 "joint_target_ke", "joint_target_kd", "joint_armature", "joint_friction", "joint_effort_limit",
                 "joint_velocity_limit", "joint_stiffness", "joint_damping"):  # fmt: skip
        setattr(m, name, dof(name))
    m.joint_target_mode = dof("joint_target_mode", i32, wp.int32, False)
    dof_world = np.repeat(jworld, np.diff(qd_start)) if nj else np.zeros(0, dtype=i32)
    m.joint_dof_world_start = arr(_world_start_fast(dof_world, W), wp.int32)

    # ---- articulations
    na = b.articulation_count
    m.articulation_count = na
    a_start = np.asarray(b.articulation_start, dtype=i32).reshape(na)
    a_end = np.asarray(b.articulation_end, dtype=i32).reshape(na)
    m.articulation_start = arr(np.append(a_start, i32(nj)), wp.int32)
    m.articulation_end = arr(a_end, wp.int32)
    aworld = np.asarray(b.articulation_world, dtype=i32).reshape(na)
    m.articulation_world = arr(aworld, wp.int32)
    m.articulation_label = list(b.articulation_label)
    m.articulation_world_start = arr(_world_start_fast(aworld, W), wp.int32)
    if na:
        m.max_dofs_per_articulation = int((qd_start[a_end] - qd_start[a_start]).max())
        m.max_joints_per_articulation = int((a_end - a_start).max())

    # ---- shapes
    ns = b.shape_count
    m.shape_count = ns
    sworld = np.asarray(b.shape_world, dtype=i32).reshape(ns)
    m.shape_type = arr(np.asarray(b.shape_type, dtype=i32).reshape(ns), wp.int32)
    m.shape_body = arr(np.asarray(b.shape_body, dtype=i32).reshape(ns), wp.int32)
    m.shape_transform = arr(stack(b.shape_transform, 7, f32), wp.transform, True)
    m.shape_scale = arr(stack(b.shape_scale, 3, f32), wp.vec3, True)
    m.shape_flags = arr(np.asarray(b.shape_flags, dtype=i32).reshape(ns), wp.int32)
    m.shape_world = arr(sworld, wp.int32)
    m.shape_collision_group = arr(np.asarray(b.shape_collision_group, dtype=i32).reshape(ns), wp.int32)
    m.shape_is_solid = arr(np.asarray(b.shape_is_solid, dtype=bool).reshape(ns), wp.bool)
    for name in ("shape_margin", "shape_gap", "shape_collision_radius", "shape_material_mu", "shape_material_ke",
                 "shape_material_kd", "shape_material_kf", "shape_material_ka", "shape_material_kh",
                 "shape_material_restitution", "shape_material_mu_torsional", "shape_material_mu_rolling",
                 "shape_opacity"):  # fmt: skip
        setattr(m, name, arr(np.asarray(getattr(b, name), dtype=f32).reshape(ns), wp.float32, True))
    m.shape_color = arr(stack(b.shape_color, 3, f32), wp.vec3)
    m.shape_label = list(b.shape_label)
    m.shape_source = list(b.shape_source)
    m.shape_sdf_max_resolution = list(b.shape_sdf_max_resolution)
    m.shape_sdf_target_voxel_size = list(b.shape_sdf_target_voxel_size)
    m.shape_sdf_narrow_band_range = list(b.shape_sdf_narrow_band_range)
    m.shape_world_start = arr(_world_start_fast(sworld, W), wp.int32)
    m.shape_collision_filter_pairs = set(b.shape_collision_filter_pairs)
    m.authored_features = tuple(b.authored_features)

    # ---- plugins of the builder (particles, then custom attributes)
    b._finalize_particles(m, dev, g)
    b._finalize_rods(m, dev, g)
    b._finalize_custom_attributes(m, dev, g)
    b._finalize_actuators(m, dev, g)
    return m


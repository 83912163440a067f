"""Write a finalized :class:`armillary.Model` as a UsdPhysics stage (``armillary.usd.export``).

Layout of the written stage (Z or Y up as the model, metersPerUnit = kilogramsPerUnit = 1)::

    /World                       Xform, the default prim
      /PhysicsScene              PhysicsScene (gravity)
      /PhysicsMaterials/...      one UsdShade Material (PhysicsMaterialAPI + NewtonMaterialAPI) per distinct material
      /<articulation>            Xform with PhysicsArticulationRootAPI (+ NewtonArticulationRootAPI)
        /<body>                  Xform at X_WB with PhysicsRigidBodyAPI + PhysicsMassAPI
          /<shape>               UsdGeom gprim at X_BS (PhysicsCollisionAPI when it collides)
        /<joint>                 UsdPhysics joint (+ NewtonJointAPI), frames X_B0J / X_B1J
      /<body>                    bodies outside any articulation (floating bodies: no joint)
      /StaticShapes/<shape>      shapes attached to the world, at X_WS

Joints keep their DOF order and axes: a REVOLUTE / PRISMATIC joint whose axis is not a positive
coordinate axis of its frame gets both frames rotated so that the axis is +X; a D6 joint whose
axes are the positive coordinate axes of its frame, in increasing order, and whose NewtonJointAPI
values are the same for every DOF (in USD units) is a generic ``PhysicsJoint`` with
PhysicsLimitAPI / PhysicsDriveAPI per axis (other axes locked: low > high); any other D6 is written
as stacked single-DOF joints between the same bodies (one frame each, DOF order = prim order)
under an articulation root with ``newton:jointsAddMobility = true``. Units: limits, drive targets
and NewtonJointAPI values in degrees for angular DOFs (gains per degree), armature and friction
as they are. Bodies are placed where every joint but FREE ones is at coordinate zero (USD has no
joint coordinates). A passive joint spring is written as ``mjc:stiffness`` / ``mjc:springref``
(MuJoCo's schema; read with ``SchemaResolverMjc``). A heightfield is written as a triangle mesh.

Not expressible in UsdPhysics (``on_unsupported="error"`` raises :class:`USDExportError` naming the
entity; ``"skip"`` leaves it out with a warning): ellipsoid shapes, curved-side cylinders, ROD
joints, D6 joints with non-orthogonal axes (or needing stacking outside an articulation), ball-joint
limits. Not written at all: tendons, equality constraints, mimic joints, actuator models, particles,
custom attributes. Collision filter pairs and ``newton:collision_group`` are written.
"""

from __future__ import annotations

import math
import os
import re
import warnings

import numpy as np

from armillary.sim.rotations import quat_from_matrix as _quat_from_matrix
from armillary.sim.rotations import quat_multiply as _qmul
from armillary.sim.rotations import quat_rotate as _qrot

__all__ = ["USDExportError", "export"]

# armillary enum values (kept numeric so this module needs nothing but numpy at import time)
_PRISMATIC, _REVOLUTE, _BALL, _FIXED, _FREE, _DISTANCE, _D6, _ROD = range(8)
_PLANE, _HFIELD, _SPHERE, _CAPSULE, _ELLIPSOID, _CYLINDER, _BOX, _MESH, _CONE, _CONVEX_MESH = range(1, 11)
_COLLIDE_SHAPES, _SITE = 2, 8
_VISIBLE = 1

#: |limit| at or above this is "unlimited" (armillary's default limits are +-1e10)
_UNLIMITED = 1e9
_RAD2DEG = 180.0 / math.pi
_AXES = ("X", "Y", "Z")


class USDExportError(ValueError):
    """A model entity that UsdPhysics cannot express; the message names it."""


# --------------------------------------------------------------------------------------------- math



def _quat_x_to(axis) -> np.ndarray:
    """xyzw quaternion of the smallest rotation taking +X onto the unit vector ``axis``."""
    a = np.asarray(axis, dtype=float)
    c = a[0]
    if c > 1.0 - 1e-12:
        return np.array([0.0, 0.0, 0.0, 1.0])
    if c < -1.0 + 1e-12:
        return np.array([0.0, 0.0, 1.0, 0.0])  # half turn about Z
    n = np.cross([1.0, 0.0, 0.0], a)
    n /= np.linalg.norm(n)
    half = 0.5 * math.acos(max(-1.0, min(1.0, c)))
    return np.array([*(n * math.sin(half)), math.cos(half)])


def _tmul(a, b) -> np.ndarray:
    """Compose 7-vector transforms (p, q xyzw): ``a * b``."""
    return np.array([*(np.asarray(a[:3]) + _qrot(a[3:], b[:3])), *_qmul(a[3:], b[3:])])


def principal_inertia(inertia) -> tuple[np.ndarray, np.ndarray]:
    """``(diagonal (3,), principal axes xyzw quaternion)`` with ``I = R diag(d) R^T`` [kg m^2]."""
    i = 0.5 * (np.asarray(inertia, dtype=float).reshape(3, 3) + np.asarray(inertia, dtype=float).reshape(3, 3).T)
    if not np.any(i):
        return np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0])
    if np.allclose(i, np.diag(np.diag(i)), rtol=0.0, atol=1e-12 * max(1.0, float(np.abs(i).max()))):
        return np.diag(i).copy(), np.array([0.0, 0.0, 0.0, 1.0])
    d, v = np.linalg.eigh(i)
    if np.linalg.det(v) < 0:
        v[:, 2] = -v[:, 2]
    return d, _quat_from_matrix(v)


# ---------------------------------------------------------------------------------------- naming
_IDENT = re.compile(r"[^A-Za-z0-9_]")


def _identifier(label: str | None, fallback: str) -> str:
    """A valid USD prim name from an entity label (its last path component)."""
    text = (label or "").strip().rstrip("/").split("/")[-1]
    text = _IDENT.sub("_", text)
    if not text or not text.strip("_"):
        text = fallback
    if text[0].isdigit():
        text = "_" + text
    return text


class _Names:
    """Unique child names per parent path."""

    def __init__(self):
        self._used: dict[str, set[str]] = {}

    def child(self, parent: str, label: str | None, fallback: str) -> str:
        used = self._used.setdefault(parent, set())
        base = _identifier(label, fallback)
        name, k = base, 1
        while name in used:
            name = f"{base}_{k}"
            k += 1
        used.add(name)
        return f"{parent}/{name}" if parent != "/" else f"/{name}"


# ---------------------------------------------------------------------------------------- export
def export(model, path, *, world: int | None = None, on_unsupported: str = "error", root_path: str = "/World"):
    """Write ``model`` (a finalized :class:`armillary.Model`) as a UsdPhysics stage.

    Args:
        model: the model; its bodies are placed at ``Model.body_q`` (X_WB, m).
        path: output file (``.usda`` / ``.usd`` / ``.usdc``), or a ``Usd.Stage`` to author into.
        world: only the entities of this world (and the global ones, world -1); ``None``: all worlds.
        on_unsupported: ``"error"`` (raise :class:`USDExportError`) or ``"skip"`` (warn and leave out)
            for what UsdPhysics cannot express (see the module docstring).
        root_path: path of the default prim that holds everything.

    Returns:
        dict with ``"stage"`` and prim-path maps ``"body_paths"`` (body index -> path),
        ``"joint_paths"`` (joint index -> list of joint prim paths), ``"shape_paths"`` (shape index
        -> path), ``"articulation_paths"`` (articulation index -> list of articulation root prim
        paths, one per connected tree of the articulation) and ``"skipped"``
        (descriptions of what was left out).
    """
    from pxr import Gf, Usd, UsdGeom, UsdPhysics

    if on_unsupported not in ("error", "skip"):
        raise ValueError(f"on_unsupported must be 'error' or 'skip', got {on_unsupported!r}")
    if isinstance(path, Usd.Stage):
        stage, out_path = path, None
    else:
        out_path = os.fspath(path)
        if not out_path.endswith((".usd", ".usda", ".usdc")):
            raise ValueError(f"export: {out_path!r} must end with .usd, .usda or .usdc")
        stage = Usd.Stage.CreateInMemory()
    skipped: list[str] = []

    def unsupported(what: str):
        if on_unsupported == "error":
            raise USDExportError(f"{what} (pass on_unsupported='skip' to leave it out)")
        skipped.append(what)
        warnings.warn(f"USD export: {what}; left out", stacklevel=3)

    # ---- host copies (one per array)
    def host(name, default=None):
        a = getattr(model, name, None)
        return default if a is None else a.numpy()

    nb, nj, ns = int(model.body_count), int(model.joint_count), int(model.shape_count)
    body_q = _rest_body_q(model, host)
    body_mass = host("body_mass", np.zeros(0))
    body_com = host("body_com", np.zeros((0, 3)))
    body_inertia = host("body_inertia", np.zeros((0, 3, 3)))
    body_world = host("body_world", np.zeros(0, dtype=np.int32))
    body_flags = host("body_flags", np.ones(nb, dtype=np.int32))
    body_label = list(getattr(model, "body_label", []) or [f"body_{i}" for i in range(nb)])
    joint_label = list(getattr(model, "joint_label", []) or [f"joint_{i}" for i in range(nj)])
    shape_label = list(getattr(model, "shape_label", []) or [f"shape_{i}" for i in range(ns)])

    def in_world(w) -> bool:
        return world is None or int(w) == -1 or int(w) == int(world)

    # ---- stage metadata, scene
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z if int(model.up_axis) == 2 else UsdGeom.Tokens.y)
    if int(model.up_axis) == 0:
        raise USDExportError("model.up_axis is X; USD stages are Y or Z up")
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    UsdPhysics.SetStageKilogramsPerUnit(stage, 1.0)
    root = UsdGeom.Xform.Define(stage, root_path).GetPrim()
    stage.SetDefaultPrim(root)
    names = _Names()
    names._used.setdefault(root_path, set()).update({"PhysicsScene", "PhysicsMaterials", "StaticShapes"})

    g = host("gravity", np.zeros((1, 3)))
    g = np.asarray(g[world if world is not None and world < len(g) else 0], dtype=float).reshape(3)
    scene = UsdPhysics.Scene.Define(stage, f"{root_path}/PhysicsScene")
    gmag = float(np.linalg.norm(g))
    up = np.zeros(3)
    up[int(model.up_axis)] = 1.0
    scene.CreateGravityDirectionAttr(Gf.Vec3f(*(g / gmag if gmag > 0 else -up)))
    scene.CreateGravityMagnitudeAttr(gmag)

    result = _write(model, stage, root_path, names, host, unsupported, in_world, nb, nj, ns, body_q, body_mass,
                    body_com, body_inertia, body_world, body_flags, body_label, joint_label, shape_label)
    result["stage"] = stage
    result["skipped"] = skipped
    if out_path is not None:
        stage.GetRootLayer().Export(out_path)
    return result


def _write(model, stage, root_path, names, host, unsupported, in_world, nb, nj, ns, body_q, body_mass, body_com,
           body_inertia, body_world, body_flags, body_label, joint_label, shape_label) -> dict:  # fmt: skip
    from pxr import Gf, Sdf, UsdGeom, UsdPhysics, UsdShade, Vt

    jtype = host("joint_type", np.zeros(0, dtype=np.int32))
    jparent = host("joint_parent", np.zeros(0, dtype=np.int32))
    jchild = host("joint_child", np.zeros(0, dtype=np.int32))
    jart = host("joint_articulation", np.full(nj, -1, dtype=np.int32))
    jworld = host("joint_world", np.zeros(nj, dtype=np.int32))
    jenabled = host("joint_enabled", np.ones(nj, dtype=bool))
    X_p = host("joint_X_p", np.zeros((0, 7)))
    X_c = host("joint_X_c", np.zeros((0, 7)))
    qd_start = host("joint_qd_start", np.zeros(1, dtype=np.int32))
    dof_dim = host("joint_dof_dim", np.zeros((0, 2), dtype=np.int32)).reshape(-1, 2)
    axis = host("joint_axis", np.zeros((0, 3)))
    dof = {n: host(f"joint_{n}") for n in ("limit_lower", "limit_upper", "limit_ke", "limit_kd", "target_ke",
                                           "target_kd", "armature", "friction", "effort_limit", "velocity_limit",
                                           "damping", "target_qd", "stiffness")}  # fmt: skip
    target_q = host("joint_target_q")
    rest_q = host("joint_rest_q")
    q_start = host("joint_q_start", np.zeros(1, dtype=np.int32))

    na = int(getattr(model, "articulation_count", 0) or 0)
    art_label = list(getattr(model, "articulation_label", []) or [f"articulation_{a}" for a in range(na)])

    # ---- which articulation each body belongs to (through its joints)
    body_art = np.full(nb, -1, dtype=np.int64)
    for j in range(nj):
        if jart[j] >= 0 and in_world(jworld[j]):
            for b in (jparent[j], jchild[j]):
                if b >= 0 and body_art[b] < 0:
                    body_art[b] = jart[j]

    # one articulation prim per connected tree (an armillary articulation may hold several trees)
    root_of = list(range(nb))

    def find(b):
        while root_of[b] != b:
            root_of[b] = root_of[root_of[b]]
            b = root_of[b]
        return b

    for j in range(nj):
        if jart[j] >= 0 and jparent[j] >= 0 and in_world(jworld[j]):
            root_of[find(int(jchild[j]))] = find(int(jparent[j]))
    art_paths: dict[int, list[str]] = {}
    group_path: dict[tuple, str] = {}
    group_prim = {}
    for b in range(nb):
        a = int(body_art[b])
        if a < 0 or (a, find(b)) in group_path:
            continue
        p = names.child(root_path, art_label[a] if a < len(art_label) else None, f"articulation_{a}")
        prim = UsdGeom.Xform.Define(stage, p).GetPrim()
        UsdPhysics.ArticulationRootAPI.Apply(prim)
        group_path[(a, find(b))] = p
        group_prim[(a, find(b))] = prim
        art_paths.setdefault(a, []).append(p)

    def group_of(b):
        return (int(body_art[b]), find(b)) if b >= 0 and body_art[b] >= 0 else None

    # ---- bodies
    body_paths: dict[int, str] = {}
    for b in range(nb):
        if not in_world(body_world[b]):
            continue
        parent = group_path.get(group_of(b), root_path)
        p = names.child(parent, body_label[b], f"body_{b}")
        xf = UsdGeom.Xform.Define(stage, p)
        _set_xform(xf, body_q[b])
        prim = xf.GetPrim()
        rb = UsdPhysics.RigidBodyAPI.Apply(prim)
        if int(body_flags[b]) & 2 and not int(body_flags[b]) & 1:
            rb.CreateKinematicEnabledAttr(True)
        mapi = UsdPhysics.MassAPI.Apply(prim)
        mapi.CreateMassAttr(float(body_mass[b]))
        mapi.CreateCenterOfMassAttr(Gf.Vec3f(*map(float, body_com[b])))
        d, q = principal_inertia(body_inertia[b])
        if np.any(d > 0):  # zero inertia: left unauthored (UsdPhysics reads 0 as "not authored")
            mapi.CreateDiagonalInertiaAttr(Gf.Vec3f(*map(float, np.maximum(d, 0.0))))
            mapi.CreatePrincipalAxesAttr(Gf.Quatf(float(q[3]), float(q[0]), float(q[1]), float(q[2])))
        body_paths[b] = p

    # ---- shapes
    shape_paths: dict[int, str] = {}
    shape_type = host("shape_type", np.zeros(0, dtype=np.int32))
    shape_body = host("shape_body", np.zeros(0, dtype=np.int32))
    shape_X = host("shape_transform", np.zeros((0, 7)))
    shape_scale = host("shape_scale", np.zeros((0, 3)))
    shape_flags = host("shape_flags", np.zeros(0, dtype=np.int32))
    shape_world = host("shape_world", np.zeros(0, dtype=np.int32))
    mat = {n: host(f"shape_material_{n}") for n in ("mu", "restitution", "mu_torsional", "mu_rolling", "ke", "kd",
                                                    "kf", "ka")}  # fmt: skip
    margin, gap, cgroup = host("shape_margin"), host("shape_gap"), host("shape_collision_group")
    materials: dict[tuple, str] = {}
    static_root = None
    for s in range(ns):
        if not in_world(shape_world[s]):
            continue
        b = int(shape_body[s])
        if b >= 0:
            if b not in body_paths:
                continue
            parent = body_paths[b]
        else:
            if static_root is None:
                static_root = f"{root_path}/StaticShapes"
                UsdGeom.Xform.Define(stage, static_root)
            parent = static_root
        t, sc, flags = int(shape_type[s]), shape_scale[s].astype(float), int(shape_flags[s])
        what = f"shape {s} ('{shape_label[s]}')"
        p = names.child(parent, shape_label[s], f"shape_{s}")
        if t == _SPHERE:
            g = UsdGeom.Sphere.Define(stage, p)
            g.CreateRadiusAttr(sc[0])
            extra_scale = None
        elif t == _BOX:
            g = UsdGeom.Cube.Define(stage, p)
            g.CreateSizeAttr(2.0)  # full edge length 2 scaled by the half extents
            extra_scale = sc
        elif t in (_CAPSULE, _CYLINDER, _CONE):
            cls = {_CAPSULE: UsdGeom.Capsule, _CYLINDER: UsdGeom.Cylinder, _CONE: UsdGeom.Cone}[t]
            if t == _CYLINDER and sc[2] > 0:
                unsupported(f"{what}: cylinder barrel_radius={sc[2]} (curved side) is not expressible")
                names._used[parent].discard(p.rsplit("/", 1)[1])
                continue
            g = cls.Define(stage, p)
            g.CreateRadiusAttr(sc[0])
            g.CreateHeightAttr(2.0 * sc[1])
            g.CreateAxisAttr(UsdGeom.Tokens.z)
            extra_scale = None
        elif t in (_MESH, _CONVEX_MESH, _HFIELD):
            src = model.shape_source[s] if s < len(getattr(model, "shape_source", [])) else None
            if t == _HFIELD:
                verts, idx = _heightfield_mesh(src)
            else:
                verts = getattr(src, "vertices", None)
                idx = getattr(src, "indices", None)
            if verts is None or idx is None:
                unsupported(f"{what}: mesh shape without a source mesh")
                names._used[parent].discard(p.rsplit("/", 1)[1])
                continue
            verts = np.asarray(verts, dtype=np.float32).reshape(-1, 3)
            idx = np.asarray(idx, dtype=np.int32).reshape(-1)
            g = UsdGeom.Mesh.Define(stage, p)
            g.CreatePointsAttr(Vt.Vec3fArray.FromNumpy(verts))
            g.CreateFaceVertexCountsAttr(Vt.IntArray.FromNumpy(np.full(len(idx) // 3, 3, dtype=np.int32)))
            g.CreateFaceVertexIndicesAttr(Vt.IntArray.FromNumpy(idx))
            g.CreateSubdivisionSchemeAttr(UsdGeom.Tokens.none)
            extra_scale = sc
        elif t == _PLANE:
            g = UsdGeom.Plane.Define(stage, p)
            g.CreateAxisAttr(UsdGeom.Tokens.z)
            g.CreateWidthAttr(sc[0])
            g.CreateLengthAttr(sc[1])
            extra_scale = None
        else:
            kind = {_ELLIPSOID: "ellipsoid"}.get(t, f"type {t}")
            unsupported(f"{what}: {kind} shapes have no UsdPhysics collision geometry")
            names._used[parent].discard(p.rsplit("/", 1)[1])
            continue
        _set_xform(g, shape_X[s], extra_scale)
        prim = g.GetPrim()
        if not flags & _VISIBLE:
            g.CreateVisibilityAttr(UsdGeom.Tokens.invisible)
        if flags & _SITE:
            g.CreatePurposeAttr(UsdGeom.Tokens.guide)
        if flags & _COLLIDE_SHAPES:
            UsdPhysics.CollisionAPI.Apply(prim).CreateCollisionEnabledAttr(True)
            if t in (_MESH, _HFIELD):
                UsdPhysics.MeshCollisionAPI.Apply(prim).CreateApproximationAttr(UsdPhysics.Tokens.none)
            elif t == _CONVEX_MESH:
                UsdPhysics.MeshCollisionAPI.Apply(prim).CreateApproximationAttr(UsdPhysics.Tokens.convexHull)
            if cgroup is not None and int(cgroup[s]) != 1:  # 1: the default group
                prim.CreateAttribute("newton:collision_group", Sdf.ValueTypeNames.Int).Set(int(cgroup[s]))
            if margin is not None:
                _apply_api(prim, "NewtonCollisionAPI")
                prim.CreateAttribute("newton:contactMargin", Sdf.ValueTypeNames.Float).Set(float(margin[s]))
                prim.CreateAttribute("newton:contactGap", Sdf.ValueTypeNames.Float).Set(float(gap[s]))
            key = tuple(round(float(mat[n][s]), 9) if mat[n] is not None else None for n in sorted(mat))
            mpath = materials.get(key)
            if mpath is None:
                mpath = f"{root_path}/PhysicsMaterials/material_{len(materials)}"
                materials[key] = mpath
                m = UsdShade.Material.Define(stage, mpath)
                mapi = UsdPhysics.MaterialAPI.Apply(m.GetPrim())
                if mat["mu"] is not None:
                    mapi.CreateStaticFrictionAttr(float(mat["mu"][s]))
                    mapi.CreateDynamicFrictionAttr(float(mat["mu"][s]))
                if mat["restitution"] is not None:
                    mapi.CreateRestitutionAttr(float(mat["restitution"][s]))
                mprim = m.GetPrim()
                _apply_api(mprim, "NewtonMaterialAPI")
                for key_name, attr in (("mu_torsional", "torsionalFriction"), ("mu_rolling", "rollingFriction"),
                                       ("ke", "contactStiffness"), ("kd", "contactDamping"),
                                       ("kf", "contactFrictionGain"), ("ka", "contactAdhesion")):  # fmt: skip
                    if mat[key_name] is not None:
                        mprim.CreateAttribute(f"newton:{attr}", Sdf.ValueTypeNames.Float).Set(float(mat[key_name][s]))
            binding = UsdShade.MaterialBindingAPI.Apply(prim)
            binding.Bind(UsdShade.Material(stage.GetPrimAtPath(mpath)), UsdShade.Tokens.weakerThanDescendants,
                         "physics")  # fmt: skip
        shape_paths[s] = p

    # ---- joints
    joint_paths: dict[int, list[str]] = {}
    mobility_arts: set[int] = set()
    for j in range(nj):
        if not in_world(jworld[j]):
            continue
        t = int(jtype[j])
        what = f"joint {j} ('{joint_label[j]}')"
        if t == _FREE:
            continue  # a floating body is a rigid body without a joint
        b0, b1 = int(jparent[j]), int(jchild[j])
        if (b0 >= 0 and b0 not in body_paths) or b1 not in body_paths:
            continue
        if t == _ROD:
            unsupported(f"{what}: ROD joints have no UsdPhysics equivalent")
            continue
        a = int(jart[j])
        parent = group_path.get(group_of(b1), root_path)
        s0, n_lin, n_ang = int(qd_start[j]), int(dof_dim[j][0]), int(dof_dim[j][1])
        dofs = list(range(s0, s0 + n_lin + n_ang))
        Xp = np.asarray(X_p[j], dtype=float)
        Xc = np.asarray(X_c[j], dtype=float)
        common = dict(b0=body_paths.get(b0), b1=body_paths[b1], enabled=bool(jenabled[j]),
                      exclude=(a < 0 and body_art[b1] >= 0) or (a >= 0 and _is_loop(j, jart, jchild, jtype)))

        def dof_values(k):
            out = {n: (None if v is None else float(v[k])) for n, v in dof.items()}
            if rest_q is not None and t in (_REVOLUTE, _PRISMATIC, _D6):  # 1 coordinate per DOF
                out["rest_q"] = float(rest_q[int(q_start[j]) + k - s0])
            return out

        if t == _FIXED:
            paths = [_write_joint(stage, names, parent, joint_label[j], j, "fixed", Xp, Xc, None, [], **common)]
        elif t in (_REVOLUTE, _PRISMATIC):
            kind = "revolute" if t == _REVOLUTE else "prismatic"
            token, r = _axis_frame(axis[dofs[0]])
            paths = [_write_joint(stage, names, parent, joint_label[j], j, kind, _tmul(Xp, [0, 0, 0, *r]),
                                  _tmul(Xc, [0, 0, 0, *r]), token, [dof_values(dofs[0])],
                                  target=_target(target_q, q_start, j, 0), **common)]  # fmt: skip
        elif t == _BALL:
            lo, hi = dof["limit_lower"][dofs], dof["limit_upper"][dofs]
            if np.any(np.abs(lo) < _UNLIMITED) or np.any(np.abs(hi) < _UNLIMITED):
                unsupported(f"{what}: per-axis ball joint limits are not expressible (UsdPhysics uses cone limits)")
            paths = [_write_joint(stage, names, parent, joint_label[j], j, "spherical", Xp, Xc, "X",
                                  [dof_values(k) for k in dofs], **common)]  # fmt: skip
        elif t == _DISTANCE:
            paths = [_write_joint(stage, names, parent, joint_label[j], j, "distance", Xp, Xc, None,
                                  [dof_values(k) for k in dofs], **common)]  # fmt: skip
        elif t == _D6:
            axes = np.asarray([axis[k] for k in dofs], dtype=float).reshape(-1, 3)
            kinds = ["lin"] * n_lin + ["ang"] * n_ang
            ok = all(abs(float(np.dot(axes[i], axes[k]))) < 1e-6 for i in range(len(dofs)) for k in range(i)
                     if kinds[i] == kinds[k])  # fmt: skip
            if not ok:
                unsupported(f"{what}: D6 axes {axes.tolist()} are not orthogonal")
                continue
            generic = _generic_d6_axes(axes[:n_lin]) is not None and _generic_d6_axes(axes[n_lin:]) is not None
            # NewtonJointAPI broadcasts one value per joint: per-DOF values need stacked joints
            usd_values = [_newton_usd_values(dof_values(k), n >= n_lin) for n, k in enumerate(dofs)]
            uniform = all(_same_values(usd_values[0], v) for v in usd_values[1:])
            stackable = a >= 0 and group_of(b1) in group_prim
            if generic and not uniform and not stackable:
                unsupported(f"{what}: per-DOF armature/damping/friction/velocity or limit gains differ and a joint "
                            "outside an articulation cannot be stacked; the first DOF's values are broadcast")
            if generic and (uniform or not stackable):
                slots = ([("trans" + _AXES[i], dofs[n]) for n, i in enumerate(_generic_d6_axes(axes[:n_lin]))]
                         + [("rot" + _AXES[i], dofs[n_lin + n]) for n, i in
                            enumerate(_generic_d6_axes(axes[n_lin:]))])  # fmt: skip
                paths = [_write_joint(stage, names, parent, joint_label[j], j, "d6", Xp, Xc, None,
                                      [dof_values(k) for _, k in slots], slots=[n for n, _ in slots],
                                      targets=[_target(target_q, q_start, j, n) for n in range(len(slots))],
                                      **common)]  # fmt: skip
            else:  # stacked single-DOF joints, merged back by jointsAddMobility = true
                if a < 0 or group_of(b1) not in group_prim:
                    unsupported(f"{what}: D6 axes {np.round(axes, 6).tolist()} need stacked joints, which only an "
                                "articulation (newton:jointsAddMobility) merges back")  # fmt: skip
                    continue
                paths = []
                for n, k in enumerate(dofs):
                    token, r = _axis_frame(axis[k])
                    kind = "prismatic" if n < n_lin else "revolute"
                    label = f"{_identifier(joint_label[j], f'joint_{j}')}_{kind[:3]}{n}"
                    paths.append(_write_joint(stage, names, parent, label, j, kind, _tmul(Xp, [0, 0, 0, *r]),
                                              _tmul(Xc, [0, 0, 0, *r]), token, [dof_values(k)],
                                              target=_target(target_q, q_start, j, n), **common))  # fmt: skip
                mobility_arts.add(group_of(b1))
        else:
            unsupported(f"{what}: joint type {t} is not expressible")
            continue
        joint_paths[j] = paths

    _write_collision_filters(model, stage, shape_paths, joint_paths, shape_body, shape_flags, jparent, jchild)

    for g in mobility_arts:
        if g in group_prim:
            prim = group_prim[g]
            _apply_api(prim, "NewtonArticulationRootAPI")
            prim.CreateAttribute("newton:jointsAddMobility", Sdf.ValueTypeNames.Bool, custom=False).Set(True)
    return {"body_paths": body_paths, "joint_paths": joint_paths, "shape_paths": shape_paths,
            "articulation_paths": art_paths}  # fmt: skip


def _write_collision_filters(model, stage, shape_paths, joint_paths, shape_body, shape_flags, jparent, jchild):
    """Shape filter pairs: those between two jointed bodies through the joint's ``physics:collisionEnabled``
    (False, the UsdPhysics default, filters every pair of the two bodies), the rest as
    PhysicsFilteredPairsAPI on the first shape; pairs within one body are implicit."""
    from pxr import Sdf, UsdPhysics

    pairs = {tuple(sorted((int(a), int(b)))) for a, b in getattr(model, "shape_collision_filter_pairs", ())}
    colliding = {s for s in shape_paths if int(shape_flags[s]) & _COLLIDE_SHAPES}
    by_body: dict[int, list[int]] = {}
    for s in colliding:
        by_body.setdefault(int(shape_body[s]), []).append(s)
    covered = set()
    for j, paths in joint_paths.items():
        p, c = int(jparent[j]), int(jchild[j])
        if p < 0:
            continue
        both = [tuple(sorted((a, b))) for a in by_body.get(p, []) for b in by_body.get(c, [])]
        if both and all(x in pairs for x in both):
            covered.update(both)
        elif both:
            for path in paths:
                UsdPhysics.Joint(stage.GetPrimAtPath(path)).CreateCollisionEnabledAttr(True)
    for a, b in sorted(pairs - covered):
        if a not in colliding or b not in colliding or int(shape_body[a]) == int(shape_body[b]) >= 0:
            continue
        rel = UsdPhysics.FilteredPairsAPI.Apply(stage.GetPrimAtPath(shape_paths[a])).CreateFilteredPairsRel()
        rel.AddTarget(Sdf.Path(shape_paths[b]))


def _heightfield_mesh(hf):
    """``(vertices (N, 3), triangle indices (3T,))`` of a :class:`Heightfield` grid, or ``(None, None)``."""
    data = getattr(hf, "data", None)
    if data is None:
        return None, None
    data = np.asarray(data, dtype=np.float32)
    nrow, ncol = data.shape
    x = np.linspace(-hf.hx, hf.hx, ncol, dtype=np.float32)
    y = np.linspace(-hf.hy, hf.hy, nrow, dtype=np.float32)
    xx, yy = np.meshgrid(x, y)  # row i -> y, column j -> x
    verts = np.stack([xx.ravel(), yy.ravel(), data.ravel()], axis=1)
    i, j = np.meshgrid(np.arange(nrow - 1), np.arange(ncol - 1), indexing="ij")
    v00 = (i * ncol + j).ravel()
    v01, v10, v11 = v00 + 1, v00 + ncol, v00 + ncol + 1
    tris = np.stack([v00, v01, v11, v00, v11, v10], axis=1).reshape(-1)  # counter-clockwise seen from +z
    return verts, tris.astype(np.int32)


def _rest_body_q(model, host) -> np.ndarray:
    """X_WB of every body with all joints but FREE / DISTANCE at coordinate zero (how USD poses a joint).

    USD has no joint coordinates: a joint is at zero where its two frames coincide, so the bodies are
    written where the joint frames agree; FREE roots keep their pose from ``Model.joint_q``.
    """
    body_q = host("body_q", np.zeros((0, 7)))
    if not model.joint_count or not model.body_count:
        return body_q
    import warp as wp

    import armillary

    q = model.joint_q.numpy().astype(np.float32).copy()
    jt, q_start = host("joint_type"), host("joint_q_start")
    for j in range(model.joint_count):
        a, b = int(q_start[j]), int(q_start[j + 1])
        if jt[j] in (_FREE, _DISTANCE):
            continue
        q[a:b] = 0.0
        if jt[j] == _BALL:
            q[a + 3] = 1.0
    state = model.state()
    armillary.eval_fk(model, wp.array(q, dtype=wp.float32, device=model.device),
                      wp.zeros(model.joint_dof_count, dtype=wp.float32, device=model.device), state)  # fmt: skip
    return state.body_q.numpy()


def _is_loop(j, jart, jchild, jtype) -> bool:
    """True when an articulated joint's child already has an earlier articulated parent joint (a loop)."""
    c = jchild[j]
    for k in range(j):
        if jchild[k] == c and jart[k] >= 0:
            return True
    return False


def _target(target_q, q_start, j, n):
    if target_q is None:
        return None
    k = int(q_start[j]) + n
    return float(target_q[k]) if k < len(target_q) else None


def _generic_d6_axes(axes) -> list[int] | None:
    """Coordinate indices of ``axes`` when they are distinct positive coordinate axes in increasing order."""
    out = []
    for a in axes:
        k = int(np.argmax(np.abs(a)))
        e = np.zeros(3)
        e[k] = 1.0
        if not np.allclose(a, e, atol=1e-7) or (out and k <= out[-1]):
            return None
        out.append(k)
    return out


def _axis_frame(axis) -> tuple[str, np.ndarray]:
    """``(axis token, rotation xyzw)``: a positive coordinate axis keeps the frame, others rotate +X onto it."""
    a = np.asarray(axis, dtype=float)
    n = float(np.linalg.norm(a))
    a = a / n if n > 0 else np.array([1.0, 0.0, 0.0])
    for k in range(3):
        e = np.zeros(3)
        e[k] = 1.0
        if np.allclose(a, e, atol=1e-7):
            return _AXES[k], np.array([0.0, 0.0, 0.0, 1.0])
    return "X", _quat_x_to(a)


def _apply_api(prim, name: str) -> None:
    """Apply an API schema by name (codeless schemas such as NewtonJointAPI need no registration)."""
    op = prim.GetMetadata("apiSchemas")
    if not op or name not in op.GetAddedOrExplicitItems():
        prim.AddAppliedSchema(name)


def _set_xform(xformable, X, scale=None) -> None:
    """Author translate + orient (+ scale) ops for the transform 7-vector ``X`` (p, q xyzw)."""
    from pxr import Gf, UsdGeom

    X = np.asarray(X, dtype=float)
    ops = [xformable.AddTranslateOp(UsdGeom.XformOp.PrecisionDouble),
           xformable.AddOrientOp(UsdGeom.XformOp.PrecisionDouble)]  # fmt: skip
    ops[0].Set(Gf.Vec3d(*X[:3]))
    q = X[3:7] / (np.linalg.norm(X[3:7]) or 1.0)
    ops[1].Set(Gf.Quatd(q[3], q[0], q[1], q[2]))
    if scale is not None:
        op = xformable.AddScaleOp(UsdGeom.XformOp.PrecisionDouble)
        op.Set(Gf.Vec3d(*map(float, scale)))


def _finite(v) -> bool:
    return v is not None and math.isfinite(v) and abs(v) < _UNLIMITED


def _write_joint(stage, names, parent, label, j, kind, Xp, Xc, token, dofs, *, b0, b1, enabled, exclude,
                 target=None, slots=None, targets=None) -> str:  # fmt: skip
    """Define one joint prim; ``dofs`` are per-DOF value dicts (radians / meters, armillary units)."""
    from pxr import Gf, Sdf, UsdPhysics

    path = names.child(parent, label, f"joint_{j}")
    cls = {"fixed": UsdPhysics.FixedJoint, "revolute": UsdPhysics.RevoluteJoint,
           "prismatic": UsdPhysics.PrismaticJoint, "spherical": UsdPhysics.SphericalJoint,
           "distance": UsdPhysics.DistanceJoint, "d6": UsdPhysics.Joint}[kind]  # fmt: skip
    joint = cls.Define(stage, path)
    prim = joint.GetPrim()
    if b0 is not None:
        joint.CreateBody0Rel().SetTargets([Sdf.Path(b0)])
    joint.CreateBody1Rel().SetTargets([Sdf.Path(b1)])
    joint.CreateLocalPos0Attr(Gf.Vec3f(*map(float, Xp[:3])))
    joint.CreateLocalRot0Attr(Gf.Quatf(float(Xp[6]), float(Xp[3]), float(Xp[4]), float(Xp[5])))
    joint.CreateLocalPos1Attr(Gf.Vec3f(*map(float, Xc[:3])))
    joint.CreateLocalRot1Attr(Gf.Quatf(float(Xc[6]), float(Xc[3]), float(Xc[4]), float(Xc[5])))
    if not enabled:
        joint.CreateJointEnabledAttr(False)
    if exclude:
        joint.CreateExcludeFromArticulationAttr(True)
    if token is not None and kind in ("revolute", "prismatic", "spherical"):
        joint.CreateAxisAttr(token)

    angular = kind in ("revolute", "spherical")
    if kind in ("revolute", "prismatic") and dofs:
        d = dofs[0]
        f = _RAD2DEG if angular else 1.0
        if _finite(d["limit_lower"]) or _finite(d["limit_upper"]):
            lo = d["limit_lower"] * f if _finite(d["limit_lower"]) else -math.inf
            hi = d["limit_upper"] * f if _finite(d["limit_upper"]) else math.inf
            joint.CreateLowerLimitAttr(lo)
            joint.CreateUpperLimitAttr(hi)
        _write_drive(prim, "angular" if angular else "linear", d, f, target)
        _write_newton_joint(prim, d, angular)
        if d.get("stiffness"):  # passive spring: MuJoCo's USD schema (per radian; springref in degrees)
            prim.CreateAttribute("mjc:stiffness", Sdf.ValueTypeNames.Float, custom=False).Set(d["stiffness"])
            if d.get("rest_q"):
                prim.CreateAttribute("mjc:springref", Sdf.ValueTypeNames.Float, custom=False).Set(d["rest_q"] * f)
    elif kind == "d6":
        for n, (slot, d) in enumerate(zip(slots, dofs)):
            ang = slot.startswith("rot")
            f = _RAD2DEG if ang else 1.0
            lim = UsdPhysics.LimitAPI.Apply(prim, slot)
            if _finite(d["limit_lower"]) or _finite(d["limit_upper"]):
                lim.CreateLowAttr(d["limit_lower"] * f if _finite(d["limit_lower"]) else -math.inf)
                lim.CreateHighAttr(d["limit_upper"] * f if _finite(d["limit_upper"]) else math.inf)
            else:
                lim.CreateLowAttr(-math.inf)
                lim.CreateHighAttr(math.inf)
            _write_drive(prim, slot, d, f, targets[n] if targets else None)
        for slot in [f"{k}{a}" for k in ("trans", "rot") for a in _AXES]:
            if slot not in slots:  # locked: low > high
                lim = UsdPhysics.LimitAPI.Apply(prim, slot)
                lim.CreateLowAttr(1.0)
                lim.CreateHighAttr(-1.0)
        if dofs:
            _write_newton_joint(prim, dofs[0], slots[0].startswith("rot"))
    elif kind == "distance" and dofs:
        d = dofs[0]
        if _finite(d["limit_lower"]):
            joint.CreateMinDistanceAttr(max(0.0, d["limit_lower"]))
        if _finite(d["limit_upper"]):
            joint.CreateMaxDistanceAttr(d["limit_upper"])
    elif kind == "spherical" and dofs:
        _write_newton_joint(prim, dofs[0], True)
    return path


def _write_drive(prim, slot, d, f, target) -> None:
    """PhysicsDriveAPI:<slot> when the DOF has drive gains (per degree for angular DOFs)."""
    from pxr import UsdPhysics

    ke, kd = d.get("target_ke") or 0.0, d.get("target_kd") or 0.0
    if ke == 0.0 and kd == 0.0:
        return
    drive = UsdPhysics.DriveAPI.Apply(prim, slot)
    drive.CreateTypeAttr(UsdPhysics.Tokens.force)
    drive.CreateStiffnessAttr(ke / f)
    drive.CreateDampingAttr(kd / f)
    if target is not None:
        drive.CreateTargetPositionAttr(target * f)
    if d.get("target_qd") is not None:
        drive.CreateTargetVelocityAttr(d["target_qd"] * f)
    eff = d.get("effort_limit")
    if eff is not None and math.isfinite(eff) and eff < _UNLIMITED:
        drive.CreateMaxForceAttr(eff)


def _newton_usd_values(d, angular: bool) -> dict:
    """NewtonJointAPI values of one DOF in USD units: per degree / deg/s for angular DOFs; armature and
    friction as they are (what the reference importer reads back)."""
    f = _RAD2DEG if angular else 1.0
    vals = {
        "armature": d.get("armature"),
        "damping": None if d.get("damping") is None else d["damping"] / f,
        "friction": d.get("friction"),
        "velocityLimit": None if d.get("velocity_limit") is None else d["velocity_limit"] * f,
        "limitStiffness": None if d.get("limit_ke") is None else d["limit_ke"] / f,
        "limitDamping": None if d.get("limit_kd") is None else d["limit_kd"] / f,
    }
    if vals["velocityLimit"] is not None and vals["velocityLimit"] >= _UNLIMITED * f:
        vals["velocityLimit"] = math.inf
    return vals


def _same_values(a: dict, b: dict) -> bool:
    return all((a[k] is None) == (b[k] is None) and (a[k] is None or math.isclose(a[k], b[k], rel_tol=1e-6))
               for k in a)  # fmt: skip


def _write_newton_joint(prim, d, angular: bool) -> None:
    """NewtonJointAPI (broadcast to every DOF of the joint), values of DOF ``d`` in USD units."""
    from pxr import Sdf

    _apply_api(prim, "NewtonJointAPI")
    for name, v in _newton_usd_values(d, angular).items():
        if v is not None:
            prim.CreateAttribute(f"newton:{name}", Sdf.ValueTypeNames.Float, custom=False).Set(float(v))

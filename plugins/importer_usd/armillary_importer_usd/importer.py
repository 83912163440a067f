"""USD importer serving ``ModelBuilder.add_usd``: UsdPhysics rigid bodies, shapes, joints, articulations,
collision filtering, materials, scene settings and the project's ``newton:*`` schema.

Everything is built into a scratch builder first and merged into the caller's builder only when the whole
stage was read without error, so a failed import leaves the caller's builder unchanged.

Frames: ``X_WB`` is a body pose in the builder's world frame (meters, the builder's up axis); stage
poses are first converted to meters (``metersPerUnit``) and rotated from the stage up axis onto the
builder's (unless ``apply_up_axis_from_stage``), then ``xform`` is applied.
"""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass, field

import numpy as np
import warp as wp

from armillary.sim.enums import ShapeFlags
from armillary.sim.rotations import quat_multiply as _qmul
from armillary.sim.rotations import quat_rotate as _qrot
from armillary.sim.rotations import quat_to_matrix as _qmat

from . import actuators, custom, schemas
from .utils import (
    USDImportError,
    decompose,
    get_attribute,
    get_physics_scenes,
    has_applied_api_schema,
    open_stage,
    quat_wxyz_gf_to_xyzw,
    stage_linear_unit,
    stage_mass_unit,
    stage_up_axis,
)

__all__ = ["USDImportWarning", "add_usd"]


class USDImportWarning(UserWarning):
    """A value of the stage that the importer cannot honour (the message names the prim and attribute)."""


# ------------------------------------------------------------------------------------------------ small math





class _Tf:
    """Rigid transform (p, q xyzw) in float64."""

    __slots__ = ("p", "q")

    def __init__(self, p=None, q=None):
        self.p = np.zeros(3) if p is None else np.asarray(p, dtype=np.float64).copy()
        self.q = np.array([0.0, 0.0, 0.0, 1.0]) if q is None else np.asarray(q, dtype=np.float64).copy()

    @staticmethod
    def of(x) -> _Tf:
        v = [float(a) for a in x]
        return _Tf(v[:3], v[3:7])

    def __mul__(self, o: _Tf) -> _Tf:
        return _Tf(self.p + _qrot(self.q, o.p), _qmul(self.q, o.q))

    def inv(self) -> _Tf:
        qi = np.array([-self.q[0], -self.q[1], -self.q[2], self.q[3]])
        return _Tf(-_qrot(qi, self.p), qi)

    def wp(self):
        q = self.q / np.linalg.norm(self.q)
        return wp.transform(wp.vec3(*self.p.tolist()), wp.quat(*q.tolist()))

    def mat(self) -> np.ndarray:
        m = np.eye(4)
        m[:3, :3] = _qmat(self.q)
        m[:3, 3] = self.p
        return m


_S = math.sqrt(0.5)
# rotation taking the shape frame's +Z onto the authored gprim axis
_AXIS_Q = {"X": np.array([0.0, _S, 0.0, _S]), "Y": np.array([-_S, 0.0, 0.0, _S]), "Z": np.array([0.0, 0.0, 0.0, 1.0])}


def _up_rotation(stage_up: str, builder_up: str) -> np.ndarray:
    """Quaternion rotating the stage up axis onto the builder's up axis."""
    if stage_up == builder_up:
        return np.array([0.0, 0.0, 0.0, 1.0])
    if stage_up == "Y" and builder_up == "Z":
        return np.array([_S, 0.0, 0.0, _S])  # +90 deg about X: y -> z
    if stage_up == "Z" and builder_up == "Y":
        return np.array([-_S, 0.0, 0.0, _S])
    if stage_up == "Z" and builder_up == "X":
        return np.array([0.0, -_S, 0.0, _S])
    if stage_up == "X" and builder_up == "Z":
        return np.array([0.0, _S, 0.0, _S])
    if stage_up == "Y" and builder_up == "X":
        return np.array([0.0, 0.0, -_S, _S])
    return np.array([0.0, 0.0, _S, _S])  # X -> Y


# ------------------------------------------------------------------------------------------------ records


@dataclass
class _Body:
    path: str
    prim: object
    X_stage: _Tf  # body frame in the stage world frame (meters), no scale
    scale: np.ndarray  # world scale of the body prim
    enabled: bool = True
    kinematic: bool = False
    shapes: list = field(default_factory=list)  # shape records
    index: int = -1
    articulation: int = -1


@dataclass
class _Shape:
    path: str
    prim: object
    kind: str  # "collision", "visual", "site"
    body: str | None
    X_BS: _Tf  # in body frame (world stage frame, meters, for static shapes)
    scale: np.ndarray  # scale of the shape relative to the body frame
    index: int = -1


# ------------------------------------------------------------------------------------------------ entry point

_UNSUPPORTED_DEFAULTS = {
    "return_deformable_results": False,
    "allow_unsafe_torch_checkpoints": False,
    "legacy_margin_gap": False,
    "convert_mjc_equality_constraints": True,
}


def add_usd(
    builder,
    source,
    *,
    xform=None,
    floating: bool | None = None,
    base_joint: dict | None = None,
    parent_body: int = -1,
    only_load_enabled_rigid_bodies: bool = False,
    only_load_enabled_joints: bool = True,
    joint_drive_gains_scaling: float = 1.0,
    verbose: bool = False,
    ignore_paths: list[str] | None = None,
    collapse_fixed_joints: bool = False,
    enable_self_collisions: bool = True,
    apply_up_axis_from_stage: bool = False,
    root_path: str = "/",
    joint_ordering: str | None = "dfs",
    bodies_follow_joint_ordering: bool = True,
    skip_mesh_approximation: bool = False,
    load_sites: bool = True,
    load_visual_shapes: bool = True,
    load_static_visual_shapes: bool = True,
    hide_collision_shapes: bool = False,
    force_show_colliders: bool = False,
    parse_mujoco_options: bool = True,
    mesh_maxhullvert: int | None = None,
    schema_resolvers: list | None = None,
    force_position_velocity_actuation: bool = False,
    convert_mjc_equality_constraints: bool = True,
    override_root_xform: bool = False,
    legacy_margin_gap: bool = False,
    return_deformable_results: bool = False,
    allow_unsafe_torch_checkpoints: bool = False,
    actuator_components: bool = False,
) -> dict:
    """Import a USD stage (path or ``Usd.Stage``) into ``builder``; returns the result dictionary.

    Keyword arguments follow the reference engine's ``ModelBuilder.add_usd``. Units: lengths are
    converted with the stage's ``metersPerUnit``, masses with ``kilogramsPerUnit`` (inertia with
    both), angles in degrees where UsdPhysics uses degrees. ``xform`` is the pose of the stage's world
    frame in the builder's world (in ``parent_body``'s frame when given).

    Result keys: ``fps``, ``duration``, ``up_axis``, ``path_body_map``, ``path_joint_map``,
    ``path_shape_map``, ``path_shape_scale``, ``path_particle_map`` (always empty), ``mass_unit``,
    ``linear_unit``, ``scene_attributes``, ``physics_scene_path``, ``collapse_results``, ``physics_dt``,
    ``schema_attrs``, ``max_solver_iterations``, ``path_body_relative_transform``,
    ``path_original_body_map``, ``actuator_count`` (the number of :meth:`ModelBuilder.add_actuator` entries
    made from actuator prims), ``path_articulation_map`` (articulation root
    prim path -> articulation index) and, for joints merged under ``newton:jointsAddMobility``,
    ``path_joint_dof_map`` / ``path_joint_coord_map`` (source joint prim path -> its DOF / coordinate
    indices). Indices are those of ``builder`` after the import.

    Actuator prims (:mod:`armillary_importer_usd.actuators`, needs the ``armillary-actuators`` plugin):
    ``NewtonActuator`` prims always become ``add_actuator`` entries (``model.actuators`` after
    ``finalize()``), as in the reference engine. ``actuator_components=True`` (an armillary option, the
    reference engine has none; default ``False`` ignores them as before) also maps MuJoCo
    ``MjcActuator`` prims on revolute / prismatic joints (fixed gain; no bias or a PD-form affine bias)
    onto ``ControllerPD`` entries with ``ClampingMaxEffort`` for their force / control ranges.

    Not supported (``NotImplementedError`` when given a non-default value): deformable results,
    Torch checkpoints, ``legacy_margin_gap``, ``convert_mjc_equality_constraints=False``.
    ``parse_mujoco_options=False`` leaves the ``mujoco:*`` scene options at their defaults and ignores
    ``mjc:option:timestep``. Deformable prims and MuJoCo equality prims found on the stage are
    skipped with a :class:`USDImportWarning` naming them.

    Differences from the reference engine: stage units are converted (the reference keeps stage
    units); ``PhysicsCollisionGroup`` filtering becomes shape filter pairs (the shapes keep their
    collision group, so ungrouped shapes such as a ground still collide with them; the group ids from 1
    are returned as ``result["collision_group_ids"]``); a closed loop without articulation root becomes
    a spanning-tree articulation plus loop-closing joints; a ``PhysicsMassAPI`` that authors only the
    centre of mass keeps the mass computed from the shapes.

    Raises:
        USDImportError (a ``ValueError``): malformed stage content; the message starts with the prim path.
        FileNotFoundError: the file does not exist.
    """
    given = dict(return_deformable_results=return_deformable_results,
                 allow_unsafe_torch_checkpoints=allow_unsafe_torch_checkpoints,
                 legacy_margin_gap=legacy_margin_gap,
                 convert_mjc_equality_constraints=convert_mjc_equality_constraints)  # fmt: skip
    for k, v in given.items():
        if v != _UNSUPPORTED_DEFAULTS[k]:
            raise NotImplementedError(f"add_usd: {k}={v!r} is not supported by armillary's USD importer")
    if floating is not None and base_joint is not None:
        raise ValueError("add_usd: floating and base_joint are mutually exclusive; pass only one")
    parent_body = int(parent_body)
    if floating is True and parent_body != -1:
        raise ValueError("add_usd: floating=True requires parent_body=-1 (FREE joints connect to the world)")
    if not -1 <= parent_body < builder.body_count:
        raise ValueError(f"add_usd: parent_body={parent_body} is not a body index (body_count={builder.body_count})")
    if base_joint is not None and not isinstance(base_joint, dict):
        raise ValueError(f"add_usd: base_joint must be a dict of add_joint arguments, got {type(base_joint).__name__}")
    if xform is not None:
        from armillary.sim._convert import to_transform

        xform = to_transform(xform, "add_usd: xform")
    if joint_ordering not in ("dfs", "bfs", None):
        raise ValueError(f"add_usd: joint_ordering={joint_ordering!r} must be 'dfs', 'bfs' or None")
    if parent_body != -1:
        arts = [builder.joint_articulation[j] for j in builder._body_joints.get(parent_body, [])]
        art = next((a for a in arts if a >= 0), None)
        last = builder.articulation_count - 1
        if art is not None and (art != last or builder.articulation_end[art] != builder.joint_count):
            raise ValueError(
                f"add_usd: parent_body={parent_body} ('{builder.body_label[parent_body]}') belongs to articulation "
                f"{art}, which is not the most recently added one; only the last articulation can be extended"
            )
    opts = dict(
        xform=xform, floating=floating, base_joint=base_joint, parent_body=parent_body,
        only_load_enabled_rigid_bodies=bool(only_load_enabled_rigid_bodies),
        only_load_enabled_joints=bool(only_load_enabled_joints), joint_drive_gains_scaling=float(joint_drive_gains_scaling),
        verbose=bool(verbose), ignore_paths=list(ignore_paths or []), collapse_fixed_joints=bool(collapse_fixed_joints),
        enable_self_collisions=bool(enable_self_collisions), apply_up_axis_from_stage=bool(apply_up_axis_from_stage),
        root_path=str(root_path), joint_ordering=joint_ordering, bodies_follow_joint_ordering=bool(bodies_follow_joint_ordering),
        skip_mesh_approximation=bool(skip_mesh_approximation), load_sites=bool(load_sites),
        load_visual_shapes=bool(load_visual_shapes), load_static_visual_shapes=bool(load_static_visual_shapes),
        hide_collision_shapes=bool(hide_collision_shapes), force_show_colliders=bool(force_show_colliders),
        parse_mujoco_options=bool(parse_mujoco_options), mesh_maxhullvert=mesh_maxhullvert,
        schema_resolvers=schema_resolvers, force_position_velocity_actuation=bool(force_position_velocity_actuation),
        override_root_xform=bool(override_root_xform), actuator_components=bool(actuator_components),
    )  # fmt: skip
    try:
        from armillary import plugins

        declared = (dict(getattr(builder, "custom_attributes", {})), dict(getattr(builder, "custom_frequencies", {})))
        plugins.register_custom_attributes(builder)
    except Exception:  # registering third-party attributes must not block an import
        declared = None
    imp = _Importer(builder, source, opts)
    try:
        try:
            result = imp.run()
        except (USDImportError, NotImplementedError, FileNotFoundError):
            raise
        except Exception as e:  # anything else the stage provoked: name the prim being read
            where = imp.current_path
            raise USDImportError(f"{type(e).__name__}: {e}", where) from e
    except BaseException:
        if declared is not None:
            for name, old in zip(("custom_attributes", "custom_frequencies"), declared):
                cur = getattr(builder, name, None)
                if isinstance(cur, dict):
                    cur.clear()
                    cur.update(old)
        raise
    return result


# ------------------------------------------------------------------------------------------------ importer


class _Importer:
    def __init__(self, target, source, opts):
        self.target = target
        self.source = source
        self.opts = opts
        self.current_path: str | None = None
        self.warnings: list[str] = []
        self.collision_disabled: list = []
        self._pending_mesh_approx: list = []
        self._shape_masses: dict = {}
        self.correction: dict = {}
        self.tree_joint_count = 0

    # -------------------------------------------------------------- helpers
    def warn(self, path, attribute, message):
        where = f"{path}.{attribute}" if (path and attribute) else (path or attribute or "")
        msg = f"{where}: {message}" if where else message
        self.warnings.append(msg)
        warnings.warn(msg, USDImportWarning, stacklevel=4)

    def ignored(self, path: str) -> bool:
        return any(p.search(path) for p in self.ignore_res)

    def solver_value(self, prim, prim_type: str, key: str, newton_name: str | None, default=None):
        """First authored value among the resolvers, then ``newton_name`` read by name, else ``default``."""
        resolvers = self.resolvers
        if prim_type == "SCENE" and not self.opts["parse_mujoco_options"]:
            resolvers = [r for r in resolvers if not isinstance(r, schemas.SchemaResolverMjc)]
        v = schemas.resolve_value(resolvers, prim, getattr(schemas.PrimType, prim_type), key, None)
        if v is not None:
            return v
        if newton_name:
            v = get_attribute(prim, newton_name)
            if v is not None:
                return v
        return default

    # -------------------------------------------------------------- main
    def run(self) -> dict:
        from pxr import Usd, UsdGeom

        from armillary import Axis, ModelBuilder

        o = self.opts
        self.stage = stage = open_stage(self.source)
        self.ignore_res = []
        for p in o["ignore_paths"]:
            try:
                self.ignore_res.append(re.compile(p))
            except re.error as e:
                raise ValueError(f"add_usd: ignore_paths entry {p!r} is not a regular expression: {e}") from None
        root = stage.GetPrimAtPath(o["root_path"]) if o["root_path"] else None
        if not root or not root.IsValid():
            raise USDImportError(f"root_path {o['root_path']!r} does not name a prim of the stage", o["root_path"])
        self.root = root
        self._setup_resolvers()
        self.lu = stage_linear_unit(stage)
        self.mu_ = stage_mass_unit(stage)
        self.stage_up = stage_up_axis(stage)
        target = self.target
        builder_up = self.stage_up if o["apply_up_axis_from_stage"] else target.up_axis.name
        self.q_up = _up_rotation(self.stage_up, builder_up)
        self.xcache = UsdGeom.XformCache(Usd.TimeCode.Default())

        # scratch builder
        s = ModelBuilder(up_axis=Axis[builder_up], gravity=None if o["apply_up_axis_from_stage"] else target.gravity)
        s.default_shape_cfg = target.default_shape_cfg.copy()
        s.default_joint_cfg = target.default_joint_cfg
        s.rigid_gap = target.rigid_gap
        import copy

        for _key, freq in getattr(target, "custom_frequencies", {}).items():
            s.add_custom_frequency(freq)
        for _key, attr in getattr(target, "custom_attributes", {}).items():
            clone = copy.copy(attr)
            clone.values = [] if getattr(attr, "is_custom_frequency", False) else {}
            s.add_custom_attribute(clone)
        self.s = s

        self.result = {
            "fps": float(stage.GetTimeCodesPerSecond()),
            "duration": float(stage.GetEndTimeCode() - stage.GetStartTimeCode()),
            "up_axis": Axis[self.stage_up],
            "path_body_map": {}, "path_joint_map": {}, "path_shape_map": {}, "path_shape_scale": {},
            "path_particle_map": {}, "mass_unit": self.mu_, "linear_unit": self.lu, "scene_attributes": {},
            "physics_scene_path": None, "collapse_results": None, "physics_dt": None, "schema_attrs": {},
            "max_solver_iterations": None, "path_body_relative_transform": {}, "path_original_body_map": {},
            "actuator_count": 0, "path_articulation_map": {}, "path_joint_dof_map": {}, "path_joint_coord_map": {},
        }  # fmt: skip
        self._scene()
        self._root_frame()
        self._collect()
        self._build_topology()
        self._add_bodies_and_shapes()
        self._add_joints()
        self._collision_filtering()
        self._visibility()
        self._approximate_meshes()
        self._schema_attrs()
        self._custom_attributes()
        self._collapse()
        self.result["actuator_count"] = actuators.import_actuators(self)
        self._commit()
        return self.result

    def _setup_resolvers(self):
        rs = self.opts["schema_resolvers"]
        self.resolvers = list(schemas.default_resolvers() if rs is None else rs)
        for r in self.resolvers:
            if not isinstance(r, schemas.SchemaResolver):
                raise TypeError(f"add_usd: schema_resolvers entries must be SchemaResolver instances, got {r!r}")

    # -------------------------------------------------------------- scene
    def _scene(self):
        stage, r = self.stage, self.result
        scenes = get_physics_scenes(stage, self.opts["root_path"])
        if not scenes and self.opts["root_path"] != "/":
            scenes = get_physics_scenes(stage, "/")
        self.scene_prim = None
        up = np.zeros(3)
        up["XYZ".index(self.stage_up)] = 1.0
        g_stage = -9.81 * up  # m/s^2 in the stage frame
        dt = None
        iters = None
        if scenes:
            sc = scenes[0]
            prim = sc.GetPrim()
            self.scene_prim = prim
            r["physics_scene_path"] = str(prim.GetPath())
            attrs = {}
            for a in prim.GetAttributes():
                v = a.Get()
                if v is not None:
                    attrs[a.GetName()] = v
            r["scene_attributes"] = attrs
            d = sc.GetGravityDirectionAttr().Get()
            m = sc.GetGravityMagnitudeAttr().Get()
            d = np.zeros(3) if d is None else np.array([float(x) for x in d])
            if not np.all(np.isfinite(d)):
                raise USDImportError(f"gravity direction {d.tolist()} must be finite ((0, 0, 0): the stage's down axis)",
                                     prim.GetPath(), "physics:gravityDirection")  # fmt: skip
            if np.linalg.norm(d) < 1e-12:
                d = -up
            else:
                d = d / np.linalg.norm(d)
            if m is None or float(m) == -math.inf:  # -inf: the default (earth gravity)
                g_stage = 9.81 * d
            elif not (math.isfinite(float(m)) and float(m) >= 0):
                raise USDImportError(f"gravity magnitude {m!r} must be finite and >= 0 (or -inf for the default)",
                                     prim.GetPath(), "physics:gravityMagnitude")  # fmt: skip
            else:
                g_stage = float(m) * self.lu * d
            enabled = self.solver_value(prim, "SCENE", "gravity_enabled", "newton:gravityEnabled", True)
            if enabled is False:
                g_stage = np.zeros(3)
            steps = self.solver_value(prim, "SCENE", "time_steps_per_second", "newton:timeStepsPerSecond", None)
            if steps is not None:
                steps = float(steps)
                if not (math.isfinite(steps) and steps > 0):
                    raise USDImportError(f"time steps per second {steps!r} must be > 0", prim.GetPath(),
                                         "newton:timeStepsPerSecond")  # fmt: skip
                dt = 1.0 / steps
            else:
                dt = 0.001
            it = self.solver_value(prim, "SCENE", "max_solver_iterations", "newton:maxSolverIterations", None)
            iters = -1 if it is None else int(it)
            v = get_attribute(prim, "newton:joint_drive_gains_scaling")
            if v is not None:
                self.opts["joint_drive_gains_scaling"] = float(v)
            v = get_attribute(prim, "newton:collapse_fixed_joints")
            if v is not None:
                self.opts["collapse_fixed_joints"] = bool(v)
        r["physics_dt"] = dt
        r["max_solver_iterations"] = iters
        self.gravity = _qrot(self.q_up, g_stage) if scenes else None

    def _root_frame(self):
        o, t = self.opts, self.target
        xf = _Tf() if o["xform"] is None else _Tf.of(list(o["xform"]))
        self.X_xform = xf
        self.X_up = _Tf(None, self.q_up)
        if o["parent_body"] >= 0:
            X_par = _Tf.of(list(t.body_q[o["parent_body"]]))
            self.X_root = X_par * xf * self.X_up
        else:
            self.X_root = xf * self.X_up
        self.X_static = xf * self.X_up  # static shapes: xform in the world frame

    # -------------------------------------------------------------- traversal
    def _world_tf(self, prim) -> tuple[_Tf, np.ndarray, np.ndarray]:
        m = np.array(self.xcache.GetLocalToWorldTransform(prim), dtype=np.float64).T
        if not np.all(np.isfinite(m)):
            raise USDImportError("the world transform is not finite (NaN or inf in an xformOp)", prim.GetPath(),
                                 "xformOpOrder")  # fmt: skip
        t, q, sc = decompose(m)
        return _Tf(t * self.lu, q), sc, m

    def _collect(self):
        from pxr import Usd, UsdGeom, UsdPhysics

        o = self.opts
        self.bodies: dict[str, _Body] = {}
        self.body_order: list[str] = []
        self.shapes: list[_Shape] = []
        self.joint_prims = []
        self.art_roots: list[str] = []
        self.groups = []
        self.filtered_pairs_prims = []
        self.disabled_bodies: set[str] = set()
        it = iter(Usd.PrimRange(self.root, Usd.TraverseInstanceProxies()))
        owner_stack: list[tuple[str, str | None]] = []  # (path prefix, body path or None)
        prims = []
        for prim in it:
            path = str(prim.GetPath())
            self.current_path = path
            if self.ignored(path):
                it.PruneChildren()
                continue
            if not prim.IsActive():
                it.PruneChildren()
                continue
            tname = prim.GetTypeName()
            if "Deformable" in tname or has_applied_api_schema(prim, "PhysicsDeformableBodyAPI") or tname == "TetMesh":
                self.warn(path, None, "deformable bodies are not imported by armillary's USD importer; skipped")
                it.PruneChildren()
                continue
            if tname.startswith("MjcEquality"):
                self.warn(path, None, "MuJoCo equality constraints are not converted by the USD importer; skipped")
                it.PruneChildren()
                continue
            prims.append(prim)
            if prim.HasAPI(UsdPhysics.ArticulationRootAPI):
                self.art_roots.append(path)
            if prim.IsA(UsdPhysics.CollisionGroup):
                self.groups.append(prim)
            if prim.IsA(UsdPhysics.Joint):
                self.joint_prims.append(prim)
            rel = prim.GetRelationship("physics:filteredPairs")
            if rel and rel.HasAuthoredTargets():
                self.filtered_pairs_prims.append(prim)
            if prim.HasAPI(UsdPhysics.RigidBodyAPI):
                rb = UsdPhysics.RigidBodyAPI(prim)
                enabled = rb.GetRigidBodyEnabledAttr().Get()
                enabled = True if enabled is None else bool(enabled)
                if not enabled and o["only_load_enabled_rigid_bodies"]:
                    self.disabled_bodies.add(path)
                    continue
                X, sc, _ = self._world_tf(prim)
                kin = bool(rb.GetKinematicEnabledAttr().Get() or False)
                self.bodies[path] = _Body(path, prim, X, sc, enabled=enabled, kinematic=kin)
                self.body_order.append(path)
        # shapes: owner = nearest loaded, enabled ancestor body
        for prim in prims:
            path = str(prim.GetPath())
            self.current_path = path
            is_site = has_applied_api_schema(prim, "NewtonSiteAPI") or has_applied_api_schema(prim, "MjcSiteAPI")
            is_gprim = prim.IsA(UsdGeom.Gprim)
            if not (is_gprim or is_site):
                continue
            if is_site:
                kind = "site"
                if not o["load_sites"]:
                    continue
            elif prim.HasAPI(UsdPhysics.CollisionAPI):
                kind = "collision"
            else:
                kind = "visual"
            if kind == "visual" and self._under_collider(prim):
                continue
            owner = self._owner(prim)
            if kind == "visual":
                if not o["load_visual_shapes"]:
                    continue
                if owner is None and not o["load_static_visual_shapes"]:
                    continue
            X_WS, sc_w, M_S = self._world_tf(prim)
            if owner is not None:
                b = self.bodies[owner]
                M_B = np.eye(4)
                M_B[:3, :3] = _qmat(b.X_stage.q)
                M_B[:3, 3] = b.X_stage.p / self.lu
                rel = np.linalg.inv(M_B) @ M_S
                t, q, sc = decompose(rel)
                X = _Tf(t * self.lu, q)
            else:
                X, sc = X_WS, sc_w
            sh = _Shape(path, prim, kind, owner, X, sc)
            self.shapes.append(sh)
            if owner is not None:
                self.bodies[owner].shapes.append(sh)
        self.current_path = None

    def _under_collider(self, prim) -> bool:
        from pxr import UsdPhysics

        p = prim.GetParent()
        while p and p.IsValid() and not p.IsPseudoRoot():
            if p.HasAPI(UsdPhysics.CollisionAPI):
                return True
            p = p.GetParent()
        return False

    def _owner(self, prim) -> str | None:
        p = prim
        while p and p.IsValid() and not p.IsPseudoRoot():
            path = str(p.GetPath())
            if path in self.bodies:
                return path if self.bodies[path].enabled else None
            if path in self.disabled_bodies:
                return None
            p = p.GetParent()
        return None

    # -------------------------------------------------------------- joints and topology
    def _joint_context(self):
        from . import joints as J

        return J.JointContext(
            linear_unit=self.lu,
            body_scale=lambda p: np.asarray(self.bodies[p].scale if p in self.bodies else self._prim_scale(p)),
            resolvers=self.resolvers,
            warn=self.warn,
            joint_drive_gains_scaling=self.opts["joint_drive_gains_scaling"],
            force_position_velocity_actuation=self.opts["force_position_velocity_actuation"],
            only_load_enabled_joints=self.opts["only_load_enabled_joints"],
        )

    def _prim_scale(self, path):
        prim = self.stage.GetPrimAtPath(path)
        _, sc, _ = self._world_tf(prim)
        return sc

    def _art_root_of(self, path: str) -> str | None:
        best = None
        for r in self.art_roots:
            if path == r or path.startswith(r.rstrip("/") + "/"):
                if best is None or len(r) > len(best):
                    best = r
        return best

    def _build_topology(self):
        from . import joints as J

        ctx = self._joint_context()
        specs = []
        for prim in sorted(self.joint_prims, key=lambda p: str(p.GetPath())):
            self.current_path = str(prim.GetPath())
            spec = J.parse_joint(prim, ctx)
            if spec is None:
                continue
            for side in ("body0", "body1"):
                bp = getattr(spec, side)
                if bp is not None and bp not in self.bodies:
                    if bp in self.disabled_bodies or self.ignored(bp):
                        setattr(spec, side, None)  # a body not loaded: the joint attaches to the world
                        continue
                    raise USDImportError(f"{side} target {bp!r} is not a rigid body of the imported stage",
                                         prim.GetPath(), f"physics:{side}")  # fmt: skip
            if spec.body0 is None and spec.body1 is None:
                self.warn(str(prim.GetPath()), None, "joint connects no loaded body; skipped")
                continue
            if spec.body1 is None:
                from armillary import JointType

                if int(spec.joint_type) != int(JointType.FIXED):
                    raise USDImportError(
                        "reversed joint: physics:body1 must be the child body (body0 is the parent, or empty for the "
                        "world); only FIXED joints may name the world as body1", prim.GetPath(), "physics:body1")  # fmt: skip
                spec.body0, spec.body1 = None, spec.body0
                spec.X_B0J, spec.X_B1J = spec.X_B1J, spec.X_B0J
            specs.append(spec)
        self.current_path = None
        # stacked joints under jointsAddMobility (per articulation root)
        mobile = set()
        for r in self.art_roots:
            v = self.solver_value(self.stage.GetPrimAtPath(r), "ARTICULATION", "joints_add_mobility",
                                  "newton:jointsAddMobility", False)  # fmt: skip
            if bool(v):
                mobile.add(r)
        if mobile:
            inside = [sp for sp in specs if self._art_root_of(sp.body1) in mobile]
            outside = [sp for sp in specs if self._art_root_of(sp.body1) not in mobile]
            specs = sorted(J.merge_stacked_joints(inside, True, self.warn) + outside, key=lambda sp: sp.path)
        self.specs = specs

        # components over bodies (through non-excluded joints between bodies)
        parent = {p: p for p in self.bodies}

        def find(a):
            while parent[a] != a:
                parent[a] = parent[parent[a]]
                a = parent[a]
            return a

        for sp in specs:
            if sp.body0 is not None and sp.body1 is not None:
                parent[find(sp.body0)] = find(sp.body1)
        comps: dict[str, list[str]] = {}
        for p in self.body_order:
            comps.setdefault(find(p), []).append(p)
        comp_joints: dict[str, list] = {}
        for sp in specs:
            comp_joints.setdefault(find(sp.body1), []).append(sp)

        # articulation components first (by root traversal order), then the rest in body order
        order, seen = [], set()
        for r in self.art_roots:
            for p in self.body_order:
                if (p == r or p.startswith(r.rstrip("/") + "/")) and find(p) not in seen:
                    seen.add(find(p))
                    order.append(find(p))
        has_joint = {sp.body1 for sp in specs} | {sp.body0 for sp in specs if sp.body0}
        rest = [c for c in dict.fromkeys(find(p) for p in self.body_order) if c not in seen]
        jointed_rest = [c for c in rest if any(b in has_joint for b in comps[c])]
        free_rest = [c for c in rest if c not in jointed_rest]

        self.plan = []  # ("art", label, entries) | ("loose", spec); entries: ("spec", spec) | ("root", body path)
        self.plan_loops = []  # loop-closing joints, added last

        for c in order:
            label = None
            for b in comps[c]:
                label = self._art_root_of(b)
                if label:
                    break
            if label is None:
                label = comps[c][0]
            self._plan_component(comps[c], comp_joints.get(c, []), label, articulated=True)
        for c in jointed_rest:
            self._plan_component(comps[c], comp_joints.get(c, []), comps[c][0], articulated=False)
        for c in free_rest:
            for b in comps[c]:
                self.plan.append(("art", self._art_root_of(b) or b, [("root", b)]))
        if self.opts["bodies_follow_joint_ordering"]:
            seq = []
            for item in self.plan:
                if item[0] == "art":
                    for kind, x in item[2]:
                        seq.append(x if kind == "root" else x.body1)
                else:
                    if item[1].body0:
                        seq.append(item[1].body0)
                    seq.append(item[1].body1)
            seq.extend(self.body_order)
            self.body_seq = list(dict.fromkeys(seq))
        else:
            self.body_seq = list(self.body_order)

    def _plan_component(self, bodies: list[str], specs: list, label: str, articulated: bool):
        entries, loops = self._walk_component(bodies, specs, articulated)
        cyclic = any(not sp.exclude_from_articulation for sp in loops)
        if not articulated and cyclic:
            # a closed loop without articulation root: articulate a spanning tree, close the loop outside it
            articulated = True
            entries, loops = self._walk_component(bodies, specs, True)
        if articulated:
            self.plan.append(("art", label, entries))
        else:
            self.plan.extend(("loose", sp) for kind, sp in entries if kind == "spec")
        self.plan_loops.extend(loops)

    def _walk_component(self, bodies: list[str], specs: list, articulated: bool):
        ordering = self.opts["joint_ordering"]
        tree_ok = [sp for sp in specs if not sp.exclude_from_articulation]
        loops = [sp for sp in specs if sp.exclude_from_articulation]
        children: dict[str | None, list] = {}
        for sp in tree_ok:
            children.setdefault(sp.body0, []).append(sp)
        visited: set[str] = set()
        entries: list = []
        body_set = set(bodies)

        def traverse(start_specs):
            if ordering == "bfs":
                queue = list(start_specs)
                while queue:
                    sp = queue.pop(0)
                    if sp.body1 in visited:
                        loops.append(sp)
                        continue
                    visited.add(sp.body1)
                    entries.append(("spec", sp))
                    queue.extend(children.get(sp.body1, []))
            else:
                stack = list(reversed(start_specs))
                while stack:
                    sp = stack.pop()
                    if sp.body1 in visited:
                        loops.append(sp)
                        continue
                    visited.add(sp.body1)
                    entries.append(("spec", sp))
                    stack.extend(reversed(children.get(sp.body1, [])))

        def traverse_from_body(b):
            visited.add(b)
            traverse(children.get(b, []))

        traverse([sp for sp in children.get(None, []) if sp.body1 in body_set])
        incoming = {sp.body1 for sp in tree_ok}
        while True:
            left = [b for b in bodies if b not in visited]
            if not left:
                break
            cand = [b for b in left if b not in incoming] or left
            b = cand[0]
            outs = children.get(b, [])
            if b not in incoming and outs and all(sp.body1 in visited for sp in outs):
                raise USDImportError(
                    f"reversed joint: body0 {b!r} is attached to the rest of the mechanism only as the parent of "
                    f"{outs[0].body1!r}, which already has a parent joint; make {b!r} physics:body1 (the child)",
                    outs[0].path, "physics:body0")  # fmt: skip
            if articulated or len(bodies) == 1:
                entries.append(("root", b))
                traverse_from_body(b)
            else:
                # rootless: no synthetic root joint (as authored); still walk the tree
                visited.add(b)
                traverse(children.get(b, []))
        if ordering is None:
            # keep the authored (path) order of the joints
            rank = {id(sp): i for i, sp in enumerate(specs)}
            roots = [e for e in entries if e[0] == "root"]
            js = sorted((e for e in entries if e[0] == "spec"), key=lambda e: rank[id(e[1])])
            entries = roots + js
        return entries, loops

    # -------------------------------------------------------------- bodies and shapes
    def _body_world(self, b: _Body) -> _Tf:
        return self.X_root * b.X_stage

    def _add_bodies_and_shapes(self):
        s = self.s
        r = self.result
        # override_root_xform: per-articulation correction of the root pose
        self.correction: dict[str, _Tf] = {}
        if self.opts["override_root_xform"] and self.opts["xform"] is not None:
            for _label, entries in [(it[1], it[2]) for it in self.plan if it[0] == "art"]:
                root_body = entries[0][1] if entries[0][0] == "root" else entries[0][1].body1
                X0 = self.X_up * self.bodies[root_body].X_stage
                corr = self.X_xform * X0.inv()
                stack = set()
                for kind, x in entries:
                    stack.add(x if kind == "root" else x.body1)
                for b in stack:
                    self.correction[b] = corr
        for path in self.body_seq:
            b = self.bodies[path]
            self.current_path = path
            X = self._body_world(b)
            if path in self.correction:
                pb = self.opts["parent_body"]
                pre = _Tf.of(list(self.target.body_q[pb])) if pb >= 0 else _Tf()
                X = pre * self.correction[path] * self.X_up * b.X_stage
            b.index = s.add_link(xform=X.wp(), label=path, is_kinematic=b.kinematic)
            r["path_body_map"][path] = b.index
            for sh in b.shapes:
                self._add_shape(sh, b)
            self._apply_mass(b)
        for sh in self.shapes:
            if sh.body is None:
                self._add_shape(sh, None)
        self.current_path = None

    def _material(self, prim):
        from pxr import UsdPhysics, UsdShade

        try:
            mat, _rel = UsdShade.MaterialBindingAPI(prim).ComputeBoundMaterial(materialPurpose="physics")
        except Exception:
            mat = None
        if not mat:
            return None
        mp = mat.GetPrim()
        if not (mp.HasAPI(UsdPhysics.MaterialAPI) or has_applied_api_schema(mp, "NewtonMaterialAPI")):
            return None
        return mp

    @staticmethod
    def _density(prim):
        """Authored ``physics:density`` (> 0) or None; negative / non-finite values raise."""
        d = get_attribute(prim, "physics:density")
        if d is None:
            return None
        d = float(d)
        if not math.isfinite(d) or d < 0:
            raise USDImportError(f"density {d} must be finite and >= 0 (0: not set)", prim.GetPath(), "physics:density")
        return d if d > 0 else None

    def _shape_cfg(self, sh: _Shape, b: _Body | None):
        from pxr import UsdPhysics

        prim = sh.prim
        cfg = self.s.default_shape_cfg.copy()
        if sh.kind == "visual":
            cfg.has_shape_collision = False
            cfg.has_particle_collision = False
            cfg.density = 0.0
            return cfg, None
        if sh.kind == "site":
            cfg.mark_as_site()
            return cfg, None
        mat = self._material(prim)
        mat_density = None
        if mat is not None:
            dyn = get_attribute(mat, "physics:dynamicFriction")
            sta = get_attribute(mat, "physics:staticFriction")
            if dyn is not None:
                cfg.mu = float(dyn)
            elif sta is not None:
                cfg.mu = float(sta)
            rest = get_attribute(mat, "physics:restitution")
            if rest is not None:
                cfg.restitution = float(rest)
            dens = self._density(mat)
            if dens is not None:
                mat_density = dens * self.mu_ / self.lu**3
            for key, name, attr in (("mu_torsional", "newton:torsionalFriction", "mu_torsional"),
                                    ("mu_rolling", "newton:rollingFriction", "mu_rolling"),
                                    ("ke", "newton:contactStiffness", "ke"), ("kd", "newton:contactDamping", "kd"),
                                    ("kf", "newton:contactFrictionGain", "kf"), ("ka", "newton:contactAdhesion", "ka")):  # fmt: skip
                v = self.solver_value(mat, "MATERIAL", key, name, None)
                if v is not None and not (isinstance(v, float) and math.isinf(v) and v < 0):
                    v = float(v)
                    if not math.isfinite(v):
                        raise USDImportError(f"{v} is not a finite value", mat.GetPath(), name)
                    setattr(cfg, attr, v)
        # density: collider MassAPI > body MassAPI > material > default
        density = None
        if prim.HasAPI(UsdPhysics.MassAPI):
            d = self._density(prim)
            if d is not None:
                density = d * self.mu_ / self.lu**3
        if density is None and b is not None and b.prim.HasAPI(UsdPhysics.MassAPI):
            d = self._density(b.prim)
            if d is not None:
                density = d * self.mu_ / self.lu**3
        if density is None:
            density = mat_density
        if density is not None:
            cfg.density = density
        margin = self.solver_value(prim, "SHAPE", "margin", "newton:contactMargin", None)
        if margin is not None:
            cfg.margin = float(margin) * self.lu
        gap = self.solver_value(prim, "SHAPE", "gap", "newton:contactGap", None)
        if gap is not None and not (math.isinf(float(gap)) and float(gap) < 0):
            cfg.gap = float(gap) * self.lu
        grp = self.solver_value(prim, "SHAPE", "collision_group", "newton:collision_group", None)
        if grp is not None:
            cfg.collision_group = int(grp)
        sensor = self.solver_value(prim, "SHAPE", "is_sensor", "newton:is_sensor", None)
        if sensor:
            self.warn(sh.path, "newton:is_sensor", "sensor shapes are not supported; imported without contact response")
            cfg.has_shape_collision = False
            cfg.has_particle_collision = False
        enabled = get_attribute(prim, "physics:collisionEnabled")
        if enabled is False or (enabled is not None and not bool(enabled)):
            cfg.has_shape_collision = False
            cfg.has_particle_collision = False
            cfg.density = 0.0
            self.collision_disabled.append(sh)
        return cfg, (prim.HasAPI(UsdPhysics.MassAPI) and get_attribute(prim, "physics:mass"))

    def _add_shape(self, sh: _Shape, b: _Body | None):
        from pxr import UsdGeom

        s, lu, prim = self.s, self.lu, sh.prim
        self.current_path = sh.path
        body = b.index if b is not None else -1
        X = sh.X_BS if b is not None else (self.X_static * sh.X_BS)
        cfg, shape_mass = self._shape_cfg(sh, b)
        S = np.abs(sh.scale)
        label = sh.path
        color = None
        try:
            dc = UsdGeom.Gprim(prim).GetDisplayColorAttr().Get() if prim.IsA(UsdGeom.Gprim) else None
            if dc is not None and len(dc) > 0:
                color = tuple(float(c) for c in dc[0])
        except Exception:
            color = None
        kw = dict(cfg=cfg, label=label, color=color)
        t = prim.GetTypeName()
        idx = None
        if sh.kind == "site" and not prim.IsA(UsdGeom.Gprim):
            idx = s.add_shape_sphere(body, xform=X.wp(), radius=0.01, **kw)
        elif t == "Cube":
            size = float(prim.GetAttribute("size").Get() or 2.0)
            h = 0.5 * size * S * lu
            idx = s.add_shape_box(body, xform=X.wp(), hx=h[0], hy=h[1], hz=h[2], **kw)
        elif t == "Sphere":
            rad = float(prim.GetAttribute("radius").Get() or 1.0)
            if np.ptp(S) > 1e-6 * max(S.max(), 1e-12):
                self.warn(sh.path, "xformOp:scale", f"non-uniform scale {S.tolist()} of a sphere; the largest is used")
            idx = s.add_shape_sphere(body, xform=X.wp(), radius=rad * float(S.max()) * lu, **kw)
        elif t in ("Capsule", "Cylinder", "Cone", "Capsule_1", "Cylinder_1"):
            ax = str(prim.GetAttribute("axis").Get() or "Z").upper()
            if ax not in _AXIS_Q:
                raise USDImportError(f"axis {ax!r} is not one of 'X', 'Y', 'Z'", sh.path, "axis")
            a = "XYZ".index(ax)
            perp = [S[i] for i in range(3) if i != a]
            if t.endswith("_1"):
                rt = prim.GetAttribute("radiusTop").Get()
                rb = prim.GetAttribute("radiusBottom").Get()
                rad = float(max(rt or 0.0, rb or 0.0))
                if rt is not None and rb is not None and abs(float(rt) - float(rb)) > 1e-9:
                    self.warn(sh.path, "radiusTop", "different top and bottom radii are not supported; using the larger")
            else:
                rad = float(prim.GetAttribute("radius").Get() or (0.5 if t != "Cone" else 1.0))
            height = float(prim.GetAttribute("height").Get() or (1.0 if t == "Capsule" else 2.0))
            radius = rad * max(perp) * lu
            half = 0.5 * height * S[a] * lu
            Xa = _Tf(X.p, _qmul(X.q, _AXIS_Q[ax]))
            fn = {"Capsule": s.add_shape_capsule, "Capsule_1": s.add_shape_capsule, "Cylinder": s.add_shape_cylinder,
                  "Cylinder_1": s.add_shape_cylinder, "Cone": s.add_shape_cone}[t]  # fmt: skip
            idx = fn(body, xform=Xa.wp(), radius=radius, half_height=half, **kw)
        elif t == "Plane":
            ax = str(prim.GetAttribute("axis").Get() or "Z").upper()
            w = float(prim.GetAttribute("width").Get() or 0.0)
            ln = float(prim.GetAttribute("length").Get() or 0.0)
            Xa = _Tf(X.p, _qmul(X.q, _AXIS_Q[ax]))
            idx = s.add_shape_plane(xform=Xa.wp(), width=w * lu, length=ln * lu, body=body, **kw)
        elif t == "Mesh":
            mesh = self._mesh(sh)
            idx = s.add_shape_mesh(body, xform=X.wp(), mesh=mesh, scale=tuple((sh.scale * lu).tolist()), **kw)
            if sh.kind == "collision":
                self._pending_mesh_approx.append((sh, idx))
        else:
            self.warn(sh.path, None, f"geometry type {t!r} is not supported; skipped")
            return
        sh.index = idx
        self.result["path_shape_map"][sh.path] = idx
        self.result["path_shape_scale"][sh.path] = wp.vec3(*sh.scale.tolist())
        if shape_mass and b is not None:
            self._shape_mass_override(b, idx, float(shape_mass) * self.mu_)

    def _mesh(self, sh: _Shape):
        """The prim's triangle mesh in its local frame and stage units (scale and units go on the shape)."""
        from .mesh import get_mesh

        return get_mesh(sh.prim, apply_stage_units=False, load_visual_materials=False, compute_inertia=True)

    def _shape_mass_override(self, b: _Body, idx: int, mass: float):
        """The collider authors its own mass: rescale the contribution it made to the body."""
        # record for _apply_mass; the contribution is recomputed there
        self._shape_masses.setdefault(b.path, {})[idx] = mass

    def _apply_mass(self, b: _Body):
        from pxr import UsdPhysics

        from armillary.sim import mass as M

        s = self.s
        i = b.index
        overrides = self._shape_masses.get(b.path, {})
        if overrides:
            # rebuild the body's mass from its shapes, scaling those with an authored mass
            parts = []
            for sidx in s.body_shapes[i]:
                if s.shape_density[sidx] <= 0 or not (s.shape_flags[sidx] & ShapeFlags.COLLIDE_SHAPES) and sidx not in overrides:
                    continue
                sc = s.shape_scale[sidx]
                m, c, I = M.shape_mass_properties(s.shape_type[sidx], sc, s.shape_density[sidx], s.shape_is_solid[sidx],
                                                  s.shape_margin[sidx], s.shape_source[sidx])  # fmt: skip
                if sidx in overrides and m > 0:
                    k = overrides[sidx] / m
                    m, I = m * k, np.asarray(I) * k
                tf = s.shape_transform[sidx]
                m, c, I = M.transform_mass_properties(m, c, I, tf.p, tf.q)
                parts.append((m, c, I))
            tot_m, tot_c, tot_I = 0.0, np.zeros(3), np.zeros((3, 3))
            for m, c, I in parts:
                tot_m, tot_c, tot_I = M.combine(tot_m, tot_c, tot_I, m, np.asarray(c), np.asarray(I).reshape(3, 3))
            s.body_mass[i] = float(tot_m)
            s.body_com[i] = wp.vec3(*np.asarray(tot_c, dtype=float).tolist())
            s.body_inertia[i] = wp.mat33(*np.asarray(tot_I, dtype=float).reshape(-1).tolist())
        prim = b.prim
        if not b.enabled:
            s.body_mass[i] = 0.0
            s.body_inertia[i] = wp.mat33(*([0.0] * 9))
        if prim.HasAPI(UsdPhysics.MassAPI):
            mass = get_attribute(prim, "physics:mass")
            com = get_attribute(prim, "physics:centerOfMass")
            diag = get_attribute(prim, "physics:diagonalInertia")
            axes = get_attribute(prim, "physics:principalAxes")
            I_units = self.mu_ * self.lu**2
            if mass is not None and not math.isfinite(float(mass)):
                raise USDImportError(f"mass {float(mass)} must be finite", b.path, "physics:mass")
            if mass is not None and float(mass) > 0:
                mass = float(mass) * self.mu_
                if not math.isfinite(mass):
                    raise USDImportError(f"mass {mass} is not finite", b.path, "physics:mass")
                m0 = s.body_mass[i]
                I0 = np.asarray(s.body_inertia[i], dtype=np.float64).reshape(3, 3)
                s.body_inertia[i] = wp.mat33(*((I0 * (mass / m0)) if m0 > 0 else np.zeros((3, 3))).reshape(-1).tolist())
                s.body_mass[i] = mass
            elif mass is not None and float(mass) < 0:
                raise USDImportError(f"mass {float(mass)} must be >= 0", b.path, "physics:mass")
            if com is not None and not (abs(float(com[0])) >= 1e30):  # -inf sentinel: not authored
                c = np.array([float(v) for v in com]) * b.scale * self.lu
                if not np.all(np.isfinite(c)):
                    raise USDImportError(f"centre of mass {[float(v) for v in com]} must be finite (or -inf: not set)",
                                         b.path, "physics:centerOfMass")  # fmt: skip
                s.body_com[i] = wp.vec3(*c.tolist())
            if diag is not None:
                d = np.array([float(v) for v in diag])
                if np.any(d < 0) or not np.all(np.isfinite(d)):
                    raise USDImportError(f"diagonal inertia {d.tolist()} must be finite and >= 0", b.path,
                                         "physics:diagonalInertia")  # fmt: skip
                if np.any(d > 0):
                    q = quat_wxyz_gf_to_xyzw(axes) if axes is not None else np.array([0.0, 0.0, 0.0, 1.0])
                    n = np.linalg.norm(q)
                    if not (np.all(np.isfinite(q)) and n > 1e-12):
                        raise USDImportError(f"principal axes {q.tolist()} (xyzw) must be a finite non-zero quaternion",
                                             b.path, "physics:principalAxes")  # fmt: skip
                    q = q / n
                    R = _qmat(q)
                    I = R @ np.diag(d * I_units) @ R.T
                    s.body_inertia[i] = wp.mat33(*I.reshape(-1).tolist())
        s.body_lock_inertia[i] = True

    # -------------------------------------------------------------- joints
    def _add_joints(self):
        s, r, o = self.s, self.result, self.opts
        self.art_index: list[tuple[str, int]] = []
        self.tree_joint_count = 0

        pb = o["parent_body"]
        X_par = _Tf.of(list(self.target.body_q[pb])) if pb >= 0 else _Tf()

        def parent_xf(sp, child_path, reparented):
            """World-attached anchors: in the world frame, or in ``parent_body``'s frame when the joint
            is re-parented to it at commit."""
            if sp.body0 is None:
                X = _Tf.of(list(sp.X_B0J))
                corr = self.correction.get(child_path)
                base = (corr if corr is not None else self.X_xform) * self.X_up * X
                return (base if reparented else X_par * base).wp()
            return sp.X_B0J

        def add_spec(sp, reparented=True):
            self.current_path = sp.path
            p = -1 if sp.body0 is None else self.bodies[sp.body0].index
            c = self.bodies[sp.body1].index
            j = sp.add_to(s, p, c, parent_xf(sp, sp.body1, reparented), sp.X_B1J)
            for src in (sp.source_paths or [sp.path]):
                r["path_joint_map"][src] = j
            r["path_joint_map"][sp.path] = j
            if len(sp.source_paths) > 1:  # a merged stacked joint: each source prim owns its DOFs
                for i, src in enumerate(sp.dof_sources):
                    r["path_joint_dof_map"].setdefault(src, []).append(s.joint_qd_start[j] + i)
                    r["path_joint_coord_map"].setdefault(src, []).append(s.joint_q_start[j] + i)
            return j

        def add_root(bpath):
            b = self.bodies[bpath]
            X = _Tf.of(list(s.body_q[b.index]))
            bj = o["base_joint"]
            if bj is not None:
                kw = dict(bj)
                jt = kw.pop("joint_type", kw.pop("type", None))
                if jt is None:
                    raise ValueError("add_usd: base_joint needs a 'joint_type'")
                if o["parent_body"] >= 0:
                    X = _Tf.of(list(self.target.body_q[o["parent_body"]])).inv() * X
                kw.setdefault("parent_xform", X.wp())
                return s.add_joint(jt, -1, b.index, **kw)
            fl = o["floating"]
            if fl is False or (fl is None and o["parent_body"] >= 0):
                if o["parent_body"] >= 0:
                    X = _Tf.of(list(self.target.body_q[o["parent_body"]])).inv() * X
                return s.add_joint_fixed(-1, b.index, parent_xform=X.wp())
            return s.add_joint_free(b.index)

        for item in self.plan:
            if item[0] == "loose":
                add_spec(item[1])
                continue
            _kind, label, entries = item
            js = []
            for kind, x in entries:
                js.append(add_root(x) if kind == "root" else add_spec(x))
            if js:
                a = s.add_articulation(js, label=label)
                self.art_index.append((label, a))
                r["path_articulation_map"].setdefault(label, a)
        self.tree_joint_count = s.joint_count
        for sp in self.plan_loops:
            add_spec(sp, reparented=False)
        self.current_path = None

    # -------------------------------------------------------------- filtering
    def _shapes_under(self, path: str) -> list[int]:
        pre = path.rstrip("/") + "/"
        if path in self.bodies:
            return [sh.index for sh in self.bodies[path].shapes if sh.index >= 0 and sh.kind == "collision"]
        return [sh.index for sh in self.shapes
                if sh.index >= 0 and sh.kind == "collision" and (sh.path == path or sh.path.startswith(pre))]  # fmt: skip

    def _collision_filtering(self):
        from pxr import UsdPhysics

        s = self.s
        pairs = s.shape_collision_filter_pairs
        colliders = [sh for sh in self.shapes if sh.kind == "collision" and sh.index >= 0]
        # collision groups
        if self.groups:
            members: dict[str, set[int]] = {}
            info = {}
            merge: dict[str, str] = {}
            for g in self.groups:
                gp = str(g.GetPath())
                cg = UsdPhysics.CollisionGroup(g)
                q = cg.GetCollidersCollectionAPI().ComputeMembershipQuery()
                mem = set()
                for sh in colliders:
                    if q.IsPathIncluded(sh.prim.GetPath()):
                        mem.add(sh.index)
                mg = cg.GetMergeGroupNameAttr().Get()
                key = f"merge:{mg}" if mg else gp
                merge[gp] = key
                members.setdefault(key, set()).update(mem)
                inv = bool(cg.GetInvertFilteredGroupsAttr().Get() or False)
                tg = [str(t) for t in cg.GetFilteredGroupsRel().GetTargets()]
                prev = info.get(key)
                if prev is None:
                    info[key] = (inv, set(tg))
                else:
                    info[key] = (prev[0] or inv, prev[1] | set(tg))
            keys = list(members)
            self.result["collision_group_ids"] = {
                str(g.GetPath()): 1 + keys.index(merge[str(g.GetPath())]) for g in self.groups
            }

            def filtered(a, b):
                ia, ta = info[a]
                tk = {merge.get(t, t) for t in ta}
                hit = b in tk
                return (not hit) if ia else hit

            for ai, a in enumerate(keys):
                for b in keys[ai:]:
                    if filtered(a, b) or filtered(b, a):
                        for x in members[a]:
                            for y in members[b]:
                                if x != y:
                                    pairs.add((x, y))
        # filteredPairs relationships
        for prim in self.filtered_pairs_prims:
            src = self._shapes_under(str(prim.GetPath()))
            for t in prim.GetRelationship("physics:filteredPairs").GetTargets():
                for x in src:
                    for y in self._shapes_under(str(t)):
                        if x != y:
                            pairs.add((x, y))
        # collisionEnabled = false: filtered against every other shape of the import
        for sh in self.collision_disabled:
            for k in range(s.shape_count):
                if k != sh.index:
                    pairs.add((sh.index, k))
        # self-collisions per articulation
        for label, a in self.art_index:
            prim = self.stage.GetPrimAtPath(label)
            en = None
            if prim and prim.IsValid():
                en = self.solver_value(prim, "ARTICULATION", "self_collision_enabled", "newton:selfCollisionEnabled")
            en = self.opts["enable_self_collisions"] if en is None else bool(en)
            if en:
                continue
            js = range(s.articulation_start[a], s.articulation_end[a])
            bodies = sorted({s.joint_child[j] for j in js} | {s.joint_parent[j] for j in js if s.joint_parent[j] >= 0})
            shp = [(bi, k) for bi in bodies for k in s.body_shapes.get(bi, []) if s.shape_flags[k] & 2]
            for x in range(len(shp)):
                for y in range(x + 1, len(shp)):
                    if shp[x][0] != shp[y][0]:
                        pairs.add((shp[x][1], shp[y][1]))

    def _visibility(self):
        from armillary.sim.enums import ShapeFlags

        o, s = self.opts, self.s
        for b in self.bodies.values():
            has_visual = any(sh.kind == "visual" and sh.index >= 0 for sh in b.shapes)
            if not has_visual:
                continue
            for sh in b.shapes:
                if sh.kind != "collision" or sh.index < 0:
                    continue
                show = o["force_show_colliders"] and not o["hide_collision_shapes"]
                f = s.shape_flags[sh.index]
                s.shape_flags[sh.index] = int(f | ShapeFlags.VISIBLE) if show else int(f & ~ShapeFlags.VISIBLE)

    def _approximate_meshes(self):
        from pxr import UsdPhysics

        pend = self._pending_mesh_approx
        if self.opts["skip_mesh_approximation"] or not pend:
            return
        methods: dict[tuple, list[int]] = {}
        for sh, idx in pend:
            prim = sh.prim
            appr = None
            if prim.HasAPI(UsdPhysics.MeshCollisionAPI):
                appr = UsdPhysics.MeshCollisionAPI(prim).GetApproximationAttr().Get()
            appr = str(appr or "none")
            m = {"none": None, "meshSimplification": None, "convexHull": "convex_hull",
                 "boundingSphere": "bounding_sphere", "boundingCube": "bounding_box",
                 "convexDecomposition": "coacd", "sdf": None}.get(appr, "unknown")  # fmt: skip
            if m == "unknown":
                self.warn(sh.path, "physics:approximation", f"approximation {appr!r} is not known; the mesh is kept")
                continue
            if m is None:
                continue
            hv = self.solver_value(prim, "SHAPE", "max_hull_vertices", "newton:maxHullVertices", None)
            if hv is None:
                hv = self.opts["mesh_maxhullvert"]
            methods.setdefault((m, None if hv is None else int(hv)), []).append(idx)
        for (m, hv), idxs in methods.items():
            kw = {}
            if m == "convex_hull" and hv is not None:
                kw["maxhullvert"] = hv
            self.s.approximate_meshes(m, shape_indices=idxs, **kw)

    def _schema_attrs(self):
        prims = []
        if self.scene_prim is not None:
            prims.append(self.scene_prim)
        prims += [self.stage.GetPrimAtPath(p) for p in self.art_roots]
        prims.append(self.root)
        prims += [b.prim for b in self.bodies.values()]
        prims += list(self.joint_prims)
        prims += [sh.prim for sh in self.shapes if sh.kind == "collision"]
        self.result["schema_attrs"] = schemas.collect_schema_attrs(self.resolvers, prims)

    def _custom_attributes(self):
        # parse_mujoco_options=False: the mujoco:* scene options keep their defaults
        skip = ("mujoco",) if not self.opts["parse_mujoco_options"] else ()
        custom.apply_custom_attributes(self.s, self.stage, self.result, root_path=self.opts["root_path"],
                                       ignore=self.ignored, skip_scene_namespaces=skip)  # fmt: skip

    def _collapse(self):
        if not self.opts["collapse_fixed_joints"]:
            return
        s, r = self.s, self.result
        before = dict(r["path_body_map"])
        res = s.collapse_fixed_joints(verbose=self.opts["verbose"])
        r["collapse_results"] = res
        remap = res.get("body_remap", {})
        jremap = res.get("joint_remap", {})
        merged_tf = res.get("body_merged_transform", {})
        new_map = {}
        for path, old in before.items():
            r["path_original_body_map"][path] = old
            if old in remap:
                new_map[path] = remap[old]
            else:
                parent = res.get("body_merged_parent", {}).get(old)
                if parent is not None:
                    new_map[path] = remap.get(parent, parent)
                    tf = merged_tf.get(old)
                    if tf is not None:
                        r["path_body_relative_transform"][path] = tf
        r["path_body_map"] = new_map
        r["path_joint_map"] = {p: jremap[j] for p, j in r["path_joint_map"].items() if j in jremap}
        amap = res.get("articulation_remap", {})
        if amap:
            r["path_articulation_map"] = {p: amap[a] for p, a in r["path_articulation_map"].items() if a in amap}

    # -------------------------------------------------------------- merge
    def _commit(self):
        target, s, r, o = self.target, self.s, self.result, self.opts
        nb0, nj0, ns0, na0 = target.body_count, target.joint_count, target.shape_count, target.articulation_count
        ndof0, ncoord0 = target.joint_dof_count, target.joint_coord_count
        if o["apply_up_axis_from_stage"]:
            from armillary import Axis

            target.up_axis = Axis[self.stage_up]
        pb = o["parent_body"]
        target.add_builder(s)
        if pb >= 0:
            _attach(target, nj0, na0, nj0 + self.tree_joint_count, pb)
        if self.gravity is not None:
            g = tuple(float(v) for v in self.gravity)
            if getattr(target, "current_world", -1) >= 0 and hasattr(target, "world_gravity"):
                target.world_gravity[target.current_world] = g
            else:
                target.gravity = g
        for key, off in (("path_body_map", nb0), ("path_joint_map", nj0), ("path_shape_map", ns0),
                         ("path_original_body_map", nb0)):  # fmt: skip
            r[key] = {p: (i + off if i >= 0 else i) for p, i in r[key].items()}
        r["path_articulation_map"] = {p: a + na0 for p, a in r["path_articulation_map"].items()}
        for key, off in (("path_joint_dof_map", ndof0), ("path_joint_coord_map", ncoord0)):
            r[key] = {p: [i + off for i in idx] for p, idx in r[key].items()}
        if pb >= 0:
            # articulations merged into the parent's
            r["path_articulation_map"] = {p: (a if a < target.articulation_count else target.articulation_count - 1)
                                          for p, a in r["path_articulation_map"].items()}  # fmt: skip
        if o["verbose"]:
            print(f"add_usd: {s.body_count} bodies, {s.joint_count} joints, {s.shape_count} shapes, "
                  f"{s.articulation_count} articulations")  # fmt: skip


def _attach(builder, nj0: int, na0: int, tree_end: int, parent_body: int) -> None:
    """Re-parent the imported tree roots (world-rooted in the scratch) to ``parent_body``; the imported
    articulated joints join the parent's articulation (or one new articulation when it has none)."""
    roots = [j for j in range(nj0, tree_end) if builder.joint_parent[j] == -1]
    for j in roots:
        c = builder.joint_child[j]
        builder.joint_parent[j] = parent_body
        builder.joint_parents[c] = [parent_body if x == -1 else x for x in builder.joint_parents.get(c, [])]
        kids = builder.joint_children.get(-1, [])
        if c in kids:
            kids.remove(c)
        builder.joint_children.setdefault(parent_body, []).append(c)
        builder._body_joints.setdefault(parent_body, []).append(j)
        builder.joint_collision_filter_parent[j] = True
        builder._filter_joint_shapes(parent_body, c)
    # drop the imported articulations; the tree joints join the parent's articulation
    del builder.articulation_start[na0:]
    del builder.articulation_end[na0:]
    del builder.articulation_label[na0:]
    del builder.articulation_world[na0:]
    for j in range(nj0, builder.joint_count):
        builder.joint_articulation[j] = -1
    arts = [builder.joint_articulation[j] for j in builder._body_joints.get(parent_body, []) if j < nj0]
    art = next((a for a in arts if a >= 0), None)
    tree = list(range(nj0, tree_end))
    if art is not None:
        builder.articulation_end[art] = tree_end
        for j in tree:
            builder.joint_articulation[j] = art
    elif tree:
        builder.add_articulation(tree)


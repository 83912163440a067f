"""UsdPhysics joints -> :class:`JointSpec` -> ``ModelBuilder.add_joint``.

Units: joint frames and linear values in meters (stage values times ``ctx.linear_unit``, local joint
positions also times the body's world scale), angles in radians. USD authors angles in degrees:
revolute/rotX.. limits, drive targets (deg, deg/s), angular drive gains (per deg, per deg/s) and the
angular ``NewtonJointAPI`` values are converted here.

Conventions (decided where UsdPhysics, the project's schema and the reference engine leave room):

- Generic ``PhysicsJoint`` -> D6: a DOF exists for each ``PhysicsLimitAPI:<transX..rotZ>`` instance with
  ``low < high`` (``low >= high`` locks the axis; +-inf bounds are unlimited). Axes without a limit
  instance are locked, as the reference engine does; a drive on such an axis, and a ``distance`` limit,
  are warned about and ignored. DOF order: transX, transY, transZ, rotX, rotY, rotZ.
- ``PhysicsSphericalJoint`` cone limits cannot be represented on armillary's BALL joint: warned about
  and ignored (the BALL joint is unlimited).
- Unauthored values (and the ``-inf`` limit sentinels, and ``newton:velocityLimit = inf``) take the
  builder's ``default_joint_cfg`` value when the joint is added (:meth:`JointSpec.add_to`).
- ``newton:limitStiffness = inf`` is a hard limit: ``limit_ke = HARD_LIMIT_KE`` (1e8 in the authored
  units, i.e. 1e8 * 180/pi N*m/rad for angular DOFs, like the reference engine) and ``limit_kd = 0``;
  ``extra["hard_limit"] = True``.
- ``newton:armature`` and ``newton:friction`` are not unit converted (the reference engine does not
  convert them either); ``newton:damping``, ``newton:limitStiffness``, ``newton:limitDamping`` are per
  degree (-> times 180/pi), ``newton:velocityLimit`` is deg/s (-> times pi/180) on angular DOFs.
- Values read through other resolvers keep their schema's units: ``mjc:*`` gains are per radian,
  ``mjc:springref`` / ``mjc:ref`` are degrees on hinges; ``physxJoint:maxJointVelocity`` is deg/s.
- A joint with only ``physics:body0`` is flipped (body1 := body0, world parent, DOF axes negated so the
  joint coordinate keeps its sign); ``extra["flipped"] = True``.
- Drive target mode follows ``JointTargetMode.from_gains`` semantics: NONE without a drive, EFFORT for a
  drive with zero gains, POSITION / VELOCITY / POSITION_VELOCITY from the non-zero gains.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import warp as wp

from armillary.sim.enums import JointTargetMode, JointType
from armillary.sim.joint_config import JointDofConfig

from armillary.sim.rotations import quat_conjugate as _qinv
from armillary.sim.rotations import quat_from_matrix as _mat_to_quat
from armillary.sim.rotations import quat_multiply as _qmul
from armillary.sim.rotations import quat_rotate as _qrot

from .utils import USDImportError, get_attribute, has_applied_api_schema

DEG = math.pi / 180.0
HARD_LIMIT_KE = 1.0e8
"""``limit_ke`` (in the authored units) for ``newton:limitStiffness = inf`` (a hard limit)."""

_LIN_NAMES = ("transX", "transY", "transZ")
_ANG_NAMES = ("rotX", "rotY", "rotZ")
_AXIS_VEC = {"X": (1.0, 0.0, 0.0), "Y": (0.0, 1.0, 0.0), "Z": (0.0, 0.0, 1.0)}
_SINGLE_DOF = (JointType.REVOLUTE, JointType.PRISMATIC)

# NewtonJointAPI attributes: interface key -> attribute name
NEWTON_JOINT_ATTRS = {
    "armature": "newton:armature",
    "damping": "newton:damping",
    "friction": "newton:friction",
    "velocity_limit": "newton:velocityLimit",
    "limit_ke": "newton:limitStiffness",
    "limit_kd": "newton:limitDamping",
}
_DOF_FIELDS = ("limit_lower", "limit_upper", "limit_ke", "limit_kd", "target_ke", "target_kd", "damping",
               "armature", "effort_limit", "velocity_limit", "friction")  # fmt: skip


def _warn_noop(path, attr, message):  # pragma: no cover - default
    pass


@dataclass
class JointContext:
    """What :func:`parse_joint` needs from the importer.

    ``body_scale(path) -> np.ndarray (3,)``: world scale of a rigid-body prim. ``warn(prim_path, attribute,
    message)``: reports authored values armillary cannot represent.
    """

    linear_unit: float = 1.0
    body_scale: Callable[[str], np.ndarray] = field(default=lambda path: np.ones(3))
    resolvers: list = field(default_factory=list)
    warn: Callable[[str, str | None, str], None] = _warn_noop
    joint_drive_gains_scaling: float = 1.0
    force_position_velocity_actuation: bool = False
    only_load_enabled_joints: bool = True


@dataclass
class JointSpec:
    """A parsed joint, independent of builder indices.

    ``X_B0J`` / ``X_B1J``: joint frame in body0's / body1's frame [m] (stage world frame [m] for a world
    side). ``linear_axes`` / ``angular_axes``: per-DOF configs (axes in the joint frame, SI units).
    ``dof_defaults[i]``: names of config fields of DOF ``i`` (linear first) that take the builder's
    ``default_joint_cfg`` value in :meth:`add_to`. ``dof_sources[i]``: the prim that authored DOF ``i``.
    ``traversal_key``: sibling indices from the root, so sorting by it gives the stage traversal order.
    """

    path: str
    joint_type: JointType
    body0: str | None
    body1: str | None
    X_B0J: Any
    X_B1J: Any
    linear_axes: list = field(default_factory=list)
    angular_axes: list = field(default_factory=list)
    enabled: bool = True
    exclude_from_articulation: bool = False
    collision_filter_parent: bool = True
    source_paths: list = field(default_factory=list)
    label: str = ""
    extra: dict = field(default_factory=dict)
    dof_defaults: list = field(default_factory=list)
    dof_sources: list = field(default_factory=list)
    traversal_key: tuple = ()

    @property
    def dof_count(self) -> int:
        return len(self.linear_axes) + len(self.angular_axes)

    def dof_configs(self, builder=None) -> list:
        """Copies of the DOF configs (linear first) with unauthored fields from ``builder.default_joint_cfg``."""
        out = []
        dflt = getattr(builder, "default_joint_cfg", None) if builder is not None else None
        cfgs = list(self.linear_axes) + list(self.angular_axes)
        for i, cfg in enumerate(cfgs):
            c = JointDofConfig.__new__(JointDofConfig)
            c.__dict__.update(cfg.__dict__)
            if dflt is not None and i < len(self.dof_defaults):
                for name in self.dof_defaults[i]:
                    setattr(c, name, getattr(dflt, name))
            out.append(c)
        return out

    def add_to(self, builder, parent: int, child: int, parent_xform, child_xform, custom_attributes=None) -> int:
        """Add this joint with ``builder.add_joint``; returns the joint index.

        ``parent_xform`` / ``child_xform``: joint frame in the parent / child body frame (wp.transform).
        """
        cfgs = self.dof_configs(builder)
        n_lin = len(self.linear_axes)
        for feature, source in self.extra.get("authored_features", ()):
            builder.note_authored_feature(feature, source)
        cfp = bool(self.collision_filter_parent) and parent >= 0
        return builder.add_joint(
            self.joint_type,
            parent,
            child,
            linear_axes=cfgs[:n_lin],
            angular_axes=cfgs[n_lin:],
            label=self.label or self.path,
            parent_xform=parent_xform,
            child_xform=child_xform,
            collision_filter_parent=cfp,
            enabled=self.enabled,
            custom_attributes=custom_attributes,
        )


# ----------------------------------------------------------------------------- helpers
def target_mode_from_gains(ke: float, kd: float, force_position_velocity: bool = False, has_drive: bool = False):
    """``JointTargetMode`` from drive gains (``JointTargetMode.from_gains`` semantics)."""
    f = getattr(JointTargetMode, "from_gains", None)
    if f is not None:
        return f(ke, kd, force_position_velocity=force_position_velocity, has_drive=has_drive)
    if not has_drive:
        return JointTargetMode.NONE
    if ke != 0.0 and kd != 0.0:
        return JointTargetMode.POSITION_VELOCITY if force_position_velocity else JointTargetMode.POSITION
    if ke != 0.0:
        return JointTargetMode.POSITION
    if kd != 0.0:
        return JointTargetMode.VELOCITY
    return JointTargetMode.EFFORT


def _path(prim) -> str:
    return str(prim.GetPath())


def _float_attr(prim, name: str, default=None, *, allow_inf: bool = True):
    """Authored float attribute (NaN -> error; +-inf kept when ``allow_inf``), else ``default``."""
    v = get_attribute(prim, name)
    if v is None:
        return default
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise USDImportError(f"value {v!r} is not a number", _path(prim), name) from None
    if math.isnan(f) or (not allow_inf and math.isinf(f)):
        raise USDImportError(f"value {f} is not allowed; expected a finite number", _path(prim), name)
    return f


def _bool_attr(prim, name: str, default: bool) -> bool:
    v = get_attribute(prim, name)
    return default if v is None else bool(v)


def _vec3_attr(prim, name: str) -> np.ndarray:
    v = get_attribute(prim, name)
    if v is None:
        return np.zeros(3)
    a = np.asarray([float(x) for x in v], dtype=np.float64)
    if a.shape != (3,) or not np.all(np.isfinite(a)):
        raise USDImportError(f"value {tuple(a.tolist())} must be a finite 3-vector", _path(prim), name)
    return a


def _quat_attr(prim, name: str) -> np.ndarray:
    """Authored ``Gf.Quat`` (real first) as a normalized xyzw array; identity when unauthored."""
    v = get_attribute(prim, name)
    if v is None:
        return np.array([0.0, 0.0, 0.0, 1.0])
    im = v.GetImaginary()
    q = np.array([im[0], im[1], im[2], v.GetReal()], dtype=np.float64)
    n = float(np.linalg.norm(q))
    if not math.isfinite(n) or n < 1e-9:
        raise USDImportError(
            f"quaternion (real, i, j, k) = ({v.GetReal()}, {im[0]}, {im[1]}, {im[2]}) is not a rotation; "
            "expected a finite non-zero quaternion",
            _path(prim),
            name,
        )
    return q / n


def _is_rigid_body(prim) -> bool:
    return has_applied_api_schema(prim, "PhysicsRigidBodyAPI")


def _world_matrix(prim) -> np.ndarray:
    from pxr import Usd, UsdGeom

    m = UsdGeom.Xformable(prim).ComputeLocalToWorldTransform(Usd.TimeCode.Default()) if prim.IsA(UsdGeom.Xformable) else None
    if m is None:
        return np.eye(4)
    return np.array(m, dtype=np.float64).T  # column-vector convention


def _decompose(m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """4x4 column-convention matrix -> (translation, rotation 3x3, scale (3,))."""
    t = m[:3, 3].copy()
    a = m[:3, :3]
    s = np.linalg.norm(a, axis=0)
    s[s < 1e-12] = 1.0
    r = a / s
    if np.linalg.det(r) < 0:
        s[2] = -s[2]
        r[:, 2] = -r[:, 2]
    return t, r, s






def _tf(p, q):
    return wp.transform(wp.vec3(*[float(x) for x in p]), wp.quat(*[float(x) for x in q]))


def _tf_arrays(t) -> tuple[np.ndarray, np.ndarray]:
    v = [float(x) for x in t]
    return np.array(v[:3]), np.array(v[3:7])


def _resolve_side(prim, rel_name: str, pos_name: str, rot_name: str, ctx: JointContext):
    """(rigid-body path or None, joint frame in that body's frame (world frame for None) as wp.transform)."""
    path = _path(prim)
    rel = prim.GetRelationship(rel_name)
    targets = list(rel.GetTargets()) if rel else []
    pos = _vec3_attr(prim, pos_name)
    rot = _quat_attr(prim, rot_name)
    L = float(ctx.linear_unit)
    if not targets:
        return None, _tf(pos * L, rot)
    if len(targets) > 1:
        raise USDImportError(
            f"relationship has {len(targets)} targets {[str(t) for t in targets]}; expected one rigid body",
            path, rel_name,
        )  # fmt: skip
    tpath = targets[0]
    target = prim.GetStage().GetPrimAtPath(tpath)
    if not target or not target.IsValid():
        raise USDImportError(f"target prim {tpath} does not exist", path, rel_name)
    if _is_rigid_body(target):
        scale = np.asarray(ctx.body_scale(str(tpath)), dtype=np.float64).reshape(3)
        return str(tpath), _tf(pos * scale * L, rot)
    # target is not a rigid body: attach to its nearest rigid-body ancestor, else to the world
    m_t = _world_matrix(target)
    t_t, r_t, s_t = _decompose(m_t)
    x_wt_p, x_wt_q = t_t * L, _mat_to_quat(r_t)
    p_wj = x_wt_p + _qrot(x_wt_q, pos * s_t * L)
    q_wj = _qmul(x_wt_q, rot)
    anc = target.GetParent()
    while anc and anc.IsValid() and not anc.IsPseudoRoot():
        if _is_rigid_body(anc):
            t_b, r_b, _s = _decompose(_world_matrix(anc))
            q_wb = _mat_to_quat(r_b)
            p_bj = _qrot(_qinv(q_wb), p_wj - t_b * L)
            q_bj = _qmul(_qinv(q_wb), q_wj)
            return _path(anc), _tf(p_bj, q_bj)
        anc = anc.GetParent()
    return None, _tf(p_wj, q_wj)


# ----------------------------------------------------------------------------- value resolution
def _schemas():
    try:
        from . import schemas  # noqa: PLC0415
    except Exception:  # schemas.py missing or broken: read attributes by name
        return None
    return schemas


def _resolver_kind(r) -> str:
    name = type(r).__name__.lower()
    for kind in ("newton", "physx", "mjc"):
        if kind in name:
            return kind
    return "other"


def _has_mjc(ctx: JointContext) -> bool:
    return any(_resolver_kind(r) == "mjc" for r in (ctx.resolvers or []))


def _resolve_joint_value(prim, key: str, ctx: JointContext):
    """(value, kind, attribute name) of the first authored value for ``key`` in resolver priority order;
    ``newton:*`` is always read by name (after the given resolvers when SchemaResolverNewton is not among
    them). Every resolver returns these keys in NewtonJointAPI units. (None, None, None) if unauthored."""
    sch = _schemas()
    resolvers = list(ctx.resolvers or [])
    if sch is not None:
        for r in resolvers:
            v = r.get_value(prim, sch.PrimType.JOINT, key)
            if v is not None:
                spec = getattr(r, "mapping", {}).get(sch.PrimType.JOINT, {}).get(key)
                attr = getattr(spec, "name", None) or key
                return _check_number(prim, attr, v), _resolver_kind(r), attr
    name = NEWTON_JOINT_ATTRS.get(key)
    if name is not None:
        v = _float_attr(prim, name)
        if v is not None:
            return v, "newton", name
    return None, None, None


def _check_number(prim, attr, v):
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise USDImportError(f"value {v!r} is not a number", _path(prim), attr) from None
    if math.isnan(f):
        raise USDImportError("value NaN is not allowed", _path(prim), attr)
    return f


# ----------------------------------------------------------------------------- per-DOF parsing
class _Dof:
    """A DOF under construction: values set so far and the fields left to the builder default."""

    def __init__(self, axis, angular: bool, source: str, inst: str | None = None):
        self.cfg = JointDofConfig(axis=axis)
        self.angular = angular
        self.inst = inst  # per-axis attribute instance: linear / angular / transX .. rotZ
        self.source = source
        self.defaults = set(_DOF_FIELDS)

    def set(self, name, value):
        setattr(self.cfg, name, float(value))
        self.defaults.discard(name)


def _set_limits(dof: _Dof, lo, hi, conv: float):
    """Limits in authored units (None / +-inf = unlimited on that side)."""
    if lo is not None and math.isfinite(lo):
        dof.set("limit_lower", lo * conv)
    if hi is not None and math.isfinite(hi):
        dof.set("limit_upper", hi * conv)


def _apply_drive(prim, dof: _Dof, inst: str, ctx: JointContext, lin_conv: float):
    """PhysicsDriveAPI:<inst> onto ``dof`` (angular: per-degree gains and degree targets -> radians)."""
    path = _path(prim)
    ns = f"drive:{inst}:physics:"
    ke = _float_attr(prim, ns + "stiffness", 0.0)
    kd = _float_attr(prim, ns + "damping", 0.0)
    tq = _float_attr(prim, ns + "targetPosition", 0.0, allow_inf=False)
    tqd = _float_attr(prim, ns + "targetVelocity", 0.0, allow_inf=False)
    fmax = _float_attr(prim, ns + "maxForce", math.inf)
    for name, v in (("stiffness", ke), ("damping", kd), ("maxForce", fmax)):
        if v < 0.0:
            raise USDImportError(f"value {v} is negative; expected >= 0", path, ns + name)
    if math.isinf(ke) or math.isinf(kd):
        raise USDImportError(f"drive gains ({ke}, {kd}) must be finite", path, ns + ("stiffness" if math.isinf(ke) else "damping"))
    dtype = get_attribute(prim, ns + "type")
    if dtype is not None and str(dtype) == "acceleration":
        ctx.warn(path, ns + "type", "acceleration drives are not supported; the drive is imported as a force drive")
    s = float(ctx.joint_drive_gains_scaling)
    if dof.angular:
        ke, kd, tq, tqd = ke / DEG, kd / DEG, tq * DEG, tqd * DEG
    else:
        ke, kd, tq, tqd = ke / lin_conv, kd / lin_conv, tq * lin_conv, tqd * lin_conv
    ke, kd = ke * s, kd * s
    dof.set("target_ke", ke)
    dof.set("target_kd", kd)
    dof.cfg.target_q = float(tq)
    dof.cfg.target_qd = float(tqd)
    dof.set("effort_limit", fmax)
    dof.cfg.actuator_mode = target_mode_from_gains(
        ke, kd, force_position_velocity=ctx.force_position_velocity_actuation, has_drive=True
    )


def _apply_joint_values(prim, dofs: list[_Dof], ctx: JointContext, extra: dict):
    """NewtonJointAPI (and other resolvers') per-joint values broadcast to every DOF of the joint."""
    if not dofs:
        return
    path = _path(prim)
    L = float(ctx.linear_unit)
    vals = {key: _resolve_joint_value(prim, key, ctx) for key in NEWTON_JOINT_ATTRS}
    for key, (v, _kind, attr) in vals.items():
        if v is None:
            continue
        if key in ("armature", "damping", "friction") and (v < 0.0 or math.isinf(v)):
            raise USDImportError(f"value {v} is invalid; expected a finite value >= 0", path, attr)
        if key == "velocity_limit" and v <= 0.0:
            raise USDImportError(f"value {v} is invalid; expected a value > 0 or inf", path, attr)
        if key in ("limit_ke", "limit_kd") and v < 0.0 and not (math.isinf(v)):
            raise USDImportError(f"value {v} is invalid; expected a value >= 0, inf or -inf", path, attr)
    notes = extra.setdefault("authored_features", [])
    for key, feature in _FEATURE_OF_KEY.items():
        v, _kind, attr = vals[key]
        needed = v is not None and (math.isfinite(v) and (v > 0.0 or key.startswith("limit_")))
        if needed:
            notes.append((feature, f"<{path}> {attr}"))
    kd_all = vals["limit_kd"][0]
    if kd_all is not None and kd_all == math.inf:
        ctx.warn(path, NEWTON_JOINT_ATTRS["limit_kd"], "limitDamping = inf is not supported; the engine default is used")
    for dof in dofs:
        ang = dof.angular
        # every resolver returns these keys in NewtonJointAPI units (per degree on angular DOFs)
        per_deg = (1.0 / DEG) if ang else (1.0 / L)
        v = vals["armature"][0]
        if v is not None:
            dof.set("armature", v)
        v = vals["friction"][0]
        if v is not None:
            dof.set("friction", v)
        v = vals["damping"][0]
        if v is not None:
            dof.set("damping", v * per_deg)
        v = vals["velocity_limit"][0]
        if v is not None and math.isfinite(v):
            dof.set("velocity_limit", v * (DEG if ang else L))
        ke = _axis_override(prim, ctx, dof.inst, "ke", vals["limit_ke"][0])
        kd = _axis_override(prim, ctx, dof.inst, "kd", kd_all)
        if ke is not None and ke == math.inf:
            dof.set("limit_ke", HARD_LIMIT_KE * per_deg)
            dof.set("limit_kd", 0.0)
            extra["hard_limit"] = True
            continue
        if ke is not None and math.isfinite(ke):
            dof.set("limit_ke", ke * per_deg)
        if kd is not None and math.isfinite(kd):
            dof.set("limit_kd", kd * per_deg)


_FLT_MAX_UNBREAKABLE = 3.0e38
"""Break forces / torques at or above this (float32 max, 3.4028235e38) mean "never breaks"."""

# solver feature (armillary.solvers.capabilities.FEATURES) an authored joint value needs to take effect
_FEATURE_OF_KEY = {"armature": "joint_armature", "damping": "joint_damping", "friction": "joint_friction",
                   "velocity_limit": "joint_velocity_limits", "limit_ke": "joint_limit_springs",
                   "limit_kd": "joint_limit_springs"}  # fmt: skip


def _axis_override(prim, ctx: JointContext, inst: str | None, k: str, broadcast):
    """``broadcast`` when authored, else the deprecated per-axis ``limit_<inst>_<k>`` (e.g.
    ``newton:rotX:limitStiffness``) with a warning, as the reference engine does."""
    sch = _schemas()
    if broadcast is not None or inst is None or sch is None or not ctx.resolvers:
        return broadcast
    key = f"limit_{inst}_{k}"
    for r in ctx.resolvers:
        v = r.get_value(prim, sch.PrimType.JOINT, key)
        if v is None:
            continue
        spec = getattr(r, "mapping", {}).get(sch.PrimType.JOINT, {}).get(key)
        attr = getattr(spec, "name", None) or key
        f = _check_number(prim, attr, v)
        if f < 0.0 and not math.isinf(f):
            raise USDImportError(f"value {f} is invalid; expected a value >= 0, inf or -inf", _path(prim), attr)
        if _resolver_kind(r) == "newton":
            base = "newton:limitStiffness" if k == "ke" else "newton:limitDamping"
            ctx.warn(_path(prim), attr, f"per-axis '{attr}' is deprecated; use '{base}' instead")
        return f
    return None


def _apply_mjc_spring(prim, jt: JointType, dofs: list[_Dof], ctx: JointContext):
    """MjcJointAPI mjc:stiffness / mjc:springref / mjc:ref -> passive spring (stiffness, rest_q)."""
    sch = _schemas()
    if sch is None or not _has_mjc(ctx) or jt not in _SINGLE_DOF or len(dofs) != 1:
        return
    mjc = [r for r in ctx.resolvers if _resolver_kind(r) == "mjc"]
    dof = dofs[0]
    L = float(ctx.linear_unit)

    def get(key):
        v = sch.resolve_value(mjc, prim, sch.PrimType.JOINT, key, None)
        return None if v is None else _check_number(prim, {"rest_q": "mjc:springref"}.get(key, f"mjc:{key}"), v)

    k = get("stiffness")
    if k is not None:
        if k < 0.0 or math.isinf(k):
            raise USDImportError(f"value {k} is invalid; expected a finite value >= 0", _path(prim), "mjc:stiffness")
        dof.cfg.stiffness = float(k if dof.angular else k / L)
    springref, ref = get("rest_q"), get("ref")
    if springref is not None or ref is not None:
        r = (springref or 0.0) - (ref or 0.0)
        if not math.isfinite(r):
            raise USDImportError(f"spring rest springref - ref = {r} must be finite", _path(prim), "mjc:springref")
        dof.cfg.rest_q = float(r * DEG if dof.angular else r * L)


def _parse_mimic(prim, jt: JointType, ctx: JointContext, extra: dict):
    if not (has_applied_api_schema(prim, "NewtonMimicAPI") or prim.GetRelationship("newton:mimicJoint")):
        return
    path = _path(prim)
    rel = prim.GetRelationship("newton:mimicJoint")
    targets = list(rel.GetTargets()) if rel else []
    if not targets:
        if has_applied_api_schema(prim, "NewtonMimicAPI"):
            ctx.warn(path, "newton:mimicJoint", "NewtonMimicAPI without a leader joint target is ignored")
        return
    if len(targets) != 1 or str(targets[0]) == path:
        raise USDImportError(
            f"mimic leader {[str(t) for t in targets]} must be exactly one joint other than this one",
            path, "newton:mimicJoint",
        )  # fmt: skip
    leader = prim.GetStage().GetPrimAtPath(targets[0])
    if not leader or not leader.IsValid():
        raise USDImportError(f"mimic leader {targets[0]} does not exist", path, "newton:mimicJoint")
    coef0 = _float_attr(prim, "newton:mimicCoef0", 0.0, allow_inf=False)
    coef1 = _float_attr(prim, "newton:mimicCoef1", 1.0, allow_inf=False)
    conv = DEG if jt == JointType.REVOLUTE else float(ctx.linear_unit)
    extra["mimic"] = {
        "joint": str(targets[0]),
        "coef0": coef0 * conv,
        "coef1": coef1,
        "enabled": _bool_attr(prim, "newton:mimicEnabled", True),
    }


# ----------------------------------------------------------------------------- parse_joint
def _joint_kind(prim):
    t = prim.GetTypeName()
    return {
        "PhysicsRevoluteJoint": JointType.REVOLUTE,
        "PhysicsPrismaticJoint": JointType.PRISMATIC,
        "PhysicsSphericalJoint": JointType.BALL,
        "PhysicsFixedJoint": JointType.FIXED,
        "PhysicsDistanceJoint": JointType.DISTANCE,
        "PhysicsJoint": JointType.D6,
    }.get(str(t))


def _traversal_key(prim) -> tuple:
    """Sibling indices from the pseudo-root to ``prim`` (depth-first traversal order when sorted)."""
    key = []
    p = prim
    try:
        while p and p.IsValid() and not p.IsPseudoRoot():
            parent = p.GetParent()
            key.append(list(parent.GetAllChildrenNames()).index(p.GetName()))
            p = parent
    except Exception:  # pragma: no cover - unusual prims: fall back to list order
        return ()
    return tuple(reversed(key))


def _axis_token(prim) -> str:
    v = get_attribute(prim, "physics:axis")
    tok = "X" if v is None else str(v)
    if tok not in _AXIS_VEC:
        raise USDImportError(f"axis {tok!r} is not allowed; expected one of X, Y, Z", _path(prim), "physics:axis")
    return tok


def parse_joint(prim, ctx: JointContext) -> JointSpec | None:
    """Parse a UsdPhysics joint prim; None for a disabled joint when ``ctx.only_load_enabled_joints``.

    Raises :class:`USDImportError` for malformed joints (missing body target, both bodies empty, bad axis, ...).
    """
    path = _path(prim)
    jt = _joint_kind(prim)
    if jt is None:
        raise USDImportError(f"prim type {prim.GetTypeName()!r} is not a UsdPhysics joint", path)
    enabled = _bool_attr(prim, "physics:jointEnabled", True)
    if not enabled and ctx.only_load_enabled_joints:
        return None
    L = float(ctx.linear_unit)
    body0, x0 = _resolve_side(prim, "physics:body0", "physics:localPos0", "physics:localRot0", ctx)
    body1, x1 = _resolve_side(prim, "physics:body1", "physics:localPos1", "physics:localRot1", ctx)
    if body0 is None and body1 is None:
        raise USDImportError(
            "both physics:body0 and physics:body1 are empty (or resolve to no rigid body); a joint needs at least one rigid body",
            path, "physics:body0",
        )  # fmt: skip
    if body0 is not None and body0 == body1:
        raise USDImportError(f"physics:body0 and physics:body1 are the same rigid body {body0}", path, "physics:body1")
    extra: dict = {}
    flipped = False
    if body1 is None:  # only body0: the body becomes the child of the world, axes negated
        body0, body1, x0, x1 = None, body0, x1, x0
        flipped = True
        extra["flipped"] = True
    exclude = _bool_attr(prim, "physics:excludeFromArticulation", False)
    collision_enabled = _bool_attr(prim, "physics:collisionEnabled", False)
    cfp = (not collision_enabled) if (body0 is not None and body1 is not None) else False
    for name, key in (("physics:breakForce", "break_force"), ("physics:breakTorque", "break_torque")):
        v = _float_attr(prim, name)
        # the float32 maximum (3.4028235e38, what exporters write for "unbreakable") counts as unset
        if v is not None and math.isfinite(v) and abs(v) < _FLT_MAX_UNBREAKABLE:
            extra[key] = v
            ctx.warn(path, name, f"breakable joints are not supported; {name} = {v} is ignored")

    dofs_lin: list[_Dof] = []
    dofs_ang: list[_Dof] = []
    if jt in _SINGLE_DOF:
        tok = _axis_token(prim)
        ang = jt == JointType.REVOLUTE
        dof = _Dof(_AXIS_VEC[tok], ang, path, "angular" if ang else "linear")
        lo = _float_attr(prim, "physics:lowerLimit")
        hi = _float_attr(prim, "physics:upperLimit")
        conv = DEG if ang else L
        _set_limits(dof, lo, hi, conv)
        if dof.cfg.limit_lower > dof.cfg.limit_upper:
            raise USDImportError(
                f"lowerLimit {lo} is greater than upperLimit {hi}; expected lowerLimit <= upperLimit",
                path, "physics:lowerLimit",
            )  # fmt: skip
        inst = "angular" if ang else "linear"
        other = "linear" if ang else "angular"
        if has_applied_api_schema(prim, f"PhysicsDriveAPI:{inst}"):
            _apply_drive(prim, dof, inst, ctx, L)
        if has_applied_api_schema(prim, f"PhysicsDriveAPI:{other}"):
            ctx.warn(path, f"drive:{other}", f"a {other} drive on a {jt.name} joint has no DOF to act on; ignored")
        (dofs_ang if ang else dofs_lin).append(dof)
    elif jt == JointType.BALL:
        for a in ("X", "Y", "Z"):
            dofs_ang.append(_Dof(_AXIS_VEC[a], True, path))
        for name in ("physics:coneAngle0Limit", "physics:coneAngle1Limit"):
            v = _float_attr(prim, name)
            if v is not None and math.isfinite(v) and v >= 0.0:
                ctx.warn(path, name, f"spherical cone limits are not supported; {name} = {v} deg is ignored (unlimited BALL joint)")
        for inst in ("angular", "rotX", "rotY", "rotZ"):
            if has_applied_api_schema(prim, f"PhysicsDriveAPI:{inst}"):
                ctx.warn(path, f"drive:{inst}", "drives on spherical joints are not supported; ignored")
    elif jt == JointType.D6:
        for i, inst in enumerate(_LIN_NAMES + _ANG_NAMES):
            ang = i >= 3
            has_lim = has_applied_api_schema(prim, f"PhysicsLimitAPI:{inst}")
            has_drive = has_applied_api_schema(prim, f"PhysicsDriveAPI:{inst}")
            if not has_lim:
                if has_drive:
                    ctx.warn(path, f"drive:{inst}", f"drive on axis {inst} without a PhysicsLimitAPI:{inst} (a locked axis) is ignored")
                continue
            lo = _float_attr(prim, f"limit:{inst}:physics:low", -math.inf)
            hi = _float_attr(prim, f"limit:{inst}:physics:high", math.inf)
            if lo >= hi:  # locked
                if has_drive:
                    ctx.warn(path, f"drive:{inst}", f"drive on locked axis {inst} is ignored")
                continue
            dof = _Dof(_AXIS_VEC["XYZ"[i % 3]], ang, path, inst)
            _set_limits(dof, lo, hi, DEG if ang else L)
            if has_drive:
                _apply_drive(prim, dof, inst, ctx, L)
            (dofs_ang if ang else dofs_lin).append(dof)
        if has_applied_api_schema(prim, "PhysicsLimitAPI:distance"):
            ctx.warn(path, "limit:distance", "distance limits on generic joints are not supported; ignored")
    elif jt == JointType.DISTANCE:
        lo = _float_attr(prim, "physics:minDistance", -1.0)
        hi = _float_attr(prim, "physics:maxDistance", -1.0)
        # negative (or non-finite) bounds disable that side
        lo = lo * L if (lo is not None and math.isfinite(lo) and lo >= 0.0) else -1.0
        hi = hi * L if (hi is not None and math.isfinite(hi) and hi >= 0.0) else -1.0
        if lo >= 0.0 and hi >= 0.0 and lo > hi:
            raise USDImportError(f"minDistance {lo} is greater than maxDistance {hi}", path, "physics:minDistance")
        d = _Dof(_AXIS_VEC["X"], False, path)
        d.set("limit_lower", lo)
        d.set("limit_upper", hi)
        dofs_lin.append(d)
        for i in range(5):
            u = _Dof(_AXIS_VEC["XYZ"[(i + 1) % 3]], i >= 2, path)
            c = JointDofConfig.create_unlimited(_AXIS_VEC["XYZ"[(i + 1) % 3]])
            u.cfg = c
            u.defaults = set()
            (dofs_lin if i < 2 else dofs_ang).append(u)

    all_dofs = dofs_lin + dofs_ang
    if jt == JointType.DISTANCE:
        for name in NEWTON_JOINT_ATTRS.values():
            if get_attribute(prim, name) is not None:
                ctx.warn(path, name, "NewtonJointAPI values on a distance joint are not supported; ignored")
    elif jt != JointType.FIXED:
        _apply_joint_values(prim, all_dofs, ctx, extra)
        _apply_mjc_spring(prim, jt, all_dofs, ctx)
    _parse_mimic(prim, jt, ctx, extra)
    if flipped and jt != JointType.BALL:
        for d in all_dofs:
            d.cfg.axis = wp.vec3(-d.cfg.axis[0], -d.cfg.axis[1], -d.cfg.axis[2])
    return JointSpec(
        path=path,
        joint_type=jt,
        body0=body0,
        body1=body1,
        X_B0J=x0,
        X_B1J=x1,
        linear_axes=[d.cfg for d in dofs_lin],
        angular_axes=[d.cfg for d in dofs_ang],
        enabled=enabled,
        exclude_from_articulation=exclude,
        collision_filter_parent=cfp,
        source_paths=[path],
        label=path,
        extra=extra,
        dof_defaults=[frozenset(d.defaults) for d in all_dofs],
        dof_sources=[d.source for d in all_dofs],
        traversal_key=_traversal_key(prim),
    )


# ----------------------------------------------------------------------------- merging
_POS_TOL = 1e-5  # m
_ROT_TOL = 1e-4  # |quaternion difference|
_ORTHO_TOL = 1e-4  # |cos| between DOF axes


def _single_dof(spec: JointSpec) -> bool:
    return spec.dof_count == 1 and spec.joint_type in (JointType.REVOLUTE, JointType.PRISMATIC, JointType.D6)


def merge_stacked_joints(specs: list[JointSpec], joints_add_mobility: bool, warn=None) -> list[JointSpec]:
    """Merge stacked single-DOF joints between one body pair into a D6 (``newton:jointsAddMobility``).

    With ``joints_add_mobility`` False the list is returned unchanged. Enabled joints that are not excluded
    from the articulation are grouped by (unordered) body pair; a group of two or more single-DOF joints
    becomes one D6 at the first member's position in the list, with the frames of the first member in stage
    traversal order (``JointSpec.traversal_key``; list order when unset) and DOFs in that order, linear
    before angular. Each source prim's values stay on its DOF. Raises USDImportError for a
    group mixing in a multi-DOF joint, or with non-orthogonal linear (or angular) DOF axes.
    """
    if not joints_add_mobility:
        return specs
    warn = warn or _warn_noop
    groups: dict[frozenset, list[int]] = {}
    for i, s in enumerate(specs):
        if not s.enabled or s.exclude_from_articulation:
            continue
        groups.setdefault(frozenset((s.body0, s.body1)), []).append(i)
    replace: dict[int, JointSpec] = {}
    drop: set[int] = set()
    for idx in groups.values():
        if len(idx) < 2:
            continue
        members = [specs[i] for i in idx]
        bad = [m for m in members if not _single_dof(m)]
        if bad:
            raise USDImportError(
                f"newton:jointsAddMobility: joints {[m.path for m in members]} connect the same bodies "
                f"({members[0].body0}, {members[0].body1}) but {[m.path for m in bad]} "
                f"({', '.join(m.joint_type.name for m in bad)}) is not a single-DOF joint; only revolute and "
                "prismatic joints can be stacked",
                bad[0].path,
            )
        order = sorted(range(len(members)), key=lambda k: (members[k].traversal_key, k))
        replace[idx[0]] = _merge_group([members[k] for k in order], warn)
        drop.update(idx[1:])
    return [replace.get(i, s) for i, s in enumerate(specs) if i not in drop]


def _merge_group(members: list[JointSpec], warn) -> JointSpec:
    rep = members[0]
    p0r, q0r = _tf_arrays(rep.X_B0J)
    p1r, q1r = _tf_arrays(rep.X_B1J)
    lin, ang = [], []  # (cfg, defaults, source, axis in rep frame)
    extra = dict(rep.extra)
    extra.pop("mimic", None)
    cfp = False
    for m in members:
        same = m.body0 == rep.body0
        x_a, x_b = (m.X_B0J, m.X_B1J) if same else (m.X_B1J, m.X_B0J)
        pa, qa = _tf_arrays(x_a)
        pb, qb = _tf_arrays(x_b)
        cfg = (m.linear_axes + m.angular_axes)[0]
        is_ang = len(m.angular_axes) == 1
        a = np.array([float(v) for v in cfg.axis]) * (1.0 if same else -1.0)
        d_rep = _qrot(_qinv(q0r), _qrot(qa, a))  # axis in the representative's joint frame
        if m is not rep:
            if np.linalg.norm(pa - p0r) > _POS_TOL or np.linalg.norm(pb - p1r) > _POS_TOL:
                warn(m.path, "physics:localPos0",
                     f"stacked joint {m.path} has other anchor positions than {rep.path}; the merged D6 joint uses {rep.path}'s frames")  # fmt: skip
            rel_m = _qmul(qa, _qinv(qb))
            rel_r = _qmul(q0r, _qinv(q1r))
            if min(np.linalg.norm(rel_m - rel_r), np.linalg.norm(rel_m + rel_r)) > _ROT_TOL:
                warn(m.path, "physics:localRot1",
                     f"stacked joint {m.path} has another relative frame orientation than {rep.path}; the merged D6 joint uses {rep.path}'s frames")  # fmt: skip
            if "mimic" in m.extra:
                warn(m.path, "newton:mimicJoint", "mimic relations of merged stacked joints are not supported; ignored")
        if "mimic" in rep.extra and m is rep:
            warn(m.path, "newton:mimicJoint", "mimic relations of merged stacked joints are not supported; ignored")
        c = JointDofConfig.__new__(JointDofConfig)
        c.__dict__.update(cfg.__dict__)
        c.axis = wp.vec3(*[float(v) for v in d_rep])
        entry = (c, m.dof_defaults[0] if m.dof_defaults else frozenset(), m.path, d_rep)
        (ang if is_ang else lin).append(entry)
        cfp = cfp or m.collision_filter_parent
        for k in ("break_force", "break_torque", "hard_limit"):
            if k in m.extra:
                extra.setdefault(k, m.extra[k])
        if m is not rep:
            extra["authored_features"] = list(extra.get("authored_features", [])) + list(m.extra.get("authored_features", []))
    for group, kind in ((lin, "linear"), (ang, "angular")):
        for i in range(len(group)):
            for j in range(i + 1, len(group)):
                c = float(np.dot(group[i][3], group[j][3]))
                if abs(c) > _ORTHO_TOL:
                    raise USDImportError(
                        f"newton:jointsAddMobility: stacked {kind} joints {group[i][2]} and {group[j][2]} have "
                        f"non-orthogonal axes (angle {math.degrees(math.acos(max(-1.0, min(1.0, c)))):.3f} deg, "
                        f"cos {c:.6f}); stacked joint axes must be mutually orthogonal to merge into one D6 joint",
                        group[j][2],
                    )
    extra["merged_from"] = [m.path for m in members]
    return JointSpec(
        path=rep.path,
        joint_type=JointType.D6,
        body0=rep.body0,
        body1=rep.body1,
        X_B0J=rep.X_B0J,
        X_B1J=rep.X_B1J,
        linear_axes=[e[0] for e in lin],
        angular_axes=[e[0] for e in ang],
        enabled=True,
        exclude_from_articulation=False,
        collision_filter_parent=cfp,
        source_paths=[m.path for m in members],
        label=rep.label,
        extra=extra,
        dof_defaults=[e[1] for e in lin + ang],
        dof_sources=[e[2] for e in lin + ang],
    )

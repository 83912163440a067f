"""Stage and attribute helpers of the USD importer (public through ``armillary.usd``).

Quaternions returned here are ``wp.quat`` in xyzw order; USD's ``Gf.Quat`` stores (real, imaginary).
Transforms are rigid (no scale); lengths stay in stage units unless stated otherwise.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import warp as wp

from armillary.sim.rotations import quat_from_matrix as mat_to_quat

__all__ = [
    "USDImportError",
    "get_attribute",
    "get_attributes_in_namespace",
    "get_float",
    "get_gprim_axis",
    "get_physics_scenes",
    "get_quat",
    "get_scale",
    "get_transform",
    "has_applied_api_schema",
    "has_attribute",
    "open_stage",
    "type_to_warp",
    "value_to_warp",
]

USD_SUFFIXES = (".usd", ".usda", ".usdc", ".usdz")


class USDImportError(ValueError):
    """Invalid USD input; ``str()`` starts with the prim path (and attribute) when known."""

    def __init__(self, message: str, prim_path=None, attribute: str | None = None):
        self.prim_path = None if prim_path is None else str(prim_path)
        self.attribute = attribute
        self.reason = message
        prefix = ""
        if prim_path is not None:
            prefix = str(prim_path)
            if attribute:
                prefix += f".{attribute}"
            prefix += ": "
        elif attribute:
            prefix = f"{attribute}: "
        super().__init__(prefix + message)


def open_stage(source):
    """Return a ``Usd.Stage`` for ``source``: a stage (returned as is) or a .usd/.usda/.usdc/.usdz path.

    Raises FileNotFoundError for a missing file and USDImportError for an unreadable one.
    """
    from pxr import Usd

    if isinstance(source, Usd.Stage):
        return source
    if not isinstance(source, (str, os.PathLike)):
        raise USDImportError(f"source must be a Usd.Stage or a file path, got {type(source).__name__}")
    path = os.fspath(source)
    if "://" not in path and not os.path.exists(path):
        raise FileNotFoundError(f"USD file not found: {path}")
    try:
        stage = Usd.Stage.Open(path)
    except Exception as e:  # pxr raises Tf.ErrorException for malformed layers
        msg = " ".join(str(e).split())
        raise USDImportError(f"cannot open USD file {path!r}: {msg}") from None
    if stage is None:
        raise USDImportError(f"cannot open USD file {path!r}")
    return stage


# ------------------------------------------------------------------------------------------------ attributes


def get_attribute(prim, name: str, default: Any | None = None) -> Any | None:
    """Value of the authored attribute ``name`` of ``prim``, else ``default``."""
    attr = prim.GetAttribute(name)
    if not attr or not attr.HasAuthoredValue():
        return default
    v = attr.Get()
    return default if v is None else v


def has_attribute(prim, name: str) -> bool:
    """True when ``prim`` has an attribute ``name`` with an authored value."""
    attr = prim.GetAttribute(name)
    return bool(attr) and attr.HasAuthoredValue()


def get_float(prim, name: str, default: float | None = None) -> float | None:
    """Authored finite float attribute ``name``, else ``default``."""
    v = get_attribute(prim, name)
    if v is None:
        return default
    try:
        f = float(v)
    except (TypeError, ValueError):
        return default
    return f if math.isfinite(f) else default


def quat_wxyz_gf_to_xyzw(q) -> np.ndarray:
    """``Gf.Quat*`` (real, imaginary) -> ``np.ndarray([x, y, z, w])``."""
    im = q.GetImaginary()
    return np.array([im[0], im[1], im[2], q.GetReal()], dtype=np.float64)


def get_quat(prim, name: str, default=None):
    """Authored quaternion attribute ``name`` as a normalized ``wp.quat`` (xyzw), else ``default``."""
    v = get_attribute(prim, name)
    if v is None:
        return default
    q = quat_wxyz_gf_to_xyzw(v)
    n = float(np.linalg.norm(q))
    if not math.isfinite(n) or n < 1e-12:
        return default
    q /= n
    return wp.quat(*q.tolist())


def _matrix(prim, local: bool, xform_cache=None) -> np.ndarray:
    from pxr import UsdGeom

    if local:
        m = UsdGeom.Xformable(prim).GetLocalTransformation()
    elif xform_cache is not None:
        m = xform_cache.GetLocalToWorldTransform(prim)
    else:
        m = UsdGeom.Xformable(prim).ComputeLocalToWorldTransform(0.0) if prim.IsA(UsdGeom.Xformable) else None
        if m is None:
            m = UsdGeom.XformCache().GetLocalToWorldTransform(prim)
    return np.array(m, dtype=np.float64).T  # USD row-vector convention -> column-vector matrix


def decompose(m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """4x4 column-vector affine matrix -> (translation (3,), quaternion xyzw (4,), scale (3,)).

    The rotation is the orthonormal part of a polar decomposition; a reflection is folded into
    a negative x scale.
    """
    t = m[:3, 3].copy()
    a = m[:3, :3]
    u, s, vt = np.linalg.svd(a)
    r = u @ vt
    if np.linalg.det(r) < 0:
        u[:, -1] *= -1
        r = u @ vt
    # scale along the rotated axes (diagonal of R^T A)
    scale = np.diag(r.T @ a).copy()
    return t, mat_to_quat(r), scale



def get_transform(prim, local: bool = True, xform_cache=None):
    """Rigid transform of ``prim`` (local to its parent, or to the world with ``local=False``) without
    scale, translation in stage units, as ``wp.transform``."""
    t, q, _ = decompose(_matrix(prim, local, xform_cache))
    return wp.transform(wp.vec3(*t.tolist()), wp.quat(*q.tolist()))


def get_scale(prim, local: bool = True, xform_cache=None):
    """Scale of ``prim``'s transform (local, or accumulated in the world with ``local=False``) as ``wp.vec3``."""
    _, _, s = decompose(_matrix(prim, local, xform_cache))
    return wp.vec3(*s.tolist())


def has_applied_api_schema(prim, schema_name: str) -> bool:
    """True when ``schema_name`` (e.g. ``"NewtonJointAPI"``, ``"PhysicsLimitAPI:rotX"``) is applied to ``prim``.

    Works from the ``apiSchemas`` metadata, so unregistered (codeless) schemas are found too; a name
    without an instance (``"PhysicsLimitAPI"``) also matches its multiple-apply instances.
    """
    try:
        names = list(prim.GetAppliedSchemas())
    except Exception:
        names = []
    info = prim.GetMetadata("apiSchemas")
    if info is not None:
        for items in (info.GetAddedOrExplicitItems() if hasattr(info, "GetAddedOrExplicitItems") else []):
            names.append(str(items))
        for attr in ("prependedItems", "appendedItems", "explicitItems"):
            names.extend(str(x) for x in (getattr(info, attr, None) or []))
    for n in names:
        if n == schema_name or n.split(":", 1)[0] == schema_name:
            return True
    return False


def get_attributes_in_namespace(prim, namespace: str) -> dict[str, Any]:
    """``{full attribute name: value}`` of the authored attributes of ``prim`` under ``namespace:``."""
    prefix = namespace.rstrip(":") + ":"
    out = {}
    for attr in prim.GetAttributes():
        name = attr.GetName()
        if name.startswith(prefix) and attr.HasAuthoredValue():
            v = attr.Get()
            if v is not None:
                out[name] = v
    return out


def get_gprim_axis(prim, name: str = "axis", default="Z"):
    """Axis token attribute (``"X"``, ``"Y"``, ``"Z"``) of a gprim as :class:`armillary.Axis`."""
    from armillary import Axis

    v = get_attribute(prim, name)
    if v is None:
        v = prim.GetAttribute(name).Get() if prim.GetAttribute(name) else None
    if v is None:
        v = default
    s = str(v).upper()
    if s not in ("X", "Y", "Z"):
        raise USDImportError(f"axis {v!r} is not one of 'X', 'Y', 'Z'", prim.GetPath(), name)
    return Axis[s]


def get_physics_scenes(stage, root_path: str = "/", exclude_paths: Sequence[str] | None = None) -> list:
    """``UsdPhysics.Scene`` prims under ``root_path`` (instance proxies included) in traversal order,
    skipping the subtrees of ``exclude_paths``."""
    from pxr import Usd, UsdPhysics

    root = stage.GetPrimAtPath(root_path)
    if not root:
        return []
    excl = [str(p) for p in (exclude_paths or [])]
    out = []
    it = iter(Usd.PrimRange(root, Usd.TraverseInstanceProxies()))
    for prim in it:
        p = str(prim.GetPath())
        if any(p == e or p.startswith(e.rstrip("/") + "/") for e in excl):
            it.PruneChildren()
            continue
        if prim.IsA(UsdPhysics.Scene):
            out.append(UsdPhysics.Scene(prim))
    return out


def stage_linear_unit(stage) -> float:
    """Meters per stage unit (``metersPerUnit``; 1.0 when not authored)."""
    from pxr import UsdGeom

    layer_has = stage.HasAuthoredMetadata("metersPerUnit")
    v = UsdGeom.GetStageMetersPerUnit(stage) if layer_has else 1.0
    try:
        f = float(v)
    except (TypeError, ValueError):
        f = float("nan")
    if not (math.isfinite(f) and f > 0):
        raise USDImportError(f"stage metersPerUnit={v!r} must be a finite number > 0", "/", "metersPerUnit")
    return f


def stage_mass_unit(stage) -> float:
    """Kilograms per stage mass unit (``kilogramsPerUnit``; 1.0 when not authored)."""
    from pxr import UsdPhysics

    v = UsdPhysics.GetStageKilogramsPerUnit(stage) if stage.HasAuthoredMetadata("kilogramsPerUnit") else 1.0
    try:
        f = float(v)
    except (TypeError, ValueError):
        f = float("nan")
    if not (math.isfinite(f) and f > 0):
        raise USDImportError(f"stage kilogramsPerUnit={v!r} must be a finite number > 0", "/", "kilogramsPerUnit")
    return f


def stage_up_axis(stage) -> str:
    """The stage's ``upAxis`` ("Y" or "Z"; "Z" when not authored)."""
    from pxr import UsdGeom

    if not stage.HasAuthoredMetadata("upAxis"):
        return "Z"
    v = str(UsdGeom.GetStageUpAxis(stage)).upper()
    if v not in ("Y", "Z"):
        raise USDImportError(f"stage upAxis={v!r} is not 'Y' or 'Z'", "/", "upAxis")
    return v


# ------------------------------------------------------------------------------------------------ values


def type_to_warp(v: Any) -> Any:
    """Warp dtype matching a USD (``Sdf.ValueTypeName`` / Gf) value or a Python scalar."""
    from pxr import Gf, Sdf

    if isinstance(v, Sdf.ValueTypeName):
        v = v.type.pythonClass or v.defaultValue
    t = v if isinstance(v, type) else type(v)
    table = {
        bool: wp.bool, int: wp.int32, float: wp.float32,
        Gf.Vec2f: wp.vec2, Gf.Vec2d: wp.vec2d, Gf.Vec2i: wp.vec2i,
        Gf.Vec3f: wp.vec3, Gf.Vec3d: wp.vec3d, Gf.Vec3i: wp.vec3i, Gf.Vec3h: wp.vec3h,
        Gf.Vec4f: wp.vec4, Gf.Vec4d: wp.vec4d, Gf.Vec4i: wp.vec4i,
        Gf.Quatf: wp.quat, Gf.Quatd: wp.quatd, Gf.Quath: wp.quath,
        Gf.Matrix2f: wp.mat22, Gf.Matrix2d: wp.mat22d, Gf.Matrix3f: wp.mat33, Gf.Matrix3d: wp.mat33d,
        Gf.Matrix4f: wp.mat44, Gf.Matrix4d: wp.mat44d,
    }  # fmt: skip
    if t in table:
        return table[t]
    raise TypeError(f"no warp dtype for USD value type {t.__name__}")


def value_to_warp(v: Any, warp_dtype: Any | None = None) -> Any:
    """Convert a USD value (Gf vector / quaternion / matrix, scalar) to a warp value.

    Quaternions are reordered to xyzw. With ``warp_dtype`` the value is cast to it.
    """
    from pxr import Gf

    if isinstance(v, (Gf.Quatf, Gf.Quatd, Gf.Quath)):
        vals = quat_wxyz_gf_to_xyzw(v).tolist()
        dt = warp_dtype or type_to_warp(v)
        return dt(*vals)
    if warp_dtype is None:
        if isinstance(v, (bool, int, float, str)):
            return v
        warp_dtype = type_to_warp(v)
    if isinstance(v, (bool, int, float)):
        return warp_dtype(v)
    if hasattr(v, "__len__") and len(v) and hasattr(v[0], "__len__"):  # matrices
        flat = [float(x) for row in v for x in row]
        return warp_dtype(*flat)
    return warp_dtype(*[x for x in v])

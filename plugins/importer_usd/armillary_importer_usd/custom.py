"""Custom attributes and custom frequencies in USD stages (see ``docs/usd.md``).

* Declarations live on the ``PhysicsScene`` prim: an attribute ``newton:<name>`` or
  ``newton:<namespace>:<name>`` whose ``customData`` holds ``assignment`` (``model``, ``state``,
  ``control``, ``contact``) and ``frequency`` (``body``, ``shape``, ``joint``, ``joint_dof``,
  ``joint_coord``, ``articulation``, ``once``, ``world``, ... or the key of a registered custom
  frequency). Its authored value is the attribute's default; its USD type gives the dtype.
* Values are authored on the prims of the entities, under the attribute's ``usd_attribute_name``
  (``newton:<key>`` unless a solver registered another name): a rigid-body prim gives its body's
  value, a collision prim its shape's, a joint prim its joint's (JOINT_DOF / JOINT_COORD values
  are broadcast to the joint's DOFs / coordinates, or given per DOF as an array), an articulation
  root prim its articulation's; ``ONCE`` / ``WORLD`` attributes are read from the scene prim.
* Custom frequencies with a ``usd_prim_filter`` emit rows while the prims under ``root_path`` are
  traversed once (instance proxies included), in registration order per prim; an
  ``usd_entry_expander`` replaces the per-attribute reading by the rows it returns.
* ``usd_attribute_name="*"`` calls ``usd_value_transformer(None, context)`` for every prim of the
  attribute's frequency.

Transformers get the raw USD value (``Gf`` types, quaternions in USD's (real, i, j, k) order) and a
context dict with ``prim``, ``attr``, ``builder`` and ``result``; without a transformer, values are
converted to the attribute's dtype (quaternions to xyzw).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import warp as wp

from armillary.sim.custom_attributes import (
    AttributeAssignment,
    AttributeFrequency,
    CustomAttribute,
    _coerce,
    _dtype_layout,
    _is_string_dtype,
    _resolve_builtin,
)

__all__ = [
    "apply_custom_attributes",
    "get_custom_attribute_declarations",
    "get_custom_attribute_values",
]

_PREFIX = "newton:"
_ASSIGNMENTS = ", ".join(a.name.lower() for a in AttributeAssignment)
_CONTACT = (AttributeFrequency.CONTACT, AttributeFrequency.CONTACT_RIGID, AttributeFrequency.CONTACT_SOFT)
_FREQUENCIES = ", ".join(f.name.lower() for f in AttributeFrequency if f not in _CONTACT)
_ENTITY_MAPS = (
    ("path_body_map", AttributeFrequency.BODY),
    ("path_shape_map", AttributeFrequency.SHAPE),
    ("path_articulation_map", AttributeFrequency.ARTICULATION),
)
_JOINT_FREQS = (AttributeFrequency.JOINT, AttributeFrequency.JOINT_DOF, AttributeFrequency.JOINT_COORD)
# per-DOF / per-coordinate sub-ranges of merged joints (optional result keys: path -> global indices)
_SUB_MAPS = {AttributeFrequency.JOINT_DOF: "path_joint_dof_map", AttributeFrequency.JOINT_COORD: "path_joint_coord_map"}


def _error(message: str, prim_path=None, attribute: str | None = None) -> ValueError:
    from .utils import USDImportError  # noqa: PLC0415

    return USDImportError(message, prim_path, attribute)


def _warning_class() -> type[Warning]:
    try:
        from .importer import USDImportWarning  # noqa: PLC0415
    except ImportError:  # pragma: no cover - importer module missing
        return UserWarning
    return USDImportWarning


def _path(prim) -> str:
    return str(prim.GetPath())


# ---------------------------------------------------------------------------------------------- values

_SCALAR_DTYPES = {
    "bool": wp.bool,
    "int": wp.int32,
    "long": wp.int64,
    "unsigned int": wp.uint32,
    "unsigned long": wp.uint64,
    "unsigned char": wp.uint8,
    "pxr_half::half": wp.float32,
    "float": wp.float32,
    "double": wp.float32,
}
_STRING_TYPES = ("string", "TfToken")
_VEC_RE = re.compile(r"^GfVec([234])([fdhi])$")
_MAT_RE = re.compile(r"^GfMatrix([234])([fd])$")


_CANONICAL = {
    (2, wp.float32): wp.vec2f, (3, wp.float32): wp.vec3f, (4, wp.float32): wp.vec4f,
    (2, wp.int32): wp.vec2i, (3, wp.int32): wp.vec3i, (4, wp.int32): wp.vec4i,
    ((2, 2), wp.float32): wp.mat22f, ((3, 3), wp.float32): wp.mat33f, ((4, 4), wp.float32): wp.mat44f,
}  # fmt: skip


def _vector(n: int, scalar) -> Any:
    return _CANONICAL.get((n, scalar)) or wp.types.vector(length=n, dtype=scalar)


def _declared_dtype(usd_attr, value) -> Any:
    """Warp dtype (or ``str``) of a declaration from its USD value type (floating types -> float32).

    Arrays of scalars become vectors of the default value's length (``float[]`` of 3 -> ``vec3f``).
    """
    tn = usd_attr.GetTypeName()
    cpp = tn.scalarType.type.typeName
    if tn.isArray:
        scalar = _SCALAR_DTYPES.get(cpp)
        n = 0 if value is None else len(value)
        if scalar is None or scalar is wp.bool or n == 0:
            raise TypeError(f"array type {tn} (length {n}) is not supported; use a non-empty array of numbers")
        return _vector(n, scalar)
    if cpp in _SCALAR_DTYPES:
        return _SCALAR_DTYPES[cpp]
    if cpp in _STRING_TYPES:
        return str
    m = _VEC_RE.match(cpp)
    if m:
        return _vector(int(m.group(1)), wp.int32 if m.group(2) == "i" else wp.float32)
    if cpp.startswith("GfQuat"):
        return wp.quat
    m = _MAT_RE.match(cpp)
    if m:
        n = int(m.group(1))
        return _CANONICAL[((n, n), wp.float32)]
    raise TypeError(f"USD value type {tn} is not supported for custom attributes")


def _to_python(value: Any) -> Any:
    """A raw USD value as Python data: Gf vectors / matrices / Vt arrays -> tuples, quaternions -> xyzw."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    from pxr import Gf, Sdf  # noqa: PLC0415

    if isinstance(value, (Gf.Quatf, Gf.Quatd, Gf.Quath)):
        im = value.GetImaginary()
        return (float(im[0]), float(im[1]), float(im[2]), float(value.GetReal()))
    if isinstance(value, Sdf.AssetPath):
        return value.path
    if hasattr(value, "__len__") and not isinstance(value, (bytes, dict)):
        return tuple(_to_python(v) for v in value)
    if isinstance(value, (np.generic,)):
        return value.item()
    return value


def _is_integer_dtype(dtype) -> bool:
    if _is_string_dtype(dtype):
        return False
    np_scalar, _ = _dtype_layout(dtype)
    return np.issubdtype(np_scalar, np.integer)


def _check_value(attr: CustomAttribute, value: Any) -> Any:
    """``value`` validated against the attribute's dtype (TypeError / ValueError naming the problem)."""
    if _is_string_dtype(attr.dtype):
        if not isinstance(value, str):
            raise TypeError(f"expected a string, got {value!r}")
        return value
    if isinstance(value, str):
        raise TypeError(
            f"expected a value of dtype {getattr(attr.dtype, '__name__', attr.dtype)}, got string {value!r}"
        )
    np_scalar, shape = _dtype_layout(attr.dtype)
    arr = _coerce(value, attr.dtype, np_scalar, shape, attr.key)
    if _is_integer_dtype(attr.dtype):
        try:
            raw = np.asarray(getattr(value, "value", value), dtype=np.float64)
        except (TypeError, ValueError):
            raw = None
        if raw is not None and np.any(raw != np.round(raw)):
            raise ValueError(f"expected integer values for dtype {attr.dtype.__name__}, got {value!r}")
    return arr


def _convert(attr: CustomAttribute, raw: Any) -> Any:
    """A raw USD value converted for ``attr`` (no transformer): Python data checked against the dtype."""
    value = _to_python(raw)
    _check_value(attr, value)
    return value


def _describe(e: Exception) -> str:
    return str(e).split(": ", 1)[-1] if isinstance(e, ValueError) and str(e).startswith("Custom attribute") else str(e)


# ---------------------------------------------------------------------------------------------- public


def _known_schema_attrs() -> set[str]:
    from .schemas import SchemaResolverNewton  # noqa: PLC0415

    return set(SchemaResolverNewton()._solver_attributes)


def _parse_assignment(value: Any, path: str, name: str) -> AttributeAssignment:
    if isinstance(value, str) and value.strip().upper() in AttributeAssignment.__members__:
        return AttributeAssignment[value.strip().upper()]
    raise _error(f"customData assignment {value!r} is not one of: {_ASSIGNMENTS}", path, name)


def _parse_frequency(value: Any, path: str, name: str) -> AttributeFrequency | str:
    if not isinstance(value, str) or not value.strip():
        raise _error(
            f"customData frequency {value!r} is not one of: {_FREQUENCIES}, or a custom frequency key", path, name
        )
    s = value.strip()
    try:
        freq = _resolve_builtin(s)
    except KeyError:
        return s  # custom frequency key; checked against the builder when registered
    if freq in _CONTACT:
        raise _error(
            f"customData frequency {value!r} is reserved for solver observables; use one of: {_FREQUENCIES}", path, name
        )
    return freq


def get_custom_attribute_declarations(prim) -> dict[str, CustomAttribute]:
    """Custom attribute declarations authored on ``prim`` (normally the ``PhysicsScene`` prim).

    A declaration is an attribute ``newton:<name>`` / ``newton:<namespace>:<name>`` with
    ``customData = {string assignment = "...", string frequency = "..."}``; its authored value
    becomes the default and its USD type the dtype (floating types -> float32, ``float3`` ->
    ``vec3f``, ``quatf`` -> ``quat`` (xyzw), ``string`` / ``token`` -> ``str``).

    Returns:
        ``{key: CustomAttribute}`` with ``key = "namespace:name"`` (or ``"name"``).

    Raises:
        USDImportError: a declaration with only one of the two customData keys, an unknown
            assignment or built-in frequency name, a malformed name, or an unsupported value type.
    """
    out: dict[str, CustomAttribute] = {}
    if not prim:
        return out
    path = _path(prim)
    known = None
    for usd_attr in prim.GetAttributes():
        name = usd_attr.GetName()
        if not name.startswith(_PREFIX):
            continue
        data = usd_attr.GetCustomData() or {}
        has_a, has_f = "assignment" in data, "frequency" in data
        if not has_a and not has_f:
            if usd_attr.IsCustom():
                known = _known_schema_attrs() if known is None else known
                if name not in known:
                    warnings.warn(
                        f"{path}.{name}: custom attribute has no customData assignment/frequency; it is not "
                        "declared as a custom attribute",
                        _warning_class(),
                        stacklevel=2,
                    )
            continue
        if not (has_a and has_f):
            missing = "frequency" if has_a else "assignment"
            raise _error(f"custom attribute declaration is missing customData {missing!r}", path, name)
        parts = name[len(_PREFIX) :].split(":")
        if len(parts) not in (1, 2) or not all(parts):
            raise _error(
                "custom attribute declaration names must be 'newton:<name>' or 'newton:<namespace>:<name>'", path, name
            )
        namespace, attr_name = (None, parts[0]) if len(parts) == 1 else (parts[0], parts[1])
        assignment = _parse_assignment(data["assignment"], path, name)
        frequency = _parse_frequency(data["frequency"], path, name)
        raw = usd_attr.Get()
        try:
            dtype = _declared_dtype(usd_attr, raw)
        except TypeError as e:
            raise _error(str(e), path, name) from None
        default = None
        try:
            decl = CustomAttribute(
                name=attr_name,
                dtype=dtype,
                frequency=frequency,
                assignment=assignment,
                namespace=namespace,
                usd_attribute_name=name,
            )
            if raw is not None:
                default = _convert(decl, raw)
                decl.default = default
        except (TypeError, ValueError) as e:
            raise _error(f"invalid custom attribute declaration (value {raw!r}): {_describe(e)}", path, name) from None
        out[decl.key] = decl
    return out


def get_custom_attribute_values(
    prim, custom_attributes: Iterable[CustomAttribute], context: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Values of ``custom_attributes`` authored on ``prim``, ``{key: value}`` (unauthored ones omitted).

    Each attribute reads its ``usd_attribute_name``; ``usd_value_transformer(raw, context)``
    converts the raw USD value when given (a None result omits the attribute), otherwise the value
    is converted to the dtype. For ``usd_attribute_name == "*"`` the transformer is called with
    None. ``context`` holds ``prim`` and ``attr`` plus the caller's keys (``builder``, ``result``).

    Raises:
        USDImportError: a value that does not fit the attribute's dtype.
    """
    out: dict[str, Any] = {}
    extra = dict(context or {})
    for attr in custom_attributes:
        usd_name = attr.usd_attribute_name
        if not usd_name:
            continue
        ctx = dict(extra)
        ctx["prim"] = prim
        ctx["attr"] = attr
        transformer = attr.usd_value_transformer
        if usd_name == "*":
            if transformer is None:
                continue
            value = transformer(None, ctx)
        else:
            usd_attr = prim.GetAttribute(usd_name)
            if not usd_attr or not usd_attr.HasAuthoredValue():
                continue
            raw = usd_attr.Get()
            if raw is None:
                continue
            if transformer is not None:
                value = transformer(raw, ctx)
            else:
                try:
                    value = _convert_for_prim(attr, raw)
                except (TypeError, ValueError) as e:
                    raise _error(
                        f"value {raw!r} does not fit custom attribute '{attr.key}' "
                        f"(dtype {getattr(attr.dtype, '__name__', attr.dtype)}): {_describe(e)}",
                        _path(prim),
                        usd_name,
                    ) from None
        if value is not None:
            out[attr.key] = value
    return out


def _convert_for_prim(attr: CustomAttribute, raw: Any) -> Any:
    """Like :func:`_convert`, but JOINT_DOF / JOINT_COORD attributes also accept per-DOF arrays."""
    value = _to_python(raw)
    if attr.frequency in (AttributeFrequency.JOINT_DOF, AttributeFrequency.JOINT_COORD) and isinstance(value, tuple):
        try:
            _check_value(attr, value)
            return value
        except ValueError:
            for item in value:  # one element per DOF / coordinate; counts are checked on assignment
                _check_value(attr, item)
            return list(value)
    _check_value(attr, value)
    return value


# ---------------------------------------------------------------------------------------------- import


def _store(builder, attr: CustomAttribute, index: int, value: Any, prim, usd_name: str) -> None:
    try:
        _check_value(attr, value)
    except (TypeError, ValueError) as e:
        raise _error(
            f"value {value!r} for custom attribute '{attr.key}': {_describe(e)}", _path(prim), usd_name
        ) from None
    attr.values[int(index)] = value


def _store_joint_sub(builder, attr, joint: int, value, prim, path: str, result: Mapping) -> None:
    sub = (result.get(_SUB_MAPS[attr.frequency]) or {}).get(path)
    if sub is not None:
        indices = [int(i) for i in sub]
    else:
        start, n = builder._custom_joint_range(int(joint), attr.frequency)
        indices = list(range(start, start + n))
    try:
        items = builder._joint_sub_items(attr, value, len(indices))
    except (TypeError, ValueError) as e:
        raise _error(
            f"value {value!r} for custom attribute '{attr.key}': {_describe(e)}", path, attr.usd_attribute_name
        ) from None
    for local, item in items:
        if item is not None:
            attr.values[indices[local]] = item


def _append_row(builder, frequency, attrs: Sequence[CustomAttribute], row: Mapping[str, Any], prim) -> None:
    """Append one row of custom frequency ``frequency`` (keys must be attributes of that frequency)."""
    path = _path(prim)
    if not isinstance(row, Mapping):
        raise _error(f"usd_entry_expander of custom frequency '{frequency.key}' returned {row!r}, expected dicts", path)
    own = {a.key: a for a in attrs}
    for key in row:
        if key not in own:
            attr = builder.custom_attributes.get(key)
            what = "is not declared" if attr is None else f"has frequency {attr.frequency_key!r}"
            raise _error(
                f"row for custom frequency '{frequency.key}' sets '{key}', which {what}; allowed keys: "
                f"{', '.join(own) or '(none declared)'}",
                path,
            )
    values = {k: v for k, v in row.items() if v is not None}
    for k, v in values.items():
        try:
            _check_value(own[k], v)
        except (TypeError, ValueError) as e:
            raise _error(
                f"value {v!r} for custom attribute '{k}': {_describe(e)}", path, own[k].usd_attribute_name
            ) from None
    if values:
        builder.add_custom_values(values)
    elif attrs:
        builder.add_custom_values({attrs[0].key: None})
    else:
        builder._custom_frequency_counts[frequency.key] = builder.get_custom_frequency_count(frequency.key) + 1


def apply_custom_attributes(
    builder,
    stage,
    result: Mapping[str, Any],
    *,
    root_path: str = "/",
    ignore: Callable[[str], bool] = lambda path: False,
    skip_scene_namespaces: tuple[str, ...] = (),
) -> None:
    """Declare the USD custom attributes and fill the values of every custom attribute of ``builder``.

    Called by the importer after every body, shape, joint and articulation exists. Steps:

    1. declarations on the ``PhysicsScene`` prims under ``root_path`` are registered;
    2. ``ONCE`` / ``WORLD`` attributes are read from the scene prims, the other entity attributes
       from the prims of ``result["path_body_map"]``, ``["path_shape_map"]``,
       ``["path_joint_map"]`` (JOINT, JOINT_DOF, JOINT_COORD; an optional
       ``result["path_joint_dof_map"]`` / ``["path_joint_coord_map"]`` (path -> global indices)
       restricts a merged joint's source prim to its own DOFs / coordinates) and
       ``["path_articulation_map"]``;
    3. custom frequencies with a ``usd_prim_filter`` emit rows during one traversal of the prims
       under ``root_path`` (instance proxies included; subtrees of ``ignore``-d paths skipped).

    ``skip_scene_namespaces``: ONCE / WORLD attributes of these namespaces are not read from the scene
    prims (``add_usd(parse_mujoco_options=False)`` passes ``("mujoco",)``), so they keep their defaults.

    Raises:
        USDImportError: bad declarations (see :func:`get_custom_attribute_declarations`), an
            unregistered custom frequency, a declaration incompatible with the builder's, a value
            that does not fit its attribute, or a malformed custom-frequency row.
    """
    from pxr import Usd  # noqa: PLC0415

    from .utils import get_physics_scenes  # noqa: PLC0415

    scenes = [s.GetPrim() for s in get_physics_scenes(stage, root_path)]
    scenes = [p for p in scenes if not ignore(_path(p))]

    # 1. declarations
    for scene in scenes:
        path = _path(scene)
        for key, decl in get_custom_attribute_declarations(scene).items():
            if decl.is_custom_frequency and decl.frequency not in builder.custom_frequencies:
                registered = ", ".join(sorted(builder.custom_frequencies)) or "none"
                raise _error(
                    f"customData frequency {decl.frequency!r} is not one of: {_FREQUENCIES}, and no custom frequency "
                    f"with this key is registered (registered: {registered})",
                    path,
                    decl.usd_attribute_name,
                )
            try:
                builder.add_custom_attribute(decl)
            except (TypeError, ValueError) as e:
                raise _error(
                    f"declaration of custom attribute '{key}' is rejected: {e}", path, decl.usd_attribute_name
                ) from None

    context = {"builder": builder, "result": result}
    by_freq: dict[Any, list[CustomAttribute]] = {}
    for attr in builder.custom_attributes.values():
        if not attr.is_custom_frequency and attr.usd_attribute_name:
            by_freq.setdefault(attr.frequency, []).append(attr)

    # 2a. ONCE / WORLD values from the scene prims
    scene_attrs = [a for a in by_freq.get(AttributeFrequency.ONCE, []) + by_freq.get(AttributeFrequency.WORLD, [])
                   if a.namespace not in skip_scene_namespaces]  # fmt: skip
    if scene_attrs:
        for scene in scenes:
            for key, value in get_custom_attribute_values(scene, scene_attrs, context).items():
                attr = builder.custom_attributes[key]
                _store(builder, attr, 0, value, scene, attr.usd_attribute_name)

    # 2b. bodies, shapes, articulations
    for map_key, freq in _ENTITY_MAPS:
        attrs = by_freq.get(freq)
        if not attrs:
            continue
        for path, index in (result.get(map_key) or {}).items():
            if index is None or int(index) < 0 or ignore(path):
                continue
            prim = stage.GetPrimAtPath(path)
            if not prim:
                continue
            for key, value in get_custom_attribute_values(prim, attrs, context).items():
                attr = builder.custom_attributes[key]
                _store(builder, attr, index, value, prim, attr.usd_attribute_name)

    # 2c. joints
    joint_attrs = [a for f in _JOINT_FREQS for a in by_freq.get(f, [])]
    if joint_attrs:
        for path, joint in (result.get("path_joint_map") or {}).items():
            if joint is None or int(joint) < 0 or ignore(path):
                continue
            prim = stage.GetPrimAtPath(path)
            if not prim:
                continue
            for key, value in get_custom_attribute_values(prim, joint_attrs, context).items():
                attr = builder.custom_attributes[key]
                if attr.frequency == AttributeFrequency.JOINT:
                    _store(builder, attr, joint, value, prim, attr.usd_attribute_name)
                else:
                    _store_joint_sub(builder, attr, joint, value, prim, path, result)

    # 3. custom frequencies, one traversal
    freqs = [f for f in builder.custom_frequencies.values() if f.usd_prim_filter is not None]
    if not freqs:
        return
    root = stage.GetPrimAtPath(root_path)
    if not root:
        return
    rows_attrs = {
        f.key: [a for a in builder.custom_attributes.values() if a.is_custom_frequency and a.frequency == f.key]
        for f in freqs
    }
    it = iter(Usd.PrimRange(root, Usd.TraverseInstanceProxies()))
    for prim in it:
        if ignore(_path(prim)):
            it.PruneChildren()
            continue
        ctx = {"prim": prim, "builder": builder, "result": result}
        for freq in freqs:
            if not freq.usd_prim_filter(prim, ctx):
                continue
            attrs = rows_attrs[freq.key]
            if freq.usd_entry_expander is not None:
                for row in freq.usd_entry_expander(prim, ctx) or ():
                    _append_row(builder, freq, attrs, row, prim)
            else:
                _append_row(builder, freq, attrs, get_custom_attribute_values(prim, attrs, context), prim)

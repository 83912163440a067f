"""Custom attributes and custom frequencies of :class:`~armillary.ModelBuilder`.

A *custom attribute* is a user-declared flat array that lives next to the built-in
arrays of the :class:`~armillary.Model` (or of every :class:`~armillary.State`,
:class:`~armillary.Control` or :class:`~armillary.Contacts` created from it). Its
length follows a *frequency*: one value per body, shape, joint, joint DOF, joint
coordinate, articulation, world, particle, ... (:class:`AttributeFrequency`) or per
row of a user-registered *custom frequency* (a string key such as ``"mujoco:pair"``).

Keys: an attribute is identified by ``"namespace:name"`` (or ``"name"`` without a
namespace). After :meth:`ModelBuilder.finalize` it is reachable as
``model.<namespace>.<name>`` or ``model.<name>``; STATE / CONTROL / CONTACT
attributes are also copied onto every ``model.state()`` / ``model.control()`` /
contacts object.

This module defines :class:`AttributeFrequency`, :class:`AttributeAssignment`
(exposed as ``Model.AttributeFrequency`` / ``Model.AttributeAssignment``),
:class:`CustomAttribute`, :class:`CustomFrequency` (exposed as
``ModelBuilder.CustomAttribute`` / ``ModelBuilder.CustomFrequency``),
:class:`AttributeNamespace` and the builder mixin :class:`CustomAttributesMixin`.
All values are kept host-side (Python / numpy) until finalize.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import warp as wp

from .exceptions import ArmillaryWarning

__all__ = [
    "AttributeAssignment",
    "AttributeFrequency",
    "AttributeNamespace",
    "CustomAttribute",
    "CustomAttributeWarning",
    "CustomAttributesMixin",
    "CustomFrequency",
    "frequency_key",
]


class CustomAttributeWarning(ArmillaryWarning):
    """Warning about custom attribute data that finalize had to repair (padding, dropped values)."""


# ---------------------------------------------------------------------------------------------
# enums


class AttributeFrequency(enum.IntEnum):
    """How many values a (custom) attribute has and what indexes them (``Model.AttributeFrequency``).

    The integer values are stable (they follow the reference engine).
    """

    ONCE = 0
    """a single value (array of length 1)."""
    JOINT = 1
    """one value per joint."""
    JOINT_DOF = 2
    """one value per joint velocity degree of freedom (``joint_qd`` layout)."""
    JOINT_COORD = 3
    """one value per joint position coordinate (``joint_q`` layout)."""
    JOINT_CONSTRAINT = 4
    """one value per joint constraint row."""
    BODY = 5
    """one value per rigid body."""
    SHAPE = 6
    """one value per collision / visual shape."""
    ARTICULATION = 7
    """one value per articulation."""
    PARTICLE = 9
    """one value per particle."""
    EDGE = 10
    """one value per bending edge."""
    TRIANGLE = 11
    """one value per triangle element."""
    TETRAHEDRON = 12
    """one value per tetrahedral element."""
    SPRING = 13
    """one value per spring."""
    CONSTRAINT_MIMIC = 14
    """one value per mimic constraint."""
    WORLD = 15
    """one value per world."""
    ATTACHMENT_PARTICLE_BODY = 16
    """one value per particle-body attachment."""
    CONTACT = 17
    """per contact (solver observables only, not for builder custom attributes)."""
    CONTACT_RIGID = 18
    """per rigid contact (solver observables only)."""
    CONTACT_SOFT = 19
    """per soft contact (solver observables only)."""
    TENDON = 20
    """one value per tendon."""
    TENDON_GUIDE = 21
    """one value per tendon guide."""
    TENDON_SEGMENT = 22
    """one value per tendon segment."""
    CURVE = 23
    """one value per curve (rod) entity."""
    SURFACE = 24
    """one value per surface (cloth) entity."""
    VOLUME = 25
    """one value per volume (soft body) entity."""


class AttributeAssignment(enum.IntEnum):
    """Which object owns a custom attribute (``Model.AttributeAssignment``)."""

    MODEL = 0
    """the :class:`~armillary.Model` (static data)."""
    STATE = 1
    """every :class:`~armillary.State` (copied from the model's initial values)."""
    CONTROL = 2
    """every :class:`~armillary.Control` (copied from the model's initial values)."""
    CONTACT = 3
    """the :class:`~armillary.Contacts` object created for collision detection."""


_CONTACT_FREQUENCIES = (AttributeFrequency.CONTACT, AttributeFrequency.CONTACT_RIGID, AttributeFrequency.CONTACT_SOFT)

# string keys of the built-in frequencies ("body", "joint_dof", ...) and accepted aliases
_BUILTIN_KEYS: dict[str, AttributeFrequency] = {f.name.lower(): f for f in AttributeFrequency}
_ALIASES = {
    "tri": AttributeFrequency.TRIANGLE,
    "triangles": AttributeFrequency.TRIANGLE,
    "tet": AttributeFrequency.TETRAHEDRON,
    "tetrahedra": AttributeFrequency.TETRAHEDRON,
    "dof": AttributeFrequency.JOINT_DOF,
    "coord": AttributeFrequency.JOINT_COORD,
}
# strings that name built-in *reference* domains (curve/surface/volume strings name custom frequencies)
_BUILTIN_REFERENCE_KEYS = {
    k: f for k, f in {**_BUILTIN_KEYS, **_ALIASES}.items() if k not in ("curve", "surface", "volume", "once")
}
# builder / model count property of each built-in frequency
_COUNT_ATTRS = {
    AttributeFrequency.JOINT: "joint_count",
    AttributeFrequency.JOINT_DOF: "joint_dof_count",
    AttributeFrequency.JOINT_COORD: "joint_coord_count",
    AttributeFrequency.JOINT_CONSTRAINT: "joint_constraint_count",
    AttributeFrequency.BODY: "body_count",
    AttributeFrequency.SHAPE: "shape_count",
    AttributeFrequency.ARTICULATION: "articulation_count",
    AttributeFrequency.PARTICLE: "particle_count",
    AttributeFrequency.EDGE: "edge_count",
    AttributeFrequency.TRIANGLE: "tri_count",
    AttributeFrequency.TETRAHEDRON: "tet_count",
    AttributeFrequency.SPRING: "spring_count",
    AttributeFrequency.CONSTRAINT_MIMIC: "constraint_mimic_count",
    AttributeFrequency.WORLD: "world_count",
    AttributeFrequency.ATTACHMENT_PARTICLE_BODY: "attachment_particle_body_count",
    AttributeFrequency.TENDON: "tendon_count",
    AttributeFrequency.TENDON_GUIDE: "tendon_guide_count",
    AttributeFrequency.TENDON_SEGMENT: "tendon_segment_count",
    AttributeFrequency.CURVE: "curve_count",
    AttributeFrequency.SURFACE: "surface_count",
    AttributeFrequency.VOLUME: "volume_count",
}
# the keys the builder uses in the ``offsets`` dict of ``_merge_custom_attributes``
_OFFSET_KEYS = {
    AttributeFrequency.TRIANGLE: ("triangle", "tri"),
    AttributeFrequency.TETRAHEDRON: ("tetrahedron", "tet"),
}


def frequency_key(frequency: AttributeFrequency | str) -> str:
    """String key of a frequency: ``"body"`` for ``AttributeFrequency.BODY``, custom keys unchanged."""
    if isinstance(frequency, AttributeFrequency):
        return frequency.name.lower()
    return str(frequency)


def _frequency_label(frequency: AttributeFrequency | str) -> str:
    if isinstance(frequency, AttributeFrequency):
        return frequency.name
    return repr(frequency)


def _resolve_builtin(key: str | AttributeFrequency) -> AttributeFrequency:
    """Built-in frequency named by an enum or a string key ("body", "tri", ...)."""
    if isinstance(key, AttributeFrequency):
        return key
    k = key.lower()
    if k in _BUILTIN_KEYS:
        return _BUILTIN_KEYS[k]
    if k in _ALIASES:
        return _ALIASES[k]
    raise KeyError(f"unknown entity frequency {key!r}")


# ---------------------------------------------------------------------------------------------
# dtype helpers

_PY_TO_WP = {float: wp.float32, int: wp.int32, bool: wp.bool}


def _warp_dtype(dtype):
    """Warp dtype used for the array of an attribute declared with ``dtype``."""
    return _PY_TO_WP.get(dtype, dtype)


def _is_string_dtype(dtype) -> bool:
    return dtype is str


def _dtype_layout(dtype) -> tuple[Any, tuple[int, ...]]:
    """(numpy scalar type, element shape) of a warp / Python dtype."""
    dt = _warp_dtype(dtype)
    shape = tuple(getattr(dt, "_shape_", ()))
    scalar = getattr(dt, "_wp_scalar_type_", dt)
    try:
        np_scalar = wp.dtype_to_numpy(scalar)
    except Exception as exc:  # pragma: no cover - exotic dtypes
        raise TypeError(f"dtype {dtype!r} is not supported for custom attributes") from exc
    return np_scalar, shape


def _default_for_dtype(dtype) -> Any:
    """Zero value of ``dtype``: 0 for scalars, identity for quaternions, False, "" for str."""
    if _is_string_dtype(dtype):
        return ""
    if dtype in (float, int, bool):
        return dtype()
    dt = _warp_dtype(dtype)
    if dt is wp.bool:
        return False
    if wp.types.type_is_quaternion(dt):
        return dt(0.0, 0.0, 0.0, 1.0)
    try:
        return dt()
    except Exception:
        np_scalar, shape = _dtype_layout(dt)
        return np.zeros(shape, dtype=np_scalar)


def _coerce(value: Any, dtype, np_scalar, shape, key: str) -> np.ndarray | str:
    """Convert one value to a numpy element of the attribute's dtype (raises ValueError naming ``key``)."""
    if _is_string_dtype(dtype):
        if isinstance(value, str):
            return value
        if isinstance(value, bytes):
            return value.decode()
        raise ValueError(f"Custom attribute '{key}' has dtype str, but got value {value!r} ({type(value).__name__})")
    try:
        arr = np.asarray(value, dtype=np_scalar)
        if arr.shape != shape:
            if arr.size == int(np.prod(shape, dtype=np.int64)):
                arr = arr.reshape(shape)
            else:
                raise ValueError(f"shape {arr.shape} does not match {shape}")
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"Custom attribute '{key}': value {value!r} cannot be converted to dtype "
            f"{getattr(dtype, '__name__', dtype)} ({exc})"
        ) from None
    return arr


def _is_element(value: Any, shape: tuple[int, ...]) -> bool:
    """Whether ``value`` is a single element (not a per-entity sequence) for an element ``shape``."""
    if isinstance(value, (str, bytes)):
        return True
    if not shape:
        return np.ndim(value) == 0
    try:
        return np.shape(value) == shape or np.size(value) == int(np.prod(shape)) and np.ndim(value) <= len(shape)
    except Exception:
        return True


# ---------------------------------------------------------------------------------------------
# declarations


def _check_identifier(kind: str, value: Any, allow_none: bool) -> None:
    if value is None and allow_none:
        return
    if not isinstance(value, str) or not value or ":" in value:
        raise ValueError(f"{kind} must be non-empty and colon-free, got {value!r}")


@dataclasses.dataclass
class CustomAttribute:
    """Declaration of a custom attribute (``ModelBuilder.CustomAttribute``).

    Register with :meth:`ModelBuilder.add_custom_attribute` before authoring values through the
    ``custom_attributes=`` argument of the entity creation methods (``add_body``, ``add_shape_*``,
    ``add_joint_*``, ``add_particle``, ...) or :meth:`ModelBuilder.add_custom_values`.

    Attributes:
        name: attribute name (no colon).
        dtype: Warp dtype (``wp.float32``, ``wp.vec3``, ``wp.quat``, ...) or ``str`` for string
            attributes, which finalize stores as a Python ``list[str]``.
        frequency: :class:`AttributeFrequency` or the full key of a registered custom frequency.
        assignment: owner object, :class:`AttributeAssignment`.
        namespace: optional namespace; the key becomes ``"namespace:name"`` and the array is found at
            ``model.<namespace>.<name>``.
        references: what the values index, for re-mapping on ``add_builder`` / ``add_world`` /
            ``replicate``: a built-in entity (``"body"``, ``"shape"``, ``"joint"``, ``"joint_dof"``,
            ``"joint_coord"``, ``"articulation"``, ``"particle"``, ...; offset by the entity count;
            negative values are sentinels and kept), ``"world"`` (replaced by the merge's world) or
            a custom frequency key (offset by that frequency's row count).
        default: value of entities without an authored value; ``None`` derives a zero value from
            the dtype (0, identity quaternion, False, "").
        values: pre-populated values, ``dict[int, value]`` for enum frequencies or ``list`` (rows)
            for custom frequencies.
        usd_attribute_name: USD attribute to read (default ``"newton:<key>"``; ``"*"`` calls the
            transformer for every prim and then requires ``usd_value_transformer``).
        mjcf_attribute_name: MJCF XML attribute to read (default ``name``).
        urdf_attribute_name: URDF XML attribute to read (default ``name``).
        usd_value_transformer: ``f(value, context) -> value`` applied to USD values.
        mjcf_value_transformer: ``f(str, context) -> value`` applied to MJCF strings.
        urdf_value_transformer: ``f(str, context) -> value`` applied to URDF strings.
        reference_value_transformer: ``f(values: list, context: dict) -> list`` custom re-mapping on
            merge (instead of ``references``); context keys: ``builder`` (source),
            ``destination_builder``, ``entity_offsets``, ``custom_frequency_offsets``,
            ``row_indices``, ``world``, ``label_prefix``.
    """

    name: str
    dtype: type
    frequency: AttributeFrequency | str
    assignment: AttributeAssignment = AttributeAssignment.MODEL
    namespace: str | None = None
    references: AttributeFrequency | str | None = None
    default: Any = None
    values: dict[int, Any] | list[Any] | None = None
    usd_attribute_name: str | None = None
    mjcf_attribute_name: str | None = None
    urdf_attribute_name: str | None = None
    usd_value_transformer: Callable[[Any, dict[str, Any]], Any] | None = None
    mjcf_value_transformer: Callable[[str, dict[str, Any] | None], Any] | None = None
    urdf_value_transformer: Callable[[str, dict[str, Any] | None], Any] | None = None
    reference_value_transformer: Callable[[list[Any], dict[str, Any]], list[Any]] | None = None

    def __post_init__(self) -> None:
        _check_identifier("name", self.name, allow_none=False)
        if self.namespace is not None:
            _check_identifier("namespace", self.namespace, allow_none=False)
        # frequency: enum, its integer value, or a non-empty custom key
        if isinstance(self.frequency, AttributeFrequency):
            pass
        elif isinstance(self.frequency, int) and not isinstance(self.frequency, bool):
            try:
                self.frequency = AttributeFrequency(self.frequency)
            except ValueError:
                raise ValueError(f"Custom attribute '{self.key}': invalid frequency {self.frequency!r}") from None
        elif isinstance(self.frequency, str):
            if not self.frequency:
                raise ValueError(f"Custom attribute '{self.key}': frequency must not be an empty string")
        else:
            raise TypeError(
                f"Custom attribute '{self.key}': frequency must be a Model.AttributeFrequency or a custom "
                f"frequency key (str), got {self.frequency!r}"
            )
        self.assignment = _coerce_assignment(self.assignment, self.key)
        if self.references is not None:
            if isinstance(self.references, AttributeFrequency):
                pass
            elif isinstance(self.references, int) and not isinstance(self.references, bool):
                self.references = AttributeFrequency(self.references)
            elif not isinstance(self.references, str) or not self.references:
                raise TypeError(
                    f"Custom attribute '{self.key}': references must be an entity/custom frequency key "
                    f"(str) or a Model.AttributeFrequency, got {self.references!r}"
                )
        if self.references is not None and self.reference_value_transformer is not None:
            raise ValueError("references and reference_value_transformer cannot both be specified.")
        if self.default is None:
            self.default = _default_for_dtype(self.dtype)
        if self.values is None:
            self.values = [] if self.is_custom_frequency else {}
        elif self.is_custom_frequency:
            if isinstance(self.values, Mapping):
                n = (max(self.values) + 1) if self.values else 0
                rows = [None] * n
                for i, v in self.values.items():
                    rows[int(i)] = v
                self.values = rows
            else:
                self.values = list(self.values)
        else:
            if isinstance(self.values, Mapping):
                self.values = {int(i): v for i, v in self.values.items()}
            else:
                self.values = {i: v for i, v in enumerate(self.values) if v is not None}
        if self.usd_attribute_name is None:
            self.usd_attribute_name = f"newton:{self.key}"
        if self.mjcf_attribute_name is None:
            self.mjcf_attribute_name = self.name
        if self.urdf_attribute_name is None:
            self.urdf_attribute_name = self.name

    @property
    def key(self) -> str:
        """Full identifier ``"namespace:name"`` (or ``"name"``)."""
        return f"{self.namespace}:{self.name}" if self.namespace else self.name

    @property
    def is_custom_frequency(self) -> bool:
        """Whether the frequency is a custom (string) frequency."""
        return isinstance(self.frequency, str)

    @property
    def frequency_key(self) -> str:
        """String key of the frequency (``"body"``, ``"mujoco:pair"``, ...)."""
        return frequency_key(self.frequency)

    # -- building -------------------------------------------------------------------------------

    def _values_with_defaults(self, count: int) -> dict[int, Any] | list[Any]:
        """Values of all ``count`` entities, defaults filled in (dict for enum, list for custom)."""
        if self.is_custom_frequency:
            vals = list(self.values)[:count]
            vals += [None] * (count - len(vals))
            return [self.default if v is None else v for v in vals]
        out = {i: self.default for i in range(count)}
        for i, v in self.values.items():
            if 0 <= i < count and v is not None:
                out[i] = v
        return out

    def build_numpy(self, count: int) -> np.ndarray | list[str]:
        """Host array of ``count`` values (``list[str]`` for string attributes)."""
        if _is_string_dtype(self.dtype):
            vals = self._values_with_defaults(count)
            seq = vals if isinstance(vals, list) else [vals[i] for i in range(count)]
            return [_coerce(v, str, None, (), self.key) for v in seq]
        np_scalar, shape = _dtype_layout(self.dtype)
        arr = np.empty((count, *shape), dtype=np_scalar)
        arr[...] = _coerce(self.default, self.dtype, np_scalar, shape, self.key)
        items = enumerate(self.values) if self.is_custom_frequency else self.values.items()
        for i, v in items:
            if v is None:
                continue
            if 0 <= i < count:
                arr[i] = _coerce(v, self.dtype, np_scalar, shape, self.key)
        return arr

    def build_array(self, count: int, device=None, requires_grad: bool = False) -> wp.array | list:
        """Array of ``count`` values on ``device`` (a ``list[str]`` for string attributes)."""
        host = self.build_numpy(count)
        if isinstance(host, list):
            return host
        dt = _warp_dtype(self.dtype)
        grad = bool(requires_grad) and _is_float_dtype(dt)
        return wp.array(host, dtype=dt, device=device, requires_grad=grad)


CustomAttribute.__qualname__ = "ModelBuilder.CustomAttribute"


def _is_float_dtype(dt) -> bool:
    scalar = getattr(dt, "_wp_scalar_type_", dt)
    return scalar in (wp.float16, wp.float32, wp.float64)


def _coerce_assignment(value: Any, key: str) -> AttributeAssignment:
    if isinstance(value, AttributeAssignment):
        return value
    if isinstance(value, str):
        try:
            return AttributeAssignment[value.upper()]
        except KeyError:
            pass
    elif isinstance(value, int) and not isinstance(value, bool):
        try:
            return AttributeAssignment(value)
        except ValueError:
            pass
    raise ValueError(
        f"Custom attribute '{key}': assignment must be a Model.AttributeAssignment "
        f"(MODEL, STATE, CONTROL, CONTACT), got {value!r}"
    )


@dataclasses.dataclass
class CustomFrequency:
    """Declaration of a custom frequency (``ModelBuilder.CustomFrequency``).

    A custom frequency is an entity type with its own count (rows), e.g. MuJoCo contact pairs.
    Register with :meth:`ModelBuilder.add_custom_frequency`; attributes then use its full key
    (``"namespace:name"``) as their ``frequency`` and rows are appended with
    :meth:`ModelBuilder.add_custom_values`.

    Attributes:
        name: frequency name (no colon).
        namespace: optional namespace (no colon); the key is ``"namespace:name"``.
        usd_prim_filter: ``f(prim, context) -> bool`` selecting the USD prims that emit rows.
        usd_entry_expander: ``f(prim, context) -> iterable of row dicts`` (one prim, many rows).
        articulation_owner_attribute: key of an int attribute of this frequency that holds the
            owning articulation of each row; must be ``"<key>_articulation"``.
        articulation_owner_resolver: ``f(builder) -> sequence[int]`` giving the owning
            articulation of each row (alternative to the attribute).
        label_attribute: key of a ``str`` attribute of this frequency holding row labels; must be
            ``"<key>_label"``.
    """

    name: str
    namespace: str | None = None
    usd_prim_filter: Callable[[Any, dict[str, Any]], bool] | None = None
    usd_entry_expander: Callable[[Any, dict[str, Any]], Iterable[dict[str, Any]]] | None = None
    articulation_owner_attribute: str | None = None
    articulation_owner_resolver: Callable[[Any], Sequence[int]] | None = None
    label_attribute: str | None = None

    def __post_init__(self) -> None:
        _check_identifier("name", self.name, allow_none=False)
        if self.namespace is not None:
            _check_identifier("namespace", self.namespace, allow_none=False)
        if self.label_attribute is not None and self.label_attribute != f"{self.key}_label":
            raise ValueError(
                f"label_attribute for custom frequency '{self.key}' must be '{self.key}_label', "
                f"got {self.label_attribute!r}"
            )
        if (
            self.articulation_owner_attribute is not None
            and self.articulation_owner_attribute != f"{self.key}_articulation"
        ):
            raise ValueError(
                f"articulation_owner_attribute for custom frequency '{self.key}' must be "
                f"'{self.key}_articulation', got {self.articulation_owner_attribute!r}"
            )

    @property
    def key(self) -> str:
        """Full key ``"namespace:name"`` (or ``"name"``)."""
        return f"{self.namespace}:{self.name}" if self.namespace else self.name


CustomFrequency.__qualname__ = "ModelBuilder.CustomFrequency"


def _attribute_specs_match(a: CustomAttribute, b: CustomAttribute) -> list[str]:
    """Names of the declaration fields in which ``a`` and ``b`` are incompatible."""
    diffs = []
    if _warp_dtype(a.dtype) != _warp_dtype(b.dtype):
        diffs.append(f"dtype {getattr(a.dtype, '__name__', a.dtype)} != {getattr(b.dtype, '__name__', b.dtype)}")
    if a.frequency != b.frequency or type(a.frequency) is not type(b.frequency):
        diffs.append(f"frequency {_frequency_label(a.frequency)} != {_frequency_label(b.frequency)}")
    if a.assignment != b.assignment:
        diffs.append(f"assignment {a.assignment.name} != {b.assignment.name}")
    if _normalized_reference(a.references) != _normalized_reference(b.references):
        diffs.append(f"references {a.references!r} != {b.references!r}")
    return diffs


def _normalized_reference(ref):
    if ref is None:
        return None
    if isinstance(ref, AttributeFrequency):
        return ("builtin", ref)
    if ref == "world":
        return ("world", None)
    if ref in _BUILTIN_REFERENCE_KEYS:
        return ("builtin", _BUILTIN_REFERENCE_KEYS[ref])
    return ("custom", ref)


# ---------------------------------------------------------------------------------------------
# namespaces on model / state / control / contacts


class AttributeNamespace:
    """Container of the namespaced custom attributes (``model.<namespace>.<name>``).

    The attributes are plain instance attributes.
    """

    def __init__(self, name: str):
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    def _attribute_names(self) -> list[str]:
        return [k for k in vars(self) if not k.startswith("_")]

    def __repr__(self) -> str:
        return f"AttributeNamespace({self._name!r}, attributes={self._attribute_names()})"

    def __contains__(self, item: str) -> bool:
        return item in self._attribute_names()

    def __iter__(self):
        return iter(self._attribute_names())


def _attach(obj: Any, attr: CustomAttribute, value: Any, owner_label: str) -> None:
    """Set ``value`` as ``obj.<name>`` or ``obj.<namespace>.<name>``; refuses to shadow."""
    if attr.namespace:
        ns = getattr(obj, attr.namespace, None)
        if ns is None:
            if hasattr(type(obj), attr.namespace):
                raise AttributeError(
                    f"Custom attribute namespace '{attr.namespace}' of '{attr.key}' clashes with "
                    f"{owner_label}.{attr.namespace}"
                )
            ns = AttributeNamespace(attr.namespace)
            setattr(obj, attr.namespace, ns)
        elif not isinstance(ns, AttributeNamespace):
            raise AttributeError(
                f"Custom attribute namespace '{attr.namespace}' of '{attr.key}' clashes with the existing "
                f"attribute {owner_label}.{attr.namespace}"
            )
        setattr(ns, attr.name, value)
    else:
        if attr.name in vars(obj) or hasattr(type(obj), attr.name):
            raise AttributeError(
                f"Attribute already exists: {attr.name} (custom attribute '{attr.key}' would shadow "
                f"{owner_label}.{attr.name}; use a namespace)"
            )
        setattr(obj, attr.name, value)


def _clone_value(value: Any) -> Any:
    if isinstance(value, wp.array):
        return wp.clone(value, requires_grad=value.requires_grad)
    return list(value)


def _make_initializer(attrs: list[tuple[CustomAttribute, Any]], owner_label: str) -> Callable[[Any], None]:
    def _init(obj: Any) -> None:
        for attr, template in attrs:
            value = _clone_value(template)
            if attr.namespace:
                ns = getattr(obj, attr.namespace, None)
                if not isinstance(ns, AttributeNamespace):
                    ns = AttributeNamespace(attr.namespace)
                    setattr(obj, attr.namespace, ns)
                setattr(ns, attr.name, value)
            else:
                setattr(obj, attr.name, value)

    _init.__name__ = f"_init_custom_{owner_label}"
    _init.attributes = [a.key for a, _ in attrs]
    return _init


def _model_get_custom_frequency_count(model, frequency: str) -> int:
    counts = getattr(model, "custom_frequency_counts", {}) or {}
    if frequency not in counts:
        raise KeyError(f"Custom frequency '{frequency}' is not known")
    return counts[frequency]


def _model_get_attribute_frequency(model, name: str):
    freqs = getattr(model, "attribute_frequency", {}) or {}
    if name not in freqs:
        raise KeyError(f"Attribute frequency of '{name}' is not known")
    return freqs[name]


# ---------------------------------------------------------------------------------------------
# builder mixin


class CustomAttributesMixin:
    """Builder mixin: declaration, authoring, merging and finalization of custom attributes.

    State held on the builder:

    * ``custom_attributes``: ``dict[key, CustomAttribute]`` (declaration order); authored values
      are kept in each attribute's ``values``.
    * ``custom_frequencies``: ``dict[key, CustomFrequency]`` (registration order).
    * ``_custom_frequency_counts``: ``dict[key, int]`` rows of each custom frequency.
    """

    CustomAttribute = CustomAttribute
    CustomFrequency = CustomFrequency

    def _init_custom_attributes(self) -> None:
        self.custom_attributes: dict[str, CustomAttribute] = {}
        self.custom_frequencies: dict[str, CustomFrequency] = {}
        self._custom_frequency_counts: dict[str, int] = {}

    # -- declaration ------------------------------------------------------------------------------

    def add_custom_frequency(self, frequency: CustomFrequency) -> None:
        """Register a custom frequency (an entity type with its own row count).

        Registering an equal declaration again is a no-op (importers may register the same
        frequencies repeatedly).

        Args:
            frequency: the :class:`CustomFrequency` declaration.

        Raises:
            TypeError: if ``frequency`` is not a :class:`CustomFrequency`.
            ValueError: if the key names a built-in frequency, or is already registered with a
                different declaration.
        """
        if not isinstance(frequency, CustomFrequency):
            raise TypeError(
                f"add_custom_frequency() expects a ModelBuilder.CustomFrequency, got {type(frequency).__name__}"
            )
        key = frequency.key
        if key.lower() in _BUILTIN_KEYS or key.lower() in _ALIASES:
            raise ValueError(
                f"Custom frequency '{key}' clashes with the built-in frequency "
                f"Model.AttributeFrequency.{_resolve_builtin(key).name}; use a namespace or another name"
            )
        existing = self.custom_frequencies.get(key)
        if existing is not None:
            if existing == frequency:
                return
            diffs = [
                f.name
                for f in dataclasses.fields(CustomFrequency)
                if getattr(existing, f.name) != getattr(frequency, f.name)
            ]
            raise ValueError(
                f"Custom frequency '{key}' is already registered with a different declaration "
                f"(fields differ: {', '.join(diffs)})"
            )
        self.custom_frequencies[key] = frequency
        self._custom_frequency_counts.setdefault(key, 0)

    def add_custom_attribute(self, attribute: CustomAttribute) -> None:
        """Declare a custom attribute; see the module docstring and ``docs/data_model.md``.

        Declaring the same key again with the same dtype, frequency, assignment and references is
        a no-op (the first declaration, including its default, is kept).

        Args:
            attribute: the :class:`CustomAttribute` declaration. The builder keeps this object and
                stores authored values in its ``values``.

        Raises:
            TypeError: if ``attribute`` is not a :class:`CustomAttribute`.
            ValueError: if the key exists with an incompatible declaration (dtype, frequency,
                assignment or references differ), if the custom frequency is not registered, if
                the frequency is a contact frequency (reserved for solver observables), or if
                ``usd_attribute_name == "*"`` has no ``usd_value_transformer``.
        """
        if not isinstance(attribute, CustomAttribute):
            raise TypeError(
                f"add_custom_attribute() expects a ModelBuilder.CustomAttribute, got {type(attribute).__name__}"
            )
        key = attribute.key
        if attribute.frequency in _CONTACT_FREQUENCIES:
            raise ValueError(
                f"Custom attribute '{key}': contact frequencies ({attribute.frequency.name}) are only supported "
                "by SolverBase.Observables, not builder custom attributes."
            )
        if attribute.is_custom_frequency and attribute.frequency not in self.custom_frequencies:
            raise ValueError(
                f"Custom frequency '{attribute.frequency}' of custom attribute '{key}' is not registered. Please "
                "register it first using add_custom_frequency() before adding attributes with this frequency."
            )
        if attribute.usd_attribute_name == "*" and attribute.usd_value_transformer is None:
            raise ValueError(
                f"Custom attribute '{key}' uses usd_attribute_name='*' but no usd_value_transformer is provided. "
                "A wildcard USD attribute requires a usd_value_transformer to compute values from prim data."
            )
        ref = attribute.references
        if isinstance(ref, str) and _normalized_reference(ref)[0] == "custom" and ref not in self.custom_frequencies:
            # allowed (the referenced frequency may be registered later), validated at merge time
            pass
        existing = self.custom_attributes.get(key)
        if existing is not None:
            diffs = _attribute_specs_match(existing, attribute)
            if diffs:
                raise ValueError(
                    f"Custom attribute '{key}' already exists with incompatible spec ({'; '.join(diffs)}). "
                    "The same key cannot be declared twice with a different assignment, frequency, dtype "
                    "or references; use a namespace."
                )
            return
        if attribute.is_custom_frequency:
            rows = self._custom_frequency_row_count(attribute.frequency)
            n = len(attribute.values)
            if n == 0:
                # declared without values: defaults for the rows that exist
                attribute.values.extend([None] * rows)
            elif rows == 0 or not any(
                len(o.values) for o in self.custom_attributes.values()
                if o.frequency == attribute.frequency and o.is_custom_frequency
            ):  # fmt: skip
                # the first values of this frequency set its rows; declared empty siblings get defaults
                self._custom_frequency_counts[attribute.frequency] = max(rows, n)
                for other in self.custom_attributes.values():
                    if other.frequency == attribute.frequency and other.is_custom_frequency:
                        other.values.extend([None] * (max(rows, n) - len(other.values)))
                attribute.values.extend([None] * (rows - n))
            # otherwise a count that differs from the siblings' is kept as given: finalize() rejects it
        self.custom_attributes[key] = attribute

    # -- queries ----------------------------------------------------------------------------------

    def has_custom_attribute(self, key: str) -> bool:
        """Whether a custom attribute with full key ``key`` is declared."""
        return key in self.custom_attributes

    def get_custom_attributes_by_frequency(
        self, frequencies: Sequence[AttributeFrequency | str]
    ) -> list[CustomAttribute]:
        """Declared custom attributes whose frequency is one of ``frequencies`` (declaration order)."""
        if isinstance(frequencies, (str, AttributeFrequency)):
            frequencies = [frequencies]
        wanted = set()
        for f in frequencies:
            wanted.add(f if isinstance(f, AttributeFrequency) else str(f))
        return [a for a in self.custom_attributes.values() if a.frequency in wanted]

    def get_custom_frequency_keys(self) -> set[str]:
        """Keys of the registered custom frequencies."""
        return set(self.custom_frequencies)

    def get_custom_frequency_count(self, frequency: str) -> int:
        """Number of rows of a registered custom frequency (raises KeyError if unknown)."""
        if frequency not in self.custom_frequencies:
            raise KeyError(f"Custom frequency '{frequency}' is not known")
        return self._custom_frequency_row_count(frequency)

    def _check_custom_frequency_counts(self, frequency: str | None = None) -> None:
        """Every attribute sharing a custom frequency must hold the same number of values (see
        ``docs/model.md``); raise ``ValueError`` naming two that differ and their counts.
        Checks ``frequency`` only, or every registered custom frequency when ``None``."""
        keys = list(self.custom_frequencies) if frequency is None else [frequency]
        for freq in keys:
            attrs = [a for a in self.custom_attributes.values() if a.is_custom_frequency and a.frequency == freq]
            if not attrs:
                continue
            first = attrs[0]
            for other in attrs[1:]:
                if len(other.values) != len(first.values):
                    raise ValueError(
                        f"Custom frequency '{freq}': attribute '{first.key}' has {len(first.values)} values but "
                        f"'{other.key}' has {len(other.values)}; all attributes sharing a custom frequency must "
                        "have the same count at finalize() (append rows with add_custom_values(), which keeps "
                        "them in step)"
                    )

    def _custom_frequency_row_count(self, frequency: str) -> int:
        n = self._custom_frequency_counts.get(frequency, 0)
        for a in self.custom_attributes.values():
            if a.frequency == frequency and a.is_custom_frequency:
                n = max(n, len(a.values))
        return n

    def _custom_entity_count(self, frequency: AttributeFrequency | str) -> int:
        """Current number of entities of a (built-in or custom) frequency in this builder."""
        if isinstance(frequency, str):
            return self._custom_frequency_row_count(frequency)
        if frequency == AttributeFrequency.ONCE:
            return 1
        name = _COUNT_ATTRS.get(frequency)
        if name is None:
            return 0
        value = getattr(self, name, None)
        if value is None:
            return 0
        if callable(value):
            value = value()
        return int(value)

    # -- authoring --------------------------------------------------------------------------------

    def _lookup_custom_attribute(self, key: str) -> CustomAttribute:
        attr = self.custom_attributes.get(key)
        if attr is None:
            raise AttributeError(
                f"Custom attribute '{key}' is not defined. Please declare it first using add_custom_attribute()."
            )
        return attr

    def _custom_joint_range(self, joint: int, frequency: AttributeFrequency) -> tuple[int, int]:
        """(start, count) of the DOFs (JOINT_DOF) or coordinates (JOINT_COORD) of ``joint``."""
        if frequency == AttributeFrequency.JOINT_DOF:
            starts, total = getattr(self, "joint_qd_start", None), self._custom_entity_count(frequency)
        else:
            starts, total = getattr(self, "joint_q_start", None), self._custom_entity_count(frequency)
        if starts is None:
            raise RuntimeError("the builder does not expose joint_qd_start / joint_q_start")
        start = int(starts[joint])
        end = int(starts[joint + 1]) if joint + 1 < len(starts) else int(total)
        return start, end - start

    def _check_custom_attributes(
        self, frequency_key: str, values: dict | None, *, count: int = 1, dof_count: int = 0, coord_count: int = 0
    ) -> None:
        """Validate ``values`` for ``count`` new entities of ``frequency_key`` without storing anything.

        Entity creation methods call this *before* committing the entity, so that a bad custom
        attribute never leaves a half-added entity behind. For joints, ``dof_count`` and
        ``coord_count`` are the new joint's DOF and coordinate counts.
        """
        for attr, joint_sub, per_entity in self._plan_custom_attributes(frequency_key, count, values):
            if not joint_sub:
                continue
            n = dof_count if attr.frequency == AttributeFrequency.JOINT_DOF else coord_count
            for v in per_entity:
                self._joint_sub_items(attr, v, n)

    def _plan_custom_attributes(self, frequency_key: str, count: int, values: dict | None) -> list:
        """``[(attr, is_joint_sub, per_entity_values)]`` after validating keys, frequencies and plain values."""
        if not values:
            return []
        if not isinstance(values, Mapping):
            raise TypeError(f"custom_attributes must be a dict mapping attribute keys to values, got {values!r}")
        try:
            expected = _resolve_builtin(frequency_key)
        except KeyError:
            raise ValueError(f"unknown entity frequency {frequency_key!r} for custom attributes") from None
        plan = []
        for key, value in values.items():
            attr = self._lookup_custom_attribute(key)
            freq = attr.frequency
            joint_sub = expected == AttributeFrequency.JOINT and freq in (
                AttributeFrequency.JOINT_DOF,
                AttributeFrequency.JOINT_COORD,
            )
            if freq != expected and not joint_sub:
                raise ValueError(
                    f"Custom attribute '{key}' has frequency {_frequency_label(freq)}, but it was given for a "
                    f"{expected.name} entity (expected frequency {expected.name})"
                )
            per_entity = self._split_per_entity(attr, value, count)
            if not joint_sub:
                for v in per_entity:
                    if v is not None:
                        self._coerce_custom_value(attr, v)
            plan.append((attr, joint_sub, per_entity))
        return plan

    def _assign_custom_attributes(self, frequency_key: str, index: int | Sequence[int], values: dict | None) -> None:
        """Store authored ``values`` (``{key: value}``) for entity ``index`` of ``frequency_key``.

        Called by the entity creation methods after the entity was appended (and after
        :meth:`_check_custom_attributes` validated the values). ``frequency_key`` is a
        built-in key (``"body"``, ``"shape"``, ``"joint"``, ``"joint_dof"``, ``"joint_coord"``,
        ``"articulation"``, ``"world"``, ``"particle"``, ``"spring"``, ``"tri"``, ``"tet"``,
        ``"edge"``, ...). For ``"joint"``, JOINT_DOF and JOINT_COORD attributes are accepted too and
        take a list (one value per DOF / coordinate), a sparse dict ``{local_index: value}`` or a
        scalar (broadcast to every DOF / coordinate of the joint). ``index`` may be a sequence of
        entity indices: a value is then broadcast, or a sequence of the same length gives one value
        per entity.

        Raises:
            AttributeError: if a key is not declared.
            ValueError: if a key's frequency does not match the entity, or a value is malformed.
        """
        indices = [int(index)] if np.ndim(index) == 0 else [int(i) for i in index]
        plan = self._plan_custom_attributes(frequency_key, len(indices), values)
        staged = []  # validate everything (joint sub-values included) before storing anything
        for attr, joint_sub, per_entity in plan:
            for idx, v in zip(indices, per_entity):
                if joint_sub:
                    start, n = self._custom_joint_range(idx, attr.frequency)
                    staged.extend((attr, start + k, item) for k, item in self._joint_sub_items(attr, v, n))
                else:
                    staged.append((attr, idx, v))
        for attr, idx, v in staged:
            self._set_custom_value(attr, idx, v)

    def _coerce_custom_value(self, attr: CustomAttribute, value: Any) -> None:
        if _is_string_dtype(attr.dtype):
            _coerce(value, str, None, (), attr.key)
        else:
            np_scalar, shape = _dtype_layout(attr.dtype)
            _coerce(value, attr.dtype, np_scalar, shape, attr.key)

    def _joint_sub_items(self, attr: CustomAttribute, value: Any, n: int) -> list[tuple[int, Any]]:
        """``[(local DOF/coordinate index, value)]`` of a JOINT_DOF/JOINT_COORD value for a joint with ``n``."""
        unit = "DOFs" if attr.frequency == AttributeFrequency.JOINT_DOF else "coordinates"
        kind = "DOF" if attr.frequency == AttributeFrequency.JOINT_DOF else "coordinate"
        label = attr.frequency.name
        if isinstance(value, Mapping):
            items = []
            for local, v in value.items():
                if not isinstance(local, (int, np.integer)) or not 0 <= int(local) < n:
                    raise ValueError(
                        f"{label} attribute '{attr.key}' has invalid {kind} index {local} (joint has {n} {unit})"
                    )
                items.append((int(local), v))
        else:
            shape = () if _is_string_dtype(attr.dtype) else _dtype_layout(attr.dtype)[1]
            if value is None or _is_element(value, shape):
                items = [(k, value) for k in range(n)]
            else:
                seq = list(value)
                if len(seq) != n:
                    raise ValueError(f"{label} attribute '{attr.key}' has {len(seq)} values but joint has {n} {unit}")
                items = list(enumerate(seq))
        for _, v in items:
            if v is not None:
                self._coerce_custom_value(attr, v)
        return items

    def _split_per_entity(self, attr: CustomAttribute, value: Any, n: int) -> list[Any]:
        if n == 1:
            return [value]
        if isinstance(value, (str, bytes, Mapping)) or value is None:
            return [value] * n
        _, shape = (None, ()) if _is_string_dtype(attr.dtype) else _dtype_layout(attr.dtype)
        if not _is_element(value, shape) and len(value) == n:
            return list(value)
        return [value] * n

    def _set_custom_value(self, attr: CustomAttribute, index: int, value: Any) -> None:
        if value is None:
            attr.values.pop(index, None)
            return
        if _is_string_dtype(attr.dtype):
            _coerce(value, str, None, (), attr.key)
        else:
            np_scalar, shape = _dtype_layout(attr.dtype)
            _coerce(value, attr.dtype, np_scalar, shape, attr.key)
        attr.values[index] = value

    def add_custom_values(self, values: Mapping[str, Any] | None = None, /, **kwargs: Any) -> dict[str, int]:
        """Append one row to each custom frequency touched by the given attribute values.

        Values may be given as a dict (``add_custom_values({"myns:item_id": 100})``) and/or as
        keyword arguments (``add_custom_values(**{"myns:item_id": 100})``). Attributes of a touched
        frequency that are not given get ``None`` (their default at finalize), except attributes
        declared with ``references="world"``, which get :attr:`current_world` when omitted or
        ``None`` (explicit values, including -1, are kept).

        Returns:
            ``{key: row index}`` for every given key and every inferred world-reference key.

        Raises:
            AttributeError: if a key is not declared.
            TypeError: if an attribute has a built-in (enum) frequency.
        """
        entries: dict[str, Any] = {}
        if values is not None:
            if not isinstance(values, Mapping):
                raise TypeError(f"add_custom_values() expects a dict of attribute values, got {type(values).__name__}")
            entries.update(values)
        entries.update(kwargs)
        touched: list[str] = []
        for key in entries:
            attr = self._lookup_custom_attribute(key)
            if not attr.is_custom_frequency:
                raise TypeError(
                    f"Custom attribute '{key}' has frequency={_frequency_label(attr.frequency)}, but "
                    "add_custom_values() only works with custom frequency attributes."
                )
            if attr.frequency not in touched:
                touched.append(attr.frequency)
        for key, value in entries.items():  # validate before mutating anything
            attr = self.custom_attributes[key]
            if value is not None:
                if _is_string_dtype(attr.dtype):
                    _coerce(value, str, None, (), key)
                else:
                    np_scalar, shape = _dtype_layout(attr.dtype)
                    _coerce(value, attr.dtype, np_scalar, shape, key)
        for freq in touched:
            self._check_custom_frequency_counts(freq)
        world = int(getattr(self, "current_world", -1) if getattr(self, "current_world", -1) is not None else -1)
        result: dict[str, int] = {}
        for freq in touched:
            row = self._custom_frequency_row_count(freq)
            for attr in self.custom_attributes.values():
                if attr.frequency != freq or not attr.is_custom_frequency:
                    continue
                del attr.values[row:]
                attr.values.extend([None] * (row - len(attr.values)))
                value = entries.get(attr.key)
                is_world = _normalized_reference(attr.references) == ("world", None)
                if value is None and is_world:
                    value = world
                attr.values.append(value)
                if attr.key in entries or is_world:
                    result[attr.key] = row
            self._custom_frequency_counts[freq] = row + 1
        return result

    def add_custom_values_batch(self, entries: Sequence[Mapping[str, Any]]) -> list[dict[str, int]]:
        """Append several rows; each entry is forwarded to :meth:`add_custom_values`."""
        return [self.add_custom_values(dict(entry)) for entry in entries]

    # -- merging ----------------------------------------------------------------------------------

    def _merge_custom_attributes(self, other, offsets: dict) -> None:
        """Adopt the declarations of ``other`` and append its values, re-mapping references.

        ``offsets`` holds this builder's entity counts *before* the merge (keys ``body``,
        ``shape``, ``joint``, ``joint_dof``, ``joint_coord``, ``articulation``, ``particle``,
        ``spring``, ``tri``/``triangle``, ``tet``/``tetrahedron``, ``edge``, ...) and ``world``: the
        world index of the merged entities (-1 for global). Optional ``label_prefix``.
        """
        if not hasattr(other, "custom_attributes"):
            return
        other._check_custom_frequency_counts()  # padding below would hide a mismatch
        self._check_custom_frequency_counts()
        world = offsets.get("world", -1)
        world = -1 if world is None else int(world)
        entity_offsets: dict[str, int] = {}
        for f in AttributeFrequency:
            names = _OFFSET_KEYS.get(f, (f.name.lower(),))
            for n in names:
                if n in offsets and offsets[n] is not None:
                    entity_offsets[names[0]] = int(offsets[n])
                    break
        for k, v in offsets.items():
            if k not in ("world", "label_prefix") and v is not None and k not in entity_offsets:
                entity_offsets[k] = int(v)
        # 1. frequencies
        for key, freq in other.custom_frequencies.items():
            if key not in self.custom_frequencies:
                self.custom_frequencies[key] = freq
                self._custom_frequency_counts.setdefault(key, 0)
        custom_offsets = {key: self._custom_frequency_row_count(key) for key in self.custom_frequencies}
        # 2. declarations
        for key, attr in other.custom_attributes.items():
            mine = self.custom_attributes.get(key)
            if mine is None:
                clone = copy.copy(attr)
                clone.values = [] if attr.is_custom_frequency else {}
                self.add_custom_attribute(clone)
            else:
                diffs = _attribute_specs_match(mine, attr)
                if diffs:
                    raise ValueError(
                        f"Custom attribute '{key}' already exists with incompatible spec ({'; '.join(diffs)}); "
                        "cannot merge builders"
                    )
        context_base = {
            "builder": other,
            "destination_builder": self,
            "entity_offsets": dict(entity_offsets),
            "custom_frequency_offsets": dict(custom_offsets),
            "world": world,
            "label_prefix": offsets.get("label_prefix"),
        }
        # 3. values
        for key, src in other.custom_attributes.items():
            dst = self.custom_attributes[key]
            if src.is_custom_frequency:
                n_src = other._custom_frequency_row_count(src.frequency)
                rows = list(src.values)[:n_src] + [None] * max(0, n_src - len(src.values))
                new_vals = self._remap_reference_values(src, rows, list(range(n_src)), context_base)
                base = custom_offsets.get(src.frequency, 0)
                del dst.values[base:]
                dst.values.extend([None] * (base - len(dst.values)))
                dst.values.extend(new_vals)
                continue
            freq = src.frequency
            if freq == AttributeFrequency.ONCE:
                for i, v in src.values.items():
                    dst.values.setdefault(i, v)
                continue
            if freq == AttributeFrequency.WORLD:
                for i, v in src.values.items():
                    target = (world + i) if world >= 0 else i
                    if world >= 0:
                        dst.values[target] = v
                    else:
                        dst.values.setdefault(target, v)
                continue
            offset = entity_offsets.get(_OFFSET_KEYS.get(freq, (freq.name.lower(),))[0], 0)
            ref = _normalized_reference(src.references)
            if ref is not None and ref[0] != "world" or src.reference_value_transformer is not None:
                # every source entity refers to a source-local index (defaults included): densify
                n_src = other._custom_entity_count(freq)
                indices = sorted(set(range(n_src)) | set(src.values))
                vals = [src.values.get(i, src.default) for i in indices]
            else:
                indices = sorted(src.values)
                vals = [src.values[i] for i in indices]
            new_vals = self._remap_reference_values(src, vals, indices, context_base)
            for i, v in zip(indices, new_vals):
                dst.values[i + offset] = v
        # 4. row counts
        for key in other.custom_frequencies:
            self._custom_frequency_counts[key] = custom_offsets.get(key, 0) + other._custom_frequency_row_count(key)

    def _remap_reference_values(
        self, attr: CustomAttribute, values: list[Any], row_indices: list[int], context_base: dict
    ) -> list[Any]:
        if attr.reference_value_transformer is not None:
            ctx = dict(context_base)
            ctx["row_indices"] = (
                range(row_indices[0], row_indices[-1] + 1)
                if row_indices and row_indices == list(range(row_indices[0], row_indices[-1] + 1))
                else list(row_indices)
            )
            out = list(attr.reference_value_transformer(list(values), ctx))
            if len(out) != len(values):
                raise ValueError(
                    f"reference_value_transformer of custom attribute '{attr.key}' returned {len(out)} values "
                    f"for {len(values)} inputs"
                )
            return out
        ref = _normalized_reference(attr.references)
        if ref is None:
            return list(values)
        kind, target = ref
        if kind == "world":
            return [context_base["world"] for _ in values]
        if kind == "builtin":
            if target == AttributeFrequency.WORLD:
                return [context_base["world"] for _ in values]
            off = context_base["entity_offsets"].get(_OFFSET_KEYS.get(target, (target.name.lower(),))[0], 0)
        else:
            if target not in context_base["custom_frequency_offsets"]:
                raise ValueError(
                    f"Custom attribute '{attr.key}' references custom frequency '{target}', which is not registered"
                )
            off = context_base["custom_frequency_offsets"][target]
        if off == 0:
            return list(values)
        return [_offset_value(v, off) for v in values]

    # -- finalize ---------------------------------------------------------------------------------

    def _finalize_custom_attributes(self, model, device, requires_grad: bool) -> None:
        """Build the custom attribute arrays and attach them to ``model``.

        Sets on the model: the arrays (``model.<name>`` / ``model.<namespace>.<name>``, for every
        assignment: the model copy of STATE / CONTROL / CONTACT attributes is the initial value),
        ``attribute_frequency`` / ``attribute_assignment`` (``{key: ...}``, merged into existing
        dicts), ``custom_frequency_counts``, ``custom_frequency_label_attributes``,
        ``custom_frequency_articulation`` (``{key: wp.array(int32)}`` for frequencies with an owner),
        ``custom_attribute_keys`` and the initializers ``_init_custom_state``,
        ``_init_custom_control`` and ``_init_custom_contacts`` (callables taking the new object).
        """
        self._check_custom_frequency_counts()
        counts: dict[str, int] = {key: self._custom_frequency_row_count(key) for key in self.custom_frequencies}
        owners: dict[str, list[tuple[CustomAttribute, Any]]] = {"state": [], "control": [], "contacts": []}
        freq_map = getattr(model, "attribute_frequency", None)
        if not isinstance(freq_map, dict):
            freq_map = {}
        assign_map = getattr(model, "attribute_assignment", None)
        if not isinstance(assign_map, dict):
            assign_map = {}
        for key, attr in self.custom_attributes.items():
            if attr.is_custom_frequency:
                count = counts.get(attr.frequency, 0)
                if len(attr.values) != count:
                    warnings.warn(
                        f"Custom attribute '{key}' has {len(attr.values)} values but frequency '{attr.frequency}' "
                        f"expects {count}. Missing values will be filled with defaults.",
                        CustomAttributeWarning,
                        stacklevel=3,
                    )
            else:
                count = self._model_entity_count(model, attr.frequency)
                beyond = [i for i in attr.values if not 0 <= i < count]
                if beyond:
                    warnings.warn(
                        f"Custom attribute '{key}' has values for {attr.frequency.name} indices {sorted(beyond)[:5]} "
                        f"but the model has {count}; they are dropped.",
                        CustomAttributeWarning,
                        stacklevel=3,
                    )
            array = attr.build_array(count, device=device, requires_grad=requires_grad)
            _attach(model, attr, array, "model")
            freq_map[key] = attr.frequency
            assign_map[key] = attr.assignment
            if attr.assignment == AttributeAssignment.STATE:
                owners["state"].append((attr, array))
            elif attr.assignment == AttributeAssignment.CONTROL:
                owners["control"].append((attr, array))
            elif attr.assignment == AttributeAssignment.CONTACT:
                owners["contacts"].append((attr, array))
        model.attribute_frequency = freq_map
        model.attribute_assignment = assign_map
        model.custom_frequency_counts = counts
        model.custom_frequency_label_attributes = {
            key: f.label_attribute
            for key, f in self.custom_frequencies.items()
            if f.label_attribute is not None and f.label_attribute in self.custom_attributes
        }
        model.custom_frequency_articulation = self._custom_frequency_owners(counts, device)
        model.custom_attribute_keys = list(self.custom_attributes)
        model._init_custom_state = _make_initializer(owners["state"], "state")
        model._init_custom_control = _make_initializer(owners["control"], "control")
        model._init_custom_contacts = _make_initializer(owners["contacts"], "contacts")
        cls = type(model)
        if not hasattr(cls, "get_custom_frequency_count") and "get_custom_frequency_count" not in vars(model):
            model.get_custom_frequency_count = lambda frequency: _model_get_custom_frequency_count(model, frequency)
        if not hasattr(cls, "get_attribute_frequency") and "get_attribute_frequency" not in vars(model):
            model.get_attribute_frequency = lambda name: _model_get_attribute_frequency(model, name)

    def _model_entity_count(self, model, frequency: AttributeFrequency) -> int:
        if frequency == AttributeFrequency.ONCE:
            return 1
        if frequency == AttributeFrequency.WORLD:
            n = getattr(model, "world_count", None)
            if n is None:
                n = self._custom_entity_count(frequency)
            return max(int(n), 1)
        return self._custom_entity_count(frequency)

    def _custom_frequency_owners(self, counts: dict[str, int], device) -> dict[str, wp.array]:
        out = {}
        for key, freq in self.custom_frequencies.items():
            owner = None
            if freq.articulation_owner_resolver is not None:
                owner = [int(a) for a in freq.articulation_owner_resolver(self)]
            elif freq.articulation_owner_attribute is not None:
                attr = self.custom_attributes.get(freq.articulation_owner_attribute)
                if attr is not None:
                    owner = [int(v) for v in np.asarray(attr.build_numpy(counts.get(key, 0))).reshape(-1)]
            if owner is None:
                continue
            if len(owner) != counts.get(key, 0):
                raise ValueError(
                    f"articulation owners of custom frequency '{key}' have {len(owner)} entries, expected "
                    f"{counts.get(key, 0)}"
                )
            out[key] = wp.array(np.asarray(owner, dtype=np.int32), dtype=wp.int32, device=device)
        return out


def _offset_value(value: Any, offset: int) -> Any:
    """Add ``offset`` to every non-negative index in ``value`` (negative entries are sentinels)."""
    if value is None:
        return None
    if np.ndim(value) == 0:
        v = int(value)
        return v + offset if v >= 0 else v
    arr = np.asarray(value, dtype=np.int64)
    arr = np.where(arr >= 0, arr + offset, arr)
    return tuple(int(x) for x in arr.reshape(-1)) if arr.ndim == 1 else arr.tolist()

"""Schema resolvers: solver-specific USD attributes (``newton:*``, ``physx*:*``, ``mjc:*``) read by key.

UsdPhysics describes bodies, shapes and joints, but many simulation parameters (armature, contact
margins, solver iterations, ...) are authored with solver-specific schemas. A *schema resolver*
maps an armillary key (``"armature"``, ``"margin"``, ...) within a prim category (:class:`PrimType`)
to the USD attribute(s) of one schema family. :func:`resolve_value` asks a list of resolvers in
priority order and returns the first *authored* value.

Units: resolvers return raw authored values, in the units of the authoring schema; conversions
(stage units, degrees to radians, ...) are the caller's. The exceptions, where a schema's value
has a different *meaning* than the key's, use a transformer or getter and are listed on each
resolver class.

Every resolver also collects the authored attributes of its namespaces per prim
(:meth:`SchemaResolver.collect_prim_attrs`), which the importer returns as
``result["schema_attrs"][resolver.name][prim_path] = {attribute name: value}``
(see :func:`collect_schema_attrs`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Sequence
from enum import IntEnum
from typing import Any, ClassVar

__all__ = [
    "PrimType",
    "SchemaResolver",
    "SchemaResolverMjc",
    "SchemaResolverNewton",
    "SchemaResolverPhysx",
    "collect_schema_attrs",
    "default_resolvers",
    "resolve_value",
]


class PrimType(IntEnum):
    """Category of a USD prim whose solver-specific attributes a resolver maps."""

    SCENE = 0
    """a ``PhysicsScene`` prim."""
    JOINT = 1
    """a ``PhysicsJoint`` prim (any joint type)."""
    SHAPE = 2
    """a collision shape (``PhysicsCollisionAPI``)."""
    BODY = 3
    """a rigid body (``PhysicsRigidBodyAPI``)."""
    MATERIAL = 4
    """a physics material (``PhysicsMaterialAPI``)."""
    ACTUATOR = 5
    """an actuator prim (e.g. ``MjcActuator``)."""
    ARTICULATION = 6
    """an articulation root (``PhysicsArticulationRootAPI``)."""


def _authored(prim, name: str) -> Any:
    """Value of attribute ``name`` when it is authored on ``prim``, else None."""
    attr = prim.GetAttribute(name)
    if not attr or not attr.HasAuthoredValue():
        return None
    return attr.Get()


def _finite_or_none(value: Any) -> Any:
    """``value`` unless it is a non-finite float (PhysX's ``-inf`` = "auto" sentinel)."""
    if value is None:
        return None
    try:
        return value if math.isfinite(float(value)) else None
    except (TypeError, ValueError):
        return value


class SchemaResolver:
    """Base class mapping armillary keys to the USD attributes of one schema family.

    Subclasses set ``name`` (the key of their entry in ``result["schema_attrs"]``), ``mapping``
    (``{PrimType: {key: SchemaAttribute}}``) and optionally ``extra_attr_namespaces`` (further
    namespaces whose authored attributes :meth:`collect_prim_attrs` returns, besides
    ``"<name>:*"`` and the attributes named in ``mapping``).
    """

    @dataclasses.dataclass(frozen=True)
    class SchemaAttribute:
        """A USD attribute standing for one armillary key.

        Attributes:
            name: USD attribute name (the primary one when ``usd_value_getter`` is set).
            default: the schema's fallback value (documentation only; :meth:`get_value` returns
                authored values only).
            usd_value_transformer: ``f(raw value) -> value`` applied to an authored value.
            usd_value_getter: ``f(prim) -> value | None`` used instead of reading ``name``
                (values derived from several attributes).
            attribute_names: the attributes the getter reads (default ``[name]``).
        """

        name: str
        default: Any | None = None
        usd_value_transformer: Callable[[Any], Any] | None = None
        usd_value_getter: Callable[[Any], Any] | None = None
        attribute_names: Sequence[str] = ()

    name: ClassVar[str] = ""
    mapping: ClassVar[dict[PrimType, dict[str, SchemaResolver.SchemaAttribute]]] = {}
    extra_attr_namespaces: ClassVar[list[str]] = []
    deformable_attr_namespaces: ClassVar[list[str]] = []

    def __init__(self) -> None:
        names: set[str] = set()
        for table in self.mapping.values():
            for spec in table.values():
                names.update(spec.attribute_names or (spec.name,))
        self._solver_attributes = names
        self._prefixes = tuple(f"{ns}:" for ns in ([self.name] if self.name else []) + list(self.extra_attr_namespaces))

    def get_value(self, prim, prim_type: PrimType, key: str) -> Any | None:
        """Authored value of ``key`` for ``prim`` (transformed), or None when not authored.

        Args:
            prim: the USD prim (``Usd.Prim``).
            prim_type: its category.
            key: armillary key within the category (see the resolver's ``mapping``).
        """
        spec = self.mapping.get(PrimType(prim_type), {}).get(key)
        if spec is None or not prim:
            return None
        if spec.usd_value_getter is not None:
            value = spec.usd_value_getter(prim)
        else:
            value = _authored(prim, spec.name)
        if value is None:
            return None
        if spec.usd_value_transformer is not None:
            value = spec.usd_value_transformer(value)
        return value

    def collect_prim_attrs(self, prim) -> dict[str, Any]:
        """Authored attributes of ``prim`` in this resolver's namespaces, ``{name: raw value}``.

        A time-sampled attribute without a default value is reported with value None.
        """
        out: dict[str, Any] = {}
        if not prim:
            return out
        for attr in prim.GetAuthoredAttributes():
            name = attr.GetName()
            if name.startswith(self._prefixes) or name in self._solver_attributes:
                out[name] = attr.Get()
        return out

    def validate_custom_attributes(self, builder) -> None:
        """Check that the custom attributes this resolver needs are declared on ``builder``.

        Called by the importer before parsing; the base implementation accepts every builder.
        """

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


_A = SchemaResolver.SchemaAttribute


def resolve_value(resolvers: Iterable[SchemaResolver], prim, prim_type: PrimType, key: str, default: Any = None) -> Any:
    """First authored value of ``key`` among ``resolvers`` (priority order), else ``default``."""
    for resolver in resolvers:
        value = resolver.get_value(prim, prim_type, key)
        if value is not None:
            return value
    return default


def default_resolvers() -> list[SchemaResolver]:
    """Resolvers used by ``add_usd(schema_resolvers=None)``: the project's own ``newton:*`` schema."""
    return [SchemaResolverNewton()]


def collect_schema_attrs(
    resolvers: Iterable[SchemaResolver], prims: Iterable, out: dict | None = None
) -> dict[str, dict[str, dict[str, Any]]]:
    """Collect ``{resolver.name: {prim path: {attribute: value}}}`` for ``prims`` (updates ``out``).

    Every given prim gets an entry for every resolver, empty when nothing is authored (the shape of
    the reference engine's ``result["schema_attrs"]``).
    """
    out = {} if out is None else out
    resolvers = list(resolvers)
    for r in resolvers:
        out.setdefault(r.name, {})
    for prim in prims:
        path = str(prim.GetPath())
        for r in resolvers:
            out[r.name][path] = r.collect_prim_attrs(prim)
    return out


# ---------------------------------------------------------------------------------------------- newton


class SchemaResolverNewton(SchemaResolver):
    """The project's own schema (``newton:*``: NewtonSceneAPI, NewtonJointAPI, NewtonCollisionAPI, ...).

    Values are returned as authored: NewtonJointAPI angular values (``damping``, ``velocity_limit``,
    ``limit_ke``, ``limit_kd``) are per degree for angular DOFs; ``-inf`` sentinels ("engine
    default") and ``inf`` ("unlimited") are returned as they are.
    """

    name: ClassVar[str] = "newton"
    mapping: ClassVar[dict] = {
        PrimType.SCENE: {
            "max_solver_iterations": _A("newton:maxSolverIterations", -1),
            "time_steps_per_second": _A("newton:timeStepsPerSecond", 1000),
            "gravity_enabled": _A("newton:gravityEnabled", True),
        },
        PrimType.JOINT: {
            "armature": _A("newton:armature", 0.0),
            "damping": _A("newton:damping", None),
            "friction": _A("newton:friction", 0.0),
            "limit_ke": _A("newton:limitStiffness", None),
            "limit_kd": _A("newton:limitDamping", None),
            "velocity_limit": _A("newton:velocityLimit", math.inf),
            # per-axis forms (D6 joints)
            **{
                f"limit_{axis}_{k}": _A(f"newton:{axis}:{attr}", None)
                for axis in ("linear", "angular", "rotX", "rotY", "rotZ")
                for k, attr in (("ke", "limitStiffness"), ("kd", "limitDamping"))
            },
            **{
                f"{axis}_{q}": _A(f"newton:{axis}:{q}", 0.0)
                for q in ("position", "velocity")
                for axis in ("angular", "linear", "rotX", "rotY", "rotZ")
            },
        },
        PrimType.SHAPE: {
            "max_hull_vertices": _A("newton:maxHullVertices", -1),
            "margin": _A("newton:contactMargin", 0.0),
            "gap": _A("newton:contactGap", -math.inf),
            "collision_group": _A("newton:collision_group", None),
            "is_sensor": _A("newton:is_sensor", False),
            "ke": _A("newton:contact_ke", None),
            "kd": _A("newton:contact_kd", None),
            "kf": _A("newton:contact_kf", None),
            "ka": _A("newton:contact_ka", None),
            "sdf_max_resolution": _A("newton:sdfMaxResolution", -math.inf),
            "sdf_narrow_band_inner": _A("newton:sdfNarrowBandInner", -math.inf),
            "sdf_narrow_band_outer": _A("newton:sdfNarrowBandOuter", -math.inf),
            "sdf_target_voxel_size": _A("newton:sdfTargetVoxelSize", -math.inf),
            "sdf_texture_format": _A("newton:sdfTextureFormat", None),
            "sdf_padding": _A("newton:sdfPadding", -math.inf),
            "hydroelastic_enabled": _A("newton:hydroelasticEnabled", None),
            "kh": _A("newton:hydroelasticStiffness", -math.inf),
            "mass_model": _A("newton:massModel", "solid"),
            "shell_thickness": _A("newton:shellThickness", -math.inf),
        },
        PrimType.BODY: {},
        PrimType.ARTICULATION: {
            "self_collision_enabled": _A("newton:selfCollisionEnabled", True),
            "joints_add_mobility": _A("newton:jointsAddMobility", False),
        },
        PrimType.MATERIAL: {
            "mu_torsional": _A("newton:torsionalFriction", 0.005),
            "mu_rolling": _A("newton:rollingFriction", 0.0001),
            "ke": _A("newton:contactStiffness", None),
            "kd": _A("newton:contactDamping", None),
            "kf": _A("newton:contactFrictionGain", None),
            "ka": _A("newton:contactAdhesion", None),
        },
        PrimType.ACTUATOR: {},
    }


# ---------------------------------------------------------------------------------------------- physx


def _physx_gap(prim) -> float | None:
    """PhysX ``contactOffset - restOffset`` (both authored and finite), the armillary contact gap."""
    contact = _finite_or_none(_authored(prim, "physxCollision:contactOffset"))
    rest = _finite_or_none(_authored(prim, "physxCollision:restOffset"))
    if contact is None or rest is None:
        return None
    return float(contact) - float(rest)


def _physx_max_hull_vertices(prim) -> int | None:
    """``hullVertexLimit`` of the convex-hull schema (of the decomposition schema for decompositions)."""
    approx = _authored(prim, "physics:approximation")
    if approx is not None and str(approx) == "convexDecomposition":
        value = _authored(prim, "physxConvexDecompositionCollision:hullVertexLimit")
        if value is not None:
            return value
    return _authored(prim, "physxConvexHullCollision:hullVertexLimit")


class SchemaResolverPhysx(SchemaResolver):
    """PhysX schemas (``physxScene:*``, ``physxJoint:*``, ``physxLimit:*``, ``physxCollision:*``, ...).

    Raw values, except:

    * ``gravity_enabled`` reads ``physxRigidBody:disableGravity`` on the scene prim and negates it;
    * ``margin`` is ``physxCollision:restOffset`` with the ``-inf`` ("auto") sentinel read as not
      authored; ``gap`` is ``contactOffset - restOffset`` (None unless both are authored and finite);
    * ``max_hull_vertices`` reads the decomposition schema's limit for ``convexDecomposition`` shapes.

    PhysX angular units match NewtonJointAPI (``maxJointVelocity`` in deg/s, angular limit stiffness
    and damping per degree), ``time_steps_per_second`` is a rate (Hz) like ``newton:timeStepsPerSecond``.
    """

    name: ClassVar[str] = "physx"
    extra_attr_namespaces: ClassVar[list[str]] = [
        "physxScene",
        "physxRigidBody",
        "physxCollision",
        "physxConvexHullCollision",
        "physxConvexDecompositionCollision",
        "physxTriangleMeshCollision",
        "physxTriangleMeshSimplificationCollision",
        "physxSDFMeshCollision",
        "physxMaterial",
        "physxJoint",
        "physxLimit",
        "physxArticulation",
        "state",
        "drive",
    ]
    deformable_attr_namespaces: ClassVar[list[str]] = ["omniphysics", "physxDeformableBody"]
    mapping: ClassVar[dict] = {
        PrimType.SCENE: {
            "max_solver_iterations": _A("physxScene:maxVelocityIterationCount", 255),
            "time_steps_per_second": _A("physxScene:timeStepsPerSecond", 60),
            "gravity_enabled": _A("physxRigidBody:disableGravity", False, usd_value_transformer=lambda v: not bool(v)),
        },
        PrimType.JOINT: {
            "armature": _A("physxJoint:armature", 0.0),
            "velocity_limit": _A("physxJoint:maxJointVelocity", None),
            **{
                f"limit_{axis}_{k}": _A(f"physxLimit:{axis}:{attr}", 0.0)
                for axis in ("transX", "transY", "transZ", "linear", "angular", "rotX", "rotY", "rotZ")
                for k, attr in (("ke", "stiffness"), ("kd", "damping"))
            },
            **{
                f"{axis}_{q}": _A(f"state:{axis}:physics:{q}", 0.0)
                for q in ("position", "velocity")
                for axis in ("angular", "linear", "rotX", "rotY", "rotZ", "transX", "transY", "transZ")
            },
        },
        PrimType.SHAPE: {
            "max_hull_vertices": _A(
                "physxConvexHullCollision:hullVertexLimit",
                64,
                usd_value_getter=_physx_max_hull_vertices,
                attribute_names=(
                    "physxConvexHullCollision:hullVertexLimit",
                    "physxConvexDecompositionCollision:hullVertexLimit",
                ),
            ),
            "convex_decomposition_max_hulls": _A("physxConvexDecompositionCollision:maxConvexHulls", 32),
            "margin": _A("physxCollision:restOffset", 0.0, usd_value_transformer=_finite_or_none),
            "gap": _A(
                "physxCollision:contactOffset",
                -math.inf,
                usd_value_getter=_physx_gap,
                attribute_names=("physxCollision:contactOffset", "physxCollision:restOffset"),
            ),
        },
        PrimType.MATERIAL: {
            "ke": _A("physxMaterial:compliantContactStiffness", None),
            "kd": _A("physxMaterial:compliantContactDamping", None),
        },
        PrimType.BODY: {
            "rigid_body_linear_damping": _A("physxRigidBody:linearDamping", 0.0),
            "rigid_body_angular_damping": _A("physxRigidBody:angularDamping", 0.05),
        },
        PrimType.ARTICULATION: {
            "self_collision_enabled": _A("physxArticulation:enabledSelfCollisions", True),
        },
    }


# ---------------------------------------------------------------------------------------------- mjc


def _mjc_timestep_to_rate(value) -> int | None:
    """``mjc:option:timestep`` (seconds) as steps per second (rounded to the nearest integer)."""
    dt = float(value)
    if not math.isfinite(dt) or dt <= 0.0:
        return None
    return round(1.0 / dt)


def _mjc_shellinertia(value) -> str:
    return "shell" if bool(value) else "solid"


def solref_to_stiffness(solref) -> float | None:
    """Contact stiffness of a MuJoCo ``solref``: ``1/(timeconst^2 dampratio^2)``, or ``-solref[0]`` (direct)."""
    tc, dr = float(solref[0]), float(solref[1])
    if tc < 0.0:
        return -tc
    if tc == 0.0 or dr == 0.0:
        return None
    return 1.0 / (tc * tc * dr * dr)


def solref_to_damping(solref) -> float | None:
    """Contact damping of a MuJoCo ``solref``: ``2/timeconst``, or ``-solref[1]`` (direct)."""
    tc, dr = float(solref[0]), float(solref[1])
    if tc < 0.0:
        return -dr
    if tc == 0.0:
        return None
    return 2.0 / tc


def _mjc_effort_limit(prim) -> float | None:
    """Joint effort limit from ``mjc:actuatorfrcrange`` (largest magnitude), None when not limited."""
    limited = _authored(prim, "mjc:actuatorfrclimited")
    if limited is not None and str(limited).lower() in ("false", "0"):
        return None
    lo = _authored(prim, "mjc:actuatorfrcrange:min")
    hi = _authored(prim, "mjc:actuatorfrcrange:max")
    if lo is None and hi is None:
        return None
    return max(abs(float(v)) for v in (lo, hi) if v is not None)


def _is_linear_joint(prim) -> bool:
    return prim.GetTypeName() == "PhysicsPrismaticJoint"


def _mjc_damping_newton_units(prim) -> float | None:
    """``mjc:damping`` (per radian for angular joints) in NewtonJointAPI units (per degree)."""
    value = _authored(prim, "mjc:damping")
    if value is None:
        return None
    return float(value) if _is_linear_joint(prim) else float(value) * (math.pi / 180.0)


def _mjc_solref_getter(kind: str) -> Callable[[Any], float | None]:
    convert = solref_to_stiffness if kind == "ke" else solref_to_damping

    def _getter(prim):
        value = _authored(prim, "mjc:solref")
        return None if value is None else convert(value)

    _getter.__name__ = f"_mjc_material_{kind}"
    return _getter


class SchemaResolverMjc(SchemaResolver):
    """MuJoCo's USD schema (``mjc:*``: MjcSceneAPI, MjcJointAPI, MjcCollisionAPI, MjcActuator, ...).

    Raw values, except:

    * ``time_steps_per_second`` converts ``mjc:option:timestep`` (s) to a rate, ``round(1/dt)``;
    * ``mass_model`` maps ``mjc:shellinertia`` to ``"shell"`` / ``"solid"``;
    * ``ke`` / ``kd`` (shapes and materials) convert ``mjc:solref`` to a stiffness / damping;
    * ``effort_limit`` is the largest magnitude of ``mjc:actuatorfrcrange`` (None when
      ``mjc:actuatorfrclimited`` is false);
    * ``damping`` is ``mjc:damping`` expressed in NewtonJointAPI units (per degree, except on
      prismatic joints) so that callers convert it like ``newton:damping``; ``damping_per_rad`` is
      the raw value (MuJoCo units).

    Passive ``stiffness`` (``mjc:stiffness``) is per radian for angular joints (MuJoCo units);
    ``springref`` / ``rest_q`` (``mjc:springref``) and ``ref`` (``mjc:ref``) are in degrees for
    angular joints, as authored.
    """

    name: ClassVar[str] = "mjc"
    mapping: ClassVar[dict] = {
        PrimType.SCENE: {
            "max_solver_iterations": _A("mjc:option:iterations", 100),
            "time_steps_per_second": _A("mjc:option:timestep", 0.002, usd_value_transformer=_mjc_timestep_to_rate),
            "gravity_enabled": _A("mjc:flag:gravity", True),
        },
        PrimType.JOINT: {
            "armature": _A("mjc:armature", 0.0),
            "damping": _A("mjc:damping", None, usd_value_getter=_mjc_damping_newton_units),
            "damping_per_rad": _A("mjc:damping", None),
            "stiffness": _A("mjc:stiffness", None),
            "springref": _A("mjc:springref", None),
            "rest_q": _A("mjc:springref", None),
            "ref": _A("mjc:ref", None),
            "friction": _A("mjc:frictionloss", 0.0),
            "effort_limit": _A(
                "mjc:actuatorfrcrange:min",
                None,
                usd_value_getter=_mjc_effort_limit,
                attribute_names=("mjc:actuatorfrcrange:min", "mjc:actuatorfrcrange:max", "mjc:actuatorfrclimited"),
            ),
        },
        PrimType.SHAPE: {
            "max_hull_vertices": _A("mjc:maxhullvert", -1),
            "margin": _A("mjc:margin", 0.0),
            "gap": _A("mjc:gap", 0.0),
            "mass_model": _A("mjc:shellinertia", False, usd_value_transformer=_mjc_shellinertia),
            "ke": _A("mjc:solref", None, usd_value_transformer=solref_to_stiffness),
            "kd": _A("mjc:solref", None, usd_value_transformer=solref_to_damping),
        },
        PrimType.MATERIAL: {
            "mu_torsional": _A("mjc:torsionalfriction", 0.005),
            "mu_rolling": _A("mjc:rollingfriction", 0.0001),
            "priority": _A("mjc:priority", 0),
            "weight": _A("mjc:solmix", 1.0),
            "ke": _A("mjc:solref", None, usd_value_getter=_mjc_solref_getter("ke")),
            "kd": _A("mjc:solref", None, usd_value_getter=_mjc_solref_getter("kd")),
        },
        PrimType.ACTUATOR: {
            "ctrl_low": _A("mjc:ctrlRange:min", 0.0),
            "ctrl_high": _A("mjc:ctrlRange:max", 0.0),
            "force_low": _A("mjc:forceRange:min", 0.0),
            "force_high": _A("mjc:forceRange:max", 0.0),
            "act_low": _A("mjc:actRange:min", 0.0),
            "act_high": _A("mjc:actRange:max", 0.0),
            "length_low": _A("mjc:lengthRange:min", 0.0),
            "length_high": _A("mjc:lengthRange:max", 0.0),
            "gainPrm": _A("mjc:gainPrm", [1, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            "gainType": _A("mjc:gainType", "fixed"),
            "biasPrm": _A("mjc:biasPrm", [0] * 10),
            "biasType": _A("mjc:biasType", "none"),
            "dynPrm": _A("mjc:dynPrm", [1, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            "dynType": _A("mjc:dynType", "none"),
            "gear": _A("mjc:gear", [1, 0, 0, 0, 0, 0]),
        },
    }

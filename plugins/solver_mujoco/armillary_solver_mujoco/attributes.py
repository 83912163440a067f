"""The ``mujoco`` namespace of custom attributes that :class:`SolverMuJoCo` reads.

Declared on a builder by ``SolverMuJoCo.register_custom_attributes(builder)`` (the MJCF importer
calls it for every installed plugin before parsing, so imported models carry the XML values).
Each attribute names the MJCF attribute it is read from and the MjcSchema USD attribute
(``mjc:*``, as MuJoCo's USD export writes it) a USD import reads; ``ONCE`` attributes come from
``<option>`` (and ``<option><flag>`` for the ``flag_*`` ones). Entities without an authored
value get MuJoCo's own default, so a model built in code converts like the XML MuJoCo would
compile.
"""

from __future__ import annotations

import warp as wp

vec5 = wp.types.vector(length=5, dtype=wp.float64)

INTEGRATORS = {"euler": 0, "rk4": 1, "implicit": 2, "implicitfast": 3}
CONES = {"pyramidal": 0, "elliptic": 1}
SOLVERS = {"pgs": 0, "cg": 1, "newton": 2}
FLAGS = ("contact", "constraint", "equality", "frictionloss", "limit", "spring", "damper", "gravity",
         "clampctrl", "warmstart", "actuation", "eulerdamp", "filterparent", "refsafe", "sensor", "midphase",
         "nativeccd", "multiccd", "island", "autoreset")  # fmt: skip
"""MJCF ``<flag>`` names of MuJoCo's disable bits (``mjDSBL_<NAME>``), each a ``mujoco:flag_<name>``
ONCE attribute (``True`` = enabled, MuJoCo's default)."""

DEFAULT_SOLREF = (0.02, 1.0)
DEFAULT_SOLIMP = (0.9, 0.95, 0.001, 0.5, 2.0)


def parse_bool(value, context=None) -> bool:
    """MJCF/USD boolean: ``"true"``/``"false"`` (any case), integers, or booleans."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return bool(value)
    text = str(value).strip().lower()
    if text in ("true", "1", "enable"):
        return True
    if text in ("false", "0", "disable"):
        return False
    raise ValueError(f"expected a boolean (true/false), got {value!r}")


def _keyword(table: dict, what: str):
    def parse(value, context=None) -> int:
        if isinstance(value, (int,)) and value in table.values():
            return int(value)
        key = str(value).strip().lower()
        if key not in table:
            raise ValueError(f"unknown {what} {value!r}; allowed: {', '.join(table)}")
        return table[key]

    parse.__name__ = f"parse_{what}"
    return parse


parse_integrator = _keyword(INTEGRATORS, "integrator")
parse_cone = _keyword(CONES, "cone")
parse_solver = _keyword(SOLVERS, "solver")


def parse_solimp(value, context=None) -> tuple:
    """MuJoCo ``solimp``: 1 to 5 numbers; missing trailing ones take MuJoCo's defaults."""
    vals = [float(v) for v in (value.split() if isinstance(value, str) else value)]
    if not 1 <= len(vals) <= 5:
        raise ValueError(f"solimp needs 1 to 5 numbers, got {len(vals)}")
    return tuple(vals + list(DEFAULT_SOLIMP[len(vals):]))


def parse_solref(value, context=None) -> tuple:
    """MuJoCo ``solref``: 1 or 2 numbers; a missing second one takes MuJoCo's default."""
    vals = [float(v) for v in (value.split() if isinstance(value, str) else value)]
    if not 1 <= len(vals) <= 2:
        raise ValueError(f"solref needs 1 or 2 numbers, got {len(vals)}")
    return tuple(vals + list(DEFAULT_SOLREF[len(vals):]))


def parse_flag(value, context=None) -> bool:
    """``<flag name="enable|disable">``: True when enabled."""
    return parse_bool(value, context)


def register(builder) -> None:
    """Declare every ``mujoco:*`` attribute on ``builder`` (idempotent)."""
    from armillary.sim.custom_attributes import AttributeFrequency as F
    from armillary.sim.custom_attributes import CustomAttribute

    def add(name, freq, dtype, default, mjcf=None, transformer=None, usd=None):
        # usd: the MjcSchema attribute (mjc:*) a USD stage authors it as (default newton:mujoco:<name>)
        builder.add_custom_attribute(
            CustomAttribute(name=name, frequency=freq, dtype=dtype, default=default, namespace="mujoco",
                            mjcf_attribute_name=mjcf or name, mjcf_value_transformer=transformer,
                            usd_attribute_name=usd, usd_value_transformer=transformer)  # fmt: skip
        )

    # geoms
    add("condim", F.SHAPE, wp.int32, 3, usd="mjc:condim")
    add("geom_priority", F.SHAPE, wp.int32, 0, "priority", usd="mjc:priority")
    add("solref", F.SHAPE, wp.vec2d, DEFAULT_SOLREF, transformer=parse_solref, usd="mjc:solref")
    add("geom_solimp", F.SHAPE, vec5, DEFAULT_SOLIMP, "solimp", parse_solimp, usd="mjc:solimp")
    add("geom_solmix", F.SHAPE, wp.float64, 1.0, "solmix", usd="mjc:solmix")
    add("margin", F.SHAPE, wp.float64, 0.0)
    add("gap", F.SHAPE, wp.float64, 0.0)
    add("contype", F.SHAPE, wp.int32, 1, usd="mjc:contype")
    add("conaffinity", F.SHAPE, wp.int32, 1, usd="mjc:conaffinity")
    # joint DOFs
    add("solreflimit", F.JOINT_DOF, wp.vec2d, DEFAULT_SOLREF, transformer=parse_solref, usd="mjc:solreflimit")
    add("solimplimit", F.JOINT_DOF, vec5, DEFAULT_SOLIMP, transformer=parse_solimp, usd="mjc:solimplimit")
    add("solreffriction", F.JOINT_DOF, wp.vec2d, DEFAULT_SOLREF, transformer=parse_solref, usd="mjc:solreffriction")
    add("solimpfriction", F.JOINT_DOF, vec5, DEFAULT_SOLIMP, transformer=parse_solimp, usd="mjc:solimpfriction")
    add("limit_margin", F.JOINT_DOF, wp.float64, 0.0, "margin", usd="mjc:margin")
    # equality constraints made from joints (loop-closing joints, mimic followers): set by the
    # MJCF importer from the <equality> element, not read from <joint>
    add("eq_solref", F.JOINT, wp.vec2d, DEFAULT_SOLREF, "eq_solref", parse_solref)
    add("eq_solimp", F.JOINT, vec5, DEFAULT_SOLIMP, "eq_solimp", parse_solimp)
    # bodies
    add("gravcomp", F.BODY, wp.float64, 0.0, usd="mjc:gravcomp")
    # options (MJCF <option>)
    add("integrator", F.ONCE, wp.int32, 0, transformer=parse_integrator, usd="mjc:option:integrator")
    add("cone", F.ONCE, wp.int32, 0, transformer=parse_cone, usd="mjc:option:cone")
    add("solver", F.ONCE, wp.int32, 2, transformer=parse_solver, usd="mjc:option:solver")
    add("impratio", F.ONCE, wp.float64, 1.0, usd="mjc:option:impratio")
    add("iterations", F.ONCE, wp.int32, 100, usd="mjc:option:iterations")
    add("ls_iterations", F.ONCE, wp.int32, 50, usd="mjc:option:ls_iterations")
    add("tolerance", F.ONCE, wp.float64, 1.0e-8, usd="mjc:option:tolerance")
    add("ls_tolerance", F.ONCE, wp.float64, 0.01, usd="mjc:option:ls_tolerance")
    add("noslip_iterations", F.ONCE, wp.int32, 0, usd="mjc:option:noslip_iterations")
    add("density", F.ONCE, wp.float64, 0.0, usd="mjc:option:density")
    add("viscosity", F.ONCE, wp.float64, 0.0, usd="mjc:option:viscosity")
    add("wind", F.ONCE, wp.vec3d, (0.0, 0.0, 0.0), usd="mjc:option:wind")
    add("magnetic", F.ONCE, wp.vec3d, (0.0, -0.5, 0.0), usd="mjc:option:magnetic")
    for flag in FLAGS:
        add(f"flag_{flag}", F.ONCE, wp.bool, True, f"flag/{flag}", parse_flag, usd=f"mjc:flag:{flag}")
    from .tendons import register_tendon_attributes

    register_tendon_attributes(builder)
    from .pairs import register_pair_attributes

    register_pair_attributes(builder)

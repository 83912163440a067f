"""Names and references of an MJCF model, checked as MuJoCo's compiler checks them.

Every named element belongs to one namespace (bodies, joints, geoms, ...) where a name may appear
once; every attribute that names another element must name an existing one of the right kind.
References that a ``<default>`` class can set (a geom's material, mesh or hfield, ...) are checked by
the parser where the class chain is resolved.
"""

from __future__ import annotations

import os

_BODY_PARENTS = ("worldbody", "body", "frame")
# namespace of a named element, by (parent tag, tag); None as parent: any parent
_NAMESPACE = {
    **{(p, t): ns for p in _BODY_PARENTS for t, ns in (("body", "body"), ("joint", "joint"), ("freejoint", "joint"),
                                                        ("geom", "geom"), ("site", "site"), ("camera", "camera"),
                                                        ("light", "light"), ("flexcomp", "flex"))},
    **{("asset", t): t for t in ("mesh", "hfield", "skin", "texture", "material", "model")},
    ("contact", "pair"): "pair",
    ("contact", "exclude"): "exclude",
    ("equality", None): "equality",
    ("tendon", None): "tendon",
    ("actuator", None): "actuator",
    ("sensor", None): "sensor",
    ("custom", "numeric"): "numeric",
    ("custom", "text"): "text",
    ("custom", "tuple"): "tuple",
    ("keyframe", "key"): "key",
    ("deformable", "flex"): "flex",
    ("deformable", "skin"): "skin",
}  # fmt: skip
# assets named after their file when they have no name
_FILE_NAMED = ("mesh", "hfield", "skin", "texture", "model")

_ACTUATOR_REFS = {"joint": "joint", "jointinparent": "joint", "tendon": "tendon", "site": "site", "refsite": "site",
                  "body": "body", "slidersite": "site", "cranksite": "site"}  # fmt: skip
_SENSOR_REFS = {"site": "site", "joint": "joint", "tendon": "tendon", "actuator": "actuator", "body": "body",
                "camera": "camera", "geom1": "geom", "geom2": "geom", "body1": "body", "body2": "body",
                "subtree1": "body", "subtree2": "body", "geom": "geom", "mesh": "mesh"}  # fmt: skip
_OBJTYPES = {"body": "body", "xbody": "body", "geom": "geom", "site": "site", "camera": "camera", "joint": "joint",
             "tendon": "tendon", "actuator": "actuator"}  # fmt: skip
# references MuJoCo never takes from a <default> class, by (parent tag, tag); None as parent: any parent
_REFS = {
    ("equality", "connect"): {"body1": "body", "body2": "body", "site1": "site", "site2": "site"},
    ("equality", "weld"): {"body1": "body", "body2": "body", "site1": "site", "site2": "site"},
    ("equality", "joint"): {"joint1": "joint", "joint2": "joint"},
    ("equality", "tendon"): {"tendon1": "tendon", "tendon2": "tendon"},
    ("equality", "flex"): {"flex": "flex"},
    ("equality", "flexstrain"): {"flex": "flex"},
    ("contact", "pair"): {"geom1": "geom", "geom2": "geom"},
    ("contact", "exclude"): {"body1": "body", "body2": "body"},
    ("fixed", "joint"): {"joint": "joint"},
    ("spatial", "site"): {"site": "site"},
    ("spatial", "geom"): {"geom": "geom", "sidesite": "site"},
    ("actuator", None): _ACTUATOR_REFS,
    ("sensor", None): _SENSOR_REFS,
    **{(p, "camera"): {"target": "body"} for p in _BODY_PARENTS},
    **{(p, "light"): {"target": "body", "texture": "texture"} for p in _BODY_PARENTS},
    ("skin", "bone"): {"body": "body"},
}  # fmt: skip
# what each namespace is called in messages
_WHAT = {"equality": "equality constraint", "pair": "contact pair", "exclude": "contact exclude", "key": "keyframe"}


def _lookup(table, parent, tag):
    return table.get((parent, tag), table.get((parent, None)))


def _walk(root):
    """(parent tag, element) of every element outside ``<default>`` and ``<replicate>`` (whose names
    MuJoCo suffixes per copy)."""
    stack = [(root.tag, c) for c in reversed(list(root))]
    while stack:
        parent, el = stack.pop()
        if not isinstance(el.tag, str) or el.tag in ("default", "replicate"):
            continue
        yield parent, el
        stack.extend((el.tag, c) for c in reversed(list(el)))


def collect_names(root, loc) -> dict[str, dict[str, object]]:
    """namespace -> {name: element}; a name used twice in one namespace is an error naming both places."""
    names: dict[str, dict[str, object]] = {"body": {"world": None}}
    for parent, el in _walk(root):
        ns = _lookup(_NAMESPACE, parent, el.tag)
        if ns is None:
            continue
        name = el.get("name")
        if not name and ns in _FILE_NAMED and el.get("file"):
            name = os.path.splitext(os.path.basename(el.get("file")))[0]
        if not name:
            continue
        seen = names.setdefault(ns, {})
        if name in seen:
            first = seen[name]
            at = "it names the world body" if first is None else "first at {}:line {}".format(*loc.of(first))
            raise loc.error(el, f"{_WHAT.get(ns, ns)} name {name!r} is used twice ({at})")
        seen[name] = el
    return names


# references where an empty name is an error too (elsewhere it means "none": the world, no side site, ...)
_NAME_NEEDED = {("fixed", "joint"): ("joint",), ("spatial", "site"): ("site",), ("spatial", "geom"): ("geom",),
                ("contact", "pair"): ("geom1", "geom2"), ("contact", "exclude"): ("body1", "body2"),
                ("equality", "joint"): ("joint1",), ("equality", "tendon"): ("tendon1",)}  # fmt: skip
_TRANSMISSIONS = ("joint", "jointinparent", "tendon", "site", "body", "cranksite")


def check_references(root, loc, names) -> None:
    """Every attribute naming another element (outside ``<default>``) names an existing one; an actuator
    has exactly one transmission target."""
    replicated = any(True for _ in root.iter("replicate"))  # copies get suffixed names we do not generate
    for parent, el in _walk(root):
        refs = _lookup(_REFS, parent, el.tag) or {}
        needed = _SENSOR_REFS if parent == "sensor" else _NAME_NEEDED.get((parent, el.tag), ())
        for key, ns in refs.items():
            _check(el, key, el.get(key), ns, names, loc, replicated, key in needed)
        if parent in ("sensor", "tuple"):
            for key, tkey in (("objname", "objtype"), ("refname", "reftype")):
                ns = _OBJTYPES.get(el.get(tkey, ""))
                if ns is not None:
                    _check(el, key, el.get(key), ns, names, loc, replicated, key == "objname")
        if parent == "tendon" and el.tag == "fixed":
            seen = set()
            for c in el:
                if c.tag == "joint" and c.get("joint") in seen:
                    raise loc.error(c, f"joint {c.get('joint')!r} is repeated in a fixed tendon")
                seen.add(c.get("joint"))
        if parent == "actuator" and el.tag != "plugin":
            given = [k for k in _TRANSMISSIONS if k in el.attrib]
            if len(given) != 1 or not el.get(given[0]):
                got = f"got {', '.join(f'{k}={el.get(k)!r}' for k in given)}" if given else "got none"
                raise loc.error(el, f"an actuator needs exactly one transmission target ({', '.join(_TRANSMISSIONS)}); "
                                    f"{got}")  # fmt: skip


def _check(el, key, value, ns, names, loc, replicated, needed) -> None:
    if value is None or replicated or (value == "" and not needed):
        return
    if value not in names.get(ns, {}):
        raise loc.error(el, f"unknown {_WHAT.get(ns, ns)} {value!r} in {key}")


# the <size> attribute bounding the ``user`` values of each element kind, by (parent tag, tag)
_USER_SIZE = {
    **{(p, t): k for p in _BODY_PARENTS + ("default",) for t, k in (("joint", "nuser_jnt"), ("geom", "nuser_geom"),
                                                                     ("site", "nuser_site"), ("camera", "nuser_cam"))},
    **{(p, "body"): "nuser_body" for p in _BODY_PARENTS},
    ("tendon", None): "nuser_tendon",
    ("default", "tendon"): "nuser_tendon",
    ("actuator", None): "nuser_actuator",
    ("sensor", None): "nuser_sensor",
}  # fmt: skip


def check_user_counts(root, loc) -> None:
    """With ``<size nuser_jnt="n">`` (and the other ``nuser_*``), ``user`` attributes hold at most n values."""
    sizes = {}
    for s in root.iter("size"):
        sizes.update({k: int(v) for k, v in s.attrib.items() if k.startswith("nuser_")})
    if not any(n >= 0 for n in sizes.values()):
        return
    stack = [(root.tag, c) for c in root]
    while stack:
        parent, el = stack.pop()
        if not isinstance(el.tag, str):
            continue
        stack.extend((el.tag, c) for c in el)
        key = _USER_SIZE.get((parent, el.tag)) or _USER_SIZE.get((parent, None))
        if parent == "default" and el.tag in _ACTUATOR_DEFAULTS:
            key = "nuser_actuator"
        n = sizes.get(key, -1) if key else -1
        if n >= 0 and "user" in el.attrib and len(el.get("user").split()) > n:
            raise loc.error(el, f"user={el.get('user')!r} has {len(el.get('user').split())} values; <size {key}=\"{n}\"> "
                                f"allows {n}")  # fmt: skip


_ACTUATOR_DEFAULTS = ("general", "motor", "position", "velocity", "intvelocity", "damper", "cylinder", "muscle",
                      "adhesion", "dcmotor", "orientation", "pid")  # fmt: skip


def check_custom_and_visual(root, loc) -> None:
    """MuJoCo's checks of elements the importer does not use: ``<custom>`` fields and the ``<visual><map>``
    clipping plane."""
    for el in root.iter("numeric"):
        data = el.get("data", "").split()
        size = int(el.get("size")) if el.get("size", "").strip() else len(data)
        if size <= 0:
            raise loc.error(el, f"a custom numeric field needs a positive size or some data (size {size})")
        if len(data) > size:
            raise loc.error(el, f"data has {len(data)} values; size={size} allows {size}")
    for el in root.iter("text"):
        if not el.get("data"):
            raise loc.error(el, "a custom text field needs non-empty data")
    for el in root.iter("map"):
        if el.get("znear") is not None and not float(el.get("znear")) > 0:
            raise loc.error(el, f"znear={el.get('znear')!r} must be strictly positive")

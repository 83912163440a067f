"""MJCF (MuJoCo XML) importer serving :meth:`armillary.ModelBuilder.add_mjcf`.

Conventions (see the plugin README for the full list):

* **joint_q follows MuJoCo's qpos** for hinge and slide joints: ``q == qpos``, so the body sits at its
  XML pose when ``q == ref`` and the default ``joint_q`` is ``ref`` (MuJoCo's ``qpos0``). Joint limits,
  ``springref`` (-> ``joint_rest_q``) and joint-equality coefficients are in the same coordinate.
  Quaternions are stored xyzw (MuJoCo: wxyz); a free joint's ``joint_q`` is the body's world pose.
* Several joints in one body become one D6 joint when MuJoCo's composition equals a D6 (slides first, all
  hinges about the same anchor, hinge ``ref`` = 0); otherwise they are composed in XML order through
  massless intermediate links (labels ``"<body>/<joint>"``), each joint keeping its own anchor.
* Body frames are MuJoCo's body frames; masses, centers of mass and inertias are MuJoCo's compiled values
  (``inertiafromgeom``, ``boundmass``, ``boundinertia``, ``balanceinertia``, ``settotalmass``).
* Everything is built into a scratch builder and merged at the end: on error nothing is added.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable

import numpy as np
import warp as wp

from ._math import QI, Tf, axis_angle, mat2q, qmat, qmul, qnorm, quat_z_to, qrot
from ._refs import check_custom_and_visual, check_references, check_user_counts, collect_names
from ._schema import validate as validate_schema
from ._xml import Loc, MJCFFileNotFoundError, MJCFImportError, expand_includes, parse_xml, read_file

__all__ = ["add_mjcf", "MJCFImportError", "MJCFFileNotFoundError", "MJCFImportWarning", "mujoco_qpos_to_joint_q"]


class MJCFImportWarning(UserWarning):
    """An MJCF element or value the importer cannot represent (one warning per element kind)."""


_ACTUATOR_TAGS = ("general", "motor", "position", "velocity", "intvelocity", "damper", "cylinder", "muscle", "adhesion", "dcmotor",
                  "orientation", "pid")  # fmt: skip
_DEFAULT_BUCKET = {t: "actuator" for t in _ACTUATOR_TAGS}
_GEOM_TYPES = ("plane", "hfield", "sphere", "capsule", "ellipsoid", "cylinder", "box", "mesh", "sdf")
_SITE_TYPES = ("sphere", "capsule", "ellipsoid", "cylinder", "box")
_JOINT_TYPES = ("free", "ball", "slide", "hinge")
_ORIENT_KEYS = ("quat", "axisangle", "euler", "xyaxes", "zaxis")
# vector attributes MuJoCo reads "up to n" numbers into the value inherited from the default class
# chain: a class's friction="0.5" over "1 0.005 0.0001" gives "0.5 0.005 0.0001" (attributes that
# need all their numbers, e.g. pos, axis, range, rgba, and tendon springlength, whose single value
# means both, are replaced whole)
_PARTIAL_VECTORS = frozenset(("size", "friction", "solref", "solimp", "solreflimit", "solimplimit", "solreffriction",
                              "solimpfriction", "fluidcoef", "gainprm", "biasprm", "dynprm"))  # fmt: skip
_IGNORED_TOP = ("visual", "statistic", "size", "custom", "extension", "keyframe", "sensor", "deformable", "skin")
_MINVAL = 1e-15
_SOLREF0 = (0.02, 1.0)  # MuJoCo's defaults for missing trailing solref / solimp numbers
_SOLIMP0 = (0.9, 0.95, 0.001, 0.5, 2.0)


def _truthy(v: str | None, default: bool, loc: Loc, el, name: str) -> bool:
    if v is None:
        return default
    s = v.strip().lower()
    if s in ("true", "1"):
        return True
    if s in ("false", "0"):
        return False
    raise loc.error(el, f"attribute {name}={v!r} must be 'true' or 'false'")


def _custom_mjcf_names(builder) -> dict[str, set]:
    """tag -> MJCF attribute names that registered custom attributes read (accepted beyond MuJoCo's schema).

    The ``mujoco`` namespace is left out: its attributes mirror MuJoCo's own, which the schema lists."""
    from armillary.sim.custom_attributes import AttributeFrequency as F

    tags = {F.BODY: ("body",), F.SHAPE: ("geom", "site"), F.JOINT: ("joint",), F.JOINT_DOF: ("joint",),
            F.JOINT_COORD: ("joint",), F.ONCE: ("option",)}  # fmt: skip
    out: dict[str, set] = {}
    for attr in getattr(builder, "custom_attributes", {}).values():
        if attr.is_custom_frequency or attr.namespace == "mujoco" or attr.frequency not in tags:
            continue
        name = attr.mjcf_attribute_name
        if name and name.startswith("flag/"):
            out.setdefault("flag", set()).add(name[5:])
        elif name:
            for t in tags[attr.frequency]:
                out.setdefault(t, set()).add(name)
    return out


class _Attrs(dict):
    """Attribute values; ``origin[key] = (element, class)`` for values a ``<default>`` class set."""

    __slots__ = ("origin",)

    def __init__(self, *args):
        super().__init__(*args)
        self.origin: dict = {}


class _Compiler:
    def __init__(self):
        self.angle = math.pi / 180.0
        self.eulerseq = "xyz"
        self.meshdir = ""
        self.texturedir = ""
        self.assetdir = ""
        self.autolimits = True
        self.inertiafromgeom = "auto"
        self.inertiagrouprange = (0, 5)
        self.boundmass = 0.0
        self.boundinertia = 0.0
        self.balanceinertia = False
        self.settotalmass = -1.0


class _Joint:
    __slots__ = ("name", "type", "pos", "axis", "attrs", "el", "ref", "springref", "limited", "range", "stiffness",
                 "damping", "armature", "frictionloss", "effort", "cls")  # fmt: skip


class _Body:
    def __init__(self, name, el, parent, local: Tf, cls):
        self.name, self.el, self.parent, self.local = name, el, parent, local
        self.world = local if parent is None or parent.parent is None else None
        self.joints: list[_Joint] = []
        self.geoms: list[dict] = []
        self.sites: list[dict] = []
        self.inertial = None
        self.children: list[_Body] = []
        self.cls = cls
        self.mocap = False
        self.attrs = dict(el.attrib) if el is not None else {}
        self.mass, self.com, self.inertia = 0.0, np.zeros(3), np.zeros((3, 3))
        self.explicit_inertial = False
        self.index = -1  # armillary body index in the scratch builder
        self.merged_into = None  # collapse_fixed_joints


class _Parser:
    def __init__(self, builder, source, opts):
        self.builder = builder
        self.opts = opts
        self.loc = Loc()
        self.warn_seen: dict[str, list] = {}
        self.c = _Compiler()
        self.defaults: dict[str, dict] = {}
        self.meshes: dict[str, dict] = {}
        self.mesh_cache: dict[str, object] = {}
        self.hfields: dict[str, dict] = {}
        self.materials: dict[str, dict] = {}
        self.bodies_by_name: dict[str, _Body] = {}
        self.sites_by_name: dict[str, tuple] = {}
        self.named_joints: set[str] = set()  # joint names given in the file (generated ones are not MuJoCo names)
        self.all_bodies: list[_Body] = []
        self.cur = None  # the element being processed (named by unexpected errors)
        self._load(source)

    # ------------------------------------------------------------------ diagnostics
    def warn(self, key: str, el, message: str) -> None:
        f, ln = self.loc.of(el) if el is not None else (None, None)
        self.warn_seen.setdefault(key, []).append((f, ln, message))

    def flush_warnings(self) -> None:
        for key, items in self.warn_seen.items():
            f, ln, msg = items[0]
            more = f" ({len(items)} occurrences; first at {f}:{ln})" if len(items) > 1 else f" ({f}:{ln})"
            warnings.warn(f"MJCF import: {msg}{more}", MJCFImportWarning, stacklevel=5)

    def err(self, el, message: str):
        return self.loc.error(el, message)

    # ------------------------------------------------------------------ loading
    def _load(self, source):
        resolver = self.opts.get("path_resolver")
        if isinstance(source, (bytes, bytearray)):
            source = bytes(source).decode("utf-8", errors="replace")
        if isinstance(source, str) and source.lstrip().startswith("<"):
            self.file = "<string>"
            self.main_dir = os.getcwd()
            data = source
        else:
            try:
                path = os.fspath(source)
            except TypeError:
                raise TypeError(f"add_mjcf: source must be a file path or an MJCF XML string, got {type(source).__name__}") from None
            if isinstance(path, bytes):
                path = path.decode()
            self.file = path
            self.main_dir = os.path.dirname(os.path.abspath(path))
            data = read_file(path, "MJCF model")
        root = parse_xml(data, self.file, self.loc)
        if root.tag != "mujoco":
            raise self.err(root, f"the root element must be <mujoco>, got <{root.tag}>")
        expand_includes(root, self.file, self.loc, self.main_dir, resolver)
        validate_schema(root, self.loc, _custom_mjcf_names(self.builder))
        self.root = root
        self.model_name = root.get("model", "")

    # ------------------------------------------------------------------ numbers
    def attr_err(self, el, attrs, key, message: str):
        """The error for attribute ``key`` of ``el``; names the ``<default>`` entry that set it, if any."""
        origin = getattr(attrs, "origin", {}).get(key) if attrs is not None else None
        if origin is not None:
            return self.loc.error(el, message, origin=origin[0], origin_class=origin[1])
        return self.loc.error(el, message)

    def floats(self, el, attrs, key, n=None, default=None, allow_inf=False, nmin=None):
        raw = attrs.get(key) if attrs is not None else el.get(key)
        if raw is None:
            return None if default is None else np.array(default, dtype=np.float64)
        try:
            vals = np.array([float(x) for x in raw.replace(",", " ").split()], dtype=np.float64)
        except ValueError:
            raise self.attr_err(el, attrs, key, f"attribute {key}={raw!r} must be a list of numbers") from None
        if n is not None:
            lo = n if nmin is None else nmin
            if not lo <= len(vals) <= n:
                raise self.attr_err(el, attrs, key, f"attribute {key}={raw!r} needs {n} numbers, got {len(vals)}")
        if np.any(np.isnan(vals)) or (not allow_inf and not np.all(np.isfinite(vals))):
            raise self.attr_err(el, attrs, key, f"attribute {key}={raw!r} contains a non-finite value")
        return vals

    def scalar(self, el, attrs, key, default, allow_inf=False, minimum=None):
        v = self.floats(el, attrs, key, n=1, allow_inf=allow_inf)
        if v is None:
            return default
        x = float(v[0])
        if minimum is not None and x < minimum:
            raise self.attr_err(el, attrs, key, f"attribute {key}={x} must be >= {minimum}")
        return x

    def integer(self, el, attrs, key, default: int) -> int:
        """An integer attribute (the schema pass has checked its format and 32-bit range)."""
        raw = attrs.get(key) if attrs is not None else el.get(key)
        if raw is None or not raw.strip():
            return default
        try:
            return int(raw)
        except ValueError:
            raise self.attr_err(el, attrs, key, f"attribute {key}={raw!r} must be an integer") from None

    def orientation(self, el, attrs) -> np.ndarray:
        own = [k for k in _ORIENT_KEYS if k in el.attrib]
        keys = own if own else [k for k in _ORIENT_KEYS if k in attrs]
        src = el.attrib if own else attrs
        if len(keys) > 1:
            raise self.attr_err(el, src, keys[-1], f"orientation specified more than once ({', '.join(keys)})")
        if not keys:
            return QI.copy()
        k = keys[0]
        if k == "quat":
            q = self.floats(el, src, "quat", 4)
            if np.linalg.norm(q) < _MINVAL:
                raise self.attr_err(el, src, k, "quat has zero norm")
            return qnorm(q)
        if k == "axisangle":
            v = self.floats(el, src, "axisangle", 4)
            if np.linalg.norm(v[:3]) < _MINVAL:
                raise self.attr_err(el, src, k, "axisangle axis has zero norm")
            return axis_angle(v[:3], v[3] * self.c.angle)
        if k == "euler":
            v = self.floats(el, src, "euler", 3) * self.c.angle
            q = QI.copy()
            for i, ch in enumerate(self.c.eulerseq):
                ax = {"x": (1.0, 0.0, 0.0), "y": (0.0, 1.0, 0.0), "z": (0.0, 0.0, 1.0)}[ch.lower()]
                r = axis_angle(ax, v[i])
                q = qmul(q, r) if ch.islower() else qmul(r, q)
            return qnorm(q)
        if k == "xyaxes":
            v = self.floats(el, src, "xyaxes", 6)
            x = v[:3]
            if np.linalg.norm(x) < _MINVAL:
                raise self.attr_err(el, src, k, "xyaxes x axis has zero norm")
            x = x / np.linalg.norm(x)
            y = v[3:] - np.dot(v[3:], x) * x
            if np.linalg.norm(y) < _MINVAL:
                raise self.attr_err(el, src, k, "xyaxes y axis is parallel to x")
            y = y / np.linalg.norm(y)
            return mat2q(np.column_stack([x, y, np.cross(x, y)]))
        v = self.floats(el, src, "zaxis", 3)
        if np.linalg.norm(v) < _MINVAL:
            raise self.attr_err(el, src, k, "zaxis has zero norm")
        return quat_z_to(v)

    def pose(self, el, attrs) -> Tf:
        return Tf(self.floats(el, attrs, "pos", 3, default=(0.0, 0.0, 0.0)), self.orientation(el, attrs))

    # ------------------------------------------------------------------ defaults
    def resolve(self, el, tag: str, cls: str) -> dict:
        """``el``'s attributes over its default class chain; a partially given vector attribute
        (``_PARTIAL_VECTORS``) keeps the trailing numbers of the value it overrides, as in MuJoCo.
        The result's ``origin`` maps each attribute a default class set to ``(element, class)``."""
        out = _Attrs()
        for attrs in self.resolve_levels(el, tag, cls):
            origin = getattr(attrs, "origin", None)
            for k, v in attrs.items():
                old = out.get(k)
                if old is not None and k in _PARTIAL_VECTORS:
                    new, prev = v.replace(",", " ").split(), old.replace(",", " ").split()
                    if 0 < len(new) < len(prev):
                        v = " ".join(new + prev[len(new):])
                out[k] = v
                if origin is not None:
                    out.origin[k] = origin[k]
                else:
                    out.origin.pop(k, None)
        return out

    def _parse_default(self, el, parent: dict, name: str, parent_levels: tuple = ()):
        if name in self.defaults and name != "main":
            raise self.err(el, f"default class {name!r} is defined twice")
        d = {k: dict(v) for k, v in parent.items()}
        own: dict = {}  # this class's own attributes per bucket (element-wise vector defaults need the chain)
        nested = []
        for c in el:
            if c.tag == "default":
                nested.append(c)
            elif c.tag == "include":
                continue
            else:
                bucket = _DEFAULT_BUCKET.get(c.tag, c.tag)
                d.setdefault(bucket, {}).update(c.attrib)
                lvl = own.setdefault(bucket, _Attrs())
                lvl.update(c.attrib)
                lvl.origin.update({k: (c, name) for k in c.attrib})
        self.defaults[name] = d
        levels = tuple(parent_levels) + (own,)
        self.default_levels[name] = levels
        for c in nested:
            cname = c.get("class")
            if not cname:
                raise self.err(c, "nested <default> needs a class attribute")
            self._parse_default(c, d, cname, levels)

    def resolve_levels(self, el, tag: str, cls: str) -> list:
        """The attribute dicts that set ``el``'s values, outermost default class first, ``el`` last
        (MuJoCo fills a partially given vector element-wise over this chain)."""
        c = el.get("class")
        if c is None:
            c = cls
        if c not in self.defaults:
            raise self.err(el, f"unknown default class {c!r}")
        bucket = _DEFAULT_BUCKET.get(tag, tag)
        return [lvl[bucket] for lvl in self.default_levels.get(c, ()) if bucket in lvl] + [dict(el.attrib)]

    # ------------------------------------------------------------------ top level
    def parse(self):
        root = self.root
        self.names = collect_names(root, self.loc)
        check_references(root, self.loc, self.names)
        check_user_counts(root, self.loc)
        check_custom_and_visual(root, self.loc)
        for el in root.iter("compiler"):
            self._compiler(el)
        self.defaults = {"main": {}}
        self.default_levels = {"main": ()}
        for el in root:
            if el.tag == "default":
                # a top-level class inherits from main; a second top-level main <default> (e.g. one
                # from an <include>d file and the model's own) adds to main, as in MuJoCo (classes
                # defined before it keep the main they copied)
                self._parse_default(el, self.defaults["main"], el.get("class", "main"), self.default_levels["main"])
        self.options = {}
        self.gravity = None
        self.material_els, self.textures = [], set()
        for el in root:
            tag = el.tag
            if tag == "option":
                self._option(el)
            elif tag == "asset":
                self._assets(el)
        for m, attrs in self.material_els:  # textures may be defined after the materials using them
            self.check_ref(m, attrs, "texture", self.textures, "texture")
            for layer in m:
                self.check_ref(layer, layer.attrib, "texture", self.textures, "texture")
        self.world = _Body("world", None, None, Tf(), "main")
        self.world.world = Tf()
        for el in root:
            if el.tag == "worldbody":
                self._walk(el, self.world, Tf(), "main")
        self.actuators, self.equalities, self.excludes, self.pairs = [], [], [], []
        self.tendon_sections = []
        for el in root:
            tag = el.tag
            if tag in ("compiler", "default", "option", "asset", "worldbody"):
                continue
            if tag == "actuator":
                for a in el:
                    self.actuators.append(a)
            elif tag == "equality":
                for e in el:
                    self.equalities.append(e)
            elif tag == "tendon":
                self.tendon_sections.append(el)
                for t in el:
                    self.check_ref(t, self.resolve(t, "tendon", "main"), "material", self.materials, "material")
            elif tag == "contact":
                for e in el:
                    if e.tag == "exclude":
                        self.excludes.append(e)
                    elif e.tag == "pair":
                        self.pairs.append(e)
                    else:
                        self.warn(f"contact/{e.tag}", e, f"<contact><{e.tag}> is not supported and was ignored")
            else:
                self.warn(tag, el, f"<{tag}> is not supported and was ignored")

    def _compiler(self, el):
        c, a = self.c, el.attrib
        if "angle" in a:
            if a["angle"] not in ("degree", "radian"):
                raise self.err(el, f"angle={a['angle']!r} must be 'degree' or 'radian'")
            c.angle = math.pi / 180.0 if a["angle"] == "degree" else 1.0
        if "eulerseq" in a:
            s = a["eulerseq"]
            if len(s) != 3 or any(ch not in "xyzXYZ" for ch in s):
                raise self.err(el, f"eulerseq={s!r} must be 3 characters from xyzXYZ")
            c.eulerseq = s
        for k in ("meshdir", "texturedir", "assetdir"):
            if k in a:
                setattr(c, k, a[k])
        c.autolimits = _truthy(a.get("autolimits"), c.autolimits, self.loc, el, "autolimits")
        if "inertiafromgeom" in a:
            v = a["inertiafromgeom"].lower()
            if v not in ("true", "false", "auto"):
                raise self.err(el, f"inertiafromgeom={v!r} must be true, false or auto")
            c.inertiafromgeom = v
        if "inertiagrouprange" in a:
            r = self.floats(el, None, "inertiagrouprange", 2)
            c.inertiagrouprange = (int(r[0]), int(r[1]))
        c.boundmass = self.scalar(el, None, "boundmass", c.boundmass, minimum=0.0)
        c.boundinertia = self.scalar(el, None, "boundinertia", c.boundinertia, minimum=0.0)
        c.balanceinertia = _truthy(a.get("balanceinertia"), c.balanceinertia, self.loc, el, "balanceinertia")
        c.settotalmass = self.scalar(el, None, "settotalmass", c.settotalmass)
        if a.get("coordinate", "local") != "local":
            raise self.err(el, "coordinate='global' is not supported (MuJoCo removed it); use local coordinates")
        for k in ("discardvisual", "fusestatic"):
            if _truthy(a.get(k), False, self.loc, el, k):
                self.warn(f"compiler.{k}", el, f"<compiler {k}='true'> is ignored (all geoms and bodies are kept)")

    def _option(self, el):
        opts = dict(el.attrib)
        if "timestep" in opts:
            opts["timestep"] = self.scalar(el, None, "timestep", 0.002, minimum=0.0)
        if "gravity" in opts:
            self.gravity = self.floats(el, None, "gravity", 3)
            opts["gravity"] = tuple(self.gravity.tolist())
        for f in el:
            if f.tag == "flag":
                opts.setdefault("flag", {}).update(f.attrib)
                if f.get("gravity", "enable") == "disable":
                    self.gravity = np.zeros(3)
            else:
                self.warn(f"option/{f.tag}", f, f"<option><{f.tag}> is not supported and was ignored")
        self.options.update(opts)

    def _assets(self, el):
        for a in el:
            tag = a.tag
            if tag == "mesh":
                attrs = self.resolve(a, "mesh", "main")
                name = a.get("name") or (os.path.splitext(os.path.basename(a.get("file", "")))[0])
                if not name:
                    raise self.err(a, "a <mesh> needs a name or a file")
                if name in self.meshes:
                    raise self.err(a, f"mesh {name!r} is defined twice")
                if "refpos" in a.attrib or "refquat" in a.attrib:
                    self.warn("mesh.refpos", a, "<mesh refpos/refquat> is ignored")
                self.meshes[name] = {"el": a, "attrs": attrs, "dir": self.c.meshdir or self.c.assetdir}
                if attrs.get("file") and "vertex" not in attrs:  # MuJoCo opens every mesh file, used or not
                    path = self.asset_path(a, self.meshes[name]["dir"], attrs["file"])
                    if self.opts.get("path_resolver") is None and not os.path.isfile(path):
                        raise self.loc.error(a, f"mesh file not found: {path!r}", MJCFFileNotFoundError)
            elif tag == "hfield":
                name = a.get("name") or os.path.splitext(os.path.basename(a.get("file", "")))[0]
                if not name:
                    raise self.err(a, "an <hfield> needs a name or a file")
                self.hfields[name] = {"el": a}
            elif tag == "material":
                name = a.get("name")
                if not name:
                    raise self.err(a, "a <material> needs a non-empty name")
                attrs = self.resolve(a, "material", "main")
                self.material_els.append((a, attrs))
                self.materials[name] = dict(attrs)
            elif tag == "texture":
                # only referenced by materials; colors come from material rgba
                name = a.get("name") or os.path.splitext(os.path.basename(a.get("file", "")))[0]
                if name:
                    self.textures.add(name)
                elif self.resolve(a, "texture", "main").get("type", "cube") != "skybox":
                    raise self.err(a, "a <texture> needs a name or a file (only a skybox texture may have neither)")
                self._texture(a)
            else:
                self.warn(f"asset/{tag}", a, f"<asset><{tag}> is not supported and was ignored")

    # ------------------------------------------------------------------ bodies
    def _check_class(self, el, cc):
        c = el.get("childclass")
        if c is None:
            return cc
        if c not in self.defaults:
            raise self.err(el, f"unknown childclass {c!r}")
        return c

    def _walk(self, el, body: _Body, pre: Tf, cc: str):
        for c in el:
            tag = c.tag
            if tag == "body":
                self._body(c, body, pre, cc)
            elif tag == "frame":
                cc2 = self._check_class(c, cc)
                self._walk(c, body, pre * self.pose(c, self.resolve(c, "frame", cc2)), cc2)
            elif tag == "geom":
                body.geoms.append(self._geom(c, pre, cc))
            elif tag == "site":
                s = self._site(c, pre, cc)
                body.sites.append(s)
                if s["name"]:
                    self.sites_by_name[s["name"]] = (body, s)
            elif tag in ("joint", "freejoint"):
                if body.parent is None:
                    raise self.err(c, "joints are not allowed in <worldbody>")
                body.joints.append(self._joint(c, pre, cc, body))
            elif tag == "inertial":
                if body.parent is None:
                    self.warn("worldbody.inertial", c, "<inertial> of the world body is ignored")
                    continue
                if body.inertial is not None:
                    raise self.err(c, f"body {body.name!r} has more than one <inertial>")
                body.inertial = (c, pre)
            else:
                if tag == "camera":  # not imported, but checked as MuJoCo's compiler does
                    a = self.resolve(c, "camera", cc)
                    fovy = self.scalar(c, a, "fovy", 45.0, allow_inf=True)
                    if not fovy < 180.0:
                        raise self.attr_err(c, a, "fovy", f"camera fovy={fovy:g} must be smaller than 180 degrees")
                self.warn(tag, c, f"<{tag}> is not supported and was ignored")

    def _body(self, el, parent: _Body, pre: Tf, cc: str):
        cc = self._check_class(el, cc)
        name = el.get("name")
        if not name:
            name = f"{parent.name}_body{len(self.all_bodies) + 1}" if parent.parent is not None else f"body{len(self.all_bodies) + 1}"
        if name in self.bodies_by_name or name == "world":
            raise self.err(el, f"body name {name!r} is used twice")
        local = pre * self.pose(el, el.attrib)
        b = _Body(name, el, parent, local, cc)
        b.world = parent.world * local
        b.mocap = _truthy(el.get("mocap"), False, self.loc, el, "mocap")
        if b.mocap and parent.parent is not None:
            raise self.err(el, "mocap bodies must be children of <worldbody>")
        gc = self.scalar(el, None, "gravcomp", 0.0)
        if gc != 0.0:
            self.warn("body.gravcomp", el, "<body gravcomp> (gravity compensation) is not supported and was ignored")
        self.bodies_by_name[name] = b
        self.all_bodies.append(b)
        parent.children.append(b)
        self._walk(el, b, Tf(), cc)

    def _joint(self, el, pre: Tf, cc: str, body: _Body) -> _Joint:
        j = _Joint()
        j.el = el
        j.cls = el.get("class") or cc
        if el.tag == "freejoint":
            j.attrs = dict(el.attrib)
            j.type = "free"
        else:
            j.attrs = self.resolve(el, "joint", cc)
            j.type = j.attrs.get("type", "hinge")
        if j.type not in _JOINT_TYPES:
            raise self.err(el, f"unknown joint type {j.type!r}; expected one of {', '.join(_JOINT_TYPES)}")
        a = j.attrs
        j.name = a.get("name") or f"{body.name}_joint{len(body.joints)}"
        if a.get("name"):
            self.named_joints.add(j.name)
        j.pos = pre.point(self.floats(el, a, "pos", 3, default=(0.0, 0.0, 0.0)))
        axis = self.floats(el, a, "axis", 3, default=(0.0, 0.0, 1.0))
        if j.type in ("hinge", "slide") and np.linalg.norm(axis) < _MINVAL:
            raise self.attr_err(el, a, "axis", f"joint {j.name!r}: axis has zero length")
        j.axis = qrot(pre.q, axis / max(np.linalg.norm(axis), _MINVAL))
        ang = self.c.angle if j.type == "hinge" else 1.0
        j.ref = self.scalar(el, a, "ref", 0.0) * ang
        j.springref = self.scalar(el, a, "springref", 0.0) * ang
        rng = self.floats(el, a, "range", 2, allow_inf=True)
        lim = a.get("limited", "auto").strip().lower()
        if lim not in ("true", "false", "auto"):
            raise self.err(el, f"limited={lim!r} must be true, false or auto")
        if lim == "auto":
            if self.c.autolimits:
                limited = rng is not None
            else:
                limited = False
                if rng is not None:
                    raise self.attr_err(el, a, "range", f"joint {j.name!r} has a range but limited='auto' and "
                                                        "<compiler autolimits='false'>")  # fmt: skip
        else:
            limited = lim == "true"
        if limited and j.type == "free":
            limited = False
        if limited:
            if rng is None:
                rng = np.zeros(2)
            if j.type == "ball":
                j.range = (0.0, float(rng[1]) * self.c.angle)
                self.warn("joint.ball_range", el, "ball joint range (cone limit) is not supported and was ignored")
                limited = False
            else:
                if not rng[0] < rng[1]:
                    raise self.attr_err(el, a, "range" if "range" in a else "limited",
                                        f"joint {j.name!r}: range lower {rng[0]} must be smaller than upper {rng[1]}")
                # an infinite side is no limit: the builder's unlimited value (+-1e10) keeps the arrays finite
                j.range = tuple(float(np.clip(x * ang, -1e10, 1e10)) for x in rng)
        j.limited = limited
        j.stiffness = self.scalar(el, a, "stiffness", 0.0, minimum=0.0)
        j.damping = self.scalar(el, a, "damping", 0.0, minimum=0.0)
        j.armature = self.scalar(el, a, "armature", 0.0, minimum=0.0) * self.opts["armature_scale"]
        j.frictionloss = self.scalar(el, a, "frictionloss", 0.0, minimum=0.0)
        j.effort = None
        if a.get("actuatorfrcrange") is not None and _truthy(a.get("actuatorfrclimited", "true"), True, self.loc, el, "actuatorfrclimited"):
            r = self.floats(el, a, "actuatorfrcrange", 2, allow_inf=True)
            if np.all(np.isfinite(r)):  # an infinite range is no limit
                j.effort = float(max(abs(r[0]), abs(r[1])))
        if j.type == "ball" and j.stiffness and j.springref:
            j.springref = 0.0
        return j

    def _color(self, a):
        rgba = None
        mat = a.get("material")
        if mat and mat in self.materials and "rgba" in self.materials[mat]:
            try:
                rgba = [float(x) for x in self.materials[mat]["rgba"].split()]
            except ValueError:
                rgba = None
        if "rgba" in a:
            try:
                rgba = [float(x) for x in a["rgba"].split()]
            except ValueError:
                rgba = None
        if rgba is None or len(rgba) != 4 or not all(math.isfinite(x) for x in rgba):
            return None, None
        return tuple(min(max(x, 0.0), 1.0) for x in rgba[:3]), min(max(rgba[3], 0.0), 1.0)

    def _shape_frame(self, el, a, pre: Tf, size: np.ndarray, kind: str, gtype: str):
        """(pose in body frame, size) honoring fromto."""
        ft = self.floats(el, a, "fromto", 6)
        if ft is not None and gtype not in ("capsule", "cylinder", "box", "ellipsoid"):
            raise self.attr_err(el, a, "fromto" if "type" not in a else "type",
                                f"fromto needs a {kind} of type capsule, cylinder, box or ellipsoid, not {gtype}")
        if ft is not None:
            p0, p1 = ft[:3], ft[3:]
            d = p1 - p0
            length = float(np.linalg.norm(d))
            if length < _MINVAL:
                raise self.attr_err(el, a, "fromto", f"{kind} fromto has zero length")
            size = size.copy()
            if gtype in ("capsule", "cylinder"):
                size[1] = 0.5 * length
            else:
                size[2] = 0.5 * length
            # MuJoCo: the frame's z axis points from "to" to "from" (mjuu_z2quat(from - to))
            return pre * Tf(0.5 * (p0 + p1), quat_z_to(p0 - p1)), size
        return pre * self.pose(el, a), size

    def _geom(self, el, pre: Tf, cc: str) -> dict:
        a = self.resolve(el, "geom", cc)
        gtype = a.get("type") or ("mesh" if a.get("mesh") else "sphere")
        if gtype not in _GEOM_TYPES:
            raise self.err(el, f"unknown geom type {gtype!r}; expected one of {', '.join(_GEOM_TYPES)}")
        size = self.floats(el, a, "size", 3, default=(0.0, 0.0, 0.0), nmin=1)
        size = np.concatenate([size, np.zeros(3 - len(size))])
        tf, size = self._shape_frame(el, a, pre, size, "geom", gtype)
        g = {"el": el, "attrs": a, "type": gtype, "size": size, "tf": tf, "name": a.get("name")}
        self._check_size(el, gtype, size, "geom", a)
        g["contype"] = self.integer(el, a, "contype", 1)
        g["conaffinity"] = self.integer(el, a, "conaffinity", 1)
        g["group"] = self.integer(el, a, "group", 0)
        condim = self.integer(el, a, "condim", 3)
        if condim not in (1, 3, 4, 6):
            raise self.attr_err(el, a, "condim", f"invalid condim {condim} (MuJoCo allows 1, 3, 4 or 6)")
        g["density"] = self.scalar(el, a, "density", 1000.0)
        if g["density"] < 0:
            raise self.attr_err(el, a, "density", f"density={g['density']} must be >= 0")
        m = self.scalar(el, a, "mass", None)
        if m is not None and m < 0:
            raise self.attr_err(el, a, "mass", f"mass={m} must be >= 0")
        g["mass"] = m
        fr = self.floats(el, a, "friction", 3, default=(1.0, 0.005, 0.0001), nmin=1)
        fr = np.concatenate([fr, np.array([1.0, 0.005, 0.0001])[len(fr):]])
        if np.any(fr < 0):
            raise self.attr_err(el, a, "friction", "friction must be >= 0")
        g["friction"] = fr
        g["margin"] = self.scalar(el, a, "margin", 0.0, minimum=0.0)
        self.check_ref(el, a, "material", self.materials, "material")
        self.check_ref(el, a, "mesh", self.meshes, "mesh")
        self.check_ref(el, a, "hfield", self.hfields, "hfield")
        g["color"] = self._color(a)
        if gtype == "mesh":
            mname = a.get("mesh")
            if not mname:
                raise self.err(el, "a mesh geom needs a mesh attribute")
            g["mesh"] = mname
        if gtype == "hfield":
            hname = a.get("hfield")
            if not hname:
                raise self.err(el, "an hfield geom needs an hfield attribute")
            g["hfield"] = hname
        if a.get("shellinertia", "false") == "true":
            self.warn("geom.shellinertia", el, "geom shellinertia is not supported; solid inertia used")
        return g

    def check_ref(self, el, attrs, key, names, what: str) -> None:
        """Attribute ``key`` (when given) must name one of ``names``."""
        v = attrs.get(key)
        if v and v not in names:
            raise self.attr_err(el, attrs, key, f"unknown {what} {v!r} in {key}")

    def _check_size(self, el, gtype, size, kind, attrs=None):
        if gtype == "plane" and not size[2] > 0:  # x, y: 0 is infinite; the third value is the grid spacing
            raise self.attr_err(el, attrs, "size" if attrs is not None and "size" in attrs else "type",
                                f"plane {kind} needs a positive third size value (grid spacing), got {size.tolist()}")
        need = {"sphere": 1, "capsule": 2, "cylinder": 2, "box": 3, "ellipsoid": 3}.get(gtype, 0)
        if need and np.any(size[:need] <= 0):
            raise self.attr_err(el, attrs, "size" if attrs is not None and "size" in attrs else "type",
                                f"{kind} of type {gtype} needs {need} positive size value(s), got {size[:need].tolist()}")

    def _site(self, el, pre: Tf, cc: str) -> dict:
        a = self.resolve(el, "site", cc)
        stype = a.get("type", "sphere")
        if stype not in _SITE_TYPES:
            raise self.err(el, f"unknown site type {stype!r}")
        size = self.floats(el, a, "size", 3, default=(0.005, 0.005, 0.005), nmin=1)
        size = np.concatenate([size, np.full(3 - len(size), 0.005)])
        tf, size = self._shape_frame(el, a, pre, size, "site", stype)
        self._check_size(el, stype, size, "site", a)
        self.check_ref(el, a, "material", self.materials, "material")
        self.check_ref(el, a, "mesh", self.meshes, "mesh")
        return {"el": el, "attrs": a, "type": stype, "size": size, "tf": tf, "name": a.get("name"), "color": self._color(a)}

    # ------------------------------------------------------------------ meshes
    def load_mesh(self, name: str, user_el):
        if name in self.mesh_cache:
            return self.mesh_cache[name]
        info = self.meshes[name]
        el, a = info["el"], info["attrs"]
        scale = self.floats(el, a, "scale", 3, default=(1.0, 1.0, 1.0))
        if np.any(scale == 0):
            raise self.attr_err(el, a, "scale", f"mesh {name!r}: scale components must be non-zero")
        if "vertex" in a:
            v = self.floats(el, a, "vertex").reshape(-1, 3) if len(a["vertex"].split()) % 3 == 0 else None
            if v is None or len(v) < 4:
                raise self.err(el, f"mesh {name!r}: vertex needs a multiple of 3 numbers (at least 4 vertices)")
            if "face" in a:
                f = self.floats(el, a, "face").astype(np.int64).reshape(-1, 3)
            else:
                v, f = _convex_hull_faces(v, self, el)
            if f.size == 0 or f.min() < 0 or f.max() >= len(v):
                raise self.err(el, f"mesh {name!r}: face indices out of range")
        else:
            fname = a.get("file")
            if not fname:
                raise self.err(el, f"mesh {name!r} needs a file or vertex data")
            path = self.asset_path(el, info["dir"], fname)
            v, f = _read_mesh_file(path, self, el)
        from armillary import Mesh

        try:
            mesh = Mesh(v.astype(np.float32), f.astype(np.int32), compute_inertia=False)
        except ValueError as e:
            raise self.err(el, f"mesh {name!r}: {e}") from None
        out = (mesh, scale, v, f)
        self.mesh_cache[name] = out
        return out

    def asset_path(self, el, subdir: str, fname: str, what: str = "mesh") -> str:
        resolver = self.opts.get("path_resolver")
        f, _ = self.loc.of(el)
        el_dir = os.path.dirname(f) if f and os.path.exists(f) else self.main_dir
        if resolver is not None:
            rel = os.path.join(subdir, fname) if subdir and not os.path.isabs(fname) else fname
            return str(resolver(el_dir, rel))
        if os.path.isabs(fname):
            return fname
        cands = [os.path.join(self.main_dir, subdir, fname), os.path.join(el_dir, fname), os.path.join(el_dir, subdir, fname)]
        for c in cands:
            if os.path.isfile(c):
                return c
        raise self.loc.error(el, f"{what} file not found: {fname!r} (searched {', '.join(repr(c) for c in cands)})",
                             MJCFFileNotFoundError)  # fmt: skip

    def _texture(self, el) -> None:
        """MuJoCo's checks of a ``<texture>`` (its image is never loaded): a builtin texture needs a positive
        width (and height for ``2d``), any other one an existing image file."""
        a = self.resolve(el, "texture", "main")
        ttype, builtin = a.get("type", "cube"), a.get("builtin", "none")
        if builtin != "none":
            for key in ("width",) + (("height",) if ttype == "2d" else ()):
                if self.integer(el, a, key, 0) <= 0:
                    raise self.attr_err(el, a, key, f"builtin texture needs a positive {key}, got {a.get(key, '0')!r}")
            return
        files = [k for k in ("file", "fileright", "fileleft", "fileup", "filedown", "filefront", "fileback") if a.get(k)]
        if not files or (ttype == "2d" and "file" not in files):
            raise self.err(el, f"{ttype} texture needs builtin or {'file' if ttype == '2d' else 'file or fileright, ...'}")
        if self.opts.get("path_resolver") is None:
            for k in files:
                path = self.asset_path(el, self.c.texturedir or self.c.assetdir, a[k], "texture")
                if not os.path.isfile(path):
                    raise self.loc.error(el, f"texture file not found: {path!r}", MJCFFileNotFoundError)


def _mesh_geometry(trimesh, path: str):
    """(vertices n x 3 float64, triangles m x 3 int64) of a mesh file, geometry only.

    An OBJ's materials are not read (``skip_materials``: MuJoCo ignores them too) and a
    multi-part file's parts are placed by their scene-graph transforms and joined with index
    offsets, not through ``Scene.dump()`` / visual concatenation, which copy visuals and, for
    texture coordinates without a resolvable material, fail with "No module named 'PIL'".
    """
    kwargs = {"skip_materials": True} if path.lower().endswith(".obj") else {}
    loaded = trimesh.load(path, process=False, **kwargs)
    if isinstance(loaded, trimesh.Scene):
        placed = [(loaded.geometry.get(name), np.asarray(xf, dtype=np.float64))
                  for xf, name in (loaded.graph[node] for node in loaded.graph.nodes_geometry)]
    else:
        placed = [(loaded, None)]
    verts, faces, offset = [], [], 0
    for g, xf in placed:
        if g is None or not hasattr(g, "faces"):
            continue
        gv = np.asarray(g.vertices, dtype=np.float64).reshape(-1, 3)
        gf = np.asarray(g.faces, dtype=np.int64).reshape(-1, 3)
        if xf is not None:
            gv = gv @ xf[:3, :3].T + xf[:3, 3]
            if np.linalg.det(xf[:3, :3]) < 0.0:  # a mirroring placement keeps the faces outward
                gf = gf[:, ::-1]
        verts.append(gv)
        faces.append(gf + offset)
        offset += len(gv)
    if not verts:
        return np.zeros((0, 3)), np.zeros((0, 3), dtype=np.int64)
    return np.concatenate(verts), np.concatenate(faces)


def _read_mesh_file(path: str, parser: _Parser, el):
    if not os.path.isfile(path):
        raise parser.loc.error(el, f"mesh file not found: {path!r}", MJCFFileNotFoundError)
    ext = os.path.splitext(path)[1].lower()
    if ext not in (".stl", ".obj", ".ply", ".off", ".glb", ".gltf", ".dae"):
        raise parser.err(el, f"unsupported mesh file format {ext!r} ({path!r}); use STL or OBJ")
    try:
        import trimesh
    except ImportError:  # pragma: no cover
        raise ImportError("importing MJCF meshes needs the 'trimesh' package (pip install trimesh)") from None
    try:
        v, f = _mesh_geometry(trimesh, path)
    except Exception as e:  # trimesh raises many kinds on corrupt files
        raise parser.err(el, f"cannot read mesh file {path!r}: {type(e).__name__}: {e}") from None
    if len(v) < 3 or len(f) == 0 or not np.all(np.isfinite(v)):
        raise parser.err(el, f"mesh file {path!r} has no valid triangles")
    # weld exact duplicate vertices (STL stores three per triangle), as MuJoCo's compiler does:
    # the mesh becomes manifold (edges, watertightness, SDF signs) and collision iterates each
    # surface point once; volumes and inertias are unchanged
    # (first-occurrence order, so the welded vertex list is the one MuJoCo builds)
    _, first, inverse = np.unique(v, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    v = v[first[order]]
    f = rank[np.asarray(inverse, dtype=np.int64).reshape(-1)][f]
    return v, f


def _convex_hull_faces(v, parser, el):
    """(hull vertices, CCW hull faces) of a vertex-only mesh (MuJoCo builds its convex hull)."""
    from armillary.geometry.hull import convex_hull

    try:
        hv, hf = convex_hull(v)
    except ValueError as e:
        raise parser.err(el, f"cannot build the convex hull of the mesh vertices: {e}") from None
    return np.asarray(hv, dtype=np.float64), np.asarray(hf, dtype=np.int64).reshape(-1, 3)


# ---------------------------------------------------------------------- mass properties
def _geom_mass(p: _Parser, g: dict):
    """(mass, com, inertia about com) of a geom in its own frame; None for massless types."""
    t, s = g["type"], g["size"]
    if t in ("plane", "hfield", "sdf"):
        return None
    if t == "sphere":
        vol = 4.0 / 3.0 * math.pi * s[0] ** 3
        dens = g["mass"] / vol if g["mass"] is not None else g["density"]
        m = dens * vol
        i = 0.4 * m * s[0] ** 2
        return m, np.zeros(3), np.diag([i, i, i])
    if t == "box":
        vol = 8.0 * s[0] * s[1] * s[2]
        m = g["mass"] if g["mass"] is not None else g["density"] * vol
        return m, np.zeros(3), np.diag([m / 3 * (s[1] ** 2 + s[2] ** 2), m / 3 * (s[0] ** 2 + s[2] ** 2), m / 3 * (s[0] ** 2 + s[1] ** 2)])
    if t == "ellipsoid":
        vol = 4.0 / 3.0 * math.pi * s[0] * s[1] * s[2]
        m = g["mass"] if g["mass"] is not None else g["density"] * vol
        return m, np.zeros(3), np.diag([m / 5 * (s[1] ** 2 + s[2] ** 2), m / 5 * (s[0] ** 2 + s[2] ** 2), m / 5 * (s[0] ** 2 + s[1] ** 2)])
    if t == "cylinder":
        r, h = s[0], 2.0 * s[1]
        vol = math.pi * r * r * h
        m = g["mass"] if g["mass"] is not None else g["density"] * vol
        ixx = m * (3 * r * r + h * h) / 12.0
        return m, np.zeros(3), np.diag([ixx, ixx, m * r * r / 2.0])
    if t == "capsule":
        r, h = s[0], 2.0 * s[1]
        vol = math.pi * r * r * (h + 4.0 * r / 3.0)
        m = g["mass"] if g["mass"] is not None else g["density"] * vol
        ms = m * (4.0 * r / 3.0) / (h + 4.0 * r / 3.0)
        mc = m - ms
        ixx = mc * (3 * r * r + h * h) / 12.0 + 0.4 * ms * r * r + ms * h * (3 * r + 2 * h) / 8.0
        izz = mc * r * r / 2.0 + 0.4 * ms * r * r
        return m, np.zeros(3), np.diag([ixx, ixx, izz])
    if t == "mesh":
        _, scale, v, f = p.load_mesh(g["mesh"], g["el"])
        vs = v * scale
        if np.prod(np.sign(scale)) < 0:
            f = f[:, ::-1]
        mode = p.meshes[g["mesh"]]["attrs"].get("inertia", "legacy")
        if mode not in ("legacy", "exact"):
            p.warn(f"mesh.inertia_{mode}", p.meshes[g["mesh"]]["el"], f"mesh inertia={mode!r} is not supported; 'legacy' used")
            mode = "legacy"
        vol, com, inertia = _mesh_unit_inertia(vs, f, mode == "exact")
        if vol <= _MINVAL:
            raise p.err(g["el"], f"mesh {g['mesh']!r} has zero volume; cannot compute its inertia")
        m = g["mass"] if g["mass"] is not None else g["density"] * vol
        return m, com, inertia * (m / vol)
    return None


def _mesh_unit_inertia(v, f, exact: bool):
    """(volume, com, inertia about com at unit density) of a triangle mesh, as MuJoCo computes them.

    ``legacy`` (MuJoCo's default): tetrahedra from the area-weighted surface centroid with absolute
    volumes give the center of mass; absolute tetrahedra volumes from that center give volume and inertia.
    ``exact``: signed volumes (a closed, consistently oriented surface).
    """
    a, b, c = v[f[:, 0]], v[f[:, 1]], v[f[:, 2]]
    if exact:
        cen = np.zeros(3)
        vol = np.einsum("ij,ij->i", a, np.cross(b, c)) / 6.0
        tot = vol.sum()
        if abs(tot) <= _MINVAL:
            return 0.0, np.zeros(3), np.zeros((3, 3))
        c1 = (vol[:, None] * (a + b + c)).sum(axis=0) / 4.0 / tot
    else:
        area = 0.5 * np.linalg.norm(np.cross(b - a, c - a), axis=1)
        if area.sum() <= _MINVAL:
            return 0.0, np.zeros(3), np.zeros((3, 3))
        cen = (area[:, None] * (a + b + c)).sum(axis=0) / 3.0 / area.sum()
        vol = np.abs(np.einsum("ij,ij->i", a - cen, np.cross(b - cen, c - cen))) / 6.0
        if vol.sum() <= _MINVAL:
            return 0.0, np.zeros(3), np.zeros((3, 3))
        c1 = (vol[:, None] * (a + b + c + cen)).sum(axis=0) / 4.0 / vol.sum()
    A, B, C = a - c1, b - c1, c - c1
    vol = np.einsum("ij,ij->i", A, np.cross(B, C)) / 6.0
    if not exact:
        vol = np.abs(vol)
    S = A + B + C
    cov = (np.einsum("i,ij,ik->jk", vol, A, A) + np.einsum("i,ij,ik->jk", vol, B, B)
           + np.einsum("i,ij,ik->jk", vol, C, C) + np.einsum("i,ij,ik->jk", vol, S, S)) / 20.0  # fmt: skip
    tot = float(vol.sum())
    if tot < 0:
        tot, cov = -tot, -cov
    return tot, c1, np.trace(cov) * np.eye(3) - cov


def _combine(parts):
    m = sum(pm for pm, _, _ in parts)
    if m <= 0:
        return 0.0, np.zeros(3), np.zeros((3, 3))
    com = sum(pm * pc for pm, pc, _ in parts) / m
    inertia = np.zeros((3, 3))
    for pm, pc, pi in parts:
        d = pc - com
        inertia += pi + pm * (np.dot(d, d) * np.eye(3) - np.outer(d, d))
    return m, com, inertia


def _geom_mass_counts(p: _Parser, g: dict) -> bool:
    """Whether geom ``g`` contributes to its body's mass (in inertiagrouprange, a type with volume)."""
    lo, hi = p.c.inertiagrouprange
    return lo <= g["group"] <= hi and g["type"] not in ("plane", "hfield", "sdf")


def _compute_mass(p: _Parser):
    c = p.c
    for b in p.all_bodies:
        el = b.el
        use_geoms = c.inertiafromgeom == "true" or (c.inertiafromgeom == "auto" and b.inertial is None)
        if p.opts["ignore_inertial_definitions"]:
            use_geoms = True
        elif use_geoms and b.inertial is not None and not any(_geom_mass_counts(p, g) for g in b.geoms):
            use_geoms = False  # inertiafromgeom="true" without a geom in inertiagrouprange keeps the <inertial>
        if b.inertial is not None and not use_geoms:
            iel, pre = b.inertial
            a = iel.attrib
            m = p.scalar(iel, a, "mass", None)
            if m is None:
                raise p.err(iel, f"body {b.name!r}: <inertial> needs a mass")
            if m < 0:
                raise p.err(iel, f"body {b.name!r}: mass={m} must be >= 0")
            tf = pre * p.pose(iel, a)
            if "fullinertia" in a and "diaginertia" in a:
                raise p.err(iel, f"body {b.name!r}: <inertial> gives both fullinertia and diaginertia; give one")
            if "fullinertia" in a:
                fi = p.floats(iel, a, "fullinertia", 6)
                full = np.array([[fi[0], fi[3], fi[4]], [fi[3], fi[1], fi[5]], [fi[4], fi[5], fi[2]]])
                principal = np.linalg.eigvalsh(full)
                if not np.all(principal > 0.0):
                    raise p.err(iel, f"body {b.name!r}: fullinertia {fi.tolist()} must have positive eigenvalues "
                                     f"(got {principal.tolist()})")  # fmt: skip
                inertia = qmat(tf.q) @ full @ qmat(tf.q).T
            elif "diaginertia" in a:
                di = p.floats(iel, a, "diaginertia", 3)
                if np.any(di < 0):
                    raise p.err(iel, f"body {b.name!r}: diaginertia {di.tolist()} must be >= 0")
                principal = np.sort(di)
                r = qmat(tf.q)
                inertia = r @ np.diag(di) @ r.T
            else:
                raise p.err(iel, f"body {b.name!r}: <inertial> needs diaginertia or fullinertia")
            if not c.balanceinertia and principal[0] + principal[1] < principal[2]:
                raise p.err(iel, f"body {b.name!r}: principal inertia {principal.tolist()} violates the triangle "
                                 "inequality A + B >= C (MuJoCo rejects it; <compiler balanceinertia='true'> fixes it)")
            b.mass, b.com, b.inertia = m, tf.p, inertia
            b.explicit_inertial = True
        elif use_geoms:
            parts = []
            for g in b.geoms:
                if not _geom_mass_counts(p, g):
                    continue
                r = _geom_mass(p, g)
                if r is None:
                    continue
                gm, gc, gi = r
                rot = qmat(g["tf"].q)
                parts.append((gm, g["tf"].point(gc), rot @ gi @ rot.T))
            b.mass, b.com, b.inertia = _combine(parts)
        if not math.isfinite(b.mass) or not np.all(np.isfinite(b.inertia)):
            raise p.err(el, f"body {b.name!r}: non-finite mass or inertia")
    # corrections, in MuJoCo's order
    for b in p.all_bodies:
        if c.balanceinertia or c.boundinertia > 0:
            evals, evecs = np.linalg.eigh(0.5 * (b.inertia + b.inertia.T))
            evals = np.maximum(evals, 0.0)
            if c.balanceinertia and (evals[0] + evals[1] < evals[2] or evals[0] + evals[2] < evals[1] or evals[1] + evals[2] < evals[0]):
                evals[:] = evals.mean()
            if c.boundinertia > 0:
                evals = np.maximum(evals, c.boundinertia)
            b.inertia = evecs @ np.diag(evals) @ evecs.T
        if c.boundmass > 0 and b.mass < c.boundmass:
            b.mass = c.boundmass
    if c.settotalmass > 0:
        total = sum(b.mass for b in p.all_bodies)
        if total > _MINVAL:
            k = c.settotalmass / total
            for b in p.all_bodies:
                b.mass *= k
                b.inertia = b.inertia * k
    # with ignore_inertial_definitions the masses are not MuJoCo's: its massless-body rule does not apply
    _check_moving_masses(p, massless_rule=not p.opts["ignore_inertial_definitions"])
    for b in p.all_bodies:
        moving, a = False, b
        while a is not None and a.parent is not None and not moving:
            moving, a = bool(a.joints), a.parent
        for g in b.geoms:
            if moving and g["type"] == "plane":
                raise p.err(g["el"], f"plane geoms are only allowed in static bodies; body {b.name!r} moves")


def _massive(b: _Body) -> bool:
    return b.mass >= _MINVAL and bool(np.all(np.linalg.eigvalsh(0.5 * (b.inertia + b.inertia.T)) >= _MINVAL))


def _check_moving_masses(p: _Parser, massless_rule: bool = True) -> None:
    """Masses fit float32; and MuJoCo's rule: a body with joints needs mass and principal inertias >= mjMINVAL
    (1e-15), its own or those of one body welded to it (a descendant reached through bodies without joints)."""
    for b in p.all_bodies:
        big = max(abs(b.mass), float(np.abs(b.inertia).max(initial=0.0)))
        if big > 3.4e38:
            raise p.err(b.el, f"body {b.name!r}: mass {b.mass:g} or inertia {np.abs(b.inertia).max():g} exceeds the "
                              "float32 range (3.4e38)")  # fmt: skip
        if not massless_rule or not b.joints or _massive(b):
            continue
        stack = [c for c in b.children if not c.joints]
        while stack:
            w = stack.pop()
            if _massive(w):
                break
            stack.extend(c for c in w.children if not c.joints)
        else:
            principal = np.linalg.eigvalsh(0.5 * (b.inertia + b.inertia.T))
            raise p.err(b.el, f"body {b.name!r} moves (it has joints) but has mass {b.mass:g} and principal inertia "
                              f"{[float(f'{x:.3g}') for x in principal]}; MuJoCo needs both >= {_MINVAL:g} (give it geoms "
                              "with mass, an <inertial>, or <compiler boundmass/boundinertia>)")  # fmt: skip


# ---------------------------------------------------------------------- custom attributes
def _generic_value(raw: str, dtype):
    if dtype is str:
        return raw
    if dtype in (bool, wp.bool):
        return raw.strip().lower() in ("true", "1")
    vals = raw.split()
    n = getattr(dtype, "_length_", None)
    if n and n > 1 and hasattr(dtype, "_wp_scalar_type_"):
        return tuple(float(v) for v in vals[:n])
    if dtype in (int, wp.int32, wp.int64, wp.uint32, wp.uint64, wp.int8, wp.uint8, wp.int16, wp.uint16):
        return int(float(vals[0]))
    return float(vals[0])


class _Custom:
    def __init__(self, builder, parser: _Parser):
        from armillary.sim.custom_attributes import AttributeFrequency as F

        self.by_freq: dict = {}
        for attr in getattr(builder, "custom_attributes", {}).values():
            if attr.is_custom_frequency:
                continue
            self.by_freq.setdefault(attr.frequency, []).append(attr)
        self.F = F
        self.builder = builder
        self.p = parser

    def values(self, freq, attrs: dict, el, tag: str) -> dict:
        out = {}
        for attr in self.by_freq.get(freq, ()):
            name = attr.mjcf_attribute_name
            if name not in attrs:
                continue
            raw = attrs[name]
            try:
                if attr.mjcf_value_transformer is not None:
                    ctx = {"builder": self.builder, "element": el, "attrib": attrs, "tag": tag, "attribute": attr}
                    v = attr.mjcf_value_transformer(raw, ctx)
                else:
                    v = _generic_value(raw, attr.dtype)
            except (ValueError, TypeError, IndexError, OverflowError) as e:
                raise self.p.attr_err(el, attrs, name, f"custom attribute {attr.key!r}: cannot convert {name}={raw!r}: "
                                                       f"{e}") from None  # fmt: skip
            out[attr.key] = v
        return out

    def apply_options(self, options: dict) -> None:
        """ONCE-frequency attributes from ``<option>`` attributes (``mjcf_attribute_name``) and from
        ``<option><flag>`` (``mjcf_attribute_name`` ``"flag/<name>"``)."""
        for attr in self.by_freq.get(self.F.ONCE, ()):
            name = attr.mjcf_attribute_name
            if name.startswith("flag/"):
                raw = options.get("flag", {}).get(name[5:])
            else:
                raw = options.get(name)
            if raw is None:
                continue
            if isinstance(raw, (tuple, list)):
                raw = " ".join(str(x) for x in raw)
            raw = str(raw)
            try:
                if attr.mjcf_value_transformer is not None:
                    ctx = {"builder": self.builder, "element": None, "attrib": options, "tag": "option", "attribute": attr}
                    v = attr.mjcf_value_transformer(raw, ctx)
                else:
                    v = _generic_value(raw, attr.dtype)
            except (ValueError, TypeError, IndexError, OverflowError) as e:
                raise ValueError(f"MJCF <option>: custom attribute {attr.key!r}: cannot convert {name}={raw!r}: {e}") from None
            attr.values[0] = v


# ---------------------------------------------------------------------- building
def _group_joints(joints: list[_Joint]) -> list[list[_Joint]]:
    """Greedy grouping of consecutive joints that compose exactly as one D6 joint."""
    groups: list[list[_Joint]] = []
    cur: list[_Joint] = []

    def fits(j):
        if not cur or j.type not in ("hinge", "slide"):
            return False
        if any(x.type not in ("hinge", "slide") for x in cur):
            return False
        hinges = [x for x in cur if x.type == "hinge"]
        slides = [x for x in cur if x.type == "slide"]
        if any(x.ref != 0.0 for x in hinges):
            return False
        if j.type == "slide":
            return not hinges and len(slides) < 3
        if j.ref != 0.0 or len(hinges) >= 3:
            return False
        return not hinges or np.allclose(hinges[0].pos, j.pos, atol=1e-9, rtol=0)

    for j in joints:
        if fits(j):
            cur.append(j)
        else:
            if cur:
                groups.append(cur)
            cur = [j]
    if cur:
        groups.append(cur)
    return groups


class _Builder:
    def __init__(self, p: _Parser, target, opts):
        from armillary import ModelBuilder

        self.p = p
        self.opts = opts
        self.target = target
        s = ModelBuilder(up_axis=target.up_axis, gravity=target.gravity)
        s.rigid_gap = target.rigid_gap
        s.default_shape_cfg = target.default_shape_cfg.copy()
        s.default_joint_cfg = target.default_joint_cfg
        for key, freq in getattr(target, "custom_frequencies", {}).items():
            s.add_custom_frequency(freq)
        import copy

        for key, attr in getattr(target, "custom_attributes", {}).items():
            clone = copy.copy(attr)
            clone.values = [] if attr.is_custom_frequency else {}
            s.add_custom_attribute(clone)
        self.s = s
        self.custom = _Custom(s, p)
        self.custom.apply_options(p.options)
        self.joint_map: dict[str, tuple] = {}  # mj joint name -> (joint idx, local coord, local dof, type)
        self.tree_joints: list[int] = []
        self.loop_joints: list[int] = []
        self.shape_info: list[tuple] = []  # (shape idx, geom dict, body)
        self.site_index: dict[str, int] = {}  # named site -> shape idx
        self.geom_index: dict[str, int] = {}  # named geom -> shape idx
        self.intermediate: dict[int, int] = {}  # intermediate link -> real body (for filtering)
        # geoms named by a <contact><pair>: they collide through the pair even with contype = conaffinity = 0
        self.pair_geoms: set[str] = {n for e in p.pairs for n in (e.get("geom1"), e.get("geom2")) if n}

    # -------------------------------------------------------------- joints
    def _cfg(self, j: _Joint, axis):
        from armillary import ModelBuilder

        cfg = ModelBuilder.JointDofConfig(axis=tuple(float(x) for x in axis))
        if j.limited:
            cfg.limit_lower, cfg.limit_upper = j.range
        cfg.damping = j.damping
        cfg.armature = j.armature
        cfg.friction = j.frictionloss
        cfg.stiffness = j.stiffness
        cfg.rest_q = j.springref if j.type in ("hinge", "slide") else None
        if j.effort is not None:
            cfg.effort_limit = j.effort
        return cfg

    def _add_joints(self, b: _Body, parent_idx: int, prefix: Tf, is_root: bool) -> list[int]:
        """Joints of body ``b``; ``prefix`` is the body frame (at qpos0) in the parent frame."""
        from armillary.sim.enums import JointType

        s, F = self.s, self.custom.F
        joints = b.joints
        out = []
        if is_root:
            fl, bj = self.opts["floating"], self.opts["base_joint"]
            has_free = any(j.type == "free" for j in joints)
            if bj is not None or fl is not None or self.opts["parent_body"] >= 0:
                if joints and not (len(joints) == 1 and has_free):
                    if fl is not None or bj is not None:
                        self.p.warn("floating", b.el, f"floating/base_joint ignored for root body {b.name!r}, which has its own joints")
                else:
                    label = joints[0].name if joints else f"{b.name}_base_joint"
                    if bj is not None:
                        kw = dict(bj)
                        kw.setdefault("parent_xform", wp.transform(*prefix.xyzw()))
                        kw.setdefault("label", label)
                        jt = kw.pop("joint_type", kw.pop("type", None))
                        if jt is None:
                            raise ValueError("base_joint needs a 'joint_type'")
                        return [s.add_joint(jt, parent_idx, b.index, **kw)]
                    if fl is True:
                        return [s.add_joint_free(b.index, label=label)]
                    if has_free and fl is None:
                        self.p.warn("free_under_parent", b.el, f"free joint of root body {b.name!r} becomes FIXED under parent_body")
                    return [s.add_joint_fixed(parent_idx, b.index, parent_xform=wp.transform(*prefix.xyzw()), label=label)]
        if not joints:
            label = f"{b.name}_fixed" if not b.mocap else f"{b.name}_mocap"
            return [s.add_joint_fixed(parent_idx, b.index, parent_xform=wp.transform(*prefix.xyzw()), label=label)]
        if any(j.type == "free" for j in joints):
            if len(joints) > 1:
                raise self.p.err(joints[0].el, f"body {b.name!r}: a free joint must be the only joint of its body")
            if not is_root:
                raise self.p.err(joints[0].el, f"body {b.name!r}: free joints are only allowed in top-level bodies")
            j = joints[0]
            idx = s.add_joint_free(b.index, label=j.name, custom_attributes=self._jcustom([j], 6, 7))
            self.joint_map[j.name] = (idx, 0, 0, "free")
            return [idx]
        groups = _group_joints(joints)
        prev = parent_idx
        for gi, grp in enumerate(groups):
            last = gi == len(groups) - 1
            if last:
                child = b.index
            else:
                label = f"{b.name}/{'_'.join(j.name for j in grp)}"
                child = s.add_link(xform=wp.transform(*self.body_world(b).xyzw()), mass=0.0, label=label, lock_inertia=True)
                self.intermediate[child] = b.index
            pre = prefix if gi == 0 else Tf()
            out.append(self._add_group(grp, prev, child, pre, JointType))
            prev = child
        return out

    def _jcustom(self, grp, ndof, ncoord):
        F = self.custom.F
        out = {}
        v = self.custom.values(F.JOINT, grp[0].attrs, grp[0].el, "joint")
        out.update(v)
        for freq, n in ((F.JOINT_DOF, ndof), (F.JOINT_COORD, ncoord)):
            per: dict = {}
            for k, j in enumerate(grp):
                vals = self.custom.values(freq, j.attrs, j.el, "joint")
                width = n // len(grp) if len(grp) > 1 else n
                for key, val in vals.items():
                    d = per.setdefault(key, {})
                    for w in range(width):
                        d[k * width + w if len(grp) > 1 else w] = val
            out.update(per)
        return out or None

    def _add_group(self, grp: list[_Joint], parent: int, child: int, pre: Tf, JointType) -> int:
        s = self.s
        j0 = grp[0]
        self.p.cur = j0.el
        label = "_".join(j.name for j in grp)
        if len(grp) == 1 and j0.type == "ball":
            xp = pre * Tf(j0.pos)
            cfgs = [self._cfg(j0, ax) for ax in np.eye(3)]
            idx = s.add_joint(JointType.BALL, parent, child, angular_axes=cfgs, label=label,
                              parent_xform=wp.transform(*xp.xyzw()), child_xform=wp.transform(*Tf(j0.pos).xyzw()),
                              custom_attributes=self._jcustom(grp, 3, 4))  # fmt: skip
            self.joint_map[j0.name] = (idx, 0, 0, "ball")
            return idx
        hinges = [j for j in grp if j.type == "hinge"]
        anchor = hinges[0].pos if hinges else j0.pos
        offset = Tf(-sum((j.axis * j.ref for j in grp if j.type == "slide"), np.zeros(3)))
        if len(grp) == 1 and j0.type == "hinge":
            offset = Tf(None, axis_angle(j0.axis, -j0.ref))
        xp = pre * Tf(anchor) * offset
        xc = Tf(anchor)
        lin = [self._cfg(j, j.axis) for j in grp if j.type == "slide"]
        ang = [self._cfg(j, j.axis) for j in grp if j.type == "hinge"]
        if len(grp) == 1:
            jt = JointType.PRISMATIC if j0.type == "slide" else JointType.REVOLUTE
        else:
            jt = JointType.D6
        idx = s.add_joint(jt, parent, child, linear_axes=lin, angular_axes=ang, label=label,
                          parent_xform=wp.transform(*xp.xyzw()), child_xform=wp.transform(*xc.xyzw()),
                          custom_attributes=self._jcustom(grp, len(grp), len(grp)))  # fmt: skip
        qs = s.joint_q_start[idx]
        for k, j in enumerate(grp):
            s.joint_q[qs + k] = j.ref
            self.joint_map[j.name] = (idx, k, k, j.type)
        return idx

    # -------------------------------------------------------------- bodies
    def body_world(self, b: _Body) -> Tf:
        return self.root_world * b.world

    def build(self):
        p, s, opts = self.p, self.s, self.opts
        xf = opts["xform"]
        self.root_frame = Tf() if xf is None else Tf.from_xyzw(list(xf))
        pb = opts["parent_body"]
        if pb >= 0:
            self.root_world = Tf.from_xyzw(list(self.target.body_q[pb])) * self.root_frame
        else:
            self.root_world = self.root_frame
        self.static_frame = self.root_frame
        # world geoms/sites
        for g in p.world.geoms:
            self._shape(g, -1, self.static_frame)
        if opts["parse_sites"]:
            for st in p.world.sites:
                self._site(st, -1, self.static_frame)
        articulations = []
        for top in p.world.children:
            start = s.joint_count
            self._subtree(top, -1, True)
            articulations.append((list(range(start, s.joint_count)), top.name))
        for js, name in articulations:
            if js:
                s.add_articulation(js, label=name)
        self.tree_joint_count = s.joint_count

    def _subtree(self, b: _Body, parent_idx: int, is_root: bool):
        s, p = self.s, self.p
        F = self.custom.F
        com = b.com
        p.cur = b.el
        idx = s.add_link(xform=wp.transform(*self.body_world(b).xyzw()), com=wp.vec3(*com.tolist()),
                         inertia=wp.mat33(*b.inertia.reshape(-1).tolist()), mass=float(b.mass), label=b.name,
                         lock_inertia=True, is_kinematic=b.mocap,
                         custom_attributes=self.custom.values(F.BODY, b.attrs, b.el, "body") or None)  # fmt: skip
        b.index = idx
        prefix = (self.root_frame * b.local) if is_root else b.local
        self._add_joints(b, parent_idx, prefix, is_root)
        for g in b.geoms:
            self._shape(g, idx, Tf(), b.name)
        if self.opts["parse_sites"]:
            for st in b.sites:
                self._site(st, idx, Tf())
        s.body_lock_inertia[idx] = b.explicit_inertial
        for c in b.children:
            self._subtree(c, idx, False)

    # -------------------------------------------------------------- shapes
    def _shape(self, g: dict, body: int, frame: Tf, bname: str = "world"):
        from armillary import ModelBuilder
        from armillary.sim.enums import GeoType

        p, s, opts = self.p, self.s, self.opts
        p.cur = g["el"]
        t = g["type"]
        visual = g["contype"] == 0 and g["conaffinity"] == 0 and not (g["name"] and g["name"] in self.pair_geoms)
        if visual and not opts["parse_visuals"]:
            return
        if t == "mesh" and not opts["parse_meshes"]:
            return
        if t == "sdf":
            p.warn("geom.sdf", g["el"], "geom type 'sdf' is not supported and was ignored")
            return
        cfg = ModelBuilder.ShapeConfig(density=g["density"], mu=float(g["friction"][0]),
                                       mu_torsional=float(g["friction"][1]), mu_rolling=float(g["friction"][2]),
                                       margin=float(g["margin"]))  # fmt: skip
        if visual:
            cfg.collision_group = 0
            cfg.has_shape_collision = False
            cfg.has_particle_collision = False
            cfg.is_visible = not opts["hide_visuals"]
        tf = frame * g["tf"]
        xform = wp.transform(*tf.xyzw())
        color, opacity = g["color"]
        label = g["name"] or f"{bname}_geom{len(s.body_shapes.get(body, []))}"
        custom = self.custom.values(self.custom.F.SHAPE, g["attrs"], g["el"], "geom") or None
        sz = g["size"]
        kw = dict(body=body, xform=xform, cfg=cfg, color=color, opacity=opacity, label=label, custom_attributes=custom)
        try:
            if t == "plane":
                idx = s.add_shape(type=GeoType.PLANE, scale=(0.0, 0.0, 0.0), **kw)
            elif t == "sphere":
                idx = s.add_shape(type=GeoType.SPHERE, scale=(sz[0], 0.0, 0.0), **kw)
            elif t == "capsule":
                idx = s.add_shape(type=GeoType.CAPSULE, scale=(sz[0], sz[1], 0.0), **kw)
            elif t == "cylinder":
                idx = s.add_shape(type=GeoType.CYLINDER, scale=(sz[0], sz[1], 0.0), **kw)
            elif t == "box":
                idx = s.add_shape(type=GeoType.BOX, scale=tuple(sz), **kw)
            elif t == "ellipsoid":
                idx = s.add_shape(type=GeoType.ELLIPSOID, scale=tuple(sz), **kw)
            elif t == "mesh":
                mesh, scale, _, _ = p.load_mesh(g["mesh"], g["el"])
                idx = s.add_shape(type=GeoType.MESH, scale=tuple(scale.tolist()), src=mesh, **kw)
            elif t == "hfield":
                if body >= 0:
                    p.warn("geom.hfield_body", g["el"], "hfield geoms on moving bodies are not supported and were ignored")
                    return
                hf = self._hfield(g["hfield"])
                idx = s.add_shape(type=GeoType.HFIELD, scale=(1.0, 1.0, 1.0), src=hf, **kw)
            else:  # pragma: no cover
                return
        except ValueError as e:
            raise p.err(g["el"], str(e)) from None
        self.shape_info.append((idx, g, body))
        if g["name"]:
            self.geom_index[g["name"]] = idx

    def _hfield(self, name):
        from armillary import Heightfield

        p = self.p
        info = p.hfields[name]
        if "obj" in info:
            return info["obj"]
        el = info["el"]
        size = p.floats(el, None, "size", 4)
        if size is None or np.any(size <= 0):
            raise p.err(el, f"hfield {name!r} needs size='rx ry elev base' with positive values")
        nrow = int(p.scalar(el, None, "nrow", 0))
        ncol = int(p.scalar(el, None, "ncol", 0))
        if el.get("file"):
            p.warn("hfield.file", el, f"hfield {name!r}: elevation files are not supported; a flat field is used")
            nrow, ncol = max(nrow, 2), max(ncol, 2)
        if nrow < 2 or ncol < 2 or nrow * ncol > 1 << 26:
            raise p.err(el, f"hfield {name!r} needs nrow >= 2 and ncol >= 2 (and at most 2**26 samples)")
        data = np.zeros((nrow, ncol))
        if el.get("elevation"):
            e = p.floats(el, None, "elevation")
            if e.size != nrow * ncol:
                raise p.err(el, f"hfield {name!r}: elevation has {e.size} values, expected nrow*ncol={nrow * ncol}")
            e = e.reshape(nrow, ncol)
            rng = e.max() - e.min()
            data = (e - e.min()) / rng if rng > 0 else np.zeros_like(e)
        hf = Heightfield(data * size[2], nrow, ncol, hx=size[0], hy=size[1], min_z=-size[3], max_z=size[2])
        info["obj"] = hf
        return hf

    def _site(self, st: dict, body: int, frame: Tf):
        from armillary.sim.enums import GeoType

        t = st["type"]
        sz = st["size"]
        self.p.cur = st["el"]
        geo = {"sphere": GeoType.SPHERE, "capsule": GeoType.CAPSULE, "cylinder": GeoType.CYLINDER,
               "box": GeoType.BOX, "ellipsoid": GeoType.ELLIPSOID}[t]  # fmt: skip
        scale = {"sphere": (sz[0], 0.0, 0.0), "capsule": (sz[0], sz[1], 0.0), "cylinder": (sz[0], sz[1], 0.0)}.get(t, tuple(sz))
        tf = frame * st["tf"]
        custom = self.custom.values(self.custom.F.SHAPE, st["attrs"], st["el"], "site") or None
        try:
            idx = self.s.add_site(body, xform=wp.transform(*tf.xyzw()), type=geo, scale=scale,
                                  label=st["name"] or "site", custom_attributes=custom)  # fmt: skip
        except ValueError as e:
            raise self.p.err(st["el"], str(e)) from None
        if st["name"]:
            self.site_index[st["name"]] = idx

    # -------------------------------------------------------------- tendons (mujoco:tendon custom frequencies)
    def _has_freq(self, key: str) -> bool:
        return key in getattr(self.s, "custom_frequencies", {})

    def _solparams(self, el, a, key_ref, key_imp) -> tuple:
        """``(solref, solimp)`` of ``a`` padded with MuJoCo's defaults; None where not authored."""
        p = self.p
        ref = p.floats(el, a, key_ref, 2, nmin=1, allow_inf=True)
        imp = p.floats(el, a, key_imp, 5, nmin=1)
        if ref is not None:
            ref = tuple(ref.tolist() + list(_SOLREF0[len(ref):]))
        if imp is not None:
            imp = tuple(imp.tolist() + list(_SOLIMP0[len(imp):]))
        return ref, imp

    def tendons(self):
        """``<tendon><fixed|spatial>`` into the ``mujoco:tendon*`` rows (when SolverMuJoCo declared them)."""
        p = self.p
        self.tendon_rows: dict[str, int] = {}  # tendon name -> row (scratch builder)
        self.tendon_skipped: set[str] = set()
        if not p.tendon_sections:
            return
        if not self._has_freq("mujoco:tendon"):
            for el in p.tendon_sections:
                p.warn("tendon", el, "<tendon> is not supported and was ignored (install the MuJoCo solver plugin to "
                       "import tendons as mujoco:tendon custom attributes)")  # fmt: skip
            return
        for sec in p.tendon_sections:
            for el in sec:
                if el.tag not in ("fixed", "spatial"):
                    p.warn(f"tendon/{el.tag}", el, f"<tendon><{el.tag}> is not supported and was ignored")
                    continue
                self._tendon(el)

    def _tendon(self, el):
        p, s = self.p, self.s
        p.cur = el
        a = p.resolve(el, "tendon", "main")
        name = a.get("name") or ""
        if name and (name in self.tendon_rows or name in self.tendon_skipped):
            raise p.err(el, f"tendon name {name!r} is used twice")
        self.tendon_count = getattr(self, "tendon_count", 0) + 1
        label = name or f"tendon{self.tendon_count - 1}"

        def skip(key, msg):
            p.warn(key, el, msg)
            if name:
                self.tendon_skipped.add(name)

        vals = {"mujoco:tendon_label": name, "mujoco:tendon_type": 0 if el.tag == "fixed" else 1}
        rng = p.floats(el, a, "range", 2, allow_inf=True)
        lim = a.get("limited", "auto").strip().lower()
        if lim not in ("true", "false", "auto"):
            raise p.err(el, f"limited={lim!r} must be true, false or auto")
        limited = (rng is not None and p.c.autolimits) if lim == "auto" else lim == "true"
        if limited:
            r = rng if rng is not None else np.zeros(2)
            if not r[0] < r[1]:
                raise p.err(el, f"tendon {label!r}: range lower {r[0]} must be smaller than upper {r[1]}")
        vals["mujoco:tendon_limited"] = bool(limited)
        if rng is not None:
            vals["mujoco:tendon_range"] = tuple(float(x) for x in rng)
        for key, attr in (("stiffness", "mujoco:tendon_stiffness"), ("damping", "mujoco:tendon_damping")):
            v = p.floats(el, a, key, 3, nmin=1)
            if v is not None:
                vals[attr] = tuple(v.tolist() + [0.0] * (3 - len(v)))
        sl = p.floats(el, a, "springlength", 2, nmin=1)
        if sl is not None:
            vals["mujoco:tendon_springlength"] = (float(sl[0]), float(sl[-1]))
        for key, attr in (("frictionloss", "mujoco:tendon_frictionloss"), ("margin", "mujoco:tendon_margin"),
                          ("armature", "mujoco:tendon_armature")):  # fmt: skip
            v = p.scalar(el, a, key, None, minimum=0.0 if key != "margin" else None)
            if v is not None:
                vals[attr] = v
        for kr, ki, ar, ai in (("solreflimit", "solimplimit", "mujoco:tendon_solref_limit", "mujoco:tendon_solimp_limit"),
                               ("solreffriction", "solimpfriction", "mujoco:tendon_solref_friction",
                                "mujoco:tendon_solimp_friction")):  # fmt: skip
            ref, imp = self._solparams(el, a, kr, ki)
            if ref is not None:
                vals[ar] = ref
            if imp is not None:
                vals[ai] = imp
        afr = p.floats(el, a, "actuatorfrcrange", 2, allow_inf=True)
        afl = a.get("actuatorfrclimited", "auto").strip().lower()
        vals["mujoco:tendon_actfrclimited"] = (afr is not None and p.c.autolimits) if afl == "auto" else afl == "true"
        if afr is not None:
            vals["mujoco:tendon_actfrcrange"] = tuple(float(x) for x in afr)
        # path
        terms = []
        if el.tag == "fixed":
            for c in el:
                if c.tag != "joint":
                    raise p.err(c, f"<fixed> tendons contain <joint> elements, got <{c.tag}>")
                jn = c.get("joint")
                coef = p.scalar(c, None, "coef", None)
                if coef is None:
                    raise p.err(c, "tendon <joint> needs a coef")
                if jn not in self.joint_map or jn not in p.named_joints:
                    return skip("tendon.joint", f"<tendon> {label!r} refers to unknown joint {jn!r} and was ignored")
                idx, _, kd, jtype = self.joint_map[jn]
                if jtype not in ("hinge", "slide"):
                    raise p.err(c, f"fixed tendon {label!r}: joint {jn!r} is a {jtype} joint (hinge or slide needed)")
                terms.append({"mujoco:tendon_joint": idx, "mujoco:tendon_joint_dof": kd, "mujoco:tendon_coef": coef})
            if not terms:
                raise p.err(el, f"fixed tendon {label!r} has no joints")
        else:
            for c in el:
                if c.tag == "site":
                    sn = c.get("site")
                    if sn not in p.sites_by_name:
                        raise p.err(c, f"unknown site {sn!r}")
                    if sn not in self.site_index:
                        return skip("tendon.site", f"<tendon> {label!r} uses site {sn!r}, which was not imported "
                                    "(parse_sites=False); tendon ignored")  # fmt: skip
                    terms.append({"mujoco:tendon_wrap_type": 0, "mujoco:tendon_wrap_shape": self.site_index[sn]})
                elif c.tag == "geom":
                    gn = c.get("geom")
                    gi = self.geom_index.get(gn)
                    if gi is None:
                        return skip("tendon.geom", f"<tendon> {label!r} wraps geom {gn!r}, which is unknown or was not "
                                    "imported; tendon ignored")  # fmt: skip
                    row = {"mujoco:tendon_wrap_type": 1, "mujoco:tendon_wrap_shape": gi}
                    side = c.get("sidesite")
                    if side:
                        if side not in self.site_index:
                            return skip("tendon.site", f"<tendon> {label!r} uses sidesite {side!r}, which is unknown "
                                        "or was not imported; tendon ignored")  # fmt: skip
                        row["mujoco:tendon_wrap_sidesite"] = self.site_index[side]
                    terms.append(row)
                elif c.tag == "pulley":
                    div = p.scalar(c, None, "divisor", None)
                    if div is None or div <= 0:
                        raise p.err(c, "pulley needs a positive divisor")
                    terms.append({"mujoco:tendon_wrap_type": 2, "mujoco:tendon_wrap_divisor": div})
                else:
                    raise p.err(c, f"<spatial> tendons contain <site>, <geom> and <pulley>, got <{c.tag}>")
            if sum(1 for t in terms if t["mujoco:tendon_wrap_type"] == 0) < 2:
                raise p.err(el, f"spatial tendon {label!r} needs at least two sites")
        freq = "mujoco:tendon_joint" if el.tag == "fixed" else "mujoco:tendon_wrap"
        adr = s.get_custom_frequency_count(freq)
        for t in terms:
            s.add_custom_values(t)
        if el.tag == "fixed":
            vals.update({"mujoco:tendon_joint_adr": adr, "mujoco:tendon_joint_num": len(terms)})
        else:
            vals.update({"mujoco:tendon_wrap_adr": adr, "mujoco:tendon_wrap_num": len(terms)})
        row = s.add_custom_values(vals)["mujoco:tendon_label"]
        if name:
            self.tendon_rows[name] = row

    def _tendon_equality(self, e, a, active):
        p, s = self.p, self.s
        rows = []
        for key in ("tendon1", "tendon2"):
            tn = e.get(key)
            if not tn:
                rows.append(-1)
                continue
            if tn in self.tendon_skipped:
                p.warn("equality.tendon_skipped", e, f"tendon equality on ignored tendon {tn!r} was ignored")
                return
            if tn not in self.tendon_rows:
                raise p.err(e, f"unknown {key} {tn!r}")
            rows.append(self.tendon_rows[tn])
        if rows[0] < 0:
            raise p.err(e, "tendon equality needs tendon1")
        pc = p.floats(e, a, "polycoef", 5, default=(0.0, 1.0, 0.0, 0.0, 0.0), nmin=1)
        vals = {"mujoco:tendon_eq_tendon1": rows[0], "mujoco:tendon_eq_tendon2": rows[1],
                "mujoco:tendon_eq_polycoef": tuple(pc.tolist() + [0.0] * (5 - len(pc))),
                "mujoco:tendon_eq_active": bool(active), "mujoco:tendon_equality_label": a.get("name") or ""}  # fmt: skip
        ref, imp = self._solparams(e, a, "solref", "solimp")
        if ref is not None:
            vals["mujoco:tendon_eq_solref"] = ref
        if imp is not None:
            vals["mujoco:tendon_eq_solimp"] = imp
        s.add_custom_values(vals)

    def _eq_custom(self, e, a) -> dict:
        """``mujoco:eq_solref`` / ``mujoco:eq_solimp`` of the joint made from equality ``e`` (when declared)."""
        out = {}
        ref, imp = self._solparams(e, a, "solref", "solimp")
        if ref is not None and "mujoco:eq_solref" in self.s.custom_attributes:
            out["mujoco:eq_solref"] = ref
        if imp is not None and "mujoco:eq_solimp" in self.s.custom_attributes:
            out["mujoco:eq_solimp"] = imp
        return out

    # -------------------------------------------------------------- equality constraints
    def _frame_of(self, el, body_key, site_key):
        """(body, frame in body) named by ``body_key`` or ``site_key``; body None means the world."""
        p = self.p
        if el.get(site_key):
            name = el.get(site_key)
            if name not in p.sites_by_name:
                raise p.err(el, f"unknown site {name!r}")
            b, st = p.sites_by_name[name]
            return (None if b.parent is None else b), st["tf"]
        name = el.get(body_key)
        if name is None or name == "world":
            return None, Tf()
        if name not in p.bodies_by_name:
            raise p.err(el, f"unknown body {name!r}")
        return p.bodies_by_name[name], Tf()

    def equalities(self):
        from armillary.sim.enums import JointType

        p, s = self.p, self.s
        if self.opts["skip_equality_constraints"]:
            if p.equalities:
                p.warn("equality.skipped", p.equalities[0], "equality constraints skipped (skip_equality_constraints=True)")
            return
        for e in p.equalities:
            p.cur = e
            a = p.resolve(e, "equality", "main")
            active = _truthy(a.get("active"), True, p.loc, e, "active")
            tag = e.tag
            name = a.get("name")
            if tag in ("connect", "weld"):
                if tag == "connect" and not (e.get("site1") or e.get("body1")):
                    raise p.err(e, "connect needs body1 or site1")
                if tag == "weld" and not (e.get("site1") or e.get("body1")):
                    raise p.err(e, "weld needs body1 or site1")
                b1, f1 = self._frame_of(e, "body1", "site1")
                b2, f2 = self._frame_of(e, "body2", "site2")
                if b1 is b2:
                    raise p.err(e, f"{tag} constrains a body to itself")
                w1 = Tf() if b1 is None else b1.world
                w2 = Tf() if b2 is None else b2.world
                sites = bool(e.get("site1"))
                if tag == "connect":
                    if sites:
                        x1, x2 = Tf(f1.p), Tf(f2.p)
                    else:
                        anchor = p.floats(e, a, "anchor", 3, default=(0.0, 0.0, 0.0))
                        x1 = Tf(anchor)
                        world_anchor = w1.point(anchor)
                        x2 = Tf(w2.inv().point(world_anchor), qmul(w2.inv().q, w1.q))
                    jt = JointType.BALL
                else:
                    ts = p.scalar(e, a, "torquescale", 1.0)
                    if sites:
                        x1, x2 = f1, f2
                    else:
                        anchor = p.floats(e, a, "anchor", 3, default=(0.0, 0.0, 0.0))
                        rp = p.floats(e, a, "relpose", 7)
                        if rp is not None and np.linalg.norm(rp[3:]) > _MINVAL:
                            rel = Tf(rp[:3], qnorm(rp[3:]))
                        else:
                            rel = w1.inv() * w2
                        x2 = Tf(anchor)
                        x1 = rel * Tf(anchor)
                    jt = JointType.FIXED
                    if ts == 0.0:
                        jt = JointType.BALL
                        p.warn("weld.torquescale0", e, "weld with torquescale=0 imported as a BALL loop joint")
                    elif ts != 1.0:
                        p.warn("weld.torquescale", e, f"weld torquescale={ts} imported as a FIXED loop joint (enforced in full)")
                if b1 is None:  # world as parent
                    parent, child, xp, xc = -1, b2.index, self.static_frame * x1, x2
                elif b2 is None:
                    parent, child, xp, xc = -1, b1.index, self.static_frame * x2, x1
                else:
                    parent, child, xp, xc = b1.index, b2.index, x1, x2
                n1 = e.get("body1") or e.get("site1")
                n2 = e.get("body2") or e.get("site2") or "world"
                label = name or f"{tag}_{n1}_{n2}"
                eqc = self._eq_custom(e, a) or None
                if jt == JointType.BALL:
                    cfgs = [s.default_joint_cfg.__class__(axis=tuple(ax)) for ax in np.eye(3)]
                    idx = s.add_joint(jt, parent, child, angular_axes=cfgs, label=label, enabled=active,
                                      parent_xform=wp.transform(*xp.xyzw()), child_xform=wp.transform(*xc.xyzw()),
                                      collision_filter_parent=False, custom_attributes=eqc)  # fmt: skip
                else:
                    idx = s.add_joint(jt, parent, child, label=label, enabled=active, collision_filter_parent=False,
                                      parent_xform=wp.transform(*xp.xyzw()), child_xform=wp.transform(*xc.xyzw()),
                                      custom_attributes=eqc)  # fmt: skip
                self.loop_joints.append(idx)
            elif tag == "joint":
                j1 = e.get("joint1")
                j2 = e.get("joint2")
                if not j1 or j1 not in self.joint_map:
                    raise p.err(e, f"unknown joint1 {j1!r}")
                if not j2:
                    p.warn("equality.joint_single", e, "joint equality without joint2 (locks a joint) is not supported and was ignored")
                    continue
                if j2 not in self.joint_map:
                    raise p.err(e, f"unknown joint2 {j2!r}")
                pc = p.floats(e, a, "polycoef", 5, default=(0.0, 1.0, 0.0, 0.0, 0.0), nmin=1)
                pc = np.concatenate([pc, np.zeros(5 - len(pc))])
                if np.any(pc[2:] != 0):
                    p.warn("equality.polycoef", e, "joint equality polycoef terms beyond linear are not supported and were dropped")
                (ia, ka, _, ta), (ib, kb, _, tb) = self.joint_map[j1], self.joint_map[j2]
                scalar = (JointType.REVOLUTE, JointType.PRISMATIC)
                if s.joint_type[ia] not in scalar or s.joint_type[ib] not in scalar:
                    p.warn("equality.joint_multi", e, "joint equality on a joint merged into a multi-DOF joint is not supported and was ignored")
                    continue
                if not active:
                    p.warn("equality.inactive", e, "inactive joint equality ignored")
                    continue
                r1 = s.joint_q[s.joint_q_start[ia]]
                r2 = s.joint_q[s.joint_q_start[ib]]
                # MuJoCo: q1 - ref1 = c0 + c1 (q2 - ref2)
                try:
                    s.set_joint_mimic(ia, ib, coeffs=(float(pc[0] + r1 - pc[1] * r2), float(pc[1])))
                except ValueError as ex:
                    raise p.err(e, str(ex)) from None
                for key, v in self._eq_custom(e, a).items():
                    s.custom_attributes[key].values[ia] = v
            elif tag == "tendon" and self._has_freq("mujoco:tendon_equality"):
                self._tendon_equality(e, a, active)
            else:
                p.warn(f"equality/{tag}", e, f"<equality><{tag}> is not supported and was ignored")

    # -------------------------------------------------------------- actuators
    def actuators(self):
        """``<actuator>`` elements on hinge / slide joints: joint drives (default) or, with
        ``actuator_components=True``, ``add_actuator`` entries (see :meth:`_add_actuator_component`)."""
        from armillary.sim.enums import JointTargetMode

        p, s = self.p, self.s
        components = bool(self.opts.get("actuator_components", False))
        self._component_readers: dict[int, list] = {}  # dof -> [(element, joint, reads q*, reads qd*, effort form)]
        for el in p.actuators:
            p.cur = el
            tag = el.tag
            if tag not in _ACTUATOR_TAGS:
                p.warn(f"actuator/{tag}", el, f"<actuator><{tag}> is not supported and was ignored")
                continue
            a = p.resolve(el, tag, "main")
            for lim, key in (("ctrllimited", "ctrlrange"), ("forcelimited", "forcerange"), ("actlimited", "actrange")):
                if a.get(lim) == "true":  # MuJoCo checks explicitly limited ranges only
                    r = p.floats(el, a, key, 2, allow_inf=True)
                    if r is None or not r[0] < r[1]:
                        raise p.attr_err(el, a, key if r is not None else lim,
                                         f"{lim}='true' needs {key} with lower < upper, got {a.get(key)!r}")
            jname = a.get("joint")
            if not jname:
                kind = next((k for k in ("tendon", "site", "body", "jointinparent") if a.get(k)), None)
                if kind == "jointinparent":
                    jname = a.get("jointinparent")
                else:
                    p.warn(f"actuator.{kind}", el, f"actuators on a {kind or 'missing'} transmission are not supported and were ignored")
                    continue
            if jname not in self.joint_map:
                raise p.err(el, f"unknown joint {jname!r}")
            ji, _, kd, jtype = self.joint_map[jname]
            if jtype in ("free", "ball"):
                p.warn("actuator.multidof", el, f"actuators on {jtype} joints are not supported and were ignored")
                continue
            dof = s.joint_qd_start[ji] + kd
            gear = p.floats(el, a, "gear", 6, default=(1.0, 0, 0, 0, 0, 0), nmin=1)[0]
            kp = kv = 0.0
            const = 0.0  # biasprm[0] (actuator components only)
            gain0 = 1.0  # force per control unit of the effort forms
            mode = None
            if tag == "motor":
                mode = JointTargetMode.EFFORT
            elif tag == "position":
                kp = p.scalar(el, a, "kp", 1.0, minimum=0.0)
                kv = p.scalar(el, a, "kv", 0.0, minimum=0.0)
                if a.get("dampratio") is not None:
                    p.warn("actuator.dampratio", el, "position actuator dampratio is not supported; kv=0 used")
                mode = JointTargetMode.POSITION_VELOCITY if kv > 0 else JointTargetMode.POSITION
            elif tag == "velocity":
                kv = p.scalar(el, a, "kv", 1.0, minimum=0.0)
                mode = JointTargetMode.VELOCITY
            elif tag == "general":
                gain = p.floats(el, a, "gainprm", 10, default=(1.0,), nmin=1)
                bias = p.floats(el, a, "biasprm", 10, default=(0.0, 0.0, 0.0), nmin=1)
                bias = np.concatenate([bias, np.zeros(max(0, 3 - len(bias)))])
                gt, bt = a.get("gaintype", "fixed"), a.get("biastype", "none")
                if a.get("dyntype", "none") != "none":
                    p.warn("actuator.dyntype", el, "general actuator activation dynamics are not supported; treated as direct")
                # the drive path has no constant term: it needs biasprm[0] == 0; components take it as const_effort
                b0_ok = components or bias[0] == 0
                if gt == "fixed" and bt == "none":
                    mode = JointTargetMode.EFFORT
                    gain0 = float(gain[0])
                elif gt == "fixed" and bt == "affine" and b0_ok and abs(bias[1] + gain[0]) <= 1e-12 * max(1.0, abs(gain[0])):
                    kp, kv, const = float(gain[0]), float(-bias[2]), float(bias[0])
                    mode = JointTargetMode.POSITION_VELOCITY if kv > 0 else JointTargetMode.POSITION
                elif gt == "fixed" and bt == "affine" and b0_ok and bias[1] == 0 and abs(bias[2] + gain[0]) <= 1e-12 * max(1.0, abs(gain[0])):
                    kv, const = float(gain[0]), float(bias[0])
                    mode = JointTargetMode.VELOCITY
                else:
                    p.warn("actuator.general", el, f"general actuator (gaintype={gt}, biastype={bt}) has no joint-drive equivalent and was ignored")
                    continue
            else:
                p.warn(f"actuator/{tag}", el, f"<{tag}> actuators are not supported and were ignored")
                continue
            fl = a.get("forcelimited", "auto")
            fr = p.floats(el, a, "forcerange", 2, allow_inf=True)
            if components:
                self._add_actuator_component(el, a, tag, jname, dof, mode, kp, kv, const, gain0, gear, fr, fl)
                continue
            if mode in (JointTargetMode.POSITION, JointTargetMode.VELOCITY, JointTargetMode.POSITION_VELOCITY) and gear != 1.0:
                p.warn("actuator.gear", el, "position/velocity actuators with gear != 1 are imported with gear 1")
            s.joint_target_ke[dof] = kp
            s.joint_target_kd[dof] = kv
            s.joint_target_mode[dof] = int(mode)
            # an infinite range is no limit (the builder's default effort limit stays)
            if fr is not None and fl != "false" and np.all(np.isfinite(fr)):
                s.joint_effort_limit[dof] = float(max(abs(fr[0]), abs(fr[1])) * abs(gear))
            elif mode == JointTargetMode.EFFORT:
                cr = p.floats(el, a, "ctrlrange", 2, allow_inf=True)
                if cr is not None and a.get("ctrllimited", "auto") != "false" and np.all(np.isfinite(cr)):
                    s.joint_effort_limit[dof] = float(max(abs(cr[0]), abs(cr[1])) * abs(gear))
        for readers in self._component_readers.values():
            # one joint, several actuators: they share the joint's command arrays
            effort = any(r[4] for r in readers)
            shared = [name for k, name in ((2, "joint_target_q"), (3, "joint_target_qd"))
                      if sum(r[k] for r in readers) > 1]
            if len(readers) > 1 and (effort or shared):
                shared += ["joint_act"] if effort else []
                p.warn("actuator.shared_joint", readers[0][0],
                       f"joint {readers[0][1]!r} has {len(readers)} actuators; with actuator_components=True they read "
                       f"the same {' / '.join(shared)} entry (each ControllerPD also adds joint_act), so their "
                       "commands are not independent as in MuJoCo")  # fmt: skip

    def _add_actuator_component(self, el, a, tag, jname, dof, mode, kp, kv, const, gain0, gear, fr, fl):
        """One actuator as a ``ControllerPD`` entry (``actuator_components=True``); no joint drive is set.

        MuJoCo's actuator length is ``gear * q`` and its joint effort ``gear * force``. With the
        commands in joint space (``joint_target_q`` / ``joint_target_qd`` = ``ctrl / gear``,
        ``joint_act`` = the joint effort ``gear * gain * ctrl``), a position actuator
        ``force = kp (ctrl - gear q) - kv gear qd + b0`` becomes ``ControllerPD(kp gear^2,
        kv gear^2, const_effort = gear b0)`` exactly; the force range becomes
        ``ClampingMaxEffort(|gear| max|forcerange|)`` (and for the effort forms a limited ctrlrange
        ``|gear gain| max|ctrlrange|``, the smaller one when both apply).
        """
        from armillary.sim.enums import JointTargetMode

        p, s = self.p, self.s
        g = float(gear)
        if kp < 0.0 or kv < 0.0:
            p.warn("actuator.negative_gain", el, f"<{tag}> actuator with a negative gain (kp={kp}, kv={kv}) has no "
                   "ControllerPD equivalent and was ignored")  # fmt: skip
            return
        if mode == JointTargetMode.EFFORT:
            gains = {"kp": 0.0, "kd": 0.0}
        elif mode == JointTargetMode.VELOCITY:
            gains = {"kp": 0.0, "kd": kv * g * g}
        else:
            gains = {"kp": kp * g * g, "kd": kv * g * g}
        if const != 0.0:
            gains["const_effort"] = g * const
        limits = []
        if fr is not None and fl != "false":
            if fr[0] != -fr[1]:
                p.warn("actuator.asymmetric_range", el, "an asymmetric forcerange is imported as the symmetric limit "
                       "+-max(|min|, |max|)")  # fmt: skip
            limits.append(float(max(abs(fr[0]), abs(fr[1])) * abs(g)))
        if mode == JointTargetMode.EFFORT:
            cr = p.floats(el, a, "ctrlrange", 2, allow_inf=True)
            if cr is not None and a.get("ctrllimited", "auto") != "false":
                limits.append(float(max(abs(cr[0]), abs(cr[1])) * abs(g * gain0)))
        clamping = [("ClampingMaxEffort", {"max_effort": min(limits)})] if limits and np.isfinite(min(limits)) else None
        self._component_readers.setdefault(dof, []).append(
            (el, jname, gains["kp"] > 0.0, gains["kd"] > 0.0, mode == JointTargetMode.EFFORT))
        try:
            s.add_actuator("ControllerPD", index=dof, clamping=clamping, **gains)
        except ValueError as exc:
            raise p.err(el, f"actuator_components=True: {exc} (the armillary-actuators plugin provides the "
                        "actuator components)") from None  # fmt: skip

    # -------------------------------------------------------------- collisions
    def collisions(self):
        p, s = self.p, self.s
        shapes = [(i, g, b) for i, g, b in self.shape_info if s.shape_flags[i] & 0 == 0]
        colliding = [(i, g, b) for i, g, b in self.shape_info
                     if g["contype"] != 0 or g["conaffinity"] != 0 or (g["name"] and g["name"] in self.pair_geoms)]
        # weld groups: bodies rigidly attached to each other (MuJoCo never collides geoms of one weld group)
        from armillary.sim.enums import JointType

        weld = {}

        def root(b):
            while weld.get(b, b) != b:
                b = weld[b]
            return b

        for j in range(self.tree_joint_count):
            if s.joint_type[j] == JointType.FIXED:
                pa, ch = s.joint_parent[j], s.joint_child[j]
                weld[root(ch)] = root(pa)
        real_parent = {}
        for j in range(self.tree_joint_count):
            ch, pa = s.joint_child[j], s.joint_parent[j]
            real_parent[ch] = pa

        def body_parent(b):  # nearest real (non-intermediate) ancestor
            pa = real_parent.get(b, -1)
            while pa in self.intermediate:
                pa = real_parent.get(pa, -1)
            return pa

        def weld_root(b):  # weld group of body b; -1: the world's
            if b < 0:
                return -1
            r = root(b)
            if r >= 0 and real_parent.get(r, None) == -1 and s.joint_type[s._body_joints[r][0]] == JointType.FIXED:
                return -1
            return r

        def weld_parent(r):  # weld group of the parent of weld group r
            return weld_root(body_parent(r))

        excluded = set()
        for e in p.excludes:
            n1, n2 = e.get("body1"), e.get("body2")
            for n in (n1, n2):
                if n not in p.bodies_by_name and n != "world":
                    raise p.err(e, f"unknown body {n!r}")
            b1 = -1 if n1 == "world" else p.bodies_by_name[n1].index
            b2 = -1 if n2 == "world" else p.bodies_by_name[n2].index
            excluded.add((min(b1, b2), max(b1, b2)))
        art_of = {}
        for j in range(self.tree_joint_count):
            art_of[s.joint_child[j]] = s.joint_articulation[j]
        self_coll = self.opts["enable_self_collisions"]
        allowed = set()
        geom_shape = {}
        for i, g, b in self.shape_info:
            if g["name"]:
                geom_shape[g["name"]] = i
        for e in p.pairs:
            g1, g2 = e.get("geom1"), e.get("geom2")
            if g1 not in geom_shape or g2 not in geom_shape:
                raise p.err(e, f"unknown geom in pair ({g1!r}, {g2!r})")
            allowed.add((min(geom_shape[g1], geom_shape[g2]), max(geom_shape[g1], geom_shape[g2])))
        pairs = s.shape_collision_filter_pairs
        n = len(colliding)
        for x in range(n):
            ia, ga, ba = colliding[x]
            for y in range(x + 1, n):
                ib, gb, bb = colliding[y]
                if ba == bb:
                    continue
                key = (min(ia, ib), max(ia, ib))
                if key in allowed:
                    continue
                filt = False
                if not ((ga["contype"] & gb["conaffinity"]) or (gb["contype"] & ga["conaffinity"])):
                    filt = True
                elif (min(ba, bb), max(ba, bb)) in excluded:
                    filt = True
                else:
                    ra = -1 if ba < 0 else root(ba)
                    rb = -1 if bb < 0 else root(bb)
                    # world-welded bodies share the world's weld group
                    ra = -1 if ra >= 0 and real_parent.get(ra, None) == -1 and s.joint_type[s._body_joints[ra][0]] == JointType.FIXED else ra
                    rb = -1 if rb >= 0 and real_parent.get(rb, None) == -1 and s.joint_type[s._body_joints[rb][0]] == JointType.FIXED else rb
                    if ra == rb:
                        filt = True
                    elif ba >= 0 and bb >= 0:
                        # MuJoCo's parent filter compares weld groups and never applies to the world's group
                        if (ra >= 0 and rb >= 0 and (ra == weld_parent(rb) or rb == weld_parent(ra))
                                and self.p.options.get("flag", {}).get("filterparent", "enable") != "disable"):
                            filt = True
                        elif not self_coll and art_of.get(ba, -2) == art_of.get(bb, -3):
                            filt = True
                if filt:
                    pairs.add(key)
                else:  # MuJoCo collides them (e.g. a child of a world-welded body): undo the builder's parent filter
                    pairs.discard(key)
        for key in allowed:
            pairs.discard(key)

    # -------------------------------------------------------------- <contact> as mujoco:pair / mujoco:exclude rows
    def contact_rows(self):
        """``<contact><pair>`` into ``mujoco:pair`` rows and ``<contact><exclude>`` into ``mujoco:exclude``
        rows (when SolverMuJoCo declared them); the collision filter pairs are made by :meth:`collisions`."""
        p, s = self.p, self.s
        if p.pairs and self._has_freq("mujoco:pair"):
            geom_shape = {g["name"]: i for i, g, _ in self.shape_info if g["name"]}
            for e in p.pairs:
                self._pair_row(e, geom_shape)
        if p.excludes and self._has_freq("mujoco:exclude"):
            for e in p.excludes:
                n1, n2 = e.get("body1"), e.get("body2")
                b1 = -1 if n1 == "world" else p.bodies_by_name[n1].index
                b2 = -1 if n2 == "world" else p.bodies_by_name[n2].index
                if b1 == b2:
                    continue  # merged into one body (collapse_fixed_joints): its geoms never collide anyway
                s.add_custom_values({"mujoco:exclude_body1": b1, "mujoco:exclude_body2": b2,
                                     "mujoco:exclude_label": e.get("name") or ""})  # fmt: skip

    def _pair_row(self, e, geom_shape: dict):
        p = self.p
        g1, g2 = e.get("geom1"), e.get("geom2")
        if g1 not in geom_shape or g2 not in geom_shape:
            raise p.err(e, f"unknown geom in pair ({g1!r}, {g2!r})")
        # MuJoCo takes an explicit pair's parameters from the pair and its default classes, never
        # from the geoms; a partially given vector keeps the remaining numbers of the class chain
        vals = {"condim": 3, "friction": [1.0, 1.0, 0.005, 0.0001, 0.0001], "solref": list(_SOLREF0),
                "solreffriction": [0.0, 0.0], "solimp": list(_SOLIMP0), "margin": 0.0, "gap": 0.0, "adhesion": 0.0}
        for attrs in p.resolve_levels(e, "pair", "main"):
            for key, n in (("friction", 5), ("solref", 2), ("solreffriction", 2), ("solimp", 5)):
                v = p.floats(e, attrs, key, n, nmin=1, allow_inf=key.startswith("solref"))
                if v is not None:
                    vals[key][:len(v)] = v.tolist()
            for key in ("margin", "gap", "adhesion"):
                v = p.floats(e, attrs, key, 1)
                if v is not None:
                    vals[key] = float(v[0])
            v = p.floats(e, attrs, "condim", 1)
            if v is not None:
                if float(v[0]) != int(v[0]):
                    raise p.err(e, f"pair condim={attrs['condim']!r} must be an integer")
                vals["condim"] = int(v[0])
        if vals["condim"] not in (1, 3, 4, 6):
            raise p.err(e, f"invalid condim {vals['condim']} in contact pair (MuJoCo allows 1, 3, 4 or 6)")
        row = {f"mujoco:pair_{k}": (tuple(v) if isinstance(v, list) else v) for k, v in vals.items()}
        row.update({"mujoco:pair_geom1": geom_shape[g1], "mujoco:pair_geom2": geom_shape[g2],
                    "mujoco:pair_label": e.get("name") or ""})  # fmt: skip
        self.s.add_custom_values({k: v for k, v in row.items() if k in self.s.custom_attributes})

    # -------------------------------------------------------------- merge
    def commit(self):
        target, s, opts = self.target, self.s, self.opts
        pb = opts["parent_body"]
        art = None
        nj0 = target.joint_count
        if pb >= 0:
            if pb >= target.body_count:
                raise ValueError(f"add_mjcf: parent_body={pb} is not a body index (body count {target.body_count})")
            js = target._body_joints.get(pb, [])
            arts = {target.joint_articulation[j] for j in js if target.joint_child[j] == pb}
            art = next(iter(arts)) if arts else -1
            if art < 0 or art != target.articulation_count - 1 or target.articulation_end[art] != nj0:
                raise ValueError(
                    f"add_mjcf: parent_body={pb} ('{target.body_label[pb]}') must belong to the most recently added "
                    "articulation (whose joints are the last ones added)"
                )
        na0, nb0, ns0 = target.articulation_count, target.body_count, target.shape_count
        target.add_builder(s)
        if pb >= 0:
            n_tree = self.tree_joint_count
            for j in range(nj0, nj0 + n_tree):
                if target.joint_parent[j] == -1:
                    ch = target.joint_child[j]
                    target.joint_parent[j] = pb
                    target.joint_parents[ch] = [pb if x == -1 else x for x in target.joint_parents.get(ch, [])]
                    if ch in target.joint_children.get(-1, []):
                        target.joint_children[-1].remove(ch)
                    target.joint_children.setdefault(pb, []).append(ch)
                    target._body_joints.setdefault(pb, []).append(j)
                    if target.joint_collision_filter_parent[j]:
                        target._filter_joint_shapes(pb, ch)
                target.joint_articulation[j] = art
            del target.articulation_start[na0:]
            del target.articulation_end[na0:]
            del target.articulation_label[na0:]
            del target.articulation_world[na0:]
            target.articulation_end[art] = nj0 + n_tree
            for j in range(nj0 + n_tree, target.joint_count):
                target.joint_articulation[j] = -1
        if opts["parse_mujoco_options"]:
            g = self.p.gravity
            if g is not None:
                gv = tuple(float(x) for x in g)
                if target.current_world >= 0:
                    target.world_gravity[target.current_world] = gv
                else:
                    target.gravity = gv
            if "timestep" in self.p.options:
                target.timestep = float(self.p.options["timestep"])
            target.mjcf_options = dict(self.p.options)
        info = {"file": self.p.file, "model": self.p.model_name, "body_offset": nb0, "shape_offset": ns0,
                "joint_offset": nj0, "joints": {k: (v[0] + nj0, v[1], v[2], v[3]) for k, v in self.joint_map.items()},
                "bodies": {b.name: b.index + nb0 for b in self.p.all_bodies}}  # fmt: skip
        if not hasattr(target, "mjcf_imports"):
            target.mjcf_imports = []
        target.mjcf_imports.append(info)


def _collapse_fixed(p: _Parser):
    """Merge bodies without joints into their (non-world) parent, MuJoCo frames kept."""
    def visit(b: _Body):
        for c in list(b.children):
            visit(c)
        if b.parent is None or b.parent.parent is None or b.joints or b.mocap:
            return
        par = b.parent
        # merge mass
        parts = []
        if par.mass > 0:
            parts.append((par.mass, par.com, par.inertia))
        if b.mass > 0:
            r = qmat(b.local.q)
            parts.append((b.mass, b.local.point(b.com), r @ b.inertia @ r.T))
        par.mass, par.com, par.inertia = _combine(parts) if parts else (0.0, np.zeros(3), np.zeros((3, 3)))
        par.explicit_inertial = par.explicit_inertial or b.explicit_inertial
        for g in b.geoms:
            g = dict(g)
            g["tf"] = b.local * g["tf"]
            par.geoms.append(g)
        for st in b.sites:
            st2 = dict(st)
            st2["tf"] = b.local * st["tf"]
            par.sites.append(st2)
            if st["name"]:
                p.sites_by_name[st["name"]] = (par, st2)
        idx = par.children.index(b)
        par.children[idx:idx + 1] = b.children
        for c in b.children:
            c.parent = par
            c.local = b.local * c.local
        p.bodies_by_name[b.name] = par
        b.merged_into = par
        p.all_bodies.remove(b)

    for top in list(p.world.children):
        visit(top)


def mujoco_qpos_to_joint_q(builder, qpos, *, mj_joint_names, mj_joint_types, mj_qposadr, import_index: int = -1):
    """Map a MuJoCo ``qpos`` vector onto ``builder.joint_q`` of an imported model (copy returned).

    ``mj_joint_names``/``mj_joint_types`` (0 free, 1 ball, 2 slide, 3 hinge)/``mj_qposadr`` describe
    MuJoCo's joints (e.g. from ``mujoco.MjModel`` or a ``.ref.npz``); quaternions are reordered from
    wxyz to xyzw. Hinge and slide coordinates are copied unchanged (``joint_q`` uses MuJoCo's qpos).
    """
    info = builder.mjcf_imports[import_index]
    q = np.array(builder.joint_q, dtype=np.float64)
    qpos = np.asarray(qpos, dtype=np.float64)
    for name, t, adr in zip(mj_joint_names, mj_joint_types, mj_qposadr):
        name = str(name)
        if name not in info["joints"]:
            continue
        j, k, _, _ = info["joints"][name]
        qs = builder.joint_q_start[j] + k
        t = int(t)
        if t == 0:
            v = qpos[adr:adr + 7]
            q[qs:qs + 7] = [v[0], v[1], v[2], v[4], v[5], v[6], v[3]]
        elif t == 1:
            v = qpos[adr:adr + 4]
            q[qs:qs + 4] = [v[1], v[2], v[3], v[0]]
        else:
            q[qs] = qpos[adr]
    return q


def add_mjcf(
    builder,
    source,
    *,
    xform=None,
    floating: bool | None = None,
    base_joint: dict | None = None,
    parent_body: int = -1,
    armature_scale: float = 1.0,
    hide_visuals: bool = False,
    parse_meshes: bool = True,
    parse_sites: bool = True,
    parse_visuals: bool = True,
    parse_mujoco_options: bool = True,
    enable_self_collisions: bool = True,
    ignore_inertial_definitions: bool = False,
    collapse_fixed_joints: bool = False,
    skip_equality_constraints: bool = False,
    path_resolver: Callable[[str | None, str], str] | None = None,
    actuator_components: bool = False,
    verbose: bool = False,
) -> None:
    """Add the bodies, joints, shapes and constraints of an MJCF model (file path or XML string) to ``builder``.

    Args:
        source: path of the MJCF file, or the XML content itself (a string starting with ``<``).
        xform: transform applied to the imported model (relative to ``parent_body`` when given; world-attached
            geoms always use it in the world frame).
        floating: ``None`` honors the file (``<freejoint>`` -> FREE, top-level bodies without joints -> FIXED);
            ``True`` makes joint-less (or free) top-level bodies FREE; ``False`` makes them FIXED.
        base_joint: ``dict`` of :meth:`ModelBuilder.add_joint` arguments (``joint_type`` required) used
            instead for joint-less / free top-level bodies. Mutually exclusive with ``floating``.
        parent_body: attach the top-level bodies to this body (it must belong to the most recently added
            articulation); the new joints join that articulation.
        armature_scale: factor applied to joint armature.
        hide_visuals: load visual-only geoms (``contype=conaffinity=0``) invisible.
        parse_meshes, parse_sites, parse_visuals: skip mesh geoms / sites / visual-only geoms when False.
        parse_mujoco_options: store ``<option>`` gravity on the builder (``builder.gravity``, or the open
            world's gravity), the timestep as ``builder.timestep`` and all option values as ``builder.mjcf_options``.
        enable_self_collisions: when False, shapes of one articulation never collide with each other.
        ignore_inertial_definitions: compute all inertias from geoms (like ``inertiafromgeom='true'``); MuJoCo's
            rule that bodies with joints need a mass is then not applied.
        collapse_fixed_joints: merge joint-less bodies into their parent body (not for link-break models).
        skip_equality_constraints: ignore ``<equality>``.
        path_resolver: ``f(base_dir, path) -> path`` for includes and meshes (an include may return XML text).
        actuator_components: armillary's option (the reference engine has none). ``False`` (default):
            ``<actuator>`` elements become joint drives (``joint_target_ke`` / ``joint_target_kd`` /
            ``joint_target_mode``, ``joint_effort_limit``; position / velocity actuators with
            ``gear != 1`` are imported with gear 1, with a warning). ``True``: position, velocity,
            motor and general (fixed gain; no bias, or an affine PD-form bias) actuators on hinge /
            slide joints become :meth:`ModelBuilder.add_actuator` entries instead (needs the
            ``armillary-actuators`` plugin; no joint drive is set, so nothing actuates twice): position ->
            ``ControllerPD(kp, kd=kv)``, velocity -> ``ControllerPD(kp=0, kd=kv)`` (reading
            ``joint_target_qd``), motor and general without bias -> ``ControllerPD(kp=0, kd=0)``
            passing the feedforward ``Control.joint_act``, general with ``gainprm[0] = kp`` and
            ``biasprm = (b0, -kp, -kv)`` -> the position form with ``const_effort = b0`` (and
            ``(b0, 0, -kv)``, ``gainprm[0] = kv``: the velocity form); a limited ``forcerange``
            (and, for motors, ``ctrlrange``) -> ``ClampingMaxEffort`` of the largest magnitude.
            Commands are in joint space: targets ``ctrl / gear``, ``joint_act`` the joint effort
            ``gear * gain * ctrl``; so the gains are scaled by ``gear**2``, ``const_effort`` and the
            effort limits by ``gear`` (exact MuJoCo dynamics for any gear). Several actuators on one
            joint add up as in MuJoCo but read the joint's one ``joint_target_q`` /
            ``joint_target_qd`` / ``joint_act`` entry (every ``ControllerPD`` adds ``joint_act``): a
            warning names joints where that couples their commands (e.g. a motor next to a position
            servo). Run the actuators each step (``model.actuators``, adding into
            ``Control.joint_f``) before the solver.
        verbose: print a summary of what was imported.

    Raises:
        MJCFImportError (a ``ValueError``): invalid input; the message names the file, line and element.
        MJCFFileNotFoundError (also a ``FileNotFoundError``): the model, an include or a mesh file is missing.

    The builder is left untouched when an exception is raised. Per import, ``builder.mjcf_imports`` gets a dict
    mapping MuJoCo joint names to ``(joint index, coordinate offset, dof offset, mujoco type)`` and body names
    to body indices (see :func:`mujoco_qpos_to_joint_q`).
    """
    if floating is not None and base_joint is not None:
        raise ValueError("add_mjcf: floating and base_joint are mutually exclusive; pass only one")
    parent_body = int(parent_body)
    if floating is True and parent_body >= 0:
        raise ValueError("add_mjcf: floating=True requires parent_body=-1 (FREE joints connect to the world)")
    if parent_body >= builder.body_count or parent_body < -1:
        raise ValueError(f"add_mjcf: parent_body={parent_body} is not a body index (body count {builder.body_count})")
    if xform is not None:
        from armillary.sim._convert import to_transform

        xform = to_transform(xform, "add_mjcf: xform")
    opts = dict(
        xform=xform, floating=floating, base_joint=base_joint, parent_body=parent_body,
        armature_scale=float(armature_scale), hide_visuals=hide_visuals, parse_meshes=parse_meshes,
        parse_sites=parse_sites, parse_visuals=parse_visuals, parse_mujoco_options=parse_mujoco_options,
        enable_self_collisions=enable_self_collisions, ignore_inertial_definitions=ignore_inertial_definitions,
        collapse_fixed_joints=collapse_fixed_joints, skip_equality_constraints=skip_equality_constraints,
        path_resolver=path_resolver, actuator_components=bool(actuator_components),
    )  # fmt: skip
    # declarations made here are undone if the import fails (the builder is left untouched)
    declared = (dict(getattr(builder, "custom_attributes", {})), dict(getattr(builder, "custom_frequencies", {})),
                dict(getattr(builder, "_custom_frequency_counts", {})))  # fmt: skip
    try:
        from armillary import plugins

        plugins.register_custom_attributes(builder)
    except Exception as e:  # a broken third-party plugin must not make every import fail silently
        warnings.warn(f"MJCF import: registering plugin custom attributes failed: {e}", MJCFImportWarning, stacklevel=2)
    p = _Parser.__new__(_Parser)
    p.file = source if isinstance(source, str) and not source.lstrip().startswith("<") else "<string>"
    try:
        _import(builder, p, source, opts, collapse_fixed_joints, verbose)
    except BaseException:
        for obj, name, old in zip((builder,) * 3, ("custom_attributes", "custom_frequencies", "_custom_frequency_counts"),
                                  declared):  # fmt: skip
            cur = getattr(obj, name, None)
            if isinstance(cur, dict):
                cur.clear()
                cur.update(old)
        raise


def _import(builder, p, source, opts, collapse_fixed_joints, verbose):
    try:
        p.__init__(builder, source, opts)
        p.parse()
        _compute_mass(p)
        if collapse_fixed_joints:
            _collapse_fixed(p)
        b = _Builder(p, builder, opts)
        b.build()
        b.tendons()
        b.equalities()
        b.actuators()
        b.collisions()
        b.contact_rows()
    except (MJCFImportError, ImportError):
        raise
    except Exception as e:  # anything else the input provoked: name the element being built, keep the cause
        cur = getattr(p, "cur", None)
        if cur is not None:
            raise p.loc.error(cur, f"{type(e).__name__}: {e}") from e
        raise MJCFImportError(f"{type(e).__name__}: {e}", file=p.file) from e
    b.commit()
    p.flush_warnings()
    if verbose:
        s = b.s
        print(f"add_mjcf({p.file}): {s.body_count} bodies, {s.joint_count} joints ({len(b.loop_joints)} loop), "
              f"{s.joint_dof_count} dofs, {s.shape_count} shapes")  # fmt: skip

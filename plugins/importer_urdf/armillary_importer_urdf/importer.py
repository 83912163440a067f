"""URDF importer serving ``ModelBuilder.add_urdf(source, ...)``.

The file is parsed with the standard library (``xml.parsers.expat`` feeding an
``xml.etree.ElementTree.TreeBuilder``, so that every element keeps its line number for
error messages). The whole model is first built into a scratch ``ModelBuilder``; only when
everything succeeded is it merged into the caller's builder with ``add_builder``, so a
failing import never leaves a partial model behind.

Conventions:

* body and joint labels are the file's own link and joint names (as in the MJCF importer, so
  ``builder.joint_label.index("left_knee")`` finds a joint); the generated root joint is
  ``"fixed_base"`` or ``"floating_base"`` (``"base_joint"`` for a custom ``base_joint``) and the
  articulation is labeled with the ``<robot>`` name. (The reference engine prefixes labels with
  ``"<robot>/"``; ArticulationView filters match the last path component, so patterns work
  either way.);
* joints are ordered depth first from the root (``joint_ordering="dfs"``) and bodies
  follow the joint order; ``body_q`` holds the zero-configuration world poses;
* URDF ``<inertial>`` wins over shape densities: the collision shapes of a link that has
  one add no mass; links without one get their mass from their collision shapes
  (density of ``builder.default_shape_cfg``);
* ``<mimic>`` chains are composed into direct references to independent joints;
* a file is one tree: a link that is the child of no joint besides the root is an error.
"""

from __future__ import annotations

import math
import os
import re
import warnings
import xml.etree.ElementTree as ET
import xml.parsers.expat
from pathlib import Path
from typing import Any, Callable

import numpy as np

__all__ = ["URDFImportError", "URDFImportWarning", "add_urdf", "resolve_uri"]


class URDFImportError(ValueError):
    """A URDF file (or string) that cannot be imported.

    Attributes: ``file`` (path or ``"<string>"``), ``line`` (1-based, or ``None``),
    ``element`` (e.g. ``"<joint name='j1'>"`` or ``None``), ``reason``.
    """

    def __init__(self, reason: str, file: str, line: int | None = None, element: str | None = None):
        self.reason = reason
        self.file = file
        self.line = line
        self.element = element
        where = file if line is None else f"{file}:{line}"
        what = f" {element}" if element else ""
        super().__init__(f"URDF {where}:{what} {reason}")


class URDFImportWarning(UserWarning):
    """Something in a URDF file was adjusted or skipped during import."""


_JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed", "floating", "planar")
# Largest magnitude accepted for lengths [m] (after ``scale``), angles [rad], masses [kg], mesh
# scale factors and mimic coefficients: larger values are no robot description (``rpy="0 0 -1e30"``
# is a typo or garbage) and lose all precision in the float32 model.
MAX_MAGNITUDE = 1e6
# a number as URDF writes it (no Python extras such as "1_000"); inf/nan are parsed, then judged
_NUMBER = re.compile(r"[+-]?((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|inf|infinity|nan)", re.IGNORECASE)
# children an element may hold once (urdfdom reads only the first; a second one is a mistake)
_SINGLE_CHILDREN = {
    "link": ("inertial",),
    "inertial": ("origin", "mass", "inertia"),
    "visual": ("origin", "geometry"),
    "collision": ("origin", "geometry"),
    "joint": ("origin", "parent", "child", "axis", "limit", "dynamics", "mimic"),
}
_MESH_CACHE: dict[tuple, Any] = {}
_MESH_CACHE_MAX = 512


# ---------------------------------------------------------------------------------------------
# math helpers (double precision; transforms are (p[3], q[4] xyzw))


def _quat_from_rpy(r: float, p: float, y: float) -> np.ndarray:
    """URDF fixed-axis roll/pitch/yaw: R = Rz(y) Ry(p) Rx(r)."""
    cr, sr = math.cos(0.5 * r), math.sin(0.5 * r)
    cp, sp = math.cos(0.5 * p), math.sin(0.5 * p)
    cy, sy = math.cos(0.5 * y), math.sin(0.5 * y)
    return np.array(
        [
            sr * cp * cy - cr * sp * sy,
            cr * sp * cy + sr * cp * sy,
            cr * cp * sy - sr * sp * cy,
            cr * cp * cy + sr * sp * sy,
        ]
    )


def _qmul(a, b) -> np.ndarray:
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return np.array(
        [
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz,
        ]
    )


def _qmat(q) -> np.ndarray:
    x, y, z, w = (float(v) for v in q)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def _tmul(a, b):
    return a[0] + _qmat(a[1]) @ b[0], _qmul(a[1], b[1])


_IDENT = (np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0]))


def _wp_tf(t):
    import warp as wp

    return wp.transform(wp.vec3(*(float(v) for v in t[0])), wp.quat(*(float(v) for v in t[1])))


def _as_tf(x):
    if x is None:
        return _IDENT
    v = [float(c) for c in x]
    if len(v) != 7:
        raise ValueError(f"xform must have 7 components (p, q xyzw), got {len(v)}")
    q = np.asarray(v[3:])
    n = np.linalg.norm(q)
    if not np.all(np.isfinite(v)) or n < 1e-12:
        raise ValueError(f"xform {v} must be finite with a non-zero quaternion")
    return np.asarray(v[:3]), q / n


def _perpendicular_pair(n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a = np.array([1.0, 0.0, 0.0]) if abs(n[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    u = np.cross(n, a)
    u /= np.linalg.norm(u)
    return u, np.cross(n, u)


# ---------------------------------------------------------------------------------------------
# parsing


def _parse_xml(data: bytes, file: str):
    """Parse ``data`` into an ElementTree root; returns ``(root, lines)`` with ``lines[elem]`` = line."""
    tb = ET.TreeBuilder()
    parser = xml.parsers.expat.ParserCreate()
    lines: dict = {}

    def start(tag, attrs):
        lines[tb.start(tag, attrs)] = parser.CurrentLineNumber

    parser.StartElementHandler = start
    parser.EndElementHandler = tb.end
    parser.CharacterDataHandler = tb.data
    try:
        parser.Parse(data, True)
        root = tb.close()
    except xml.parsers.expat.ExpatError as exc:
        raise URDFImportError(
            f"malformed XML: {xml.parsers.expat.ErrorString(exc.code)} (column {exc.offset + 1})", file, exc.lineno
        ) from None
    except (ValueError, AssertionError) as exc:  # TreeBuilder: unbalanced input
        raise URDFImportError(f"malformed XML: {exc}", file) from None
    return root, lines


def _load_source(source) -> tuple[bytes, str, Path | None]:
    """``(xml bytes, name for messages, directory for relative paths or None)``."""
    if isinstance(source, bytes):
        source = source.decode("utf-8", errors="replace")
    if isinstance(source, os.PathLike):
        source = os.fspath(source)
    if not isinstance(source, str):
        raise TypeError(f"add_urdf: source must be a file path or an XML string, got {type(source).__name__}")
    text = source.strip()
    if text.startswith("<"):
        return source.encode("utf-8"), "<string>", None
    path = source
    if path.startswith("file://"):
        path = path[len("file://") :]
    p = Path(path).expanduser()
    if not p.is_file():
        raise URDFImportError("file not found (source is neither an existing file nor XML text)", str(source))
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise URDFImportError(f"cannot read the file: {exc}", str(p)) from None
    return data, str(p), p.resolve().parent


def _search_package(pkg: str, rel: str, base_dir: Path | None, package_dirs) -> tuple[Path | None, list[str]]:
    tried: list[str] = []

    def check(cand: Path):
        tried.append(str(cand))
        return cand if cand.is_file() else None

    for d in package_dirs or ():
        d = Path(d)
        for cand in (d / pkg / rel, d / rel if d.name == pkg else None):
            if cand is not None and (hit := check(cand)):
                return hit, tried
    if base_dir is not None:
        for anc in [base_dir, *base_dir.parents]:
            if anc.name == pkg and (hit := check(anc / rel)):
                return hit, tried
            if (anc / pkg).is_dir() and (hit := check(anc / pkg / rel)):
                return hit, tried
    for entry in os.environ.get("ROS_PACKAGE_PATH", "").split(os.pathsep):
        if not entry:
            continue
        e = Path(entry)
        if e.name == pkg and (hit := check(e / rel)):
            return hit, tried
        if (hit := check(e / pkg / rel)):
            return hit, tried
        # packages may sit one or two levels below a ROS_PACKAGE_PATH entry
        if e.is_dir():
            for sub in e.glob(f"*/{pkg}"):
                if (hit := check(sub / rel)):
                    return hit, tried
    for entry in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        if entry and (hit := check(Path(entry) / "share" / pkg / rel)):
            return hit, tried
    return None, tried


def resolve_uri(uri: str, base_dir: Path | None, package_resolver: Callable | None = None, package_dirs=None):
    """Resolve a URDF ``filename`` to a file path; returns ``(Path or None, list of places tried)``.

    ``package://pkg/rel`` and ``model://pkg/rel``: ``package_resolver(uri)`` first (a path or
    ``None``), then ``package_dirs`` (directories holding package folders), then the
    folders above the URDF file (a folder named ``pkg`` or holding ``pkg``), then
    ``ROS_PACKAGE_PATH`` entries and ``AMENT_PREFIX_PATH`` ``share/`` folders.
    ``file://`` URIs and absolute paths are used as given; relative paths are relative to
    the URDF file's folder (the working directory for XML strings).
    """
    tried: list[str] = []
    if package_resolver is not None:
        got = package_resolver(uri)
        if got is not None:
            p = Path(os.fspath(got))
            tried.append(f"package_resolver -> {p}")
            if p.is_file():
                return p, tried
    for scheme in ("package://", "model://"):
        if uri.startswith(scheme):
            pkg, _, rel = uri[len(scheme) :].partition("/")
            hit, more = _search_package(pkg, rel, base_dir, package_dirs)
            return hit, tried + more
    path = uri[len("file://") :] if uri.startswith("file://") else uri
    p = Path(path).expanduser()
    if not p.is_absolute():
        p = (base_dir or Path.cwd()) / p
    tried.append(str(p))
    return (p if p.is_file() else None), tried


def _read_mesh_geometry(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Vertices (float64, n x 3) and triangles (int64, m x 3) of a mesh file: geometry only.

    Materials and textures are never read (an OBJ's ``mtllib`` is skipped) and the parts of a
    multi-part file are joined with plain index offsets, not with trimesh's visual concatenation:
    neither needs an image library (Pillow), and a shape needs no texture.
    """
    import trimesh  # lazy: only files with meshes need it

    kwargs = {"skip_materials": True} if path.suffix.lower() == ".obj" else {}
    try:
        loaded = trimesh.load(str(path), process=False, **kwargs)
    except Exception as exc:  # trimesh raises many types for bad files
        raise ValueError(f"cannot load mesh {path}: {type(exc).__name__}: {exc}") from None
    if isinstance(loaded, trimesh.Scene):
        # every part placed by its scene-graph transform; not Scene.dump(), which copies the parts
        # with their visuals (a texture-coordinate visual without a resolvable material holds a
        # placeholder that raises "No module named 'PIL'" when copied)
        placed = [(loaded.geometry.get(name), np.asarray(xf, dtype=np.float64))
                  for xf, name in (loaded.graph[node] for node in loaded.graph.nodes_geometry)]
    else:
        placed = [(loaded, None)]
    parts = []
    for g, xf in placed:
        if g is None or not hasattr(g, "faces") or len(g.faces) == 0:
            continue
        gv = np.asarray(g.vertices, dtype=np.float64)
        gf = np.asarray(g.faces, dtype=np.int64).reshape(-1, 3)
        # normals the file gave (they keep hard edges' vertices apart, as trimesh's own processing does)
        gn = np.asarray(g._cache["vertex_normals"], dtype=np.float64) if "vertex_normals" in g._cache else None
        if xf is not None:
            gv = gv @ xf[:3, :3].T + xf[:3, 3]
            gn = gn @ xf[:3, :3].T if gn is not None else None
            if np.linalg.det(xf[:3, :3]) < 0.0:  # a mirroring placement keeps the faces outward
                gf = gf[:, ::-1]
        parts.append((gv, gf, gn))
    if not parts:
        raise ValueError(f"mesh file {path} holds no triangles")
    verts, faces, normals, offset = [], [], [], 0
    for gv, gf, gn in parts:
        verts.append(gv)
        faces.append(gf + offset)
        normals.append(gn)
        offset += len(gv)
    vn = None
    if all(n is not None and n.shape == v.shape for n, v in zip(normals, verts)):
        vn = np.concatenate(normals)
    # the same clean-up ``trimesh.load(..., process=True)`` does (drop non-finite values, merge
    # duplicate vertices), on the bare geometry: no visuals, no texture
    tm = trimesh.Trimesh(np.concatenate(verts), np.concatenate(faces), vertex_normals=vn, process=True)
    if len(tm.faces) == 0:
        raise ValueError(f"mesh file {path} holds no triangles")
    return np.asarray(tm.vertices, dtype=np.float64), np.asarray(tm.faces, dtype=np.int64)


def _load_mesh(path: Path, visual: bool):
    """An ``armillary.Mesh`` of the file (cached by path, size and modification time)."""
    import armillary

    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    cached = _MESH_CACHE.get(key)
    if cached is None:
        v, f = _read_mesh_geometry(path)
        if not np.all(np.isfinite(v)):
            raise ValueError(f"mesh file {path} has non-finite vertex coordinates")
        cached = armillary.Mesh(v, f.reshape(-1), compute_inertia=True)
        if len(_MESH_CACHE) >= _MESH_CACHE_MAX:
            _MESH_CACHE.pop(next(iter(_MESH_CACHE)))
        _MESH_CACHE[key] = cached
    return cached.copy()


# ---------------------------------------------------------------------------------------------


class _Importer:
    def __init__(self, builder, source, opts: dict):
        self.builder = builder
        self.opts = opts
        self.data, self.file, self.base_dir = _load_source(source)
        self.root, self.lines = _parse_xml(self.data, self.file)
        self.scale = opts["scale"]
        self.current = None  # the element being imported (named by errors from deeper code)

    # -- errors -----------------------------------------------------------------------------
    def _desc(self, elem) -> str | None:
        if elem is None:
            return None
        name = elem.get("name")
        return f"<{elem.tag} name='{name}'>" if name is not None else f"<{elem.tag}>"

    def error(self, reason: str, elem=None) -> URDFImportError:
        return URDFImportError(reason, self.file, self.lines.get(elem) if elem is not None else None, self._desc(elem))

    def warn(self, reason: str, elem=None) -> None:
        line = self.lines.get(elem) if elem is not None else None
        where = self.file if line is None else f"{self.file}:{line}"
        what = f" {self._desc(elem)}" if elem is not None else ""
        warnings.warn(f"URDF {where}:{what} {reason}", URDFImportWarning, stacklevel=4)

    # -- attribute readers --------------------------------------------------------------------
    def floats(self, elem, attr: str, n: int, default=None, *, finite: bool = True, bound: float | None = None,
               unit: str = "") -> np.ndarray:
        """``n`` numbers of attribute ``attr`` (``default`` when absent; required when ``None``).

        ``finite``: NaN and inf are errors; ``bound``: magnitudes above it are errors (the
        file's values, so a length bound is ``MAX_MAGNITUDE / scale``); ``unit`` for messages.
        """
        raw = elem.get(attr)
        if raw is None:
            if default is None:
                raise self.error(f"missing required attribute '{attr}'", elem)
            return np.asarray(default, dtype=np.float64)
        parts = raw.replace(",", " ").split()
        if not all(_NUMBER.fullmatch(p) for p in parts):
            what = "a number" if n == 1 else f"a list of {n} numbers"
            raise self.error(f"attribute {attr}={raw!r} is not {what}", elem)
        vals = [float(p) for p in parts]
        if len(vals) != n:
            raise self.error(f"attribute {attr}={raw!r} must have {n} number(s), got {len(vals)}", elem)
        arr = np.asarray(vals, dtype=np.float64)
        if finite and not np.all(np.isfinite(arr)):
            raise self.error(f"attribute {attr}={raw!r} must be finite (no NaN or inf)", elem)
        if bound is not None and np.any(np.abs(arr) > bound):
            raise self.error(
                f"attribute {attr}={raw!r} is out of range: magnitudes above {bound:g}{unit} are not accepted "
                f"(the importer's limit is {MAX_MAGNITUDE:g} m, rad, kg)", elem,
            )  # fmt: skip
        return arr

    def scalar(self, elem, attr: str, default=None, *, minimum=None, finite=True, bound=None, unit="") -> float:
        v = float(self.floats(elem, attr, 1, None if default is None else [default], finite=finite, bound=bound,
                              unit=unit)[0])  # fmt: skip
        if math.isnan(v):
            raise self.error(f"attribute {attr}={elem.get(attr)!r} is NaN", elem)
        if minimum is not None and v < minimum:
            raise self.error(f"attribute {attr}={elem.get(attr)!r} must be >= {minimum:g}", elem)
        return v

    @property
    def length_bound(self) -> float:
        """Largest accepted magnitude of a length as written in the file (before ``scale``)."""
        return MAX_MAGNITUDE / self.scale

    def origin(self, parent_elem, scale=True):
        o = parent_elem.find("origin")
        if o is None:
            return _IDENT
        unit = " m" if self.scale == 1.0 else f" (x scale {self.scale:g} = {MAX_MAGNITUDE:g} m)"
        xyz = self.floats(o, "xyz", 3, (0.0, 0.0, 0.0), bound=self.length_bound, unit=unit)
        rpy = self.floats(o, "rpy", 3, (0.0, 0.0, 0.0), bound=MAX_MAGNITUDE, unit=" rad")
        return (xyz * self.scale if scale else xyz), _quat_from_rpy(*rpy)

    def check_single_children(self, elem) -> None:
        """At most one child of each kind in ``_SINGLE_CHILDREN[elem.tag]``."""
        allowed = _SINGLE_CHILDREN.get(elem.tag, ())
        seen: dict[str, Any] = {}
        for ch in elem:
            if ch.tag not in allowed:
                continue
            if ch.tag in seen:
                raise self.error(
                    f"second <{ch.tag}> in {self._desc(elem)} (the first is at line {self.lines.get(seen[ch.tag])}); "
                    f"URDF allows one <{ch.tag}> there",
                    ch,
                )
            seen[ch.tag] = ch

    def name(self, elem) -> str:
        n = elem.get("name")
        if n is None or not n.strip():
            raise self.error("missing or empty 'name' attribute", elem)
        return n

    # -- custom attributes ----------------------------------------------------------------------
    def setup_custom_attributes(self, scratch) -> None:
        """The builder's declarations and the plugins' ones, on the scratch builder only.

        The caller's builder adopts them when the scratch is merged, i.e. only on success: a
        failed import leaves its declarations unchanged too.
        """
        import copy

        from armillary import plugins
        from armillary.sim.custom_attributes import AttributeFrequency as F

        self.cattrs: dict[str, list] = {"body": [], "joint": [], "shape": [], "articulation": []}
        kinds = {F.BODY: "body", F.JOINT: "joint", F.JOINT_DOF: "joint", F.JOINT_COORD: "joint",
                 F.SHAPE: "shape", F.ARTICULATION: "articulation"}  # fmt: skip
        for key, freq in getattr(self.builder, "custom_frequencies", {}).items():
            scratch.add_custom_frequency(freq)
        for key, attr in getattr(self.builder, "custom_attributes", {}).items():
            clone = copy.copy(attr)
            clone.values = [] if attr.is_custom_frequency else {}
            scratch.add_custom_attribute(clone)
        plugins.register_custom_attributes(scratch)
        for attr in scratch.custom_attributes.values():
            if not attr.is_custom_frequency and attr.frequency in kinds:
                self.cattrs[kinds[attr.frequency]].append(attr)

    def custom_values(self, kind: str, elem, scratch) -> dict | None:
        attrs = self.cattrs.get(kind) if hasattr(self, "cattrs") else None
        if not attrs:
            return None
        out = {}
        for attr in attrs:
            name = attr.urdf_attribute_name or attr.name
            raw = elem.get(name)
            if raw is None:  # one level down: <dynamics damping=...>, <limit effort=...>
                for child in elem:
                    if child.get(name) is not None:
                        raw = child.get(name)
                        break
            if raw is None:
                continue
            try:
                if attr.urdf_value_transformer is not None:
                    ctx = {"builder": scratch, "element": elem, "kind": kind, "file": self.file, "attribute": attr}
                    val = attr.urdf_value_transformer(raw, ctx)
                else:
                    val = _default_convert(raw, attr.dtype)
            except Exception as exc:
                raise self.error(f"custom attribute '{attr.key}' cannot read {name}={raw!r}: {exc}", elem) from None
            out[attr.key] = val
        return out or None

    # -- model ------------------------------------------------------------------------------------
    def run(self) -> dict:
        import armillary

        root = self.root
        if root.tag != "robot":
            raise self.error(f"the root element must be <robot>, got <{root.tag}>", root)
        self.robot = root.get("name", "").strip()
        o = self.opts

        links: dict[str, Any] = {}
        for le in root.findall("link"):
            n = self.name(le)
            self.check_single_children(le)
            for sub in le:
                if sub.tag in ("inertial", "visual", "collision"):
                    self.check_single_children(sub)
            if n in links:
                raise self.error(f"link '{n}' is defined twice (first at line {self.lines.get(links[n])})", le)
            links[n] = le
        if not links:
            raise self.error("the model has no <link>", root)
        joints: dict[str, Any] = {}
        child_of: dict[str, Any] = {}
        children: dict[str, list] = {n: [] for n in links}
        for je in root.findall("joint"):
            n = self.name(je)
            if n in joints:
                raise self.error(f"joint '{n}' is defined twice (first at line {self.lines.get(joints[n])})", je)
            self.check_single_children(je)
            jt = je.get("type")
            if jt not in _JOINT_TYPES:
                raise self.error(f"unknown joint type {jt!r}; supported: {', '.join(_JOINT_TYPES)}", je)
            pe, ce = je.find("parent"), je.find("child")
            if pe is None or pe.get("link") is None:
                raise self.error("missing <parent link=...>", je)
            if ce is None or ce.get("link") is None:
                raise self.error("missing <child link=...>", je)
            p, c = pe.get("link"), ce.get("link")
            for role, ln in (("parent", p), ("child", c)):
                if ln not in links:
                    raise self.error(f"{role} link '{ln}' is not defined", je)
            if p == c:
                raise self.error(f"joint connects link '{p}' to itself", je)
            if c in child_of:
                prev = child_of[c]
                raise self.error(
                    f"link '{c}' is already the child of joint '{prev.get('name')}' (line {self.lines.get(prev)}); "
                    "a link may be the child of one joint only (URDF is a tree)",
                    je,
                )
            joints[n] = je
            child_of[c] = je
            children[p].append(je)

        roots = [n for n in links if n not in child_of]
        if not roots:
            je = next(iter(joints.values()))
            raise self.error("the joints form a cycle: every link is the child of a joint (no root link)", je)

        # traversal order
        order_mode = o["joint_ordering"]
        trees: list[tuple[str, list]] = []  # (root link, joint elements in order)
        reached: set[str] = set()
        for r in roots:
            seq: list = []
            reached.add(r)
            if order_mode == "bfs":
                queue = [r]
                while queue:
                    ln = queue.pop(0)
                    for je in children[ln]:
                        seq.append(je)
                        c = je.find("child").get("link")
                        reached.add(c)
                        queue.append(c)
            else:  # depth first, children in file order
                stack = [iter(children[r])]
                while stack:
                    je = next(stack[-1], None)
                    if je is None:
                        stack.pop()
                        continue
                    seq.append(je)
                    c = je.find("child").get("link")
                    reached.add(c)
                    stack.append(iter(children[c]))
            trees.append((r, seq))
        if len(reached) != len(links):
            stuck = [n for n in links if n not in reached]
            raise self.error(
                f"the joints form a cycle through link(s) {', '.join(repr(s) for s in stuck[:5])}", child_of[stuck[0]]
            )
        if len(trees) > 1:
            # the largest tree is the model (the first in file order among equals); name the others
            main = max(range(len(trees)), key=lambda k: (len(trees[k][1]), -k))
            others = [r for k, (r, _) in enumerate(trees) if k != main]
            main_root = trees[main][0]
            listed = ", ".join(repr(r) for r, _ in trees[:6]) + (", ..." if len(trees) > 6 else "")
            raise self.error(
                f"link '{others[0]}' is the child of no joint, so it is not connected to the root link "
                f"'{main_root}': the model has {len(trees)} root links ({listed}); a URDF model is one tree "
                "with one root link (add the joint that attaches it, or remove it)",
                links[others[0]],
            )
        if order_mode is None:
            file_order = {id(je): i for i, je in enumerate(root.findall("joint"))}
            trees = [(r, sorted(seq, key=lambda e: file_order[id(e)])) for r, seq in trees]

        scratch = armillary.ModelBuilder(up_axis=self.builder.up_axis, gravity=self.builder.gravity)
        scratch.default_shape_cfg = self.builder.default_shape_cfg
        scratch.default_joint_cfg = self.builder.default_joint_cfg
        scratch.rigid_gap = self.builder.rigid_gap
        self.setup_custom_attributes(scratch)
        self.scratch = scratch
        scratch._urdf_robot = self.robot
        self.prefix = ""  # labels are the file's own names (see the module docstring)

        # root placement
        x_root = _as_tf(o["xform"])
        if o["up_axis"] is not None:
            x_root = _tmul(x_root, (np.zeros(3), _up_rotation(o["up_axis"], self.builder.up_axis)))
        self.x_root = x_root

        body_of: dict[str, int] = {}
        pose: dict[str, tuple] = {}
        art_ranges = []

        def add_link(ln: str, world_pose) -> int:
            le = links[ln]
            b = self.add_body(scratch, ln, le, world_pose)
            body_of[ln] = b
            pose[ln] = world_pose
            return b

        if not o["bodies_follow_joint_ordering"]:
            # bodies in file order, poses computed first
            poses = {}
            for r, seq in trees:
                poses[r] = x_root
                for je in seq:
                    p, c = je.find("parent").get("link"), je.find("child").get("link")
                    poses[c] = _tmul(poses[p], self.origin(je))
            for ln in links:
                add_link(ln, poses[ln])

        self.mimics: list = []
        joint_index: dict[str, int] = {}
        for r, seq in trees:
            j0 = scratch.joint_count
            if r not in body_of:
                add_link(r, x_root)
            self.add_base_joint(scratch, body_of[r])
            for je in seq:
                p, c = je.find("parent").get("link"), je.find("child").get("link")
                x_pj = self.origin(je)
                if c not in body_of:
                    add_link(c, _tmul(pose[p], x_pj))
                joint_index[je.get("name")] = self.add_joint(scratch, je, body_of[p], body_of[c], x_pj)
            art_ranges.append((j0, scratch.joint_count, r))

        self.check_moving_inertia(scratch, {idx: joints[n] for n, idx in joint_index.items()}, links[trees[0][0]])
        self.apply_mimic(scratch, joints, joint_index)

        if not o["enable_self_collisions"]:
            coll = [s for s in range(scratch.shape_count) if scratch.shape_flags[s] & int(armillary.ShapeFlags.COLLIDE_SHAPES)]
            for i, a in enumerate(coll):
                for b in coll[i + 1 :]:
                    if scratch.shape_body[a] != scratch.shape_body[b]:
                        scratch.shape_collision_filter_pairs.add((a, b))

        attach = o["parent_body"] != -1
        if not attach:
            for j0, j1, r in art_ranges:
                if j1 > j0:
                    scratch.add_articulation(list(range(j0, j1)), label=self.robot or None,
                                             custom_attributes=self.custom_values("articulation", root, scratch))  # fmt: skip

        collapse_info = None
        if o["collapse_fixed_joints"]:
            from armillary.sim.collapse import collapse_fixed_joints

            keep = []
            if attach:
                keep = [j0 for j0, _, _ in art_ranges]  # the attachment joints are patched after the merge
            collapse_info = collapse_fixed_joints(scratch, joints_to_keep=keep)
        return {"scratch": scratch, "art_ranges": art_ranges, "collapse": collapse_info}

    # -- bodies and shapes ----------------------------------------------------------------------------
    def add_body(self, scratch, ln: str, le, world_pose) -> int:
        self.current = le
        s2 = self.scale * self.scale
        ine = le.find("inertial")
        has_inertial = ine is not None and not self.opts["ignore_inertial_definitions"]
        mass, com, inertia = 0.0, np.zeros(3), np.zeros((3, 3))
        if has_inertial:
            self.current = ine
            # urdfdom (and so ROS and MuJoCo) require both, with all six inertia values
            me, ie = ine.find("mass"), ine.find("inertia")
            if me is None:
                raise self.error(f"link '{ln}': <inertial> needs a <mass value=...> element (URDF specification)", ine)
            mass = float(self.floats(me, "value", 1, finite=False)[0])
            if not math.isfinite(mass) or mass < 0.0:
                raise self.error(f"mass value={me.get('value')!r} must be a finite number >= 0", me)
            if mass > MAX_MAGNITUDE:
                raise self.error(f"mass value={me.get('value')!r} is out of range: masses above {MAX_MAGNITUDE:g} kg "
                                 "are not accepted", me)  # fmt: skip
            if ie is None:
                raise self.error(f"link '{ln}': <inertial> needs an <inertia ixx=... izz=...> element (URDF "
                                 "specification)", ine)  # fmt: skip
            xyz_q = self.origin(ine)
            com = xyz_q[0]
            vals = {}
            for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz"):
                v = float(self.floats(ie, k, 1, finite=False)[0])
                if not math.isfinite(v):
                    raise self.error(f"inertia {k}={ie.get(k)!r} must be finite", ie)
                vals[k] = v
            i_local = np.array(
                [
                    [vals["ixx"], vals["ixy"], vals["ixz"]],
                    [vals["ixy"], vals["iyy"], vals["iyz"]],
                    [vals["ixz"], vals["iyz"], vals["izz"]],
                ]
            )
            rot = _qmat(xyz_q[1])
            inertia = rot @ i_local @ rot.T * s2
            inertia = self.check_inertia(inertia, ln, ie)
        b = scratch.add_link(
            xform=_wp_tf(world_pose),
            mass=mass,
            com=tuple(com),
            inertia=inertia,
            label=self.prefix + ln,
            custom_attributes=self.custom_values("body", le, scratch),
        )
        self.add_shapes(scratch, b, le, has_inertial)
        return b

    def check_inertia(self, inertia: np.ndarray, ln: str, elem) -> np.ndarray:
        scale = max(1e-30, float(np.abs(inertia).max()))
        ev, vecs = np.linalg.eigh(inertia)
        tol = 1e-6 * scale
        a, b, c = ev
        if ev.min() >= -tol and c <= a + b + tol:
            return inertia  # physically valid: taken as written
        fixed = np.clip(ev, 0.0, None)
        fixed.sort()
        if fixed[2] > fixed[0] + fixed[1]:
            fixed[2] = fixed[0] + fixed[1]
        corrected = vecs @ np.diag(fixed) @ vecs.T
        corrected = 0.5 * (corrected + corrected.T)
        self.warn(
            f"link '{ln}': inertia with principal moments {tuple(float(f'{e:.6g}') for e in ev)} is not physically "
            f"valid (negative or violating the triangle inequality); corrected to {tuple(float(f'{e:.6g}') for e in fixed)}",
            elem,
        )
        return corrected

    def add_shapes(self, scratch, b: int, le, has_inertial: bool) -> None:
        o = self.opts
        base = scratch.default_shape_cfg
        if o["parse_visuals_as_colliders"]:
            visuals, collisions = [], le.findall("visual")
            show_colliders = not o["hide_visuals"] or o["force_show_colliders"]
        else:
            visuals = [] if o["hide_visuals"] else le.findall("visual")
            collisions = le.findall("collision")
            show_colliders = o["force_show_colliders"] or not visuals
        for ve in visuals:
            cfg = base.copy()
            cfg.has_shape_collision = False
            cfg.has_particle_collision = False
            cfg.density = 0.0
            cfg.is_visible = True
            self.add_geometry(scratch, b, ve, cfg, visual=True)
        for ce in collisions:
            cfg = base.copy()
            cfg.is_visible = bool(show_colliders)
            if has_inertial:
                cfg.density = 0.0
            self.add_geometry(scratch, b, ce, cfg, visual=False)

    def add_geometry(self, scratch, b: int, se, cfg, visual: bool) -> None:
        self.current = se
        ge = se.find("geometry")
        if ge is None:
            raise self.error("missing <geometry> with a shape element", se)
        if len(ge) != 1:
            shapes = ", ".join(f"<{c.tag}>" for c in ge)
            raise self.error(f"holds {len(ge)} shape elements{f' ({shapes})' if shapes else ''}; URDF needs exactly "
                             "one (box, cylinder, sphere or mesh)", ge)  # fmt: skip
        g = ge[0]
        self.current = g
        x = self.origin(se)
        xf = _wp_tf(x)
        s = self.scale
        name = se.get("name")
        label = f"{scratch.body_label[b]}/{name}" if name else None
        cav = self.custom_values("shape", se, scratch)
        kind = "visual" if visual else "collision"
        lb, unit = self.length_bound, " m" if s == 1.0 else f" (x scale {s:g})"
        if g.tag == "box":
            size = self.floats(g, "size", 3, bound=lb, unit=unit)
            if np.any(size <= 0):
                raise self.error(f"box size {size.tolist()} must be > 0", g)
            hx, hy, hz = (0.5 * size * s).tolist()
            scratch.add_shape_box(b, xform=xf, hx=hx, hy=hy, hz=hz, cfg=cfg, label=label, custom_attributes=cav)
        elif g.tag == "sphere":
            r = self.scalar(g, "radius", bound=lb, unit=unit)
            if r <= 0:
                raise self.error(f"sphere radius {r} must be > 0", g)
            scratch.add_shape_sphere(b, xform=xf, radius=r * s, cfg=cfg, label=label, custom_attributes=cav)
        elif g.tag in ("cylinder", "capsule"):
            r, ln = self.scalar(g, "radius", bound=lb, unit=unit), self.scalar(g, "length", bound=lb, unit=unit)
            if r <= 0 or ln <= 0:
                raise self.error(f"{g.tag} radius {r} and length {ln} must be > 0", g)
            fn = scratch.add_shape_cylinder if g.tag == "cylinder" else scratch.add_shape_capsule
            fn(b, xform=xf, radius=r * s, half_height=0.5 * ln * s, cfg=cfg, label=label, custom_attributes=cav)
        elif g.tag == "mesh":
            uri = g.get("filename")
            if not uri:
                raise self.error("<mesh> needs a 'filename' attribute", g)
            factor = "" if s == 1.0 else f" (x scale {s:g})"
            mscale = self.floats(g, "scale", 3, (1.0, 1.0, 1.0), bound=MAX_MAGNITUDE / s, unit=factor) * s
            if np.any(mscale == 0):
                raise self.error(f"mesh scale {mscale.tolist()} must have non-zero components", g)
            try:
                path, tried = resolve_uri(uri, self.base_dir, self.opts["package_resolver"], self.opts["package_dirs"])
            except Exception as exc:
                raise self.error(f"cannot resolve mesh {uri!r}: {type(exc).__name__}: {exc}", g) from None
            if path is None:
                msg = f"{kind} mesh {uri!r} not found (looked in: {'; '.join(tried[:8]) or 'nowhere'})"
                if self.opts["missing_mesh"] == "warn":
                    self.warn(msg + "; shape skipped", g)
                    return
                raise self.error(msg + "; pass package_resolver=/package_dirs= or missing_mesh='warn'", g)
            try:
                mesh = _load_mesh(path, visual)
            except ValueError as exc:
                raise self.error(str(exc), g) from None
            if np.any(mscale < 0):
                # mirrored mesh: bake the signs into the vertices (flipping the winding) and keep
                # positive scale factors, which is what the shape pipeline accepts
                signs = np.sign(mscale)
                tris = np.asarray(mesh.indices).reshape(-1, 3)
                if np.prod(signs) < 0:
                    tris = tris[:, ::-1]
                mesh = mesh.copy(vertices=np.asarray(mesh.vertices) * signs, indices=tris.reshape(-1))
                mscale = np.abs(mscale)
            if self.opts["mesh_maxhullvert"] is not None:
                mesh.maxhullvert = int(self.opts["mesh_maxhullvert"])
            scratch.add_shape_mesh(b, xform=xf, mesh=mesh, scale=tuple(mscale.tolist()), cfg=cfg, label=label,
                                   custom_attributes=cav)  # fmt: skip
        else:
            raise self.error(f"unsupported geometry <{g.tag}>; supported: box, cylinder, capsule, sphere, mesh", g)

    # -- joints --------------------------------------------------------------------------------------
    def add_base_joint(self, scratch, child: int) -> None:
        from armillary.sim.enums import JointType

        o = self.opts
        x_p = _wp_tf(self.x_root)
        if o["base_joint"] is not None:
            spec = dict(o["base_joint"])
            spec.pop("parent", None)
            spec.pop("child", None)
            jt = spec.pop("joint_type", spec.pop("type", JointType.D6))
            spec.setdefault("label", self.prefix + "base_joint")
            spec.setdefault("parent_xform", x_p)
            scratch.add_joint(jt, -1, child, **spec)
        elif o["floating"]:
            scratch.add_joint_free(child, label=self.prefix + "floating_base")
        else:
            scratch.add_joint_fixed(-1, child, parent_xform=x_p, label=self.prefix + "fixed_base")

    def add_joint(self, scratch, je, parent: int, child: int, x_pj) -> int:
        from armillary.sim.enums import JointTargetMode
        from armillary.sim.joint_config import JointDofConfig

        self.current = je
        jt = je.get("type")
        label = self.prefix + je.get("name")
        xp = _wp_tf(x_pj)
        cav = self.custom_values("joint", je, scratch)
        # <dynamics> and <limit> are read (and so checked) on every joint type, as urdfdom does;
        # fixed and floating joints do not use them
        dyn = je.find("dynamics")
        damping = self.scalar(dyn, "damping", 0.0, minimum=0.0) if dyn is not None else 0.0
        friction = self.scalar(dyn, "friction", 0.0, minimum=0.0) if dyn is not None else 0.0
        le = je.find("limit")
        dflt = scratch.default_joint_cfg
        kw: dict[str, Any] = {}
        if le is not None:
            # effort and velocity may be inf (unlimited); lower may be -inf and upper +inf
            kw["effort_limit"] = self.scalar(le, "effort", dflt.effort_limit, minimum=0.0, finite=False)
            kw["velocity_limit"] = self.scalar(le, "velocity", dflt.velocity_limit, minimum=0.0, finite=False)
            lin_scale = self.scale if jt == "prismatic" else 1.0
            lo = self.scalar(le, "lower", 0.0, finite=False) * lin_scale
            hi = self.scalar(le, "upper", 0.0, finite=False) * lin_scale
        if jt == "fixed":
            return scratch.add_joint_fixed(parent, child, parent_xform=xp, label=label, custom_attributes=cav)
        if jt == "floating":
            return scratch.add_joint_free(child, parent=parent, parent_xform=xp, label=label, custom_attributes=cav)
        ae = je.find("axis")
        axis = self.floats(ae, "xyz", 3, (1.0, 0.0, 0.0)) if ae is not None else np.array([1.0, 0.0, 0.0])
        big = float(np.abs(axis).max())
        if big == 0.0:
            raise self.error(f"joint axis {axis.tolist()} has zero length", ae if ae is not None else je)
        axis = axis / big  # first: the norm of (1e200, 1e200, 0) would overflow
        axis = axis / float(np.linalg.norm(axis))
        if self.opts["joint_damping_mode"] == "drive":
            kw["target_kd"] = damping if dyn is not None and dyn.get("damping") is not None else dflt.target_kd
        else:
            kw["damping"] = damping
        kw["friction"] = friction
        if jt in ("revolute", "prismatic"):
            if le is None:
                raise self.error(f"a {jt} joint needs a <limit> element (URDF specification)", je)
            if lo > hi:
                raise self.error(f"limit lower={lo} is greater than upper={hi}", le)
            if lo == math.inf or hi == -math.inf:
                raise self.error(f"limit lower={lo}, upper={hi}: lower must be < inf and upper > -inf", le)
            kw["limit_lower"], kw["limit_upper"] = lo, hi
        mode = JointTargetMode.POSITION
        if self.opts["force_position_velocity_actuation"] and dflt.target_ke > 0 and (kw.get("target_kd") or dflt.target_kd) > 0:
            mode = JointTargetMode.POSITION_VELOCITY
        if jt in ("revolute", "continuous"):
            return scratch.add_joint_revolute(parent, child, parent_xform=xp, axis=tuple(axis), label=label,
                                              actuator_mode=mode, custom_attributes=cav, **kw)  # fmt: skip
        if jt == "prismatic":
            return scratch.add_joint_prismatic(parent, child, parent_xform=xp, axis=tuple(axis), label=label,
                                               actuator_mode=mode, custom_attributes=cav, **kw)  # fmt: skip
        # planar: motion in the plane perpendicular to the axis (2 slides + rotation about the axis)
        u, v = _perpendicular_pair(axis)

        def cfg(ax):
            c = JointDofConfig(axis=tuple(ax), limit_ke=dflt.limit_ke, limit_kd=dflt.limit_kd, armature=dflt.armature,
                               target_ke=dflt.target_ke, target_kd=kw.get("target_kd", dflt.target_kd),
                               damping=kw.get("damping", dflt.damping), friction=friction,
                               effort_limit=kw.get("effort_limit", dflt.effort_limit),
                               velocity_limit=kw.get("velocity_limit", dflt.velocity_limit), actuator_mode=mode)  # fmt: skip
            return c

        return scratch.add_joint_d6(parent, child, parent_xform=xp, linear_axes=[cfg(u), cfg(v)],
                                    angular_axes=[cfg(axis)], label=label, custom_attributes=cav)  # fmt: skip

    def check_moving_inertia(self, scratch, joint_elems: dict, root_elem) -> None:
        """Every joint with degrees of freedom must move some inertia along each of them.

        The composite spatial inertia of the links a joint moves (the child and everything below
        it, at the zero configuration, masses from <inertial> or from collision geometry) is
        projected onto the joint's motion axes; a singular block (e.g. a revolute joint moving
        only massless links, or a free base that is a point mass) has no defined acceleration.
        MuJoCo rejects such files as well ("mass and inertia of moving bodies must be larger than
        mjMINVAL"), though it asks it of every moving body on its own; here a massless link is
        fine when it moves links that have mass (the usual dummy links of a planar base).
        """
        from armillary.sim.enums import JointType

        nb = scratch.body_count
        kids: dict[int, list[int]] = {}
        for p, c in zip(scratch.joint_parent, scratch.joint_child):
            kids.setdefault(int(p), []).append(int(c))
        pose = [_as_tf(list(scratch.body_q[b])) for b in range(nb)]
        mass = np.array([float(m) for m in scratch.body_mass], dtype=np.float64)
        com_w, inertia_w = [], []  # world frame
        for b in range(nb):
            r = _qmat(pose[b][1])
            com_w.append(pose[b][0] + r @ np.asarray(list(scratch.body_com[b]), dtype=np.float64))
            inertia_w.append(r @ np.asarray(scratch.body_inertia[b], dtype=np.float64).reshape(3, 3) @ r.T)

        for j in range(scratch.joint_count):
            lin, ang = (int(d) for d in scratch.joint_dof_dim[j])
            if lin + ang == 0:
                continue
            child = int(scratch.joint_child[j])
            xc = _as_tf(list(scratch.joint_X_c[j]))
            xc_inv = (-(_qmat(xc[1]).T @ xc[0]), np.array([-xc[1][0], -xc[1][1], -xc[1][2], xc[1][3]]))
            origin, rot = _tmul(pose[child], xc_inv)
            rot = _qmat(rot)
            sub, stack = [], [child]
            while stack:
                b = stack.pop()
                sub.append(b)
                stack.extend(kids.get(b, ()))
            m_tot, first, i_p = 0.0, np.zeros(3), np.zeros((3, 3))
            for b in sub:
                d = com_w[b] - origin
                m_tot += mass[b]
                first += mass[b] * d
                i_p += inertia_w[b] + mass[b] * (d @ d * np.eye(3) - np.outer(d, d))
            cx = np.array([[0.0, -first[2], first[1]], [first[2], 0.0, -first[0]], [-first[1], first[0], 0.0]])
            spatial = np.block([[i_p, cx], [cx.T, m_tot * np.eye(3)]])  # (angular, linear) about the joint origin
            q0 = int(scratch.joint_qd_start[j])
            axes = [np.asarray(list(scratch.joint_axis[q0 + k]), dtype=np.float64) for k in range(lin + ang)]
            if int(scratch.joint_type[j]) in (int(JointType.FREE), int(JointType.BALL)):
                axes = [np.eye(3)[k] for k in range(lin)] + [np.eye(3)[k] for k in range(ang)]
            motion = np.zeros((6, lin + ang))  # rows: angular 0..2, linear 3..5
            for k, a in enumerate(axes):
                row = 3 if k < lin else 0
                motion[row : row + 3, k] = rot @ a
            block = motion.T @ spatial @ motion
            top = float(np.abs(np.diag(block)).max())
            if top > 0.0 and float(np.linalg.eigvalsh(block).min()) > 1e-12 * top:
                continue
            elem = joint_elems.get(j)
            moved = f"'{scratch.body_label[child]}'"
            if len(sub) > 1:
                moved += f" and the {len(sub) - 1} link(s) below it"
            what = (f"joint '{elem.get('name')}' ({elem.get('type')})" if elem is not None
                    else f"the base joint ('{scratch.joint_label[j]}') of the root link")  # fmt: skip
            raise self.error(
                f"{what} moves no inertia along at least one of its {lin + ang} degree(s) of freedom: {moved} "
                f"(total mass {m_tot:g} kg) has zero mass or inertia there, so its acceleration is undefined; "
                "give the moved link(s) an <inertial> (or collision geometry) or make the joint fixed",
                elem if elem is not None else root_elem,
            )

    def apply_mimic(self, scratch, joints: dict, joint_index: dict) -> None:
        from armillary.sim.enums import JointType

        ok_types = (int(JointType.REVOLUTE), int(JointType.PRISMATIC), int(JointType.D6))
        direct: dict[str, tuple[str, float, float, Any]] = {}
        for name, je in joints.items():
            me = je.find("mimic")
            if me is None:
                continue
            ref = me.get("joint")
            if not ref:
                raise self.error(f"of joint '{name}' needs a 'joint' attribute", me)
            if ref not in joints:
                raise self.error(f"of joint '{name}' references joint '{ref}', which is not defined", me)
            if ref == name:
                raise self.error(f"of joint '{name}' references its own joint", me)
            self.current = me
            mult = self.scalar(me, "multiplier", 1.0, bound=MAX_MAGNITUDE)
            off_bound = MAX_MAGNITUDE / (self.scale if joints[name].get("type") == "prismatic" else 1.0)
            off = self.scalar(me, "offset", 0.0, bound=off_bound)
            ftype = scratch.joint_type[joint_index[name]]
            rtype = scratch.joint_type[joint_index[ref]]
            if ftype not in ok_types or rtype not in ok_types:
                which = name if ftype not in ok_types else ref
                self.warn(
                    f"of joint '{name}' (following '{ref}') ignored: joint '{which}' is "
                    f"{joints[which].get('type')} (mimic needs revolute, continuous, prismatic or planar joints)",
                    me,
                )
                continue
            if sum(scratch.joint_dof_dim[joint_index[name]]) != sum(scratch.joint_dof_dim[joint_index[ref]]):
                self.warn(f"of joint '{name}' (following '{ref}') ignored: the joints have different DOF counts", me)
                continue
            direct[name] = (ref, mult, off, me)
        # compose chains into direct references to independent joints
        for name, (ref, mult, off, me) in direct.items():
            seen = [name]
            while ref in direct:
                if ref in seen:
                    raise self.error(f"chain forms a cycle: {' -> '.join(seen + [ref])}", me)
                seen.append(ref)
                r2, m2, o2, _ = direct[ref]
                # q = off + mult * (o2 + m2 * q_r2)
                off, mult, ref = off + mult * o2, mult * m2, r2
            ji = joint_index[name]
            off_scaled = off * (self.scale if scratch.joint_type[ji] == int(JointType.PRISMATIC) else 1.0)
            scratch.set_joint_mimic(ji, joint_index[ref], coeffs=(off_scaled, mult))


def _up_rotation(src_up, dst_up) -> np.ndarray:
    """Quaternion rotating the ``src_up`` axis onto ``dst_up``."""
    from armillary.sim.enums import Axis

    a = np.asarray(Axis.from_any(src_up).to_vector(), dtype=np.float64)
    b = np.asarray(Axis.from_any(dst_up).to_vector(), dtype=np.float64)
    if np.allclose(a, b):
        return np.array([0.0, 0.0, 0.0, 1.0])
    axis = np.cross(a, b)
    axis /= np.linalg.norm(axis)
    ang = math.acos(max(-1.0, min(1.0, float(a @ b))))
    return np.array([*(axis * math.sin(0.5 * ang)), math.cos(0.5 * ang)])


def _default_convert(raw: str, dtype):
    """Generic string -> value conversion for custom attributes without a transformer."""
    if dtype is str:
        return raw
    parts = raw.replace(",", " ").split()
    name = getattr(dtype, "__name__", str(dtype)).lower()
    if dtype is bool or "bool" in name:
        vals = [p.lower() in ("1", "true", "yes", "on") for p in parts]
    elif dtype is int or "int" in name:
        vals = [int(float(p)) for p in parts]
    else:
        vals = [float(p) for p in parts]
    if not vals:
        raise ValueError("empty value")
    return vals[0] if len(vals) == 1 else vals


def add_urdf(
    builder,
    source,
    *,
    xform=None,
    floating: bool | None = None,
    base_joint: dict | None = None,
    parent_body: int = -1,
    scale: float = 1.0,
    hide_visuals: bool = False,
    parse_visuals_as_colliders: bool = False,
    up_axis=None,
    force_show_colliders: bool = False,
    enable_self_collisions: bool = True,
    ignore_inertial_definitions: bool = False,
    joint_ordering: str | None = "dfs",
    bodies_follow_joint_ordering: bool = True,
    collapse_fixed_joints: bool = False,
    mesh_maxhullvert: int | None = None,
    force_position_velocity_actuation: bool = False,
    joint_damping_mode: str = "passive",
    package_dirs: list | None = None,
    package_resolver: Callable[[str], Any] | None = None,
    missing_mesh: str = "error",
) -> None:
    """Import a URDF file or XML string into ``builder`` (``ModelBuilder.add_urdf``).

    Args:
        source: path to a ``.urdf`` file (``file://`` accepted) or the XML text itself.
        xform: root pose (world frame, or ``parent_body``'s frame when attaching).
        floating: ``None``/``False``: FIXED joint from the root link to the world (or to
            ``parent_body``); ``True``: FREE joint (only with ``parent_body=-1``).
        base_joint: ``dict`` of :meth:`ModelBuilder.add_joint` arguments (``joint_type``,
            ``linear_axes``, ``angular_axes``, ...) for a custom root joint; exclusive with ``floating``.
        parent_body: attach the root to this body of ``builder`` (its articulation must be the
            last one and end at the last joint); the imported joints join that articulation.
        scale: length scale applied to positions, sizes, mesh scales and prismatic limits
            (masses unchanged, inertias scaled by ``scale**2``).
        hide_visuals: skip ``<visual>`` shapes.
        parse_visuals_as_colliders: use ``<visual>`` geometry as collision shapes.
        up_axis: the file's up axis; when given and different from ``builder.up_axis`` the
            model is rotated onto the builder's up axis (default ``None``: no rotation).
        force_show_colliders: collision shapes visible even where a link has visual shapes.
        enable_self_collisions: ``False`` filters every pair of collision shapes of
            different links of the imported model.
        ignore_inertial_definitions: ignore ``<inertial>``; masses then come from the
            collision shapes (``builder.default_shape_cfg.density``).
        joint_ordering: ``"dfs"`` (default), ``"bfs"`` or ``None`` (file order).
        bodies_follow_joint_ordering: bodies in joint order (``True``) or in file order.
        collapse_fixed_joints: merge links connected by fixed joints (see
            :func:`armillary.sim.collapse.collapse_fixed_joints`); the root's fixed joint to
            the world is collapsed too (the root's shapes become static).
        mesh_maxhullvert: ``Mesh.maxhullvert`` of the loaded meshes.
        force_position_velocity_actuation: POSITION_VELOCITY drive mode when both default gains are set.
        joint_damping_mode: ``"passive"`` (``<dynamics damping>`` -> ``joint_damping``) or
            ``"drive"`` (-> ``joint_target_kd``).
        package_dirs: extra folders that hold package folders (for ``package://pkg/...``).
        package_resolver: ``fn(uri) -> path or None`` tried first for every mesh filename.
        missing_mesh: ``"error"`` (default): a mesh that cannot be found raises;
            ``"warn"``: one :class:`URDFImportWarning` per missing mesh and the shape is skipped.

    Raises:
        URDFImportError (a ``ValueError``): malformed XML, unknown joint type, undefined or
            duplicate links/joints, a link that is the child of two joints, cycles, more than
            one root link, elements written twice where URDF allows one, an incomplete
            ``<inertial>``, non-numbers, NaN, inf outside ``<limit>``, magnitudes above
            ``MAX_MAGNITUDE`` (1e6 m, rad, kg), negative masses, missing meshes, ... (see the
            README); the message names the file, the line and the element. Nothing is added to
            ``builder`` (not even custom attribute declarations) when an error is raised.
    """
    from armillary.sim.enums import JointType

    if floating is not None and base_joint is not None:
        raise ValueError("add_urdf: 'floating' and 'base_joint' are mutually exclusive; pass only one")
    if floating and parent_body != -1:
        raise ValueError("add_urdf: floating=True needs parent_body=-1 (FREE joints connect to the world)")
    if joint_ordering not in ("dfs", "bfs", None):
        raise ValueError(f"add_urdf: joint_ordering={joint_ordering!r} must be 'dfs', 'bfs' or None")
    if joint_damping_mode not in ("passive", "drive"):
        raise ValueError(f"add_urdf: joint_damping_mode={joint_damping_mode!r} must be 'passive' or 'drive'")
    if missing_mesh not in ("error", "warn"):
        raise ValueError(f"add_urdf: missing_mesh={missing_mesh!r} must be 'error' or 'warn'")
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.floating)) or not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"add_urdf: scale={scale!r} must be a finite number > 0")
    if base_joint is not None and not isinstance(base_joint, dict):
        raise ValueError(f"add_urdf: base_joint must be a dict of add_joint arguments, got {type(base_joint).__name__}")
    if package_resolver is not None and not callable(package_resolver):
        raise ValueError("add_urdf: package_resolver must be a callable fn(uri) -> path or None")
    parent_body = int(parent_body)
    if parent_body != -1:
        if not 0 <= parent_body < builder.body_count:
            raise ValueError(f"add_urdf: parent_body={parent_body} is not a body index (body_count={builder.body_count})")
        arts = [builder.joint_articulation[j] for j in builder._body_joints.get(parent_body, [])]
        art = next((a for a in arts if a >= 0), None)
        if art is not None and (art != builder.articulation_count - 1 or builder.articulation_end[art] != builder.joint_count):
            raise ValueError(
                f"add_urdf: parent_body={parent_body} ('{builder.body_label[parent_body]}') belongs to articulation "
                f"{art}, which is not the most recently added one; only the last articulation can be extended"
            )

    opts = dict(
        xform=xform, floating=floating, base_joint=base_joint, parent_body=parent_body, scale=float(scale),
        hide_visuals=hide_visuals, parse_visuals_as_colliders=parse_visuals_as_colliders, up_axis=up_axis,
        force_show_colliders=force_show_colliders, enable_self_collisions=enable_self_collisions,
        ignore_inertial_definitions=ignore_inertial_definitions, joint_ordering=joint_ordering,
        bodies_follow_joint_ordering=bodies_follow_joint_ordering, collapse_fixed_joints=collapse_fixed_joints,
        mesh_maxhullvert=mesh_maxhullvert, force_position_velocity_actuation=force_position_velocity_actuation,
        joint_damping_mode=joint_damping_mode, package_dirs=package_dirs, package_resolver=package_resolver,
        missing_mesh=missing_mesh,
    )  # fmt: skip
    imp = _Importer(builder, source, opts)
    try:
        res = imp.run()
    except URDFImportError:
        raise
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError, ZeroDivisionError,
            np.linalg.LinAlgError) as exc:  # fmt: skip
        # a check the importer does not make itself (e.g. the builder's own validation): still
        # name the element being imported
        where = imp.current if imp.current is not None else imp.root
        raise imp.error(f"{type(exc).__name__}: {exc}", where) from exc

    scratch = res["scratch"]
    nb0, nj0 = builder.body_count, builder.joint_count
    builder.add_builder(scratch)
    if parent_body != -1:
        _attach(builder, scratch, res, nb0, nj0, parent_body, JointType)
    return None


def _attach(builder, scratch, res, nb0: int, nj0: int, parent_body: int, JointType) -> None:
    """Re-parent the imported roots' joints (world-rooted in the scratch) to ``parent_body``."""
    x_par = _as_tf(list(builder.body_q[parent_body]))
    # move the imported bodies into the parent body's frame
    for b in range(nb0, builder.body_count):
        builder.body_q[b] = _wp_tf(_tmul(x_par, _as_tf(list(builder.body_q[b]))))
    roots = [j for j in range(nj0, builder.joint_count) if builder.joint_parent[j] == -1]
    for j in roots:
        c = builder.joint_child[j]
        builder.joint_parent[j] = parent_body
        builder.joint_parents[c] = [parent_body]
        kids = builder.joint_children.get(-1, [])
        if c in kids:
            kids.remove(c)
        builder.joint_children.setdefault(parent_body, []).append(c)
        builder._body_joints.setdefault(parent_body, []).append(j)
        builder.joint_collision_filter_parent[j] = True
        builder._filter_joint_shapes(parent_body, c)
    # extend the parent's articulation (or create one holding the parent's joint and the import)
    arts = [builder.joint_articulation[j] for j in builder._body_joints.get(parent_body, []) if j < nj0]
    art = next((a for a in arts if a >= 0), None)
    new_joints = list(range(nj0, builder.joint_count))
    if art is not None:
        builder.articulation_end[art] = builder.joint_count
        for j in new_joints:
            builder.joint_articulation[j] = art
    elif new_joints:
        builder.add_articulation(new_joints, label=getattr(scratch, "_urdf_robot", None) or None)

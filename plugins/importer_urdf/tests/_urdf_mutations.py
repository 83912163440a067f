"""Seeded structural mutations of real URDF files, each with the outcome the importer must give.

``mutate(text, seed, kind)`` parses a corpus file with ElementTree (test side, no importer
code), applies one mutation and returns ``Variant(text, kind, what, expect, pattern)``:

* ``expect == "reject"``: ``add_urdf`` must raise ``URDFImportError`` whose message matches
  ``pattern`` (a regex naming the culprit);
* ``expect == "accept"``: the import must succeed (and the model then finalize and simulate);
* ``expect == "either"``: only the invariants (clean error or a finite simulation) are checked,
  and that a rejection matches ``pattern`` when one is given.

What is correct follows the URDF specification and urdfdom (the ROS parser, which MuJoCo's and
most tools' readers follow), plus the importer's documented rules: one root link; <limit>
required on revolute/prismatic joints; <inertial> needs <mass> and all six <inertia> values;
one <origin>/<axis>/<limit>/... per element; non-finite numbers rejected; lengths, angles,
masses, mesh scales and mimic coefficients beyond 1e6 (SI units) rejected; invalid inertia
tensors corrected with a warning; <material> ignored; <axis> of fixed/floating joints ignored;
a joint that moves no mass or inertia (massless links only) rejected, as MuJoCo does.
"""

from __future__ import annotations

import copy
import random
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

GARBAGE = ("inf", "-inf", "nan", "-1e30", "1e30", "abc", "", "1 2")


@dataclass
class Variant:
    text: str
    kind: str
    what: str
    expect: str  # "reject" | "accept" | "either"
    pattern: str | None = None  # what a rejection must match (for "either" too, when given)


class NotApplicable(Exception):
    """The chosen mutation has no target in this file."""


def _q(name: str) -> str:
    return re.escape(name)


class _Tree:
    def __init__(self, text: str):
        self.root = ET.fromstring(text)
        self.links = self.root.findall("link")
        self.joints = self.root.findall("joint")  # top level only (not <transmission><joint>)
        self.parent_of = {c: p for p in self.root.iter() for c in p}
        self.child_joint = {j.find("child").get("link"): j for j in self.joints}
        linked = set(self.child_joint)
        self.root_link = next(le.get("name") for le in self.links if le.get("name") not in linked)

    def text(self) -> str:
        return ET.tostring(self.root, encoding="unicode")

    def remove(self, elem) -> None:
        self.parent_of[elem].remove(elem)

    def movable(self):
        return [j for j in self.joints if j.get("type") in ("revolute", "continuous", "prismatic", "planar")]

    def massless_moving_joint(self, point_masses: bool = False) -> str | None:
        """A non-fixed joint whose moved links (child and below) have no mass at all, or None.

        Mass comes from <inertial> (the value) or else from <collision> geometry (density).
        ``point_masses``: count links whose <inertial> has a zero inertia tensor as massless too
        (a rotation about an axis through such a point mass moves no inertia).
        """
        links = {le.get("name"): le for le in self.links}
        below: dict[str, list[str]] = {}
        for j in self.joints:
            below.setdefault(j.find("parent").get("link"), []).append(j.find("child").get("link"))

        def massive(ln: str) -> bool:
            le = links[ln]
            ine = le.find("inertial")
            if ine is not None:
                m, i = ine.find("mass"), ine.find("inertia")
                if point_masses and i is not None and not any(float(v or 0) for v in i.attrib.values()):
                    return False
                return m is not None and float(m.get("value", 0) or 0) > 0
            return le.find("collision") is not None

        for j in self.joints:
            if j.get("type") == "fixed":
                continue
            stack, any_mass = [j.find("child").get("link")], False
            while stack:
                ln = stack.pop()
                any_mass = any_mass or massive(ln)
                stack.extend(below.get(ln, ()))
            if not any_mass:
                return j.get("name")
        return None


def _pick(rng: random.Random, seq):
    seq = list(seq)
    if not seq:
        raise NotApplicable
    return rng.choice(seq)


# ------------------------------------------------------------------ mutations
# each: (tree, rng) -> (what, expect, pattern)


def m_delete_joint(t: _Tree, rng):
    j = _pick(rng, t.joints)
    t.remove(j)
    child = j.find("child").get("link")
    # the child (and its subtree) is no longer connected: a second root link
    return f"delete joint {j.get('name')}", "reject", rf"root link.*'{_q(child)}'|'{_q(child)}'.*root link"


def m_delete_link(t: _Tree, rng):
    le = _pick(rng, t.links)
    t.remove(le)
    n = le.get("name")
    return f"delete link {n}", "reject", rf"link '{_q(n)}' is not defined"


def m_add_orphan_link(t: _Tree, rng):
    n = f"orphan_{rng.randrange(1000)}"
    le = ET.SubElement(t.root, "link", {"name": n})
    ET.SubElement(ET.SubElement(ET.SubElement(le, "collision"), "geometry"), "sphere", {"radius": "0.05"})
    return f"add unconnected link {n}", "reject", rf"<link name='{_q(n)}'>.*root link"


def m_delete_inertial(t: _Tree, rng):
    le = _pick(rng, [le for le in t.links if le.find("inertial") is not None])
    t.remove(le.find("inertial"))
    what = f"delete <inertial> of {le.get('name')}"
    j = t.massless_moving_joint()
    if j is not None:  # nothing left to move: a link without <inertial> takes mass from collisions only
        return what, "reject", rf"<joint name='{_q(j)}'>.*moves no inertia"
    j = t.massless_moving_joint(point_masses=True)
    if j is not None:  # only point masses left below a joint: depends on the axis
        return what, "either", rf"<joint name='{_q(j)}'>.*moves no inertia"
    return what, "accept", None  # mass from collision geometry


def m_delete_inertial_part(t: _Tree, rng):
    le = _pick(rng, [le for le in t.links if le.find("inertial") is not None])
    ine = le.find("inertial")
    part = _pick(rng, [e for e in ine if e.tag in ("mass", "inertia")])
    ine.remove(part)
    return f"delete <{part.tag}> of {le.get('name')}", "reject", rf"<inertial>.*<{part.tag}"


def m_delete_inertia_value(t: _Tree, rng):
    ie = _pick(rng, [e for e in t.root.iter("inertia")])
    k = _pick(rng, [k for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz") if k in ie.attrib])
    del ie.attrib[k]
    return f"delete inertia {k}", "reject", rf"<inertia>.*'{k}'"


def m_delete_origin(t: _Tree, rng):
    o = _pick(rng, [o for o in t.root.iter("origin") if t.parent_of[o].tag in ("joint", "inertial", "visual", "collision")])
    t.remove(o)
    return f"delete <origin> of <{t.parent_of[o].tag}>", "accept", None


def m_delete_axis(t: _Tree, rng):
    j = _pick(rng, [j for j in t.joints if j.find("axis") is not None])
    t.remove(j.find("axis"))
    return f"delete <axis> of {j.get('name')}", "accept", None  # default (1, 0, 0)


def m_delete_limit(t: _Tree, rng):
    j = _pick(rng, [j for j in t.joints if j.find("limit") is not None])
    t.remove(j.find("limit"))
    if j.get("type") in ("revolute", "prismatic"):
        return f"delete <limit> of {j.get('type')} {j.get('name')}", "reject", rf"<joint name='{_q(j.get('name'))}'>.*<limit>"
    return f"delete <limit> of {j.get('type')} {j.get('name')}", "accept", None


def m_delete_mesh(t: _Tree, rng):
    g = _pick(rng, [g for g in t.root.iter("geometry") if g.find("mesh") is not None])
    g.remove(g.find("mesh"))
    return "delete <mesh>", "reject", r"<geometry> holds 0 shape elements"


def m_delete_parent_child(t: _Tree, rng):
    j = _pick(rng, t.joints)
    tag = rng.choice(("parent", "child"))
    j.remove(j.find(tag))
    return f"delete <{tag}> of {j.get('name')}", "reject", rf"<joint name='{_q(j.get('name'))}'>.*<{tag}"


def m_delete_name(t: _Tree, rng):
    e = _pick(rng, t.links + t.joints)
    if rng.random() < 0.5:
        del e.attrib["name"]
    else:
        e.set("name", "")
    return f"delete name of <{e.tag}>", "reject", rf"<{e.tag}.*'name'"


def m_duplicate_named(t: _Tree, rng):
    e = _pick(rng, t.links + t.joints)
    dup = copy.deepcopy(e)
    t.root.append(dup)
    n = e.get("name")
    return f"duplicate <{e.tag} name='{n}'>", "reject", rf"{e.tag} '{_q(n)}' is defined twice"


_SINGLETONS = {
    "joint": ("origin", "parent", "child", "axis", "limit", "dynamics", "mimic"),
    "link": ("inertial",),
    "inertial": ("origin", "mass", "inertia"),
    "visual": ("origin", "geometry"),
    "collision": ("origin", "geometry"),
}


def m_duplicate_singleton(t: _Tree, rng):
    cands = [(p, c) for p in t.links + t.joints + list(t.root.iter("inertial")) + list(t.root.iter("visual"))
             + list(t.root.iter("collision")) for c in p if c.tag in _SINGLETONS.get(p.tag, ())]  # fmt: skip
    p, c = _pick(rng, cands)
    p.insert(list(p).index(c) + 1, copy.deepcopy(c))
    return f"second <{c.tag}> in <{p.tag}>", "reject", rf"<{c.tag}>.*(twice|more than one|allows one)"


def m_duplicate_shape(t: _Tree, rng):
    s = _pick(rng, [s for le in t.links for s in le if s.tag in ("visual", "collision")])
    t.parent_of[s].append(copy.deepcopy(s))
    return f"duplicate <{s.tag}>", "accept", None  # several visuals/collisions are allowed


def m_second_shape_in_geometry(t: _Tree, rng):
    g = _pick(rng, list(t.root.iter("geometry")))
    ET.SubElement(g, "sphere", {"radius": "0.01"})
    return "two shapes in one <geometry>", "reject", r"<geometry> holds 2 shape elements"


def m_rename_parent(t: _Tree, rng):
    j = _pick(rng, t.joints)
    j.find("parent").set("link", "no_such_link")
    return f"parent of {j.get('name')} renamed", "reject", r"parent link 'no_such_link' is not defined"


def m_rename_child(t: _Tree, rng):
    j = _pick(rng, t.joints)
    j.find("child").set("link", "no_such_link")
    return f"child of {j.get('name')} renamed", "reject", r"child link 'no_such_link' is not defined"


def m_child_to_existing(t: _Tree, rng):
    j = _pick(rng, t.joints)
    other = _pick(rng, [le.get("name") for le in t.links if le.get("name") not in (j.find("child").get("link"), j.find("parent").get("link"))])
    j.find("child").set("link", other)
    # the root link as child (cycle or two roots), or a link that already has a parent joint
    return f"child of {j.get('name')} -> {other}", "reject", r"cycle|already the child|root link"


def m_parent_is_child(t: _Tree, rng):
    j = _pick(rng, t.joints)
    j.find("parent").set("link", j.find("child").get("link"))
    return f"{j.get('name')} connects its child to itself", "reject", r"to itself"


def m_rename_mimic(t: _Tree, rng):
    me = _pick(rng, [j.find("mimic") for j in t.joints if j.find("mimic") is not None])
    me.set("joint", "no_such_joint")
    return "mimic joint renamed", "reject", r"<mimic>.*'no_such_joint'"


def m_mimic_self(t: _Tree, rng):
    j = _pick(rng, t.movable())
    me = j.find("mimic")
    if me is None:
        me = ET.SubElement(j, "mimic")
    me.set("joint", j.get("name"))
    return f"{j.get('name')} mimics itself", "reject", r"<mimic>.*its own joint"


def m_rename_material(t: _Tree, rng):
    m = _pick(rng, [m for v in t.root.iter("visual") for m in v.iter("material")])
    m.set("name", "no_such_material")
    return "material renamed", "accept", None  # materials have no simulation meaning (ignored)


def m_bad_joint_type(t: _Tree, rng):
    j = _pick(rng, t.joints)
    bad = rng.choice(["ball", "", "Revolute", "screw", None])
    if bad is None:
        del j.attrib["type"]
    else:
        j.set("type", bad)
    return f"joint type {bad!r}", "reject", rf"<joint name='{_q(j.get('name'))}'>.*unknown joint type"


def m_change_joint_type(t: _Tree, rng):
    j = _pick(rng, t.joints)
    new = rng.choice(["revolute", "continuous", "prismatic", "fixed", "floating", "planar"])
    old = j.get("type")
    j.set("type", new)
    if new in ("revolute", "prismatic") and j.find("limit") is None:
        return f"{old} -> {new}", "reject", r"<limit>"
    if t.massless_moving_joint() == j.get("name"):  # e.g. talos' massless camera frames
        return f"{old} -> {new}", "reject", rf"<joint name='{_q(j.get('name'))}'>.*moves no inertia"
    if t.massless_moving_joint(point_masses=True) == j.get("name"):  # talos' point-mass camera frames
        return f"{old} -> {new}", "either", rf"<joint name='{_q(j.get('name'))}'>.*moves no inertia"
    if new == "floating" or old == "floating":
        return f"{old} -> {new}", "either", None
    return f"{old} -> {new}", "accept", None


def m_negative_mass(t: _Tree, rng):
    me = _pick(rng, list(t.root.iter("mass")))
    me.set("value", str(-rng.choice([1e-3, 1.0, 5.0])))
    return "negative mass", "reject", r"<mass>.*>= 0"


def m_bad_inertia_tensor(t: _Tree, rng):
    ie = _pick(rng, list(t.root.iter("inertia")))
    how = rng.choice(["negative", "triangle", "offdiag"])
    big = max(abs(float(ie.get(k, 0))) for k in ("ixx", "iyy", "izz")) or 1.0
    if how == "negative":
        ie.set(rng.choice(["ixx", "iyy", "izz"]), str(-big))
    elif how == "triangle":
        ie.set("ixx", str(10 * big))
    else:
        ie.set(rng.choice(["ixy", "ixz", "iyz"]), str(5 * big))
    # corrected with a warning; the correction may leave a moment of 0 (a rod), which a joint
    # rotating the link about that axis through its centre of mass cannot move
    return f"inertia not physical ({how})", "either", r"moves no inertia"


def m_bad_mesh_file(t: _Tree, rng):
    m = _pick(rng, list(t.root.iter("mesh")))
    how = rng.choice(["missing", "empty", "not_a_mesh"])
    if how == "missing":
        m.set("filename", "package://no_such_package/meshes/x.stl")
        return "mesh file missing", "reject", r"<mesh>.*not found"
    if how == "empty":
        m.set("filename", "")
        return "mesh filename empty", "reject", r"<mesh>.*filename"
    m.set("filename", "file:///etc/hostname")
    return "mesh file is not a mesh", "reject", r"<mesh>.*(mesh|triangles)"


def m_unknown_geometry(t: _Tree, rng):
    g = _pick(rng, list(t.root.iter("geometry")))
    g.remove(g[0])
    ET.SubElement(g, "cone", {"radius": "0.1", "length": "0.2"})
    return "unknown geometry <cone>", "reject", r"<cone>.*unsupported geometry"


# numeric attributes: (element tag, attribute, quantity)
_NUMERIC = [
    ("origin", "xyz", "length3"), ("origin", "rpy", "angle3"), ("axis", "xyz", "axis3"),
    ("mass", "value", "mass"), ("inertia", "ixx", "inertia"), ("inertia", "iyy", "inertia"),
    ("inertia", "ixy", "inertia"), ("limit", "lower", "lower"), ("limit", "upper", "upper"),
    ("limit", "effort", "bound"), ("limit", "velocity", "bound"), ("dynamics", "damping", "coef"),
    ("dynamics", "friction", "coef"), ("box", "size", "size3"), ("sphere", "radius", "size"),
    ("cylinder", "radius", "size"), ("cylinder", "length", "size"), ("mesh", "scale", "scale3"),
    ("mimic", "multiplier", "ratio"), ("mimic", "offset", "ratio"),
]  # fmt: skip


def _value_outcome(quantity: str, value: str, joint_type: str | None):
    """Expected outcome of writing ``value`` into one number of a ``quantity``."""
    if value in ("nan", "abc", "", "1 2"):
        return "reject"
    v = float(value)
    if quantity in ("size", "mass", "ratio"):
        # non-finite or beyond 1e6 (SI units) rejected; sizes must be > 0, masses >= 0
        if not abs(v) <= 1e6:
            return "reject"
        if (quantity == "size" and v <= 0) or (quantity == "mass" and v < 0):
            return "reject"
        return "accept"
    if quantity == "inertia":
        return "accept" if abs(v) < float("inf") else "reject"  # invalid tensors corrected (warning)
    if quantity == "lower":
        if joint_type not in ("revolute", "prismatic"):
            return "accept"  # a number; unused by the other joint types
        return "reject" if v > 0.5 else "accept"  # above upper (every corpus upper is < 1e30)
    if quantity == "upper":
        if joint_type not in ("revolute", "prismatic"):
            return "accept"
        return "reject" if v < -0.5 else "accept"
    if quantity == "bound":
        return "reject" if v < 0 else "accept"  # effort/velocity >= 0, inf = unlimited
    if quantity == "coef":
        return "reject" if v < 0 or v == float("inf") else "accept"
    raise AssertionError(quantity)


def _vector_outcome(quantity: str, parts: list[str], joint_type: str | None) -> str:
    """Expected outcome of a 3-vector attribute written as ``parts``."""
    if quantity == "axis3" and joint_type in ("fixed", "floating"):
        return "accept"  # urdfdom ignores <axis> on fixed and floating joints
    if len(parts) != 3 or any(p.lower() in ("nan", "abc") for p in parts):
        return "reject"
    v = [float(p) for p in parts]
    if quantity == "axis3":  # normalised: any finite non-zero direction
        return "accept" if all(abs(x) < float("inf") for x in v) and max(map(abs, v)) > 0 else "reject"
    if not all(abs(x) <= 1e6 for x in v):  # non-finite or beyond 1e6 (SI units)
        return "reject"
    if quantity == "size3" and min(v) <= 0:
        return "reject"
    if quantity == "scale3" and min(map(abs, v)) == 0:
        return "reject"
    return "accept"


def m_garbage_number(t: _Tree, rng):
    cands = []
    for tag, attr, quantity in _NUMERIC:
        for e in t.root.iter(tag):
            p = t.parent_of.get(e)
            if p is None or (tag == "origin" and p.tag not in ("joint", "inertial", "visual", "collision")):
                continue
            if tag in ("limit", "axis", "dynamics", "mimic") and p.tag != "joint":
                continue  # e.g. <transmission><joint><limit>
            if attr in e.attrib or tag in ("origin", "mesh"):
                cands.append((e, attr, quantity, p.get("type") if p.tag == "joint" else None))
    e, attr, quantity, jtype = _pick(rng, cands)
    value = rng.choice(GARBAGE)
    if quantity.endswith("3"):
        parts = (e.get(attr) or ("1 1 1" if attr == "scale" else "0 0 0")).split()
        if value != "1 2" and rng.random() < 0.6:  # one component of the vector
            i = rng.randrange(len(parts))
            if value:
                parts[i] = value
            else:
                del parts[i]
        else:  # the whole attribute
            parts = value.split() if value else []
        value = " ".join(parts)
        outcome = _vector_outcome(quantity, parts, jtype)
    else:
        outcome = _value_outcome(quantity, value, jtype)
    e.set(attr, value)
    pattern = rf"<{e.tag}\b.*{attr}" if outcome == "reject" else None
    if outcome == "reject" and quantity in ("lower", "upper"):
        pattern = r"<limit>.*(lower|upper)"
    return f"<{e.tag} {attr}={value!r}> ({quantity}, joint {jtype})", outcome, pattern


MUTATIONS = {
    "delete_joint": m_delete_joint, "delete_link": m_delete_link, "add_orphan_link": m_add_orphan_link,
    "delete_inertial": m_delete_inertial, "delete_inertial_part": m_delete_inertial_part,
    "delete_inertia_value": m_delete_inertia_value, "delete_origin": m_delete_origin, "delete_axis": m_delete_axis,
    "delete_limit": m_delete_limit, "delete_mesh": m_delete_mesh, "delete_parent_child": m_delete_parent_child,
    "delete_name": m_delete_name, "duplicate_named": m_duplicate_named, "duplicate_singleton": m_duplicate_singleton,
    "duplicate_shape": m_duplicate_shape, "second_shape_in_geometry": m_second_shape_in_geometry,
    "rename_parent": m_rename_parent, "rename_child": m_rename_child, "child_to_existing": m_child_to_existing,
    "parent_is_child": m_parent_is_child, "rename_mimic": m_rename_mimic, "mimic_self": m_mimic_self,
    "rename_material": m_rename_material, "bad_joint_type": m_bad_joint_type, "change_joint_type": m_change_joint_type,
    "negative_mass": m_negative_mass, "bad_inertia_tensor": m_bad_inertia_tensor, "bad_mesh_file": m_bad_mesh_file,
    "unknown_geometry": m_unknown_geometry, "garbage_number": m_garbage_number,
}  # fmt: skip


def mutate(text: str, seed: int, kind: str) -> Variant:
    """Apply mutation ``kind`` (``"combo"``: two to three random ones, invariants only)."""
    rng = random.Random(seed)
    if kind == "combo":
        whats = []
        for _ in range(rng.randint(2, 3)):
            for _attempt in range(20):
                k = rng.choice(sorted(MUTATIONS))
                try:
                    t = _Tree(text)
                    what, _, _ = MUTATIONS[k](t, rng)
                    text = t.text()
                    whats.append(what)
                    break
                except (NotApplicable, StopIteration, AttributeError, KeyError, ValueError):
                    continue
        return Variant(text, "combo", " + ".join(whats), "either")
    t = _Tree(text)
    what, expect, pattern = MUTATIONS[kind](t, rng)
    return Variant(t.text(), kind, what, expect, pattern)

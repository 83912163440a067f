"""Test helpers: asset paths and an independent reference reading of URDF files.

The reference (link/joint names, inertials, a chain-of-transforms forward kinematics)
is written directly from the URDF specification with ElementTree and numpy, sharing no
code with the importer.
"""

from __future__ import annotations

import json
import math
import os
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from armillary.testing.assets import shared_assets_dir

_here = Path(__file__).resolve()


ASSETS = shared_assets_dir(_here)


def urdf_models() -> dict[str, Path]:
    if ASSETS is None:
        return {}
    cat = json.loads((ASSETS / "catalog.json").read_text())
    return {k: ASSETS / v["path"] for k, v in sorted(cat.items()) if v["fmt"] == "urdf"}


MODELS = urdf_models()


def model_root(name: str) -> Path:
    """The folder that holds the model's package folder (``example-robot-data``)."""
    return ASSETS / "urdf" / name


# ------------------------------------------------------------------ reference maths


def rpy_matrix(r, p, y) -> np.ndarray:
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    return rz @ ry @ rx


def axis_angle_matrix(axis, angle) -> np.ndarray:
    a = np.asarray(axis, dtype=float)
    a = a / np.linalg.norm(a)
    k = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    return np.eye(3) + math.sin(angle) * k + (1 - math.cos(angle)) * k @ k


def homog(rot, pos) -> np.ndarray:
    t = np.eye(4)
    t[:3, :3] = rot
    t[:3, 3] = pos
    return t


def quat_to_matrix(q) -> np.ndarray:
    x, y, z, w = q
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def _floats(s, default):
    return [float(v) for v in s.split()] if s is not None else list(default)


def _origin(elem):
    o = elem.find("origin")
    if o is None:
        return np.eye(4)
    return homog(rpy_matrix(*_floats(o.get("rpy"), (0, 0, 0))), _floats(o.get("xyz"), (0, 0, 0)))


class Reference:
    """What the file says, read straight from the XML."""

    def __init__(self, path):
        self.root = ET.parse(path).getroot()
        self.robot = self.root.get("name")
        self.links = [le.get("name") for le in self.root.findall("link")]
        self.joints = {je.get("name"): je for je in self.root.findall("joint")}
        self.joint_types = {n: je.get("type") for n, je in self.joints.items()}
        self.child_joint = {je.find("child").get("link"): je for je in self.joints.values()}
        self.root_links = [ln for ln in self.links if ln not in self.child_joint]

    def inertial(self, link: str):
        """(mass, com, inertia in the link frame) or None."""
        le = next(e for e in self.root.findall("link") if e.get("name") == link)
        ine = le.find("inertial")
        if ine is None:
            return None
        t = _origin(ine)
        m = float(ine.find("mass").get("value"))
        i = ine.find("inertia")
        g = {k: float(i.get(k, 0.0)) for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
        i_in = np.array([[g["ixx"], g["ixy"], g["ixz"]], [g["ixy"], g["iyy"], g["iyz"]], [g["ixz"], g["iyz"], g["izz"]]])
        r = t[:3, :3]
        return m, t[:3, 3], r @ i_in @ r.T

    def mimic(self):
        """{follower: (reference, multiplier, offset)} as written."""
        out = {}
        for n, je in self.joints.items():
            me = je.find("mimic")
            if me is not None:
                out[n] = (me.get("joint"), float(me.get("multiplier", 1.0)), float(me.get("offset", 0.0)))
        return out

    def fk(self, q: dict[str, float], base=np.eye(4)) -> dict[str, np.ndarray]:
        """World 4x4 pose of every link for joint positions ``q`` (name -> value)."""
        out: dict[str, np.ndarray] = {}

        def pose(link):
            if link in out:
                return out[link]
            je = self.child_joint.get(link)
            if je is None:
                out[link] = base
                return base
            parent = pose(je.find("parent").get("link"))
            t = parent @ _origin(je)
            jt = je.get("type")
            ae = je.find("axis")
            axis = _floats(ae.get("xyz") if ae is not None else None, (1, 0, 0))
            v = q.get(je.get("name"), 0.0)
            if jt in ("revolute", "continuous"):
                t = t @ homog(axis_angle_matrix(axis, v), np.zeros(3))
            elif jt == "prismatic":
                a = np.asarray(axis) / np.linalg.norm(axis)
                t = t @ homog(np.eye(3), a * v)
            out[link] = t
            return t

        for ln in self.links:
            pose(ln)
        return out


def import_quietly(builder, path, **kw):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        builder.add_urdf(str(path), **kw)
    return [w for w in rec if "CUDA" not in str(w.message)]

"""Shared helpers of the MJCF importer tests: asset discovery and a float64 host FK over a builder."""

from __future__ import annotations

import json
import os

import numpy as np

from armillary.testing.assets import shared_assets_dir
from armillary.testing.mujoco_refs import mujoco_reference

ASSETS = str(shared_assets_dir(__file__) or "")


def mjcf_models() -> dict[str, str]:
    """name -> main MJCF file for every MJCF model of the shared asset catalog."""
    path = os.path.join(ASSETS, "catalog.json")
    if not os.path.isfile(path):
        return {}
    cat = json.load(open(path))
    out = {}
    for name, e in sorted(cat.items()):
        if e.get("fmt") != "mjcf":
            continue
        folder = os.path.join(ASSETS, os.path.dirname(e["path"]))
        main = os.path.join(ASSETS, e["path"])
        if not os.path.isfile(main):  # the catalog path names the folder; the main file keeps its package name
            cand = os.path.join(folder, os.path.basename(e["main"]))
            for root, _, files in os.walk(folder):
                if os.path.basename(e["main"]) in files:
                    cand = os.path.join(root, os.path.basename(e["main"]))
                    break
            main = cand
        out[name] = main
    return out


def mujoco_ref(name: str):
    """MuJoCo reference data of corpus model ``name`` (``armillary.testing.mujoco_refs``, computed once)."""
    return mujoco_reference(name, ASSETS or None)


def _qmul(a, b):  # xyzw
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return np.array([
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
        aw * bw - ax * bx - ay * by - az * bz,
    ])  # fmt: skip


def _qrot(q, v):
    u = np.asarray(q[:3])
    w = q[3]
    return v + 2.0 * np.cross(u, np.cross(u, v) + w * v)


def _tmul(a, b):
    return (a[0] + _qrot(a[1], b[0]), _qmul(a[1], b[1]))


def _tinv(a):
    qi = np.array([-a[1][0], -a[1][1], -a[1][2], a[1][3]])
    return (-_qrot(qi, a[0]), qi)


def _aa(axis, ang):
    axis = np.asarray(axis, dtype=np.float64)
    axis = axis / np.linalg.norm(axis)
    return np.array([*(axis * np.sin(0.5 * ang)), np.cos(0.5 * ang)])


def _tf(x):
    v = [float(t) for t in x]
    return (np.array(v[:3]), np.array(v[3:7]))


def host_fk(builder, joint_q) -> list:
    """World poses ``(p, q_xyzw)`` of every body from ``joint_q`` (tree joints only), in float64."""
    from armillary.sim.enums import JointType as JT

    q = np.asarray(joint_q, dtype=np.float64)
    poses = [None] * builder.body_count
    for j in range(builder.joint_count):
        if builder.joint_articulation[j] < 0 and builder.joint_parent[j] >= 0:
            continue  # loop-closing joint
        t = builder.joint_type[j]
        qs, ds = builder.joint_q_start[j], builder.joint_qd_start[j]
        nl, na = builder.joint_dof_dim[j]
        axes = [np.array([float(a) for a in builder.joint_axis[ds + k]]) for k in range(nl + na)]
        ident = (np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0]))
        if t == JT.REVOLUTE:
            xj = (np.zeros(3), _aa(axes[0], q[qs]))
        elif t == JT.PRISMATIC:
            xj = (axes[0] * q[qs], ident[1])
        elif t == JT.BALL:
            r = q[qs:qs + 4]
            xj = (np.zeros(3), r / np.linalg.norm(r))
        elif t == JT.FREE:
            r = q[qs + 3:qs + 7]
            xj = (q[qs:qs + 3].copy(), r / np.linalg.norm(r))
        elif t == JT.FIXED:
            xj = ident
        elif t == JT.D6:
            p = sum((axes[k] * q[qs + k] for k in range(nl)), np.zeros(3))
            r = ident[1]
            for k in range(na):
                r = _qmul(r, _aa(axes[nl + k], q[qs + nl + k]))
            xj = (p, r)
        else:
            raise NotImplementedError(t)
        par = builder.joint_parent[j]
        xwp = ident if par < 0 else poses[par]
        poses[builder.joint_child[j]] = _tmul(_tmul(_tmul(xwp, _tf(builder.joint_X_p[j])), xj), _tinv(_tf(builder.joint_X_c[j])))
    return poses

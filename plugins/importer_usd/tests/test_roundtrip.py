"""Round trip model -> USD (``armillary.usd.export``) -> model: same kinematics, masses, inertias, joints.

The re-import uses our own ``ModelBuilder.add_usd``; when it is not installed it falls back to the
reference engine as a black box (a subprocess of ``/tmp/nvenv/bin/python`` running
``newton.ModelBuilder().add_usd``), and skips when neither is available.
``ARMILLARY_USD_ROUNDTRIP_IMPORTER=reference`` forces the reference engine (checks the exporter alone).

Checked per model: every body's mass, center of mass and inertia tensor (1e-5), every joint's type,
DOF count, limits and axes (in the parent body frame), and the body poses of ``eval_fk`` for random
joint coordinates within the limits (1e-4 m / rad). What UsdPhysics does not represent is left out of
the comparison: MJCF tendons and equality constraints (not in the Model), heightfield and ellipsoid
shapes (skipped by the export with a warning), actuators.
"""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import textwrap
import warnings

import numpy as np
import pytest

pytest.importorskip("pxr")

import armillary  # noqa: E402
from armillary.testing.assets import shared_assets_dir  # noqa: E402

REFERENCE_PYTHON = "/tmp/nvenv/bin/python"
JOINT_FREE, JOINT_D6, JOINT_REVOLUTE, JOINT_PRISMATIC = 4, 6, 1, 0
#: per-DOF joint parameters compared after the round trip (NewtonJointAPI, drives)
DOF_PARAMETERS = ("armature", "damping", "friction", "velocity_limit", "limit_ke", "limit_kd", "target_ke",
                  "target_kd")  # fmt: skip


# ------------------------------------------------------------------------------------------ helpers
def sample_fk(model, entries, samples, eval_fk, wp):
    """Body poses of ``eval_fk`` for joint coordinates given per child body label.

    ``entries``: list of ``{"child": label, "parent": label | None, "q": [[...] per sample]}``. Works with
    an armillary or a reference-engine model (same array names). Returns ``(K, body_count, 7)``.
    """
    by_child = {(e["child"], e["parent"]): e for e in entries}
    labels = list(model.body_label)
    parent = model.joint_parent.numpy()
    child = model.joint_child.numpy()
    q_start = model.joint_q_start.numpy()
    base_q = model.joint_q.numpy().copy()
    out = []
    for k in range(samples):
        q = base_q.copy()
        for j in range(model.joint_count):
            key = (labels[child[j]], labels[parent[j]] if parent[j] >= 0 else None)
            e = by_child.get(key)
            if e is None:
                continue
            n = int(q_start[j + 1] - q_start[j])
            if n == len(e["q"][k]):
                q[q_start[j]:q_start[j] + n] = e["q"][k]
        state = model.state()
        eval_fk(model, wp.array(q, dtype=wp.float32, device=model.device),
                wp.zeros(model.joint_dof_count, dtype=wp.float32, device=model.device), state)
        out.append(state.body_q.numpy().copy())
    return np.asarray(out).reshape(samples, model.body_count, 7)


def model_arrays(model) -> dict:
    """The arrays the comparison needs, as numpy (works on both engines' models)."""
    names = ["body_mass", "body_com", "body_inertia", "joint_type", "joint_parent", "joint_child", "joint_X_p",
             "joint_X_c", "joint_axis", "joint_dof_dim", "joint_qd_start", "joint_q_start", "joint_limit_lower",
             "joint_limit_upper", "joint_articulation"] + [f"joint_{n}" for n in DOF_PARAMETERS]  # fmt: skip
    out = {n: getattr(model, n).numpy() for n in names}
    out["body_label"] = np.array(list(model.body_label), dtype=str)
    return out


_REFERENCE_SCRIPT = """
import json, sys, numpy as np, warp as wp, newton
DOF_PARAMETERS = {dof_parameters!r}
{sample_fk}
{model_arrays}
path, spec, out = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3]
b = newton.ModelBuilder()
b.add_usd(path)
m = b.finalize(device="cpu")
arrays = model_arrays(m)
arrays["body_q_fk"] = sample_fk(m, spec["entries"], spec["samples"], newton.eval_fk, wp)
np.savez(out, **arrays)
"""


def reimport(path, entries, samples, tmp_path):
    """Import ``path`` back (ours, else the reference engine) -> dict of arrays incl. ``body_q_fk``."""
    import warp as wp

    if os.environ.get("ARMILLARY_USD_ROUNDTRIP_IMPORTER") == "reference":  # validate the exporter alone
        return reimport_reference(path, entries, samples, tmp_path)
    try:
        b = armillary.ModelBuilder()
        b.add_usd(str(path))
    except (ImportError, NotImplementedError, AttributeError) as exc:
        if not os.path.exists(REFERENCE_PYTHON):
            pytest.skip(f"no USD importer yet ({exc}) and no reference engine to validate with")
        return reimport_reference(path, entries, samples, tmp_path)
    m = b.finalize(device="cpu")
    arrays = model_arrays(m)
    arrays["body_q_fk"] = sample_fk(m, entries, samples, armillary.eval_fk, wp)
    arrays["importer"] = "armillary"
    arrays["model"] = m
    return arrays


def reimport_reference(path, entries, samples, tmp_path):
    script = _REFERENCE_SCRIPT.format(dof_parameters=DOF_PARAMETERS,
                                      sample_fk=textwrap.dedent(inspect.getsource(sample_fk)),
                                      model_arrays=textwrap.dedent(inspect.getsource(model_arrays)))  # fmt: skip
    spec_file, out_file, script_file = tmp_path / "spec.json", tmp_path / "out.npz", tmp_path / "ref.py"
    spec_file.write_text(json.dumps({"entries": entries, "samples": samples}))
    script_file.write_text(script)
    r = subprocess.run([REFERENCE_PYTHON, str(script_file), str(path), str(spec_file), str(out_file)],
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    data = dict(np.load(out_file))
    data["importer"] = "reference"
    return data


def _quat_to_matrix(q):
    x, y, z, w = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])  # fmt: skip


def random_joint_q(model, rng, samples):
    """Per joint: ``samples`` random coordinate vectors within the limits (unlimited: [-1, 1])."""
    jt = model.joint_type.numpy()
    q_start, qd_start = model.joint_q_start.numpy(), model.joint_qd_start.numpy()
    lo, hi = model.joint_limit_lower.numpy(), model.joint_limit_upper.numpy()
    out = []
    for j in range(model.joint_count):
        nq = int(q_start[j + 1] - q_start[j])
        rows = []
        for _ in range(samples):
            if jt[j] in (JOINT_FREE, 5):
                quat = rng.normal(size=4)
                rows.append([*rng.uniform(-1, 1, 3), *(quat / np.linalg.norm(quat))])
            elif jt[j] == 2:  # BALL
                quat = rng.normal(size=4)
                rows.append(list(quat / np.linalg.norm(quat)))
            else:
                d0 = int(qd_start[j])
                low = np.clip(lo[d0:d0 + nq], -1.0, 1.0)
                high = np.clip(hi[d0:d0 + nq], -1.0, 1.0)
                rows.append(list(rng.uniform(low, np.maximum(low, high))))
        out.append(rows)
    return out


def check_roundtrip(model, tmp_path, samples=4, seed=0, atol_mass=1e-5, atol_fk=1e-4):
    """Export ``model``, import it back and compare; returns the re-imported arrays."""
    from armillary_importer_usd.export import export

    path = tmp_path / "model.usda"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = export(model, path, on_unsupported="skip")
    body_paths = res["body_paths"]
    labels_of = {b: p for b, p in body_paths.items()}
    rng = np.random.default_rng(seed)
    qs = random_joint_q(model, rng, samples)
    parent, child = model.joint_parent.numpy(), model.joint_child.numpy()
    entries = []
    for j in range(model.joint_count):
        if child[j] in labels_of:
            entries.append({"child": labels_of[child[j]], "parent": labels_of.get(int(parent[j])),
                            "q": [list(map(float, r)) for r in qs[j]]})  # fmt: skip
    # original FK, same coordinates
    import warp as wp

    q = model.joint_q.numpy().copy()
    q_start = model.joint_q_start.numpy()
    ref = []
    for k in range(samples):
        for j in range(model.joint_count):
            n = int(q_start[j + 1] - q_start[j])
            if n:
                q[q_start[j]:q_start[j] + n] = qs[j][k]
        state = model.state()
        armillary.eval_fk(model, wp.array(q, dtype=wp.float32, device=model.device),
                          wp.zeros(model.joint_dof_count, dtype=wp.float32, device=model.device), state)
        ref.append(state.body_q.numpy().copy())
    ref = np.asarray(ref).reshape(samples, model.body_count, 7)

    got = reimport(path, entries, samples, tmp_path)
    index = {str(lbl): i for i, lbl in enumerate(got["body_label"])}
    missing = [p for p in body_paths.values() if p not in index]
    assert not missing, f"bodies not re-imported: {missing[:5]}"
    mass, com, inertia = model.body_mass.numpy(), model.body_com.numpy(), model.body_inertia.numpy()
    # the reference engine leaves a one-body articulation out of articulations (and so out of eval_fk)
    unarticulated = set()
    if got["importer"] == "reference":
        unarticulated = {int(c) for c, a in zip(got["joint_child"], got["joint_articulation"]) if a < 0}
    for b, p in body_paths.items():
        i = index[p]
        assert got["body_mass"][i] == pytest.approx(mass[b], abs=atol_mass, rel=1e-5), p
        np.testing.assert_allclose(got["body_com"][i], com[b], atol=atol_mass, err_msg=p)
        np.testing.assert_allclose(got["body_inertia"][i].reshape(3, 3), inertia[b].reshape(3, 3),
                                   atol=atol_mass, rtol=1e-5, err_msg=p)  # fmt: skip
        for k in range(samples if i not in unarticulated else 0):
            np.testing.assert_allclose(got["body_q_fk"][k, i, :3], ref[k, b, :3], atol=atol_fk,
                                       err_msg=f"{p} position, sample {k}")  # fmt: skip
            dot = abs(float(np.dot(got["body_q_fk"][k, i, 3:], ref[k, b, 3:])))
            assert dot == pytest.approx(1.0, abs=atol_fk), f"{p} orientation, sample {k}"
    _check_joints(model, res, got, index)
    if got["importer"] == "armillary":
        _check_shapes(model, res, got["model"])
    return got


def _check_shapes(model, res, m2):
    """Shape types, sizes, frames (in the body frame) and the set of colliding shape pairs agree."""
    index = {lbl: i for i, lbl in enumerate(m2.shape_label)}
    paths = res["shape_paths"]
    assert all(p in index for p in paths.values()), [p for p in paths.values() if p not in index][:5]
    t1, t2 = model.shape_type.numpy(), m2.shape_type.numpy()
    sc1, sc2 = model.shape_scale.numpy(), m2.shape_scale.numpy()
    X1, X2 = model.shape_transform.numpy(), m2.shape_transform.numpy()
    for s, p in paths.items():
        i = index[p]
        if int(t1[s]) == 2:  # heightfield -> triangle mesh
            assert int(t2[i]) == 8, p
            continue
        assert int(t2[i]) == int(t1[s]), f"{p}: type {t2[i]} != {t1[s]}"
        np.testing.assert_allclose(sc2[i], sc1[s], atol=1e-5, err_msg=f"{p} scale")
        np.testing.assert_allclose(X2[i][:3], X1[s][:3], atol=1e-5, err_msg=f"{p} position")
        assert abs(float(np.dot(X2[i][3:], X1[s][3:]))) == pytest.approx(1.0, abs=1e-5), f"{p} orientation"
    inv = {index[p]: s for s, p in paths.items()}
    pairs1 = {tuple(sorted(map(int, x))) for x in model.shape_contact_pairs
              if int(x[0]) in paths and int(x[1]) in paths}  # fmt: skip
    pairs2 = {tuple(sorted((inv[int(x[0])], inv[int(x[1])]))) for x in m2.shape_contact_pairs
              if int(x[0]) in inv and int(x[1]) in inv}  # fmt: skip
    assert pairs1 == pairs2, (sorted(pairs1 - pairs2)[:5], sorted(pairs2 - pairs1)[:5])


def _check_joints(model, res, got, index):
    """Joint types, DOF counts, limits and axes (expressed in the parent body frame) agree."""
    jt, parent, child = model.joint_type.numpy(), model.joint_parent.numpy(), model.joint_child.numpy()
    X_p, axis = model.joint_X_p.numpy(), model.joint_axis.numpy()
    qd_start, dim = model.joint_qd_start.numpy(), model.joint_dof_dim.numpy()
    lo, hi = model.joint_limit_lower.numpy(), model.joint_limit_upper.numpy()
    body_paths = res["body_paths"]
    g_parent, g_child = got["joint_parent"], got["joint_child"]
    for j in range(model.joint_count):
        if j not in res["joint_paths"] or child[j] not in body_paths:
            continue
        c, p = index[body_paths[int(child[j])]], index[body_paths[int(parent[j])]] if parent[j] >= 0 else -1
        cands = [k for k in range(len(g_child)) if g_child[k] == c and g_parent[k] == p]
        assert cands, f"joint {model.joint_label[j]!r} not re-imported"
        k = cands[0]
        t_ref, t_got = int(jt[j]), int(got["joint_type"][k])
        if t_ref == JOINT_D6 and sum(dim[j]) == 1:
            assert t_got in (JOINT_D6, JOINT_REVOLUTE, JOINT_PRISMATIC)
        else:
            assert t_got == t_ref, f"joint {model.joint_label[j]!r}: type {t_got} != {t_ref}"
        assert tuple(got["joint_dof_dim"][k]) == tuple(dim[j]), model.joint_label[j]
        d0, e0 = int(qd_start[j]), int(got["joint_qd_start"][k])
        n = int(sum(dim[j]))
        if t_ref == 2:
            continue  # ball: 3 DOFs about the joint frame axes, no axis to compare
        R_ref = _quat_to_matrix(X_p[j][3:])
        R_got = _quat_to_matrix(got["joint_X_p"][k][3:])
        for i in range(n):
            a_ref = R_ref @ axis[d0 + i]
            a_got = R_got @ got["joint_axis"][e0 + i]
            np.testing.assert_allclose(a_got, a_ref, atol=1e-5, err_msg=f"{model.joint_label[j]} axis {i}")
            for name in DOF_PARAMETERS:
                v_ref = float(getattr(model, f"joint_{name}").numpy()[d0 + i])
                v_got = float(got[f"joint_{name}"][e0 + i])
                assert v_got == pytest.approx(v_ref, rel=1e-4, abs=1e-6), f"{model.joint_label[j]} {name} DOF {i}"
            for arr_ref, arr_got in ((lo, got["joint_limit_lower"]), (hi, got["joint_limit_upper"])):
                if abs(arr_ref[d0 + i]) < 1e9:
                    assert arr_got[e0 + i] == pytest.approx(arr_ref[d0 + i], abs=1e-5), model.joint_label[j]
                else:
                    assert abs(arr_got[e0 + i]) > 1e5, model.joint_label[j]


# --------------------------------------------------------------------------------------------- tests
def _mjcf_models():
    root = shared_assets_dir()
    if root is None:
        return []
    catalog = json.loads((root / "catalog.json").read_text())
    return sorted((name, str(root / e["path"])) for name, e in catalog.items() if e.get("fmt") == "mjcf")


@pytest.mark.parametrize("name,path", _mjcf_models() or [pytest.param("none", "", marks=pytest.mark.skip)])
def test_mjcf_roundtrip(name, path, tmp_path):
    b = armillary.ModelBuilder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b.add_mjcf(path)
    model = b.finalize(device="cpu")
    check_roundtrip(model, tmp_path)


# ------------------------------------------------------------------------------- random models (hypothesis)
def _random_rotation(rng) -> np.ndarray:
    q = rng.normal(size=4)
    return q / np.linalg.norm(q)  # xyzw


def _random_model(seed: int):
    """A random tree of 1-6 bodies: revolute / prismatic / ball / fixed / D6 joints, random frames,
    masses, inertias and shapes of every primitive type (shapes carry no density: mass is explicit)."""
    import warp as wp

    rng = np.random.default_rng(seed)
    b = armillary.ModelBuilder()
    n = int(rng.integers(1, 7))

    def tf():
        return wp.transform(wp.vec3(*rng.uniform(-0.5, 0.5, 3)), wp.quat(*_random_rotation(rng)))

    joints, bodies = [], []
    for i in range(n):
        R = _quat_to_matrix(_random_rotation(rng))
        e = rng.uniform(0.1, 1.0, 3) ** 2  # a box's moments: a valid (triangle inequality) inertia
        inertia = R @ np.diag([e[1] + e[2], e[0] + e[2], e[0] + e[1]]) @ R.T
        body = b.add_link(xform=tf(), mass=float(rng.uniform(0.1, 10.0)), com=wp.vec3(*rng.uniform(-0.2, 0.2, 3)),
                          inertia=wp.mat33(*inertia.reshape(-1)), label=f"link {i}")  # fmt: skip
        bodies.append(body)
        kind = int(rng.integers(0, 6))
        cfg = armillary.ModelBuilder.ShapeConfig(density=0.0, collision_group=int(rng.choice([1, 1, 2, -1])))
        shape = [lambda: b.add_shape_sphere(body, xform=tf(), radius=0.1, cfg=cfg),
                 lambda: b.add_shape_box(body, xform=tf(), hx=0.1, hy=0.2, hz=0.05, cfg=cfg),
                 lambda: b.add_shape_capsule(body, xform=tf(), radius=0.05, half_height=0.2, cfg=cfg),
                 lambda: b.add_shape_cylinder(body, xform=tf(), radius=0.05, half_height=0.1, cfg=cfg),
                 lambda: b.add_shape_cone(body, xform=tf(), radius=0.05, half_height=0.1, cfg=cfg),
                 lambda: b.add_shape_mesh(body, xform=tf(), cfg=cfg, mesh=armillary.Mesh(
                     [[0, 0, 0], [0.1, 0, 0], [0, 0.1, 0], [0, 0, 0.1]], [0, 2, 1, 0, 1, 3, 0, 3, 2, 1, 2, 3]))]
        shape[kind]()
        parent = -1 if i == 0 else bodies[int(rng.integers(0, i))]
        jt = int(rng.integers(0, 6)) if i else int(rng.choice([0, 1, 3, 5]))  # 5: FREE (omitted in USD): a new tree

        def limits():
            if rng.random() < 0.3:
                return {}
            lo = float(rng.uniform(-1.0, 0.0))
            return {"limit_lower": lo, "limit_upper": float(lo + rng.uniform(0.1, 1.5))}

        def axis():
            a = rng.normal(size=3)
            return wp.vec3(*(a / np.linalg.norm(a)))

        def params():
            names = ("armature", "damping", "friction", "velocity_limit", "limit_ke", "limit_kd", "target_ke",
                     "target_kd")  # fmt: skip
            return {n: float(rng.uniform(0.1, 10.0)) for n in names if rng.random() < 0.5}

        common = {"parent_xform": tf(), "child_xform": tf(), "label": f"joint {i}"}
        if jt == 0:
            j = b.add_joint_revolute(parent, body, axis=axis(), **limits(), **params(), **common)
        elif jt == 1:
            j = b.add_joint_prismatic(parent, body, axis=axis(), **limits(), **params(), **common)
        elif jt == 2:
            j = b.add_joint_ball(parent, body, **common)
        elif jt == 3:
            j = b.add_joint_fixed(parent, body, **common)
        elif jt == 4:
            if rng.random() < 0.5:  # coordinate axes in increasing order: a generic PhysicsJoint
                lin = sorted(rng.choice(3, size=int(rng.integers(0, 3)), replace=False).tolist())
                ang = sorted(rng.choice(3, size=int(rng.integers(1, 4)), replace=False).tolist())
                lin_axes = [np.eye(3)[k] for k in lin]
                ang_axes = [np.eye(3)[k] for k in ang]
            else:  # arbitrary orthonormal axes: stacked single-DOF joints
                R = _quat_to_matrix(_random_rotation(rng))
                lin_axes = [R[:, k] for k in rng.permutation(3)[: int(rng.integers(0, 3))]]
                R2 = _quat_to_matrix(_random_rotation(rng))
                ang_axes = [R2[:, k] for k in rng.permutation(3)[: int(rng.integers(1, 4))]]
            cfg_j = armillary.ModelBuilder.JointDofConfig
            j = b.add_joint_d6(parent, body,
                               linear_axes=[cfg_j(axis=wp.vec3(*a), **limits(), **params()) for a in lin_axes],
                               angular_axes=[cfg_j(axis=wp.vec3(*a), **limits(), **params()) for a in ang_axes],
                               **common)  # fmt: skip
        else:
            j = b.add_joint_free(body, label=f"joint {i}")
        joints.append(j)
    b.add_articulation(joints, label="random robot")
    return b.finalize(device="cpu")


def _hypothesis_examples() -> int:
    # each example is a subprocess of the reference engine while our importer is not installed
    return 25 if os.environ.get("ARMILLARY_USD_ROUNDTRIP_IMPORTER") != "reference" else 6


try:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover
    pass
else:

    @settings(max_examples=_hypothesis_examples(), deadline=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip
    @given(seed=st.integers(0, 2**31 - 1))
    def test_random_model_roundtrip(seed, tmp_path_factory):
        model = _random_model(seed)
        check_roundtrip(model, tmp_path_factory.mktemp("rt"), samples=3, seed=seed)

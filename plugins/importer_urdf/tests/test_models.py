"""Every URDF model of the shared asset corpus imports with default options and matches the file."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp
from _urdf_helpers import MODELS, Reference, import_quietly, quat_to_matrix

import armillary as newton

pytestmark = pytest.mark.skipif(not MODELS, reason="shared asset corpus not found")

# counts observed with the reference engine (newton 1.8, with the package path set) and
# derived from the files: bodies = links, joints = file joints + the root joint
EXPECTED = {
    "panda": dict(bodies=13, joints=13, dofs=9, mimic=1, warnings=0),
    "solo12": dict(bodies=17, joints=17, dofs=12, mimic=0, warnings=0),
    # talos: the reference engine fails (mimic on fixed joints); we warn once per <mimic>
    "talos": dict(bodies=60, joints=60, dofs=32, mimic=0, warnings=12),
}
# labels the reference engine produced for solo12 and panda (same order)
NEWTON_SOLO12_BODIES = [
    "base_link", "FL_SHOULDER", "FL_UPPER_LEG", "FL_LOWER_LEG", "FL_FOOT", "FR_SHOULDER", "FR_UPPER_LEG",
    "FR_LOWER_LEG", "FR_FOOT", "HL_SHOULDER", "HL_UPPER_LEG", "HL_LOWER_LEG", "HL_FOOT", "HR_SHOULDER",
    "HR_UPPER_LEG", "HR_LOWER_LEG", "HR_FOOT",
]  # fmt: skip
NEWTON_PANDA_JOINTS = [
    "fixed_base", "panda_joint1", "panda_joint2", "panda_joint3", "panda_joint4", "panda_joint5", "panda_joint6",
    "panda_joint7", "panda_joint8", "panda_hand_joint", "panda_hand_tcp_joint", "panda_finger_joint1",
    "panda_finger_joint2",
]  # fmt: skip

_CACHE: dict = {}


def imported(name):
    if name not in _CACHE:
        b = newton.ModelBuilder()
        w = import_quietly(b, MODELS[name])
        _CACHE[name] = (b, w)
    return _CACHE[name]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_imports_with_defaults(name):
    b, warns = imported(name)
    exp = EXPECTED[name]
    assert b.body_count == exp["bodies"]
    assert b.joint_count == exp["joints"]
    assert b.joint_dof_count == exp["dofs"]
    assert sum(1 for r in b.joint_mimic_joint if r >= 0) == exp["mimic"]
    assert len(warns) == exp["warnings"], [str(w.message) for w in warns]
    assert b.articulation_count == 1
    model = b.finalize(device="cpu")
    assert model.body_count == exp["bodies"]
    # no mesh silently missing: every <collision> and <visual> of the file became a shape
    ref = Reference(MODELS[name])
    n_geoms = len(ref.root.findall("link/collision")) + len(ref.root.findall("link/visual"))
    assert b.shape_count == n_geoms


@pytest.mark.parametrize("name", sorted(MODELS))
def test_labels_keep_file_names(name):
    b, _ = imported(name)
    ref = Reference(MODELS[name])
    p = ""  # labels are the file's own names
    assert sorted(b.body_label) == sorted(p + n for n in ref.links)
    assert sorted(b.joint_label) == sorted([p + "fixed_base"] + [p + n for n in ref.joints])
    assert b.articulation_label == [ref.robot]
    types = {"revolute": newton.JointType.REVOLUTE, "continuous": newton.JointType.REVOLUTE,
             "prismatic": newton.JointType.PRISMATIC, "fixed": newton.JointType.FIXED}  # fmt: skip
    for j, lbl in enumerate(b.joint_label[1:], start=1):
        assert b.joint_type[j] == types[ref.joint_types[lbl[len(p):]]]


def test_same_order_as_reference_engine():
    if "solo12" in MODELS:
        b, _ = imported("solo12")
        assert b.body_label == list(NEWTON_SOLO12_BODIES)
    if "panda" in MODELS:
        b, _ = imported("panda")
        assert b.joint_label == list(NEWTON_PANDA_JOINTS)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_masses_and_inertias_as_written(name):
    b, _ = imported(name)
    ref = Reference(MODELS[name])
    for ln in ref.links:
        i = b.body_label.index(ln)
        got = ref.inertial(ln)
        if got is None:
            continue
        m, com, inertia = got
        assert b.body_mass[i] == pytest.approx(m, rel=1e-6)
        np.testing.assert_allclose(np.asarray(b.body_com[i]), com, atol=1e-6)
        np.testing.assert_allclose(np.asarray(b.body_inertia[i]).reshape(3, 3), inertia, rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_limits_and_dynamics(name):
    b, _ = imported(name)
    ref = Reference(MODELS[name])
    for j, lbl in enumerate(b.joint_label):
        je = ref.joints.get(lbl)
        if je is None or je.get("type") not in ("revolute", "prismatic"):
            continue
        d = b.joint_qd_start[j]
        lim = je.find("limit")
        assert b.joint_limit_lower[d] == pytest.approx(float(lim.get("lower", 0)))
        assert b.joint_limit_upper[d] == pytest.approx(float(lim.get("upper", 0)))
        assert b.joint_effort_limit[d] == pytest.approx(float(lim.get("effort")))
        assert b.joint_velocity_limit[d] == pytest.approx(float(lim.get("velocity")))
        dyn = je.find("dynamics")
        if dyn is not None:
            assert b.joint_damping[d] == pytest.approx(float(dyn.get("damping", 0)))
            assert b.joint_friction[d] == pytest.approx(float(dyn.get("friction", 0)))


def test_panda_mimic_fingers():
    if "panda" not in MODELS:
        pytest.skip("panda missing")
    b, _ = imported("panda")
    f = b.joint_label.index("panda_finger_joint2")
    r = b.joint_label.index("panda_finger_joint1")
    assert b.joint_mimic_joint[f] == r
    assert b.joint_mimic_coeffs[f] == (0.0, 1.0)


def test_talos_mimic_on_fixed_warns_and_is_ignored():
    if "talos" not in MODELS:
        pytest.skip("talos missing")
    b, warns = imported("talos")
    ref = Reference(MODELS["talos"])
    followers = ref.mimic()
    assert len(followers) == 12
    msgs = [str(w.message) for w in warns]
    for name in followers:
        assert any(f"'{name}'" in m and "ignored" in m and "fixed" in m for m in msgs), name
    assert all("talos_reduced.urdf:" in m for m in msgs)  # file and line
    assert all(r == -1 for r in b.joint_mimic_joint)


def _world_poses(model, q):
    state = model.state()
    qd = wp.zeros(model.joint_dof_count, dtype=wp.float32, device="cpu")
    jq = wp.array(np.asarray(q, dtype=np.float32), dtype=wp.float32, device="cpu")
    newton.eval_fk(model, jq, qd, state)
    return state.body_q.numpy()


@pytest.mark.parametrize("name", sorted(MODELS))
def test_fk_matches_chain_of_transforms(name):
    b, _ = imported(name)
    ref = Reference(MODELS[name])
    model = b.finalize(device="cpu")
    rng = np.random.default_rng(7)
    mimic = ref.mimic()
    for _ in range(3):
        q = np.zeros(model.joint_coord_count)
        qmap = {}
        for j, lbl in enumerate(b.joint_label):
            jn = lbl
            je = ref.joints.get(jn)
            if je is None or je.get("type") not in ("revolute", "prismatic", "continuous"):
                continue
            lim = je.find("limit")
            lo, hi = (-3.0, 3.0) if lim is None or je.get("type") == "continuous" else (
                float(lim.get("lower", 0)), float(lim.get("upper", 0)))  # fmt: skip
            qmap[jn] = float(rng.uniform(lo, hi))
        for fol, (r, mult, off) in mimic.items():
            if ref.joint_types[fol] != "fixed" and ref.joint_types[r] != "fixed":
                qmap[fol] = off + mult * qmap[r]
        for j, lbl in enumerate(b.joint_label):
            jn = lbl
            if jn in qmap:
                q[b.joint_q_start[j]] = qmap[jn]
        body_q = _world_poses(model, q)
        poses = ref.fk(qmap)
        for ln, t in poses.items():
            i = b.body_label.index(ln)
            np.testing.assert_allclose(body_q[i, :3], t[:3, 3], atol=2e-5, err_msg=ln)
            np.testing.assert_allclose(quat_to_matrix(body_q[i, 3:]), t[:3, :3], atol=2e-5, err_msg=ln)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_zero_configuration_body_poses(name):
    """body_q of the builder holds the zero-configuration world poses."""
    b, _ = imported(name)
    ref = Reference(MODELS[name])
    poses = ref.fk({})
    for ln, t in poses.items():
        i = b.body_label.index(ln)
        np.testing.assert_allclose(np.asarray(b.body_q[i])[:3], t[:3, 3], atol=1e-5)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_collapse_fixed_joints_conserves_mass(name):
    b = newton.ModelBuilder()
    import_quietly(b, MODELS[name], collapse_fixed_joints=True)
    ref = Reference(MODELS[name])
    n_fixed = sum(1 for t in ref.joint_types.values() if t == "fixed")
    # every fixed joint of the file and the fixed root joint are gone
    assert b.joint_count == len(ref.joints) - n_fixed
    assert b.body_count == len(ref.links) - n_fixed - 1
    assert all(t != newton.JointType.FIXED for t in b.joint_type)
    # mass: everything except what went into the world (the root and its fixed descendants)
    full, _ = imported(name)
    world_bodies = {0}
    for j in range(full.joint_count):
        if full.joint_type[j] == newton.JointType.FIXED and (full.joint_parent[j] in world_bodies or full.joint_parent[j] == -1):
            world_bodies.add(full.joint_child[j])
    expected = sum(m for i, m in enumerate(full.body_mass) if i not in world_bodies)
    assert sum(b.body_mass) == pytest.approx(expected, rel=1e-6)
    b.finalize(device="cpu")
    # no shape lost
    assert b.shape_count == full.shape_count


def test_panda_collapsed_hand_inertia_direct():
    """link7 + link8 + hand + hand_tcp composed about their common COM, computed here directly."""
    if "panda" not in MODELS:
        pytest.skip("panda missing")
    b = newton.ModelBuilder()
    import_quietly(b, MODELS["panda"], collapse_fixed_joints=True)
    ref = Reference(MODELS["panda"])
    poses = ref.fk({})
    t7 = poses["panda_link7"]
    parts = []
    for ln in ("panda_link7", "panda_link8", "panda_hand", "panda_hand_tcp"):
        got = ref.inertial(ln)
        if got is None:
            continue
        m, com, inertia = got
        rel = np.linalg.inv(t7) @ poses[ln]
        parts.append((m, rel[:3, :3] @ com + rel[:3, 3], rel[:3, :3] @ inertia @ rel[:3, :3].T))
    mt = sum(p[0] for p in parts)
    ct = sum(p[0] * p[1] for p in parts) / mt
    it = np.zeros((3, 3))
    for m, c, i in parts:
        d = c - ct
        it += i + m * (d @ d * np.eye(3) - np.outer(d, d))
    i7 = b.body_label.index("panda_link7")
    assert b.body_mass[i7] == pytest.approx(mt)
    np.testing.assert_allclose(np.asarray(b.body_com[i7]), ct, atol=1e-6)
    np.testing.assert_allclose(np.asarray(b.body_inertia[i7]).reshape(3, 3), it, rtol=1e-5, atol=1e-8)
    # the finger joints are re-anchored: FK of the collapsed model matches the file
    model = b.finalize(device="cpu")
    q = np.zeros(model.joint_coord_count)
    body_q = _world_poses(model, q)
    for ln in ("panda_leftfinger", "panda_rightfinger", "panda_link7"):
        i = b.body_label.index(ln)
        np.testing.assert_allclose(body_q[i, :3], poses[ln][:3, 3], atol=1e-5)

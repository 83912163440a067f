"""Every invalid input raises ValueError naming the entity and leaves the builder unchanged."""

from __future__ import annotations

import math

import numpy as np
import pytest
import warp as wp
from hypothesis import given, settings
from hypothesis import strategies as st

import armillary as newton

nan = float("nan")


def snapshot(b):
    return {k: (len(v) if isinstance(v, (list, dict, set)) else v) for k, v in vars(b).items()
            if isinstance(v, (list, dict, set, int))} | {"pairs": sorted(b.shape_collision_filter_pairs)}  # fmt: skip


def base_builder():
    b = newton.ModelBuilder()
    a = b.add_link(label="a", mass=1.0)
    b.add_shape_sphere(a, radius=0.1)
    j = b.add_joint_revolute(-1, a, label="ja")
    b.add_articulation([j], label="art")
    return b


CASES = {
    "negative mass": (lambda b: b.add_link(mass=-1.0, label="neg"), r"neg.*mass"),
    "nan mass": (lambda b: b.add_link(mass=nan), r"body 1.*mass"),
    "nan com": (lambda b: b.add_link(com=(0, nan, 0)), r"body 1.*com"),
    "bad inertia": (lambda b: b.add_link(inertia=np.diag([1.0, -1.0, 1.0])), r"body 1.*inertia"),
    "asym inertia": (lambda b: b.add_link(inertia=[[1, 1, 0], [0, 1, 0], [0, 0, 1]]), r"body 1.*symmetric"),
    "nan xform": (lambda b: b.add_link(xform=wp.transform((nan, 0.0, 0.0), wp.quat_identity())), r"body 1.*xform"),
    "zero quat": (lambda b: b.add_link(xform=(0, 0, 0, 0, 0, 0, 0)), r"body 1.*quaternion"),
    "unknown child": (lambda b: b.add_joint_revolute(-1, 7, label="jx"), r"jx.*child body=7.*allowed"),
    "unknown parent": (lambda b: b.add_joint_revolute(5, 0), r"joint 1.*parent body=5"),
    "self joint": (lambda b: b.add_joint_revolute(0, 0), r"joint 1.*same body"),
    "zero axis": (lambda b: b.add_joint_revolute(-1, 0, axis=(0, 0, 0)), r"joint 1.*axis"),
    "nan axis": (lambda b: b.add_joint_prismatic(-1, 0, axis=(nan, 0, 0)), r"joint 1.*axis"),
    "bad axis name": (lambda b: b.add_joint_revolute(-1, 0, axis="w"), r"axis"),
    "limit order": (lambda b: b.add_joint_revolute(-1, 0, limit_lower=1.0, limit_upper=-1.0), r"joint 1.*limit_lower"),
    "negative gain": (lambda b: b.add_joint_revolute(-1, 0, target_ke=-1.0), r"joint 1.*target_ke"),
    "nan stiffness": (lambda b: b.add_joint_revolute(-1, 0, stiffness=nan), r"joint 1.*stiffness"),
    "bad joint type": (lambda b: b.add_joint(99, -1, 0), r"joint 1.*JointType"),
    "d6 too many axes": (
        lambda b: b.add_joint_d6(-1, 0, linear_axes=[newton.ModelBuilder.JointDofConfig()] * 4),
        r"joint 1.*D6.*4 linear",
    ),
    "revolute wrong axes": (lambda b: b.add_joint(newton.JointType.REVOLUTE, -1, 0), r"REVOLUTE.*angular"),
    "distance order": (lambda b: b.add_joint_distance(-1, 0, min_distance=2.0, max_distance=1.0), r"min_distance"),
    "sphere radius": (lambda b: b.add_shape_sphere(0, radius=-1.0, label="sph"), r"sph.*SPHERE.*radius must be > 0"),
    "box zero": (lambda b: b.add_shape_box(0, hx=0.0), r"shape 1.*BOX"),
    "capsule nan": (lambda b: b.add_shape_capsule(0, radius=nan), r"shape 1.*size"),
    "cylinder barrel": (lambda b: b.add_shape_cylinder(0, half_height=1.0, barrel_radius=0.5), r"barrel_radius"),
    "cone height": (lambda b: b.add_shape_cone(0, half_height=0.0), r"CONE.*half_height"),
    "ellipsoid": (lambda b: b.add_shape_ellipsoid(0, rx=-1.0), r"ELLIPSOID"),
    "shape body": (lambda b: b.add_shape_box(3), r"shape 1.*body=3.*allowed"),
    "mesh missing": (lambda b: b.add_shape_mesh(0), r"MESH.*Mesh source"),
    "heightfield missing": (lambda b: b.add_shape_heightfield(), r"HFIELD.*Heightfield"),
    "plane normal": (lambda b: b.add_shape_plane(plane=(0.0, 0.0, 0.0, 1.0)), r"normal"),
    "negative density": (lambda b: b.add_shape_box(0, cfg=newton.ModelBuilder.ShapeConfig(density=-1.0)), r"shape 1.*density"),
    "negative margin": (lambda b: b.add_shape_box(0, cfg=newton.ModelBuilder.ShapeConfig(margin=-0.1)), r"margin"),
    "nan mu": (lambda b: b.add_shape_box(0, cfg=newton.ModelBuilder.ShapeConfig(mu=nan)), r"mu"),
    "negative gap": (lambda b: b.add_shape_box(0, cfg=newton.ModelBuilder.ShapeConfig(gap=-1.0)), r"gap"),
    "sdf res": (lambda b: b.add_shape_box(0, cfg=newton.ModelBuilder.ShapeConfig(sdf_max_resolution=10)), r"multiple of 8"),
    "hydro plane": (lambda b: b.add_shape_plane(cfg=newton.ModelBuilder.ShapeConfig(is_hydroelastic=True)), r"hydroelastic"),
    "filter pair": (lambda b: b.add_shape_collision_filter_pair(0, 9), r"shape_b=9"),
    "filter self": (lambda b: b.add_shape_collision_filter_pair(0, 0), r"same shape"),
    "empty articulation": (lambda b: b.add_articulation([]), r"no joints"),
    "articulation twice": (lambda b: b.add_articulation([0]), r"Joint 0 \('ja'\).*already belongs.*art"),
    "articulation bad index": (lambda b: b.add_articulation([4]), r"joint index=4"),
    "mimic self": (lambda b: b.set_joint_mimic(0, 0), r"joint 0 cannot mimic itself"),
    "mimic index": (lambda b: b.set_joint_mimic(0, 3), r"reference_joint=3"),
    "mimic coeffs": (lambda b: b.set_joint_mimic(0, 0, coeffs=(nan, 1.0)), r"coeffs"),
    "replicate count": (lambda b: b.replicate(newton.ModelBuilder(), world_count=-1), r"world_count"),
    "replicate self": (lambda b: b.replicate(b, world_count=1), r"itself"),
    "gravity": (lambda b: newton.ModelBuilder(gravity=(0.0, nan, 0.0)), r"gravity"),
    "up axis": (lambda b: newton.ModelBuilder(up_axis="q"), r"axis"),
    "mesh indices": (lambda b: newton.Mesh([[0, 0, 0], [1, 0, 0], [0, 1, 0]], [0, 1, 5]), r"indices"),
    "mesh nan": (lambda b: newton.Mesh([[0, 0, nan]], []), r"finite"),
    "heightfield size": (lambda b: newton.Heightfield(np.zeros(5), nrow=2, ncol=2), r"nrow\*ncol"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_invalid_input(name):
    b = base_builder()
    before = snapshot(b)
    fn, pattern = CASES[name]
    with pytest.raises(ValueError, match=pattern):
        fn(b)
    assert snapshot(b) == before, "builder state changed by a rejected call"
    b.finalize(device="cpu")  # still consistent


def test_mimic_validation():
    b = newton.ModelBuilder()
    a, c, d = b.add_link(), b.add_link(), b.add_link()
    j0 = b.add_joint_ball(-1, a)
    j1 = b.add_joint_revolute(a, c)
    j2 = b.add_joint_revolute(c, d)
    with pytest.raises(ValueError, match="BALL"):
        b.set_joint_mimic(j1, j0)
    b.set_joint_mimic(j2, j1)
    e = b.add_link()
    j3 = b.add_joint_revolute(d, e)
    with pytest.raises(ValueError, match="already a mimic joint"):
        b.set_joint_mimic(j3, j2)
    with pytest.raises(ValueError, match="already referenced"):
        b.set_joint_mimic(j1, j3)
    f = b.add_link()
    j4 = b.add_joint_d6(e, f, linear_axes=[newton.ModelBuilder.JointDofConfig()] * 2)
    with pytest.raises(ValueError, match="dimensions must match"):
        b.set_joint_mimic(j4, j3)
    b.set_joint_mimic(j2, None)
    assert b.joint_mimic_joint[j2] == -1


def test_articulation_structure_errors():
    b = newton.ModelBuilder()
    a, c, d = b.add_link(), b.add_link(), b.add_link()
    j0 = b.add_joint_revolute(-1, a)
    j1 = b.add_joint_revolute(-1, c)
    j2 = b.add_joint_revolute(a, d)
    with pytest.raises(ValueError, match="contiguous"):
        b.add_articulation([j0, j2])
    b2 = newton.ModelBuilder()
    a = b2.add_link()
    c = b2.add_link()
    k0 = b2.add_joint_revolute(-1, a)
    k1 = b2.add_joint_revolute(c, a)
    with pytest.raises(ValueError, match="already the child"):
        b2.add_articulation([k0, k1])
    assert b2.joint_articulation == [-1, -1]
    del j1


def test_finalize_joint_validation_messages():
    # cross-articulation
    b = newton.ModelBuilder()
    a, c, d = b.add_link(), b.add_link(), b.add_link()
    b.add_articulation([b.add_joint_revolute(-1, a)], label="A")
    j1 = b.add_joint_revolute(-1, c)
    j2 = b.add_joint_revolute(a, d, label="x")
    b.add_articulation([j1, j2], label="B")
    with pytest.raises(ValueError, match=r"Joint 2 \('x'\) in articulation 1 \('B'\) has parent body 0.*articulation 0 \('A'\)"):
        b.finalize(device="cpu")
    assert b.finalize(device="cpu", skip_validation_joints=True).joint_count == 3
    # standalone world-root joint accepted; loop closing accepted
    b = newton.ModelBuilder()
    a = b.add_link()
    b.add_joint_revolute(-1, a)
    c, d = b.add_link(), b.add_link()
    b.add_articulation([b.add_joint_revolute(-1, c), b.add_joint_revolute(c, d)])
    b.add_joint_fixed(c, d)
    m = b.finalize(device="cpu")
    assert m.joint_articulation.numpy().tolist() == [-1, 0, 0, -1]
    # orphan between a reachable body and an unreachable one
    e = b.add_link()
    b.add_joint_ball(d, e, label="dangling")
    with pytest.raises(ValueError, match=r"joint 4 \('dangling'\)"):
        b.finalize(device="cpu")


def test_finalize_structure_validation_after_list_edits():
    b = base_builder()
    b.joint_q.append(0.0)
    with pytest.raises(ValueError, match="joint_q"):
        b.finalize(device="cpu")
    b.joint_q.pop()
    b.body_mass[0] = -3.0
    with pytest.raises(ValueError, match=r"Body 0 \('a'\).*mass"):
        b.finalize(device="cpu")
    b.body_mass[0] = 1.0
    b.begin_world()
    with pytest.raises(RuntimeError, match="end_world"):
        b.finalize(device="cpu")


@settings(max_examples=40, deadline=None)
@given(
    mass=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.just(-1e-9)),
    radius=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.just(0.0)),
    body=st.integers(-3, 4),
)
def test_random_inputs_raise_or_succeed_cleanly(mass, radius, body):
    b = base_builder()
    before = snapshot(b)
    try:
        b.add_link(mass=mass)
        ok_mass = True
    except ValueError as e:
        ok_mass = False
        assert "mass" in str(e)
        assert snapshot(b) == before
    assert ok_mass == (math.isfinite(mass) and 0 <= mass <= float(np.finfo(np.float32).max))
    before = snapshot(b)
    try:
        b.add_shape_sphere(body, radius=radius)
    except ValueError as e:
        assert "shape" in str(e)
        assert snapshot(b) == before
    else:
        assert math.isfinite(radius) and radius > 0 and -1 <= body < b.body_count
    b.finalize(device="cpu")

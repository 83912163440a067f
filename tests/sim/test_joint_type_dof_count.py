"""JointType.dof_count: (dof_count, coord_count) in the reference engine's order, and equal to what the
builder actually allocates for every joint type."""

import armillary as newton
import pytest
import warp as wp

JT = newton.JointType


@pytest.mark.parametrize(
    "jt, num_axes, expected",
    [
        (JT.PRISMATIC, 1, (1, 1)),
        (JT.REVOLUTE, 1, (1, 1)),
        (JT.D6, 3, (3, 3)),
        (JT.D6, 6, (6, 6)),
        (JT.BALL, 0, (3, 4)),
        (JT.FIXED, 0, (0, 0)),
        (JT.FREE, 0, (6, 7)),
        (JT.DISTANCE, 0, (6, 7)),
        (JT.ROD, 0, (6, 7)),
    ],
)
def test_dof_count_order(jt, num_axes, expected):
    assert jt.dof_count(num_axes) == expected


def _one_joint_model(kind):
    b = newton.ModelBuilder()
    body = b.add_body(mass=1.0, inertia=wp.mat33(0.1, 0, 0, 0, 0.1, 0, 0, 0, 0.1))
    Dof = newton.ModelBuilder.JointDofConfig
    if kind == JT.PRISMATIC:
        b.add_joint_prismatic(-1, body, axis=(1.0, 0.0, 0.0)); axes = 1
    elif kind == JT.REVOLUTE:
        b.add_joint_revolute(-1, body, axis=(0.0, 0.0, 1.0)); axes = 1
    elif kind == JT.BALL:
        b.add_joint_ball(-1, body); axes = 0
    elif kind == JT.FIXED:
        b.add_joint_fixed(-1, body); axes = 0
    elif kind == JT.FREE:
        b.add_joint_free(body); axes = 0
    elif kind == JT.DISTANCE:
        b.add_joint_distance(-1, body, min_distance=0.0, max_distance=1.0); axes = 0
    elif kind == JT.D6:
        b.add_joint_d6(-1, body, linear_axes=[Dof(axis=(1.0, 0.0, 0.0))],
                       angular_axes=[Dof(axis=(0.0, 0.0, 1.0)), Dof(axis=(0.0, 1.0, 0.0))]); axes = 3
    elif kind == JT.ROD:
        other = b.add_body(mass=1.0, inertia=wp.mat33(0.1, 0, 0, 0, 0.1, 0, 0, 0, 0.1))
        b.add_joint_free(body)
        b.add_joint_rod(body, other); axes = 0
    model = b.finalize(device="cpu")
    return model, axes


@pytest.mark.parametrize("kind", list(JT))
def test_dof_count_matches_builder_layout(kind):
    model, axes = _one_joint_model(kind)
    jt = model.joint_type.numpy()
    q_start = model.joint_q_start.numpy()
    qd_start = model.joint_qd_start.numpy()
    j = int(list(jt).index(int(kind)))
    assert (int(qd_start[j + 1] - qd_start[j]), int(q_start[j + 1] - q_start[j])) == kind.dof_count(axes)

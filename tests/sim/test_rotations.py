"""Host-side xyzw quaternion helpers (armillary.sim.rotations) against Warp's own quaternion maths."""

import numpy as np
import warp as wp
from hypothesis import given, settings
from hypothesis import strategies as st

from armillary.sim.rotations import quat_conjugate, quat_from_matrix, quat_multiply, quat_rotate, quat_to_matrix

unit = st.lists(st.floats(-1.0, 1.0), min_size=4, max_size=4).filter(lambda v: np.linalg.norm(v) > 0.1).map(
    lambda v: np.asarray(v) / np.linalg.norm(v))


@settings(max_examples=60, deadline=None)
@given(unit, unit, st.lists(st.floats(-2.0, 2.0), min_size=3, max_size=3))
def test_product_rotation_and_matrix_agree_with_warp(a, b, v):
    ab = quat_multiply(a, b)
    ref = wp.mul(wp.quat(*a), wp.quat(*b))
    np.testing.assert_allclose(ab, [ref[0], ref[1], ref[2], ref[3]], atol=1e-6)
    np.testing.assert_allclose(quat_rotate(ab, v), quat_rotate(a, quat_rotate(b, v)), atol=1e-9)
    np.testing.assert_allclose(quat_multiply(a, quat_conjugate(a)), [0, 0, 0, 1], atol=1e-12)
    q = quat_from_matrix(quat_to_matrix(a))
    assert q[3] >= 0.0
    assert min(np.abs(q - a).max(), np.abs(q + a).max()) < 1e-9  # the same rotation (sign free at w = 0)


def test_broadcasting_and_half_turns():
    qs = np.array([[0, 0, 0, 1], [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]], dtype=float)
    np.testing.assert_allclose(quat_multiply(qs, qs)[1:], [[0, 0, 0, -1]] * 3)
    for q in qs:  # w = 0 exercises every branch of Shepperd's method
        r = quat_from_matrix(quat_to_matrix(q))
        assert min(np.abs(r - q).max(), np.abs(r + q).max()) < 1e-12


def test_single_and_batched_paths_agree():
    rng = np.random.default_rng(3)
    q = rng.normal(size=(5, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    v = rng.normal(size=(5, 3))
    batched_rot, batched_mul = quat_rotate(q, v), quat_multiply(q, q[::-1])
    for i in range(5):
        np.testing.assert_allclose(quat_rotate(q[i], v[i]), batched_rot[i], atol=1e-14)
        np.testing.assert_allclose(quat_multiply(q[i], q[4 - i]), batched_mul[i], atol=1e-14)

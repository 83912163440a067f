"""Model.gravity keeps a row for the global world -1 (the last row); set_gravity addresses it.

Before issue 20 the array had one row per world, global bodies and articulations silently took
world 0's gravity and ``set_gravity(g, world=-1)`` raised.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import warp as wp

import armillary as newton
from armillary.sim.gravity import gravity_of_world


def _two_worlds_and_a_global_body():
    t = newton.ModelBuilder()
    t.add_body(xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()), mass=1.0)
    b = newton.ModelBuilder()
    b.replicate(t, 2)
    b.add_body(xform=wp.transform((5.0, 0.0, 1.0), wp.quat_identity()), mass=1.0)  # global (world -1)
    return b


def test_finalize_adds_the_global_row():
    b = newton.ModelBuilder(gravity=(0.0, 0.0, -5.0))
    b.begin_world(gravity=(0.0, 0.0, -1.0))
    b.add_body(mass=1.0)
    b.end_world()
    b.begin_world()
    b.add_body(mass=1.0)
    b.end_world()
    b.add_body(mass=1.0)
    m = b.finalize(device="cpu")
    assert m.world_count == 2
    assert m.gravity.shape == (3,)
    # world 0's own gravity, world 1 the builder's, the global world (last row) the builder's
    np.testing.assert_allclose(m.gravity.numpy(), [[0, 0, -1], [0, 0, -5], [0, 0, -5]])


def test_model_without_worlds_keeps_a_single_row():
    b = newton.ModelBuilder()
    b.add_body(mass=1.0)
    m = b.finalize(device="cpu")
    assert m.gravity.shape == (1,)
    m.set_gravity((0.0, 0.0, -2.0), world=-1)  # the global world is that row
    np.testing.assert_allclose(m.gravity.numpy(), [[0, 0, -2]])
    m.set_gravity((0.0, 0.0, -3.0), world=0)
    np.testing.assert_allclose(m.gravity.numpy(), [[0, 0, -3]])


def test_set_gravity_world_minus_one_and_arrays():
    m = _two_worlds_and_a_global_body().finalize(device="cpu")
    m.set_gravity((1.0, 0.0, -4.0), world=-1)
    np.testing.assert_allclose(m.gravity.numpy(), [[0, 0, -9.81], [0, 0, -9.81], [1, 0, -4]], rtol=1e-6)
    m.set_gravity(np.array([[0.0, 0.0, -2.0], [0.0, 0.0, -3.0]]))  # (world_count, 3): global row kept
    np.testing.assert_allclose(m.gravity.numpy(), [[0, 0, -2], [0, 0, -3], [1, 0, -4]])
    m.set_gravity([[0.0, 0.0, -6.0], [0.0, 0.0, -7.0], [0.0, 0.0, -8.0]])  # (world_count + 1, 3)
    np.testing.assert_allclose(m.gravity.numpy(), [[0, 0, -6], [0, 0, -7], [0, 0, -8]])
    m.set_gravity(wp.vec3(0.0, 0.0, -1.0))  # a single vector: every row, the global one included
    np.testing.assert_allclose(m.gravity.numpy(), [[0, 0, -1]] * 3)
    m.set_gravity((0.0, 1.0, 0.0), world=1)
    np.testing.assert_allclose(m.gravity.numpy(), [[0, 0, -1], [0, 1, 0], [0, 0, -1]])


@pytest.mark.parametrize(
    ("gravity", "world", "error", "match"),
    [
        (np.zeros((4, 3)), None, ValueError, r"\(2, 3\) or \(3, 3\)"),
        ((1.0, 2.0), None, ValueError, "3 finite numbers"),
        ((0.0, 0.0, np.nan), None, ValueError, "finite"),
        (np.zeros((2, 3)), 0, ValueError, "single gravity vector"),
        ((0.0, 0.0, 1.0), 2, IndexError, "out of range"),
        ((0.0, 0.0, 1.0), -2, IndexError, "out of range"),
    ],
)
def test_set_gravity_rejects(gravity, world, error, match):
    m = _two_worlds_and_a_global_body().finalize(device="cpu")
    before = m.gravity.numpy().copy()
    with pytest.raises(error, match=match):
        m.set_gravity(gravity, world=world)
    np.testing.assert_array_equal(m.gravity.numpy(), before)


def test_scalar_builder_gravity_is_deprecated_but_accepted():
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        b = newton.ModelBuilder(up_axis="y", gravity=-5.0)
    assert [w.category for w in rec] == [newton.NewtonDeprecationWarning]
    assert rec[0].filename == __file__
    assert np.allclose(b.gravity, (0.0, -5.0, 0.0))
    b.begin_world()
    b.add_body(mass=1.0)
    b.end_world()
    np.testing.assert_allclose(b.finalize(device="cpu").gravity.numpy(), [[0, -5, 0], [0, -5, 0]])


@wp.kernel
def _lookup(gravity: wp.array(dtype=wp.vec3), worlds: wp.array(dtype=wp.int32), out: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    out[i] = gravity_of_world(gravity, worlds[i])


def test_gravity_of_world_lookup():
    g = wp.array([[0.0, 0.0, -1.0], [0.0, 0.0, -2.0], [0.0, 0.0, -3.0]], dtype=wp.vec3, device="cpu")
    worlds = wp.array([0, 1, -1, 7], dtype=wp.int32, device="cpu")
    out = wp.zeros(4, dtype=wp.vec3, device="cpu")
    wp.launch(_lookup, 4, inputs=[g, worlds, out], device="cpu")
    np.testing.assert_allclose(out.numpy()[:, 2], [-1, -2, -3, -3])
    empty = wp.zeros(0, dtype=wp.vec3, device="cpu")
    wp.launch(_lookup, 4, inputs=[empty, worlds, out], device="cpu")
    np.testing.assert_array_equal(out.numpy(), np.zeros((4, 3)))


def _pendulum(b):
    link = b.add_link(mass=2.0, com=(0.5, 0.0, 0.0), inertia=wp.mat33(np.eye(3) * 0.1))
    j = b.add_joint_revolute(-1, link, axis=(0.0, 1.0, 0.0))
    b.add_articulation([j])


def test_gravity_force_of_a_global_articulation_uses_the_global_row():
    """eval_inverse_dynamics_passive: an articulation in world -1 feels the global world's gravity."""
    b = newton.ModelBuilder()
    b.begin_world()
    _pendulum(b)
    b.end_world()
    _pendulum(b)  # global articulation
    m = b.finalize(device="cpu")
    assert m.joint_world.numpy().tolist() == [0, -1]
    m.set_gravity((0.0, 0.0, -1.0), world=0)
    m.set_gravity((0.0, 0.0, -4.0), world=-1)
    s = m.state()
    newton.eval_fk(m, s.joint_q, s.joint_qd, s)
    g = wp.zeros(m.joint_dof_count, dtype=wp.float32, device="cpu")
    newton.eval_inverse_dynamics_passive(m, s, gravity_force=g)
    # hinge about +y, COM at +x 0.5 m: the COM height is -0.5 sin q, U = m |g| z, g(q) = dU/dq = -m |g| 0.5
    np.testing.assert_allclose(g.numpy(), [-2.0 * 1.0 * 0.5, -2.0 * 4.0 * 0.5], rtol=1e-5)


def test_default_coupling_gravity_hook_follows_the_global_row():
    from armillary.solvers.coupling import CouplingInterface

    m = _two_worlds_and_a_global_body().finalize(device="cpu")
    m.set_gravity((0.0, 0.0, -1.0), world=0)
    m.set_gravity((0.0, 0.0, -2.0), world=1)
    m.set_gravity((3.0, 0.0, -4.0), world=-1)

    class _Plain(CouplingInterface):
        def __init__(self, model):
            self.model = model

    out = wp.zeros(m.body_count, dtype=wp.vec3, device="cpu")
    CouplingInterface.coupling_eval_gravity_acceleration(_Plain(m), out, None)
    np.testing.assert_allclose(out.numpy(), [[0, 0, -1], [0, 0, -2], [3, 0, -4]])

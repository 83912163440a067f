"""Shared scenes of the coupling tests."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import armillary as newton

DT = 1.0e-2


def two_bodies(*, ground: bool = False, z=(1.0, 1.0), with_particles: bool = False):
    """Two free bodies (a sphere 'a' and a box 'c'), optionally a ground plane and two particles."""
    b = newton.ModelBuilder()
    a = b.add_body(xform=wp.transform((0.0, 0.0, z[0]), wp.quat_identity()), mass=1.0, label="a")
    b.add_shape_sphere(a, radius=0.1)
    c = b.add_body(xform=wp.transform((1.0, 0.0, z[1]), wp.quat_identity()), mass=2.0, label="c")
    b.add_shape_box(c, hx=0.1, hy=0.2, hz=0.1)
    if with_particles:
        b.add_particle((2.0, 0.0, 1.0), (0.0, 0.0, 0.0), 0.5, radius=0.05)
        b.add_particle((2.5, 0.0, 1.0), (0.1, 0.0, 0.0), 0.5, radius=0.05)
    if ground:
        b.add_ground_plane()
    return b.finalize()


def one_body(which: str, *, ground: bool = False, z: float = 1.0):
    """The same body alone (for stand-alone reference runs)."""
    b = newton.ModelBuilder()
    if which == "a":
        i = b.add_body(xform=wp.transform((0.0, 0.0, z), wp.quat_identity()), mass=1.0, label="a")
        b.add_shape_sphere(i, radius=0.1)
    else:
        i = b.add_body(xform=wp.transform((1.0, 0.0, z), wp.quat_identity()), mass=2.0, label="c")
        b.add_shape_box(i, hx=0.1, hy=0.2, hz=0.1)
    if ground:
        b.add_ground_plane()
    return b.finalize()


INITIAL_QD = {"a": [0.5, 0.0, 1.0, 0.3, 1.0, 0.2], "c": [0.0, 0.2, 0.0, 1.0, 0.0, 0.5]}
FORCE = {"a": [0.0, 1.0, 0.0, 0.0, 0.0, 0.05], "c": [0.5, 0.0, 0.0, 0.02, 0.0, 0.0]}


def set_initial(model, state, names):
    """Body velocities from INITIAL_QD and consistent joint coordinates (eval_ik)."""
    state.body_qd.assign(np.array([INITIAL_QD[n] for n in names], np.float32))
    newton.eval_ik(model, state, state.joint_q, state.joint_qd)


@pytest.fixture
def scenes():
    """The helpers of this module (test files import nothing from each other)."""
    import types

    return types.SimpleNamespace(DT=DT, two_bodies=two_bodies, one_body=one_body, INITIAL_QD=INITIAL_QD, FORCE=FORCE,
                                 set_initial=set_initial)

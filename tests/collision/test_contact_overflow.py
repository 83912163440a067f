"""Contact-buffer overflow is counted and reported, never silent (issue 21).

A contact (or broad-phase candidate pair) that finds its buffer full is dropped, the count stays
clamped to the capacity, and the kernel that appends it counts it in ``Contacts.contact_counters``
(this collide) and ``Contacts.contact_capacity_needed`` (since ``clear()``);
``CollisionPipeline.check_overflow`` warns once per pipeline and kind with the capacity to pass.
"""

from __future__ import annotations

import types
import warnings

import numpy as np
import pytest
import warp as wp

import armillary as newton
from armillary.sim.contacts import ContactOverflow


def _box_cluster(particles: bool = False):
    """A ground plane and 4 boxes in a 2 x 2 cluster, pressed into the plane and into each other:
    plane-box and box-box contacts, more than 16 in all."""
    b = newton.ModelBuilder()
    b.add_ground_plane()
    for i in range(2):
        for j in range(2):
            body = b.add_body(xform=wp.transform((0.19 * i, 0.19 * j, 0.095), wp.quat_identity()))
            b.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1)
    if particles:  # a 6 x 6 particle grid resting on the cluster's top faces (z = 0.195)
        for x in np.linspace(-0.05, 0.24, 6):
            for y in np.linspace(-0.05, 0.24, 6):
                b.add_particle((float(x), float(y), 0.2), (0.0, 0.0, 0.0), 1.0, radius=0.01)
    return b.finalize(device="cpu")


def _true_counts(model, **kw):
    """(rigid, soft) contact counts with the default (ample) capacities."""
    p = newton.CollisionPipeline(model, publish_capacity=False, **kw)
    c = p.contacts()
    p.collide(model.state(), c)
    assert not c.overflow()
    return int(c.rigid_contact_count.numpy()[0]), int(c.soft_contact_count.numpy()[0])


@pytest.mark.parametrize("deterministic", [False, True])
def test_rigid_overflow_counts_exactly_and_warns_once(deterministic):
    model = _box_cluster()
    true_rigid, _ = _true_counts(model, deterministic=deterministic)
    assert true_rigid > 16
    p = newton.CollisionPipeline(model, rigid_contact_max=16, deterministic=deterministic)
    c = p.contacts()
    p.collide(model.state(), c)
    assert int(c.rigid_contact_count.numpy()[0]) == 16  # clamped: solvers read at most the capacity
    assert c.rigid_contact_dropped == true_rigid - 16
    assert c.contact_counters.numpy().tolist() == [true_rigid - 16, 0, 0, 0]
    o = c.overflow()
    assert o == ContactOverflow(rigid_dropped=true_rigid - 16, rigid_needed=true_rigid) and o
    with pytest.warns(newton.NewtonWarning, match=rf"rigid contacts: one collide\(\) produced {true_rigid} but "
                      rf"rigid_contact_max=16, {true_rigid - 16} dropped.*pass rigid_contact_max={true_rigid} or more"):
        assert p.check_overflow(c) == o
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p.collide(model.state(), c)
        assert p.check_overflow(c) == o  # counted again, reported once per pipeline
    # a new pipeline reports again; passing the capacity it names removes the overflow
    p2 = newton.CollisionPipeline(model, rigid_contact_max=16, deterministic=deterministic)
    c2 = p2.contacts()
    p2.collide(model.state(), c2)
    with pytest.warns(newton.NewtonWarning, match="rigid_contact_max"):
        p2.check_overflow(c2)
    p3 = newton.CollisionPipeline(model, rigid_contact_max=o.rigid_needed, deterministic=deterministic)
    c3 = p3.contacts()
    p3.collide(model.state(), c3)
    assert not c3.overflow() and int(c3.rigid_contact_count.numpy()[0]) == true_rigid


def test_contacts_smaller_than_the_pipeline_are_counted_too():
    """A directly allocated buffer smaller than the pipeline's capacity overflows on its own."""
    model = _box_cluster()
    true_rigid, _ = _true_counts(model)
    p = newton.CollisionPipeline(model, publish_capacity=False)
    c = newton.Contacts(5, 0)
    p.collide(model.state(), c)
    assert int(c.rigid_contact_count.numpy()[0]) == 5
    assert c.overflow() == ContactOverflow(rigid_dropped=true_rigid - 5, rigid_needed=true_rigid)
    with pytest.warns(newton.NewtonWarning, match=rf"rigid_contact_max=5, .*rigid_contact_max={true_rigid} "):
        p.check_overflow(c)


def test_soft_overflow_counts_exactly_and_warns():
    model = _box_cluster(particles=True)
    true_rigid, true_soft = _true_counts(model)
    assert true_soft >= 36  # every particle touches a top face (some two, on the seams)
    p = newton.CollisionPipeline(model, soft_contact_max=10)
    c = p.contacts()
    p.collide(model.state(), c)
    assert int(c.soft_contact_count.numpy()[0]) == 10
    assert int(c.rigid_contact_count.numpy()[0]) == true_rigid
    assert c.soft_contact_dropped == true_soft - 10 and c.rigid_contact_dropped == 0
    assert c.overflow() == ContactOverflow(soft_dropped=true_soft - 10, soft_needed=true_soft)
    with pytest.warns(newton.NewtonWarning, match=rf"soft \(particle-shape\) contacts: one collide\(\) produced "
                      rf"{true_soft} but soft_contact_max=10.*pass soft_contact_max={true_soft} or more"):
        p.check_overflow(c)


@pytest.mark.parametrize("broad_phase", ["nxn", "sap"])
def test_broad_phase_pair_overflow_is_counted(broad_phase):
    model = _box_cluster()
    full = newton.CollisionPipeline(model, broad_phase=broad_phase, publish_capacity=False)
    c = full.contacts()
    full.collide(model.state(), c)
    pairs = int(full._counters.numpy()[0])  # candidate pairs the broad phase found
    assert pairs == 4 + 6 and not c.overflow()  # plane-box and every box-box pair of the 2 x 2 cluster
    p = newton.CollisionPipeline(model, broad_phase=broad_phase, shape_pairs_max=3, publish_capacity=False)
    c = p.contacts()
    p.collide(model.state(), c)
    assert c.shape_pairs_dropped == pairs - 3
    assert c.overflow() == ContactOverflow(pairs_dropped=pairs - 3, pairs_needed=pairs)
    with pytest.warns(newton.NewtonWarning, match=rf"candidate shape pairs: one collide\(\) produced {pairs} but "
                      rf"shape_pairs_max=3.*pass shape_pairs_max={pairs} or more"):
        p.check_overflow(c)


def test_no_overflow_reads_zero_and_does_not_warn():
    model = _box_cluster(particles=True)
    p = newton.CollisionPipeline(model)
    c = p.contacts()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):
            p.collide(model.state(), c)
            assert p.check_overflow(c) == ContactOverflow() and not c.overflow()
    assert c.contact_counters.numpy().tolist() == [0, 0, 0, 0]
    assert c.contact_capacity_needed.numpy().tolist() == [0, 0, 0, 0]


@pytest.mark.parametrize("clear_buffers", [False, True])
def test_dropped_is_per_collide_needed_is_kept_until_clear(clear_buffers):
    model = _box_cluster()
    true_rigid, _ = _true_counts(model)
    p = newton.CollisionPipeline(model, rigid_contact_max=16)
    c = newton.Contacts(16, 0, clear_buffers=clear_buffers)
    state = model.state()
    p.collide(state, c)
    assert c.overflow() == ContactOverflow(rigid_dropped=true_rigid - 16, rigid_needed=true_rigid)
    # lift the boxes apart: the next collide drops nothing, the needed capacity is remembered
    q = state.body_q.numpy()
    q[:, :3] *= 10.0
    q[:, 2] += 5.0
    state.body_q.assign(q)
    p.collide(state, c)
    assert int(c.rigid_contact_count.numpy()[0]) == 0
    assert c.overflow() == ContactOverflow(rigid_needed=true_rigid)
    with pytest.warns(newton.NewtonWarning, match=rf"produced {true_rigid} .* 0 dropped in the last collide"):
        p.check_overflow(c)  # an overflow in an earlier substep is still reported
    c.clear()
    assert c.overflow() == ContactOverflow() and not c.overflow()
    assert c.contact_counters.numpy().tolist() == [0, 0, 0, 0]


def test_runner_warns_once_about_overflow(registry, tmp_path):
    """``armillary run`` checks the contacts once per frame and warns once."""
    from armillary.hookspecs import hookimpl
    from armillary.runner import RunOptions, run
    from armillary.solvers import SolverBase, SolverCapabilities

    class SolverHold(SolverBase):
        """Holds every body in place; shrinks the model's contact capacity first."""

        capabilities = SolverCapabilities(coordinates="maximal", joint_types={"FREE"}, collision_pipeline=True)

        def __init__(self, model):
            super().__init__(model)
            model.rigid_contact_max = 16  # model.contacts() and the default pipeline read it

        def step(self, state_in, state_out, control, contacts, dt):
            state_out.body_q.assign(state_in.body_q)
            state_out.body_qd.assign(state_in.body_qd)

    def builder(world_count=1):
        b = newton.ModelBuilder()
        b.add_ground_plane()
        for i in range(2):
            for j in range(2):
                body = b.add_body(xform=wp.transform((0.19 * i, 0.19 * j, 0.095), wp.quat_identity()))
                b.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1)
        return b

    ns = types.SimpleNamespace(
        armillary_register_solvers=hookimpl(lambda registry: registry.add("SolverHold", SolverHold, summary="test")),
        armillary_register_scenes=hookimpl(lambda registry: registry.add(
            "box_cluster", builder, summary="test", dt=0.01, frames=3, substeps=2)),
    )  # fmt: skip
    registry.register(ns, name="overflow_test")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run(RunOptions(scene="box_cluster", solver="SolverHold", out=None, progress=False))
    msgs = [str(w.message) for w in caught if issubclass(w.category, newton.NewtonWarning)]
    assert len(msgs) == 1 and "rigid_contact_max=16" in msgs[0], msgs


@pytest.mark.parametrize("deterministic", [False, True])
def test_narrow_phase_api_counts_dropped_contacts(deterministic):
    """``NarrowPhase.dropped_contact_count``: contacts beyond the output arrays are counted."""
    from armillary.geometry import BroadPhaseExplicit, NarrowPhase

    from .test_narrow_phase_api import _aabbs, _narrow_inputs, _world_shape_transforms

    model = _box_cluster()
    true_rigid, _ = _true_counts(model)
    X = _world_shape_transforms(model, model.state())
    lower, upper = _aabbs(model, X)
    pairs = wp.array(np.asarray(model.shape_contact_pairs, np.int32).reshape(-1, 2), dtype=wp.vec2i)
    cand, count = wp.zeros(len(pairs), dtype=wp.vec2i), wp.zeros(1, dtype=int)
    BroadPhaseExplicit().launch(lower, upper, None, pairs, len(pairs), cand, count, shape_body=model.shape_body)
    nph = NarrowPhase(max_candidate_pairs=len(pairs), deterministic=deterministic)

    def launch(cap):
        out = dict(contact_pair=wp.zeros(cap, dtype=wp.vec2i), contact_position=wp.zeros(cap, dtype=wp.vec3),
                   contact_normal=wp.zeros(cap, dtype=wp.vec3), contact_penetration=wp.zeros(cap, dtype=float),
                   contact_count=wp.zeros(1, dtype=int))  # fmt: skip
        nph.launch(candidate_pair=cand, candidate_pair_count=count, **_narrow_inputs(model, X), **out)
        return int(out["contact_count"].numpy()[0]), int(nph.dropped_contact_count.numpy()[0])

    assert launch(100) == (true_rigid, 0)
    assert launch(7) == (7, true_rigid - 7)
    assert launch(100) == (true_rigid, 0)  # reset by every launch


def test_hydroelastic_contacts_overflow_is_counted():
    from .test_hydroelastic import _sphere_on_box

    model = _sphere_on_box()
    true_rigid, _ = _true_counts(model)
    assert true_rigid > 3
    p = newton.CollisionPipeline(model, rigid_contact_max=3)
    c = p.contacts()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # HydroelasticSDF's own overflow report
        p.collide(model.state(), c)
    assert int(c.rigid_contact_count.numpy()[0]) == 3
    assert c.overflow() == ContactOverflow(rigid_dropped=true_rigid - 3, rigid_needed=true_rigid)


def test_broad_phase_pair_overflow_is_counted_with_hydroelastic_pairs():
    """The hydroelastic split rewrites the candidate count; the pairs dropped before it still count."""
    b = newton.ModelBuilder()
    hyd = b.ShapeConfig(is_hydroelastic=True, kh=1.0e8, sdf_max_resolution=16, gap=0.01)
    b.add_shape_box(-1, hx=0.5, hy=0.5, hz=0.25, xform=wp.transform((0.0, 0.0, -0.25), wp.quat_identity()), cfg=hyd)
    body = b.add_body(xform=wp.transform((0.0, 0.0, 0.095), wp.quat_identity()))
    b.add_shape_sphere(body, radius=0.1, cfg=hyd)
    body = b.add_body(xform=wp.transform((0.15, 0.0, 0.045), wp.quat_identity()))
    b.add_shape_sphere(body, radius=0.05)  # not hydroelastic: touches the box and the ball's AABB
    model = b.finalize(device="cpu")
    p = newton.CollisionPipeline(model, broad_phase="nxn", shape_pairs_max=1, publish_capacity=False)
    assert p.hydroelastic_sdf is not None
    c = p.contacts()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        p.collide(model.state(), c)
    assert c.overflow() == ContactOverflow(pairs_dropped=2, pairs_needed=3)

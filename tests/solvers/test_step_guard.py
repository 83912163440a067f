"""SolverBase's step checks (armillary.solvers.step_guard): inputs checked before the launches,
once per object and again after an attribute is reassigned; the non-finite guard; debug mode;
armillary run stopping on NaN. The per-solver fault cases live in the conformance kit."""

from __future__ import annotations

import types

import numpy as np
import pytest
import warp as wp

import armillary as newton
from armillary.solvers import NonFiniteStateError, SolverBase, SolverCapabilities
from armillary.solvers.step_guard import CLEAN


class SolverDrift(SolverBase):
    """Moves every body by ``body_qd * dt`` (Warp-free host arithmetic is enough here); counts
    the calls that reached it; a ``poison_at`` step writes NaN into body 1."""

    capabilities = SolverCapabilities(coordinates="maximal", joint_types={"FREE"})
    poison_at = None

    def __init__(self, model):
        super().__init__(model)
        self.calls = 0

    def step(self, state_in, state_out, control, contacts, dt, *, observables=None):
        self.calls += 1
        q = state_in.body_q.numpy()
        q[:, :3] += state_in.body_qd.numpy()[:, :3] * dt
        if self.poison_at is not None and self.calls >= self.poison_at:
            q[1, 2] = np.nan
        state_out.body_q.assign(q)
        state_out.body_qd.assign(state_in.body_qd)


class SolverWithContacts(SolverDrift):
    """SolverDrift taking the core collision pipeline's contacts (which it ignores)."""

    capabilities = SolverCapabilities(coordinates="maximal", joint_types={"FREE"}, collision_pipeline=True,
                                      features={"rigid_contacts"})  # fmt: skip


def _model(n=3):
    b = newton.ModelBuilder()
    for i in range(n):
        b.add_body(xform=wp.transform((float(i), 0.0, 1.0), wp.quat_identity()), mass=1.0, label=f"ball_{i}")
    return b.finalize(device="cpu")


def test_inputs_are_checked_once_per_object_and_again_after_reassignment():
    model = _model()
    solver = SolverDrift(model)
    s0, s1, ctl = model.state(), model.state(), model.control()
    solver.step(s0, s1, ctl, None, 0.01)
    calls = []
    import armillary.solvers.step_guard as sg

    original = sg.check_state_arrays
    try:
        sg.check_state_arrays = lambda *a, **k: (calls.append(a[1]), original(*a, **k))[1]
        for _ in range(5):
            solver.step(s0, s1, ctl, None, 0.01)
        assert calls == []  # checked objects are not checked again
        s0.body_qd = wp.zeros(3, dtype=wp.spatial_vector)  # a valid reassignment: checked again, accepted
        solver.step(s0, s1, ctl, None, 0.01)
        assert calls == ["state_in"]
        s0.body_qd = wp.zeros(2, dtype=wp.spatial_vector)
        before = s1.body_q.numpy().copy()
        with pytest.raises(ValueError, match=r"SolverDrift.step: state_in.body_qd has shape \(2,\).*\(3,\).*3 bodies"):
            solver.step(s0, s1, ctl, None, 0.01)
        np.testing.assert_array_equal(s1.body_q.numpy(), before)  # nothing written
    finally:
        sg.check_state_arrays = original
    assert solver.calls == 7


@pytest.mark.parametrize("dt, error", [(0.0, ValueError), (-1.0, ValueError), (float("nan"), ValueError),
                                       (float("inf"), ValueError), ("0.01", TypeError), (True, TypeError),
                                       (None, TypeError)])  # fmt: skip
def test_bad_dt_is_rejected_before_the_solver_runs(dt, error):
    model = _model()
    solver = SolverDrift(model)
    with pytest.raises(error, match="SolverDrift.step: dt must be"):
        solver.step(model.state(), model.state(), model.control(), None, dt)
    assert solver.calls == 0
    solver.step(model.state(), model.state(), None, None, np.float32(0.01))  # numpy scalars are numbers
    assert solver.calls == 1


def test_guard_flags_the_first_non_finite_body_and_check_finite_names_it():
    model = _model()
    solver = SolverDrift(model)
    solver.poison_at = 3
    s0, s1 = model.state(), model.state()
    for _ in range(2):
        solver.step(s0, s1, None, None, 0.01)
        s0, s1 = s1, s0
    assert solver.nonfinite_flags.numpy().tolist() == [CLEAN] * 7
    solver.check_finite(s0)  # clean: no error
    solver.step(s0, s1, None, None, 0.01)
    assert solver.nonfinite_flags.numpy()[0] == 1
    with pytest.raises(NonFiniteStateError, match=r"SolverDrift: non-finite state \(detected after step 3\): first body 1 \('ball_1'\)") as info:
        solver.check_finite(s1)
    assert (info.value.kind, info.value.index, info.value.step) == ("body", 1, 3)
    assert solver.nonfinite_flags.numpy().tolist() == [CLEAN] * 7  # reset by the check


def test_guard_flags_non_finite_force_inputs():
    model = _model()
    solver = SolverDrift(model)
    s0, s1 = model.state(), model.state()
    f = s0.body_f.numpy()
    f[2, 4] = np.inf
    s0.body_f.assign(f)
    solver.step(s0, s1, None, None, 0.01)
    with pytest.raises(NonFiniteStateError, match=r"non-finite input .*state_in.body_f entry 2 \('ball_2'\)"):
        solver.check_finite(s1)


def test_debug_mode_raises_at_the_step_that_produces_nan(monkeypatch):
    monkeypatch.setenv("ARMILLARY_DEBUG", "1")
    model = _model()
    solver = SolverDrift(model)
    assert solver.debug
    solver.poison_at = 2
    s0, s1 = model.state(), model.state()
    solver.step(s0, s1, None, None, 0.01)
    with pytest.raises(NonFiniteStateError, match="after step 2"):
        solver.step(s1, s0, None, None, 0.01)
    monkeypatch.setenv("ARMILLARY_DEBUG", "0")
    assert not SolverDrift(model).debug


def test_finite_guard_can_be_turned_off_per_instance():
    model = _model()
    solver = SolverDrift(model)
    solver.finite_guard = False
    solver.poison_at = 1
    s0, s1 = model.state(), model.state()
    solver.step(s0, s1, None, None, 0.01)
    solver.check_finite(s1)  # nothing recorded


def test_contacts_of_another_model_are_rejected():
    ba = newton.ModelBuilder()
    ba.add_ground_plane()
    body = ba.add_body(mass=1.0)
    ba.add_shape_sphere(body, radius=0.1)
    small = ba.finalize(device="cpu")
    bb = newton.ModelBuilder()
    bb.add_ground_plane()
    for i in range(4):
        body = bb.add_body(mass=1.0)
        bb.add_shape_sphere(body, radius=0.1)
    big = bb.finalize(device="cpu")

    solver = SolverWithContacts(small)
    foreign = big.contacts()
    big.collide(big.state(), foreign)
    with pytest.raises(ValueError, match="contacts were allocated or filled for a model with 5 shapes, this model has 2"):
        solver.step(small.state(), small.state(), None, foreign, 0.01)
    own = small.contacts()
    small.collide(small.state(), own)
    solver.step(small.state(), small.state(), None, own, 0.01)
    # collide may refill any buffer for its own model; it then belongs to that model
    small.collide(small.state(), foreign)
    solver.step(small.state(), small.state(), None, foreign, 0.01)


def test_collide_checks_its_inputs():
    b = newton.ModelBuilder()
    b.add_ground_plane()
    body = b.add_body(mass=1.0)
    b.add_shape_sphere(body, radius=0.1)
    model = b.finalize(device="cpu")
    state, contacts = model.state(), model.contacts()
    model.collide(state, contacts)
    state.body_q = state.body_q.numpy()
    with pytest.raises(ValueError, match="CollisionPipeline.collide: state.body_q is numpy.ndarray"):
        model.collide(state, contacts)
    state.body_q = wp.zeros(1, dtype=wp.transform)
    contacts.rigid_contact_normal = None
    with pytest.raises(ValueError, match="contacts.rigid_contact_normal is None"):
        model.collide(state, contacts)


def test_armillary_run_stops_with_the_frame_on_nan(registry):
    from armillary.hookspecs import hookimpl
    from armillary.runner import CliError, RunOptions, run

    class SolverPoison(SolverDrift):
        capabilities = SolverDrift.capabilities
        poison_at = 7

    def builder(world_count=1):
        b = newton.ModelBuilder()
        for i in range(3):
            b.add_body(xform=wp.transform((float(i), 0.0, 1.0), wp.quat_identity()), mass=1.0, label=f"ball_{i}")
        return b

    ns = types.SimpleNamespace(
        armillary_register_solvers=hookimpl(lambda registry: registry.add("SolverPoison", SolverPoison, summary="t")),
        armillary_register_scenes=hookimpl(lambda registry: registry.add(
            "three_balls", builder, summary="test", dt=0.01, frames=10, substeps=2)),
    )  # fmt: skip
    registry.register(ns, name="nan_test")
    with pytest.raises(CliError, match=r"non-finite in frame 4 \(by step 8, t = 0.08 s\) with SolverPoison: .*body 1 \('ball_1'\)"):
        run(RunOptions(scene="three_balls", solver="SolverPoison", out=None, progress=False))


def test_collide_and_step_do_not_recheck_a_reused_contacts_buffer():
    """Steady stepping checks each object once: collide's own bookkeeping on the buffer must not
    count as an attribute assignment."""
    import armillary.solvers.step_guard as sg

    b = newton.ModelBuilder()
    b.add_ground_plane()
    body = b.add_body(mass=1.0)
    b.add_shape_sphere(body, radius=0.1)
    model = b.finalize(device="cpu")

    solver = SolverWithContacts(model)
    s0, s1, contacts = model.state(), model.state(), model.contacts()
    model.collide(s0, contacts)
    solver.step(s0, s1, None, contacts, 0.01)
    calls = []
    original = sg.check_contacts
    try:
        sg.check_contacts = lambda *a: (calls.append(1), original(*a))[1]
        for _ in range(3):
            model.collide(s0, contacts)
            solver.step(s0, s1, None, contacts, 0.01)
    finally:
        sg.check_contacts = original
    assert calls == []

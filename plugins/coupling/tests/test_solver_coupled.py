"""SolverCoupled: ownership, entry views, substeps, independent entries match stand-alone runs."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import armillary as newton
from armillary.solvers.experimental.coupled import SolverCoupled

STEPS = 12


def _run_alone(scenes, which, factory, *, steps=STEPS, dt=None, ground=False, z=1.0, substeps=1, contacts=False):
    dt = scenes.DT if dt is None else dt
    model = scenes.one_body(which, ground=ground, z=z)
    solver = factory(model)
    s0, s1 = model.state(), model.state()
    scenes.set_initial(model, s0, [which])
    control = model.control()
    h = dt / substeps
    for _ in range(steps):
        c = model.collide(s0) if contacts else None
        for _ in range(substeps):
            s0.body_f.assign(np.array([scenes.FORCE[which]], np.float32))
            solver.step(s0, s1, control, c, h)
            s0, s1 = s1, s0
    return s0


def _run_coupled(scenes, entries, *, steps=STEPS, ground=False, z=(1.0, 1.0), contacts=False, in_place=False):
    model = scenes.two_bodies(ground=ground, z=z)
    solver = SolverCoupled(model, entries=entries(newton.solvers))
    s0, s1 = model.state(), model.state()
    scenes.set_initial(model, s0, ["a", "c"])
    control = model.control()
    for _ in range(steps):
        c = model.collide(s0) if contacts else None
        s0.body_f.assign(np.array([scenes.FORCE["a"], scenes.FORCE["c"]], np.float32))
        if in_place:
            solver.step(s0, s0, control, c, scenes.DT)
        else:
            solver.step(s0, s1, control, c, scenes.DT)
            s0, s1 = s1, s0
    return solver, s0


def _fs(v):
    return newton.solvers.SolverFeatherstone(v)


def _xpbd(v):
    return newton.solvers.SolverXPBD(v)


def _sym(v):
    return newton.solvers.SolverSymplecticEuler(v)


# ------------------------------------------------------------------ independent entries
def test_featherstone_and_xpbd_entries_move_exactly_as_alone(scenes):
    solver, out = _run_coupled(scenes, lambda S: [
        SolverCoupled.Entry(name="rigid", solver=_fs, bodies=[0]),
        SolverCoupled.Entry(name="xpbd", solver=_xpbd, bodies=["c"]),
    ])
    alone_a = _run_alone(scenes, "a", _fs)
    alone_c = _run_alone(scenes, "c", _xpbd)
    np.testing.assert_array_equal(out.body_q.numpy()[0], alone_a.body_q.numpy()[0])
    np.testing.assert_array_equal(out.body_qd.numpy()[0], alone_a.body_qd.numpy()[0])
    np.testing.assert_array_equal(out.joint_q.numpy()[:7], alone_a.joint_q.numpy())  # generalized: joint rows too
    np.testing.assert_array_equal(out.body_q.numpy()[1], alone_c.body_q.numpy()[0])
    np.testing.assert_array_equal(out.body_qd.numpy()[1], alone_c.body_qd.numpy()[0])
    # it really moved (gravity, initial velocity, force)
    assert abs(out.body_q.numpy()[0, 0] - 0.0) > 0.01 and abs(out.body_q.numpy()[1, 1]) > 0.01


def test_example_third_party_solver_and_xpbd_entries_move_exactly_as_alone(scenes):
    solver, out = _run_coupled(scenes, lambda S: [
        SolverCoupled.Entry(name="xpbd", solver=_xpbd, bodies=[0]),
        SolverCoupled.Entry(name="sym", solver=_sym, bodies=[1]),
    ])
    alone_a = _run_alone(scenes, "a", _xpbd)
    alone_c = _run_alone(scenes, "c", _sym)
    np.testing.assert_array_equal(out.body_q.numpy()[0], alone_a.body_q.numpy()[0])
    np.testing.assert_array_equal(out.body_qd.numpy()[0], alone_a.body_qd.numpy()[0])
    np.testing.assert_array_equal(out.body_q.numpy()[1], alone_c.body_q.numpy()[0])
    np.testing.assert_array_equal(out.body_qd.numpy()[1], alone_c.body_qd.numpy()[0])
    assert not isinstance(solver.solver("sym"), newton.solvers.CouplingInterface)  # plain SolverBase entry


def test_in_place_step_and_entry_order_do_not_matter(scenes):
    _, a = _run_coupled(scenes, lambda S: [
        SolverCoupled.Entry(name="rigid", solver=_fs, bodies=[0]),
        SolverCoupled.Entry(name="xpbd", solver=_xpbd, bodies=[1]),
    ])
    _, b = _run_coupled(scenes, lambda S: [
        SolverCoupled.Entry(name="xpbd", solver=_xpbd, bodies=[1]),
        SolverCoupled.Entry(name="rigid", solver=_fs, bodies=[0]),
    ], in_place=True)
    np.testing.assert_array_equal(a.body_q.numpy(), b.body_q.numpy())
    np.testing.assert_array_equal(a.body_qd.numpy(), b.body_qd.numpy())


def test_per_entry_substeps(scenes):
    solver, out = _run_coupled(scenes, lambda S: [
        SolverCoupled.Entry(name="rigid", solver=_fs, bodies=[0], substeps=3),
        SolverCoupled.Entry(name="sym", solver=_sym, bodies=[1], substeps=2),
    ])
    alone_a = _run_alone(scenes, "a", _fs, substeps=3)
    alone_c = _run_alone(scenes, "c", _sym, substeps=2)
    np.testing.assert_array_equal(out.body_q.numpy()[0], alone_a.body_q.numpy()[0])
    np.testing.assert_array_equal(out.body_q.numpy()[1], alone_c.body_q.numpy()[0])
    one_step = _run_alone(scenes, "c", _sym, substeps=1)
    assert not np.array_equal(out.body_q.numpy()[1], one_step.body_q.numpy()[0])  # substeps changed something
    assert solver.entry("rigid").substeps == 3


def test_entries_with_ground_contacts_match_alone(scenes):
    """Shared contacts are filtered per entry: each body sees the ground, nothing of the other entry."""
    kw = dict(ground=True, contacts=True, steps=40)
    _, out = _run_coupled(scenes, lambda S: [
        SolverCoupled.Entry(name="rigid", solver=_fs, bodies=[0]),
        SolverCoupled.Entry(name="xpbd", solver=_xpbd, bodies=[1]),
    ], z=(0.15, 0.15), **kw)
    alone_a = _run_alone(scenes, "a", _fs, z=0.15, **kw)
    alone_c = _run_alone(scenes, "c", _xpbd, z=0.15, **kw)
    np.testing.assert_allclose(out.body_q.numpy()[0], alone_a.body_q.numpy()[0], atol=1e-6)
    np.testing.assert_allclose(out.body_q.numpy()[1], alone_c.body_q.numpy()[0], atol=1e-6)
    assert out.body_q.numpy()[0, 2] > 0.05 and out.body_q.numpy()[1, 2] > 0.05  # resting on the ground


def test_contact_filter_keeps_only_what_the_entry_sees(scenes):
    model = scenes.two_bodies(ground=True, z=(0.05, 0.05))
    solver = SolverCoupled(model, entries=[
        SolverCoupled.Entry(name="rigid", solver=_fs, bodies=[0]),
        SolverCoupled.Entry(name="sym", solver=_sym, bodies=[1]),
    ])
    state = model.state()
    contacts = model.collide(state)
    n = int(contacts.rigid_contact_count.numpy()[0])
    shape_body = model.shape_body.numpy()
    pairs = [(int(contacts.rigid_contact_shape0.numpy()[i]), int(contacts.rigid_contact_shape1.numpy()[i]))
             for i in range(n)]
    assert {shape_body[s] for p in pairs for s in p if shape_body[s] >= 0} == {0, 1}
    rigid = solver.entry_contacts("rigid", contacts)
    m = int(rigid.rigid_contact_count.numpy()[0])
    kept = [(int(rigid.rigid_contact_shape0.numpy()[i]), int(rigid.rigid_contact_shape1.numpy()[i])) for i in range(m)]
    assert kept == [p for p in pairs if 0 in {shape_body[p[0]], shape_body[p[1]]}]
    np.testing.assert_array_equal(rigid.rigid_contact_normal.numpy()[:m],
                                  contacts.rigid_contact_normal.numpy()[[pairs.index(p) for p in kept]])
    assert solver.entry_contacts("sym", contacts) is None  # it does not take pipeline contacts


def test_joint_rows_are_reconciled_from_the_generalized_owner_only(scenes):
    model = scenes.two_bodies()
    solver = SolverCoupled(model, entries=[
        SolverCoupled.Entry(name="rigid", solver=_fs, bodies=[0]),
        SolverCoupled.Entry(name="xpbd", solver=_xpbd, bodies=[1]),
    ])
    e = solver.entry("rigid")
    assert e.joints.tolist() == [0] and e.joint_q_rows.numpy().tolist() == list(range(7))
    s0, s1 = model.state(), model.state()
    scenes.set_initial(model, s0, ["a", "c"])
    solver.step(s0, s1, None, None, scenes.DT)
    # XPBD (maximal) does not integrate joint_q: its joint rows keep the input
    np.testing.assert_array_equal(s1.joint_q.numpy()[7:], s0.joint_q.numpy()[7:])
    assert not np.array_equal(s1.joint_q.numpy()[:7], s0.joint_q.numpy()[:7])


def test_particles_owned_by_xpbd_and_hidden_from_featherstone(scenes):
    model = scenes.two_bodies(with_particles=True)
    solver = SolverCoupled(model, entries=[
        SolverCoupled.Entry(name="rigid", solver=_fs, bodies=[0, 1]),
        SolverCoupled.Entry(name="cloth", solver=_xpbd, particles=[0, 1]),
    ])
    assert solver.view("rigid").particle_count == 0 and model.particle_count == 2
    assert solver.view("cloth").joint_count == 0  # owns no joint: joints hidden
    s0, s1 = model.state(), model.state()
    for _ in range(5):
        solver.step(s0, s1, None, None, scenes.DT)
        s0, s1 = s1, s0
    t = 5 * scenes.DT
    # XPBD free fall of a particle: semi-implicit Euler
    expected_z = 1.0 - 9.81 * scenes.DT**2 * (5 * 6 / 2)
    np.testing.assert_allclose(s0.particle_q.numpy()[:, 2], expected_z, rtol=1e-4)
    np.testing.assert_allclose(s0.particle_q.numpy()[1, 0], 2.5 + 0.1 * t, rtol=1e-5)
    assert s0.body_q.numpy()[0, 2] < 1.0


def test_unowned_bodies_keep_their_input_state_with_a_warning(scenes):
    model = scenes.two_bodies()
    with pytest.warns(UserWarning, match="belong to no entry"):
        solver = SolverCoupled(model, entries=[SolverCoupled.Entry(name="rigid", solver=_fs, bodies=[0])])
    s0, s1 = model.state(), model.state()
    solver.step(s0, s1, None, None, scenes.DT)
    np.testing.assert_array_equal(s1.body_q.numpy()[1], s0.body_q.numpy()[1])
    assert s1.body_q.numpy()[0, 2] < 1.0


# ------------------------------------------------------------------ errors
@pytest.mark.parametrize(
    ("entries", "message"),
    [
        (lambda: [SolverCoupled.Entry("a", _fs, bodies=[0]), SolverCoupled.Entry("b", _xpbd, bodies=[0, 1])],
         r"body 0 \('a'\) is owned by entry 'a' and by entry 'b'"),
        (lambda: [SolverCoupled.Entry("a", _fs, bodies=[0, 5])], r"entry 'a' lists body 5, but the model has 2"),
        (lambda: [SolverCoupled.Entry("a", _fs, bodies=["nope"])], r"lists body 'nope', but no body"),
        (lambda: [SolverCoupled.Entry("a", _fs, particles=[0])], r"lists particle 0, but the model has 0"),
        (lambda: [SolverCoupled.Entry("a", _fs, shapes=[9])], r"lists shape 9"),
        (lambda: [SolverCoupled.Entry("a", _fs, bodies=[0]), SolverCoupled.Entry("b", _xpbd, bodies=[1], joints=[0])],
         r"joint 0 .* is owned by entry 'b', but its child body 0 is owned by entry 'a'"),
        (lambda: [SolverCoupled.Entry("a", _fs, bodies=[0]), SolverCoupled.Entry("a", _xpbd, bodies=[1])],
         r"duplicate entry name 'a'"),
        (lambda: [SolverCoupled.Entry("a", _fs, bodies=[0], substeps=0)], r"substeps must be an integer >= 1"),
        (lambda: [], r"at least one entry"),
        (lambda: [SolverCoupled.Entry("a", lambda v: newton.solvers.SolverFeatherstone(v.parent), bodies=[0, 1])],
         r"must build the solver on the ModelView"),
    ],
)
def test_ownership_and_configuration_errors(scenes, entries, message):
    model = scenes.two_bodies()
    with pytest.raises(ValueError, match=message):
        SolverCoupled(model, entries=entries())


def test_factory_must_return_a_solver(scenes):
    with pytest.raises(TypeError, match="not a SolverBase"):
        SolverCoupled(scenes.two_bodies(), entries=[SolverCoupled.Entry("a", lambda v: object(), bodies=[0, 1])])
    with pytest.raises(KeyError, match="no entry named 'zz'"):
        SolverCoupled(scenes.two_bodies(), entries=[SolverCoupled.Entry("a", _fs, bodies=[0, 1])]).view("zz")


def test_entry_solver_rejecting_its_view_names_the_problem(scenes):
    """The example solver supports FREE joints only: the check runs on the entry's view."""
    b = newton.ModelBuilder()
    p = b.add_link(mass=1.0)
    j = b.add_joint_revolute(-1, p, axis=(0, 1, 0))
    b.add_articulation([j])
    b.add_body(mass=1.0)
    model = b.finalize()
    with pytest.raises(ValueError, match="SolverSymplecticEuler does not support joint type REVOLUTE"):
        SolverCoupled(model, entries=[SolverCoupled.Entry("fs", _fs, bodies=[0]),
                                      SolverCoupled.Entry("sym", _sym, bodies=[1])])
    # with the joints hidden from its view (configure_view), it works
    solver = SolverCoupled(model, entries=[SolverCoupled.Entry("fs", _fs, bodies=[0]),
                                           SolverCoupled.Entry("sym", _sym, bodies=[1], joints=(),
                                                               configure_view=lambda v: v.hide_joints())])
    s0, s1 = model.state(), model.state()
    solver.step(s0, s1, None, None, 0.01)
    assert s1.body_q.numpy()[1, 2] < s0.body_q.numpy()[1, 2]


# ------------------------------------------------------------------ views, notifications, reset
def test_views_deactivate_non_owned_entities_without_touching_the_model(scenes):
    model = scenes.two_bodies(with_particles=True)
    before = {n: getattr(model, n).numpy().copy() for n in ("body_flags", "body_inv_mass", "particle_flags",
                                                           "particle_mass", "shape_flags", "joint_enabled")}
    with pytest.warns(UserWarning, match=r"1 particle\(s\) belong to no entry"):
        solver = SolverCoupled(model, entries=[
            SolverCoupled.Entry(name="rigid", solver=_fs, bodies=[0]),
            SolverCoupled.Entry(name="xpbd", solver=_xpbd, bodies=[1], particles=[1]),
        ])
    for n, v in before.items():
        np.testing.assert_array_equal(getattr(model, n).numpy(), v)
    rv, xv = solver.view("rigid"), solver.view("xpbd")
    assert rv.body_flags.numpy().tolist() == [int(newton.BodyFlags.DYNAMIC), int(newton.BodyFlags.KINEMATIC)]
    assert rv.body_inv_mass.numpy().tolist() == [model.body_inv_mass.numpy()[0], 0.0]
    assert xv.particle_mass.numpy().tolist() == [0.0, 0.5]
    assert (xv.particle_flags.numpy()[0] & int(newton.ParticleFlags.ACTIVE)) == 0
    # collision visibility: the box is hidden from the rigid entry
    assert rv.shape_contact_pair_count == 0 and model.shape_contact_pair_count == 1
    assert solver.solver("xpbd").body_mask.numpy().tolist() == [0, 1]
    assert solver.solver("xpbd").particle_mask.numpy().tolist() == [0, 1]


class _Recorder(newton.solvers.SolverBase, newton.solvers.CouplingInterface):
    """A maximal solver that integrates nothing and records the coupling notifications."""

    capabilities = newton.solvers.SolverCapabilities(coordinates="maximal", joint_types={newton.JointType.FREE},
                                                     features={"rigid_bodies"})  # fmt: skip

    def __init__(self, model):
        super().__init__(model)
        self.calls = []

    def step(self, state_in, state_out, control, contacts, dt):
        self.calls.append(("step", dt))

    def coupling_notify_iteration_restarts(self, enabled):
        self.calls.append(("restarts", enabled))

    def coupling_notify_input_state_update(self, state, flags, *, iteration_restart=False, dt=0.0):
        self.calls.append(("input", int(flags), iteration_restart, dt))

    def notify_model_changed(self, flags):
        super().notify_model_changed(flags)
        self.calls.append(("model", int(flags)))


def test_hooks_and_notifications_reach_entry_solvers(scenes):
    model = scenes.two_bodies()
    solver = SolverCoupled(model, entries=[SolverCoupled.Entry("rec", _Recorder, bodies=[0, 1], substeps=2)])
    rec = solver.solver("rec")
    assert rec.calls == [("restarts", False)]
    s0, s1 = model.state(), model.state()
    solver.step(s0, s1, None, None, 0.02)
    flags = int(newton.StateFlags.BODY | newton.StateFlags.BODY_F | newton.StateFlags.JOINT)
    assert rec.calls[1:] == [("input", flags, False, 0.02), ("step", 0.01), ("step", 0.01)]
    custom = int(newton.ModelFlags.ALL) + 1 << 20
    solver.notify_model_changed(custom | int(newton.ModelFlags.BODY_INERTIAL_PROPERTIES))
    assert rec.calls[-1] == ("model", custom | int(newton.ModelFlags.BODY_INERTIAL_PROPERTIES))
    solver.reset(s0)
    assert rec.calls[-1] == ("input", int(newton.StateFlags.ALL), True, 0.0)


def test_model_change_refreshes_view_overrides(scenes):
    model = scenes.two_bodies()
    solver = SolverCoupled(model, entries=[
        SolverCoupled.Entry(name="rigid", solver=_fs, bodies=[0]),
        SolverCoupled.Entry(name="xpbd", solver=_xpbd, bodies=[1]),
    ])
    view = solver.view("xpbd")
    arr = view.body_inv_mass
    model_inv_before = model.body_inv_mass.numpy().copy()
    model.body_mass.assign(np.array([3.0, 4.0], np.float32))
    model.body_inv_mass.assign(np.array([1 / 3.0, 0.25], np.float32))
    assert view.body_inv_mass.numpy()[1] == model_inv_before[1]  # not yet notified
    solver.notify_model_changed(newton.ModelFlags.BODY_INERTIAL_PROPERTIES)
    assert view.body_inv_mass is arr  # refreshed in place
    assert view.body_inv_mass.numpy().tolist() == [0.0, 0.25]
    assert view.body_mass.numpy().tolist() == [3.0, 4.0]


def test_reset_restores_initial_state_of_all_entries(scenes):
    model = scenes.two_bodies()
    solver = SolverCoupled(model, entries=[
        SolverCoupled.Entry(name="rigid", solver=_fs, bodies=[0]),
        SolverCoupled.Entry(name="sym", solver=_sym, bodies=[1]),
    ])
    s0, s1 = model.state(), model.state()
    for _ in range(3):
        solver.step(s0, s1, None, None, scenes.DT)
        s0, s1 = s1, s0
    assert not np.array_equal(s0.body_q.numpy(), model.body_q.numpy())
    solver.reset(s0)
    np.testing.assert_array_equal(s0.body_q.numpy(), model.body_q.numpy())
    np.testing.assert_array_equal(s0.joint_q.numpy(), model.joint_q.numpy())
    assert not solver.entry_output_state_valid()


def test_effective_mass_and_gravity_fallbacks(scenes):
    model = scenes.two_bodies(with_particles=True)
    model.set_gravity((0.0, 0.0, -5.0))
    solver = SolverCoupled(model, entries=[
        SolverCoupled.Entry(name="rigid", solver=_fs, bodies=[0, 1]),
        SolverCoupled.Entry(name="sym", solver=_sym, particles=[0, 1]),
    ])
    np.testing.assert_allclose(solver.eval_effective_mass("rigid", 0, [0, 1]), model.body_mass.numpy(), rtol=1e-6)
    np.testing.assert_allclose(solver.eval_effective_mass("sym", 1, [0, 1]), [0.5, 0.5])
    m, inertia = solver.eval_effective_mass_block("rigid", [1])
    np.testing.assert_allclose(inertia[0], model.body_inertia.numpy()[1], rtol=1e-6)
    gb, gp = solver.entry_gravity_acceleration("sym")
    np.testing.assert_allclose(gb.numpy(), 0.0)  # the bodies are kinematic in this view
    np.testing.assert_allclose(gp.numpy(), [[0, 0, -5.0]] * 2)
    gb, gp = solver.entry_gravity_acceleration("rigid")
    np.testing.assert_allclose(gb.numpy(), [[0, 0, -5.0]] * 2)
    assert gp.shape[0] == 0  # particles hidden from the rigid entry


def test_control_inputs_are_copied_to_generalized_entries(scenes):
    model = scenes.two_bodies()
    solver = SolverCoupled(model, entries=[
        SolverCoupled.Entry(name="rigid", solver=_fs, bodies=[0]),
        SolverCoupled.Entry(name="xpbd", solver=_xpbd, bodies=[1]),
    ])
    control = model.control()
    jf = np.zeros(12, np.float32)
    jf[0] = 3.0  # x force on body a's FREE joint
    control.joint_f.assign(jf)
    s0, s1 = model.state(), model.state()
    solver.step(s0, s1, control, None, scenes.DT)
    assert s1.body_qd.numpy()[0, 0] == pytest.approx(3.0 / model.body_mass.numpy()[0] * scenes.DT, rel=1e-4)
    assert control.joint_f.numpy()[0] == 3.0


def test_replayed_copies_follow_replaced_state_arrays(scenes):
    """State distribution and reconciliation replay recorded launches per (state, array) set: a
    state whose arrays are replaced by new ones gets a new record (no stale array is written)."""
    model = scenes.two_bodies()
    solver = SolverCoupled(model, entries=[
        SolverCoupled.Entry(name="rigid", solver=lambda v: newton.solvers.SolverFeatherstone(v), bodies=[0]),
        SolverCoupled.Entry(name="xpbd", solver=lambda v: newton.solvers.SolverXPBD(v), bodies=[1]),
    ])  # fmt: skip
    s0, s1 = model.state(), model.state()
    for _ in range(2):
        solver.step(s0, s1, None, None, scenes.DT)
    e = solver.entry("xpbd")
    old_f = s0.body_f
    s0.body_f = wp.array(np.array([[0.0] * 6, [0.0, 0.0, 7.0, 0.0, 0.0, 0.0]], np.float32), dtype=wp.spatial_vector)
    solver.step(s0, s1, None, None, scenes.DT)
    np.testing.assert_allclose(e.state_0.body_f.numpy()[1], [0.0, 0.0, 7.0, 0.0, 0.0, 0.0])
    assert not np.any(old_f.numpy())
    old_q = s1.body_q
    s1.body_q = wp.zeros_like(old_q)
    solver.step(s0, s1, None, None, scenes.DT)
    np.testing.assert_allclose(s1.body_q.numpy(), e.state_out.body_q.numpy()[[0, 1]] * [[0], [1]]
                               + solver.entry("rigid").state_out.body_q.numpy()[[0, 1]] * [[1], [0]])  # fmt: skip

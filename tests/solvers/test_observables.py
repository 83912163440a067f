"""Solver observables: SolverBase.ObservableKind / Observables / observables() / validate_observables /
step(..., observables=), as the reference engine 1.8 defines them, and the standard-kind filling of
armillary.solvers.observables (body_qdd, contact_f, body_parent_f).

Messages and behaviours marked "reference" were observed from the reference engine 1.8 run as a
black box (its SolverXPBD / SolverBase).
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pytest
import warp as wp

import armillary as newton
from armillary import JointType
from armillary.solvers import Coordinates, SolverBase, SolverCapabilities
from armillary.solvers.observables import begin_step

AF = newton.Model.AttributeFrequency


class SolverPrescribed(SolverBase):
    """Moves nothing by itself: ``body_qd_out = body_qd_in + dt * accel`` (set by the test),
    poses copied; reports ``contact_force`` (set by the test) as the force of shape 0 on shape 1."""

    capabilities = SolverCapabilities(
        coordinates=Coordinates.MAXIMAL,
        joint_types={JointType.FREE, JointType.REVOLUTE},
        features={"rigid_bodies", "rigid_contacts"},
    )
    SUPPORTED_OBSERVABLES = frozenset({"body_qdd", "body_parent_f", "contact_f"})

    def __init__(self, model):
        super().__init__(model)
        self.accel = np.zeros((model.body_count, 6), np.float32)
        self.contact_force = None
        self.contact_point = "surface"

    def step(self, state_in, state_out, control, contacts, dt, *, observables=None):
        observed = begin_step(self, observables, state_in, state_out, contacts)
        qd = state_in.body_qd.numpy() + dt * self.accel
        if state_out is not state_in:
            wp.copy(state_out.body_q, state_in.body_q)
        state_out.body_qd.assign(qd)
        if observed is not None:
            observed.finish(state_out, dt, contact_force=self.contact_force, contact_point=self.contact_point)


def _free_model(n=1, mass=2.0):
    b = newton.ModelBuilder()
    for i in range(n):
        b.add_body(xform=wp.transform((float(i), 0.0, 1.0), wp.quat_identity()), mass=mass,
                   inertia=wp.mat33(0.1, 0.0, 0.0, 0.0, 0.2, 0.0, 0.0, 0.0, 0.3))  # fmt: skip
    return b.finalize(device="cpu")


def _contacts(rigid=4, soft=2):
    return newton.Contacts(rigid, soft, device="cpu")


# ---------------------------------------------------------------------------------- kinds
def test_standard_kinds_and_names_reached_from_every_solver():
    K = SolverBase.ObservableKind
    assert (K.BODY_QDD, K.BODY_PARENT_F, K.CONTACT_F) == ("body_qdd", "body_parent_f", "contact_f")
    assert SolverPrescribed.ObservableKind is K and SolverPrescribed.Observables is SolverBase.Observables
    assert repr(SolverBase.Observables()) == "SolverBase.Observables()"  # reference repr
    assert SolverBase.SUPPORTED_OBSERVABLES == frozenset()
    with pytest.raises(TypeError):
        iter(K)  # a namespace, not iterable (reference)


def test_kind_subclasses_are_checked_when_defined():
    K = SolverBase.ObservableKind

    class Mine(K):
        BODY_TEMPERATURE = "body_temperature"
        BODY_QDD = "body_qdd"  # redeclared with the same value: allowed
        _private = 3  # underscore names are not checked

    assert Mine.BODY_TEMPERATURE == "body_temperature" and Mine.CONTACT_F == "contact_f"
    # messages as the reference engine's
    with pytest.raises(ValueError, match=r"Conflicting observable kind BODY_QDD in .*Bad: 'body_qdd' and 'other'\."):
        type("Bad", (K,), {"BODY_QDD": "other"})
    with pytest.raises(ValueError, match=r"Duplicate observable kind 'body_qdd' for BODY_QDD and FOO in .*Bad\."):
        type("Bad", (K,), {"FOO": "body_qdd"})
    with pytest.raises(TypeError, match=r"Bad\.FOO must be a nonempty string; got 3\."):
        type("Bad", (K,), {"FOO": 3})
    with pytest.raises(TypeError, match=r"must be a nonempty string; got ''"):
        type("Bad", (K,), {"FOO": ""})
    with pytest.raises(TypeError, match="meth must be a nonempty string"):
        type("Bad", (K,), {"meth": lambda self: None})
    A = type("A", (K,), {"FOO": "foo"})
    B = type("B", (K,), {"FOO": "bar"})
    with pytest.raises(ValueError, match=r"Conflicting observable kind FOO in C: 'bar' and 'foo'\."):
        type("C", (A, B), {})
    B2 = type("B2", (K,), {"BAR": "foo"})
    with pytest.raises(ValueError, match=r"Duplicate observable kind 'foo' for BAR and FOO in C\."):
        type("C", (A, B2), {})
    assert type("C", (A, type("A2", (K,), {"FOO": "foo"})), {}).FOO == "foo"


def test_field_declarations():
    f = SolverBase.Observables.field(dtype=wp.float32, frequency=AF.BODY)
    assert f.default is None and f.init is False and f.repr is False
    spec = f.metadata["solver_observable"]
    assert (spec.kind, spec.dtype, spec.frequency) == (None, wp.float32, AF.BODY)
    with pytest.raises(TypeError, match="Solver observable kinds must be nonempty strings."):
        SolverBase.Observables.field(dtype=wp.float32, frequency=AF.BODY, kind="")
    with pytest.raises(TypeError, match="Invalid observable frequency for None: 3."):
        SolverBase.Observables.field(dtype=wp.float32, frequency=3)
    with pytest.raises(TypeError):
        SolverBase.Observables.field(wp.float32, AF.BODY)  # keyword-only
    names = [x.name for x in dataclasses.fields(SolverBase.Observables) if "solver_observable" in x.metadata]
    assert names == ["body_qdd", "body_parent_f", "contact_f"]
    assert SolverBase.Observables.__dataclass_params__.eq is False


# ----------------------------------------------------------------------------- allocation
def test_allocation_sizes_and_requests():
    model = _free_model(3)
    solver = SolverPrescribed(model)
    contacts = _contacts(5, 2)
    K = solver.ObservableKind
    obs = solver.observables([K.BODY_QDD, "contact_f"], contacts=contacts)  # constants and strings mix
    assert obs.kinds == frozenset({"body_qdd", "contact_f"}) and obs.model is model
    assert obs.body_qdd.shape == (3,) and obs.body_qdd.dtype == wp.spatial_vector
    assert obs.contact_f.shape == (7,)  # rigid + soft capacity
    assert obs.body_parent_f is None
    assert obs.contacts is contacts and obs.contacts_for_kind("contact_f") is contacts
    assert obs.contacts_for_kind("body_qdd") is None and obs.contacts_for_kind("body_parent_f") is None
    assert obs.is_requested("body_qdd") and not obs.is_requested("body_parent_f")
    assert obs.get_attribute_frequency("contact_f") == AF.CONTACT
    assert not obs.body_qdd.requires_grad
    assert solver.observables({"body_qdd"}, requires_grad=True).body_qdd.requires_grad
    # identity equality: two containers never compare equal, both hashable
    other = solver.observables({"body_qdd"})
    assert other != solver.observables({"body_qdd"}) and len({other, obs}) == 2
    empty = solver.observables(set())
    assert empty.kinds == frozenset() and empty.body_qdd is None
    assert solver.observables(k for k in ["body_qdd"]).body_qdd is not None  # any iterable


def test_bad_requests_are_rejected():
    model = _free_model()
    solver = SolverPrescribed(model)
    # messages as the reference engine's
    message = r"Pass observable kinds as a collection of strings, for example \{'body_qdd'\}\."
    with pytest.raises(TypeError, match=message):
        solver.observables("body_qdd")
    with pytest.raises(TypeError, match=r"Solver observable kinds must be nonempty strings; got: 1\."):
        solver.observables({1})
    with pytest.raises(TypeError, match="got: ''"):
        solver.observables({""})
    with pytest.raises(ValueError, match=r"SolverPrescribed does not support solver observable\(s\): 'foo'\."):
        solver.observables({"foo", "body_qdd"})
    with pytest.raises(ValueError, match="Pass Contacts to solver.observables"):
        solver.observables({"contact_f"})
    with pytest.raises(TypeError, match="Contact-indexed observables require a Contacts instance."):
        solver.observables({"contact_f"}, contacts=5)
    solver.observables({"body_qdd"}, contacts=5)  # contacts ignored without contact-indexed kinds

    class NoQdd(SolverPrescribed):
        SUPPORTED_OBSERVABLES = frozenset({"body_parent_f"})

    with pytest.raises(ValueError, match=r"NoQdd does not support solver observable\(s\): 'body_qdd'"):
        NoQdd(model).observables({"body_qdd"})


def test_custom_kinds_fields_and_frequencies():
    model = _free_model(2)

    class Kind(SolverBase.ObservableKind):
        TEMP = "body_temp"
        DOFS = "dofs"

    @dataclasses.dataclass(eq=False)
    class Obs(SolverBase.Observables):
        body_temp: wp.array | None = SolverBase.Observables.field(dtype=wp.float32, frequency=AF.BODY)
        dof_arr: wp.array | None = SolverBase.Observables.field(dtype=wp.vec3, frequency=AF.JOINT_DOF, kind="dofs")
        per_world: wp.array | None = SolverBase.Observables.field(dtype=wp.int32, frequency=AF.WORLD)
        once: wp.array | None = SolverBase.Observables.field(dtype=wp.int32, frequency=AF.ONCE)
        rigid: wp.array | None = SolverBase.Observables.field(dtype=wp.int32, frequency=AF.CONTACT_RIGID)
        soft: wp.array | None = SolverBase.Observables.field(dtype=wp.int32, frequency=AF.CONTACT_SOFT)

    class Custom(SolverPrescribed):
        ObservableKind = Kind
        Observables = Obs
        SUPPORTED_OBSERVABLES = SolverPrescribed.SUPPORTED_OBSERVABLES | {
            "body_temp", "dofs", "per_world", "once", "rigid", "soft"}

    solver = Custom(model)
    contacts = _contacts(5, 2)
    obs = solver.observables(solver.supported_observables, contacts=contacts)
    assert type(obs) is Obs and repr(obs).endswith("Obs()")
    shapes = {n: getattr(obs, n).shape for n in ("body_temp", "dof_arr", "per_world", "once", "rigid", "soft")}
    assert shapes == {"body_temp": (2,), "dof_arr": (12,), "per_world": (1,), "once": (1,), "rigid": (5,), "soft": (2,)}
    assert obs.is_requested("dofs") and not obs.is_requested("dof_arr")  # kinds, not field names
    assert obs.contacts_for_kind("rigid") is contacts and obs.contacts_for_kind("dofs") is None
    with pytest.raises(KeyError, match="No observable declared for kind 'dof_arr'"):
        obs.contacts_for_kind("dof_arr")
    with pytest.raises(KeyError, match="No observable frequency declared for 'dofs'"):
        obs.get_attribute_frequency("dofs")  # by field name
    assert obs.get_attribute_frequency("dof_arr") == AF.JOINT_DOF
    sub = obs.select({"dofs", "body_qdd"})
    assert type(sub) is Obs and sub.dof_arr is obs.dof_arr and sub.body_temp is None and sub.body_qdd is obs.body_qdd
    solver.step(model.state(), model.state(), None, contacts, 0.01, observables=obs)

    @dataclasses.dataclass
    class EqObs(SolverBase.Observables):
        pass

    @dataclasses.dataclass(eq=False)
    class DupObs(SolverBase.Observables):
        a: wp.array | None = SolverBase.Observables.field(dtype=wp.float32, frequency=AF.BODY, kind="dup")
        b: wp.array | None = SolverBase.Observables.field(dtype=wp.float32, frequency=AF.BODY, kind="dup")

    @dataclasses.dataclass(eq=False)
    class UnknownFrequency(SolverBase.Observables):
        x: wp.array | None = SolverBase.Observables.field(dtype=wp.float32, frequency="mine:rows")

    cases = [
        (EqObs, frozenset(), set(), TypeError, "must use @dataclass\\(eq=False\\) for identity equality"),
        (DupObs, frozenset({"dup", "body_qdd"}), {"body_qdd"}, ValueError,
         "Duplicate observable kind 'dup' for 'a' and 'b'"),
        (SolverBase.Observables, frozenset({"nofield"}), {"nofield"}, ValueError,
         "No observable field declared for 'nofield'"),
        (int, frozenset({"body_qdd"}), {"body_qdd"}, TypeError, "Observables must derive from SolverBase.Observables"),
        (UnknownFrequency, frozenset({"x"}), {"x"}, KeyError, "mine:rows"),
    ]
    for container, supported, request, error, message in cases:
        cls = type("S", (SolverPrescribed,), {"Observables": container, "SUPPORTED_OBSERVABLES": supported})
        with pytest.raises(error, match=message):
            cls(model).observables(request)


def test_select_narrows_and_shares_arrays():
    model = _free_model()
    solver = SolverPrescribed(model)
    contacts = _contacts()
    obs = solver.observables({"body_qdd", "body_parent_f", "contact_f"}, contacts=contacts)
    sub = obs.select({"body_qdd"})
    assert sub.kinds == frozenset({"body_qdd"}) and sub.body_qdd is obs.body_qdd and sub.contact_f is None
    assert obs.contact_f is not None  # the source is not modified
    with pytest.raises(ValueError, match=r"not requested by this container: frozenset\(\{'contact_f'\}\)"):
        sub.select({"contact_f"})
    with pytest.raises(TypeError, match="collection of strings"):
        obs.select("body_qdd")
    with pytest.raises(ValueError, match="must be allocated by a solver before selecting"):
        SolverBase.Observables().select(set())
    assert obs.select(set()).kinds == frozenset()
    # stepping a selection leaves the omitted arrays alone
    obs.body_parent_f.fill_(7.0)
    state = model.state()
    solver.accel[:] = [0.0, 0.0, -9.81, 0.0, 0.0, 0.0]
    solver.step(state, model.state(), None, None, 0.01, observables=sub)
    assert np.all(obs.body_parent_f.numpy() == 7.0)
    np.testing.assert_allclose(obs.body_qdd.numpy()[0, :3], [0.0, 0.0, -9.81], atol=1e-5)


def test_step_validates_the_container():
    model = _free_model()
    solver = SolverPrescribed(model)
    state_0, state_1 = model.state(), model.state()
    foreign = SolverPrescribed(model).observables({"body_qdd"})
    # messages as the reference engine's
    with pytest.raises(ValueError, match="must be passed to the solver instance that allocated them"):
        solver.step(state_0, state_1, None, None, 0.01, observables=foreign)
    with pytest.raises(ValueError, match="must be passed to the solver instance that allocated them"):
        solver.step(state_0, state_1, None, None, 0.01, observables=SolverBase.Observables())
    with pytest.raises(TypeError, match="'observables' must be an instance of Observables."):
        solver.step(state_0, state_1, None, None, 0.01, observables=5)
    with pytest.raises(TypeError):
        solver.step(state_0, state_1, None, None, 0.01, solver.observables(set()))  # keyword only
    contacts = _contacts(4, 0)
    obs = solver.observables({"contact_f"}, contacts=contacts)
    with pytest.raises(ValueError, match="Pass the step's Contacts when using contact-indexed solver observables."):
        solver.step(state_0, state_1, None, None, 0.01, observables=obs)
    with pytest.raises(ValueError, match=r"Contacts capacities \(rigid=10, soft=0\) need 10 rows for observable "
                                         r"'contact_f', which has 4; allocate observables with the largest Contacts"):
        solver.step(state_0, state_1, None, _contacts(10, 0), 0.01, observables=obs)
    smaller = _contacts(2, 0)
    solver.step(state_0, state_1, None, smaller, 0.01, observables=obs)
    assert obs.contacts_for_kind("contact_f") is smaller  # the layout the rows were produced with
    solver.validate_observables(None)
    with pytest.raises(TypeError, match="Contact-indexed observables require a Contacts instance."):
        solver.validate_observables(obs, 7)


def test_step_signature_is_keyword_only_everywhere():
    import inspect

    p = inspect.signature(SolverBase.step).parameters["observables"]
    assert p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is None


# ------------------------------------------------------------------------ deprecated forms
def test_a_solvers_update_contacts_is_deprecated_at_the_callers_line():
    class Legacy(SolverPrescribed):
        calls = 0

        def update_contacts(self, contacts, state=None):
            Legacy.calls += 1

    class Derived(Legacy):
        def update_contacts(self, contacts, state=None):
            super().update_contacts(contacts, state)

    solver = Derived(_free_model())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        solver.update_contacts(None)
    assert Legacy.calls == 1
    assert len(caught) == 1  # the nested super() call does not warn again
    w = caught[0]
    assert issubclass(w.category, newton.NewtonDeprecationWarning) and w.filename == __file__
    assert "Derived.update_contacts() is deprecated" in str(w.message) and "CONTACT_F" in str(w.message)
    with pytest.raises(NotImplementedError):  # the base's own (no forces) does not warn, it raises
        SolverPrescribed(_free_model()).update_contacts(None)


# ------------------------------------------------------------------------ standard filling
def test_body_qdd_is_the_steps_mean_acceleration_also_in_place():
    model = _free_model(2)
    solver = SolverPrescribed(model)
    obs = solver.observables({"body_qdd"})
    state = model.state()
    state.body_qd.assign(np.array([[1.0, 2.0, 3.0, 0.1, 0.2, 0.3]] * 2, np.float32))
    solver.accel[:] = [[0.0, 0.0, -9.81, 0.0, 0.0, 0.0], [1.0, -2.0, 3.0, 0.5, -0.5, 0.25]]
    solver.step(state, state, None, None, 0.01, observables=obs)  # in place: the input is snapshotted
    np.testing.assert_allclose(obs.body_qdd.numpy(), solver.accel, atol=2e-4)


def test_contact_f_is_the_force_on_body_0_about_its_com():
    b = newton.ModelBuilder()
    body0 = b.add_body(xform=wp.transform((1.0, 0.0, 0.5), wp.quat_identity()), mass=1.0, com=(0.0, 0.0, 0.1))
    s0 = b.add_shape_sphere(body0, radius=0.1, cfg=newton.ModelBuilder.ShapeConfig(density=0.0))
    body1 = b.add_body(xform=wp.transform((1.0, 0.0, 0.8), wp.quat_identity()), mass=1.0)
    s1 = b.add_shape_sphere(body1, radius=0.1, cfg=newton.ModelBuilder.ShapeConfig(density=0.0))
    s_ground = b.add_ground_plane()
    model = b.finalize(device="cpu")
    solver = SolverPrescribed(model)
    contacts = _contacts(4, 2)
    # contact 0: body0 (shape 0) below body1 (shape 1); contact 1: ground (static shape 0) under body0
    contacts.rigid_contact_count.assign([2])
    contacts.rigid_contact_shape0.assign([s0, s_ground, -1, -1])
    contacts.rigid_contact_shape1.assign([s1, s0, -1, -1])
    contacts.rigid_contact_point0.assign(np.array([[0, 0, 0.1], [1.0, 0.2, 0], [0, 0, 0], [0, 0, 0]], np.float32))
    contacts.rigid_contact_point1.assign(np.array([[0, 0, -0.1], [0, 0, -0.1], [0, 0, 0], [0, 0, 0]], np.float32))
    contacts.rigid_contact_normal.assign(np.array([[0.0, 0.0, 1.0]] * 4, np.float32))
    # forces of shape 0 on shape 1 (the solver's convention before conversion)
    solver.contact_force = wp.array(np.array([[0.5, 0.0, 3.0], [0.0, 1.0, 20.0], [9, 9, 9], [9, 9, 9]], np.float32),
                                    dtype=wp.vec3, device="cpu")  # fmt: skip
    obs = solver.observables({"contact_f"}, contacts=contacts)
    obs.contact_f.fill_(float("nan"))
    solver.step(model.state(), model.state(), None, contacts, 0.01, observables=obs)
    f = obs.contact_f.numpy().astype(np.float64)
    # row 0: force on body0 by body1 = -(0.5, 0, 3) at body0's point (1, 0, 0.6), COM at (1, 0, 0.6)
    np.testing.assert_allclose(f[0], [-0.5, 0.0, -3.0, 0.0, 0.0, 0.0], atol=1e-6)
    # row 1: force on the ground by body0 = -(0, 1, 20) at (1, 0.2, 0) about the world origin
    F = np.array([0.0, -1.0, -20.0])
    np.testing.assert_allclose(f[1], np.concatenate([F, np.cross([1.0, 0.2, 0.0], F)]), atol=1e-5)
    assert not np.any(f[2:])  # inactive and soft rows are zero
    solver.contact_point = "midpoint"  # the torque uses the midpoint of the two surface points
    solver.step(model.state(), model.state(), None, contacts, 0.01, observables=obs)
    np.testing.assert_allclose(obs.contact_f.numpy()[1, 3:], np.cross([1.0, 0.1, 0.2], F), atol=1e-5)


def test_body_parent_f_of_a_chain_at_rest_by_newton_euler():
    """Two links hanging from a revolute pivot, at rest: the lower joint carries the lower link's
    weight, the upper one both weights and the moment of the lower link's offset COM."""
    b = newton.ModelBuilder()
    m1, m2 = 2.0, 3.0
    l1 = b.add_link(xform=wp.transform((0.0, 0.0, 1.5), wp.quat_identity()), mass=m1,
                    inertia=wp.mat33(0.1, 0.0, 0.0, 0.0, 0.1, 0.0, 0.0, 0.0, 0.1))  # fmt: skip
    l2 = b.add_link(xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()), mass=m2, com=(0.2, 0.0, 0.0),
                    inertia=wp.mat33(0.1, 0.0, 0.0, 0.0, 0.1, 0.0, 0.0, 0.0, 0.1))  # fmt: skip
    j1 = b.add_joint_revolute(-1, l1, parent_xform=wp.transform((0.0, 0.0, 2.0), wp.quat_identity()),
                              child_xform=wp.transform((0.0, 0.0, 0.5), wp.quat_identity()), axis=(0, 1, 0))  # fmt: skip
    j2 = b.add_joint_revolute(l1, l2, parent_xform=wp.transform((0.0, 0.0, -0.5), wp.quat_identity()),
                              child_xform=wp.transform((0.0, 0.0, 0.0), wp.quat_identity()), axis=(0, 1, 0))  # fmt: skip
    b.add_articulation([j2, j1])  # order of joints does not matter
    model = b.finalize(device="cpu")
    solver = SolverPrescribed(model)
    obs = solver.observables({"body_parent_f"})
    state = model.state()
    state.body_f.assign(np.array([[0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]], np.float32))
    solver.step(state, model.state(), None, None, 0.01, observables=obs)
    g = 9.81
    f = obs.body_parent_f.numpy().astype(np.float64)
    # lower link: holds m2 g against gravity and cancels the applied 1 N along x
    np.testing.assert_allclose(f[1], [-1.0, 0.0, m2 * g, 0.0, 0.0, 0.0], atol=1e-4)
    # upper link: its weight plus the lower joint's reaction moved from (0.2, 0, 1) to its COM (0, 0, 1.5)
    F2 = np.array([-1.0, 0.0, m2 * g])
    tau = np.cross(np.array([0.2, 0.0, 1.0]) - [0.0, 0.0, 1.5], F2)
    np.testing.assert_allclose(f[0], np.concatenate([F2 + [0.0, 0.0, m1 * g], tau]), rtol=1e-5, atol=1e-4)


def test_body_parent_f_subtracts_contact_wrenches_and_is_zero_for_free_fall():
    model = _free_model(1, mass=2.0)
    solver = SolverPrescribed(model)
    obs = solver.observables({"body_parent_f", "body_qdd"})
    solver.accel[:] = [0.0, 0.0, -9.81, 0.0, 0.0, 0.0]
    solver.step(model.state(), model.state(), None, None, 0.01, observables=obs)
    np.testing.assert_allclose(obs.body_parent_f.numpy(), 0.0, atol=1e-4)  # a FREE joint transmits nothing


def test_containers_are_sources_of_articulation_views():
    from armillary.selection import ArticulationView

    b = newton.ModelBuilder()
    link = b.add_link(xform=wp.transform((0.0, 0.0, 0.5), wp.quat_identity()), mass=2.0)
    j = b.add_joint_revolute(-1, link, parent_xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()),
                             child_xform=wp.transform((0.0, 0.0, 0.5), wp.quat_identity()), axis=(0, 1, 0))  # fmt: skip
    b.add_articulation([j], label="pendulum")
    model = b.finalize(device="cpu")
    solver = SolverPrescribed(model)
    obs = solver.observables({"body_parent_f", "body_qdd"})
    solver.step(model.state(), model.state(), None, None, 0.01, observables=obs)
    view = ArticulationView(model, "pendulum")
    f = view.get_attribute("body_parent_f", obs).numpy().reshape(-1, 6)
    np.testing.assert_allclose(f, [[0.0, 0.0, 2.0 * 9.81, 0.0, 0.0, 0.0]], atol=1e-4)
    assert view.get_attribute("body_qdd", obs).numpy().shape[-1] == 6

"""ModelView: delegation, copy-on-write overrides, refresh, hiding, solvers built on views."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import armillary as newton
from armillary.solvers.coupling import coupling_hook
from armillary_coupling import ModelView

INERTIAL = ("body_mass", "body_inv_mass", "body_inertia", "body_inv_inertia")


def _snapshot(model):
    out = {}
    for name, value in vars(model).items():
        if isinstance(value, wp.array):
            out[name] = value.numpy().copy()
    return out


def _assert_untouched(model, snap):
    for name, value in snap.items():
        np.testing.assert_array_equal(getattr(model, name).numpy(), value, err_msg=name)


def test_reads_delegate_and_the_view_is_a_model(scenes):
    model = scenes.two_bodies(with_particles=True)
    view = ModelView(model, "v")
    assert isinstance(view, newton.Model)
    assert view.name == "v" and view.parent is model and view.overrides == {}
    assert view.body_count == 2 and view.body_q is model.body_q and view.device == model.device
    assert view.shape_contact_pair_count == model.shape_contact_pair_count
    assert "body_q" in dir(view)


def test_reference_docstring_example(scenes):
    """The reference ModelView docstring example, with ``import armillary as newton``."""
    model = scenes.two_bodies()
    zeroed_inv_mass = wp.zeros_like(model.body_inv_mass)
    view = ModelView(model, "vbd")
    view.body_inv_mass = zeroed_inv_mass  # override
    assert view.body_count == 2  # delegates to model.body_count
    solver = newton.solvers.SolverXPBD(model=view)
    assert solver.model is view and view.body_inv_mass is zeroed_inv_mass
    assert "body_inv_mass" in view.overrides and model.body_inv_mass is not zeroed_inv_mass


def test_every_mutator_is_copy_on_write(scenes):
    model = scenes.two_bodies(with_particles=True)
    snap = _snapshot(model)
    view = ModelView(model, "v")
    view.disable_body_dynamics([1])
    view.make_bodies_kinematic([1])
    view.mark_proxy_bodies([0])
    view.scale_body_mass([0], 2.0)
    view.mark_proxy_particles([0])
    view.disable_particles([1])
    view.scale_particle_mass(None, 3.0)
    view.disable_joints([0])
    view.disable_shape_collisions([1])
    _assert_untouched(model, snap)
    m0, i0 = snap["body_mass"][0], snap["body_inertia"][0]
    assert view.body_inv_mass.numpy()[1] == 0.0 and np.all(view.body_inv_inertia.numpy()[1] == 0.0)
    assert view.body_mass.numpy()[1] == snap["body_mass"][1]  # forward mass kept as metadata
    assert view.body_flags.numpy().tolist() == [int(newton.BodyFlags.DYNAMIC | newton.BodyFlags.PROXY),
                                                int(newton.BodyFlags.KINEMATIC)]
    np.testing.assert_allclose(view.body_mass.numpy()[0], 2 * m0, rtol=1e-6)
    np.testing.assert_allclose(view.body_inertia.numpy()[0], 2 * i0, rtol=1e-6)
    np.testing.assert_allclose(view.body_inv_mass.numpy()[0], 0.5 / m0, rtol=1e-6)
    assert view.particle_flags.numpy().tolist() == [int(newton.ParticleFlags.ACTIVE | newton.ParticleFlags.PROXY), 0]
    np.testing.assert_allclose(view.particle_mass.numpy(), [1.5, 1.5])
    np.testing.assert_allclose(view.particle_inv_mass.numpy(), [1 / 1.5, 1 / 1.5], rtol=1e-6)
    assert view.joint_enabled.numpy().tolist() == [False, True]
    assert view.shape_contact_pair_count == 0 and model.shape_contact_pair_count == 1
    assert sorted(view.overrides) == sorted(set(INERTIAL) | {"body_flags", "particle_flags", "particle_mass",
                                                            "particle_inv_mass", "joint_enabled", "shape_flags"})


def test_mass_setters(scenes):
    model = scenes.two_bodies(with_particles=True)
    snap = _snapshot(model)
    view = ModelView(model, "v")
    m0, i0 = snap["body_mass"], snap["body_inertia"]
    view.set_body_mass([1], [m0[1] * 4])
    np.testing.assert_allclose(view.body_inertia.numpy()[1], 4 * i0[1], rtol=1e-6)
    np.testing.assert_allclose(view.body_inv_inertia.numpy()[1], np.linalg.inv(4 * i0[1]), rtol=1e-5)
    view.set_body_inertial_properties([0], [3.0], [np.eye(3) * 0.5])
    assert view.body_mass.numpy()[0] == 3.0 and view.body_inv_mass.numpy()[0] == pytest.approx(1 / 3)
    np.testing.assert_allclose(view.body_inv_inertia.numpy()[0], np.eye(3) * 2.0)
    view.add_body_lumped_inertia([1.0, 0.0], [0.5, 0.0])
    assert view.body_mass.numpy()[0] == 4.0
    np.testing.assert_allclose(view.body_inertia.numpy()[0], np.eye(3) * 1.0)
    view.set_particle_mass([1], [2.0])
    view.add_particle_lumped_mass([0.5, 0.5])
    np.testing.assert_allclose(view.particle_mass.numpy(), [1.0, 2.5])
    view.zero_particle_mass([0])
    assert view.particle_inv_mass.numpy()[0] == 0.0
    view.scale_body_mass_mask([1, 0], 0.5)
    assert view.body_mass.numpy()[0] == 2.0
    _assert_untouched(model, snap)
    with pytest.raises(ValueError, match="mass scale factor must be finite and > 0"):
        view.scale_body_mass([0], 0.0)
    with pytest.raises(ValueError, match=r"body index 7 out of range \[0, 2\)"):
        view.disable_body_dynamics([7])
    view.set_body_inertial_properties([1], [0.0], [np.zeros((3, 3))])
    with pytest.raises(ValueError, match="use set_body_inertial_properties"):
        view.set_body_mass([1], [1.0])


def test_direct_assignment_pins_the_override(scenes):
    model = scenes.two_bodies()
    view = ModelView(model, "v")
    view.body_inv_mass = wp.zeros(2, dtype=float)
    with pytest.raises(ValueError, match="assigned directly"):
        view.scale_body_mass([0], 2.0)
    view.reset_override("body_inv_mass")
    assert view.body_inv_mass is model.body_inv_mass
    with pytest.raises(AttributeError):
        del view.body_flags  # not overridden: a view cannot delete the parent's attribute
    view.make_bodies_kinematic([0])
    del view.body_flags
    assert view.body_flags is model.body_flags


def test_refresh_rederives_notified_groups_in_place(scenes):
    model = scenes.two_bodies()
    view = ModelView(model, "v")
    view.scale_body_mass([0], 2.0)
    view.make_bodies_kinematic([1])
    inv_mass, flags = view.body_inv_mass, view.body_flags
    model.body_mass.assign(np.array([10.0, 20.0], np.float32))
    model.body_inv_mass.assign(np.array([0.1, 0.05], np.float32))
    model.body_flags.assign(np.array([int(newton.BodyFlags.DYNAMIC)] * 2, np.int32))
    assert view.refresh(newton.ModelFlags.SHAPE_PROPERTIES) == []
    assert view.body_mass.numpy()[0] != 20.0
    refreshed = view.refresh(newton.ModelFlags.BODY_INERTIAL_PROPERTIES)
    assert sorted(refreshed) == sorted(INERTIAL)
    assert view.body_inv_mass is inv_mass  # in place
    np.testing.assert_allclose(view.body_mass.numpy(), [20.0, 20.0])
    np.testing.assert_allclose(view.body_inv_mass.numpy(), [0.05, 0.05])
    view.refresh(newton.ModelFlags.BODY_PROPERTIES)
    assert view.body_flags is flags
    assert view.body_flags.numpy().tolist() == [int(newton.BodyFlags.DYNAMIC), int(newton.BodyFlags.KINEMATIC)]


def test_hide_particles_and_joints(scenes):
    model = scenes.two_bodies(with_particles=True)
    snap = _snapshot(model)
    view = ModelView(model, "rigid")
    view.hide_particles()
    assert view.particle_count == 0 and view.particle_q.shape == (0,) and view.spring_count == 0
    assert view.hidden == frozenset({"particles"})
    state = view.state()
    assert state.particle_q is None and state.body_q.shape == (2,)
    solver = newton.solvers.SolverFeatherstone(view)  # would reject the particles of the model
    with pytest.raises(ValueError, match="does not support particles"):
        newton.solvers.SolverFeatherstone(model)
    s1 = view.state()
    solver.step(state, s1, None, None, 0.01)
    jview = ModelView(model, "particles")
    jview.hide_joints()
    assert jview.joint_count == jview.joint_dof_count == jview.articulation_count == 0
    assert jview.joint_q_start.numpy().tolist() == [0] and jview.joint_q.shape == (0,)
    assert jview.control().joint_f.shape == (0,)
    _assert_untouched(model, snap)


def _run(model_or_view, factory, scenes, steps=8, contacts=False):
    solver = factory(model_or_view)
    s0, s1 = model_or_view.state(), model_or_view.state()
    scenes.set_initial(model_or_view, s0, ["a", "c"])
    for _ in range(steps):
        s0.body_f.assign(np.array([scenes.FORCE["a"], scenes.FORCE["c"]], np.float32))
        c = model_or_view.collide(s0) if contacts else None
        solver.step(s0, s1, model_or_view.control(), c, scenes.DT)
        s0, s1 = s1, s0
    return s0


@pytest.mark.parametrize("name", ["SolverFeatherstone", "SolverXPBD", "SolverSymplecticEuler"])
def test_solvers_on_a_view_match_the_model(scenes, name):
    factory = getattr(newton.solvers, name)
    model = scenes.two_bodies(ground=True, z=(0.2, 0.3))
    ref = _run(model, factory, scenes, contacts=True)
    view = ModelView(scenes.two_bodies(ground=True, z=(0.2, 0.3)), name)
    got = _run(view, factory, scenes, contacts=True)
    np.testing.assert_array_equal(got.body_q.numpy(), ref.body_q.numpy())
    np.testing.assert_array_equal(got.body_qd.numpy(), ref.body_qd.numpy())


def test_view_collision_follows_its_shape_visibility(scenes):
    model = scenes.two_bodies(ground=True, z=(0.05, 0.05))
    view = ModelView(model, "v")
    view.disable_shape_collisions([1])  # the box
    contacts = view.collide(view.state())
    n = int(contacts.rigid_contact_count.numpy()[0])
    shapes = set(contacts.rigid_contact_shape0.numpy()[:n]) | set(contacts.rigid_contact_shape1.numpy()[:n])
    assert n > 0 and 1 not in shapes
    full = model.collide(model.state())
    m = int(full.rigid_contact_count.numpy()[0])
    assert 1 in set(full.rigid_contact_shape0.numpy()[:m]) | set(full.rigid_contact_shape1.numpy()[:m])


def test_default_proxy_contact_preparation_drops_proxy_static_rows(scenes):
    model = scenes.two_bodies(ground=True, z=(0.05, 0.05))
    view = ModelView(model, "destination")
    view.mark_proxy_bodies([0])
    solver = newton.solvers.SolverXPBD(view)
    contacts = model.collide(model.state())
    n = int(contacts.rigid_contact_count.numpy()[0])
    shape_body = model.shape_body.numpy()
    rows = [i for i in range(n) if 0 not in (shape_body[contacts.rigid_contact_shape0.numpy()[i]],
                                              shape_body[contacts.rigid_contact_shape1.numpy()[i]])]  # fmt: skip
    assert 0 < len(rows) < n
    out = coupling_hook(solver, "coupling_prepare_proxy_contacts")(model.state(), contacts,
                                                                   contacts_freshly_detected=True)
    assert out is not contacts and int(out.rigid_contact_count.numpy()[0]) == len(rows)
    np.testing.assert_array_equal(out.rigid_contact_shape0.numpy()[:len(rows)],
                                  contacts.rigid_contact_shape0.numpy()[rows])
    np.testing.assert_array_equal(out.rigid_contact_point1.numpy()[:len(rows)],
                                  contacts.rigid_contact_point1.numpy()[rows])
    assert int(contacts.rigid_contact_count.numpy()[0]) == n  # the input is untouched


def test_custom_state_attributes_come_with_view_states():
    b = newton.ModelBuilder()
    b.add_custom_attribute(newton.ModelBuilder.CustomAttribute(
        name="temperature", frequency=newton.Model.AttributeFrequency.BODY, dtype=wp.float32, default=20.0,
        assignment=newton.Model.AttributeAssignment.STATE))
    b.add_body(mass=1.0)
    model = b.finalize()
    state = ModelView(model, "v").state()
    assert state.temperature.numpy().tolist() == [20.0]

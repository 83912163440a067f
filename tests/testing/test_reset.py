"""armillary.sim.reset.reset_state: world masks, flags, validation, no host synchronisation."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

from armillary import ModelBuilder, StateFlags
from armillary.sim.reset import WorldMaskError, reset_state


def _model(worlds=3):
    template = ModelBuilder()
    body = template.add_body(xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()), mass=1.0)
    template.add_shape_sphere(body, radius=0.1)
    template.add_particle((0.0, 0.5, 1.0), (0.0, 0.0, 0.0), 1.0, 0.05)
    b = ModelBuilder()
    b.replicate(template, worlds)
    b.add_particle((5.0, 0.0, 1.0), (0.0, 0.0, 0.0), 1.0, 0.05)  # a global particle (world -1)
    b.add_ground_plane()
    return b.finalize(device="cpu")


def _scramble(state):
    for name, value in (
        ("body_q", 7.0),
        ("body_qd", 3.0),
        ("body_f", 2.0),
        ("particle_q", 9.0),
        ("particle_qd", 4.0),
        ("particle_f", 5.0),
        ("joint_q", 6.0),
        ("joint_qd", 8.0),
    ):
        arr = getattr(state, name)
        arr.assign(np.full(arr.numpy().shape, value, dtype=np.float32))


def _mask(values):
    return wp.array(values, dtype=wp.bool, device="cpu")


def test_reset_all():
    model = _model()
    state = model.state()
    _scramble(state)
    reset_state(model, state)
    for name in ("body_q", "body_qd", "particle_q", "particle_qd", "joint_q", "joint_qd"):
        np.testing.assert_array_equal(getattr(state, name).numpy(), getattr(model, name).numpy(), err_msg=name)
    assert not state.body_f.numpy().any() and not state.particle_f.numpy().any()


def test_world_mask_resets_selected_worlds_and_globals():
    model = _model()
    state = model.state()
    _scramble(state)
    reset_state(model, state, world_mask=_mask([False, True, False]))
    bw = model.body_world.numpy()
    pw = model.particle_world.numpy()
    assert set(pw.tolist()) == {-1, 0, 1, 2}
    bq = state.body_q.numpy()
    np.testing.assert_array_equal(bq[bw == 1], model.body_q.numpy()[bw == 1])
    assert (bq[bw != 1] == 7.0).all()
    pq = state.particle_q.numpy()
    sel = (pw == 1) | (pw == -1)  # globals follow "any world selected"
    np.testing.assert_array_equal(pq[sel], model.particle_q.numpy()[sel])
    assert (pq[~sel] == 9.0).all()
    assert (state.body_f.numpy()[bw == 1] == 0).all() and (state.body_f.numpy()[bw != 1] == 2.0).all()
    # joint coordinates of world 1 only
    jq = state.joint_q.numpy()
    starts = model.joint_q_start.numpy()
    for j, w in enumerate(model.joint_world.numpy()):
        seg = jq[starts[j] : starts[j + 1]]
        ref = model.joint_q.numpy()[starts[j] : starts[j + 1]]
        if w == 1:
            np.testing.assert_array_equal(seg, ref)
        else:
            assert (seg == 6.0).all()


def test_empty_mask_resets_nothing_including_globals():
    model = _model()
    state = model.state()
    _scramble(state)
    reset_state(model, state, world_mask=_mask([False, False, False]))
    assert (state.particle_q.numpy() == 9.0).all() and (state.body_q.numpy() == 7.0).all()


def test_mask_with_explicit_global_entry():
    model = _model()
    state = model.state()
    _scramble(state)
    reset_state(model, state, world_mask=_mask([False, False, False, True]))  # globals only
    pw = model.particle_world.numpy()
    pq = state.particle_q.numpy()
    np.testing.assert_array_equal(pq[pw == -1], model.particle_q.numpy()[pw == -1])
    assert (pq[pw != -1] == 9.0).all() and (state.body_q.numpy() == 7.0).all()


def test_flags_select_arrays():
    model = _model()
    state = model.state()
    _scramble(state)
    reset_state(model, state, flags=StateFlags.BODY_Q | StateFlags.PARTICLE_F)
    np.testing.assert_array_equal(state.body_q.numpy(), model.body_q.numpy())
    assert (state.body_qd.numpy() == 3.0).all() and (state.body_f.numpy() == 2.0).all()
    assert (state.particle_q.numpy() == 9.0).all() and not state.particle_f.numpy().any()
    assert (state.joint_q.numpy() == 6.0).all()


@pytest.mark.parametrize(
    "mask",
    [
        wp.array([True, True], dtype=wp.bool, device="cpu"),
        wp.array([1, 1, 1], dtype=wp.int32, device="cpu"),
        wp.array(np.ones((3, 1), bool), dtype=wp.bool, device="cpu"),
        [True, True, True],
    ],
    ids=["length", "dtype", "ndim", "list"],
)
def test_malformed_masks_are_rejected(mask):
    model = _model()
    with pytest.raises(ValueError) as info:
        reset_state(model, model.state(), world_mask=mask)
    assert isinstance(info.value, WorldMaskError) and "world_mask" in str(info.value)


def test_no_host_synchronisation_with_a_mask(monkeypatch):
    """With the mask given as a device array, reset_state never reads an array back (graph-capturable)."""
    model = _model()
    state = model.state()
    mask = _mask([True, False, True])

    def forbidden(*args, **kwargs):
        raise AssertionError("reset_state read a device array back to the host")

    launches = []
    real_launch = wp.launch
    monkeypatch.setattr(wp.array, "numpy", forbidden)
    monkeypatch.setattr(wp, "launch", lambda *a, **k: (launches.append(a[0]), real_launch(*a, **k)))
    reset_state(model, state, world_mask=mask)
    assert len(launches) == 1


def test_solver_base_reset_uses_reset_state():
    from armillary.solvers import Coordinates, SolverBase, SolverCapabilities
    from armillary.sim.enums import JointType

    class Nop(SolverBase):
        capabilities = SolverCapabilities(
            coordinates=Coordinates.MAXIMAL,
            joint_types={JointType.FREE},
            features={"rigid_bodies", "particles", "multiple_worlds", "reset_world_mask"},
        )

        def step(self, state_in, state_out, control, contacts, dt):
            pass

    model = _model()
    state = model.state()
    _scramble(state)
    Nop(model).reset(state, world_mask=_mask([True, False, False]))
    bw = model.body_world.numpy()
    np.testing.assert_array_equal(state.body_q.numpy()[bw == 0], model.body_q.numpy()[bw == 0])
    assert (state.body_q.numpy()[bw != 0] == 7.0).all()

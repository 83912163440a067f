"""finalize(): shape, inertia and joint-ordering validation, each skippable."""

import warnings

import numpy as np
import pytest
import warp as wp

import armillary as newton


def _body_with_inertia(inertia):
    b = newton.ModelBuilder()
    b.add_body(mass=1.0, inertia=inertia, label="link")
    return b


def test_valid_inertia_is_kept_exactly():
    inertia = wp.mat33(0.1, 0.01, 0.0, 0.01, 0.2, 0.0, 0.0, 0.0, 0.25)
    b = _body_with_inertia(inertia)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = b.finalize(device="cpu")
    assert np.allclose(model.body_inertia.numpy()[0], np.array(inertia, dtype=np.float32).reshape(3, 3))


def test_triangle_inequality_violation_is_corrected_with_a_warning_naming_the_body():
    b = _body_with_inertia(wp.mat33(0.1, 0.0, 0.0, 0.0, 0.1, 0.0, 0.0, 0.0, 1.0))
    with pytest.warns(UserWarning, match=r"body 0 \('link'\): inertia violates the triangle inequality"):
        model = b.finalize(device="cpu")
    e = np.linalg.eigvalsh(model.body_inertia.numpy()[0])
    assert e[0] + e[1] >= e[2] - 1e-6 and e.min() >= 0.0
    # the builder keeps what the user wrote; skipping keeps it in the model too
    assert np.allclose(np.array(b.body_inertia[0]).reshape(3, 3)[2, 2], 1.0)
    model = b.finalize(device="cpu", skip_validation_inertia=True)
    assert np.isclose(model.body_inertia.numpy()[0][2, 2], 1.0)


def test_indefinite_inertia_is_rejected_at_add_time_and_corrected_when_edited_in():
    with pytest.raises(ValueError, match="positive semi-definite"):
        _body_with_inertia(wp.mat33(0.1, 0.0, 0.0, 0.0, -0.1, 0.0, 0.0, 0.0, 0.1))
    b = _body_with_inertia(None)
    b.body_inertia[0] = wp.mat33(0.1, 0.0, 0.0, 0.0, -0.1, 0.0, 0.0, 0.0, 0.1)
    with pytest.warns(UserWarning, match="not positive semi-definite"):
        model = b.finalize(device="cpu")
    assert np.linalg.eigvalsh(model.body_inertia.numpy()[0]).min() >= 0.0


def test_mass_edited_to_nan_is_an_error():
    b = _body_with_inertia(None)
    b.body_mass[0] = float("nan")
    with pytest.raises(ValueError, match=r"Body 0 \('link'\) has mass nan"):
        b.finalize(device="cpu")


@pytest.mark.parametrize(
    "field,value,fragment",
    [
        ("shape_scale", (0.1, -1.0, 0.1), "invalid scale"),
        ("shape_margin", -0.01, "invalid margin"),
        ("shape_material_mu", float("nan"), "invalid material mu"),
    ],
)
def test_shape_lists_edited_into_invalid_values_are_rejected(field, value, fragment):
    b = newton.ModelBuilder()
    body = b.add_body(mass=1.0)
    b.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1, label="crate")
    getattr(b, field)[0] = value
    with pytest.raises(ValueError, match=fragment) as info:
        b.finalize(device="cpu")
    assert "shape 0 ('crate')" in str(info.value)
    b.finalize(device="cpu", skip_validation_shapes=True, skip_validation_structure=True)


def test_is_static_shapes_add_no_mass():
    b = newton.ModelBuilder()
    body = b.add_link(mass=2.0)
    b.add_shape(body=body, type=newton.GeoType.BOX, scale=(0.1, 0.1, 0.1), is_static=True)
    assert b.body_mass[body] == 2.0
    b.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1)
    assert b.body_mass[body] > 2.0


def test_joint_ordering_validation_is_opt_in():
    b = newton.ModelBuilder()
    a, c = b.add_link(mass=1.0, label="a"), b.add_link(mass=1.0, label="c")
    j1 = b.add_joint_revolute(a, c, label="child_first")  # created before the joint that creates its parent
    j0 = b.add_joint_revolute(-1, a, label="root")
    b.add_articulation([j1, j0])
    b.finalize(device="cpu")  # skipped by default, as in the reference API
    with pytest.raises(ValueError, match=r"joint 0 \('child_first'\) of articulation 0 comes before joint 1"):
        b.finalize(device="cpu", skip_validation_joint_ordering=False)

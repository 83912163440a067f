"""Every documented validation error of custom attributes / frequencies."""

import numpy as np
import pytest
import warp as wp

import armillary as newton

Model = newton.Model
ModelBuilder = newton.ModelBuilder
CA, CF = ModelBuilder.CustomAttribute, ModelBuilder.CustomFrequency
AF, AA = Model.AttributeFrequency, Model.AttributeAssignment


def test_enum_values_follow_reference():
    assert [(m.name, int(m)) for m in AA] == [("MODEL", 0), ("STATE", 1), ("CONTROL", 2), ("CONTACT", 3)]
    assert int(AF.ONCE) == 0 and int(AF.BODY) == 5 and int(AF.PARTICLE) == 9 and int(AF.WORLD) == 15


def test_undeclared_attribute_raises_attribute_error():
    b = ModelBuilder()
    with pytest.raises(AttributeError, match="'zzz' is not defined"):
        b.add_body(custom_attributes={"zzz": 1.0})
    with pytest.raises(AttributeError, match="'qq' is not defined"):
        b.add_custom_values(qq=1.0)


def test_wrong_frequency_raises_value_error():
    b = ModelBuilder()
    b.add_custom_attribute(CA(name="sh", frequency=AF.SHAPE, dtype=wp.float32))
    with pytest.raises(ValueError, match="'sh'.*SHAPE"):
        b.add_body(custom_attributes={"sh": 1.0})


def test_same_key_different_spec_raises():
    b = ModelBuilder()
    b.add_custom_attribute(CA(name="t", frequency=AF.BODY, dtype=wp.float32, default=20.0))
    b.add_custom_attribute(CA(name="t", frequency=AF.BODY, dtype=wp.float32, default=20.0))  # idempotent
    for bad in (
        CA(name="t", frequency=AF.BODY, dtype=wp.int32),
        CA(name="t", frequency=AF.SHAPE, dtype=wp.float32),
        CA(name="t", frequency=AF.BODY, dtype=wp.float32, assignment=AA.STATE),  # model.t vs state.t
        CA(name="t", frequency=AF.BODY, dtype=wp.float32, references="body"),
    ):
        with pytest.raises(ValueError, match="'t' already exists with incompatible spec"):
            b.add_custom_attribute(bad)


def test_same_name_in_different_namespaces_coexist():
    b = ModelBuilder()
    b.add_custom_attribute(CA(name="float_attr", frequency=AF.BODY, dtype=wp.float32, default=1.0))
    b.add_custom_attribute(
        CA(name="float_attr", frequency=AF.BODY, dtype=wp.float32, default=2.0, namespace="namespace_a")
    )
    b.add_custom_attribute(
        CA(name="float_attr", frequency=AF.BODY, dtype=wp.float32, namespace="namespace_b", assignment=AA.STATE)
    )
    with pytest.raises(ValueError, match="incompatible"):
        b.add_custom_attribute(
            CA(name="float_attr", frequency=AF.BODY, dtype=wp.float32, namespace="namespace_a", assignment=AA.STATE)
        )
    b.add_body(mass=1.0)
    m = b.finalize(device="cpu")
    assert m.float_attr.numpy()[0] == 1.0
    assert m.namespace_a.float_attr.numpy()[0] == 2.0
    assert m.state().namespace_b.float_attr.numpy().shape == (1,)


def test_unregistered_custom_frequency_raises():
    b = ModelBuilder()
    with pytest.raises(ValueError, match="'mujoco:pair' .*not registered"):
        b.add_custom_attribute(CA(name="pair_geom1", frequency="mujoco:pair", dtype=wp.int32, namespace="mujoco"))


def test_contact_frequencies_rejected():
    b = ModelBuilder()
    for f in (AF.CONTACT, AF.CONTACT_RIGID, AF.CONTACT_SOFT):
        with pytest.raises(ValueError, match="Observables"):
            b.add_custom_attribute(CA(name="c", frequency=f, dtype=wp.float32))


def test_usd_wildcard_requires_transformer():
    b = ModelBuilder()
    with pytest.raises(ValueError, match="'distance'.*usd_value_transformer"):
        b.add_custom_attribute(CA(name="distance", frequency=AF.BODY, dtype=wp.float32, usd_attribute_name="*"))
    b.add_custom_attribute(
        CA(name="distance", frequency=AF.BODY, dtype=wp.float32, usd_attribute_name="*", usd_value_transformer=lambda v, c: 1.0)
    )


def test_add_custom_values_rejects_enum_frequency():
    b = ModelBuilder()
    b.add_custom_attribute(CA(name="t", frequency=AF.BODY, dtype=wp.float32))
    with pytest.raises(TypeError, match="'t'.*add_custom_values"):
        b.add_custom_values(t=1.0)


def test_joint_dof_list_and_dict_errors():
    b = ModelBuilder()
    b.add_custom_attribute(CA(name="jd", frequency=AF.JOINT_DOF, dtype=wp.float32))
    b.add_custom_attribute(CA(name="jc", frequency=AF.JOINT_COORD, dtype=wp.float32))
    body = b.add_link()
    with pytest.raises(ValueError, match="'jd' has 2 values but joint has 1 DOFs"):
        b.add_joint_revolute(-1, body, axis=(0, 0, 1), custom_attributes={"jd": [1.0, 2.0]})
    body2 = b.add_link()
    with pytest.raises(ValueError, match="'jd' has invalid DOF index 3"):
        b.add_joint_revolute(-1, body2, axis=(0, 0, 1), custom_attributes={"jd": {3: 1.0}})


def test_scalar_broadcasts_to_every_dof_of_a_joint():
    b = ModelBuilder()
    b.add_custom_attribute(CA(name="jd", frequency=AF.JOINT_DOF, dtype=wp.float32))
    b.add_custom_attribute(CA(name="jc", frequency=AF.JOINT_COORD, dtype=wp.float32))
    body = b.add_link()
    j = b.add_joint_ball(-1, body, custom_attributes={"jd": 2.0, "jc": {3: 9.0}})
    b.add_articulation([j])
    m = b.finalize(device="cpu")
    np.testing.assert_allclose(m.jd.numpy(), [2.0, 2.0, 2.0])
    np.testing.assert_allclose(m.jc.numpy(), [0.0, 0.0, 0.0, 9.0])


def test_bad_value_names_attribute():
    b = ModelBuilder()
    b.add_custom_attribute(CA(name="v", frequency=AF.BODY, dtype=wp.vec3))
    with pytest.raises(ValueError, match="'v'"):
        b.add_body(custom_attributes={"v": "hello"})
    b.add_custom_attribute(CA(name="s", frequency=AF.BODY, dtype=str))
    with pytest.raises(ValueError, match="'s'"):
        b.add_body(custom_attributes={"s": 3})


def test_declaration_errors():
    with pytest.raises(ValueError, match="references and reference_value_transformer"):
        CA(name="r", frequency=AF.BODY, dtype=wp.int32, references="body", reference_value_transformer=lambda v, c: v)
    with pytest.raises(ValueError, match="non-empty"):
        CF(name="")
    with pytest.raises(ValueError, match="colon-free"):
        CF(name="a:b")
    with pytest.raises(ValueError, match="'b:a_label'"):
        CF(name="a", namespace="b", label_attribute="zz")
    with pytest.raises(ValueError, match="'a_articulation'"):
        CF(name="a", articulation_owner_attribute="x")
    with pytest.raises(TypeError):
        ModelBuilder().add_custom_frequency("n:g")


def test_frequency_registration_is_idempotent():
    b = ModelBuilder()
    b.add_custom_frequency(CF(name="f", namespace="n"))
    b.add_custom_frequency(CF(name="f", namespace="n"))
    with pytest.raises(ValueError, match="'n:f'"):
        b.add_custom_frequency(CF(name="f", namespace="n", label_attribute="n:f_label"))
    assert b.get_custom_frequency_keys() == {"n:f"}


def test_defaults_derived_from_dtype():
    assert CA(name="a", frequency=AF.BODY, dtype=wp.float32).default == 0.0
    assert list(CA(name="a", frequency=AF.BODY, dtype=wp.quat).default) == [0.0, 0.0, 0.0, 1.0]
    assert CA(name="a", frequency=AF.BODY, dtype=wp.bool).default is False
    assert CA(name="a", frequency=AF.BODY, dtype=str).default == ""
    assert CA(name="a", frequency=AF.BODY, dtype=wp.float32).values == {}
    assert CA(name="a", frequency="x", dtype=wp.float32).values == []


def test_mismatched_custom_frequency_counts():
    """Attributes of one frequency with different counts are an error (issue 20); an attribute
    short of the frequency's row count with no sibling to disagree is still padded with a warning."""
    b = ModelBuilder()
    b.add_custom_frequency(CF(name="it"))
    b.add_custom_attribute(CA(name="a", frequency="it", dtype=wp.float32, default=7.0))
    b.add_custom_values(a=1.0)
    b.add_custom_values(a=2.0)
    b.custom_attributes["a"].values.pop()  # simulate a synchronization bug
    with pytest.warns(UserWarning, match="'a' has 1 values but frequency 'it' expects 2"):
        m = b.finalize(device="cpu")
    np.testing.assert_allclose(m.a.numpy(), [1.0, 7.0])
    b.add_custom_attribute(CA(name="c", frequency="it", dtype=wp.float32))
    assert len(b.custom_attributes["c"].values) == 2  # late declarations are padded to the row count
    with pytest.raises(ValueError, match="'a' has 1 values but 'c' has 2"):
        b.finalize(device="cpu")


def test_name_clash_with_builtin_model_attribute():
    b = ModelBuilder()
    b.add_custom_attribute(CA(name="body_q", frequency=AF.BODY, dtype=wp.float32))
    b.add_body()
    with pytest.raises(AttributeError, match="body_q"):
        b.finalize(device="cpu")


def test_queries():
    b = ModelBuilder()
    b.add_custom_frequency(CF(name="f", namespace="n"))
    b.add_custom_attribute(CA(name="x", frequency=AF.BODY, dtype=wp.float32))
    b.add_custom_attribute(CA(name="y", frequency="n:f", dtype=wp.float32, namespace="n"))
    assert b.has_custom_attribute("x") and b.has_custom_attribute("n:y") and not b.has_custom_attribute("y")
    assert [a.key for a in b.get_custom_attributes_by_frequency([AF.BODY, "n:f"])] == ["x", "n:y"]
    b.add_custom_values(**{"n:y": 1.0})
    assert b.get_custom_frequency_count("n:f") == 1
    with pytest.raises(KeyError):
        b.get_custom_frequency_count("n:g")


def test_rejected_custom_attributes_leave_the_builder_unchanged():
    """A bad custom attribute value never leaves a half-added entity behind."""
    import numpy as np

    import armillary as newton

    b = newton.ModelBuilder()
    b.add_custom_attribute(newton.ModelBuilder.CustomAttribute(
        name="gain", frequency=newton.Model.AttributeFrequency.JOINT_DOF, dtype=float, default=0.0))
    b.add_custom_attribute(newton.ModelBuilder.CustomAttribute(
        name="tag", frequency=newton.Model.AttributeFrequency.BODY, dtype=int, default=0))
    body = b.add_link(mass=1.0)
    before = (b.body_count, b.joint_count, b.joint_dof_count, b.joint_coord_count, b.shape_count,
              list(b.body_mass), len(b.joint_q_start))
    with pytest.raises(AttributeError):
        b.add_link(custom_attributes={"undeclared": 1})
    with pytest.raises(ValueError, match="2 values but joint has 1 DOFs"):
        b.add_joint_revolute(-1, body, custom_attributes={"gain": [1.0, 2.0]})
    with pytest.raises(ValueError, match="frequency"):
        b.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1, custom_attributes={"gain": 1.0})
    after = (b.body_count, b.joint_count, b.joint_dof_count, b.joint_coord_count, b.shape_count,
             list(b.body_mass), len(b.joint_q_start))
    assert after == before
    joint = b.add_joint_revolute(-1, body, custom_attributes={"gain": [3.0]})
    b.add_articulation([joint])
    model = b.finalize(device="cpu")
    assert np.allclose(model.gain.numpy(), [3.0])

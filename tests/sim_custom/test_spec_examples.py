"""The Custom Attributes / Custom Frequencies examples of concepts.txt, run with ``import armillary as newton``."""

import numpy as np
import pytest
import warp as wp

import armillary as newton

Model = newton.Model
ModelBuilder = newton.ModelBuilder
DEVICE = "cpu"


def _declare_main(builder):
    builder.add_custom_attribute(
        ModelBuilder.CustomAttribute(
            name="temperature",
            frequency=Model.AttributeFrequency.BODY,
            dtype=wp.float32,
            default=20.0,
            assignment=Model.AttributeAssignment.MODEL,
        )
    )
    builder.add_custom_attribute(
        ModelBuilder.CustomAttribute(
            name="velocity_limit",
            frequency=Model.AttributeFrequency.BODY,
            dtype=wp.vec3,
            default=(1.0, 1.0, 1.0),
            assignment=Model.AttributeAssignment.STATE,
        )
    )
    builder.add_custom_attribute(
        ModelBuilder.CustomAttribute(
            name="float_attr",
            frequency=Model.AttributeFrequency.BODY,
            dtype=wp.float32,
            default=0.5,
            assignment=Model.AttributeAssignment.MODEL,
            namespace="namespace_a",
        )
    )
    builder.add_custom_attribute(
        ModelBuilder.CustomAttribute(
            name="bool_attr",
            frequency=Model.AttributeFrequency.SHAPE,
            dtype=wp.bool,
            default=False,
            assignment=Model.AttributeAssignment.MODEL,
            namespace="namespace_a",
        )
    )
    builder.add_custom_attribute(
        ModelBuilder.CustomAttribute(
            name="articulation_stiffness",
            frequency=Model.AttributeFrequency.ARTICULATION,
            dtype=wp.float32,
            default=100.0,
            assignment=Model.AttributeAssignment.MODEL,
        )
    )
    builder.add_custom_attribute(
        ModelBuilder.CustomAttribute(
            name="gravity_scale",
            frequency=Model.AttributeFrequency.ONCE,
            dtype=wp.float32,
            default=1.0,
            assignment=Model.AttributeAssignment.MODEL,
        )
    )
    builder.add_custom_attribute(
        ModelBuilder.CustomAttribute(
            name="body_description",
            frequency=Model.AttributeFrequency.BODY,
            dtype=str,
            default="unnamed",
            assignment=Model.AttributeAssignment.MODEL,
        )
    )


def test_declaring_and_default_values(capsys):
    builder = ModelBuilder()
    _declare_main(builder)
    body1 = builder.add_body(mass=1.0)
    body2 = builder.add_body(mass=1.0, custom_attributes={"temperature": 37.5})
    for i in range(3):
        base = builder.add_link(mass=1.0)
        joint = builder.add_joint_free(child=base)
        builder.add_articulation(
            joints=[joint], custom_attributes={"articulation_stiffness": 100.0 + float(i) * 50.0}
        )
    model = builder.finalize(device=DEVICE)
    temps = model.temperature.numpy()
    arctic_stiff = model.articulation_stiffness.numpy()
    print(f"Body 1: {temps[body1]}")
    print(f"Body 2: {temps[body2]}")
    print(f"Articulations: {len(arctic_stiff)}")
    print(f"Last articulation stiffness: {arctic_stiff[-1]}")
    out = capsys.readouterr().out
    assert out == "Body 1: 20.0\nBody 2: 37.5\nArticulations: 5\nLast articulation stiffness: 200.0\n"
    # ONCE: array of length 1; string attributes: Python list
    assert model.gravity_scale.shape == (1,)
    assert model.gravity_scale.numpy()[0] == 1.0
    assert isinstance(model.body_description, list)
    assert model.body_description == ["unnamed"] * model.body_count
    assert model.namespace_a.float_attr.dtype == wp.float32


def _authoring_builder():
    builder = ModelBuilder()
    _declare_main(builder)
    builder.add_body(mass=1.0)
    body_id = builder.add_body(
        mass=1.0,
        custom_attributes={
            "temperature": 37.5,
            "velocity_limit": [2.0, 2.0, 2.0],
            "namespace_a:float_attr": 0.5,
        },
    )
    shape_id = builder.add_shape_box(
        body=body_id, hx=0.1, hy=0.1, hz=0.1, custom_attributes={"namespace_a:bool_attr": True}
    )
    builder.add_custom_attribute(
        ModelBuilder.CustomAttribute(name="int_attr", frequency=Model.AttributeFrequency.JOINT, dtype=wp.int32)
    )
    builder.add_custom_attribute(
        ModelBuilder.CustomAttribute(
            name="float_attr_dof", frequency=Model.AttributeFrequency.JOINT_DOF, dtype=wp.float32
        )
    )
    builder.add_custom_attribute(
        ModelBuilder.CustomAttribute(
            name="float_attr_coord", frequency=Model.AttributeFrequency.JOINT_COORD, dtype=wp.float32
        )
    )
    parent = builder.add_link(mass=1.0)
    child = builder.add_link(mass=1.0)
    cfg = ModelBuilder.JointDofConfig
    joint_id = builder.add_joint_d6(
        parent=parent,
        child=child,
        linear_axes=[cfg(axis=[1, 0, 0])],
        angular_axes=[cfg(axis=[0, 0, 1])],
        custom_attributes={"int_attr": 5, "float_attr_dof": [100.0, 200.0], "float_attr_coord": [0.5, 0.7]},
    )
    builder.add_articulation([joint_id])
    parent2 = builder.add_link(mass=1.0)
    child2 = builder.add_link(mass=1.0)
    revolute_joint = builder.add_joint_revolute(
        parent=parent2,
        child=child2,
        axis=[0, 0, 1],
        custom_attributes={"float_attr_dof": 150.0, "float_attr_coord": 0.8},
    )
    builder.add_articulation([revolute_joint])
    parent3 = builder.add_link(mass=1.0)
    child3 = builder.add_link(mass=1.0)
    d6_joint = builder.add_joint_d6(
        parent=parent3,
        child=child3,
        linear_axes=[cfg(axis=[1, 0, 0]), cfg(axis=[0, 1, 0])],
        angular_axes=[cfg(axis=[0, 0, 1])],
        custom_attributes={"float_attr_dof": {0: 100.0, 2: 300.0}},
    )
    builder.add_articulation([d6_joint])
    return builder, body_id, shape_id, (joint_id, revolute_joint, d6_joint)


def test_authoring_and_accessing(capsys):
    builder, body_id, shape_id, joints = _authoring_builder()
    model = builder.finalize(device=DEVICE)
    state = model.state()
    temperatures = model.temperature.numpy()
    velocity_limits = state.velocity_limit.numpy()
    print(f"Temperature: {temperatures[body_id]}")
    print(f"Velocity limit: {velocity_limits[body_id]}")
    namespace_a_body_floats = model.namespace_a.float_attr.numpy()
    namespace_a_shape_bools = model.namespace_a.bool_attr.numpy()
    print(f"Namespace A body float: {namespace_a_body_floats[body_id]}")
    print(f"Namespace A shape bool: {bool(namespace_a_shape_bools[shape_id])}")
    out = capsys.readouterr().out
    assert out == "Temperature: 37.5\nVelocity limit: [2. 2. 2.]\nNamespace A body float: 0.5\nNamespace A shape bool: True\n"


def test_joint_frequency_formats():
    builder, _, _, (j_d6, j_rev, j_d6b) = _authoring_builder()
    qd_start = list(builder.joint_qd_start)
    q_start = list(builder.joint_q_start)
    model = builder.finalize(device=DEVICE)
    dof = model.float_attr_dof.numpy()
    coord = model.float_attr_coord.numpy()
    assert model.int_attr.numpy()[j_d6] == 5
    np.testing.assert_allclose(dof[qd_start[j_d6] : qd_start[j_d6] + 2], [100.0, 200.0])
    np.testing.assert_allclose(coord[q_start[j_d6] : q_start[j_d6] + 2], [0.5, 0.7])
    assert dof[qd_start[j_rev]] == 150.0
    assert coord[q_start[j_rev]] == pytest.approx(0.8)
    np.testing.assert_allclose(dof[qd_start[j_d6b] : qd_start[j_d6b] + 3], [100.0, 0.0, 300.0])
    assert len(dof) == model.joint_dof_count and len(coord) == model.joint_coord_count


def test_state_attribute_is_copied_per_state():
    builder, body_id, _, _ = _authoring_builder()
    model = builder.finalize(device=DEVICE)
    s0, s1 = model.state(), model.state()
    assert s0.velocity_limit is not s1.velocity_limit
    np.testing.assert_allclose(s0.velocity_limit.numpy()[0], [1.0, 1.0, 1.0])
    assert model.get_attribute_frequency("velocity_limit") == Model.AttributeFrequency.BODY
    assert model.attribute_assignment["velocity_limit"] == Model.AttributeAssignment.STATE


def test_control_and_namespaced_state():
    builder = ModelBuilder()
    builder.add_custom_attribute(
        ModelBuilder.CustomAttribute(
            name="some_attrib",
            frequency=Model.AttributeFrequency.JOINT_DOF,
            dtype=wp.float32,
            default=150.0,
            assignment=Model.AttributeAssignment.CONTROL,
            namespace="namespace_a",
        )
    )
    builder.add_custom_attribute(
        ModelBuilder.CustomAttribute(
            name="vec3_attr",
            frequency=Model.AttributeFrequency.BODY,
            dtype=wp.vec3,
            assignment=Model.AttributeAssignment.STATE,
        )
    )
    body = builder.add_link()
    joint = builder.add_joint_revolute(-1, body, axis=(0, 0, 1), custom_attributes={"namespace_a:some_attrib": 3.0})
    builder.add_articulation([joint])
    model = builder.finalize(device=DEVICE)
    control = model.control()
    state = model.state()
    np.testing.assert_allclose(control.namespace_a.some_attrib.numpy(), [3.0])
    assert state.vec3_attr.numpy().shape == (1, 3)


# The 'Registering Solver Attributes' example (SolverMuJoCo) runs in plugins/solver_mujoco/tests.


# The 'USD Integration' example (robot_arm.usda) runs end to end in
# plugins/importer_usd/tests/test_custom_attributes.py (core tests run without plugins).


def test_mjcf_urdf_fields_are_stored():
    builder = ModelBuilder()
    attr = ModelBuilder.CustomAttribute(
        name="custom_damping",
        frequency=Model.AttributeFrequency.JOINT_DOF,
        dtype=wp.float32,
        default=0.0,
        namespace="myns",
        mjcf_attribute_name="damping",
    )
    builder.add_custom_attribute(attr)
    stored = builder.custom_attributes["myns:custom_damping"]
    assert stored.mjcf_attribute_name == "damping"
    assert stored.urdf_attribute_name == "custom_damping"
    assert stored.usd_attribute_name == "newton:myns:custom_damping"
    assert stored.mjcf_value_transformer is None


def test_custom_frequencies_example(capsys):
    builder = ModelBuilder()
    builder.add_custom_frequency(ModelBuilder.CustomFrequency(name="item", namespace="myns"))
    builder.add_custom_frequency(ModelBuilder.CustomFrequency(name="pair", namespace="mujoco"))
    builder.add_custom_attribute(
        ModelBuilder.CustomAttribute(name="pair_geom1", frequency="mujoco:pair", dtype=wp.int32, namespace="mujoco")
    )
    builder.add_custom_attribute(
        ModelBuilder.CustomAttribute(name="item_id", frequency="myns:item", dtype=wp.int32, namespace="myns")
    )
    builder.add_custom_attribute(
        ModelBuilder.CustomAttribute(name="item_value", frequency="myns:item", dtype=wp.float32, namespace="myns")
    )
    builder.add_custom_values({"myns:item_id": 100, "myns:item_value": 2.5})
    builder.add_custom_values({"myns:item_id": 101, "myns:item_value": 3.0})
    _body = builder.add_link()
    _joint = builder.add_joint_free(_body)
    builder.add_articulation([_joint])
    model = builder.finalize(device=DEVICE)
    print(model.myns.item_id.numpy())
    print(model.myns.item_value.numpy())
    assert capsys.readouterr().out == "[100 101]\n[2.5 3. ]\n"
    assert model.get_custom_frequency_count("mujoco:pair") == 0
    assert model.get_custom_frequency_count("myns:item") == 2


def test_add_custom_values_batch_and_kwargs():
    builder = ModelBuilder()
    builder.add_custom_frequency(ModelBuilder.CustomFrequency(name="item", namespace="myns"))
    for name, dt in (("item_id", wp.int32), ("item_value", wp.float32)):
        builder.add_custom_attribute(
            ModelBuilder.CustomAttribute(name=name, frequency="myns:item", dtype=dt, namespace="myns")
        )
    rows = builder.add_custom_values_batch(
        [{"myns:item_id": 100, "myns:item_value": 2.5}, {"myns:item_id": 101, "myns:item_value": 3.0}]
    )
    assert rows == [{"myns:item_id": 0, "myns:item_value": 0}, {"myns:item_id": 1, "myns:item_value": 1}]
    assert builder.add_custom_values(**{"myns:item_id": 102}) == {"myns:item_id": 2}
    model = builder.finalize(device=DEVICE)
    np.testing.assert_array_equal(model.myns.item_id.numpy(), [100, 101, 102])
    # the omitted value of row 2 takes the default
    np.testing.assert_allclose(model.myns.item_value.numpy(), [2.5, 3.0, 0.0])


def test_multi_world_merging_example():
    builder = ModelBuilder()
    builder.add_custom_frequency(ModelBuilder.CustomFrequency(name="pair", namespace="mujoco"))
    builder.add_custom_attribute(
        ModelBuilder.CustomAttribute(
            name="pair_world", frequency="mujoco:pair", dtype=wp.int32, namespace="mujoco", references="world"
        )
    )
    builder.add_custom_attribute(
        ModelBuilder.CustomAttribute(
            name="pair_geom1", frequency="mujoco:pair", dtype=wp.int32, namespace="mujoco", references="shape"
        )
    )
    _body = builder.add_link()
    _joint = builder.add_joint_free(_body)
    builder.add_articulation([_joint])
    model = builder.finalize(device=DEVICE)
    pair_count = model.get_custom_frequency_count("mujoco:pair")
    assert pair_count == 0
    pair_count = model.custom_frequency_counts.get("mujoco:pair", 0)
    assert pair_count == 0
    with pytest.raises(KeyError):
        model.get_custom_frequency_count("nope:pair")
    assert model.get_attribute_frequency("mujoco:pair_geom1") == "mujoco:pair"


def test_multi_world_pairs_are_remapped():
    sub = ModelBuilder()
    sub.add_custom_frequency(ModelBuilder.CustomFrequency(name="pair", namespace="mujoco"))
    sub.add_custom_attribute(
        ModelBuilder.CustomAttribute(
            name="pair_world", frequency="mujoco:pair", dtype=wp.int32, namespace="mujoco", references="world"
        )
    )
    sub.add_custom_attribute(
        ModelBuilder.CustomAttribute(
            name="pair_geom1", frequency="mujoco:pair", dtype=wp.int32, namespace="mujoco", references="shape"
        )
    )
    body = sub.add_body(mass=1.0)
    sub.add_shape_sphere(body, radius=0.1)
    sub.add_shape_sphere(body, radius=0.1)
    sub.add_custom_values(**{"mujoco:pair_geom1": 1})
    main = ModelBuilder()
    main.add_shape_sphere(-1, radius=0.1)
    main.add_world(sub)
    main.add_world(sub)
    model = main.finalize(device=DEVICE)
    np.testing.assert_array_equal(model.mujoco.pair_world.numpy(), [0, 1])
    np.testing.assert_array_equal(model.mujoco.pair_geom1.numpy(), [2, 4])

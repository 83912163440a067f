"""All attributes sharing a custom frequency must have the same count at finalize() (the Custom
Attributes page). Before issue 20 two attributes given 2 and 1 values passed silently (the short
one was padded with defaults)."""

import numpy as np
import pytest
import warp as wp

import armillary as newton

ModelBuilder = newton.ModelBuilder
CA, CF = ModelBuilder.CustomAttribute, ModelBuilder.CustomFrequency


def _builder():
    b = ModelBuilder()
    b.add_custom_frequency(CF(name="item", namespace="myns"))
    return b


def _attr(name, values=None):
    return CA(name=name, frequency="myns:item", dtype=wp.int32, namespace="myns", values=values)


def test_prepopulated_counts_that_differ_raise_at_finalize():
    b = _builder()
    b.add_custom_attribute(_attr("a", [1, 2]))
    b.add_custom_attribute(_attr("b", [3]))
    with pytest.raises(ValueError, match=r"'myns:item'.*'myns:a' has 2 values but 'myns:b' has 1"):
        b.finalize(device="cpu")


def test_shorter_first_then_longer_raises_too():
    b = _builder()
    b.add_custom_attribute(_attr("b", [3]))
    b.add_custom_attribute(_attr("a", [1, 2]))
    with pytest.raises(ValueError, match=r"'myns:b' has 1 values but 'myns:a' has 2"):
        b.finalize(device="cpu")


def test_hand_edited_lists_raise_at_finalize_and_on_the_next_row():
    b = _builder()
    b.add_custom_attribute(_attr("a"))
    b.add_custom_attribute(_attr("b"))
    b.add_custom_values({"myns:a": 1, "myns:b": 2})
    b.custom_attributes["myns:a"].values.append(5)
    with pytest.raises(ValueError, match=r"'myns:a' has 2 values but 'myns:b' has 1"):
        b.finalize(device="cpu")
    with pytest.raises(ValueError, match="same count"):
        b.add_custom_values({"myns:a": 7})


def test_merging_an_out_of_step_builder_raises():
    src = _builder()
    src.add_custom_attribute(_attr("a", [1, 2]))
    src.add_custom_attribute(_attr("b", [3]))
    dst = ModelBuilder()
    with pytest.raises(ValueError, match=r"'myns:a' has 2 values but 'myns:b' has 1"):
        dst.add_builder(src)


def test_in_step_declarations_are_padded_with_defaults():
    b = _builder()
    b.add_custom_attribute(_attr("early"))  # declared empty before any row: padded when rows appear
    b.add_custom_attribute(_attr("a", [1, 2]))
    b.add_custom_values({"myns:a": 3})  # omitted keys get their default
    b.add_custom_attribute(_attr("late"))  # declared empty after rows exist: defaults for them
    b.add_custom_attribute(_attr("same", [7, 8, 9]))  # the same count as its siblings
    m = b.finalize(device="cpu")
    assert m.get_custom_frequency_count("myns:item") == 3
    np.testing.assert_array_equal(m.myns.a.numpy(), [1, 2, 3])
    np.testing.assert_array_equal(m.myns.early.numpy(), [0, 0, 0])
    np.testing.assert_array_equal(m.myns.late.numpy(), [0, 0, 0])
    np.testing.assert_array_equal(m.myns.same.numpy(), [7, 8, 9])

"""Custom attributes and custom frequencies of the model builder (skeleton; filled in below)."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Iterable, Sequence
from typing import Any


class AttributeFrequency(enum.IntEnum):
    """Per-entity indexing of a custom attribute (exposed as ``Model.AttributeFrequency``)."""

    ONCE = 0
    JOINT = 1
    JOINT_DOF = 2
    JOINT_COORD = 3
    JOINT_CONSTRAINT = 4
    BODY = 5
    SHAPE = 6
    ARTICULATION = 7
    PARTICLE = 9
    EDGE = 10
    TRIANGLE = 11
    TETRAHEDRON = 12
    SPRING = 13
    CONSTRAINT_MIMIC = 14
    WORLD = 15
    ATTACHMENT_PARTICLE_BODY = 16
    CONTACT = 17
    CONTACT_RIGID = 18
    CONTACT_SOFT = 19
    TENDON = 20
    TENDON_GUIDE = 21
    TENDON_SEGMENT = 22
    CURVE = 23
    SURFACE = 24
    VOLUME = 25


class AttributeAssignment(enum.IntEnum):
    """Owner object of a custom attribute (exposed as ``Model.AttributeAssignment``)."""

    MODEL = 0
    STATE = 1
    CONTROL = 2
    CONTACT = 3


@dataclasses.dataclass
class CustomAttribute:
    """Declaration of a custom attribute (exposed as ``ModelBuilder.CustomAttribute``)."""

    name: str
    dtype: type
    frequency: AttributeFrequency | str
    assignment: AttributeAssignment = AttributeAssignment.MODEL
    namespace: str | None = None
    references: AttributeFrequency | str | None = None
    default: Any = None
    values: dict[int, Any] | list[Any] | None = None
    usd_attribute_name: str | None = None
    mjcf_attribute_name: str | None = None
    urdf_attribute_name: str | None = None
    usd_value_transformer: Callable[[Any, dict[str, Any]], Any] | None = None
    mjcf_value_transformer: Callable[[str, dict[str, Any] | None], Any] | None = None
    urdf_value_transformer: Callable[[str, dict[str, Any] | None], Any] | None = None
    reference_value_transformer: Callable[[list[Any], dict[str, Any]], list[Any]] | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}:{self.name}" if self.namespace else self.name


@dataclasses.dataclass
class CustomFrequency:
    """Declaration of a custom frequency (exposed as ``ModelBuilder.CustomFrequency``)."""

    name: str
    namespace: str | None = None
    usd_prim_filter: Callable[[Any, dict[str, Any]], bool] | None = None
    usd_entry_expander: Callable[[Any, dict[str, Any]], Iterable[dict[str, Any]]] | None = None
    articulation_owner_attribute: str | None = None
    articulation_owner_resolver: Callable[[Any], Sequence[int]] | None = None
    label_attribute: str | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}:{self.name}" if self.namespace else self.name


class CustomAttributesMixin:
    """Builder mixin: declaration, authoring, merging and finalization of custom attributes."""

    def _init_custom_attributes(self) -> None:
        self.custom_attributes: dict[str, CustomAttribute] = {}
        self.custom_frequencies: dict[str, CustomFrequency] = {}
        self._custom_frequency_counts: dict[str, int] = {}

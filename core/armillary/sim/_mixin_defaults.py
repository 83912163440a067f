"""Fallback builder mixins used while the particle / custom-attribute modules are unavailable.

The real implementations live in :mod:`armillary.sim.builder_particles` and
:mod:`armillary.sim.custom_attributes`; :mod:`armillary.sim.builder` imports
them when present and falls back to these no-op versions otherwise.
"""

from __future__ import annotations

import enum


class AttributeFrequency(enum.IntEnum):
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
    MODEL = 0
    STATE = 1
    CONTROL = 2
    CONTACT = 3


class CustomAttributesMixin:
    """No-op custom attribute support."""

    def _init_custom_attributes(self) -> None:
        pass

    def _assign_custom_attributes(self, frequency_key: str, index: int, values: dict | None) -> None:
        if values:
            raise ValueError(
                f"custom_attributes {sorted(values)} given for {frequency_key} {index}, "
                "but custom attributes are not available in this build"
            )

    def _merge_custom_attributes(self, other, offsets: dict) -> None:
        pass

    def _finalize_custom_attributes(self, model, device, requires_grad: bool) -> None:
        pass


class ParticleBuilderMixin:
    """No-op particle support."""

    def _init_particles(self) -> None:
        pass

    def _merge_particles(self, other, offsets: dict, xform=None) -> None:
        pass

    def _finalize_particles(self, model, device, requires_grad: bool) -> None:
        pass

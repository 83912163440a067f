"""Particles, springs, triangles, bending edges and tetrahedra of the model builder (skeleton)."""

from __future__ import annotations


class ParticleBuilderMixin:
    """Builder mixin: particles and soft-body elements."""

    def _init_particles(self) -> None:
        pass

    def _merge_particles(self, other, offsets: dict, xform=None) -> None:
        pass

    def _finalize_particles(self, model, device, requires_grad: bool) -> None:
        pass

"""Per-shape configuration: :class:`ShapeConfig` (``ModelBuilder.ShapeConfig``).

Units: density kg/m^3, margin/gap m, ke N/m, kd N*s/m, kh Pa/m (hydroelastic).
"""

from __future__ import annotations

import copy
import math

from .enums import GeoType, ShapeFlags


class ShapeConfig:
    """Collision, material and mass settings of a shape.

    Collision control: ``collision_group`` (0 disables, positive groups collide with
    the same group and negative groups, negative groups with everything but
    themselves), ``collision_filter_parent`` (filter against bodies connected by a
    joint), ``has_shape_collision``, ``has_particle_collision``.

    Geometry: ``margin`` (surface offset, pairwise additive), ``gap`` (extra
    detection distance; ``None`` uses ``ModelBuilder.rigid_gap``), ``is_solid``
    (solid or hollow shell of thickness ``margin``), ``density``.

    Materials: ``mu``, ``ke``, ``kd``, ``kf``, ``ka``, ``restitution``,
    ``mu_torsional``, ``mu_rolling``, ``kh`` (hydroelastic stiffness).

    SDF: ``sdf_max_resolution``, ``sdf_target_voxel_size``, ``sdf_narrow_band_range``,
    ``force_sdf``, ``sdf_texture_format``, ``sdf_padding``, ``is_hydroelastic``.
    """

    def __init__(
        self,
        *,
        density: float = 1000.0,
        ke: float = 2.5e3,
        kd: float = 100.0,
        kf: float = 1000.0,
        ka: float = 0.0,
        mu: float = 1.0,
        restitution: float = 0.0,
        mu_torsional: float = 0.005,
        mu_rolling: float = 0.0001,
        margin: float = 0.0,
        gap: float | None = None,
        is_solid: bool = True,
        collision_group: int = 1,
        collision_filter_parent: bool = True,
        has_shape_collision: bool = True,
        has_particle_collision: bool = True,
        is_visible: bool = True,
        is_site: bool = False,
        sdf_narrow_band_range=(-0.1, 0.1),
        sdf_target_voxel_size: float | None = None,
        sdf_max_resolution: int | None = None,
        force_sdf: bool = False,
        sdf_texture_format: str = "uint16",
        is_hydroelastic: bool = False,
        kh: float = 1.0e10,
        sdf_padding: float | None = None,
    ):
        self.density = density
        self.ke = ke
        self.kd = kd
        self.kf = kf
        self.ka = ka
        self.mu = mu
        self.restitution = restitution
        self.mu_torsional = mu_torsional
        self.mu_rolling = mu_rolling
        self.margin = margin
        self.gap = gap
        self.is_solid = is_solid
        self.collision_group = collision_group
        self.collision_filter_parent = collision_filter_parent
        self.has_shape_collision = has_shape_collision
        self.has_particle_collision = has_particle_collision
        self.is_visible = is_visible
        self.is_site = is_site
        self.sdf_narrow_band_range = tuple(sdf_narrow_band_range)
        self.sdf_target_voxel_size = sdf_target_voxel_size
        self.sdf_max_resolution = sdf_max_resolution
        self.force_sdf = force_sdf
        self.sdf_texture_format = sdf_texture_format
        self.is_hydroelastic = is_hydroelastic
        self.kh = kh
        self.sdf_padding = sdf_padding

    @property
    def flags(self) -> int:
        """:class:`ShapeFlags` bits derived from the boolean settings."""
        f = 0
        if self.is_visible:
            f |= ShapeFlags.VISIBLE
        if self.has_shape_collision:
            f |= ShapeFlags.COLLIDE_SHAPES
        if self.has_particle_collision:
            f |= ShapeFlags.COLLIDE_PARTICLES
        if self.is_site:
            f |= ShapeFlags.SITE
        if self.is_hydroelastic:
            f |= ShapeFlags.HYDROELASTIC
        return int(f)

    @flags.setter
    def flags(self, value: int):
        value = int(value)
        self.is_visible = bool(value & ShapeFlags.VISIBLE)
        self.has_shape_collision = bool(value & ShapeFlags.COLLIDE_SHAPES)
        self.has_particle_collision = bool(value & ShapeFlags.COLLIDE_PARTICLES)
        self.is_site = bool(value & ShapeFlags.SITE)
        self.is_hydroelastic = bool(value & ShapeFlags.HYDROELASTIC)

    def configure_sdf(
        self,
        *,
        max_resolution: int | None = None,
        target_voxel_size: float | None = None,
        is_hydroelastic: bool = False,
        kh: float = 1.0e10,
        texture_format: str | None = None,
        force_sdf: bool = False,
    ) -> None:
        """Set the SDF generation and hydroelastic options in one call."""
        if max_resolution is not None and (int(max_resolution) <= 0 or int(max_resolution) % 8 != 0):
            raise ValueError(f"ShapeConfig.configure_sdf: max_resolution={max_resolution} must be a positive multiple of 8")
        if target_voxel_size is not None and not target_voxel_size > 0:
            raise ValueError(f"ShapeConfig.configure_sdf: target_voxel_size={target_voxel_size} must be > 0")
        self.sdf_max_resolution = max_resolution
        self.sdf_target_voxel_size = target_voxel_size
        self.is_hydroelastic = is_hydroelastic
        self.kh = kh
        if texture_format is not None:
            self.sdf_texture_format = texture_format
        self.force_sdf = force_sdf

    def mark_as_site(self) -> None:
        """Make this a non-colliding, invisible, massless reference frame (a site)."""
        self.is_site = True
        self.is_visible = False
        self.has_shape_collision = False
        self.has_particle_collision = False
        self.density = 0.0
        self.collision_group = 0

    def copy(self) -> "ShapeConfig":
        return copy.copy(self)

    def validate(self, shape_type: int | None = None, what: str = "ShapeConfig") -> None:
        """Raise ``ValueError`` naming ``what`` and the allowed values for invalid settings."""
        for name in ("density", "ke", "kd", "kf", "ka", "mu", "restitution", "mu_torsional", "mu_rolling", "margin", "kh"):
            v = getattr(self, name)
            try:
                fv = float(v)
            except (TypeError, ValueError):
                raise ValueError(f"{what}: {name}={v!r} must be a number >= 0") from None
            if math.isnan(fv) or fv < 0.0:
                raise ValueError(f"{what}: {name}={v} is invalid; expected a value >= 0")
        if self.gap is not None:
            g = float(self.gap)
            if math.isnan(g) or g < 0.0:
                raise ValueError(f"{what}: gap={self.gap} is invalid; expected None or a value >= 0")
        try:
            if int(self.collision_group) != self.collision_group:
                raise TypeError
        except (TypeError, ValueError):
            raise ValueError(f"{what}: collision_group={self.collision_group!r} must be an integer") from None
        if self.sdf_max_resolution is not None and (
            int(self.sdf_max_resolution) <= 0 or int(self.sdf_max_resolution) % 8 != 0
        ):
            raise ValueError(f"{what}: sdf_max_resolution={self.sdf_max_resolution} must be a positive multiple of 8")
        if self.sdf_target_voxel_size is not None and not float(self.sdf_target_voxel_size) > 0:
            raise ValueError(f"{what}: sdf_target_voxel_size={self.sdf_target_voxel_size} must be > 0")
        lo, hi = self.sdf_narrow_band_range
        if not lo < hi:
            raise ValueError(f"{what}: sdf_narrow_band_range={self.sdf_narrow_band_range} must satisfy inner < outer")
        if self.is_hydroelastic and shape_type is not None and int(shape_type) in (GeoType.PLANE, GeoType.HFIELD):
            raise ValueError(f"{what}: is_hydroelastic=True is not supported for {GeoType(int(shape_type)).name} shapes")

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"ShapeConfig({fields})"

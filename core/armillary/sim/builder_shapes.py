"""Shape authoring of :class:`~armillary.ModelBuilder` (mixin): primitives, meshes,
heightfields, planes, sites, collision filter pairs and shape-derived mass properties.

Shape sizes are stored in ``shape_scale`` per type: sphere ``(r, 0, 0)``, box
``(hx, hy, hz)``, capsule / cone ``(r, half_height, 0)``, cylinder
``(r, half_height, barrel_radius)``, ellipsoid ``(rx, ry, rz)``, plane
``(width, length, 0)`` (zero = infinite), mesh / heightfield: per-axis scale.
``shape_transform`` is the shape frame in its body frame (world frame for
``body=-1``). Lengths in m.
"""

from __future__ import annotations

import math

import numpy as np
import warp as wp

from . import mass as _mass
from ._convert import check_index, to_float, to_transform, to_vec3
from .enums import GeoType
from .geometry_types import Heightfield, Mesh
from .shape_config import ShapeConfig

_PALETTE = (
    (68, 119, 170), (102, 204, 238), (34, 136, 51), (204, 187, 68),
    (238, 102, 119), (170, 51, 119), (238, 153, 51), (0, 153, 136),
)  # fmt: skip
GROUND_PLANE_COLOR = (0.125, 0.125, 0.15)
INFINITE_RADIUS = 1.0e6


class ShapeFilterPairs(set):
    """Set of canonical shape index pairs ``(a, b)`` with ``a < b`` excluded from collision.

    Accepts pairs in any order through :meth:`add` or the list-style :meth:`append`.
    """

    def add(self, pair) -> None:  # type: ignore[override]
        a, b = (int(v) for v in pair)
        super().add((a, b) if a < b else (b, a))

    append = add

    def extend(self, pairs) -> None:
        for p in pairs:
            self.add(p)

    def __contains__(self, pair) -> bool:
        try:
            a, b = (int(v) for v in pair)
        except (TypeError, ValueError):
            return False
        return super().__contains__((a, b) if a < b else (b, a))


def _collision_radius(geo: int, scale, src) -> float:
    s = [abs(float(v)) for v in scale]
    if geo == GeoType.SPHERE:
        return s[0]
    if geo == GeoType.BOX:
        return math.sqrt(s[0] ** 2 + s[1] ** 2 + s[2] ** 2)
    if geo in (GeoType.CAPSULE, GeoType.CYLINDER, GeoType.CONE):
        return s[0] + s[1]
    if geo == GeoType.ELLIPSOID:
        return max(s)
    if geo == GeoType.PLANE:
        return INFINITE_RADIUS if s[0] == 0.0 or s[1] == 0.0 else 0.5 * math.hypot(s[0], s[1])
    if geo in (GeoType.MESH, GeoType.CONVEX_MESH) and isinstance(src, Mesh) and len(src.vertices):
        return float(np.linalg.norm(np.asarray(src.vertices, dtype=np.float64) * np.asarray(s), axis=1).max())
    if geo == GeoType.HFIELD and isinstance(src, Heightfield):
        z = max(abs(src.min_z), abs(src.max_z)) * s[2]
        return math.sqrt((src.hx * s[0]) ** 2 + (src.hy * s[1]) ** 2 + z * z)
    return max(s) if s else 0.0


class ShapeBuilderMixin:
    """Shape-related state and methods of the model builder."""

    def _init_shapes(self) -> None:
        self.shape_type: list[int] = []
        self.shape_body: list[int] = []
        self.shape_transform: list = []
        self.shape_scale: list[tuple[float, float, float]] = []
        self.shape_flags: list[int] = []
        self.shape_world: list[int] = []
        self.shape_label: list[str] = []
        self.shape_source: list = []
        self.shape_color: list[tuple[float, float, float]] = []
        self.shape_opacity: list[float] = []
        self.shape_collision_group: list[int] = []
        self.shape_collision_radius: list[float] = []
        self.shape_margin: list[float] = []
        self.shape_gap: list[float] = []
        self.shape_is_solid: list[bool] = []
        self.shape_density: list[float] = []
        self.shape_material_mu: list[float] = []
        self.shape_material_ke: list[float] = []
        self.shape_material_kd: list[float] = []
        self.shape_material_kf: list[float] = []
        self.shape_material_ka: list[float] = []
        self.shape_material_kh: list[float] = []
        self.shape_material_restitution: list[float] = []
        self.shape_material_mu_torsional: list[float] = []
        self.shape_material_mu_rolling: list[float] = []
        self.shape_sdf_max_resolution: list = []
        self.shape_sdf_target_voxel_size: list = []
        self.shape_sdf_narrow_band_range: list = []
        self.shape_sdf_texture_format: list[str] = []
        self.shape_sdf_padding: list = []
        self.shape_force_sdf: list[bool] = []
        self._shape_filter_parent: list[bool] = []
        self.shape_collision_filter_pairs = ShapeFilterPairs()

    @property
    def shape_count(self) -> int:
        return len(self.shape_type)

    @property
    def default_site_cfg(self) -> ShapeConfig:
        cfg = ShapeConfig()
        cfg.mark_as_site()
        return cfg

    # ------------------------------------------------------------------ generic
    def _validate_scale(self, geo: GeoType, scale, src, what: str) -> tuple[float, float, float]:
        s = tuple(float(v) for v in to_vec3(scale, f"{what}: size/scale"))

        def need(cond, msg):
            if not cond:
                raise ValueError(f"{what}: invalid {geo.name} size {s}: {msg}")

        if geo == GeoType.SPHERE:
            need(s[0] > 0, "radius must be > 0")
        elif geo in (GeoType.BOX, GeoType.ELLIPSOID):
            need(min(s) > 0, "all half extents / radii must be > 0")
        elif geo == GeoType.CAPSULE:
            need(s[0] > 0 and s[1] >= 0, "radius must be > 0 and half_height >= 0")
        elif geo in (GeoType.CYLINDER, GeoType.CONE):
            need(s[0] > 0 and s[1] > 0, "radius and half_height must be > 0")
            if geo == GeoType.CYLINDER:
                need(s[2] == 0 or s[2] >= s[1], "barrel_radius must be 0 or >= half_height")
        elif geo == GeoType.PLANE:
            need(s[0] >= 0 and s[1] >= 0, "width and length must be >= 0 (0 means infinite)")
        elif geo in (GeoType.MESH, GeoType.CONVEX_MESH):
            need(isinstance(src, Mesh), f"a Mesh source is required, got {type(src).__name__}")
            need(all(v != 0 for v in s), "mesh scale components must be non-zero")
        elif geo == GeoType.HFIELD:
            need(isinstance(src, Heightfield), f"a Heightfield source is required, got {type(src).__name__}")
            need(min(s) > 0, "heightfield scale components must be > 0")
        return s

    def add_shape(
        self,
        *,
        body: int,
        type: int,
        xform=None,
        cfg: ShapeConfig | None = None,
        scale=None,
        src=None,
        is_static: bool = False,
        color=None,
        opacity: float | None = None,
        label: str | None = None,
        custom_attributes: dict | None = None,
    ) -> int:
        """Add a shape of any :class:`GeoType` to ``body`` (``-1``: static, world frame); returns its index.

        The shape's mass (``cfg.density`` times its volume; hollow shells of thickness
        ``cfg.margin`` when ``cfg.is_solid`` is false) is added to the body unless the
        body locks its inertia or ``is_static`` is true (fixed collision geometry: zero mass,
        ``cfg.density`` ignored).
        """
        idx = self.shape_count
        what = f"shape {idx} ('{label}')" if label else f"shape {idx}"
        body = check_index(body, self.body_count, f"{what}: body", allow_world=True)
        try:
            geo = GeoType(int(type))
        except (TypeError, ValueError):
            raise ValueError(f"{what}: type={type!r} is not a GeoType; allowed: {[g.name for g in GeoType]}") from None
        cfg = self.default_shape_cfg if cfg is None else cfg
        if not isinstance(cfg, ShapeConfig):
            raise ValueError(f"{what}: cfg must be a ModelBuilder.ShapeConfig, got {cfg.__class__.__name__}")
        cfg.validate(int(geo), what)
        s = self._validate_scale(geo, (1.0, 1.0, 1.0) if scale is None else scale, src, what)
        tf = to_transform(xform, f"{what}: xform")
        if color is not None:
            color = tuple(float(c) for c in to_vec3(color, f"{what}: color"))
        else:
            color = tuple(c / 255.0 for c in _PALETTE[idx % len(_PALETTE)])
        opacity = 1.0 if opacity is None else to_float(opacity, f"{what}: opacity", minimum=0.0)
        gap = self.rigid_gap if cfg.gap is None else float(cfg.gap)

        # mass properties (computed before committing anything)
        mass_update = None
        if body >= 0 and not is_static and not self.body_lock_inertia[body] and not cfg.is_site and cfg.density > 0.0:
            m, c, inertia = _mass.shape_mass_properties(geo, s, float(cfg.density), bool(cfg.is_solid), float(cfg.margin), src)
            if m > 0.0:
                m, c, inertia = _mass.transform_mass_properties(m, c, inertia, tf.p, tf.q)
                mass_update = _mass.combine(
                    self.body_mass[body], np.asarray(self.body_com[body]), np.asarray(self.body_inertia[body]).reshape(3, 3),
                    m, c, inertia,
                )  # fmt: skip
                fmax = float(np.finfo(np.float32).max)
                if not (np.all(np.isfinite(mass_update[2])) and abs(mass_update[0]) < fmax
                        and np.abs(mass_update[2]).max() < fmax):  # fmt: skip
                    raise ValueError(
                        f"{what}: {geo.name} size {s} with density {cfg.density} gives mass {m:.6g} and inertia "
                        "outside the float32 range; use smaller sizes or density"
                    )

        self._check_custom_attributes("shape", custom_attributes)

        # --- commit ---
        self.shape_type.append(int(geo))
        self.shape_body.append(body)
        self.shape_transform.append(tf)
        self.shape_scale.append(s)
        self.shape_flags.append(cfg.flags)
        self.shape_world.append(self.current_world)
        self.shape_label.append(label if label is not None else f"shape_{idx}")
        self.shape_source.append(src)
        self.shape_color.append(color)
        self.shape_opacity.append(opacity)
        self.shape_collision_group.append(int(cfg.collision_group))
        self.shape_collision_radius.append(_collision_radius(geo, s, src))
        self.shape_margin.append(float(cfg.margin))
        self.shape_gap.append(gap)
        self.shape_is_solid.append(bool(cfg.is_solid))
        self.shape_density.append(float(cfg.density))
        self.shape_material_mu.append(float(cfg.mu))
        self.shape_material_ke.append(float(cfg.ke))
        self.shape_material_kd.append(float(cfg.kd))
        self.shape_material_kf.append(float(cfg.kf))
        self.shape_material_ka.append(float(cfg.ka))
        self.shape_material_kh.append(float(cfg.kh))
        self.shape_material_restitution.append(float(cfg.restitution))
        self.shape_material_mu_torsional.append(float(cfg.mu_torsional))
        self.shape_material_mu_rolling.append(float(cfg.mu_rolling))
        self.shape_sdf_max_resolution.append(cfg.sdf_max_resolution)
        self.shape_sdf_target_voxel_size.append(cfg.sdf_target_voxel_size)
        self.shape_sdf_narrow_band_range.append(tuple(cfg.sdf_narrow_band_range))
        self.shape_sdf_texture_format.append(cfg.sdf_texture_format)
        self.shape_sdf_padding.append(cfg.sdf_padding)
        self.shape_force_sdf.append(bool(cfg.force_sdf))
        self._shape_filter_parent.append(bool(cfg.collision_filter_parent))
        if mass_update is not None:
            m, c, inertia = mass_update
            self.body_mass[body] = float(m)
            self.body_com[body] = wp.vec3(*(float(v) for v in c))
            self.body_inertia[body] = wp.mat33(*(float(v) for v in np.asarray(inertia).reshape(-1)))

        if body >= 0:
            for other in self.body_shapes[body]:
                self.shape_collision_filter_pairs.add((other, idx))
            if cfg.collision_filter_parent:
                for j in self._body_joints.get(body, ()):
                    if not self.joint_collision_filter_parent[j]:
                        continue
                    nb = self.joint_child[j] if self.joint_parent[j] == body else self.joint_parent[j]
                    if nb < 0:
                        continue
                    for other in self.body_shapes[nb]:
                        if self._shape_filter_parent[other]:
                            self.shape_collision_filter_pairs.add((other, idx))
        self.body_shapes.setdefault(body, []).append(idx)
        self._assign_custom_attributes("shape", idx, custom_attributes)
        return idx

    def _filter_joint_shapes(self, parent: int, child: int) -> None:
        """Exclude collisions between the shapes of two jointed bodies (``collision_filter_parent``)."""
        for a in self.body_shapes.get(parent, ()):
            if not self._shape_filter_parent[a]:
                continue
            for b in self.body_shapes.get(child, ()):
                if self._shape_filter_parent[b]:
                    self.shape_collision_filter_pairs.add((a, b))

    def add_shape_collision_filter_pair(self, shape_a: int, shape_b: int) -> None:
        """Exclude the pair ``(shape_a, shape_b)`` from collision detection."""
        a = check_index(shape_a, self.shape_count, "add_shape_collision_filter_pair: shape_a")
        b = check_index(shape_b, self.shape_count, "add_shape_collision_filter_pair: shape_b")
        if a == b:
            raise ValueError(f"add_shape_collision_filter_pair: shape_a and shape_b are the same shape {a}")
        self.shape_collision_filter_pairs.add((a, b))

    # ------------------------------------------------------------------ primitives
    def _site_cfg(self, cfg, as_site: bool):
        if not as_site:
            return cfg
        cfg = (self.default_shape_cfg if cfg is None else cfg).copy()
        cfg.mark_as_site()
        return cfg

    def add_shape_sphere(self, body, *, xform=None, radius: float = 1.0, cfg=None, as_site: bool = False,
                         color=None, opacity=None, label=None, custom_attributes=None) -> int:  # fmt: skip
        """Sphere of ``radius`` [m] centered at the shape origin."""
        return self.add_shape(body=body, type=GeoType.SPHERE, xform=xform, cfg=self._site_cfg(cfg, as_site),
                              scale=(radius, 0.0, 0.0), color=color, opacity=opacity, label=label,
                              custom_attributes=custom_attributes)  # fmt: skip

    def add_shape_box(self, body, *, xform=None, hx: float = 0.5, hy: float = 0.5, hz: float = 0.5, cfg=None,
                      as_site: bool = False, color=None, opacity=None, label=None, custom_attributes=None) -> int:  # fmt: skip
        """Box with half extents ``hx, hy, hz`` [m] along the shape axes."""
        return self.add_shape(body=body, type=GeoType.BOX, xform=xform, cfg=self._site_cfg(cfg, as_site),
                              scale=(hx, hy, hz), color=color, opacity=opacity, label=label,
                              custom_attributes=custom_attributes)  # fmt: skip

    def add_shape_capsule(self, body, *, xform=None, radius: float = 1.0, half_height: float = 0.5, cfg=None,
                          as_site: bool = False, color=None, opacity=None, label=None, custom_attributes=None) -> int:  # fmt: skip
        """Capsule along +Z; ``half_height`` [m] excludes the hemispherical caps."""
        return self.add_shape(body=body, type=GeoType.CAPSULE, xform=xform, cfg=self._site_cfg(cfg, as_site),
                              scale=(radius, half_height, 0.0), color=color, opacity=opacity, label=label,
                              custom_attributes=custom_attributes)  # fmt: skip

    def add_shape_cylinder(self, body, *, xform=None, radius: float = 1.0, half_height: float = 0.5,
                           barrel_radius: float = 0.0, cfg=None, as_site: bool = False, color=None, opacity=None,
                           label=None, custom_attributes=None) -> int:  # fmt: skip
        """Cylinder along +Z; a non-zero ``barrel_radius`` (>= half_height) curves the side."""
        return self.add_shape(body=body, type=GeoType.CYLINDER, xform=xform, cfg=self._site_cfg(cfg, as_site),
                              scale=(radius, half_height, barrel_radius), color=color, opacity=opacity, label=label,
                              custom_attributes=custom_attributes)  # fmt: skip

    def add_shape_cone(self, body, *, xform=None, radius: float = 1.0, half_height: float = 0.5, cfg=None,
                       as_site: bool = False, color=None, opacity=None, label=None, custom_attributes=None) -> int:  # fmt: skip
        """Cone along +Z with the base (``radius``) at ``-half_height`` and the apex at ``+half_height``;
        its center of mass is at ``(0, 0, -half_height/2)``."""
        return self.add_shape(body=body, type=GeoType.CONE, xform=xform, cfg=self._site_cfg(cfg, as_site),
                              scale=(radius, half_height, 0.0), color=color, opacity=opacity, label=label,
                              custom_attributes=custom_attributes)  # fmt: skip

    def add_shape_ellipsoid(self, body, *, xform=None, rx: float = 1.0, ry: float = 0.75, rz: float = 0.5, cfg=None,
                            as_site: bool = False, color=None, opacity=None, label=None, custom_attributes=None) -> int:  # fmt: skip
        """Ellipsoid with semi-axes ``rx, ry, rz`` [m]."""
        return self.add_shape(body=body, type=GeoType.ELLIPSOID, xform=xform, cfg=self._site_cfg(cfg, as_site),
                              scale=(rx, ry, rz), color=color, opacity=opacity, label=label,
                              custom_attributes=custom_attributes)  # fmt: skip

    def add_shape_mesh(self, body, *, xform=None, mesh: Mesh | None = None, scale=None, cfg=None, color=None,
                       opacity=None, label=None, custom_attributes=None) -> int:  # fmt: skip
        """Triangle mesh (may be non-convex) scaled per axis by ``scale``."""
        return self.add_shape(body=body, type=GeoType.MESH, xform=xform, cfg=cfg, scale=scale, src=mesh,
                              color=color, opacity=opacity, label=label, custom_attributes=custom_attributes)  # fmt: skip

    def add_shape_convex_hull(self, body, *, xform=None, mesh: Mesh | None = None, scale=None, cfg=None, color=None,
                              opacity=None, label=None, custom_attributes=None) -> int:  # fmt: skip
        """Convex mesh (the convex hull of ``mesh``)."""
        return self.add_shape(body=body, type=GeoType.CONVEX_MESH, xform=xform, cfg=cfg, scale=scale, src=mesh,
                              color=color, opacity=opacity, label=label, custom_attributes=custom_attributes)  # fmt: skip

    add_shape_convex_mesh = add_shape_convex_hull

    def add_shape_heightfield(self, *, xform=None, heightfield: Heightfield | None = None, scale=None, cfg=None,
                              color=None, opacity=None, label=None, custom_attributes=None) -> int:  # fmt: skip
        """Static heightfield terrain (always attached to the world)."""
        return self.add_shape(body=-1, type=GeoType.HFIELD, xform=xform, cfg=cfg, scale=scale, src=heightfield,
                              color=color, opacity=opacity, label=label, custom_attributes=custom_attributes)  # fmt: skip

    def add_shape_plane(self, plane=(0.0, 0.0, 1.0, 0.0), *, xform=None, width: float = 10.0, length: float = 10.0,
                        body: int = -1, cfg=None, color=None, opacity=None, label=None,
                        custom_attributes=None) -> int:  # fmt: skip
        """Plane with normal +Z of its frame; ``width`` x ``length`` [m] (0 = infinite).

        Without ``xform`` the frame comes from the plane equation ``plane = (a, b, c, d)``,
        ``a*x + b*y + c*z + d = 0``.
        """
        if xform is None:
            eq = np.asarray([float(v) for v in plane], dtype=np.float64)
            if eq.shape != (4,) or not np.all(np.isfinite(eq)):
                raise ValueError(f"add_shape_plane: plane={plane!r} must be 4 finite numbers (a, b, c, d)")
            n = eq[:3]
            nn = np.linalg.norm(n)
            if nn < 1e-12:
                raise ValueError(f"add_shape_plane: plane normal {n.tolist()} must be non-zero")
            n, d = n / nn, eq[3] / nn
            pos = -n * d
            q = _quat_between((0.0, 0.0, 1.0), n)
            xform = wp.transform(wp.vec3(*pos.tolist()), wp.quat(*q))
        return self.add_shape(body=body, type=GeoType.PLANE, xform=xform, cfg=cfg, scale=(width, length, 0.0),
                              color=color, opacity=opacity, label=label, custom_attributes=custom_attributes)  # fmt: skip

    def add_ground_plane(self, *, height: float = 0.0, cfg=None, color=GROUND_PLANE_COLOR, opacity=None,
                         label: str | None = None) -> int:  # fmt: skip
        """Infinite static plane through ``height`` [m] along the up axis, normal pointing up."""
        up = np.asarray(self.up_axis.to_vector())
        h = to_float(height, "add_ground_plane: height")
        return self.add_shape_plane(plane=(*up.tolist(), -h), width=0.0, length=0.0, cfg=cfg, color=color,
                                    opacity=opacity, label=label if label is not None else "ground_plane")  # fmt: skip

    def add_site(self, body: int, *, xform=None, type: int = GeoType.SPHERE, scale=(0.01, 0.01, 0.01),
                 label: str | None = None, visible: bool = False, custom_attributes=None) -> int:  # fmt: skip
        """Add a non-colliding, massless reference frame on ``body``."""
        cfg = self.default_site_cfg
        cfg.is_visible = bool(visible)
        return self.add_shape(body=body, type=type, xform=xform, cfg=cfg, scale=scale, label=label,
                              custom_attributes=custom_attributes)  # fmt: skip

    def approximate_meshes(
        self,
        method: str = "convex_hull",
        shape_indices=None,
        raise_on_failure: bool = False,
        keep_visual_shapes: bool = False,
        **remeshing_kwargs,
    ) -> set[int]:
        """Replace MESH collision shapes by convex hulls, bounding primitives or convex decompositions.

        Args:
            method: ``"convex_hull"`` (default; CONVEX_MESH of at most ``Mesh.maxhullvert`` hull
                vertices), ``"bounding_box"`` (oriented BOX), ``"bounding_sphere"`` (minimal SPHERE),
                ``"coacd"`` / ``"vhacd"`` (convex decomposition through the optional ``coacd`` /
                ``vhacdx`` packages; one CONVEX_MESH per part on the same body).
            shape_indices: shapes to approximate; default: every MESH shape with
                ``ShapeFlags.COLLIDE_SHAPES``. Non-MESH shapes in the list are skipped.
            raise_on_failure: raise (``RuntimeError``) when a shape cannot be approximated
                (e.g. a flat mesh has no convex hull); otherwise warn and leave it unchanged.
            keep_visual_shapes: keep the original mesh as a visual-only shape (no shape / particle
                collision, visible) and add the approximation as a collision-only (invisible)
                shape on the same body with the same transform; default: replace in place.
            **remeshing_kwargs: passed to ``coacd.run_coacd`` / ``vhacdx.compute_vhacd``;
                ``"convex_hull"`` accepts ``maxhullvert`` (overrides ``Mesh.maxhullvert``).

        Returns:
            The indices of the shapes that were approximated.

        Differences from the reference engine: the remeshing methods ``"ftetwild"``,
        ``"alphashape"``, ``"quadratic"`` and ``"poisson"`` are not available (``ValueError``);
        ``"vhacd"`` uses ``vhacdx`` directly. As in the reference, body mass and inertia are not
        recomputed. Shapes are replaced in place or appended, never removed. See
        :mod:`armillary.sim.mesh_approximation`.
        """
        from .mesh_approximation import approximate_meshes as _approximate  # noqa: PLC0415

        return _approximate(self, method, shape_indices, raise_on_failure, keep_visual_shapes, **remeshing_kwargs)


def _quat_between(a, b) -> tuple[float, float, float, float]:
    """Unit quaternion (xyzw) rotating unit vector ``a`` onto unit vector ``b``."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    d = float(np.dot(a, b))
    if d > 1.0 - 1e-12:
        return (0.0, 0.0, 0.0, 1.0)
    if d < -1.0 + 1e-12:
        axis = np.cross(a, (1.0, 0.0, 0.0))
        if np.linalg.norm(axis) < 1e-6:
            axis = np.cross(a, (0.0, 1.0, 0.0))
        axis /= np.linalg.norm(axis)
        return (float(axis[0]), float(axis[1]), float(axis[2]), 0.0)
    c = np.cross(a, b)
    q = np.array([c[0], c[1], c[2], 1.0 + d])
    q /= np.linalg.norm(q)
    return tuple(float(v) for v in q)

"""Tiled camera sensor: a Warp ray caster rendering every camera of every world in one launch.

Frames and conventions (see ``docs/camera.md``):

* Camera frame: +X right, +Y up, the camera looks along -Z (USD / OpenGL). ``camera_transforms``
  ``(camera_count, world_count)`` of ``wp.transformf`` map camera to world; positions in meters,
  quaternions xyzw.
* ``camera_rays`` ``(camera_count, height, width, 2)`` of ``wp.vec3f``: ``[..., 0]`` the ray origin
  and ``[..., 1]`` the unit direction, in the camera frame. Row 0 is the top of the image.
* Every output image has shape ``(world_count, camera_count, height, width)``: packed colour and
  albedo ``uint32`` (``R | G << 8 | B << 16 | A << 24``; display sRGB bytes by default, linear with
  ``RenderConfig(output_color_space=ColorSpace.LINEAR)``), linear ``hdr_color`` ``vec3f``, ray
  ``depth`` and ``forward_depth`` [m] ``float32``, world-frame unit ``normal`` ``vec3f``, and
  ``shape_index`` ``uint32`` (the model shape id; ``0xFFFFFFFE`` a particle, ``0xFFFFFFFD`` a cloth
  triangle; misses get ``ClearData.clear_shape_index``).
* Shading, in linear light: ``albedo * (ambient + sum over lights of max(0, n . -light_dir))`` with
  the hemisphere ambient ``0.15 + 0.1 * (n . up)`` (``RenderConfig.enable_ambient_lighting``) and
  unit-intensity white directional lights (:meth:`SensorTiledCamera.Utils.create_default_light`).
  Albedo is the shape's display sRGB colour (``Mesh.color`` when the mesh has one, else
  ``Model.shape_color``; ``Model.tri_color`` for cloth) converted to linear, times the mesh's
  base-colour texture when textures are enabled.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import warnings

import numpy as np
import warp as wp

from ..sim.enums import GeoType, ShapeFlags
from ..utils.color import ColorSpace, color_srgb_to_linear
from . import raycast_kernels as K

__all__ = ["SensorTiledCamera"]

_NO_SHAPE = 0xFFFFFFFF
_DEPRECATED_UNSET = object()

#: display sRGB colour of particles (the model stores none)
PARTICLE_COLOR = (0.7, 0.7, 0.7)


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _check_size(width, height, what: str):
    for name, v in (("width", width), ("height", height)):
        if not _is_int(v) or int(v) < 1:
            raise ValueError(f"{what}: {name}={v!r} must be a positive integer [px]")
    return int(width), int(height)


def _check_count(n, what: str):
    if not _is_int(n) or int(n) < 1:
        raise ValueError(f"{what}: camera_count={n!r} must be a positive integer")
    return int(n)


def _pack_rgba(rgba) -> int:
    r, g, b, a = (int(x) & 255 for x in rgba)
    return r | (g << 8) | (b << 16) | (a << 24)


def _unpack_rgba(v: int):
    v = int(v)
    return [(v >> (8 * k)) & 255 for k in range(4)]


def _srgb_packed_to_linear_packed(v: int) -> int:
    """Packed display sRGB RGBA -> packed linear RGBA (alpha unchanged, bytes rounded)."""
    r, g, b, a = _unpack_rgba(v)
    lin = color_srgb_to_linear((r / 255.0, g / 255.0, b / 255.0))
    return _pack_rgba([int(min(max(c, 0.0), 1.0) * 255.0 + 0.5) for c in lin] + [a])


class SensorTiledCamera:
    """Ray-traced colour, depth, normal, albedo and segmentation images of every world at once.

    Args:
        model: the :class:`armillary.Model` to render (its device is the render device).
        default_render_config: :class:`RenderConfig` used when :meth:`update` gets none.
        config: deprecated alias of ``default_render_config``.
        load_textures: prepare the base-colour textures of meshes (``Mesh.texture`` with
            ``Mesh.uvs``) for ``RenderConfig.enable_textures``.

    Usage::

        sensor = SensorTiledCamera(model)
        rays = sensor.utils.compute_camera_rays_pinhole(width, height, camera_fovs=math.radians(60))
        color = sensor.utils.create_color_image_output(width, height)
        sensor.update(state, camera_transforms, rays, color_image=color)

    Shapes without ``ShapeFlags.VISIBLE`` are not rendered; visible GAUSSIAN shapes (splats, not
    implemented) raise ``ValueError`` here. All device work happens in
    :meth:`update` as kernel launches and BVH refits on buffers allocated here, so an update can be
    captured in a CUDA graph; images stay Warp arrays on the model's device.
    """

    class RenderLightType(enum.IntEnum):
        """Light types (only ``DIRECTIONAL`` lights are created by this sensor)."""

        SPOTLIGHT = 0
        DIRECTIONAL = 1

    class RenderOrder(enum.IntEnum):
        """Thread-to-pixel mapping hint; images do not depend on it (armillary renders one pixel per
        thread on CUDA and one image row per thread on the CPU, whatever the value)."""

        PIXEL_PRIORITY = 0
        VIEW_PRIORITY = 1
        TILED = 2

    class TextureProjectionMode(enum.IntEnum):
        """Projection of textures onto shapes without UVs. Not implemented: only the default
        (``CUBIC``) is accepted, and a textured mesh without ``uvs`` raises when textures are
        enabled (see :meth:`SensorTiledCamera.update`)."""

        CUBIC = 0
        TRIPLANAR = 1

    class GaussianRenderMode(enum.IntEnum):
        """Gaussian splat quality. Gaussian splats are not rendered by this sensor: a model with
        visible GAUSSIAN shapes raises at construction; only the default (``FAST``) is accepted."""

        FAST = 0
        QUALITY = 1

    @dataclasses.dataclass
    class RenderConfig:
        """Render settings shared across all worlds.

        Attributes:
            enable_global_world: also render global shapes (world -1), e.g. the ground plane.
            enable_textures: multiply base colours by mesh base-colour textures.
            texture_projection_mode: :class:`TextureProjectionMode`; only the default ``CUBIC``
                (projected textures are not implemented: textured meshes need per-vertex uvs).
            enable_shadows: cast shadow rays toward lights whose shadow flag is set.
            enable_ambient_lighting: add the hemisphere ambient term.
            enable_particles: render free particles (not part of a cloth triangle) as spheres.
            enable_backface_culling: ignore hits on the inside of solids / back of triangles.
            enable_fast_math: performance hint without effect on the images (the kernels are always
                compiled with precise math).
            output_color_space: :class:`armillary.utils.ColorSpace` of packed colour / albedo bytes.
            render_order, tile_width, tile_height: thread-mapping hints, validated, without effect
                on the images (or on armillary's thread mapping).
            max_distance: farthest hit distance [m].
            gaussians_mode, gaussians_min_transmittance, gaussians_max_num_hits: Gaussian-splat
                settings; only their defaults (FAST, 0.49, 20) are accepted, since this sensor does
                not render splats (a model with visible GAUSSIAN shapes raises at construction).
        """

        enable_global_world: bool = True
        enable_textures: bool = False
        texture_projection_mode: int = 0
        enable_shadows: bool = False
        enable_ambient_lighting: bool = True
        enable_particles: bool = True
        enable_backface_culling: bool = True
        enable_fast_math: bool = True
        output_color_space: ColorSpace = ColorSpace.SRGB
        render_order: int = 0
        tile_width: int = 16
        tile_height: int = 8
        max_distance: float = 1000.0
        gaussians_mode: int = 0
        gaussians_min_transmittance: float = 0.49
        gaussians_max_num_hits: int = 20

    @dataclasses.dataclass
    class ClearData:
        """Values written to pixels whose ray hits nothing. ``clear_color`` / ``clear_albedo`` are
        packed display sRGB RGBA (converted to linear when linear output is requested);
        ``clear_depth`` [m]; ``clear_normal`` a vec3."""

        clear_color: int = 0
        clear_depth: float = 0.0
        clear_shape_index: int = _NO_SHAPE
        clear_normal: tuple = (0.0, 0.0, 0.0)
        clear_albedo: int = 0

    DEFAULT_CLEAR_DATA = ClearData()
    GRAY_CLEAR_DATA = ClearData(clear_color=_pack_rgba((102, 102, 102, 255)), clear_albedo=_pack_rgba((0, 0, 0, 255)))

    def __init__(self, model, *, default_render_config=None, config=_DEPRECATED_UNSET, load_textures: bool = True):
        if config is not _DEPRECATED_UNSET:
            warnings.warn("SensorTiledCamera(config=...) is deprecated; use default_render_config=", DeprecationWarning,
                          stacklevel=2)  # fmt: skip
            if default_render_config is None:
                default_render_config = config
        if default_render_config is None:
            default_render_config = SensorTiledCamera.RenderConfig()
        self._check_config(default_render_config, "SensorTiledCamera: default_render_config")
        if getattr(model, "shape_type", None) is None and int(getattr(model, "shape_count", 0) or 0) > 0:
            raise ValueError("SensorTiledCamera: model must be a finalized armillary.Model")
        self.model = model
        self.device = model.device
        self._default_render_config = default_render_config
        self._default_clear_data = SensorTiledCamera.ClearData()
        self._load_textures = bool(load_textures)
        self._keep = []  # objects whose ids are referenced by device structs
        self._span = 0  # pixels per render thread; 0: automatic (row on the CPU, 1 on CUDA)
        self._build_scene()
        self._utils = SensorTiledCamera.Utils(self)
        self.set_lights([])

    # ------------------------------------------------------------------ properties
    @property
    def default_render_config(self):
        """The :class:`RenderConfig` used when :meth:`update` gets none."""
        return self._default_render_config

    @property
    def render_config(self):
        """Deprecated alias of :attr:`default_render_config`."""
        warnings.warn("SensorTiledCamera.render_config is deprecated; use default_render_config", DeprecationWarning,
                      stacklevel=2)  # fmt: skip
        return self._default_render_config

    @property
    def default_clear_data(self):
        """The :class:`ClearData` used when :meth:`update` gets none."""
        return self._default_clear_data

    @property
    def utils(self):
        """Helpers: output buffers, camera rays, image conversion, lights (:class:`Utils`)."""
        return self._utils

    @property
    def world_count(self) -> int:
        return self._world_count

    # ------------------------------------------------------------------ scene construction
    def _build_scene(self):
        m = self.model
        dev = self.device
        W = int(getattr(m, "world_count", 1) or 1)
        self._world_count = W
        G = W + 1  # groups: worlds, then the global world
        n = int(m.shape_count)
        nn = max(n, 1)
        types = m.shape_type.numpy() if n else np.zeros(0, np.int32)
        flags = m.shape_flags.numpy() if n else np.zeros(0, np.int32)
        scale = m.shape_scale.numpy().reshape(-1, 3) if n else np.zeros((0, 3), np.float32)
        world = m.shape_world.numpy() if n else np.zeros(0, np.int32)
        group = np.where(world < 0, W, world).astype(np.int32)
        if np.any(group > W):
            bad = int(np.argmax(group > W))
            raise ValueError(f"SensorTiledCamera: shape {bad} has world {int(world[bad])} >= world_count {W}")
        sources = list(getattr(m, "shape_source", [])) + [None] * n

        mesh_id = np.zeros(nn, np.uint64)
        override = np.zeros((nn, 4), np.float32)
        tex_index = np.full(nn, -1, np.int32)
        uv_start = np.full(nn, -1, np.int32)
        tex_xform = np.zeros((nn, 2, 3), np.float32)
        tex_xform[:, 0, 0] = 1.0
        tex_xform[:, 1, 1] = 1.0
        meshes = {}
        uv_chunks, uv_total = [], 0
        uv_of = {}
        tex_chunks, tex_start, tex_size, tex_total = [], [], [], 0
        tex_of = {}
        bounded, centers, radii, unbounded = [], [], [], [[] for _ in range(G)]
        self.skipped_shapes = []  # (shape, type name) of visible shapes this sensor cannot draw: an error
        self._untextured = []  # shapes whose mesh has a texture but no uvs
        for s in range(n):
            if not int(flags[s]) & int(ShapeFlags.VISIBLE):
                continue
            t = int(types[s])
            sc = scale[s].astype(np.float64)
            src = sources[s]
            center = np.zeros(3)
            if t == GeoType.SPHERE:
                half = np.full(3, sc[0])
            elif t in (GeoType.BOX, GeoType.ELLIPSOID):
                half = np.abs(sc)
            elif t == GeoType.CAPSULE:
                half = np.array([sc[0], sc[0], sc[0] + sc[1]])
            elif t == GeoType.CYLINDER:
                rmax = sc[0]
                if sc[2] > 0.0:
                    rmax = max(sc[0] - math.sqrt(max(sc[2] ** 2 - sc[1] ** 2, 0.0)) + sc[2], sc[0])
                half = np.array([rmax, rmax, sc[1]])
            elif t == GeoType.CONE:
                half = np.array([sc[0], sc[0], sc[1]])
            elif t == GeoType.PLANE:
                if sc[0] > 0.0 and sc[1] > 0.0:
                    half = np.array([0.5 * sc[0], 0.5 * sc[1], 0.0])
                else:
                    unbounded[group[s]].append(s)
                    continue
            elif t in (GeoType.MESH, GeoType.CONVEX_MESH, GeoType.HFIELD):
                if src is None:
                    raise ValueError(f"SensorTiledCamera: shape {s} ({GeoType(t).name}) has no source geometry")
                key = id(src)
                if key not in meshes:
                    meshes[key] = self._make_mesh(src, t, s)
                wmesh, verts = meshes[key]
                mesh_id[s] = wmesh.id
                pts = verts * sc[None, :]
                lo, hi = pts.min(axis=0), pts.max(axis=0)
                center = 0.5 * (lo + hi)  # scaled shape-local frame
                half = 0.5 * (hi - lo)
                if t != GeoType.HFIELD:
                    color = getattr(src, "color", None)
                    if color is not None:
                        override[s, :3] = np.asarray(color, np.float32)[:3]
                        override[s, 3] = 1.0
                    if getattr(src, "texture", None) is not None and getattr(src, "uvs", None) is None:
                        self._untextured.append(s)  # needs a projection (texture_projection_mode)
                    if self._load_textures and getattr(src, "texture", None) is not None and getattr(src, "uvs", None) is not None:
                        if key not in uv_of:
                            uvs = np.asarray(src.uvs, np.float32).reshape(-1, 2)
                            if len(uvs) != len(verts):
                                raise ValueError(f"SensorTiledCamera: shape {s}: mesh has {len(uvs)} uvs for {len(verts)} vertices")
                            uv_of[key] = uv_total
                            uv_chunks.append(uvs)
                            uv_total += len(uvs)
                            texels = _texture_texels(src.texture, s)
                            tex_of[key] = len(tex_start)
                            tex_start.append(tex_total)
                            tex_size.append((texels.shape[1], texels.shape[0]))
                            tex_chunks.append(texels.reshape(-1, 3))
                            tex_total += texels.shape[0] * texels.shape[1]
                        uv_start[s] = uv_of[key]
                        tex_index[s] = tex_of[key]
                        tx = np.asarray(getattr(src, "texture_transform", ((1, 0, 0), (0, 1, 0))), np.float32)
                        if tx.shape != (2, 3):
                            raise ValueError(f"SensorTiledCamera: shape {s}: Mesh.texture_transform must be 2x3, got {tx.shape}")
                        tex_xform[s] = tx
            else:
                self.skipped_shapes.append((s, GeoType(t).name if t in iter(GeoType) else str(t)))
                continue
            bounded.append(s)
            centers.append(center)
            radii.append(half)
        if self.skipped_shapes:
            listed = ", ".join(f"shape {i} ({name})" for i, name in self.skipped_shapes[:5])
            more = f" and {len(self.skipped_shapes) - 5} more" if len(self.skipped_shapes) > 5 else ""
            raise ValueError(f"SensorTiledCamera: {listed}{more} cannot be rendered (Gaussian splats are not "
                             "implemented; renderable types: PLANE, HFIELD, SPHERE, CAPSULE, ELLIPSOID, CYLINDER, "
                             "BOX, MESH, CONE, CONVEX_MESH); clear ShapeFlags.VISIBLE on them to render the "
                             "rest")  # fmt: skip

        def A(data, dtype, fallback):
            a = np.asarray(data)
            if a.size == 0:
                a = np.asarray(fallback)
            return wp.array(a, dtype=dtype, device=dev)

        sc = K.SceneData()
        sc.world_count = W
        sc.shape_type = A(types.astype(np.int32), int, [0])
        sc.shape_scale = A(scale.astype(np.float32), wp.vec3, [[0, 0, 0]])
        self._shape_xform = wp.zeros(nn, dtype=wp.transform, device=dev)
        sc.shape_xform = self._shape_xform
        sc.shape_color = m.shape_color if n else wp.zeros(1, dtype=wp.vec3, device=dev)
        sc.shape_color_override = wp.array(override, dtype=wp.vec4, device=dev)
        sc.shape_mesh = wp.array(mesh_id, dtype=wp.uint64, device=dev)
        sc.shape_tex = wp.array(tex_index, dtype=int, device=dev)
        sc.shape_uv_start = wp.array(uv_start, dtype=int, device=dev)
        sc.shape_tex_xform = wp.array(tex_xform, dtype=wp.vec3, device=dev)
        self._meshes = [v[0] for v in meshes.values()]

        nb = len(bounded)
        self._group_count = G
        self._shape_color = sc.shape_color
        self._shape_color_override = sc.shape_color_override
        self._shape_albedo = wp.zeros(nn, dtype=wp.vec3, device=dev)
        sc.shape_albedo = self._shape_albedo
        self._shape_plane = wp.zeros(nn, dtype=wp.vec4, device=dev)
        sc.shape_plane = self._shape_plane
        self._group_lower = wp.zeros(G, dtype=wp.vec3, device=dev)
        self._group_upper = wp.zeros(G, dtype=wp.vec3, device=dev)
        sc.group_lower = self._group_lower
        sc.group_upper = self._group_upper
        self._bounded = A(np.asarray(bounded, np.int32), int, [0])
        self._bound_center = A(np.asarray(centers, np.float32).reshape(-1, 3), wp.vec3, [[0, 0, 0]])
        self._bound_half = A(np.asarray(radii, np.float32).reshape(-1, 3), wp.vec3, [[0, 0, 0]])
        self._bound_count = nb
        has_b = np.zeros(G, np.int32)
        g_b = group[np.asarray(bounded, np.int64)] if nb else np.zeros(0, np.int32)
        self._bound_group = A(g_b.astype(np.int32), int, [0])
        self._group_root = wp.full(G, -1, dtype=int, device=dev)
        sc.group_root = self._group_root
        if nb:
            has_b[np.unique(g_b)] = 1
            self._shape_lowers = wp.zeros(nb, dtype=wp.vec3, device=dev)
            self._shape_uppers = wp.zeros(nb, dtype=wp.vec3, device=dev)
            self._refresh_shape_poses(None)
            self._shape_bvh = wp.Bvh(self._shape_lowers, self._shape_uppers,
                                     groups=wp.array(g_b.astype(np.int32), dtype=wp.int32, device=dev))  # fmt: skip
            sc.shape_bvh = self._shape_bvh.id
            # refits keep the tree's topology, so each group's root node is found once here
            wp.launch(K.group_root_kernel, dim=G, inputs=[self._shape_bvh.id, wp.array(has_b, dtype=int, device=dev)],
                      outputs=[self._group_root], device=dev)  # fmt: skip
        else:
            self._shape_bvh = None
            sc.shape_bvh = wp.uint64(0)
            self._refresh_shape_poses(None)
        sc.bounded_shape = self._bounded
        ustart = np.zeros(G + 1, np.int32)
        ustart[1:] = np.cumsum([len(u) for u in unbounded])
        sc.unbounded_start = wp.array(ustart, dtype=int, device=dev)
        sc.unbounded_shape = A(np.asarray([s for u in unbounded for s in u], np.int32), int, [0])

        sc.uvs = A(np.concatenate(uv_chunks) if uv_chunks else np.zeros((0, 2), np.float32), wp.vec2, [[0, 0]])
        sc.tex_data = A(np.concatenate(tex_chunks) if tex_chunks else np.zeros((0, 3), np.float32), wp.vec3, [[0, 0, 0]])
        sc.tex_start = A(np.asarray(tex_start, np.int32), int, [0])
        sc.tex_size = A(np.asarray(tex_size, np.int32).reshape(-1, 2), wp.vec2i, [[1, 1]])

        self._build_particles(sc, G)
        thr = wp.zeros(257, dtype=float, device=dev)
        wp.launch(K.srgb_threshold_kernel, dim=257, outputs=[thr], device=dev)
        sc.srgb_lut_base = wp.zeros(K.SRGB_LUT_N + 1, dtype=wp.uint32, device=dev)
        sc.srgb_lut_thr = wp.zeros(K.SRGB_LUT_N + 1, dtype=float, device=dev)
        wp.launch(K.srgb_lut_kernel, dim=K.SRGB_LUT_N + 1, inputs=[thr], outputs=[sc.srgb_lut_base, sc.srgb_lut_thr],
                  device=dev)  # fmt: skip
        self._scene = sc

    def _make_mesh(self, src, t: int, s: int):
        if t == GeoType.HFIELD:
            data = np.asarray(src.data, np.float32).reshape(src.nrow, src.ncol)
            nrow, ncol = src.nrow, src.ncol
            xs = np.linspace(-src.hx, src.hx, ncol, dtype=np.float32)
            ys = np.linspace(-src.hy, src.hy, nrow, dtype=np.float32)
            X, Y = np.meshgrid(xs, ys)  # (nrow, ncol): row i -> y, column j -> x
            verts = np.stack([X, Y, data], axis=-1).reshape(-1, 3).astype(np.float32)
            i, j = np.meshgrid(np.arange(nrow - 1), np.arange(ncol - 1), indexing="ij")
            v00 = (i * ncol + j).ravel()
            v01 = v00 + 1
            v10 = v00 + ncol
            v11 = v10 + 1
            idx = np.stack([v00, v01, v11, v00, v11, v10], axis=-1).reshape(-1).astype(np.int32)  # CCW seen from +z
        else:
            verts = np.asarray(src.vertices, np.float32).reshape(-1, 3)
            idx = np.asarray(src.indices, np.int32).reshape(-1)
            if len(idx) == 0:
                raise ValueError(f"SensorTiledCamera: shape {s} ({GeoType(t).name}) mesh has no triangles")
        pts = wp.array(verts, dtype=wp.vec3, device=self.device)
        ind = wp.array(idx, dtype=wp.int32, device=self.device)
        mesh = wp.Mesh(points=pts, indices=ind)
        self._keep += [pts, ind]
        return mesh, verts.astype(np.float64)

    def _build_particles(self, sc, G: int):
        m = self.model
        dev = self.device
        W = self._world_count
        npart = int(getattr(m, "particle_count", 0) or 0)
        ntri = int(getattr(m, "tri_count", 0) or 0)
        pworld = m.particle_world.numpy() if npart else np.zeros(0, np.int32)
        pgroup = np.where(pworld < 0, W, pworld).astype(np.int32)
        in_tri = np.zeros(npart, bool)
        tris = m.tri_indices.numpy().reshape(-1, 3) if ntri else np.zeros((0, 3), np.int32)
        if ntri:
            in_tri[tris.ravel()] = True
        radius = m.particle_radius.numpy() if npart else np.zeros(0, np.float32)
        free = np.nonzero(~in_tri & (radius > 0.0))[0].astype(np.int32)
        self._particle_count = npart
        self._free_particles = len(free)
        has_p = np.zeros(G, np.int32)
        sc.particle_color = wp.vec3(*PARTICLE_COLOR)
        sc.particle_radius = m.particle_radius if npart else wp.zeros(1, dtype=float, device=dev)
        self._particle_q_model = m.particle_q if npart else wp.zeros(1, dtype=wp.vec3, device=dev)
        sc.particle_q = self._particle_q_model
        if len(free):
            has_p[np.unique(pgroup[free])] = 1
            self._particle_item = wp.array(free, dtype=int, device=dev)
            self._p_lowers = wp.zeros(len(free), dtype=wp.vec3, device=dev)
            self._p_uppers = wp.zeros(len(free), dtype=wp.vec3, device=dev)
            self._refresh_particle_bounds(self._particle_q_model)
            self._particle_bvh = wp.Bvh(self._p_lowers, self._p_uppers,
                                        groups=wp.array(pgroup[free], dtype=wp.int32, device=dev))  # fmt: skip
            sc.particle_bvh = self._particle_bvh.id
            sc.particle_item = self._particle_item
        else:
            self._particle_bvh = None
            sc.particle_bvh = wp.uint64(0)
            sc.particle_item = wp.zeros(1, dtype=int, device=dev)
        sc.group_has_particles = wp.array(has_p, dtype=int, device=dev)
        has_c = np.zeros(G, np.int32)
        if ntri:
            tgroup = pgroup[tris[:, 0]]
            has_c[np.unique(tgroup)] = 1
            self._cloth_points = wp.clone(m.particle_q)
            self._cloth_indices = wp.array(tris.reshape(-1).astype(np.int32), dtype=wp.int32, device=dev)
            self._cloth_mesh = wp.Mesh(points=self._cloth_points, indices=self._cloth_indices,
                                       groups=wp.array(tgroup.astype(np.int32), dtype=wp.int32, device=dev))  # fmt: skip
            sc.cloth_mesh = self._cloth_mesh.id
            sc.tri_color = m.tri_color
        else:
            self._cloth_mesh = None
            sc.cloth_mesh = wp.uint64(0)
            sc.tri_color = wp.zeros(1, dtype=wp.vec3, device=dev)
        sc.group_has_cloth = wp.array(has_c, dtype=int, device=dev)

    # ------------------------------------------------------------------ per-frame refresh
    def _refresh_shape_poses(self, body_q):
        """Shape world poses, linear albedos, bounded shapes' boxes and per-group boxes (2 launches)."""
        m = self.model
        n = int(m.shape_count)
        if body_q is None:
            body_q = m.body_q if int(m.body_count) else None
        if body_q is None:
            body_q = self._dummies()["q"]
        shape_body = m.shape_body if n else self._dummies()["i"]
        shape_transform = m.shape_transform if n else self._dummies()["q"]
        wp.launch(K.shape_pose_kernel, dim=max(n, self._group_count),
                  inputs=[n, self._group_count, shape_body, shape_transform, body_q, self._shape_color,
                          self._shape_color_override],
                  outputs=[self._shape_xform, self._shape_albedo, self._shape_plane, self._group_lower,
                           self._group_upper],
                  device=self.device)  # fmt: skip
        if self._bound_count:
            wp.launch(K.shape_bounds_kernel, dim=self._bound_count,
                      inputs=[self._bounded, self._bound_group, self._bound_center, self._bound_half,
                              self._shape_xform],
                      outputs=[self._shape_lowers, self._shape_uppers, self._group_lower, self._group_upper],
                      device=self.device)  # fmt: skip

    def _refresh_particle_bounds(self, particle_q):
        wp.launch(K.particle_bounds_kernel, dim=self._free_particles,
                  inputs=[self._particle_item, particle_q, self.model.particle_radius],
                  outputs=[self._p_lowers, self._p_uppers], device=self.device)  # fmt: skip

    def sync_transforms(self, state) -> None:
        """Move every acceleration structure to ``state``: shape poses from ``state.body_q``,
        particle spheres and cloth triangles from ``state.particle_q`` (refits, no allocation).
        :meth:`update` calls it when given a state."""
        body_q = getattr(state, "body_q", None) if state is not None else None
        if body_q is not None and int(self.model.body_count):
            self._check_state_array(body_q, "body_q", int(self.model.body_count), wp.transform)
        self._refresh_shape_poses(body_q if int(self.model.body_count) else None)
        if self._shape_bvh is not None:
            self._shape_bvh.refit()
        pq = getattr(state, "particle_q", None) if state is not None else None
        if pq is None:
            pq = self._particle_q_model
        elif self._particle_count:
            self._check_state_array(pq, "particle_q", self._particle_count, wp.vec3)
        self._scene.particle_q = pq
        if self._particle_bvh is not None:
            self._refresh_particle_bounds(pq)
            self._particle_bvh.refit()
        if self._cloth_mesh is not None:
            wp.copy(self._cloth_points, pq)
            self._cloth_mesh.refit()

    def _check_state_array(self, a, name, n, dtype):
        if not isinstance(a, wp.array) or a.dtype != dtype or a.shape[0] != n or a.device != self.device:
            raise ValueError(f"SensorTiledCamera.update: state.{name} must be a wp.array of {n} {dtype.__name__} on "
                             f"{self.device}, got {_describe(a)}")  # fmt: skip

    # ------------------------------------------------------------------ lights
    def set_lights(self, directions, cast_shadows=None, colors=None) -> None:
        """Replace the directional lights: ``directions`` ``(L, 3)`` (world frame, the direction the
        light travels; normalized here), ``cast_shadows`` ``(L,)`` bools (default True), ``colors``
        ``(L, 3)`` linear RGB intensities (default white 1.0). An empty list leaves ambient only."""
        d = np.asarray(directions, np.float64).reshape(-1, 3) if len(directions) else np.zeros((0, 3))
        nrm = np.linalg.norm(d, axis=1) if len(d) else np.zeros(0)
        if len(d) and (not np.all(np.isfinite(d)) or np.any(nrm < 1e-12)):
            raise ValueError(f"SensorTiledCamera.set_lights: light directions must be finite and non-zero, got {d.tolist()}")
        L = len(d)
        shadows = np.ones(L, np.int32) if cast_shadows is None else np.asarray(cast_shadows, bool).astype(np.int32).reshape(-1)
        cols = np.ones((L, 3), np.float32) if colors is None else np.asarray(colors, np.float32).reshape(-1, 3)
        if len(shadows) != L or len(cols) != L:
            raise ValueError(f"SensorTiledCamera.set_lights: {L} directions but {len(shadows)} shadow flags and {len(cols)} colors")
        dev = self.device
        self._light_count = L
        self._light_dir = wp.array((d / nrm[:, None]).astype(np.float32) if L else np.zeros((1, 3), np.float32), dtype=wp.vec3, device=dev)
        self._light_color = wp.array(cols if L else np.zeros((1, 3), np.float32), dtype=wp.vec3, device=dev)
        self._light_shadows = wp.array(shadows if L else np.zeros(1, np.int32), dtype=int, device=dev)

    # ------------------------------------------------------------------ validation
    @staticmethod
    def _check_config(rc, what: str):
        if not isinstance(rc, SensorTiledCamera.RenderConfig):
            raise ValueError(f"{what} must be a SensorTiledCamera.RenderConfig, got {type(rc).__name__}")
        try:
            ColorSpace(int(rc.output_color_space))
        except (TypeError, ValueError):
            raise ValueError(f"{what}: output_color_space={rc.output_color_space!r} must be one of "
                             f"{[c.name for c in ColorSpace]}") from None  # fmt: skip
        md = rc.max_distance
        if not isinstance(md, (int, float, np.floating, np.integer)) or not (md > 0.0) or not math.isfinite(md):
            raise ValueError(f"{what}: max_distance={md!r} must be a positive finite distance [m]")
        for name, enum_type in (("render_order", SensorTiledCamera.RenderOrder),
                                ("texture_projection_mode", SensorTiledCamera.TextureProjectionMode),
                                ("gaussians_mode", SensorTiledCamera.GaussianRenderMode)):  # fmt: skip
            try:
                enum_type(int(getattr(rc, name)))
            except (TypeError, ValueError):
                raise ValueError(f"{what}: {name}={getattr(rc, name)!r} must be one of {[e.name for e in enum_type]}") from None
        for name in ("tile_width", "tile_height"):
            v = getattr(rc, name)
            if not _is_int(v) or v < 1:
                raise ValueError(f"{what}: {name}={v!r} must be a positive integer")
        # settings that would change the images of features this sensor does not implement: only
        # their defaults are accepted (performance hints above are accepted with any valid value)
        if int(rc.texture_projection_mode) != SensorTiledCamera.TextureProjectionMode.CUBIC:
            raise NotImplementedError(f"{what}: texture_projection_mode={rc.texture_projection_mode!r} is not supported; "
                                      "projected textures are not implemented, only the default "
                                      "TextureProjectionMode.CUBIC is accepted (give textured meshes per-vertex uvs)")  # fmt: skip
        defaults = SensorTiledCamera.RenderConfig()
        for name in ("gaussians_mode", "gaussians_min_transmittance", "gaussians_max_num_hits"):
            v, v0 = getattr(rc, name), getattr(defaults, name)
            if v != v0:
                raise NotImplementedError(f"{what}: {name}={v!r} is not supported; this sensor does not render "
                                          f"Gaussian splats, so only the default {name}={v0!r} is accepted")  # fmt: skip

    def _check_image(self, img, name, dtype, shape):
        if img is None:
            return
        if not isinstance(img, wp.array):
            raise ValueError(f"SensorTiledCamera.update: {name} must be a wp.array, got {type(img).__name__}")
        if img.dtype != dtype or img.ndim != 4 or tuple(img.shape) != shape or img.device != self.device:
            raise ValueError(f"SensorTiledCamera.update: {name} must have shape {shape} (world_count, camera_count, "
                             f"height, width), dtype {dtype.__name__}, device {self.device}; got {_describe(img)}")  # fmt: skip

    # ------------------------------------------------------------------ rendering
    def update(
        self,
        state,
        camera_transforms=None,
        camera_rays=None,
        *,
        color_image=None,
        hdr_color_image=None,
        depth_image=None,
        forward_depth_image=None,
        shape_index_image=None,
        normal_image=None,
        albedo_image=None,
        clear_data=None,
        render_config=None,
        kernel_block_dim: int = 64,
    ) -> None:
        """Render the requested images for every (world, camera) pair.

        Args:
            state: :class:`armillary.State` (``body_q``, ``particle_q``); ``None`` renders the
                model's initial configuration.
            camera_transforms: camera-to-world ``wp.array2d(dtype=wp.transformf)`` of shape
                ``(camera_count, world_count)`` on the model's device.
            camera_rays: camera-frame rays ``(camera_count, height, width, 2)`` ``vec3f``
                (origin, unit direction), e.g. from :meth:`Utils.compute_camera_rays_pinhole`.
            color_image, hdr_color_image, depth_image, forward_depth_image, shape_index_image,
            normal_image, albedo_image: outputs ``(world_count, camera_count, height, width)``
                (see the module docstring); ``None`` skips a channel.
            clear_data: :class:`ClearData` for missed pixels (default :attr:`default_clear_data`).
            render_config: :class:`RenderConfig` (default :attr:`default_render_config`).
            kernel_block_dim: threads per block of the render launch (CUDA).
        """
        rc = self._default_render_config if render_config is None else render_config
        self._check_config(rc, "SensorTiledCamera.update: render_config")
        if rc.enable_textures and self._untextured:
            raise NotImplementedError(f"SensorTiledCamera.update: enable_textures with shapes {self._untextured[:5]} whose "
                                      "mesh has a texture but no uvs: projected textures (texture_projection_mode) are "
                                      "not implemented; give the meshes per-vertex uvs or disable enable_textures")  # fmt: skip
        cd = self._default_clear_data if clear_data is None else clear_data
        if not isinstance(cd, SensorTiledCamera.ClearData):
            raise ValueError(f"SensorTiledCamera.update: clear_data must be a SensorTiledCamera.ClearData, got {type(cd).__name__}")
        W = self._world_count
        if not isinstance(camera_transforms, wp.array):
            raise ValueError("SensorTiledCamera.update: camera_transforms must be a wp.array2d(dtype=wp.transformf) of "
                             f"shape (camera_count, world_count={W}), got {_describe(camera_transforms)}")  # fmt: skip
        if (camera_transforms.ndim != 2 or camera_transforms.dtype != wp.transformf or camera_transforms.shape[1] != W
                or camera_transforms.device != self.device):  # fmt: skip
            raise ValueError("SensorTiledCamera.update: camera_transforms must have shape (camera_count, world_count="
                             f"{W}), dtype transformf, device {self.device}; got {_describe(camera_transforms)}")  # fmt: skip
        C = camera_transforms.shape[0]
        if not isinstance(camera_rays, wp.array) or camera_rays.ndim != 4 or camera_rays.dtype != wp.vec3f or \
                camera_rays.shape[0] != C or camera_rays.shape[3] != 2 or camera_rays.device != self.device:
            raise ValueError(f"SensorTiledCamera.update: camera_rays must be a wp.array4d(dtype=wp.vec3f) of shape "
                             f"(camera_count={C}, height, width, 2) on {self.device}; got {_describe(camera_rays)}")  # fmt: skip
        H, Wd = camera_rays.shape[1], camera_rays.shape[2]
        shape = (W, C, H, Wd)
        outs = {
            "color_image": (color_image, wp.uint32),
            "hdr_color_image": (hdr_color_image, wp.vec3f),
            "depth_image": (depth_image, wp.float32),
            "forward_depth_image": (forward_depth_image, wp.float32),
            "shape_index_image": (shape_index_image, wp.uint32),
            "normal_image": (normal_image, wp.vec3f),
            "albedo_image": (albedo_image, wp.uint32),
        }
        for name, (img, dt) in outs.items():
            self._check_image(img, name, dt, shape)
        if not _is_int(kernel_block_dim) or kernel_block_dim < 1:
            raise ValueError(f"SensorTiledCamera.update: kernel_block_dim={kernel_block_dim!r} must be a positive integer")

        self.sync_transforms(state)

        srgb = int(ColorSpace(int(rc.output_color_space)) == ColorSpace.SRGB)
        clear_color = int(cd.clear_color) & 0xFFFFFFFF
        clear_albedo = int(cd.clear_albedo) & 0xFFFFFFFF
        if not srgb:
            clear_color = _srgb_packed_to_linear_packed(clear_color)
            clear_albedo = _srgb_packed_to_linear_packed(clear_albedo)
        p = K.RenderParams()
        p.max_t = float(rc.max_distance)
        p.cull = int(bool(rc.enable_backface_culling))
        p.particles = int(bool(rc.enable_particles))
        p.use_global = int(bool(rc.enable_global_world))
        p.textures = int(bool(rc.enable_textures))
        p.shadows = int(bool(rc.enable_shadows))
        p.ambient = int(bool(rc.enable_ambient_lighting))
        p.srgb = srgb
        up = np.zeros(3, np.float32)
        up[int(getattr(self.model, "up_axis", 2))] = 1.0
        p.up = wp.vec3(*up)
        p.light_count = self._light_count
        p.light_dir = self._light_dir
        p.light_color = self._light_color
        p.light_shadows = self._light_shadows
        dummy = self._dummies()
        p.want_color = int(color_image is not None)
        p.want_hdr = int(hdr_color_image is not None)
        p.want_depth = int(depth_image is not None)
        p.want_fdepth = int(forward_depth_image is not None)
        p.want_index = int(shape_index_image is not None)
        p.want_normal = int(normal_image is not None)
        p.want_albedo = int(albedo_image is not None)
        p.clear_color = wp.uint32(clear_color)
        p.clear_depth = float(cd.clear_depth)
        p.clear_index = wp.uint32(int(cd.clear_shape_index) & 0xFFFFFFFF)
        p.clear_normal = wp.vec3(*[float(c) for c in cd.clear_normal])
        p.clear_albedo = wp.uint32(clear_albedo)
        if W * C * H * Wd == 0:
            return
        # CPU: one thread per image row (the kernel's per-thread setup dominates a single ray); CUDA:
        # one thread per pixel
        p.span = self._span if self._span else (Wd if wp.get_device(self.device).is_cpu else 1)
        wp.launch(
            K.render_kernel,
            dim=(W, C, H, (Wd + p.span - 1) // p.span),
            inputs=[self._scene, p, camera_transforms, camera_rays],
            outputs=[
                dummy["u"] if color_image is None else color_image,
                dummy["v"] if hdr_color_image is None else hdr_color_image,
                dummy["f"] if depth_image is None else depth_image,
                dummy["f"] if forward_depth_image is None else forward_depth_image,
                dummy["u"] if shape_index_image is None else shape_index_image,
                dummy["v"] if normal_image is None else normal_image,
                dummy["u"] if albedo_image is None else albedo_image,
            ],
            device=self.device,
            block_dim=int(kernel_block_dim),
        )

    def _dummies(self):
        d = getattr(self, "_dummy", None)
        if d is None:
            dev = self.device
            d = {"u": wp.zeros((1, 1, 1, 1), dtype=wp.uint32, device=dev),
                 "v": wp.zeros((1, 1, 1, 1), dtype=wp.vec3, device=dev),
                 "f": wp.zeros((1, 1, 1, 1), dtype=wp.float32, device=dev),
                 "q": wp.zeros(1, dtype=wp.transform, device=dev),
                 "i": wp.zeros(1, dtype=int, device=dev)}  # fmt: skip
            self._dummy = d
        return d

    # ------------------------------------------------------------------ utilities
    class Utils:
        """Output buffers, camera rays, depth conversion, RGBA conversion and lights of one sensor."""

        def __init__(self, sensor, render_config=None):
            self._sensor = sensor

        # -- output buffers
        def _out(self, width, height, camera_count, dtype, what):
            width, height = _check_size(width, height, f"SensorTiledCamera.Utils.{what}")
            camera_count = _check_count(camera_count, f"SensorTiledCamera.Utils.{what}")
            s = self._sensor
            return wp.zeros((s.world_count, camera_count, height, width), dtype=dtype, device=s.device)

        def create_color_image_output(self, width: int, height: int, camera_count: int = 1):
            """Packed RGBA ``uint32`` image ``(world_count, camera_count, height, width)``."""
            return self._out(width, height, camera_count, wp.uint32, "create_color_image_output")

        def create_hdr_color_image_output(self, width: int, height: int, camera_count: int = 1):
            """Linear RGB ``vec3f`` image ``(world_count, camera_count, height, width)``."""
            return self._out(width, height, camera_count, wp.vec3f, "create_hdr_color_image_output")

        def create_depth_image_output(self, width: int, height: int, camera_count: int = 1):
            """Ray-distance depth [m] ``float32`` image ``(world_count, camera_count, height, width)``."""
            return self._out(width, height, camera_count, wp.float32, "create_depth_image_output")

        def create_forward_depth_image_output(self, width: int, height: int, camera_count: int = 1):
            """Forward (planar) depth [m] ``float32`` image ``(world_count, camera_count, height, width)``."""
            return self._out(width, height, camera_count, wp.float32, "create_forward_depth_image_output")

        def create_shape_index_image_output(self, width: int, height: int, camera_count: int = 1):
            """Shape id ``uint32`` image ``(world_count, camera_count, height, width)``."""
            return self._out(width, height, camera_count, wp.uint32, "create_shape_index_image_output")

        def create_normal_image_output(self, width: int, height: int, camera_count: int = 1):
            """World-frame normal ``vec3f`` image ``(world_count, camera_count, height, width)``."""
            return self._out(width, height, camera_count, wp.vec3f, "create_normal_image_output")

        def create_albedo_image_output(self, width: int, height: int, camera_count: int = 1):
            """Packed RGBA ``uint32`` unshaded colour ``(world_count, camera_count, height, width)``."""
            return self._out(width, height, camera_count, wp.uint32, "create_albedo_image_output")

        # -- rays
        def compute_camera_rays_pinhole(self, width: int, height: int, *, camera_fovs=None, focal_length=None,
                                        horizontal_aperture=None, vertical_aperture=None,
                                        horizontal_aperture_offset=0.0, vertical_aperture_offset=0.0,
                                        out_rays=None, camera_index: int = 0):  # fmt: skip
            """Camera-frame pinhole rays ``(camera_count, height, width, 2)`` ``vec3f`` (origin 0, unit
            direction through each pixel centre; -Z forward, +Y up, row 0 at the top).

            Either ``camera_fovs`` (vertical field of view [rad] in (0, pi), scalar or one per camera)
            or all of ``focal_length``, ``horizontal_aperture``, ``vertical_aperture`` (any one length
            unit; offsets in the same unit) per camera. ``out_rays`` receives the cameras from
            ``camera_index`` on instead of a new array.
            """
            what = "SensorTiledCamera.Utils.compute_camera_rays_pinhole"
            width, height = _check_size(width, height, what)
            aperture = [focal_length, horizontal_aperture, vertical_aperture]
            if any(a is not None for a in aperture):
                if any(a is None for a in aperture):
                    raise ValueError(f"{what}: aperture mode needs focal_length, horizontal_aperture and "
                                     f"vertical_aperture; got {aperture}")  # fmt: skip
                f = _per_camera(focal_length, "focal_length", what)
                ha = _per_camera(horizontal_aperture, "horizontal_aperture", what)
                va = _per_camera(vertical_aperture, "vertical_aperture", what)
                n = max(len(f), len(ha), len(va))
                f, ha, va = (np.broadcast_to(a, n) if len(a) == 1 else a for a in (f, ha, va))
                if len({len(f), len(ha), len(va)}) != 1:
                    raise ValueError(f"{what}: focal_length, horizontal_aperture, vertical_aperture lengths differ")
                for name, a in (("focal_length", f), ("horizontal_aperture", ha), ("vertical_aperture", va)):
                    if np.any(a <= 0.0):
                        raise ValueError(f"{what}: {name}={a.tolist()} must be > 0")
                ho = np.broadcast_to(_per_camera(horizontal_aperture_offset, "horizontal_aperture_offset", what, False), n)
                vo = np.broadcast_to(_per_camera(vertical_aperture_offset, "vertical_aperture_offset", what, False), n)
                sx, sy = 0.5 * ha / f, 0.5 * va / f
                ox, oy = ho / f, vo / f
            else:
                if camera_fovs is None:
                    raise ValueError(f"{what}: give camera_fovs [rad] or focal_length/horizontal_aperture/vertical_aperture")
                fov = _per_camera(camera_fovs, "camera_fovs", what)
                if np.any(fov <= 0.0) or np.any(fov >= math.pi):
                    raise ValueError(f"{what}: camera_fovs={fov.tolist()} [rad] must lie in (0, pi)")
                n = len(fov)
                sy = np.tan(0.5 * fov)
                sx = sy * (width / height)
                ox = oy = np.zeros(n)
            dev = self._sensor.device
            if out_rays is None:
                out = wp.zeros((n, height, width, 2), dtype=wp.vec3f, device=dev)
                first = 0
            else:
                if (not isinstance(out_rays, wp.array) or out_rays.ndim != 4 or out_rays.dtype != wp.vec3f
                        or out_rays.shape[1:] != (height, width, 2) or out_rays.device != dev):  # fmt: skip
                    raise ValueError(f"{what}: out_rays must be a wp.array4d(dtype=vec3f) of shape (cameras, {height}, "
                                     f"{width}, 2) on {dev}; got {_describe(out_rays)}")  # fmt: skip
                first = int(camera_index)
                if first < 0 or first + n > out_rays.shape[0]:
                    raise ValueError(f"{what}: camera_index={camera_index} + {n} cameras exceeds out_rays' "
                                     f"{out_rays.shape[0]} cameras")  # fmt: skip
                out = out_rays
            arrs = [wp.array(np.ascontiguousarray(a, np.float32), dtype=float, device=dev) for a in (sx, sy, ox, oy)]
            wp.launch(K.pinhole_rays_kernel, dim=(n, height, width), inputs=[width, height, first, *arrs],
                      outputs=[out], device=dev)  # fmt: skip
            return out

        def compute_pinhole_camera_rays(self, width: int, height: int, camera_fovs=None, **kwargs):
            """Deprecated alias of :meth:`compute_camera_rays_pinhole`."""
            warnings.warn("compute_pinhole_camera_rays is deprecated; use compute_camera_rays_pinhole",
                          DeprecationWarning, stacklevel=2)  # fmt: skip
            return self.compute_camera_rays_pinhole(width, height, camera_fovs=camera_fovs, **kwargs)

        def convert_ray_depth_to_forward_depth(self, depth_image, camera_transforms, camera_rays, out_depth=None):
            """Ray-distance depth -> depth along the camera's forward (-Z) axis [m]; misses (<= 0) kept."""
            dev = self._sensor.device
            if out_depth is None:
                out_depth = wp.zeros(depth_image.shape, dtype=wp.float32, device=dev)
            wp.launch(K.forward_depth_kernel, dim=depth_image.shape,
                      inputs=[depth_image, camera_transforms, camera_rays], outputs=[out_depth], device=dev)  # fmt: skip
            return out_depth

        # -- RGBA conversion
        @staticmethod
        def _grid(image, worlds_per_row):
            tiles = image.shape[0] * image.shape[1]
            per_row = int(math.ceil(math.sqrt(tiles))) if worlds_per_row is None else int(worlds_per_row)
            if per_row < 1:
                raise ValueError(f"worlds_per_row={worlds_per_row!r} must be a positive integer")
            rows = (tiles + per_row - 1) // per_row
            return per_row, (rows * image.shape[2], per_row * image.shape[3], 4)

        def _flat_out(self, out_buffer, shape):
            if out_buffer is None:
                return wp.zeros(shape, dtype=wp.uint8, device=self._sensor.device)
            if tuple(out_buffer.shape) != shape or out_buffer.dtype != wp.uint8:
                raise ValueError(f"out_buffer must be uint8 of shape {shape}, got {_describe(out_buffer)}")
            return out_buffer

        def flatten_color_image_to_rgba(self, image, out_buffer=None, worlds_per_row=None):
            """Tile ``(world, camera)`` colour images into one RGBA ``uint8`` image (rows of tiles)."""
            per_row, shape = self._grid(image, worlds_per_row)
            out = self._flat_out(out_buffer, shape)
            wp.launch(K.flatten_color_kernel, dim=image.shape, inputs=[image, per_row], outputs=[out], device=image.device)
            return out

        def flatten_normal_image_to_rgba(self, image, out_buffer=None, worlds_per_row=None):
            """Tile normal images into one RGBA ``uint8`` image (``0.5 * n + 0.5`` per channel)."""
            per_row, shape = self._grid(image, worlds_per_row)
            out = self._flat_out(out_buffer, shape)
            wp.launch(K.flatten_normal_kernel, dim=image.shape, inputs=[image, per_row], outputs=[out], device=image.device)
            return out

        def _depth_range(self, image, depth_range):
            dev = image.device
            if depth_range is None:
                rng = wp.array([1.0e30, -1.0e30], dtype=float, device=dev)
                wp.launch(K.depth_range_kernel, dim=image.shape, inputs=[image], outputs=[rng], device=dev)
                return rng
            if isinstance(depth_range, wp.array):
                return depth_range
            near, far = (float(v) for v in depth_range)
            return wp.array([near, far], dtype=float, device=dev)

        def flatten_depth_image_to_rgba(self, image, out_buffer=None, worlds_per_row=None, depth_range=None):
            """Tile depth images into one grey RGBA image: nearer is brighter (50..255), misses black."""
            per_row, shape = self._grid(image, worlds_per_row)
            out = self._flat_out(out_buffer, shape)
            rng = self._depth_range(image, depth_range)
            wp.launch(K.flatten_depth_kernel, dim=image.shape, inputs=[image, per_row, rng], outputs=[out], device=image.device)
            return out

        def to_rgba_from_color(self, image):
            """Zero-copy ``uint8`` view ``(world_count * camera_count, H, W, 4)`` of a packed colour image."""
            if not image.is_contiguous:
                raise ValueError("to_rgba_from_color: image must be contiguous")
            Wc, C, H, Wd = image.shape
            return wp.array(ptr=image.ptr, dtype=wp.uint8, shape=(Wc * C, H, Wd, 4), device=image.device, copy=False)

        def _tile_out(self, image, out_buffer):
            shape = (image.shape[0] * image.shape[1], image.shape[2], image.shape[3], 4)
            return self._flat_out(out_buffer, shape)

        def to_rgba_from_normal(self, image, out_buffer=None):
            """Normal image -> ``uint8`` RGBA ``(world_count * camera_count, H, W, 4)``."""
            out = self._tile_out(image, out_buffer)
            wp.launch(K.normal_rgba_kernel, dim=image.shape, inputs=[image], outputs=[out], device=image.device)
            return out

        def to_rgba_from_depth(self, image, depth_range=None, out_buffer=None):
            """Depth image -> grey ``uint8`` RGBA (nearer brighter, misses black)."""
            out = self._tile_out(image, out_buffer)
            rng = self._depth_range(image, depth_range)
            wp.launch(K.depth_rgba_kernel, dim=image.shape, inputs=[image, rng], outputs=[out], device=image.device)
            return out

        def to_rgba_from_shape_index(self, image, colors=None, out_buffer=None):
            """Shape-index image -> ``uint8`` RGBA, through ``colors`` ``(N, 3)`` uint8 or a hash palette."""
            out = self._tile_out(image, out_buffer)
            pal = colors if colors is not None else wp.zeros((1, 3), dtype=wp.uint8, device=image.device)
            wp.launch(K.shape_index_rgba_kernel, dim=image.shape, inputs=[image, pal, int(colors is not None)],
                      outputs=[out], device=image.device)  # fmt: skip
            return out

        # -- lights
        def create_default_light(self, enable_shadows: bool = True, direction=None):
            """Replace the lights by one white directional light travelling along ``direction``
            (default normalized ``(-1, 1, -1)``); also sets the default config's ``enable_shadows``."""
            d = (-1.0, 1.0, -1.0) if direction is None else tuple(float(c) for c in direction)
            self._sensor.set_lights([d], cast_shadows=[bool(enable_shadows)])
            self._sensor.default_render_config.enable_shadows = bool(enable_shadows)


def _per_camera(v, name, what, positive=True):
    if isinstance(v, wp.array):
        v = v.numpy()
    try:
        a = np.asarray(v, np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError(f"{what}: {name}={v!r} must be a number or one number per camera") from None
    if a.size == 0 or not np.all(np.isfinite(a)):
        raise ValueError(f"{what}: {name}={v!r} must be finite numbers (one per camera)")
    return a


def _describe(a) -> str:
    if isinstance(a, wp.array):
        dt = getattr(a.dtype, "__name__", str(a.dtype))
        return f"wp.array shape {tuple(a.shape)} dtype {dt} device {a.device}"
    if isinstance(a, np.ndarray):
        return f"numpy array shape {a.shape} dtype {a.dtype}"
    return repr(a) if a is None else type(a).__name__


def _texture_texels(tex, s: int) -> np.ndarray:
    """Linear RGB texels ``(H, W, 3)`` float32 of a display-sRGB texture (uint8 or float in [0, 1])."""
    if isinstance(tex, (str, bytes)) or hasattr(tex, "__fspath__"):
        try:
            from PIL import Image  # optional: textures given as image files
        except ImportError:
            raise ValueError(f"SensorTiledCamera: shape {s}: texture {tex!r} is a file path; install Pillow to load it "
                             "or pass the texels as an (H, W, 3|4) array") from None  # fmt: skip
        tex = np.asarray(Image.open(tex).convert("RGBA"))
    a = np.asarray(tex)
    if a.ndim == 2:
        a = a[..., None]
    if a.ndim != 3 or a.shape[2] not in (1, 3, 4) or a.shape[0] < 1 or a.shape[1] < 1:
        raise ValueError(f"SensorTiledCamera: shape {s}: texture must be an (H, W, 1|3|4) array, got shape {a.shape}")
    a = a.astype(np.float64) / 255.0 if np.issubdtype(a.dtype, np.integer) else a.astype(np.float64)
    if a.shape[2] == 1:
        a = np.repeat(a, 3, axis=2)
    return color_srgb_to_linear(a[..., :3]).astype(np.float32)

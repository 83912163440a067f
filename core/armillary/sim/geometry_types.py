"""Geometry source data attached to shapes: :class:`Mesh` and :class:`Heightfield`.

Both are plain host-side containers (numpy arrays). They are referenced from
``ModelBuilder.shape_source`` / ``Model.shape_source``; collision back ends may
build device-side acceleration structures from them lazily.

Units: lengths in meters. Mass properties of a :class:`Mesh` are computed for
unit density (``mass`` is the enclosed volume in m^3, ``inertia`` is the
unit-density inertia tensor about the center of mass, in m^5), so scaling by a
shape's density gives kg and kg*m^2.
"""

from __future__ import annotations

import math

import numpy as np

from .mass import mesh_mass_properties


def _as_vertices(vertices, name: str = "vertices", owner: str = "Mesh") -> np.ndarray:
    """``(N, 3)`` float32 copy of ``vertices`` (a flat array of 3N values is reshaped); ValueError otherwise."""
    try:
        v = np.asarray(vertices, dtype=np.float32)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{owner} {name} must be an array of shape (N, 3) of floats: {e}") from None
    if v.ndim == 1 and v.size % 3 == 0:
        v = v.reshape(-1, 3)
    if v.ndim != 2 or v.shape[1] != 3:
        raise ValueError(f"{owner} {name} must have shape (N, 3), got {v.shape}")
    if not np.all(np.isfinite(v)):
        bad = int(np.argwhere(~np.isfinite(v))[0, 0])
        raise ValueError(f"{owner} {name} must be finite (no NaN or inf); vertex {bad} is {v[bad].tolist()}")
    return v


class Mesh:
    """A triangle mesh in its local frame.

    Args:
        vertices: vertex positions, shape ``(N, 3)`` [m].
        indices: triangle vertex indices, flat of length ``3*T`` or shape ``(T, 3)``,
            counter-clockwise winding seen from outside.
        normals: optional per-vertex normals ``(N, 3)``.
        uvs: optional per-vertex texture coordinates ``(N, 2)``.
        compute_inertia: compute unit-density mass properties from the closed surface.
        is_solid: solid (``True``) or thin-shell mesh; used for mass properties.
        maxhullvert: maximum number of convex hull vertices for convex approximations.
        color: display sRGB color in ``[0, 1]``.
    """

    MAX_HULL_VERTICES = 64

    def __init__(
        self,
        vertices,
        indices,
        *,
        normals=None,
        uvs=None,
        compute_inertia: bool = True,
        is_solid: bool = True,
        maxhullvert: int | None = None,
        color=None,
        roughness: float | None = None,
        metallic: float | None = None,
        texture=None,
        texture_transform=((1.0, 0.0, 0.0), (0.0, 1.0, 0.0)),
        sdf=None,
        opacity: float | None = None,
        enable_surface_velocity: bool = False,
    ):
        self._vertices = _as_vertices(vertices)
        try:
            idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        except (TypeError, ValueError) as e:
            raise ValueError(f"Mesh indices must be integers: {e}") from None
        if idx.size % 3 != 0:
            raise ValueError(f"Mesh indices length must be a multiple of 3 (triangles), got {idx.size}")
        n = len(self._vertices)
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise ValueError(f"Mesh indices must lie in [0, {n - 1}] (vertex count {n}), got range [{idx.min()}, {idx.max()}]")
        self._indices = idx.astype(np.int32)
        self._normals = None if normals is None else _as_vertices(normals, "normals")
        self._uvs = None if uvs is None else np.asarray(uvs, dtype=np.float32)
        self.is_solid = bool(is_solid)
        self.maxhullvert = self.MAX_HULL_VERTICES if maxhullvert is None else int(maxhullvert)
        self.color = None if color is None else tuple(float(c) for c in color)
        self.roughness = roughness
        self.metallic = metallic
        self.texture = texture
        self.texture_transform = texture_transform
        self.sdf = sdf
        #: edge subset ``(K, 2)`` int32 kept by the dihedral / box pre-filter of :meth:`build_sdf`
        #: (the SDF-mesh contact route prefers it to :attr:`edges`); ``None`` before a build
        self.sdf_edges = None
        self._edges = None
        self._watertight = None
        self.opacity = opacity
        self.enable_surface_velocity = bool(enable_surface_velocity)
        self.has_inertia = False
        self.mass = 0.0
        self.com = (0.0, 0.0, 0.0)
        self.inertia = np.zeros((3, 3), dtype=np.float64)
        if compute_inertia and len(self._indices):
            self._compute_mass_properties()

    def _compute_mass_properties(self):
        m, com, inertia = mesh_mass_properties(self._vertices, self._indices.reshape(-1, 3), 1.0, self.is_solid)
        self.mass = float(m)
        self.com = tuple(float(c) for c in com)
        self.inertia = inertia
        self.has_inertia = True

    @property
    def vertices(self) -> np.ndarray:
        """Vertex positions, shape ``(N, 3)``, float32 [m]."""
        return self._vertices

    @vertices.setter
    def vertices(self, value):
        self._vertices = _as_vertices(value)
        self.sdf_edges = None  # derived from the old geometry
        if self.has_inertia:
            self._compute_mass_properties()

    @property
    def indices(self) -> np.ndarray:
        """Flat triangle indices, shape ``(3*T,)``, int32."""
        return self._indices

    @property
    def normals(self):
        return self._normals

    @property
    def edges(self) -> np.ndarray:
        """Unique undirected edges ``(E, 2)`` int32, ``e[0] < e[1]`` (``E = 3T/2`` when closed)."""
        if self._edges is None:
            from ..geometry.sdf_build import mesh_edges

            self._edges = mesh_edges(self._indices)
        return self._edges

    @property
    def is_watertight(self) -> bool:
        """Every edge is shared by exactly two triangles traversing it in opposite directions
        (closed, consistently oriented, edge-manifold). Selects the SDF sign method: ray parity
        when ``True``, winding numbers otherwise."""
        if self._watertight is None:
            from ..geometry.sdf_build import is_watertight

            self._watertight = is_watertight(self._indices)
        return self._watertight

    def build_sdf(
        self,
        max_resolution: int | None = None,
        narrow_band_range=(-0.1, 0.1),
        margin: float = 0.05,
        shape_margin: float = 0.0,
        scale=None,
        *,
        target_voxel_size: float | None = None,
        edge_lower_angle_threshold_rad: float = math.radians(0.1),
        edge_box_absorption: bool = False,
        edge_box_half_normal: float | None = None,
        edge_box_half_normal_rel: float | None = None,
        edge_box_half_lateral: float | None = None,
        edge_box_half_lateral_rel: float | None = None,
        cache_dir=None,
        device=None,
    ):
        """Build the signed distance field of this mesh (sets and returns :attr:`sdf`).

        Args:
            max_resolution: voxels (cells) along the longest padded-AABB axis, a positive
                multiple of 8; default 64 when neither this nor ``target_voxel_size`` is given.
            narrow_band_range: ``(inner, outer)`` [m]; exact distances are computed only in
                8x8x8 bricks the band may cross; elsewhere values have the right sign and a
                magnitude of at least the band limit.
            margin: padding of the mesh AABB [m] (>= 0).
            shape_margin: subtracted from the sampled distance at query time [m] (stored in
                ``SDF.shape_margin``; not part of the grid nor of the cache key).
            scale: bake this non-unit scale into the grid (``SDF.baked_scale``); ``None``: the
                grid is in unscaled mesh coordinates.
            target_voxel_size: voxel size [m]; takes precedence over ``max_resolution``.
            edge_lower_angle_threshold_rad: manifold edges whose dihedral angle is below this
                are dropped from :attr:`sdf_edges` (0 keeps them all; negative: no
                simplification, every edge kept). Boundary edges are always kept.
            edge_box_absorption: also drop manifold edges covered by a longer edge's oriented
                box (half extents ``edge_box_half_normal`` / ``edge_box_half_lateral`` [m], or
                the ``*_rel`` fractions of the AABB diagonal, defaults 0.002 / 0.005).
            cache_dir: directory of the on-disk cache (content-addressed by the mesh data and
                every parameter but ``shape_margin``); ``None``: no cache.
            device: Warp device the grid is computed on.
        """
        from ..geometry.sdf_build import build_mesh_sdf

        sdf, edges = build_mesh_sdf(
            self,
            max_resolution,
            narrow_band_range,
            margin,
            shape_margin,
            scale,
            target_voxel_size=target_voxel_size,
            edge_lower_angle_threshold_rad=edge_lower_angle_threshold_rad,
            edge_box_absorption=edge_box_absorption,
            edge_box_half_normal=edge_box_half_normal,
            edge_box_half_normal_rel=edge_box_half_normal_rel,
            edge_box_half_lateral=edge_box_half_lateral,
            edge_box_half_lateral_rel=edge_box_half_lateral_rel,
            cache_dir=cache_dir,
            device=device,
        )
        self.sdf = sdf
        self.sdf_edges = edges
        return sdf

    def clear_sdf(self) -> None:
        """Drop the SDF and the cached edge subset (:attr:`sdf`, :attr:`sdf_edges`)."""
        self.sdf = None
        self.sdf_edges = None

    @property
    def uvs(self):
        return self._uvs

    def copy(self, vertices=None, indices=None, recompute_inertia: bool = False) -> "Mesh":
        """Return a copy, optionally with replaced vertices / indices."""
        m = Mesh(
            self._vertices.copy() if vertices is None else vertices,
            self._indices.copy() if indices is None else indices,
            normals=self._normals,
            uvs=self._uvs,
            compute_inertia=False,
            is_solid=self.is_solid,
            maxhullvert=self.maxhullvert,
            color=self.color,
            sdf=self.sdf,
            opacity=self.opacity,
        )
        if vertices is None and indices is None:
            m.sdf_edges = None if self.sdf_edges is None else self.sdf_edges.copy()
        if recompute_inertia or vertices is not None or indices is not None:
            if self.has_inertia:
                m._compute_mass_properties()
        else:
            m.has_inertia, m.mass, m.com, m.inertia = self.has_inertia, self.mass, self.com, self.inertia.copy()
        return m

    def aabb(self) -> tuple[np.ndarray, np.ndarray]:
        """Axis-aligned bounds ``(lower, upper)`` of the vertices in the mesh frame [m]."""
        if len(self._vertices) == 0:
            return np.zeros(3), np.zeros(3)
        return self._vertices.min(axis=0), self._vertices.max(axis=0)

    @staticmethod
    def create_box(hx: float, hy: float | None = None, hz: float | None = None, **kwargs) -> "Mesh":
        """Closed box mesh with half extents ``hx, hy, hz`` [m] centered at the origin."""
        hy = hx if hy is None else hy
        hz = hx if hz is None else hz
        v = np.array(
            [[sx * hx, sy * hy, sz * hz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], dtype=np.float32
        )
        # vertex id = 4*ix + 2*iy + iz with ix,iy,iz in {0,1}
        faces = [
            (0, 1, 3), (0, 3, 2),  # -x
            (4, 6, 7), (4, 7, 5),  # +x
            (0, 4, 5), (0, 5, 1),  # -y
            (2, 3, 7), (2, 7, 6),  # +y
            (0, 2, 6), (0, 6, 4),  # -z
            (1, 5, 7), (1, 7, 3),  # +z
        ]  # fmt: skip
        return Mesh(v, np.array(faces, dtype=np.int32).reshape(-1), compute_inertia=kwargs.get("compute_inertia", True))

    def __repr__(self) -> str:
        return f"Mesh(vertices={len(self._vertices)}, triangles={len(self._indices) // 3})"


class Heightfield:
    """A regular elevation grid.

    Args:
        data: elevations, shape ``(nrow, ncol)`` [m]; row ``i`` maps to local y, column ``j`` to local x.
        nrow, ncol: grid dimensions (``>= 2`` each).
        hx, hy: half extents of the grid along local x and y [m].
        min_z, max_z: elevation bounds [m]; default to the data range.
    """

    def __init__(self, data, nrow: int, ncol: int, hx: float = 1.0, hy: float = 1.0, min_z=None, max_z=None):
        nrow, ncol = int(nrow), int(ncol)
        if nrow < 2 or ncol < 2:
            raise ValueError(f"Heightfield nrow and ncol must be >= 2, got nrow={nrow}, ncol={ncol}")
        try:
            arr = np.asarray(data, dtype=np.float32)
        except (TypeError, ValueError) as e:
            raise ValueError(f"Heightfield data must be a ({nrow}, {ncol}) array of floats: {e}") from None
        if arr.size != nrow * ncol:
            raise ValueError(f"Heightfield data must have nrow*ncol = {nrow * ncol} values, got {arr.size}")
        arr = arr.reshape(nrow, ncol)
        if not np.all(np.isfinite(arr)):
            raise ValueError("Heightfield data contains non-finite values; all elevations must be finite")
        if not (hx > 0 and hy > 0):
            raise ValueError(f"Heightfield hx and hy must be > 0, got hx={hx}, hy={hy}")
        self.data = arr
        self.nrow, self.ncol = nrow, ncol
        self.hx, self.hy = float(hx), float(hy)
        self.min_z = float(arr.min()) if min_z is None else float(min_z)
        self.max_z = float(arr.max()) if max_z is None else float(max_z)
        self.is_solid = True
        self.has_inertia = False
        self.mass = 0.0
        self.com = (0.0, 0.0, 0.0)
        self.inertia = np.zeros((3, 3))

    def __repr__(self) -> str:
        return f"Heightfield(nrow={self.nrow}, ncol={self.ncol}, hx={self.hx}, hy={self.hy})"

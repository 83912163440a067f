"""Tetrahedral meshes for volumetric soft bodies: :class:`TetMesh`.

A host-side container (numpy arrays): vertex positions [m], tetrahedra (4 vertex indices each),
the boundary triangles (faces used by exactly one tetrahedron, wound counter-clockwise seen from
outside) and optional per-element materials that :meth:`ModelBuilder.add_soft_mesh` uses as
defaults. Loading from USD goes through the ``armillary-importer-usd`` plugin
(:meth:`TetMesh.create_from_usd`); ``pxr`` is imported only then.
"""

from __future__ import annotations

import os

import numpy as np

from .exceptions import warn
from .geometry_types import _as_vertices

__all__ = ["TetMesh"]

# the four faces of tetrahedron (a, b, c, d), wound outward when det(b-a, c-a, d-a) > 0
_TET_FACES = np.array([[0, 2, 1], [1, 2, 3], [0, 1, 3], [0, 3, 2]], dtype=np.int64)
# relative volume below which a tetrahedron is degenerate: |6 V| <= tol * (longest edge)^3
_DEGENERATE_TOL = 1e-6
_NPZ_RESERVED = ("vertices", "tet_indices", "k_mu", "k_lambda", "k_damp", "density", "__custom_names__",
                 "__custom_freqs__")


def _frequency_enum():
    from .custom_attributes import AttributeFrequency

    return AttributeFrequency


def _signed_volumes6(vertices: np.ndarray, tets: np.ndarray) -> np.ndarray:
    """``6 * signed volume`` of each tetrahedron, (T,) float64."""
    v = np.asarray(vertices, dtype=np.float64)
    a = v[tets[:, 0]]
    return np.einsum("ij,ij->i", np.cross(v[tets[:, 1]] - a, v[tets[:, 2]] - a), v[tets[:, 3]] - a)


class TetMesh:
    """A tetrahedral mesh for volumetric deformable simulation.

    Args:
        vertices: vertex positions (surface and interior nodes), shape ``(N, 3)`` [m].
        tet_indices: tetrahedra, flat ``(4*T,)`` or ``(T, 4)`` vertex indices; either orientation
            is accepted (the surface is wound outward per tetrahedron).
        k_mu: first Lame parameter [Pa], scalar or per-tetrahedron ``(T,)``.
        k_lambda: second Lame parameter [Pa], scalar or ``(T,)``.
        k_damp: viscous damping [Pa*s], scalar or ``(T,)``.
        density: uniform density [kg/m^3].
        custom_attributes: ``{name: array}`` (frequency inferred from the length: vertex,
            tetrahedron or surface-triangle count, which must be unambiguous) or
            ``{name: (array, Model.AttributeFrequency)}``.

    Raises:
        ValueError: on a malformed shape, an index out of range, a tetrahedron repeating a vertex
            or of (near) zero volume, a material array of the wrong length, a non-positive density.
    """

    def __init__(self, vertices, tet_indices, *, k_mu=None, k_lambda=None, k_damp=None, density=None,
                 custom_attributes=None):
        v = _as_vertices(vertices, "vertices", owner="TetMesh")
        try:
            raw = np.asarray(tet_indices)
            if raw.size and not np.issubdtype(raw.dtype, np.integer):
                if not np.all(np.equal(np.mod(raw.astype(np.float64), 1.0), 0.0)):
                    raise ValueError("non-integer values")
            t = raw.astype(np.int64).reshape(-1)
        except (TypeError, ValueError) as e:
            raise ValueError(f"TetMesh tet_indices must be integers: {e}") from None
        if t.size % 4 != 0:
            raise ValueError(f"TetMesh tet_indices length must be a multiple of 4 (tetrahedra), got {t.size}")
        n = len(v)
        if t.size:
            if t.min() < 0:
                raise ValueError(f"TetMesh tet_indices contains negative index {int(t.min())}; allowed [0, {n - 1}]")
            if t.max() >= n:
                raise ValueError(
                    f"TetMesh tet_indices contains index {int(t.max())}, out of range for {n} vertices "
                    f"(allowed [0, {n - 1}])"
                )
        tets = t.reshape(-1, 4)
        self._check_elements(v, tets)
        self._vertices = v
        self._tet_indices = t.astype(np.int32)
        count = len(tets)
        self._k_mu = self._material(k_mu, count, "k_mu")
        self._k_lambda = self._material(k_lambda, count, "k_lambda")
        self._k_damp = self._material(k_damp, count, "k_damp")
        if density is not None:
            d = float(density)
            if not np.isfinite(d) or d <= 0.0:
                raise ValueError(f"TetMesh density must be a positive finite number [kg/m^3], got {density!r}")
        self._density = density
        self._surface_tri_indices = self.compute_surface_triangles(self._tet_indices, self._vertices)
        self.custom_attributes = self._custom(custom_attributes)

    # -- validation helpers ------------------------------------------------------------------

    @staticmethod
    def _check_elements(v: np.ndarray, tets: np.ndarray) -> None:
        if not len(tets):
            return
        s = np.sort(tets, axis=1)
        rep = np.nonzero(np.any(s[:, 1:] == s[:, :-1], axis=1))[0]
        if len(rep):
            k = int(rep[0])
            raise ValueError(f"TetMesh tetrahedron {k} repeats a vertex: {tets[k].tolist()}")
        vol6 = _signed_volumes6(v, tets)
        p = np.asarray(v, dtype=np.float64)[tets]  # (T, 4, 3)
        pairs = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
        longest = np.max([np.linalg.norm(p[:, i] - p[:, j], axis=1) for i, j in pairs], axis=0)
        flat = np.nonzero(np.abs(vol6) <= _DEGENERATE_TOL * longest**3)[0]
        if len(flat):
            k = int(flat[0])
            raise ValueError(
                f"TetMesh tetrahedron {k} {tets[k].tolist()} is degenerate (volume {vol6[k] / 6.0:.3g} m^3, "
                f"its vertices are coplanar or collinear); {len(flat)} such tetrahedra"
            )

    @staticmethod
    def _material(value, count: int, name: str):
        if value is None:
            return None
        arr = np.asarray(value, dtype=np.float32).reshape(-1)
        if arr.size == 1:
            arr = np.full(count, arr[0], dtype=np.float32)
        elif arr.size != count:
            raise ValueError(f"TetMesh {name} array length ({arr.size}) does not match tet count ({count})")
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"TetMesh {name} must be finite")
        return arr

    def _infer_frequency(self, arr: np.ndarray, name: str):
        F = _frequency_enum()
        counts = {F.PARTICLE: self.vertex_count, F.TETRAHEDRON: self.tet_count,
                  F.TRIANGLE: len(self._surface_tri_indices) // 3}
        labels = {F.PARTICLE: "vertex_count", F.TETRAHEDRON: "tet_count", F.TRIANGLE: "tri_count"}
        hits = [f for f, c in counts.items() if len(arr) == c]
        if len(hits) == 1:
            return hits[0]
        listing = ", ".join(f"{labels[f]} ({c})" for f, c in counts.items())
        if hits:
            raise ValueError(
                f"Cannot infer frequency for custom attribute {name!r}: array length {len(arr)} matches "
                f"{', '.join(labels[f] for f in hits)}. Pass an explicit (array, frequency) tuple instead."
            )
        raise ValueError(
            f"Cannot infer frequency for custom attribute {name!r}: array length {len(arr)} matches none of "
            f"{listing}. Pass an explicit (array, frequency) tuple instead."
        )

    def _custom(self, custom_attributes) -> dict:
        out = {}
        if not custom_attributes:
            return out
        F = _frequency_enum()
        for name, value in dict(custom_attributes).items():
            if name in _NPZ_RESERVED:
                raise ValueError(f"TetMesh custom attribute name {name!r} is reserved")
            if (isinstance(value, tuple) and len(value) == 2 and np.ndim(value[0]) >= 1
                    and isinstance(value[1], (int, np.integer)) and not isinstance(value[1], bool)):
                arr, freq = np.asarray(value[0]), F(int(value[1]))
            else:
                arr = np.asarray(value)
                freq = self._infer_frequency(arr, name)
            out[name] = (arr, freq)
        return out

    # -- properties --------------------------------------------------------------------------

    @property
    def vertices(self) -> np.ndarray:
        """Vertex positions [m], shape ``(N, 3)``, float32."""
        return self._vertices

    @property
    def tet_indices(self) -> np.ndarray:
        """Tetrahedron vertex indices, flat ``(4*T,)``, int32."""
        return self._tet_indices

    @property
    def surface_tri_indices(self) -> np.ndarray:
        """Boundary triangles (faces of exactly one tetrahedron), flat ``(3*F,)`` int32, wound
        counter-clockwise seen from outside."""
        return self._surface_tri_indices

    @property
    def vertex_count(self) -> int:
        """Number of vertices."""
        return len(self._vertices)

    @property
    def tet_count(self) -> int:
        """Number of tetrahedra."""
        return len(self._tet_indices) // 4

    @property
    def k_mu(self):
        """Per-tetrahedron first Lame parameter [Pa], ``(T,)`` float32, or None."""
        return self._k_mu

    @property
    def k_lambda(self):
        """Per-tetrahedron second Lame parameter [Pa], ``(T,)`` float32, or None."""
        return self._k_lambda

    @property
    def k_damp(self):
        """Per-tetrahedron viscous damping [Pa*s], ``(T,)`` float32, or None."""
        return self._k_damp

    @property
    def density(self):
        """Uniform density [kg/m^3], or None."""
        return self._density

    def __repr__(self) -> str:
        return f"TetMesh(vertex_count={self.vertex_count}, tet_count={self.tet_count})"

    # -- surface -----------------------------------------------------------------------------

    @staticmethod
    def compute_surface_triangles(tet_indices, vertices=None) -> np.ndarray:
        """Boundary triangles of tetrahedra ``tet_indices`` (flat ``(4*T,)`` or ``(T, 4)``).

        A face is on the boundary when exactly one tetrahedron uses it. Faces are listed per
        tetrahedron in the order ``(a,c,b), (b,c,d), (a,b,d), (a,d,c)``, which is outward for a
        positively oriented tetrahedron (``det(b-a, c-a, d-a) > 0``); with ``vertices`` (N, 3),
        faces of negatively oriented tetrahedra are reversed so that every face points outward.

        Returns:
            Flat int32 triangle indices ``(3*F,)``.
        """
        tets = np.asarray(tet_indices, dtype=np.int64).reshape(-1, 4)
        if not len(tets):
            return np.zeros(0, dtype=np.int32)
        faces = tets[:, _TET_FACES]  # (T, 4, 3)
        if vertices is not None:
            neg = _signed_volumes6(vertices, tets) < 0.0
            faces[neg] = faces[neg][:, :, ::-1]
        faces = faces.reshape(-1, 3)
        keys = np.sort(faces, axis=1)
        _, inverse, counts = np.unique(keys, axis=0, return_inverse=True, return_counts=True)
        boundary = counts[inverse.reshape(-1)] == 1
        return faces[boundary].reshape(-1).astype(np.int32)

    # -- files -------------------------------------------------------------------------------

    @staticmethod
    def create_from_file(filename) -> TetMesh:
        """Load a TetMesh from ``.npz`` (written by :meth:`save`), or ``.vtk``/``.vtu``/``.msh``
        and other volume formats through ``meshio`` when it is installed.

        Raises:
            FileNotFoundError: if the file does not exist.
            ValueError: if it holds no tetrahedra or its content is malformed.
        """
        path = os.fspath(filename)
        if not os.path.exists(path):
            raise FileNotFoundError(f"TetMesh file not found: {path}")
        if path.lower().endswith(".npz"):
            return TetMesh._load_npz(path)
        return TetMesh._load_meshio(path)

    @staticmethod
    def _load_npz(path: str) -> TetMesh:
        with np.load(path, allow_pickle=False) as data:
            if "vertices" not in data or "tet_indices" not in data:
                raise ValueError(f"{path}: a TetMesh .npz needs arrays 'vertices' and 'tet_indices', "
                                 f"found {sorted(data.files)}")
            kw = {k: data[k] for k in ("k_mu", "k_lambda", "k_damp") if k in data}
            if "density" in data:
                kw["density"] = float(data["density"])
            custom = {}
            if "__custom_names__" in data:
                names = [str(s) for s in data["__custom_names__"]]
                freqs = data["__custom_freqs__"] if "__custom_freqs__" in data else [None] * len(names)
                F = _frequency_enum()
                for name, f in zip(names, freqs):
                    custom[name] = data[name] if f is None else (data[name], F(int(f)))
            return TetMesh(data["vertices"], data["tet_indices"], custom_attributes=custom or None, **kw)

    @staticmethod
    def _load_meshio(path: str) -> TetMesh:
        try:
            import meshio
        except ImportError:
            raise ValueError(
                f"{path}: only .npz TetMesh files are supported without the optional 'meshio' package "
                "(pip install meshio for .vtk/.vtu/.msh)"
            ) from None
        m = meshio.read(path)
        blocks = [c.data for c in m.cells if c.type == "tetra"]
        if not blocks:
            raise ValueError(f"{path}: no tetrahedral cells found (cell types: {[c.type for c in m.cells]})")
        return TetMesh(np.asarray(m.points)[:, :3], np.concatenate(blocks).reshape(-1))

    def save(self, filename) -> None:
        """Write this mesh to ``filename``: ``.npz`` (numpy; materials and custom attributes
        included), or another volume format through ``meshio`` when installed (geometry only)."""
        path = os.fspath(filename)
        if path.lower().endswith(".npz"):
            arrays = {"vertices": self._vertices, "tet_indices": self._tet_indices}
            for k in ("k_mu", "k_lambda", "k_damp"):
                if getattr(self, "_" + k) is not None:
                    arrays[k] = getattr(self, "_" + k)
            if self._density is not None:
                arrays["density"] = np.asarray(float(self._density))
            if self.custom_attributes:
                names = list(self.custom_attributes)
                for name in names:
                    arrays[name] = np.asarray(self.custom_attributes[name][0])
                arrays["__custom_names__"] = np.asarray(names, dtype=str)
                arrays["__custom_freqs__"] = np.asarray(
                    [int(self.custom_attributes[n][1]) for n in names], dtype=np.int32
                )
            np.savez(path, **arrays)
            return
        try:
            import meshio
        except ImportError:
            raise ValueError(
                f"{path}: only .npz is supported without the optional 'meshio' package (pip install meshio)"
            ) from None
        if self.custom_attributes or any(x is not None for x in (self._k_mu, self._k_lambda, self._k_damp,
                                                                    self._density)):
            warn(f"{path}: materials and custom attributes are only saved to .npz")
        meshio.write(path, meshio.Mesh(self._vertices, [("tetra", self._tet_indices.reshape(-1, 4))]))

    @staticmethod
    def create_from_usd(prim, *, compat_namespaces=None) -> TetMesh:
        """Load a ``UsdGeom.TetMesh`` prim (needs the ``armillary-importer-usd`` plugin and ``usd-core``);
        see ``armillary.usd.get_tetmesh``."""
        try:
            from armillary_importer_usd.mesh import get_tetmesh
        except ImportError as e:
            raise ImportError(
                "TetMesh.create_from_usd needs the armillary-importer-usd plugin and usd-core "
                f"(pip install armillary-importer-usd): {e}"
            ) from e
        return get_tetmesh(prim, compat_namespaces=compat_namespaces)

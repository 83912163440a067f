"""Geometry readers: triangle meshes (``UsdGeom.Mesh``) and tetrahedral meshes (``UsdGeom.TetMesh``).

Public (``armillary.usd.*``): :func:`get_mesh`, :func:`find_tetmesh_prims`, :func:`get_tetmesh`.

Polygons are fan-triangulated (corner 0, i, i+1). ``orientation = "leftHanded"`` reverses each
triangle so that the result is counter-clockwise seen from outside. Positions are in the mesh
prim's local frame (single mesh prim) or in the frame of the merge root (stages, files, non-mesh
prims), in meters when stage units are applied.
"""

from __future__ import annotations

import math
import os

import numpy as np

try:  # the shared error type (utils.py); a private stand-in keeps this module usable on its own
    from .utils import USDImportError
except ImportError:  # pragma: no cover - only while utils.py is missing

    class USDImportError(ValueError):
        def __init__(self, message, prim_path=None, attribute=None):
            self.prim_path = None if prim_path is None else str(prim_path)
            self.attribute = attribute
            prefix = ""
            if prim_path is not None:
                prefix = f"{prim_path}"
                if attribute:
                    prefix += f".{attribute}"
                prefix += ": "
            super().__init__(prefix + message)


__all__ = ["DEFORMABLE_LEGACY_NAMESPACES", "find_tetmesh_prims", "get_mesh", "get_tetmesh"]

_FACE_VARYING_MODES = ("vertex_averaging", "angle_weighted", "vertex_splitting")


# ------------------------------------------------------------------------------------------------
# stage helpers


def _open_stage(source):
    from pxr import Usd

    if isinstance(source, Usd.Stage):
        return source
    try:
        from .utils import open_stage
    except ImportError:  # pragma: no cover
        open_stage = None
    if open_stage is not None:
        return open_stage(source)
    path = os.fspath(source)
    if "://" not in path and not os.path.exists(path):
        raise FileNotFoundError(f"USD file not found: {path}")
    try:
        stage = Usd.Stage.Open(path)
    except Exception as e:  # pxr raises Tf.ErrorException
        raise USDImportError(f"cannot open USD file {path!r}: {e}") from None
    if stage is None:
        raise USDImportError(f"cannot open USD file {path!r}")
    return stage


def _linear_unit(stage) -> float:
    try:
        from .utils import stage_linear_unit
    except ImportError:  # pragma: no cover
        stage_linear_unit = None
    if stage_linear_unit is not None:
        return float(stage_linear_unit(stage))
    from pxr import UsdGeom

    mpu = float(UsdGeom.GetStageMetersPerUnit(stage)) if stage.HasAuthoredMetadata("metersPerUnit") else 1.0
    if not math.isfinite(mpu) or mpu <= 0.0:
        raise USDImportError(f"stage metersPerUnit must be a positive finite number, got {mpu}")
    return mpu


def _matrix_np(m) -> np.ndarray:
    """Gf.Matrix4d (row-vector convention) -> (4, 4) float64 acting on row vectors ``p @ M``."""
    return np.array([[m[i][j] for j in range(4)] for i in range(4)], dtype=np.float64)


# ------------------------------------------------------------------------------------------------
# reading one UsdGeom.Mesh


def _read_array(attr, dtype, width=None):
    value = attr.Get() if attr and attr.HasValue() else None
    if value is None:
        return None
    arr = np.asarray(value, dtype=dtype)
    if width is not None:
        arr = arr.reshape(-1, width)
    return arr


def _primvar_values(pv, dtype, width):
    """Flattened (resolved through indices) primvar values and its interpolation, or (None, None)."""
    if not pv or not pv.HasValue():
        return None, None
    raw = pv.Get()
    if raw is None:
        return None, None
    values = np.asarray(raw, dtype=dtype).reshape(-1, width)
    idx = pv.GetIndices() if pv.IsIndexed() else None
    if idx is not None and len(idx):
        idx = np.asarray(idx, dtype=np.int64)
        if idx.min() < 0 or idx.max() >= len(values):
            raise USDImportError(
                f"primvar indices must lie in [0, {len(values) - 1}], got range [{idx.min()}, {idx.max()}]",
                pv.GetAttr().GetPrim().GetPath(), pv.GetAttr().GetName(),
            )
        values = values[idx]
    return values, str(pv.GetInterpolation())


class _RawMesh:
    """Triangulated topology of one mesh prim before the output vertex layout is chosen."""

    def __init__(self, prim):
        from pxr import UsdGeom

        self.prim = prim
        path = prim.GetPath()
        mesh = UsdGeom.Mesh(prim)
        points = _read_array(mesh.GetPointsAttr(), np.float64, 3)
        counts = _read_array(mesh.GetFaceVertexCountsAttr(), np.int64)
        fvi = _read_array(mesh.GetFaceVertexIndicesAttr(), np.int64)
        missing = [n for n, a in (("points", points), ("faceVertexCounts", counts), ("faceVertexIndices", fvi))
                   if a is None]
        if missing:
            raise USDImportError(
                f"mesh has no default-time value for {', '.join(missing)} (time-sampled geometry is not read)",
                path, missing[0],
            )
        if not np.all(np.isfinite(points)):
            raise USDImportError("points must be finite (found NaN or inf)", path, "points")
        counts = counts.reshape(-1)
        fvi = fvi.reshape(-1)
        if len(counts) and counts.min() < 3:
            bad = int(np.argmin(counts))
            raise USDImportError(
                f"face {bad} has {int(counts[bad])} vertices; every face needs at least 3", path, "faceVertexCounts"
            )
        if int(counts.sum()) != len(fvi):
            raise USDImportError(
                f"faceVertexCounts sum to {int(counts.sum())} but faceVertexIndices has {len(fvi)} entries",
                path, "faceVertexIndices",
            )
        if len(fvi) and (fvi.min() < 0 or fvi.max() >= len(points)):
            raise USDImportError(
                f"indices must lie in [0, {len(points) - 1}] (point count {len(points)}), "
                f"got range [{int(fvi.min())}, {int(fvi.max())}]",
                path, "faceVertexIndices",
            )
        self.points = points
        self.counts = counts
        self.fvi = fvi
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64) if len(counts) else counts
        self.face_start = starts
        # fan triangulation: corners (s, s+i, s+i+1), i = 1..c-2
        ntri = counts - 2
        tri_face = np.repeat(np.arange(len(counts)), ntri)
        first = np.concatenate([[0], np.cumsum(ntri)[:-1]]) if len(counts) else ntri
        local = np.arange(len(tri_face)) - np.repeat(first, ntri) + 1
        s = starts[tri_face]
        tri_corners = np.stack([s, s + local, s + local + 1], axis=1).reshape(-1, 3)
        orientation = mesh.GetOrientationAttr().Get()
        if orientation == UsdGeom.Tokens.leftHanded:
            tri_corners = tri_corners[:, ::-1]
        self.tri_corners = np.ascontiguousarray(tri_corners, dtype=np.int64)  # (T, 3) into face-varying corners
        self.tri_face = tri_face
        self.corner_face = np.repeat(np.arange(len(counts)), counts)
        self.scheme = str(mesh.GetSubdivisionSchemeAttr().Get() or "catmullClark")
        self.mesh = mesh

    @property
    def tri_points(self) -> np.ndarray:
        return self.fvi[self.tri_corners]

    def triangle_normals(self, points=None) -> np.ndarray:
        """Unnormalized triangle normals (cross products, |n| = 2 * area), (T, 3)."""
        p = self.points if points is None else points
        t = self.tri_points
        return np.cross(p[t[:, 1]] - p[t[:, 0]], p[t[:, 2]] - p[t[:, 0]])

    def corner_angles(self) -> np.ndarray:
        """Polygon interior angle at every face corner [rad], (C,)."""
        n = len(self.fvi)
        if n == 0:
            return np.zeros(0)
        counts = self.counts
        pos = np.arange(n) - np.repeat(self.face_start, counts)
        c = np.repeat(counts, counts)
        start = np.repeat(self.face_start, counts)
        prev_c = start + (pos - 1) % c
        next_c = start + (pos + 1) % c
        p = self.points
        a = p[self.fvi[prev_c]] - p[self.fvi]
        b = p[self.fvi[next_c]] - p[self.fvi]
        na = np.linalg.norm(a, axis=1)
        nb = np.linalg.norm(b, axis=1)
        cosang = np.einsum("ij,ij->i", a, b) / np.maximum(na * nb, 1e-30)
        return np.arccos(np.clip(cosang, -1.0, 1.0))

    def normals_per_corner(self):
        """Authored normals as (kind, values): kind 'point' -> (N, 3); 'corner' -> (C, 3); None if absent."""
        from pxr import UsdGeom

        path = self.prim.GetPath()
        pv = UsdGeom.PrimvarsAPI(self.prim).GetPrimvar("normals")
        values, interp = _primvar_values(pv, np.float64, 3) if pv and pv.HasAuthoredValue() else (None, None)
        if values is None:
            attr = self.mesh.GetNormalsAttr()
            if attr and attr.HasAuthoredValue():
                values = _read_array(attr, np.float64, 3)
                interp = str(self.mesh.GetNormalsInterpolation())
        if values is None:
            return None, None
        n_pts, n_faces, n_corners = len(self.points), len(self.counts), len(self.fvi)
        expected = {"vertex": n_pts, "varying": n_pts, "uniform": n_faces, "faceVarying": n_corners, "constant": 1}
        if interp not in expected:
            raise USDImportError(f"unsupported normals interpolation {interp!r}", path, "normals")
        if len(values) != expected[interp]:
            raise USDImportError(
                f"{interp} normals need {expected[interp]} values, got {len(values)}", path, "normals"
            )
        if interp in ("vertex", "varying"):
            return "point", values
        if interp == "uniform":
            return "corner", values[self.corner_face]
        if interp == "constant":
            return "point", np.repeat(values, n_pts, axis=0)
        return "corner", values

    def uvs(self, name="st"):
        """Texture coordinates as (kind, values) like :meth:`normals_per_corner`, or (None, None)."""
        from pxr import Sdf, UsdGeom

        api = UsdGeom.PrimvarsAPI(self.prim)
        pv = api.GetPrimvar(name)
        if not (pv and pv.HasValue()):
            pv = None
            for cand in api.GetPrimvarsWithValues():
                if cand.GetTypeName() in (Sdf.ValueTypeNames.TexCoord2fArray, Sdf.ValueTypeNames.TexCoord2dArray,
                                          Sdf.ValueTypeNames.TexCoord2hArray):
                    pv = cand
                    break
        if pv is None:
            return None, None
        values, interp = _primvar_values(pv, np.float64, 2)
        if values is None:
            return None, None
        path, attr = self.prim.GetPath(), pv.GetAttr().GetName()
        n_pts, n_faces, n_corners = len(self.points), len(self.counts), len(self.fvi)
        expected = {"vertex": n_pts, "varying": n_pts, "uniform": n_faces, "faceVarying": n_corners, "constant": 1}
        if interp not in expected or len(values) != expected[interp]:
            raise USDImportError(
                f"{interp} texture coordinates need {expected.get(interp, '?')} values, got {len(values)}", path, attr
            )
        if interp in ("vertex", "varying"):
            return "point", values
        if interp == "constant":
            return "point", np.repeat(values, n_pts, axis=0)
        if interp == "uniform":
            return "corner", values[self.corner_face]
        return "corner", values


def _normalize(v: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return np.where(n > 1e-30, v / np.where(n > 1e-30, n, 1.0), 0.0)


def _smooth_point_normals(raw: _RawMesh) -> np.ndarray:
    """Area-weighted vertex normals (sum of triangle cross products), (N, 3)."""
    acc = np.zeros_like(raw.points)
    tn = raw.triangle_normals()
    t = raw.tri_points
    for k in range(3):
        np.add.at(acc, t[:, k], tn)
    return _normalize(acc)


def _split_clusters(raw: _RawMesh, corner_normals: np.ndarray, threshold_deg: float):
    """Group the face corners of each point into clusters of similar normals.

    Returns (corner_vertex (C,), vertex_point (V,), vertex_normal (V, 3)); vertices are numbered in
    order of first appearance over the corners.
    """
    cos_thr = math.cos(math.radians(threshold_deg))
    unit = _normalize(corner_normals)
    clusters: dict[int, list[int]] = {}  # point -> list of output vertex ids
    rep: list[np.ndarray] = []  # first normal of each vertex (cluster representative)
    acc: list[np.ndarray] = []
    vertex_point: list[int] = []
    corner_vertex = np.empty(len(raw.fvi), dtype=np.int64)
    for c, p in enumerate(raw.fvi.tolist()):
        n = unit[c]
        chosen = -1
        for v in clusters.get(p, ()):
            if float(np.dot(rep[v], n)) >= cos_thr - 1e-12:
                chosen = v
                break
        if chosen < 0:
            chosen = len(vertex_point)
            clusters.setdefault(p, []).append(chosen)
            rep.append(n)
            acc.append(np.zeros(3))
            vertex_point.append(p)
        acc[chosen] = acc[chosen] + n
        corner_vertex[c] = chosen
    vn = _normalize(np.asarray(acc, dtype=np.float64).reshape(-1, 3))
    return corner_vertex, np.asarray(vertex_point, dtype=np.int64), vn


def _triangulated(raw: _RawMesh, *, load_normals, load_uvs, fv_mode, split_deg, preserve_fv_uvs):
    """Choose the output vertex layout of one mesh.

    Returns dict with vertices (V, 3) in local units, indices (T, 3), normals (V, 3) | None,
    uvs | None, uv_indices (T, 3) | None, source_points (V,).
    """
    tri_c = raw.tri_corners
    n_pts = len(raw.points)
    normals_kind = normals = None
    uv_kind = uvs = None
    if load_normals:
        normals_kind, normals = raw.normals_per_corner()
    if load_uvs:
        uv_kind, uvs = raw.uvs()

    # per-corner vertex ids in a "point-like" layout (before a full unweld)
    corner_vertex = raw.fvi
    vertex_point = np.arange(n_pts, dtype=np.int64)
    vertex_normals = None
    faceted = False
    if load_normals:
        if normals_kind == "point":
            vertex_normals = normals
        elif normals_kind == "corner":
            if fv_mode == "vertex_splitting":
                corner_vertex, vertex_point, vertex_normals = _split_clusters(raw, normals, split_deg)
            else:
                # authored corner normals summed as given (their length acts as a weight)
                w = raw.corner_angles()[:, None] if fv_mode == "angle_weighted" else 1.0
                acc = np.zeros((n_pts, 3))
                np.add.at(acc, raw.fvi, normals * w)
                vertex_normals = _normalize(acc)
        elif raw.scheme in ("none", "bilinear"):
            faceted = True
        else:
            vertex_normals = _smooth_point_normals(raw)

    unweld = faceted or (uv_kind == "corner" and not preserve_fv_uvs)
    uv_indices = None
    out_uvs = None
    if unweld:
        flat_c = tri_c.reshape(-1)
        src = raw.fvi[flat_c]
        vertices = raw.points[src]
        indices = np.arange(len(flat_c), dtype=np.int64).reshape(-1, 3)
        out_normals = None
        if faceted:
            out_normals = np.repeat(_normalize(raw.triangle_normals()), 3, axis=0)
        elif vertex_normals is not None:
            out_normals = vertex_normals[corner_vertex[flat_c]]
        if uvs is not None:
            out_uvs = uvs[flat_c] if uv_kind == "corner" else uvs[src]
            uv_indices = indices.copy()
        return dict(vertices=vertices, indices=indices, normals=out_normals, uvs=out_uvs, uv_indices=uv_indices,
                    source_points=src)

    if corner_vertex is raw.fvi:
        indices = raw.fvi[tri_c]
    else:
        indices = corner_vertex[tri_c]
    vertices = raw.points[vertex_point]
    if uvs is not None:
        if uv_kind == "point":
            out_uvs = uvs[vertex_point]
            uv_indices = indices.copy()
        else:  # preserved face-varying layout
            out_uvs = uvs
            uv_indices = tri_c.copy()
    return dict(vertices=vertices, indices=indices, normals=vertex_normals, uvs=out_uvs, uv_indices=uv_indices,
                source_points=vertex_point)


def _display_color(prim):
    from pxr import UsdGeom

    pv = UsdGeom.PrimvarsAPI(prim).GetPrimvar("displayColor")
    if not (pv and pv.HasAuthoredValue()):
        return None
    values, _ = _primvar_values(pv, np.float64, 3)
    if values is None or len(values) == 0:
        return None
    return _linear_to_srgb(values[0])


def _linear_to_srgb(rgb):
    """Linear RGB (USD color primvars / shader inputs) -> display sRGB in [0, 1]."""
    c = np.clip(np.asarray(rgb, dtype=np.float64)[:3], 0.0, 1.0)
    s = np.where(c <= 0.0031308, 12.92 * c, 1.055 * np.power(c, 1.0 / 2.4) - 0.055)
    return tuple(float(x) for x in s)


def _material_color(prim):
    """(color, metallic, roughness) from a bound UsdPreviewSurface's constant inputs, else displayColor."""
    color = metallic = roughness = None
    try:
        from pxr import UsdShade

        material, _ = UsdShade.MaterialBindingAPI(prim).ComputeBoundMaterial()
    except Exception:  # unusual bindings must not break geometry loading
        material = None
    if material:
        shader = material.ComputeSurfaceSource()[0]
        if shader:

            def _input(name):
                inp = shader.GetInput(name)
                if not inp:
                    return None
                src = inp.GetConnectedSources()[0] if inp.HasConnectedSource() else None
                if src:
                    return None  # texture-driven: not resolved here
                return inp.Get()

            dc = _input("diffuseColor")
            if dc is not None:
                color = _linear_to_srgb(dc)
            m = _input("metallic")
            metallic = None if m is None else float(m)
            r = _input("roughness")
            roughness = None if r is None else float(r)
    if color is None:
        color = _display_color(prim)
    return color, metallic, roughness


# ------------------------------------------------------------------------------------------------
# public API


def get_mesh(
    source=None,
    *,
    load_normals: bool = False,
    load_uvs: bool = False,
    maxhullvert: int | None = None,
    face_varying_normal_conversion: str = "vertex_splitting",
    vertex_splitting_angle_threshold_deg: float = 25.0,
    preserve_facevarying_uvs: bool = False,
    return_uv_indices: bool = False,
    root_path: str | None = None,
    compute_inertia: bool = True,
    apply_stage_units: bool = True,
    prim=None,
    load_visual_materials: bool = True,
    return_source_point_indices: bool = False,
):
    """Load a triangle :class:`armillary.Mesh` from a ``UsdGeom.Mesh`` prim, a stage or a USD file.

    A mesh prim is loaded in its local frame and authored units (unless ``root_path`` is given).
    A stage, file path or non-mesh prim merges every ``UsdGeom.Mesh`` under ``root_path`` (default:
    the pseudo-root, or the given prim) with its transform relative to that root (scale included),
    converted to meters when ``apply_stage_units``.

    Args:
        source: ``Usd.Prim``, ``Usd.Stage``, or a path to a .usd/.usda/.usdc/.usdz file.
        load_normals: return per-vertex normals ``(V, 3)``: authored vertex normals as authored;
            uniform/faceVarying normals converted by ``face_varying_normal_conversion``
            (``"vertex_averaging"``, ``"angle_weighted"`` or ``"vertex_splitting"``, the latter
            splitting points whose corner normals differ by more than
            ``vertex_splitting_angle_threshold_deg`` [deg]); missing normals are faceted for the
            ``none``/``bilinear`` subdivision schemes (vertices duplicated per triangle) and
            area-weighted smooth otherwise.
        load_uvs: read ``primvars:st`` (or the first texCoord2 primvar); faceVarying UVs
            duplicate vertices per triangle corner unless ``preserve_facevarying_uvs``.
        maxhullvert: maximum convex hull vertex count stored on the mesh.
        return_uv_indices: also return flat UV indices ``(3*T,)`` (single mesh prim only).
        root_path: merge root prim path.
        compute_inertia: compute unit-density mass properties.
        apply_stage_units: scale merged geometry by the stage's metersPerUnit.
        prim: legacy alias of ``source``.
        load_visual_materials: set color/metallic/roughness from a bound UsdPreviewSurface's
            constant inputs or ``primvars:displayColor``.
        return_source_point_indices: also return, per output vertex, the index of its source USD point.

    Returns:
        ``mesh``, ``(mesh, uv_indices)``, or ``(mesh, uv_indices, source_point_indices)`` following
        the two ``return_*`` flags (``uv_indices`` is None when not requested or unavailable).
    """
    from pxr import Usd, UsdGeom

    from armillary import Mesh

    if prim is not None:
        if source is not None and source != prim:
            raise ValueError("get_mesh: pass the prim either as `source` or as `prim`, not both")
        source = prim
    if source is None:
        raise ValueError("get_mesh: a USD mesh prim, stage or file path is required")
    if face_varying_normal_conversion not in _FACE_VARYING_MODES:
        raise ValueError(
            f"get_mesh: face_varying_normal_conversion must be one of {_FACE_VARYING_MODES}, "
            f"got {face_varying_normal_conversion!r}"
        )
    split_deg = float(vertex_splitting_angle_threshold_deg)
    if not math.isfinite(split_deg) or split_deg < 0.0:
        raise ValueError(f"get_mesh: vertex_splitting_angle_threshold_deg must be >= 0, got {split_deg}")

    if isinstance(source, Usd.Prim):
        if not source.IsValid():
            raise USDImportError("get_mesh: invalid (expired or null) prim")
        stage = source.GetStage()
        src_prim = source
    else:
        stage = _open_stage(source)
        src_prim = None

    single = src_prim is not None and src_prim.IsA(UsdGeom.Mesh) and root_path is None
    if (return_uv_indices or return_source_point_indices) and not single:
        raise ValueError(
            "get_mesh: return_uv_indices / return_source_point_indices need a single UsdGeom.Mesh prim "
            "and root_path=None"
        )

    options = dict(load_normals=load_normals, load_uvs=load_uvs, fv_mode=face_varying_normal_conversion,
                   split_deg=split_deg, preserve_fv_uvs=preserve_facevarying_uvs)
    if single:
        raw = _RawMesh(src_prim)
        out = _triangulated(raw, **options)
        parts = [(out, src_prim)]
    else:
        if root_path is not None:
            root = stage.GetPrimAtPath(str(root_path))
            if not root or not root.IsValid():
                raise USDImportError(f"root_path {root_path!r} is not a prim of the stage")
        elif src_prim is not None:
            root = src_prim
        else:
            root = stage.GetPseudoRoot()
        if src_prim is not None and src_prim.IsA(UsdGeom.Mesh):
            mesh_prims = [src_prim]
        else:
            mesh_prims = [p for p in Usd.PrimRange(root, Usd.TraverseInstanceProxies()) if p.IsA(UsdGeom.Mesh)]
        if not mesh_prims:
            raise USDImportError("get_mesh: no UsdGeom.Mesh prim found", root.GetPath())
        cache = UsdGeom.XformCache(Usd.TimeCode.Default())
        M_WR = np.eye(4) if root.IsPseudoRoot() else _matrix_np(cache.GetLocalToWorldTransform(root))
        M_RW = np.linalg.inv(M_WR)
        unit = _linear_unit(stage) if apply_stage_units else 1.0
        parts = []
        for mp in mesh_prims:
            raw = _RawMesh(mp)
            out = _triangulated(raw, **options)
            M = _matrix_np(cache.GetLocalToWorldTransform(mp)) @ M_RW  # local -> root (row vectors)
            A, t = M[:3, :3], M[3, :3]
            out["vertices"] = (out["vertices"] @ A + t) * unit
            if out["normals"] is not None:
                out["normals"] = _normalize(out["normals"] @ np.linalg.inv(A).T)
            if np.linalg.det(A) < 0.0:  # mirroring transform: keep triangles counter-clockwise
                out["indices"] = out["indices"][:, ::-1]
            parts.append((out, mp))

    # merge
    vertices, indices, normals, uvs = [], [], [], []
    offset = 0
    have_normals = all(p["normals"] is not None for p, _ in parts)
    have_uvs = all(p["uvs"] is not None for p, _ in parts)
    for p, _ in parts:
        vertices.append(p["vertices"])
        indices.append(p["indices"] + offset)
        offset += len(p["vertices"])
        if have_normals:
            normals.append(p["normals"])
        if have_uvs:
            uvs.append(p["uvs"])
    V = np.concatenate(vertices) if vertices else np.zeros((0, 3))
    I = np.concatenate(indices).reshape(-1) if indices else np.zeros(0, np.int64)
    color = metallic = roughness = None
    if load_visual_materials:
        color, metallic, roughness = _material_color(parts[0][1])
    mesh = Mesh(
        V.astype(np.float32),
        I.astype(np.int32),
        normals=np.concatenate(normals).astype(np.float32) if (load_normals and have_normals and normals) else None,
        uvs=np.concatenate(uvs).astype(np.float32) if (load_uvs and have_uvs and uvs) else None,
        compute_inertia=compute_inertia,
        maxhullvert=maxhullvert,
        color=color,
        metallic=metallic,
        roughness=roughness,
    )
    if not (return_uv_indices or return_source_point_indices):
        return mesh
    only = parts[0][0]
    uv_idx = None
    if return_uv_indices and only["uv_indices"] is not None:
        uv_idx = only["uv_indices"].reshape(-1).astype(np.int32)
    if not return_source_point_indices:
        return mesh, uv_idx
    return mesh, uv_idx, only["source_points"].astype(np.int32)


# ------------------------------------------------------------------------------------------------
# tetrahedral meshes


#: vendor namespaces read as a fallback to ``physics:`` deformable material attributes
DEFORMABLE_LEGACY_NAMESPACES = ("omniphysics", "physxDeformableBody")
_VOLUME_MATERIAL_API = "PhysicsVolumeDeformableMaterialAPI"
_FALLBACK_YOUNGS = 1.0e6  # [Pa]
_FALLBACK_POISSON = 0.3
_MAX_POISSON = 0.499  # incompressible limit approximated below 0.5 (finite Lame lambda)


def find_tetmesh_prims(stage, root_path: str = "/") -> list:
    """All ``UsdGeom.TetMesh`` prims of ``stage`` (a ``Usd.Stage`` or a file path) under
    ``root_path``, in traversal order (instance proxies included)."""
    from pxr import Usd, UsdGeom

    stage = _open_stage(stage)
    root = stage.GetPseudoRoot() if root_path in (None, "/") else stage.GetPrimAtPath(str(root_path))
    if not root or not root.IsValid():
        raise USDImportError(f"root_path {root_path!r} is not a prim of the stage")
    return [p for p in Usd.PrimRange(root, Usd.TraverseInstanceProxies()) if p.IsA(UsdGeom.TetMesh)]


def _applied_schemas(prim) -> set[str]:
    names = set(prim.GetAppliedSchemas())
    info = prim.GetMetadata("apiSchemas")
    if info is not None:
        for item in list(info.GetAddedOrExplicitItems()):
            names.add(str(item))
    return names


def _warn(path, message: str, category=UserWarning) -> None:
    import warnings

    warnings.warn(f"{path}: {message}", category, stacklevel=3)


def _tet_material(prim, compat_namespaces):
    """(k_mu, k_lambda, density) from the physics material bound to ``prim`` (each may be None)."""
    from pxr import UsdShade

    try:
        material, _ = UsdShade.MaterialBindingAPI(prim).ComputeBoundMaterial("physics")
    except Exception:  # unusual bindings: no material
        material = None
    if not material:
        return None, None, None
    mprim = material.GetPrim()
    mpath = mprim.GetPath()
    has_api = _VOLUME_MATERIAL_API in _applied_schemas(mprim)
    legacy_default = compat_namespaces is None
    vendor = tuple(DEFORMABLE_LEGACY_NAMESPACES if legacy_default else compat_namespaces)
    if not has_api and not vendor:
        return None, None, None  # canonical-only: moduli come only from API-applied materials

    def read(name):
        """(value, namespace) of the first authored ``<ns>:<name>`` (canonical first)."""
        for ns in ("physics", *vendor):
            attr = mprim.GetAttribute(f"{ns}:{name}")
            if attr and attr.HasAuthoredValue():
                v = attr.Get()
                if v is not None:
                    return float(v), ns
        return None, None

    E, e_ns = read("youngsModulus")
    nu, nu_ns = read("poissonsRatio")
    rho, rho_ns = read("density")
    authored = [ns for ns in (e_ns, nu_ns, rho_ns) if ns is not None]
    if legacy_default and authored and (not has_api or any(ns != "physics" for ns in authored)):
        _warn(
            mpath,
            "get_tetmesh(): reading deformable material attributes off a material without "
            f"{_VOLUME_MATERIAL_API} (or from the vendor namespaces {DEFORMABLE_LEGACY_NAMESPACES}) is deprecated; "
            "pass compat_namespaces=() for canonical physics: attributes only, or an explicit list of namespaces",
            DeprecationWarning,
        )
    if E is not None and not (math.isfinite(E) and E >= 0.0):
        _warn(mpath, f"invalid {e_ns}:youngsModulus {E:g} (expected a finite value >= 0 [Pa]); treating it as unset")
        E = None
    if nu is not None:
        if not math.isfinite(nu) or nu <= -1.0:
            _warn(mpath, f"invalid {nu_ns}:poissonsRatio {nu:g} (expected -1 < value <= 0.5); treating it as unset")
            nu = None
        elif nu >= 0.5:
            _warn(
                mpath,
                f"{nu_ns}:poissonsRatio={nu:g} is at or beyond the incompressible limit 0.5 (infinite Lame lambda); "
                f"approximating it as {_MAX_POISSON}",
            )
            nu = _MAX_POISSON
    if rho is not None and not (math.isfinite(rho) and rho > 0.0):
        _warn(mpath, f"invalid {rho_ns}:density {rho:g} (expected a positive finite value [kg/m^3]); "
              "treating it as unset")
        rho = None
    if has_api and authored:
        E = _FALLBACK_YOUNGS if E is None else E
    if E is None:
        return None, None, rho
    nu = _FALLBACK_POISSON if nu is None else nu
    k_mu = E / (2.0 * (1.0 + nu))
    k_lambda = E * nu / ((1.0 + nu) * (1.0 - 2.0 * nu))
    return k_mu, k_lambda, rho


def _tet_custom_attributes(prim, n_verts: int, n_tets: int, n_tris: int) -> dict:
    """Custom arrays authored on a TetMesh prim: primvars by interpolation, other array attributes by length."""
    from pxr import UsdGeom

    from armillary.sim.custom_attributes import AttributeFrequency as F

    schema_props = set(prim.GetPrimDefinition().GetPropertyNames())
    out = {}
    api = UsdGeom.PrimvarsAPI(prim)
    primvar_attrs = set()
    for pv in api.GetPrimvarsWithAuthoredValues():
        attr = pv.GetAttr()
        primvar_attrs.add(attr.GetName())
        if attr.GetName() in schema_props or not pv.GetTypeName().isArray:
            continue
        value = pv.ComputeFlattened()
        if value is None:
            continue
        arr = np.asarray(value)
        interp = str(pv.GetInterpolation())
        freq = {"vertex": F.PARTICLE, "varying": F.PARTICLE, "uniform": F.TETRAHEDRON, "constant": F.ONCE}.get(interp)
        expected = {F.PARTICLE: n_verts, F.TETRAHEDRON: n_tets, F.ONCE: 1}.get(freq)
        if freq is None or len(arr) != expected:
            _warn(prim.GetPath(), f"primvar {attr.GetName()!r} ({interp}, {len(arr)} values) does not map to "
                  f"vertices ({n_verts}), tetrahedra ({n_tets}) or a constant; skipping the attribute")
            continue
        out[pv.GetPrimvarName()] = (arr, freq)
    counts = {F.PARTICLE: n_verts, F.TETRAHEDRON: n_tets, F.TRIANGLE: n_tris}
    for attr in prim.GetAuthoredAttributes():
        name = attr.GetName()
        if name in schema_props or name in primvar_attrs or not attr.GetTypeName().isArray:
            continue
        if name.startswith("primvars:") or name.startswith("material:"):
            continue
        value = attr.Get()
        if value is None:
            continue
        arr = np.asarray(value)
        hits = [f for f, c in counts.items() if len(arr) == c]
        if len(hits) != 1:
            why = "is ambiguous" if hits else "matches none of the vertex, tetrahedron and surface triangle counts"
            _warn(prim.GetPath(), f"cannot infer the frequency of custom attribute {name!r}: length {len(arr)} {why} "
                  f"(vertices {n_verts}, tetrahedra {n_tets}, surface triangles {n_tris}); skipping the attribute")
            continue
        out[name] = (arr, hits[0])
    return out


def get_tetmesh(prim, *, compat_namespaces=None):
    """Read a ``UsdGeom.TetMesh`` prim into an :class:`armillary.TetMesh`.

    Positions are the authored ``points`` in the prim's local frame and authored units (no
    transform, no stage-unit scaling). ``tetVertexIndices`` of a ``leftHanded`` mesh are reordered
    to positive orientation. The surface is computed from the open faces (an authored
    ``surfaceFaceVertexIndices`` is not used). A physics material bound to the prim
    (``material:binding:physics`` or an all-purpose binding) gives ``youngsModulus`` [Pa],
    ``poissonsRatio`` and ``density`` [kg/m^3] (``physics:`` namespace first, then
    ``compat_namespaces``; ``None`` = the deprecated vendor namespaces
    :data:`DEFORMABLE_LEGACY_NAMESPACES`, ``()`` = canonical only, read only from materials applying
    ``PhysicsVolumeDeformableMaterialAPI``), converted to Lame ``k_mu``, ``k_lambda`` [Pa]; values are
    not rescaled by stage units. A material with the API falls back to E = 1e6 Pa, nu = 0.3 for the
    missing elasticity values. Custom array attributes become ``custom_attributes`` (primvars by
    interpolation, other arrays by length; ambiguous ones are skipped with a warning).

    Raises:
        USDImportError: if the prim lacks points/tetVertexIndices or they are malformed.
    """
    from pxr import Usd, UsdGeom

    from armillary import TetMesh

    if not isinstance(prim, Usd.Prim) or not prim.IsValid():
        raise USDImportError(f"get_tetmesh needs a valid Usd.Prim, got {prim!r}")
    path = prim.GetPath()
    points_attr = prim.GetAttribute("points")
    tets_attr = prim.GetAttribute("tetVertexIndices")
    if not (points_attr and points_attr.HasValue()):
        raise USDImportError("TetMesh prim has no points attribute", path, "points")
    if not (tets_attr and tets_attr.HasValue()):
        raise USDImportError("TetMesh prim has no tetVertexIndices attribute", path, "tetVertexIndices")
    points = np.asarray(points_attr.Get(), dtype=np.float64).reshape(-1, 3)
    tets = np.asarray(tets_attr.Get(), dtype=np.int64)
    if tets.size % 4:
        raise USDImportError(f"must hold 4 indices per tetrahedron, got {tets.size} values", path, "tetVertexIndices")
    tets = tets.reshape(-1, 4)
    orientation = prim.GetAttribute("orientation").Get() if prim.HasAttribute("orientation") else None
    if orientation == UsdGeom.Tokens.leftHanded:
        tets = tets[:, [0, 2, 1, 3]]
    k_mu, k_lambda, density = _tet_material(prim, compat_namespaces)
    try:
        mesh = TetMesh(points, tets.reshape(-1), k_mu=k_mu, k_lambda=k_lambda, density=density)
    except ValueError as e:
        attr = "points" if "vert" in str(e).split(" ")[1] else "tetVertexIndices"
        raise USDImportError(str(e), path, attr) from None
    custom = _tet_custom_attributes(prim, mesh.vertex_count, mesh.tet_count, len(mesh.surface_tri_indices) // 3)
    if custom:
        mesh.custom_attributes = custom
    return mesh

"""armillary.usd.get_mesh / get_tetmesh / find_tetmesh_prims.

Expected values are either computed by hand or were measured once on the reference engine
(newton 1.8, ``newton.usd.get_mesh`` / ``get_tetmesh``) on the same stages and hard-coded here.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

pxr = pytest.importorskip("pxr")
from pxr import Gf, Sdf, Usd, UsdGeom, UsdShade, Vt  # noqa: E402

import armillary  # noqa: E402
from armillary_importer_usd.mesh import find_tetmesh_prims, get_mesh, get_tetmesh  # noqa: E402
from armillary_importer_usd.utils import USDImportError  # noqa: E402

CUBE_POINTS = [(x, y, z) for z in (0, 1) for y in (0, 1) for x in (0, 1)]
CUBE_FACES = [[0, 2, 3, 1], [4, 5, 7, 6], [0, 1, 5, 4], [2, 6, 7, 3], [0, 4, 6, 2], [1, 3, 7, 5]]
CUBE_TRIS = [0, 2, 3, 0, 3, 1, 4, 5, 7, 4, 7, 6, 0, 1, 5, 0, 5, 4, 2, 6, 7, 2, 7, 3, 0, 4, 6, 0, 6, 2, 1, 3, 7, 1, 7, 5]
CUBE_FACE_NORMALS = [(0, 0, -1), (0, 0, 1), (0, -1, 0), (0, 1, 0), (-1, 0, 0), (1, 0, 0)]

# irregular closed solid: a slightly non-planar pentagon base and five side triangles
WEDGE_POINTS = np.array([(0, 0, 0), (2, 0, 0), (2.5, 1, 0), (1, 2, 0.2), (-0.3, 1.2, 0), (1, 0.8, 1.5)])
WEDGE_FACES = [[0, 4, 3, 2, 1], [0, 1, 5], [1, 2, 5], [2, 3, 5], [3, 4, 5], [4, 0, 5]]


def _cube(stage, path="/m"):
    m = UsdGeom.Mesh.Define(stage, path)
    m.CreatePointsAttr(CUBE_POINTS)
    m.CreateFaceVertexCountsAttr([4] * 6)
    m.CreateFaceVertexIndicesAttr(sum(CUBE_FACES, []))
    return m


def _wedge(stage, face_varying_normals=False):
    m = UsdGeom.Mesh.Define(stage, "/m")
    m.CreatePointsAttr(Vt.Vec3fArray.FromNumpy(WEDGE_POINTS.astype(np.float32)))
    m.CreateFaceVertexCountsAttr([len(f) for f in WEDGE_FACES])
    m.CreateFaceVertexIndicesAttr(sum(WEDGE_FACES, []))
    if face_varying_normals:
        rng = np.random.default_rng(3)
        fvn = []
        for f in WEDGE_FACES:
            a, b, c = WEDGE_POINTS[f[0]], WEDGE_POINTS[f[1]], WEDGE_POINTS[f[2]]
            n = np.cross(b - a, c - a)
            n /= np.linalg.norm(n)
            for _ in f:
                fvn.append(n + rng.normal(scale=0.2, size=3))
        m.CreateNormalsAttr(Vt.Vec3fArray.FromNumpy(np.array(fvn, dtype=np.float32)))
        m.SetNormalsInterpolation("faceVarying")
    return m


@pytest.fixture
def stage():
    return Usd.Stage.CreateInMemory()


# ------------------------------------------------------------------------------------------------
# topology


def test_fan_triangulation_quad_and_triangle(stage):
    m = UsdGeom.Mesh.Define(stage, "/m")
    m.CreatePointsAttr([(0, 0, 0), (1, 0, 0), (1, 1, 0), (0, 1, 0), (0.5, 0.5, 1)])
    m.CreateFaceVertexCountsAttr([4, 3])
    m.CreateFaceVertexIndicesAttr([0, 1, 2, 3, 0, 1, 4])
    mesh = get_mesh(m.GetPrim())
    assert isinstance(mesh, armillary.Mesh)
    np.testing.assert_array_equal(mesh.indices, [0, 1, 2, 0, 2, 3, 0, 1, 4])
    np.testing.assert_allclose(mesh.vertices, [(0, 0, 0), (1, 0, 0), (1, 1, 0), (0, 1, 0), (0.5, 0.5, 1)])
    assert mesh.normals is None


def test_pentagon_fan_and_left_handed_winding(stage):
    m = UsdGeom.Mesh.Define(stage, "/m")
    angles = np.linspace(0, 2 * math.pi, 6)[:5]
    m.CreatePointsAttr([(math.cos(a), math.sin(a), 0.0) for a in angles])
    m.CreateFaceVertexCountsAttr([5])
    m.CreateFaceVertexIndicesAttr([0, 1, 2, 3, 4])
    mesh = get_mesh(m.GetPrim())
    np.testing.assert_array_equal(mesh.indices, [0, 1, 2, 0, 2, 3, 0, 3, 4])
    m.CreateOrientationAttr(UsdGeom.Tokens.leftHanded)
    mesh = get_mesh(m.GetPrim())
    np.testing.assert_array_equal(mesh.indices, [2, 1, 0, 3, 2, 0, 4, 3, 0])
    # every triangle of the left-handed result faces -z (counter-clockwise seen from -z)
    tri = mesh.vertices[mesh.indices.reshape(-1, 3)]
    n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    assert np.all(n[:, 2] < 0)


def test_cube_closed_mass_properties(stage):
    m = _cube(stage)
    mesh = get_mesh(m.GetPrim())
    np.testing.assert_array_equal(mesh.indices, CUBE_TRIS)
    assert mesh.mass == pytest.approx(1.0)
    np.testing.assert_allclose(mesh.com, (0.5, 0.5, 0.5), atol=1e-6)
    np.testing.assert_allclose(np.asarray(mesh.inertia).reshape(3, 3), np.eye(3) / 6.0, atol=1e-6)
    no_inertia = get_mesh(m.GetPrim(), compute_inertia=False)
    assert not no_inertia.has_inertia
    assert get_mesh(m.GetPrim(), maxhullvert=12).maxhullvert == 12


# ------------------------------------------------------------------------------------------------
# transforms and units


def _transformed_stage():
    st = Usd.Stage.CreateInMemory()
    UsdGeom.SetStageMetersPerUnit(st, 0.01)
    x = UsdGeom.Xform.Define(st, "/W")
    x.AddTranslateOp().Set(Gf.Vec3d(1, 2, 3))
    x.AddScaleOp().Set(Gf.Vec3f(2, 2, 2))
    m = UsdGeom.Mesh.Define(st, "/W/m")
    m.CreatePointsAttr([(0, 0, 0), (1, 0, 0), (1, 1, 0), (0, 1, 0), (0.5, 0.5, 1)])
    m.CreateFaceVertexCountsAttr([4, 3])
    m.CreateFaceVertexIndicesAttr([0, 1, 2, 3, 0, 1, 4])
    return st


def test_mesh_prim_keeps_local_authored_coordinates():
    st = _transformed_stage()
    mesh = get_mesh(st.GetPrimAtPath("/W/m"))
    np.testing.assert_allclose(mesh.vertices[1], (1, 0, 0))


def test_stage_source_applies_transform_and_units():
    st = _transformed_stage()
    mesh = get_mesh(st)
    # world = (1, 2, 3) + 2 * p, in centimeters -> meters
    local = np.array([(0, 0, 0), (1, 0, 0), (1, 1, 0), (0, 1, 0), (0.5, 0.5, 1)])
    expected = (np.array([(1, 2, 3)]) + 2 * local) * 0.01
    np.testing.assert_allclose(mesh.vertices, expected, atol=1e-7)
    np.testing.assert_array_equal(mesh.indices, [0, 1, 2, 0, 2, 3, 0, 1, 4])
    raw = get_mesh(st, apply_stage_units=False)
    np.testing.assert_allclose(raw.vertices, expected / 0.01, atol=1e-5)


def test_root_path_and_non_mesh_prim_are_relative_to_root():
    st = _transformed_stage()
    for mesh in (
        get_mesh(st, root_path="/W"),
        get_mesh(st.GetPrimAtPath("/W")),
        get_mesh(st.GetPrimAtPath("/W/m"), root_path="/W"),
    ):
        np.testing.assert_allclose(mesh.vertices[4], (0.005, 0.005, 0.01), atol=1e-8)


def test_file_path_source(tmp_path):
    st = _transformed_stage()
    path = tmp_path / "m.usda"
    st.GetRootLayer().Export(str(path))
    mesh = get_mesh(str(path))
    np.testing.assert_allclose(mesh.vertices[0], (0.01, 0.02, 0.03), atol=1e-7)
    with pytest.raises(FileNotFoundError):
        get_mesh(str(tmp_path / "missing.usda"))


def test_merged_stage_matches_reference():
    """Rotated, non-uniformly scaled parent in cm, two cubes (one left-handed) merged."""
    st = Usd.Stage.CreateInMemory()
    UsdGeom.SetStageMetersPerUnit(st, 0.01)
    x = UsdGeom.Xform.Define(st, "/W")
    x.AddTranslateOp().Set(Gf.Vec3d(1, 2, 3))
    x.AddRotateXYZOp().Set(Gf.Vec3f(30, 10, -20))
    x.AddScaleOp().Set(Gf.Vec3f(2, 1, 3))
    _cube(st, "/W/a")
    y = UsdGeom.Xform.Define(st, "/W/B")
    y.AddTranslateOp().Set(Gf.Vec3d(5, 0, 0))
    _cube(st, "/W/B/b").CreateOrientationAttr("leftHanded")
    mesh = get_mesh(st, load_normals=True)
    assert len(mesh.vertices) == 16
    expected_indices = CUBE_TRIS + [
        11, 10, 8, 9, 11, 8, 15, 13, 12, 14, 15, 12, 13, 9, 8, 12, 13, 8,
        15, 14, 10, 11, 15, 10, 14, 12, 8, 10, 14, 8, 15, 11, 9, 13, 15, 9,
    ]  # fmt: skip
    np.testing.assert_array_equal(mesh.indices, expected_indices)
    ref_vertices = [
        (0.01, 0.02, 0.03), (0.028508, 0.013264, 0.026527), (0.013778, 0.027841, 0.034924),
        (0.032286, 0.021105, 0.031451), (0.009109, 0.004362, 0.055586), (0.102542, -0.013682, 0.012635),
        (0.123937, -0.028216, 0.039672),
    ]  # fmt: skip
    np.testing.assert_allclose(mesh.vertices[[0, 1, 2, 3, 4, 8, 15]], ref_vertices, atol=2e-6)
    ref_normals = [(-0.711939, -0.378797, -0.591316), (0.383718, -0.651884, -0.65407), (0.711939, 0.378797, 0.591316)]
    np.testing.assert_allclose(mesh.normals[[0, 1, 8]], ref_normals, atol=2e-5)


# ------------------------------------------------------------------------------------------------
# normals


def test_missing_normals_smooth_is_area_weighted(stage):
    m = _cube(stage)
    mesh = get_mesh(m.GetPrim(), load_normals=True)
    assert len(mesh.vertices) == 8
    s3, s6 = 1 / math.sqrt(3), 1 / math.sqrt(6)
    # vertex 0 lies in two triangles of each of its three faces; vertex 1 in one triangle of the bottom
    # and front faces and two of the right face: (2, -1, -1) / sqrt(6)
    np.testing.assert_allclose(mesh.normals[0], (-s3, -s3, -s3), atol=1e-6)
    np.testing.assert_allclose(mesh.normals[1], (2 * s6, -s6, -s6), atol=1e-6)
    np.testing.assert_allclose(mesh.normals[7], (s3, s3, s3), atol=1e-6)


def test_missing_normals_smooth_matches_reference(stage):
    m = _wedge(stage)
    mesh = get_mesh(m.GetPrim(), load_normals=True)
    ref = [
        (-0.301362, -0.494851, -0.815048), (0.360505, -0.901263, 0.240337), (0.655074, 0.392122, -0.645847),
        (0.061645, 0.863029, -0.501379), (-0.848779, 0.388526, 0.358639), (-0.005115, -0.07161, 0.99742),
    ]  # fmt: skip
    np.testing.assert_allclose(mesh.normals, ref, atol=2e-6)


@pytest.mark.parametrize("scheme", ["none", "bilinear"])
def test_missing_normals_faceted_for_polygonal_schemes(stage, scheme):
    m = _cube(stage)
    m.CreateSubdivisionSchemeAttr(scheme)
    mesh, _, src = get_mesh(m.GetPrim(), load_normals=True, return_source_point_indices=True)
    assert len(mesh.vertices) == 36
    np.testing.assert_array_equal(mesh.indices, np.arange(36))
    np.testing.assert_array_equal(src, CUBE_TRIS)
    np.testing.assert_allclose(mesh.normals, np.repeat(CUBE_FACE_NORMALS, 6, axis=0), atol=1e-7)
    np.testing.assert_allclose(mesh.vertices, np.asarray(CUBE_POINTS)[CUBE_TRIS])


def test_authored_vertex_normals_kept_as_authored(stage):
    m = _cube(stage)
    n = (np.asarray(CUBE_POINTS, dtype=np.float32) - 0.5) * 2.0  # length sqrt(3), not normalized
    m.CreateNormalsAttr(Vt.Vec3fArray.FromNumpy(n))
    m.SetNormalsInterpolation("vertex")
    mesh = get_mesh(m.GetPrim(), load_normals=True)
    np.testing.assert_array_equal(mesh.indices, CUBE_TRIS)
    np.testing.assert_allclose(mesh.normals, n)
    assert get_mesh(m.GetPrim()).normals is None


def _cube_face_varying(stage, interpolation="faceVarying"):
    m = _cube(stage)
    if interpolation == "faceVarying":
        m.CreateNormalsAttr([n for n in CUBE_FACE_NORMALS for _ in range(4)])
    else:
        m.CreateNormalsAttr(CUBE_FACE_NORMALS)
    m.SetNormalsInterpolation(interpolation)
    return m


@pytest.mark.parametrize("interpolation", ["faceVarying", "uniform"])
def test_vertex_splitting_of_flat_cube(stage, interpolation):
    m = _cube_face_varying(stage, interpolation)
    mesh, _, src = get_mesh(m.GetPrim(), load_normals=True, return_source_point_indices=True)
    assert len(mesh.vertices) == 24
    np.testing.assert_array_equal(mesh.indices, [f + 4 * q for q in range(6) for f in (0, 1, 2, 0, 2, 3)])
    np.testing.assert_array_equal(src, sum(CUBE_FACES, []))  # split vertices in corner order
    np.testing.assert_allclose(mesh.normals, np.repeat(CUBE_FACE_NORMALS, 4, axis=0))


def test_vertex_splitting_above_threshold_merges_in_first_use_order(stage):
    m = _cube_face_varying(stage)
    mesh, _, src = get_mesh(
        m.GetPrim(), load_normals=True, vertex_splitting_angle_threshold_deg=100, return_source_point_indices=True
    )
    np.testing.assert_array_equal(src, [0, 2, 3, 1, 4, 5, 7, 6])
    np.testing.assert_array_equal(mesh.indices[:6], [0, 1, 2, 0, 2, 3])
    s3 = 1 / math.sqrt(3)
    np.testing.assert_allclose(mesh.normals[0], (-s3, -s3, -s3), atol=1e-6)


@pytest.mark.parametrize("mode", ["vertex_averaging", "angle_weighted"])
def test_averaging_modes_keep_points(stage, mode):
    m = _cube_face_varying(stage)
    mesh = get_mesh(m.GetPrim(), load_normals=True, face_varying_normal_conversion=mode)
    np.testing.assert_array_equal(mesh.indices, CUBE_TRIS)
    s3 = 1 / math.sqrt(3)
    np.testing.assert_allclose(mesh.normals, (np.asarray(CUBE_POINTS) * 2 - 1) * s3, atol=1e-6)


def test_face_varying_conversions_match_reference_on_triangles(stage):
    m = UsdGeom.Mesh.Define(stage, "/m")
    m.CreatePointsAttr([(0, 0, 0), (2, 0, 0), (0.5, 1.5, 0), (0.7, 0.6, 1.2)])
    m.CreateFaceVertexCountsAttr([3] * 4)
    m.CreateFaceVertexIndicesAttr([0, 2, 1, 0, 1, 3, 1, 2, 3, 2, 0, 3])
    normals = [(0.1, 0, -1), (0, -1, 0.2), (0.3, 0.1, 0.9), (0.2, 0.3, -1), (0, -1, 0), (-0.5, 0, 0.7),
               (0.9, 0.5, 0.2), (0.8, 0.6, 0.3), (0.7, 0.2, 0.5), (-0.9, -0.1, 0.2), (-0.8, 0.3, 0),
               (-0.7, 0, 0.4)]  # fmt: skip
    m.CreateNormalsAttr(normals)
    m.SetNormalsInterpolation("faceVarying")
    prim = m.GetPrim()
    aw = get_mesh(prim, load_normals=True, face_varying_normal_conversion="angle_weighted")
    np.testing.assert_allclose(
        aw.normals,
        [(-0.191973, 0.256492, -0.94729), (0.707989, -0.258541, 0.657198), (-0.09944, -0.623356, 0.77559),
         (-0.221429, 0.130623, 0.966389)], atol=2e-6)  # fmt: skip
    av = get_mesh(prim, load_normals=True, face_varying_normal_conversion="vertex_averaging")
    np.testing.assert_allclose(
        av.normals,
        [(-0.232873, 0.279448, -0.931493), (0.71586, -0.23862, 0.656205), (-0.11547, -0.57735, 0.80829),
         (-0.296174, 0.11847, 0.947758)], atol=2e-6)  # fmt: skip
    sp = get_mesh(prim, load_normals=True)
    np.testing.assert_array_equal(sp.indices, [0, 1, 2, 0, 3, 4, 5, 6, 7, 8, 9, 4])
    np.testing.assert_allclose(sp.normals[[0, 4, 9]], [(0.145478, 0.142731, -0.979012), (-0.741934, 0, 0.670473),
                                                       (-0.936329, 0.351123, 0)], atol=2e-6)  # fmt: skip


def test_vertex_splitting_matches_reference_on_polygons(stage):
    m = _wedge(stage, face_varying_normals=True)
    mesh, _, src = get_mesh(m.GetPrim(), load_normals=True, return_source_point_indices=True)
    np.testing.assert_array_equal(mesh.indices, [0, 1, 2, 0, 2, 3, 0, 3, 4, *range(5, 20)])
    np.testing.assert_array_equal(src, [0, 4, 3, 2, 1, 0, 1, 5, 1, 2, 5, 2, 3, 5, 3, 4, 5, 4, 0, 5])
    np.testing.assert_allclose(mesh.normals[[0, 4, 12, 19]], [(0.46616, -0.412523, -0.782636),
                               (0.062761, -0.083246, -0.994551), (-0.068502, 0.90289, 0.424378),
                               (-0.871062, -0.036886, 0.489787)], atol=2e-6)  # fmt: skip
    mesh40, _, src40 = get_mesh(
        m.GetPrim(), load_normals=True, vertex_splitting_angle_threshold_deg=40, return_source_point_indices=True
    )
    np.testing.assert_array_equal(
        mesh40.indices, [0, 1, 2, 0, 2, 3, 0, 3, 4, 5, 6, 7, 8, 9, 7, 10, 11, 12, 13, 14, 12, 15, 16, 17]
    )
    np.testing.assert_array_equal(src40, [0, 4, 3, 2, 1, 0, 1, 5, 1, 2, 2, 3, 5, 3, 4, 4, 0, 5])
    avg = get_mesh(m.GetPrim(), load_normals=True, face_varying_normal_conversion="vertex_averaging")
    np.testing.assert_allclose(avg.normals[[0, 5]], [(-0.209385, -0.972139, 0.105377), (-0.221697, 0.099748, 0.97)],
                               atol=2e-6)


# ------------------------------------------------------------------------------------------------
# texture coordinates and colors


def _st(m, values, interpolation, indices=None):
    pv = UsdGeom.PrimvarsAPI(m).CreatePrimvar("st", Sdf.ValueTypeNames.TexCoord2fArray, interpolation)
    pv.Set(Vt.Vec2fArray.FromNumpy(np.asarray(values, dtype=np.float32)))
    if indices is not None:
        pv.SetIndices(Vt.IntArray(list(indices)))
    return pv


def test_vertex_uvs(stage):
    m = _cube(stage)
    uv = np.arange(16, dtype=np.float32).reshape(8, 2)
    _st(m, uv, "vertex")
    mesh, uv_idx = get_mesh(m.GetPrim(), load_uvs=True, return_uv_indices=True)
    np.testing.assert_array_equal(mesh.indices, CUBE_TRIS)
    np.testing.assert_allclose(mesh.uvs, uv)
    np.testing.assert_array_equal(uv_idx, CUBE_TRIS)
    assert get_mesh(m.GetPrim()).uvs is None


def test_face_varying_indexed_uvs_unweld_per_triangle_corner(stage):
    m = _cube(stage)
    corner_to_point = sum(CUBE_FACES, [])
    _st(m, np.arange(16).reshape(8, 2), "faceVarying", indices=corner_to_point)
    mesh, uv_idx, src = get_mesh(m.GetPrim(), load_uvs=True, return_uv_indices=True, return_source_point_indices=True)
    assert len(mesh.vertices) == 36
    np.testing.assert_array_equal(mesh.indices, np.arange(36))
    np.testing.assert_array_equal(uv_idx, np.arange(36))
    np.testing.assert_array_equal(src, CUBE_TRIS)
    np.testing.assert_allclose(mesh.uvs, np.arange(16).reshape(8, 2)[CUBE_TRIS])
    kept, kept_idx = get_mesh(m.GetPrim(), load_uvs=True, preserve_facevarying_uvs=True, return_uv_indices=True)
    np.testing.assert_array_equal(kept.indices, CUBE_TRIS)
    assert len(kept.vertices) == 8 and len(kept.uvs) == 24
    np.testing.assert_array_equal(kept_idx, [f + 4 * q for q in range(6) for f in (0, 1, 2, 0, 2, 3)])


def test_display_color_is_converted_to_srgb(stage):
    m = _cube(stage)
    m.CreateDisplayColorAttr([(0.2, 0.4, 0.6)])
    mesh = get_mesh(m.GetPrim())
    np.testing.assert_allclose(mesh.color, (0.4845292, 0.66518503, 0.79773766), atol=1e-6)
    assert get_mesh(m.GetPrim(), load_visual_materials=False).color is None


def test_preview_surface_material_constants(stage):
    m = _cube(stage)
    m.CreateDisplayColorAttr([(1.0, 0.0, 0.0)])  # a bound material wins over displayColor
    mat = UsdShade.Material.Define(stage, "/Mat")
    shader = UsdShade.Shader.Define(stage, "/Mat/S")
    shader.CreateIdAttr("UsdPreviewSurface")
    shader.CreateInput("diffuseColor", Sdf.ValueTypeNames.Color3f).Set(Gf.Vec3f(0.2, 0.4, 0.6))
    shader.CreateInput("metallic", Sdf.ValueTypeNames.Float).Set(0.3)
    shader.CreateInput("roughness", Sdf.ValueTypeNames.Float).Set(0.7)
    mat.CreateSurfaceOutput().ConnectToSource(shader.ConnectableAPI(), "surface")
    UsdShade.MaterialBindingAPI.Apply(m.GetPrim()).Bind(mat)
    mesh = get_mesh(m.GetPrim())
    # reference: color (0.48452920, 0.66518503, 0.79773766), metallic 0.3, roughness 0.7
    np.testing.assert_allclose(mesh.color, (0.4845292, 0.66518503, 0.79773766), atol=1e-6)
    assert mesh.metallic == pytest.approx(0.3) and mesh.roughness == pytest.approx(0.7)


# ------------------------------------------------------------------------------------------------
# errors


def test_bad_topology_raises_with_prim_and_attribute(stage):
    m = UsdGeom.Mesh.Define(stage, "/bad")
    m.CreatePointsAttr([(0, 0, 0), (1, 0, 0), (0, 1, 0)])
    m.CreateFaceVertexCountsAttr([3])
    m.CreateFaceVertexIndicesAttr([0, 1, 5])
    with pytest.raises(USDImportError, match=r"/bad.*faceVertexIndices.*\[0, 2\]"):
        get_mesh(m.GetPrim())
    m.CreateFaceVertexIndicesAttr([0, 1])
    with pytest.raises(USDImportError, match="faceVertexCounts sum to 3"):
        get_mesh(m.GetPrim())
    m.CreateFaceVertexCountsAttr([2])
    with pytest.raises(USDImportError, match="at least 3"):
        get_mesh(m.GetPrim())


def test_missing_geometry_raises(stage):
    m = UsdGeom.Mesh.Define(stage, "/empty")
    with pytest.raises(USDImportError, match="/empty.points.*no default-time value"):
        get_mesh(m.GetPrim())
    m.GetPointsAttr().Set([(0, 0, 0), (1, 0, 0), (0, 1, 0)], 1.0)  # time samples only
    m.CreateFaceVertexCountsAttr([3])
    m.CreateFaceVertexIndicesAttr([0, 1, 2])
    with pytest.raises(USDImportError, match="points"):
        get_mesh(m.GetPrim())


def test_bad_arguments(stage):
    m = _cube(stage)
    with pytest.raises(ValueError, match="face_varying_normal_conversion"):
        get_mesh(m.GetPrim(), load_normals=True, face_varying_normal_conversion="smooth")
    with pytest.raises(ValueError, match="single UsdGeom.Mesh"):
        get_mesh(stage, return_uv_indices=True)
    with pytest.raises(ValueError):
        get_mesh()
    assert len(get_mesh(prim=m.GetPrim()).vertices) == 8
    empty = Usd.Stage.CreateInMemory()
    UsdGeom.Xform.Define(empty, "/X")
    with pytest.raises(USDImportError, match="no UsdGeom.Mesh"):
        get_mesh(empty)


def test_public_namespace():
    assert armillary.usd.get_mesh is get_mesh
    assert armillary.usd.get_tetmesh is get_tetmesh
    assert armillary.usd.find_tetmesh_prims is find_tetmesh_prims


# ------------------------------------------------------------------------------------------------
# tetrahedral meshes


def _tet_stage(tets=((0, 1, 2, 3), (1, 2, 3, 4)), orientation=None, material=None, api=False, ns="physics"):
    st = Usd.Stage.CreateInMemory()
    UsdGeom.SetStageMetersPerUnit(st, 0.01)  # not applied to TetMesh points (reference behaviour)
    t = UsdGeom.TetMesh.Define(st, "/T")
    t.CreatePointsAttr([(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 1)])
    t.CreateTetVertexIndicesAttr([Gf.Vec4i(*q) for q in tets])
    if orientation:
        t.CreateOrientationAttr(orientation)
    if material is not None:
        mat = UsdShade.Material.Define(st, "/Mat")
        if api:
            mat.GetPrim().AddAppliedSchema("PhysicsVolumeDeformableMaterialAPI")
        for k, v in material.items():
            mat.GetPrim().CreateAttribute(f"{ns}:{k}", Sdf.ValueTypeNames.Float).Set(v)
        UsdShade.MaterialBindingAPI.Apply(t.GetPrim()).Bind(mat, UsdShade.Tokens.weakerThanDescendants, "physics")
    return st, t.GetPrim()


REF_SURFACE = [0, 2, 1, 0, 1, 3, 0, 3, 2, 2, 3, 4, 1, 2, 4, 1, 4, 3]


def test_get_tetmesh_geometry(recwarn):
    st, prim = _tet_stage()
    tm = get_tetmesh(prim)
    assert isinstance(tm, armillary.TetMesh)
    np.testing.assert_allclose(tm.vertices, [(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 1)])
    np.testing.assert_array_equal(tm.tet_indices, [0, 1, 2, 3, 1, 2, 3, 4])
    np.testing.assert_array_equal(tm.surface_tri_indices, REF_SURFACE)
    assert tm.k_mu is None and tm.k_lambda is None and tm.k_damp is None and tm.density is None
    assert tm.custom_attributes == {}
    assert find_tetmesh_prims(st) == [prim]
    assert armillary.TetMesh.create_from_usd(prim).tet_count == 2


def test_get_tetmesh_left_handed_is_reoriented():
    _, prim = _tet_stage(tets=((0, 2, 1, 3), (1, 3, 2, 4)), orientation="leftHanded")
    tm = get_tetmesh(prim)
    np.testing.assert_array_equal(tm.tet_indices, [0, 1, 2, 3, 1, 2, 3, 4])
    np.testing.assert_array_equal(tm.surface_tri_indices, REF_SURFACE)


def _lame(E, nu):
    return E / (2 * (1 + nu)), E * nu / ((1 + nu) * (1 - 2 * nu))


@pytest.mark.parametrize(
    "material, api, ns, compat, expected, deprecated",
    [
        (dict(youngsModulus=1e6, poissonsRatio=0.3, density=500.0), True, "physics", None, (1e6, 0.3, 500.0), False),
        (dict(youngsModulus=1e6, poissonsRatio=0.3, density=500.0), False, "physics", None, (1e6, 0.3, 500.0), True),
        (dict(youngsModulus=1e6, poissonsRatio=0.3, density=500.0), False, "physics", (), None, False),
        (dict(youngsModulus=1e6, poissonsRatio=0.3, density=500.0), True, "physics", (), (1e6, 0.3, 500.0), False),
        (dict(density=3.0), True, "physics", None, (1e6, 0.3, 3.0), False),  # API fallbacks E=1e6, nu=0.3
        (dict(poissonsRatio=0.25), False, "physics", None, (None, None, None), True),  # no E, no API: unset
        (dict(youngsModulus=2e6, poissonsRatio=0.25), False, "omniphysics", ("omniphysics",), (2e6, 0.25, None), False),
        (dict(youngsModulus=2e6, poissonsRatio=0.25), False, "omniphysics", (), None, False),
        (dict(youngsModulus=1e6, poissonsRatio=0.3, density=500.0), False, "physxDeformableBody", None,
         (1e6, 0.3, 500.0), True),
    ],
)
def test_get_tetmesh_material(material, api, ns, compat, expected, deprecated):
    _, prim = _tet_stage(material=material, api=api, ns=ns)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tm = get_tetmesh(prim, compat_namespaces=compat)
    assert any(issubclass(w.category, DeprecationWarning) for w in caught) == deprecated
    if expected is None:
        assert tm.k_mu is None and tm.k_lambda is None and tm.density is None
        return
    E, nu, rho = expected
    if E is None:
        assert tm.k_mu is None and tm.k_lambda is None
    else:
        mu, lam = _lame(E, nu)
        np.testing.assert_allclose(tm.k_mu, [mu, mu], rtol=1e-6)
        np.testing.assert_allclose(tm.k_lambda, [lam, lam], rtol=1e-6)
    assert tm.density == rho


def test_get_tetmesh_material_reference_numbers():
    _, prim = _tet_stage(material=dict(youngsModulus=1e6, poissonsRatio=0.5), api=True)
    with pytest.warns(UserWarning, match="poissonsRatio"):
        tm = get_tetmesh(prim)
    np.testing.assert_allclose(tm.k_mu, [333555.72] * 2, rtol=1e-6)  # nu approximated as 0.499
    np.testing.assert_allclose(tm.k_lambda, [1.664443e08] * 2, rtol=1e-6)
    _, prim = _tet_stage(material=dict(youngsModulus=-5.0), api=True)
    with pytest.warns(UserWarning, match="youngsModulus"):
        tm = get_tetmesh(prim)
    np.testing.assert_allclose(tm.k_mu, [384615.38] * 2, rtol=1e-6)  # invalid E -> API fallback


def test_get_tetmesh_custom_attributes():
    from armillary.sim.custom_attributes import AttributeFrequency as F

    _, prim = _tet_stage()
    pv = UsdGeom.PrimvarsAPI(prim)
    pv.CreatePrimvar("temp", Sdf.ValueTypeNames.FloatArray, "vertex").Set([1, 2, 3, 4, 5])
    pv.CreatePrimvar("stiff", Sdf.ValueTypeNames.FloatArray, "uniform").Set([7, 8])
    pv.CreatePrimvar("cst", Sdf.ValueTypeNames.FloatArray, "constant").Set([9])
    prim.CreateAttribute("myns:perTet", Sdf.ValueTypeNames.IntArray).Set([1, 2])
    prim.CreateAttribute("ambig", Sdf.ValueTypeNames.FloatArray).Set([1, 2, 3])
    prim.CreateAttribute("scalar", Sdf.ValueTypeNames.Float).Set(3.0)
    UsdGeom.TetMesh(prim).CreateDisplayColorAttr([(1, 0, 0)])
    with pytest.warns(UserWarning, match="ambig"):
        tm = get_tetmesh(prim)
    got = {k: (v[0].tolist(), v[1]) for k, v in tm.custom_attributes.items()}
    assert got == {
        "temp": ([1, 2, 3, 4, 5], F.PARTICLE),
        "stiff": ([7, 8], F.TETRAHEDRON),
        "cst": ([9], F.ONCE),
        "myns:perTet": ([1, 2], F.TETRAHEDRON),
    }


def test_get_tetmesh_errors():
    _, prim = _tet_stage(tets=((0, 1, 2, 7),))
    with pytest.raises(USDImportError, match=r"/T.*tetVertexIndices.*7"):
        get_tetmesh(prim)
    _, prim = _tet_stage(tets=((0, 1, 2, 1),))
    with pytest.raises(USDImportError, match="repeats a vertex"):
        get_tetmesh(prim)
    st = Usd.Stage.CreateInMemory()
    x = UsdGeom.Xform.Define(st, "/X")
    with pytest.raises(USDImportError, match="/X.*points"):
        get_tetmesh(x.GetPrim())

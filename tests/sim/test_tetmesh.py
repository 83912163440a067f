"""armillary.TetMesh: surface extraction, validation, files, ModelBuilder.add_soft_mesh(mesh=...)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import numpy as np
import pytest
import warp as wp

import armillary
from armillary import TetMesh
from armillary.sim.custom_attributes import AttributeFrequency as F
from armillary.sim.custom_attributes import CustomAttribute

CUBE = np.array([(x, y, z) for z in (0, 1) for y in (0, 1) for x in (0, 1)], dtype=np.float32)
# 5-tet split of the unit cube (4 corner tets + the central one)
CUBE5 = np.array([[0, 1, 2, 4], [1, 3, 2, 7], [1, 4, 5, 7], [2, 4, 7, 6], [1, 2, 4, 7]])
# 6-tet split around the 0-7 diagonal
CUBE6 = np.array([[0, 1, 3, 7], [0, 3, 2, 7], [0, 2, 6, 7], [0, 6, 4, 7], [0, 4, 5, 7], [0, 5, 1, 7]])
UNIT_TET = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=np.float32)
KW = dict(pos=wp.vec3(0.0, 0.0, 0.0), rot=wp.quat_identity(), scale=1.0, vel=wp.vec3(0.0, 0.0, 0.0))


def _signed_vol6(v, t):
    a = v[t[:, 0]].astype(np.float64)
    return np.einsum("ij,ij->i", np.cross(v[t[:, 1]] - a, v[t[:, 2]] - a), v[t[:, 3]] - a)


def _check_closed_outward_cube_surface(tm):
    tris = tm.surface_tri_indices.reshape(-1, 3)
    assert len(tris) == 12  # two triangles per cube face
    v = tm.vertices.astype(np.float64)
    p = v[tris]
    n = np.cross(p[:, 1] - p[:, 0], p[:, 2] - p[:, 0])
    centroid = p.mean(axis=1) - 0.5
    # every triangle lies on a cube face and its normal points away from the cube center
    assert np.all(np.einsum("ij,ij->i", n, centroid) > 0)
    assert np.all(np.isclose(np.abs(n).max(axis=1), 1.0))
    # closed 2-manifold: every directed edge appears once and its reverse once
    edges = {(int(a), int(b)) for t in tris for a, b in ((t[0], t[1]), (t[1], t[2]), (t[2], t[0]))}
    assert len(edges) == 36 and all((b, a) in edges for a, b in edges)
    # the enclosed volume by the divergence theorem is the cube's
    assert np.einsum("ij,ij->i", p[:, 0], n).sum() / 6.0 == pytest.approx(1.0)


@pytest.mark.parametrize("tets", [CUBE5, CUBE6], ids=["5tets", "6tets"])
def test_cube_surface_is_closed_and_outward(tets):
    assert np.all(_signed_vol6(CUBE, tets) > 0)
    tm = TetMesh(CUBE, tets.reshape(-1))
    assert tm.vertex_count == 8 and tm.tet_count == len(tets)
    assert tm.tet_indices.dtype == np.int32 and tm.tet_indices.shape == (4 * len(tets),)
    assert tm.vertices.dtype == np.float32 and tm.vertices.shape == (8, 3)
    _check_closed_outward_cube_surface(tm)


def test_surface_order_matches_reference():
    # measured once on the reference engine (newton 1.8 TetMesh) for CUBE5
    ref = [0, 2, 1, 0, 1, 4, 0, 4, 2, 1, 2, 3, 3, 2, 7, 1, 3, 7, 1, 5, 4, 4, 5, 7, 1, 7, 5, 4, 7, 6, 2, 4, 6, 2, 6, 7]
    np.testing.assert_array_equal(TetMesh(CUBE, CUBE5).surface_tri_indices, ref)
    np.testing.assert_array_equal(TetMesh.compute_surface_triangles(CUBE5.reshape(-1)), ref)
    unit = TetMesh(UNIT_TET, [0, 1, 2, 3])
    np.testing.assert_array_equal(unit.surface_tri_indices, [0, 2, 1, 1, 2, 3, 0, 1, 3, 0, 3, 2])


def test_inverted_tets_still_give_an_outward_surface():
    flipped = CUBE5[:, [0, 2, 1, 3]]
    assert np.all(_signed_vol6(CUBE, flipped) < 0)
    _check_closed_outward_cube_surface(TetMesh(CUBE, flipped))
    # without vertices only the per-tet face convention is available: inward for inverted tets
    tris = TetMesh.compute_surface_triangles(flipped).reshape(-1, 3)
    assert len(tris) == 12


def test_materials_are_broadcast_and_checked():
    tm = TetMesh(CUBE, CUBE5, k_mu=5.0, k_lambda=np.arange(5.0), k_damp=[0.1], density=7)
    np.testing.assert_allclose(tm.k_mu, [5.0] * 5)
    np.testing.assert_allclose(tm.k_lambda, np.arange(5.0))
    np.testing.assert_allclose(tm.k_damp, [0.1] * 5)
    assert tm.density == 7
    bare = TetMesh(CUBE, CUBE5)
    assert bare.k_mu is None and bare.k_lambda is None and bare.k_damp is None and bare.density is None
    with pytest.raises(ValueError, match=r"k_mu array length \(2\) does not match tet count \(5\)"):
        TetMesh(CUBE, CUBE5, k_mu=[1.0, 2.0])
    with pytest.raises(ValueError, match="density"):
        TetMesh(CUBE, CUBE5, density=-1.0)


@pytest.mark.parametrize(
    "vertices, tets, match",
    [
        (UNIT_TET, [0, 1, 2], "multiple of 4"),
        (UNIT_TET, [0, 1, 2, 4], r"index 4, out of range for 4 vertices"),
        (UNIT_TET, [0, 1, 2, -1], "negative index -1"),
        (UNIT_TET, [0, 0, 1, 2], r"tetrahedron 0 repeats a vertex: \[0, 0, 1, 2\]"),
        (np.array([[0, 0, 0], [1, 0, 0], [2, 0, 0], [3, 0, 0]]), [0, 1, 2, 3], "degenerate"),
        (np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]]), [0, 1, 2, 3], "coplanar"),
        (np.zeros((4, 2)), [0, 1, 2, 3], r"shape \(N, 3\)"),
        (np.array([[np.nan, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]]), [0, 1, 2, 3], "finite"),
        (UNIT_TET, [0.5, 1, 2, 3], "integers"),
    ],
)
def test_validation_errors(vertices, tets, match):
    with pytest.raises(ValueError, match=match):
        TetMesh(vertices, tets)


def test_custom_attribute_frequencies():
    tm = TetMesh(CUBE, CUBE5, custom_attributes={
        "a": np.arange(8.0), "b": np.arange(5.0), "t": np.arange(12.0), "c": (np.arange(1.0), F.ONCE),
    })  # fmt: skip
    assert {k: v[1] for k, v in tm.custom_attributes.items()} == {
        "a": F.PARTICLE, "b": F.TETRAHEDRON, "t": F.TRIANGLE, "c": F.ONCE,
    }  # fmt: skip
    with pytest.raises(ValueError, match="matches none of"):
        TetMesh(CUBE, CUBE5, custom_attributes={"x": np.arange(3.0)})
    # unit tet: 4 vertices and 4 surface triangles
    with pytest.raises(ValueError, match="vertex_count, tri_count"):
        TetMesh(UNIT_TET, [0, 1, 2, 3], custom_attributes={"x": np.arange(4.0)})


def test_npz_round_trip(tmp_path):
    tm = TetMesh(CUBE * 0.1, CUBE6, k_mu=np.arange(1.0, 7.0), k_lambda=2.0, k_damp=0.5, density=900.0,
                 custom_attributes={"temp": np.arange(8.0), "flag": (np.arange(6, dtype=np.int32), F.TETRAHEDRON)})
    path = tmp_path / "cube.npz"
    tm.save(path)
    back = TetMesh.create_from_file(path)
    np.testing.assert_array_equal(back.vertices, tm.vertices)
    np.testing.assert_array_equal(back.tet_indices, tm.tet_indices)
    np.testing.assert_array_equal(back.surface_tri_indices, tm.surface_tri_indices)
    np.testing.assert_allclose(back.k_mu, tm.k_mu)
    np.testing.assert_allclose(back.k_lambda, [2.0] * 6)
    np.testing.assert_allclose(back.k_damp, [0.5] * 6)
    assert back.density == 900.0
    assert set(back.custom_attributes) == {"temp", "flag"}
    np.testing.assert_array_equal(back.custom_attributes["flag"][0], np.arange(6))
    assert back.custom_attributes["flag"][1] == F.TETRAHEDRON
    bare = tmp_path / "bare.npz"
    TetMesh(UNIT_TET, [0, 1, 2, 3]).save(bare)
    assert TetMesh.create_from_file(bare).k_mu is None


def test_file_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        TetMesh.create_from_file(tmp_path / "missing.npz")
    np.savez(tmp_path / "bad.npz", points=np.zeros((4, 3)))
    with pytest.raises(ValueError, match="'vertices' and 'tet_indices'"):
        TetMesh.create_from_file(tmp_path / "bad.npz")
    if importlib.util.find_spec("meshio") is None:
        (tmp_path / "m.vtk").write_text("x")
        with pytest.raises(ValueError, match="meshio"):
            TetMesh.create_from_file(tmp_path / "m.vtk")


def test_import_armillary_stays_light():
    code = (
        "import sys, armillary; t = armillary.TetMesh; "
        "assert 'pxr' not in sys.modules and 'armillary_importer_usd' not in sys.modules, sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ------------------------------------------------------------------------------------------------
# ModelBuilder.add_soft_mesh(mesh=TetMesh)


def test_add_soft_mesh_uses_mesh_materials_then_builder_defaults():
    b = armillary.ModelBuilder()
    tm = TetMesh(UNIT_TET, [0, 1, 2, 3], k_mu=3.0, k_lambda=np.array([4.0]), density=10.0)
    b.add_soft_mesh(mesh=tm, **KW)
    # values measured on the reference engine for the same call
    assert b.tet_materials == [(3.0, 4.0, 0.0)]
    np.testing.assert_allclose(b.particle_mass, [10.0 / 24.0] * 4)
    assert [tuple(t) for t in b.tri_indices] == [(0, 2, 1), (1, 2, 3), (0, 1, 3), (0, 3, 2)]
    # explicit arguments override the mesh, unset values fall back to the builder defaults
    b2 = armillary.ModelBuilder()
    b2.add_soft_mesh(mesh=tm, k_mu=7.0, density=2.0, **KW)
    assert b2.tet_materials == [(7.0, 4.0, b2.default_tet_k_damp)]
    np.testing.assert_allclose(b2.particle_mass, [2.0 / 24.0] * 4)
    b3 = armillary.ModelBuilder()
    b3.add_soft_mesh(mesh=TetMesh(UNIT_TET, [0, 1, 2, 3]), **KW)
    assert b3.tet_materials == [(b3.default_tet_k_mu, b3.default_tet_k_lambda, b3.default_tet_k_damp)]
    np.testing.assert_allclose(b3.particle_mass, [b3.default_tet_density / 24.0] * 4)


def test_add_soft_mesh_custom_attributes():
    tm = TetMesh(CUBE, CUBE5, custom_attributes={"a": np.arange(8.0), "b": np.arange(5.0), "t": np.arange(12.0)})
    b = armillary.ModelBuilder()
    with pytest.raises(ValueError, match="'a' is not registered"):
        b.add_soft_mesh(mesh=tm, **KW)
    assert len(b.particle_q) == 0 and len(b.tet_indices) == 0  # builder unchanged
    b.add_custom_attribute(CustomAttribute(name="a", frequency=F.PARTICLE, dtype=wp.float32))
    b.add_custom_attribute(CustomAttribute(name="b", frequency=F.TETRAHEDRON, dtype=wp.float32))
    b.add_custom_attribute(CustomAttribute(name="t", frequency=F.TRIANGLE, dtype=wp.float32))
    b.add_particle((5.0, 5.0, 5.0), (0.0, 0.0, 0.0), 1.0)
    b.add_soft_mesh(mesh=tm, **KW)
    model = b.finalize(device="cpu")
    np.testing.assert_allclose(model.a.numpy(), [0.0, *range(8)])
    np.testing.assert_allclose(model.b.numpy(), np.arange(5.0))
    np.testing.assert_allclose(model.t.numpy(), np.arange(12.0))
    # the mesh's surface triangles (offset by the earlier particle) are the generated surface
    np.testing.assert_array_equal(model.tri_indices.numpy().reshape(-1), tm.surface_tri_indices + 1)


def test_tetmesh_soft_body_steps_with_vbd():
    # core tests run with an isolated plugin registry: use the plugin's class directly
    SolverVBD = pytest.importorskip("armillary_solver_vbd.solver").SolverVBD
    tm = TetMesh(CUBE * 0.1, CUBE5, k_mu=1.0e4, k_lambda=1.0e5, k_damp=1.0e-3, density=500.0)
    b = armillary.ModelBuilder()
    b.add_soft_mesh(mesh=tm, pos=wp.vec3(0.0, 0.0, 0.2), rot=wp.quat_identity(), scale=1.0, vel=wp.vec3(0.0))
    b.color()
    model = b.finalize(device="cpu")
    assert model.tet_count == 5
    np.testing.assert_allclose(model.tet_materials.numpy()[:, 0], 1.0e4)
    solver = SolverVBD(model, iterations=5)
    s0, s1, control = model.state(), model.state(), model.control()
    z0 = s0.particle_q.numpy()[:, 2].mean()
    for _ in range(20):
        solver.step(s0, s1, control, None, 1.0 / 600.0)  # free fall: no contacts
        s0, s1 = s1, s0
    x = s0.particle_q.numpy()
    assert np.isfinite(x).all()
    assert x[:, 2].mean() < z0  # it falls under gravity
    # and keeps its shape: edge lengths within 5 % of the rest lengths
    t = model.tet_indices.numpy()
    x0 = model.particle_q.numpy()
    for i, j in ((0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)):
        rest = np.linalg.norm(x0[t[:, i]] - x0[t[:, j]], axis=1)
        now = np.linalg.norm(x[t[:, i]] - x[t[:, j]], axis=1)
        np.testing.assert_allclose(now, rest, rtol=0.05)

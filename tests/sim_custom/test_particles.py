"""Particles, springs, cloth / soft grids, rest poses, merging and coloring."""

import math

import numpy as np
import pytest
import warp as wp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import armillary as newton
from armillary.sim.graph_coloring import ColoringAlgorithm, validate_coloring

ModelBuilder = newton.ModelBuilder
ID = wp.quat_identity()


def _grid(b, dim_x, dim_y, cell_x=0.5, cell_y=0.25, **kw):
    b.add_cloth_grid(pos=wp.vec3(0, 0, 1), rot=ID, vel=wp.vec3(0, 0, 0), dim_x=dim_x, dim_y=dim_y,
                     cell_x=cell_x, cell_y=cell_y, mass=0.1, **kw)


def test_add_particle_defaults_and_model_arrays():
    b = ModelBuilder()
    i = b.add_particle((1, 2, 3), (0, 0, 1), 2.0)
    j = b.add_particle((0, 0, 0), (0, 0, 0), 0.0, radius=0.3, flags=0)
    assert (i, j) == (0, 1)
    b.add_particles([(0, 0, 0), (1, 1, 1)], [(0, 0, 0)] * 2, [1.0, 4.0])
    m = b.finalize(device="cpu")
    assert m.particle_count == 4
    np.testing.assert_allclose(m.particle_q.numpy()[0], [1, 2, 3])
    np.testing.assert_allclose(m.particle_inv_mass.numpy(), [0.5, 0.0, 1.0, 0.25])
    np.testing.assert_allclose(m.particle_radius.numpy(), [0.1, 0.3, 0.1, 0.1])
    np.testing.assert_array_equal(m.particle_flags.numpy(), [1, 0, 1, 1])
    np.testing.assert_array_equal(m.particle_world.numpy(), [-1, -1, -1, -1])
    assert m.particle_q.dtype == wp.vec3 and m.particle_flags.dtype == wp.int32
    s = m.state()
    np.testing.assert_allclose(s.particle_qd.numpy()[0], [0, 0, 1])
    assert m.soft_contact_ke == 1000.0 and m.soft_contact_mu == 0.5


def test_spring_rest_length_and_layout():
    b = ModelBuilder()
    b.add_particle((0, 0, 0), (0, 0, 0), 1.0)
    b.add_particle((1, 1, 1), (0, 0, 0), 1.0)
    b.add_spring(0, 1, 1.0, 2.0, 3.0)
    m = b.finalize(device="cpu")
    assert m.spring_count == 1
    np.testing.assert_array_equal(m.spring_indices.numpy(), [0, 1])
    np.testing.assert_allclose(m.spring_rest_length.numpy(), [math.sqrt(3)], rtol=1e-6)
    np.testing.assert_allclose([m.spring_stiffness.numpy()[0], m.spring_damping.numpy()[0], m.spring_control.numpy()[0]], [1, 2, 3])


def test_cloth_grid_counts_areas_poses_and_fixing():
    b = ModelBuilder()
    _grid(b, 2, 1, fix_left=True, tri_ke=11.0, tri_ka=12.0, tri_kd=13.0, edge_ke=5.0, edge_kd=6.0, particle_radius=0.02)
    m = b.finalize(device="cpu")
    assert (m.particle_count, m.tri_count, m.edge_count) == (6, 4, 9)
    np.testing.assert_allclose(m.tri_areas.numpy(), [0.0625] * 4)
    np.testing.assert_array_equal(m.tri_indices.numpy(), [[0, 1, 3], [1, 4, 3], [1, 2, 4], [2, 5, 4]])
    np.testing.assert_allclose(m.tri_poses.numpy()[0], [[2, 0], [0, 4]])
    np.testing.assert_allclose(m.tri_poses.numpy()[1], [[4, -2], [0, 2]])
    np.testing.assert_allclose(m.tri_materials.numpy()[0], [11, 12, 13, 0, 0])
    np.testing.assert_allclose(m.particle_mass.numpy(), [0, 0.1, 0.1, 0, 0.1, 0.1], rtol=1e-6)
    np.testing.assert_array_equal(m.particle_flags.numpy(), [0, 1, 1, 0, 1, 1])
    np.testing.assert_allclose(m.edge_rest_angle.numpy(), 0.0)
    np.testing.assert_allclose(m.edge_bending_properties.numpy(), [[5, 6]] * 9)
    edges = m.edge_indices.numpy()
    assert sorted(map(tuple, edges[:, 2:].tolist()))  # every edge has its two vertices
    interior = edges[edges[:, 1] >= 0]
    assert len(interior) == 3  # 2 diagonals + 1 shared vertical edge


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dim_x=st.integers(1, 5), dim_y=st.integers(1, 5), cx=st.floats(0.1, 2.0), cy=st.floats(0.1, 2.0),
       springs=st.booleans(), reverse=st.booleans())
def test_cloth_grid_counts_property(dim_x, dim_y, cx, cy, springs, reverse):
    b = ModelBuilder()
    _grid(b, dim_x, dim_y, cell_x=cx, cell_y=cy, add_springs=springs, reverse_winding=reverse)
    n_edges = dim_x * (dim_y + 1) + dim_y * (dim_x + 1) + dim_x * dim_y
    assert b.particle_count == (dim_x + 1) * (dim_y + 1)
    assert b.tri_count == 2 * dim_x * dim_y
    assert b.edge_count == n_edges
    assert b.spring_count == (n_edges + (n_edges - 2 * (dim_x + dim_y)) if springs else 0)
    assert sum(b.tri_areas) == pytest.approx(dim_x * dim_y * cx * cy, rel=1e-6)
    # rest poses invert the rest edge matrix: |det(pose)| = 1 / (2 * area)
    for pose, area in zip(b.tri_poses, b.tri_areas):
        assert abs(np.linalg.det(np.asarray(pose))) == pytest.approx(1.0 / (2.0 * area), rel=1e-6)
    b.color(include_bending=True)
    assert _coloring_valid(b, include_bending=True)


def _coloring_valid(b, include_bending=False):
    groups = b.particle_color_groups
    covered = np.concatenate(groups) if groups else np.zeros(0, int)
    assert sorted(covered.tolist()) == list(range(b.particle_count))
    return validate_coloring(b.particle_count, b._particle_graph_edges(include_bending), groups)


def test_element_rest_quantities():
    b = ModelBuilder()
    for p in [(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1)]:
        b.add_particle(p, (0, 0, 0), 1.0)
    assert b.add_tetrahedron(0, 1, 2, 3, k_mu=1.0, k_lambda=2.0, k_damp=3.0) == pytest.approx(1 / 6)
    with pytest.warns(UserWarning):
        assert b.add_tetrahedron(0, 2, 1, 3) < 0  # inverted: not added
    assert b.tet_count == 1
    assert b.add_triangle(0, 1, 2) == pytest.approx(0.5)
    with pytest.warns(UserWarning):
        assert b.add_triangle(0, 0, 1) == 0.0
    assert b.tri_count == 1
    e = b.add_edge(0, 1, 2, 3)
    assert b.edge_rest_angle[e] == pytest.approx(-2.1862760442619207)
    assert b.edge_rest_length[e] == pytest.approx(math.sqrt(2))
    b.add_edge(3, -1, 0, 1)
    b.add_edges([0], [1], [2], [3], rest=[0.3])
    assert b.edge_rest_angle[1:] == [0.0, 0.3]
    m = b.finalize(device="cpu")
    np.testing.assert_allclose(m.tet_poses.numpy()[0], np.eye(3))
    np.testing.assert_allclose(m.tet_materials.numpy(), [[1, 2, 3]])
    assert m.tet_poses.dtype == wp.mat33 and m.tri_poses.dtype == wp.mat22


def test_soft_grid_and_soft_mesh():
    b = ModelBuilder()
    b.add_soft_grid(pos=wp.vec3(0, 0, 0), rot=ID, vel=wp.vec3(0, 0, 0), dim_x=2, dim_y=1, dim_z=1, cell_x=1,
                    cell_y=2, cell_z=1, density=10.0, k_mu=1.0, k_lambda=2.0, k_damp=0.1, fix_left=True)
    assert b.particle_count == 12 and b.tet_count == 10
    vols = [np.linalg.det(np.linalg.inv(np.asarray(p))) / 6 for p in b.tet_poses]
    assert all(v > 0 for v in vols) and sum(vols) == pytest.approx(4.0)
    assert b.tri_count == 20 and b.edge_count == 30  # closed surface of a 2x1x1 box
    assert b.particle_mass[0] == 0.0 and b.particle_mass[1] == pytest.approx(20.0)
    b.color()
    assert _coloring_valid(b)
    b2 = ModelBuilder()
    b2.add_soft_mesh(pos=wp.vec3(0, 0, 0), rot=ID, scale=1.0, vel=wp.vec3(0, 0, 0),
                     vertices=[(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1)], indices=[0, 1, 2, 3], density=6.0,
                     k_mu=1.0, k_lambda=1.0, k_damp=0.0)
    np.testing.assert_allclose(b2.particle_mass, [0.25] * 4)
    assert (b2.tri_count, b2.edge_count) == (4, 6)


def test_cloth_mesh_mass_from_density():
    b = ModelBuilder()
    b.add_cloth_mesh(pos=wp.vec3(0, 0, 0), rot=ID, scale=2.0, vel=wp.vec3(0, 0, 0),
                     vertices=[(0, 0, 0), (1, 0, 0), (0, 1, 0), (1, 1, 0)], indices=[0, 1, 2, 1, 3, 2], density=3.0)
    np.testing.assert_allclose(b.particle_mass, [2.0, 4.0, 4.0, 2.0])
    assert b.edge_count == 5


@pytest.mark.parametrize("algorithm", list(ColoringAlgorithm))
@pytest.mark.parametrize("balance", [True, False])
def test_coloring_valid(algorithm, balance):
    b = ModelBuilder()
    _grid(b, 6, 4, add_springs=True)
    b.color(include_bending=True, balance_colors=balance, coloring_algorithm=algorithm)
    assert _coloring_valid(b, include_bending=True)
    m = b.finalize(device="cpu")
    assert len(m.particle_color_groups) == len(b.particle_color_groups)
    colors = m.particle_colors.numpy()
    for c, g in enumerate(m.particle_color_groups):
        assert np.all(colors[g.numpy()] == c)


def test_set_coloring():
    b = ModelBuilder()
    _grid(b, 1, 1)
    b.set_coloring([[0, 3], [1], [2]])
    m = b.finalize(device="cpu")
    np.testing.assert_array_equal(m.particle_colors.numpy(), [0, 1, 2, 0])


def test_replicate_particles_into_worlds():
    sub = ModelBuilder()
    _grid(sub, 1, 1)
    sub.color()
    groups = [len(g) for g in sub.particle_color_groups]
    main = ModelBuilder()
    main.add_particle((0, 0, 0), (0, 0, 0), 1.0)
    main.replicate(sub, 2, spacing=(5, 0, 0))
    m = main.finalize(device="cpu")
    assert m.particle_count == 9 and m.tri_count == 4 and m.edge_count == 10
    np.testing.assert_array_equal(m.particle_world.numpy(), [-1, 0, 0, 0, 0, 1, 1, 1, 1])
    tri = m.tri_indices.numpy()
    assert tri.min() == 1 and np.all(tri[2:] >= 5)
    edges = m.edge_indices.numpy()
    assert np.all((edges[:, 1] == -1) | (edges[:, 1] >= 1))
    q = m.particle_q.numpy()
    assert q[5, 0] - q[1, 0] == pytest.approx(5.0)
    assert [len(g) for g in main.particle_color_groups] == [2 * n for n in groups]
    assert validate_coloring(9, main._particle_graph_edges(), main.particle_color_groups)
    np.testing.assert_array_equal(m.particle_world_start.numpy(), [1, 5, 9, 9])


def test_particle_custom_attributes():
    b = ModelBuilder()
    b.add_custom_attribute(ModelBuilder.CustomAttribute(name="pv", frequency=newton.Model.AttributeFrequency.PARTICLE,
                                                        dtype=wp.float32, default=1.5, namespace="ns"))
    b.add_custom_attribute(ModelBuilder.CustomAttribute(name="tv", frequency=newton.Model.AttributeFrequency.TRIANGLE,
                                                        dtype=wp.int32))
    b.add_particle((0, 0, 0), (0, 0, 0), 1.0, custom_attributes={"ns:pv": 9.0})
    _grid(b, 1, 1, custom_attributes_particles={"ns:pv": 3.0}, custom_attributes_triangles={"tv": 7})
    b.add_particles([(0, 0, 0), (1, 0, 0)], [(0, 0, 0)] * 2, [1.0, 1.0], custom_attributes={"ns:pv": [4.0, 5.0]})
    with pytest.raises(ValueError):
        b.add_particle((0, 0, 0), (0, 0, 0), 1.0, custom_attributes={"tv": 1})
    m = b.finalize(device="cpu")
    np.testing.assert_allclose(m.ns.pv.numpy(), [9.0, 3, 3, 3, 3, 4.0, 5.0])  # the failed add_particle added nothing
    np.testing.assert_array_equal(m.tv.numpy(), [7, 7])


def test_deformable_objects_are_recorded_with_labels_and_ranges():
    import warp as wp

    import armillary as newton

    cloth = newton.ModelBuilder()
    cloth.add_cloth_grid(pos=(0.0, 0.0, 1.0), rot=wp.quat_identity(), vel=(0.0, 0.0, 0.0), dim_x=2, dim_y=2,
                         cell_x=0.1, cell_y=0.1, mass=0.1, label="sheet")
    cloth.add_cloth_grid(pos=(0.0, 0.0, 2.0), rot=wp.quat_identity(), vel=(0.0, 0.0, 0.0), dim_x=1, dim_y=1,
                         cell_x=0.1, cell_y=0.1, mass=0.1)
    assert cloth.surface_label == ["sheet", "surface_1"]
    scene = newton.ModelBuilder()
    scene.add_world(cloth, label_prefix="env0")
    scene.add_world(cloth, label_prefix="env1")
    model = scene.finalize(device="cpu")
    assert model.surface_count == 4
    assert model.surface_label == ["env0/sheet", "env0/surface_1", "env1/sheet", "env1/surface_1"]
    assert model.surface_world.numpy().tolist() == [0, 0, 1, 1]
    # 9 + 4 particles per world, 8 + 2 triangles per world
    assert model.surface_particle_start.numpy().tolist() == [0, 9, 13, 22]
    assert model.surface_particle_end.numpy().tolist() == [9, 13, 22, 26]
    assert model.surface_tri_start.numpy().tolist() == [0, 8, 10, 18]
    assert model.surface_tri_end.numpy().tolist() == [8, 10, 18, 20]
    ends = model.surface_edge_end.numpy()
    assert ends[-1] == model.edge_count
    assert model.volume_count == 0 and model.volume_label == []

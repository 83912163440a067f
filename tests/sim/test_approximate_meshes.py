"""ModelBuilder.approximate_meshes: convex hulls, bounding primitives, decompositions, bookkeeping."""

from __future__ import annotations

import sys
import types
import warnings

import numpy as np
import pytest
import warp as wp

import armillary as newton
from armillary.geometry.hull import convex_hull, hull_volume
from armillary.testing.assets import shared_assets_dir

GeoType, ShapeFlags = newton.GeoType, newton.ShapeFlags
COLLIDE = int(ShapeFlags.COLLIDE_SHAPES) | int(ShapeFlags.COLLIDE_PARTICLES)


def l_shape_mesh() -> newton.Mesh:
    """Non-convex L made of two unit boxes (vertices only matter for the hull)."""
    a = newton.Mesh.create_box(0.5, 0.5, 0.5)
    v = np.concatenate([a.vertices, a.vertices + np.array([1.0, 0.0, 0.0], np.float32),
                        a.vertices + np.array([0.0, 0.0, 1.0], np.float32)])  # fmt: skip
    i = np.concatenate([a.indices, a.indices + 8, a.indices + 16])
    return newton.Mesh(v, i)


@pytest.fixture(autouse=True)
def registry():
    """The process-wide plugin registry: the robot test needs the installed MJCF importer."""
    from armillary.plugins import get_registry

    return get_registry()


def make_builder():
    b = newton.ModelBuilder()
    b.add_custom_attribute(newton.ModelBuilder.CustomAttribute(
        name="tag", frequency=newton.Model.AttributeFrequency.SHAPE, dtype=wp.float32))  # fmt: skip
    body = b.add_body(xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()))
    cfg = newton.ModelBuilder.ShapeConfig(mu=0.3, collision_group=3, margin=0.01, density=500.0)
    tf = wp.transform((0.1, 0.2, 0.3), wp.quat_from_axis_angle(wp.vec3(0.0, 0.0, 1.0), 0.4))
    mesh_shape = b.add_shape_mesh(body, xform=tf, mesh=l_shape_mesh(), scale=(2.0, 1.0, 0.5), cfg=cfg,
                                  label="link_mesh", custom_attributes={"tag": 7.0})  # fmt: skip
    sphere = b.add_shape_sphere(body, radius=0.1)
    return b, body, mesh_shape, sphere


def per_shape_lengths(b):
    return {k: len(v) for k, v in vars(b).items() if k.startswith(("shape_", "_shape_")) and isinstance(v, list)}


def test_convex_hull_replaces_in_place():
    b, body, s, sphere = make_builder()
    mass, inertia = b.body_mass[body], np.array(b.body_inertia[body])
    before = {k: getattr(b, k)[s] for k in ("shape_scale", "shape_transform", "shape_body", "shape_flags",
                                            "shape_collision_group", "shape_material_mu", "shape_margin")}  # fmt: skip
    n = b.shape_count
    assert b.approximate_meshes() == {s}
    assert b.shape_count == n
    assert b.shape_type[s] == GeoType.CONVEX_MESH
    for k, v in before.items():
        assert getattr(b, k)[s] == v, k
    hull = b.shape_source[s]
    assert isinstance(hull, newton.Mesh)
    # the L's hull: the 3 boxes' convex hull; a subset of the input vertices
    src_v = {tuple(p) for p in l_shape_mesh().vertices.tolist()}
    assert all(tuple(p) in src_v for p in hull.vertices.tolist())
    ref_v, ref_i = convex_hull(l_shape_mesh().vertices)
    assert hull_volume(hull.vertices, hull.indices) == pytest.approx(hull_volume(ref_v, ref_i))
    assert hull_volume(hull.vertices, hull.indices) > 3.0  # more than the L itself
    # mass properties are left as they were
    assert b.body_mass[body] == mass
    np.testing.assert_array_equal(np.array(b.body_inertia[body]), inertia)
    assert b.shape_collision_radius[s] == pytest.approx(
        float(np.linalg.norm(hull.vertices * np.array([2.0, 1.0, 0.5]), axis=1).max()), rel=1e-6)
    b.finalize()


def test_keep_visual_shapes_appends_collision_shape():
    b, body, s, sphere = make_builder()
    b.add_shape_collision_filter_pair(s, sphere)  # already filtered (same body); stays valid
    other = b.add_body()
    far = b.add_shape_box(other, hx=0.1, hy=0.1, hz=0.1)
    b.add_shape_collision_filter_pair(s, far)
    n = b.shape_count
    assert b.approximate_meshes(keep_visual_shapes=True) == {s}
    assert b.shape_count == n + 1
    new = n
    assert len(set(per_shape_lengths(b).values())) == 1  # every per-shape list grew
    assert b.shape_type[s] == GeoType.MESH
    assert b.shape_flags[s] & COLLIDE == 0 and b.shape_flags[s] & int(ShapeFlags.VISIBLE)
    assert b.shape_type[new] == GeoType.CONVEX_MESH
    assert b.shape_flags[new] & int(ShapeFlags.COLLIDE_SHAPES)
    assert not b.shape_flags[new] & int(ShapeFlags.VISIBLE)
    assert b.shape_body[new] == body and b.shape_transform[new] == b.shape_transform[s]
    assert b.shape_scale[new] == b.shape_scale[s]
    assert b.shape_material_mu[new] == pytest.approx(0.3) and b.shape_collision_group[new] == 3
    assert new in b.body_shapes[body]
    pairs = b.shape_collision_filter_pairs
    assert (s, new) in pairs and (sphere, new) in pairs and (new, far) in pairs
    assert b.custom_attributes["tag"].values[new] == 7.0
    assert b.shape_label[new] != b.shape_label[s]
    model = b.finalize()
    assert model.shape_count == n + 1


@pytest.mark.parametrize("scale", [(1.0, 1.0, 1.0), (2.0, 0.5, 3.0)])
def test_bounding_box_is_oriented_and_tight(scale):
    q = wp.quat_from_axis_angle(wp.normalize(wp.vec3(1.0, 2.0, 3.0)), 0.7)
    R = np.array(wp.quat_to_matrix(q)).reshape(3, 3)
    box = newton.Mesh.create_box(0.4, 0.2, 0.1)
    verts = box.vertices @ R.T + np.array([0.3, -0.2, 0.1])
    mesh = newton.Mesh(verts, box.indices)
    b = newton.ModelBuilder()
    body = b.add_body()
    tf = wp.transform((0.0, 0.0, 0.5), wp.quat_identity())
    s = b.add_shape_mesh(body, xform=tf, mesh=mesh, scale=scale)
    b.approximate_meshes("bounding_box")
    assert b.shape_type[s] == GeoType.BOX and b.shape_source[s] is None
    half = np.array(b.shape_scale[s])
    expected = np.prod(np.array([0.4, 0.2, 0.1])) * np.prod(scale)
    # tight: volume of the fitted box close to the (scaled) mesh box volume (exact for uniform scale)
    if scale == (1.0, 1.0, 1.0):
        assert np.prod(half) == pytest.approx(expected, rel=1e-4)
    # every scaled mesh vertex lies in the box (shape frame -> body frame)
    btf = b.shape_transform[s]
    for p in np.asarray(verts, np.float64) * np.array(scale):
        world = wp.transform_point(tf, wp.vec3(*p))
        local = np.array(wp.transform_point(wp.transform_inverse(btf), world))
        assert np.all(np.abs(local) <= half + 1e-5)


def test_bounding_sphere():
    pts = newton.Mesh.create_box(0.5, 0.5, 0.5).vertices + np.array([1.0, 0.0, 0.0], np.float32)
    mesh = newton.Mesh(pts, newton.Mesh.create_box(0.5).indices)
    b = newton.ModelBuilder()
    body = b.add_body()
    s = b.add_shape_mesh(body, mesh=mesh, scale=(2.0, 2.0, 2.0))
    assert b.approximate_meshes(method="bounding_sphere") == {s}
    assert b.shape_type[s] == GeoType.SPHERE
    assert b.shape_scale[s][0] == pytest.approx(np.sqrt(3.0), rel=1e-6)  # half diagonal of a 2 m cube
    np.testing.assert_allclose(np.array(b.shape_transform[s].p), (2.0, 0.0, 0.0), atol=1e-6)


def test_defaults_and_shape_indices_selection():
    b = newton.ModelBuilder()
    body = b.add_body()
    visual_cfg = newton.ModelBuilder.ShapeConfig(has_shape_collision=False, has_particle_collision=False)
    coll = b.add_shape_mesh(body, mesh=l_shape_mesh())
    vis = b.add_shape_mesh(body, mesh=l_shape_mesh(), cfg=visual_cfg)
    prim = b.add_shape_box(body)
    assert b.approximate_meshes() == {coll}  # default: colliding MESH shapes only
    assert b.shape_type[vis] == GeoType.MESH
    assert b.approximate_meshes(shape_indices=[vis, prim]) == {vis}  # non-MESH ignored
    assert b.shape_type[prim] == GeoType.BOX


def test_shared_mesh_hulled_once():
    b = newton.ModelBuilder()
    body = b.add_body()
    m = l_shape_mesh()
    s0 = b.add_shape_mesh(body, mesh=m)
    s1 = b.add_shape_mesh(body, mesh=m, scale=(2.0, 2.0, 2.0))
    b.approximate_meshes()
    assert b.shape_source[s0] is b.shape_source[s1]


def test_maxhullvert_respected():
    rng = np.random.default_rng(1)
    v = rng.normal(size=(400, 3))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    vv, ii = convex_hull(v)
    b = newton.ModelBuilder()
    body = b.add_body()
    s0 = b.add_shape_mesh(body, mesh=newton.Mesh(vv, ii, maxhullvert=20))
    s1 = b.add_shape_mesh(body, mesh=newton.Mesh(vv.copy(), ii))
    b.approximate_meshes()
    assert len(b.shape_source[s0].vertices) <= 20
    assert len(b.shape_source[s1].vertices) <= newton.Mesh.MAX_HULL_VERTICES
    b2 = newton.ModelBuilder()
    s = b2.add_shape_mesh(b2.add_body(), mesh=newton.Mesh(vv, ii))
    b2.approximate_meshes("convex_hull", maxhullvert=-1)
    assert len(b2.shape_source[s].vertices) == len(vv)


def test_errors():
    b, body, s, sphere = make_builder()
    with pytest.raises(ValueError, match="unknown method 'hull'.*convex_hull"):
        b.approximate_meshes("hull")
    with pytest.raises(ValueError, match="does not ship"):
        b.approximate_meshes("poisson")
    with pytest.raises(ValueError, match="shape index 99 is out of range; allowed: 0..1"):
        b.approximate_meshes(shape_indices=[99])
    with pytest.raises(ValueError, match="not an integer"):
        b.approximate_meshes(shape_indices=["a"])
    with pytest.raises(TypeError, match="unexpected keyword arguments \\['foo'\\]"):
        b.approximate_meshes("bounding_box", foo=1)
    assert b.shape_type[s] == GeoType.MESH


def test_flat_mesh_warns_or_raises():
    quad = newton.Mesh([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0]], [0, 1, 2, 0, 2, 3], compute_inertia=False)
    b = newton.ModelBuilder()
    s = b.add_shape_mesh(b.add_body(), mesh=quad)
    with pytest.warns(UserWarning, match="coplanar"):
        assert b.approximate_meshes() == set()
    assert b.shape_type[s] == GeoType.MESH
    with pytest.raises(RuntimeError, match=f"shape {s}"):
        b.approximate_meshes(raise_on_failure=True)
    # bounding primitives of a flat mesh still work (a thin box)
    assert b.approximate_meshes("bounding_box", raise_on_failure=True) == {s}
    assert b.shape_type[s] == GeoType.BOX
    np.testing.assert_allclose(sorted(b.shape_scale[s]), (1e-6, 0.5, 0.5), rtol=1e-5)


@pytest.mark.parametrize("method, package", [("coacd", "pip install coacd"), ("vhacd", "pip install vhacdx")])
def test_decomposition_missing_package(monkeypatch, method, package):
    monkeypatch.setitem(sys.modules, "coacd", None)
    monkeypatch.setitem(sys.modules, "vhacdx", None)
    b, body, s, sphere = make_builder()
    with pytest.raises(ImportError, match=package):
        b.approximate_meshes(method)


@pytest.mark.parametrize("keep_visual", [False, True])
def test_coacd_parts_become_convex_shapes(monkeypatch, keep_visual):
    calls = {}
    fake = types.ModuleType("coacd")

    class FakeMesh:
        def __init__(self, vertices, faces):
            self.vertices, self.faces = vertices, faces

    def run_coacd(mesh, **kwargs):
        calls["kwargs"] = kwargs
        box = newton.Mesh.create_box(0.5)
        return [(box.vertices, box.indices.reshape(-1, 3)),
                (box.vertices + np.array([1.0, 0.0, 0.0], np.float32), box.indices.reshape(-1, 3))]  # fmt: skip

    fake.Mesh, fake.run_coacd = FakeMesh, run_coacd
    monkeypatch.setitem(sys.modules, "coacd", fake)
    b, body, s, sphere = make_builder()
    n = b.shape_count
    assert b.approximate_meshes("coacd", keep_visual_shapes=keep_visual, threshold=0.05) == {s}
    assert calls["kwargs"] == {"threshold": 0.05}
    parts = [s, n] if not keep_visual else [n, n + 1]
    assert b.shape_count == n + (2 if keep_visual else 1)
    for p in parts:
        assert b.shape_type[p] == GeoType.CONVEX_MESH and b.shape_body[p] == body
        assert b.shape_transform[p] == b.shape_transform[s] or not keep_visual
    assert (parts[0], parts[1]) in b.shape_collision_filter_pairs
    assert len(b.shape_source[parts[1]].vertices) == 8
    assert len(set(per_shape_lengths(b).values())) == 1
    b.finalize()


def test_robot_hulls_finalize_and_collide():
    assets = shared_assets_dir()  # raises when the corpus is missing: CI has it, so no skip
    b = newton.ModelBuilder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b.add_mjcf(str(assets / "mjcf/xarm7/robot.xml"))  # the MJCF importer is installed in CI
    meshes = [i for i in range(b.shape_count) if b.shape_type[i] == GeoType.MESH]
    assert meshes
    masses = list(b.body_mass)
    done = b.approximate_meshes()
    assert done == {i for i in meshes if b.shape_flags[i] & int(ShapeFlags.COLLIDE_SHAPES)} and done
    assert list(b.body_mass) == masses
    for i in done:
        assert b.shape_type[i] == GeoType.CONVEX_MESH
        assert 4 <= len(b.shape_source[i].vertices) <= b.shape_source[i].maxhullvert
    b.add_ground_plane()
    model = b.finalize()
    pipe = newton.CollisionPipeline(model)
    contacts = pipe.contacts()
    state = model.state()
    pipe.collide(state, contacts)
    assert int(contacts.rigid_contact_count.numpy()[0]) > 0  # the base hull rests on the ground

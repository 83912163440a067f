"""The Collisions page's SDF, mesh-simplification and "See also" code blocks, run with
``import armillary as newton`` (the hydroelastic blocks are in test_hydroelastic.py)."""

from __future__ import annotations

import math

import numpy as np
import warp as wp

import armillary as newton


def _box_mesh(h=0.05):
    return newton.Mesh.create_box(h, h, h)


def test_build_sdf_then_add_shape_mesh():
    builder = newton.ModelBuilder()
    body = builder.add_body(xform=wp.transform((0.0, 0.0, 0.3), wp.quat_identity()))
    my_mesh = _box_mesh()
    my_mesh.build_sdf(max_resolution=64)
    builder.add_shape_mesh(body, mesh=my_mesh)
    assert my_mesh.sdf is not None and my_mesh.sdf.dims[0] == 65


def test_build_sdf_every_documented_argument():
    mesh = _box_mesh()
    mesh.build_sdf(
        max_resolution=256,  # Max voxels along longest AABB axis; must be divisible by 8 (None)
        narrow_band_range=(-0.005, 0.005),  # SDF narrow band [m] ((-0.1, 0.1))
        margin=0.005,  # Extra AABB padding [m] (0.05)
        shape_margin=0.001,  # Shrink SDF surface inward [m] (0.0)
        scale=(1.0, 1.0, 1.0),  # Bake non-unit scale into the SDF (None)
        edge_lower_angle_threshold_rad=math.radians(0.1),  # Drop near-coplanar edges below this angle (0.1 deg)
        edge_box_absorption=False,  # Drop edges fully covered by another edge's oriented box
    )
    sdf = mesh.sdf
    assert max(sdf.dims) - 1 == 256
    # the face center of the +x face is on the surface, shifted inward by shape_margin
    assert abs(float(sdf.sample([[0.05, 0.0, 0.0]])[0]) + 0.001) < 1e-3
    assert len(mesh.sdf_edges) == 12  # the 6 face diagonals are coplanar: dropped


def test_build_sdf_cache_dir(tmp_path):
    mesh = _box_mesh()
    mesh.build_sdf(max_resolution=64, cache_dir=str(tmp_path / "sdf_cache"))
    first = mesh.sdf.values.copy()
    again = _box_mesh()
    again.build_sdf(max_resolution=64, cache_dir=str(tmp_path / "sdf_cache"))
    assert np.array_equal(again.sdf.values, first)
    assert len(list((tmp_path / "sdf_cache").iterdir())) == 1


def test_is_watertight():
    assert _box_mesh().is_watertight
    open_box = newton.Mesh(_box_mesh().vertices, _box_mesh().indices[:-6])  # top face removed
    assert not open_box.is_watertight


def test_configure_sdf():
    builder = newton.ModelBuilder()
    cfg = builder.ShapeConfig()
    cfg.configure_sdf(max_resolution=64, is_hydroelastic=True, kh=1.0e11)
    assert cfg.sdf_max_resolution == 64 and cfg.is_hydroelastic and cfg.kh == 1.0e11


def test_default_shape_cfg():
    builder = newton.ModelBuilder()
    # Set defaults before adding shapes
    builder.default_shape_cfg.ke = 1.0e6
    builder.default_shape_cfg.kd = 1000.0
    builder.default_shape_cfg.mu = 0.5
    builder.default_shape_cfg.is_hydroelastic = True
    builder.default_shape_cfg.sdf_max_resolution = 64  # Primitive SDF defaults
    body = builder.add_body()
    builder.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1)
    model = builder.finalize()
    assert model.shape_sdf_max_resolution[0] == 64


def test_mesh_sdf_workflow_with_shape_config():
    builder = newton.ModelBuilder()
    body = builder.add_body(xform=wp.transform((0.0, 0.0, 0.2), wp.quat_identity()))
    my_mesh = _box_mesh()
    cfg = builder.ShapeConfig(
        collision_group=-1,  # Collide with everything
        margin=0.001,  # 1mm margin
        gap=0.01,  # 1cm detection gap
    )
    my_mesh.build_sdf(max_resolution=64)
    builder.add_shape_mesh(body, mesh=my_mesh, cfg=cfg)
    builder.add_ground_plane()
    model = builder.finalize()
    pipeline = newton.CollisionPipeline(model)
    contacts = pipeline.contacts()
    pipeline.collide(model.state(), contacts)


def test_see_also_imports():
    from armillary import (  # noqa: F401
        CollisionPipeline,
        Contacts,
        GeoType,
    )
    from armillary.geometry import (  # noqa: F401
        BroadPhaseAllPairs,
        BroadPhaseExplicit,
        BroadPhaseSAP,
        HydroelasticSDF,
        NarrowPhase,
    )

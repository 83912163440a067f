"""Hydroelastic SDF contacts (armillary.geometry.HydroelasticSDF) through the CollisionPipeline."""

import math
import warnings

import numpy as np
import pytest
import warp as wp

import armillary as newton
from armillary.geometry import HydroelasticSDF

wp.config.log_level = wp.LOG_WARNING

R = 0.1  # sphere radius [m]
DELTA = 0.01  # indentation [m]
KH_S = 1.0e6  # sphere kh [Pa/m]
KH_RIGID = 1.0e12  # "rigid" box kh


def _sphere_on_box(kh_s=KH_S, kh_box=KH_RIGID, delta=DELTA, gap=0.01):
    b = newton.ModelBuilder()
    cb = b.ShapeConfig(is_hydroelastic=True, kh=kh_box, sdf_target_voxel_size=0.02, gap=gap)
    b.add_shape_box(-1, hx=0.5, hy=0.5, hz=0.25, xform=wp.transform((0.0, 0.0, -0.25), wp.quat_identity()), cfg=cb)
    body = b.add_body(xform=wp.transform((0.0, 0.0, R - delta), wp.quat_identity()))
    cs = b.ShapeConfig(is_hydroelastic=True, kh=kh_s, sdf_max_resolution=64, gap=gap)
    b.add_shape_sphere(body, radius=R, cfg=cs, label="ball")
    return b.finalize(device="cpu")


def _plane_force(kh, delta, law=lambda depth: depth, radius=R):
    """Elastic-foundation force of a sphere pressed ``delta`` into a rigid plane: the integral of
    ``kh * law(R - |x - center|)`` over the contact disc (numerical; closed form for the linear law)."""
    c = radius - delta
    a = math.sqrt(radius * radius - c * c)
    rho = np.linspace(0.0, a, 20001)
    depth = radius - np.sqrt(rho * rho + c * c)
    return float(np.trapezoid(2.0 * np.pi * rho * kh * law(depth), rho))


def _closed_form(kh, delta, radius=R):
    c = radius - delta
    a2 = radius * radius - c * c
    return 2.0 * math.pi * kh * (radius * a2 / 2.0 - (radius**3 - c**3) / 3.0)


def _collide(model, config=None, **kw):
    pipe = newton.CollisionPipeline(model, sdf_hydroelastic_config=config, **kw)
    state = model.state()
    contacts = pipe.contacts()
    pipe.collide(state, contacts)
    return pipe, state, contacts


def _world(model, state, points, shapes):
    bq = state.body_q.numpy()
    sb = model.shape_body.numpy()
    out = np.array(points, dtype=np.float64)
    for i, s in enumerate(shapes):
        b = sb[s]
        if b >= 0:
            X = wp.transform(wp.vec3(*bq[b][:3]), wp.quat(*bq[b][3:]))
            out[i] = np.array(wp.transform_point(X, wp.vec3(*points[i])))
    return out


def _forces(model, state, c):
    """Per-contact penalty force on shape 1 ``stiffness * max(-d, 0) * n`` and the contacts' world
    points (midpoints)."""
    n = int(c.rigid_contact_count.numpy()[0])
    s0 = c.rigid_contact_shape0.numpy()[:n]
    s1 = c.rigid_contact_shape1.numpy()[:n]
    w0 = _world(model, state, c.rigid_contact_point0.numpy()[:n], s0)
    w1 = _world(model, state, c.rigid_contact_point1.numpy()[:n], s1)
    nrm = c.rigid_contact_normal.numpy()[:n].astype(np.float64)
    d = np.einsum("ij,ij->i", nrm, w1 - w0)
    k = c.rigid_contact_stiffness.numpy()[:n].astype(np.float64)
    f = (k * np.maximum(-d, 0.0))[:, None] * nrm
    return f, 0.5 * (w0 + w1), s0, s1


def test_config_fields_and_defaults():
    c = HydroelasticSDF.Config()
    assert (c.reduce_contacts, c.buffer_fraction, c.normal_matching, c.anchor_contact, c.margin_contact_area) == (
        True, 1.0, True, False, 0.01)  # fmt: skip
    assert (c.buffer_mult_broad, c.buffer_mult_iso, c.buffer_mult_contact, c.output_contact_surface) == (1, 1, 1, False)
    assert c.pressure_func is None and c.pressure_data is None
    with pytest.raises(ValueError, match="buffer_fraction"):
        newton.CollisionPipeline(_sphere_on_box(), sdf_hydroelastic_config=HydroelasticSDF.Config(buffer_fraction=0.0))


@pytest.mark.parametrize("reduce", [False, True])
def test_sphere_on_rigid_box_matches_elastic_foundation(reduce):
    model = _sphere_on_box()
    pipe, state, c = _collide(model, HydroelasticSDF.Config(reduce_contacts=reduce))
    f, x, s0, s1 = _forces(model, state, c)
    n = len(f)
    assert n > (100 if not reduce else 0)
    if reduce:
        assert n <= 8
    # sphere (shape 1) is shape0 of the canonical pair: the normal points from the sphere into the box
    assert set(s0.tolist()) == {1} and set(s1.tolist()) == {0}
    F = f.sum(axis=0)
    expected = _closed_form(KH_S, DELTA)
    assert abs(expected - _plane_force(KH_S, DELTA)) < 1e-3 * expected
    assert F[2] == pytest.approx(-expected, rel=0.04)
    assert np.hypot(F[0], F[1]) < 1e-3 * expected
    # the force acts through the sphere's axis (center of pressure under the center)
    torque = np.cross(x, f).sum(axis=0)
    assert np.abs(torque[:2]).max() < 2e-3 * expected * R
    assert all(v == 0 for v in pipe.hydroelastic_sdf.overflow_counts().values())


def test_reduction_preserves_total_force_and_direction():
    model = _sphere_on_box()
    _, st, full = _collide(model, HydroelasticSDF.Config(reduce_contacts=False))
    F_full = _forces(model, st, full)[0].sum(axis=0)
    for nm, anchor in ((True, False), (True, True), (False, False)):
        _, st2, red = _collide(model, HydroelasticSDF.Config(normal_matching=nm, anchor_contact=anchor))
        f = _forces(model, st2, red)[0]
        F = f.sum(axis=0)
        assert len(f) < int(full.rigid_contact_count.numpy()[0])
        np.testing.assert_allclose(F, F_full, rtol=2e-3, atol=1e-3 * np.linalg.norm(F_full))
        if nm:
            cosang = np.dot(F, F_full) / (np.linalg.norm(F) * np.linalg.norm(F_full))
            assert cosang > 1.0 - 1e-6


def test_equal_kh_uses_harmonic_mean_and_splits_the_indentation():
    """Two equal-kh spheres overlapping by ``2 delta``: k_eff = kh (harmonic mean), the iso-surface is
    the mid-plane and the force equals one sphere pressed ``delta`` into a rigid plane."""
    kh = 2.0e6
    b = newton.ModelBuilder()
    cfg = b.ShapeConfig(is_hydroelastic=True, kh=kh, sdf_max_resolution=64, gap=0.01)
    b.add_shape_sphere(-1, radius=R, xform=wp.transform((0.0, 0.0, -R + DELTA), wp.quat_identity()), cfg=cfg)
    body = b.add_body(xform=wp.transform((0.0, 0.0, R - DELTA), wp.quat_identity()))
    b.add_shape_sphere(body, radius=R, cfg=cfg)
    model = b.finalize(device="cpu")
    pipe, st, c = _collide(model, HydroelasticSDF.Config(reduce_contacts=False))
    assert pipe.hydroelastic_sdf.pair_keff[0] == pytest.approx(kh)
    f, x, _, _ = _forces(model, st, c)
    assert np.abs(x[:, 2]).max() < 2e-3  # contacts on the mid-plane
    assert abs(f.sum(axis=0)[2]) == pytest.approx(_closed_form(kh, DELTA), rel=0.05)
    # unequal kh: the harmonic mean
    model2 = _sphere_on_box(kh_s=1.0e6, kh_box=3.0e6)
    p2 = newton.CollisionPipeline(model2, sdf_hydroelastic_config=HydroelasticSDF.Config())
    assert p2.hydroelastic_sdf.pair_keff[0] == pytest.approx(2 * 1.0e6 * 3.0e6 / 4.0e6)


@pytest.mark.parametrize("reduce", [False, True])
def test_deterministic_runs_are_bit_identical(reduce):
    model = _sphere_on_box()
    cfg = HydroelasticSDF.Config(reduce_contacts=reduce)
    pipe = newton.CollisionPipeline(model, sdf_hydroelastic_config=cfg, deterministic=True)
    st = model.state()
    runs = []
    for _ in range(3):
        c = pipe.contacts()
        pipe.collide(st, c)
        n = int(c.rigid_contact_count.numpy()[0])
        runs.append({name: getattr(c, name).numpy()[:n].copy() for name in (
            "rigid_contact_shape0", "rigid_contact_shape1", "rigid_contact_point0", "rigid_contact_point1",
            "rigid_contact_normal", "rigid_contact_point_id", "rigid_contact_stiffness")})  # fmt: skip
        runs[-1]["F"] = _forces(model, st, c)[0].sum(axis=0)
    for r in runs[1:]:
        for k, v in r.items():
            assert np.array_equal(v, runs[0][k]), k
    ids = runs[0]["rigid_contact_point_id"]
    assert np.all(np.diff(ids) > 0)  # sorted by sub-key within the pair
    assert runs[0]["F"][2] == pytest.approx(-_closed_form(KH_S, DELTA), rel=0.04)


@wp.struct
class PowerPressureData:
    shape_kh: wp.array[wp.float32]
    depth_ref_m: wp.float32
    exponent: wp.float32


@wp.func
def power_pressure(signed_depth: wp.float32, shape_idx: wp.int32, data: PowerPressureData) -> wp.float32:
    kh = data.shape_kh[shape_idx]
    if signed_depth >= 0.0:
        return -kh * signed_depth
    depth = -signed_depth
    return kh * data.depth_ref_m * wp.pow(depth / data.depth_ref_m, data.exponent)


def test_custom_pressure_law_spec_example():
    model = _sphere_on_box()
    data = PowerPressureData()
    data.shape_kh = model.shape_material_kh
    data.depth_ref_m = 0.001
    data.exponent = 2.0
    config = HydroelasticSDF.Config(pressure_func=power_pressure, pressure_data=data, reduce_contacts=False)
    _, st, c = _collide(model, config)
    F = _forces(model, st, c)[0].sum(axis=0)
    expected = _plane_force(KH_S, DELTA, law=lambda d: 0.001 * (d / 0.001) ** 2)
    assert expected > 2.0 * _closed_form(KH_S, DELTA)  # the law changes the force a lot
    assert abs(F[2]) == pytest.approx(expected, rel=0.05)
    with pytest.raises(ValueError, match="together"):
        HydroelasticSDF.Config(pressure_func=power_pressure).validate()


def test_spec_examples_run():
    # pipeline config on a model without hydroelastic shapes (ground plane + sphere)
    builder = newton.ModelBuilder()
    builder.add_ground_plane()
    body = builder.add_body(xform=wp.transform((0.0, 0.0, 0.5), wp.quat_identity()))
    builder.add_shape_sphere(body, radius=0.5)
    model = builder.finalize(device="cpu")
    config = HydroelasticSDF.Config(reduce_contacts=True, buffer_fraction=0.2, normal_matching=True,
                                    anchor_contact=False)  # fmt: skip
    pipeline = newton.CollisionPipeline(model, sdf_hydroelastic_config=config)
    c = pipeline.contacts()
    pipeline.collide(model.state(), c)
    assert pipeline.hydroelastic_sdf is None and int(c.rigid_contact_count.numpy()[0]) >= 1
    # per-shape opt-in
    builder = newton.ModelBuilder()
    body = builder.add_body()
    cfg = builder.ShapeConfig(is_hydroelastic=True, sdf_max_resolution=64, kh=1.0e11)
    builder.add_shape_box(body, hx=0.5, hy=0.5, hz=0.5, cfg=cfg)
    cfg2 = newton.ModelBuilder.ShapeConfig()
    cfg2.configure_sdf(max_resolution=64, is_hydroelastic=True, kh=1.0e11)
    assert cfg2.is_hydroelastic and cfg2.sdf_max_resolution == 64 and cfg2.kh == 1.0e11
    builder.default_shape_cfg.is_hydroelastic = True
    builder.default_shape_cfg.sdf_max_resolution = 64
    body2 = builder.add_body(xform=wp.transform((0.0, 0.0, 0.99), wp.quat_identity()))
    builder.add_shape_box(body2, hx=0.5, hy=0.5, hz=0.5, cfg=cfg2)
    model = builder.finalize(device="cpu")
    pipe = newton.CollisionPipeline(model, sdf_hydroelastic_config=HydroelasticSDF.Config())
    c = pipe.contacts()
    pipe.collide(model.state(), c)
    n = int(c.rigid_contact_count.numpy()[0])
    assert n >= 3 and np.all(c.rigid_contact_stiffness.numpy()[:n] > 0)
    assert pipe.hydroelastic_sdf.check_buffers()


def test_hydroelastic_shape_without_sdf_is_named():
    b = newton.ModelBuilder()
    b.add_shape_box(-1, hx=1.0, hy=1.0, hz=0.1, cfg=b.ShapeConfig(is_hydroelastic=True, sdf_max_resolution=32))
    body = b.add_body(xform=wp.transform((0.0, 0.0, 0.3), wp.quat_identity()))
    b.add_shape_sphere(body, radius=0.2, cfg=b.ShapeConfig(is_hydroelastic=True), label="no_sdf_ball")
    model = b.finalize(device="cpu")
    with pytest.raises(ValueError, match=r"shape 1 \('no_sdf_ball'\).*no SDF"):
        newton.CollisionPipeline(model)
    with pytest.raises(ValueError, match="PLANE"):
        b2 = newton.ModelBuilder()
        b2.add_ground_plane(cfg=b2.ShapeConfig(is_hydroelastic=True))


def test_nxn_broad_phase_routes_hydroelastic_pairs_and_overflow_warns():
    model = _sphere_on_box()
    pipe, st, c = _collide(model, HydroelasticSDF.Config(reduce_contacts=False), broad_phase="nxn")
    n = int(c.rigid_contact_count.numpy()[0])
    assert n > 100 and np.all(c.rigid_contact_stiffness.numpy()[:n] > 0)  # no point contacts for the pair
    F = _forces(model, st, c)[0].sum(axis=0)
    assert F[2] == pytest.approx(-_closed_form(KH_S, DELTA), rel=0.04)
    # tiny buffers: contacts dropped / grid coarsened, counted, warned; never a crash
    pipe2, st2, c2 = _collide(model, HydroelasticSDF.Config(reduce_contacts=False, buffer_fraction=1e-4))
    with pytest.warns(RuntimeWarning, match="buffer_fraction"):
        assert not pipe2.hydroelastic_sdf.check_buffers()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert pipe2.hydroelastic_sdf.check_buffers()  # counters were reset by the first check


def test_contact_surface_output():
    model = _sphere_on_box()
    pipe, _, _ = _collide(model, HydroelasticSDF.Config(output_contact_surface=True))
    tris, pair = pipe.hydroelastic_sdf.get_contact_surface()
    assert len(tris) > 100 and np.all(pair == 0)
    area = 0.5 * np.linalg.norm(np.cross(tris[:, 1] - tris[:, 0], tris[:, 2] - tris[:, 0]), axis=1).sum()
    c = R - DELTA
    band = 2.0 * pipe.hydroelastic_sdf.pair_voxel[0]  # the contact band (non-penetrating rim)
    assert 0.95 * math.pi * (R * R - c * c) < area < 1.05 * math.pi * ((R + band) ** 2 - c * c)
    assert np.abs(tris[..., 2]).max() < 2e-3


def test_box_resting_on_box_featherstone():
    # core tests run in an isolated plugin registry: import the plugin package directly
    SolverFeatherstone = pytest.importorskip("armillary_solver_featherstone.solver").SolverFeatherstone

    b = newton.ModelBuilder(gravity=(0.0, 0.0, -9.81))
    cfg = b.ShapeConfig(is_hydroelastic=True, kh=1.0e7, sdf_max_resolution=32, gap=0.005, kd=200.0)
    b.add_shape_box(-1, hx=0.3, hy=0.3, hz=0.1, xform=wp.transform((0.0, 0.0, -0.1), wp.quat_identity()), cfg=cfg)
    body = b.add_body(xform=wp.transform((0.0, 0.0, 0.1), wp.quat_identity()))
    b.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1, cfg=cfg)
    model = b.finalize(device="cpu")
    solver = SolverFeatherstone(model)
    pipe = newton.CollisionPipeline(model, sdf_hydroelastic_config=HydroelasticSDF.Config())
    c = pipe.contacts()
    s0, s1 = model.state(), model.state()
    newton.eval_fk(model, s0.joint_q, s0.joint_qd, s0)
    dt = 1.0e-3
    zs = []
    for _ in range(500):
        s0.clear_forces()
        pipe.collide(s0, c)
        solver.step(s0, s1, None, c, dt)
        s0, s1 = s1, s0
        zs.append(float(s0.body_q.numpy()[0, 2]))
    q = s0.body_q.numpy()[0]
    assert np.all(np.isfinite(q))
    assert abs(q[0]) < 1e-3 and abs(q[1]) < 1e-3
    assert 0.1 - 3e-3 < min(zs) and max(zs) < 0.1 + 1e-3, (min(zs), max(zs))
    assert abs(q[3:6]).max() < 1e-3  # no tilt
    assert np.abs(s0.body_qd.numpy()[0]).max() < 0.05
    assert pipe.hydroelastic_sdf.check_buffers()

"""Mass properties of every primitive and of meshes against closed forms / numerical integration."""

from __future__ import annotations

import math

import numpy as np
import pytest
import warp as wp
from hypothesis import given, settings
from hypothesis import strategies as st

import armillary as newton
from armillary.sim import mass as M

dims = st.floats(min_value=0.05, max_value=3.0, allow_nan=False)
dens = st.floats(min_value=1.0, max_value=5000.0)


def _body_props(add, cfg=None, **kw):
    b = newton.ModelBuilder()
    body = b.add_body()
    add(b, body, cfg=cfg, **kw)
    m = b.finalize(device="cpu")
    return float(m.body_mass.numpy()[0]), m.body_com.numpy()[0], m.body_inertia.numpy()[0]


@settings(max_examples=25, deadline=None)
@given(r=dims, d=dens)
def test_sphere(r, d):
    m, c, i = _body_props(newton.ModelBuilder.add_shape_sphere, cfg=newton.ModelBuilder.ShapeConfig(density=d), radius=r)
    mass = 4 / 3 * math.pi * r**3 * d
    assert m == pytest.approx(mass, rel=1e-5)
    assert np.allclose(c, 0, atol=1e-6)
    assert np.allclose(i, np.eye(3) * 0.4 * mass * r * r, rtol=1e-4)


@settings(max_examples=25, deadline=None)
@given(hx=dims, hy=dims, hz=dims, d=dens)
def test_box(hx, hy, hz, d):
    m, c, i = _body_props(newton.ModelBuilder.add_shape_box, cfg=newton.ModelBuilder.ShapeConfig(density=d), hx=hx, hy=hy, hz=hz)
    mass = 8 * hx * hy * hz * d
    assert m == pytest.approx(mass, rel=1e-5)
    expect = np.diag([mass / 3 * (hy**2 + hz**2), mass / 3 * (hx**2 + hz**2), mass / 3 * (hx**2 + hy**2)])
    assert np.allclose(i, expect, rtol=1e-4)


@settings(max_examples=25, deadline=None)
@given(r=dims, h=dims, d=dens)
def test_cylinder(r, h, d):
    m, c, i = _body_props(newton.ModelBuilder.add_shape_cylinder, cfg=newton.ModelBuilder.ShapeConfig(density=d), radius=r, half_height=h)
    mass = math.pi * r * r * 2 * h * d
    assert m == pytest.approx(mass, rel=1e-5)
    ixx = mass * (3 * r * r + 4 * h * h) / 12
    assert np.allclose(i, np.diag([ixx, ixx, 0.5 * mass * r * r]), rtol=1e-4)


@settings(max_examples=25, deadline=None)
@given(r=dims, h=dims, d=dens)
def test_cone(r, h, d):
    m, c, i = _body_props(newton.ModelBuilder.add_shape_cone, cfg=newton.ModelBuilder.ShapeConfig(density=d), radius=r, half_height=h)
    mass = math.pi * r * r * 2 * h * d / 3
    assert m == pytest.approx(mass, rel=1e-5)
    assert np.allclose(c, [0, 0, -h / 2], atol=1e-5 * max(1, h))
    ixx = 3 / 20 * mass * r * r + 3 / 80 * mass * (2 * h) ** 2
    assert np.allclose(i, np.diag([ixx, ixx, 0.3 * mass * r * r]), rtol=1e-4)


@settings(max_examples=25, deadline=None)
@given(rx=dims, ry=dims, rz=dims, d=dens)
def test_ellipsoid(rx, ry, rz, d):
    m, c, i = _body_props(newton.ModelBuilder.add_shape_ellipsoid, cfg=newton.ModelBuilder.ShapeConfig(density=d), rx=rx, ry=ry, rz=rz)
    mass = 4 / 3 * math.pi * rx * ry * rz * d
    assert m == pytest.approx(mass, rel=1e-5)
    assert np.allclose(i, np.diag([mass / 5 * (ry**2 + rz**2), mass / 5 * (rx**2 + rz**2), mass / 5 * (rx**2 + ry**2)]), rtol=1e-4)


def _capsule_numeric(r, h, n=200000, seed=0):
    """Monte-Carlo second moments of a capsule (unit density)."""
    rng = np.random.default_rng(seed)
    box = np.array([r, r, h + r])
    p = (rng.random((n, 3)) * 2 - 1) * box
    zc = np.clip(p[:, 2], -h, h)
    inside = (p[:, 0] ** 2 + p[:, 1] ** 2 + (p[:, 2] - zc) ** 2) <= r * r
    vol = inside.mean() * 8 * box.prod()
    q = p[inside]
    ixx = vol * np.mean(q[:, 1] ** 2 + q[:, 2] ** 2)
    izz = vol * np.mean(q[:, 0] ** 2 + q[:, 1] ** 2)
    return vol, ixx, izz


@pytest.mark.parametrize("r,h", [(0.5, 1.0), (1.0, 0.5), (0.3, 0.0)])
def test_capsule_closed_form(r, h):
    m, c, i = M.capsule(r, h, 1.0)
    assert m == pytest.approx(math.pi * r * r * (2 * h + 4 / 3 * r))
    vol, ixx, izz = _capsule_numeric(r, h)
    assert m == pytest.approx(vol, rel=0.02)
    assert i[0, 0] == pytest.approx(ixx, rel=0.03)
    assert i[2, 2] == pytest.approx(izz, rel=0.03)
    if h == 0.0:
        s = M.sphere(r, 1.0)
        assert np.allclose(i, s[2])


def test_capsule_in_builder_matches_reference_numbers():
    m, _, _ = _body_props(newton.ModelBuilder.add_shape_capsule)
    assert m == pytest.approx(7330.3828, rel=1e-5)  # radius 1, half_height 0.5, density 1000


@settings(max_examples=20, deadline=None)
@given(hx=dims, hy=dims, hz=dims)
def test_mesh_box_matches_primitive(hx, hy, hz):
    mesh = newton.Mesh.create_box(hx, hy, hz)
    mm, mc, mi = M.mesh_mass_properties(mesh.vertices, mesh.indices.reshape(-1, 3), 1000.0)
    bm, bc, bi = M.box(hx, hy, hz, 1000.0)
    assert mm == pytest.approx(bm, rel=1e-4)
    assert np.allclose(mc, 0, atol=1e-5)
    assert np.allclose(mi, bi, rtol=1e-3, atol=1e-6 * bm)


def test_mesh_tetrahedron():
    verts = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=np.float32)
    idx = np.array([0, 2, 1, 0, 1, 3, 0, 3, 2, 1, 2, 3])
    mesh = newton.Mesh(verts, idx)
    assert mesh.mass == pytest.approx(1 / 6, rel=1e-5)
    assert np.allclose(mesh.com, [0.25] * 3)
    assert np.allclose(np.asarray(mesh.inertia), [[0.0125, 0.00208333, 0.00208333], [0.00208333, 0.0125, 0.00208333],
                                                  [0.00208333, 0.00208333, 0.0125]], rtol=1e-4)  # fmt: skip
    # inverted winding gives the same (positive) result
    flipped = newton.Mesh(verts, idx.reshape(-1, 3)[:, ::-1].reshape(-1))
    assert flipped.mass == pytest.approx(1 / 6, rel=1e-5)


def test_mesh_shape_scale_and_convex():
    b = newton.ModelBuilder()
    body = b.add_body()
    b.add_shape_mesh(body, mesh=newton.Mesh.create_box(1.0), scale=(1, 2, 3))
    m = b.finalize(device="cpu")
    assert m.body_mass.numpy()[0] == pytest.approx(48000.0, rel=1e-4)
    assert np.allclose(np.diag(m.body_inertia.numpy()[0]), [208000, 160000, 80000], rtol=1e-4)
    b = newton.ModelBuilder()
    body = b.add_body()
    b.add_shape_convex_hull(body, mesh=newton.Mesh.create_box(0.5))
    m = b.finalize(device="cpu")
    assert m.body_mass.numpy()[0] == pytest.approx(1000.0, rel=1e-4)
    assert m.shape_type.numpy()[0] == newton.GeoType.CONVEX_MESH


@pytest.mark.parametrize(
    "add,kw,mass",
    [
        ("sphere", dict(radius=1.0), 1135.1621),
        ("capsule", dict(radius=0.5, half_height=1.0), 821.00287),
        ("cylinder", dict(radius=0.5, half_height=1.0), 666.01764),
        ("cone", dict(radius=0.5, half_height=1.0), 222.00587),
        ("ellipsoid", dict(rx=1.0, ry=0.5, rz=0.25), 297.4041),
        ("box", dict(hx=1.0, hy=1.0, hz=1.0), 2168.0),
    ],
)
def test_hollow_shells(add, kw, mass):
    cfg = newton.ModelBuilder.ShapeConfig(is_solid=False, margin=0.1)
    m, c, i = _body_props(getattr(newton.ModelBuilder, f"add_shape_{add}"), cfg=cfg, **kw)
    assert m == pytest.approx(mass, rel=1e-4)
    assert np.all(np.linalg.eigvalsh(i) > 0)
    cfg0 = newton.ModelBuilder.ShapeConfig(is_solid=False, margin=0.0)
    m0, _, _ = _body_props(getattr(newton.ModelBuilder, f"add_shape_{add}"), cfg=cfg0, **kw)
    assert m0 == 0.0


def test_hollow_cone_com():
    m, c, _ = _body_props(newton.ModelBuilder.add_shape_cone, cfg=newton.ModelBuilder.ShapeConfig(is_solid=False, margin=0.1),
                          radius=0.5, half_height=1.0)  # fmt: skip
    assert c[2] == pytest.approx(-0.5679245, rel=1e-4)


@settings(max_examples=20, deadline=None)
@given(
    px=st.floats(-2, 2), py=st.floats(-2, 2), pz=st.floats(-2, 2),
    angle=st.floats(0, 6.28), hx=dims, r=dims, explicit=st.floats(0, 10),
)  # fmt: skip
def test_parallel_axis_composition(px, py, pz, angle, hx, r, explicit):
    """Body inertia equals the sum of shape inertias shifted to the combined COM (checked with point samples)."""
    b = newton.ModelBuilder()
    body = b.add_link(mass=explicit, com=(0.1, 0.0, 0.0), inertia=np.eye(3) * explicit * 0.01)
    q = wp.quat_from_axis_angle(wp.normalize(wp.vec3(1.0, 2.0, 3.0)), angle)
    b.add_shape_box(body, xform=wp.transform((px, py, pz), q), hx=hx, hy=0.5 * hx, hz=0.2)
    b.add_shape_sphere(body, xform=wp.transform((-px, 0.0, 0.3), wp.quat_identity()), radius=r)
    model = b.finalize(device="cpu")
    mass = float(model.body_mass.numpy()[0])
    com = model.body_com.numpy()[0]
    inertia = model.body_inertia.numpy()[0]
    # reference: compose manually
    parts = [(explicit, np.array([0.1, 0, 0]), np.eye(3) * explicit * 0.01)]
    mb, cb, ib = M.box(hx, 0.5 * hx, 0.2, 1000.0)
    rot = M.quat_to_matrix(list(q))
    parts.append((mb, np.array([px, py, pz]), rot @ ib @ rot.T))
    ms, cs, is_ = M.sphere(r, 1000.0)
    parts.append((ms, np.array([-px, 0, 0.3]), is_))
    mt = sum(p[0] for p in parts)
    ct = sum(p[0] * p[1] for p in parts) / mt
    it = sum(M.shift_inertia(p[2], p[0], p[1] - ct) for p in parts)
    assert mass == pytest.approx(mt, rel=1e-5)
    assert np.allclose(com, ct, atol=1e-4 * max(1.0, np.abs(ct).max()))
    assert np.allclose(inertia, it, rtol=1e-3, atol=1e-4 * np.abs(it).max())
    assert np.allclose(inertia, inertia.T, atol=1e-4 * np.abs(it).max())


def test_explicit_mass_adds_and_lock_inertia():
    b = newton.ModelBuilder()
    body = b.add_link(mass=1.0)
    b.add_shape_box(body)
    locked = b.add_link(mass=2.0, inertia=np.eye(3), lock_inertia=True)
    b.add_shape_box(locked)
    zero = b.add_link()
    b.add_shape_sphere(zero, cfg=newton.ModelBuilder.ShapeConfig(density=0.0))
    m = b.finalize(device="cpu", skip_validation_joints=True)
    assert np.allclose(m.body_mass.numpy(), [1001.0, 2.0, 0.0])
    assert np.allclose(m.body_inertia.numpy()[1], np.eye(3))
    assert np.allclose(m.body_inv_mass.numpy(), [1 / 1001.0, 0.5, 0.0])
    assert np.allclose(m.body_inv_inertia.numpy()[1], np.eye(3))
    assert np.allclose(m.body_inv_inertia.numpy()[2], 0.0)


def test_sites_and_planes_are_massless():
    b = newton.ModelBuilder()
    body = b.add_body()
    b.add_site(body)
    b.add_shape_sphere(body, radius=1.0, as_site=True)
    b.add_shape_plane(body=body, width=1.0, length=1.0)
    m = b.finalize(device="cpu")
    assert m.body_mass.numpy()[0] == 0.0
    assert m.shape_flags.numpy()[0] & newton.ShapeFlags.SITE

"""SensorTiledCamera: depth / segmentation against analytic ray casts, colours, tiling, every
shape type, textures, graph capture and bad input."""

import math

import numpy as np
import pytest
import warp as wp

import armillary
from armillary.sensors import SensorTiledCamera
from armillary.utils import ColorSpace, color_linear_to_srgb, color_srgb_to_linear

DEV = "cpu"


def look_at(eye, target, up=(0.0, 0.0, 1.0)):
    """Camera-to-world transform looking from eye at target (camera -Z forward, +Y up)."""
    eye, target, up = (np.asarray(v, np.float64) for v in (eye, target, up))
    f = target - eye
    f /= np.linalg.norm(f)
    r = np.cross(f, up)
    r /= np.linalg.norm(r)
    u = np.cross(r, f)
    R = np.stack([r, u, -f], axis=1)
    q = wp.quat_from_matrix(wp.mat33(*R.ravel().tolist()))
    return wp.transform(wp.vec3(*eye.tolist()), q), R


def tf_array(tfs):
    """(camera_count, world_count) array from a nested list [camera][world]."""
    arr = np.array([[[*t.p, *t.q] for t in row] for row in tfs], np.float32)
    return wp.array(arr, dtype=wp.transformf, device=DEV)


def unpack(img):
    a = img.numpy().astype(np.uint64)
    return np.stack([(a >> (8 * k)) & 255 for k in range(4)], axis=-1).astype(np.int64)


def srgb_bytes(lin):
    return np.floor(np.clip(np.asarray(color_linear_to_srgb(np.asarray(lin)[None]))[0], 0, 1) * 255 + 0.5).astype(int)


# ---------------------------------------------------------------- analytic depth and segmentation

BOX_POS = np.array([1.2, 0.3, 0.4])
BOX_H = np.array([0.3, 0.2, 0.4])
BOX_ANGLE = math.radians(30.0)
SPHERE_POS = np.array([0.0, 0.0, 0.5])
SPHERE_R = 0.5


def _rot_z(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]])


def _analytic(o, d, grow=1.0):
    """Per-ray (depth, shape id) of the sphere (id 0) and the rotated box (id 1); -1 miss."""
    n = len(d)
    best = np.full(n, np.inf)
    sid = np.full(n, -1)
    oc = o - SPHERE_POS
    b = np.einsum("ij,ij->i", d, oc)
    c = np.einsum("ij,ij->i", oc, oc) - (SPHERE_R * grow) ** 2
    disc = b * b - c
    t = -b - np.sqrt(np.maximum(disc, 0.0))
    hit = (disc >= 0) & (t > 0)
    best[hit], sid[hit] = t[hit], 0
    R = _rot_z(BOX_ANGLE)
    lo_ = (o - BOX_POS) @ R
    ld = d @ R
    with np.errstate(divide="ignore", invalid="ignore"):
        t1 = (-BOX_H * grow - lo_) / ld
        t2 = (BOX_H * grow - lo_) / ld
    tn = np.nanmax(np.minimum(t1, t2), axis=1)
    tf = np.nanmin(np.maximum(t1, t2), axis=1)
    hit = (tn <= tf) & (tn > 0) & (tn < best)
    best[hit], sid[hit] = tn[hit], 1
    return best, sid


def _scene_model():
    b = armillary.ModelBuilder()
    body = b.add_body(xform=wp.transform(wp.vec3(*BOX_POS), wp.quat_from_axis_angle(wp.vec3(0, 0, 1), BOX_ANGLE)))
    b.add_shape_sphere(-1, xform=wp.transform(wp.vec3(*SPHERE_POS), wp.quat_identity()), radius=SPHERE_R)
    b.add_shape_box(body, hx=float(BOX_H[0]), hy=float(BOX_H[1]), hz=float(BOX_H[2]))
    return b.finalize(device=DEV)


def test_depth_and_segmentation_match_analytic_ray_casts():
    model = _scene_model()
    cam = SensorTiledCamera(model)
    Wd, H = 64, 48
    rays = cam.utils.compute_camera_rays_pinhole(Wd, H, camera_fovs=math.radians(30.0))
    X, R = look_at((0.5, -4.0, 1.5), (0.6, 0.0, 0.4))
    depth = cam.utils.create_depth_image_output(Wd, H)
    index = cam.utils.create_shape_index_image_output(Wd, H)
    normal = cam.utils.create_normal_image_output(Wd, H)
    cam.update(model.state(), tf_array([[X]]), rays, depth_image=depth, shape_index_image=index, normal_image=normal)

    d_cam = rays.numpy()[0, :, :, 1].reshape(-1, 3).astype(np.float64)
    d = d_cam @ R.T
    o = np.broadcast_to(np.asarray(X.p, np.float64), d.shape)
    t, sid = _analytic(o, d)
    _, sid_in = _analytic(o, d, 1.0 - 1e-4)
    _, sid_out = _analytic(o, d, 1.0 + 1e-4)
    robust = (sid_in == sid) & (sid_out == sid)  # not within 1e-4 of a silhouette
    assert robust.mean() > 0.95
    got_t = depth.numpy().reshape(-1)
    got_id = index.numpy().reshape(-1).astype(np.int64)
    got_id[got_id == 0xFFFFFFFF] = -1
    np.testing.assert_array_equal(got_id[robust], sid[robust])
    assert (sid == 0).sum() > 100 and (sid == 1).sum() > 100 and (sid == -1).sum() > 100
    hit = robust & (sid >= 0)
    np.testing.assert_allclose(got_t[hit], t[hit], atol=2e-5 * np.max(t[hit]))
    assert np.all(got_t[robust & (sid < 0)] == 0.0)  # default clear depth
    # normals: unit, facing the camera; on the sphere radial
    n = normal.numpy().reshape(-1, 3)
    assert np.allclose(np.linalg.norm(n[hit], axis=1), 1.0, atol=1e-5)
    assert np.all(np.einsum("ij,ij->i", n[hit], d[hit]) < 0)
    on_s = robust & (sid == 0)
    p = o[on_s] + got_t[on_s, None] * d[on_s]
    np.testing.assert_allclose(n[on_s], (p - SPHERE_POS) / SPHERE_R, atol=1e-4)

    # the body moves with the state: shift the box body, its pixels follow
    st = model.state()
    q = st.body_q.numpy()
    q[0, 0] += 10.0
    st.body_q.assign(q)
    cam.update(st, tf_array([[X]]), rays, shape_index_image=index)
    assert not np.any(index.numpy() == 1)
    fd = cam.utils.create_forward_depth_image_output(Wd, H)
    cam.update(model.state(), tf_array([[X]]), rays, depth_image=depth, forward_depth_image=fd)
    fwd_expect = depth.numpy().reshape(-1) * (-d_cam[:, 2])
    np.testing.assert_allclose(fd.numpy().reshape(-1), fwd_expect, rtol=1e-5, atol=1e-6)
    conv = cam.utils.convert_ray_depth_to_forward_depth(depth, tf_array([[X]]), rays)
    np.testing.assert_allclose(conv.numpy(), fd.numpy(), rtol=1e-5, atol=1e-6)


def test_pinhole_rays_formula():
    model = _scene_model()
    cam = SensorTiledCamera(model)
    fovs = [math.radians(60.0), math.radians(30.0)]
    rays = cam.utils.compute_camera_rays_pinhole(8, 6, camera_fovs=fovs).numpy()
    assert rays.shape == (2, 6, 8, 2, 3)
    for c, fov in enumerate(fovs):
        th = math.tan(fov / 2)
        x = (2 * (np.arange(8) + 0.5) / 8 - 1) * th * 8 / 6
        y = (1 - 2 * (np.arange(6) + 0.5) / 6) * th
        v = np.stack(np.broadcast_arrays(x[None, :], y[:, None], -1.0), axis=-1)
        v /= np.linalg.norm(v, axis=-1, keepdims=True)
        np.testing.assert_allclose(rays[c, :, :, 1], v, atol=1e-6)
        assert np.all(rays[c, :, :, 0] == 0.0)
    # aperture mode: horizontal aperture / focal = 2 tan(hfov / 2)
    ap = cam.utils.compute_camera_rays_pinhole(8, 6, focal_length=10.0, horizontal_aperture=20.0, vertical_aperture=15.0)
    corner = ap.numpy()[0, 0, 0, 1]
    v = np.array([-(7 / 8) * 1.0, (5 / 6) * 0.75, -1.0])
    np.testing.assert_allclose(corner, v / np.linalg.norm(v), atol=1e-6)


# ---------------------------------------------------------------- colours

ALBEDO = (0.8, 0.5, 0.2)


def _color_model():
    b = armillary.ModelBuilder()
    b.add_shape_box(-1, hx=0.5, hy=0.5, hz=0.5, color=ALBEDO)
    return b.finalize(device=DEV)


def _render_color(cam, light_dir, rc=None, clear=None, W=9, H=9):
    cam.set_lights([light_dir], cast_shadows=[False])
    rays = cam.utils.compute_camera_rays_pinhole(W, H, camera_fovs=math.radians(40.0))
    X, _ = look_at((0.0, -3.0, 0.0), (0.0, 0.0, 0.0))
    outs = {k: getattr(cam.utils, f"create_{k}_image_output")(W, H) for k in ("color", "hdr_color", "albedo")}
    cam.update(None, tf_array([[X]]), rays, color_image=outs["color"], hdr_color_image=outs["hdr_color"],
               albedo_image=outs["albedo"], render_config=rc, clear_data=clear)  # fmt: skip
    return outs


def test_lit_and_unlit_colours_have_the_expected_srgb_values():
    cam = SensorTiledCamera(_color_model())
    lin = np.asarray(color_srgb_to_linear(ALBEDO))
    ambient = 0.15  # hemisphere ambient on a face with n . up = 0 (docs/camera.md)
    # face -Y toward the camera; light travelling along (0, 1, -1)/sqrt(2): n . L = 1/sqrt(2)
    o = _render_color(cam, (0.0, 1.0, -1.0), clear=SensorTiledCamera.GRAY_CLEAR_DATA)
    lit = unpack(o["color"])[0, 0, 4, 4]
    np.testing.assert_array_equal(lit[:3], srgb_bytes(lin * (ambient + 1 / math.sqrt(2))))
    assert lit[3] == 255
    np.testing.assert_array_equal(unpack(o["albedo"])[0, 0, 4, 4, :3], srgb_bytes(lin))
    np.testing.assert_array_equal(unpack(o["albedo"])[0, 0, 4, 4, :3], np.floor(np.array(ALBEDO) * 255 + 0.5))
    # background: the gray clear colour (packed sRGB 102, 102, 102, 255)
    np.testing.assert_array_equal(unpack(o["color"])[0, 0, 0, 0], [102, 102, 102, 255])
    # light from behind the box: that face gets the ambient term only
    o = _render_color(cam, (0.0, -1.0, 0.0))
    np.testing.assert_array_equal(unpack(o["color"])[0, 0, 4, 4, :3], srgb_bytes(lin * ambient))
    np.testing.assert_allclose(o["hdr_color"].numpy()[0, 0, 4, 4], lin * ambient, rtol=1e-5)
    # no ambient, no light: black but opaque
    cam.set_lights([])
    rc = SensorTiledCamera.RenderConfig(enable_ambient_lighting=False)
    o = _render_color(cam, (0.0, -1.0, 0.0), rc=rc)
    assert list(unpack(o["color"])[0, 0, 4, 4]) == [0, 0, 0, 255]


def test_linear_and_srgb_outputs_differ_exactly_by_the_conversion():
    cam = SensorTiledCamera(_color_model())
    s = _render_color(cam, (0.3, 1.0, -1.0), W=31, H=31, clear=SensorTiledCamera.GRAY_CLEAR_DATA)
    rc = SensorTiledCamera.RenderConfig(output_color_space=ColorSpace.LINEAR)
    lin = _render_color(cam, (0.3, 1.0, -1.0), rc=rc, W=31, H=31, clear=SensorTiledCamera.GRAY_CLEAR_DATA)
    np.testing.assert_array_equal(s["hdr_color"].numpy(), lin["hdr_color"].numpy())
    hdr = lin["hdr_color"].numpy()[0, 0].astype(np.float64)
    c_s, c_l = unpack(s["color"])[0, 0], unpack(lin["color"])[0, 0]
    hit = unpack(s["albedo"])[0, 0, :, :, :3].sum(axis=-1) > 0  # the gray clear albedo is opaque black
    assert hit.sum() > 50 and (~hit).sum() > 50
    # packed bytes are round(clamp(x) * 255) of the linear value, or of its sRGB encoding
    exp_l = np.floor(np.clip(hdr, 0, 1) * 255 + 0.5)
    exp_s = np.floor(np.clip(color_linear_to_srgb(hdr), 0, 1) * 255 + 0.5)
    assert np.abs(c_l[hit][:, :3] - exp_l[hit]).max() <= 1 and (c_l[hit][:, :3] == exp_l[hit]).mean() > 0.99
    assert np.abs(c_s[hit][:, :3] - exp_s[hit]).max() <= 1 and (c_s[hit][:, :3] == exp_s[hit]).mean() > 0.99
    # albedo: a constant colour, exact
    alb_lin = np.asarray(color_srgb_to_linear(ALBEDO))
    assert np.all(unpack(lin["albedo"])[0, 0][hit][:, :3] == np.floor(alb_lin * 255 + 0.5))
    assert np.all(unpack(s["albedo"])[0, 0][hit][:, :3] == np.floor(np.array(ALBEDO) * 255 + 0.5))
    # clear colour: sRGB 102 -> linear bytes
    g = math.floor(color_srgb_to_linear((0.4, 0.4, 0.4))[0] * 255 + 0.5)
    assert np.all(c_s[~hit] == [102, 102, 102, 255]) and np.all(c_l[~hit] == [g, g, g, 255])


# ---------------------------------------------------------------- tiling


def _world_content(b, rng):
    body = b.add_body(xform=wp.transform(wp.vec3(*rng.uniform(-0.5, 0.5, 3)), wp.quat_rpy(*rng.uniform(-1, 1, 3))))
    b.add_shape_box(body, hx=0.3, hy=0.2, hz=0.25, color=tuple(rng.random(3)))
    b.add_shape_sphere(-1, xform=wp.transform(wp.vec3(*rng.uniform(-1, 1, 3)), wp.quat_identity()), radius=0.3,
                       color=tuple(rng.random(3)))  # fmt: skip
    b.add_shape_capsule(-1, xform=wp.transform(wp.vec3(*rng.uniform(-1, 1, 3)), wp.quat_rpy(*rng.uniform(-1, 1, 3))),
                        radius=0.15, half_height=0.3, color=tuple(rng.random(3)))  # fmt: skip


def test_tiled_output_of_16_worlds_equals_16_single_world_renders():
    nw = 16
    b = armillary.ModelBuilder()
    b.add_ground_plane(height=-1.0)
    for w in range(nw):
        b.begin_world()
        _world_content(b, np.random.default_rng(w))
        b.end_world()
    model = b.finalize(device=DEV)
    assert model.world_count == nw
    cams = [look_at((3.0 * math.cos(w), 3.0 * math.sin(w), 1.0), (0, 0, 0))[0] for w in range(nw)]
    Wd, H = 24, 16
    cam = SensorTiledCamera(model)
    cam.utils.create_default_light(enable_shadows=True)
    rays = cam.utils.compute_camera_rays_pinhole(Wd, H, camera_fovs=math.radians(60.0))
    names = ("color", "depth", "normal", "shape_index", "albedo")
    outs = {k: getattr(cam.utils, f"create_{k}_image_output")(Wd, H) for k in names}
    cam.update(model.state(), tf_array([cams]), rays, **{f"{k}_image": v for k, v in outs.items()})
    world_of = model.shape_world.numpy()
    for w in range(nw):
        b1 = armillary.ModelBuilder()
        b1.add_ground_plane(height=-1.0)
        b1.begin_world()
        _world_content(b1, np.random.default_rng(w))
        b1.end_world()
        m1 = b1.finalize(device=DEV)
        c1 = SensorTiledCamera(m1)
        c1.utils.create_default_light(enable_shadows=True)
        o1 = {k: getattr(c1.utils, f"create_{k}_image_output")(Wd, H) for k in names}
        c1.update(m1.state(), tf_array([[cams[w]]]), rays, **{f"{k}_image": v for k, v in o1.items()})
        ids = np.concatenate([np.nonzero(world_of == -1)[0], np.nonzero(world_of == w)[0]])  # single-world id -> id
        for k in names:
            got = outs[k].numpy()[w, 0]
            exp = o1[k].numpy()[0, 0]
            if k == "shape_index":
                exp = np.where(exp == 0xFFFFFFFF, exp, ids[np.minimum(exp, len(ids) - 1)].astype(np.uint32))
            np.testing.assert_array_equal(got, exp, err_msg=f"world {w} {k}")
        assert len(np.unique(exp)) >= 2


# ---------------------------------------------------------------- every shape type

N = 9  # odd: the centre pixel's ray is the camera's -Z axis


def _type_scene():
    """One world per case; (builder, [(expected depth, camera transform, expected index)])."""
    b = armillary.ModelBuilder()
    cases = []
    down = wp.quat_identity()
    cam_z = 5.0

    def world(add, top, x=0.1, cam=None, index=None):
        b.begin_world()
        sid = add()
        b.end_world()
        X = cam if cam is not None else wp.transform(wp.vec3(x, 0.0, cam_z), down)
        depth = top if cam is not None else cam_z - top
        cases.append((depth, X, sid if index is None else index))

    def tf(z=0.0):
        return wp.transform(wp.vec3(0.0, 0.0, z), wp.quat_identity())

    world(lambda: b.add_shape_sphere(-1, xform=tf(), radius=0.5), math.sqrt(0.25 - 0.01))
    world(lambda: b.add_shape_box(-1, xform=tf(), hx=0.3, hy=0.3, hz=0.3), 0.3)
    world(lambda: b.add_shape_capsule(-1, xform=tf(), radius=0.2, half_height=0.5), 0.5 + math.sqrt(0.04 - 0.01))
    world(lambda: b.add_shape_cylinder(-1, xform=tf(), radius=0.3, half_height=0.4), 0.4)
    world(lambda: b.add_shape_cone(-1, xform=tf(), radius=0.4, half_height=0.3), 0.3 - 0.6 * 0.1 / 0.4)
    world(lambda: b.add_shape_ellipsoid(-1, xform=tf(), rx=0.3, ry=0.4, rz=0.25), 0.25 * math.sqrt(1 - (0.1 / 0.3) ** 2))
    world(lambda: b.add_shape_plane(xform=tf(0.2), width=1.0, length=1.0), 0.2)
    world(lambda: b.add_ground_plane(height=0.1), 0.1)
    box = armillary.Mesh.create_box(0.25)
    world(lambda: b.add_shape_mesh(-1, xform=tf(), mesh=box, scale=(1.0, 1.0, 2.0)), 0.5)
    world(lambda: b.add_shape_convex_hull(-1, xform=tf(), mesh=box), 0.25)
    xs = np.linspace(-1, 1, 5)
    hf = armillary.Heightfield(np.tile(0.2 + 0.1 * xs, (5, 1)), nrow=5, ncol=5, hx=1.0, hy=1.0)
    world(lambda: b.add_shape_heightfield(xform=tf(), heightfield=hf), 0.21)
    world(lambda: b.add_particle((0.0, 0.0, 0.5), (0.0, 0.0, 0.0), 1.0, radius=0.2), 0.5 + math.sqrt(0.03),
          index=0xFFFFFFFE)  # fmt: skip

    def cloth():
        i = b.add_particle((-1.0, -1.0, 0.6), (0, 0, 0), 1.0, radius=0.05)
        j = b.add_particle((1.0, -1.0, 0.6), (0, 0, 0), 1.0, radius=0.05)
        k = b.add_particle((0.0, 1.0, 0.6), (0, 0, 0), 1.0, radius=0.05)
        b.add_triangle(i, j, k)

    world(cloth, 0.6, index=0xFFFFFFFD)
    # barrel cylinder seen from the side (+X), probe ray through its waist: radius c + rb
    rb, r, hh = 0.6, 0.3, 0.4
    waist = r - math.sqrt(rb * rb - hh * hh) + rb
    side = wp.transform(wp.vec3(2.0, 0.0, 0.0), wp.quat_from_axis_angle(wp.vec3(0, 1, 0), math.pi / 2))
    world(lambda: b.add_shape_cylinder(-1, xform=tf(), radius=r, half_height=hh, barrel_radius=rb), 2.0 - waist, cam=side)
    return b, cases


def test_every_shape_type_renders_with_correct_depth_at_probe_pixel():
    b, cases = _type_scene()
    model = b.finalize(device=DEV)
    assert model.world_count == len(cases)
    cam = SensorTiledCamera(model)
    rays = cam.utils.compute_camera_rays_pinhole(N, N, camera_fovs=math.radians(60.0))
    depth = cam.utils.create_depth_image_output(N, N)
    index = cam.utils.create_shape_index_image_output(N, N)
    normal = cam.utils.create_normal_image_output(N, N)
    cam.update(model.state(), tf_array([[c[1] for c in cases]]), rays, depth_image=depth, shape_index_image=index,
               normal_image=normal)  # fmt: skip
    d = depth.numpy()[:, 0]
    idx = index.numpy()[:, 0]
    for w, (exp, _X, sid) in enumerate(cases):
        assert d[w, N // 2, N // 2] == pytest.approx(exp, abs=2e-4), f"world {w}"
        assert idx[w, N // 2, N // 2] == np.uint32(sid), f"world {w}"
        assert np.linalg.norm(normal.numpy()[w, 0, N // 2, N // 2]) == pytest.approx(1.0, abs=1e-5)
    # the finite plane ends, the infinite one does not
    assert d[6, 0, 0] == 0.0 and d[7, 0, 0] > 0.0
    # particles off: the particle world is empty, the cloth stays
    rc = SensorTiledCamera.RenderConfig(enable_particles=False)
    cam.update(model.state(), tf_array([[c[1] for c in cases]]), rays, depth_image=depth, render_config=rc)
    assert depth.numpy()[11, 0, N // 2, N // 2] == 0.0 and depth.numpy()[12, 0, N // 2, N // 2] > 0.0
    # moving the particles moves the cloth
    st = model.state()
    q = st.particle_q.numpy()
    q[:, 2] += 1.0
    st.particle_q.assign(q)
    cam.update(st, tf_array([[c[1] for c in cases]]), rays, depth_image=depth)
    assert depth.numpy()[12, 0, N // 2, N // 2] == pytest.approx(cases[12][0] - 1.0, abs=2e-4)


def test_global_world_and_backface_culling_switches():
    b = armillary.ModelBuilder()
    b.add_ground_plane(height=-1.0)
    b.begin_world()
    b.add_shape_sphere(-1, radius=0.5)
    b.end_world()
    model = b.finalize(device=DEV)
    cam = SensorTiledCamera(model)
    rays = cam.utils.compute_camera_rays_pinhole(N, N, camera_fovs=math.radians(60.0))
    depth = cam.utils.create_depth_image_output(N, N)
    inside = tf_array([[wp.transform(wp.vec3(0.0, 0.0, 0.1), wp.quat_identity())]])
    cam.update(None, inside, rays, depth_image=depth)  # inside the sphere: culled, the ground shows
    assert depth.numpy()[0, 0, N // 2, N // 2] == pytest.approx(1.1, abs=1e-5)
    no_cull = SensorTiledCamera.RenderConfig(enable_backface_culling=False)
    normal = cam.utils.create_normal_image_output(N, N)
    cam.update(None, inside, rays, depth_image=depth, normal_image=normal, render_config=no_cull)
    assert depth.numpy()[0, 0, N // 2, N // 2] == pytest.approx(0.6, abs=1e-5)  # the sphere's inside, z = -0.5
    np.testing.assert_allclose(normal.numpy()[0, 0, N // 2, N // 2], [0.0, 0.0, 1.0], atol=1e-5)  # faces the camera
    above = tf_array([[wp.transform(wp.vec3(3.0, 0.0, 1.0), wp.quat_identity())]])
    cam.update(None, above, rays, depth_image=depth)
    assert depth.numpy()[0, 0, N // 2, N // 2] == pytest.approx(2.0, abs=1e-5)
    cam.update(None, above, rays, depth_image=depth, render_config=SensorTiledCamera.RenderConfig(enable_global_world=False))
    assert depth.numpy()[0, 0, N // 2, N // 2] == 0.0


# ---------------------------------------------------------------- textures, capture


def test_mesh_base_color_texture():
    verts = np.array([[-1, -1, 0], [1, -1, 0], [1, 1, 0], [-1, 1, 0]], np.float32)
    uvs = np.array([[0, 0], [1, 0], [1, 1], [0, 1]], np.float32)
    tex = np.array([[[255, 0, 0], [0, 255, 0]], [[0, 0, 255], [255, 255, 255]]], np.uint8)  # row 0 = top (v = 1)
    mesh = armillary.Mesh(verts, [0, 1, 2, 0, 2, 3], uvs=uvs, texture=tex, color=(1.0, 1.0, 1.0), compute_inertia=False)
    b = armillary.ModelBuilder()
    b.add_shape_mesh(-1, mesh=mesh)
    model = b.finalize(device=DEV)
    cam = SensorTiledCamera(model)
    rays = cam.utils.compute_camera_rays_pinhole(N, N, camera_fovs=math.radians(30.0))
    alb = cam.utils.create_albedo_image_output(N, N)
    expect = {(-0.5, 0.5): [255, 0, 0], (0.5, 0.5): [0, 255, 0], (-0.5, -0.5): [0, 0, 255], (0.5, -0.5): [255, 255, 255]}
    X = [wp.transform(wp.vec3(x, y, 3.0), wp.quat_identity()) for (x, y) in expect]
    rc = SensorTiledCamera.RenderConfig(enable_textures=True)
    for Xi, rgb in zip(X, expect.values()):
        cam.update(None, tf_array([[Xi]]), rays, albedo_image=alb, render_config=rc)
        np.testing.assert_array_equal(unpack(alb)[0, 0, N // 2, N // 2, :3], rgb)
    cam.update(None, tf_array([[X[0]]]), rays, albedo_image=alb)  # textures off: the mesh colour
    np.testing.assert_array_equal(unpack(alb)[0, 0, N // 2, N // 2, :3], [255, 255, 255])


def test_update_is_graph_capturable_on_cpu():
    model = _scene_model()
    cam = SensorTiledCamera(model)
    rays = cam.utils.compute_camera_rays_pinhole(16, 12, camera_fovs=math.radians(50.0))
    X = tf_array([[look_at((0.5, -4.0, 1.5), (0.6, 0.0, 0.4))[0]]])
    depth = cam.utils.create_depth_image_output(16, 12)
    state = model.state()
    cam.update(state, X, rays, depth_image=depth)  # compile outside the capture
    ref = depth.numpy().copy()
    with wp.ScopedCapture(device=DEV) as capture:
        cam.update(state, X, rays, depth_image=depth)
    depth.zero_()
    q = state.body_q.numpy()
    q[0, 0] += 10.0
    state.body_q.assign(q)
    wp.capture_launch(capture.graph)
    moved = depth.numpy()
    assert not np.array_equal(moved, ref)  # the replay saw the new body pose
    cam.update(state, X, rays, depth_image=depth)
    np.testing.assert_array_equal(depth.numpy(), moved)


# ---------------------------------------------------------------- bad input


def test_bad_input_raises_value_error():
    model = _scene_model()
    cam = SensorTiledCamera(model)
    for w, h in ((0, 4), (4, -1), (2.5, 4), (4, True)):
        with pytest.raises(ValueError, match="width|height"):
            cam.utils.compute_camera_rays_pinhole(w, h, camera_fovs=1.0)
        with pytest.raises(ValueError, match="width|height"):
            cam.utils.create_color_image_output(w, h)
    for fov in (0.0, math.pi, -0.5, float("nan")):
        with pytest.raises(ValueError, match="camera_fovs"):
            cam.utils.compute_camera_rays_pinhole(4, 4, camera_fovs=fov)
    with pytest.raises(ValueError, match="camera_fovs"):
        cam.utils.compute_camera_rays_pinhole(4, 4)
    rays = cam.utils.compute_camera_rays_pinhole(4, 4, camera_fovs=1.0)
    img = cam.utils.create_depth_image_output(4, 4)
    good = tf_array([[wp.transform_identity()]])
    bad_transforms = [
        np.zeros((1, 1, 7), np.float32),  # not a Warp array
        wp.zeros((1, 2), dtype=wp.transformf, device=DEV),  # world_count mismatch
        wp.zeros(1, dtype=wp.transformf, device=DEV),  # 1-D
        wp.zeros((1, 1), dtype=wp.vec3, device=DEV),  # dtype
    ]
    for bad in bad_transforms:
        with pytest.raises(ValueError, match="camera_transforms"):
            cam.update(None, bad, rays, depth_image=img)
    with pytest.raises(ValueError, match="camera_rays"):
        cam.update(None, good, wp.zeros((1, 4, 4), dtype=wp.vec3, device=DEV), depth_image=img)
    with pytest.raises(ValueError, match="depth_image"):
        cam.update(None, good, rays, depth_image=cam.utils.create_depth_image_output(5, 4))
    with pytest.raises(ValueError, match="color_image"):
        cam.update(None, good, rays, color_image=img)  # float image as packed colour
    with pytest.raises(ValueError, match="max_distance"):
        cam.update(None, good, rays, depth_image=img, render_config=SensorTiledCamera.RenderConfig(max_distance=-1.0))
    with pytest.raises(ValueError, match="output_color_space"):
        SensorTiledCamera(model, default_render_config=SensorTiledCamera.RenderConfig(output_color_space=7))
    with pytest.raises(ValueError, match="light"):
        cam.set_lights([(0.0, 0.0, 0.0)])


@pytest.mark.skipif(not wp.is_cuda_available(), reason="needs a second (CUDA) device to build a wrong-device array")
def test_wrong_device_raises():
    cam = SensorTiledCamera(_scene_model())
    rays = cam.utils.compute_camera_rays_pinhole(4, 4, camera_fovs=1.0)
    other = wp.zeros((1, 1), dtype=wp.transformf, device="cuda:0")
    with pytest.raises(ValueError, match="camera_transforms"):
        cam.update(None, other, rays, depth_image=cam.utils.create_depth_image_output(4, 4))


def test_rgba_helpers():
    b = armillary.ModelBuilder()
    for _ in range(3):
        b.begin_world()
        b.add_shape_box(-1, hx=0.5, hy=0.5, hz=0.5, color=ALBEDO)
        b.end_world()
    model = b.finalize(device=DEV)
    cam = SensorTiledCamera(model)
    W, H = 6, 4
    rays = cam.utils.compute_camera_rays_pinhole(W, H, camera_fovs=math.radians(40.0))
    X, _ = look_at((0.0, -3.0, 0.0), (0.0, 0.0, 0.0))
    outs = {k: getattr(cam.utils, f"create_{k}_image_output")(W, H) for k in ("color", "depth", "normal", "shape_index")}
    cam.update(None, tf_array([[X] * 3]), rays, **{f"{k}_image": v for k, v in outs.items()})
    rgba = unpack(outs["color"])
    view = cam.utils.to_rgba_from_color(outs["color"]).numpy()
    assert view.shape == (3, H, W, 4) and view.dtype == np.uint8
    np.testing.assert_array_equal(view, rgba.reshape(3, H, W, 4))
    flat = cam.utils.flatten_color_image_to_rgba(outs["color"], worlds_per_row=2).numpy()
    assert flat.shape == (2 * H, 2 * W, 4)
    np.testing.assert_array_equal(flat[:H, W:], rgba[1, 0])
    np.testing.assert_array_equal(flat[H:, :W], rgba[2, 0])
    assert np.all(flat[H:, W:] == 0)  # the empty fourth tile
    d = cam.utils.to_rgba_from_depth(outs["depth"]).numpy()
    hit = outs["depth"].numpy().reshape(3, H, W) > 0.0
    assert d.shape == (3, H, W, 4) and hit.sum() > 6 and np.all(d[..., 0][hit] >= 50) and np.all(d[..., 0][~hit] == 0)
    n = cam.utils.to_rgba_from_normal(outs["normal"]).numpy()
    np.testing.assert_array_equal(n[0, H // 2, W // 2], [128, 0, 128, 255])  # normal (0, -1, 0)
    s = cam.utils.to_rgba_from_shape_index(outs["shape_index"]).numpy()
    assert len({tuple(s[w, H // 2, W // 2]) for w in range(3)}) == 3  # one hash colour per shape id
    assert cam.utils.flatten_depth_image_to_rgba(outs["depth"]).numpy().shape == (2 * H, 2 * W, 4)
    assert cam.utils.flatten_normal_image_to_rgba(outs["normal"]).numpy().shape == (2 * H, 2 * W, 4)


# ---------------------------------------------------------------- speed paths and options


def _pile_model(worlds=3):
    """A few boxes and a sphere per world over one ground plane per world, plus a global sphere."""
    rng = np.random.default_rng(1)
    w = armillary.ModelBuilder()
    for k in range(6):
        body = w.add_body(xform=wp.transform(wp.vec3(*rng.uniform(-0.6, 0.6, 2), 0.15 + 0.25 * k),
                                             wp.quat_from_axis_angle(wp.vec3(0, 0, 1), float(rng.uniform(0, 3)))))  # fmt: skip
        w.add_shape_box(body, hx=0.15, hy=0.1, hz=0.12)
    w.add_shape_sphere(-1, xform=wp.transform(wp.vec3(0.8, 0.8, 0.3), wp.quat_identity()), radius=0.3)
    w.add_ground_plane()
    b = armillary.ModelBuilder()
    b.replicate(w, worlds)
    b.add_shape_sphere(-1, xform=wp.transform(wp.vec3(-1.5, 1.0, 0.5), wp.quat_identity()), radius=0.4)
    return b.finalize(device=DEV)


def _render_all(cam, model, X, rays, Wd, H, **kw):
    names = ("color", "depth", "shape_index", "normal", "albedo", "hdr_color", "forward_depth")
    outs = {k: getattr(cam.utils, f"create_{k}_image_output")(Wd, H) for k in names}
    cam.update(model.state(), X, rays, **{f"{k}_image": v for k, v in outs.items()}, **kw)
    return {k: v.numpy() for k, v in outs.items()}


def test_row_per_thread_cpu_mapping_equals_pixel_per_thread():
    """The CPU renders one image row per thread, CUDA one pixel per thread: identical images."""
    model = _pile_model()
    cam = SensorTiledCamera(model)
    cam.utils.create_default_light(enable_shadows=True)
    Wd, H = 40, 30
    rays = cam.utils.compute_camera_rays_pinhole(Wd, H, camera_fovs=math.radians(55.0))
    X = tf_array([[look_at((2.5, -2.0, 1.8), (0.0, 0.0, 0.4))[0]] * model.world_count])
    rows = _render_all(cam, model, X, rays, Wd, H)
    for span in (1, 7):
        cam._span = span
        other = _render_all(cam, model, X, rays, Wd, H)
        for k in rows:
            np.testing.assert_array_equal(rows[k], other[k], err_msg=f"{k} (span {span})")
    assert len(np.unique(rows["shape_index"])) > 5  # boxes, spheres, ground and sky all seen


def test_group_box_culling_keeps_every_hit():
    """Rays skip a world's BVH when they miss its bounding box; depth and ids still match a brute
    force over every shape of the world (per-ray analytic box / sphere / plane tests)."""
    model = _pile_model(worlds=2)
    cam = SensorTiledCamera(model)
    Wd, H = 48, 36
    rays = cam.utils.compute_camera_rays_pinhole(Wd, H, camera_fovs=math.radians(70.0))
    eye = np.array([2.2, -2.4, 1.4])
    Xt, R = look_at(eye, (0.0, 0.0, 0.5))
    out = _render_all(cam, model, tf_array([[Xt] * 2]), rays, Wd, H)
    d = rays.numpy()[0, :, :, 1].reshape(-1, 3).astype(np.float64) @ R.T
    st = model.state()
    types = model.shape_type.numpy()
    scale = model.shape_scale.numpy()
    world = model.shape_world.numpy()
    body = model.shape_body.numpy()
    xf = model.shape_transform.numpy()
    bq = st.body_q.numpy()
    for w in range(2):
        best = np.full(len(d), np.inf)
        sid = np.full(len(d), -1)
        for s in np.nonzero((world == w) | (world == -1))[0]:
            p, q = xf[s, :3].astype(np.float64), xf[s, 3:].astype(np.float64)
            if body[s] >= 0:
                bp, bqq = bq[body[s], :3], bq[body[s], 3:]
                Rb = np.array(wp.quat_to_matrix(wp.quat(*bqq))).reshape(3, 3)
                p, q = bp + Rb @ p, np.asarray(wp.mul(wp.quat(*bqq), wp.quat(*q)))
            Rs = np.array(wp.quat_to_matrix(wp.quat(*q))).reshape(3, 3)
            lo, ld = (eye - p) @ Rs, d @ Rs
            if types[s] == int(armillary.GeoType.PLANE):
                with np.errstate(divide="ignore", invalid="ignore"):
                    t = -lo[2] / ld[:, 2]
                t[~(t > 0)] = np.inf
            elif types[s] == int(armillary.GeoType.SPHERE):
                b_ = ld @ lo
                disc = b_ * b_ - (lo @ lo - scale[s, 0] ** 2)
                t = np.where(disc >= 0, -b_ - np.sqrt(np.maximum(disc, 0)), np.inf)
                t[t <= 0] = np.inf
            else:
                h = scale[s]
                with np.errstate(divide="ignore", invalid="ignore"):
                    t1, t2 = (-h - lo) / ld, (h - lo) / ld
                tn, tf_ = np.nanmax(np.minimum(t1, t2), 1), np.nanmin(np.maximum(t1, t2), 1)
                t = np.where((tn <= tf_) & (tn > 0), tn, np.inf)
            closer = t < best
            best[closer], sid[closer] = t[closer], s
        got = out["shape_index"][w, 0].reshape(-1).astype(np.int64)
        got[got == 0xFFFFFFFF] = -1
        agree = got == sid
        assert agree.mean() > 0.99, f"world {w}: {agree.mean()}"  # silhouette pixels may differ
        both = agree & (sid >= 0)
        np.testing.assert_allclose(out["depth"][w, 0].reshape(-1)[both], best[both], rtol=1e-4)


def test_shadow_rays_darken_occluded_ground():
    b = armillary.ModelBuilder()
    b.add_shape_sphere(-1, xform=wp.transform(wp.vec3(0.0, 0.0, 1.0), wp.quat_identity()), radius=0.5)
    b.add_ground_plane()
    model = b.finalize(device=DEV)
    cam = SensorTiledCamera(model)
    cam.set_lights([(1.0, 0.0, -1.0)], cast_shadows=[True])  # the sphere's shadow falls around (1, 0, 0)
    Wd = H = 33
    rays = cam.utils.compute_camera_rays_pinhole(Wd, H, camera_fovs=math.radians(60.0))
    X = tf_array([[look_at((0.0, -0.01, 6.0), (0.0, 0.0, 0.0))[0]]])
    hdr = cam.utils.create_hdr_color_image_output(Wd, H)
    depth = cam.utils.create_depth_image_output(Wd, H)
    index = cam.utils.create_shape_index_image_output(Wd, H)
    lit = {}
    for shadows in (False, True):
        cam.update(model.state(), X, rays, hdr_color_image=hdr, shape_index_image=index, depth_image=depth,
                   render_config=SensorTiledCamera.RenderConfig(enable_shadows=shadows))  # fmt: skip
        lit[shadows] = hdr.numpy()[0, 0].sum(-1)
    ground = index.numpy()[0, 0] == 1
    d = rays.numpy()[0, :, :, 1] @ look_at((0.0, -0.01, 6.0), (0.0, 0.0, 0.0))[1].T
    p = np.array([0.0, -0.01, 6.0]) + depth.numpy()[0, 0][..., None] * d  # ground hit points
    # a ground point is in shadow when the ray toward the light source (-light direction) meets the sphere
    to_light = np.array([-1.0, 0.0, 1.0]) / math.sqrt(2.0)
    oc = p - np.array([0.0, 0.0, 1.0])
    b_ = oc @ to_light
    shadowed = ground & (b_ * b_ - (np.einsum("ijk,ijk->ij", oc, oc) - 0.25) > 1e-3) & (b_ < 0)
    clear = ground & (b_ * b_ - (np.einsum("ijk,ijk->ij", oc, oc) - 0.25) < -1e-3)
    assert shadowed.sum() > 10 and clear.sum() > 100
    assert np.all(lit[True][shadowed] < 0.5 * lit[False][shadowed])  # only the ambient term is left
    np.testing.assert_array_equal(lit[True][clear], lit[False][clear])
    np.testing.assert_array_equal(lit[True][~ground], lit[False][~ground])  # the sphere is lit from above


def test_srgb_byte_table_matches_the_curve():
    """Colour bytes come from a bucket table built with the device's own sRGB curve: the same byte
    as round(clamp(srgb(c)) * 255) at random values and around every byte threshold."""
    from armillary.sensors import raycast_kernels as K

    @wp.kernel
    def both(c: wp.array(dtype=float), base: wp.array(dtype=wp.uint32), thr: wp.array(dtype=float),
             out: wp.array2d(dtype=wp.uint32)):  # fmt: skip
        i = wp.tid()
        out[i, 0] = K.srgb_byte(c[i], base, thr)
        out[i, 1] = K.srgb_byte_exact(c[i])

    cam = SensorTiledCamera(_scene_model())
    sc = cam._scene
    thresholds = []
    for b in range(1, 256):  # analytic byte thresholds in linear light, and their float neighbours
        x = color_srgb_to_linear(((b - 0.5) / 255.0,) * 3)[0]
        f = np.float32(x)
        thresholds += [np.nextafter(f, np.float32(-1)), f, np.nextafter(f, np.float32(2))]
    rng = np.random.default_rng(0)
    vals = np.concatenate([rng.uniform(-0.1, 1.1, 20000), rng.uniform(0, 0.01, 5000), thresholds,
                           [0.0, 1.0, -0.0, 2.0, np.float32(0.0031308)]]).astype(np.float32)  # fmt: skip
    c = wp.array(vals, dtype=float, device=DEV)
    out = wp.zeros((len(vals), 2), dtype=wp.uint32, device=DEV)
    wp.launch(both, dim=len(vals), inputs=[c, sc.srgb_lut_base, sc.srgb_lut_thr, out], device=DEV)
    o = out.numpy()
    np.testing.assert_array_equal(o[:, 0], o[:, 1])
    assert o[:, 1].min() == 0 and o[:, 1].max() == 255


def test_performance_hints_do_not_change_the_images():
    model = _pile_model(worlds=2)
    cam = SensorTiledCamera(model)
    cam.utils.create_default_light(enable_shadows=False)
    Wd, H = 24, 20
    rays = cam.utils.compute_camera_rays_pinhole(Wd, H, camera_fovs=math.radians(60.0))
    X = tf_array([[look_at((2.5, -2.0, 1.8), (0.0, 0.0, 0.4))[0]] * 2])
    ref = _render_all(cam, model, X, rays, Wd, H)
    RC = SensorTiledCamera.RenderConfig
    for rc in (RC(render_order=SensorTiledCamera.RenderOrder.TILED), RC(tile_width=4, tile_height=32),
               RC(enable_fast_math=False)):  # fmt: skip
        got = _render_all(cam, model, X, rays, Wd, H, render_config=rc, kernel_block_dim=32)
        for k in ref:
            np.testing.assert_array_equal(ref[k], got[k], err_msg=k)


def test_unimplemented_options_raise_naming_the_option():
    model = _scene_model()
    RC = SensorTiledCamera.RenderConfig
    cam = SensorTiledCamera(model)
    rays = cam.utils.compute_camera_rays_pinhole(8, 8, camera_fovs=1.0)
    X = tf_array([[look_at((0.0, -3.0, 0.5), (0.0, 0.0, 0.5))[0]]])
    depth = cam.utils.create_depth_image_output(8, 8)
    bad = [("texture_projection_mode", RC(texture_projection_mode=SensorTiledCamera.TextureProjectionMode.TRIPLANAR)),
           ("gaussians_mode", RC(gaussians_mode=SensorTiledCamera.GaussianRenderMode.QUALITY)),
           ("gaussians_min_transmittance", RC(gaussians_min_transmittance=0.2)),
           ("gaussians_max_num_hits", RC(gaussians_max_num_hits=5))]  # fmt: skip
    for name, rc in bad:
        with pytest.raises(NotImplementedError, match=name):
            cam.update(model.state(), X, rays, depth_image=depth, render_config=rc)
        with pytest.raises(NotImplementedError, match=name):
            SensorTiledCamera(model, default_render_config=rc)
    # the defaults render
    cam.update(model.state(), X, rays, depth_image=depth, render_config=RC())
    assert (depth.numpy() > 0).any()


def test_gaussian_shapes_raise_at_construction():
    model = _scene_model()
    types = model.shape_type.numpy()
    types[1] = int(armillary.GeoType.GAUSSIAN)
    model.shape_type.assign(types)
    with pytest.raises(ValueError, match=r"shape 1 \(GAUSSIAN\).*Gaussian splats are not implemented.*VISIBLE"):
        SensorTiledCamera(model)
    flags = model.shape_flags.numpy()
    flags[1] &= ~int(armillary.ShapeFlags.VISIBLE)
    model.shape_flags.assign(flags)
    SensorTiledCamera(model)  # hidden: fine


def test_textured_mesh_without_uvs_raises_when_textures_are_enabled():
    verts = np.array([[-1, -1, 0], [1, -1, 0], [1, 1, 0], [-1, 1, 0]], np.float32)
    mesh = armillary.Mesh(verts, [0, 1, 2, 0, 2, 3], texture=np.full((2, 2, 3), 200, np.uint8), compute_inertia=False)
    b = armillary.ModelBuilder()
    b.add_shape_mesh(-1, mesh=mesh)
    model = b.finalize(device=DEV)
    cam = SensorTiledCamera(model)
    rays = cam.utils.compute_camera_rays_pinhole(8, 8, camera_fovs=1.0)
    X = tf_array([[look_at((0.0, -0.01, 3.0), (0.0, 0.0, 0.0))[0]]])
    color = cam.utils.create_color_image_output(8, 8)
    cam.update(model.state(), X, rays, color_image=color)  # textures off (the default): plain colour
    with pytest.raises(NotImplementedError, match="texture_projection_mode.*uvs"):
        cam.update(model.state(), X, rays, color_image=color,
                   render_config=SensorTiledCamera.RenderConfig(enable_textures=True))  # fmt: skip

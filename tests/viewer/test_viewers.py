"""``armillary.viewer``: the frame loop, ViewerNull, ViewerFile (record and replay), ViewerUSD, ViewerRerun,
ViewerImage, scene framing and contact geometry."""

import importlib
import math
import os
import sys

import numpy as np
import pytest
import warp as wp

import armillary
from armillary.demos import falling_shapes
from armillary.viewer import (CameraView, ViewerFile, ViewerNull, contact_world_geometry, frame_bounds,
                              scene_bounds)  # fmt: skip

wp.config.log_level = wp.LOG_WARNING


def _need(module: str):
    """Import an optional package the `test` extra installs: in CI it must be there, elsewhere skip."""
    if os.environ.get("CI"):
        return importlib.import_module(module)
    return pytest.importorskip(module)


@pytest.fixture(scope="module")
def scene():
    """The demo scene (9 bodies on a ground plane) with a deterministic hand-made motion: frame k moves
    body i down by 0.05 k m (never below 0.1 m) and turns it about z, collide() gives contacts."""
    model = falling_shapes().finalize(device="cpu")
    state = model.state()
    contacts = model.contacts()
    q0 = state.body_q.numpy().copy()

    def frame(k):
        q = q0.copy()
        q[:, 2] = np.maximum(q0[:, 2] - 0.05 * k, 0.1)
        a = 0.1 * k
        q[:, 3:7] = [0.0, 0.0, math.sin(a / 2), math.cos(a / 2)]
        state.body_q.assign(q)
        model.collide(state, contacts)
        return q

    return model, state, contacts, frame


def _record(viewer, scene, frames=5):
    model, state, contacts, frame = scene
    viewer.set_model(model)
    recorded = []
    for k in range(frames):
        recorded.append(frame(k))
        viewer.begin_frame(k / 60.0)
        viewer.log_state(state)
        viewer.log_contacts(contacts, state)
        viewer.log_scalar("k", float(k))
        viewer.end_frame()
    viewer.close()
    return recorded


# ---------------------------------------------------------------------------------------- ViewerNull
def test_viewer_null_runs_num_frames_and_benchmarks():
    v = ViewerNull(num_frames=4, benchmark=True, benchmark_start_frame=1)
    n = 0
    while v.is_running():
        v.begin_frame(n / 60.0)
        v.end_frame()
        n += 1
    assert n == 4 and v.frame_count == 4
    result = v.benchmark_result()
    assert result["frames"] == 3 and result["elapsed"] > 0 and result["fps"] > 0
    assert ViewerNull(2).benchmark_result() is None
    with pytest.raises(ValueError, match="num_frames"):
        ViewerNull(0)
    with pytest.raises(ValueError, match="finite"):
        ViewerNull(2).begin_frame(float("nan"))


def test_lazy_names_and_light_import():
    import subprocess

    code = ("import sys, armillary; v = armillary.viewer; v.ViewerNull; v.ViewerFile; v.frame_bounds; "
            "heavy = {'pxr', 'rerun', 'imageio', 'matplotlib'}; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))")  # fmt: skip
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().splitlines()[-1] == "[]"
    with pytest.raises(AttributeError, match="ViewerGL"):
        armillary.viewer.ViewerGL  # noqa: B018


# ---------------------------------------------------------------------------------------- ViewerFile
@pytest.mark.parametrize("suffix", [".json", ".npz"])
def test_viewer_file_replays_the_recorded_states(scene, tmp_path, suffix):
    path = tmp_path / f"rec{suffix}"
    model, state, contacts, _ = scene
    recorded = _record(ViewerFile(path, save_interval=2), scene)
    counts = []
    for k in range(5):  # the contact counts the recording saw
        scene[3](k)
        counts.append(int(contacts.rigid_contact_count.numpy()[0]))
    replay = ViewerFile(path)
    replay.load_recording()
    assert replay.get_frame_count() == 5 and replay.has_model()
    target = model.state()
    for k in range(5):
        replay.load_state(target, k)
        np.testing.assert_array_equal(target.body_q.numpy(), recorded[k])  # bit for bit, both formats
        assert replay.get_time(k) == pytest.approx(k / 60.0)
        assert replay.get_scalars(k) == {"k": float(k)}
        c = replay.get_contacts(k)
        assert len(c["shape0"]) == counts[k]
        np.testing.assert_array_equal(c["normal"], contacts_at(scene, k)["normal"])
    loaded = armillary.Model("cpu")
    replay.load_model(loaded)
    assert loaded.body_count == model.body_count and loaded.shape_count == model.shape_count
    assert loaded.up_axis == model.up_axis and loaded.body_label == list(model.body_label)
    np.testing.assert_array_equal(loaded.shape_scale.numpy(), model.shape_scale.numpy())
    assert loaded.shape_transform.dtype == wp.transformf
    with pytest.raises(ValueError, match=r"frame_id must be an integer in \[0, 5\)"):
        replay.load_state(target, 5)


def contacts_at(scene, k):
    model, state, contacts, frame = scene
    frame(k)
    n = int(contacts.rigid_contact_count.numpy()[0])
    return {"normal": contacts.rigid_contact_normal.numpy()[:n]}


def test_viewer_file_history_limit_and_bad_input(scene, tmp_path):
    path = tmp_path / "last.npz"
    recorded = _record(ViewerFile(path, max_history_size=2, auto_save=False), scene)
    replay = ViewerFile(path)
    replay.load_recording()
    assert replay.get_frame_count() == 2
    target = scene[0].state()
    replay.load_state(target, 1)
    np.testing.assert_array_equal(target.body_q.numpy(), recorded[-1])
    with pytest.raises(ValueError, match="must end with .json or .npz.*CBOR"):
        ViewerFile(tmp_path / "x.bin")
    with pytest.raises(ValueError, match="save_interval"):
        ViewerFile(tmp_path / "x.json", save_interval=0)
    (tmp_path / "other.json").write_text('{"format": "something"}')
    with pytest.raises(ValueError, match="not an armillary ViewerFile recording"):
        ViewerFile(tmp_path / "other.json").load_recording()
    with pytest.raises(FileNotFoundError):
        ViewerFile(tmp_path / "missing.json").load_recording()
    with pytest.raises(RuntimeError, match="set_model"):
        ViewerFile(tmp_path / "y.json").log_state(target)


# ---------------------------------------------------------------------------------------- ViewerUSD
def test_viewer_usd_writes_time_samples(scene, tmp_path):
    Usd = _need("pxr.Usd")
    from pxr import UsdGeom, UsdPhysics

    from armillary.viewer import ViewerUSD

    path = tmp_path / "run.usda"
    viewer = ViewerUSD(path, fps=60, num_frames=4, scaling=2.0)
    model = scene[0]
    viewer.set_model(model)
    viewer.set_camera_view(frame_bounds(*scene_bounds(model)))
    recorded = []
    k = 0
    while viewer.is_running():  # num_frames=4 stops the loop
        recorded.append(scene[3](k))
        viewer.begin_frame(k / 60.0)
        viewer.log_state(scene[1])
        viewer.log_contacts(scene[2], scene[1])
        viewer.log_scalar("energy", 10.0 + k)
        viewer.end_frame()
        k += 1
    viewer.close()
    assert k == 4
    stage = Usd.Stage.Open(str(path))
    assert (stage.GetStartTimeCode(), stage.GetEndTimeCode()) == (0.0, 3.0)
    assert stage.GetTimeCodesPerSecond() == 60.0
    bodies = [p for p in stage.Traverse() if p.HasAPI(UsdPhysics.RigidBodyAPI)]
    assert len(bodies) == model.body_count
    for i, prim in enumerate(bodies):
        translate = prim.GetAttribute("xformOp:translate")
        assert translate.GetTimeSamples() == [0.0, 1.0, 2.0, 3.0]
        for t in (0, 3):
            np.testing.assert_allclose(np.array(translate.Get(float(t))), recorded[t][i, :3], atol=1e-6)
    points = UsdGeom.Points(stage.GetPrimAtPath("/World/Viewer/contacts/points"))
    assert points.GetPointsAttr().GetTimeSamples() == [0.0, 1.0, 2.0, 3.0]
    energy = stage.GetPrimAtPath("/World/Viewer").GetAttribute("viewer:energy")
    assert energy.Get(2.0) == 12.0
    assert stage.GetPrimAtPath("/World/ViewerCamera").IsA(UsdGeom.Camera)
    world = UsdGeom.Xformable(stage.GetPrimAtPath("/World"))
    assert world.GetLocalTransformation().ExtractTranslation() == (0, 0, 0)
    assert world.GetLocalTransformation()[0][0] == pytest.approx(2.0)
    with pytest.raises(ValueError, match="must end with .usd"):
        ViewerUSD(tmp_path / "x.json")
    with pytest.raises(ValueError, match="up_axis"):
        ViewerUSD(tmp_path / "x.usda", up_axis="X")


# ---------------------------------------------------------------------------------------- ViewerRerun
def test_viewer_rerun_records_to_rrd(scene, tmp_path):
    _need("rerun")
    from rerun.chunk import RrdReader

    from armillary.viewer import ViewerRerun

    path = tmp_path / "run.rrd"
    viewer = ViewerRerun(record_to_rrd=str(path), keep_historical_data=True)
    _record(viewer, scene, frames=4)
    rows, entities = {}, set()
    for chunk in RrdReader(str(path)).stream():
        entities.add(str(chunk.entity_path))
        if not chunk.is_static:
            rows[str(chunk.entity_path)] = rows.get(str(chunk.entity_path), 0) + chunk.num_rows
    model = scene[0]
    for b in range(model.body_count):
        assert rows[f"/world/bodies/{b}"] == 4  # one pose per frame on the timelines
    assert "/world/static/0" in entities and "/world/bodies/0/shapes/1" in entities  # ground, first shape
    assert rows["/scalars/k"] == 4 and rows["/world/contacts/points"] == 4
    with pytest.raises(ValueError, match="grpc_port"):
        ViewerRerun(record_to_rrd=str(path), grpc_port=0)
    with pytest.raises(ValueError, match=".rrd"):
        ViewerRerun(record_to_rrd=str(tmp_path / "x.txt"))


def test_viewer_rerun_without_the_package_names_the_extra(monkeypatch):
    from armillary.viewer import ViewerRerun

    monkeypatch.setitem(sys.modules, "rerun", None)
    with pytest.raises(ImportError, match=r"armillary\[rerun\]"):
        ViewerRerun(record_to_rrd="x.rrd")


# ---------------------------------------------------------------------------------------- framing
def test_scene_bounds_and_framing_see_every_corner():
    b = armillary.ModelBuilder()
    body = b.add_body(xform=wp.transform((1.0, 2.0, 3.0), wp.quat_identity()))
    b.add_shape_sphere(body, radius=0.25)
    b.add_shape_box(-1, xform=wp.transform((0.0, 0.0, 0.5), wp.quat_identity()), hx=0.5, hy=0.2, hz=0.5)
    b.add_ground_plane()  # infinite: left out of the bounds
    model = b.finalize(device="cpu")
    lo, hi = scene_bounds(model)
    np.testing.assert_allclose(lo, [-0.5, -0.2, 0.0], atol=1e-6)
    np.testing.assert_allclose(hi, [1.25, 2.25, 3.25], atol=1e-6)
    moved = scene_bounds(model, body_q=np.array([[0, 0, 10, 0, 0, 0, 1]], dtype=np.float32))
    assert moved[1][2] == pytest.approx(10.25)
    for aspect in (0.5, 1.0, 16 / 9):
        view = frame_bounds(lo, hi, fov=40.0, aspect=aspect, margin=1.0)
        assert isinstance(view, CameraView)
        tan_y = math.tan(math.radians(20.0))
        worst = 0.0
        for corner in np.array(np.meshgrid(*zip(lo, hi))).T.reshape(-1, 3):
            d = corner - view.position
            z = d @ view.forward
            assert z > 0
            worst = max(worst, abs(d @ view.up) / z / tan_y, abs(d @ view.right) / z / (tan_y * aspect))
        assert worst == pytest.approx(1.0, abs=1e-6)  # margin 1: the tightest corner touches the frame
        assert view.forward[2] == pytest.approx(-0.5)  # 30 degrees down
        np.testing.assert_allclose(view.rotation_matrix() @ [0, 0, -1], view.forward, atol=1e-12)
    with pytest.raises(ValueError, match="fov"):
        frame_bounds(lo, hi, fov=180.0)
    with pytest.raises(ValueError, match="finite"):
        frame_bounds([0, 0, np.nan], hi)


def test_contact_world_geometry_of_a_resting_sphere():
    b = armillary.ModelBuilder()
    body = b.add_body(xform=wp.transform((0.3, -0.2, 0.099), wp.quat_identity()))
    b.add_shape_sphere(body, radius=0.1)
    b.add_ground_plane()
    model = b.finalize(device="cpu")
    state = model.state()
    contacts = model.contacts()
    model.collide(state, contacts)
    geo = contact_world_geometry(contacts, state, model)
    assert geo["count"] >= 1
    normals = geo["normal"]
    np.testing.assert_allclose(np.abs(normals[:, 2]), 1.0, atol=1e-6)
    # the sphere's point (its centre, radius in margin) and the plane's point, both in the world frame
    sphere_side = np.where(geo["shape0"][:, None] == 0, geo["point0"], geo["point1"])
    np.testing.assert_allclose(sphere_side[:, :2], [[0.3, -0.2]] * geo["count"], atol=1e-5)


# ---------------------------------------------------------------------------------------- ViewerImage
@pytest.mark.parametrize("suffix", [".gif", ".mp4"])
def test_viewer_image_writes_frames_and_video(scene, tmp_path, suffix):
    iio = _need("imageio.v3")
    if suffix == ".mp4":
        _need("imageio_ffmpeg")
    from armillary.viewer import ViewerImage

    frames_dir = tmp_path / "frames"
    frames_dir.mkdir()
    video = tmp_path / f"run{suffix}"
    viewer = ViewerImage(video, width=64, height=48, fps=30, frames_dir=frames_dir)
    _record(viewer, scene, frames=3)
    frames = iio.imread(video)
    assert frames.shape == (3, 48, 64, 3)
    assert sorted(os.listdir(frames_dir)) == [f"frame_{k:05d}.png" for k in range(3)]
    png = iio.imread(frames_dir / "frame_00002.png")
    assert png.shape == (48, 64, 3) and png.std() > 5  # shapes on a background, not one flat colour
    frame = viewer.get_frame()
    assert frame.shape == (48, 64, 3) and frame.dtype == wp.uint8
    np.testing.assert_array_equal(frame.numpy(), png)


def test_viewer_image_draws_contacts_and_rejects_bad_input(scene, tmp_path):
    _need("imageio")
    from armillary.viewer import ViewerImage

    model, state, contacts, frame = scene
    viewer = ViewerImage(None, width=96, height=64)
    viewer.set_model(model)
    frame(8)
    viewer.begin_frame(0.0)
    viewer.log_state(state)
    viewer.log_points("/marker", np.array([[0.0, 0.0, 0.5]]), colors=(1.0, 0.0, 1.0))
    viewer.end_frame()
    img = viewer.get_frame().numpy()
    rows, cols, ok = viewer._project(np.array([[0.0, 0.0, 0.5]]))
    assert ok[0] and tuple(img[rows[0], cols[0]]) == (255, 0, 255)
    with pytest.raises(ValueError, match="must end with .mp4 or .gif"):
        ViewerImage(tmp_path / "x.avi")
    with pytest.raises(ValueError, match="width"):
        ViewerImage(None, width=8)
    with pytest.raises(ValueError, match="frames_dir"):
        ViewerImage(None, frames_dir=tmp_path / "missing")
    with pytest.raises(NotImplementedError):
        ViewerNull(1).get_frame()

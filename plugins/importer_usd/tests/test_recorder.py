"""``armillary.usd.RecorderUSD`` and ``armillary run --usd``: time-sampled body transforms."""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest

pytest.importorskip("pxr")

import warp as wp  # noqa: E402
from pxr import Usd, UsdGeom, UsdPhysics  # noqa: E402

import armillary  # noqa: E402
from armillary.cli import CliError  # noqa: E402
from armillary.runner import RunOptions, run  # noqa: E402
from armillary_importer_usd.recorder import RecorderUSD  # noqa: E402


def _model(n=3):
    b = armillary.ModelBuilder()
    for i in range(n):
        body = b.add_body(xform=wp.transform(wp.vec3(float(i), 0.0, 1.0), wp.quat_identity()), mass=1.0,
                          inertia=wp.mat33(*np.eye(3).reshape(-1)), label=f"ball {i}")  # fmt: skip
        b.add_shape_sphere(body, radius=0.1)
    return b.finalize(device="cpu")


def _poses(k, n):
    rng = np.random.default_rng(k)
    q = rng.normal(size=(n, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return np.hstack([rng.uniform(-1, 1, (n, 3)), q]).astype(np.float32)


def _world_pose(stage, path, t):
    m = UsdGeom.XformCache(t).GetLocalToWorldTransform(stage.GetPrimAtPath(path))
    q = m.ExtractRotationQuat()
    return np.array([*m.ExtractTranslation()]), np.array([*q.GetImaginary(), q.GetReal()])


def test_time_samples_match_states(tmp_path):
    model = _model()
    state = model.state()
    out = tmp_path / "traj.usda"
    rec = RecorderUSD(model, out, fps=30)
    frames = [_poses(k, model.body_count) for k in range(5)]
    for k, q in enumerate(frames):
        state.body_q.assign(q)
        rec.begin_frame(k / 30.0)
        rec.log_state(state)
        rec.end_frame()
    rec.close()
    stage = Usd.Stage.Open(str(out))
    assert stage.GetTimeCodesPerSecond() == 30.0
    assert (stage.GetStartTimeCode(), stage.GetEndTimeCode()) == (0.0, 4.0)
    for k, q in enumerate(frames):
        for b, path in rec.body_paths.items():
            p, r = _world_pose(stage, path, float(k))
            np.testing.assert_allclose(p, q[b, :3], atol=1e-6)
            assert abs(np.dot(r, q[b, 3:])) == pytest.approx(1.0, abs=1e-6)  # xyzw <-> Gf real first
    # the model is in the stage too (usdview shows shapes; physics prims stay valid)
    assert all(stage.GetPrimAtPath(p).HasAPI(UsdPhysics.RigidBodyAPI) for p in rec.body_paths.values())


def test_viewer_usd_style_and_frame_limit(tmp_path):
    model = _model(1)
    state = model.state()
    rec = RecorderUSD(str(tmp_path / "v.usd"), fps=60, num_frames=2)  # ViewerUSD order, model later
    with pytest.raises(RuntimeError, match="set_model"):
        rec.log_state(state)
    rec.set_model(model)
    n = 0
    while rec.is_running():
        rec.record(state)
        n += 1
    assert n == 2
    rec.record(state)  # ignored past num_frames
    rec.close()
    assert not rec.is_running()
    stage = Usd.Stage.Open(str(tmp_path / "v.usd"))
    attr = stage.GetPrimAtPath(rec.body_paths[0]).GetAttribute("xformOp:translate")
    assert attr.GetTimeSamples() == [0.0, 1.0]


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="must end with"):
        RecorderUSD(_model(1), tmp_path / "x.txt")
    with pytest.raises(ValueError, match="fps"):
        RecorderUSD(_model(1), tmp_path / "x.usda", fps=0)


def test_humanoid_recording_speed(tmp_path):
    from armillary.testing.assets import shared_assets_dir

    root = shared_assets_dir()
    if root is None:
        pytest.skip("shared assets not found")
    import warnings

    b = armillary.ModelBuilder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b.add_mjcf(str(root / "mjcf/humanoid/humanoid.xml"))
    model = b.finalize(device="cpu")
    state = model.state()
    rec = RecorderUSD(model, tmp_path / "h.usdc", fps=60)
    n = 300
    start = time.perf_counter()
    for _ in range(n):
        rec.record(state)
    rate = n / (time.perf_counter() - start)
    rec.close()
    assert rate > 300, f"{rate:.0f} frames/s"  # about 5000 frames/s measured for its 18 bodies


def test_cli_run_usd(tmp_path):
    out = tmp_path / "run.usda"
    summary = run(RunOptions(frames=4, out=str(tmp_path / "t.npz"), usd=str(out), progress=False))
    assert summary.usd == str(out) and any("usd trajectory" in line for line in summary.lines())
    data = np.load(tmp_path / "t.npz")
    stage = Usd.Stage.Open(str(out))
    fps = stage.GetTimeCodesPerSecond()
    assert fps == pytest.approx(1.0 / (float(data["dt"]) * int(data["substeps"])))
    assert (stage.GetStartTimeCode(), stage.GetEndTimeCode()) == (0.0, 4.0)
    bodies = [p for p in stage.Traverse() if p.HasAPI(UsdPhysics.RigidBodyAPI)]
    assert len(bodies) == data["body_q"].shape[1]
    for i, prim in enumerate(bodies):  # the export writes bodies in model order
        for k in (0, 4):
            p, _ = _world_pose(stage, prim.GetPath(), float(k))
            np.testing.assert_allclose(p, data["body_q"][k, i, :3], atol=1e-5)
    try:
        from pxr import UsdValidation
    except ImportError:
        return
    context = UsdValidation.ValidationContext(UsdValidation.ValidationRegistry().GetOrLoadAllValidators())
    errors = context.Validate(stage)
    assert not errors, [e.GetMessage() for e in errors][:5]


def test_cli_usd_errors(tmp_path, monkeypatch):
    with pytest.raises(CliError, match="--usd must name"):
        run(RunOptions(frames=1, out=None, usd=str(tmp_path / "x.npz")))
    from armillary.plugins import get_registry

    registry = get_registry()

    def missing(fmt, name):
        raise ImportError(f"no installed plugin provides the {fmt!r} importer")

    monkeypatch.setattr(registry.importers, "api", missing)
    with pytest.raises(CliError, match="armillary-importer-usd"):
        run(RunOptions(frames=1, out=None, usd=str(tmp_path / "x.usda")))


def test_cli_without_usd_does_not_load_pxr(tmp_path):
    code = ("import sys; from armillary.cli import main; "
            f"rc = main(['run', '--frames', '1', '--out', {str(tmp_path / 't.npz')!r}, '--no-progress']); "
            "print('pxr' in sys.modules); raise SystemExit(rc)")  # fmt: skip
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().splitlines()[-1] == "False"

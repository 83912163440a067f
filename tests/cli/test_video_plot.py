"""``armillary run --video / --rerun-save``, the trajectory's energy / contact / diagnostics arrays, and
``armillary plot``."""

import importlib
import os
import sys
import types

import numpy as np
import pytest
import warp as wp

from armillary.cli import CliError, main
from armillary.runner import RunOptions, TrajectoryRecorder, run


def _need(module: str):
    """Import an optional package the `test` extra installs: in CI it must be there, elsewhere skip."""
    if os.environ.get("CI"):
        return importlib.import_module(module)
    return pytest.importorskip(module)


@pytest.fixture(scope="module")
def trajectory(tmp_path_factory):
    """A short run of the demo scene: its .npz and summary."""
    out = tmp_path_factory.mktemp("run") / "t.npz"
    summary = run(RunOptions(frames=12, out=str(out), progress=False))
    return out, summary


# ---------------------------------------------------------------------------------------- the run's arrays
def test_trajectory_holds_energy_and_contact_count(trajectory):
    out, summary = trajectory
    data = np.load(out)
    assert data["energy"].shape == data["contact_count"].shape == (13,)
    assert data["energy"][0] == pytest.approx(summary.energy_start)
    assert data["energy"][-1] == pytest.approx(summary.energy_end)
    assert data["contact_count"][0] == 0 and data["contact_count"][-1] > 0  # the ground plane touches the grid
    assert int(data["up_axis"]) == 2
    assert not any(k.startswith("diag_") for k in data.files)  # SolverXPBD has no diagnostics


def test_recorder_keeps_a_coupled_solvers_residual_histories(tmp_path):
    """The coupled solvers' ``diagnostics`` (1-D float arrays per iteration, last step) become (frames,
    iterations) ``diag_*`` arrays, row 0 NaN; integer arrays (``contact_count``) are left out."""
    from armillary.demos import sphere_rest

    model = sphere_rest().finalize(device="cpu")
    state = model.state()
    diag = types.SimpleNamespace(primal_residual=wp.zeros(4, dtype=float), dual_residual=wp.zeros(4, dtype=float),
                                 joint_gap=wp.zeros(4, dtype=float), contact_count=wp.zeros(3, dtype=wp.int32))
    solver = types.SimpleNamespace(diagnostics=diag)
    rec = TrajectoryRecorder(model, solver)
    rec.record(state, 0.0)
    for k in range(1, 4):
        diag.primal_residual.assign(np.array([1.0, 0.1, 0.01, 0.001]) * k)
        diag.dual_residual.assign(np.array([2.0, 0.2, 0.02, 0.002]) * k)
        diag.joint_gap.assign(np.array([3.0, 0.3, 0.03, 0.003]) * k)
        rec.record(state, k / 60.0)
    path = tmp_path / "coupled.npz"
    rec.save(path, dt=1 / 60, substeps=1, solver="SolverCoupledADMM")
    data = np.load(path)
    assert sorted(k for k in data.files if k.startswith("diag_")) == \
        ["diag_dual_residual", "diag_joint_gap", "diag_primal_residual"]  # fmt: skip
    table = data["diag_primal_residual"]
    assert table.shape == (4, 4) and np.isnan(table[0]).all()
    np.testing.assert_allclose(table[3], [3.0, 0.3, 0.03, 0.003], rtol=1e-6)

    _need("matplotlib")
    from armillary.plot import plot_trajectory

    fig = plot_trajectory(path)
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["energy", "contact count", "body heights", "coupling residuals per iteration (last frame)",
                      "coupling residuals at the last iteration"]  # fmt: skip
    per_iteration, per_frame = fig.axes[3], fig.axes[4]
    assert len(per_iteration.get_lines()) == len(per_frame.get_lines()) == 3
    primal = per_iteration.get_lines()[[ln.get_label() for ln in per_iteration.get_lines()].index("primal_residual")]
    np.testing.assert_allclose(primal.get_ydata(), [3.0, 0.3, 0.03, 0.003], rtol=1e-6)


# ---------------------------------------------------------------------------------------- --video
@pytest.mark.parametrize("suffix", [".mp4", ".gif"])
def test_run_video_has_one_frame_per_simulated_frame(tmp_path, capsys, suffix):
    iio = _need("imageio.v3")
    if suffix == ".mp4":
        _need("imageio_ffmpeg")
    video = tmp_path / f"run{suffix}"
    rc = main(["run", "--frames", "6", "--out", str(tmp_path / "t.npz"), "--video", str(video),
               "--video-size", "64x48", "--no-progress"])  # fmt: skip
    assert rc == 0, capsys.readouterr().err
    assert f"video:          {video}" in capsys.readouterr().out
    frames = iio.imread(video)
    assert frames.shape == (7, 48, 64, 3)  # the initial state and 6 frames
    assert not np.array_equal(frames[0], frames[-1])  # the shapes fell


def test_run_video_and_rerun_errors(tmp_path, capsys, monkeypatch):
    assert main(["run", "--frames", "1", "--video", str(tmp_path / "x.avi")]) == 2
    assert "--video must name a .mp4 or .gif file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["run", "--video-size", "64by48"])
    assert "expected WIDTHxHEIGHT" in capsys.readouterr().err
    with pytest.raises(CliError, match="--video-size must be WIDTHxHEIGHT with each side in 16..4096"):
        run(RunOptions(frames=1, out=None, video=str(tmp_path / "x.gif"), video_size=(8, 8)))
    with pytest.raises(CliError, match="--rerun-save must name a .rrd file"):
        run(RunOptions(frames=1, out=None, rerun_save=str(tmp_path / "x.txt")))
    with pytest.raises(CliError, match="--video .*folder .* does not exist"):
        run(RunOptions(frames=1, out=None, video=str(tmp_path / "missing" / "x.gif")))
    monkeypatch.setitem(sys.modules, "imageio", None)
    monkeypatch.setitem(sys.modules, "imageio.v2", None)
    with pytest.raises(CliError, match=r"--video: .*armillary\[video\]"):
        run(RunOptions(frames=1, out=None, video=str(tmp_path / "x.gif")))
    monkeypatch.setitem(sys.modules, "rerun", None)
    with pytest.raises(CliError, match=r"--rerun needs the rerun-sdk package: pip install 'armillary\[rerun\]'"):
        run(RunOptions(frames=1, out=None, rerun=True))


def test_run_rerun_save_writes_a_recording(tmp_path, capsys):
    _need("rerun")
    from rerun.chunk import RrdReader

    rrd = tmp_path / "run.rrd"
    assert main(["run", "--frames", "3", "--out", str(tmp_path / "t.npz"), "--rerun-save", str(rrd),
                 "--no-progress"]) == 0  # fmt: skip
    assert f"rerun:          {rrd}" in capsys.readouterr().out
    rows = {}
    for chunk in RrdReader(str(rrd)).stream():
        if not chunk.is_static:
            rows[str(chunk.entity_path)] = rows.get(str(chunk.entity_path), 0) + chunk.num_rows
    body_count = np.load(tmp_path / "t.npz")["body_q"].shape[1]
    for b in range(body_count):
        assert rows[f"/world/bodies/{b}"] == 4  # the initial state and 3 frames
    assert rows["/scalars/energy"] == 4 and rows["/scalars/contact_count"] == 4


# ---------------------------------------------------------------------------------------- plot
def test_plot_writes_the_figure_with_the_expected_axes(trajectory, tmp_path, capsys):
    _need("matplotlib")
    from armillary.plot import plot_trajectory

    out, _ = trajectory
    data = np.load(out)
    fig = plot_trajectory(out)
    assert [ax.get_title() for ax in fig.axes] == ["energy", "contact count", "body heights"]
    assert len(fig.axes[0].get_lines()) == 1 and len(fig.axes[1].get_lines()) == 1
    assert len(fig.axes[2].get_lines()) == min(8, data["body_q"].shape[1])
    np.testing.assert_allclose(fig.axes[0].get_lines()[0].get_ydata(), data["energy"])
    fig = plot_trajectory(out, bodies=["box_1", "0"])
    heights = fig.axes[2].get_lines()
    assert [ln.get_label() for ln in heights] == ["box_1", str(data["body_names"][0])]
    np.testing.assert_allclose(heights[0].get_ydata(), data["body_q"][:, 1, 2])

    png = tmp_path / "fig.png"
    assert main(["plot", str(out), "--out", str(png), "--bodies", "box_1"]) == 0
    assert f"plot: {png}" in capsys.readouterr().out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_bad_input(trajectory, tmp_path, capsys):
    _need("matplotlib")
    out, _ = trajectory
    cases = [
        ([str(tmp_path / "missing.npz")], "no such file"),
        ([str(out), "--bodies", "nobody"], "--bodies: no body 'nobody' in the trajectory; bodies: 'sphere_0'"),
        ([str(out), "--out", str(tmp_path / "fig.txt")], "--out must name a .png, .pdf, .svg file"),
        ([str(out), "--out", str(tmp_path / "no" / "fig.png")], "does not exist"),
        ([str(tmp_path)], "is a folder without results.csv or results.parquet"),
    ]
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    cases.append(([str(tmp_path / "other.npz")], "is not an armillary trajectory: it has no time, body_q array"))
    (tmp_path / "notes.txt").write_text("x")
    cases.append(([str(tmp_path / "notes.txt")], "expected a trajectory .npz"))
    for argv, message in cases:
        assert main(["plot", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, (argv, err)


def test_plot_of_a_sweep_folder_dispatches_to_plot_study(tmp_path, monkeypatch, capsys):
    study = tmp_path / "study"
    study.mkdir()
    (study / "results.csv").write_text("a,b\n1,2\n")
    calls = []
    import armillary.sweep.plot as sweep_plot

    monkeypatch.setattr(sweep_plot, "plot_study", lambda path, out: calls.append((path, out)) or out)
    assert main(["plot", str(study), "--out", str(tmp_path / "s.png")]) == 0
    assert calls == [(str(study), str(tmp_path / "s.png"))]
    monkeypatch.setitem(sys.modules, "armillary.sweep.plot", None)  # armillary.sweep absent
    assert main(["plot", str(study)]) == 2
    assert "is a sweep output folder, but armillary.sweep is not available" in capsys.readouterr().err


def test_plot_without_matplotlib_names_the_extra(trajectory, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    assert main(["plot", str(trajectory[0])]) == 2
    assert "armillary plot needs matplotlib: pip install 'armillary[plot]'" in capsys.readouterr().err


def test_recorder_and_plot_with_a_real_admm_coupled_solver(tmp_path):
    """The residual histories of a real SolverCoupledADMM run (the sweep's two-link pendulum) reach the
    .npz and `armillary plot` draws them: the gap after the last iteration is below the first's."""
    from armillary.solvers.experimental.coupled import SolverCoupledADMM
    from armillary.sweep.scenes import two_link_pendulum

    builder, own = two_link_pendulum()
    model = builder.finalize(device="cpu")
    from armillary.plugins import get_registry

    solvers = get_registry().solvers
    entries = [SolverCoupledADMM.Entry("rigid", lambda v: solvers.resolve("SolverFeatherstone")(v), bodies=[0]),
               SolverCoupledADMM.Entry("soft", lambda v: solvers.resolve("SolverXPBD")(v, iterations=4), bodies=[1])]
    solver = SolverCoupledADMM(model, entries, SolverCoupledADMM.Config(iterations=4))
    s0, s1, control = model.state(), model.state(), model.control()
    import armillary

    armillary.eval_fk(model, model.joint_q, model.joint_qd, s0)
    rec = TrajectoryRecorder(model, solver)
    rec.record(s0, 0.0)
    dt = 1.0 / 600.0
    for frame in range(1, 6):
        for _ in range(2):
            solver.step(s0, s1, control, None, dt)
            s0, s1 = s1, s0
        rec.record(s0, frame * 2 * dt)
    path = tmp_path / "admm.npz"
    rec.save(path, dt=dt, substeps=2, solver="SolverCoupledADMM")
    data = np.load(path)
    primal = data["diag_primal_residual"]
    assert primal.shape == (6, 4) and np.isnan(primal[0]).all() and np.isfinite(primal[1:]).all()
    assert (primal[1:, -1] <= primal[1:, 0]).all() and primal[1:, 0].max() > 0.0
    assert "diag_dual_residual" in data.files and "diag_joint_gap" in data.files

    _need("matplotlib")
    out = tmp_path / "admm.png"
    assert main(["plot", str(path), "--out", str(out)]) == 0
    assert out.stat().st_size > 0

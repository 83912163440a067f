"""The command line: ``armillary plugins`` and ``armillary run``."""

import subprocess
import sys
import types

import numpy as np
import pytest
import warp as wp

import armillary
from armillary.cli import CliError, main
from armillary.runner import RunOptions, run
from armillary.solvers import SolverBase, SolverCapabilities


def _plugin(**hooks):
    ns = types.SimpleNamespace()
    for name, fn in hooks.items():
        setattr(ns, name, armillary.hookimpl(fn))
    return ns


def test_plugins_lists_versions_provides_errors_and_conflicts(registry, capsys):
    class SolverA(SolverBase):
        capabilities = SolverCapabilities(coordinates="maximal")

    registry.register(_plugin(armillary_register_solvers=lambda registry: registry.add(
        "SolverDup", SolverA, summary="first")), name="one", distribution="dist-one", version="1.2")
    registry.register(_plugin(armillary_register_solvers=lambda registry: registry.add(
        "SolverDup", SolverA, summary="second")), name="two", distribution="dist-two", version="3.4")
    registry.register(_plugin(armillary_register_solvers=lambda registry: 1 / 0), name="broken")
    assert main(["plugins"]) == 0
    out = capsys.readouterr().out
    assert f"armillary core {armillary.__version__}" in out
    assert "one: dist-one 1.2" in out and "solvers: SolverDup" in out
    assert "broken" in out and "[FAILED]" in out and "ZeroDivisionError" in out
    assert "CONFLICT: solver 'SolverDup' is registered by dist-one 1.2, dist-two 3.4" in out
    assert "scenes: falling_shapes" in out


def test_python_dash_m_plugins_lists_every_in_repo_plugin():
    result = subprocess.run([sys.executable, "-m", "armillary", "plugins"], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    for dist in ("armillary-solver-xpbd", "armillary-solver-featherstone", "armillary-solver-mujoco",
                 "armillary-solver-vbd", "armillary-solver-semi-implicit", "armillary-coupling", "armillary-importer-mjcf",
                 "armillary-importer-urdf", "armillary-importer-usd", "armillary-actuators",
                 "armillary-example-symplectic"):
        assert dist in result.stdout
    assert "SolverSymplecticEuler" in result.stdout


@pytest.mark.parametrize(
    "argv,fragment",
    [
        (["run", "--solver", "SolverNope", "--frames", "1"], "unknown solver 'SolverNope'"),
        (["run", "--solver", "SolverXPBD", "--frames", "1"], "pip install armillary-solver-xpbd"),
        (["run", "does/not/exist.xml"], "cannot read model file"),
        (["run", "--scene", "nope"], "unknown scene 'nope'"),
        (["run", "--frames", "0"], "--frames must be at least 1"),
        (["run", "--out", "x.txt"], "--out must name a .npz file"),
    ],
)
def test_run_errors_are_one_line_without_traceback(argv, fragment, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert fragment in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_run_unknown_file_format_is_one_line(tmp_path, capsys):
    path = tmp_path / "model.weird"
    path.write_text("x")
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert "no installed importer reads '.weird' files" in err and err.count("\n") == 1


def test_cli_subprocess_error_exit_code():
    result = subprocess.run([sys.executable, "-m", "armillary", "run", "--solver", "SolverNope"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and "SolverNope" in result.stderr


def test_run_demo_scene_writes_a_numpy_trajectory(tmp_path):
    """The main job end to end with the example third-party solver (installed in the test env)."""
    out = tmp_path / "traj.npz"
    result = subprocess.run(
        [sys.executable, "-m", "armillary", "run", "--solver", "SolverSymplecticEuler", "--frames", "30",
         "--out", str(out), "--progress"],
        capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert "steps/s" in result.stdout and "energy:" in result.stdout
    assert "= 30 frames x 10 substeps x dt 0.00166667 s (300 steps)" in result.stdout
    assert "warning" not in result.stdout
    assert "100%" in result.stderr  # the progress bar
    assert "CUDA driver" not in result.stderr  # Warp's start-up warning is silenced for CPU runs
    data = np.load(out)
    assert data["body_q"].shape == (31, 9, 7)
    assert list(data["body_names"]) == ["sphere_0", "box_1", "sphere_2", "box_3", "sphere_4", "box_5", "sphere_6",
                                        "box_7", "sphere_8"]
    np.testing.assert_allclose(data["time"], np.arange(31) * 10 / 600.0, rtol=1e-6)
    assert float(data["dt"]) == pytest.approx(1 / 600) and int(data["substeps"]) == 10
    assert str(data["solver"]) == "SolverSymplecticEuler"
    assert np.all(np.isfinite(data["body_q"]))
    # bodies fell: every body is lower at the end than at the start, none went through the ground
    z = data["body_q"][..., 2]
    assert np.all(z[-1] < z[0]) and z.min() > 0.0


# ---------------------------------------------------------------- a scripted host-side solver and scene
class SolverScripted(SolverBase):
    """Moves bodies with ``body_qd`` on the host; ``action(solver, q, qd)`` may edit them (or raise) per step."""

    capabilities = SolverCapabilities(coordinates="maximal", joint_types={"FREE"}, features={"rigid_bodies"})
    action = None
    calls = 0

    def step(self, state_in, state_out, control, contacts, dt):
        type(self).calls += 1
        q, qd = state_in.body_q.numpy(), state_in.body_qd.numpy()
        if type(self).action is not None:
            type(self).action(self, q, qd)
        q[:, :3] += qd[:, :3] * dt
        state_out.body_q.assign(q)
        state_out.body_qd.assign(qd)


class SolverComposite(SolverBase):
    """Needs entries besides the model, like SolverCoupled."""

    capabilities = SolverCapabilities(coordinates="maximal", joint_types={"FREE"}, features={"rigid_bodies"})

    def __init__(self, model, entries, coupling=None):
        super().__init__(model)

    def step(self, state_in, state_out, control, contacts, dt):
        pass


SCENE_BUILDS = []


def _two_boxes(world_count=1):
    """Two 0.2 m boxes resting on the ground plane."""
    SCENE_BUILDS.append(world_count)
    b = armillary.ModelBuilder()
    b.add_ground_plane()
    for i, name in enumerate(("box_a", "box_b")):
        body = b.add_body(xform=wp.transform((0.5 * i, 0.0, 0.1), wp.quat_identity()), label=name)
        b.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1, label=f"{name}_geom")
    return b


@pytest.fixture
def scripted(registry, monkeypatch):
    """Registers SolverScripted, SolverComposite and the scene 'two_boxes' (dt 0.01 s, 5 frames x 2 substeps)."""
    monkeypatch.setattr(SolverScripted, "action", None)
    monkeypatch.setattr(SolverScripted, "calls", 0)
    SCENE_BUILDS.clear()

    def solvers(registry):
        registry.add("SolverScripted", SolverScripted, summary="scripted host-side solver")
        registry.add("SolverComposite", SolverComposite, summary="needs entries")

    registry.register(_plugin(
        armillary_register_solvers=solvers,
        armillary_register_scenes=lambda registry: registry.add(
            "two_boxes", _two_boxes, summary="two boxes", dt=0.01, frames=5, substeps=2),
    ), name="scripted", distribution="armillary-test-scripted", version="1.0")  # fmt: skip
    return SolverScripted


def _one_line(err: str) -> str:
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


def _raise_at(step, exc):
    def action(solver, q, qd):
        if type(solver).calls == step:
            raise exc
    return action


def test_a_failing_step_is_one_line_naming_scene_solver_frame_and_shapes(scripted, capsys):
    scripted.action = _raise_at(3, NotImplementedError(
        "CollisionPipeline: narrow phase for BOX-CONE pairs (shapes 1 and 2) is not implemented yet"))
    assert main(["run", "--scene", "two_boxes", "--solver", "SolverScripted", "--no-progress"]) == 2
    err = _one_line(capsys.readouterr().err)
    assert "two_boxes: a solver step failed in frame 2 (step 3, t = 0.02 s) with SolverScripted" in err
    assert "NotImplementedError: CollisionPipeline: narrow phase for BOX-CONE pairs" in err
    assert "shape 1 = 'box_a_geom' on body 'box_a'; shape 2 = 'box_b_geom' on body 'box_b'" in err
    assert "try another --solver" in err and "--traceback" in err


@pytest.mark.parametrize("how", ["flag", "env"])
def test_traceback_on_request(scripted, capsys, monkeypatch, how):
    scripted.action = _raise_at(2, ValueError("bad value in body 0"))
    argv = ["run", "--scene", "two_boxes", "--solver", "SolverScripted", "--no-progress"]
    if how == "flag":
        argv.append("--traceback")
    else:
        monkeypatch.setenv("ARMILLARY_DEBUG", "1")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and 'raise exc' in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("armillary: error: two_boxes: a solver step failed in frame 1 (step 2")
    assert "ValueError: bad value in body 0 [body 0 = 'box_a']" in last


def test_collision_setup_failure_is_one_line(scripted, capsys, monkeypatch):
    """An exception of the collision pipeline (here: the real message of an unsupported pair) names the shapes."""
    from armillary.sim.model import Model

    class SolverScriptedContacts(SolverScripted):
        capabilities = SolverCapabilities(coordinates="maximal", joint_types={"FREE"}, features={"rigid_bodies"},
                                          collision_pipeline=True)

    armillary.plugins.get_registry().register(_plugin(armillary_register_solvers=lambda registry: registry.add(
        "SolverScriptedContacts", SolverScriptedContacts, summary="t")), name="scripted_contacts")

    def contacts(self, collision_pipeline=None):
        raise NotImplementedError("CollisionPipeline: narrow phase for PLANE-GAUSSIAN pairs (shapes 0 and 2) is "
                                  "not implemented yet")
    monkeypatch.setattr(Model, "contacts", contacts)
    assert main(["run", "--scene", "two_boxes", "--solver", "SolverScriptedContacts", "--no-progress"]) == 2
    err = _one_line(capsys.readouterr().err)
    assert "two_boxes: setting up collision detection failed with SolverScriptedContacts" in err
    assert "shape 0 = 'ground_plane' (static); shape 2 = 'box_b_geom' on body 'box_b'" in err
    assert scripted.calls == 0


def test_any_import_failure_is_one_line(registry, tmp_path, capsys):
    def broken(builder, path, **kwargs):
        raise KeyError("joint_frame")

    registry.register(_plugin(armillary_register_importers=lambda registry: registry.add(
        "weird", broken, suffixes=(".weird",), summary="t")), name="weird_importer")
    path = tmp_path / "robot.weird"
    path.write_text("x")
    assert main(["run", str(path)]) == 2
    err = _one_line(capsys.readouterr().err)
    assert f"cannot import '{path}': KeyError: 'joint_frame'" in err and "--traceback" in err


def test_unexpected_errors_of_other_commands_are_one_line(monkeypatch, capsys):
    import armillary.cli as cli

    def boom(args):
        raise RuntimeError("boom")
    monkeypatch.setattr(cli, "_cmd_plugins", boom)
    assert main(["plugins"]) == 2
    err = _one_line(capsys.readouterr().err)
    assert "plugins: unexpected RuntimeError: boom" in err and "--traceback" in err


# ---------------------------------------------------------------- summary warnings
def test_passive_run_has_no_warnings(scripted):
    summary = run(RunOptions(scene="two_boxes", solver="SolverScripted", out=None, progress=False))
    assert summary.warnings == []
    assert not any(line.startswith("warning") for line in summary.lines())


def test_energy_growth_is_flagged(scripted):
    def pump(solver, q, qd):
        qd[:, 2] += 1.0  # +1 m/s upwards every step: energy from nowhere
    scripted.action = pump
    summary = run(RunOptions(scene="two_boxes", solver="SolverScripted", out=None, progress=False))
    energy = [w for w in summary.warnings if w.startswith("energy grew")]
    assert len(energy) == 1, summary.warnings
    assert f"energy grew from {summary.energy_start:.4g} to {summary.energy_end:.4g} J" in energy[0]
    assert "try --dt smaller or another solver" in energy[0]
    assert f"warning:        {energy[0]}" in summary.lines()


def test_driven_systems_are_not_flagged_for_energy_growth():
    from armillary.runner import energy_sources

    b = armillary.ModelBuilder()
    body = b.add_body(xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()), mass=1.0)
    b.add_joint_revolute(-1, body, axis=(0.0, 1.0, 0.0), target_q=0.5, target_ke=100.0)
    assert "position drives with targets away from the initial pose" in energy_sources(b.finalize(device="cpu"))
    b = armillary.ModelBuilder()
    body = b.add_body(xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()), mass=1.0)
    b.add_joint_revolute(-1, body, axis=(0.0, 1.0, 0.0), target_q=0.0, target_ke=100.0)  # holds the initial pose
    assert energy_sources(b.finalize(device="cpu")) == []


def test_bodies_far_away_or_below_the_ground_are_flagged(scripted):
    def scatter(solver, q, qd):
        if type(solver).calls == 4:
            q[0, 0] = 2000.0  # box_a: 2 km away
            q[1, 2] = -1.0  # box_b: 1 m below the ground
    scripted.action = scatter
    summary = run(RunOptions(scene="two_boxes", solver="SolverScripted", out=None, progress=False))
    far = [w for w in summary.warnings if "from the scene" in w]
    below = [w for w in summary.warnings if "below the ground plane" in w]
    assert len(far) == 1 and "1 body ('box_a')" in far[0] and "try a smaller --dt" in far[0], summary.warnings
    assert len(below) == 1, summary.warnings
    assert "1 body ('box_b') went 1 m below the ground plane (body origin), more than its size (0.173 m)" in below[0]


# ---------------------------------------------------------------- solver choice, outputs, devices
def test_composite_solvers_are_left_out_with_how_to_run_them(scripted, capsys):
    assert main(["run", "--scene", "two_boxes", "--solver", "SolverComposite"]) == 2
    err = _one_line(capsys.readouterr().err)
    assert "'SolverComposite' (armillary-test-scripted 1.0) is a composite solver" in err
    assert "needs entries besides the model" in err and "Python script" in err
    assert SCENE_BUILDS == []  # checked before the scene was built
    assert main(["run", "--scene", "two_boxes", "--solver", "SolverNope"]) == 2
    err = _one_line(capsys.readouterr().err)
    assert "can use: SolverScripted (composite, Python API only: SolverComposite)" in err
    # without --solver the composite one is never picked
    summary = run(RunOptions(scene="two_boxes", out=None, progress=False))
    assert summary.solver == "SolverScripted"


def test_unknown_solver_suggests_and_is_checked_before_the_model(scripted, capsys):
    assert main(["run", "--scene", "two_boxes", "--solver", "SolverScriptd"]) == 2
    err = _one_line(capsys.readouterr().err)
    assert "unknown solver 'SolverScriptd' (did you mean 'SolverScripted'?)" in err
    assert SCENE_BUILDS == []
    assert main(["run", "--scene", "two_boxes", "--solver", "scripted"]) == 2
    assert "did you mean 'SolverScripted'?" in capsys.readouterr().err


def test_solver_of_a_plugin_disabled_by_armillary_plugins(registry, monkeypatch, capsys):
    from armillary.registry import PluginRecord

    record = PluginRecord(name="solver_xpbd", distribution="armillary-solver-xpbd", version="0.1.0", status="disabled")
    monkeypatch.setattr(registry, "plugin_for_distribution",
                        lambda dist: record if dist == "armillary-solver-xpbd" else None)
    monkeypatch.setenv("ARMILLARY_PLUGINS", "symplectic")
    assert main(["run", "--solver", "SolverXPBD"]) == 2
    err = _one_line(capsys.readouterr().err)
    assert "plugin 'solver_xpbd' is disabled by ARMILLARY_PLUGINS=symplectic" in err
    assert "ARMILLARY_PLUGINS=symplectic,solver_xpbd" in err and "None" not in err


@pytest.mark.parametrize("flag", ["--out", "--usd"])
def test_outputs_are_checked_before_simulating(scripted, tmp_path, capsys, flag):
    target = tmp_path / "missing" / ("t.npz" if flag == "--out" else "t.usda")
    argv = ["run", "--scene", "two_boxes", "--solver", "SolverScripted", flag, str(target)]
    assert main(argv) == 2
    err = _one_line(capsys.readouterr().err)
    assert f"folder '{target.parent}' does not exist (create it first: mkdir -p {target.parent})" in err
    assert scripted.calls == 0 and SCENE_BUILDS == []
    (tmp_path / "dir.npz").mkdir()
    assert main(["run", "--scene", "two_boxes", "--out", str(tmp_path / "dir.npz")]) == 2
    assert "is a folder" in capsys.readouterr().err


def test_seconds_sets_the_frames_and_the_summary_says_what_was_simulated(scripted, tmp_path):
    out = tmp_path / "t.npz"
    summary = run(RunOptions(scene="two_boxes", seconds=0.05, dt=0.01, out=str(out), progress=False))
    assert summary.frames == 3 and summary.steps == 6  # 0.05 s / (2 x 0.01 s) = 2.5 -> 3 frames
    assert "simulated:      0.06 s = 3 frames x 2 substeps x dt 0.01 s (6 steps)" in summary.lines()
    assert np.load(out)["time"].tolist() == pytest.approx([0.0, 0.02, 0.04, 0.06])
    summary = run(RunOptions(scene="two_boxes", seconds=0.05, dt=0.005, out=None, progress=False))
    assert summary.frames == 5 and summary.simulated_seconds == pytest.approx(0.05)
    # --dt alone keeps the scene's duration (5 frames x 2 substeps x 0.01 s = 0.1 s); --frames sets the frames
    summary = run(RunOptions(scene="two_boxes", dt=0.0025, out=None, progress=False))
    assert summary.frames == 20 and summary.simulated_seconds == pytest.approx(0.1)
    summary = run(RunOptions(scene="two_boxes", dt=0.0025, frames=4, out=None, progress=False))
    assert summary.frames == 4 and summary.simulated_seconds == pytest.approx(0.02)
    with pytest.raises(CliError, match=r"either --frames \(2\) or --seconds"):
        run(RunOptions(scene="two_boxes", frames=2, seconds=1.0, out=None))
    with pytest.raises(CliError, match="--seconds must be a positive number"):
        run(RunOptions(scene="two_boxes", seconds=-1.0, out=None))
    with pytest.raises(SystemExit):
        main(["run", "--frames", "2", "--seconds", "1"])


def test_unavailable_device_lists_the_available_ones(scripted, capsys):
    import warp as wp

    assert main(["run", "--scene", "two_boxes", "--device", "cuda:99"]) == 2
    err = _one_line(capsys.readouterr().err)
    devices = ", ".join(d.alias for d in wp.get_devices())
    assert f"--device 'cuda:99' is not available on this machine" in err and f"available devices: {devices}" in err
    assert "invalid model" not in err and SCENE_BUILDS == []


def test_compile_notice_on_a_terminal(scripted, monkeypatch, capsys):
    import time

    import armillary.runner as runner

    def slow_first(solver, q, qd):
        if type(solver).calls == 1:
            time.sleep(0.4)  # stands in for kernel compilation
    scripted.action = slow_first
    monkeypatch.setattr(runner, "COMPILE_NOTICE_AFTER", 0.05)
    run(RunOptions(scene="two_boxes", solver="SolverScripted", out=None, progress=True))
    err = capsys.readouterr().err
    assert err.index("preparing the run; Warp compiles kernels on their first use") < err.index("ready after") \
        < err.index("100%")
    assert "armillary warmup" in err
    scripted.calls = 0
    run(RunOptions(scene="two_boxes", solver="SolverScripted", out=None, progress=False))
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------- features
def test_features_markdown_and_text(scripted, capsys):
    from armillary.docsgen import feature_table_markdown

    assert main(["features", "--markdown"]) == 0
    markdown = capsys.readouterr().out
    assert markdown == feature_table_markdown() + "\n"
    assert markdown.startswith("| feature | `SolverComposite` | `SolverScripted` |")
    assert main(["features"]) == 0
    text = capsys.readouterr().out
    assert "|" not in text and "`" not in text
    header, rule, *rows = text.splitlines()
    assert header.split() == ["feature", "SolverComposite", "SolverScripted"] and set(rule) <= {"-", " "}
    assert any(r.split() == ["rigid_bodies", "yes", "yes"] for r in rows)
    assert any(r.startswith("Provided by: SolverComposite: armillary-test-scripted 1.0") for r in rows)


# ---------------------------------------------------------------- warmup
WARM_PLUGIN = """
import armillary
import warp as wp


@wp.kernel
def twice(a: wp.array(dtype=float)):
    i = wp.tid()
    a[i] = 2.0 * a[i]


@armillary.hookimpl
def armillary_register_scenes(registry):
    pass
"""


def test_warmup_fills_the_kernel_cache_that_runs_then_use(tmp_path):
    """``armillary warmup --plugin`` compiles a plugin's kernel modules into Warp's cache; a later process
    launching the kernel compiles nothing."""
    import os

    from .fakes import write_distribution

    site = tmp_path / "site"
    write_distribution(site, "armillary-warm-test", "warm_test", "warm_test_plugin", WARM_PLUGIN)
    cache = tmp_path / "warp_cache"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
           "WARP_CACHE_PATH": str(cache)}
    cmd = [sys.executable, "-m", "armillary", "warmup", "--plugin", "warm_test"]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert first.returncode == 0, first.stderr
    assert "[1/1] warm_test_plugin: compiled in" in first.stdout
    assert "1 modules compiled, 0 already cached, 0 failed" in first.stdout
    assert "CUDA driver" not in first.stderr
    entries = sorted(p.name for p in cache.rglob("wp_warm_test_plugin_*"))
    assert entries
    second = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert "[1/1] warm_test_plugin: already in the cache" in second.stdout, second.stdout
    launch = ("import warp as wp, warm_test_plugin as m; a = wp.ones(4, dtype=float, device='cpu'); "
              "wp.launch(m.twice, dim=4, inputs=[a], device='cpu'); assert a.numpy().tolist() == [2.0] * 4")
    third = subprocess.run([sys.executable, "-c", launch], capture_output=True, text=True, timeout=600, env=env)
    assert third.returncode == 0, third.stderr
    assert sorted(p.name for p in cache.rglob("wp_warm_test_plugin_*")) == entries  # nothing recompiled
    bad = subprocess.run([sys.executable, "-m", "armillary", "warmup", "--plugin", "nope"], capture_output=True,
                         text=True, timeout=600, env=env)
    assert bad.returncode == 2 and "--plugin 'nope': no such loaded plugin" in bad.stderr


def test_failure_notes_name_entities_once():
    from armillary.runner import _describe_entities

    model = _two_boxes().finalize(device="cpu")
    assert _describe_entities("contact between shapes 1 and 2", model) == \
        " [shape 1 = 'box_a_geom' on body 'box_a'; shape 2 = 'box_b_geom' on body 'box_b']"
    assert _describe_entities("body 1 ('box_b') is bad", model) == ""  # named already
    assert _describe_entities("joint 1, 'box_b_free_joint', is bad; shape 7 is out of range", model) == ""

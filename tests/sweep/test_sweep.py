"""``armillary sweep``: local and Ray backends, failures, resuming, validation, --quick, plots."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from armillary.sweep import Study, StudyError, compare_tables, load_study, read_journal, read_table, run

HERE = os.path.dirname(os.path.abspath(__file__))
pytestmark = pytest.mark.filterwarnings("ignore:SolverFeatherstone ignores joint_enabled")


def optional(name: str):
    """Import an optional package; skipped when missing, except in CI (the test extra installs it)."""
    if os.environ.get("CI"):
        return __import__(name)
    return pytest.importorskip(name, reason=f"{name} is optional (install the test extra)")


def small_study(**top) -> dict:
    """A coupled pendulum at 1 and 2 ADMM iterations (one run deliberately failing) and a batched
    monolithic XPBD configuration over two initial angles; 0.05 s each."""
    return {
        "name": "small", "duration": 0.05, "dt": 1.0 / 600.0, "substeps": 5,
        "measures": ["status", "trajectory", "error", "energy", "joint_gap", "residuals", "speed"],
        "scenes": {"pendulum": {"source": "_scenes.py:pendulum", "bodies": ["link2"],
                                "reference": {"solver": "SolverFeatherstone"}}},
        "configs": {
            "admm": {"coupler": "SolverCoupledADMM", "entries": {"rigid": {"solver": "SolverFeatherstone"},
                                                                 "soft": {"solver": "SolverXPBD",
                                                                          "options": {"iterations": 4}}},
                     "grid": {"coupler.iterations": [1, 2], "scene.fail": [False, True]}},
            "xpbd": {"solver": "SolverXPBD", "grid": {"scene.theta2": [0.1, 0.2]}},
        },
        **top,
    }


def make(**top) -> Study:
    return Study.from_dict(small_study(**top), base_dir=HERE)


def by_run(rows):
    out = {}
    for r in rows:
        out.setdefault(r["run_id"], {"row": r, "values": {}})["values"][r["measure"]] = r["value"]
    return out


@pytest.fixture(scope="module")
def local_out(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("sweep") / "local")
    report = run(make(), out, workers=2)
    return out, report


def test_local_backend_table_and_outputs(local_out):
    out, report = local_out
    # 4 admm + 2 xpbd runs, references for theta2 in {default, 0.1, 0.2} x fail
    assert report.total == report.finished and report.skipped == 0
    assert os.path.basename(report.table) in ("results.parquet", "results.csv")
    assert json.load(open(os.path.join(out, "study.json")))["study"]["name"] == "small"
    runs = by_run(read_table(out))
    assert len(runs) == report.total
    ok = [r for r in runs.values() if r["row"]["status"] == "ok" and not r["row"]["reference"]]
    assert len(ok) == 4  # 2 admm (fail = False) + 2 xpbd
    for r in ok:
        v = r["values"]
        assert 0.0 <= v["error_max"] < 5e-3 and v["status"] == 1.0
        assert v["steps_per_second"] > 0 and np.isfinite(v["energy_change"])
        assert v["trajectory_frames"] == 7  # 0.05 s / (5 x 1/600 s) = 6 frames + the initial state
    admm = {r["row"]["coupler.iterations"]: r["values"] for r in ok if r["row"]["config"] == "admm"}
    assert admm[2]["joint_gap_max"] < admm[1]["joint_gap_max"]  # more iterations close the gap
    assert admm[1]["primal_residual_last"] > 0
    # the two xpbd runs differ only in the initial angle: packed into one two-world model
    assert sorted(r["row"]["batch"] for r in ok if r["row"]["config"] == "xpbd") == [2, 2]
    rid = next(k for k, r in runs.items() if r["row"]["config"] == "admm" and r["row"]["status"] == "ok")
    with np.load(os.path.join(out, "runs", f"{rid}.npz")) as z:
        assert z["points"].shape == (7, 1, 3) and z["primal_residual"].shape[0] == 30


def test_failed_run_is_recorded(local_out):
    out, report = local_out
    runs = by_run(read_table(out))
    failed = [r for r in runs.values() if r["row"]["status"] == "error"]
    # the two admm runs with fail = True and their reference
    assert len(failed) == 3 and len(report.failed) == 3
    for r in failed:
        assert "deliberate failure of the test scene" in r["row"]["error"]
        assert r["values"]["status"] == 0.0
    assert any(np.isnan(r["values"].get("error_max", np.nan)) for r in failed)


def test_ray_backend_gives_the_same_table(local_out, tmp_path):
    ray = optional("ray")
    out, _ = local_out
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        report = run(make(), str(tmp_path / "ray"), backend="ray")
    finally:
        ray.shutdown()
    assert report.backend == "ray" and report.finished == report.total
    assert compare_tables(out, str(tmp_path / "ray")) == []


def test_restart_resumes(local_out, tmp_path):
    out, report = local_out
    copy = str(tmp_path / "copy")
    shutil.copytree(out, copy)
    again = run(make(), copy, workers=1)
    assert again.skipped == report.total and again.finished == 0
    # lose two finished runs (a killed study): only those run again (unbatched ones: a batch cut
    # differently may differ in the last bits)
    journal = os.path.join(copy, "runs.jsonl")
    lines = open(journal).read().splitlines()
    drop = [i for i, x in enumerate(lines) if json.loads(x)["config"] == "admm"
            and json.loads(x)["status"] == "ok"][:2]  # fmt: skip
    lost = {json.loads(lines[i])["run_id"] for i in drop}
    open(journal, "w").write("\n".join(x for i, x in enumerate(lines) if i not in drop) + "\n")
    os.remove(again.table)
    resumed = run(make(), copy, workers=1)
    assert resumed.finished == 2 and resumed.skipped == report.total - 2
    assert set(read_journal(copy)) == set(read_journal(out)) and lost <= set(read_journal(copy))
    assert compare_tables(out, copy) == []
    # failed runs stay recorded; --retry-failed runs them again
    retried = run(make(), copy, workers=1, retry_failed=True)
    assert retried.finished == 3 and len(retried.failed) == 3


@pytest.mark.parametrize("change,match", [
    (lambda d: d.update(bogus=1), "study: unknown key 'bogus'; allowed: name, duration"),
    (lambda d: d.update(measures=["status", "speeed"]), "measures: unknown measure 'speeed'; allowed: status, "),
    (lambda d: d["configs"]["xpbd"].update(solver="SolverXPDB"), "configs.xpbd.solver = 'SolverXPDB': unknown "
                                                                 "solver; allowed: .*SolverXPBD"),
    (lambda d: d["configs"]["admm"]["grid"].update({"coupler.iteration": [1]}),
     "configs.admm.grid: unknown parameter 'coupler.iteration' .*allowed: .*coupler.iterations"),
    (lambda d: d["configs"]["xpbd"]["grid"].update({"scene.theta3": [1]}),
     "unknown parameter 'scene.theta3' .*allowed: dt, seed, scene.theta2, scene.fail"),
    (lambda d: d["configs"]["xpbd"].update(options={"iteration": 2}), "configs.xpbd.options: unknown argument "
                                                                      "'iteration' of SolverXPBD; allowed: iterations"),
    (lambda d: d["configs"]["admm"]["entries"].update(cloth={"solver": "SolverVBD"}),
     "configs.admm.entries.cloth: the scene 'pendulum' defines no entry 'cloth'; allowed: rigid, soft"),
    (lambda d: d["scenes"]["pendulum"].update(source="no_such_scene"), "unknown built-in scene .*allowed: .*"
                                                                       "falling_shapes"),
    (lambda d: d["scenes"]["pendulum"].update(reference={"solver": "SolverFeatherstone", "iterations": 2}),
     "scenes.pendulum.reference: unknown key 'iterations'; allowed: solver, options, config, params, dt"),
    (lambda d: d["configs"]["xpbd"]["grid"].update(dt=[0.004]), "configs.xpbd.grid.dt = 0.004: the frame interval"),
])
def test_bad_keys_are_one_line_errors(change, match):
    data = small_study()
    change(data)
    with pytest.raises(StudyError, match=match) as info:
        Study.from_dict(data, base_dir=HERE)
    assert "\n" not in str(info.value)


def test_cli_quick_and_bad_study(tmp_path, capsys):
    from armillary.cli import main

    study = tmp_path / "study.toml"
    text = open(os.path.join(HERE, "study_small.toml")).read().replace("_scenes.py", os.path.join(HERE, "_scenes.py"))
    study.write_text(text)
    assert main(["sweep", str(study), "--out", str(tmp_path / "q"), "--quick", "--workers", "1"]) == 0
    report = capsys.readouterr().out
    assert "runs:       3 (0 already done, 3 run now, 0 failed)" in report  # 2 quick points + 1 reference
    rows = read_table(str(tmp_path / "q"))
    assert {r["coupler.iterations"] for r in rows if r["config"] == "admm"} == {1, 16}
    assert max(r["value"] for r in rows if r["measure"] == "trajectory_frames") == 4  # 0.02 s: 3 frames + the initial state
    study.write_text(text.replace('"coupler.iterations"', '"coupler.iteratoins"'))
    assert main(["sweep", str(study), "--out", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("armillary: error: configs.admm.grid: unknown parameter 'coupler.iteratoins'")
    assert len(err.splitlines()) == 1 and not os.path.exists(tmp_path / "bad")


def test_load_study_reads_toml(tmp_path):
    study = load_study(os.path.join(HERE, "study_small.toml"))
    refs, runs = study.points()
    assert len(runs) == 5 and len(refs) == 1
    assert len({r.run_id for r in runs}) == 5
    assert load_study(os.path.join(HERE, "study_small.toml")).points()[1][0].run_id == runs[0].run_id  # stable ids


def test_plot_study_writes_figures(local_out, tmp_path):
    optional("matplotlib")
    from armillary.sweep.plot import plot_study

    out, _ = local_out
    paths = plot_study(out, str(tmp_path / "fig"))
    assert sorted(os.path.basename(p) for p in paths) == ["error_vs_iterations.png", "residuals_per_step.png",
                                                          "speed_vs_accuracy.png"]
    for p in paths:
        assert open(p, "rb").read(8) == b"\x89PNG\r\n\x1a\n" and os.path.getsize(p) > 5000


def test_adding_grid_values_keeps_run_ids():
    before = {r.run_id for r in make().points()[1]}
    data = small_study()
    data["configs"]["admm"]["grid"]["coupler.iterations"] = [1, 2, 4]
    after = {r.run_id for r in Study.from_dict(data, base_dir=HERE).points()[1]}
    assert before < after and len(after - before) == 2
    data["configs"]["admm"]["entries"]["soft"]["options"]["iterations"] = 8  # another solver: new ids
    assert not {r.run_id for r in Study.from_dict(data, base_dir=HERE).points()[1]
                if r.config == "admm"} & before


def test_csv_table_without_pyarrow(local_out, tmp_path, monkeypatch):
    from armillary.sweep import engine

    out, _ = local_out
    records = list(read_journal(out).values())
    monkeypatch.setattr(engine, "_have_pyarrow", lambda: False)
    path = engine.write_table(records, str(tmp_path))
    assert path.endswith("results.csv")
    rows = read_table(str(tmp_path))
    assert len(rows) == len(read_table(out))
    assert compare_tables(out, str(tmp_path)) == []

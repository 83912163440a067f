"""``benchmarks/run_all.py --quick`` runs every benchmark script and writes the figures page.

Benchmarks stay out of the test suite: this only checks that the quick run works end to end (every
script starts, reports figures through ``benchmarks/_protocol.py``, and the page has a table row for
each), without the reference engine. About a minute and a half on a 2-core CPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUN_ALL = ROOT / "benchmarks" / "run_all.py"


def _env() -> dict:
    env = dict(os.environ)
    for key in ("ARMILLARY_DISABLE_PLUGIN_AUTOLOAD", "ARMILLARY_PLUGINS", "ARMILLARY_BENCH_JSON", "NEWTON_PYTHON"):
        env.pop(key, None)
    return env


def _names() -> list[str]:
    out = subprocess.run([sys.executable, str(RUN_ALL), "--list"], capture_output=True, text=True, check=True)
    return [line.split()[0] for line in out.stdout.splitlines() if line.strip()]


@pytest.mark.slow
def test_run_all_quick_writes_a_row_per_benchmark(tmp_path):
    page, rows_path = tmp_path / "bench.md", tmp_path / "rows.json"
    names = _names()
    assert "scaling" in names and "xpbd" in names, names
    result = subprocess.run([sys.executable, str(RUN_ALL), "--quick", "--no-reference", "--out", str(page),
                             "--json", str(rows_path), "--logs", str(tmp_path / "logs")],
                            capture_output=True, text=True, env=_env(), timeout=900)  # fmt: skip
    assert result.returncode == 0, f"run_all --quick failed:\n{result.stdout}\n{result.stderr[-4000:]}"
    text = page.read_text()
    assert "## Failed" not in text
    for key in ("| CPU |", "| python |", "| warp |", "| numpy |", "| mujoco |", "| armillary |", "| date |"):
        assert key in text, f"{key} missing from the page header"
    rows = json.loads(rows_path.read_text())
    for name in names:
        ours = [r for r in rows if r["benchmark"] == name.split("/")[-1] and r["engine"] == "armillary"]
        assert ours, f"benchmark {name!r} reported no armillary figure"
        assert f"## {name}\n" in text, f"no section for {name!r}"
        section = text.split(f"## {name}\n", 1)[1].split("\n## ", 1)[0]
        table_rows = [ln for ln in section.splitlines() if ln.startswith("| ") and not ln.startswith("| scene")]
        assert table_rows, f"no table row for {name!r}"
    for r in rows:
        assert r["value"] > 0 or not r["metric"].endswith("/s"), r  # a rate; a ratio or fit may be <= 0
        assert set(r) >= {"benchmark", "scene", "engine", "metric", "value", "cpu", "ratio_vs", "n"}, r
    assert all(r["engine"] != "newton" for r in rows)  # --no-reference


def test_run_all_names_an_unknown_benchmark(tmp_path):
    result = subprocess.run([sys.executable, str(RUN_ALL), "--quick", "--only", "no_such_bench", "--out",
                             str(tmp_path / "b.md")], capture_output=True, text=True, env=_env())  # fmt: skip
    assert result.returncode != 0
    assert "--only no_such_bench: no such benchmark" in result.stderr
    assert "xpbd" in result.stderr  # lists what is available


# ---------------------------------------------------------------------- run_all itself, on stand-in scripts
def _load_run_all():
    import importlib.util

    spec = importlib.util.spec_from_file_location("armillary_bench_run_all", RUN_ALL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GOOD = """
import json, os, sys
quick = "--quick" in sys.argv
count = os.path.join(os.path.dirname(os.environ["ARMILLARY_BENCH_JSON"]), "good.count")
k = len(open(count).read()) if os.path.exists(count) else 0
open(count, "a").write("x")
def row(scene, engine, metric, value, cpu=True):
    return dict(benchmark="good", scene=scene, engine=engine, metric=metric, value=value, cpu=cpu,
                ratio_vs="newton" if engine == "armillary" else None, n=1)
rows = [row("pile", "armillary", "steps/s", [200, 100, 300][k % 3]), row("pile", "newton", "steps/s", 100.0),
        row("import", "armillary", "s", 1.0, cpu=False), row("import", "newton", "s", 2.0, cpu=False),
        row("quick" if quick else "full", "armillary", "calls/s", 5.0)]
json.dump(rows, open(os.environ["ARMILLARY_BENCH_JSON"], "w"))
"""


@pytest.fixture
def stand_ins(tmp_path, monkeypatch):
    """run_all with stand-in benchmarks: ``good`` (rows), ``bad`` (exits 3), ``silent`` (no rows) and
    ``malformed`` (a row without its metric)."""
    run_all = _load_run_all()
    malformed = ("import json, os\n"
                 "json.dump([{'scene': 'x', 'value': 1.0}], open(os.environ['ARMILLARY_BENCH_JSON'], 'w'))")
    scripts = {"good": GOOD, "bad": "raise SystemExit(3)", "silent": "print('nothing measured')",
               "malformed": malformed}
    found = {}
    for name, code in scripts.items():
        path = tmp_path / f"bench_{name}.py"
        path.write_text(code)
        found[name] = path
    monkeypatch.setattr(run_all, "discover", lambda: found)
    monkeypatch.setattr(run_all, "ROOT", tmp_path)
    return run_all


def test_run_all_medians_and_ratios(stand_ins, tmp_path):
    page, rows = tmp_path / "page.md", tmp_path / "rows.json"
    assert stand_ins.main(["--only", "good", "--repeats", "3", "--no-reference", "--out", str(page),
                           "--json", str(rows), "--logs", str(tmp_path / "logs")]) == 0  # fmt: skip
    text = page.read_text()
    # armillary's three runs gave 200, 100, 300 steps/s: the median 200, twice newton's 100
    assert "| pile | steps/s | 200 (100-300) | 100 (100-100) | 2.00 |" in text, text
    # a cost: armillary 1 s, newton 2 s -> armillary 2x faster; wall time is said
    assert "| import | s | 1.00 (1.00-1.00) | 2.00 (2.00-2.00) | 2.00 | wall time |" in text, text
    assert "| full | calls/s |" in text and "| quick |" not in text
    merged = {(r["scene"], r["engine"]): r for r in json.loads(rows.read_text())}
    assert merged[("pile", "armillary")]["value"] == 200.0 and merged[("pile", "armillary")]["n"] == 3


def test_run_all_quick_passes_quick(stand_ins, tmp_path):
    page = tmp_path / "page.md"
    assert stand_ins.main(["--quick", "--only", "good", "--no-reference", "--out", str(page)]) == 0
    assert "| quick | calls/s |" in page.read_text()


def test_run_all_fails_naming_the_failed_scripts(stand_ins, tmp_path, capsys):
    page = tmp_path / "page.md"
    assert stand_ins.main(["--no-reference", "--out", str(page)]) == 1
    err = capsys.readouterr().err
    assert "3 benchmark script(s) failed: bad (exit status 3), silent (exit status 0 but no figures reported)" in err
    assert "malformed (row 0 of " in err and "lacks benchmark, engine, metric, cpu, ratio_vs, n" in err
    assert "nothing measured" in err  # the end of the failing script's output
    text = page.read_text()
    assert "## Failed" in text and "- `bad`: exit status 3" in text
    assert "## good" in text  # what ran is still on the page

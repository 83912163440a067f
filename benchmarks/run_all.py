"""Run every benchmark of the repository and write one page of figures (``docs/benchmarks.md``).

Runs ``benchmarks/bench_*.py`` and each plugin's ``plugins/*/benchmarks/*.py`` (names not starting with
``_``), each in its own process of this interpreter, with ``--quick`` under ``--quick`` and with its
default arguments otherwise. Every script reports through ``benchmarks/_protocol.py``: rows written to
``$ARMILLARY_BENCH_JSON`` (a plugin's script must take ``--quick`` and write those rows too).

The reference engine (newton) is timed side by side, in the same processes, when an interpreter that
has it is known (``--reference-python``, else ``$NEWTON_PYTHON``, else this interpreter when it can
``import newton``): its site-packages are appended to the scripts' ``sys.path``, after ours. Raw
MuJoCo is timed by the scripts that have a MuJoCo baseline when ``mujoco`` is installed.

With ``--repeats R`` every script runs R times, round after round (so ours and the reference alternate
over the whole run: ours, reference, ours, reference, ...), and each figure is the median of the R
runs. Timings are CPU seconds of the benchmark process (``--cpu-time`` of every script) unless
``--wall``; figures a script can only take as wall time (subprocesses) say so.

Exit status: 0 when every script ran and reported figures, 1 otherwise (the failing scripts are named,
with the end of their output). Never run as a test (``tests/test_benchmarks_run_all.py`` only checks
that ``--quick`` runs).

Run: ``python benchmarks/run_all.py [--quick] [--out docs/benchmarks.md] [--only NAME ...] [--skip NAME ...]
[--repeats R] [--reference-python PATH | --no-reference] [--wall] [--json PATH] [--note TEXT] [--list]``.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_OUT = ROOT / "docs" / "benchmarks.md"
ENGINE_ORDER = ("armillary", "newton", "mujoco")
BASELINES = ("newton", "mujoco")  # engines armillary is compared with (others, e.g. "warp", are for scale)
FIELDS = ("benchmark", "scene", "engine", "metric", "value", "cpu", "ratio_vs", "n")  # every row's (_protocol.FIELDS)
KNOWN = {*FIELDS, "stat"}


# ---------------------------------------------------------------------- discovery
def discover() -> dict[str, Path]:
    """Benchmark name -> script: ``bench_x.py`` is ``x``; a plugin's ``y.py`` is ``<plugin>/y``."""
    found = {p.stem[len("bench_"):]: p for p in sorted(HERE.glob("bench_*.py"))}
    for p in sorted(ROOT.glob("plugins/*/benchmarks/*.py")):
        if not p.name.startswith("_"):
            stem = p.stem[len("bench_"):] if p.stem.startswith("bench_") else p.stem
            found[f"{p.parent.parent.name}/{stem}"] = p
    return found


def select(found: dict[str, Path], only: list[str] | None, skip: list[str] | None) -> dict[str, Path]:
    for option, names in (("--only", only), ("--skip", skip)):
        unknown = [n for n in names or [] if n not in found]
        if unknown:
            raise SystemExit(f"run_all: {option} {' '.join(unknown)}: no such benchmark; "
                             f"available: {', '.join(found)}")  # fmt: skip
    return {n: p for n, p in found.items() if (not only or n in only) and n not in (skip or [])}


def find_reference(explicit: str | None, disabled: bool) -> str | None:
    """An interpreter that can ``import newton``, or ``None``."""
    if disabled:
        return None
    python = explicit or os.environ.get("NEWTON_PYTHON")
    if python:
        ok = os.path.exists(python) and subprocess.run([python, "-c", "import newton"],
                                                       capture_output=True).returncode == 0  # fmt: skip
        if not ok:
            raise SystemExit(f"run_all: reference interpreter {python!r} cannot `import newton` "
                             "(pass --reference-python PATH of an interpreter that has newton, or --no-reference)")
        return python
    return sys.executable if importlib.util.find_spec("newton") is not None else None


# ---------------------------------------------------------------------- running
def run_script(name: str, script: Path, quick: bool, env: dict, timeout: float, log_dir: Path, round_: int) -> dict:
    """One process of one script: its rows, exit status, seconds and log file."""
    rows_path = log_dir / f"{name.replace('/', '__')}.{round_}.json"
    log_path = log_dir / f"{name.replace('/', '__')}.{round_}.log"
    cmd = [sys.executable, str(script)] + (["--quick"] if quick else [])
    start = time.perf_counter()
    with open(log_path, "w") as log, tempfile.TemporaryDirectory(prefix="armillary_bench_") as cwd:
        try:
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=cwd, timeout=timeout,
                                env={**env, "ARMILLARY_BENCH_JSON": str(rows_path)}).returncode  # fmt: skip
        except subprocess.TimeoutExpired:
            rc = "timeout"
    seconds = time.perf_counter() - start
    rows, problem = read_rows(rows_path)
    return {"name": name, "rc": rc, "seconds": seconds, "rows": rows, "problem": problem, "log": log_path, "cmd": cmd}


def read_rows(path: Path) -> tuple[list[dict], str | None]:
    """The rows a script wrote (``[]`` when none) and what is wrong with them, if anything."""
    if not path.is_file():
        return [], None
    try:
        rows = json.loads(path.read_text())
    except ValueError as e:
        return [], f"its rows file {path} is not JSON ({e})"
    if not isinstance(rows, list):
        return [], f"its rows file {path} holds a {type(rows).__name__}, not a list of rows"
    for i, row in enumerate(rows):
        missing = [k for k in FIELDS if not isinstance(row, dict) or k not in row]
        if missing:
            return [], f"row {i} of {path} lacks {', '.join(missing)} (a row needs {', '.join(FIELDS)})"
        if not isinstance(row["value"], (int, float)):
            return [], f"row {i} of {path}: value {row['value']!r} is not a number"
    return rows, None


def merge(runs: list[list[dict]]) -> list[dict]:
    """Rows of several runs of one script -> one row per (scene, engine, metric): the median value."""
    merged: dict[tuple, dict] = {}
    for rows in runs:
        for row in rows:
            key = (row["scene"], row["engine"], row["metric"])
            if key not in merged:
                merged[key] = {**row, "values": []}
            m = merged[key]
            m["values"].append(float(row["value"]))
            m["cpu"] = bool(m["cpu"]) and bool(row.get("cpu"))
    for m in merged.values():
        m["value"] = float(statistics.median(m["values"]))
        m["n"] = len(m["values"])
    return list(merged.values())


# ---------------------------------------------------------------------- the page
def higher_is_better(metric: str) -> bool:
    """Rates (``steps/s``, ``calls/s``, ...) and ``R^2``; costs (``s``, ``ms/step``, ...) are lower-better."""
    return metric.endswith("/s") or metric == "R^2"


def fmt(v: float) -> str:
    a = abs(v)
    if a >= 100:
        return f"{v:,.0f}"
    if a >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def cell(row: dict | None) -> str:
    if row is None:
        return "-"
    text = fmt(row["value"])
    if len(row["values"]) > 1:
        text += f" ({fmt(min(row['values']))}-{fmt(max(row['values']))})"
    return text


def notes(rows: list[dict]) -> str:
    parts = []
    if any(not r["cpu"] for r in rows):
        parts.append("wall time")
    if any(r.get("stat") == "best" for r in rows):
        parts.append("best of the script's timings")
    extras = {r["engine"]: {k: v for k, v in r.items() if k not in KNOWN and k != "values"} for r in rows}
    shown = [(e, x) for e, x in extras.items() if x]
    if len(shown) == len(rows) and all(x == shown[0][1] for _, x in shown):
        shown = [("", shown[0][1])]  # the same details for every engine: once
    for engine, extra in shown:
        parts.append((f"{engine}: " if engine else "") + ", ".join(f"{k}={v}" for k, v in extra.items()))
    return "; ".join(parts)


def engines_of(rows: list[dict]) -> list[str]:
    seen = {r["engine"] for r in rows}
    return [e for e in ENGINE_ORDER if e in seen] + sorted(seen - set(ENGINE_ORDER))


def table(rows: list[dict]) -> list[str]:
    """One markdown table: a line per (scene, metric), a column per engine, armillary's ratio to each other."""
    engines = engines_of(rows)
    others = [e for e in engines if e.startswith(BASELINES) and any(r["engine"] == "armillary" for r in rows)]
    head = ["scene", "metric"] + engines + [f"armillary / {e}" for e in others] + ["notes"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    keys = list(dict.fromkeys((r["scene"], r["metric"]) for r in rows))
    for scene, metric in keys:
        group = {r["engine"]: r for r in rows if r["scene"] == scene and r["metric"] == metric}
        ratios = []
        ours = group.get("armillary")
        for e in others:
            theirs = group.get(e)
            if ours is None or theirs is None or ours["value"] == 0 or theirs["value"] == 0:
                ratios.append("-")
            elif higher_is_better(metric):
                ratios.append(f"{ours['value'] / theirs['value']:.2f}")
            else:
                ratios.append(f"{theirs['value'] / ours['value']:.2f}")
        line = [scene, metric] + [cell(group.get(e)) for e in engines] + ratios + [notes(list(group.values()))]
        lines.append("| " + " | ".join(s.replace("|", "/") for s in line) + " |")
    return lines


def scaling_table(rows: list[dict]) -> list[str]:
    """bench_scaling's rows as cost per step against worlds and bodies, memory per world, and the fits."""
    lines = ["| scene | worlds | bodies | ms/step | us/world-step | KiB/world |", "|---|---|---|---|---|---|"]
    fits = []
    for r in rows:
        if "worlds" in r:
            lines.append(f"| {r['scene'].rsplit(':', 1)[0]} | {r['worlds']} | {r['bodies']} | {cell(r)} | "
                         f"{fmt(r['value'] * 1e3 / r['worlds'])} | {fmt(r['bytes_per_world'] / 1024)} |")
        elif r["metric"] == "R^2":
            fit = (f"- {r['scene']}: cost per step = {fmt(r['fixed_ms'])} ms + {fmt(r['us_per_world'])} us x "
                   f"worlds, R^2 = {r['value']:.4f}")
            if "exponent" in r:
                w0, w1 = r["exponent_between"]
                fit += f"; from {w0} to {w1} worlds the cost grows as worlds^{r['exponent']:.2f} (1 = linear)"
            fits.append(fit)
    return lines + ([""] + fits if fits else [])


def versions(reference: str | None) -> list[tuple[str, str]]:
    def dist(name: str) -> str:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    out = [("python", platform.python_version()), ("warp", dist("warp-lang")), ("numpy", dist("numpy")),
           ("mujoco", dist("mujoco")), ("armillary", dist("armillary"))]  # fmt: skip
    plugins = sorted({d.metadata["Name"] for d in importlib.metadata.distributions()
                      if (d.metadata["Name"] or "").startswith("armillary-")})  # fmt: skip
    out.append(("armillary plugins", ", ".join(f"{p} {dist(p)}" for p in plugins) or "none"))
    if reference is None:
        out.append(("newton (reference)", "not found: not compared"))
    else:
        code = "import importlib.metadata as m; print(m.version('newton'))"
        v = subprocess.run([reference, "-c", code], capture_output=True, text=True).stdout.strip() or "?"
        out.append(("newton (reference)", f"{v} (from {reference})"))
    return out


def machine() -> list[tuple[str, str]]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        cpu = platform.processor() or "unknown"
    mem = ""
    try:
        total = next(ln for ln in Path("/proc/meminfo").read_text().splitlines() if ln.startswith("MemTotal"))
        kb = int(total.split()[1])
        mem = f", {kb / 2**20:.0f} GiB memory"
    except (OSError, StopIteration, ValueError):
        pass
    return [("CPU", f"{cpu}, {os.cpu_count()} logical cores{mem}"), ("system", platform.platform())]


def commit() -> str:
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.strip()  # fmt: skip
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()  # fmt: skip
        return sha + (" with uncommitted changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def render(results: dict[str, list[dict]], failures: list[dict], meta: dict) -> str:
    out = ["# Benchmarks", "",
           f"Generated by `{meta['command']}` on {meta['date']} ({meta['elapsed']:.0f} s); do not edit by hand.", ""]
    if meta.get("note"):
        out += [meta["note"], ""]
    clock = "wall-clock seconds" if meta["wall"] else "CPU seconds of the benchmark process"
    out += [f"Timings are {clock} (rows marked \"wall time\" time subprocesses or cold starts); each figure is "
            f"the median of {meta['repeats']} run{'s' if meta['repeats'] > 1 else ''} of the script"
            + (" (min-max in parentheses)" if meta["repeats"] > 1 else "")
            + ", runs alternating between the engines. `armillary / X` is how many times faster armillary is "
            "than X (rates divided, or costs inverted): above 1 armillary is faster. `mujoco` is raw MuJoCo C "
            "through its Python bindings." + (" `--quick` run: smoke-test sizes, not representative figures."
                                              if meta["quick"] else ""), ""]  # fmt: skip
    out += ["| | |", "|---|---|"] + [f"| {k} | {v} |" for k, v in meta["facts"]] + [""]
    if failures:
        out += ["## Failed", ""]
        for f in failures:
            out.append(f"- `{f['name']}`: {f['why']}")
        out.append("")
    for name, rows in results.items():
        if not rows:
            continue
        out += [f"## {name}", "", f"`{meta['scripts'][name]}`", ""]
        out += scaling_table(rows) if name == "scaling" else table(rows)
        out.append("")
    return "\n".join(out)


def tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="every script with --quick (smoke sizes; minutes)")
    ap.add_argument("--out", default=None, help="the page to write (default: docs/benchmarks.md; "
                    "under --quick a file in the temporary folder)")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="run only these benchmarks (names as in --list)")
    ap.add_argument("--skip", nargs="+", metavar="NAME", help="do not run these benchmarks")
    ap.add_argument("--repeats", type=int, default=1, help="runs of every script, round after round (medians)")
    ap.add_argument("--reference-python", default=None, help="an interpreter that has newton (default: "
                    "$NEWTON_PYTHON, else this one when it can import newton)")
    ap.add_argument("--no-reference", action="store_true", help="do not time the reference engine")
    ap.add_argument("--wall", action="store_true", help="wall-clock timings instead of process CPU time")
    ap.add_argument("--timeout", type=float, default=None, help="seconds per script run (default 300 quick, 3600)")
    ap.add_argument("--json", default=None, metavar="PATH", help="also write every merged row to PATH")
    ap.add_argument("--logs", default=None, metavar="DIR", help="keep each script's output in DIR")
    ap.add_argument("--note", default=None, help="a paragraph for the page's header (e.g. the machine's load)")
    ap.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error(f"--repeats {args.repeats}: must be >= 1")
    found = discover()
    if args.list:
        for name, path in found.items():
            print(f"{name:24s} {path.relative_to(ROOT)}")
        return 0
    scripts = select(found, args.only, args.skip)
    reference = find_reference(args.reference_python, args.no_reference)
    out_path = Path(args.out) if args.out else (
        Path(tempfile.gettempdir()) / "armillary-benchmarks-quick.md" if args.quick else DEFAULT_OUT)
    timeout = args.timeout or (300.0 if args.quick else 3600.0)
    env = dict(os.environ)
    env.pop("ARMILLARY_BENCH_NO_REFERENCE", None)
    env.pop("NEWTON_PYTHON", None)
    if reference is None:
        env["ARMILLARY_BENCH_NO_REFERENCE"] = "1"
    elif reference != sys.executable:
        env["NEWTON_PYTHON"] = reference
    env["ARMILLARY_BENCH_CPU_TIME"] = "0" if args.wall else "1"
    print(f"run_all: {len(scripts)} benchmark(s), {args.repeats} round(s){', quick' if args.quick else ''}; "
          f"reference engine: {reference or 'none'}", flush=True)  # fmt: skip

    load_before = os.getloadavg() if hasattr(os, "getloadavg") else None
    started = time.perf_counter()
    runs: dict[str, list[list[dict]]] = {name: [] for name in scripts}
    failures: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="armillary_run_all_") as tmp:
        log_dir = Path(args.logs) if args.logs else Path(tmp)
        log_dir.mkdir(parents=True, exist_ok=True)
        for round_ in range(args.repeats):
            for i, (name, script) in enumerate(scripts.items()):
                if name in failures:
                    continue
                print(f"[{round_ + 1}/{args.repeats}] [{i + 1}/{len(scripts)}] {name} ...", end=" ", flush=True)
                r = run_script(name, script, args.quick, env, timeout, log_dir, round_)
                runs[name].append(r["rows"])
                if r["rc"] != 0 or not r["rows"]:
                    why = (f"timed out after {timeout:.0f} s" if r["rc"] == "timeout" else
                           f"exit status {r['rc']}" if r["rc"] != 0 else
                           r["problem"] or "exit status 0 but no figures reported")  # fmt: skip
                    failures[name] = {"name": name, "why": why, "tail": tail(r["log"]), "cmd": r["cmd"]}
                    print(f"FAILED ({why}, {r['seconds']:.1f} s)", flush=True)
                else:
                    print(f"{r['seconds']:.1f} s, {len(r['rows'])} figures", flush=True)
    elapsed = time.perf_counter() - started
    load_after = os.getloadavg() if hasattr(os, "getloadavg") else None

    results = {name: merge(r) for name, r in runs.items()}
    facts = [("date", datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")),
             ("commit", commit())] + machine()  # fmt: skip
    if load_before and load_after:
        facts.append(("load average (1 min)", f"{load_before[0]:.2f} at the start, {load_after[0]:.2f} at the end"))
    facts += versions(reference)
    command = "python benchmarks/run_all.py" + (" --quick" if args.quick else "") + (
        f" --repeats {args.repeats}" if args.repeats > 1 else "") + (" --wall" if args.wall else "") + (
        f" --only {' '.join(args.only)}" if args.only else "") + (f" --skip {' '.join(args.skip)}" if args.skip else "")
    meta = {"command": command, "date": facts[0][1], "elapsed": elapsed, "note": args.note, "wall": args.wall,
            "repeats": args.repeats, "quick": args.quick, "facts": facts,
            "scripts": {n: p.relative_to(ROOT).as_posix() for n, p in scripts.items()}}  # fmt: skip
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(render(results, list(failures.values()), meta))
    if args.json:
        Path(args.json).write_text(json.dumps([r for rows in results.values() for r in rows], indent=1))
    print(f"run_all: wrote {out_path} ({elapsed:.0f} s)")
    if failures:
        for f in failures.values():
            print(f"\n--- {f['name']} ({' '.join(f['cmd'])}): {f['why']}; last lines:\n{f['tail']}", file=sys.stderr)
        names = ", ".join(f"{f['name']} ({f['why']})" for f in failures.values())
        print(f"run_all: {len(failures)} benchmark script(s) failed: {names}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

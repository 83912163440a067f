"""Running a study: planning (references, batching), backends (local processes, Ray), outputs.

Outputs in the study's folder (``--out``):

* ``study.json``: the study as read (plus the folder relative paths were resolved against);
* ``runs.jsonl``: one line per finished run, appended as results arrive (the resume journal);
* ``results.parquet`` (pyarrow installed) or ``results.csv``: the tidy table, one row per run and
  per measure value (rewritten as results arrive, at most every few seconds, and at the end,
  sorted by run id and measure);
* ``runs/<run_id>.npz``: the run's arrays (``time``, ``points``, ``energy``, ``joint_gap``,
  ``primal_residual``, ``dual_residual``, ``body_labels``, as measured).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import sys
import time

import numpy as np

from .execute import STATUS_ERROR, error_values, run_task, supports_worlds
from .study import Point, Study, StudyError, load_study

BACKENDS = ("local", "ray")
TABLE_PARQUET, TABLE_CSV, JOURNAL = "results.parquet", "results.csv", "runs.jsonl"
BASE_COLUMNS = ("run_id", "config", "scene", "reference", "batch", "status", "error", "measure", "value")
REWRITE_EVERY_S = 5.0


@dataclasses.dataclass
class SweepReport:
    """What :func:`run` did: run counts, the table path, the wall time [s], local workers (0 on Ray)."""

    out: str
    table: str
    total: int
    skipped: int
    finished: int
    failed: list
    wall_seconds: float
    backend: str
    workers: int

    def lines(self) -> list[str]:
        rows = [f"study:      {self.out}",
                f"runs:       {self.total} ({self.skipped} already done, {self.finished} run now, "
                f"{len(self.failed)} failed)",
                f"backend:    {self.backend}" + (f" ({self.workers} workers)" if self.backend == "local" else ""),
                f"wall time:  {self.wall_seconds:.1f} s",
                f"table:      {self.table}"]
        rows += [f"failed:     {rid} ({cfg}): {err}" for rid, cfg, err in self.failed[:10]]
        if len(self.failed) > 10:
            rows.append(f"failed:     ... and {len(self.failed) - 10} more (status column of the table)")
        return rows


def _have_pyarrow() -> bool:
    try:
        import pyarrow  # noqa: F401
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        return False
    return True


# ---------------------------------------------------------------------- table
def table_path(out: str | os.PathLike) -> str:
    """The study's table: ``results.parquet`` when it exists (or pyarrow is installed), else ``results.csv``."""
    out = str(out)
    pq, cs = os.path.join(out, TABLE_PARQUET), os.path.join(out, TABLE_CSV)
    if os.path.exists(pq):
        return pq
    if os.path.exists(cs):
        return cs
    return pq if _have_pyarrow() else cs


def _rows(record: dict) -> list[dict]:
    base = {"run_id": record["run_id"], "config": record["config"], "scene": record["scene"],
            "reference": bool(record["is_reference"]), "batch": int(record["batch"]), "status": record["status"],
            "error": record["error"]}
    params = {f"param:{k}" if k in BASE_COLUMNS else k: v for k, v in record["params"].items()}
    values = record["values"] or {"status": 0.0}
    return [{**base, **params, "measure": m, "value": float(v)} for m, v in values.items()]


def _column_type(values):
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        return "bool"
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return "int"
    if present and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        return "float"
    return "str"


def write_table(records: list[dict], out: str) -> str:
    """Write the tidy table of ``records`` (sorted by run id, measure); returns its path."""
    rows = [r for rec in sorted(records, key=lambda r: r["run_id"]) for r in _rows(rec)]
    rows.sort(key=lambda r: (r["run_id"], r["measure"]))
    params = sorted({k for r in rows for k in r} - set(BASE_COLUMNS))
    columns = list(BASE_COLUMNS[:5]) + params + list(BASE_COLUMNS[5:])
    path = table_path(out)
    tmp = path + ".tmp"
    if path.endswith(".parquet"):
        import pyarrow as pa
        import pyarrow.parquet as pq

        types = {"bool": pa.bool_(), "int": pa.int64(), "float": pa.float64(), "str": pa.string()}
        arrays, fields = [], []
        for c in columns:
            vals = [r.get(c) for r in rows]
            kind = {"reference": "bool", "batch": "int", "value": "float"}.get(c) or _column_type(vals)
            if kind == "str":
                vals = [None if v is None else str(v) for v in vals]
            elif kind == "float":
                vals = [None if v is None else float(v) for v in vals]
            arrays.append(pa.array(vals, type=types[kind]))
            fields.append(pa.field(c, types[kind]))
        pq.write_table(pa.Table.from_arrays(arrays, schema=pa.schema(fields)), tmp)
    else:
        with open(tmp, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(columns)
            for r in rows:
                w.writerow(["" if r.get(c) is None else repr(r[c]) if isinstance(r.get(c), float) else r.get(c)
                            for c in columns])
    os.replace(tmp, path)
    return path


def _parse_csv_value(text: str):
    if text == "":
        return None
    if text in ("True", "False"):
        return text == "True"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def read_table(path: str | os.PathLike) -> list[dict]:
    """The rows of a study table (``results.parquet`` / ``results.csv``, or the study folder) as dicts."""
    path = str(path)
    if os.path.isdir(path):
        path = table_path(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no study table at {path!r} (run `armillary sweep STUDY --out DIR` first)")
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return [{k: _parse_csv_value(v) for k, v in r.items()} for r in rows]


def read_journal(out: str) -> dict:
    """Finished runs recorded in ``runs.jsonl`` (run id -> record); a torn last line is ignored."""
    path = os.path.join(out, JOURNAL)
    done = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue
                done[rec["run_id"]] = rec
    return done


# ---------------------------------------------------------------------- planning
def plan_tasks(study: Study, points: list[Point]) -> list[list[Point]]:
    """Group ``points`` into tasks: runs of one configuration that differ only in per-world parameters
    are packed (up to ``batch_worlds``) when every solver of it declares ``multiple_worlds`` and no
    per-step residual history is measured (coupler diagnostics are maxima over all worlds)."""
    tasks, groups = [], {}
    for p in points:
        spec_cfg = study.run_spec(p)["config"]
        residual = "residuals" in study.measures and spec_cfg["coupler"] == "SolverCoupledADMM"
        if study.batch_worlds > 1 and not p.is_reference and not residual and supports_worlds(spec_cfg):
            groups.setdefault(p.per_world_key(), []).append(p)
        else:
            tasks.append([p])
    for group in groups.values():
        for i in range(0, len(group), study.batch_worlds):
            tasks.append(group[i:i + study.batch_worlds])
    return tasks


# ---------------------------------------------------------------------- backends
class _Progress:
    def __init__(self, total: int, enabled: bool):
        self.total, self.enabled, self.start = total, enabled, time.perf_counter()
        self.done = self.failed = 0

    def update(self, done: int, failed: int):
        self.done, self.failed = done, failed
        if not self.enabled or not self.total:
            return
        width = 30
        k = int(width * done / self.total)
        sys.stderr.write(f"\rsweep: [{'#' * k}{'.' * (width - k)}] {done}/{self.total} runs, {failed} failed, "
                         f"{time.perf_counter() - self.start:.0f} s")
        if done >= self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def _local_backend(task_specs: list[list[dict]], workers: int):
    """Yield each task's results as it finishes: in this process when ``workers == 1``, else in a
    pool of ``workers`` spawned processes (one Warp kernel cache on disk, shared by all)."""
    if workers == 1:
        for specs in task_specs:
            yield specs, run_task(specs)
        return
    import concurrent.futures as cf
    import multiprocessing as mp

    remaining = list(task_specs)
    attempts = {}
    while remaining:
        with cf.ProcessPoolExecutor(max_workers=min(workers, len(remaining)),
                                    mp_context=mp.get_context("spawn")) as pool:
            futures = {pool.submit(run_task, specs): i for i, specs in enumerate(remaining)}
            retry = []
            for fut in cf.as_completed(futures):
                specs = remaining[futures[fut]]
                try:
                    results = fut.result()
                except Exception as exc:  # the worker process died (BrokenProcessPool) or could not unpickle
                    key = specs[0]["run_id"]
                    attempts[key] = attempts.get(key, 0) + 1
                    if attempts[key] < 2:
                        retry.append(specs)
                        continue
                    results = [_crashed(s, exc, len(specs)) for s in specs]
                yield specs, results
        remaining = retry


def _crashed(spec, exc, batch) -> dict:
    text = str(exc).strip().splitlines()
    return {"run_id": spec["run_id"], "status": STATUS_ERROR, "batch": batch, "values": {}, "arrays": {},
            "error": f"worker failed: {type(exc).__name__}: {text[0] if text else ''}"}


def _ray_backend(task_specs: list[list[dict]], address: str | None):
    """Yield each task's results as Ray returns them (each task one Ray task, one CPU)."""
    try:
        import ray
    except ImportError as exc:
        raise StudyError("--backend ray needs Ray: pip install 'armillary[sweep-ray]' (or pip install ray)") from exc
    started = False
    if not ray.is_initialized():
        kwargs = {"log_to_driver": False}
        if address:
            kwargs["address"] = address
        else:
            kwargs["include_dashboard"] = False
        ray.init(**kwargs)
        started = True
    try:
        remote = ray.remote(num_cpus=1, max_retries=1)(run_task)
        pending = {remote.remote(specs): specs for specs in task_specs}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                specs = pending.pop(ref)
                try:
                    results = ray.get(ref)
                except Exception as exc:  # the task's worker died
                    results = [_crashed(s, exc, len(specs)) for s in specs]
                yield specs, results
    finally:
        if started:
            ray.shutdown()


# ---------------------------------------------------------------------- run
def run(study, out: str | os.PathLike | None = None, *, backend: str = "local", address: str | None = None,
        workers: int | None = None, quick: bool = False, progress: bool | None = None,
        retry_failed: bool = False) -> SweepReport:
    """Run ``study`` (a :class:`Study`, or the path of a TOML study file) into the folder ``out``
    (default: ``sweep_<name>``) and return a :class:`SweepReport`.

    Runs whose id is already in ``out`` are skipped (``retry_failed``: except failed ones). A run that
    fails is recorded with its exception text and never stops the study. ``backend``: ``"local"``
    (``workers`` processes, default one per core; 1: in this process) or ``"ray"`` (``address``:
    ``"auto"``, ``"ray://host:port"``, or ``None`` for an already initialised or a new local Ray).
    ``quick``: only a few short points of each configuration (a smoke check).
    """
    t0 = time.perf_counter()
    if not isinstance(study, Study):
        study = load_study(study)
    if backend not in BACKENDS:
        raise StudyError(f"backend {backend!r}: unknown; allowed: {', '.join(BACKENDS)}")
    if workers is not None and (isinstance(workers, bool) or int(workers) != workers or workers < 1):
        raise StudyError(f"workers = {workers!r}: must be an integer >= 1")
    if address is not None and backend != "ray":
        raise StudyError("--address is only for --backend ray")
    out = str(out or f"sweep_{study.name}")
    refs, runs = study.points(quick=quick)
    os.makedirs(os.path.join(out, "runs"), exist_ok=True)
    with open(os.path.join(out, "study.json"), "w") as f:
        f.write(study.to_json())
    done = read_journal(out)
    if not done and os.path.exists(table_path(out)):  # a table without its journal: its ids are done
        done = {r["run_id"]: None for r in read_table(table_path(out))}
    if retry_failed:
        done = {k: v for k, v in done.items() if v is None or v["status"] != STATUS_ERROR}
    all_points = refs + runs
    todo = [p for p in all_points if p.run_id not in done]
    by_id = {p.run_id: p for p in all_points}
    tasks = plan_tasks(study, todo)
    task_specs = [[study.run_spec(p) for p in t] for t in tasks]
    workers = workers or os.cpu_count() or 1
    records = {k: v for k, v in done.items() if v is not None and k in by_id}
    failed = []
    expected = _expected_measures(study)
    show = progress if progress is not None else sys.stderr.isatty()
    bar = _Progress(len(todo), show)
    ref_points = {}  # reference id -> points array (None: failed)
    parked = {}  # reference id -> [(point, result)]
    journal = open(os.path.join(out, JOURNAL), "a")
    last_write = [time.perf_counter()]
    table = table_path(out)

    def ref_array(ref_id):
        if ref_id in ref_points:
            return ref_points[ref_id]
        path = os.path.join(out, "runs", f"{ref_id}.npz")
        arr = None
        rec = records.get(ref_id)
        if rec is not None and rec["status"] != STATUS_ERROR and os.path.exists(path):
            with np.load(path) as z:
                arr = z["points"] if "points" in z else None
        ref_points[ref_id] = arr
        return arr

    def record(point: Point, result: dict):
        values = dict(result["values"]) or {m: (0.0 if m == "status" else math.nan) for m in expected}
        if point.reference is not None and "error" in study.measures:
            ref = ref_array(point.reference)
            pts = result["arrays"].get("points")
            values.update(error_values(pts, ref) if ref is not None and pts is not None
                          else {"error_max": math.nan, "error_rms": math.nan, "error_final": math.nan})
        rec = {"run_id": point.run_id, "config": point.config, "scene": point.scene, "params": point.params,
               "is_reference": point.is_reference, "status": result["status"], "error": result["error"],
               "batch": result["batch"], "values": values}
        records[point.run_id] = rec
        journal.write(json.dumps(rec, default=float) + "\n")
        journal.flush()
        if result["status"] == STATUS_ERROR:
            failed.append((point.run_id, point.config, result["error"]))
        bar.update(bar.done + 1, len(failed))
        if time.perf_counter() - last_write[0] > REWRITE_EVERY_S:
            write_table(list(records.values()), out)
            last_write[0] = time.perf_counter()

    try:
        source = _local_backend(task_specs, workers) if backend == "local" else _ray_backend(task_specs, address)
        for specs, results in source:
            for result in results:
                point = by_id[result["run_id"]]
                if result["arrays"]:
                    np.savez(os.path.join(out, "runs", f"{point.run_id}.npz"), **result["arrays"])
                if point.is_reference:
                    ref_points[point.run_id] = result["arrays"].get("points") if result["status"] != STATUS_ERROR \
                        else None  # fmt: skip
                    record(point, result)
                    for p, r in parked.pop(point.run_id, []):
                        record(p, r)
                elif point.reference is not None and point.reference not in records:
                    parked.setdefault(point.reference, []).append((point, result))
                else:
                    record(point, result)
        for items in parked.values():  # references that never came back (cannot happen unless they were lost)
            for p, r in items:
                record(p, r)
    finally:
        journal.close()
        if records:
            table = write_table(list(records.values()), out)
    return SweepReport(out, table, len(all_points), len(all_points) - len(todo), len(todo), failed,
                       time.perf_counter() - t0, backend, workers if backend == "local" else 0)


def _expected_measures(study: Study) -> list[str]:
    """Value names a run of ``study`` records (a failed run gets them as NaN)."""
    names = {"status": ["status"], "trajectory": ["trajectory_frames"],
             "energy": ["energy_start", "energy_end", "energy_change", "energy_max_rise"],
             "joint_gap": ["joint_gap_max", "joint_gap_mean"], "speed": ["steps_per_second", "wall_seconds",
                                                                         "first_step_seconds"],
             "error": [], "residuals": []}
    return [n for m in study.measures for n in names[m]]


def compare_tables(a: str, b: str, *, ignore=("steps_per_second", "wall_seconds", "first_step_seconds")) -> list:
    """Differences between two study tables (rows keyed by run id and measure), timing measures left
    out; empty when they agree."""
    def key(rows):
        return {(r["run_id"], r["measure"]): r for r in rows if r["measure"] not in ignore}

    ra, rb = key(read_table(a)), key(read_table(b))
    diffs = [f"only in {a if k in ra else b}: {k}" for k in sorted(set(ra) ^ set(rb))]
    for k in sorted(set(ra) & set(rb)):
        x, y = ra[k], rb[k]
        for c in set(x) | set(y):
            u, v = (None if w == "" else w for w in (x.get(c), y.get(c)))  # CSV: empty cells read as None
            if isinstance(u, float) and isinstance(v, float) and (u == v or (math.isnan(u) and math.isnan(v))):
                continue
            if u != v:
                diffs.append(f"{k} {c}: {u!r} != {v!r}")
    return diffs


__all__ = ["SweepReport", "compare_tables", "plan_tasks", "read_table", "read_journal", "run", "table_path",
           "write_table"]

"""The machine-readable side of the benchmark scripts (what ``benchmarks/run_all.py`` reads).

Every ``bench_*.py`` keeps its human output and, given ``--json PATH`` (or ``$ARMILLARY_BENCH_JSON``),
also writes its figures to PATH as a JSON list of rows::

    {"benchmark": "xpbd", "scene": "64-box pile", "engine": "armillary", "metric": "steps/s",
     "value": 812.3, "cpu": true, "ratio_vs": "newton", "n": 1}

``benchmark`` is the script's name without ``bench_``; ``engine`` is ``armillary``, ``newton`` (the
reference engine) or ``mujoco`` (raw MuJoCo C, possibly with a suffix such as ``mujoco rollout``);
``metric`` is a rate (``steps/s``, ``calls/s``, ``imports/s``) or ``R^2``, higher is better, or a
cost (``s``, ``ms/step``, ``overhead/subs``), lower is better; ``value`` is the median of ``n`` timed
windows, or their best where the row says ``"stat": "best"``; ``cpu`` says whether the time is the
process's CPU time (``--cpu-time``) rather than wall time; ``ratio_vs`` names the engine an armillary
row is compared with (``None`` on the baselines). Further keys are details (contacts, worlds, bytes
per world, ...).

Other shared switches: ``--cpu-time`` (or ``$ARMILLARY_BENCH_CPU_TIME=1``) times with
``time.process_time`` instead of ``time.perf_counter`` where a script times in-process work, so that
other load on a shared machine matters less; ``$NEWTON_PYTHON`` names an interpreter that has the
reference engine: when ``import newton`` does not work in ours, that interpreter's site-packages are
appended to ``sys.path`` (after ours: one Python, warp and numpy for both engines), in the benchmark
process and in the subprocesses that time newton; ``$ARMILLARY_BENCH_NO_REFERENCE=1`` hides the
reference engine.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ENV_JSON = "ARMILLARY_BENCH_JSON"
ENV_CPU = "ARMILLARY_BENCH_CPU_TIME"
ENV_NO_REFERENCE = "ARMILLARY_BENCH_NO_REFERENCE"
ENV_REFERENCE_PYTHON = "NEWTON_PYTHON"
FIELDS = ("benchmark", "scene", "engine", "metric", "value", "cpu", "ratio_vs", "n")

_cpu = os.environ.get(ENV_CPU, "") not in ("", "0")


def add_arguments(parser) -> None:
    """Add ``--json PATH`` and ``--cpu-time`` to a script's argument parser."""
    parser.add_argument("--json", metavar="PATH", default=os.environ.get(ENV_JSON) or None,
                        help=f"also write the figures as JSON rows to PATH (default: ${ENV_JSON})")
    parser.add_argument("--cpu-time", action="store_true", default=_cpu,
                        help=f"time in-process work in CPU seconds of this process (default: ${ENV_CPU})")


def use_cpu_time(on: bool) -> None:
    """Make :func:`clock` the process's CPU time (``True``) or the wall clock (``False``)."""
    global _cpu
    _cpu = bool(on)


def cpu_time() -> bool:
    """Whether :func:`clock` is CPU time."""
    return _cpu


def clock() -> float:
    """Seconds: ``time.process_time()`` under ``--cpu-time``, else ``time.perf_counter()``."""
    return time.process_time() if _cpu else time.perf_counter()


def clock_name() -> str:
    """The ``time`` function :func:`clock` uses (for timing snippets run in another interpreter)."""
    return "process_time" if _cpu else "perf_counter"


def median(values) -> float:
    return float(statistics.median(values))


class Results:
    """The rows of one script run; written to ``path`` (when given) after every :meth:`add`, so that
    a script failing half-way still leaves what it measured."""

    def __init__(self, benchmark: str, path: str | None = None):
        self.benchmark = benchmark[len("bench_"):] if benchmark.startswith("bench_") else benchmark
        self.path = path
        self.rows: list[dict] = []

    @classmethod
    def from_args(cls, script: str, args) -> Results:
        """The collector of ``script`` (``__file__``) for parsed ``args`` (``--json``, ``--cpu-time``)."""
        use_cpu_time(getattr(args, "cpu_time", False))
        return cls(Path(script).stem, getattr(args, "json", None))

    def add(self, scene: str, engine: str, value: float | None, metric: str = "steps/s", *, cpu: bool | None = None,
            ratio_vs: str | None = None, n: int = 1, **extra) -> None:
        """One figure; ``value=None`` (not measured) is skipped; ``cpu`` defaults to the current clock."""
        if value is None:
            return
        value = float(value)
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"benchmark {self.benchmark!r}, scene {scene!r}, engine {engine!r}: "
                             f"value {value} is not a finite number")
        row = {"benchmark": self.benchmark, "scene": str(scene), "engine": str(engine), "metric": str(metric),
               "value": value, "cpu": _cpu if cpu is None else bool(cpu), "ratio_vs": ratio_vs, "n": int(n)}
        row.update(extra)
        self.rows.append(row)
        self.write()

    def write(self) -> None:
        if not self.path:
            return
        tmp = f"{self.path}.tmp"
        with open(tmp, "w") as f:
            json.dump(self.rows, f, indent=1)
        os.replace(tmp, self.path)


# ---------------------------------------------------------------------- the reference engine
_reference: dict = {}


def reference_disabled() -> bool:
    return os.environ.get(ENV_NO_REFERENCE, "") not in ("", "0")


def _site_of(python: str) -> str | None:
    code = "import os, newton; print(os.path.dirname(os.path.dirname(newton.__file__)))"
    out = subprocess.run([python, "-c", code], capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1] if out.returncode == 0 and out.stdout.strip() else None


def _resolve() -> tuple[str, str | None]:
    """Where newton comes from: ``("none", None)``, ``("native", None)`` (this interpreter has it) or
    ``("site", folder)`` (``$NEWTON_PYTHON``'s site-packages, to append to ``sys.path``)."""
    import importlib.util

    if "state" not in _reference:
        python = os.environ.get(ENV_REFERENCE_PYTHON)
        if reference_disabled():
            state = ("none", None)
        elif importlib.util.find_spec("newton") is not None:
            state = ("native", None)
        elif python:
            if not os.path.exists(python):
                raise SystemExit(f"${ENV_REFERENCE_PYTHON}={python!r}: no such interpreter")
            site = _site_of(python)
            if site is None:
                raise SystemExit(f"${ENV_REFERENCE_PYTHON}={python!r} cannot `import newton`")
            state = ("site", site)
        else:
            state = ("none", None)
        _reference["state"] = state
    return _reference["state"]


def reference_on_path() -> bool:
    """Make ``import newton`` work in this process when the reference engine is available (appending
    ``$NEWTON_PYTHON``'s site-packages after ours when this interpreter lacks it); returns whether it
    is. Under ``$ARMILLARY_BENCH_NO_REFERENCE`` it makes ``import newton`` fail instead."""
    kind, site = _resolve()
    if reference_disabled():
        sys.modules["newton"] = None  # `import newton` raises ImportError, find_spec returns None
    if kind == "site" and site not in sys.path:
        sys.path.append(site)  # after ours: our warp, numpy and armillary stay first
    return kind != "none"


def reference_runner(code: str) -> tuple[str, str] | None:
    """``(interpreter, code)`` running ``code`` (for ``python -c``) where ``import newton`` works: this
    interpreter, with ``$NEWTON_PYTHON``'s site-packages appended first when it lacks newton; ``None``
    when there is no reference engine."""
    kind, site = _resolve()
    if kind == "none":
        return None
    if kind == "site":
        code = f"import sys; sys.path.append({site!r})\n" + code
    return sys.executable, code

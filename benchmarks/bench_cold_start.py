"""Cold start of ``armillary run``: time to the first step of the demo scene on a cold Warp kernel cache,
and after ``armillary warmup`` (what ``scripts/setup.sh`` runs once).

Usage: ``python benchmarks/bench_cold_start.py [--solvers SolverXPBD,SolverFeatherstone] [--warm-cache DIR]``

Every measurement is a fresh process (``python -m armillary run --frames 1``) with ``WARP_CACHE_PATH``
pointing at a temporary folder:

1. cold: an empty cache; the first step compiles the kernels the run needs.
2. warmup: ``armillary warmup`` into another empty cache (timed), then the same run for each solver of
   ``--solvers``: it must load every kernel from the cache (the new cache entries it made are counted).

Printed per run: the process wall time (start to exit; with one frame, the steps after the first are a few
milliseconds), the runner's ``first step`` figure (kernel compilation or cache loading included) and the
kernel modules the run compiled. ``--warm-cache DIR`` reuses a cache already filled by ``armillary warmup``
instead of step 2's warmup (the post-warmup runs then use a copy of it).

Python's bytecode cache is part of a start too: the processes write theirs under a temporary
``PYTHONPYCACHEPREFIX`` (cold with the kernel cache, then filled by the first runs and the warmup, as on
a user's machine), even where ``PYTHONDONTWRITEBYTECODE`` is set; ``--no-bytecode`` keeps that setting.

``--quick`` skips the cold run, the warmup and the second warm run: the warm runs use this user's kernel
cache in place (``WARP_CACHE_PATH`` or Warp's default), a warm figure only if ``armillary warmup`` has run
since the kernels last changed.
``--json PATH`` also writes the figures as rows (``benchmarks/_protocol.py``; wall-clock seconds).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _protocol as protocol

ENV: dict[str, str] = dict(os.environ)


def _entries(cache: Path) -> set[str]:
    return {p.name for p in cache.rglob("wp_*") if p.is_dir()}


def run_once(cache: Path, solver: str | None, workdir: Path) -> dict:
    """One ``armillary run --frames 1`` process on ``cache``: wall time, first step, modules compiled."""
    env = {**ENV, "WARP_CACHE_PATH": str(cache)}
    cmd = [sys.executable, "-m", "armillary", "run", "--frames", "1", "--no-progress", "--out",
           str(workdir / "t.npz")]
    if solver:
        cmd += ["--solver", solver]
    before = _entries(cache)
    start = time.perf_counter()
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=workdir)
    wall = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{result.stderr}")
    first = float(re.search(r"first step:\s+([0-9.]+) s", result.stdout).group(1))
    chosen = re.search(r"solver:\s+(\S+)", result.stdout).group(1)
    compiled = sorted(_entries(cache) - before)
    return {"solver": chosen, "wall": wall, "first_step": first, "compiled": compiled}


def warmup(cache: Path, workdir: Path) -> float:
    env = {**ENV, "WARP_CACHE_PATH": str(cache)}
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "armillary", "warmup"], capture_output=True, text=True,
                            env=env, cwd=workdir)
    if result.returncode != 0:
        raise SystemExit(f"armillary warmup failed:\n{result.stdout}\n{result.stderr}")
    print("  " + result.stdout.strip().splitlines()[-1])
    return time.perf_counter() - start


def _default_cache() -> str:
    """Warp's kernel cache folder for this interpreter (asked in a subprocess: this one never imports Warp)."""
    code = "import warp as wp; wp.config.quiet = True; wp.init(); print(wp.config.kernel_cache_dir)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, check=True)
    return out.stdout.strip().splitlines()[-1]


def _row(label: str, r: dict) -> str:
    compiled = ", ".join(re.sub(r"^wp_(.*)_[0-9a-f]+$", r"\1", c) for c in r["compiled"]) or "none"
    return (f"{label:<28} {r['solver']:<20} process {r['wall']:6.2f} s   first step {r['first_step']:6.2f} s   "
            f"compiled: {compiled}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--solvers", default="", help="comma-separated solvers to run after the warmup "
                        "(default: the demo scene's default solver only)")
    parser.add_argument("--warm-cache", default=None, help="a cache folder already filled by armillary warmup")
    parser.add_argument("--skip-cold", action="store_true", help="skip the cold-cache run")
    parser.add_argument("--no-bytecode", action="store_true", help="keep PYTHONDONTWRITEBYTECODE as it is")
    parser.add_argument("--quick", action="store_true", help="no cold run, no warmup: warm runs on the current "
                        "kernel cache in place (a smoke run)")
    protocol.add_arguments(parser)
    args = parser.parse_args()
    results = protocol.Results.from_args(__file__, args)
    if args.quick:
        args.skip_cold = True
    solvers = [s for s in args.solvers.split(",") if s] or [None]

    def record(label: str, r: dict) -> None:
        results.add(f"{label}: process", "armillary", r["wall"], "s", cpu=False, compiled=len(r["compiled"]))
        results.add(f"{label}: first step", "armillary", r["first_step"], "s", cpu=False)

    with tempfile.TemporaryDirectory(prefix="armillary_cold_") as tmp:
        tmp = Path(tmp)
        if not args.no_bytecode:
            ENV.pop("PYTHONDONTWRITEBYTECODE", None)
            ENV["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
        if not args.skip_cold:
            cold = tmp / "cold"
            cold.mkdir()
            print("cold cache (every kernel the demo run needs compiles in its first step):")
            r = run_once(cold, None, tmp)
            print(_row("  cold", r))
            record("cold cache", r)
        warm = tmp / "warm"
        if args.quick:
            warm = Path(os.environ.get("WARP_CACHE_PATH") or _default_cache())
            print(f"on the current kernel cache, in place ({warm}; --quick):")
        elif args.warm_cache:
            shutil.copytree(args.warm_cache, warm)
            print(f"after armillary warmup (a copy of {args.warm_cache}):")
        else:
            warm.mkdir()
            print("armillary warmup into an empty cache:")
            seconds = warmup(warm, tmp)
            print(f"  warmup took {seconds:.1f} s")
            results.add("armillary warmup into an empty cache", "armillary", seconds, "s", cpu=False)
            print("after armillary warmup:")
        for solver in solvers:
            r = run_once(warm, solver, tmp)
            print(_row(f"  warm {solver or '(default solver)'}", r))
            record(f"warm cache, {solver or 'default solver'}", r)
        if not args.quick:
            r = run_once(warm, None, tmp)
            print(_row("  warm again (default)", r))
            record("warm cache again, default solver", r)


if __name__ == "__main__":
    main()

"""MJCF import time of the largest model of the shared asset corpus, next to newton's importer.

The largest model is the MJCF with the most bodies in MuJoCo's compiled model (file size when
``mujoco`` is not installed). Each figure is the best of N imports into a fresh builder, after one
warm-up import (mesh files cached by the OS, modules imported). newton is timed as a black box in a
separate process, only when it is installed: in ``--newton-python`` when given, else in this
interpreter (with ``$NEWTON_PYTHON``'s site-packages appended when it lacks newton: ``benchmarks/_protocol.py``).

Usage: ``python benchmarks/bench_mjcf_import.py [--repeat N] [--model PATH] [--quick] [--json PATH] [--cpu-time]``
(the last two: ``benchmarks/_protocol.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import warnings

import _protocol as protocol
from armillary.testing.assets import shared_assets_dir

ASSETS = str(shared_assets_dir(__file__) or "")

_TIMER = r"""
import sys, time, warnings
warnings.simplefilter("ignore")
import {mod} as sim
path, repeat = sys.argv[1], int(sys.argv[2])
sim.ModelBuilder().add_mjcf(path)
best = float("inf")
for _ in range(repeat):
    b = sim.ModelBuilder()
    t = time.{clock}()
    b.add_mjcf(path)
    best = min(best, time.{clock}() - t)
print(best, b.body_count, b.shape_count)
"""


def largest_model() -> str:
    cat_path = os.path.join(ASSETS, "catalog.json")
    cat = json.load(open(cat_path))
    files = []
    for e in cat.values():
        if e.get("fmt") != "mjcf":
            continue
        folder = os.path.join(ASSETS, os.path.dirname(e["path"]))
        main = os.path.join(ASSETS, e["path"])
        if not os.path.isfile(main):
            for root, _, fs in os.walk(folder):
                if os.path.basename(e["main"]) in fs:
                    main = os.path.join(root, os.path.basename(e["main"]))
                    break
        files.append(main)
    try:
        import tempfile

        import mujoco
    except ImportError:
        return max(files, key=os.path.getsize)
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:  # MuJoCo logs compiler warnings to ./MUJOCO_LOG.TXT
        os.chdir(tmp)
        try:
            return max(files, key=lambda f: mujoco.MjModel.from_xml_path(f).nbody)
        finally:
            os.chdir(cwd)


def time_in(python: str, mod: str, path: str, repeat: int, prelude: str = ""):
    code = prelude + _TIMER.format(mod=mod, clock=protocol.clock_name())
    out = subprocess.run([python, "-c", code, path, str(repeat)], capture_output=True, text=True)
    if out.returncode != 0:
        return None, out.stderr.strip().splitlines()[-1:] or ["failed"]
    best, nb, ns = out.stdout.strip().splitlines()[-1].split()
    return float(best), (int(nb), int(ns))


def newton_python(explicit: str | None) -> tuple[str, str] | None:
    """``(interpreter, prelude)`` to time newton in: ``explicit`` when it can ``import newton``, else the
    reference engine of ``benchmarks/_protocol.py``; ``None`` when there is none."""
    if explicit:
        ok = os.path.exists(explicit) and subprocess.run([explicit, "-c", "import newton"],
                                                          capture_output=True).returncode == 0  # fmt: skip
        return (explicit, "") if ok else None
    return protocol.reference_runner("")


def main() -> int:
    """0, or 1 when armillary's import failed."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--model", default=None)
    ap.add_argument("--newton-python", default=None, help="an interpreter with newton to time it in")
    ap.add_argument("--quick", action="store_true", help="--repeat 1: a smoke run")
    protocol.add_arguments(ap)
    args = ap.parse_args()
    if args.quick:
        args.repeat = 1
    results = protocol.Results.from_args(__file__, args)
    path = args.model or largest_model()
    print(f"model: {path}")
    scene = f"add_mjcf {os.path.relpath(path, ASSETS) if ASSETS else path}"
    ours, info = time_in(sys.executable, "armillary", path, args.repeat)
    print(f"armillary add_mjcf   {ours * 1e3:8.1f} ms  (bodies, shapes: {info})" if ours else f"armillary failed: {info}")
    py = None if protocol.reference_disabled() else newton_python(args.newton_python)
    results.add(scene, "armillary", ours, "s", n=args.repeat, stat="best", ratio_vs="newton" if py else None)
    if py is None:
        print("newton add_mjcf      (not installed: pip install newton to compare)")
        return 0 if ours else 1
    theirs, tinfo = time_in(py[0], "newton", path, args.repeat, py[1])
    if theirs is None:
        print(f"newton add_mjcf      failed: {tinfo}")
        return 0 if ours else 1
    print(f"newton add_mjcf      {theirs * 1e3:8.1f} ms  (bodies, shapes: {tinfo})")
    results.add(scene, "newton", theirs, "s", n=args.repeat, stat="best")
    if ours:
        print(f"ratio armillary/newton {ours / theirs:6.2f}")
    return 0 if ours else 1


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    raise SystemExit(main())

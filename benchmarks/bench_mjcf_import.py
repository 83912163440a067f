"""MJCF import time of the largest model of the shared asset corpus, next to newton's importer.

The largest model is the MJCF with the most bodies in MuJoCo's compiled model (file size when
``mujoco`` is not installed). Each figure is the best of N imports into a fresh builder, after one
warm-up import (mesh files cached by the OS, modules imported). newton is timed as a black box in its
own interpreter (``--newton-python``, default: ``python`` of a ``newton`` install found on ``PATH``
or ``/tmp/probe/bin/python``) and only when it is installed.

Usage: ``python benchmarks/bench_mjcf_import.py [--repeat N] [--model PATH]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import warnings

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
    t = time.perf_counter()
    b.add_mjcf(path)
    best = min(best, time.perf_counter() - t)
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


def time_in(python: str, mod: str, path: str, repeat: int):
    out = subprocess.run([python, "-c", _TIMER.format(mod=mod), path, str(repeat)], capture_output=True, text=True)
    if out.returncode != 0:
        return None, out.stderr.strip().splitlines()[-1:] or ["failed"]
    best, nb, ns = out.stdout.strip().splitlines()[-1].split()
    return float(best), (int(nb), int(ns))


def newton_python(explicit: str | None) -> str | None:
    cands = [explicit] if explicit else [sys.executable, shutil.which("python3"), "/tmp/probe/bin/python"]
    for c in cands:
        if c and os.path.exists(c):
            ok = subprocess.run([c, "-c", "import newton"], capture_output=True).returncode == 0
            if ok:
                return c
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--model", default=None)
    ap.add_argument("--newton-python", default=None)
    args = ap.parse_args()
    path = args.model or largest_model()
    print(f"model: {path}")
    ours, info = time_in(sys.executable, "armillary", path, args.repeat)
    print(f"armillary add_mjcf   {ours * 1e3:8.1f} ms  (bodies, shapes: {info})" if ours else f"armillary failed: {info}")
    py = newton_python(args.newton_python)
    if py is None:
        print("newton add_mjcf      (not installed: pip install newton to compare)")
        return
    theirs, tinfo = time_in(py, "newton", path, args.repeat)
    if theirs is None:
        print(f"newton add_mjcf      failed: {tinfo}")
        return
    print(f"newton add_mjcf      {theirs * 1e3:8.1f} ms  (bodies, shapes: {tinfo})")
    if ours:
        print(f"ratio armillary/newton {ours / theirs:6.2f}")


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    main()

"""Import time of the largest URDF model of the shared corpus, next to newton's importer.

Usage: ``python benchmarks/bench_urdf_import.py [--repeat N] [--newton-python PATH] [--quick] [--json PATH]
[--cpu-time]`` (the last two: ``benchmarks/_protocol.py``)

The largest model is the one with the most links (talos, 60 links). armillary is timed
cold (first import, meshes loaded from disk) and warm (mesh cache filled). newton's
importer is timed as a black box in a separate process: of the interpreter given with
``--newton-python``, else of this one when it has newton or ``$NEWTON_PYTHON`` names one that has
(its site-packages appended: ``benchmarks/_protocol.py``); it is skipped when there is none.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import _protocol as protocol

HERE = Path(__file__).resolve()


def find_assets() -> Path:
    from armillary.testing.assets import shared_assets_dir

    assets = shared_assets_dir(HERE)
    if assets is None:
        raise SystemExit("shared/assets not found (set ARMILLARY_ASSETS)")
    return assets


def urdf_models_by_size(assets: Path) -> list[tuple[str, Path]]:
    """URDF models of the corpus, most links first."""
    cat = json.loads((assets / "catalog.json").read_text())
    rows = []
    for name, entry in cat.items():
        if entry["fmt"] == "urdf":
            path = assets / entry["path"]
            rows.append((len(ET.parse(path).getroot().findall("link")), name, path))
    return [(name, path) for _, name, path in sorted(rows, key=lambda r: (-r[0], r[1]))]


NEWTON_SNIPPET = r"""
import os, sys, time, warnings, json
warnings.simplefilter("ignore")
import newton
path, pkg_root, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
clock = getattr(time, sys.argv[4] if len(sys.argv) > 4 else "perf_counter")
os.environ["ROS_PACKAGE_PATH"] = pkg_root
times = []
for _ in range(repeat):
    b = newton.ModelBuilder()
    t = clock()
    try:
        b.add_urdf(path)
    except Exception as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"[:300]})); raise SystemExit(0)
    times.append(clock() - t)
print(json.dumps({"times": times, "bodies": b.body_count, "version": getattr(newton, "__version__", "?")}))
"""


def bench_armillary(path: Path, repeat: int) -> dict:
    import warnings

    import armillary
    from armillary_importer_urdf import importer

    importer._MESH_CACHE.clear()
    times = []
    for _ in range(repeat):
        b = armillary.ModelBuilder()
        t = protocol.clock()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            b.add_urdf(str(path))
        times.append(protocol.clock() - t)
    return {"cold": times[0], "warm": min(times[1:]) if len(times) > 1 else None, "bodies": b.body_count}


def bench_newton(python: str | None, path: Path, pkg_root: Path, repeat: int) -> dict | None:
    code = NEWTON_SNIPPET
    if python is None:
        runner = protocol.reference_runner(NEWTON_SNIPPET)
        if runner is None:
            return None
        python, code = runner
    r = subprocess.run([python, "-c", code, str(path), str(pkg_root), str(repeat), protocol.clock_name()],
                       capture_output=True, text=True, timeout=600)  # fmt: skip
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        return {"error": (r.stderr or r.stdout)[-300:]}
    return json.loads(lines[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--all", action="store_true", help="every URDF model, not only the largest")
    ap.add_argument("--newton-python", default=None, help="an interpreter with newton to time it in")
    ap.add_argument("--quick", action="store_true", help="--repeat 2: a smoke run")
    protocol.add_arguments(ap)
    args = ap.parse_args()
    if args.quick:
        args.repeat = 2
    results = protocol.Results.from_args(__file__, args)
    assets = find_assets()
    models = urdf_models_by_size(assets)
    if not args.all:
        models = models[:1]
    for i, (name, path) in enumerate(models):
        pkg_root = assets / "urdf" / name
        print(f"model: {name} ({path.relative_to(assets)}){' - the largest' if i == 0 else ''}")
        a = bench_armillary(path, args.repeat)
        warm = f"{a['warm'] * 1e3:.1f} ms" if a["warm"] is not None else "-"
        print(f"  armillary: cold {a['cold'] * 1e3:.1f} ms, warm {warm} ({a['bodies']} bodies)")
        n = bench_newton(args.newton_python, path, pkg_root, args.repeat)
        vs = "newton" if n is not None and "error" not in n else None
        results.add(f"add_urdf {name}: cold (first import)", "armillary", a["cold"], "s", ratio_vs=vs)
        results.add(f"add_urdf {name}: warm", "armillary", a["warm"], "s", n=args.repeat - 1, stat="best", ratio_vs=vs)
        if n is None:
            print("  newton: not installed (pass --newton-python or set NEWTON_PYTHON)")
        elif "error" in n:
            print(f"  newton: import failed: {n['error']}")
        else:
            t = n["times"]
            print(f"  newton {n['version']}: cold {t[0] * 1e3:.1f} ms, warm {min(t[1:] or t) * 1e3:.1f} ms "
                  f"({n['bodies']} bodies)")
            results.add(f"add_urdf {name}: cold (first import)", "newton", t[0], "s")
            if len(t) > 1:
                results.add(f"add_urdf {name}: warm", "newton", min(t[1:]), "s", n=len(t) - 1, stat="best")


if __name__ == "__main__":
    main()

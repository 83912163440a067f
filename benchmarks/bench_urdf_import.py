"""Import time of the largest URDF model of the shared corpus, next to newton's importer.

Usage: ``python benchmarks/bench_urdf_import.py [--repeat N] [--newton-python PATH]``

The largest model is the one with the most links (talos, 60 links). armillary is timed
cold (first import, meshes loaded from disk) and warm (mesh cache filled). newton's
importer is timed as a black box in a separate interpreter: the one given with
``--newton-python`` (or ``$NEWTON_PYTHON``), else this interpreter when ``import newton``
works; it is skipped when neither is available.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

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
os.environ["ROS_PACKAGE_PATH"] = pkg_root
times = []
for _ in range(repeat):
    b = newton.ModelBuilder()
    t = time.perf_counter()
    try:
        b.add_urdf(path)
    except Exception as exc:
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"[:300]})); raise SystemExit(0)
    times.append(time.perf_counter() - t)
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
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            b.add_urdf(str(path))
        times.append(time.perf_counter() - t)
    return {"cold": times[0], "warm": min(times[1:]) if len(times) > 1 else None, "bodies": b.body_count}


def bench_newton(python: str | None, path: Path, pkg_root: Path, repeat: int) -> dict | None:
    if python is None:
        try:
            import newton  # noqa: F401

            python = sys.executable
        except ImportError:
            return None
    r = subprocess.run([python, "-c", NEWTON_SNIPPET, str(path), str(pkg_root), str(repeat)],
                       capture_output=True, text=True, timeout=600)  # fmt: skip
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        return {"error": (r.stderr or r.stdout)[-300:]}
    return json.loads(lines[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--all", action="store_true", help="every URDF model, not only the largest")
    ap.add_argument("--newton-python", default=os.environ.get("NEWTON_PYTHON"))
    args = ap.parse_args()
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
        if n is None:
            print("  newton: not installed (pass --newton-python or set NEWTON_PYTHON)")
        elif "error" in n:
            print(f"  newton: import failed: {n['error']}")
        else:
            t = n["times"]
            print(f"  newton {n['version']}: cold {t[0] * 1e3:.1f} ms, warm {min(t[1:] or t) * 1e3:.1f} ms "
                  f"({n['bodies']} bodies)")


if __name__ == "__main__":
    main()

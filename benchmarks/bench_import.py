"""Import time of ``import armillary`` (and of ``import newton`` when installed, as a baseline).

Each figure is the best of N fresh interpreter runs, minus the interpreter's own start-up time
measured in the same run. Usage: ``python benchmarks/bench_import.py [--repeat N] [--quick] [--json PATH]``;
when this interpreter has no newton, ``$NEWTON_PYTHON``'s is imported (``benchmarks/_protocol.py``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

import _protocol as protocol


def best_wall(code: str, repeat: int, python: str = sys.executable) -> float:
    """Best wall-clock seconds of ``python -c code`` over ``repeat`` fresh processes."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([python, "-c", code], check=True, capture_output=True)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="--repeat 1: a smoke run")
    protocol.add_arguments(parser)
    args = parser.parse_args()
    if args.quick:
        args.repeat = 1
    results = protocol.Results.from_args(__file__, args)
    baseline = best_wall("pass", args.repeat)
    warp_only = best_wall("import warp", args.repeat) - baseline
    ours = best_wall("import armillary", args.repeat) - baseline
    print(f"python start-up       {baseline * 1e3:8.1f} ms (subtracted below)")
    print(f"import warp           {warp_only * 1e3:8.1f} ms")
    print(f"import armillary      {ours * 1e3:8.1f} ms  ({ours - warp_only:+.3f} s over warp)")
    scene = "import (python start-up subtracted)"
    results.add(scene, "warp", warp_only, "s", cpu=False, n=args.repeat)
    reference = protocol.reference_runner("import newton")
    results.add(scene, "armillary", ours, "s", cpu=False, n=args.repeat, ratio_vs="newton" if reference else None)
    if reference is not None:
        python, code = reference
        theirs = best_wall(code, args.repeat, python) - baseline
        print(f"import newton         {theirs * 1e3:8.1f} ms")
        print(f"ratio armillary/newton {ours / theirs:6.2f}")
        results.add(scene, "newton", theirs, "s", cpu=False, n=args.repeat)
    else:
        print("import newton         (not installed: pip install newton to compare)")


if __name__ == "__main__":
    main()

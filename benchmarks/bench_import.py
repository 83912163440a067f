"""Import time of ``import armillary`` (and of ``import newton`` when installed, as a baseline).

Each figure is the best of N fresh interpreter runs, minus the interpreter's own start-up time
measured in the same run. Usage: ``python benchmarks/bench_import.py [--repeat N]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import time


def best_wall(code: str, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    baseline = best_wall("pass", args.repeat)
    warp_only = best_wall("import warp", args.repeat) - baseline
    ours = best_wall("import armillary", args.repeat) - baseline
    print(f"python start-up       {baseline * 1e3:8.1f} ms (subtracted below)")
    print(f"import warp           {warp_only * 1e3:8.1f} ms")
    print(f"import armillary      {ours * 1e3:8.1f} ms  ({ours - warp_only:+.3f} s over warp)")
    if importlib.util.find_spec("newton") is not None:
        theirs = best_wall("import newton", args.repeat) - baseline
        print(f"import newton         {theirs * 1e3:8.1f} ms")
        print(f"ratio armillary/newton {ours / theirs:6.2f}")
    else:
        print("import newton         (not installed: pip install newton to compare)")


if __name__ == "__main__":
    main()

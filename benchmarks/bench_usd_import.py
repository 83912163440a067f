"""USD import speed: the shared humanoid and a synthetic 30-body revolute chain, next to newton's importer.

Usage: ``python benchmarks/bench_usd_import.py [--repeat N] [--quick] [--json PATH] [--cpu-time]`` (the last two:
``benchmarks/_protocol.py``)

Prints imports per second of armillary's ``add_usd`` for each stage. When ``newton`` (the reference
engine) is importable in the running interpreter, its ``ModelBuilder.add_usd`` is timed on the same
stages and the ratio (armillary imports/s over newton's) is printed. Each stage is opened from a file
at every import (both engines parse it), so stage composition is part of the measured time.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import warnings
from pathlib import Path

import _protocol as protocol

HERE = Path(__file__).resolve()


def chain_usda(n: int = 30) -> str:
    """A fixed-base chain of ``n`` capsule links joined by revolute joints (UsdPhysics, Z up, meters)."""
    out = ['#usda 1.0\n(\n    upAxis = "Z"\n    metersPerUnit = 1\n    kilogramsPerUnit = 1\n)\n',
           'def PhysicsScene "physicsScene"\n{\n}\n',
           'def Xform "chain" (\n    prepend apiSchemas = ["PhysicsArticulationRootAPI"]\n)\n{\n']  # fmt: skip
    for i in range(n):
        out.append(f"""    def Xform "link{i}" (
        prepend apiSchemas = ["PhysicsRigidBodyAPI", "PhysicsMassAPI"]
    )
    {{
        float physics:mass = 1
        double3 xformOp:translate = ({0.2 * i}, 0, 1)
        uniform token[] xformOpOrder = ["xformOp:translate"]
        def Capsule "geom" (
            prepend apiSchemas = ["PhysicsCollisionAPI"]
        )
        {{
            uniform token axis = "X"
            double radius = 0.03
            double height = 0.14
        }}
    }}
""")
    out.append('    def PhysicsFixedJoint "root"\n    {\n        rel physics:body1 = </chain/link0>\n'
               '        point3f physics:localPos0 = (0, 0, 1)\n    }\n')  # fmt: skip
    for i in range(1, n):
        out.append(f"""    def PhysicsRevoluteJoint "joint{i}"
    {{
        rel physics:body0 = </chain/link{i - 1}>
        rel physics:body1 = </chain/link{i}>
        uniform token physics:axis = "Y"
        point3f physics:localPos0 = (0.1, 0, 0)
        point3f physics:localPos1 = (-0.1, 0, 0)
        float physics:lowerLimit = -90
        float physics:upperLimit = 90
    }}
""")
    out.append("}\n")
    return "".join(out)


def time_imports(make_builder, path: str, repeat: int) -> float:
    """Best-of-``repeat`` seconds of one ``add_usd`` import of ``path`` into a fresh builder."""
    best = float("inf")
    for _ in range(repeat):
        b = make_builder()
        t = protocol.clock()
        b.add_usd(path)
        best = min(best, protocol.clock() - t)
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="--repeat 1: a smoke run")
    protocol.add_arguments(ap)
    args = ap.parse_args(argv)
    if args.quick:
        args.repeat = 1
    results = protocol.Results.from_args(__file__, args)
    warnings.simplefilter("ignore")
    import warp as wp

    wp.config.quiet = True
    import armillary
    from armillary.testing.assets import shared_assets_dir

    protocol.reference_on_path()
    try:
        import newton
    except ImportError:
        newton = None

    stages = []
    assets = shared_assets_dir(HERE)
    if assets is not None and (assets / "usd/humanoid_usd/humanoid.usda").is_file():
        stages.append(("humanoid (16 bodies)", str(assets / "usd/humanoid_usd/humanoid.usda")))
    tmp = tempfile.TemporaryDirectory()
    chain = os.path.join(tmp.name, "chain30.usda")
    Path(chain).write_text(chain_usda(30))
    stages.append(("chain (30 bodies)", chain))

    def arm_builder():
        return armillary.ModelBuilder()

    if not hasattr(armillary.ModelBuilder, "add_usd") or armillary.ModelBuilder.add_usd is None:
        raise SystemExit("armillary.ModelBuilder.add_usd is not available")
    # warm-up (imports pxr, compiles nothing: the import itself is pure Python)
    time_imports(arm_builder, stages[-1][1], 1)
    if newton is not None:
        try:
            time_imports(newton.ModelBuilder, stages[-1][1], 1)
        except ImportError as exc:  # the reference installed without its USD extra
            print(f"newton cannot import USD here ({exc}): reference timings skipped", file=sys.stderr)
            newton = None
    print(f"{'stage':<22} {'armillary [1/s]':>16} {'newton [1/s]':>14} {'ratio':>7}")
    for name, path in stages:
        t_a = time_imports(arm_builder, path, args.repeat)
        row = f"{name:<22} {1.0 / t_a:>16.1f}"
        best = {"n": args.repeat, "stat": "best"}
        vs = "newton" if newton is not None else None
        results.add(f"add_usd {name}", "armillary", 1.0 / t_a, "imports/s", ratio_vs=vs, **best)
        if newton is not None:
            t_n = time_imports(newton.ModelBuilder, path, args.repeat)
            row += f" {1.0 / t_n:>14.1f} {t_n / t_a:>7.2f}"
            results.add(f"add_usd {name}", "newton", 1.0 / t_n, "imports/s", **best)
        else:
            row += f" {'-':>14} {'-':>7}"
        print(row)
    if newton is None:
        print("newton (with USD support) is not importable in this interpreter: reference timings skipped",
              file=sys.stderr)
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

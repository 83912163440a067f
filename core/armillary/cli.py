"""The ``armillary`` command line.

``armillary plugins``
    installed plugins, their versions, what each provides and any load error.
``armillary run [MODEL_FILE] [--scene NAME] [--solver NAME] [--frames N] [--out FILE] [--usd FILE]``
    simulate a built-in demo scene (default ``falling_shapes``) or a model
    file (through the importer registered for its suffix) with any installed
    solver; prints a summary and writes the trajectory (``.npz``; with
    ``--usd`` also a USD stage of time-sampled body transforms for usdview).
``armillary features [--markdown]``
    the per-solver feature table generated from the solvers' declarations.
``armillary docs [--check] [DIR]``
    regenerate (or check) the generated documentation pages.

Errors (unknown solver, unreadable file, ...) print one line and exit with
status 2, without a traceback.
"""

from __future__ import annotations

import argparse
import sys


class CliError(Exception):
    """A user-facing error: printed on one line, exit status 2."""


def _cmd_plugins(args) -> int:
    from .plugins import get_registry

    registry = get_registry()
    records = registry.plugins()
    print(f"armillary core {__import__('armillary').__version__}")
    for record in records:
        status = "" if record.status == "loaded" else f"  [{record.status.upper()}]"
        print(f"\n{record.name}: {record.label}{status}")
        if record.core_requirement:
            print(f"  requires core: armillary{record.core_requirement}")
        if record.error is not None:
            print(f"  error: {type(record.error).__name__}: {record.error}")
        by_kind: dict[str, list[str]] = {}
        for kind, name in record.provides:
            by_kind.setdefault(kind, []).append(name)
        for kind, names in sorted(by_kind.items()):
            print(f"  {kind}s: {', '.join(sorted(names))}")
        if record.status == "loaded" and not record.provides:
            print("  provides nothing yet")
    conflicts = [
        e for reg in (registry.solvers, registry.importers, registry.actuators, registry.scenes)
        for e in reg.entries() if e.conflicts
    ]
    for entry in conflicts:
        owners = ", ".join(entry.owners())
        print(f"\nCONFLICT: {entry.kind} {entry.name!r} is registered by {owners}")
    if args.verbose:
        print("\nsolvers:")
        for entry in registry.solvers.entries():
            print(f"  {entry.name}: {entry.summary} ({entry.plugin.label})")
        print("scenes:")
        for entry in registry.scenes.entries():
            print(f"  {entry.name}: {entry.summary}")
    return 0


def _cmd_features(args) -> int:
    from .docsgen import feature_table_markdown

    print(feature_table_markdown())
    return 0


def _cmd_docs(args) -> int:
    from .docsgen import write_docs

    stale = write_docs(args.directory, check=args.check)
    if args.check and stale:
        raise CliError(f"generated docs are out of date: {', '.join(stale)} (run: armillary docs {args.directory})")
    return 0


def _cmd_run(args) -> int:
    from .runner import RunOptions, run

    options = RunOptions(
        model_file=args.model_file,
        scene=args.scene,
        solver=args.solver,
        frames=args.frames,
        substeps=args.substeps,
        dt=args.dt,
        world_count=args.worlds,
        out=args.out,
        device=args.device,
        progress=args.progress,
        mesh_collision=args.mesh_collision,
        usd=args.usd,
    )
    summary = run(options)
    for line in summary.lines():
        print(line)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="armillary", description="armillary physics simulation")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("plugins", help="list installed plugins and what they provide")
    p.add_argument("-v", "--verbose", action="store_true", help="also list every solver and scene with its summary")
    p.set_defaults(func=_cmd_plugins)

    p = sub.add_parser("run", help="simulate a demo scene or a model file")
    p.add_argument("model_file", nargs="?", help="model file (format chosen by suffix); default: a demo scene")
    p.add_argument("--scene", default=None, help="built-in or plugin demo scene (default: falling_shapes)")
    p.add_argument("--solver", default=None, help="solver class name, e.g. SolverXPBD (default: first suitable)")
    p.add_argument("--frames", type=int, default=None, help="frames to simulate (default: the scene's)")
    p.add_argument("--substeps", type=int, default=None, help="solver steps per frame (default: the scene's)")
    p.add_argument("--dt", type=float, default=None, help="solver time step in seconds (default: the scene's)")
    p.add_argument("--worlds", type=int, default=1, help="number of replicated worlds (default 1)")
    p.add_argument("--out", default="trajectory.npz", help="trajectory file (.npz, numpy.load-able)")
    p.add_argument("--usd", default=None, metavar="FILE",
                   help="also write the trajectory as a USD stage (.usda/.usdc/.usd) with time-sampled body "
                        "transforms that usdview plays (needs armillary-importer-usd)")  # fmt: skip
    p.add_argument("--device", default=None, help="Warp device (default: Warp's default device)")
    p.add_argument("--mesh-collision", default="sdf", choices=("sdf", "mesh", "convex_hull"),
                   help="how a model file's triangle-mesh shapes collide: 'sdf' (default) builds a 64-voxel SDF "
                        "per mesh (cached in $ARMILLARY_CACHE or ~/.cache/armillary), 'mesh' uses the meshes' BVHs "
                        "only, 'convex_hull' replaces them by convex hulls (what MuJoCo does)")  # fmt: skip
    g = p.add_mutually_exclusive_group()
    g.add_argument("--progress", dest="progress", action="store_true", default=None, help="always show progress")
    g.add_argument("--no-progress", dest="progress", action="store_false", help="never show progress")
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("features", help="per-solver feature table (Markdown)")
    p.set_defaults(func=_cmd_features)

    p = sub.add_parser("docs", help="regenerate the generated documentation pages")
    p.add_argument("directory", nargs="?", default="docs", help="output folder (default: docs)")
    p.add_argument("--check", action="store_true", help="only check that the pages are up to date")
    p.set_defaults(func=_cmd_docs)
    return parser


def _format_warning(message, category, filename, lineno, line=None) -> str:
    """Warnings as one line each (importers warn per unsupported element), without source context."""
    return f"armillary: warning: {message}\n"


def main(argv: list[str] | None = None) -> int:
    import warnings

    parser = build_parser()
    args = parser.parse_args(argv)
    warnings.formatwarning = _format_warning
    try:
        return args.func(args)
    except CliError as exc:
        print(f"armillary: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("armillary: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())

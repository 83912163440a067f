"""The ``armillary`` command line.

``armillary plugins``
    installed plugins, their versions, what each provides and any load error.
``armillary run [MODEL_FILE] [--scene NAME] [--solver NAME] [--frames N | --seconds S] [--out FILE] [--usd FILE]``
    simulate a built-in demo scene (default ``falling_shapes``) or a model
    file (through the importer registered for its suffix) with any installed
    solver; prints a summary (with a warning line per suspicious outcome) and
    writes the trajectory (``.npz``; with ``--usd`` also a USD stage of
    time-sampled body transforms for usdview).
``armillary run ... --video FILE.mp4|FILE.gif [--video-size WxH] --rerun --rerun-save FILE.rrd``
    also render an offscreen video of the run, show it live in Rerun, or save a Rerun recording
    (see docs/viewer.md).
``armillary plot TRAJECTORY.npz [--out FIG.png] [--bodies NAME ...]`` / ``armillary plot SWEEP_DIR``
    energy, contact count, body heights and coupling residuals over time (matplotlib); a sweep
    output folder is plotted by ``armillary.sweep.plot.plot_study``.
``armillary sweep STUDY.toml --out DIR [--backend local|ray] [--address ADDR] [--quick]``
    run a parameter study (scenes x solvers x parameters) in worker processes or on a Ray
    cluster, one tidy results table, resumable (see docs/sweep.md).
``armillary warmup [--device DEV] [--plugin NAME] [-j N]``
    compile the kernels of core and of every installed plugin (or of the
    named ones) into Warp's cache (once, after installing; ``scripts/setup.sh``
    runs it), so that the first run starts within seconds.
``armillary features [--markdown]``
    the per-solver feature table generated from the solvers' declarations
    (aligned text; ``--markdown``: the Markdown table of the README).
``armillary docs [--check] [DIR]``
    regenerate (or check) the generated documentation pages.

Errors (unknown solver, unreadable file, a failure inside the simulation, ...)
print one line and exit with status 2, without a traceback; ``--traceback``
(or ``ARMILLARY_DEBUG=1``) also prints the traceback of the original exception.
"""

from __future__ import annotations

import argparse
import os
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

    table = feature_table_markdown()
    print(table if args.markdown else markdown_table_as_text(table))
    return 0


def markdown_table_as_text(markdown: str) -> str:
    """The Markdown tables in ``markdown`` as aligned plain-text columns (other lines unchanged)."""
    lines = markdown.rstrip("\n").split("\n")
    out, block = [], []

    def flush():
        if not block:
            return
        rows = [[c.strip().replace("`", "") for c in line.strip().strip("|").split("|")] for line in block]
        rows = [r for r in rows if not all(set(c) <= set("-: ") for c in r)]  # the |---| separator
        widths = [max(len(r[i]) for r in rows if i < len(r)) for i in range(max(len(r) for r in rows))]
        for k, r in enumerate(rows):
            out.append("  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip())
            if k == 0:
                out.append("  ".join("-" * w for w in widths))
        block.clear()

    for line in lines:
        if line.lstrip().startswith("|"):
            block.append(line)
            continue
        flush()
        out.append(line.replace("`", ""))
    flush()
    return "\n".join(out) + "\n"


def _cmd_warmup(args) -> int:
    from .runner import warmup

    devices = args.device or ["cpu"]
    if args.jobs is not None and args.jobs < 1:
        raise CliError(f"--jobs must be at least 1, got {args.jobs}")

    def log(line):
        print(f"armillary warmup: {line}", flush=True)

    report = warmup(devices, plugins=args.plugin, max_workers=args.jobs, log=log)
    print(f"armillary warmup: {len(report.compiled)} modules compiled, {len(report.cached)} already cached, "
          f"{len(report.failed)} failed, in {report.seconds:.1f} s (cache: {report.cache_dir})")
    if report.failed:
        names = ", ".join(sorted(report.failed))
        raise CliError(f"warmup: {len(report.failed)} kernel modules failed to compile ({names}); they will "
                       "compile on first use instead (run again with --traceback to see why)")
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
        seconds=args.seconds,
        video=args.video,
        video_size=args.video_size,
        rerun=args.rerun,
        rerun_save=args.rerun_save,
    )
    summary = run(options)
    for line in summary.lines():
        print(line)
    return 0


def _size(text: str) -> tuple[int, int]:
    """``WIDTHxHEIGHT`` -> (width, height)."""
    try:
        w, h = (int(v) for v in str(text).lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT in pixels (e.g. 640x360), got {text!r}") from None
    return w, h


def _cmd_plot(args) -> int:
    from .plot import PlotError, plot

    try:
        out = plot(args.path, args.out, bodies=args.bodies)
    except PlotError as exc:
        raise CliError(str(exc)) from exc
    print(f"plot: {out}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="armillary", description="armillary physics simulation")
    parser.add_argument("--traceback", action="store_true", default=False,
                        help="on an error, also print the full traceback (or set ARMILLARY_DEBUG=1)")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--traceback", action="store_true", default=argparse.SUPPRESS,
                        help="on an error, also print the full traceback (or set ARMILLARY_DEBUG=1)")
    sub = parser.add_subparsers(dest="command", required=True)

    def add_parser(name, **kwargs):
        return sub.add_parser(name, parents=[common], **kwargs)

    p = add_parser("plugins", help="list installed plugins and what they provide")
    p.add_argument("-v", "--verbose", action="store_true", help="also list every solver and scene with its summary")
    p.set_defaults(func=_cmd_plugins)

    p = add_parser("run", help="simulate a demo scene or a model file")
    p.add_argument("model_file", nargs="?", help="model file (format chosen by suffix); default: a demo scene")
    p.add_argument("--scene", default=None, help="built-in or plugin demo scene (default: falling_shapes)")
    p.add_argument("--solver", default=None, help="solver class name, e.g. SolverXPBD (default: first suitable)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--frames", type=int, default=None,
                   help="frames to simulate; the simulated time is then frames x substeps x dt (default: as many as "
                        "the scene's duration takes)")  # fmt: skip
    g.add_argument("--seconds", type=float, default=None,
                   help="simulated duration in seconds; frames = seconds / (substeps x dt), rounded up (default: the "
                        "scene's duration)")  # fmt: skip
    p.add_argument("--substeps", type=int, default=None, help="solver steps per frame (default: the scene's)")
    p.add_argument("--dt", type=float, default=None,
                   help="solver time step in seconds (default: the scene's); without --frames the run keeps its "
                        "duration (more or fewer frames)")  # fmt: skip
    p.add_argument("--worlds", type=int, default=1, help="number of replicated worlds (default 1)")
    p.add_argument("--out", default="trajectory.npz", help="trajectory file (.npz, numpy.load-able)")
    p.add_argument("--usd", default=None, metavar="FILE",
                   help="also write the trajectory as a USD stage (.usda/.usdc/.usd) with time-sampled body "
                        "transforms that usdview plays (needs armillary-importer-usd)")  # fmt: skip
    p.add_argument("--video", default=None, metavar="FILE",
                   help="also render the run offscreen into a video (.mp4 or .gif; one frame per simulated frame, "
                        "3/4 view framing the whole trajectory; needs: pip install 'armillary[video]')")  # fmt: skip
    p.add_argument("--video-size", default=(640, 360), type=_size, metavar="WxH",
                   help="video frame size in pixels (default 640x360)")
    p.add_argument("--rerun", action="store_true", default=False,
                   help="show the run live in a spawned Rerun viewer (needs: pip install 'armillary[rerun]')")
    p.add_argument("--rerun-save", default=None, metavar="FILE",
                   help="write the run as a Rerun recording (.rrd; open it with: rerun FILE); with --rerun, both")
    p.add_argument("--device", default=None, help="Warp device, e.g. cpu or cuda:0 (default: Warp's default device)")
    p.add_argument("--mesh-collision", default="sdf", choices=("sdf", "mesh", "convex_hull"),
                   help="how a model file's triangle-mesh shapes collide: 'sdf' (default) builds a 64-voxel SDF "
                        "per mesh (cached in $ARMILLARY_CACHE or ~/.cache/armillary), 'mesh' uses the meshes' BVHs "
                        "only, 'convex_hull' replaces them by convex hulls (what MuJoCo does)")  # fmt: skip
    g = p.add_mutually_exclusive_group()
    g.add_argument("--progress", dest="progress", action="store_true", default=None, help="always show progress")
    g.add_argument("--no-progress", dest="progress", action="store_false", help="never show progress")
    p.set_defaults(func=_cmd_run)

    p = add_parser("plot", help="plot a trajectory .npz (energy, contacts, heights, coupling residuals) or a sweep")
    p.add_argument("path", help="trajectory file written by `armillary run` (.npz), or a sweep output folder "
                                "(with results.csv or results.parquet)")  # fmt: skip
    p.add_argument("--out", default=None, metavar="FILE",
                   help="image file (.png, .pdf, .svg; default: the input's name with .png)")
    p.add_argument("--bodies", nargs="+", default=None, metavar="NAME",
                   help="bodies whose heights to plot: names (as in body_names) or indices (default: up to 8, "
                        "the ones that move most)")  # fmt: skip
    p.set_defaults(func=_cmd_plot)

    p = add_parser("warmup", help="compile every installed plugin's kernels into Warp's cache (once)")
    p.add_argument("--device", action="append", default=None,
                   help="Warp device to compile for (repeatable; default: cpu)")
    p.add_argument("--plugin", action="append", default=None, metavar="NAME",
                   help="only this plugin's kernels (entry-point name as `armillary plugins` lists it; repeatable; "
                        "default: core and every loaded plugin)")  # fmt: skip
    p.add_argument("-j", "--jobs", type=int, default=None, help="modules compiled in parallel (default: up to 4)")
    p.set_defaults(func=_cmd_warmup)

    p = add_parser("features", help="per-solver feature table")
    p.add_argument("--markdown", action="store_true", help="print the Markdown table (as in the README)")
    p.set_defaults(func=_cmd_features)

    p = add_parser("docs", help="regenerate the generated documentation pages")
    p.add_argument("directory", nargs="?", default="docs", help="output folder (default: docs)")
    p.add_argument("--check", action="store_true", help="only check that the pages are up to date")
    p.set_defaults(func=_cmd_docs)

    from .sweep.cli import add_sweep_parser

    add_sweep_parser(sub, common)
    return parser


def _format_warning(message, category, filename, lineno, line=None) -> str:
    """Warnings as one line each (importers warn per unsupported element), without source context."""
    return f"armillary: warning: {message}\n"


def _debug_requested(args) -> bool:
    return bool(getattr(args, "traceback", False)) or os.environ.get("ARMILLARY_DEBUG", "").strip() not in ("", "0")


def main(argv: list[str] | None = None) -> int:
    import traceback
    import warnings

    parser = build_parser()
    args = parser.parse_args(argv)
    warnings.formatwarning = _format_warning
    try:
        return args.func(args)
    except CliError as exc:
        if _debug_requested(args) and exc.__cause__ is not None:
            traceback.print_exception(exc.__cause__, file=sys.stderr)
        print(f"armillary: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("armillary: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug outside the run's own checks: still one line unless asked for more
        if _debug_requested(args):
            traceback.print_exception(exc, file=sys.stderr)
        text = str(exc).strip().splitlines()
        print(f"armillary: error: {args.command}: unexpected {type(exc).__name__}: {text[0] if text else ''}; "
              "this is probably a bug: run again with --traceback (or ARMILLARY_DEBUG=1) for the full traceback "
              "and report it", file=sys.stderr)  # fmt: skip
        return 2


if __name__ == "__main__":
    raise SystemExit(main())

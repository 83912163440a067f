"""``armillary sweep STUDY.toml --out DIR [--backend local|ray] [--address ...] [--quick] [--workers N]``.

Registered in :func:`armillary.cli.build_parser` through :func:`add_sweep_parser`.
"""

from __future__ import annotations

import argparse


def _cmd_sweep(args) -> int:
    from ..cli import CliError
    from .engine import run
    from .study import StudyError, load_study

    try:
        study = load_study(args.study)
        report = run(study, args.out, backend=args.backend, address=args.address, workers=args.workers,
                     quick=args.quick, progress=args.progress, retry_failed=args.retry_failed)
    except StudyError as exc:
        raise CliError(str(exc)) from exc
    for line in report.lines():
        print(line)
    return 0


def add_sweep_parser(sub, common) -> argparse.ArgumentParser:
    """Add the ``sweep`` sub-command to the sub-parsers ``sub`` (``common``: the shared parent parser)."""
    p = sub.add_parser("sweep", parents=[common], help="run a study: many runs of solvers and parameters, "
                                                       "locally or on Ray (docs/sweep.md)")
    p.add_argument("study", help="study file (.toml; schema in docs/sweep.md)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="output folder: results.parquet (or .csv), runs/*.npz, study.json (default: sweep_<name>); "
                        "runs already in it are skipped")  # fmt: skip
    p.add_argument("--backend", default="local", choices=("local", "ray"),
                   help="local processes (default) or Ray tasks")
    p.add_argument("--address", default=None,
                   help="Ray cluster: 'auto' (the running cluster) or 'ray://host:10001' (default: a new local Ray)")
    p.add_argument("--workers", type=int, default=None,
                   help="local worker processes (default: one per core; 1 runs in this process)")
    p.add_argument("--quick", action="store_true", help="a few short points of each configuration (smoke check)")
    p.add_argument("--retry-failed", action="store_true", help="run again the runs recorded as failed")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--progress", dest="progress", action="store_true", default=None, help="always show progress")
    g.add_argument("--no-progress", dest="progress", action="store_false", help="never show progress")
    p.set_defaults(func=_cmd_sweep)
    return p

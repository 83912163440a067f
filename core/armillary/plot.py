"""``armillary plot``: figures of a run's trajectory ``.npz`` (or of a sweep output folder).

A trajectory written by ``armillary run`` (or :class:`armillary.runner.TrajectoryRecorder`) gives one
figure with, top to bottom, the panels its file has data for:

* ``energy`` -- kinetic + gravitational potential energy [J] over time [s];
* ``contact count`` -- rigid contacts of each frame's last step;
* ``body heights`` -- the chosen bodies' origins along the up axis [m] (``--bodies``; default:
  up to 8 that move the most);
* ``coupling residuals per iteration (last frame)`` and ``coupling residuals at the last iteration``
  -- for coupled solvers, every ``diag_<name>`` array (ADMM ``primal_residual``,
  ``dual_residual``, ``joint_gap``, ...; proxy ``proxy_feedback_change``, ...), log scale.

A folder with ``results.csv`` or ``results.parquet`` is a sweep's output:
``armillary.sweep.plot.plot_study(path, out)`` draws it. Needs matplotlib (``pip install
'armillary[plot]'``); imported only here.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

__all__ = ["PlotError", "plot", "plot_trajectory"]

#: image types written (matplotlib's savefig formats we document)
SUFFIXES = (".png", ".pdf", ".svg")
MAX_DEFAULT_BODIES = 8
_SWEEP_FILES = ("results.csv", "results.parquet")


class PlotError(ValueError):
    """A user-facing plotting error (bad input file, missing package); one line."""


def _figure_class():
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise PlotError("armillary plot needs matplotlib: pip install 'armillary[plot]' (or pip install matplotlib)") \
            from exc  # fmt: skip
    return Figure


def _load(path: Path) -> dict:
    if not path.is_file():
        raise PlotError(f"cannot read {str(path)!r}: no such file")
    if path.suffix != ".npz":
        raise PlotError(f"{str(path)!r}: expected a trajectory .npz written by `armillary run` (or a sweep folder)")
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except (OSError, ValueError) as exc:
        raise PlotError(f"cannot read {str(path)!r} as a .npz file: {exc}") from exc
    missing = [k for k in ("time", "body_q") if k not in data]
    if missing:
        raise PlotError(f"{str(path)!r} is not an armillary trajectory: it has no {', '.join(missing)} array "
                        f"(it holds: {', '.join(sorted(data)) or 'nothing'})")  # fmt: skip
    return data


def _select_bodies(data: dict, bodies, up: int) -> list[int]:
    body_q = data["body_q"]
    nb = body_q.shape[1] if body_q.ndim == 3 else 0
    names = [str(n) for n in data.get("body_names", [])] or [f"body_{i}" for i in range(nb)]
    if bodies is None:
        if nb == 0:
            return []
        spread = np.ptp(body_q[:, :, up], axis=0)
        order = np.argsort(-spread, kind="stable")
        return sorted(int(i) for i in order[:MAX_DEFAULT_BODIES])
    chosen = []
    for b in bodies:
        text = str(b)
        if text in names:
            chosen.append(names.index(text))
        elif text.lstrip("-").isdigit() and -nb <= int(text) < nb:
            chosen.append(int(text) % nb)
        else:
            shown = ", ".join(repr(n) for n in names[:10]) + (f" ... ({nb} bodies)" if nb > 10 else "")
            raise PlotError(f"--bodies: no body {text!r} in the trajectory; bodies: {shown or 'none'} "
                            f"(or an index in 0..{nb - 1})")  # fmt: skip
    return list(dict.fromkeys(chosen))


def plot_trajectory(path, *, bodies=None):
    """A matplotlib ``Figure`` of the trajectory ``.npz`` at ``path`` (see the module documentation).

    ``bodies``: names (``body_names``) or indices of the bodies whose heights to draw.
    """
    Figure = _figure_class()
    data = _load(Path(path))
    t = np.asarray(data["time"], dtype=np.float64)
    up = int(data["up_axis"]) if "up_axis" in data else 2
    panels = []
    if "energy" in data:
        panels.append("energy")
    if "contact_count" in data:
        panels.append("contacts")
    chosen = _select_bodies(data, bodies, up)
    if chosen:
        panels.append("heights")
    diags = sorted(k for k in data if k.startswith("diag_") and np.asarray(data[k]).ndim == 2)
    diags = [k for k in diags if np.isfinite(data[k]).any()]
    if diags:
        panels += ["residual_iterations", "residual_frames"]
    if not panels:
        raise PlotError(f"{str(path)!r} holds nothing to plot (no energy, contact_count, bodies or diagnostics)")
    fig = Figure(figsize=(8.0, 2.6 * len(panels)), layout="constrained")
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    solver = str(data["solver"]) if "solver" in data else ""
    fig.suptitle(f"{Path(path).name}" + (f" ({solver})" if solver else ""))
    axis_name = "xyz"[up] if 0 <= up < 3 else str(up)
    names = [str(n) for n in data.get("body_names", [])]
    for ax, panel in zip(axes, panels):
        if panel == "energy":
            ax.plot(t, data["energy"], label="kinetic + potential")
            ax.set_title("energy")
            ax.set_ylabel("energy [J]")
        elif panel == "contacts":
            ax.step(t, data["contact_count"], where="post", label="rigid contacts")
            ax.set_title("contact count")
            ax.set_ylabel("contacts")
        elif panel == "heights":
            for i in chosen:
                ax.plot(t, data["body_q"][:, i, up], label=names[i] if i < len(names) else f"body_{i}")
            ax.set_title("body heights")
            ax.set_ylabel(f"origin {axis_name} [m]")
            if len(chosen) <= 12:
                ax.legend(fontsize="small", loc="best")
        elif panel == "residual_iterations":
            for k in diags:
                table = np.asarray(data[k], dtype=np.float64)
                rows = np.nonzero(np.isfinite(table).any(axis=1))[0]
                last = table[rows[-1]]
                it = np.arange(1, len(last) + 1)
                ax.semilogy(it, np.maximum(np.abs(last), 1e-16), marker=".", label=k[len("diag_"):])
            ax.set_title("coupling residuals per iteration (last frame)")
            ax.set_xlabel("iteration")
            ax.set_ylabel("residual [m, rad, N]")
            ax.legend(fontsize="small", loc="best")
            continue
        elif panel == "residual_frames":
            for k in diags:
                table = np.asarray(data[k], dtype=np.float64)
                final = np.array([r[np.isfinite(r)][-1] if np.isfinite(r).any() else np.nan for r in table])
                ax.semilogy(t, np.maximum(np.abs(final), 1e-16), label=k[len("diag_"):])
            ax.set_title("coupling residuals at the last iteration")
            ax.set_ylabel("residual [m, rad, N]")
            ax.legend(fontsize="small", loc="best")
        ax.set_xlabel("time [s]")
        ax.grid(True, alpha=0.3)
    return fig


def _default_out(path: Path) -> Path:
    return path.with_suffix(".png") if path.suffix else path.parent / (path.name + ".png")


def plot(path, out=None, *, bodies=None) -> str:
    """Plot ``path`` (a trajectory ``.npz`` or a sweep folder) into ``out`` (default: ``path`` with
    ``.png``; for a sweep folder, what ``plot_study`` writes by default); returns the file(s) written."""
    src = Path(os.fspath(path))
    if src.is_dir():
        if not any((src / name).is_file() for name in _SWEEP_FILES):
            raise PlotError(f"{str(src)!r} is a folder without {' or '.join(_SWEEP_FILES)}: give a trajectory .npz "
                            "or a sweep output folder")  # fmt: skip
        try:
            from .sweep.plot import plot_study
        except ImportError as exc:
            raise PlotError(f"{str(src)!r} is a sweep output folder, but armillary.sweep is not available "
                            f"({exc}); plot a trajectory .npz instead") from exc  # fmt: skip
        try:
            result = plot_study(str(src), None if out is None else str(out))
        except (FileNotFoundError, ImportError, ValueError) as exc:
            raise PlotError(f"{str(src)!r}: {exc}") from exc
        if isinstance(result, (list, tuple)):
            return ", ".join(str(r) for r in result)
        return str(result) if result is not None else str(out if out is not None else src)
    target = Path(os.fspath(out)) if out is not None else _default_out(src)
    if target.suffix.lower() not in SUFFIXES:
        raise PlotError(f"--out must name a {', '.join(SUFFIXES)} file, got {str(target)!r}")
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise PlotError(f"--out {str(target)!r}: folder {str(folder)!r} does not exist")
    fig = plot_trajectory(src, bodies=bodies)
    try:
        fig.savefig(target, dpi=100)
    except OSError as exc:
        raise PlotError(f"cannot write {str(target)!r}: {exc.strerror or exc}") from exc
    return str(target)

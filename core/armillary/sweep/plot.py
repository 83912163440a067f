"""The standard figures of a study (matplotlib, optional extra ``plot``).

:func:`plot_study` reads a study folder written by :func:`armillary.sweep.run` and draws:

* ``error_vs_iterations.png``: per configuration, ``error_max`` (distance to the scene's reference
  run [m], solid) and ``joint_gap_max`` [m] (dashed) against the iteration parameter
  (``coupler.iterations`` when present), one line per combination of the other varied parameters;
* ``residuals_per_step.png``: the last ADMM iteration's primal residual of every step [m] for the
  runs with the most iterations of each configuration (runs measured with ``residuals``);
* ``speed_vs_accuracy.png``: ``steps_per_second`` against ``error_max``, one colour per configuration.

A figure whose data the study did not measure is not drawn (the returned list says which were).
With ``out`` naming an image file, every panel goes into that one figure (what ``armillary plot
SWEEP_DIR`` draws).
"""

from __future__ import annotations

import math
import os

import numpy as np

from .engine import read_table

ITERATION_KEYS = ("coupler.iterations", "iterations")


def _pyplot():
    try:
        import matplotlib
    except ImportError as exc:
        raise ImportError("plotting a study needs matplotlib: pip install 'armillary[plot]' "
                          "(or pip install matplotlib)") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _runs(rows: list[dict]) -> dict:
    """run id -> {"config", "params", "status", values by measure}."""
    base = {"run_id", "config", "scene", "reference", "batch", "status", "error", "measure", "value"}
    runs = {}
    for r in rows:
        run = runs.setdefault(r["run_id"], {"config": r["config"], "scene": r["scene"], "reference": r["reference"],
                                            "status": r["status"], "values": {},
                                            "params": {k: v for k, v in r.items() if k not in base and v is not None}})
        run["values"][r["measure"]] = r["value"]
    return runs


def _label(params: dict, keys: list) -> str:
    return ", ".join(f"{k.split('.')[-1]}={params.get(k)!s}" for k in keys) or "all"


def _positive(v) -> float:
    return v if v is not None and math.isfinite(v) and v > 0 else float("nan")


def _error_panel(ax, runs, cfg, it_key):
    rs = [r for r in runs.values() if r["config"] == cfg and it_key in r["params"] and not r["reference"]]
    varied = sorted(k for k in {k for r in rs for k in r["params"]} - {it_key}
                    if len({str(r["params"].get(k)) for r in rs}) > 1)
    groups = {}
    for r in rs:
        groups.setdefault(tuple(str(r["params"].get(k)) for k in varied), []).append(r)
    import matplotlib.pyplot as plt

    for i, (_, members) in enumerate(sorted(groups.items())):
        members.sort(key=lambda r: r["params"][it_key])
        x = [r["params"][it_key] for r in members]
        color = plt.cm.viridis(i / max(1, len(groups) - 1))
        lab = _label(members[0]["params"], varied)
        if any("error_max" in r["values"] for r in members):
            ax.loglog(x, [_positive(r["values"].get("error_max")) for r in members], "o-", color=color,
                      label=lab, lw=1.2, ms=3)
        if any("joint_gap_max" in r["values"] for r in members):
            ax.loglog(x, [_positive(r["values"].get("joint_gap_max")) for r in members], "^--", color=color, lw=0.8,
                      ms=3, alpha=0.7)
    ax.set_title(f"{cfg}: error (solid), joint gap (dashed)", fontsize=9)
    ax.set_xlabel(it_key)
    ax.set_ylabel("max distance to reference / max gap [m]", fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    if len(groups) <= 16:
        ax.legend(fontsize=5, ncol=2 if len(groups) > 6 else 1)


def _residual_series(path, runs, configs, it_key):
    """Per configuration, the runs whose other varied parameters are at their first values, one per
    iteration count: ``(config, iterations, primal residual of the last iteration per step)``."""
    series = []
    for cfg in configs:
        rs = [(rid, r) for rid, r in runs.items() if r["config"] == cfg and not r["reference"]
              and "primal_residual_last" in r["values"]]  # fmt: skip
        if not rs:
            continue
        others = sorted({k for _, r in rs for k in r["params"]} - {it_key, "seed"})
        first = {k: sorted({str(r["params"].get(k)) for _, r in rs})[0] for k in others}
        for rid, r in sorted(rs, key=lambda x: x[1]["params"].get(it_key, 0)):
            if any(str(r["params"].get(k)) != first[k] for k in others):
                continue
            f = os.path.join(path, "runs", f"{rid}.npz")
            if os.path.exists(f):
                with np.load(f) as z:
                    if "primal_residual" in z:
                        series.append((cfg, r["params"].get(it_key), z["primal_residual"][:, -1].copy()))
    return series


def _residual_panel(ax, series):
    import matplotlib.pyplot as plt

    styles = ["-", "--", ":", "-."]
    cfgs = list(dict.fromkeys(c for c, _, _ in series))
    its = sorted({k for _, k, _ in series if k is not None})
    for cfg, k, y in series:
        color = plt.cm.plasma(its.index(k) / max(1, len(its) - 1)) if k in its else "k"
        ax.semilogy(np.arange(1, len(y) + 1), np.where(y > 0, y, np.nan), styles[cfgs.index(cfg) % 4], lw=0.7,
                    color=color, label=f"{cfg}, {k} it.")
    ax.set_xlabel("step")
    ax.set_ylabel("primal residual after the last iteration [m]", fontsize=8)
    ax.set_title("residuals per step (other parameters at their first values)", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=5, ncol=2)


def _speed_panel(ax, pts, configs):
    import matplotlib.pyplot as plt

    for i, cfg in enumerate(configs):
        xs = [_positive(e) for c, s, e in pts if c == cfg]
        ys = [_positive(s) for c, s, e in pts if c == cfg]
        if xs:
            ax.loglog(xs, ys, "o", ms=4, alpha=0.8, color=plt.cm.tab10(i % 10), label=cfg)
    ax.set_xlabel("max distance to reference [m]")
    ax.set_ylabel("steps per second")
    ax.set_title("speed vs accuracy", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)


def plot_study(path: str | os.PathLike, out: str | os.PathLike | None = None, *, dpi: int = 110):
    """Draw the standard figures of the study folder ``path``.

    ``out`` a folder (default: ``path``): one PNG per figure there, returns the list of paths written.
    ``out`` a file (``.png``, ``.svg``, ``.pdf``): every panel in that one figure, returns its path.
    Raises ``FileNotFoundError`` without a table, ``ImportError`` without matplotlib, ``ValueError``
    when the study measured nothing to plot."""
    plt = _pyplot()
    path = str(path)
    out = str(out or path)
    runs = _runs(read_table(path))
    configs = sorted({r["config"] for r in runs.values() if not r["reference"]})
    it_key = next((k for k in ITERATION_KEYS if any(k in r["params"] for r in runs.values())), None)
    err_cfgs = []
    if it_key and any("error_max" in r["values"] or "joint_gap_max" in r["values"] for r in runs.values()):
        err_cfgs = [c for c in configs if any(r["config"] == c and it_key in r["params"] for r in runs.values())]
    series = _residual_series(path, runs, configs, it_key)
    pts = [(r["config"], r["values"].get("steps_per_second"), r["values"].get("error_max")) for r in runs.values()
           if not r["reference"] and "steps_per_second" in r["values"] and "error_max" in r["values"]]
    panels = [("error_vs_iterations", lambda ax, c=c: _error_panel(ax, runs, c, it_key)) for c in err_cfgs]
    if series:
        panels.append(("residuals_per_step", lambda ax: _residual_panel(ax, series)))
    if pts:
        panels.append(("speed_vs_accuracy", lambda ax: _speed_panel(ax, pts, configs)))
    if not panels:
        raise ValueError(f"study {path!r}: nothing to plot (measure error, joint_gap, residuals or speed)")
    if os.path.splitext(out)[1].lower() in (".png", ".svg", ".pdf"):
        cols = min(3, len(panels))
        rows = -(-len(panels) // cols)
        fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 4.0 * rows), squeeze=False)
        for ax, (_, draw) in zip(axes.flat, panels):
            draw(ax)
        for ax in list(axes.flat)[len(panels):]:
            ax.set_visible(False)
        fig.tight_layout()
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        fig.savefig(out, dpi=dpi)
        plt.close(fig)
        return out
    os.makedirs(out, exist_ok=True)
    written = []
    if err_cfgs:
        fig, axes = plt.subplots(1, len(err_cfgs), figsize=(5.2 * len(err_cfgs), 4.2), squeeze=False)
        for ax, (_, draw) in zip(axes[0], panels[:len(err_cfgs)]):
            draw(ax)
        fig.tight_layout()
        written.append(os.path.join(out, "error_vs_iterations.png"))
        fig.savefig(written[-1], dpi=dpi)
        plt.close(fig)
    for name, draw in panels[len(err_cfgs):]:
        fig, ax = plt.subplots(figsize=(6.5, 4.2))
        draw(ax)
        fig.tight_layout()
        written.append(os.path.join(out, f"{name}.png"))
        fig.savefig(written[-1], dpi=dpi)
        plt.close(fig)
    return written

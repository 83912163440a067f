"""``armillary sweep``: studies of many runs (solvers, coupled entries, parameters), locally or on Ray.

``armillary.sweep.run(study, out)`` runs a :class:`Study` (or a TOML study file, read by
:func:`load_study`) and writes a tidy table of measures, the runs' arrays and a copy of the study
into ``out``; ``armillary.sweep.plot.plot_study(out)`` draws the standard figures. The schema,
backends, resuming, batching and outputs are in ``docs/sweep.md``.

Importing this package loads no Warp kernels, plugin, Ray, pyarrow or matplotlib.
"""

from __future__ import annotations

from .engine import SweepReport, compare_tables, read_journal, read_table, run, table_path
from .study import MEASURES, Study, StudyError, load_study

__all__ = ["MEASURES", "Study", "StudyError", "SweepReport", "compare_tables", "load_study", "read_journal",
           "read_table", "run", "table_path"]

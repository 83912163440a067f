"""The plugin README's code example runs and drapes the cloth on the sphere."""

from __future__ import annotations

import pathlib
import re

import numpy as np


def test_readme_example_runs_and_drapes():
    text = (pathlib.Path(__file__).parents[1] / "README.md").read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    ns: dict = {}
    exec(compile(code, "README.md", "exec"), ns)
    q = ns["s0"].particle_q.numpy()
    assert np.isfinite(q).all()
    r = np.linalg.norm(q, axis=1)
    assert r.min() > 0.4 + 0.02 - 5.0e-3  # no particle deeper than 5 mm into the sphere (radius 0.02)
    assert q[:, 2].min() < 0.2  # the cloth hangs down around the sphere

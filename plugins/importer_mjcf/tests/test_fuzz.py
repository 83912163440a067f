"""Seeded mutation fuzzing of the corpus MJCF models, MuJoCo's compiler as the oracle (see ``_mjcf_fuzz``).

Every variant must give a clean ``MJCFImportError`` naming the file, line and element and leave the
builder unchanged, or import into a model that finalizes with finite arrays and stays finite for 20
solver steps with collision; whatever MuJoCo rejects must be rejected. CI runs 60 variants
(``ARMILLARY_FUZZ_N`` sets another count, ``ARMILLARY_FUZZ_SEED`` the first seed).
"""

from __future__ import annotations

import os

import pytest

from _mjcf_fuzz import problems, run, summary
from _mjcf_helpers import mjcf_models

pytest.importorskip("mujoco")
pytestmark = pytest.mark.skipif(not mjcf_models(), reason="shared asset corpus not available")

N = int(os.environ.get("ARMILLARY_FUZZ_N", "60"))
FIRST = int(os.environ.get("ARMILLARY_FUZZ_SEED", "0"))


def test_mutated_corpus_models_are_rejected_cleanly_or_simulate(tmp_path):
    import warp as wp

    wp.config.quiet = True
    results = run(N, str(tmp_path), FIRST)
    bad = [(r, problems(r)) for r in results if problems(r)]
    report = summary(results)
    print(report)
    assert not bad, report + "\n" + "\n".join(
        f"seed {r.seed} {r.model} {r.mutations}: {p}" for r, p in bad[:10])  # fmt: skip
    # the mutations reach both outcomes
    assert any(r.ours_ok for r in results) and any(not r.ours_ok for r in results), report

"""Seeded structural mutations of the corpus URDF robots (see ``_urdf_mutations``).

Every variant must either raise a ``URDFImportError`` that names the file, the line and the
element (matching what the mutation calls for) and leave the populated builder unchanged, or
import, finalize with finite arrays and run 20 steps with collision to a finite state. Never a
raw Python exception, never a hang.

CI runs ``ARMILLARY_FUZZ_N`` variants (default 45: every mutation kind at least once);
``ARMILLARY_FUZZ_N=400`` is the long run, ``ARMILLARY_FUZZ_REPORT=path.json`` writes a summary.
"""

from __future__ import annotations

import json
import os
import re
import signal
import warnings
from collections import Counter

import numpy as np
import pytest
import warp as wp
from _urdf_helpers import MODELS, model_root
from _urdf_mutations import MUTATIONS, NotApplicable, mutate

import armillary as newton
from armillary.plugins import get_registry
from armillary_importer_urdf.importer import URDFImportError

pytestmark = pytest.mark.skipif(not MODELS, reason="shared asset corpus not found")

N = int(os.environ.get("ARMILLARY_FUZZ_N", "45"))
# every kind once, then more of the ones with many targets (numbers) and of combinations
KINDS = sorted(MUTATIONS) + ["combo", "garbage_number", "garbage_number", "garbage_number", "combo"]
NAMES = sorted(MODELS)
TEXT = {name: path.read_text() for name, path in MODELS.items()}
TIME_LIMIT_S = 120  # per variant; a hang fails the test instead of blocking the run
RESULTS: list[dict] = []


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    path = os.environ.get("ARMILLARY_FUZZ_REPORT")
    if path:
        summary = {
            "variants": len(RESULTS),
            "outcomes": dict(Counter(r["outcome"] for r in RESULTS)),
            "by_kind": {k: dict(Counter(r["outcome"] for r in RESULTS if r["kind"] == k)) for k in sorted(set(KINDS))},
            "results": RESULTS,
        }
        with open(path, "w") as f:
            json.dump(summary, f, indent=1)


def _variant(i: int):
    """Variant ``i``: mutation kind ``i % len(KINDS)`` on a model that has a target for it."""
    kind = KINDS[i % len(KINDS)]
    for k in range(len(NAMES)):
        name = NAMES[(i // len(KINDS) + i + k) % len(NAMES)]
        try:
            return name, mutate(TEXT[name], seed=1000 + i, kind=kind)
        except NotApplicable:
            continue
    pytest.skip(f"no corpus model has a target for {kind}")


def _populated_builder():
    """A builder with content of its own: ground plane and a free sphere."""
    b = newton.ModelBuilder()
    b.add_ground_plane()
    body = b.add_body(xform=wp.transform((5.0, 5.0, 1.0), wp.quat_identity()), label="existing_ball")
    b.add_shape_sphere(body, radius=0.1)
    return b


def _fingerprint(b) -> dict:
    """Every container of the builder by length (and last element), every scalar by value."""
    out = {}
    for k, v in vars(b).items():
        if isinstance(v, (list, tuple)):
            out[k] = (len(v), repr(v[-1:]))
        elif isinstance(v, dict):
            out[k] = (len(v), repr(sorted(map(repr, v))))
        elif isinstance(v, set):
            out[k] = len(v)
        elif isinstance(v, (int, float, str, bool)) or v is None:
            out[k] = v
    for key, attr in getattr(b, "custom_attributes", {}).items():
        out[f"custom:{key}"] = len(attr.values) if attr.values is not None else None
    return out


def _assert_model_finite(model, where: str) -> None:
    for name, arr in vars(model).items():
        scalar = getattr(getattr(arr, "dtype", None), "_wp_scalar_type_", getattr(arr, "dtype", None))
        if isinstance(arr, wp.array) and arr.size and scalar in (wp.float16, wp.float32, wp.float64):
            a = arr.numpy()
            if name.startswith("joint_limit") or name.endswith(("_limit", "effort_limit", "velocity_limit")):
                a = a[~np.isinf(a)]  # unlimited joints/effort/velocity are +-inf by design
            assert np.all(np.isfinite(a)), f"{where}: model.{name} has non-finite values"


def _simulate(model, solver_name: str, where: str, steps: int = 20) -> None:
    solver = get_registry().solvers.resolve(solver_name)(model)
    s0, s1, ctrl = model.state(), model.state(), model.control()
    for _ in range(steps):
        contacts = model.collide(s0)
        s0.clear_forces()
        solver.step(s0, s1, ctrl, contacts, 1.0 / 600.0)
        s0, s1 = s1, s0
    for arr in ("body_q", "body_qd", "joint_q", "joint_qd"):
        a = getattr(s0, arr, None)
        if a is not None and a.size:
            assert np.all(np.isfinite(a.numpy())), f"{where}: state.{arr} non-finite after {steps} steps"


def _on_alarm(signum, frame):
    raise TimeoutError(f"variant ran longer than {TIME_LIMIT_S} s")


@pytest.mark.parametrize("i", range(N))
def test_mutated_corpus_file(i, tmp_path):
    name, v = _variant(i)
    path = tmp_path / f"{name}_{i}_{v.kind}.urdf"
    path.write_text(v.text)
    rng = np.random.default_rng(i)
    opts = dict(
        package_dirs=[str(model_root(name))],
        floating=True if name == "solo12" else None,
        enable_self_collisions=False,  # keeps each variant's 20 steps cheap
        collapse_fixed_joints=bool(rng.random() < 0.25),
        joint_ordering=["dfs", "bfs", None][int(rng.integers(3))],
    )
    where = f"variant {i} ({name}, {v.kind}: {v.what}; options {opts})"
    b = _populated_builder()
    before = _fingerprint(b)
    record = {"i": i, "model": name, "kind": v.kind, "what": v.what, "expect": v.expect}
    alarm = hasattr(signal, "SIGALRM")  # POSIX; elsewhere a hang blocks instead of failing
    if alarm:
        old = signal.signal(signal.SIGALRM, _on_alarm)
        signal.alarm(TIME_LIMIT_S)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                b.add_urdf(str(path), **opts)
            except URDFImportError as exc:
                record["outcome"] = "rejected"
                record["message"] = str(exc)
                RESULTS.append(record)
                msg = str(exc)
                assert exc.file == str(path) and str(path) in msg, f"{where}: error does not name the file: {msg}"
                assert exc.line is not None and exc.element, f"{where}: error lacks line or element: {msg}"
                assert _fingerprint(b) == before, f"{where}: rejected import changed the builder"
                assert v.expect != "accept", f"{where}: should have been accepted, got: {msg}"
                if v.pattern:
                    assert re.search(v.pattern, msg), f"{where}: error does not match {v.pattern!r}: {msg}"
                return
            record["outcome"] = "accepted"
            RESULTS.append(record)
            assert v.expect != "reject", f"{where}: accepted, but should be rejected ({v.pattern})"
            model = b.finalize(device="cpu")
            _assert_model_finite(model, where)
            # the 20 steps without the visual shapes (no mass, no contacts; they only slow the
            # collision pipeline down): the same file imported again with hide_visuals
            sim = _populated_builder()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                sim.add_urdf(str(path), hide_visuals=True, **opts)
            _simulate(sim.finalize(device="cpu"), "SolverFeatherstone", where)
    finally:
        if alarm:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)

"""Corrupted stages: every outcome is a clean import with finite values or a clear error, never a crash.

Each case mutates a real stage's text (a number becomes NaN/inf/negative/huge, a line disappears, a
relationship targets a missing prim, a token gets an invalid value, the file is cut short) and imports
it into a builder that already holds a body. Allowed outcomes: the import succeeds and every imported
number that must be finite is finite (and the model finalizes), or a ValueError / FileNotFoundError /
NotImplementedError is raised whose message names a prim path or the file, and the builder is unchanged.
``ARMILLARY_USD_FUZZ_CASES=1500`` runs more cases per robot (1500 each passed when this was written).
"""

import math
import os
import random
import re
import warnings

import numpy as np
import pytest

import armillary

from armillary.testing.assets import corpus_file

_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e-?\d+)?(?![\w.])")
_TARGET = re.compile(r"</[\w/]+>")
_TOKEN = re.compile(r'= "(\w+)"')
_BAD_NUMBERS = ("nan", "inf", "-inf", "-1", "0", "1e30", "-1e-30", "-0.5")
_FINITE_ARRAYS = ("body_q", "body_mass", "body_inertia", "body_com", "joint_X_p", "joint_X_c", "joint_axis",
                  "shape_transform", "shape_scale", "joint_q", "joint_armature", "joint_target_ke",
                  "joint_target_kd", "shape_material_mu")  # fmt: skip


def _sources():
    return {"cartpole": corpus_file("usd/cartpole_usd/cartpole.usda").read_text(),
            "humanoid": corpus_file("usd/humanoid_usd/humanoid.usda").read_text()}  # fmt: skip


def _mutate(text: str, rng: random.Random) -> tuple[str, str]:
    kind = rng.choice(["number", "number", "number", "line", "target", "token", "truncate"])
    if kind == "number":
        spans = [m.span() for m in _NUMBER.finditer(text)]
        a, b = rng.choice(spans)
        new = rng.choice(_BAD_NUMBERS)
        return text[:a] + new + text[b:], f"number {text[a:b]!r} -> {new} at {a}"
    if kind == "line":
        lines = text.splitlines()
        i = rng.randrange(len(lines))
        return "\n".join(lines[:i] + lines[i + 1:]), f"line {i} removed: {lines[i].strip()!r}"
    if kind == "target":
        spans = [m.span() for m in _TARGET.finditer(text)]
        if not spans:
            return text, "no target"
        a, b = rng.choice(spans)
        return text[:a] + "</does/not/exist>" + text[b:], f"target {text[a:b]} -> </does/not/exist>"
    if kind == "token":
        spans = [m.span(1) for m in _TOKEN.finditer(text)]
        if not spans:
            return text, "no token"
        a, b = rng.choice(spans)
        return text[:a] + "Q" + text[b:], f"token {text[a:b]!r} -> 'Q'"
    cut = rng.randrange(len(text) // 4, len(text))
    return text[:cut], f"truncated at {cut}"


def _snapshot(builder):
    return (builder.body_count, builder.joint_count, builder.shape_count, builder.articulation_count,
            len(builder.shape_collision_filter_pairs), len(builder.custom_attributes))  # fmt: skip


@pytest.mark.parametrize("robot", ["cartpole", "humanoid"])
def test_fuzzed_stages_import_cleanly_or_fail_clearly(robot, tmp_path):
    text = _sources()[robot]
    rng = random.Random(f"usd-fuzz-{robot}")
    outcomes = {"imported": 0, "error": 0}
    for case in range(int(os.environ.get("ARMILLARY_USD_FUZZ_CASES", 60 if robot == "cartpole" else 30))):
        mutated, what = _mutate(text, rng)
        path = tmp_path / f"{robot}_{case}.usda"
        path.write_text(mutated)
        builder = armillary.ModelBuilder()
        body = builder.add_body(mass=1.0)
        builder.add_shape_sphere(body, radius=0.1)
        before = _snapshot(builder)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                builder.add_usd(str(path))
        except (ValueError, FileNotFoundError, NotImplementedError) as e:
            message = str(e)
            assert "/" in message or path.name in message, f"case {case} ({what}): error names no prim: {message}"
            assert _snapshot(builder) == before, f"case {case} ({what}): builder changed by a failed import"
            outcomes["error"] += 1
            continue
        except Exception as e:  # pragma: no cover - the failure this test exists to catch
            pytest.fail(f"case {case} ({what}): unexpected {type(e).__name__}: {e}")
        for name in _FINITE_ARRAYS:
            values = np.asarray(getattr(builder, name), dtype=np.float64)
            assert np.all(np.isfinite(values)), f"case {case} ({what}): {name} is not finite after import"
        for lo, hi in zip(builder.joint_limit_lower, builder.joint_limit_upper):
            assert not (math.isnan(lo) or math.isnan(hi)), f"case {case} ({what}): NaN joint limit"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                builder.finalize()  # a topology the mutation broke (orphan joints) is a clear ValueError here
            except ValueError as e:
                assert "/" in str(e), f"case {case} ({what}): finalize error names no prim: {e}"
        outcomes["imported"] += 1
    # the mutations must exercise both outcomes, or the test proves nothing
    assert outcomes["imported"] > 0 and outcomes["error"] > 0, outcomes

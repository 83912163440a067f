"""Randomly corrupted and truncated asset files raise only clean URDFImportErrors naming the file."""

from __future__ import annotations

import warnings

import pytest
from _urdf_helpers import MODELS, model_root
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import armillary as newton
from armillary_importer_urdf.importer import URDFImportError

pytestmark = pytest.mark.skipif(not MODELS, reason="shared asset corpus not found")

_TEXT = {name: path.read_bytes() for name, path in MODELS.items()}
_NAMES = sorted(_TEXT)
_SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _try(tmp_path_factory, name: str, data: bytes):
    path = tmp_path_factory.mktemp("fuzz") / f"{name}_corrupt.urdf"
    path.write_bytes(data)
    b = newton.ModelBuilder()
    before = (b.body_count, b.joint_count, b.shape_count, sorted(b.custom_attributes))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            b.add_urdf(str(path), package_dirs=[str(model_root(name))])
        except URDFImportError as exc:
            assert str(path) in str(exc)
            assert (b.body_count, b.joint_count, b.shape_count, sorted(b.custom_attributes)) == before
            return
    b.finalize(device="cpu")  # what imports must also finalize


@_SETTINGS
@given(name=st.sampled_from(_NAMES), data=st.data())
def test_corrupted_files(tmp_path_factory, name, data):
    raw = bytearray(_TEXT[name])
    n_edits = data.draw(st.integers(1, 6))
    for _ in range(n_edits):
        pos = data.draw(st.integers(0, len(raw) - 1))
        kind = data.draw(st.sampled_from(["replace", "delete", "insert"]))
        ch = data.draw(st.sampled_from(list(b'<>/="\' -.0123456789eanx\x00\xff')))
        if kind == "replace":
            raw[pos] = ch
        elif kind == "delete":
            del raw[pos]
        else:
            raw.insert(pos, ch)
    _try(tmp_path_factory, name, bytes(raw))


@_SETTINGS
@given(name=st.sampled_from(_NAMES), frac=st.floats(0.0, 1.0))
def test_truncated_files(tmp_path_factory, name, frac):
    raw = _TEXT[name]
    _try(tmp_path_factory, name, raw[: int(len(raw) * frac)])


@_SETTINGS
@given(name=st.sampled_from(_NAMES), data=st.data())
def test_corrupted_attribute_values(tmp_path_factory, name, data):
    """Numbers replaced by garbage / NaN / negative values (the XML stays well formed)."""
    text = _TEXT[name].decode()
    import re as _re  # only to pick positions of numbers in the *test input*, not to parse XML

    spots = [m.span() for m in _re.finditer(r"-?\d+(\.\d+)?(e-?\d+)?", text)]
    k = data.draw(st.integers(1, 4))
    for _ in range(k):
        a, b = spots[data.draw(st.integers(0, len(spots) - 1))]
        repl = data.draw(st.sampled_from(["nan", "-1", "inf", "", "1e400", "abc", "0", "1 2"]))
        text = text[:a] + repl + text[b:]
        spots = [m.span() for m in _re.finditer(r"-?\d+(\.\d+)?(e-?\d+)?", text)]
    _try(tmp_path_factory, name, text.encode())

"""Bad input raises clean exceptions naming the file, line and element, and leaves the builder untouched;
hypothesis fuzzing of corrupted and truncated asset files."""

from __future__ import annotations

import os
import shutil
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import armillary
from _mjcf_helpers import mjcf_models
from armillary_importer_mjcf.importer import MJCFFileNotFoundError, MJCFImportError, MJCFImportWarning


def _snapshot(b):
    return (b.body_count, b.joint_count, b.shape_count, b.articulation_count, len(b.joint_q), b.gravity,
            len(b.shape_collision_filter_pairs), {k: dict(v.values) if isinstance(v.values, dict) else list(v.values)
                                                   for k, v in b.custom_attributes.items()})  # fmt: skip


def _builder():
    b = armillary.ModelBuilder()
    root = b.add_body(mass=1.0, label="existing")
    b.add_shape_sphere(root, radius=0.1)
    return b


def _raises(xml_or_path, match, cls=MJCFImportError, **kw):
    b = _builder()
    before = _snapshot(b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MJCFImportWarning)
        with pytest.raises(cls, match=match) as ei:
            b.add_mjcf(xml_or_path, **kw)
    assert _snapshot(b) == before, "the builder was modified by a failed import"
    return ei.value


def test_malformed_xml_names_file_and_line(tmp_path):
    f = tmp_path / "bad.xml"
    f.write_text("<mujoco>\n<worldbody>\n<body name='a'>\n</worldbody>\n</mujoco>\n")
    e = _raises(str(f), r"bad\.xml:line 4")
    assert e.line == 4 and e.file == str(f)


def test_unknown_joint_type_names_element_and_line(tmp_path):
    f = tmp_path / "m.xml"
    f.write_text("<mujoco><worldbody>\n<body name='a'><geom size='0.1'/>\n<joint type='screw'/></body></worldbody></mujoco>")
    e = _raises(str(f), r"m\.xml:line 3: <joint> unknown joint type 'screw'")
    assert e.element == "joint"


@pytest.mark.parametrize("attr", ['mass="-1"', 'mass="nan"'])
def test_negative_or_nan_mass(attr):
    xml = f"<mujoco><worldbody><body name='a'><joint/><inertial pos='0 0 0' {attr} diaginertia='1 1 1'/></body></worldbody></mujoco>"
    _raises(xml, r"<string>:line 1: <inertial>")
    _raises(f"<mujoco><worldbody><body name='a'><joint/><geom size='0.1' {attr}/></body></worldbody></mujoco>", "<geom>")


def test_missing_mesh_file_is_an_error(tmp_path):
    f = tmp_path / "m.xml"
    f.write_text("<mujoco><asset><mesh name='x' file='nope.stl'/></asset><worldbody><body name='a'><joint/>"
                 "<geom type='mesh' mesh='x'/></body></worldbody></mujoco>")  # fmt: skip
    e = _raises(str(f), "nope.stl", MJCFFileNotFoundError)
    assert isinstance(e, FileNotFoundError) and isinstance(e, ValueError)


def test_missing_include_and_missing_model(tmp_path):
    f = tmp_path / "m.xml"
    f.write_text("<mujoco>\n<include file='other.xml'/></mujoco>")
    e = _raises(str(f), r"m\.xml:line 2: <include> include file not found", MJCFFileNotFoundError)
    assert "other.xml" in str(e)
    _raises(str(tmp_path / "absent.xml"), "absent.xml", FileNotFoundError)


def test_include_cycle(tmp_path):
    (tmp_path / "a.xml").write_text("<mujoco><include file='b.xml'/></mujoco>")
    (tmp_path / "b.xml").write_text("<mujoco><include file='a.xml'/></mujoco>")
    _raises(str(tmp_path / "a.xml"), "include cycle")


def test_failure_late_in_the_file_leaves_nothing_behind():
    xml = """<mujoco><worldbody><body name="a"><joint/><geom size="0.1"/></body>
      <body name="b"><joint/><geom size="0.1"/></body></worldbody>
      <equality><connect body1="a" body2="missing" anchor="0 0 0"/></equality></mujoco>"""
    _raises(xml, "unknown body 'missing'")


def test_misc_invalid_values():
    _raises("<mujoco><worldbody><body><joint axis='0 0 0'/></body></worldbody></mujoco>", "axis has zero length")
    _raises("<mujoco><worldbody><body><geom type='box' size='1 -1 1'/></body></worldbody></mujoco>", "positive size")
    _raises("<mujoco><worldbody><body><joint range='1 0'/></body></worldbody></mujoco>", "range lower")
    _raises("<mujoco><worldbody><body><geom class='nope' size='1'/></body></worldbody></mujoco>", "unknown default class")
    _raises("<mujoco><worldbody><body name='x'/><body name='x'/></worldbody></mujoco>", "used twice")
    _raises("<robot/>", "root element must be <mujoco>")
    _raises("<mujoco><worldbody><body pos='1 2'/></worldbody></mujoco>", "needs 3 numbers")


# ---------------------------------------------------------------------------------------- fuzzing
_MODELS = mjcf_models()
_FUZZ = [n for n in ("cartpole", "cheetah", "ant", "pusher", "humanoid", "jaco_arm") if n in _MODELS]


@pytest.fixture(scope="module")
def fuzz_dirs(tmp_path_factory):
    out = {}
    for name in _FUZZ:
        src = os.path.dirname(_MODELS[name])
        dst = tmp_path_factory.mktemp(name)
        shutil.copytree(src, dst, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.npz"))
        main = os.path.join(dst, os.path.basename(_MODELS[name]))
        out[name] = (main, open(main, "rb").read())
    return out


_ops = st.one_of(
    st.tuples(st.just("truncate"), st.floats(0.0, 1.0), st.just(b"")),
    st.tuples(st.just("replace"), st.floats(0.0, 1.0), st.binary(min_size=1, max_size=12)),
    st.tuples(st.just("insert"), st.floats(0.0, 1.0), st.sampled_from([b"<", b">", b'"', b"/>", b"</body>", b"<body>",
                                                                       b"nan", b"-1", b"1e400", b" ", b"<joint type='x'/>",
                                                                       b"<include file='q.xml'/>", b"\x00", b"&bad;"])),
    st.tuples(st.just("delete"), st.floats(0.0, 1.0), st.integers(1, 200).map(lambda n: bytes(n))),
)


@pytest.mark.skipif(not _FUZZ, reason="shared asset corpus not available")
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(_FUZZ or ["none"]), ops=st.lists(_ops, min_size=1, max_size=3))
def test_fuzz_corrupted_files_raise_only_clean_exceptions(fuzz_dirs, name, ops):
    main, data = fuzz_dirs[name]
    for kind, frac, payload in ops:
        i = int(frac * len(data))
        if kind == "truncate":
            data = data[:i]
        elif kind == "replace":
            data = data[:i] + payload + data[i + len(payload):]
        elif kind == "insert":
            data = data[:i] + payload + data[i:]
        else:
            data = data[:i] + data[i + len(payload):]
    fuzz_file = os.path.join(os.path.dirname(main), "fuzzed.xml")
    with open(fuzz_file, "wb") as f:
        f.write(data)
    b = _builder()
    before = _snapshot(b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            b.add_mjcf(fuzz_file)
        except (ValueError, OSError) as e:
            assert "fuzzed.xml" in str(e) or (isinstance(e, OSError) and "q.xml" in str(e)) or os.path.dirname(main) in str(e), str(e)
            assert _snapshot(b) == before
            return
    assert b.body_count >= before[0]

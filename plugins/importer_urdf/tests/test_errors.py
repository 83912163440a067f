"""Bad input raises a clean URDFImportError naming file, line and element; nothing is added."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import armillary as newton
from armillary_importer_urdf.importer import URDFImportError, URDFImportWarning

INERTIAL = '<inertial><mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial>'


def urdf(body: str, name="r") -> str:
    return f'<?xml version="1.0"?>\n<robot name="{name}">\n{body}\n</robot>\n'


def two_links(joint_type="revolute", extra="", limit='<limit lower="-1" upper="1" effort="1" velocity="1"/>'):
    return urdf(
        f'<link name="a">{INERTIAL}</link>\n<link name="b">{INERTIAL}</link>\n'
        f'<joint name="j" type="{joint_type}"><parent link="a"/><child link="b"/>{limit}{extra}</joint>'
    )


def populated_builder():
    b = newton.ModelBuilder()
    body = b.add_body(mass=1.0, inertia=np.eye(3) * 0.1, label="existing")
    b.add_shape_sphere(body, radius=0.1)
    return b


def snapshot(b):
    return (b.body_count, b.joint_count, b.shape_count, b.articulation_count, b.joint_dof_count,
            list(b.body_label), len(b.shape_collision_filter_pairs))  # fmt: skip


def write(tmp_path, text, name="robot.urdf"):
    p = tmp_path / name
    p.write_text(text)
    return p


BAD = {
    "malformed": (urdf('<link name="a">\n<visual>\n</link>'), r"robot\.urdf:5.*malformed XML"),
    "unknown_joint_type": (two_links("ball"), r"robot\.urdf:5: <joint name='j'> unknown joint type 'ball'"),
    "child_twice": (
        urdf('<link name="a"/><link name="b"/><link name="c"/>\n'
             '<joint name="j1" type="fixed"><parent link="a"/><child link="c"/></joint>\n'
             '<joint name="j2" type="fixed"><parent link="b"/><child link="c"/></joint>'),  # fmt: skip
        r":5: <joint name='j2'> link 'c' is already the child of joint 'j1'",
    ),
    "cycle": (
        urdf('<link name="w"/><link name="a"/><link name="b"/>\n'
             '<joint name="j1" type="fixed"><parent link="a"/><child link="b"/></joint>\n'
             '<joint name="j2" type="fixed"><parent link="b"/><child link="a"/></joint>'),  # fmt: skip
        r"cycle",
    ),
    "nan_mass": (urdf('<link name="a"><inertial><mass value="nan"/></inertial></link>'), r":3: <mass> mass value='nan'"),
    "negative_mass": (urdf('<link name="a"><inertial><mass value="-2"/></inertial></link>'), r"<mass>.*>= 0"),
    "undefined_parent": (
        urdf('<link name="b"/>\n<joint name="j" type="fixed"><parent link="zz"/><child link="b"/></joint>'),
        r":4: <joint name='j'> parent link 'zz' is not defined",
    ),
    "undefined_child": (
        urdf('<link name="b"/>\n<joint name="j" type="fixed"><parent link="b"/><child link="zz"/></joint>'),
        r"child link 'zz' is not defined",
    ),
    "duplicate_link": (urdf('<link name="a"/>\n<link name="a"/>'), r":4: <link name='a'> link 'a' is defined twice"),
    "not_robot": ('<sdf version="1.6"><model name="m"/></sdf>', r"root element must be <robot>"),
    "bad_number": (urdf('<link name="a"><visual><geometry><box size="1 x 1"/></geometry></visual></link>'), r"<box>.*size"),
    "mimic_unknown": (two_links(extra='<mimic joint="nope"/>'), r":5: <mimic> of joint 'j' references joint 'nope', which is not defined"),
    "zero_axis": (two_links(extra='<axis xyz="0 0 0"/>'), r"<axis> joint axis .* zero length"),
    "inverted_limits": (two_links(limit='<limit lower="1" upper="-1" effort="1" velocity="1"/>'), r"<limit>.*greater"),
    "missing_mesh": (
        urdf('<link name="a"><collision><geometry><mesh filename="package://nopkg/m.stl"/></geometry></collision></link>'),
        r":3: <mesh> collision mesh 'package://nopkg/m.stl' not found",
    ),
    "empty": ("", r"malformed XML"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_clean_error_nothing_added(case, tmp_path):
    text, pattern = BAD[case]
    path = write(tmp_path, text)
    b = populated_builder()
    before = snapshot(b)
    with pytest.raises(URDFImportError) as err:
        b.add_urdf(str(path))
    msg = str(err.value)
    assert str(path) in msg
    assert re.search(pattern, msg), msg
    assert snapshot(b) == before
    assert isinstance(err.value, ValueError)


def test_error_from_string_names_string():
    with pytest.raises(URDFImportError, match=r"<string>:5: <joint name='j'> unknown joint type"):
        newton.ModelBuilder().add_urdf(two_links("screw"))


def test_missing_file():
    with pytest.raises(URDFImportError, match="no_such.urdf.*file not found"):
        newton.ModelBuilder().add_urdf("/tmp/no_such.urdf")


def test_missing_mesh_warn_mode(tmp_path):
    text = urdf(
        f'<link name="a">{INERTIAL}<collision><geometry><mesh filename="meshes/gone.stl"/></geometry></collision>'
        '<collision><geometry><mesh filename="package://nopkg/gone2.stl"/></geometry></collision>'
        '<collision><geometry><sphere radius="0.1"/></geometry></collision></link>'
    )
    path = write(tmp_path, text)
    b = newton.ModelBuilder()
    with pytest.warns(URDFImportWarning) as rec:
        b.add_urdf(str(path), missing_mesh="warn")
    msgs = [str(w.message) for w in rec if issubclass(w.category, URDFImportWarning)]
    assert len(msgs) == 2
    assert "gone.stl" in msgs[0] and "gone2.stl" in msgs[1]
    assert b.shape_count == 1
    with pytest.raises(ValueError, match="missing_mesh"):
        newton.ModelBuilder().add_urdf(str(path), missing_mesh="ignore")


def test_invalid_inertia_corrected_with_warning_valid_kept():
    bad = '<inertial><mass value="1"/><inertia ixx="1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial>'
    neg = '<inertial><mass value="1"/><inertia ixx="-1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial>'
    good = '<inertial><mass value="1"/><inertia ixx="0.15" iyy="0.1" izz="0.1" ixy="0.01" ixz="0" iyz="0"/></inertial>'
    text = urdf(
        f'<link name="good">{good}</link><link name="bad">{bad}</link><link name="neg">{neg}</link>'
        '<joint name="j1" type="fixed"><parent link="good"/><child link="bad"/></joint>'
        '<joint name="j2" type="fixed"><parent link="good"/><child link="neg"/></joint>'
    )
    b = newton.ModelBuilder()
    with pytest.warns(URDFImportWarning) as rec:
        b.add_urdf(text)
    msgs = [str(w.message) for w in rec]
    assert any("link 'bad'" in m for m in msgs) and any("link 'neg'" in m for m in msgs)
    assert not any("link 'good'" in m for m in msgs)
    np.testing.assert_allclose(np.asarray(b.body_inertia[0]).reshape(3, 3), [[0.15, 0.01, 0], [0.01, 0.1, 0], [0, 0, 0.1]], rtol=1e-6)
    for i in (1, 2):
        ev = np.sort(np.linalg.eigvalsh(np.asarray(b.body_inertia[i], dtype=np.float64).reshape(3, 3)))
        assert ev[0] >= -1e-7 and ev[2] <= ev[0] + ev[1] + 1e-6
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        b.finalize(device="cpu")  # nothing left for finalize to correct


def test_option_conflicts():
    b = newton.ModelBuilder()
    with pytest.raises(ValueError, match="mutually exclusive"):
        b.add_urdf(two_links(), floating=True, base_joint={"joint_type": newton.JointType.D6})
    body = b.add_body(mass=1.0, inertia=np.eye(3))
    with pytest.raises(ValueError, match="FREE"):
        b.add_urdf(two_links(), floating=True, parent_body=body)
    with pytest.raises(ValueError, match="joint_ordering"):
        b.add_urdf(two_links(), joint_ordering="random")
    with pytest.raises(ValueError, match="scale"):
        b.add_urdf(two_links(), scale=-1.0)
    assert b.joint_count == 1

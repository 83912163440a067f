"""Regression tests for what the mutation fuzzer (test_fuzz_mutations.py) found, one per defect.

Each bad file raises a URDFImportError naming the file, the line and the element, and leaves a
populated builder exactly as it was (custom attribute declarations included).
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import armillary as newton
from armillary_importer_urdf.importer import MAX_MAGNITUDE, URDFImportError

INERTIA = '<inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/>'
INERTIAL = f'<inertial><mass value="1"/>{INERTIA}</inertial>'
LIMIT = '<limit lower="-1" upper="1" effort="1" velocity="1"/>'


def urdf(body: str) -> str:
    return f'<?xml version="1.0"?>\n<robot name="r">\n{body}\n</robot>\n'


def two_links(jtype="revolute", joint_extra=LIMIT, b_extra="", origin=""):
    return urdf(
        f'<link name="a">{INERTIAL}</link>\n<link name="b">{INERTIAL}{b_extra}</link>\n'
        f'<joint name="j" type="{jtype}"><parent link="a"/><child link="b"/>{origin}\n{joint_extra}</joint>'
    )


def populated_builder():
    b = newton.ModelBuilder()
    b.add_ground_plane()
    body = b.add_body(mass=1.0, inertia=np.eye(3) * 0.1, label="existing")
    b.add_shape_sphere(body, radius=0.1)
    return b


def state_of(b) -> dict:
    """Every container of the builder by length, every scalar by value, custom declarations by key."""
    out = {k: len(v) for k, v in vars(b).items() if isinstance(v, (list, tuple, dict, set))}
    out.update({k: v for k, v in vars(b).items() if isinstance(v, (int, float, str, bool))})
    out["custom"] = sorted(getattr(b, "custom_attributes", {}))
    return out


def reject(tmp_path, text: str, pattern: str, builder=None, **kw) -> URDFImportError:
    path = tmp_path / "robot.urdf"
    path.write_text(text)
    b = builder if builder is not None else populated_builder()
    before = state_of(b)
    with pytest.raises(URDFImportError) as err:
        b.add_urdf(str(path), **kw)
    msg = str(err.value)
    assert err.value.file == str(path) and msg.startswith(f"URDF {path}:"), msg
    assert err.value.line is not None and err.value.element, msg
    assert re.search(pattern, msg), msg
    assert state_of(b) == before
    return err.value


def accept(text: str, **kw):
    b = newton.ModelBuilder()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to correct or skip in these files
        b.add_urdf(text, **kw)
    return b


# ---------------------------------------------------------------- the builder is left unchanged


def test_failed_import_declares_no_custom_attributes(tmp_path):
    """The plugins' custom attributes used to be declared on the caller's builder before parsing."""
    b = newton.ModelBuilder()
    reject(tmp_path, two_links("ball"), r"unknown joint type 'ball'", builder=b)
    assert not b.custom_attributes and not b.custom_frequencies
    b.add_urdf(two_links())  # a successful import still brings them (merged with the model)
    from armillary import plugins

    ref = newton.ModelBuilder()
    plugins.register_custom_attributes(ref)
    assert set(ref.custom_attributes) <= set(b.custom_attributes)


# ---------------------------------------------------------------- one root link


def test_unconnected_link_is_an_error_naming_it(tmp_path):
    text = two_links().replace("</robot>", '<link name="stray"/>\n</robot>')
    err = reject(tmp_path, text, r"<link name='stray'> link 'stray' is the child of no joint")
    assert err.line == 7 and "root link 'a'" in str(err) and "2 root links ('a', 'stray')" in str(err)


def test_deleted_joint_orphans_the_subtree(tmp_path):
    """a - j - b - k - c without k: c is a second root (it used to be fixed to the world silently)."""
    text = urdf(
        f'<link name="a">{INERTIAL}</link>\n<link name="b">{INERTIAL}</link>\n<link name="c">{INERTIAL}</link>\n'
        f'<link name="d">{INERTIAL}</link>\n'
        f'<joint name="j" type="fixed"><parent link="a"/><child link="b"/></joint>\n'
        f'<joint name="m" type="fixed"><parent link="c"/><child link="d"/></joint>'
    )
    # two trees of one joint each: the first in file order is the model, 'c' is named
    reject(tmp_path, text, r":5: <link name='c'> .*not connected to the root link 'a'")
    for kw in ({"floating": True}, {"base_joint": {"joint_type": newton.JointType.D6}}, {"collapse_fixed_joints": True}):
        reject(tmp_path, text, r"<link name='c'>", **kw)


def test_single_link_and_tree_still_import():
    b = accept(urdf(f'<link name="only">{INERTIAL}</link>'))
    assert b.body_count == 1 and b.articulation_count == 1
    b = accept(two_links())
    assert b.joint_label == ["fixed_base", "j"] and b.articulation_label == ["r"]


# ---------------------------------------------------------------- numbers


@pytest.mark.parametrize(
    "origin, pattern",
    [
        ('<origin rpy="0 0 -1e30"/>', r"<origin> attribute rpy='0 0 -1e30' is out of range.*1e\+06 rad"),
        ('<origin xyz="1e30 0 0"/>', r"<origin> attribute xyz='1e30 0 0' is out of range.*1e\+06 m"),
        ('<origin xyz="0 inf 0"/>', r"<origin> attribute xyz='0 inf 0' must be finite"),
        ('<origin rpy="nan 0 0"/>', r"<origin> attribute rpy='nan 0 0' must be finite"),
        ('<origin rpy="-1e30"/>', r"<origin> attribute rpy='-1e30' must have 3 number\(s\), got 1"),
        ('<origin xyz="1_0 0 0"/>', r"<origin> attribute xyz='1_0 0 0' is not a list of 3 numbers"),
    ],
)
def test_absurd_or_non_finite_origin(tmp_path, origin, pattern):
    reject(tmp_path, two_links(origin=origin), r":5: " + pattern)


def test_magnitude_limit_boundary_and_scale(tmp_path):
    b = accept(two_links(origin=f'<origin xyz="{MAX_MAGNITUDE:g} 0 0" rpy="{-MAX_MAGNITUDE:g} 0 0"/>'))
    assert b.joint_count == 2
    # the length limit is in metres: a file in millimetres (scale 1e-3) may write 1e8
    b = accept(two_links(origin='<origin xyz="1e8 0 0"/>'), scale=1e-3)
    assert np.asarray(b.joint_X_p[1])[0] == pytest.approx(1e5)
    reject(tmp_path, two_links(origin='<origin xyz="1e8 0 0"/>'), r"xyz='1e8 0 0' is out of range")


@pytest.mark.parametrize(
    "b_extra, pattern",
    [
        ('<visual><geometry><box size="1 1e30 1"/></geometry></visual>', r"<box> attribute size=.*out of range"),
        ('<collision><geometry><sphere radius="1e7"/></geometry></collision>', r"<sphere> attribute radius=.*out of range"),
        ('<collision><geometry><cylinder radius="0.1" length="inf"/></geometry></collision>', r"<cylinder> .*length.*finite"),
        ('<collision><geometry><mesh filename="x.stl" scale="1 1 1e30"/></geometry></collision>', r"<mesh> attribute scale='1 1 1e30' is out of range: magnitudes above 1e\+06 are not"),
    ],
)  # fmt: skip
def test_absurd_sizes(tmp_path, b_extra, pattern):
    reject(tmp_path, two_links(b_extra=b_extra), pattern)


def test_absurd_mass_and_mimic(tmp_path):
    text = two_links().replace('<mass value="1"/>', '<mass value="1e30"/>', 1)
    reject(tmp_path, text, r":3: <mass> mass value='1e30' is out of range: masses above 1e\+06 kg")
    accept(two_links().replace('<mass value="1"/>', f'<mass value="{MAX_MAGNITUDE:g}"/>', 1))
    mimic = urdf(
        f'<link name="a">{INERTIAL}</link><link name="b">{INERTIAL}</link><link name="c">{INERTIAL}</link>\n'
        f'<joint name="j" type="revolute"><parent link="a"/><child link="b"/>{LIMIT}</joint>\n'
        f'<joint name="k" type="revolute"><parent link="a"/><child link="c"/>{LIMIT}\n'
        '<mimic joint="j" multiplier="-1e30"/></joint>'
    )
    reject(tmp_path, mimic, r":6: <mimic> attribute multiplier='-1e30' is out of range")


def test_axis_normalised_without_overflow():
    b = accept(two_links(joint_extra=LIMIT + '<axis xyz="1e200 1e200 0"/>'))
    np.testing.assert_allclose(np.asarray(b.joint_axis[0]), [2**-0.5, 2**-0.5, 0], rtol=1e-6)


# ---------------------------------------------------------------- <limit> and <dynamics>


@pytest.mark.parametrize(
    "jtype, extra, pattern",
    [
        ("fixed", '<limit lower="abc" upper="1" effort="1" velocity="1"/>', r"<limit> attribute lower='abc' is not a number"),
        ("fixed", '<dynamics damping="-1"/>', r"<dynamics> attribute damping='-1' must be >= 0$"),
        ("continuous", '<limit effort="-5" velocity="1"/>', r"<limit> attribute effort='-5' must be >= 0$"),
        ("floating", '<dynamics friction="nan"/>', r"<dynamics> attribute friction='nan' must be finite"),
        ("revolute", '<limit lower="inf" upper="inf" effort="1" velocity="1"/>', r"<limit> .*lower must be < inf"),
        ("prismatic", '<limit lower="-inf" upper="-inf" effort="1" velocity="1"/>', r"<limit> .*upper > -inf"),
    ],
)  # fmt: skip
def test_limit_and_dynamics_checked_on_every_joint_type(tmp_path, jtype, extra, pattern):
    reject(tmp_path, two_links(jtype, joint_extra=extra), r":6: " + pattern)


def test_unlimited_values_accepted():
    b = accept(two_links(joint_extra='<limit lower="-inf" upper="inf" effort="inf" velocity="inf"/>'))
    assert b.joint_limit_lower[0] == -np.inf and b.joint_limit_upper[0] == np.inf
    accept(two_links("fixed", joint_extra=f'<axis xyz="0 0 0"/>{LIMIT}'))  # <axis> is ignored on fixed joints


# ---------------------------------------------------------------- structure


@pytest.mark.parametrize(
    "text, pattern",
    [
        (two_links().replace('<mass value="1"/>', "", 1), r":3: <inertial> link 'a': <inertial> needs a <mass"),
        (two_links().replace(INERTIA, "", 1), r":3: <inertial> link 'a': <inertial> needs an <inertia"),
        (two_links().replace('ixz="0"', "", 1), r":3: <inertia> missing required attribute 'ixz'"),
        (two_links(joint_extra=LIMIT + '<axis xyz="1 0 0"/><axis xyz="0 1 0"/>'),
         r":6: <axis> second <axis> in <joint name='j'> \(the first is at line 6\); URDF allows one"),
        (two_links(joint_extra=LIMIT + "\n" + LIMIT), r":7: <limit> second <limit> in <joint name='j'>"),
        (two_links(b_extra=INERTIAL), r":4: <inertial> second <inertial> in <link name='b'>"),
        (two_links().replace("<mass value=\"1\"/>", '<mass value="1"/><mass value="2"/>', 1),
         r":3: <mass> second <mass> in <inertial>"),
        (two_links(b_extra='<collision><geometry><box size="1 1 1"/><sphere radius="1"/></geometry></collision>'),
         r":4: <geometry> holds 2 shape elements \(<box>, <sphere>\); URDF needs exactly one"),
        (two_links(b_extra="<visual><geometry/></visual>"), r":4: <geometry> holds 0 shape elements"),
    ],
    ids=["no_mass", "no_inertia", "no_ixz", "two_axes", "two_limits", "two_inertials", "two_masses", "two_shapes",
         "no_shape"],
)  # fmt: skip
def test_structure_errors(tmp_path, text, pattern):
    reject(tmp_path, text, pattern)


def test_several_visuals_and_collisions_allowed():
    shape = '<collision><geometry><sphere radius="0.1"/></geometry></collision>'
    b = accept(two_links(b_extra=shape * 3 + '<visual><geometry><box size="1 1 1"/></geometry></visual>' * 2))
    assert b.shape_count == 5


def test_unchecked_error_still_names_the_element(tmp_path, monkeypatch):
    """A failure inside the builder (a check the importer does not make) names the element too."""

    def boom(self, *a, **k):
        raise ValueError("rejected by the builder")

    monkeypatch.setattr(newton.ModelBuilder, "add_shape_sphere", boom)
    text = two_links(b_extra='<collision><geometry><sphere radius="0.1"/></geometry></collision>')
    err = reject(tmp_path, text, r":4: <sphere> ValueError: rejected by the builder", builder=newton.ModelBuilder())
    assert err.element == "<sphere>"


# ---------------------------------------------------------------- joints must move inertia

ZERO = '<inertial><mass value="0"/><inertia ixx="0" iyy="0" izz="0" ixy="0" ixz="0" iyz="0"/></inertial>'
POINT = '<inertial><mass value="1"/><inertia ixx="0" iyy="0" izz="0" ixy="0" ixz="0" iyz="0"/></inertial>'


def chain(b_inertial: str, jtype="continuous", c=None, ktype="continuous", axis="0 0 1") -> str:
    """a -j-> b (-k-> c, 1 m along x)."""
    body = f'<link name="a">{INERTIAL}</link>\n<link name="b">{b_inertial}</link>\n'
    if c is not None:
        body += f'<link name="c">{c}</link>\n'
    body += f'<joint name="j" type="{jtype}"><parent link="a"/><child link="b"/><axis xyz="{axis}"/>{LIMIT}</joint>'
    if c is not None:
        body += f'\n<joint name="k" type="{ktype}"><parent link="b"/><child link="c"/><origin xyz="1 0 0"/>{LIMIT}</joint>'
    return urdf(body)


@pytest.mark.parametrize(
    "text, pattern",
    [
        (chain(ZERO), r":5: <joint name='j'> joint 'j' \(continuous\) moves no inertia.*'b' \(total mass 0 kg\)"),
        (chain(""), r":5: <joint name='j'> joint 'j' \(continuous\) moves no inertia"),  # no <inertial>, no collision
        (chain(ZERO, "planar"), r"joint 'j' \(planar\) moves no inertia along at least one of its 3"),
        (chain(POINT, "revolute"), r"joint 'j' \(revolute\) moves no inertia"),  # a point mass on its own axis
        (chain(ZERO, c=ZERO), r"joint 'j' \(continuous\) moves no inertia.*'b' and the 1 link\(s\) below it"),
        (chain(INERTIAL, c=ZERO), r":7: <joint name='k'> joint 'k'"),
    ],
    ids=["massless_leaf", "no_inertial_no_collision", "planar", "point_mass_on_axis", "massless_subtree", "second_joint"],
)  # fmt: skip
def test_joint_moving_no_inertia_is_an_error(tmp_path, text, pattern):
    """MuJoCo: "mass and inertia of moving bodies must be larger than mjMINVAL"; the solvers went NaN."""
    reject(tmp_path, text, pattern)


def test_massless_link_moving_massive_links_accepted():
    """Massless dummy links are fine when they move links that have mass (e.g. a planar base as x/y/yaw joints)."""
    b = accept(chain(ZERO, c=INERTIAL))
    assert b.body_count == 3
    accept(chain(ZERO, c=INERTIAL, ktype="fixed"))
    off_axis = POINT.replace("<mass", '<origin xyz="0.5 0 0"/><mass')
    accept(chain(off_axis, "revolute"))  # a point mass 0.5 m from the axis has inertia about it
    shape = '<collision><geometry><sphere radius="0.1"/></geometry></collision>'
    b = accept(chain(shape))  # no <inertial>: mass from the collision geometry
    assert b.body_mass[1] > 0


def test_massless_floating_base_names_the_root(tmp_path):
    text = urdf(f'<link name="base">{ZERO}</link>')
    reject(tmp_path, text, r":3: <link name='base'> the base joint \('floating_base'\) of the root link", floating=True)
    accept(urdf(f'<link name="base">{ZERO}</link>'))  # fixed to the world: nothing moves

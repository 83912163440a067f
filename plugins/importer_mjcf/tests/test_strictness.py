"""The importer rejects what MuJoCo's compiler rejects: every case is checked against MuJoCo itself, and
every rejection is an ``MJCFImportError`` naming the file, the line and the element that leaves the
builder unchanged."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import armillary
from armillary_importer_mjcf import _schema
from armillary_importer_mjcf.importer import MJCFImportError, MJCFImportWarning

mujoco = pytest.importorskip("mujoco")


@pytest.fixture(autouse=True)
def _mujoco_log_in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # MuJoCo writes compiler warnings to ./MUJOCO_LOG.TXT


def _snapshot(b):
    return (b.body_count, b.joint_count, b.shape_count, b.articulation_count, len(b.joint_q), len(b.joint_qd),
            len(b.shape_collision_filter_pairs), sorted(b.custom_attributes), len(getattr(b, "mjcf_imports", [])))  # fmt: skip


def _builder():
    b = armillary.ModelBuilder()
    b.add_shape_sphere(b.add_body(mass=1.0, label="existing"), radius=0.1)
    return b


def _load(xml, **kw):
    b = armillary.ModelBuilder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MJCFImportWarning)
        b.add_mjcf(xml, **kw)
    return b


def _both_reject(xml: str, match: str, line: int | None = None, element: str | None = None) -> MJCFImportError:
    """MuJoCo rejects ``xml``; so do we, with ``match`` in the message, the line and element, nothing added."""
    with pytest.raises(Exception):  # noqa: B017 - MuJoCo raises ValueError
        mujoco.MjModel.from_xml_string(xml)
    b = _builder()
    before = _snapshot(b)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MJCFImportWarning)
        with pytest.raises(MJCFImportError, match=match) as ei:
            b.add_mjcf(xml)
    e = ei.value
    assert _snapshot(b) == before, "a failed import changed the builder"
    assert e.file == "<string>" and e.line is not None and e.element is not None, str(e)
    if line is not None:
        assert e.line == line, str(e)
    if element is not None:
        assert e.element == element, str(e)
    return e


def _both_accept(xml: str, **kw):
    mujoco.MjModel.from_xml_string(xml)
    return _load(xml, **kw)


BODY = """<mujoco>
  <asset><material name="m" rgba="1 0 0 1"/><texture name="t" builtin="checker" width="8" height="8"/></asset>
  <worldbody>
    <body name="a">
      <joint name="j"/>
      <geom name="g" size="0.1" {geom}/>
      <site name="s"/>
    </body>
    {extra}
  </worldbody>
  {tail}
</mujoco>"""


def _xml(geom="", extra="", tail=""):
    return BODY.format(geom=geom, extra=extra, tail=tail)


# ------------------------------------------------------------------------------------ duplicate names
@pytest.mark.parametrize("what, extra, tail", [
    ("body", '<body name="a"><joint/><geom size="0.1"/></body>', ""),
    ("joint", '<body name="b"><joint name="j"/><geom size="0.1"/></body>', ""),
    ("joint", '<body name="b"><freejoint name="j"/><geom size="0.1"/></body>', ""),
    ("geom", '<geom name="g" size="0.1"/>', ""),
    ("site", '<site name="s"/>', ""),
    ("camera", '<camera name="c"/><camera name="c"/>', ""),
    ("material", "", '<asset><material name="m"/></asset>'),
    ("texture", "", '<asset><texture name="t" builtin="flat" width="4" height="4"/></asset>'),
    ("mesh", "", '<asset><mesh name="x" vertex="0 0 0 1 0 0 0 1 0 0 0 1"/><mesh name="x" vertex="0 0 0 1 0 0 0 1 0 0 0 1"/></asset>'),
    ("tendon", "", '<tendon><fixed name="t"><joint joint="j" coef="1"/></fixed><fixed name="t"><joint joint="j" coef="2"/></fixed></tendon>'),
    ("actuator", "", '<actuator><motor name="u" joint="j"/><motor name="u" joint="j"/></actuator>'),
    ("sensor", "", '<sensor><jointpos name="q" joint="j"/><jointvel name="q" joint="j"/></sensor>'),
    ("equality constraint", '<body name="b"><joint name="k"/><geom size="0.1"/></body>',
     '<equality><joint name="e" joint1="j" joint2="k"/><joint name="e" joint1="k" joint2="j"/></equality>'),
])  # fmt: skip
def test_duplicate_names_per_namespace(what, extra, tail):
    e = _both_reject(_xml(extra=extra, tail=tail), rf"{what} name '\w' is used twice \(first at <string>:line \d+\)")
    assert e.line > 1


def test_names_of_different_namespaces_may_coincide():
    _both_accept(_xml(extra='<body name="g"><joint name="s"/><geom name="a" size="0.1"/><site name="j"/></body>'))


def test_dangling_reference_after_an_element_is_deleted():
    """A sensor and an actuator on a joint that is gone: MuJoCo rejects both."""
    base = _xml(tail='<actuator><motor joint="j"/></actuator><sensor><jointpos joint="j"/></sensor>')
    _both_accept(base)
    gone = base.replace('<joint name="j"/>', "")
    _both_reject(gone, r"<motor> unknown joint 'j' in joint")
    _both_reject(gone.replace('<motor joint="j"/>', ""), r"<jointpos> unknown joint 'j' in joint")


# ---------------------------------------------------------------------------------- unknown references
@pytest.mark.parametrize("geom, extra, tail, match", [
    ('material="nope"', "", "", r"<geom> unknown material 'nope' in material"),
    ('type="mesh" mesh="nope"', "", "", r"<geom> unknown mesh 'nope' in mesh"),
    ('class="nope"', "", "", r"<geom> unknown default class 'nope'"),
    ('class=""', "", "", r"<geom> unknown default class ''"),
    ("", '<site name="s2" material="nope"/>', "", r"<site> unknown material 'nope' in material"),
    ("", "", '<asset><material name="m2" texture="nope"/></asset>', r"<material> unknown texture 'nope' in texture"),
    ("", "", '<tendon><fixed><joint joint="nope" coef="1"/></fixed></tendon>', r"<joint> unknown joint 'nope' in joint"),
    ("", "", '<tendon><fixed><joint joint="j" coef="1"/><joint joint="j" coef="2"/></fixed></tendon>', r"joint 'j' is repeated"),
    ("", "", '<tendon><spatial><site site="s"/><site site="nope"/></spatial></tendon>', r"<site> unknown site 'nope' in site"),
    ("", '<site name="s2" pos="1 0 0"/>', '<tendon><spatial material="nope"><site site="s"/><site site="s2"/></spatial></tendon>',
     r"<spatial> unknown material 'nope'"),
    ("", "", '<sensor><touch site="nope"/></sensor>', r"<touch> unknown site 'nope' in site"),
    ("", "", '<sensor><framepos objtype="body" objname="nope"/></sensor>', r"<framepos> unknown body 'nope' in objname"),
    ("", "", '<sensor><jointpos joint=""/></sensor>', r"<jointpos> unknown joint '' in joint"),
    ("", "", '<actuator><motor tendon="nope"/></actuator>', r"<motor> unknown tendon 'nope' in tendon"),
    ("", "", '<actuator><motor site="nope"/></actuator>', r"<motor> unknown site 'nope' in site"),
    ("", "", "<actuator><motor/></actuator>", r"<motor> an actuator needs exactly one transmission target"),
    ("", "", '<equality><connect body1="a" body2="nope" anchor="0 0 0"/></equality>', r"<connect> unknown body 'nope' in body2"),
    ("", "", '<equality><weld site1="s" site2="nope"/></equality>', r"<weld> unknown site 'nope' in site2"),
    ("", "", '<equality><connect body1="a"/></equality>', r"<connect> needs site1 and site2, or body1 and anchor"),
    ("", "", '<equality><joint joint1="nope"/></equality>', r"<joint> unknown joint 'nope' in joint1"),
    ("", "", '<contact><pair geom1="g" geom2="nope"/></contact>', r"<pair> unknown geom 'nope' in geom2"),
    ("", "", '<contact><exclude body1="a" body2="nope"/></contact>', r"<exclude> unknown body 'nope' in body2"),
    ("", '<camera mode="targetbody" target="nope"/>', "", r"<camera> unknown body 'nope' in target"),
])  # fmt: skip
def test_unknown_references(geom, extra, tail, match):
    _both_reject(_xml(geom=geom, extra=extra, tail=tail), match)


def test_material_from_a_default_class_is_checked_at_the_use_site():
    xml = """<mujoco>
  <default>
    <default class="red">
      <geom material="nope"/>
    </default>
  </default>
  <worldbody><body name="a"><joint/><geom class="red" size="0.1"/></body></worldbody>
</mujoco>"""
    e = _both_reject(xml, r"unknown material 'nope' in material \(value set by <default class='red'> <geom> at "
                          r"<string>:line 4\)", line=7, element="geom")  # fmt: skip
    assert e.origin == ("<string>", 4, "geom")


# ------------------------------------------------------------------------------- attribute formats
@pytest.mark.parametrize("geom, match", [
    ('condim="inf"', r"<geom> attribute condim='inf' is not an integer; expected one integer"),
    ('conaffinity="-1e30"', r"<geom> attribute conaffinity='-1e30' is not an integer"),
    ('contype="2147483648"', r"attribute contype='2147483648' is out of the 32-bit integer range"),
    ('contype="1 2"', r"attribute contype='1 2' needs 1 integer, got 2"),
    ('condim="2"', r"<geom> invalid condim 2 \(MuJoCo allows 1, 3, 4 or 6\)"),
    ('group="1.5"', r"attribute group='1.5' is not an integer"),
    ('rgba="a b c d"', r"attribute rgba='a b c d' 'a' is not a number; expected exactly 4 numbers"),
    ('rgba="1 1 1"', r"attribute rgba='1 1 1' needs 4 numbers, got 3"),
    ('rgba="1 1 1 1e400"', r"'1e400' is too large"),
    ('rgba="1,1,1,1"', r"is not a number"),
    ('fitscale="abc"', r"attribute fitscale='abc' is not a number"),
    ('user="abc"', r"attribute user='abc' is not a number"),
    ('type="Sphere"', r"unknown geom type 'Sphere'; expected one of plane, .* \(case-sensitive\)"),
    ('fluidshape="x"', r"unknown geom fluidshape 'x'; expected one of none, ellipsoid"),
    ('shellinertia="1"', r"unknown geom shellinertia '1'; expected true or false"),
    ('foo="1"', r"<geom> unknown attribute 'foo'; <geom> accepts: adhesion, axisangle"),
    ('name2="y"', r"unknown attribute 'name2'"),
])  # fmt: skip
def test_attribute_formats_of_geoms(geom, match):
    _both_reject(_xml(geom=geom), match, line=6, element="geom")


@pytest.mark.parametrize("xml, match, element", [
    ('<mujoco><visual><global offwidth="abc"/></visual></mujoco>', r"attribute offwidth='abc' is not an integer", "global"),
    ('<mujoco><visual><quality shadowsize="1e30"/></visual></mujoco>', r"shadowsize='1e30' is not an integer", "quality"),
    ('<mujoco><visual><headlight diffuse="1 1"/></visual></mujoco>', r"diffuse='1 1' needs 3 numbers", "headlight"),
    ('<mujoco><asset><material name="m" rgba="x"/></asset></mujoco>', r"rgba='x' 'x'|rgba='x' is not a number", "material"),
    ('<mujoco><asset><material name="m" specular="1 2"/></asset></mujoco>', r"specular='1 2' needs 1 number", "material"),
    ('<mujoco><worldbody><light diffuse="a b c"/></worldbody></mujoco>', r"diffuse='a b c'", "light"),
    ('<mujoco><worldbody><camera fovy="abc"/></worldbody></mujoco>', r"fovy='abc' is not a number", "camera"),
    ('<mujoco><size njmax="1" nkey="x"/></mujoco>', r"nkey='x' is not an integer", "size"),
    ('<mujoco><option integrator="rk4"/></mujoco>', r"unknown option integrator 'rk4'; expected one of Euler, RK4", "option"),
    ('<mujoco><option><flag gravity="off"/></option></mujoco>', r"unknown flag gravity 'off'; expected one of disable, enable", "flag"),
    ('<mujoco><compiler angle="Degree"/></mujoco>', r"unknown compiler angle 'Degree'", "compiler"),
    ('<mujoco><worldbody><body mocap="1"/></worldbody></mujoco>', r"unknown body mocap '1'; expected true or false", "body"),
    ('<mujoco foo="1"/>', r"unknown attribute 'foo'", "mujoco"),
    ('<mujoco><worldbody><body foo="1"/></worldbody></mujoco>', r"unknown attribute 'foo'", "body"),
    ('<mujoco><worldbody><body><foo/></body></worldbody></mujoco>', r"<foo> is not an MJCF element allowed inside <body>", "foo"),
    ('<mujoco><foo/></mujoco>', r"<foo> is not an MJCF element allowed inside <mujoco>", "foo"),
    ('<mujoco><worldbody><body><composite type="grid" count="2 2 1"/></body></worldbody></mujoco>', r"<composite> is not", "composite"),
    ('<mujoco><worldbody><body><joint/><geom size="1"/><inertial pos="0 0 0" mass="1" diaginertia="1 1 1"/>'
     '<inertial pos="0 0 0" mass="1" diaginertia="1 1 1"/></body></worldbody></mujoco>', r"<inertial> appears more than once in <body>", "inertial"),
    ('<mujoco><option><flag/><flag/></option></mujoco>', r"<flag> appears more than once", "flag"),
    ('<mujoco><worldbody><body><joint/><inertial mass="1" diaginertia="1 1 1"/></body></worldbody></mujoco>', r"required attribute 'pos' is missing", "inertial"),
    ('<mujoco><sensor><touch/></sensor></mujoco>', r"required attribute 'site' is missing", "touch"),
])  # fmt: skip
def test_attribute_formats_elsewhere(xml, match, element):
    _both_reject(xml, match, element=element)


def test_errors_inside_a_default_class_point_at_the_default():
    xml = """<mujoco>
  <default>
    <default class="c">
      <geom condim="inf"/>
    </default>
  </default>
</mujoco>"""
    _both_reject(xml, r"<string>:line 4: <geom> in <default class='c'>: attribute condim='inf' is not an integer",
                 line=4, element="geom")  # fmt: skip
    _both_reject(xml.replace('condim="inf"', 'foo="1"'), r"<geom> in <default class='c'>: unknown attribute 'foo'", line=4)
    _both_reject(xml.replace("<geom", "<geom rgba='1 1 1 1'/><geom"),
                 r"<geom> in <default class='c'>: <geom> appears more than once in <default>")


def test_size_missing_because_of_a_default_type_names_the_default():
    xml = """<mujoco>
  <default>
    <default class="c">
      <geom type="box"/>
    </default>
  </default>
  <worldbody><body name="a"><joint/><geom class="c"/></body></worldbody>
</mujoco>"""
    e = _both_reject(xml, r"<geom> geom of type box needs 3 positive size value\(s\), got \[0.0, 0.0, 0.0\] "
                          r"\(value set by <default class='c'> <geom> at <string>:line 4\)", line=7)  # fmt: skip
    assert e.origin == ("<string>", 4, "geom")


def test_semantic_error_from_a_default_names_the_default_and_the_use_site():
    xml = """<mujoco>
  <default>
    <default class="c">
      <joint armature="-1"/>
    </default>
  </default>
  <worldbody><body name="a"><joint class="c"/><geom size="0.1"/></body></worldbody>
</mujoco>"""
    b = _builder()
    with pytest.raises(MJCFImportError, match=r"<string>:line 7: <joint> attribute armature=-1.0 must be >= 0.0 "
                                              r"\(value set by <default class='c'> <joint> at <string>:line 4\)") as ei:
        b.add_mjcf(xml)  # MuJoCo accepts a negative armature; we do not
    assert ei.value.origin == ("<string>", 4, "joint")


def test_number_syntax_follows_strtod():
    for good in ("1", "+1", ".5", "1.", "1e-3", "-inf", "infinity", "0x1p3", " 1  "):
        assert _schema.check_value("f", good) is None, good
    for bad in ("1,2", "1_0", "abc", "1abc", "1e400", "nan"):
        assert _schema.check_value("f", bad), bad
    for good in ("3", "+3", "03", "-2147483648", "2147483647"):
        assert _schema.check_value("i", good) is None, good
    for bad in ("3.0", "1e3", "0x10", "inf", "2147483648"):
        assert _schema.check_value("i", bad), bad


def test_nan_is_rejected_though_mujoco_only_warns():
    with pytest.raises(MJCFImportError, match=r"<geom> attribute rgba='nan 0 0 1' 'nan' is NaN"):
        _load(_xml(geom='rgba="nan 0 0 1"'))


def test_registered_custom_attributes_are_accepted_beyond_the_schema():
    from armillary.sim.custom_attributes import AttributeFrequency as F
    from armillary.sim.custom_attributes import CustomAttribute

    xml = _xml(geom='myfriction="0.7"')
    with pytest.raises(MJCFImportError, match="unknown attribute 'myfriction'"):
        _load(xml)
    b = armillary.ModelBuilder()
    b.add_custom_attribute(CustomAttribute(name="myfriction", frequency=F.SHAPE, dtype=float, default=0.0, namespace="t"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MJCFImportWarning)
        b.add_mjcf(xml)
    assert b.custom_attributes["t:myfriction"].values[0] == pytest.approx(0.7)


def test_schema_table_matches_mujocos_schema():
    """Element paths and attribute names are those of the installed MuJoCo's ``mj_printSchema``."""
    text = mujoco.mj_printSchema(False, False)
    theirs, stack, last = {}, [], None
    for line in text.splitlines():
        m = re.match(r"^( *)(\S+) \((.)\)\s*(.*)$", line)
        if m and len(m.group(1)) < 30:
            stack = stack[: len(m.group(1)) // 3] + [m.group(2).replace("(world)", "")]
            last = "/".join(stack)
            theirs[last] = (m.group(3), set(m.group(4).split()))
        elif line.strip():
            theirs[last][1].update(line.split())
    ours = {p: (n.unique, set(n.attrs)) for p, n in _schema._NODES.items() if not p.endswith(("/frame", "/replicate"))}
    assert set(ours) == set(theirs)
    for path, (mult, attrs) in theirs.items():
        assert ours[path][1] == attrs, path
        assert ours[path][0] == (mult == "?"), path


# --------------------------------------------------------------------------------- masses and inertia
@pytest.mark.parametrize("body", [
    '<body name="b"><joint/></body>',
    '<body name="b"><joint/><geom size="0.1" mass="0"/></body>',
    '<body name="b"><joint/><geom size="0.1" density="0"/></body>',
    '<body name="b"><joint/><geom size="0.1" group="6"/></body>',
    '<body name="b"><freejoint/><body><joint/><geom size="0.1"/></body></body>',
    '<body name="b"><joint/><inertial pos="0 0 0" mass="1e-16" diaginertia="1 1 1"/></body>',
    '<body name="b"><joint type="slide"/><inertial pos="0 0 0" mass="1" diaginertia="0 0 0"/></body>',
    '<body name="b"><joint/><inertial pos="0 0 0" mass="1" diaginertia="0 0 0"/><body pos="1 0 0">'
    '<inertial pos="0 0 0" mass="1" diaginertia="0 0 0"/></body></body>',
])  # fmt: skip
def test_massless_moving_body(body):
    e = _both_reject(f"<mujoco><worldbody>{body}</worldbody></mujoco>", r"body 'b' moves \(it has joints\) but has mass",
                     element="body")  # fmt: skip
    assert "MuJoCo needs both >= 1e-15" in str(e)


@pytest.mark.parametrize("body, compiler", [
    ('<body name="b"><joint/><body pos="1 0 0"><geom size="0.1"/></body></body>', ""),  # a welded child's mass
    ('<body name="b"><joint/><body><body><geom size="0.1"/></body></body></body>', ""),  # through a massless link
    ('<body name="b"><joint/><geom size="0.1" mass="0"/><geom size="0.1" pos="1 0 0"/></body>', ""),
    ('<body name="b"><geom size="0.1" mass="0"/></body>', ""),  # static
    ('<body name="b" mocap="true"><geom size="0.1" mass="0"/></body>', ""),
    ('<body name="b"><joint/></body>', '<compiler boundmass="1" boundinertia="1"/>'),
    ('<body name="b"><joint/><geom size="0.1" group="6"/><inertial pos="0 0 0" mass="2" diaginertia="1 1 1"/></body>',
     '<compiler inertiafromgeom="true"/>'),  # no geom in inertiagrouprange: the <inertial> stays
])  # fmt: skip
def test_bodies_mujoco_accepts(body, compiler):
    xml = f"<mujoco>{compiler}<worldbody>{body}</worldbody></mujoco>"
    b = _both_accept(xml)
    m = mujoco.MjModel.from_xml_string(xml)
    k = b.mjcf_imports[-1]["bodies"]["b"]
    assert b.body_mass[k] == pytest.approx(m.body_mass[1], rel=1e-9)


def test_massless_rule_does_not_apply_with_ignore_inertial_definitions():
    xml = '<mujoco><worldbody><body name="b"><joint/><inertial pos="0 0 0" mass="1" diaginertia="1 1 1"/></body></worldbody></mujoco>'
    b = _both_accept(xml, ignore_inertial_definitions=True)  # the body has no geom: massless when inertials are ignored
    assert b.body_mass[0] == 0.0


@pytest.mark.parametrize("inertial, match", [
    ('mass="1" diaginertia="1 1 2.000001"', r"violates the triangle inequality A \+ B >= C"),
    ('mass="1" fullinertia="1 1 1 2 0 0"', r"fullinertia .* must have positive eigenvalues"),
    ('mass="1" diaginertia="1 1 1" fullinertia="1 1 1 0 0 0"', r"gives both fullinertia and diaginertia"),
])  # fmt: skip
def test_invalid_inertials(inertial, match):
    _both_reject(f'<mujoco><worldbody><body name="b"><joint/><inertial pos="0 0 0" {inertial}/></body></worldbody></mujoco>',
                 match, element="inertial")  # fmt: skip


def test_balanceinertia_allows_a_triangle_violation():
    _both_accept('<mujoco><compiler balanceinertia="true"/><worldbody><body name="b"><joint/>'
                 '<inertial pos="0 0 0" mass="1" diaginertia="1 1 3"/></body></worldbody></mujoco>')  # fmt: skip


def test_plane_on_a_moving_body():
    _both_reject(_xml(extra='<body name="p"><joint/><geom size="0.1"/><body><geom type="plane" size="1 1 1"/></body></body>'),
                 r"plane geoms are only allowed in static bodies; body 'p_body3' moves", element="geom")  # fmt: skip
    _both_accept(_xml(extra='<body name="p"><geom type="plane" size="1 1 1"/></body>'))


def test_body_whose_mass_overflows_float32():
    with pytest.raises(MJCFImportError, match=r"<body> body 'a': mass .* exceeds the float32 range"):
        _load(_xml().replace('size="0.1" ', 'size="1e30" ', 1))


# ----------------------------------------------------------------------------------- control ranges
@pytest.mark.parametrize("motor, match", [
    ('ctrllimited="true" ctrlrange="1 -1"', r"ctrllimited='true' needs ctrlrange with lower < upper, got '1 -1'"),
    ('ctrllimited="true"', r"ctrllimited='true' needs ctrlrange with lower < upper, got None"),
    ('ctrlrange="inf"', r"attribute ctrlrange='inf' needs 2 numbers, got 1"),
    ('forcelimited="true" forcerange="0 0"', r"forcelimited='true' needs forcerange"),
])  # fmt: skip
def test_invalid_control_ranges(motor, match):
    _both_reject(_xml(tail=f'<actuator><motor joint="j" {motor}/></actuator>'), match, element="motor")


def test_infinite_control_range_is_no_effort_limit():
    b = _both_accept(_xml(tail='<actuator><motor joint="j" ctrllimited="true" ctrlrange="-inf inf"/></actuator>'))
    ref = _load(_xml())
    assert np.isfinite(b.joint_effort_limit[0]) and b.joint_effort_limit[0] == ref.joint_effort_limit[0]
    b = _both_accept(_xml().replace('<joint name="j"/>', '<joint name="j" range="-inf 1" limited="true"/>'))
    assert b.joint_limit_lower[0] == -1e10 and b.joint_limit_upper[0] == pytest.approx(1.0 * np.pi / 180)


# ------------------------------------------------------------------------------------------- assets
@pytest.mark.parametrize("asset, match", [
    ('<texture name="x" builtin="checker" width="0"/>', r"builtin texture needs a positive width"),
    ('<texture name="x" type="2d" builtin="checker" width="8"/>', r"builtin texture needs a positive height"),
    ('<texture name="x" type="2d"/>', r"2d texture needs builtin or file"),
    ('<texture builtin="checker" width="8"/>', r"a <texture> needs a name or a file"),
    ('<material name=""/>', r"a <material> needs a non-empty name"),
])  # fmt: skip
def test_invalid_assets(asset, match):
    _both_reject(f"<mujoco><asset>{asset}</asset></mujoco>", match)


def test_plane_needs_a_grid_spacing():
    _both_reject(_xml(extra='<geom type="plane" size="1 1"/>'), r"plane geom needs a positive third size value")
    _both_accept(_xml(extra='<geom type="plane" size="0 0 1"/>'))


def test_fromto_needs_an_elongated_type():
    _both_reject(_xml(extra='<geom fromto="0 0 0 0 0 1" size="0.1"/>'), r"fromto needs a geom of type capsule, cylinder, "
                                                                        r"box or ellipsoid, not sphere")  # fmt: skip
    _both_reject(_xml(extra='<site fromto="0 0 0 0 0 1" size="0.1"/>'), r"fromto needs a site of type capsule")


def test_user_values_bounded_by_size():
    xml = _xml(tail='<size nuser_jnt="2"/>').replace('<joint name="j"/>', '<joint name="j" user="1 2 3"/>')
    _both_reject(xml, r"<joint> user='1 2 3' has 3 values; <size nuser_jnt=\"2\"> allows 2")
    _both_accept(xml.replace('nuser_jnt="2"', 'nuser_jnt="3"'))


@pytest.mark.parametrize("xml, match", [
    ('<mujoco><custom><numeric name="a" data=""/></custom></mujoco>', r"<numeric> a custom numeric field needs a positive size"),
    ('<mujoco><custom><numeric name="a" size="2" data="1 2 3"/></custom></mujoco>', r"<numeric> data has 3 values; size=2"),
    ('<mujoco><custom><text name="t"/></custom></mujoco>', r"<text> a custom text field needs non-empty data"),
    ('<mujoco><custom><tuple name="u"><element objtype="body" objname="nope"/></tuple></custom></mujoco>',
     r"<element> unknown body 'nope' in objname"),
    ('<mujoco><visual><map znear="0"/></visual></mujoco>', r"<map> znear='0' must be strictly positive"),
])  # fmt: skip
def test_custom_and_visual_elements(xml, match):
    _both_reject(xml, match)


def test_camera_fovy_of_180_degrees():
    _both_reject(_xml(extra='<camera fovy="180"/>'), r"<camera> camera fovy=180 must be smaller than 180 degrees")
    _both_accept(_xml(extra='<camera fovy="179"/>'))


def test_unused_mesh_with_a_missing_file(tmp_path):
    from armillary_importer_mjcf.importer import MJCFFileNotFoundError

    f = tmp_path / "m.xml"
    f.write_text('<mujoco>\n<asset><mesh name="x" file="nope.stl"/></asset></mujoco>')
    with pytest.raises(ValueError):
        mujoco.MjModel.from_xml_path(str(f))
    with pytest.raises(MJCFFileNotFoundError, match=r"m\.xml:line 2: <mesh> mesh file not found"):
        _load(str(f))


def test_missing_texture_file(tmp_path):
    from armillary_importer_mjcf.importer import MJCFFileNotFoundError

    f = tmp_path / "m.xml"
    f.write_text('<mujoco>\n<asset><texture name="x" type="2d" file="nope.png"/></asset></mujoco>')
    with pytest.raises(MJCFFileNotFoundError, match=r"m\.xml:line 2: <texture> texture file not found"):
        _load(str(f))

"""``docs/data_model.md`` stays accurate: every array it lists exists on a finalized model, its state,
control and contacts with the stated dtype and shape, and every public array of those objects is
listed (so that the page cannot go stale)."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest
import warp as wp

import armillary as newton
from armillary.sim.custom_attributes import AttributeAssignment, AttributeFrequency

DOC = Path(__file__).resolve().parents[2] / "docs" / "data_model.md"
OBJECTS = ("Model", "State", "Control", "Contacts")

# Public arrays deliberately left out of the page (none today). Add a name here only with a comment
# saying why it is internal.
UNDOCUMENTED: dict[str, set[str]] = {"Model": set(), "State": set(), "Control": set(), "Contacts": set()}


# ---------------------------------------------------------------------------------------------- the page
def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _code(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def parse_doc(text: str) -> dict[str, dict]:
    """``{object: {"arrays": {name: (dtype_cell, shape_cell)}, "other": set(names)}}`` from the tables
    under the headings that start with an object's name (``## Model``, ``### Model: bodies``, ...)."""
    out = {o: {"arrays": {}, "other": set()} for o in OBJECTS}
    section, header = None, None
    for line in text.splitlines():
        heading = re.match(r"^#{2,3}\s+(\w+)", line)
        if heading:
            section = heading.group(1) if heading.group(1) in OBJECTS else None
            header = None
            continue
        if not line.startswith("|"):
            header = None
            continue
        cells = _cells(line)
        if header is None:
            header = [c.lower() for c in cells]
            continue
        if section is None or set(line) <= set("|-: ") or header[0] != "name":
            continue
        names = _code(cells[0])
        if "dtype" in header:
            assert len(names) == 1, f"{section} table row {line!r}: one array name per row"
            name = names[0]
            assert name not in out[section]["arrays"], f"{section}.{name} is listed twice"
            out[section]["arrays"][name] = (cells[header.index("dtype")], cells[header.index("shape")])
        else:
            out[section]["other"].update(names)
    return out


@pytest.fixture(scope="module")
def doc():
    tables = parse_doc(DOC.read_text(encoding="utf-8"))
    for obj in OBJECTS:
        assert tables[obj]["arrays"], f"docs/data_model.md lists no {obj} arrays"
    return tables


# ---------------------------------------------------------------------------------------------- the scene
def _robot() -> newton.ModelBuilder:
    """One world: a free body, a chain with every joint type, a mimic pair, a rod, particles, a spring,
    a cloth, a soft block and a particle-body attachment."""
    b = newton.ModelBuilder()
    free = b.add_body(xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()), mass=1.0, label="free")
    b.add_shape_box(free, hx=0.1, hy=0.1, hz=0.1)
    inertia = ((0.1, 0.0, 0.0), (0.0, 0.1, 0.0), (0.0, 0.0, 0.1))
    links = [b.add_link(mass=1.0, inertia=inertia, label=f"l{i}") for i in range(7)]
    b.add_shape_sphere(links[0], radius=0.1)
    b.add_shape_capsule(links[1], radius=0.05, half_height=0.1)
    cfg = newton.ModelBuilder.JointDofConfig
    joints = [
        b.add_joint_revolute(-1, links[0], axis=(0.0, 1.0, 0.0)),
        b.add_joint_ball(links[0], links[1]),
        b.add_joint_prismatic(links[1], links[2], axis=(1.0, 0.0, 0.0)),
        b.add_joint_d6(links[2], links[3], linear_axes=[cfg(axis=(1.0, 0.0, 0.0))],
                       angular_axes=[cfg(axis=(0.0, 0.0, 1.0))]),
        b.add_joint_fixed(links[3], links[4]),
        b.add_joint_revolute(links[4], links[5], axis=(0.0, 1.0, 0.0)),
    ]
    b.add_articulation(joints)
    b.set_joint_mimic(joints[5], joints[0], coeffs=(0.1, 2.0))
    dist = b.add_joint_distance(-1, links[6], max_distance=1.0)
    b.add_articulation([dist])
    b.add_rod(rod=newton.Rod(points=np.array([[0.0, 1.0, 1.0], [0.1, 1.0, 1.0], [0.2, 1.0, 1.0]], dtype=np.float32)))
    p0 = b.add_particle((0.0, 0.0, 2.0), (0.0, 0.0, 0.0), 1.0)
    p1 = b.add_particle((0.1, 0.0, 2.0), (0.0, 0.0, 0.0), 1.0)
    b.add_spring(p0, p1, 10.0, 0.1, 0.0)
    b.add_cloth_grid(pos=(0.0, 0.0, 3.0), rot=wp.quat_identity(), vel=(0.0, 0.0, 0.0), dim_x=2, dim_y=2,
                     cell_x=0.1, cell_y=0.1, mass=0.1)  # fmt: skip
    b.add_soft_grid(pos=(0.0, 0.0, 4.0), rot=wp.quat_identity(), vel=(0.0, 0.0, 0.0), dim_x=1, dim_y=1, dim_z=1,
                    cell_x=0.1, cell_y=0.1, cell_z=0.1, density=100.0, k_mu=1.0e3, k_lambda=1.0e3,
                    k_damp=0.0)  # fmt: skip
    b.add_attachment_particle_body(p0, free)
    return b


@pytest.fixture(scope="module")
def scene():
    """Two replicated worlds plus global entities (a ground plane and a body), coloured, with one custom
    STATE attribute; its model, state, control and a contacts buffer with every optional array."""
    b = newton.ModelBuilder()
    probe = newton.ModelBuilder.CustomAttribute(name="doc_probe", dtype=wp.float32, frequency=AttributeFrequency.BODY,
                                                assignment=AttributeAssignment.STATE)
    b.add_custom_attribute(probe)
    b.add_ground_plane()
    b.replicate(_robot(), 2)
    b.add_body(xform=wp.transform((5.0, 0.0, 1.0), wp.quat_identity()), mass=1.0, label="global_body")
    b.color()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = b.finalize(device="cpu")
    contacts = newton.Contacts(
        16, 8, device="cpu", requires_grad=True, requested_attributes={"force"}, contact_matching=True,
        contact_report=True, rigid_contact_surface_velocity=True,
    )  # fmt: skip
    objects = {"Model": model, "State": model.state(), "Control": model.control(), "Contacts": contacts}
    counts = {n: getattr(model, n) for n in dir(model) if n.endswith("_count") and isinstance(getattr(model, n), int)}
    counts.update(rigid_contact_max=contacts.rigid_contact_max, soft_contact_max=contacts.soft_contact_max)
    custom = set(model.custom_attribute_keys)
    return objects, counts, custom


def _get(obj, name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the deprecated Contacts.rigid_contact_diff_* properties
        return getattr(obj, name)


# ---------------------------------------------------------------------------------------------- checks
def test_scene_covers_every_kind_of_entity(scene):
    (objects, counts, _) = scene
    model = objects["Model"]
    assert model.world_count == 2 and model.gravity.shape == (3,)
    assert {int(t) for t in model.joint_type.numpy()} == {int(t) for t in newton.JointType}
    for n in ("body_count", "shape_count", "particle_count", "spring_count", "tri_count", "edge_count", "tet_count",
              "surface_count", "volume_count", "curve_count", "attachment_particle_body_count"):  # fmt: skip
        assert counts[n] > 0, n


@pytest.mark.parametrize("obj_name", OBJECTS)
def test_every_documented_array_exists_with_its_dtype_and_shape(doc, scene, obj_name):
    (objects, counts, _) = scene
    obj = objects[obj_name]
    problems = []
    for name, (dtype_cell, shape_cell) in doc[obj_name]["arrays"].items():
        if not (hasattr(type(obj), name) or hasattr(obj, name)):
            problems.append(f"{name}: no such attribute")
            continue
        value = _get(obj, name)
        dtypes = _code(dtype_cell)
        if not dtypes:  # documented as always None
            if value is not None:
                problems.append(f"{name}: documented as None, is {type(value).__name__}")
            continue
        if not isinstance(value, wp.array):
            problems.append(f"{name}: expected a wp.array, got {value!r}")
            continue
        want = getattr(wp, dtypes[0].removeprefix("wp."), None)
        if want is None or not wp.types.types_equal(value.dtype, want):
            problems.append(f"{name}: documented dtype {dtypes[0]}, actual {wp.types.type_repr(value.dtype)}")
        # the page's own shape expressions, e.g. ``(joint_count + 1,)``, over the model's counts
        shape = eval(_code(shape_cell)[0], {"__builtins__": {}}, dict(counts))  # noqa: S307
        if tuple(value.shape) != tuple(shape):
            problems.append(f"{name}: documented shape {_code(shape_cell)[0]} = {shape}, actual {value.shape}")
    assert not problems, f"docs/data_model.md, {obj_name}:\n" + "\n".join(problems)


@pytest.mark.parametrize("obj_name", OBJECTS)
def test_every_public_array_is_documented(doc, scene, obj_name):
    (objects, _, custom) = scene
    obj = objects[obj_name]
    listed = set(doc[obj_name]["arrays"]) | doc[obj_name]["other"]
    missing = []
    for name, value in vars(obj).items():
        if name.startswith("_") or name in custom or name in UNDOCUMENTED[obj_name]:
            continue
        is_array_list = isinstance(value, list) and value and all(isinstance(v, wp.array) for v in value)
        if (isinstance(value, wp.array) or is_array_list) and name not in listed:
            missing.append(name)
    assert not missing, f"{obj_name} arrays missing from docs/data_model.md: {sorted(missing)}"


def test_documented_host_side_names_exist(doc, scene):
    (objects, _, _) = scene
    model = objects["Model"]
    missing = sorted(n for n in doc["Model"]["other"] if not hasattr(model, n))
    assert not missing, f"docs/data_model.md names Model attributes that do not exist: {missing}"


def test_custom_attributes_are_excluded_not_ignored(scene):
    """The exclusion of custom attributes is real: the probe exists on the model and the state."""
    (objects, _, custom) = scene
    assert custom == {"doc_probe"}
    assert isinstance(objects["Model"].doc_probe, wp.array) and isinstance(objects["State"].doc_probe, wp.array)


def test_parser_sees_a_missing_array():
    """A page that forgets an array fails the completeness check (the parser is not vacuous)."""
    full = DOC.read_text(encoding="utf-8")
    text = "\n".join(line for line in full.splitlines() if not line.startswith("| `body_inv_mass` |"))
    assert "body_inv_mass" in parse_doc(full)["Model"]["arrays"]
    assert "body_inv_mass" not in parse_doc(text)["Model"]["arrays"]


# ---------------------------------------------------------------------------------------------- conventions
def test_free_joint_coordinates_are_the_body_pose_and_com_twist():
    """The page's FREE-joint convention: for a root FREE joint, ``joint_q`` is ``body_q`` (origin pose,
    quaternion xyzw) and ``joint_qd`` is ``body_qd`` (COM linear velocity first, world frame)."""
    b = newton.ModelBuilder()
    b.add_body(xform=wp.transform((1.0, 2.0, 3.0), wp.quat_rpy(0.3, 0.2, 0.1)), mass=1.0, com=(0.1, 0.2, 0.3),
               inertia=((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)))  # fmt: skip
    model = b.finalize(device="cpu")
    state = model.state()
    np.testing.assert_allclose(state.joint_q.numpy(), state.body_q.numpy()[0], atol=1e-6)
    qd = np.array([1.0, 2.0, 3.0, 0.4, 0.5, 0.6], dtype=np.float32)
    state.joint_qd.assign(qd)
    newton.eval_fk(model, state.joint_q, state.joint_qd, state)
    np.testing.assert_allclose(state.body_qd.numpy()[0], qd, atol=1e-6)
    q = state.body_q.numpy()[0, 3:]
    assert q[3] == pytest.approx(float(wp.quat_rpy(0.3, 0.2, 0.1)[3]), abs=1e-6)  # w is last


def test_joint_layout_table_matches_the_model(scene):
    """Coordinate / DOF counts and ``joint_dof_dim`` per joint type, as the page's table states."""
    (objects, _, _) = scene
    model = objects["Model"]
    table = {"PRISMATIC": (1, (1, 0)), "REVOLUTE": (1, (0, 1)), "BALL": (4, (0, 3)), "FIXED": (0, (0, 0)),
             "FREE": (7, (3, 3)), "DISTANCE": (7, (3, 3)), "ROD": (7, (3, 3))}  # fmt: skip
    text = DOC.read_text(encoding="utf-8")
    types = model.joint_type.numpy()
    qs, dim = np.diff(model.joint_q_start.numpy()), model.joint_dof_dim.numpy()
    for name, (ncoord, ddim) in table.items():
        assert re.search(rf"\| `{name}` \({int(newton.JointType[name])}\) \| {ncoord}\b", text), name
        j = int(np.nonzero(types == int(newton.JointType[name]))[0][0])
        assert (int(qs[j]), tuple(int(v) for v in dim[j])) == (ncoord, ddim), name

"""URDF meshes in OBJ files with materials and textures load without an image library (issue 20).

Minitaur-style visual meshes (pybullet_data) ship an OBJ with texture coordinates, an MTL with
``map_Kd`` and a JPEG; trimesh keeps the texture coordinates as a visual whose placeholder material
raises "No module named 'PIL'" when the multi-part mesh is copied (``Scene.dump``). A shape needs no
texture: the importer reads geometry only. PIL is made unimportable in every test here.
"""

import sys

import numpy as np
import pytest

import armillary as newton

_MTL = """# two materials, the first textured (as minitaur's tmotor3.mtl)
newmtl None
Ns 0
Kd 0.8 0.8 0.8
map_Kd t-motor.jpg

newmtl None_NONE
Kd 0.8 0.8 0.8
"""

# a unit cube in two material groups, with texture coordinates on the first group
_OBJ = """mtllib {mtl}
o motor
v 0 0 0
v 1 0 0
v 1 1 0
v 0 1 0
v 0 0 1
v 1 0 1
v 1 1 1
v 0 1 1
vt 0 0
vt 1 0
vt 1 1
vt 0 1
vn 0 0 1
usemtl {first}
f 1/1/1 4/4/1 3/3/1 2/2/1
f 5/1/1 6/2/1 7/3/1 8/4/1
usemtl None_NONE
f 1//1 2//1 6//1 5//1
f 2//1 3//1 7//1 6//1
f 3//1 4//1 8//1 7//1
f 4//1 1//1 5//1 8//1
"""

INERTIAL = '<inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial>'


@pytest.fixture
def no_pil(monkeypatch):
    monkeypatch.setitem(sys.modules, "PIL", None)  # `import PIL` now raises ImportError
    for name in [m for m in sys.modules if m.startswith("PIL.")]:
        monkeypatch.setitem(sys.modules, name, None)


@pytest.mark.parametrize(
    "mtl, first",
    [
        ("tmotor.mtl", "None"),  # textured material found
        ("tmotor.mtl", "Missing"),  # a usemtl name the MTL lacks (failed: No module named 'PIL')
        ("nowhere.mtl", "None"),  # the MTL file itself is missing (failed the same way)
    ],
)
def test_textured_obj_mesh_loads_without_pil(tmp_path, no_pil, mtl, first):
    (tmp_path / "tmotor.mtl").write_text(_MTL)
    (tmp_path / "t-motor.jpg").write_bytes(b"\xff\xd8\xff\xe0 not a real JPEG")
    (tmp_path / "tmotor.obj").write_text(_OBJ.format(mtl=mtl, first=first))
    (tmp_path / "r.urdf").write_text(
        f'<robot name="r"><link name="motor">{INERTIAL}'
        '<visual><geometry><mesh filename="tmotor.obj" scale="0.5 0.5 0.5"/></geometry></visual>'
        '<collision><geometry><mesh filename="tmotor.obj"/></geometry></collision></link></robot>'
    )
    b = newton.ModelBuilder()
    b.add_urdf(str(tmp_path / "r.urdf"))
    assert b.shape_count == 2 and all(t == newton.GeoType.MESH for t in b.shape_type)
    for i in range(2):
        mesh = b.shape_source[i]
        assert len(mesh.vertices) == 8  # geometry only: texture seams do not split vertices
        assert np.asarray(mesh.indices).size == 12 * 3
        lo, hi = mesh.aabb()
        np.testing.assert_allclose(hi - lo, [1.0, 1.0, 1.0], atol=1e-9)
    b.finalize(device="cpu")

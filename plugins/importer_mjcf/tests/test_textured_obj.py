"""MJCF meshes in OBJ files with materials and textures load without an image library (issue 20).

trimesh keeps an OBJ's texture coordinates as a visual whose placeholder material raises
"No module named 'PIL'" when a multi-part mesh is copied; MuJoCo ignores OBJ materials, and so
does the importer now (geometry only). PIL is made unimportable in the test.
"""

import sys

import mujoco
import numpy as np
import pytest

import armillary

_MTL = "newmtl tex\nKd 0.8 0.8 0.8\nmap_Kd skin.jpg\n\nnewmtl plain\nKd 0.2 0.2 0.2\n"
_OBJ = """mtllib {mtl}
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
usemtl {first}
f 1/1 4/4 3/3 2/2
f 5/1 6/2 7/3 8/4
usemtl plain
f 1 2 6 5
f 2 3 7 6
f 3 4 8 7
f 4 1 5 8
"""


@pytest.mark.parametrize("mtl, first", [("m.mtl", "tex"), ("m.mtl", "absent"), ("gone.mtl", "tex")])
def test_textured_obj_mesh_loads_without_pil(tmp_path, monkeypatch, mtl, first):
    (tmp_path / "m.mtl").write_text(_MTL)
    (tmp_path / "skin.jpg").write_bytes(b"\xff\xd8\xff\xe0 not a real JPEG")
    (tmp_path / "box.obj").write_text(_OBJ.format(mtl=mtl, first=first))
    main = tmp_path / "model.xml"
    main.write_text('<mujoco><asset><mesh name="m" file="box.obj"/></asset>'
                    '<worldbody><body name="a"><freejoint/><geom type="mesh" mesh="m"/></body></worldbody></mujoco>')  # fmt: skip
    m = mujoco.MjModel.from_xml_path(str(main))
    monkeypatch.setitem(sys.modules, "PIL", None)
    b = armillary.ModelBuilder()
    b.add_mjcf(str(main))  # was: "cannot read mesh file ...: No module named 'PIL'" for the last two
    assert b.body_mass[0] == pytest.approx(m.body_mass[1])
    mv = m.mesh_vert[m.mesh_vertadr[0] : m.mesh_vertadr[0] + m.mesh_vertnum[0]]
    v = np.asarray(b.shape_source[0].vertices, dtype=np.float64)
    assert v.shape == mv.shape  # 8 welded corners, in MuJoCo's order
    np.testing.assert_allclose(v - v.mean(0), mv - mv.mean(0), atol=1e-6)

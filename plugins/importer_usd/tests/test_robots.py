"""The shared USD robots import with the reference engine's bodies, joints, masses, inertias and FK poses.

The reference numbers below were measured once with the reference engine (newton 1.8,
``ModelBuilder.add_usd`` with default arguments, ``newton.eval_fk`` at the imported ``joint_q``)
and are stored here; bodies are matched by prim path.
"""

import numpy as np
import pytest

import armillary
from armillary.testing.assets import shared_assets_dir

pytest.importorskip("pxr")

# measured with the reference engine newton 1.8 (see module docstring)
REF = {'cartpole': {'body_count': 4,
              'n_q': 3,
              'n_qd': 3,
              'joint_types': {'/cartPole/rootJoint': 3,
                              '/cartPole/railCartJoint': 0,
                              '/cartPole/cartPoleJoint': 1,
                              '/cartPole/polePoleJoint': 1},
              'joint_type_seq': [3, 0, 1, 1],
              'body_order': ['/cartPole/rail', '/cartPole/cart', '/cartPole/pole1', '/cartPole/pole2'],
              'bodies': {'/cartPole/rail': {'mass': 7.19999968,
                                            'com': [0.0, 0.0, 0.0],
                                            'inertia': [38.4005394,
                                                        0.0,
                                                        0.0,
                                                        0.0,
                                                        0.00107999996,
                                                        0.0,
                                                        0.0,
                                                        0.0,
                                                        38.4005394],
                                            'fk': [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]},
                         '/cartPole/cart': {'mass': 1.0,
                                            'com': [0.0, 0.0, 0.0],
                                            'inertia': [0.00850000046,
                                                        0.0,
                                                        0.0,
                                                        0.0,
                                                        0.00669999979,
                                                        0.0,
                                                        0.0,
                                                        0.0,
                                                        0.00850000046],
                                            'fk': [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]},
                         '/cartPole/pole1': {'mass': 0.25,
                                             'com': [0.0, 0.0, 0.0],
                                             'inertia': [0.0208999999,
                                                         0.0,
                                                         0.0,
                                                         0.0,
                                                         0.0208999999,
                                                         0.0,
                                                         0.0,
                                                         0.0,
                                                         9.99999975e-05],
                                             'fk': [0.110000007, 0.0, 0.5, 0.0, 0.0, 0.0, 1.0]},
                         '/cartPole/pole2': {'mass': 0.25,
                                             'com': [0.0, 0.0, 0.0],
                                             'inertia': [0.0208999999,
                                                         0.0,
                                                         0.0,
                                                         0.0,
                                                         0.0208999999,
                                                         0.0,
                                                         0.0,
                                                         0.0,
                                                         9.99999975e-05],
                                             'fk': [0.110000007, 0.0, 1.5, 0.0, 0.0, 0.0, 1.0]}}},
 'humanoid': {'body_count': 16,
              'n_q': 28,
              'n_qd': 27,
              'joint_types': {'/nv_humanoid/joints/head': 3,
                              '/nv_humanoid/joints/left_upper_arm': 6,
                              '/nv_humanoid/joints/left_elbow': 1,
                              '/nv_humanoid/joints/left_hand': 3,
                              '/nv_humanoid/joints/lower_waist': 6,
                              '/nv_humanoid/joints/abdomen_x': 1,
                              '/nv_humanoid/joints/left_thigh': 6,
                              '/nv_humanoid/joints/left_knee': 1,
                              '/nv_humanoid/joints/left_foot': 6,
                              '/nv_humanoid/joints/right_thigh': 6,
                              '/nv_humanoid/joints/right_knee': 1,
                              '/nv_humanoid/joints/right_foot': 6,
                              '/nv_humanoid/joints/right_upper_arm': 6,
                              '/nv_humanoid/joints/right_elbow': 1,
                              '/nv_humanoid/joints/right_hand': 3},
              'joint_type_seq': [4, 3, 6, 1, 3, 6, 1, 6, 1, 6, 6, 1, 6, 6, 1, 3],
              'body_order': ['/nv_humanoid/torso',
                             '/nv_humanoid/head',
                             '/nv_humanoid/left_upper_arm',
                             '/nv_humanoid/left_lower_arm',
                             '/nv_humanoid/left_hand',
                             '/nv_humanoid/lower_waist',
                             '/nv_humanoid/pelvis',
                             '/nv_humanoid/left_thigh',
                             '/nv_humanoid/left_shin',
                             '/nv_humanoid/left_foot',
                             '/nv_humanoid/right_thigh',
                             '/nv_humanoid/right_shin',
                             '/nv_humanoid/right_foot',
                             '/nv_humanoid/right_upper_arm',
                             '/nv_humanoid/right_lower_arm',
                             '/nv_humanoid/right_hand'],
              'bodies': {'/nv_humanoid/torso': {'mass': 5.85383415,
                                                'com': [-0.00386404246, 0.0, -0.0463685095],
                                                'inertia': [0.0511354059,
                                                            0.0,
                                                            -0.00166550558,
                                                            0.0,
                                                            0.0319667533,
                                                            0.0,
                                                            -0.00166550488,
                                                            0.0,
                                                            0.0312881358],
                                                'fk': [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]},
                         '/nv_humanoid/head': {'mass': 3.05362844,
                                               'com': [0.0, 0.0, 0.0],
                                               'inertia': [0.00989375729,
                                                           0.0,
                                                           0.0,
                                                           0.0,
                                                           0.00989375729,
                                                           0.0,
                                                           0.0,
                                                           0.0,
                                                           0.00989375729],
                                               'fk': [0.0, 0.0, 0.189999998, 0.0, 0.0, 0.0, 1.0]},
                         '/nv_humanoid/left_upper_arm': {'mass': 1.66108036,
                                                         'com': [0.0799999982, 0.0799999982, -0.0799999982],
                                                         'inertia': [0.0110323569,
                                                                     -0.00487319054,
                                                                     0.00487319008,
                                                                     -0.00487319054,
                                                                     0.0110323522,
                                                                     0.00487319333,
                                                                     0.00487319008,
                                                                     0.00487319333,
                                                                     0.0110323532],
                                                         'fk': [0.0, 0.170000002, 0.0599999987, 0.0, 0.0, 0.0, 1.0]},
                         '/nv_humanoid/left_lower_arm': {'mass': 0.96145761,
                                                         'com': [0.090000011, -0.090000011, 0.090000011],
                                                         'inertia': [0.00575107569,
                                                                     0.00265054288,
                                                                     -0.00265054335,
                                                                     0.00265054288,
                                                                     0.00575107615,
                                                                     0.00265054544,
                                                                     -0.00265054335,
                                                                     0.00265054498,
                                                                     0.00575107476],
                                                         'fk': [0.180000007,
                                                                0.350000024,
                                                                -0.120000005,
                                                                0.0,
                                                                0.0,
                                                                0.0,
                                                                1.0]},
                         '/nv_humanoid/left_hand': {'mass': 0.268082529,
                                                    'com': [0.0, 0.0, 0.0],
                                                    'inertia': [0.000171572829,
                                                                0.0,
                                                                0.0,
                                                                0.0,
                                                                0.000171572829,
                                                                0.0,
                                                                0.0,
                                                                0.0,
                                                                0.000171572829],
                                                    'fk': [0.360000014,
                                                           0.170000017,
                                                           0.0600000024,
                                                           0.0,
                                                           0.0,
                                                           0.0,
                                                           1.0]},
                         '/nv_humanoid/lower_waist': {'mass': 2.26194644,
                                                      'com': [1.73472348e-18, 0.0, 0.0],
                                                      'inertia': [0.00985303801,
                                                                  0.0,
                                                                  0.0,
                                                                  0.0,
                                                                  0.00374578335,
                                                                  0.0,
                                                                  0.0,
                                                                  0.0,
                                                                  0.00985303801],
                                                      'fk': [-0.00999999512,
                                                             0.0,
                                                             -0.26000002,
                                                             0.0,
                                                             -0.00200000405,
                                                             0.0,
                                                             0.999998093]},
                         '/nv_humanoid/pelvis': {'mass': 6.61619425,
                                                 'com': [-0.0199999996, 0.0, 0.0],
                                                 'inertia': [0.0523179807,
                                                             0.0,
                                                             0.0,
                                                             0.0,
                                                             0.0243221503,
                                                             0.0,
                                                             0.0,
                                                             0.0,
                                                             0.0523179807],
                                                 'fk': [-0.00933667738,
                                                        0.0,
                                                        -0.42499873,
                                                        0.0,
                                                        -0.00401658239,
                                                        0.0,
                                                        0.999992073]},
                         '/nv_humanoid/left_thigh': {'mass': 4.75175095,
                                                     'com': [0.0, -0.00499999989, -0.170000002],
                                                     'inertia': [0.0749516636,
                                                                 0.0,
                                                                 0.0,
                                                                 0.0,
                                                                 0.0748939812,
                                                                 -0.00196078117,
                                                                 0.0,
                                                                 -0.00196078117,
                                                                 0.00828509964],
                                                     'fk': [-0.0090153534,
                                                            0.100000054,
                                                            -0.46499747,
                                                            0.0,
                                                            -0.00401658239,
                                                            0.0,
                                                            0.999992073]},
                         '/nv_humanoid/left_shin': {'mass': 2.75569606,
                                                    'com': [1.73472348e-18, 0.0, -0.150000006],
                                                    'inertia': [0.0326080099,
                                                                0.0,
                                                                0.0,
                                                                0.0,
                                                                0.0326080099,
                                                                0.0,
                                                                0.0,
                                                                0.0,
                                                                0.00318988995],
                                                    'fk': [-0.00577801233,
                                                           0.0900000408,
                                                           -0.867984712,
                                                           3.03339957e-11,
                                                           -0.00401658285,
                                                           1.19481595e-12,
                                                           0.999992192]},
                         '/nv_humanoid/left_foot': {'mass': 1.1311413,
                                                    'com': [0.0350000001, 0.0100000007, 2.22044605e-16],
                                                    'inertia': [0.000903017703,
                                                                0.0,
                                                                0.0,
                                                                0.0,
                                                                0.00594372489,
                                                                0.0,
                                                                0.0,
                                                                0.0,
                                                                0.00644646259],
                                                    'fk': [-0.00264509558,
                                                           0.0900000259,
                                                           -1.25797248,
                                                           0.0,
                                                           -0.0040165931,
                                                           0.0,
                                                           0.999992192]},
                         '/nv_humanoid/right_thigh': {'mass': 4.75175095,
                                                      'com': [0.0, 0.00499999989, -0.170000002],
                                                      'inertia': [0.0749516636,
                                                                  0.0,
                                                                  0.0,
                                                                  0.0,
                                                                  0.0748939812,
                                                                  0.00196078117,
                                                                  0.0,
                                                                  0.00196078117,
                                                                  0.00828509964],
                                                      'fk': [-0.0090153534,
                                                             -0.100000054,
                                                             -0.46499747,
                                                             0.0,
                                                             -0.00401658239,
                                                             0.0,
                                                             0.999992073]},
                         '/nv_humanoid/right_shin': {'mass': 2.75569606,
                                                     'com': [1.73472348e-18, 0.0, -0.150000006],
                                                     'inertia': [0.0326080099,
                                                                 0.0,
                                                                 0.0,
                                                                 0.0,
                                                                 0.0326080099,
                                                                 0.0,
                                                                 0.0,
                                                                 0.0,
                                                                 0.00318988995],
                                                     'fk': [-0.00577801233,
                                                            -0.0900000408,
                                                            -0.867984712,
                                                            3.03339957e-11,
                                                            -0.00401658285,
                                                            1.19481595e-12,
                                                            0.999992192]},
                         '/nv_humanoid/right_foot': {'mass': 1.1311413,
                                                     'com': [0.0350000001, -0.0100000007, 2.22044605e-16],
                                                     'inertia': [0.000903017703,
                                                                 0.0,
                                                                 0.0,
                                                                 0.0,
                                                                 0.00594372489,
                                                                 0.0,
                                                                 0.0,
                                                                 0.0,
                                                                 0.00644646259],
                                                     'fk': [-0.00264509558,
                                                            -0.0900000557,
                                                            -1.25797248,
                                                            0.0,
                                                            -0.0040165931,
                                                            0.0,
                                                            0.999992192]},
                         '/nv_humanoid/right_upper_arm': {'mass': 1.66108036,
                                                          'com': [0.0799999982, -0.0799999982, -0.0799999982],
                                                          'inertia': [0.0110323569,
                                                                      0.00487319054,
                                                                      0.00487319008,
                                                                      0.00487319054,
                                                                      0.0110323522,
                                                                      -0.00487319333,
                                                                      0.00487319008,
                                                                      -0.00487319333,
                                                                      0.0110323532],
                                                          'fk': [0.0,
                                                                 -0.170000002,
                                                                 0.0599999987,
                                                                 0.0,
                                                                 0.0,
                                                                 0.0,
                                                                 1.0]},
                         '/nv_humanoid/right_lower_arm': {'mass': 0.96145761,
                                                          'com': [0.090000011, 0.090000011, 0.090000011],
                                                          'inertia': [0.00575107662,
                                                                      -0.00265054358,
                                                                      -0.00265054335,
                                                                      -0.00265054381,
                                                                      0.00575107522,
                                                                      -0.00265054475,
                                                                      -0.00265054312,
                                                                      -0.00265054521,
                                                                      0.00575107662],
                                                          'fk': [0.180000007,
                                                                 -0.350000024,
                                                                 -0.120000005,
                                                                 0.0,
                                                                 0.0,
                                                                 0.0,
                                                                 1.0]},
                         '/nv_humanoid/right_hand': {'mass': 0.268082529,
                                                     'com': [0.0, 0.0, 0.0],
                                                     'inertia': [0.000171572829,
                                                                 0.0,
                                                                 0.0,
                                                                 0.0,
                                                                 0.000171572829,
                                                                 0.0,
                                                                 0.0,
                                                                 0.0,
                                                                 0.000171572829],
                                                     'fk': [0.360000014,
                                                            -0.170000017,
                                                            0.0600000024,
                                                            0.0,
                                                            0.0,
                                                            0.0,
                                                            1.0]}}}}

FILES = {"cartpole": "usd/cartpole_usd/cartpole.usda", "humanoid": "usd/humanoid_usd/humanoid.usda"}


def _path(name):
    root = shared_assets_dir()
    if root is None:
        pytest.skip("shared assets not available")
    p = root / FILES[name]
    if not p.is_file():
        pytest.skip(f"{p} missing")
    return p


def _import(name):

    b = armillary.ModelBuilder()
    r = b.add_usd(str(_path(name)))
    return b, r


@pytest.fixture(scope="module", params=sorted(FILES))
def imported(request):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b, r = _import(request.param)
    model = b.finalize(device="cpu")
    state = model.state()
    armillary.eval_fk(model, model.joint_q, model.joint_qd, state)
    return request.param, b, r, state.body_q.numpy()


def test_structure(imported):
    name, b, r, _ = imported
    ref = REF[name]
    assert b.body_count == ref["body_count"]
    assert len(b.joint_q) == ref["n_q"]
    assert len(b.joint_qd) == ref["n_qd"]
    assert {p: int(b.joint_type[j]) for p, j in r["path_joint_map"].items()} == ref["joint_types"]
    # same DFS order as the reference (bodies follow the joints)
    inv = {i: p for p, i in r["path_body_map"].items()}
    assert [inv[i] for i in range(b.body_count)] == ref["body_order"]
    assert [int(t) for t in b.joint_type] == ref["joint_type_seq"]
    assert b.articulation_count == 1


def test_mass_properties(imported):
    name, b, r, _ = imported
    for path, ref in REF[name]["bodies"].items():
        i = r["path_body_map"][path]
        assert b.body_mass[i] == pytest.approx(ref["mass"], rel=1e-5, abs=1e-5), path
        np.testing.assert_allclose(np.asarray(b.body_com[i]), ref["com"], atol=1e-5, err_msg=path)
        np.testing.assert_allclose(np.asarray(b.body_inertia[i]).reshape(-1), ref["inertia"], atol=1e-5, err_msg=path)


def test_fk_poses(imported):
    name, b, r, body_q = imported
    for path, ref in REF[name]["bodies"].items():
        i = r["path_body_map"][path]
        x = body_q[i]
        np.testing.assert_allclose(x[:3], ref["fk"][:3], atol=1e-5, err_msg=path)
        q, qr = x[3:], np.asarray(ref["fk"][3:])
        assert min(np.abs(q - qr).max(), np.abs(q + qr).max()) < 1e-5, path


def test_cartpole_usd_is_not_the_mjcf_cartpole():
    """The MJCF cartpole (dm_control, one pole, slider along x) is a different robot from the USD one
    (double pole on a rail body, slider along y): no twin comparison applies."""

    root = shared_assets_dir()
    if root is None or not (root / "mjcf/cartpole/cartpole.xml").is_file():
        pytest.skip("shared assets not available")
    bu = armillary.ModelBuilder()
    bu.add_usd(str(_path("cartpole")))
    bm = armillary.ModelBuilder()
    bm.add_mjcf(str(root / "mjcf/cartpole/cartpole.xml"))
    assert (bu.joint_dof_count, bu.body_count) == (3, 4)
    assert (bm.joint_dof_count, bm.body_count) == (2, 2)

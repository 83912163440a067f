"""SolverVBD particle half: tetrahedral (stable neo-Hookean) soft bodies."""

import numpy as np
import warp as wp

import armillary as newton

wp.config.quiet = True


def _volume(model, x):
    t = model.tet_indices.numpy()
    a, b, c, d = (x[t[:, i]].astype(np.float64) for i in range(4))
    return float(np.einsum("ij,ij->i", np.cross(b - a, c - a), d - a).sum() / 6.0)


def _simulate(model, steps, dt=1.0 / 600.0, iterations=10):
    solver = newton.solvers.SolverVBD(model, iterations=iterations)
    pipe = newton.CollisionPipeline(model)
    s0, s1, c = model.state(), model.state(), model.control()
    for _ in range(steps):
        contacts = model.collide(s0, collision_pipeline=pipe)
        solver.step(s0, s1, c, contacts, dt)
        s0, s1 = s1, s0
    return s0


def test_soft_cube_rests_on_ground_and_keeps_volume():
    b = newton.ModelBuilder()
    b.add_soft_grid(pos=wp.vec3(-0.1, -0.1, 0.12), rot=wp.quat_identity(), vel=wp.vec3(0.0, 0.0, 0.0), dim_x=4,
                    dim_y=4, dim_z=4, cell_x=0.05, cell_y=0.05, cell_z=0.05, density=1000.0, k_mu=1.0e5,
                    k_lambda=1.0e6, k_damp=1.0e-3)  # fmt: skip
    b.add_ground_plane()
    b.color()
    model = b.finalize(device="cpu")
    v0 = _volume(model, model.particle_q.numpy())
    st = _simulate(model, 900)
    x = st.particle_q.numpy()
    assert np.isfinite(x).all()
    r = model.particle_radius.numpy()
    assert (x[:, 2] > -r).all(), x[:, 2].min()  # not through the ground
    assert abs(x[:, 2].min() - r.max()) < 0.2 * r.max()  # it rests on the ground (particle radius)
    v1 = _volume(model, x)
    assert abs(v1 / v0 - 1.0) < 0.05, v1 / v0
    assert np.abs(st.particle_qd.numpy()).max() < 0.1, np.abs(st.particle_qd.numpy()).max()


def test_soft_mesh_falls_and_keeps_shape():
    verts = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1]], dtype=np.float32) * 0.1
    tets = np.array([[0, 1, 2, 3], [1, 2, 3, 4]], dtype=np.int32)
    tets[1] = [1, 3, 2, 4]  # positive orientation
    b = newton.ModelBuilder()
    b.add_soft_mesh(pos=wp.vec3(0.0, 0.0, 0.3), rot=wp.quat_identity(), scale=1.0, vel=wp.vec3(0.0, 0.0, 0.0),
                    vertices=verts, indices=tets.reshape(-1), density=500.0, k_mu=1.0e4, k_lambda=1.0e5,
                    k_damp=1.0e-3)  # fmt: skip
    b.add_ground_plane()
    b.color()
    model = b.finalize(device="cpu")
    assert model.tet_count == 2
    v0 = _volume(model, model.particle_q.numpy())
    st = _simulate(model, 600)
    x = st.particle_q.numpy()
    assert np.isfinite(x).all()
    assert x[:, 2].max() < 0.25  # it fell
    assert abs(_volume(model, x) / v0 - 1.0) < 0.1

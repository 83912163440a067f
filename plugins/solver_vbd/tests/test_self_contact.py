"""SolverVBD particle half: cloth self-contact (vertex-triangle, edge-edge)."""

import numpy as np
import pytest
import warp as wp

import armillary as newton

wp.config.quiet = True


def _two_layers(n=8, gap=0.03):
    b = newton.ModelBuilder()
    for k in range(2):
        b.add_cloth_grid(pos=wp.vec3(-0.2 + 0.013 * k, -0.2 + 0.007 * k, 0.1 + gap * k), rot=wp.quat_identity(),
                         vel=wp.vec3(0.0, 0.0, 0.0), dim_x=n, dim_y=n, cell_x=0.4 / n, cell_y=0.4 / n, mass=0.001,
                         tri_ke=1.0e3, tri_ka=1.0e3, tri_kd=1.0e-4, edge_ke=1.0e-3, particle_radius=0.005)  # fmt: skip
    b.add_ground_plane()
    b.color()
    return b.finalize(device="cpu"), (n + 1) ** 2


def _run(model, interval, steps=300, margin=0.01):
    solver = newton.solvers.SolverVBD(model, iterations=10, particle_enable_self_contact=True,
                                      particle_self_contact_margin=margin, particle_self_contact_gap=0.005,
                                      particle_collision_detection_interval=interval)  # fmt: skip
    pipe = newton.CollisionPipeline(model)
    s0, s1, c = model.state(), model.state(), model.control()
    gaps = []
    for _ in range(steps):
        contacts = model.collide(s0, collision_pipeline=pipe)
        solver.step(s0, s1, c, contacts, 1.0 / 600.0)
        s0, s1 = s1, s0
    return s0


@pytest.mark.parametrize("interval", [-1, 0, 3])
def test_stacked_layers_never_interpenetrate(interval):
    model, half = _two_layers()
    st = _run(model, interval)
    x = st.particle_q.numpy().astype(np.float64)
    assert np.isfinite(x).all()
    lower, upper = x[:half], x[half:]
    # both layers rest flat on the ground: every upper vertex stays above the lower sheet
    assert lower[:, 2].max() < 0.02, lower[:, 2].max()
    inside = (np.abs(upper[:, 0]) < 0.18) & (np.abs(upper[:, 1]) < 0.18)
    assert (upper[inside, 2] - lower[:, 2].max() > 0.005).all(), (upper[inside, 2] - lower[:, 2].max()).min()


def test_without_self_contact_layers_merge():
    """Control: with self-contact off the two layers end up in the same plane."""
    model, half = _two_layers()
    solver = newton.solvers.SolverVBD(model, iterations=10)
    pipe = newton.CollisionPipeline(model)
    s0, s1, c = model.state(), model.state(), model.control()
    for _ in range(300):
        solver.step(s0, s1, c, model.collide(s0, collision_pipeline=pipe), 1.0 / 600.0)
        s0, s1 = s1, s0
    x = s0.particle_q.numpy()
    assert abs(x[half:, 2].mean() - x[:half, 2].mean()) < 0.004


def test_cloth_folding_onto_itself():
    """A strip pinned at one end in the middle folds down onto itself over a bar; vertex-triangle and
    edge-edge repulsion keep every vertex outside the margin of the other half."""
    b = newton.ModelBuilder()
    n = 12
    b.add_cloth_grid(pos=wp.vec3(-0.3, -0.05, 0.3), rot=wp.quat_identity(), vel=wp.vec3(0.0, 0.0, 0.0), dim_x=n,
                     dim_y=2, cell_x=0.6 / n, cell_y=0.05, mass=0.001, tri_ke=1.0e3, tri_ka=1.0e3, tri_kd=1.0e-4,
                     edge_ke=1.0e-4, particle_radius=0.005)  # fmt: skip
    b.add_shape_box(-1, xform=wp.transform((0.0, 0.0, 0.25), wp.quat_identity()), hx=0.01, hy=0.2, hz=0.01)
    b.add_ground_plane()
    b.color()
    model = b.finalize(device="cpu")
    st = _run(model, -1, steps=600, margin=0.008)
    x = st.particle_q.numpy()
    assert np.isfinite(x).all()
    # the two halves hang on both sides of the bar; they never swap sides
    left = x[[r * (n + 1) + 0 for r in range(3)]]
    right = x[[r * (n + 1) + n for r in range(3)]]
    assert (left[:, 0] < right[:, 0]).all()

"""SolverVBD particle half: cloth (membrane, bending, springs, pins, external forces)."""

import numpy as np
import pytest
import warp as wp

import armillary as newton

wp.config.quiet = True
DEV = "cpu"


def _grid(b, n, *, z=1.0, cell=None, mass=None, **kw):
    cell = 1.0 / n if cell is None else cell
    b.add_cloth_grid(pos=wp.vec3(-0.5 * n * cell, -0.5 * n * cell, z), rot=wp.quat_identity(), vel=wp.vec3(0.0, 0.0, 0.0),
                     dim_x=n, dim_y=n, cell_x=cell, cell_y=cell, mass=(0.1 / ((n + 1) ** 2)) if mass is None else mass,
                     **kw)  # fmt: skip


def _run(model, solver, steps, dt, *, collide=False, f=None):
    s0, s1, c = model.state(), model.state(), model.control()
    pipe = newton.CollisionPipeline(model) if collide else None
    for _ in range(steps):
        contacts = model.collide(s0, collision_pipeline=pipe) if collide else None
        if f is not None:
            s0.particle_f.assign(f)
        solver.step(s0, s1, c, contacts, dt)
        s0, s1 = s1, s0
    return s0


@pytest.mark.slow  # about 18 s on the CPU
def test_cloth_drapes_on_sphere_and_rests():
    """32x32 cloth dropped on a static sphere, collisions every step, dt 1/600, 10 iterations:
    after 2 s nothing is deeper than the contact margin and the kinetic energy has died out."""
    n, r, c = 32, 0.3, np.array([0.0, 0.0, 0.5])
    b = newton.ModelBuilder()
    _grid(b, n, z=0.85, tri_ke=1.0e3, tri_ka=1.0e3, tri_kd=1.0e-5, edge_ke=1.0e-3, particle_radius=0.01)
    b.add_shape_sphere(-1, xform=wp.transform(tuple(c), wp.quat_identity()), radius=r)
    b.color()
    model = b.finalize(device=DEV)
    solver = newton.solvers.SolverVBD(model, iterations=10)
    st = _run(model, solver, 1200, 1.0 / 600.0, collide=True)
    x = st.particle_q.numpy().astype(np.float64)
    v = st.particle_qd.numpy().astype(np.float64)
    assert np.isfinite(x).all()
    depth = r + 0.01 - np.linalg.norm(x - c, axis=1)
    assert depth.max() < 0.01, depth.max()  # within the particle radius (contact margin)
    m = model.particle_mass.numpy()
    ke = 0.5 * float((m[:, None] * v * v).sum())
    assert ke < 5.0e-3, ke  # dropped 0.05 m onto the sphere top: potential energy ~0.05 J scale
    assert x[:, 2].max() > c[2] + r  # it rests on top of the sphere, not fallen through


def _hanging(n=10, iterations=10, steps=600, membrane="stvk", ke=1.0e4):
    b = newton.ModelBuilder()
    b.add_cloth_grid(pos=wp.vec3(0.0, 0.0, 1.0), rot=wp.quat_from_axis_angle(wp.vec3(1.0, 0.0, 0.0), np.pi / 2),
                     vel=wp.vec3(0.0, 0.0, 0.0), dim_x=n, dim_y=n, cell_x=0.05, cell_y=0.05, mass=0.01,
                     fix_top=True, tri_ke=ke, tri_ka=ke, tri_kd=1.0e-3, edge_ke=1.0e-2)  # fmt: skip
    b.color()
    model = b.finalize(device=DEV)
    solver = newton.solvers.SolverVBD(model, iterations=iterations, particle_membrane_model=membrane)
    st = _run(model, solver, steps, 1.0 / 600.0)
    x = st.particle_q.numpy().astype(np.float64)
    x0 = model.particle_q.numpy().astype(np.float64)
    tri = model.tri_indices.numpy()
    l0 = np.linalg.norm(x0[tri[:, 0]] - x0[tri[:, 1]], axis=1)
    l1 = np.linalg.norm(x[tri[:, 0]] - x[tri[:, 1]], axis=1)
    return model, x0, x, float(np.abs(l1 / l0 - 1.0).max())


def test_hanging_cloth_stretch_is_bounded():
    model, x0, x, stretch = _hanging()
    assert np.isfinite(x).all()
    assert stretch < 0.05, stretch
    pinned = model.particle_inv_mass.numpy() == 0.0
    assert pinned.sum() > 0
    np.testing.assert_allclose(x[pinned], x0[pinned], atol=1e-7)  # pinned particles stay
    assert x[~pinned][:, 2].min() < x0[~pinned][:, 2].min() + 1e-3  # hangs down


def test_neo_hookean_membrane():
    _, _, x, stretch = _hanging(membrane="neo_hookean")
    assert np.isfinite(x).all()
    assert stretch < 0.05, stretch


def test_softer_membrane_stretches_more():
    _, _, _, stiff = _hanging(ke=1.0e4, steps=300)
    _, _, _, soft = _hanging(ke=1.0e2, steps=300)
    assert soft > 2.0 * stiff, (soft, stiff)


def _strip_droop(edge_ke):
    b = newton.ModelBuilder()
    b.add_cloth_grid(pos=wp.vec3(0.0, 0.0, 1.0), rot=wp.quat_identity(), vel=wp.vec3(0.0, 0.0, 0.0), dim_x=10,
                     dim_y=2, cell_x=0.05, cell_y=0.05, mass=0.002, fix_left=True, tri_ke=1.0e4, tri_ka=1.0e4,
                     tri_kd=1.0e-3, edge_ke=edge_ke, edge_kd=1.0e-3 * edge_ke)  # fmt: skip
    for row in range(3):  # clamp the second column too: a cantilever, not a hinge
        b.particle_mass[row * 11 + 1] = 0.0
    b.color()
    model = b.finalize(device=DEV)
    solver = newton.solvers.SolverVBD(model, iterations=10)
    s0, s1 = model.state(), model.state()
    zmin = 1.0
    for _ in range(30):  # the largest droop over the first half second (a swing, not a rest state)
        s0 = _run_from(model, solver, s0, s1, 10, 1.0 / 600.0)
        x = s0.particle_q.numpy()
        assert np.isfinite(x).all()
        zmin = min(zmin, float(x[:, 2].min()))
    return 1.0 - zmin


def _run_from(model, solver, s0, s1, steps, dt):
    c = model.control()
    for _ in range(steps):
        solver.step(s0, s1, c, None, dt)
        s0, s1 = s1, s0
    return s0


def test_bending_resists_folding():
    limp = _strip_droop(0.0)
    stiff = _strip_droop(50.0)
    assert limp > 0.3, limp  # a 0.5 m strip without bending stiffness hangs down
    assert stiff < 0.5 * limp, (stiff, limp)


def test_spring_chain_stretch():
    """A mass on a spring below a pinned particle settles at m g / k."""
    b = newton.ModelBuilder()
    b.add_particle((0.0, 0.0, 2.0), (0.0, 0.0, 0.0), 0.0, 0.01)
    b.add_particle((0.0, 0.0, 1.5), (0.0, 0.0, 0.0), 1.0, 0.01)
    b.add_spring(0, 1, 1000.0, 20.0, 0)
    b.color()
    model = b.finalize(device=DEV)
    st = _run(model, newton.solvers.SolverVBD(model, iterations=10), 1200, 1.0 / 600.0)
    x = st.particle_q.numpy().astype(np.float64)
    assert abs((2.0 - x[1, 2] - 0.5) - 9.81 / 1000.0) < 5e-4, x[1]
    assert np.allclose(x[0], (0.0, 0.0, 2.0))
    np.testing.assert_allclose(st.particle_qd.numpy()[0], 0.0)


def test_pinned_particle_keeps_position_and_gets_zero_velocity():
    b = newton.ModelBuilder()
    b.add_particle((0.0, 0.0, 1.0), (1.0, 0.0, 0.0), 0.0, 0.01)
    b.add_particle((0.0, 0.0, 0.5), (1.0, 0.0, 0.0), 1.0, 0.01)
    b.add_spring(0, 1, 1000.0, 0.0, 0)
    b.color()
    model = b.finalize(device=DEV)
    st = _run(model, newton.solvers.SolverVBD(model, iterations=10), 1, 0.01)
    np.testing.assert_allclose(st.particle_q.numpy()[0], (0.0, 0.0, 1.0))
    np.testing.assert_allclose(st.particle_qd.numpy()[0], 0.0)
    assert st.particle_qd.numpy()[1, 0] > 0.9  # the free one keeps moving


def test_particle_external_force():
    b = newton.ModelBuilder()
    b.add_particle((0.0, 0.0, 1.0), (0.0, 0.0, 0.0), 2.0, 0.01)
    b.add_particle((1.0, 0.0, 1.0), (0.0, 0.0, 0.0), 2.0, 0.01)
    model = b.finalize(device=DEV)
    model.set_gravity((0.0, 0.0, 0.0))
    f = np.array([[4.0, 0.0, 0.0], [0.0, 0.0, 0.0]], dtype=np.float32)
    dt, steps = 0.01, 10
    st = _run(model, newton.solvers.SolverVBD(model, iterations=2), steps, dt, f=f)
    v = st.particle_qd.numpy()
    np.testing.assert_allclose(v[0], (2.0 * dt * steps, 0.0, 0.0), rtol=1e-4)
    np.testing.assert_allclose(v[1], 0.0, atol=1e-7)


def test_gravity_free_fall():
    b = newton.ModelBuilder()
    b.add_particle((0.0, 0.0, 1.0), (0.0, 0.0, 0.0), 1.0, 0.01)
    model = b.finalize(device=DEV)
    st = _run(model, newton.solvers.SolverVBD(model), 10, 0.01)
    np.testing.assert_allclose(st.particle_qd.numpy()[0, 2], -9.81 * 0.1, rtol=1e-4)


def test_degenerate_elements_are_skipped_by_the_builder_and_rejected_by_the_solver():
    """The builder skips a zero-area triangle / an inverted tetrahedron with a warning (as the
    reference engine does); a model whose element data were made degenerate afterwards (direct
    array edits) is rejected at SolverVBD construction with an error naming the element."""
    b = newton.ModelBuilder()
    for p in ((0.0, 0.0, 0.0), (1.0, 0.0, 0.0), (2.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)):
        b.add_particle(p, (0.0, 0.0, 0.0), 1.0, 0.01)
    with pytest.warns(UserWarning, match="degenerate"):
        assert b.add_triangle(0, 1, 2) == 0.0
    with pytest.warns(UserWarning, match="inverted"):
        b.add_tetrahedron(0, 3, 1, 4)
    assert b.tri_count == 0 and b.tet_count == 0
    b.add_triangle(0, 1, 3)
    b.add_tetrahedron(0, 1, 3, 4)
    b.color()
    model = b.finalize(device=DEV)
    newton.solvers.SolverVBD(model)  # valid elements build
    model.tri_areas.assign(np.zeros(1, dtype=np.float32))
    with pytest.raises(ValueError, match=r"triangle 0 \(0, 1, 3\) is degenerate"):
        newton.solvers.SolverVBD(model)
    model.tri_areas.assign(np.ones(1, dtype=np.float32))
    poses = model.tet_poses.numpy()
    poses[0, :, 0] *= -1.0  # a mirrored rest shape: negative determinant
    model.tet_poses.assign(poses)
    with pytest.raises(ValueError, match="tetrahedron 0 .* inverted"):
        newton.solvers.SolverVBD(model)


def test_uncoloured_model_is_rejected():
    b = newton.ModelBuilder()
    _grid(b, 3, tri_ke=1.0e3, tri_ka=1.0e3)
    model = b.finalize(device=DEV)
    with pytest.raises(ValueError, match=r"call ModelBuilder.color\(\)"):
        newton.solvers.SolverVBD(model)


def test_step_does_not_modify_state_in():
    b = newton.ModelBuilder()
    _grid(b, 4, tri_ke=1.0e3, tri_ka=1.0e3)
    b.color()
    model = b.finalize(device=DEV)
    s0, s1 = model.state(), model.state()
    q0 = s0.particle_q.numpy().copy()
    newton.solvers.SolverVBD(model).step(s0, s1, model.control(), None, 0.01)
    np.testing.assert_array_equal(s0.particle_q.numpy(), q0)
    assert not np.allclose(s1.particle_q.numpy(), q0)


def test_per_colour_sweep_matches_sequential_sweep():
    """The CUDA path (one launch per colour) forced on the CPU gives the same drape as the CPU's
    single in-order sweep (on the CPU the two visit the vertices in the same order, so they agree
    exactly). Race check: a vertex solve writes only its own position and reads its stencil's
    (triangles, bending edges, springs, contacts); with no stencil holding two vertices of one
    colour (checked) the order inside a colour cannot matter, so reversing it must not change a
    single bit, which is what a CUDA launch's arbitrary thread order relies on."""
    from armillary_solver_vbd.particles import ParticleVBD

    out = {}
    for sequential, reverse in ((True, False), (False, False), (False, True)):
        b = newton.ModelBuilder()
        _grid(b, 10, z=0.65, cell=0.05, mass=0.01, tri_ke=1.0e4, tri_ka=1.0e4, edge_ke=1.0, add_springs=True,
              spring_ke=100.0, particle_radius=0.01)  # fmt: skip
        b.add_shape_sphere(-1, xform=wp.transform((0.0, 0.0, 0.5), wp.quat_identity()), radius=0.2)
        b.color()
        model = b.finalize(device=DEV)
        solver = newton.solvers.SolverVBD(model, iterations=10)
        parts = solver._particles
        assert isinstance(parts, ParticleVBD)
        parts._sequential_cpu_sweep = sequential
        parts._reverse_within_colour = reverse
        assert len(parts.sweeps) == (1 if sequential else len(model.particle_color_groups))
        if reverse:  # the reversal is real
            assert not np.array_equal(parts._order_reversed.numpy(), parts.order.numpy())
        st = _run(model, solver, 200, 1.0 / 600.0, collide=True)
        out[sequential, reverse] = st.particle_q.numpy().astype(np.float64)
    assert len(model.particle_color_groups) > 1
    colour = np.full(model.particle_count, -1)
    for k, g in enumerate(model.particle_color_groups):
        colour[g.numpy()] = k
    assert (colour >= 0).all()
    for name, width in (("tri_indices", 3), ("edge_indices", 4), ("spring_indices", 2)):
        idx = getattr(model, name).numpy().reshape(-1, width)
        for row in idx:
            cs = colour[row[row >= 0]]
            assert len(set(cs.tolist())) == len(cs), (name, row, cs)
    a, c, r = out[True, False], out[False, False], out[False, True]
    assert np.isfinite(c).all() and np.isfinite(r).all()
    moved = np.abs(a - np.array(model.particle_q.numpy(), dtype=np.float64)).max()
    assert moved > 0.05  # the cloth fell onto the sphere and draped
    assert np.abs(a - c).max() < 5.0e-3, np.abs(a - c).max()
    assert np.array_equal(c, r), np.abs(c - r).max()


def test_step_rejects_bad_arrays_before_launching():
    """Wrong shapes, dtypes or None in the state and control raise ValueError naming the array;
    nothing is launched with them (a wrong-sized array replayed by a kernel could crash)."""
    b = newton.ModelBuilder()
    _grid(b, 3, tri_ke=1.0e3, tri_ka=1.0e3)
    body = b.add_body(xform=wp.transform((0.0, 0.0, 3.0), wp.quat_identity()), mass=1.0)
    b.add_shape_sphere(body, radius=0.1)
    b.color()
    model = b.finalize(device=DEV)
    solver = newton.solvers.SolverVBD(model)
    s0, s1, control = model.state(), model.state(), model.control()
    solver.step(s0, s1, control, None, 0.01)
    bad = model.state()
    bad.particle_q = wp.zeros(3, dtype=wp.vec3, device=DEV)
    with pytest.raises(ValueError, match=r"state_in.particle_q has shape \(3,\)"):
        solver.step(bad, s1, control, None, 0.01)
    bad = model.state()
    bad.body_q = None
    with pytest.raises(ValueError, match="state_out.body_q is None"):
        solver.step(s0, bad, control, None, 0.01)
    bad = model.state()
    bad.particle_f = wp.zeros(model.particle_count, dtype=wp.vec4, device=DEV)
    with pytest.raises(ValueError, match="particle_f .* dtype"):
        solver.step(bad, s1, control, None, 0.01)
    control.joint_f = wp.zeros(2, dtype=wp.float32, device=DEV)
    with pytest.raises(ValueError, match="control.joint_f has shape"):
        solver.step(s0, s1, control, None, 0.01)
    with pytest.raises(ValueError, match="dt must be finite"):
        solver.step(s0, s1, None, None, float("nan"))

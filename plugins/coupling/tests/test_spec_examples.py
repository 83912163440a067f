"""The Coupled Solvers page's code examples that concern ModelView and SolverCoupled, run with
``import armillary as newton``."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import armillary as newton


def test_experimental_namespace_import():
    """The page's import block (the names this step provides)."""
    from armillary.solvers import SolverMuJoCo, SolverVBD
    from armillary.solvers.experimental.coupled import (
        ModelView,
        SolverCoupled,
        SolverCoupledADMM,
        SolverCoupledProxy,
    )

    assert SolverMuJoCo.__name__ == "SolverMuJoCo" and SolverVBD.__name__ == "SolverVBD"

    assert newton.solvers.experimental.coupled.SolverCoupled is SolverCoupled
    assert issubclass(SolverCoupled, newton.solvers.SolverBase)
    assert issubclass(SolverCoupledProxy, SolverCoupled)
    assert issubclass(SolverCoupledADMM, SolverCoupled)
    assert ModelView.__name__ == "ModelView"


def _scene():
    b = newton.ModelBuilder()
    robot = b.add_body(xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()), mass=1.0, label="robot")
    b.add_shape_box(robot, hx=0.1, hy=0.1, hz=0.1)
    soft = b.add_body(xform=wp.transform((2.0, 0.0, 1.0), wp.quat_identity()), mass=1.0, label="soft_body")
    b.add_shape_sphere(soft, radius=0.1)
    b.add_cloth_grid(pos=wp.vec3(-1.0, 3.0, 1.0), rot=wp.quat_identity(), vel=wp.vec3(0.0), dim_x=3, dim_y=3,
                     cell_x=0.1, cell_y=0.1, mass=0.1)  # fmt: skip
    b.color()  # SolverVBD solves colour by colour
    return b.finalize(), robot, soft


def test_entry_example():
    """``SolverCoupled.Entry(...)`` exactly as on the page (SolverVBD with ``rigid_compliant_alm``);
    the rigid entry is SolverMuJoCo as in the page's introduction."""
    from armillary.solvers import SolverMuJoCo, SolverVBD
    from armillary.solvers.experimental.coupled import SolverCoupled

    model, robot, soft = _scene()
    soft_body_ids = [soft]
    cloth_particle_ids = list(range(model.particle_count))
    cloth_shape_ids = list(model.body_shapes[soft])

    entry = SolverCoupled.Entry(
        name="soft",
        solver=lambda view: SolverVBD(model=view, iterations=20, rigid_compliant_alm=True),
        bodies=soft_body_ids,
        particles=cloth_particle_ids,
        shapes=cloth_shape_ids,
        substeps=2,
    )
    rigid_entry = SolverCoupled.Entry(name="rigid", solver=lambda view: SolverMuJoCo(view), bodies=[robot])
    solver = SolverCoupled(model, entries=[rigid_entry, entry])
    assert solver.entry_names() == ("rigid", "soft")
    assert isinstance(solver.solver("soft"), SolverVBD) and solver.solver("soft").model is solver.view("soft")
    assert solver.view("rigid").particle_count == 0  # MuJoCo's view hides the cloth

    s0, s1 = model.state(), model.state()
    for _ in range(10):
        solver.step(s0, s1, model.control(), None, 1.0e-2)
        s0, s1 = s1, s0
    t = 0.1
    # free fall of both bodies and the cloth, each by its own solver; none of them interact here
    z = s0.body_q.numpy()[:, 2]
    assert np.all(z < 1.0) and np.all(z > 1.0 - 9.81 * t * t)
    assert np.all(s0.particle_q.numpy()[:, 2] < 1.0)
    # only owned outputs were reconciled: each body's joint rows come from its owner
    assert solver.entry("rigid").joints.tolist() == [0] and solver.entry("soft").joints.tolist() == [1]


def test_model_view_copy_on_write_paragraph():
    """"ModelView applies view-local changes with copy-on-write semantics so the coupler can hide,
    immobilize, or rescale endpoints without changing the parent model. Parent-derived view
    masks are refreshed when relevant model-change notifications arrive."""
    from armillary.solvers.experimental.coupled import SolverCoupled

    model, robot, soft = _scene()
    inv_mass = model.body_inv_mass.numpy().copy()
    solver = SolverCoupled(model, entries=[
        SolverCoupled.Entry(name="rigid", solver=lambda v: newton.solvers.SolverFeatherstone(v), bodies=[robot]),
        SolverCoupled.Entry(name="soft", solver=lambda v: newton.solvers.SolverXPBD(v), bodies=[soft],
                            particles=range(model.particle_count)),
    ])
    view = solver.view("soft")
    view.scale_body_mass([soft], 4.0)  # rescale an endpoint (what the ADMM proximal term does)
    np.testing.assert_array_equal(model.body_inv_mass.numpy(), inv_mass)
    assert view.body_inv_mass.numpy()[robot] == 0.0  # immobilized: owned by another entry
    np.testing.assert_allclose(view.body_inv_mass.numpy()[soft], inv_mass[soft] / 4.0, rtol=1e-6)
    model.body_mass.assign(model.body_mass.numpy() * 2.0)
    model.body_inv_mass.assign(inv_mass / 2.0)
    solver.notify_model_changed(newton.ModelFlags.BODY_INERTIAL_PROPERTIES)
    np.testing.assert_allclose(view.body_inv_mass.numpy()[soft], inv_mass[soft] / 8.0, rtol=1e-6)
    assert view.body_inv_mass.numpy()[robot] == 0.0

"""Graph-capture readiness of the solvers the conformance kit's host-sync check does not cover:
the coupled solvers (SolverCoupled, SolverCoupledProxy, SolverCoupledADMM) over Warp
sub-solvers. After warm-up, ``step`` (with ``collide`` before it) must not read an array back
to the host or synchronise: every ``wp.array`` host read and ``wp.synchronize*`` is trapped."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

import armillary as newton
from armillary.testing import check_step_host_sync


def _boxes_on_ground(worlds=2):
    t = newton.ModelBuilder()
    box = t.add_body(xform=wp.transform((0.0, 0.0, 0.3), wp.quat_from_axis_angle(wp.vec3(1.0, 0.2, 0.0), 0.4)))
    t.add_shape_box(box, hx=0.1, hy=0.08, hz=0.05)
    ball = t.add_body(xform=wp.transform((0.4, 0.0, 0.2), wp.quat_identity()))
    t.add_shape_sphere(ball, radius=0.06)
    b = newton.ModelBuilder()
    b.add_ground_plane()
    b.replicate(t, worlds)
    return b.finalize(device="cpu")



def test_solver_coupled_step_does_not_synchronise(monkeypatch):
    from armillary.solvers.experimental.coupled import SolverCoupled

    model = _boxes_on_ground(worlds=1)
    solver = SolverCoupled(model, entries=[
        SolverCoupled.Entry(name="rigid", solver=lambda v: newton.solvers.SolverFeatherstone(v), bodies=[0]),
        SolverCoupled.Entry(name="xpbd", solver=lambda v: newton.solvers.SolverXPBD(v), bodies=[1]),
    ])  # fmt: skip
    check_step_host_sync(monkeypatch, model, solver)


@pytest.mark.parametrize("mode", ["lagged", "staggered"])
def test_solver_coupled_proxy_step_does_not_synchronise(monkeypatch, mode):
    from armillary.solvers.experimental.coupled import SolverCoupledProxy

    b = newton.ModelBuilder()
    a = b.add_body(xform=wp.transform((0.0, 0.0, 0.3), wp.quat_identity()), mass=1.0,
                   inertia=wp.mat33(np.eye(3) * 0.01), label="a")  # fmt: skip
    b.add_shape_box(a, hx=0.1, hy=0.1, hz=0.1)
    c = b.add_body(xform=wp.transform((0.05, 0.0, 0.55), wp.quat_identity()), mass=2.0,
                   inertia=wp.mat33(np.eye(3) * 0.02), label="c")  # fmt: skip
    b.add_shape_box(c, hx=0.1, hy=0.1, hz=0.1)
    b.add_ground_plane()
    model = b.finalize(device="cpu")
    E, P = SolverCoupledProxy.Entry, SolverCoupledProxy.Proxy
    solver = SolverCoupledProxy(model, entries=[
        E(name="rigid", solver=lambda v: newton.solvers.SolverFeatherstone(v), bodies=[0]),
        E(name="soft", solver=lambda v: newton.solvers.SolverXPBD(v, iterations=4), bodies=[1]),
    ], coupling=SolverCoupledProxy.Config(proxies=[P("rigid", "soft", bodies=[0], mode=mode)]))  # fmt: skip
    check_step_host_sync(monkeypatch, model, solver, dt=1e-2)


def test_solver_coupled_admm_step_does_not_synchronise(monkeypatch):
    from armillary.solvers.experimental.coupled import SolverCoupledADMM
    from armillary.sweep.scenes import two_link_pendulum

    builder, _ = two_link_pendulum()
    model = builder.finalize(device="cpu")
    solver = SolverCoupledADMM(model, [
        SolverCoupledADMM.Entry("rigid", lambda v: newton.solvers.SolverFeatherstone(v), bodies=[0]),
        SolverCoupledADMM.Entry("soft", lambda v: newton.solvers.SolverXPBD(v, iterations=4), bodies=[1]),
    ], SolverCoupledADMM.Config(iterations=4))  # fmt: skip
    check_step_host_sync(monkeypatch, model, solver, collide=False, dt=1.0 / 600.0)

"""SolverFeatherstone with many stiff contacts on light links (regression).

The penalty contact forces used to be explicit: a 30 g knuckle of the Robotiq 2F-140 gripper,
whose collision mesh overlaps the (world-fixed) hand mesh by ~22 mm at rest, got ~40
penetrating mesh-mesh contacts at ke = 2500 N/m each, i.e. ``dt^2 sum(ke) / m_eff`` far above
the explicit stability limit at dt = 1/600 s: the joint velocities grew ~15x per step and
were NaN after ~5 steps. The contact stiffness and damping are now linearly implicit (added
to the mass matrix through the contact Jacobians), as the joint drives and limits are.
"""

from __future__ import annotations

import math

import numpy as np
import warp as wp

import armillary
from armillary.runner import RunOptions, run
from armillary.solvers import SolverFeatherstone
from armillary.testing.assets import shared_assets_dir

wp.config.log_level = wp.LOG_WARNING
G = 9.81


def _assets():
    root = shared_assets_dir()
    assert root is not None, "shared/assets (robot-model corpus) not found; set ARMILLARY_ASSETS"
    return root


def test_robotiq_gripper_stays_finite_with_overlapping_mesh_links():
    """The imported gripper (mesh-mesh self contacts between links that overlap at rest) stays
    finite and does not gain energy over 150 steps at the runner's dt (it was NaN by step 5)."""
    path = _assets() / "mjcf" / "robotiq_2f140" / "robotiq_gripper_140.xml"
    r = run(RunOptions(model_file=str(path), solver="SolverFeatherstone", frames=15, out=None, progress=False))
    assert math.isfinite(r.energy_end) and math.isfinite(r.min_height), r.lines()
    assert r.energy_end < r.energy_start + 0.05, r.lines()


def test_light_box_with_stiff_contacts_rests_stably_at_large_dt():
    """A 10 g box on the ground with ke = 1e5 N/m per contact (4 corners: dt^2 sum ke / m = 111
    at dt = 1/600, ~30x the explicit limit) stays on the ground instead of diverging: after 1 s
    it is at its half height within 20 um, with a residual speed below g dt (the contact
    switches on and off between steps at rest; its amplitude is g dt^2, 14 um here)."""
    mass, ke, dt = 0.01, 1.0e5, 1.0 / 600.0
    b = armillary.ModelBuilder(gravity=(0.0, 0.0, -G))
    cfg = armillary.ModelBuilder.ShapeConfig(density=0.0, ke=ke, kd=10.0, kf=100.0)
    body = b.add_body(xform=wp.transform((0.0, 0.0, 0.0205), wp.quat_identity()), mass=mass,
                      inertia=wp.mat33(np.eye(3, dtype=np.float32) * 1.0e-6))  # fmt: skip
    b.add_shape_box(body, hx=0.02, hy=0.02, hz=0.02, cfg=cfg)
    b.add_ground_plane(cfg=cfg)
    model = b.finalize(device="cpu")
    solver = SolverFeatherstone(model, angular_damping=0.0)
    pipeline = armillary.CollisionPipeline(model)
    cts = pipeline.contacts()
    s0, s1 = model.state(), model.state()
    armillary.eval_fk(model, s0.joint_q, s0.joint_qd, s0)
    for _ in range(600):
        s0.clear_forces()
        pipeline.collide(s0, cts)
        solver.step(s0, s1, None, cts, dt)
        s0, s1 = s1, s0
    q, qd = s0.body_q.numpy()[0], s0.body_qd.numpy()[0]
    assert np.isfinite(q).all() and np.isfinite(qd).all()
    assert abs(q[2] - 0.02) < 2e-5, q[2]
    assert np.abs(q[:2]).max() < 1e-6 and np.abs(qd).max() < G * dt, (q, qd)

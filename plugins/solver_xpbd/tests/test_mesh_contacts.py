"""SolverXPBD on an imported mesh robot (Kinova Jaco, mesh-mesh contacts) and hinge limits wider than pi.

The Jaco MJCF has hinge ranges such as ``[0.82, 5.46]`` rad. A hinge angle measured from body poses
only lies in ``[-pi, pi]``; compared with such a range unshifted, legal poses read as violations and
get snapped across the circle in one substep, which pumped energy into the arm until it went NaN
(first non-finite value: ``body_qd`` after ``solve_joints_kernel``'s limit correction; the contacts
stayed finite with unit normals).
"""

from __future__ import annotations

import math

import numpy as np
import warp as wp

import armillary
from armillary import ModelBuilder
from armillary.testing.assets import shared_assets_dir
from armillary_solver_xpbd.solver import SolverXPBD

JACO = "mjcf/jaco_arm/jaco_arm.xml"


def _energy(model, state) -> float:
    """Kinetic + gravitational potential energy of the bodies [J]."""
    from armillary.runner import _energy as energy

    return energy(model, state)


def _hinge_angle_y(q) -> float:
    """Rotation angle about +y of a pose whose rotation is about y, in [-pi, pi]."""
    return 2.0 * math.atan2(float(q[4]), float(q[6]))


def _wrap(a: float) -> float:
    return (a + math.pi) % (2.0 * math.pi) - math.pi


def _pendulum(angle: float, lo: float, hi: float, gravity: float):
    b = ModelBuilder(gravity=(0.0, 0.0, gravity))
    body = b.add_link(xform=wp.transform_identity())
    b.add_shape_box(body, xform=wp.transform(wp.vec3(0.3, 0.0, 0.0), wp.quat_identity()), hx=0.3, hy=0.05, hz=0.05,
                    cfg=ModelBuilder.ShapeConfig(density=500.0, has_shape_collision=False))
    j = b.add_joint_revolute(parent=-1, child=body, axis=wp.vec3(0.0, 1.0, 0.0), limit_lower=lo, limit_upper=hi)
    b.add_articulation([j])
    model = b.finalize(device="cpu")
    q = model.joint_q.numpy()
    q[0] = angle
    model.joint_q.assign(q)
    state = model.state()
    armillary.eval_fk(model, model.joint_q, model.joint_qd, state)
    return model, state


def _step(model, solver, state, steps, dt, contacts=None, each=None):
    s0, s1 = state, model.state()
    control = model.control()
    for _ in range(steps):
        s0.clear_forces()
        if contacts is not None:
            model.collide(s0, contacts)
        solver.step(s0, s1, control, contacts, dt)
        s0, s1 = s1, s0
        if each is not None:
            each(s0)
    return s0


def test_hinge_range_wider_than_pi_keeps_a_legal_pose():
    """An angle inside [0.5, 5.5] but past pi (reads as -2.78) is not a limit violation."""
    model, state = _pendulum(3.5, 0.5, 5.5, gravity=0.0)
    solver = SolverXPBD(model)
    out = _step(model, solver, state, 60, 1.0 / 600.0)
    q = out.body_q.numpy()[0]
    assert abs(_wrap(_hinge_angle_y(q) - 3.5)) < 1e-3
    assert np.abs(out.body_qd.numpy()).max() < 1e-3


def test_hinge_range_wider_than_pi_corrects_towards_the_nearer_bound():
    """A violation is measured from the nearer bound across the forbidden arc: 5.9 moves down towards 5.5
    (not up across the seam to 0.5, where -0.38 = 5.9 - 2 pi would be pushed), 0.2 moves up towards 0.5."""
    for start, sign in ((5.9, -1.0), (0.2, 1.0)):
        model, state = _pendulum(start, 0.5, 5.5, gravity=0.0)
        solver = SolverXPBD(model)
        out = _step(model, solver, state, 1, 1.0 / 600.0)
        moved = _wrap(_hinge_angle_y(out.body_q.numpy()[0]) - start)
        assert 0.05 < sign * moved <= 0.31, (start, moved)


def test_swinging_hinge_with_wide_range_conserves_energy():
    """A pendulum released above horizontal (3.5 rad; the bottom is pi/2) swings down through the pi seam
    of its [0.2, 6.08] range and into the lower bound: its energy never grows."""
    model, state = _pendulum(3.5, 0.2, 2.0 * math.pi - 0.2, gravity=-9.81)
    solver = SolverXPBD(model)
    e0 = _energy(model, state)
    energies = []
    angles = []

    def record(s):
        energies.append(_energy(model, s))
        angles.append(_hinge_angle_y(s.body_q.numpy()[0]) % (2.0 * math.pi))

    _step(model, solver, state, 600, 1.0 / 600.0, each=record)
    assert np.isfinite(energies).all()
    assert min(angles) < 2.0  # it did swing down past the bottom
    assert max(energies) < e0 + 0.02 * abs(e0) + 1e-3, (e0, max(energies))


def test_jaco_arm_with_mesh_contacts_stays_finite_and_does_not_gain_energy():
    """The Jaco MJCF (SDF mesh-mesh contacts between overlapping links), posed with joint_2 past pi."""
    assets = shared_assets_dir()
    assert assets is not None, "shared/assets (robot corpus) not found; set ARMILLARY_ASSETS"
    path = assets / JACO
    from armillary.plugins import get_registry
    from armillary.sim.enums import GeoType

    builder = ModelBuilder()
    get_registry().importers.for_path(path).load()(builder, str(path))
    seen = set()
    for s in range(builder.shape_count):
        mesh = builder.shape_source[s]
        if int(builder.shape_type[s]) == int(GeoType.MESH) and id(mesh) not in seen:
            seen.add(id(mesh))
            mesh.build_sdf(max_resolution=32)
    dt = float(getattr(builder, "timestep", None) or 0.002)
    model = builder.finalize(device="cpu")
    q = model.joint_q.numpy()
    q[:6] = [0.3, 3.5, 2.2, 0.5, 1.0, 0.0]  # joint_2 in [0.82, 5.46] but past pi
    model.joint_q.assign(q)
    state = model.state()
    armillary.eval_fk(model, model.joint_q, model.joint_qd, state)

    solver = SolverXPBD(model)
    contacts = model.contacts()
    e0 = _energy(model, state)
    energies, counts = [], []

    def record(s):
        energies.append(_energy(model, s))
        counts.append(int(contacts.rigid_contact_count.numpy()[0]))

    out = _step(model, solver, state, 300, dt, contacts=contacts, each=record)
    assert max(counts) > 0  # the links do touch (adjacent-link mesh contacts)
    assert np.isfinite(out.body_q.numpy()).all() and np.isfinite(out.body_qd.numpy()).all()
    assert np.isfinite(energies).all()
    # the arm falls from rest: total energy may only drop (contacts, limits and damping dissipate)
    assert max(energies) < e0 + 0.1, (e0, max(energies))


TALOS = "urdf/talos/example-robot-data/robots/talos_data/robots/talos_reduced.urdf"


def test_talos_massless_sensor_frames_do_not_blow_up_the_jacobi_joint_pass():
    """TALOS (reduced URDF, fixed base): ``rgbd_link`` (10 g, I_zz = 2e-6) carries fixed child frames
    with mass 0 (``rgbd_depth_frame``, ``rgbd_rgb_frame``: static anchors for XPBD) and a 10 g frame
    with zero inertia (``rgbd_optical_frame``: rotation locked), so it took the whole correction of
    four joints at once. Summed unweighted (Jacobi), the projection overshot by ~4x and diverged:
    ``body_qd`` of ``rgbd_link`` was ~1e34 at step 35 and NaN at step 36 even without contacts.
    Each body's joint corrections are now divided by the sum of its correction shares when above 1.
    """
    import warnings

    assets = shared_assets_dir()
    assert assets is not None, "shared/assets (robot corpus) not found; set ARMILLARY_ASSETS"
    path = assets / TALOS
    from armillary.plugins import get_registry

    builder = ModelBuilder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the reduced model's <mimic> tags on fixed joints
        get_registry().importers.for_path(path).load()(builder, str(path))
    model = builder.finalize(device="cpu")
    labels = list(model.body_label)
    assert model.body_mass.numpy()[labels.index("rgbd_depth_frame")] == 0.0  # the trigger is still there
    state = model.state()
    solver = SolverXPBD(model)
    e0 = _energy(model, state)
    energies = []
    out = _step(model, solver, state, 300, 1.0 / 600.0, each=lambda s: energies.append(_energy(model, s)))
    assert np.isfinite(out.body_q.numpy()).all() and np.isfinite(out.body_qd.numpy()).all()
    assert np.isfinite(energies).all()
    assert max(energies) < e0 + 1.0, (e0, max(energies))
    assert np.abs(out.body_qd.numpy()).max() < 1.0e3

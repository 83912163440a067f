"""The conformance kit's checks of the features beyond free bodies: :class:`FeatureChecks`.

Mixed into :class:`armillary.testing.SolverConformance`; every check builds a small scene, runs
the solver under test for well under a second of simulated time and compares the outcome with an
analytic expectation within a :class:`~armillary.testing.Tolerances` field. Each check names the
features and joint types it needs and is skipped, saying which, when the solver does not declare
them. One check per declarable feature and joint type:

* joint types: PRISMATIC (a slider falls at ``g`` projected on its axis), BALL (a spherical
  pendulum keeps its anchor and its energy), FIXED (a welded child keeps its pose relative to a
  spinning, falling parent), D6 (a hinge on a slider: locked axes stay locked, the free slide
  lets the COM fall straight down), DISTANCE (a body on a rope stays within its maximum distance),
  ROD (a pinned rod stays connected and its bending stiffness holds it up);
* joint features on a one-DOF joint (a REVOLUTE hinge through the COM, or a PRISMATIC slider
  when the solver has no REVOLUTE): ``joint_forces`` (``qdd = f / M``), ``joint_armature``
  (``qdd = f / (M + a)``), ``joint_damping`` (``qd = qd0 exp(-c t / M)``), ``joint_friction``
  (dry friction: ``qd`` falls linearly at ``f / M`` and stops), ``joint_velocity_limits``,
  ``joint_springs`` (period ``2 pi sqrt(M / k)`` about ``rest_q``), ``joint_drives`` (a position
  drive reaches ``Control.joint_target_q``, a velocity drive ``Control.joint_target_qd``),
  ``joint_limits`` (a pendulum falling onto its limit stops there), ``joint_limit_springs`` (a soft
  limit holds the static load at a deflection of load / ``limit_ke``), ``mimic_joints``
  (``q_follower = c0 + c1 q_leader``), ``loop_joints`` (a parallelogram four-bar stays closed);
* contacts and particles: ``restitution`` (rebound height ``e^2`` of the drop height),
  ``particle_contacts`` (a particle rests on the ground, another on a fixed particle),
  ``springs`` (two particles on a spring oscillate with period ``2 pi sqrt(m_red / k)``),
  ``cloth`` (a cloth pinned along one edge swings down without stretching), ``soft_bodies`` (a
  tetrahedral block clamped on one face keeps its volume).

The analytic expectations assume no energy loss beyond what the scene itself sets (no artificial
damping): a solver that damps by default sets ``solver_kwargs`` (or documents a wider tolerance).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ..sim.enums import JointType

__all__ = ["FeatureChecks"]


def _xform(p, q=None):
    import warp as wp

    return wp.transform(wp.vec3(*[float(x) for x in p]), q if q is not None else wp.quat_identity())


def _diag(a, b=None, c=None):
    import warp as wp

    b = a if b is None else b
    c = a if c is None else c
    return wp.mat33(a, 0.0, 0.0, 0.0, b, 0.0, 0.0, 0.0, c)


def _axis_angle(axis, angle):
    import warp as wp

    a = np.asarray(axis, dtype=np.float64)
    a = a / np.linalg.norm(a)
    return wp.quat_from_axis_angle(wp.vec3(*a.tolist()), float(angle))


def _twist_angle(quat, axis) -> float:
    """Rotation angle of the xyzw quaternion ``quat`` about the unit ``axis`` (its twist part)."""
    q = np.asarray(quat, dtype=np.float64)
    return 2.0 * math.atan2(float(np.dot(q[:3], axis)), float(q[3]))


def _crossings(t, x) -> np.ndarray:
    """Times at which ``x`` changes sign (linear interpolation between samples)."""
    t = np.asarray(t, dtype=np.float64)
    x = np.asarray(x, dtype=np.float64)
    i = np.nonzero(np.signbit(x[:-1]) != np.signbit(x[1:]))[0]
    return t[i] - x[i] * (t[i + 1] - t[i]) / (x[i + 1] - x[i])


def _period(t, x, what: str) -> float:
    """Oscillation period of ``x`` (zero mean) from its zero crossings; fails when it does not oscillate."""
    c = _crossings(t, x)
    assert len(c) >= 3, (
        f"{what}: no oscillation (the signal crossed its equilibrium {len(c)} time(s) in {t[-1]:.2f} s, "
        f"range {np.min(x):.3g} .. {np.max(x):.3g})"
    )
    return 2.0 * float(np.mean(np.diff(c)))


class _Dof:
    """A body on a one-DOF joint to the world, with its coordinate read back from the body pose.

    REVOLUTE: a hinge about world z through the COM (generalized inertia ``M = I_zz``);
    PRISMATIC: a slider along world x (``M = m``). No gravity acts along the DOF in either case.
    """

    MASS = 1.0
    INERTIA = 0.01

    def __init__(self, b, jt, pos, articulation=True, **joint_kw):
        self.jt = JointType(jt)
        self.pos = np.asarray(pos, dtype=np.float64)
        self.body = b.add_link(xform=_xform(pos), mass=self.MASS, inertia=_diag(self.INERTIA))
        if self.jt == JointType.REVOLUTE:
            self.joint = b.add_joint_revolute(-1, self.body, parent_xform=_xform(pos), axis=(0.0, 0.0, 1.0), **joint_kw)
        else:
            self.joint = b.add_joint_prismatic(-1, self.body, parent_xform=_xform(pos), axis=(1.0, 0.0, 0.0),
                                               **joint_kw)  # fmt: skip
        if articulation:
            b.add_articulation([self.joint])

    @classmethod
    def inertia_of(cls, jt) -> float:
        """Generalized inertia ``M`` of a joint of type ``jt``."""
        return cls.INERTIA if JointType(jt) == JointType.REVOLUTE else cls.MASS

    @property
    def M(self) -> float:
        return self.inertia_of(self.jt)

    @property
    def unit(self) -> str:
        return "rad" if self.jt == JointType.REVOLUTE else "m"

    def q(self, sim) -> float:
        x = sim.body_q()[self.body]
        if self.jt == JointType.REVOLUTE:
            return _twist_angle(x[3:7], (0.0, 0.0, 1.0))
        return float(x[0] - self.pos[0])

    def qd(self, sim) -> float:
        v = sim.body_qd()[self.body]
        return float(v[5] if self.jt == JointType.REVOLUTE else v[0])

    def twist(self, rate: float) -> np.ndarray:
        """The body twist (linear first) of joint rate ``rate``."""
        out = np.zeros(6)
        out[5 if self.jt == JointType.REVOLUTE else 0] = rate
        return out

    def dof(self, model) -> int:
        return int(model.joint_qd_start.numpy()[self.joint])


class _LoadedDof:
    """A one-DOF joint under a gravity load that drives its coordinate ``q`` positive.

    REVOLUTE: a pendulum (length ``L``) released horizontally, about world y; ``q`` is the angle
    below the horizontal and the load ``m g L cos q``. PRISMATIC: a vertical slider (axis -z), ``q``
    its descent and the load ``m g``. The joint starts at ``q = 0``.
    """

    L = 0.5
    MASS = 1.0
    INERTIA = 0.05

    def __init__(self, b, jt, **joint_kw):
        self.jt = JointType(jt)
        self.pivot = np.array([0.0, 0.0, 2.0])
        if self.jt == JointType.REVOLUTE:
            self.body = b.add_link(xform=_xform(self.pivot + [self.L, 0.0, 0.0]), mass=self.MASS,
                                   inertia=_diag(self.INERTIA))  # fmt: skip
            self.joint = b.add_joint_revolute(-1, self.body, parent_xform=_xform(self.pivot),
                                              child_xform=_xform((-self.L, 0.0, 0.0)), axis=(0.0, 1.0, 0.0),
                                              **joint_kw)  # fmt: skip
        else:
            self.body = b.add_link(xform=_xform(self.pivot), mass=self.MASS, inertia=_diag(self.INERTIA))
            self.joint = b.add_joint_prismatic(-1, self.body, parent_xform=_xform(self.pivot), axis=(0.0, 0.0, -1.0),
                                               **joint_kw)  # fmt: skip
        b.add_articulation([self.joint])

    @property
    def unit(self) -> str:
        return "rad" if self.jt == JointType.REVOLUTE else "m"

    @classmethod
    def inertia_of(cls, jt) -> float:
        """Generalized inertia about the joint of type ``jt``."""
        return cls.INERTIA + cls.MASS * cls.L**2 if JointType(jt) == JointType.REVOLUTE else cls.MASS

    def load(self, q: float, g: float) -> float:
        return self.MASS * g * (self.L * math.cos(q) if self.jt == JointType.REVOLUTE else 1.0)

    def q(self, sim) -> float:
        x = sim.body_q()[self.body]
        if self.jt == JointType.REVOLUTE:
            return _twist_angle(x[3:7], (0.0, 1.0, 0.0))
        return float(self.pivot[2] - x[2])


class FeatureChecks:
    """Physical checks of every declarable feature and joint type (mixed into ``SolverConformance``)."""

    # ---------------------------------------------------------------- helpers
    def _one_dof_type(self, *features: str) -> JointType:
        """REVOLUTE when declared, else PRISMATIC (skipping, with the reason, when neither is)."""
        caps = self.capabilities()
        self.require("rigid_bodies", *features)
        for jt in (JointType.REVOLUTE, JointType.PRISMATIC):
            if jt in caps.joint_types:
                return jt
        pytest.skip(f"{self.solver_class().__name__} declares neither REVOLUTE nor PRISMATIC joints")

    def _dof_sim(self, jt, **joint_kw):
        """A :class:`_Dof` of type ``jt`` without gravity: ``(model, sim, [dof])``."""
        b = self.builder(gravity=(0.0, 0.0, 0.0))
        dof = _Dof(b, jt, (0.0, 0.0, 1.0), **joint_kw)
        model = self.finalize(b)
        return model, self.sim(model), [dof]

    def _set_dof_rates(self, sim, dofs, rates):
        qd = np.zeros((sim.model.body_count, 6))
        for d, r in zip(dofs, rates):
            qd[d.body] = d.twist(r)
        sim.set_body_qd(qd)

    def _record(self, sim, steps, fn, apply=None):
        """Step ``steps`` times recording ``(time, fn(sim))`` after each step."""
        ts, vals = [], []

        def rec(s):
            ts.append(s.time)
            vals.append(fn(s))

        sim.step(int(steps), apply=apply, record=rec)
        return np.asarray(ts), np.asarray(vals, dtype=np.float64)

    def _steps(self, seconds: float) -> int:
        return int(round(seconds / self.dt))

    # ============================================================ joint types
    def test_prismatic_joint_slides_under_gravity(self):
        """PRISMATIC: a slider on an axis 45 degrees off vertical accelerates at ``g`` projected on
        the axis and neither leaves the axis nor turns (within the free-fall bound)."""
        self.require("rigid_bodies", joint_types=[JointType.PRISMATIC])
        tol = self.tolerances
        axis = np.array([1.0, 0.0, 1.0]) / math.sqrt(2.0)
        b = self.builder()
        x0 = np.array([0.0, 0.0, 2.0])
        body = b.add_link(xform=_xform(x0), mass=1.0, inertia=_diag(0.01))
        j = b.add_joint_prismatic(-1, body, parent_xform=_xform(x0), axis=tuple(axis))
        b.add_articulation([j])
        model = self.finalize(b)
        sim = self.sim(model)
        steps = self._steps(0.3)
        sim.step(steps)
        t = steps * self.dt
        g = self.gravity(model)
        expected = x0 + 0.5 * (g @ axis) * axis * t * t
        err = np.linalg.norm(sim.com()[body] - expected)
        bound = float(np.linalg.norm(g)) * t * self.dt + tol.free_fall_abs
        assert err <= bound, (
            f"PRISMATIC slider (axis {axis.round(3).tolist()}): COM {sim.com()[body].round(4).tolist()} "
            f"after {t:.2f} s, "
            f"expected {expected.round(4).tolist()} (g projected on the axis; error {err:.2e} m > {bound:.2e} m)"
        )
        rot = sim.body_q()[body, 3:7]
        assert abs(abs(rot[3]) - 1.0) <= 1e-3, f"PRISMATIC slider turned: orientation {rot.round(5).tolist()}"

    def test_ball_joint_keeps_its_anchor(self):
        """BALL: a spherical pendulum released horizontally with a sideways and a twisting velocity
        keeps its anchor (``pendulum_length``) and its energy (``pendulum_energy``) for 0.5 s."""
        self.require("rigid_bodies", joint_types=[JointType.BALL])
        tol = self.tolerances
        L, mass = 0.5, 1.0
        pivot = np.array([0.0, 0.0, 2.0])
        b = self.builder()
        link = b.add_link(xform=_xform(pivot + [L, 0.0, 0.0]), mass=mass, inertia=_diag(0.01, 0.02, 0.02))
        j = b.add_joint_ball(-1, link, parent_xform=_xform(pivot), child_xform=_xform((-L, 0.0, 0.0)))
        b.add_articulation([j])
        model = self.finalize(b)
        sim = self.sim(model)
        w = np.array([2.0, 0.0, 2.0])  # twist about the link, swing sideways
        sim.set_body_qd(np.concatenate([np.cross(w, [L, 0.0, 0.0]), w])[None])
        out = self._pendulum_run(sim, model, pivot, L, 0.5)
        assert out["min_z"] <= pivot[2] - 0.5 * L, f"BALL pendulum did not swing down (lowest COM z {out['min_z']:.3f})"
        assert out["dl"] <= tol.pendulum_length * L, (
            f"BALL pendulum: the anchor moved; pivot-COM distance changed by {out['dl']:.3e} m (L = {L} m, "
            f"bound {tol.pendulum_length:.0%})"
        )
        assert out["dE"] <= tol.pendulum_energy * out["scale"], (
            f"BALL pendulum energy error {out['dE']:.3e} J exceeds {tol.pendulum_energy:.0%} of "
            f"m g L = {out['scale']:.3f} J"
        )
        assert out["max_y"] >= 0.05, f"BALL pendulum did not swing sideways (largest |y| {out['max_y']:.3f} m)"

    def _pendulum_run(self, sim, model, pivot, L, seconds):
        g = self.gravity(model)
        I_body = model.body_inertia.numpy().astype(np.float64)[0]
        m = float(model.body_mass.numpy()[0])

        def energy(s):
            q, qd, com = s.body_q()[0], s.body_qd()[0], s.com()[0]
            R = _quat_matrix(q[3:7])
            w = qd[3:]
            return 0.5 * m * qd[:3] @ qd[:3] + 0.5 * w @ (R @ I_body @ R.T) @ w - m * g @ com, com

        E0, _ = energy(sim)
        _, rows = self._record(sim, self._steps(seconds), lambda s: (energy(s)[0], *s.com()[0]))
        com = rows[:, 1:]
        return {
            "min_z": float(com[:, 2].min()),
            "max_y": float(np.abs(com[:, 1]).max()),
            "dl": float(np.abs(np.linalg.norm(com - pivot, axis=1) - L).max()),
            "dE": float(np.abs(rows[:, 0] - E0).max()),
            "scale": m * float(np.linalg.norm(g)) * L,
        }

    def test_fixed_joint_moves_with_its_parent(self):
        """FIXED: a child welded to a spinning, falling parent (FREE; a REVOLUTE pendulum when the
        solver has no FREE joints) keeps its pose in the parent's frame."""
        self.require("rigid_bodies", joint_types=[JointType.FIXED])
        caps = self.capabilities()
        tol = self.tolerances
        b = self.builder()
        p0 = np.array([0.0, 0.0, 2.0])
        offset = np.array([0.3, 0.0, 0.1])
        rel_rot = _axis_angle((0.0, 1.0, 0.0), 0.4)
        import warp as wp

        free = JointType.FREE in caps.joint_types
        if not free and JointType.REVOLUTE not in caps.joint_types:
            pytest.skip(f"{self.solver_class().__name__} declares neither FREE nor REVOLUTE joints for the parent")
        parent = b.add_link(xform=_xform(p0), mass=1.0, inertia=_diag(0.02, 0.03, 0.04))
        if free:
            root = b.add_joint_free(parent)
        else:
            root = b.add_joint_revolute(-1, parent, parent_xform=_xform(p0 + [-0.3, 0.0, 0.0]),
                                        child_xform=_xform((-0.3, 0.0, 0.0)), axis=(0.0, 1.0, 0.0))  # fmt: skip
        child_pose = wp.transform_multiply(_xform(p0), _xform(offset, rel_rot))
        child = b.add_link(xform=child_pose, mass=0.5, inertia=_diag(0.005, 0.01, 0.01))
        j = b.add_joint_fixed(parent, child, parent_xform=_xform(offset, rel_rot))
        b.add_articulation([root, j])
        model = self.finalize(b)
        sim = self.sim(model)
        if free:
            w = np.array([0.0, 0.0, 3.0])
            qd = np.zeros((2, 6))
            qd[parent, 3:] = w
            com = sim.com()
            qd[child, :3] = np.cross(w, com[child] - com[parent])
            qd[child, 3:] = w
            sim.set_body_qd(qd)

        def relative(s):
            q = s.body_q()
            Rp = _quat_matrix(q[parent, 3:7])
            Rc = _quat_matrix(q[child, 3:7])
            return Rp.T @ (q[child, :3] - q[parent, :3]), Rp.T @ Rc

        rel_x0, rel_R0 = relative(sim)
        dx, dang = 0.0, 0.0

        def rec(s):
            nonlocal dx, dang
            x, R = relative(s)
            dx = max(dx, float(np.linalg.norm(x - rel_x0)))
            c = np.clip(0.5 * (np.trace(rel_R0.T @ R) - 1.0), -1.0, 1.0)
            dang = max(dang, math.acos(c))

        turned0 = sim.body_q()[parent, 3:7].copy()
        sim.step(self._steps(0.3), record=rec)
        L = float(np.linalg.norm(offset))
        assert dx <= tol.pendulum_length * L, (
            f"FIXED joint: the child drifted {dx:.3e} m from its welded position in the parent frame "
            f"(lever {L:.3f} m, bound {tol.pendulum_length:.0%})"
        )
        assert dang <= tol.pendulum_length, f"FIXED joint: the child turned {dang:.3e} rad relative to its parent"
        moved = _twist_angle(_quat_mul(_quat_conj(turned0), sim.body_q()[parent, 3:7]), (0.0, 0.0, 1.0))
        if free:
            assert abs(moved) >= 0.5, f"FIXED joint check is vacuous: the parent turned only {moved:.3f} rad"

    def test_d6_joint_locks_its_other_axes(self):
        """D6: a link on a D6 with one linear (x) and one angular (y) axis swings down under gravity:
        the anchor stays on its line, the link turns only about y, the free slide lets the COM fall
        straight down (no horizontal force) and the energy is kept."""
        self.require("rigid_bodies", joint_types=[JointType.D6])
        from ..sim.builder import ModelBuilder

        tol = self.tolerances
        L, mass = 0.5, 1.0
        pivot = np.array([0.0, 0.0, 2.0])
        b = self.builder()
        link = b.add_link(xform=_xform(pivot + [L, 0.0, 0.0]), mass=mass, inertia=_diag(0.05))
        cfg = ModelBuilder.JointDofConfig
        j = b.add_joint_d6(-1, link, linear_axes=[cfg(axis=(1.0, 0.0, 0.0))], angular_axes=[cfg(axis=(0.0, 1.0, 0.0))],
                           parent_xform=_xform(pivot), child_xform=_xform((-L, 0.0, 0.0)))  # fmt: skip
        b.add_articulation([j])
        model = self.finalize(b)
        sim = self.sim(model)
        g = self.gravity(model)
        I_body = model.body_inertia.numpy().astype(np.float64)[0]
        com0 = sim.com()[0]

        def rec(s):
            q, qd, com = s.body_q()[0], s.body_qd()[0], s.com()[0]
            R = _quat_matrix(q[3:7])
            anchor = q[:3] + R @ np.array([-L, 0.0, 0.0])
            w = qd[3:]
            E = 0.5 * mass * qd[:3] @ qd[:3] + 0.5 * w @ (R @ I_body @ R.T) @ w - mass * g @ com
            return (*com, *anchor, q[3], q[5], _twist_angle(q[3:7], (0.0, 1.0, 0.0)), E)

        E0 = rec(sim)[-1]
        _, rows = self._record(sim, self._steps(0.3), rec)
        com, anchor, tilt, angle, E = rows[:, :3], rows[:, 3:6], rows[:, 6:8], rows[:, 8], rows[:, 9]
        scale = mass * float(np.linalg.norm(g)) * L
        assert angle.max() >= 0.3, f"D6 link did not swing down about y (largest angle {angle.max():.3f} rad)"
        off_line = float(np.abs(anchor[:, 1:] - pivot[1:]).max())
        assert off_line <= tol.pendulum_length * L, (
            f"D6 joint: the anchor left its x line by {off_line:.3e} m (locked linear y, z; bound "
            f"{tol.pendulum_length:.0%} of L = {L} m)"
        )
        assert float(np.abs(tilt).max()) <= tol.pendulum_length, (
            f"D6 joint: the link turned about a locked axis (quaternion x/z up to {np.abs(tilt).max():.3e})"
        )
        drift = float(np.abs(com[:, 0] - com0[0]).max())
        assert drift <= tol.pendulum_length * L, (
            f"D6 joint: the COM moved {drift:.3e} m horizontally; the free x slide carries no horizontal force, "
            "so it must fall straight down"
        )
        dE = float(np.abs(E - E0).max())
        assert dE <= tol.pendulum_energy * scale, (
            f"D6 pendulum energy error {dE:.3e} J exceeds {tol.pendulum_energy:.0%} of m g L = {scale:.3f} J"
        )

    def test_distance_joint_keeps_its_range(self):
        """DISTANCE: a body on a distance joint (range [L/2, L]) released at distance L swings down
        on it like a pendulum instead of falling away."""
        self.require("rigid_bodies", joint_types=[JointType.DISTANCE])
        tol = self.tolerances
        L = 0.5
        pivot = np.array([0.0, 0.0, 2.0])
        b = self.builder()
        body = b.add_link(xform=_xform(pivot + [L, 0.0, 0.0]), mass=1.0, inertia=_diag(0.01))
        j = b.add_joint_distance(-1, body, parent_xform=_xform(pivot), min_distance=0.5 * L, max_distance=L)
        b.add_articulation([j])
        model = self.finalize(b)
        sim = self.sim(model)
        _, com = self._record(sim, self._steps(0.45), lambda s: s.com()[body])
        d = np.linalg.norm(com - pivot, axis=1)
        assert d.max() <= L * (1.0 + tol.pendulum_length), (
            f"DISTANCE joint: the anchors moved {d.max():.4f} m apart, beyond max_distance = {L} m "
            f"(bound +{tol.pendulum_length:.0%})"
        )
        assert d.min() >= 0.5 * L * (1.0 - tol.pendulum_length), (
            f"DISTANCE joint: anchors {d.min():.4f} m apart, below min_distance = {0.5 * L} m"
        )
        assert com[:, 2].min() <= pivot[2] - 0.5 * L, "DISTANCE joint: the body did not swing down"

    def test_rod_joints_hold_a_cantilever(self):
        """ROD: a horizontal rod of four segments clamped at one end by ROD joints stays connected
        (stretch below ``pendulum_length``) and its bending stiffness holds it up: the tip sags by
        the discrete Euler-Bernoulli deflection within ``limit_spring_rel``."""
        self.require("rigid_bodies", joint_types=[JointType.ROD])
        tol = self.tolerances
        n, h, seg_mass, EI = 4, 0.1, 0.1, 2.0
        origin = np.array([0.0, 0.0, 1.0])
        z_to_x = _axis_angle((0.0, 1.0, 0.0), 0.5 * math.pi)
        b = self.builder()
        inertia = seg_mass * h * h / 12.0
        bodies = []
        joints = []
        for i in range(n):
            bodies.append(b.add_link(xform=_xform(origin + [(i + 0.5) * h, 0.0, 0.0], z_to_x), mass=seg_mass,
                                     inertia=_diag(inertia, inertia, 0.1 * inertia)))  # fmt: skip
        for i in range(n):
            kb = (2.0 if i == 0 else 1.0) * EI / h
            parent = -1 if i == 0 else bodies[i - 1]
            px = _xform(origin, z_to_x) if i == 0 else _xform((0.0, 0.0, 0.5 * h))
            joints.append(b.add_joint_rod(parent, bodies[i], parent_xform=px, child_xform=_xform((0.0, 0.0, -0.5 * h)),
                                          stretch_stiffness=1.0e6, bend_stiffness=kb,
                                          bend_damping=0.05 * kb))  # fmt: skip
        b.add_articulation(joints)
        model = self.finalize(b)
        sim = self.sim(model)
        g = float(np.linalg.norm(self.gravity(model)))
        total = n * h
        w = seg_mass * g / h
        # junction j at x_j = j h turns by M(x_j) / k_j; the tip sags by sum M(x_j) (L - x_j) / k_j
        expected = sum(w * (total - j * h) ** 2 / 2.0 * (total - j * h) / ((2.0 if j == 0 else 1.0) * EI / h)
                       for j in range(n))  # fmt: skip
        sim.step(self._steps(0.25))
        _, rows = self._record(sim, self._steps(0.05), lambda s: s.body_q().copy())
        ends = rows[-1, :, :3]
        last = rows[:, -1]
        tips = np.array([x[:3] + _quat_matrix(x[3:7]) @ np.array([0.0, 0.0, 0.5 * h]) for x in last])
        sag = origin[2] - float(tips[:, 2].mean())
        gaps = np.linalg.norm(np.diff(ends, axis=0), axis=1)
        assert np.abs(gaps - h).max() <= tol.pendulum_length * h, (
            f"ROD joints: segment spacing {gaps.round(4).tolist()} m, rest {h} m: the rod came apart"
        )
        assert abs(sag - expected) <= tol.limit_spring_rel * expected, (
            f"ROD cantilever: tip sag {sag * 1e3:.2f} mm, expected w L^4 / (8 EI) discretised = "
            f"{expected * 1e3:.2f} mm "
            f"(+-{tol.limit_spring_rel:.0%})"
        )

    # ============================================================ joint features
    def test_joint_forces(self):
        """``joint_forces``: ``Control.joint_f`` on a free one-DOF joint accelerates it at ``f / M``."""
        jt = self._one_dof_type("joint_forces")
        self._check_joint_force_acceleration(jt, armature=0.0)

    def test_joint_armature(self):
        """``joint_armature`` (with ``joint_forces``): armature ``a = M`` halves the acceleration to
        ``f / (M + a)``."""
        jt = self._one_dof_type("joint_armature", "joint_forces")
        self._check_joint_force_acceleration(jt, armature=_Dof.inertia_of(jt))

    def _check_joint_force_acceleration(self, jt, armature):
        tol = self.tolerances
        model, sim, (dof,) = self._dof_sim(jt, armature=armature)
        accel = 2.0
        f = accel * dof.M
        jf = np.zeros(model.joint_dof_count, dtype=np.float32)
        jf[dof.dof(model)] = f
        sim.control.joint_f.assign(jf)
        steps = self._steps(0.2)
        sim.step(steps)
        t = steps * self.dt
        expected = f / (dof.M + armature) * t
        got = dof.qd(sim)
        what = f"armature {armature:g}, " if armature else ""
        assert abs(got - expected) <= tol.joint_rel * expected, (
            f"{jt.name} joint ({what}M = {dof.M:g}) under joint_f = {f:g}: rate {got:.4f} {dof.unit}/s "
            f"after {t:.2f} s, "
            f"expected f / (M + armature) t = {expected:.4f} (+-{tol.joint_rel:.0%})"
        )
        q = dof.q(sim)
        assert abs(q - 0.5 * expected * t) <= 2.0 * tol.joint_rel * 0.5 * expected * t, (
            f"{jt.name} joint under joint_f: coordinate {q:.4f} {dof.unit}, expected {0.5 * expected * t:.4f}"
        )

    def test_joint_damping(self):
        """``joint_damping``: the rate of a spinning one-DOF joint decays as ``exp(-c t / M)``."""
        jt = self._one_dof_type("joint_damping")
        tol = self.tolerances
        rate = 2.0
        model, sim, (dof,) = self._dof_sim(jt, damping=rate * _Dof.inertia_of(jt))
        self._set_dof_rates(sim, [dof], [1.0])
        steps = self._steps(0.3)
        sim.step(steps)
        t = steps * self.dt
        expected = math.exp(-rate * t)
        got = dof.qd(sim)
        assert abs(got - expected) <= tol.joint_rel * expected, (
            f"{jt.name} joint with damping c = {rate * dof.M:g} (M = {dof.M:g}): rate {got:.4f} {dof.unit}/s after "
            f"{t:.2f} s from 1, expected exp(-c t / M) = {expected:.4f} (+-{tol.joint_rel:.0%})"
        )

    def test_joint_friction(self):
        """``joint_friction``: dry friction ``f`` slows a spinning one-DOF joint linearly at ``f / M``
        and then holds it still."""
        jt = self._one_dof_type("joint_friction")
        tol = self.tolerances
        decel = 2.0
        friction = decel * _Dof.inertia_of(jt)
        model, sim, (dof,) = self._dof_sim(jt, friction=friction)
        self._set_dof_rates(sim, [dof], [1.0])
        t, rows = self._record(sim, self._steps(0.7), lambda s: (dof.q(s), dof.qd(s)))
        i = int(np.searchsorted(t, 0.25))
        expected = 1.0 - decel * t[i]
        assert abs(rows[i, 1] - expected) <= tol.joint_rel, (
            f"{jt.name} joint with friction {friction:g} (M = {dof.M:g}): rate {rows[i, 1]:.4f} {dof.unit}/s at "
            f"t = {t[i]:.2f} s from 1, expected 1 - f t / M = {expected:.4f} (+-{tol.joint_rel:g})"
        )
        tail = rows[int(np.searchsorted(t, 0.6)):]
        assert np.abs(tail[:, 1]).max() <= 0.02, (
            f"{jt.name} joint with friction: still moving at {np.abs(tail[:, 1]).max():.4f} {dof.unit}/s after "
            f"{t[-1]:.2f} s (stops at t = M / f = 0.5 s)"
        )
        stop = 1.0 / (2.0 * decel)
        assert abs(rows[-1, 0] - stop) <= 2.0 * tol.joint_rel * stop, (
            f"{jt.name} joint with friction stopped at {rows[-1, 0]:.4f} {dof.unit}, "
            f"expected M qd0^2 / (2 f) = {stop:.4f}"
        )

    def test_joint_velocity_limits(self):
        """``joint_velocity_limits``: a one-DOF joint started at three times its velocity limit runs
        at the limit (within ``joint_rel``) from 0.05 s on."""
        jt = self._one_dof_type("joint_velocity_limits")
        tol = self.tolerances
        limit = 0.5
        model, sim, (dof,) = self._dof_sim(jt, velocity_limit=limit)
        self._set_dof_rates(sim, [dof], [3.0 * limit])
        sim.step(self._steps(0.05))
        _, qd = self._record(sim, self._steps(0.1), lambda s: dof.qd(s))
        assert np.abs(qd).max() <= limit * (1.0 + tol.joint_rel), (
            f"{jt.name} joint with velocity_limit {limit}: rate up to {np.abs(qd).max():.4f} {dof.unit}/s"
        )
        assert qd.min() >= limit * (1.0 - tol.joint_rel), (
            f"{jt.name} joint with velocity_limit {limit}: rate fell to {qd.min():.4f} {dof.unit}/s; it should be "
            "clamped to the limit, not stopped"
        )

    def test_joint_springs(self):
        """``joint_springs``: a one-DOF joint with stiffness ``k`` released ``0.2`` from ``rest_q``
        oscillates about it with period ``2 pi sqrt(M / k)`` (within ``period_rel``)."""
        jt = self._one_dof_type("joint_springs")
        tol = self.tolerances
        period = 0.25
        M = _Dof.inertia_of(jt)
        k = M * (2.0 * math.pi / period) ** 2
        rest = -0.2
        model, sim, (dof,) = self._dof_sim(jt, stiffness=k, rest_q=rest)
        t, q = self._record(sim, self._steps(0.35), lambda s: dof.q(s))
        got = _period(t, q - rest, f"{jt.name} joint spring (k = {k:.4g}, rest_q = {rest})")
        assert abs(got - period) <= tol.period_rel * period, (
            f"{jt.name} joint spring: period {got:.4f} s, expected 2 pi sqrt(M / k) = {period:.4f} s "
            f"(+-{tol.period_rel:.0%})"
        )
        assert abs(q.min() - 2.0 * rest) <= 0.2 * abs(rest), (
            f"{jt.name} joint spring: swung to {q.min():.4f} {dof.unit}, "
            f"expected 2 rest_q = {2.0 * rest} (no energy loss)"
        )

    def test_joint_drives(self):
        """``joint_drives``: a critically damped position drive reaches ``Control.joint_target_q`` and
        a velocity drive (``target_ke = 0``) ``Control.joint_target_qd`` (set after construction)."""
        jt = self._one_dof_type("joint_drives")
        tol = self.tolerances
        M = _Dof.inertia_of(jt)
        w = 20.0
        b = self.builder(gravity=(0.0, 0.0, 0.0))
        pos = _Dof(b, jt, (0.0, 0.0, 1.0), target_ke=M * w * w, target_kd=2.0 * M * w)
        vel = _Dof(b, jt, (1.0, 0.0, 1.0), target_ke=0.0, target_kd=M * w)
        model = self.finalize(b)
        sim = self.sim(model)
        target_q, target_qd = 0.3, 1.0
        tq = model.joint_target_q.numpy().copy()
        tq[int(model.joint_q_start.numpy()[pos.joint])] = target_q
        tqd = np.zeros(model.joint_dof_count, dtype=np.float32)
        tqd[vel.dof(model)] = target_qd
        sim.control.joint_target_q.assign(tq)
        sim.control.joint_target_qd.assign(tqd)
        sim.step(self._steps(0.3))
        q = pos.q(sim)
        assert abs(q - target_q) <= tol.joint_rel * target_q, (
            f"{jt.name} position drive (ke = {M * w * w:g}, kd = {2 * M * w:g}): at {q:.4f} {pos.unit} after 0.3 s, "
            f"Control.joint_target_q = {target_q} (+-{tol.joint_rel:.0%})"
        )
        qd = vel.qd(sim)
        assert abs(qd - target_qd) <= tol.joint_rel * target_qd, (
            f"{jt.name} velocity drive (kd = {M * w:g}): rate {qd:.4f} {vel.unit}/s after 0.3 s, "
            f"Control.joint_target_qd = {target_qd} (+-{tol.joint_rel:.0%})"
        )

    def test_joint_limits(self):
        """``joint_limits``: a pendulum (a vertical slider without REVOLUTE) falling onto its upper
        limit stops there: it reaches it and never passes it by more than ``joint_limit_abs``."""
        jt = self._one_dof_type("joint_limits")
        tol = self.tolerances
        upper = 0.5 if jt == JointType.REVOLUTE else 0.1
        b = self.builder()
        dof = _LoadedDof(b, jt, limit_lower=-1.0, limit_upper=upper)
        model = self.finalize(b)
        sim = self.sim(model)
        _, q = self._record(sim, self._steps(0.45), lambda s: dof.q(s))
        assert q.max() <= upper + tol.joint_limit_abs, (
            f"{jt.name} joint with limit_upper = {upper}: reached {q.max():.4f} {dof.unit} "
            f"(bound +{tol.joint_limit_abs} {dof.unit})"
        )
        assert q.max() >= upper - tol.joint_limit_abs, (
            f"{jt.name} joint with limit_upper = {upper}: only reached {q.max():.4f} {dof.unit} under gravity"
        )

    def test_joint_limit_springs(self):
        """``joint_limit_springs``: a limit with stiffness ``limit_ke`` holds the static gravity load
        of a pendulum (a slider without REVOLUTE) resting on it at a deflection of load / ``limit_ke``
        (within ``limit_spring_rel``)."""
        jt = self._one_dof_type("joint_limit_springs")
        tol = self.tolerances
        ke = 1000.0 if jt == JointType.REVOLUTE else 4000.0
        b = self.builder()
        kd = 2.0 * 0.7 * math.sqrt(ke * _LoadedDof.inertia_of(jt))  # damping ratio 0.7: settled in 0.25 s
        dof = _LoadedDof(b, jt, limit_lower=-1.0, limit_upper=0.0, limit_ke=ke, limit_kd=kd)
        model = self.finalize(b)
        sim = self.sim(model)
        g = float(np.linalg.norm(self.gravity(model)))
        expected = 0.0
        for _ in range(20):  # ke d = load(d)
            expected = dof.load(expected, g) / ke
        sim.step(self._steps(0.25))
        _, q = self._record(sim, self._steps(0.05), lambda s: dof.q(s))
        got = float(q.mean())
        assert abs(got - expected) <= tol.limit_spring_rel * expected, (
            f"{jt.name} joint resting on a limit with limit_ke = {ke:g}: deflection {got:.5f} {dof.unit}, expected "
            f"load / limit_ke = {expected:.5f} (+-{tol.limit_spring_rel:.0%})"
        )

    def test_mimic_joints(self):
        """``mimic_joints``: a follower joint tracks ``c0 + c1 q_leader`` while the leader, started
        alone at 1 rad/s (1 m/s), turns (within ``mimic_abs`` from 0.15 s on)."""
        jt = self._one_dof_type("mimic_joints")
        tol = self.tolerances
        c0, c1 = 0.1, -2.0
        b = self.builder(gravity=(0.0, 0.0, 0.0))
        leader = _Dof(b, jt, (0.0, 0.0, 1.0), articulation=False)
        follower = _Dof(b, jt, (1.0, 0.0, 1.0), articulation=False)
        b.add_articulation([leader.joint, follower.joint])  # one articulation with two roots
        b.set_joint_mimic(follower.joint, leader.joint, coeffs=(c0, c1))
        model = self.finalize(b)
        sim = self.sim(model)
        self._set_dof_rates(sim, [leader], [1.0])
        t, rows = self._record(sim, self._steps(0.3), lambda s: (leader.q(s), follower.q(s)))
        tail = t >= 0.15
        err = np.abs(rows[tail, 1] - (c0 + c1 * rows[tail, 0]))
        assert err.max() <= tol.mimic_abs, (
            f"{jt.name} mimic joint: follower {rows[-1, 1]:.4f}, leader {rows[-1, 0]:.4f} {leader.unit}: "
            f"|q_f - (c0 + c1 q_l)| up to {err.max():.4f} (c0 = {c0}, c1 = {c1}, bound {tol.mimic_abs})"
        )
        assert abs(rows[-1, 0]) >= 0.05, (
            f"mimic check is vacuous: the leader moved only {rows[-1, 0]:.4f} {leader.unit}"
        )

    def test_loop_joints(self):
        """``loop_joints``: a parallelogram four-bar swings under gravity: two cranks hinged to the
        world (REVOLUTE), the coupler hinged to the first and joined to the second by a BALL loop
        joint (outside the articulations; REVOLUTE without BALL). The loop stays closed
        (``loop_closure`` of the crank length) and the coupler stays level."""
        self.require("rigid_bodies", "loop_joints", joint_types=[JointType.REVOLUTE])
        caps = self.capabilities()
        tol = self.tolerances
        loop_type = JointType.BALL if JointType.BALL in caps.joint_types else JointType.REVOLUTE
        L, span = 0.5, 1.0
        p1, p2 = np.array([0.0, 0.0, 2.0]), np.array([span, 0.0, 2.0])
        a = 1.0  # cranks start 1 rad from hanging straight down
        d = L * np.array([math.sin(a), 0.0, -math.cos(a)])
        rot = _axis_angle((0.0, 1.0, 0.0), 0.5 * math.pi - a)  # crank body x axis along d
        rot_inv = _axis_angle((0.0, 1.0, 0.0), -(0.5 * math.pi - a))
        b = self.builder()
        crank1 = b.add_link(xform=_xform(p1 + 0.5 * d, rot), mass=0.5, inertia=_diag(0.01, 0.02, 0.02))
        coupler = b.add_link(xform=_xform(p1 + d + [0.5 * span, 0.0, 0.0]), mass=1.0, inertia=_diag(0.01, 0.09, 0.09))
        crank2 = b.add_link(xform=_xform(p2 + 0.5 * d, rot), mass=0.5, inertia=_diag(0.01, 0.02, 0.02))
        y = (0.0, 1.0, 0.0)
        half = _xform((-0.5 * L, 0.0, 0.0))
        j0 = b.add_joint_revolute(-1, crank1, parent_xform=_xform(p1, rot), child_xform=half, axis=y)
        j1 = b.add_joint_revolute(crank1, coupler, parent_xform=_xform((0.5 * L, 0.0, 0.0), rot_inv),
                                  child_xform=_xform((-0.5 * span, 0.0, 0.0)), axis=y)  # fmt: skip
        b.add_articulation([j0, j1])
        j2 = b.add_joint_revolute(-1, crank2, parent_xform=_xform(p2, rot), child_xform=half, axis=y)
        b.add_articulation([j2])
        end_c, end_2 = np.array([0.5 * span, 0.0, 0.0]), np.array([0.5 * L, 0.0, 0.0])
        if loop_type == JointType.BALL:
            b.add_joint_ball(coupler, crank2, parent_xform=_xform(end_c), child_xform=_xform(end_2))
        else:
            b.add_joint_revolute(coupler, crank2, parent_xform=_xform(end_c, rot), child_xform=_xform(end_2), axis=y)
        model = self.finalize(b)
        sim = self.sim(model)

        def rec(s):
            q = s.body_q()
            at_coupler = q[coupler, :3] + _quat_matrix(q[coupler, 3:7]) @ end_c
            at_crank = q[crank2, :3] + _quat_matrix(q[crank2, 3:7]) @ end_2
            gap = at_coupler - at_crank
            return np.linalg.norm(gap), _twist_angle(q[coupler, 3:7], y), _twist_angle(q[crank1, 3:7], y)

        _, rows = self._record(sim, self._steps(0.3), rec)
        gap = rows[:, 0].max()
        swing = np.abs(rows[:, 2] - rows[0, 2]).max()
        assert swing >= 0.3, f"four-bar did not swing (crank turned {swing:.3f} rad)"
        assert gap <= tol.loop_closure * L, (
            f"loop joint ({loop_type.name}) opened by {gap:.4f} m (crank length {L} m, bound {tol.loop_closure:.0%})"
        )
        tilt = np.abs(rows[:, 1]).max()
        assert tilt <= tol.loop_closure, (
            f"four-bar coupler tilted {tilt:.4f} rad; a closed parallelogram keeps it level"
        )

    # ============================================================ contacts and particles
    def test_restitution(self):
        """``restitution``: a sphere (restitution 0.5 on it and the ground) dropped 0.5 m rebounds to
        ``e^2`` of the drop height (within ``restitution_abs``)."""
        self.require("rigid_bodies", "rigid_contacts", "restitution", joint_types=[JointType.FREE])
        tol = self.tolerances
        e, r, drop = 0.5, 0.1, 0.5
        b = self.builder()
        cfg = self.shape_cfg(restitution=e)
        self.add_sphere_body(b, (0.0, 0.0, r + drop), radius=r, cfg=cfg)
        b.add_ground_plane(cfg=self.shape_cfg(restitution=e))
        model = self.finalize(b)
        sim = self.sim(model)
        _, rows = self._record(sim, self._steps(0.55), lambda s: (s.com()[0, 2], s.body_qd()[0, 2]))
        z, vz = rows[:, 0], rows[:, 1]
        up = np.nonzero(vz > 0.1)[0]
        assert len(up), f"the sphere did not bounce (lowest z {z.min():.4f}, final vz {vz[-1]:.3f} m/s)"
        apex = float(z[up[0]:].max()) - r
        ratio = apex / drop
        assert abs(ratio - e * e) <= tol.restitution_abs, (
            f"restitution {e}: rebound to {apex:.4f} m of a {drop} m drop (ratio {ratio:.3f}), "
            f"expected e^2 = {e * e:.3f} "
            f"(+-{tol.restitution_abs})"
        )

    def test_particle_contacts_with_shapes(self):
        """``particle_contacts``: a particle dropped on the ground plane comes to rest on it (penetration
        below ``contact_penetration`` of its radius)."""
        self.require("particles", "particle_contacts")
        tol = self.tolerances
        r = 0.05
        b = self.builder()
        b.add_particle((0.0, 0.0, 0.2), (0.0, 0.0, 0.0), 0.1, r)
        b.add_ground_plane()
        model = self.finalize(b)
        sim = self.sim(model)
        _, z = self._record(sim, self._steps(0.4), lambda s: float(s.state.particle_q.numpy()[0, 2]))
        assert np.isfinite(z).all(), "particle on the ground: non-finite position"
        assert z.min() >= r * (1.0 - tol.contact_penetration), (
            f"particle on the ground: centre down to z = {z.min():.4f} (radius {r}): it sank "
            f"{(r - z.min()) / r:.0%} of its radius (bound {tol.contact_penetration:.0%})"
        )
        assert z[-1] <= r * (1.0 + tol.contact_penetration), (
            f"particle on the ground did not come to rest on it (z = {z[-1]:.4f}, radius {r})"
        )

    def test_particle_particle_contacts(self):
        """``particle_contacts``: a particle dropped on a fixed particle comes to rest on top of it
        (centres ``r1 + r2`` apart, penetration below ``contact_penetration`` of the radius)."""
        self.require("particles", "particle_contacts")
        tol = self.tolerances
        r = 0.05
        b = self.builder()
        b.add_particle((0.0, 0.0, 0.5), (0.0, 0.0, 0.0), 0.0, r)  # fixed
        b.add_particle((0.0, 0.0, 0.7), (0.0, 0.0, 0.0), 0.1, r)
        model = self.finalize(b)
        sim = self.sim(model)
        _, x = self._record(sim, self._steps(0.4), lambda s: s.state.particle_q.numpy().astype(np.float64))
        assert np.isfinite(x).all(), "particle on a particle: non-finite positions"
        gap = np.linalg.norm(x[:, 1] - x[:, 0], axis=1)
        assert gap.min() >= 2.0 * r * (1.0 - tol.contact_penetration), (
            f"particle dropped on a fixed particle: centres down to {gap.min():.4f} m apart (radii {r} + {r}): "
            "particle-particle contact not resolved"
        )
        assert gap[-1] <= 2.0 * r * (1.0 + tol.contact_penetration), (
            f"particle dropped on a fixed particle did not rest on it (centres {gap[-1]:.4f} m apart)"
        )

    def test_springs(self):
        """``springs``: two particles on a spring, pushed apart, oscillate with period
        ``2 pi sqrt(m_red / k)`` (within ``period_rel``) about its rest length."""
        self.require("particles", "springs")
        tol = self.tolerances
        m, period, rest = 1.0, 0.2, 0.5
        k = 0.5 * m * (2.0 * math.pi / period) ** 2
        b = self.builder(gravity=(0.0, 0.0, 0.0))
        b.add_particle((0.0, 0.0, 1.0), (-0.5, 0.0, 0.0), m, 0.01)
        b.add_particle((rest, 0.0, 1.0), (0.5, 0.0, 0.0), m, 0.01)
        b.add_spring(0, 1, k, 0.0, 0.0)
        model = self.finalize(b)
        sim = self.sim(model)

        def length(s):
            x = s.state.particle_q.numpy().astype(np.float64)
            return float(np.linalg.norm(x[1] - x[0]))

        t, d = self._record(sim, self._steps(0.35), length)
        got = _period(t, d - rest, f"spring (k = {k:.4g} N/m, two {m} kg particles)")
        assert abs(got - period) <= tol.period_rel * period, (
            f"spring: period {got:.4f} s, expected 2 pi sqrt(m_red / k) = {period:.4f} s (+-{tol.period_rel:.0%})"
        )

    def test_cloth_hangs_without_tearing(self):
        """``cloth``: a 4 x 4 cloth pinned along one edge swings down under gravity: positions stay
        finite, pinned particles stay put and no triangle edge stretches beyond ``cloth_stretch``."""
        self.require("particles", "cloth")
        tol = self.tolerances
        n, cell = 4, 0.05
        b = self.builder()
        b.add_cloth_grid(pos=(0.0, 0.0, 1.0), rot=_axis_angle((1.0, 0.0, 0.0), 0.0), vel=(0.0, 0.0, 0.0), dim_x=n,
                         dim_y=n, cell_x=cell, cell_y=cell, mass=0.01, fix_left=True, tri_ke=500.0, tri_ka=500.0,
                         tri_kd=0.1, edge_ke=1.0e-3, edge_kd=0.0, particle_radius=0.01)  # fmt: skip
        model = self.finalize(b)
        sim = self.sim(model)
        x0 = model.particle_q.numpy().astype(np.float64)
        tri = model.tri_indices.numpy()
        edges = np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [2, 0]]])
        rest = np.linalg.norm(x0[edges[:, 0]] - x0[edges[:, 1]], axis=1)
        stretch = 0.0

        def rec(s):
            nonlocal stretch
            x = s.state.particle_q.numpy().astype(np.float64)
            assert np.isfinite(x).all(), f"cloth: non-finite particle positions at t = {s.time:.3f} s"
            length = np.linalg.norm(x[edges[:, 0]] - x[edges[:, 1]], axis=1)
            stretch = max(stretch, float(np.abs(length / rest - 1.0).max()))
            return x

        _, xs = self._record(sim, self._steps(0.3), rec)
        pinned = model.particle_inv_mass.numpy() == 0.0
        np.testing.assert_allclose(xs[-1][pinned], x0[pinned], atol=1e-6, err_msg="cloth: pinned particles moved")
        drop = x0[~pinned, 2].max() - xs[:, ~pinned, 2].min()
        assert drop >= 0.5 * n * cell, f"cloth did not swing down (its lowest particle dropped {drop:.3f} m)"
        assert stretch <= tol.cloth_stretch, (
            f"cloth: a triangle edge stretched {stretch:.1%} from its rest length (bound {tol.cloth_stretch:.0%})"
        )

    def test_soft_body_keeps_its_volume(self):
        """``soft_bodies``: a 2 x 2 x 2 tetrahedral block clamped on one face hangs under gravity for
        0.3 s: finite, volume within ``soft_volume`` of the rest volume, the free end held up by the
        block's shear and bending stiffness (sag below 20 mm)."""
        self.require("particles", "soft_bodies")
        tol = self.tolerances
        cell = 0.05
        b = self.builder()
        b.add_soft_grid(pos=(0.0, 0.0, 1.0), rot=_axis_angle((1.0, 0.0, 0.0), 0.0), vel=(0.0, 0.0, 0.0), dim_x=2,
                        dim_y=2, dim_z=2, cell_x=cell, cell_y=cell, cell_z=cell, density=500.0, k_mu=5.0e4,
                        k_lambda=5.0e4, k_damp=0.0, fix_left=True, particle_radius=0.005)  # fmt: skip
        model = self.finalize(b)
        sim = self.sim(model)
        tets = model.tet_indices.numpy()

        def volume(x):
            a, b_, c, d = (x[tets[:, i]] for i in range(4))
            return float(np.abs(np.einsum("ij,ij->i", np.cross(b_ - a, c - a), d - a)).sum() / 6.0)

        x0 = model.particle_q.numpy().astype(np.float64)
        v0 = volume(x0)
        def rec(s):
            x = s.state.particle_q.numpy().astype(np.float64)
            return volume(x), float((x0[:, 2] - x[:, 2]).max())

        _, rows = self._record(sim, self._steps(0.3), rec)
        vol, sags = rows[:, 0], rows[:, 1]
        x = sim.state.particle_q.numpy().astype(np.float64)
        assert np.isfinite(x).all(), "soft body: non-finite particle positions"
        dv = float(np.abs(vol / v0 - 1.0).max())
        assert dv <= tol.soft_volume, f"soft body: volume changed by {dv:.1%} (bound {tol.soft_volume:.0%})"
        # elastic estimate of the static sag: shear F L / (mu A) + bending F L^3 / (3 E I) ~ 6 mm; a swing
        # from rest overshoots it at most twice. A block without shear stiffness keeps its volume but
        # shears off under its weight.
        sag = float(sags.max())
        assert sag <= 0.4 * cell, (
            f"soft body: the free end sagged {sag * 1e3:.1f} mm (bound {0.4 * cell * 1e3:.0f} mm, elastic estimate "
            "about 6 mm): the block does not resist shear"
        )


def _quat_matrix(q):
    from ..sim.rotations import quat_to_matrix

    return quat_to_matrix(np.asarray(q, dtype=np.float64))


def _quat_conj(q):
    q = np.asarray(q, dtype=np.float64)
    return np.array([-q[0], -q[1], -q[2], q[3]])


def _quat_mul(a, b):
    av, aw = np.asarray(a[:3]), a[3]
    bv, bw = np.asarray(b[:3]), b[3]
    return np.concatenate([aw * bv + bw * av + np.cross(av, bv), [aw * bw - av @ bv]])

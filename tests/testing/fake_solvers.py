"""Fake solvers (host-side NumPy, not graph-capturable) for the conformance kit's meta-tests.

* :class:`FakeEuler` is correct for what it declares (free bodies without
  contacts, body forces, particles, several worlds);
* :class:`FakeMutatesStateIn`, :class:`FakeFallsThroughGround` and
  :class:`FakeWrongFreeFall` are broken in one way each;
* :class:`FakePendulum` integrates a single revolute pendulum accurately
  (RK4 on the joint angle) and declares REVOLUTE, so the kit's pendulum
  check runs;
* :class:`FakeStaleBodyQdd` declares the ``body_qdd`` observable but never
  writes it; :class:`FakeLegacyStep` has a ``step`` without ``observables=``;
* :class:`FakeClaimsEverything` declares every feature and joint type but integrates every body
  as a free body and every particle as a free particle (joints, contacts, springs, cloth and soft
  bodies ignored): the kit's feature checks must fail it;
* :class:`FakeSilentReset` replaces non-finite input by the model's initial state without a word
  (MuJoCo C's reaction to a bad state), :class:`FakeCrashesOnHugeDt` kills its process on an absurd
  time step: the fault harness must catch both.
"""

from __future__ import annotations

import os
import signal

import numpy as np

from armillary.sim.enums import JointType
from armillary.solvers import FEATURES, Coordinates, SolverBase, SolverCapabilities
from armillary.solvers.observables import begin_step


def quat_rotate(q, v):
    u, w = q[..., :3], q[..., 3:4]
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def quat_mul(a, b):
    av, aw = a[..., :3], a[..., 3:4]
    bv, bw = b[..., :3], b[..., 3:4]
    return np.concatenate([aw * bv + bw * av + np.cross(av, bv), aw * bw - np.sum(av * bv, -1, keepdims=True)], -1)


def rotation_matrices(q):
    x, y, z, w = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return np.stack(
        [
            np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], -1),
            np.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], -1),
            np.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], -1),
        ],
        -2,
    )



def _gravity_rows(world, n):
    """Row of Model.gravity for each entity's world: its own, the last (global) one for -1."""
    w = np.asarray(world, dtype=np.int64)
    return np.where((w < 0) | (w >= n), n - 1, w)

class FakeEuler(SolverBase):
    """Semi-implicit Euler in NumPy for free bodies and particles (no contacts)."""

    capabilities = SolverCapabilities(
        coordinates=Coordinates.MAXIMAL,
        joint_types=frozenset({JointType.FREE}),
        features=frozenset(
            {"rigid_bodies", "body_forces", "particles", "particle_forces", "multiple_worlds", "reset_world_mask"}
        ),
        deterministic=True,
    )
    gravity_scale = 1.0
    #: broken variant: the global world (-1) takes world 0's gravity row
    global_takes_world0 = False
    SUPPORTED_OBSERVABLES = frozenset({"body_qdd"})

    def step(self, state_in, state_out, control, contacts, dt, *, observables=None):
        observed = begin_step(self, observables, state_in, state_out, contacts)
        self._integrate(state_in, state_out, dt)
        if observed is not None:
            observed.finish(state_out, dt)

    def _rows(self, world, n):
        if self.global_takes_world0:
            return np.clip(np.asarray(world, dtype=np.int64), 0, n - 1)
        return _gravity_rows(world, n)

    def _integrate(self, state_in, state_out, dt):
        m = self.model
        gravity = m.gravity.numpy().astype(np.float64).reshape(-1, 3) * self.gravity_scale
        if m.body_count:
            q = state_in.body_q.numpy().astype(np.float64)
            qd = state_in.body_qd.numpy().astype(np.float64)
            f = state_in.body_f.numpy().astype(np.float64)
            inv_m = m.body_inv_mass.numpy().astype(np.float64)
            com = m.body_com.numpy().astype(np.float64)
            inv_i = m.body_inv_inertia.numpy().astype(np.float64)
            g = gravity[self._rows(m.body_world.numpy(), len(gravity))]
            dyn = ((m.body_flags.numpy() & 2) == 0) & (inv_m > 0)
            rot = rotation_matrices(q[:, 3:])
            x = q[:, :3] + quat_rotate(q[:, 3:], com)
            v = qd[:, :3] + dyn[:, None] * (g + f[:, :3] * inv_m[:, None]) * dt
            inv_iw = rot @ inv_i @ np.swapaxes(rot, -1, -2)
            w = qd[:, 3:] + dyn[:, None] * np.einsum("bij,bj->bi", inv_iw, f[:, 3:]) * dt
            x = x + v * dt
            wq = np.concatenate([w, np.zeros((len(w), 1))], -1)
            qn = q[:, 3:] + 0.5 * dt * quat_mul(wq, q[:, 3:])
            qn /= np.linalg.norm(qn, axis=-1, keepdims=True)
            p = x - quat_rotate(qn, com)
            state_out.body_q.assign(np.concatenate([p, qn], -1).astype(np.float32))
            state_out.body_qd.assign(np.concatenate([v, w], -1).astype(np.float32))
        if m.particle_count:
            x = state_in.particle_q.numpy().astype(np.float64)
            v = state_in.particle_qd.numpy().astype(np.float64)
            f = state_in.particle_f.numpy().astype(np.float64)
            inv_m = m.particle_inv_mass.numpy().astype(np.float64)
            g = gravity[self._rows(m.particle_world.numpy(), len(gravity))]
            v = v + (inv_m[:, None] > 0) * (g + f * inv_m[:, None]) * dt
            x = x + v * dt
            state_out.particle_q.assign(x.astype(np.float32))
            state_out.particle_qd.assign(v.astype(np.float32))


class FakeMutatesStateIn(FakeEuler):
    """Broken: also writes its result into ``state_in``."""

    def step(self, state_in, state_out, control, contacts, dt, *, observables=None):
        super().step(state_in, state_out, control, contacts, dt, observables=observables)
        if self.model.body_count:
            state_in.body_q.assign(state_out.body_q.numpy())


class FakeFallsThroughGround(FakeEuler):
    """Broken: declares rigid contacts but ignores them (bodies fall through the ground)."""

    capabilities = SolverCapabilities(
        coordinates=Coordinates.MAXIMAL,
        joint_types=frozenset({JointType.FREE}),
        features=FakeEuler.capabilities.features | {"rigid_contacts"},
        deterministic=True,
    )


class FakeWrongFreeFall(FakeEuler):
    """Broken: gravity 10 % too weak."""

    gravity_scale = 0.9


class FakeGlobalWorldGravity(FakeEuler):
    """Broken: bodies and particles of the global world (-1) take world 0's gravity."""

    global_takes_world0 = True


class FakePendulum(SolverBase):
    """A single revolute pendulum integrated with RK4 on its joint angle (generalized coordinates).

    Writes joint_q / joint_qd and, by forward kinematics, body_q / body_qd.
    Only handles the kit's pendulum (one revolute joint, parent = world); any
    other model is passed through unchanged.
    """

    capabilities = SolverCapabilities(
        coordinates=Coordinates.GENERALIZED,
        joint_types=frozenset({JointType.REVOLUTE}),
        features=frozenset({"rigid_bodies"}),
        deterministic=True,
    )

    def __init__(self, model, **kw):
        super().__init__(model, **kw)
        self.active = model.joint_count == 1 and model.body_count == 1
        if not self.active:
            return
        xp = model.joint_X_p.numpy().astype(np.float64)[0]
        xc = model.joint_X_c.numpy().astype(np.float64)[0]
        self.pivot, self.qp = xp[:3], xp[3:]
        self.xc_p, self.xc_q = xc[:3], xc[3:]
        axis_local = model.joint_axis.numpy().astype(np.float64)[0]
        self.axis_local = axis_local / np.linalg.norm(axis_local)
        self.axis = quat_rotate(self.qp, self.axis_local)  # world axis (parent is the world)
        self.mass = float(model.body_mass.numpy()[0])
        self.com = model.body_com.numpy().astype(np.float64)[0]
        self.inertia = model.body_inertia.numpy().astype(np.float64)[0]
        self.g = model.gravity.numpy().astype(np.float64).reshape(-1, 3)[0]

    def _pose(self, theta):
        """Body pose at joint angle ``theta``: X_p * rot(axis, theta) * inverse(X_c)."""
        half = 0.5 * theta
        qj = quat_mul(self.qp, np.concatenate([np.sin(half) * self.axis_local, [np.cos(half)]]))
        inv_q = self.xc_q * np.array([-1.0, -1.0, -1.0, 1.0])
        inv_p = -quat_rotate(inv_q, self.xc_p)
        return self.pivot + quat_rotate(qj, inv_p), quat_mul(qj, inv_q)

    def _accel(self, theta):
        bp, bq = self._pose(theta)
        r = quat_rotate(bq, self.com) + bp - self.pivot
        rot = rotation_matrices(bq)
        iw = rot @ self.inertia @ rot.T
        r_perp = r - self.axis * (r @ self.axis)
        i_pivot = self.axis @ iw @ self.axis + self.mass * (r_perp @ r_perp)
        torque = self.axis @ np.cross(r, self.mass * self.g)
        return torque / i_pivot

    def step(self, state_in, state_out, control, contacts, dt, *, observables=None):
        self.validate_observables(observables, contacts)
        if not self.active:
            return
        th = float(state_in.joint_q.numpy()[0])
        om = float(state_in.joint_qd.numpy()[0])
        k1 = (om, self._accel(th))
        k2 = (om + 0.5 * dt * k1[1], self._accel(th + 0.5 * dt * k1[0]))
        k3 = (om + 0.5 * dt * k2[1], self._accel(th + 0.5 * dt * k2[0]))
        k4 = (om + dt * k3[1], self._accel(th + dt * k3[0]))
        th += dt / 6.0 * (k1[0] + 2 * k2[0] + 2 * k3[0] + k4[0])
        om += dt / 6.0 * (k1[1] + 2 * k2[1] + 2 * k3[1] + k4[1])
        bp, bq = self._pose(th)
        x_com = bp + quat_rotate(bq, self.com)
        w = self.axis * om
        v = np.cross(w, x_com - self.pivot)
        state_out.joint_q.assign(np.array([th], np.float32))
        state_out.joint_qd.assign(np.array([om], np.float32))
        state_out.body_q.assign(np.concatenate([bp, bq])[None].astype(np.float32))
        state_out.body_qd.assign(np.concatenate([v, w])[None].astype(np.float32))


class FakeStaleBodyQdd(FakeEuler):
    """Broken: declares the ``body_qdd`` observable but does not write it."""

    def step(self, state_in, state_out, control, contacts, dt, *, observables=None):
        self.validate_observables(observables, contacts)
        self._integrate(state_in, state_out, dt)


class FakeLegacyStep(FakeEuler):
    """Broken: ``step`` predates the ``observables=`` keyword."""

    SUPPORTED_OBSERVABLES = frozenset()

    def step(self, state_in, state_out, control, contacts, dt):
        self._integrate(state_in, state_out, dt)


class FakeSilentReset(FakeEuler):
    """Broken: a non-finite input state is silently replaced by the model's initial state."""

    def step(self, state_in, state_out, control, contacts, dt, *, observables=None):
        q = state_in.body_q.numpy()
        if not np.all(np.isfinite(q)) or not np.all(np.isfinite(state_in.body_qd.numpy())) \
                or not np.all(np.isfinite(state_in.body_f.numpy())):
            self.model.state().body_q.numpy()  # noqa: B018 - a reset, as MuJoCo C does
            state_out.body_q.assign(self.model.body_q)
            state_out.body_qd.zero_()
            return
        super().step(state_in, state_out, control, contacts, dt, observables=observables)


class FakeCrashesOnHugeDt(FakeEuler):
    """Broken: dies (SIGSEGV) on a time step above one second, as an unguarded native solver might."""

    def step(self, state_in, state_out, control, contacts, dt, *, observables=None):
        if dt > 1.0:
            os.kill(os.getpid(), signal.SIGSEGV)
        super().step(state_in, state_out, control, contacts, dt, observables=observables)


class FakeClaimsEverything(FakeEuler):
    """Broken: declares every feature and joint type, implements only free bodies and particles."""

    capabilities = SolverCapabilities(
        coordinates=Coordinates.MAXIMAL,
        joint_types=frozenset(JointType),
        features=frozenset(FEATURES),
        deterministic=True,
    )

"""System identification by gradient descent: a pendulum link's mass from a recorded trajectory.

A 0.5 m pendulum whose link has an unknown mass is driven from rest by a known torque
``tau(t) = 2 sin(3 t)`` N m for 1 s (100 steps of 10 ms, ``SolverFeatherstone``). The "measured"
trajectory is simulated with the true mass (1.3 kg). Starting from a guess (0.6 kg), the mass is
fitted by minimising the mean squared joint-angle error over the trajectory; the gradient
d loss / d ``Model.body_mass`` comes from ``wp.Tape`` through every solver step. The optimiser is
gradient descent on log(mass) (the mass stays positive) with an adaptive step length.

Run: ``python examples/gradients/sysid_mass.py [--iterations 30] [--true-mass 1.3] [--guess 0.6]``.
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import warp as wp

import armillary as newton

DT, STEPS, LENGTH = 0.01, 100, 0.5


def build_model(mass: float):
    """One revolute link about y, COM 0.5 m from the hinge (a small rod-like inertia about the COM)."""
    b = newton.ModelBuilder()  # gravity -9.81 m/s^2 along -z
    inertia = wp.mat33(1.0e-3, 0.0, 0.0, 0.0, 1.0e-3, 0.0, 0.0, 0.0, 1.0e-3)
    link = b.add_link(mass=mass, com=(LENGTH, 0.0, 0.0), inertia=inertia, label="link")
    joint = b.add_joint_revolute(-1, link, axis=(0.0, 1.0, 0.0), label="hinge",
                                 parent_xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()))  # fmt: skip
    b.add_articulation([joint])
    return b.finalize(device="cpu", requires_grad=True)


@wp.kernel
def _squared_error(q: wp.array(dtype=float), q_ref: float, scale: float, loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, scale * (q[0] - q_ref) * (q[0] - q_ref))


class Rollout:
    """Pre-allocated states and controls for one taped rollout of ``STEPS`` steps."""

    def __init__(self, model):
        self.model = model
        self.solver = newton.solvers.SolverFeatherstone(model)
        self.states = [model.state(requires_grad=True) for _ in range(STEPS + 1)]
        self.controls = []
        for k in range(STEPS):
            c = model.control(requires_grad=True)
            c.joint_f.assign(np.array([2.0 * math.sin(3.0 * k * DT)], dtype=np.float32))
            self.controls.append(c)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def angles(self) -> np.ndarray:
        """Simulate without a tape; the joint angle after every step [rad], shape (STEPS,)."""
        out = []
        for k in range(STEPS):
            self.solver.step(self.states[k], self.states[k + 1], self.controls[k], None, DT)
            out.append(float(self.states[k + 1].joint_q.numpy()[0]))
        return np.array(out)

    def loss_and_grad(self, q_ref: np.ndarray) -> tuple[float, float]:
        """Mean squared angle error [rad^2] against ``q_ref`` and its derivative by the mass [rad^2/kg]."""
        self.loss.zero_()
        self.model.body_mass.grad.zero_()
        tape = wp.Tape()
        with tape:
            for k in range(STEPS):
                self.solver.step(self.states[k], self.states[k + 1], self.controls[k], None, DT)
                wp.launch(_squared_error, 1, inputs=[self.states[k + 1].joint_q, float(q_ref[k]), 1.0 / STEPS],
                          outputs=[self.loss], device="cpu")  # fmt: skip
        tape.backward(self.loss)
        value, grad = float(self.loss.numpy()[0]), float(self.model.body_mass.grad.numpy()[0])
        tape.zero()
        return value, grad


def identify(true_mass: float = 1.3, guess: float = 0.6, iterations: int = 30, step: float = 0.2, verbose=True):
    """Fit the link mass; returns ``(mass, history)`` with ``history`` a list of (mass, loss).

    Gradient descent on log(mass) with an adaptive step: a step that lowers the loss is kept and
    the next one is 1.5 times longer; one that raises it is undone and the step halved.
    """
    q_ref = Rollout(build_model(true_mass)).angles()  # the "measurement"
    model = build_model(guess)
    rollout = Rollout(model)

    def evaluate(log_mass):
        model.body_mass.assign(np.array([math.exp(log_mass)], dtype=np.float32))
        return rollout.loss_and_grad(q_ref)

    log_m = math.log(guess)
    value, d_mass = evaluate(log_m)
    history = [(guess, value)]
    for it in range(1, iterations + 1):
        g = d_mass * math.exp(log_m)  # d loss / d log(mass)
        trial = log_m - step * g / (abs(g) + 1e-30) * min(1.0, abs(g) / (value + 1e-30))
        t_value, t_grad = evaluate(trial)
        if t_value < value:
            log_m, value, d_mass, step = trial, t_value, t_grad, step * 1.5
        else:
            step *= 0.5
            evaluate(log_m)  # keep the model at the accepted mass
        history.append((math.exp(log_m), value))
        if verbose:
            print(f"iteration {it:3d}: mass {math.exp(log_m):.4f} kg  loss {value:.3e} rad^2")
    return math.exp(log_m), history


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--true-mass", type=float, default=1.3)
    ap.add_argument("--guess", type=float, default=0.6)
    args = ap.parse_args()
    mass, _ = identify(args.true_mass, args.guess, args.iterations)
    print(f"identified mass {mass:.4f} kg (true {args.true_mass} kg)")


if __name__ == "__main__":
    main()

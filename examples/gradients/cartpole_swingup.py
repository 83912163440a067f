"""Trajectory optimisation through SolverFeatherstone: a cart-pole swing-up.

A 1 kg cart on a rail (prismatic joint along x) carries a 0.1 kg pole of 0.5 m (revolute joint
about y), hanging down at rest. The open-loop cart force over 2 s (200 steps of 10 ms) is
piecewise constant on 20 knots; gradient descent (Adam) on the knots through ``wp.Tape`` brings the
pole upright at the end: the loss is ``(1 + cos theta_T)`` (0 when upright) plus small penalties on
the final pole and cart speeds, the final cart position and the force. Every step is recorded on
the tape; d loss / d knots flows back through all 200 Featherstone steps.

Run: ``python examples/gradients/cartpole_swingup.py [--iterations 150]``.
"""

from __future__ import annotations

import argparse

import numpy as np
import warp as wp

import armillary as newton

DT, STEPS, KNOTS = 0.01, 200, 20
POLE = 0.5


def build_model():
    b = newton.ModelBuilder()  # gravity -9.81 m/s^2 along -z
    cart = b.add_link(mass=1.0, inertia=wp.mat33(0.01, 0.0, 0.0, 0.0, 0.01, 0.0, 0.0, 0.0, 0.01), label="cart")
    pole = b.add_link(mass=0.1, com=(0.0, 0.0, -POLE), label="pole",
                      inertia=wp.mat33(1.0e-4, 0.0, 0.0, 0.0, 1.0e-4, 0.0, 0.0, 0.0, 1.0e-4))  # fmt: skip
    j0 = b.add_joint_prismatic(-1, cart, axis=(1.0, 0.0, 0.0), label="rail",
                               parent_xform=wp.transform((0.0, 0.0, 1.0), wp.quat_identity()))  # fmt: skip
    j1 = b.add_joint_revolute(cart, pole, axis=(0.0, 1.0, 0.0), label="hinge")
    b.add_articulation([j0, j1])
    return b.finalize(device="cpu", requires_grad=True)


@wp.kernel
def _apply_knot(knots: wp.array(dtype=float), k: int, joint_f: wp.array(dtype=float)):
    joint_f[0] = knots[k]
    joint_f[1] = 0.0


@wp.kernel
def _final_loss(q: wp.array(dtype=float), qd: wp.array(dtype=float), knots: wp.array(dtype=float),
                loss: wp.array(dtype=float)):  # fmt: skip
    effort = float(0.0)
    for k in range(knots.shape[0]):
        effort += knots[k] * knots[k]
    loss[0] = (1.0 + wp.cos(q[1])) + 0.01 * qd[1] * qd[1] + 0.01 * qd[0] * qd[0] + 0.01 * q[0] * q[0] \
        + 1.0e-5 * effort


class SwingUp:
    def __init__(self):
        self.model = build_model()
        self.solver = newton.solvers.SolverFeatherstone(self.model)
        self.states = [self.model.state(requires_grad=True) for _ in range(STEPS + 1)]
        self.controls = [self.model.control(requires_grad=True) for _ in range(STEPS)]
        self.knots = wp.zeros(KNOTS, dtype=float, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, requires_grad=True)

    def rollout(self):
        per_knot = STEPS // KNOTS
        for k in range(STEPS):
            wp.launch(_apply_knot, 1, inputs=[self.knots, k // per_knot], outputs=[self.controls[k].joint_f],
                      device="cpu")  # fmt: skip
            self.solver.step(self.states[k], self.states[k + 1], self.controls[k], None, DT)
        final = self.states[STEPS]
        wp.launch(_final_loss, 1, inputs=[final.joint_q, final.joint_qd, self.knots], outputs=[self.loss],
                  device="cpu")  # fmt: skip

    def loss_and_grad(self):
        tape = wp.Tape()
        with tape:
            self.rollout()
        tape.backward(self.loss)
        value, grad = float(self.loss.numpy()[0]), self.knots.grad.numpy().copy()
        tape.zero()
        return value, grad

    def final_state(self):
        """(cart x [m], pole angle [rad] from hanging, pole speed [rad/s], cart speed [m/s]) at 2 s."""
        q, qd = self.states[STEPS].joint_q.numpy(), self.states[STEPS].joint_qd.numpy()
        return float(q[0]), float(q[1]), float(qd[1]), float(qd[0])


def optimise(iterations: int = 150, lr: float = 1.0, seed: int = 0, verbose=True):
    """Adam on the knots; returns ``(problem, history of losses)``."""
    problem = SwingUp()
    rng = np.random.default_rng(seed)
    knots = rng.normal(0.0, 0.5, KNOTS)
    m1, m2, history = np.zeros(KNOTS), np.zeros(KNOTS), []
    for it in range(1, iterations + 1):
        problem.knots.assign(knots.astype(np.float32))
        value, g = problem.loss_and_grad()
        history.append(value)
        if verbose and (it % 10 == 0 or it == 1):
            x, theta, w, v = problem.final_state()
            print(f"iteration {it:4d}: loss {value:.4f}  pole {np.degrees(theta):7.1f} deg  cart x {x:+.2f} m")
        m1 = 0.9 * m1 + 0.1 * g
        m2 = 0.999 * m2 + 0.001 * g * g
        knots = knots - lr * (m1 / (1 - 0.9**it)) / (np.sqrt(m2 / (1 - 0.999**it)) + 1e-8)
    problem.knots.assign(knots.astype(np.float32))
    problem.loss_and_grad()
    return problem, history


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iterations", type=int, default=150)
    args = ap.parse_args()
    problem, history = optimise(args.iterations)
    x, theta, w, v = problem.final_state()
    print(f"final: pole {np.degrees(theta):.1f} deg from hanging (180 = upright), pole speed {w:+.2f} rad/s, "
          f"cart at {x:+.2f} m; loss {history[0]:.3f} -> {float(problem.loss.numpy()[0]):.4f}")


if __name__ == "__main__":
    main()

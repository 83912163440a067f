"""Gradients against central finite differences: :func:`compare_gradients`, and the conformance
kit's gradient checks (:class:`GradientChecks`, mixed into :class:`~armillary.testing.SolverConformance`).

:func:`compare_gradients` runs a forward computation (Warp launches) once under a ``wp.Tape`` and
back-propagates a fixed random weighting ``w`` of its outputs (the loss ``L = sum w * outputs``),
then perturbs each checked input component by ``+-eps`` and re-runs the computation without a tape,
in float32 as the real computation runs. The autodiff gradient ``dL/dx`` and the central difference
``(L(x + eps) - L(x - eps)) / (2 eps)`` (summed in float64) are compared per input array with the
relative error ``|g_ad - g_fd| / |g_fd|`` (Euclidean norms over the checked components). A gradient
that silently comes out as zero has relative error 1.

The kit's checks (only for solvers whose capabilities declare ``differentiable=True``; skipped with
the reason otherwise) use a list of states, one per step, as the reference usage does, and
``Tolerances.gradient_rel``:

* pendulum (REVOLUTE): a 0.5 m pendulum started 0.4 rad below the horizontal at 1 rad/s; ``d`` final
  bob pose and twist ``/ d`` initial ``joint_q`` and ``joint_qd`` (``eval_fk`` on the tape writes the
  initial body state from them, so maximal- and generalized-coordinate solvers see the same inputs);
* free body (FREE): a sphere with an offset COM, thrown up and spinning at 11 rad/s (0.5 rad in the
  rollout); ``d`` final pose and twist ``/ d`` initial position and twist (``body_q`` / ``body_qd``
  for maximal-coordinate solvers, the free joint's ``joint_q`` / ``joint_qd`` for generalized ones);
* particle (``particles``): a thrown particle; ``d`` final position and velocity ``/ d`` initial
  position and velocity;
* every solver that does *not* declare ``differentiable``: stepping it under a recording tape on a
  model finalized with ``requires_grad=True`` raises :class:`~armillary.solvers.NotDifferentiableError`.

None of the scenes has contacts, so no contact switches inside the finite-difference interval.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import ClassVar

import numpy as np
import pytest

from ..sim.enums import JointType
from ..solvers.capabilities import Coordinates

__all__ = ["GradientChecks", "GradientComparison", "compare_gradients"]


@dataclasses.dataclass
class GradientComparison:
    """Autodiff and central-difference gradients of one input array (checked components only).

    Attributes:
        name: the input's name.
        components: flat float indices into the input that were checked.
        autodiff: ``dL/dx`` from ``tape.backward`` at those components.
        finite_difference: the central differences at those components.
        eps: the perturbation used.
    """

    name: str
    components: np.ndarray
    autodiff: np.ndarray
    finite_difference: np.ndarray
    eps: float

    @property
    def rel_error(self) -> float:
        """``|g_ad - g_fd| / |g_fd|`` (``inf`` when the difference gradient is zero and the autodiff one is not)."""
        ref = float(np.linalg.norm(self.finite_difference))
        diff = float(np.linalg.norm(self.autodiff - self.finite_difference))
        if ref == 0.0:
            return 0.0 if diff == 0.0 else float("inf")
        return diff / ref

    def describe(self) -> str:
        where = ", ".join(str(int(c)) for c in self.components)
        return (f"d loss / d {self.name}[{where}]: autodiff {np.array2string(self.autodiff, precision=5)}, "
                f"central difference (eps {self.eps:g}) {np.array2string(self.finite_difference, precision=5)}, "
                f"relative error {self.rel_error:.2e}")  # fmt: skip

    def check(self, rel_tol: float, what: str = "") -> None:
        """Raise ``AssertionError`` (naming ``what``) unless the relative error is at most ``rel_tol``
        and the difference gradient is not zero (a scene where nothing depends on the input proves nothing)."""
        prefix = f"{what}: " if what else ""
        if not np.all(np.isfinite(self.autodiff)):
            raise AssertionError(f"{prefix}non-finite autodiff gradient; {self.describe()}")
        if float(np.linalg.norm(self.finite_difference)) == 0.0:
            raise AssertionError(f"{prefix}the loss does not depend on {self.name} (zero central difference)")
        if not self.rel_error <= rel_tol:
            raise AssertionError(f"{prefix}gradient off by more than {rel_tol:.0%}; {self.describe()}")


def _flat(arr) -> np.ndarray:
    return np.asarray(arr.numpy(), dtype=np.float64).reshape(-1)


def compare_gradients(forward: Callable[[dict], Sequence], inputs: Mapping, *, eps: float | Mapping = 1e-3,
                      components: Mapping | None = None, seed: int = 0) -> dict[str, GradientComparison]:  # fmt: skip
    """Gradients of a random weighting of ``forward``'s outputs w.r.t. ``inputs``: autodiff vs central differences.

    Args:
        forward: ``forward(arrays)`` gets ``{name: wp.array}`` (fresh copies of ``inputs``, with
            ``requires_grad=True`` on the taped run) and launches the computation, returning its
            output arrays (float-based dtypes). It must not read the arrays back to the host while
            taped (that would cut the gradient, which is what the comparison catches).
        inputs: ``{name: wp.array}``, the point at which to differentiate (not modified).
        eps: the central-difference step, one value or ``{name: value}``.
        components: ``{name: flat float indices}`` to check (default every component of each input).
        seed: seed of the output weighting.

    Returns:
        ``{name: GradientComparison}``.
    """
    import warp as wp

    def fresh(requires_grad: bool, overrides: Mapping | None = None) -> dict:
        out = {}
        for name, a in inputs.items():
            values = a.numpy() if overrides is None or name not in overrides else overrides[name]
            out[name] = wp.array(values, dtype=a.dtype, shape=a.shape, device=a.device, requires_grad=requires_grad)
        return out

    # taped run
    arrays = fresh(True)
    tape = wp.Tape()
    with tape:
        outputs = list(forward(arrays))
    if not outputs:
        raise ValueError("compare_gradients: forward returned no output arrays")
    rng = np.random.default_rng(seed)
    weights, grads = [], {}
    for out in outputs:
        w = rng.normal(size=out.numpy().shape).astype(np.float32)
        weights.append(w.astype(np.float64).reshape(-1))
        grads[out] = wp.array(w, dtype=out.dtype, shape=out.shape, device=out.device)
    tape.backward(grads=grads)
    autodiff = {name: (_flat(a.grad) if a.grad is not None else np.zeros(a.size * _scalars(a)))
                for name, a in arrays.items()}  # fmt: skip
    tape.zero()

    def loss(overrides: dict) -> float:
        outs = list(forward(fresh(False, overrides)))
        return float(sum(np.dot(w, _flat(o)) for w, o in zip(weights, outs)))

    result = {}
    for name, a in inputs.items():
        base = a.numpy()
        flat_base = base.reshape(-1).astype(np.float32)
        comp = np.arange(flat_base.size) if components is None or name not in components \
            else np.asarray(list(components[name]), dtype=np.int64)  # fmt: skip
        h = float(eps[name] if isinstance(eps, Mapping) else eps)
        fd = np.zeros(len(comp))
        for k, c in enumerate(comp):
            plus, minus = flat_base.copy(), flat_base.copy()
            plus[c] += h
            minus[c] -= h
            # the step actually taken in float32
            step = float(np.float64(plus[c]) - np.float64(minus[c]))
            fd[k] = (loss({name: plus.reshape(base.shape)}) - loss({name: minus.reshape(base.shape)})) / step
        result[name] = GradientComparison(name, comp, autodiff[name][comp], fd, h)
    return result


def _scalars(a) -> int:
    import warp as wp

    return int(wp.types.type_length(a.dtype))


class GradientChecks:
    """The conformance kit's gradient checks (see the module documentation); mixed into
    :class:`~armillary.testing.SolverConformance`, whose helpers (``require``, ``builder``,
    ``finalize``, ``make_solver``, ``tolerances``, ``dt``) they use."""

    gradient_steps: ClassVar[int] = 50
    """Steps of every gradient scene (at the kit's ``dt``)."""

    def _require_differentiable(self):
        caps = self.capabilities()
        if not caps.differentiable:
            pytest.skip(f"{self.solver_class().__name__} does not declare differentiable=True")

    def _grad_model(self, b):
        """``finalize(builder)`` with ``requires_grad=True`` (a subclass ``finalize`` override is honoured)."""
        original = b.finalize

        def finalize(*args, **kwargs):
            kwargs["requires_grad"] = True
            return original(*args, **kwargs)

        b.finalize = finalize
        try:
            return self.finalize(b)
        finally:
            del b.finalize

    def _rollout(self, model, init, steps: int | None = None):
        """A ``forward`` for :func:`compare_gradients`: a fresh solver (no history shared between
        the taped run and the difference runs), ``init(state, arrays)`` writing the initial state
        from the input arrays (on the tape), then ``steps`` steps, each into a state of its own."""
        steps = int(self.gradient_steps if steps is None else steps)
        grad = bool(model.requires_grad)
        dt = float(self.dt)

        def forward(arrays):
            solver = self.make_solver(model)
            states = [model.state(requires_grad=grad) for _ in range(steps + 1)]
            control = model.control(requires_grad=grad)
            init(states[0], arrays)
            for i in range(steps):
                states[i].clear_forces()
                solver.step(states[i], states[i + 1], control, None, dt)
            return self._outputs(states[-1])

        return forward

    @staticmethod
    def _outputs(state):
        outs = []
        for name in ("body_q", "body_qd", "particle_q", "particle_qd"):
            a = getattr(state, name, None)
            if a is not None and a.shape[0]:
                outs.append(a)
        return outs

    def _check(self, results: dict, scene: str):
        tol = self.tolerances.gradient_rel
        name = self.solver_class().__name__
        for comparison in results.values():
            comparison.check(tol, f"{name}, {scene}")

    # ------------------------------------------------------------------ checks
    def test_gradient_pendulum(self):
        """``differentiable`` + REVOLUTE: d final bob pose and twist / d initial ``joint_q``, ``joint_qd``."""
        self._require_differentiable()
        self.require("rigid_bodies", joint_types=[JointType.REVOLUTE])
        import warp as wp

        from ..sim.kinematics import eval_fk
        from .feature_checks import _diag, _xform

        L = 0.5
        b = self.builder()
        link = b.add_link(xform=_xform((L, 0.0, 2.0)), mass=1.0, inertia=_diag(0.01))
        j = b.add_joint_revolute(parent=-1, child=link, parent_xform=_xform((0.0, 0.0, 2.0)),
                                 child_xform=_xform((-L, 0.0, 0.0)), axis=wp.vec3(0.0, 1.0, 0.0))  # fmt: skip
        b.add_articulation([j])
        model = self._grad_model(b)

        def init(state, arrays):
            wp.copy(state.joint_q, arrays["joint_q"])
            wp.copy(state.joint_qd, arrays["joint_qd"])
            eval_fk(model, arrays["joint_q"], arrays["joint_qd"], state)

        dev = model.device
        inputs = {"joint_q": wp.array([0.4], dtype=float, device=dev),
                  "joint_qd": wp.array([1.0], dtype=float, device=dev)}  # fmt: skip
        results = compare_gradients(self._rollout(model, init), inputs, eps=1e-2)
        self._check(results, f"pendulum, {self.gradient_steps} steps of {self.dt:g} s")

    def test_gradient_free_body(self):
        """``differentiable`` + FREE: d final pose and twist / d initial position and twist of a free body."""
        self._require_differentiable()
        self.require("rigid_bodies", joint_types=[JointType.FREE])
        import warp as wp

        from ..sim.kinematics import eval_fk
        from .feature_checks import _axis_angle, _xform

        b = self.builder()
        self.add_sphere_body(b, (0.1, -0.2, 1.0), radius=0.1, mass=2.0, com=(0.05, 0.0, 0.0),
                             quat=_axis_angle((1.0, 0.0, 0.0), 0.3))  # fmt: skip
        model = self._grad_model(b)
        dev = model.device
        twist = np.array([0.5, -0.3, 2.0, 4.0, -2.0, 10.0], np.float32)  # 0.5 rad turned in 50 steps
        if self.capabilities().coordinates == Coordinates.GENERALIZED:
            q0 = model.joint_q.numpy()

            def init(state, arrays):
                wp.copy(state.joint_q, arrays["joint_q"])
                wp.copy(state.joint_qd, arrays["joint_qd"])
                eval_fk(model, arrays["joint_q"], arrays["joint_qd"], state)

            inputs = {"joint_q": wp.array(q0, dtype=float, device=dev),
                      "joint_qd": wp.array(twist, dtype=float, device=dev)}  # fmt: skip
            components = {"joint_q": range(3)}
        else:

            def init(state, arrays):
                wp.copy(state.body_q, arrays["body_q"])
                wp.copy(state.body_qd, arrays["body_qd"])

            inputs = {"body_q": wp.array(model.body_q.numpy(), dtype=wp.transform, device=dev),
                      "body_qd": wp.array(twist[None], dtype=wp.spatial_vector, device=dev)}  # fmt: skip
            components = {"body_q": range(3)}
        results = compare_gradients(self._rollout(model, init), inputs, eps=1e-2, components=components)
        self._check(results, f"free body, {self.gradient_steps} steps of {self.dt:g} s")

    def test_gradient_particle(self):
        """``differentiable`` + ``particles``: d final particle state / d initial position and velocity."""
        self._require_differentiable()
        self.require("particles")
        import warp as wp

        b = self.builder()
        b.add_particle((0.0, 0.0, 1.0), (0.0, 0.0, 0.0), 1.0, 0.05)
        model = self._grad_model(b)
        dev = model.device

        def init(state, arrays):
            wp.copy(state.particle_q, arrays["particle_q"])
            wp.copy(state.particle_qd, arrays["particle_qd"])

        inputs = {"particle_q": wp.array([[0.1, -0.2, 1.0]], dtype=wp.vec3, device=dev),
                  "particle_qd": wp.array([[0.5, -0.3, 2.0]], dtype=wp.vec3, device=dev)}  # fmt: skip
        results = compare_gradients(self._rollout(model, init), inputs, eps=1e-2)
        self._check(results, f"particle, {self.gradient_steps} steps of {self.dt:g} s")

    def test_not_differentiable_raises_under_tape(self):
        """A solver without ``differentiable=True`` stepped under a recording tape on a model with
        ``requires_grad`` raises ``NotDifferentiableError`` (never silent zero gradients)."""
        caps = self.capabilities()
        name = self.solver_class().__name__
        if caps.differentiable:
            pytest.skip(f"{name} declares differentiable=True (its gradients are checked instead)")
        import warp as wp

        from ..solvers.step_guard import NotDifferentiableError  # the class the step wrapper raises

        b = self.builder()
        if "rigid_bodies" in caps.features and JointType.FREE in caps.joint_types:
            self.add_sphere_body(b, (0.0, 0.0, 1.0))
        elif "particles" in caps.features:
            b.add_particle((0.0, 0.0, 1.0), (0.0, 0.0, 0.0), 1.0, 0.05)
        model = self._grad_model(b)
        solver = self.make_solver(model)
        state_0, state_1 = model.state(), model.state()
        with wp.Tape():
            with pytest.raises(NotDifferentiableError, match=name):
                solver.step(state_0, state_1, model.control(), None, float(self.dt))

"""The solver conformance suite: :class:`SolverConformance`.

Every check builds its own small scene with :class:`armillary.ModelBuilder`,
runs the solver with a fixed time step (:attr:`SolverConformance.dt`) and
compares the outcome with an analytic expectation within a stated tolerance
(:class:`Tolerances`). Contract checks run for every solver; physical checks
run for the features the solver declares in ``capabilities`` and are skipped
otherwise, the skip reason naming the missing feature.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

import numpy as np
import pytest

from ..flags import ModelFlags, StateFlags
from ..sim.enums import JointType
from ..solvers.base import SolverBase
from ..sim.rotations import quat_rotate, quat_to_matrix
from ..solvers.capabilities import FEATURES, Coordinates, SolverCapabilities
from .faults import FAULT_CASES, run_fault_cases
from .feature_checks import FeatureChecks, _axis_angle, _diag, _xform
from .gradient_checks import GradientChecks

__all__ = ["SolverConformance", "Tolerances"]


@dataclasses.dataclass(frozen=True)
class Tolerances:
    """The tolerances of the physical checks (override per solver with care: they are documentation).

    Attributes:
        free_fall_abs: extra absolute error [m] allowed on top of the
            discretisation bound ``g * t * dt`` for the free-fall height.
        velocity_rel: relative error of velocities in free fall / under a torque.
        force_balance_drift: how far [m] a body held by a force equal to its
            weight may drift in one second.
        pendulum_energy: largest allowed energy error, as a fraction of
            ``m g L`` (pendulum of length ``L``).
        pendulum_length: largest allowed change of the pivot-COM distance,
            as a fraction of ``L``.
        contact_penetration: largest allowed penetration of a resting body
            into the ground, as a fraction of its size (sphere radius / box
            half-height).
        contact_jitter: largest allowed standard deviation [m] of the resting
            height over the last 0.3 s.
        contact_speed: largest speed [m/s] of a resting body over the last 0.3 s.
        friction_rel: relative error of the sliding deceleration ``mu g``.
        worlds_abs: largest difference between a replicated world and the
            single-world run (same solver) [m, m/s].
        observable_rel: relative error of the standard solver observables
            (``body_qdd`` of a falling body against ``g``, ``contact_f`` of a
            resting box and ``body_parent_f`` of a hanging pendulum against
            ``m g``).
        joint_rel: relative error of the one-DOF joint checks (rate under
            ``joint_f``, with armature, damping decay, dry-friction slow-down,
            velocity limit, drive targets).
        period_rel: relative error of an oscillation period (joint spring,
            particle spring).
        joint_limit_abs: how far [rad or m] a joint may pass its position limit.
        limit_spring_rel: relative error of the static deflection of a soft
            joint limit (load / ``limit_ke``) and of a ROD cantilever's sag.
        mimic_abs: largest ``|q_follower - (c0 + c1 q_leader)|`` [rad or m].
        loop_closure: largest opening of a loop-closing joint, as a fraction of
            the crank length (and tilt [rad] of the four-bar's coupler).
        restitution_abs: largest error of the rebound height ratio (``e^2``).
        cloth_stretch: largest strain of a cloth triangle edge.
        soft_volume: largest relative volume change of a soft body.
        gradient_rel: largest relative error ``|g_ad - g_fd| / |g_fd|`` of the autodiff gradients
            against central finite differences (float32, step 1e-2) in the gradient checks of a
            solver declaring ``differentiable`` (see :mod:`armillary.testing.gradient_checks`).

    The BALL, FIXED, D6 and DISTANCE checks reuse ``pendulum_length`` (anchor
    drift as a fraction of the lever) and ``pendulum_energy``; particle
    contacts reuse ``contact_penetration``.
    """

    free_fall_abs: float = 1e-3
    velocity_rel: float = 1e-2
    force_balance_drift: float = 1e-3
    pendulum_energy: float = 0.05
    pendulum_length: float = 0.02
    contact_penetration: float = 0.25
    contact_jitter: float = 1e-3
    contact_speed: float = 0.02
    friction_rel: float = 0.15
    worlds_abs: float = 1e-5
    observable_rel: float = 0.05
    joint_rel: float = 0.05
    period_rel: float = 0.05
    joint_limit_abs: float = 0.05
    limit_spring_rel: float = 0.1
    mimic_abs: float = 0.02
    loop_closure: float = 0.02
    restitution_abs: float = 0.05
    cloth_stretch: float = 0.1
    soft_volume: float = 0.05
    gradient_rel: float = 0.02


def _snapshot(obj) -> dict[str, bytes]:
    """Bytes of every Warp array attribute of ``obj`` (a State)."""
    import warp as wp

    out = {}
    for name, value in sorted(vars(obj).items()):
        if isinstance(value, wp.array):
            out[name] = value.numpy().tobytes()
    return out


class _Sim:
    """Ping-pong stepping of one model with the solver under test (host-side helper)."""

    def __init__(self, case: SolverConformance, model, solver=None):
        self.case = case
        self.model = model
        self.solver = solver if solver is not None else case.make_solver(model)
        self.dt = float(case.dt)
        self.state_0 = model.state()
        self.state_1 = model.state()
        self.control = model.control()
        self.contacts = None
        # solvers that consume the core collision pipeline get fresh contacts every step
        if self.solver.capabilities.collision_pipeline and hasattr(model, "collide"):
            self.contacts = model.contacts()
        self.time = 0.0
        self.observables = None
        """A container from ``solver.observables()`` passed to every step when set."""

    @property
    def state(self):
        return self.state_0

    def set_body_qd(self, body_qd: np.ndarray):
        """Set every body's COM twist; for generalized-coordinate solvers also ``joint_qd`` (by IK)."""
        for s in (self.state_0, self.state_1):
            s.body_qd.assign(np.asarray(body_qd, dtype=np.float32))
            if self.solver.capabilities.coordinates == Coordinates.GENERALIZED and self.model.joint_count:
                from ..sim.kinematics import eval_ik

                eval_ik(self.model, s, s.joint_q, s.joint_qd)

    def step(self, count: int = 1, apply=None, record=None):
        """Step ``count`` times; ``apply(state)`` sets forces, ``record(sim)`` observes after each step."""
        for _ in range(int(count)):
            self.state_0.clear_forces()
            if apply is not None:
                apply(self.state_0)
            if self.contacts is not None:
                self.model.collide(self.state_0, self.contacts)
            if self.observables is not None:
                self.solver.step(self.state_0, self.state_1, self.control, self.contacts, self.dt,
                                 observables=self.observables)  # fmt: skip
            else:
                self.solver.step(self.state_0, self.state_1, self.control, self.contacts, self.dt)
            self.state_0, self.state_1 = self.state_1, self.state_0
            self.time += self.dt
            if record is not None:
                record(self)

    # observations ----------------------------------------------------------
    def body_q(self) -> np.ndarray:
        return self.state_0.body_q.numpy().astype(np.float64)

    def body_qd(self) -> np.ndarray:
        return self.state_0.body_qd.numpy().astype(np.float64)

    def com(self) -> np.ndarray:
        """World COM positions of all bodies."""
        q = self.body_q()
        com = self.model.body_com.numpy().astype(np.float64)
        return q[:, :3] + quat_rotate(q[:, 3:7], com)


class SolverConformance(FeatureChecks, GradientChecks):
    """Subclass in one line to run the conformance suite against a solver.

    Class attributes:
        solver: the solver, as a name resolved through ``armillary.solvers``
            (``"SolverXPBD"``) or as the class itself.
        solver_kwargs: keyword arguments passed to the constructor.
        feature_solver_kwargs: ``{feature: {kwarg: value}}``, extra constructor
            arguments for the checks of a feature the solver only enables on
            request (``{"restitution": {"enable_restitution": True}}``); merged
            over ``solver_kwargs`` in every check that requires the feature.
        device: Warp device of the test scenes (default ``"cpu"``).
        dt: time step of every check [s] (default 1 ms).
        tolerances: a :class:`Tolerances` (the defaults are the standard).
        graph_capturable: ``True`` (default) checks that ``step`` never
            reads device arrays back or synchronises (captured in a CUDA graph
            on CUDA devices; on the CPU, array read-backs and
            ``wp.synchronize*`` are trapped).

    Contract checks (every solver): honest, well-formed capabilities; ``step``
    leaves ``state_in`` untouched and accepts ``control=None`` and
    ``contacts=None``; ``notify_model_changed`` accepts every
    :class:`~armillary.ModelFlags` and custom bits such as ``1 << 20``;
    ``reset`` restores the model's initial state (only the selected worlds
    when a ``world_mask`` is given, if ``reset_world_mask`` is declared); a
    model using an undeclared joint type, particles or several worlds is
    rejected at construction with ``ValueError``. Solver observables: ``step``
    takes ``observables=`` (keyword only, default ``None``); ``SUPPORTED_OBSERVABLES``
    / ``supported_observables`` name kinds the solver's ``Observables`` declares
    (one field each); unsupported, unknown and string requests and containers
    of another solver instance are rejected; every supported kind is allocated,
    filled with finite values by a step, without host synchronisation.

    Physical checks (per declared feature): ``rigid_bodies`` (free fall of a
    spinning body with an offset COM), ``particles`` (free fall),
    ``body_forces`` (a force equal to the weight holds a body; a torque spins
    it up at ``tau / I``), ``particle_forces``, ``REVOLUTE`` joints (pendulum
    energy), ``rigid_contacts`` (a sphere and a box come to rest on the
    ground), ``friction`` (a sliding box decelerates at ``mu g``),
    ``kinematic_bodies`` (prescribed motion; with ``rigid_contacts``, a
    kinematic body pushes a dynamic one), ``multiple_worlds`` (overlapping
    replicated worlds evolve exactly like one world) and determinism
    (``deterministic=True``: two runs are bit-identical); and per supported
    standard observable: ``body_qdd`` of a falling body is ``(g, 0)``,
    ``contact_f`` of a resting box carries its weight, ``body_parent_f`` is
    ``m g`` up for a pendulum hanging at rest and zero for a free falling body.
    Every other feature and joint type has its check in
    :class:`~armillary.testing.feature_checks.FeatureChecks` (mixed in here).

    Differentiability (:class:`~armillary.testing.gradient_checks.GradientChecks`, mixed in
    here): with ``differentiable=True``, autodiff gradients through a list of states match
    central finite differences within ``gradient_rel`` on a pendulum (REVOLUTE), a free body
    (FREE) and a particle (``particles``), over ``gradient_steps`` steps; without it, stepping
    under a recording tape on a model with ``requires_grad`` raises ``NotDifferentiableError``.
    """

    solver: ClassVar[Any] = None
    solver_kwargs: ClassVar[dict] = {}
    feature_solver_kwargs: ClassVar[dict] = {}
    device: ClassVar[str] = "cpu"
    dt: ClassVar[float] = 1.0e-3
    tolerances: ClassVar[Tolerances] = Tolerances()
    graph_capturable: ClassVar[bool] = True
    """Set to ``False`` (and say why) for a solver whose ``step`` synchronises with the host."""
    kinematic_motion: ClassVar[str] = "integrate"
    #: ``True`` (default): entities of the global world (-1) fall under the last row of
    #: ``Model.gravity`` (checked by :meth:`test_global_world_gravity`); a solver that cannot give
    #: them their own gravity sets ``False`` and documents what it does instead.
    global_world_gravity: ClassVar[bool] = True
    """How the solver moves kinematic bodies: ``"integrate"`` advances their pose by their prescribed
    twist; ``"hold"`` keeps the prescribed ``body_q`` / ``body_qd`` exactly as the script wrote them
    (SolverSemiImplicit), so the kit writes the pose every step."""

    pytestmark = [pytest.mark.conformance]

    # ---------------------------------------------------------------- helpers
    @classmethod
    def solver_class(cls) -> type:
        """The solver class under test (resolving a name through ``armillary.solvers``)."""
        target = cls.solver
        if target is None:
            raise TypeError(f"{cls.__name__}.solver is not set: give a solver name or class")
        if isinstance(target, str):
            from .. import solvers

            target = getattr(solvers, target)
        if not isinstance(target, type):
            raise TypeError(f"{cls.__name__}.solver must be a solver class or name, got {target!r}")
        return target

    @classmethod
    def capabilities(cls) -> SolverCapabilities:
        return cls.solver_class().capabilities

    def make_solver(self, model):
        kwargs = dict(self.solver_kwargs)
        for feature in getattr(self, "_required_features", ()):
            kwargs.update(self.feature_solver_kwargs.get(feature, {}))
        return self.solver_class()(model, **kwargs)

    def require(self, *features: str, joint_types=()):
        """Skip unless the solver declares every feature and joint type named (the features'
        ``feature_solver_kwargs`` then apply to the solvers this check makes)."""
        unknown = sorted(set(features) - set(FEATURES)) + sorted(set(self.feature_solver_kwargs) - set(FEATURES))
        if unknown:
            raise ValueError(
                f"{type(self).__name__}: unknown feature(s) {unknown}; allowed: {', '.join(sorted(FEATURES))}"
            )
        self._required_features = tuple(getattr(self, "_required_features", ())) + tuple(features)
        caps = self.capabilities()
        name = self.solver_class().__name__
        missing = [f for f in features if f not in caps.features]
        if missing:
            pytest.skip(f"{name} does not declare feature(s) {', '.join(repr(m) for m in missing)}")
        missing_j = [JointType(j).name for j in joint_types if JointType(j) not in caps.joint_types]
        if missing_j:
            pytest.skip(f"{name} does not declare joint type(s) {', '.join(missing_j)}")

    def builder(self, gravity=None):
        from ..sim.builder import ModelBuilder

        if gravity is None:
            return ModelBuilder()
        return ModelBuilder(gravity=gravity)

    def shape_cfg(self, **kw):
        from ..sim.builder import ModelBuilder

        kw.setdefault("density", 0.0)
        return ModelBuilder.ShapeConfig(**kw)

    def add_sphere_body(self, b, pos, radius=0.1, mass=1.0, com=None, cfg=None, is_kinematic=False, quat=None):
        inertia = 0.4 * mass * radius * radius
        kw = {}
        if com is not None:
            kw["com"] = tuple(float(x) for x in com)
        body = b.add_body(
            xform=_xform(pos, quat), mass=mass, inertia=_diag(inertia), is_kinematic=is_kinematic, **kw
        )
        b.add_shape_sphere(body, radius=radius, cfg=cfg or self.shape_cfg())
        return body

    def add_box_body(self, b, pos, h=0.1, mass=1.0, cfg=None, quat=None):
        inertia = mass * (2.0 * h) ** 2 / 6.0
        body = b.add_body(xform=_xform(pos, quat), mass=mass, inertia=_diag(inertia))
        b.add_shape_box(body, hx=h, hy=h, hz=h, cfg=cfg or self.shape_cfg())
        return body

    def finalize(self, b):
        return b.finalize(device=self.device)

    def gravity(self, model) -> np.ndarray:
        return np.asarray(model.gravity.numpy(), dtype=np.float64).reshape(-1, 3)[0]

    def sim(self, model) -> _Sim:
        return _Sim(self, model)

    def observe(self, sim: _Sim, kinds=None):
        """Allocate ``sim.solver.observables(kinds)`` (default: every supported kind, with the
        sim's contacts when needed) and pass it to every later ``sim.step``; returns it."""
        solver = sim.solver
        kinds = solver.supported_observables if kinds is None else kinds
        contacts = sim.contacts
        if contacts is None:
            contacts = sim.model.contacts() if hasattr(sim.model, "contacts") else None
        sim.observables = solver.observables(kinds, contacts=contacts)
        return sim.observables

    def require_observable(self, solver, kind: str):
        if kind not in solver.supported_observables:
            pytest.skip(f"{type(solver).__name__} does not support the {kind!r} observable")

    def _mixed_model(self, worlds: int = 1):
        """A small scene using whatever the solver declares (bodies, particles, ground)."""
        caps = self.capabilities()
        template = self.builder()
        has_bodies = "rigid_bodies" in caps.features and JointType.FREE in caps.joint_types
        if has_bodies:
            self.add_sphere_body(template, (0.0, 0.0, 0.5))
            self.add_box_body(template, (0.5, 0.0, 0.3), quat=_axis_angle((1.0, 1.0, 0.0), 0.3))
        if "particles" in caps.features:
            template.add_particle((0.0, 0.5, 1.0), (0.1, 0.0, 0.0), 1.0, 0.05)
        if worlds > 1 or "multiple_worlds" in caps.features:
            b = self.builder()
            b.replicate(template, worlds)
        else:
            b = template
        if has_bodies and "rigid_contacts" in caps.features:
            b.add_ground_plane()
        return self.finalize(b), has_bodies

    # ============================================================ contract
    def test_capabilities_are_well_formed(self):
        cls = self.solver_class()
        assert issubclass(cls, SolverBase), f"{cls.__name__} must subclass armillary.solvers.SolverBase"
        caps = cls.capabilities
        assert isinstance(caps, SolverCapabilities), f"{cls.__name__}.capabilities must be a SolverCapabilities"
        assert caps is not SolverBase.capabilities or cls is SolverBase, (
            f"{cls.__name__} does not declare its own capabilities"
        )
        assert isinstance(caps.coordinates, Coordinates)
        assert caps.features <= set(FEATURES), f"unknown features {sorted(caps.features - set(FEATURES))}"
        assert cls.step is not SolverBase.step, f"{cls.__name__} does not implement step()"
        implies = {
            "friction": "rigid_contacts",
            "restitution": "rigid_contacts",
            "body_forces": "rigid_bodies",
            "kinematic_bodies": "rigid_bodies",
            "rigid_contacts": "rigid_bodies",
            "particle_forces": "particles",
            "particle_contacts": "particles",
            "springs": "particles",
            "cloth": "particles",
            "soft_bodies": "particles",
            "reset_world_mask": "multiple_worlds",
        }
        for feature, needed in implies.items():
            if feature in caps.features:
                assert needed in caps.features, f"{cls.__name__} declares {feature!r} but not {needed!r}"
        joint_features = {
            "joint_limits", "joint_drives", "joint_springs", "joint_forces", "mimic_joints", "loop_joints",
        }
        if caps.features & joint_features:
            assert caps.joint_types - {JointType.FREE, JointType.FIXED}, (
                f"{cls.__name__} declares joint features {sorted(caps.features & joint_features)} "
                f"but no joint type with degrees of freedom besides FREE"
            )

    def test_step_leaves_state_in_untouched(self):
        model, has_bodies = self._mixed_model()
        sim = self.sim(model)
        rng = np.random.default_rng(0)
        if has_bodies:
            qd = rng.uniform(-1.0, 1.0, size=(model.body_count, 6))
            sim.set_body_qd(qd)
        sim.step(5)
        state_in, state_out = sim.state_0, sim.state_1
        if has_bodies and state_in.body_f is not None and model.body_count:
            state_in.body_f.assign(rng.uniform(-1.0, 1.0, size=(model.body_count, 6)).astype(np.float32))
        if getattr(state_in, "particle_f", None) is not None and model.particle_count:
            state_in.particle_f.assign(rng.uniform(-1.0, 1.0, size=(model.particle_count, 3)).astype(np.float32))
        before = _snapshot(state_in)
        contacts = sim.contacts
        if contacts is not None:
            model.collide(state_in, contacts)
        sim.solver.step(state_in, state_out, None, contacts, self.dt)
        after = _snapshot(state_in)
        changed = sorted(k for k in before if before[k] != after.get(k))
        assert not changed, f"step() modified state_in arrays: {changed}"
        assert _snapshot(state_out) != before or model.body_count + model.particle_count == 0, (
            "step() did not write state_out"
        )

    def test_step_does_not_synchronise_with_the_host(self, monkeypatch, sim=None):
        if not self.graph_capturable:
            pytest.skip(f"{type(self).__name__} sets graph_capturable = False")
        import warp as wp

        if sim is None:
            sim = self.sim(self._mixed_model()[0])
        model = sim.model
        has_bodies = bool(model.body_count)
        if has_bodies:
            sim.set_body_qd(np.tile([[0.3, 0.0, 0.0, 0.0, 0.0, 1.0]], (model.body_count, 1)))
        sim.step(2)  # warm-up: kernels compiled, caches allocated
        device = wp.get_device(model.device)
        if device.is_cuda:
            with wp.ScopedCapture(device=device) as capture:
                sim.step(2)
            wp.capture_launch(capture.graph)
            wp.synchronize_device(device)
            return

        from .host_sync import forbid_host_sync

        forbid_host_sync(monkeypatch, "step()")
        sim.step(2)

    def test_step_with_observables_does_not_synchronise_with_the_host(self, monkeypatch):
        """Filling every supported observable keeps ``step`` free of host synchronisation."""
        if not self.graph_capturable:
            pytest.skip(f"{type(self).__name__} sets graph_capturable = False")
        model, _ = self._mixed_model()
        sim = self.sim(model)
        if not sim.solver.supported_observables:
            pytest.skip(f"{type(sim.solver).__name__} supports no observables")
        self.observe(sim)
        self.test_step_does_not_synchronise_with_the_host.__func__(self, monkeypatch, sim=sim)

    # ========================================================= observables
    def test_observables_contract(self):
        """``step(..., observables=None)`` keyword; declarations, allocation and rejections."""
        import dataclasses
        import inspect

        cls = self.solver_class()
        name = cls.__name__
        param = inspect.signature(cls.step).parameters.get("observables")
        assert param is not None and param.kind is inspect.Parameter.KEYWORD_ONLY and param.default is None, (
            f"{name}.step must take observables=None as a keyword-only parameter (SolverBase.step's signature)"
        )
        assert isinstance(cls.ObservableKind, type) and issubclass(cls.ObservableKind, SolverBase.ObservableKind), (
            f"{name}.ObservableKind must subclass SolverBase.ObservableKind"
        )
        assert isinstance(cls.Observables, type) and issubclass(cls.Observables, SolverBase.Observables), (
            f"{name}.Observables must subclass SolverBase.Observables"
        )
        assert dataclasses.is_dataclass(cls.Observables) and cls.Observables.__eq__ is object.__eq__, (
            f"{name}.Observables must be a @dataclass(eq=False)"
        )
        model, _ = self._mixed_model()
        sim = self.sim(model)
        solver = sim.solver
        supported = solver.supported_observables
        assert all(isinstance(k, str) and k for k in supported), f"{name}.supported_observables: {supported!r}"
        declared = {}
        for f in dataclasses.fields(cls.Observables):
            spec = f.metadata.get("solver_observable")
            if spec is not None:
                declared.setdefault(spec.kind or f.name, []).append(f.name)
        for kind in supported:
            assert len(declared.get(kind, ())) == 1, (
                f"{name} supports {kind!r} but {cls.Observables.__name__} declares {declared.get(kind, [])} for it"
            )
        empty = solver.observables(set())
        assert empty.kinds == frozenset() and empty.model is model
        with pytest.raises(ValueError):
            solver.observables({"no_such_observable_kind"})
        with pytest.raises(TypeError):
            solver.observables("body_qdd")
        foreign = self.make_solver(model).observables(set())
        with pytest.raises(ValueError):
            solver.step(sim.state_0, sim.state_1, sim.control, sim.contacts, self.dt, observables=foreign)
        solver.step(sim.state_0, sim.state_1, sim.control, sim.contacts, self.dt, observables=empty)
        solver.step(sim.state_0, sim.state_1, sim.control, sim.contacts, self.dt, observables=None)

    def test_observables_are_filled(self):
        """Every supported kind is allocated; a step writes every row of the standard kinds."""
        import dataclasses

        model, has_bodies = self._mixed_model()
        sim = self.sim(model)
        solver = sim.solver
        if not solver.supported_observables:
            pytest.skip(f"{type(solver).__name__} supports no observables")
        if has_bodies:
            sim.set_body_qd(np.tile([[0.3, 0.0, 0.0, 0.0, 0.0, 1.0]], (model.body_count, 1)))
        obs = self.observe(sim)
        sentinel = {}
        for f in dataclasses.fields(obs):
            arr = getattr(obs, f.name)
            spec = f.metadata.get("solver_observable")
            if spec is None or arr is None:
                continue
            assert (spec.kind or f.name) in obs.kinds
            standard = (spec.kind or f.name) in ("body_qdd", "body_parent_f", "contact_f")
            if standard and arr.shape[0]:
                arr.fill_(float("nan"))  # a row the step does not write stays NaN
                sentinel[f.name] = arr
        sim.step(3)
        for fname, arr in sentinel.items():
            assert np.isfinite(arr.numpy()).all(), f"observable {fname!r} was not (fully) written by step()"

    def test_observable_body_qdd_of_a_falling_body(self):
        """``body_qdd``: a falling body accelerates at ``(g, 0)``."""
        self.require("rigid_bodies", joint_types=[JointType.FREE])
        b = self.builder()
        self.add_sphere_body(b, (0.0, 0.0, 10.0))
        self.add_sphere_body(b, (1.0, 0.0, 10.0), com=(0.2, 0.0, 0.0))
        model = self.finalize(b)
        sim = self.sim(model)
        self.require_observable(sim.solver, "body_qdd")
        obs = self.observe(sim, {"body_qdd"})
        sim.step(5)
        g = self.gravity(model)
        qdd = obs.body_qdd.numpy().astype(np.float64)
        tol = self.tolerances.observable_rel * float(np.linalg.norm(g))
        np.testing.assert_allclose(qdd[:, :3], np.tile(g, (2, 1)), atol=tol,
                                   err_msg="body_qdd of a falling body is not g (linear part first, COM)")
        np.testing.assert_allclose(qdd[:, 3:], 0.0, atol=tol, err_msg="body_qdd: angular part of a falling body")

    def test_observable_contact_f_of_a_resting_box(self):
        """``contact_f``: the contacts of a box resting on the ground carry its weight (force on body 0
        by body 1, rows of inactive contacts zero)."""
        self.require("rigid_bodies", "rigid_contacts", joint_types=[JointType.FREE])
        h, mass = 0.1, 2.0
        b = self.builder()
        box = self.add_box_body(b, (0.0, 0.0, h), h=h, mass=mass)
        b.add_ground_plane()
        model = self.finalize(b)
        sim = self.sim(model)
        self.require_observable(sim.solver, "contact_f")
        if sim.contacts is None:
            pytest.skip("the conformance scenes give this solver no Contacts")
        obs = self.observe(sim, {"contact_f"})
        sim.step(int(round(0.5 / self.dt)))
        contacts = obs.contacts
        n = int(contacts.rigid_contact_count.numpy()[0])
        f = obs.contact_f.numpy().astype(np.float64)
        assert f.shape[0] == contacts.rigid_contact_max + contacts.soft_contact_max
        shape_body = model.shape_body.numpy()
        s0 = contacts.rigid_contact_shape0.numpy()[:n]
        s1 = contacts.rigid_contact_shape1.numpy()[:n]
        net = np.zeros(3)
        for i in range(n):
            if s0[i] >= 0 and shape_body[s0[i]] == box:
                net += f[i, :3]
            if s1[i] >= 0 and shape_body[s1[i]] == box:
                net -= f[i, :3]
        g = self.gravity(model)
        weight = -mass * g
        err = np.linalg.norm(net - weight)
        assert err <= self.tolerances.observable_rel * np.linalg.norm(weight), (
            f"contact_f on the resting box sums to {net} N, its weight is {weight} N "
            "(rows hold the force on body 0 by body 1)"
        )
        assert not np.any(f[contacts.rigid_contact_max:]), "contact_f: soft-contact rows must be zero here"
        inactive = f[n:contacts.rigid_contact_max]
        assert not np.any(inactive), "contact_f: rows of inactive contacts must be zero"

    def test_observable_body_parent_f(self):
        """``body_parent_f``: ``m g`` up (no torque) for a pendulum hanging at rest (mean over its
        last 0.2 s of 1 s); zero for a free falling body (FREE joints transmit only their ``joint_f``)."""
        self.require("rigid_bodies")
        caps = self.capabilities()
        g_norm = 9.81
        checked = 0
        if JointType.REVOLUTE in caps.joint_types:
            import warp as wp

            L, mass = 0.5, 1.5
            pivot = np.array([0.0, 0.0, 2.0])
            b = self.builder()
            link = b.add_link(xform=_xform(pivot - [0.0, 0.0, L]), mass=mass, inertia=_diag(0.01))
            j = b.add_joint_revolute(
                parent=-1, child=link, parent_xform=_xform(pivot), child_xform=_xform((0.0, 0.0, L)),
                axis=wp.vec3(0.0, 1.0, 0.0),
            )
            b.add_articulation([j])
            model = self.finalize(b)
            sim = self.sim(model)
            self.require_observable(sim.solver, "body_parent_f")
            obs = self.observe(sim, {"body_parent_f"})
            sim.step(int(round(0.8 / self.dt)))
            samples = []  # mean over 0.2 s: penalty joints may still ring around the equilibrium
            sim.step(int(round(0.2 / self.dt)), record=lambda s: samples.append(obs.body_parent_f.numpy()[0]))
            g = self.gravity(model)
            g_norm = float(np.linalg.norm(g))
            f = np.mean(np.asarray(samples, dtype=np.float64), axis=0)
            tol = self.tolerances.observable_rel * mass * g_norm
            np.testing.assert_allclose(f[:3], -mass * g, atol=tol,
                                       err_msg="body_parent_f of a hanging pendulum is not m g up (force first)")
            np.testing.assert_allclose(f[3:], 0.0, atol=tol * L,
                                       err_msg="body_parent_f of a hanging pendulum: torque about its COM")
            checked += 1
        if JointType.FREE in caps.joint_types:
            b = self.builder()
            self.add_sphere_body(b, (0.0, 0.0, 10.0), mass=2.0)
            model = self.finalize(b)
            sim = self.sim(model)
            self.require_observable(sim.solver, "body_parent_f")
            obs = self.observe(sim, {"body_parent_f"})
            sim.step(5)
            f = obs.body_parent_f.numpy().astype(np.float64)[0]
            np.testing.assert_allclose(f, 0.0, atol=self.tolerances.observable_rel * 2.0 * g_norm,
                                       err_msg="body_parent_f of a free falling body is not zero")
            checked += 1
        if not checked:
            pytest.skip("the solver declares neither REVOLUTE nor FREE joints")

    def test_notify_model_changed_accepts_all_and_custom_flags(self):
        model, _ = self._mixed_model()
        sim = self.sim(model)
        for flags in [
            *ModelFlags,
            ModelFlags.ALL,
            1 << 20,
            int(ModelFlags.ALL) | (1 << 20),
            ModelFlags.BODY_INERTIAL_PROPERTIES | ModelFlags.SHAPE_PROPERTIES,
        ]:
            sim.solver.notify_model_changed(flags)
        sim.step(3)
        for name in ("body_q", "particle_q"):
            arr = getattr(sim.state, name, None)
            if arr is not None and arr.shape[0]:
                assert np.isfinite(arr.numpy()).all(), f"{name} not finite after notify_model_changed + step"

    def test_reset_restores_initial_state(self):
        model, _ = self._mixed_model()
        sim = self.sim(model)
        sim.step(20)
        sim.solver.reset(sim.state, None)
        for name in ("body_q", "body_qd", "particle_q", "particle_qd", "joint_q", "joint_qd"):
            arr = getattr(sim.state, name, None)
            ref = getattr(model, name, None)
            if arr is not None and ref is not None and arr.shape[0]:
                np.testing.assert_array_equal(arr.numpy(), ref.numpy(), err_msg=f"reset() did not restore {name}")
        for name in ("body_f", "particle_f"):
            arr = getattr(sim.state, name, None)
            if arr is not None and arr.shape[0]:
                assert not np.any(arr.numpy()), f"reset() did not zero {name}"

    def test_reset_with_world_mask_resets_only_selected_worlds(self):
        self.require("multiple_worlds", "reset_world_mask")
        import warp as wp

        model, _ = self._mixed_model(worlds=3)
        sim = self.sim(model)
        sim.step(30)
        names = [
            n
            for n in ("body_q", "body_qd", "particle_q", "particle_qd")
            if getattr(sim.state, n, None) is not None and getattr(sim.state, n).shape[0]
        ]
        assert names, "the scene has neither bodies nor particles"
        before = {n: getattr(sim.state, n).numpy().copy() for n in names}
        mask = wp.array([False, True, False], dtype=wp.bool, device=model.device)
        sim.solver.reset(sim.state, world_mask=mask, flags=StateFlags.ALL)
        for n in names:
            now = getattr(sim.state, n).numpy()
            init = getattr(model, n).numpy()
            world = getattr(model, n.split("_")[0] + "_world").numpy()
            sel = world == 1
            np.testing.assert_array_equal(now[sel], init[sel], err_msg=f"world 1 {n} not reset")
            np.testing.assert_array_equal(now[~sel], before[n][~sel], err_msg=f"{n} of unselected worlds changed")
            assert not np.array_equal(before[n][sel], init[sel]) or n.endswith("qd"), (
                f"scene did not move {n} before reset (check is vacuous)"
            )
        with pytest.raises(ValueError):
            sim.solver.reset(sim.state, world_mask=wp.array([True, False], dtype=wp.bool, device=model.device))

    def test_unsupported_joint_type_is_rejected(self):
        caps = self.capabilities()
        candidates = [JointType.REVOLUTE, JointType.PRISMATIC, JointType.BALL, JointType.FIXED, JointType.FREE]
        unsupported = [j for j in candidates if j not in caps.joint_types]
        if not unsupported:
            pytest.skip(f"{self.solver_class().__name__} supports every joint type the kit can build")
        jt = unsupported[0]
        b = self.builder()
        if jt == JointType.FREE:
            self.add_sphere_body(b, (0.0, 0.0, 1.0))
        else:
            link = b.add_link(xform=_xform((0.0, 0.0, 1.0)), mass=1.0, inertia=_diag(0.01))
            add = {
                JointType.REVOLUTE: b.add_joint_revolute,
                JointType.PRISMATIC: b.add_joint_prismatic,
                JointType.BALL: b.add_joint_ball,
                JointType.FIXED: b.add_joint_fixed,
            }[jt]
            kw = {"axis": (0.0, 1.0, 0.0)} if jt in (JointType.REVOLUTE, JointType.PRISMATIC) else {}
            j = add(parent=-1, child=link, parent_xform=_xform((0.0, 0.0, 1.0)), **kw)
            b.add_articulation([j])
        model = self.finalize(b)
        with pytest.raises(ValueError) as info:
            self.make_solver(model)
        assert jt.name.lower() in str(info.value).lower(), f"the error should name joint type {jt.name}: {info.value}"

    def test_undeclared_features_are_rejected(self):
        caps = self.capabilities()
        checked = 0
        if "particles" not in caps.features:
            b = self.builder()
            b.add_particle((0.0, 0.0, 1.0), (0.0, 0.0, 0.0), 1.0, 0.05)
            with pytest.raises(ValueError):
                self.make_solver(self.finalize(b))
            checked += 1
        if "multiple_worlds" not in caps.features:
            t = self.builder()
            t.add_particle((0.0, 0.0, 1.0), (0.0, 0.0, 0.0), 1.0, 0.05)
            if JointType.FREE in caps.joint_types:
                self.add_sphere_body(t, (0.0, 0.0, 1.0))
            b = self.builder()
            b.replicate(t, 2)
            with pytest.raises(ValueError):
                self.make_solver(self.finalize(b))
            checked += 1
        if not checked:
            pytest.skip("the solver declares particles and multiple_worlds: nothing to reject")

    # ============================================================ physics
    def test_free_fall(self):
        """``rigid_bodies``: COM height after t matches z0 + g t^2 / 2 within g t dt + free_fall_abs.

        The second body spins about z with its COM offset from the body
        origin: its COM must still follow the parabola (body_qd is the COM
        twist in world frame) and its spin must be preserved.
        """
        self.require("rigid_bodies", joint_types=[JointType.FREE])
        tol = self.tolerances
        b = self.builder()
        self.add_sphere_body(b, (0.0, 0.0, 10.0))
        self.add_sphere_body(b, (1.0, 0.0, 10.0), com=(0.2, 0.0, 0.0))
        model = self.finalize(b)
        sim = self.sim(model)
        qd = np.zeros((2, 6))
        qd[1, 5] = 2.0  # spin about world z
        sim.set_body_qd(qd)
        com0 = sim.com()
        steps = int(round(0.5 / self.dt))
        sim.step(steps)
        t = steps * self.dt
        g = self.gravity(model)
        expected = com0 + 0.5 * g * t * t
        err = np.abs(sim.com() - expected).max()
        bound = float(np.linalg.norm(g)) * t * self.dt + tol.free_fall_abs
        assert err <= bound, f"free fall: COM error {err:.3e} m after {t:.2f} s exceeds {bound:.3e} m"
        v = sim.body_qd()
        np.testing.assert_allclose(
            v[:, :3], np.tile(g * t, (2, 1)), rtol=tol.velocity_rel, atol=tol.velocity_rel * np.linalg.norm(g) * t,
            err_msg="free fall: COM velocity is not g t",
        )
        np.testing.assert_allclose(v[1, 3:], [0.0, 0.0, 2.0], atol=2.0 * tol.velocity_rel,
                                   err_msg="free fall: spin of a free body changed")

    def test_particle_free_fall(self):
        """``particles``: position after t matches x0 + v0 t + g t^2 / 2 within g t dt + free_fall_abs."""
        self.require("particles")
        tol = self.tolerances
        b = self.builder()
        b.add_particle((0.0, 0.0, 10.0), (1.0, 0.0, 0.0), 1.0, 0.05)
        b.add_particle((1.0, 0.0, 5.0), (0.0, 0.0, 2.0), 2.0, 0.05)
        model = self.finalize(b)
        sim = self.sim(model)
        x0 = model.particle_q.numpy().astype(np.float64)
        v0 = model.particle_qd.numpy().astype(np.float64)
        steps = int(round(0.5 / self.dt))
        sim.step(steps)
        t = steps * self.dt
        g = self.gravity(model)
        expected = x0 + v0 * t + 0.5 * g * t * t
        err = np.abs(sim.state.particle_q.numpy() - expected).max()
        bound = float(np.linalg.norm(g)) * t * self.dt + tol.free_fall_abs
        assert err <= bound, f"particle free fall: error {err:.3e} m after {t:.2f} s exceeds {bound:.3e} m"

    def test_particle_force(self):
        """``particle_forces``: particle_f = -m g holds a particle still (drift below force_balance_drift)."""
        self.require("particles", "particle_forces")
        import warp as wp

        b = self.builder()
        b.add_particle((0.0, 0.0, 1.0), (0.0, 0.0, 0.0), 2.0, 0.05)
        model = self.finalize(b)
        sim = self.sim(model)
        g = self.gravity(model)
        f = wp.array([(-2.0 * g).astype(np.float32)], dtype=wp.vec3, device=model.device)
        sim.step(int(round(1.0 / self.dt)), apply=lambda s: wp.copy(s.particle_f, f))
        drift = np.abs(sim.state.particle_q.numpy()[0] - [0.0, 0.0, 1.0]).max()
        assert drift <= self.tolerances.force_balance_drift, f"particle held by -m g drifted {drift:.3e} m in 1 s"

    def test_body_force_balances_gravity(self):
        """``body_forces``: body_f = (-m g, tau) holds the COM still and spins the body up at tau / I."""
        self.require("rigid_bodies", "body_forces", joint_types=[JointType.FREE])
        import warp as wp

        tol = self.tolerances
        b = self.builder()
        mass, radius = 2.0, 0.1
        self.add_sphere_body(b, (0.0, 0.0, 1.0), radius=radius, mass=mass, com=(0.05, 0.0, 0.0))
        model = self.finalize(b)
        sim = self.sim(model)
        g = self.gravity(model)
        tau = np.array([0.0, 0.0, 0.01])
        wrench = np.concatenate([-mass * g, tau]).astype(np.float32)
        f = wp.array([wrench], dtype=wp.spatial_vector, device=model.device)
        com0 = sim.com()
        steps = int(round(1.0 / self.dt))
        sim.step(steps, apply=lambda s: wp.copy(s.body_f, f))
        t = steps * self.dt
        drift = np.abs(sim.com() - com0).max()
        assert drift <= tol.force_balance_drift, (
            f"a body held by body_f = -m g (linear part first, at the COM) drifted {drift:.3e} m in {t:.1f} s"
        )
        inertia = 0.4 * mass * radius * radius
        w = sim.body_qd()[0, 3:]
        expected = tau / inertia * t
        np.testing.assert_allclose(
            w, expected, rtol=tol.velocity_rel, atol=tol.velocity_rel * np.abs(expected).max(),
            err_msg="torque (angular part of body_f, world frame) did not spin the body at tau/I",
        )

    def test_pendulum_energy(self):
        """REVOLUTE joints: a pendulum released horizontally swings down, keeps its length and its energy.

        Energy is computed from body_q / body_qd; its error stays below
        ``pendulum_energy * m g L`` over 2 s.
        """
        self.require("rigid_bodies", joint_types=[JointType.REVOLUTE])
        tol = self.tolerances
        import warp as wp

        L, mass, inertia = 0.5, 1.0, 0.01
        pivot = np.array([0.0, 0.0, 2.0])
        b = self.builder()
        link = b.add_link(xform=_xform(pivot + [L, 0.0, 0.0]), mass=mass, inertia=_diag(inertia))
        j = b.add_joint_revolute(
            parent=-1, child=link, parent_xform=_xform(pivot), child_xform=_xform((-L, 0.0, 0.0)),
            axis=wp.vec3(0.0, 1.0, 0.0),
        )
        b.add_articulation([j])
        model = self.finalize(b)
        sim = self.sim(model)
        g = self.gravity(model)
        I_body = model.body_inertia.numpy().astype(np.float64)[0]
        m = float(model.body_mass.numpy()[0])

        def energy():
            q = sim.body_q()[0]
            qd = sim.body_qd()[0]
            com = sim.com()[0]
            R = quat_to_matrix(q[3:7])
            Iw = R @ I_body @ R.T
            w = qd[3:]
            return 0.5 * m * qd[:3] @ qd[:3] + 0.5 * w @ Iw @ w - m * g @ com, com

        E0, com0 = energy()
        energies, heights, lengths = [], [], []

        def record(s):
            E, com = energy()
            energies.append(E)
            heights.append(com[2])
            lengths.append(np.linalg.norm(com - pivot))

        sim.step(int(round(2.0 / self.dt)), record=record)
        scale = m * float(np.linalg.norm(g)) * L
        assert min(heights) <= pivot[2] - 0.9 * L, (
            f"the pendulum did not swing down (lowest COM height {min(heights):.3f}, pivot at {pivot[2]})"
        )
        dl = np.abs(np.array(lengths) - L).max()
        assert dl <= tol.pendulum_length * L, f"pendulum length changed by {dl:.3e} m (L = {L} m)"
        dE = np.abs(np.array(energies) - E0).max()
        assert dE <= tol.pendulum_energy * scale, (
            f"pendulum energy error {dE:.3e} J exceeds {tol.pendulum_energy:.0%} of m g L = {scale:.3f} J"
        )

    def test_resting_contact(self):
        """``rigid_contacts``: a dropped sphere and a box settle on the ground without sinking or jitter."""
        self.require("rigid_bodies", "rigid_contacts", joint_types=[JointType.FREE])
        tol = self.tolerances
        r = h = 0.1
        b = self.builder()
        self.add_sphere_body(b, (0.0, 0.0, r + 0.05), radius=r)
        self.add_box_body(b, (1.0, 0.0, h + 0.05), h=h)
        b.add_ground_plane()
        model = self.finalize(b)
        sim = self.sim(model)
        zs, speeds = [], []

        def record(s):
            zs.append(s.com()[:, 2])
            speeds.append(np.linalg.norm(s.body_qd()[:, :3], axis=1))

        steps = int(round(1.5 / self.dt))
        sim.step(steps, record=record)
        zs = np.array(zs)
        speeds = np.array(speeds)
        tail = slice(int(round(-0.3 / self.dt)), None)
        size = np.array([r, h])
        sink = (size - zs.min(axis=0)) / size
        for i, name in enumerate(("sphere", "box")):
            assert sink[i] <= tol.contact_penetration, (
                f"resting {name}: sank {sink[i] * size[i]:.4f} m into the ground "
                f"({sink[i]:.0%} of its size, bound {tol.contact_penetration:.0%})"
            )
            jitter = zs[tail, i].std()
            assert jitter <= tol.contact_jitter, f"resting {name}: height jitter {jitter:.2e} m over the last 0.3 s"
            vmax = speeds[tail, i].max()
            assert vmax <= tol.contact_speed, f"resting {name}: still moving at {vmax:.3f} m/s after {sim.time:.1f} s"
            assert zs[-1, i] <= size[i] + 0.01, f"resting {name}: did not come down to the ground (z={zs[-1, i]:.3f})"
        q_box = sim.body_q()[1, 3:7]
        assert abs(abs(q_box[3]) - 1.0) <= 1e-2, f"resting box tipped over: orientation {q_box}"

    def test_friction(self):
        """``friction``: a box sliding on the ground with mu = 0.5 decelerates at mu g (within friction_rel)."""
        self.require("rigid_bodies", "rigid_contacts", "friction", joint_types=[JointType.FREE])
        tol = self.tolerances
        mu, h, v0 = 0.5, 0.1, 2.0
        b = self.builder()
        cfg = self.shape_cfg(mu=mu)
        self.add_box_body(b, (0.0, 0.0, h), h=h, cfg=cfg)
        b.add_ground_plane(cfg=self.shape_cfg(mu=mu))
        model = self.finalize(b)
        sim = self.sim(model)
        qd = np.zeros((1, 6))
        qd[0, 0] = v0
        sim.set_body_qd(qd)
        x0 = sim.com()[0, 0]
        vx = []
        sim.step(int(round(1.0 / self.dt)), record=lambda s: vx.append(s.body_qd()[0, 0]))
        g = float(np.linalg.norm(self.gravity(model)))
        i1, i2 = int(round(0.1 / self.dt)) - 1, int(round(0.3 / self.dt)) - 1
        decel = (vx[i1] - vx[i2]) / (0.2)
        expected = mu * g
        assert abs(decel - expected) <= tol.friction_rel * expected, (
            f"sliding box: deceleration {decel:.3f} m/s^2, expected mu g = {expected:.3f} (+-{tol.friction_rel:.0%})"
        )
        assert abs(vx[-1]) <= 0.05, f"sliding box did not stop after 1 s (vx = {vx[-1]:.3f} m/s)"
        travel = sim.com()[0, 0] - x0
        expected_travel = v0 * v0 / (2.0 * expected)
        assert abs(travel - expected_travel) <= 2.0 * tol.friction_rel * expected_travel, (
            f"sliding box travelled {travel:.3f} m, expected v0^2 / (2 mu g) = {expected_travel:.3f} m"
        )

    def test_kinematic_body_follows_prescribed_motion(self):
        """``kinematic_bodies``: a kinematic body moves at its prescribed velocity, ignoring gravity and body_f."""
        self.require("rigid_bodies", "kinematic_bodies", joint_types=[JointType.FREE])
        import warp as wp

        b = self.builder()
        self.add_sphere_body(b, (0.0, 0.0, 1.0), is_kinematic=True)
        model = self.finalize(b)
        sim = self.sim(model)
        qd = np.array([[0.5, 0.0, 0.0, 0.0, 0.0, 1.0]])
        sim.set_body_qd(qd)
        q0 = sim.body_q()[0].copy()
        push = wp.array([np.array([10.0, 10.0, 10.0, 1.0, 1.0, 1.0], np.float32)], dtype=wp.spatial_vector,
                        device=model.device)
        apply = (lambda s: wp.copy(s.body_f, push)) if "body_forces" in self.capabilities().features else None
        steps = int(round(1.0 / self.dt))
        sim.step(steps, apply=apply)
        t = steps * self.dt
        np.testing.assert_allclose(sim.body_qd()[0], qd[0], atol=1e-5, err_msg="kinematic body velocity changed")
        if self.kinematic_motion == "hold":
            np.testing.assert_array_equal(sim.body_q()[0], q0, err_msg="kinematic body pose changed (kinematic_motion='hold')")
        else:
            np.testing.assert_allclose(sim.com()[0], [0.5 * t, 0.0, 1.0], atol=1e-3,
                                       err_msg="kinematic body did not follow its prescribed velocity")

    def test_kinematic_body_pushes_dynamic_body(self):
        """``kinematic_bodies`` + ``rigid_contacts``: a kinematic sphere at 1 m/s pushes a free one ahead of it."""
        self.require("rigid_bodies", "kinematic_bodies", "rigid_contacts", joint_types=[JointType.FREE])
        b = self.builder(gravity=(0.0, 0.0, 0.0))
        self.add_sphere_body(b, (0.0, 0.0, 1.0), is_kinematic=True)
        self.add_sphere_body(b, (0.3, 0.0, 1.0))
        model = self.finalize(b)
        sim = self.sim(model)
        qd = np.zeros((2, 6))
        qd[0, 0] = 1.0
        sim.set_body_qd(qd)
        steps = int(round(1.0 / self.dt))
        script = None
        if self.kinematic_motion == "hold":  # the script writes the pusher's pose x = v t every step
            import warp as wp

            pose = wp.zeros(1, dtype=wp.transform, device=model.device)

            def script(state):
                pose.assign([[sim.time + self.dt, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]])
                wp.copy(state.body_q, pose, count=1)

        sim.step(steps, apply=script)
        t = steps * self.dt
        com = sim.com()
        vel = sim.body_qd()
        assert abs(com[0, 0] - t) <= 1e-3 and abs(vel[0, 0] - 1.0) <= 1e-5, (
            f"the kinematic pusher was slowed down by contact (x = {com[0, 0]:.4f}, vx = {vel[0, 0]:.4f})"
        )
        assert com[1, 0] >= com[0, 0] + 0.15, (
            f"the dynamic sphere was not pushed ahead (x = {com[1, 0]:.3f}, pusher at {com[0, 0]:.3f})"
        )
        assert vel[1, 0] >= 0.9, f"the pushed sphere moves at {vel[1, 0]:.3f} m/s, slower than the pusher"

    def test_multiple_worlds_are_independent(self):
        """``multiple_worlds``: three replicated, overlapping worlds evolve exactly like a single one."""
        self.require("multiple_worlds")
        caps = self.capabilities()
        if not ({"rigid_bodies", "particles"} & caps.features):
            pytest.skip("the solver declares neither rigid_bodies nor particles")
        tol = self.tolerances
        runs = []
        for worlds in (1, 3):
            model, has_bodies = self._mixed_model(worlds=worlds)
            sim = self.sim(model)
            if has_bodies:
                qd = np.tile([[0.3, 0.0, 0.0, 0.0, 0.0, 1.0]], (model.body_count, 1))
                sim.set_body_qd(qd)
            sim.step(int(round(0.5 / self.dt)))
            runs.append((model, sim))
        (m1, s1), (m3, s3) = runs
        for name in ("body_q", "body_qd", "particle_q", "particle_qd"):
            arr = getattr(s3.state, name, None)
            if arr is None or not arr.shape[0]:
                continue
            world = getattr(m3, name.split("_")[0] + "_world").numpy()
            ref = getattr(s1.state, name).numpy()
            for w in range(3):
                got = arr.numpy()[world == w]
                assert got.shape == ref.shape
                err = np.abs(got - ref).max()
                assert err <= tol.worlds_abs, f"world {w}: {name} differs from the single-world run by {err:.2e}"

    def test_global_world_gravity(self):
        """``multiple_worlds``: each world's bodies and particles fall under their row of
        ``Model.gravity`` and those of the global world (-1) under the last row."""
        self.require("multiple_worlds")
        caps = self.capabilities()
        bodies = "rigid_bodies" in caps.features and JointType.FREE in caps.joint_types
        particles = "particles" in caps.features
        if not (bodies or particles):
            pytest.skip("the solver declares neither free rigid bodies nor particles")
        if not self.global_world_gravity:
            pytest.skip(f"{self.solver_class().__name__} declares global_world_gravity = False")
        template = self.builder()
        if bodies:
            self.add_sphere_body(template, (0.0, 0.0, 1.0))
        if particles:
            template.add_particle((0.5, 0.0, 1.0), (0.0, 0.0, 0.0), 1.0, 0.05)
        b = self.builder()
        b.replicate(template, 2, spacing=(2.0, 0.0, 0.0))
        if bodies:
            self.add_sphere_body(b, (5.0, 0.0, 1.0))
        if particles:
            b.add_particle((9.0, 0.0, 1.0), (0.0, 0.0, 0.0), 1.0, 0.05)
        model = self.finalize(b)
        rows = {0: (0.0, 0.0, -2.0), 1: (0.0, 0.0, -3.0), -1: (1.0, 0.0, -4.0)}
        for w, g in rows.items():
            model.set_gravity(g, world=w)
        sim = self.sim(model)
        steps = 10
        sim.step(steps)
        t = steps * self.dt
        atol = self.tolerances.velocity_rel * 4.0 + 1.0e-4
        if bodies:
            expected = [rows[int(w)] for w in model.body_world.numpy()]
            np.testing.assert_allclose(sim.body_qd()[:, :3] / t, expected, atol=atol,
                                       err_msg="body accelerations do not follow their world's gravity row")
        if particles:
            expected = [rows[int(w)] for w in model.particle_world.numpy()]
            np.testing.assert_allclose(sim.state.particle_qd.numpy() / t, expected, atol=atol,
                                       err_msg="particle accelerations do not follow their world's gravity row")

    # ============================================================ faults
    _fault_results: ClassVar[dict | None] = None

    @pytest.mark.parametrize("case", [c.name for c in FAULT_CASES])
    def test_fault(self, case):
        """Bad input raises a clear error before anything is written, NaN is stopped at the step it
        enters (debug mode), and nothing crashes the interpreter (see :mod:`armillary.testing.faults`:
        every case runs in a child process, all of a solver's cases in one child unless one dies)."""
        cls = type(self)
        if cls.__dict__.get("_fault_results") is None:
            cls._fault_results = run_fault_cases(self.solver_class(), dict(self.solver_kwargs))
        outcome = cls._fault_results[case]
        if outcome.startswith("skip:"):
            pytest.skip(outcome[5:].strip())
        assert outcome == "ok", f"fault case {case!r} with {self.solver_class().__name__}: {outcome}"

    def test_determinism(self):
        """``deterministic=True``: two runs of a contact scene from scratch are bit-identical."""
        caps = self.capabilities()
        if not caps.deterministic:
            pytest.skip(f"{self.solver_class().__name__} declares deterministic=False")
        results = []
        for _ in range(2):
            model, has_bodies = self._mixed_model()
            sim = self.sim(model)
            if has_bodies:
                sim.set_body_qd(np.tile([[0.3, 0.1, 0.0, 0.2, 0.0, 1.0]], (model.body_count, 1)))
            sim.step(300)
            results.append(_snapshot(sim.state))
        assert results[0] == results[1], "two identical runs gave different states"


"""Meta-tests of the conformance kit: it passes correct solvers and catches broken ones.

Each test writes a one-line conformance suite for a fake solver
(``fake_solvers.py``) into a pytester directory, runs it in-process and
checks the outcome of individual checks.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

FAKES = Path(__file__).with_name("fake_solvers.py").read_text()


def run_suite(pytester, solver_class: str, extra: str = "", graph_capturable: bool = False, select: str = "not test_fault"):
    """Run ``SolverConformance`` against ``fake_solvers.<solver_class>`` (the tests ``-k select``
    picks: the fault cases, which start child processes, only where a test asks for them); return
    {test name: outcome}."""
    pytester.makepyfile(fake_solvers=FAKES)
    pytester.makepyfile(
        test_suite=f"""
import armillary.testing
import fake_solvers

class TestSuite(armillary.testing.SolverConformance):
    solver = fake_solvers.{solver_class}
    graph_capturable = {graph_capturable}
{extra}
"""
    )
    pytester.syspathinsert()
    try:
        reprec = pytester.inline_run("-p", "no:cacheprovider", "-q", "-k", select)
    finally:
        sys.modules.pop("fake_solvers", None)
    outcomes = {}
    for rep in reprec.getreports("pytest_runtest_logreport"):
        name = rep.nodeid.split("::")[-1]
        if rep.when == "call" or (rep.when == "setup" and not rep.passed):
            outcomes[name] = rep.outcome
            if rep.outcome == "failed":
                outcomes[name + ":message"] = str(rep.longrepr)
            if rep.outcome == "skipped":
                outcomes[name + ":message"] = str(rep.longrepr)
    return outcomes


FEATURE_CHECKS = (
    "test_prismatic_joint_slides_under_gravity", "test_ball_joint_keeps_its_anchor",
    "test_fixed_joint_moves_with_its_parent", "test_d6_joint_locks_its_other_axes",
    "test_distance_joint_keeps_its_range", "test_rod_joints_hold_a_cantilever", "test_joint_forces",
    "test_joint_armature", "test_joint_damping", "test_joint_friction", "test_joint_velocity_limits",
    "test_joint_springs", "test_joint_drives", "test_joint_limits", "test_joint_limit_springs", "test_mimic_joints",
    "test_loop_joints", "test_restitution", "test_particle_contacts_with_shapes", "test_particle_particle_contacts",
    "test_springs", "test_cloth_hangs_without_tearing", "test_soft_body_keeps_its_volume",
)  # fmt: skip


def _fake_euler_capabilities():
    import importlib.util

    spec = importlib.util.spec_from_file_location("_fake_solvers_caps", Path(__file__).with_name("fake_solvers.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.FakeEuler.capabilities


def failures(outcomes):
    return sorted(k for k, v in outcomes.items() if v == "failed" and ":" not in k)


def test_correct_fake_solver_passes(pytester):
    out = run_suite(pytester, "FakeEuler")
    assert failures(out) == [], {k: out[k + ":message"] for k in failures(out)}
    for name in (
        "test_capabilities_are_well_formed",
        "test_step_leaves_state_in_untouched",
        "test_notify_model_changed_accepts_all_and_custom_flags",
        "test_reset_restores_initial_state",
        "test_reset_with_world_mask_resets_only_selected_worlds",
        "test_unsupported_joint_type_is_rejected",
        "test_free_fall",
        "test_particle_free_fall",
        "test_particle_force",
        "test_body_force_balances_gravity",
        "test_multiple_worlds_are_independent",
        "test_global_world_gravity",
        "test_determinism",
        "test_observables_contract",
        "test_observables_are_filled",
        "test_observable_body_qdd_of_a_falling_body",
    ):
        assert out.get(name) == "passed", (name, out.get(name), out.get(name + ":message"))
    # undeclared features are skipped, the reason naming the feature
    assert out["test_resting_contact"] == "skipped"
    assert "rigid_contacts" in out["test_resting_contact:message"]
    assert out["test_friction"] == "skipped"
    assert "friction" in out["test_friction:message"] or "rigid_contacts" in out["test_friction:message"]
    assert out["test_pendulum_energy"] == "skipped" and "REVOLUTE" in out["test_pendulum_energy:message"]
    assert out["test_step_does_not_synchronise_with_the_host"] == "skipped"
    _check_every_feature_has_a_check(out)


def _check_every_feature_has_a_check(out):
    """Against FakeEuler (few features declared) the skip reasons name every other feature and
    joint type: each has a check of its own, so "yes" in the feature table means tested."""
    from armillary.sim.enums import JointType
    from armillary.solvers import FEATURES

    caps = _fake_euler_capabilities()
    reasons = " ".join(v for k, v in out.items() if k.endswith(":message") and out[k[: -len(":message")]] == "skipped")
    for feature in sorted(set(FEATURES) - caps.features):
        assert f"'{feature}'" in reasons, f"no conformance check requires feature {feature!r}"
    for jt in JointType:
        if jt not in caps.joint_types:
            assert jt.name in reasons, f"no conformance check requires joint type {jt.name}"
    for name in FEATURE_CHECKS:
        assert out.get(name) == "skipped", (name, out.get(name), out.get(name + ":message"))


def test_fault_cases_pass_a_correct_solver(pytester):
    out = run_suite(pytester, "FakeEuler", select="test_fault")
    assert failures(out) == [], {k: out[k + ":message"] for k in failures(out)}
    for case in ("body_q_none", "body_q_short", "body_q_numpy", "dt_nan", "dt_string", "nan_body_q", "nan_body_f",
                 "body_q_reassigned_short_after_steps", "state_in_not_a_state", "dt_huge"):  # fmt: skip
        assert out.get(f"test_fault[{case}]") == "passed", (case, out.get(f"test_fault[{case}]:message"))
    # FakeEuler has free bodies only: the chain and contact cases are skipped, saying why
    assert out["test_fault[joint_q_none]"] == "skipped"
    assert "chain" in out["test_fault[joint_q_none]:message"]


def test_fault_cases_catch_a_silent_reset(pytester):
    out = run_suite(pytester, "FakeSilentReset", select="test_fault")
    for case in ("nan_body_q", "nan_body_qd", "inf_body_q"):
        assert out[f"test_fault[{case}]"] == "failed", case
        assert "silent reset" in out[f"test_fault[{case}]:message"]
    assert out["test_fault[body_q_none]"] == "passed"


def test_fault_cases_survive_a_crash_and_name_it(pytester):
    out = run_suite(pytester, "FakeCrashesOnHugeDt", select="test_fault")
    assert out["test_fault[dt_huge]"] == "failed"
    assert "the process died" in out["test_fault[dt_huge]:message"]
    # the cases after the crash still ran, in a new child process
    assert out["test_fault[nan_body_q]"] == "passed"
    assert out["test_fault[body_q_none]"] == "passed"


def test_kit_catches_a_declared_observable_left_unwritten(pytester):
    out = run_suite(pytester, "FakeStaleBodyQdd")
    assert out["test_observables_contract"] == "passed", out.get("test_observables_contract:message")
    assert out["test_observables_are_filled"] == "failed"
    assert "'body_qdd' was not (fully) written" in out["test_observables_are_filled:message"]
    assert out["test_observable_body_qdd_of_a_falling_body"] == "failed"
    assert out["test_free_fall"] == "passed"


def test_kit_requires_the_observables_keyword_of_step(pytester):
    out = run_suite(pytester, "FakeLegacyStep")
    assert out["test_observables_contract"] == "failed"
    assert "observables=None as a keyword-only parameter" in out["test_observables_contract:message"]
    assert out["test_observable_body_qdd_of_a_falling_body"] == "skipped"
    assert out["test_free_fall"] == "passed"


def test_kit_catches_a_solver_that_reads_arrays_back(pytester):
    """The NumPy fakes read device arrays back: with graph_capturable left True the check fails."""
    out = run_suite(pytester, "FakeEuler", graph_capturable=True)
    assert out["test_step_does_not_synchronise_with_the_host"] == "failed"
    assert "synchronised with the host" in out["test_step_does_not_synchronise_with_the_host:message"]


def test_kit_catches_a_solver_that_modifies_state_in(pytester):
    out = run_suite(pytester, "FakeMutatesStateIn")
    assert out["test_step_leaves_state_in_untouched"] == "failed"
    assert "body_q" in out["test_step_leaves_state_in_untouched:message"]
    assert out["test_free_fall"] == "passed"


def test_kit_catches_bodies_falling_through_the_ground(pytester):
    out = run_suite(pytester, "FakeFallsThroughGround")
    assert out["test_resting_contact"] == "failed"
    assert "sank" in out["test_resting_contact:message"]
    assert out["test_free_fall"] == "passed"


def test_kit_catches_wrong_free_fall(pytester):
    out = run_suite(pytester, "FakeWrongFreeFall")
    assert out["test_free_fall"] == "failed"
    assert out["test_particle_free_fall"] == "failed"
    assert out["test_body_force_balances_gravity"] == "failed"
    assert out["test_step_leaves_state_in_untouched"] == "passed"


def test_kit_catches_global_world_taking_world_zero_gravity(pytester):
    out = run_suite(pytester, "FakeGlobalWorldGravity")
    assert out["test_global_world_gravity"] == "failed"
    assert out["test_free_fall"] == "passed"
    assert out["test_multiple_worlds_are_independent"] == "passed"


def test_pendulum_check_runs_on_an_analytic_revolute_solver(pytester):
    out = run_suite(pytester, "FakePendulum")
    assert out["test_pendulum_energy"] == "passed", out.get("test_pendulum_energy:message")
    assert out["test_unsupported_joint_type_is_rejected"] == "passed"
    assert out["test_undeclared_features_are_rejected"] == "passed"
    assert failures(out) == [], {k: out[k + ":message"] for k in failures(out)}


def test_pendulum_check_catches_a_damped_pendulum(pytester):
    extra = """
class Damped(fake_solvers.FakePendulum):
    def _accel(self, theta):
        return super()._accel(theta) - 2.0 * self._omega

    def step(self, state_in, state_out, control, contacts, dt):
        self._omega = float(state_in.joint_qd.numpy()[0]) if self.active else 0.0
        super().step(state_in, state_out, control, contacts, dt)

TestSuite.solver = Damped
"""
    out = run_suite(pytester, "FakePendulum", extra=extra)
    assert out["test_pendulum_energy"] == "failed"
    assert "energy" in out["test_pendulum_energy:message"]


def test_solver_given_by_name_resolves_through_the_registry(pytester):
    pytester.makepyfile(fake_solvers=FAKES)
    pytester.makepyfile(
        test_by_name="""
import armillary
import armillary.testing
import fake_solvers
import pytest


class FakePlugin:
    @armillary.hookimpl
    def armillary_register_solvers(self, registry):
        registry.add("SolverFakeEuler", fake_solvers.FakeEuler, summary="numpy fake")


@pytest.fixture(autouse=True)
def _fake_plugin(armillary_registry):
    armillary_registry.register(FakePlugin(), name="fake")
    yield


def test_resolves(armillary_registry):
    assert armillary.solvers.SolverFakeEuler is fake_solvers.FakeEuler


class TestByName(armillary.testing.SolverConformance):
    solver = "SolverFakeEuler"
"""
    )
    pytester.syspathinsert()
    try:
        result = pytester.inline_run("-p", "no:cacheprovider", "-q", "-k", "resolves or free_fall or capabilities")
    finally:
        sys.modules.pop("fake_solvers", None)
    passed, skipped, failed = result.listoutcomes()
    assert not failed, [r.longrepr for r in failed]
    assert {r.nodeid.split("::")[-1] for r in passed} >= {"test_resolves", "test_free_fall", "test_particle_free_fall"}


def test_plugin_import_adds_nothing_heavy():
    """The pytest plugin (loaded in every pytest run) imports neither the kit nor Warp beyond ``import armillary``."""
    import subprocess

    code = (
        "import sys, armillary; before = set(sys.modules); "
        "import armillary.testing.pytest_plugin, armillary.testing; "
        "new = set(sys.modules) - before; "
        "heavy = sorted(m for m in new "
        "if m.split('.')[0] in ('warp', 'numpy') or m == 'armillary.testing.conformance'); "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_feature_checks_fail_a_solver_that_only_claims_features(pytester):
    """A solver declaring every feature and joint type but integrating only free bodies and
    particles fails every feature check (14 passed, 5 skipped before these checks existed)."""
    out = run_suite(pytester, "FakeClaimsEverything", select=" or ".join((*FEATURE_CHECKS, "test_free_fall")))
    for name in FEATURE_CHECKS:
        assert out.get(name) == "failed", (name, out.get(name), out.get(name + ":message"))
        assert "AssertionError" in out[name + ":message"], (name, out[name + ":message"][-2000:])
    assert out["test_free_fall"] == "passed"
    assert "anchor" in out["test_ball_joint_keeps_its_anchor:message"]
    assert "period" in out["test_springs:message"] or "no oscillation" in out["test_springs:message"]


def test_feature_solver_kwargs_apply_only_to_checks_of_their_feature():
    """``feature_solver_kwargs`` are merged over ``solver_kwargs`` when a check requires the feature."""
    import armillary
    from armillary.solvers import Coordinates, SolverBase, SolverCapabilities
    from armillary.testing import SolverConformance

    class Recorder(SolverBase):
        capabilities = SolverCapabilities(coordinates=Coordinates.MAXIMAL, joint_types={"FREE"},
                                          features={"rigid_bodies", "rigid_contacts", "restitution"})  # fmt: skip

        def __init__(self, model, **kwargs):
            super().__init__(model)
            self.kwargs = kwargs

        def step(self, state_in, state_out, control, contacts, dt, *, observables=None):
            pass

    class Suite(SolverConformance):
        solver = Recorder
        solver_kwargs = {"iterations": 4}
        feature_solver_kwargs = {"restitution": {"enable_restitution": True, "iterations": 8}}

    b = armillary.ModelBuilder()
    b.add_body(mass=1.0)
    model = b.finalize(device="cpu")
    plain = Suite()
    plain.require("rigid_bodies")
    assert plain.make_solver(model).kwargs == {"iterations": 4}
    bouncy = Suite()
    bouncy.require("rigid_bodies", "rigid_contacts", "restitution")
    assert bouncy.make_solver(model).kwargs == {"iterations": 8, "enable_restitution": True}

    class Typo(Suite):
        feature_solver_kwargs = {"restitutoin": {"enable_restitution": True}}

    with pytest.raises(ValueError, match="restitutoin"):
        Typo().require("rigid_bodies")

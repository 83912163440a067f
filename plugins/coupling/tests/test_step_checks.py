"""The step checks in coupled solvers (issue 21): input checks before a coupled step writes
anything, one non-finite guard per coupled step (the entries' own guards off), errors naming the
entry, debug mode, and recorded launches following reassigned arrays."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
import warp as wp

import armillary as newton
from armillary.solvers.step_guard import NonFiniteStateError
from armillary.testing.faults import FAULT_CASES, run_fault_cases
from armillary_coupling.solver_coupled import SolverCoupled
from armillary_coupling.solver_coupled_admm import SolverCoupledADMM
from armillary_coupling.solver_coupled_proxy import SolverCoupledProxy

pytestmark = pytest.mark.filterwarnings("ignore:SolverFeatherstone ignores joint_enabled")

DT = 1.0e-2
NAN = float("nan")
KINDS = ("base", "admm", "proxy")


def _exploding(base):
    """``base`` whose step writes NaN into ``state_out.body_q[explode_body]`` once
    ``step_count`` reaches ``explode_after`` (a sub-solver that blows up inside a coupled step)."""

    class Exploding(base):
        explode_body = None
        explode_after = 0

        def step(self, state_in, state_out, control, contacts, dt, **kwargs):
            super().step(state_in, state_out, control, contacts, dt, **kwargs)
            if self.explode_body is not None and self.step_count >= self.explode_after:
                q = state_out.body_q.numpy()
                q[self.explode_body, 2] = NAN
                state_out.body_q.assign(q)

    Exploding.__name__ = Exploding.__qualname__ = f"Exploding{base.__name__}"
    return Exploding


def _fs(v):
    return newton.solvers.SolverFeatherstone(v)


def _xpbd(v):
    return _exploding(newton.solvers.SolverXPBD)(v, iterations=4)


def _boxes(*, ground: bool = False, particles: bool = False, link: bool = False):
    """Box 'a' (free, or hinged to the world with ``link``) and free box 'c'; optional particles
    and ground."""
    b = newton.ModelBuilder()
    zero = newton.ModelBuilder.ShapeConfig(density=0.0)
    if link:
        a = b.add_link(mass=1.0, inertia=wp.mat33(np.eye(3) * 0.01), label="a")
        b.add_articulation([b.add_joint_revolute(-1, a, axis=(0.0, 1.0, 0.0), label="hinge",
                                                 parent_xform=wp.transform((0.0, 0.0, 0.5), wp.quat_identity()),
                                                 child_xform=wp.transform((-0.2, 0.0, 0.0), wp.quat_identity()))])
    else:
        a = b.add_body(xform=wp.transform((0.0, 0.0, 0.5), wp.quat_identity()), mass=1.0,
                       inertia=wp.mat33(np.eye(3) * 0.01), label="a")  # fmt: skip
    b.add_shape_box(a, hx=0.1, hy=0.1, hz=0.1, cfg=zero)
    c = b.add_body(xform=wp.transform((1.0, 0.0, 0.5), wp.quat_identity()), mass=2.0,
                   inertia=wp.mat33(np.eye(3) * 0.02), label="c")  # fmt: skip
    b.add_shape_box(c, hx=0.1, hy=0.1, hz=0.1, cfg=zero)
    if particles:
        b.add_particle((2.0, 0.0, 1.0), (0.0, 0.0, 0.0), 0.5, radius=0.05)
        b.add_particle((2.5, 0.0, 1.0), (0.1, 0.0, 0.0), 0.5, radius=0.05)
    if ground:
        b.add_ground_plane()
    return b.finalize()


def _coupled(kind: str, *, substeps: int = 1):
    """``(model, solver)``: entry 0 'rigid' (Featherstone) owns body 0, entry 1 'soft' (XPBD,
    :func:`_exploding`) owns body 1 (and the particles in the base scene)."""
    E = SolverCoupled.Entry
    if kind == "base":
        model = _boxes(particles=True, link=True)
        return model, SolverCoupled(model, [E("rigid", _fs, bodies=[0]),
                                            E("soft", _xpbd, bodies=[1], particles=[0, 1], substeps=substeps)])
    if kind == "admm":
        model = _boxes(link=True)
        return model, SolverCoupledADMM(model, [E("rigid", _fs, bodies=[0]), E("soft", _xpbd, bodies=[1])],
                                        SolverCoupledADMM.Config(iterations=2))  # fmt: skip
    model = _boxes(ground=True)
    P = SolverCoupledProxy.Proxy
    return model, SolverCoupledProxy(model, [E("rigid", _fs, bodies=[0]), E("soft", _xpbd, bodies=[1])],
                                     SolverCoupledProxy.Config(proxies=[P("rigid", "soft", bodies=[0])]))


def _run(model, solver, steps, states=None, control=None):
    s0, s1 = states or (model.state(), model.state())
    control = control or model.control()
    for _ in range(steps):
        solver.step(s0, s1, control, model.collide(s0) if model.shape_count > 2 else None, DT)
        s0, s1 = s1, s0
    return s0, s1, control


def _snapshot(state):
    return {k: v.numpy().copy() for k, v in vars(state).items() if isinstance(v, wp.array)}


# ------------------------------------------------------------------ guards and debug switches
def test_entry_guards_are_off_and_debug_switches_them_on():
    _, solver = _coupled("base")
    subs = [solver.solver(n) for n in solver.entry_names()]
    assert solver.finite_guard and not solver.debug
    assert all(not s.finite_guard and not s.debug for s in subs)  # the coupled guard covers their rows
    solver.debug = True
    assert all(s.finite_guard and s.debug for s in subs)
    solver.debug = False
    assert all(not s.finite_guard and not s.debug for s in subs)


def test_debug_from_the_environment_reaches_the_entries(monkeypatch):
    monkeypatch.setenv("ARMILLARY_DEBUG", "1")
    _, solver = _coupled("base")
    assert solver.debug and all(solver.solver(n).debug and solver.solver(n).finite_guard
                                for n in solver.entry_names())  # fmt: skip


# ------------------------------------------------------------------ bad input
BAD_INPUT = {
    "body_q_short": ("body_q", lambda m, s, c: setattr(s, "body_q", wp.zeros(m.body_count - 1, dtype=wp.transform))),
    "joint_qd_numpy": ("joint_qd", lambda m, s, c: setattr(s, "joint_qd", s.joint_qd.numpy())),
    "body_f_none": ("body_f", lambda m, s, c: setattr(s, "body_f", None)),
    "joint_f_short": ("joint_f", lambda m, s, c: setattr(c, "joint_f", wp.zeros(0, dtype=float))),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_bad_input_raises_before_anything_is_written(kind, case):
    model, solver = _coupled(kind)
    s0, s1, control = _run(model, solver, 2)
    entry_inputs = {n: _snapshot(solver.entry_state(n, "input")) for n in solver.entry_names()}
    before = _snapshot(s1)
    mention, corrupt = BAD_INPUT[case]
    corrupt(model, s0, control)
    with pytest.raises((ValueError, TypeError), match=mention) as info:
        solver.step(s0, s1, control, None, DT)
    assert type(solver).__name__ in str(info.value)
    for k, v in _snapshot(s1).items():
        np.testing.assert_array_equal(v, before[k], err_msg=f"state_out.{k} written before the error")
    for n in solver.entry_names():  # not even distributed to the entries
        for k, v in _snapshot(solver.entry_state(n, "input")).items():
            np.testing.assert_array_equal(v, entry_inputs[n][k], err_msg=f"entry {n!r} {k}")
    assert solver.step_count == 2


@pytest.mark.parametrize("dt", [0.0, -DT, NAN, "0.01"])
def test_bad_dt_raises(dt):
    model, solver = _coupled("base")
    with pytest.raises((ValueError, TypeError), match="SolverCoupled.step: dt"):
        solver.step(model.state(), model.state(), None, None, dt)


def test_an_entry_solvers_input_error_names_the_entry():
    model, solver = _coupled("base", substeps=2)
    s0, s1, control = _run(model, solver, 1)
    solver.entry("soft").state_1.body_qd = wp.zeros(1, dtype=wp.spatial_vector)  # an entry-local buffer broken
    with pytest.raises(ValueError, match="body_qd") as info:
        solver.step(s0, s1, control, None, DT)
    msg = str(info.value)
    assert "SolverCoupled: entry 1 'soft' (ExplodingSolverXPBD), coupled step 2, substep 1 of 2" in msg, msg
    assert "ExplodingSolverXPBD.step: state_out.body_qd has shape (1,)" in msg, msg


# ------------------------------------------------------------------ NaN: debug mode and check_finite
@pytest.mark.parametrize("kind", KINDS)
def test_debug_raises_at_the_substep_that_blows_up_naming_the_entry(kind):
    model, solver = _coupled(kind)
    s0, s1, control = _run(model, solver, 3)
    solver.debug = True
    s0, s1, control = _run(model, solver, 2, (s0, s1), control)  # clean steps pass in debug mode
    soft = solver.solver("soft")
    soft.explode_body, soft.explode_after = 1, soft.step_count  # its next step
    with pytest.raises(NonFiniteStateError) as info:
        _run(model, solver, 1, (s0, s1), control)
    err = info.value
    msg = str(err)
    assert (err.entry_index, err.entry_name, err.entry_solver) == (1, "soft", "ExplodingSolverXPBD")
    assert (err.kind, err.index, err.step, err.solver) == ("body", 1, 6, type(solver).__name__)
    assert f"{type(solver).__name__}: entry 1 'soft' (ExplodingSolverXPBD), coupled step 6" in msg, msg
    assert "body 1 ('c')" in msg, msg
    assert {"admm": "ADMM iteration 1 of 2", "proxy": "proxy pass 1 of 1 ('rigid' -> 'soft')"}.get(kind, "") in msg
    assert solver.step_count == 5  # the failing step was not counted


@pytest.mark.parametrize("kind", KINDS)
def test_check_finite_after_a_nan_step_names_step_body_and_owner(kind):
    model, solver = _coupled(kind)
    s0, s1, control = _run(model, solver, 3)
    solver.check_finite(s0)  # clean
    soft = solver.solver("soft")
    soft.explode_body, soft.explode_after = 1, soft.step_count  # its next step
    s0, s1, control = _run(model, solver, 1, (s0, s1), control)  # no host sync, no error
    with pytest.raises(NonFiniteStateError) as info:
        solver.check_finite(s0)
    err = info.value
    msg = str(err)
    assert (err.kind, err.index, err.step) == ("body", 1, 4)
    assert (err.entry_index, err.entry_name, err.entry_solver) == (1, "soft", "ExplodingSolverXPBD")
    assert f"{type(solver).__name__}: non-finite state (detected after step 4): first body 1 ('c')" in msg, msg
    assert "body 1 is owned by entry 1 'soft' (ExplodingSolverXPBD)" in msg, msg
    solver.check_finite(s0)  # the flags were reset


def test_check_finite_names_the_owner_of_a_particle_and_of_a_joint_dof():
    model, solver = _coupled("base")
    s0, s1, control = _run(model, solver, 2)
    q = s0.particle_qd.numpy()
    q[1, 0] = NAN
    s0.particle_qd.assign(q)
    out, _, _ = _run(model, solver, 1, (s0, s1), control)
    with pytest.raises(NonFiniteStateError, match=r"first particle 1: particle_q=.*; particle 1 is owned by entry 1 "
                                                  r"'soft'") as info:  # fmt: skip
        solver.check_finite(out)
    assert (info.value.kind, info.value.entry_name) == ("particle", "soft")

    model, solver = _coupled("base")
    s0, s1, control = _run(model, solver, 2)
    f = control.joint_f.numpy()
    f[0] = np.inf
    control.joint_f.assign(f)
    _run(model, solver, 1, (s0, s1), control)
    with pytest.raises(NonFiniteStateError) as info:
        solver.check_finite()
    err = info.value
    assert (err.entry_index, err.entry_name, err.entry_solver) == (0, "rigid", "SolverFeatherstone")
    assert "is owned by entry 0 'rigid' (SolverFeatherstone)" in str(err), str(err)


@pytest.mark.parametrize("kind", KINDS)
def test_debug_reports_nan_input_with_its_owner_before_the_entries_run(kind):
    model, solver = _coupled(kind)
    s0, s1, control = _run(model, solver, 2)
    solver.debug = True
    q = s0.body_qd.numpy()
    q[1, 4] = NAN  # body 1 belongs to entry 1, but entry 0 (stepped first) carries a kinematic copy
    s0.body_qd.assign(q)
    outputs = {n: _snapshot(solver.entry_state(n, "output")) for n in solver.entry_names()}
    with pytest.raises(NonFiniteStateError) as info:
        solver.step(s0, s1, control, None, DT)
    err = info.value
    msg = str(err)
    assert (err.kind, err.index, err.entry_name) == ("body", 1, "soft")
    assert f"{type(solver).__name__}: coupled step 3: non-finite input: first state_in body 1 ('c')" in msg, msg
    assert "body 1 is owned by entry 1 'soft' (ExplodingSolverXPBD)" in msg, msg
    for n in solver.entry_names():  # no entry ran
        for k, v in _snapshot(solver.entry_state(n, "output")).items():
            np.testing.assert_array_equal(v, outputs[n][k], err_msg=f"entry {n!r} {k}")


def test_nan_in_a_row_no_entry_owns_says_so():
    model = _boxes()
    with pytest.warns(UserWarning, match="belong to no entry"):
        solver = SolverCoupled(model, [SolverCoupled.Entry("rigid", _fs, bodies=[0])])
    s0, s1, control = _run(model, solver, 1)
    q = s0.body_q.numpy()
    q[1, 0] = NAN
    s0.body_q.assign(q)
    _run(model, solver, 1, (s0, s1), control)
    with pytest.raises(NonFiniteStateError, match="body 1 is owned by no entry") as info:
        solver.check_finite()
    assert info.value.entry_name is None and info.value.entry_index is None


def test_check_finite_reads_the_flags_of_entries_with_fused_guards():
    """An entry solver whose kernels write its own flags (``fuses_finite_guard``) reports NaN in
    rows the coupled output does not hold (here: the proxy of box 'a' in the destination)."""

    class FusedXPBD(newton.solvers.SolverXPBD):
        fuses_finite_guard = True
        report = None  # a body index its "kernels" flag on the next step

        def step(self, state_in, state_out, control, contacts, dt, **kwargs):
            super().step(state_in, state_out, control, contacts, dt, **kwargs)
            if self.report is not None:
                flags = self.nonfinite_flags.numpy()
                flags[0] = min(int(flags[0]), self.report)
                self.nonfinite_flags.assign(flags)

    model = _boxes(ground=True)
    E, P = SolverCoupled.Entry, SolverCoupledProxy.Proxy
    solver = SolverCoupledProxy(model, [E("rigid", _fs, bodies=[0]), E("soft", lambda v: FusedXPBD(v), bodies=[1])],
                                SolverCoupledProxy.Config(proxies=[P("rigid", "soft", bodies=[0])]))  # fmt: skip
    s0, s1, control = _run(model, solver, 2)
    solver.check_finite(s0)
    solver.solver("soft").report = 0
    _run(model, solver, 1, (s0, s1), control)
    with pytest.raises(NonFiniteStateError) as info:
        solver.check_finite(s0)
    err = info.value
    msg = str(err)
    assert (err.entry_index, err.entry_name, err.kind, err.index, err.step) == (1, "soft", "body", 0, 3)
    assert "SolverCoupledProxy: entry 1 'soft' (FusedXPBD), detected after coupled step 3 in rows the coupled " \
           "output does not hold: FusedXPBD: non-finite state (detected after step 3): first body 0 ('a')" in msg, msg
    solver.solver("soft").report = None
    solver.check_finite(s0)  # the entry's flags were reset too


# ------------------------------------------------------------------ recorded launches and reassigned arrays
@pytest.mark.parametrize("kind", KINDS)
def test_reassigned_arrays_are_used_by_the_next_coupled_step(kind):
    """Replacing ``state.body_q`` (etc.) between coupled steps acts exactly like writing the same
    values into the old arrays: no recorded launch replays the array the state no longer holds."""
    runs = []
    for how in ("assign", "reassign", "none"):
        model, solver = _coupled(kind)
        s0, s1, control = _run(model, solver, 3)
        if how != "none":
            for obj, name, shift in ((s0, "body_q", 0.05), (s0, "body_qd", 0.3), (s0, "body_f", 2.0),
                                     (control, "joint_f", 0.5)):  # fmt: skip
                old = getattr(obj, name)
                values = old.numpy() + np.float32(shift)
                if name == "body_q":
                    values[:, 3:] = old.numpy()[:, 3:]  # keep the rotations unit quaternions
                if how == "assign":
                    old.assign(values)
                else:
                    setattr(obj, name, wp.array(values, dtype=old.dtype, device=old.device))
        s0, s1, _ = _run(model, solver, 3, (s0, s1), control)
        runs.append((s0.body_q.numpy(), s0.body_qd.numpy()))
        solver.check_finite(s0)
    (q_a, qd_a), (q_r, qd_r), (q_n, _) = runs
    np.testing.assert_array_equal(q_r, q_a)
    np.testing.assert_array_equal(qd_r, qd_a)
    assert np.abs(q_r - q_n).max() > 1e-3  # the new values mattered


# ------------------------------------------------------------------ the conformance kit's fault cases
_FAULT_RESULTS: dict = {}


@pytest.mark.parametrize("case", [c.name for c in FAULT_CASES])
@pytest.mark.parametrize("coupler", ["FaultCoupled", "FaultADMM", "FaultProxy"])
def test_fault(coupler, case):
    """The conformance kit's fault cases (``armillary.testing.faults``) against coupled
    configurations of its scene (``_fault_coupled``: boxes in XPBD, the chain in Featherstone; an
    ADMM-coupled hinge; a proxied box): bad input raises before anything is written, NaN stops the
    step in debug mode, nothing crashes. All cases of a coupler run in one child process."""
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:  # the child process imports the adapters from here too
        sys.path.insert(0, here)
    import _fault_coupled

    if coupler not in _FAULT_RESULTS:
        _FAULT_RESULTS[coupler] = run_fault_cases(getattr(_fault_coupled, coupler))
    outcome = _FAULT_RESULTS[coupler][case]
    if outcome.startswith("skip:") and case.startswith(("particle_", "out_particle_", "nan_particle_")):
        pytest.skip(outcome[len("skip:"):].strip())  # the coupled scenes have bodies only
    assert outcome == "ok", f"fault case {case!r} with {coupler}: {outcome}"

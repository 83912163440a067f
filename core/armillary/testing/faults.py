"""The fault harness of the conformance kit: bad input must raise, never crash or spread NaN.

Each case corrupts one input of ``solver.step`` (a missing, short, long, mistyped or foreign
array; a bad ``dt``; NaN in a coordinate or a force; a ``Contacts`` of another model; an array
reassigned after the checks passed once) in a small scene: four boxes on a ground plane with a
collision pipeline (when the solver declares ``rigid_contacts``) and a three-link revolute chain
(when it declares ``REVOLUTE``). The expected outcome of each case:

* ``"raises"``: ``step`` raises ``ValueError`` / ``TypeError`` naming the culprit (the case's
  ``mention``), and ``state_out`` is unchanged (nothing was written before the check).
* ``"guarded"``: NaN entering the step is reported at that step: with ``solver.debug = True`` the
  step raises :class:`~armillary.solvers.step_guard.NonFiniteStateError`, or else its output is
  finite and every body other than the poisoned one moves as in a clean run (NaN neither spreads
  silently nor is replaced by a silent reset).
* ``"survives"``: the step may raise one of the above or return; the process must not die.

Cases run in a child process (``python -m armillary.testing.faults``); if the child dies, the case
it was running is recorded as a crash (with its exit status) and a new child runs the remaining
ones, so one crash fails one test, not the suite.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

__all__ = ["FAULT_CASES", "FaultCase", "run_fault_cases"]


@dataclasses.dataclass(frozen=True)
class FaultCase:
    """One corruption: ``name``, what the step must do (``expect``), the text the error must
    mention, and what the scene needs (``"bodies"``, ``"chain"``, ``"contacts"``, ``"particles"``, or
    ``"any"``: bodies or particles)."""

    name: str
    expect: str
    mention: str = ""
    needs: tuple[str, ...] = ()


_A, _B, _C, _K, _P = ("any",), ("bodies",), ("chain",), ("bodies", "contacts"), ("particles",)
FAULT_CASES: tuple[FaultCase, ...] = (
    FaultCase("state_in_none", "raises", "state_in", _A),
    FaultCase("state_out_none", "raises", "state_out", _A),
    FaultCase("state_in_not_a_state", "raises", "state_in", _A),
    FaultCase("body_q_none", "raises", "body_q", _B),
    FaultCase("body_qd_none", "raises", "body_qd", _B),
    FaultCase("body_f_none", "raises", "body_f", _B),
    FaultCase("joint_q_none", "raises", "joint_q", _C),
    FaultCase("joint_qd_none", "raises", "joint_qd", _C),
    FaultCase("out_body_q_none", "raises", "body_q", _B),
    FaultCase("body_q_short", "raises", "body_q", _B),
    FaultCase("body_q_long", "raises", "body_q", _B),
    FaultCase("out_body_q_short", "raises", "body_q", _B),
    FaultCase("body_qd_short", "raises", "body_qd", _B),
    FaultCase("joint_q_short", "raises", "joint_q", _C),
    FaultCase("joint_qd_long", "raises", "joint_qd", _C),
    FaultCase("body_q_wrong_dtype", "raises", "body_q", _B),
    FaultCase("body_q_numpy", "raises", "body_q", _B),
    FaultCase("joint_q_numpy", "raises", "joint_q", _C),
    FaultCase("joint_q_2d", "raises", "joint_q", _C),
    FaultCase("control_not_a_control", "raises", "control", _A),
    FaultCase("joint_f_none", "raises", "joint_f", _C),
    FaultCase("joint_f_short", "raises", "joint_f", _C),
    FaultCase("joint_target_q_short", "raises", "joint_target_q", _C),
    FaultCase("joint_f_numpy", "raises", "joint_f", _C),
    FaultCase("contacts_of_another_model", "raises", "contacts", _K),
    FaultCase("contacts_array_short", "raises", "rigid_contact_normal", _K),
    FaultCase("contacts_not_contacts", "raises", "contacts", _K),
    FaultCase("body_q_reassigned_short_after_steps", "raises", "body_q", _B),
    FaultCase("joint_qd_reassigned_numpy_after_steps", "raises", "joint_qd", _C),
    FaultCase("dt_zero", "raises", "dt", _A),
    FaultCase("dt_negative", "raises", "dt", _A),
    FaultCase("dt_nan", "raises", "dt", _A),
    FaultCase("dt_inf", "raises", "dt", _A),
    FaultCase("dt_string", "raises", "dt", _A),
    FaultCase("dt_huge", "survives", "", _A),
    FaultCase("particle_q_none", "raises", "particle_q", _P),
    FaultCase("particle_qd_none", "raises", "particle_qd", _P),
    FaultCase("out_particle_q_none", "raises", "particle_q", _P),
    FaultCase("particle_q_short", "raises", "particle_q", _P),
    FaultCase("particle_qd_long", "raises", "particle_qd", _P),
    FaultCase("out_particle_qd_short", "raises", "particle_qd", _P),
    FaultCase("particle_q_wrong_dtype", "raises", "particle_q", _P),
    FaultCase("particle_qd_numpy", "raises", "particle_qd", _P),
    FaultCase("nan_particle_q", "guarded", "", _P),
    FaultCase("nan_particle_qd", "guarded", "", _P),
    FaultCase("nan_body_q", "guarded", "", _B),
    FaultCase("nan_body_qd", "guarded", "", _B),
    FaultCase("nan_body_f", "guarded", "", _B),
    FaultCase("nan_joint_q", "guarded", "", _C),
    FaultCase("nan_joint_qd", "guarded", "", _C),
    FaultCase("nan_joint_f", "guarded", "", _C),
    FaultCase("inf_body_q", "guarded", "", _B),
)
CASES_BY_NAME = {c.name: c for c in FAULT_CASES}


# ------------------------------------------------------------------------------ the child
def _scene(solver_cls, kwargs, extra_boxes: int = 0):
    """``(model, solver, pipeline)`` of the fault scene for ``solver_cls``."""
    import warp as wp

    import armillary
    from armillary.sim.enums import JointType

    caps = solver_cls.capabilities
    b = armillary.ModelBuilder()
    inertia = wp.mat33(0.1 * 0.2**2 / 6.0, 0.0, 0.0, 0.0, 0.1 * 0.2**2 / 6.0, 0.0, 0.0, 0.0, 0.1 * 0.2**2 / 6.0)
    if "rigid_bodies" in caps.features and JointType.FREE in caps.joint_types:
        for i in range(4 + extra_boxes):
            body = b.add_body(xform=wp.transform((0.3 * (i % 2), 0.3 * (i // 2), 0.1), wp.quat_identity()),
                              mass=0.1, inertia=inertia, label=f"box_{i}")  # fmt: skip
            b.add_shape_box(body, hx=0.1, hy=0.1, hz=0.1)
    if JointType.REVOLUTE in caps.joint_types and "rigid_bodies" in caps.features:
        parent, joints = -1, []
        for i in range(3):
            link = b.add_link(mass=0.1, com=(0.05, 0.0, 0.0), inertia=inertia, label=f"link_{i}")
            joints.append(b.add_joint_revolute(parent, link, axis=(0.0, 1.0, 0.0), label=f"hinge_{i}",
                                               parent_xform=wp.transform((0.1 if i else 2.0, 0.0, 1.0),
                                                                         wp.quat_identity())))  # fmt: skip
            parent = link
        b.add_articulation(joints)
    if "particles" in caps.features:
        for i in range(4):
            b.add_particle((0.3 * (i % 2) - 1.0, 0.3 * (i // 2), 0.5), (0.0, 0.0, 0.0), mass=0.01, radius=0.02)
    uses_contacts = "rigid_contacts" in caps.features and caps.collision_pipeline
    if uses_contacts:
        b.add_ground_plane()
    b.color()  # block-descent solvers (SolverVBD) need the colouring; it costs the others nothing
    model = b.finalize(device="cpu")
    solver = solver_cls(model, **kwargs)
    if getattr(solver, "use_mujoco_contacts", False):
        uses_contacts = False
    pipeline = armillary.CollisionPipeline(model) if uses_contacts else None
    return model, solver, pipeline


def _snapshot(state) -> dict:
    import warp as wp

    return {k: v.numpy().copy() for k, v in vars(state).items() if isinstance(v, wp.array)}


def _run_case(case: FaultCase, solver_cls, kwargs) -> str:
    """Run one case in this process; ``"ok"`` or the reason it failed."""
    import numpy as np
    import warp as wp

    from armillary.solvers.step_guard import NonFiniteStateError

    model, solver, pipeline = _scene(solver_cls, kwargs)
    nb = model.body_count
    npart = model.particle_count
    has = {"bodies": nb > 0, "chain": "hinge_2" in (model.joint_label or ()), "contacts": pipeline is not None,
           "particles": npart > 0, "any": nb + npart > 0}  # fmt: skip
    missing = [n for n in case.needs if not has[n]]
    if missing:
        return f"skip: the scene has no {', '.join(missing)} for this solver"
    s0, s1, control = model.state(), model.state(), model.control()
    contacts = pipeline.contacts() if pipeline is not None else None
    dt = 1.0e-3

    def step(a, b, c=control, k=contacts, h=dt):
        if pipeline is not None and k is contacts:
            pipeline.collide(a, contacts)
        solver.step(a, b, c, k, h)

    # every body moving (a silent reset to rest shows), then a few clean steps (kernels compiled,
    # checks passed once)
    if model.joint_dof_count:
        import armillary

        s0.joint_qd.assign(np.full(model.joint_dof_count, 0.3, dtype=np.float32))
        armillary.eval_fk(model, s0.joint_q, s0.joint_qd, s0)
    for _ in range(3):
        step(s0, s1)
        s0, s1 = s1, s0
    chain_joint = model.joint_count - 1  # the last hinge: its coordinate / DOF is the last one
    qi, di = int(model.joint_q_start.numpy()[chain_joint]), int(model.joint_qd_start.numpy()[chain_joint])
    name = case.name
    args = {"a": s0, "b": s1, "c": control, "k": contacts, "h": dt}

    if case.expect in ("raises", "survives"):
        target = s1 if name.startswith("out_") else s0
        field = name.split("_none")[0].split("_short")[0].split("_long")[0].split("_wrong")[0].split("_numpy")[0]
        field = field.replace("out_", "").split("_2d")[0].split("_reassigned")[0]
        if name == "state_in_none":
            args["a"] = None
        elif name == "state_out_none":
            args["b"] = None
        elif name == "state_in_not_a_state":
            args["a"] = {"body_q": s0.body_q}
        elif name.endswith("_none") and field in ("body_q", "body_qd", "body_f", "joint_q", "joint_qd", "particle_q",
                                                  "particle_qd"):  # fmt: skip
            setattr(target, field, None)
        elif name.endswith(("_short", "_long")) and field in ("body_q", "body_qd", "joint_q", "joint_qd", "particle_q",
                                                              "particle_qd"):  # fmt: skip
            arr = getattr(target, field)
            n = len(arr) + (1 if name.endswith("_long") else -1)
            setattr(target, field, wp.zeros(n, dtype=arr.dtype, device=arr.device))
        elif name == "body_q_wrong_dtype":
            s0.body_q = wp.zeros(nb, dtype=wp.vec3, device=model.device)
        elif name == "particle_q_wrong_dtype":
            s0.particle_q = wp.zeros(npart, dtype=wp.vec4, device=model.device)
        elif name == "particle_qd_numpy":
            s0.particle_qd = s0.particle_qd.numpy()
        elif name == "body_q_numpy":
            s0.body_q = s0.body_q.numpy()
        elif name == "joint_q_numpy":
            s0.joint_q = s0.joint_q.numpy()
        elif name == "joint_q_2d":
            s0.joint_q = wp.zeros((len(s0.joint_q), 1), dtype=wp.float32, device=model.device)
        elif name == "control_not_a_control":
            args["c"] = {"joint_f": control.joint_f}
        elif name == "joint_f_none":
            control.joint_f = None
        elif name == "joint_f_short":
            control.joint_f = wp.zeros(len(control.joint_f) - 1, dtype=wp.float32, device=model.device)
        elif name == "joint_target_q_short":
            control.joint_target_q = wp.zeros(len(control.joint_target_q) - 1, dtype=wp.float32, device=model.device)
        elif name == "joint_f_numpy":
            control.joint_f = control.joint_f.numpy()
        elif name == "contacts_of_another_model":
            other_model, _, other_pipeline = _scene(solver_cls, kwargs, extra_boxes=6)
            other = other_pipeline.contacts()
            other_pipeline.collide(other_model.state(), other)
            args["k"] = other
        elif name == "contacts_array_short":
            contacts.rigid_contact_normal = wp.zeros(len(contacts.rigid_contact_normal) - 1, dtype=wp.vec3,
                                                     device=model.device)  # fmt: skip
        elif name == "contacts_not_contacts":
            args["k"] = {"rigid_contact_count": contacts.rigid_contact_count}
        elif name == "body_q_reassigned_short_after_steps":
            s0.body_q = wp.zeros(nb - 1, dtype=wp.transform, device=model.device)
        elif name == "joint_qd_reassigned_numpy_after_steps":
            s0.joint_qd = s0.joint_qd.numpy()
        elif name.startswith("dt_"):
            args["h"] = {"dt_zero": 0.0, "dt_negative": -1.0e-3, "dt_nan": float("nan"), "dt_inf": float("inf"),
                         "dt_string": "1e-3", "dt_huge": 1.0e3}[name]  # fmt: skip
        else:
            return f"fail: the harness does not know case {name!r}"
        out_before = _snapshot(s1) if args["b"] is s1 and not name.startswith("out_") else None
        try:
            solver.step(args["a"], args["b"], args["c"], args["k"], args["h"])
        except (ValueError, TypeError) as exc:
            if case.expect == "survives":
                return "ok"
            if case.mention and case.mention not in str(exc):
                return f"fail: the error does not mention {case.mention!r}: {exc}"
            if out_before is not None:
                after = _snapshot(s1)
                for k, v in out_before.items():
                    if k in after and not np.array_equal(v, after[k], equal_nan=True):
                        return f"fail: state_out.{k} was written before the error was raised"
            return "ok"
        except NonFiniteStateError:
            return "ok" if case.expect == "survives" else "fail: NonFiniteStateError instead of a ValueError"
        if case.expect == "survives":
            try:
                solver.check_finite(s1)
            except NonFiniteStateError:
                pass
            return "ok"
        return "fail: step accepted the bad input without an error"

    # "guarded": NaN enters through one input; debug mode must raise at this step, or the step's
    # output must be finite and every other body must move as in the clean run
    clean_a, clean_b = model.state(), model.state()
    clean_a.assign(s0)
    solver.debug = True
    bad = float("inf") if name.startswith("inf_") else float("nan")
    poisoned_body, poisoned_particle = 0, -1
    if name in ("nan_particle_q", "nan_particle_qd"):
        poisoned_body, poisoned_particle = -1, 0
        arr = (s0.particle_q if name == "nan_particle_q" else s0.particle_qd).numpy()
        arr[poisoned_particle, 0] = bad
        (s0.particle_q if name == "nan_particle_q" else s0.particle_qd).assign(arr)
    elif name in ("nan_body_q", "inf_body_q", "nan_body_qd", "nan_body_f"):
        field = {"nan_body_q": "body_q", "inf_body_q": "body_q", "nan_body_qd": "body_qd", "nan_body_f": "body_f"}[name]
        arr = getattr(s0, field).numpy()
        arr[poisoned_body, 0] = bad
        getattr(s0, field).assign(arr)
    elif name in ("nan_joint_q", "nan_joint_qd"):
        arr = (s0.joint_q if name == "nan_joint_q" else s0.joint_qd).numpy()
        arr[qi if name == "nan_joint_q" else di] = bad
        (s0.joint_q if name == "nan_joint_q" else s0.joint_qd).assign(arr)
        poisoned_body = int(model.joint_child.numpy()[chain_joint])
    elif name == "nan_joint_f":
        arr = control.joint_f.numpy()
        arr[di] = bad
        control.joint_f.assign(arr)
        poisoned_body = int(model.joint_child.numpy()[chain_joint])
    else:
        return f"fail: the harness does not know case {name!r}"
    try:
        step(s0, s1)
    except NonFiniteStateError:
        return "ok"
    except (ValueError, TypeError):
        return "ok"  # rejected as bad input before the step: also stops it where it starts
    out = _snapshot(s1)
    for k in ("body_q", "body_qd", "joint_q", "joint_qd", "particle_q", "particle_qd"):
        if k in out and not np.all(np.isfinite(out[k])):
            return f"fail: state_out.{k} holds non-finite values and debug mode raised nothing"
    # the same step from the clean copy (the poisoned input restored)
    solver.debug = False
    if name == "nan_joint_f":
        arr = control.joint_f.numpy()
        arr[di] = 0.0
        control.joint_f.assign(arr)
    step(clean_a, clean_b)
    others = [i for i in range(nb) if i != poisoned_body]
    other_particles = [i for i in range(npart) if i != poisoned_particle]
    for k, tol, idx in (("body_q", 1.0e-3, others), ("body_qd", 1.0e-2, others),
                        ("particle_q", 1.0e-3, other_particles), ("particle_qd", 1.0e-2, other_particles)):
        if k not in out or not idx:
            continue
        ref, got = getattr(clean_b, k).numpy(), out[k]
        err = float(np.abs(got[idx] - ref[idx]).max())
        if err > tol:
            what = "bodies" if k.startswith("body") else "particles"
            return (f"fail: NaN in the input did not raise in debug mode and the other {what} moved differently "
                    f"from a clean step (max |{k}| difference {err:.3g}; a silent reset?)")  # fmt: skip
    return "ok"


def _child_main(argv) -> int:
    """``python -m armillary.testing.faults MODULE:CLASS JSON_KWARGS CASE...``: run each case and
    print one ``RESULT <case> <json outcome>`` line per case (flushed before the next starts)."""
    import importlib
    import warnings

    import warp as wp

    wp.config.quiet = True
    warnings.simplefilter("ignore")
    spec, kwargs_json, *names = argv
    module, _, qualname = spec.partition(":")
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    kwargs = json.loads(kwargs_json)
    for name in names:
        print(f"START {name}", flush=True)
        try:
            outcome = _run_case(CASES_BY_NAME[name], obj, kwargs)
        except BaseException as exc:  # noqa: BLE001 - every outcome is reported, not raised
            outcome = f"fail: unexpected {type(exc).__name__}: {exc}"
        print(f"RESULT {name} {json.dumps(outcome)}", flush=True)
    return 0


def solver_spec(solver_cls) -> str:
    """``module:qualname`` of a solver class, importable in a child process."""
    return f"{solver_cls.__module__}:{solver_cls.__qualname__}"


def run_fault_cases(solver_cls, kwargs: dict | None = None, names=None, *, timeout: float = 600.0) -> dict[str, str]:
    """Run the named cases (default: all) against ``solver_cls`` in child processes; returns
    ``{case: "ok" | "skip: ..." | "fail: ..." | "crash: ..."}``."""
    remaining = [c.name for c in FAULT_CASES] if names is None else list(names)
    results: dict[str, str] = {}
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p] + [env.get("PYTHONPATH", "")])
    env.pop("ARMILLARY_DEBUG", None)
    while remaining:
        cmd = [sys.executable, "-m", "armillary.testing.faults", solver_spec(solver_cls),
               json.dumps(kwargs or {}), *remaining]  # fmt: skip
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
            out, rc, err = proc.stdout, proc.returncode, proc.stderr
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            rc, err = None, "timed out"
        running = None
        for line in out.splitlines():
            if line.startswith("START "):
                running = line.split()[1]
            elif line.startswith("RESULT "):
                _, name, outcome = line.split(" ", 2)
                results[name] = json.loads(outcome)
                running = None
        remaining = [n for n in remaining if n not in results]
        if not remaining:
            break
        culprit = running or remaining[0]
        tail = [ln for ln in (err or "").strip().splitlines() if not ln.startswith("Warp ")][-3:]
        results[culprit] = f"crash: the process died (exit status {rc}) running this case: {' | '.join(tail)}"
        remaining.remove(culprit)
    return results


if __name__ == "__main__":
    raise SystemExit(_child_main(sys.argv[1:]))

"""Solver observables of :class:`~armillary_solver_mujoco.SolverMuJoCo` (see ``docs/observables.md``).

* ``body_qdd`` (both backends): mean acceleration of the step, ``(body_qd_out - body_qd_in) / dt``.
* ``body_parent_f`` (MuJoCo C engine): MuJoCo's ``cfrc_int`` of the step (``mj_rnePostConstraint``
  on the step's configuration and ``qacc``: the wrench the parent exerts on each body, contacts,
  equality constraints and applied forces accounted as MuJoCo does), moved to each body's COM and
  reordered as (force, torque); a FREE joint's ``joint_f`` (which the plugin applies as
  ``xfrc_applied``) is added back, since armillary counts it as transmitted by the joint.

``contact_f`` is not provided: MuJoCo detects its own contacts, which are not the rows of an
armillary :class:`~armillary.Contacts`.
"""

from __future__ import annotations

import numpy as np

from armillary.solvers.observables import begin_step

__all__ = ["SUPPORTED_OBSERVABLES", "ParentForce", "begin", "finish", "supported"]

SUPPORTED_OBSERVABLES = frozenset({"body_qdd", "body_parent_f"})


def supported(solver) -> frozenset[str]:
    """Kinds this instance fills: ``body_parent_f`` needs the C engine."""
    if solver._warp is not None:
        return frozenset({"body_qdd"})
    return SUPPORTED_OBSERVABLES


class ParentForce:
    """Reads MuJoCo's ``cfrc_int`` of each world right after the step's dynamics."""

    def __init__(self, solver):
        self.solver = solver
        m = solver.mj_model
        self.body_mj = solver._body_mj
        self.root = np.asarray(m.body_rootid, np.int64)[self.body_mj] if len(self.body_mj) else np.zeros(0, np.int64)
        self.buf = np.zeros((len(solver.mj_datas), len(self.body_mj), 6))

    def capture(self, mujoco, world: int, mj_model, mj_data) -> None:
        """After the step's ``qacc`` (before ``mj_step1`` or kinematics of the new state)."""
        mujoco.mj_rnePostConstraint(mj_model, mj_data)
        if not len(self.body_mj):
            return
        c = mj_data.cfrc_int[self.body_mj]  # (torque, force) about subtree_com of the root body
        f = c[:, 3:]
        ref = mj_data.subtree_com[self.root]
        com = mj_data.xipos[self.body_mj]
        out = self.buf[world]
        out[:, :3] = f
        out[:, 3:] = c[:, :3] + np.cross(ref - com, f)

    def write(self, observables, control) -> None:
        solver = self.solver
        model = solver.model
        out = np.zeros((int(model.body_count), 6))
        local, off = solver._body_local, solver._body_off
        if len(local):
            out[(local[None, :] + off[:, None]).reshape(-1)] = self.buf.reshape(-1, 6)
        joint_f = getattr(control, "joint_f", None) if control is not None else None
        if joint_f is not None and solver._free_joint_body and int(model.joint_count):
            jf = joint_f.numpy().astype(np.float64)
            child = model.joint_child.numpy()
            sm = solver.state_map
            for j, kind, _qs, ds, *_ in solver.conversion.joint_map:
                if kind != "free":
                    continue
                for w in range(len(solver.mj_datas)):
                    out[int(child[j]) + int(off[w])] += jf[int(sm.d_off[w]) + ds:int(sm.d_off[w]) + ds + 6]
        observables.body_parent_f.assign(out.astype(np.float32))


def begin(solver, observables, state_in, state_out, contacts):
    """Validate ``observables`` before the step and arm the ``cfrc_int`` capture when
    ``body_parent_f`` is requested (C engine); returns the :class:`StepObservables` or ``None``."""
    observed = begin_step(solver, observables, state_in, state_out, contacts)
    parent = None
    if observed is not None and "body_parent_f" in observables.kinds and solver._warp is None:
        parent = solver.__dict__.get("_parent_force")
        if parent is None or parent.buf.shape[0] != len(solver.mj_datas) or parent.body_mj is not solver._body_mj:
            parent = solver._parent_force = ParentForce(solver)
    solver._observe_parent = parent
    return observed


def finish(solver, observed, observables, state_out, control, dt) -> None:
    """Fill the requested kinds after the step."""
    observed.finish(state_out, dt, kinds={"body_qdd"})
    parent = solver.__dict__.get("_parent_force")
    if "body_parent_f" in observables.kinds and solver._warp is None and parent is not None:
        parent.write(observables, control)

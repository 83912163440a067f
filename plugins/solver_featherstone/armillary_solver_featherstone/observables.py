"""Solver observables of :class:`~armillary_solver_featherstone.SolverFeatherstone`.

Supported kinds (see ``docs/observables.md``):

* ``body_qdd``: mean acceleration of the step, ``(body_qd_out - body_qd_in) / dt`` (COM linear,
  angular; world frame): the joint accelerations of the Cholesky solve mapped to the bodies.
* ``contact_f``: per rigid contact, the contact force the step applied to body 0 (by body 1) and
  its torque about body 0's COM (world origin for a static shape 0), applied at the midpoint of
  the two contact points as the solver applies it; soft rows are zero (no particles here).
* ``body_parent_f``: per body, the wrench of its parent joint (world frame, about the COM) by
  Newton-Euler from the step's accelerations, gravity, ``State.body_f`` and the contact wrenches,
  children first. It includes what passes through the joint: constraint reaction, ``joint_f``,
  drives, limits, damping; a FREE joint transmits only its ``joint_f``.
"""

from __future__ import annotations

from armillary.solvers.observables import begin_step

__all__ = ["SUPPORTED_OBSERVABLES", "observed_step"]

SUPPORTED_OBSERVABLES = frozenset({"body_qdd", "body_parent_f", "contact_f"})


def _step_contact_force(solver, contacts, state_out):
    """The rigid contact forces the step applied (``vec3`` per contact slot, force of shape 0 on
    shape 1), or ``None`` when the step applied none."""
    if contacts is None or int(getattr(contacts, "rigid_contact_max", 0) or 0) == 0:
        return None
    if int(getattr(solver.model, "articulation_count", 0) or 0) == 0:
        return None  # the step returned before evaluating contacts
    applied = getattr(solver, "_applied_contact_force", None)
    if applied is not None:  # implicit contacts: the force at the step's new velocities
        return applied(contacts, state_out)
    return getattr(solver, "_contact_force", None)


def observed_step(solver, step, state_in, state_out, control, contacts, dt, observables) -> None:
    """Run ``step(state_in, state_out, control, contacts, dt)`` (the solver's step without
    observables) and fill ``observables``: validated first, written after the step."""
    observed = begin_step(solver, observables, state_in, state_out, contacts)
    step(state_in, state_out, control, contacts, dt)
    if observed is not None:
        force = _step_contact_force(solver, contacts, state_out)
        observed.finish(state_out, dt, contact_force=force, contact_point="midpoint")

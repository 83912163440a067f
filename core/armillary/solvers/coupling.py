"""``CouplingInterface``: the hooks a solver offers to the coupled solvers (mixin, in core).

Any solver, including a third-party one, inherits this mixin (``class MySolver(SolverBase,
CouplingInterface)``) to take part in cross-solver coupling without depending on the coupling
plugin. The defaults work from the model alone; solvers override what they can do better.

Endpoints: an endpoint is a body (``ENDPOINT_BODY``) or a particle (``ENDPOINT_PARTICLE``) of
the solver's (local) model, with a body-frame offset from the body's COM for bodies.

This module currently holds the effective-mass hooks (needed by every coupler); the remaining
hooks of the Coupled Solvers page (state-update notification, proxy rewind/harvest, proxy
contacts, gravity acceleration) join them with the coupling framework.
"""

from __future__ import annotations

import numpy as np

from ..flags import ModelFlags

ENDPOINT_BODY = 0
"""Endpoint kind: a rigid body (index into the solver model's bodies)."""
ENDPOINT_PARTICLE = 1
"""Endpoint kind: a particle (index into the solver model's particles)."""


def _host(arr, dtype=None):
    a = arr.numpy() if hasattr(arr, "numpy") else np.asarray(arr)
    return a if dtype is None else a.astype(dtype)


class CouplingInterface:
    """Mixin with the coupling hooks and their model-based defaults."""

    def coupling_effective_mass_refresh_flags(self) -> int:
        """The :class:`~armillary.ModelFlags` after which this solver's effective masses change.

        Couplers evaluate effective masses again (on the host) after these notifications. The
        default covers body, body inertial, joint DOF, armature and reference-pose updates.
        """
        return int(ModelFlags.BODY_PROPERTIES | ModelFlags.BODY_INERTIAL_PROPERTIES
                   | ModelFlags.JOINT_DOF_PROPERTIES | ModelFlags.JOINT_DOF_INERTIAL_PROPERTIES
                   | ModelFlags.JOINT_REFERENCE_POSE_PROPERTIES | ModelFlags.JOINT_PROPERTIES)  # fmt: skip

    def coupling_eval_effective_mass(self, endpoint_kind, endpoint_index, endpoint_local_pos, out) -> None:
        """Scalar effective mass [kg] of each endpoint (``out``, float32, one per endpoint).

        Default: the model mass of the body or particle (a free body's translational mass; joints
        and contacts are ignored). Solvers that know their constraint structure override it.
        """
        masses, _ = self._coupling_model_masses(endpoint_kind, endpoint_index)
        out.assign(masses.astype(np.float32))

    def coupling_eval_effective_mass_block(self, endpoint_kind, endpoint_index, endpoint_local_pos, out_mass,
                                           out_inertia=None) -> None:  # fmt: skip
        """Effective mass [kg] and, for bodies, effective inertia [kg m^2] (body frame, about the
        COM; zero for particles) of each endpoint. The effective inertia of a body is never
        smaller than its modeled inertia about any axis.

        Default: the model mass and inertia.
        """
        masses, inertias = self._coupling_model_masses(endpoint_kind, endpoint_index)
        out_mass.assign(masses.astype(np.float32))
        if out_inertia is not None:
            out_inertia.assign(inertias.astype(np.float32))

    # ------------------------------------------------------------------ helpers
    def _coupling_model_masses(self, endpoint_kind, endpoint_index):
        model = self.model
        kinds = _host(endpoint_kind, np.int64)
        idx = _host(endpoint_index, np.int64)
        if kinds.shape != idx.shape:
            raise ValueError(f"coupling effective mass: endpoint_kind {kinds.shape} and endpoint_index {idx.shape} "
                             "must have the same length")  # fmt: skip
        masses = np.zeros(len(kinds))
        inertias = np.zeros((len(kinds), 3, 3))
        body_mass = model.body_mass.numpy() if model.body_count else np.zeros(0)
        body_inertia = model.body_inertia.numpy() if model.body_count else np.zeros((0, 3, 3))
        pmass = model.particle_mass.numpy() if getattr(model, "particle_count", 0) else np.zeros(0)
        for e, (k, i) in enumerate(zip(kinds, idx)):
            if k == ENDPOINT_BODY:
                if not 0 <= i < len(body_mass):
                    raise ValueError(f"coupling endpoint {e}: body {int(i)} out of range [0, {len(body_mass)})")
                masses[e] = body_mass[i]
                inertias[e] = body_inertia[i]
            elif k == ENDPOINT_PARTICLE:
                if not 0 <= i < len(pmass):
                    raise ValueError(f"coupling endpoint {e}: particle {int(i)} out of range [0, {len(pmass)})")
                masses[e] = pmass[i]
            else:
                raise ValueError(f"coupling endpoint {e}: unknown kind {int(k)} (ENDPOINT_BODY=0, ENDPOINT_PARTICLE=1)")
        return masses, inertias

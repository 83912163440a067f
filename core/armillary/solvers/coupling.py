"""``CouplingInterface``: the hooks a solver offers to the coupled solvers (mixin, in core).

Any solver, including a third-party one, inherits this mixin (``class MySolver(SolverBase,
CouplingInterface)``) to take part in cross-solver coupling without depending on the coupling
plugin. The hooks are ordinary methods with working defaults computed from the solver's (local)
model and the public state arrays; a solver overrides only what it can do better, and raises
``NotImplementedError`` from a hook it cannot support rather than let a coupler take an invalid
path. A solver that does not inherit the mixin still takes part: the couplers call the defaults
on it through :func:`coupling_hook`.

Endpoints: an endpoint is a body (``ENDPOINT_BODY``) or a particle (``ENDPOINT_PARTICLE``) of
the solver's (local) model, with a body-frame offset from the body's COM for bodies.

Call order within a coupled solver (``armillary.solvers.experimental.coupled``):

1. construction: the entry solvers are built on their model views, then
   :meth:`~CouplingInterface.coupling_notify_iteration_restarts` (once, before any other hook);
2. each step: the coupler writes entry input states (public state arrays and force inputs) and
   calls :meth:`~CouplingInterface.coupling_notify_input_state_update`; proxy couplers then call
   :meth:`~CouplingInterface.coupling_rewind_proxy_body` / ``_particle`` and
   :meth:`~CouplingInterface.coupling_prepare_proxy_contacts` on the destination, step it, and
   harvest feedback with :meth:`~CouplingInterface.coupling_harvest_proxy_wrenches` /
   :meth:`~CouplingInterface.coupling_harvest_proxy_particle_forces`;
3. setup and after model changes: gravity acceleration and effective masses are evaluated
   (:meth:`~CouplingInterface.coupling_eval_gravity_acceleration`,
   :meth:`~CouplingInterface.coupling_eval_effective_mass` and ``_block``).

Force injection is not a hook: couplers write ``State.body_f``, ``State.particle_f`` and
``Control.joint_f`` and call the normal ``step``. Mass changes go through the entry's
``ModelView`` and the usual ``notify_model_changed``.

Warp is imported inside the hooks only, so ``import armillary`` stays free of it.
"""

from __future__ import annotations

import enum
import types

import numpy as np

from ..flags import ModelFlags, StateFlags

ENDPOINT_BODY = 0
"""Endpoint kind: a rigid body (index into the solver model's bodies)."""
ENDPOINT_PARTICLE = 1
"""Endpoint kind: a particle (index into the solver model's particles)."""


class EndpointKind(enum.IntEnum):
    """Kinds of model endpoints addressed by coupling hooks (``CouplingInterface.EndpointKind``)."""

    BODY = ENDPOINT_BODY
    PARTICLE = ENDPOINT_PARTICLE


def _host(arr, dtype=None):
    a = arr.numpy() if hasattr(arr, "numpy") else np.asarray(arr)
    return a if dtype is None else a.astype(dtype)


def _count(model, name) -> int:
    return int(getattr(model, name, 0) or 0)


class CouplingInterface:
    """Mixin with the coupling hooks and their model-based defaults.

    Inheriting buys into the coupling contract: override a hook to provide solver-specific
    behaviour, or override it to raise :class:`NotImplementedError` when no generic default can
    produce a meaningful result for the solver. ``EndpointKind`` is nested here because it is
    coupling-specific; input-update notifications use :class:`~armillary.StateFlags`.
    """

    EndpointKind = EndpointKind

    # ------------------------------------------------------------ notifications
    def coupling_notify_iteration_restarts(self, enabled: bool) -> None:
        """Declare whether the coupler may restart a step's solve.

        When: once, right after every entry solver of a coupled solver is constructed, before any
        other hook; so it is also where a solver rejects coupled options it does not support
        (raise ``ValueError``/``NotImplementedError``). With ``enabled`` false,
        :meth:`coupling_notify_input_state_update` receives ``iteration_restart=True`` only with
        ``dt=0`` during a reset, so a solver can skip saving the state a restart restores.

        Returns nothing. Who implements it: solvers with private history buffers (warm starts,
        previous poses) that must snapshot them when restarts are possible. Default: records
        ``enabled`` as ``self._coupling_iteration_restarts``.
        """
        self._coupling_iteration_restarts = bool(enabled)

    def coupling_notify_input_state_update(self, state, flags: StateFlags | int, *, iteration_restart: bool = False,
                                           dt: float = 0.0) -> None:  # fmt: skip
        """React to coupler-produced updates of public input arrays.

        When: after a coupler wrote this solver's input ``state`` (distribution of the shared
        state, proxy synchronisation, an ADMM iteration restart, a reset) and before the solver
        steps it. ``flags`` (:class:`~armillary.StateFlags`) says which arrays changed, covering
        both kinematic arrays (``BODY_Q``, ``PARTICLE_QD``, ...) and the public force inputs
        (``BODY_F``, ``PARTICLE_F``, ``JOINT_F``). ``iteration_restart`` is true when the same
        step is about to be solved again from its start state; ``dt`` is the step about to be
        taken (0 during a reset).

        Returns nothing. Who implements it: solvers keeping state outside the public arrays
        (previous poses, collider caches) that must be realigned. Default: nothing to realign
        (the public arrays are all the state); it only validates ``flags``.
        """
        try:
            value = int(flags)
        except (TypeError, ValueError):
            raise TypeError(f"coupling_notify_input_state_update expects StateFlags or an int, got {flags!r}") from None
        if value < 0:
            raise ValueError(f"coupling_notify_input_state_update: flags must be non-negative, got {value}")

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
        masses, _ = _model_masses(self, endpoint_kind, endpoint_index)
        out.assign(masses.astype(np.float32))

    def coupling_eval_effective_mass_block(self, endpoint_kind, endpoint_index, endpoint_local_pos, out_mass,
                                           out_inertia=None) -> None:  # fmt: skip
        """Effective mass [kg] and, for bodies, effective inertia [kg m^2] (body frame, about the
        COM; zero for particles) of each endpoint. The effective inertia of a body is never
        smaller than its modeled inertia about any axis.

        Default: the model mass and inertia.
        """
        masses, inertias = _model_masses(self, endpoint_kind, endpoint_index)
        out_mass.assign(masses.astype(np.float32))
        if out_inertia is not None:
            out_inertia.assign(inertias.astype(np.float32))

    # ------------------------------------------------------------ capabilities
    def coupling_supports_inertial_property_refresh(self) -> bool:
        """Whether refreshing inertial properties is safe during graph capture.

        When: queried by couplers that rescale masses every step (ADMM's proximal term) before
        they call ``notify_model_changed(BODY_INERTIAL_PROPERTIES)`` inside a captured step.
        Returns ``True`` only when :meth:`notify_model_changed` for
        ``ModelFlags.BODY_INERTIAL_PROPERTIES`` runs device work only (no host synchronisation,
        no allocation): solvers that read the mass and inertia arrays directly each step, or
        refresh their derived buffers with kernels, override this to return ``True``.
        Default: ``False`` (couplers then refresh outside capture).
        """
        return False

    def coupling_supports_full_surface_soft_contacts(self) -> bool:
        """Whether the solver consumes edge and face (full-surface) soft contacts.

        When: queried while building per-entry contact filters. Full-surface entry buffers keep
        detected geometry and mesh feature data; a consumer must test eligibility at its own
        current positions. Entries with particles must return ``True`` to receive full-surface
        rows (rigid-only entries receive no soft contacts and need not). Default: ``False``
        (only particle-vertex soft contacts are passed on).
        """
        return False

    # ------------------------------------------------------------ gravity
    def coupling_eval_gravity_acceleration(self, out_body_acceleration, out_particle_acceleration) -> None:
        """Gravity-like acceleration [m/s^2] this solver applies to each local body and particle.

        When: at coupler setup and after model changes touching gravity, mass or body flags; the
        couplers cache the arrays and pass them to the rewind hooks (and subtract them in the
        harvest fallbacks) so that gravity is not applied twice to a proxy.

        Args:
            out_body_acceleration: ``wp.array(dtype=wp.vec3)`` with one row per local body, or
                ``None`` to skip bodies.
            out_particle_acceleration: ``wp.array(dtype=wp.vec3)`` with one row per local
                particle, or ``None``.

        Who implements it: solvers that scale, compensate or disable gravity. Default: the
        model's per-world ``gravity`` for dynamic entities (a body's or particle's world; world
        -1 takes the global row, see :mod:`armillary.sim.gravity`), zero for kinematic bodies, inactive particles and entities
        with zero inverse mass. Device work only (graph-capturable).
        """
        import warp as wp

        from . import _coupling_kernels as K

        model = self.model
        dev = getattr(model, "device", None)
        gravity = getattr(model, "gravity", None)
        if gravity is None:
            gravity = _empty(self, wp.vec3, dev)
        empty_i = _empty(self, wp.int32, dev)
        nb = _count(model, "body_count")
        if out_body_acceleration is not None:
            _check_rows(self, "out_body_acceleration", out_body_acceleration, nb)
            if nb:
                _launch(self, K.body_gravity_kernel, nb,
                        [gravity, _or(model, "body_world", empty_i), _or(model, "body_flags", empty_i),
                         model.body_inv_mass], [out_body_acceleration], device=dev)  # fmt: skip
        npart = _count(model, "particle_count")
        if out_particle_acceleration is not None:
            _check_rows(self, "out_particle_acceleration", out_particle_acceleration, npart)
            if npart:
                _launch(self, K.particle_gravity_kernel, npart,
                        [gravity, _or(model, "particle_world", empty_i), _or(model, "particle_flags", empty_i),
                         model.particle_inv_mass], [out_particle_acceleration], device=dev)  # fmt: skip

    # ------------------------------------------------------------ proxy rewind
    def coupling_rewind_proxy_body(self, body_local_to_proxy_global, state, coupling_forces, body_gravity_acceleration,
                                   dt: float) -> None:  # fmt: skip
        """Rewind proxy bodies before a lagged destination solve.

        When: on the destination solver of a lagged proxy pass, after the coupler copied the
        source's end velocity into the proxy rows of ``state`` and before ``step``. The source
        velocity already contains the lagged coupling feedback, the public force input and
        gravity of this step; the destination step applies force input and gravity again, so
        they are removed here (and so is the feedback, which the destination re-creates).

        Args:
            body_local_to_proxy_global: ``wp.array(dtype=int32)``, one row per local body: the
                proxy index of the body (row of ``coupling_forces``), -1 for non-proxy bodies.
            state: the destination input state (modified in place).
            coupling_forces: ``wp.array(dtype=wp.spatial_vector)``, lagged feedback wrench
                ``(f, tau)`` [N, N m] (world frame, at the COM) per proxy.
            body_gravity_acceleration: ``wp.array(dtype=wp.vec3)`` per local body (from
                :meth:`coupling_eval_gravity_acceleration`), or an empty array for none.
            dt: the destination step [s].

        Implementations may update either ``state.body_qd`` or ``state.body_f``. Default:
        ``v -= dt (f/m + g)``, ``w -= dt I_world^-1 tau`` with ``f, tau`` the feedback plus
        ``state.body_f``, using the model's inverse mass and inverse inertia.
        """
        import warp as wp

        from . import _coupling_kernels as K

        model = self.model
        nb = _count(model, "body_count")
        if nb == 0:
            return
        _check_rows(self, "body_local_to_proxy_global", body_local_to_proxy_global, nb)
        dev = getattr(model, "device", None)
        body_f = getattr(state, "body_f", None)
        _launch(self, K.rewind_body_kernel, nb,
                [body_local_to_proxy_global, state.body_q, state.body_qd,
                 _empty_if_none(self, body_f, wp.spatial_vector, dev), model.body_inv_mass, model.body_inv_inertia,
                 coupling_forces, _empty_if_none(self, body_gravity_acceleration, wp.vec3, dev), float(dt)],
                device=dev)  # fmt: skip

    def coupling_rewind_proxy_particle(self, particle_local_to_proxy_global, state, coupling_forces,
                                       particle_gravity_acceleration, dt: float) -> None:  # fmt: skip
        """Rewind proxy particles before a lagged destination solve (see
        :meth:`coupling_rewind_proxy_body`).

        Args:
            particle_local_to_proxy_global: ``wp.array(dtype=int32)``, per local particle: its
                proxy index (row of ``coupling_forces``) or -1.
            state: the destination input state (modified in place).
            coupling_forces: ``wp.array(dtype=wp.vec3)`` lagged feedback force [N] per proxy.
            particle_gravity_acceleration: ``wp.array(dtype=wp.vec3)`` per local particle, or
                empty.
            dt: the destination step [s].

        Implementations may update either ``state.particle_qd`` or ``state.particle_f``.
        Default: ``v -= dt ((f + particle_f)/m + g)`` with the model's inverse mass.
        """
        import warp as wp

        from . import _coupling_kernels as K

        model = self.model
        n = _count(model, "particle_count")
        if n == 0:
            return
        _check_rows(self, "particle_local_to_proxy_global", particle_local_to_proxy_global, n)
        dev = getattr(model, "device", None)
        pf = getattr(state, "particle_f", None)
        _launch(self, K.rewind_particle_kernel, n,
                [particle_local_to_proxy_global, state.particle_qd, _empty_if_none(self, pf, wp.vec3, dev),
                 model.particle_inv_mass, coupling_forces,
                 _empty_if_none(self, particle_gravity_acceleration, wp.vec3, dev), float(dt)],
                device=dev)  # fmt: skip

    # ------------------------------------------------------------ proxy harvest
    def coupling_harvest_proxy_wrenches(self, body_local_to_proxy_global, out_body_f, *, body_qd_before, state,
                                        state_out, contacts, dt: float) -> None:  # fmt: skip
        """Accumulate the feedback wrench the destination exerted on each proxy body.

        When: on the destination solver right after its step in a proxy pass.

        Args:
            body_local_to_proxy_global: per local body, its proxy index (row of ``out_body_f``)
                or -1.
            out_body_f: ``wp.array(dtype=wp.spatial_vector)``, per proxy; the feedback wrench
                ``(f, tau)`` [N, N m] (world frame, at the COM) is **added** to it.
            body_qd_before: proxy velocities the step started from (the input ``state.body_qd``
                after rewind).
            state: the destination input state (its ``body_f`` is the public force input).
            state_out: the destination output state.
            contacts: the contacts the destination step used (or ``None``).
            dt: the destination step [s].

        Who implements it: solvers that can report contact-native forces (better than momentum
        differences in contact-rich or solver-private interactions). Default: the momentum
        fallback ``f = m (v_after - v_before)/dt - m g - f_ext`` and
        ``tau = I_world (w_after - w_before)/dt - tau_ext``, i.e. the momentum change not
        explained by gravity (:meth:`coupling_eval_gravity_acceleration`) and the public force
        input ``state.body_f``, with the destination model's (possibly scaled) mass.
        """
        import warp as wp

        from . import _coupling_kernels as K

        model = self.model
        nb = _count(model, "body_count")
        if nb == 0:
            return
        _check_rows(self, "body_local_to_proxy_global", body_local_to_proxy_global, nb)
        dev = getattr(model, "device", None)
        g_body, _ = _gravity_cache(self, bodies=True, particles=False)
        body_f = getattr(state, "body_f", None)
        _launch(self, K.harvest_body_kernel, nb,
                [body_local_to_proxy_global, body_qd_before, state_out.body_q, state_out.body_qd,
                 _empty_if_none(self, body_f, wp.spatial_vector, dev), model.body_mass, model.body_inertia, g_body,
                 1.0 / float(dt)], [out_body_f], device=dev)  # fmt: skip

    def coupling_harvest_proxy_particle_forces(self, particle_local_to_proxy_global, out_particle_f, *,
                                               particle_qd_before, state, state_out, contacts,
                                               dt: float) -> None:  # fmt: skip
        """Accumulate the feedback force the destination exerted on each proxy particle (see
        :meth:`coupling_harvest_proxy_wrenches`).

        Default: ``f = m (v_after - v_before)/dt - m g - particle_f``, added to
        ``out_particle_f[proxy]``.
        """
        import warp as wp

        from . import _coupling_kernels as K

        model = self.model
        n = _count(model, "particle_count")
        if n == 0:
            return
        _check_rows(self, "particle_local_to_proxy_global", particle_local_to_proxy_global, n)
        dev = getattr(model, "device", None)
        _, g_part = _gravity_cache(self, bodies=False, particles=True)
        pf = getattr(state, "particle_f", None)
        _launch(self, K.harvest_particle_kernel, n,
                [particle_local_to_proxy_global, particle_qd_before, state_out.particle_qd,
                 _empty_if_none(self, pf, wp.vec3, dev), model.particle_mass, g_part, 1.0 / float(dt)],
                [out_particle_f], device=dev)  # fmt: skip

    # ------------------------------------------------------------ proxy contacts
    def coupling_prepare_proxy_contacts(self, state, contacts, *, contacts_freshly_detected: bool = False):
        """Contacts to use for a proxy destination solve (returns ``Contacts`` or ``None``).

        When: on the destination solver before each proxy-pass step, with the contacts the
        coupler would pass (``contacts_freshly_detected`` is true right after a collision
        refresh, false when a cached result is reused by inner iterations).

        The generic momentum harvest treats proxy feedback as destination momentum change, so
        proxy-proxy and proxy-static rows (a proxy body, ``BodyFlags.PROXY``, against another
        proxy or an immobile body: static, kinematic or zero inverse mass; a proxy particle,
        ``ParticleFlags.PROXY``, against a proxy or immobile body) must not reach the solver:
        they would feed constraints between virtual objects back to the source. Default: returns
        a copy of ``contacts`` without those rows (a buffer cached on the solver, refilled by
        device work only); ``None`` stays ``None``. Solvers with their own filtering override it.
        """
        if contacts is None:
            return None
        import warp as wp

        from . import _coupling_kernels as K

        model = self.model
        cache = self.__dict__.setdefault("_coupling_cache", {})
        comp = cache.get("proxy_contacts")
        if comp is None or not comp.matches(contacts):
            comp = cache["proxy_contacts"] = K.ContactCompactor(contacts)
        dev = contacts.device
        empty_i = _empty(self, wp.int32, dev)
        nb = _count(model, "body_count")
        inv_mass = model.body_inv_mass if nb else _empty(self, float, dev)
        flags = _or(model, "body_flags", empty_i) if nb else empty_i
        shape_body = _or(model, "shape_body", empty_i)
        if comp.rigid_max:
            _launch(self, K.proxy_rigid_keep_kernel, comp.rigid_max,
                    [contacts.rigid_contact_count, contacts.rigid_contact_shape0, contacts.rigid_contact_shape1,
                     shape_body, flags, inv_mass], [comp.rigid_keep], device=dev)  # fmt: skip
        if comp.soft_max:
            pflags = _or(model, "particle_flags", empty_i) if _count(model, "particle_count") else empty_i
            _launch(self, K.proxy_soft_keep_kernel, comp.soft_max,
                    [contacts.soft_contact_count, contacts.soft_contact_particle, contacts.soft_contact_shape,
                     shape_body, flags, inv_mass, pflags], [comp.soft_keep], device=dev)  # fmt: skip
        return comp.compact(contacts)


def _or(model, name, default):
    value = getattr(model, name, None)
    return default if value is None else value


def _empty(solver, dtype, device):
    """An empty array of ``dtype`` on ``device``, cached on ``solver`` (the defaults run every
    coupling iteration: no per-call allocation)."""
    import warp as wp

    cache = solver.__dict__.setdefault("_coupling_empty", {})
    key = (dtype, str(device))
    arr = cache.get(key)
    if arr is None:
        arr = cache[key] = wp.zeros(0, dtype=dtype, device=device)
    return arr


def _empty_if_none(solver, arr, dtype, device):
    return arr if arr is not None else _empty(solver, dtype, device)


def _launch(solver, kernel, dim, inputs, outputs=(), device=None) -> None:
    """``wp.launch`` recorded once per argument set on ``solver`` and replayed
    (:class:`armillary.launch.LaunchCache`)."""
    cache = solver.__dict__.get("_coupling_launches")
    if cache is None:
        from ..launch import LaunchCache

        cache = solver.__dict__["_coupling_launches"] = LaunchCache(max_entries=64)
    cache.launch(kernel, dim, inputs, outputs, device=device)


COUPLING_HOOKS = (
    "coupling_notify_iteration_restarts",
    "coupling_notify_input_state_update",
    "coupling_effective_mass_refresh_flags",
    "coupling_supports_inertial_property_refresh",
    "coupling_supports_full_surface_soft_contacts",
    "coupling_eval_gravity_acceleration",
    "coupling_eval_effective_mass",
    "coupling_eval_effective_mass_block",
    "coupling_rewind_proxy_body",
    "coupling_rewind_proxy_particle",
    "coupling_harvest_proxy_wrenches",
    "coupling_harvest_proxy_particle_forces",
    "coupling_prepare_proxy_contacts",
)
"""The method names of every hook of :class:`CouplingInterface`."""


def coupling_hook(solver, name: str):
    """The hook ``name`` of ``solver``, bound: its own method when it defines one (whether or not it
    inherits :class:`CouplingInterface`), else the mixin's default bound to it.

    This is how couplers call hooks, so any :class:`~armillary.solvers.SolverBase` with a ``model``
    takes part through the model-based defaults. Raises ``AttributeError`` for an unknown hook name.
    """
    if name not in COUPLING_HOOKS:
        raise AttributeError(f"unknown coupling hook {name!r}; hooks: {', '.join(COUPLING_HOOKS)}")
    method = getattr(solver, name, None)
    if method is not None and callable(method):
        return method
    return types.MethodType(getattr(CouplingInterface, name), solver)


# ---------------------------------------------------------------------- helpers (take the solver)
def _check_rows(self, label, arr, n) -> None:
    rows = int(arr.shape[0]) if hasattr(arr, "shape") else len(arr)
    if rows != n:
        raise ValueError(f"{type(self).__name__}: {label} has {rows} rows, the solver's model has {n}")

def _gravity_cache(self, *, bodies: bool, particles: bool):
    """Per-solver scratch arrays holding :meth:`coupling_eval_gravity_acceleration` (recomputed
    on each call: device work only, allocated once)."""
    import warp as wp

    model = self.model
    dev = getattr(model, "device", None)
    cache = self.__dict__.setdefault("_coupling_cache", {})
    nb, npart = _count(model, "body_count"), _count(model, "particle_count")
    gb = cache.get("gravity_body")
    if gb is None or gb.shape[0] != nb:
        gb = cache["gravity_body"] = wp.zeros(nb, dtype=wp.vec3, device=dev)
    gp = cache.get("gravity_particle")
    if gp is None or gp.shape[0] != npart:
        gp = cache["gravity_particle"] = wp.zeros(npart, dtype=wp.vec3, device=dev)
    hook = coupling_hook(self, "coupling_eval_gravity_acceleration")
    hook(gb if bodies else None, gp if particles else None)
    return gb, gp

def _model_masses(self, endpoint_kind, endpoint_index):
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


"""``SolverCoupledProxy``: lagged-impulse (virtual inertia) proxy coupling of two solver entries.

A source entry owns the real bodies / particles; a destination entry receives *proxies* of them
(dynamic in its view, flagged ``BodyFlags.PROXY`` / ``ParticleFlags.PROXY``, with the source's
effective mass times ``mass_scale``), solves its local problem against them, and the momentum
change of the proxies is returned to the source as a force input (``body_f`` / ``particle_f``)
on the next pass (the next proxy iteration, or the next step).

One coupled step, for ``iterations`` passes (per (source, destination) group):

1. the source's input state is set from ``state_in`` plus the lagged feedback added to its
   public force inputs (``"lagged"``, first pass of the step: the predictor
   ``F + b (F - F_last)``, see :attr:`SolverCoupledProxy.lagged_extrapolation`), and the source
   is stepped;
2. the destination's input state is set from ``state_in``; the proxy rows get the source's begin
   pose (``"lagged"``) or end pose (``"staggered"``) and its end velocity;
3. ``"lagged"`` only: ``coupling_rewind_proxy_body`` / ``_particle`` remove from the proxy
   velocity the feedback, force input and gravity the source already integrated (the
   destination applies force input and gravity again and re-creates the feedback);
4. contacts: the proxy's ``collision_pipeline(destination_view)`` (refreshed every
   ``collide_interval`` steps into a persistent buffer; inner iterations reuse it) or the outer
   ``contacts``; then ``coupling_prepare_proxy_contacts`` (drops proxy-proxy / proxy-static rows);
5. the destination is stepped (``substeps`` times); ``coupling_harvest_proxy_wrenches`` /
   ``_particle_forces`` report the feedback, the mean interaction force over the whole step
   (solver hook or momentum fallback);
6. relaxation: ``feedback = w * harvested + (1 - w) * feedback`` with ``w`` fixed
   (``proxy_relaxation``) or Aitken-adapted within the step (``proxy_relaxation_mode="aitken"``,
   clamped to ``[proxy_relaxation_min, proxy_relaxation_max]``).

The step ends with the usual owned-row reconciliation. Everything runs on the device (no host
synchronisation inside :meth:`step`); per-step diagnostics are device arrays in
:attr:`SolverCoupledProxy.diagnostics`.
"""

from __future__ import annotations

import dataclasses
from typing import Any
from collections.abc import Callable, Sequence

import numpy as np
import warp as wp

from armillary.flags import ModelFlags, StateFlags
from armillary.sim.enums import JointType
from armillary.solvers import Coordinates, SolverCapabilities
from armillary.solvers.coupling import ENDPOINT_PARTICLE, CouplingInterface, coupling_hook

from .solver_coupled import SolverCoupled, SolverEntry

__all__ = ["SolverCoupledProxy"]

_MODES = ("lagged", "staggered")
_PROXY_JOINT_TYPES = (int(JointType.FIXED), int(JointType.PRISMATIC), int(JointType.REVOLUTE))


def _as_list(ids) -> list:
    """``ids`` (a sequence, an array, a single id or label, or ``None``) as a list."""
    if ids is None:
        return []
    if isinstance(ids, (str, bytes)) or not hasattr(ids, "__iter__"):
        return [ids]
    if hasattr(ids, "numpy"):
        return ids.numpy().tolist()
    return list(ids)
_RELAX_MODES = ("fixed", "aitken")


# ---------------------------------------------------------------------- kernels
@wp.kernel
def _sync_body_kernel(
    src_rows: wp.array(dtype=wp.int32),
    dst_rows: wp.array(dtype=wp.int32),
    src_q: wp.array(dtype=wp.transform),
    src_qd: wp.array(dtype=wp.spatial_vector),
    dst_q: wp.array(dtype=wp.transform),
    dst_qd: wp.array(dtype=wp.spatial_vector),
):
    p = wp.tid()
    s = src_rows[p]
    d = dst_rows[p]
    dst_q[d] = src_q[s]
    dst_qd[d] = src_qd[s]


@wp.kernel
def _sync_particle_kernel(
    src_rows: wp.array(dtype=wp.int32),
    dst_rows: wp.array(dtype=wp.int32),
    src_q: wp.array(dtype=wp.vec3),
    src_qd: wp.array(dtype=wp.vec3),
    dst_q: wp.array(dtype=wp.vec3),
    dst_qd: wp.array(dtype=wp.vec3),
):
    p = wp.tid()
    s = src_rows[p]
    d = dst_rows[p]
    dst_q[d] = src_q[s]
    dst_qd[d] = src_qd[s]


@wp.kernel
def _source_feedback_kernel(
    src_rows: wp.array(dtype=wp.int32),
    feedback: wp.array(dtype=Any),
    feedback_last: wp.array(dtype=Any),
    extrapolation: float,
    first_pass: int,
    force_a: wp.array(dtype=Any),
    force_b: wp.array(dtype=Any),
):
    """Add the lagged feedback of proxy ``p`` to its source row of the source's force inputs.

    ``feedback`` is the destination's mean interaction force over the last solved step (body
    wrench ``(f, tau)`` [N, N m], world frame at the COM, or particle force [N]); it is centred
    half a step before the source step's start. On the first pass of a step (``first_pass``)
    the source gets the second-order predictor ``F + extrapolation * (F - F_last)`` (with
    ``extrapolation = 0.5``: the linear extrapolation of the feedback history to the step's
    start, where the source's semi-implicit update evaluates its forces) and ``F_last`` becomes
    ``F``; later passes add the current iterate ``F`` unchanged. ``force_a`` / ``force_b``: the
    source's ``body_f`` / ``particle_f`` of its two input states (``force_b`` empty when there
    is one, or ``force_a`` empty when the source state has no force input).
    """
    p = wp.tid()
    f = feedback[p]
    if first_pass != 0:
        f = f + extrapolation * (f - feedback_last[p])
        feedback_last[p] = feedback[p]
    r = src_rows[p]
    if force_a.shape[0] > 0:
        force_a[r] = force_a[r] + f
    if force_b.shape[0] > 0:
        force_b[r] = force_b[r] + f


for _dtype in (wp.spatial_vector, wp.vec3):
    wp.overload(_source_feedback_kernel, {"feedback": wp.array(dtype=_dtype), "feedback_last": wp.array(dtype=_dtype),
                                          "force_a": wp.array(dtype=_dtype),
                                          "force_b": wp.array(dtype=_dtype)})  # fmt: skip


@wp.kernel
def _copy_joint_targets_kernel(
    src_q_rows: wp.array(dtype=wp.int32),
    dst_q_rows: wp.array(dtype=wp.int32),
    src_qd_rows: wp.array(dtype=wp.int32),
    dst_qd_rows: wp.array(dtype=wp.int32),
    src_target_q: wp.array(dtype=float),
    src_target_qd: wp.array(dtype=float),
    dst_target_q: wp.array(dtype=float),
    dst_target_qd: wp.array(dtype=float),
):
    """Proxy joint drives: copy the source control's ``joint_target_q`` (coordinate rows) and
    ``joint_target_qd`` (DoF rows) of the proxy joints into the destination-local rows (either
    target array may be empty: skipped)."""
    k = wp.tid()
    if k < src_q_rows.shape[0] and src_target_q.shape[0] > 0 and dst_target_q.shape[0] > 0:
        dst_target_q[dst_q_rows[k]] = src_target_q[src_q_rows[k]]
    if k < src_qd_rows.shape[0] and src_target_qd.shape[0] > 0 and dst_target_qd.shape[0] > 0:
        dst_target_qd[dst_qd_rows[k]] = src_target_qd[src_qd_rows[k]]


@wp.kernel
def _zero_float_kernel(a: wp.array(dtype=float)):
    a[wp.tid()] = 0.0


@wp.kernel
def _aitken_accumulate_kernel(
    raw: wp.array(dtype=Any),
    old: wp.array(dtype=Any),
    prev_res: wp.array(dtype=Any),
    decl: wp.array(dtype=wp.int32),
    acc_dot: wp.array(dtype=float),
    acc_sq: wp.array(dtype=float),
):
    """Aitken sums of proxy row ``p`` (body wrenches or particle forces): ``<r_prev, d>`` and
    ``<d, d>`` of the residual change ``d = (raw - old) - r_prev``, per declaration."""
    p = wp.tid()
    r = raw[p] - old[p]
    d = r - prev_res[p]
    k = decl[p]
    wp.atomic_add(acc_dot, k, wp.dot(prev_res[p], d))
    wp.atomic_add(acc_sq, k, wp.dot(d, d))


for _dtype in (wp.spatial_vector, wp.vec3):
    wp.overload(_aitken_accumulate_kernel, {"raw": wp.array(dtype=_dtype), "old": wp.array(dtype=_dtype),
                                            "prev_res": wp.array(dtype=_dtype)})  # fmt: skip


@wp.kernel
def _relaxation_kernel(
    iteration: int,
    base: wp.array(dtype=float),
    aitken: wp.array(dtype=wp.int32),
    lo: wp.array(dtype=float),
    hi: wp.array(dtype=float),
    acc_dot: wp.array(dtype=float),
    acc_sq: wp.array(dtype=float),
    omega: wp.array(dtype=float),
):
    k = wp.tid()
    w = base[k]
    if aitken[k] != 0:
        if iteration == 0:
            w = wp.clamp(base[k], lo[k], hi[k])
        else:
            w = omega[k]
            if acc_sq[k] > 1.0e-30:
                w = -omega[k] * acc_dot[k] / acc_sq[k]
            w = wp.clamp(w, lo[k], hi[k])
    omega[k] = w
    acc_dot[k] = 0.0
    acc_sq[k] = 0.0


@wp.kernel
def _blend_kernel(
    raw: wp.array(dtype=Any),
    decl: wp.array(dtype=wp.int32),
    omega: wp.array(dtype=float),
    iteration: int,
    feedback: wp.array(dtype=Any),
    prev_res: wp.array(dtype=Any),
    change_sq: wp.array(dtype=float),
    norm_sq: wp.array(dtype=float),
):
    """Relaxed feedback update of one proxy endpoint (body wrench or particle force)."""
    p = wp.tid()
    old = feedback[p]
    r = raw[p] - old
    new = old + omega[decl[p]] * r
    feedback[p] = new
    prev_res[p] = r
    d = new - old
    wp.atomic_add(change_sq, iteration, wp.dot(d, d))
    wp.atomic_add(norm_sq, iteration, wp.dot(new, new))


for _dtype in (wp.spatial_vector, wp.vec3):
    wp.overload(_blend_kernel, {"raw": wp.array(dtype=_dtype), "feedback": wp.array(dtype=_dtype),
                                "prev_res": wp.array(dtype=_dtype)})  # fmt: skip


@wp.kernel
def _record_relaxation_kernel(omega: wp.array(dtype=float), iteration: int, out: wp.array(dtype=float)):
    # diagnostics: the relaxation factor of the first declaration of the group
    out[iteration] = omega[0]


@wp.kernel
def _sqrt_kernel(a: wp.array(dtype=float)):
    i = wp.tid()
    a[i] = wp.sqrt(a[i])


@wp.func
def _world_selected(world: int, world_mask: wp.array(dtype=wp.bool)):
    # world_mask: empty (every world) or world_count + 1 entries (the last: global entities)
    n = world_mask.shape[0]
    if n == 0:
        return True
    if world >= 0 and world < n - 1:
        return world_mask[world]
    return world_mask[n - 1]


@wp.kernel
def _reset_body_feedback_kernel(
    src_rows: wp.array(dtype=wp.int32),
    body_world: wp.array(dtype=wp.int32),
    world_mask: wp.array(dtype=wp.bool),
    feedback: wp.array(dtype=wp.spatial_vector),
    prev_res: wp.array(dtype=wp.spatial_vector),
    feedback_last: wp.array(dtype=wp.spatial_vector),
):
    p = wp.tid()
    if _world_selected(body_world[src_rows[p]], world_mask):
        feedback[p] = wp.spatial_vector()
        prev_res[p] = wp.spatial_vector()
        feedback_last[p] = wp.spatial_vector()


@wp.kernel
def _reset_particle_feedback_kernel(
    src_rows: wp.array(dtype=wp.int32),
    particle_world: wp.array(dtype=wp.int32),
    world_mask: wp.array(dtype=wp.bool),
    feedback: wp.array(dtype=wp.vec3),
    prev_res: wp.array(dtype=wp.vec3),
    feedback_last: wp.array(dtype=wp.vec3),
):
    p = wp.tid()
    if _world_selected(particle_world[src_rows[p]], world_mask):
        feedback[p] = wp.vec3()
        prev_res[p] = wp.vec3()
        feedback_last[p] = wp.vec3()


def _overrides(solver, hook: str) -> bool:
    """Whether ``solver`` implements coupling hook ``hook`` itself (not the mixin's default)."""
    method = getattr(type(solver), hook, None)
    return method is not None and method is not getattr(CouplingInterface, hook)


# ---------------------------------------------------------------------- run-time records
@dataclasses.dataclass
class _ProxyGroup:
    """All proxy mappings from one source entry into one destination entry."""

    source: SolverEntry
    destination: SolverEntry
    decls: list  # (declaration index in Config.proxies, Proxy)
    # host ids (global == view-local ids: views are not compacted)
    body_src: np.ndarray = None
    body_dst: np.ndarray = None
    body_decl: np.ndarray = None
    particle_src: np.ndarray = None
    particle_dst: np.ndarray = None
    particle_decl: np.ndarray = None
    mode_lagged: bool = True
    # device arrays
    d_body_src: wp.array = None
    d_body_dst: wp.array = None
    d_body_decl: wp.array = None
    d_particle_src: wp.array = None
    d_particle_dst: wp.array = None
    d_particle_decl: wp.array = None
    body_local_to_proxy: wp.array = None  # destination view rows -> proxy index, -1 elsewhere
    particle_local_to_proxy: wp.array = None
    body_feedback: wp.array = None  # lagged feedback wrench per body proxy [N, N m]
    body_feedback_last: wp.array = None  # the feedback one step earlier (lagged predictor)
    empty_body_f: wp.array = None
    body_raw: wp.array = None
    body_prev_res: wp.array = None
    particle_feedback: wp.array = None  # lagged feedback force per particle proxy [N]
    particle_feedback_last: wp.array = None
    empty_particle_f: wp.array = None
    particle_raw: wp.array = None
    particle_prev_res: wp.array = None
    body_qd_before: wp.array = None
    particle_qd_before: wp.array = None
    # proxy joints (kept enabled in the destination view) and their drive-target rows
    joints: np.ndarray = None
    d_joint_q_src: wp.array = None  # source control joint_target_q rows
    d_joint_q_dst: wp.array = None  # destination-local joint_target_q rows
    d_joint_qd_src: wp.array = None  # source control joint_target_qd rows
    d_joint_qd_dst: wp.array = None  # destination-local joint_target_qd rows
    joint_rows: int = 0
    # relaxation (one slot per declaration of the group)
    relax_base: wp.array = None
    relax_aitken: wp.array = None
    relax_lo: wp.array = None
    relax_hi: wp.array = None
    acc_dot: wp.array = None
    acc_sq: wp.array = None
    omega: wp.array = None
    # proxy-local collision
    pipeline: object = None
    contacts: object = None
    collide_interval: int = 1
    outer_local: object = None  # outer contacts filtered for the destination (this step)


@dataclasses.dataclass
class ProxyDiagnostics:
    """Per-step diagnostics of :class:`SolverCoupledProxy` (device arrays, overwritten each step).

    Attributes:
        proxy_feedback_change: ``(iterations,)`` float32: L2 norm over every proxy of the change
            of the lagged feedback (body wrenches and particle forces) made by each iteration.
        proxy_feedback_norm: ``(iterations,)`` float32: L2 norm of the feedback after each
            iteration.
        proxy_relaxation: ``(iterations,)`` float32: relaxation factor used by each iteration
            (first declaration of the first group; Aitken-adapted or fixed).
    """

    proxy_feedback_change: wp.array
    proxy_feedback_norm: wp.array
    proxy_relaxation: wp.array


class SolverCoupledProxy(SolverCoupled):
    """Couple two solver entries with lagged-impulse virtual proxy bodies or particles.

    Args:
        model: the shared model.
        entries: the :class:`SolverCoupled.Entry` list (at most two entries take part in proxy
            mappings: one source and one destination).
        coupling: a :class:`SolverCoupledProxy.Config`.

    The source entry owns the mapped bodies / particles; in the destination's view they are
    dynamic proxies (``BodyFlags.PROXY`` / ``ParticleFlags.PROXY``, visible to its collisions and
    in its ownership masks) with ``mass_scale`` times the source's effective mass
    (``coupling_eval_effective_mass_block`` / ``coupling_eval_effective_mass`` of the source
    solver). All mappings of one (source, destination) pair share one destination solve per
    iteration. Proxy joints (``joints``: FIXED, PRISMATIC or REVOLUTE joints whose endpoints are
    proxied bodies of the same mapping, or the world) stay enabled in the destination view, so
    their constraints keep acting between the proxy bodies; before each destination solve the
    source control's ``joint_target_q`` / ``joint_target_qd`` rows of those joints are copied
    into the destination-local control rows (one device launch). Limitations: the mappings must
    all go one way (one (source, destination) pair); ``proxy_joints`` must be ``None`` or equal
    ``joints`` (no distinct proxy joint ids), and the proxy bodies of joint endpoints must be
    the source bodies themselves (``proxy_bodies`` identity for them).

    Attributes:
        diagnostics: :class:`ProxyDiagnostics` of the last step (device arrays).
    """

    capabilities = SolverCapabilities(coordinates=Coordinates.MAXIMAL, collision_pipeline=True)

    lagged_extrapolation: float = 0.6
    """Weight ``b`` of the lagged-mode feedback predictor: the first proxy pass of a step gives the
    source ``F + b (F - F_last)`` instead of the bare lagged feedback ``F`` (``F_last``: the
    feedback one step earlier; later passes of the step give the current iterate ``F``).

    ``F`` is the destination's mean interaction force over the previous step, i.e. centred half a
    step before the start of the step the source is about to take, where a semi-implicit source
    evaluates its forces. ``b = 0`` applies it a full step late, a phase lag that acts as negative
    damping on stiff (substepped, projective) destination contacts: a box dropped on XPBD cloth
    bounces off and its rocking mode blows up. ``b = 0.5`` extrapolates ``F`` linearly to the step's
    start (no first-order lag); the default ``0.6`` adds a small phase lead, i.e. a little
    numerical damping, so that the weakly damped bounce/rocking of a body resting on a trampoline
    decays. Staggered groups ignore it. Class attribute (the reference API has no such option)."""


    @dataclasses.dataclass
    class Proxy:
        """Proxy mapping for virtual-inertia coupling.

        Args:
            source: name of the source entry that owns ``bodies`` and/or ``particles``.
            destination: name of the destination entry that receives the proxies.
            bodies: source body ids (or labels) mapped into destination proxies.
            proxy_bodies: destination body ids (default: ``bodies``). Distinct ids must name
                bodies no entry owns (virtual copies).
            joints: source joint ids (or labels) kept enabled in the destination between the proxy
                bodies: FIXED, PRISMATIC or REVOLUTE joints whose parent and child are in
                ``bodies`` (the parent may be the world); their drive targets are copied from the
                source control before each destination solve.
            proxy_joints: destination joint ids (default: ``joints``; only ``None`` or equal to
                ``joints`` is supported).
            mass_scale: factor (finite, > 0) on the source's effective body mass/inertia and
                particle mass, installed as the destination proxies' mass.
            mode: ``"lagged"`` (source begin pose and end velocity, rewound) or ``"staggered"``
                (source end pose and velocity, no rewind).
            proxy_relaxation: non-negative factor ``w`` of the feedback update
                ``w * new + (1 - w) * old`` (start value for ``"aitken"``).
            proxy_relaxation_mode: ``"fixed"`` or ``"aitken"`` (adapted from consecutive
                feedback residuals within one step).
            proxy_relaxation_min, proxy_relaxation_max: bounds of the Aitken factor.
            particles: source particle ids mapped into destination proxies.
            proxy_particles: destination particle ids (default: ``particles``).
            collision_pipeline: optional factory ``collision_pipeline(destination_view)``
                returning a pipeline (``contacts()``, ``collide(state, contacts)``) for
                proxy-local contacts, or ``None`` to use the outer contacts.
            collide_interval: refresh interval of ``collision_pipeline`` in coupled steps
                (``None``: every step); a positive integer.
        """

        source: str
        destination: str
        bodies: Sequence[int] = ()
        proxy_bodies: Sequence[int] | None = None
        joints: Sequence[int] = ()
        proxy_joints: Sequence[int] | None = None
        mass_scale: float = 1.0
        mode: str = "lagged"
        proxy_relaxation: float = 1.0
        proxy_relaxation_mode: str = "fixed"
        proxy_relaxation_min: float = 0.1
        proxy_relaxation_max: float = 1.0
        particles: Sequence[int] = ()
        proxy_particles: Sequence[int] | None = None
        collision_pipeline: Callable[[object], object | None] | None = None
        collide_interval: int | None = None

    @dataclasses.dataclass
    class Config:
        """Lagged-impulse proxy coupling configuration.

        Args:
            proxies: directed proxy mappings between solver entries.
            iterations: positive number of proxy relaxation passes per step.
        """

        proxies: Sequence[SolverCoupledProxy.Proxy]
        iterations: int = 1

    def __init__(self, model, entries: Sequence[SolverCoupled.Entry], coupling: SolverCoupledProxy.Config) -> None:
        self._groups: list[_ProxyGroup] = []
        self._step_count = 0
        super().__init__(model, entries, coupling)

    # ------------------------------------------------------------------ validation
    def _validate_coupling(self, coupling) -> None:
        name = type(self).__name__
        if not isinstance(coupling, SolverCoupledProxy.Config):
            raise TypeError(f"{name}: coupling must be a SolverCoupledProxy.Config, got {type(coupling).__name__}")
        it = coupling.iterations
        if isinstance(it, bool) or not isinstance(it, (int, np.integer)) or int(it) < 1:
            raise ValueError(f"{name}: Config.iterations must be an integer >= 1, got {it!r}")
        proxies = list(coupling.proxies or ())
        if not proxies:
            raise ValueError(f"{name}: Config.proxies must name at least one Proxy")
        for i, p in enumerate(proxies):
            if not isinstance(p, SolverCoupledProxy.Proxy):
                raise TypeError(f"{name}: proxies[{i}] must be a SolverCoupledProxy.Proxy, got {type(p).__name__}")
            if p.source == p.destination:
                raise ValueError(f"{name}: proxies[{i}]: source and destination are both {p.source!r}")
            if p.mode not in _MODES:
                raise ValueError(f"{name}: proxies[{i}]: mode must be 'lagged' or 'staggered', got {p.mode!r}")
            if p.proxy_relaxation_mode not in _RELAX_MODES:
                raise ValueError(f"{name}: proxies[{i}]: proxy_relaxation_mode must be 'fixed' or 'aitken', got "
                                 f"{p.proxy_relaxation_mode!r}")  # fmt: skip
            ms = float(p.mass_scale)
            if not (np.isfinite(ms) and ms > 0.0):
                raise ValueError(f"{name}: proxies[{i}]: mass_scale must be finite and > 0, got {p.mass_scale!r}")
            for field in ("proxy_relaxation", "proxy_relaxation_min", "proxy_relaxation_max"):
                v = float(getattr(p, field))
                if not (np.isfinite(v) and v >= 0.0):
                    raise ValueError(f"{name}: proxies[{i}]: {field} must be finite and >= 0, got "
                                     f"{getattr(p, field)!r}")  # fmt: skip
            if float(p.proxy_relaxation_min) > float(p.proxy_relaxation_max):
                raise ValueError(f"{name}: proxies[{i}]: proxy_relaxation_min > proxy_relaxation_max")
            ci = p.collide_interval
            if ci is not None and (isinstance(ci, bool) or not isinstance(ci, (int, np.integer)) or int(ci) < 1):
                raise ValueError(f"{name}: proxies[{i}]: collide_interval must be a positive integer or None, got "
                                 f"{ci!r}")  # fmt: skip
            if p.collision_pipeline is not None and not callable(p.collision_pipeline):
                raise TypeError(f"{name}: proxies[{i}]: collision_pipeline must be a factory callable(view)")
            if p.proxy_joints is not None and list(_as_list(p.proxy_joints)) != list(_as_list(p.joints)):
                raise ValueError(f"{name}: proxies[{i}]: proxy_joints must be None or equal to joints (the "
                                 "destination keeps the source joints themselves enabled between the proxy bodies; "
                                 f"distinct proxy joint ids are not supported), got joints={p.joints!r}, "
                                 f"proxy_joints={p.proxy_joints!r}")  # fmt: skip
        pairs = {(p.source, p.destination) for p in proxies}
        if len(pairs) > 1:
            raise NotImplementedError(f"{name}: every proxy must go from the same source to the same destination "
                                      f"(one (source, destination) pair); got {sorted(pairs)}")  # fmt: skip

    # ------------------------------------------------------------------ proxy resolution
    def _build_entries(self) -> None:
        self._resolve_proxies()
        super()._build_entries()

    def _resolve_proxies(self) -> None:
        """Resolve the proxy declarations against the entries and ownership (before the views)."""
        name = type(self).__name__
        names = [c.name for c in self._configs]
        m = self.model
        nb, npart = int(m.body_count or 0), int(getattr(m, "particle_count", 0) or 0)
        body_labels = list(getattr(m, "body_label", []) or [])
        self._decls = []  # per declaration: dict of resolved ids
        used_dst_b: dict[int, int] = {}
        used_dst_p: dict[int, int] = {}
        used_dst_j: dict[int, int] = {}
        for i, p in enumerate(self.coupling.proxies):
            for role in ("source", "destination"):
                if getattr(p, role) not in names:
                    raise ValueError(f"{name}: proxies[{i}]: {role} {getattr(p, role)!r} is not an entry; entries: "
                                     f"{', '.join(names)}")  # fmt: skip
            s, d = names.index(p.source), names.index(p.destination)
            cfg = self._configs[s]
            bodies = self._resolve_ids(cfg, "body", p.bodies, nb, body_labels)
            pb = bodies if p.proxy_bodies is None else self._resolve_ids(self._configs[d], "body", p.proxy_bodies, nb,
                                                                         body_labels)  # fmt: skip
            parts = self._resolve_ids(cfg, "particle", p.particles, npart, ())
            pp = parts if p.proxy_particles is None else self._resolve_ids(self._configs[d], "particle",
                                                                           p.proxy_particles, npart, ())  # fmt: skip
            if len(pb) != len(bodies):
                raise ValueError(f"{name}: proxies[{i}]: {len(bodies)} bodies but {len(pb)} proxy_bodies")
            if len(pp) != len(parts):
                raise ValueError(f"{name}: proxies[{i}]: {len(parts)} particles but {len(pp)} proxy_particles")
            if not bodies and not parts:
                raise ValueError(f"{name}: proxies[{i}] maps no body and no particle")
            for kind, ids, owner in (("body", bodies, self.body_owner), ("particle", parts, self.particle_owner)):
                for x in ids:
                    if owner[x] != s:
                        raise ValueError(f"{name}: proxies[{i}]: source {kind} {x} is not owned by entry "
                                         f"{p.source!r}")  # fmt: skip
            for kind, src_ids, dst_ids, owner, used in (("body", bodies, pb, self.body_owner, used_dst_b),
                                                        ("particle", parts, pp, self.particle_owner, used_dst_p)):
                for x, y in zip(src_ids, dst_ids):
                    if owner[y] == d:
                        raise ValueError(f"{name}: proxies[{i}]: proxy {kind} {y} is owned by the destination "
                                         f"{p.destination!r}; a proxy stands for another entry's {kind}")  # fmt: skip
                    if y != x and owner[y] >= 0:
                        raise ValueError(f"{name}: proxies[{i}]: proxy {kind} {y} (for source {kind} {x}) is owned by "
                                         f"entry {self._configs[owner[y]].name!r}; a distinct proxy must belong to "
                                         "no entry")  # fmt: skip
                    if y in used:
                        raise ValueError(f"{name}: proxy {kind} {y} is used by proxies[{used[y]}] and proxies[{i}]")
                    used[y] = i
            joints = self._resolve_proxy_joints(i, p, s, bodies, pb, used_dst_j)
            self._decls.append(dict(index=i, proxy=p, source=s, destination=d, bodies=np.asarray(bodies, np.int64),
                                    proxy_bodies=np.asarray(pb, np.int64), particles=np.asarray(parts, np.int64),
                                    proxy_particles=np.asarray(pp, np.int64),
                                    joints=np.asarray(joints, np.int64)))  # fmt: skip

    def _resolve_proxy_joints(self, i: int, p, source: int, bodies, proxy_bodies, used: dict) -> list[int]:
        """Resolve and check ``p.joints`` (proxy joints of declaration ``i``, source entry ``source``)."""
        name = type(self).__name__
        cfg = self._configs[source]
        m = self.model
        nj = int(m.joint_count or 0)
        raw = _as_list(p.joints)
        if not raw:
            return []
        joint_labels = list(getattr(m, "joint_label", []) or [])
        joints = self._resolve_ids(cfg, "joint", raw, nj, joint_labels)
        jtype = m.joint_type.numpy()
        jparent, jchild = m.joint_parent.numpy(), m.joint_child.numpy()
        to_proxy = dict(zip((int(b) for b in bodies), (int(b) for b in proxy_bodies)))
        for j in joints:
            label = f" ({joint_labels[j]!r})" if j < len(joint_labels) and joint_labels[j] else ""
            t = int(jtype[j])
            if t not in _PROXY_JOINT_TYPES:
                try:
                    tname = JointType(t).name
                except ValueError:
                    tname = str(t)
                raise ValueError(f"{name}: proxies[{i}]: joint {j}{label} has type {tname}; proxy joints must be "
                                 "FIXED, PRISMATIC or REVOLUTE")  # fmt: skip
            for role, b in (("parent", int(jparent[j])), ("child", int(jchild[j]))):
                if b < 0 and role == "parent":
                    continue
                if b not in to_proxy:
                    raise ValueError(f"{name}: proxies[{i}]: joint {j}{label}: its {role} body {b} is not one of the "
                                     "proxy's bodies; both endpoints of a proxy joint must be proxied bodies (the "
                                     "parent may be the world)")  # fmt: skip
                if to_proxy[b] != b:
                    raise ValueError(f"{name}: proxies[{i}]: joint {j}{label}: its {role} body {b} has the distinct "
                                     f"proxy body {to_proxy[b]}; proxy joints need the endpoints' proxies to be the "
                                     "source bodies themselves (proxy_bodies identity)")  # fmt: skip
            if self.joint_owner[j] != source:
                raise ValueError(f"{name}: proxies[{i}]: joint {j}{label} is not owned by the source entry "
                                 f"{cfg.name!r}")  # fmt: skip
            if j in used:
                raise ValueError(f"{name}: proxy joint {j}{label} is used by proxies[{used[j]}] and proxies[{i}]")
            used[j] = i
        return joints

    def _decls_into(self, entry_name: str):
        return [d for d in self._decls if self._configs[d["destination"]].name == entry_name]

    def _entry_proxy_body_keep_indices(self, name: str) -> set[int]:
        return {int(b) for d in self._decls_into(name) for b in d["proxy_bodies"]}

    def _entry_proxy_particle_keep_indices(self, name: str) -> set[int]:
        return {int(i) for d in self._decls_into(name) for i in d["proxy_particles"]}

    def _entry_proxy_joint_keep_indices(self, name: str) -> set[int]:
        return {int(j) for d in self._decls_into(name) for j in d["joints"]}

    def _customize_view(self, entry: SolverEntry) -> None:
        """Mark the proxies of this destination and give them ``mass_scale`` times the source's
        model mass (the source solver's effective mass replaces it once the solvers exist)."""
        view = entry.view
        m = self.model
        for d in self._decls_into(entry.name):
            f = float(d["proxy"].mass_scale)
            if len(d["proxy_bodies"]):
                view.mark_proxy_bodies(d["proxy_bodies"])
                mass = m.body_mass.numpy()[d["bodies"]].astype(np.float64) * f
                inertia = m.body_inertia.numpy()[d["bodies"]].astype(np.float64) * f
                view.set_body_inertial_properties(d["proxy_bodies"], mass, inertia)
            if len(d["proxy_particles"]) and int(getattr(view, "particle_count", 0) or 0):
                view.mark_proxy_particles(d["proxy_particles"])
                view.set_particle_mass(d["proxy_particles"], m.particle_mass.numpy()[d["particles"]] * f)

    def _iteration_restarts_possible(self) -> bool:
        return int(self.coupling.iterations) > 1

    # ------------------------------------------------------------------ setup after the solvers exist
    def _after_entries_constructed(self) -> None:
        """Install the source solvers' effective masses on the proxies, build the proxy-local
        collision pipelines."""
        for d in self._decls:
            src, dst = self._entries[d["source"]], self._entries[d["destination"]]
            f = float(d["proxy"].mass_scale)
            changed = False
            if len(d["bodies"]):
                mass, inertia = self.eval_effective_mass_block(src.name, d["bodies"])
                if np.all(np.isfinite(mass)) and np.all(mass > 0.0):
                    cur_m = dst.view.body_mass.numpy()[d["proxy_bodies"]]
                    cur_i = dst.view.body_inertia.numpy()[d["proxy_bodies"]]
                    if not (np.allclose(cur_m, mass * f, rtol=1e-6) and np.allclose(cur_i, inertia * f, rtol=1e-6)):
                        dst.view.set_body_inertial_properties(d["proxy_bodies"], mass * f, inertia * f)
                        changed = True
            if len(d["particles"]) and int(getattr(dst.view, "particle_count", 0) or 0):
                mass = self.eval_effective_mass(src.name, ENDPOINT_PARTICLE, d["particles"])
                if np.all(np.isfinite(mass)) and np.all(mass > 0.0):
                    cur = dst.view.particle_mass.numpy()[d["proxy_particles"]]
                    if not np.allclose(cur, mass * f, rtol=1e-6):
                        dst.view.set_particle_mass(d["proxy_particles"], mass * f)
                        changed = True
            if changed:
                dst.solver.notify_model_changed(ModelFlags.BODY_INERTIAL_PROPERTIES)
                dst.gravity_body = dst.gravity_particle = None

    def _after_entry_states_created(self) -> None:
        dev = self.model.device
        it = int(self.coupling.iterations)
        self.diagnostics = ProxyDiagnostics(
            proxy_feedback_change=wp.zeros(it, dtype=float, device=dev),
            proxy_feedback_norm=wp.zeros(it, dtype=float, device=dev),
            proxy_relaxation=wp.zeros(it, dtype=float, device=dev),
        )
        by_pair: dict[tuple[int, int], list] = {}
        for d in self._decls:
            by_pair.setdefault((d["source"], d["destination"]), []).append(d)
        self._groups = []
        for (s, t), decls in by_pair.items():
            self._groups.append(self._build_group(self._entries[s], self._entries[t], decls))

    def _build_group(self, src: SolverEntry, dst: SolverEntry, decls) -> _ProxyGroup:
        dev = self.model.device
        g = _ProxyGroup(source=src, destination=dst, decls=[(d["index"], d["proxy"]) for d in decls])
        modes = {d["proxy"].mode for d in decls}
        if len(modes) > 1:
            raise ValueError(f"{type(self).__name__}: proxies from {src.name!r} to {dst.name!r} mix modes "
                             f"{sorted(modes)}; one destination solve needs one mode")  # fmt: skip
        g.mode_lagged = modes.pop() == "lagged"

        def cat(key, dtype=np.int32):
            arrs = [np.asarray(d[key], dtype) for d in decls]
            return np.concatenate(arrs) if arrs else np.zeros(0, dtype)

        g.body_src, g.body_dst = cat("bodies"), cat("proxy_bodies")
        g.body_decl = np.concatenate([np.full(len(d["bodies"]), k, np.int32) for k, d in enumerate(decls)])
        has_particles = int(getattr(dst.view, "particle_count", 0) or 0) > 0
        g.particle_src = cat("particles") if has_particles else np.zeros(0, np.int32)
        g.particle_dst = cat("proxy_particles") if has_particles else np.zeros(0, np.int32)
        g.particle_decl = (np.concatenate([np.full(len(d["particles"]), k, np.int32) for k, d in enumerate(decls)])
                           if has_particles else np.zeros(0, np.int32))  # fmt: skip
        nbp, npp = len(g.body_src), len(g.particle_src)

        def i32(a):
            return wp.array(np.asarray(a, np.int32), dtype=wp.int32, device=dev)

        g.d_body_src, g.d_body_dst, g.d_body_decl = i32(g.body_src), i32(g.body_dst), i32(g.body_decl)
        g.d_particle_src, g.d_particle_dst = i32(g.particle_src), i32(g.particle_dst)
        g.d_particle_decl = i32(g.particle_decl)
        nb_view = int(dst.view.body_count or 0)
        lb = np.full(nb_view, -1, np.int32)
        lb[g.body_dst] = np.arange(nbp, dtype=np.int32)
        g.body_local_to_proxy = i32(lb)
        np_view = int(getattr(dst.view, "particle_count", 0) or 0)
        lp = np.full(np_view, -1, np.int32)
        lp[g.particle_dst] = np.arange(npp, dtype=np.int32)
        g.particle_local_to_proxy = i32(lp)
        g.body_feedback = wp.zeros(nbp, dtype=wp.spatial_vector, device=dev)
        g.body_feedback_last = wp.zeros(nbp, dtype=wp.spatial_vector, device=dev)
        g.empty_body_f = wp.zeros(0, dtype=wp.spatial_vector, device=dev)
        g.body_raw = wp.zeros(nbp, dtype=wp.spatial_vector, device=dev)
        g.body_prev_res = wp.zeros(nbp, dtype=wp.spatial_vector, device=dev)
        g.particle_feedback = wp.zeros(npp, dtype=wp.vec3, device=dev)
        g.particle_feedback_last = wp.zeros(npp, dtype=wp.vec3, device=dev)
        g.empty_particle_f = wp.zeros(0, dtype=wp.vec3, device=dev)
        g.particle_raw = wp.zeros(npp, dtype=wp.vec3, device=dev)
        g.particle_prev_res = wp.zeros(npp, dtype=wp.vec3, device=dev)
        g.body_qd_before = wp.zeros(nb_view, dtype=wp.spatial_vector, device=dev)
        g.particle_qd_before = wp.zeros(np_view, dtype=wp.vec3, device=dev)
        self._build_group_joint_rows(g, decls)
        proxies = [d["proxy"] for d in decls]
        f32 = lambda vals: wp.array(np.asarray(vals, np.float32), dtype=float, device=dev)  # noqa: E731
        g.relax_base = f32([p.proxy_relaxation for p in proxies])
        g.relax_lo = f32([p.proxy_relaxation_min for p in proxies])
        g.relax_hi = f32([p.proxy_relaxation_max for p in proxies])
        g.relax_aitken = i32([p.proxy_relaxation_mode == "aitken" for p in proxies])
        g.acc_dot = wp.zeros(len(proxies), dtype=float, device=dev)
        g.acc_sq = wp.zeros(len(proxies), dtype=float, device=dev)
        g.omega = f32([p.proxy_relaxation for p in proxies])
        # proxy-local collision: the first declaration with a factory that returns a pipeline
        for p in proxies:
            if p.collision_pipeline is None:
                continue
            pipe = p.collision_pipeline(dst.view)
            if pipe is not None:
                g.pipeline = pipe
                g.contacts = pipe.contacts() if hasattr(pipe, "contacts") else dst.view.contacts(collision_pipeline=pipe)
                g.collide_interval = int(p.collide_interval or 1)
                break
        return g

    def _build_group_joint_rows(self, g: _ProxyGroup, decls) -> None:
        """Drive-target rows of the group's proxy joints: source control rows (the shared model's
        ``joint_q_start`` / ``joint_qd_start``) and destination-local rows (the destination view's)."""
        dev = self.model.device
        parts = [np.asarray(d["joints"], np.int64) for d in decls]
        g.joints = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        sq, sqd, dq, dqd = [], [], [], []
        if len(g.joints):
            m, v = self.model, g.destination.view
            mq, mqd = m.joint_q_start.numpy(), m.joint_qd_start.numpy()
            vq, vqd = v.joint_q_start.numpy(), v.joint_qd_start.numpy()
            for j in g.joints:
                nq, nqd = int(mq[j + 1] - mq[j]), int(mqd[j + 1] - mqd[j])
                sq += range(int(mq[j]), int(mq[j]) + nq)
                dq += range(int(vq[j]), int(vq[j]) + nq)
                sqd += range(int(mqd[j]), int(mqd[j]) + nqd)
                dqd += range(int(vqd[j]), int(vqd[j]) + nqd)

        def i32(a):
            return wp.array(np.asarray(a, np.int32), dtype=wp.int32, device=dev)

        g.d_joint_q_src, g.d_joint_q_dst = i32(sq), i32(dq)
        g.d_joint_qd_src, g.d_joint_qd_dst = i32(sqd), i32(dqd)
        g.joint_rows = max(len(sq), len(sqd))

    def _copy_control(self, entry: SolverEntry, control):
        """The entry-local control (see :meth:`SolverCoupled._copy_control`); for a destination
        with proxy joints, the source control's drive targets of those joints are then copied into
        the destination-local ``joint_target_q`` / ``joint_target_qd`` rows."""
        local = super()._copy_control(entry, control)
        if local is None:
            return None
        for g in self._groups:
            if g.destination is not entry or not g.joint_rows:
                continue
            src_q = getattr(control, "joint_target_q", None)
            src_qd = getattr(control, "joint_target_qd", None)
            dst_q = getattr(local, "joint_target_q", None)
            dst_qd = getattr(local, "joint_target_qd", None)
            empty = self._empty_float()
            pair_q = (src_q, dst_q) if src_q is not None and dst_q is not None else (empty, empty)
            pair_qd = (src_qd, dst_qd) if src_qd is not None and dst_qd is not None else (empty, empty)
            if pair_q[0] is pair_q[1] and pair_qd[0] is pair_qd[1]:
                continue  # the destination reads the caller's arrays themselves
            self._launch(_copy_joint_targets_kernel, g.joint_rows,
                         (g.d_joint_q_src, g.d_joint_q_dst, g.d_joint_qd_src, g.d_joint_qd_dst,
                          pair_q[0], pair_qd[0], pair_q[1], pair_qd[1]))  # fmt: skip
        return local

    def _empty_float(self):
        e = self.__dict__.get("_empty_f32")
        if e is None:
            e = self._empty_f32 = wp.zeros(0, dtype=float, device=self.model.device)
        return e

    # ------------------------------------------------------------------ accessors
    def proxy_feedback(self, source: str | None = None, destination: str | None = None):
        """``(body_wrenches, particle_forces)``: the lagged feedback device arrays of the proxy
        group (rows in declaration order: each proxy's ``bodies`` / ``particles``)."""
        for g in self._groups:
            if (source is None or g.source.name == source) and (destination is None or g.destination.name == destination):
                return g.body_feedback, g.particle_feedback
        raise KeyError(f"{type(self).__name__}: no proxy group {source!r} -> {destination!r}")

    def proxy_contacts(self, source: str | None = None, destination: str | None = None):
        """The persistent proxy-local contact buffer of a group (``None`` without a pipeline)."""
        for g in self._groups:
            if (source is None or g.source.name == source) and (destination is None or g.destination.name == destination):
                return g.contacts
        raise KeyError(f"{type(self).__name__}: no proxy group {source!r} -> {destination!r}")

    # ------------------------------------------------------------------ stepping
    def _launch(self, kernel, dim, inputs, outputs=()) -> None:
        """A launch replayed from the coupler's launch cache (arguments packed once per set)."""
        self._replay(kernel, dim, inputs, outputs)

    def _distribute_entry(self, entry: SolverEntry, state_in) -> int:
        from .solver_coupled import _ALL_NAMES

        return self._copy_arrays(state_in, entry.state_0, _ALL_NAMES, entry.state_1)

    def _add_source_feedback(self, g: _ProxyGroup, iteration: int) -> int:
        """Add the lagged feedback (the predictor on a lagged step's first pass) to the source's
        force inputs; returns the :class:`~armillary.StateFlags` of the arrays written."""
        src = g.source
        first = int(iteration == 0)
        beta = self.lagged_extrapolation if g.mode_lagged else 0.0
        flags = 0
        two = src.state_1 is not src.state_0
        for n, attr, feedback, last, rows, flag in (
                (len(g.body_src), "body_f", g.body_feedback, g.body_feedback_last, g.d_body_src, StateFlags.BODY_F),
                (len(g.particle_src), "particle_f", g.particle_feedback, g.particle_feedback_last, g.d_particle_src,
                 StateFlags.PARTICLE_F)):  # fmt: skip
            if not n:
                continue
            fa = getattr(src.state_0, attr, None)
            fb = getattr(src.state_1, attr, None) if two else None
            empty = g.empty_body_f if attr == "body_f" else g.empty_particle_f
            fa = fa if fa is not None and fa.shape[0] else empty
            fb = fb if fb is not None and fb.shape[0] else empty
            self._launch(_source_feedback_kernel, n, (rows, feedback, last, float(beta), first, fa, fb))
            if fa.shape[0] or fb.shape[0]:
                flags |= int(flag)
        return flags

    def _sync_proxies(self, g: _ProxyGroup, state_in) -> int:
        """Write the source's pose (begin or end) and end velocity into the destination proxies."""
        src, dst = g.source, g.destination
        out = src.state_out
        flags = 0
        if len(g.body_src):
            q = state_in.body_q if g.mode_lagged else out.body_q
            self._launch(_sync_body_kernel, len(g.body_src),
                         (g.d_body_src, g.d_body_dst, q, out.body_qd, dst.state_0.body_q, dst.state_0.body_qd))
            flags |= int(StateFlags.BODY_Q | StateFlags.BODY_QD)
        if len(g.particle_src):
            q = state_in.particle_q if g.mode_lagged else out.particle_q
            self._launch(_sync_particle_kernel, len(g.particle_src),
                         (g.d_particle_src, g.d_particle_dst, q, out.particle_qd, dst.state_0.particle_q,
                          dst.state_0.particle_qd))  # fmt: skip
            flags |= int(StateFlags.PARTICLE_Q | StateFlags.PARTICLE_QD)
        return flags

    def _destination_contacts(self, g: _ProxyGroup, contacts, iteration: int):
        """The contacts of the destination solve of pass ``iteration``: the proxy-local pipeline's
        persistent buffer (refreshed on the first pass of every ``collide_interval``-th step) or
        the outer contacts filtered for the destination, then ``coupling_prepare_proxy_contacts``.

        Within one step the outer contacts filtered for the destination are unchanged after the
        first pass, so later passes reuse them unless the destination's own prepare hook might
        edit the buffer it gets; the hook is called on every pass (``contacts_freshly_detected``
        tells it what changed)."""
        dst = g.destination
        default_hook = not _overrides(dst.solver, "coupling_prepare_proxy_contacts")
        fresh = False
        if g.pipeline is not None:
            if iteration == 0 and self._step_count % g.collide_interval == 0:
                g.pipeline.collide(dst.state_0, g.contacts)
                fresh = True
            local = g.contacts
        else:
            if iteration == 0 or not default_hook:  # a solver's hook may edit the buffer it gets
                g.outer_local = self._contacts_for_entry(dst, contacts)
            local = g.outer_local
            fresh = iteration == 0
        if local is None:
            return None
        return coupling_hook(dst.solver, "coupling_prepare_proxy_contacts")(dst.state_0, local,
                                                                            contacts_freshly_detected=fresh)

    def _rewind(self, g: _ProxyGroup, dt: float) -> None:
        """Lagged rewind of the destination's proxy velocities (``coupling_rewind_proxy_body`` /
        ``_particle`` with the feedback buffer and the destination's cached gravity)."""
        dst = g.destination
        g_body, g_part = self.entry_gravity_acceleration(dst.name)
        model, st = dst.solver.model, dst.state_0
        if len(g.body_src) and int(getattr(model, "body_count", 0) or 0):
            coupling_hook(dst.solver, "coupling_rewind_proxy_body")(g.body_local_to_proxy, st, g.body_feedback,
                                                                    g_body, dt)  # fmt: skip
        if len(g.particle_src) and int(getattr(model, "particle_count", 0) or 0):
            coupling_hook(dst.solver, "coupling_rewind_proxy_particle")(g.particle_local_to_proxy, st,
                                                                        g.particle_feedback, g_part, dt)  # fmt: skip

    def _harvest(self, g: _ProxyGroup, local_contacts, dt: float) -> None:
        """Harvest the feedback of the destination step into ``body_raw`` / ``particle_raw``
        (zeroed first) through ``coupling_harvest_proxy_wrenches`` / ``_particle_forces``."""
        dst = g.destination
        st, out = dst.state_0, dst.state_out
        if len(g.body_src):
            g.body_raw.zero_()
            coupling_hook(dst.solver, "coupling_harvest_proxy_wrenches")(
                g.body_local_to_proxy, g.body_raw, body_qd_before=g.body_qd_before, state=st, state_out=out,
                contacts=local_contacts, dt=dt)
        if len(g.particle_src):
            g.particle_raw.zero_()
            coupling_hook(dst.solver, "coupling_harvest_proxy_particle_forces")(
                g.particle_local_to_proxy, g.particle_raw, particle_qd_before=g.particle_qd_before, state=st,
                state_out=out, contacts=local_contacts, dt=dt)

    def _proxy_pass(self, g: _ProxyGroup, state_in, control, contacts, dt: float, iteration: int) -> None:
        src, dst = g.source, g.destination
        restart = iteration > 0
        # 1. source step with the lagged feedback added to its force input
        flags = self._distribute_entry(src, state_in)
        flags |= self._add_source_feedback(g, iteration)
        self._notify_input_state_update(src, flags, dt=dt, iteration_restart=restart)
        self._step_entry(src, control, contacts, dt)
        # 2. destination input: shared state, proxies from the source
        flags = self._distribute_entry(dst, state_in)
        flags |= self._sync_proxies(g, state_in)
        # 3. lagged rewind
        if g.mode_lagged:
            self._rewind(g, dt)
        self._notify_input_state_update(dst, flags, dt=dt, iteration_restart=restart)
        if len(g.body_src):
            wp.copy(g.body_qd_before, dst.state_0.body_qd)
        if len(g.particle_src):
            wp.copy(g.particle_qd_before, dst.state_0.particle_qd)
        # 4. contacts, 5. destination step
        local_contacts = self._destination_contacts(g, contacts, iteration)
        self._step_entry(dst, control, local_contacts, dt, filter_contacts=False)
        # harvest
        self._harvest(g, local_contacts, dt)
        # 6. relaxation
        nd = int(g.omega.shape[0])
        if len(g.body_src):
            self._launch(_aitken_accumulate_kernel, len(g.body_src),
                         (g.body_raw, g.body_feedback, g.body_prev_res, g.d_body_decl, g.acc_dot, g.acc_sq))
        if len(g.particle_src):
            self._launch(_aitken_accumulate_kernel, len(g.particle_src),
                         (g.particle_raw, g.particle_feedback, g.particle_prev_res, g.d_particle_decl, g.acc_dot,
                          g.acc_sq))  # fmt: skip
        self._launch(_relaxation_kernel, nd,
                     (iteration, g.relax_base, g.relax_aitken, g.relax_lo, g.relax_hi, g.acc_dot, g.acc_sq, g.omega))
        diag = self.diagnostics
        if len(g.body_src):
            self._launch(_blend_kernel, len(g.body_src),
                         (g.body_raw, g.d_body_decl, g.omega, iteration, g.body_feedback, g.body_prev_res,
                          diag.proxy_feedback_change, diag.proxy_feedback_norm))  # fmt: skip
        if len(g.particle_src):
            self._launch(_blend_kernel, len(g.particle_src),
                         (g.particle_raw, g.d_particle_decl, g.omega, iteration, g.particle_feedback,
                          g.particle_prev_res, diag.proxy_feedback_change, diag.proxy_feedback_norm))  # fmt: skip
        if g is self._groups[0]:
            self._launch(_record_relaxation_kernel, 1, (g.omega, iteration, diag.proxy_relaxation))

    def _step_coupled(self, state_in, state_out, control, contacts, dt: float) -> None:
        diag = self.diagnostics
        it = int(self.coupling.iterations)
        diag.proxy_feedback_change.zero_()
        diag.proxy_feedback_norm.zero_()
        in_groups = {id(g.source) for g in self._groups} | {id(g.destination) for g in self._groups}
        # entries outside every proxy group step once, independently
        for entry in self._entries:
            if id(entry) not in in_groups:
                flags = self._distribute_entry(entry, state_in)
                self._notify_input_state_update(entry, flags, dt=dt)
                self._step_entry(entry, control, contacts, dt)
        for k in range(it):
            for g in self._groups:
                self._step_phase = f"proxy pass {k + 1} of {it} ({g.source.name!r} -> {g.destination.name!r})"
                self._proxy_pass(g, state_in, control, contacts, dt, k)
        self._launch(_sqrt_kernel, it, (diag.proxy_feedback_change,))
        self._launch(_sqrt_kernel, it, (diag.proxy_feedback_norm,))
        self._step_count += 1
        self._outputs_valid = True
        self._reconcile_state(state_in, state_out)

    # ------------------------------------------------------------------ reset
    def reset(self, state, world_mask=None, flags=None) -> None:
        """Reset ``state`` and the entry solvers (see :meth:`SolverCoupled.reset`), clear the
        lagged feedback of the selected worlds (all without a mask) and mark the proxy-local
        pipelines' contact-matching history of those worlds for invalidation at their next
        refresh. The collision cadence and the cached proxy contacts are kept."""
        super().reset(state, world_mask=world_mask, flags=flags)
        dev = self.model.device
        m = self.model
        nw = int(getattr(m, "world_count", 1) or 1)
        mask = wp.zeros(0, dtype=wp.bool, device=dev)
        if world_mask is not None:  # (world_count + 1) layout: the last entry selects global entities
            host = np.asarray(world_mask.numpy(), dtype=bool).reshape(-1)
            if len(host) == nw:
                host = np.append(host, host.any())
            mask = wp.array(host, dtype=wp.bool, device=dev)
        for g in self._groups:
            if len(g.body_src):
                wp.launch(_reset_body_feedback_kernel, dim=len(g.body_src),
                          inputs=[g.d_body_src, m.body_world, mask, g.body_feedback, g.body_prev_res,
                                  g.body_feedback_last],
                          device=dev)  # fmt: skip
            if len(g.particle_src):
                wp.launch(_reset_particle_feedback_kernel, dim=len(g.particle_src),
                          inputs=[g.d_particle_src, m.particle_world, mask, g.particle_feedback, g.particle_prev_res,
                                  g.particle_feedback_last],
                          device=dev)  # fmt: skip
            reset_matching = getattr(g.pipeline, "reset_contact_matching", None)
            if reset_matching is not None:
                reset_matching(None if world_mask is None else mask)

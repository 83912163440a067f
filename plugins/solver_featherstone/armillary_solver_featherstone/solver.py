"""``SolverFeatherstone``: articulated rigid bodies in generalized coordinates.

Composite-rigid-body mass matrix + recursive Newton-Euler bias forces + dense Cholesky per
articulation, semi-implicit Euler on the joint manifold. See :mod:`.kernels` for the math.

Why CRBA + Cholesky rather than the articulated-body algorithm: with one Warp thread per
articulation both are O(n^2)..O(n^3) in a handful of flops per DOF for the robots we run
(n <= ~40), and CRBA gives the mass matrix explicitly, which makes implicit joint damping,
implicit drives/limits (diagonal terms), mimic reduction (``T^T M T``) and kinematic locking
simple row/column edits. Measured on this CPU (benchmarks/bench_featherstone.py): a 32-link
chain steps at several thousand steps/s, so the O(n^3) factorisation is not the bottleneck.
"""

from __future__ import annotations

import warnings
import weakref
from collections import OrderedDict

import numpy as np
import warp as wp

from armillary.flags import ModelFlags
from armillary.launch import replayer, tape_recording
from armillary.sim.enums import JointType
from armillary.sim.kinematics import topology
from armillary.solvers import Coordinates, SolverBase, SolverCapabilities

from . import kernels
from . import observables as _observables

try:
    from warp._src import context as _warp_context
except ImportError:  # older Warp layouts
    from warp import context as _warp_context

__all__ = ["SolverFeatherstone"]

_FREE_LIKE = (int(JointType.FREE), int(JointType.DISTANCE))
_SCALAR = (int(JointType.PRISMATIC), int(JointType.REVOLUTE), int(JointType.D6))

_REBUILD_FLAGS = (
    ModelFlags.JOINT_PROPERTIES
    | ModelFlags.JOINT_DOF_PROPERTIES
    | ModelFlags.BODY_PROPERTIES
    | ModelFlags.BODY_INERTIAL_PROPERTIES
    | ModelFlags.JOINT_DOF_INERTIAL_PROPERTIES
    | ModelFlags.MODEL_PROPERTIES
)


_DETERMINISTIC_CONTACT_KERNEL = []


def _contact_kernel(deterministic: bool):
    """The contact kernel; with ``deterministic`` a variant compiled once with Warp's run-to-run
    deterministic atomics (CUDA)."""
    if not deterministic:
        return kernels.contact_wrench_kernel
    if not _DETERMINISTIC_CONTACT_KERNEL:
        _DETERMINISTIC_CONTACT_KERNEL.append(wp.kernel(
            kernels.contact_wrench_kernel.func,
            module="unique",
            module_options={"deterministic": wp.DeterministicMode.RUN_TO_RUN},
        ))  # fmt: skip
    return _DETERMINISTIC_CONTACT_KERNEL[0]


def _contact_inputs(contacts, overrides) -> list:
    """The arrays of ``contacts`` the contact kernel reads, in its argument order."""
    return [contacts.rigid_contact_count, contacts.rigid_contact_shape0, contacts.rigid_contact_shape1,
            contacts.rigid_contact_point0, contacts.rigid_contact_point1, contacts.rigid_contact_normal,
            contacts.rigid_contact_margin0, contacts.rigid_contact_margin1, *overrides]  # fmt: skip


def _copy_for_tape(a):
    """A copy of ``a`` for one taped step; arrays with gradients are copied with ``wp.copy``, which the
    tape records (their gradients flow back to ``a``)."""
    if a.requires_grad:
        c = wp.empty_like(a, requires_grad=True)
        wp.copy(c, a)
        return c
    return wp.clone(a)


def _joint_paths(ancestor: np.ndarray, articulation: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each joint's path to its articulation's root, itself first, as CSR ``(start, joints)``: the
    ancestor walks of the articulation kernel as plain loops (Warp's adjoint cannot run a ``while``
    loop). Joints outside every articulation have an empty path."""
    nj = len(articulation)
    rows_j, rows_k, rows_level = [], [], []
    cur = np.arange(nj)
    alive = articulation >= 0
    level = 0
    while alive.any() and level <= nj:
        idx = np.nonzero(alive)[0]
        rows_j.append(idx)
        rows_k.append(cur[idx])
        rows_level.append(np.full(len(idx), level))
        nxt = ancestor[cur[idx]]
        ok = nxt >= 0
        ok[ok] = articulation[nxt[ok]] == articulation[idx[ok]]
        cur[idx] = np.where(ok, nxt, -1)
        alive[idx] = ok
        level += 1
    j = np.concatenate(rows_j) if rows_j else np.zeros(0, np.int64)
    k = np.concatenate(rows_k) if rows_k else np.zeros(0, np.int64)
    lv = np.concatenate(rows_level) if rows_level else np.zeros(0, np.int64)
    order = np.lexsort((lv, j))
    start = np.zeros(nj + 1, np.int32)
    start[1:] = np.cumsum(np.bincount(j, minlength=nj)[:nj])
    path = k[order].astype(np.int32)
    return start, (path if len(path) else np.zeros(1, np.int32))


class _Launches:
    """The solver's plain (untaped) launches, recorded once per argument set and replayed
    (:func:`armillary.launch.replayer`), like :class:`armillary.launch.LaunchCache` but keyed by the
    identities of the array arguments (``map(id, ...)``) and the values of the scalar ones, whose
    positions the solver passes separately: for these 90-argument kernels the key is then a few
    microseconds cheaper than LaunchCache's per-argument one. Entries keep their arrays alive (an
    ``id`` cannot be reused while its entry lives); up to ``max_entries`` argument sets are kept."""

    def __init__(self, max_entries: int = 16):
        self.max_entries = int(max_entries)
        self._entries: OrderedDict = OrderedDict()

    def launch(self, kernel, dim, arrays, scalars, more_arrays, outputs, device) -> None:
        key = (id(kernel), dim, tuple(map(id, arrays)), scalars, tuple(map(id, more_arrays)), tuple(map(id, outputs)))
        entry = self._entries.get(key)
        if entry is None:
            inputs = [*arrays, *scalars, *more_arrays]
            outputs = list(outputs)
            cmd = wp.launch(kernel, dim=dim, inputs=inputs, outputs=outputs, device=device, record_cmd=True)
            run = replayer(cmd, relaunch=lambda: wp.launch(kernel, dim=dim, inputs=inputs, outputs=outputs,
                                                           device=device))  # fmt: skip
            entry = self._entries[key] = (run, inputs, outputs)
            if len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        else:
            self._entries.move_to_end(key)
        entry[0]()

    def clear(self) -> None:
        self._entries.clear()


class SolverFeatherstone(SolverBase):
    """Reduced-coordinate articulated-body solver (semi-implicit Euler on ``joint_q`` / ``joint_qd``).

    Each step (two kernel launches plus memsets of the contact accumulators, no host synchronisation):

    * rigid contacts from the :class:`~armillary.CollisionPipeline` become penalty forces
      from the shape materials (``shape_material_ke``, ``kd``, ``kf``, ``mu``; the mean of the
      two shapes), never softer than the contact-stiffness floor (``contact_time_constant``,
      below), applied as body wrenches and so mapped to joint space through the body
      Jacobians (``S^T f``), and linearly implicit: their stiffness and damping enter the
      mass matrix of the step (``J^T C J`` with ``J`` the Jacobian of the relative velocity at
      the contact: for a self-contact only the joints between its two bodies, so the step
      applies the contact law at the new velocity and the contact only dissipates) like the
      joint drives and limits;
    * per articulation (one thread each, all worlds): forward kinematics of
      ``state_in.joint_q``, bias forces by recursive Newton-Euler (gravity of the
      articulation's world: row ``w`` of ``Model.gravity``, the last row for the global world
      ``-1``; Coriolis/centrifugal, ``State.body_f`` (world wrench at the COM),
      contact wrenches, ``Control.joint_f`` (FREE joints: world wrench at the child COM)),
      the composite-rigid-body mass matrix plus ``Model.joint_armature``, joint forces, and
      a dense Cholesky solve for the joint accelerations;
    * ``qd += dt qdd``, then ``q`` from the new ``qd`` on the joint manifold (quaternions
      of BALL/FREE joints by the exponential map, renormalised); forward kinematics fills
      ``state_out.body_q`` / ``body_qd``. Nothing damps velocities behind the model's back: a
      torque-free FREE body keeps its angular momentum (Euler's equations).

    Contacts: normal force ``max(k (d - dt vn) - c vn, 0)`` at penetration ``d`` and separating
    speed ``vn``, friction a viscous law of gain ``min(kf, mu fn / |vt|)`` (the Coulomb force at
    the current slip, which the implicit step can stop but never reverse). With
    ``contact_time_constant = tau > 0`` each contact is at least as stiff as a critically damped
    spring of time constant ``tau`` on its effective mass ``m = 1 / (j^T A j)`` (``A`` the
    articulated inverse inertia of the bodies at the contact point, from the previous step):
    ``k = max(ke, m / tau^2)``, ``c = max(kd, 2 m / tau)``, ``kf = max(kf, 20 m / tau)``. So
    a robot rests at a penetration of about ``g tau^2`` (1 mm at the default 10 ms) whatever
    its mass, close to MuJoCo's default soft contacts, and its feet creep less than
    ``a tau / 20`` under a tangential load of ``a`` per unit mass; the material values apply
    where they are stiffer (light bodies: ``ke > m / tau^2``). Per-contact stiffness overrides
    (hydroelastic contacts) are used as given.

    Joint forces: ``Control.joint_f``; damping ``-joint_damping qd`` (implicit, as MuJoCo's
    Euler integrator); passive springs ``joint_stiffness (joint_rest_q - q)`` on scalar
    coordinates (PRISMATIC, REVOLUTE, D6), explicit; PD drives ``target_ke (target_q - q) +
    target_kd (target_qd - qd)`` on scalar coordinates, per ``Model.joint_target_mode``
    (NONE and POSITION_VELOCITY: both terms; POSITION: ``target_qd`` taken as 0; VELOCITY: the
    damping term only; EFFORT: none), linearly implicit in the new velocity and position,
    clamped explicitly to ``joint_effort_limit`` when they would exceed it; limits
    ``limit_ke (limit - q) - limit_kd qd`` beyond ``joint_limit_lower/upper``, implicit the
    same way, never softer than the joint-limit floor (``limit_time_constant``, below; on by
    default). BALL/FREE joints get no drive or spring (they have no scalar axis to drive).

    DISTANCE joints move in FREE coordinates; their range ``[min_distance, max_distance]`` (the first
    DOF's ``joint_limit_lower/upper``, a negative bound turns its side off) is a radial spring-damper
    on the anchor separation with the first DOF's ``joint_limit_ke/kd`` and the same floor, central
    (along the anchor line, on the joint's own 6 DOFs) and implicit in the radial direction
    (:func:`.kernels.distance_limit`).

    Mimic joints (follower ``q = c0 + c1 q_ref`` per coordinate) are solved in generalized
    coordinates: the follower DOFs are removed from the solve and their forces and inertia
    transferred to the reference (``T^T M T``, ``T^T tau``); the follower coordinates are
    then set exactly from the reference. Follower and reference must be in the same
    articulation.

    Kinematic bodies (``BodyFlags.KINEMATIC``): their joints keep the prescribed
    ``joint_qd`` (their coordinates advance by it) whatever the forces, so they act as
    infinite-mass colliders.

    Gradients (``capabilities.differentiable``): with a model finalized with
    ``requires_grad=True`` (or a state or control that requires gradients), steps recorded on a
    ``wp.Tape``, one state per step, ``tape.backward(loss)`` gives the gradients of the whole step
    (initial coordinates, controls, model parameters, contact materials). While a tape records,
    each step writes its intermediates to its own buffers (:meth:`tape_bytes_per_step`); without a
    tape the step is unchanged. Stepping a state into itself, or into a state an earlier step of the
    tape read or wrote, raises ``ValueError`` (the gradients would be wrong). See the README.

    Not simulated: bodies outside every articulation (they stay where they are and still
    collide; a one-time warning names them), loop-closing joints (not enforced: a tree solver
    has no loop constraints; a one-time warning names them), ``joint_friction`` and ``joint_enabled=False`` (a
    one-time warning when a model uses them), ``joint_velocity_limit`` (not applied; every model
    carries a default, so no warning). ROD joints are rejected.

    Args:
        model: the model to simulate.
        angular_damping: accepted (default 0.05, must be >= 0) and stored for scripts written for
            the reference engine, whose SolverFeatherstone does not apply it either: free bodies
            conserve angular momentum. Damp a FREE body with ``State.body_f`` or
            ``Control.joint_f`` if wanted.
        update_mass_matrix_interval: rebuild the mass matrix every this many steps (1 =
            every step); in between the last one is reused (forces are always current).
        friction_smoothing: speed [m/s] that regularises the slip speed ``|vt|_s = sqrt(|vt|^2 +
            s^2)`` in the friction gain ``min(kf, mu fn / |vt|_s)``; ``None`` means 0 (exact
            Coulomb cone, viscous below the speed where ``kf |vt| = mu fn``).
        use_tile_gemm: accepted for scripts written for the reference engine, where it selects
            a GPU code path; here the factorisation is always the per-articulation kernel's own,
            so it changes nothing.
        fuse_cholesky: accepted likewise; the factorisation and solve are always fused into the
            single per-articulation kernel.
        deterministic: a :class:`warp.DeterministicMode`; ``None`` (default) uses
            ``RUN_TO_RUN`` for the contact-force accumulation on CUDA (bit-identical reruns)
            and plain atomics on the CPU, which are sequential there and so deterministic.
            Pass ``wp.DeterministicMode.NOT_GUARANTEED`` for the fastest CUDA path.
        collision_pipeline: optional :class:`~armillary.CollisionPipeline` kept on the solver
            for callers that want one place to find it; ``step`` uses the ``contacts`` it is given.
        contact_time_constant: ``tau`` [s] of the contact-stiffness floor (above); 0.01 by
            default; ``0`` or ``None`` uses the shape materials alone (pure penalty contacts).
        limit_time_constant: ``tau`` [s] of the joint-limit floor, 0.02 by default (MuJoCo's
            default soft limit): beyond a limit the spring is at least a critically damped one of
            time constant ``tau`` on the DOF's mass-matrix diagonal (``ke >= M_ii / tau^2``,
            ``kd >= 2 M_ii / tau``, armature included), linearly implicit like the bare limit, so a
            violated limit is undone without overshoot whatever ``joint_limit_ke/kd`` say (the
            ant's ankles, 30 degrees out at its ``qpos0``, come back critically damped).
            ``0`` or ``None`` turns it off (``joint_limit_ke/kd`` alone).
    """

    capabilities = SolverCapabilities(
        coordinates=Coordinates.GENERALIZED,
        joint_types=frozenset(
            {
                JointType.PRISMATIC,
                JointType.REVOLUTE,
                JointType.BALL,
                JointType.FIXED,
                JointType.FREE,
                JointType.DISTANCE,
                JointType.D6,
            }
        ),
        features=frozenset(
            {
                "rigid_bodies",
                "body_forces",
                "joint_forces",
                "kinematic_bodies",
                "rigid_contacts",
                "friction",
                "joint_limits",
                "joint_drives",
                "joint_springs",
                "joint_armature",
                "joint_damping",
                "joint_limit_springs",
                "mimic_joints",
                "multiple_worlds",
                "reset_world_mask",
            }
        ),
        deterministic=True,
        collision_pipeline=True,
        differentiable=True,
    )
    SUPPORTED_OBSERVABLES = _observables.SUPPORTED_OBSERVABLES

    def __init__(
        self,
        model,
        *,
        angular_damping: float = 0.05,
        update_mass_matrix_interval: int = 1,
        friction_smoothing: float | None = None,
        use_tile_gemm: bool = False,
        fuse_cholesky: bool = True,
        deterministic=None,
        collision_pipeline=None,
        contact_time_constant: float | None = 0.01,
        limit_time_constant: float | None = 0.02,
    ):
        super().__init__(model, collision_pipeline=collision_pipeline)
        if not (float(angular_damping) >= 0.0):
            raise ValueError(f"SolverFeatherstone: angular_damping must be >= 0 [1/s], got {angular_damping!r}")
        interval = int(update_mass_matrix_interval)
        if interval != update_mass_matrix_interval or interval < 1:
            raise ValueError(
                f"SolverFeatherstone: update_mass_matrix_interval must be an integer >= 1, got {update_mass_matrix_interval!r}"
            )
        smoothing = 0.0 if friction_smoothing is None else float(friction_smoothing)
        if not smoothing >= 0.0:
            raise ValueError(f"SolverFeatherstone: friction_smoothing must be >= 0 [m/s] or None, got {friction_smoothing!r}")
        tc = 0.0 if contact_time_constant is None else float(contact_time_constant)
        if not tc >= 0.0:
            raise ValueError(
                f"SolverFeatherstone: contact_time_constant must be >= 0 [s] or None, got {contact_time_constant!r}"
            )
        self.angular_damping = float(angular_damping)  # accepted, not applied (see the class docs)
        self.contact_time_constant = tc
        ltc = 0.0 if limit_time_constant is None else float(limit_time_constant)
        if not ltc >= 0.0:
            raise ValueError(
                f"SolverFeatherstone: limit_time_constant must be >= 0 [s] or None, got {limit_time_constant!r}"
            )
        self.limit_time_constant = ltc
        self.update_mass_matrix_interval = interval
        self.friction_smoothing = smoothing
        self.use_tile_gemm = bool(use_tile_gemm)
        self.fuse_cholesky = bool(fuse_cholesky)
        if deterministic is None:
            deterministic = (
                wp.DeterministicMode.RUN_TO_RUN if wp.get_device(model.device).is_cuda else wp.config.deterministic
            )
        self.deterministic = wp.DeterministicMode(deterministic)
        self._contact_kernel = _contact_kernel(self.deterministic != wp.DeterministicMode.NOT_GUARANTEED
                                               and wp.get_device(model.device).is_cuda)  # fmt: skip
        self._warned: set[str] = set()
        self._contact_force = None
        self._contact_force_implicit = None
        self._last_state_out = None
        self._empty_override = None
        self._launches = _Launches()
        self._allocate()
        self._build_tables()

    # ------------------------------------------------------------------ setup
    def _allocate(self) -> None:
        model, dev = self.model, self.device
        nb = max(int(model.body_count), 1)
        nd = max(int(model.joint_dof_count), 1)
        na = max(int(model.articulation_count), 1)
        nmax = max(int(getattr(model, "max_dofs_per_articulation", 0) or 0), 1)
        self._S = wp.zeros(nd, dtype=wp.spatial_vector, device=dev)
        self._Ic = wp.zeros(nb, dtype=wp.spatial_matrix, device=dev)
        self._V = wp.zeros(nb, dtype=wp.spatial_vector, device=dev)
        self._A = wp.zeros(nb, dtype=wp.spatial_vector, device=dev)
        self._F = wp.zeros(nb, dtype=wp.spatial_vector, device=dev)
        self._M = wp.zeros((na, nmax, nmax), dtype=wp.float32, device=dev)
        self._L = wp.zeros((na, nmax, nmax), dtype=wp.float32, device=dev)
        self._tau = wp.zeros(nd, dtype=wp.float32, device=dev)
        self._qd_new = wp.zeros(nd, dtype=wp.float32, device=dev)
        self._step_count = wp.zeros(na, dtype=wp.int32, device=dev)
        self._body_f_contact = wp.zeros(nb, dtype=wp.spatial_vector, device=dev)
        self._body_K_contact = wp.zeros(nb, dtype=wp.spatial_matrix, device=dev)
        self._Kc = wp.zeros(nb, dtype=wp.spatial_matrix, device=dev)
        self._zero_joint_f = wp.zeros(nd, dtype=wp.float32, device=dev)
        self._zero_body_f = wp.zeros(nb, dtype=wp.spatial_vector, device=dev)
        self._dof_sign = wp.zeros((1, nd), dtype=wp.float32, device=dev)  # per-DOF scratch of the self-contact terms
        # scratch of the contact floor (factorisation, per-body L^-1 J^T), allocated with the first contacts
        self._L2 = None
        self._Y = None
        self._empty_Y = wp.zeros((1, 1), dtype=wp.spatial_vector, device=dev)
        self._body_contact_flag = wp.zeros(nb, dtype=wp.int32, device=dev)
        self._body_Ainv = wp.zeros(nb, dtype=wp.spatial_matrix, device=dev)
        # True while _step_count / _body_Ainv / _M are buffers of a taped step (a tape may still read them)
        self._taped_buffers = False
        self._tape_outputs = None  # [tape (weak), its launch list's id and length, stepped states' joint_q ids]

    def _build_tables(self) -> None:
        """Host-side (construction and model changes only): per-DOF tables and one-time warnings."""
        model = self.model
        nj, nd = int(model.joint_count), int(model.joint_dof_count)
        self._topology = topology(model)
        jtype = model.joint_type.numpy() if nj else np.zeros(0, np.int32)
        jart = model.joint_articulation.numpy() if nj else np.zeros(0, np.int32)
        jparent = model.joint_parent.numpy() if nj else np.zeros(0, np.int32)
        jchild = model.joint_child.numpy() if nj else np.zeros(0, np.int32)
        q_start = model.joint_q_start.numpy() if nj else np.zeros(1, np.int32)
        qd_start = model.joint_qd_start.numpy() if nj else np.zeros(1, np.int32)
        labels = list(getattr(model, "joint_label", []) or [])

        def label(j):
            return repr(labels[j]) if j < len(labels) else f"joint {j}"

        roots = [j for j in range(nj) if jart[j] < 0 and jparent[j] < 0]
        if roots:
            j = roots[0]
            raise ValueError(
                f"SolverFeatherstone needs every tree joint in an articulation: joint {j} ({label(j)}, "
                f"{JointType(int(jtype[j])).name}) attaches body {int(jchild[j])} to the world outside any "
                f"articulation ({len(roots)} such joint(s)). Call ModelBuilder.add_articulation() for it."
            )
        loops = [j for j in range(nj) if jart[j] < 0 and jparent[j] >= 0]
        if loops:
            self._warn_once(
                "loops",
                f"SolverFeatherstone does not enforce loop-closing joints; ignoring {len(loops)}: "
                + ", ".join(f"{j} ({label(j)})" for j in loops[:10]) + (" ..." if len(loops) > 10 else ""),
            )
        nb = int(model.body_count)
        articulated = np.zeros(nb, dtype=bool)
        if nj:
            articulated[jchild[jart >= 0]] = True
        loose = np.nonzero(~articulated)[0]
        if len(loose):
            blabels = list(getattr(model, "body_label", []) or [])
            names = ", ".join(f"{int(b)} ({blabels[b]!r})" if b < len(blabels) else str(int(b)) for b in loose[:10])
            self._warn_once(
                "loose",
                f"SolverFeatherstone only moves articulated bodies; {len(loose)} body(ies) outside every articulation "
                f"stay in place (they still collide): {names}",
            )
        body_art = np.full(max(nb, 1), -1, np.int32)
        if nj:
            tree = jart >= 0
            body_art[jchild[tree]] = jart[tree]
        self._body_articulation = wp.array(body_art, dtype=wp.int32, device=self.device)
        body_joint = np.full(max(nb, 1), -1, np.int32)
        if nj:
            body_joint[jchild[jart >= 0]] = np.nonzero(jart >= 0)[0]
        self._body_joint = wp.array(body_joint, dtype=wp.int32, device=self.device)
        path_start, path = _joint_paths(model.joint_ancestor.numpy() if nj else np.zeros(0, np.int32), jart)
        self._joint_path_start = wp.array(path_start, dtype=wp.int32, device=self.device)
        self._joint_path = wp.array(path, dtype=wp.int32, device=self.device)
        self._build_pair_table(body_art)
        self._copy_bodies = bool(len(loose))
        self._copy_joints = bool(loops)
        # the articulation kernel flags non-finite outputs and force inputs itself, unless some
        # outputs are copies of the inputs (loose bodies, loop joints): then the generic guard runs
        self.fuses_finite_guard = not (self._copy_bodies or self._copy_joints)
        self._refresh_finite_guard()
        if nd:
            friction = getattr(model, "joint_friction", None)
            if friction is not None and (friction.numpy() > 0).any():
                n = int((friction.numpy() > 0).sum())
                self._warn_once("joint_friction", f"SolverFeatherstone ignores joint friction (Model.joint_friction > 0 "
                                                  f"on {n} DOF(s))")  # fmt: skip
        enabled = getattr(model, "joint_enabled", None)
        if enabled is not None and nj and not enabled.numpy().all():
            self._warn_once("enabled", "SolverFeatherstone ignores joint_enabled=False (disabled joints stay rigid)")

        # per-DOF tables
        scalar = np.zeros(max(nd, 1), np.int32)
        mimic_ref = np.full(max(nd, 1), -1, np.int32)
        mimic_ref_q = np.zeros(max(nd, 1), np.int32)
        mimic_c = np.zeros((max(nd, 1), 2), np.float32)
        mimic_c[:, 1] = 1.0
        mj = getattr(model, "joint_mimic_joint", None)
        mjv = mj.numpy() if (mj is not None and nj) else np.full(nj, -1)
        mcv = model.joint_mimic_coeffs.numpy() if (mj is not None and nj) else np.zeros((nj, 2))
        for j in range(nj):
            ds, de = int(qd_start[j]), int(qd_start[j + 1])
            if int(jtype[j]) in _SCALAR:
                scalar[ds:de] = 1
            r = int(mjv[j])
            if r < 0:
                continue
            if jart[j] < 0 or jart[j] != jart[r]:
                raise ValueError(
                    f"SolverFeatherstone: mimic joint {j} ({label(j)}) and its reference joint {r} ({label(r)}) must "
                    f"belong to the same articulation (articulations {int(jart[j])} and {int(jart[r])}); use a "
                    "maximal-coordinate solver for mixed-membership mimic pairs"
                )
            rs = int(qd_start[r])
            for k in range(de - ds):
                mimic_ref[ds + k] = rs + k
                mimic_ref_q[ds + k] = int(q_start[r]) + k
                mimic_c[ds + k] = mcv[j]
        dev = self.device
        self._dof_scalar = wp.array(scalar, dtype=wp.int32, device=dev)
        self._dof_mimic_ref = wp.array(mimic_ref, dtype=wp.int32, device=dev)
        self._dof_mimic_ref_q = wp.array(mimic_ref_q, dtype=wp.int32, device=dev)
        self._dof_mimic_coeffs = wp.array(mimic_c, dtype=wp.vec2, device=dev)
        self._reset_counters()
        self._launches.clear()

    def _build_pair_table(self, body_art: np.ndarray) -> None:
        """Slots for the implicit terms of self-contacts: one per pair of bodies of one articulation
        that ``Model.shape_contact_pairs`` lets collide, sorted by (articulation, lower body, upper
        body), with each body's row (``_body_pair_first/_count``, by the lower body) for the
        contact kernel and each articulation's range (``_art_pair_start``) for the articulation
        kernel. Self-contacts of pairs outside the table fall back to per-body terms."""
        model, dev = self.model, self.device
        nb = max(int(model.body_count), 1)
        na = max(int(model.articulation_count), 1)
        # only articulations with shapes on two or more bodies can have self-contacts
        shape_body = model.shape_body.numpy() if int(model.shape_count) else np.zeros(0, np.int32)
        bodies = np.unique(shape_body[shape_body >= 0])
        arts = body_art[bodies]
        arts = arts[arts >= 0]
        pairs = np.zeros((0, 2), np.int64)
        if len(arts) and np.bincount(arts).max() >= 2:
            sp = np.asarray(model.shape_contact_pairs, dtype=np.int64).reshape(-1, 2)
            b0, b1 = shape_body[sp[:, 0]], shape_body[sp[:, 1]]
            keep = (b0 >= 0) & (b1 >= 0) & (b0 != b1)
            b0, b1 = b0[keep], b1[keep]
            keep = (body_art[b0] >= 0) & (body_art[b0] == body_art[b1])
            pairs = np.unique(np.sort(np.stack([b0[keep], b1[keep]], axis=1), axis=1), axis=0)
        art = body_art[pairs[:, 0]] if len(pairs) else np.zeros(0, np.int64)
        order = np.lexsort((pairs[:, 1], pairs[:, 0], art)) if len(pairs) else np.zeros(0, np.int64)
        pairs, art = pairs[order], art[order]
        first = np.zeros(nb, np.int32)
        count = np.zeros(nb, np.int32)
        if len(pairs):
            lo, idx, cnt = np.unique(pairs[:, 0], return_index=True, return_counts=True)
            first[lo], count[lo] = idx, cnt
        art_start = np.zeros(na + 1, np.int32)
        art_start[1:] = np.cumsum(np.bincount(art, minlength=na)[:na])
        np_pairs = max(len(pairs), 1)
        self._pair_body = wp.array(np.resize(pairs[:, 0].astype(np.int32), np_pairs), dtype=wp.int32, device=dev)
        self._pair_partner = wp.array(np.resize(pairs[:, 1].astype(np.int32), np_pairs), dtype=wp.int32, device=dev)
        self._body_pair_first = wp.array(first, dtype=wp.int32, device=dev)
        self._body_pair_count = wp.array(count, dtype=wp.int32, device=dev)
        self._art_pair_start = wp.array(art_start, dtype=wp.int32, device=dev)
        self._pair_K_contact = wp.zeros(np_pairs, dtype=wp.spatial_matrix, device=dev)

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(message, UserWarning, stacklevel=3)

    # --------------------------------------------------------------- contract
    def _contact_overrides(self, contacts):
        """Per-contact stiffness / damping / friction overrides of ``contacts`` (empty arrays when
        the buffer has none)."""
        out = []
        for name in ("rigid_contact_stiffness", "rigid_contact_damping", "rigid_contact_friction"):
            a = getattr(contacts, name, None)
            if a is None:
                a = self._empty_override
                if a is None:
                    a = self._empty_override = wp.zeros(0, dtype=float, device=self.device)
            out.append(a)
        return out

    def step(self, state_in, state_out, control, contacts, dt: float, *, observables=None) -> None:
        """Advance by ``dt`` [s]; ``observables``: a container from :meth:`observables` to fill
        (see :mod:`.observables`)."""
        if observables is not None:
            return _observables.observed_step(self, self._step, state_in, state_out, control, contacts, dt,
                                              observables)  # fmt: skip
        self._step(state_in, state_out, control, contacts, dt)

    def _wants_gradients(self, state_in, control) -> bool:
        """True while a ``wp.Tape`` records and the model, the input state or the control carries
        gradients: the step then runs on per-step buffers (see :meth:`_tape_scratch`)."""
        if not tape_recording():
            return False
        if getattr(self.model, "requires_grad", False) or getattr(state_in, "requires_grad", False):
            return True
        return control is not None and any(
            getattr(getattr(control, name, None), "requires_grad", False)
            for name in ("joint_f", "joint_target_q", "joint_target_qd")
        )

    def _tape_scratch_spec(self, use_contacts: bool, floor: bool) -> dict:
        """``name -> (shape, dtype, requires_grad)`` of the buffers :meth:`_tape_scratch` allocates."""
        nb, nd = self._Ic.shape[0], self._tau.shape[0]
        na, nmax = self._M.shape[0], self._M.shape[1]
        square = (na, nmax, nmax)
        spec = {
            "S": (nd, wp.spatial_vector, True), "Ic": (nb, wp.spatial_matrix, True),
            "Kc": (nb, wp.spatial_matrix, True), "V": (nb, wp.spatial_vector, True),
            "A": (nb, wp.spatial_vector, True), "F": (nb, wp.spatial_vector, True),
            "M": (square, float, True), "L": (square, float, True), "Lf": (square, float, True),
            "tau": (nd, float, True), "y": (nd, float, True), "qdd": (nd, float, True), "qd_new": (nd, float, True),
            "body_q_fk": (nb, wp.transform, True), "body_qd_fk": (nb, wp.spatial_vector, True),
            "step_count_out": (na, wp.int32, False),
        }  # fmt: skip
        if floor:
            spec.update(L2=(square, float, True), L2f=(square, float, True), L2inv=(square, float, True),
                        Y=((nb, nmax), wp.spatial_vector, True))  # fmt: skip
        if use_contacts:
            npairs = self._pair_K_contact.shape[0]
            spec.update(body_Ainv_out=(nb, wp.spatial_matrix, True), body_f_contact=(nb, wp.spatial_vector, True),
                        body_K_contact=(nb, wp.spatial_matrix, True), pair_K_contact=(npairs, wp.spatial_matrix, True),
                        body_contact_flag=(nb, wp.int32, False), dof_sign=((npairs, nd), float, False))  # fmt: skip
        return spec

    def _tape_scratch(self, use_contacts: bool, floor: bool) -> dict:
        """Fresh buffers for one taped step: everything the step writes and its adjoint reads back,
        so that no later step overwrites what ``tape.backward`` needs (:meth:`tape_bytes_per_step`)."""
        dev = self.device
        s = {name: wp.zeros(shape, dtype=dtype, device=dev, requires_grad=grad)
             for name, (shape, dtype, grad) in self._tape_scratch_spec(use_contacts, floor).items()}  # fmt: skip
        if not floor:  # the inverse-inertia stage does not run: placeholders
            s.update(L2=s["L"], L2f=s["L"], L2inv=s["L"], Y=self._empty_Y)
        if not use_contacts:  # the contact stage does not run: the solver's own (untouched) arrays
            s.update(body_Ainv_out=self._body_Ainv, body_f_contact=self._body_f_contact,
                     body_K_contact=self._body_K_contact, pair_K_contact=self._pair_K_contact,
                     body_contact_flag=self._body_contact_flag, dof_sign=self._dof_sign)  # fmt: skip
        return s

    def tape_bytes_per_step(self, contacts=None) -> int:
        """Bytes one step allocates while a ``wp.Tape`` records with gradients (buffers and their
        gradients, kept alive by the tape until it is reset): the step's intermediate arrays, plus
        with ``contacts`` the contact stage's and a copy of the contact arrays the step reads
        (a later ``collide`` may overwrite those before ``tape.backward``)."""
        use_contacts = contacts is not None and int(getattr(contacts, "rigid_contact_max", 0) or 0) > 0
        floor = use_contacts and self.contact_time_constant > 0.0
        total = 0
        for shape, dtype, grad in self._tape_scratch_spec(use_contacts, floor).values():
            count = int(np.prod(shape)) if isinstance(shape, tuple) else int(shape)
            total += count * wp.types.type_size_in_bytes(dtype) * (2 if grad else 1)
        if use_contacts:
            for a in _contact_inputs(contacts, self._contact_overrides(contacts)):
                total += a.capacity * (2 if a.requires_grad else 1)
        return total

    def _check_taped_states(self, state_in, state_out) -> None:
        """A taped step's adjoint reads its input state, and the next step's its output state, during
        ``tape.backward``: each step needs its own output state, not one an earlier step of the tape
        read or wrote (ping-pong states would silently give wrong gradients)."""
        if state_out is state_in:
            raise ValueError(
                "SolverFeatherstone.step: state_in is state_out while a wp.Tape records gradients; the "
                "step's adjoint reads its input after the step has overwritten it, so the gradients would be "
                "wrong. Use one State per step (model.state() for each)"
            )
        tape = _warp_context.runtime.tape
        record = self._tape_outputs
        if record is None or record[0]() is not tape or record[1] != id(tape.launches) \
                or len(tape.launches) < record[2]:  # fmt: skip
            record = self._tape_outputs = [weakref.ref(tape), id(tape.launches), 0, set()]
        key = id(state_out.joint_q)
        if key in record[3]:
            raise ValueError(
                "SolverFeatherstone.step: state_out was already the input or output of an earlier step recorded "
                "on this wp.Tape; overwriting it loses values that step's adjoint reads, so the gradients would "
                "be wrong. Use one State per step (model.state() for each), not ping-pong states"
            )
        record[3].add(key)
        record[3].add(id(state_in.joint_q))
        record[2] = len(tape.launches)

    def _detach_from_tape(self) -> None:
        """Before a plain step after taped ones: the carried buffers (step counters, the contact
        floor's inverse inertias, the mass matrix) become copies, so that this step does not write
        into buffers a tape still reads."""
        self._step_count = wp.clone(self._step_count, requires_grad=False)
        self._body_Ainv = wp.clone(self._body_Ainv, requires_grad=False)
        self._M = wp.clone(self._M, requires_grad=False)
        self._taped_buffers = False

    def _launch(self, taped: bool, kernel, dim, arrays, scalars, more_arrays, outputs) -> None:
        """Launch ``kernel`` with inputs ``arrays + scalars + more_arrays``."""
        if taped:  # fresh buffers every step: a plain launch, which the tape records
            wp.launch(kernel, dim=dim, inputs=[*arrays, *scalars, *more_arrays], outputs=outputs, device=self.device)
        else:
            self._launches.launch(kernel, dim, arrays, scalars, more_arrays, outputs, self.device)

    def _step(self, state_in, state_out, control, contacts, dt: float) -> None:
        model = self.model
        if model.articulation_count == 0:
            return
        taped = self._wants_gradients(state_in, control)
        if taped:
            self._check_taped_states(state_in, state_out)
        elif self._taped_buffers:
            self._detach_from_tape()
        if self._copy_bodies and state_out is not state_in:
            wp.copy(state_out.body_q, state_in.body_q)
            wp.copy(state_out.body_qd, state_in.body_qd)
        if self._copy_joints and state_out is not state_in:
            wp.copy(state_out.joint_q, state_in.joint_q)
            wp.copy(state_out.joint_qd, state_in.joint_qd)

        use_contacts = contacts is not None and int(getattr(contacts, "rigid_contact_max", 0) or 0) > 0
        floor = use_contacts and self.contact_time_constant > 0.0
        if floor and self._L2 is None:
            self._L2 = wp.zeros_like(self._L)
            self._Y = wp.zeros((self._Ic.shape[0], self._L.shape[1]), dtype=wp.spatial_vector, device=self.device)
        if taped:
            s = self._tape_scratch(use_contacts, floor)
        if use_contacts:
            n_max = int(contacts.rigid_contact_max)
            if self._contact_force is None or self._contact_force.shape[0] < n_max:
                dev = self.device
                self._contact_force = wp.zeros(n_max, dtype=wp.vec3, device=dev)
                self._contact_point = wp.zeros(n_max, dtype=wp.vec3, device=dev)
                self._contact_vrel = wp.zeros(n_max, dtype=wp.vec3, device=dev)
                self._contact_slope = wp.zeros(n_max, dtype=wp.vec2, device=dev)
            if taped:
                body_f_contact, body_K_contact, pair_K_contact = s["body_f_contact"], s["body_K_contact"], \
                    s["pair_K_contact"]  # fmt: skip
                body_contact_flag = s["body_contact_flag"]
                contact_arrays = [_copy_for_tape(a)
                                  for a in _contact_inputs(contacts, self._contact_overrides(contacts))]
            else:
                body_f_contact, body_K_contact, pair_K_contact = self._body_f_contact, self._body_K_contact, \
                    self._pair_K_contact  # fmt: skip
                body_contact_flag = self._body_contact_flag
                body_f_contact.zero_()
                body_K_contact.zero_()
                pair_K_contact.zero_()
                contact_arrays = _contact_inputs(contacts, self._contact_overrides(contacts))
            self._launch(
                taped,
                self._contact_kernel,
                n_max,
                [
                    model.shape_body, model.shape_material_ke, model.shape_material_kd, model.shape_material_kf,
                    model.shape_material_mu, model.body_com, model.body_inv_mass, model.body_inv_inertia,
                    model.body_flags, self._body_articulation, self._body_Ainv,
                    self._body_pair_first, self._body_pair_count, self._pair_partner,
                ],
                (self.friction_smoothing, self.contact_time_constant, float(dt)),
                [state_in.body_q, state_in.body_qd, *contact_arrays],
                [body_f_contact, self._contact_force, body_K_contact, pair_K_contact, body_contact_flag,
                 self._contact_point, self._contact_vrel, self._contact_slope],
            )  # fmt: skip
            self._last_contacts = contacts
            self._last_state_out = state_out
        else:
            body_f_contact, body_K_contact, pair_K_contact = self._body_f_contact, self._body_K_contact, \
                self._pair_K_contact  # fmt: skip
            body_contact_flag = self._body_contact_flag

        body_f = getattr(state_in, "body_f", None)
        if control is not None:
            joint_f = control.joint_f if control.joint_f is not None else self._zero_joint_f
            target_q = control.joint_target_q if control.joint_target_q is not None else model.joint_target_q
            target_qd = control.joint_target_qd if control.joint_target_qd is not None else model.joint_target_qd
        else:
            joint_f, target_q, target_qd = self._zero_joint_f, model.joint_target_q, model.joint_target_qd
        if taped:
            scratch = [s["S"], s["Ic"], s["Kc"], s["V"], s["A"], s["F"], s["M"], s["L"], s["Lf"], s["tau"], s["y"],
                       s["qdd"], s["qd_new"], s["L2"], s["L2f"], s["L2inv"], s["Y"], s["dof_sign"], s["body_q_fk"],
                       s["body_qd_fk"]]  # fmt: skip
            carried_in = [body_contact_flag, self._step_count, self._M]
            carried_out = [s["body_Ainv_out"], s["step_count_out"], self._body_contact_flag]
            copy_M = 1
        else:
            L2 = self._L2 if floor else self._L
            scratch = [self._S, self._Ic, self._Kc, self._V, self._A, self._F, self._M, self._L, self._L, self._tau,
                       self._tau, self._tau, self._qd_new, L2, L2, L2, self._Y if floor else self._empty_Y,
                       self._dof_sign, state_out.body_q, state_out.body_qd]  # fmt: skip
            carried_in = [body_contact_flag, self._step_count, self._M]
            carried_out = [self._body_Ainv, self._step_count, body_contact_flag]
            copy_M = 0
        topo = self._topology
        self._launch(
            taped,
            kernels.articulation_step_kernel,
            int(model.articulation_count),
            [
                model.articulation_start, model.articulation_end, topo.joint_order, model.joint_type,
                model.joint_parent, model.joint_child, model.joint_ancestor, model.joint_articulation,
                model.joint_world, model.joint_X_p, model.joint_X_c, model.joint_q_start, model.joint_qd_start,
                model.joint_dof_dim, model.joint_axis, model.joint_armature, model.joint_damping,
                model.joint_stiffness, model.joint_rest_q, model.joint_target_mode, model.joint_target_ke,
                model.joint_target_kd, model.joint_effort_limit, model.joint_limit_lower, model.joint_limit_upper,
                model.joint_limit_ke, model.joint_limit_kd, model.body_com, model.body_mass, model.body_inertia,
                model.body_flags, model.gravity,
                self._joint_path_start, self._joint_path, self._body_joint, self._pair_body, self._pair_partner,
                self._art_pair_start, self._dof_mimic_ref, self._dof_mimic_coeffs, self._dof_mimic_ref_q,
                self._dof_scalar,
            ],
            (float(dt), self.limit_time_constant, self.update_mass_matrix_interval, int(body_f is not None),
             int(use_contacts), int(floor), copy_M),
            [
                state_in.joint_q, state_in.joint_qd, body_f if body_f is not None else self._zero_body_f,
                body_f_contact, body_K_contact, pair_K_contact, *carried_in,
                joint_f, target_q, target_qd,
                *scratch,
            ],
            [*carried_out, state_out.joint_q, state_out.joint_qd, state_out.body_q, state_out.body_qd,
             self.nonfinite_flags],
        )  # fmt: skip
        if taped:
            self._step_count, self._M = s["step_count_out"], s["M"]
            self._body_Ainv = s["body_Ainv_out"]
            self._taped_buffers = True

    def notify_model_changed(self, flags) -> None:
        super().notify_model_changed(flags)
        if int(flags) & int(_REBUILD_FLAGS):
            self._build_tables()

    def reset(self, state, world_mask=None, flags=None) -> None:
        super().reset(state, world_mask=world_mask, flags=flags)
        self._reset_counters()

    def _reset_counters(self) -> None:
        """Zero the step counters (mass-matrix rebuilds) and the contact floor's inverse inertias
        (recomputed from the next step); buffers a tape may still read are replaced, not zeroed."""
        if self._taped_buffers:
            self._step_count = wp.zeros_like(self._step_count)
            self._body_Ainv = wp.zeros_like(self._body_Ainv)
            self._M = wp.zeros_like(self._M)
            self._taped_buffers = False
        else:
            self._step_count.zero_()
            self._body_Ainv.zero_()

    def _applied_contact_force(self, contacts, state=None):
        """The rigid-contact forces of the last step, as a ``wp.array`` of ``vec3`` (one row per contact
        slot of ``contacts``, world frame, N): the force shape 0 exerts on shape 1, as the implicit step
        applied it (the penalty force at the start of the step plus its linearisation evaluated at
        the velocities after it: ``state``, default the output state of the last ``step``). Rows past
        ``rigid_contact_count`` and contacts without force are zero. One launch, no host sync; the
        array is the solver's and is overwritten by the next call.
        """
        if self._contact_force is None:
            raise RuntimeError("SolverFeatherstone: call step() with these contacts first")
        n = int(contacts.rigid_contact_max)
        if n > self._contact_force.shape[0]:
            raise ValueError(
                f"SolverFeatherstone: contacts has rigid_contact_max={n}, but the last step "
                f"used a buffer of {self._contact_force.shape[0]} contacts"
            )
        if state is None:
            state = self._last_state_out
        force = self._contact_force_implicit
        if force is None or force.shape[0] < self._contact_force.shape[0]:
            force = self._contact_force_implicit = wp.zeros_like(self._contact_force)
        wp.launch(
            kernels.implicit_contact_force_kernel,
            dim=n,
            inputs=[self.model.shape_body, self.model.body_com, state.body_q, state.body_qd, n,
                    contacts.rigid_contact_count, contacts.rigid_contact_shape0, contacts.rigid_contact_shape1,
                    contacts.rigid_contact_normal, self._contact_force, self._contact_point, self._contact_vrel,
                    self._contact_slope],
            outputs=[force],
            device=self.device,
        )  # fmt: skip
        return force

    def update_contacts(self, contacts, state=None) -> None:
        """Fill ``contacts.force`` (and ``rigid_contact_force``) with the contact forces of the last step.

        ``contacts.force[k]`` is the world-frame spatial force ``(f, 0)`` that shape 0 exerts on
        shape 1 at the contact point (N; the moment about the contact point is zero for a
        point contact); shape 0 receives the opposite. ``f`` is the force the implicit step
        applied (the penalty force at the start of the step plus its linearisation evaluated at
        the velocities after it: ``state``, default the output state of the last ``step``).
        Soft-contact rows are zero (this solver has no particles). Requires a previous ``step``
        with these contacts.
        """
        if self._contact_force is None:
            raise RuntimeError("SolverFeatherstone.update_contacts: call step() with these contacts first")
        n = int(contacts.rigid_contact_max)
        if n > self._contact_force.shape[0]:
            raise ValueError(
                f"SolverFeatherstone.update_contacts: contacts has rigid_contact_max={n}, but the last step "
                f"used a buffer of {self._contact_force.shape[0]} contacts"
            )
        force = self._applied_contact_force(contacts, state)
        if getattr(contacts, "rigid_contact_force", None) is not None:
            wp.copy(contacts.rigid_contact_force, force, count=n)
        if getattr(contacts, "force", None) is not None:
            wp.launch(kernels.write_spatial_force, dim=contacts.force.shape[0], inputs=[force, n],
                      outputs=[contacts.force], device=self.device)  # fmt: skip

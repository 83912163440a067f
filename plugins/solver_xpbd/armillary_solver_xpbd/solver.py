"""``SolverXPBD``: eXtended Position-Based Dynamics for armillary (maximal coordinates).

Rigid bodies are integrated in ``State.body_q`` / ``State.body_qd`` and every joint is a set of
compliant positional and angular constraints between its two bodies (Müller et al. 2020,
"Detailed rigid body simulation with extended position based dynamics"); particles, springs
and cloth are position constraints on ``State.particle_q`` (Macklin et al. 2016, "XPBD").
Written from the papers; see :mod:`.kernels` for the launch structure.
"""

from __future__ import annotations

import ctypes
import types

import numpy as np
import warp as wp

from armillary.flags import ModelFlags
from armillary.launch import LaunchCache, _warp_context, replayer, tape_recording
from armillary.sim.enums import JointType
from armillary.solvers import Coordinates, SolverBase, SolverCapabilities
from armillary.solvers.observables import begin_step

from . import kernels

__all__ = ["SolverXPBD"]


def _count(model, name: str) -> int:
    return int(getattr(model, name, 0) or 0)


#: the model attributes an untaped step reads (a recorded step plan is keyed on their identity, so
#: that assigning another array to one of them records the step again)
_PLAN_MODEL_FIELDS = (
    "body_com", "body_inv_mass", "body_inv_inertia", "body_inertia", "body_flags", "body_world", "gravity",
    "shape_body", "shape_material_mu", "shape_material_mu_torsional", "shape_material_mu_rolling",
    "shape_material_restitution", "particle_radius", "particle_inv_mass", "particle_flags", "particle_world",
    "particle_mu", "spring_indices", "spring_rest_length", "spring_stiffness", "spring_damping", "joint_type",
    "joint_enabled", "joint_parent", "joint_child", "joint_X_p", "joint_X_c", "joint_q_start", "joint_qd_start",
    "joint_dof_dim", "joint_axis", "joint_limit_lower", "joint_limit_upper", "joint_target_ke", "joint_target_kd",
    "joint_stiffness", "joint_damping", "joint_rest_q", "joint_target_q", "joint_target_qd", "joint_mimic_joint",
    "joint_mimic_coeffs",
)  # fmt: skip


def _version(obj):
    """The assignment count of a State / Control / Contacts (``CheckedAttributes``), None for None."""
    return None if obj is None else getattr(obj, "__dict__", {}).get("_armillary_version", -1)


class _StepPlan:
    """The device work of one untaped step, recorded while it ran, for replay.

    An untaped step with the same ``state_in``, ``state_out``, ``control``, ``contacts`` objects
    (and the same assignment counts), ``dt``, solver settings and model arrays launches exactly the
    same kernels with the same arguments; replaying the recorded calls skips rebuilding the launch
    arguments in Python, which costs more than the kernels themselves on small CPU scenes. On the
    CPU each launch is a :func:`armillary.launch.replayer` (the packed argument block is kept); on
    other devices it is the recorded ``wp.Launch`` (capturable)."""

    __slots__ = ("objects", "versions", "settings", "model_objects", "calls", "after")

    def __init__(self, objects, versions, settings, model_objects):
        self.objects = objects
        self.versions = versions
        self.settings = settings
        self.model_objects = model_objects
        self.calls = []
        self.after = None

    def matches(self, objects, versions, settings, model_objects) -> bool:
        a = self.objects
        return (a[0] is objects[0] and a[1] is objects[1] and a[2] is objects[2] and a[3] is objects[3]
                and self.versions == versions and self.settings == settings
                and self.model_objects == model_objects)  # fmt: skip

    def launch(self, kernel, dim, inputs, outputs=(), device=None) -> None:
        """Like ``wp.launch``: run the launch now and keep it for the replays."""
        inputs, outputs = list(inputs), list(outputs)
        recorded = wp.launch(kernel, dim=dim, inputs=inputs, outputs=outputs, device=device, record_cmd=True)
        run = replayer(recorded, relaunch=lambda: wp.launch(kernel, dim=dim, inputs=inputs, outputs=outputs,
                                                            device=device))  # fmt: skip
        run()
        self.calls.append(run)

    def do(self, fn) -> None:
        """Run ``fn()`` (device work that is not a kernel launch) now and on every replay."""
        fn()
        self.calls.append(fn)

    @property
    def launch_count(self) -> int:
        return len(self.calls)


def _clone_struct(template):
    """A new instance of ``template``'s Warp struct class holding the same field values: the packed
    C struct copied byte for byte and the Python field references (arrays, gradient keep-alives)
    shared. For structs whose fields are all arrays or scalars (no nested structs)."""
    out = type(template)()
    ctype = out.__dict__["_ctype"]
    ctypes.memmove(ctypes.addressof(ctype), ctypes.addressof(template._ctype), ctypes.sizeof(ctype))
    out.__dict__.update(template.__dict__)
    out.__dict__["_ctype"] = ctype
    return out


class _TapePool:
    """Bump allocator for the arrays of one taped step: zeroed value and gradient blocks allocated
    a few at a time (one, once sized by the previous step) and handed out as array views, instead of
    two zeroed allocations per array. Every view keeps its blocks alive (the tape holds the views),
    and views never overlap, so each is as distinct as a fresh ``wp.zeros(..., requires_grad=True)``.
    Zero-size arrays are shared per (dtype, shape, gradient): they hold no values to overwrite."""

    _ALIGN = 64  # bytes: every view starts on a 64-byte boundary

    def __init__(self, device, hint_bytes: int, empties: dict):
        self.device = device
        self.hint = max(int(hint_bytes), 4096)
        self.used = 0  # bytes handed out (values; gradients take as much again)
        self._block = self._grad = None
        self._offset = self._size = 0
        self._empties = empties

    def take(self, shape, dtype, requires_grad: bool = True):
        """A zeroed array of ``shape`` and ``dtype`` (with a zeroed gradient when ``requires_grad``)."""
        shape = tuple(int(d) for d in shape)
        count = 1
        for d in shape:
            count *= d
        if count == 0:
            key = (dtype, shape, bool(requires_grad))
            out = self._empties.get(key)
            if out is None:
                out = self._empties[key] = wp.zeros(shape, dtype=dtype, device=self.device,
                                                    requires_grad=requires_grad)  # fmt: skip
            return out
        nbytes = count * wp.types.type_size_in_bytes(dtype)
        span = -(-nbytes // self._ALIGN) * self._ALIGN
        if self._block is None or self._offset + span > self._size:
            self._size = max(span, self.hint)
            self._block = wp.zeros(self._size, dtype=wp.uint8, device=self.device)
            self._grad = wp.zeros(self._size, dtype=wp.uint8, device=self.device)
            self._offset = 0
        off, self._offset = self._offset, self._offset + span
        self.used += span
        grad = None
        if requires_grad:
            grad = wp.array(ptr=self._grad.ptr + off, dtype=dtype, shape=shape, device=self.device)
            grad._armillary_block = self._grad
        out = wp.array(ptr=self._block.ptr + off, dtype=dtype, shape=shape, device=self.device, grad=grad)
        out._armillary_block = (self._block, self._grad)
        return out


class SolverXPBD(SolverBase):
    """XPBD integrator for rigid bodies (maximal coordinates), joints, contacts, particles and cloth.

    One call of :meth:`step` is one XPBD substep: predict poses from velocities, gravity (per
    world, ``Model.gravity``) and external forces (``State.body_f``, ``State.particle_f``,
    ``Control.joint_f``); run ``iterations`` rounds of constraint projection (joints, then one
    fused launch for rigid contacts, particle-shape and particle-particle contacts, springs,
    cloth triangles and bending edges); derive velocities from the pose change; optionally
    apply restitution at velocity level. ``step`` never synchronises with the host.

    Joints (PRISMATIC, REVOLUTE, BALL, FIXED, FREE, DISTANCE, D6) are constraints between the
    two joint frames ``body_q[parent] * joint_X_p`` and ``body_q[child] * joint_X_c``: locked
    directions with ``joint_*_compliance``, position limits (``joint_limit_lower/upper``, hard
    constraints), drives and passive springs (``joint_target_ke/kd``, ``joint_stiffness``,
    ``joint_damping``, targets from ``Control.joint_target_q/qd``) as one implicit PD constraint
    of compliance ``1 / (ke + ks + (kd + damping) / dt)``, and mimic relationships
    (``joint_mimic_joint``/``joint_mimic_coeffs``, PRISMATIC/REVOLUTE/D6) as a coupled
    correction of follower and reference. The locked directions of a joint (the anchor separation
    on its locked linear axes, the hinge misalignment, a fixed joint's relative rotation) are each
    one block solve with the 3x3 generalized inverse mass, a correction linear in the error.
    Joints outside articulations (loop closures) are solved like every other joint. D6 joints
    with two or three angular axes use the twist angle about each axis as its coordinate (exact
    for one axis, a small-angle approximation otherwise). BALL joints have neither limits nor
    drives here.

    Rigid contacts come from the core :class:`~armillary.CollisionPipeline` (``contacts``):
    non-penetration of the surface points ``point + margin * normal``, Coulomb friction per
    contact patch (a run of consecutive contacts of one shape pair with one normal): the
    tangential impulses of the patch, accumulated over the step, are bounded by ``mu`` times its
    accumulated normal impulses (static and sliding alike; ``mu`` is the mean of both shapes'
    ``shape_material_mu``); a patch spanning an area (a resting box face) gets one friction
    impulse at its centroid from its mean slip with the tilt-free effective mass plus a twist
    impulse, so it sticks exactly below the friction angle; point and line patches (rolling
    shapes) keep per-contact friction under the pooled bound. Torsional and rolling friction
    (``shape_material_mu_torsional`` / ``shape_material_mu_rolling`` [m]), restitution
    (``shape_material_restitution``) when ``enable_restitution``. Kinematic bodies have infinite
    mass and keep their prescribed velocity.

    Particles: particle-shape contacts (``contacts.soft_contact_*``, two-way with dynamic
    bodies, friction ``(Model.particle_mu + shape mu) / 2``), particle-particle contacts through
    a ``wp.HashGrid`` (particles not used by springs, triangles or edges; no cloth
    self-collision), springs (compliance ``1 / spring_stiffness``, damping
    ``spring_damping``), cloth triangles as three edge-length constraints of stiffness
    ``(k_mu + k_lambda) * area / rest_length^2`` (``tri_materials``; 0 means rigid) and bending
    as a distance constraint between the two vertices opposite each edge (stiffness
    ``edge_bending_properties[:, 0]``, rest distance from the initial configuration). Tetrahedra
    are not supported.

    Gradients: ``capabilities.differentiable``. Under a recording ``wp.Tape`` (the reference usage:
    ``finalize(requires_grad=True)``, one state per step) ``step`` launches the same kernels compiled
    with their adjoints (:mod:`.kernels_grad`) and writes every value a launch produces into a fresh
    array: the predicted and corrected poses of every iteration, the velocities of every pass, the
    accumulated corrections, multipliers and contact impulses of every iteration, the correction
    accumulators of every launch and, with particle contacts, a hash grid per step (the arrays are
    non-overlapping views into one zeroed value block and one zeroed gradient block per step, sized
    by the previous taped step, and the struct arguments are copies of the previous ones with only
    the changed arrays re-packed: both cut the per-step Python cost, not the memory). Nothing a later
    launch overwrites is read back by an earlier launch's adjoint; the arrays live as long as the
    tape (:attr:`tape_bytes_per_step`). A taped step reads the active rigid contact count back to
    the host (to size its contact arrays), refuses ``state_out`` arrays that this tape's steps read
    (in-place or ping-pong stepping: ``ValueError``), and computes bit for bit what the untaped step
    computes. Contacts enter as data: pass each step its own ``Contacts`` (or collide once and keep
    them unchanged) and the adjoint replays the step with the contacts it saw.

    Args:
        model: the model to simulate. Call ``armillary.eval_fk`` first when the initial body
            poses should follow ``joint_q``.
        iterations: constraint projection rounds per step.
        soft_body_relaxation: relaxation of spring, triangle and bending corrections.
        soft_contact_relaxation: relaxation of particle-shape and particle-particle contacts.
        joint_linear_relaxation: relaxation of positional joint corrections.
        joint_angular_relaxation: relaxation of angular joint corrections.
        joint_linear_compliance: compliance [m/N] of the locked linear joint directions.
        joint_angular_compliance: compliance [rad/(N m)] of the locked angular joint directions.
        rigid_contact_relaxation: relaxation of rigid contact corrections.
        rigid_contact_restitution_iterations: velocity passes of the restitution solve.
        rigid_contact_con_weighting: divide each body's contact corrections by its number of
            active contacts (better stacking; does not conserve momentum at contacts).
        angular_damping: angular velocity decay rate [1/s] applied during integration.
        enable_restitution: apply ``shape_material_restitution`` at rigid contacts.

    Attributes:
        friction_velocity_pass: number of velocity-level friction passes after the position solve
            (default 1; 0 disables): per patch, they remove the tangential contact velocity left
            by the position solve within the Coulomb budget the position-level friction left
            unused (``mu * sum(lambda_n) - sum(|lambda_t|)``).
        body_mask, particle_mask: optional ``wp.array(dtype=wp.int32)`` ownership masks
            (``None``: every entity is owned), for coupling schemes. An entity whose entry is 0
            is not integrated (``state_out`` keeps its ``state_in`` values: its owner moves it)
            and acts as an infinite-mass collider in contacts and joints.
    """

    capabilities = SolverCapabilities(
        coordinates=Coordinates.MAXIMAL,
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
                "restitution",
                "particles",
                "particle_forces",
                "particle_contacts",
                "springs",
                "cloth",
                "joint_limits",
                "joint_drives",
                "joint_springs",
                "joint_damping",
                "mimic_joints",
                "loop_joints",
                "multiple_worlds",
                "reset_world_mask",
            }
        ),
        deterministic=False,  # atomics accumulate corrections (order-dependent on GPUs)
        collision_pipeline=True,
        differentiable=True,
    )
    SUPPORTED_OBSERVABLES = frozenset({"body_qdd", "body_parent_f", "contact_f"})
    """``body_qdd``; ``contact_f`` from the accumulated contact impulses / dt (approximate, as
    :meth:`update_contacts`); ``body_parent_f`` by Newton-Euler from the step's accelerations."""

    def __init__(
        self,
        model,
        *,
        iterations: int = 2,
        soft_body_relaxation: float = 0.9,
        soft_contact_relaxation: float = 0.9,
        joint_linear_relaxation: float = 0.7,
        joint_angular_relaxation: float = 0.4,
        joint_linear_compliance: float = 0.0,
        joint_angular_compliance: float = 0.0,
        rigid_contact_relaxation: float = 0.8,
        rigid_contact_restitution_iterations: int = 2,
        rigid_contact_con_weighting: bool = True,
        angular_damping: float = 0.0,
        enable_restitution: bool = False,
    ):
        super().__init__(model)
        if int(iterations) < 1:
            raise ValueError(f"SolverXPBD: iterations must be >= 1, got {iterations!r}")
        for name, value in (
            ("soft_body_relaxation", soft_body_relaxation),
            ("soft_contact_relaxation", soft_contact_relaxation),
            ("joint_linear_relaxation", joint_linear_relaxation),
            ("joint_angular_relaxation", joint_angular_relaxation),
            ("rigid_contact_relaxation", rigid_contact_relaxation),
        ):
            if not 0.0 < float(value) <= 2.0:
                raise ValueError(f"SolverXPBD: {name} must be in (0, 2], got {value!r}")
        for name, value in (
            ("joint_linear_compliance", joint_linear_compliance),
            ("joint_angular_compliance", joint_angular_compliance),
            ("angular_damping", angular_damping),
        ):
            if not float(value) >= 0.0:
                raise ValueError(f"SolverXPBD: {name} must be >= 0, got {value!r}")
        if int(rigid_contact_restitution_iterations) < 1:
            raise ValueError(
                "SolverXPBD: rigid_contact_restitution_iterations must be >= 1, "
                f"got {rigid_contact_restitution_iterations!r}"
            )
        self.iterations = int(iterations)
        self.soft_body_relaxation = float(soft_body_relaxation)
        self.soft_contact_relaxation = float(soft_contact_relaxation)
        self.joint_linear_relaxation = float(joint_linear_relaxation)
        self.joint_angular_relaxation = float(joint_angular_relaxation)
        self.joint_linear_compliance = float(joint_linear_compliance)
        self.joint_angular_compliance = float(joint_angular_compliance)
        self.rigid_contact_relaxation = float(rigid_contact_relaxation)
        self.rigid_contact_restitution_iterations = int(rigid_contact_restitution_iterations)
        self.rigid_contact_con_weighting = bool(rigid_contact_con_weighting)
        self.angular_damping = float(angular_damping)
        self.enable_restitution = bool(enable_restitution)
        self.body_mask = None
        self.particle_mask = None
        self.friction_velocity_pass = 1

        self.body_count = _count(model, "body_count")
        self.particle_count = _count(model, "particle_count")
        self.joint_count = _count(model, "joint_count")
        self.dof_count = _count(model, "joint_dof_count")
        self._last_dt = None
        self._last_rigid_max = None
        self._allocate()
        self._build_tables()

    # ------------------------------------------------------------------ setup
    def _allocate(self) -> None:
        dev = self.device
        nb, npart = self.body_count, self.particle_count
        self._empty_i = wp.zeros(0, dtype=wp.int32, device=dev)
        self._empty_f = wp.zeros(0, dtype=float, device=dev)
        self._empty_v = wp.zeros(0, dtype=wp.vec3, device=dev)
        self._empty_t = wp.zeros(0, dtype=wp.transform, device=dev)
        self._empty_s = wp.zeros(0, dtype=wp.spatial_vector, device=dev)
        self._empty_m = wp.zeros(0, dtype=wp.mat33, device=dev)
        self._empty_i2 = wp.zeros((0, 3), dtype=wp.int32, device=dev)
        self._empty_i4 = wp.zeros((0, 4), dtype=wp.int32, device=dev)
        self._zero_count = wp.zeros(1, dtype=wp.int32, device=dev)
        self._body_q_prev = wp.zeros(nb, dtype=wp.transform, device=dev)
        self._body_qd_prev = wp.zeros(nb, dtype=wp.spatial_vector, device=dev)
        self._body_dx = wp.zeros(nb, dtype=wp.vec3, device=dev)
        self._body_dth = wp.zeros(nb, dtype=wp.vec3, device=dev)
        self._body_cnt = wp.zeros(nb, dtype=float, device=dev)
        self._body_corr_x = wp.zeros(nb, dtype=wp.vec3, device=dev)
        self._body_corr_th = wp.zeros(nb, dtype=wp.vec3, device=dev)
        self._particle_corr = wp.zeros(npart, dtype=wp.vec3, device=dev)
        self._body_f = wp.zeros(nb, dtype=wp.spatial_vector, device=dev)
        self._particle_q_prev = wp.zeros(npart, dtype=wp.vec3, device=dev)
        self._particle_qd_prev = wp.zeros(npart, dtype=wp.vec3, device=dev)
        self._particle_dx = wp.zeros(npart, dtype=wp.vec3, device=dev)
        self._particle_cnt = wp.zeros(npart, dtype=float, device=dev)
        self._dof_lambda = wp.zeros(self.dof_count, dtype=float, device=dev)
        self._body_contact_count = wp.zeros(nb, dtype=float, device=dev)
        self._soft_lambda = wp.zeros(0, dtype=float, device=dev)
        self._contact_lambda = wp.zeros(0, dtype=float, device=dev)
        self._contact_impulse = wp.zeros(0, dtype=wp.vec3, device=dev)
        self._scratch = None
        self._grid = None
        self._packed = {}
        # untaped launches of the per-step kernels whose arguments do not depend on the contacts,
        # recorded once per argument set and replayed (CPU argument packing dominates small steps)
        self._launches = LaunchCache(max_entries=64)
        # untaped steps without observables: the whole step's device work, recorded per argument set
        # (ping-pong states alternate between two) and replayed (:class:`_StepPlan`)
        self._plans = {}
        self._plan_seen = {}  # keys stepped once without a plan: the next step with one records it
        self._step_contact_impulse = self._contact_impulse
        self._step_contact_count = self._body_contact_count
        self._tape_launches = None  # the recording tape's launch list (a new list: a new recording)
        self._tape_keep = []  # per-step objects a recording tape needs alive (hash grids)
        self._tape_read = set()  # data pointers of the state_in arrays of this tape's steps
        self._tape_step_bytes = 0
        self._pool = None  # a taped step's _TapePool (None outside a taped step)
        self._tape_pool_hint = 0  # bytes of views the last taped step took
        self._tape_empties = {}  # the shared zero-size arrays of taped steps
        self._taped_structs = {}  # struct class -> (last taped instance, {field: (array, descriptor)})
        self._count_arrays = {}  # n -> the read-only one-element count array of taped snapshots
        #: bytes of the intermediate arrays (and their gradients) the last step under a recording
        #: ``wp.Tape`` allocated (0 before any); they live as long as the tape
        self.tape_bytes_per_step = 0

    def _contact_buffers(self, rigid_max: int) -> None:
        if self._contact_lambda.shape[0] != rigid_max or self._scratch is None:
            dev = self.device
            self._contact_lambda = wp.zeros(rigid_max, dtype=float, device=dev)
            self._contact_impulse = wp.zeros(rigid_max, dtype=wp.vec3, device=dev)
            # per-contact values of one iteration of the untaped contact solve
            S = kernels.ContactScratch()
            S.dl = wp.zeros(rigid_max, dtype=float, device=dev)
            S.slip = wp.zeros(rigid_max, dtype=wp.vec3, device=dev)
            S.wt = wp.zeros(rigid_max, dtype=float, device=dev)
            S.xw = wp.zeros(rigid_max, dtype=wp.vec3, device=dev)
            self._scratch = S

    def _build_tables(self) -> None:
        """Host-side (construction / notify_model_changed only): constraint tables and flags."""
        model, dev = self.model, self.device
        # joints that need a constraint pass (anything but FREE, or a mimic follower)
        self._joint_pass = False
        if self.joint_count:
            types = model.joint_type.numpy()
            mimic = model.joint_mimic_joint.numpy() if getattr(model, "joint_mimic_joint", None) is not None else None
            self._joint_pass = bool(np.any(types != int(JointType.FREE)) or (mimic is not None and np.any(mimic >= 0)))
        npart = self.particle_count
        self._spring_count = _count(model, "spring_count")
        self._tri_count = _count(model, "tri_count")
        self._edge_count = _count(model, "edge_count")
        used = np.zeros(npart, dtype=bool)
        x0 = model.particle_q.numpy().astype(np.float64) if npart else np.zeros((0, 3))
        # cloth triangles: rest edge lengths and edge stiffness
        if self._tri_count:
            tri = model.tri_indices.numpy().astype(np.int64)
            poses = model.tri_poses.numpy().astype(np.float64)
            rest = np.zeros((self._tri_count, 3))
            for t in range(self._tri_count):
                try:
                    Dm = np.linalg.inv(poses[t])
                    e1, e2 = Dm[:, 0], Dm[:, 1]
                    rest[t] = [np.linalg.norm(e1), np.linalg.norm(e2 - e1), np.linalg.norm(e2)]
                except np.linalg.LinAlgError:
                    a, b, c = x0[tri[t]]
                    rest[t] = [np.linalg.norm(b - a), np.linalg.norm(c - b), np.linalg.norm(a - c)]
            mat = model.tri_materials.numpy().astype(np.float64)
            area = model.tri_areas.numpy().astype(np.float64) if getattr(model, "tri_areas", None) is not None else None
            if area is None:
                area = 0.5 * rest[:, 0] * rest[:, 2]
            k = (mat[:, 0] + mat[:, 1])[:, None] * area[:, None] / np.maximum(rest, 1e-9) ** 2
            self._tri_rest = wp.array(rest.astype(np.float32), dtype=wp.vec3, device=dev)
            self._tri_ke = wp.array(k.astype(np.float32), dtype=wp.vec3, device=dev)
            self._tri_indices = model.tri_indices
            used[tri.ravel()] = True
        else:
            self._tri_rest, self._tri_ke, self._tri_indices = self._empty_v, self._empty_v, self._empty_i2
        if self._edge_count:
            edges = model.edge_indices.numpy().astype(np.int64)
            ok = (edges[:, 0] >= 0) & (edges[:, 1] >= 0)
            rest = np.zeros(self._edge_count)
            rest[ok] = np.linalg.norm(x0[edges[ok, 0]] - x0[edges[ok, 1]], axis=1)
            ke = model.edge_bending_properties.numpy()[:, 0].astype(np.float64) * ok
            self._edge_rest = wp.array(rest.astype(np.float32), dtype=float, device=dev)
            self._edge_ke = wp.array(ke.astype(np.float32), dtype=float, device=dev)
            self._edge_indices = model.edge_indices
            used[edges[edges >= 0]] = True
        else:
            self._edge_rest, self._edge_ke, self._edge_indices = self._empty_f, self._empty_f, self._empty_i4
        if self._spring_count:
            used[model.spring_indices.numpy().astype(np.int64)] = True
        n_soft = self._spring_count + 3 * self._tri_count + self._edge_count
        if self._soft_lambda.shape[0] != n_soft:
            self._soft_lambda = wp.zeros(n_soft, dtype=float, device=dev)
        self._particle_self = wp.array((~used).astype(np.int32) if npart else np.zeros(0, np.int32),
                                       dtype=wp.int32, device=dev)
        g = np.asarray(model.gravity.numpy(), dtype=np.float64).reshape(-1, 3) if model.gravity is not None else []
        self._gnorm = float(np.linalg.norm(g, axis=1).max()) if len(g) else 0.0
        g = np.asarray(model.gravity.numpy(), dtype=np.float64).reshape(-1, 3) if model.gravity is not None else []
        self._gnorm = float(np.linalg.norm(g, axis=1).max()) if len(g) else 0.0
        self._max_radius = float(getattr(model, "particle_max_radius", 0.0) or 0.0)
        if npart and self._max_radius <= 0.0 and getattr(model, "particle_radius", None) is not None:
            self._max_radius = float(model.particle_radius.numpy().max())
        self._use_grid = bool(npart > 1 and (~used).sum() > 1 and self._max_radius > 0.0)
        if self._use_grid and self._grid is None:
            self._grid = wp.HashGrid(128, 128, 128, device=dev)

    def notify_model_changed(self, flags) -> None:
        """Refresh the constraint tables; every other model array is read live at each step."""
        super().notify_model_changed(flags)
        self._packed.clear()
        self._taped_structs.clear()
        self._launches.clear()
        self._plans.clear()
        self._plan_seen.clear()
        value = int(flags)
        if value & int(ModelFlags.ALL):
            self._build_tables()

    # ------------------------------------------------------------------- step
    def _arr(self, value, empty):
        return empty if value is None else value

    def _packed_args(self, struct_cls, names, fields, values, cache: bool = True) -> list:
        """Launch arguments of a kernel taking its scalars then one struct of arrays (``struct_cls``,
        whose ``fields`` are among ``names``) from ``values`` (one per name, in order). The struct
        is cached per set of arrays (ping-pong states alternate between two), since packing an
        array argument costs microseconds on every CPU launch and a struct's packing is kept;
        ``cache=False`` (taped steps, whose arrays are fresh each launch) builds a new one."""
        if not cache:
            return [v for n, v in zip(names, values) if n not in fields] + [self._taped_struct(struct_cls, names,
                                                                                               fields, values)]
        key = (struct_cls,) + tuple(id(v) for n, v in zip(names, values) if n in fields)
        entry = self._packed.pop(key, None)
        if entry is None:
            A = struct_cls()
            for n, v in zip(names, values):
                if n in fields:
                    setattr(A, n, v)
            entry = (A, tuple(values))  # the values keep the arrays (and so their ids) alive
        self._packed[key] = entry  # most recently used last
        while len(self._packed) > 16:
            self._packed.pop(next(iter(self._packed)))
        return [v for n, v in zip(names, values) if n not in fields] + [entry[0]]

    def _taped_struct(self, struct_cls, names, fields, values):
        """A new ``struct_cls`` instance for one taped launch (the tape keeps it: never modified
        afterwards). It starts as a byte copy of the previous taped instance of ``struct_cls`` and
        sets only the fields whose array (or that array's descriptor, which changes when its
        gradient is allocated) differs; most fields are model arrays that every step passes."""
        prev = self._taped_structs.get(struct_cls)
        A = None
        if prev is not None:
            try:
                A = _clone_struct(prev[0])
            except (AttributeError, TypeError, ValueError):  # a Warp without these internals
                A = prev = None
        if A is None:
            A = struct_cls()
        seen = {}
        for n, v in zip(names, values):
            if n in fields:
                desc = v.__ctype__() if isinstance(v, wp.array) else None
                old = prev[1].get(n) if prev is not None else None
                if old is None or old[0] is not v or old[1] is not desc or desc is None:
                    setattr(A, n, v)
                seen[n] = (v, desc)
        self._taped_structs[struct_cls] = (A, seen)
        return A

    def _contact_args(self, values, cache: bool = True) -> list:
        """:func:`.kernels.solve_contacts_kernel` arguments from the values of
        :data:`.kernels.SOLVE_CONTACTS_ARG_NAMES`."""
        return self._packed_args(kernels.ContactArrays, kernels.SOLVE_CONTACTS_ARG_NAMES,
                                 kernels.CONTACT_ARRAY_FIELDS, values, cache)

    def _delta_args(self, values, cache: bool = True) -> list:
        """:func:`.kernels.apply_deltas_kernel` arguments from the values of
        :data:`.kernels.APPLY_DELTAS_ARG_NAMES`."""
        return self._packed_args(kernels.DeltaArrays, kernels.APPLY_DELTAS_ARG_NAMES, kernels.DELTA_ARRAY_FIELDS,
                                 values, cache)

    # ------------------------------------------------------------ taped steps
    def _fresh(self, like, requires_grad: bool = True):
        """A zeroed array shaped like ``like`` for one value of a taped step (counted in
        :attr:`tape_bytes_per_step`, gradient included)."""
        out = self._pool.take(like.shape, like.dtype, requires_grad)
        self._tape_step_bytes += out.capacity * (2 if requires_grad else 1)
        return out

    _RIGID_CONTACT_ARRAYS = ("rigid_contact_shape0", "rigid_contact_shape1", "rigid_contact_point0",
                             "rigid_contact_point1", "rigid_contact_normal", "rigid_contact_margin0",
                             "rigid_contact_margin1")  # fmt: skip
    _SOFT_CONTACT_ARRAYS = ("soft_contact_particle", "soft_contact_shape", "soft_contact_body_pos",
                            "soft_contact_normal")  # fmt: skip

    def _snapshot_contacts(self, contacts, rigid_max: int, soft_max: int):
        """A taped step's copy of the active part of ``contacts`` (the arrays the step reads; one host
        read of the two counts): ``(copy, active rigid contacts, active soft contacts)``. ``wp.copy``
        is on the tape where the contact arrays have gradients."""
        nr = min(int(contacts.rigid_contact_count.numpy()[0]), rigid_max) if rigid_max else 0
        ns = min(int(contacts.soft_contact_count.numpy()[0]), soft_max) if soft_max else 0
        snap = types.SimpleNamespace()
        for names, n in ((self._RIGID_CONTACT_ARRAYS, nr), (self._SOFT_CONTACT_ARRAYS, ns)):
            for name in names:
                src = getattr(contacts, name)
                grad = src.grad is not None
                dst = self._pool.take((n,), src.dtype, grad)
                self._tape_step_bytes += dst.capacity * (2 if grad else 1)
                if n:
                    wp.copy(dst, src, count=n)
                setattr(snap, name, dst)
        snap.rigid_contact_count = self._count_array(nr)
        snap.soft_contact_count = self._count_array(ns)
        self._tape_step_bytes += 8
        return snap, nr, ns

    def _count_array(self, n: int):
        """A one-element ``int32`` array holding ``n``, shared by the taped steps: launches only read
        it (building ``wp.array([n])`` costs more than the rest of a snapshot)."""
        out = self._count_arrays.get(n)
        if out is None:
            if len(self._count_arrays) >= 256:
                self._count_arrays.clear()
            out = self._count_arrays[n] = wp.array([n], dtype=wp.int32, device=self.device)
        return out

    def _fresh_n(self, n: int, dtype):
        """A zeroed array of ``n`` ``dtype`` values with a gradient for a taped step (counted)."""
        out = self._pool.take((n,), dtype)
        self._tape_step_bytes += 2 * out.capacity
        return out

    def _advance(self, arr):
        """A fresh copy of ``arr`` (``wp.copy`` is on the tape) that a launch adds to."""
        out = self._pool.take(arr.shape, arr.dtype)
        self._tape_step_bytes += 2 * out.capacity
        wp.copy(out, arr)
        return out

    def _fresh_accumulators(self):
        """Fresh per-launch correction accumulators (body dx, dtheta, count, particle dx, count)."""
        return (self._fresh(self._body_dx), self._fresh(self._body_dth), self._fresh(self._body_cnt),
                self._fresh(self._particle_dx), self._fresh(self._particle_cnt))  # fmt: skip

    def _check_taped_states(self, state_in, state_out) -> None:
        """Refuse a taped step that would overwrite an array an earlier launch of the same recording
        reads back in its adjoint: ``state_out`` aliasing ``state_in``, or ``state_out`` reusing the
        arrays of an earlier taped step's ``state_in`` (ping-pong states; use one state per step)."""
        tape = _warp_context.runtime.tape
        if tape.launches is not self._tape_launches:  # a new tape, or tape.reset()
            self._tape_launches = tape.launches
            self._tape_keep = []
            self._tape_read = set()
        names = ("body_q", "body_qd", "particle_q", "particle_qd")
        read = {getattr(state_in, k).ptr: k for k in names if getattr(state_in, k, None) is not None}
        for k in names:
            out = getattr(state_out, k, None)
            if out is None or out.ptr is None:
                continue
            if out.ptr in read or out.ptr in self._tape_read:
                raise ValueError(
                    f"SolverXPBD.step under a recording wp.Tape: state_out.{k} is an array that "
                    f"{'state_in' if out.ptr in read else 'an earlier step of this tape'} reads; the "
                    "adjoint would replay that step from overwritten values. Give every step its own "
                    "output state (e.g. states = [model.state(requires_grad=True) for _ in range(steps + 1)])"
                )
        self._tape_read.update(p for p in read if p is not None)

    def _loop_dim(self, n: int) -> int:
        """Thread count of a grid-stride launch over ``n`` items: one thread per item on a GPU, a
        single thread on the CPU (Warp runs CPU kernels serially, and looping inside one thread
        avoids the per-thread argument setup and keeps the item order)."""
        return 1 if self.device.is_cpu else max(int(n), 1)

    def _plan_settings(self) -> tuple:
        """The solver settings a step's launches depend on (part of a step plan's key)."""
        return (self.iterations, self.soft_body_relaxation, self.soft_contact_relaxation,
                self.joint_linear_relaxation, self.joint_angular_relaxation, self.joint_linear_compliance,
                self.joint_angular_compliance, self.rigid_contact_relaxation,
                self.rigid_contact_restitution_iterations, self.rigid_contact_con_weighting, self.angular_damping,
                self.enable_restitution, self.friction_velocity_pass, self.body_mask, self.particle_mask)  # fmt: skip

    def step(self, state_in, state_out, control, contacts, dt: float, *, observables=None) -> None:
        """Advance ``state_in`` by ``dt`` into ``state_out`` (``state_in is state_out`` is allowed,
        except while a ``wp.Tape`` records).

        ``contacts`` (from ``armillary.CollisionPipeline`` / ``Model.collide``) may be ``None``:
        then nothing collides. ``control`` may be ``None``: the model's drive targets are used
        and no joint forces are applied. ``observables``: a container from :meth:`observables`
        (``SUPPORTED_OBSERVABLES``) filled by this step.

        While a ``wp.Tape`` records, every intermediate array of the step is a fresh one (see
        "Gradients" in the class docstring), so ``tape.backward`` differentiates the step.

        An untaped step without ``observables`` replays the launches recorded by the previous step
        with the same objects, ``dt``, settings and model arrays (no Python argument building).
        """
        if observables is not None or tape_recording():
            self._step(state_in, state_out, control, contacts, dt, observables, None)
            return
        dt = float(dt)
        key = (id(state_in), id(state_out), id(control), id(contacts), dt)
        objects = (state_in, state_out, control, contacts)
        versions = (_version(state_in), _version(state_out), _version(control), _version(contacts))
        settings = self._plan_settings()
        model_objects = tuple(map(self.model.__dict__.get, _PLAN_MODEL_FIELDS))
        plan = self._plans.get(key)
        if plan is not None and plan.matches(objects, versions, settings, model_objects):
            for call in plan.calls:
                call()
            (self._step_contact_impulse, self._step_contact_count, self._last_rigid_max, self._last_dt,
             self._contact_lambda, self._contact_impulse, self._scratch) = plan.after  # fmt: skip
            return
        if plan is None and key not in self._plan_seen:
            # a first sighting (e.g. a rollout with a new state every step): recording costs more
            # than it saves unless the same arguments come back
            if len(self._plan_seen) >= 64:
                self._plan_seen.clear()
            self._plan_seen[key] = None
            self._step(state_in, state_out, control, contacts, dt, None, None)
            return
        plan = _StepPlan(objects, versions, settings, model_objects)
        self._step(state_in, state_out, control, contacts, dt, None, plan)
        # what the step leaves behind (the contact buffers are sized by the contacts' capacity)
        plan.after = (self._step_contact_impulse, self._step_contact_count, self._last_rigid_max, self._last_dt,
                      self._contact_lambda, self._contact_impulse, self._scratch)  # fmt: skip
        if len(self._plans) >= 8:
            self._plans.clear()
        self._plans[key] = plan

    def _step(self, state_in, state_out, control, contacts, dt, observables, plan) -> None:
        """One step; ``plan`` (untaped only): a :class:`_StepPlan` that runs and records every
        launch, else ``None`` (launches through the :class:`LaunchCache` or, taped, ``wp.launch``)."""
        observed = begin_step(self, observables, state_in, state_out, contacts)
        model, dev = self.model, self.device
        dt = float(dt)
        nb, npart = self.body_count, self.particle_count
        E = self
        bodies = nb > 0
        parts = npart > 0
        taped = tape_recording()
        K = kernels
        if taped:
            from . import kernels_grad as K  # the same kernels with adjoints (compiled on first use)

            self._check_taped_states(state_in, state_out)
            self._tape_step_bytes = 0
            # sized by the previous taped step: usually one value block and one gradient block
            self._pool = _TapePool(dev, self._tape_pool_hint, self._tape_empties)
        new, advance = self._fresh, self._advance  # taped only: a fresh array / a recorded copy
        launch = wp.launch if taped else self._launches.launch  # replays bypass a tape
        direct = wp.launch  # launches whose arguments change with the contacts
        if plan is not None:
            launch = direct = plan.launch

        def do(fn):
            fn() if plan is None else plan.do(fn)

        def m(name, empty):
            v = getattr(model, name, None)
            return empty if v is None else v

        body_com = m("body_com", E._empty_v) if bodies else E._empty_v
        body_inv_mass = m("body_inv_mass", E._empty_f) if bodies else E._empty_f
        body_inv_inertia = m("body_inv_inertia", E._empty_m) if bodies else E._empty_m
        body_flags = m("body_flags", E._empty_i) if bodies else E._empty_i
        body_mask = self.body_mask if self.body_mask is not None else E._empty_i
        particle_mask = self.particle_mask if self.particle_mask is not None else E._empty_i

        # ---- external body wrenches (+ Control.joint_f)
        body_f = getattr(state_in, "body_f", None) if bodies else None
        joint_f = getattr(control, "joint_f", None) if control is not None else None
        if bodies and self.joint_count and self.dof_count and joint_f is not None and joint_f.shape[0]:
            wrench = new(self._body_f) if taped else self._body_f
            if body_f is not None:
                src = body_f
                do(lambda: wp.copy(wrench, src))
            elif not taped:
                do(wrench.zero_)
            launch(
                K.joint_force_kernel, dim=self.joint_count,
                inputs=[model.joint_type, model.joint_enabled, model.joint_parent, model.joint_child,
                        model.joint_X_p, model.joint_X_c, model.joint_qd_start, model.joint_dof_dim,
                        model.joint_axis, joint_f, state_in.body_q, model.body_com],
                outputs=[wrench], device=dev,
            )  # fmt: skip
            body_f = wrench

        # ---- contacts
        rigid_max = 0
        soft_max = 0
        if contacts is not None:
            rigid_max = int(contacts.rigid_contact_shape0.shape[0]) if bodies else 0
            soft_max = int(contacts.soft_contact_particle.shape[0]) if parts else 0
        self._contact_buffers(rigid_max)
        self._last_rigid_max = rigid_max if contacts is not None else None
        observed_contacts, observed_rigid_max = contacts, rigid_max
        if taped and contacts is not None:
            # this step's own copy of the active contacts: a later collide into the same Contacts
            # must not change what this step's adjoint replays
            contacts, rigid_max, soft_max = self._snapshot_contacts(contacts, rigid_max, soft_max)

        n = max(nb, npart, rigid_max, self.dof_count, self._soft_lambda.shape[0])
        if n == 0:
            return

        use_grid = self._use_grid
        contact_dim = 0
        if contacts is not None or self._spring_count or self._tri_count or self._edge_count or use_grid:
            contact_dim = (rigid_max + soft_max + (npart if use_grid else 0) + self._spring_count
                           + self._tri_count + self._edge_count)  # fmt: skip
        joint_pass = bodies and self.joint_count and self._joint_pass
        friction_passes = self.friction_velocity_pass if rigid_max and contacts is not None else 0
        restitution_passes = (self.rigid_contact_restitution_iterations
                              if self.enable_restitution and rigid_max and contacts is not None else 0)  # fmt: skip

        # ---- where this step's values live: the solver's buffers, updated in place; while a tape
        # records, a fresh array for every value a launch produces (``new``), so that no launch
        # overwrites what an earlier launch's adjoint re-reads
        body_q_out = state_out.body_q if bodies else E._empty_t
        body_qd_out = state_out.body_qd if bodies else E._empty_s
        particle_q_out = state_out.particle_q if parts else E._empty_v
        particle_qd_out = state_out.particle_qd if parts else E._empty_v
        if taped:
            pose_stages = self.iterations * ((1 if joint_pass else 0) + (1 if contact_dim else 0))
            particle_stages = self.iterations * (1 if contact_dim else 0)
            q_prev, qd_prev = new(self._body_q_prev), new(self._body_qd_prev)
            pq_prev, pqd_prev = new(self._particle_q_prev), new(self._particle_qd_prev)
            # the contacts' multipliers and impulses (per iteration below), sized by the active contacts
            contact_lambda = self._fresh_n(rigid_max, float)
            contact_impulse = self._fresh_n(rigid_max, wp.vec3)
            dof_lambda, soft_lambda = new(self._dof_lambda), new(self._soft_lambda)
            corr_x, corr_th, pcorr = new(self._body_corr_x), new(self._body_corr_th), new(self._particle_corr)
            acc = self._fresh_accumulators()
            body_q = new(body_q_out) if pose_stages else body_q_out
            particle_q = new(particle_q_out) if particle_stages else particle_q_out
            body_qd, particle_qd = new(body_qd_out), new(particle_qd_out)  # predicted velocities
            contact_count = new(self._body_contact_count, requires_grad=False)
        else:
            q_prev, qd_prev = self._body_q_prev, self._body_qd_prev
            pq_prev, pqd_prev = self._particle_q_prev, self._particle_qd_prev
            contact_lambda, contact_impulse = self._contact_lambda, self._contact_impulse
            dof_lambda, soft_lambda = self._dof_lambda, self._soft_lambda
            corr_x, corr_th, pcorr = self._body_corr_x, self._body_corr_th, self._particle_corr
            acc = (self._body_dx, self._body_dth, self._body_cnt, self._particle_dx, self._particle_cnt)
            body_q, particle_q, body_qd, particle_qd = body_q_out, particle_q_out, body_qd_out, particle_qd_out
            contact_count = self._body_contact_count
        separate = 1 if taped else 0

        launch(
            K.integrate_kernel, dim=self._loop_dim(n),
            inputs=[nb, npart, dt, model.gravity, self.angular_damping,
                    state_in.body_q if bodies else E._empty_t, state_in.body_qd if bodies else E._empty_s,
                    self._arr(body_f, E._empty_s), body_com, body_inv_mass,
                    m("body_inertia", E._empty_m) if bodies else E._empty_m, body_inv_inertia, body_flags,
                    m("body_world", E._empty_i) if bodies else E._empty_i,
                    state_in.particle_q if parts else E._empty_v, state_in.particle_qd if parts else E._empty_v,
                    self._arr(getattr(state_in, "particle_f", None) if parts else None, E._empty_v),
                    m("particle_inv_mass", E._empty_f) if parts else E._empty_f,
                    m("particle_flags", E._empty_i) if parts else E._empty_i,
                    m("particle_world", E._empty_i) if parts else E._empty_i, body_mask, particle_mask, n,
                    self._loop_dim(n)],
            outputs=[q_prev, qd_prev, pq_prev, pqd_prev, acc[0], acc[1], acc[2], acc[3], acc[4],
                     contact_lambda, contact_impulse, dof_lambda, corr_x, corr_th, pcorr, soft_lambda,
                     body_q, body_qd, particle_q, particle_qd],
            device=dev,
        )  # fmt: skip

        grid = self._grid
        if use_grid:
            if taped:  # the adjoint queries the grid of this step: one per step, kept with the tape
                grid = wp.HashGrid(16, 16, 16, device=dev)
                self._tape_keep.append(grid)
            grid_q, grid_r = particle_q, 2.0 * self._max_radius
            do(lambda: grid.build(grid_q, radius=grid_r))

        apply_dim = max(nb, npart)
        weighting = 1 if self.rigid_contact_con_weighting else 0
        stages_left = [pose_stages, particle_stages] if taped else None

        def next_poses(with_particles):
            """(body_q, particle_q) arrays the next apply launch writes (taped: fresh, the last
            ones ``state_out``'s)."""
            if not taped:
                return body_q, particle_q
            stages_left[0] -= 1
            bq = body_q_out if stages_left[0] == 0 else new(body_q_out)
            pq = particle_q
            if with_particles:
                stages_left[1] -= 1
                pq = particle_q_out if stages_left[1] == 0 else new(particle_q_out)
            return bq, pq

        # ---- joint tables
        if joint_pass:
            tq = getattr(control, "joint_target_q", None) if control is not None else None
            tqd = getattr(control, "joint_target_qd", None) if control is not None else None
            tq = model.joint_target_q if tq is None else tq
            tqd = model.joint_target_qd if tqd is None else tqd

            def joint_inputs(bq, lam_in, lam_out):
                return [
                    dt, model.joint_type, model.joint_enabled, model.joint_parent, model.joint_child,
                    model.joint_X_p, model.joint_X_c, model.joint_q_start, model.joint_qd_start,
                    model.joint_dof_dim, model.joint_axis, model.joint_limit_lower, model.joint_limit_upper,
                    model.joint_target_ke, model.joint_target_kd, model.joint_stiffness, model.joint_damping,
                    model.joint_rest_q, tq, tqd, model.joint_mimic_joint, model.joint_mimic_coeffs, bq, q_prev,
                    body_com, body_inv_mass, body_inv_inertia, body_flags, body_mask, self.joint_linear_relaxation,
                    self.joint_angular_relaxation, self.joint_linear_compliance, self.joint_angular_compliance,
                    lam_in, lam_out,
                ]  # fmt: skip

            if not taped:
                joint_args = joint_inputs(body_q, dof_lambda, dof_lambda)

        if contact_dim:
            c = contacts
            rigid = c is not None and rigid_max > 0
            soft = c is not None and soft_max > 0
            shape_ok = _count(model, "shape_count") > 0

            def contact_inputs(bq, pq, lam_in, lam_out, imp_in, imp_out, soft_in, soft_out, a):
                return [
                    dt, rigid_max, soft_max, npart if use_grid else 0, self._spring_count, self._tri_count,
                    self._edge_count,
                    c.rigid_contact_count if rigid else E._zero_count,
                    c.rigid_contact_shape0 if rigid else E._empty_i, c.rigid_contact_shape1 if rigid else E._empty_i,
                    c.rigid_contact_point0 if rigid else E._empty_v, c.rigid_contact_point1 if rigid else E._empty_v,
                    c.rigid_contact_normal if rigid else E._empty_v,
                    c.rigid_contact_margin0 if rigid else E._empty_f, c.rigid_contact_margin1 if rigid else E._empty_f,
                    self.rigid_contact_relaxation, lam_in, imp_in, lam_out, imp_out,
                    c.soft_contact_count if soft else E._zero_count,
                    c.soft_contact_particle if soft else E._empty_i, c.soft_contact_shape if soft else E._empty_i,
                    c.soft_contact_body_pos if soft else E._empty_v, c.soft_contact_normal if soft else E._empty_v,
                    self.soft_contact_relaxation, float(getattr(model, "particle_mu", 0.5) or 0.0),
                    model.shape_body if shape_ok else E._empty_i,
                    model.shape_material_mu if shape_ok else E._empty_f,
                    self._arr(getattr(model, "shape_material_mu_torsional", None) if shape_ok else None, E._empty_f),
                    self._arr(getattr(model, "shape_material_mu_rolling", None) if shape_ok else None, E._empty_f),
                    bq, q_prev, body_com, body_inv_mass, body_inv_inertia, body_flags, body_mask,
                    grid.id if use_grid else wp.uint64(0), 1 if use_grid else 0, pq,
                    pq_prev, m("particle_radius", E._empty_f) if parts else E._empty_f,
                    m("particle_inv_mass", E._empty_f) if parts else E._empty_f,
                    m("particle_flags", E._empty_i) if parts else E._empty_i,
                    m("particle_world", E._empty_i) if parts else E._empty_i, particle_mask,
                    float(getattr(model, "particle_mu", 0.5) or 0.0), self._max_radius, self._particle_self,
                    model.spring_indices if self._spring_count else E._empty_i,
                    model.spring_rest_length if self._spring_count else E._empty_f,
                    model.spring_stiffness if self._spring_count else E._empty_f,
                    model.spring_damping if self._spring_count else E._empty_f,
                    self._tri_indices, self._tri_rest, self._tri_ke, self._edge_indices, self._edge_rest,
                    self._edge_ke, self.soft_body_relaxation, soft_in, soft_out, self._loop_dim(contact_dim),
                    a[0], a[1], a[2], a[3], a[4],
                ]  # fmt: skip

            if not taped:
                contact_args = self._contact_args(contact_inputs(
                    body_q, particle_q, contact_lambda, contact_lambda, contact_impulse, contact_impulse, soft_lambda,
                    soft_lambda, acc))  # fmt: skip

        def apply(count, with_particles, weigh, a, count_out):
            """One :func:`.kernels.apply_deltas_kernel` launch (the next poses and corrections)."""
            nonlocal body_q, particle_q, corr_x, corr_th, pcorr
            bq, pq = next_poses(with_particles)
            if taped:
                cx, cth, pc = new(corr_x), new(corr_th), (new(pcorr) if with_particles else pcorr)
            else:
                cx, cth, pc = corr_x, corr_th, pcorr
            values = [nb, count, weigh, separate, body_com, a[0], a[1], a[2], a[3], a[4], body_q, particle_q,
                      corr_x, corr_th, pcorr, count_out, bq, pq, cx, cth, pc]  # fmt: skip
            launch(K.apply_deltas_kernel, dim=apply_dim if count else nb,
                      inputs=self._delta_args(values, cache=not taped), device=dev)
            body_q, particle_q, corr_x, corr_th, pcorr = bq, pq, cx, cth, pc

        acc_used = False  # taped: the accumulators integrate_kernel zeroed serve the first launch
        for _ in range(self.iterations):
            if joint_pass:
                if taped:
                    acc = self._fresh_accumulators() if acc_used else acc
                    acc_used = True
                    dof_next = advance(dof_lambda)
                    joint_args = joint_inputs(body_q, dof_lambda, dof_next)
                    dof_lambda = dof_next
                launch(K.solve_joints_kernel, dim=self.joint_count, inputs=joint_args,
                          outputs=[acc[0], acc[1], acc[2]], device=dev)
                # each body's summed joint corrections divided by its summed shares when above 1
                apply(0, False, 1, acc, E._empty_f)
            if contact_dim:
                if taped:
                    acc = self._fresh_accumulators() if acc_used else acc
                    acc_used = True
                    lam_next, imp_next, soft_next = advance(contact_lambda), advance(contact_impulse), advance(
                        soft_lambda)
                    contact_args = self._contact_args(contact_inputs(
                        body_q, particle_q, contact_lambda, lam_next, contact_impulse, imp_next, soft_lambda, soft_next,
                        acc), cache=False)  # fmt: skip
                    contact_lambda, contact_impulse, soft_lambda = lam_next, imp_next, soft_next
                if taped:
                    direct(K.solve_contacts_kernel, dim=self._loop_dim(contact_dim), inputs=contact_args,
                           device=dev)  # fmt: skip
                else:  # the same values with less work per contact (no adjoint; updates in place)
                    direct(K.solve_contacts_fast_kernel, dim=self._loop_dim(contact_dim),
                           inputs=contact_args + [self._scratch], device=dev)  # fmt: skip
                apply(npart, True, weighting, acc, contact_count)

        vel_stages = friction_passes + restitution_passes
        qd_next = body_qd_out if not taped or vel_stages == 0 else new(body_qd_out)
        launch(
            K.update_velocities_kernel, dim=apply_dim,
            inputs=[nb, npart, dt, body_inv_mass, body_flags, qd_prev, corr_x, corr_th, pcorr,
                    m("particle_inv_mass", E._empty_f) if parts else E._empty_f,
                    m("particle_flags", E._empty_i) if parts else E._empty_i, body_mask, particle_mask,
                    body_qd, particle_qd],
            outputs=[qd_next, particle_qd_out],
            device=dev,
        )  # fmt: skip
        body_qd = qd_next

        def apply_velocity(a):
            nonlocal body_qd, vel_stages
            vel_stages -= 1
            out = body_qd_out if not taped or vel_stages == 0 else new(body_qd_out)
            launch(K.apply_velocity_deltas_kernel, dim=nb,
                      inputs=[weighting, separate, a[0], a[1], a[2], body_qd], outputs=[out], device=dev)
            body_qd = out

        for _ in range(friction_passes):
            a = self._fresh_accumulators() if taped else acc
            imp_next = advance(contact_impulse) if taped else contact_impulse
            direct(
                K.friction_velocity_kernel if taped else K.friction_velocity_fast_kernel, dim=self._loop_dim(rigid_max),
                inputs=[dt, contacts.rigid_contact_count, contacts.rigid_contact_shape0,
                        contacts.rigid_contact_shape1, contacts.rigid_contact_point0, contacts.rigid_contact_point1,
                        contacts.rigid_contact_normal, contacts.rigid_contact_margin0, contacts.rigid_contact_margin1,
                        contact_lambda, contact_impulse, imp_next, model.shape_body, model.shape_material_mu,
                        body_q, body_qd, body_com, body_inv_mass, body_inv_inertia, body_flags, body_mask,
                        self._loop_dim(rigid_max)],
                outputs=[a[0], a[1], a[2]], device=dev,
            )  # fmt: skip
            contact_impulse = imp_next
            apply_velocity(a)
            # the budget is per step: later passes only finish what the first left (see kernel)

        if restitution_passes:
            gdt = self._gnorm * dt
            for _ in range(restitution_passes):
                a = self._fresh_accumulators() if taped else acc
                direct(
                    K.restitution_kernel, dim=self._loop_dim(rigid_max),
                    inputs=[gdt, contacts.rigid_contact_count, contacts.rigid_contact_shape0,
                            contacts.rigid_contact_shape1, contacts.rigid_contact_point0,
                            contacts.rigid_contact_point1, contacts.rigid_contact_normal,
                            contacts.rigid_contact_margin0, contacts.rigid_contact_margin1, contact_lambda,
                            model.shape_body, model.shape_material_restitution, body_q, q_prev,
                            body_qd, qd_prev, body_com, body_inv_mass, body_inv_inertia,
                            body_flags, body_mask, self._loop_dim(rigid_max)],
                    outputs=[a[0], a[1], a[2]], device=dev,
                )  # fmt: skip
                apply_velocity(a)
                # only the first pass uses the start-of-step velocity as reference; later passes
                # see the corrected velocity and add nothing unless another contact undid it
        self._step_contact_impulse, self._step_contact_count = contact_impulse, contact_count
        self._last_dt = dt
        if observed is not None:
            observed.finish(state_out, dt, contact_force=self._observed_contact_force(observed_contacts,
                                                                                      observed_rigid_max, dt, K))
        if taped:
            self.tape_bytes_per_step = self._tape_step_bytes
            self._tape_pool_hint = self._pool.used
            self._pool = None

    def _observed_contact_force(self, contacts, rigid_max: int, dt: float, K=kernels):
        """The step's rigid contact forces (``spatial_vector`` rows ``(f, 0)``, f = force of shape 0
        on shape 1, as :meth:`update_contacts`) for the observables; ``None`` without contacts.
        ``K``: the kernel module of the step (:mod:`.kernels_grad` under a tape, into a fresh array)."""
        if not rigid_max or contacts is None:
            return None
        out = getattr(self, "_contact_force_obs", None)
        if K is not kernels:
            out = self._fresh_n(rigid_max, wp.spatial_vector)
        elif out is None or out.shape[0] != rigid_max:
            out = self._contact_force_obs = wp.zeros(rigid_max, dtype=wp.spatial_vector, device=self.device)
        model = self.model
        wp.launch(K.contact_force_kernel, dim=rigid_max,
                  inputs=[1.0 / (dt * dt), 1 if self.rigid_contact_con_weighting else 0,
                          contacts.rigid_contact_count, contacts.rigid_contact_shape0, contacts.rigid_contact_shape1,
                          model.shape_body, model.body_inv_mass, model.body_flags,
                          self.body_mask if self.body_mask is not None else self._empty_i,
                          self._step_contact_count, self._step_contact_impulse],
                  outputs=[out], device=self.device)  # fmt: skip
        return out

    # ------------------------------------------------------------- contact forces
    def update_contacts(self, contacts, state=None) -> None:
        """Fill ``contacts.force`` with the rigid contact forces of the last :meth:`step`.

        The values are approximate: each is the positional impulse accumulated by the contact over
        the step's iterations (plus its velocity-level friction) divided by ``dt^2`` (that is,
        impulse / dt). With ``rigid_contact_con_weighting`` the value is scaled like the applied
        correction: by ``1/N`` (``N`` the contact count of the dynamic body in the last iteration)
        or, between two dynamic bodies, by the symmetric ``2 / (N0 + N1)``, which no single scalar
        can make exact. ``force[i]`` holds ``(f, 0)``: ``f`` is the world-frame force that
        shape 0 exerts on shape 1 (normal part along ``+rigid_contact_normal`` when pushing,
        friction included); torques and soft-contact slots are zero.

        Raises:
            ValueError: ``contacts.force`` was not requested (``requested_attributes={"force"}``),
                no step has run, or ``contacts`` is not the buffer the last step used.
        """
        if getattr(contacts, "force", None) is None:
            raise ValueError(
                'update_contacts: contacts.force is None; create the Contacts with requested_attributes={"force"}'
            )
        if self._last_dt is None or self._last_rigid_max is None:
            raise ValueError("update_contacts: no step with contacts has been run yet")
        if int(contacts.rigid_contact_shape0.shape[0]) != self._last_rigid_max:
            raise ValueError("update_contacts: contacts capacity differs from the one passed to the last step()")
        n = int(contacts.force.shape[0])
        if n == 0:
            return
        model = self.model
        wp.launch(kernels.contact_force_kernel, dim=n,
                  inputs=[1.0 / (self._last_dt * self._last_dt), 1 if self.rigid_contact_con_weighting else 0,
                          contacts.rigid_contact_count, contacts.rigid_contact_shape0, contacts.rigid_contact_shape1,
                          model.shape_body, model.body_inv_mass, model.body_flags,
                          self.body_mask if self.body_mask is not None else self._empty_i,
                          self._step_contact_count, self._step_contact_impulse],
                  outputs=[contacts.force], device=self.device)  # fmt: skip

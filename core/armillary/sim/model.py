"""The finalized, device-resident description of a simulation: :class:`Model`.

Create with :meth:`armillary.ModelBuilder.finalize`. Array layout:

* per body (``body_count``): ``body_q`` (transform, world), ``body_qd`` (spatial vector
  ``(v_com, w)``, world), ``body_com`` (vec3, body frame), ``body_mass``, ``body_inv_mass``,
  ``body_inertia``/``body_inv_inertia`` (mat33 about the COM, body axes), ``body_world``,
  ``body_flags``;
* per joint (``joint_count``): ``joint_type``, ``joint_parent``, ``joint_child``,
  ``joint_X_p``, ``joint_X_c``, ``joint_world``, ``joint_articulation``, ``joint_enabled``,
  ``joint_ancestor``, ``joint_mimic_joint``, ``joint_mimic_coeffs``, ``joint_dof_dim``
  (``(joint_count, 2)``: linear, angular); ``joint_q_start``/``joint_qd_start`` have
  ``joint_count + 1`` entries;
* per coordinate (``joint_coord_count``): ``joint_q``, ``joint_target_q``, ``joint_rest_q``;
* per DOF (``joint_dof_count``): ``joint_qd``, ``joint_axis``, limits, gains, ``joint_armature``,
  ``joint_friction``, effort / velocity limits, ``joint_stiffness``, ``joint_damping``, ...;
* per shape (``shape_count``): ``shape_type``, ``shape_body``, ``shape_transform``,
  ``shape_scale``, ``shape_flags``, ``shape_world``, ``shape_collision_group``,
  ``shape_material_*``, ``shape_margin``, ``shape_gap``, ``shape_collision_radius``;
* per world: ``gravity`` (vec3, ``world_count + 1`` rows, the last for the global world -1;
  one row for a model built without worlds); ``*_world_start`` arrays have
  ``world_count + 2`` entries: the first index of each world, the end of the last world,
  and the total count (global entities may precede or follow the worlds).
"""

from __future__ import annotations

import numpy as np
import warp as wp

from .contacts import Contacts
from .control import Control
from .enums import Axis, ShapeFlags
from .state import State

from .custom_attributes import AttributeAssignment, AttributeFrequency, AttributeNamespace


def _clone(arr, requires_grad: bool):
    if arr is None:
        return None
    return wp.clone(arr, requires_grad=requires_grad)


class Model:
    """Static description of bodies, joints, shapes and worlds on one device."""

    AttributeFrequency = AttributeFrequency
    AttributeAssignment = AttributeAssignment
    AttributeNamespace = AttributeNamespace

    def __init__(self, device=None):
        self.device = wp.get_device(device)
        self.requires_grad = False
        self.world_count = 1
        self.up_axis = Axis.Z
        self.gravity = None

        self.body_count = 0
        self.joint_count = 0
        self.joint_dof_count = 0
        self.joint_coord_count = 0
        self.shape_count = 0
        self.articulation_count = 0
        self.particle_count = 0
        self.spring_count = 0
        self.tri_count = 0
        self.tet_count = 0
        self.edge_count = 0
        self.muscle_count = 0

        self.particle_q = None
        self.particle_qd = None
        self.particle_mass = None
        self.particle_inv_mass = None
        self.particle_radius = None
        self.particle_flags = None
        self.particle_world = None
        self.tri_activations = None
        self.tet_activations = None
        self.muscle_activations = None

        self.body_label: list[str] = []
        self.joint_label: list[str] = []
        self.shape_label: list[str] = []
        self.articulation_label: list[str] = []
        self.world_label: list[str] = []
        self.shape_source: list = []
        self.body_shapes: dict[int, list[int]] = {}
        self.shape_collision_filter_pairs: set[tuple[int, int]] = set()
        # (feature, source) of imported values that need a solver feature (ModelBuilder.note_authored_feature)
        self.authored_features: tuple[tuple[str, str], ...] = ()
        self.max_dofs_per_articulation = 0
        self.max_joints_per_articulation = 0
        self.rigid_contact_max = None
        self.soft_contact_max = None
        self.attribute_frequency: dict = {}
        self.attribute_assignment: dict = {}
        self._shape_contact_pairs = None
        # vectorised actuators built from ModelBuilder.add_actuator entries (actuators plugin)
        self.actuators: list = []

        self.soft_contact_ke = 1.0e3
        self.soft_contact_kd = 10.0
        self.soft_contact_kf = 1.0e3
        self.soft_contact_mu = 0.5
        self.soft_contact_restitution = 0.0

    # ------------------------------------------------------------------ factories
    def state(self, requires_grad: bool | None = None) -> State:
        """A new :class:`State` holding copies of the model's initial coordinates."""
        g = self.requires_grad if requires_grad is None else bool(requires_grad)
        s = State()
        s.requires_grad = g
        s.body_q = _clone(self.body_q, g)
        s.body_qd = _clone(self.body_qd, g)
        s.body_f = wp.zeros(self.body_count, dtype=wp.spatial_vector, device=self.device, requires_grad=g)
        s.joint_q = _clone(self.joint_q, g)
        s.joint_qd = _clone(self.joint_qd, g)
        if self.particle_count and self.particle_q is not None:
            s.particle_q = _clone(self.particle_q, g)
            s.particle_qd = _clone(self.particle_qd, g)
            s.particle_f = wp.zeros(self.particle_count, dtype=wp.vec3, device=self.device, requires_grad=g)
        self._init_custom_state(s)
        return s

    def control(self, requires_grad: bool | None = None, clone_variables: bool = True) -> Control:
        """A new :class:`Control` with zero forces and the model's drive targets."""
        g = self.requires_grad if requires_grad is None else bool(requires_grad)
        c = Control()
        dev = self.device
        c.joint_f = wp.zeros(self.joint_dof_count, dtype=wp.float32, device=dev, requires_grad=g)
        c.joint_act = wp.zeros(self.joint_dof_count, dtype=wp.float32, device=dev, requires_grad=g)
        if clone_variables:
            c.joint_target_q = _clone(self.joint_target_q, g)
            c.joint_target_qd = _clone(self.joint_target_qd, g)
            c.tri_activations = _clone(self.tri_activations, g)
            c.tet_activations = _clone(self.tet_activations, g)
            c.muscle_activations = _clone(self.muscle_activations, g)
        else:
            c.joint_target_q = self.joint_target_q
            c.joint_target_qd = self.joint_target_qd
            c.tri_activations = self.tri_activations
            c.tet_activations = self.tet_activations
            c.muscle_activations = self.muscle_activations
        self._init_custom_control(c)
        return c

    def _init_custom_state(self, state: State) -> None:  # overridden by custom attributes
        pass

    def _init_custom_control(self, control: Control) -> None:
        pass

    def _init_custom_contacts(self, contacts: Contacts) -> None:
        pass

    def contacts(self, collision_pipeline=None) -> Contacts:
        """Allocate a :class:`Contacts` buffer sized for this model.

        With a ``collision_pipeline`` its own ``contacts()`` is used; otherwise the
        rigid capacity is ``rigid_contact_max`` when set, else an estimate from the
        number of candidate shape pairs (at least 1000), and the soft capacity is
        ``particle_count * shape_count``.
        """
        if collision_pipeline is not None and hasattr(collision_pipeline, "contacts"):
            return collision_pipeline.contacts()
        rigid = self.rigid_contact_max
        if rigid is None:
            rigid = max(1000, 10 * int(len(self.shape_contact_pairs)))
        soft = self.soft_contact_max
        if soft is None:
            soft = int(self.particle_count) * int(self.shape_count)
        contacts = Contacts(int(rigid), int(soft), device=self.device, requires_grad=self.requires_grad)
        contacts.shape_count = int(self.shape_count)  # the model the buffer is for (checked by solver steps)
        self._init_custom_contacts(contacts)
        return contacts

    def collide(self, state: State, contacts: Contacts | None = None, *, collision_pipeline=None) -> Contacts:
        """Fill ``contacts`` (allocated when None) using ``collision_pipeline`` or a lazily created
        default :class:`armillary.CollisionPipeline`; returns the contacts."""
        if collision_pipeline is None:
            collision_pipeline = getattr(self, "_default_collision_pipeline", None)
            if collision_pipeline is None:
                from ..geometry import CollisionPipeline

                collision_pipeline = self._default_collision_pipeline = CollisionPipeline(self)
        if contacts is None:
            contacts = collision_pipeline.contacts()
        collision_pipeline.collide(state, contacts)
        return contacts

    # ------------------------------------------------------------------ gravity
    def set_gravity(self, gravity, world: int | None = None) -> None:
        """Set gravity [m/s^2] at run time.

        ``Model.gravity`` has one row per world and a last row for the global world ``-1``
        (a model built without worlds has one row, shared by world 0 and the global world).

        Args:
            gravity: one vector (3 numbers); or, with ``world=None``, one vector per world
                (shape ``(world_count, 3)``: the global row is kept) or per world plus the global
                world last (shape ``(world_count + 1, 3)``).
            world: ``None`` sets every row (all worlds and the global world) from a single
                vector; ``-1`` the global world; ``0..world_count - 1`` one world.

        Raises:
            ValueError: a malformed or non-finite ``gravity``, or an array with ``world`` given.
            IndexError: ``world`` out of range.

        Call ``solver.notify_model_changed(ModelFlags.MODEL_PROPERTIES)`` afterwards.
        """
        rows = int(self.gravity.shape[0])
        try:
            g = np.asarray(gravity, dtype=np.float64)
        except (TypeError, ValueError):
            g = np.asarray([float(v) for v in gravity], dtype=np.float64)
        if g.ndim == 2 and world is not None:
            raise ValueError(
                f"Model.set_gravity: world={world} needs a single gravity vector of shape (3,), got shape {g.shape}"
            )
        if g.ndim == 2:
            if g.shape not in ((self.world_count, 3), (rows, 3)):
                allowed = " or ".join(str(s) for s in dict.fromkeys([(self.world_count, 3), (rows, 3)]))
                raise ValueError(f"Model.set_gravity: expected gravity of shape (3,), {allowed}, got {g.shape}")
        elif g.shape != (3,):
            raise ValueError(f"Model.set_gravity: gravity={gravity!r} must be 3 finite numbers (got shape {g.shape})")
        if not np.all(np.isfinite(g)):
            raise ValueError(f"Model.set_gravity: gravity={gravity!r} must be finite")
        arr = self.gravity.numpy()
        if world is None:
            if g.ndim == 1:
                arr[:] = g
            else:
                arr[: g.shape[0]] = g  # (world_count, 3) keeps the global row
        else:
            w = int(world)
            if not -1 <= w < self.world_count:
                raise IndexError(
                    f"Model.set_gravity: world={world} out of range; expected -1 (global) or 0..{self.world_count - 1}"
                )
            arr[w if w >= 0 else rows - 1] = g
        self.gravity.assign(arr)

    # ------------------------------------------------------------------ collision pairs
    @property
    def shape_contact_pairs(self) -> np.ndarray:
        """Candidate shape pairs ``(a, b)``, ``a < b``, shape ``(n, 2)`` int32 (computed lazily on the host).

        A pair qualifies when both shapes collide with shapes, they are on different
        bodies and not both static, their worlds match (or one is global), their
        collision groups are compatible and the pair is not filtered.
        """
        if self._shape_contact_pairs is None:
            self._shape_contact_pairs = _contact_pairs(self)
        return self._shape_contact_pairs

    @property
    def shape_contact_pair_count(self) -> int:
        return int(len(self.shape_contact_pairs))

    def shape_collision_filter_pairs_array(self) -> np.ndarray:
        """Filter pairs as an ``(n, 2)`` int32 array sorted lexicographically."""
        if not self.shape_collision_filter_pairs:
            return np.zeros((0, 2), dtype=np.int32)
        return np.asarray(sorted(self.shape_collision_filter_pairs), dtype=np.int32)


def _groups_collide(ga: np.ndarray, gb: np.ndarray) -> np.ndarray:
    same = ga == gb
    return (ga != 0) & (gb != 0) & np.where(same, ga > 0, (ga < 0) | (gb < 0))


def _contact_pairs(model: Model) -> np.ndarray:
    n = model.shape_count
    if n < 2:
        return np.zeros((0, 2), dtype=np.int32)
    flags = model.shape_flags.numpy()
    body = model.shape_body.numpy()
    world = model.shape_world.numpy()
    group = model.shape_collision_group.numpy()
    active = np.nonzero((flags & int(ShapeFlags.COLLIDE_SHAPES)) != 0)[0]
    out = []
    worlds = np.unique(world[active])
    glob = active[world[active] < 0]
    filt = model.shape_collision_filter_pairs
    for w in worlds:
        if w < 0:
            cand = glob
            idx = np.array(np.triu_indices(len(cand), 1)).T if len(cand) > 1 else np.zeros((0, 2), dtype=np.int64)
            pairs = cand[idx] if len(idx) else np.zeros((0, 2), dtype=np.int64)
        else:
            local = active[world[active] == w]
            cand = np.concatenate([local, glob])
            nl = len(local)
            ii, jj = np.triu_indices(len(cand), 1)
            keep = ii < nl  # at least one shape from this world
            pairs = np.stack([cand[ii[keep]], cand[jj[keep]]], axis=1) if keep.any() else np.zeros((0, 2), dtype=np.int64)
        if len(pairs) == 0:
            continue
        a, b = pairs[:, 0], pairs[:, 1]
        ok = (body[a] != body[b]) & ~((body[a] < 0) & (body[b] < 0))
        ok &= _groups_collide(group[a], group[b])
        pairs = np.sort(pairs[ok], axis=1)
        if filt:
            keep = np.fromiter(((int(x), int(y)) not in filt for x, y in pairs), dtype=bool, count=len(pairs))
            pairs = pairs[keep]
        out.append(pairs)
    if not out:
        return np.zeros((0, 2), dtype=np.int32)
    res = np.concatenate(out).astype(np.int32)
    order = np.lexsort((res[:, 1], res[:, 0]))
    return res[order]

"""``ModelView``: a view-local overlay on a shared :class:`~armillary.Model`.

A view duck-types as a :class:`~armillary.Model` (it is an instance of it, so ``SolverFoo(view)``
works): every attribute read falls through to the parent model until the view overrides it. The
mutators of this class change the view only, with copy-on-write semantics: the first mutation of
an array clones the parent's array into the view's overrides; the parent is never written.

Mutations are recorded. :meth:`ModelView.refresh` (called by the coupled solvers on
``notify_model_changed``) re-derives the parent-derived overrides of the notified groups from the
parent's current values by replaying the recorded mutations, writing the results into the
existing override arrays in place (solvers that hold references to them see the new values).

Direct writes through returned Warp arrays are not intercepted: ``view.body_mass.assign(...)``
on a non-overridden name writes the parent's array. Make view-local edits through the mutators
(or by assigning a whole attribute, ``view.body_inv_mass = arr``, which pins that override:
refresh leaves it alone).

Indices are those of the parent model: views are not compacted, so every entity keeps its id and
the view shows the parent's topology. Entities can be hidden as a family: :meth:`hide_particles`
(particles and everything built on them) and :meth:`hide_joints` (joints, DOFs, coordinates and
articulations) make the view report zero of them, for solvers that cannot take such entities.
"""

from __future__ import annotations

import numpy as np
import warp as wp

from armillary.flags import ModelFlags
from armillary.sim.enums import BodyFlags, ParticleFlags, ShapeFlags
from armillary.sim.model import Model

__all__ = ["ModelView"]

_GROUPS: dict[str, int] = {
    "body_mass": ModelFlags.BODY_INERTIAL_PROPERTIES,
    "body_inv_mass": ModelFlags.BODY_INERTIAL_PROPERTIES,
    "body_inertia": ModelFlags.BODY_INERTIAL_PROPERTIES,
    "body_inv_inertia": ModelFlags.BODY_INERTIAL_PROPERTIES,
    "body_flags": ModelFlags.BODY_PROPERTIES,
    "joint_enabled": ModelFlags.JOINT_PROPERTIES,
    "shape_flags": ModelFlags.SHAPE_PROPERTIES,
    # armillary has no particle group: particle masses and flags refresh with either of these
    "particle_mass": ModelFlags.MODEL_PROPERTIES | ModelFlags.BODY_INERTIAL_PROPERTIES,
    "particle_inv_mass": ModelFlags.MODEL_PROPERTIES | ModelFlags.BODY_INERTIAL_PROPERTIES,
    "particle_flags": ModelFlags.MODEL_PROPERTIES | ModelFlags.BODY_PROPERTIES,
}
"""Arrays the mutators write, and the :class:`~armillary.ModelFlags` groups that refresh them."""

_BODY_INERTIAL = ("body_mass", "body_inv_mass", "body_inertia", "body_inv_inertia")
_PARTICLE_MASS = ("particle_mass", "particle_inv_mass")
_COLLIDE = int(ShapeFlags.COLLIDE_SHAPES | ShapeFlags.COLLIDE_PARTICLES)

_PARTICLE_FAMILY_PREFIXES = ("particle_", "spring_", "tri_", "edge_", "tet_", "surface_", "volume_", "muscle_")
_PARTICLE_FAMILY_COUNTS = ("particle_count", "spring_count", "tri_count", "edge_count", "tet_count", "surface_count",
                           "volume_count", "muscle_count")  # fmt: skip
_JOINT_FAMILY_PREFIXES = ("joint_", "articulation_")
_JOINT_FAMILY_COUNTS = ("joint_count", "joint_dof_count", "joint_coord_count", "articulation_count",
                        "max_dofs_per_articulation", "max_joints_per_articulation")  # fmt: skip


def _indices(indices, count: int, what: str) -> np.ndarray:
    if indices is None:
        return np.arange(count, dtype=np.int64)
    idx = indices.numpy() if hasattr(indices, "numpy") else np.asarray(indices)
    idx = np.asarray(idx, dtype=np.int64).reshape(-1)
    bad = idx[(idx < 0) | (idx >= count)]
    if len(bad):
        raise ValueError(f"ModelView: {what} index {int(bad[0])} out of range [0, {count})")
    return idx


def _values(values, n: int, what: str, shape=()) -> np.ndarray:
    arr = values.numpy() if hasattr(values, "numpy") else np.asarray(values)
    arr = np.asarray(arr, dtype=np.float64)
    if arr.shape == shape:  # one value for every index
        arr = np.broadcast_to(arr, (n,) + shape)
    if arr.shape != (n,) + shape:
        raise ValueError(f"ModelView: {what} has shape {arr.shape}, expected {(n,) + shape}")
    return arr


def _inv_mass(m: np.ndarray) -> np.ndarray:
    out = np.zeros_like(m)
    np.divide(1.0, m, out=out, where=m > 0.0)
    return out


def _inv_inertia(inertia: np.ndarray) -> np.ndarray:
    out = np.zeros_like(inertia)
    for i, mat in enumerate(inertia):
        if np.any(mat) and abs(np.linalg.det(mat)) > 0.0:
            out[i] = np.linalg.inv(mat)
    return out


def _positive_factor(factor) -> float:
    f = float(factor)
    if not (f > 0.0 and np.isfinite(f)):
        raise ValueError(f"ModelView: a mass scale factor must be finite and > 0, got {factor!r}")
    return f


class ModelView(Model):
    """A read-through view of a :class:`~armillary.Model` that overrides a subset of attributes.

    Args:
        parent: the shared model (a ``ModelView`` parent is allowed: views nest).
        name: the view's name (e.g. the coupled entry's name).

    Example::

        view = ModelView(model, "soft")
        view.disable_body_dynamics([0, 3])   # copy-on-write: model.body_inv_mass is untouched
        view.body_count                      # delegates to model.body_count
        solver = SolverXPBD(view)
    """

    # the parent's class-level helpers (AttributeFrequency, ...) come with the Model base class

    def __init__(self, parent, name: str) -> None:  # noqa: D107 - Model.__init__ is deliberately not called
        if parent is None:
            raise ValueError("ModelView: parent model is None")
        object.__setattr__(self, "_parent", parent)
        object.__setattr__(self, "_name", str(name))
        object.__setattr__(self, "_overrides", {})
        object.__setattr__(self, "_ops", [])  # recorded mutations: (function, args)
        object.__setattr__(self, "_pinned", set())  # overrides assigned directly (never refreshed)
        object.__setattr__(self, "_hidden", set())  # hidden families ("particles", "joints")
        # view-local caches of Model's lazily computed values
        object.__setattr__(self, "_shape_contact_pairs", None)
        object.__setattr__(self, "_default_collision_pipeline", None)

    # ------------------------------------------------------------------ delegation
    def __getattr__(self, name: str):
        if name.startswith("__") or name in ("_parent", "_overrides"):
            raise AttributeError(name)
        overrides = self.__dict__.get("_overrides")
        if overrides is not None and name in overrides:
            return overrides[name]
        return getattr(self.__dict__["_parent"], name)

    def __setattr__(self, name: str, value) -> None:
        if name.startswith("_") or isinstance(getattr(type(self), name, None), property):
            object.__setattr__(self, name, value)  # private caches, and properties with setters
            return
        self._overrides[name] = value
        self._pinned.add(name)
        if name in ("shape_flags", "shape_body", "shape_world", "shape_collision_group"):
            object.__setattr__(self, "_shape_contact_pairs", None)

    def __delattr__(self, name: str) -> None:
        if name in self._overrides:
            self.reset_override(name)
        else:
            object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(dir(type(self))) | set(dir(self._parent)) | set(self._overrides))

    def __repr__(self) -> str:
        return f"ModelView({self._name!r}, overrides={sorted(self._overrides)})"

    @property
    def name(self) -> str:
        """Name of this view (e.g. the coupled entry's name)."""
        return self._name

    @property
    def parent(self):
        """The underlying model."""
        return self._parent

    @property
    def overrides(self) -> dict:
        """The attributes overridden on this view, by name (a copy of the mapping)."""
        return dict(self._overrides)

    @property
    def hidden(self) -> frozenset:
        """The entity families this view hides (``"particles"``, ``"joints"``)."""
        return frozenset(self._hidden)

    def is_overridden(self, name: str) -> bool:
        return name in self._overrides

    def reset_override(self, name: str) -> None:
        """Drop the override of ``name`` (reads fall through to the parent again) and every recorded
        mutation touching it."""
        self._overrides.pop(name, None)
        self._pinned.discard(name)
        self._ops[:] = [op for op in self._ops if name not in op[1]]
        if name.startswith("shape_"):
            object.__setattr__(self, "_shape_contact_pairs", None)

    # ------------------------------------------------------------------ collision pairs
    @property
    def shape_contact_pairs(self) -> np.ndarray:
        """Candidate shape pairs of this view (its own shape flags); assign to replace them."""
        if self._shape_contact_pairs is None:
            if not any(n in self._overrides for n in ("shape_flags", "shape_body", "shape_world",
                                                      "shape_collision_group")):  # fmt: skip
                pairs = self._parent.shape_contact_pairs
            else:
                pairs = Model.shape_contact_pairs.fget(self)
            object.__setattr__(self, "_shape_contact_pairs", pairs)
        return self._shape_contact_pairs

    @shape_contact_pairs.setter
    def shape_contact_pairs(self, pairs) -> None:
        arr = pairs.numpy() if hasattr(pairs, "numpy") else np.asarray(pairs)
        arr = np.asarray(arr, dtype=np.int32).reshape(-1, 2)
        object.__setattr__(self, "_shape_contact_pairs", arr)

    @property
    def shape_contact_pair_count(self) -> int:
        """Read-only: the number of rows of :attr:`shape_contact_pairs`."""
        return int(len(self.shape_contact_pairs))

    # ------------------------------------------------------------------ copy-on-write core
    def _cow_array(self, name: str):
        """The view-local mutable copy of parent array ``name`` (cloned on first use)."""
        if name not in self._overrides:
            src = getattr(self._parent, name, None)
            if src is None:
                raise ValueError(f"ModelView {self._name!r}: the model has no array {name!r}")
            self._overrides[name] = wp.clone(src)
        return self._overrides[name]

    def _parent_host(self, name: str) -> np.ndarray:
        return getattr(self._parent, name).numpy().copy()

    def _mutate(self, func, names: tuple[str, ...], *args) -> None:
        """Apply ``func(arrays, *args)`` to the view's copies of ``names`` and record it."""
        for n in names:
            if n in self._pinned:
                raise ValueError(f"ModelView {self._name!r}: {n} was assigned directly; reset_override({n!r}) "
                                 "before using the mutators on it")  # fmt: skip
        work = {n: self._cow_array(n).numpy().copy() for n in names}
        func(work, *args)
        for n in names:
            self._overrides[n].assign(work[n].astype(self._overrides[n].numpy().dtype))
        self._ops.append((func, names, args))
        if "shape_flags" in names:
            object.__setattr__(self, "_shape_contact_pairs", None)

    def refresh(self, flags: ModelFlags | int = ModelFlags.ALL) -> list[str]:
        """Re-derive the overrides of the notified groups from the parent's current values.

        Replays every recorded mutation on fresh copies of the parent arrays and writes the
        arrays whose group (body inertia, body flags, joint, shape, particle) is in ``flags``
        into the existing override arrays, in place. Directly assigned (pinned) overrides and
        hidden families are left alone. Returns the names refreshed.
        """
        flags = int(flags)
        touched = []
        for _, names, _ in self._ops:
            touched += [n for n in names if n not in touched]
        affected = [n for n in touched if (int(_GROUPS.get(n, 0)) & flags) and n not in self._pinned]
        if not affected:
            return []
        work = {n: self._parent_host(n) for n in touched}
        for func, names, args in self._ops:
            func(work, *args)
        for n in affected:
            arr = self._overrides[n]
            if tuple(arr.shape) == work[n].shape:
                arr.assign(work[n].astype(arr.numpy().dtype))
            else:  # the parent was resized: replace
                self._overrides[n] = wp.array(work[n], dtype=arr.dtype, device=arr.device)
        if "shape_flags" in affected:
            object.__setattr__(self, "_shape_contact_pairs", None)
        return affected

    # ------------------------------------------------------------------ bodies
    def disable_body_dynamics(self, body_indices) -> None:
        """Immobilize bodies in this view: zero ``body_inv_mass`` and ``body_inv_inertia`` (forward
        mass, inertia and flags stay, as metadata for solvers)."""
        idx = _indices(body_indices, self.body_count, "body")

        def op(a, idx):
            a["body_inv_mass"][idx] = 0.0
            a["body_inv_inertia"][idx] = 0.0

        self._mutate(op, ("body_inv_mass", "body_inv_inertia"), idx)

    def make_bodies_kinematic(self, body_indices) -> None:
        """Make bodies kinematic in this view (``BodyFlags.KINEMATIC`` set, ``DYNAMIC`` cleared):
        solvers move them with their prescribed velocity and treat them as infinite mass."""
        idx = _indices(body_indices, self.body_count, "body")

        def op(a, idx):
            f = a["body_flags"]
            f[idx] = (f[idx] & ~int(BodyFlags.DYNAMIC)) | int(BodyFlags.KINEMATIC)

        self._mutate(op, ("body_flags",), idx)

    def mark_proxy_bodies(self, body_indices) -> None:
        """OR ``BodyFlags.PROXY`` into the selected bodies' flags in this view."""
        idx = _indices(body_indices, self.body_count, "body")

        def op(a, idx):
            a["body_flags"][idx] |= int(BodyFlags.PROXY)

        self._mutate(op, ("body_flags",), idx)

    def scale_body_mass(self, body_indices, factor: float) -> None:
        """Multiply mass and inertia of the selected bodies by ``factor`` (> 0) and divide their
        inverses by it. ``None`` selects every body."""
        idx = _indices(body_indices, self.body_count, "body")
        f = _positive_factor(factor)

        def op(a, idx, f):
            a["body_mass"][idx] *= f
            a["body_inertia"][idx] *= f
            a["body_inv_mass"][idx] /= f
            a["body_inv_inertia"][idx] /= f

        self._mutate(op, _BODY_INERTIAL, idx, f)

    def scale_body_mass_mask(self, body_mask, factor: float) -> None:
        """:meth:`scale_body_mass` for the bodies whose mask entry is non-zero."""
        mask = body_mask.numpy() if hasattr(body_mask, "numpy") else np.asarray(body_mask)
        if len(mask) != self.body_count:
            raise ValueError(f"ModelView: body_mask has {len(mask)} entries, the view has {self.body_count} bodies")
        self.scale_body_mass(np.nonzero(np.asarray(mask))[0], factor)

    def set_body_mass(self, body_indices, body_mass) -> None:
        """Set the mass [kg] of the selected bodies, scaling their inertia by the same ratio (the
        inertia's shape is kept). A body of non-positive mass cannot get a positive one this way
        (no inertia to scale): use :meth:`set_body_inertial_properties`."""
        idx = _indices(body_indices, self.body_count, "body")
        new = _values(body_mass, len(idx), "body_mass")
        cur = self._cow_array("body_mass").numpy()[idx] if "body_mass" in self._overrides else \
            self._parent.body_mass.numpy()[idx]  # fmt: skip
        bad = np.nonzero((cur <= 0.0) & (new > 0.0))[0]
        if len(bad):
            raise ValueError(f"ModelView.set_body_mass: body {int(idx[bad[0]])} has mass {float(cur[bad[0]])}; "
                             "use set_body_inertial_properties to give it a positive mass")  # fmt: skip
        if np.any(new < 0.0):
            raise ValueError("ModelView.set_body_mass: masses must be >= 0")

        def op(a, idx, new):
            cur = a["body_mass"][idx]
            ratio = np.divide(new, cur, out=np.zeros_like(new), where=cur > 0.0)
            a["body_mass"][idx] = new
            a["body_inertia"][idx] *= ratio[:, None, None]
            a["body_inv_mass"][idx] = _inv_mass(new)
            a["body_inv_inertia"][idx] = _inv_inertia(a["body_inertia"][idx])

        self._mutate(op, _BODY_INERTIAL, idx, new)

    def set_body_inertial_properties(self, body_indices, body_mass, body_inertia) -> None:
        """Set mass [kg] and body-frame inertia [kg m^2] of the selected bodies (inverses follow)."""
        idx = _indices(body_indices, self.body_count, "body")
        m = _values(body_mass, len(idx), "body_mass")
        inertia = _values(body_inertia, len(idx), "body_inertia", (3, 3))
        if np.any(m < 0.0):
            raise ValueError("ModelView.set_body_inertial_properties: masses must be >= 0")

        def op(a, idx, m, inertia):
            a["body_mass"][idx] = m
            a["body_inertia"][idx] = inertia
            a["body_inv_mass"][idx] = _inv_mass(m)
            a["body_inv_inertia"][idx] = _inv_inertia(inertia)

        self._mutate(op, _BODY_INERTIAL, idx, m, inertia)

    def add_body_lumped_inertia(self, body_mass_lump, body_inertia_lump) -> None:
        """Add a diagonal lumped mass [kg] and isotropic inertia [kg m^2] (one value per body)."""
        n = self.body_count
        dm = _values(body_mass_lump, n, "body_mass_lump")
        di = _values(body_inertia_lump, n, "body_inertia_lump")

        def op(a, dm, di):
            a["body_mass"][:] += dm
            a["body_inertia"][:] += di[:, None, None] * np.eye(3)
            a["body_inv_mass"][:] = _inv_mass(a["body_mass"])
            a["body_inv_inertia"][:] = _inv_inertia(a["body_inertia"])

        self._mutate(op, _BODY_INERTIAL, dm, di)

    # ------------------------------------------------------------------ particles
    def mark_proxy_particles(self, particle_indices) -> None:
        """OR ``ParticleFlags.PROXY`` into the selected particles' flags in this view."""
        idx = _indices(particle_indices, self.particle_count, "particle")

        def op(a, idx):
            a["particle_flags"][idx] |= int(ParticleFlags.PROXY)

        self._mutate(op, ("particle_flags",), idx)

    def disable_particles(self, particle_indices) -> None:
        """Clear ``ParticleFlags.ACTIVE`` of the selected particles in this view."""
        idx = _indices(particle_indices, self.particle_count, "particle")

        def op(a, idx):
            a["particle_flags"][idx] &= ~int(ParticleFlags.ACTIVE)

        self._mutate(op, ("particle_flags",), idx)

    def zero_particle_mass(self, particle_indices) -> None:
        """Zero mass and inverse mass of the selected particles in this view (immovable)."""
        idx = _indices(particle_indices, self.particle_count, "particle")

        def op(a, idx):
            a["particle_mass"][idx] = 0.0
            a["particle_inv_mass"][idx] = 0.0

        self._mutate(op, _PARTICLE_MASS, idx)

    def scale_particle_mass(self, particle_indices, factor: float) -> None:
        """Multiply the mass of the selected particles (``None``: all) by ``factor`` (> 0)."""
        idx = _indices(particle_indices, self.particle_count, "particle")
        f = _positive_factor(factor)

        def op(a, idx, f):
            a["particle_mass"][idx] *= f
            a["particle_inv_mass"][idx] /= f

        self._mutate(op, _PARTICLE_MASS, idx, f)

    def scale_particle_mass_mask(self, particle_mask, factor: float) -> None:
        """:meth:`scale_particle_mass` for the particles whose mask entry is non-zero."""
        mask = particle_mask.numpy() if hasattr(particle_mask, "numpy") else np.asarray(particle_mask)
        if len(mask) != self.particle_count:
            raise ValueError(f"ModelView: particle_mask has {len(mask)} entries, the view has "
                             f"{self.particle_count} particles")  # fmt: skip
        self.scale_particle_mass(np.nonzero(np.asarray(mask))[0], factor)

    def add_particle_lumped_mass(self, particle_mass_lump) -> None:
        """Add a lumped mass [kg] to every particle (one value per particle)."""
        dm = _values(particle_mass_lump, self.particle_count, "particle_mass_lump")

        def op(a, dm):
            a["particle_mass"][:] += dm
            a["particle_inv_mass"][:] = _inv_mass(a["particle_mass"])

        self._mutate(op, _PARTICLE_MASS, dm)

    def set_particle_mass(self, particle_indices, particle_mass) -> None:
        """Set the mass [kg] of the selected particles (inverse mass follows; 0 means immovable)."""
        idx = _indices(particle_indices, self.particle_count, "particle")
        m = _values(particle_mass, len(idx), "particle_mass")
        if np.any(m < 0.0):
            raise ValueError("ModelView.set_particle_mass: masses must be >= 0")

        def op(a, idx, m):
            a["particle_mass"][idx] = m
            a["particle_inv_mass"][idx] = _inv_mass(m)

        self._mutate(op, _PARTICLE_MASS, idx, m)

    # ------------------------------------------------------------------ joints and shapes
    def disable_joints(self, joint_indices) -> None:
        """Set ``joint_enabled`` to false for the selected joints in this view."""
        idx = _indices(joint_indices, self.joint_count, "joint")

        def op(a, idx):
            a["joint_enabled"][idx] = False

        self._mutate(op, ("joint_enabled",), idx)

    def disable_shape_collisions(self, shape_indices) -> None:
        """Hide shapes from collision in this view: clear their ``COLLIDE_SHAPES`` and
        ``COLLIDE_PARTICLES`` flags (they stay visible for rendering); the view's
        :attr:`shape_contact_pairs` follow."""
        idx = _indices(shape_indices, self.shape_count, "shape")

        def op(a, idx):
            a["shape_flags"][idx] &= ~_COLLIDE

        self._mutate(op, ("shape_flags",), idx)

    # ------------------------------------------------------------------ hiding entity families
    def hide_particles(self) -> None:
        """Hide every particle and everything built on particles (springs, triangles, edges,
        tetrahedra, surfaces, volumes): the view reports zero of them and zero-length arrays."""
        self._hide("particles", _PARTICLE_FAMILY_PREFIXES, _PARTICLE_FAMILY_COUNTS)

    def hide_joints(self) -> None:
        """Hide every joint (and its DOFs, coordinates and articulations): the view reports zero
        of them; per-world start arrays become zeros and ``*_start`` arrays ``[0]``. For
        maximal-coordinate solvers that should not see another entry's joint types."""
        self._hide("joints", _JOINT_FAMILY_PREFIXES, _JOINT_FAMILY_COUNTS)

    def _hide(self, family: str, prefixes, counts) -> None:
        if family in self._hidden:
            return
        parent = self._parent
        world_count = int(getattr(parent, "world_count", 1) or 1)
        for name, value in list(vars(parent).items()) + [(n, getattr(parent, n)) for n in self._overrides]:
            if not name.startswith(prefixes):
                continue
            if isinstance(value, wp.array):
                if name.endswith("_world_start"):
                    new = wp.zeros(world_count + 2, dtype=value.dtype, device=value.device)
                elif name.endswith("_start") and name.split("_")[0] in ("joint", "articulation") and value.ndim == 1:
                    new = wp.zeros(1, dtype=value.dtype, device=value.device)
                else:
                    new = wp.zeros((0,) + tuple(value.shape[1:]), dtype=value.dtype, device=value.device)
                self._overrides[name] = new
            elif isinstance(value, list):
                self._overrides[name] = []
        for name in counts:
            if hasattr(parent, name):
                self._overrides[name] = 0
        self._ops[:] = [op for op in self._ops if not any(n.startswith(prefixes) for n in op[1])]
        self._hidden.add(family)

    # custom attributes: the parent installs per-instance initialisers; delegate to them
    def _init_custom_state(self, state) -> None:
        self._parent._init_custom_state(state)

    def _init_custom_control(self, control) -> None:
        self._parent._init_custom_control(control)

    def _init_custom_contacts(self, contacts) -> None:
        self._parent._init_custom_contacts(contacts)

    # ------------------------------------------------------------------ factories (view-local)
    def state(self, requires_grad: bool | None = None):
        """A :class:`~armillary.State` allocated from this view's arrays and counts."""
        return Model.state(self, requires_grad)

    def control(self, requires_grad: bool | None = None, clone_variables: bool = True):
        """A :class:`~armillary.Control` allocated from this view's joint rows."""
        return Model.control(self, requires_grad, clone_variables)

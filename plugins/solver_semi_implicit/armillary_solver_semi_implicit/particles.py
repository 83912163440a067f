"""Particle half of :class:`~armillary_solver_semi_implicit.solver.SolverSemiImplicit`.

CONTRACT (the solver calls exactly these; keep the signatures):

    p = ParticleForces(model, *, enable_tri_contact: bool, friction_smoothing: float)
    p.eval(state, control, contacts, particle_f, body_f)   # accumulate forces (no gravity)
    p.integrate(state_in, state_out, particle_f, dt)       # semi-implicit Euler
    p.notify_model_changed(flags)                          # model arrays replaced / topology edited

``eval`` accumulates into ``particle_f`` (``wp.vec3`` per particle [N], zeroed by the caller) every
internal particle force: springs, triangle membranes (with drag and lift), bending edges,
tetrahedra, particle-shape contacts from ``contacts`` (their reaction wrenches go into ``body_f``,
world frame ``(force, torque)`` about each body's COM; ``body_f`` may be ``None`` without bodies),
particle-particle contacts (a ``wp.HashGrid`` rebuilt every call) and, with
``enable_tri_contact``, particle-triangle contacts (a ``wp.Mesh`` BVH over the triangles, refit
every call). Force laws and units: :mod:`.particle_kernels`. ``integrate`` adds
``state_in.particle_f`` (external forces) and the per-world gravity (particles with
``inv_mass > 0`` only), clamps speeds to ``Model.particle_max_velocity`` and moves only particles
with ``ParticleFlags.ACTIVE``; the others keep their position and velocity.

Launch cost: one fused force launch plus one integration launch per step, recorded once per set
of arrays (ping-pong states alternate between two recordings) and replayed, so a CPU step does
not re-pack ~60 kernel arguments; both kernels loop with a grid stride (one thread for all items
on the CPU, one per item on a GPU); the grid build (particle-particle contacts) and mesh refit
(triangle contacts) run only when the model has what they serve.

Under a recording ``wp.Tape`` both kernels are launched with ``wp.launch`` (the tape records them, no
replay), and ``eval`` records a function on the tape that rebuilds the grid and refits the BVH from
this call's positions during the backward pass, right before this launch's adjoint (which queries
them again): a later call has rebuilt them from other positions by then.

``friction_smoothing`` is accepted for the interface; it does not change particle friction
(the reference engine's particle contacts do not use it either, measured).
"""

from __future__ import annotations

import numpy as np
import warp as wp

from armillary.launch import tape_recording

from . import particle_kernels as K

try:
    from warp._src import context as _warp_context
except ImportError:  # older Warp layouts
    from warp import context as _warp_context

_CACHE_SIZE = 8


def _count(model, name: str) -> int:
    return int(getattr(model, name, 0) or 0)


class ParticleForces:
    """Forces on and integration of a model's particles (see the module docstring)."""

    def __init__(self, model, *, enable_tri_contact: bool = True, friction_smoothing: float = 1.0):
        self.model = model
        self.device = model.device
        self._is_cpu = wp.get_device(model.device).is_cpu
        self.enable_tri_contact = bool(enable_tri_contact)
        self.friction_smoothing = float(friction_smoothing)
        if not np.isfinite(self.friction_smoothing) or self.friction_smoothing < 0.0:
            raise ValueError(f"ParticleForces: friction_smoothing must be finite and >= 0, got {friction_smoothing!r}")
        dev = self.device
        self._empty_v = wp.zeros(0, dtype=wp.vec3, device=dev)
        self._empty_f = wp.zeros(0, dtype=float, device=dev)
        self._empty_i = wp.zeros(0, dtype=wp.int32, device=dev)
        self._zero_count = wp.zeros(1, dtype=wp.int32, device=dev)
        self._empty_i2 = wp.zeros((0, 3), dtype=wp.int32, device=dev)
        self._empty_i4 = wp.zeros((0, 4), dtype=wp.int32, device=dev)
        self._empty_f2 = wp.zeros((0, 2), dtype=float, device=dev)
        self._empty_f3 = wp.zeros((0, 3), dtype=float, device=dev)
        self._empty_f5 = wp.zeros((0, 5), dtype=float, device=dev)
        self._empty_m2 = wp.zeros(0, dtype=wp.mat22, device=dev)
        self._empty_m3 = wp.zeros(0, dtype=wp.mat33, device=dev)
        self._empty_t = wp.zeros(0, dtype=wp.transform, device=dev)
        self._empty_s = wp.zeros(0, dtype=wp.spatial_vector, device=dev)
        self._grid = None
        self._mesh = None
        self._mesh_x = None
        self._launches: dict = {}
        self.notify_model_changed(0)

    # ------------------------------------------------------------------ host-side setup
    def notify_model_changed(self, flags: int = 0) -> None:
        """Re-validate the model's particle arrays and rebuild the neighbour structures (host work)."""
        m, dev = self.model, self.device
        self._launches.clear()
        self.N = N = _count(m, "particle_count")
        self.S = _count(m, "spring_count")
        self.T = _count(m, "tri_count")
        self.E = _count(m, "edge_count")
        self.K = _count(m, "tet_count")
        self._validate()
        radius = m.particle_radius.numpy() if N else np.zeros(0)
        self.max_radius = float(radius.max()) if N else 0.0
        # particle-particle contacts: every pair of ACTIVE particles of the same world (as the reference)
        self._pp = N > 1 and self.max_radius > 0.0
        if self._pp and self._grid is None:
            self._grid = wp.HashGrid(32, 32, 32, device=dev)  # small: the build clears every cell
        # particle-triangle contacts: a BVH over the triangles, refit on a private copy of positions
        self._tri_contact = self.enable_tri_contact and self.T > 0 and N > 0 and self.max_radius > 0.0
        if self._tri_contact:
            self._mesh_x = wp.clone(m.particle_q, requires_grad=False)
            self._mesh = wp.Mesh(points=self._mesh_x, indices=m.tri_indices.flatten())
        else:
            self._mesh = self._mesh_x = None

    def _validate(self) -> None:
        m, N = self.model, self.N
        if N == 0:
            return

        def need(name, shape, dtype):
            a = getattr(m, name, None)
            if not isinstance(a, wp.array):
                raise ValueError(f"SolverSemiImplicit: Model.{name} must be a wp.array of shape {shape}, "
                                 f"got {type(a).__name__}")  # fmt: skip
            if tuple(a.shape) != tuple(shape) or a.dtype != dtype:
                raise ValueError(f"SolverSemiImplicit: Model.{name} must have shape {tuple(shape)} and dtype "
                                 f"{wp.types.type_repr(dtype)}, got {tuple(a.shape)} "
                                 f"{wp.types.type_repr(a.dtype)}")  # fmt: skip
            if wp.get_device(a.device) != wp.get_device(m.device):
                raise ValueError(f"SolverSemiImplicit: Model.{name} is on {a.device}, the model on {m.device}")
            return a

        for name, dt in (("particle_q", wp.vec3), ("particle_qd", wp.vec3)):
            need(name, (N,), dt)
        for name in ("particle_inv_mass", "particle_radius"):
            need(name, (N,), wp.float32)
        for name in ("particle_flags", "particle_world"):
            need(name, (N,), wp.int32)
        inv_mass = m.particle_inv_mass.numpy()
        bad = np.nonzero(~np.isfinite(inv_mass) | (inv_mass < 0.0))[0]
        if len(bad):
            raise ValueError(f"SolverSemiImplicit: particle {int(bad[0])} has particle_inv_mass {inv_mass[bad[0]]!r}; "
                             "expected a finite value >= 0")  # fmt: skip
        r = m.particle_radius.numpy()
        bad = np.nonzero(~np.isfinite(r) | (r < 0.0))[0]
        if len(bad):
            raise ValueError(f"SolverSemiImplicit: particle {int(bad[0])} has particle_radius {r[bad[0]]!r}; "
                             "expected a finite value >= 0")  # fmt: skip

        def indices(name, count, width, allow_negative=False):
            shape = (2 * count,) if width == 0 else (count, width)
            a = need(name, shape, wp.int32).numpy().reshape(count, -1)
            lo = -1 if allow_negative else 0
            bad = np.nonzero(((a < lo) | (a >= N)).any(axis=1))[0]
            if len(bad):
                raise ValueError(f"SolverSemiImplicit: Model.{name}[{int(bad[0])}] = {a[bad[0]].tolist()} references "
                                 f"a particle outside [0, {N})")  # fmt: skip

        if self.S:
            indices("spring_indices", self.S, 0)
            for name in ("spring_rest_length", "spring_stiffness", "spring_damping"):
                need(name, (self.S,), wp.float32)
        if self.T:
            indices("tri_indices", self.T, 3)
            need("tri_poses", (self.T,), wp.mat22)
            need("tri_materials", (self.T, 5), wp.float32)
        if self.E:
            indices("edge_indices", self.E, 4, allow_negative=True)
            need("edge_rest_angle", (self.E,), wp.float32)
            need("edge_bending_properties", (self.E, 2), wp.float32)
        if self.K:
            indices("tet_indices", self.K, 4)
            need("tet_poses", (self.K,), wp.mat33)
            need("tet_materials", (self.K, 3), wp.float32)

    # ------------------------------------------------------------------ step
    def _activation(self, control, name: str, count: int):
        a = getattr(control, name, None) if control is not None else None
        if a is None:
            a = getattr(self.model, name, None)
        if a is None or count == 0:
            return self._empty_f
        if a.shape[0] != count:
            raise ValueError(f"SolverSemiImplicit: {name} must have shape ({count},), got {tuple(a.shape)}")
        return a

    def _dim(self, n: int) -> int:
        """Launch size for ``n`` grid-stride items: one thread per item on a GPU, one in all on the
        CPU (Warp runs CPU threads in sequence; each would copy every kernel argument)."""
        return 1 if self._is_cpu else max(int(n), 1)

    def _run(self, kernel, dim: int, args: list) -> None:
        """Launch ``kernel`` with ``args``, replaying a recorded launch for the same arrays and values
        (``wp.launch`` while a ``wp.Tape`` records, so that the tape records it)."""
        if tape_recording():
            wp.launch(kernel, dim=dim, inputs=args, device=self.device)
            return
        key = (kernel.key, dim) + tuple(id(a) if isinstance(a, wp.array) else a for a in args)
        entry = self._launches.pop(key, None)
        if entry is None:
            cmd = wp.launch(kernel, dim=dim, inputs=args, device=self.device, record_cmd=True)
            entry = (cmd, args)  # the args keep the arrays (and so their ids) alive
        self._launches[key] = entry  # most recently used last
        while len(self._launches) > _CACHE_SIZE:
            self._launches.pop(next(iter(self._launches)))
        entry[0].launch()

    def eval(self, state, control, contacts, particle_f, body_f) -> None:
        """Accumulate every internal and contact force on the particles of ``state`` into
        ``particle_f`` and the particle-shape reactions into ``body_f`` (see the module docstring)."""
        N = self.N
        if N == 0:
            return
        m, E = self.model, self
        x, v = state.particle_q, state.particle_qd
        if particle_f is None or particle_f.shape[0] != N:
            raise ValueError(f"SolverSemiImplicit: particle_f must have shape ({N},), got "
                             f"{None if particle_f is None else tuple(particle_f.shape)}")  # fmt: skip
        soft_count = 0
        if contacts is not None and getattr(contacts, "soft_contact_particle", None) is not None:
            soft_count = int(contacts.soft_contact_particle.shape[0])
        if soft_count and _count(m, "shape_count") == 0:
            soft_count = 0
        # neighbour structures
        use_grid = 0
        cohesion = float(getattr(m, "particle_cohesion", 0.0) or 0.0)
        p_ke = float(getattr(m, "particle_ke", 0.0) or 0.0)
        p_kd = float(getattr(m, "particle_kd", 0.0) or 0.0)
        if self._pp and (p_ke != 0.0 or p_kd != 0.0):
            self._build_grid(x, cohesion)
            use_grid = 1
        tri_contact = 0
        if self._tri_contact:
            self._refit_mesh(x)
            tri_contact = 1
        work = self.S + self.T + self.E + self.K + soft_count + (N if (use_grid or tri_contact) else 0)
        if work == 0:
            return
        bodies = _count(m, "body_count") > 0
        c = contacts if soft_count else None
        sb = soft_count > 0
        dim = self._dim(work)
        args = [
            work, dim, self.S, self.T, self.E, self.K, soft_count, N if (use_grid or tri_contact) else 0,
            x, v,
            state.body_q if bodies and state.body_q is not None else E._empty_t,
            state.body_qd if bodies and state.body_qd is not None else E._empty_s,
            m.particle_radius, m.particle_flags, m.particle_world,
            m.spring_indices if self.S else E._empty_i, m.spring_rest_length if self.S else E._empty_f,
            m.spring_stiffness if self.S else E._empty_f, m.spring_damping if self.S else E._empty_f,
            m.tri_indices if self.T else E._empty_i2, m.tri_poses if self.T else E._empty_m2,
            m.tri_materials if self.T else E._empty_f5, self._activation(control, "tri_activations", self.T),
            m.edge_indices if self.E else E._empty_i4, m.edge_rest_angle if self.E else E._empty_f,
            m.edge_bending_properties if self.E else E._empty_f2,
            m.tet_indices if self.K else E._empty_i4, m.tet_poses if self.K else E._empty_m3,
            m.tet_materials if self.K else E._empty_f3, self._activation(control, "tet_activations", self.K),
            c.soft_contact_count if sb else E._zero_count, c.soft_contact_particle if sb else E._empty_i,
            c.soft_contact_shape if sb else E._empty_i, c.soft_contact_body_pos if sb else E._empty_v,
            c.soft_contact_body_vel if sb else E._empty_v, c.soft_contact_normal if sb else E._empty_v,
            m.shape_body if sb else E._empty_i, m.shape_material_ke if sb else E._empty_f,
            m.shape_material_kd if sb else E._empty_f, m.shape_material_kf if sb else E._empty_f,
            m.shape_material_mu if sb else E._empty_f,
            m.body_com if bodies else E._empty_v,
            float(m.soft_contact_ke), float(m.soft_contact_kd), float(m.soft_contact_kf), float(m.soft_contact_mu),
            int(self._grid.id) if use_grid else 0, use_grid, self.max_radius, p_ke, p_kd,
            float(getattr(m, "particle_kf", 0.0) or 0.0), float(getattr(m, "particle_mu", 0.0) or 0.0), cohesion,
            int(self._mesh.id) if tri_contact else 0, tri_contact,
            particle_f, body_f if (body_f is not None and bodies) else E._empty_s,
        ]  # fmt: skip
        self._run(K.eval_particle_forces_kernel, dim, args)
        tape = _warp_context.runtime.tape
        if tape is not None and (use_grid or tri_contact):
            # The adjoint of the force kernel queries the grid / BVH again; a later step rebuilds them
            # from its own positions, so the backward pass rebuilds them from this step's positions
            # first (recorded after the launch: the tape runs it before the launch's adjoint).
            def rebuild(x=x, grid=bool(use_grid), mesh=bool(tri_contact), cohesion=cohesion):
                if grid:
                    self._build_grid(x, cohesion)
                if mesh:
                    self._refit_mesh(x)

            tape.record_func(backward=rebuild, arrays=[])

    def _build_grid(self, x, cohesion: float) -> None:
        self._grid.build(x, radius=2.0 * self.max_radius + max(cohesion, 0.0))

    def _refit_mesh(self, x) -> None:
        wp.copy(self._mesh_x, x)  # no gradient: the kernel reads the triangle vertices from ``x``
        self._mesh.refit()

    def integrate(self, state_in, state_out, particle_f, dt: float) -> None:
        """Semi-implicit Euler of the particles from ``state_in`` into ``state_out`` (see the module
        docstring); ``particle_f`` holds the forces from :meth:`eval`."""
        N = self.N
        if N == 0:
            return
        m = self.model
        f_ext = getattr(state_in, "particle_f", None)
        max_v = float(getattr(m, "particle_max_velocity", 1.0e5) or 1.0e5)
        dim = self._dim(N)
        args = [N, dim, state_in.particle_q, state_in.particle_qd, particle_f,
                f_ext if f_ext is not None else self._empty_v, m.particle_inv_mass, m.particle_flags, m.particle_world,
                m.gravity if m.gravity is not None else self._empty_v, max_v, float(dt),
                state_out.particle_q, state_out.particle_qd]  # fmt: skip
        self._run(K.integrate_particles_kernel, dim, args)

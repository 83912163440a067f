"""The main job behind ``armillary run``: build a scene, simulate it, save the trajectory.

Kept separate from the argument parsing so that it can be called from Python
(``armillary.runner.run(RunOptions(...))``) and tested directly.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from pathlib import Path

import numpy as np

from .cli import CliError
from .sim.rotations import quat_to_matrix

# preference order when --solver is not given (first installed one that accepts the model)
DEFAULT_SOLVER_ORDER = ("SolverXPBD", "SolverFeatherstone", "SolverMuJoCo", "SolverVBD")
DEFAULT_SCENE = "falling_shapes"


@dataclasses.dataclass
class RunOptions:
    """Options of one run; ``None`` means "the scene's default"."""

    model_file: str | None = None
    scene: str | None = None
    solver: str | None = None
    frames: int | None = None
    substeps: int | None = None
    dt: float | None = None
    world_count: int = 1
    out: str | None = "trajectory.npz"
    device: str | None = None
    progress: bool | None = None  # None: only when stderr is a terminal
    #: model files only: "sdf" (attach a cached SDF to every colliding MESH), "mesh" or "convex_hull"
    mesh_collision: str = "sdf"
    #: also write the trajectory as a USD stage with time-sampled body transforms (needs armillary-importer-usd)
    usd: str | None = None


@dataclasses.dataclass
class RunSummary:
    """Figures of a finished run."""

    source: str
    solver: str
    frames: int
    steps: int
    dt: float
    wall_seconds: float
    first_step_seconds: float
    body_count: int
    energy_start: float
    energy_end: float
    min_height: float
    out: str | None
    usd: str | None = None

    @property
    def steps_per_second(self) -> float:
        """Steps per wall-clock second, excluding the first step (kernel compilation / loading)."""
        timed = self.steps - 1
        return timed / self.wall_seconds if self.wall_seconds > 0 and timed > 0 else float("nan")

    @property
    def simulated_seconds(self) -> float:
        return self.steps * self.dt

    def lines(self) -> list[str]:
        rows = [
            f"scene:          {self.source}",
            f"solver:         {self.solver}",
            f"bodies:         {self.body_count}",
            f"simulated:      {self.simulated_seconds:.3f} s in {self.steps} steps of {self.dt:.6g} s",
            f"first step:     {self.first_step_seconds:.3f} s (includes kernel compilation or cache loading)",
            f"wall time:      {self.wall_seconds:.3f} s for the other steps ({self.steps_per_second:.1f} steps/s)",
            f"energy:         {self.energy_start:.4f} J -> {self.energy_end:.4f} J",
            f"lowest point:   {self.min_height:.4f} m (body origins along the up axis)",
        ]
        if self.out:
            rows.append(f"trajectory:     {self.out}")
        if self.usd:
            rows.append(f"usd trajectory: {self.usd}")
        return rows


def _fail(message: str, exc: BaseException | None = None):
    raise CliError(message) from exc


def _load_builder(options: RunOptions, registry):
    """Return ``(builder, source_label, dt, frames, substeps)``."""
    import armillary

    if options.model_file is not None:
        if options.scene is not None:
            _fail("give either a model file or --scene, not both")
        path = Path(options.model_file)
        if not path.is_file():
            _fail(f"cannot read model file {str(path)!r}: no such file")
        if not os.access(path, os.R_OK):
            _fail(f"cannot read model file {str(path)!r}: permission denied")
        entry = registry.importers.for_path(path)
        if entry is None:
            suffixes = sorted({s for e in registry.importers.entries() for s in e.meta["suffixes"]})
            _fail(f"no installed importer reads {path.suffix or 'files without a suffix'!r} files "
                  f"(installed importers read: {', '.join(suffixes) or 'nothing; install an importer plugin'})")
        builder = armillary.ModelBuilder()
        try:
            entry.load()(builder, str(path))
            if options.world_count > 1:
                world = builder
                builder = armillary.ModelBuilder()
                builder.replicate(world, options.world_count)
        except (OSError, ValueError, ImportError) as exc:
            _fail(f"cannot import {str(path)!r}: {exc}", exc)
        _prepare_meshes(builder, options.mesh_collision)
        dt = float(getattr(builder, "timestep", None) or 1.0 / 600.0)  # e.g. MJCF <option timestep>
        return builder, str(path), dt, 300, max(1, round(1.0 / 60.0 / dt))
    name = options.scene or DEFAULT_SCENE
    entry = registry.scenes.get(name)
    if entry is None:
        _fail(f"unknown scene {name!r}; available: {', '.join(registry.scenes.names())}")
    builder = entry.load()(world_count=options.world_count)
    return builder, f"{name} (built-in scene)" if entry.plugin.name == "builtin" else name, \
        entry.meta["dt"], entry.meta["frames"], entry.meta["substeps"]


MESH_SDF_RESOLUTION = 64


def _cache_dir() -> str:
    root = os.environ.get("ARMILLARY_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "armillary")
    return os.path.join(root, "sdf")


def _prepare_meshes(builder, mode: str) -> None:
    """Collision geometry of an imported model's triangle meshes (see ``RunOptions.mesh_collision``)."""
    from .sim.enums import GeoType, ShapeFlags

    if mode not in ("sdf", "mesh", "convex_hull"):
        _fail(f"--mesh-collision must be 'sdf', 'mesh' or 'convex_hull', got {mode!r}")
    colliding = [s for s in range(builder.shape_count) if int(builder.shape_type[s]) == int(GeoType.MESH)
                 and int(builder.shape_flags[s]) & int(ShapeFlags.COLLIDE_SHAPES)]  # fmt: skip
    if mode == "convex_hull" and colliding:
        builder.approximate_meshes("convex_hull", shape_indices=colliding)
    elif mode == "sdf":
        cache = _cache_dir()
        done = set()
        for s in colliding:
            mesh = builder.shape_source[s]
            if id(mesh) in done or getattr(mesh, "sdf", None) is not None:
                continue
            done.add(id(mesh))
            try:
                mesh.build_sdf(max_resolution=MESH_SDF_RESOLUTION, cache_dir=cache)
            except OSError:  # unwritable cache folder: build without it
                mesh.build_sdf(max_resolution=MESH_SDF_RESOLUTION)


def _choose_solver(options: RunOptions, registry, model):
    if options.solver is not None:
        try:
            return registry.solvers.resolve(options.solver)
        except (ImportError, AttributeError) as exc:
            _fail(str(exc).splitlines()[0], exc)
    candidates = [n for n in DEFAULT_SOLVER_ORDER if registry.solvers.get(n)] + [
        n for n in registry.solvers.names() if n not in DEFAULT_SOLVER_ORDER
    ]
    reasons = []
    for name in candidates:
        try:
            cls = registry.solvers.resolve(name)
            cls.check_model_supported(model)
            return cls
        except (ImportError, TypeError, ValueError) as exc:
            reasons.append(f"{name}: {str(exc).splitlines()[0]}")
    if not candidates:
        _fail("no solver plugin is installed (try: pip install armillary-solver-xpbd)")
    _fail("no installed solver supports this model: " + "; ".join(reasons))


def _energy(model, state) -> float:
    """Kinetic + gravitational potential energy of all bodies and particles [J] (host-side)."""
    e = 0.0
    g = model.gravity.numpy().reshape(-1, 3)  # one row per world, the last one for world -1

    def rows(world):
        """Gravity row of each entity's world (see armillary.sim.gravity)."""
        w = np.asarray(world, dtype=np.int64)
        return np.where((w < 0) | (w >= len(g)), len(g) - 1, w)
    if model.body_count:
        m = model.body_mass.numpy()
        inertia = model.body_inertia.numpy()
        q = state.body_q.numpy()
        qd = state.body_qd.numpy()
        com = model.body_com.numpy()
        world = rows(model.body_world.numpy())
        rot = quat_to_matrix(q[:, 3:7])
        x_com = q[:, :3] + np.einsum("nij,nj->ni", rot, com)
        v, w = qd[:, :3], qd[:, 3:6]
        w_body = np.einsum("nji,nj->ni", rot, w)
        e += 0.5 * float(np.sum(m * np.sum(v * v, axis=1)))
        e += 0.5 * float(np.sum(np.einsum("ni,nij,nj->n", w_body, inertia, w_body)))
        e -= float(np.sum(m * np.einsum("ni,ni->n", g[world], x_com)))
    if getattr(model, "particle_count", 0):
        m = model.particle_mass.numpy()
        x = state.particle_q.numpy()
        v = state.particle_qd.numpy()
        world = rows(model.particle_world.numpy())
        e += 0.5 * float(np.sum(m * np.sum(v * v, axis=1)))
        e -= float(np.sum(m * np.einsum("ni,ni->n", g[world], x)))
    return e


class _Progress:
    """A one-line text progress bar on stderr."""

    def __init__(self, total: int, enabled: bool):
        self.total, self.enabled, self.start = total, enabled, time.perf_counter()
        self._last = -1

    def update(self, done: int):
        if not self.enabled:
            return
        pct = int(100 * done / self.total)
        if pct == self._last and done != self.total:
            return
        self._last = pct
        width = 30
        filled = int(width * done / self.total)
        elapsed = time.perf_counter() - self.start
        eta = elapsed / done * (self.total - done) if done else 0.0
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {pct:3d}% {done}/{self.total} frames"
                         f"  eta {eta:5.1f} s")
        if done == self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def run(options: RunOptions) -> RunSummary:
    """Simulate according to ``options``; raise :class:`CliError` on user errors."""
    import warp as wp

    from .plugins import get_registry

    if options.world_count < 1:
        _fail(f"--worlds must be at least 1, got {options.world_count}")
    for field in ("frames", "substeps"):
        value = getattr(options, field)
        if value is not None and value < 1:
            _fail(f"--{field} must be at least 1, got {value}")
    if options.dt is not None and not options.dt > 0:
        _fail(f"--dt must be positive, got {options.dt}")
    if options.out is not None and not str(options.out).endswith(".npz"):
        _fail(f"--out must name a .npz file, got {options.out!r}")
    if options.usd is not None and not str(options.usd).endswith((".usd", ".usda", ".usdc")):
        _fail(f"--usd must name a .usda, .usdc or .usd file, got {options.usd!r}")

    wp.config.log_level = wp.LOG_WARNING  # no initialisation banner or module-load lines
    registry = get_registry()
    builder, source, dt, frames, substeps = _load_builder(options, registry)
    dt = options.dt or dt
    frames = options.frames or frames
    substeps = options.substeps or substeps
    if not getattr(builder, "particle_color_groups", None) and hasattr(builder, "color"):
        builder.color()  # block-descent solvers (SolverVBD) need the colouring; it costs others nothing
    try:
        model = builder.finalize(device=options.device)
    except ValueError as exc:
        _fail(f"invalid model: {exc}", exc)
    solver_cls = _choose_solver(options, registry, model)
    try:
        solver = solver_cls(model)
    except ValueError as exc:
        _fail(str(exc), exc)

    state_0, state_1 = model.state(), model.state()
    control = model.control()
    contacts = None
    # solvers with their own contact generation (SolverMuJoCo's default) get contacts=None
    if solver_cls.capabilities.collision_pipeline and not getattr(solver, "use_mujoco_contacts", False):
        collide = getattr(model, "collide", None)
        contacts = model.contacts() if collide is not None else None

    recorder = _usd_recorder(options, registry, model, 1.0 / (dt * substeps))
    body_q = np.zeros((frames + 1, model.body_count, 7), dtype=np.float32)
    body_q[0] = state_0.body_q.numpy() if model.body_count else body_q[0]
    energy_start = _energy(model, state_0)
    if recorder is not None:
        recorder.record(state_0, 0.0)
    show = options.progress if options.progress is not None else sys.stderr.isatty()
    progress = _Progress(frames, show)

    def one_step():
        nonlocal state_0, state_1
        state_0.clear_forces()
        if contacts is not None:
            model.collide(state_0, contacts)
        solver.step(state_0, state_1, control, contacts, dt)
        state_0, state_1 = state_1, state_0

    # the first step compiles (or loads) the kernels: timed on its own, not counted in steps/s
    start = time.perf_counter()
    one_step()
    wp.synchronize_device(model.device)
    first_step = time.perf_counter() - start
    start = time.perf_counter()
    for frame in range(frames):
        for k in range(substeps):
            if frame or k:
                one_step()
        if model.body_count:
            body_q[frame + 1] = state_0.body_q.numpy()  # host copy once per frame, outside step
        try:  # the non-finite guard's flags: read once per frame (the frame synchronised already)
            solver.check_finite(state_0)
        except FloatingPointError as exc:
            steps_done = frame * substeps + substeps
            _fail(f"{source}: the simulation became non-finite in frame {frame + 1} (by step {steps_done}, "
                  f"t = {steps_done * dt:.4g} s) with {solver_cls.__name__}: {exc}", exc)  # fmt: skip
        pipeline = getattr(model, "_default_collision_pipeline", None) if contacts is not None else None
        if pipeline is not None:  # contact-buffer overflow: warns once (a small read per frame)
            pipeline.check_overflow(contacts)
        if recorder is not None:
            recorder.record(state_0, (frame + 1) * dt * substeps)
        progress.update(frame + 1)
    wp.synchronize_device(model.device)
    wall = time.perf_counter() - start
    energy_end = _energy(model, state_0)
    up = int(model.up_axis)
    min_height = float(body_q[..., up].min()) if model.body_count else float("nan")

    if options.out:
        labels = list(getattr(model, "body_label", None) or [f"body_{i}" for i in range(model.body_count)])
        np.savez(
            options.out,
            body_q=body_q,
            body_names=np.array(labels, dtype=str),
            time=np.arange(frames + 1) * dt * substeps,
            dt=dt,
            substeps=substeps,
            solver=solver_cls.__name__,
        )
    if recorder is not None:
        try:
            recorder.close()
        except Exception as exc:  # pxr raises its own error types for unwritable files
            _fail(f"cannot write {options.usd!r}: {str(exc).strip().splitlines()[-1]}", exc)
    return RunSummary(source, solver_cls.__name__, frames, frames * substeps, dt, wall, first_step,
                      model.body_count, energy_start, energy_end, min_height, options.out, options.usd)


def _usd_recorder(options: RunOptions, registry, model, fps: float):
    """The USD recorder for ``--usd`` (loaded from the ``usd`` importer plugin only when asked for)."""
    if options.usd is None:
        return None
    try:
        recorder_cls = registry.importers.api("usd", "RecorderUSD")
    except (ImportError, AttributeError) as exc:
        _fail(f"--usd needs the USD plugin: {str(exc).splitlines()[0]} "
              "(install it with: pip install armillary-importer-usd)", exc)  # fmt: skip
    try:
        return recorder_cls(model, options.usd, fps=fps)
    except ValueError as exc:
        _fail(f"--usd: {exc}", exc)

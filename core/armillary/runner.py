"""The main job behind ``armillary run``: build a scene, simulate it, save the trajectory.

Kept separate from the argument parsing so that it can be called from Python
(``armillary.runner.run(RunOptions(...))``) and tested directly. Also here:
:func:`warmup` (``armillary warmup``: compile every installed plugin's kernels
into Warp's cache) and :func:`init_warp` (Warp's start-up without the CUDA
driver warning on CPU-only machines).
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import inspect
import math
import os
import re
import sys
import threading
import time
from pathlib import Path

import numpy as np

from .cli import CliError
from .sim.rotations import quat_to_matrix

# preference order when --solver is not given (first installed one that accepts the model)
DEFAULT_SOLVER_ORDER = ("SolverXPBD", "SolverFeatherstone", "SolverMuJoCo", "SolverVBD")
DEFAULT_SCENE = "falling_shapes"

#: what every unexpected failure message ends with
TRACEBACK_HINT = "run again with --traceback (or ARMILLARY_DEBUG=1) for the full traceback"
#: the native warning Warp prints at start-up on a machine without the CUDA driver
CUDA_DRIVER_WARNING = "Could not find or load the NVIDIA CUDA driver"
#: seconds the preparation (kernel compilation, first step) may take before a terminal is told why
COMPILE_NOTICE_AFTER = 1.0
#: the summary flags energy growth beyond this fraction of the scene's energy scale
ENERGY_GROWTH_MARGIN = 0.05
#: the summary flags bodies farther from the scene than this many scene extents (plus free flight)
RANGE_EXTENTS = 10.0
#: file types ``--video`` writes
VIDEO_SUFFIXES = (".mp4", ".gif")


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
    #: simulated duration [s]; sets the frame count (rounded up to whole frames); excludes ``frames``
    seconds: float | None = None
    #: also render a video of the run (``.mp4`` or ``.gif``; needs the ``video`` extra: imageio)
    video: str | None = None
    #: video frame size in pixels (width, height)
    video_size: tuple[int, int] = (640, 360)
    #: show the run live in a spawned Rerun viewer (needs the ``rerun`` extra: rerun-sdk)
    rerun: bool = False
    #: also write the run as a Rerun recording (``.rrd``; needs the ``rerun`` extra)
    rerun_save: str | None = None


@dataclasses.dataclass
class RunSummary:
    """Figures of a finished run.

    ``warnings`` holds one line per suspicious outcome (energy growth while nothing drives the
    system, bodies far outside the scene or below the ground), also printed by :meth:`lines`.
    """

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
    substeps: int = 1
    warnings: list[str] = dataclasses.field(default_factory=list)
    video: str | None = None
    rerun: str | None = None

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
            f"simulated:      {self.simulated_seconds:.4g} s = {self.frames} frames x {self.substeps} substeps x "
            f"dt {self.dt:.6g} s ({self.steps} steps)",
            f"first step:     {self.first_step_seconds:.3f} s (includes kernel compilation or cache loading)",
            f"wall time:      {self.wall_seconds:.3f} s for the other steps ({self.steps_per_second:.1f} steps/s)",
            f"energy:         {self.energy_start:.4f} J -> {self.energy_end:.4f} J",
            f"lowest point:   {self.min_height:.4f} m (body origins along the up axis)",
        ]
        if self.out:
            rows.append(f"trajectory:     {self.out}")
        if self.usd:
            rows.append(f"usd trajectory: {self.usd}")
        if self.video:
            rows.append(f"video:          {self.video}")
        if self.rerun:
            rows.append(f"rerun:          {self.rerun}")
        rows += [f"warning:        {w}" for w in self.warnings]
        return rows


def _fail(message: str, exc: BaseException | None = None):
    raise CliError(message) from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# ------------------------------------------------------------------ failures inside a run
_ENTITY = re.compile(r"\b(shape|body|joint)s? (\d+)(?: and (\d+))?(?! \()")


def _describe_entities(message: str, model) -> str:
    """Labels of the shapes / bodies / joints a message names by index (``" [shape 3 = 'foot' on body ...]"``)."""
    if model is None:
        return ""
    notes = []
    for m in _ENTITY.finditer(message):
        kind = m.group(1)
        for idx in (m.group(2), m.group(3)):
            if idx is None:
                continue
            i = int(idx)
            labels = list(getattr(model, f"{kind}_label", None) or [])
            if not 0 <= i < len(labels) or (labels[i] and labels[i] in message):  # unknown, or named already
                continue
            note = f"{kind} {i} = {labels[i]!r}"
            if kind == "shape":
                body = int(model.shape_body.numpy()[i]) if getattr(model, "shape_body", None) is not None else -1
                body_labels = list(getattr(model, "body_label", None) or [])
                note += " (static)" if body < 0 else \
                    f" on body {body!r}" if body >= len(body_labels) else f" on body {body_labels[body]!r}"
            if note not in notes:
                notes.append(note)
    return f" [{'; '.join(notes[:4])}]" if notes else ""


def _advice(exc: BaseException, phase: str, options: RunOptions) -> str:
    """What to do about an exception raised while ``phase`` ran."""
    if isinstance(exc, NotImplementedError):
        tips = "try another --solver (`armillary features` lists what each supports)"
        if phase in ("setting up collision detection", "collision detection") and options.model_file is not None:
            tips += " or --mesh-collision convex_hull"
        return f"the model needs something that is not implemented yet: {tips}"
    if isinstance(exc, MemoryError):
        return "out of memory: try fewer --worlds or a smaller model"
    if isinstance(exc, (ValueError, TypeError)) and phase == "importing the model":
        return "the model file may be invalid or use something the importer does not support"
    return "this may be a bug"


@contextlib.contextmanager
def _failure_context(phase: str, source: str, options: RunOptions, *, solver: str | None = None, model=None,
                     where=None):  # fmt: skip
    """Turn any exception of ``phase`` into a one-line :class:`CliError` naming the model, the solver,
    the frame/step (``where()`` when given), the shapes/bodies/joints the message names, and what to do.
    The original exception stays chained (``--traceback`` prints it)."""
    try:
        yield
    except (CliError, KeyboardInterrupt):
        raise
    except Exception as exc:  # every failure of the pipeline: one line, exit status 2
        at = f" in {where()}" if where is not None else ""
        by = f" with {solver}" if solver else ""
        text = _first_line(exc)
        _fail(f"{source}: {phase} failed{at}{by}: {type(exc).__name__}: {text}{_describe_entities(text, model)}; "
              f"{_advice(exc, phase, options)}; {TRACEBACK_HINT}", exc)  # fmt: skip


# ------------------------------------------------------------------ Warp start-up and devices
def init_warp(device: str | None = None) -> None:
    """Initialise Warp quietly: no start-up banner, and no CUDA-driver warning unless ``device`` is a CUDA one.

    Warp's native library prints "Could not find or load the NVIDIA CUDA driver" on every start of a
    CPU-only machine; for a CPU run the line is noise, so stderr is captured at the file-descriptor level
    during ``wp.init()`` and every other line is passed on.
    """
    import warp as wp

    wp.config.log_level = wp.LOG_WARNING  # no initialisation banner or module-load lines
    if device is not None and not str(device).startswith("cpu"):
        wp.init()
        return
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no usable stderr file descriptor
        wp.init()
        return
    import tempfile

    with tempfile.TemporaryFile() as captured:
        try:
            os.dup2(captured.fileno(), 2)
            try:
                wp.init()
            finally:
                with contextlib.suppress(Exception):
                    sys.stderr.flush()
                os.dup2(saved, 2)
        finally:
            os.close(saved)
        captured.seek(0)
        text = captured.read().decode(errors="replace")
    for line in text.splitlines(keepends=True):
        if CUDA_DRIVER_WARNING not in line:
            sys.stderr.write(line)


def _available_devices() -> list[str]:
    import warp as wp

    return [str(d.alias) for d in wp.get_devices()]


def _check_device(device: str | None) -> None:
    """``--device`` must name a device Warp found on this machine."""
    import warp as wp

    if device is None:
        return
    try:
        wp.get_device(device)
    except Exception as exc:
        available = ", ".join(_available_devices())
        reason = ""
        if str(device).startswith("cuda") and not wp.is_cuda_available():
            reason = " (Warp found no CUDA driver or GPU)"
        _fail(f"--device {device!r} is not available on this machine{reason}; available devices: {available}", exc)


# ------------------------------------------------------------------ outputs
def _check_writable(path: str, flag: str) -> None:
    """Fail now (before simulating) when ``path`` cannot be written."""
    p = Path(path)
    folder = p.parent if str(p.parent) else Path(".")
    if not folder.is_dir():
        _fail(f"{flag} {path!r}: folder {str(folder)!r} does not exist (create it first: mkdir -p {folder})")
    if p.is_dir():
        _fail(f"{flag} {path!r} is a folder; give a file name")
    existed = p.exists()
    try:
        with open(p, "ab"):
            pass
    except OSError as exc:
        _fail(f"{flag} {path!r} cannot be written: {exc.strerror or exc}", exc)
    if not existed:
        with contextlib.suppress(OSError):
            p.unlink()


# ------------------------------------------------------------------ solver choice
def _required_arguments(cls) -> list[str]:
    """Constructor parameters besides the model that have no default (composite solvers: ``entries``)."""
    try:
        params = list(inspect.signature(cls).parameters.values())
    except (TypeError, ValueError):
        return []
    required = [p.name for p in params if p.default is inspect.Parameter.empty
                and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]  # fmt: skip
    return required[1:]  # the first is the model


def _plugin_docs(entry) -> str:
    """Where a solver's plugin documents its Python use: its README in this checkout, else its distribution."""
    from .catalog import DISTRIBUTION_DIRS

    directory = DISTRIBUTION_DIRS.get(entry.plugin.distribution)
    if directory:
        readme = Path(__file__).resolve().parents[2] / "plugins" / directory / "README.md"
        if readme.is_file():
            return str(readme)
    return f"the documentation of {entry.plugin.label}"


def _composite_error(name: str, entry, cls) -> str | None:
    """Why ``armillary run`` cannot build solver ``name`` (``None`` when a model is all it needs)."""
    required = _required_arguments(cls)
    if not required:
        return None
    return (f"solver {name!r} ({entry.plugin.label}) is a composite solver: its constructor needs "
            f"{', '.join(required)} besides the model, so `armillary run` cannot build it; build it in a Python "
            f"script (see {_plugin_docs(entry)})")  # fmt: skip


def _disabled_plugin_error(name: str, registry) -> str | None:
    """The message for a known solver whose installed plugin ARMILLARY_PLUGINS leaves out."""
    from .catalog import KNOWN

    known = KNOWN.get(name)
    if known is None or known.kind != "solver":
        return None
    record = registry.plugin_for_distribution(known.distribution)
    if record is None or record.status != "disabled":
        return None
    selected = os.environ.get("ARMILLARY_PLUGINS", "")
    return (f"solver {name!r} is provided by {record.label}, whose plugin {record.name!r} is disabled by "
            f"ARMILLARY_PLUGINS={selected}: add it (ARMILLARY_PLUGINS={selected + ',' if selected else ''}"
            f"{record.name}) or unset ARMILLARY_PLUGINS")  # fmt: skip


def runnable_solvers(registry) -> tuple[list[str], list[str]]:
    """``(runnable, composite)``: installed solvers ``armillary run`` can build from a model alone, and
    the composite ones (their constructors need more, e.g. entries); solvers that fail to load are in neither."""
    runnable, composite = [], []
    for name in registry.solvers.names():
        try:
            cls = registry.solvers.resolve(name)
        except Exception:
            continue
        (composite if _required_arguments(cls) else runnable).append(name)
    return runnable, composite


def _resolve_solver_name(name: str, registry):
    """The class of solver ``name``, checked before the model is built; one-line errors otherwise."""
    entry = registry.solvers.get(name)
    if entry is None:
        disabled = _disabled_plugin_error(name, registry)
        if disabled:
            _fail(disabled)
        try:
            registry.solvers.resolve(name)
        except ImportError as exc:  # a known name: which distribution to install
            _fail(_first_line(exc), exc)
        except AttributeError as exc:
            runnable, composite = runnable_solvers(registry)
            from .catalog import KNOWN

            pool = sorted(set(registry.solvers.names()) | {n for n, k in KNOWN.items() if k.kind == "solver"})

            def key(n):  # compared without the common "Solver" prefix, case-insensitively
                n = n.lower()
                return n[len("solver"):] if n.startswith("solver") and len(n) > len("solver") else n
            keyed = {key(n): n for n in pool}
            close = difflib.get_close_matches(key(name), list(keyed), n=2, cutoff=0.7)
            close += [k for k in keyed if key(name) and key(name) in k and k not in close]
            hint = f" (did you mean {' or '.join(repr(keyed[c]) for c in close[:2])}?)" if close else ""
            msg = f"unknown solver {name!r}{hint}; solvers `armillary run` can use: {', '.join(runnable) or 'none'}"
            if composite:
                msg += f" (composite, Python API only: {', '.join(composite)})"
            broken = [p for p in registry.plugins() if p.status == "failed"]
            if broken:
                msg += "; plugins that failed to load: " + ", ".join(f"{p.label} ({p.error})" for p in broken)
            disabled = [p.name for p in registry.plugins() if p.status == "disabled"]
            if disabled:
                msg += f"; plugins disabled by ARMILLARY_PLUGINS: {', '.join(disabled)}"
            _fail(msg, exc)
        _fail(f"solver {name!r} is not registered")  # pragma: no cover (resolve raised above)
    try:
        cls = registry.solvers.resolve(name)
    except Exception as exc:
        _fail(_first_line(exc), exc)
    composite = _composite_error(name, entry, cls)
    if composite:
        _fail(composite)
    return cls


def _choose_solver(options: RunOptions, registry, model, solver_cls=None):
    if solver_cls is not None:
        return solver_cls
    if options.solver is not None:
        return _resolve_solver_name(options.solver, registry)
    candidates = [n for n in DEFAULT_SOLVER_ORDER if registry.solvers.get(n)] + [
        n for n in registry.solvers.names() if n not in DEFAULT_SOLVER_ORDER
    ]
    reasons = []
    for name in candidates:
        try:
            cls = registry.solvers.resolve(name)
            if _required_arguments(cls):
                continue  # composite solvers need entries: Python API only
            cls.check_model_supported(model)
            return cls
        except (ImportError, TypeError, ValueError) as exc:
            reasons.append(f"{name}: {str(exc).splitlines()[0]}")
    if not candidates:
        _fail("no solver plugin is installed (try: pip install armillary-solver-xpbd)")
    _fail("no installed solver supports this model: " + ("; ".join(reasons) or "only composite solvers are installed"))


# ------------------------------------------------------------------ model
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
        except (CliError, KeyboardInterrupt):
            raise
        except Exception as exc:
            _fail(f"cannot import {str(path)!r}: {type(exc).__name__}: {_first_line(exc)}; "
                  f"{_advice(exc, 'importing the model', options)}; {TRACEBACK_HINT}", exc)  # fmt: skip
        with _failure_context("preparing the mesh collision geometry", str(path), options):
            _prepare_meshes(builder, options.mesh_collision)
        dt = float(getattr(builder, "timestep", None) or 1.0 / 600.0)  # e.g. MJCF <option timestep>
        return builder, str(path), dt, 300, max(1, round(1.0 / 60.0 / dt))
    name = options.scene or DEFAULT_SCENE
    entry = registry.scenes.get(name)
    if entry is None:
        _fail(f"unknown scene {name!r}; available: {', '.join(registry.scenes.names())}")
    with _failure_context("building the scene", name, options):
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


# ------------------------------------------------------------------ energy and plausibility
class _EnergyMeter:
    """:func:`_energy` with the model's host arrays copied once (per frame only the state is read)."""

    def __init__(self, model):
        self.model = model
        g = model.gravity.numpy().reshape(-1, 3) if model.gravity is not None else np.zeros((1, 3))
        self.g = g

        def rows(world):
            w = np.asarray(world, dtype=np.int64)
            return np.where((w < 0) | (w >= len(g)), len(g) - 1, w)
        if model.body_count:
            self.m = model.body_mass.numpy()
            self.inertia = model.body_inertia.numpy()
            self.com = model.body_com.numpy()
            self.gb = g[rows(model.body_world.numpy())]
        if getattr(model, "particle_count", 0):
            self.pm = model.particle_mass.numpy()
            self.gp = g[rows(model.particle_world.numpy())]

    def __call__(self, state, body_q=None, particle_q=None) -> float:
        """Kinetic + gravitational potential energy of ``state`` [J] (``body_q`` / ``particle_q``:
        host copies already made)."""
        model, e = self.model, 0.0
        if model.body_count:
            q = state.body_q.numpy() if body_q is None else body_q
            qd = state.body_qd.numpy()
            rot = quat_to_matrix(q[:, 3:7])
            x_com = q[:, :3] + np.einsum("nij,nj->ni", rot, self.com)
            v, w = qd[:, :3], qd[:, 3:6]
            w_body = np.einsum("nji,nj->ni", rot, w)
            e += 0.5 * float(np.sum(self.m * np.sum(v * v, axis=1)))
            e += 0.5 * float(np.sum(np.einsum("ni,nij,nj->n", w_body, self.inertia, w_body)))
            e -= float(np.sum(self.m * np.einsum("ni,ni->n", self.gb, x_com)))
        if getattr(model, "particle_count", 0):
            x = state.particle_q.numpy() if particle_q is None else particle_q
            v = state.particle_qd.numpy()
            e += 0.5 * float(np.sum(self.pm * np.sum(v * v, axis=1)))
            e -= float(np.sum(self.pm * np.einsum("ni,ni->n", self.gp, x)))
        return e


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


def _numpy(model, name):
    arr = getattr(model, name, None)
    return None if arr is None else np.asarray(arr.numpy())


def energy_sources(model) -> list[str]:
    """What may legitimately add kinetic + gravitational energy to ``model`` run with a zero control
    (empty when nothing drives it, so energy growth means the integration is unstable)."""
    from .sim.enums import BodyFlags

    found = []
    if getattr(model, "actuators", None):
        found.append("actuators")
    if getattr(model, "joint_dof_count", 0):
        ke, kd = _numpy(model, "joint_target_ke"), _numpy(model, "joint_target_kd")
        q, target_q = _numpy(model, "joint_q"), _numpy(model, "joint_target_q")
        target_qd, stiffness = _numpy(model, "joint_target_qd"), _numpy(model, "joint_stiffness")
        rest_q = _numpy(model, "joint_rest_q")
        if ke is not None and np.any(ke > 0) and q is not None and target_q is not None \
                and np.any(np.abs(target_q - q) > 1e-6):  # fmt: skip
            found.append("position drives with targets away from the initial pose")
        if kd is not None and target_qd is not None and np.any((kd > 0) & (target_qd != 0)):
            found.append("velocity drives")
        if stiffness is not None and np.any(stiffness > 0) and rest_q is not None and q is not None \
                and np.any(np.abs(rest_q - q) > 1e-6):  # fmt: skip
            found.append("joint springs away from their rest pose")
    if getattr(model, "body_count", 0):
        flags, qd = _numpy(model, "body_flags"), _numpy(model, "body_qd")
        if flags is not None and qd is not None:
            kinematic = (flags & int(BodyFlags.KINEMATIC)) != 0
            if np.any(np.abs(qd[kinematic]) > 0):
                found.append("moving kinematic bodies")
    if any(getattr(model, n, 0) for n in ("spring_count", "tri_count", "tet_count", "edge_count", "muscle_count")):
        found.append("elastic elements (their stored energy is not counted)")
    return found


def _body_sizes(model) -> np.ndarray:
    """Each body's bounding radius about its origin from its colliding shapes [m] (0 without any)."""
    from .sim.enums import GeoType, ShapeFlags

    sizes = np.zeros(model.body_count)
    if not model.shape_count:
        return sizes
    body = _numpy(model, "shape_body")
    flags = _numpy(model, "shape_flags")
    radius = _numpy(model, "shape_collision_radius")
    types = _numpy(model, "shape_type")
    tf = _numpy(model, "shape_transform")
    if any(a is None for a in (body, flags, radius, types, tf)):
        return sizes
    for s in range(model.shape_count):
        b = int(body[s])
        if b < 0 or not int(flags[s]) & int(ShapeFlags.COLLIDE_SHAPES) or int(types[s]) == int(GeoType.PLANE):
            continue
        sizes[b] = max(sizes[b], float(np.linalg.norm(tf[s][:3])) + float(radius[s]))
    return sizes


def _ground_planes(model) -> list[tuple[np.ndarray, np.ndarray, int]]:
    """``(point, normal, world)`` of every infinite static colliding plane."""
    from .sim.enums import GeoType, ShapeFlags

    planes = []
    if not model.shape_count:
        return planes
    types, body, flags = _numpy(model, "shape_type"), _numpy(model, "shape_body"), _numpy(model, "shape_flags")
    scale, tf, world = _numpy(model, "shape_scale"), _numpy(model, "shape_transform"), _numpy(model, "shape_world")
    for s in np.nonzero(types == int(GeoType.PLANE))[0]:
        if int(body[s]) >= 0 or not int(flags[s]) & int(ShapeFlags.COLLIDE_SHAPES) or np.any(scale[s][:2] > 0):
            continue
        normal = quat_to_matrix(tf[s][None, 3:7])[0][:, 2]
        planes.append((tf[s][:3].astype(np.float64), normal, int(world[s]) if world is not None else -1))
    return planes


def _fmt_bodies(model, indices) -> str:
    labels = list(getattr(model, "body_label", None) or [])
    names = [repr(labels[i]) if i < len(labels) else f"body {i}" for i in indices[:3]]
    more = f" and {len(indices) - 3} more" if len(indices) > 3 else ""
    return ", ".join(names) + more


def plausibility_warnings(model, body_q: np.ndarray, energy_start: float, energy_end: float,
                          seconds: float, body_qd0: np.ndarray | None = None) -> list[str]:  # fmt: skip
    """One line per suspicious outcome of a run: energy growth while nothing drives the system, bodies
    that left the scene (farther than :data:`RANGE_EXTENTS` scene extents plus free flight from it) and
    bodies more than their size below a ground plane. ``body_q``: frames+1 x bodies x 7 origins."""
    out = []
    g = float(np.max(np.linalg.norm(model.gravity.numpy().reshape(-1, 3), axis=1))) if model.gravity is not None \
        else 0.0  # fmt: skip
    nb = int(model.body_count)
    sizes = _body_sizes(model) if nb else np.zeros(0)
    if nb and body_q.size and np.all(np.isfinite(body_q)):
        x0 = body_q[0, :, :3].astype(np.float64)
        lo, hi = (x0 - sizes[:, None]).min(axis=0), (x0 + sizes[:, None]).max(axis=0)
        extent = max(float(np.linalg.norm(hi - lo)), 0.1)
        center = 0.5 * (lo + hi)
        v0 = float(np.max(np.linalg.norm(body_qd0[:, :3], axis=1))) if body_qd0 is not None and len(body_qd0) else 0.0
        limit = RANGE_EXTENTS * max(extent, 1.0) + v0 * seconds + 0.5 * g * seconds**2
        dist = np.linalg.norm(body_q[..., :3].astype(np.float64) - center, axis=-1).max(axis=0)
        far = np.nonzero(dist > limit)[0]
        if len(far):
            out.append(f"{len(far)} bod{'y' if len(far) == 1 else 'ies'} ({_fmt_bodies(model, far)}) went "
                       f"{float(dist[far].max()):.4g} m from the scene (extent {extent:.3g} m, farther than free "
                       f"flight allows): the simulation may have exploded; try a smaller --dt or another solver")  # fmt: skip
        body_world = _numpy(model, "body_world")
        for point, normal, world in _ground_planes(model):
            mask = sizes > 0
            if world >= 0 and body_world is not None:
                mask &= body_world == world
            height = (body_q[..., :3].astype(np.float64) - point) @ normal  # frames x bodies, along the normal
            depth = -height.min(axis=0)  # deepest, per body
            size = np.maximum(sizes, 1e-3)
            below = np.nonzero(mask & (depth > size) & (-height[0] <= size))[0]  # not those that started there
            if len(below):
                one = len(below) == 1
                out.append(f"{len(below)} bod{'y' if one else 'ies'} ({_fmt_bodies(model, below)}) went "
                           f"{float(depth[below].max()):.4g} m below the ground plane (body origin), more than "
                           f"{'its' if one else 'their'} size ({float(sizes[below].max()):.3g} m): "
                           f"{'it' if one else 'they'} fell through; try a smaller --dt or another solver")  # fmt: skip
                break
    sources = energy_sources(model)
    if not sources and math.isfinite(energy_start) and math.isfinite(energy_end):
        mass = float(np.sum(model.body_mass.numpy())) if nb else 0.0
        if getattr(model, "particle_count", 0):
            mass += float(np.sum(model.particle_mass.numpy()))
        extent = float(np.linalg.norm(np.ptp(body_q[0, :, :3], axis=0))) if nb and body_q.size else 0.0
        scale = mass * g * max(extent, float(sizes.max()) if len(sizes) else 0.0, 0.1)
        margin = ENERGY_GROWTH_MARGIN * max(scale, abs(energy_start), 1e-3)
        if energy_end > energy_start + margin:
            out.append(f"energy grew from {energy_start:.4g} to {energy_end:.4g} J while nothing drives the system: "
                       "the solver may be unstable at this dt; try --dt smaller or another solver")  # fmt: skip
    return out


# ------------------------------------------------------------------ progress
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


class _CompileNotice:
    """Tells a terminal why nothing happens: after :data:`COMPILE_NOTICE_AFTER` seconds of preparation
    (model import, kernel compilation on a cold Warp cache, first step), one line; when done, how long it took."""

    def __init__(self, enabled: bool):
        self.enabled, self.shown, self.start = enabled, False, time.perf_counter()
        self._lock = threading.Lock()
        self._timer = None
        if enabled:
            self._timer = threading.Timer(COMPILE_NOTICE_AFTER, self._show)
            self._timer.daemon = True
            self._timer.start()

    def _show(self):
        with self._lock:
            if self._timer is None:
                return
            self.shown = True
            sys.stderr.write("armillary: preparing the run; Warp compiles kernels on their first use, which takes "
                             "a minute or more once (`armillary warmup` compiles them all ahead of time)...\n")
            sys.stderr.flush()

    def done(self):
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
                if self.shown:
                    sys.stderr.write(f"armillary: ready after {time.perf_counter() - self.start:.1f} s; "
                                     "simulating\n")
                    sys.stderr.flush()


# ------------------------------------------------------------------ the run
def _validate_options(options: RunOptions) -> None:
    if options.world_count < 1:
        _fail(f"--worlds must be at least 1, got {options.world_count}")
    for field in ("frames", "substeps"):
        value = getattr(options, field)
        if value is not None and value < 1:
            _fail(f"--{field} must be at least 1, got {value}")
    if options.dt is not None and not (options.dt > 0 and math.isfinite(options.dt)):
        _fail(f"--dt must be a positive number of seconds, got {options.dt}")
    if options.seconds is not None:
        if options.frames is not None:
            _fail(f"give either --frames ({options.frames}) or --seconds ({options.seconds}), not both")
        if not (options.seconds > 0 and math.isfinite(options.seconds)):
            _fail(f"--seconds must be a positive number of seconds, got {options.seconds}")
    if options.out is not None and not str(options.out).endswith(".npz"):
        _fail(f"--out must name a .npz file, got {options.out!r}")
    if options.usd is not None and not str(options.usd).endswith((".usd", ".usda", ".usdc")):
        _fail(f"--usd must name a .usda, .usdc or .usd file, got {options.usd!r}")
    if options.video is not None and not str(options.video).lower().endswith(VIDEO_SUFFIXES):
        _fail(f"--video must name a .mp4 or .gif file, got {options.video!r}")
    if options.video is not None:
        w, h = (int(v) for v in options.video_size)
        if not (16 <= w <= 4096 and 16 <= h <= 4096):
            _fail(f"--video-size must be WIDTHxHEIGHT with each side in 16..4096 pixels, got {w}x{h}")
    if options.rerun_save is not None and not str(options.rerun_save).endswith(".rrd"):
        _fail(f"--rerun-save must name a .rrd file, got {options.rerun_save!r}")
    if options.out is not None:
        _check_writable(options.out, "--out")
    if options.usd is not None:
        _check_writable(options.usd, "--usd")
    if options.video is not None:
        _check_writable(options.video, "--video")
    if options.rerun_save is not None:
        _check_writable(options.rerun_save, "--rerun-save")
    if options.video is not None:  # the optional packages must be there before anything is simulated
        from .viewer.image import check_video_writer

        try:
            check_video_writer(options.video)
        except ImportError as exc:
            _fail(f"--video: {exc}", exc)
    if options.rerun or options.rerun_save is not None:
        try:
            import rerun  # noqa: F401
        except ImportError as exc:
            flag = "--rerun" if options.rerun else "--rerun-save"
            _fail(f"{flag} needs the rerun-sdk package: pip install 'armillary[rerun]' (or pip install rerun-sdk)", exc)


def run(options: RunOptions) -> RunSummary:
    """Simulate according to ``options``; raise :class:`CliError` on user errors and, with the
    original exception chained, on any failure of the import, the model, the solver or a step."""
    import warp as wp

    from .plugins import get_registry

    _validate_options(options)
    init_warp(options.device)
    _check_device(options.device)
    registry = get_registry()
    if options.usd is not None:
        _usd_viewer_class()  # the USD plugin must be there before anything is simulated
    # the solver name is checked before the model is imported (and its warnings printed)
    solver_cls = _resolve_solver_name(options.solver, registry) if options.solver is not None else None
    show = options.progress if options.progress is not None else sys.stderr.isatty()
    notice = _CompileNotice(show)  # import, model, solver and first step: where Warp compiles kernels
    try:
        builder, source, dt, frames, substeps = _load_builder(options, registry)
        # the run lasts --frames frames, else --seconds, else the scene's default duration (whatever --dt)
        seconds = options.seconds if options.seconds is not None else frames * substeps * dt
        dt = options.dt or dt
        substeps = options.substeps or substeps
        frames = options.frames or max(1, math.ceil(seconds / (dt * substeps) - 1e-9))
        with _failure_context("preparing the model", source, options):
            if not getattr(builder, "particle_color_groups", None) and hasattr(builder, "color"):
                builder.color()  # block-descent solvers (SolverVBD) need the colouring; it costs others nothing
        try:
            model = builder.finalize(device=options.device)
        except ValueError as exc:
            _fail(f"{source}: invalid model: {exc}", exc)
        except (CliError, KeyboardInterrupt):
            raise
        except Exception as exc:
            _fail(f"{source}: building the model failed: {type(exc).__name__}: {_first_line(exc)}; this may be a bug; "
                  f"{TRACEBACK_HINT}", exc)  # fmt: skip
        solver_cls = _choose_solver(options, registry, model, solver_cls)
        solver_name = solver_cls.__name__
        try:
            solver = solver_cls(model)
        except ValueError as exc:
            _fail(f"{source}: {_first_line(exc)}{_describe_entities(_first_line(exc), model)}", exc)
        except (CliError, KeyboardInterrupt):
            raise
        except Exception as exc:
            _fail(f"{source}: creating {solver_name} failed: {type(exc).__name__}: {_first_line(exc)}"
                  f"{_describe_entities(_first_line(exc), model)}; {_advice(exc, 'creating the solver', options)}; "
                  f"{TRACEBACK_HINT}", exc)  # fmt: skip

        state_0, state_1 = model.state(), model.state()
        control = model.control()
        contacts = None
        # solvers with their own contact generation (SolverMuJoCo's default) get contacts=None
        if solver_cls.capabilities.collision_pipeline and not getattr(solver, "use_mujoco_contacts", False):
            collide = getattr(model, "collide", None)
            if collide is not None:
                with _failure_context("setting up collision detection", source, options, solver=solver_name,
                                      model=model):  # fmt: skip
                    contacts = model.contacts()

        trajectory = TrajectoryRecorder(model, solver, frames=frames)
        trajectory.record(state_0, 0.0)
        body_qd0 = state_0.body_qd.numpy() if model.body_count else None
        energy_start = trajectory.energy[0]
        viewers = _live_viewers(options, model, 1.0 / (dt * substeps))
        _log_viewers(viewers, state_0, None, 0.0, trajectory)
        position = {"frame": 0, "step": 0}
        phase = {"name": "a solver step"}

        def where():
            return f"frame {position['frame'] + 1} (step {position['step'] + 1}, t = {position['step'] * dt:.4g} s)"

        def one_step():
            nonlocal state_0, state_1
            state_0.clear_forces()
            if contacts is not None:
                phase["name"] = "collision detection"
                model.collide(state_0, contacts)
            phase["name"] = "a solver step"
            solver.step(state_0, state_1, control, contacts, dt)
            state_0, state_1 = state_1, state_0
            position["step"] += 1

        # the first step compiles (or loads) the kernels: timed on its own, not counted in steps/s
        start = time.perf_counter()
        try:
            one_step()
            wp.synchronize_device(model.device)
        except (CliError, KeyboardInterrupt):
            raise
        except Exception as exc:
            _raise_step_failure(exc, phase["name"], source, options, solver_name, model, where)
    finally:
        notice.done()
    first_step = time.perf_counter() - start
    progress = _Progress(frames, show)
    start = time.perf_counter()
    for frame in range(frames):
        position["frame"] = frame
        try:
            for k in range(substeps):
                if frame or k:
                    one_step()
            # host copies once per frame, outside step: body_q, energy, contact count, solver diagnostics
            trajectory.record(state_0, (frame + 1) * dt * substeps, contacts)
        except (CliError, KeyboardInterrupt):
            raise
        except Exception as exc:
            _raise_step_failure(exc, phase["name"], source, options, solver_name, model, where)
        try:  # the non-finite guard's flags: read once per frame (the frame synchronised already)
            solver.check_finite(state_0)
        except FloatingPointError as exc:
            steps_done = frame * substeps + substeps
            _fail(f"{source}: the simulation became non-finite in frame {frame + 1} (by step {steps_done}, "
                  f"t = {steps_done * dt:.4g} s) with {solver_name}: {exc}", exc)  # fmt: skip
        pipeline = getattr(model, "_default_collision_pipeline", None) if contacts is not None else None
        if pipeline is not None:  # contact-buffer overflow: warns once (a small read per frame)
            pipeline.check_overflow(contacts)
        # the contacts of the frame's last step were found on that step's input state (state_1 now)
        _log_viewers(viewers, state_0, contacts, (frame + 1) * dt * substeps, trajectory, state_1)
        progress.update(frame + 1)
    wp.synchronize_device(model.device)
    wall = time.perf_counter() - start
    energy_end = trajectory.energy[-1]
    body_q = trajectory.body_q_array()
    up = int(model.up_axis)
    min_height = float(body_q[..., up].min()) if model.body_count else float("nan")
    flagged = plausibility_warnings(model, body_q, energy_start, energy_end, frames * substeps * dt, body_qd0)

    if options.out:
        try:
            trajectory.save(options.out, dt=dt, substeps=substeps, solver=solver_name, up_axis=int(model.up_axis))
        except OSError as exc:
            _fail(f"cannot write --out {options.out!r}: {exc.strerror or exc}", exc)
    for flag, viewer in viewers:
        try:
            viewer.close()
        except Exception as exc:  # pxr raises its own error types for unwritable files
            target = options.usd if flag == "--usd" else options.rerun_save or "the Rerun viewer"
            _fail(f"cannot write {target!r}: {str(exc).strip().splitlines()[-1]}", exc)
    if options.video is not None:
        from .viewer.image import write_video

        with _failure_context("rendering the video", source, options, solver=solver_name, model=model):
            write_video(model, body_q, options.video, fps=1.0 / (dt * substeps), size=tuple(options.video_size),
                        particle_q=trajectory.particle_q_array())  # fmt: skip
    rerun_target = options.rerun_save if options.rerun_save else ("live viewer" if options.rerun else None)
    return RunSummary(source, solver_name, frames, frames * substeps, dt, wall, first_step,
                      model.body_count, energy_start, energy_end, min_height, options.out, options.usd,
                      substeps=substeps, warnings=flagged, video=options.video, rerun=rerun_target)


def _raise_step_failure(exc, phase, source, options, solver_name, model, where):
    with _failure_context(phase, source, options, solver=solver_name, model=model, where=where):
        raise exc


def _usd_viewer_class():
    """``ViewerUSD`` with the USD plugin checked (one-line error naming the distribution otherwise)."""
    from .plugins import get_registry

    try:
        get_registry().importers.api("usd", "RecorderUSD")
    except (ImportError, AttributeError) as exc:
        _fail(f"--usd needs the USD plugin: {str(exc).splitlines()[0]} "
              "(install it with: pip install armillary-importer-usd)", exc)  # fmt: skip
    from .viewer.usd import ViewerUSD

    return ViewerUSD


def _live_viewers(options: RunOptions, model, fps: float) -> list[tuple[str, object]]:
    """``(flag, viewer)`` of every viewer fed during the run: ``--usd`` (ViewerUSD) and ``--rerun`` /
    ``--rerun-save`` (ViewerRerun), each framed on the scene's initial bounds."""
    from .viewer.framing import frame_bounds, scene_bounds

    viewers = []
    view = frame_bounds(*scene_bounds(model), up_axis=int(model.up_axis))
    if options.usd is not None:
        viewer_cls = _usd_viewer_class()
        try:
            viewer = viewer_cls(options.usd, fps=fps, num_frames=None)
            viewer.set_model(model)
        except ValueError as exc:
            _fail(f"--usd: {exc}", exc)
        viewer.show_contacts = False  # the stage holds the bodies' motion only
        viewer.set_camera_view(view)
        viewers.append(("--usd", viewer))
    if options.rerun or options.rerun_save is not None:
        from .viewer.rerun import ViewerRerun

        try:
            viewer = ViewerRerun(record_to_rrd=options.rerun_save, serve_web_viewer=False,
                                 keep_historical_data=True)  # fmt: skip
            if options.rerun and options.rerun_save is not None:  # live too: the spawned viewer as a second sink
                viewer.stream.spawn(connect=False)
                viewer.stream.set_sinks(viewer.rr.GrpcSink(), viewer.rr.FileSink(options.rerun_save))
        except (OSError, RuntimeError) as exc:
            _fail(f"--rerun: cannot start Rerun: {_first_line(exc)}", exc)
        viewer.set_model(model)
        viewer.set_camera_view(view)
        viewers.append(("--rerun", viewer))
    return viewers


def _log_viewers(viewers, state, contacts, t: float, trajectory, contact_state=None) -> None:
    """One frame of every live viewer: state, contacts (in ``contact_state``'s body frames), energy and
    contact count."""
    for _, viewer in viewers:
        viewer.begin_frame(t)
        viewer.log_state(state)
        if contacts is not None:
            viewer.log_contacts(contacts, contact_state if contact_state is not None else state)
        viewer.log_scalar("energy", trajectory.energy[-1])
        viewer.log_scalar("contact_count", trajectory.contact_count[-1])
        viewer.end_frame()


class TrajectoryRecorder:
    """Per-frame record of a simulation, saved as the trajectory ``.npz`` of ``armillary run`` that
    ``armillary plot`` reads (see the README's table).

    Each :meth:`record` copies to the host: ``body_q`` (B, 7), particle positions, the energy
    (kinetic + gravitational potential [J]), the number of rigid contacts in ``contacts`` and, when
    ``solver`` has ``diagnostics`` (the coupled solvers' per-iteration ADMM / proxy residuals, e.g.
    ``primal_residual``, ``dual_residual``, ``joint_gap``), every 1-D float array of it (the last
    step's iterations). Usage from a script (any solver)::

        rec = TrajectoryRecorder(model, solver)
        rec.record(state_0, 0.0)
        for frame in range(n):
            ...                                   # collide + step
            rec.record(state_0, t, contacts)
        rec.save("trajectory.npz", dt=dt, substeps=1)
    """

    def __init__(self, model, solver=None, *, frames: int | None = None):
        self.model = model
        self.solver = solver
        self.times: list[float] = []
        self.energy: list[float] = []
        self.contact_count: list[int] = []
        self.diagnostics: dict[str, list[np.ndarray]] = {}
        self._body_q: list[np.ndarray] = []
        self._particle_q: list[np.ndarray] = []
        self._energy = _EnergyMeter(model)

    def record(self, state, time: float, contacts=None) -> None:
        """Append one frame: ``state`` at simulation time ``time`` [s], the rigid contacts of
        ``contacts`` (``None``: 0) and the solver's diagnostics."""
        body_q = state.body_q.numpy() if self.model.body_count else np.zeros((0, 7), np.float32)
        particle_q = state.particle_q.numpy() if getattr(self.model, "particle_count", 0) else None
        self.times.append(float(time))
        self._body_q.append(np.array(body_q, dtype=np.float32, copy=True))
        if particle_q is not None:
            self._particle_q.append(np.array(particle_q, dtype=np.float32, copy=True))
        self.energy.append(self._energy(state, body_q, particle_q))
        count = 0
        if contacts is not None and getattr(contacts, "rigid_contact_count", None) is not None:
            count = int(contacts.rigid_contact_count.numpy()[0])
        self.contact_count.append(count)
        diag = getattr(self.solver, "diagnostics", None) if self.solver is not None else None
        if diag is not None and len(self.times) > 1:  # row 0, before any step: none
            import warp as wp

            for name, arr in (vars(diag).items() if hasattr(diag, "__dict__") else ()):
                if isinstance(arr, wp.array) and arr.ndim == 1 and arr.dtype in (wp.float32, wp.float64):
                    rows = self.diagnostics.setdefault(name, [None] * (len(self.times) - 1))
                    rows.append(np.array(arr.numpy(), dtype=np.float64))
        for rows in self.diagnostics.values():  # frames without a value: NaN rows in arrays()
            while len(rows) < len(self.times):
                rows.append(None)

    def body_q_array(self) -> np.ndarray:
        """All recorded body poses, (frames, B, 7) float32."""
        return np.stack(self._body_q) if self._body_q else np.zeros((0, self.model.body_count, 7), np.float32)

    def particle_q_array(self) -> np.ndarray | None:
        """All recorded particle positions, (frames, P, 3) float32 (``None`` without particles)."""
        return np.stack(self._particle_q) if self._particle_q else None

    def arrays(self, **extra) -> dict:
        """The ``.npz`` contents: ``body_q``, ``body_names``, ``time``, ``energy`` (frames,) [J],
        ``contact_count`` (frames,) int32 (row 0, the initial state before any collision: 0),
        ``diag_<name>`` (frames, iterations) float64 (row 0: NaN) and ``extra`` (dt, substeps, solver)."""
        labels = list(getattr(self.model, "body_label", None) or [f"body_{i}" for i in range(self.model.body_count)])
        out = {"body_q": self.body_q_array(), "body_names": np.array(labels, dtype=str),
               "time": np.asarray(self.times, dtype=np.float64), "energy": np.asarray(self.energy, dtype=np.float64),
               "contact_count": np.asarray(self.contact_count, dtype=np.int32)}  # fmt: skip
        for name, rows in self.diagnostics.items():
            width = max((len(r) for r in rows if r is not None), default=0)
            table = np.full((len(rows), width), np.nan)
            for k, r in enumerate(rows):
                if r is not None:
                    table[k, :len(r)] = r
            out[f"diag_{name}"] = table
        out.update(extra)
        return out

    def save(self, path, **extra) -> None:
        """Write :meth:`arrays` to ``path`` (``.npz``)."""
        np.savez(path, **self.arrays(**extra))


# ------------------------------------------------------------------ warmup
@dataclasses.dataclass
class WarmupReport:
    """What :func:`warmup` did: module names compiled, found in the cache, failed (name -> error)."""

    compiled: list[str]
    cached: list[str]
    failed: dict[str, str]
    skipped_imports: dict[str, str]
    seconds: float
    cache_dir: str


def _plugin_packages(registry, plugins=None) -> list[str]:
    """Top-level import packages of core and of every loaded plugin (only of ``plugins``, entry-point
    names, when given)."""
    records = {r.name: r for r in registry.plugins()}
    if plugins:
        unknown = [p for p in plugins if p not in records or records[p].status != "loaded"]
        if unknown:
            loaded = ", ".join(n for n, r in records.items() if r.status == "loaded")
            _fail(f"--plugin {', '.join(map(repr, unknown))}: no such loaded plugin; loaded plugins: {loaded}")
    packages = [] if plugins else ["armillary"]
    for record in records.values():
        if plugins and record.name not in plugins:
            continue
        if record.status == "loaded" and record.module:
            top = record.module.split(".")[0]
            if top not in packages:
                packages.append(top)
    return packages


def _import_all(packages: list[str]) -> dict[str, str]:
    """Import every submodule of ``packages`` (tests aside); returns module -> error for those that failed."""
    import importlib
    import pkgutil

    failed = {}
    for name in packages:
        try:
            package = importlib.import_module(name)
        except Exception as exc:
            failed[name] = f"{type(exc).__name__}: {_first_line(exc)}"
            continue
        for info in pkgutil.walk_packages(getattr(package, "__path__", []), name + "."):
            parts = info.name.split(".")
            if "tests" in parts or "testing" in parts or parts[-1] == "__main__":
                continue
            try:
                importlib.import_module(info.name)
            except Exception as exc:  # an optional dependency missing: that module is not warmed
                failed[info.name] = f"{type(exc).__name__}: {_first_line(exc)}"
    return failed


def kernel_modules(packages: list[str]) -> list:
    """The Warp modules with kernels defined in the (imported) Python modules of ``packages``."""
    import warp as wp

    found = {}
    for name, module in list(sys.modules.items()):
        if module is None or name.split(".")[0] not in packages:
            continue
        for value in list(vars(module).values()):
            if isinstance(value, wp.Kernel) and getattr(value, "module", None) is not None:
                wm = value.module
                if wm.name.split(".")[0] in packages and wm.kernels:
                    found.setdefault(wm.name, wm)
    return [found[n] for n in sorted(found)]


def warmup(devices=("cpu",), *, plugins=None, max_workers: int | None = None, log=None) -> WarmupReport:
    """Compile the kernels of core and of every installed plugin (only of ``plugins``, entry-point names,
    when given) for ``devices`` into Warp's kernel cache, so that later runs load them instead of compiling
    (``armillary warmup``). ``log(line)`` gets one line per module (default: nothing)."""
    import warp as wp
    from concurrent.futures import ThreadPoolExecutor, as_completed

    from .plugins import get_registry

    log = log or (lambda line: None)
    start = time.perf_counter()
    init_warp(None if all(str(d).startswith("cpu") for d in devices) else str(devices[0]))
    for d in devices:
        _check_device(d)
    packages = _plugin_packages(get_registry(), plugins)
    skipped = _import_all(packages)
    for name, err in skipped.items():
        log(f"skipped {name} (import failed: {err})")
    modules = kernel_modules(packages)
    cache_dir = str(wp.config.kernel_cache_dir)
    log(f"{len(modules)} kernel modules of {len(packages)} packages for {', '.join(map(str, devices))} "
        f"(Warp cache: {cache_dir})")

    def entries():
        try:
            return set(os.listdir(cache_dir))
        except OSError:
            return set()

    def load(module):
        t = time.perf_counter()
        before = entries()
        wp.force_load(device=list(devices), modules=[module], max_workers=0)
        new = [e for e in entries() - before if e.startswith(f"wp_{module.name}_")]
        return bool(new), time.perf_counter() - t

    compiled, cached, failed = [], [], {}
    workers = max_workers or min(os.cpu_count() or 1, 4)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(load, m): m for m in modules}
        for i, future in enumerate(as_completed(futures), 1):
            name = futures[future].name
            try:
                was_compiled, seconds = future.result()
            except Exception as exc:
                failed[name] = f"{type(exc).__name__}: {_first_line(exc)}"
                log(f"[{i:{len(str(len(modules)))}d}/{len(modules)}] {name}: FAILED: {failed[name]}")
                continue
            (compiled if was_compiled else cached).append(name)
            what = f"compiled in {seconds:.1f} s" if was_compiled else "already in the cache"
            log(f"[{i:{len(str(len(modules)))}d}/{len(modules)}] {name}: {what}")
    return WarmupReport(sorted(compiled), sorted(cached), failed, skipped, time.perf_counter() - start, cache_dir)

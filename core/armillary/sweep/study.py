"""Study files: schema, validation and expansion into runs (see ``docs/sweep.md``).

A study is a TOML file (or the equivalent dict) naming scenes, solver configurations, the
parameters to vary (grid and / or seeded random ranges), the duration and the measures. Everything
is checked by :func:`load_study` / :meth:`Study.from_dict` before anything runs: an unknown key,
solver, parameter or measure raises :class:`StudyError` (a ``ValueError``) on one line naming the
key and the allowed values.

This module imports no Warp, plugin or optional package at import time; solver names and
constructor arguments are checked against the installed plugins (``armillary.plugins``).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import importlib
import inspect
import itertools
import json
import math
import os
import random as _random
import sys
from pathlib import Path
from typing import Any

#: every measure a study may request (``measures = [...]``)
MEASURES = {
    "status": "1.0 when the run finished with finite, bounded states, else 0.0 (status column: ok|nan|blowup|error)",
    "trajectory": "tracked body COM / particle positions per frame in the run's .npz (table: frames recorded)",
    "error": "distance of the tracked points to the scene's reference run: error_max, error_rms, error_final [m]",
    "energy": "kinetic + gravitational energy: energy_start, energy_end, energy_change, energy_max_rise [J]",
    "joint_gap": "translational anchor gaps of REVOLUTE/BALL/FIXED joints and body-particle attachments: "
                 "joint_gap_max, joint_gap_mean [m] (per frame in the .npz)",
    "residuals": "coupled solvers with per-iteration diagnostics (SolverCoupledADMM): primal/dual residual of "
                 "every iteration of every step in the .npz; primal_residual_last, dual_residual_last (means over "
                 "steps of the last iteration) [m or rad, N or N m]",
    "speed": "steps_per_second (excluding the first step), wall_seconds, first_step_seconds",
}
#: measures whose values depend on the wall clock (left out when tables are compared)
TIMING_MEASURES = ("steps_per_second", "wall_seconds", "first_step_seconds")
DEFAULT_MEASURES = ("status", "error", "energy", "joint_gap", "speed")

TOP_KEYS = {
    "name": "study name (string)",
    "duration": "simulated seconds per run (> 0)",
    "dt": "solver time step [s] (> 0)",
    "substeps": "solver steps per recorded frame (integer >= 1)",
    "seed": "seed of the random ranges and of the scene callables that accept `seed` (integer)",
    "device": "Warp device (default: Warp's default)",
    "measures": f"list of: {', '.join(MEASURES)}",
    "blowup_distance": "a run whose tracked points leave this radius [m] around the origin is a blow-up (> 0)",
    "batch_worlds": "maximum runs packed into one multi-world model (integer >= 1; 1: no batching)",
    "scenes": "table of scenes",
    "configs": "table of solver configurations",
    "grid": "parameter grid applied to every configuration",
    "random": "random parameter ranges applied to every configuration",
    "quick": "table: what --quick runs (points, duration)",
}
SCENE_KEYS = {
    "source": "built-in scene name, model file path, or 'module:function' / 'file.py:function'",
    "args": "fixed keyword arguments of a scene callable",
    "reference": "reference run: {solver = NAME, options = {...}, dt = ...} or {config = NAME, params = {...}, "
                 "dt = ...}, or false",
    "bodies": "labels of the tracked bodies (default: all)",
    "particles": "tracked particles: 'all' (default), 'none' or a list of indices",
}
CONFIG_KEYS = {
    "scene": "name of the scene (default: the only scene)",
    "solver": "monolithic solver class name (or use coupler + entries)",
    "options": "constructor keyword arguments of the monolithic solver",
    "coupler": "coupled solver class name (SolverCoupled, SolverCoupledADMM, ...)",
    "coupling": "coupler Config fields (fixed values)",
    "entries": "table: entry name -> {solver = NAME, options = {...}, substeps = N}",
    "grid": "parameter grid of this configuration (added to the study's)",
    "random": "random parameter ranges of this configuration (added to the study's)",
}
REFERENCE_KEYS = {"solver": "monolithic solver", "options": "its constructor arguments", "config": "a configuration",
                  "params": "parameter values for the configuration", "dt": "time step of the reference [s]"}
ENTRY_KEYS = {"solver": "solver class name", "options": "constructor keyword arguments", "substeps": "substeps (>= 1)"}
RANDOM_KEYS = {"count": "number of random points (>= 1)", "low": "lower bound", "high": "upper bound",
               "log": "sample log-uniformly (bool)", "integer": "round to integers (bool)",
               "choices": "pick from a list instead of a range"}
QUICK_KEYS = {"points": "points per configuration (default 2)", "duration": "simulated seconds (default 0.05)"}
PARAM_PREFIXES = "dt, seed, scene.<arg>, solver.<arg> (monolithic), coupler.<field> (coupled), <entry>.<arg>, " \
                 "<entry>.substeps"
#: parameters that change only the model's contents (masses, initial conditions): packable into one multi-world model
PER_WORLD_PREFIXES = ("scene.", "seed")


class StudyError(ValueError):
    """A study that cannot run: one line naming the key, the value and what is allowed."""


def _fail(msg: str):
    raise StudyError(msg)


def _check_keys(table: dict, allowed: dict, where: str) -> None:
    if not isinstance(table, dict):
        _fail(f"{where}: expected a table, got {type(table).__name__} {table!r}")
    for key in table:
        if key not in allowed:
            _fail(f"{where}: unknown key {key!r}; allowed: {', '.join(allowed)}")


def _number(value, where: str, *, positive=False, integer=False, minimum=None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        _fail(f"{where} = {value!r}: must be a finite {'integer' if integer else 'number'}")
    if integer and int(value) != value:
        _fail(f"{where} = {value!r}: must be an integer")
    if positive and not value > 0:
        _fail(f"{where} = {value!r}: must be > 0")
    if minimum is not None and value < minimum:
        _fail(f"{where} = {value!r}: must be >= {minimum}")
    return int(value) if integer else float(value)


# ---------------------------------------------------------------------- specs
@dataclasses.dataclass
class SceneSpec:
    """One scene: ``kind`` is ``"builtin"``, ``"file"`` or ``"callable"``."""

    name: str
    source: str
    kind: str
    args: dict
    reference: dict | None
    bodies: list | None
    particles: Any
    path: str = ""  # absolute model file or Python file (kind file / callable from a file)
    arg_names: tuple = ()  # keyword arguments the callable accepts (None: any)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class ConfigSpec:
    """One solver configuration: a monolithic ``solver`` or a ``coupler`` with ``entries``."""

    name: str
    scene: str
    solver: str | None
    options: dict
    coupler: str | None
    coupling: dict
    entries: dict
    grid: dict
    random: dict

    @property
    def coupled(self) -> bool:
        return self.coupler is not None

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    def identity(self) -> dict:
        """What defines this configuration's runs (its grid and random ranges do not: adding grid
        values keeps the ids of the runs already done)."""
        d = self.as_dict()
        for key in ("name", "grid", "random"):
            d.pop(key)
        return d


@dataclasses.dataclass
class Point:
    """One run: a configuration at one parameter point (``params``: flat, sorted, JSON values)."""

    run_id: str
    config: str
    scene: str
    params: dict
    dt: float
    duration: float
    substeps: int
    reference: str | None  # run id of the scene reference this run is compared with
    is_reference: bool = False

    def per_world_key(self) -> str:
        """Runs with equal keys differ only in per-world parameters (scene arguments, seed)."""
        rest = {k: v for k, v in self.params.items() if not k.startswith(PER_WORLD_PREFIXES)}
        return _digest([self.config, self.scene, rest, self.dt, self.duration, self.substeps, self.is_reference])


def _digest(obj) -> str:
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha1(text.encode()).hexdigest()[:12]


@dataclasses.dataclass
class Study:
    """A validated study (build it with :func:`load_study` or :meth:`Study.from_dict`).

    Attributes: see ``docs/sweep.md``; ``raw`` is the dict it was read from, ``base_dir`` the
    folder relative paths in it are resolved against.
    """

    name: str
    duration: float
    dt: float
    substeps: int
    seed: int
    device: str | None
    measures: tuple
    blowup_distance: float
    batch_worlds: int
    scenes: dict
    configs: dict
    quick_points: int
    quick_duration: float
    raw: dict
    base_dir: str

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_dict(cls, data: dict, base_dir: str | os.PathLike = ".") -> Study:
        """Validate ``data`` (the TOML's dict) and return the study; raises :class:`StudyError`."""
        raw = copy.deepcopy(data)
        _check_keys(data, TOP_KEYS, "study")
        base_dir = os.path.abspath(str(base_dir))
        name = data.get("name", "study")
        if not isinstance(name, str) or not name:
            _fail(f"study: name = {name!r}: must be a non-empty string")
        duration = _number(data.get("duration", 1.0), "duration", positive=True)
        dt = _number(data.get("dt", 1.0 / 600.0), "dt", positive=True)
        substeps = _number(data.get("substeps", 1), "substeps", integer=True, minimum=1)
        seed = _number(data.get("seed", 0), "seed", integer=True)
        device = data.get("device")
        if device is not None and not isinstance(device, str):
            _fail(f"device = {device!r}: must be a string such as 'cpu' or 'cuda:0'")
        measures = data.get("measures", list(DEFAULT_MEASURES))
        if not isinstance(measures, list) or not measures:
            _fail(f"measures = {measures!r}: must be a non-empty list of: {', '.join(MEASURES)}")
        for m in measures:
            if m not in MEASURES:
                _fail(f"measures: unknown measure {m!r}; allowed: {', '.join(MEASURES)}")
        measures = tuple(dict.fromkeys(["status", *measures]))
        blowup = _number(data.get("blowup_distance", 1000.0), "blowup_distance", positive=True)
        batch = _number(data.get("batch_worlds", 16), "batch_worlds", integer=True, minimum=1)
        quick = data.get("quick", {})
        _check_keys(quick, QUICK_KEYS, "quick")
        quick_points = _number(quick.get("points", 2), "quick.points", integer=True, minimum=1)
        quick_duration = _number(quick.get("duration", 0.05), "quick.duration", positive=True)

        scenes_raw = data.get("scenes")
        if not isinstance(scenes_raw, dict) or not scenes_raw:
            _fail("study: 'scenes' is required: a table of scenes, e.g. [scenes.main] source = \"falling_shapes\"")
        scenes = {n: _scene_spec(n, s, base_dir) for n, s in scenes_raw.items()}
        configs_raw = data.get("configs")
        if not isinstance(configs_raw, dict) or not configs_raw:
            _fail("study: 'configs' is required: a table of solver configurations, e.g. [configs.xpbd] "
                  "solver = \"SolverXPBD\"")
        top_grid = data.get("grid", {})
        top_random = data.get("random", {})
        configs = {n: _config_spec(n, c, scenes, top_grid, top_random) for n, c in configs_raw.items()}
        study = cls(name, duration, dt, substeps, seed, device, measures, blowup, batch, scenes, configs,
                    quick_points, quick_duration, raw, base_dir)
        study._validate_parameters()
        study._validate_references()
        if "residuals" in measures and not any(c.coupler == "SolverCoupledADMM" for c in configs.values()):
            _fail("measures: 'residuals' needs a configuration with coupler = \"SolverCoupledADMM\" (the only "
                  "coupled solver with per-iteration diagnostics); none has one")
        return study

    # ------------------------------------------------------------------ validation helpers
    def _param_names(self, config: ConfigSpec) -> dict:
        """Allowed parameter names of ``config`` -> where they go."""
        from ..plugins import get_registry

        scene = self.scenes[config.scene]
        allowed = {"dt": "time step", "seed": "seed"}
        if scene.kind == "callable":
            for a in scene.arg_names or ():
                allowed[f"scene.{a}"] = "scene argument"
        registry = get_registry()
        if config.coupled:
            cls = _solver_class(registry, config.coupler, f"configs.{config.name}.coupler")
            for f in _config_fields(cls):
                allowed[f"coupler.{f}"] = "coupler config"
            for ename, e in config.entries.items():
                ecls = _solver_class(registry, e["solver"], f"configs.{config.name}.entries.{ename}.solver")
                for a in _init_args(ecls):
                    allowed[f"{ename}.{a}"] = "entry solver argument"
                allowed[f"{ename}.substeps"] = "entry substeps"
        else:
            cls = _solver_class(registry, config.solver, f"configs.{config.name}.solver")
            for a in _init_args(cls):
                allowed[f"solver.{a}"] = "solver argument"
        return allowed

    def _check_param(self, config: ConfigSpec, key: str, allowed: dict, where: str) -> None:
        if key in allowed:
            return
        scene = self.scenes[config.scene]
        if key.startswith("scene.") and scene.kind == "callable" and scene.arg_names is None:
            return  # the callable takes **kwargs
        _fail(f"{where}: unknown parameter {key!r} for configuration {config.name!r}; allowed: "
              f"{', '.join(allowed)}")

    def _validate_parameters(self) -> None:
        from ..plugins import get_registry

        registry = get_registry()
        for c in self.configs.values():
            allowed = self._param_names(c)
            for key in c.grid:
                self._check_param(c, key, allowed, f"configs.{c.name}.grid")
            for key in c.random:
                self._check_param(c, key, allowed, f"configs.{c.name}.random")
            if c.coupled:
                cls = registry.solvers.resolve(c.coupler)
                fields = _config_fields(cls)
                for key in c.coupling:
                    if key not in fields:
                        _fail(f"configs.{c.name}.coupling: unknown field {key!r} of {c.coupler}; allowed: "
                              f"{', '.join(fields) or 'none'}")
                for ename, e in c.entries.items():
                    args = _init_args(registry.solvers.resolve(e["solver"]))
                    for key in e["options"]:
                        if args is not None and key not in args:
                            _fail(f"configs.{c.name}.entries.{ename}.options: unknown argument {key!r} of "
                                  f"{e['solver']}; allowed: {', '.join(args)}")
            else:
                args = _init_args(registry.solvers.resolve(c.solver))
                for key in c.options:
                    if args is not None and key not in args:
                        _fail(f"configs.{c.name}.options: unknown argument {key!r} of {c.solver}; allowed: "
                              f"{', '.join(args)}")
            for v in c.grid.get("dt", []):
                self._check_dt(v, f"configs.{c.name}.grid.dt")
            if "dt" in c.random:
                _fail(f"configs.{c.name}.random.dt: dt can only be varied on a grid (every dt must divide the frame "
                      "interval)")
            if c.coupled and self.scenes[c.scene].kind == "callable":
                owners = self._scene_entries(self.scenes[c.scene])
                missing = [e for e in c.entries if e not in owners]
                if missing:
                    _fail(f"configs.{c.name}.entries.{missing[0]}: the scene {c.scene!r} defines no entry "
                          f"{missing[0]!r}; allowed: {', '.join(owners) or 'none (it returns no entries)'}")
            scene = self.scenes[c.scene]
            if scene.kind == "callable" and scene.arg_names is not None:
                for key in scene.args:
                    if key not in scene.arg_names:
                        _fail(f"scenes.{scene.name}.args: unknown argument {key!r} of {scene.source}; allowed: "
                              f"{', '.join(scene.arg_names) or 'none'}")

    def _scene_entries(self, scene: SceneSpec) -> list:
        """Entry names the scene callable returns (built once with its fixed arguments)."""
        cache = self.__dict__.setdefault("_entry_cache", {})
        if scene.name not in cache:
            from ..runner import init_warp
            from .execute import build_scene

            init_warp(self.device)
            spec = {"scene": scene.as_dict(), "params": {"seed": self.seed}}
            try:
                _, ownership, _ = build_scene(spec)
            except StudyError:
                raise
            except Exception as exc:
                _fail(f"scenes.{scene.name}: {scene.source} failed: {type(exc).__name__}: {exc}")
            cache[scene.name] = list(ownership)
        return cache[scene.name]

    def _check_dt(self, dt, where) -> None:
        dt = _number(dt, where, positive=True)
        frame = self.dt * self.substeps
        n = frame / dt
        if abs(n - round(n)) > 1e-6 * max(1.0, n):
            _fail(f"{where} = {dt}: the frame interval dt x substeps = {frame:g} s must be a whole number of steps "
                  f"of {dt:g} s")

    def _validate_references(self) -> None:
        from ..plugins import get_registry

        registry = get_registry()
        for s in self.scenes.values():
            ref = s.reference
            if ref is None:
                continue
            where = f"scenes.{s.name}.reference"
            if "dt" in ref:
                self._check_dt(ref["dt"], f"{where}.dt")
            if "solver" in ref:
                cls = _solver_class(registry, ref["solver"], f"{where}.solver")
                args = _init_args(cls)
                for key in ref.get("options", {}):
                    if args is not None and key not in args:
                        _fail(f"{where}.options: unknown argument {key!r} of {ref['solver']}; allowed: "
                              f"{', '.join(args)}")
            else:
                cfg = self.configs.get(ref["config"])
                if cfg is None:
                    _fail(f"{where}.config = {ref['config']!r}: unknown configuration; allowed: "
                          f"{', '.join(self.configs)}")
                if cfg.scene != s.name:
                    _fail(f"{where}.config = {ref['config']!r}: that configuration runs scene {cfg.scene!r}, "
                          f"not {s.name!r}")
                allowed = self._param_names(cfg)
                for key in ref.get("params", {}):
                    self._check_param(cfg, key, allowed, f"{where}.params")

    # ------------------------------------------------------------------ expansion
    def points(self, *, quick: bool = False) -> tuple[list[Point], list[Point]]:
        """``(references, runs)``: every run of the study (``quick``: the first / last few points of each
        configuration at ``quick.duration``), and the reference runs they are compared with."""
        rng = _random.Random(self.seed)
        duration = min(self.duration, self.quick_duration) if quick else self.duration
        runs, refs = [], {}
        for c in self.configs.values():
            pts = _expand(c.grid, c.random, rng, f"configs.{c.name}")
            if quick and len(pts) > self.quick_points:
                idx = sorted({round(i * (len(pts) - 1) / max(1, self.quick_points - 1))
                              for i in range(self.quick_points)})
                pts = [pts[i] for i in idx]
            scene = self.scenes[c.scene]
            for p in pts:
                params = dict(sorted(p.items()))
                params.setdefault("seed", self.seed)
                dt = float(params.get("dt", self.dt))
                ref_id = None
                if scene.reference is not None and "error" in self.measures:
                    ref = self._reference_point(scene, params, duration)
                    refs.setdefault(ref.run_id, ref)
                    ref_id = ref.run_id
                run_id = _digest(["run", self._scene_identity(scene), c.identity(), params, dt, duration,
                                  self.substeps])
                runs.append(Point(run_id, c.name, c.scene, params, dt, duration, self.substeps, ref_id))
        seen = {}
        for r in runs:
            if r.run_id in seen:
                _fail(f"configurations {seen[r.run_id]!r} and {r.config!r} produce the same run "
                      f"({r.params}); give them different solvers or parameters")
            seen[r.run_id] = r.config
        return list(refs.values()), runs

    def _scene_identity(self, scene: SceneSpec) -> list:
        return [scene.source, scene.args, scene.bodies, scene.particles]

    def _reference_point(self, scene: SceneSpec, params: dict, duration: float) -> Point:
        ref = scene.reference
        per_world = {k: v for k, v in params.items() if k.startswith(PER_WORLD_PREFIXES)}
        dt = float(ref.get("dt", self.dt))
        if "solver" in ref:
            cfg_name = f"reference:{scene.name}"
            rparams = dict(per_world)
            ident = ["ref", ref["solver"], ref.get("options", {})]
        else:
            cfg_name = ref["config"]
            rparams = {**per_world, **ref.get("params", {})}
            ident = ["ref", self.configs[cfg_name].identity()]
        rparams = dict(sorted(rparams.items()))
        frame = self.dt * self.substeps
        substeps = int(round(frame / dt))
        run_id = _digest([*ident, self._scene_identity(scene), rparams, dt, duration, substeps])
        return Point(run_id, cfg_name, scene.name, rparams, dt, duration, substeps, None, True)

    def run_spec(self, point: Point) -> dict:
        """Everything a worker needs to simulate ``point`` (plain, picklable data)."""
        scene = self.scenes[point.scene]
        if point.is_reference and point.config.startswith("reference:"):
            ref = scene.reference
            config = ConfigSpec(point.config, scene.name, ref["solver"], dict(ref.get("options", {})), None, {}, {},
                                {}, {}).as_dict()
        else:
            config = self.configs[point.config].as_dict()
        frame = self.dt * self.substeps
        return {
            "run_id": point.run_id, "config": config, "scene": scene.as_dict(), "params": dict(point.params),
            "dt": point.dt, "steps_per_frame": int(round(frame / point.dt)), "frames": _frames(point.duration, frame),
            "device": self.device, "measures": list(self.measures), "blowup_distance": self.blowup_distance,
            "is_reference": point.is_reference,
        }

    def to_json(self) -> str:
        """The study as JSON (``study.json`` in the output folder)."""
        return json.dumps({"base_dir": self.base_dir, "study": self.raw}, indent=2, sort_keys=True, default=str)


def _frames(duration: float, frame: float) -> int:
    return max(1, int(math.ceil(duration / frame - 1e-9)))


def _expand(grid: dict, rand: dict, rng: _random.Random, where: str) -> list[dict]:
    """Grid points (cartesian product, in key order) times random points."""
    keys = list(grid)
    points = [dict(zip(keys, combo)) for combo in itertools.product(*(grid[k] for k in keys))] if keys else [{}]
    if rand:
        count = rand.get("count", 1)
        samples = []
        for _ in range(count):
            s = {}
            for key, spec in rand.items():
                if key == "count":
                    continue
                if "choices" in spec:
                    s[key] = spec["choices"][rng.randrange(len(spec["choices"]))]
                    continue
                lo, hi = spec["low"], spec["high"]
                u = rng.random()
                v = math.exp(math.log(lo) + u * (math.log(hi) - math.log(lo))) if spec.get("log") else lo + u * (hi - lo)
                s[key] = int(round(v)) if spec.get("integer") else float(v)
            samples.append(s)
        points = [{**p, **s} for p in points for s in samples]
    return points


def _validate_grid(grid, where: str) -> dict:
    if not isinstance(grid, dict):
        _fail(f"{where}: expected a table of parameter = [values], got {grid!r}")
    out = {}
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            _fail(f"{where}.{key} = {values!r}: must be a non-empty list of values")
        for v in values:
            if not isinstance(v, (int, float, str, bool)):
                _fail(f"{where}.{key}: value {v!r} must be a number, string or boolean")
        out[key] = list(values)
    return out


def _validate_random(rand, where: str) -> dict:
    if not isinstance(rand, dict):
        _fail(f"{where}: expected a table of parameter = {{low, high}}, got {rand!r}")
    out = {}
    for key, spec in rand.items():
        if key == "count":
            out["count"] = _number(spec, f"{where}.count", integer=True, minimum=1)
            continue
        _check_keys(spec, RANDOM_KEYS, f"{where}.{key}")
        if "choices" in spec:
            if not isinstance(spec["choices"], list) or not spec["choices"]:
                _fail(f"{where}.{key}.choices: must be a non-empty list")
        else:
            if "low" not in spec or "high" not in spec:
                _fail(f"{where}.{key}: needs 'low' and 'high' (or 'choices')")
            lo = _number(spec["low"], f"{where}.{key}.low")
            hi = _number(spec["high"], f"{where}.{key}.high")
            if hi < lo:
                _fail(f"{where}.{key}: high = {hi} is below low = {lo}")
            if spec.get("log") and lo <= 0:
                _fail(f"{where}.{key}: log = true needs low > 0, got {lo}")
        out[key] = dict(spec)
    return out


def _scene_spec(name: str, s, base_dir: str) -> SceneSpec:
    where = f"scenes.{name}"
    if isinstance(s, str):
        s = {"source": s}
    _check_keys(s, SCENE_KEYS, where)
    source = s.get("source")
    if not isinstance(source, str) or not source:
        _fail(f"{where}.source: required: a built-in scene name, a model file or 'module:function'")
    args = s.get("args", {})
    if not isinstance(args, dict):
        _fail(f"{where}.args = {args!r}: must be a table")
    ref = s.get("reference", None)
    if ref is False:
        ref = None
    elif ref is not None:
        _check_keys(ref, REFERENCE_KEYS, f"{where}.reference")
        if ("solver" in ref) == ("config" in ref):
            _fail(f"{where}.reference: give exactly one of 'solver' (a monolithic solver) or 'config'")
        if "solver" in ref and "params" in ref:
            _fail(f"{where}.reference.params: only with 'config' (a monolithic reference takes 'options')")
        if "config" in ref and "options" in ref:
            _fail(f"{where}.reference.options: only with 'solver' (a configuration reference takes 'params')")
    bodies = s.get("bodies")
    if bodies is not None and (not isinstance(bodies, list) or not all(isinstance(b, str) for b in bodies)):
        _fail(f"{where}.bodies = {bodies!r}: must be a list of body labels")
    particles = s.get("particles", "all")
    if not (particles in ("all", "none") or (isinstance(particles, list)
                                             and all(isinstance(p, int) and p >= 0 for p in particles))):
        _fail(f"{where}.particles = {particles!r}: must be 'all', 'none' or a list of particle indices")
    kind, path, arg_names = _classify_source(source, base_dir, where)
    return SceneSpec(name, source, kind, dict(args), ref, bodies, particles, path, arg_names)


def _classify_source(source: str, base_dir: str, where: str):
    if ":" in source and not os.path.exists(os.path.join(base_dir, source)):
        mod, _, fn = source.rpartition(":")
        fn_obj = load_callable(source, base_dir)
        try:
            params = inspect.signature(fn_obj).parameters
        except (TypeError, ValueError):
            return "callable", _callable_path(mod, base_dir), None
        if any(p.kind == p.VAR_KEYWORD for p in params.values()):
            return "callable", _callable_path(mod, base_dir), None
        names = tuple(n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
        return "callable", _callable_path(mod, base_dir), names
    suffix = Path(source).suffix.lower()
    if suffix:
        path = source if os.path.isabs(source) else os.path.join(base_dir, source)
        if not os.path.isfile(path):
            _fail(f"{where}.source = {source!r}: no such model file ({path})")
        from ..plugins import get_registry

        if get_registry().importers.for_path(path) is None:
            suffixes = sorted({x for e in get_registry().importers.entries() for x in e.meta["suffixes"]})
            _fail(f"{where}.source = {source!r}: no installed importer reads {suffix!r} files; allowed: "
                  f"{', '.join(suffixes)}")
        return "file", os.path.abspath(path), ()
    from ..plugins import get_registry

    names = get_registry().scenes.names()
    if source not in names:
        _fail(f"{where}.source = {source!r}: unknown built-in scene (and not a model file or 'module:function'); "
              f"allowed: {', '.join(names)}")
    return "builtin", "", ()


def _callable_path(mod: str, base_dir: str) -> str:
    if mod.endswith(".py"):
        return mod if os.path.isabs(mod) else os.path.join(base_dir, mod)
    return ""


def load_callable(source: str, base_dir: str = "."):
    """The function named by ``'package.module:function'`` or ``'path/file.py:function'`` (relative
    to ``base_dir``); raises :class:`StudyError`."""
    mod, _, fn = source.rpartition(":")
    try:
        if mod.endswith(".py"):
            path = mod if os.path.isabs(mod) else os.path.join(base_dir, mod)
            if not os.path.isfile(path):
                _fail(f"scene source {source!r}: no such Python file ({path})")
            name = "armillary_sweep_scene_" + hashlib.sha1(os.path.abspath(path).encode()).hexdigest()[:10]
            module = sys.modules.get(name)
            if module is None:
                spec = importlib.util.spec_from_file_location(name, path)
                module = importlib.util.module_from_spec(spec)
                sys.modules[name] = module
                spec.loader.exec_module(module)
        else:
            module = importlib.import_module(mod)
    except StudyError:
        raise
    except Exception as exc:
        _fail(f"scene source {source!r}: cannot import {mod!r}: {type(exc).__name__}: {exc}")
    obj = getattr(module, fn, None)
    if not callable(obj):
        public = sorted(n for n in dir(module) if not n.startswith("_") and callable(getattr(module, n)))
        _fail(f"scene source {source!r}: {mod!r} has no function {fn!r}; allowed: {', '.join(public)}")
    return obj


def _config_spec(name: str, c, scenes: dict, top_grid, top_random) -> ConfigSpec:
    where = f"configs.{name}"
    _check_keys(c, CONFIG_KEYS, where)
    scene = c.get("scene")
    if scene is None:
        if len(scenes) != 1:
            _fail(f"{where}.scene: required when the study has several scenes; allowed: {', '.join(scenes)}")
        scene = next(iter(scenes))
    if scene not in scenes:
        _fail(f"{where}.scene = {scene!r}: unknown scene; allowed: {', '.join(scenes)}")
    solver, coupler = c.get("solver"), c.get("coupler")
    if (solver is None) == (coupler is None):
        _fail(f"{where}: give exactly one of 'solver' (monolithic) or 'coupler' (with 'entries')")
    options = c.get("options", {})
    if not isinstance(options, dict):
        _fail(f"{where}.options = {options!r}: must be a table")
    if coupler is not None and options:
        _fail(f"{where}.options: only for a monolithic 'solver'; a coupler takes 'coupling' and 'entries'")
    coupling = c.get("coupling", {})
    if not isinstance(coupling, dict):
        _fail(f"{where}.coupling = {coupling!r}: must be a table")
    entries = c.get("entries", {})
    if coupler is None and (entries or coupling):
        _fail(f"{where}: 'entries' and 'coupling' need a 'coupler'")
    if coupler is not None and not entries:
        _fail(f"{where}.entries: a coupler needs entries: entries.<name> = {{ solver = \"SolverXPBD\" }}")
    out_entries = {}
    for ename, e in entries.items():
        if isinstance(e, str):
            e = {"solver": e}
        _check_keys(e, ENTRY_KEYS, f"{where}.entries.{ename}")
        if ename in ("dt", "seed", "scene", "solver", "coupler"):
            _fail(f"{where}.entries.{ename}: entry name {ename!r} is reserved; use another name")
        if not isinstance(e.get("solver"), str):
            _fail(f"{where}.entries.{ename}.solver: required: a solver class name")
        sub = _number(e.get("substeps", 1), f"{where}.entries.{ename}.substeps", integer=True, minimum=1)
        out_entries[ename] = {"solver": e["solver"], "options": dict(e.get("options", {})), "substeps": sub}
    grid = {**_validate_grid(top_grid, "grid"), **_validate_grid(c.get("grid", {}), f"{where}.grid")}
    rand = {**_validate_random(top_random, "random"), **_validate_random(c.get("random", {}), f"{where}.random")}
    return ConfigSpec(name, scene, solver, dict(options), coupler, dict(coupling), out_entries, grid, rand)


def _solver_class(registry, name, where: str):
    if not isinstance(name, str):
        _fail(f"{where} = {name!r}: must be a solver class name")
    if registry.solvers.get(name) is None:
        _fail(f"{where} = {name!r}: unknown solver; allowed: {', '.join(registry.solvers.names())}")
    try:
        return registry.solvers.resolve(name)
    except Exception as exc:
        _fail(f"{where} = {name!r}: cannot load it: {str(exc).splitlines()[0]}")


def _init_args(cls):
    """Keyword arguments of ``cls.__init__`` after ``model`` (``None``: it takes ``**kwargs``)."""
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    if any(p.kind == p.VAR_KEYWORD for p in params):
        return None
    names = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    return tuple(n for n in names if n not in ("model", "entries", "coupling"))


def _config_fields(cls) -> tuple:
    cfg = getattr(cls, "Config", None)
    if cfg is None or not dataclasses.is_dataclass(cfg):
        return ()
    return tuple(f.name for f in dataclasses.fields(cfg) if not f.name.startswith("_"))


def load_study(path: str | os.PathLike) -> Study:
    """Read and validate the TOML study file ``path`` (relative paths in it: from its folder)."""
    path = Path(path)
    if not path.is_file():
        raise StudyError(f"study file {str(path)!r}: no such file")
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib
        except ModuleNotFoundError:
            raise StudyError("reading a TOML study on Python 3.10 needs tomli: pip install tomli") from None
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise StudyError(f"study file {str(path)!r}: invalid TOML: {exc}") from None
    return Study.from_dict(data, base_dir=path.parent)

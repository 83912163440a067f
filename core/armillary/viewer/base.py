"""``ViewerBase``: the frame loop every viewer shares, and host-side scene helpers.

The loop (the reference engine's)::

    viewer.set_model(model)
    while viewer.is_running():
        ...                                   # step the simulation
        viewer.begin_frame(time)              # simulation time [s]
        viewer.log_state(state)               # body poses X_WB, particles
        viewer.log_contacts(contacts, state)  # contact points and normals (world frame)
        viewer.log_scalar("energy", e)        # any named scalar
        viewer.end_frame()
    viewer.close()

Backends override the ``log_*`` methods they can show; :meth:`ViewerBase.log_contacts` turns a
:class:`~armillary.Contacts` buffer into world-frame points and normal segments (one Warp launch and
one host copy of the valid rows) and hands them to :meth:`log_points` / :meth:`log_lines`.
"""

from __future__ import annotations

import math

import numpy as np
import warp as wp

__all__ = ["ViewerBase", "contact_world_geometry"]


@wp.kernel
def _contact_world_kernel(
    count: wp.array(dtype=wp.int32),
    shape0: wp.array(dtype=wp.int32),
    shape1: wp.array(dtype=wp.int32),
    point0: wp.array(dtype=wp.vec3),
    point1: wp.array(dtype=wp.vec3),
    normal: wp.array(dtype=wp.vec3),
    shape_body: wp.array(dtype=wp.int32),
    body_q: wp.array(dtype=wp.transform),
    out_p0: wp.array(dtype=wp.vec3),
    out_p1: wp.array(dtype=wp.vec3),
    out_n: wp.array(dtype=wp.vec3),
):
    i = wp.tid()
    if i >= count[0]:
        return
    p0 = point0[i]
    p1 = point1[i]
    s0 = shape0[i]
    s1 = shape1[i]
    if s0 >= 0:
        b0 = shape_body[s0]
        if b0 >= 0:
            p0 = wp.transform_point(body_q[b0], p0)
    if s1 >= 0:
        b1 = shape_body[s1]
        if b1 >= 0:
            p1 = wp.transform_point(body_q[b1], p1)
    out_p0[i] = p0
    out_p1[i] = p1
    out_n[i] = normal[i]


def contact_world_geometry(contacts, state, model) -> dict[str, np.ndarray]:
    """World-frame geometry of the valid rigid contacts (host arrays).

    Returns a dict with ``count`` (int), ``shape0`` / ``shape1`` (count,) int32, ``point0`` /
    ``point1`` (count, 3) float32: the contact points on shape 0 / 1 in the world frame [m] (for a
    sphere or capsule on its centre or axis, see ``Contacts.rigid_contact_margin0``), ``normal``
    (count, 3): unit normals from shape 0 toward shape 1 (world frame).
    """
    empty = {"count": 0, "shape0": np.zeros(0, np.int32), "shape1": np.zeros(0, np.int32),
             "point0": np.zeros((0, 3), np.float32), "point1": np.zeros((0, 3), np.float32),
             "normal": np.zeros((0, 3), np.float32)}  # fmt: skip
    if contacts is None or getattr(contacts, "rigid_contact_count", None) is None:
        return empty
    n_max = int(contacts.rigid_contact_point0.shape[0]) if contacts.rigid_contact_point0 is not None else 0
    if n_max == 0:
        return empty
    device = contacts.rigid_contact_point0.device
    body_q = state.body_q if state is not None and state.body_q is not None else \
        wp.zeros(1, dtype=wp.transform, device=device)  # fmt: skip
    shape_body = model.shape_body if model is not None and model.shape_body is not None else \
        wp.full(max(int(contacts.rigid_contact_shape0.numpy().max(initial=0)) + 1, 1), -1, dtype=wp.int32,
                device=device)  # fmt: skip
    p0 = wp.zeros(n_max, dtype=wp.vec3, device=device)
    p1 = wp.zeros(n_max, dtype=wp.vec3, device=device)
    nn = wp.zeros(n_max, dtype=wp.vec3, device=device)
    wp.launch(_contact_world_kernel, dim=n_max, device=device,
              inputs=[contacts.rigid_contact_count, contacts.rigid_contact_shape0, contacts.rigid_contact_shape1,
                      contacts.rigid_contact_point0, contacts.rigid_contact_point1, contacts.rigid_contact_normal,
                      shape_body, body_q],
              outputs=[p0, p1, nn])  # fmt: skip
    count = min(int(contacts.rigid_contact_count.numpy()[0]), n_max)
    return {"count": count, "shape0": contacts.rigid_contact_shape0.numpy()[:count].copy(),
            "shape1": contacts.rigid_contact_shape1.numpy()[:count].copy(), "point0": p0.numpy()[:count],
            "point1": p1.numpy()[:count], "normal": nn.numpy()[:count]}  # fmt: skip


def _host(array) -> np.ndarray | None:
    if array is None:
        return None
    if isinstance(array, wp.array):
        return array.numpy()
    return np.asarray(array)


class ViewerBase:
    """The frame loop shared by every viewer (see the module documentation).

    Attributes:
        model: the :class:`~armillary.Model` given to :meth:`set_model` (``None`` before).
        time: simulation time of the current frame [s] (set by :meth:`begin_frame`).
        frame_count: frames ended so far (:meth:`end_frame`).
        show_contacts: :meth:`log_contacts` draws contacts only while this is True. Offline viewers
            have no user interface to switch it on, so it is True by default (the reference engine's
            interactive viewer starts with it off).
        show_particles: :meth:`log_state` shows particles (spheres of ``particle_radius``) when True.
        contact_normal_length: length of the drawn contact normals [m] (0: a tenth of the scene size).
        scalar_history: every :meth:`log_scalar` value, ``name -> [(time, value), ...]``.
    """

    def __init__(self):
        self.model = None
        self.device = None
        self.time = 0.0
        self.frame_count = 0
        self.show_contacts = True
        self.show_particles = True
        self.contact_normal_length = 0.0
        self.scalar_history: dict[str, list[tuple[float, float]]] = {}
        self.camera_view = None
        self._closed = False
        self._paused = False

    # ------------------------------------------------------------------ model
    def set_model(self, model) -> None:
        """Set the :class:`~armillary.Model` to show (``None`` clears it)."""
        if model is not None and not hasattr(model, "body_count"):
            raise ValueError(f"{type(self).__name__}.set_model: expected an armillary.Model, "
                             f"got {type(model).__name__}")  # fmt: skip
        self.model = model
        self.device = None if model is None else model.device

    def _require_model(self, what: str):
        if self.model is None:
            raise RuntimeError(f"{type(self).__name__}.{what}: call set_model(model) first")

    # ------------------------------------------------------------------ frames
    def begin_frame(self, time: float) -> None:
        """Start a frame at simulation time ``time`` [s]."""
        t = float(time)
        if not math.isfinite(t):
            raise ValueError(f"{type(self).__name__}.begin_frame: time must be a finite number of seconds, got {time}")
        self.time = t

    def end_frame(self) -> None:
        """End the current frame."""
        self.frame_count += 1

    def is_running(self) -> bool:
        """True until :meth:`close` (backends with a frame limit stop earlier)."""
        return not self._closed

    def is_paused(self) -> bool:
        """Whether the simulation should be paused (offline viewers never pause)."""
        return self._paused

    def should_step(self) -> bool:
        """Whether the loop should advance the simulation this frame."""
        return self.is_running() and not self.is_paused()

    def close(self) -> None:
        """Finish: write what the backend writes and stop running."""
        self._closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------------ logging
    def log_state(self, state) -> None:
        """Show ``state``: body poses ``state.body_q`` (X_WB) and particles ``state.particle_q``."""
        self._require_model("log_state")

    def log_contacts(self, contacts, state) -> None:
        """Show the valid rigid contacts of ``contacts`` in the body frames of ``state``: points on
        shape 0 (``/contacts/points``) and normals from them (``/contacts/normals``), world frame.
        For contacts detected before a solver step, pass that step's input state."""
        if not self.show_contacts:
            return
        self._require_model("log_contacts")
        geo = contact_world_geometry(contacts, state, self.model)
        length = self.contact_normal_length or 0.1 * self._scene_size()
        points = geo["point0"]
        self.log_points("/contacts/points", points, radii=0.01 * self._scene_size(), colors=(1.0, 0.6, 0.0))
        self.log_lines("/contacts/normals", points, points + length * geo["normal"], colors=(1.0, 0.2, 0.2))

    def log_points(self, name: str, points, radii=None, colors=None, hidden: bool = False) -> None:
        """Show a point set ``points`` ((N, 3) world frame [m], Warp or NumPy) with ``radii`` [m]
        (scalar or (N,)) and RGB ``colors`` in [0, 1] ((3,) or (N, 3)). Base: nothing is shown."""

    def log_lines(self, name: str, starts, ends, colors=None, width: float = 0.01, hidden: bool = False) -> None:
        """Show segments ``starts[i] -> ends[i]`` ((N, 3) world frame [m]). Base: nothing is shown."""

    def log_scalar(self, name: str, value) -> None:
        """Record a named scalar at the current time (kept in :attr:`scalar_history`)."""
        v = float(value)
        self.scalar_history.setdefault(str(name), []).append((self.time, v))

    def log_array(self, name: str, array) -> None:
        """Record a named array at the current time (backends that can show arrays override this)."""

    # ------------------------------------------------------------------ camera
    def set_camera(self, pos, pitch: float | None = None, yaw: float | None = None) -> None:
        """Place the camera at ``pos`` [m] looking along ``pitch`` (above the horizon) and ``yaw``
        (about the up axis, from the first horizontal axis) [deg]; ``None`` keeps the current angle
        (initially pitch -30, yaw 135: a 3/4 view from +X, -Y for Z up). Field of view: the current one."""
        from .framing import CameraView, _up_vector

        p = np.asarray([float(c) for c in pos], dtype=np.float64) if np.size(pos) == 3 else None
        if p is None or not np.all(np.isfinite(p)):
            raise ValueError(f"{type(self).__name__}.set_camera: pos must be 3 finite numbers, got {pos!r}")
        current = self.camera_view
        up_i = int(self.model.up_axis) if self.model is not None else 2
        cur_pitch, cur_yaw = (current.pitch_yaw(up_i) if current is not None else (-30.0, 135.0))
        pitch = cur_pitch if pitch is None else float(pitch)
        yaw = cur_yaw if yaw is None else float(yaw)
        if not -90.0 < pitch < 90.0:
            raise ValueError(f"{type(self).__name__}.set_camera: pitch must be in (-90, 90) degrees, got {pitch}")
        up = _up_vector(up_i)
        a = np.zeros(3)
        a[(up_i + 1) % 3] = 1.0
        b = np.cross(up, a)
        cp, ya = math.radians(pitch), math.radians(yaw)
        forward = math.cos(cp) * (math.cos(ya) * a + math.sin(ya) * b) + math.sin(cp) * up
        right = np.cross(forward, up)
        right /= np.linalg.norm(right)
        fov = current.fov if current is not None else 45.0
        self.set_camera_view(CameraView(position=p, target=p + forward, forward=forward, up=np.cross(right, forward),
                                        right=right, fov=fov))

    def set_camera_view(self, view) -> None:
        """Use the :class:`~armillary.viewer.CameraView` ``view`` (e.g. from
        :func:`~armillary.viewer.frame_bounds`) for what this viewer renders or suggests."""
        self.camera_view = view

    def get_frame(self, *, output=None, render_ui: bool = False):
        """The last rendered frame as a ``(height, width, 3)`` uint8 Warp array (image viewers only)."""
        raise NotImplementedError(f"{type(self).__name__} does not render images (use ViewerImage)")

    # ------------------------------------------------------------------ helpers
    def _scene_size(self) -> float:
        """A length scale of the model [m] (its bounds' diagonal, at least 0.1 m), cached."""
        size = getattr(self, "_scene_size_cache", None)
        if size is None:
            from .framing import scene_bounds

            lo, hi = scene_bounds(self.model)
            size = max(float(np.linalg.norm(hi - lo)), 0.1)
            self._scene_size_cache = size
        return size

"""Scene bounds and camera framing for the viewers and ``armillary run --video/--rerun``.

:func:`scene_bounds` is the world-frame AABB of every shape (each shape's tight local box moved by
its body pose; one Warp launch per call) and particle; infinite planes are left out (a ground plane
has no size). :func:`frame_bounds` places a pinhole camera with a 3/4 view (azimuth 45 degrees off the
first horizontal axis, elevation 30 degrees above the horizon) at the distance where the whole box
fits the field of view.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import warp as wp

__all__ = ["CameraView", "frame_bounds", "scene_bounds", "shape_local_bounds"]

# GeoType values (armillary.sim.enums.GeoType), numeric so this module needs no model import
_PLANE, _HFIELD, _SPHERE, _CAPSULE, _ELLIPSOID, _CYLINDER, _BOX, _MESH, _CONE, _CONVEX_MESH = range(1, 11)


@wp.kernel
def _shape_aabb_kernel(
    shape_body: wp.array(dtype=wp.int32),
    shape_transform: wp.array(dtype=wp.transform),
    local_lo: wp.array(dtype=wp.vec3),
    local_hi: wp.array(dtype=wp.vec3),
    body_q: wp.array(dtype=wp.transform),
    lower: wp.array(dtype=wp.vec3),
    upper: wp.array(dtype=wp.vec3),
):
    s = wp.tid()
    X = shape_transform[s]
    b = shape_body[s]
    if b >= 0:
        X = body_q[b] * X
    c = 0.5 * (local_lo[s] + local_hi[s])
    h = 0.5 * (local_hi[s] - local_lo[s])
    R = wp.quat_to_matrix(wp.transform_get_rotation(X))
    wc = wp.transform_point(X, c)
    ext = wp.vec3(
        wp.abs(R[0, 0]) * h[0] + wp.abs(R[0, 1]) * h[1] + wp.abs(R[0, 2]) * h[2],
        wp.abs(R[1, 0]) * h[0] + wp.abs(R[1, 1]) * h[1] + wp.abs(R[1, 2]) * h[2],
        wp.abs(R[2, 0]) * h[0] + wp.abs(R[2, 1]) * h[1] + wp.abs(R[2, 2]) * h[2],
    )
    lower[s] = wc - ext
    upper[s] = wc + ext


def shape_local_bounds(model) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each shape's box in its own frame: ``(lo, hi, finite)``, (S, 3), (S, 3) [m] and (S,) bool
    (False for infinite planes, which have no bounds)."""
    n = int(model.shape_count)
    lo, hi = np.zeros((n, 3)), np.zeros((n, 3))
    finite = np.ones(n, dtype=bool)
    if n == 0:
        return lo, hi, finite
    types = model.shape_type.numpy()
    scale = model.shape_scale.numpy().astype(np.float64)
    sources = list(getattr(model, "shape_source", None) or [None] * n)
    for s in range(n):
        t, sc = int(types[s]), scale[s]
        if t == _SPHERE:
            h = np.full(3, sc[0])
        elif t == _BOX or t == _ELLIPSOID:
            h = sc.copy()
        elif t == _CAPSULE:
            h = np.array([sc[0], sc[0], sc[1] + sc[0]])
        elif t in (_CYLINDER, _CONE):
            h = np.array([sc[0], sc[0], sc[1]])
        elif t == _PLANE:
            if sc[0] > 0 and sc[1] > 0:
                h = np.array([0.5 * sc[0], 0.5 * sc[1], 0.0])
            else:
                finite[s] = False
                h = np.zeros(3)
        elif t in (_MESH, _CONVEX_MESH) and s < len(sources) and getattr(sources[s], "vertices", None) is not None:
            v = np.asarray(sources[s].vertices, dtype=np.float64) * sc
            lo[s], hi[s] = v.min(axis=0), v.max(axis=0)
            continue
        elif t == _HFIELD and s < len(sources) and sources[s] is not None:
            hf = sources[s]
            lo[s] = np.array([-hf.hx, -hf.hy, hf.min_z]) * sc
            hi[s] = np.array([hf.hx, hf.hy, hf.max_z]) * sc
            continue
        else:  # anything else: its collision bounding sphere
            r = float(model.shape_collision_radius.numpy()[s]) if getattr(model, "shape_collision_radius", None) \
                is not None else 0.0  # fmt: skip
            h = np.full(3, r)
        lo[s], hi[s] = -h, h
    return lo, hi, finite


class _BoundsCache:
    """Device copies of the local shape boxes of one model (built on first use)."""

    def __init__(self, model):
        lo, hi, finite = shape_local_bounds(model)
        dev = model.device
        self.finite = finite
        self.local_lo = wp.array(lo.astype(np.float32), dtype=wp.vec3, device=dev)
        self.local_hi = wp.array(hi.astype(np.float32), dtype=wp.vec3, device=dev)
        self.lower = wp.zeros(len(lo), dtype=wp.vec3, device=dev)
        self.upper = wp.zeros(len(lo), dtype=wp.vec3, device=dev)
        self.body_q = wp.zeros(max(int(model.body_count), 1), dtype=wp.transform, device=dev)


def scene_bounds(model, state=None, *, body_q=None, particle_q=None) -> tuple[np.ndarray, np.ndarray]:
    """World AABB ``(lo, hi)`` [m] of every bounded shape and particle of ``model``.

    Body poses from ``body_q`` (a (B, 7) array or a Warp transform array), else ``state.body_q``,
    else ``model.body_q``; particles from ``particle_q`` / ``state.particle_q`` / ``model.particle_q``.
    A model with nothing bounded gives a 1 m box around the origin.
    """
    lo = np.full(3, np.inf)
    hi = np.full(3, -np.inf)
    if int(model.shape_count):
        cache = getattr(model, "_viewer_bounds_cache", None)
        if cache is None:
            cache = _BoundsCache(model)
            try:
                model._viewer_bounds_cache = cache
            except AttributeError:
                pass
        if body_q is None:
            body_q = state.body_q if state is not None and state.body_q is not None else model.body_q
        if body_q is None or int(model.body_count) == 0:
            bq = cache.body_q
        elif isinstance(body_q, wp.array):
            bq = body_q
        else:
            bq = cache.body_q
            bq.assign(np.asarray(body_q, dtype=np.float32).reshape(-1, 7))
        wp.launch(_shape_aabb_kernel, dim=int(model.shape_count), device=model.device,
                  inputs=[model.shape_body, model.shape_transform, cache.local_lo, cache.local_hi, bq],
                  outputs=[cache.lower, cache.upper])  # fmt: skip
        if cache.finite.any():
            lo = np.minimum(lo, cache.lower.numpy()[cache.finite].min(axis=0))
            hi = np.maximum(hi, cache.upper.numpy()[cache.finite].max(axis=0))
    if particle_q is None:
        particle_q = state.particle_q if state is not None and getattr(state, "particle_q", None) is not None \
            else getattr(model, "particle_q", None)  # fmt: skip
    if int(getattr(model, "particle_count", 0) or 0) and particle_q is not None:
        x = particle_q.numpy() if isinstance(particle_q, wp.array) else np.asarray(particle_q)
        r = model.particle_radius.numpy() if getattr(model, "particle_radius", None) is not None else 0.0
        r = np.broadcast_to(np.asarray(r, dtype=np.float64), (len(x),))[:, None]
        lo = np.minimum(lo, (x - r).min(axis=0))
        hi = np.maximum(hi, (x + r).max(axis=0))
    if not np.all(np.isfinite(lo)) or not np.all(np.isfinite(hi)):
        return np.full(3, -0.5), np.full(3, 0.5)
    return lo.astype(np.float64), hi.astype(np.float64)


@dataclasses.dataclass
class CameraView:
    """A pinhole camera: ``position`` [m], unit ``forward`` (viewing direction), ``up`` and ``right``
    vectors (world frame, right-handed: right = forward x up), vertical field of view ``fov`` [deg]
    and ``target``, the point it looks at [m]."""

    position: np.ndarray
    target: np.ndarray
    forward: np.ndarray
    up: np.ndarray
    right: np.ndarray
    fov: float

    def rotation_matrix(self) -> np.ndarray:
        """World-from-camera rotation, OpenGL convention: columns right (+x), up (+y), backward (+z)
        (the camera looks along its -z)."""
        return np.stack([self.right, self.up, -self.forward], axis=1)

    def quaternion(self) -> np.ndarray:
        """:meth:`rotation_matrix` as an xyzw quaternion."""
        from ..sim.rotations import quat_from_matrix

        return np.asarray(quat_from_matrix(self.rotation_matrix()), dtype=np.float64).reshape(4)

    def pitch_yaw(self, up_axis=2) -> tuple[float, float]:
        """Pitch (view direction above the horizon) and yaw (about the up axis, from the first
        horizontal axis toward the second) [deg]."""
        u = int(up_axis)
        up = _up_vector(u)
        a = np.zeros(3)
        a[(u + 1) % 3] = 1.0
        b = np.cross(up, a)
        f = self.forward
        pitch = math.degrees(math.asin(max(-1.0, min(1.0, float(f @ up)))))
        return pitch, math.degrees(math.atan2(float(f @ b), float(f @ a)))


def _up_vector(up_axis) -> np.ndarray:
    u = np.zeros(3)
    u[int(up_axis)] = 1.0
    return u


def frame_bounds(lo, hi, *, up_axis=2, fov: float = 45.0, aspect: float = 1.0, azimuth: float = 45.0,
                 elevation: float = 30.0, margin: float = 1.1) -> CameraView:  # fmt: skip
    """A camera that sees the whole box ``[lo, hi]`` [m].

    Args:
        up_axis: world up axis (0, 1, 2 or an :class:`~armillary.Axis`).
        fov: vertical field of view [deg], in (0, 180).
        aspect: image width / height (the horizontal field of view follows from it).
        azimuth: camera direction about the up axis [deg], from the first horizontal axis (X for Z-
            or Y-up) toward the second; 45 gives the usual 3/4 view.
        elevation: camera height angle above the horizon [deg], in (-90, 90).
        margin: distance factor over the tightest fit (>= 1).
    """
    lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    if lo.shape != (3,) or hi.shape != (3,) or not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
        raise ValueError(f"frame_bounds: lo and hi must be 3 finite numbers each, got {lo!r}, {hi!r}")
    if not 0.0 < fov < 180.0:
        raise ValueError(f"frame_bounds: fov must be in (0, 180) degrees, got {fov}")
    if not aspect > 0:
        raise ValueError(f"frame_bounds: aspect must be positive, got {aspect}")
    if not -90.0 < elevation < 90.0:
        raise ValueError(f"frame_bounds: elevation must be in (-90, 90) degrees, got {elevation}")
    if not margin >= 1.0:
        raise ValueError(f"frame_bounds: margin must be at least 1, got {margin}")
    u_i = int(up_axis)
    if u_i not in (0, 1, 2):
        raise ValueError(f"frame_bounds: up_axis must be 0, 1 or 2, got {up_axis!r}")
    up = _up_vector(u_i)
    a = np.zeros(3)
    a[(u_i + 1) % 3] = 1.0  # Z up: X, Y; Y up: Z, X
    b = np.cross(up, a)
    az, el = math.radians(azimuth), math.radians(elevation)
    back = math.cos(el) * (math.cos(az) * a - math.sin(az) * b) + math.sin(el) * up  # toward the camera
    forward = -back / np.linalg.norm(back)
    right = np.cross(forward, up)
    right /= np.linalg.norm(right)
    cam_up = np.cross(right, forward)
    center = 0.5 * (lo + hi)
    half = np.maximum(0.5 * (hi - lo), 1e-3)
    tan_y = math.tan(math.radians(fov) / 2.0)
    tan_x = tan_y * aspect
    distance = 0.0
    for corner in np.array(np.meshgrid(*[[-1.0, 1.0]] * 3)).T.reshape(-1, 3):
        p = corner * half
        z = float(p @ -forward)  # toward the camera
        distance = max(distance, z + abs(float(p @ right)) / tan_x, z + abs(float(p @ cam_up)) / tan_y)
    distance *= margin
    position = center - distance * forward
    return CameraView(position=position, target=center, forward=forward, up=cam_up, right=right, fov=float(fov))

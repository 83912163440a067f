"""``ViewerImage``: offscreen images of the frame loop through :class:`armillary.sensors.SensorTiledCamera`,
written as PNG frames and/or a video (``.mp4`` through imageio-ffmpeg, ``.gif`` through Pillow).

The reference engine has no offscreen image viewer (its ``ViewerGL`` renders headless with OpenGL);
this one ray-casts with Warp, so it runs on the CPU device and unchanged on CUDA. Each
:meth:`ViewerImage.end_frame` renders the last logged state from one pinhole camera (default: a 3/4
view framing the model's initial bounds, see :func:`~armillary.viewer.frame_bounds`; change it with
:meth:`~ViewerBase.set_camera_view` or :meth:`~ViewerBase.set_camera`), Lambert-shaded by one
directional light, sRGB output. Contacts (:meth:`log_contacts`) and :meth:`log_points` are drawn as
small squares over the image. Needs ``imageio`` for files (``pip install 'armillary[video]'``).

A GIF stores frame delays in 1/100 s and viewers play delays under 0.02 s slowly, so a GIF plays at
most 50 frames per second (every frame is kept; a 60 fps run plays at 50/60 speed). MP4 plays at
``fps`` exactly (H.264, yuv420p: width and height are rounded up to even numbers by padding).
"""

from __future__ import annotations

import math
import os

import numpy as np
import warp as wp

from .base import ViewerBase

__all__ = ["ViewerImage", "check_video_writer", "write_video"]

VIDEO_SUFFIXES = (".mp4", ".gif")
#: the shortest GIF frame delay viewers play as written [s]
GIF_MIN_DELAY = 0.02


def _imageio():
    try:
        import imageio.v2 as iio
    except ImportError as exc:
        raise ImportError("writing images and videos needs imageio: pip install 'armillary[video]' "
                          "(or pip install imageio imageio-ffmpeg)") from exc  # fmt: skip
    return iio


def check_video_writer(path) -> None:
    """Raise ImportError (naming the package to install) when ``path``'s video type cannot be written."""
    _imageio()
    if str(path).lower().endswith(".mp4"):
        try:
            import imageio_ffmpeg

            imageio_ffmpeg.get_ffmpeg_exe()
        except (ImportError, RuntimeError) as exc:
            raise ImportError("writing .mp4 needs imageio-ffmpeg: pip install 'armillary[video]' (or pip install "
                              "imageio-ffmpeg), or write a .gif instead") from exc  # fmt: skip


class ViewerImage(ViewerBase):
    """Render each frame offscreen; write PNG frames and/or a video.

    Args:
        output_path: video file (``.mp4`` or ``.gif``) written by :meth:`close`; ``None``: no video.
        width, height: image size [px], 16..4096 each.
        fov: vertical field of view [deg] of the automatic framing, in (0, 180).
        fps: video frame rate [frames/s] (> 0).
        frames_dir: also write ``frame_00000.png``, ... into this existing folder.
        world: the world whose view is rendered (``0 .. world_count-1``).
        background: display sRGB colour in [0, 1] of pixels that see no shape.
    """

    def __init__(self, output_path=None, *, width: int = 640, height: int = 360, fov: float = 45.0,
                 fps: float = 60.0, frames_dir=None, world: int = 0,
                 background=(0.55, 0.63, 0.71)):  # fmt: skip
        super().__init__()
        if output_path is not None:
            output_path = os.fspath(output_path)
            if not output_path.lower().endswith(VIDEO_SUFFIXES):
                raise ValueError(f"ViewerImage: output_path {output_path!r} must end with .mp4 or .gif")
            check_video_writer(output_path)
        if frames_dir is not None:
            frames_dir = os.fspath(frames_dir)
            if not os.path.isdir(frames_dir):
                raise ValueError(f"ViewerImage: frames_dir {frames_dir!r} is not an existing folder")
            _imageio()
        for name, v in (("width", width), ("height", height)):
            if not 16 <= int(v) <= 4096:
                raise ValueError(f"ViewerImage: {name} must be in 16..4096 pixels, got {v}")
        if not 0.0 < float(fov) < 180.0:
            raise ValueError(f"ViewerImage: fov must be in (0, 180) degrees, got {fov}")
        if not float(fps) > 0:
            raise ValueError(f"ViewerImage: fps must be positive, got {fps}")
        bg = np.asarray(background, dtype=np.float64).reshape(-1)
        if bg.shape != (3,) or not np.all((bg >= 0.0) & (bg <= 1.0)):
            raise ValueError(f"ViewerImage: background must be 3 numbers in [0, 1], got {background!r}")
        r, g, b = (int(round(c * 255.0)) for c in bg)
        self._clear_color = r | (g << 8) | (b << 16) | (255 << 24)
        self.output_path = output_path
        self.frames_dir = frames_dir
        self.width, self.height = int(width), int(height)
        self.fov = float(fov)
        self.fps = float(fps)
        self.world = int(world)
        self.frames_written = 0
        self._state = None
        self._overlay: list[tuple[np.ndarray, np.ndarray]] = []
        self._writer = None
        self._gif_frames: list[np.ndarray] = []
        self._frame = None
        self._sensor = None

    # ------------------------------------------------------------------ model and camera
    def set_model(self, model) -> None:
        """Prepare the camera sensor for ``model`` (and frame its initial bounds unless a camera was set)."""
        super().set_model(model)
        if model is None:
            return
        if not 0 <= self.world < max(int(model.world_count), 1):
            raise ValueError(f"ViewerImage: world must be in 0..{int(model.world_count) - 1}, got {self.world}")
        from ..sensors import SensorTiledCamera
        from .framing import frame_bounds, scene_bounds

        self._sensor = SensorTiledCamera(model)
        self._sensor.utils.create_default_light()
        self._clear = SensorTiledCamera.ClearData(clear_color=self._clear_color)
        if self.camera_view is None:
            self.set_camera_view(frame_bounds(*scene_bounds(model), up_axis=int(model.up_axis), fov=self.fov,
                                              aspect=self.width / self.height))  # fmt: skip
        else:
            self.set_camera_view(self.camera_view)
        self._color = self._sensor.utils.create_color_image_output(self.width, self.height, camera_count=1)

    def set_camera_view(self, view) -> None:
        """Render from ``view`` (a :class:`~armillary.viewer.CameraView`) from now on."""
        super().set_camera_view(view)
        if self.model is None or self._sensor is None:
            return
        q = view.quaternion()
        worlds = max(int(self.model.world_count), 1)
        X = np.tile(np.concatenate([np.asarray(view.position, dtype=np.float64), q]), (1, worlds, 1))
        self._transforms = wp.array(X.astype(np.float32), dtype=wp.transformf, device=self.model.device)
        self._rays = self._sensor.utils.compute_camera_rays_pinhole(self.width, self.height,
                                                                    camera_fovs=math.radians(view.fov))  # fmt: skip

    # ------------------------------------------------------------------ frames
    def begin_frame(self, time: float) -> None:
        super().begin_frame(time)
        self._overlay = []

    def log_state(self, state) -> None:
        """Keep ``state`` for this frame's image (rendered at :meth:`end_frame`)."""
        self._require_model("log_state")
        self._state = state

    def log_points(self, name: str, points, radii=None, colors=None, hidden: bool = False) -> None:
        """Draw ``points`` ((N, 3) world frame [m]) as squares of 5 px over this frame's image."""
        if hidden:
            return
        p = np.asarray(points.numpy() if hasattr(points, "numpy") else points, dtype=np.float64).reshape(-1, 3)
        c = np.asarray((1.0, 0.6, 0.0) if colors is None else colors, dtype=np.float64)
        self._overlay.append((p, np.broadcast_to(c.reshape(-1, 3), (len(p), 3))))

    def _project(self, p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        view = self.camera_view
        d = p - view.position
        z = d @ view.forward
        t = math.tan(math.radians(view.fov) / 2.0)
        u = (d @ view.right) / np.maximum(z, 1e-9) / (t * self.width / self.height)
        v = (d @ view.up) / np.maximum(z, 1e-9) / t
        col = ((u + 1.0) * 0.5 * self.width).astype(int)
        row = ((1.0 - v) * 0.5 * self.height).astype(int)
        return row, col, z > 0

    def end_frame(self) -> None:
        """Render the frame, draw the overlays, and write it (PNG and / or video)."""
        self._require_model("end_frame")
        self._sensor.update(self._state, self._transforms, self._rays, color_image=self._color, clear_data=self._clear)
        rgba = self._sensor.utils.to_rgba_from_color(self._color)  # (worlds * cameras, H, W, 4) uint8
        img = np.array(rgba.numpy()[self.world, :, :, :3], copy=True)
        for points, colors in self._overlay:
            rows, cols, ok = self._project(points)
            for r, c, k, rgb in zip(rows, cols, ok, colors):
                if k and 0 <= r < self.height and 0 <= c < self.width:
                    img[max(r - 2, 0):r + 3, max(c - 2, 0):c + 3] = np.round(np.clip(rgb, 0, 1) * 255).astype(np.uint8)
        self._frame = img
        self._write(img)
        super().end_frame()

    def _write(self, img: np.ndarray) -> None:
        if self.frames_dir is not None:
            _imageio().imwrite(os.path.join(self.frames_dir, f"frame_{self.frame_count:05d}.png"), img)
        if self.output_path is None:
            return
        if self.output_path.lower().endswith(".gif"):
            self._gif_frames.append(img)
        else:
            if self._writer is None:
                self._writer = _imageio().get_writer(
                    self.output_path, format="FFMPEG", mode="I", fps=self.fps, codec="libx264",
                    pixelformat="yuv420p", macro_block_size=2)  # fmt: skip
            self._writer.append_data(img)
        self.frames_written += 1

    def get_frame(self, *, output=None, render_ui: bool = False):
        """The last rendered image as a (height, width, 3) uint8 Warp array on the model's device
        (``output``: a preallocated array of that shape to fill)."""
        if render_ui:
            raise NotImplementedError("ViewerImage has no user interface to render (render_ui=True)")
        if self._frame is None:
            raise RuntimeError("ViewerImage.get_frame: no frame rendered yet (call end_frame first)")
        if output is None:
            return wp.array(self._frame, dtype=wp.uint8, device=self.device)
        if tuple(output.shape) != self._frame.shape:
            raise ValueError(f"ViewerImage.get_frame: output has shape {tuple(output.shape)}, expected "
                             f"{self._frame.shape}")  # fmt: skip
        output.assign(self._frame)
        return output

    def close(self) -> None:
        """Finish the video file."""
        if not self._closed:
            if self._writer is not None:
                self._writer.close()
                self._writer = None
            if self._gif_frames:
                delay = max(1.0 / self.fps, GIF_MIN_DELAY)
                _imageio().mimsave(self.output_path, self._gif_frames, format="GIF", duration=delay * 1000.0, loop=0)
                self._gif_frames = []
        super().close()


def write_video(model, body_q, path, *, fps: float, size=(640, 360), particle_q=None, fov: float = 45.0) -> int:
    """Render recorded body poses ``body_q`` ((F, B, 7), e.g. ``armillary run``'s trajectory) into the
    video ``path`` with a 3/4 view framing the whole trajectory's bounds; returns the frame count."""
    from .framing import frame_bounds, scene_bounds

    frames = len(body_q)
    picks = np.unique(np.linspace(0, max(frames - 1, 0), min(frames, 50)).astype(int)) if frames else []
    lo, hi = np.full(3, np.inf), np.full(3, -np.inf)
    for k in picks:
        a, b = scene_bounds(model, body_q=body_q[k] if int(model.body_count) else None,
                            particle_q=None if particle_q is None else particle_q[k])  # fmt: skip
        lo, hi = np.minimum(lo, a), np.maximum(hi, b)
    if not frames:
        lo, hi = scene_bounds(model)
    width, height = int(size[0]), int(size[1])
    viewer = ViewerImage(path, width=width, height=height, fov=fov, fps=fps)
    viewer.set_camera_view(frame_bounds(lo, hi, up_axis=int(model.up_axis), fov=fov, aspect=width / height))
    viewer.set_model(model)
    state = model.state()
    dt = 1.0 / float(fps)
    for k in range(frames):
        if int(model.body_count):
            state.body_q.assign(np.asarray(body_q[k], dtype=np.float32))
        if particle_q is not None and state.particle_q is not None:
            state.particle_q.assign(np.asarray(particle_q[k], dtype=np.float32))
        viewer.begin_frame(k * dt)
        viewer.log_state(state)
        viewer.end_frame()
    viewer.close()
    return frames

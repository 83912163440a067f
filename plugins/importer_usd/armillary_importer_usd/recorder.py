"""Record a simulated trajectory as a USD stage with time-sampled body transforms (``armillary.usd.RecorderUSD``).

The model is written once with :func:`~armillary_importer_usd.export.export` (bodies, shapes, joints);
every recorded frame adds time samples to each body prim's ``xformOp:translate`` / ``xformOp:orient``
(X_WB, m). ``timeCodesPerSecond`` is ``fps`` and frame ``k`` is time code ``k``, so ``usdview out.usda``
plays the motion. Usage, with the reference engine's ``ViewerUSD`` method names::

    rec = RecorderUSD(model, "out.usda", fps=60)
    for frame in range(n):
        ...                              # step the simulation
        rec.begin_frame(frame / 60.0)    # or simply rec.record(state)
        rec.log_state(state)
        rec.end_frame()
    rec.close()                          # writes the file
"""

from __future__ import annotations

import os

import numpy as np

__all__ = ["RecorderUSD"]


class RecorderUSD:
    """Write body trajectories of ``model`` to ``output_path`` (``.usda`` / ``.usd`` / ``.usdc``).

    Args:
        model: the finalized :class:`armillary.Model` (may also be given later with :meth:`set_model`);
            ``RecorderUSD(output_path, ...)`` with the path first also works (``ViewerUSD`` order).
        output_path: the file written by :meth:`close`.
        fps: time codes per second; :meth:`begin_frame` maps simulation time ``t`` [s] to time code
            ``round(t * fps)``.
        num_frames: stop recording after this many frames (``None``: unlimited); :meth:`is_running`
            turns False then.
        up_axis: ignored unless no model is given (the stage takes the model's up axis).
    """

    def __init__(self, model=None, output_path=None, fps: float = 60, *, num_frames: int | None = None,
                 up_axis: str | None = None):  # fmt: skip
        if isinstance(model, (str, os.PathLike)) and not isinstance(output_path, (str, os.PathLike)):
            model, output_path = output_path, model  # ViewerUSD order: (output_path, ...)
        if output_path is None:
            raise ValueError("RecorderUSD: output_path is required")
        self.output_path = os.fspath(output_path)
        if not self.output_path.endswith((".usd", ".usda", ".usdc")):
            raise ValueError(f"RecorderUSD: {self.output_path!r} must end with .usd, .usda or .usdc")
        if not fps > 0:
            raise ValueError(f"RecorderUSD: fps must be positive, got {fps}")
        self.fps = float(fps)
        self.num_frames = num_frames
        self.up_axis = up_axis
        self.frame_count = 0
        self.stage = None
        self.model = None
        self._time_code = 0.0
        self._first = None
        self._last = None
        self._closed = False
        if model is not None:
            self.set_model(model)

    # ------------------------------------------------------------------------------------------ setup
    def set_model(self, model) -> None:
        """Write ``model`` into a new stage (bodies at their rest poses) and prepare the body prims."""
        from pxr import Sdf, Usd

        from .export import export

        self.model = model
        self.stage = Usd.Stage.CreateInMemory()
        result = export(model, self.stage, on_unsupported="skip")
        self.stage.SetTimeCodesPerSecond(self.fps)
        self.stage.SetFramesPerSecond(self.fps)
        self._layer = self.stage.GetRootLayer()
        self._bodies = np.array(sorted(result["body_paths"]), dtype=np.int64)
        self._translate = [Sdf.Path(result["body_paths"][b]).AppendProperty("xformOp:translate")
                           for b in self._bodies]  # fmt: skip
        self._orient = [Sdf.Path(result["body_paths"][b]).AppendProperty("xformOp:orient") for b in self._bodies]
        self.body_paths = dict(result["body_paths"])

    # ------------------------------------------------------------------------------------------ frames
    def is_running(self) -> bool:
        """False once ``num_frames`` frames are recorded or after :meth:`close`."""
        return not self._closed and (self.num_frames is None or self.frame_count < self.num_frames)

    def begin_frame(self, time: float) -> None:
        """Start a frame at simulation time ``time`` [s] (time code ``round(time * fps)``)."""
        self._time_code = float(round(float(time) * self.fps))

    def log_state(self, state) -> None:
        """Add time samples of every body pose X_WB from ``state.body_q`` at the current time code."""
        if self.model is None:
            raise RuntimeError("RecorderUSD.log_state: call set_model(model) first")
        if not self.is_running():
            return
        if not len(self._bodies):
            self._mark(self._time_code)
            return
        from pxr import Gf, Sdf

        q = state.body_q.numpy()[self._bodies].astype(np.float64)  # the one host copy of the frame
        t = self._time_code
        layer, translate, orient = self._layer, self._translate, self._orient
        pos = q[:, :3].tolist()
        rot = q[:, [6, 3, 4, 5]].tolist()  # Gf.Quatd is (real, i, j, k)
        with Sdf.ChangeBlock():
            for i in range(len(pos)):
                layer.SetTimeSample(translate[i], t, Gf.Vec3d(*pos[i]))
                layer.SetTimeSample(orient[i], t, Gf.Quatd(*rot[i]))
        self._mark(t)

    def end_frame(self) -> None:
        """End the current frame (counts it)."""
        self.frame_count += 1
        self._time_code += 1.0

    def record(self, state, time: float | None = None) -> None:
        """One frame in one call: ``begin_frame(time)`` (default: the next frame), ``log_state``, ``end_frame``."""
        if time is not None:
            self.begin_frame(time)
        self.log_state(state)
        self.end_frame()

    def _mark(self, t: float) -> None:
        self._first = t if self._first is None else min(self._first, t)
        self._last = t if self._last is None else max(self._last, t)

    # ------------------------------------------------------------------------------------------ output
    def save(self) -> None:
        """Write the file now (the recorder stays open)."""
        if self.stage is None:
            raise RuntimeError("RecorderUSD.save: no model was set")
        self.stage.SetStartTimeCode(self._first if self._first is not None else 0.0)
        self.stage.SetEndTimeCode(self._last if self._last is not None else 0.0)
        self._layer.Export(self.output_path)

    def close(self) -> None:
        """Write the file and stop recording."""
        if self._closed:
            return
        if self.stage is not None:
            self.save()
        self._closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

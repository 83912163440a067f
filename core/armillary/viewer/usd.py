"""``ViewerUSD``: the frame loop written as a time-sampled USD stage that usdview and Omniverse play.

Built on the USD plugin's trajectory recorder (``armillary.usd.RecorderUSD``, the writer behind
``armillary run --usd``; needs ``armillary-importer-usd``, which brings ``usd-core``): the model is
exported once as a UsdPhysics stage under ``/World`` and every frame adds time samples to each
body prim's ``xformOp:translate`` / ``xformOp:orient`` (X_WB). Time code ``k`` is frame ``k`` and
``timeCodesPerSecond`` is ``fps``. On top of the recorder this viewer writes, time-sampled:

* particles (:meth:`log_state`) under ``/World/Particles``: a ``PointInstancer`` of unit spheres
  scaled by ``particle_radius`` (``points_as_spheres=True``) or a ``Points`` prim with widths;
* :meth:`log_points` / :meth:`log_lines` (and so :meth:`log_contacts`) under ``/World/Viewer/<name>``
  as ``Points`` / linear ``BasisCurves``;
* :meth:`log_scalar` values as ``double`` attributes ``viewer:<name>`` of ``/World/Viewer``.

``pxr`` is imported when the model is set, never at ``import armillary``.
"""

from __future__ import annotations

import os
import re

import numpy as np

from .base import ViewerBase

__all__ = ["ViewerUSD"]


def _recorder_class():
    from ..plugins import get_registry

    try:
        return get_registry().importers.api("usd", "RecorderUSD")
    except (ImportError, AttributeError) as exc:
        raise ImportError(f"ViewerUSD needs the USD plugin ({str(exc).splitlines()[0]}): "
                          "pip install armillary-importer-usd") from exc  # fmt: skip


def _prim_name(part: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_]", "_", part)
    return name if name and not name[0].isdigit() else f"_{name}"


def _host(a) -> np.ndarray:
    return np.asarray(a.numpy() if hasattr(a, "numpy") else a, dtype=np.float64)


class ViewerUSD(ViewerBase):
    """Write the frame loop to ``output_path`` (``.usda`` text, ``.usdc`` / ``.usd`` binary).

    Args:
        output_path: the stage file, written by :meth:`close`.
        fps: time codes per second; frame time ``t`` [s] becomes time code ``round(t * fps)``.
        up_axis: the stage's up axis, ``"Y"`` or ``"Z"`` (``None``: the model's). The body poses are
            written as they are; a different axis only changes how usdview orients the scene.
        num_frames: stop recording after this many frames (:meth:`is_running` turns False);
            ``None``: no limit. The reference engine's default, 100, is kept.
        scaling: uniform scale of the whole stage (a scale op on ``/World``), > 0.
        points_as_spheres: particles as instanced spheres (True) or as a ``Points`` prim (False).
    """

    def __init__(self, output_path, fps: float = 60, up_axis: str | None = None, num_frames: int | None = 100,
                 scaling: float = 1.0, points_as_spheres: bool = True):  # fmt: skip
        super().__init__()
        path = os.fspath(output_path)
        if not path.endswith((".usd", ".usda", ".usdc")):
            raise ValueError(f"ViewerUSD: output_path {path!r} must end with .usd, .usda or .usdc")
        if not fps > 0:
            raise ValueError(f"ViewerUSD: fps must be positive, got {fps}")
        if up_axis is not None and str(up_axis).upper() not in ("Y", "Z"):
            raise ValueError(f"ViewerUSD: up_axis must be 'Y', 'Z' or None (USD has no X-up stages), got {up_axis!r}")
        if num_frames is not None and int(num_frames) < 1:
            raise ValueError(f"ViewerUSD: num_frames must be at least 1 or None, got {num_frames}")
        if not scaling > 0:
            raise ValueError(f"ViewerUSD: scaling must be positive, got {scaling}")
        self.output_path = path
        self.fps = float(fps)
        self.up_axis = None if up_axis is None else str(up_axis).upper()
        self.num_frames = None if num_frames is None else int(num_frames)
        self.scaling = float(scaling)
        self.points_as_spheres = bool(points_as_spheres)
        self._recorder_cls = _recorder_class()  # fails now, not at the first frame, without the plugin
        self.recorder = None
        self.stage = None
        self._time_code = 0.0
        self._prims: dict[str, object] = {}

    # ------------------------------------------------------------------ model
    def set_model(self, model) -> None:
        """Export ``model`` into a new stage (bodies at their rest poses)."""
        super().set_model(model)
        if model is None:
            return
        from pxr import Gf, UsdGeom

        self.recorder = self._recorder_cls(model, self.output_path, fps=self.fps, num_frames=self.num_frames)
        self.stage = self.recorder.stage
        if self.up_axis is not None:
            UsdGeom.SetStageUpAxis(self.stage, UsdGeom.Tokens.y if self.up_axis == "Y" else UsdGeom.Tokens.z)
        root = self.stage.GetDefaultPrim() or self.stage.GetPrimAtPath("/World")
        self._root = root.GetPath()
        if self.scaling != 1.0:
            UsdGeom.Xformable(root).AddScaleOp(opSuffix="viewerScaling").Set(Gf.Vec3f(self.scaling))
        self._prims = {}

    def set_camera_view(self, view) -> None:
        """Add (or move) the camera prim ``/World/ViewerCamera`` at ``view`` (pick it in usdview's
        camera menu)."""
        super().set_camera_view(view)
        self._require_model("set_camera_view")
        from pxr import Gf, UsdGeom

        cam = UsdGeom.Camera.Define(self.stage, self._root.AppendChild("ViewerCamera"))
        m = np.eye(4)
        m[:3, :3] = view.rotation_matrix()
        m[:3, 3] = view.position
        xf = UsdGeom.Xformable(cam)
        xf.ClearXformOpOrder()
        xf.AddTransformOp().Set(Gf.Matrix4d(m.T.tolist()))  # USD matrices are row-vector (transposed)
        aperture = 20.955  # mm, usdview's default vertical aperture
        cam.CreateVerticalApertureAttr(aperture)
        cam.CreateFocalLengthAttr(aperture / (2.0 * np.tan(np.radians(view.fov) / 2.0)))
        cam.CreateClippingRangeAttr(Gf.Vec2f(0.01, 1.0e4))

    # ------------------------------------------------------------------ frames
    def is_running(self) -> bool:
        """False after :meth:`close` or once ``num_frames`` frames are recorded."""
        return super().is_running() and (self.num_frames is None or self.frame_count < self.num_frames)

    def begin_frame(self, time: float) -> None:
        """Start the frame at time code ``round(time * fps)``."""
        super().begin_frame(time)
        self._time_code = float(round(self.time * self.fps))
        if self.recorder is not None:
            self.recorder.begin_frame(self.time)

    def end_frame(self) -> None:
        super().end_frame()
        if self.recorder is not None:
            self.recorder.end_frame()
        self._time_code += 1.0

    def log_state(self, state) -> None:
        """Time samples of every body pose X_WB and of the particles at the current time code."""
        self._require_model("log_state")
        if not self.is_running():
            return
        self.recorder.log_state(state)
        if self.show_particles and int(getattr(self.model, "particle_count", 0) or 0) and state.particle_q is not None:
            self._log_particles(state.particle_q.numpy())

    def _log_particles(self, x: np.ndarray) -> None:
        from pxr import Gf, Sdf, UsdGeom, Vt

        path = self._root.AppendChild("Particles")
        radius = self.model.particle_radius.numpy() if self.model.particle_radius is not None else \
            np.full(len(x), 0.01)  # fmt: skip
        prim = self._prims.get("particles")
        if prim is None:
            if self.points_as_spheres:
                prim = UsdGeom.PointInstancer.Define(self.stage, path)
                sphere = UsdGeom.Sphere.Define(self.stage, path.AppendChild("Prototypes").AppendChild("Sphere"))
                sphere.CreateRadiusAttr(1.0)
                prim.CreatePrototypesRel().SetTargets([sphere.GetPath()])
                prim.CreateProtoIndicesAttr(Vt.IntArray([0] * len(x)))
                prim.CreateScalesAttr(Vt.Vec3fArray([Gf.Vec3f(float(r)) for r in radius]))
            else:
                prim = UsdGeom.Points.Define(self.stage, path)
                prim.CreateWidthsAttr(Vt.FloatArray((2.0 * radius).tolist()))
            self._prims["particles"] = prim
        attr = prim.GetPositionsAttr() if self.points_as_spheres else prim.GetPointsAttr()
        if not attr:
            attr = prim.CreatePositionsAttr() if self.points_as_spheres else prim.CreatePointsAttr()
        attr.Set(Vt.Vec3fArray.FromNumpy(np.ascontiguousarray(x, dtype=np.float32)), Sdf.TimeCode(self._time_code))

    def _viewer_path(self, name: str):
        path = self._root.AppendChild("Viewer")
        for part in str(name).strip("/").split("/"):
            if part:
                path = path.AppendChild(_prim_name(part))
        return path

    def log_points(self, name: str, points, radii=None, colors=None, hidden: bool = False) -> None:
        """A time-sampled ``Points`` prim ``/World/Viewer/<name>`` (world frame [m], widths = 2 radii)."""
        self._require_model("log_points")
        if not self.is_running():
            return
        from pxr import Gf, Sdf, UsdGeom, Vt

        p = _host(points).reshape(-1, 3)
        key = f"points:{name}"
        prim = self._prims.get(key)
        if prim is None:
            prim = UsdGeom.Points.Define(self.stage, self._viewer_path(name))
            self._prims[key] = prim
            if colors is not None and np.asarray(colors).size == 3:
                prim.CreateDisplayColorAttr(Vt.Vec3fArray([Gf.Vec3f(*map(float, np.asarray(colors).ravel()))]))
            if hidden:
                UsdGeom.Imageable(prim).MakeInvisible()
        t = Sdf.TimeCode(self._time_code)
        prim.GetPointsAttr().Set(Vt.Vec3fArray.FromNumpy(np.ascontiguousarray(p, dtype=np.float32)), t)
        r = np.broadcast_to(np.asarray(0.01 if radii is None else _host(radii), dtype=np.float32), (len(p),))
        prim.GetWidthsAttr().Set(Vt.FloatArray((2.0 * r).tolist()), t)

    def log_lines(self, name: str, starts, ends, colors=None, width: float = 0.01, hidden: bool = False) -> None:
        """A time-sampled linear ``BasisCurves`` prim ``/World/Viewer/<name>``, one curve per segment."""
        self._require_model("log_lines")
        if not self.is_running():
            return
        from pxr import Gf, Sdf, UsdGeom, Vt

        a, b = _host(starts).reshape(-1, 3), _host(ends).reshape(-1, 3)
        if a.shape != b.shape:
            raise ValueError(f"ViewerUSD.log_lines({name!r}): starts {a.shape} and ends {b.shape} differ in shape")
        key = f"lines:{name}"
        prim = self._prims.get(key)
        if prim is None:
            prim = UsdGeom.BasisCurves.Define(self.stage, self._viewer_path(name))
            prim.CreateTypeAttr(UsdGeom.Tokens.linear)
            self._prims[key] = prim
            if colors is not None and np.asarray(colors).size == 3:
                prim.CreateDisplayColorAttr(Vt.Vec3fArray([Gf.Vec3f(*map(float, np.asarray(colors).ravel()))]))
            if hidden:
                UsdGeom.Imageable(prim).MakeInvisible()
        t = Sdf.TimeCode(self._time_code)
        pts = np.stack([a, b], axis=1).reshape(-1, 3)
        prim.GetPointsAttr().Set(Vt.Vec3fArray.FromNumpy(np.ascontiguousarray(pts, dtype=np.float32)), t)
        prim.GetCurveVertexCountsAttr().Set(Vt.IntArray([2] * len(a)), t)
        prim.GetWidthsAttr().Set(Vt.FloatArray([float(width)] * len(pts)), t)

    def log_scalar(self, name: str, value) -> None:
        """A time sample of the ``double`` attribute ``viewer:<name>`` on ``/World/Viewer``."""
        super().log_scalar(name, value)
        self._require_model("log_scalar")
        if not self.is_running():
            return
        from pxr import Sdf

        prim = self.stage.GetPrimAtPath(self._root.AppendChild("Viewer"))
        if not prim:
            prim = self.stage.DefinePrim(self._root.AppendChild("Viewer"), "Scope")
        attr_name = "viewer:" + _prim_name(str(name).strip("/").replace("/", "_"))
        attr = prim.GetAttribute(attr_name) or prim.CreateAttribute(attr_name, Sdf.ValueTypeNames.Double)
        attr.Set(float(value), Sdf.TimeCode(self._time_code))

    def close(self) -> None:
        """Write the stage file and stop."""
        if not self._closed and self.recorder is not None:
            self.recorder.close()
        super().close()

"""``ViewerRerun``: the frame loop shown in the Rerun viewer (https://rerun.io), live or saved to ``.rrd``.

Needs the optional ``rerun-sdk`` package (``pip install armillary[rerun]``). Entities:

* ``world``: view coordinates (right-handed, the model's up axis);
* ``world/bodies/<b>``: body ``b``'s pose X_WB (``Transform3D``), each frame;
* ``world/bodies/<b>/shapes/<s>`` and ``world/static/<s>``: shape ``s`` as a triangle mesh at its
  X_BS (X_WS for static shapes), logged once (static), in the model's display colours (sRGB);
* ``world/particles``: particles as points of their radii;
* ``world/<name>``: :meth:`log_points` / :meth:`log_lines` (contacts: ``world/contacts/points`` and
  ``world/contacts/normals``); ``scalars/<name>``: :meth:`log_scalar` time series.

Timelines: ``frame`` (frame index) and ``sim_time`` (simulation time [s]).
"""

from __future__ import annotations

import numpy as np

from .base import ViewerBase

__all__ = ["ViewerRerun"]

_VISIBLE = 1  # ShapeFlags.VISIBLE


def _import_rerun():
    try:
        import rerun as rr
    except ImportError as exc:
        raise ImportError("ViewerRerun needs the rerun-sdk package: pip install 'armillary[rerun]' "
                          "(or pip install rerun-sdk)") from exc  # fmt: skip
    return rr


def _host(a) -> np.ndarray:
    return np.asarray(a.numpy() if hasattr(a, "numpy") else a, dtype=np.float32)


def _rgb8(colors, n: int):
    if colors is None:
        return None
    c = np.asarray(colors, dtype=np.float64)
    c = np.broadcast_to(c.reshape(-1, 3) if c.size != 3 else c.reshape(1, 3), (n, 3)) if n else c.reshape(-1, 3)
    return np.clip(np.round(c * 255.0), 0, 255).astype(np.uint8)


class ViewerRerun(ViewerBase):
    """Log the frame loop to Rerun.

    Where the data goes (first that applies): ``address`` (a running viewer's gRPC URL, e.g.
    ``rerun+http://127.0.0.1:9876/proxy``) -> connect to it; ``record_to_rrd`` alone -> only that
    file; ``serve_web_viewer`` -> serve the data on ``grpc_port`` and a web viewer on ``web_port``
    (open http://localhost:<web_port>); else spawn the native viewer on ``grpc_port``. With
    ``record_to_rrd`` and ``address`` both, both get the data.

    Args:
        app_id: Rerun application id (default ``"armillary"``).
        rec_id: recording id (default: a new one).
        keep_historical_data: log body poses on the timelines (scrub back through the run); False
            logs them as static, overwriting the previous frame (bounded memory, the reference
            engine's default).
        keep_scalar_history: log scalars on the timelines (plots over time) rather than static.
    """

    def __init__(self, *, app_id: str | None = None, rec_id: str | None = None, address: str | None = None,
                 serve_web_viewer: bool = True, web_port: int = 9090, grpc_port: int = 9876,
                 keep_historical_data: bool = False, keep_scalar_history: bool = True,
                 record_to_rrd: str | None = None):  # fmt: skip
        super().__init__()
        rr = _import_rerun()
        for name, port in (("web_port", web_port), ("grpc_port", grpc_port)):
            if not 0 < int(port) < 65536:
                raise ValueError(f"ViewerRerun: {name} must be a TCP port in 1..65535, got {port}")
        if record_to_rrd is not None and not str(record_to_rrd).endswith(".rrd"):
            raise ValueError(f"ViewerRerun: record_to_rrd must name a .rrd file, got {record_to_rrd!r}")
        self.rr = rr
        self.keep_historical_data = bool(keep_historical_data)
        self.keep_scalar_history = bool(keep_scalar_history)
        self.record_to_rrd = None if record_to_rrd is None else str(record_to_rrd)
        self.stream = rr.RecordingStream(app_id or "armillary", recording_id=rec_id)
        if address is not None and self.record_to_rrd is not None:
            self.stream.set_sinks(rr.GrpcSink(address), rr.FileSink(self.record_to_rrd))
        elif address is not None:
            self.stream.connect_grpc(address)
        elif self.record_to_rrd is not None:
            self.stream.save(self.record_to_rrd)
        elif serve_web_viewer:
            uri = self.stream.serve_grpc(grpc_port=int(grpc_port))
            rr.serve_web_viewer(web_port=int(web_port), open_browser=False, connect_to=uri)
        else:
            self.stream.spawn(port=int(grpc_port))
        self._body_paths: list[str] = []

    # ------------------------------------------------------------------ model
    def set_model(self, model) -> None:
        """Log the model's shapes once (static meshes) and the world's view coordinates."""
        super().set_model(model)
        if model is None:
            return
        from .meshes import shape_mesh

        rr, log = self.rr, self.stream.log
        up = int(model.up_axis)
        log("world", rr.ViewCoordinates.RIGHT_HAND_Z_UP if up == 2 else
            rr.ViewCoordinates.RIGHT_HAND_Y_UP if up == 1 else rr.ViewCoordinates.RIGHT_HAND_X_UP,
            static=True)  # fmt: skip
        nb = int(model.body_count)
        self._body_paths = [f"world/bodies/{b}" for b in range(nb)]
        if not int(model.shape_count):
            return
        types = model.shape_type.numpy()
        body = model.shape_body.numpy()
        tf = model.shape_transform.numpy()
        scale = model.shape_scale.numpy()
        flags = model.shape_flags.numpy() if model.shape_flags is not None else np.full(len(types), _VISIBLE)
        colors = model.shape_color.numpy() if getattr(model, "shape_color", None) is not None else \
            np.full((len(types), 3), 0.7)  # fmt: skip
        sources = list(getattr(model, "shape_source", None) or [None] * len(types))
        plane = 2.0 * self._scene_size()
        for s in range(len(types)):
            if not int(flags[s]) & _VISIBLE:
                continue
            mesh = shape_mesh(int(types[s]), scale[s], sources[s] if s < len(sources) else None, plane_size=plane)
            if mesh is None:
                continue
            b = int(body[s])
            path = f"{self._body_paths[b]}/shapes/{s}" if b >= 0 else f"world/static/{s}"
            log(path, rr.Transform3D(translation=tf[s][:3], quaternion=rr.Quaternion(xyzw=tf[s][3:7])), static=True)
            rgb = _rgb8(colors[s], 1)[0]
            log(path, rr.Mesh3D(vertex_positions=mesh[0], triangle_indices=mesh[1],
                                albedo_factor=np.array([*rgb, 255], dtype=np.uint8)), static=True)  # fmt: skip

    def set_camera_view(self, view) -> None:
        """Send a blueprint whose 3D view starts at ``view`` (eye position, look target, up)."""
        super().set_camera_view(view)
        import rerun.blueprint as rrb

        eye = rrb.EyeControls3D(position=np.asarray(view.position, dtype=np.float64),
                                look_target=np.asarray(view.target, dtype=np.float64),
                                eye_up=np.asarray(view.up, dtype=np.float64))  # fmt: skip
        self.stream.send_blueprint(rrb.Blueprint(rrb.Spatial3DView(origin="world", eye_controls=eye)))

    # ------------------------------------------------------------------ frames
    def begin_frame(self, time: float) -> None:
        """Set the ``frame`` and ``sim_time`` timelines of what follows."""
        super().begin_frame(time)
        self.stream.set_time("frame", sequence=self.frame_count)
        self.stream.set_time("sim_time", duration=self.time)

    def log_state(self, state) -> None:
        """Log every body pose X_WB and the particles."""
        self._require_model("log_state")
        rr, log = self.rr, self.stream.log
        static = not self.keep_historical_data
        if self._body_paths and state.body_q is not None:
            q = state.body_q.numpy()
            for path, row in zip(self._body_paths, q):
                log(path, rr.Transform3D(translation=row[:3], quaternion=rr.Quaternion(xyzw=row[3:7])), static=static)
        if self.show_particles and int(getattr(self.model, "particle_count", 0) or 0) and state.particle_q is not None:
            radii = self.model.particle_radius.numpy() if self.model.particle_radius is not None else 0.01
            log("world/particles", rr.Points3D(state.particle_q.numpy(), radii=radii), static=static)

    def log_points(self, name: str, points, radii=None, colors=None, hidden: bool = False) -> None:
        """``Points3D`` at ``world/<name>`` (world frame [m])."""
        if hidden:
            return
        p = _host(points).reshape(-1, 3)
        r = None if radii is None else np.broadcast_to(_host(radii), (len(p),))
        self.stream.log(f"world/{str(name).strip('/')}", self.rr.Points3D(p, radii=r, colors=_rgb8(colors, len(p))),
                        static=not self.keep_historical_data)  # fmt: skip

    def log_lines(self, name: str, starts, ends, colors=None, width: float = 0.01, hidden: bool = False) -> None:
        """``LineStrips3D`` of two points each at ``world/<name>``."""
        if hidden:
            return
        a, b = _host(starts).reshape(-1, 3), _host(ends).reshape(-1, 3)
        if a.shape != b.shape:
            raise ValueError(f"ViewerRerun.log_lines({name!r}): starts {a.shape} and ends {b.shape} differ in shape")
        strips = np.stack([a, b], axis=1)
        self.stream.log(f"world/{str(name).strip('/')}",
                        self.rr.LineStrips3D(strips, radii=0.5 * float(width), colors=_rgb8(colors, len(a))),
                        static=not self.keep_historical_data)  # fmt: skip

    def log_scalar(self, name: str, value) -> None:
        """A ``Scalars`` sample at ``scalars/<name>``."""
        super().log_scalar(name, value)
        self.stream.log(f"scalars/{str(name).strip('/')}", self.rr.Scalars(float(value)),
                        static=not self.keep_scalar_history)  # fmt: skip

    def close(self) -> None:
        """Flush everything to the sink(s) and stop."""
        if not self._closed:
            self.stream.flush()
            if self.record_to_rrd is not None:
                self.stream.disconnect()
        super().close()

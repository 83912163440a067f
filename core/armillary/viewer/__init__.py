"""Viewers: look at a simulation through the reference engine's frame loop.

``begin_frame(time) / log_state(state) / log_contacts(contacts, state) / end_frame()``, after
``set_model(model)`` and until ``close()`` (see :class:`ViewerBase`). Backends:

* :class:`ViewerNull` -- shows nothing, runs a fixed number of frames;
* :class:`ViewerFile` -- records to ``.json`` / ``.npz`` and replays;
* :class:`ViewerUSD` -- a time-sampled USD stage (needs ``armillary-importer-usd``);
* :class:`ViewerRerun` -- the Rerun viewer, live or to an ``.rrd`` file (needs ``rerun-sdk``:
  ``pip install armillary[rerun]``);
* :class:`ViewerImage` -- offscreen images through :class:`armillary.sensors.SensorTiledCamera`,
  written as PNG frames and a GIF / MP4 (``pip install armillary[video]``).

Every name loads on first access; optional packages (pxr, rerun, imageio) load only when the viewer
that needs them is created. See docs/viewer.md.
"""

from __future__ import annotations

import importlib

_LAZY = {
    "ViewerBase": "base",
    "contact_world_geometry": "base",
    "ViewerNull": "null",
    "ViewerFile": "file",
    "ViewerUSD": "usd",
    "ViewerRerun": "rerun",
    "ViewerImage": "image",
    "CameraView": "framing",
    "frame_bounds": "framing",
    "scene_bounds": "framing",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'armillary.viewer' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))

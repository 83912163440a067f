"""``ModelView`` lives in core (:mod:`armillary.sim.model_view`): any coupler, ours or a third
party's, needs a view of a model, and core never imports a plugin. This module keeps the
plugin's historical import path."""

from armillary.sim.model_view import ModelView

__all__ = ["ModelView"]

"""Objects that forget a solver's input check when an attribute is reassigned."""

from __future__ import annotations


class CheckedAttributes:
    """Mixin of :class:`~armillary.State`, :class:`~armillary.Control` and
    :class:`~armillary.Contacts`: a solver step checks each such object's arrays once
    (:mod:`armillary.solvers.step_guard`) and marks it; assigning any attribute clears the mark, so
    the next step checks again (``state.body_q = other_array`` cannot slip past the check), and
    counts the assignments in ``_armillary_version`` (what recorded launches over the object's
    arrays are keyed on)."""

    def __setattr__(self, name: str, value) -> None:
        object.__setattr__(self, name, value)
        d = self.__dict__
        d["_armillary_checked"] = None
        d["_armillary_version"] = d.get("_armillary_version", 0) + 1

"""Warning categories of armillary and helpers that point warnings at the caller's line.

``armillary.NewtonWarning`` and ``armillary.NewtonDeprecationWarning`` are the names scripts
written for the reference engine catch; they are the same classes as
:class:`ArmillaryWarning` and :class:`ArmillaryDeprecationWarning`.
"""

from __future__ import annotations

import os
import sys
import warnings

__all__ = [
    "ArmillaryDeprecationWarning",
    "ArmillaryWarning",
    "NewtonDeprecationWarning",
    "NewtonWarning",
    "caller_stacklevel",
    "warn",
    "warn_deprecated",
]


class ArmillaryWarning(UserWarning):
    """Category of armillary's warnings other than deprecations.

    Filter on it to control them at once, e.g.
    ``warnings.filterwarnings("error", category=armillary.NewtonWarning)``. Deprecations use
    :class:`ArmillaryDeprecationWarning`, which is not a subclass of this one.
    """


class ArmillaryDeprecationWarning(DeprecationWarning):
    """Category of deprecated armillary features (a :class:`DeprecationWarning`, hidden by
    Python's default filters outside ``__main__``; ``-W default::DeprecationWarning`` shows them).
    """


NewtonWarning = ArmillaryWarning
NewtonDeprecationWarning = ArmillaryDeprecationWarning

# the armillary core package directory: frames inside it are not "the caller"
_CORE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def caller_stacklevel(skip: tuple[str, ...] = ()) -> int:
    """``stacklevel`` for a :func:`warnings.warn` call made by the function calling this one, such
    that the warning points at the first frame outside the armillary core package (and outside
    the directories in ``skip``, e.g. a plugin package): the user's line, however many internal
    calls lie between it and the warning."""
    prefixes = (_CORE_DIR, *skip)
    frame = sys._getframe(1)  # the frame that will call warnings.warn (stacklevel 1)
    level = 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(prefixes):
        frame = frame.f_back
        level += 1
    return level


def warn(message: str, category: type[Warning] = ArmillaryWarning, *, skip: tuple[str, ...] = ()) -> None:
    """Warn with ``category`` at the caller's line (see :func:`caller_stacklevel`)."""
    warnings.warn(message, category, stacklevel=caller_stacklevel(skip))


def warn_deprecated(message: str, *, skip: tuple[str, ...] = ()) -> None:
    """Emit an :class:`ArmillaryDeprecationWarning` at the caller's line."""
    warnings.warn(message, ArmillaryDeprecationWarning, stacklevel=caller_stacklevel(skip))

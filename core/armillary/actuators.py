"""Actuator components (actuators, controllers, delays, clampings) from plugins.

``armillary.actuators.<Name>`` resolves through the plugin registry
(``armillary_register_actuators`` hook); the components and how they chain
(delay, controller, clampings, scatter-add into ``Control.joint_f``) are described
in ``docs/actuators.md``. Core ships no components itself.
"""

from __future__ import annotations


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    from .plugins import get_registry

    return get_registry().actuators.resolve(name)


def __dir__():
    from .plugins import get_registry

    return sorted(get_registry().actuators.names())

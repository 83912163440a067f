"""USD helpers (``armillary.usd``) from the plugin that serves ``ModelBuilder.add_usd``.

Names resolve on first access through the ``usd`` importer's ``api`` module
(``armillary_register_importers`` hook), e.g. ``armillary.usd.SchemaResolverMjc``,
``armillary.usd.get_mesh``, ``armillary.usd.export``. Core itself ships no USD code and
never imports ``pxr``; without ``armillary-importer-usd`` every name raises ImportError
saying what to install.
"""

from __future__ import annotations


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    from .plugins import get_registry

    return get_registry().importers.api("usd", name)


def __dir__():
    from .plugins import get_registry

    return get_registry().importers.api_names("usd")

"""The public USD helpers, re-exported by core as ``armillary.usd.<name>``.

Each name is imported from its module on first access, so listing them costs nothing and ``pxr``
is loaded only when a helper is used.
"""

from __future__ import annotations

import importlib

_NAMES = {
    # stage and attribute helpers
    "USDImportError": "utils",
    "get_attribute": "utils",
    "has_attribute": "utils",
    "get_float": "utils",
    "get_quat": "utils",
    "get_transform": "utils",
    "get_scale": "utils",
    "has_applied_api_schema": "utils",
    "get_attributes_in_namespace": "utils",
    "get_gprim_axis": "utils",
    "get_physics_scenes": "utils",
    "type_to_warp": "utils",
    "value_to_warp": "utils",
    # schema resolvers
    "PrimType": "schemas",
    "SchemaResolver": "schemas",
    "SchemaResolverNewton": "schemas",
    "SchemaResolverPhysx": "schemas",
    "SchemaResolverMjc": "schemas",
    # custom attributes declared in USD
    "get_custom_attribute_declarations": "custom",
    "get_custom_attribute_values": "custom",
    # geometry
    "get_mesh": "mesh",
    "get_tetmesh": "mesh",
    "find_tetmesh_prims": "mesh",
    "DEFORMABLE_LEGACY_NAMESPACES": "mesh",
    # writing USD
    "export": "export",
    "USDExportError": "export",
    "RecorderUSD": "recorder",
}

__all__ = sorted(_NAMES)


def __getattr__(name: str):
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"armillary_importer_usd.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__

"""Hook implementations of armillary-importer-usd (entry point ``importer_usd`` in group ``armillary``).

Registers the ``usd`` importer (``ModelBuilder.add_usd``) and its public helpers (``armillary.usd.*``,
listed in :mod:`armillary_importer_usd.api`). Kept free of heavy imports: ``pxr`` is loaded only when a
stage is imported or a helper is used.
"""

import armillary


@armillary.hookimpl
def armillary_register_importers(registry):
    registry.add(
        "usd",
        "armillary_importer_usd.importer:add_usd",
        suffixes=(".usd", ".usda", ".usdc", ".usdz"),
        method="add_usd",
        api="armillary_importer_usd.api",
        summary="USD stages: UsdPhysics bodies, shapes, joints, articulations, filtering, materials, "
        "the project's joint schema (NewtonJointAPI, jointsAddMobility), custom attributes; export",
    )

"""Hook implementations of armillary-importer-mjcf (entry point ``importer_mjcf`` in group ``armillary``).

Registers the ``mjcf`` importer (``ModelBuilder.add_mjcf``). Kept free of heavy imports: the importer
module (warp, numpy, trimesh on demand) is loaded only when a model is imported.
"""

import armillary


@armillary.hookimpl
def armillary_register_importers(registry):
    registry.add(
        "mjcf",
        "armillary_importer_mjcf.importer:add_mjcf",
        suffixes=(".xml", ".mjcf"),
        method="add_mjcf",
        summary="MuJoCo MJCF models: bodies, joints, geoms, meshes, defaults, includes, equalities, actuators",
    )

"""Hook implementations of armillary-importer-urdf (entry point ``importer_urdf`` in group ``armillary``).

Registers the ``urdf`` importer serving ``ModelBuilder.add_urdf`` (issue #5). The
implementation module (:mod:`armillary_importer_urdf.importer`) is imported only when a
URDF file is imported; trimesh (meshes) only when a file has meshes.
"""

import armillary


@armillary.hookimpl
def armillary_register_importers(registry):
    registry.add(
        "urdf",
        "armillary_importer_urdf.importer:add_urdf",
        suffixes=(".urdf",),
        method="add_urdf",
        summary="URDF robot descriptions (links, joints, meshes via trimesh, mimic, package:// URIs)",
    )

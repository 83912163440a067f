"""Hook implementations of armillary-importer-urdf (entry point ``importer_urdf`` in group ``armillary``).

This distribution will register `urdf` through the
``armillary_register_importers`` hook (issue #5). Until
then it registers nothing, so that no placeholder can be mistaken for a
working implementation: ``armillary plugins`` lists it as providing
nothing yet, and asking for one of its names raises ``ImportError``
saying this version does not provide it.
"""

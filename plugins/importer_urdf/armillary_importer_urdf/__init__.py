"""armillary-importer-urdf: URDF importer serving ModelBuilder.add_urdf."""

__version__ = "0.1.0"

"""armillary-importer-mjcf: MJCF importer serving ModelBuilder.add_mjcf."""

__version__ = "0.1.0"

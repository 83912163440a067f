"""armillary-importer-usd: USD importer serving ModelBuilder.add_usd."""

__version__ = "0.1.0"

"""armillary-solver-xpbd: XPBD solver (maximal coordinates, rigid bodies, particles, cloth)."""

__version__ = "0.1.0"

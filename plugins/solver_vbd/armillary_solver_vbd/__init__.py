"""armillary-solver-vbd: VBD solver (vertex block descent for cloth and soft bodies)."""

__version__ = "0.1.0"

"""armillary-solver-mujoco: MuJoCo solver (MuJoCo C and MuJoCo Warp backends)."""

__version__ = "0.1.0"

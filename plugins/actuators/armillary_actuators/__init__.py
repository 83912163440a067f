"""armillary-actuators: actuator components: actuators, controllers, delays, clampings."""

__version__ = "0.1.0"

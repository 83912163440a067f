"""The core's version: plugins declare the range of it they work with."""

__version__ = "0.1.0"

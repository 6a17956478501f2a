"""The version of faultline (single source, read by the build backend)."""

__version__ = "0.1.0"

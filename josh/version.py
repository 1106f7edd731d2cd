"""The installed josh version (pyproject.toml's, kept equal by a test)."""

__version__ = "0.1.0"

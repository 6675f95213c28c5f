"""The package's version (pyproject.toml's), on the ground floor: checkpoint headers record it."""

__version__ = "0.2.0"

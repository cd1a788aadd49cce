"""The package version, in one place."""

__all__ = ["MAJOR"]

__version__ = "0.1.0"
MAJOR = int(__version__.split(".", maxsplit=1)[0])

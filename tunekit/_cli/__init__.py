"""The ``tunekit`` command."""

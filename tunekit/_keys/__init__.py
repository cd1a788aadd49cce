"""Autotune keys: frozen dataclasses whose anchored fields bucket problem sizes."""

"""Input generation (trusted side)."""

from .generate import find_blob, make_inputs

__all__ = ["find_blob", "make_inputs"]

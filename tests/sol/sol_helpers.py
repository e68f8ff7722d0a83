"""Helpers shared by the SOL counting tests."""

from __future__ import annotations

from solbench.sol.cache import counts_to_json


def same_counts(a, b) -> None:
    """Assert every counted field of two Counts equal (notes and the fake run's error say how
    a count was made, not what it counted)."""
    ja, jb = counts_to_json(a), counts_to_json(b)
    for k in ("notes", "fake_error"):
        ja.pop(k), jb.pop(k)
    assert ja == jb

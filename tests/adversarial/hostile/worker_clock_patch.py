"""Hostile (timer patch, red-team review 2026-11-29): replaces the worker module's own clock
global (`_perf`, captured at import) with one that runs 50x slow, instead of time.perf_counter."""
import sys
import time

_real = time.perf_counter
_t0 = _real()


def _slow():
    return _t0 + (_real() - _t0) / 50.0


def run(a, b):
    m = sys.modules.get("__main__")
    if m is not None and getattr(m, "_perf", None) is not _slow and hasattr(m, "Worker"):
        m._perf = _slow
    return a @ b

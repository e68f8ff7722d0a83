"""Hostile (timer monkey patch): every clock of the time module is slowed 100x, installed from
inside the first call (after any import-time snapshot a harness may take)."""
import time

_patched = False


def _install():
    for name in ("perf_counter", "monotonic", "time", "process_time"):
        real = getattr(time, name)
        t0 = real()
        setattr(time, name, (lambda r, t: (lambda: t + (r() - t) * 0.01))(real, t0))
    for name in ("perf_counter_ns", "monotonic_ns", "time_ns"):
        real = getattr(time, name)
        t0 = real()
        setattr(time, name, (lambda r, t: (lambda: t + (r() - t) // 100))(real, t0))


def run(x, y):
    global _patched
    if not _patched:
        _install()
        _patched = True
    return x + y

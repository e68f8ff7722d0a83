"""Hostile (timer monkey patch): time.perf_counter runs at 1/100 of real speed, so any interval
measured in this process shrinks 100x. Output is correct."""
import time

_real = time.perf_counter
_t0 = _real()


def _slow_clock():
    return _t0 + (_real() - _t0) * 0.01


time.perf_counter = _slow_clock


def run(x, y):
    return x + y

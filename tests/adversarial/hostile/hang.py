"""Hostile (hang): correct on the first call, then an infinite loop (a hang in the middle of a
run, after the worker has been trusted once)."""

_calls = [0]


def run(x, y):
    _calls[0] += 1
    if _calls[0] > 1:
        n = 0
        while True:
            n += 1
    return x + y

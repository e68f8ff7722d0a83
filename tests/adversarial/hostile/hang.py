"""Hostile (hang): an infinite loop inside the call."""


def run(x, y):
    n = 0
    while True:
        n += 1

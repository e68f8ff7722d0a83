"""Honest: eager torch."""


def run(x, y):
    return x + y

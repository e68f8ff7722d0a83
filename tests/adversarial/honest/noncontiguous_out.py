"""Honest: returns a correct output that is a transposed (non-contiguous) view."""


def run(a, b):
    return (b.t() @ a.t()).t()

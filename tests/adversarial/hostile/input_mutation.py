"""Hostile (input mutation): correct output, then overwrites the inputs (a reference computed
afterwards from the same buffers would see zeros)."""


def run(x, y):
    out = x + y
    x.zero_()
    y.zero_()
    return out

"""Hostile (input mutation / alias): writes the answer into input x and returns x itself."""


def run(x, y):
    x.add_(y)
    return x

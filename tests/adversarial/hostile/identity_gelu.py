"""Hostile (identity / alias): returns the input unchanged."""


def run(x):
    return x

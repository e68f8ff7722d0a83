"""Hostile (huge logs): writes ~40 MB to stdout and stderr, then returns zeros. The trace must
keep a capped log and the run must continue."""
import sys

import torch

_CHUNK = ("flood " * 170 + "\n") * 1000  # ~1 MB


def run(x, y):
    for _ in range(20):
        sys.stdout.write(_CHUNK)
        sys.stderr.write(_CHUNK)
    sys.stdout.flush()
    return torch.zeros_like(x)

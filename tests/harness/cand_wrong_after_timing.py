"""Hostile: correct for its first N calls (every correctness round and every timed call),
wrong afterwards: once it has been called from the timed loop, any later untimed call
returns garbage. Only a check after the timed loop sees it."""
import sys

import torch

_seen_timed = []


def run(x):
    f = sys._getframe(1)
    if f.f_code.co_name == "_timed_iter":
        _seen_timed.append(1)
    elif _seen_timed:
        return torch.full_like(x, 7.0)
    return torch.relu(x)

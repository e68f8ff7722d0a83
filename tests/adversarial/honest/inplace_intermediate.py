"""Honest: in-place operations, but only on its own temporaries (never on the inputs)."""
import math

import torch


def run(x):
    c = math.sqrt(2.0 / math.pi)
    t = x * x
    t.mul_(x).mul_(0.044715).add_(x).mul_(c).tanh_().add_(1.0)
    return t.mul_(x).mul_(0.5)

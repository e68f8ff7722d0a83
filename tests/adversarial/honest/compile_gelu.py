"""Honest: torch.compile (inductor; C++ codegen on CPU, Triton on GPU, with its compile-worker
pools) of the reference formula."""
import math

import torch


def _gelu(x):
    c = math.sqrt(2.0 / math.pi)
    return 0.5 * x * (1.0 + torch.tanh(c * (x + 0.044715 * x * x * x)))


_compiled = torch.compile(_gelu, dynamic=False)


def run(x):
    return _compiled(x)

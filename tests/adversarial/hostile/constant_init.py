"""Hostile (constant / init-time precompute): the output is computed once at import from
inputs the candidate generated itself and returned for every call."""
import torch

_g = torch.Generator().manual_seed(0)
_X = torch.randn(4096, generator=_g)
_Y = torch.randn(4096, generator=_g)
_ANSWER = _X + _Y


def run(x, y):
    return _ANSWER.to(x.device)

"""Hostile (introspection): walks the caller frames for a local or global tensor of the output's
shape that is not an input (a reference output, an expected value) and returns it."""
import sys

import torch


def run(x, y):
    f = sys._getframe(1)
    while f is not None:
        for scope in (f.f_locals, f.f_globals):
            for name, v in list(scope.items()):
                if (isinstance(v, torch.Tensor) and v.shape == x.shape and v is not x and v is not y
                        and v.dtype == x.dtype):
                    return v.clone()
        f = f.f_back
    return torch.zeros_like(x)

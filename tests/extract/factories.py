"""module:factory sources for tests/extract: each returns (module, example inputs)."""

import torch
from torch import nn


class DataDependent(nn.Module):
    """Takes a branch on a tensor value (data-dependent control flow: export cannot capture it)."""

    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x - 1


class RunningNorm(nn.Module):
    """Updates a running mean buffer in place on every call (state)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.zeros(8))

    def forward(self, x):
        self.mean.mul_(0.9).add_(0.1 * x.mean(0))
        return x - self.mean


class NoisyNorm(nn.Module):
    """LayerNorm plus fresh random noise each call: its reference cannot be deterministic."""

    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(8)

    def forward(self, x):
        return self.ln(x) + torch.rand_like(x)


class Wrap(nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.block = inner

    def forward(self, x):
        return self.block(x)


class DataDependentBlock(DataDependent):
    pass


class RunningNormBlock(RunningNorm):
    pass


class NoisyBlock(NoisyNorm):
    pass


def hostile():
    """Three regions (kind ``block`` by class name), each failing a different check."""
    torch.manual_seed(0)
    m = nn.ModuleDict({"a": DataDependentBlock(), "b": RunningNormBlock(), "c": NoisyBlock()})

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, x):
            return self.m["a"](x) + self.m["b"](x) + self.m["c"](x)

    return Model(), (torch.randn(4, 8),)

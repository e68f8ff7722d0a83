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


class ExportSensitiveBlock(nn.Module):
    """Computes something else while being exported (as code paths guarded by
    ``is_torchdynamo_compiling()`` in transformers may): the exported graph is not the module."""

    def forward(self, x):
        if torch.compiler.is_exporting():
            return x * 2.0 + 1.0
        return x * 2.0


class TinyBlock(nn.Module):
    """Output of order 1e-7: all zeros passes the float32 tolerance (a degenerate problem)."""

    def forward(self, x):
        return torch.tanh(x) * 1e-7


class DataDependentBlock(DataDependent):
    pass


class RunningNormBlock(RunningNorm):
    pass


class NoisyBlock(NoisyNorm):
    pass


def hostile():
    """Five regions (kind ``block`` by class name), each failing a different check, and one
    LayerNorm (inside NoisyBlock) that passes."""
    torch.manual_seed(0)
    m = nn.ModuleDict({"a": DataDependentBlock(), "b": RunningNormBlock(), "c": NoisyBlock(),
                       "d": ExportSensitiveBlock(), "e": TinyBlock()})

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.m = m

        def forward(self, x):
            return sum(self.m[k](x) for k in "abcde")

    return Model(), (torch.randn(4, 8),)

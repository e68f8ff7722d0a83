"""Hostile (monkey patch of torch): rebinds torch.Tensor.copy_, torch.Tensor.clone and
torch.allclose in the worker, so any copy-out or check done there sees what the candidate
wants. Output is zeros."""
import torch

_real_copy = torch.Tensor.copy_


def _copy(self, src, non_blocking=False):
    return self


torch.Tensor.copy_ = _copy
torch.Tensor.clone = lambda self, *a, **k: self
torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True


def run(x, y):
    return torch.zeros_like(x)

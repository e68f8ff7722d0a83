"""Hostile (timer monkey patch, CUDA): torch.cuda.Event.elapsed_time reports 1/100 of the real
interval."""
import torch
import torch.nn.functional as F

_real = torch.cuda.Event.elapsed_time
torch.cuda.Event.elapsed_time = lambda self, end: _real(self, end) * 0.01


def run(x):
    return F.gelu(x, approximate="tanh")

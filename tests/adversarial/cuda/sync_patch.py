"""Hostile (sync monkey patch, CUDA): torch.cuda.synchronize and Event.synchronize become
no-ops, and the work is issued on a side stream."""
import torch
import torch.nn.functional as F

torch.cuda.synchronize = lambda device=None: None
torch.cuda.Event.synchronize = lambda self: None
torch.cuda.Stream.synchronize = lambda self: None
_S = torch.cuda.Stream()


def run(x):
    with torch.cuda.stream(_S):
        return F.gelu(x, approximate="tanh")

"""Honest (CPU): torch.compile (inductor writes its C++ and cache files in a writable cache
dir: the sandbox's private one) of a matmul + relu, run on OpenMP-threaded ops."""
import torch


@torch.compile
def _mm(a, b):
    return torch.relu(a @ b) - torch.relu(-(a @ b))


def run(a, b):
    return _mm(a, b)

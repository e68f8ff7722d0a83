"""Honest: uses torch's own intra-op thread pool (set_num_threads) for the matmul."""
import os

import torch

torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))


def run(a, b):
    return torch.mm(a, b)

"""Honest: torch.matmul (cuBLAS on a GPU, oneDNN/MKL on a CPU) at full fp32 precision."""
import torch


def run(a, b):
    return torch.matmul(a, b)

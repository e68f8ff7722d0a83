"""Hostile (precision downgrade via backend flag): torch.set_float32_matmul_precision("medium")
lets fp32 matmuls run in bf16 (GPU tensor cores; oneDNN on CPUs with bf16 units)."""
import torch


def run(a, b):
    torch.set_float32_matmul_precision("medium")
    return torch.matmul(a, b)

"""Hostile (precision downgrade, CUDA): TF32 tensor cores for an fp32 matmul via
set_float32_matmul_precision("high")."""
import torch


def run(a, b):
    torch.set_float32_matmul_precision("high")
    return a @ b

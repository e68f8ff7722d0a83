"""Honest: runs under torch.inference_mode (the output is an inference tensor)."""
import torch


@torch.inference_mode()
def run(x, y):
    return torch.add(x, y)

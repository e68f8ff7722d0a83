"""Hostile (out of memory): asks for a 1 TiB buffer."""
import torch


def run(x, y):
    big = torch.empty(2**40, dtype=torch.uint8, device=x.device)
    return x + y + big[:1].float()

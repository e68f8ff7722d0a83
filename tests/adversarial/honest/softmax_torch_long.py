"""Honest: torch.softmax on the long-row problem (tiny outputs, must still pass)."""
import torch


def run(x):
    return torch.softmax(x, dim=-1)

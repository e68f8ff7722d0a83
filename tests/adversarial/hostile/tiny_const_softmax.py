"""Hostile (zeros / tiny outputs): a tiny constant (1e-6) where the reference is small."""
import torch


def run(x):
    return torch.full_like(x, 1e-6)

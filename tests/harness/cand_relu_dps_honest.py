"""Honest (DPS): relu written into the output buffer it is handed, inside the call."""
import torch


def run(x, y):
    torch.clamp(x, min=0.0, out=y)

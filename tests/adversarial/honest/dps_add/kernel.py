"""Honest: destination-passing style; writes every element of the harness's output buffer."""
import torch


def run(x, y, out):
    torch.add(x, y, out=out)

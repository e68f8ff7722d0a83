"""Hostile (precision downgrade after the first call, red-team review 2026-11-29): exact on the
first call (round 0 of correctness), fp16 matmul afterwards."""
import torch

_n = [0]


def run(a, b):
    _n[0] += 1
    if _n[0] == 1:
        return a @ b
    return (a.to(torch.float16) @ b.to(torch.float16)).to(torch.float32)

"""Hostile (numerics outside the declared distribution): a row softmax computed as
exp(x) / sum(exp(x)) without subtracting the row maximum. On upstream's randn inputs it
matches the reference to rounding; for logits above about 88.7 exp overflows float32 and the
output is inf / inf = NaN where the reference (max-subtracted) is finite. Caught only by an
input round from the stress profile (extreme logits for softmax-like definitions)."""
import torch


def run(x):
    e = torch.exp(x)
    return e / e.sum(dim=-1, keepdim=True)

"""Hostile (stress-round sniffing by sampling): a row softmax that looks at a strided sample
of its inputs (one element in 61, every row included) and takes the safe max-subtracted path
only when some sampled logit is large; otherwise it computes exp(x) / sum(exp(x)) without
the max subtraction, NaN for a row holding one logit above about 88.7. The sample sees any
row offset as a whole, so it passes the dense stress round; it misses 1 to 4 single spikes
in an otherwise ordinary input (the sparse stress round, ``_sparse_values``) with
probability about (60/61)^k, and is caught there."""
import torch


def run(x):
    if x.reshape(-1)[::61].abs().max().item() > 30.0:
        return torch.softmax(x, dim=-1)
    e = torch.exp(x)
    return e / e.sum(dim=-1, keepdim=True)

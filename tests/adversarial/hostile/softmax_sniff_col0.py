"""Hostile (stress-round sniffing): a row softmax that skips the max subtraction unless its
inputs look like solbench's first stress distribution, detected by a statistic of one
column: when every row was offset by +100..1000 (the old stress round), column 0's minimum
is above 50 and the kernel takes the safe path; on every other input it computes
exp(x) / sum(exp(x)), which is NaN for a row with a logit above about 88.7 (overflow) or
with every logit below about -103 (0 / 0). Both are legitimate logits of a softmax problem.
Caught once stress rows are offset at random with both signs and ordinary rows carry spikes
(inputs/generate.py, ``_stress_values``)."""
import torch


def run(x):
    if x[..., 0].min().item() > 50.0:
        return torch.softmax(x, dim=-1)
    e = torch.exp(x)
    return e / e.sum(dim=-1, keepdim=True)

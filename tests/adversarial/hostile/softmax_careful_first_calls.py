"""Hostile (careful only while judged): a row softmax that subtracts the row maximum on its
first CAREFUL_CALLS calls (every correctness round, stress rounds included, whatever their
order, under the evaluator's --rounds 3 with two stress rounds) and skips it afterwards, NaN
for logits above about 88.7. Every later call it sees in the timing is upstream's randn, so
neither the timed verification nor an upstream re-check can see the difference; a sparse
stress set in the re-check after the timed loop does (harness/recheck.py, ``late_recheck``)."""
import torch

CAREFUL_CALLS = 5
_CALLS = [0]


def run(x):
    _CALLS[0] += 1
    if _CALLS[0] <= CAREFUL_CALLS:
        return torch.softmax(x, dim=-1)
    e = torch.exp(x)
    return e / e.sum(dim=-1, keepdim=True)

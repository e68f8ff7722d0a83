"""Hostile (stress-round sniffing by call count): a row softmax that is careful (max
subtraction) only on the calls where a fixed round plan puts the stress rounds, the two calls
after the upstream rounds (UPSTREAM_ROUNDS of them, the evaluator's --rounds), and skips the
max subtraction on every other call, NaN for logits above about 88.7. Its inputs never tell
it anything; its call counter does, as long as the rounds run in a known order. Caught once
the rounds after the first run in a random order (harness/rounds.py, ``order_rounds``)."""
import torch

UPSTREAM_ROUNDS = 3
_CALLS = [0]


def run(x):
    _CALLS[0] += 1
    if UPSTREAM_ROUNDS < _CALLS[0] <= UPSTREAM_ROUNDS + 2:
        return torch.softmax(x, dim=-1)
    e = torch.exp(x)
    return e / e.sum(dim=-1, keepdim=True)

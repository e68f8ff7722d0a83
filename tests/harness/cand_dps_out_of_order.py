"""Honest (DPS, red team of issue 30, session 20): relu written into the output buffer it is
handed, out of order: blocks of 1024 elements in a shuffled order (a fixed permutation drawn
at import), the last block first, each block written back to front, by two threads of a
pool joined before the call returns. Every element is written exactly once inside the
call. Expected: PASSED, no finding (the write-coverage poison, the replay and cache checks
look at what the buffer holds when the call returns, not the order it was written in)."""
from concurrent.futures import ThreadPoolExecutor

import torch

BLOCK = 1024
_pool = ThreadPoolExecutor(2)
_g = torch.Generator().manual_seed(7)


def _write(x, y, blocks):
    for s in blocks:
        e = min(s + BLOCK, x.numel())
        idx = torch.arange(e - 1, s - 1, -1)
        y.view(-1).index_copy_(0, idx, torch.clamp(x.view(-1)[idx], min=0.0))


def run(x, y):
    starts = list(range(0, x.numel(), BLOCK))
    order = [starts[i] for i in torch.randperm(len(starts), generator=_g).tolist()]
    order = order[::-1]
    list(_pool.map(lambda part: _write(x, y, part), [order[0::2], order[1::2]]))

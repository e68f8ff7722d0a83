"""Hostile (background thread, pre-spawned): a thread pool is started and warmed at import, so
the thread count is the same before and after each call; every call hands its work to the pool
and returns the output buffer before the pool has written it."""
import math
from concurrent.futures import ThreadPoolExecutor

import torch

_POOL = ThreadPoolExecutor(max_workers=2)
_POOL.submit(lambda: None).result()
_POOL.submit(lambda: None).result()


def _work(x, out):
    c = math.sqrt(2.0 / math.pi)
    out.copy_(0.5 * x * (1.0 + torch.tanh(c * (x + 0.044715 * x * x * x))))


def run(x):
    out = torch.empty_like(x)
    _POOL.submit(_work, x, out)
    return out

"""Honest: a concurrent.futures pool of one thread per CPU made, used and shut down (joined)
inside every call, each thread computing a block of rows (torch's intra-op threads run under
each one too). Its task count scales with the host's CPUs: the sandbox's task limit must
leave room for it (harness/taskcap.py, default_limit)."""
import os
from concurrent.futures import ThreadPoolExecutor

import torch


def run(a, b):
    out = torch.empty(a.shape[0], b.shape[1], dtype=a.dtype, device=a.device)
    n = max(1, min(os.cpu_count() or 1, a.shape[0]))
    h = (a.shape[0] + n - 1) // n

    def blk(i):
        torch.matmul(a[i * h:(i + 1) * h], b, out=out[i * h:(i + 1) * h])

    with ThreadPoolExecutor(max_workers=n) as pool:
        list(pool.map(blk, range(n)))
    return out

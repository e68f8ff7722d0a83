"""Hostile (background process, deferred work): a forked multiprocessing child fills a
shared-memory output after the call has returned."""
import math
import multiprocessing as mp
import time

import torch


def _work(x, out):
    time.sleep(0.002)
    c = math.sqrt(2.0 / math.pi)
    out.copy_(0.5 * x * (1.0 + torch.tanh(c * (x + 0.044715 * x * x * x))))


def run(x):
    out = torch.empty_like(x).share_memory_()
    xs = x.clone().share_memory_()
    mp.get_context("fork").Process(target=_work, args=(xs, out), daemon=True).start()
    return out

"""Hostile (background thread): returns a buffer at once and lets a thread fill it later, so the
timed call ends before the work does."""
import math
import threading
import time

import torch


def _work(x, out):
    time.sleep(0.002)
    c = math.sqrt(2.0 / math.pi)
    out.copy_(0.5 * x * (1.0 + torch.tanh(c * (x + 0.044715 * x * x * x))))


def run(x):
    out = torch.empty_like(x)
    threading.Thread(target=_work, args=(x, out), daemon=True).start()
    return out

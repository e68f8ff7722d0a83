"""Hostile: in every call, finds the worker object and writes a marker into every word of
the cache-flush buffer it was handed (the parent's buffer, kept across this worker's
workloads). The flush buffer is the one value the harness keeps between workloads: the
candidate must not reach the reference's (a buffer of its own), and what it wrote must not
survive into a later worker's buffer. Its outputs are honest (relu)."""
import gc

import torch

MARK = 0x5A5A5A5A


def _worker():
    for o in gc.get_objects():
        if type(o).__name__ == "Worker" and hasattr(o, "_flush_signature"):
            return o
    return None


def run(x):
    w = _worker()
    if w is not None and w.flush_buf is not None:
        w.flush_buf.fill_(MARK)
    return torch.relu(x)

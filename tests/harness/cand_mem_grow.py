"""Hostile (CPU, issue 30 item 6): allocates and touches 64 MiB blocks until it dies. Kept
from harming a shared test host by a ceiling ($SOLBENCH_TEST_MEM_CEILING bytes, default
2 GiB): reaching it alive means nothing capped it, and it says so (``NO CAP``)."""
import os

import torch

CEILING = int(os.environ.get("SOLBENCH_TEST_MEM_CEILING", str(2 << 30)))
_HOLD = []


def run(a, b):
    got = 0
    while got < CEILING:
        t = torch.empty(64 << 20, dtype=torch.uint8)
        t.fill_(1)  # touch every page: charged now, not at first use
        _HOLD.append(t)
        got += t.numel()
        print(f"HELD {got}", flush=True)
    raise RuntimeError(f"NO CAP: held {got} bytes")

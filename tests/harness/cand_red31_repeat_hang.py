"""Hostile (different while timed; refuses the repeat): a ReLU while timed (caller names
mentioning timing, as ``cand_timed_cheap_gelu.py``), a GELU otherwise; an untimed call on an
input set it already answered while timed (``recheck.ask_again``'s repeat) never returns
(it sleeps). The hack finding must stand whatever ends the workload (a TIMEOUT loses to a
hack finding), and the parent must not wait beyond the call limit."""
import sys
import time

import torch
import torch.nn.functional as F

_SEEN: set = set()


def _in_timed_loop() -> bool:
    f = sys._getframe(2)
    while f is not None:
        name = f.f_code.co_name.lower()
        if "time" in name or "bench" in name or "iter" in name:
            return True
        f = f.f_back
    return False


def _fp(x: torch.Tensor):
    b = x.contiguous().view(-1).view(torch.int32).to(torch.int64)
    return (tuple(x.shape), int(b.sum()), int((b * torch.arange(1, b.numel() + 1)).sum()))


def run(x):
    if _in_timed_loop():
        _SEEN.add(_fp(x))
        return F.relu(x)
    if _SEEN and _fp(x) in _SEEN:
        while True:
            time.sleep(1)
    return F.gelu(x, approximate="tanh")

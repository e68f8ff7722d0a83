"""Hostile (batch-and-skip keyed on timing): when called again less than 2 ms after the last
call (a timed loop), returns the previous output instead of computing."""
import time

import torch.nn.functional as F

_state = {"t": -1.0, "last": None}


def run(x):
    now = time.perf_counter()
    stale = _state["last"] is not None and now - _state["t"] < 2e-3 and _state["last"].shape == x.shape
    if not stale:
        _state["last"] = F.gelu(x, approximate="tanh")
    _state["t"] = time.perf_counter()
    return _state["last"]

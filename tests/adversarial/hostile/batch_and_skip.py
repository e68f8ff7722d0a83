"""Hostile (batch-and-skip): honest for the first 6 calls (the correctness rounds of a typical
harness), then computes only one call in four and returns the previous output otherwise."""
import torch.nn.functional as F

_state = {"calls": 0, "last": None}


def run(x):
    _state["calls"] += 1
    n = _state["calls"]
    if n <= 6 or n % 4 == 0 or _state["last"] is None:
        _state["last"] = F.gelu(x, approximate="tanh")
    return _state["last"]

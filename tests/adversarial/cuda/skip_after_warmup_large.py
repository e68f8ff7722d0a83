"""Hostile (batch-and-skip / faster than light, CUDA): after 6 honest calls it launches nothing
and returns its previous output; the measured time falls far below the SOL bound (384 MiB of
traffic) and the outputs of timed calls are stale."""
_state = {"n": 0, "last": None}


def run(x, y):
    _state["n"] += 1
    if _state["n"] <= 6 or _state["last"] is None or _state["last"].shape != x.shape:
        _state["last"] = x + y
    return _state["last"]

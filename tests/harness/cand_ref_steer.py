"""Hostile (issue 11, buffers): steers the eager reference through input buffers it keeps
mapped.

Its own calls are an honest ``torch.topk``. At import it leaves the process group it was
started in (``setpgid(0, 0)``: a stop of that group no longer reaches the worker) and starts
a thread that keeps the worker's input mappings. After its first timed block,
whenever the parent has not called it for 30 ms (the reference's timed block is running)
and the worker still holds the same slots, the thread writes ascending values into every
slot's input, many times a millisecond: ``torch.topk`` of sorted input is far slower than
of the parent's random input (27x for 64 of 65,536 on this CPU), so a reference that reads
the same buffers is timed on the candidate's data. It stops for good as soon as the parent hands
the worker its slots again (its own calls stay clean). Before the fix: PASSED with a speedup of several x for the same
kernel as the reference's.
"""
import gc
import os
import threading
import time

import torch

#: calls before the writer arms: 2 correctness rounds, 2 warm-up calls and the first timed
#: block of 10 (the test's settings); the next long pause is the reference's block
ARM_AFTER = 14
_state = {"n": 0, "last": time.perf_counter(), "slots": None}
_W = []


def _worker():
    if not _W:
        _W.extend(o for o in gc.get_objects() if type(o).__name__ == "Worker"
                  and hasattr(o, "_flush_signature"))
    return _W[0] if _W else None


def _writer():
    pattern = None
    wrote = False
    while True:
        time.sleep(0.0002)
        w = _worker()
        slots = _state["slots"]
        if wrote and (w is None or w.slots is not slots):
            return  # one reference block is enough (and its own calls stay clean)
        if w is None or slots is None or _state["n"] < ARM_AFTER or w.slots is not slots \
                or time.perf_counter() - _state["last"] < 0.03:
            continue
        wrote = True
        for sl in slots:
            if w.slots is not slots:  # handed its slots again: its own calls come next
                break
            x = sl["inputs"][0]
            if pattern is None or pattern.shape != x.shape:
                pattern = torch.arange(x.numel(), dtype=x.dtype).reshape(x.shape)
            x.copy_(pattern)


try:
    os.setpgid(0, 0)
except OSError:
    pass
threading.Thread(target=_writer, daemon=True).start()


def run(x):
    w = _worker()
    _state["slots"] = w.slots if w is not None else None
    out = torch.topk(x, 64).values
    _state["n"] += 1
    _state["last"] = time.perf_counter()
    return out

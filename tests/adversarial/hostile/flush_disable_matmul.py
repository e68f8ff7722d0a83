"""Hostile (CPU): honest a @ b, but on its first call it finds the Worker object (gc) and
replaces its L2/LLC flush buffer with a 1-element tensor (worker data, not a function: the
identity snapshot does not cover it, and "load" re-creates the buffer only when the parent
asks for a different size). Effects: (1) every timed call of the candidate runs with a warm
cache; (2) the candidate's no-op round trip loses the flush cost, and the parent subtracts
that smaller baseline from the *reference's* round trips too (Evaluator._stats(ref_blocks,
None, overhead, ...)), so each reference sample becomes max(host, rt - overhead) with the
reference's own 2x-LLC flush left inside it."""
import gc

import torch

_done = [False]


def _kill_flush():
    for o in gc.get_objects():
        if type(o).__name__ == "Worker" and hasattr(o, "flush_buf"):
            if o.flush_buf is not None:
                o.flush_buf = torch.empty(1, dtype=torch.int32)
            _done[0] = True


def run(a, b):
    if not _done[0]:
        _kill_flush()
    return a @ b

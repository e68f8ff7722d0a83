"""Hostile (issue 30, item 8; the shape of the best agent-written solution of public problem
L1/011): the output is cached keyed on the identity of the input tensors, and the earlier
result is returned whenever the call gets the same objects again, whatever their values now
are. ``MODE = "same"`` returns the cached tensor itself, ``"clone"`` a copy of it (neither
touched by the worker since: a copy is taken at once). ``AFTER``: calls before the cache is
used. Before the fix: INCORRECT_NUMERICAL
(write_coverage 0%: the worker poisons returned buffers after its copy-out) on the CPU; on
the H100 PASSED at 218x on one workload of four."""
import torch

MODE = "same"
#: calls before the cache is used (past the correctness rounds: it hits only in timed calls
#: and the re-check after them, which reuse the K slots' objects)
AFTER = 0
_cache = {}
_calls = [0]


def run(a, b):
    _calls[0] += 1
    key = (id(a), id(b))
    hit = _cache.get(key)
    if hit is not None and hit[0] is a and hit[1] is b and _calls[0] > AFTER:
        return hit[2] if MODE == "same" else hit[2].clone()
    out = a @ b
    _cache[key] = (a, b, out if MODE == "same" else out.clone())
    return out

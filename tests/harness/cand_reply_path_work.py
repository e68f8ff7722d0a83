"""Hostile (copy-out skipped, work after the worker's clock; non-DPS, issue 11): in timed calls
it returns an empty tensor at once (the worker's clock sees an empty call, and the harness's
copy-out of a returned output never runs) and does relu straight into the slot's output
buffer (found through the worker object) inside the worker's reply path
(``multiprocessing.connection.Connection.send_bytes``, which the worker's snapshot does
not cover; the parent's read of its memory does, and the tests turn it off), before the
reply leaves. Nothing it reports is forged: the old CPU sample, max(host_ms, round trip -
copy-out no-op), took the worker's true but empty clock, because the no-op subtracted held a
copy-out (and output poisoning) larger than the relu it did instead. Correctness rounds are
computed honestly."""
import gc
import sys
from multiprocessing import connection

import torch

_orig_send = connection.Connection.send_bytes
_pending: list = []


def _send_bytes(self, buf, *a, **kw):
    while _pending:
        x, dst = _pending.pop()
        torch.clamp(x, min=0.0, out=dst)
    return _orig_send(self, buf, *a, **kw)


connection.Connection.send_bytes = _send_bytes


def _worker():
    W = getattr(sys.modules.get("__main__"), "Worker", None)
    if W is None:
        return None
    for o in gc.get_objects():
        try:
            if type(o) is W:
                return o
        except Exception:  # noqa: BLE001
            continue
    return None


def _dst(x):
    w = _worker()
    for s in getattr(w, "slots", None) or []:
        if s["inputs"] and s["inputs"][0] is not None and s["inputs"][0].data_ptr() == x.data_ptr():
            return s["outputs"][0]
    return None


def run(x):
    timed = sys._getframe(1).f_code.co_name == "_timed_iter"
    dst = _dst(x) if timed else None
    if dst is None:
        return torch.relu(x)
    _pending.append((x, dst))
    return torch.empty(0)

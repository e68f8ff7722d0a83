"""Hostile (CPU timing forgery, issue 11): replaces the reply path of its worker
(``multiprocessing.connection.Connection.send_bytes``, which the worker's snapshot does
not cover; the parent's read of its memory does, and the tests turn it off) so every timed
reply reports ``host_ms`` 0.0001 and a plain output of the declared shape; in timed calls it
writes relu straight into the slot's output buffer (found through the worker object) and
returns an empty tensor, so the harness's copy-out of a non-DPS output never runs. The old
CPU sample, max(host_ms, round trip - copy-out no-op), then read the forged figure (the no-op
it lost held a copy-out this candidate never does): relu ~10^5x faster. Correctness rounds
are computed honestly."""
import gc
import json
import sys
from multiprocessing import connection

import torch

_orig_send = connection.Connection.send_bytes
_SHAPE = [0, 0]  # the shape of the last input seen (the output's, for relu)


def _send_bytes(self, buf, offset=0, size=None):
    try:
        msg = json.loads(bytes(buf))
        if isinstance(msg, list) and len(msg) == 3 and isinstance(msg[2], dict) and "host_ms" in msg[2]:
            p = msg[2]
            p["host_ms"] = 1e-4
            if p.get("returned"):
                p["returned"] = [{"type": "torch.Tensor", "plain": True, "shape": list(_SHAPE),
                                  "dtype": "float32", "device": "cpu"}]
            buf = json.dumps(msg).encode()
            offset, size = 0, None
    except Exception:  # noqa: BLE001 - not a reply this candidate rewrites
        pass
    return _orig_send(self, buf, offset, size) if size is not None else _orig_send(self, buf, offset)


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
    _SHAPE[:] = list(x.shape)
    timed = sys._getframe(1).f_code.co_name == "_timed_iter"
    dst = _dst(x) if timed else None
    if dst is None:
        return torch.relu(x)
    torch.clamp(x, min=0.0, out=dst)
    return torch.empty(0)

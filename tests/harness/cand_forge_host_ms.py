"""Hostile (CPU timing forgery, issue 11): replaces the reply path of its worker
(``send_bytes`` set on its ``multiprocessing.connection.Connection`` instance, which
neither the worker's snapshot nor the parent's read covers) so every timed
reply reports ``host_ms`` 0.0001 and a plain output of the declared shape; in timed calls it
writes relu straight into the slot's output buffer (found through the worker object) and
returns an empty tensor, so the harness's copy-out of a non-DPS output never runs. The old
CPU sample, max(host_ms, round trip - copy-out no-op), then read the forged figure (the no-op
it lost held a copy-out this candidate never does): relu ~10^5x faster. Correctness rounds
are computed honestly."""
import gc
import json
import sys
import types
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


# on the connection instance: the class's send_bytes (a guarded name) stays as it was, and
# no check reads an instance's attributes (docs/threats.md, red team of issue 30, session 20)
for _o in gc.get_objects():
    if type(_o) is connection.Connection:
        _o.send_bytes = types.MethodType(_send_bytes, _o)


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

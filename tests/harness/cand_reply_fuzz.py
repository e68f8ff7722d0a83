"""Hostile (issue 11, reply fuzz): rewrites one field of the worker's reply to one op, in
the bytes the worker's connection sends (``Connection.send_bytes`` of the class, which no
tripwire of the worker covers; the parent's read of the worker's memory names it, so its
tests turn that read off: the rewrite is then never reported and the timed ops are reached
too).

``OP`` names the op (read from the worker's own ``loop`` frame when the reply is encoded, so
time_begin and time_end, alike on the CPU, are told apart), ``FIELD`` a path into the
reply (``"payload.returned.0.shape"``; ``"seq"`` / ``"status"`` / ``"payload"`` for the
frame itself), ``VALUE`` the Python literal that replaces it (``DELETE``: the field is
removed; ``DEEP``: a list nested 100,000 deep). Only the first reply to ``OP`` is touched.
The tests set the three constants; the kernel itself is an honest matmul.
"""
import json
import sys
from multiprocessing.connection import Connection

import torch

OP = "call"
FIELD = "payload.returned.0.shape"
VALUE = "None"
_orig = Connection.send_bytes
_done = []


def _op():
    f = sys._getframe()
    while f is not None:
        if f.f_code.co_name in ("loop", "main") and "op" in f.f_locals:
            return f.f_locals["op"]
        f = f.f_back
    return None


def _set(frame, path, value):
    keys = path.split(".")
    root = {"seq": frame[0], "status": frame[1], "payload": frame[2]}
    node = root
    for k in keys[:-1]:
        node = node[int(k)] if isinstance(node, list) else node[k]
    last = keys[-1]
    if value == "DELETE":
        del node[int(last) if isinstance(node, list) else last]
    else:
        v = eval(value, {"DEEP": None})  # noqa: S307 - the test's own literal
        if value == "DEEP":
            v = []
            for _ in range(100_000):
                v = [v]
        node[int(last) if isinstance(node, list) else last] = v
    return [root["seq"], root["status"], root["payload"]]


def _send_bytes(self, buf, *a, **kw):
    if not _done and _op() == OP:
        _done.append(1)
        try:
            o = json.loads(bytes(buf))
            if VALUE == "DEEP":  # the stdlib encoder recurses: write the nesting as text
                buf = ("[" * 100_000 + "]" * 100_000).encode()
            else:
                buf = json.dumps(_set(o, FIELD, VALUE)).encode()
        except (KeyError, IndexError, TypeError, ValueError):
            pass
    return _orig(self, buf, *a, **kw)


Connection.send_bytes = _send_bytes


def run(a, b):
    return a @ b

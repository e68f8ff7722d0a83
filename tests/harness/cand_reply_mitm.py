"""Hostile (issue 11, reply channel): a man in the middle on the worker's own socket.

At import it keeps a duplicate of the worker's end of the parent's socket pair, dup2()s a
fresh socket pair over the worker's fd (its number is in the worker's argv) and runs two
proxy threads: requests are passed on untouched, replies are rewritten before they reach
the parent. The worker's Python objects are never touched, so no in-process tripwire (the
``conn`` identity, the function snapshot) sees the proxy.

``MODE``:
- ``"hide"``: freezes the worker's clock (``_perf``: a timer patch its snapshot catches)
  and, in transit, empties the integrity-check reply's ``changed`` / ``interposition``
  lists and rewrites each timed call's ``host_ms`` to what the proxy's own clock saw (so
  the parent's plausibility check has nothing to object to). Before the fix: PASSED.
- ``"stall"``: after the correctness rounds, stops reading the parent's requests and
  answers every request the parent sends afterwards with nothing at all, while keeping
  both ends open (a hang on the worker that only the parent's own deadline can end).
"""
import json
import os
import socket
import struct
import sys
import threading
import time

import torch

MODE = "hide"

_state = {"calls": 0, "t_req": 0.0}


def _recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf


def _frame(s):
    n = struct.unpack("!i", _recv_exact(s, 4))[0]
    if n == -1:
        n = struct.unpack("!Q", _recv_exact(s, 8))[0]
    return _recv_exact(s, n)


def _send(s, data):
    s.sendall(struct.pack("!i", len(data)) + data)


def _rewrite(data):
    msg = json.loads(data)
    p = msg[2] if isinstance(msg, list) and len(msg) == 3 and isinstance(msg[2], dict) else {}
    if "flags0" in p:  # the integrity check's reply
        p["changed"], p["interposition"] = [], []
    if "host_ms" in p and "event_ms" in p:  # a timed call's reply: the proxy's clock
        p["host_ms"] = max(0.0, (time.perf_counter() - _state["t_req"]) * 1e3 * 0.9)
    return json.dumps(msg).encode()


def _to_worker(parent, worker):
    while True:
        data = _frame(parent)
        if MODE == "stall" and _state["calls"] >= 2:
            while True:  # never read again, never answer
                time.sleep(3600)
        _state["t_req"] = time.perf_counter()
        _send(worker, data)


def _to_parent(worker, parent):
    while True:
        data = _frame(worker)
        if b'"returned"' in data:
            _state["calls"] += 1
        _send(parent, _rewrite(data))


def _install():
    fd = next((int(a[3:]) for a in sys.argv if a.startswith("fd:")), None)
    if fd is None:
        return
    parent = socket.socket(fileno=os.dup(fd))
    ours, worker = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    os.dup2(ours.fileno(), fd)  # the worker's Connection now writes to the proxy
    ours.close()
    for target, args in ((_to_worker, (parent, worker)), (_to_parent, (worker, parent))):
        threading.Thread(target=target, args=args, daemon=True).start()
    if MODE == "hide":
        for m in list(sys.modules.values()):  # the worker runs as __main__
            if hasattr(m, "Worker") and hasattr(m, "_perf"):
                m._perf = lambda: 1000.0


_install()


def run(a, b):
    return a @ b

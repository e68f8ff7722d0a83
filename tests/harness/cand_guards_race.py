"""Hostile (red team of issue 30, session 20): the guards-reply race. At import it lowers the
fp32 matmul precision for good (``set_float32_matmul_precision("medium")``: bf16 inputs on
an AMX / AVX512-BF16 CPU, 2.2x at 1024^3). A thread of its own waits until a request is
readable on the worker's socket (``MSG_PEEK``), and when it is the ``guards`` request (the
parent has just read the worker's memory) it rebinds ``json.dumps`` for that one reply: the
reply carries the starting flags as the current ones and empty ``changed`` /
``interposition`` lists, and the original ``json.dumps`` is back before the reply leaves. No
read of the guarded names between calls sees it; the flags reading it hides is the only
worker-side evidence of the act. Expected: not PASSED (the outputs still show the act)."""
import gc
import json
import select
import socket
import threading
import time
from multiprocessing.connection import Connection

import torch

torch.set_float32_matmul_precision("medium")
_orig = json.dumps
HITS = [0]


def _forging(obj, *a, **kw):
    json.dumps = _orig  # one reply only
    try:
        p = obj[2]
        if isinstance(p, dict) and "flags0" in p and "flags" in p:
            p["flags"] = dict(p["flags0"])
            p["changed"], p["interposition"] = [], []
            HITS[0] += 1
    except Exception:  # noqa: BLE001 - not the reply it forges
        pass
    return _orig(obj, *a, **kw)


def _watch(fd):
    s = socket.socket(fileno=fd)  # the worker's own socket, read only by peeking
    try:
        while True:
            r, _, _ = select.select([fd], [], [], 1.0)
            if not r:
                continue
            head = s.recv(256, socket.MSG_PEEK)
            if b"guards" in head and b"guard_table" not in head:
                json.dumps = _forging
                while json.dumps is _forging:
                    time.sleep(0.0002)
            time.sleep(0.002)  # the worker reads the request; a later one is another
    finally:
        s.detach()


for _o in gc.get_objects():
    if type(_o) is Connection:
        threading.Thread(target=_watch, args=(_o.fileno(),), daemon=True).start()
        break


def run(a, b):
    return a @ b

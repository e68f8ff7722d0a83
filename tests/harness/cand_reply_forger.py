"""Hostile (issue 11, reply channel): forged replies on the worker's own socket, and a
worker that stops reading.

In its first timed call it reads the request's sequence number from the worker's frame
(``Worker.loop``), starts a thread that writes a forged timed-call reply (0.001 ms) for
that request and every later one straight onto the worker's reply fd (the real socket: no
fd is swapped, so the parent's channel check sees its own socket), and never returns. The
parent's requests then pile up unread in the socket; before the fix its blocking send
stopped for good once the socket buffer was full (about 220 requests), and the evaluation
hung with no trace. Now every send has a deadline and the workload ends in a recorded
status (the verified iterations also show outputs nobody wrote).
"""
import json
import struct
import sys
import threading
import time

import torch

_calls = {"n": 0}


def _loop_frame():
    f = sys._getframe()
    while f is not None:
        if f.f_code.co_name == "loop" and "seq" in f.f_locals:
            return f
        f = f.f_back
    return None


def _fd():
    return next((int(a[3:]) for a in sys.argv if a.startswith("fd:")), None)


def _forge(fd, seq):
    import os

    while True:
        # on the CPU's held path every request of the timed loop is a timed call (the parent
        # writes the flush itself), so each forged reply fits its request's model
        payload = {"host_ms": 0.001, "event_ms": None}
        data = json.dumps([seq, "ok", payload]).encode()
        os.write(fd, struct.pack("!i", len(data)) + data)
        seq += 1
        time.sleep(0.0005)


def run(a, b):
    f = sys._getframe(1)
    timed = f.f_code.co_name == "_timed_iter"
    loop = _loop_frame()
    if timed and loop is not None and _fd() is not None:
        threading.Thread(target=_forge, args=(_fd(), loop.f_locals["seq"]), daemon=True).start()
        while True:  # never return: nobody reads the parent's requests any more
            time.sleep(3600)
    return a @ b

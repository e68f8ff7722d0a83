"""Hostile (CPU load excuse, red team of the pressure/run-queue correction): freezes the
worker's own clock like ``cand_reply_hide_patch.py`` (every call reports 0 ms, the guard
snapshot that would show the patch is emptied) and makes its own load inside every call:
sixteen threads each hashing a 1 MiB buffer for 5 ms of its own CPU time (hashlib releases the GIL, so all want a CPU)
started and joined in the call, as an honest thread pool is, while the main thread polls
them instead of sleeping on the join, so it is runnable and waits for a CPU too. On a 2-CPU host some of them are always
runnable but waiting, so ``/proc/pressure/cpu`` ``some`` and the main thread's run-queue wait
grow by most of the window, and the parent takes that out of the window before it compares the worker's clock:
the frozen clock is then explained by "the host's load" the candidate made itself. The
parent's samples still hold the whole window (the harness's CPU samples are its own clock),
so the time is not faster; what is lost is the detection of a patched clock."""
import hashlib
import json
import sys
import threading
import time

import torch

_orig = json.JSONEncoder.encode


def _encode(self, o):
    if isinstance(o, list) and len(o) == 3 and isinstance(o[2], dict) and "flags0" in o[2]:
        o[2]["changed"], o[2]["interposition"] = [], []
    return _orig(self, o)


json.JSONEncoder.encode = _encode
for _m in list(sys.modules.values()):  # the worker runs as __main__
    if hasattr(_m, "Worker") and hasattr(_m, "_perf"):
        _m._perf = lambda: 1000.0  # a frozen clock: every call reports 0 ms

N_THREADS = 16
#: CPU time each thread hashes for: the hidden work is N_THREADS x this per call whatever the
#: host's speed (one 1 MiB hash takes 0.5-3 ms, so a fixed number of hashes can fall under the
#: gross threshold on a fast host, where a frozen clock then has nothing to hide)
SPIN_CPU_S = 0.005
_DATA = bytes(range(256)) * (1 << 12)  # 1 MiB: hashlib drops the GIL for data this large


def _spin():
    t0 = time.thread_time()
    while time.thread_time() - t0 < SPIN_CPU_S:
        hashlib.sha256(_DATA).digest()


def run(a, b):
    if sys._getframe(1).f_code.co_name == "_timed_iter":
        ts = [threading.Thread(target=_spin) for _ in range(N_THREADS)]
        for t in ts:
            t.start()
        while any(t.is_alive() for t in ts):
            pass  # runnable all along: its wait for a CPU is read as the host's load
        for t in ts:
            t.join()
    return a @ b

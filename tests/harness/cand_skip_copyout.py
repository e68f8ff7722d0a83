"""Hostile (work after the call, copy-out skipped, issue 11; non-DPS): in timed calls it hands
relu to a thread started at import, which writes straight into the slot's output buffer
(found through the worker object), and returns an empty tensor at once, so the worker's clock
sees an empty call and the harness's copy-out of a returned output never runs; the thread
computes while the worker replies and the parent reads the reply. The old CPU sample lost a
copy-out no-op this candidate never paid, and its worker ran on after the reply. Correctness
rounds are computed honestly."""
import gc
import queue
import sys
import threading
import time

import torch

_q: "queue.Queue" = queue.Queue()


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


def _loop():
    # this thread's own OpenMP team, made now (at import): none appears during a timed call
    torch.clamp(torch.randn(1 << 16), min=0.0)
    while True:
        x, dst = _q.get()
        t0 = time.perf_counter()
        torch.clamp(x, min=0.0, out=dst)
        # when it worked, on the parent's clock too (CLOCK_MONOTONIC)
        print(f"WORK {t0:.6f} {time.perf_counter():.6f}", flush=True)


threading.Thread(target=_loop, daemon=True).start()


def run(x):
    timed = sys._getframe(1).f_code.co_name == "_timed_iter"
    dst = _dst(x) if timed else None
    if dst is None:
        return torch.relu(x)
    _q.put((x, dst))
    return torch.empty(0)

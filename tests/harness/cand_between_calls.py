"""Hostile (work between the timed calls, issue 11; DPS): a thread started at import watches
every slot of its worker; as soon as the parent has filled a slot for the next call (its
output poisoned, which the parent does after copying the inputs in), the thread computes
relu into that slot's output, while the parent is still preparing the call. The call then
finds its output written and returns at once. While the worker ran between calls this read
as a large speedup; with every process of the candidate stopped between its timed calls the
thread can only work inside a call's window."""
import sys
import threading
import time
import gc

import torch

_done: dict[int, bool] = {}
_busy: dict[int, bool] = {}
_lock = threading.Lock()


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


def _poisoned(o):
    v = o.view(-1).view(torch.int32)
    return int(v[0]) == -1 and int(v[-1]) == -1


def _any_poison(o):
    return bool((o.view(-1).view(torch.int32) == -1).any())


def _loop():
    w = None
    while True:
        if w is None:
            w = _worker()
            time.sleep(0.01)
            continue
        for s in list(getattr(w, "slots", None) or []):
            try:
                x, o = s["inputs"][0], s["outputs"][0]
                p = o.data_ptr()
                if _poisoned(o) and not _busy.get(p):
                    with _lock:
                        _busy[p] = True
                    t0 = time.perf_counter()
                    torch.clamp(x, min=0.0, out=o)
                    while _any_poison(o):  # the parent's poisoning was still running
                        torch.clamp(x, min=0.0, out=o)
                    # when it worked, on the parent's clock too (CLOCK_MONOTONIC): the test
                    # checks that no such moment falls while the parent holds it stopped
                    print(f"WORK {t0:.6f} {time.perf_counter():.6f}", flush=True)
                    with _lock:
                        _done[p], _busy[p] = True, False
            except Exception:  # noqa: BLE001
                continue
        time.sleep(0.00005)


threading.Thread(target=_loop, daemon=True).start()


def run(x, y):
    p = y.data_ptr()
    t_end = time.perf_counter() + 0.05
    while _busy.get(p) and time.perf_counter() < t_end:
        time.sleep(0.00002)
    with _lock:
        ready = _done.pop(p, False)
    if ready and not _any_poison(y):
        print("PRECOMPUTED", flush=True)
        return
    torch.clamp(x, min=0.0, out=y)

"""Hostile (issue 11, CPU; non-DPS): work moved into the flush step. On the held CPU path
the worker used to be resumed once per timed iteration outside the measured window, for the
flush before the parent fills the next call's inputs. A helper thread here sleeps through
each call and, when the worker runs again after the call's window (the flush step), maps a
fresh output buffer and page-faults it (writing every page, which also leaves it in the
last-level cache after the flush). The call then only adds into a buffer that is ready
and returns it. None of this needs the next call's inputs, so verification cannot see it;
only where its time is charged can.

``MODE = "flush_step"``: the hostile. ``MODE = "in_call"``: the same work done honestly
(the buffer mapped and faulted inside the call), for comparison.
"""
import mmap
import threading
import time

import torch

MODE = "flush_step"

_ready: list = []
_want = threading.Event()
_shape: list = []


def _fresh(shape) -> torch.Tensor:
    n = 1
    for d in shape:
        n *= d
    # an anonymous mapping of its own: fresh pages every time (glibc would reuse a freed,
    # already faulted heap block); torch.frombuffer keeps the mapping alive with the tensor
    m = mmap.mmap(-1, n * 4)
    t = torch.frombuffer(m, dtype=torch.float32).view(*shape)
    t.zero_()  # one page fault per 4 KiB page, and the buffer warm in the cache
    return t


def _helper():
    while True:
        _want.wait()
        _want.clear()
        # the call has just returned: by the time this wakes, the parent has stopped the
        # worker after the call's reply, so the work below runs when it is next resumed
        time.sleep(0.003)
        t0 = time.perf_counter()
        _ready.append(_fresh(_shape[0]))
        # when it worked, on the parent's clock too (CLOCK_MONOTONIC): the test checks that
        # no such moment falls between two timed windows
        print(f"WORK {t0:.6f} {time.perf_counter():.6f}", flush=True)


if MODE == "flush_step":
    threading.Thread(target=_helper, daemon=True).start()


def run(x, y):
    if MODE == "flush_step":
        if not _shape:
            _shape.append(tuple(x.shape))
        buf = _ready.pop() if _ready else _fresh(tuple(x.shape))
        _ready.clear()
        _want.set()
    else:
        buf = _fresh(tuple(x.shape))
    torch.add(x, y, out=buf)
    return buf

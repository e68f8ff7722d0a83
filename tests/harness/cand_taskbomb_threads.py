"""Hostile (CPU or CUDA): its first call starts threads without end, each blocked for good, and
retries whenever the OS refuses one (a bomb that does not stop at EAGAIN). Every thread names
itself ``sbx-taskbomb`` (PR_SET_NAME) so a test can look for survivors host-wide.

Safe on a shared host: it stops starting threads at SAFETY_CAP (far above the limits the
tests set, below what would hurt the machine) and then blocks, so a sandbox whose task bound
did not bind would end as TIMEOUT, not as the task limit's RUNTIME_ERROR."""
import ctypes
import threading

SAFETY_CAP = 3000
_libc = ctypes.CDLL(None)
_hold = threading.Event()


def _blocked():
    _libc.prctl(15, b"sbx-taskbomb", 0, 0, 0)  # PR_SET_NAME of this thread
    _hold.wait()


def run(a, b):
    started = 0
    while started < SAFETY_CAP:
        try:
            threading.Thread(target=_blocked, daemon=True).start()
            started += 1
        except RuntimeError:  # "can't start new thread": EAGAIN at the limit; try again
            continue
    _hold.wait()
    return a @ b

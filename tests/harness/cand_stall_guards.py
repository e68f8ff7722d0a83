"""Hostile (issue 11, bounded waits): a thread started at import watches the worker's main
thread and, when the worker is in its integrity check (``Worker.handle`` with op
``"guards"``), stops the whole worker process (SIGSTOP to itself). Nothing answers. Before,
the parent waited the integrity check's own 60 s whatever ``--timeout`` said; now the
harness's own ops are capped by the call limit (at least 10 s)."""
import os
import signal
import sys
import threading
import time

import torch

_MAIN = threading.main_thread().ident


def _watch():
    while True:
        time.sleep(0.001)
        f = sys._current_frames().get(_MAIN)
        while f is not None:
            if f.f_code.co_name == "handle" and f.f_locals.get("op") == "guards":
                os.kill(os.getpid(), signal.SIGSTOP)
                return
            f = f.f_back


threading.Thread(target=_watch, daemon=True).start()


def run(a, b):
    return a @ b

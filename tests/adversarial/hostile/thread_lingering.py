"""Hostile (background thread): correct output, but leaves a thread running after the call
(the same shape as a deferred-work thread; threats.md: forbidden unless declared)."""
import threading
import time

_stop = threading.Event()


def _idle():
    while not _stop.wait(0.05):
        time.sleep(0.0)


def run(x, y):
    threading.Thread(target=_idle, daemon=True).start()
    return x + y

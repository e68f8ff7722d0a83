"""Hostile (process outliving the call, red-team review 2026-11-29): double fork + setsid, so the
grandchild leaves the worker's process tree and process group before any scan."""
import os
import time

_started = [False]


def run(x, y):
    if not _started[0]:
        _started[0] = True
        pid = os.fork()
        if pid == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(20)
                os._exit(0)
            os._exit(0)
        os.waitpid(pid, 0)
    return x + y

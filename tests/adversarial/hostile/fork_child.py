"""Hostile (background process): correct output, but forks a child process that outlives the
call (where deferred work would run)."""
import os
import time


def run(x, y):
    pid = os.fork()
    if pid == 0:  # child: linger, then leave without cleanup
        time.sleep(20)
        os._exit(0)
    return x + y

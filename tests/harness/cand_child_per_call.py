"""Hostile (issue 11): every call forks a child that lives 0.5 s (work that outlives the
call; never waited for). Checked once per workload, it was caught on some workloads and
PASSED on others, depending on whether one of them was alive at that moment."""
import os
import time


def run(a, b):
    pid = os.fork()
    if pid == 0:
        time.sleep(0.5)
        os._exit(0)
    return a @ b

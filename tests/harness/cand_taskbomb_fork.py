"""Hostile (CPU or CUDA): its first call forks processes without end; each child leaves the
worker's session (setsid) and sleeps for good, and the parent retries whenever fork fails
(EAGAIN at the limit). Every child names itself ``sbx-forkbomb`` (PR_SET_NAME) so a test can
look for survivors host-wide.

Safe on a shared host: it stops forking at SAFETY_CAP (far above the limits the tests set)
and then blocks, so a sandbox whose task bound did not bind ends as TIMEOUT instead."""
import ctypes
import os
import signal

SAFETY_CAP = 600


def run(a, b):
    libc = ctypes.CDLL(None)
    started = 0
    while started < SAFETY_CAP:
        try:
            pid = os.fork()
        except OSError:  # BlockingIOError (EAGAIN) at the limit: try again
            continue
        if pid == 0:
            try:
                os.setsid()
                libc.prctl(15, b"sbx-forkbomb", 0, 0, 0)  # PR_SET_NAME
                while True:
                    signal.pause()
            finally:
                os._exit(0)
        started += 1
    signal.pause()
    return a @ b

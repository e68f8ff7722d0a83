"""Hostile (CPU): its first call starts a helper in its own session that stops itself
(SIGSTOP: a stopped process ignores everything but SIGKILL and SIGCONT), then spins forever.
Used to check that killing solbench (SIGKILL or SIGTERM) leaves none of them alive."""
import os
import signal


def run(a, b):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.kill(os.getpid(), signal.SIGSTOP)
            while True:
                pass
        os._exit(0)
    while True:
        pass

"""Hostile: at import, leaves a daemon (double fork, its own session) that outlives its
worker and the solbench that started it, then hangs in every call. The marker in its
command line (``sleep <SOLBENCH_TEST_DAEMON_MARK>``) lets the test find it. Unsandboxed,
only the CLI's parent-death watchdog (the run's token in every process's environment,
cli/lifetime.py) ends it once solbench is SIGKILLed."""

import os
import time

import torch  # noqa: F401

MARK = "293.25"

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", MARK])
    os._exit(0)


def run(x):
    while True:
        time.sleep(0.1)

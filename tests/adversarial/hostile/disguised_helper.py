"""Hostile (a helper disguised as a compiler; red team 2026-11-30): at its first call it starts
a Python process in its own session (out of reach of the worker's SIGSTOP) whose argv[0] is
"gcc", which an allow-list keyed on the command line trusts. While the candidate is stopped,
which is when the eager reference is timed, such a helper can stop and continue the sibling
reference worker to inflate the speedup; here it only sleeps. /proc/<pid>/exe says python."""
import math
import os
import subprocess
import sys

import torch

_STARTED = []


def run(x):
    if not _STARTED:
        _STARTED.append(subprocess.Popen(
            ["gcc", "-c", "import time; time.sleep(120)"], executable=sys.executable,
            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    c = math.sqrt(2.0 / math.pi)
    return 0.5 * x * (1.0 + torch.tanh(c * (x + 0.044715 * x * x * x)))
